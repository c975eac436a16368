//! Stored frames: zstd frames whose content is kept as it is, in raw blocks
//! (RFC 8878 §3.1.1.2, `Block_Type` 0), for the parts of a compressed recording that do
//! not compress (the payload of encrypted traffic, most of today's traffic).
//!
//! Compressing bytes that do not compress costs the disk writer's CPU for nothing and
//! costs every later query a decompression: a stored frame costs a copy, and a reader
//! takes a packet's bytes out of it with one read of those bytes alone, as from a plain
//! file. Any zstd decoder reads it (`zstd -d`, `zstdcat`), as zstd itself writes such a
//! block when a block does not compress.
//!
//! ```text
//!   0   4   magic 0xFD2FB528 (little-endian)
//!   4   1   frame header descriptor 0xA0: a 4-byte content size, single segment, no
//!           checksum, no dictionary
//!   5   4   content size (the window is the content: single segment)
//!   9   3   block header: last block, raw, size = content size
//!  12       the content
//! ```
//!
//! corecap writes one block a frame, so a stored frame holds at most [`MAX_CONTENT`]
//! bytes (a zstd block's limit); a longer piece is compressed as any other.

use crate::seekable::ZSTD_MAGIC;

/// Bytes before a stored frame's content.
pub const HEAD: usize = 12;
/// The most content one stored frame holds: one block of the largest size zstd allows.
pub const MAX_CONTENT: usize = 128 << 10;
/// The frame header descriptor: `Frame_Content_Size_flag` 2 (4 bytes) and
/// `Single_Segment_flag`.
const DESCRIPTOR: u8 = 0xA0;

/// The head of a stored frame of `len` content bytes; None when `len` is past
/// [`MAX_CONTENT`].
pub fn head(len: usize) -> Option<[u8; HEAD]> {
    if len > MAX_CONTENT {
        return None;
    }
    let mut h = [0u8; HEAD];
    h[..4].copy_from_slice(&ZSTD_MAGIC);
    h[4] = DESCRIPTOR;
    h[5..9].copy_from_slice(&(len as u32).to_le_bytes());
    // Last_Block 1, Block_Type 0 (raw), Block_Size in the upper 21 bits.
    let block = ((len as u32) << 3) | 1;
    h[9..12].copy_from_slice(&block.to_le_bytes()[..3]);
    Some(h)
}

/// Writes `piece` as a stored frame at the start of `out`; its length, or None when `out`
/// is too small or the piece too long for one block.
pub fn write(piece: &[u8], out: &mut [u8]) -> Option<usize> {
    let h = head(piece.len())?;
    let n = HEAD + piece.len();
    let out = out.get_mut(..n)?;
    out[..HEAD].copy_from_slice(&h);
    out[HEAD..].copy_from_slice(piece);
    Some(n)
}

/// Whether a frame of `len` bytes on disk holding `plain_len` bytes may be stored (its
/// head then says for sure, see [`is_head_of`]).
pub fn may_be(len: u32, plain_len: u32) -> bool {
    plain_len as usize <= MAX_CONTENT && len as u64 == plain_len as u64 + HEAD as u64
}

/// Whether `bytes`, a frame's first [`HEAD`] bytes, begin a stored frame of `plain_len`
/// bytes: its content then follows them as it is.
pub fn is_head_of(bytes: &[u8], plain_len: u32) -> bool {
    head(plain_len as usize).is_some_and(|h| bytes == h)
}

/// `len` bytes that do not compress (xorshift from `seed`), for tests.
#[cfg(test)]
pub(crate) fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut next = corecap_wire::xorshift::xorshift64(seed);
    (0..len).map(|_| next() as u8).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_a_stored_frame_is_what_zstd_decodes() {
        for len in [0usize, 1, 300, 32 << 10, MAX_CONTENT] {
            let piece: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            let mut out = vec![0u8; len + HEAD + 5];
            let n = write(&piece, &mut out).unwrap();
            assert_eq!(n, len + HEAD);
            assert_eq!(zstd::decode_all(&out[..n]).unwrap(), piece, "{len}");
            let size = zstd::zstd_safe::get_frame_content_size(&out[..n]);
            assert!(matches!(size, Ok(Some(s)) if s == len as u64), "{len}");
            assert_eq!(zstd::zstd_safe::find_frame_compressed_size(&out), Ok(n));
            assert!(may_be(n as u32, len as u32));
            assert!(is_head_of(&out[..HEAD], len as u32));
            assert!(!is_head_of(&out[..HEAD], len as u32 + 1));
        }
        assert!(write(&[0; 10], &mut [0; 21]).is_none());
        assert!(write(&vec![0; MAX_CONTENT + 1], &mut vec![0; MAX_CONTENT + 20]).is_none());
    }

    #[test]
    fn test_a_compressed_frame_is_not_taken_for_stored() {
        let piece = vec![7u8; 4000];
        let z = zstd::bulk::compress(&piece, 1).unwrap();
        assert!(!may_be(z.len() as u32, 4000));
        assert!(!is_head_of(&z[..HEAD], 4000));
    }
}
