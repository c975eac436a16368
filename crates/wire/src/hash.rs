//! Symmetric Toeplitz flow hash, as computed by NICs for RSS.
//!
//! The Toeplitz hash of Microsoft's Receive Side Scaling XORs, for every set
//! bit `b` of the input (most significant bit of the first byte first), the
//! 32 key bits that start at bit `b`. RSS feeds it source address,
//! destination address, source port and destination port, in network byte
//! order: 12 bytes for IPv4, 36 for IPv6, 8 or 32 without ports.
//!
//! With the key `0x6d5a` repeated ([`SYMMETRIC_RSS_KEY`], Woo and Park,
//! "Scalable TCP Session Monitoring with Symmetric Receive-side Scaling",
//! 2012), the 32-bit key window at bit `b` depends only on `b mod 16`. Each
//! 16-bit word of the input then contributes the same way wherever it sits,
//! so swapping source and destination (both a whole number of words) leaves
//! the hash unchanged: both directions of a flow land on the same worker.
//! It also means the hash is a linear function of the XOR of all input
//! words, so [`flow_hash`] folds the tuple to 16 bits and does two table
//! lookups. The price is that it has at most 2^16 distinct values, which is
//! ample for an indirection table of a few thousand buckets.
//!
//! [`toeplitz`] is the bit-by-bit reference for any 40-byte key;
//! [`ToeplitzTable`] is the table-driven form (one 256-entry table per input
//! byte position) that the tests check against it.

use crate::flow::{FlowKey, IpFamily, ETH_HEADER_LEN};

/// pcapng `epb_hash` algorithm code of the Toeplitz hash.
pub const HASH_ALGORITHM_TOEPLITZ: u8 = 5;

/// Length of an RSS key in bytes.
pub const RSS_KEY_LEN: usize = 40;

/// Longest RSS input: IPv6 addresses and both ports.
pub const RSS_INPUT_MAX: usize = 36;

/// The symmetric RSS key: `0x6d5a` repeated (Woo and Park, 2012).
pub const SYMMETRIC_RSS_KEY: [u8; RSS_KEY_LEN] = {
    let mut k = [0u8; RSS_KEY_LEN];
    let mut i = 0;
    while i < RSS_KEY_LEN {
        k[i] = 0x6d;
        k[i + 1] = 0x5a;
        i += 2;
    }
    k
};

/// The default (non-symmetric) key of Microsoft's RSS verification suite,
/// also the default of many NIC drivers.
pub const MICROSOFT_RSS_KEY: [u8; RSS_KEY_LEN] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// The 32 key bits starting at bit `bit` (MSB of `key[0]` is bit 0); bits
/// past the end of the key read as zero.
const fn key_window(key: &[u8; RSS_KEY_LEN], bit: usize) -> u32 {
    let byte = bit / 8;
    let shift = bit % 8;
    // Five bytes cover any 32-bit window that starts inside `byte`.
    let mut acc: u64 = 0;
    let mut i = 0;
    while i < 5 {
        let b = if byte + i < RSS_KEY_LEN {
            key[byte + i]
        } else {
            0
        };
        acc = (acc << 8) | b as u64;
        i += 1;
    }
    // acc holds 40 bits; drop `shift` leading bits, keep the next 32.
    ((acc >> (8 - shift)) & 0xffff_ffff) as u32
}

/// Bit-by-bit Toeplitz hash of `input` under `key`, the reference algorithm
/// of Microsoft's "RSS hashing functions" documentation.
///
/// Input bytes past the 40th contribute nothing (their key window is empty).
pub fn toeplitz(key: &[u8; RSS_KEY_LEN], input: &[u8]) -> u32 {
    let mut result = 0u32;
    for (i, &byte) in input.iter().enumerate().take(RSS_KEY_LEN) {
        for j in 0..8 {
            if byte & (0x80 >> j) != 0 {
                result ^= key_window(key, i * 8 + j);
            }
        }
    }
    result
}

/// Table-driven Toeplitz hash for one key: for each input byte position,
/// the hash contribution of each of the 256 byte values.
///
/// 40 KiB; build it once (it is a `const fn`, so it can live in a `static`).
#[derive(Clone)]
pub struct ToeplitzTable {
    table: [[u32; 256]; RSS_KEY_LEN],
}

impl std::fmt::Debug for ToeplitzTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToeplitzTable").finish_non_exhaustive()
    }
}

impl ToeplitzTable {
    /// Precomputes the per-position tables of `key`.
    pub const fn new(key: &[u8; RSS_KEY_LEN]) -> ToeplitzTable {
        let mut table = [[0u32; 256]; RSS_KEY_LEN];
        let mut pos = 0;
        while pos < RSS_KEY_LEN {
            let mut windows = [0u32; 8];
            let mut j = 0;
            while j < 8 {
                // Value bit j (mask 1 << j) is input bit pos*8 + 7 - j,
                // counting from the most significant bit of byte 0.
                windows[j] = key_window(key, pos * 8 + 7 - j);
                j += 1;
            }
            // table[v] = table[v without its lowest set bit] ^ window(lowest bit)
            let mut v = 1usize;
            while v < 256 {
                let low = v.trailing_zeros() as usize;
                table[pos][v] = table[pos][v & (v - 1)] ^ windows[low];
                v += 1;
            }
            pos += 1;
        }
        ToeplitzTable { table }
    }

    /// Hash of `input`: one lookup per byte. Equal to [`toeplitz`] with the
    /// table's key; bytes past the 40th contribute nothing.
    #[inline]
    pub fn hash(&self, input: &[u8]) -> u32 {
        input
            .iter()
            .zip(self.table.iter())
            .fold(0, |h, (&b, t)| h ^ t[usize::from(b)])
    }
}

/// Tables of the symmetric key, built at compile time.
static SYMMETRIC_TABLE: ToeplitzTable = ToeplitzTable::new(&SYMMETRIC_RSS_KEY);

/// Writes the RSS input of `k` into `out` (source address, destination
/// address, then source and destination port unless both are 0) and
/// returns its length: 12 or 8 for IPv4, 36 or 32 for IPv6.
pub fn rss_input(k: &FlowKey, out: &mut [u8; RSS_INPUT_MAX]) -> usize {
    let alen = match k.family {
        IpFamily::V4 => 4,
        IpFamily::V6 => 16,
    };
    out[..alen].copy_from_slice(&k.src[..alen]);
    out[alen..2 * alen].copy_from_slice(&k.dst[..alen]);
    let mut n = 2 * alen;
    if k.sport != 0 || k.dport != 0 {
        out[n..n + 2].copy_from_slice(&k.sport.to_be_bytes());
        out[n + 2..n + 4].copy_from_slice(&k.dport.to_be_bytes());
        n += 4;
    }
    n
}

/// Toeplitz hash of `k`'s RSS input under any key's table.
pub fn flow_hash_with(table: &ToeplitzTable, k: &FlowKey) -> u32 {
    let mut buf = [0u8; RSS_INPUT_MAX];
    let n = rss_input(k, &mut buf);
    table.hash(&buf[..n])
}

/// XOR of the big-endian 16-bit words of `bytes` (even length).
#[inline]
fn fold16(bytes: &[u8]) -> u16 {
    bytes
        .chunks_exact(2)
        .fold(0, |acc, w| acc ^ u16::from_be_bytes([w[0], w[1]]))
}

/// Symmetric hash of a 16-bit fold: with a period-16 key every even byte
/// position has the table of position 0 and every odd one that of position 1.
#[inline]
fn symmetric_of_fold(fold: u16) -> u32 {
    let [hi, lo] = fold.to_be_bytes();
    SYMMETRIC_TABLE.table[0][usize::from(hi)] ^ SYMMETRIC_TABLE.table[1][usize::from(lo)]
}

/// Symmetric Toeplitz hash of a flow: equal to
/// `toeplitz(&SYMMETRIC_RSS_KEY, rss input of k)`, and
/// `flow_hash(k) == flow_hash(&k.reversed())`. VLAN and protocol are not
/// part of the RSS input. Two table lookups after folding the tuple.
#[inline]
pub fn flow_hash(k: &FlowKey) -> u32 {
    // The fold of the addresses' 16-bit words, as whole numbers: XOR the two addresses,
    // then fold the halves down to 16 bits.
    let x = u128::from_be_bytes(k.src) ^ u128::from_be_bytes(k.dst);
    let a = match k.family {
        IpFamily::V4 => (x >> 96) as u32,
        IpFamily::V6 => {
            let y = (x >> 64) as u64 ^ x as u64;
            (y >> 32) as u32 ^ y as u32
        }
    };
    let fold = (a >> 16) as u16 ^ a as u16 ^ k.sport ^ k.dport;
    symmetric_of_fold(fold)
}

/// Symmetric hash of a frame for steering.
///
/// IP frames give [`flow_hash`] of their [`crate::flow::flow_key`]. Other
/// frames with a full Ethernet header (and IP frames whose headers are cut
/// or broken) give the symmetric Toeplitz hash of destination and source
/// MAC, so both directions still meet. Frames shorter than an Ethernet
/// header give 0. `ring_vlan` is accepted for symmetry with `flow_key`; the
/// VLAN is not hashed.
#[inline]
pub fn frame_hash(frame: &[u8], ring_vlan: Option<u16>) -> u32 {
    if frame.len() < ETH_HEADER_LEN {
        return 0;
    }
    if let Some(h) = fast_ipv4_hash(frame) {
        return h;
    }
    match crate::flow::flow_key(frame, ring_vlan) {
        Ok(k) => flow_hash(&k),
        Err(_) => mac_hash(frame),
    }
}

/// The common case without building a [`FlowKey`]: an untagged IPv4 TCP or UDP frame with
/// a 20-byte header, not a fragment, whose total length covers the ports. Anything else
/// returns None and takes the general path; both give the same hash.
#[inline]
fn fast_ipv4_hash(f: &[u8]) -> Option<u32> {
    let h = f.get(..38)?;
    if h[12] != 0x08 || h[13] != 0x00 || h[14] != 0x45 || (h[23] != 6 && h[23] != 17) {
        return None;
    }
    let total = u16::from_be_bytes([h[16], h[17]]);
    let frag = u16::from_be_bytes([h[20], h[21]]) & 0x3fff;
    if frag != 0 || total < 28 || usize::from(total) + 14 > f.len() {
        return None;
    }
    // The same fold as `fold16` over addresses and ports, as six direct 16-bit loads.
    let w = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
    let fold = w(26) ^ w(28) ^ w(30) ^ w(32) ^ w(34) ^ w(36);
    Some(symmetric_of_fold(fold))
}

/// Symmetric Toeplitz hash of the two MAC addresses (12 bytes) of `frame`;
/// 0 when shorter than 12 bytes.
pub fn mac_hash(frame: &[u8]) -> u32 {
    match frame.get(..12) {
        Some(macs) => symmetric_of_fold(fold16(macs)),
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{flow_key, ETHERTYPE_IPV4, IPPROTO_TCP};

    #[test]
    fn test_key_window() {
        assert_eq!(key_window(&MICROSOFT_RSS_KEY, 0), 0x6d5a56da);
        assert_eq!(key_window(&MICROSOFT_RSS_KEY, 8), 0x5a56da25);
        assert_eq!(key_window(&MICROSOFT_RSS_KEY, 4), 0xd5a56da2);
        assert_eq!(key_window(&MICROSOFT_RSS_KEY, 304), 0x01fa0000);
        assert_eq!(key_window(&SYMMETRIC_RSS_KEY, 16), 0x6d5a6d5a);
        assert_eq!(
            key_window(&SYMMETRIC_RSS_KEY, 286),
            key_window(&SYMMETRIC_RSS_KEY, 14)
        );
    }

    #[test]
    fn test_table_matches_reference() {
        let table = ToeplitzTable::new(&MICROSOFT_RSS_KEY);
        let mut next = crate::xorshift::xorshift64(0x1234_5678_9abc_def0);
        for len in 0..=44 {
            let input: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            assert_eq!(
                table.hash(&input),
                toeplitz(&MICROSOFT_RSS_KEY, &input),
                "{len}"
            );
        }
    }

    #[test]
    fn test_symmetric_table_is_periodic() {
        for pos in 0..RSS_INPUT_MAX {
            assert_eq!(
                SYMMETRIC_TABLE.table[pos],
                SYMMETRIC_TABLE.table[pos % 2],
                "{pos}"
            );
        }
    }

    #[test]
    fn test_mac_hash_symmetric() {
        let mut f = vec![1, 2, 3, 4, 5, 6, 0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 0x08, 0x06];
        f.extend_from_slice(&[0; 28]);
        let h = frame_hash(&f, None);
        let mut g = f.clone();
        g[..6].copy_from_slice(&f[6..12]);
        g[6..12].copy_from_slice(&f[..6]);
        assert_eq!(frame_hash(&g, None), h);
        assert_eq!(h, toeplitz(&SYMMETRIC_RSS_KEY, &f[..12]));
        assert_eq!(frame_hash(&f[..13], None), 0);
        assert_eq!(mac_hash(&f[..11]), 0);
    }

    /// The flow hash is the Toeplitz hash of the key's RSS input, for either family, with
    /// ports or without.
    #[test]
    fn test_flow_hash_is_toeplitz() {
        let mut next = crate::xorshift::xorshift64(0x2545_f491_4f6c_dd1d);
        for i in 0..5_000 {
            let v6 = i % 2 == 1;
            let mut k = FlowKey {
                vlan: next() as u16 & 0x0fff,
                proto: next() as u8,
                family: if v6 { IpFamily::V6 } else { IpFamily::V4 },
                src: [0; 16],
                dst: [0; 16],
                sport: if i % 5 == 0 { 0 } else { next() as u16 },
                dport: if i % 5 == 0 { 0 } else { next() as u16 },
            };
            let alen = if v6 { 16 } else { 4 };
            for b in k.src[..alen].iter_mut().chain(k.dst[..alen].iter_mut()) {
                *b = next() as u8;
            }
            let mut buf = [0u8; RSS_INPUT_MAX];
            let n = rss_input(&k, &mut buf);
            assert_eq!(
                flow_hash(&k),
                toeplitz(&SYMMETRIC_RSS_KEY, &buf[..n]),
                "{k:?}"
            );
        }
    }

    #[test]
    fn test_frame_hash_ip() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let mut ip = [0u8; 24];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&24u16.to_be_bytes());
        ip[9] = IPPROTO_TCP;
        ip[12..16].copy_from_slice(&[66, 9, 149, 187]);
        ip[16..20].copy_from_slice(&[161, 142, 100, 80]);
        ip[20..22].copy_from_slice(&2794u16.to_be_bytes());
        ip[22..24].copy_from_slice(&1766u16.to_be_bytes());
        f.extend_from_slice(&ip);
        let k = flow_key(&f, None).unwrap();
        assert_eq!(frame_hash(&f, None), flow_hash(&k));
        assert_eq!(
            flow_hash(&k),
            toeplitz(&SYMMETRIC_RSS_KEY, &{
                let mut b = [0u8; 12];
                b.copy_from_slice(&ip[12..24]);
                b
            })
        );
    }
}
