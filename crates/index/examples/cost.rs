//! The index builder's cost and size as the recorder pays it: 512-byte UDP frames from
//! hosts that come and go, formatted into 1 MiB buffers, each packet indexed right after
//! it is written (while it is in cache), as the recorder's front end does.
//! `cargo run --release -p corecap-index --example cost [PACKETS [BURST [pcap|pcapng [read]]]] [flows=N] [index=no]`:
//! BURST packets in a row share a flow (1: every packet draws a new one); with `flows=N`
//! each burst is one of N flows that are open at once (one in 16 bursts replaces one of
//! them with a new flow), each with a tuple of its own, as on a link where connections
//! interleave; without, every burst is a new flow. The file is
//! pcapng with the recorder's options (`epb_hash`, `epb_queue`) unless `pcap` is given.
//! Each packet is told to the index as the recorder tells it (`add_packet`), or with `read`
//! read back from its block (`add_blocks`, what the recorder does for a packet whose VLAN
//! tag it put back). It prints ns per packet (formatting with the index, less formatting
//! alone; best of 5) and the index's share of the capture.

use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;
use std::time::Instant;

use corecap_index::{Index, IndexBuilder, REGION_SIZE};
use corecap_wire::{Epb, InterfaceDesc, PcapngWriter};

/// The buffer being filled, shared with the pcapng writer that fills it.
#[derive(Clone)]
struct Shared(Rc<RefCell<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One pass over `n` packets: formats them into a reused 1 MiB buffer, in pcapng as the
/// recorder writes it (or pcap), and, with `index`, feeds each to it as it is written.
/// Returns (seconds, file bytes).
fn pass(
    frames: &[u8],
    pcapng: bool,
    read: bool,
    mut index: Option<&mut IndexBuilder>,
) -> (f64, u64) {
    let n = (frames.len() / FRAME) as u32;
    let shared = Shared(Rc::new(RefCell::new(Vec::with_capacity(
        REGION_SIZE + 4096,
    ))));
    let mut ng = if pcapng {
        let iface = [InterfaceDesc::ethernet("eth0", 0)];
        Some(PcapngWriter::new(shared.clone(), "cost", &iface).expect("in memory"))
    } else {
        let mut b = shared.0.borrow_mut();
        b.extend_from_slice(&[0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4, 0]);
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&65535u32.to_le_bytes());
        b.extend_from_slice(&1u32.to_le_bytes());
        None
    };
    if let Some(ix) = index.as_deref_mut() {
        ix.add_blocks(0, &shared.0.borrow());
    }
    let (mut off, mut region_start) = (0u64, 0u64);
    let t = Instant::now();
    for (i, f) in frames.chunks_exact(FRAME).enumerate() {
        let i = i as u32;
        let x = u32::from_le_bytes([f[60], f[61], f[62], f[63]]);
        let ts = 1_700_000_000_000_000_000u64 + u64::from(i) * 10_000;
        let at = shared.0.borrow().len();
        match ng.as_mut() {
            Some(w) => w
                .write_epb(&Epb {
                    ts_ns: ts,
                    data: f,
                    orig_len: 512,
                    queue: Some(0),
                    hash: Some(x),
                    ..Epb::default()
                })
                .expect("in memory"),
            None => {
                let mut b = shared.0.borrow_mut();
                let (secs, nanos) = ((ts / 1_000_000_000) as u32, (ts % 1_000_000_000) as u32);
                for v in [secs, nanos, 512, 512] {
                    b.extend_from_slice(&v.to_le_bytes());
                }
                b.extend_from_slice(f);
            }
        }
        let mut buf = shared.0.borrow_mut();
        if let Some(ix) = index.as_deref_mut() {
            if read {
                ix.add_blocks(off + at as u64, &buf[at..]);
            } else {
                ix.add_packet(off + at as u64..off + buf.len() as u64, ts, 1, f);
            }
        }
        if buf.len() >= REGION_SIZE || i + 1 == n {
            let end = off + buf.len() as u64;
            if let Some(ix) = index.as_deref_mut() {
                ix.end_region(region_start..end);
            }
            region_start = end;
            off = end;
            std::hint::black_box(&*buf);
            buf.clear();
        }
    }
    (t.elapsed().as_secs_f64(), off)
}

const FRAME: usize = 512;

/// `n` frames, one after the other as a capture ring holds them (so the index reads each
/// packet's headers from memory the formatting has just read, as in the recorder, not from
/// one buffer that stays in cache): bursts of `burst` share a flow, whose draw is in
/// bytes 60..64.
fn frames(n: u32, burst: u32, flows: usize) -> Vec<u8> {
    let mut all = vec![0xabu8; n as usize * FRAME];
    let mut r = 0x9e37_79b9_u32;
    let mut next = move || {
        r ^= r << 13;
        r ^= r >> 17;
        r ^= r << 5;
        r
    };
    let mut open: Vec<u32> = (0..flows).map(|_| next()).collect();
    let mut x = 0;
    for (i, f) in all.chunks_exact_mut(FRAME).enumerate() {
        let i = i as u32;
        if i.is_multiple_of(burst) {
            x = next();
            if !open.is_empty() {
                let at = x as usize % open.len();
                if (i / burst).is_multiple_of(16) {
                    open[at] = next();
                }
                x = open[at];
            }
        }
        f[..12].fill(2);
        f[12..26].copy_from_slice(&[0x08, 0x00, 0x45, 0, 1, 0xf2, 0, 0, 0, 0, 64, 17, 0, 0]);
        // An open flow keeps its tuple (a connection's packets); a new flow's hosts move
        // on every 2,000 packets and its port with every burst.
        if open.is_empty() {
            fill(f, i, burst, x);
        } else {
            fill(f, 0, 1, x);
        }
        f[60..64].copy_from_slice(&x.to_le_bytes());
    }
    all
}

/// Packet `i`'s addresses and ports, from the flow's draw `x`.
fn fill(f: &mut [u8], i: u32, burst: u32, x: u32) {
    let h = (i / 2000) as u8;
    f[26..30].copy_from_slice(&[10, 0, 0, 1 + (x % 3) as u8]);
    let dst = [
        10,
        1,
        h.wrapping_add((x >> 8) as u8 % 4),
        1 + (x >> 16) as u8 % 60,
    ];
    f[30..34].copy_from_slice(&dst);
    f[34..36].copy_from_slice(&(1024 + (x % 2000) as u16).to_be_bytes());
    f[36..38].copy_from_slice(&(5001 + ((i / burst) & 1) as u16).to_be_bytes());
}

fn main() {
    let arg = |i: usize, d: u32| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(d)
    };
    let (n, burst) = (arg(1, 400_000), arg(2, 1).max(1));
    let pcapng = std::env::args().nth(3).is_none_or(|f| f != "pcap");
    let read = std::env::args().nth(4).is_some_and(|m| m == "read");
    let flows = std::env::args()
        .find_map(|a| a.strip_prefix("flows=").and_then(|v| v.parse().ok()))
        .unwrap_or(0);
    // `index=no`: the formatting passes alone, for an instruction count (valgrind) to
    // take from one with the index.
    let index = !std::env::args().any(|a| a == "index=no");
    let frames = frames(n, burst, flows);
    let (mut plain, mut with) = (f64::MAX, f64::MAX);
    let (mut size, mut bytes, mut regions) = (0, 0, 0);
    for _ in 0..5 {
        plain = plain.min(pass(&frames, pcapng, read, None).0);
        if !index {
            continue;
        }
        let mut b = IndexBuilder::new();
        let (t, file) = pass(&frames, pcapng, read, Some(&mut b));
        let idx = b.finish();
        with = with.min(t);
        regions = Index::parse(&idx).expect("parses").regions.len();
        (size, bytes) = (idx.len(), file);
    }
    println!(
        "{n} packets of 512 B ({}), bursts of {burst}, {}, {regions} regions: index {:.1} ns/packet \
         ({}; formatting alone {:.1}); index {size} bytes = {:.3}% of the capture",
        if pcapng { "pcapng" } else { "pcap" },
        if flows == 0 {
            "each a new flow".to_string()
        } else {
            format!("{flows} flows open")
        },
        (with - plain) * 1e9 / f64::from(n),
        if read { "read back" } else { "told" },
        plain * 1e9 / f64::from(n),
        100.0 * size as f64 / bytes as f64
    );
}
