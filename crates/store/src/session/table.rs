//! The session table: the connections in the order they came, found through an index of
//! positions (open addressing with linear probing).

use corecap_wire::community_id::{community_id_of_tuple, icmp_ports};
use corecap_wire::flow::{IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP};
use corecap_wire::name::stream::Push;
use corecap_wire::name::{Parse, Stream};
use corecap_wire::transport::{TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN};
use corecap_wire::{FlowKey, Fragment, IpFamily, Link, ParseError, Transport};

use super::format::Encoder;
use super::naming::{probe_tcp, probe_udp, Naming, DNS_PORT, UDP_TRIES};
use super::{Session, SessionName, BEGAN_SYN, ENDED_FIN_RST, ONE_WAY, SAW_SYN};

/// How big a table is; everything is allocated when it is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionConfig {
    /// Connections kept per file segment; a packet of one more is counted in
    /// [`SessionStats::sessions_dropped`].
    pub capacity: usize,
    /// Connections per segment that keep a name (a name is about 540 bytes).
    pub names: usize,
    /// Connections at once whose name waits for more TCP segments (4 KiB each).
    pub streams: usize,
    /// The Community ID seed.
    pub seed: u16,
}

impl Default for SessionConfig {
    /// 65,536 connections, 16,384 names, 64 streams, seed 0: about 20 MiB.
    fn default() -> Self {
        SessionConfig {
            capacity: 1 << 16,
            names: 1 << 14,
            streams: 64,
            seed: 0,
        }
    }
}

impl SessionConfig {
    /// A table that keeps `capacity` connections per file segment (at least 1), a name
    /// for a quarter of them, and the default's streams and seed.
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        SessionConfig {
            capacity,
            names: (capacity / 4).max(1),
            ..SessionConfig::default()
        }
    }

    /// Bytes a table of this configuration allocates, about: per connection kept, its
    /// entry of 128 bytes, its cut counts, two index positions of 8 bytes and its place
    /// in the order of a file's end; then the names and the streams. The entries are
    /// touched only as connections come.
    pub fn bytes(&self) -> u64 {
        let capacity = self.capacity.max(1) as u64;
        let positions = (self.capacity.max(1) * 2).next_power_of_two() as u64;
        let name = std::mem::size_of::<SessionName>() as u64;
        positions * 8
            + capacity * (std::mem::size_of::<Entry>() as u64 + 16 + 24)
            + self.names as u64 * name
            + self.streams as u64 * (4 << 10)
    }

    /// A small table, for one of many captures at once (an on-demand capture): 4,096
    /// connections, 1,024 names, 16 streams, about 1.3 MiB.
    pub fn on_demand() -> Self {
        SessionConfig {
            capacity: 1 << 12,
            names: 1 << 10,
            streams: 16,
            seed: 0,
        }
    }
}

/// What a table counted besides its connections, since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Packets given to the table.
    pub packets: u64,
    /// Packets that are not IP (ARP, LLDP, ...): counted, not kept.
    pub not_ip: u64,
    /// IP packets too short or malformed for a flow key.
    pub unparsed: u64,
    /// Packets written of connections the full table could not keep (each packet counts,
    /// so one connection may count several times). A packet a cutoff left out of the file
    /// is not among them: it is counted as cut, and only there.
    pub sessions_dropped: u64,
    /// Names found when the segment's names were all taken.
    pub names_dropped: u64,
    /// Names given up because no stream was free to wait in.
    pub streams_busy: u64,
}

/// One entry: a connection while its segment is written.
///
/// Laid out by hand: what every packet reads and writes (the key, the flags, the last time,
/// the counts) in the first 104 bytes, and the entry aligned to 128, so a packet's update
/// touches one aligned pair of cache lines, which the L2 prefetcher fetches together. With
/// thousands of connections an entry is rarely in cache: the load of its first line was
/// most of what a packet cost here, hence [`SessionTable::prefetch`] ahead of the update.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(128))]
struct Entry {
    /// The table key ([`Words`]): both directions in one, or as sent for a one-way ICMP
    /// connection.
    key: Words,
    /// Whether the originator is `key.src`.
    orig_is_src: bool,
    link: Link,
    flags: u8,
    tcp_flags: u8,
    naming: Naming,
    /// Index in `names`, or `NO_NAME`.
    name: u32,
    last_ns: u64,
    /// Index 0: from the originator; 1: from the responder.
    packets: [u64; 2],
    bytes: [u64; 2],
    first_ns: u64,
    /// The originator's first data sequence number, after its SYN's.
    data_seq: Option<u32>,
    /// Its position in the table's index, emptied with it.
    at: u32,
}

const NO_NAME: u32 = u32::MAX;

/// How many entries ahead [`SessionTable::finish`] asks for while it reads one.
const FINISH_AHEAD: usize = 8;

/// An index position that holds no entry.
const VACANT: u64 = 0;

const EMPTY: Entry = Entry {
    key: [0; 5],
    orig_is_src: true,
    link: Link::Ethernet,
    flags: 0,
    tcp_flags: 0,
    first_ns: 0,
    last_ns: 0,
    packets: [0; 2],
    bytes: [0; 2],
    naming: Naming::Pending { tries: 0 },
    data_seq: None,
    name: NO_NAME,
    at: 0,
};

/// A packet's connection found ahead of its update ([`SessionTable::prefetch`]): its table
/// key and its hash, and which end sent the packet. The probe itself is made by the update,
/// so what the table did in between (a packet, a new segment) changes nothing.
#[derive(Clone, Copy, Debug)]
pub struct Prefetched {
    key: Words,
    /// The key's hash: its low bits the index position the probe starts at, its high 32 the
    /// tag an index position holds beside its entry.
    hash: u64,
    one_way: bool,
    sent_by_src: bool,
}

/// The connections of one file segment; see the module doc of [`crate::session`].
#[derive(Debug)]
pub struct SessionTable {
    cfg: SessionConfig,
    /// Per position, at least two per connection kept: [`VACANT`], or an entry's index
    /// plus one in the low 32 bits and its key hash's high 32 bits above, so a probe reads
    /// an entry only when the hashes agree. Eight bytes a position, where the entries are
    /// 128: the part of the table a probe walks stays small enough for the caches, and the
    /// entries themselves lie in the order their connections came.
    index: Vec<u64>,
    /// `index.len() - 1` (a power of two less one).
    mask: usize,
    /// The connections, in the order they came: `capacity` reserved when the table is
    /// made, and touched only as connections come.
    entries: Vec<Entry>,
    /// Per entry: packets and bytes a cutoff left out of the file. Apart from the entries,
    /// so a kept packet's update stays within its entry's two cache lines.
    cut: Vec<[u64; 2]>,
    names: Vec<SessionName>,
    streams: Vec<Stream>,
    /// Indexes of the streams not lent.
    free_streams: Vec<u16>,
    stats: SessionStats,
    /// `stats.sessions_dropped` when the segment began: what the segment's file says it
    /// has no record of is the difference.
    dropped_before: u64,
}

impl SessionTable {
    /// A table for `cfg`, all of its memory allocated now.
    pub fn new(cfg: SessionConfig) -> SessionTable {
        let cfg = SessionConfig {
            // An index position holds an entry's number plus one in 32 bits, and an entry
            // its position in 32.
            capacity: cfg.capacity.clamp(1, 1 << 30),
            streams: cfg.streams.min(usize::from(u16::MAX)),
            ..cfg
        };
        // At most half the positions are used, so a probe ends soon.
        let n = (cfg.capacity * 2).next_power_of_two();
        SessionTable {
            index: vec![VACANT; n],
            mask: n - 1,
            entries: huge_entries(cfg.capacity),
            cut: vec![[0; 2]; cfg.capacity],
            names: Vec::with_capacity(cfg.names),
            streams: (0..cfg.streams).map(|_| Stream::new()).collect(),
            free_streams: (0..cfg.streams as u16).rev().collect(),
            stats: SessionStats::default(),
            dropped_before: 0,
            cfg,
        }
    }

    /// What the table counted so far.
    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    /// Connections in the table now.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table holds no connection.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The configuration it was made with (its seed is the records').
    pub fn config(&self) -> SessionConfig {
        self.cfg
    }

    /// Adds a packet: its time (ns), its wire length (what the byte counts add up: the
    /// length the file records for it, with a VLAN tag the writer put back), the captured
    /// frame, its link type, and the VLAN TCI the ring reported (see
    /// [`corecap_wire::flow_key`]). Never fails and allocates nothing.
    pub fn add(&mut self, ts_ns: u64, wire_len: u32, frame: &[u8], link: Link, vlan: Option<u16>) {
        match link.transport(frame, vlan) {
            Ok(t) => self.add_parsed(ts_ns, wire_len, link, &t),
            Err(why) => self.unparsed(why),
        }
    }

    /// Counts a packet its writer could not read a transport layer from (`why`).
    pub fn unparsed(&mut self, why: ParseError) {
        self.stats.packets += 1;
        match why {
            ParseError::NotIp => self.stats.not_ip += 1,
            _ => self.stats.unparsed += 1,
        }
    }

    /// [`SessionTable::add`] for a packet whose transport layer its writer read already
    /// (once, for the cutoff, the index and this table): `t` is that of the frame as the
    /// file holds it, with the ring's VLAN.
    #[inline]
    pub fn add_parsed(&mut self, ts_ns: u64, wire_len: u32, link: Link, t: &Transport<'_>) {
        let at = self.locate(t);
        self.add_prefetched(ts_ns, wire_len, link, t, &at);
    }

    /// Finds where the connection of `t` is kept and asks the processor for the index
    /// position its probe starts at, without waiting for it: with thousands of connections
    /// neither that position nor the entry it leads to is in cache, and their loads were
    /// most of what a packet cost here. A writer calls this as soon as it has read a
    /// packet's transport layer, then [`SessionTable::prefetch_entry`] once it has done some
    /// other work (formatted the packet), then indexes the packet and gives it to
    /// [`SessionTable::add_prefetched`], by when the entry has come.
    #[inline(always)]
    pub fn prefetch(&self, t: &Transport<'_>) -> Prefetched {
        let at = self.locate(t);
        corecap_linux::memory::prefetch(&self.index[self.home(at.hash)]);
        at
    }

    /// Asks the processor for the entry `at`'s probe most likely ends at: the one its first
    /// index position holds, or the next to be taken when that position is vacant.
    #[inline(always)]
    pub fn prefetch_entry(&self, at: &Prefetched) {
        let held = self.index[self.home(at.hash)];
        let likely = match held {
            VACANT => self.entries.len(),
            _ => entry_of(held),
        };
        corecap_linux::memory::prefetch_at(self.entries.as_ptr().wrapping_add(likely));
    }

    /// [`SessionTable::add_parsed`] for a packet whose connection was found by
    /// [`SessionTable::prefetch`] (`at`, of the same `t`).
    #[inline]
    pub fn add_prefetched(
        &mut self,
        ts_ns: u64,
        wire_len: u32,
        link: Link,
        t: &Transport<'_>,
        at: &Prefetched,
    ) {
        self.stats.packets += 1;
        let Some((i, sent_by_src)) = self.entry(ts_ns, link, at) else {
            self.stats.sessions_dropped += 1;
            return;
        };
        let e = &mut self.entries[i];
        let from_orig = e.update(ts_ns, wire_len, t, sent_by_src);
        if e.naming != Naming::Done {
            self.name_step(i, t, from_orig);
        }
    }

    /// Counts a packet of the connection `t` that a per-flow cutoff left out of the file
    /// (see the module doc of [`crate::session`]): seen, not kept. Its time moves the
    /// connection's first and last; nothing else of it does.
    #[inline]
    pub fn add_cut(&mut self, ts_ns: u64, wire_len: u32, link: Link, t: &Transport<'_>) {
        self.stats.packets += 1;
        let at = self.locate(t);
        let Some((i, _)) = self.entry(ts_ns, link, &at) else {
            return;
        };
        let e = &mut self.entries[i];
        e.first_ns = e.first_ns.min(ts_ns);
        e.last_ns = e.last_ns.max(ts_ns);
        let c = &mut self.cut[i];
        c[0] += 1;
        c[1] += u64::from(wire_len);
    }

    /// The table key of `t`'s connection and its hash.
    #[inline(always)]
    fn locate(&self, t: &Transport<'_>) -> Prefetched {
        let (key, one_way, sent_by_src) = table_words(t);
        Prefetched {
            hash: hash(&key),
            key,
            one_way,
            sent_by_src,
        }
    }

    /// The entry of `at`'s connection, taken for it if new (first seen at `ts_ns`), and
    /// whether the packet was sent by its key's `src`; None when the table is full (the
    /// caller counts a written packet in [`SessionStats::sessions_dropped`]).
    #[inline(always)]
    fn entry(&mut self, ts_ns: u64, link: Link, at: &Prefetched) -> Option<(usize, bool)> {
        let Prefetched {
            key,
            hash,
            one_way,
            sent_by_src,
        } = *at;
        let vacant = match self.find(&key, hash) {
            Ok(i) => return Some((i, sent_by_src)),
            Err(vacant) => vacant,
        };
        let i = self.entries.len();
        if i >= self.cfg.capacity {
            return None;
        }
        self.index[vacant] = hash & TAG | (i as u64 + 1);
        // Within the capacity reserved when the table was made: no allocation.
        self.entries.push(Entry {
            key,
            orig_is_src: sent_by_src,
            link,
            first_ns: ts_ns,
            last_ns: ts_ns,
            flags: if one_way { ONE_WAY } else { 0 },
            at: vacant as u32,
            ..EMPTY
        });
        Some((i, sent_by_src))
    }

    /// The index position a probe for a key of `hash` starts at.
    #[inline(always)]
    fn home(&self, hash: u64) -> usize {
        hash as usize & self.mask
    }

    /// The entry of `key`, whose hash is `hash`, or the vacant index position where the
    /// probe ended (there is always one: at most half the positions are held).
    #[inline(always)]
    fn find(&self, key: &Words, hash: u64) -> Result<usize, usize> {
        let mut p = self.home(hash);
        loop {
            let held = self.index[p];
            if held == VACANT {
                return Err(p);
            }
            if held & TAG == hash & TAG {
                let i = entry_of(held);
                if same_key(&self.entries[i].key, key) {
                    return Ok(i);
                }
            }
            p = (p + 1) & self.mask;
        }
    }

    /// Looks for the connection's name in this packet, as the module doc says. Out of
    /// line: a connection's first packets come here, the rest skip it.
    #[inline(never)]
    fn name_step(&mut self, i: usize, t: &Transport<'_>, from_orig: bool) {
        let e = &self.entries[i];
        if e.naming == Naming::Done || t.fragment != Fragment::No {
            return;
        }
        let dns_port = t.key.sport == DNS_PORT || t.key.dport == DNS_PORT;
        match t.key.proto {
            IPPROTO_UDP if dns_port => self.name_udp(i, t),
            IPPROTO_TCP if from_orig => self.name_tcp(i, t, dns_port),
            IPPROTO_TCP => {}
            _ => self.entries[i].naming = Naming::Done,
        }
    }

    fn name_udp(&mut self, i: usize, t: &Transport<'_>) {
        let Naming::Pending { tries } = self.entries[i].naming else {
            return;
        };
        let found = if t.truncated() {
            None
        } else {
            probe_udp(t.payload)
        };
        match found {
            Some(n) => self.found(i, n),
            None if tries + 1 >= UDP_TRIES => self.entries[i].naming = Naming::Done,
            None => self.entries[i].naming = Naming::Pending { tries: tries + 1 },
        }
    }

    fn name_tcp(&mut self, i: usize, t: &Transport<'_>, dns_port: bool) {
        let Some(tcp) = t.tcp else {
            return self.give_up(i);
        };
        if t.payload.is_empty() && !t.truncated() {
            return;
        }
        let e = self.entries[i];
        let waiting = match e.naming {
            Naming::Waiting(s) => usize::from(s),
            _ => {
                // The first data must start the stream (right after the SYN, when seen).
                let starts = e.data_seq.is_none_or(|s| s == tcp.seq);
                if !starts || t.truncated() {
                    return self.give_up(i);
                }
                match probe_tcp(t.payload, dns_port) {
                    Parse::Found(n) => return self.found(i, n),
                    Parse::Invalid => return self.give_up(i),
                    Parse::More => {}
                }
                let Some(s) = self.free_streams.pop() else {
                    self.stats.streams_busy += 1;
                    return self.give_up(i);
                };
                self.streams[usize::from(s)].clear();
                self.entries[i].naming = Naming::Waiting(s);
                usize::from(s)
            }
        };
        let pushed = self.streams[waiting].push(tcp.seq, t.payload, t.truncated());
        let probed = match pushed {
            Push::GaveUp => Parse::Invalid,
            _ => probe_tcp(self.streams[waiting].bytes(), dns_port),
        };
        match (probed, pushed) {
            (Parse::Found(n), _) => self.found(i, n),
            (Parse::More, Push::Appended) => {}
            _ => self.give_up(i),
        }
    }

    /// Keeps name `n` for entry `i`, and ends its search.
    fn found(&mut self, i: usize, n: SessionName) {
        if self.names.len() < self.cfg.names {
            self.entries[i].name = self.names.len() as u32;
            self.names.push(n);
        } else {
            self.stats.names_dropped += 1;
        }
        self.give_up(i);
    }

    /// Ends entry `i`'s search for a name, giving its stream back.
    fn give_up(&mut self, i: usize) {
        if let Naming::Waiting(s) = self.entries[i].naming {
            self.free_streams.push(s);
        }
        self.entries[i].naming = Naming::Done;
    }

    /// The segment's connections, in order of their first packet, with their Community
    /// IDs; the table is empty after, ready for the next segment.
    pub fn finish(&mut self) -> Vec<Session> {
        let mut out = Vec::with_capacity(self.entries.len());
        self.drain(|s| out.push(*s));
        out
    }

    /// The segment's connections as the records of its sessions file; the table is empty
    /// after, as with [`SessionTable::finish`].
    pub fn finish_encoded(&mut self) -> Encoder {
        let mut e = Encoder::new(self.cfg.seed, self.entries.len());
        e.set_unrecorded(self.stats.sessions_dropped - self.dropped_before);
        self.drain(|s| e.push(s));
        e
    }

    /// Gives each connection to `f`, in order of first packet (then of last, then of
    /// arrival), and empties the table. The order is settled on the entries' times first,
    /// so no record is moved by a sort.
    fn drain(&mut self, mut f: impl FnMut(&Session)) {
        let mut order: Vec<(u64, u64, u32)> = self
            .entries
            .iter()
            .enumerate()
            .map(|(k, e)| (e.first_ns, e.last_ns, k as u32))
            .collect();
        // Stable, and linear on what is sorted already (connections mostly come in order).
        order.sort();
        for (n, &(_, _, k)) in order.iter().enumerate() {
            if let Some(&(_, _, ahead)) = order.get(n + FINISH_AHEAD) {
                // Out of the order they came, where connections overlap: asked for ahead.
                corecap_linux::memory::prefetch(&self.entries[ahead as usize]);
                corecap_linux::memory::prefetch(&self.cut[ahead as usize]);
            }
            let e = &self.entries[k as usize];
            let name = self.names.get(e.name as usize).copied().unwrap_or_default();
            let cut = std::mem::take(&mut self.cut[k as usize]);
            f(&e.session(name, self.cfg.seed, cut));
        }
        self.empty_index();
        self.entries.clear();
        self.dropped_before = self.stats.sessions_dropped;
        self.names.clear();
        self.free_streams.clear();
        self.free_streams
            .extend((0..self.streams.len() as u16).rev());
    }
}

impl SessionTable {
    /// Makes every index position vacant: those the entries hold, one by one, when they
    /// are few; else the whole index at once, which is then the cheaper.
    fn empty_index(&mut self) {
        if self.entries.len() < self.index.len() / 16 {
            for e in &self.entries {
                self.index[e.at as usize] = VACANT;
            }
        } else {
            self.index.fill(VACANT);
        }
    }
}

/// The high 32 bits of an index position: the tag, its entry's key hash's own.
const TAG: u64 = !0 << 32;

/// The entry an index position that is not [`VACANT`] holds.
#[inline(always)]
fn entry_of(held: u64) -> usize {
    (held as u32 - 1) as usize
}

impl Entry {
    /// Counts a packet; `sent_by_src` whether it was sent by the key's `src`. Gives whether
    /// it came from the originator.
    #[inline(always)]
    fn update(&mut self, ts_ns: u64, wire_len: u32, t: &Transport<'_>, sent_by_src: bool) -> bool {
        if let Some(tcp) = t.tcp {
            let pure_syn = tcp.flags & (TCP_SYN | TCP_ACK) == TCP_SYN;
            let syn_ack = tcp.flags & (TCP_SYN | TCP_ACK) == TCP_SYN | TCP_ACK;
            let first = self.packets == [0, 0];
            if pure_syn && self.flags & SAW_SYN == 0 {
                // The SYN's sender is the originator, whoever was seen first.
                if self.orig_is_src != sent_by_src {
                    self.orig_is_src = sent_by_src;
                    self.packets.swap(0, 1);
                    self.bytes.swap(0, 1);
                }
                self.flags |= SAW_SYN | if first { BEGAN_SYN } else { 0 };
                self.data_seq = Some(tcp.seq.wrapping_add(1));
            } else if syn_ack && first {
                self.orig_is_src = !sent_by_src;
            }
            if tcp.flags & (TCP_FIN | TCP_RST) != 0 {
                self.flags |= ENDED_FIN_RST;
            }
            self.tcp_flags |= tcp.flags;
        }
        let d = usize::from(sent_by_src != self.orig_is_src);
        self.packets[d] += 1;
        self.bytes[d] += u64::from(wire_len);
        self.first_ns = self.first_ns.min(ts_ns);
        self.last_ns = self.last_ns.max(ts_ns);
        d == 0
    }

    fn session(&self, name: SessionName, seed: u16, cut: [u64; 2]) -> Session {
        let key = key_of(&self.key);
        let key = if self.orig_is_src {
            key
        } else {
            key.reversed()
        };
        Session {
            key,
            link: self.link,
            community_id: community_id_of_tuple(&key, self.flags & ONE_WAY != 0, seed),
            first_ns: self.first_ns,
            last_ns: self.last_ns,
            packets: self.packets,
            bytes: self.bytes,
            cut_packets: cut[0],
            cut_bytes: cut[1],
            tcp_flags: self.tcp_flags,
            flags: self.flags,
            name,
        }
    }
}

/// The table key of a packet, whether it is a one-way ICMP message, and whether the packet
/// was sent by the key's `src`.
#[inline(always)]
pub(crate) fn table_key(t: &Transport<'_>) -> (FlowKey, bool, bool) {
    let mut k = t.key;
    let mut one_way = false;
    if let (IPPROTO_ICMP | IPPROTO_ICMPV6, Some((ty, code))) = (k.proto, t.icmp) {
        (k.sport, k.dport, one_way) = icmp_ports(k.proto == IPPROTO_ICMPV6, ty, code);
    }
    if one_way {
        return (k, true, true);
    }
    // The packet's sender is the key's `src` when its own end is the lower one (ties,
    // both ends equal, count as sent by `src`, as the canonical key is the key itself).
    let by_src = k.src_first();
    (if by_src { k } else { k.reversed() }, false, by_src)
}

/// The table key of a packet as the entries hold it ([`Words`]), whether it is a one-way ICMP
/// message, and whether the packet was sent by the key's `src`: [`table_key`]'s connection,
/// its two ends ordered as words rather than as bytes (the order only has to be the same
/// for both directions; the records are keyed as their originator sent).
#[inline(always)]
fn table_words(t: &Transport<'_>) -> (Words, bool, bool) {
    let k = &t.key;
    let (mut sport, mut dport, mut one_way) = (k.sport, k.dport, false);
    if let (IPPROTO_ICMP | IPPROTO_ICMPV6, Some((ty, code))) = (k.proto, t.icmp) {
        (sport, dport, one_way) = icmp_ports(k.proto == IPPROTO_ICMPV6, ty, code);
    }
    let (s, d) = (halves(&k.src), halves(&k.dst));
    // The packet's sender is the key's `src` when its own end is the lower one (ties, both
    // ends equal, count as sent by `src`).
    let by_src = one_way || (s, sport) <= (d, dport);
    let tail = |sport: u16, dport: u16| {
        u64::from(k.vlan)
            | u64::from(k.proto) << 16
            | u64::from(k.family == IpFamily::V6) << 24
            | u64::from(sport) << 32
            | u64::from(dport) << 48
    };
    let words = if by_src {
        [s[0], s[1], d[0], d[1], tail(sport, dport)]
    } else {
        [d[0], d[1], s[0], s[1], tail(dport, sport)]
    };
    (words, one_way, by_src)
}

/// A 16-byte address as two little-endian words.
#[inline(always)]
fn halves(a: &[u8; 16]) -> [u64; 2] {
    let w = |i: usize| u64::from_le_bytes(a[i..i + 8].try_into().expect("8 of 16 bytes"));
    [w(0), w(8)]
}

/// The key that `words` holds (the inverse of [`words`]).
fn key_of(w: &Words) -> FlowKey {
    let addr = |a: u64, b: u64| {
        let mut x = [0u8; 16];
        x[..8].copy_from_slice(&a.to_le_bytes());
        x[8..].copy_from_slice(&b.to_le_bytes());
        x
    };
    let tail = w[4];
    FlowKey {
        vlan: tail as u16,
        proto: (tail >> 16) as u8,
        family: if tail >> 24 & 1 == 1 {
            IpFamily::V6
        } else {
            IpFamily::V4
        },
        src: addr(w[0], w[1]),
        dst: addr(w[2], w[3]),
        sport: (tail >> 32) as u16,
        dport: (tail >> 48) as u16,
    }
}

/// Room for `n` entries, on huge pages where the kernel gives them: a packet's entry is at
/// a random place in many MiB, and with 4 KiB pages each lookup was a TLB miss too. Nothing
/// is written: a page is placed (and zeroed by the kernel) when its first entry is taken.
fn huge_entries(n: usize) -> Vec<Entry> {
    let v: Vec<Entry> = Vec::with_capacity(n);
    corecap_linux::memory::advise_huge(v.as_ptr() as usize, n * std::mem::size_of::<Entry>());
    v
}

/// A hash of a key for the index position its probe starts at: the key's five words, each
/// folded in with a multiply (as FxHash does), then the high bits mixed down, since the
/// position is taken from the low ones (and the tag from the high 32). A third of xxh3's instructions here, where every packet pays it; the
/// keys are not chosen by an attacker who sees the table (a long probe costs time, never a
/// packet), and the table is at most half full.
#[inline(always)]
fn hash(w: &Words) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = 0u64;
    for &x in w {
        h = (h.rotate_left(23) ^ x).wrapping_mul(K);
    }
    h ^ (h >> 29)
}

/// A key as the entries hold it, in five words: the addresses' halves (little-endian), then
/// VLAN, protocol, family and ports (`vlan | proto << 16 | v6 << 24 | sport << 32 |
/// dport << 48`). A probe compares five words, and nothing is lost ([`key_of`]).
type Words = [u64; 5];

/// `k` as [`Words`].
#[cfg(test)]
fn words(k: &FlowKey) -> Words {
    let w =
        |b: &[u8; 16], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 of 16 bytes"));
    let tail = u64::from(k.vlan)
        | u64::from(k.proto) << 16
        | u64::from(k.family == IpFamily::V6) << 24
        | u64::from(k.sport) << 32
        | u64::from(k.dport) << 48;
    [w(&k.src, 0), w(&k.src, 8), w(&k.dst, 0), w(&k.dst, 8), tail]
}

/// `a == b`, word by word with no early exit (a probe's compare is most often equal).
#[inline(always)]
fn same_key(a: &Words, b: &Words) -> bool {
    a.iter().zip(b).fold(0, |d, (p, q)| d | (p ^ q)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's key is the canonical key, and says which end sent the packet, for keys
    /// whose addresses differ in any byte and whose ports tie or not.
    #[test]
    fn test_table_key_is_the_canonical_key() {
        let mut next = corecap_wire::xorshift::xorshift64(0x2545_f491_4f6c_dd1d);
        for _ in 0..50_000 {
            let mut key = FlowKey {
                vlan: 0,
                proto: IPPROTO_TCP,
                family: IpFamily::V6,
                src: [0; 16],
                dst: [0; 16],
                sport: (next() % 4) as u16,
                dport: (next() % 4) as u16,
            };
            // Mostly equal addresses but for a byte or two, so that every byte decides.
            let base = next().to_le_bytes();
            for (i, (s, d)) in key.src.iter_mut().zip(key.dst.iter_mut()).enumerate() {
                *s = base[i % 8];
                *d = base[i % 8];
            }
            key.src[(next() % 16) as usize] = next() as u8;
            key.dst[(next() % 16) as usize] = next() as u8;
            let t = Transport {
                key,
                fragment: Fragment::No,
                tcp: None,
                icmp: None,
                payload: &[],
                payload_len: 0,
            };
            let (k, one_way, by_src) = table_key(&t);
            let c = key.canonical();
            assert_eq!(k, c);
            assert!(!one_way);
            assert_eq!(by_src, c.src == key.src && c.sport == key.sport, "{key:?}");
            // The entries' key: the same for both directions, the connection's key, and the
            // packet's sender said as for the canonical key (its ends, as a table key has them).
            let (w, one_way, by_src) = table_words(&t);
            let back = Transport {
                key: key.reversed(),
                ..t
            };
            let (w2, _, by_src2) = table_words(&back);
            assert_eq!(w, w2, "{key:?}");
            assert!(!one_way);
            let tie = key == key.reversed();
            assert_eq!(by_src2, !by_src || tie, "{key:?}");
            let kw = key_of(&w);
            assert_eq!(if by_src { kw } else { kw.reversed() }, key, "{key:?}");
            assert_eq!(kw.canonical(), c, "{key:?}");
        }
    }

    /// A key in words and back is the same key, for either family, any VLAN, protocol and
    /// ports.
    #[test]
    fn test_words_keep_the_key() {
        let mut next = corecap_wire::xorshift::xorshift64(0x9e37_79b9_7f4a_7c15);
        for _ in 0..10_000 {
            let mut k = FlowKey {
                vlan: next() as u16 & 0x0fff,
                proto: next() as u8,
                family: if next().is_multiple_of(2) {
                    IpFamily::V4
                } else {
                    IpFamily::V6
                },
                src: [0; 16],
                dst: [0; 16],
                sport: next() as u16,
                dport: next() as u16,
            };
            k.src[..8].copy_from_slice(&next().to_le_bytes());
            k.src[8..].copy_from_slice(&next().to_le_bytes());
            k.dst[..8].copy_from_slice(&next().to_le_bytes());
            k.dst[8..].copy_from_slice(&next().to_le_bytes());
            assert_eq!(key_of(&words(&k)), k);
        }
    }

    /// A one-way ICMP message keeps its key as sent, with its type and code for ports.
    #[test]
    fn test_one_way_icmp_is_kept_as_sent() {
        let key = FlowKey {
            vlan: 0,
            proto: IPPROTO_ICMP,
            family: IpFamily::V4,
            src: [10, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            dst: [10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            sport: 0,
            dport: 0,
        };
        // Destination unreachable: one way.
        let t = Transport {
            key,
            fragment: Fragment::No,
            tcp: None,
            icmp: Some((3, 1)),
            payload: &[],
            payload_len: 0,
        };
        let (w, one_way, by_src) = table_words(&t);
        assert!(one_way && by_src);
        assert_eq!(key_of(&w), table_key(&t).0);
    }
}
