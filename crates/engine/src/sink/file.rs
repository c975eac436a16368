//! Capture files: pcapng (default) or classic pcap, with dumpcap-style rotation.
//!
//! A rotated file set is named `STEM_NNNNN.EXT` (N from 00001); with `files:N` only the
//! newest N files are kept, and with a [`Retention`] budget the oldest whole files of the
//! capture are deleted to keep the rest under it. Each pcapng file ends with one Interface
//! Statistics Block per interface, written at close.
//!
//! The thread that calls [`FileSink::write`] only formats blocks into buffers
//! ([`super::output`]); a disk writer thread per sink writes them ([`super::disk`]).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use corecap_wire::pcap::PcapWriter;
use corecap_wire::pcapng::{Epb, InterfaceDesc, Isb, PcapngWriter};
use corecap_wire::Transport;

use crate::packet::Packet;
use corecap_store::names::{next_rotation, rotated_path};
use corecap_store::retention::Retention;
use corecap_store::write::disk::{Disk, DiskConfig, DiskReport, Stream};
use corecap_store::write::output::{Output, Refused, Written};

/// File format of a capture file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// pcapng with queue and hash options.
    Pcapng,
    /// Classic pcap with nanosecond timestamps.
    Pcap,
    /// Classic pcap with microsecond timestamps, as tcpdump writes it.
    PcapMicros,
}

/// When to start a new file (`-b filesize:kB,duration:S,files:N`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rotation {
    /// Start a new file after this many bytes.
    pub filesize: Option<u64>,
    /// Start a new file once this long has passed, on the monotonic clock, since the
    /// file's first packet (never by the packets' times: see [`FileSink::hand_over`]).
    pub duration: Option<Duration>,
    /// Keep at most this many files.
    pub files: Option<usize>,
    /// Take no packet that would begin a file after this many (dumpcap's `-a files:N`,
    /// tcpdump's `-G` with `-W`): it is refused as [`Refused::Limit`].
    pub stop_after_files: Option<u64>,
    /// Take no packet once the file holds this many bytes (dumpcap's `-a filesize:`
    /// without rotation).
    pub stop_at_bytes: Option<u64>,
}

impl Rotation {
    /// Whether any rotation is asked for.
    pub fn active(&self) -> bool {
        self.filesize.is_some() || self.duration.is_some()
    }
}

/// How each file of a recording is written: its format, rotation, sealing and index, who
/// owns it, when it reaches the disk, and what is kept beside it. A capture's output holds
/// one for all its files; each of its file sinks gets a copy in its [`FileConfig`].
#[derive(Clone, Debug)]
pub struct FileOptions {
    /// File format: pcapng or pcap.
    pub format: Format,
    /// Rotation rules (`-b`).
    pub rotation: Rotation,
    /// Encryption at rest (sealed files), if asked for.
    pub seal: Option<corecap_store::sealed::SealConfig>,
    /// Write with direct I/O where the filesystem allows it (`--no-direct`: false).
    pub direct: bool,
    /// Keep the newest whole files under a byte budget (`--retain`): the capture's, shared
    /// by its sinks.
    pub retention: Option<Arc<Retention>>,
    /// Write each file's index beside it (`--no-index`: false).
    pub index: bool,
    /// The user the files are given to (`-Z`): the process runs as them once started, and
    /// the files made before it switches user are given to them.
    pub owner: Option<corecap_linux::privilege::RunAs>,
    /// Hand whole blocks to the disk within about this long of their packet's arrival
    /// (`--flush-interval`; zero: at every batch), so that packets older than this are on
    /// disk; None: only as buffers fill.
    pub flush: Option<Duration>,
    /// What each file sink, with the capture's other sinks, may hold while its disk is
    /// behind (`--disk-backlog`): buffers beyond the first few are made only when the disk
    /// falls behind.
    pub backlog: corecap_store::write::output::Backlog,
    /// Keep one record per connection of each file beside it (`.sessions`), in a table of
    /// this size; None: no sessions file (`--no-sessions`). A capture's output keeps them
    /// only with `index`.
    pub sessions: Option<corecap_store::session::SessionConfig>,
    /// Each file's connections appended to this log too (`--sessions-log`).
    pub sessions_log: Option<Arc<corecap_store::write::sessions_log::SessionsLog>>,
    /// Compress each file as independent zstd frames at this level, on the disk writer's
    /// thread (`--compress zstd[:LEVEL]`); an output's path then ends in `.zst`.
    pub compress: Option<i32>,
}

#[cfg(test)]
impl FileOptions {
    /// Files in `format`: no rotation, sealing, retention, sessions or compression; direct
    /// I/O, indexed, no flush timer.
    pub(crate) fn plain(format: Format) -> Self {
        FileOptions {
            format,
            rotation: Rotation::default(),
            seal: None,
            direct: true,
            retention: None,
            index: true,
            owner: None,
            flush: None,
            backlog: Default::default(),
            sessions: None,
            sessions_log: None,
            compress: None,
        }
    }
}

/// What a file sink writes and where.
#[derive(Clone, Debug)]
pub struct FileConfig {
    /// Output path (`-` is standard output).
    pub path: PathBuf,
    /// Interfaces described in the file; packet `iface` indexes this list.
    pub interfaces: Vec<InterfaceDesc>,
    /// Snap length recorded in the file header.
    pub snaplen: u32,
    /// How each of its files is written.
    pub file: FileOptions,
}

/// What the index is told of a packet written for one interface, worked out once (see
/// [`Written`]): its link type, the bytes of its frame the block keeps, and the time from
/// which the writer changes the packet's (pcap's 32-bit seconds clamp it).
#[derive(Clone, Copy, Debug)]
struct Told {
    linktype: u16,
    keep: usize,
    ts_limit: u64,
    /// Nanoseconds per tick of the file's timestamps (1000 in microsecond pcap).
    tick: u64,
}

impl Told {
    /// A time as the file holds it: cut to the file's tick (no division for pcapng and
    /// nanosecond pcap, whose tick is 1).
    #[inline]
    fn held_ts(&self, ts_ns: u64) -> u64 {
        if self.tick == 1 {
            ts_ns
        } else {
            ts_ns / self.tick * self.tick
        }
    }

    /// The bytes of a captured frame the file holds (up to its snap length).
    #[inline]
    fn held<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        &frame[..frame.len().min(self.keep)]
    }

    /// One for each interface of `cfg`, when each file gets an index or a sessions file;
    /// none else.
    fn for_config(cfg: &FileConfig, indexed: bool) -> Vec<Told> {
        if !indexed {
            return Vec::new();
        }
        let keep = |snaplen: u32| {
            if snaplen == 0 {
                usize::MAX
            } else {
                snaplen as usize
            }
        };
        match cfg.file.format {
            Format::Pcapng => cfg
                .interfaces
                .iter()
                .map(|i| Told {
                    linktype: i.linktype,
                    keep: keep(i.snaplen),
                    ts_limit: u64::MAX,
                    tick: 1,
                })
                .collect(),
            // One link type and snap length for all; past 32-bit seconds the writer clamps.
            Format::Pcap | Format::PcapMicros => {
                let linktype = cfg.interfaces.first().map_or(1, |i| i.linktype);
                let t = Told {
                    linktype,
                    keep: keep(cfg.snaplen),
                    ts_limit: corecap_wire::pcap::TS_LIMIT_NS,
                    tick: if cfg.file.format == Format::PcapMicros {
                        1000
                    } else {
                        1
                    },
                };
                vec![t; cfg.interfaces.len()]
            }
        }
    }

    /// What the block written for `p` holds, as the index reads it, when that is simple to
    /// know: a frame the writer kept as it came (no VLAN tag put back), cut to the snap
    /// length, at a time the file holds as it is. None: the index reads the block back (or,
    /// with no index, nothing reads it).
    #[inline(always)]
    fn written<'a>(
        told: &[Told],
        p: &Packet<'a>,
        parsed: Option<&'a Transport<'a>>,
    ) -> Option<Written<'a>> {
        let t = told.get(p.iface as usize)?;
        if p.vlan.is_some() || p.ts_ns >= t.ts_limit {
            return None;
        }
        Some(Written {
            // The time as the file holds it (cut to microseconds in microsecond pcap).
            ts_ns: t.held_ts(p.ts_ns),
            linktype: t.linktype,
            frame: t.held(p.data),
            parsed,
        })
    }
}

/// How much before the flush interval the timer fires: the caller looks at it once per
/// batch (at least every 100 ms while idle), and a packet may have waited up to a ring
/// block's retire timeout before its batch. So a packet older than the interval is on disk.
const FLUSH_MARGIN: Duration = Duration::from_millis(250);

enum Writer {
    Pcapng(PcapngWriter<Output>),
    Pcap(PcapWriter<Output>),
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Writer::Pcapng(_) => "Pcapng",
            Writer::Pcap(_) => "Pcap",
        })
    }
}

impl Writer {
    fn out(&mut self) -> &mut Output {
        match self {
            Writer::Pcapng(w) => w.get_mut(),
            Writer::Pcap(w) => w.get_mut(),
        }
    }

    /// Formats `p`'s block. Out of line: the block's writer is the longest code a packet
    /// runs, and kept apart it is compiled the same whatever its caller does around it.
    #[inline(never)]
    /// Formats `p`; `hash` is its [`Packet::hash`] when its caller has it already.
    fn format(&mut self, p: &Packet<'_>, hash: Option<u32>) -> io::Result<()> {
        match self {
            Writer::Pcapng(w) => w.write_epb(&Epb {
                if_id: p.iface,
                ts_ns: p.ts_ns,
                data: p.data,
                orig_len: p.wire_len,
                vlan_tci: p.vlan,
                queue: p.queue,
                hash: Some(hash.unwrap_or_else(|| p.hash())),
                dropcount: None,
            }),
            Writer::Pcap(w) => w.write_packet(p.ts_ns, p.data, p.wire_len, p.vlan),
        }
    }

    fn out_ref(&self) -> &Output {
        match self {
            Writer::Pcapng(w) => w.get_ref(),
            Writer::Pcap(w) => w.get_ref(),
        }
    }

    fn into_out(self) -> Output {
        match self {
            Writer::Pcapng(w) => w.into_inner(),
            Writer::Pcap(w) => w.into_inner(),
        }
    }

    /// Starts a file on `out`: its header (pcap header, or SHB and IDBs).
    fn start(cfg: &FileConfig, out: Output) -> io::Result<Self> {
        let mut w = match cfg.file.format {
            Format::Pcapng => Writer::Pcapng(PcapngWriter::new(out, "corecap", &cfg.interfaces)?),
            Format::Pcap | Format::PcapMicros => {
                let lt = cfg.interfaces.first().map(|i| i.linktype).unwrap_or(1);
                Writer::Pcap(PcapWriter::with_precision(
                    out,
                    u32::from(lt),
                    cfg.snaplen,
                    cfg.file.format == Format::Pcap,
                )?)
            }
        };
        w.out().header_done();
        Ok(w)
    }
}

/// What a file sink leaves behind.
#[derive(Debug, Default)]
pub struct Finished {
    /// Files written and kept, oldest first.
    pub files: Vec<PathBuf>,
    /// Packets taken and then lost at the disk (cut from a file after a failed write, or
    /// taken after it): `disk` drops, taken back from the delivered count.
    pub lost: u64,
    /// The error that ended writing, naming the file and the OS error.
    pub error: Option<String>,
    /// Notes for the user (direct I/O refused by a filesystem).
    pub notes: Vec<String>,
}

/// A capture file being written, with rotation.
#[derive(Debug)]
pub struct FileSink {
    cfg: FileConfig,
    writer: Option<Writer>,
    disk: Option<Disk>,
    seq: u32,
    /// Files begun: the first, then one per rotation.
    begun: u64,
    first_ts: Option<u64>,
    last_ts: u64,
    /// Packets written per interface in the current file.
    delivered: Vec<u64>,
    /// Written to a stream: standard output or a FIFO.
    stream: bool,
    /// When the flush timer first saw blocks not yet on their way to the disk.
    dirty_at: Option<std::time::Instant>,
    /// With `-b duration:`, when the current file's first packet was written (monotonic).
    first_at: Option<std::time::Instant>,
    /// The current file has lasted its `-b duration:`: the next packet starts a new one.
    time_due: bool,
    /// What the index is told of a packet, by interface (empty: no index).
    told: Vec<Told>,
    /// The next packet's connection was asked for by [`FileSink::ahead`]: its index
    /// position is in cache, and its entry can be asked for at once.
    warmed: bool,
}

impl FileSink {
    /// Creates the first file (under its hidden name) and starts the disk writer.
    pub fn create(cfg: FileConfig) -> io::Result<Self> {
        let stream = cfg.path == Path::new("-") || corecap_store::write::disk::is_fifo(&cfg.path);
        let seq = if cfg.file.rotation.active() && !stream {
            next_rotation(&cfg.path)?
        } else {
            1
        };
        let path = if cfg.file.rotation.active() {
            rotated_path(&cfg.path, seq)
        } else {
            cfg.path.clone()
        };
        check_first(&cfg, &path, stream)?;
        let (disk, writer) = start_disk(&cfg, path, stream)?;
        let n = cfg.interfaces.len();
        // The index and the session table read the same of each packet: either needs it.
        let told = Told::for_config(
            &cfg,
            (cfg.file.index || cfg.file.sessions.is_some()) && !stream,
        );
        Ok(Self {
            cfg,
            told,
            writer: Some(writer),
            disk: Some(disk),
            seq,
            begun: 1,
            first_ts: None,
            last_ts: 0,
            delivered: vec![0; n],
            stream,
            dirty_at: None,
            first_at: None,
            time_due: false,
            warmed: false,
        })
    }
}

/// Refuses a first file that a capture may not write: a name of the recording's own kind
/// (an index's, a hidden one), a file that exists (never written over), or a stream asked
/// to rotate or to be sealed.
fn check_first(cfg: &FileConfig, path: &Path, stream: bool) -> io::Result<()> {
    if !stream {
        // Rotated and per-worker names keep the base's ending and its leading dot.
        for p in [&cfg.path, path] {
            if let Some(why) = corecap_index::capture_name_error(p) {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
            }
        }
    }
    if !stream && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is a directory: -w takes a file's name (DIR/NAME.pcapng)",
                path.display()
            ),
        ));
    }
    if !stream && std::fs::symlink_metadata(path).is_ok() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{} exists: corecap never writes over a file; give another name, or \
                     rotate (-b) to go on after the files already there",
                path.display()
            ),
        ));
    }
    if stream && (cfg.file.rotation.active() || cfg.file.seal.is_some()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is a stream: it cannot be rotated or sealed",
                path.display()
            ),
        ));
    }
    Ok(())
}

/// Opens the first file (or the stream) and starts its disk writer; returns it and the
/// packet writer that formats into it.
fn start_disk(cfg: &FileConfig, path: PathBuf, stream: bool) -> io::Result<(Disk, Writer)> {
    // A stream's buffers are written whole (alignment 1), so a buffer handed over
    // early carries nothing back.
    let disk_cfg = DiskConfig {
        direct: cfg.file.direct,
        seal: cfg.file.seal.clone(),
        files: cfg.file.rotation.files,
        retention: cfg.file.retention.clone(),
        index: cfg.file.index,
        flush: cfg.file.flush.is_some(),
        sessions_log: cfg.file.sessions_log.clone(),
        compress: cfg.file.compress,
    };
    let (first, align) = if path == Path::new("-") {
        (Err(Stream::stdout()), 1)
    } else if stream {
        (Err(Stream::fifo(&path)?), 1)
    } else {
        let f = corecap_store::write::disk::open_part(&path, disk_cfg.direct_io())?;
        if let Some(who) = &cfg.file.owner {
            corecap_linux::privilege::chown_fd(f.file(), who).map_err(|e| {
                io::Error::other(format!(
                    "{}: {}",
                    path.display(),
                    corecap_linux::error_chain(&e)
                ))
            })?;
        }
        let a = f.align();
        (Ok((f, path)), a)
    };
    let (disk, mut out) = Disk::start(
        disk_cfg,
        first,
        align,
        corecap_store::write::disk::BUFFERS_AT_START,
        cfg.file.seal.is_some(),
        cfg.file.index && !stream,
    )?;
    out.may_grow(cfg.file.backlog.clone());
    if let (Some(s), false) = (cfg.file.sessions, stream) {
        out.keep_sessions(s);
    }
    Writer::start(cfg, out).map(|w| (disk, w))
}

impl FileSink {
    /// Called once per batch (and while idle): on a stream (standard output, a FIFO),
    /// hands the blocks formatted so far to the writer now rather than when a buffer is
    /// full, so that a live reader sees packets as they come; on a file, runs the flush
    /// timer, so that a packet older than the flush interval is on disk. Never waits.
    ///
    /// It also reads the clock for `-b duration:`, here once a batch rather than once a
    /// packet: a file is due once that long has passed on the monotonic clock since its
    /// first packet, and the next packet starts a new file. Packet times would follow the
    /// system clock, which steps (back an hour: a file an hour too long; forward: a file cut
    /// at once), and a replay's packet times are the file's own. A file read with `-r` is
    /// cut by the time the run took too, as dumpcap cuts by its own running time: as fast
    /// as the file is read, `duration:60` gives fewer files than the packets' times span
    /// (`editcap -i` splits a file by packet time).
    pub fn hand_over(&mut self) {
        if let (Some(d), Some(t)) = (self.cfg.file.rotation.duration, self.first_at) {
            self.time_due |= t.elapsed() >= d;
        }
        let Some(w) = self.writer.as_mut() else {
            return;
        };
        if self.stream {
            w.out().hand_over();
            return;
        }
        let Some(iv) = self.cfg.file.flush else {
            return;
        };
        if !w.out().unflushed() {
            self.dirty_at = None;
            return;
        }
        let now = std::time::Instant::now();
        let since = *self.dirty_at.get_or_insert(now);
        if now.duration_since(since) + FLUSH_MARGIN >= iv && w.out().flush() {
            self.dirty_at = None;
        }
    }

    /// For a source that can wait (a file read with `-r`): while the disk writer is behind,
    /// waits for it to take a packet, until a buffer is at hand, the file failed, the
    /// writer is gone, or `give_up()` says so. [`FileSink::write`] then takes the packet
    /// or says why not.
    #[inline]
    pub fn wait_for_disk(&mut self, give_up: impl Fn() -> bool) {
        loop {
            let Some(w) = self.writer.as_mut() else {
                return;
            };
            if w.out().wait_ready(Duration::from_millis(50)) || self.failed() || give_up() {
                return;
            }
        }
    }

    /// Writes one packet; a refusal says why it was not taken (count it as a drop).
    pub fn write(&mut self, p: &Packet<'_>) -> Result<(), Refused> {
        self.write_parsed(p, None)
    }

    /// Whether the file takes a packet now: its disk writer has not failed, a buffer is
    /// there, no limit is reached; starts the next file first when rotation is due.
    #[inline]
    fn ready_for_packet(&mut self) -> Result<(), Refused> {
        let Some(w) = self.writer.as_mut() else {
            return Err(Refused::Failed);
        };
        if self.disk.as_ref().is_some_and(Disk::failed) {
            return Err(Refused::Failed);
        }
        w.out().ready()?;
        let rot = self.cfg.file.rotation;
        if rot.stop_at_bytes.is_some_and(|b| w.out().len() >= b) {
            return Err(Refused::Limit);
        }
        if rot.active() {
            let size_due = rot.filesize.is_some_and(|s| w.out().len() >= s);
            // `time_due` is set by the clock, once a batch (`hand_over`).
            if size_due || self.time_due {
                if rot.stop_after_files.is_some_and(|n| self.begun >= n) {
                    return Err(Refused::Limit);
                }
                self.rotate().map_err(|_| Refused::Failed)?;
            }
        }
        Ok(())
    }

    /// [`FileSink::write`] for a packet whose transport layer its caller read already (the
    /// cutoff did): the session table and the index read that one instead of the frame's
    /// headers again, when the file holds the frame whole.
    pub fn write_parsed(
        &mut self,
        p: &Packet<'_>,
        parsed: Option<&Transport<'_>>,
    ) -> Result<(), Refused> {
        self.ready_for_packet()?;
        let rot = self.cfg.file.rotation;
        let Some(w) = self.writer.as_mut() else {
            return Err(Refused::Failed);
        };
        let told = self.told.get(p.iface as usize);
        let keep = told.map_or(usize::MAX, |t| t.keep);
        let whole = p.data.len() <= keep;
        // The transport layer of the frame as the file holds it, read once for the session
        // table, the index and the block's hash: the caller's when the file holds the frame
        // whole, else read here when the file keeps its connections.
        let own;
        let t = match (parsed, told) {
            (Some(t), _) if whole => Some(Ok(t)),
            (_, Some(told)) if w.out().keeps_sessions() => {
                own = p.link.transport(told.held(p.data), p.vlan);
                Some(own.as_ref().map_err(|e| *e))
            }
            _ => None,
        };
        // The connection's index position is asked for now, its entry after the block is
        // formatted, and the entry is used last, after the block is indexed: the waits for
        // them overlap that work.
        let at = match t {
            Some(Ok(t)) => w.out().prefetch_session(t),
            _ => None,
        };
        // Announced ahead, its index position has come: its entry at once.
        let early = std::mem::take(&mut self.warmed);
        if early {
            w.out().prefetch_session_entry(at.as_ref());
        }
        // A frame read whole has its hash in its flow key (`Transport::frame_hash`).
        let hash = match t {
            Some(Ok(t)) if whole => Some(t.frame_hash()),
            _ => None,
        };
        let r = w.format(p, hash);
        // A block the writer refused (an interface id without IDB) is rolled back too.
        if r.is_err() {
            let _ = w.out().end_block(false);
            return Err(Refused::Disk);
        }
        // Its index position has come while the packet was formatted: now its entry, which
        // comes while the packet is indexed.
        if !early {
            w.out().prefetch_session_entry(at.as_ref());
        }
        match Told::written(&self.told, p, t.and_then(Result::ok)) {
            Some(written) => w.out().end_packet(&written)?,
            None => w.out().end_block(true)?,
        }
        if let (Some(told), Some(t)) = (told, t) {
            // Its connection, at the time and with the bytes the file holds.
            let ts = told.held_ts(p.ts_ns);
            // The length on the wire as the file holds it: with the tag the ring stripped
            // put back, as the writer put it back.
            let wire = corecap_wire::vlan::tagged_orig_len(p.data.len(), p.wire_len, p.vlan);
            w.out().add_session_parsed(ts, wire, p.link, t, at.as_ref());
        }
        if self.first_ts.is_none() && rot.duration.is_some() {
            // Once a file: the clock its duration is counted on.
            self.first_at = Some(std::time::Instant::now());
        }
        self.first_ts.get_or_insert(p.ts_ns);
        self.last_ts = p.ts_ns;
        if let Some(d) = self.delivered.get_mut(p.iface as usize) {
            *d += 1;
        }
        Ok(())
    }

    /// Says which packet comes next, while the one before it is written: its connection's
    /// index position is asked for now (its transport layer read for it), so the next
    /// [`FileSink::write_parsed`] asks for the entry at once, and the position's load
    /// overlaps this packet's write. A writer that knows its next packet (the merge thread,
    /// from its batches) calls it, once it has asked for that packet's headers a few
    /// packets before. Nothing is written: a packet announced and not written changes only
    /// which memory was asked for. The transport layer is read here and again when the
    /// packet is written (a [`Transport`] borrows its packet, and is not kept): the second
    /// read is of headers in cache, cheaper than the wait it saves (the merge thread spent
    /// about 15% less, `bench/results/2026-11-28-vm/sessions-cpu.md`).
    #[inline]
    pub fn ahead(&mut self, p: &Packet<'_>) {
        let Some((out, told)) = self.session_output(p.iface) else {
            return;
        };
        if let Ok(t) = p.link.transport(told.held(p.data), p.vlan) {
            let warmed = out.prefetch_session(&t).is_some();
            self.warmed = warmed;
        }
    }

    /// The output and what the index is told of interface `iface`, when the file keeps
    /// its connections and indexes that interface.
    fn session_output(&mut self, iface: u32) -> Option<(&mut Output, &Told)> {
        let out = self.writer.as_mut()?.out();
        let told = self.told.get(iface as usize)?;
        out.keeps_sessions().then_some((out, told))
    }

    /// Whether the file keeps its connections (a sessions file beside it): only then is a
    /// packet the cutoff left out worth counting.
    pub fn keeps_sessions(&mut self) -> bool {
        self.writer
            .as_mut()
            .is_some_and(|w| w.out().keeps_sessions())
    }

    /// Counts a packet the per-flow cutoff left out into its connection's record in the
    /// file being written (seen, not kept), when the file keeps its connections; `parsed`
    /// as in [`FileSink::write_parsed`]. Nothing is written and nothing can fail.
    pub fn count_cut(&mut self, p: &Packet<'_>, parsed: Option<&Transport<'_>>) {
        let Some((out, told)) = self.session_output(p.iface) else {
            return;
        };
        let own;
        let t = match parsed {
            Some(t) => t,
            None => match p.link.transport(p.data, p.vlan) {
                Ok(t) => {
                    own = t;
                    &own
                }
                Err(_) => return,
            },
        };
        // As a written packet's: the length with the tag the ring stripped put back.
        let wire = corecap_wire::vlan::tagged_orig_len(p.data.len(), p.wire_len, p.vlan);
        out.cut_session(told.held_ts(p.ts_ns), wire, p.link, t);
    }

    /// Packets of connections the full session table could not keep a record of, over
    /// every file so far (the packets themselves are written); 0 without sessions.
    pub fn sessions_dropped(&self) -> u64 {
        self.writer
            .as_ref()
            .and_then(|w| w.out_ref().session_stats())
            .map_or(0, |s| s.sessions_dropped)
    }

    /// Whether writing failed (the capture should stop).
    pub fn failed(&self) -> bool {
        self.disk.as_ref().is_none_or(Disk::failed)
    }

    /// Files begun so far: the first, then one per rotation (kept or since deleted).
    pub fn files_begun(&self) -> u64 {
        self.begun
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.seq += 1;
        self.begun += 1;
        let next = rotated_path(&self.cfg.path, self.seq);
        self.write_isbs(&[]);
        let Some(w) = self.writer.take() else {
            return Err(io::Error::other("no file"));
        };
        let mut out = w.into_out();
        out.close_file(Some(next));
        self.first_ts = None;
        self.first_at = None;
        self.time_due = false;
        self.delivered.iter_mut().for_each(|d| *d = 0);
        self.writer = Some(Writer::start(&self.cfg, out)?);
        Ok(())
    }

    /// Interface statistics (per interface: packets counted by the source, drops) written
    /// as the file's ISBs.
    fn write_isbs(&mut self, stats: &[(u64, u64)]) {
        let Some(Writer::Pcapng(w)) = self.writer.as_mut() else {
            return;
        };
        for i in 0..self.cfg.interfaces.len() {
            let (recv, drop) = stats
                .get(i)
                .copied()
                .map_or((None, None), |(r, d)| (Some(r), Some(d)));
            let isb = Isb {
                start_ns: self.first_ts,
                end_ns: Some(self.last_ts),
                ifrecv: recv,
                ifdrop: drop,
                osdrop: drop,
                usrdeliv: self.delivered.get(i).copied(),
                ..Default::default()
            };
            if w.write_isb(i as u32, self.last_ts, &isb).is_ok() {
                let _ = w.get_mut().end_block(false);
            }
        }
    }

    /// Closes the file, with per-interface (received, dropped) statistics for the ISBs, and
    /// waits for the disk writer to finish.
    pub fn finish(mut self, stats: &[(u64, u64)]) -> Finished {
        self.write_isbs(stats);
        let mut grown = 0;
        let mut sessions = None;
        if let Some(w) = self.writer.take() {
            let mut out = w.into_out();
            grown = out.give_back();
            sessions = out.session_stats();
            out.close_file(None);
        }
        let mut report = match self.disk.take() {
            Some(d) => d.join(),
            None => DiskReport::default(),
        };
        if grown > 0 {
            let took = grown * corecap_store::write::output::BUFFER_CAPACITY;
            report.notes.push(format!(
                "the disk fell behind {}: it took {} MiB of the {} MiB backlog \
                 (--disk-backlog) to hold packets for it",
                self.cfg.path.display(),
                took >> 20,
                self.cfg.file.backlog.bytes() >> 20
            ));
        }
        if let Some(s) = sessions.filter(|s| s.sessions_dropped > 0) {
            report.notes.push(format!(
                "sessions of {}: {} packets belonged to connections past the table's {} \
                 (sessions_dropped; --sessions-per-file keeps more); the packets are all \
                 written",
                self.cfg.path.display(),
                s.sessions_dropped,
                self.cfg.file.sessions.map_or(0, |c| c.capacity)
            ));
        }
        Finished {
            files: report.files,
            lost: report.lost,
            error: report.error,
            notes: report.notes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    /// Files in `format` as [`FileOptions::plain`] has them, with their connections.
    fn options(format: Format) -> FileOptions {
        FileOptions {
            sessions: Some(corecap_store::session::SessionConfig::on_demand()),
            ..FileOptions::plain(format)
        }
    }

    /// A pcapng (or pcap) file at `path` of one Ethernet interface, written as `options`
    /// says.
    fn config(path: PathBuf, format: Format) -> FileConfig {
        FileConfig {
            path,
            interfaces: vec![InterfaceDesc::ethernet("eth0", 262144)],
            snaplen: 262144,
            file: options(format),
        }
    }

    /// An Ethernet/IPv4/UDP frame of 200 bytes, `src` and `dst` in 10.0.0.0/16.
    fn udp_frame(src: u16, dst: u16, sport: u16, dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 200];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[16..18].copy_from_slice(&186u16.to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, (src >> 8) as u8, src as u8]);
        f[30..34].copy_from_slice(&[10, 0, (dst >> 8) as u8, dst as u8]);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f[38..40].copy_from_slice(&166u16.to_be_bytes());
        f
    }

    #[test]
    fn test_the_index_built_as_blocks_are_formatted_is_the_files() {
        // Flushes (buffers handed over early, their tails written again) and rotation: each
        // file's sidecar, built by the front end block by block, lists the same packets as
        // an index built from the file's bytes, and its regions cover the file in order.
        // Packets with a VLAN tag put back, interfaces of other snap lengths and link types
        // (pcapng), and times pcap's seconds cannot hold: what the front end tells the index
        // of a block is what reading the block finds.
        let dir = std::env::temp_dir().join(format!("corecap-front-index-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("test folder");
        for format in [Format::Pcapng, Format::Pcap, Format::PcapMicros] {
            let base = dir.join(match format {
                Format::Pcapng => "rec.pcapng",
                Format::Pcap => "rec.pcap",
                Format::PcapMicros => "recus.pcap",
            });
            let mut sink = FileSink::create(FileConfig {
                file: FileOptions {
                    rotation: Rotation {
                        filesize: Some(3 << 20),
                        ..Rotation::default()
                    },
                    direct: false,
                    flush: Some(Duration::ZERO),
                    ..options(format)
                },
                interfaces: vec![
                    InterfaceDesc::ethernet("eth0", 262144),
                    InterfaceDesc::ethernet("eth1", 36),
                    InterfaceDesc {
                        linktype: 101,
                        ..InterfaceDesc::ethernet("tun0", 0)
                    },
                ],
                snaplen: 150,
                ..config(base, format)
            })
            .expect("create the file");
            let mut seed = 7u64;
            for i in 0..40_000u64 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let host = (seed >> 33) as u16 % 500;
                let mut f = udp_frame(host, 1000 + (i % 7) as u16, 1024 + host, 53);
                if seed.is_multiple_of(3) {
                    // As a raw IP packet (read so on tun0, garbage on the others).
                    f.drain(..14);
                }
                let late = seed.is_multiple_of(101);
                let p = Packet {
                    ts_ns: if late {
                        (u64::from(u32::MAX) + 1 + i) * 1_000_000_000
                    } else {
                        // Not on a whole microsecond: microsecond pcap cuts it.
                        1_700_000_000_000_000_000 + i * 1000 + seed % 1000
                    },
                    data: &f,
                    wire_len: f.len() as u32,
                    iface: (seed >> 40) as u32 % 3,
                    queue: Some(0),
                    vlan: (seed % 5 == 1).then_some(100 + host % 7),
                    link: corecap_wire::Link::Ethernet,
                };
                // The disk writer may be behind the flushes: wait for a buffer.
                while let Err(e) = sink.write(&p) {
                    assert_eq!(e, Refused::Disk, "taken");
                    std::thread::sleep(Duration::from_millis(1));
                }
                if seed.is_multiple_of(53) {
                    sink.hand_over();
                }
            }
            let done = sink.finish(&[(40_000, 0)]);
            assert!(done.error.is_none(), "{:?}", done.error);
            assert!(done.files.len() >= 3, "rotated: {:?}", done.files);
            let mut packets = 0;
            for (n, path) in done.files.iter().enumerate() {
                let file = std::fs::read(path).expect("read the file");
                let side = std::fs::read(corecap_index::sidecar_path(path)).expect("sidecar");
                let got = corecap_index::Index::parse(&side).expect("sidecar parses");
                // Rebuilt from the file with the same regions (a run of packets ends with its
                // region, so the spans depend on where regions end).
                let mut b = corecap_index::IndexBuilder::new();
                for r in &got.regions {
                    b.add_region(r.at.clone(), &file[r.at.start as usize..r.at.end as usize]);
                }
                let want = corecap_index::Index::parse(&b.finish()).expect("rebuilt");
                assert!(!got.stopped() && got.has_postings(), "{}", path.display());
                assert_eq!(got.packets(), want.packets(), "{}", path.display());
                assert_eq!(got.time_range(), want.time_range());
                assert_eq!(got.postings, want.postings, "{}", path.display());
                assert_eq!(got.regions, want.regions, "{}", path.display());
                assert_eq!(got.header, want.header);
                // A file cut at 3 MiB holds at least 3 buffers, each a region; the last file
                // may be short, and the flushes add regions only when the disk writer has a
                // buffer free (never on a slow machine, say).
                if n + 1 < done.files.len() {
                    assert!(got.regions.len() > 2, "one region per buffer handed over");
                }
                let mut end = got.regions[0].at.start;
                for r in &got.regions {
                    assert_eq!(r.at.start, end, "regions follow each other");
                    end = r.at.end;
                }
                assert_eq!(end, file.len() as u64, "the last region ends the file");
                packets += got.packets();
            }
            assert_eq!(packets, 40_000);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// pcapng blocks of type 6 (EPB) in `b`, a stream cut anywhere.
    fn epbs(b: &[u8]) -> usize {
        let (mut at, mut n) = (0, 0);
        while at + 8 <= b.len() {
            let ty = u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
            let len = u32::from_le_bytes(b[at + 4..at + 8].try_into().expect("4 bytes")) as usize;
            if len < 12 || at + len > b.len() {
                break;
            }
            n += usize::from(ty == 6);
            at += len;
        }
        n
    }

    #[test]
    fn test_fifo_stream() {
        use std::io::Read;
        use std::sync::atomic::AtomicBool;
        use std::time::Instant;

        let dir = std::env::temp_dir().join(format!("corecap-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let fifo = dir.join("f");
        let _ = std::fs::remove_file(&fifo);
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        // The reader keeps what it reads, and closes the FIFO once told to.
        let close = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let reader = std::thread::spawn({
            let (fifo, close) = (fifo.clone(), close.clone());
            move || {
                let mut f = std::fs::File::open(&fifo).expect("open for reading");
                let mut buf = vec![0u8; 1 << 16];
                while !close.load(Ordering::Relaxed) {
                    match f.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let _ = tx.send(buf[..n].to_vec());
                        }
                    }
                }
            }
        });
        let mut sink =
            FileSink::create(config(fifo.clone(), Format::Pcapng)).expect("open the FIFO");
        let frame = [0u8; 60];
        let p = Packet {
            ts_ns: 1,
            data: &frame,
            wire_len: 60,
            iface: 0,
            queue: Some(0),
            vlan: None,
            link: corecap_wire::Link::Ethernet,
        };
        for _ in 0..3 {
            sink.write(&p).expect("taken");
        }
        // Handed over now, long before a buffer is full: the reader sees all three.
        sink.hand_over();
        let mut got = Vec::new();
        while epbs(&got) < 3 {
            got.extend(
                rx.recv_timeout(Duration::from_secs(5))
                    .expect("the blocks reach the reader"),
            );
        }
        assert_eq!(
            &got[..4],
            &[0x0a, 0x0d, 0x0d, 0x0a],
            "a section header first"
        );
        assert!(std::fs::metadata(&fifo).is_ok_and(|m| {
            use std::os::unix::fs::FileTypeExt;
            m.file_type().is_fifo()
        }));
        // The reader goes away: the sink fails (the capture ends), with a note, no error.
        close.store(true, Ordering::Relaxed);
        let deadline = Instant::now() + Duration::from_secs(5);
        while !sink.failed() {
            assert!(Instant::now() < deadline, "EPIPE noticed");
            let _ = sink.write(&p);
            sink.hand_over();
            std::thread::sleep(Duration::from_millis(10));
        }
        reader.join().expect("reader");
        let done = sink.finish(&[]);
        assert_eq!(done.error, None);
        assert!(
            done.notes.iter().any(|n| n.contains("closed it")),
            "{:?}",
            done.notes
        );
        assert!(done.files.is_empty(), "a stream is no file");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 40: `-b duration:` cut files by packet time, so a clock stepped back an hour
    /// made one file of an hour, and one stepped forward cut a file at once. A file is cut
    /// once the time that passed since its first packet, on the monotonic clock, reaches
    /// the duration, whatever the packets' times say.
    #[test]
    fn issue40_time_rotation_follows_the_monotonic_clock() {
        let dir = std::env::temp_dir().join(format!("corecap-rotate-clock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("test folder");
        const T: u64 = 1_700_000_000_000_000_000;
        const HOUR: u64 = 3_600_000_000_000;
        let frame = udp_frame(1, 2, 1024, 53);
        let at = |ts_ns: u64| Packet {
            ts_ns,
            data: &frame,
            wire_len: frame.len() as u32,
            iface: 0,
            queue: Some(0),
            vlan: None,
            link: corecap_wire::Link::Ethernet,
        };
        let every = |d: Duration, name: &str| {
            FileSink::create(FileConfig {
                file: FileOptions {
                    rotation: Rotation {
                        duration: Some(d),
                        ..Rotation::default()
                    },
                    direct: false,
                    ..options(Format::Pcapng)
                },
                ..config(dir.join(name), Format::Pcapng)
            })
            .expect("create the file")
        };
        let packets_per_file = |files: &[PathBuf]| -> Vec<usize> {
            files
                .iter()
                .map(|f| epbs(&std::fs::read(f).expect("read the file")))
                .collect()
        };
        // A file an hour: packets stamped hours ahead and then back, all within a moment of
        // the monotonic clock, go into one file.
        let mut sink = every(Duration::from_secs(3600), "hour.pcapng");
        for ts in [T, T + 2 * HOUR, T + 5 * HOUR, T - HOUR] {
            sink.write(&at(ts)).expect("taken");
            sink.hand_over();
        }
        let done = sink.finish(&[]);
        assert!(done.error.is_none(), "{:?}", done.error);
        assert_eq!(packets_per_file(&done.files), [4], "{:?}", done.files);
        // A file every 200 ms: once more than that has passed (a sleep lasts at least as
        // long as asked), the next packet starts a new file, though it is stamped an hour
        // before the last one. The clock is read at the end of a batch (`hand_over`).
        let mut sink = every(Duration::from_millis(200), "step.pcapng");
        sink.write(&at(T)).expect("taken");
        sink.hand_over();
        std::thread::sleep(Duration::from_millis(300));
        sink.hand_over();
        sink.write(&at(T - HOUR)).expect("taken");
        sink.write(&at(T - HOUR + 1000)).expect("taken");
        let done = sink.finish(&[]);
        assert!(done.error.is_none(), "{:?}", done.error);
        assert_eq!(packets_per_file(&done.files), [1, 2], "{:?}", done.files);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn test_fifo_refuses_rotation() {
        let dir = std::env::temp_dir().join(format!("corecap-fifo-rot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let fifo = dir.join("f");
        let _ = std::fs::remove_file(&fifo);
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let e = FileSink::create(FileConfig {
            file: FileOptions {
                rotation: Rotation {
                    filesize: Some(1_000_000),
                    ..Rotation::default()
                },
                index: false,
                ..options(Format::Pcapng)
            },
            ..config(fifo.clone(), Format::Pcapng)
        })
        .expect_err("a stream cannot rotate");
        assert!(e.to_string().contains("cannot be rotated"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
