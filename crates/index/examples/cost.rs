//! The index builder's cost and size on an in-memory pcap of 512-byte UDP frames, with
//! hosts that come and go: `cargo run --release -p corecap-index --example cost [PACKETS]`.
//! It prints ns per packet and the index's share of the capture (no I/O is timed).

use std::time::Instant;

use corecap_index::{Index, IndexBuilder, REGION_SIZE};

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(400_000);
    let mut file = vec![0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4, 0];
    file.extend_from_slice(&[0; 8]);
    file.extend_from_slice(&65535u32.to_le_bytes());
    file.extend_from_slice(&1u32.to_le_bytes());
    let mut x = 0x9e37_79b9_u32;
    let mut bounds = vec![0usize];
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let h = (i / 2000) as u8;
        let mut f = vec![2u8; 12];
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 1, 0xf2, 0, 0, 0, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&[10, 0, 0, 1 + (x % 3) as u8]);
        f.extend_from_slice(&[
            10,
            1,
            h.wrapping_add((x >> 8) as u8 % 4),
            1 + (x >> 16) as u8 % 60,
        ]);
        f.extend_from_slice(&(1024 + (x % 2000) as u16).to_be_bytes());
        f.extend_from_slice(&(5001 + (i & 1) as u16).to_be_bytes());
        f.resize(512, 0xab);
        let ts = 1_700_000_000_000_000_000u64 + u64::from(i) * 10_000;
        for v in [
            (ts / 1_000_000_000) as u32,
            (ts % 1_000_000_000) as u32,
            512,
            512,
        ] {
            file.extend_from_slice(&v.to_le_bytes());
        }
        file.extend_from_slice(&f);
        if file.len() - bounds[bounds.len() - 1] >= REGION_SIZE {
            bounds.push(file.len());
        }
    }
    bounds.push(file.len());
    let t = Instant::now();
    let mut b = IndexBuilder::new();
    for w in bounds.windows(2) {
        b.add_region(w[0] as u64..w[1] as u64, &file[w[0]..w[1]]);
    }
    let idx = b.finish();
    let dt = t.elapsed();
    let ix = Index::parse(&idx).expect("parses");
    println!(
        "{n} packets of 512 B ({} bytes) in {} regions: {:.1} ns/packet ({:.2} GB/s); index {} bytes = {:.3}% of the capture",
        file.len(),
        ix.regions.len(),
        dt.as_nanos() as f64 / f64::from(n),
        file.len() as f64 / dt.as_secs_f64() / 1e9,
        idx.len(),
        100.0 * idx.len() as f64 / file.len() as f64
    );
}
