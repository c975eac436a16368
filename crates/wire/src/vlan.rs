//! Putting the 802.1Q tag back into a frame before it is written to a file.
//!
//! The kernel strips the outer VLAN tag from frames it hands to AF_PACKET
//! and reports the tag control information (TCI) in the ring header.
//! Capture files must show the frame as it was on the wire, so both writers
//! ([`crate::pcap`] and [`crate::pcapng`]) re-insert a tag (TPID 0x8100,
//! then the TCI) after the two MAC addresses, as libpcap does. The tagged
//! frame is streamed in three pieces straight to the writer, without being
//! copied into a buffer first.

use std::io::{self, Write};

/// Tag protocol id written in front of a re-inserted TCI.
pub const TPID_8021Q: u16 = 0x8100;

/// Bytes of destination plus source MAC, after which the tag goes.
pub const MAC_PAIR_LEN: usize = 12;

/// Length of one 802.1Q tag.
pub const TAG_LEN: usize = 4;

/// True when a tag with `tci` would be inserted into a frame of `frame_len`
/// captured bytes: a TCI is present and the frame holds both MACs.
#[inline]
pub fn inserts(frame_len: usize, tci: Option<u16>) -> bool {
    tci.is_some() && frame_len >= MAC_PAIR_LEN
}

/// Length of the frame once the tag (if any) is back in.
#[inline]
pub fn tagged_len(frame_len: usize, tci: Option<u16>) -> usize {
    if inserts(frame_len, tci) {
        frame_len + TAG_LEN
    } else {
        frame_len
    }
}

/// Original (wire) length once the tag is back in: grows by 4 exactly when
/// the captured bytes grow.
#[inline]
pub fn tagged_orig_len(frame_len: usize, orig_len: u32, tci: Option<u16>) -> u32 {
    if inserts(frame_len, tci) {
        orig_len.saturating_add(TAG_LEN as u32)
    } else {
        orig_len
    }
}

/// Writes the first `len` bytes of `frame` with its tag re-inserted
/// (`len` is clamped to [`tagged_len`]). Frames shorter than the two MACs
/// are written unchanged.
pub fn write_tagged<W: Write + ?Sized>(
    w: &mut W,
    frame: &[u8],
    tci: Option<u16>,
    len: usize,
) -> io::Result<()> {
    let len = len.min(tagged_len(frame.len(), tci));
    let tci = match tci {
        Some(tci) if frame.len() >= MAC_PAIR_LEN => tci,
        _ => return w.write_all(&frame[..len]),
    };
    let (macs, rest) = frame.split_at(MAC_PAIR_LEN);
    let mut tag = [0u8; TAG_LEN];
    tag[..2].copy_from_slice(&TPID_8021Q.to_be_bytes());
    tag[2..].copy_from_slice(&tci.to_be_bytes());
    let mut left = len;
    for piece in [macs, &tag[..], rest] {
        let n = piece.len().min(left);
        w.write_all(&piece[..n])?;
        left -= n;
    }
    Ok(())
}

/// Appends `frame` with a tag carrying `tci` to `out` (whole frame, no cut).
pub fn insert_tag(frame: &[u8], tci: u16, out: &mut Vec<u8>) {
    out.reserve(frame.len() + TAG_LEN);
    // Writing into a Vec cannot fail.
    let _ = write_tagged(out, frame, Some(tci), usize::MAX);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame() -> Vec<u8> {
        (0u8..20).collect()
    }

    #[test]
    fn test_emit_tagged() {
        let f = frame();
        let mut out = Vec::new();
        insert_tag(&f, 0x2064, &mut out);
        assert_eq!(out.len(), 24);
        assert_eq!(&out[..12], &f[..12]);
        assert_eq!(&out[12..16], &[0x81, 0x00, 0x20, 0x64]);
        assert_eq!(&out[16..], &f[12..]);
        assert_eq!(tagged_orig_len(f.len(), 100, Some(1)), 104);
    }

    #[test]
    fn test_emit_cut() {
        let f = frame();
        let mut full = Vec::new();
        insert_tag(&f, 7, &mut full);
        for len in 0..=full.len() + 3 {
            let mut out = Vec::new();
            write_tagged(&mut out, &f, Some(7), len).unwrap();
            assert_eq!(out, full[..len.min(full.len())]);
        }
    }

    #[test]
    fn test_emit_untagged_and_short() {
        let f = frame();
        let mut out = Vec::new();
        write_tagged(&mut out, &f, None, usize::MAX).unwrap();
        assert_eq!(out, f);
        let mut out = Vec::new();
        write_tagged(&mut out, &f[..11], Some(5), usize::MAX).unwrap();
        assert_eq!(out, &f[..11]);
        assert_eq!(tagged_len(11, Some(5)), 11);
        assert_eq!(tagged_orig_len(11, 60, Some(5)), 60);
    }
}
