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
//! A piece that does not compress by an eighth is written as a stored frame
//! ([`crate::format::stored`]): its bytes as they are, in a zstd frame any decoder reads.
//! The last piece says whether the next compresses (traffic that is encrypted now is
//! encrypted in the next frames, and so is traffic that compresses): a piece after one that
//! saved a quarter is compressed whole, and stored when that saved too little. Otherwise
//! whether a piece compresses is first asked of a sample of [`PROBE_BYTES`] from its
//! middle, so a piece of encrypted payload costs the compression of its sample and a copy,
//! not the compression of all of it, and a query later reads its packets without
//! decompressing. Pieces that follow a stored one are stored without a sample, one, then
//! two, four and up to [`MAX_UNSAMPLED`] while the samples keep saying so. An eighth
//! because that is where the CPU spent stops paying: Arkime reports about a fifth saved on
//! most networks, and encrypted traffic, whose headers alone compress, saves about a tenth
//! at level 1 for two and a half times the recorder's CPU (`docs/compress.md` has the
//! figures).
//!
//! Literal compression (zstd's Huffman coding of the bytes no match covers) is turned off
//! for the pieces after one whose literals zstd left raw: on traffic that compresses only
//! in part (headers and runs between random payload), zstd builds and tries a Huffman
//! table for literals that are random anyway, at half its speed, and writes the same
//! bytes. It is asked again after 1, 2, 4 and up to [`MAX_UNSAMPLED`] pieces, and stays on
//! while literals compress (text, counters). Negative levels never compress literals.
//!
//! Traffic that compresses very well (a piece to a sixteenth or less: zeros, repeated
//! headers, idle links) goes two pieces a frame, with literal compression off: zstd builds
//! its tables once for twice the bytes and codes no literals, which are a small share of
//! such a frame, so it runs about half as fast again and stores less; such a frame is on
//! disk 4 to 6 KiB at most, about the 4 KiB a one-packet read takes of a plain file. The
//! first piece that saves less ends it.
//!
//! Traffic that compresses in part (a piece keeps more than half its bytes, and its
//! literals are left raw: encrypted payload between headers, most of today's traffic) goes
//! at zstd's level -3 while it does, where the writer's level is 1 to 3: it stores about 1%
//! more and runs half as fast again ([`PARTLY_LEVEL`]). A higher level keeps its level, and
//! so does traffic whose literals compress (text), which a fast level would not code.
//!
//! The context is made once per writer and used for every frame: no allocation per frame
//! but the seek table's entry.

use std::io;

use crate::format::stored;
use crate::seekable::SeekTable;

/// Decompressed bytes of a frame, about: a frame ends at the first block boundary past it
/// (a larger block is a frame of its own). Smaller frames cost compression (zstd builds
/// its tables anew for each), larger ones the bytes a query reads for one packet from a
/// frame that compresses only in part; Arkime's 64 KiB blocks stored 4.1% of plain where
/// these store 4.9%, and a query for one connection read 2.6 times what it read of the
/// plain recording where these read 1.2 times (`docs/compress.md`). A stored frame is
/// read in place, whatever its size.
pub const FRAME_BYTES: usize = 32 << 10;

/// A piece that compresses to at most one part in this many of its bytes is very
/// compressible: the next two pieces become one frame, with literal compression off. Such
/// a frame is on disk at most [`MERGED_BYTES`] / 16 (6 KiB), about the 4 KiB block a plain
/// file gives a one-packet read, and zstd runs about half as fast again on it: on the `lab mix`
/// recording, `zstd -b1` with 32 KiB frames stores 5.0% at 1,493 MB/s, with 64 KiB frames
/// and no literal compression 4.6% at 2,383 MB/s (`docs/compress.md`).
const VERY: usize = 16;

/// The level of pieces after one that kept more than half its bytes, when the writer's
/// level is one of [`PARTLY_LEVELS`]: on such traffic (encrypted payload between headers)
/// zstd's fast levels lose almost nothing, and run faster: on the `lab mix` recording with
/// 70% of each payload random, `zstd -b1 -B32K` stores 1.57 times smaller at 635 MB/s
/// (literals not compressed, as [`Framer`] does there), `--fast=3` 1.55 times at 929 MB/s
/// (`docs/compress.md`).
pub const PARTLY_LEVEL: i32 = -3;

/// The levels that give way to [`PARTLY_LEVEL`] on traffic that compresses in part: the
/// fast ones a recorder is run at; a higher level was asked for its ratio, and keeps it.
pub const PARTLY_LEVELS: std::ops::RangeInclusive<i32> = 1..=3;

/// The most bytes two pieces merged into one frame hold (two of [`FRAME_BYTES`] and the
/// blocks that end them, or a piece alone).
pub const MERGED_BYTES: usize = 96 << 10;

/// Bytes of a piece compressed first, from its middle, to see whether the piece compresses
/// (an eighth of a frame: the sample costs an eighth of the compression it may save).
pub const PROBE_BYTES: usize = 4 << 10;

/// The most pieces stored without a sample after a stored one.
pub const MAX_UNSAMPLED: u32 = 16;

/// Whether `compressed` bytes for `plain` save an eighth of them.
fn saves_an_eighth(compressed: usize, plain: usize) -> bool {
    compressed <= plain - plain / 8
}

/// The most cuts a buffer holds: one per [`FRAME_BYTES`] of a buffer of up to 2 MiB (the
/// front end's buffers are smaller: it checks so where it is built).
pub(crate) const MAX_CUTS: usize = (2 << 20) / FRAME_BYTES + 1;

/// Where a buffer of whole blocks is cut into pieces, one frame each: at the first block
/// boundary at or past [`FRAME_BYTES`] from the last cut (a larger block is a piece of its
/// own). The front end notes them as it ends each block, while the block is in its cache:
/// walking the blocks again on the disk writer's thread missed the cache once a block.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cuts {
    /// Offsets in the buffer, rising.
    at: [u32; MAX_CUTS],
    n: usize,
}

impl Default for Cuts {
    fn default() -> Self {
        Self {
            at: [0; MAX_CUTS],
            n: 0,
        }
    }
}

impl Cuts {
    /// Notes a block that ends at `end` in a buffer whose blocks begin at `start`.
    pub(crate) fn block_ends(&mut self, start: usize, end: usize) {
        let from = match self.n {
            0 => start,
            n => self.at[n - 1] as usize,
        };
        if end - from >= FRAME_BYTES && self.n < MAX_CUTS {
            self.at[self.n] = end as u32;
            self.n += 1;
        }
    }

    /// The pieces of the buffer's `blocks`, as ranges of the buffer.
    pub(crate) fn pieces(
        &self,
        blocks: std::ops::Range<usize>,
    ) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let inner = self.at[..self.n]
            .iter()
            .map(|&c| c as usize)
            .filter(move |&c| c > blocks.start && c < blocks.end);
        let ends = inner.chain(std::iter::once(blocks.end));
        ends.scan(blocks.start, |from, end| {
            let piece = *from..end;
            *from = end;
            Some(piece)
        })
        .filter(|p| !p.is_empty())
    }
}

/// The level `--compress zstd` takes without one.
pub const DEFAULT_LEVEL: i32 = 1;

/// The compressor of one disk writer.
pub(crate) struct Framer {
    cctx: zstd::bulk::Compressor<'static>,
    /// The frames of the file being written.
    pub(crate) table: SeekTable,
    /// Pieces still to store without a sample, and how many the next stored sample
    /// skips.
    unsampled: (u32, u32),
    /// The last piece saved a quarter: the next is compressed whole, without a sample.
    compressing: bool,
    /// Literal compression: pieces still to compress without it, and how many the next
    /// frame with raw literals turns it off for (see the module's doc); None at a level
    /// that never compresses literals.
    literals: Option<(u32, u32)>,
    /// Whether that rule has literal compression on now.
    literals_on: bool,
    /// Whether the compressor has literal compression on (its default, `Auto`, is).
    literals_set: bool,
    /// The last piece saved fifteen sixteenths: the next two are one frame, without
    /// literal compression (see the module's doc).
    very: bool,
    /// The writer's level, and whether the last piece compressed kept more than half its
    /// bytes (the next ones go at [`PARTLY_LEVEL`]; see the module's doc), and whether the
    /// compressor is at that level now.
    level: i32,
    partly: bool,
    partly_set: bool,
    /// Frames written stored, since the writer began (every file).
    pub(crate) stored: u64,
    /// Frames written, since the writer began.
    pub(crate) frames: u64,
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
            unsampled: (0, 1),
            compressing: false,
            literals: (level > 0).then_some((0, 1)),
            literals_on: true,
            literals_set: true,
            very: false,
            level,
            partly: false,
            partly_set: false,
            stored: 0,
            frames: 0,
        })
    }

    /// Starts a new file: no frame yet.
    pub(crate) fn reset(&mut self) {
        self.table = SeekTable::new();
    }

    /// Writes `piece` as one frame into `out` (which has room for
    /// `zstd::zstd_safe::compress_bound(piece.len())` bytes), compressed or stored; its
    /// length.
    pub(crate) fn frame(&mut self, piece: &[u8], out: &mut [u8]) -> io::Result<usize> {
        let compressed = match self.worth_compressing(piece, out)? {
            true => {
                let very = self.very;
                // Only while literals go raw anyway: a fast level codes none, and text,
                // whose literals compress, would lose what they save.
                let fast = self.partly && !self.literals_on && PARTLY_LEVELS.contains(&self.level);
                self.set_literals(self.literals_on && !very)?;
                self.set_partly(fast)?;
                let n = self.cctx.compress_to_buffer(piece, out)?;
                self.very = n * VERY <= piece.len();
                self.partly = 2 * n > piece.len();
                if sampled(piece) {
                    self.learn(n, piece.len());
                    if !very {
                        // Raw literals are the rule's to learn from only where it chose
                        // (at the fast level it is counting pieces, not reading them).
                        self.learn_literals(&out[..n]);
                    }
                }
                Some(n).filter(|&n| saves_an_eighth(n, piece.len()))
            }
            false => None,
        };
        if compressed.is_none() {
            self.very = false;
        }
        let n = match compressed {
            Some(n) => n,
            None => match stored::write(piece, out) {
                Some(n) => {
                    self.stored += 1;
                    n
                }
                None => self.cctx.compress_to_buffer(piece, out)?,
            },
        };
        self.frames += 1;
        self.table.push(n as u32, piece.len() as u32);
        Ok(n)
    }

    /// Whether `piece` is worth compressing: the last piece saved a quarter, or its sample of
    /// [`PROBE_BYTES`] saves an eighth (`out` is scratch). A piece too short to sample is,
    /// and one too long to be stored must be. Pieces that follow a stored one are not
    /// sampled (see the module's doc).
    fn worth_compressing(&mut self, piece: &[u8], out: &mut [u8]) -> io::Result<bool> {
        if !sampled(piece) || self.compressing {
            return Ok(true);
        }
        if skip(&mut self.unsampled) {
            return Ok(false);
        }
        let from = (piece.len() - PROBE_BYTES) / 2;
        let n = self
            .cctx
            .compress_to_buffer(&piece[from..from + PROBE_BYTES], out)?;
        let worth = saves_an_eighth(n, PROBE_BYTES);
        if !worth {
            self.learn(n, PROBE_BYTES);
        }
        Ok(worth)
    }

    /// Takes what a compressed `frame` says of its literals: left raw, literal compression
    /// is turned off for the next pieces, twice as many as last time; compressed, it stays
    /// on. While it is off, counts a piece, and turns it on again after the last.
    fn learn_literals(&mut self, frame: &[u8]) {
        let Some(off) = self.literals.as_mut() else {
            return;
        };
        if skip(off) {
            self.literals_on = off.0 == 0;
            return;
        }
        match literals_compressed(frame) {
            Some(false) => {
                back_off(off);
                self.literals_on = false;
            }
            Some(true) => *off = (0, 1),
            None => {}
        }
    }

    /// Turns the compressor's literal compression on (zstd's `Auto`) or off, if it is not
    /// so already; at a level that never compresses literals, leaves it.
    fn set_literals(&mut self, on: bool) -> io::Result<()> {
        use zstd::zstd_safe::{CParameter, ParamSwitch};
        if self.literals.is_none() || on == self.literals_set {
            return Ok(());
        }
        let mode = if on {
            ParamSwitch::Auto
        } else {
            ParamSwitch::Disable
        };
        self.cctx
            .set_parameter(CParameter::LiteralCompressionMode(mode))?;
        self.literals_set = on;
        Ok(())
    }

    /// Puts the compressor at [`PARTLY_LEVEL`] (`fast`) or back at the writer's level, if it
    /// is not so already.
    fn set_partly(&mut self, fast: bool) -> io::Result<()> {
        use zstd::zstd_safe::CParameter;
        if fast == self.partly_set {
            return Ok(());
        }
        let level = if fast { PARTLY_LEVEL } else { self.level };
        self.cctx
            .set_parameter(CParameter::CompressionLevel(level))?;
        self.partly_set = fast;
        Ok(())
    }

    /// The next piece of `pieces` to write as one frame: the next one, or while the pieces
    /// save fifteen sixteenths, it and the one after it as one frame of up to
    /// [`MERGED_BYTES`].
    pub(crate) fn next_piece(
        &self,
        pieces: &mut std::iter::Peekable<impl Iterator<Item = std::ops::Range<usize>>>,
    ) -> Option<std::ops::Range<usize>> {
        let piece = pieces.next()?;
        if !self.very {
            return Some(piece);
        }
        let start = piece.start;
        match pieces.next_if(|n| n.start == piece.end && n.end - start <= MERGED_BYTES) {
            Some(next) => Some(start..next.end),
            None => Some(piece),
        }
    }

    /// Takes what a piece, or a sample, of `plain` bytes said by compressing to `n`: it saved
    /// a quarter (the next piece is compressed whole), an eighth (the next is sampled), or
    /// less (the next are stored unsampled, twice as many as last time).
    fn learn(&mut self, n: usize, plain: usize) {
        self.compressing = n <= plain - plain / 4;
        match saves_an_eighth(n, plain) {
            true => self.unsampled = (0, 1),
            false => back_off(&mut self.unsampled),
        }
    }
}

/// After a "no" (a piece stored, literals left raw), the next pieces go without asking
/// again: `(left, next)` becomes `(next, twice next)`, at most [`MAX_UNSAMPLED`].
fn back_off(b: &mut (u32, u32)) {
    *b = (b.1, (b.1 * 2).min(MAX_UNSAMPLED));
}

/// Counts a piece that goes without asking (see [`back_off`]); false when this one asks.
fn skip(b: &mut (u32, u32)) -> bool {
    let go = b.0 > 0;
    b.0 -= u32::from(go);
    go
}

/// Whether the first block of a zstd `frame` holds Huffman-coded literals: Some(false) for
/// raw or RLE literals (or a raw or RLE block), None where the frame does not parse (RFC
/// 8878 §3.1.1: frame header, block header, then the literals section's first byte).
fn literals_compressed(frame: &[u8]) -> Option<bool> {
    let fhd = *frame.get(4)?;
    let single = fhd & 0x20 != 0;
    let fcs = match fhd >> 6 {
        0 => usize::from(single),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let dict = [0, 1, 2, 4][usize::from(fhd & 3)];
    let at = 5 + usize::from(!single) + dict + fcs;
    let block = frame.get(at..at + 3)?;
    if (block[0] >> 1) & 3 != 2 {
        return Some(false);
    }
    let literals = *frame.get(at + 3)?;
    Some(literals & 3 >= 2)
}

/// Whether `piece` is one that [`Framer::frame`] samples and learns from: long enough for a
/// sample, short enough to be stored.
fn sampled(piece: &[u8]) -> bool {
    (2 * PROBE_BYTES..=stored::MAX_CONTENT).contains(&piece.len())
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
        // Blocks of 1000 bytes from offset 64, then one larger than a frame.
        let mut cuts = Cuts::default();
        let mut ends: Vec<usize> = (1..=100).map(|i| 64 + 1000 * i).collect();
        ends.push(100_064 + FRAME_BYTES + 5);
        ends.push(100_064 + FRAME_BYTES + 1005);
        for &e in &ends {
            cuts.block_ends(64, e);
        }
        let pieces: Vec<_> = cuts.pieces(64..*ends.last().unwrap()).collect();
        assert_eq!(pieces[0].start, 64);
        for w in pieces.windows(2) {
            assert_eq!(w[0].end, w[1].start);
        }
        for p in &pieces[..pieces.len() - 1] {
            assert!(ends.contains(&p.end), "{p:?} ends inside a block");
            assert!((FRAME_BYTES..FRAME_BYTES + 1000).contains(&p.len()) || p.len() > FRAME_BYTES);
        }
        assert_eq!(pieces.last().unwrap().end, *ends.last().unwrap());
        // A flushed buffer's blocks end before its later cuts: no empty or outside piece.
        let few: Vec<_> = cuts.pieces(64..5064).collect();
        assert_eq!((few.len(), &few[0]), (1, &(64..5064)));
        let mut f = Framer::new(1).unwrap();
        let b: Vec<u8> = (0..pieces[0].end).map(|i| (i % 251) as u8).collect();
        let mut out = vec![0u8; zstd::zstd_safe::compress_bound(b.len())];
        let n = f.frame(&b[pieces[0].clone()], &mut out).unwrap();
        assert_eq!(zstd::decode_all(&out[..n]).unwrap(), &b[pieces[0].clone()]);
        assert_eq!(f.table.plain_len(), pieces[0].len() as u64);
        assert_eq!((f.stored, f.frames), (0, 1));
    }

    #[test]
    fn test_a_piece_that_does_not_compress_is_stored() {
        let mut f = Framer::new(1).unwrap();
        let noise = stored::noise(FRAME_BYTES, 88172645463325252);
        let zeros = vec![0u8; FRAME_BYTES];
        // Noise with a compressible middle: the sample says compress, the whole says
        // store.
        let mut mixed = noise.clone();
        let from = (FRAME_BYTES - PROBE_BYTES) / 2;
        mixed[from + 512..from + 3584].fill(0);
        let mut out = vec![0u8; zstd::zstd_safe::compress_bound(FRAME_BYTES)];
        // The piece after a stored one is stored unsampled; the next is sampled again, and
        // the one after a piece that compressed is compressed whole: the mixed piece, stored
        // when that saved too little.
        let pieces = [
            (&noise, true),
            (&zeros, true),
            (&zeros, false),
            (&mixed, true),
        ];
        for (i, (piece, stored)) in pieces.into_iter().enumerate() {
            let n = f.frame(piece, &mut out).unwrap();
            assert_eq!(zstd::decode_all(&out[..n]).unwrap(), &piece[..]);
            assert_eq!(n == FRAME_BYTES + stored::HEAD, stored, "piece {i}: {n}");
        }
        assert_eq!((f.stored, f.frames), (3, 4));
        assert_eq!((f.unsampled, f.compressing), ((1, 2), false));
        // Stored pieces skip 1, 2, 4, ... and at most MAX_UNSAMPLED pieces.
        let mut skipped = Vec::new();
        for _ in 0..80 {
            let before = f.unsampled.0;
            f.frame(&noise, &mut out).unwrap();
            if before == 0 {
                skipped.push(f.unsampled.0);
            }
        }
        assert_eq!(skipped[..6], [2, 4, 8, 16, 16, 16]);
        // A short piece is compressed first, and stored when that saved too little.
        let n = f.frame(&noise[..100], &mut out).unwrap();
        assert_eq!(n, 100 + stored::HEAD);
    }

    #[test]
    fn test_very_compressible_pieces_go_two_a_frame_without_literal_compression() {
        // Zeros with a word of text every 256 bytes (it compresses to about a thirtieth,
        // with literals worth coding), then noise, then the same again.
        let noise = stored::noise(8 * FRAME_BYTES, 11);
        let sparse = |seed: usize| -> Vec<u8> {
            let mut v = vec![0u8; 8 * FRAME_BYTES];
            for (i, w) in v.chunks_mut(256).enumerate() {
                for (j, b) in w[..8].iter_mut().enumerate() {
                    let r = usize::from(noise[(i * 8 + j + seed) % noise.len()]);
                    *b = b"etaoin shrdlu cmfwyp vbgkqj xz"[r % 30];
                }
            }
            v
        };
        let buf = [sparse(0), noise[..4 * FRAME_BYTES].to_vec(), sparse(3)].concat();
        let mut cuts = Cuts::default();
        for end in (1000..=buf.len()).step_by(1000) {
            cuts.block_ends(0, end);
        }
        let mut f = Framer::new(1).unwrap();
        let mut out = vec![0u8; zstd::zstd_safe::compress_bound(MERGED_BYTES)];
        let mut pieces = cuts.pieces(0..buf.len() / 1000 * 1000).peekable();
        let mut frames = Vec::new();
        let mut back = Vec::new();
        while let Some(piece) = f.next_piece(&mut pieces) {
            let very = f.very;
            let n = f.frame(&buf[piece.clone()], &mut out).unwrap();
            back.extend(zstd::decode_all(&out[..n]).unwrap());
            frames.push((
                piece.start,
                piece.len(),
                very,
                literals_compressed(&out[..n]),
            ));
        }
        assert_eq!(
            back,
            buf[..buf.len() / 1000 * 1000],
            "the frames hold the bytes"
        );
        let single = FRAME_BYTES..FRAME_BYTES + 1000;
        let merged = 2 * FRAME_BYTES..2 * FRAME_BYTES + 2000;
        // The first piece is one frame with its literals coded; it was very compressible,
        // so the next ones go two a frame, literals raw.
        assert!(single.contains(&frames[0].1), "{frames:?}");
        assert_eq!(
            (frames[0].2, frames[0].3),
            (false, Some(true)),
            "{frames:?}"
        );
        let second = sparse(0).len();
        let firsts: Vec<_> = frames.iter().filter(|f| f.0 < second).skip(1).collect();
        assert!(firsts.len() >= 3, "{frames:?}");
        for f in &firsts[..firsts.len() - 1] {
            assert!(merged.contains(&f.1), "{f:?}");
            assert_eq!((f.2, f.3), (true, Some(false)), "{f:?}");
        }
        // Noise goes one piece a frame, stored; the literal rule learned nothing from the
        // frames it did not choose.
        let noisy: Vec<_> = frames
            .iter()
            .filter(|f| f.0 >= second + FRAME_BYTES && f.0 < second + 3 * FRAME_BYTES)
            .collect();
        assert!(!noisy.is_empty());
        assert!(
            noisy.iter().all(|f| single.contains(&f.1) && !f.2),
            "{noisy:?}"
        );
        assert!(f.literals_on);
        // After the noise (and the pieces stored unsampled after it), one piece a frame
        // until one is very compressible again, then two a frame.
        let after: Vec<_> = frames
            .iter()
            .filter(|f| f.0 >= second + 4 * FRAME_BYTES)
            .collect();
        let again = after.iter().position(|f| f.2).expect("two a frame again");
        assert!(again > 0, "{after:?}");
        assert!(
            after[..again].iter().all(|f| single.contains(&f.1)),
            "{after:?}"
        );
        assert!(merged.contains(&after[again].1), "{after:?}");
        assert_eq!(after[again].3, Some(false), "{after:?}");
    }

    #[test]
    fn test_traffic_that_compresses_in_part_goes_at_the_fast_level() {
        // Random runs between zeros: keeps about three fifths, literals raw.
        let noise = stored::noise(16 * FRAME_BYTES, 5);
        let part: Vec<u8> = noise
            .chunks(1024)
            .flat_map(|c| [&c[..620], &[0u8; 404][..]].concat())
            .collect();
        let text: Vec<u8> = noise
            .iter()
            .map(|&b| b"etaoin shrdlu cmfwyp vbgkqj xz"[usize::from(b) % 30])
            .collect();
        let run = |level: i32, data: &[u8]| -> (Framer, Vec<usize>) {
            let mut f = Framer::new(level).unwrap();
            let mut out = vec![0u8; zstd::zstd_safe::compress_bound(FRAME_BYTES)];
            let mut sizes = Vec::new();
            for piece in data.chunks(FRAME_BYTES) {
                let n = f.frame(piece, &mut out).unwrap();
                assert_eq!(zstd::decode_all(&out[..n]).unwrap(), piece);
                sizes.push(n);
            }
            (f, sizes)
        };
        // Level 1: once its literals go raw, the rest go at the fast level, and store
        // within 3% of what level 1 stores.
        let (f, fast) = run(1, &part);
        assert!(f.partly_set, "at the fast level");
        let whole_level_1: usize = part
            .chunks(FRAME_BYTES)
            .map(|p| zstd::bulk::compress(p, 1).unwrap().len())
            .sum();
        let ours: usize = fast.iter().sum();
        assert!(
            ours * 100 <= whole_level_1 * 103,
            "{ours} against {whole_level_1}"
        );
        assert!(
            fast.iter().all(|&n| n < FRAME_BYTES),
            "{fast:?}: none stored"
        );
        // Text, whose literals compress, keeps level 1; so does level 5 on any traffic.
        let (f, _) = run(1, &text);
        assert!(!f.partly_set);
        let (f, _) = run(5, &part);
        assert!(!f.partly_set);
    }

    #[test]
    fn test_literals_are_compressed_only_while_they_compress() {
        // Text: its literals compress. Random runs between zeros: they do not.
        let noise = stored::noise(FRAME_BYTES, 7);
        // Letters at random: few matches, but each takes about 5 of its 8 bits.
        let text: Vec<u8> = noise
            .iter()
            .map(|&b| b"etaoin shrdlu cmfwyp vbgkqj xz"[usize::from(b) % 30])
            .collect();
        let mut part = noise.clone();
        for run in part.chunks_mut(1024) {
            run[..400].fill(0);
        }
        let mut out = vec![0u8; zstd::zstd_safe::compress_bound(FRAME_BYTES)];
        let mut f = Framer::new(1).unwrap();
        let n = f.frame(&text, &mut out).unwrap();
        assert_eq!(literals_compressed(&out[..n]), Some(true));
        assert_eq!(f.literals, Some((0, 1)));
        let n = f.frame(&part, &mut out).unwrap();
        assert_eq!(literals_compressed(&out[..n]), Some(false));
        assert_eq!(f.literals, Some((1, 2)), "off for the next piece");
        // Off: the same bytes come back, and it is asked again after one piece.
        let n = f.frame(&part, &mut out).unwrap();
        assert_eq!(zstd::decode_all(&out[..n]).unwrap(), part);
        assert_eq!(f.literals, Some((0, 2)));
        let n = f.frame(&text, &mut out).unwrap();
        assert_eq!(literals_compressed(&out[..n]), Some(true), "on again");
        assert_eq!(f.literals, Some((0, 1)));
        // A stored frame, and no frame at all.
        let n = stored::write(&noise, &mut out).unwrap();
        assert_eq!(literals_compressed(&out[..n]), Some(false));
        assert_eq!(literals_compressed(&out[..6]), None);
        // Negative levels never compress literals: nothing to learn.
        assert_eq!(Framer::new(-5).unwrap().literals, None);
    }
}
