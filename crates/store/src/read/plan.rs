//! Planning a query's reads: the files a query names, and for each the regions of its
//! index that can match, or the whole file.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use corecap_index::{sidecar_path, Index, Predicate, Span};
use corecap_wire::Compression;

use super::outcome::{io_at, QueryError, QueryStats, MAX_READ};
use crate::names::is_part;
use crate::sealed::{unseal, ChunkOpener, KeyFile, MAGIC};
/// The catalogs of the folders a query reads, opened once each.
#[derive(Default)]
pub(crate) struct Catalogs {
    pub(crate) by_dir: HashMap<PathBuf, Option<HashMap<String, crate::Entry>>>,
    /// One line per folder whose catalog is there but cannot be read.
    pub(crate) notes: Vec<String>,
}

impl Catalogs {
    /// Whether the catalog of `f`'s folder says none of its packets is in `from..to`. Only
    /// an entry whose length and identity are the file's own is believed, as an index is
    /// (a file replaced since, even by one of the same length, is opened like one without
    /// an entry).
    pub(crate) fn outside(&mut self, f: &Path, from: u64, to: u64) -> bool {
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
/// Each file comes once, however many times it is named.
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
                    // An index or sessions file: no capture magic, or sealed.
                    (_, true) => {}
                    (Ok(FileKind::Sealed), false) => out.push(f),
                    // A part whose first bytes are not on disk yet holds nothing to read.
                    _ if hidden => {}
                    _ => skipped += 1,
                }
            }
            // What holds kept of the files retention deleted answers in their place.
            out.extend(crate::names::held_files(p));
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
    Ok((once_each(out), skipped))
}

/// `files` with each file once (by device and inode, whatever its name): a file named
/// twice, or named and inside a folder named too, is read once, so no packet of the answer
/// comes twice.
fn once_each(files: Vec<PathBuf>) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let mut seen = std::collections::HashSet::new();
    files
        .into_iter()
        .filter(|f| std::fs::metadata(f).map_or(true, |m| seen.insert((m.dev(), m.ino()))))
        .collect()
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
pub(crate) const PACKETS_PER_SEGMENT: usize = 4096;
/// The unit of a packet read.
pub(crate) const PACKET_READ: u64 = 4096;

/// The reads of one file.
#[derive(Debug)]
pub struct FilePlan {
    /// The file.
    pub path: PathBuf,
    /// Its size.
    pub size: u64,
    /// Opener of a sealed file.
    pub(crate) opener: Option<Arc<ChunkOpener>>,
    /// Compression of the file (a compressed file without a seek table is scanned).
    pub compression: Compression,
    /// A compressed recording's frames: the index's offsets are in its decompressed
    /// stream, read through them ([`super::frames`]).
    pub(crate) frames: Option<Arc<crate::seekable::SeekTable>>,
    /// The capture file header (plaintext) from the index.
    pub(crate) header: Vec<u8>,
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
    pub(crate) announced: bool,
}

/// The link types a file declares in its header (the index's copy of it, or a plain file's
/// first bytes): None when they are not known without reading the file through (compressed,
/// sealed without an index, unreadable).
pub(crate) fn header_links(plan: &FilePlan) -> Option<Vec<u16>> {
    if !plan.header.is_empty() {
        return corecap_index::header_linktypes(&plan.header);
    }
    if plan.opener.is_some() || plan.compression != Compression::None {
        return None;
    }
    let mut head = Vec::with_capacity(HEAD_BYTES);
    File::open(&plan.path)
        .ok()?
        .take(HEAD_BYTES as u64)
        .read_to_end(&mut head)
        .ok()?;
    corecap_index::header_linktypes(header_blocks(&head))
}

/// Bytes a file's header is looked for in ([`header_links`]).
const HEAD_BYTES: usize = 64 << 10;

/// The header of a capture file that `head` begins: the pcapng section header and the
/// interface descriptions right after it (the blocks before the first other one), or all
/// of `head` for pcap (its header is its first 24 bytes).
fn header_blocks(head: &[u8]) -> &[u8] {
    const SHB: u32 = 0x0a0d_0d0a;
    const IDB: u32 = 1;
    let word = |at: usize, be: bool| -> Option<u32> {
        let b: [u8; 4] = head.get(at..at + 4)?.try_into().ok()?;
        Some(if be {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    };
    if word(0, false) != Some(SHB) {
        return head;
    }
    let be = word(8, false) != Some(0x1a2b_3c4d);
    let mut at = 0;
    while let (Some(ty), Some(len)) = (word(at, be), word(at + 4, be)) {
        let end = at.saturating_add(len as usize);
        if !(ty == SHB || ty == IDB) || len < 12 || end > head.len() {
            break;
        }
        at = end;
    }
    &head[..at]
}

/// The name a part gets once its file is whole: `.NAME.part` → `NAME`.
pub(crate) fn whole_name(part: &Path) -> Option<PathBuf> {
    let name = part.file_name()?.to_string_lossy().into_owned();
    let own = crate::names::whole_of_part(&name)?;
    Some(part.with_file_name(own))
}

/// Where a query reads an index's postings lists: the sidecar, still open, when only its
/// head was read ([`Index::parse_head`]); else the lists came with the index.
#[derive(Debug, Default)]
pub(crate) struct Lists {
    pub(crate) sidecar: Option<(File, u64)>,
    /// Bytes of lists read.
    pub(crate) bytes: u64,
    /// Some list looked up was damaged (its regions were read instead).
    pub(crate) damaged: bool,
}

impl Lists {
    /// Done with the lists of `plan`'s index: notes a damaged list on it; the bytes read.
    pub(crate) fn settle(self, plan: &mut FilePlan) -> u64 {
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
    pub(crate) fn lookup(
        &mut self,
        post: &corecap_index::Postings,
        key: u64,
    ) -> corecap_index::Lookup {
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
pub(crate) fn load_index(
    path: &Path,
    kek: Option<&KeyFile>,
) -> Result<Option<(Index, u64, Lists)>, String> {
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
    pub(crate) filter: Option<&'a str>,
    pub(crate) by_link: HashMap<u16, Predicate>,
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
    plan.compression = compression(path, kind, plan.opener.as_deref());
    if is_part(path) {
        plan.live = true;
        return Ok(plan);
    }
    if let FileKind::Compressed(c) = kind {
        let table = File::open(path).and_then(|f| super::frames::seek_table(&f));
        match table {
            Ok(Some(t)) => plan.frames = Some(Arc::new(t)),
            Ok(None) => {
                plan.note = Some(format!(
                    "{}: {c}-compressed, scanned whole (without a seek table it cannot be read by frames)",
                    path.display()
                ));
                return Ok(plan);
            }
            Err(e) => {
                plan.note = Some(format!("{}: {e}; scanned whole", path.display()));
                return Ok(plan);
            }
        }
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
pub(crate) fn plan_scan(path: &Path, kek: Option<&Arc<KeyFile>>) -> Result<FilePlan, QueryError> {
    let size = std::fs::metadata(path).map_err(io_at(path))?.len();
    let kind = file_kind(path).map_err(io_at(path))?;
    let mut plan = FilePlan::scan(path, size, sealed_opener(path, kind, kek)?);
    plan.compression = compression(path, kind, plan.opener.as_deref());
    Ok(plan)
}

/// How the capture in a file is compressed: by its kind, or for a sealed file by its
/// plaintext (compress, then seal: a zstd stream).
fn compression(path: &Path, kind: FileKind, opener: Option<&ChunkOpener>) -> Compression {
    match (kind, opener) {
        (FileKind::Compressed(c), _) => c,
        (FileKind::Sealed, Some(o))
            if File::open(path).is_ok_and(|f| super::frames::sealed_is_compressed(&f, o)) =>
        {
            Compression::Zstd
        }
        _ => Compression::None,
    }
}

/// The chunk opener of a sealed file (None for any other kind).
pub(crate) fn sealed_opener(
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
pub(crate) fn usable_index(
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
    if index.covered > plan.content_len() {
        plan.note = Some(format!(
            "{}: index covers {} bytes but the file has {} (stale index); scanning",
            plan.path.display(),
            index.covered,
            plan.content_len()
        ));
        return None;
    }
    // The index describes these bytes only if they are the ones it was made from.
    let same = index.identity.is_some_and(|id| {
        File::open(&plan.path)
            .and_then(|f| {
                corecap_linux::direct::advise_random(&f);
                super::frames::identity(&f, index.covered)
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
pub(crate) fn postings_of(
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
    pub(crate) fn scan(path: &Path, size: u64, opener: Option<Arc<ChunkOpener>>) -> Self {
        FilePlan {
            path: path.to_owned(),
            size,
            opener,
            compression: Compression::None,
            frames: None,
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

    /// Bytes of the capture the file holds: its decompressed stream's when compressed.
    pub(crate) fn content_len(&self) -> u64 {
        self.frames.as_ref().map_or(self.size, |t| t.plain_len())
    }

    /// Reads what [`pick`] chooses: the packets the postings name (opaque regions whole),
    /// or else the regions that may match, adjacent ones merged up to `MAX_READ`; plus the
    /// bytes written after the index.
    pub(crate) fn choose_regions(
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
    pub(crate) fn take_reads(
        &mut self,
        index: &Index,
        mut segs: Vec<Segment>,
        chosen: u64,
        mut start_ts: u64,
    ) {
        let len = self.content_len();
        if len > index.covered && !index.stopped() && !index.regions.is_empty() {
            // Bytes written after the index was made: read them too.
            segs.push(Segment::Range {
                at: index.covered..len,
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
pub(crate) struct Picked {
    /// The packets the postings name (None: they cannot answer the filter).
    pub(crate) offsets: Option<Vec<Span>>,
    /// Regions read, in file order, with the range of `offsets` in each (None: whole).
    pub(crate) regions: Vec<(usize, Option<Range<usize>>)>,
}

/// Picks the reads of `index` for the window and `pred`. With postings (`postings`: the
/// file's offsets are its own, not a sealed file's), a region is read for its listed
/// packets, or whole when opaque (its packets' keys may be missing); without, every region
/// that may match is read whole.
pub(crate) fn pick(
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
