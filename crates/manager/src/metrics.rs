//! `GET /metrics`: Prometheus text exposition of the daemon's captures, base captures and
//! their recording, responses and thread lag.

use std::collections::BTreeMap;
use std::fmt::{Display, Write};

use crate::api::{CaptureView, Drops, State};
use crate::stats::{BaseStats, RecordingStats};

/// Upper bounds (seconds) of the thread-lag histogram's buckets: 10 µs to 1 s.
const BUCKETS: [f64; 11] = [
    1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 1e-1, 5e-1, 1.0,
];

/// A cumulative histogram of thread lags.
#[derive(Debug, Default, Clone)]
pub struct LagHistogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl LagHistogram {
    /// Records one lag in seconds.
    pub fn observe(&mut self, s: f64) {
        for (c, b) in self.counts.iter_mut().zip(BUCKETS) {
            if s <= b {
                *c += 1;
            }
        }
        self.count += 1;
        self.sum += s;
    }
}

/// What the metrics are made of.
#[derive(Debug)]
pub struct Input<'a> {
    /// Every capture this run of the daemon started that it remembers.
    pub captures: &'a [CaptureView],
    /// Base captures: their workers' totals and their recording.
    pub bases: &'a [BaseStats],
    /// Responses by status.
    pub responses: &'a BTreeMap<u16, u64>,
    /// TLS connections closed in their handshake.
    pub handshakes_refused: u64,
    /// Thread lag by mode.
    pub lag: &'a BTreeMap<&'static str, LagHistogram>,
    /// Bytes in the spool.
    pub spool_bytes: u64,
    /// Spool quota.
    pub quota: Option<u64>,
    /// `--retain`: the budget, and the files and bytes it deleted.
    pub retention: Option<(u64, u64, u64)>,
    /// Spare sockets ready, per interface.
    pub spares: &'a [(String, usize)],
    /// Captures of earlier runs listed from the spool's catalog, by state.
    pub earlier: &'a BTreeMap<&'static str, u64>,
    /// Files a crash of the last daemon left, recovered at this start.
    pub recovered_files: u64,
}

/// Escapes a label value.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn head(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(o, "# HELP {name} {help}");
    let _ = writeln!(o, "# TYPE {name} {kind}");
}

/// Renders the metrics.
pub fn render(i: &Input<'_>) -> String {
    let mut o = String::new();
    captures(&mut o, i);
    lag(&mut o, i);
    bases(&mut o, i);
    recording(&mut o, i);
    spool(&mut o, i);
    responses(&mut o, i);
    o
}

/// One metric with one value, unlabelled.
fn scalar(o: &mut String, name: &str, kind: &str, help: &str, v: u64) {
    head(o, name, kind, help);
    let _ = writeln!(o, "{name} {v}");
}

/// One metric, one line per row: `name{LABELS} value`, where a row is the labels as
/// they are written (`id="c1",mode="spawn"`) and the value.
fn family<V: Display>(
    o: &mut String,
    (name, kind): (&str, &str),
    help: &str,
    rows: impl IntoIterator<Item = (String, V)>,
) {
    head(o, name, kind, help);
    for (labels, v) in rows {
        let _ = writeln!(o, "{name}{{{labels}}} {v}");
    }
}

/// One metric, one line per value of one label: `name{label="V"} n`.
fn by_label<V: Display>(
    o: &mut String,
    metric: (&str, &str),
    help: &str,
    label: &str,
    rows: impl IntoIterator<Item = (V, u64)>,
) {
    let rows = rows
        .into_iter()
        .map(|(v, n)| (format!("{label}=\"{v}\""), n));
    family(o, metric, help, rows);
}

/// The drop counters by place, in the order and with the names of the `at` label.
fn places(d: &Drops) -> [(&'static str, u64); 4] {
    [
        ("kernel", d.kernel),
        ("stage_full", d.stage_full),
        ("app", d.app),
        ("disk", d.disk),
    ]
}

/// Running captures, those of earlier runs and the files recovered at start, then each
/// capture's counters.
fn captures(o: &mut String, i: &Input<'_>) {
    by_label(
        o,
        ("corecap_captures_running", "gauge"),
        "Captures running now.",
        "mode",
        ["attach", "spawn"].map(|mode| {
            let n = i
                .captures
                .iter()
                .filter(|c| c.state == State::Running && c.mode.name() == mode)
                .count();
            (mode, n as u64)
        }),
    );
    by_label(
        o,
        ("corecap_captures_earlier", "gauge"),
        "Captures of earlier runs of the daemon listed from the spool's catalog, by state.",
        "state",
        i.earlier.iter().map(|(state, n)| (state, *n)),
    );
    scalar(
        o,
        "corecap_recovered_files",
        "gauge",
        "Files a crash left in the spool, recovered (cut to whole blocks, named, indexed) at this start.",
        i.recovered_files,
    );
    capture_counters(o, i);
}

/// Per capture: packets, bytes and drops by place.
fn capture_counters(o: &mut String, i: &Input<'_>) {
    family(
        o,
        ("corecap_capture_packets_total", "counter"),
        "Packets captured per capture.",
        i.captures.iter().map(|c| {
            let labels = format!(
                "id=\"{}\",mode=\"{}\",interface=\"{}\",state=\"{}\"",
                esc(&c.id),
                c.mode.name(),
                esc(&c.interface),
                c.state.name()
            );
            (labels, c.packets)
        }),
    );
    family(
        o,
        ("corecap_capture_bytes_total", "counter"),
        "Wire bytes captured per capture.",
        i.captures
            .iter()
            .map(|c| (format!("id=\"{}\"", esc(&c.id)), c.bytes)),
    );
    family(
        o,
        ("corecap_capture_drops_total", "counter"),
        "Packets lost per capture, by place.",
        i.captures.iter().flat_map(|c| {
            places(&c.drops).map(|(at, n)| (format!("id=\"{}\",at=\"{at}\"", esc(&c.id)), n))
        }),
    );
}

/// The labels of a capture's start: its id and mode.
fn id_mode(c: &CaptureView) -> String {
    format!("id=\"{}\",mode=\"{}\"", esc(&c.id), c.mode.name())
}

/// A capture's start: per capture its setup and its time to the first packet, and the
/// histogram of the latter by mode.
fn lag(o: &mut String, i: &Input<'_>) {
    family(
        o,
        ("corecap_capture_setup_seconds", "gauge"),
        "Setup: from the request to the capture being armed (in place to take packets).",
        i.captures.iter().map(|c| (id_mode(c), c.setup_us / 1e6)),
    );
    family(
        o,
        ("corecap_capture_lag_seconds", "gauge"),
        "Time from the request to the first captured packet: the setup, then the time armed waiting for traffic.",
        i.captures
            .iter()
            .filter_map(|c| Some((id_mode(c), c.lag_us? / 1e6))),
    );
    head(
        o,
        "corecap_thread_lag_seconds",
        "histogram",
        "Time from the request to the first captured packet (setup and wait for traffic) of every capture that captured one, by mode.",
    );
    for (mode, h) in i.lag {
        for (b, n) in BUCKETS.iter().zip(h.counts) {
            let _ = writeln!(
                o,
                "corecap_thread_lag_seconds_bucket{{mode=\"{mode}\",le=\"{b}\"}} {n}"
            );
        }
        let _ = writeln!(
            o,
            "corecap_thread_lag_seconds_bucket{{mode=\"{mode}\",le=\"+Inf\"}} {}",
            h.count
        );
        let _ = writeln!(
            o,
            "corecap_thread_lag_seconds_sum{{mode=\"{mode}\"}} {}",
            h.sum
        );
        let _ = writeln!(
            o,
            "corecap_thread_lag_seconds_count{{mode=\"{mode}\"}} {}",
            h.count
        );
    }
}

/// The base captures and the spare sockets, per interface.
fn bases(o: &mut String, i: &Input<'_>) {
    per_interface(
        o,
        ("corecap_base_packets_total", "counter"),
        "Packets the base capture's workers took, per interface.",
        "",
        i.bases.iter().map(|b| (&b.interface, b.packets)),
    );
    per_interface(
        o,
        ("corecap_base_drops_total", "counter"),
        "Packets the kernel dropped before the base capture's workers, per interface.",
        ",at=\"kernel\"",
        i.bases.iter().map(|b| (&b.interface, b.kernel_drops)),
    );
    per_interface(
        o,
        ("corecap_spare_sockets", "gauge"),
        "Sockets opened ahead of need for spawned captures, per interface.",
        "",
        i.spares.iter().map(|(iface, n)| (iface, *n as u64)),
    );
}

/// A counter of the recording: its name, its help line, and where it is read.
type RecordingCounter = (&'static str, &'static str, fn(&RecordingStats) -> u64);

/// The recording's counters of what it wrote, printed before its drops.
const WRITTEN: [RecordingCounter; 2] = [
    (
        "corecap_recording_packets_total",
        "Packets written to the recording (serve --record), per interface.",
        |r| r.packets,
    ),
    (
        "corecap_recording_bytes_total",
        "Wire bytes of the packets written to the recording, per interface.",
        |r| r.bytes,
    ),
];

/// The recording's counters of what the cutoff left out, what its session tables could
/// not keep, what it wrote out of order, and of its files.
const CUT_AND_FILES: [RecordingCounter; 6] = [
    (
        "corecap_recording_cut_packets_total",
        "Packets the per-flow cutoff left out of the recording (counted, not written), per interface.",
        |r| r.cut_packets,
    ),
    (
        "corecap_recording_cut_bytes_total",
        "Wire bytes of the packets the per-flow cutoff left out of the recording, per interface.",
        |r| r.cut_bytes,
    ),
    (
        "corecap_recording_cut_evictions_total",
        "Connections the per-flow cutoff's full table forgot before they were idle (each starts \
         again from zero, so more of it is kept), per interface.",
        |r| r.cut_evictions,
    ),
    (
        "corecap_recording_sessions_dropped_total",
        "Packets written to the recording of connections its full session tables kept no \
         record of (--sessions-per-file keeps more), per interface.",
        |r| r.sessions_dropped,
    ),
    (
        "corecap_recording_out_of_order_total",
        "Packets written to the recording older than one written before them (its files' time \
         order broken), per interface.",
        |r| r.out_of_order,
    ),
    (
        "corecap_recording_files_total",
        "Files the recording began in this run of the daemon (the first, then one per rotation).",
        |r| r.files,
    ),
];

/// The time span the recording keeps: its two gauges, and where each is read.
type RecordingGauge = (
    &'static str,
    &'static str,
    fn(&RecordingStats) -> Option<u64>,
);

const REACH: [RecordingGauge; 2] = [
    (
        "corecap_recording_oldest_packet_timestamp_seconds",
        "Time of the oldest packet the recording keeps on disk (Unix seconds), per interface.",
        |r| r.oldest_ns,
    ),
    (
        "corecap_recording_newest_packet_timestamp_seconds",
        "Time of the newest packet written to the recording (Unix seconds), per interface.",
        |r| r.newest_ns,
    ),
];

/// The recording of each base capture (`serve --record`): what it wrote, what it lost
/// and where, its files, and the time span it keeps.
fn recording(o: &mut String, i: &Input<'_>) {
    let rec: Vec<(&String, &RecordingStats)> = i
        .bases
        .iter()
        .filter_map(|b| Some((&b.interface, b.recording.as_ref()?)))
        .collect();
    if rec.is_empty() {
        return;
    }
    recording_counters(o, &rec, &WRITTEN);
    recording_drops(o, &rec);
    recording_counters(o, &rec, &CUT_AND_FILES);
    for (name, help, pick) in REACH {
        let rows = rec
            .iter()
            .filter_map(|(iface, r)| Some((interface(iface), pick(r)? as f64 / 1e9)));
        family(o, (name, "gauge"), help, rows);
    }
}

/// Each counter of `counters`, one line per recording.
fn recording_counters(
    o: &mut String,
    rec: &[(&String, &RecordingStats)],
    counters: &[RecordingCounter],
) {
    for (name, help, pick) in counters {
        per_interface(
            o,
            (name, "counter"),
            help,
            "",
            rec.iter().map(|(iface, r)| (*iface, pick(r))),
        );
    }
}

/// The packets that never reached the recording, by place, one line per recording and place.
fn recording_drops(o: &mut String, rec: &[(&String, &RecordingStats)]) {
    family(
        o,
        ("corecap_recording_drops_total", "counter"),
        "Packets that never reached the recording, by place: kernel (the ring was full), \
         stage_full (the pipe to the recording's stage thread was full), app (not taken by \
         the workers or the writer), disk (the disk writer was behind, or a write failed).",
        rec.iter().flat_map(|(iface, r)| {
            places(&r.drops).map(|(at, n)| (format!("{},at=\"{at}\"", interface(iface)), n))
        }),
    );
}

/// The label of an interface: `interface="IF"`.
fn interface(iface: &str) -> String {
    format!("interface=\"{}\"", esc(iface))
}

/// One metric, one line per interface: `name{interface="IF"<labels>} value`.
fn per_interface<'a>(
    o: &mut String,
    metric: (&str, &str),
    help: &str,
    labels: &str,
    rows: impl Iterator<Item = (&'a String, u64)>,
) {
    let rows = rows.map(|(iface, v)| (format!("{}{labels}", interface(iface)), v));
    family(o, metric, help, rows);
}

/// The spool, its quota and what --retain deleted.
fn spool(o: &mut String, i: &Input<'_>) {
    scalar(
        o,
        "corecap_spool_bytes",
        "gauge",
        "Bytes in the spool.",
        i.spool_bytes,
    );
    if let Some(q) = i.quota {
        scalar(
            o,
            "corecap_spool_quota_bytes",
            "gauge",
            "The spool's quota.",
            q,
        );
    }
    if let Some((budget, files, bytes)) = i.retention {
        scalar(
            o,
            "corecap_retain_budget_bytes",
            "gauge",
            "The byte budget under which the newest whole files are kept (--retain).",
            budget,
        );
        scalar(
            o,
            "corecap_retain_deleted_files_total",
            "counter",
            "Old files deleted to keep the spool under --retain.",
            files,
        );
        scalar(
            o,
            "corecap_retain_deleted_bytes_total",
            "counter",
            "Bytes of the old files deleted to keep the spool under --retain.",
            bytes,
        );
    }
}

/// API responses by status.
fn responses(o: &mut String, i: &Input<'_>) {
    by_label(
        o,
        ("corecap_api_responses_total", "counter"),
        "API responses by status code.",
        "code",
        i.responses.iter().map(|(code, n)| (code, *n)),
    );
    scalar(
        o,
        "corecap_api_tls_handshakes_refused_total",
        "counter",
        "TLS connections closed in their handshake (no or a refused client certificate).",
        i.handshakes_refused,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_histogram_is_cumulative() {
        let mut h = LagHistogram::default();
        h.observe(0.0002);
        h.observe(0.02);
        assert_eq!(h.counts[0], 0);
        assert_eq!(h.counts[3], 1); // <= 500 us
        assert_eq!(h.counts[BUCKETS.len() - 1], 2);
        assert_eq!(h.count, 2);
        assert_eq!(esc("a\"b\\c"), "a\\\"b\\\\c");
    }
}
