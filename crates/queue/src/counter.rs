//! Cache-padded counters, one per worker, summed by readers.
//!
//! A counter that one worker bumps per packet must not share a cache line with
//! another worker's counter, or both cores bounce the line on every packet.
//! [`PaddedCounter`] keeps each counter on its own line
//! ([`crossbeam_utils::CachePadded`]); readers sum over workers when they
//! report.

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU64, Ordering};

/// A `u64` event counter alone on its cache line.
///
/// Meant to be written by one owner thread and read by any; a shared writer
/// stays exact (the add is atomic), only slower.
#[derive(Debug, Default)]
pub struct PaddedCounter(CachePadded<AtomicU64>);

impl PaddedCounter {
    /// A counter at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        // Relaxed: an event count that publishes no other memory; only the owner
        // thread writes, so the line stays in its cache.
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// The current value.
    #[inline]
    pub fn get(&self) -> u64 {
        // Relaxed: readers want a recent total, not ordering with other memory;
        // pairs with nothing.
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn test_add_get() {
        let c = PaddedCounter::new();
        c.add(3);
        c.add(4);
        assert_eq!(c.get(), 7);
        assert!(align_of::<PaddedCounter>() >= 64);
    }

    #[test]
    fn test_add_from_threads() {
        let c = PaddedCounter::new();
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        c.add(1);
                    }
                });
            }
        });
        assert_eq!(c.get(), 2000);
    }
}
