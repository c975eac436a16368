//! One reader for pcap and pcapng files.
//!
//! [`CaptureReader`] tells the format from the first four bytes:
//!
//! - pcap: microsecond (`0xa1b2c3d4`) or nanosecond (`0xa1b23c4d`) magic, in
//!   either byte order; one interface described by the global header. Also
//!   Kuznetzov's modified pcap (`0xa1b2cd34`, from old Linux tcpdump patches),
//!   whose record headers carry 8 more bytes that are skipped, as libpcap does.
//! - pcapng: any number of sections, each in its own byte order. Interface
//!   Description Blocks define the interfaces (with `if_tsresol`, decimal or
//!   power-of-two, and `if_tsoffset`); Enhanced, Simple and the obsolete
//!   Packet Blocks carry packets; Interface Statistics Blocks are kept and
//!   exposed through [`CaptureReader::stats`]; every other block is skipped.
//!
//! [`CaptureReader::open`] also reads gzip, zstd and lz4 compressed files,
//! told by their first bytes ([`crate::compression`]): the reader pulls the
//! decompressed stream into its buffer like a plain file. Offsets in errors
//! are then offsets in the decompressed stream, and a decoder's failure (a
//! stream cut short, a flipped byte) is [`ReadError::Decompress`], after the
//! packets decoded before it.
//!
//! [`CaptureReader::next_packet`] hands out one [`Record`] at a time,
//! borrowing a buffer the reader reuses, so reading allocates nothing per
//! packet once the buffer has grown to the largest block.
//!
//! Bad input gives a one-line [`ReadError`] naming the byte offset of the
//! record or block at fault, never a panic: the file ends inside a record
//! ([`ReadError::Truncated`]) or a field is impossible
//! ([`ReadError::Malformed`]). Lengths read from the file are checked against
//! fixed caps before anything is allocated, every step consumes input, and
//! the reader stops for good after the first error.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use crate::compression::{Compression, DecodeError, Decompress};
use crate::hash::HASH_ALGORITHM_TOEPLITZ;
use crate::pcap::{MAGIC_KUZNETZOV, MAGIC_MICROS, MAGIC_NANOS};
use crate::pcapng::{
    pad4, Isb, BLOCK_EPB, BLOCK_IDB, BLOCK_ISB, BLOCK_PB, BLOCK_SHB, BLOCK_SPB, BYTE_ORDER_MAGIC,
    EPB_DROPCOUNT, EPB_HASH, EPB_QUEUE, IF_DESCRIPTION, IF_NAME, IF_TSOFFSET, IF_TSRESOL,
    ISB_ENDTIME, ISB_FILTERACCEPT, ISB_IFDROP, ISB_IFRECV, ISB_OSDROP, ISB_STARTTIME, ISB_USRDELIV,
    OPT_ENDOFOPT,
};

/// Largest captured length accepted in a record (256 KiB, libpcap's limit).
pub const MAX_CAPLEN: u32 = 256 * 1024;

/// Largest pcapng block read into memory (16 MiB, Wireshark's limit).
/// Unknown blocks of any length are skipped without being buffered.
pub const MAX_BLOCK_LEN: u32 = 16 * 1024 * 1024;

/// Most interfaces accepted in one file.
pub const MAX_INTERFACES: usize = 65_536;

/// Reads up to this many bytes into a buffer sized in advance; longer
/// bodies grow the buffer only as data actually arrives.
const PRESIZE_LIMIT: usize = 1024 * 1024;

/// Why a capture file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file ends inside the record or block that starts at `offset`.
    #[error("truncated record at byte offset {offset}")]
    Truncated {
        /// Byte offset of the record or block.
        offset: u64,
    },
    /// The record or block at `offset` is impossible.
    #[error("malformed record at byte offset {offset}: {what}")]
    Malformed {
        /// Byte offset of the record or block.
        offset: u64,
        /// What is wrong with it.
        what: &'static str,
    },
    /// The decompressor failed after `offset` bytes of the decompressed stream (the
    /// compressed stream is cut short or damaged).
    #[error("{cause} after {offset} bytes of capture")]
    Decompress {
        /// Bytes of the decompressed stream read before the failure.
        offset: u64,
        /// The compression and what the decoder said.
        cause: DecodeError,
    },
    /// The underlying reader failed.
    #[error("read error: {0}")]
    Io(#[from] io::Error),
}

impl ReadError {
    /// Byte offset of the record at fault (none for I/O errors).
    pub fn offset(&self) -> Option<u64> {
        match self {
            ReadError::Truncated { offset }
            | ReadError::Malformed { offset, .. }
            | ReadError::Decompress { offset, .. } => Some(*offset),
            ReadError::Io(_) => None,
        }
    }

    /// An I/O error at `offset` of the stream: a decoder's failure becomes
    /// [`ReadError::Decompress`].
    fn from_io(e: io::Error, offset: u64) -> ReadError {
        if !e.get_ref().is_some_and(|p| p.is::<DecodeError>()) {
            return ReadError::Io(e);
        }
        let kind = e.kind();
        match e.into_inner().map(|p| p.downcast::<DecodeError>()) {
            Some(Ok(cause)) => ReadError::Decompress {
                offset,
                cause: *cause,
            },
            Some(Err(p)) => ReadError::Io(io::Error::new(kind, p)),
            None => ReadError::Io(kind.into()),
        }
    }
}

/// The format whose magic starts `head` (at least 4 bytes), if any: what
/// [`CaptureReader::new`] accepts.
pub fn sniff(head: &[u8]) -> Option<Format> {
    let m: [u8; 4] = head.get(..4)?.try_into().ok()?;
    if m == BLOCK_SHB.to_le_bytes() {
        return Some(Format::Pcapng);
    }
    [MAGIC_MICROS, MAGIC_NANOS, MAGIC_KUZNETZOV]
        .iter()
        .any(|&k| u32::from_le_bytes(m) == k || u32::from_be_bytes(m) == k)
        .then_some(Format::Pcap)
}

/// Container format of a capture file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Classic pcap (libpcap).
    Pcap,
    /// pcapng.
    Pcapng,
}

/// An interface of the file: the pcap global header, or one pcapng IDB.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadInterface {
    /// `if_name` (pcapng only).
    pub name: Option<String>,
    /// `if_description` (pcapng only).
    pub description: Option<String>,
    /// Link type (LINKTYPE_*).
    pub linktype: u16,
    /// Snap length, 0 = none.
    pub snaplen: u32,
    /// Timestamp resolution in the `if_tsresol` encoding: 6 = microseconds,
    /// 9 = nanoseconds, top bit set = power of two.
    pub tsresol: u8,
    /// `if_tsoffset`: seconds added to every timestamp.
    pub tsoffset: i64,
    /// Whether its file (pcap) or section (pcapng) was written big-endian: a filter on a
    /// BSD NULL capture tests the AF_ value in the writer's byte order.
    pub big_endian: bool,
}

/// One packet read from a file; `data` borrows the reader's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Timestamp in nanoseconds since the Unix epoch (0 for SPB).
    pub ts_ns: u64,
    /// Captured bytes.
    pub data: &'a [u8],
    /// Length on the wire.
    pub orig_len: u32,
    /// Index of the interface in [`CaptureReader::interfaces`] (counted
    /// across all sections of the file).
    pub if_id: u32,
    /// Link type of the interface.
    pub linktype: u16,
    /// `epb_queue`.
    pub queue: Option<u32>,
    /// `epb_hash` when its algorithm is Toeplitz with a 4-byte value.
    pub hash: Option<u32>,
    /// `epb_dropcount` (or the PB drops count).
    pub dropcount: Option<u64>,
}

/// Byte order of a pcap file or pcapng section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Endian {
    Little,
    Big,
}

impl Endian {
    /// u16 at `at`; the caller has checked `b.len() >= at + 2`.
    fn u16(self, b: &[u8], at: usize) -> u16 {
        let v = [b[at], b[at + 1]];
        match self {
            Endian::Little => u16::from_le_bytes(v),
            Endian::Big => u16::from_be_bytes(v),
        }
    }

    /// u32 at `at`; the caller has checked `b.len() >= at + 4`.
    fn u32(self, b: &[u8], at: usize) -> u32 {
        let v = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        match self {
            Endian::Little => u32::from_le_bytes(v),
            Endian::Big => u32::from_be_bytes(v),
        }
    }

    /// u64 at `at`; the caller has checked `b.len() >= at + 8`.
    fn u64(self, b: &[u8], at: usize) -> u64 {
        let mut v = [0u8; 8];
        v.copy_from_slice(&b[at..at + 8]);
        match self {
            Endian::Little => u64::from_le_bytes(v),
            Endian::Big => u64::from_be_bytes(v),
        }
    }

    /// pcapng 64-bit timestamp: high u32 then low u32.
    fn ts(self, b: &[u8], at: usize) -> u64 {
        (u64::from(self.u32(b, at)) << 32) | u64::from(self.u32(b, at + 4))
    }
}

/// Converts a pcapng timestamp in an interface's units (`if_tsresol`, `if_tsoffset`) to
/// nanoseconds, saturating at 0 and `u64::MAX`.
pub fn ts_to_ns(ts: u64, tsresol: u8, tsoffset: i64) -> u64 {
    if tsresol == 9 && tsoffset == 0 {
        // Nanoseconds already (what corecap writes): nothing to scale.
        return ts;
    }
    let ns: u128 = match tsresol {
        9 => u128::from(ts),
        r if r & 0x80 == 0 => {
            let exp = u32::from(r);
            if exp <= 9 {
                u128::from(ts) * 10u128.pow(9 - exp)
            } else if exp - 9 <= 38 {
                u128::from(ts) / 10u128.pow(exp - 9)
            } else {
                0
            }
        }
        r => (u128::from(ts) * 1_000_000_000) >> u32::from(r & 0x7f),
    };
    let ns = ns as i128 + i128::from(tsoffset) * 1_000_000_000;
    ns.clamp(0, i128::from(u64::MAX)) as u64
}

/// Walks a pcapng option list, calling `f(code, value)` for each option
/// until `opt_endofopt` or the end of `opts`.
fn for_each_opt(e: Endian, opts: &[u8], mut f: impl FnMut(u16, &[u8])) -> Result<(), &'static str> {
    let mut at = 0;
    while opts.len() >= at + 4 {
        let code = e.u16(opts, at);
        let len = usize::from(e.u16(opts, at + 2));
        if code == OPT_ENDOFOPT {
            break;
        }
        let value = opts
            .get(at + 4..at + 4 + len)
            .ok_or("option overruns its block")?;
        f(code, value);
        at += 4 + pad4(len);
    }
    Ok(())
}

/// Option string: UTF-8 (lossy), without trailing NULs.
fn opt_string(v: &[u8]) -> String {
    let end = v.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    String::from_utf8_lossy(&v[..end]).into_owned()
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_up_to<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Where the packet of the current block lies in the buffer, and its metadata.
#[derive(Clone, Copy, Debug)]
struct Meta {
    ts_ns: u64,
    data_at: usize,
    caplen: usize,
    orig_len: u32,
    if_id: u32,
    linktype: u16,
    queue: Option<u32>,
    hash: Option<u32>,
    dropcount: Option<u64>,
}

/// Reads packets from a pcap or pcapng stream.
pub struct CaptureReader<R: Read> {
    r: R,
    format: Format,
    /// Byte order of the pcap file or the current pcapng section.
    endian: Endian,
    /// pcap: fractions are nanoseconds (else microseconds).
    pcap_nanos: bool,
    /// pcap: bytes after each 16-byte record header (8 for Kuznetzov's format).
    pcap_extra: usize,
    /// Offset of the next unread byte.
    pos: u64,
    /// Body of the current record or block; reused.
    buf: Vec<u8>,
    interfaces: Vec<ReadInterface>,
    /// Index in `interfaces` of interface 0 of the current section.
    section_base: usize,
    stats: Vec<(u32, Isb)>,
    /// For each interface, its entry in `stats`.
    stat_slot: Vec<Option<usize>>,
    /// Set at end of input or after the first error.
    done: bool,
}

impl<R: Read> std::fmt::Debug for CaptureReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureReader")
            .field("format", &self.format)
            .field("offset", &self.pos)
            .field("interfaces", &self.interfaces)
            .finish_non_exhaustive()
    }
}

/// What [`CaptureReader::open`] reads from: the file, decompressed when its
/// first bytes say so.
pub type FileInput = Decompress<BufReader<File>>;

impl CaptureReader<FileInput> {
    /// Opens a capture file, plain or compressed (gzip, zstd, lz4).
    pub fn open(path: &Path) -> Result<CaptureReader<FileInput>, ReadError> {
        let f = File::open(path)?;
        CaptureReader::decompress(BufReader::with_capacity(256 * 1024, f))
    }
}

impl<R: io::BufRead> CaptureReader<Decompress<R>> {
    /// Reads a capture from `r`, decompressing it when its first bytes name
    /// gzip, zstd or lz4.
    pub fn decompress(r: R) -> Result<Self, ReadError> {
        let d = Decompress::new(r).map_err(|e| ReadError::from_io(e, 0))?;
        CaptureReader::new(d)
    }

    /// The compression of the file.
    pub fn compression(&self) -> Compression {
        self.r.compression()
    }
}

impl<R: Read> CaptureReader<R> {
    /// Reads the file header (pcap global header or first pcapng SHB).
    pub fn new(r: R) -> Result<Self, ReadError> {
        let mut this = CaptureReader {
            r,
            format: Format::Pcap,
            endian: Endian::Little,
            pcap_nanos: false,
            pcap_extra: 0,
            pos: 0,
            buf: Vec::new(),
            interfaces: Vec::new(),
            section_base: 0,
            stats: Vec::new(),
            stat_slot: Vec::new(),
            done: false,
        };
        let mut magic = [0u8; 4];
        if this.read_some(&mut magic)? < 4 {
            return Err(ReadError::Truncated { offset: 0 });
        }
        if magic == BLOCK_SHB.to_le_bytes() {
            this.format = Format::Pcapng;
            let mut len = [0u8; 4];
            if this.read_some(&mut len)? < 4 {
                return Err(ReadError::Truncated { offset: 0 });
            }
            this.section(0, len)?;
            return Ok(this);
        }
        let le = u32::from_le_bytes(magic);
        let be = u32::from_be_bytes(magic);
        (this.endian, this.pcap_nanos) = match (le, be) {
            (MAGIC_MICROS, _) => (Endian::Little, false),
            (MAGIC_NANOS, _) => (Endian::Little, true),
            (_, MAGIC_MICROS) => (Endian::Big, false),
            (_, MAGIC_NANOS) => (Endian::Big, true),
            (MAGIC_KUZNETZOV, _) | (_, MAGIC_KUZNETZOV) => {
                this.pcap_extra = 8;
                let e = if le == MAGIC_KUZNETZOV {
                    Endian::Little
                } else {
                    Endian::Big
                };
                (e, false)
            }
            _ => {
                return Err(ReadError::Malformed {
                    offset: 0,
                    what: "not a pcap or pcapng file (bad magic)",
                })
            }
        };
        let mut h = [0u8; 20];
        if this.read_some(&mut h)? < h.len() {
            return Err(ReadError::Truncated { offset: 0 });
        }
        let e = this.endian;
        if e.u16(&h, 0) != 2 {
            return Err(ReadError::Malformed {
                offset: 0,
                what: "unsupported pcap major version",
            });
        }
        this.interfaces.push(ReadInterface {
            name: None,
            description: None,
            // The top bits of the field carry FCS information.
            linktype: (e.u32(&h, 16) & 0xffff) as u16,
            snaplen: e.u32(&h, 12),
            tsresol: if this.pcap_nanos { 9 } else { 6 },
            tsoffset: 0,
            big_endian: matches!(e, Endian::Big),
        });
        Ok(this)
    }

    /// Opens a reader, reading the header from `r` (alias of [`CaptureReader::new`]).
    pub fn from_reader(r: R) -> Result<Self, ReadError> {
        CaptureReader::new(r)
    }

    /// Format of the file.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Whether the pcap file (or the current pcapng section) was written big-endian. A
    /// filter on a BSD NULL capture tests the AF_ value in the writer's byte order, so
    /// libpcap compiles it knowing this.
    pub fn big_endian(&self) -> bool {
        matches!(self.endian, Endian::Big)
    }

    /// Interfaces defined so far (pcap: exactly one).
    pub fn interfaces(&self) -> &[ReadInterface] {
        &self.interfaces
    }

    /// Every interface of the file, read to its end: pcapng Interface Description Blocks
    /// may come after packets, and in later sections, so the ones defined before the first
    /// packet are not all of them. Packet and other blocks are skipped unparsed. Reading
    /// stops at the first error, with the interfaces before it: the packets' reader reports
    /// the error in its turn.
    pub fn into_interfaces(mut self) -> Vec<ReadInterface> {
        while self.format == Format::Pcapng && !self.done {
            if !matches!(self.next_idb(), Ok(true)) {
                self.done = true;
            }
        }
        self.interfaces
    }

    /// Reads pcapng blocks up to the next Interface Description Block (true) or the end
    /// of the file (false), skipping the bodies of all other blocks but section headers.
    fn next_idb(&mut self) -> Result<bool, ReadError> {
        loop {
            let Some((start, btype, len)) = self.next_block_head()? else {
                return Ok(false);
            };
            if btype != BLOCK_IDB {
                Self::check_len(len, 12, start)?;
                self.skip_block(len, start)?;
                continue;
            }
            Self::check_len(len, 20, start)?;
            self.read_block_rest(len, len as usize - 8, start)?;
            self.idb(start)?;
            return Ok(true);
        }
    }

    /// Statistics seen so far: for each interface that had an ISB, its
    /// latest one (ISB counters are cumulative), in the order interfaces
    /// first reported. The `u32` is the index in [`CaptureReader::interfaces`].
    pub fn stats(&self) -> &[(u32, Isb)] {
        &self.stats
    }

    /// Byte offset of the next unread byte.
    pub fn offset(&self) -> u64 {
        self.pos
    }

    /// The next packet, `Ok(None)` at a clean end of file.
    ///
    /// After an error the reader is finished and returns `Ok(None)`.
    #[inline]
    pub fn next_packet(&mut self) -> Result<Option<Record<'_>>, ReadError> {
        if self.done {
            return Ok(None);
        }
        let res = match self.format {
            Format::Pcap => self.next_pcap(),
            Format::Pcapng => self.next_pcapng(),
        };
        match res {
            Ok(Some(m)) => Ok(Some(Record {
                ts_ns: m.ts_ns,
                data: &self.buf[m.data_at..m.data_at + m.caplen],
                orig_len: m.orig_len,
                if_id: m.if_id,
                linktype: m.linktype,
                queue: m.queue,
                hash: m.hash,
                dropcount: m.dropcount,
            })),
            Ok(None) => {
                self.done = true;
                Ok(None)
            }
            Err(e) => {
                self.done = true;
                Err(e)
            }
        }
    }

    /// Reads into `buf` until full or end of input; returns the bytes read
    /// (the caller turns a short read into the right error).
    fn read_some(&mut self, buf: &mut [u8]) -> Result<usize, ReadError> {
        let n = read_up_to(&mut self.r, buf).map_err(|e| ReadError::from_io(e, self.pos))?;
        self.pos += n as u64;
        Ok(n)
    }

    /// Reads exactly `n` bytes into `self.buf`, or fails with Truncated at `start`.
    fn read_body(&mut self, n: usize, start: u64) -> Result<(), ReadError> {
        self.buf.clear();
        let got = if n <= PRESIZE_LIMIT {
            self.buf.resize(n, 0);
            let got = read_up_to(&mut self.r, &mut self.buf)
                .map_err(|e| ReadError::from_io(e, self.pos))?;
            self.buf.truncate(got);
            got
        } else {
            // Grows with the data actually present, not with the length field.
            (&mut self.r)
                .take(n as u64)
                .read_to_end(&mut self.buf)
                .map_err(|e| ReadError::from_io(e, self.pos))?
        };
        self.pos += got as u64;
        if got < n {
            return Err(ReadError::Truncated { offset: start });
        }
        Ok(())
    }

    fn next_pcap(&mut self) -> Result<Option<Meta>, ReadError> {
        let start = self.pos;
        let mut h = [0u8; 24];
        let want = 16 + self.pcap_extra;
        match self.read_some(&mut h[..want])? {
            0 => return Ok(None),
            n if n == want => {}
            _ => return Err(ReadError::Truncated { offset: start }),
        }
        let e = self.endian;
        let secs = u64::from(e.u32(&h, 0));
        let frac = u64::from(e.u32(&h, 4));
        let caplen = e.u32(&h, 8);
        let orig_len = e.u32(&h, 12);
        if caplen > MAX_CAPLEN {
            return Err(ReadError::Malformed {
                offset: start,
                what: "captured length above 256 KiB",
            });
        }
        self.read_body(caplen as usize, start)?;
        let frac_ns = if self.pcap_nanos { frac } else { frac * 1000 };
        let linktype = self.interfaces.first().map_or(0, |i| i.linktype);
        Ok(Some(Meta {
            ts_ns: secs.saturating_mul(1_000_000_000).saturating_add(frac_ns),
            data_at: 0,
            caplen: caplen as usize,
            orig_len,
            if_id: 0,
            linktype,
            queue: None,
            hash: None,
            dropcount: None,
        }))
    }

    /// Checks a block's total length.
    fn check_len(len: u32, min: u32, start: u64) -> Result<(), ReadError> {
        let what = if len < 12 {
            "block length < 12"
        } else if !len.is_multiple_of(4) {
            "block length not a multiple of 4"
        } else if len < min {
            "block too short for its type"
        } else {
            return Ok(());
        };
        Err(ReadError::Malformed {
            offset: start,
            what,
        })
    }

    /// Reads the rest of a block whose type and length (and, for an SHB, the
    /// byte-order magic) are consumed: `rest` bytes including the trailing
    /// length, which is checked and dropped from `self.buf`.
    fn read_block_rest(&mut self, len: u32, rest: usize, start: u64) -> Result<(), ReadError> {
        if len > MAX_BLOCK_LEN {
            return Err(ReadError::Malformed {
                offset: start,
                what: "block longer than 16 MiB",
            });
        }
        self.read_body(rest, start)?;
        let tail = rest - 4;
        if self.endian.u32(&self.buf, tail) != len {
            return Err(ReadError::Malformed {
                offset: start,
                what: "trailing block length mismatch",
            });
        }
        self.buf.truncate(tail);
        Ok(())
    }

    /// Reads a Section Header Block whose type is consumed; `len_raw` is its
    /// length field in the still unknown byte order.
    fn section(&mut self, start: u64, len_raw: [u8; 4]) -> Result<(), ReadError> {
        let mut bom = [0u8; 4];
        if self.read_some(&mut bom)? < 4 {
            return Err(ReadError::Truncated { offset: start });
        }
        let endian = if u32::from_le_bytes(bom) == BYTE_ORDER_MAGIC {
            Endian::Little
        } else if u32::from_be_bytes(bom) == BYTE_ORDER_MAGIC {
            Endian::Big
        } else {
            return Err(ReadError::Malformed {
                offset: start,
                what: "bad byte-order magic in section header",
            });
        };
        self.endian = endian;
        let len = endian.u32(&len_raw, 0);
        Self::check_len(len, 28, start)?;
        self.read_block_rest(len, len as usize - 12, start)?;
        if endian.u16(&self.buf, 0) != 1 {
            return Err(ReadError::Malformed {
                offset: start,
                what: "unsupported pcapng major version",
            });
        }
        // Interface ids restart in every section.
        self.section_base = self.interfaces.len();
        Ok(())
    }

    /// The next pcapng block's offset, type and total length, its 8 bytes of head read; a
    /// Section Header Block on the way is read whole and starts its section. None at the
    /// end of the input.
    fn next_block_head(&mut self) -> Result<Option<(u64, u32, u32)>, ReadError> {
        loop {
            let start = self.pos;
            let mut h = [0u8; 8];
            match self.read_some(&mut h)? {
                0 => return Ok(None),
                8 => {}
                _ => return Err(ReadError::Truncated { offset: start }),
            }
            if h[..4] == BLOCK_SHB.to_le_bytes() {
                self.section(start, [h[4], h[5], h[6], h[7]])?;
                continue;
            }
            let e = self.endian;
            return Ok(Some((start, e.u32(&h, 0), e.u32(&h, 4))));
        }
    }

    fn next_pcapng(&mut self) -> Result<Option<Meta>, ReadError> {
        loop {
            let Some((start, btype, len)) = self.next_block_head()? else {
                return Ok(None);
            };
            let min = match btype {
                BLOCK_EPB | BLOCK_PB => 32,
                BLOCK_IDB => 20,
                BLOCK_ISB => 24,
                BLOCK_SPB => 16,
                _ => 12,
            };
            Self::check_len(len, min, start)?;
            match btype {
                BLOCK_EPB | BLOCK_PB | BLOCK_SPB | BLOCK_IDB | BLOCK_ISB => {
                    self.read_block_rest(len, len as usize - 8, start)?;
                }
                _ => {
                    self.skip_block(len, start)?;
                    continue;
                }
            }
            match btype {
                BLOCK_EPB | BLOCK_PB => return self.epb(btype == BLOCK_PB, start).map(Some),
                BLOCK_SPB => return self.spb(start).map(Some),
                BLOCK_IDB => self.idb(start)?,
                _ => self.isb(start)?,
            }
        }
    }

    /// Skips a block of a type the reader does not use, checking its trailer.
    fn skip_block(&mut self, len: u32, start: u64) -> Result<(), ReadError> {
        let body = u64::from(len) - 12;
        let skipped = io::copy(&mut (&mut self.r).take(body), &mut io::sink())
            .map_err(|e| ReadError::from_io(e, self.pos))?;
        self.pos += skipped;
        let mut t = [0u8; 4];
        if skipped < body || self.read_some(&mut t)? < 4 {
            return Err(ReadError::Truncated { offset: start });
        }
        if self.endian.u32(&t, 0) != len {
            return Err(ReadError::Malformed {
                offset: start,
                what: "trailing block length mismatch",
            });
        }
        Ok(())
    }

    /// Global index of section-local interface `local`.
    fn interface(&self, local: u32, start: u64, what: &'static str) -> Result<usize, ReadError> {
        let i = self.section_base.saturating_add(local as usize);
        if i < self.interfaces.len() {
            Ok(i)
        } else {
            Err(ReadError::Malformed {
                offset: start,
                what,
            })
        }
    }

    /// Enhanced Packet Block (or obsolete Packet Block) in `self.buf`.
    fn epb(&mut self, obsolete: bool, start: u64) -> Result<Meta, ReadError> {
        let e = self.endian;
        let b = &self.buf;
        // Both have a 20-byte fixed part (checked by the minimum length).
        let (local, drops) = if obsolete {
            (u32::from(e.u16(b, 0)), e.u16(b, 2))
        } else {
            (e.u32(b, 0), 0xffff)
        };
        let ts = e.ts(b, 4);
        let caplen = e.u32(b, 12);
        let orig_len = e.u32(b, 16);
        if caplen > MAX_CAPLEN {
            return Err(ReadError::Malformed {
                offset: start,
                what: "captured length above 256 KiB",
            });
        }
        let data_end = 20 + pad4(caplen as usize);
        if data_end > b.len() {
            return Err(ReadError::Malformed {
                offset: start,
                what: "captured length overruns its block",
            });
        }
        let what = "packet for an undefined interface";
        let i = self.interface(local, start, what)?;
        let iface = &self.interfaces[i];
        let mut m = Meta {
            ts_ns: ts_to_ns(ts, iface.tsresol, iface.tsoffset),
            data_at: 20,
            caplen: caplen as usize,
            orig_len,
            if_id: i as u32,
            linktype: iface.linktype,
            queue: None,
            hash: None,
            dropcount: (obsolete && drops != 0xffff).then_some(u64::from(drops)),
        };
        let opts = &self.buf[data_end..];
        for_each_opt(e, opts, |code, v| match (code, v.len()) {
            (EPB_HASH, 5) if v[0] == HASH_ALGORITHM_TOEPLITZ => {
                m.hash = Some(u32::from_be_bytes([v[1], v[2], v[3], v[4]]));
            }
            (EPB_DROPCOUNT, 8) if !obsolete => m.dropcount = Some(e.u64(v, 0)),
            (EPB_QUEUE, 4) if !obsolete => m.queue = Some(e.u32(v, 0)),
            _ => {}
        })
        .map_err(|what| ReadError::Malformed {
            offset: start,
            what,
        })?;
        Ok(m)
    }

    /// Simple Packet Block in `self.buf`: interface 0 of the section, no timestamp.
    fn spb(&mut self, start: u64) -> Result<Meta, ReadError> {
        let i = self.interface(0, start, "simple packet block without an interface")?;
        let iface = &self.interfaces[i];
        let orig_len = self.endian.u32(&self.buf, 0);
        let mut caplen = (orig_len as usize).min(self.buf.len() - 4);
        if iface.snaplen != 0 {
            caplen = caplen.min(iface.snaplen as usize);
        }
        if caplen > MAX_CAPLEN as usize {
            return Err(ReadError::Malformed {
                offset: start,
                what: "captured length above 256 KiB",
            });
        }
        Ok(Meta {
            ts_ns: 0,
            data_at: 4,
            caplen,
            orig_len,
            if_id: i as u32,
            linktype: iface.linktype,
            queue: None,
            hash: None,
            dropcount: None,
        })
    }

    /// Interface Description Block in `self.buf`.
    fn idb(&mut self, start: u64) -> Result<(), ReadError> {
        if self.interfaces.len() >= MAX_INTERFACES {
            return Err(ReadError::Malformed {
                offset: start,
                what: "more than 65536 interfaces",
            });
        }
        let e = self.endian;
        let b = &self.buf;
        let mut iface = ReadInterface {
            name: None,
            description: None,
            linktype: e.u16(b, 0),
            snaplen: e.u32(b, 4),
            tsresol: 6,
            tsoffset: 0,
            big_endian: matches!(e, Endian::Big),
        };
        for_each_opt(e, &b[8..], |code, v| match code {
            IF_NAME => iface.name = Some(opt_string(v)),
            IF_DESCRIPTION => iface.description = Some(opt_string(v)),
            IF_TSRESOL if !v.is_empty() => iface.tsresol = v[0],
            IF_TSOFFSET if v.len() == 8 => iface.tsoffset = e.u64(v, 0) as i64,
            _ => {}
        })
        .map_err(|what| ReadError::Malformed {
            offset: start,
            what,
        })?;
        self.interfaces.push(iface);
        Ok(())
    }

    /// Interface Statistics Block in `self.buf`.
    fn isb(&mut self, start: u64) -> Result<(), ReadError> {
        let e = self.endian;
        let local = e.u32(&self.buf, 0);
        let i = self.interface(local, start, "statistics for an undefined interface")?;
        let (tsresol, tsoffset) = (self.interfaces[i].tsresol, self.interfaces[i].tsoffset);
        let mut s = Isb::default();
        for_each_opt(e, &self.buf[12..], |code, v| {
            if v.len() != 8 {
                return;
            }
            match code {
                ISB_STARTTIME => s.start_ns = Some(ts_to_ns(e.ts(v, 0), tsresol, tsoffset)),
                ISB_ENDTIME => s.end_ns = Some(ts_to_ns(e.ts(v, 0), tsresol, tsoffset)),
                ISB_IFRECV => s.ifrecv = Some(e.u64(v, 0)),
                ISB_IFDROP => s.ifdrop = Some(e.u64(v, 0)),
                ISB_FILTERACCEPT => s.filteraccept = Some(e.u64(v, 0)),
                ISB_OSDROP => s.osdrop = Some(e.u64(v, 0)),
                ISB_USRDELIV => s.usrdeliv = Some(e.u64(v, 0)),
                _ => {}
            }
        })
        .map_err(|what| ReadError::Malformed {
            offset: start,
            what,
        })?;
        if self.stat_slot.len() <= i {
            self.stat_slot.resize(i + 1, None);
        }
        match self.stat_slot[i] {
            Some(slot) => self.stats[slot].1 = s,
            None => {
                self.stat_slot[i] = Some(self.stats.len());
                self.stats.push((i as u32, s));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_ts_to_ns() {
        assert_eq!(ts_to_ns(5, 9, 0), 5);
        assert_eq!(ts_to_ns(5, 6, 0), 5_000);
        assert_eq!(ts_to_ns(5, 0, 0), 5_000_000_000);
        assert_eq!(ts_to_ns(5_000, 12, 0), 5);
        assert_eq!(ts_to_ns(1 << 20, 0x80 | 20, 0), 1_000_000_000);
        assert_eq!(ts_to_ns(1, 0x80 | 1, 0), 500_000_000);
        assert_eq!(ts_to_ns(7, 9, 2), 2_000_000_007);
        assert_eq!(ts_to_ns(7, 9, -2), 0);
        assert_eq!(ts_to_ns(u64::MAX, 0, 0), u64::MAX);
        assert_eq!(ts_to_ns(u64::MAX, 127, 0), 0);
        assert_eq!(ts_to_ns(u64::MAX, 0xff, 0), 0);
    }

    #[test]
    fn test_parse_options() {
        let mut opts = Vec::new();
        opts.extend_from_slice(&[2, 0, 3, 0, b'a', b'b', 0, 0]);
        opts.extend_from_slice(&[9, 0, 1, 0, 6, 0, 0, 0]);
        opts.extend_from_slice(&[0, 0, 0, 0, 0xff, 0xff]);
        let mut seen = Vec::new();
        for_each_opt(Endian::Little, &opts, |c, v| seen.push((c, v.to_vec()))).unwrap();
        assert_eq!(seen, vec![(2, b"ab\0".to_vec()), (9, vec![6])]);
        assert_eq!(opt_string(b"ab\0"), "ab");
        let bad = [2, 0, 9, 0, b'a'];
        assert!(for_each_opt(Endian::Little, &bad, |_, _| {}).is_err());
    }

    #[test]
    fn test_truncated_headers() {
        assert!(matches!(
            CaptureReader::new(&[][..]),
            Err(ReadError::Truncated { offset: 0 })
        ));
        assert!(matches!(
            CaptureReader::new(&[0x4d, 0x3c, 0xb2, 0xa1, 2, 0][..]),
            Err(ReadError::Truncated { offset: 0 })
        ));
        let e = CaptureReader::new(&b"GIF89a.........................."[..]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "malformed record at byte offset 0: not a pcap or pcapng file (bad magic)"
        );
    }

    #[test]
    fn test_parse_big_endian_pcap() {
        let mut f = Vec::new();
        f.extend_from_slice(&MAGIC_MICROS.to_be_bytes());
        f.extend_from_slice(&[0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0]);
        f.extend_from_slice(&1500u32.to_be_bytes());
        f.extend_from_slice(&1u32.to_be_bytes());
        f.extend_from_slice(&3u32.to_be_bytes());
        f.extend_from_slice(&7u32.to_be_bytes());
        f.extend_from_slice(&2u32.to_be_bytes());
        f.extend_from_slice(&60u32.to_be_bytes());
        f.extend_from_slice(&[0xaa, 0xbb]);
        let mut r = CaptureReader::new(&f[..]).unwrap();
        assert_eq!(r.format(), Format::Pcap);
        assert_eq!(r.interfaces()[0].snaplen, 1500);
        let p = r.next_packet().unwrap().unwrap();
        assert_eq!(p.ts_ns, 3_000_007_000);
        assert_eq!((p.data, p.orig_len, p.linktype), (&[0xaa, 0xbb][..], 60, 1));
        assert!(r.next_packet().unwrap().is_none());
    }

    #[test]
    fn test_caplen_cap() {
        let mut f = Vec::new();
        f.extend_from_slice(&MAGIC_NANOS.to_le_bytes());
        f.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        f.extend_from_slice(&65535u32.to_le_bytes());
        f.extend_from_slice(&1u32.to_le_bytes());
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&(MAX_CAPLEN + 1).to_le_bytes());
        f.extend_from_slice(&[0; 4]);
        let mut r = CaptureReader::new(&f[..]).unwrap();
        let e = r.next_packet().unwrap_err();
        assert_eq!(
            e.to_string(),
            "malformed record at byte offset 24: captured length above 256 KiB"
        );
        assert!(r.next_packet().unwrap().is_none());
    }

    /// The interfaces of a whole file: a second section, defined after the first one's
    /// packets, is found without reading a packet; a file cut short gives those before
    /// the cut.
    #[test]
    fn test_parse_interfaces_to_the_end() {
        use crate::{Epb, InterfaceDesc, PcapngWriter};
        let section = |linktype: u16, snaplen: u32| {
            let iface = InterfaceDesc {
                name: "x".into(),
                description: None,
                linktype,
                snaplen,
            };
            let mut w = PcapngWriter::new(Vec::new(), "test", &[iface]).unwrap();
            w.write_epb(&Epb {
                data: &[0x45; 40],
                orig_len: 40,
                ..Epb::default()
            })
            .unwrap();
            w.into_inner()
        };
        let mut f = section(113, 0);
        let first = f.len();
        f.extend(section(101, 1500));
        let r = CaptureReader::new(&f[..]).unwrap();
        assert!(r.interfaces().is_empty());
        let all = r.into_interfaces();
        let kinds: Vec<(u16, u32)> = all.iter().map(|i| (i.linktype, i.snaplen)).collect();
        assert_eq!(kinds, [(113, 0), (101, 1500)]);
        assert!(all.iter().all(|i| !i.big_endian));
        let cut = CaptureReader::new(&f[..first + 40])
            .unwrap()
            .into_interfaces();
        assert_eq!(cut.len(), 1);
        // A pcap file has one, from its header.
        let pcap = crate::PcapWriter::new(Vec::new(), 276, 9000)
            .unwrap()
            .into_inner();
        let one = CaptureReader::new(&pcap[..]).unwrap().into_interfaces();
        assert_eq!((one.len(), one[0].linktype, one[0].snaplen), (1, 276, 9000));
    }
}

#[cfg(test)]
mod compressed_tests {
    use std::io::Write;

    use super::*;
    use crate::{Epb, InterfaceDesc, PcapWriter, PcapngWriter};

    /// Frame `i` of the fixtures: 60..=123 bytes that depend on `i`.
    fn frame(i: u32) -> Vec<u8> {
        (0..60 + (i % 64)).map(|k| (k * 7 + i) as u8).collect()
    }

    fn pcap(n: u32) -> Vec<u8> {
        let mut w = PcapWriter::new(Vec::new(), 1, 65535).unwrap();
        for i in 0..n {
            let f = frame(i);
            w.write_packet(
                1_700_000_000_000_000_000 + u64::from(i) * 1000,
                &f,
                f.len() as u32,
                None,
            )
            .unwrap();
        }
        w.into_inner()
    }

    fn pcapng(n: u32) -> Vec<u8> {
        let mut w =
            PcapngWriter::new(Vec::new(), "test", &[InterfaceDesc::ethernet("eth0", 0)]).unwrap();
        for i in 0..n {
            let f = frame(i);
            w.write_epb(&Epb {
                ts_ns: 1_700_000_000_000_000_000 + u64::from(i) * 1000,
                data: &f,
                orig_len: f.len() as u32,
                queue: Some(i % 3),
                ..Epb::default()
            })
            .unwrap();
        }
        w.into_inner()
    }

    /// Kuznetzov's modified pcap of `n` frames, microsecond timestamps.
    fn kuznetzov(n: u32, big: bool) -> Vec<u8> {
        let u32b = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let u16b = |v: u16| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut f = Vec::new();
        f.extend_from_slice(&u32b(MAGIC_KUZNETZOV));
        f.extend_from_slice(&u16b(2));
        f.extend_from_slice(&u16b(4));
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&u32b(65535));
        f.extend_from_slice(&u32b(1));
        for i in 0..n {
            let d = frame(i);
            f.extend_from_slice(&u32b(1_700_000_000));
            f.extend_from_slice(&u32b(i));
            f.extend_from_slice(&u32b(d.len() as u32));
            f.extend_from_slice(&u32b(d.len() as u32));
            f.extend_from_slice(&u32b(7)); // ifindex
            f.extend_from_slice(&u16b(0x0800)); // protocol
            f.extend_from_slice(&[4, 0]); // pkt_type, pad
            f.extend_from_slice(&d);
        }
        f
    }

    fn gzip(b: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    fn zstd(b: &[u8]) -> Vec<u8> {
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
        e.include_checksum(true).unwrap();
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    /// 64 KiB blocks (`lz4 -B4`), so a cut stream still has whole blocks before the cut.
    fn lz4(b: &[u8]) -> Vec<u8> {
        let info = lz4_flex::frame::FrameInfo::new()
            .content_checksum(true)
            .block_size(lz4_flex::frame::BlockSize::Max64KB);
        let mut e = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    type Packets = Vec<(u64, Vec<u8>, u32, Option<u32>)>;

    /// Every packet of `file`, and the error that ended the read, if any.
    fn read(file: &[u8]) -> (Compression, Packets, Option<ReadError>) {
        let mut r = match CaptureReader::decompress(file) {
            Ok(r) => r,
            Err(e) => return (Compression::None, Vec::new(), Some(e)),
        };
        let c = r.compression();
        let mut v = Vec::new();
        loop {
            match r.next_packet() {
                Ok(Some(p)) => v.push((p.ts_ns, p.data.to_vec(), p.orig_len, p.queue)),
                Ok(None) => return (c, v, None),
                Err(e) => return (c, v, Some(e)),
            }
        }
    }

    #[test]
    fn test_parse_compressed_forms() {
        for plain in [pcap(300), pcapng(300)] {
            let (_, want, err) = read(&plain);
            assert!(err.is_none());
            assert_eq!(want.len(), 300);
            for (c, bytes) in [
                (Compression::Gzip, gzip(&plain)),
                (Compression::Zstd, zstd(&plain)),
                (Compression::Lz4, lz4(&plain)),
            ] {
                let (got_c, got, err) = read(&bytes);
                assert_eq!(got_c, c);
                assert!(err.is_none(), "{c}: {err:?}");
                assert!(got == want, "{c}: packets differ");
            }
        }
    }

    #[test]
    fn test_parse_multi_member_gzip() {
        // `cat a.pcapng.gz b.pcapng.gz`: one pcapng with two sections.
        let (a, b) = (pcapng(10), pcapng(20));
        let (_, want, _) = read(&[a.clone(), b.clone()].concat());
        let (_, got, err) = read(&[gzip(&a), gzip(&b)].concat());
        assert!(err.is_none(), "{err:?}");
        assert_eq!(got.len(), 30);
        assert!(got == want);
    }

    #[test]
    fn test_parse_kuznetzov() {
        for big in [false, true] {
            let f = kuznetzov(5, big);
            assert_eq!(sniff(&f), Some(Format::Pcap));
            for bytes in [f.clone(), gzip(&f)] {
                let (_, got, err) = read(&bytes);
                assert!(err.is_none(), "{err:?}");
                assert_eq!(got.len(), 5);
                for (i, p) in got.iter().enumerate() {
                    let d = frame(i as u32);
                    assert_eq!(p.0, 1_700_000_000_000_000_000 + i as u64 * 1000);
                    assert_eq!((&p.1, p.2), (&d, d.len() as u32));
                }
            }
            // Cut inside the extra bytes of the third record header.
            let cut = 24 + (24 + 60) + (24 + 61) + 20;
            let (_, got, err) = read(&f[..cut]);
            assert_eq!(got.len(), 2);
            assert!(
                matches!(err, Some(ReadError::Truncated { offset }) if offset == cut as u64 - 20)
            );
        }
    }

    #[test]
    fn test_sniff() {
        assert_eq!(sniff(&pcapng(0)), Some(Format::Pcapng));
        assert_eq!(sniff(&pcap(0)), Some(Format::Pcap));
        assert_eq!(sniff(&[0xa1, 0xb2, 0xc3, 0xd4]), Some(Format::Pcap));
        assert_eq!(sniff(b"GIF8"), None);
        assert_eq!(sniff(&[0x0a, 0x0d]), None);
    }

    #[test]
    fn test_compressed_not_a_capture() {
        let text = b"hello, this is not a capture file at all\n".repeat(10);
        for bytes in [gzip(&text), zstd(&text), lz4(&text)] {
            let (_, _, err) = read(&bytes);
            assert_eq!(
                err.unwrap().to_string(),
                "malformed record at byte offset 0: not a pcap or pcapng file (bad magic)"
            );
        }
    }

    #[test]
    fn test_truncated_compressed() {
        // Enough for several zstd blocks (128 KiB each, decoded whole).
        for plain in [pcap(20_000), pcapng(20_000)] {
            let (_, want, _) = read(&plain);
            for (c, bytes) in [
                (Compression::Gzip, gzip(&plain)),
                (Compression::Zstd, zstd(&plain)),
                (Compression::Lz4, lz4(&plain)),
            ] {
                for cut in [bytes.len() / 2, bytes.len() - 3] {
                    let (_, got, err) = read(&bytes[..cut]);
                    let err = err.unwrap_or_else(|| panic!("{c} cut at {cut}: no error"));
                    assert!(
                        matches!(
                            err,
                            ReadError::Decompress { .. } | ReadError::Truncated { .. }
                        ),
                        "{c}: {err}"
                    );
                    assert!(
                        !got.is_empty(),
                        "{c}: no packet kept at {cut} of {}: {err}",
                        bytes.len()
                    );
                    // Cut in the trailer, every packet is whole: the error still comes.
                    assert!(got.len() <= want.len(), "{c}");
                    assert!(got[..] == want[..got.len()], "{c}: kept packets differ");
                }
            }
        }
    }

    #[test]
    fn test_corrupted_compressed() {
        let plain = pcapng(20_000);
        let (_, want, _) = read(&plain);
        for (c, bytes) in [
            (Compression::Gzip, gzip(&plain)),
            (Compression::Zstd, zstd(&plain)),
            (Compression::Lz4, lz4(&plain)),
        ] {
            let mut bad = bytes.clone();
            let mid = bad.len() / 2;
            for b in &mut bad[mid..mid + 16] {
                *b ^= 0xa5;
            }
            let (_, got, err) = read(&bad);
            let err = err.unwrap_or_else(|| panic!("{c}: flipped bytes not noticed"));
            assert!(err.offset().is_some(), "{c}: {err}");
            assert!(got.len() < want.len(), "{c}");
            // The packets well before the damage are the file's own.
            let safe = got.len().min(want.len() / 4);
            assert!(safe > 0, "{c}: {err}");
            assert!(got[..safe] == want[..safe], "{c}");
        }
    }
}
