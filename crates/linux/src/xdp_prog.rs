//! The flow-spread hash of corecap's XDP program (bpf/corecap_xdp.c), in Rust: what
//! slot the program picks for a frame, for tests and for reasoning about the spread.
//!
//! # The spread hash
//!
//! For IPv4 (optionally behind one 802.1Q tag): `saddr ^ daddr ^ proto`, and for an
//! unfragmented TCP, UDP or SCTP packet with a 20-byte header also `sport ^ dport`. For
//! IPv6: the xor of the eight address words and the next header, and the ports when the
//! next header is TCP, UDP or SCTP. Words are read as the little-endian machine loads
//! them. The value is then mixed (`h *= 0x9e3779b1; h ^= h >> 16`, in 32 bits) and taken
//! modulo `n`. Swapping source and destination changes none of the xors, so both
//! directions of a flow reach the same socket. Other frames go to slot 0 of their queue.

const GOLDEN: u32 = 0x9e37_79b1;

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn le16(b: &[u8], at: usize) -> u32 {
    u32::from(u16::from_le_bytes([b[at], b[at + 1]]))
}

fn ports(b: &[u8], at: usize, proto: u32) -> u32 {
    if matches!(proto, 6 | 17 | 132) && b.len() >= at + 4 {
        let w = le32(b, at);
        (w >> 16) ^ (w & 0xffff)
    } else {
        0
    }
}

/// The slot (0..n) the spread program picks for `frame`, computed in Rust.
pub fn spread_slot(frame: &[u8], n: u32) -> u32 {
    let mut h = 0u32;
    let mut b = frame;
    if b.len() >= 14 {
        let mut et = le16(b, 12);
        let mut ok = true;
        if et == 0x0081 {
            b = &b[4..];
            ok = b.len() >= 14;
            et = if ok { le16(b, 12) } else { 0 };
        }
        if ok && et == 0x0008 && b.len() >= 34 {
            let proto = u32::from(b[23]);
            h = le32(b, 26) ^ le32(b, 30) ^ proto;
            let whole = b[14] == 0x45 && le16(b, 20) & 0xff3f == 0;
            if whole && b.len() >= 38 {
                h ^= ports(b, 34, proto);
            }
        } else if ok && et == 0xdd86 && b.len() >= 54 {
            let nh = u32::from(b[20]);
            h = (0..8).fold(nh, |x, k| x ^ le32(b, 22 + 4 * k));
            if b.len() >= 58 {
                h ^= ports(b, 54, nh);
            }
        }
    }
    h = h.wrapping_mul(GOLDEN);
    h ^= h >> 16;
    h % n.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(src: [u8; 4], dst: [u8; 4], proto: u8, sport: u16, dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = proto;
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    #[test]
    fn test_mirror_is_symmetric_and_spreads() {
        let mut seen = [0u32; 4];
        for i in 0..1000u32 {
            let a = [10, 0, (i >> 8) as u8, i as u8];
            let b = [10, 1, 0, (i % 7) as u8];
            let sp = 1024 + (i as u16 % 300);
            let fwd = v4(a, b, 17, sp, 5001);
            let rev = v4(b, a, 17, 5001, sp);
            assert_eq!(spread_slot(&fwd, 4), spread_slot(&rev, 4));
            seen[spread_slot(&fwd, 4) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c > 150), "{seen:?}");
    }

    /// The program the kernel runs picks the slot the Rust mirror computes, on IPv4 and
    /// IPv6, tagged and untagged, fragments, short frames and non-IP.
    #[test]
    fn test_program_matches_mirror() {
        let Ok(mut prog) = crate::xsk::slot_program(3) else {
            eprintln!("skipped: loading XDP programs needs root");
            return;
        };
        let mut frames = Vec::new();
        for i in 0..200u32 {
            let a = [10, 0, (i >> 8) as u8, i as u8];
            let b = [192, 168, 1, (i % 13) as u8];
            let mut f = v4(a, b, [6, 17, 1][i as usize % 3], 1000 + i as u16, 80);
            frames.push(f.clone());
            if i % 5 == 0 {
                f[20] = 0x20; // more fragments: no ports
                frames.push(f.clone());
            }
            // The same behind a VLAN tag.
            let mut t = f[..12].to_vec();
            t.extend_from_slice(&[0x81, 0x00, 0x00, 0x64]);
            t.extend_from_slice(&f[12..]);
            frames.push(t);
            let mut v6 = vec![0u8; 80];
            v6[12..14].copy_from_slice(&[0x86, 0xdd]);
            v6[20] = 17;
            v6[22..26].copy_from_slice(&i.to_be_bytes());
            v6[38..42].copy_from_slice(&(i * 7).to_be_bytes());
            v6[54..56].copy_from_slice(&(i as u16).to_be_bytes());
            frames.push(v6);
        }
        frames.push(vec![0u8; 20]); // not IP
        frames.push(v4([1, 2, 3, 4], [5, 6, 7, 8], 17, 1, 2)[..36].to_vec()); // cut in the ports
        let mut got = [0u32; 3];
        for f in &frames {
            let slot = prog.test_run(f).expect("test run");
            assert_eq!(slot, spread_slot(f, 3), "frame {f:02x?}");
            got[slot as usize] += 1;
        }
        assert!(got.iter().all(|&c| c > 50), "{got:?}");
    }
}
