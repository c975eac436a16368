//! The PFQ socket queue: a wait-free multi-producer single-consumer double
//! buffer (paper 002, Bonelli et al., "On Multi-gigabit Packet Capturing with
//! Multi-core Commodity Hardware", Algorithm 1).
//!
//! Capture workers ([`Producer`], one clone each) copy packets into the active
//! buffer of a pair; the stage ([`Consumer`]) swaps the pair and reads the
//! buffer it just retired, in place. A producer never waits: it reserves room
//! with one `fetch_add` on a shared index word (per packet or per batch),
//! copies, and sets a valid flag. A record that does not fit is counted in
//! [`QueueStats::full_drops`] and nothing is written. Producers join
//! ([`Clone`]) and leave ([`Drop`]) without a lock: each claims a cache-padded
//! counter slot with one compare-exchange.
//!
//! # Layout
//!
//! Two buffers of `cap` bytes (a multiple of 8). A record starts on an 8-byte
//! boundary:
//!
//! ```text
//! 0       4        8                32              32 + caplen   len
//! | len   | caplen | SlotHeader     | packet bytes  | zero pad    |
//! ```
//!
//! `len` is the record size, `round_up(32 + caplen, 8)`. A padding record
//! (`caplen == u32::MAX`, 8-byte head only) fills the unused tail of a batch
//! reservation when the batch iterator yields less than it promised.
//!
//! # Protocol
//!
//! Who writes which word:
//!
//! | word | writers | contents |
//! |---|---|---|
//! | `index` | producers (`fetch_add`, P2); the consumer (`swap`, C1) | bit 63: active buffer; bits 0..63: bytes reserved in it, `0 ..= cap * (1 + producers)` |
//! | `words[b]` | the producer that reserved the range (P3) | records; read by the consumer after the flag (C4) |
//! | `flags[b][w]` | 0 → 1 by the producer of the record starting at word `w` (P3); 1 → 0 by the consumer (C4) | 0 or 1 |
//! | `end[b]` | the one producer whose reservation crosses the end of buffer `b` (P4); reset by the consumer (C3) | first unwritten offset `< cap`, or `NO_END` |
//! | `slots[i]` | its owner (counters, plain add); producers sharing it when all slots are taken (atomic add); `claimed` by claiming (Acquire) and dropping (Release) producers | event counts; the consumer sums them |
//! | `live` | producers (clone +1, drop −1) | producers alive |
//!
//! A producer inserts a record (or a batch) of `n` bytes:
//!
//! - **P1.** Load `index` (Relaxed). If its length plus `n` exceeds `cap`,
//!   count the records full and stop. This is Algorithm 1 line 1: not needed
//!   for correctness, it keeps the length bits from growing while the consumer
//!   is away.
//! - **P2.** `old = index.fetch_add(n, Acquire)`. Buffer `b` is the top bit of
//!   `old`, `off` its length bits: bytes `off .. off + n` of buffer `b` are this
//!   producer's alone for this use of the buffer.
//! - **P3.** If `off + n <= cap`: copy each record (head, [`SlotHeader`],
//!   bytes), then set its flag at word `off / 8` (Release).
//! - **P4.** Otherwise the reservation ends past `cap` and its records are
//!   counted full. If `off < cap` (at most one reservation per use of a buffer
//!   can start before `cap` and end after it), a batch first writes and flags
//!   as in P3 the records that end before `cap`; then the producer stores the
//!   offset of its first unwritten byte in `end[b]` (Release), if that offset
//!   is below `cap`. A single record writes nothing in the buffer. If
//!   `off >= cap`, the producer touches nothing of buffer `b`.
//!
//! The consumer drains:
//!
//! - **C0.** Load `index` (Relaxed); if nothing is reserved, return without
//!   swapping, so an idle consumer does not pull the index line away from
//!   producers.
//! - **C1.** `old = index.swap(other << 63, Release)`: later reservations go to
//!   the other buffer, which starts empty.
//! - **C2.** `len = min(length of old, cap)`; walk buffer `b` (the top bit of
//!   `old`) from `x = 0` while `x < len`.
//! - **C3.** Wait (spin with bounded backoff, then yield) until the flag at word
//!   `x / 8` reads 1 (Acquire) or `end[b] == x` (Acquire). On the end mark,
//!   reset `end[b]` to `NO_END` and stop.
//! - **C4.** Clear the flag (Relaxed), read the record at `x`, hand it to the
//!   callback, advance `x` by its `len`.
//!
//! # Why it holds
//!
//! The reservations of one use of a buffer are the `fetch_add`s between two
//! swaps of `index`, so they tile `0 .. len` with no gap. The ones that end by
//! `cap` are written and flagged; the first one that ends past `cap` leaves the
//! end mark where its writing stopped (or at its start); every later one starts
//! at or past `cap` and touches nothing. So the walk meets, at each `x`, either
//! a flagged record or the end mark, and every wait ends once the producer
//! concerned runs again. The consumer can wait; producers never do.
//!
//! **Reuse.** A producer may be preempted between P2 and P3, after the
//! consumer's swap. Buffer `b` becomes active again only at the C1 of a later
//! drain, after this walk has ended, and the walk ends only after every
//! reservation of `b` that starts before `cap` has published its last write to
//! the buffer (a flag or the end mark, Release, acquired in C3). Reservations
//! that start at or past `cap` never touch it. So a producer cannot be
//! overtaken by two swaps while it still writes; no generation counter is
//! needed. The next C1 (Release) and the next producers' P2 (Acquire) order
//! the consumer's reads and clears before the buffer's next writes. If the
//! callback panics, a drop guard finishes the walk (discarding the rest of
//! the buffer), so this holds on unwinding too.
//!
//! **Flags beside, not inside, the records.** Record boundaries move from one
//! use of a buffer to the next, so an in-band valid bit could land on old packet
//! bytes, which whoever sent the packet controls. Flags live in a side array,
//! one byte per 8-byte word; only record starts are ever set, and the consumer
//! clears each one it reads, so every flag is 0 when its buffer becomes
//! active.
//!
//! **Length overflow.** P2 runs only after P1 saw room, so the length bits pass
//! `cap` by at most one reservation (`<= cap <= 2^30`) per producer between
//! its P1 and P2, far below bit 63.
//!
//! Unlike PFQ, where the user-space reader copies the whole retired buffer,
//! the consumer here reads records in place and hands out borrowed slices.

use std::fmt;

use crossbeam_utils::CachePadded;

use crate::slot::SlotHeader;
use crate::sync::{Arc, AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Backoff, Ordering, Words};
use crate::{Full, QueueStats};

/// Largest buffer, in bytes; larger requests are clamped to it.
pub const MAX_CAPACITY: usize = 1 << 30;

/// Producer counter slots of [`queue`]; more producers than this share one
/// more slot (still exact, slower).
pub const DEFAULT_PRODUCER_SLOTS: usize = 64;

/// Bytes in front of the packet bytes of a record: `len`, `caplen`, [`SlotHeader`].
pub const RECORD_OVERHEAD: usize = 8 + SlotHeader::LEN;

/// Top bit of `index`: the active buffer.
const ACTIVE_BIT: u64 = 1 << 63;
/// Low bits of `index`: bytes reserved in the active buffer.
const LEN_MASK: u64 = ACTIVE_BIT - 1;
/// `caplen` of a padding record.
const PAD_CAPLEN: u32 = u32::MAX;
/// `end[b]` when no reservation stopped inside buffer `b`.
const NO_END: u64 = u64::MAX;

/// Size in bytes of the record for `caplen` packet bytes, if it can fit in any buffer.
fn record_len(caplen: usize) -> Option<u64> {
    if caplen > MAX_CAPACITY {
        return None;
    }
    Some((RECORD_OVERHEAD + caplen).next_multiple_of(8) as u64)
}

/// Counters of one producer, alone on a cache line.
#[derive(Default)]
struct ProducerSlot {
    /// Set while a producer owns the slot; written by claiming and dropping producers.
    claimed: AtomicBool,
    /// Records written; only the owner adds.
    pushed: AtomicU64,
    /// Records counted full; only the owner adds.
    full_drops: AtomicU64,
}

/// State shared by the producers and the consumer.
struct Shared {
    /// The PFQ index word. Written by producers (P2) and the consumer (C1);
    /// bit 63 is the active buffer, bits 0..63 the bytes reserved in it.
    index: CachePadded<AtomicU64>,
    /// Per buffer: where the reservation crossing `cap` stopped writing, or
    /// `NO_END`. Written by that one producer (P4); reset by the consumer (C3).
    end: [CachePadded<AtomicU64>; 2],
    /// Per buffer, per 8-byte word: 1 when a complete record starts there.
    /// Set by its producer (P3); cleared by the consumer (C4).
    flags: [Box<[AtomicU8]>; 2],
    /// Per buffer: the record memory, `cap / 8` words.
    words: [Words; 2],
    /// Bytes per buffer; a multiple of 8, at most `MAX_CAPACITY`.
    cap: u64,
    /// Producer counters: the claimable slots, then one never owned, shared
    /// (with atomic adds) by producers that found no free slot.
    slots: Box<[CachePadded<ProducerSlot>]>,
    /// Producers alive; written by producers on clone and drop.
    live: AtomicUsize,
}

impl Shared {
    /// Writes one record at byte `off` of buffer `b`.
    ///
    /// # Safety
    /// Bytes `off .. off + record_len(data.len())` of buffer `b` lie within `cap`
    /// and were reserved by the caller (P2) in the current use of the buffer.
    unsafe fn write_record(&self, b: usize, off: u64, hdr: &SlotHeader, data: &[u8]) {
        let len = RECORD_OVERHEAD + data.len();
        let mut head = [0u8; RECORD_OVERHEAD];
        // The casts cannot truncate: the caller's range lies within cap <= 2^30.
        head[0..4].copy_from_slice(&(len.next_multiple_of(8) as u32).to_ne_bytes());
        head[4..8].copy_from_slice(&(data.len() as u32).to_ne_bytes());
        head[8..].copy_from_slice(&hdr.to_bytes());
        // SAFETY: the range is in bounds and ours alone, by this function's contract.
        unsafe { self.words[b].write((off / 8) as usize, &head, data) };
    }

    /// Writes a padding record over bytes `off .. off + len` of buffer `b`.
    ///
    /// # Safety
    /// As for [`Shared::write_record`], for that range; `len` is a nonzero multiple of 8.
    unsafe fn write_pad(&self, b: usize, off: u64, len: u64) {
        let mut head = [0u8; 8];
        head[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
        head[4..8].copy_from_slice(&PAD_CAPLEN.to_ne_bytes());
        // SAFETY: the first word of the range is in bounds and ours alone, by the contract.
        unsafe { self.words[b].write((off / 8) as usize, &head, &[]) };
    }

    /// Marks the record at byte `off` of buffer `b` complete.
    fn publish(&self, b: usize, off: u64) {
        // R3: pairs with A4 in `Walk::step`: the record's bytes are visible once its flag reads 1.
        self.flags[b][(off / 8) as usize].store(1, Ordering::Release);
    }

    /// Claims a free counter slot, or shares the last one, which nobody owns,
    /// if all others are taken.
    fn claim_slot(&self) -> (usize, bool) {
        let shared = self.slots.len() - 1;
        for (i, slot) in self.slots[..shared].iter().enumerate() {
            // Relaxed: a hint that skips taken slots; the compare-exchange decides.
            if !slot.claimed.load(Ordering::Relaxed)
                // A7: pairs with R7 in `Producer::drop`: we see the last owner's final counts.
                && slot
                    .claimed
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return (i, true);
            }
        }
        (shared, false)
    }
}

/// Creates a queue of two buffers of `capacity_bytes` each, with
/// [`DEFAULT_PRODUCER_SLOTS`] producer counter slots.
///
/// The capacity is rounded up to a multiple of 8 and clamped to
/// [`MAX_CAPACITY`]. A record takes [`RECORD_OVERHEAD`] plus its packet bytes,
/// rounded up to 8; a record larger than a buffer is always counted full.
///
/// ```
/// use corecap_queue::{mpsc, SlotHeader};
///
/// let (p, mut c) = mpsc::queue(64 * 1024);
/// let worker = p.clone(); // one producer per capture worker
/// worker.push(&SlotHeader { ts_ns: 1, queue: 2, ..SlotHeader::default() }, b"frame")?;
/// let mut got = Vec::new();
/// c.drain(|h, data| got.push((h.ts_ns, h.queue, data.to_vec())));
/// assert_eq!(got, [(1, 2, b"frame".to_vec())]);
/// assert_eq!(c.stats().pushed, 1);
/// # Ok::<(), corecap_queue::Full>(())
/// ```
pub fn queue(capacity_bytes: usize) -> (Producer, Consumer) {
    queue_with_slots(capacity_bytes, DEFAULT_PRODUCER_SLOTS)
}

/// Like [`queue`], with `producer_slots` counter slots (at least 1): the
/// number of producers that each get their own cache line.
pub fn queue_with_slots(capacity_bytes: usize, producer_slots: usize) -> (Producer, Consumer) {
    let cap = capacity_bytes.min(MAX_CAPACITY).next_multiple_of(8);
    let nwords = cap / 8;
    let flags = || (0..nwords).map(|_| AtomicU8::new(0)).collect::<Box<[_]>>();
    let shared = Arc::new(Shared {
        index: CachePadded::new(AtomicU64::new(0)),
        end: [
            CachePadded::new(AtomicU64::new(NO_END)),
            CachePadded::new(AtomicU64::new(NO_END)),
        ],
        flags: [flags(), flags()],
        words: [Words::new(nwords), Words::new(nwords)],
        cap: cap as u64,
        slots: (0..producer_slots.max(1) + 1)
            .map(|_| CachePadded::new(ProducerSlot::default()))
            .collect(),
        live: AtomicUsize::new(1),
    });
    let (slot, owned) = shared.claim_slot();
    let producer = Producer {
        shared: shared.clone(),
        slot,
        owned,
    };
    let consumer = Consumer { shared, active: 0 };
    (producer, consumer)
}

/// The writing end, held by a capture worker. Clone it for each worker.
pub struct Producer {
    shared: Arc<Shared>,
    /// Index into `shared.slots`.
    slot: usize,
    /// This producer claimed `slot` and releases it on drop.
    owned: bool,
}

impl Producer {
    /// Copies one packet and its header into the queue.
    ///
    /// # Errors
    /// [`Full`] if the active buffer has no room; the record is counted in
    /// [`QueueStats::full_drops`] and nothing is written.
    pub fn push(&self, hdr: &SlotHeader, data: &[u8]) -> Result<(), Full> {
        let sh = &*self.shared;
        let Some(n) = record_len(data.len()).filter(|&n| n <= sh.cap) else {
            return Err(self.full(1));
        };
        // P1. Relaxed: only a hint that spares a doomed fetch_add; P2 decides.
        if (sh.index.load(Ordering::Relaxed) & LEN_MASK) + n > sh.cap {
            return Err(self.full(1));
        }
        self.insert(n, hdr, data)
    }

    /// P2..P4 of [`Producer::push`] for a record of `n` bytes, `n <= cap`.
    fn insert(&self, n: u64, hdr: &SlotHeader, data: &[u8]) -> Result<(), Full> {
        let sh = &*self.shared;
        // P2. A2: pairs with R1 in `Consumer::drain`: the consumer's reads and
        // clears of this buffer's previous use happen before our writes.
        let old = sh.index.fetch_add(n, Ordering::Acquire);
        let (b, off) = ((old >> 63) as usize, old & LEN_MASK);
        if off + n <= sh.cap {
            // P3.
            // SAFETY: P2 handed bytes off..off+n of buffer b, within cap, to this call alone.
            unsafe { sh.write_record(b, off, hdr, data) };
            sh.publish(b, off);
            self.count(|s| &s.pushed, 1);
            Ok(())
        } else {
            // P4.
            if off < sh.cap {
                sh.set_end(b, off);
            }
            Err(self.full(1))
        }
    }

    /// Copies a batch of packets into the queue with one reservation (one
    /// `fetch_add`). Returns how many were written, a prefix of `items`; the
    /// rest are counted in [`QueueStats::full_drops`].
    ///
    /// `items` is walked twice (it is cloned to size the reservation first), so
    /// it should yield the same packets both times; if the second walk yields
    /// less, the unused room is padded and the missing items are counted full.
    pub fn push_batch<'a, I>(&self, items: I) -> usize
    where
        I: IntoIterator<Item = (SlotHeader, &'a [u8])>,
        I::IntoIter: Clone,
    {
        let sh = &*self.shared;
        let items = items.into_iter();
        // P1. Relaxed: only a hint that sizes the reservation; P2 decides.
        let room = sh
            .cap
            .saturating_sub(sh.index.load(Ordering::Relaxed) & LEN_MASK);
        let (mut offered, mut take, mut total) = (0u64, 0usize, 0u64);
        let mut fits = true;
        for (_, data) in items.clone() {
            offered += 1;
            match record_len(data.len()) {
                Some(n) if fits && total + n <= room => {
                    total += n;
                    take += 1;
                }
                _ => fits = false,
            }
        }
        if take == 0 {
            if offered > 0 {
                self.full(offered);
            }
            return 0;
        }
        self.insert_batch(items, take, total, offered)
    }

    /// P2..P4 of [`Producer::push_batch`]: reserve `total` bytes for the first
    /// `take` of `offered` items, write what fits, count the rest full.
    fn insert_batch<'a>(
        &self,
        items: impl Iterator<Item = (SlotHeader, &'a [u8])>,
        take: usize,
        total: u64,
        offered: u64,
    ) -> usize {
        let sh = &*self.shared;
        // P2. A2: pairs with R1 in `Consumer::drain` (see `push`).
        let old = sh.index.fetch_add(total, Ordering::Acquire);
        let (b, off) = ((old >> 63) as usize, old & LEN_MASK);
        let limit = (off + total).min(sh.cap);
        let mut x = off;
        let mut pushed = 0u64;
        // P3, or the part of P4 that fits before cap.
        for (hdr, data) in items.take(take) {
            match record_len(data.len()) {
                Some(n) if x + n <= limit => {
                    // SAFETY: x..x+n lies in off..off+total, which P2 handed to this call, and within cap.
                    unsafe { sh.write_record(b, x, &hdr, data) };
                    sh.publish(b, x);
                    x += n;
                    pushed += 1;
                }
                _ => break,
            }
        }
        if x < limit {
            if off + total <= sh.cap {
                // The iterator yielded less the second time: pad our range so the walk can pass it.
                // SAFETY: x..limit is the unused rest of our reservation, within cap, a nonzero multiple of 8.
                unsafe { sh.write_pad(b, x, limit - x) };
                sh.publish(b, x);
            } else {
                sh.set_end(b, x);
            }
        }
        self.count(|s| &s.pushed, pushed);
        if offered > pushed {
            self.full(offered - pushed);
        }
        pushed as usize
    }

    /// Bytes per buffer.
    pub fn capacity(&self) -> usize {
        self.shared.cap as usize
    }

    fn counters(&self) -> &ProducerSlot {
        &self.shared.slots[self.slot]
    }

    /// Adds `n` to one of this producer's counters.
    #[inline]
    fn count(&self, which: impl FnOnce(&ProducerSlot) -> &AtomicU64, n: u64) {
        let c = which(self.counters());
        if self.owned {
            // Relaxed: only this producer writes a slot it owns (A7 gave it the last
            // owner's value); the consumer's sums need no order with other memory.
            c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
        } else {
            // Relaxed: a shared slot takes atomic adds; event counts publish nothing.
            c.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Counts `n` records full.
    fn full(&self, n: u64) -> Full {
        self.count(|s| &s.full_drops, n);
        Full
    }
}

impl Shared {
    /// P4: the reservation crossing `cap` in buffer `b` stopped writing at `at`.
    fn set_end(&self, b: usize, at: u64) {
        // R5: pairs with A5 in `Walk::step`: once the consumer sees the mark, this
        // producer is done with buffer b and the buffer may be reused.
        self.end[b].store(at, Ordering::Release);
    }
}

impl Clone for Producer {
    fn clone(&self) -> Self {
        // Relaxed: like `Arc::clone`, this producer is alive, so the count cannot reach 0 meanwhile.
        self.shared.live.fetch_add(1, Ordering::Relaxed);
        let (slot, owned) = self.shared.claim_slot();
        Producer {
            shared: self.shared.clone(),
            slot,
            owned,
        }
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        if self.owned {
            // R7: pairs with A7 in `Shared::claim_slot`: the next owner continues from our counts.
            self.counters().claimed.store(false, Ordering::Release);
        }
        // R6: pairs with A6 in `Consumer::is_abandoned`: our records and reservations come first.
        self.shared.live.fetch_sub(1, Ordering::Release);
    }
}

impl fmt::Debug for Producer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("slot", &self.slot)
            .field("capacity", &self.shared.cap)
            .finish_non_exhaustive()
    }
}

/// The reading end, held by the stage that consumes the queue.
pub struct Consumer {
    shared: Arc<Shared>,
    /// The buffer producers are filling; only this consumer swaps it. 0 or 1.
    active: usize,
}

impl Consumer {
    /// Swaps the buffers and hands every record of the retired one to `f`, in
    /// reservation order; returns how many.
    ///
    /// Waits (spin, then yield) for producers that reserved room but have not
    /// finished writing. Records of one producer arrive in the order it pushed
    /// them.
    pub fn drain(&mut self, mut f: impl FnMut(&SlotHeader, &[u8])) -> usize {
        let sh = &*self.shared;
        // C0. Relaxed: a hint; a reservation made after this load is taken by the next drain.
        // An empty buffer is not swapped, so an idle consumer leaves the index line alone.
        if sh.index.load(Ordering::Relaxed) & LEN_MASK == 0 {
            return 0;
        }
        let next = self.active ^ 1;
        // C1. R1: pairs with A2 in `Producer::push`/`push_batch`: our reads and
        // flag clears of buffer `next` (previous drain) happen before its new writes.
        let old = sh.index.swap((next as u64) << 63, Ordering::Release);
        let b = (old >> 63) as usize;
        debug_assert_eq!(b, self.active);
        self.active = next;
        // C2.
        let mut walk = Walk {
            sh,
            b,
            len: (old & LEN_MASK).min(sh.cap),
            x: 0,
        };
        let mut count = 0;
        loop {
            match walk.step(&mut f) {
                Step::Record => count += 1,
                Step::Pad => {}
                Step::Done => return count,
            }
        }
    }

    /// Totals summed over the producers' counter slots.
    pub fn stats(&self) -> QueueStats {
        let mut s = QueueStats::default();
        for slot in self.shared.slots.iter() {
            // Relaxed: a snapshot of event counts; pairs with nothing.
            s.pushed += slot.pushed.load(Ordering::Relaxed);
            s.full_drops += slot.full_drops.load(Ordering::Relaxed);
        }
        s
    }

    /// True once every producer is dropped. After it returns true, one more
    /// [`Consumer::drain`] returns every record left.
    pub fn is_abandoned(&self) -> bool {
        // A6: pairs with R6 in `Producer::drop`.
        self.shared.live.load(Ordering::Acquire) == 0
    }

    /// Bytes per buffer.
    pub fn capacity(&self) -> usize {
        self.shared.cap as usize
    }
}

impl fmt::Debug for Consumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("active", &self.active)
            .field("capacity", &self.shared.cap)
            .finish_non_exhaustive()
    }
}

/// What one step of the walk found.
enum Step {
    Record,
    Pad,
    Done,
}

/// The consumer's walk over a retired buffer (C2..C4). Dropping it finishes
/// the walk, so a panicking callback cannot leave producers writing into a
/// buffer that the next drain makes active.
struct Walk<'a> {
    sh: &'a Shared,
    /// The retired buffer.
    b: usize,
    /// Bytes to walk, at most `cap`.
    len: u64,
    /// Offset of the next record; a multiple of 8.
    x: u64,
}

impl Walk<'_> {
    /// Waits for the record at `x` and hands it to `f` (C3, C4).
    fn step(&mut self, f: &mut impl FnMut(&SlotHeader, &[u8])) -> Step {
        if self.x >= self.len {
            return Step::Done;
        }
        let (sh, b, x) = (self.sh, self.b, self.x);
        let w = (x / 8) as usize;
        let mut backoff = Backoff::default();
        // C3.
        loop {
            // A4: pairs with R3 in `Shared::publish`: the record's bytes are visible.
            if sh.flags[b][w].load(Ordering::Acquire) != 0 {
                break;
            }
            // A5: pairs with R5 in `Shared::set_end`: that producer is done with buffer b.
            if sh.end[b].load(Ordering::Acquire) == x {
                // Relaxed: ordered before the buffer's next use by R1 of the next drain.
                sh.end[b].store(NO_END, Ordering::Relaxed);
                self.x = self.len;
                return Step::Done;
            }
            backoff.snooze();
        }
        // C4. Relaxed: ordered before the buffer's next use by R1 of the next drain.
        sh.flags[b][w].store(0, Ordering::Relaxed);
        // SAFETY: the flag (A4) published the record's first word, and nobody writes buffer b before the next C1.
        let head =
            unsafe { sh.words[b].read(w, 1, |h| [h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]) };
        let len = u32::from_ne_bytes([head[0], head[1], head[2], head[3]]) as u64;
        let caplen = u32::from_ne_bytes([head[4], head[5], head[6], head[7]]);
        let valid_len = if caplen == PAD_CAPLEN {
            len >= 8 && len.is_multiple_of(8)
        } else {
            record_len(caplen as usize) == Some(len)
        };
        // Only this module writes record heads; a bad one is a bug, and reading on would leave the bounds.
        assert!(
            valid_len && x + len <= self.len,
            "mpsc record head corrupt at {x}: len {len} caplen {caplen}"
        );
        self.x = x + len;
        if caplen == PAD_CAPLEN {
            return Step::Pad;
        }
        // SAFETY: as above, for the whole record, which lies within this walk (checked just above).
        unsafe {
            sh.words[b].read(w, (len / 8) as usize, |rec| {
                let mut h = [0u8; SlotHeader::LEN];
                h.copy_from_slice(&rec[8..RECORD_OVERHEAD]);
                f(
                    &SlotHeader::from_bytes(&h),
                    &rec[RECORD_OVERHEAD..RECORD_OVERHEAD + caplen as usize],
                );
            })
        };
        Step::Record
    }
}

impl Drop for Walk<'_> {
    fn drop(&mut self) {
        while !matches!(self.step(&mut |_, _| {}), Step::Done) {}
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn hdr(i: u64) -> SlotHeader {
        SlotHeader {
            ts_ns: i,
            queue: 3,
            hash: i as u32 ^ 0x5a5a,
            orig_len: 100 + i as u32,
            vlan_tci: 7,
            flags: SlotHeader::VLAN_VALID,
        }
    }

    fn collect(c: &mut Consumer) -> Vec<(SlotHeader, Vec<u8>)> {
        let mut v = Vec::new();
        c.drain(|h, d| v.push((*h, d.to_vec())));
        v
    }

    #[test]
    fn test_push_drain() {
        let (p, mut c) = queue(1024);
        p.push(&hdr(1), b"abc").unwrap();
        p.push(&hdr(2), &[]).unwrap();
        p.push(&hdr(3), &[9u8; 17]).unwrap();
        let got = collect(&mut c);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], (hdr(1), b"abc".to_vec()));
        assert_eq!(got[1], (hdr(2), vec![]));
        assert_eq!(got[2], (hdr(3), vec![9u8; 17]));
        assert!(collect(&mut c).is_empty());
        assert_eq!(
            c.stats(),
            QueueStats {
                pushed: 3,
                full_drops: 0
            }
        );
    }

    #[test]
    fn test_full_counted_and_recovers() {
        // Room for exactly two 40-byte records (32 + 8).
        let (p, mut c) = queue(80);
        assert_eq!(p.push(&hdr(1), &[1; 8]), Ok(()));
        assert_eq!(p.push(&hdr(2), &[2; 8]), Ok(()));
        assert_eq!(p.push(&hdr(3), &[3; 8]), Err(Full));
        assert_eq!(
            c.stats(),
            QueueStats {
                pushed: 2,
                full_drops: 1
            }
        );
        let got = collect(&mut c);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1], (hdr(2), vec![2; 8]));
        assert_eq!(p.push(&hdr(4), &[4; 8]), Ok(()));
        assert_eq!(collect(&mut c), vec![(hdr(4), vec![4; 8])]);
    }

    #[test]
    fn test_oversize_is_full() {
        let (p, c) = queue(64);
        assert_eq!(p.push(&hdr(1), &[0; 64]), Err(Full));
        assert_eq!(c.stats().full_drops, 1);
    }

    #[test]
    fn test_zero_capacity() {
        let (p, mut c) = queue(0);
        assert_eq!(p.push(&hdr(1), &[]), Err(Full));
        assert_eq!(p.push_batch([(hdr(1), &[][..])]), 0);
        assert_eq!(c.drain(|_, _| {}), 0);
        assert_eq!(c.stats().full_drops, 2);
    }

    #[test]
    fn test_crossing_reservation_sets_end() {
        // P1 passed for two producers at once; the second one's reservation
        // crosses the end: it writes nothing, leaves the end mark, counts full.
        let (p, mut c) = queue(80);
        p.push(&hdr(1), &[1; 8]).unwrap(); // 40 bytes at 0
        assert_eq!(p.insert(48, &hdr(2), &[7; 16]), Err(Full)); // 48 at 40 > 80
        assert_eq!(p.shared.end[0].load(Ordering::Relaxed), 40);
        assert_eq!(p.insert(40, &hdr(3), &[3; 8]), Err(Full)); // starts past cap
        assert_eq!(p.shared.end[0].load(Ordering::Relaxed), 40);
        assert_eq!(collect(&mut c), vec![(hdr(1), vec![1; 8])]);
        assert_eq!(p.shared.end[0].load(Ordering::Relaxed), NO_END);
        assert_eq!(
            c.stats(),
            QueueStats {
                pushed: 1,
                full_drops: 2
            }
        );
        // The next use of buffer 0 starts clean.
        p.push(&hdr(4), &[4; 8]).unwrap();
        collect(&mut c);
        p.push(&hdr(5), &[5; 8]).unwrap();
        assert_eq!(collect(&mut c), vec![(hdr(5), vec![5; 8])]);
    }

    #[test]
    fn test_batch_crossing_writes_prefix() {
        // P1 passed, then another producer took room: a batch of 40 + 48 bytes
        // reserved at 40 crosses cap 96. It writes the 40-byte record, marks
        // the end at 80, and counts the second full.
        let (p, mut c) = queue(96);
        p.push(&hdr(0), &[0; 8]).unwrap(); // 40 at 0
        let (d1, d2) = ([1u8; 8], [2u8; 16]);
        let items = [(hdr(1), &d1[..]), (hdr(2), &d2[..])];
        assert_eq!(p.insert_batch(items.into_iter(), 2, 88, 2), 1);
        assert_eq!(p.shared.end[0].load(Ordering::Relaxed), 80);
        let got = collect(&mut c);
        assert_eq!(got, vec![(hdr(0), vec![0; 8]), (hdr(1), vec![1; 8])]);
        assert_eq!(p.shared.end[0].load(Ordering::Relaxed), NO_END);
        assert_eq!(
            c.stats(),
            QueueStats {
                pushed: 2,
                full_drops: 1
            }
        );
    }

    #[test]
    fn test_batch_sized_to_room() {
        // A batch sees 40 bytes of room and reserves one of its two records.
        let (p, mut c) = queue(80);
        let d = [6u8; 8];
        p.push(&hdr(0), &d).unwrap();
        assert_eq!(p.push_batch((1..3).map(|i| (hdr(i), &d[..]))), 1);
        let got = collect(&mut c);
        assert_eq!(
            got.iter().map(|(h, _)| h.ts_ns).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert_eq!(
            c.stats(),
            QueueStats {
                pushed: 2,
                full_drops: 1
            }
        );
    }

    #[test]
    fn test_batch_one_reservation() {
        let (p, mut c) = queue(4096);
        let payloads: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; i as usize * 3]).collect();
        let items = payloads
            .iter()
            .enumerate()
            .map(|(i, d)| (hdr(i as u64), d.as_slice()));
        assert_eq!(p.push_batch(items), 5);
        let got = collect(&mut c);
        assert_eq!(got.len(), 5);
        for (i, (h, d)) in got.iter().enumerate() {
            assert_eq!(*h, hdr(i as u64));
            assert_eq!(d, &payloads[i]);
        }
    }

    #[test]
    fn test_batch_prefix_when_short_of_room() {
        // Three 40-byte records offered, room for two.
        let (p, mut c) = queue(80);
        let d = [5u8; 8];
        let n = p.push_batch((0..3).map(|i| (hdr(i), &d[..])));
        assert_eq!(n, 2);
        assert_eq!(
            c.stats(),
            QueueStats {
                pushed: 2,
                full_drops: 1
            }
        );
        let got = collect(&mut c);
        assert_eq!(
            got.iter().map(|(h, _)| h.ts_ns).collect::<Vec<_>>(),
            vec![0, 1]
        );
    }

    #[test]
    fn test_batch_shrinking_iterator_pads() {
        // The clone (the sizing walk) yields 3 items, the original only 1: the
        // unused room is padded, and the walk passes it to the next record.
        struct Shrinks<'a> {
            n: u64,
            i: u64,
            d: &'a [u8],
        }
        impl Clone for Shrinks<'_> {
            fn clone(&self) -> Self {
                Shrinks { n: 3, ..*self }
            }
        }
        impl<'a> Iterator for Shrinks<'a> {
            type Item = (SlotHeader, &'a [u8]);
            fn next(&mut self) -> Option<Self::Item> {
                (self.i < self.n).then(|| {
                    self.i += 1;
                    (hdr(self.i), self.d)
                })
            }
        }
        let (p, mut c) = queue(1024);
        let d = [1u8; 8];
        assert_eq!(p.push_batch(Shrinks { n: 1, i: 0, d: &d }), 1);
        p.push(&hdr(9), &d).unwrap();
        let got = collect(&mut c);
        assert_eq!(
            got.iter().map(|(h, _)| h.ts_ns).collect::<Vec<_>>(),
            vec![1, 9]
        );
        assert_eq!(
            c.stats(),
            QueueStats {
                pushed: 2,
                full_drops: 2
            }
        );
    }

    #[test]
    fn test_producers_join_and_leave() {
        let (p, c) = queue_with_slots(256, 2);
        let p2 = p.clone();
        let p3 = p.clone(); // no free slot: shares one
        assert!(!p3.owned);
        p2.push(&hdr(1), &[]).unwrap();
        p3.push(&hdr(2), &[]).unwrap();
        drop(p2);
        let p4 = p.clone();
        assert!(p4.owned);
        p4.push(&hdr(3), &[]).unwrap();
        assert_eq!(c.stats().pushed, 3);
        assert!(!c.is_abandoned());
        drop((p, p3, p4));
        assert!(c.is_abandoned());
    }

    #[test]
    fn test_callback_panic_finishes_walk() {
        let (p, mut c) = queue(1024);
        for i in 0..3 {
            p.push(&hdr(i), &[i as u8; 4]).unwrap();
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            c.drain(|h, _| assert_ne!(h.ts_ns, 1));
        }));
        assert!(r.is_err());
        // The retired buffer's flags were cleared: its next use starts clean.
        assert!(p.shared.flags[0]
            .iter()
            .all(|f| f.load(Ordering::Relaxed) == 0));
        p.push(&hdr(7), &[]).unwrap();
        assert_eq!(collect(&mut c).len(), 1);
        p.push(&hdr(8), &[1; 40]).unwrap();
        assert_eq!(collect(&mut c), vec![(hdr(8), vec![1; 40])]);
    }
}
