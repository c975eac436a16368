//! One output file for all workers, in timestamp order (`--merge`, and `-w -`).
//!
//! Workers copy each block's packets into a batch and send it to the merge thread over a
//! bounded channel (a full channel makes the worker wait, so its ring fills and the kernel
//! counts the drops). Each batch carries a watermark: the worker will send no packet older
//! than it (its last packet's time less [`SLACK_NS`], or on an idle live interface the
//! time 50 ms ago; from a file, the file's time so far).
//!
//! A worker's own packets are not quite in time order: its ring is filled by every CPU
//! that receives for it, and a packet stamped a few microseconds earlier on one CPU can
//! take its slot after a later one from another, in the same block or the next. So the
//! merge thread sorts each batch as it comes, and writes the oldest packet of all pending
//! batches (of every worker) once every worker's watermark has passed it: a bounded
//! reorder, whose bound is the watermark's lag, and every file it writes is in time order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::time::Duration;

use super::file::FileSink;
use crate::packet::Packet;
use crate::stage::pipe;
use corecap_store::write::output::Refused;

/// Packets of one worker on their way to the merge thread.
#[derive(Debug, Default)]
pub struct Batch {
    worker: usize,
    packets: pipe::Batch,
    watermark: u64,
    done: bool,
}

/// A worker's end of the merge.
#[derive(Debug)]
pub struct MergeHandle {
    worker: usize,
    tx: SyncSender<Batch>,
    /// Batches the merge thread has written, emptied, to fill again: their memory is
    /// reused, not allocated and grown afresh for every block.
    free: Receiver<Batch>,
    cur: Batch,
    /// Whether the merged file keeps its connections: without, a cut packet is not sent.
    counts_cut: bool,
}

/// How much older than a worker's last packet its next ones may be: a ring filled by
/// several CPUs is out of order by microseconds (a CPU that stamped a packet and then lost
/// the ring's lock to another). Holding more than that would keep the pending packets out
/// of the cache (copying them cost twice as much CPU with 50 ms held).
const SLACK_NS: u64 = 5_000_000;

/// What a batch's packet is for, in the field a pipe's batch keeps for a flow hash (the
/// merge has no use for one): a packet to write.
const WRITE: u32 = 0;
/// A packet the cutoff left out: only counted into its connection.
const CUT: u32 = 1;
/// Bytes of a cut packet copied to the merge: its link, IP (with IPv6 extension headers)
/// and transport headers, all that its connection's count reads.
const CUT_HEADERS: u32 = 256;

/// How many written batches wait to be reused, per worker.
const FREE_BATCHES: usize = 8;

/// How many packets ahead in a batch the merge thread asks for a packet's headers.
const HEADERS_AHEAD: usize = 8;

/// The merge's channels for `workers` workers: each worker's handle, and what
/// [`run`] takes (the batches coming in, and one way back per worker for the batches it
/// has written). `counts_cut`: whether the merged file keeps its connections, so that
/// packets the cutoff left out are worth sending to be counted.
pub fn channels(
    workers: usize,
    counts_cut: bool,
) -> (Vec<MergeHandle>, Receiver<Batch>, Vec<SyncSender<Batch>>) {
    let (tx, rx) = sync_channel(256);
    let mut handles = Vec::with_capacity(workers);
    let mut back = Vec::with_capacity(workers);
    for w in 0..workers {
        let (btx, brx) = sync_channel(FREE_BATCHES);
        back.push(btx);
        handles.push(MergeHandle {
            worker: w,
            tx: tx.clone(),
            free: brx,
            cur: Batch {
                worker: w,
                ..Default::default()
            },
            counts_cut,
        });
    }
    (handles, rx, back)
}

impl MergeHandle {
    /// Copies a packet into the current batch.
    pub fn push(&mut self, p: &Packet<'_>) {
        self.cur.packets.push(p, WRITE, u32::MAX);
    }

    /// Copies the headers of a packet the per-flow cutoff left out into the current batch:
    /// the merge thread counts it into its connection's record (seen, not kept) in time
    /// order with the written ones, and writes nothing of it.
    pub fn push_cut(&mut self, p: &Packet<'_>) {
        if self.counts_cut {
            self.cur.packets.push(p, CUT, CUT_HEADERS);
        }
    }

    /// Sends the current batch with a watermark. Returns false if the merge thread is gone.
    pub fn send(&mut self, watermark: u64) -> bool {
        let next = self.free.try_recv().unwrap_or_default();
        let next = Batch {
            worker: self.worker,
            watermark: 0,
            done: false,
            ..next
        };
        let mut b = std::mem::replace(&mut self.cur, next);
        // Raised to the batch's last packet less [`SLACK`], not to the packet itself: the
        // next batch may hold one a little older.
        let last = b
            .packets
            .len()
            .checked_sub(1)
            .and_then(|i| b.packets.ts(i))
            .unwrap_or(0);
        b.watermark = watermark.max(last.saturating_sub(SLACK_NS));
        self.tx.send(b).is_ok()
    }

    /// Sends what is left and tells the merge thread this worker is done.
    pub fn finish(mut self) {
        let mut b = std::mem::take(&mut self.cur);
        b.worker = self.worker;
        b.watermark = u64::MAX;
        b.done = true;
        let _ = self.tx.send(b);
    }
}

/// What the merge could not write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unwritten {
    /// Refused by a failed or full disk: `disk` drops.
    pub disk: u64,
    /// Refused once the file had all it was asked to hold (`-a files:`, `-a filesize:`):
    /// `stop` drops.
    pub stop: u64,
}

/// Runs the merge until every worker is done. Returns the sink and the packets it could not
/// write. A failed file ends the merge early: the rest are counted too. With
/// `wait` (files read with -r), a packet waits for the disk writer to take it rather than
/// being dropped, stop or not: the workers counted it as delivered.
pub fn run(
    rx: Receiver<Batch>,
    back: Vec<SyncSender<Batch>>,
    mut sink: FileSink,
    stop: &AtomicBool,
    wait: bool,
) -> (FileSink, Unwritten) {
    let workers = back.len().max(1);
    let mut pending = Pending::default();
    let mut wm = vec![0u64; workers];
    let mut done = vec![false; workers];
    let mut lost = Unwritten::default();
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(mut b) => {
                b.worker = b.worker.min(workers - 1);
                let w = b.worker;
                wm[w] = wm[w].max(b.watermark);
                done[w] |= b.done;
                pending.add(b);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => done.iter_mut().for_each(|d| *d = true),
        }
        let all_done = done.iter().all(|d| *d);
        // Below this time every worker has said it sends nothing more.
        let safe = if all_done {
            u64::MAX
        } else {
            wm.iter()
                .zip(&done)
                .map(|(&m, &d)| if d { u64::MAX } else { m })
                .min()
                .unwrap_or(u64::MAX)
        };
        pending.write_until(safe, &mut sink, wait, &back, &mut lost);
        sink.hand_over();
        if sink.failed() || lost.stop > 0 {
            // A write failed, or the file holds all it may: end the capture; the workers'
            // last batches are counted. Relaxed: a flag the workers poll once per block.
            stop.store(true, Ordering::Relaxed);
        }
        if all_done {
            return (sink, lost);
        }
    }
}

/// The batches waiting to be written (each sorted as it came), and a heap of the oldest
/// unwritten packet of each: the next packet to write is the heap's top, found in
/// O(log batches).
#[derive(Default)]
struct Pending {
    /// Batches by id, with the next packet to write; None where an id is free.
    batches: Vec<Option<(Batch, usize)>>,
    free: Vec<usize>,
    /// (time of the batch's next packet, batch id), oldest on top.
    heads: BinaryHeap<Reverse<(u64, usize)>>,
}

impl Pending {
    /// The next packet to write of batch `id`, if the batch is there.
    fn next_of(&self, id: usize) -> Option<usize> {
        self.batches.get(id)?.as_ref().map(|(_, i)| *i)
    }

    /// The packet written after packet `i` of batch `id` (just taken off the heap): the
    /// older of that batch's next and the heap's top, if no newer than `safe`.
    fn next_after(&self, id: usize, i: usize, safe: u64) -> Option<(usize, usize)> {
        let own = self.batches.get(id)?.as_ref()?.0.packets.ts(i + 1);
        let own = own.map(|ts| ((ts, id), i + 1));
        let top = self
            .heads
            .peek()
            .and_then(|&Reverse((ts, o))| Some(((ts, o), self.next_of(o)?)));
        let ((ts, b), at) = match (own, top) {
            (Some(a), Some(t)) => a.min(t),
            (a, t) => a.or(t)?,
        };
        (ts <= safe).then_some((b, at))
    }

    /// Writes packet `i` of batch `id` (or counts it into its connection, when the cutoff
    /// left it out), having asked for the headers of the packet [`HEADERS_AHEAD`] in the
    /// same batch and announced `after` to the sink ([`FileSink::ahead`]); counts what the
    /// sink refused in `lost`.
    fn write_one(
        &self,
        (id, i): (usize, usize),
        after: Option<(usize, usize)>,
        sink: &mut FileSink,
        wait: bool,
        lost: &mut Unwritten,
    ) {
        let batch = |id: usize| self.batches.get(id)?.as_ref().map(|(b, _)| &b.packets);
        let packet = |(id, i): (usize, usize)| batch(id)?.get(i);
        if let Some(b) = batch(id) {
            b.prefetch(i + HEADERS_AHEAD);
        }
        match packet((id, i)) {
            Some((p, CUT)) => sink.count_cut(&p, None),
            Some((p, _)) => {
                if let Some((next, WRITE)) = after.and_then(packet) {
                    sink.ahead(&next);
                }
                if wait {
                    // Not ended by a stop: what the workers handed over is written, as their
                    // own files would have (the capture stops as the input ends, while this
                    // thread may still be draining). Only a failed or gone writer ends it.
                    sink.wait_for_disk(|| false);
                }
                match sink.write(&p) {
                    Ok(()) => {}
                    Err(Refused::Limit) => lost.stop += 1,
                    Err(_) => lost.disk += 1,
                }
            }
            None => {}
        }
    }

    /// Takes a batch in: sorted, and its oldest packet on the heap.
    fn add(&mut self, mut b: Batch) {
        if b.packets.is_empty() {
            return;
        }
        b.packets.sort_by_time();
        let ts = b.packets.ts(0).unwrap_or(0);
        let id = match self.free.pop() {
            Some(id) => {
                self.batches[id] = Some((b, 0));
                id
            }
            None => {
                self.batches.push(Some((b, 0)));
                self.batches.len() - 1
            }
        };
        self.heads.push(Reverse((ts, id)));
    }

    /// Writes, oldest first, every pending packet no newer than `safe`; a batch written to
    /// its end goes back to its worker. Counts the packets the sink refused in `lost`.
    fn write_until(
        &mut self,
        safe: u64,
        sink: &mut FileSink,
        wait: bool,
        back: &[SyncSender<Batch>],
        lost: &mut Unwritten,
    ) {
        while let Some(&Reverse((ts, id))) = self.heads.peek() {
            if ts > safe {
                break;
            }
            self.heads.pop();
            let Some(i) = self.next_of(id) else {
                continue;
            };
            // The packet written after this one, announced while this one is written.
            let after = self.next_after(id, i, safe);
            self.write_one((id, i), after, sink, wait, lost);
            let Some((b, i)) = self.batches.get_mut(id).and_then(Option::as_mut) else {
                continue;
            };
            *i += 1;
            match b.packets.ts(*i) {
                Some(next) => self.heads.push(Reverse((next, id))),
                None => {
                    if let Some((mut written, _)) = self.batches[id].take() {
                        // Back to its worker to fill again; dropped when it has enough.
                        written.packets.clear();
                        if let Some(tx) = back.get(written.worker) {
                            let _ = tx.try_send(written);
                        }
                    }
                    self.free.push(id);
                }
            }
        }
    }
}
