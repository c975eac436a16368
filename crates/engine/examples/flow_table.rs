//! Flow table cost per packet with a full table: N distinct flows through a table of
//! 2^20 (1,048,576) flows, two rounds, one packet per flow per round. With 1.0 M flows
//! nothing is evicted; with 1.2 M every new flow of the second round evicts the least
//! recently seen one (the worst case for a SYN flood). Prints ns per packet for each.
//!
//! cargo run --release -p corecap-engine --example flow_table

use std::time::Instant;

use corecap_engine::packet::Packet;
use corecap_engine::stage::flows::{FlowConfig, FlowTable};
use corecap_lab::gen::frame::{FrameSpec, Proto};

fn run(flows: u32) -> (f64, u64) {
    let spec = FrameSpec {
        size: 64,
        flows,
        proto: Proto::Tcp,
        vlan: None,
        bidir: false,
        base: 0,
        burst: 1,
    };
    let mut buf = vec![0u8; 128];
    let path =
        std::env::temp_dir().join(format!("corecap-flow-bench-{}-{flows}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let cfg = FlowConfig {
        capacity: 1 << 20,
        ..Default::default()
    };
    let mut t = FlowTable::create(&path, "bench", cfg).expect("flow file");
    let n = 2 * u64::from(flows);
    let t0 = Instant::now();
    for i in 0..n {
        let len = spec.fill(i, &mut buf);
        t.packet(&Packet::ethernet(1_000_000_000 + i, &buf[..len]));
    }
    let ns = t0.elapsed().as_nanos() as f64 / n as f64;
    let evicted = t.stats.evicted;
    drop(t);
    let _ = std::fs::remove_file(&path);
    (ns, evicted)
}

fn main() {
    for flows in [1_000_000u32, 1_200_000] {
        let (ns, evicted) = run(flows);
        println!("{flows} flows in a table of 1048576: {ns:.0} ns per packet, {evicted} evicted");
    }
}
