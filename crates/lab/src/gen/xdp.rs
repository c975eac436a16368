//! The XDP live-frames engine: `BPF_PROG_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES` runs a
//! small XDP program on a template frame again and again; its XDP_TX verdict transmits
//! each frame on the sending interface, without a socket or an skb per packet (the
//! technique of xdp-trafficgen). The program rewrites the frame for each run: it draws the
//! flow from a counter kept in an array map, writes the flow's destination address and
//! port, and patches the IPv4 checksum from a sum precomputed here.
//!
//! The receiving end must run NAPI (an XDP program on it, or GRO on: `corecap lab up
//! --queues 2` does that), or veth drops the frames. Frames go in one direction only.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use corecap_linux::bpf::{self, BpfInsn};
use corecap_linux::netdev;

use super::frame::checksum;
use super::{GenConfig, GenReport};

// eBPF opcode parts.
const ALU64: u8 = 0x07;
const ALU: u8 = 0x04;
const JMP: u8 = 0x05;
const LDX: u8 = 0x01;
const STX: u8 = 0x03;
const ST: u8 = 0x02;
const MEM: u8 = 0x60;
const W: u8 = 0x00;
const H: u8 = 0x08;
const DW: u8 = 0x18;
const K: u8 = 0x00;
const X: u8 = 0x08;
const ADD: u8 = 0x00;
const AND: u8 = 0x50;
const RSH: u8 = 0x70;
const MOD: u8 = 0x90;
const XOR: u8 = 0xa0;
const MOV: u8 = 0xb0;
const END_BE: u8 = 0xd0 | 0x08;
const JEQ: u8 = 0x10;
const JGT: u8 = 0x20;
const CALL: u8 = 0x80;
const EXIT: u8 = 0x90;
const XDP_TX: i32 = 3;
const FN_MAP_LOOKUP_ELEM: i32 = 1;

fn i(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> BpfInsn {
    BpfInsn::new(code, dst, src, off, imm)
}

/// The program for frames whose IPv4 header starts at `ip`, with `flows` flows and the
/// checksum sum of the header without the low 16 bits of the destination address.
fn program(map_fd: i32, ip: i16, flows: u32, base_sum: u32) -> Vec<BpfInsn> {
    let mut p = vec![
        i(ALU64 | MOV | X, 6, 1, 0, 0), // r6 = ctx
        i(ST | MEM | W, 10, 0, -4, 0),  // *(u32 *)(r10 - 4) = 0 (the key)
        i(0x18, 1, 1, 0, map_fd),       // r1 = map (ld_imm64, BPF_PSEUDO_MAP_FD)
        i(0, 0, 0, 0, 0),
        i(ALU64 | MOV | X, 2, 10, 0, 0), // r2 = r10
        i(ALU64 | ADD | K, 2, 0, 0, -4), // r2 -= 4
        i(JMP | CALL, 0, 0, 0, FN_MAP_LOOKUP_ELEM),
    ];
    let exit_jump_1 = p.len();
    p.push(i(JMP | JEQ | K, 0, 0, 0, 0)); // if r0 == 0 goto out (patched)
    p.extend([
        i(LDX | MEM | DW, 7, 0, 0, 0),  // r7 = counter
        i(ALU64 | MOV | X, 8, 7, 0, 0), // r8 = r7 + 1
        i(ALU64 | ADD | K, 8, 0, 0, 1),
        i(STX | MEM | DW, 0, 8, 0, 0), // counter = r8 (one sending CPU per map)
        i(LDX | MEM | W, 2, 6, 0, 0),  // r2 = ctx->data
        i(LDX | MEM | W, 3, 6, 4, 0),  // r3 = ctx->data_end
        i(ALU64 | MOV | X, 4, 2, 0, 0), // r4 = data + ip + 24
        i(ALU64 | ADD | K, 4, 0, 0, i32::from(ip) + 24),
    ]);
    let exit_jump_2 = p.len();
    p.push(i(JMP | JGT | X, 4, 3, 0, 0)); // if r4 > data_end goto out (patched)
    p.extend([
        i(ALU64 | MOD | K, 7, 0, 0, flows.max(1) as i32), // r7 = flow
        // destination address, low 16 bits
        i(ALU64 | MOV | X, 5, 7, 0, 0),
        i(ALU64 | AND | K, 5, 0, 0, 0xffff),
        i(ALU | END_BE, 5, 0, 0, 16),
        i(STX | MEM | H, 2, 5, ip + 18, 0),
        // checksum = ~fold(base + low16)
        i(ALU64 | MOV | X, 4, 7, 0, 0),
        i(ALU64 | AND | K, 4, 0, 0, 0xffff),
        i(ALU64 | ADD | K, 4, 0, 0, base_sum as i32),
        i(ALU64 | MOV | X, 5, 4, 0, 0),
        i(ALU64 | RSH | K, 5, 0, 0, 16),
        i(ALU64 | AND | K, 4, 0, 0, 0xffff),
        i(ALU64 | ADD | X, 4, 5, 0, 0),
        i(ALU64 | MOV | X, 5, 4, 0, 0),
        i(ALU64 | RSH | K, 5, 0, 0, 16),
        i(ALU64 | AND | K, 4, 0, 0, 0xffff),
        i(ALU64 | ADD | X, 4, 5, 0, 0),
        i(ALU64 | XOR | K, 4, 0, 0, 0xffff),
        i(ALU | END_BE, 4, 0, 0, 16),
        i(STX | MEM | H, 2, 4, ip + 10, 0),
        // destination port 5001 + (flow & 1)
        i(ALU64 | MOV | X, 5, 7, 0, 0),
        i(ALU64 | AND | K, 5, 0, 0, 1),
        i(ALU64 | ADD | K, 5, 0, 0, 5001),
        i(ALU | END_BE, 5, 0, 0, 16),
        i(STX | MEM | H, 2, 5, ip + 22, 0),
    ]);
    let out = p.len();
    p.extend([
        i(ALU64 | MOV | K, 0, 0, 0, XDP_TX),
        i(JMP | EXIT, 0, 0, 0, 0),
    ]);
    for j in [exit_jump_1, exit_jump_2] {
        p[j].off = (out - j - 1) as i16;
    }
    p
}

/// Sends frames as configured with XDP live frames.
pub fn run(cfg: &GenConfig, stop: Arc<AtomicBool>) -> Result<GenReport, corecap_linux::Error> {
    let ifindex = netdev::ifindex(&cfg.iface)?;
    let mut spec = cfg.frames;
    spec.bidir = false;
    let mut frame = vec![0u8; spec.len()];
    spec.fill(0, &mut frame);
    let ip = if spec.vlan.is_some() { 18usize } else { 14 };
    // Header sum without the checksum and the low 16 bits of the destination address.
    let mut hdr = frame[ip..ip + 20].to_vec();
    hdr[10] = 0;
    hdr[11] = 0;
    hdr[18] = 0;
    hdr[19] = 0;
    let base_sum = u32::from(!checksum(&hdr));
    let map = bpf::array_map(8, 1)?;
    use std::os::fd::AsRawFd;
    let prog = bpf::load_xdp(&program(map.as_raw_fd(), ip as i16, spec.flows, base_sum))?;
    if let Some(cpu) = cfg.cpus.first() {
        let _ = corecap_linux::affinity::pin_current_thread(*cpu);
    }
    let start = Instant::now();
    let mut sent = 0u64;
    loop {
        if stop.load(Ordering::Relaxed) || cfg.duration.is_some_and(|d| start.elapsed() >= d) {
            break;
        }
        let mut chunk: u64 = 65536;
        if let Some(n) = cfg.count {
            if sent >= n {
                break;
            }
            chunk = chunk.min(n - sent);
        }
        if let Some(r) = cfg.rate {
            let due = (start.elapsed().as_secs_f64() * r as f64) as u64 + 1;
            if due <= sent {
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
            chunk = chunk.min(due - sent);
        }
        bpf::run_live_frames(&prog, &frame, ifindex, chunk as u32, 64)
            .map_err(|e| e.on(&cfg.iface))?;
        sent += chunk;
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(GenReport {
        sent,
        errors: 0,
        seconds,
        pps: if seconds > 0.0 {
            sent as f64 / seconds
        } else {
            0.0
        },
    })
}
