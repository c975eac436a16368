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
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

use corecap_linux::direct::{AlignedBuf, DirectFile, Done, WriteRing};

use super::compress::Framer;
use super::output::{Filled, Msg, Output, BUFFER_CAPACITY};
use crate::names::part_path;
use crate::retention::Retention;
use crate::sealed::{SealConfig, Sealer};

mod close;
mod stage;
mod stream;
mod writes;

pub use stream::{is_fifo, Stream};

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
    /// Whether files are opened for direct I/O: asked for, and not a sealed file that is
    /// flushed on a timer (its chunks end anywhere, so its writes go through the page
    /// cache). A compressed file's timer flush writes its staged frames padded to the
    /// alignment and writes the padded unit again with the frames that follow.
    pub fn direct_io(&self) -> bool {
        self.direct && !(self.seal.is_some() && self.flush)
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
    /// Bytes at the head of the staging buffer already written (a flush of a direct file
    /// writes its unaligned tail padded, and the tail is written again, whole, with what
    /// follows it): the buffer begins at `end - carried` in the file.
    carried: usize,
    /// The sidecar index, one region per buffer (files only): built here for a sealed file,
    /// by the front end for a plain one (it comes with the file's last buffer).
    index: Option<Box<corecap_index::IndexBuilder>>,
    /// The file's connections, from the front end with its last buffer.
    sessions: Option<Box<crate::session::format::Encoder>>,
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
    /// Files the ring of files (`-b files:N`) deleted, said at the end.
    ring_deleted: u64,
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
            carried: 0,
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
            ring_deleted: 0,
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
    if w.ring_deleted > 0 {
        w.report.notes.push(format!(
            "the ring of {} files (-W, -b files:N) deleted {} older files of this recording \
             (each named, with its packets' times, in the folder's .corecap-deleted)",
            w.cfg.files.unwrap_or(0),
            w.ring_deleted
        ));
    }
    let (plain, frames, took) = w.compressed;
    if plain > 0 {
        let (stored, all) = w.framer.as_ref().map_or((0, 0), |f| (f.stored, f.frames));
        w.report.notes.push(format!(
            "compressed {plain} bytes of capture into {frames} bytes of zstd frames ({:.1}%) \
             in {:.2} s of the disk writer's time; {stored} of {all} frames stored as they \
             were, not compressing by an eighth (packets the writer could not take in time \
             are counted as `disk` drops)",
            100.0 * frames as f64 / plain as f64,
            took.as_secs_f64()
        ));
    }
    w.report
}
