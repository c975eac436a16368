//! Memory-mapped packet rings: the TPACKET_V3 receive ring and the TPACKET_V2 transmit ring.
//!
//! # Receive ring protocol (TPACKET_V3)
//!
//! The ring is `block_nr` blocks of `block_size` bytes. Each block starts with a
//! `tpacket_block_desc` whose `block_status` word is the only word both sides write:
//!
//! 1. The kernel fills the current block with packets, then closes it (full, or after
//!    `tp_retire_blk_tov` ms) in `prb_close_block()`: `smp_wmb()`, then sets
//!    `block_status = TP_STATUS_USER`.
//! 2. User space (one thread: the worker that owns the ring) waits for `TP_STATUS_USER` on
//!    block `next` with an Acquire load (A1), reads every packet of the block, then stores
//!    `TP_STATUS_KERNEL` with Release (R1), so the reads end before the kernel may refill it.
//! 3. If user space still owns the block the kernel wants next, the kernel freezes the queue
//!    and drops packets (counted in `tp_drops` and `tp_freeze_q_cnt`) until it is returned
//!    ("Queue freeze logic" in net/packet/af_packet.c).
//!
//! Blocks are consumed strictly in ring order. A [`Block`] guard hands out packet slices that
//! borrow the guard, so no slice outlives the release of its block.
//!
//! # Transmit ring protocol (TPACKET_V2)
//!
//! Each frame's `tp_status` is `TP_STATUS_AVAILABLE` while user space owns it. User space
//! writes the frame, sets `tp_len`, then stores `TP_STATUS_SEND_REQUEST` with Release; a
//! `send()` makes the kernel transmit every requested frame, and the skb destructor hands the
//! frame back by storing `TP_STATUS_AVAILABLE` (or `TP_STATUS_WRONG_FORMAT`).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::abi::{self, block_desc, tpacket2_hdr, tpacket3_hdr};
use crate::error::{Error, ErrorKind, Result};
use crate::socket::PacketSocket;

/// A shared mapping of a packet ring, unmapped on drop.
#[derive(Debug)]
struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory shared with the kernel, not tied to a thread; the ring
// types that own it are used by one thread at a time.
unsafe impl Send for Mmap {}

impl Mmap {
    fn map(sock: &PacketSocket, len: usize) -> Result<Self> {
        // packet_mmap() inserts every ring page at mmap time, so MAP_POPULATE would only
        // repeat that work, and the pages are kernel memory that is never swapped.
        // SAFETY: maps the ring the kernel allocated for this socket; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                sock.raw(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::last("mmap of the packet ring"));
        }
        let ptr = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| Error::new(ErrorKind::Sys, "mmap returned null"))?;
        Ok(Self { ptr, len })
    }

    /// The status word at `off`, which the kernel writes concurrently.
    fn status(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off + 4 <= self.len);
        // SAFETY: `off` is in bounds and 4-aligned (the mapping is page-aligned); the word is
        // only ever accessed atomically by user space, and the kernel writes it as a u32.
        unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(off).cast::<u32>()) }
    }

    /// Reads a u32 the kernel wrote before publishing the block (ordered by A1).
    fn read_u32(&self, off: usize) -> u32 {
        assert!(off.is_multiple_of(4) && off + 4 <= self.len);
        // SAFETY: in bounds and aligned; the kernel does not write it while we own the block.
        unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(off).cast::<u32>()) }
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `map` mapped; no borrow of it outlives `self`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Geometry of a receive ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Bytes per block; a multiple of the page size.
    pub block_size: u32,
    /// Number of blocks.
    pub block_nr: u32,
    /// Milliseconds after which the kernel closes a partly filled block.
    pub retire_tov_ms: u32,
}

impl RingConfig {
    /// A ring of about `total` bytes in blocks of `block_size` bytes.
    pub fn with_size(total: u64, block_size: u32, retire_tov_ms: u32) -> Self {
        let block_nr = (total / u64::from(block_size)).clamp(2, u64::from(u32::MAX)) as u32;
        Self {
            block_size,
            block_nr,
            retire_tov_ms,
        }
    }
}

/// A TPACKET_V3 receive ring bound to its socket.
#[derive(Debug)]
pub struct RxRing {
    sock: PacketSocket,
    map: Mmap,
    block_size: usize,
    block_nr: usize,
    /// The next block to consume; only the owning thread reads or writes it.
    next: usize,
    /// A block read and kept from the kernel past its drop ([`Block::keep`]): its offset.
    /// It goes back to the kernel with the next block, or by [`RxRing::release_kept`].
    kept: Option<usize>,
}

impl RxRing {
    /// Sets up a TPACKET_V3 ring on `sock` and maps it. Call before `bind`.
    pub fn new(sock: PacketSocket, cfg: RingConfig) -> Result<Self> {
        let page = 4096u32;
        if cfg.block_size < page || !cfg.block_size.is_multiple_of(page) {
            return Err(Error::new(
                ErrorKind::RingMemory,
                "block size must be a multiple of 4096",
            ));
        }
        sock.set_version(abi::TPACKET_V3)?;
        let req = abi::tpacket_req3 {
            tp_block_size: cfg.block_size,
            tp_block_nr: cfg.block_nr,
            tp_frame_size: 2048,
            tp_frame_nr: (u64::from(cfg.block_size) / 2048 * u64::from(cfg.block_nr)) as u32,
            tp_retire_blk_tov: cfg.retire_tov_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        sock.set_rx_ring(&req).map_err(|e| {
            if e.kind() == ErrorKind::RingMemory || e.errno() == Some(libc::EINVAL) {
                Error::new(
                    ErrorKind::RingMemory,
                    format!(
                        "the kernel could not allocate a ring of {} blocks of {} KiB ({} MiB); choose a smaller -B",
                        cfg.block_nr,
                        cfg.block_size / 1024,
                        (u64::from(cfg.block_nr) * u64::from(cfg.block_size)) >> 20
                    ),
                )
            } else {
                e
            }
        })?;
        let len = cfg.block_size as usize * cfg.block_nr as usize;
        let map = Mmap::map(&sock, len)?;
        Ok(Self {
            sock,
            map,
            block_size: cfg.block_size as usize,
            block_nr: cfg.block_nr as usize,
            next: 0,
            kept: None,
        })
    }

    /// The socket of this ring.
    pub fn socket(&self) -> &PacketSocket {
        &self.sock
    }

    /// Ring size in bytes.
    pub fn size(&self) -> usize {
        self.map.len
    }

    /// The next closed block, if the kernel has handed one to user space.
    pub fn next_block(&mut self) -> Option<Block<'_>> {
        let base = self.next * self.block_size;
        let status = self.map.status(base + block_desc::BLOCK_STATUS);
        // A1: pairs with the smp_wmb() before TP_STATUS_USER is set in prb_close_block().
        if status.load(Ordering::Acquire) & abi::TP_STATUS_USER == 0 {
            return None;
        }
        let num = self.map.read_u32(base + block_desc::NUM_PKTS);
        let seq = u64::from(self.map.read_u32(base + block_desc::SEQ_NUM))
            | (u64::from(self.map.read_u32(base + block_desc::SEQ_NUM + 4)) << 32);
        Some(Block {
            ring: self,
            base,
            num,
            seq,
            keep: false,
        })
    }

    /// Waits up to `timeout_ms` for a block.
    pub fn wait(&self, timeout_ms: i32) -> bool {
        self.sock.poll(timeout_ms, false)
    }

    /// The packets of the kept block ([`Block::keep`]), if one is kept.
    pub fn kept_packets(&self) -> Option<Packets<'_>> {
        self.kept.map(|base| self.packets_of(base))
    }

    /// Returns the kept block to the kernel, if one is kept.
    pub fn release_kept(&mut self) {
        if let Some(base) = self.kept.take() {
            let status = self.map.status(base + block_desc::BLOCK_STATUS);
            // R1, as in `Block::drop`: our reads of the kept block end first.
            status.store(abi::TP_STATUS_KERNEL, Ordering::Release);
        }
    }

    /// The packets of the block at `base`, which user space owns (TP_STATUS_USER, not yet
    /// given back).
    fn packets_of(&self, base: usize) -> Packets<'_> {
        let num = self.map.read_u32(base + block_desc::NUM_PKTS);
        let first = self.map.read_u32(base + block_desc::OFFSET_TO_FIRST_PKT) as usize;
        let blk_len = (self.map.read_u32(base + block_desc::BLK_LEN) as usize).min(self.block_size);
        // The slice starts after the block descriptor, so it never covers `block_status`,
        // which is written atomically when the block is released.
        let start = base + block_desc::SIZE;
        let end = base + blk_len.max(block_desc::SIZE);
        // SAFETY: [start, end) lies inside the mapping; the kernel does not write this block
        // until it is given back (A1/R1: `Block::drop`, `release_kept`), which needs
        // `&mut self`, and the slice borrows `self`.
        let bytes =
            unsafe { std::slice::from_raw_parts(self.map.ptr.as_ptr().add(start), end - start) };
        Packets {
            bytes,
            off: first.saturating_sub(block_desc::SIZE),
            left: num,
        }
    }
}

/// A block owned by user space; returned to the kernel when dropped.
#[derive(Debug)]
pub struct Block<'r> {
    ring: &'r mut RxRing,
    base: usize,
    num: u32,
    seq: u64,
    /// Kept from the kernel when dropped ([`Block::keep`]).
    keep: bool,
}

impl Block<'_> {
    /// Number of packets in the block.
    pub fn len(&self) -> u32 {
        self.num
    }

    /// Whether the block holds no packet.
    pub fn is_empty(&self) -> bool {
        self.num == 0
    }

    /// Sequence number the kernel gave the block.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The packets of the block, in arrival order.
    pub fn packets(&self) -> Packets<'_> {
        self.ring.packets_of(self.base)
    }

    /// The packets of the block kept before this one, if any ([`Block::keep`]).
    pub fn kept_packets(&self) -> Option<Packets<'_>> {
        self.ring.kept_packets()
    }

    /// Keeps this block from the kernel when it is dropped: its packets stay readable
    /// ([`RxRing::kept_packets`]) until the next block is dropped or
    /// [`RxRing::release_kept`]. One block is kept at a time: the one kept before goes back
    /// to the kernel with this one's drop.
    pub fn keep(&mut self) {
        self.keep = true;
    }
}

impl Drop for Block<'_> {
    fn drop(&mut self) {
        // The block kept before this one is done with once this one is.
        self.ring.release_kept();
        if self.keep {
            self.ring.kept = Some(self.base);
        } else {
            let status = self.ring.map.status(self.base + block_desc::BLOCK_STATUS);
            // R1: pairs with the status test in prb_dispatch_next_block(): our reads end
            // first.
            status.store(abi::TP_STATUS_KERNEL, Ordering::Release);
        }
        self.ring.next = (self.ring.next + 1) % self.ring.block_nr;
    }
}

/// One packet in a block, as the kernel described it in its `tpacket3_hdr`.
#[derive(Clone, Copy, Debug)]
pub struct RingPacket<'a> {
    /// Seconds of the receive timestamp.
    pub sec: u32,
    /// Nanoseconds of the receive timestamp.
    pub nsec: u32,
    /// Length on the wire (`tp_len`).
    pub len: u32,
    /// Per-packet status bits (`TP_STATUS_*`).
    pub status: u32,
    /// VLAN TCI the kernel stripped, valid when `status & TP_STATUS_VLAN_VALID`.
    pub vlan_tci: u16,
    /// VLAN TPID, valid when `status & TP_STATUS_VLAN_TPID_VALID`.
    pub vlan_tpid: u16,
    /// The captured bytes (`tp_snaplen` of them), from the MAC header.
    pub data: &'a [u8],
}

impl RingPacket<'_> {
    /// The stripped VLAN tag, if the kernel reported one.
    pub fn vlan(&self) -> Option<u16> {
        (self.status & abi::TP_STATUS_VLAN_VALID != 0 || self.vlan_tci != 0)
            .then_some(self.vlan_tci)
    }
}

/// Iterator over the packets of a block. Stops early, never panics, on a bad offset.
#[derive(Debug)]
pub struct Packets<'a> {
    bytes: &'a [u8],
    off: usize,
    left: u32,
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..off + 4)
        .map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

impl<'a> Packets<'a> {
    /// The packet whose header is at `off` in the block (an offset [`Packets::next_at`]
    /// gave), or None where no whole packet is.
    pub fn at(&self, off: u32) -> Option<RingPacket<'a>> {
        Self::parse(self.bytes, off as usize).map(|(p, _)| p)
    }

    /// The next packet with its offset in the block, for [`Packets::at`].
    pub fn next_at(&mut self) -> Option<(u32, RingPacket<'a>)> {
        let off = u32::try_from(self.off).ok()?;
        self.next().map(|p| (off, p))
    }

    /// The packet whose header is at `o` in `b`, and its header's offset to the next.
    fn parse(b: &'a [u8], o: usize) -> Option<(RingPacket<'a>, usize)> {
        let hdr = b.get(o..o + tpacket3_hdr::SIZE)?;
        let next = u32_at(hdr, tpacket3_hdr::TP_NEXT_OFFSET)? as usize;
        let snaplen = u32_at(hdr, tpacket3_hdr::TP_SNAPLEN)? as usize;
        let mac =
            u16::from_ne_bytes([hdr[tpacket3_hdr::TP_MAC], hdr[tpacket3_hdr::TP_MAC + 1]]) as usize;
        let tci = u32_at(hdr, tpacket3_hdr::TP_VLAN_TCI)?;
        let tpid = u16::from_ne_bytes([
            hdr[tpacket3_hdr::TP_VLAN_TPID],
            hdr[tpacket3_hdr::TP_VLAN_TPID + 1],
        ]);
        let data = b.get(o + mac..o + mac + snaplen)?;
        let p = RingPacket {
            sec: u32_at(hdr, tpacket3_hdr::TP_SEC)?,
            nsec: u32_at(hdr, tpacket3_hdr::TP_NSEC)?,
            len: u32_at(hdr, tpacket3_hdr::TP_LEN)?,
            status: u32_at(hdr, tpacket3_hdr::TP_STATUS)?,
            vlan_tci: tci as u16,
            vlan_tpid: tpid,
            data,
        };
        Some((p, next))
    }
}

impl<'a> Iterator for Packets<'a> {
    type Item = RingPacket<'a>;

    fn next(&mut self) -> Option<RingPacket<'a>> {
        if self.left == 0 {
            return None;
        }
        let o = self.off;
        let (p, next) = Self::parse(self.bytes, o)?;
        self.left -= 1;
        if self.left > 0 {
            if next == 0 {
                self.left = 0;
            }
            self.off = o + next;
        }
        Some(p)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left as usize))
    }
}

/// A TPACKET_V2 transmit ring.
#[derive(Debug)]
pub struct TxRing {
    sock: PacketSocket,
    map: Mmap,
    frame_size: usize,
    frame_nr: usize,
    /// Next frame to fill; only the owning thread uses it.
    next: usize,
    /// Frames the kernel rejected with TP_STATUS_WRONG_FORMAT.
    wrong_format: u64,
}

impl TxRing {
    /// Sets up a transmit ring of `frame_nr` frames of `frame_size` bytes on `sock`.
    pub fn new(sock: PacketSocket, frame_size: u32, frame_nr: u32) -> Result<Self> {
        sock.set_version(abi::TPACKET_V2)?;
        let block_size = 1u32 << 16;
        let per_block = block_size / frame_size;
        let block_nr = frame_nr.div_ceil(per_block);
        let req = abi::tpacket_req {
            tp_block_size: block_size,
            tp_block_nr: block_nr,
            tp_frame_size: frame_size,
            tp_frame_nr: per_block * block_nr,
        };
        sock.set_tx_ring(&req)?;
        let map = Mmap::map(&sock, block_size as usize * block_nr as usize)?;
        Ok(Self {
            sock,
            map,
            frame_size: frame_size as usize,
            frame_nr: (per_block * block_nr) as usize,
            next: 0,
            wrong_format: 0,
        })
    }

    /// The socket of this ring.
    pub fn socket(&self) -> &PacketSocket {
        &self.sock
    }

    /// Largest frame that fits in a slot.
    pub fn max_frame(&self) -> usize {
        self.frame_size - tpacket2_hdr::TX_DATA_OFFSET
    }

    /// Number of frames in the ring.
    pub fn frames(&self) -> usize {
        self.frame_nr
    }

    /// Frames the kernel refused as malformed so far.
    pub fn wrong_format(&self) -> u64 {
        self.wrong_format
    }

    /// Fills the next free frame with `fill` (which returns the frame length) and marks it
    /// for sending. Returns false when the ring is full.
    pub fn push(&mut self, fill: impl FnOnce(&mut [u8]) -> usize) -> bool {
        let base = self.next * self.frame_size;
        let status = self.map.status(base + tpacket2_hdr::TP_STATUS);
        // A2: pairs with the kernel's release of the frame in tpacket_destruct_skb().
        let s = status.load(Ordering::Acquire);
        if s & (abi::TP_STATUS_SEND_REQUEST | abi::TP_STATUS_SENDING) != 0 {
            return false;
        }
        if s & abi::TP_STATUS_WRONG_FORMAT != 0 {
            self.wrong_format += 1;
        }
        let start = base + tpacket2_hdr::TX_DATA_OFFSET;
        let cap = self.max_frame();
        // SAFETY: the frame lies inside the mapping and user space owns it (status AVAILABLE):
        // the kernel reads it only after the Release store below.
        let buf = unsafe { std::slice::from_raw_parts_mut(self.map.ptr.as_ptr().add(start), cap) };
        let len = fill(buf).min(cap);
        let len_word = self.map.status(base + tpacket2_hdr::TP_LEN);
        // Relaxed: ordered before the kernel's read by the Release store of the status.
        len_word.store(len as u32, Ordering::Relaxed);
        // R2: pairs with the kernel's status read in tpacket_snd(): frame bytes first.
        status.store(abi::TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.next = (self.next + 1) % self.frame_nr;
        true
    }

    /// Frames still owned by the kernel (requested or being sent).
    pub fn in_flight(&self) -> usize {
        (0..self.frame_nr)
            .filter(|i| {
                let s = self.map.status(i * self.frame_size).load(Ordering::Acquire);
                s & (abi::TP_STATUS_SEND_REQUEST | abi::TP_STATUS_SENDING) != 0
            })
            .count()
    }

    /// Tells the kernel to send the requested frames.
    pub fn flush(&self, wait: bool) -> Result<usize> {
        self.sock.kick_tx(wait)
    }
}
