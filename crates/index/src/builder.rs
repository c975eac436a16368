//! [`IndexBuilder`]: regions of a capture file in, the serialized sidecar out.
//!
//! The builder parses the blocks it is given itself (pcap records, pcapng blocks), with
//! every length checked against the bytes at hand, so garbage or a cut block ends the index
//! there (the regions before it, and the packets of the region before the bad block, stay
//! indexed) and never panics. A writer that formats the file can instead tell it each packet
//! block it writes ([`IndexBuilder::add_packet`]), which saves reading the block back.
//!
//! Per packet it only reads. The next packet of a flow's burst (known by the raw bytes that
//! fix its flow tuple, or by the tuple) only lengthens the postings' run; a flow seen lately
//! finds its keys' lists in a small cache by tuple; any other packet is parsed. Keys new to
//! a region go into a vector that keeps its capacity from region to region, and go into the
//! region's Bloom filter when the region ends (sorted and deduplicated first when there are
//! no postings, whose lists give each key once a region).

use std::ops::Range;

use corecap_wire::read::ts_to_ns;

use crate::bloom;
use crate::format::{
    CaptureFormat, Identity, FLAG_IDENTIFIED, FLAG_POSTINGS, FLAG_SEQUENTIAL, FLAG_STOPPED,
    HEAD_LEN, MAGIC, MAX_HEADER, REGION_OPAQUE, TRAILER, VERSION,
};
use crate::key::{
    flow_tuple, frame_keys, key_keys, plain_key, raw_flow, raw_flow_of, raw_words, tuple_of_key,
    PacketKeys,
};
use crate::postings::PostingsBuilder;
use corecap_wire::{FlowKey, Transport};

const PCAP_MICROS: u32 = 0xa1b2_c3d4;
const PCAP_NANOS: u32 = 0xa1b2_3c4d;
/// Kuznetzov's modified pcap: microseconds, 8 more bytes per record header.
const PCAP_KUZNETZOV: u32 = 0xa1b2_cd34;
pub(crate) const SHB: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
const BOM: u32 = 0x1a2b_3c4d;
const MAX_CAPLEN: usize = 256 * 1024;
const MAX_BLOCK: usize = 16 * 1024 * 1024;
const MAX_INTERFACES: usize = 65_536;
/// `last_raw` when the packet before has no raw flow (or indexing stopped): no frame's
/// [`raw_words`] are this, since their first word's top byte is 0.
const NO_RAW: [u64; 3] = [u64::MAX; 3];
/// Entries of the repeat filter (a power of two).
const RECENT: usize = 4096;

#[derive(Clone, Copy, Debug)]
struct Iface {
    linktype: u16,
    snaplen: u32,
    tsresol: u8,
    tsoffset: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fmt {
    /// Waiting for the file header.
    Start,
    Pcap {
        be: bool,
        nanos: bool,
        /// Record header length: 16, or 24 for Kuznetzov's format.
        head: usize,
    },
    Pcapng {
        be: bool,
    },
}

/// The sets of the region being built, and the file's postings.
struct Sets {
    keys: Vec<u64>,
    /// Keys seen in the region, direct-mapped (empty with postings, whose lists know).
    recent: Vec<u64>,
    protos: [u64; 4],
    postings: Option<PostingsBuilder>,
    /// File offset of the packet being read, and its block's length.
    offset: u64,
    len: u64,
    /// The keys of the packet being read.
    packet: PacketKeys,
    /// The [`flow_tuple`] of the packet before, in this region (None: it had none, or the
    /// region has no packet yet): a packet with the same one carries the same keys.
    last_tuple: Option<u128>,
    /// The [`raw_flow`] of the packet before, when it had one, `last_tuple` is its flow
    /// tuple and indexing goes on; [`NO_RAW`] else.
    last_raw: [u64; 3],
}

impl Sets {
    /// The packet just read, whose [`raw_flow`] is `raw`, is the one the next compares
    /// with ([`NO_RAW`] when it has none).
    #[inline(always)]
    fn remember_raw(&mut self, raw: [u64; 3]) {
        self.last_raw = if raw[0] != 0 { raw } else { NO_RAW };
    }

    /// The packet just read goes into the postings and the region's sets.
    #[inline]
    fn packet_done(&mut self) {
        for &p in &self.packet.protos {
            self.protos[usize::from(p / 64)] |= 1 << (p % 64);
        }
        if let Some(p) = self.postings.as_mut() {
            p.add_packet(self.offset, self.len, &mut self.packet, &mut self.keys);
            if let Some(t) = self.last_tuple {
                p.remember_flow(t);
            }
            return;
        }
        for &k in &self.packet.keys {
            let slot = &mut self.recent[(k as usize) & (RECENT - 1)];
            if *slot != k {
                *slot = k;
                self.keys.push(k);
            }
        }
    }
}

/// Builds the sidecar index of one capture file, region by region.
pub struct IndexBuilder {
    fmt: Fmt,
    /// Blocks before the first packet (SHB, IDBs), or the pcap global header.
    header: Vec<u8>,
    in_header: bool,
    ifaces: Vec<Iface>,
    /// Index in `ifaces` of interface 0 of the current pcapng section.
    section_base: usize,
    flags: u8,
    stopped: bool,
    /// A bad or cut block came before the region being built began.
    stopped_before: bool,
    /// Counters of the region being built.
    acc: Acc,
    sets: Sets,
    regions: Vec<u8>,
    count: u32,
    covered: u64,
    packets: u64,
    /// `packets` when the region being built began.
    region_first: u64,
    identity: Option<Identity>,
    /// Earliest and latest timestamps over all regions.
    time: Option<(u64, u64)>,
}

impl std::fmt::Debug for IndexBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexBuilder")
            .field("regions", &self.count)
            .field("packets", &self.packets)
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}

impl Default for IndexBuilder {
    fn default() -> Self {
        Self::new()
    }
}

/// Per-region counters.
#[derive(Clone, Copy)]
struct Acc {
    ts_min: u64,
    ts_max: u64,
    packets: u32,
    opaque: bool,
}

impl Acc {
    const EMPTY: Acc = Acc {
        ts_min: u64::MAX,
        ts_max: 0,
        packets: 0,
        opaque: false,
    };
}

/// The frame of the pcapng block at the start of `b`: its type, byte order (an SHB sets
/// its own from the byte-order magic) and total length. None when the block is cut, its
/// length is bad, or the trailing length does not match.
fn block_frame(b: &[u8], mut be: bool) -> Option<(u32, bool, usize)> {
    if b.len() < 12 {
        return None;
    }
    if b[..4] == SHB {
        let bom = [b[8], b[9], b[10], b[11]];
        be = if u32::from_le_bytes(bom) == BOM {
            false
        } else if u32::from_be_bytes(bom) == BOM {
            true
        } else {
            return None;
        };
    }
    let btype = u32_at(b, 0, be);
    let len = u32_at(b, 4, be) as usize;
    if len < 12 || !len.is_multiple_of(4) || len > MAX_BLOCK || len > b.len() {
        return None;
    }
    if u32_at(b, len - 4, be) as usize != len {
        return None;
    }
    Some((btype, be, len))
}

#[inline]
fn u16_at(b: &[u8], at: usize, be: bool) -> u16 {
    let v = [b[at], b[at + 1]];
    if be {
        u16::from_be_bytes(v)
    } else {
        u16::from_le_bytes(v)
    }
}

#[inline]
pub(crate) fn u32_at(b: &[u8], at: usize, be: bool) -> u32 {
    let v = [b[at], b[at + 1], b[at + 2], b[at + 3]];
    if be {
        u32::from_be_bytes(v)
    } else {
        u32::from_le_bytes(v)
    }
}

/// What one block step found.
enum Step {
    /// Consumed this many bytes.
    Next(usize),
    /// A bad or cut block: stop indexing.
    Stop,
}

impl IndexBuilder {
    /// A builder for a new plain file, with postings (`at` ranges are the blocks' own).
    pub fn new() -> Self {
        let mut b = Self::without_postings();
        b.sets.postings = Some(PostingsBuilder::default());
        // The postings say which keys are new to a region; the table is not needed.
        b.sets.recent = Vec::new();
        b.flags |= FLAG_POSTINGS;
        b
    }

    /// A builder without postings: for a sealed file, whose regions are encrypted chunks
    /// and whose packets have no offset of their own in the file.
    pub fn without_postings() -> Self {
        Self {
            fmt: Fmt::Start,
            header: Vec::new(),
            in_header: true,
            ifaces: Vec::new(),
            section_base: 0,
            flags: 0,
            stopped: false,
            stopped_before: false,
            acc: Acc::EMPTY,
            sets: Sets {
                keys: Vec::with_capacity(4096),
                recent: vec![0; RECENT],
                protos: [0; 4],
                postings: None,
                offset: 0,
                len: 0,
                packet: PacketKeys::default(),
                last_tuple: None,
                last_raw: NO_RAW,
            },
            regions: Vec::new(),
            count: 0,
            covered: 0,
            packets: 0,
            region_first: 0,
            identity: None,
            time: None,
        }
    }

    /// The earliest and latest packet timestamps so far (None: no packet).
    pub fn time_range(&self) -> Option<(u64, u64)> {
        self.time
    }

    /// Ties the index to the bytes it covers (see [`Identity::of_file`]), before
    /// [`IndexBuilder::finish`].
    pub fn set_identity(&mut self, id: Identity) {
        self.identity = Some(id);
    }

    /// End of the last region: the bytes the index covers.
    pub fn covered(&self) -> u64 {
        self.covered
    }

    /// Indexes one region. `blocks` are whole pcap records or whole pcapng blocks as they
    /// appear in the file; the first region also starts with the file header (pcap's 24-byte
    /// header, or pcapng's SHB and IDBs). `at` is the byte range of the file that holds these
    /// bytes: for a plain file it has `blocks.len()` bytes; for a sealed file it is the
    /// encrypted chunks' range. After a bad or cut block, later regions are ignored.
    pub fn add_region(&mut self, at: Range<u64>, blocks: &[u8]) {
        self.add_blocks(at.start, blocks);
        self.end_region(at);
    }

    /// Indexes whole blocks of the region being built, as they are written: `start` is the
    /// file offset of `blocks[0]` (a plain file's own bytes). A writer that formats the file
    /// calls this for each block while the block is still in its cache, and
    /// [`IndexBuilder::end_region`] when it hands a buffer to the disk; the index is then the
    /// one [`IndexBuilder::add_region`] would build from those buffers.
    pub fn add_blocks(&mut self, start: u64, blocks: &[u8]) {
        if self.stopped {
            return;
        }
        let mut pos = 0;
        if self.fmt == Fmt::Start && !blocks.is_empty() {
            match self.file_header(blocks) {
                Some(n) => pos = n,
                None => self.stopped = true,
            }
        }
        while !self.stopped && pos < blocks.len() {
            let rest = &blocks[pos..];
            self.sets.offset = start + pos as u64;
            let step = match self.fmt {
                Fmt::Pcap { be, nanos, head } => self.pcap_record(rest, be, nanos, head),
                Fmt::Pcapng { be } => self.pcapng_block(rest, be),
                Fmt::Start => Step::Stop,
            };
            match step {
                Step::Next(n) => pos += n,
                Step::Stop => self.stopped = true,
            }
        }
        if self.stopped {
            self.flags |= FLAG_STOPPED;
            self.sets.last_raw = NO_RAW;
        }
    }

    /// Indexes the packet block just written at `block` (an EPB, or a pcap record) from
    /// what its writer knows, without reading the block: `ts_ns` is its time as the file
    /// holds it, `linktype` its interface's, and `frame` the packet's bytes as the block
    /// holds them (cut to the snap length, with any VLAN tag the writer put back). The
    /// index is then the one [`IndexBuilder::add_blocks`] would build from the block; the
    /// recorder's front end calls this for the packets it formats, which saves reading
    /// each block's header back (half of what the index cost a packet). Inline: the next
    /// packet of a burst costs a few compares in the writer's own code.
    #[inline]
    pub fn add_packet(&mut self, block: Range<u64>, ts_ns: u64, linktype: u16, frame: &[u8]) {
        self.add_packet_parsed(block, ts_ns, linktype, frame, None);
    }

    /// [`IndexBuilder::add_packet`] with the transport layer its writer read from `frame`
    /// already (for the session table and the cutoff): the commonest frame (Ethernet,
    /// IPv4 without options, TCP or UDP, not a fragment) then takes its flow tuple and
    /// keys from the flow key read there instead of reading the frame a second time. The
    /// index is the same either way (a test checks it on every frame of the mixed set).
    #[inline]
    pub fn add_packet_parsed(
        &mut self,
        block: Range<u64>,
        ts_ns: u64,
        linktype: u16,
        frame: &[u8],
        parsed: Option<&Transport<'_>>,
    ) {
        // The next packet of a burst: the raw flow of the packet before, and (with
        // postings) its block right after that packet's. That packet had a raw flow, so
        // indexing is on and its keys are the region's; else `last` is [`NO_RAW`], which
        // no frame's words are. What [`IndexBuilder::packet`] would do for it, with
        // nothing else checked or stored.
        let (w, last) = (raw_words(linktype, frame), &self.sets.last_raw);
        if (w[0] ^ last[0]) | (w[1] ^ last[1]) | (w[2] ^ last[2]) == 0
            && frame.len() <= MAX_CAPLEN
            && self
                .sets
                .postings
                .as_mut()
                .is_none_or(|p| p.extend_run(block.start, block.end))
        {
            self.count(ts_ns);
            return;
        }
        let raw = raw_flow_of(w);
        let plain = parsed.and_then(|t| plain_key(raw, t));
        self.told_packet(block, ts_ns, linktype, frame, raw, plain);
    }

    /// [`IndexBuilder::add_packet`] for a packet that is not the next of a burst; `raw` is
    /// its [`raw_flow`].
    #[inline(always)]
    fn told_packet(
        &mut self,
        block: Range<u64>,
        ts_ns: u64,
        linktype: u16,
        frame: &[u8],
        raw: [u64; 3],
        plain: Option<&FlowKey>,
    ) {
        if self.stopped || self.fmt == Fmt::Start || frame.len() > MAX_CAPLEN {
            self.stop_told();
            return;
        }
        self.in_header = false;
        self.sets.offset = block.start;
        self.sets.len = block.end - block.start;
        match plain {
            Some(k) => self.packet_known(ts_ns, raw, k),
            None => self.packet_raw(ts_ns, linktype, frame, raw),
        }
    }

    /// [`IndexBuilder::packet_raw`] for the commonest frame, whose flow key its writer
    /// read ([`plain_key`]): the tuple and the keys come from that key.
    #[inline(always)]
    fn packet_known(&mut self, ts: u64, raw: [u64; 3], k: &FlowKey) {
        self.count(ts);
        if raw == self.sets.last_raw {
            self.same_keys();
            return;
        }
        let tuple = Some(tuple_of_key(k));
        if tuple == self.sets.last_tuple {
            self.sets.remember_raw(raw);
            self.same_keys();
            return;
        }
        self.other_packet_with(tuple, raw, |s| key_keys(k, s));
    }

    /// What reading a told block would do when there is no file header yet, or its frame is
    /// longer than any block the reader takes: indexing stops.
    #[cold]
    #[inline(never)]
    fn stop_told(&mut self) {
        if !self.stopped {
            self.stopped = true;
            self.flags |= FLAG_STOPPED;
            self.sets.last_raw = NO_RAW;
        }
    }

    /// Ends the region being built: the blocks given since the last region, which `at`
    /// holds. A region that began after a bad or cut block is not recorded.
    pub fn end_region(&mut self, at: Range<u64>) {
        let mut acc = std::mem::replace(&mut self.acc, Acc::EMPTY);
        // The region's packets: those indexed since the last region ended.
        acc.packets = u32::try_from(self.packets - self.region_first).unwrap_or(u32::MAX);
        self.region_first = self.packets;
        if self.stopped_before {
            return;
        }
        self.stopped_before = self.stopped;
        if self.fmt != Fmt::Start {
            self.emit_region(at, &acc);
        }
    }

    /// Packets indexed so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Whether a bad or cut block ended indexing.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Reads the pcap global header, or recognizes a pcapng SHB (read as a block); returns
    /// the bytes consumed, or None when the bytes are no capture file.
    fn file_header(&mut self, b: &[u8]) -> Option<usize> {
        if b.len() >= 4 && b[..4] == SHB {
            // The endianness is set by the SHB itself.
            self.fmt = Fmt::Pcapng { be: false };
            return Some(0);
        }
        if b.len() < 24 {
            return None;
        }
        let le = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let be = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let (be, nanos, head) = match (le, be) {
            (PCAP_MICROS, _) => (false, false, 16),
            (PCAP_NANOS, _) => (false, true, 16),
            (PCAP_KUZNETZOV, _) => (false, false, 24),
            (_, PCAP_MICROS) => (true, false, 16),
            (_, PCAP_NANOS) => (true, true, 16),
            (_, PCAP_KUZNETZOV) => (true, false, 24),
            _ => return None,
        };
        if u16_at(b, 4, be) != 2 {
            return None;
        }
        self.ifaces.push(Iface {
            linktype: (u32_at(b, 20, be) & 0xffff) as u16,
            snaplen: u32_at(b, 16, be),
            tsresol: if nanos { 9 } else { 6 },
            tsoffset: 0,
        });
        self.header.extend_from_slice(&b[..24]);
        self.in_header = false;
        self.fmt = Fmt::Pcap { be, nanos, head };
        Some(24)
    }

    fn pcap_record(&mut self, b: &[u8], be: bool, nanos: bool, head: usize) -> Step {
        if b.len() < head {
            return Step::Stop;
        }
        let secs = u64::from(u32_at(b, 0, be));
        let frac = u64::from(u32_at(b, 4, be));
        let caplen = u32_at(b, 8, be) as usize;
        if caplen > MAX_CAPLEN || b.len() < head + caplen {
            return Step::Stop;
        }
        let frac_ns = if nanos { frac } else { frac * 1000 };
        let ts = secs.saturating_mul(1_000_000_000).saturating_add(frac_ns);
        let lt = self.ifaces.first().map_or(0, |i| i.linktype);
        self.sets.len = (head + caplen) as u64;
        self.packet(ts, lt, &b[head..head + caplen]);
        Step::Next(head + caplen)
    }

    fn pcapng_block(&mut self, b: &[u8], be: bool) -> Step {
        let Some((btype, be, len)) = block_frame(b, be) else {
            return Step::Stop;
        };
        let block = &b[..len];
        let body = &block[8..len - 4];
        self.sets.len = len as u64;
        let packet_block = matches!(btype, 2 | 3 | 6);
        if self.in_header && packet_block {
            self.in_header = false;
        }
        let read = match btype {
            _ if b[..4] == SHB => self.section_header(body, be),
            1 => self.interface_description(body, be),
            6 | 2 => self.packet_block(body, be, btype == 2),
            3 => self.simple_packet(body, be),
            _ => Some(()),
        };
        if read.is_none() {
            return Step::Stop;
        }
        if self.in_header {
            if self.header.len() + len > MAX_HEADER {
                self.flags |= FLAG_SEQUENTIAL;
                self.in_header = false;
            } else {
                self.header.extend_from_slice(block);
            }
        }
        Step::Next(len)
    }

    /// A Section Header Block's body: starts a section in its own byte order. None when
    /// it is too short or no version 1.
    fn section_header(&mut self, body: &[u8], be: bool) -> Option<()> {
        if body.len() < 16 || u16_at(body, 4, be) != 1 {
            return None;
        }
        if !self.in_header {
            self.flags |= FLAG_SEQUENTIAL;
        }
        self.fmt = Fmt::Pcapng { be };
        self.section_base = self.ifaces.len();
        Some(())
    }

    /// An Interface Description Block's body: adds the interface with its link type,
    /// snap length, `if_tsresol` and `if_tsoffset`. None when it is cut or one too many.
    fn interface_description(&mut self, body: &[u8], be: bool) -> Option<()> {
        if body.len() < 8 || self.ifaces.len() >= MAX_INTERFACES {
            return None;
        }
        if !self.in_header {
            self.flags |= FLAG_SEQUENTIAL;
        }
        let mut iface = Iface {
            linktype: u16_at(body, 0, be),
            snaplen: u32_at(body, 4, be),
            tsresol: 6,
            tsoffset: 0,
        };
        let mut o = 8;
        while body.len() >= o + 4 {
            let code = u16_at(body, o, be);
            let olen = usize::from(u16_at(body, o + 2, be));
            if code == 0 {
                break;
            }
            let v = body.get(o + 4..o + 4 + olen)?;
            match (code, olen) {
                (9, 1..) => iface.tsresol = v[0],
                (14, 8) => iface.tsoffset = u64_le_be(v, be) as i64,
                _ => {}
            }
            o += 4 + ((olen + 3) & !3);
        }
        self.ifaces.push(iface);
        Some(())
    }

    /// An Enhanced Packet Block's body, or an obsolete Packet Block's (`obsolete`: a
    /// 16-bit interface id). None when it is cut or names no known interface.
    fn packet_block(&mut self, body: &[u8], be: bool, obsolete: bool) -> Option<()> {
        if body.len() < 20 {
            return None;
        }
        let local = if obsolete {
            usize::from(u16_at(body, 0, be))
        } else {
            u32_at(body, 0, be) as usize
        };
        let iface = self.ifaces.get(self.section_base.saturating_add(local))?;
        let ts = (u64::from(u32_at(body, 4, be)) << 32) | u64::from(u32_at(body, 8, be));
        let caplen = u32_at(body, 12, be) as usize;
        if caplen > MAX_CAPLEN || 20 + caplen > body.len() {
            return None;
        }
        let (lt, ts) = (iface.linktype, ts_to_ns(ts, iface.tsresol, iface.tsoffset));
        self.packet(ts, lt, &body[20..20 + caplen]);
        Some(())
    }

    /// A Simple Packet Block's body: a packet on the section's first interface, with no
    /// time stamp. None when it is cut or the section has no interface.
    fn simple_packet(&mut self, body: &[u8], be: bool) -> Option<()> {
        if body.len() < 4 {
            return None;
        }
        let iface = self.ifaces.get(self.section_base)?;
        let orig = u32_at(body, 0, be) as usize;
        let mut caplen = orig.min(body.len() - 4);
        if iface.snaplen != 0 {
            caplen = caplen.min(iface.snaplen as usize);
        }
        if caplen > MAX_CAPLEN {
            return None;
        }
        let lt = iface.linktype;
        self.packet(0, lt, &body[4..4 + caplen]);
        Some(())
    }

    /// One packet. The next packet of a burst (its flow's, right after the one before)
    /// only extends the postings' run: that path is kept small and inline, and the rest
    /// (a packet of another flow, or after another block) is a call.
    #[inline(always)]
    fn packet(&mut self, ts: u64, linktype: u16, data: &[u8]) {
        self.packet_raw(ts, linktype, data, raw_flow(linktype, data));
    }

    /// [`IndexBuilder::packet`] for a frame whose [`raw_flow`] is `raw`.
    #[inline(always)]
    fn packet_raw(&mut self, ts: u64, linktype: u16, data: &[u8], raw: [u64; 3]) {
        self.count(ts);
        if raw == self.sets.last_raw {
            self.same_keys();
            return;
        }
        let tuple = flow_tuple(linktype, data);
        if tuple.is_some() && tuple == self.sets.last_tuple {
            self.sets.remember_raw(raw);
            self.same_keys();
            return;
        }
        self.other_packet(tuple, raw, linktype, data);
    }

    /// Counts a packet at time `ts` into the file and the region's time range.
    #[inline(always)]
    fn count(&mut self, ts: u64) {
        self.acc.ts_min = self.acc.ts_min.min(ts);
        self.acc.ts_max = self.acc.ts_max.max(ts);
        self.packets += 1;
    }

    /// A packet with the keys of the packet before, which the region's sets already hold:
    /// only the postings hear of it.
    #[inline(always)]
    fn same_keys(&mut self) {
        let sets = &mut self.sets;
        if let Some(p) = sets.postings.as_mut() {
            if !p.extend_run(sets.offset, sets.offset + sets.len) {
                p.next_run(sets.offset, sets.len, &mut sets.keys);
            }
        }
    }

    /// A packet that does not extend the run: its keys are parsed (unless its flow tuple
    /// is the last packet's) and go into the region's sets and the postings.
    #[inline(never)]
    fn other_packet(&mut self, tuple: Option<u128>, raw: [u64; 3], linktype: u16, data: &[u8]) {
        self.other_packet_with(tuple, raw, |s| frame_keys(linktype, data, s));
    }

    /// [`IndexBuilder::other_packet`] with the packet's keys put in by `keys` (false: a
    /// link type the parser does not know).
    #[inline(always)]
    fn other_packet_with(
        &mut self,
        tuple: Option<u128>,
        raw: [u64; 3],
        keys: impl FnOnce(&mut PacketKeys) -> bool,
    ) {
        self.sets.last_tuple = tuple;
        self.sets.remember_raw(raw);
        let sets = &mut self.sets;
        if let (Some(t), Some(p)) = (tuple, sets.postings.as_mut()) {
            // A flow seen lately: its lists are known, and its protocol is its only one.
            if let Some(proto) = p.add_flow_packet(t, sets.offset, sets.len, &mut sets.keys) {
                sets.protos[usize::from(proto / 64)] |= 1 << (proto % 64);
                return;
            }
        }
        self.sets.packet.clear();
        if !keys(&mut self.sets.packet) {
            self.acc.opaque = true;
        }
        self.sets.packet_done();
    }

    /// Appends the region entry and its filter, and clears the sets for the next region.
    fn emit_region(&mut self, at: Range<u64>, acc: &Acc) {
        if acc.packets > 0 {
            let (a, b) = self.time.unwrap_or((u64::MAX, 0));
            self.time = Some((a.min(acc.ts_min), b.max(acc.ts_max)));
        }
        if let Some(p) = self.sets.postings.as_mut() {
            // The run in progress ends with the region: its keys go into this region's set.
            p.next_region(&mut self.sets.keys);
        }
        let keys = &mut self.sets.keys;
        if self.sets.postings.is_some() {
            // Each list gave its key once, as the region first saw it: no key twice, and a
            // Bloom set does not care for order.
            debug_assert!({
                let mut k = keys.clone();
                k.sort_unstable();
                k.windows(2).all(|w| w[0] != w[1])
            });
        } else {
            keys.sort_unstable();
            keys.dedup();
        }
        let bits = bloom::bits_for(keys.len());
        let out = &mut self.regions;
        out.extend_from_slice(&at.start.to_le_bytes());
        out.extend_from_slice(&at.end.max(at.start).to_le_bytes());
        out.extend_from_slice(&acc.ts_min.to_le_bytes());
        out.extend_from_slice(&acc.ts_max.to_le_bytes());
        out.extend_from_slice(&acc.packets.to_le_bytes());
        let flags = if acc.opaque { REGION_OPAQUE } else { 0 };
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&(bits as u32).to_le_bytes());
        out.extend_from_slice(&(keys.len() as u32).to_le_bytes());
        for p in self.sets.protos {
            out.extend_from_slice(&p.to_le_bytes());
        }
        let start = out.len();
        out.resize(start + bits / 8, 0);
        if bits > 0 {
            // Build the filter in place, as little-endian words.
            let mut words = vec![0u64; bits / 64];
            for &k in keys.iter() {
                bloom::insert(&mut words, k);
            }
            for (i, w) in words.iter().enumerate() {
                out[start + i * 8..start + i * 8 + 8].copy_from_slice(&w.to_le_bytes());
            }
        }
        keys.clear();
        if self.sets.postings.is_none() {
            self.sets.recent.fill(0);
        }
        // The next region's sets start empty: its first packet is parsed.
        self.sets.last_tuple = None;
        self.sets.last_raw = NO_RAW;
        self.sets.protos = [0; 4];
        self.count += 1;
        self.covered = self.covered.max(at.end);
    }

    /// The serialized sidecar (unsealed).
    pub fn finish(self) -> Vec<u8> {
        let format = match self.fmt {
            Fmt::Start => CaptureFormat::Unknown,
            Fmt::Pcap { .. } => CaptureFormat::Pcap,
            Fmt::Pcapng { .. } => CaptureFormat::Pcapng,
        };
        let hpad = (8 - self.header.len() % 8) % 8;
        let mut out =
            Vec::with_capacity(HEAD_LEN + self.header.len() + hpad + self.regions.len() + 8);
        let mut flags = self.flags;
        if self.identity.is_some() {
            flags |= FLAG_IDENTIFIED;
        }
        if self.stopped {
            // Packets after the bad block are in no list: the postings cannot say "absent".
            flags &= !FLAG_POSTINGS;
        }
        let id = self.identity.unwrap_or(Identity { first: 0, last: 0 });
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.push(format.id());
        out.push(flags);
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(&self.covered.to_le_bytes());
        out.extend_from_slice(&(self.header.len() as u32).to_le_bytes());
        out.extend_from_slice(&bloom::HASHES.to_le_bytes());
        out.extend_from_slice(&id.first.to_le_bytes());
        out.extend_from_slice(&id.last.to_le_bytes());
        out.extend_from_slice(&self.header);
        out.resize(out.len() + hpad, 0);
        out.extend_from_slice(&self.regions);
        let mut area = Vec::new();
        match (flags & FLAG_POSTINGS != 0, self.sets.postings) {
            (true, Some(p)) => p.finish(&mut out, &mut area),
            _ => PostingsBuilder::default().finish(&mut out, &mut area),
        }
        // The head (all but the lists) is checked as one; each list by its own CRC, so a
        // query reads the head and only the lists it looks up.
        let head_end = out.len() as u64;
        let crc = crc32fast::hash(&out);
        out.reserve_exact(area.len() + 7 + 8 + 4 + TRAILER.len());
        out.extend_from_slice(&area);
        out.resize(out.len() + (8 - area.len() % 8) % 8, 0);
        out.extend_from_slice(&head_end.to_le_bytes());
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(TRAILER);
        out
    }
}

fn u64_le_be(v: &[u8], be: bool) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&v[..8]);
    if be {
        u64::from_be_bytes(a)
    } else {
        u64::from_le_bytes(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Index, IndexError};
    use crate::key;
    use crate::key::tests::udp4;
    use crate::key::{port_key, v4_key, vlan_key};
    use crate::Predicate;
    use corecap_wire::{Epb, InterfaceDesc, PcapWriter, PcapngWriter};

    /// A pcap file of `n` UDP packets from 10.0.0.1 to 10.1.0.i, one per second from t0.
    fn pcap(n: u8) -> Vec<u8> {
        let mut w = PcapWriter::new(Vec::new(), 1, 65535).unwrap();
        for i in 0..n {
            let f = udp4([10, 0, 0, 1], [10, 1, 0, i], 1024 + u16::from(i), 53, None);
            let ts = 1_700_000_000_000_000_000 + u64::from(i) * 1_000_000_000;
            w.write_packet(ts, &f, f.len() as u32, None).unwrap();
        }
        w.into_inner()
    }

    /// A pcapng file: SHB, IDB, then packets with VLAN 100 and epb options.
    fn pcapng(n: u8) -> Vec<u8> {
        let mut w =
            PcapngWriter::new(Vec::new(), "test", &[InterfaceDesc::ethernet("eth0", 0)]).unwrap();
        for i in 0..n {
            let f = udp4([10, 0, 0, 2], [10, 2, 0, i], 2000, 80, None);
            w.write_epb(&Epb {
                ts_ns: 1_700_000_000_000_000_000 + u64::from(i),
                data: &f,
                orig_len: f.len() as u32,
                vlan_tci: Some(100),
                queue: Some(1),
                hash: Some(7),
                ..Epb::default()
            })
            .unwrap();
        }
        w.into_inner()
    }

    fn one_region(file: &[u8]) -> Index {
        let mut b = IndexBuilder::new();
        b.add_region(0..file.len() as u64, file);
        Index::parse(&b.finish()).unwrap()
    }

    #[test]
    fn test_parse_pcap() {
        let file = pcap(10);
        let ix = one_region(&file);
        assert_eq!(ix.format, CaptureFormat::Pcap);
        assert_eq!(ix.header, file[..24]);
        assert_eq!(ix.covered, file.len() as u64);
        let r = &ix.regions[0];
        assert_eq!(r.packets, 10);
        assert_eq!(r.ts_min, 1_700_000_000_000_000_000);
        assert_eq!(r.ts_max, 1_700_000_009_000_000_000);
        assert!(r.may_have_key(v4_key([10, 1, 0, 9])) && r.may_have_key(port_key(1033)));
        assert!(r.may_have_proto(17) && !r.may_have_proto(6));
        assert!(!r.opaque() && !ix.stopped() && ix.random_access());
        // 10.0.0.1 + ten destinations + ports 53 and 1024..=1033.
        assert_eq!(r.keys, 1 + 10 + 1 + 10);
    }

    /// `pcap(n)` rewritten as Kuznetzov's modified pcap (microseconds, 8 more bytes after
    /// each record header) in either byte order.
    fn kuznetzov(n: u8, big: bool) -> Vec<u8> {
        let p = pcap(n);
        let conv = |b: &[u8]| -> Vec<u8> {
            let v = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            if big {
                v.to_be_bytes().to_vec()
            } else {
                v.to_le_bytes().to_vec()
            }
        };
        let mut out = conv(&PCAP_KUZNETZOV.to_le_bytes());
        for at in [4, 6] {
            let v = u16::from_le_bytes([p[at], p[at + 1]]);
            out.extend_from_slice(&if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            });
        }
        for at in (8..24).step_by(4) {
            out.extend(conv(&p[at..at + 4]));
        }
        let mut at = 24;
        while at < p.len() {
            let caplen = u32::from_le_bytes([p[at + 8], p[at + 9], p[at + 10], p[at + 11]]);
            for k in 0..4 {
                let mut f = p[at + 4 * k..at + 4 * k + 4].to_vec();
                if k == 1 {
                    // ns -> us
                    let v = u32::from_le_bytes([f[0], f[1], f[2], f[3]]) / 1000;
                    f = v.to_le_bytes().to_vec();
                }
                out.extend(conv(&f));
            }
            out.extend_from_slice(&[0, 0, 0, 3, 8, 0, 0, 0]);
            out.extend_from_slice(&p[at + 16..at + 16 + caplen as usize]);
            at += 16 + caplen as usize;
        }
        out
    }

    #[test]
    fn test_regions_are_the_same_with_and_without_postings() {
        // The postings tell the builder which keys are new to a region; without them a
        // table of recent keys does. Either way each region's sets hold the same keys.
        for file in [pcap(200), pcapng(200)] {
            let (mut with, mut without) = (IndexBuilder::new(), IndexBuilder::without_postings());
            let mut at = 0;
            // Regions of uneven sizes, cut at block boundaries by the pcap record size.
            for (k, chunk) in split_blocks(&file).chunks(7).enumerate() {
                let len: usize = chunk.iter().map(|c| c.len()).sum();
                let bytes: Vec<u8> = chunk.concat();
                let r = at as u64..(at + len) as u64;
                with.add_region(r.clone(), &bytes);
                without.add_region(r, &bytes);
                at += len;
                assert_eq!(with.regions, without.regions, "region {k}");
            }
            assert!(with.count > 10);
        }
    }

    /// The file's header and each packet's block or record, in order.
    fn split_blocks(file: &[u8]) -> Vec<&[u8]> {
        let mut out = Vec::new();
        let pcapng = file[..4] == SHB;
        let mut pos = if pcapng { 0 } else { 24 };
        if !pcapng {
            out.push(&file[..24]);
        }
        while pos < file.len() {
            let len = if pcapng {
                u32::from_le_bytes(file[pos + 4..pos + 8].try_into().unwrap()) as usize
            } else {
                16 + u32::from_le_bytes(file[pos + 8..pos + 12].try_into().unwrap()) as usize
            };
            out.push(&file[pos..pos + len]);
            pos += len;
        }
        out
    }

    #[test]
    fn test_parse_kuznetzov() {
        let plain = one_region(&pcap(10));
        for big in [false, true] {
            let file = kuznetzov(10, big);
            let ix = one_region(&file);
            assert_eq!(ix.covered, file.len() as u64);
            assert!(!ix.stopped());
            let (r, want) = (&ix.regions[0], &plain.regions[0]);
            assert_eq!(
                (r.packets, r.ts_min, r.ts_max),
                (10, want.ts_min, want.ts_max)
            );
            assert_eq!(r.keys, want.keys);
            // The splitter cuts the same file into regions at record boundaries.
            let built = crate::index_reader(&file[..], 4096).unwrap();
            assert_eq!((built.packets, built.cut_short), (10, None));
            assert_eq!(built.covered, file.len() as u64);
            // And the capture reader reads it.
            let mut rd = corecap_wire::CaptureReader::new(&file[..]).unwrap();
            let mut n = 0;
            while rd.next_packet().unwrap().is_some() {
                n += 1;
            }
            assert_eq!(n, 10);
        }
    }

    #[test]
    fn test_parse_pcapng_regions() {
        let file = pcapng(20);
        // Header = SHB + IDB; cut packets into two regions at a block boundary.
        let mut r = corecap_wire::CaptureReader::new(&file[..]).unwrap();
        r.next_packet().unwrap();
        let first_pkt = r.offset() as usize;
        let blk = {
            r.next_packet().unwrap();
            r.offset() as usize - first_pkt
        };
        let header = first_pkt - blk;
        let mid = header + 10 * blk;
        let mut b = IndexBuilder::new();
        b.add_region(0..mid as u64, &file[..mid]);
        b.add_region(mid as u64..file.len() as u64, &file[mid..]);
        let ix = Index::parse(&b.finish()).unwrap();
        assert_eq!(ix.format, CaptureFormat::Pcapng);
        assert_eq!(ix.header, file[..header]);
        assert_eq!(ix.regions.len(), 2);
        assert_eq!(ix.regions[1].at, mid as u64..file.len() as u64);
        assert_eq!((ix.regions[0].packets, ix.regions[1].packets), (10, 10));
        assert!(ix.regions[0].may_have_key(vlan_key(100)));
        let q = Predicate::Host4([10, 2, 0, 15]);
        assert!(q.may_match(&ix.regions[1]));
        assert_eq!(ix.regions[1].ts_min, 1_700_000_000_000_000_010);
        assert!(ix.random_access());
    }

    /// Offsets of the packet blocks of a capture file, and its end.
    fn block_starts(file: &[u8]) -> Vec<usize> {
        let mut r = corecap_wire::CaptureReader::new(file).unwrap();
        let mut at = vec![];
        let mut prev = None;
        while r.next_packet().unwrap().is_some() {
            let end = r.offset() as usize;
            if let Some(p) = prev {
                at.push(p);
            }
            prev = Some(end);
        }
        at.push(prev.unwrap());
        at
    }

    #[test]
    fn test_blocks_as_written_index_as_the_buffers_do() {
        // A writer indexes each block as it formats it (the header's blocks in one call)
        // and ends a region per buffer: the sidecar is the one built from the buffers.
        for file in [pcap(40), pcapng(40)] {
            let ends = block_starts(&file);
            let first_end = ends[0];
            let blk = ends[1] - ends[0];
            let header = first_end - blk;
            let mut bounds = vec![header];
            bounds.extend(ends.iter().copied());
            for per in [1usize, 3, 7, 40] {
                let mut whole = IndexBuilder::new();
                let mut streamed = IndexBuilder::new();
                streamed.add_blocks(0, &file[..header]);
                let mut region_start = 0usize;
                for (i, w) in bounds.windows(2).enumerate() {
                    streamed.add_blocks(w[0] as u64, &file[w[0]..w[1]]);
                    if (i + 1) % per == 0 || w[1] == file.len() {
                        let at = region_start as u64..w[1] as u64;
                        whole.add_region(at.clone(), &file[region_start..w[1]]);
                        streamed.end_region(at);
                        region_start = w[1];
                    }
                }
                assert_eq!(whole.finish(), streamed.finish(), "{per} blocks a region");
            }
        }
    }

    /// A frame of traffic that runs the builder's shortcuts: bursts, replies (the flow's
    /// other direction), later fragments, options, cut captures, VLAN tags and ARP.
    fn mixed_frame(i: u32, x: u32) -> Vec<u8> {
        let flow = x % 7;
        let (a, b) = ([10, 0, 0, 1 + flow as u8], [10, 1, 0, (x % 3) as u8]);
        let (sp, dp) = (1000 + (x >> 4) as u16 % 5, 53 + (x % 2) as u16);
        let mut f = match (x >> 8) % 10 {
            0 => key::tests::udp4(b, a, dp, sp, None),
            1 => key::tests::udp4(a, b, sp, dp, Some(7 + (x % 2) as u16)),
            2 => {
                // A later fragment: no ports.
                let mut f = key::tests::udp4(a, b, sp, dp, None);
                f[20] = 0x00;
                f[21] = 0x08 + (x % 2) as u8;
                f
            }
            3 => {
                // ARP from a.
                let mut f = vec![0u8; 12];
                f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
                f.extend_from_slice(&[0; 6]);
                f.extend_from_slice(&a);
                f.extend_from_slice(&[0; 6]);
                f.extend_from_slice(&b);
                f
            }
            4 => {
                // TCP with 4 bytes of IP options: the ports move.
                let mut f = key::tests::udp4(a, b, sp, dp, None);
                f[14] = 0x46;
                f[23] = 6;
                f.splice(34..34, [1, 1, 1, 0]);
                f
            }
            _ => key::tests::udp4(a, b, sp, dp, None),
        };
        // Some captures cut short: within the ports, within the addresses.
        match i % 97 {
            5 => f.truncate(36),
            6 => f.truncate(30),
            _ => f.resize(f.len().max(60), 0),
        }
        f
    }

    #[test]
    fn test_every_keys_spans_are_the_packets_whose_parse_has_it() {
        // Bursts of 1 to 9 packets of a flow, flows that come back (the flow cache), some
        // packets on a raw-IP interface (the same keys, no flow tuple); regions end every
        // 37 packets (mid-burst); enough packets for common keys to turn dense.
        let ifaces = [
            InterfaceDesc::ethernet("eth0", 0),
            InterfaceDesc {
                linktype: 101,
                ..InterfaceDesc::ethernet("tun0", 0)
            },
        ];
        let mut w = PcapngWriter::new(Vec::new(), "test", &ifaces).unwrap();
        let (mut x, mut left) = (0x1234_5678u32, 0);
        let mut frames = Vec::new();
        let mut at = vec![w.get_ref().len() as u64];
        for i in 0..6000u32 {
            if left == 0 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                left = 1 + x % 9;
            }
            left -= 1;
            // First flows A, B, A (from the flow cache), then B's packet on the raw-IP
            // interface: parsed, with B's keys, so it must not keep A's lists.
            let (a, b) = (([10, 9, 0, 1], 4001), ([10, 9, 0, 2], 4002));
            let mut f = match i {
                0 | 2 => udp4(a.0, [10, 9, 9, 9], a.1, 53, None),
                1 | 3 => udp4(b.0, [10, 9, 9, 9], b.1, 53, None),
                _ => mixed_frame(i, x),
            };
            // One packet in 11 on the raw-IP interface: its IP packet alone.
            let raw = i % 11 == 3 && f.len() > 14 && f[12..14] == [0x08, 0x00];
            if raw {
                f.drain(..14);
            }
            w.write_epb(&Epb {
                if_id: u32::from(raw),
                ts_ns: u64::from(i) * 1000,
                data: &f,
                orig_len: f.len() as u32,
                ..Epb::default()
            })
            .unwrap();
            at.push(w.get_ref().len() as u64);
            frames.push((if raw { 101 } else { 1 }, f));
        }
        let file = w.into_inner();
        // Read back from the blocks, and told by the writer (the header's blocks read,
        // each packet told): the same sidecar, byte for byte.
        // And told with the transport layer the writer read for its sessions.
        let (mut b, mut told) = (IndexBuilder::new(), IndexBuilder::new());
        let mut parsed = IndexBuilder::new();
        b.add_blocks(0, &file[..at[0] as usize]);
        told.add_blocks(0, &file[..at[0] as usize]);
        parsed.add_blocks(0, &file[..at[0] as usize]);
        let mut region_start = 0;
        let mut shared = 0;
        for i in 0..frames.len() {
            b.add_blocks(at[i], &file[at[i] as usize..at[i + 1] as usize]);
            let (linktype, f) = &frames[i];
            let ts = u64::from(i as u32) * 1000;
            told.add_packet(at[i]..at[i + 1], ts, *linktype, f);
            let t = corecap_wire::Link::of(*linktype).transport(f, None).ok();
            shared += usize::from(
                t.as_ref()
                    .is_some_and(|t| plain_key(raw_flow(*linktype, f), t).is_some()),
            );
            parsed.add_packet_parsed(at[i]..at[i + 1], ts, *linktype, f, t.as_ref());
            if i % 37 == 36 || i + 1 == frames.len() {
                b.end_region(region_start..at[i + 1]);
                told.end_region(region_start..at[i + 1]);
                parsed.end_region(region_start..at[i + 1]);
                region_start = at[i + 1];
            }
        }
        // Most frames are of the shape whose keys come from the transport layer.
        assert!(shared > frames.len() / 2, "{shared}");
        let sidecar = b.finish();
        assert!(told.finish() == sidecar, "told and read back differ");
        assert!(
            parsed.finish() == sidecar,
            "told with the transport and read back differ"
        );
        let ix = Index::parse(&sidecar).unwrap();
        // Every key and protocol, by a parse of each packet alone.
        let mut want: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
        for (i, (linktype, f)) in frames.iter().enumerate() {
            let mut k = key::tests::Keys::default();
            frame_keys(*linktype, f, &mut k);
            let mut all: Vec<u64> = k.keys.clone();
            all.extend(k.protos.iter().map(|p| key::proto_key(*p)));
            all.sort_unstable();
            all.dedup();
            for key in all {
                want.entry(key).or_default().push(at[i]);
            }
            // The region's Bloom set holds the packet's keys.
            let r = ix.regions.iter().find(|r| r.at.contains(&at[i])).unwrap();
            assert!(k.keys.iter().all(|key| r.may_have_key(*key)), "packet {i}");
            assert!(k.protos.iter().all(|p| r.may_have_proto(*p)), "packet {i}");
        }
        assert_eq!(ix.postings.len(), want.len());
        let (mut runs, mut dense) = (0, 0);
        for (key, offsets) in want {
            let got = match ix.postings.lookup(key) {
                crate::Lookup::Spans(v) => v,
                crate::Lookup::Dense => {
                    dense += 1;
                    assert!(offsets.len() as u64 * 16 > 6000, "{key:x} listed dense");
                    continue;
                }
                other => panic!("{key:x}: {other:?}"),
            };
            runs += got.iter().filter(|s| s.packets > 1).count();
            let listed: Vec<u64> = at[..frames.len()]
                .iter()
                .copied()
                .filter(|o| got.iter().any(|s| s.start <= *o && *o < s.end))
                .collect();
            assert_eq!(listed, offsets, "key {key:x}");
            let counted: u64 = got.iter().map(|s| s.packets).sum();
            assert_eq!(counted, offsets.len() as u64, "key {key:x}");
            // No span crosses a region's end.
            for s in &got {
                let r = ix.regions.iter().find(|r| r.at.contains(&s.start)).unwrap();
                assert!(s.end <= r.at.end, "{s:?} crosses {:?}", r.at);
            }
        }
        assert!(runs > 100 && dense > 0, "runs {runs}, dense {dense}");
    }

    #[test]
    fn test_the_head_alone_answers_as_the_whole_sidecar_reading_only_its_lists() {
        let mut w = PcapWriter::new(Vec::new(), 1, 65535).unwrap();
        for i in 0..5000u32 {
            let f = mixed_frame(i, (i / 4).wrapping_mul(2_654_435_761));
            w.write_packet(u64::from(i), &f, f.len() as u32, None)
                .unwrap();
        }
        let file = w.into_inner();
        let mut b = IndexBuilder::new();
        b.add_region(0..file.len() as u64, &file);
        let side = b.finish();
        let whole = Index::parse(&side).unwrap();
        let trailer = &side[side.len() - crate::format::TRAILER_LEN..];
        let head_len = Index::head_len(trailer).unwrap() as usize;
        let head = Index::parse_head(&side[..head_len], trailer).unwrap();
        assert_eq!(head.regions, whole.regions);
        let mut read = 0;
        let mut listed = 0;
        for k in whole.postings.keys() {
            listed += usize::from(matches!(whole.postings.lookup(k), crate::Lookup::Spans(_)));
            let got = head.postings.lookup_with(k, |at, len| {
                read += len;
                side.get(at as usize..at as usize + len).map(<[u8]>::to_vec)
            });
            assert_eq!(got, whole.postings.lookup(k), "key {k:x}");
        }
        assert!(listed > 10, "{listed} keys listed");
        assert_eq!(
            read,
            side.len() - head_len - crate::format::TRAILER_LEN - (8 - read % 8) % 8
        );
        // A head that is not the trailer's, or damaged, is refused.
        assert!(Index::parse_head(&side[..head_len - 8], trailer).is_err());
        let mut bad = side[..head_len].to_vec();
        bad[60] ^= 1;
        assert!(Index::parse_head(&bad, trailer).is_err());
    }

    #[test]
    fn test_a_format_2_sidecar_still_reads_as_the_builder_of_today_answers() {
        // A sidecar of format 2 (one offset a packet in each list), `pcap(20)`, one
        // region: it still parses, and its lookups answer what today's sidecar answers.
        let old = include_bytes!("../tests/data/v2-pcap20.idx");
        assert_eq!(u16::from_le_bytes([old[8], old[9]]), 2);
        let mut b = IndexBuilder::new();
        let f = pcap(20);
        b.add_region(0..f.len() as u64, &f);
        let new = Index::parse(&b.finish()).expect("it parses");
        let old = Index::parse(old).expect("it parses");
        assert!(old.has_postings() && new.has_postings());
        assert_eq!(old.regions, new.regions);
        let seventh = 24 + 7 * (pcap(1).len() as u64 - 24);
        assert_eq!(
            old.postings.lookup(v4_key([10, 1, 0, 7])),
            crate::Lookup::Spans(vec![crate::Span::packet(seventh)])
        );
        for k in old.postings.keys() {
            let (o, n) = (old.postings.lookup(k), new.postings.lookup(k));
            let offsets = |l: crate::Lookup| match l {
                crate::Lookup::Spans(v) => (v.iter().map(|s| s.packets).sum::<u64>(), v[0].start),
                other => panic!("{other:?}"),
            };
            match (&o, &n) {
                (crate::Lookup::Dense, crate::Lookup::Dense) => {}
                _ => assert_eq!(offsets(o), offsets(n), "key {k:x}"),
            }
        }
        assert_eq!(
            old.postings.lookup(v4_key([10, 9, 9, 9])),
            crate::Lookup::Absent
        );
    }

    #[test]
    fn test_emit_round_trip_and_pruning() {
        let ix = one_region(&pcap(50));
        let r = &ix.regions[0];
        let absent = (0..1000u32)
            .filter(|i| r.may_have_key(v4_key((0xc0a8_0000 + i).to_be_bytes())))
            .count();
        assert!(absent < 50, "false positives {absent} of 1000");
        let tcp53 = Predicate::And(vec![Predicate::Proto(6), Predicate::Port(53)]);
        assert!(!tcp53.may_match(r));
        assert!(!Predicate::Vlan(5).may_match(r));
    }

    #[test]
    fn test_truncated_file_indexes_whole_blocks() {
        let file = pcapng(5);
        let full = one_region(&file);
        for cut in 0..file.len() {
            let mut b = IndexBuilder::new();
            b.add_region(0..cut as u64, &file[..cut]);
            let bytes = b.finish();
            let ix = Index::parse(&bytes).unwrap();
            assert!(ix.packets() <= 5);
            if cut < file.len() {
                assert!(ix.stopped() || cut == 0 || ix.packets() < 5, "cut {cut}");
            }
        }
        assert_eq!(full.packets(), 5);
        // A pcap cut inside its last record keeps the others.
        let p = pcap(3);
        let mut b = IndexBuilder::new();
        b.add_region(0..p.len() as u64 - 1, &p[..p.len() - 1]);
        let ix = Index::parse(&b.finish()).unwrap();
        assert_eq!(ix.packets(), 2);
        assert!(ix.stopped());
    }

    #[test]
    fn test_garbage_never_panics() {
        let mut seed = 0x1234_5678_u64;
        let mut rnd = || {
            seed = crate::key::mix(seed);
            seed
        };
        let bases = [pcap(4), pcapng(4)];
        for round in 0..3000 {
            let mut f = bases[round % 2].clone();
            for _ in 0..(rnd() % 8) {
                let i = (rnd() as usize) % f.len();
                f[i] = rnd() as u8;
            }
            let cut = (rnd() as usize) % (f.len() + 1);
            let mut b = IndexBuilder::new();
            let mid = cut / 2;
            b.add_region(0..mid as u64, &f[..mid]);
            b.add_region(mid as u64..cut as u64, &f[mid..cut]);
            Index::parse(&b.finish()).expect("the builder's output always parses");
        }
        let mut b = IndexBuilder::new();
        b.add_region(0..100, &[0xff; 100]);
        let ix = Index::parse(&b.finish()).unwrap();
        assert_eq!(ix.format, CaptureFormat::Unknown);
        assert!(ix.stopped() && ix.regions.is_empty());
    }

    #[test]
    fn test_damaged_index_is_refused() {
        let bytes = {
            let mut b = IndexBuilder::new();
            let f = pcap(3);
            b.add_region(0..f.len() as u64, &f);
            b.finish()
        };
        for i in 0..bytes.len() {
            let mut d = bytes.clone();
            d[i] ^= 0x01;
            assert!(Index::parse(&d).is_err(), "byte {i}");
        }
        for cut in 0..bytes.len() {
            assert!(Index::parse(&bytes[..cut]).is_err(), "cut {cut}");
        }
        assert_eq!(Index::parse(b"CORECAPS"), Err(IndexError::Magic));
    }

    #[test]
    fn test_late_interface_makes_file_sequential() {
        let mut w =
            PcapngWriter::new(Vec::new(), "test", &[InterfaceDesc::ethernet("eth0", 0)]).unwrap();
        let f = udp4([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, None);
        let e = Epb {
            ts_ns: 5,
            data: &f,
            orig_len: f.len() as u32,
            ..Epb::default()
        };
        w.write_epb(&e).unwrap();
        w.add_interface(&InterfaceDesc::ethernet("eth1", 0))
            .unwrap();
        w.write_epb(&Epb { if_id: 1, ..e }).unwrap();
        let ix = one_region(&w.into_inner());
        assert_eq!(ix.packets(), 2);
        assert!(!ix.random_access());
    }

    #[test]
    fn test_index_reader_regions_and_cut() {
        let file = pcap(200);
        let built = crate::index_reader(&file[..], 4096).unwrap();
        let ix = Index::parse(&built.sidecar).unwrap();
        assert!(ix.regions.len() > 1);
        assert_eq!(ix.packets(), 200);
        assert_eq!(built.cut_short, None);
        for w in ix.regions.windows(2) {
            assert_eq!(w[0].at.end, w[1].at.start);
        }
        let cut = crate::index_reader(&file[..file.len() - 3], 4096).unwrap();
        assert_eq!(cut.packets, 199);
        assert!(cut.cut_short.is_some());
        assert_eq!(Index::parse(&cut.sidecar).unwrap().covered, cut.covered);
    }
}
