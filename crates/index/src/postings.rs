//! Postings: for each key of a file (address, port, protocol, VLAN id), the exact file
//! offsets of the packets that carry it, so a query for a rare key reads those packets and
//! nothing else, however the key is spread over the file.
//!
//! The builder appends each packet's offset to its keys' lists as delta varints (LEB128 of
//! the gap to the key's previous packet), so a list costs one to three bytes a packet. A key
//! carried by more than one packet in [`DENSE_SHARE`] of the file is *dense*: its list is
//! dropped (a query for it reads the regions whose Bloom filter holds it, nearly all of them
//! anyway), which keeps the index small where postings would buy nothing. The rule runs while
//! building too, past [`DENSE_MIN`] packets, so a key of every packet never holds memory.
//!
//! In the sidecar the keys are sorted, so a lookup is a binary search; see
//! `docs/index-format.md` for the layout.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::key::{proto_key, PacketKeys};

/// A key is dense when more than one packet in this many carries it.
pub const DENSE_SHARE: u64 = 16;
/// Lists shorter than this are never dropped while building.
pub const DENSE_MIN: u64 = 4096;
/// Marks a dense key's packet count in the sidecar.
pub(crate) const DENSE: u32 = u32::MAX;

/// Keys are already mixed 64-bit hashes: hash them as they are.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_u64(&mut self, k: u64) {
        self.0 = k;
    }
}

type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;

/// Bytes of list data in one chunk of the arena.
const CHUNK: usize = 28;
/// No chunk, no list.
const NONE: u32 = u32::MAX;
/// Slots of the recent keys' cache (16 KiB).
const RECENT: usize = 1024;

/// A piece of a list's bytes in the arena, and the next piece.
#[derive(Clone, Copy)]
struct Chunk {
    bytes: [u8; CHUNK],
    next: u32,
}

/// Chunks in slabs of [`SLAB`]: the arena grows without moving what it holds (a `Vec` of
/// chunks doubled by copying tens of MiB into fresh pages).
#[derive(Default)]
struct Arena {
    slabs: Vec<Box<[Chunk]>>,
    len: u32,
}

/// Chunks a slab (128 KiB).
const SLAB: usize = 4096;

impl Arena {
    /// A new chunk, empty; its number.
    fn push(&mut self) -> u32 {
        let i = self.len as usize;
        if i / SLAB == self.slabs.len() {
            let empty = Chunk {
                bytes: [0; CHUNK],
                next: NONE,
            };
            self.slabs.push(vec![empty; SLAB].into_boxed_slice());
        }
        self.len += 1;
        i as u32
    }
}

impl std::ops::Index<usize> for Arena {
    type Output = Chunk;
    fn index(&self, i: usize) -> &Chunk {
        &self.slabs[i / SLAB][i % SLAB]
    }
}

impl std::ops::IndexMut<usize> for Arena {
    fn index_mut(&mut self, i: usize) -> &mut Chunk {
        &mut self.slabs[i / SLAB][i % SLAB]
    }
}

/// One key's list while building: its bytes are a chain of chunks in the builder's arena,
/// so a list grows without ever copying what it holds (a `Vec` per key doubled and
/// copied, and its table entries were large enough to miss the cache).
#[derive(Debug)]
struct List {
    last: u64,
    count: u64,
    /// Bytes of the list.
    len: u32,
    head: u32,
    tail: u32,
    /// The last region in which the key was seen (its region's Bloom set has it).
    region: u32,
    dense: bool,
}

/// Postings being built: a table from key to list number, the lists, and the arena of
/// their chunks (with the chunks of lists that turned dense on a free list).
pub(crate) struct PostingsBuilder {
    index: KeyMap<u32>,
    /// The lists of recently seen keys, direct-mapped: a packet's protocol, its ports and
    /// a busy host repeat from packet to packet and skip the table (whose probes miss the
    /// cache once a file has tens of thousands of keys).
    recent: Box<[(u64, u32); RECENT]>,
    lists: Vec<List>,
    chunks: Arena,
    free: u32,
    packets: u64,
    /// The region being built (see [`PostingsBuilder::next_region`]).
    region: u32,
    /// The last packet's keys and protocols, and their lists (keys' first). At the start
    /// they are no keys and no lists, which is true of a packet without keys too.
    last: PacketKeys,
    last_lists: Vec<u32>,
}

impl Default for PostingsBuilder {
    fn default() -> Self {
        Self {
            index: KeyMap::default(),
            recent: Box::new([(0, NONE); RECENT]),
            lists: Vec::new(),
            chunks: Arena::default(),
            free: NONE,
            packets: 0,
            region: 0,
            last: PacketKeys::default(),
            last_lists: Vec::new(),
        }
    }
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint at `*at`; None when it runs off the end or past 64 bits.
pub(crate) fn get_varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

impl PostingsBuilder {
    /// The regions after this one: a key seen from now on is new to its region again.
    pub(crate) fn next_region(&mut self) {
        self.region = self.region.wrapping_add(1);
    }

    /// The list of `key`, opened if it is new.
    #[inline]
    fn list_of(&mut self, key: u64) -> usize {
        let slot = &self.recent[(key as usize) & (RECENT - 1)];
        if slot.0 == key && slot.1 != NONE {
            return slot.1 as usize;
        }
        let next = self.lists.len() as u32;
        let i = *self.index.entry(key).or_insert(next);
        self.recent[(key as usize) & (RECENT - 1)] = (key, i);
        if i == next {
            self.lists.push(List {
                last: 0,
                count: 0,
                len: 0,
                head: NONE,
                tail: NONE,
                region: self.region.wrapping_sub(1),
                dense: false,
            });
        }
        i as usize
    }

    /// The packet at `offset` (offsets rise from packet to packet) carries `pk`'s keys and
    /// protocols: its offset goes into each one's list. The keys new to the region go into
    /// `region_keys` (its Bloom set): each list remembers the last region that saw it, so
    /// no table of its own is needed for that. The packets of a burst carry the keys of
    /// the packet before them: their lists are those of the last packet, found without a
    /// lookup. `pk` is left with some other packet's keys (the caller clears it).
    #[inline]
    pub(crate) fn add_packet(
        &mut self,
        offset: u64,
        pk: &mut PacketKeys,
        region_keys: &mut Vec<u64>,
    ) {
        self.packets += 1;
        if *pk != self.last {
            self.last_lists.clear();
            for &k in &pk.keys {
                let i = self.list_of(k);
                self.last_lists.push(i as u32);
            }
            for &p in &pk.protos {
                let i = self.list_of(proto_key(p));
                self.last_lists.push(i as u32);
            }
            std::mem::swap(&mut self.last, pk);
        }
        for j in 0..self.last_lists.len() {
            let i = self.last_lists[j] as usize;
            // The protocols' keys are not in the Bloom set (the region has a protocol map).
            if self.push(i, offset) && j < self.last.keys.len() {
                region_keys.push(self.last.keys[j]);
            }
        }
    }

    /// Appends `offset` to list `i` (once per packet). Returns whether the list is new to
    /// the region.
    #[inline]
    fn push(&mut self, i: usize, offset: u64) -> bool {
        let region = self.region;
        let l = &mut self.lists[i];
        let new = l.region != region;
        l.region = region;
        if l.dense || (l.count > 0 && l.last == offset) {
            return new;
        }
        let gap = if l.count == 0 {
            offset
        } else {
            offset - l.last
        };
        l.last = offset;
        l.count += 1;
        let mut v = [0u8; 10];
        let n = varint_into(&mut v, gap);
        let at = l.len as usize % CHUNK;
        if l.tail != NONE && at != 0 && at + n <= CHUNK {
            // The common case: the gap fits in the tail chunk.
            let tail = l.tail as usize;
            l.len += n as u32;
            self.chunks[tail].bytes[at..at + n].copy_from_slice(&v[..n]);
        } else {
            self.append(i, &v[..n]);
        }
        let packets = self.packets;
        let l = &mut self.lists[i];
        if l.count > DENSE_MIN && l.count * DENSE_SHARE > packets {
            l.dense = true;
            let (head, tail) = (l.head, l.tail);
            (l.head, l.tail, l.len) = (NONE, NONE, 0);
            if head != NONE {
                self.chunks[tail as usize].next = self.free;
                self.free = head;
            }
        }
        new
    }

    /// Appends `bytes` to list `i`, taking chunks from the free list or the arena.
    #[inline]
    fn append(&mut self, i: usize, bytes: &[u8]) {
        for &b in bytes {
            let l = &self.lists[i];
            let at = l.len as usize % CHUNK;
            if l.tail == NONE || at == 0 {
                let c = if self.free != NONE {
                    let c = self.free;
                    self.free = self.chunks[c as usize].next;
                    self.chunks[c as usize].next = NONE;
                    c
                } else {
                    self.chunks.push()
                };
                let l = &mut self.lists[i];
                if l.tail == NONE {
                    l.head = c;
                } else {
                    self.chunks[l.tail as usize].next = c;
                }
                l.tail = c;
            }
            let l = &mut self.lists[i];
            self.chunks[l.tail as usize].bytes[at] = b;
            l.len += 1;
        }
    }

    /// The bytes of list `l`, appended to `out`.
    fn copy_list(&self, l: &List, out: &mut Vec<u8>) {
        let (mut c, mut left) = (l.head, l.len as usize);
        while c != NONE && left > 0 {
            let chunk = &self.chunks[c as usize];
            let n = left.min(CHUNK);
            out.extend_from_slice(&chunk.bytes[..n]);
            left -= n;
            c = chunk.next;
        }
    }

    /// The postings section of the sidecar (see `docs/index-format.md`).
    pub(crate) fn finish(self, out: &mut Vec<u8>) {
        let packets = self.packets;
        let mut keys: Vec<(u64, u32)> = self.index.iter().map(|(k, i)| (*k, *i)).collect();
        keys.sort_unstable_by_key(|k| k.0);
        out.extend_from_slice(&(keys.len() as u64).to_le_bytes());
        let mut area = Vec::new();
        for (key, i) in &keys {
            let l = &self.lists[*i as usize];
            let dense = l.dense || l.count * DENSE_SHARE > packets.max(DENSE_MIN * DENSE_SHARE);
            out.extend_from_slice(&key.to_le_bytes());
            if dense {
                out.extend_from_slice(&DENSE.to_le_bytes());
            } else {
                out.extend_from_slice(&(l.count.min(u64::from(DENSE - 1)) as u32).to_le_bytes());
                put_varint(&mut area, u64::from(l.len));
                self.copy_list(l, &mut area);
            }
        }
        out.resize(out.len() + (8 - out.len() % 8) % 8, 0);
        out.extend_from_slice(&(area.len() as u64).to_le_bytes());
        out.extend_from_slice(&area);
        out.resize(out.len() + (8 - area.len() % 8) % 8, 0);
    }
}

/// Writes `v` as a varint into `buf`; returns its length.
#[inline]
fn varint_into(buf: &mut [u8; 10], mut v: u64) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        buf[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    buf[n] = v as u8;
    n + 1
}

/// What the postings say of one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// No packet of the file carries it.
    Absent,
    /// Too many packets carry it to list them: read the regions that may hold it.
    Dense,
    /// The offsets of the packets that carry it, in file order.
    Offsets(Vec<u64>),
}

/// The postings of a parsed sidecar.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Postings {
    /// (key, packets or DENSE, list bytes, list start in `area`), sorted by key.
    pub(crate) keys: Vec<(u64, u32, u32, u64)>,
    pub(crate) area: Vec<u8>,
}

impl Postings {
    /// Keys listed.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no key is listed.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The keys listed, in order.
    pub fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.keys.iter().map(|k| k.0)
    }

    /// Looks `key` up. A list that does not decode to its count reads as dense (never as
    /// fewer packets than there are).
    pub fn lookup(&self, key: u64) -> Lookup {
        let Ok(i) = self.keys.binary_search_by_key(&key, |k| k.0) else {
            return Lookup::Absent;
        };
        let (_, count, len, start) = self.keys[i];
        if count == DENSE {
            return Lookup::Dense;
        }
        let Some(list) = usize::try_from(start)
            .ok()
            .and_then(|s| self.area.get(s..s.checked_add(len as usize)?))
        else {
            return Lookup::Dense;
        };
        // Each offset takes at least a byte: a count larger than its list cannot decode,
        // and must not size an allocation (the count is the file's word, the list is there).
        if count as usize > list.len() {
            return Lookup::Dense;
        }
        let mut out = Vec::with_capacity(count as usize);
        let (mut at, mut off) = (0usize, 0u64);
        while at < list.len() {
            let Some(gap) = get_varint(list, &mut at) else {
                return Lookup::Dense;
            };
            off = match off.checked_add(gap) {
                Some(o) => o,
                None => return Lookup::Dense,
            };
            out.push(off);
        }
        if out.len() != count as usize {
            return Lookup::Dense;
        }
        Lookup::Offsets(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One packet of these keys and protocols into `p`.
    fn add(p: &mut PostingsBuilder, off: u64, keys: &[u64], protos: &[u8], region: &mut Vec<u64>) {
        let mut pk = PacketKeys {
            keys: keys.to_vec(),
            protos: protos.to_vec(),
        };
        p.add_packet(off, &mut pk, region);
    }

    #[test]
    fn test_varint_round_trip() {
        let mut b = Vec::new();
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            b.clear();
            put_varint(&mut b, v);
            let mut at = 0;
            assert_eq!(get_varint(&b, &mut at), Some(v));
            assert_eq!(at, b.len());
        }
        assert_eq!(get_varint(&[0x80, 0x80], &mut 0), None);
    }

    #[test]
    fn test_sparse_and_dense_keys() {
        let mut p = PostingsBuilder::default();
        let mut region = vec![];
        for i in 0..100_000u64 {
            if i % 1000 == 7 {
                // A key twice in one packet (source port = destination port).
                add(&mut p, i * 100, &[1, 2, 2], &[17], &mut region);
            } else {
                add(&mut p, i * 100, &[1, 3 + i % 5], &[6], &mut region);
            }
        }
        region.sort_unstable();
        region.dedup();
        assert_eq!(
            region,
            [1, 2, 3, 4, 5, 6, 7],
            "each key once in the one region"
        );
        let mut out = Vec::new();
        p.finish(&mut out);
        let parsed = crate::format::parse_postings(&out).expect("parse");
        assert_eq!(parsed.lookup(1), Lookup::Dense);
        assert_eq!(parsed.lookup(proto_key(6)), Lookup::Dense);
        assert_eq!(parsed.lookup(99), Lookup::Absent);
        let Lookup::Offsets(v) = parsed.lookup(2) else {
            panic!("sparse key listed");
        };
        assert_eq!(v.len(), 100);
        assert_eq!(v[0], 700);
        assert_eq!(v[1], 100_700);
        assert_eq!(parsed.lookup(proto_key(17)), Lookup::Offsets(v));
        // Keys 3 to 7 share the other packets (a fifth each: more than one in 16, dense).
        assert_eq!(parsed.lookup(3), Lookup::Dense);
    }

    #[test]
    fn test_a_count_larger_than_its_list_allocates_nothing_and_reads_dense() {
        // A damaged count (4 G packets for a 1-byte list) is the file's word, not a size.
        let p = Postings {
            keys: vec![(7, DENSE - 1, 1, 0)],
            area: vec![5],
        };
        assert_eq!(p.lookup(7), Lookup::Dense);
    }

    #[test]
    fn test_a_burst_and_a_new_region_list_every_packet() {
        // Packets of one flow in a row take the last packet's lists; a region that begins
        // mid-burst still gets the burst's keys in its set.
        let mut p = PostingsBuilder::default();
        let (mut r0, mut r1) = (vec![], vec![]);
        for i in 0..10u64 {
            add(&mut p, i * 60, &[11, 12], &[17], &mut r0);
        }
        p.next_region();
        for i in 10..20u64 {
            add(&mut p, i * 60, &[11, 12], &[17], &mut r1);
        }
        add(&mut p, 20 * 60, &[13, 12], &[17], &mut r1);
        assert_eq!((r0, r1), (vec![11, 12], vec![11, 12, 13]));
        let mut out = Vec::new();
        p.finish(&mut out);
        let parsed = crate::format::parse_postings(&out).expect("parse");
        let all: Vec<u64> = (0..21).map(|i| i * 60).collect();
        assert_eq!(parsed.lookup(12), Lookup::Offsets(all.clone()));
        assert_eq!(parsed.lookup(11), Lookup::Offsets(all[..20].to_vec()));
        assert_eq!(parsed.lookup(13), Lookup::Offsets(vec![1200]));
    }
}
