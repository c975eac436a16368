//! The zstd seekable format's seek table: what lets a reader of a compressed recording
//! find the frame that holds a byte of the capture without reading the frames before it.
//!
//! A compressed recording (`--compress zstd`) is a sequence of independent zstd frames,
//! each holding whole pcap records or pcapng blocks, so it is a valid zstd stream that
//! `zstd -d` and `zstdcat | tshark -r -` read. At close the writer ends it with the seek
//! table of the zstd seekable format (facebook/zstd,
//! `contrib/seekable_format/zstd_seekable_compression_format.md`, version 0.1.0): a
//! skippable frame, which every zstd decoder skips, holding one entry per frame and a
//! footer at the very end of the file.
//!
//! ```text
//! skippable frame header
//!   0   4   magic 0x184D2A5E (little-endian, as every field)
//!   4   4   frame size: the bytes after these 8 (entries and footer)
//! entry (one per frame, in file order)
//!   0   4   compressed size
//!   4   4   decompressed size
//!   (8  4   checksum: the low 32 bits of the frame's XXH64, when the descriptor says so)
//! footer (the file's last 9 bytes)
//!   0   4   number of frames
//!   4   1   descriptor: bit 7 checksums present, bits 2-6 reserved (zero)
//!   5   4   magic 0x8F92EAB1
//! ```
//!
//! corecap writes entries without checksums (each frame's content size is in its own
//! header, and a frame that decompresses to another length is refused) and reads both.
//!
//! The table is written here, not with zstd's `contrib` library: that library is not
//! part of libzstd (the `zstd` crate builds no binding of it), the table is a few dozen
//! lines, and the writer needs it split from the frames anyway: frames go to the disk as
//! they are made, through the same aligned buffers as a plain file's blocks, and the
//! table, kept in memory, goes last. Parsing trusts nothing: a count or size that does not
//! add up to the file's length is an error, never a read past the file or an allocation
//! of what a damaged footer claims.

use std::fs::File;
use std::io;

/// The first four bytes of a zstd frame.
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// The magic of the skippable frame that holds the seek table.
pub const SKIPPABLE_MAGIC: u32 = 0x184D_2A5E;
/// The magic that ends a seekable file.
pub const SEEKABLE_MAGIC: u32 = 0x8F92_EAB1;
/// Bytes of the footer.
pub const FOOTER: usize = 9;
/// Bytes of the skippable frame's header.
const SKIP_HEAD: usize = 8;
/// Most frames a table may list (the reference implementation's limit).
pub const MAX_FRAMES: u32 = 0x0800_0000;
/// Largest decompressed frame a reader accepts (corecap writes about 64 KiB; a pcapng
/// block of the largest snap length is far below this).
pub const MAX_FRAME_PLAIN: u32 = 64 << 20;

/// One frame of a compressed file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Offset of the frame in the file.
    pub at: u64,
    /// Its compressed bytes.
    pub len: u32,
    /// Offset of its content in the decompressed stream.
    pub plain_at: u64,
    /// Its decompressed bytes.
    pub plain_len: u32,
}

impl Frame {
    /// The end of its content in the decompressed stream.
    pub fn plain_end(&self) -> u64 {
        self.plain_at + u64::from(self.plain_len)
    }

    /// The end of the frame in the file.
    pub fn end(&self) -> u64 {
        self.at + u64::from(self.len)
    }
}

/// A compressed file's frames, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeekTable {
    frames: Vec<Frame>,
}

/// Why a seek table was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// The descriptor's reserved bits are set.
    #[error("seek table: reserved bits set in its descriptor")]
    Reserved,
    /// The counts do not fit the file.
    #[error("seek table: {0}")]
    Sizes(&'static str),
}

impl SeekTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the next frame: `len` compressed bytes holding `plain_len` bytes.
    pub fn push(&mut self, len: u32, plain_len: u32) {
        let (at, plain_at) = self
            .frames
            .last()
            .map_or((0, 0), |f| (f.end(), f.plain_end()));
        self.frames.push(Frame {
            at,
            len,
            plain_at,
            plain_len,
        });
    }

    /// The frames.
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// Keeps the first `n` frames.
    pub fn truncate(&mut self, n: usize) {
        self.frames.truncate(n);
    }

    /// Bytes of the frames in the file (the table excluded).
    pub fn frames_len(&self) -> u64 {
        self.frames.last().map_or(0, Frame::end)
    }

    /// Bytes of the decompressed stream.
    pub fn plain_len(&self) -> u64 {
        self.frames.last().map_or(0, Frame::plain_end)
    }

    /// The frame whose content holds byte `plain` of the decompressed stream.
    pub fn frame_at(&self, plain: u64) -> Option<usize> {
        let i = self.frames.partition_point(|f| f.plain_end() <= plain);
        (i < self.frames.len() && self.frames[i].plain_len > 0).then_some(i)
    }

    /// Bytes of the table as written.
    pub fn encoded_len(&self) -> usize {
        SKIP_HEAD + 8 * self.frames.len() + FOOTER
    }

    /// Appends the table as a skippable frame (no checksums).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let body = (8 * self.frames.len() + FOOTER) as u32;
        out.extend_from_slice(&SKIPPABLE_MAGIC.to_le_bytes());
        out.extend_from_slice(&body.to_le_bytes());
        for f in &self.frames {
            out.extend_from_slice(&f.len.to_le_bytes());
            out.extend_from_slice(&f.plain_len.to_le_bytes());
        }
        out.extend_from_slice(&(self.frames.len() as u32).to_le_bytes());
        out.push(0);
        out.extend_from_slice(&SEEKABLE_MAGIC.to_le_bytes());
    }

    /// Bytes of the table that `footer` (a file's last [`FOOTER`] bytes) announces; None
    /// when it is no seekable footer. `file_len` bounds it.
    pub fn table_len(footer: &[u8], file_len: u64) -> Result<Option<u64>, TableError> {
        let Some(f) = footer.get(footer.len().saturating_sub(FOOTER)..) else {
            return Ok(None);
        };
        if f.len() < FOOTER || u32_at(f, 5) != SEEKABLE_MAGIC {
            return Ok(None);
        }
        let (n, desc) = (u32_at(f, 0), f[4]);
        if desc & 0x7c != 0 {
            return Err(TableError::Reserved);
        }
        if n > MAX_FRAMES {
            return Err(TableError::Sizes("more frames than a table may list"));
        }
        let entry = if desc & 0x80 != 0 { 12 } else { 8 };
        let len = (SKIP_HEAD + FOOTER) as u64 + u64::from(n) * entry;
        if len > file_len {
            return Err(TableError::Sizes("longer than the file"));
        }
        Ok(Some(len))
    }

    /// Parses a table (`bytes`: exactly the [`SeekTable::table_len`] bytes at the end of a
    /// file of `file_len` bytes): its frames must fill the file before it.
    pub fn parse(bytes: &[u8], file_len: u64) -> Result<SeekTable, TableError> {
        let len = Self::table_len(bytes, file_len)?.ok_or(TableError::Sizes("no footer"))?;
        if len != bytes.len() as u64 {
            return Err(TableError::Sizes("its footer does not match its length"));
        }
        if u32_at(bytes, 0) != SKIPPABLE_MAGIC
            || u64::from(u32_at(bytes, 4)) != len - SKIP_HEAD as u64
        {
            return Err(TableError::Sizes(
                "its frame header does not match its footer",
            ));
        }
        let foot = &bytes[bytes.len() - FOOTER..];
        let n = u32_at(foot, 0) as usize;
        let entry = if foot[4] & 0x80 != 0 { 12 } else { 8 };
        let mut t = SeekTable {
            frames: Vec::with_capacity(n),
        };
        for i in 0..n {
            let e = &bytes[SKIP_HEAD + i * entry..];
            let (c, d) = (u32_at(e, 0), u32_at(e, 4));
            if d > MAX_FRAME_PLAIN {
                return Err(TableError::Sizes("a frame larger than any corecap reads"));
            }
            t.push(c, d);
        }
        if t.frames_len() + len != file_len {
            return Err(TableError::Sizes(
                "its frames' sizes do not add up to the file",
            ));
        }
        Ok(t)
    }

    /// The seek table at the end of `file`: None when the file has none (it is not
    /// seekable, or it is still being written); an error when one is there but damaged.
    pub fn read(file: &File) -> io::Result<Option<SeekTable>> {
        use std::os::unix::fs::FileExt;
        let size = file.metadata()?.len();
        if size < FOOTER as u64 {
            return Ok(None);
        }
        let mut foot = [0u8; FOOTER];
        file.read_exact_at(&mut foot, size - FOOTER as u64)?;
        let bad = |e: TableError| io::Error::new(io::ErrorKind::InvalidData, e.to_string());
        let Some(len) = Self::table_len(&foot, size).map_err(bad)? else {
            return Ok(None);
        };
        let mut b = vec![0u8; len as usize];
        file.read_exact_at(&mut b, size - len)?;
        Self::parse(&b, size).map(Some).map_err(bad)
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(sizes: &[(u32, u32)]) -> SeekTable {
        let mut t = SeekTable::new();
        for &(c, d) in sizes {
            t.push(c, d);
        }
        t
    }

    #[test]
    fn test_emit_and_parse_round_trip() {
        let t = table(&[(100, 65536), (7, 10), (40_000, 65536)]);
        let mut b = vec![0u8; 40_107];
        let at = b.len();
        t.encode(&mut b);
        assert_eq!(b.len() - at, t.encoded_len());
        let n = b.len() as u64;
        assert_eq!(
            SeekTable::table_len(&b, n),
            Ok(Some(t.encoded_len() as u64))
        );
        assert_eq!(SeekTable::parse(&b[at..], n), Ok(t.clone()));
        assert_eq!(t.frame_at(0), Some(0));
        assert_eq!(t.frame_at(65536), Some(1));
        assert_eq!(t.frame_at(65546), Some(2));
        assert_eq!(t.frame_at(t.plain_len()), None);
        assert_eq!(t.frames()[2].at, 107);
        // Its bytes as the format's example gives them: magic, size, entries, footer.
        assert_eq!(&b[at..at + 4], &[0x5e, 0x2a, 0x4d, 0x18]);
        assert_eq!(&b[b.len() - 4..], &[0xb1, 0xea, 0x92, 0x8f]);
    }

    #[test]
    fn test_checksummed_entries_are_read() {
        let mut b = Vec::new();
        b.extend_from_slice(&SKIPPABLE_MAGIC.to_le_bytes());
        b.extend_from_slice(&(12u32 + 9).to_le_bytes());
        b.extend_from_slice(&5u32.to_le_bytes());
        b.extend_from_slice(&9u32.to_le_bytes());
        b.extend_from_slice(&0xdead_beefu32.to_le_bytes());
        b.extend_from_slice(&1u32.to_le_bytes());
        b.push(0x80);
        b.extend_from_slice(&SEEKABLE_MAGIC.to_le_bytes());
        let n = b.len() as u64 + 5;
        assert_eq!(SeekTable::parse(&b, n), Ok(table(&[(5, 9)])));
    }

    #[test]
    fn test_truncated_and_lying_tables_are_refused() {
        let t = table(&[(10, 20), (30, 40)]);
        let mut b = vec![0u8; 40];
        t.encode(&mut b);
        let n = b.len() as u64;
        // A tail cut anywhere: no footer, or sizes that do not add up; never a panic.
        for cut in 0..b.len() {
            let tail = &b[cut..];
            let _ = SeekTable::table_len(tail, tail.len() as u64);
            let _ = SeekTable::parse(tail, tail.len() as u64);
            assert!(SeekTable::parse(tail, n).is_err() || cut == 40);
        }
        // A file one byte longer or shorter than the frames say.
        assert!(SeekTable::parse(&b[40..], n + 1).is_err());
        assert!(SeekTable::parse(&b[40..], n - 1).is_err());
        // A count of frames far past the file.
        let mut lying = b.clone();
        let foot = lying.len() - FOOTER;
        lying[foot..foot + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(SeekTable::table_len(&lying, n).is_err());
        lying[foot..foot + 4].copy_from_slice(&1000u32.to_le_bytes());
        assert_eq!(
            SeekTable::table_len(&lying, n),
            Err(TableError::Sizes("longer than the file"))
        );
        // Reserved bits.
        let mut reserved = b.clone();
        reserved[foot + 4] = 0x04;
        assert_eq!(
            SeekTable::table_len(&reserved, n),
            Err(TableError::Reserved)
        );
        // A decompressed size past what a reader accepts.
        let mut huge = b.clone();
        huge[40 + 12..40 + 16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(SeekTable::parse(&huge[40..], n).is_err());
        // No footer at all.
        assert_eq!(SeekTable::table_len(&[0u8; 9], 100), Ok(None));
        assert_eq!(SeekTable::table_len(&[], 100), Ok(None));
    }
}
