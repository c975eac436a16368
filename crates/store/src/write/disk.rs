//! The disk writer of a capture file: a thread of its own per file sink, so that the thread
//! that formats packets (a capture worker, a stage, the merge thread) never waits on the disk.
//!
//! It takes the buffers that [`super::output::Output`] fills (and, with a plain file's last
//! buffer, the file's sidecar index that the front end built as it formatted them), indexes
//! and seals sealed files' buffers as chunks, or compresses a compressed file's buffers as
//! zstd frames ([`super::compress`]) and ends the file with their seek table (both: each
//! buffer's frames sealed as one chunk, the seek table as the final chunk), and writes them
//! with direct I/O through an io_uring that keeps several writes in flight. Space is reserved ahead with `fallocate`. A file is written
//! under a hidden name (`.NAME.part` in the same directory) and renamed to its own name only
//! once it is whole: cut to its exact length and synced. So a reader never sees a torn file
//! under a capture file's name.
//!
//! A failed write (a full disk) ends the file: the disk writer waits for the writes still in
//! flight, cuts the file back to the last block boundary that is on disk (never shorter than
//! its header), names it, and reports the error and the packets that the cut removed.
//! Packets handed over after that are counted lost too. Rotation's `files:N`, and the
//! byte budget of [`Retention`], delete the oldest files once a newer one is whole.
//!
//! A stream ([`Stream`]: standard output, or a FIFO such as Wireshark's extcap pipe) is
//! written in order with plain writes; it is never created, cut or renamed. A reader that
//! closes it (EPIPE) ends the capture as a note, not an error.

use std::collections::{BTreeMap, VecDeque};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

use corecap_index::Identity;
use corecap_linux::direct::{AlignedBuf, DirectFile, Done, WriteRing};

use super::compress::Framer;
use super::output::{Filled, Msg, Output, Sessions, BUFFER_BYTES, BUFFER_CAPACITY};
use crate::names::{index_path, part_path, remove_with_index};
use crate::read::stream::Framing;
use crate::retention::Retention;
use crate::sealed::{SealConfig, Sealer, CHUNK_HEAD};

/// Writes in flight per file.
const DEPTH: u32 = 8;
/// `fallocate` steps: a file reserves as much again as it holds, from 4 MiB to 64 MiB
/// ahead, so a small capture does not hold 64 MiB of disk while it runs.
const RESERVE_MIN: u64 = 4 << 20;
const RESERVE_MAX: u64 = 64 << 20;
/// Buffers a file sink starts with (the front end's, and the disk's backlog): 12 MiB,
/// enough to ride out a disk writer that the scheduler keeps off a busy machine for a few
/// ms. More are made while the disk is behind, up to the sink's backlog.
pub const BUFFERS_AT_START: usize = 8;

/// How the disk writer writes.
#[derive(Clone, Debug)]
pub struct DiskConfig {
    /// Try direct I/O (`--no-direct` turns it off).
    pub direct: bool,
    /// Sealing.
    pub seal: Option<SealConfig>,
    /// Keep at most this many files of this sink (`-b files:N`).
    pub files: Option<usize>,
    /// The capture's byte budget.
    pub retention: Option<Arc<Retention>>,
    /// Write each file's index beside it.
    pub index: bool,
    /// A flush timer hands partial buffers over (see [`super::output::Output::flush`]).
    pub flush: bool,
    /// Each closed file's connections appended here too (`--sessions-log`).
    pub sessions_log: Option<Arc<super::sessions_log::SessionsLog>>,
    /// Compress each file as zstd frames at this level (`--compress zstd[:LEVEL]`).
    pub compress: Option<i32>,
}

impl DiskConfig {
    /// Whether files are opened for direct I/O: asked for, and not a sealed or compressed
    /// file that is flushed on a timer (its chunks or frames end anywhere, so its writes go
    /// through the page cache).
    pub fn direct_io(&self) -> bool {
        self.direct && !((self.seal.is_some() || self.compress.is_some()) && self.flush)
    }
}

/// What a disk writer reports at its end.
#[derive(Debug, Default)]
pub struct DiskReport {
    /// Files written and still there, oldest first.
    pub files: Vec<PathBuf>,
    /// Packets handed over but not in any file (cut back after a failed write, or handed
    /// over after it).
    pub lost: u64,
    /// The error that ended writing, naming the file.
    pub error: Option<String>,
    /// What the user should know (a filesystem without direct I/O).
    pub notes: Vec<String>,
}

/// Where a file's bytes go.
enum Target {
    File {
        file: DirectFile,
        /// The hidden name it is written under, and its own name.
        part: PathBuf,
        path: PathBuf,
    },
    Stream(Stream),
}

/// A stream that a capture is written to in order: standard output, or a FIFO.
pub struct Stream {
    out: Box<dyn Write + Send>,
    /// What errors call it: "standard output", or the FIFO's path.
    name: String,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream").field("name", &self.name).finish()
    }
}

impl Stream {
    /// Standard output.
    pub fn stdout() -> Self {
        Self {
            out: Box::new(io::stdout()),
            name: "standard output".into(),
        }
    }

    /// Opens an existing FIFO for writing; like any writer of a FIFO, this waits until it
    /// has a reader.
    pub fn fifo(path: &Path) -> io::Result<Self> {
        let f = fs::OpenOptions::new().write(true).open(path).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot open {}: {e}", path.display()))
        })?;
        Ok(Self {
            out: Box::new(f),
            name: path.display().to_string(),
        })
    }
}

/// Whether `path` names an existing FIFO (written as a [`Stream`], not as a file).
pub fn is_fifo(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}

/// Opens a new capture file under its hidden name. One left by a writer that crashed is
/// recovered first (never deleted, see [`super::recover`]); one that another writer holds
/// is an error.
pub fn open_part(path: &Path, direct: bool) -> io::Result<DirectFile> {
    let part = part_path(path);
    match DirectFile::create(&part, direct, 0o640) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            if !corecap_linux::direct::is_abandoned(&part) {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("another capture is writing it ({} exists)", part.display()),
                ));
            }
            crate::recover::recover_dir(crate::names::dir_of(&part), None)?;
            DirectFile::create(&part, direct, 0o640)
        }
        r => r,
    }
    .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display())))
}

/// The state of the file being written.
struct Current {
    target: Target,
    /// End of the bytes handed to the ring (the file's length so far).
    end: u64,
    /// Bytes reserved with fallocate; u64::MAX once the filesystem said no.
    reserved: u64,
    /// Every byte before `durable` is on disk.
    durable: u64,
    /// End of the last write padded past its data (a flush): a write that starts before it
    /// rewrites that aligned unit, so it waits for the writes in flight first.
    pad_end: u64,
    /// Finished writes past `durable`: offset → end.
    done: BTreeMap<u64, u64>,
    /// Block boundaries not yet durable: (file offset, packets before it).
    bounds: VecDeque<(u64, u64)>,
    /// The last durable block boundary.
    safe: (u64, u64),
    /// Packets handed over for this file.
    packets: u64,
    /// The file header, kept to restore a file cut back before its first block.
    header: Vec<u8>,
    sealer: Option<Sealer>,
    /// Compressed files: the frames' compressor and seek table (see [`super::compress`]).
    framer: Option<Box<Framer>>,
    /// Sealed and compressed files: the staging buffer that chunks or frames are copied
    /// into, and its length.
    stage: Option<(AlignedBuf, usize)>,
    /// The sidecar index, one region per buffer (files only): built here for a sealed file,
    /// by the front end for a plain one (it comes with the file's last buffer).
    index: Option<Box<corecap_index::IndexBuilder>>,
    /// The file's connections, from the front end with its last buffer.
    sessions: Option<Box<Sessions>>,
    failed: bool,
}

struct DiskWriter {
    cfg: DiskConfig,
    ring: WriteRing,
    free: Sender<AlignedBuf>,
    /// Staging buffers of sealed and compressed files, free.
    spare: Vec<AlignedBuf>,
    /// The compressor, between files (a file's [`Current`] holds it while it is written).
    framer: Option<Box<Framer>>,
    cur: Option<Current>,
    align: usize,
    failed: Arc<AtomicBool>,
    report: DiskReport,
    kept: VecDeque<PathBuf>,
    noted_buffered: bool,
    noted_catalog: bool,
    /// Compression so far: bytes of capture in, bytes of frames out, and the time this
    /// thread spent making them (said at the end, beside the `disk` drops a writer that
    /// fell behind caused).
    compressed: (u64, u64, std::time::Duration),
    /// The folder's catalog may lack files: at start (another run may have named files it
    /// could not record) and after an update failed. The next file named refreshes it.
    catalog_behind: bool,
    scratch: Vec<Done>,
}

/// Tags of writes: whose buffer it is.
const TAG_FRONT: u64 = 0;
const TAG_STAGE: u64 = 1;

impl DiskWriter {
    fn start_file(&mut self, target: Target) -> io::Result<()> {
        if let Target::File { file, path, .. } = &target {
            if !file.is_direct() && self.cfg.direct && !self.noted_buffered {
                self.noted_buffered = true;
                let dir = path.parent().unwrap_or(Path::new("."));
                self.report.notes.push(format!(
                    "the filesystem of {} refuses direct I/O; writing through the page cache",
                    if dir.as_os_str().is_empty() {
                        Path::new(".")
                    } else {
                        dir
                    }
                    .display()
                ));
            }
        }
        let mut cur = Current {
            target,
            end: 0,
            reserved: 0,
            durable: 0,
            pad_end: 0,
            done: BTreeMap::new(),
            bounds: VecDeque::new(),
            safe: (0, 0),
            packets: 0,
            header: Vec::new(),
            sealer: None,
            framer: self.framer.take(),
            stage: None,
            index: None,
            sessions: None,
            failed: false,
        };
        if self.cfg.index && self.cfg.seal.is_some() && matches!(cur.target, Target::File { .. }) {
            // A sealed file's regions are encrypted chunks: its packets have no offsets of
            // their own, so no postings. (A plain file's index comes from the front end.)
            cur.index = Some(Box::new(corecap_index::IndexBuilder::without_postings()));
        }
        if let Some(sc) = &self.cfg.seal {
            let (sealer, header) = Sealer::new(sc).map_err(|e| io::Error::other(e.to_string()))?;
            let mut stage = self
                .spare
                .pop()
                .unwrap_or_else(|| AlignedBuf::new(BUFFER_CAPACITY, self.align));
            stage.bytes_mut()[..header.len()].copy_from_slice(&header);
            cur.stage = Some((stage, header.len()));
            cur.bounds.push_back((header.len() as u64, 0));
            cur.header = header;
            cur.sealer = Some(sealer);
            // Compressed and sealed: each chunk's plaintext is the frames of one buffer.
            if let Some(framer) = cur.framer.as_mut() {
                framer.reset();
            }
        } else if let Some(framer) = cur.framer.as_mut() {
            framer.reset();
            let stage = self
                .spare
                .pop()
                .unwrap_or_else(|| AlignedBuf::new(BUFFER_CAPACITY, self.align));
            cur.stage = Some((stage, 0));
        }
        self.cur = Some(cur);
        Ok(())
    }

    /// Takes one buffer from the front end.
    fn fill(&mut self, f: Filled, last: bool) {
        let Some(cur) = self.cur.as_mut() else {
            self.report.lost += f.packets;
            let _ = self.free.send(f.buf);
            return;
        };
        if cur.failed {
            // Counted here, as this buffer never reaches the file's count.
            self.report.lost += f.packets;
            let _ = self.free.send(f.buf);
            return;
        }
        cur.packets += f.packets;
        if f.header > 0 && cur.sealer.is_none() {
            cur.header = f.buf.bytes()[f.blocks.start..f.blocks.start + f.header].to_vec();
            cur.bounds
                .push_back((f.off + (f.blocks.start + f.header) as u64, 0));
        }
        if cur.sealer.is_some() {
            let flush = f.flush;
            self.seal_and_stage(f, last);
            if flush && !last {
                self.flush_stage(true);
            }
            return;
        }
        if cur.framer.is_some() {
            let flush = f.flush;
            self.compress_and_stage(f);
            if flush && !last {
                self.flush_stage(true);
            }
            return;
        }
        let boundary = f.off + f.blocks.end as u64;
        let prev = cur.bounds.back().map_or(cur.safe.1, |b| b.1);
        cur.bounds.push_back((boundary, prev + f.packets));
        // A flush writes through the last whole block; the tail comes again, whole, at the
        // front of the next buffer.
        let (off, len) = (f.off, if f.flush { f.blocks.end } else { f.write_len });
        self.write(f.buf, len, off, TAG_FRONT);
    }

    /// Seals a plaintext buffer as one chunk, copies it into the staging buffer and writes
    /// the staging buffer's aligned part when it is full (or all of it for the last).
    fn seal_and_stage(&mut self, mut f: Filled, last: bool) {
        let Some(cur) = self.cur.as_mut() else { return };
        let data = f.blocks.end - CHUNK_HEAD;
        // Indexed by the chunk's place in the file.
        let start = cur.end + cur.stage.as_ref().map_or(0, |s| s.1) as u64;
        let compressed = cur.framer.is_some();
        if compressed {
            // Compress, then seal: the chunk holds the buffer's frames. The file's last
            // chunk is its seek table's (see [`Self::seal_seek_table`]).
            let began = std::time::Instant::now();
            let sealed = self
                .frames_of(&f.buf.bytes()[CHUNK_HEAD..f.blocks.end], f.header)
                .map(|mut chunk| {
                    if let Some(sealer) = self.cur.as_mut().and_then(|c| c.sealer.as_mut()) {
                        sealer.seal(&mut chunk, false);
                    }
                    chunk
                });
            self.compressed.2 += began.elapsed();
            match sealed {
                Ok(chunk) => {
                    self.index_chunk(start, chunk.len(), &f);
                    self.stage_bytes(&chunk);
                }
                Err(e) => self.fail(e),
            }
        } else {
            // Indexed before sealing: sealing encrypts the blocks in place.
            let len = CHUNK_HEAD + data + crate::sealed::TAG;
            self.index_chunk(start, len, &f);
            let Some(sealer) = self.cur.as_mut().and_then(|c| c.sealer.as_mut()) else {
                return;
            };
            let chunk = sealer.seal_in(f.buf.bytes_mut(), data, last);
            self.stage_bytes(&f.buf.bytes()[..chunk]);
        }
        let stage_len = self
            .cur
            .as_ref()
            .and_then(|c| c.stage.as_ref())
            .map_or(0, |s| s.1);
        let cur = self.cur.as_mut().expect("file open");
        let prev = cur.bounds.back().map_or(cur.safe.1, |b| b.1);
        let boundary = cur.end + stage_len as u64;
        cur.bounds.push_back((boundary, prev + f.packets));
        let _ = self.free.send(f.buf);
        // A compressed file's table chunk follows its last buffer's (at close).
        if last && !compressed {
            self.flush_stage(true);
        }
    }

    /// Adds the region of a sealed chunk at `start`, `len` bytes long, that holds the
    /// blocks of `f` (encrypted, and compressed when the file is).
    fn index_chunk(&mut self, start: u64, len: usize, f: &Filled) {
        if let Some(ix) = self.cur.as_mut().and_then(|c| c.index.as_mut()) {
            ix.add_region(
                start..start + len as u64,
                &f.buf.bytes()[CHUNK_HEAD..f.blocks.end],
            );
        }
    }

    /// Copies `bytes` into the staging buffer, which goes out each time it holds a whole
    /// buffer's worth.
    fn stage_bytes(&mut self, bytes: &[u8]) {
        let mut copied = 0;
        while copied < bytes.len() {
            let Some((stage, len)) = self.cur.as_mut().and_then(|c| c.stage.as_mut()) else {
                break;
            };
            let n = (stage.capacity() - *len).min(bytes.len() - copied);
            stage.bytes_mut()[*len..*len + n].copy_from_slice(&bytes[copied..copied + n]);
            *len += n;
            copied += n;
            if *len >= BUFFER_BYTES {
                self.flush_stage(false);
            }
        }
    }

    /// The frames of a buffer of whole blocks (see [`super::compress`]) after room for a
    /// chunk head: the plaintext of a compressed and sealed file's chunk.
    fn frames_of(&mut self, blocks: &[u8], header: usize) -> io::Result<Vec<u8>> {
        let Some(fr) = self.cur.as_mut().and_then(|c| c.framer.as_mut()) else {
            return Ok(vec![0; CHUNK_HEAD]);
        };
        if header > 0 {
            fr.framing = Framing::of(&blocks[..header.min(blocks.len())]);
        }
        let mut out = vec![0u8; CHUNK_HEAD];
        let mut start = 0;
        while start < blocks.len() {
            let end = fr.piece_end(blocks, start);
            let at = out.len();
            out.resize(at + zstd::zstd_safe::compress_bound(end - start), 0);
            let n = fr.frame(&blocks[start..end], &mut out[at..])?;
            out.truncate(at + n);
            self.compressed.0 += (end - start) as u64;
            self.compressed.1 += n as u64;
            start = end;
        }
        Ok(out)
    }

    /// Seals the seek table of a compressed and sealed file's frames as its final chunk:
    /// the plaintext ends as a compressed file does.
    fn seal_seek_table(&mut self) {
        let Some(cur) = self.cur.as_mut() else { return };
        let (Some(fr), Some(sealer)) = (cur.framer.as_ref(), cur.sealer.as_mut()) else {
            return;
        };
        let mut chunk = vec![0u8; CHUNK_HEAD];
        fr.table.encode(&mut chunk);
        sealer.seal(&mut chunk, true);
        self.stage_bytes(&chunk);
    }

    /// Compresses a buffer of whole blocks as frames (see [`super::compress`]) into the
    /// staging buffer, which goes out each time it holds a whole buffer's worth.
    fn compress_and_stage(&mut self, f: Filled) {
        let began = std::time::Instant::now();
        let Some(cur) = self.cur.as_mut() else { return };
        let blocks = &f.buf.bytes()[f.blocks.clone()];
        if let Some(fr) = cur.framer.as_mut() {
            if f.header > 0 {
                fr.framing = Framing::of(&blocks[..f.header]);
            }
        }
        let mut start = 0;
        while start < blocks.len() {
            let Some(cur) = self.cur.as_mut() else { return };
            let (Some(fr), Some((stage, len))) = (cur.framer.as_mut(), cur.stage.as_mut()) else {
                return;
            };
            let end = fr.piece_end(blocks, start);
            let bound = zstd::zstd_safe::compress_bound(end - start);
            if stage.capacity() - *len < bound && *len > 0 {
                self.flush_stage(false);
                continue;
            }
            // A staging buffer too small for one frame (a block past the buffer's slack:
            // never from corecap's front end) is an error that ends the file.
            let room = stage.capacity() - *len;
            let out = &mut stage.bytes_mut()[*len..*len + room.min(bound)];
            match fr.frame(&blocks[start..end], out) {
                Ok(n) => {
                    *len += n;
                    self.compressed.0 += (end - start) as u64;
                    self.compressed.1 += n as u64;
                }
                Err(e) => {
                    self.fail(e);
                    break;
                }
            }
            start = end;
            if *len >= BUFFER_BYTES {
                self.flush_stage(false);
            }
        }
        let Some(cur) = self.cur.as_mut() else { return };
        let stage_len = cur.stage.as_ref().map_or(0, |s| s.1);
        let prev = cur.bounds.back().map_or(cur.safe.1, |b| b.1);
        let boundary = cur.end + stage_len as u64;
        cur.bounds.push_back((boundary, prev + f.packets));
        let _ = self.free.send(f.buf);
        self.compressed.2 += began.elapsed();
    }

    /// Puts the seek table of a compressed file's frames (see [`crate::seekable`]) in the
    /// staging buffer, after its last frame.
    fn stage_seek_table(&mut self) {
        let Some(cur) = self.cur.as_mut() else { return };
        let Some(fr) = cur.framer.as_ref() else {
            return;
        };
        let mut table = Vec::with_capacity(fr.table.encoded_len());
        fr.table.encode(&mut table);
        let mut copied = 0;
        while copied < table.len() {
            let Some((stage, len)) = self.cur.as_mut().and_then(|c| c.stage.as_mut()) else {
                break;
            };
            let n = (stage.capacity() - *len).min(table.len() - copied);
            stage.bytes_mut()[*len..*len + n].copy_from_slice(&table[copied..copied + n]);
            *len += n;
            copied += n;
            if *len >= BUFFER_BYTES {
                self.flush_stage(false);
            }
        }
    }

    /// Writes the staging buffer's aligned part (all of it when `all`) and carries the rest
    /// into a fresh one. Returns the new staging length.
    fn flush_stage(&mut self, all: bool) -> usize {
        let align = self.align;
        let Some(cur) = self.cur.as_mut() else {
            return 0;
        };
        let Some((stage, len)) = cur.stage.take() else {
            return 0;
        };
        let cut = if all { len } else { len / align * align };
        let mut fresh = self
            .spare
            .pop()
            .unwrap_or_else(|| AlignedBuf::new(BUFFER_CAPACITY, align));
        let tail = len - cut;
        fresh.bytes_mut()[..tail].copy_from_slice(&stage.bytes()[cut..len]);
        cur.stage = Some((fresh, tail));
        let off = cur.end;
        if cut > 0 {
            self.write(stage, cut, off, TAG_STAGE);
        } else {
            self.spare.push(stage);
        }
        tail
    }

    /// Submits one write (padding a direct file's last, unaligned one), after space is
    /// reserved and a slot is free.
    fn write(&mut self, mut buf: AlignedBuf, len: usize, off: u64, tag: u64) {
        let align = self.align;
        let Some(cur) = self.cur.as_mut() else { return };
        if let Some(r) = &self.cfg.retention {
            // The file grows by what this write adds past its old end.
            let grow = (off + len as u64).saturating_sub(cur.end);
            r.grow_open(grow);
        }
        cur.end = off + len as u64;
        let file = match &mut cur.target {
            Target::File { file, .. } => &*file,
            Target::Stream(st) => {
                let result = st
                    .out
                    .write_all(&buf.bytes()[..len])
                    .and_then(|_| st.out.flush())
                    .map(|_| len);
                self.scratch.push(Done {
                    tag,
                    buf,
                    len,
                    offset: off,
                    result,
                });
                self.complete();
                return;
            }
        };
        let mut wlen = len;
        if file.is_direct() && !len.is_multiple_of(align) {
            wlen = len.div_ceil(align) * align;
            buf.bytes_mut()[len..wlen].fill(0);
        }
        let overlaps = off < cur.pad_end;
        if wlen > len || !file.is_direct() {
            cur.pad_end = cur.pad_end.max(off + wlen as u64);
        }
        if overlaps {
            // Writes in flight may land in any order: the one that this rewrites goes first.
            self.drain();
        }
        let Some(cur) = self.cur.as_mut() else { return };
        let Target::File { file: _, .. } = &cur.target else {
            return;
        };
        if cur.reserved != u64::MAX && off + wlen as u64 > cur.reserved {
            // fallocate waits for the file's direct writes in flight (inode_dio_wait),
            // whose completions this thread reaps: reserving with writes in flight hung
            // writers on ext4 under load. So the writes in flight end first.
            self.drain();
            let Some(cur) = self.cur.as_mut() else { return };
            let Target::File { file, .. } = &cur.target else {
                return;
            };
            let end = off + wlen as u64;
            let want = end + end.clamp(RESERVE_MIN, RESERVE_MAX);
            cur.reserved = match file.reserve(want) {
                Ok(()) => want,
                Err(_) => u64::MAX,
            };
        }
        while !self.ring.has_room() {
            self.reap(1);
        }
        let Some(cur) = self.cur.as_ref() else { return };
        let Target::File { file, .. } = &cur.target else {
            return;
        };
        if let Err(buf) = self.ring.submit(file.file(), buf, wlen, off, tag) {
            self.scratch.push(Done {
                tag,
                buf,
                len: wlen,
                offset: off,
                result: Err(io::Error::other("the write ring refused a write")),
            });
            self.complete();
        }
        self.reap(0);
    }

    /// Waits for every write in flight (or for the ring to give them up as stalled).
    fn drain(&mut self) {
        while self.ring.in_flight() > 0 {
            let n = self.ring.in_flight();
            self.reap(n);
        }
    }

    /// Takes finished writes: recycles buffers, advances the durable prefix, notes errors.
    fn reap(&mut self, min: usize) {
        let mut out = std::mem::take(&mut self.scratch);
        if let Err(e) = self.ring.reap(min, &mut out) {
            self.fail(e);
        }
        self.scratch = out;
        self.complete();
    }

    fn complete(&mut self) {
        let done = std::mem::take(&mut self.scratch);
        for d in done {
            let mut result = d.result;
            if let Ok(n) = result {
                if n < d.len {
                    // What went is on disk, whatever the rest does.
                    self.durable(d.offset, d.offset + n as u64);
                    // The rest, once more, synchronously: it either goes or says why
                    // (ENOSPC, "No space left on device").
                    result = self.write_rest(&d.buf, d.len, d.offset, n);
                }
            }
            if result.as_ref().is_err_and(is_out_of_space) {
                // Refused whole for space: as much as still fits goes, so a full disk is
                // filled before it is reported.
                self.write_what_fits(&d.buf, d.len, d.offset);
            }
            // A direct write the filesystem refuses (EINVAL, 22: alignment): once more,
            // buffered.
            if let (Err(e), Some(cur)) = (&result, self.cur.as_mut()) {
                if let Target::File { file, .. } = &mut cur.target {
                    if e.raw_os_error() == Some(22) && file.is_direct() {
                        result = file
                            .make_buffered()
                            .and_then(|_| file.write_all_at(&d.buf.bytes()[..d.len], d.offset))
                            .map(|_| d.len);
                    }
                }
            }
            match result {
                Ok(_) => self.durable(d.offset, d.offset + d.len as u64),
                Err(e) => self.fail(e),
            }
            if d.tag == TAG_STAGE {
                self.spare.push(d.buf);
            } else {
                let _ = self.free.send(d.buf);
            }
        }
    }

    /// Writes what a short write left, synchronously, to learn the OS error if it fails.
    fn write_rest(
        &mut self,
        buf: &AlignedBuf,
        len: usize,
        offset: u64,
        n: usize,
    ) -> io::Result<usize> {
        let short = || {
            io::Error::new(
                io::ErrorKind::StorageFull,
                format!("short write ({n} of {len} bytes)"),
            )
        };
        let Some(Target::File { file, .. }) = self.cur.as_mut().map(|c| &mut c.target) else {
            return Err(short());
        };
        let rest = &buf.bytes()[n..len];
        let at = offset + n as u64;
        match file.write_all_at(rest, at) {
            Ok(()) => Ok(len),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && file.is_direct() => {
                file.make_buffered()?;
                file.write_all_at(rest, at).map(|_| len)
            }
            Err(e) if e.kind() == io::ErrorKind::WriteZero => Err(short()),
            Err(e) => Err(e),
        }
    }

    /// Writes a refused write's bytes in pieces of [`FIT_PIECE`] (whole alignment units),
    /// synchronously, until one is refused; each piece that goes is durable. The close of
    /// the failed file keeps the whole blocks of the durable prefix.
    fn write_what_fits(&mut self, buf: &AlignedBuf, len: usize, offset: u64) {
        let Some(Target::File { file, .. }) = self.cur.as_mut().map(|c| &mut c.target) else {
            return;
        };
        let piece = FIT_PIECE.max(self.align);
        let mut at = 0;
        while at < len {
            let n = piece.min(len - at);
            if file
                .write_all_at(&buf.bytes()[at..at + n], offset + at as u64)
                .is_err()
            {
                break;
            }
            at += n;
        }
        if at > 0 {
            self.durable(offset, offset + at as u64);
        }
    }

    fn durable(&mut self, from: u64, to: u64) {
        let Some(cur) = self.cur.as_mut() else { return };
        let e = cur.done.entry(from).or_insert(to);
        *e = (*e).max(to);
        // Writes may overlap (a flush's padded unit is written again): any finished write
        // that starts at or before the durable end extends it.
        while let Some((&f, &t)) = cur.done.range(..=cur.durable).next() {
            cur.done.remove(&f);
            cur.durable = cur.durable.max(t);
        }
        while cur.bounds.front().is_some_and(|b| b.0 <= cur.durable) {
            cur.safe = cur.bounds.pop_front().expect("front checked");
        }
    }

    fn fail(&mut self, e: io::Error) {
        let Some(cur) = self.cur.as_mut() else { return };
        if cur.failed {
            return;
        }
        cur.failed = true;
        // Relaxed: a flag the front end polls once per buffer; the report carries the rest.
        self.failed.store(true, Ordering::Relaxed);
        let name = match &cur.target {
            Target::File { path, .. } => path.display().to_string(),
            Target::Stream(st) => {
                if e.kind() == io::ErrorKind::BrokenPipe {
                    // The reader chose to stop (`| head`, Wireshark's stop): an end, not a
                    // failure.
                    self.report
                        .notes
                        .push(format!("the reader of {} closed it", st.name));
                    return;
                }
                st.name.clone()
            }
        };
        self.report
            .error
            .get_or_insert_with(|| format!("writing {name}: {e}"));
    }

    /// Ends the current file: waits for its writes, cuts it to length (or back to its last
    /// durable block after a failure), syncs it, writes what goes beside it and gives it its
    /// name.
    fn close(&mut self) {
        if self
            .cur
            .as_ref()
            .is_some_and(|c| c.framer.is_some() && !c.failed)
        {
            if self.cur.as_ref().is_some_and(|c| c.sealer.is_some()) {
                self.seal_seek_table();
            } else {
                self.stage_seek_table();
            }
        }
        if self.cur.as_ref().is_some_and(|c| c.stage.is_some()) {
            self.flush_stage(true);
        }
        self.drain();
        let Some(mut cur) = self.cur.take() else {
            return;
        };
        self.framer = cur.framer.take();
        if let Some(r) = &self.cfg.retention {
            r.close_open(cur.end);
        }
        if let Some((stage, _)) = cur.stage.take() {
            self.spare.push(stage);
        }
        if !matches!(cur.target, Target::File { .. }) {
            if cur.failed {
                self.report.lost += cur.packets - cur.safe.1.min(cur.packets);
            }
            return;
        }
        let packets = self.cut_to_length(&mut cur);
        let Target::File { file, part, path } = &cur.target else {
            return;
        };
        if cur.failed && packets == 0 {
            // A file that holds no packet gets no capture name, as a failed start leaves
            // none: the error says what happened.
            let removed = fs::remove_file(part.as_path())
                .and_then(|_| corecap_linux::direct::sync_parent(part.as_path()));
            if let Err(e) = removed {
                self.report
                    .notes
                    .push(format!("could not remove {}: {e}", part.display()));
            }
            return;
        }
        let time = cur.index.as_ref().and_then(|ix| ix.time_range());
        let (index, sessions) = (cur.index.take(), cur.sessions.take());
        let (identity, beside) = self.write_beside(part, path, index, sessions, cur.failed);
        // Never over another file; then the directory is synced, so the name survives a
        // power cut (the index's name too, made just before).
        let named = corecap_linux::direct::rename_noreplace(part, path)
            .and_then(|_| corecap_linux::direct::sync_parent(path));
        if let Err(e) = named {
            self.report.error.get_or_insert_with(|| {
                format!("naming {} (from {}): {e}", path.display(), part.display())
            });
            return;
        }
        let size = file.file().metadata().map_or(0, |m| m.len());
        let entry = crate::Entry {
            name: path
                .file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into_owned()),
            state: crate::State::Whole,
            time,
            packets,
            bytes: size,
            index_bytes: fs::metadata(index_path(path)).map_or(0, |m| m.len()),
            identity,
        };
        let path = path.clone();
        self.keep(&path, &entry, size + beside);
    }

    /// Cuts the closing file to its length and syncs it; after a failure, back to the whole
    /// blocks that reached the disk. Returns the packets it holds.
    fn cut_to_length(&mut self, cur: &mut Current) -> u64 {
        let Target::File { file, part, path } = &mut cur.target else {
            return 0;
        };
        if cur.failed && cur.sealer.is_none() && self.framer.is_none() {
            // The whole blocks of all that reached the disk, which may reach past the last
            // buffer's end that was whole (a full disk takes part of a buffer).
            if let Ok(Some((bytes, packets))) =
                crate::recover::whole_prefix_within(part, cur.durable)
            {
                if bytes > cur.safe.0 {
                    cur.safe = (bytes, packets);
                }
            }
        }
        let r = if cur.failed {
            self.report.lost += cur.packets - cur.safe.1.min(cur.packets);
            cut_back(file, cur.safe.0, &cur.header).and_then(|()| match self.framer.as_mut() {
                // A sealed file ends on a whole chunk: its table would be plaintext.
                Some(fr) if cur.safe.0 > 0 && cur.sealer.is_none() => {
                    end_frames(file, &mut fr.table, cur.safe.0)
                }
                _ => Ok(()),
            })
        } else {
            file.file()
                .set_len(cur.end)
                .and_then(|_| file.file().sync_data())
        };
        if let Err(e) = r {
            self.report
                .error
                .get_or_insert_with(|| format!("closing {}: {e}", path.display()));
        }
        if cur.failed {
            cur.safe.1.min(cur.packets)
        } else {
            cur.packets
        }
    }

    /// Writes the index and the sessions file of the file at `part` (to be named `path`),
    /// before the file takes its name. A file cut back after a failed write gets neither (a
    /// query scans it). Returns the identity they are tied to and their bytes.
    fn write_beside(
        &mut self,
        part: &Path,
        path: &Path,
        index: Option<Box<corecap_index::IndexBuilder>>,
        sessions: Option<Box<Sessions>>,
        failed: bool,
    ) -> (Option<(u64, Identity)>, u64) {
        let (Some(mut ix), false) = (index, failed) else {
            return (None, 0);
        };
        let at = index_path(path);
        // The identity of the bytes on disk, read back (the writer's descriptor may be a
        // direct one, which takes aligned buffers only).
        let covered = ix.covered();
        let id = fs::File::open(part).and_then(|f| crate::read::frames::identity(&f, covered));
        let written = id.and_then(|id| {
            ix.set_identity(id);
            crate::sidecar::write_sidecar(&at, &ix.finish(), self.cfg.seal.as_ref()).map(|()| id)
        });
        let id = match written {
            Ok(id) => id,
            Err(e) => {
                self.report
                    .notes
                    .push(format!("no index for {}: {e}", path.display()));
                return (None, 0);
            }
        };
        let mut bytes = fs::metadata(&at).map_or(0, |m| m.len());
        // The sessions file too, tied to the same bytes as the index.
        if let Some(s) = sessions {
            bytes += self.write_sessions(path, &s, covered, id);
            self.log_sessions(path, &s);
        }
        (Some((covered, id)), bytes)
    }

    /// Writes the sessions file of `path` (sealed as the file is); returns its bytes, 0
    /// when it could not be written (a note says why: a query still finds the packets).
    fn write_sessions(&mut self, path: &Path, s: &Sessions, covered: u64, id: Identity) -> u64 {
        let bytes = crate::session::format::encode(&s.records, s.seed, covered, Some(id));
        match crate::session::format::write_sessions(path, &bytes, self.cfg.seal.as_ref()) {
            Ok(()) => fs::metadata(crate::names::sessions_path(path)).map_or(0, |m| m.len()),
            Err(e) => {
                self.report
                    .notes
                    .push(format!("no sessions file for {}: {e}", path.display()));
                0
            }
        }
    }

    /// Appends the file's connections to the sessions log, if there is one; a log that
    /// cannot be written costs a note, once.
    fn log_sessions(&mut self, path: &Path, s: &Sessions) {
        let Some(log) = &self.cfg.sessions_log else {
            return;
        };
        if let Err(e) = log.append(&s.records) {
            self.report.notes.push(format!(
                "the connections of {} are not in the sessions log: {e} (they are in its \
                 sessions file)",
                path.display()
            ));
        }
    }

    /// A file just named: recorded in its folder's catalog, then kept under `-b files:N`
    /// and the byte budget, which may delete the oldest.
    fn keep(&mut self, path: &Path, entry: &crate::Entry, bytes: u64) {
        // A catalog behind its files (this writer's first file, or one after a failed
        // update) is brought up to date from them first. The catalog is an accelerator:
        // one that cannot be written costs a note, and recording goes on.
        let dir = crate::names::dir_of(path);
        let kept = if self.catalog_behind {
            crate::catalog_update::refresh(dir)
                .and_then(|()| crate::catalog_update::record(entry, dir))
        } else {
            crate::catalog_update::record(entry, dir)
        };
        self.catalog_behind = kept.is_err();
        if let Err(e) = kept {
            if !self.noted_catalog {
                self.noted_catalog = true;
                self.report.notes.push(format!(
                    "the folder's catalog is not kept for now: {e} (recording goes on; \
                     it is brought up to date from the files when it can be written)"
                ));
            }
        }
        self.report.files.push(path.to_owned());
        self.kept.push_back(path.to_owned());
        if let Some(max) = self.cfg.files {
            while self.kept.len() > max.max(1) {
                if let Some(old) = self.kept.pop_front() {
                    remove_with_index(&old);
                    crate::catalog_update::forget(std::slice::from_ref(&old));
                    if let Some(r) = &self.cfg.retention {
                        r.forget(&old);
                    }
                    self.report.files.retain(|f| *f != old);
                }
            }
        }
        if let Some(r) = &self.cfg.retention {
            for gone in r.add(path.to_owned(), bytes, entry.time.map(|(_, last)| last)) {
                self.kept.retain(|k| *k != gone);
                self.report.files.retain(|f| *f != gone);
            }
        }
    }
}

impl DiskWriter {
    /// Removes the current file, which holds no packet.
    fn discard(&mut self) {
        self.drain();
        if let Some(Current {
            target: Target::File { part, .. },
            ..
        }) = self.cur.take()
        {
            let _ = fs::remove_file(&part);
        }
    }
}

/// Whether a write failed for want of space (a full filesystem, or a quota).
fn is_out_of_space(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::StorageFull
        || e.kind() == io::ErrorKind::QuotaExceeded
        || matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// The piece [`DiskWriter::write_what_fits`] writes at a time.
const FIT_PIECE: usize = 64 << 10;

/// Cuts a failed file back to `safe` bytes, restoring its header if the cut went below it.
fn cut_back(file: &mut DirectFile, safe: u64, header: &[u8]) -> io::Result<()> {
    if safe >= header.len() as u64 {
        return file.file().set_len(safe);
    }
    file.file().set_len(0)?;
    file.make_buffered()?;
    file.write_all_at(header, 0)
}

/// Ends a compressed file cut back to `safe` bytes (a frame's end) with the seek table of
/// the frames before it. A table that does not fit (the disk is full) is left off: the file
/// is still a zstd stream, which readers scan.
fn end_frames(
    file: &mut DirectFile,
    table: &mut crate::seekable::SeekTable,
    safe: u64,
) -> io::Result<()> {
    let keep = table.frames().partition_point(|f| f.end() <= safe);
    table.truncate(keep);
    if table.frames_len() != safe {
        return Ok(());
    }
    let mut bytes = Vec::with_capacity(table.encoded_len());
    table.encode(&mut bytes);
    file.make_buffered()?;
    if file.write_all_at(&bytes, safe).is_err() {
        file.file().set_len(safe)?;
    }
    file.file().sync_data()
}

/// A running disk writer.
#[derive(Debug)]
pub struct Disk {
    pub(crate) tx: Sender<Msg>,
    pub(crate) failed: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<DiskReport>,
}

impl Disk {
    /// Starts the disk writer of a file sink whose first file is `first` (a file under its
    /// hidden name, or a stream) with `buffers` buffers. Returns it and the front end that
    /// formats packets into its buffers (`sealed`: chunks to encrypt; `indexed`: the index
    /// built as blocks are formatted).
    pub fn start(
        cfg: DiskConfig,
        first: Result<(DirectFile, PathBuf), Stream>,
        align: usize,
        buffers: usize,
        sealed: bool,
        indexed: bool,
    ) -> io::Result<(Self, Output)> {
        let (tx, rx) = std::sync::mpsc::channel::<Msg>();
        let (free_tx, free_rx) = std::sync::mpsc::channel::<AlignedBuf>();
        let front = AlignedBuf::new(BUFFER_CAPACITY, align);
        for _ in 1..buffers.max(2) {
            let _ = free_tx.send(AlignedBuf::new(BUFFER_CAPACITY, align));
        }
        let failed = Arc::new(AtomicBool::new(false));
        let direct = cfg.direct_io();
        let compressed = cfg.compress.is_some();
        let framer = match cfg.compress {
            Some(level) => Some(Box::new(Framer::new(level)?)),
            None => None,
        };
        let mut w = DiskWriter {
            cfg,
            ring: WriteRing::new(DEPTH, true),
            free: free_tx,
            spare: Vec::new(),
            framer,
            cur: None,
            align,
            failed: failed.clone(),
            report: DiskReport::default(),
            kept: VecDeque::new(),
            noted_buffered: false,
            noted_catalog: false,
            compressed: (0, 0, std::time::Duration::ZERO),
            catalog_behind: true,
            scratch: Vec::new(),
        };
        let target = match first {
            Ok((file, path)) => Target::File {
                file,
                part: part_path(&path),
                path,
            },
            Err(stream) => Target::Stream(stream),
        };
        w.start_file(target)?;
        let handle = std::thread::Builder::new()
            .name("corecap-disk".into())
            .spawn(move || run(w, rx, direct))?;
        let out = Output::new(
            tx.clone(),
            free_rx,
            front,
            align,
            sealed,
            indexed,
            compressed,
        );
        Ok((Self { tx, failed, handle }, out))
    }

    /// Whether the writer failed (the disk refused a write; the capture should stop).
    pub fn failed(&self) -> bool {
        // Relaxed: a flag read on its own, set once by the writer thread.
        self.failed.load(Ordering::Relaxed)
    }

    /// Waits for the disk writer to end (the front end has sent its last file's close and
    /// dropped its sender) and returns its report.
    pub fn join(self) -> DiskReport {
        drop(self.tx);
        self.handle.join().unwrap_or_else(|_| DiskReport {
            error: Some("the disk writer thread panicked".into()),
            ..Default::default()
        })
    }
}

fn run(mut w: DiskWriter, rx: Receiver<Msg>, direct: bool) -> DiskReport {
    // This thread writes what the capture hands it and needs no privilege for that.
    let _ = corecap_linux::privilege::drop_thread_capabilities();
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Fill(f) => w.fill(f, false),
            Msg::Close {
                last,
                next,
                index,
                sessions,
            } => {
                w.fill(last, true);
                // Only a plain file's front end builds one (never a stream's).
                if let (Some(cur), Some(ix)) = (w.cur.as_mut(), index) {
                    cur.index = Some(ix);
                }
                if let Some(cur) = w.cur.as_mut() {
                    cur.sessions = sessions;
                }
                w.close();
                if let Some(path) = next {
                    let failed = w.failed.load(Ordering::Relaxed);
                    let opened = if failed {
                        Err(io::Error::other("an earlier write failed"))
                    } else {
                        open_part(&path, direct).and_then(|file| {
                            w.start_file(Target::File {
                                file,
                                part: part_path(&path),
                                path,
                            })
                        })
                    };
                    if let Err(e) = opened {
                        if !failed {
                            w.report.error.get_or_insert_with(|| e.to_string());
                        }
                        w.failed.store(true, Ordering::Relaxed);
                    }
                }
            }
        }
    }
    if w.cur.as_ref().is_some_and(|c| c.packets == 0) {
        // The front end went away without closing its file, before any packet: a start
        // that failed. What it made is removed, so a failed start leaves nothing behind.
        w.discard();
    } else if w.cur.is_some() {
        w.close();
    }
    let (plain, frames, took) = w.compressed;
    if plain > 0 {
        w.report.notes.push(format!(
            "compressed {plain} bytes of capture into {frames} bytes of zstd frames ({:.1}%) \
             in {:.2} s of the disk writer's time (packets it could not take in time are \
             counted as `disk` drops)",
            100.0 * frames as f64 / plain as f64,
            took.as_secs_f64()
        ));
    }
    w.report
}
