//! Batches of packets between capture workers and a stage thread (paper 003's double
//! buffers). The worker copies a block's packets for one consumer into a batch, then
//! hands it over one of two transports:
//!
//! - `spsc` (default): the whole batch moves over a single-producer single-consumer ring
//!   (rtrb) per (worker, member), and emptied batches come back on a second ring, so the
//!   steady state allocates nothing;
//! - `mpsc`: every worker pushes the batch into the member's one multi-producer queue,
//!   PFQ's Algorithm 1 (`corecap_queue::mpsc`), with one `fetch_add` per batch.
//!
//! Either way a full transport is a counted drop (`stage_full`), never a wait on the
//! capture core.
//!
//! Beside each worker's end is its watermark ([`corecap_queue::watermark`]): after
//! sending, the worker publishes the time up to which it has sent every packet it will
//! ([`PipeTx::publish`]), and the member that writes a file lets its packets go in time
//! order up to the smallest watermark of its pipes ([`PipeRx::watermark`], loaded before
//! it drains).

use corecap_queue::{mpsc, watermark, SlotHeader};
use rtrb::{Consumer, Producer, RingBuffer};

use corecap_wire::Link;

use crate::packet::Packet;

#[derive(Clone, Copy, Debug)]
struct Rec {
    ts_ns: u64,
    off: u32,
    len: u32,
    wire_len: u32,
    iface: u32,
    queue: Option<u32>,
    vlan: Option<u16>,
    link: Link,
    hash: u32,
}

/// Packets copied for one consumer.
#[derive(Debug, Default)]
pub struct Batch {
    data: Vec<u8>,
    recs: Vec<Rec>,
}

impl Batch {
    /// Copies a packet in, cut to `snaplen` bytes.
    pub fn push(&mut self, p: &Packet<'_>, hash: u32, snaplen: u32) {
        let data = &p.data[..p.data.len().min(snaplen as usize)];
        let off = self.data.len() as u32;
        self.data.extend_from_slice(data);
        self.recs.push(Rec {
            ts_ns: p.ts_ns,
            off,
            len: data.len() as u32,
            wire_len: p.wire_len,
            iface: p.iface,
            queue: p.queue,
            vlan: p.vlan,
            link: p.link,
            hash,
        });
    }

    /// Packets in the batch.
    pub fn len(&self) -> usize {
        self.recs.len()
    }

    /// Bytes of packet data held.
    pub fn data_len(&self) -> usize {
        self.data.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }

    /// Empties the batch, keeping its memory.
    pub fn clear(&mut self) {
        self.data.clear();
        self.recs.clear();
    }

    /// Puts the packets in timestamp order (stable; the bytes stay where they are). A ring
    /// that two CPUs fill can hold a packet a few microseconds older than the one before.
    pub fn sort_by_time(&mut self) {
        if !self.recs.is_sorted_by_key(|r| r.ts_ns) {
            self.recs.sort_by_key(|r| r.ts_ns);
        }
    }

    /// Timestamp of packet `i`.
    pub fn ts(&self, i: usize) -> Option<u64> {
        self.recs.get(i).map(|r| r.ts_ns)
    }

    /// Packet `i` and its flow hash.
    pub fn get(&self, i: usize) -> Option<(Packet<'_>, u32)> {
        let r = self.recs.get(i)?;
        let p = Packet {
            ts_ns: r.ts_ns,
            data: self.data.get(r.off as usize..(r.off + r.len) as usize)?,
            wire_len: r.wire_len,
            iface: r.iface,
            queue: r.queue,
            vlan: r.vlan,
            link: r.link,
        };
        Some((p, r.hash))
    }

    /// Asks the processor for the first bytes of packet `i` (its headers), ahead of the
    /// read that needs them: a batch's bytes were written on another core.
    #[inline]
    pub fn prefetch(&self, i: usize) {
        if let Some(r) = self.recs.get(i) {
            corecap_linux::memory::prefetch_at(self.data.as_ptr().wrapping_add(r.off as usize));
        }
    }

    /// Calls `f` on every packet with its flow hash.
    pub fn for_each(&self, mut f: impl FnMut(&Packet<'_>, u32)) {
        for i in 0..self.recs.len() {
            if let Some((p, h)) = self.get(i) {
                f(&p, h);
            }
        }
    }
}

/// Which transport the pipes use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Transport {
    /// A single-producer ring per (worker, member).
    #[default]
    Spsc,
    /// One multi-producer queue per member (PFQ Algorithm 1).
    Mpsc,
}

#[derive(Debug)]
enum TxKind {
    Spsc {
        full: Producer<Batch>,
        empty: Consumer<Batch>,
    },
    Mpsc(mpsc::Producer),
}

#[derive(Debug)]
enum RxKind {
    Spsc {
        full: Consumer<Batch>,
        empty: Producer<Batch>,
    },
    Mpsc(mpsc::Consumer),
}

/// The worker's end of a pipe.
#[derive(Debug)]
pub struct PipeTx {
    inner: TxKind,
    /// The batch being filled.
    pub cur: Batch,
    /// Losses of the member across all its workers, readable while it runs (requests of
    /// the on-demand manager report it live). Added to once per lossy batch, never per packet.
    lost: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
    /// This worker's watermark for the member; `u64::MAX` once this end is dropped.
    mark: watermark::Writer,
}

/// The stage's end of a pipe.
#[derive(Debug)]
pub struct PipeRx {
    inner: RxKind,
    /// The watermark of each worker that sends into it (one for spsc, one per worker for
    /// mpsc).
    marks: Vec<watermark::Reader>,
}

/// A pipe holding up to `depth` batches in flight.
pub fn pipe(depth: usize) -> (PipeTx, PipeRx) {
    let (ftx, frx) = RingBuffer::new(depth.max(1));
    let (etx, erx) = RingBuffer::new(depth.max(1) + 1);
    let (mark, reader) = watermark::pair();
    (
        PipeTx {
            inner: TxKind::Spsc {
                full: ftx,
                empty: erx,
            },
            cur: Batch::default(),
            lost: None,
            mark,
        },
        PipeRx {
            inner: RxKind::Spsc {
                full: frx,
                empty: etx,
            },
            marks: vec![reader],
        },
    )
}

/// One PFQ queue of `bytes` per buffer for a member, with an end for each of `workers`.
pub fn mpsc_pipes(workers: usize, bytes: usize) -> (Vec<PipeTx>, PipeRx) {
    let (p, c) = mpsc::queue(bytes);
    let (tx, marks) = (0..workers)
        .map(|_| {
            let (mark, reader) = watermark::pair();
            let tx = PipeTx {
                inner: TxKind::Mpsc(p.clone()),
                cur: Batch::default(),
                lost: None,
                mark,
            };
            (tx, reader)
        })
        .unzip();
    (
        tx,
        PipeRx {
            inner: RxKind::Mpsc(c),
            marks,
        },
    )
}

/// Bits 8-15 of `SlotHeader::flags` carry the interface index.
const IFACE_SHIFT: u16 = 8;
/// Bits 1-4 of `SlotHeader::flags` carry the packet's framing ([`Link::index`]).
const LINK_SHIFT: u16 = 1;
const LINK_MASK: u16 = 0x0f;

impl PipeTx {
    /// Also counts this end's losses into `lost`, shared with the member's other ends.
    pub fn count_losses_into(&mut self, lost: std::sync::Arc<std::sync::atomic::AtomicU64>) {
        self.lost = Some(lost);
    }

    /// Sends the current batch. Returns the number of packets dropped because the pipe
    /// was full, else 0.
    pub fn send(&mut self) -> u64 {
        let n = self.send_batch();
        if n > 0 {
            if let Some(l) = &self.lost {
                // Relaxed: a statistic; nothing else is published through it.
                l.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            }
        }
        n
    }

    /// Promises that every packet up to time `t` (ns since the epoch) that this worker
    /// will send to the member is sent: call after [`PipeTx::send`]. A smaller value than
    /// the last is ignored.
    #[inline]
    pub fn publish(&mut self, t: u64) {
        self.mark.publish(t);
    }

    fn send_batch(&mut self) -> u64 {
        if self.cur.is_empty() {
            return 0;
        }
        match &mut self.inner {
            TxKind::Spsc { full, empty } => {
                if full.is_full() {
                    let n = self.cur.len() as u64;
                    self.cur.clear();
                    return n;
                }
                let next = empty.pop().unwrap_or_default();
                let b = std::mem::replace(&mut self.cur, next);
                // Cannot fail: the ring was checked not full and only this thread pushes.
                let _ = full.push(b);
                0
            }
            TxKind::Mpsc(p) => {
                let b = &self.cur;
                let items = b.recs.iter().map(|r| {
                    let hdr = SlotHeader {
                        ts_ns: r.ts_ns,
                        queue: r.queue.unwrap_or(u32::MAX),
                        hash: r.hash,
                        orig_len: r.wire_len,
                        vlan_tci: r.vlan.unwrap_or(0),
                        flags: (if r.vlan.is_some() {
                            SlotHeader::VLAN_VALID
                        } else {
                            0
                        }) | ((r.iface.min(255) as u16) << IFACE_SHIFT)
                            | (u16::from(r.link.index()) << LINK_SHIFT),
                    };
                    (hdr, &b.data[r.off as usize..(r.off + r.len) as usize])
                });
                let pushed = p.push_batch(items);
                let dropped = (b.len() - pushed.min(b.len())) as u64;
                self.cur.clear();
                dropped
            }
        }
    }
}

impl PipeRx {
    /// The smallest watermark of the workers that send into this pipe: every packet up to
    /// it that they will send is in the pipe or was drained. Load it before
    /// [`PipeRx::drain`] (see [`corecap_queue::watermark`]).
    pub fn watermark(&self) -> u64 {
        watermark::min(&self.marks)
    }

    /// Runs `f` on every packet waiting in the pipe; returns how many.
    pub fn drain(&mut self, mut f: impl FnMut(&Packet<'_>, u32)) -> usize {
        match &mut self.inner {
            RxKind::Spsc { full, empty } => {
                let mut n = 0;
                while let Ok(mut b) = full.pop() {
                    n += b.len();
                    b.for_each(&mut f);
                    b.clear();
                    let _ = empty.push(b);
                }
                n
            }
            RxKind::Mpsc(c) => c.drain(|h, data| {
                let p = Packet {
                    ts_ns: h.ts_ns,
                    data,
                    wire_len: h.orig_len,
                    iface: u32::from(h.flags >> IFACE_SHIFT),
                    queue: (h.queue != u32::MAX).then_some(h.queue),
                    vlan: (h.flags & SlotHeader::VLAN_VALID != 0).then_some(h.vlan_tci),
                    link: Link::from_index(((h.flags >> LINK_SHIFT) & LINK_MASK) as u8),
                };
                f(&p, h.hash);
            }),
        }
    }

    /// Takes the next batch (spsc only; for tests).
    pub fn recv(&mut self) -> Option<Batch> {
        match &mut self.inner {
            RxKind::Spsc { full, .. } => full.pop().ok(),
            RxKind::Mpsc(_) => None,
        }
    }

    /// Hands an emptied batch back for reuse (spsc only).
    pub fn recycle(&mut self, mut b: Batch) {
        b.clear();
        if let RxKind::Spsc { empty, .. } = &mut self.inner {
            let _ = empty.push(b);
        }
    }

    /// Whether every worker end is gone and nothing is left.
    pub fn closed(&self) -> bool {
        match &self.inner {
            RxKind::Spsc { full, .. } => full.is_abandoned() && full.is_empty(),
            RxKind::Mpsc(c) => c.is_abandoned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(data: &[u8], ts: u64) -> Packet<'_> {
        Packet {
            ts_ns: ts,
            data,
            wire_len: data.len() as u32,
            iface: 0,
            queue: Some(1),
            vlan: None,
            link: corecap_wire::Link::Ethernet,
        }
    }

    #[test]
    fn test_batches_pass_in_order_and_are_recycled() {
        let (mut tx, mut rx) = pipe(2);
        for i in 0..3u64 {
            tx.cur.push(&pkt(&[i as u8; 10], i), i as u32, 4);
            assert_eq!(tx.send(), 0);
            let b = rx.recv().expect("a batch");
            let mut seen = vec![];
            b.for_each(|p, h| seen.push((p.ts_ns, p.data.to_vec(), h, p.wire_len)));
            assert_eq!(
                seen,
                vec![(i, vec![i as u8; 4], i as u32, 10)],
                "cut to snaplen, wire length kept"
            );
            rx.recycle(b);
        }
    }

    #[test]
    fn test_each_packet_keeps_its_link_type_over_both_transports() {
        let (mut spsc, mut srx) = pipe(2);
        let (mut mtx, mut mrx) = mpsc_pipes(1, 1 << 16);
        let mpsc = &mut mtx[0];
        for (i, link) in corecap_wire::Link::ALL.iter().enumerate() {
            let data = [i as u8; 20];
            let p = Packet {
                link: *link,
                iface: i as u32,
                vlan: (i % 2 == 0).then_some(7),
                ..pkt(&data, i as u64)
            };
            spsc.cur.push(&p, 0, 100);
            mpsc.cur.push(&p, 0, 100);
        }
        assert_eq!((spsc.send(), mpsc.send()), (0, 0));
        for rx in [&mut srx, &mut mrx] {
            let mut seen = vec![];
            rx.drain(|p, _| seen.push((p.link, p.iface, p.vlan)));
            let want: Vec<_> = corecap_wire::Link::ALL
                .iter()
                .enumerate()
                .map(|(i, l)| (*l, i as u32, (i % 2 == 0).then_some(7)))
                .collect();
            assert_eq!(seen, want);
        }
    }

    #[test]
    fn test_full_pipe_counts_the_batch_as_dropped() {
        let (mut tx, mut rx) = pipe(1);
        tx.cur.push(&pkt(&[1; 8], 1), 0, 100);
        assert_eq!(tx.send(), 0);
        tx.cur.push(&pkt(&[2; 8], 2), 0, 100);
        tx.cur.push(&pkt(&[3; 8], 3), 0, 100);
        assert_eq!(tx.send(), 2, "ring full: both packets counted");
        assert!(tx.cur.is_empty());
        assert_eq!(rx.recv().map(|b| b.len()), Some(1));
        drop(tx);
        assert!(rx.closed());
    }
}
