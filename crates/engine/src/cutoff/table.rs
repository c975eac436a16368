//! The per-worker flow table of the cutoff: a fixed number of buckets of [`WAYS`] slots,
//! allocated once. A flow lives in the bucket its key hashes to; a new flow takes a free
//! slot there, else an idle one, else the slot seen longest ago (an eviction, counted).
//! Nothing is allocated, locked or freed per packet, and a probe reads one bucket.

use corecap_wire::FlowKey;

/// Slots per bucket: a bucket is four cache lines, and a probe reads them in order.
pub(crate) const WAYS: usize = 4;

/// One connection's state: one cache line.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub(crate) struct Slot {
    /// Canonical flow key (both directions in one).
    key: FlowKey,
    /// Time of its last packet (ns, as the packets carry it); 0: the slot is free.
    last_ns: u64,
    /// Payload bytes seen, in both directions, since the flow (re)started here.
    pub(crate) seen: u64,
    /// Payload bytes kept before the flow is cut; `u64::MAX`: never cut.
    pub(crate) limit: u64,
}

const FREE: Slot = Slot {
    key: FlowKey {
        vlan: 0,
        proto: 0,
        family: corecap_wire::IpFamily::V4,
        src: [0; 16],
        dst: [0; 16],
        sport: 0,
        dport: 0,
    },
    last_ns: 0,
    seen: 0,
    limit: u64::MAX,
};

/// Whether the slot a packet found holds its flow already or was just (re)started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// The flow was there and not idle.
    Known,
    /// A new flow (or one that was idle past the timeout, or evicted before): counted from
    /// zero, its class still to be chosen.
    New,
}

/// The flows of one worker; see the module doc.
#[derive(Clone, Debug)]
pub(crate) struct FlowTable {
    slots: Vec<Slot>,
    /// Buckets less one (a power of two less one).
    mask: usize,
    /// A flow with no packet for this long starts again from zero.
    idle_ns: u64,
    /// Flows pushed out of a full bucket before they were idle.
    pub(crate) evictions: u64,
}

impl FlowTable {
    /// A table of at least `flows` slots (rounded up to whole buckets of a power of two),
    /// where a flow idle for `idle_ns` is forgotten.
    pub(crate) fn new(flows: usize, idle_ns: u64) -> FlowTable {
        let buckets = flows.div_ceil(WAYS).max(1).next_power_of_two();
        FlowTable {
            slots: vec![FREE; buckets * WAYS],
            mask: buckets - 1,
            idle_ns: idle_ns.max(1),
            evictions: 0,
        }
    }

    /// Slots in the table.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The slot of the flow `key` (canonical) at time `now_ns`: found, or taken for it.
    #[inline]
    pub(crate) fn slot(&mut self, key: &FlowKey, now_ns: u64) -> (&mut Slot, Found) {
        // A packet stamped 0 would read as a free slot: stamp it 1 instead.
        let now = now_ns.max(1);
        let base = (hash(key) as usize & self.mask) * WAYS;
        let bucket = &mut self.slots[base..base + WAYS];
        let mut pick = 0;
        let mut found = None;
        for (i, s) in bucket.iter().enumerate() {
            if s.last_ns != 0 && s.key == *key {
                found = Some(i);
                break;
            }
            // Prefer a free slot, then the one seen longest ago.
            if s.last_ns < bucket[pick].last_ns {
                pick = i;
            }
        }
        let idle_ns = self.idle_ns;
        let idle = |s: &Slot| now.saturating_sub(s.last_ns) >= idle_ns;
        let (i, how) = match found {
            Some(i) if !idle(&bucket[i]) => (i, Found::Known),
            Some(i) => (i, Found::New),
            None => {
                let s = &bucket[pick];
                if s.last_ns != 0 && !idle(s) {
                    self.evictions += 1;
                }
                (pick, Found::New)
            }
        };
        let s = &mut bucket[i];
        if how == Found::New {
            *s = Slot { key: *key, ..FREE };
        }
        // Times may step back (files, several inputs): a slot keeps its latest.
        s.last_ns = s.last_ns.max(now);
        (s, how)
    }
}

/// A hash of a flow key (FxHash's multiply and rotate over its words): cheap, and good
/// enough to spread keys over buckets; the fanout's hash already spread them over workers.
#[inline]
fn hash(k: &FlowKey) -> u64 {
    const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    let word =
        |b: &[u8; 16], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes of 16"));
    let mut h = 0u64;
    for w in [
        word(&k.src, 0),
        word(&k.src, 8),
        word(&k.dst, 0),
        word(&k.dst, 8),
        u64::from(k.sport)
            | u64::from(k.dport) << 16
            | u64::from(k.proto) << 32
            | u64::from(k.vlan) << 40,
    ] {
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    // The high bits are the well mixed ones.
    h >> 20 ^ h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(port: u16) -> FlowKey {
        FlowKey {
            sport: port,
            dport: 80,
            proto: 6,
            ..FREE.key
        }
    }

    #[test]
    fn test_slot_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Slot>(), 64);
    }

    #[test]
    fn test_known_idle_and_new() {
        let mut t = FlowTable::new(64, 1_000);
        let (s, how) = t.slot(&key(1), 10);
        assert_eq!(how, Found::New);
        s.seen = 500;
        let (s, how) = t.slot(&key(1), 20);
        assert_eq!((how, s.seen), (Found::Known, 500));
        // Idle past the timeout: counted from zero again, not an eviction.
        let (s, how) = t.slot(&key(1), 2_000);
        assert_eq!((how, s.seen), (Found::New, 0));
        assert_eq!(t.evictions, 0);
    }

    #[test]
    fn test_full_bucket_evicts_the_oldest() {
        // One bucket: every flow shares it.
        let mut t = FlowTable::new(1, u64::MAX);
        assert_eq!(t.capacity(), WAYS);
        for p in 0..WAYS as u16 {
            t.slot(&key(p), 100 + u64::from(p)).0.seen = 7;
        }
        assert_eq!(t.evictions, 0);
        // A fifth flow pushes out the one seen longest ago (port 0), which then starts over.
        t.slot(&key(99), 200);
        assert_eq!(t.evictions, 1);
        let (s, how) = t.slot(&key(1), 201);
        assert_eq!((how, s.seen), (Found::Known, 7));
        let (s, how) = t.slot(&key(0), 202);
        assert_eq!((how, s.seen), (Found::New, 0));
        assert_eq!(t.evictions, 2);
    }
}
