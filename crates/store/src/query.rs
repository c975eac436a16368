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
use std::io::{self, BufReader, Cursor, Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use corecap_index::{sidecar_path, Index, Predicate, Span};
use corecap_wire::{CaptureReader, Compression, Decompress, Epb, InterfaceDesc, PcapngWriter};
use serde::Serialize;

use crate::names::is_part;
use crate::sealed::{
    read_chunk, read_full, unseal, ChunkOpener, KeyFile, NextChunk, SealConfig, SealError,
    CHUNK_HEAD, MAGIC,
};
use corecap_linux::cbpf::{Meta, Program};

/// Largest read made at once when regions are merged.
const MAX_READ: u64 = 16 << 20;

/// Why a query failed (a file that cannot be answered at all, or the output).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// A file or the output failed.
    #[error("{path}: {cause}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        cause: io::Error,
    },
    /// A sealed file without a key, with the wrong key, or damaged.
    #[error("{path}: {cause}")]
    Sealed {
        /// The file.
        path: String,
        /// The cause.
        cause: SealError,
    },
    /// The filter does not compile.
    #[error("filter: {0}")]
    Filter(String),
    /// Writing the output failed.
    #[error("writing the output: {0}")]
    Output(io::Error),
    /// Something else about a file.
    #[error("{0}")]
    Other(String),
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> QueryError + '_ {
    move |cause| QueryError::Io {
        path: path.display().to_string(),
        cause,
    }
}

/// What to find.
#[derive(Clone, Debug, Default)]
pub struct QuerySpec {
    /// Capture files (see [`expand_paths`]).
    pub files: Vec<PathBuf>,
    /// Window start, ns since the epoch, inclusive.
    pub from: u64,
    /// Window end, ns, exclusive (`u64::MAX`: none).
    pub to: u64,
    /// tcpdump filter expression, if any.
    pub filter: Option<String>,
    /// Key-encryption key for sealed files.
    pub kek: Option<Arc<KeyFile>>,
    /// Read every file whole, ignoring its index: to check an answer, or to time a scan.
    pub scan: bool,
    /// Give once a packet that two files both hold (the same bytes at the same nanosecond,
    /// in two files): a daemon's spool holds copies of the recording's packets (an
    /// on-demand capture on a recorded interface), and its answer gives each packet once.
    pub once: bool,
}

/// What a query did.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct QueryStats {
    /// Packets written.
    pub packets: u64,
    /// Files considered.
    pub files: u64,
    /// Bytes of capture files read.
    pub bytes_read: u64,
    /// Bytes of all capture files.
    pub bytes_total: u64,
    /// Regions read.
    pub regions_read: u64,
    /// Regions in the indexes of the files.
    pub regions_total: u64,
    /// Files answered from their index.
    pub files_indexed: u64,
    /// Files scanned whole (no index, or an unusable one).
    pub files_scanned: u64,
    /// Files whose readable part ended early (cut short or damaged).
    pub files_truncated: u64,
    /// Files still being written, read up to their last whole block.
    pub files_live: u64,
    /// Files left unopened because their folder's catalog puts them outside the window.
    pub files_pruned: u64,
    /// Files not answered because the filter does not apply to their link type.
    pub files_refused: u64,
    /// Packets given once though two files held them ([`QuerySpec::once`]).
    pub duplicates: u64,
    /// Bytes of sidecar indexes read.
    pub index_bytes: u64,
    /// One line per notable event (a damaged index, a file cut short).
    pub notes: Vec<String>,
}

/// The catalogs of the folders a query reads, opened once each.
#[derive(Default)]
struct Catalogs {
    by_dir: HashMap<PathBuf, Option<HashMap<String, crate::Entry>>>,
    /// One line per folder whose catalog is there but cannot be read.
    notes: Vec<String>,
}

impl Catalogs {
    /// Whether the catalog of `f`'s folder says none of its packets is in `from..to`. Only
    /// an entry whose length and identity are the file's own is believed, as an index is
    /// (a file replaced since, even by one of the same length, is opened like one without
    /// an entry).
    fn outside(&mut self, f: &Path, from: u64, to: u64) -> bool {
        if from == 0 && to == u64::MAX {
            return false;
        }
        let dir = crate::names::dir_of(f).to_owned();
        let notes = &mut self.notes;
        let entries = self.by_dir.entry(dir.clone()).or_insert_with(|| {
            let read =
                crate::Catalog::try_read(&dir).and_then(|c| c.map(|c| c.entries()).transpose());
            match read {
                Ok(list) => Some(list?.into_iter().map(|e| (e.name.clone(), e)).collect()),
                Err(e) => {
                    // The catalog only spares opening files: they answer without it.
                    notes.push(format!("{e}; the files answer without it"));
                    None
                }
            }
        });
        let (Some(entries), Some(name)) = (entries.as_ref(), f.file_name()) else {
            return false;
        };
        let Some(e) = entries.get(name.to_string_lossy().as_ref()) else {
            return false;
        };
        if e.time.is_none() || e.overlaps(from, to) {
            return false;
        }
        File::open(f).is_ok_and(|file| {
            corecap_linux::direct::advise_random(&file);
            e.describes(&file)
        })
    }
}

pub use crate::sniff::{file_kind, FileKind};

/// Expands files and directories (a spool, a rotation directory) into capture files, in
/// name order. In directories, files still being written (`.NAME.part`) are included (a
/// query reads them up to their last whole block), while other hidden files, sidecars
/// (`.idx`) and files that are not captures are skipped; the second value
/// counts the skipped non-captures. A file named directly that is not a capture is an error.
pub fn expand_paths(paths: &[PathBuf]) -> Result<(Vec<PathBuf>, u64), QueryError> {
    let mut out = Vec::new();
    let mut skipped = 0;
    for p in paths {
        let meta = std::fs::metadata(p).map_err(io_at(p))?;
        if meta.is_dir() {
            let mut names: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(io_at(p))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .collect();
            names.sort();
            for f in names {
                let hidden = f
                    .file_name()
                    .is_none_or(|n| n.to_string_lossy().starts_with('.'));
                if (hidden && !is_part(&f)) || !f.is_file() {
                    continue;
                }
                match (file_kind(&f), crate::names::is_beside(&f)) {
                    // A file that cannot be read may be a capture: the answer would miss it.
                    (Err(e), false) if !hidden && e.kind() != io::ErrorKind::NotFound => {
                        return Err(io_at(&f)(e));
                    }
                    (Ok(FileKind::Plain | FileKind::Compressed(_)), _) => out.push(f),
                    // A sidecar (index or sessions): no capture magic, or sealed.
                    (_, true) => {}
                    (Ok(FileKind::Sealed), false) => out.push(f),
                    // A part whose first bytes are not on disk yet holds nothing to read.
                    _ if hidden => {}
                    _ => skipped += 1,
                }
            }
        } else {
            match file_kind(p).map_err(io_at(p))? {
                FileKind::Other => {
                    return Err(QueryError::Other(format!(
                        "{}: not a pcap, pcapng or sealed capture file",
                        p.display()
                    )))
                }
                _ => out.push(p.clone()),
            }
        }
    }
    Ok((out, skipped))
}

/// One read of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    /// Bytes `at` (whole regions, or the bytes past the index), parsed after the file header
    /// from the index unless they start the file.
    Range {
        /// Byte range.
        at: Range<u64>,
        /// Parse after the index's file header.
        after_header: bool,
    },
    /// The whole file from its start.
    Scan,
    /// The packets of these spans (from the postings), in file order, each read with the
    /// aligned 4 KiB blocks that hold it, parsed after the index's file header.
    Packets(Vec<Span>),
}

/// Spans of one [`Segment::Packets`] at most (a bounded buffer per segment).
const PACKETS_PER_SEGMENT: usize = 4096;
/// The unit of a packet read.
const PACKET_READ: u64 = 4096;

/// The reads of one file.
#[derive(Debug)]
pub struct FilePlan {
    /// The file.
    pub path: PathBuf,
    /// Its size.
    pub size: u64,
    /// Opener of a sealed file.
    opener: Option<Arc<ChunkOpener>>,
    /// Compression of the file (a compressed file is always scanned).
    pub compression: Compression,
    /// The capture file header (plaintext) from the index.
    header: Vec<u8>,
    /// Reads, in file order.
    pub segments: Vec<Segment>,
    /// Earliest timestamp the reads can give (0 when unknown).
    pub start_ts: u64,
    /// Regions chosen, and in the index.
    pub regions: (u64, u64),
    /// Answered from the index.
    pub indexed: bool,
    /// Why the index was not used, when it exists but is unusable.
    pub note: Option<String>,
    /// A file still being written (its hidden part): read up to its last whole block,
    /// which the writer's flush interval put on disk.
    pub live: bool,
    /// Every listed packet's blocks were announced to the device before the first read
    /// ([`prefetch`]): its reads do not announce them again.
    announced: bool,
}

/// The name a part gets once its file is whole: `.NAME.part` → `NAME`.
fn whole_name(part: &Path) -> Option<PathBuf> {
    let name = part.file_name()?.to_string_lossy().into_owned();
    let own = crate::names::whole_of_part(&name)?;
    Some(part.with_file_name(own))
}

/// Where a query reads an index's postings lists: the sidecar, still open, when only its
/// head was read ([`Index::parse_head`]); else the lists came with the index.
#[derive(Debug, Default)]
struct Lists {
    sidecar: Option<(File, u64)>,
    /// Bytes of lists read.
    bytes: u64,
    /// Some list looked up was damaged (its regions were read instead).
    damaged: bool,
}

impl Lists {
    /// Done with the lists of `plan`'s index: notes a damaged list on it; the bytes read.
    fn settle(self, plan: &mut FilePlan) -> u64 {
        if self.damaged {
            plan.note = Some(format!(
                "{}: a postings list of its index is damaged; the regions that may hold its \
                 packets were read instead (`corecap index` rewrites the index)",
                plan.path.display()
            ));
        }
        self.bytes
    }

    /// What the postings say of `key`, reading its list from the sidecar if need be.
    fn lookup(&mut self, post: &corecap_index::Postings, key: u64) -> corecap_index::Lookup {
        use std::os::unix::fs::FileExt;
        let (sidecar, bytes) = (self.sidecar.as_ref(), &mut self.bytes);
        post.lookup_with(key, |at, len| {
            let (f, size) = sidecar?;
            // A length is the sidecar's word: never allocate past what the file holds.
            if at.checked_add(len as u64)? > *size {
                return None;
            }
            let mut b = vec![0u8; len];
            f.read_exact_at(&mut b, at).ok()?;
            *bytes += len as u64;
            Some(b)
        })
    }
}

/// The sidecar of `path`: the index, the bytes read, and where its lists are. A plain
/// sidecar of version 3 is read in part: its trailer and head (regions, key table), and
/// each list only when a query looks its key up; a sealed one is unsealed whole.
fn load_index(path: &Path, kek: Option<&KeyFile>) -> Result<Option<(Index, u64, Lists)>, String> {
    use std::os::unix::fs::FileExt;
    let side = sidecar_path(path);
    let at = |e: io::Error| format!("{}: {e}", side.display());
    let f = match File::open(&side) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(at(e)),
    };
    let size = f.metadata().map_err(at)?.len();
    let tail = corecap_index::format::TRAILER_LEN as u64;
    let mut first = [0u8; 10];
    if size >= corecap_index::format::HEAD_LEN as u64 + tail {
        f.read_exact_at(&mut first, 0).map_err(at)?;
    }
    if Index::version(&first) == Ok(corecap_index::format::VERSION) {
        let mut trailer = [0u8; corecap_index::format::TRAILER_LEN];
        f.read_exact_at(&mut trailer, size - tail).map_err(at)?;
        let head_len = Index::head_len(&trailer)
            .ok()
            .filter(|&h| h <= size - tail)
            .ok_or_else(|| format!("{}: index is malformed: no trailer", side.display()))?;
        let mut head = vec![0u8; head_len as usize];
        f.read_exact_at(&mut head, 0).map_err(at)?;
        let ix =
            Index::parse_head(&head, &trailer).map_err(|e| format!("{}: {e}", side.display()))?;
        let lists = Lists {
            sidecar: Some((f, size)),
            ..Lists::default()
        };
        return Ok(Some((ix, head_len + tail, lists)));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    (&f).read_to_end(&mut bytes).map_err(at)?;
    let n = bytes.len() as u64;
    let plain = if bytes.starts_with(MAGIC) {
        let Some(kek) = kek else {
            return Err(format!("{}: sealed index and no key", side.display()));
        };
        let mut out = Vec::new();
        let r = unseal(&mut &bytes[..], kek, &mut out)
            .map_err(|e| format!("{}: {e}", side.display()))?;
        if !r.complete() {
            return Err(format!("{}: sealed index cut short", side.display()));
        }
        out
    } else {
        bytes
    };
    Index::parse(&plain)
        .map(|ix| Some((ix, n, Lists::default())))
        .map_err(|e| format!("{}: {e}", side.display()))
}

/// What a query's filter lets the index prune on, per link type: read from the program
/// libpcap compiles for that link type ([`Predicate::from_program`]), so the index and the
/// filter agree on what a packet is.
#[derive(Debug)]
pub struct Pruning<'a> {
    filter: Option<&'a str>,
    by_link: HashMap<u16, Predicate>,
}

impl<'a> Pruning<'a> {
    /// The pruning of `filter` (None or blank: prune by time only).
    pub fn new(filter: Option<&'a str>) -> Self {
        Self {
            filter: filter.filter(|f| !f.trim().is_empty()),
            by_link: HashMap::new(),
        }
    }

    /// The predicate for a file whose packets have these link types (None: unknown, which
    /// prunes nothing).
    pub fn for_links(&mut self, links: Option<&[u16]>) -> Predicate {
        let Some(expr) = self.filter else {
            return Predicate::Any;
        };
        let Some(links) = links.filter(|l| !l.is_empty()) else {
            return Predicate::Any;
        };
        let mut alts = Vec::with_capacity(links.len());
        for lt in links {
            let p = self.by_link.entry(*lt).or_insert_with(|| {
                // Compiled as for a little-endian file: the predicate reads a BSD NULL
                // header's AF_ value in either byte order (corecap_index::Predicate).
                match corecap_linux::filter::compile_for_file(*lt, false, 262_144, expr) {
                    Ok(prog) => {
                        let insns: Vec<corecap_index::Insn> = prog
                            .iter()
                            .map(|i| corecap_index::Insn {
                                code: i.code,
                                jt: i.jt,
                                jf: i.jf,
                                k: i.k,
                            })
                            .collect();
                        Predicate::from_program(*lt, &insns)
                    }
                    // The filter's error is reported when the file's packets are read.
                    Err(_) => Predicate::Any,
                }
            });
            alts.push(p.clone());
        }
        if alts.len() == 1 {
            alts.pop().unwrap_or(Predicate::Any)
        } else {
            Predicate::Or(alts)
        }
    }
}

/// Plans the reads of one file for a window and filter; adds the index's size to
/// `stats.index_bytes`.
pub fn plan_file(
    path: &Path,
    from: u64,
    to: u64,
    pruning: &mut Pruning<'_>,
    kek: Option<&Arc<KeyFile>>,
    stats: &mut QueryStats,
) -> Result<FilePlan, QueryError> {
    // A part renamed since the listing is a whole file now.
    let whole;
    let path = match whole_name(path) {
        Some(w) if is_part(path) && !path.exists() => {
            whole = w;
            whole.as_path()
        }
        _ => path,
    };
    let size = std::fs::metadata(path).map_err(io_at(path))?.len();
    let kind = file_kind(path).map_err(io_at(path))?;
    let opener = sealed_opener(path, kind, kek)?;
    let mut plan = FilePlan::scan(path, size, opener);
    if is_part(path) {
        plan.live = true;
        return Ok(plan);
    }
    if let FileKind::Compressed(c) = kind {
        plan.compression = c;
        plan.note = Some(format!(
            "{}: {c}-compressed, scanned whole (compressed files are not indexed)",
            path.display()
        ));
        return Ok(plan);
    }
    if let Some((index, mut lists)) = usable_index(&mut plan, kek, stats) {
        let links = corecap_index::header_linktypes(&index.header);
        let pred = pruning.for_links(links.as_deref());
        plan.choose_regions(index, &mut lists, from, to, &pred);
        stats.index_bytes += lists.settle(&mut plan);
    }
    Ok(plan)
}

/// Plans a read of the whole file, whatever its index says.
fn plan_scan(path: &Path, kek: Option<&Arc<KeyFile>>) -> Result<FilePlan, QueryError> {
    let size = std::fs::metadata(path).map_err(io_at(path))?.len();
    let kind = file_kind(path).map_err(io_at(path))?;
    let mut plan = FilePlan::scan(path, size, sealed_opener(path, kind, kek)?);
    if let FileKind::Compressed(c) = kind {
        plan.compression = c;
    }
    Ok(plan)
}

/// The chunk opener of a sealed file (None for any other kind).
fn sealed_opener(
    path: &Path,
    kind: FileKind,
    kek: Option<&Arc<KeyFile>>,
) -> Result<Option<Arc<ChunkOpener>>, QueryError> {
    if kind != FileKind::Sealed {
        return Ok(None);
    }
    let Some(k) = kek else {
        return Err(QueryError::Other(format!(
            "{}: sealed capture file; give --key-file",
            path.display()
        )));
    };
    let mut f = File::open(path).map_err(io_at(path))?;
    let opener = ChunkOpener::from_header(&mut f, k).map_err(|cause| QueryError::Sealed {
        path: path.display().to_string(),
        cause,
    })?;
    Ok(Some(Arc::new(opener)))
}

/// The file's index, when it exists, reads and can pick regions; adds its size to
/// `stats.index_bytes`. Otherwise the plan stays a scan, with a note saying why when the
/// index exists but cannot be used.
fn usable_index(
    plan: &mut FilePlan,
    kek: Option<&Arc<KeyFile>>,
    stats: &mut QueryStats,
) -> Option<(Index, Lists)> {
    let (index, lists) = match load_index(&plan.path, kek.map(|k| &**k)) {
        Ok(Some((ix, n, lists))) => {
            stats.index_bytes += n;
            (ix, lists)
        }
        Ok(None) => return None,
        Err(e) => {
            plan.note = Some(format!("{e}; scanning {}", plan.path.display()));
            return None;
        }
    };
    if index.covered > plan.size {
        plan.note = Some(format!(
            "{}: index covers {} bytes but the file has {} (stale index); scanning",
            plan.path.display(),
            index.covered,
            plan.size
        ));
        return None;
    }
    // The index describes these bytes only if they are the ones it was made from.
    let same = index.identity.is_some_and(|id| {
        File::open(&plan.path)
            .and_then(|f| {
                corecap_linux::direct::advise_random(&f);
                corecap_index::Identity::of_file(&f, index.covered)
            })
            .is_ok_and(|now| now == id)
    });
    stats.index_bytes += 2 * index.covered.min(corecap_index::format::IDENTITY_SPAN);
    if !same {
        plan.note = Some(format!(
            "{}: its index does not match it (the file was replaced or rewritten since); \
             scanning it (`corecap index` rewrites the index)",
            plan.path.display()
        ));
        return None;
    }
    index.random_access().then_some((index, lists))
}

/// The packets that can match `p`, from the postings: None where the postings cannot tell
/// (a dense key, or a test they do not hold), which reads regions.
fn postings_of(
    p: &Predicate,
    post: &corecap_index::Postings,
    lists: &mut Lists,
) -> Option<Vec<Span>> {
    use corecap_index::key::{port_key, proto_key, v4_key, v6_key, vlan_key};
    let mut look = |k: u64| match lists.lookup(post, k) {
        corecap_index::Lookup::Absent => Some(Vec::new()),
        corecap_index::Lookup::Dense => None,
        corecap_index::Lookup::Damaged => {
            lists.damaged = true;
            None
        }
        corecap_index::Lookup::Spans(v) => Some(v),
    };
    match p {
        Predicate::Any => None,
        Predicate::Host4(a) => look(v4_key(*a)),
        Predicate::Host6(a) => look(v6_key(a)),
        Predicate::Port(n) => look(port_key(*n)),
        Predicate::Proto(n) => look(proto_key(*n)),
        Predicate::Vlan(v) => look(vlan_key(*v)),
        Predicate::And(v) => {
            let mut sets: Vec<Vec<Span>> = v
                .iter()
                .filter_map(|c| postings_of(c, post, lists))
                .collect();
            sets.sort_by_key(Vec::len);
            let mut it = sets.into_iter();
            let first = it.next()?;
            Some(it.fold(first, |acc, s| corecap_index::intersect(&acc, &s)))
        }
        Predicate::Or(v) => {
            let mut all = Vec::new();
            for c in v {
                all = corecap_index::union(&all, &postings_of(c, post, lists)?);
            }
            Some(all)
        }
    }
}

impl FilePlan {
    /// A plan that reads the whole file.
    fn scan(path: &Path, size: u64, opener: Option<Arc<ChunkOpener>>) -> Self {
        FilePlan {
            path: path.to_owned(),
            size,
            opener,
            compression: Compression::None,
            header: Vec::new(),
            segments: vec![Segment::Scan],
            start_ts: 0,
            regions: (0, 0),
            indexed: false,
            note: None,
            live: false,
            announced: false,
        }
    }

    /// Reads what [`pick`] chooses: the packets the postings name (opaque regions whole),
    /// or else the regions that may match, adjacent ones merged up to `MAX_READ`; plus the
    /// bytes written after the index.
    fn choose_regions(
        &mut self,
        index: Index,
        lists: &mut Lists,
        from: u64,
        to: u64,
        pred: &Predicate,
    ) {
        let picked = pick(&index, lists, from, to, pred, self.opener.is_none());
        let first = index.regions.first().map_or(0, |r| r.at.start);
        let mut segs: Vec<Segment> = Vec::new();
        let mut group: Vec<Span> = Vec::new();
        let mut group_bytes = 0u64;
        let mut start_ts = u64::MAX;
        for (i, packets) in &picked.regions {
            let r = &index.regions[*i];
            start_ts = start_ts.min(r.ts_min);
            if let (Some(all), Some(range)) = (&picked.offsets, packets) {
                for o in &all[range.clone()] {
                    // A span never crosses its region's end (the builder ends runs there).
                    let span = Span {
                        end: o.end.min(r.at.end),
                        ..*o
                    };
                    group_bytes += span.end - span.start;
                    group.push(span);
                    if group.len() == PACKETS_PER_SEGMENT || group_bytes >= MAX_READ {
                        segs.push(Segment::Packets(std::mem::take(&mut group)));
                        group_bytes = 0;
                    }
                }
                continue;
            }
            if !group.is_empty() {
                segs.push(Segment::Packets(std::mem::take(&mut group)));
                group_bytes = 0;
            }
            if let Some(Segment::Range { at, .. }) = segs.last_mut() {
                if at.end == r.at.start && r.at.end - at.start <= MAX_READ {
                    at.end = r.at.end;
                    continue;
                }
            }
            segs.push(Segment::Range {
                at: r.at.clone(),
                after_header: r.at.start != first,
            });
        }
        if !group.is_empty() {
            segs.push(Segment::Packets(group));
        }
        self.take_reads(&index, segs, picked.regions.len() as u64, start_ts);
    }

    /// Makes `segs` (from `chosen` regions, earliest timestamp `start_ts`) the reads of
    /// this file, plus the bytes written after the index.
    fn take_reads(
        &mut self,
        index: &Index,
        mut segs: Vec<Segment>,
        chosen: u64,
        mut start_ts: u64,
    ) {
        if self.size > index.covered && !index.stopped() && !index.regions.is_empty() {
            // Bytes written after the index was made: read them too.
            segs.push(Segment::Range {
                at: index.covered..self.size,
                after_header: true,
            });
            start_ts = 0;
        }
        self.regions = (chosen, index.regions.len() as u64);
        self.header = index.header.clone();
        self.segments = segs;
        self.start_ts = if start_ts == u64::MAX { 0 } else { start_ts };
        self.indexed = true;
    }
}

/// What a query reads of an indexed file: the regions in its window, each whole or, where
/// the postings answer the filter, only its listed packets.
struct Picked {
    /// The packets the postings name (None: they cannot answer the filter).
    offsets: Option<Vec<Span>>,
    /// Regions read, in file order, with the range of `offsets` in each (None: whole).
    regions: Vec<(usize, Option<Range<usize>>)>,
}

/// Picks the reads of `index` for the window and `pred`. With postings (`postings`: the
/// file's offsets are its own, not a sealed file's), a region is read for its listed
/// packets, or whole when opaque (its packets' keys may be missing); without, every region
/// that may match is read whole.
fn pick(
    index: &Index,
    lists: &mut Lists,
    from: u64,
    to: u64,
    pred: &Predicate,
    postings: bool,
) -> Picked {
    let offsets = (postings && index.has_postings())
        .then(|| postings_of(pred, &index.postings, lists))
        .flatten();
    let mut regions = Vec::new();
    let mut next = 0;
    for (i, r) in index.regions.iter().enumerate() {
        let listed = offsets.as_ref().map(|o| {
            let lo = next + o[next..].partition_point(|x| x.start < r.at.start);
            next = lo + o[lo..].partition_point(|x| x.start < r.at.end);
            lo..next
        });
        if !r.overlaps(from, to) {
            continue;
        }
        match listed {
            Some(_) if r.opaque() => regions.push((i, None)),
            Some(range) if !range.is_empty() => regions.push((i, Some(range))),
            Some(_) => {}
            None if pred.may_match(r) => regions.push((i, None)),
            None => {}
        }
    }
    Picked { offsets, regions }
}

/// A packet held by the merge.
#[derive(Debug, Default)]
struct Held {
    ts_ns: u64,
    data: Vec<u8>,
    orig_len: u32,
    out_if: u32,
    queue: Option<u32>,
    hash: Option<u32>,
    dropcount: Option<u64>,
}

type Reader = CaptureReader<Box<dyn Read + Send>>;

/// Reads the matching packets of one file, segment by segment.
struct FileStream {
    plan: FilePlan,
    next_seg: usize,
    reader: Option<Reader>,
    /// Output interface of each interface of the current reader.
    if_map: Vec<Option<u32>>,
    held: Held,
    truncated: bool,
}

/// What the whole query shares: filters per link type, output interfaces, counters.
struct Ctx<'a, W: Write> {
    filter: Option<&'a str>,
    /// By link type and byte order (a BSD NULL header is in the writer's).
    programs: HashMap<(u16, bool), Program>,
    out: PcapngWriter<W>,
    out_ifs: HashMap<(String, Option<String>, u16, u32), u32>,
    from: u64,
    to: u64,
    stats: QueryStats,
    /// Why the filter did not apply to the first file it did not apply to.
    refused: Option<String>,
    /// With [`QuerySpec::once`]: the packets written at the newest time so far, each as
    /// (its file's stream, hash of its bytes, length on the wire).
    same_time: Option<(u64, Vec<Given>)>,
}

/// A packet written, as [`Ctx::given_before`] compares it: its file's stream, a hash of its
/// bytes, its length on the wire.
type Given = (usize, u64, u32);

impl<W: Write> Ctx<'_, W> {
    /// Whether the packet of stream `i` at `ts_ns` is one another file already gave (and
    /// is not to be written again); remembers it when it is not. Only with `once`.
    fn given_before(&mut self, i: usize, ts_ns: u64, data: &[u8], orig_len: u32) -> bool {
        let Some((at, seen)) = self.same_time.as_mut() else {
            return false;
        };
        if *at != ts_ns {
            *at = ts_ns;
            seen.clear();
        }
        let hash = xxhash_rust::xxh3::xxh3_64(data);
        if seen
            .iter()
            .any(|&(s, h, o)| s != i && h == hash && o == orig_len)
        {
            self.stats.duplicates += 1;
            return true;
        }
        seen.push((i, hash, orig_len));
        false
    }

    /// The filter as tcpdump compiles it for a file of `linktype` written in that byte order.
    fn program(&mut self, linktype: u16, big_endian: bool) -> Result<Option<&Program>, QueryError> {
        let Some(expr) = self.filter else {
            return Ok(None);
        };
        let key = (linktype, big_endian);
        if let std::collections::hash_map::Entry::Vacant(e) = self.programs.entry(key) {
            let insns =
                corecap_linux::filter::compile_for_file(linktype, big_endian, 262_144, expr)
                    .map_err(|e| QueryError::Filter(corecap_linux::error_chain(&e)))?;
            e.insert(Program::new(insns).map_err(|e| QueryError::Filter(e.to_string()))?);
        }
        Ok(self.programs.get(&key))
    }
}

/// How a file frames its packets, from its header (as the index keeps it).
#[derive(Clone, Copy, Debug)]
enum Framing {
    /// pcap records: big-endian, record header length.
    Pcap {
        be: bool,
        head: usize,
    },
    /// pcapng blocks in this byte order.
    Pcapng {
        be: bool,
    },
    Unknown,
}

impl Framing {
    fn of(header: &[u8]) -> Self {
        let Some(m) = header.get(..4) else {
            return Framing::Unknown;
        };
        match u32::from_le_bytes([m[0], m[1], m[2], m[3]]) {
            0xa1b2_c3d4 | 0xa1b2_3c4d => Framing::Pcap {
                be: false,
                head: 16,
            },
            0xd4c3_b2a1 | 0x4d3c_b2a1 => Framing::Pcap { be: true, head: 16 },
            0xa1b2_cd34 => Framing::Pcap {
                be: false,
                head: 24,
            },
            0x34cd_b2a1 => Framing::Pcap { be: true, head: 24 },
            0x0a0d_0d0a => match header.get(8..12).map(|b| [b[0], b[1], b[2], b[3]]) {
                Some([0x4d, 0x3c, 0x2b, 0x1a]) => Framing::Pcapng { be: false },
                Some([0x1a, 0x2b, 0x3c, 0x4d]) => Framing::Pcapng { be: true },
                _ => Framing::Unknown,
            },
            _ => Framing::Unknown,
        }
    }

    /// The length of the block (pcap record) at the start of `b`, when its length field is
    /// there; it may be longer than `b`.
    fn block_len(self, b: &[u8]) -> Option<usize> {
        let u32_at = |at: usize, be: bool| {
            b.get(at..at + 4).map(|x| {
                let a = [x[0], x[1], x[2], x[3]];
                if be {
                    u32::from_be_bytes(a)
                } else {
                    u32::from_le_bytes(a)
                }
            })
        };
        match self {
            Framing::Pcap { be, head } => Some(head + u32_at(8, be)? as usize),
            Framing::Pcapng { be } => Some(u32_at(4, be)? as usize).filter(|l| *l >= 12),
            Framing::Unknown => None,
        }
    }
}

/// The bytes of a file last read for packets: aligned 4 KiB blocks from `at`.
struct Window<'f> {
    framing: Framing,
    f: &'f File,
    bytes: Vec<u8>,
    at: u64,
}

impl Window<'_> {
    /// Appends the packet block at `off` to `out`, reading the blocks that hold it (and
    /// `ahead` bytes from `off`, for the packets after it) unless they are here; its
    /// length, or None where there is no whole block.
    fn packet(
        &mut self,
        off: u64,
        ahead: u64,
        out: &mut Vec<u8>,
        stats: &mut QueryStats,
    ) -> io::Result<Option<usize>> {
        let mut need = ahead.max(24);
        loop {
            let have = off >= self.at && off + need <= self.at + self.bytes.len() as u64;
            if !have {
                let start = off / PACKET_READ * PACKET_READ;
                let end = (off + need).div_ceil(PACKET_READ) * PACKET_READ;
                let held_end = self.at + self.bytes.len() as u64;
                // Blocks of the last read that the new window starts in are kept, not read
                // again: a run of packets that crosses a block's end, then the next run in
                // that block, would read the block twice (a query over packets spread
                // through a file read more than the whole file).
                let kept = if (self.at..held_end).contains(&start) {
                    self.bytes.drain(..(start - self.at) as usize);
                    self.bytes.len()
                } else {
                    0
                };
                self.bytes.resize(((end - start) as usize).max(kept), 0);
                let from = start + kept as u64;
                let got = read_full(&mut ReadAt(self.f, from), &mut self.bytes[kept..])?;
                self.bytes.truncate(kept + got);
                self.at = start;
                stats.bytes_read += got as u64;
            }
            let rel = (off - self.at) as usize;
            // A length past any block corecap reads (16 MiB) is no packet: skip it (the
            // reader after it says the file is damaged if the rest is).
            let Some(len) = self
                .framing
                .block_len(&self.bytes[rel.min(self.bytes.len())..])
                .filter(|l| *l <= 16 << 20)
            else {
                return Ok(None);
            };
            if rel + len <= self.bytes.len() {
                out.extend_from_slice(&self.bytes[rel..rel + len]);
                return Ok(Some(len));
            }
            if len as u64 <= need {
                // The file ends inside it.
                return Ok(None);
            }
            need = len as u64;
        }
    }
}

/// Reads a file from an offset on, by `pread`.
struct ReadAt<'a>(&'a File, u64);

impl Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let n = self.0.read_at(buf, self.1)?;
        self.1 += n as u64;
        Ok(n)
    }
}

/// Decrypts the whole chunks of `buf` (read at `offset`) into plaintext; the bool is false
/// when the bytes end inside a chunk.
fn open_chunks(
    o: &ChunkOpener,
    mut buf: Vec<u8>,
    offset: u64,
) -> Result<(Vec<u8>, bool), SealError> {
    let mut plain = Vec::with_capacity(buf.len());
    let mut at = 0usize;
    while at < buf.len() {
        match o.open(&mut buf[at..], offset + at as u64)? {
            Some(c) => {
                plain.extend_from_slice(&buf[at + CHUNK_HEAD..at + CHUNK_HEAD + c.plain_len]);
                at += c.sealed_len;
            }
            None => return Ok((plain, false)),
        }
    }
    buf.clear();
    Ok((plain, true))
}

/// Streams the plaintext of a sealed file from its first chunk.
struct SealedRead {
    f: BufReader<File>,
    opener: Arc<ChunkOpener>,
    offset: u64,
    buf: Vec<u8>,
    plain: Range<usize>,
    done: bool,
}

impl Read for SealedRead {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.plain.is_empty() && !self.done {
            match read_chunk(&mut self.f, &mut self.buf)? {
                NextChunk::End(_) => {
                    self.done = true;
                    break;
                }
                NextChunk::TooLong => {
                    return Err(io::Error::other(format!(
                        "bad chunk at offset {}",
                        self.offset
                    )));
                }
                NextChunk::Read => {}
            }
            match self.opener.open(&mut self.buf, self.offset) {
                Ok(Some(c)) => {
                    self.offset += c.sealed_len as u64;
                    self.plain = CHUNK_HEAD..CHUNK_HEAD + c.plain_len;
                }
                Ok(None) => self.done = true,
                Err(e) => return Err(io::Error::other(e.to_string())),
            }
        }
        let n = self.plain.len().min(out.len());
        out[..n].copy_from_slice(&self.buf[self.plain.start..self.plain.start + n]);
        self.plain.start += n;
        Ok(n)
    }
}

impl FileStream {
    fn new(plan: FilePlan) -> Self {
        Self {
            plan,
            next_seg: 0,
            reader: None,
            if_map: Vec::new(),
            held: Held::default(),
            truncated: false,
        }
    }

    fn note_cut(&mut self, stats: &mut QueryStats, what: String) {
        if !self.truncated {
            self.truncated = true;
            stats.files_truncated += 1;
        }
        stats.notes.push(format!(
            "{}: {what}; answered from the readable part",
            self.plan.path.display()
        ));
    }

    /// Opens the next segment's reader; false when none is left.
    fn open_next(&mut self, stats: &mut QueryStats) -> Result<bool, QueryError> {
        loop {
            let Some(seg) = self.plan.segments.get(self.next_seg).cloned() else {
                return Ok(false);
            };
            self.next_seg += 1;
            let input = match seg {
                Segment::Scan => match self.open_scan(stats)? {
                    Some(input) => input,
                    None => continue,
                },
                Segment::Range { at, after_header } => self.open_range(at, after_header, stats)?,
                Segment::Packets(offsets) => self.open_packets(&offsets, stats)?,
            };
            match CaptureReader::new(input) {
                Ok(r) => {
                    self.reader = Some(r);
                    self.if_map.clear();
                    return Ok(true);
                }
                Err(e) => {
                    self.note_cut(stats, format!("unreadable ({e})"));
                }
            }
        }
    }

    /// The whole file as a stream: decrypted chunk by chunk when sealed, decompressed
    /// when compressed. None (noted as cut) when a compressed file's header is unreadable.
    fn open_scan(
        &mut self,
        stats: &mut QueryStats,
    ) -> Result<Option<Box<dyn Read + Send>>, QueryError> {
        let path = &self.plan.path;
        stats.bytes_read += self.plan.size;
        let opened = match File::open(path) {
            // The writer finished the file since it was planned: read it under its name.
            Err(e) if e.kind() == io::ErrorKind::NotFound && self.plan.live => {
                whole_name(path).map_or(Err(e), File::open)
            }
            r => r,
        };
        let mut f = opened.map_err(io_at(path))?;
        match &self.plan.opener {
            Some(o) => {
                let mut skip = vec![0u8; o.header_len as usize];
                read_full(&mut f, &mut skip).map_err(io_at(path))?;
                Ok(Some(Box::new(SealedRead {
                    f: BufReader::with_capacity(1 << 20, f),
                    opener: o.clone(),
                    offset: o.header_len,
                    buf: Vec::new(),
                    plain: 0..0,
                    done: false,
                })))
            }
            None if self.plan.compression.is_compressed() => {
                let r = BufReader::with_capacity(1 << 20, f);
                match Decompress::new(r) {
                    Ok(d) => Ok(Some(Box::new(d))),
                    Err(e) => {
                        self.note_cut(stats, format!("unreadable ({e})"));
                        Ok(None)
                    }
                }
            }
            None => Ok(Some(Box::new(BufReader::with_capacity(1 << 20, f)))),
        }
    }

    /// The packets of `spans`, each read with the aligned 4 KiB blocks that hold it (one
    /// read per packet or run of packets, none where the previous read holds it), after the
    /// index's file header.
    fn open_packets(
        &mut self,
        spans: &[Span],
        stats: &mut QueryStats,
    ) -> Result<Box<dyn Read + Send>, QueryError> {
        let path = self.plan.path.clone();
        let f = File::open(&path).map_err(io_at(&path))?;
        corecap_linux::direct::advise_random(&f);
        // Every block is asked for first, so the device serves them together.
        if !self.plan.announced {
            announce(&f, spans, u64::MAX);
        }
        let mut win = Window {
            framing: Framing::of(&self.plan.header),
            f: &f,
            bytes: Vec::new(),
            at: 0,
        };
        let mut out = self.plan.header.clone();
        for s in spans {
            let mut off = s.start;
            while off < s.end {
                // Read through the span's end at once (a run's packets are in a row).
                let ahead = (s.end - off).min(MAX_READ);
                let Some(len) = win
                    .packet(off, ahead, &mut out, stats)
                    .map_err(io_at(&path))?
                else {
                    break;
                };
                off += len as u64;
            }
        }
        Ok(Box::new(Cursor::new(out)))
    }

    /// Bytes `at` of the file (fewer at its end), decrypted when sealed, after the index's
    /// file header when `after_header`.
    fn open_range(
        &mut self,
        at: Range<u64>,
        after_header: bool,
        stats: &mut QueryStats,
    ) -> Result<Box<dyn Read + Send>, QueryError> {
        let path = self.plan.path.clone();
        let mut buf = vec![0u8; (at.end - at.start) as usize];
        let mut f = File::open(&path).map_err(io_at(&path))?;
        f.seek(SeekFrom::Start(at.start)).map_err(io_at(&path))?;
        let got = read_full(&mut f, &mut buf).map_err(io_at(&path))?;
        buf.truncate(got);
        stats.bytes_read += got as u64;
        let plain = match &self.plan.opener {
            Some(o) => {
                let (plain, whole) =
                    open_chunks(o, buf, at.start).map_err(|cause| QueryError::Sealed {
                        path: path.display().to_string(),
                        cause,
                    })?;
                if !whole {
                    self.note_cut(
                        stats,
                        format!(
                            "cut short inside the chunk read at {}..{}",
                            at.start, at.end
                        ),
                    );
                }
                plain
            }
            None => buf,
        };
        let head = if after_header {
            self.plan.header.clone()
        } else {
            Vec::new()
        };
        Ok(Box::new(Cursor::new(head).chain(Cursor::new(plain))))
    }

    /// Reads to the next packet that matches; false at the end of the file.
    fn advance<W: Write>(&mut self, ctx: &mut Ctx<'_, W>) -> Result<bool, QueryError> {
        loop {
            if self.reader.is_none() && !self.open_next(&mut ctx.stats)? {
                return Ok(false);
            }
            let Some(r) = self.reader.as_mut() else {
                continue;
            };
            let rec = match r.next_packet() {
                Ok(Some(rec)) => rec,
                Ok(None) => {
                    self.reader = None;
                    continue;
                }
                Err(_) if self.plan.live => {
                    // A file being written ends where its whole blocks end.
                    self.reader = None;
                    continue;
                }
                Err(e) => {
                    let at = match self.plan.segments.get(self.next_seg - 1) {
                        Some(Segment::Range { at, .. }) => {
                            format!(" in bytes {}..{}", at.start, at.end)
                        }
                        _ => String::new(),
                    };
                    self.reader = None;
                    self.note_cut(&mut ctx.stats, format!("{e}{at}"));
                    continue;
                }
            };
            if rec.ts_ns < ctx.from || rec.ts_ns >= ctx.to {
                continue;
            }
            let (ts, orig, lt, if_id) = (rec.ts_ns, rec.orig_len, rec.linktype, rec.if_id);
            let (queue, hash, dropcount) = (rec.queue, rec.hash, rec.dropcount);
            self.held.data.clear();
            self.held.data.extend_from_slice(rec.data);
            let big_endian = self.reader.as_ref().is_some_and(|r| r.big_endian());
            let program = match ctx.program(lt, big_endian) {
                Ok(p) => p,
                // libpcap has no code for this filter on this file's link type (`vlan` on
                // raw IP): this file is not answered, and says so; the others are.
                Err(QueryError::Filter(why)) => {
                    let path = self.plan.path.display().to_string();
                    ctx.stats.files_refused += 1;
                    ctx.stats.notes.push(format!(
                        "{path}: the filter does not apply to its link type {lt}: {why}; this \
                         file is not answered"
                    ));
                    ctx.refused.get_or_insert(why);
                    self.reader = None;
                    self.next_seg = self.plan.segments.len();
                    return Ok(false);
                }
                Err(e) => return Err(e),
            };
            if let Some(p) = program {
                let meta = Meta {
                    vlan: None,
                    queue: queue.unwrap_or(0),
                    protocol: self
                        .held
                        .data
                        .get(12..14)
                        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]])),
                };
                if p.run(&self.held.data, orig, &meta) == 0 {
                    continue;
                }
            }
            let out_if = self.out_interface(if_id, ctx)?;
            let h = &mut self.held;
            (h.ts_ns, h.orig_len, h.out_if) = (ts, orig, out_if);
            (h.queue, h.hash, h.dropcount) = (queue, hash, dropcount);
            return Ok(true);
        }
    }

    fn out_interface<W: Write>(
        &mut self,
        if_id: u32,
        ctx: &mut Ctx<'_, W>,
    ) -> Result<u32, QueryError> {
        let i = if_id as usize;
        if let Some(Some(o)) = self.if_map.get(i) {
            return Ok(*o);
        }
        let Some(r) = self.reader.as_ref() else {
            return Ok(0);
        };
        let d = r.interfaces().get(i).cloned().ok_or_else(|| {
            QueryError::Other(format!(
                "{}: packet for an unknown interface",
                self.plan.path.display()
            ))
        })?;
        let key = (
            d.name.clone().unwrap_or_default(),
            d.description.clone(),
            d.linktype,
            d.snaplen,
        );
        let id = match ctx.out_ifs.get(&key) {
            Some(id) => *id,
            None => {
                let id = ctx
                    .out
                    .add_interface(&InterfaceDesc {
                        name: key.0.clone(),
                        description: key.1.clone(),
                        linktype: key.2,
                        snaplen: key.3,
                    })
                    .map_err(QueryError::Output)?;
                ctx.out_ifs.insert(key, id);
                id
            }
        };
        if self.if_map.len() <= i {
            self.if_map.resize(i + 1, None);
        }
        self.if_map[i] = Some(id);
        Ok(id)
    }
}

/// Runs a query: writes the matching packets, in timestamp order, as one pcapng to `out`.
pub fn run<W: Write>(spec: &QuerySpec, out: W) -> Result<QueryStats, QueryError> {
    let _leases = lease_folders(&spec.files);
    let mut stats = QueryStats::default();
    let mut plans = plan_all(spec, &mut stats)?;
    plans.sort_by_key(|p| p.start_ts);
    let out = PcapngWriter::new(out, "corecap query", &[]).map_err(QueryError::Output)?;
    let mut ctx = Ctx {
        filter: spec.filter.as_deref().filter(|f| !f.trim().is_empty()),
        programs: HashMap::new(),
        out,
        out_ifs: HashMap::new(),
        from: spec.from,
        to: spec.to,
        stats,
        refused: None,
        same_time: spec.once.then(|| (u64::MAX, Vec::new())),
    };
    // With no file to read, the filter is still checked (as tcpdump checks it for Ethernet);
    // otherwise each file's link type checks it.
    if plans.is_empty() {
        ctx.program(corecap_wire::pcapng::LINKTYPE_ETHERNET, false)?;
    }
    let planned = plans.len() as u64;
    prefetch(&mut plans);
    merge(plans, &mut ctx)?;
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
    Ok(ctx.stats)
}

/// Bytes of listed packets announced to the device before the first read, at most.
const PREFETCH: u64 = 256 << 20;

/// Asks the device for the aligned blocks of `spans` (`FADV_WILLNEED`), up to `budget`
/// bytes; the bytes asked for, or None where the budget ran out first.
fn announce(f: &File, spans: &[Span], budget: u64) -> Option<u64> {
    let (mut asked, mut last) = (0u64, 0u64);
    for s in spans {
        let block = (s.start / PACKET_READ * PACKET_READ).max(last);
        let end = s.end.max(s.start + 1).div_ceil(PACKET_READ) * PACKET_READ;
        if block >= end {
            continue;
        }
        asked += end - block;
        if asked > budget {
            return None;
        }
        corecap_linux::direct::advise_willneed(f, block, end - block);
        last = end;
    }
    Some(asked)
}

/// Announces the blocks of every file's listed packets to the device at once, so their
/// reads are in flight together across files rather than file by file as each is opened;
/// up to [`PREFETCH`] bytes. A file whose packets all fit is marked announced. A file that
/// cannot be opened is left to its read, which reports it.
fn prefetch(plans: &mut [FilePlan]) {
    let mut budget = PREFETCH;
    for plan in plans {
        if !plan
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
/// there meanwhile (see `corecap_linux::direct::Lease`).
fn lease_folders(files: &[PathBuf]) -> Vec<corecap_linux::direct::Lease> {
    let mut dirs: Vec<&Path> = files.iter().map(|f| crate::names::dir_of(f)).collect();
    dirs.sort();
    dirs.dedup();
    dirs.into_iter()
        .filter_map(|d| corecap_linux::direct::Lease::shared(d).ok())
        .collect()
}

/// Plans the reads of every file of `spec` (those with something to read), counting
/// each in `stats`.
fn plan_all(spec: &QuerySpec, stats: &mut QueryStats) -> Result<Vec<FilePlan>, QueryError> {
    let mut pruning = Pruning::new(spec.filter.as_deref());
    let mut catalogs = Catalogs::default();
    let mut plans = Vec::new();
    for f in &spec.files {
        stats.files += 1;
        if !spec.scan && catalogs.outside(f, spec.from, spec.to) {
            // The folder's catalog says no packet of this file is in the window: neither
            // the file nor its index is opened.
            stats.files_pruned += 1;
            continue;
        }
        let plan = if spec.scan {
            plan_scan(f, spec.kek.as_ref())?
        } else {
            plan_file(
                f,
                spec.from,
                spec.to,
                &mut pruning,
                spec.kek.as_ref(),
                stats,
            )?
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

/// Reads the planned files (in start-time order) and writes their matching packets merged
/// in timestamp order: a file is opened once the merge reaches its first timestamp.
fn merge<W: Write>(plans: Vec<FilePlan>, ctx: &mut Ctx<'_, W>) -> Result<(), QueryError> {
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

/// What [`build_index`] did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct IndexReport {
    /// Packets indexed.
    pub packets: u64,
    /// Regions.
    pub regions: u32,
    /// Bytes of the file covered.
    pub covered: u64,
    /// Bytes of the file.
    pub size: u64,
    /// Bytes of the sidecar.
    pub index_bytes: u64,
    /// Where the readable part ended, when the file was cut short or damaged.
    pub cut_short: Option<u64>,
    /// The sidecar is sealed.
    pub sealed: bool,
    /// Why no sidecar was written (a compressed file), if so.
    pub not_indexed: Option<String>,
}

/// Builds and writes the sidecar of a pcap, pcapng or sealed capture file (regions of
/// about 1 MiB at block boundaries; for a sealed file, runs of whole chunks). A sealed
/// file needs its key; its sidecar is sealed under it.
pub fn build_index(path: &Path, kek: Option<&Arc<KeyFile>>) -> Result<IndexReport, QueryError> {
    let size = std::fs::metadata(path).map_err(io_at(path))?.len();
    let (sidecar, mut report, seal) = match file_kind(path).map_err(io_at(path))? {
        FileKind::Other => {
            return Err(QueryError::Other(format!(
                "{}: not a pcap, pcapng or sealed capture file",
                path.display()
            )))
        }
        FileKind::Compressed(c) => {
            return Ok(IndexReport {
                size,
                not_indexed: Some(format!(
                "{}: {c}-compressed; compressed files are not indexed (queries scan them whole)",
                path.display()
            )),
                ..IndexReport::default()
            })
        }
        FileKind::Plain => {
            let f = File::open(path).map_err(io_at(path))?;
            let b =
                corecap_index::index_file(&f, corecap_index::REGION_SIZE).map_err(io_at(path))?;
            let report = IndexReport {
                packets: b.packets,
                regions: b.regions,
                covered: b.covered,
                cut_short: b.cut_short,
                ..IndexReport::default()
            };
            (b.sidecar, report, None)
        }
        FileKind::Sealed => {
            let Some(kek) = kek else {
                return Err(QueryError::Other(format!(
                    "{}: sealed capture file; give --key-file",
                    path.display()
                )));
            };
            index_sealed(path, kek)?
        }
    };
    report.size = size;
    report.index_bytes = sidecar.len() as u64;
    report.sealed = seal.is_some();
    crate::sidecar::write_sidecar(&sidecar_path(path), &sidecar, seal.as_ref())
        .map_err(io_at(&sidecar_path(path)))?;
    if seal.is_some() {
        report.index_bytes =
            std::fs::metadata(sidecar_path(path)).map_or(report.index_bytes, |m| m.len());
    }
    // The folder's catalog learns the file (made, or rebuilt from the files, if needed): a
    // window then opens only the files it overlaps. A catalog that cannot be written costs
    // nothing but that.
    if let (Ok(ix), Some(name)) = (Index::parse(&sidecar), path.file_name()) {
        let name = name.to_string_lossy().into_owned();
        let state = if crate::names::is_recovered(Path::new(&name)) {
            crate::State::Recovered
        } else {
            crate::State::Whole
        };
        let e = crate::Entry {
            name,
            state,
            time: ix.time_range(),
            packets: ix.packets(),
            bytes: size,
            index_bytes: report.index_bytes,
            identity: ix.identity.map(|id| (ix.covered, id)),
        };
        let _ = crate::catalog_update::record(&e, crate::names::dir_of(path));
    }
    Ok(report)
}

/// Indexes a sealed file: runs of whole chunks of about 1 MiB of plaintext are regions.
fn index_sealed(
    path: &Path,
    kek: &Arc<KeyFile>,
) -> Result<(Vec<u8>, IndexReport, Option<SealConfig>), QueryError> {
    let mut f = BufReader::with_capacity(1 << 20, File::open(path).map_err(io_at(path))?);
    let sealed_err = |cause| QueryError::Sealed {
        path: path.display().to_string(),
        cause,
    };
    let o = ChunkOpener::from_header(&mut f, kek).map_err(sealed_err)?;
    let mut b = corecap_index::IndexBuilder::without_postings();
    let mut report = IndexReport::default();
    let mut offset = o.header_len;
    let mut region_start = offset;
    let mut plain: Vec<u8> = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut last = false;
    loop {
        let next = read_chunk(&mut f, &mut buf).map_err(io_at(path))?;
        let n = match next {
            NextChunk::End(n) => n,
            NextChunk::TooLong => {
                return Err(sealed_err(SealError::Tampered {
                    index: 0,
                    offset,
                    good: 0,
                }))
            }
            NextChunk::Read => CHUNK_HEAD,
        };
        let mut whole = n == CHUNK_HEAD;
        if whole {
            match o.open(&mut buf, offset).map_err(sealed_err)? {
                Some(c) => {
                    plain.extend_from_slice(&buf[CHUNK_HEAD..CHUNK_HEAD + c.plain_len]);
                    offset += c.sealed_len as u64;
                    last = c.last;
                }
                None => whole = false,
            }
        }
        if !whole && n > 0 {
            report.cut_short = Some(offset);
        }
        if !whole && n == 0 && !last {
            report.cut_short = Some(offset);
        }
        if (!whole || plain.len() >= corecap_index::REGION_SIZE) && offset > region_start {
            b.add_region(region_start..offset, &plain);
            report.regions += 1;
            plain.clear();
            region_start = offset;
        }
        if !whole {
            break;
        }
    }
    report.packets = b.packets();
    report.covered = offset;
    if offset > 0 {
        let f = File::open(path).map_err(io_at(path))?;
        b.set_identity(corecap_index::Identity::of_file(&f, b.covered()).map_err(io_at(path))?);
    }
    let cfg = SealConfig {
        cipher: o.cipher,
        kek: kek.clone(),
    };
    Ok((b.finish(), report, Some(cfg)))
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
    /// Notes (an index that does not match its file).
    pub notes: Vec<String>,
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
    Ok(c)
}

/// A time as a user gives it, in ns since the epoch: Unix seconds (with a fraction), RFC 3339
/// with its offset, a date and time of day without one (`2026-11-23 10:00:00[.frac]`, as
/// Wireshark and capinfos print it; `2026-11-23 10:00`; `2026-11-23`) in the local time
/// zone (`TZ`, else the system's), or relative to `now` (`-15m`, `-10min`, `-2hours`,
/// `-30s`, `-1d`, `-1week`).
pub fn parse_time(s: &str, now: u64) -> Result<u64, String> {
    parse_time_in(s, now, &jiff::tz::TimeZone::system())
}

/// [`parse_time`], with times of day without an offset in `zone`.
pub fn parse_time_in(s: &str, now: u64, zone: &jiff::tz::TimeZone) -> Result<u64, String> {
    let s = s.trim();
    if let Some(rel) = s.strip_prefix('-') {
        return relative(rel).map(|back| now.saturating_sub(back));
    }
    if s.bytes().all(|b| b.is_ascii_digit() || b == b'.') && !s.is_empty() {
        return unix_seconds(s);
    }
    date_time(s, zone)
}

/// The time zone of `--tz`: an IANA name (`Europe/Paris`, `UTC`) from the system's zone
/// database, or a POSIX TZ rule (`CET-1CEST,M3.5.0,M10.5.0/3`); without one, `TZ` or the
/// system's zone.
pub fn time_zone(name: Option<&str>) -> Result<jiff::tz::TimeZone, String> {
    let Some(name) = name else {
        return Ok(jiff::tz::TimeZone::system());
    };
    jiff::tz::TimeZone::get(name)
        .or_else(|e| jiff::tz::TimeZone::posix(name).map_err(|_| e))
        .map_err(|e| format!("time zone {name}: {e}"))
}

/// An instant, ns since the epoch, as RFC 3339 in UTC with nanoseconds
/// (`2026-11-23T10:00:00.000000000Z`): how a window is shown back.
pub fn utc_text(ns: u64) -> String {
    let ts = i128::from(ns);
    jiff::Timestamp::from_nanosecond(ts).map_or_else(|_| format!("{ns} ns"), |t| format!("{t:.9}"))
}

/// ns in `-N UNIT` (the `-` taken off): units s, m, h, d, w, or their words.
fn relative(rel: &str) -> Result<u64, String> {
    let split = rel
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or("a relative time needs a unit: s, m, h, d or w (e.g. -15m, -2hours)")?;
    let (num, unit) = rel.split_at(split);
    let secs: u64 = match unit.trim() {
        "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        "w" | "week" | "weeks" => 7 * 86_400,
        u => {
            return Err(format!(
                "unknown unit {u:?}: s, m, h, d or w (or sec, min, hours, days, weeks)"
            ))
        }
    };
    let n: f64 = num
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)
        .ok_or("not a number before the unit")?;
    Ok((n * secs as f64 * 1e9) as u64)
}

fn unix_seconds(s: &str) -> Result<u64, String> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() || frac.contains('.') {
        return Err("not a Unix time in seconds".into());
    }
    let secs: u64 = int.parse().map_err(|_| "not a Unix time in seconds")?;
    Ok(secs
        .checked_mul(1_000_000_000)
        .ok_or("time out of range")?
        .saturating_add(fraction_ns(frac)?))
}

fn fraction_ns(frac: &str) -> Result<u64, String> {
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err("bad fraction of a second".into());
    }
    let mut ns = 0u64;
    for (i, b) in frac.bytes().take(9).enumerate() {
        ns += u64::from(b - b'0') * 10u64.pow(8 - i as u32);
    }
    Ok(ns)
}

/// Days from 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The days of month `m` (1 to 12) of year `y` (proleptic Gregorian).
fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Why a date and time of day that parsed as numbers does not exist, if it does not: a
/// time is never carried into the next day, month or minute (`2026-02-31` is no March 3).
/// Second 60 is refused too: Unix time, and so every packet's time, has no leap second.
fn impossible(y: i64, mo: i64, d: i64, h: i64, mi: i64, sec: i64) -> Option<String> {
    if !(1..=12).contains(&mo) {
        return Some(format!("month {mo:02} does not exist (01 to 12)"));
    }
    let days = days_in_month(y, mo);
    if !(1..=days).contains(&d) {
        let month = MONTHS[(mo - 1) as usize];
        return Some(format!(
            "day {d:02} does not exist: {month} {y:04} has {days} days"
        ));
    }
    if h > 23 {
        return Some(format!("hour {h:02} does not exist (00 to 23)"));
    }
    if mi > 59 {
        return Some(format!("minute {mi:02} does not exist (00 to 59)"));
    }
    if sec == 60 {
        return Some(
            "second 60 is a leap second, which Unix time and packet times do not have (00 to 59)"
                .into(),
        );
    }
    if sec > 59 {
        return Some(format!("second {sec:02} does not exist (00 to 59)"));
    }
    None
}

/// `YYYY-MM-DD[(T| )HH:MM[:SS[.frac]]][Z|±HH:MM]` (also `t` for the `T`): with an offset,
/// RFC 3339; without one, a time of day in `zone`. A date or time of day that does not
/// exist is an error that says which part.
fn date_time(s: &str, zone: &jiff::tz::TimeZone) -> Result<u64, String> {
    let bad = || {
        "not Unix seconds, a date and time (2026-11-23 10:00:00, 2026-11-23T10:00:00Z) or \
         relative (-15m, -2hours)"
            .to_string()
    };
    // The shorter forms, made whole: a date is its midnight, a minute its second 0.
    let whole;
    let s = match s.len() {
        10 => {
            whole = format!("{s} 00:00:00");
            whole.as_str()
        }
        16 => {
            whole = format!("{s}:00");
            whole.as_str()
        }
        _ => s,
    };
    let b = s.as_bytes();
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| -> Result<i64, String> {
        s.get(r)
            .filter(|t| t.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|t| t.parse().ok())
            .ok_or_else(bad)
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if let Some(why) = impossible(y, mo, d, h, mi, sec) {
        return Err(why);
    }
    let mut rest = &s[19..];
    let mut frac_ns = 0;
    if let Some(r) = rest.strip_prefix('.') {
        let n = r.bytes().take_while(u8::is_ascii_digit).count();
        frac_ns = fraction_ns(&r[..n])?;
        rest = &r[n..];
    }
    // Bytes, not string slices: an offset may hold any UTF-8, and slicing a string
    // inside a character would panic.
    let offset = match rest.as_bytes() {
        b"" => return local(zone, (y, mo, d, h, mi, sec), frac_ns),
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2]
            if [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()) =>
        {
            let digit = |c: &u8| i64::from(c - b'0');
            let (oh, om) = (digit(h1) * 10 + digit(h2), digit(m1) * 10 + digit(m2));
            if oh > 23 || om > 59 {
                return Err(format!(
                    "offset {}{oh:02}:{om:02} does not exist (hours 00 to 23, minutes 00 to 59)",
                    char::from(*sign)
                ));
            }
            let v = oh * 3600 + om * 60;
            if *sign == b'-' {
                -v
            } else {
                v
            }
        }
        _ => return Err(bad()),
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec - offset;
    if secs < 0 {
        return Err("time before 1970".into());
    }
    Ok(secs as u64 * 1_000_000_000 + frac_ns)
}

/// A date and time of day (already checked to exist) in `zone`, ns since the epoch. A time
/// a clock change skips or repeats is taken as the clocks give it first (RFC 5545's rule).
fn local(
    zone: &jiff::tz::TimeZone,
    t: (i64, i64, i64, i64, i64, i64),
    frac_ns: u64,
) -> Result<u64, String> {
    let (y, mo, d, h, mi, sec) = t;
    let civil = jiff::civil::DateTime::new(
        y as i16,
        mo as i8,
        d as i8,
        h as i8,
        mi as i8,
        sec as i8,
        frac_ns as i32,
    )
    .map_err(|e| e.to_string())?;
    let ts = zone
        .to_ambiguous_zoned(civil)
        .compatible()
        .map_err(|e| e.to_string())?
        .timestamp();
    u64::try_from(ts.as_nanosecond()).map_err(|_| "time before 1970".to_string())
}

#[cfg(test)]
mod time_tests {
    use super::*;

    /// Issue 39: the times Wireshark and capinfos print, in a given zone, and relative
    /// times spelled out.
    #[test]
    fn test_issue39_local_times_and_spelled_units() {
        let now = 1_800_000_000_000_000_000;
        let utc = jiff::tz::TimeZone::UTC;
        let paris = time_zone(Some("CET-1CEST,M3.5.0,M10.5.0/3")).expect("rule");
        let z = parse_time("2026-11-23T10:00:00Z", now).expect("rfc 3339");
        assert_eq!(parse_time_in("2026-11-23 10:00:00", now, &utc), Ok(z));
        assert_eq!(parse_time_in("2026-11-23 11:00:00", now, &paris), Ok(z));
        assert_eq!(
            parse_time_in("2026-11-23 11:00:00.25", now, &paris),
            Ok(z + 250_000_000)
        );
        assert_eq!(parse_time_in("2026-11-23 11:00", now, &paris), Ok(z));
        assert_eq!(
            parse_time_in("2026-11-23", now, &utc),
            Ok(z - 10 * 3_600_000_000_000)
        );
        // Summer time: two hours ahead.
        let july = parse_time("2026-07-01T10:00:00Z", now).expect("july");
        assert_eq!(parse_time_in("2026-07-01 12:00:00", now, &paris), Ok(july));
        // The offset given wins over the zone.
        assert_eq!(parse_time_in("2026-11-23T10:00:00Z", now, &paris), Ok(z));
        for (rel, secs) in [
            ("-10min", 600),
            ("-2hours", 7200),
            ("-30sec", 30),
            ("-1day", 86_400),
            ("-1week", 604_800),
            ("-15m", 900),
        ] {
            assert_eq!(
                parse_time_in(rel, now, &utc),
                Ok(now - secs * 1_000_000_000),
                "{rel}"
            );
        }
        assert!(parse_time_in("-3fortnights", now, &utc).is_err());
        assert!(parse_time_in("2026-02-31 10:00:00", now, &paris).is_err());
        assert!(time_zone(Some("Not/AZone")).is_err());
    }

    #[test]
    fn test_parse_times() {
        let now = 1_800_000_000_000_000_000;
        assert_eq!(
            parse_time("1700000000", now).unwrap(),
            1_700_000_000_000_000_000
        );
        assert_eq!(
            parse_time("1700000000.25", now).unwrap(),
            1_700_000_000_250_000_000
        );
        assert_eq!(parse_time("-15m", now).unwrap(), now - 900_000_000_000);
        assert_eq!(parse_time("-2h", now).unwrap(), now - 7_200_000_000_000);
        assert_eq!(parse_time("-30s", now).unwrap(), now - 30_000_000_000);
        assert_eq!(
            parse_time("2023-11-14T22:13:20Z", now).unwrap(),
            1_700_000_000_000_000_000
        );
        assert_eq!(
            parse_time("2023-11-15T00:13:20.5+02:00", now).unwrap(),
            1_700_000_000_500_000_000
        );
        for bad in [
            "",
            "yesterday",
            "-15",
            "2023-13-01T00:00:00Z",
            "1.2.3",
            "-5x",
        ] {
            assert!(parse_time(bad, now).is_err(), "{bad}");
        }
    }

    /// Issue 40: `2026-02-31` was taken as March 3. A date or time of day that does not
    /// exist is refused, with one line that says which part is wrong.
    #[test]
    fn issue40_impossible_dates_are_refused() {
        let now = 1_800_000_000_000_000_000;
        for (bad, says) in [
            ("2026-02-31T00:00:00Z", "February 2026 has 28 days"),
            ("2026-02-29T12:00:00Z", "February 2026 has 28 days"),
            ("2100-02-29T12:00:00Z", "February 2100 has 28 days"),
            ("2026-04-31T00:00:00Z", "April 2026 has 30 days"),
            ("2026-01-32T00:00:00Z", "January 2026 has 31 days"),
            ("2026-01-00T00:00:00Z", "day 00"),
            ("2026-13-01T00:00:00Z", "month 13"),
            ("2026-00-01T00:00:00Z", "month 00"),
            ("2026-01-01T24:00:00Z", "hour 24"),
            ("2026-01-01T23:60:00Z", "minute 60"),
            ("2026-01-01T23:59:61Z", "second 61"),
            ("2026-01-01T10:00:60Z", "second 60"),
            ("2026-01-01T10:00:00+24:00", "offset +24:00"),
            ("2026-01-01T10:00:00+05:60", "offset +05:60"),
        ] {
            let e = parse_time(bad, now).expect_err(bad);
            assert!(e.contains(says), "{bad}: {e}");
            assert!(!e.contains('\n'), "{bad}: one line: {e}");
        }
        // The days that do exist, leap days among them.
        for (good, secs) in [
            ("2024-02-29T00:00:00Z", 1_709_164_800u64),
            ("2000-02-29T00:00:00Z", 951_782_400),
            ("2026-02-28T23:59:59Z", 1_772_323_199),
            ("2026-12-31T23:59:59.5Z", 1_798_761_599),
        ] {
            let got = parse_time(good, now).unwrap_or_else(|e| panic!("{good}: {e}"));
            assert_eq!(got / 1_000_000_000, secs, "{good}");
        }
    }

    #[test]
    fn test_non_ascii_anywhere_is_an_error_not_a_panic() {
        let now = 1_800_000_000_000_000_000;
        let good = [
            "2023-11-14T22:13:20+05:30",
            "2023-11-14T22:13:20.5Z",
            "1700000000.25",
            "-15m",
        ];
        for g in good {
            for i in 0..=g.len() {
                for c in ["\u{e9}", "\u{20ac}", "\u{1f600}", "\u{0}"] {
                    // Inserted before byte i, and in place of the byte at i.
                    let with = format!("{}{c}{}", &g[..i], &g[i..]);
                    assert!(parse_time(&with, now).is_err(), "{with:?}");
                    if i < g.len() {
                        let instead = format!("{}{c}{}", &g[..i], &g[i + 1..]);
                        assert!(parse_time(&instead, now).is_err(), "{instead:?}");
                    }
                }
            }
        }
        // The offset a user would type with a Unicode minus sign.
        assert!(parse_time("2023-11-14T22:13:20\u{2212}05:00", now).is_err());
        assert!(parse_time("2023-11-14T22:13:20+24:00", now).is_err());
    }
}
