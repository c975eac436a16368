//! A bounded reorder in front of a member's file: the packets it takes are held for
//! [`LAG`] and written in timestamp order. A member drains one pipe per capture worker in
//! turn, and each worker's ring is filled by every CPU that receives for it, so without it
//! a file would step back in time by microseconds at every other batch (`serve --record`
//! from two workers read "Strict time order: False" in capinfos).
//!
//! A live packet's kernel timestamp is at most a few milliseconds older than the moment it
//! reaches the member, so one held until the clock is [`LAG`] past it has met every packet
//! older than it. Every [`EVERY`] the held packets are sorted (the bytes stay where they
//! are; only their records move) and those old enough go out; the rest are copied once into
//! the spare buffer, so a packet is copied about `LAG / EVERY` times at most. At most
//! [`MAX_BYTES`] are held: past that, everything held goes out (a later, older packet is
//! then written out of order). Packets read from a file (whose times are not the clock's)
//! go out at each turn, sorted among themselves.
//!
//! The order is checked, not assumed: a packet that goes out older than one already gone
//! (a worker that fell more than [`LAG`] behind) is counted ([`Reorder::late`]), and the
//! member says so.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::packet::Packet;
use crate::stage::pipe::Batch;

/// How long a packet is held past its timestamp.
pub const LAG: Duration = Duration::from_millis(100);
/// How often the held packets are sorted and the old enough written.
pub const EVERY: Duration = Duration::from_millis(50);
/// Most bytes held.
pub const MAX_BYTES: usize = 64 << 20;

/// The held packets (see the module doc).
#[derive(Debug)]
pub struct Reorder {
    held: Batch,
    spare: Batch,
    last: Instant,
    /// The newest timestamp gone out.
    newest: u64,
    /// Packets that went out older than `newest`.
    late: u64,
}

impl Default for Reorder {
    fn default() -> Self {
        Self {
            held: Batch::default(),
            spare: Batch::default(),
            last: Instant::now(),
            newest: 0,
            late: 0,
        }
    }
}

impl Reorder {
    /// Holds a copy of `p`.
    pub fn push(&mut self, p: &Packet<'_>, hash: u32) {
        self.held.push(p, hash, u32::MAX);
    }

    /// Whether a turn is due: [`EVERY`] has passed, or [`MAX_BYTES`] are held.
    pub fn due(&self) -> bool {
        !self.held.is_empty() && (self.last.elapsed() >= EVERY || self.held.data_len() >= MAX_BYTES)
    }

    /// Gives `f` the held packets that are old enough (all of them with `all`, or when over
    /// [`MAX_BYTES`]), oldest first; returns how many.
    pub fn release(&mut self, all: bool, mut f: impl FnMut(&Packet<'_>)) -> usize {
        self.last = Instant::now();
        if self.held.is_empty() {
            return 0;
        }
        self.held.sort_by_time();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let cut = if all || self.held.data_len() >= MAX_BYTES {
            u64::MAX
        } else {
            now.saturating_sub(LAG.as_nanos() as u64)
        };
        let mut n = 0;
        for i in 0..self.held.len() {
            let Some((p, hash)) = self.held.get(i) else {
                continue;
            };
            if p.ts_ns <= cut {
                if p.ts_ns < self.newest {
                    self.late += 1;
                } else {
                    self.newest = p.ts_ns;
                }
                f(&p);
                n += 1;
            } else {
                self.spare.push(&p, hash, u32::MAX);
            }
        }
        std::mem::swap(&mut self.held, &mut self.spare);
        self.spare.clear();
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

    fn packet(ts_ns: u64, data: &[u8]) -> Packet<'_> {
        Packet::ethernet(ts_ns, data)
    }

    /// A time of ten lags ago: what the reorder lets go at once.
    fn old() -> u64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_nanos() as u64;
        now - 10 * LAG.as_nanos() as u64
    }

    /// Issue 40: packets from two workers, each a little out of order, come out in time
    /// order; the newest wait for the lag, the rest go at once.
    #[test]
    fn test_issue40_two_workers_interleaved_come_out_in_time_order() {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_nanos() as u64;
        let old = now - 10 * LAG.as_nanos() as u64;
        let mut r = Reorder::default();
        // Worker 0's batch, then worker 1's, each with one packet out of place.
        for ts in [5, 3, 7, 9, 1, 4, 2, 8, 6, 10] {
            r.push(&packet(old + ts * 1000, &[ts as u8; 60]), 0);
        }
        // Two packets of this moment: held for the lag.
        r.push(&packet(now, &[0xaa; 60]), 0);
        r.push(&packet(now - 1, &[0xbb; 60]), 0);
        let mut out = Vec::new();
        let n = r.release(false, |p| out.push((p.ts_ns, p.data[0])));
        assert_eq!(n, 10);
        let want: Vec<(u64, u8)> = (1..=10).map(|t| (old + t * 1000, t as u8)).collect();
        assert_eq!(out, want, "in time order, each with its bytes");
        assert!(!r.is_empty(), "the newest wait");
        out.clear();
        r.release(true, |p| out.push((p.ts_ns, p.data[0])));
        assert_eq!(out, vec![(now - 1, 0xbb), (now, 0xaa)]);
        assert!(r.is_empty());
        assert_eq!(r.late(), 0);
    }

    /// Issue 40: a packet that comes after newer ones have gone out (its worker fell
    /// behind by more than the lag) goes out, and is counted as out of time order.
    #[test]
    fn test_issue40_a_packet_later_than_the_lag_is_counted() {
        let old = old();
        let mut r = Reorder::default();
        for ts in [3, 4] {
            r.push(&packet(old + ts, &[ts as u8; 60]), 0);
        }
        let mut out = Vec::new();
        r.release(false, |p| out.push(p.ts_ns));
        // A worker's packets from before those, after they went.
        for ts in [1, 5, 2] {
            r.push(&packet(old + ts, &[ts as u8; 60]), 0);
        }
        r.release(false, |p| out.push(p.ts_ns));
        assert_eq!(out, [3, 4, 1, 2, 5].map(|t| old + t));
        assert_eq!(r.late(), 2, "1 and 2 came after 4");
    }
}
