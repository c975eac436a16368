//! One single-producer single-consumer byte ring per capture worker, carrying
//! the same records as [`crate::mpsc`]: the alternative to a shared queue when
//! each capture core gets its own ring into a stage.
//!
//! A thin layer over [`rtrb`]: a record is written with one
//! `write_chunk_uninit` and made visible with one commit, so the consumer
//! never sees half a record; a batch is one chunk and one commit. The consumer
//! reads every committed byte as one chunk per [`Consumer::drain`]; a record
//! that wraps around the end of the ring is copied into a scratch buffer, all
//! others are read in place.
//!
//! Record layout (bytes, native byte order, no alignment):
//!
//! ```text
//! 0        4              28             28 + caplen
//! | caplen | SlotHeader   | packet bytes |
//! ```

use std::fmt;
use std::mem::MaybeUninit;
use std::sync::Arc;

use rtrb::{CopyToUninit, RingBuffer};

use crate::counter::PaddedCounter;
use crate::slot::SlotHeader;
use crate::{Full, QueueStats};

/// Bytes in front of the packet bytes of a record: `caplen`, [`SlotHeader`].
pub const RECORD_OVERHEAD: usize = 4 + SlotHeader::LEN;

/// Size in bytes of the record for `caplen` packet bytes, if `caplen` fits the length field.
fn record_len(caplen: usize) -> Option<usize> {
    u32::try_from(caplen).ok().map(|_| RECORD_OVERHEAD + caplen)
}

fn record_head(hdr: &SlotHeader, caplen: usize) -> [u8; RECORD_OVERHEAD] {
    let mut head = [0u8; RECORD_OVERHEAD];
    // The cast cannot truncate: record_len accepted caplen.
    head[0..4].copy_from_slice(&(caplen as u32).to_ne_bytes());
    head[4..].copy_from_slice(&hdr.to_bytes());
    head
}

/// Copies `src` to byte `pos` of the two-part chunk `a` ++ `b`; the range must lie within it.
fn copy_in(a: &mut [MaybeUninit<u8>], b: &mut [MaybeUninit<u8>], pos: usize, src: &[u8]) {
    let split = a.len().saturating_sub(pos).min(src.len());
    let (to_a, to_b) = src.split_at(split);
    if !to_a.is_empty() {
        to_a.copy_to_uninit(&mut a[pos..pos + split]);
    }
    let bpos = (pos + split).saturating_sub(a.len());
    to_b.copy_to_uninit(&mut b[bpos..bpos + to_b.len()]);
}

/// Copies bytes `pos .. pos + dst.len()` of the two-part chunk `a` ++ `b` into `dst`.
fn copy_out(a: &[u8], b: &[u8], pos: usize, dst: &mut [u8]) {
    let split = a.len().saturating_sub(pos).min(dst.len());
    let (to_a, to_b) = dst.split_at_mut(split);
    to_a.copy_from_slice(&a[pos.min(a.len())..pos.min(a.len()) + split]);
    let bpos = (pos + split).saturating_sub(a.len());
    to_b.copy_from_slice(&b[bpos..bpos + to_b.len()]);
}

/// Walks a batch: returns (items, records that fit in `room` bytes as a
/// prefix, their bytes).
fn size_prefix<'a>(
    items: impl Iterator<Item = (SlotHeader, &'a [u8])>,
    room: usize,
) -> (u64, usize, usize) {
    let (mut offered, mut take, mut total) = (0u64, 0usize, 0usize);
    let mut fits = true;
    for (_, data) in items {
        offered += 1;
        match record_len(data.len()) {
            Some(n) if fits && n <= room - total => {
                total += n;
                take += 1;
            }
            _ => fits = false,
        }
    }
    (offered, take, total)
}

/// Counters of one ring; the producer adds, the consumer reads.
#[derive(Debug, Default)]
struct Counts {
    pushed: PaddedCounter,
    full_drops: PaddedCounter,
}

/// Creates a ring of `capacity_bytes` bytes. A record takes
/// [`RECORD_OVERHEAD`] plus its packet bytes.
pub fn ring(capacity_bytes: usize) -> (Producer, Consumer) {
    let (p, c) = RingBuffer::new(capacity_bytes);
    let counts = Arc::new(Counts::default());
    (
        Producer {
            ring: p,
            counts: counts.clone(),
        },
        Consumer {
            ring: c,
            counts,
            scratch: Vec::new(),
        },
    )
}

/// The writing end, owned by one capture worker.
pub struct Producer {
    ring: rtrb::Producer<u8>,
    counts: Arc<Counts>,
}

impl Producer {
    /// Copies one packet and its header into the ring.
    ///
    /// # Errors
    /// [`Full`] if the ring has no room; the record is counted in
    /// [`QueueStats::full_drops`] and nothing is written.
    pub fn push(&mut self, hdr: &SlotHeader, data: &[u8]) -> Result<(), Full> {
        let Some(n) = record_len(data.len()) else {
            return Err(self.full(1));
        };
        let Ok(mut chunk) = self.ring.write_chunk_uninit(n) else {
            return Err(self.full(1));
        };
        let (a, b) = chunk.as_mut_slices();
        copy_in(a, b, 0, &record_head(hdr, data.len()));
        copy_in(a, b, RECORD_OVERHEAD, data);
        // SAFETY: the two copies above wrote all n bytes of the chunk.
        unsafe { chunk.commit_all() };
        self.counts.pushed.add(1);
        Ok(())
    }

    /// Copies a batch of packets into the ring with one chunk and one commit.
    /// Returns how many were written, a prefix of `items`; the rest are counted
    /// in [`QueueStats::full_drops`].
    ///
    /// `items` is walked twice (it is cloned to size the chunk first).
    pub fn push_batch<'a, I>(&mut self, items: I) -> usize
    where
        I: IntoIterator<Item = (SlotHeader, &'a [u8])>,
        I::IntoIter: Clone,
    {
        let items = items.into_iter();
        // Size the whole batch, then ask for it; rtrb answers from its cached
        // view of the consumer and only reloads the consumer's index when short.
        let (mut offered, mut take, mut total) = size_prefix(items.clone(), usize::MAX);
        let chunk = match self.ring.write_chunk_uninit(total) {
            Ok(chunk) => Ok(chunk),
            Err(rtrb::chunks::ChunkError::TooFewSlots(room)) => {
                (offered, take, total) = size_prefix(items.clone(), room);
                self.ring.write_chunk_uninit(total)
            }
        };
        let mut pushed = 0u64;
        if let Ok(mut chunk) = chunk {
            let (a, b) = chunk.as_mut_slices();
            let mut pos = 0;
            for (hdr, data) in items.take(take) {
                match record_len(data.len()) {
                    Some(n) if pos + n <= total => {
                        copy_in(a, b, pos, &record_head(&hdr, data.len()));
                        copy_in(a, b, pos + RECORD_OVERHEAD, data);
                        pos += n;
                        pushed += 1;
                    }
                    _ => break,
                }
            }
            // SAFETY: the loop wrote bytes 0..pos of the chunk, whole records.
            unsafe { chunk.commit(pos) };
        }
        self.counts.pushed.add(pushed);
        if offered > pushed {
            self.full(offered - pushed);
        }
        pushed as usize
    }

    /// Bytes in the ring.
    pub fn capacity(&self) -> usize {
        self.ring.buffer().capacity()
    }

    fn full(&self, n: u64) -> Full {
        self.counts.full_drops.add(n);
        Full
    }
}

impl fmt::Debug for Producer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}

/// The reading end, owned by the stage that consumes the ring.
pub struct Consumer {
    ring: rtrb::Consumer<u8>,
    counts: Arc<Counts>,
    /// Holds a record that wraps around the end of the ring.
    scratch: Vec<u8>,
}

impl Consumer {
    /// Hands every committed record to `f`, in push order, and frees its room;
    /// returns how many. Never waits.
    pub fn drain(&mut self, mut f: impl FnMut(&SlotHeader, &[u8])) -> usize {
        let n = self.ring.slots();
        let Ok(chunk) = self.ring.read_chunk(n) else {
            return 0;
        };
        let (a, b) = chunk.as_slices();
        let total = a.len() + b.len();
        let (mut pos, mut count) = (0, 0);
        while pos + RECORD_OVERHEAD <= total {
            let mut head = [0u8; RECORD_OVERHEAD];
            copy_out(a, b, pos, &mut head);
            let caplen = u32::from_ne_bytes([head[0], head[1], head[2], head[3]]) as usize;
            let start = pos + RECORD_OVERHEAD;
            if caplen > total - start {
                // Producers commit whole records, so this cannot happen; stop before it.
                break;
            }
            let mut h = [0u8; SlotHeader::LEN];
            h.copy_from_slice(&head[4..]);
            let end = start + caplen;
            let data: &[u8] = if end <= a.len() {
                &a[start..end]
            } else if start >= a.len() {
                &b[start - a.len()..end - a.len()]
            } else {
                self.scratch.clear();
                self.scratch.extend_from_slice(&a[start..]);
                self.scratch.extend_from_slice(&b[..end - a.len()]);
                &self.scratch
            };
            f(&SlotHeader::from_bytes(&h), data);
            count += 1;
            pos = end;
        }
        chunk.commit(pos);
        count
    }

    /// Totals of the ring.
    pub fn stats(&self) -> QueueStats {
        QueueStats {
            pushed: self.counts.pushed.get(),
            full_drops: self.counts.full_drops.get(),
        }
    }

    /// True once the producer is dropped; records it committed can still be drained.
    pub fn is_abandoned(&self) -> bool {
        self.ring.is_abandoned()
    }
}

impl fmt::Debug for Consumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("capacity", &self.ring.buffer().capacity())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn hdr(i: u64) -> SlotHeader {
        SlotHeader {
            ts_ns: i,
            queue: 1,
            hash: 2,
            orig_len: 3,
            vlan_tci: 0,
            flags: 0,
        }
    }

    fn collect(c: &mut Consumer) -> Vec<(u64, Vec<u8>)> {
        let mut v = Vec::new();
        c.drain(|h, d| v.push((h.ts_ns, d.to_vec())));
        v
    }

    #[test]
    fn test_push_drain() {
        let (mut p, mut c) = ring(256);
        p.push(&hdr(1), b"hello").unwrap();
        p.push(&hdr(2), &[]).unwrap();
        assert_eq!(collect(&mut c), vec![(1, b"hello".to_vec()), (2, vec![])]);
        assert_eq!(
            c.stats(),
            QueueStats {
                pushed: 2,
                full_drops: 0
            }
        );
    }

    #[test]
    fn test_full_counted() {
        let (mut p, c) = ring(RECORD_OVERHEAD + 4);
        p.push(&hdr(1), &[1; 4]).unwrap();
        assert_eq!(p.push(&hdr(2), &[]), Err(Full));
        assert_eq!(
            c.stats(),
            QueueStats {
                pushed: 1,
                full_drops: 1
            }
        );
    }

    #[test]
    fn test_wrapped_record() {
        // Ring of 100: after 60 bytes pushed and read, a 60-byte record wraps.
        let (mut p, mut c) = ring(100);
        p.push(&hdr(1), &[1; 32]).unwrap();
        assert_eq!(collect(&mut c).len(), 1);
        let data: Vec<u8> = (0..32).collect();
        p.push(&hdr(2), &data).unwrap();
        assert_eq!(collect(&mut c), vec![(2, data.clone())]);
        // Now at 20: a 78-byte record ends at 98, so the next header wraps.
        let long = [9u8; 50];
        p.push(&hdr(3), &long).unwrap();
        assert_eq!(collect(&mut c), vec![(3, long.to_vec())]);
        p.push(&hdr(4), &data[..10]).unwrap();
        assert_eq!(collect(&mut c), vec![(4, data[..10].to_vec())]);
    }

    #[test]
    fn test_batch() {
        let (mut p, mut c) = ring(3 * (RECORD_OVERHEAD + 8));
        let d = [7u8; 8];
        assert_eq!(p.push_batch((0..5).map(|i| (hdr(i), &d[..]))), 3);
        assert_eq!(
            c.stats(),
            QueueStats {
                pushed: 3,
                full_drops: 2
            }
        );
        let got = collect(&mut c);
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert!(!c.is_abandoned());
        drop(p);
        assert!(c.is_abandoned());
    }
}
