//! Any bytes as a classic BPF program and a packet: the first byte is the number of
//! instructions (8 bytes each, as `struct sock_filter`), the rest the packet. Validation
//! refuses or accepts, and a valid program always ends on the packet without a panic.
#![no_main]

use corecap_linux::cbpf::{Meta, Program};
use corecap_linux::abi::sock_filter;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let split = (usize::from(n) * 8).min(rest.len() / 8 * 8);
    let (code, pkt) = rest.split_at(split);
    let insns: Vec<sock_filter> = code
        .chunks_exact(8)
        .map(|c| sock_filter {
            code: u16::from_le_bytes([c[0], c[1]]),
            jt: c[2],
            jf: c[3],
            k: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
        })
        .collect();
    if let Ok(p) = Program::new(insns) {
        let meta = Meta {
            vlan: pkt.first().map(|&v| u16::from(v)),
            queue: 1,
            protocol: 0x0800,
        };
        let _ = p.run(pkt, pkt.len() as u32, &meta);
    }
});
