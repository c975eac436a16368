//! A query's reach: which part of its window is on record, and why the rest is not.
//!
//! An answer that leaves out what retention deleted, without a word, reads as "the host
//! only talked once". So every query states, beside its packets, the parts of its window
//! that some file still holds, and for every other part the reason:
//!
//! - **deleted by retention** at a time, by a rule, as the folder's record of deletions
//!   says ([`crate::keep::deleted`]);
//! - **before the first file**: the recording had not begun;
//! - **after the last packet**: nothing recorded yet (or the recording stopped);
//! - **a gap**: between files, no file holds that time (the recorder was off, or there was
//!   nothing to record).
//!
//! Times come from the folders' catalogs (a file without an entry: its index; the file a
//! recorder is writing, which has neither yet: its first packet to its last write; any other
//! file without either is counted as of unknown time). Files of one recording follow each other
//! with the time between two packets between them, so stretches closer than [`GAP_NS`] are
//! one; gaps and ends shorter than that are not told (deletions always are). Deleted time
//! that other files still partly hold (a file per worker, one of them deleted) is told as
//! *partly deleted*.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::keep::deleted::{self, Deletion, Rule};
use crate::names::dir_of;
use crate::query::utc_text;

/// Stretches of recorded time closer than this are one; shorter gaps are not told.
pub const GAP_NS: u64 = 1_000_000_000;

/// Parts listed at most, each kind (the rest counted in `more`).
const MAX_PARTS: usize = 64;

/// What a query's window holds on record ([`reach`]).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Reach {
    /// The window considered, ns (an open end is the recording's first or last time).
    pub from_ns: u64,
    /// Its end, ns, exclusive.
    pub to_ns: u64,
    /// The first packet of the files, ns (None: no file with a known time).
    pub oldest_ns: Option<u64>,
    /// Their last packet, ns.
    pub newest_ns: Option<u64>,
    /// The parts of the window some file holds.
    pub on_record: Vec<Span>,
    /// The parts no file holds, each with why.
    pub missing: Vec<Missing>,
    /// Parts on record whose time some deleted file held too: their packets are in part
    /// gone.
    pub partly_deleted: Vec<Missing>,
    /// Parts left off the lists above (past 64 of a kind).
    pub more: u64,
    /// Files whose time is not known (no catalog entry, no index): not placed.
    pub files_without_time: u64,
    /// Lines of the records of deletions that could not be read.
    pub damaged_lines: u64,
}

/// A stretch of time, ns, `to_ns` exclusive.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
pub struct Span {
    /// Start, ns.
    pub from_ns: u64,
    /// End, ns, exclusive.
    pub to_ns: u64,
}

/// A stretch not (or not wholly) on record, and why.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Missing {
    /// Start, ns.
    pub from_ns: u64,
    /// End, ns, exclusive.
    pub to_ns: u64,
    /// Why.
    pub why: Why,
    /// For a deletion: when the last of its files was deleted, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted_at_ns: Option<u64>,
    /// For a deletion: the rules that deleted its files.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
    /// For a deletion: how many files.
    #[serde(skip_serializing_if = "is_zero")]
    pub files: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why a stretch is not on record.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Why {
    /// Retention deleted the files that held it.
    Retention,
    /// Before the first file of the recording.
    BeforeFirstFile,
    /// After the last packet recorded.
    AfterLastPacket,
    /// Between files: not recording, or nothing to record.
    Gap,
}

/// The reach of `files` and of the recording folders `folders` (their files too), with the
/// records of deletions of those folders and of the files' own, for the window `from..to`
/// (`0` and `u64::MAX`: open ends).
pub fn reach(folders: &[PathBuf], files: &[PathBuf], from: u64, to: u64) -> Reach {
    let mut dirs: Vec<PathBuf> = folders
        .iter()
        .map(PathBuf::as_path)
        .chain(files.iter().map(|f| dir_of(f)))
        .map(|d| d.canonicalize().unwrap_or_else(|_| d.to_owned()))
        .collect();
    dirs.sort();
    dirs.dedup();
    // The folders' files as well as the query's: a query narrowed to connections none of
    // the files holds has no file left, and its window is still told against the folders.
    let mut all: Vec<PathBuf> = files.to_vec();
    if let Ok((listed, _)) = crate::query::expand_paths(folders) {
        all.extend(listed);
    }
    all.sort();
    all.dedup();
    let mut r = Reach::default();
    let held = file_times(&all, &mut r.files_without_time);
    let mut gone = Vec::new();
    for d in &dirs {
        let (lines, damaged) = deleted::read(d);
        r.damaged_lines += damaged;
        // A line whose file is still there (a crash between the line and the deletion):
        // the file answers.
        gone.extend(lines.into_iter().filter(|l| !d.join(&l.file).exists()));
    }
    let present = merged(held.iter().map(|&(a, b)| (a, b.saturating_add(1))));
    let deleted = merged_deletions(&gone);
    let known = present
        .iter()
        .map(|s| (s.from_ns, s.to_ns))
        .chain(deleted.iter().map(|m| (m.from_ns, m.to_ns)));
    let (lo, hi) = known.fold((u64::MAX, 0), |(lo, hi), (a, b)| (lo.min(a), hi.max(b)));
    r.oldest_ns = held.iter().map(|t| t.0).min();
    r.newest_ns = held.iter().map(|t| t.1).max();
    r.from_ns = if from == 0 { lo.min(hi) } else { from };
    r.to_ns = if to == u64::MAX {
        hi.max(r.from_ns)
    } else {
        to
    };
    if lo > hi {
        // Nothing known: the whole window is before any file.
        r.missing
            .push(missing(r.from_ns, r.to_ns, Why::BeforeFirstFile));
        return r;
    }
    let window = Span {
        from_ns: r.from_ns,
        to_ns: r.to_ns,
    };
    r.on_record = clip(&present, window);
    for hole in complement(&r.on_record, window) {
        explain(hole, &deleted, (lo, hi), &mut r.missing);
    }
    for m in &deleted {
        for on in &r.on_record {
            let (a, b) = (m.from_ns.max(on.from_ns), m.to_ns.min(on.to_ns));
            if a < b {
                r.partly_deleted.push(Missing {
                    from_ns: a,
                    to_ns: b,
                    ..m.clone()
                });
            }
        }
    }
    r.more = cap(&mut r.on_record) + cap(&mut r.missing) + cap(&mut r.partly_deleted);
    r
}

/// Cuts `v` to [`MAX_PARTS`]; how many went.
fn cap<T>(v: &mut Vec<T>) -> u64 {
    let over = v.len().saturating_sub(MAX_PARTS);
    v.truncate(MAX_PARTS);
    over as u64
}

fn missing(from_ns: u64, to_ns: u64, why: Why) -> Missing {
    Missing {
        from_ns,
        to_ns,
        why,
        deleted_at_ns: None,
        rules: Vec::new(),
        files: 0,
    }
}

/// The first and last packet times of `files`, from their folders' catalogs or their
/// indexes; counts in `unknown` those with neither.
fn file_times(files: &[PathBuf], unknown: &mut u64) -> Vec<(u64, u64)> {
    let mut catalogs: HashMap<PathBuf, HashMap<String, crate::Entry>> = HashMap::new();
    let mut out = Vec::new();
    for f in files {
        let dir = dir_of(f).to_owned();
        let entries = catalogs.entry(dir.clone()).or_insert_with(|| {
            crate::Catalog::read(&dir)
                .and_then(|c| c.entries().ok())
                .map(|l| l.into_iter().map(|e| (e.name.clone(), e)).collect())
                .unwrap_or_default()
        });
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
        let time = name
            .and_then(|n| entries.get(&n))
            .and_then(|e| e.time)
            .or_else(|| index_time(f))
            .or_else(|| live_time(f));
        match time {
            Some(t) => out.push(t),
            None => *unknown += 1,
        }
    }
    out
}

/// The time of a file a recorder is writing (no catalog entry or index yet): from its first
/// packet to its last write, which its writer makes at least every flush interval.
fn live_time(f: &Path) -> Option<(u64, u64)> {
    if !crate::names::is_part(f) {
        return None;
    }
    let first = corecap_wire::CaptureReader::open(f)
        .ok()?
        .next_packet()
        .ok()??
        .ts_ns;
    let written = std::fs::metadata(f).ok()?.modified().ok()?;
    let written = written
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos();
    Some((first, u64::try_from(written).ok()?.max(first)))
}

/// A file's time range from its index.
fn index_time(f: &Path) -> Option<(u64, u64)> {
    let b = std::fs::read(crate::names::index_path(f)).ok()?;
    corecap_index::Index::parse(&b).ok()?.time_range()
}

/// Half-open stretches sorted and joined where closer than [`GAP_NS`].
fn merged(spans: impl Iterator<Item = (u64, u64)>) -> Vec<Span> {
    let mut v: Vec<(u64, u64)> = spans.collect();
    v.sort_unstable();
    let mut out: Vec<Span> = Vec::new();
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.to_ns.saturating_add(GAP_NS) => {
                last.to_ns = last.to_ns.max(b);
            }
            _ => out.push(Span {
                from_ns: a,
                to_ns: b,
            }),
        }
    }
    out
}

/// Deleted files as stretches, joined where closer than [`GAP_NS`]: each with the files'
/// rules, their count and the last deletion's time.
fn merged_deletions(lines: &[Deletion]) -> Vec<Missing> {
    let mut v: Vec<&Deletion> = lines.iter().collect();
    v.sort_unstable_by_key(|d| (d.first_ns, d.last_ns));
    let mut out: Vec<Missing> = Vec::new();
    for d in v {
        let end = d.last_ns.saturating_add(1);
        match out.last_mut() {
            Some(m) if d.first_ns <= m.to_ns.saturating_add(GAP_NS) => {
                m.to_ns = m.to_ns.max(end);
                m.files += d.files;
                m.deleted_at_ns = m.deleted_at_ns.max(Some(d.at_ns));
                if !m.rules.contains(&d.rule) {
                    m.rules.push(d.rule);
                }
            }
            _ => out.push(Missing {
                from_ns: d.first_ns,
                to_ns: end,
                why: Why::Retention,
                deleted_at_ns: Some(d.at_ns),
                rules: vec![d.rule],
                files: d.files,
            }),
        }
    }
    out
}

/// The parts of `spans` inside `w`.
fn clip(spans: &[Span], w: Span) -> Vec<Span> {
    spans
        .iter()
        .filter_map(|s| {
            let (a, b) = (s.from_ns.max(w.from_ns), s.to_ns.min(w.to_ns));
            (a < b).then_some(Span {
                from_ns: a,
                to_ns: b,
            })
        })
        .collect()
}

/// The parts of `w` that none of the sorted, disjoint `spans` covers.
fn complement(spans: &[Span], w: Span) -> Vec<Span> {
    let mut out = Vec::new();
    let mut at = w.from_ns;
    for s in spans {
        if s.from_ns > at {
            out.push(Span {
                from_ns: at,
                to_ns: s.from_ns,
            });
        }
        at = at.max(s.to_ns);
    }
    if at < w.to_ns {
        out.push(Span {
            from_ns: at,
            to_ns: w.to_ns,
        });
    }
    out
}

/// Says why `hole` is not on record: the deletions that cover parts of it, and for the
/// rest, before the first known time, after the last, or a gap (`known`: the first and
/// last known times). Stretches shorter than [`GAP_NS`] other than deletions are not told.
fn explain(hole: Span, deleted: &[Missing], known: (u64, u64), out: &mut Vec<Missing>) {
    let mut at = hole.from_ns;
    let rest = |a: u64, b: u64, out: &mut Vec<Missing>| {
        if b.saturating_sub(a) < GAP_NS {
            return;
        }
        let why = if b <= known.0 {
            Why::BeforeFirstFile
        } else if a >= known.1 {
            Why::AfterLastPacket
        } else {
            Why::Gap
        };
        out.push(missing(a, b, why));
    };
    for d in deleted {
        let (a, b) = (d.from_ns.max(hole.from_ns), d.to_ns.min(hole.to_ns));
        if a >= b {
            continue;
        }
        if a > at {
            rest(at, a, out);
        }
        out.push(Missing {
            from_ns: a,
            to_ns: b,
            ..d.clone()
        });
        at = b;
    }
    if at < hole.to_ns {
        rest(at, hole.to_ns, out);
    }
}

impl Reach {
    /// The reach as lines a user reads (each part with why), and when the window misses
    /// every file, the times the files do cover.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let span = |a: u64, b: u64| format!("{} to {}", utc_text(a), utc_text(b));
        if self.oldest_ns.is_none() && self.files_without_time > 0 {
            // No file of known time: nothing is known of what is on record, and the files
            // of unknown time are read (a folder of another tool's captures).
            out.push(format!(
                "reach: not known: {} files of unknown time (no catalog entry, no index), \
                 read whole",
                self.files_without_time
            ));
            return out;
        }
        if self.on_record.is_empty() {
            match (self.oldest_ns, self.newest_ns) {
                (Some(a), Some(b)) => out.push(format!(
                    "reach: no part of the window is on record; the files cover {}",
                    span(a, b)
                )),
                _ => out.push("reach: no part of the window is on record; no file holds a packet of known time".into()),
            }
        }
        for m in self.missing.iter().filter(|m| m.to_ns > m.from_ns) {
            out.push(format!(
                "reach: not on record: {} ({})",
                span(m.from_ns, m.to_ns),
                m.reason()
            ));
        }
        for m in &self.partly_deleted {
            out.push(format!(
                "reach: partly deleted: {} (some files of this time {})",
                span(m.from_ns, m.to_ns),
                m.reason()
            ));
        }
        if self.more > 0 {
            out.push(format!("reach: {} more parts not listed", self.more));
        }
        if self.files_without_time > 0 {
            out.push(format!(
                "reach: {} files of unknown time (no catalog entry, no index) not placed",
                self.files_without_time
            ));
        }
        out
    }
}

impl Missing {
    /// Why, as a user reads it.
    pub fn reason(&self) -> String {
        match self.why {
            Why::Retention => {
                let rules: Vec<&str> = self.rules.iter().map(|r| r.text()).collect();
                format!(
                    "deleted by retention at {}, {} files, by {}",
                    self.deleted_at_ns
                        .map_or_else(|| "an unknown time".into(), utc_text),
                    self.files,
                    rules.join(" and ")
                )
            }
            Why::BeforeFirstFile => "before the first file of the recording".into(),
            Why::AfterLastPacket => "after the last packet recorded".into(),
            Why::Gap => "a gap between files: not recording, or nothing to record".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn del(first: u64, last: u64, at: u64, rule: Rule) -> Deletion {
        Deletion {
            file: "x".into(),
            files: 1,
            first_ns: first * S,
            last_ns: last * S,
            at_ns: at * S,
            rule,
        }
    }

    fn spans(v: &[(u64, u64)]) -> Vec<Span> {
        merged(v.iter().map(|&(a, b)| (a * S, b * S)))
    }

    #[test]
    fn test_a_hole_splits_into_deleted_before_and_gap() {
        let deleted = merged_deletions(&[
            del(100, 199, 500, Rule::Size),
            del(200, 299, 510, Rule::Age),
        ]);
        assert_eq!(deleted.len(), 1, "adjacent deletions are one stretch");
        assert_eq!(deleted[0].files, 2);
        assert_eq!(deleted[0].deleted_at_ns, Some(510 * S));
        assert_eq!(deleted[0].rules, vec![Rule::Size, Rule::Age]);
        let present = spans(&[(300, 400), (600, 700)]);
        let w = Span {
            from_ns: 50 * S,
            to_ns: 800 * S,
        };
        let on = clip(&present, w);
        let mut out = Vec::new();
        for h in complement(&on, w) {
            explain(h, &deleted, (100 * S, 700 * S), &mut out);
        }
        let got: Vec<(u64, u64, Why)> = out
            .iter()
            .map(|m| (m.from_ns / S, m.to_ns / S, m.why))
            .collect();
        assert_eq!(
            got,
            vec![
                (50, 100, Why::BeforeFirstFile),
                (100, 299, Why::Retention),
                (400, 600, Why::Gap),
                (700, 800, Why::AfterLastPacket),
            ]
        );
    }

    #[test]
    fn test_short_gaps_between_files_are_one_stretch() {
        let s = merged([(0, 10 * S), (10 * S + S / 2, 20 * S)].into_iter());
        assert_eq!(s.len(), 1);
        let s = merged([(0, 10 * S), (12 * S, 20 * S)].into_iter());
        assert_eq!(s.len(), 2);
    }
}
