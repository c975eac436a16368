//! A live ring's watermark: the time up to which a worker has sent every packet its
//! AF_PACKET ring will give it (see [`corecap_queue::watermark`] for how a member uses it).
//!
//! The kernel stamps a packet in the softirq that receives it, then copies it into the
//! ring's open block; it hands a block over when it is full or, partly filled, when the
//! retire timer finds it unchanged since its last run, so within two block timeouts.
//! A worker that finds its next block not ready at time `t` has therefore read every
//! packet stamped before `t - 2 × timeout`, but for one still between its stamp and its
//! slot (a softirq interrupted there); [`MARGIN_NS`] covers that. So after a poll that
//! found the ring empty, with `t` taken before the poll, the watermark is
//! `t - 2 × timeout - MARGIN_NS`.
//!
//! A worker that always finds a block ready (at full load, or catching up after it was
//! descheduled) never finds it empty. Its blocks come in order, and a later block holds
//! nothing much older than an earlier one: only what another CPU stamped a little before
//! it took the ring's lock (350 µs at most in our measures, see [`super::ring_order`]). So
//! after each block the watermark is also the newest time read less [`SLACK_NS`].
//!
//! The watermark only rises. A packet that breaks it reaches the member late, is written
//! all the same, and is counted out of order there.

/// Time a packet may spend between its stamp and its slot in the ring, beyond the block
/// timeouts.
pub const MARGIN_NS: u64 = 20_000_000;

/// How much older than the newest packet read a later block's packets may be.
pub const SLACK_NS: u64 = 5_000_000;

/// The watermark of one worker's ring (see the module doc).
#[derive(Debug)]
pub struct RingMark {
    /// Two block timeouts and [`MARGIN_NS`], in ns.
    bound: u64,
    /// The newest timestamp read.
    newest: u64,
    /// The watermark so far.
    mark: u64,
}

impl RingMark {
    /// The watermark of a ring whose kernel closes a partly filled block after
    /// `retire_tov_ms`.
    pub fn new(retire_tov_ms: u32) -> Self {
        Self {
            bound: 2 * u64::from(retire_tov_ms.max(1)) * 1_000_000 + MARGIN_NS,
            newest: 0,
            mark: 0,
        }
    }

    /// A packet read with time `ts_ns`.
    #[inline]
    pub fn packet(&mut self, ts_ns: u64) {
        self.newest = self.newest.max(ts_ns);
    }

    /// The ring had no block ready when polled; `t_ns` is a time taken before the poll.
    pub fn empty_at(&mut self, t_ns: u64) {
        self.mark = self.mark.max(t_ns.saturating_sub(self.bound));
    }

    /// The watermark now: every packet this ring will give with a time up to it was read.
    pub fn get(&mut self) -> u64 {
        self.mark = self.mark.max(self.newest.saturating_sub(SLACK_NS));
        self.mark
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_mark_from_an_empty_poll_and_from_the_packets_read() {
        let mut m = RingMark::new(10);
        assert_eq!(m.get(), 0, "nothing promised before a poll or a packet");
        m.empty_at(1_000_000_000);
        assert_eq!(
            m.get(),
            1_000_000_000 - 40_000_000,
            "two timeouts and the margin"
        );
        m.packet(2_000_000_000);
        m.packet(1_900_000_000);
        assert_eq!(
            m.get(),
            2_000_000_000 - SLACK_NS,
            "the newest read, less the slack"
        );
        m.empty_at(1_500_000_000);
        assert_eq!(m.get(), 2_000_000_000 - SLACK_NS, "never goes down");
    }
}
