//! The XDP programs corecap loads, hand-assembled (the repository carries no compiled
//! object): the per-queue redirect, and the flow-spread redirect that picks one of `n`
//! sockets of a queue by a symmetric flow hash (PFQ's steering, done in the kernel).
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
//! [`spread_slot`] computes the same in Rust.

use crate::bpf::BpfInsn;

const FN_REDIRECT_MAP: i32 = 51;
/// XDP_PASS: what the redirect does when the slot has no socket.
const XDP_PASS: i32 = 2;
const GOLDEN: u32 = 0x9e37_79b1;

/// A tiny assembler: instructions plus jumps to named labels.
struct Asm {
    insns: Vec<BpfInsn>,
    fixups: Vec<(usize, &'static str)>,
    labels: Vec<(&'static str, usize)>,
}

impl Asm {
    fn new() -> Self {
        Self {
            insns: Vec::new(),
            fixups: Vec::new(),
            labels: Vec::new(),
        }
    }
    fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) -> &mut Self {
        self.insns.push(BpfInsn::new(code, dst, src, off, imm));
        self
    }
    fn jmp(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: &'static str) -> &mut Self {
        self.fixups.push((self.insns.len(), to));
        self.op(code, dst, src, 0, imm)
    }
    fn label(&mut self, name: &'static str) -> &mut Self {
        self.labels.push((name, self.insns.len()));
        self
    }
    fn finish(mut self) -> Vec<BpfInsn> {
        for (at, to) in &self.fixups {
            let target = self
                .labels
                .iter()
                .find(|(n, _)| n == to)
                .map(|(_, i)| *i)
                .expect("every jump has its label");
            self.insns[*at].off = (target as i64 - *at as i64 - 1) as i16;
        }
        self.insns
    }
}

// Opcodes used below.
const MOV64_X: u8 = 0xbf;
const MOV64_K: u8 = 0xb7;
const LDX_W: u8 = 0x61;
const LDX_H: u8 = 0x69;
const LDX_B: u8 = 0x71;
const ADD64_K: u8 = 0x07;
const ADD64_X: u8 = 0x0f;
const MUL64_K: u8 = 0x27;
const AND64_K: u8 = 0x57;
const XOR64_X: u8 = 0xaf;
const RSH64_K: u8 = 0x77;
const MUL32_K: u8 = 0x24;
const RSH32_K: u8 = 0x74;
const XOR32_X: u8 = 0xac;
const MOD32_K: u8 = 0x94;
const JGT_X: u8 = 0x2d;
const JEQ_K: u8 = 0x15;
const JNE_K: u8 = 0x55;
const JA: u8 = 0x05;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;

/// Ends the program: redirect to `r2` in the map, or (for tests) return `r2`.
fn tail(a: &mut Asm, map_fd: Option<i32>) {
    match map_fd {
        Some(fd) => {
            a.op(0x18, 1, 1, 0, fd) // r1 = map (ld_imm64, BPF_PSEUDO_MAP_FD)
                .op(0, 0, 0, 0, 0)
                .op(MOV64_K, 3, 0, 0, XDP_PASS) // when the slot has no socket
                .op(CALL, 0, 0, 0, FN_REDIRECT_MAP)
                .op(EXIT, 0, 0, 0, 0);
        }
        None => {
            a.op(MOV64_X, 0, 2, 0, 0).op(EXIT, 0, 0, 0, 0);
        }
    }
}

/// `r8 ^=` the eight IPv6 address words and `r9 = next header` (also xored in), for a
/// frame at `r2` checked to hold at least 54 bytes.
fn v6_addresses(a: &mut Asm) {
    for k in 0..8 {
        a.op(LDX_W, 5, 2, 22 + 4 * k, 0).op(XOR64_X, 8, 5, 0, 0);
    }
    a.op(LDX_B, 9, 2, 20, 0).op(XOR64_X, 8, 9, 0, 0);
}

/// Redirects every frame to the socket of its RX queue in `map_fd` (an XSKMAP).
pub fn redirect(map_fd: i32) -> Vec<BpfInsn> {
    let mut a = Asm::new();
    a.op(LDX_W, 2, 1, 16, 0); // r2 = ctx->rx_queue_index
    tail(&mut a, Some(map_fd));
    a.finish()
}

/// Redirects each frame to slot `queue * n + spread_slot(frame, n)` of `map_fd`. With
/// `map_fd` None the program returns the slot instead (for tests through BPF_PROG_RUN).
pub fn spread(map_fd: Option<i32>, n: u32) -> Vec<BpfInsn> {
    let n = n.max(1) as i32;
    let mut a = Asm::new();
    // r6 = ctx, r7 = queue * n (first slot of the queue), r8 = hash, r2/r3 = data/data_end.
    a.op(MOV64_X, 6, 1, 0, 0)
        .op(LDX_W, 7, 6, 16, 0)
        .op(MUL64_K, 7, 0, 0, n)
        .op(MOV64_K, 8, 0, 0, 0)
        .op(LDX_W, 2, 6, 0, 0)
        .op(LDX_W, 3, 6, 4, 0)
        // Ethernet header.
        .op(MOV64_X, 4, 2, 0, 0)
        .op(ADD64_K, 4, 0, 0, 14)
        .jmp(JGT_X, 4, 3, 0, "pick")
        .op(LDX_H, 5, 2, 12, 0)
        .jmp(JNE_K, 5, 0, 0x0081, "l3") // 0x8100 as loaded little-endian
        .op(ADD64_K, 2, 0, 0, 4) // past one VLAN tag
        .op(MOV64_X, 4, 2, 0, 0)
        .op(ADD64_K, 4, 0, 0, 14)
        .jmp(JGT_X, 4, 3, 0, "pick")
        .op(LDX_H, 5, 2, 12, 0)
        .label("l3")
        .jmp(JEQ_K, 5, 0, 0x0008, "ipv4")
        .jmp(JEQ_K, 5, 0, 0xdd86, "ipv6")
        .jmp(JA, 0, 0, 0, "pick");
    // IPv4: addresses and protocol; ports only with a 20-byte header and no fragment.
    a.label("ipv4")
        .op(MOV64_X, 4, 2, 0, 0)
        .op(ADD64_K, 4, 0, 0, 34)
        .jmp(JGT_X, 4, 3, 0, "pick")
        .op(LDX_W, 8, 2, 26, 0)
        .op(LDX_W, 5, 2, 30, 0)
        .op(XOR64_X, 8, 5, 0, 0)
        .op(LDX_B, 9, 2, 23, 0)
        .op(XOR64_X, 8, 9, 0, 0)
        .op(LDX_B, 5, 2, 14, 0)
        .jmp(JNE_K, 5, 0, 0x45, "pick")
        .op(LDX_H, 5, 2, 20, 0)
        .op(AND64_K, 5, 0, 0, 0xff3f) // MF and the fragment offset, as loaded
        .jmp(JNE_K, 5, 0, 0, "pick")
        .op(MOV64_X, 4, 2, 0, 0)
        .op(ADD64_K, 4, 0, 0, 38)
        .jmp(JGT_X, 4, 3, 0, "pick")
        .op(ADD64_K, 2, 0, 0, 34)
        .jmp(JA, 0, 0, 0, "ports");
    // IPv6: the eight address words and the next header; ports right after the header.
    a.label("ipv6")
        .op(MOV64_X, 4, 2, 0, 0)
        .op(ADD64_K, 4, 0, 0, 58)
        .jmp(JGT_X, 4, 3, 0, "pick6");
    v6_addresses(&mut a);
    a.op(ADD64_K, 2, 0, 0, 54)
        .label("ports")
        .jmp(JEQ_K, 9, 0, 6, "l4")
        .jmp(JEQ_K, 9, 0, 17, "l4")
        .jmp(JEQ_K, 9, 0, 132, "l4")
        .jmp(JA, 0, 0, 0, "pick")
        .label("l4")
        .op(LDX_W, 5, 2, 0, 0)
        .op(MOV64_X, 4, 5, 0, 0)
        .op(RSH64_K, 4, 0, 0, 16)
        .op(AND64_K, 5, 0, 0, 0xffff)
        .op(XOR64_X, 5, 4, 0, 0)
        .op(XOR64_X, 8, 5, 0, 0)
        .jmp(JA, 0, 0, 0, "pick");
    // An IPv6 frame too short for ports still hashes its addresses when it has them.
    a.label("pick6")
        .op(MOV64_X, 4, 2, 0, 0)
        .op(ADD64_K, 4, 0, 0, 54)
        .jmp(JGT_X, 4, 3, 0, "pick");
    v6_addresses(&mut a);
    // Mix, pick the slot, redirect.
    a.label("pick")
        .op(MUL32_K, 8, 0, 0, GOLDEN as i32)
        .op(MOV64_X, 4, 8, 0, 0)
        .op(RSH32_K, 4, 0, 0, 16)
        .op(XOR32_X, 8, 4, 0, 0)
        .op(MOD32_K, 8, 0, 0, n)
        .op(MOV64_X, 2, 7, 0, 0)
        .op(ADD64_X, 2, 8, 0, 0);
    tail(&mut a, map_fd);
    a.finish()
}

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
        let Ok(prog) = crate::bpf::load_xdp(&spread(None, 3)) else {
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
            let slot = crate::bpf::test_run(&prog, f).expect("test run");
            assert_eq!(slot, spread_slot(f, 3), "frame {f:02x?}");
            got[slot as usize] += 1;
        }
        assert!(got.iter().all(|&c| c > 50), "{got:?}");
    }

    #[test]
    fn test_jumps_land_inside() {
        let p = spread(Some(3), 4);
        for (i, insn) in p.iter().enumerate() {
            if matches!(insn.code & 0x07, 0x05) && insn.code != CALL && insn.code != EXIT {
                let t = i as i64 + 1 + i64::from(insn.off);
                assert!(t > i as i64 && (t as usize) < p.len(), "jump at {i}");
            }
        }
    }
}
