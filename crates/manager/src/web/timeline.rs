//! `GET /timeline?from=&to=&buckets=`: packets and bytes per interval over the recording,
//! from its catalog and its files' indexes, never from the packets.
//!
//! Each file of the recording's catalog with a known time range is a span. A file that
//! spans more than one bucket, and whose index can be read (not sealed, not damaged), gives
//! one span per region of its index instead (about 1 MiB of packets each, with their first
//! and last timestamps and count): zoomed in, the timeline has the resolution of the
//! regions; zoomed out over a day of many files, it reads the catalog alone. A span's packets
//! and bytes are spread over the buckets it overlaps in proportion to the overlap: within a
//! region the timeline is an estimate, and its sum over a window that holds whole regions
//! is exact. Bytes are the file's bytes (block headers included), what the disk holds.
//! The file being written has no index yet: it shows once rotated.
//!
//! The answer: `{"from_ns", "to_ns", "step_ns", "packets": [..], "bytes": [..],
//! "oldest_ns", "newest_ns", "files"}`; without `from` and `to` the window is the
//! recording's reach (oldest to newest packet).

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use corecap_store::query::parse_time;
use serde::Serialize;

use crate::flows::query_pairs;
use crate::http::Response;
use crate::manager::Manager;

/// Buckets when the request names none.
pub const DEFAULT_BUCKETS: usize = 240;
/// The most buckets given.
pub const MAX_BUCKETS: usize = 4000;

/// Packets and bytes between two timestamps (ns, both inclusive).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    /// First packet.
    pub first: u64,
    /// Last packet.
    pub last: u64,
    /// Packets.
    pub packets: u64,
    /// Bytes on disk.
    pub bytes: u64,
}

/// The timeline's answer.
#[derive(Debug, Default, Serialize)]
pub struct Timeline {
    /// Window start (ns since the epoch).
    pub from_ns: u64,
    /// Window end, exclusive.
    pub to_ns: u64,
    /// One bucket's width.
    pub step_ns: u64,
    /// Packets per bucket.
    pub packets: Vec<f64>,
    /// Bytes per bucket.
    pub bytes: Vec<f64>,
    /// The recording's oldest packet, when it has one.
    pub oldest_ns: Option<u64>,
    /// Its newest.
    pub newest_ns: Option<u64>,
    /// Files the catalog lists.
    pub files: usize,
}

/// The catalog's rows of the recording in `dir` (none without a catalog).
pub fn entries(dir: &Path) -> Vec<corecap_store::Entry> {
    corecap_store::Catalog::read(dir)
        .and_then(|c| c.entries().ok())
        .unwrap_or_default()
}

/// The oldest and newest packet the rows know of.
pub fn reach(entries: &[corecap_store::Entry]) -> Option<(u64, u64)> {
    let times = entries.iter().filter_map(|e| e.time);
    let oldest = times.clone().map(|t| t.0).min()?;
    let newest = times.map(|t| t.1).max()?;
    Some((oldest, newest))
}

/// The spans of the recording in `dir` that may fall in `from..to`, read for buckets of
/// `step` (see the module doc).
pub fn spans(
    dir: &Path,
    entries: &[corecap_store::Entry],
    from: u64,
    to: u64,
    step: u64,
) -> Vec<Span> {
    let mut out = Vec::new();
    for e in entries.iter().filter(|e| e.overlaps(from, to)) {
        let Some((first, last)) = e.time else {
            continue;
        };
        let regions = if last.saturating_sub(first) > step {
            index_spans(&dir.join(&e.name))
        } else {
            Vec::new()
        };
        if regions.is_empty() {
            out.push(Span {
                first,
                last,
                packets: e.packets,
                bytes: e.bytes,
            });
        } else {
            out.extend(regions);
        }
    }
    out
}

/// One span per region of the index of `file`; none when it has no readable index.
fn index_spans(file: &Path) -> Vec<Span> {
    let Ok(b) = std::fs::read(corecap_index::sidecar_path(file)) else {
        return Vec::new();
    };
    let Ok(index) = corecap_index::Index::parse(&b) else {
        return Vec::new();
    };
    index
        .regions
        .iter()
        .filter(|r| r.packets > 0)
        .map(|r| Span {
            first: r.ts_min,
            last: r.ts_max.max(r.ts_min),
            packets: u64::from(r.packets),
            bytes: r.at.end - r.at.start,
        })
        .collect()
}

/// The width of one of `buckets` buckets over `from..to`, and their count.
fn step_of(from: u64, to: u64, buckets: usize) -> (u64, usize) {
    let width = to.saturating_sub(from).max(1);
    let step = width.div_ceil(buckets as u64).max(1);
    (step, width.div_ceil(step) as usize)
}

/// Spreads `spans` over `buckets` buckets of `from..to` (see the module doc).
pub fn bucket(spans: &[Span], from: u64, to: u64, buckets: usize) -> Timeline {
    let (step, n) = step_of(from, to, buckets);
    let mut t = Timeline {
        from_ns: from,
        to_ns: from.saturating_add(step.saturating_mul(n as u64)),
        step_ns: step,
        packets: vec![0.0; n],
        bytes: vec![0.0; n],
        ..Timeline::default()
    };
    for s in spans {
        if s.last < from || s.first >= t.to_ns {
            continue;
        }
        // The span as a half-open range of time: a single instant is one nanosecond.
        // (At the end of time, the last nanosecond is left out rather than overflow.)
        let (a, b) = (s.first, s.last.max(s.first).saturating_add(1));
        let len = b.saturating_sub(a).max(1) as f64;
        let first = (a.max(from) - from) / step;
        let last = ((b.min(t.to_ns).saturating_sub(1).max(from) - from) / step).min(n as u64 - 1);
        for i in first..=last {
            let lo = from + i * step;
            let overlap = b.min(lo.saturating_add(step)).saturating_sub(a.max(lo)) as f64;
            let share = overlap / len;
            t.packets[i as usize] += s.packets as f64 * share;
            t.bytes[i as usize] += s.bytes as f64 * share;
        }
    }
    t
}

/// Answers `GET /timeline` (see the module doc).
pub fn answer(m: &Manager, query: &str) -> Response {
    let bad = |e: String| Response::error(400, e);
    let Some(dir) = m.record() else {
        return Response::json(200, &serde_json::json!(Timeline::default()));
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let (mut from, mut to, mut buckets) = (None, None, DEFAULT_BUCKETS);
    let pairs = match query_pairs(query) {
        Ok(p) => p,
        Err(e) => return bad(e),
    };
    for (k, v) in pairs {
        let time = |v: &str| parse_time(v, now).map_err(|e| format!("{k} {v}: {e}"));
        match (k.as_str(), v.trim()) {
            (_, "") => {}
            ("from", v) => match time(v) {
                Ok(t) => from = Some(t),
                Err(e) => return bad(e),
            },
            ("to", v) => match time(v) {
                Ok(t) => to = Some(t),
                Err(e) => return bad(e),
            },
            ("buckets", v) => match v.parse::<usize>() {
                Ok(n) if (1..=MAX_BUCKETS).contains(&n) => buckets = n,
                _ => return bad(format!("buckets {v}: from 1 to {MAX_BUCKETS}")),
            },
            _ => return bad(format!("unknown parameter {k:?}")),
        }
    }
    let entries = entries(dir);
    let reach = reach(&entries);
    let from = from.or(reach.map(|r| r.0)).unwrap_or(now);
    let to = to
        .or(reach.map(|r| r.1.saturating_add(1)))
        .unwrap_or(from.saturating_add(1));
    if to <= from {
        return bad("the window ends before it starts".into());
    }
    let spans = spans(dir, &entries, from, to, step_of(from, to, buckets).0);
    let mut t = bucket(&spans, from, to, buckets);
    t.oldest_ns = reach.map(|r| r.0);
    t.newest_ns = reach.map(|r| r.1);
    t.files = entries.len();
    match serde_json::to_value(&t) {
        Ok(v) => Response::json(200, &v),
        Err(e) => Response::error(500, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(first: u64, last: u64, packets: u64) -> Span {
        Span {
            first,
            last,
            packets,
            bytes: packets * 100,
        }
    }

    #[test]
    fn test_spans_spread_by_overlap() {
        // One span over buckets 0 and 1 half each; one instant in bucket 3; one outside.
        let spans = [span(5, 14, 10), span(35, 35, 3), span(100, 200, 7)];
        let t = bucket(&spans, 0, 40, 4);
        assert_eq!(t.step_ns, 10);
        assert_eq!(t.packets, [5.0, 5.0, 0.0, 3.0]);
        assert_eq!(t.bytes, [500.0, 500.0, 0.0, 300.0]);
        assert_eq!(t.to_ns, 40);
    }

    #[test]
    fn test_the_ends_of_time_do_not_overflow() {
        let end = span(u64::MAX - 5, u64::MAX, 6);
        for (from, to) in [(1, u64::MAX), (0, u64::MAX), (u64::MAX - 1, u64::MAX)] {
            let t = bucket(&[end, span(0, 0, 1)], from, to, 240);
            let sum: f64 = t.packets.iter().sum();
            assert!(sum <= 7.0 && sum > 0.0, "{from}..{to}: {sum}");
        }
    }

    #[test]
    fn test_window_cuts_a_span() {
        let t = bucket(&[span(0, 99, 100)], 50, 60, 2);
        assert_eq!(t.packets, [5.0, 5.0]);
        // A window narrower than its buckets: one nanosecond each.
        let t = bucket(&[span(7, 7, 1)], 7, 8, 10);
        assert_eq!((t.step_ns, t.packets.len()), (1, 1));
        assert_eq!(t.packets, [1.0]);
    }
}
