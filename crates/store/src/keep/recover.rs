//! Recovery of the capture files that a writer left behind when it died (SIGKILL, the OOM
//! killer, a power cut).
//!
//! A capture file is written under a hidden name (`.NAME.part`, see [`super::disk`]) and
//! renamed once it is whole, so a file still under its hidden name after its writer is gone
//! is the one the crash interrupted. A start never deletes such a file: [`recover_dir`]
//! finds each one that no live writer holds (its `flock` is free), keeps every whole block
//! (pcapng blocks, pcap records, sealed chunks: the flush interval put them on disk), cuts
//! off what follows (a torn block, the zero padding of a direct write, the space reserved
//! ahead), syncs it, and gives it a name of its own beside the capture's other files:
//! `NAME.recovered-<UTC time of its last write>.EXT`, which no later run writes to. Its index
//! is then rebuilt from its data, so queries prune it like any other file.
//!
//! A part is recovered only when its first bytes are a capture file's (pcapng, pcap, or a
//! sealed file): a hidden `.NAME.part` of another program (a browser's half-downloaded
//! file) is left as it is, with a note that says why. The only files removed are those that
//! are ours and hold no packet: a part that begins as a capture file but ends before its
//! file header is whole, or whose whole blocks hold no packet (a pcap or pcapng part; a
//! sealed part's chunks are not opened to count them), a part with a capture file's name
//! that holds nothing yet (no bytes, or only the zeros of space reserved ahead), and the
//! temporary file of an index (indexes are rebuilt from the data). A file that holds no
//! packet never gets a capture name, as the writer gives none to a file it failed to put a
//! packet in.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use crate::sealed::{read_full, ChunkOpener, KeyFile, CHUNK_HEAD, MAX_CHUNK, TAG};

/// One file recovered.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Recovered {
    /// The hidden file the crash left.
    pub part: PathBuf,
    /// Its new name.
    pub path: PathBuf,
    /// Whole packets kept.
    pub packets: u64,
    /// Bytes kept.
    pub bytes: u64,
    /// Bytes cut off the end (a torn block, padding, space reserved ahead).
    pub cut: u64,
    /// Its index was rebuilt.
    pub indexed: bool,
}

/// What [`recover_dir`] did.
#[derive(Debug, Default)]
pub struct Recovery {
    /// Files recovered, in name order.
    pub files: Vec<Recovered>,
    /// One line per thing the user should know (a part that held no packet, an index that
    /// could not be rebuilt).
    pub notes: Vec<String>,
}

impl Recovered {
    /// One line for the user.
    pub fn describe(&self) -> String {
        format!(
            "recovered {} as {}: {} packets in {} bytes ({} bytes after the last whole block cut off)",
            self.part.display(),
            self.path.display(),
            self.packets,
            self.bytes,
            self.cut
        )
    }
}

/// The whole blocks of a plain capture file (pcapng or pcap) among its first `limit`
/// bytes: their length and the packets in them; None when not even its header is whole.
/// A writer whose disk filled keeps this much of what it put on disk.
pub fn whole_prefix_within(path: &Path, limit: u64) -> io::Result<Option<(u64, u64)>> {
    let file = File::open(path)?;
    Ok(whole_prefix(file.take(limit), None)?
        .filter(|w| !w.sealed)
        .map(|w| (w.bytes, w.packets)))
}

/// Largest pcapng block recovery accepts (a block of a 262144-byte snap length with options
/// is far smaller).
const MAX_BLOCK: usize = 16 << 20;
/// Largest pcap record recovery accepts.
const MAX_RECORD: usize = 1 << 20;

/// Recovers every abandoned part in `dir` (see the module doc). `kek` opens sealed parts, so
/// their chunks are authenticated before they are kept; without it a sealed part is cut at
/// its last structurally whole chunk and gets no index.
pub fn recover_dir(dir: &Path, kek: Option<&Arc<KeyFile>>) -> io::Result<Recovery> {
    let mut out = Recovery::default();
    let mut parts: Vec<PathBuf> = fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy())
                .is_some_and(|n| n.starts_with('.') && n.ends_with(".part") && n.len() > 6)
        })
        .collect();
    // An index's temporary file left by a crash (a sidecar is written in milliseconds, so
    // one a minute old has no writer): the index is rebuilt from the data.
    for e in fs::read_dir(dir)?.filter_map(Result::ok) {
        let n = e.file_name().to_string_lossy().into_owned();
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|a| a.as_secs() > 60));
        if n.starts_with('.') && n.ends_with(".idx.tmp") && old {
            let _ = fs::remove_file(e.path());
        }
    }
    parts.sort();
    for part in parts {
        if !corecap_linux::direct::is_abandoned(&part) {
            continue;
        }
        let Some(name) = own_name(&part) else {
            continue;
        };
        if crate::names::is_beside(Path::new(&name)) {
            // An index's or sessions file's temporary file: rebuilt from the data.
            let _ = fs::remove_file(&part);
            continue;
        }
        match recover_part(&part, &dir.join(&name), kek) {
            Ok(Outcome::Recovered(r)) => {
                if !r.indexed {
                    out.notes.push(format!(
                        "{}: recovered without an index (queries scan it)",
                        r.path.display()
                    ));
                }
                out.files.push(r);
            }
            Ok(Outcome::Removed(why)) => {
                out.notes.push(format!("removed {}: {why}", part.display()));
            }
            Ok(Outcome::LeftAlone(why)) => {
                out.notes
                    .push(format!("left {} as it is: {why}", part.display()));
            }
            Err(e) => out.notes.push(format!(
                "could not recover {}: {e} (left as it is)",
                part.display()
            )),
        }
    }
    Ok(out)
}

/// `.NAME.part` → `NAME`.
fn own_name(part: &Path) -> Option<String> {
    let n = part.file_name()?.to_string_lossy().into_owned();
    let inner = n.strip_prefix('.')?.strip_suffix(".part")?;
    (!inner.is_empty()).then(|| inner.to_owned())
}

/// What became of one part.
enum Outcome {
    /// Recovered under a name of its own.
    Recovered(Recovered),
    /// Ours, and it held no packet: removed, for this reason.
    Removed(&'static str),
    /// Not recognised as a capture file corecap writes: not touched, for this reason.
    LeftAlone(&'static str),
}

/// What a part's first bytes say it is.
#[derive(Debug, PartialEq, Eq)]
enum Head {
    /// A capture file's magic: pcapng, pcap or sealed.
    Capture,
    /// Nothing yet: no bytes, the start of a magic, or the zeros of space reserved ahead.
    Nothing,
    /// Something else.
    Foreign,
}

/// The magics a capture file corecap writes begins with.
const MAGICS: [&[u8]; 9] = [
    &[0x0a, 0x0d, 0x0d, 0x0a],
    &[0xd4, 0xc3, 0xb2, 0xa1],
    &[0xa1, 0xb2, 0xc3, 0xd4],
    &[0x4d, 0x3c, 0xb2, 0xa1],
    &[0xa1, 0xb2, 0x3c, 0x4d],
    &[0x34, 0xcd, 0xb2, 0xa1],
    &[0xa1, 0xb2, 0xcd, 0x34],
    crate::sealed::MAGIC,
    &crate::seekable::ZSTD_MAGIC,
];

/// Tells a part's first bytes (up to 4 KiB: a direct write's first unit).
fn head_of(file: &File) -> io::Result<Head> {
    use std::os::unix::fs::FileExt;
    let mut b = [0u8; 4096];
    let n = file.read_at(&mut b, 0)?;
    let b = &b[..n];
    if MAGICS.iter().any(|m| b.starts_with(m)) {
        return Ok(Head::Capture);
    }
    let started = |m: &&[u8]| b.len() < m.len() && m.starts_with(b);
    if b.iter().all(|&x| x == 0) || MAGICS.iter().any(started) {
        return Ok(Head::Nothing);
    }
    Ok(Head::Foreign)
}

/// Whether `name` ends as the files corecap writes do (`.pcapng`, `.pcap`, `.sealed`,
/// `.zst`).
fn capture_name(name: &str) -> bool {
    [
        ".pcapng",
        ".pcap",
        ".sealed",
        crate::names::COMPRESSED_SUFFIX,
    ]
    .iter()
    .any(|ext| name.ends_with(ext))
}

/// Removes a part that held no packet, and syncs its folder.
fn remove_part(part: &Path) -> io::Result<()> {
    fs::remove_file(part)?;
    corecap_linux::direct::sync_parent(part)
}

/// Recovers one part whose own name is `path`, removes it when it is ours and held no
/// packet, or leaves it alone when it is not recognised (see the module doc).
fn recover_part(part: &Path, path: &Path, kek: Option<&Arc<KeyFile>>) -> io::Result<Outcome> {
    let file = OpenOptions::new().read(true).write(true).open(part)?;
    let meta = file.metadata()?;
    let size = meta.len();
    let own_name = path
        .file_name()
        .is_some_and(|n| capture_name(&n.to_string_lossy()));
    match head_of(&file)? {
        Head::Capture => {}
        Head::Nothing if own_name => {
            drop(file);
            remove_part(part)?;
            return Ok(Outcome::Removed(
                "a capture file's part that holds nothing yet",
            ));
        }
        Head::Nothing | Head::Foreign => {
            return Ok(Outcome::LeftAlone(
                "it does not begin as a capture file corecap writes",
            ))
        }
    }
    let (whole, frames) = match frames_prefix(&file)? {
        Some((w, t)) => (w, Some(t)),
        None => (whole_prefix(&file, kek)?, None),
    };
    let Some(whole) = whole else {
        drop(file);
        remove_part(part)?;
        return Ok(Outcome::Removed(
            "it ended before its file header, so it held no packet",
        ));
    };
    if !whole.sealed && whole.packets == 0 {
        // A file that holds no packet gets no capture name (as a writer whose disk filled
        // before its first packet removes its file).
        drop(file);
        remove_part(part)?;
        return Ok(Outcome::Removed("its whole blocks hold no packet"));
    }
    file.set_len(whole.bytes)?;
    if let Some(t) = &frames {
        // A compressed part: its whole frames, then the seek table the writer would have
        // written at close.
        use std::os::unix::fs::FileExt;
        let mut b = Vec::with_capacity(t.encoded_len());
        t.encode(&mut b);
        file.write_all_at(&b, whole.bytes)?;
    }
    file.sync_all()?;
    drop(file);
    let stamp = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let new = rename_free(part, path, &utc_stamp(stamp))?;
    corecap_linux::direct::sync_parent(&new)?;
    let sealed = whole.sealed;
    let indexed = (!sealed || kek.is_some())
        && crate::write::index_file::build_index(&new, kek).is_ok_and(|r| r.not_indexed.is_none());
    if !indexed {
        // Indexing records the file in the folder's catalog; without an index, this does.
        if let Some(e) = crate::catalog_update::entry_from_index(&new, crate::State::Recovered) {
            let _ = crate::catalog_update::record(&e, crate::names::dir_of(&new));
        }
    }
    Ok(Outcome::Recovered(Recovered {
        part: part.to_owned(),
        path: new,
        packets: whole.packets,
        bytes: whole.bytes,
        cut: size - whole.bytes,
        indexed,
    }))
}

/// Gives `part` the recovered name of `path`, with `-2`, `-3` ... if that name is taken;
/// never replaces a file.
fn rename_free(part: &Path, path: &Path, stamp: &str) -> io::Result<PathBuf> {
    for n in 1..1000 {
        let new = crate::names::recovered_path(path, stamp, n);
        match corecap_linux::direct::rename_noreplace(part, &new) {
            Ok(()) => return Ok(new),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("no free recovered name for {}", path.display()),
    ))
}

/// `20261125T080102Z` for Unix seconds `secs`.
pub(crate) fn utc_stamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// The whole part of a capture file.
#[derive(Debug, PartialEq, Eq)]
struct Whole {
    /// Bytes from the start that are whole blocks (the file header included).
    bytes: u64,
    /// Packets in them.
    packets: u64,
    sealed: bool,
}

/// A compressed part (it begins as a zstd frame): its whole frames, each decompressing to
/// what its header says, and of those the ones that end where the capture's whole blocks
/// do; `bytes` is then where the frames end in the file, `packets` the packets in them.
/// None when the part is no zstd file; a `Whole` of None when no frame holds the capture's
/// header.
fn frames_prefix(file: &File) -> io::Result<Option<(Option<Whole>, crate::seekable::SeekTable)>> {
    use std::os::unix::fs::FileExt;
    let mut m = [0u8; 4];
    if file.read_at(&mut m, 0)? < 4 || m != crate::seekable::ZSTD_MAGIC {
        return Ok(None);
    }
    let mut walk = FrameWalk::new(file)?;
    let whole = whole_prefix(&mut walk, None)?;
    let mut table = walk.table;
    let Some(whole) = whole else {
        return Ok(Some((None, table)));
    };
    // The frames whose content is whole blocks.
    let keep = table
        .frames()
        .partition_point(|f| f.plain_end() <= whole.bytes);
    table.truncate(keep);
    let mut w = whole;
    if table.plain_len() != w.bytes {
        // The blocks ended inside a frame (a damaged one): count again up to the frame
        // before it.
        let again = FrameWalk::new(file)?.take(table.plain_len());
        match whole_prefix(again, None)? {
            Some(x) => w = x,
            None => return Ok(Some((None, table))),
        }
    }
    w.bytes = table.frames_len();
    Ok(Some((Some(w), table)))
}

/// The decompressed content of a compressed part's frames, frame after frame, until one is
/// torn (the crash cut it), damaged, larger than any corecap writes, or not a data frame
/// (a seek table written before the crash). The frames read are in `table`.
struct FrameWalk<'f> {
    r: BufReader<&'f File>,
    raw: Vec<u8>,
    eof: bool,
    dctx: zstd::bulk::Decompressor<'static>,
    plain: Vec<u8>,
    at: usize,
    done: bool,
    table: crate::seekable::SeekTable,
}

impl<'f> FrameWalk<'f> {
    fn new(file: &'f File) -> io::Result<Self> {
        Ok(Self {
            r: BufReader::with_capacity(1 << 20, file),
            raw: Vec::new(),
            eof: false,
            dctx: zstd::bulk::Decompressor::new()?,
            plain: Vec::new(),
            at: 0,
            done: false,
            table: crate::seekable::SeekTable::new(),
        })
    }

    /// Decompresses the next frame into `plain`; false at the end of the whole frames.
    fn next_frame(&mut self) -> io::Result<bool> {
        use zstd::zstd_safe;
        let max = crate::seekable::MAX_FRAME_PLAIN as usize;
        let len = loop {
            if let Ok(n) = zstd_safe::find_frame_compressed_size(&self.raw) {
                break n;
            }
            if self.eof || self.raw.len() > max {
                return Ok(false);
            }
            let mut chunk = [0u8; 64 << 10];
            let n = read_full(&mut self.r, &mut chunk)?;
            self.eof = n < chunk.len();
            self.raw.extend_from_slice(&chunk[..n]);
        };
        if self.raw[..4] != crate::seekable::ZSTD_MAGIC {
            return Ok(false);
        }
        let size = match zstd_safe::get_frame_content_size(&self.raw[..len]) {
            Ok(Some(s)) if s <= max as u64 => s as usize,
            _ => return Ok(false),
        };
        self.plain.clear();
        self.plain.reserve(size);
        match self
            .dctx
            .decompress_to_buffer(&self.raw[..len], &mut self.plain)
        {
            Ok(n) if n == size => {}
            _ => return Ok(false),
        }
        self.table.push(len as u32, size as u32);
        self.raw.drain(..len);
        self.at = 0;
        Ok(true)
    }
}

impl Read for FrameWalk<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.at == self.plain.len() && !self.done {
            if !self.next_frame()? {
                self.done = true;
            }
        }
        let n = (self.plain.len() - self.at).min(out.len());
        out[..n].copy_from_slice(&self.plain[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// The file's longest prefix of whole blocks; None when not even its header is whole.
fn whole_prefix(file: impl Read, kek: Option<&Arc<KeyFile>>) -> io::Result<Option<Whole>> {
    let mut r = BufReader::with_capacity(1 << 20, file);
    let mut magic = [0u8; 4];
    if read_full(&mut r, &mut magic)? < 4 {
        return Ok(None);
    }
    let mut r = (&magic[..]).chain(r);
    if magic == [0x0a, 0x0d, 0x0d, 0x0a] {
        return pcapng_prefix(&mut r);
    }
    if &magic == b"CORE" {
        return sealed_prefix(&mut r, kek);
    }
    pcap_prefix(&mut r)
}

fn u32_of(b: &[u8], be: bool) -> u32 {
    let a = [b[0], b[1], b[2], b[3]];
    if be {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

/// pcapng: whole blocks, each with a sane length and a trailing length that matches. A
/// block of type 0 (the zero padding of a direct write) ends the file.
fn pcapng_prefix(r: &mut impl Read) -> io::Result<Option<Whole>> {
    let mut at = 0u64;
    let mut header_end = None;
    let mut packets = 0u64;
    let mut be = false;
    let mut buf = Vec::new();
    loop {
        let mut head = [0u8; 12];
        if read_full(r, &mut head[..8])? < 8 {
            break;
        }
        let shb = head[..4] == [0x0a, 0x0d, 0x0d, 0x0a];
        if shb {
            if read_full(r, &mut head[8..12])? < 4 {
                break;
            }
            be = match u32::from_le_bytes([head[8], head[9], head[10], head[11]]) {
                0x1a2b_3c4d => false,
                0x4d3c_2b1a => true,
                _ => break,
            };
        } else if at == 0 {
            break;
        }
        let ty = u32_of(&head[..4], be);
        let len = u32_of(&head[4..8], be) as usize;
        let got = if shb { 12 } else { 8 };
        if ty == 0 || len < 12.max(got + 4) || !len.is_multiple_of(4) || len > MAX_BLOCK {
            break;
        }
        buf.resize(len - got, 0);
        if read_full(r, &mut buf)? < buf.len() {
            break;
        }
        if u32_of(&buf[buf.len() - 4..], be) as usize != len {
            break;
        }
        at += len as u64;
        match ty {
            3 | 6 => packets += 1,
            // SHB and IDBs before the first packet are the file header.
            0x0a0d_0d0a | 1 if packets == 0 => header_end = Some(at),
            _ => {}
        }
    }
    Ok(header_end.map(|_| Whole {
        bytes: at,
        packets,
        sealed: false,
    }))
}

/// Classic pcap: the 24-byte header, then records whose lengths are sane. A record with a
/// wire length of 0 (zero padding) ends the file.
fn pcap_prefix(r: &mut impl Read) -> io::Result<Option<Whole>> {
    let mut head = [0u8; 24];
    if read_full(r, &mut head)? < 24 {
        return Ok(None);
    }
    let (be, rec) = match u32::from_le_bytes([head[0], head[1], head[2], head[3]]) {
        0xa1b2_c3d4 | 0xa1b2_3c4d => (false, 16),
        0xd4c3_b2a1 | 0x4d3c_b2a1 => (true, 16),
        0xa1b2_cd34 => (false, 24),
        0x34cd_b2a1 => (true, 24),
        _ => return Ok(None),
    };
    let mut at = 24u64;
    let mut packets = 0u64;
    let mut buf = vec![0u8; MAX_RECORD];
    loop {
        let mut h = [0u8; 24];
        if read_full(r, &mut h[..rec])? < rec {
            break;
        }
        let caplen = u32_of(&h[8..12], be) as usize;
        let wire = u32_of(&h[12..16], be) as usize;
        if wire == 0 || caplen > MAX_RECORD || caplen > wire {
            break;
        }
        if read_full(r, &mut buf[..caplen])? < caplen {
            break;
        }
        at += (rec + caplen) as u64;
        packets += 1;
    }
    Ok(Some(Whole {
        bytes: at,
        packets,
        sealed: false,
    }))
}

/// A sealed file: its header, then whole chunks in sequence. With the key each chunk is
/// authenticated; without it each must be well formed and carry the next index.
fn sealed_prefix(r: &mut impl Read, kek: Option<&Arc<KeyFile>>) -> io::Result<Option<Whole>> {
    let mut head = [0u8; 42];
    if read_full(r, &mut head)? < 42 || &head[..8] != crate::sealed::MAGIC {
        return Ok(None);
    }
    let wlen = usize::from(u16::from_le_bytes([head[40], head[41]]));
    let mut wrapped = vec![0u8; wlen];
    if wlen > 1024 || read_full(r, &mut wrapped)? < wlen {
        return Ok(None);
    }
    let opener = match kek {
        Some(k) => {
            let mut all = head.to_vec();
            all.extend_from_slice(&wrapped);
            Some(
                ChunkOpener::from_header(&mut &all[..], k)
                    .map_err(|e| io::Error::other(e.to_string()))?,
            )
        }
        None => None,
    };
    let mut at = (42 + wlen) as u64;
    let mut index = 0u64;
    let mut buf = Vec::new();
    loop {
        buf.resize(CHUNK_HEAD, 0);
        if read_full(r, &mut buf)? < CHUNK_HEAD {
            break;
        }
        let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let flags = buf[4];
        let seq = u64::from_be_bytes(buf[12..20].try_into().expect("8 bytes"));
        if len > MAX_CHUNK || flags > 1 || buf[5..12] != [0; 7] || seq != index {
            break;
        }
        if len == 0 && flags == 0 {
            break;
        }
        buf.resize(CHUNK_HEAD + len + TAG, 0);
        if read_full(r, &mut buf[CHUNK_HEAD..])? < len + TAG {
            break;
        }
        if let Some(o) = &opener {
            if !matches!(o.open(&mut buf, at), Ok(Some(_))) {
                break;
            }
        }
        at += buf.len() as u64;
        index += 1;
        if flags == 1 {
            break;
        }
    }
    Ok(Some(Whole {
        bytes: at,
        packets: 0,
        sealed: true,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use corecap_wire::pcapng::{Epb, InterfaceDesc, PcapngWriter};

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("corecap-recover-{}-{tag}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).expect("dir");
        d
    }

    fn pcapng(n: u32) -> Vec<u8> {
        let mut w = PcapngWriter::new(Vec::new(), "t", &[InterfaceDesc::ethernet("e", 262144)])
            .expect("writer");
        let frame = [7u8; 60];
        for i in 0..n {
            w.write_epb(&Epb {
                if_id: 0,
                ts_ns: 1_700_000_000_000_000_000 + u64::from(i),
                data: &frame,
                orig_len: 60,
                vlan_tci: None,
                queue: None,
                hash: None,
                dropcount: None,
            })
            .expect("epb");
        }
        w.into_inner()
    }

    /// Issue 40: a hidden part that is not a capture file (another program's download) is
    /// left as it is, whatever its name; a capture part that holds nothing yet is removed.
    #[test]
    fn test_issue40_a_part_that_is_not_a_capture_is_left_alone() {
        let d = scratch("foreign");
        let text = b"PK\x03\x04 a half-downloaded archive".to_vec();
        let cases: [(&str, Vec<u8>, bool); 6] = [
            (".report.zip.part", text.clone(), true),
            (".rec_00001.pcapng.part", text.clone(), true),
            (".notes.part", Vec::new(), true),
            (".short.pcapng.part", vec![0x0a, 0x0d], false),
            (".empty.pcap.part", Vec::new(), false),
            (".reserved.pcapng.part", vec![0; 8192], false),
        ];
        for (name, body, _) in &cases {
            fs::write(d.join(name), body).expect("write");
        }
        let r = recover_dir(&d, None).expect("recover");
        assert!(r.files.is_empty(), "{:?}", r.files);
        for (name, body, kept) in &cases {
            let p = d.join(name);
            assert_eq!(p.exists(), *kept, "{name}: {:?}", r.notes);
            if *kept {
                assert_eq!(&fs::read(&p).expect("read"), body, "{name} untouched");
            }
            let verb = if *kept { "left" } else { "removed" };
            assert!(
                r.notes
                    .iter()
                    .any(|n| n.starts_with(verb) && n.contains(name)),
                "{name}: {:?}",
                r.notes
            );
        }
        fs::remove_dir_all(&d).expect("clean");
    }

    #[test]
    fn test_civil_stamp() {
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        assert_eq!(utc_stamp(1_764_057_662), "20251125T080102Z");
        assert_eq!(utc_stamp(951_782_400), "20000229T000000Z");
    }

    #[test]
    fn test_truncated_pcapng_part_is_cut_renamed_and_indexed() {
        let d = scratch("pcapng");
        let whole = pcapng(100);
        let mut torn = whole.clone();
        // A torn block, then zero padding and reserved space.
        torn.extend_from_slice(&whole[whole.len() - 50..whole.len() - 20]);
        torn.extend_from_slice(&[0u8; 8192]);
        let part = d.join(".rec_00003.pcapng.part");
        fs::write(&part, &torn).expect("write");
        let r = recover_dir(&d, None).expect("recover");
        assert_eq!(r.files.len(), 1, "{:?}", r.notes);
        let f = &r.files[0];
        assert_eq!(f.packets, 100);
        assert_eq!(f.bytes, whole.len() as u64);
        assert_eq!(f.cut, (torn.len() - whole.len()) as u64);
        assert!(f.indexed);
        let name = f.path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("rec_00003.recovered-"), "{name}");
        assert!(name.ends_with(".pcapng"), "{name}");
        assert_eq!(fs::read(&f.path).expect("read"), whole);
        assert!(corecap_index::sidecar_path(&f.path).exists());
        assert!(!part.exists());
        // A second pass finds nothing more.
        assert!(recover_dir(&d, None).expect("again").files.is_empty());
        fs::remove_dir_all(&d).expect("clean");
    }

    #[test]
    fn test_pcap_zero_padding_ends_records() {
        let d = scratch("pcap");
        let mut w = corecap_wire::PcapWriter::new(Vec::new(), 1, 65535).expect("w");
        for i in 0..10u64 {
            w.write_packet(1_000_000_000 * (i + 1), &[1u8; 60], 60, None)
                .expect("p");
        }
        let whole = w.into_inner();
        let mut padded = whole.clone();
        padded.extend_from_slice(&[0u8; 4096]);
        fs::write(d.join(".x.pcap.part"), &padded).expect("write");
        let r = recover_dir(&d, None).expect("recover");
        assert_eq!(r.files[0].packets, 10);
        assert_eq!(fs::read(&r.files[0].path).expect("read"), whole);
        fs::remove_dir_all(&d).expect("clean");
    }

    /// Issue 40: a part whose whole blocks hold no packet (its header, then a torn first
    /// packet) gets no capture name: it is removed, as a writer whose disk filled removes
    /// such a file.
    #[test]
    fn test_issue40_a_part_with_no_packet_gets_no_name() {
        let d = scratch("no-packet");
        let header = pcapng(0);
        let one = pcapng(1);
        let mut b = header.clone();
        b.extend_from_slice(&one[header.len()..header.len() + 20]);
        fs::write(d.join(".rec.pcapng.part"), &b).expect("write");
        let r = recover_dir(&d, None).expect("recover");
        assert!(r.files.is_empty(), "{:?}", r.files);
        let left: Vec<_> = fs::read_dir(&d)
            .expect("dir")
            .filter_map(Result::ok)
            .collect();
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
        fs::remove_dir_all(&d).expect("clean");
    }

    #[test]
    fn test_held_parts_are_left_and_empty_ones_removed() {
        let d = scratch("held");
        let held = d.join(".busy.pcapng.part");
        let _writer = corecap_linux::direct::DirectFile::create(&held, false, 0o640).expect("c");
        fs::write(d.join(".empty.pcapng.part"), [0x0a, 0x0d]).expect("write");
        fs::write(d.join(".x.pcapng.idx.part"), b"half an index").expect("write");
        let r = recover_dir(&d, None).expect("recover");
        assert!(r.files.is_empty());
        assert!(held.exists(), "a live writer's part is not touched");
        assert!(!d.join(".empty.pcapng.part").exists());
        assert!(!d.join(".x.pcapng.idx.part").exists());
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
        fs::remove_dir_all(&d).expect("clean");
    }

    #[test]
    fn test_recovered_name_never_replaces() {
        let d = scratch("names");
        let whole = pcapng(3);
        for _ in 0..3 {
            fs::write(d.join(".a.pcapng.part"), &whole).expect("write");
            let r = recover_dir(&d, None).expect("recover");
            assert_eq!(r.files.len(), 1);
        }
        let names = fs::read_dir(&d)
            .expect("dir")
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "pcapng"))
            .count();
        assert_eq!(names, 3, "three recoveries, three files");
        fs::remove_dir_all(&d).expect("clean");
    }
}
