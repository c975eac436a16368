//! Reading a compressed recording by its frames: bytes of the decompressed stream (the
//! capture file the index describes) at any offset, decompressing only the frames that
//! hold them, found through the file's seek table ([`crate::seekable`]).
//!
//! The index, the catalog and the sessions file of a compressed recording speak of the
//! decompressed stream: a region or a packet is at an offset of the capture file the
//! frames hold, and the seek table turns it into (frame, offset in the frame), as Arkime's
//! `block << 16 | offset` does. So the index is built by the same code over the same
//! blocks as a plain file's, and a query reads a packet by decompressing its frame alone.
//! A stored frame ([`crate::format::stored`]: bytes that did not compress) is not
//! decompressed: the bytes asked for are read from it as from a plain file.
//! [`identity`] and [`content_len`] answer for either kind of file, so whoever checks an
//! index against its file does it once for both.

use std::fs::File;
use std::io;
use std::sync::Arc;

use corecap_index::Identity;

use crate::format::stored;
use crate::seekable::{SeekTable, ZSTD_MAGIC};

/// A compressed file read at offsets of its decompressed stream.
pub struct FrameReader {
    file: File,
    table: Arc<SeekTable>,
    dctx: zstd::bulk::Decompressor<'static>,
    /// The frame last decompressed, and its content.
    cur: Option<usize>,
    plain: Vec<u8>,
    raw: Vec<u8>,
    /// The frame whose head was last read to see whether it is stored, and what it said.
    checked: Option<(usize, bool)>,
    /// Bytes of frames read from the file so far.
    pub disk_bytes: u64,
}

impl std::fmt::Debug for FrameReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameReader")
            .field("frames", &self.table.frames().len())
            .field("cur", &self.cur)
            .finish()
    }
}

impl FrameReader {
    /// A reader of `file` when it is a zstd file ended by a seek table; None when it is
    /// not (a plain file, another tool's zstd file, a part still being written).
    pub fn open(file: File) -> io::Result<Option<Self>> {
        match seek_table(&file)? {
            Some(t) => Self::with_table(file, Arc::new(t)).map(Some),
            None => Ok(None),
        }
    }

    /// A reader of `file` whose table is known.
    pub fn with_table(file: File, table: Arc<SeekTable>) -> io::Result<Self> {
        Ok(Self {
            file,
            table,
            dctx: zstd::bulk::Decompressor::new()?,
            cur: None,
            plain: Vec::new(),
            raw: Vec::new(),
            checked: None,
            disk_bytes: 0,
        })
    }

    /// The seek table.
    pub fn table(&self) -> &Arc<SeekTable> {
        &self.table
    }

    /// Bytes of the decompressed stream.
    pub fn plain_len(&self) -> u64 {
        self.table.plain_len()
    }

    /// Decompresses frame `i`, unless it is the one held.
    fn load(&mut self, i: usize) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        if self.cur == Some(i) {
            return Ok(());
        }
        self.cur = None;
        let f = self.table.frames()[i];
        self.raw.resize(f.len as usize, 0);
        self.file.read_exact_at(&mut self.raw, f.at)?;
        self.disk_bytes += u64::from(f.len);
        self.plain.clear();
        self.plain.reserve(f.plain_len as usize);
        let n = self
            .dctx
            .decompress_to_buffer(&self.raw[..], &mut self.plain)
            .map_err(|e| bad(format!("frame {i} at byte {}: {e}", f.at)))?;
        if n != f.plain_len as usize {
            return Err(bad(format!(
                "frame {i} at byte {} holds {n} bytes, its seek table says {}",
                f.at, f.plain_len
            )));
        }
        self.cur = Some(i);
        Ok(())
    }

    /// Whether frame `i` is stored: its content is on disk as it is, after its head. The
    /// head is read once a frame whose sizes say it may be (see [`stored::may_be`]).
    fn is_stored(&mut self, i: usize) -> io::Result<bool> {
        use std::os::unix::fs::FileExt;
        let f = self.table.frames()[i];
        if !stored::may_be(f.len, f.plain_len) {
            return Ok(false);
        }
        if let Some((c, is)) = self.checked {
            if c == i {
                return Ok(is);
            }
        }
        let mut head = [0u8; stored::HEAD];
        self.file.read_exact_at(&mut head, f.at)?;
        self.disk_bytes += stored::HEAD as u64;
        let is = stored::is_head_of(&head, f.plain_len);
        self.checked = Some((i, is));
        Ok(is)
    }

    /// Reads bytes of the decompressed stream from `at` into `buf`: as many as there are,
    /// fewer only at its end.
    pub fn read_full_at(&mut self, buf: &mut [u8], at: u64) -> io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            let off = at + n as u64;
            let Some(i) = self.table.frame_at(off) else {
                break;
            };
            let f = self.table.frames()[i];
            let rel = (off - f.plain_at) as usize;
            let k = (f.plain_len as usize - rel).min(buf.len() - n);
            if self.is_stored(i)? {
                use std::os::unix::fs::FileExt;
                let at = f.at + (stored::HEAD + rel) as u64;
                self.file.read_exact_at(&mut buf[n..n + k], at)?;
                self.disk_bytes += k as u64;
            } else {
                self.load(i)?;
                buf[n..n + k].copy_from_slice(&self.plain[rel..rel + k]);
            }
            n += k;
        }
        Ok(n)
    }
}

/// What a query reads a file's bytes from: the file, or a compressed file's frames.
#[derive(Debug)]
pub(crate) enum Source {
    File(File),
    Frames(FrameReader),
}

impl Source {
    /// The source of `file`: through its frames when `table` is given.
    pub(crate) fn new(file: File, table: Option<&Arc<SeekTable>>) -> io::Result<Self> {
        Ok(match table {
            Some(t) => Source::Frames(FrameReader::with_table(file, t.clone())?),
            None => Source::File(file),
        })
    }

    /// Reads bytes of the capture from `at` into `buf` (fewer only at its end); the bytes
    /// read, and the bytes read from the disk for them (a frame held from the last read
    /// costs none).
    pub(crate) fn read_full_at(&mut self, buf: &mut [u8], at: u64) -> io::Result<(usize, u64)> {
        match self {
            Source::File(f) => {
                let n = crate::sealed::read_full(&mut crate::read::read_at::ReadAt(f, at), buf)?;
                Ok((n, n as u64))
            }
            Source::Frames(r) => {
                let before = r.disk_bytes;
                let n = r.read_full_at(buf, at)?;
                Ok((n, r.disk_bytes - before))
            }
        }
    }
}

/// Appends the capture bytes a sealed file's chunk holds to `out`: its plaintext, or for a
/// compressed and sealed file the plaintext's frames decompressed (each chunk holds whole
/// frames; the last one holds the seek table, a skippable frame that yields nothing).
pub(crate) fn chunk_capture(plain: &[u8], compressed: bool, out: &mut Vec<u8>) -> io::Result<()> {
    if !compressed {
        out.extend_from_slice(plain);
        return Ok(());
    }
    zstd::stream::copy_decode(plain, out)
        .map_err(|e| bad(format!("the frames of a sealed chunk: {e}")))
}

/// Whether a sealed file's plaintext is a compressed stream (compress, then seal): its
/// first chunk's plaintext begins as a zstd frame. False when that chunk cannot be opened
/// (reading the file then says why).
pub(crate) fn sealed_is_compressed(file: &File, o: &crate::sealed::ChunkOpener) -> bool {
    let mut r = super::read_at::ReadAt(file, o.header_len);
    let mut buf = Vec::new();
    match crate::sealed::read_chunk(&mut r, &mut buf) {
        Ok(crate::sealed::NextChunk::Read) => {}
        _ => return false,
    }
    match o.open(&mut buf, o.header_len) {
        Ok(Some(c)) => {
            let head = crate::sealed::CHUNK_HEAD;
            buf[head..head + c.plain_len].starts_with(&ZSTD_MAGIC)
        }
        _ => false,
    }
}

fn bad(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// The seek table of `file` when it begins as a zstd frame; None otherwise, or when it has
/// none.
pub fn seek_table(file: &File) -> io::Result<Option<SeekTable>> {
    use std::os::unix::fs::FileExt;
    let mut m = [0u8; 4];
    if file.read_at(&mut m, 0)? < 4 || m != ZSTD_MAGIC {
        return Ok(None);
    }
    SeekTable::read(file)
}

/// The identity of the first `covered` bytes of a capture file as its index sees them: of
/// the decompressed stream for a compressed recording, of the file's bytes for any other.
pub fn identity(file: &File, covered: u64) -> io::Result<Identity> {
    let Some(table) = seek_table(file)? else {
        return Identity::of_file(file, covered);
    };
    let mut r = FrameReader::with_table(file.try_clone()?, Arc::new(table))?;
    let span = covered.min(corecap_index::format::IDENTITY_SPAN);
    let mut buf = vec![0u8; span as usize];
    let mut hash_at = |at: u64| -> io::Result<u64> {
        if r.read_full_at(&mut buf, at)? < buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the index covers more than the file holds",
            ));
        }
        Ok(xxhash_rust::xxh3::xxh3_64(&buf))
    };
    Ok(Identity {
        first: hash_at(0)?,
        last: hash_at(covered - span)?,
    })
}

/// The bytes of the capture a file holds as its index counts them: the decompressed
/// stream's for a compressed recording, the file's own for any other.
pub fn content_len(file: &File) -> io::Result<u64> {
    match seek_table(file)? {
        Some(t) => Ok(t.plain_len()),
        None => Ok(file.metadata()?.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A seekable file of `pieces`, each one frame.
    pub(crate) fn seekable(pieces: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut t = SeekTable::new();
        for p in pieces {
            let c = zstd::bulk::compress(p, 1).unwrap();
            t.push(c.len() as u32, p.len() as u32);
            out.extend_from_slice(&c);
        }
        t.encode(&mut out);
        out
    }

    fn temp(tag: &str, bytes: &[u8]) -> File {
        let p = std::env::temp_dir().join(format!("corecap-frames-{tag}-{}", std::process::id()));
        std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
        let f = File::open(&p).unwrap();
        let _ = std::fs::remove_file(&p);
        f
    }

    #[test]
    fn test_reads_across_frames_and_decompresses_only_what_it_reads() {
        let a: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
        let b: Vec<u8> = (0..5000u32).map(|i| (i % 13) as u8).collect();
        let c: Vec<u8> = (0..9000u32).map(|i| (i % 7) as u8).collect();
        let bytes = seekable(&[&a, &b, &c]);
        // The file is one zstd stream.
        let all = zstd::decode_all(&bytes[..]).unwrap();
        assert_eq!(all, [&a[..], &b[..], &c[..]].concat());
        let mut r = FrameReader::open(temp("read", &bytes)).unwrap().unwrap();
        assert_eq!(r.plain_len(), all.len() as u64);
        let mut buf = vec![0u8; 100];
        assert_eq!(r.read_full_at(&mut buf, 74_950).unwrap(), 100);
        assert_eq!(&buf[..], &all[74_950..75_050]);
        let (fb, fc) = (r.table().frames()[1], r.table().frames()[2]);
        assert_eq!(
            r.disk_bytes,
            u64::from(fb.len + fc.len),
            "frames 1 and 2 only"
        );
        assert_eq!(r.read_full_at(&mut buf, all.len() as u64 - 10).unwrap(), 10);
        assert_eq!(r.read_full_at(&mut buf, all.len() as u64 + 10).unwrap(), 0);
        let f = temp("id", &bytes);
        let id = identity(&f, all.len() as u64).unwrap();
        let plain = temp("plain", &all);
        assert_eq!(id, Identity::of_file(&plain, all.len() as u64).unwrap());
        assert_eq!(content_len(&f).unwrap(), all.len() as u64);
        assert!(identity(&f, all.len() as u64 + 1).is_err());
    }

    #[test]
    fn test_a_stored_frame_is_read_where_it_is_without_decompressing() {
        let a: Vec<u8> = (0..20_000u32).map(|i| (i % 13) as u8).collect();
        let b = stored::noise(30_000, 0x9e37_79b9_7f4a_7c15);
        let mut bytes = zstd::bulk::compress(&a, 1).unwrap();
        let mut t = SeekTable::new();
        t.push(bytes.len() as u32, a.len() as u32);
        let at_b = bytes.len();
        bytes.resize(at_b + b.len() + stored::HEAD, 0);
        let n = stored::write(&b, &mut bytes[at_b..]).unwrap();
        t.push(n as u32, b.len() as u32);
        t.encode(&mut bytes);
        let all = zstd::decode_all(&bytes[..]).unwrap();
        assert_eq!(all, [&a[..], &b[..]].concat());
        let mut r = FrameReader::open(temp("stored", &bytes)).unwrap().unwrap();
        let mut buf = vec![0u8; 300];
        assert_eq!(r.read_full_at(&mut buf, 25_000).unwrap(), 300);
        assert_eq!(&buf[..], &all[25_000..25_300]);
        assert_eq!(
            r.disk_bytes,
            (stored::HEAD + 300) as u64,
            "its head and the bytes"
        );
        assert_eq!(r.read_full_at(&mut buf, 40_000).unwrap(), 300);
        assert_eq!(&buf[..], &all[40_000..40_300]);
        assert_eq!(
            r.disk_bytes,
            (stored::HEAD + 600) as u64,
            "the head is read once"
        );
        // Across the two kinds of frame.
        assert_eq!(r.read_full_at(&mut buf, 19_900).unwrap(), 300);
        assert_eq!(&buf[..], &all[19_900..20_200]);
        // A frame whose sizes look stored but whose head is not is decompressed.
        let c = vec![5u8; 1000];
        let z = zstd::bulk::compress(&c, 1).unwrap();
        let mut padded = z.clone();
        // Skippable frame after it, counted in the frame's length, so the sizes match.
        let pad = 1000 + stored::HEAD - z.len() - 8;
        padded.extend_from_slice(&0x184D_2A50u32.to_le_bytes());
        padded.extend_from_slice(&(pad as u32).to_le_bytes());
        padded.resize(padded.len() + pad, 0);
        let mut t = SeekTable::new();
        t.push(padded.len() as u32, 1000);
        t.encode(&mut padded);
        let mut r = FrameReader::open(temp("lookalike", &padded))
            .unwrap()
            .unwrap();
        assert_eq!(r.read_full_at(&mut buf, 100).unwrap(), 300);
        assert_eq!(&buf[..], &c[100..400]);
    }

    #[test]
    fn test_a_sealed_compressed_stream_is_told_and_its_chunks_decompress() {
        use crate::sealed::{seal_bytes, ChunkOpener, Cipher, KeyFile, SealConfig};
        let cfg = SealConfig {
            cipher: Cipher::Aes256Gcm,
            kek: Arc::new(KeyFile::from_bytes([9; 32])),
        };
        let a: Vec<u8> = (0..20_000u32).map(|i| (i % 97) as u8).collect();
        let b = vec![3u8; 4000];
        let zst = seekable(&[&a, &b]);
        let opener = |bytes: &[u8]| ChunkOpener::from_header(&mut &bytes[..], &cfg.kek).unwrap();
        // Sealed compressed plaintext is told from its first chunk; plain plaintext is not.
        let sealed = seal_bytes(&cfg, &zst).unwrap();
        assert!(sealed_is_compressed(&temp("sz", &sealed), &opener(&sealed)));
        let sealed_plain = seal_bytes(&cfg, &a).unwrap();
        assert!(!sealed_is_compressed(
            &temp("sp", &sealed_plain),
            &opener(&sealed_plain)
        ));
        // A sealed file with no chunk is not compressed.
        let empty = seal_bytes(&cfg, &[]).unwrap();
        assert!(!sealed_is_compressed(&temp("se", &empty), &opener(&empty)));
        // A chunk's frames decompress to the capture they hold; the seek table (a
        // skippable frame) yields nothing.
        let mut out = Vec::new();
        chunk_capture(&zst, true, &mut out).unwrap();
        assert_eq!(out, [&a[..], &b[..]].concat());
        let mut out = Vec::new();
        chunk_capture(&a, false, &mut out).unwrap();
        assert_eq!(out, a);
        // Damaged frames are an error, not a panic or a short answer.
        let mut bad = zst.clone();
        bad[10] ^= 0xff;
        assert!(chunk_capture(&bad, true, &mut Vec::new()).is_err());
        assert!(chunk_capture(&zst[..zst.len() / 2], true, &mut Vec::new()).is_err());
    }

    #[test]
    fn test_a_frame_that_is_not_what_the_table_says_is_an_error() {
        let a = vec![7u8; 3000];
        let mut bytes = seekable(&[&a]);
        // The table says 3001 bytes (its frame's entry, then the footer).
        let at = bytes.len() - 9 - 4;
        bytes[at..at + 4].copy_from_slice(&3001u32.to_le_bytes());
        let mut r = FrameReader::open(temp("lie", &bytes)).unwrap().unwrap();
        let mut buf = vec![0u8; 10];
        assert!(r.read_full_at(&mut buf, 0).is_err());
        // A flipped byte in the frame.
        let mut bytes = seekable(&[&a]);
        bytes[6] ^= 0xff;
        let mut r = FrameReader::open(temp("flip", &bytes)).unwrap().unwrap();
        let _ = r.read_full_at(&mut buf, 0);
        // Not zstd, or zstd without a table: no reader.
        assert!(FrameReader::open(temp("none", &a)).unwrap().is_none());
        let c = zstd::bulk::compress(&a, 1).unwrap();
        assert!(FrameReader::open(temp("notable", &c)).unwrap().is_none());
    }
}
