//! IPFIX export rate on one core: flow records encoded into messages of at most 1400
//! bytes and sent to a UDP socket on loopback that nobody reads (the kernel drops what
//! does not fit its buffer; the exporter's cost is the same).
//!
//! 1. `Exporter::push`: records straight into the encoder, one thread.
//! 2. The flow stage: N one-packet flows through a `FlowTable` exporting IPFIX, then its
//!    end (every flow exported at exit); the rate counts records per second of the whole
//!    run (accounting the packets and exporting), and of the export alone.
//!
//! cargo run --release -p corecap-engine --example ipfix_export [-- --to HOST:PORT
//! [--biflow] [--records N]]
//!
//! With `--to`, it sends N records (default 10) of 4 two-way flows to a collector instead,
//! to check what the collector stores.

use std::net::UdpSocket;
use std::time::Instant;

use corecap_engine::packet::Packet;
use corecap_engine::sink::ipfix::{new_domain, EndCode, Exporter, FlowRecord, IpfixTarget};
use corecap_engine::stage::flows::{FlowConfig, FlowTable};
use corecap_lab::gen::frame::{FrameSpec, Proto};

/// CPU seconds this thread has used (user + system), from /proc/thread-self/stat in clock
/// ticks of 10 ms: on a shared machine the rate per CPU second is the rate per core.
fn cpu_secs() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    // Fields after the command name (which ends with ')'): utime and stime are 14 and 15.
    let rest = s.rsplit_once(')').map_or("", |r| r.1);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    match (f.get(11), f.get(12)) {
        (Some(u), Some(k)) => (u + k) as f64 / 100.0,
        _ => f64::NAN,
    }
}

/// Records per second of wall time and per CPU second.
#[derive(Clone, Copy, Debug)]
struct Rate {
    wall: f64,
    cpu: f64,
}

impl Rate {
    fn of(n: u64, wall: f64, cpu: f64) -> Self {
        Self {
            wall: n as f64 / wall,
            cpu: n as f64 / cpu,
        }
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.2} M records/s wall, {:.2} M records per CPU second",
            self.wall / 1e6,
            self.cpu / 1e6
        )
    }
}

fn record(i: u64) -> FlowRecord {
    let mut r = FlowRecord {
        sport: 1024,
        dport: 5001 + (i & 1) as u16,
        proto: 17,
        octets: 64 * (i % 100 + 1),
        packets: i % 100 + 1,
        start_ms: 1_795_000_000_000 + i,
        end_ms: 1_795_000_000_000 + i + 500,
        end: Some(EndCode::Idle),
        ingress: 2,
        ..Default::default()
    };
    r.src[..4].copy_from_slice(&[10, 0, 0, 1]);
    r.dst[..4].copy_from_slice(&(0x0a01_0000u32 + (i as u32 & 0xffff)).to_be_bytes());
    r
}

fn target(addr: &str, biflow: bool) -> IpfixTarget {
    let mut t = IpfixTarget::parse(&format!("ipfix://{addr}")).expect("target");
    t.biflow = biflow;
    t.domain = new_domain();
    t
}

fn encoder(addr: &str, n: u64) -> Rate {
    let mut e = Exporter::connect(&target(addr, false)).expect("exporter");
    let (t0, c0) = (Instant::now(), cpu_secs());
    for i in 0..n {
        e.push(&record(i));
    }
    e.flush();
    let r = Rate::of(n, t0.elapsed().as_secs_f64(), cpu_secs() - c0);
    assert_eq!(e.stats.records + e.stats.records_lost, n);
    r
}

fn stage(addr: &str, flows: u32) -> (Rate, Rate, u64) {
    let spec = FrameSpec {
        size: 64,
        flows,
        proto: Proto::Udp,
        vlan: None,
        bidir: false,
        base: 0,
        burst: 1,
    };
    let cfg = FlowConfig {
        capacity: 1 << 21,
        ..Default::default()
    };
    let mut t =
        FlowTable::open(None, Some(&target(addr, false)), "bench", vec![2], cfg).expect("table");
    let mut buf = vec![0u8; 128];
    let (t0, c0) = (Instant::now(), cpu_secs());
    for i in 0..u64::from(flows) {
        let len = spec.fill(i, &mut buf);
        t.packet(&Packet::ethernet(
            1_795_000_000_000_000_000 + i,
            &buf[..len],
        ));
    }
    let (t1, c1) = (Instant::now(), cpu_secs());
    let st = t.finish().expect("finish");
    let c2 = cpu_secs();
    let all = Rate::of(st.records, t0.elapsed().as_secs_f64(), c2 - c0);
    let export = Rate::of(st.records, t1.elapsed().as_secs_f64(), c2 - c1);
    let x = st.ipfix.expect("ipfix stats");
    (all, export, x.messages)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let val = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    if let Some(to) = val("--to") {
        let n: u64 = val("--records").map_or(10, |v| v.parse().expect("--records N"));
        let biflow = args.iter().any(|a| a == "--biflow");
        let mut e = Exporter::connect(&target(&to, biflow)).expect("exporter");
        for i in 0..n {
            let mut r = record(i);
            r.rev_octets = 1000 + i;
            r.rev_packets = 10 + i;
            // TCP, SYN one way and SYN+ACK the other: does the collector keep both?
            r.proto = 6;
            r.tcp_flags = 0x02;
            r.rev_tcp_flags = 0x12;
            e.push(&r);
        }
        e.finish();
        println!("sent {n} records to {to} (biflow: {biflow}): {:?}", e.stats);
        return;
    }
    // A socket nobody reads.
    let sink = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let addr = sink.local_addr().expect("addr").to_string();
    let n = 5_000_000;
    let rate = encoder(&addr, n);
    println!("encoder: {n} records: {rate}");
    let flows = 1_000_000;
    let (all, export, msgs) = stage(&addr, flows);
    println!("flow stage, {flows} one-packet flows, {msgs} messages:");
    println!("  packets accounted and records exported: {all}");
    println!("  export at exit (table pop, encode, send): {export}");
}
