//! Reading one file's planned regions: plain, sealed or compressed, in timestamp order.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Cursor, Read, Write};
use std::ops::Range;
use std::sync::Arc;

use corecap_index::Span;
use corecap_wire::{CaptureReader, Decompress, InterfaceDesc, PcapngWriter};

use super::frames::Source;
use super::outcome::{io_at, QueryError, QueryStats, MAX_READ};
use super::plan::{whole_name, FilePlan, Segment, PACKET_READ};
use crate::sealed::{read_chunk, read_full, ChunkOpener, NextChunk, SealError, CHUNK_HEAD};
use corecap_linux::cbpf::{Meta, Program};

/// A packet held by the merge.
#[derive(Debug, Default)]
pub(crate) struct Held {
    pub(crate) ts_ns: u64,
    pub(crate) data: Vec<u8>,
    pub(crate) orig_len: u32,
    pub(crate) out_if: u32,
    pub(crate) queue: Option<u32>,
    pub(crate) hash: Option<u32>,
    pub(crate) dropcount: Option<u64>,
}

type Reader = CaptureReader<Box<dyn Read + Send>>;

/// Reads the matching packets of one file, segment by segment.
pub(crate) struct FileStream {
    pub(crate) plan: FilePlan,
    pub(crate) next_seg: usize,
    pub(crate) reader: Option<Reader>,
    /// Output interface of each interface of the current reader.
    pub(crate) if_map: Vec<Option<u32>>,
    pub(crate) held: Held,
    pub(crate) truncated: bool,
}

/// What the whole query shares: filters per link type, output interfaces, counters.
pub(crate) struct Ctx<'a, W: Write> {
    pub(crate) filter: Option<&'a str>,
    /// Only the packets of these connections.
    pub(crate) sessions: Option<&'a super::session_match::SessionMatch>,
    /// By link type and byte order (a BSD NULL header is in the writer's).
    pub(crate) programs: HashMap<(u16, bool), Program>,
    pub(crate) out: PcapngWriter<W>,
    pub(crate) out_ifs: HashMap<(String, Option<String>, u16, u32), u32>,
    pub(crate) from: u64,
    pub(crate) to: u64,
    pub(crate) stats: QueryStats,
    /// Why the filter did not apply to the first file it did not apply to.
    pub(crate) refused: Option<String>,
    /// With [`QuerySpec::once`]: the packets written at the newest time so far, each as
    /// (its file's stream, hash of its bytes, length on the wire).
    pub(crate) same_time: Option<(u64, Vec<Given>)>,
    /// Set when the answer is to end now, whole (a signal): the merge stops at the next
    /// packet.
    pub(crate) stop: Option<&'a std::sync::atomic::AtomicBool>,
}

/// A packet written, as [`Ctx::given_before`] compares it: its file's stream, a hash of its
/// bytes, its length on the wire.
type Given = (usize, u64, u32);

impl<W: Write> Ctx<'_, W> {
    /// Whether the packet of stream `i` at `ts_ns` is one another file already gave (and
    /// is not to be written again); remembers it when it is not. Only with `once`.
    pub(crate) fn given_before(
        &mut self,
        i: usize,
        ts_ns: u64,
        data: &[u8],
        orig_len: u32,
    ) -> bool {
        let Some((at, seen)) = self.same_time.as_mut() else {
            return false;
        };
        if *at != ts_ns {
            *at = ts_ns;
            seen.clear();
        }
        let hash = xxhash_rust::xxh3::xxh3_64(data);
        if seen
            .iter()
            .any(|&(s, h, o)| s != i && h == hash && o == orig_len)
        {
            self.stats.duplicates += 1;
            return true;
        }
        seen.push((i, hash, orig_len));
        false
    }

    /// The filter as tcpdump compiles it for a file of `linktype` written in that byte order.
    pub(crate) fn program(
        &mut self,
        linktype: u16,
        big_endian: bool,
    ) -> Result<Option<&Program>, QueryError> {
        let Some(expr) = self.filter else {
            return Ok(None);
        };
        let key = (linktype, big_endian);
        if let std::collections::hash_map::Entry::Vacant(e) = self.programs.entry(key) {
            e.insert(compile(expr, self.sessions, linktype, big_endian)?);
        }
        Ok(self.programs.get(&key))
    }
}

/// The filter `expr` as tcpdump compiles it for a file of `linktype` written in that byte
/// order. With `sessions`, when libpcap has no address tests on the link type (NFLOG), only
/// the user's own filter: the connections' keys are then checked by the exact match alone.
pub(crate) fn compile(
    expr: &str,
    sessions: Option<&super::session_match::SessionMatch>,
    linktype: u16,
    big_endian: bool,
) -> Result<Program, QueryError> {
    let compile = |expr| {
        corecap_linux::filter::compile_for_file(linktype, big_endian, 262_144, expr)
            .map_err(|e| QueryError::Filter(corecap_linux::error_chain(&e)))
    };
    let insns = match (compile(expr), sessions) {
        (Err(_), Some(m)) => compile(m.user_filter.as_deref().unwrap_or(""))?,
        (r, _) => r?,
    };
    Program::new(insns).map_err(|e| QueryError::Filter(e.to_string()))
}

/// How a file frames its packets, from its header (as the index keeps it).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Framing {
    /// pcap records: big-endian, record header length.
    Pcap {
        be: bool,
        head: usize,
    },
    /// pcapng blocks in this byte order.
    Pcapng {
        be: bool,
    },
    Unknown,
}

impl Framing {
    pub(crate) fn of(header: &[u8]) -> Self {
        let Some(m) = header.get(..4) else {
            return Framing::Unknown;
        };
        match u32::from_le_bytes([m[0], m[1], m[2], m[3]]) {
            0xa1b2_c3d4 | 0xa1b2_3c4d => Framing::Pcap {
                be: false,
                head: 16,
            },
            0xd4c3_b2a1 | 0x4d3c_b2a1 => Framing::Pcap { be: true, head: 16 },
            0xa1b2_cd34 => Framing::Pcap {
                be: false,
                head: 24,
            },
            0x34cd_b2a1 => Framing::Pcap { be: true, head: 24 },
            0x0a0d_0d0a => match header.get(8..12).map(|b| [b[0], b[1], b[2], b[3]]) {
                Some([0x4d, 0x3c, 0x2b, 0x1a]) => Framing::Pcapng { be: false },
                Some([0x1a, 0x2b, 0x3c, 0x4d]) => Framing::Pcapng { be: true },
                _ => Framing::Unknown,
            },
            _ => Framing::Unknown,
        }
    }

    /// The length of the block (pcap record) at the start of `b`, when its length field is
    /// there; it may be longer than `b`.
    pub(crate) fn block_len(self, b: &[u8]) -> Option<usize> {
        let u32_at = |at: usize, be: bool| {
            b.get(at..at + 4).map(|x| {
                let a = [x[0], x[1], x[2], x[3]];
                if be {
                    u32::from_be_bytes(a)
                } else {
                    u32::from_le_bytes(a)
                }
            })
        };
        match self {
            Framing::Pcap { be, head } => Some(head + u32_at(8, be)? as usize),
            Framing::Pcapng { be } => Some(u32_at(4, be)? as usize).filter(|l| *l >= 12),
            Framing::Unknown => None,
        }
    }
}

/// The bytes of a file last read for packets: aligned 4 KiB blocks from `at`.
pub(crate) struct Window<'f> {
    pub(crate) framing: Framing,
    pub(crate) src: &'f mut Source,
    pub(crate) bytes: Vec<u8>,
    pub(crate) at: u64,
}

impl Window<'_> {
    /// Appends the packet block at `off` to `out`, reading the blocks that hold it (and
    /// `ahead` bytes from `off`, for the packets after it) unless they are here; its
    /// length, or None where there is no whole block.
    pub(crate) fn packet(
        &mut self,
        off: u64,
        ahead: u64,
        out: &mut Vec<u8>,
        stats: &mut QueryStats,
    ) -> io::Result<Option<usize>> {
        let mut need = ahead.max(24);
        loop {
            let have = off >= self.at && off + need <= self.at + self.bytes.len() as u64;
            if !have {
                let start = off / PACKET_READ * PACKET_READ;
                let end = (off + need).div_ceil(PACKET_READ) * PACKET_READ;
                let held_end = self.at + self.bytes.len() as u64;
                // Blocks of the last read that the new window starts in are kept, not read
                // again: a run of packets that crosses a block's end, then the next run in
                // that block, would read the block twice (a query over packets spread
                // through a file read more than the whole file).
                let kept = if (self.at..held_end).contains(&start) {
                    self.bytes.drain(..(start - self.at) as usize);
                    self.bytes.len()
                } else {
                    0
                };
                self.bytes.resize(((end - start) as usize).max(kept), 0);
                let from = start + kept as u64;
                let (got, disk) = self.src.read_full_at(&mut self.bytes[kept..], from)?;
                self.bytes.truncate(kept + got);
                self.at = start;
                stats.bytes_read += disk;
            }
            let rel = (off - self.at) as usize;
            // A length past any block corecap reads (16 MiB) is no packet: skip it (the
            // reader after it says the file is damaged if the rest is).
            let Some(len) = self
                .framing
                .block_len(&self.bytes[rel.min(self.bytes.len())..])
                .filter(|l| *l <= 16 << 20)
            else {
                return Ok(None);
            };
            if rel + len <= self.bytes.len() {
                out.extend_from_slice(&self.bytes[rel..rel + len]);
                return Ok(Some(len));
            }
            if len as u64 <= need {
                // The file ends inside it.
                return Ok(None);
            }
            need = len as u64;
        }
    }
}

/// Decrypts the whole chunks of `buf` (read at `offset`) into plaintext; the bool is false
/// when the bytes end inside a chunk.
pub(crate) fn open_chunks(
    o: &ChunkOpener,
    mut buf: Vec<u8>,
    offset: u64,
) -> Result<(Vec<u8>, bool), SealError> {
    let mut plain = Vec::with_capacity(buf.len());
    let mut at = 0usize;
    while at < buf.len() {
        match o.open(&mut buf[at..], offset + at as u64)? {
            Some(c) => {
                plain.extend_from_slice(&buf[at + CHUNK_HEAD..at + CHUNK_HEAD + c.plain_len]);
                at += c.sealed_len;
            }
            None => return Ok((plain, false)),
        }
    }
    buf.clear();
    Ok((plain, true))
}

/// Streams the plaintext of a sealed file from its first chunk.
pub(crate) struct SealedRead {
    pub(crate) f: BufReader<File>,
    pub(crate) opener: Arc<ChunkOpener>,
    pub(crate) offset: u64,
    pub(crate) buf: Vec<u8>,
    pub(crate) plain: Range<usize>,
    pub(crate) done: bool,
}

impl Read for SealedRead {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.plain.is_empty() && !self.done {
            match read_chunk(&mut self.f, &mut self.buf)? {
                NextChunk::End(_) => {
                    self.done = true;
                    break;
                }
                NextChunk::TooLong => {
                    return Err(io::Error::other(format!(
                        "bad chunk at offset {}",
                        self.offset
                    )));
                }
                NextChunk::Read => {}
            }
            match self.opener.open(&mut self.buf, self.offset) {
                Ok(Some(c)) => {
                    self.offset += c.sealed_len as u64;
                    self.plain = CHUNK_HEAD..CHUNK_HEAD + c.plain_len;
                }
                Ok(None) => self.done = true,
                Err(e) => return Err(io::Error::other(e.to_string())),
            }
        }
        let n = self.plain.len().min(out.len());
        out[..n].copy_from_slice(&self.buf[self.plain.start..self.plain.start + n]);
        self.plain.start += n;
        Ok(n)
    }
}

impl FileStream {
    pub(crate) fn new(plan: FilePlan) -> Self {
        Self {
            plan,
            next_seg: 0,
            reader: None,
            if_map: Vec::new(),
            held: Held::default(),
            truncated: false,
        }
    }

    pub(crate) fn note_cut(&mut self, stats: &mut QueryStats, what: String) {
        if !self.truncated {
            self.truncated = true;
            stats.files_truncated += 1;
        }
        stats.notes.push(format!(
            "{}: {what}; answered from the readable part",
            self.plan.path.display()
        ));
    }

    /// Opens the next segment's reader; false when none is left.
    pub(crate) fn open_next(&mut self, stats: &mut QueryStats) -> Result<bool, QueryError> {
        loop {
            let Some(seg) = self.plan.segments.get(self.next_seg).cloned() else {
                return Ok(false);
            };
            self.next_seg += 1;
            let input = match seg {
                Segment::Scan => match self.open_scan(stats)? {
                    Some(input) => input,
                    None => continue,
                },
                Segment::Range { at, after_header } => self.open_range(at, after_header, stats)?,
                Segment::Packets(offsets) => self.open_packets(&offsets, stats)?,
            };
            match CaptureReader::new(input) {
                Ok(r) => {
                    self.reader = Some(r);
                    self.if_map.clear();
                    return Ok(true);
                }
                Err(e) => {
                    self.note_cut(stats, format!("unreadable ({e})"));
                }
            }
        }
    }

    /// The whole file as a stream: decrypted chunk by chunk when sealed, decompressed
    /// when compressed. None (noted as cut) when a compressed file's header is unreadable.
    pub(crate) fn open_scan(
        &mut self,
        stats: &mut QueryStats,
    ) -> Result<Option<Box<dyn Read + Send>>, QueryError> {
        let path = &self.plan.path;
        stats.bytes_read += self.plan.size;
        let opened = match File::open(path) {
            // The writer finished the file since it was planned: read it under its name.
            Err(e) if e.kind() == io::ErrorKind::NotFound && self.plan.live => {
                whole_name(path).map_or(Err(e), File::open)
            }
            r => r,
        };
        let mut f = opened.map_err(io_at(path))?;
        match &self.plan.opener {
            Some(o) => {
                let mut skip = vec![0u8; o.header_len as usize];
                read_full(&mut f, &mut skip).map_err(io_at(path))?;
                let plain = SealedRead {
                    f: BufReader::with_capacity(1 << 20, f),
                    opener: o.clone(),
                    offset: o.header_len,
                    buf: Vec::new(),
                    plain: 0..0,
                    done: false,
                };
                if !self.plan.compression.is_compressed() {
                    return Ok(Some(Box::new(plain)));
                }
                // Compress, then seal: the plaintext is a compressed stream.
                match Decompress::new(BufReader::with_capacity(1 << 16, plain)) {
                    Ok(d) => Ok(Some(Box::new(d))),
                    Err(e) => {
                        self.note_cut(stats, format!("unreadable ({e})"));
                        Ok(None)
                    }
                }
            }
            None if self.plan.compression.is_compressed() => {
                let r = BufReader::with_capacity(1 << 20, f);
                match Decompress::new(r) {
                    Ok(d) => Ok(Some(Box::new(d))),
                    Err(e) => {
                        self.note_cut(stats, format!("unreadable ({e})"));
                        Ok(None)
                    }
                }
            }
            None => Ok(Some(Box::new(BufReader::with_capacity(1 << 20, f)))),
        }
    }

    /// The packets of `spans`, each read with the aligned 4 KiB blocks that hold it (one
    /// read per packet or run of packets, none where the previous read holds it), after the
    /// index's file header.
    pub(crate) fn open_packets(
        &mut self,
        spans: &[Span],
        stats: &mut QueryStats,
    ) -> Result<Box<dyn Read + Send>, QueryError> {
        let path = self.plan.path.clone();
        let f = File::open(&path).map_err(io_at(&path))?;
        corecap_linux::direct::advise_random(&f);
        // Every block is asked for first, so the device serves them together (a
        // compressed file's offsets are not the file's: its frames are read as needed).
        if !self.plan.announced && self.plan.frames.is_none() {
            announce(&f, spans, u64::MAX);
        }
        let mut src = Source::new(f, self.plan.frames.as_ref()).map_err(io_at(&path))?;
        let mut win = Window {
            framing: Framing::of(&self.plan.header),
            src: &mut src,
            bytes: Vec::new(),
            at: 0,
        };
        let mut out = self.plan.header.clone();
        for s in spans {
            let mut off = s.start;
            while off < s.end {
                // Read through the span's end at once (a run's packets are in a row).
                let ahead = (s.end - off).min(MAX_READ);
                let Some(len) = win
                    .packet(off, ahead, &mut out, stats)
                    .map_err(io_at(&path))?
                else {
                    break;
                };
                off += len as u64;
            }
        }
        Ok(Box::new(Cursor::new(out)))
    }

    /// Bytes `at` of the file (fewer at its end), decrypted when sealed, after the index's
    /// file header when `after_header`.
    pub(crate) fn open_range(
        &mut self,
        at: Range<u64>,
        after_header: bool,
        stats: &mut QueryStats,
    ) -> Result<Box<dyn Read + Send>, QueryError> {
        let path = self.plan.path.clone();
        let mut buf = vec![0u8; (at.end - at.start) as usize];
        let f = File::open(&path).map_err(io_at(&path))?;
        let mut src = Source::new(f, self.plan.frames.as_ref()).map_err(io_at(&path))?;
        let (got, disk) = src.read_full_at(&mut buf, at.start).map_err(io_at(&path))?;
        buf.truncate(got);
        stats.bytes_read += disk;
        let plain = match &self.plan.opener {
            Some(o) => {
                let (plain, whole) =
                    open_chunks(o, buf, at.start).map_err(|cause| QueryError::Sealed {
                        path: path.display().to_string(),
                        cause,
                    })?;
                if !whole {
                    self.note_cut(
                        stats,
                        format!(
                            "cut short inside the chunk read at {}..{}",
                            at.start, at.end
                        ),
                    );
                }
                if self.plan.compression.is_compressed() {
                    // Compress, then seal: the chunks' plaintext is whole frames.
                    let mut blocks = Vec::with_capacity(plain.len() * 4);
                    super::frames::chunk_capture(&plain, true, &mut blocks)
                        .map_err(io_at(&path))?;
                    blocks
                } else {
                    plain
                }
            }
            None => buf,
        };
        let head = if after_header {
            self.plan.header.clone()
        } else {
            Vec::new()
        };
        Ok(Box::new(Cursor::new(head).chain(Cursor::new(plain))))
    }

    /// Reads to the next packet that matches; false at the end of the file.
    pub(crate) fn advance<W: Write>(&mut self, ctx: &mut Ctx<'_, W>) -> Result<bool, QueryError> {
        loop {
            if self.reader.is_none() && !self.open_next(&mut ctx.stats)? {
                return Ok(false);
            }
            let Some(r) = self.reader.as_mut() else {
                continue;
            };
            let rec = match r.next_packet() {
                Ok(Some(rec)) => rec,
                Ok(None) => {
                    self.reader = None;
                    continue;
                }
                Err(_) if self.plan.live => {
                    // A file being written ends where its whole blocks end.
                    self.reader = None;
                    continue;
                }
                Err(e) => {
                    self.reader = None;
                    let at = self.segment_bytes();
                    self.note_cut(&mut ctx.stats, format!("{e}{at}"));
                    continue;
                }
            };
            if rec.ts_ns < ctx.from || rec.ts_ns >= ctx.to {
                continue;
            }
            let (ts, orig, lt, if_id) = (rec.ts_ns, rec.orig_len, rec.linktype, rec.if_id);
            let (queue, hash, dropcount) = (rec.queue, rec.hash, rec.dropcount);
            self.held.data.clear();
            self.held.data.extend_from_slice(rec.data);
            let big_endian = self.reader.as_ref().is_some_and(|r| r.big_endian());
            let program = match ctx.program(lt, big_endian) {
                Ok(p) => p,
                // libpcap has no code for this filter on this file's link type (`vlan` on
                // raw IP): this file is not answered, and says so; the others are.
                Err(QueryError::Filter(why)) => {
                    self.refuse(&mut ctx.stats, &mut ctx.refused, lt, why);
                    return Ok(false);
                }
                Err(e) => return Err(e),
            };
            if let Some(p) = program {
                let meta = Meta {
                    vlan: None,
                    queue: queue.unwrap_or(0),
                    protocol: self
                        .held
                        .data
                        .get(12..14)
                        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]])),
                };
                if p.run(&self.held.data, orig, &meta) == 0 {
                    continue;
                }
            }
            if let Some(m) = ctx.sessions {
                if !m.matches(corecap_wire::Link::of(lt), &self.held.data, ts) {
                    continue;
                }
            }
            let out_if = self.out_interface(if_id, ctx)?;
            let h = &mut self.held;
            (h.ts_ns, h.orig_len, h.out_if) = (ts, orig, out_if);
            (h.queue, h.hash, h.dropcount) = (queue, hash, dropcount);
            return Ok(true);
        }
    }

    /// " in bytes A..B" of the segment being read, when it is a range of the file.
    fn segment_bytes(&self) -> String {
        match self.plan.segments.get(self.next_seg.wrapping_sub(1)) {
            Some(Segment::Range { at, .. }) => format!(" in bytes {}..{}", at.start, at.end),
            _ => String::new(),
        }
    }

    /// This file is not answered: libpcap has no code for the filter on its link type `lt`
    /// (`vlan` on raw IP). Says so, and ends the file; the others are answered.
    fn refuse(
        &mut self,
        stats: &mut QueryStats,
        refused: &mut Option<String>,
        lt: u16,
        why: String,
    ) {
        let path = self.plan.path.display().to_string();
        stats.files_refused += 1;
        stats.notes.push(format!(
            "{path}: the filter does not apply to its link type {lt}: {why}; this file is \
             not answered"
        ));
        refused.get_or_insert(why);
        self.reader = None;
        self.next_seg = self.plan.segments.len();
    }

    pub(crate) fn out_interface<W: Write>(
        &mut self,
        if_id: u32,
        ctx: &mut Ctx<'_, W>,
    ) -> Result<u32, QueryError> {
        let i = if_id as usize;
        if let Some(Some(o)) = self.if_map.get(i) {
            return Ok(*o);
        }
        let Some(r) = self.reader.as_ref() else {
            return Ok(0);
        };
        let d = r.interfaces().get(i).cloned().ok_or_else(|| {
            QueryError::Other(format!(
                "{}: packet for an unknown interface",
                self.plan.path.display()
            ))
        })?;
        let key = (
            d.name.clone().unwrap_or_default(),
            d.description.clone(),
            d.linktype,
            d.snaplen,
        );
        let id = match ctx.out_ifs.get(&key) {
            Some(id) => *id,
            None => {
                let id = ctx
                    .out
                    .add_interface(&InterfaceDesc {
                        name: key.0.clone(),
                        description: key.1.clone(),
                        linktype: key.2,
                        snaplen: key.3,
                    })
                    .map_err(QueryError::Output)?;
                ctx.out_ifs.insert(key, id);
                id
            }
        };
        if self.if_map.len() <= i {
            self.if_map.resize(i + 1, None);
        }
        self.if_map[i] = Some(id);
        Ok(id)
    }
}

/// Asks the device for the aligned blocks of `spans` (`FADV_WILLNEED`), up to `budget`
/// bytes; the bytes asked for, or None where the budget ran out first.
pub(crate) fn announce(f: &File, spans: &[Span], budget: u64) -> Option<u64> {
    let (mut asked, mut last) = (0u64, 0u64);
    for s in spans {
        let block = (s.start / PACKET_READ * PACKET_READ).max(last);
        let end = s.end.max(s.start + 1).div_ceil(PACKET_READ) * PACKET_READ;
        if block >= end {
            continue;
        }
        asked += end - block;
        if asked > budget {
            return None;
        }
        corecap_linux::direct::advise_willneed(f, block, end - block);
        last = end;
    }
    Some(asked)
}
