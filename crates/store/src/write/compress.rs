//! Compression of a recording (`--compress zstd[:LEVEL]`), on the disk writer's thread:
//! each buffer of whole blocks that the front end hands over is cut at block boundaries
//! into pieces of about [`FRAME_BYTES`], and each piece becomes one independent zstd frame
//! (with its content size), written as it is made. The frames' sizes are kept for the seek
//! table ([`crate::seekable`]) that ends the file at close.
//!
//! A frame never splits a block, so every frame boundary is a block boundary of the capture
//! file inside: a crashed file is recovered by dropping its torn last frame, and a query
//! that wants one packet decompresses the one frame that holds it.
//!
//! The context is made once per writer and used for every frame: no allocation per frame
//! but the seek table's entry.

use std::io;

use crate::read::stream::Framing;
use crate::seekable::SeekTable;

/// Decompressed bytes of a frame, about: a frame ends at the first block boundary past it
/// (a larger block is a frame of its own). Arkime's blocks are 64 KiB; smaller frames cost
/// compression, larger ones cost the bytes a query reads for one packet (see
/// `docs/compress.md` for the figures).
pub const FRAME_BYTES: usize = 32 << 10;

/// The level `--compress zstd` takes without one.
pub const DEFAULT_LEVEL: i32 = 1;

/// The compressor of one disk writer.
pub(crate) struct Framer {
    cctx: zstd::bulk::Compressor<'static>,
    /// The frames of the file being written.
    pub(crate) table: SeekTable,
    /// How the file's blocks are framed (from its header).
    pub(crate) framing: Framing,
}

impl std::fmt::Debug for Framer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Framer")
            .field("frames", &self.table.frames().len())
            .finish()
    }
}

impl Framer {
    /// A compressor at `level`.
    pub(crate) fn new(level: i32) -> io::Result<Self> {
        Ok(Self {
            cctx: zstd::bulk::Compressor::new(level)?,
            table: SeekTable::new(),
            framing: Framing::Unknown,
        })
    }

    /// Starts a new file: no frame yet.
    pub(crate) fn reset(&mut self) {
        self.table = SeekTable::new();
        self.framing = Framing::Unknown;
    }

    /// The end of the next piece of `blocks` from `start`: the first block boundary at or
    /// past [`FRAME_BYTES`], or the end (blocks of unknown framing: the whole buffer).
    pub(crate) fn piece_end(&self, blocks: &[u8], start: usize) -> usize {
        let mut at = start;
        while at < blocks.len() && at - start < FRAME_BYTES {
            match self.framing.block_len(&blocks[at..]) {
                Some(l) if at + l <= blocks.len() => at += l,
                _ => return blocks.len(),
            }
        }
        at
    }

    /// Compresses `piece` as one frame into `out` (which has room for
    /// `zstd::zstd_safe::compress_bound(piece.len())` bytes); its compressed length.
    pub(crate) fn frame(&mut self, piece: &[u8], out: &mut [u8]) -> io::Result<usize> {
        let n = self.cctx.compress_to_buffer(piece, out)?;
        self.table.push(n as u32, piece.len() as u32);
        Ok(n)
    }
}

/// Parses `zstd[:LEVEL]` (the `--compress` value and config key): the level.
pub fn parse(spec: &str) -> Result<i32, String> {
    let (algo, level) = match spec.split_once(':') {
        Some((a, l)) => (a, Some(l)),
        None => (spec, None),
    };
    if algo != "zstd" {
        return Err(format!(
            "--compress {spec}: the only compression is zstd (zstd or zstd:LEVEL)"
        ));
    }
    let Some(l) = level else {
        return Ok(DEFAULT_LEVEL);
    };
    let range = zstd::compression_level_range();
    match l.trim().parse::<i32>() {
        Ok(n) if range.contains(&n) && n != 0 => Ok(n),
        _ => Err(format!(
            "--compress {spec}: the level is a number from 1 to {} (or negative, down to {}, \
             for faster and larger)",
            range.end(),
            range.start()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_parse() {
        assert_eq!(parse("zstd"), Ok(DEFAULT_LEVEL));
        assert_eq!(parse("zstd:3"), Ok(3));
        assert_eq!(parse("zstd:-5"), Ok(-5));
        for bad in ["gzip", "zstd:", "zstd:0", "zstd:99", "zstd:x", "lz4:1"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn test_pieces_end_at_block_boundaries() {
        let mut f = Framer::new(1).unwrap();
        f.framing = Framing::Pcapng { be: false };
        // Blocks of 1000 bytes (an EPB's length at offset 4).
        let mut b = Vec::new();
        for _ in 0..100 {
            let mut blk = vec![0u8; 1000];
            blk[..4].copy_from_slice(&6u32.to_le_bytes());
            blk[4..8].copy_from_slice(&1000u32.to_le_bytes());
            b.extend_from_slice(&blk);
        }
        let end = f.piece_end(&b, 0);
        assert_eq!(end % 1000, 0);
        assert!((FRAME_BYTES..FRAME_BYTES + 1000).contains(&end));
        assert_eq!(f.piece_end(&b, 90_000), 100_000);
        // A block length past the buffer: the rest is one piece.
        b[end + 4..end + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(f.piece_end(&b, end), b.len());
        let mut out = vec![0u8; zstd::zstd_safe::compress_bound(end)];
        let n = f.frame(&b[..end], &mut out).unwrap();
        assert_eq!(zstd::decode_all(&out[..n]).unwrap(), &b[..end]);
        assert_eq!(f.table.plain_len(), end as u64);
    }
}
