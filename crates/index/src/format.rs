//! The sidecar layout and its reader. The layout is described in `docs/index-format.md`.

use std::ops::Range;

/// Sidecar magic.
pub const MAGIC: &[u8; 8] = b"CORECAPX";
/// Sidecar format version: 2 added the identity of the covered bytes and the postings; 3
/// lists spans (a run of packets in a row that carry a key is one entry).
pub const VERSION: u16 = 3;
/// The oldest version this reader reads (version 2: one offset a packet in each list).
pub const OLDEST_VERSION: u16 = 2;
/// Bytes of the sidecar header before the capture file's header bytes.
pub const HEAD_LEN: usize = 48;
/// Bytes of the capture file hashed at each end of the covered range for its identity.
pub const IDENTITY_SPAN: u64 = 4096;
/// Bytes of a region entry before its Bloom filter.
pub const REGION_LEN: usize = 80;
/// The sidecar's last 4 bytes. Version 3 ends with [`TRAILER_LEN`] bytes: where the lists
/// start (the head's length), the head's CRC-32, then `XEND`; version 2 with the CRC-32 of
/// everything before it, then `XEND`.
pub const TRAILER: &[u8; 4] = b"XEND";
/// Bytes of a version 3 trailer.
pub const TRAILER_LEN: usize = 16;
/// Largest capture file header (pcapng SHB and IDBs) the sidecar keeps.
pub const MAX_HEADER: usize = 1 << 20;
/// Largest Bloom filter of one region, in bits (16 MiB).
pub const MAX_BLOOM_BITS: u32 = 1 << 27;

/// Header flag: a bad or cut block ended indexing; the regions cover the readable part.
pub const FLAG_STOPPED: u8 = 1;
/// Header flag: interfaces or sections are defined after the file header, so a region cannot
/// be read alone; a query reads the file from the start.
pub const FLAG_SEQUENTIAL: u8 = 2;
/// Header flag: the identity of the covered bytes is set.
pub const FLAG_IDENTIFIED: u8 = 4;
/// Header flag: the postings hold every packet's keys (not set for a sealed file, whose
/// offsets are the encrypted chunks').
pub const FLAG_POSTINGS: u8 = 8;
/// Region flag: some packet's link type is not one the parser reads; its sets are incomplete
/// and the region is never pruned by them.
pub const REGION_OPAQUE: u32 = 1;

/// Format of the indexed capture file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureFormat {
    /// Nothing parsed (not a capture file, or empty).
    Unknown,
    /// Classic pcap.
    Pcap,
    /// pcapng.
    Pcapng,
}

impl CaptureFormat {
    pub(crate) fn id(self) -> u8 {
        match self {
            CaptureFormat::Unknown => 0,
            CaptureFormat::Pcap => 1,
            CaptureFormat::Pcapng => 2,
        }
    }
}

/// Why a sidecar could not be read. Any of these means: scan the capture file instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// Not a corecap index.
    #[error("not a corecap index (bad magic)")]
    Magic,
    /// A version this reader does not know.
    #[error("index version {0} is not supported (this corecap reads versions 2 and 3; `corecap index` rewrites it)")]
    Version(u16),
    /// The checksum does not match: the index is damaged.
    #[error("index checksum mismatch (damaged index)")]
    Checksum,
    /// The index ends early or a length is impossible.
    #[error("index is malformed: {0}")]
    Malformed(&'static str),
}

/// One region of a capture file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    /// Byte range of the capture file (for a sealed file, whole encrypted chunks).
    pub at: Range<u64>,
    /// Earliest timestamp, ns since the epoch (`u64::MAX` when the region has no packet).
    pub ts_min: u64,
    /// Latest timestamp, ns.
    pub ts_max: u64,
    /// Packets in the region.
    pub packets: u32,
    /// `REGION_*` flags.
    pub flags: u32,
    /// Distinct keys put into the filter.
    pub keys: u32,
    /// IP protocols seen (bit p = protocol p), exact.
    pub protos: [u64; 4],
    /// Bloom filter words (see [`crate::bloom`]).
    pub bloom: Vec<u64>,
}

impl Region {
    /// Whether the region's sets are complete (every packet parsed).
    pub fn opaque(&self) -> bool {
        self.flags & REGION_OPAQUE != 0
    }

    /// Whether protocol `p` occurs (always true for an opaque region).
    pub fn may_have_proto(&self, p: u8) -> bool {
        self.opaque() || self.protos[usize::from(p / 64)] & (1 << (p % 64)) != 0
    }

    /// Whether key `k` may occur (always true for an opaque region).
    pub fn may_have_key(&self, k: u64) -> bool {
        self.opaque() || crate::bloom::contains(&self.bloom, k)
    }

    /// Whether some packet may have a timestamp in `from..to`.
    pub fn overlaps(&self, from: u64, to: u64) -> bool {
        self.packets > 0 && self.ts_max >= from && self.ts_min < to
    }
}

/// What ties an index to the bytes it describes: xxh3-64 of the first and of the last
/// [`IDENTITY_SPAN`] bytes of the covered range (with the covered length, in the header).
/// A capture file replaced or rewritten under the same name no longer matches its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    /// Hash of the first bytes.
    pub first: u64,
    /// Hash of the last bytes.
    pub last: u64,
}

impl Identity {
    /// The identity of the first `covered` bytes of `file` (two small reads).
    pub fn of_file(file: &std::fs::File, covered: u64) -> std::io::Result<Identity> {
        use std::os::unix::fs::FileExt;
        let span = covered.min(IDENTITY_SPAN);
        let mut buf = vec![0u8; span as usize];
        let mut read_at = |at: u64| -> std::io::Result<u64> {
            file.read_exact_at(&mut buf, at)?;
            Ok(xxhash_rust::xxh3::xxh3_64(&buf))
        };
        Ok(Identity {
            first: read_at(0)?,
            last: read_at(covered - span)?,
        })
    }
}

/// A parsed sidecar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Index {
    /// Format of the capture file.
    pub format: CaptureFormat,
    /// `FLAG_*` flags.
    pub flags: u8,
    /// End of the last region: bytes of the capture file the index covers.
    pub covered: u64,
    /// The capture file's header (pcap global header, or pcapng SHB and IDBs) in plaintext,
    /// to read a region alone.
    pub header: Vec<u8>,
    /// Regions in file order.
    pub regions: Vec<Region>,
    /// The identity of the covered bytes, when the writer knew it.
    pub identity: Option<Identity>,
    /// Each key's packets (see [`crate::postings`]); empty when not [`Index::has_postings`].
    pub postings: crate::postings::Postings,
}

struct Cur<'a> {
    b: &'a [u8],
    at: usize,
}

impl Cur<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], IndexError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or(IndexError::Malformed("cut short"))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, IndexError> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self) -> Result<u64, IndexError> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }
}

impl Index {
    /// Parses and checks a whole sidecar (its lists too).
    pub fn parse(b: &[u8]) -> Result<Index, IndexError> {
        if Index::version(b)? == 2 {
            return parse_v2(b);
        }
        let t = b
            .len()
            .checked_sub(TRAILER_LEN)
            .ok_or(IndexError::Malformed("cut short"))?;
        let head_end = usize::try_from(Index::head_len(&b[t..])?)
            .ok()
            .filter(|&e| e <= t)
            .ok_or(IndexError::Malformed("lists past the end"))?;
        let mut ix = Index::parse_head(&b[..head_end], &b[t..])?;
        let area_end = usize::try_from(ix.postings.area_len())
            .ok()
            .and_then(|a| head_end.checked_add(a))
            .filter(|&e| e <= t)
            .ok_or(IndexError::Malformed("lists past the end"))?;
        if area_end + (8 - (area_end - head_end) % 8) % 8 != t {
            return Err(IndexError::Malformed("bytes after the lists"));
        }
        if b[area_end..t].iter().any(|&z| z != 0) {
            return Err(IndexError::Malformed("padding after the lists"));
        }
        // Read whole, every list is checked now: a damaged sidecar is refused as one.
        let area = &b[head_end..area_end];
        let p = &ix.postings;
        if !p.keys.iter().all(|e| {
            let list = &area[e.start as usize..(e.start + u64::from(e.len)) as usize];
            p.intact(e, list)
        }) {
            return Err(IndexError::Checksum);
        }
        ix.postings.area = Some(area.to_vec());
        Ok(ix)
    }

    /// Where a version 3 sidecar's lists start, from its last [`TRAILER_LEN`] bytes: the
    /// bytes before are its head ([`Index::parse_head`]).
    pub fn head_len(trailer: &[u8]) -> Result<u64, IndexError> {
        if trailer.len() != TRAILER_LEN || &trailer[12..] != TRAILER {
            return Err(IndexError::Malformed("no trailer (cut short)"));
        }
        let mut a = [0u8; 8];
        a.copy_from_slice(&trailer[..8]);
        Ok(u64::from_le_bytes(a))
    }

    /// Parses and checks a version 3 sidecar's head (its first [`Index::head_len`] bytes)
    /// against its `trailer`, leaving the lists in the sidecar: its postings read each
    /// list as it is looked up ([`crate::Postings::lookup_with`]), checked by the list's
    /// own CRC. A query reads the head and the lists of its keys, not the whole sidecar.
    pub fn parse_head(head: &[u8], trailer: &[u8]) -> Result<Index, IndexError> {
        if Index::version(head)? != VERSION {
            return Err(IndexError::Malformed("not a version 3 head"));
        }
        if Index::head_len(trailer)? != head.len() as u64 {
            return Err(IndexError::Malformed("head and trailer disagree"));
        }
        let crc = u32::from_le_bytes([trailer[8], trailer[9], trailer[10], trailer[11]]);
        if crc32fast::hash(head) != crc {
            return Err(IndexError::Checksum);
        }
        let (mut ix, at) = parse_fixed(head)?;
        ix.postings = parse_table(&head[at..])?;
        ix.postings.area_at = head.len() as u64;
        Ok(ix)
    }

    /// The format version of the sidecar that starts with `b` (its first 10 bytes), if it
    /// is one this reader reads; else why not (its magic, or its version).
    pub fn version(b: &[u8]) -> Result<u16, IndexError> {
        if b.len() < 8 || &b[..8] != MAGIC {
            return Err(IndexError::Magic);
        }
        if b.len() < 10 {
            return Err(IndexError::Malformed("cut short"));
        }
        let version = u16::from_le_bytes([b[8], b[9]]);
        if !(OLDEST_VERSION..=VERSION).contains(&version) {
            return Err(IndexError::Version(version));
        }
        Ok(version)
    }

    /// Whether a bad or cut block ended indexing.
    pub fn stopped(&self) -> bool {
        self.flags & FLAG_STOPPED != 0
    }

    /// Whether regions can be read alone (else the file is read from its start).
    pub fn random_access(&self) -> bool {
        self.flags & FLAG_SEQUENTIAL == 0 && self.format != CaptureFormat::Unknown
    }

    /// Whether the postings list every packet's keys.
    pub fn has_postings(&self) -> bool {
        self.flags & FLAG_POSTINGS != 0
    }

    /// The earliest and latest packet timestamps (None: no packet).
    pub fn time_range(&self) -> Option<(u64, u64)> {
        self.regions
            .iter()
            .filter(|r| r.packets > 0)
            .map(|r| (r.ts_min, r.ts_max))
            .reduce(|(a, b), (c, d)| (a.min(c), b.max(d)))
    }

    /// Packets in all regions.
    pub fn packets(&self) -> u64 {
        self.regions.iter().map(|r| u64::from(r.packets)).sum()
    }
}

/// A version 2 sidecar: one CRC over all of it, lists with their lengths inline.
fn parse_v2(b: &[u8]) -> Result<Index, IndexError> {
    if b.len() < HEAD_LEN + 8 {
        return Err(IndexError::Malformed("cut short"));
    }
    let body = b.len() - 8;
    if &b[body + 4..] != TRAILER {
        return Err(IndexError::Malformed("no trailer (cut short)"));
    }
    let crc = u32::from_le_bytes([b[body], b[body + 1], b[body + 2], b[body + 3]]);
    if crc32fast::hash(&b[..body]) != crc {
        return Err(IndexError::Checksum);
    }
    let (mut ix, at) = parse_fixed(&b[..body])?;
    ix.postings = parse_postings_v2(&b[at..body])?;
    Ok(ix)
}

/// The header and the regions, from checked bytes; the index (no postings yet) and where
/// the postings start.
fn parse_fixed(b: &[u8]) -> Result<(Index, usize), IndexError> {
    if b.len() < HEAD_LEN {
        return Err(IndexError::Malformed("cut short"));
    }
    let format = match b[10] {
        0 => CaptureFormat::Unknown,
        1 => CaptureFormat::Pcap,
        2 => CaptureFormat::Pcapng,
        _ => return Err(IndexError::Malformed("unknown capture format")),
    };
    let flags = b[11];
    let mut c = Cur { b, at: 12 };
    let count = c.u32()? as usize;
    let covered = c.u64()?;
    let hlen = c.u32()? as usize;
    let _hashes = c.u32()?;
    let identity = Identity {
        first: c.u64()?,
        last: c.u64()?,
    };
    if hlen > MAX_HEADER {
        return Err(IndexError::Malformed("file header too long"));
    }
    let header = c.take(hlen)?.to_vec();
    c.take((8 - hlen % 8) % 8)?;
    // Each region takes at least REGION_LEN bytes: bound the count before allocating.
    if count > (b.len() - c.at) / REGION_LEN {
        return Err(IndexError::Malformed("region count larger than the index"));
    }
    let mut regions = Vec::with_capacity(count);
    for _ in 0..count {
        let start = c.u64()?;
        let end = c.u64()?;
        let ts_min = c.u64()?;
        let ts_max = c.u64()?;
        let packets = c.u32()?;
        let flags = c.u32()?;
        let bits = c.u32()?;
        let keys = c.u32()?;
        let mut protos = [0u64; 4];
        for p in &mut protos {
            *p = c.u64()?;
        }
        if bits % 64 != 0 || bits > MAX_BLOOM_BITS || end < start {
            return Err(IndexError::Malformed("bad region entry"));
        }
        let words = c.take(bits as usize / 8)?;
        let bloom = words
            .chunks_exact(8)
            .map(|w| {
                let mut a = [0u8; 8];
                a.copy_from_slice(w);
                u64::from_le_bytes(a)
            })
            .collect();
        regions.push(Region {
            at: start..end,
            ts_min,
            ts_max,
            packets,
            flags,
            keys,
            protos,
            bloom,
        });
    }
    let ix = Index {
        format,
        flags,
        covered,
        header,
        regions,
        identity: (flags & FLAG_IDENTIFIED != 0).then_some(identity),
        postings: crate::postings::Postings::default(),
    };
    Ok((ix, c.at))
}

/// A version 3 postings table (the rest of the head): the postings, their lists not read.
pub(crate) fn parse_table(b: &[u8]) -> Result<crate::postings::Postings, IndexError> {
    use crate::postings::{Entry, DENSE};
    let mut c = Cur { b, at: 0 };
    let n = c.u64()?;
    // Each entry takes 20 bytes: bound the count before allocating.
    if n > (b.len() as u64).saturating_sub(16) / 20 {
        return Err(IndexError::Malformed("key count larger than the index"));
    }
    let mut keys = Vec::with_capacity(n as usize);
    let mut start = 0u64;
    for _ in 0..n {
        let key = c.u64()?;
        let count = c.u32()?;
        let len = c.u32()?;
        let crc = c.u32()?;
        if keys.last().is_some_and(|p: &Entry| p.key >= key) {
            return Err(IndexError::Malformed("postings keys out of order"));
        }
        let len = if count == DENSE { 0 } else { len };
        keys.push(Entry {
            key,
            count,
            len,
            start,
            crc,
        });
        start += u64::from(len);
    }
    c.take((8 - c.at % 8) % 8)?;
    let area_len = c.u64()?;
    if c.at != b.len() {
        return Err(IndexError::Malformed("bytes after the postings table"));
    }
    if area_len != start {
        return Err(IndexError::Malformed("lists and table disagree"));
    }
    Ok(crate::postings::Postings {
        keys,
        runs: true,
        ..Default::default()
    })
}

/// Parses a version 2 postings section (everything between the last region and the
/// trailer): one offset a packet, each list's length before it.
fn parse_postings_v2(b: &[u8]) -> Result<crate::postings::Postings, IndexError> {
    use crate::postings::{get_varint, DENSE};
    let mut c = Cur { b, at: 0 };
    let n = c.u64()?;
    // Each entry takes 12 bytes: bound the count before allocating.
    if n > (b.len() as u64).saturating_sub(8) / 12 {
        return Err(IndexError::Malformed("key count larger than the index"));
    }
    let mut entries = Vec::with_capacity(n as usize);
    let mut prev = None;
    for _ in 0..n {
        let key = c.u64()?;
        let count = c.u32()?;
        if prev.is_some_and(|p| p >= key) {
            return Err(IndexError::Malformed("postings keys out of order"));
        }
        prev = Some(key);
        entries.push((key, count));
    }
    c.take((8 - c.at % 8) % 8)?;
    let area_len =
        usize::try_from(c.u64()?).map_err(|_| IndexError::Malformed("postings too long"))?;
    let area = c.take(area_len)?.to_vec();
    c.take((8 - area.len() % 8) % 8)?;
    if c.at != b.len() {
        return Err(IndexError::Malformed("bytes after the postings"));
    }
    // Where each list starts: a length, then the list.
    let mut keys = Vec::with_capacity(entries.len());
    let mut at = 0usize;
    for (key, count) in entries {
        if count == DENSE {
            keys.push(crate::postings::Entry {
                key,
                count,
                len: 0,
                start: 0,
                crc: 0,
            });
            continue;
        }
        let len = get_varint(&area, &mut at)
            .and_then(|l| usize::try_from(l).ok())
            .filter(|l| at.checked_add(*l).is_some_and(|e| e <= area.len()))
            .ok_or(IndexError::Malformed("a postings list past the end"))?;
        let len32 =
            u32::try_from(len).map_err(|_| IndexError::Malformed("a postings list too long"))?;
        keys.push(crate::postings::Entry {
            key,
            count,
            len: len32,
            start: at as u64,
            crc: 0,
        });
        at += len;
    }
    Ok(crate::postings::Postings {
        keys,
        area: Some(area),
        area_at: 0,
        runs: false,
    })
}
