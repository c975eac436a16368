//! The front end of a capture file: the thread that formats pcap/pcapng blocks (a capture
//! worker, a stage thread or the merge thread) appends them to an aligned buffer, and hands
//! each full buffer to the file's disk writer ([`super::disk`]) without waiting for it.
//!
//! A plain file's buffers are written as they are, with direct I/O: a full buffer is cut at
//! the last multiple of the alignment, and the bytes after the cut (the end of the last
//! blocks, less than one alignment unit) are copied to the front of the next buffer, which
//! the disk writer then writes at the cut's offset. So the formatting thread writes each
//! byte once, and the disk writer writes whole aligned buffers.
//!
//! A plain file's sidecar index is built here too, block by block as each is formatted:
//! the packet's bytes are still in this thread's cache, where the disk writer would read
//! them cold from another CPU's (that read cost more than the rest of the index). One
//! region per buffer; the file's builder goes to the disk writer with the file's last
//! buffer, and the disk writer finishes and writes it.
//!
//! A compressed file's buffers carry no tail: each holds whole blocks only and goes to the
//! disk writer whole, which compresses it into frames ([`super::compress`]); its index is
//! built here all the same, at offsets of the decompressed stream.
//!
//! A sealed file's buffers are plaintext with [`CHUNK_HEAD`] bytes free at the front; the
//! disk writer indexes them by chunk, seals and stages them (sealing is the disk writer's
//! work).
//!
//! When no buffer is free (the disk is behind) the front end makes another from the
//! capture's [`Backlog`] (`--disk-backlog`), which all its sinks share: a sink starts with
//! a few buffers and holds more only while its disk is behind, as the page cache does for
//! a writer through it. The memory so made is kept until the sink ends, then given back.
//! Once the backlog is spent the front end refuses packets, which the caller counts as
//! `disk` drops; it never waits.

use std::io::{self, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

use corecap_linux::direct::AlignedBuf;

use crate::sealed::{CHUNK_HEAD, TAG};
use corecap_index::IndexBuilder;
use corecap_wire::{Link, ParseError, Transport};

use crate::session::format::Encoder;
use crate::session::{Prefetched, SessionConfig, SessionStats, SessionTable};

/// What a file sink's front end sends its disk writer.
#[derive(Debug)]
pub(crate) enum Msg {
    /// A full buffer.
    Fill(Filled),
    /// A file's last buffer, and the plain file's index that the front end built; then
    /// start `next`, if given.
    Close {
        last: Filled,
        next: Option<std::path::PathBuf>,
        index: Option<Box<corecap_index::IndexBuilder>>,
        /// The file's connections, in order of first packet, as its sessions file's
        /// records.
        sessions: Option<Box<Encoder>>,
    },
}

/// Bytes formatted before a buffer is handed to the disk writer.
pub const BUFFER_BYTES: usize = 1 << 20;
/// Room past [`BUFFER_BYTES`] for the block that crosses it (a pcapng block of a
/// 262144-byte snap length with options), a sealed chunk's tag and the carried tail.
pub const BUFFER_SLACK: usize = 512 << 10;
/// Bytes of one buffer, with its slack.
pub const BUFFER_CAPACITY: usize = BUFFER_BYTES + BUFFER_SLACK;

// A buffer's frame cuts fit their array.
const _: () = assert!(BUFFER_CAPACITY / super::compress::FRAME_BYTES < super::compress::MAX_CUTS);
/// The least backlog of a capture's file sinks together, in buffers (48 MiB).
pub const BUFFERS_AT_LEAST: usize = 32;
/// The backlog of a file sink that is given none: 48 MiB.
pub const DEFAULT_BACKLOG: u64 = (BUFFERS_AT_LEAST * BUFFER_CAPACITY) as u64;

/// What a capture's file sinks may hold together while their disk is behind
/// (`--disk-backlog`), beyond the buffers each starts with: a count of buffers that any of
/// them takes one at a time and gives back when it ends. Clones share the count, so the
/// memory is bounded by the capture's link, however many files it writes.
#[derive(Clone, Debug)]
pub struct Backlog {
    bytes: u64,
    left: Arc<AtomicUsize>,
}

impl Backlog {
    /// A backlog of `bytes` (at least [`DEFAULT_BACKLOG`]).
    pub fn new(bytes: u64) -> Self {
        let bytes = bytes.max(DEFAULT_BACKLOG);
        let n = usize::try_from(bytes / BUFFER_CAPACITY as u64).unwrap_or(usize::MAX);
        Self {
            bytes,
            left: Arc::new(AtomicUsize::new(n)),
        }
    }

    /// Its size in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Takes one buffer's worth, if any is left.
    fn take(&self) -> bool {
        // Relaxed: a count; no other memory is published through it.
        self.left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Gives `n` buffers' worth back (a sink ended, or the kernel refused the memory).
    pub fn give(&self, n: usize) {
        self.left.fetch_add(n, Ordering::Relaxed);
    }
}

impl Default for Backlog {
    fn default() -> Self {
        Self::new(DEFAULT_BACKLOG)
    }
}

/// Why a packet was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// No buffer was free: the disk is behind (a `disk` drop).
    Disk,
    /// The file failed (a write error); the capture should stop.
    Failed,
    /// The sink took all it was asked to (`-a files:`, `-a filesize:`, `-G` with `-W`):
    /// the capture should stop, and the packet counts as a `stop` drop.
    Limit,
}

/// What the writer of a packet block knows of it, for the index: what reading the block
/// back would find (see [`IndexBuilder::add_packet`]).
#[derive(Clone, Copy, Debug)]
pub struct Written<'a> {
    /// The packet's time as the file holds it, in nanoseconds.
    pub ts_ns: u64,
    /// Its interface's link type.
    pub linktype: u16,
    /// Its bytes as the block holds them.
    pub frame: &'a [u8],
    /// The transport layer of `frame`, when its writer read it already (for the session
    /// table or the cutoff): the index then reads no header twice.
    pub parsed: Option<&'a Transport<'a>>,
}

/// A buffer handed to the disk writer.
#[derive(Debug)]
pub(crate) struct Filled {
    pub(crate) buf: AlignedBuf,
    /// Plain files: the file offset of `buf[0]`.
    pub(crate) off: u64,
    /// Plain files: bytes to write from `buf[0]` (a multiple of the alignment, except in
    /// a file's last buffer).
    pub(crate) write_len: usize,
    /// The whole blocks that are new in this buffer (sealed: the chunk's plaintext).
    pub(crate) blocks: std::ops::Range<usize>,
    /// Packets in `blocks`.
    pub(crate) packets: u64,
    /// In the first buffer of a file: the file header's length (pcap header, or pcapng
    /// SHB and IDBs) at the front of `blocks`; else 0.
    pub(crate) header: usize,
    /// Handed over early by the flush timer: a plain file's writer writes through the end
    /// of `blocks` (padded to the alignment), and the next buffer, which starts with the
    /// unaligned tail again, rewrites that last aligned unit.
    pub(crate) flush: bool,
    /// Where a compressed file's buffer is cut into frames.
    pub(crate) cuts: super::compress::Cuts,
}

/// The formatting side of a capture file.
#[derive(Debug)]
pub struct Output {
    to_disk: Sender<Msg>,
    free: Receiver<AlignedBuf>,
    /// The buffer being filled; None while stalled with no free buffer.
    buf: Option<AlignedBuf>,
    /// A full buffer waiting for a free one to follow it (stalled).
    parked: Option<AlignedBuf>,
    /// Bytes in `buf` (or `parked`).
    len: usize,
    /// Where this buffer's new blocks start: after the carried tail (plain) or the chunk
    /// head (sealed). Always a block boundary.
    start: usize,
    /// `len` after the last whole block.
    mark: usize,
    /// File offset of `buf[0]` (plain files).
    off: u64,
    /// Packets whose blocks lie in `buf[start..mark]`.
    packets: u64,
    /// Bytes of blocks formatted into this file.
    bytes: u64,
    /// The file header's length, while it is in the current buffer.
    header: usize,
    align: usize,
    sealed: bool,
    /// Each buffer goes to the disk writer whole, with no tail carried into the next: a
    /// sealed file's (a chunk) or a compressed file's (its frames).
    whole: bool,
    /// A block did not fit: it is rolled back at its end.
    overflow: bool,
    /// The disk writer is gone.
    dead: bool,
    /// The buffer being sent is a flush (see [`Output::flush`]).
    flushing: bool,
    /// Some whole block is not on its way to the disk yet (it is in `buf`, or in the tail
    /// carried from a full buffer): what the flush timer looks at.
    unflushed: bool,
    /// The current file's index (plain files, when they are indexed: see the module doc).
    index: Option<Box<IndexBuilder>>,
    /// What the capture's sinks may still make while the disk is behind.
    backlog: Backlog,
    /// Buffers made so far while the disk was behind.
    grown: usize,
    /// The current file's connections (see [`Output::keep_sessions`]).
    sessions: Option<Box<SessionTable>>,
    /// A compressed file: where each buffer is cut into frames is noted in `cuts`.
    compressed: bool,
    /// Where the buffer is cut into frames (compressed files).
    cuts: super::compress::Cuts,
}

impl Output {
    pub(crate) fn new(
        to_disk: Sender<Msg>,
        free: Receiver<AlignedBuf>,
        first: AlignedBuf,
        align: usize,
        sealed: bool,
        indexed: bool,
        compressed: bool,
    ) -> Self {
        let start = if sealed { CHUNK_HEAD } else { 0 };
        Self {
            to_disk,
            free,
            buf: Some(first),
            parked: None,
            len: start,
            start,
            mark: start,
            off: 0,
            packets: 0,
            bytes: 0,
            header: 0,
            align,
            sealed,
            whole: sealed || compressed,
            overflow: false,
            dead: false,
            flushing: false,
            unflushed: false,
            index: (indexed && !sealed).then(|| Box::new(IndexBuilder::new())),
            backlog: Backlog::new(0),
            grown: 0,
            sessions: None,
            compressed,
            cuts: Default::default(),
        }
    }

    /// Keeps one record per connection of each file, written beside it when it closes
    /// ([`crate::session`]). The table is made here, once, with all its memory.
    pub fn keep_sessions(&mut self, cfg: SessionConfig) {
        self.sessions = Some(Box::new(SessionTable::new(cfg)));
    }

    /// Counts a packet just written into its connection (no allocation: a full table
    /// counts what it cannot keep). `ts_ns` is the time as the file holds it, `frame` the
    /// bytes it holds, `vlan` the tag the ring stripped.
    #[inline]
    pub fn add_session(
        &mut self,
        ts_ns: u64,
        wire_len: u32,
        frame: &[u8],
        link: Link,
        vlan: Option<u16>,
    ) {
        if let Some(t) = self.sessions.as_mut() {
            t.add(ts_ns, wire_len, frame, link, vlan);
        }
    }

    /// [`Output::add_session`] for a packet whose transport layer was read already (see
    /// [`SessionTable::add_parsed`]); `t` is that of `frame` as the file holds it, and `at`
    /// what [`Output::prefetch_session`] gave for it, if it was asked.
    #[inline]
    pub fn add_session_parsed(
        &mut self,
        ts_ns: u64,
        wire_len: u32,
        link: Link,
        t: Result<&Transport<'_>, ParseError>,
        at: Option<&Prefetched>,
    ) {
        if let Some(table) = self.sessions.as_mut() {
            match (t, at) {
                (Ok(t), Some(at)) => table.add_prefetched(ts_ns, wire_len, link, t, at),
                (Ok(t), None) => table.add_parsed(ts_ns, wire_len, link, t),
                (Err(why), _) => table.unparsed(why),
            }
        }
    }

    /// Asks for the session table's slot of a packet's connection ahead of its update
    /// ([`SessionTable::prefetch`]): called before the packet is formatted and indexed, so
    /// that the slot has come by [`Output::add_session_parsed`]. None without sessions.
    #[inline(always)]
    pub fn prefetch_session(&self, t: &Transport<'_>) -> Option<Prefetched> {
        self.sessions.as_ref().map(|table| table.prefetch(t))
    }

    /// Asks for the entry of the connection `at` found ([`SessionTable::prefetch_entry`]):
    /// called after the packet is formatted, before it is indexed.
    #[inline(always)]
    pub fn prefetch_session_entry(&self, at: Option<&Prefetched>) {
        if let (Some(table), Some(at)) = (self.sessions.as_ref(), at) {
            table.prefetch_entry(at);
        }
    }

    /// Counts a packet a per-flow cutoff left out of the file into its connection, as seen
    /// and not kept ([`SessionTable::add_cut`]); `t` is its transport layer.
    #[inline]
    pub fn cut_session(&mut self, ts_ns: u64, wire_len: u32, link: Link, t: &Transport<'_>) {
        if let Some(table) = self.sessions.as_mut() {
            table.add_cut(ts_ns, wire_len, link, t);
        }
    }

    /// Whether each file keeps its connections ([`Output::keep_sessions`]).
    pub fn keeps_sessions(&self) -> bool {
        self.sessions.is_some()
    }

    /// What the session table counted, over all files so far.
    pub fn session_stats(&self) -> Option<SessionStats> {
        self.sessions.as_ref().map(|t| t.stats())
    }

    /// Lets the front end make buffers from `backlog` while the disk is behind.
    pub fn may_grow(&mut self, backlog: Backlog) {
        self.backlog = backlog;
    }

    /// Buffers made while the disk was behind, beyond those of the start; given back to
    /// the backlog here, as the sink ends and its buffers go.
    pub fn give_back(&mut self) -> usize {
        self.backlog.give(self.grown);
        self.grown
    }

    /// Takes the block just formatted, `buf[mark..len]`, into the file: indexed while it
    /// is in cache (from what its writer says of it, or else read back), counted, and
    /// marked whole.
    #[inline]
    fn take_block(&mut self, written: Option<&Written<'_>>) {
        if let Some(ix) = self.index.as_mut() {
            let at = self.off + self.mark as u64;
            match (written, self.buf.as_ref()) {
                (Some(w), _) => ix.add_packet_parsed(
                    at..self.off + self.len as u64,
                    w.ts_ns,
                    w.linktype,
                    w.frame,
                    w.parsed,
                ),
                (None, Some(buf)) => ix.add_blocks(at, &buf.bytes()[self.mark..self.len]),
                (None, None) => {}
            }
        }
        self.bytes += (self.len - self.mark) as u64;
        self.mark = self.len;
        if self.compressed {
            self.cuts.block_ends(self.start, self.len);
        }
    }

    /// Whether some whole block has not been handed to the disk writer yet.
    pub fn unflushed(&self) -> bool {
        self.unflushed
    }

    /// Bytes of blocks formatted into the current file.
    pub fn len(&self) -> u64 {
        self.bytes
    }

    /// Whether nothing was formatted into the current file.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    fn take_free(&mut self) -> Option<AlignedBuf> {
        match self.free.try_recv() {
            Ok(b) => Some(b),
            Err(std::sync::mpsc::TryRecvError::Empty) => self.make_buffer(),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                self.dead = true;
                None
            }
        }
    }

    /// A new buffer while the disk is behind, if the backlog allows one and the kernel
    /// gives the memory: once per MiB of packets held, never per packet.
    #[cold]
    fn make_buffer(&mut self) -> Option<AlignedBuf> {
        if !self.backlog.take() {
            return None;
        }
        let b = AlignedBuf::try_new(BUFFER_CAPACITY, self.align);
        match b {
            Some(_) => self.grown += 1,
            // The kernel has no more to give: hold what is held, drop the rest as `disk`.
            None => self.backlog.give(1),
        }
        b
    }

    /// Whether a packet can be taken now. After a stall, a free buffer lets the parked
    /// full one go out first.
    pub fn ready(&mut self) -> Result<(), Refused> {
        if self.dead {
            return Err(Refused::Failed);
        }
        if self.buf.is_none() {
            let Some(fresh) = self.take_free() else {
                return Err(if self.dead {
                    Refused::Failed
                } else {
                    Refused::Disk
                });
            };
            self.take_fresh(fresh);
        }
        Ok(())
    }

    /// A free buffer came back: the parked full one goes out first, or it is the buffer to
    /// fill.
    fn take_fresh(&mut self, fresh: AlignedBuf) {
        match self.parked.take() {
            Some(full) => self.send_full(full, fresh),
            None => self.buf = Some(fresh),
        }
    }

    /// Waits up to `limit` for a free buffer when none is at hand (the disk is behind);
    /// whether the wait is over: a buffer is at hand, or the disk writer is gone and none
    /// will come (then [`Output::ready`] says so). For sources that can wait (files): a
    /// live source never waits, it counts the packet as a `disk` drop.
    #[inline]
    pub fn wait_ready(&mut self, limit: std::time::Duration) -> bool {
        if self.buf.is_none() && !self.dead {
            match self.free.recv_timeout(limit) {
                Ok(fresh) => self.take_fresh(fresh),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => self.dead = true,
            }
        }
        self.buf.is_some() || self.dead
    }

    /// Marks the end of the file header (written right after the file is started).
    pub fn header_done(&mut self) {
        self.take_block(None);
        self.header = self.len - self.start;
    }

    /// Ends a whole block (`packet`: an EPB or a pcap record). Hands the buffer over when
    /// it is full. An error means the block was rolled back (count the packet dropped).
    pub fn end_block(&mut self, packet: bool) -> Result<(), Refused> {
        self.end(packet, None)
    }

    /// Ends a whole packet block as [`Output::end_block`] does, with what its writer knows
    /// of it, so that the index need not read the block back.
    pub fn end_packet(&mut self, written: &Written<'_>) -> Result<(), Refused> {
        self.end(true, Some(written))
    }

    fn end(&mut self, packet: bool, written: Option<&Written<'_>>) -> Result<(), Refused> {
        if self.overflow || self.buf.is_none() {
            self.overflow = false;
            self.len = self.mark;
            return Err(if self.dead {
                Refused::Failed
            } else {
                Refused::Disk
            });
        }
        self.take_block(written);
        self.packets += u64::from(packet);
        self.unflushed = true;
        if self.len - self.start >= BUFFER_BYTES {
            let full = self.buf.take().expect("buffer checked above");
            match self.take_free() {
                Some(fresh) => self.send_full(full, fresh),
                None => self.parked = Some(full),
            }
        }
        Ok(())
    }

    /// Hands the buffer's whole blocks over now, if there are any and a free buffer is
    /// there to follow it (never waits). For streams, whose alignment is 1.
    pub fn hand_over(&mut self) {
        if self.whole || self.overflow || self.mark == self.start || self.len != self.mark {
            return;
        }
        let Some(full) = self.buf.take() else { return };
        match self.take_free() {
            Some(fresh) => self.send_full(full, fresh),
            None => self.buf = Some(full),
        }
    }

    /// The flush timer: hands the whole blocks formatted so far to the disk writer now, if
    /// some are not on their way yet and a free buffer is there to follow (never waits; a
    /// stalled front end flushes once a buffer comes back). A plain file's writer writes
    /// them padded to the alignment, and the unaligned tail is written again, whole, with
    /// the next buffer. Returns whether it flushed.
    pub fn flush(&mut self) -> bool {
        if !self.unflushed || self.overflow || self.len != self.mark || self.dead {
            return false;
        }
        let Some(full) = self.buf.take() else {
            return false;
        };
        let Some(fresh) = self.take_free() else {
            self.buf = Some(full);
            return false;
        };
        self.flushing = true;
        self.send_full(full, fresh);
        self.flushing = false;
        self.unflushed = false;
        true
    }

    /// This buffer's contents as a message; resets the counters for the next buffer.
    fn filled(&mut self, buf: AlignedBuf, last: bool) -> (Filled, usize) {
        let write_len = if last || self.whole {
            self.len
        } else {
            self.len / self.align * self.align
        };
        if let Some(ix) = self.index.as_mut() {
            ix.end_region(self.off + self.start as u64..self.off + self.len as u64);
        }
        let f = Filled {
            buf,
            off: self.off,
            write_len,
            blocks: self.start..self.len,
            packets: self.packets,
            header: std::mem::take(&mut self.header),
            flush: self.flushing,
            cuts: std::mem::take(&mut self.cuts),
        };
        let tail = self.len - write_len;
        // A full buffer's aligned part goes out; its tail is still only here (a sealed
        // file's tail waits in the disk writer's staging buffer instead).
        self.unflushed = tail > 0 || self.whole;
        self.off += write_len as u64;
        self.packets = 0;
        (f, tail)
    }

    /// Sends the full buffer and carries its unaligned tail into `fresh`.
    fn send_full(&mut self, full: AlignedBuf, mut fresh: AlignedBuf) {
        let (f, tail) = self.filled(full, false);
        if self.sealed {
            self.start = CHUNK_HEAD;
        } else if self.whole {
            self.start = 0;
        } else {
            fresh.bytes_mut()[..tail].copy_from_slice(&f.buf.bytes()[f.write_len..self.len]);
            self.start = tail;
        }
        self.len = self.start;
        self.mark = self.start;
        self.buf = Some(fresh);
        if self.to_disk.send(Msg::Fill(f)).is_err() {
            self.dead = true;
        }
    }

    /// Ends the current file: its last buffer goes to the disk writer, which cuts the file
    /// to its exact length, writes its index and gives it its name. With `next`, the disk
    /// writer then starts that file, and blocks formatted from here on go into it. Waits
    /// for a free buffer only when `next` is None (the end of the capture).
    pub fn close_file(&mut self, next: Option<std::path::PathBuf>) {
        self.len = self.mark;
        let full = match (self.parked.take(), self.buf.take()) {
            (Some(p), Some(b)) => {
                // Cannot happen (a parked buffer leaves `buf` empty); keep both safe.
                drop(b);
                p
            }
            (Some(p), None) | (None, Some(p)) => p,
            (None, None) => AlignedBuf::new(self.align, self.align),
        };
        let (last, _) = self.filled(full, true);
        let more = next.is_some();
        self.unflushed = false;
        let index = self.index.take();
        if more && index.is_some() {
            self.index = Some(Box::new(IndexBuilder::new()));
        }
        // The table is emptied for the next file; its records go with this one.
        let sessions = self.sessions.as_mut().map(|t| Box::new(t.finish_encoded()));
        let close = Msg::Close {
            last,
            next,
            index,
            sessions,
        };
        if self.to_disk.send(close).is_err() {
            self.dead = true;
        }
        self.off = 0;
        self.bytes = 0;
        self.start = if self.sealed { CHUNK_HEAD } else { 0 };
        self.len = self.start;
        self.mark = self.start;
        if more {
            // The next file's header goes in at once, so it needs a buffer: wait for one
            // (rotation is rare), or make one if the disk writer holds them all for long.
            self.buf = match self.free.recv_timeout(std::time::Duration::from_secs(1)) {
                Ok(b) => Some(b),
                Err(_) if !self.dead => Some(AlignedBuf::new(BUFFER_CAPACITY, self.align)),
                Err(_) => None,
            };
        }
    }
}

impl Write for Output {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let room = if self.sealed { TAG } else { 0 };
        match self.buf.as_mut() {
            Some(buf) if self.len + b.len() + room <= buf.capacity() => {
                buf.bytes_mut()[self.len..self.len + b.len()].copy_from_slice(b);
                self.len += b.len();
            }
            _ => self.overflow = true,
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_a_backlog_is_shared_by_its_clones_and_given_back() {
        let a = Backlog::new(DEFAULT_BACKLOG);
        let b = a.clone();
        let n = (a.bytes() / BUFFER_CAPACITY as u64) as usize;
        let taken = (0..2 * n).filter(|i| if i % 2 == 0 { a.take() } else { b.take() });
        assert_eq!(
            taken.count(),
            n,
            "two sinks take no more than the capture's backlog"
        );
        assert!(!a.take() && !b.take());
        b.give(3);
        assert_eq!(
            (0..10).filter(|_| a.take()).count(),
            3,
            "what one gives back, another takes"
        );
    }
}
