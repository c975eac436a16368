//! Watermarks: how far each producer of a queue has got, so its consumer can put the
//! packets of several producers in time order without waiting on a clock.
//!
//! A producer (a capture worker) reads packets from a source whose order it knows only
//! roughly: a kernel ring filled by several CPUs steps back by microseconds, and a worker
//! that was descheduled for a second sends a second's worth of old packets when it runs
//! again. So it publishes, beside each queue it feeds, a watermark `T`: "every packet I
//! will ever send with a time up to `T` is already in the queue". The consumer holds what
//! it takes and lets go only up to the smallest watermark of its producers: a producer
//! that stalls holds the others' packets back instead of being overtaken by them.
//!
//! # Protocol
//!
//! One word per producer, alone on its cache line ([`CachePadded`]), in nanoseconds since
//! the epoch; `u64::MAX` once the producer is gone (its [`Writer`] dropped).
//!
//! - Producer: pushes its packets into the queue, then stores `T` (R1, Release). `T`
//!   never goes down: a smaller value is not stored.
//! - Consumer: loads every producer's word (A1, Acquire), takes the smallest, `min`, and
//!   only then drains the queue. Every push that came before a store it loaded happens
//!   before the drain, so each packet at or below `min` is in what it drains or was
//!   drained before. Packets newer than `min` wait for a later turn.
//!
//! The queue's own orderings do the rest: for an `rtrb` ring the push's Release store of
//! the tail is sequenced before R1, and the drain's Acquire load of the tail comes after
//! A1, so it reads that tail or a newer one; for [`crate::mpsc`] the push's `fetch_add`
//! on the buffer index comes before R1 and the consumer's swap after A1, so the packet is
//! in the buffer the swap takes, and the consumer waits for it to be written (flag
//! R3/A4 there). The loom model `loom_watermark_covers_every_packet_below_it` checks this
//! with two producers on one mpsc queue.
//!
//! A watermark is a promise about times, not a lock: a packet that comes later than its
//! producer said (a source that broke its own bound) is not lost, only late, and the
//! consumer counts it.

use crossbeam_utils::CachePadded;

use crate::sync::{Arc, AtomicU64, Ordering};

/// The producer's end: stores its watermark; `u64::MAX` when dropped.
#[derive(Debug)]
pub struct Writer {
    /// Written only by this end.
    word: Arc<CachePadded<AtomicU64>>,
    /// The last value stored; only this end reads or writes it.
    last: u64,
}

/// The consumer's end: loads the producer's watermark.
#[derive(Clone, Debug)]
pub struct Reader {
    word: Arc<CachePadded<AtomicU64>>,
}

/// A watermark at 0 (nothing promised yet): the producer's end and the consumer's.
pub fn pair() -> (Writer, Reader) {
    let word = Arc::new(CachePadded::new(AtomicU64::new(0)));
    (
        Writer {
            word: word.clone(),
            last: 0,
        },
        Reader { word },
    )
}

impl Writer {
    /// Promises that every packet with a time up to `t` is already pushed. Call after the
    /// pushes it covers; a value below the last one is ignored.
    #[inline]
    pub fn publish(&mut self, t: u64) {
        if t > self.last {
            self.last = t;
            // R1: pairs with A1 in `Reader::get`: the pushes before this store are
            // visible to the drain that follows the load that reads it.
            self.word.store(t, Ordering::Release);
        }
    }

    /// The last value published.
    pub fn get(&self) -> u64 {
        self.last
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // R1 again: a producer that is gone sends nothing more; its last pushes are
        // visible to whoever reads this.
        self.word.store(u64::MAX, Ordering::Release);
    }
}

impl Reader {
    /// The producer's watermark. Load it before draining the queue (see the module doc).
    #[inline]
    pub fn get(&self) -> u64 {
        // A1: pairs with R1 in `Writer::publish` and `Writer::drop`.
        self.word.load(Ordering::Acquire)
    }
}

/// The smallest watermark of `readers` (`u64::MAX` for none): the time up to which every
/// producer has sent all it will.
pub fn min<'a>(readers: impl IntoIterator<Item = &'a Reader>) -> u64 {
    readers
        .into_iter()
        .map(Reader::get)
        .min()
        .unwrap_or(u64::MAX)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn test_publish_rises_only_and_drop_gives_max() {
        let (mut w, r) = pair();
        assert_eq!(r.get(), 0);
        w.publish(10);
        w.publish(7);
        assert_eq!((r.get(), w.get()), (10, 10), "never goes down");
        let (w2, r2) = pair();
        assert_eq!(
            min([&r, &r2]),
            0,
            "a producer that promised nothing holds all back"
        );
        drop(w2);
        assert_eq!(
            min([&r, &r2]),
            10,
            "a producer that is gone holds nothing back"
        );
        drop(w);
        assert_eq!(min([&r, &r2]), u64::MAX);
        assert_eq!(min([]), u64::MAX);
    }
}
