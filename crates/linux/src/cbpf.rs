//! A classic BPF interpreter, for filters evaluated in user space: the workers' filter
//! over files read with `-r`, and queries over recorded files. Programs come from libpcap
//! (`pcap_compile`).
//!
//! A program is validated once ([`Program::new`]): every jump lands inside the program and
//! moves forward, memory slots are in range, and the last instruction returns. Evaluation
//! then always ends, and never panics: an out-of-bounds packet load rejects the packet, as
//! in the kernel.

use crate::abi::{self, sock_filter};

/// Metadata the kernel exposes to filters through ancillary loads (`SKF_AD_*`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Meta {
    /// VLAN TCI stripped from the frame, if any.
    pub vlan: Option<u16>,
    /// RX queue.
    pub queue: u32,
    /// EtherType of the frame (host order).
    pub protocol: u16,
}

/// Why a program was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProgramError {
    /// Empty or longer than 4096 instructions.
    #[error("BPF program has a bad length")]
    Length,
    /// An instruction the interpreter does not know.
    #[error("BPF instruction {0} has an unknown opcode")]
    Opcode(usize),
    /// A jump outside the program.
    #[error("BPF instruction {0} jumps outside the program")]
    Jump(usize),
    /// A scratch memory index out of range.
    #[error("BPF instruction {0} uses a bad memory slot")]
    Memory(usize),
    /// The program can run off its end.
    #[error("BPF program does not end with a return")]
    NoReturn,
}

/// A validated classic BPF program.
#[derive(Clone, Debug)]
pub struct Program {
    insns: Vec<sock_filter>,
}

const LD: u16 = 0x00;
const LDX: u16 = 0x01;
const ST: u16 = 0x02;
const STX: u16 = 0x03;
const ALU: u16 = 0x04;
const JMP: u16 = 0x05;
const RET: u16 = 0x06;
const MISC: u16 = 0x07;

impl Program {
    /// Validates `insns`.
    pub fn new(insns: Vec<sock_filter>) -> Result<Self, ProgramError> {
        let n = insns.len();
        if n == 0 || n > 4096 {
            return Err(ProgramError::Length);
        }
        for (pc, i) in insns.iter().enumerate() {
            match i.code & 0x07 {
                LD | LDX => {
                    if i.code & 0xe0 == 0x60 && i.k >= 16 {
                        return Err(ProgramError::Memory(pc));
                    }
                }
                ST | STX => {
                    if i.k >= 16 {
                        return Err(ProgramError::Memory(pc));
                    }
                }
                JMP => {
                    let far = if i.code & 0xf0 == 0x00 {
                        pc as u64 + 1 + u64::from(i.k)
                    } else {
                        pc as u64 + 1 + u64::from(i.jt.max(i.jf))
                    };
                    if far >= n as u64 {
                        return Err(ProgramError::Jump(pc));
                    }
                }
                ALU | RET | MISC => {}
                _ => return Err(ProgramError::Opcode(pc)),
            }
        }
        if insns[n - 1].code & 0x07 != RET {
            return Err(ProgramError::NoReturn);
        }
        Ok(Self { insns })
    }

    /// Runs the program on a packet; returns the number of bytes to keep (0 = reject).
    pub fn run(&self, pkt: &[u8], wire_len: u32, meta: &Meta) -> u32 {
        let (mut a, mut x) = (0u32, 0u32);
        let mut mem = [0u32; 16];
        let mut pc = 0usize;
        while let Some(i) = self.insns.get(pc) {
            pc += 1;
            let k = i.k;
            match i.code & 0x07 {
                LD => match load_a(i, pkt, (x, &mem), wire_len, meta) {
                    Some(v) => a = v,
                    None => return 0,
                },
                LDX => match load_x(i, pkt, &mem, wire_len) {
                    Some(v) => x = v,
                    None => return 0,
                },
                ST => mem[(k & 15) as usize] = a,
                STX => mem[(k & 15) as usize] = x,
                ALU => {
                    let v = if i.code & 0x08 != 0 { x } else { k };
                    a = match alu(i.code & 0xf0, a, v) {
                        Some(r) => r,
                        None => return 0,
                    };
                }
                JMP => {
                    let v = if i.code & 0x08 != 0 { x } else { k };
                    let taken = match i.code & 0xf0 {
                        0x00 => {
                            pc += k as usize;
                            continue;
                        }
                        0x10 => a == v,
                        0x20 => a > v,
                        0x30 => a >= v,
                        0x40 => a & v != 0,
                        _ => return 0,
                    };
                    pc += usize::from(if taken { i.jt } else { i.jf });
                }
                RET => {
                    return match i.code & 0x18 {
                        0x00 => k,
                        0x10 => a,
                        _ => x,
                    }
                }
                MISC => {
                    if i.code & 0xf8 == 0x80 {
                        a = x;
                    } else {
                        x = a;
                    }
                }
                _ => return 0,
            }
        }
        0
    }
}

/// What the load `i` puts in A: a constant, a packet word at a fixed or an X-relative
/// offset, an ancillary value, a scratch word (`mem`) or the wire length. None rejects the
/// packet (a load past its end, an unknown mode). Inlined: it runs once per instruction.
#[inline(always)]
fn load_a(
    i: &sock_filter,
    pkt: &[u8],
    (x, mem): (u32, &[u32; 16]),
    wire_len: u32,
    meta: &Meta,
) -> Option<u32> {
    let (k, size) = (i.k, i.code & 0x18);
    match i.code & 0xe0 {
        0x00 => Some(k),
        0x20 if (k as i32) < 0 => ancillary(k as i32, meta),
        0x20 => load(pkt, u64::from(k), size),
        0x40 => load(pkt, u64::from(x) + u64::from(k), size),
        0x60 => Some(mem[(k & 15) as usize]),
        0x80 => Some(wire_len),
        _ => None,
    }
}

/// What the load `i` puts in X: a constant, a scratch word, the wire length, or the IP
/// header length of the byte at `k` (`msh`). None rejects the packet.
#[inline(always)]
fn load_x(i: &sock_filter, pkt: &[u8], mem: &[u32; 16], wire_len: u32) -> Option<u32> {
    let k = i.k;
    match i.code & 0xe0 {
        0x00 => Some(k),
        0x60 => Some(mem[(k & 15) as usize]),
        0x80 => Some(wire_len),
        0xa0 => pkt.get(k as usize).map(|b| u32::from(b & 0x0f) * 4),
        _ => None,
    }
}

/// A packet load of `size` (`BPF_W`, `BPF_H` or `BPF_B`) at `off`, big-endian; None when it
/// reaches past the packet. Inlined: it runs once per load instruction.
#[inline(always)]
fn load(pkt: &[u8], off: u64, size: u16) -> Option<u32> {
    let off = usize::try_from(off).ok()?;
    match size {
        0x00 => pkt
            .get(off..off + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
        0x08 => pkt
            .get(off..off + 2)
            .map(|b| u32::from(u16::from_be_bytes([b[0], b[1]]))),
        0x10 => pkt.get(off).map(|b| u32::from(*b)),
        _ => None,
    }
}

/// The ALU operation `op` (`code & 0xf0`) on `a` and `v`; None for a division or modulo by
/// zero and for an unknown operation (the packet is rejected). Inlined: it runs once per
/// ALU instruction.
#[inline(always)]
fn alu(op: u16, a: u32, v: u32) -> Option<u32> {
    Some(match op {
        0x00 => a.wrapping_add(v),
        0x10 => a.wrapping_sub(v),
        0x20 => a.wrapping_mul(v),
        0x30 => a.checked_div(v)?,
        0x40 => a | v,
        0x50 => a & v,
        0x60 => a.checked_shl(v).unwrap_or(0),
        0x70 => a.checked_shr(v).unwrap_or(0),
        0x80 => a.wrapping_neg(),
        0x90 => a.checked_rem(v)?,
        0xa0 => a ^ v,
        _ => return None,
    })
}

fn ancillary(k: i32, m: &Meta) -> Option<u32> {
    let off = k.checked_sub(abi::SKF_AD_OFF)?;
    Some(match off {
        abi::SKF_AD_PROTOCOL => u32::from(m.protocol),
        abi::SKF_AD_QUEUE => m.queue,
        abi::SKF_AD_VLAN_TAG => u32::from(m.vlan.unwrap_or(0)),
        abi::SKF_AD_VLAN_TAG_PRESENT => u32::from(m.vlan.is_some()),
        abi::SKF_AD_VLAN_TPID => {
            if m.vlan.is_some() {
                0x8100
            } else {
                0
            }
        }
        abi::SKF_AD_PKTTYPE | abi::SKF_AD_IFINDEX | abi::SKF_AD_MARK | abi::SKF_AD_HATYPE => 0,
        abi::SKF_AD_RXHASH | abi::SKF_AD_CPU | abi::SKF_AD_RANDOM | abi::SKF_AD_PAY_OFFSET => 0,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::compile_offline;

    fn udp_frame(dport: u16, vlan: Option<u16>) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        if let Some(v) = vlan {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&v.to_be_bytes());
        }
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&[
            0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        f.extend_from_slice(&1000u16.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&[0, 8, 0, 0]);
        f
    }

    #[test]
    fn test_libpcap_programs() {
        let p = Program::new(compile_offline(1, 65535, "udp dst port 53").expect("compiles"))
            .expect("valid");
        let m = Meta::default();
        let a = udp_frame(53, None);
        let b = udp_frame(54, None);
        assert_eq!(p.run(&a, a.len() as u32, &m), 65535);
        assert_eq!(p.run(&b, b.len() as u32, &m), 0);
        let v = Program::new(compile_offline(1, 65535, "vlan 100 and udp").expect("compiles"))
            .expect("valid");
        let t = udp_frame(53, Some(100));
        let u = udp_frame(53, Some(101));
        assert!(v.run(&t, t.len() as u32, &m) > 0);
        assert_eq!(v.run(&u, u.len() as u32, &m), 0);
        assert_eq!(v.run(&a, a.len() as u32, &m), 0);
    }

    #[test]
    fn test_truncated_packet_rejects() {
        let p = Program::new(compile_offline(1, 65535, "udp dst port 53").expect("compiles"))
            .expect("valid");
        let a = udp_frame(53, None);
        // The destination port ends at byte 38: any shorter capture cannot match.
        for cut in 0..38 {
            assert_eq!(
                p.run(&a[..cut], a.len() as u32, &Meta::default()),
                0,
                "cut {cut}"
            );
        }
    }

    #[test]
    fn test_bad_programs() {
        let ret = sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: 1,
        };
        assert_eq!(Program::new(vec![]).err(), Some(ProgramError::Length));
        let ja = sock_filter {
            code: 0x05,
            jt: 0,
            jf: 0,
            k: 5,
        };
        assert_eq!(
            Program::new(vec![ja, ret]).err(),
            Some(ProgramError::Jump(0))
        );
        let ld = sock_filter {
            code: 0x00,
            jt: 0,
            jf: 0,
            k: 1,
        };
        assert_eq!(Program::new(vec![ld]).err(), Some(ProgramError::NoReturn));
        assert!(Program::new(vec![ld, ret]).is_ok());
    }
}
