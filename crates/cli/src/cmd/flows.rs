//! `corecap flows PATH... [--from T] [--to T] [selectors] [FILTER]`: the connections the
//! recorded files' sessions keep, as a table, JSON lines (`--json`, Elastic Common Schema
//! names: see `corecap_store::read::flow_doc`) or CSV (`--csv`).

use std::io::{self, BufWriter, Write};

use anyhow::Result;
use corecap_store::read::flow_doc::FlowDoc;
use corecap_store::read::flows::{list, FlowSort, FlowSpec, FlowStats};

use super::query::{files_and_filter, folders_of, selectors, window};
use crate::config;
use crate::flow_args::{FlowsArgs, SortArg};

pub(crate) fn run(a: FlowsArgs) -> Result<i32> {
    let (from, to, _) = window(&a.window)?;
    let (files, skipped, filter) = files_and_filter(&a.args, &[], &a.filter)?;
    let kek = a.key_file.as_deref().map(config::key_file).transpose()?;
    let mut select = selectors(&a.select, a.host, a.port);
    select.filter = filter;
    let folders = folders_of(&a.args, &[]);
    let spec = FlowSpec {
        // The reach is told when a folder is given (see `query`).
        reach: !folders.is_empty(),
        folders,
        files,
        from,
        to,
        select,
        kek,
        sort: sort_of(a.sort),
        limit: a.limit,
    };
    let (flows, stats) = list(&spec)?;
    let docs: Vec<FlowDoc> = flows.iter().map(FlowDoc::of).collect();
    let written = {
        let mut out = BufWriter::new(io::stdout().lock());
        let r = if a.json {
            write_json(&mut out, &docs)
        } else if a.csv {
            write_csv(&mut out, &docs)
        } else {
            write_table(&mut out, &docs)
        };
        r.and_then(|()| out.flush())
    };
    match written {
        // Standard output closed (`| head`): the reader has what it wanted.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(0),
        Err(e) => return Err(anyhow::Error::new(e).context("writing the flows")),
        Ok(()) => {}
    }
    summary(&stats, skipped, docs.len());
    Ok(0)
}

fn sort_of(s: SortArg) -> FlowSort {
    match s {
        SortArg::First => FlowSort::First,
        SortArg::Last => FlowSort::Last,
        SortArg::Bytes => FlowSort::Bytes,
        SortArg::Packets => FlowSort::Packets,
    }
}

/// The notes and one line of figures, on stderr.
fn summary(stats: &FlowStats, skipped: u64, shown: usize) {
    for n in &stats.notes {
        eprintln!("corecap: note: {n}");
    }
    if skipped > 0 {
        eprintln!("corecap: note: skipped {skipped} files that are not captures");
    }
    let cut = if stats.truncated {
        format!(" (the first {shown}, by --limit)")
    } else {
        String::new()
    };
    eprintln!(
        "{} connections{cut} from the sessions of {} of {} files ({} outside the window)",
        stats.matched,
        stats.files_read + stats.files_scanned,
        stats.files,
        stats.files_pruned
    );
    if stats.files_scanned > 0 {
        eprintln!(
            "corecap: {} files had no sessions file that matches them: their connections \
             were read from their packets",
            stats.files_scanned
        );
    }
}

fn write_json(out: &mut impl Write, docs: &[FlowDoc]) -> io::Result<()> {
    for d in docs {
        serde_json::to_writer(&mut *out, d)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// The CSV columns: ECS names, flattened with dots.
const CSV_HEADER: &str = "event.start,event.duration,network.transport,source.ip,source.port,\
destination.ip,destination.port,source.packets,source.bytes,destination.packets,\
destination.bytes,network.community_id,corecap.tcp_flags,corecap.segments,\
dns.question.name,tls.client.server_name,http.request.method,url.domain,url.path";

fn write_csv(out: &mut impl Write, docs: &[FlowDoc]) -> io::Result<()> {
    writeln!(out, "{CSV_HEADER}")?;
    for d in docs {
        let port = |p: Option<u16>| p.map_or(String::new(), |p| p.to_string());
        let fields = [
            d.event.start.clone(),
            d.event.duration.to_string(),
            d.network.transport.clone(),
            d.source.ip.clone(),
            port(d.source.port),
            d.destination.ip.clone(),
            port(d.destination.port),
            d.source.packets.to_string(),
            d.source.bytes.to_string(),
            d.destination.packets.to_string(),
            d.destination.bytes.to_string(),
            d.network.community_id.clone(),
            d.corecap.tcp_flags.clone(),
            d.corecap.segments.to_string(),
            d.dns
                .as_ref()
                .map_or(String::new(), |x| x.question.name.clone()),
            d.tls
                .as_ref()
                .map_or(String::new(), |x| x.client.server_name.clone()),
            d.http
                .as_ref()
                .map_or(String::new(), |x| x.request.method.clone()),
            d.url.as_ref().map_or(String::new(), |x| x.domain.clone()),
            d.url.as_ref().map_or(String::new(), |x| x.path.clone()),
        ];
        let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
        writeln!(out, "{}", line.join(","))?;
    }
    Ok(())
}

/// A CSV field: quoted, with quotes doubled, when it holds a comma or a quote.
fn csv_field(f: &str) -> String {
    if f.contains([',', '"']) {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f.to_owned()
    }
}

fn endpoint(ip: &str, port: Option<u16>) -> String {
    match (ip.contains(':'), port) {
        (true, Some(p)) => format!("[{ip}]:{p}"),
        (false, Some(p)) => format!("{ip}:{p}"),
        (_, None) => ip.to_owned(),
    }
}

/// One line per connection: first time, duration, protocol, originator → responder,
/// packets and bytes each way, TCP flags seen (and `+` for a SYN start, `.` for a FIN or
/// RST end), the name. The address columns are as wide as their longest entry. When a
/// per-flow cutoff left part of some connection out of the files, a CUT column says how
/// many of its bytes (the packet and byte columns are what the files hold).
fn write_table(out: &mut impl Write, docs: &[FlowDoc]) -> io::Result<()> {
    let cut = |d: &FlowDoc| {
        d.corecap
            .bytes_seen
            .saturating_sub(d.source.bytes + d.destination.bytes)
    };
    let any_cut = docs.iter().any(|d| cut(d) > 0);
    let ends: Vec<(String, String)> = docs
        .iter()
        .map(|d| {
            (
                endpoint(&d.source.ip, d.source.port),
                endpoint(&d.destination.ip, d.destination.port),
            )
        })
        .collect();
    let wo = ends.iter().map(|e| e.0.len()).max().unwrap_or(0).max(10);
    let wr = ends.iter().map(|e| e.1.len()).max().unwrap_or(0).max(9);
    // The cut column, before the name, only when something was cut.
    let cut_col = |text: String| {
        if any_cut {
            format!("{text:>10} ")
        } else {
            String::new()
        }
    };
    writeln!(
        out,
        "{:<30} {:>10} {:<9} {:>wo$}    {:<wr$} {:>8} {:>10} {:>8} {:>10} {:<10} {}NAME",
        "FIRST (UTC)",
        "SECONDS",
        "PROTO",
        "ORIGINATOR",
        "RESPONDER",
        "PKTS>",
        "BYTES>",
        "<PKTS",
        "<BYTES",
        "FLAGS",
        cut_col("CUT BYTES".into())
    )?;
    for (d, (o, r)) in docs.iter().zip(&ends) {
        let mut flags = d.corecap.tcp_flags.clone();
        if d.corecap.began_syn {
            flags.insert(0, '+');
        }
        if d.corecap.ended_fin_rst {
            flags.push('.');
        }
        writeln!(
            out,
            "{:<30} {:>10.3} {:<9} {o:>wo$} -> {r:<wr$} {:>8} {:>10} {:>8} {:>10} {:<10} {}{}",
            d.event.start,
            d.event.duration as f64 / 1e9,
            d.network.transport,
            d.source.packets,
            d.source.bytes,
            d.destination.packets,
            d.destination.bytes,
            flags,
            cut_col(cut(d).to_string()),
            d.name_text()
        )?;
    }
    Ok(())
}
