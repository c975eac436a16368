//! Queries over recorded files: packets in a time window that pass a tcpdump filter, read
//! from only the regions of each file that its index says can match.
//!
//! A query runs in three steps:
//!
//! 1. **Plan** ([`plan_file`]): for each file, its sidecar index (unsealed with the key for a
//!    sealed capture) gives the regions; a region is read when its time range overlaps the
//!    window and its sets can match the filter's [`Predicate`]. Adjacent regions merge into
//!    one read. A file without an index, with a damaged or stale one, or whose interfaces are
//!    defined after its header, is scanned whole. Bytes past the index's coverage (a file
//!    indexed while cut short, then completed) are read too. A compressed file (gzip, zstd,
//!    lz4: byte offsets of the file are no places in the capture) is never indexed and
//!    always scanned, through its decoder.
//! 2. **Read** (a file stream): each read is one `pread` of the byte range; a region not at
//!    the start of the file is parsed after the file header kept in the index. For a sealed
//!    file the range is whole chunks, decrypted one by one ([`ChunkOpener`]).
//! 3. **Merge** ([`run`]): every packet read passes the compiled filter (the classic BPF
//!    interpreter) and the window, so the answer is exact whatever the index says; files are
//!    merged in timestamp order (a file opens when the merge reaches its first timestamp, so
//!    a rotation directory keeps few files open), into one pcapng that keeps interface
//!    names and descriptions, `epb_queue`, `epb_hash` and `epb_dropcount`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use corecap_wire::{Epb, PcapngWriter};
use serde::Serialize;

use crate::names::is_part;

use super::outcome::io_at;
use super::plan::{pick, plan_scan, sealed_opener, usable_index, Catalogs};
use super::stream::{announce, Ctx, FileStream, Held};
// The query's API in one place: planning, the times users give, and the index built
// after the fact, with the query itself.
pub use super::outcome::{QueryError, QuerySpec, QueryStats};
pub use super::plan::{expand_paths, file_kind, plan_file, FileKind, FilePlan, Pruning, Segment};
pub use super::time::{parse_time, parse_time_in, time_zone, utc_text};
pub use crate::write::index_file::{build_index, IndexReport};

/// Runs a query: writes the matching packets, in timestamp order, as one pcapng to `out`.
pub fn run<W: Write>(spec: &QuerySpec, out: W) -> Result<QueryStats, QueryError> {
    run_into(spec, || Ok(out), None)
}

/// [`run`] into an output that `open` makes only once the query can answer: after its files
/// are planned and its filter is known to compile for them ([`check_filter`]), so that a
/// query that fails before its first packet leaves no file behind. When `stop` is set
/// (a signal), the answer ends at the next packet, whole: the pcapng is finished with what
/// was written, and [`QueryStats::stopped`] says it was cut short.
pub fn run_into<W: Write>(
    spec: &QuerySpec,
    open: impl FnOnce() -> std::io::Result<W>,
    stop: Option<&AtomicBool>,
) -> Result<QueryStats, QueryError> {
    let _leases = lease_folders(&spec.files);
    run_leased_into(spec, open, stop)
}

/// [`run`] for a caller that already keeps retention out of the folders (retention itself,
/// copying what holds keep before it deletes a file).
pub(crate) fn run_leased<W: Write>(spec: &QuerySpec, out: W) -> Result<QueryStats, QueryError> {
    run_leased_into(spec, || Ok(out), None)
}

/// [`run_into`] under the leases its caller holds.
fn run_leased_into<W: Write>(
    spec: &QuerySpec,
    open: impl FnOnce() -> std::io::Result<W>,
    stop: Option<&AtomicBool>,
) -> Result<QueryStats, QueryError> {
    let mut stats = QueryStats::default();
    // Under the leases: retention deletes nothing of these folders until the answer ends.
    let reach = spec
        .reach
        .then(|| super::reach::reach(&spec.folders, &spec.files, spec.from, spec.to));
    let mut plans = plan_all(spec, &mut stats)?;
    plans.sort_by_key(|p| p.start_ts);
    check_filter(spec, &plans)?;
    let out = open().map_err(QueryError::Output)?;
    let out = PcapngWriter::new(out, "corecap query", &[]).map_err(QueryError::Output)?;
    let mut ctx = Ctx {
        filter: spec.filter.as_deref().filter(|f| !f.trim().is_empty()),
        sessions: spec.sessions.as_deref(),
        programs: HashMap::new(),
        out,
        out_ifs: HashMap::new(),
        from: spec.from,
        to: spec.to,
        stats,
        refused: None,
        same_time: spec.once.then(|| (u64::MAX, Vec::new())),
        stop,
    };
    let planned = plans.len() as u64;
    prefetch(&mut plans);
    merge(plans, &mut ctx)?;
    ctx.out
        .ensure_interface("corecap")
        .map_err(QueryError::Output)?;
    ctx.out.flush().map_err(QueryError::Output)?;
    if ctx.stats.duplicates > 0 {
        ctx.stats.notes.push(format!(
            "{} packets held by two files (an on-demand capture's copy of the recording) given once",
            ctx.stats.duplicates
        ));
    }
    // A filter that applies to none of the files is an error, never an empty answer.
    if let (Some(why), true) = (ctx.refused.take(), ctx.stats.files_refused == planned) {
        return Err(QueryError::Filter(why));
    }
    ctx.stats
        .notes
        .extend(reach.iter().flat_map(super::reach::Reach::lines));
    ctx.stats.reach = reach;
    Ok(ctx.stats)
}

/// Checks, before any output is made, that the filter compiles for at least one link type
/// the files declare in their headers (for Ethernet when no file is left, as tcpdump checks
/// it): a filter that does not parse, or applies to none of the files, is an error then,
/// not after an answer was begun. A file whose link types are not known without reading it
/// (compressed, sealed without an index) leaves the check to the read.
pub(crate) fn check_filter(spec: &QuerySpec, plans: &[FilePlan]) -> Result<(), QueryError> {
    let Some(expr) = spec.filter.as_deref().filter(|f| !f.trim().is_empty()) else {
        return Ok(());
    };
    let mut links = Vec::new();
    if plans.is_empty() {
        links.push(corecap_wire::pcapng::LINKTYPE_ETHERNET);
    }
    for p in plans {
        match super::plan::header_links(p) {
            Some(l) => links.extend(l),
            None => return Ok(()),
        }
    }
    links.sort_unstable();
    links.dedup();
    let mut refused = None;
    for lt in links {
        match super::stream::compile(expr, spec.sessions.as_deref(), lt, false) {
            Ok(_) => return Ok(()),
            Err(e) => {
                refused.get_or_insert(e);
            }
        }
    }
    refused.map_or(Ok(()), Err)
}

/// Bytes of listed packets announced to the device before the first read, at most.
pub(crate) const PREFETCH: u64 = 256 << 20;

/// Announces the blocks of every file's listed packets to the device at once, so their
/// reads are in flight together across files rather than file by file as each is opened;
/// up to [`PREFETCH`] bytes. A file whose packets all fit is marked announced. A file that
/// cannot be opened is left to its read, which reports it.
pub(crate) fn prefetch(plans: &mut [FilePlan]) {
    let mut budget = PREFETCH;
    for plan in plans {
        if plan.frames.is_some()
            || !plan
                .segments
                .iter()
                .any(|s| matches!(s, Segment::Packets(_)))
        {
            continue;
        }
        let Ok(f) = File::open(&plan.path) else {
            continue;
        };
        corecap_linux::direct::advise_random(&f);
        let mut all = true;
        for seg in &plan.segments {
            let Segment::Packets(spans) = seg else {
                continue;
            };
            match announce(&f, spans, budget) {
                Some(asked) => budget -= asked,
                None => {
                    all = false;
                    budget = 0;
                    break;
                }
            }
        }
        plan.announced = all;
        if !all {
            return;
        }
    }
}

/// Each folder's lease, to hold until the answer is written: retention deletes nothing
/// there meanwhile (see `corecap_linux::direct::Lease`). Only a recording's folder (one
/// with a catalog) gets a lease file made: a folder of other captures is not written to.
pub(crate) fn lease_folders(files: &[PathBuf]) -> Vec<corecap_linux::direct::Lease> {
    let mut dirs: Vec<&Path> = files.iter().map(|f| crate::names::dir_of(f)).collect();
    dirs.sort();
    dirs.dedup();
    dirs.into_iter()
        .filter_map(|d| {
            let recording = d.join(crate::CATALOG).exists();
            corecap_linux::direct::Lease::shared(d, recording).ok()
        })
        .collect()
}

/// Plans the reads of every file of `spec` (those with something to read), counting
/// each in `stats`.
pub(crate) fn plan_all(
    spec: &QuerySpec,
    stats: &mut QueryStats,
) -> Result<Vec<FilePlan>, QueryError> {
    let mut pruning = Pruning::new(spec.filter.as_deref());
    let mut catalogs = Catalogs::default();
    let mut plans = Vec::new();
    let mut files: std::collections::VecDeque<PathBuf> = spec.files.iter().cloned().collect();
    while let Some(f) = files.pop_front() {
        let f = &f;
        stats.files += 1;
        if !spec.scan && catalogs.outside(f, spec.from, spec.to) {
            // The folder's catalog says no packet of this file is in the window: neither
            // the file nor its index is opened.
            stats.files_pruned += 1;
            continue;
        }
        let planned = if spec.scan {
            plan_scan(f, spec.kek.as_ref())
        } else {
            plan_file(
                f,
                spec.from,
                spec.to,
                &mut pruning,
                spec.kek.as_ref(),
                stats,
            )
        };
        let plan = match planned {
            Err(QueryError::Io { cause, .. })
                if cause.kind() == std::io::ErrorKind::NotFound && deleted_since(f) =>
            {
                // Listed, then deleted by retention before the query's lease: what holds
                // kept of it answers in its place (whole: copied before the deletion),
                // and the answer's reach tells that time, as for any file retention took.
                let held = held_copies(f, &spec.files);
                stats.notes.push(format!(
                    "{}: deleted by retention after the query listed it ({} held copies read)",
                    f.display(),
                    held.len()
                ));
                files.extend(held);
                continue;
            }
            other => other?,
        };
        stats.files_live += u64::from(plan.live);
        stats.bytes_total += plan.size;
        stats.regions_read += plan.regions.0;
        stats.regions_total += plan.regions.1;
        if plan.indexed {
            stats.files_indexed += 1;
        } else {
            stats.files_scanned += 1;
        }
        stats.notes.extend(plan.note.clone());
        if !plan.segments.is_empty() {
            plans.push(plan);
        }
    }
    stats.notes.append(&mut catalogs.notes);
    Ok(plans)
}

/// The held copies of the deleted file `f` (`held/NAME`, `held/N~NAME`) not in `listed`.
fn held_copies(f: &Path, listed: &[PathBuf]) -> Vec<PathBuf> {
    (1..)
        .map(|n| crate::names::held_path_nth(f, n))
        .take_while(|p| p.exists())
        .filter(|p| !listed.contains(p))
        .collect()
}

/// Whether retention's record of `f`'s folder names `f` (see [`crate::keep::deleted`]).
fn deleted_since(f: &Path) -> bool {
    let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
    let (lines, _) = crate::keep::deleted::read(crate::names::dir_of(f));
    name.is_some_and(|n| lines.iter().any(|l| l.file == n))
}

/// Reads the planned files (in start-time order) and writes their matching packets merged
/// in timestamp order: a file is opened once the merge reaches its first timestamp.
pub(crate) fn merge<W: Write>(
    plans: Vec<FilePlan>,
    ctx: &mut Ctx<'_, W>,
) -> Result<(), QueryError> {
    let mut pending = plans.into_iter().peekable();
    let mut streams: Vec<FileStream> = Vec::new();
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    loop {
        let head = heap.peek().map(|Reverse((ts, _))| *ts);
        if let Some(p) = pending.peek() {
            if head.is_none_or(|ts| p.start_ts <= ts) {
                let Some(plan) = pending.next() else { break };
                let mut s = FileStream::new(plan);
                if s.advance(ctx)? {
                    heap.push(Reverse((s.held.ts_ns, streams.len())));
                }
                streams.push(s);
                continue;
            }
        }
        // Relaxed: a flag a signal handler sets, polled once a packet.
        if ctx.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            ctx.stats.stopped = true;
            return Ok(());
        }
        let Some(Reverse((_, i))) = heap.pop() else {
            return Ok(());
        };
        let s = &mut streams[i];
        let h = &s.held;
        if ctx.given_before(i, h.ts_ns, &h.data, h.orig_len) {
            if s.advance(ctx)? {
                heap.push(Reverse((s.held.ts_ns, i)));
            } else {
                s.held = Held::default();
            }
            continue;
        }
        ctx.out
            .write_epb(&Epb {
                if_id: h.out_if,
                ts_ns: h.ts_ns,
                data: &h.data,
                orig_len: h.orig_len,
                vlan_tci: None,
                queue: h.queue,
                hash: h.hash,
                dropcount: h.dropcount,
            })
            .map_err(QueryError::Output)?;
        ctx.stats.packets += 1;
        if s.advance(ctx)? {
            heap.push(Reverse((s.held.ts_ns, i)));
        } else {
            // Done with this file: free its buffers.
            s.held = Held::default();
        }
    }
    Ok(())
}
/// What `corecap query --stats` tells without reading a packet: from the folders'
/// catalogs and the files' indexes, the files a query would open and at most how many
/// packets it would return.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Counts {
    /// Files considered.
    pub files: u64,
    /// Files outside the window by their folder's catalog (never opened).
    pub files_pruned: u64,
    /// Files counted from their index.
    pub files_indexed: u64,
    /// Files without a usable index: their packets are not counted.
    pub files_unindexed: u64,
    /// Packets the query would return, at most: exact keys from the postings (a filter
    /// that tests more than a key, or a window that cuts a region, returns fewer).
    pub packets_at_most: u64,
    /// Bytes of the files considered.
    pub bytes_total: u64,
    /// Bytes of indexes read.
    pub index_bytes: u64,
    /// Notes (an index that does not match its file), and the reach's.
    pub notes: Vec<String>,
    /// Which part of the window is on record, and why the rest is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reach: Option<super::reach::Reach>,
}

/// Counts a query's answer from the catalogs and indexes alone (see [`Counts`]).
pub fn count(spec: &QuerySpec) -> Result<Counts, QueryError> {
    let mut pruning = Pruning::new(spec.filter.as_deref());
    let mut catalogs = Catalogs::default();
    let mut c = Counts::default();
    for f in &spec.files {
        c.files += 1;
        if catalogs.outside(f, spec.from, spec.to) {
            c.files_pruned += 1;
            continue;
        }
        let size = std::fs::metadata(f).map_err(io_at(f))?.len();
        c.bytes_total += size;
        let kind = file_kind(f).map_err(io_at(f))?;
        let mut plan = FilePlan::scan(f, size, sealed_opener(f, kind, spec.kek.as_ref())?);
        let mut st = QueryStats::default();
        let index = if is_part(f) || kind != FileKind::Plain && kind != FileKind::Sealed {
            None
        } else {
            usable_index(&mut plan, spec.kek.as_ref(), &mut st)
        };
        c.index_bytes += st.index_bytes;
        c.notes.extend(plan.note.take());
        let Some((index, mut lists)) = index else {
            c.files_unindexed += 1;
            continue;
        };
        c.files_indexed += 1;
        let links = corecap_index::header_linktypes(&index.header);
        let pred = pruning.for_links(links.as_deref());
        let opened = plan.opener.is_none();
        let picked = pick(&index, &mut lists, spec.from, spec.to, &pred, opened);
        c.index_bytes += lists.settle(&mut plan);
        c.notes.extend(plan.note.take());
        c.packets_at_most += picked
            .regions
            .iter()
            .map(|(i, listed)| match listed {
                Some(range) => picked.offsets.as_ref().map_or(0, |o| {
                    o[range.clone()].iter().map(|s| s.packets).sum::<u64>()
                }),
                None => u64::from(index.regions[*i].packets),
            })
            .sum::<u64>();
    }
    c.notes.append(&mut catalogs.notes);
    c.reach = spec
        .reach
        .then(|| super::reach::reach(&spec.folders, &spec.files, spec.from, spec.to));
    c.notes
        .extend(c.reach.iter().flat_map(super::reach::Reach::lines));
    Ok(c)
}
