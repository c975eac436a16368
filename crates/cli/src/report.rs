//! Statistics as people and programs read them: a table on a terminal, JSON lines with
//! `--json`, and the final summary.

use corecap_engine::capture::{GroupSummary, Summary, WorkerInfo};
use corecap_engine::stats::ledger::Snapshot;
use serde_json::{json, Value};

/// Seconds between statistics lines (`capture` and `serve`): `--stats-interval` (0 or
/// less: none, only the summary), else 1 s on a terminal (unless quiet) or with `--json`.
pub(crate) fn stats_interval(
    given: Option<f64>,
    json: bool,
    quiet: bool,
) -> anyhow::Result<Option<std::time::Duration>> {
    use std::io::IsTerminal;
    Ok(match given {
        // 0 (or less) turns the interval lines off.
        Some(s) if s > 0.0 || s.is_nan() => {
            Some(corecap_engine::limits::seconds(s, "--stats-interval")?)
        }
        Some(_) => None,
        None if json || (std::io::stderr().is_terminal() && !quiet) => {
            Some(std::time::Duration::from_secs(1))
        }
        None => None,
    })
}

/// Rates between two snapshots `dt` seconds apart.
fn rates(now: &Snapshot, before: &Snapshot, dt: f64) -> (f64, f64) {
    if dt <= 0.0 {
        return (0.0, 0.0);
    }
    let p = now.packets.saturating_sub(before.packets) as f64 / dt;
    let b = now.bytes.saturating_sub(before.bytes) as f64 * 8.0 / dt;
    (p, b)
}

fn drops(s: &Snapshot) -> Value {
    json!({"kernel": s.kernel_drops, "app": s.app_drops, "disk": s.disk_drops, "stop": s.stop_drops})
}

/// What the per-flow cutoff left out: counted, not written.
fn cut(s: &Snapshot) -> Value {
    json!({"packets": s.cut_packets, "bytes": s.cut_bytes, "evictions": s.cut_evictions})
}

fn worker_json(info: &WorkerInfo, s: &Snapshot) -> Value {
    json!({
        "id": info.id, "cpu": info.cpu, "input": info.input, "queue": info.queue,
        "packets": s.packets, "bytes": s.bytes, "kernel_packets": s.kernel_packets,
        "drops": drops(s), "cut": cut(s), "freezes": s.freezes, "filtered": s.filtered,
    })
}

fn total(snaps: &[Snapshot]) -> Snapshot {
    let mut t = Snapshot::default();
    for s in snaps {
        t += *s;
    }
    t
}

/// One per-interval JSON line.
pub(crate) fn interval_json(
    t: f64,
    infos: &[WorkerInfo],
    now: &[Snapshot],
    before: &[Snapshot],
    dt: f64,
) -> String {
    let workers: Vec<Value> = infos
        .iter()
        .zip(now.iter().zip(before))
        .map(|(i, (n, b))| {
            let (pps, bps) = rates(n, b, dt);
            let mut v = worker_json(i, n);
            v["pps"] = json!(pps.round());
            v["bps"] = json!(bps.round());
            v
        })
        .collect();
    let (tn, tb) = (total(now), total(before));
    let (pps, bps) = rates(&tn, &tb, dt);
    json!({
        "type": "stats", "t": (t * 1000.0).round() / 1000.0,
        "packets": tn.packets, "bytes": tn.bytes, "pps": pps.round(), "bps": bps.round(),
        "kernel_packets": tn.kernel_packets, "drops": drops(&tn), "cut": cut(&tn), "freezes": tn.freezes,
        "workers": workers,
    })
    .to_string()
}

/// `1.2k`, `3.40M`: a rate for people.
pub(crate) fn human(v: f64) -> String {
    match v {
        v if v >= 1e9 => format!("{:.2}G", v / 1e9),
        v if v >= 1e6 => format!("{:.2}M", v / 1e6),
        v if v >= 1e3 => format!("{:.1}k", v / 1e3),
        v => format!("{v:.0}"),
    }
}

/// The per-interval table.
pub(crate) fn interval_table(
    t: f64,
    infos: &[WorkerInfo],
    now: &[Snapshot],
    before: &[Snapshot],
    dt: f64,
) -> String {
    let mut out = format!(
        "[{t:7.1}s] {:<6} {:>4} {:>10} {:>12} {:>9} {:>10} {:>10} {:>8} {:>8} {:>8}\n",
        "worker",
        "cpu",
        "packets",
        "bytes",
        "pps",
        "bps",
        "kdrops",
        "freezes",
        "appdrop",
        "diskdrop"
    );
    let mut row = |name: &str, cpu: String, n: &Snapshot, b: &Snapshot| {
        let (pps, bps) = rates(n, b, dt);
        out.push_str(&format!(
            "          {name:<6} {cpu:>4} {:>10} {:>12} {:>9} {:>10} {:>10} {:>8} {:>8} {:>8}\n",
            n.packets,
            n.bytes,
            human(pps),
            human(bps),
            n.kernel_drops,
            n.freezes,
            n.app_drops,
            n.disk_drops
        ));
    };
    for (i, (n, b)) in infos.iter().zip(now.iter().zip(before)) {
        row(
            &format!("w{}", i.id),
            i.cpu.map_or("-".into(), |c| c.to_string()),
            n,
            b,
        );
    }
    row("total", String::new(), &total(now), &total(before));
    out
}

/// The summary as one JSON line.
pub(crate) fn summary_json(s: &Summary) -> String {
    let t = &s.total;
    let workers: Vec<Value> = s.workers.iter().map(|(i, w)| worker_json(i, w)).collect();
    json!({
        "type": "summary", "packets": t.packets, "bytes": t.bytes, "kernel_packets": t.kernel_packets,
        "drops": drops(t), "cut": cut(t), "freezes": t.freezes, "filtered": t.filtered, "balanced": t.balanced(),
        "seconds": (s.seconds * 1000.0).round() / 1000.0, "files": s.files, "errors": s.errors,
        "workers": workers, "groups": s.groups,
        "retention": s.retention.map(|(f, b)| json!({"deleted_files": f, "deleted_bytes": b})),
        "recovered_files": s.recovered.len(), "recovered": s.recovered, "notes": s.notes,
    })
    .to_string()
}

/// The summary as a table.
pub(crate) fn summary_table(s: &Summary) -> String {
    let mut out = String::from("corecap summary\n");
    out.push_str(&worker_rows(s));
    out.push_str(&accounting(s));
    for g in &s.groups {
        out.push_str(&group_rows(g));
    }
    for f in &s.files {
        out.push_str(&format!("  wrote {}\n", f.display()));
    }
    if let Some((f, b)) = s.retention {
        out.push_str(&format!("  --retain deleted {f} old files ({b} bytes)\n"));
    }
    for r in &s.recovered {
        out.push_str(&format!("  {}\n", r.describe()));
    }
    out
}

/// The summary's header, a row per worker and the total row.
fn worker_rows(s: &Summary) -> String {
    let mut out = format!(
        "  {:<6} {:>4} {:<10} {:>5} {:>11} {:>13} {:>11} {:>9} {:>8} {:>8} {:>8} {:>8}\n",
        "worker",
        "cpu",
        "input",
        "queue",
        "packets",
        "bytes",
        "kernel",
        "kdrops",
        "freezes",
        "appdrop",
        "diskdrop",
        "stopped"
    );
    // With the per-flow cutoff, a last column: each worker's packets cut.
    let cut = s.total.cut_packets > 0;
    if cut {
        out.insert_str(out.len() - 1, &format!(" {:>10}", "cut"));
    }
    let row = |name: String, cpu: String, input: &str, q: String, w: &Snapshot| {
        let mut r = format!(
            "  {name:<6} {cpu:>4} {input:<10} {q:>5} {:>11} {:>13} {:>11} {:>9} {:>8} {:>8} {:>8} {:>8}\n",
            w.packets, w.bytes, w.kernel_packets, w.kernel_drops, w.freezes, w.app_drops, w.disk_drops, w.stop_drops
        );
        if cut {
            r.insert_str(r.len() - 1, &format!(" {:>10}", w.cut_packets));
        }
        r
    };
    for (i, w) in &s.workers {
        out.push_str(&row(
            format!("w{}", i.id),
            i.cpu.map_or("-".into(), |c| c.to_string()),
            &i.input,
            i.queue.map_or("-".into(), |q| q.to_string()),
            w,
        ));
    }
    out.push_str(&row(
        "total".into(),
        String::new(),
        "",
        String::new(),
        &s.total,
    ));
    out
}

/// Delivered of counted, and whether the accounting is exact; packets the filter rejected.
fn accounting(s: &Summary) -> String {
    let t = &s.total;
    let pct = if t.kernel_packets > 0 {
        100.0 * t.packets as f64 / t.kernel_packets as f64
    } else {
        100.0
    };
    let mut out = format!(
        "  {} packets delivered of {} counted ({pct:.3}%) in {:.2}s; accounting {}\n",
        t.packets,
        t.kernel_packets,
        s.seconds,
        if t.balanced() { "exact" } else { "UNBALANCED" }
    );
    if t.filtered > 0 {
        out.push_str(&format!(
            "  {} packets rejected by the filter\n",
            t.filtered
        ));
    }
    if t.cut_packets > 0 || t.cut_evictions > 0 {
        out.push_str(&cut_line(t));
    }
    out
}

/// The per-flow cutoff's line: what it left out in total (the table above has it per
/// worker), and the flows its tables forgot early.
fn cut_line(t: &Snapshot) -> String {
    format!(
        "  {} packets ({} bytes) cut by the per-flow cutoff: counted, not written; {} flows evicted early from the cutoff's tables\n",
        t.cut_packets, t.cut_bytes, t.cut_evictions
    )
}

/// A consumer group: what its filter dropped, then each member with its flow records and
/// IPFIX export.
fn group_rows(g: &GroupSummary) -> String {
    let mut out = format!(
        "  group {} ({:?}): {} filtered out\n",
        g.id, g.kind, g.filtered
    );
    for m in &g.members {
        out.push_str(&format!(
            "    member {} cpu {}: {} steered, {} delivered, {} stage full, {} app drops, {} disk drops\n",
            m.id,
            m.cpu.map_or("-".into(), |c| c.to_string()),
            m.steered,
            m.outcome.delivered,
            m.stage_full,
            m.outcome.app_drops,
            m.outcome.disk_drops
        ));
        if m.outcome.cut_packets > 0 {
            out.push_str(&format!(
                "      cut by the per-flow cutoff: {} packets ({} bytes), counted, not written\n",
                m.outcome.cut_packets, m.outcome.cut_bytes
            ));
        }
        let Some(f) = &m.outcome.flows else { continue };
        out.push_str(&format!(
            "      flows: {} records, {} evicted, {} not IP\n",
            f.records, f.evicted, f.non_ip
        ));
        if let (Some(d), Some(x)) = (f.observation_domain, &f.ipfix) {
            out.push_str(&format!(
                "      IPFIX observation domain {d}: {} messages, {} records, {} send errors ({} records lost), {} export queue full{}\n",
                x.messages,
                x.records,
                x.send_errors,
                x.records_lost,
                x.export_full,
                f.ipfix_error
                    .as_ref()
                    .map_or(String::new(), |e| format!("; last error: {e}"))
            ));
        }
    }
    out
}
