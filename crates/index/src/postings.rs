//! Postings: for each key of a file (address, port, protocol, VLAN id), the exact file
//! offsets of the packets that carry it, so a query for a rare key reads those packets and
//! nothing else, however the key is spread over the file.
//!
//! The builder appends each run of packets (packets in a row that carry the same keys) to
//! its keys' lists as a span in delta varints (LEB128 of the gap to the key's previous span,
//! then the run's length and packets), so a list costs a few bytes a run; see
//! `docs/index-format.md`. A key
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

/// Bytes of list data in one chunk of the arena (a chunk is a cache line).
const CHUNK: usize = 60;
/// No chunk, no list.
const NONE: u32 = u32::MAX;
/// Bytes a span is copied in when its tail chunk has room for them (an encoded span is
/// 1 to 25 bytes, and nearly always at most this).
const FAST: usize = 16;
/// `run_end` when there is no run: no block starts there.
const NO_RUN: u64 = u64::MAX;
/// Slots of the recent keys' cache (16 KiB).
const RECENT: usize = 1024;

/// A piece of a list's bytes in the arena, and the next piece.
#[derive(Clone, Copy)]
#[repr(align(64))]
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
const SLAB: usize = 2048;

const _: () = assert!(std::mem::size_of::<Chunk>() == 64);

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
/// copied, and its table entries were large enough to miss the cache). Its last span is
/// kept open, not yet encoded, so a span that follows it in the file extends it.
#[derive(Debug)]
#[repr(align(64))]
struct List {
    /// The key (what the region's Bloom set gets when the list is new to a region).
    key: u64,
    /// Start of the last span encoded (the base of the next gap).
    last: u64,
    /// The open span: the packets that start in `open_start..open_end`, `open_n` of them
    /// (0: none open).
    open_start: u64,
    open_end: u64,
    open_n: u32,
    /// Packets listed (the dense rule counts packets); saturates.
    count: u32,
    /// Spans encoded; saturates.
    spans: u32,
    /// Bytes of the list.
    len: u32,
    head: u32,
    tail: u32,
    /// The last region in which the key was seen (its region's Bloom set has it).
    region: u32,
    dense: bool,
    /// A protocol's list (protocols go into the region's protocol set, not its Bloom set).
    proto: bool,
}

// A list is one cache line: a packet of a new flow touches one line per key.
const _: () = assert!(std::mem::size_of::<List>() == 64);

/// Sets of the flow cache (a power of two), of two flows each (160 KiB): two flows whose
/// tuples share a set are both kept. Direct-mapped (1,024 slots), two thirds of 1,000
/// interleaved flows shared a slot with another and missed at every packet.
const FLOW_SETS: usize = 2048;
/// Lists a cached flow has at most: its two addresses, two ports and protocol.
const FLOW_LISTS: usize = 5;

/// A flow seen lately: its [`crate::key::flow_tuple`], and the lists of the keys and the
/// protocol its packets carry (the keys of such a packet follow from its tuple), so its
/// next burst finds them without parsing the packet or looking a key up.
#[derive(Clone, Copy)]
struct Flow {
    /// The tuple as two words (a `u128` would align the entry to 16 bytes and pad it).
    tuple: [u64; 2],
    lists: [u32; FLOW_LISTS],
    n: u8,
    proto: u8,
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
    /// Flows seen lately, by tuple: set `s` is entries `2s` (the newer) and `2s + 1`.
    flows: Box<[Flow; 2 * FLOW_SETS]>,
    /// The last packet's keys and protocols, and their lists (keys' first). At the start
    /// they are no keys and no lists, which is true of a packet without keys too. When
    /// the last packet's lists came from the flow cache, `last` is not its keys and
    /// `last_known` is false.
    last: PacketKeys,
    last_known: bool,
    last_lists: Vec<u32>,
    /// The run: packets in a row, with no other block between them, that carry the keys of
    /// `last`, starting in `run_start..run_end`; `run_n` of them (0: no run, and `run_end` is
    /// [`NO_RUN`]). It goes into the lists when a packet with other keys comes, or the
    /// region ends.
    run_start: u64,
    run_end: u64,
    run_n: u64,
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
            flows: Box::new(
                [Flow {
                    tuple: [0; 2],
                    lists: [NONE; FLOW_LISTS],
                    n: 0,
                    proto: 0,
                }; 2 * FLOW_SETS],
            ),
            last: PacketKeys::default(),
            last_known: true,
            last_lists: Vec::new(),
            run_start: 0,
            run_end: NO_RUN,
            run_n: 0,
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

impl PostingsBuilder {
    /// The regions after this one: a key seen from now on is new to its region again. The
    /// run goes into the lists first, its keys new to the region into `region_keys`.
    pub(crate) fn next_region(&mut self, region_keys: &mut Vec<u64>) {
        self.end_run(region_keys);
        self.region = self.region.wrapping_add(1);
    }

    /// The list of `key` (`proto`: a protocol's), opened if it is new.
    #[inline(always)]
    fn list_of(&mut self, key: u64, proto: bool) -> usize {
        let slot = &self.recent[(key as usize) & (RECENT - 1)];
        if slot.0 == key && slot.1 != NONE {
            return slot.1 as usize;
        }
        let next = self.lists.len() as u32;
        let i = *self.index.entry(key).or_insert(next);
        self.recent[(key as usize) & (RECENT - 1)] = (key, i);
        if i == next {
            self.lists.push(List {
                key,
                proto,
                last: 0,
                count: 0,
                spans: 0,
                open_start: 0,
                open_end: 0,
                open_n: 0,
                len: 0,
                head: NONE,
                tail: NONE,
                region: self.region.wrapping_sub(1),
                dense: false,
            });
        }
        i as usize
    }

    /// The packet whose block is `start..end` carries the keys of the packet
    /// before it: when it follows that packet with no block between, it extends the run
    /// and true is returned; else nothing changes ([`PostingsBuilder::add_packet`] then
    /// takes it). What the next packet of a burst costs.
    #[inline(always)]
    pub(crate) fn extend_run(&mut self, start: u64, end: u64) -> bool {
        // With no run, `run_end` is [`NO_RUN`], which no block starts at.
        if start != self.run_end {
            return false;
        }
        self.packets += 1;
        self.run_end = end;
        self.run_n += 1;
        true
    }

    /// The packet whose block is `offset..offset + len` does not extend the run: the run
    /// goes into its keys' lists (its keys new to the region into `region_keys`) and this
    /// packet starts the next, with the lists the caller leaves in `last_lists`.
    pub(crate) fn next_run(&mut self, offset: u64, len: u64, region_keys: &mut Vec<u64>) {
        self.packets += 1;
        self.end_run(region_keys);
        (self.run_start, self.run_end, self.run_n) = (offset, offset + len, 1);
    }

    /// The packet whose block is `offset..offset + len` (blocks rise from packet to
    /// packet) carries `pk`'s keys and protocols. A packet that follows the last one with
    /// no block between and carries its keys (the next packet of a burst) only extends the
    /// run, touching no list; any other ends the run, whose span goes into each of its keys'
    /// lists, and starts one. The keys new to the region go into `region_keys` (its Bloom
    /// set) as the run ends: each list remembers the last region that saw it, so no table
    /// of its own is needed for that. `pk` is left with some other packet's keys (the
    /// caller clears it).
    #[inline]
    pub(crate) fn add_packet(
        &mut self,
        offset: u64,
        len: u64,
        pk: &mut PacketKeys,
        region_keys: &mut Vec<u64>,
    ) {
        let same = self.last_known && *pk == self.last;
        if same && self.extend_run(offset, offset + len) {
            return;
        }
        self.next_run(offset, len, region_keys);
        if !same {
            self.last_lists.clear();
            for &k in &pk.keys {
                let i = self.list_of(k, false);
                self.last_lists.push(i as u32);
            }
            for &p in &pk.protos {
                let i = self.list_of(proto_key(p), true);
                self.last_lists.push(i as u32);
            }
            std::mem::swap(&mut self.last, pk);
            self.last_known = true;
        }
    }

    /// `tuple` as the flow cache keeps it, and the first entry of its set.
    #[inline]
    fn flow_slot(tuple: u128) -> ([u64; 2], usize) {
        let t = [(tuple >> 64) as u64, tuple as u64];
        (
            t,
            2 * ((crate::key::mix(t[0] ^ t[1]) as usize) & (FLOW_SETS - 1)),
        )
    }

    /// A packet of flow `tuple` that does not extend the run: when the flow is
    /// in the cache, the run ends and one of this flow's starts with the flow's lists, and
    /// its protocol is returned; else None, and nothing changed (the caller parses the
    /// packet, [`PostingsBuilder::add_packet`] takes it, then
    /// [`PostingsBuilder::remember_flow`]).
    #[inline]
    pub(crate) fn add_flow_packet(
        &mut self,
        tuple: u128,
        offset: u64,
        len: u64,
        region_keys: &mut Vec<u64>,
    ) -> Option<u8> {
        let (tuple, at) = Self::flow_slot(tuple);
        // An empty entry has no list (a cached flow has its protocol's at least).
        let f = *self.flows[at..at + 2]
            .iter()
            .find(|f| f.tuple == tuple && f.n != 0)?;
        self.next_run(offset, len, region_keys);
        // All five lists copied (a fixed size: moves, not a call), then cut to the flow's.
        self.last_lists.clear();
        self.last_lists.extend_from_slice(&f.lists);
        self.last_lists.truncate(usize::from(f.n));
        self.last_known = false;
        Some(f.proto)
    }

    /// Puts flow `tuple` into the cache with the lists of the packet just taken by
    /// [`PostingsBuilder::add_packet`], when they fit (a flow tuple's packet has at most
    /// two addresses, two ports and one protocol).
    #[inline]
    pub(crate) fn remember_flow(&mut self, tuple: u128) {
        let (pk, n) = (&self.last, self.last_lists.len());
        if !self.last_known || n > FLOW_LISTS || pk.protos.len() != 1 || pk.keys.len() + 1 != n {
            return;
        }
        let mut lists = [NONE; FLOW_LISTS];
        lists[..n].copy_from_slice(&self.last_lists);
        let (tuple, at) = Self::flow_slot(tuple);
        // The newer of the set's two moves over; the older goes.
        if self.flows[at].n != 0 {
            self.flows[at + 1] = self.flows[at];
        }
        self.flows[at] = Flow {
            tuple,
            lists,
            n: n as u8,
            proto: pk.protos[0],
        };
    }

    /// Puts the run's span into each of its keys' lists.
    fn end_run(&mut self, region_keys: &mut Vec<u64>) {
        if self.run_n == 0 {
            return;
        }
        let run = Run {
            start: self.run_start,
            end: self.run_end,
            n: u32::try_from(self.run_n).unwrap_or(u32::MAX),
            region: self.region,
            packets: self.packets,
        };
        let mut store = Store {
            chunks: &mut self.chunks,
            free: &mut self.free,
        };
        for &i in &self.last_lists {
            let Some(l) = self.lists.get_mut(i as usize) else {
                continue;
            };
            // A key new to the region goes to its Bloom set; a protocol does not (the region
            // has a protocol map).
            if store.push(l, &run) && !l.proto {
                region_keys.push(l.key);
            }
        }
        (self.run_n, self.run_end) = (0, NO_RUN);
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

    /// The postings table of the sidecar into `out`, and the lists into `area` (see
    /// `docs/index-format.md`).
    pub(crate) fn finish(mut self, out: &mut Vec<u8>, area: &mut Vec<u8>) {
        self.end_run(&mut Vec::new());
        let mut store = Store {
            chunks: &mut self.chunks,
            free: &mut self.free,
        };
        for l in self.lists.iter_mut().filter(|l| l.open_n > 0) {
            store.close(l);
        }
        let packets = self.packets;
        let dense = |l: &List| {
            l.dense || u64::from(l.count) * DENSE_SHARE > packets.max(DENSE_MIN * DENSE_SHARE)
        };
        let mut keys: Vec<(u64, u32)> = self.index.iter().map(|(k, i)| (*k, *i)).collect();
        keys.sort_unstable_by_key(|k| k.0);
        // Both grow to their final length at once: many MiB copied as they doubled, and each
        // copy faulted in new pages.
        out.reserve(8 + keys.len() * 24 + 7 + 8);
        area.reserve(
            keys.iter()
                .map(|(_, i)| &self.lists[*i as usize])
                .filter(|l| !dense(l))
                .map(|l| l.len as usize)
                .sum(),
        );
        out.extend_from_slice(&(keys.len() as u64).to_le_bytes());
        for (key, i) in &keys {
            let l = &self.lists[*i as usize];
            out.extend_from_slice(&key.to_le_bytes());
            if dense(l) {
                out.extend_from_slice(&DENSE.to_le_bytes());
                out.extend_from_slice(&[0; 8]);
            } else {
                let start = area.len();
                self.copy_list(l, area);
                let list = &area[start..];
                out.extend_from_slice(&l.spans.min(DENSE - 1).to_le_bytes());
                out.extend_from_slice(&(list.len() as u32).to_le_bytes());
                out.extend_from_slice(&crc32fast::hash(list).to_le_bytes());
            }
        }
        out.resize(out.len() + (8 - out.len() % 8) % 8, 0);
        out.extend_from_slice(&(area.len() as u64).to_le_bytes());
    }
}

/// A run as it goes into its keys' lists: packets whose blocks start in `start..end`, `n`
/// of them, in region `region`, with `packets` packets in the file so far.
struct Run {
    start: u64,
    end: u64,
    n: u32,
    region: u32,
    packets: u64,
}

/// The arena and its free chunks, borrowed apart from the lists, so that a list is taken
/// once for all a run does to it.
struct Store<'a> {
    chunks: &'a mut Arena,
    free: &'a mut u32,
}

impl Store<'_> {
    /// Appends run `r` to list `l` (runs come in file order; a key twice in one packet
    /// comes twice). Returns whether the list is new to the region.
    #[inline(always)]
    fn push(&mut self, l: &mut List, r: &Run) -> bool {
        let new = l.region != r.region;
        l.region = r.region;
        if l.dense || (l.open_n > 0 && r.start < l.open_end) {
            return new;
        }
        if l.open_n > 0 && !new && l.open_end == r.start {
            // Right after the open span, in the same region: one span.
            l.open_end = r.end;
            l.open_n = l.open_n.saturating_add(r.n);
        } else {
            if l.open_n > 0 {
                self.close(l);
            }
            (l.open_start, l.open_end, l.open_n) = (r.start, r.end, r.n);
        }
        l.count = l.count.saturating_add(r.n);
        let count = u64::from(l.count);
        if count > DENSE_MIN && count * DENSE_SHARE > r.packets {
            l.dense = true;
            l.open_n = 0;
            let (head, tail) = (l.head, l.tail);
            (l.head, l.tail, l.len) = (NONE, NONE, 0);
            if head != NONE {
                self.chunks[tail as usize].next = *self.free;
                *self.free = head;
            }
        }
        new
    }

    /// Encodes list `l`'s open span (see `docs/index-format.md`): the gap from the last
    /// span's start (from 0 for the first), shifted left, with bit 0 set for a run of
    /// several packets, which is followed by its length in bytes and its packets less 2.
    #[inline(always)]
    fn close(&mut self, l: &mut List) {
        let gap = l.open_start - l.last;
        let (span, n) = (l.open_end - l.open_start, u64::from(l.open_n));
        l.last = l.open_start;
        l.spans = l.spans.saturating_add(1);
        l.open_n = 0;
        let mut v = [0u8; 32];
        let mut k = varint_into(&mut v, (gap << 1) | u64::from(n > 1));
        if n > 1 {
            k += varint_into(&mut v[k..], span);
            k += varint_into(&mut v[k..], n - 2);
        }
        let at = l.len as usize % CHUNK;
        let tail = l.tail as usize;
        // The common cases: the span fits in the tail chunk with room to spare, so a
        // fixed-size copy (a move or two, not a call) puts it there; the bytes past it are
        // the next span's place, and no reader reads past a list's length. Near a chunk's
        // end a short span (most are) still goes in with 8 bytes: 27 instructions a packet
        // fewer where flows interleave (bench/index_instructions.sh, bursts of 1).
        if l.tail != NONE && at != 0 && at + FAST <= CHUNK && k <= FAST {
            l.len += k as u32;
            self.chunks[tail].bytes[at..at + FAST].copy_from_slice(&v[..FAST]);
        } else if l.tail != NONE && at != 0 && at + 8 <= CHUNK && k <= 8 {
            l.len += k as u32;
            self.chunks[tail].bytes[at..at + 8].copy_from_slice(&v[..8]);
        } else {
            self.append(l, &v[..k]);
        }
    }

    /// Appends `bytes` (a span: a few bytes) to list `l`, byte by byte, taking chunks
    /// from the free list or the arena.
    #[inline(never)]
    fn append(&mut self, l: &mut List, bytes: &[u8]) {
        for &b in bytes {
            let at = l.len as usize % CHUNK;
            if l.tail == NONE || at == 0 {
                let c = if *self.free != NONE {
                    let c = *self.free;
                    *self.free = self.chunks[c as usize].next;
                    self.chunks[c as usize].next = NONE;
                    c
                } else {
                    self.chunks.push()
                };
                if l.tail == NONE {
                    l.head = c;
                } else {
                    self.chunks[l.tail as usize].next = c;
                }
                l.tail = c;
            }
            self.chunks[l.tail as usize].bytes[at] = b;
            l.len += 1;
        }
    }
}

/// Writes `v` as a varint into `buf`; returns its length.
#[inline]
fn varint_into(buf: &mut [u8], mut v: u64) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        buf[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    buf[n] = v as u8;
    n + 1
}

/// Packets of a file that carry a key: those whose blocks start in `start..end`. A span
/// of one packet is `p..p + 1`; a run of packets in a row ends where its last block ends.
/// Offsets are the file's, so spans intersect and unite as byte ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Offset of the first packet's block.
    pub start: u64,
    /// No packet of the span starts here or after.
    pub end: u64,
    /// Packets in the span, at most (exact as the index lists them; an upper bound after
    /// [`intersect`] or [`union`]).
    pub packets: u64,
}

impl Span {
    /// The one packet at `offset`.
    pub fn packet(offset: u64) -> Self {
        Span {
            start: offset,
            end: offset + 1,
            packets: 1,
        }
    }
}

/// The packets in both `a` and `b` (each in file order, spans disjoint), in file order.
pub fn intersect(a: &[Span], b: &[Span]) -> Vec<Span> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        let (start, end) = (x.start.max(y.start), x.end.min(y.end));
        if start < end {
            // `start` is one of the two starts, so a packet's; the packets that start in
            // both ranges start in this one.
            let packets = x.packets.min(y.packets).min(end - start);
            out.push(Span {
                start,
                end,
                packets,
            });
        }
        if x.end <= y.end {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// The packets in `a` or `b` (each in file order, spans disjoint), in file order, spans
/// that overlap made one.
pub fn union(a: &[Span], b: &[Span]) -> Vec<Span> {
    let mut all: Vec<Span> = a.iter().chain(b).copied().collect();
    all.sort_unstable_by_key(|s| s.start);
    let mut out: Vec<Span> = Vec::with_capacity(all.len());
    for s in all {
        match out.last_mut() {
            Some(l) if *l == s => {}
            Some(l) if s.start < l.end => {
                l.end = l.end.max(s.end);
                l.packets += s.packets;
            }
            _ => out.push(s),
        }
    }
    out
}

/// What the postings say of one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// No packet of the file carries it.
    Absent,
    /// Too many packets carry it to list them: read the regions that may hold it.
    Dense,
    /// The packets that carry it, in file order.
    Spans(Vec<Span>),
    /// Its list cannot be read, fails its CRC or does not decode: as for a dense key,
    /// read the regions that may hold it (and say the index is damaged).
    Damaged,
}

/// One key of the postings table: its spans (or [`DENSE`]), and where its list is in the
/// list area, with the list's CRC-32 (version 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) key: u64,
    pub(crate) count: u32,
    pub(crate) len: u32,
    pub(crate) start: u64,
    pub(crate) crc: u32,
}

/// The postings of a parsed sidecar: the table, and the lists when they were read with it
/// (else [`Postings::lookup_with`] reads each list from the sidecar as it is looked up).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Postings {
    /// Sorted by key.
    pub(crate) keys: Vec<Entry>,
    /// The list area, when it was read with the table (None: the lists are in the sidecar,
    /// from `area_at`).
    pub(crate) area: Option<Vec<u8>>,
    /// Offset of the list area in the sidecar.
    pub(crate) area_at: u64,
    /// Version 3 lists: spans, each list with its CRC. Version 2 lists hold one offset a
    /// packet, and the whole sidecar's CRC covers them.
    pub(crate) runs: bool,
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
        self.keys.iter().map(|k| k.key)
    }

    /// Looks `key` up in lists read with the table (an index parsed whole); an index
    /// whose lists were left in the sidecar answers [`Lookup::Damaged`] for a listed key:
    /// use [`Postings::lookup_with`].
    pub fn lookup(&self, key: u64) -> Lookup {
        self.lookup_with(key, |_, _| None)
    }

    /// Looks `key` up; a list not read with the table is read by `read(at, len)`: `len`
    /// bytes at offset `at` of the sidecar (None: unreadable). A list that cannot be read,
    /// fails its CRC, does not decode to its count of spans, or whose spans overlap or fall
    /// out of order, is [`Lookup::Damaged`] (never fewer packets than there are, nor one
    /// packet twice).
    pub fn lookup_with(
        &self,
        key: u64,
        read: impl FnOnce(u64, usize) -> Option<Vec<u8>>,
    ) -> Lookup {
        let Ok(i) = self.keys.binary_search_by_key(&key, |k| k.key) else {
            return Lookup::Absent;
        };
        let e = self.keys[i];
        if e.count == DENSE {
            return Lookup::Dense;
        }
        // Each span takes at least a byte: a count larger than its list cannot decode, and
        // must not size an allocation (the count is the file's word, the list is there).
        if e.count > e.len {
            return Lookup::Damaged;
        }
        let fetched;
        let list = if let Some(area) = &self.area {
            let Some(list) = usize::try_from(e.start)
                .ok()
                .and_then(|s| area.get(s..s.checked_add(e.len as usize)?))
            else {
                return Lookup::Damaged;
            };
            list
        } else {
            let Some(b) = self
                .area_at
                .checked_add(e.start)
                .and_then(|at| read(at, e.len as usize))
                .filter(|b| b.len() == e.len as usize)
            else {
                return Lookup::Damaged;
            };
            fetched = b;
            &fetched[..]
        };
        if !self.intact(&e, list) {
            return Lookup::Damaged;
        }
        match self.decode(list, e.count as usize) {
            Some(out) => Lookup::Spans(out),
            None => Lookup::Damaged,
        }
    }

    /// Whether `list` is the one `e` describes: its CRC matches (version 3; a version 2
    /// list is covered by the sidecar's own CRC).
    pub(crate) fn intact(&self, e: &Entry, list: &[u8]) -> bool {
        !self.runs || e.count == DENSE || crc32fast::hash(list) == e.crc
    }

    /// Bytes of the list area: the lists the table describes, back to back.
    pub(crate) fn area_len(&self) -> u64 {
        self.keys.last().map_or(0, |e| e.start + u64::from(e.len))
    }

    /// The spans of one list; None when it is damaged.
    fn decode(&self, list: &[u8], count: usize) -> Option<Vec<Span>> {
        let mut out = Vec::with_capacity(count);
        let (mut at, mut last, mut end) = (0usize, 0u64, 0u64);
        while at < list.len() {
            let v = get_varint(list, &mut at)?;
            let (gap, run) = if self.runs {
                (v >> 1, v & 1 == 1)
            } else {
                (v, false)
            };
            let start = last.checked_add(gap)?;
            if !out.is_empty() && start < end {
                return None;
            }
            let span = if run {
                let bytes = get_varint(list, &mut at)?;
                let packets = get_varint(list, &mut at)?.checked_add(2)?;
                Span {
                    start,
                    end: start.checked_add(bytes).filter(|e| *e > start)?,
                    packets,
                }
            } else {
                Span {
                    start,
                    end: start.checked_add(1)?,
                    packets: 1,
                }
            };
            (last, end) = (start, span.end);
            out.push(span);
        }
        (out.len() == count).then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One packet of `len` bytes at `off` with these keys and protocols into `p`.
    fn add(
        p: &mut PostingsBuilder,
        off: u64,
        len: u64,
        keys: &[u64],
        protos: &[u8],
        region: &mut Vec<u64>,
    ) {
        let mut pk = PacketKeys {
            keys: keys.to_vec(),
            protos: protos.to_vec(),
        };
        p.add_packet(off, len, &mut pk, region);
    }

    fn parsed(p: PostingsBuilder) -> Postings {
        let (mut out, mut area) = (Vec::new(), Vec::new());
        p.finish(&mut out, &mut area);
        let mut p = crate::format::parse_table(&out).expect("parse");
        assert_eq!(p.area_len(), area.len() as u64);
        p.area = Some(area);
        p
    }

    /// Postings of one key (7) whose list is `bytes`, claiming `count` spans.
    fn one_list(bytes: &[u8], count: u32) -> Postings {
        Postings {
            keys: vec![Entry {
                key: 7,
                count,
                len: bytes.len() as u32,
                start: 0,
                crc: crc32fast::hash(bytes),
            }],
            area: Some(bytes.to_vec()),
            area_at: 0,
            runs: true,
        }
    }

    fn points(offsets: impl IntoIterator<Item = u64>) -> Lookup {
        Lookup::Spans(offsets.into_iter().map(Span::packet).collect())
    }

    #[test]
    fn test_varint_round_trip() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut b = [0u8; 10];
            let n = varint_into(&mut b, v);
            let b = &b[..n];
            let mut at = 0;
            assert_eq!(get_varint(b, &mut at), Some(v));
            assert_eq!(at, b.len());
        }
        assert_eq!(get_varint(&[0x80, 0x80], &mut 0), None);
    }

    #[test]
    fn test_sparse_and_dense_keys() {
        let mut p = PostingsBuilder::default();
        let mut region = vec![];
        // Packets of 100 bytes with a gap of 1 between them: no two in a row.
        for i in 0..100_000u64 {
            if i % 1000 == 7 {
                // A key twice in one packet (source port = destination port).
                add(&mut p, i * 100, 99, &[1, 2, 2], &[17], &mut region);
            } else {
                add(&mut p, i * 100, 99, &[1, 3 + i % 5], &[6], &mut region);
            }
        }
        p.next_region(&mut region);
        region.sort_unstable();
        region.dedup();
        assert_eq!(
            region,
            [1, 2, 3, 4, 5, 6, 7],
            "each key once in the one region"
        );
        let parsed = parsed(p);
        assert_eq!(parsed.lookup(1), Lookup::Dense);
        assert_eq!(parsed.lookup(proto_key(6)), Lookup::Dense);
        assert_eq!(parsed.lookup(99), Lookup::Absent);
        let Lookup::Spans(v) = parsed.lookup(2) else {
            panic!("sparse key listed");
        };
        assert_eq!(v.len(), 100);
        assert_eq!(v[0], Span::packet(700));
        assert_eq!(v[1], Span::packet(100_700));
        assert_eq!(parsed.lookup(proto_key(17)), Lookup::Spans(v));
        // Keys 3 to 7 share the other packets (a fifth each: more than one in 16, dense).
        assert_eq!(parsed.lookup(3), Lookup::Dense);
    }

    #[test]
    fn test_a_count_larger_than_its_list_allocates_nothing_and_reads_damaged() {
        // A damaged count (4 G spans for a 1-byte list) is the file's word, not a size.
        assert_eq!(one_list(&[5], DENSE - 1).lookup(7), Lookup::Damaged);
    }

    #[test]
    fn test_damaged_spans_read_as_damaged() {
        let list = one_list;
        // A run at 10 of 50 bytes, then a packet at 40: inside the run (one packet twice).
        assert_eq!(list(&[21, 50, 0, 60], 2).lookup(7), Lookup::Damaged);
        // The same with the packet at 60, where the run ends: two spans.
        assert_eq!(
            list(&[21, 50, 0, 100], 2).lookup(7),
            Lookup::Spans(vec![
                Span {
                    start: 10,
                    end: 60,
                    packets: 2
                },
                Span::packet(60)
            ])
        );
        // A run of no bytes, a run cut short, a count that does not match.
        assert_eq!(list(&[21, 0, 0], 1).lookup(7), Lookup::Damaged);
        assert_eq!(list(&[21, 50], 1).lookup(7), Lookup::Damaged);
        assert_eq!(list(&[20, 20], 3).lookup(7), Lookup::Damaged);
        // A list whose CRC does not match it.
        let mut bad = list(&[21, 50, 0, 100], 2);
        bad.area.as_mut().expect("read")[3] = 101;
        assert_eq!(bad.lookup(7), Lookup::Damaged);
        // Version 2: one offset a packet, no flag bit, no CRC of its own.
        let mut v2 = list(&[21, 50], 2);
        v2.runs = false;
        v2.keys[0].crc = 0;
        assert_eq!(v2.lookup(7), points([21, 71]));
    }

    #[test]
    fn test_lists_left_in_the_sidecar_are_read_as_looked_up() {
        let mut p = one_list(&[21, 50, 0, 100], 2);
        let area = p.area.take().expect("read");
        p.area_at = 1000;
        let want = Lookup::Spans(vec![
            Span {
                start: 10,
                end: 60,
                packets: 2,
            },
            Span::packet(60),
        ]);
        let read = |at: u64, len: usize| {
            assert_eq!((at, len), (1000, 4));
            Some(area.clone())
        };
        assert_eq!(p.lookup_with(7, read), want);
        assert_eq!(
            p.lookup_with(8, |_, _| panic!("no list to read")),
            Lookup::Absent
        );
        // Unreadable, cut short, or damaged (another sidecar now under the name).
        assert_eq!(p.lookup_with(7, |_, _| None), Lookup::Damaged);
        assert_eq!(p.lookup_with(7, |_, _| Some(vec![21, 50])), Lookup::Damaged);
        assert_eq!(
            p.lookup_with(7, |_, _| Some(vec![21, 50, 0, 102])),
            Lookup::Damaged
        );
        // Not read at all: a listed key is never absent.
        assert_eq!(p.lookup(7), Lookup::Damaged);
    }

    #[test]
    fn test_a_burst_is_one_span_and_a_new_region_starts_another() {
        // Packets of one flow in a row extend one run; a region that begins mid-burst
        // still gets the burst's keys in its set, and its own span.
        let mut p = PostingsBuilder::default();
        let (mut r0, mut r1) = (vec![], vec![]);
        for i in 0..10u64 {
            add(&mut p, i * 60, 60, &[11, 12], &[17], &mut r0);
        }
        p.next_region(&mut r0);
        for i in 10..20u64 {
            add(&mut p, i * 60, 60, &[11, 12], &[17], &mut r1);
        }
        add(&mut p, 20 * 60, 60, &[13, 12], &[17], &mut r1);
        p.next_region(&mut r1);
        assert_eq!((r0, r1), (vec![11, 12], vec![11, 12, 13]));
        let parsed = parsed(p);
        let run = |from: u64, n: u64| Span {
            start: from * 60,
            end: (from + n) * 60,
            packets: n,
        };
        assert_eq!(
            parsed.lookup(12),
            Lookup::Spans(vec![run(0, 10), run(10, 11)])
        );
        assert_eq!(
            parsed.lookup(11),
            Lookup::Spans(vec![run(0, 10), run(10, 10)])
        );
        assert_eq!(parsed.lookup(13), points([1200]));
        assert_eq!(
            parsed.lookup(proto_key(17)),
            Lookup::Spans(vec![run(0, 10), run(10, 11)])
        );
    }

    #[test]
    fn test_a_block_between_packets_ends_the_run() {
        // Packets at 0, 60, then a 40-byte block (an interface statistics block, say), then
        // packets at 160 and 220: two spans, the block in neither.
        let mut p = PostingsBuilder::default();
        let mut r = vec![];
        for off in [0, 60, 160, 220] {
            add(&mut p, off, 60, &[5, 5], &[], &mut r);
        }
        p.next_region(&mut r);
        assert_eq!(r, [5]);
        let span = |start, end| Span {
            start,
            end,
            packets: 2,
        };
        assert_eq!(
            parsed(p).lookup(5),
            Lookup::Spans(vec![span(0, 120), span(160, 280)])
        );
    }

    #[test]
    fn test_interleaved_flows_merge_into_each_keys_own_spans() {
        // A and B alternate; host 1 is in both, so its list is one span of every packet.
        let mut p = PostingsBuilder::default();
        let mut r = vec![];
        for i in 0..6u64 {
            let keys: &[u64] = if i % 2 == 0 { &[1, 2] } else { &[1, 3] };
            add(&mut p, 100 + i * 10, 10, keys, &[6], &mut r);
        }
        p.next_region(&mut r);
        let parsed = parsed(p);
        assert_eq!(
            parsed.lookup(1),
            Lookup::Spans(vec![Span {
                start: 100,
                end: 160,
                packets: 6
            }])
        );
        assert_eq!(parsed.lookup(2), points([100, 120, 140]));
        assert_eq!(parsed.lookup(3), points([110, 130, 150]));
    }

    #[test]
    fn test_intersect_and_union_are_those_of_packet_sets() {
        // Packets of 10 bytes at 0, 10, .., 190. Sets of them as spans, against the same
        // sets as offsets.
        let sets: Vec<Vec<Span>> = vec![
            vec![Span {
                start: 0,
                end: 100,
                packets: 10,
            }],
            vec![Span::packet(50), Span::packet(100), Span::packet(150)],
            vec![
                Span {
                    start: 30,
                    end: 70,
                    packets: 4,
                },
                Span {
                    start: 140,
                    end: 200,
                    packets: 6,
                },
            ],
            vec![],
        ];
        let offsets = |v: &[Span]| -> Vec<u64> {
            (0..200)
                .step_by(10)
                .filter(|o| v.iter().any(|s| s.start <= *o && *o < s.end))
                .collect()
        };
        for a in &sets {
            for b in &sets {
                let (oa, ob) = (offsets(a), offsets(b));
                let i = intersect(a, b);
                let u = union(a, b);
                let want_i: Vec<u64> = oa.iter().copied().filter(|o| ob.contains(o)).collect();
                let mut want_u: Vec<u64> = oa.iter().chain(&ob).copied().collect();
                want_u.sort_unstable();
                want_u.dedup();
                assert_eq!(offsets(&i), want_i, "{a:?} and {b:?}");
                assert_eq!(offsets(&u), want_u, "{a:?} or {b:?}");
                assert!(i.iter().map(|s| s.packets).sum::<u64>() >= want_i.len() as u64);
                assert!(u.iter().map(|s| s.packets).sum::<u64>() >= want_u.len() as u64);
                assert!(i.windows(2).all(|w| w[0].end <= w[1].start));
                assert!(u.windows(2).all(|w| w[0].end <= w[1].start));
            }
        }
    }
}
