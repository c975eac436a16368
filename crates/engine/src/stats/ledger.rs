//! Per-worker counters and the ledger that sums them.
//!
//! Each worker owns one [`WorkerCounters`], cache-padded so that workers never share a cache
//! line. The worker keeps running totals in plain locals and publishes them once per block
//! with Relaxed stores (only the owner writes its counters); readers sum them when asked.
//! The accounting identity is
//! `kernel_packets = packets + drops.kernel + drops.app + drops.disk + drops.stop + cut`,
//! where `cut` counts the packets the per-flow cutoff left out ([`crate::cutoff`]).

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use serde::Serialize;

/// Counters of one worker, written only by that worker.
#[derive(Debug, Default)]
pub struct WorkerCounters {
    inner: CachePadded<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    packets: AtomicU64,
    bytes: AtomicU64,
    kernel_packets: AtomicU64,
    kernel_drops: AtomicU64,
    freezes: AtomicU64,
    app_drops: AtomicU64,
    disk_drops: AtomicU64,
    stop_drops: AtomicU64,
    filtered: AtomicU64,
    first_ts_ns: AtomicU64,
    cut_packets: AtomicU64,
    cut_bytes: AtomicU64,
    cut_evictions: AtomicU64,
}

/// A snapshot of one worker's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    /// Packets delivered to the apps.
    pub packets: u64,
    /// Wire bytes of the delivered packets.
    pub bytes: u64,
    /// Packets the source counted (the kernel for live capture), drops included.
    pub kernel_packets: u64,
    /// Packets the kernel dropped because the ring was full.
    pub kernel_drops: u64,
    /// Times the kernel froze the ring.
    pub freezes: u64,
    /// Packets an app could not take (a full queue, a block the writer refused).
    pub app_drops: u64,
    /// Packets lost at the disk: no free buffer (the disk was behind), or cut from a file
    /// after a failed write.
    pub disk_drops: u64,
    /// Packets received after the capture had reached its count or been stopped.
    pub stop_drops: u64,
    /// Packets a userspace filter rejected (file input only; the kernel filter is not counted).
    pub filtered: u64,
    /// Timestamp (ns since the epoch) of the first delivered packet; 0 before the first.
    pub first_ts_ns: u64,
    /// Packets the per-flow cutoff left out of the recording: counted, not delivered.
    pub cut_packets: u64,
    /// Wire bytes of the cut packets.
    pub cut_bytes: u64,
    /// Flows the cutoff's full table forgot before they were idle (each starts again
    /// from zero, so more of it is kept).
    pub cut_evictions: u64,
}

impl std::ops::AddAssign for Snapshot {
    fn add_assign(&mut self, o: Self) {
        self.packets += o.packets;
        self.bytes += o.bytes;
        self.kernel_packets += o.kernel_packets;
        self.kernel_drops += o.kernel_drops;
        self.freezes += o.freezes;
        self.app_drops += o.app_drops;
        self.disk_drops += o.disk_drops;
        self.stop_drops += o.stop_drops;
        self.filtered += o.filtered;
        self.cut_packets += o.cut_packets;
        self.cut_bytes += o.cut_bytes;
        self.cut_evictions += o.cut_evictions;
        self.first_ts_ns = match (self.first_ts_ns, o.first_ts_ns) {
            (0, t) | (t, 0) => t,
            (a, b) => a.min(b),
        };
    }
}

impl Snapshot {
    /// Whether every counted packet is delivered or counted as dropped.
    pub fn balanced(&self) -> bool {
        self.kernel_packets
            == self.packets
                + self.kernel_drops
                + self.app_drops
                + self.disk_drops
                + self.stop_drops
                + self.cut_packets
    }
}

impl WorkerCounters {
    /// Publishes the owner's running totals. Relaxed: only the owning worker writes.
    pub fn publish(&self, s: &Snapshot) {
        let c = &*self.inner;
        c.packets.store(s.packets, Ordering::Relaxed);
        c.bytes.store(s.bytes, Ordering::Relaxed);
        c.kernel_packets.store(s.kernel_packets, Ordering::Relaxed);
        c.kernel_drops.store(s.kernel_drops, Ordering::Relaxed);
        c.freezes.store(s.freezes, Ordering::Relaxed);
        c.app_drops.store(s.app_drops, Ordering::Relaxed);
        c.disk_drops.store(s.disk_drops, Ordering::Relaxed);
        c.stop_drops.store(s.stop_drops, Ordering::Relaxed);
        c.filtered.store(s.filtered, Ordering::Relaxed);
        c.first_ts_ns.store(s.first_ts_ns, Ordering::Relaxed);
        c.cut_packets.store(s.cut_packets, Ordering::Relaxed);
        c.cut_bytes.store(s.cut_bytes, Ordering::Relaxed);
        c.cut_evictions.store(s.cut_evictions, Ordering::Relaxed);
    }

    /// Reads the last published totals. Relaxed: a snapshot may mix two publications, which
    /// only matters for the live display; the final summary is read after the worker joined.
    pub fn read(&self) -> Snapshot {
        let c = &*self.inner;
        Snapshot {
            packets: c.packets.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            kernel_packets: c.kernel_packets.load(Ordering::Relaxed),
            kernel_drops: c.kernel_drops.load(Ordering::Relaxed),
            freezes: c.freezes.load(Ordering::Relaxed),
            app_drops: c.app_drops.load(Ordering::Relaxed),
            disk_drops: c.disk_drops.load(Ordering::Relaxed),
            stop_drops: c.stop_drops.load(Ordering::Relaxed),
            filtered: c.filtered.load(Ordering::Relaxed),
            first_ts_ns: c.first_ts_ns.load(Ordering::Relaxed),
            cut_packets: c.cut_packets.load(Ordering::Relaxed),
            cut_bytes: c.cut_bytes.load(Ordering::Relaxed),
            cut_evictions: c.cut_evictions.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_publish_read_and_balance() {
        let c = WorkerCounters::default();
        let s = Snapshot {
            packets: 6,
            bytes: 700,
            kernel_packets: 10,
            kernel_drops: 2,
            stop_drops: 1,
            cut_packets: 1,
            ..Default::default()
        };
        c.publish(&s);
        assert_eq!(c.read(), s);
        assert!(s.balanced());
        let mut t = s;
        t += s;
        assert_eq!((t.packets, t.cut_packets), (12, 2));
        assert!(t.balanced());
    }
}
