//! Postings: for each key of a file (address, port, protocol, VLAN id), the exact file
//! offsets of the packets that carry it, so a query for a rare key reads those packets and
//! nothing else, however the key is spread over the file.
//!
//! They are kept by flow, as Arkime keeps packet positions per session: a *flow* is the
//! packets that carry the same keys (the same addresses, ports, protocols and VLAN ids, in
//! the same order: one direction of a connection). Each packet appends its offset to its
//! flow's list, found with one lookup (a direct-mapped cache of recent flows catches the
//! packets of a burst), and each key lists the flows that carry it, written once per flow.
//! So a packet costs one list append where a list per key cost one per key (five for a
//! TCP packet), and a key's list holds a flow once, not each of its packets. A query for a
//! key merges the lists of its flows.
//!
//! Lists are delta varints (LEB128 of the gap to the list's previous value): one to three
//! bytes a packet, in chunk chains while building so nothing is copied as they grow. A key
//! carried by more than one packet in [`DENSE_SHARE`] of the file (and more than
//! [`DENSE_MIN`]) is *dense*: its flows are not listed, and a query for it reads the
//! regions whose Bloom filter holds it, nearly all of them anyway.
//!
//! In the sidecar the keys are sorted, so a lookup is a binary search; see
//! `docs/index-format.md` for the layout. Version 2 sidecars, with a list of packet offsets
//! per key, are read too.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::key::proto_key;

/// A key is dense when more than one packet in this many carries it.
pub const DENSE_SHARE: u64 = 16;
/// A key of fewer packets than this is never dense.
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
/// No chunk, no list, no flow.
const NONE: u32 = u32::MAX;
/// Slots of the recent flows' cache (16 KiB).
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

/// One list while building: rising values as delta varints in a chain of chunks.
#[derive(Debug)]
struct List {
    last: u64,
    count: u64,
    /// Bytes of the list.
    len: u32,
    head: u32,
    tail: u32,
}

/// Lists of rising values, their bytes in one arena.
#[derive(Default)]
struct Lists {
    lists: Vec<List>,
    chunks: Arena,
}

impl Lists {
    /// A new empty list; its number.
    fn open(&mut self) -> u32 {
        self.lists.push(List {
            last: 0,
            count: 0,
            len: 0,
            head: NONE,
            tail: NONE,
        });
        (self.lists.len() - 1) as u32
    }

    /// Appends `v` (no less than the list's last value) to list `i`, unless it is the last
    /// value already.
    #[inline]
    fn push(&mut self, i: usize, v: u64) {
        let l = &mut self.lists[i];
        if l.count > 0 && l.last == v {
            return;
        }
        let gap = if l.count == 0 { v } else { v - l.last };
        l.last = v;
        l.count += 1;
        let mut b = [0u8; 10];
        let n = varint_into(&mut b, gap);
        let at = l.len as usize % CHUNK;
        if l.tail != NONE && at != 0 && at + n <= CHUNK {
            // The common case: the gap fits in the tail chunk.
            let tail = l.tail as usize;
            l.len += n as u32;
            self.chunks[tail].bytes[at..at + n].copy_from_slice(&b[..n]);
            return;
        }
        self.append(i, &b[..n]);
    }

    /// Appends `bytes` to list `i` byte by byte, taking new chunks as needed.
    fn append(&mut self, i: usize, bytes: &[u8]) {
        for &b in bytes {
            let l = &self.lists[i];
            let at = l.len as usize % CHUNK;
            if l.tail == NONE || at == 0 {
                let c = self.chunks.push();
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

    /// The bytes of list `i`, appended to `out`.
    fn copy(&self, i: usize, out: &mut Vec<u8>) {
        let l = &self.lists[i];
        let (mut c, mut left) = (l.head, l.len as usize);
        while c != NONE && left > 0 {
            let chunk = &self.chunks[c as usize];
            let n = left.min(CHUNK);
            out.extend_from_slice(&chunk.bytes[..n]);
            left -= n;
            c = chunk.next;
        }
    }
}

/// What the builder keeps of a flow besides its list of offsets (list number = flow
/// number).
#[derive(Clone, Copy)]
struct Flow {
    /// Its keys, then its protocols, in [`PostingsBuilder::fkeys`].
    keys_at: u32,
    nkeys: u16,
    nprotos: u16,
    /// The last region it was seen in.
    region: u32,
    /// The next flow whose keys hash the same.
    next: u32,
}

/// Postings being built (see the module doc).
pub(crate) struct PostingsBuilder {
    /// Hash of a flow's keys → its first flow (others with that hash follow `Flow::next`).
    index: KeyMap<u32>,
    /// Recent flows by hash, direct-mapped: the packets of a burst skip the table.
    recent: Box<[(u64, u32); RECENT]>,
    flows: Vec<Flow>,
    /// Each flow's offsets (list `i` is flow `i`'s).
    offsets: Lists,
    /// The keys of every flow, and its protocols (as numbers).
    fkeys: Vec<u64>,
    /// Key → its list of flow numbers (as list numbers of `refs`).
    keymap: KeyMap<u32>,
    refs: Lists,
    packets: u64,
    /// The region being built (see [`PostingsBuilder::next_region`]), and the flows seen
    /// in it.
    region: u32,
    region_flows: Vec<u32>,
    /// The last packet's flow and its keys and protocols (packets of a flow come in
    /// bursts: the next one is most often the same flow, found without hashing).
    last: u32,
    last_keys: Vec<u64>,
    last_protos: Vec<u8>,
}

impl Default for PostingsBuilder {
    fn default() -> Self {
        Self {
            index: KeyMap::default(),
            recent: Box::new([(0, NONE); RECENT]),
            flows: Vec::new(),
            offsets: Lists::default(),
            fkeys: Vec::new(),
            keymap: KeyMap::default(),
            refs: Lists::default(),
            packets: 0,
            region: 0,
            region_flows: Vec::new(),
            last: NONE,
            last_keys: Vec::new(),
            last_protos: Vec::new(),
        }
    }
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

/// Whether two short lists of keys are equal (a loop the compiler keeps inline, where a
/// slice comparison calls `memcmp`).
#[inline]
fn same_values(a: &[u64], b: &[u64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// The hash of a flow's keys and protocols (keys are mixed already; a multiply per value
/// spreads the protocol numbers).
#[inline]
fn flow_hash(keys: &[u64], protos: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = ((keys.len() as u64) << 8 | protos.len() as u64).wrapping_mul(K);
    for &k in keys {
        h = (h.rotate_left(26) ^ k).wrapping_mul(K);
    }
    for &p in protos {
        h = (h.rotate_left(26) ^ u64::from(p)).wrapping_mul(K);
    }
    h ^ (h >> 29)
}

impl PostingsBuilder {
    /// The regions after this one: a flow seen from now on is new to its region again.
    pub(crate) fn next_region(&mut self) {
        self.region = self.region.wrapping_add(1);
        self.region_flows.clear();
    }

    /// The keys and protocols of the flows seen in the region being built, for its sets.
    pub(crate) fn region_keys(&self, keys: &mut Vec<u64>, protos: &mut [u64; 4]) {
        for &f in &self.region_flows {
            let fl = self.flows[f as usize];
            let at = fl.keys_at as usize;
            let nk = usize::from(fl.nkeys);
            keys.extend_from_slice(&self.fkeys[at..at + nk]);
            for &p in &self.fkeys[at + nk..at + nk + usize::from(fl.nprotos)] {
                protos[(p / 64) as usize & 3] |= 1 << (p % 64);
            }
        }
    }

    /// Whether flow `f` is the one of these keys and protocols.
    #[inline]
    fn same(&self, f: u32, keys: &[u64], protos: &[u8]) -> bool {
        let fl = &self.flows[f as usize];
        if usize::from(fl.nkeys) != keys.len() || usize::from(fl.nprotos) != protos.len() {
            return false;
        }
        let at = fl.keys_at as usize;
        let stored = &self.fkeys[at..at + keys.len() + protos.len()];
        same_values(&stored[..keys.len()], keys)
            && stored[keys.len()..]
                .iter()
                .zip(protos)
                .all(|(a, b)| *a == u64::from(*b))
    }

    /// The packet at `offset` (offsets rise from packet to packet) carries `keys` and
    /// `protos`. A packet with neither is in no flow (no key lists it).
    #[inline]
    pub(crate) fn add_packet(&mut self, offset: u64, keys: &[u64], protos: &[u8]) {
        self.packets += 1;
        if keys.is_empty() && protos.is_empty() {
            return;
        }
        let f = if self.last != NONE
            && same_values(&self.last_keys, keys)
            && self.last_protos.len() == protos.len()
            && self.last_protos.iter().zip(protos).all(|(a, b)| a == b)
        {
            self.last
        } else {
            let h = flow_hash(keys, protos);
            let slot = self.recent[(h as usize) & (RECENT - 1)];
            let f = if slot.0 == h && slot.1 != NONE && self.same(slot.1, keys, protos) {
                slot.1
            } else {
                let f = self.find_or_open(h, keys, protos);
                self.recent[(h as usize) & (RECENT - 1)] = (h, f);
                f
            };
            self.last = f;
            self.last_keys.clear();
            self.last_keys.extend_from_slice(keys);
            self.last_protos.clear();
            self.last_protos.extend_from_slice(protos);
            f
        };
        let fl = &mut self.flows[f as usize];
        if fl.region != self.region {
            fl.region = self.region;
            self.region_flows.push(f);
        }
        self.offsets.push(f as usize, offset);
    }

    /// The flow of these keys and protocols, opened if it is new.
    fn find_or_open(&mut self, h: u64, keys: &[u64], protos: &[u8]) -> u32 {
        let head = self.index.get(&h).copied().unwrap_or(NONE);
        let mut f = head;
        while f != NONE {
            if self.same(f, keys, protos) {
                return f;
            }
            f = self.flows[f as usize].next;
        }
        let f = self.offsets.open();
        self.flows.push(Flow {
            keys_at: self.fkeys.len() as u32,
            nkeys: keys.len().min(usize::from(u16::MAX)) as u16,
            nprotos: protos.len().min(usize::from(u16::MAX)) as u16,
            region: self.region.wrapping_sub(1),
            next: head,
        });
        self.fkeys.extend_from_slice(keys);
        self.fkeys.extend(protos.iter().map(|p| u64::from(*p)));
        self.index.insert(h, f);
        for k in keys
            .iter()
            .copied()
            .chain(protos.iter().map(|p| proto_key(*p)))
        {
            let next = self.refs.lists.len() as u32;
            let r = *self.keymap.entry(k).or_insert(next);
            if r == next {
                self.refs.open();
            }
            self.refs.push(r as usize, u64::from(f));
        }
        f
    }

    /// The postings section of the sidecar (see `docs/index-format.md`).
    pub(crate) fn finish(self, out: &mut Vec<u8>) {
        // Flows: packets and list bytes each, then the lists.
        let mut counts = Vec::with_capacity(self.flows.len());
        out.extend_from_slice(&(self.flows.len() as u64).to_le_bytes());
        let mut area = Vec::new();
        for (i, l) in self.offsets.lists.iter().enumerate() {
            // A flow too large to describe makes each of its keys dense.
            let (count, len) = match (u32::try_from(l.count), u32::try_from(l.len)) {
                (Ok(c), Ok(n)) if c != DENSE => {
                    self.offsets.copy(i, &mut area);
                    (c, n)
                }
                _ => (DENSE, 0),
            };
            counts.push(count);
            out.extend_from_slice(&count.to_le_bytes());
            out.extend_from_slice(&len.to_le_bytes());
        }
        pad8(out);
        out.extend_from_slice(&(area.len() as u64).to_le_bytes());
        out.extend_from_slice(&area);
        pad8(out);
        // Keys: sorted, each with its packets (or DENSE) and its list of flows.
        let mut keys: Vec<(u64, u32)> = self.keymap.iter().map(|(k, i)| (*k, *i)).collect();
        keys.sort_unstable_by_key(|k| k.0);
        out.extend_from_slice(&(keys.len() as u64).to_le_bytes());
        area.clear();
        let mut list = Vec::new();
        let limit = self.packets.max(DENSE_MIN * DENSE_SHARE);
        for (key, i) in &keys {
            list.clear();
            self.refs.copy(*i as usize, &mut list);
            let packets = flow_packets(&list, &counts);
            out.extend_from_slice(&key.to_le_bytes());
            match packets {
                Some(n) if n * DENSE_SHARE <= limit && n < u64::from(DENSE) => {
                    out.extend_from_slice(&(n as u32).to_le_bytes());
                    out.extend_from_slice(&(list.len() as u32).to_le_bytes());
                    area.extend_from_slice(&list);
                }
                _ => {
                    out.extend_from_slice(&DENSE.to_le_bytes());
                    out.extend_from_slice(&0u32.to_le_bytes());
                }
            }
        }
        out.extend_from_slice(&(area.len() as u64).to_le_bytes());
        out.extend_from_slice(&area);
        pad8(out);
    }
}

/// Packets of the flows a key's list names (None: a flow too large to describe).
fn flow_packets(list: &[u8], counts: &[u32]) -> Option<u64> {
    let (mut at, mut f, mut n) = (0usize, 0u64, 0u64);
    while at < list.len() {
        f += get_varint(list, &mut at)?;
        let c = *counts.get(usize::try_from(f).ok()?)?;
        if c == DENSE {
            return None;
        }
        n += u64::from(c);
    }
    Some(n)
}

fn pad8(out: &mut Vec<u8>) {
    out.resize(out.len() + (8 - out.len() % 8) % 8, 0);
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
    /// (key, packets or DENSE, list bytes, list start in `area`), sorted by key. A list is
    /// of packet offsets (version 2) or of flow numbers (version 3).
    pub(crate) keys: Vec<(u64, u32, u32, u64)>,
    pub(crate) area: Vec<u8>,
    /// Version 3: each flow's (list start in `lists`, list bytes, packets or DENSE).
    pub(crate) flows: Option<Vec<(u64, u32, u32)>>,
    pub(crate) lists: Vec<u8>,
}

/// Decodes a list of rising values into `out`; None when it does not decode.
fn decode(list: &[u8], out: &mut Vec<u64>) -> Option<()> {
    let (mut at, mut v) = (0usize, 0u64);
    while at < list.len() {
        v = v.checked_add(get_varint(list, &mut at)?)?;
        out.push(v);
    }
    Some(())
}

/// The bytes `len` at `start` of `area`, if it holds them.
fn slice(area: &[u8], start: u64, len: u32) -> Option<&[u8]> {
    let s = usize::try_from(start).ok()?;
    area.get(s..s.checked_add(len as usize)?)
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

    /// Looks `key` up. Lists that do not decode to their counts read as dense (never as
    /// fewer packets than there are).
    pub fn lookup(&self, key: u64) -> Lookup {
        let Ok(i) = self.keys.binary_search_by_key(&key, |k| k.0) else {
            return Lookup::Absent;
        };
        let (_, count, len, start) = self.keys[i];
        if count == DENSE {
            return Lookup::Dense;
        }
        let mut out = Vec::with_capacity(count.min(1 << 20) as usize);
        let whole = slice(&self.area, start, len).and_then(|list| match &self.flows {
            None => decode(list, &mut out),
            Some(flows) => self.merge_flows(flows, list, &mut out),
        });
        if whole.is_none() || out.len() != count as usize {
            return Lookup::Dense;
        }
        Lookup::Offsets(out)
    }

    /// The offsets of the flows that `list` names, in file order, into `out`.
    fn merge_flows(
        &self,
        flows: &[(u64, u32, u32)],
        list: &[u8],
        out: &mut Vec<u64>,
    ) -> Option<()> {
        let mut ids = Vec::new();
        decode(list, &mut ids)?;
        for &id in &ids {
            let &(start, len, packets) = flows.get(usize::try_from(id).ok()?)?;
            if packets == DENSE {
                return None;
            }
            let before = out.len();
            decode(slice(&self.lists, start, len)?, out)?;
            if out.len() - before != packets as usize {
                return None;
            }
        }
        if ids.len() > 1 {
            out.sort_unstable();
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_varint_round_trip() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut b = [0u8; 10];
            let n = varint_into(&mut b, v);
            let mut at = 0;
            assert_eq!(get_varint(&b[..n], &mut at), Some(v));
            assert_eq!(at, n);
        }
        assert_eq!(get_varint(&[0x80, 0x80], &mut 0), None);
    }

    /// Builds postings from (offset, keys, protocols) packets and parses them back.
    fn built(packets: &[(u64, Vec<u64>, Vec<u8>)]) -> Postings {
        let mut p = PostingsBuilder::default();
        for (off, k, pr) in packets {
            p.add_packet(*off, k, pr);
        }
        let mut out = Vec::new();
        p.finish(&mut out);
        crate::format::parse_postings(&out, 3).expect("parse")
    }

    #[test]
    fn test_sparse_and_dense_keys() {
        let mut pk = vec![];
        for i in 0..100_000u64 {
            if i % 1000 == 7 {
                // A rare flow, with a key repeated in the packet (src port == dst port).
                pk.push((i * 100, vec![1, 2, 2], vec![17]));
            } else {
                pk.push((i * 100, vec![1, 3 + i % 5], vec![6]));
            }
        }
        let parsed = built(&pk);
        assert_eq!(parsed.lookup(1), Lookup::Dense);
        assert_eq!(parsed.lookup(proto_key(6)), Lookup::Dense);
        assert_eq!(parsed.lookup(99), Lookup::Absent);
        let Lookup::Offsets(v) = parsed.lookup(2) else {
            panic!("sparse key listed");
        };
        assert_eq!(v.len(), 100);
        assert_eq!((v[0], v[1]), (700, 100_700));
        assert_eq!(parsed.lookup(proto_key(17)), Lookup::Offsets(v));
    }

    #[test]
    fn test_a_key_of_many_flows_merges_them_in_file_order() {
        // Key 9 is in five flows whose packets interleave; every packet is listed once.
        let mut pk = vec![];
        let mut want = vec![];
        for i in 0..20_000u64 {
            let off = 24 + i * 64;
            if i % 37 == 0 {
                pk.push((off, vec![9, 100 + i % 5], vec![]));
                want.push(off);
            } else {
                pk.push((off, vec![5, 6, 7], vec![6]));
            }
        }
        // Keys hashing the same (hand-made equal hash is not possible; two flows whose
        // keys are a permutation of each other differ) stay apart.
        pk.push((24 + 20_000 * 64, vec![7, 6, 5], vec![6]));
        let parsed = built(&pk);
        assert_eq!(parsed.lookup(9), Lookup::Offsets(want));
        let Lookup::Offsets(v) = parsed.lookup(100) else {
            panic!("listed");
        };
        assert_eq!(v.len(), 20_000 / 37 / 5 + 1);
        assert_eq!(parsed.lookup(5), Lookup::Dense);
    }

    #[test]
    fn test_flows_whose_hashes_collide_stay_apart() {
        let mut p = PostingsBuilder::default();
        // Two flows forced onto one hash chain: the lookup compares their keys.
        p.add_packet(10, &[1, 2], &[6]);
        let h = flow_hash(&[3, 4], &[17]);
        let f0 = *p.index.values().next().unwrap();
        p.index.insert(h, f0);
        p.add_packet(20, &[3, 4], &[17]);
        p.add_packet(30, &[1, 2], &[6]);
        p.add_packet(40, &[3, 4], &[17]);
        let mut out = Vec::new();
        p.finish(&mut out);
        let parsed = crate::format::parse_postings(&out, 3).expect("parse");
        assert_eq!(parsed.lookup(1), Lookup::Offsets(vec![10, 30]));
        assert_eq!(parsed.lookup(3), Lookup::Offsets(vec![20, 40]));
        assert_eq!(parsed.lookup(proto_key(17)), Lookup::Offsets(vec![20, 40]));
    }
}
