//! A reorder in front of a member's file, by the workers' watermarks: the packets it takes
//! are held and written in timestamp order. A member drains one pipe per capture worker in
//! turn, and each worker's ring is filled by every CPU that receives for it, so without it
//! a file would step back in time by microseconds at every other batch (`serve --record`
//! from two workers read "Strict time order: False" in capinfos).
//!
//! Each worker publishes beside its pipe the time up to which it has sent every packet it
//! will (its watermark: see [`corecap_queue::watermark`] for the protocol and
//! `crate::source::ring_mark` for how a live worker chooses it). Before each drain the
//! member loads the watermarks of all its pipes ([`Reorder::take`]); every [`EVERY`] the
//! held packets are sorted (the bytes stay where they are; only their records move) and
//! those at or below the smallest watermark go out; the rest are copied once into the
//! spare buffer. A worker that is descheduled, or behind on its ring, holds the others'
//! packets back until it has sent its own: no clock decides that a packet is old enough.
//!
//! The memory is bounded: past [`MAX_BYTES`] held, the oldest go out whatever the
//! watermarks say, until half that is held, and a later, older packet is then written
//! out of order. The order is checked, not assumed: a packet that goes out older than one
//! already gone is counted ([`Reorder::late`]), and the member says so.

use std::time::{Duration, Instant};

use crate::packet::Packet;
use crate::stage::pipe::{Batch, PipeRx};

/// How often the held packets are sorted and those below the watermark written.
pub const EVERY: Duration = Duration::from_millis(50);
/// Most bytes held.
pub const MAX_BYTES: usize = 64 << 20;

/// The held packets (see the module doc).
#[derive(Debug)]
pub struct Reorder {
    held: Batch,
    spare: Batch,
    last: Instant,
    /// The smallest watermark of the pipes, loaded before the last drain: every packet at
    /// or below it that the workers will send has been taken.
    mark: u64,
    /// The newest timestamp gone out.
    newest: u64,
    /// Packets that went out older than `newest`.
    late: u64,
    /// The oldest timestamp held (`u64::MAX` when none): a turn that could let nothing go
    /// is not taken, so a worker that stalls costs no copying.
    oldest: u64,
}

impl Default for Reorder {
    fn default() -> Self {
        Self {
            held: Batch::default(),
            spare: Batch::default(),
            last: Instant::now(),
            mark: 0,
            newest: 0,
            late: 0,
            oldest: u64::MAX,
        }
    }
}

impl Reorder {
    /// Holds a copy of `p`.
    pub fn push(&mut self, p: &Packet<'_>, hash: u32) {
        self.oldest = self.oldest.min(p.ts_ns);
        self.held.push(p, hash, u32::MAX);
    }

    /// Loads the watermarks of `rx`, then holds every packet waiting there; whether any
    /// came. The loads come first: a packet at or below the smallest is then in the pipes
    /// (see [`corecap_queue::watermark`]).
    pub fn take(&mut self, rx: &mut [PipeRx]) -> bool {
        self.mark = rx.iter().map(PipeRx::watermark).min().unwrap_or(u64::MAX);
        let (held, oldest) = (&mut self.held, &mut self.oldest);
        let mut got = false;
        for r in rx.iter_mut() {
            got |= r.drain(|p, hash| {
                *oldest = (*oldest).min(p.ts_ns);
                held.push(p, hash, u32::MAX);
            }) > 0;
        }
        got
    }

    /// Whether a turn is due: [`EVERY`] has passed and the oldest packet held is at or
    /// below the watermark, or [`MAX_BYTES`] are held.
    pub fn due(&self) -> bool {
        !self.held.is_empty()
            && ((self.last.elapsed() >= EVERY && self.oldest <= self.mark)
                || self.held.data_len() >= MAX_BYTES)
    }

    /// Gives `f` the held packets at or below the watermark (all of them with `all`), and
    /// when over [`MAX_BYTES`] the oldest until half that is held, oldest first; returns
    /// how many.
    pub fn release(&mut self, all: bool, mut f: impl FnMut(&Packet<'_>)) -> usize {
        self.last = Instant::now();
        if self.held.is_empty() {
            return 0;
        }
        self.held.sort_by_time();
        let cut = if all { u64::MAX } else { self.mark };
        // Over the cap: the oldest go until half of it is held.
        let keep = if self.held.data_len() >= MAX_BYTES {
            MAX_BYTES / 2
        } else {
            usize::MAX
        };
        let mut left = self.held.data_len();
        let mut going = true;
        let mut n = 0;
        for i in 0..self.held.len() {
            let Some((p, hash)) = self.held.get(i) else {
                continue;
            };
            // Sorted: once a packet stays, every newer one stays too.
            going &= p.ts_ns <= cut || left > keep;
            if going {
                if p.ts_ns < self.newest {
                    self.late += 1;
                } else {
                    self.newest = p.ts_ns;
                }
                left -= p.data.len();
                f(&p);
                n += 1;
            } else {
                self.spare.push(&p, hash, u32::MAX);
            }
        }
        std::mem::swap(&mut self.held, &mut self.spare);
        self.spare.clear();
        // Sorted: the first one left is the oldest.
        self.oldest = self.held.ts(0).unwrap_or(u64::MAX);
        n
    }

    /// Packets that went out older than one before them: written out of time order.
    pub fn late(&self) -> u64 {
        self.late
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::pipe::{mpsc_pipes, pipe, PipeTx};

    fn packet(ts_ns: u64, data: &[u8]) -> Packet<'_> {
        Packet::ethernet(ts_ns, data)
    }

    /// Issue 40: packets from two workers, each a little out of order, come out in time
    /// order up to the watermark; the newer wait for it to pass them.
    #[test]
    fn test_issue40_two_workers_interleaved_come_out_in_time_order() {
        let mut r = Reorder::default();
        // Worker 0's batch, then worker 1's, each with one packet out of place.
        for ts in [5, 3, 7, 9, 1, 4, 2, 8, 6, 10, 12, 11] {
            r.push(&packet(ts * 1000, &[ts as u8; 60]), 0);
        }
        r.mark = 10_000;
        let mut out = Vec::new();
        let n = r.release(false, |p| out.push((p.ts_ns, p.data[0])));
        assert_eq!(n, 10);
        let want: Vec<(u64, u8)> = (1..=10).map(|t| (t * 1000, t as u8)).collect();
        assert_eq!(out, want, "in time order, each with its bytes");
        assert!(!r.is_empty(), "the newer wait");
        out.clear();
        r.release(true, |p| out.push((p.ts_ns, p.data[0])));
        assert_eq!(out, vec![(11_000, 11), (12_000, 12)]);
        assert!(r.is_empty());
        assert_eq!(r.late(), 0);
    }

    /// Issue 40: a packet that comes after newer ones have gone out (its worker broke its
    /// watermark) goes out, and is counted as out of time order.
    #[test]
    fn test_issue40_a_packet_later_than_its_watermark_is_counted() {
        let mut r = Reorder::default();
        for ts in [3, 4] {
            r.push(&packet(ts, &[ts as u8; 60]), 0);
        }
        r.mark = 4;
        let mut out = Vec::new();
        r.release(false, |p| out.push(p.ts_ns));
        // A worker's packets from before those, after they went.
        for ts in [1, 5, 2] {
            r.push(&packet(ts, &[ts as u8; 60]), 0);
        }
        r.mark = 5;
        r.release(false, |p| out.push(p.ts_ns));
        assert_eq!(out, [3, 4, 1, 2, 5]);
        assert_eq!(r.late(), 2, "1 and 2 came after 4");
    }

    /// A turn is taken only when it can let a packet go: while the watermark stays below
    /// every packet held (a worker stalled), nothing is sorted or copied again.
    #[test]
    fn test_a_turn_is_due_only_when_a_packet_can_go() {
        let mut r = Reorder {
            last: Instant::now() - 2 * EVERY,
            ..Reorder::default()
        };
        assert!(!r.due(), "nothing held");
        r.push(&packet(20, &[1; 60]), 0);
        r.push(&packet(10, &[2; 60]), 0);
        r.mark = 9;
        assert!(!r.due(), "the oldest held is above the watermark");
        r.mark = 10;
        assert!(r.due());
        let mut out = Vec::new();
        r.release(false, |p| out.push(p.ts_ns));
        assert_eq!(out, [10]);
        r.last = Instant::now() - 2 * EVERY;
        assert!(!r.due(), "20 is left, above the watermark");
    }

    /// Issue 40: a worker that promises nothing (descheduled) holds the others' packets
    /// back, but only up to the memory cap: then the oldest go until half of it is held.
    #[test]
    fn test_issue40_the_cap_lets_the_oldest_go() {
        let mut r = Reorder::default();
        let big = vec![7u8; 1 << 20];
        let n = (MAX_BYTES >> 20) as u64;
        for ts in (1..=n).rev() {
            r.push(&packet(ts, &big), 0);
        }
        assert!(r.due(), "over the cap, a turn is due at once");
        let mut out = Vec::new();
        r.release(false, |p| out.push(p.ts_ns));
        assert_eq!(
            out,
            (1..=n / 2).collect::<Vec<_>>(),
            "the oldest half, in order"
        );
        out.clear();
        r.release(false, |p| out.push(p.ts_ns));
        assert!(out.is_empty(), "under the cap, the watermark decides again");
        assert_eq!(r.late(), 0);
    }

    /// Issue 40: `take` loads the watermarks of every pipe (spsc, and each worker's of an
    /// mpsc queue) before it drains them; a worker gone holds nothing back.
    #[test]
    fn test_issue40_take_lets_go_up_to_the_smallest_watermark() {
        let (tx0, rx0) = pipe(4);
        let (tx1, rx1) = pipe(4);
        let (txm, rxm) = mpsc_pipes(2, 1 << 16);
        for (mut tx, mut rx) in [(vec![tx0, tx1], vec![rx0, rx1]), (txm, vec![rxm])] {
            let mut r = Reorder::default();
            let send = |tx: &mut PipeTx, ts: &[u64], mark: u64| {
                for &t in ts {
                    tx.cur.push(&packet(t, &[t as u8; 60]), 0, 100);
                }
                assert_eq!(tx.send(), 0);
                tx.publish(mark);
            };
            send(&mut tx[0], &[10, 30, 20], 30);
            send(&mut tx[1], &[15, 25], 25);
            let mut out = Vec::new();
            assert!(r.take(&mut rx));
            r.release(false, |p| out.push(p.ts_ns));
            assert_eq!(out, [10, 15, 20, 25], "up to worker 1's 25");
            send(&mut tx[0], &[40], 40);
            r.take(&mut rx);
            r.release(false, |p| out.push(p.ts_ns));
            assert_eq!(
                out.len(),
                4,
                "worker 1 promised nothing past 25: 30 and 40 wait"
            );
            tx.remove(1);
            r.take(&mut rx);
            r.release(false, |p| out.push(p.ts_ns));
            assert_eq!(
                out,
                [10, 15, 20, 25, 30, 40],
                "a worker gone holds nothing back"
            );
            assert_eq!(r.late(), 0);
        }
    }

    /// The bytes of packet `seq` of worker `w`: who and which, then a pattern of both.
    fn stamped(w: u32, seq: u64) -> Vec<u8> {
        let len = 60 + (seq * 7 + u64::from(w)) as usize % 200;
        let mut d = Vec::with_capacity(len);
        d.extend_from_slice(&seq.to_le_bytes());
        d.extend_from_slice(&w.to_le_bytes());
        d.extend((12..len).map(|i| (seq as u8) ^ (w as u8).wrapping_mul(61) ^ i as u8));
        d
    }

    /// FNV-1a.
    fn checksum(d: &[u8]) -> u64 {
        d.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        })
    }

    fn xorshift(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// What a worker sent: packets, their checksums summed, and those the full pipe lost.
    #[derive(Default)]
    struct Sent {
        packets: u64,
        sum: u64,
        lost: u64,
        lost_sum: u64,
    }

    /// A worker: stamps packets from the shared clock, keeps a random backlog of them (its
    /// ring), sends a random part of it shuffled, then publishes the watermark it may:
    /// just below the oldest stamp still in its backlog. Now and then it sleeps, as a
    /// descheduled worker does.
    fn worker(w: u32, mut tx: PipeTx, clock: &std::sync::atomic::AtomicU64, n: u64) -> Sent {
        use std::sync::atomic::Ordering::Relaxed;
        let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ (u64::from(w) << 32 | 1);
        let mut backlog: Vec<(u64, u64)> = Vec::new();
        let mut sent = Sent::default();
        let mut seq = 0u64;
        while seq < n || !backlog.is_empty() {
            for _ in 0..xorshift(&mut rng) % 24 {
                if seq < n {
                    backlog.push((clock.fetch_add(1, Relaxed), seq));
                    seq += 1;
                }
            }
            let k = if seq == n {
                backlog.len()
            } else {
                (xorshift(&mut rng) as usize % 24).min(backlog.len())
            };
            let mut batch: Vec<(u64, u64)> = backlog.drain(..k).collect();
            for i in (1..batch.len()).rev() {
                batch.swap(i, xorshift(&mut rng) as usize % (i + 1));
            }
            let sums: Vec<u64> = batch
                .iter()
                .map(|&(_, s)| checksum(&stamped(w, s)))
                .collect();
            for &(ts, s) in &batch {
                tx.cur
                    .push(&Packet::ethernet(ts, &stamped(w, s)), w, u32::MAX);
            }
            sent.packets += batch.len() as u64;
            sent.sum = sums.iter().fold(sent.sum, |a, &b| a.wrapping_add(b));
            // A full pipe loses the batch's last `lost` packets (all of it over spsc).
            let lost = tx.send() as usize;
            sent.lost += lost as u64;
            let gone = &sums[sums.len() - lost..];
            sent.lost_sum = gone.iter().fold(sent.lost_sum, |a, &b| a.wrapping_add(b));
            // Every stamp this worker will still send is in its backlog or not yet taken
            // (and then newer than any taken so far).
            let mark = match backlog.first() {
                Some(&(ts, _)) => ts - 1,
                None => clock.load(Relaxed).saturating_sub(1),
            };
            tx.publish(mark);
            match xorshift(&mut rng) % 64 {
                0 => std::thread::sleep(std::time::Duration::from_micros(300)),
                1..=8 => std::thread::yield_now(),
                _ => {}
            }
        }
        sent
    }

    /// Issue 40, stamped stress: eight workers on threads of their own, each sending its
    /// packets a little out of order and sometimes stalling, over both transports; the
    /// member lets go only up to the watermarks. Every packet comes out once, intact
    /// (checksums), in strict time order, none counted late; received + lost == sent.
    #[test]
    fn test_issue40_stress_many_workers_come_out_in_time_order() {
        const WORKERS: u32 = 8;
        let n: u64 = if cfg!(miri) { 50 } else { 20_000 };
        for transport in ["spsc", "mpsc"] {
            let (txs, mut rx) = match transport {
                "spsc" => (0..WORKERS).map(|_| pipe(64)).unzip(),
                _ => {
                    let (t, r) = mpsc_pipes(WORKERS as usize, 1 << 16);
                    (t, vec![r])
                }
            };
            let clock = std::sync::atomic::AtomicU64::new(1);
            let mut r = Reorder::default();
            let (mut got, mut sum, mut last) = (0u64, 0u64, 0u64);
            let mut check = |p: &Packet<'_>| {
                let seq = u64::from_le_bytes(p.data[..8].try_into().expect("seq"));
                let w = u32::from_le_bytes(p.data[8..12].try_into().expect("worker"));
                assert_eq!(
                    p.data,
                    stamped(w, seq).as_slice(),
                    "worker {w} packet {seq}"
                );
                assert!(p.ts_ns > last, "{} after {last}", p.ts_ns);
                last = p.ts_ns;
                got += 1;
                sum = sum.wrapping_add(checksum(p.data));
            };
            let sent: Vec<Sent> = std::thread::scope(|s| {
                let hs: Vec<_> = txs
                    .into_iter()
                    .enumerate()
                    .map(|(w, tx)| {
                        let clock = &clock;
                        s.spawn(move || worker(w as u32, tx, clock, n))
                    })
                    .collect();
                while !rx.iter().all(PipeRx::closed) {
                    r.take(&mut rx);
                    r.release(false, &mut check);
                }
                hs.into_iter().map(|h| h.join().expect("worker")).collect()
            });
            while r.take(&mut rx) {}
            r.release(true, &mut check);
            let total = |f: fn(&Sent) -> u64| sent.iter().map(f).fold(0u64, u64::wrapping_add);
            assert_eq!(total(|s| s.packets), u64::from(WORKERS) * n, "{transport}");
            assert_eq!(got + total(|s| s.lost), total(|s| s.packets), "{transport}");
            assert_eq!(
                sum.wrapping_add(total(|s| s.lost_sum)),
                total(|s| s.sum),
                "{transport}: every packet intact, once"
            );
            assert_eq!(r.late(), 0, "{transport}");
        }
    }
}
