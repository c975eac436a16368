//! A heavy-tailed mix of whole TCP connections, written as a pcap file for tcpreplay or
//! `capture -r`: many small connections and a few bulk transfers, as real links carry
//! (Time Machine's premise: most bytes belong to a few long connections).
//!
//! Each connection has a handshake (SYN, SYN-ACK, ACK), a request of 120 bytes, a response
//! of a Pareto-distributed size (shape α, 1.1 by default; at least 1 KB, at most
//! `max_bytes`; the smaller α, the more of the bytes are in the few largest) in segments of
//! 1448 bytes with an ACK for every two, and an end: FIN from each side, or (one connection
//! in five) a RST from the client. Up to 16 connections run at once, their packets
//! interleaved. One connection in eight is a DNS query and answer over UDP port 53.
//! Server ports go round 80, 443, 8443 and 22. A payload holds the connection's number and
//! the packet's place, then zeros; or, with `random_share` of 100, random bytes, as
//! encrypted traffic (most of today's) is to a compressor; a share in between makes that
//! share of each payload random and leaves the rest zeros, as traffic that compresses in
//! part. Everything follows from the seed.

use std::io::{self, Write};

/// What mix to write.
#[derive(Clone, Copy, Debug)]
pub struct MixSpec {
    /// Connections in all.
    pub connections: u32,
    /// The largest response, in bytes.
    pub max_bytes: u64,
    /// The seed of the sizes.
    pub seed: u64,
    /// The Pareto shape of the response sizes (above 0).
    pub alpha: f64,
    /// Percent of each payload's bytes that are random (from the seed), the rest zeros; 0:
    /// the connection's number, the packet's place, then zeros.
    pub random_share: u8,
}

/// What a mix holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MixReport {
    /// Packets written.
    pub packets: u64,
    /// Their frame bytes.
    pub bytes: u64,
    /// Connections written.
    pub connections: u32,
}

/// Server ports, taken in turn.
pub const PORTS: [u16; 4] = [80, 443, 8443, 22];
/// Payload bytes per full segment.
const MSS: u64 = 1448;
/// Connections open at once.
const OPEN: usize = 16;
/// Time between two packets of the mix, ns.
const GAP_NS: u64 = 20_000;

const SYN: u8 = 0x02;
const FIN: u8 = 0x01;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

/// One packet of a connection: from the client, TCP flags (0 for UDP), payload bytes.
type Step = (bool, u8, u16);

/// A connection's packets, in order.
fn steps(i: u32, size: u64) -> Vec<Step> {
    if i % 8 == 7 {
        return vec![(true, 0, 40), (false, 0, 200)];
    }
    let mut v = vec![
        (true, SYN, 0),
        (false, SYN | ACK, 0),
        (true, ACK, 0),
        (true, PSH | ACK, 120),
    ];
    let mut left = size;
    let mut n = 0;
    while left > 0 {
        let seg = left.min(MSS);
        v.push((false, ACK, seg as u16));
        left -= seg;
        n += 1;
        if n % 2 == 0 {
            v.push((true, ACK, 0));
        }
    }
    if i % 5 == 4 {
        v.push((true, RST | ACK, 0));
    } else {
        v.extend([(false, FIN | ACK, 0), (true, FIN | ACK, 0), (false, ACK, 0)]);
    }
    v
}

/// A connection being written: its number, its steps, the next one, and the sequence
/// numbers of client and server.
struct Open {
    i: u32,
    steps: Vec<Step>,
    next: usize,
    seq: [u32; 2],
}

/// Writes the mix to `out` as a pcap file (Ethernet, microseconds).
pub fn write_mix(spec: &MixSpec, out: &mut impl Write) -> io::Result<MixReport> {
    let mut rng = spec.seed ^ 0x9e37_79b9_7f4a_7c15;
    let mut report = MixReport::default();
    out.write_all(&pcap_header())?;
    let mut open: Vec<Open> = Vec::with_capacity(OPEN);
    let mut started = 0u32;
    let mut t_ns = 1_700_000_000u64 * 1_000_000_000;
    let mut frame = Vec::with_capacity(1600);
    let mut payload_rng =
        (spec.random_share > 0).then_some((spec.seed ^ 0x2545_f491_4f6c_dd1d, spec.random_share));
    loop {
        while open.len() < OPEN && started < spec.connections {
            let size = pareto(&mut rng, spec.alpha, spec.max_bytes);
            open.push(Open {
                i: started,
                steps: steps(started, size),
                next: 0,
                seq: [1000 + started * 7, 5000 + started * 13],
            });
            started += 1;
        }
        if open.is_empty() {
            break;
        }
        let mut k = 0;
        while k < open.len() {
            let c = &mut open[k];
            let step = c.steps[c.next];
            build(c, step, &mut frame, payload_rng.as_mut());
            c.next += 1;
            write_record(out, t_ns, &frame)?;
            report.packets += 1;
            report.bytes += frame.len() as u64;
            t_ns += GAP_NS;
            if c.next == c.steps.len() {
                open.swap_remove(k);
                report.connections += 1;
            } else {
                k += 1;
            }
        }
    }
    Ok(report)
}

/// The next number of a xorshift64* generator.
fn next(rng: &mut u64) -> u64 {
    *rng ^= *rng >> 12;
    *rng ^= *rng << 25;
    *rng ^= *rng >> 27;
    rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// A response size: Pareto with shape `alpha` from 1 KB, cut at `max`.
fn pareto(rng: &mut u64, alpha: f64, max: u64) -> u64 {
    let x = next(rng);
    let u = ((x >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
    ((1024.0 / u.powf(1.0 / alpha.max(0.01))) as u64).clamp(1024, max.max(1024))
}

/// The frame of one step of connection `c`.
fn build(
    c: &mut Open,
    (from_client, flags, len): Step,
    f: &mut Vec<u8>,
    rng: Option<&mut (u64, u8)>,
) {
    let i = c.i;
    let client = [10, 0, (i >> 8) as u8, i as u8];
    let server = [10, 9, 0, 1 + (i % 200) as u8];
    let cport = 20_000 + (i % 40_000) as u16;
    let udp = flags == 0;
    let sport = if udp { 53 } else { PORTS[i as usize % 4] };
    let (src, dst, sp, dp) = if from_client {
        (client, server, cport, sport)
    } else {
        (server, client, sport, cport)
    };
    let l4 = if udp { 8 } else { 20 };
    let ip_len = 20 + l4 + usize::from(len);
    f.clear();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, if from_client { 2 } else { 1 }]);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, if from_client { 1 } else { 2 }]);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let ip = f.len();
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&(ip_len as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x40, 0, 64, if udp { 17 } else { 6 }, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    let sum = super::frame::checksum(&f[ip..ip + 20]);
    f[ip + 10..ip + 12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&sp.to_be_bytes());
    f.extend_from_slice(&dp.to_be_bytes());
    if udp {
        f.extend_from_slice(&(8 + len).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
    } else {
        let (me, peer) = if from_client { (0, 1) } else { (1, 0) };
        f.extend_from_slice(&c.seq[me].to_be_bytes());
        f.extend_from_slice(&c.seq[peer].to_be_bytes());
        f.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
        let used = u32::from(len) + u32::from(flags & (SYN | FIN) != 0);
        c.seq[me] = c.seq[me].wrapping_add(used);
    }
    // The payload: the connection's number and the packet's place, then zeros; or its
    // random share, then zeros.
    let start = f.len();
    f.resize(start + usize::from(len), 0);
    if let Some((rng, share)) = rng {
        let random = usize::from(len) * usize::from((*share).min(100)) / 100;
        for chunk in f[start..start + random].chunks_mut(8) {
            let x = next(rng).to_le_bytes();
            chunk.copy_from_slice(&x[..chunk.len()]);
        }
    } else if len >= 8 {
        f[start..start + 4].copy_from_slice(&i.to_be_bytes());
        f[start + 4..start + 8].copy_from_slice(&(c.next as u32).to_be_bytes());
    }
}

fn pcap_header() -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0..4].copy_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes());
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    h[16..20].copy_from_slice(&65535u32.to_le_bytes());
    h[20..24].copy_from_slice(&1u32.to_le_bytes());
    h
}

fn write_record(out: &mut impl Write, t_ns: u64, frame: &[u8]) -> io::Result<()> {
    let mut r = [0u8; 16];
    r[0..4].copy_from_slice(&((t_ns / 1_000_000_000) as u32).to_le_bytes());
    r[4..8].copy_from_slice(&((t_ns % 1_000_000_000 / 1000) as u32).to_le_bytes());
    r[8..12].copy_from_slice(&(frame.len() as u32).to_le_bytes());
    r[12..16].copy_from_slice(&(frame.len() as u32).to_le_bytes());
    out.write_all(&r)?;
    out.write_all(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_mix_is_heavy_tailed_and_whole() {
        let spec = MixSpec {
            connections: 400,
            max_bytes: 4 << 20,
            seed: 1,
            alpha: 1.1,
            random_share: 0,
        };
        let mut out = Vec::new();
        let r = write_mix(&spec, &mut out).unwrap();
        assert_eq!(r.connections, 400);
        assert_eq!(out.len() as u64, 24 + 16 * r.packets + r.bytes);
        // Sizes: most small, the bytes in a few.
        let mut rng = spec.seed ^ 0x9e37_79b9_7f4a_7c15;
        let mut sizes: Vec<u64> = (0..400)
            .map(|_| pareto(&mut rng, spec.alpha, spec.max_bytes))
            .collect();
        sizes.sort_unstable();
        let total: u64 = sizes.iter().sum();
        let top: u64 = sizes[360..].iter().sum();
        assert!(sizes[200] < 4096, "median {}", sizes[200]);
        assert!(top * 2 > total, "the largest tenth holds most bytes");
        // Same seed, same file.
        let mut again = Vec::new();
        write_mix(&spec, &mut again).unwrap();
        assert_eq!(out, again);
        // Random payload: the same packets and sizes, with payload bytes that are not
        // zeros (but those of the headers).
        let mut random = Vec::new();
        let all = MixSpec {
            random_share: 100,
            ..spec
        };
        assert_eq!(write_mix(&all, &mut random).unwrap(), r);
        assert_eq!(random.len(), out.len());
        let zeros = |b: &[u8]| b.iter().filter(|&&x| x == 0).count();
        assert!(zeros(&out) > out.len() / 2);
        assert!(zeros(&random) * 4 < zeros(&out), "{}", zeros(&random));
        // Half random: about half the zeros of the payloads are left.
        let mut half = Vec::new();
        let spec = MixSpec {
            random_share: 50,
            ..spec
        };
        assert_eq!(write_mix(&spec, &mut half).unwrap(), r);
        let (z, zr, zh) = (zeros(&out), zeros(&random), zeros(&half));
        assert!(zh > zr && zh < z, "{zr} < {zh} < {z}");
        assert!((zh - zr) * 10 > (z - zr) * 4 && (zh - zr) * 10 < (z - zr) * 6);
    }

    #[test]
    fn test_steps_end_with_fin_or_rst() {
        let s = steps(4, 3000);
        assert_eq!(s[0].1, SYN);
        assert_eq!(s.last().unwrap().1, RST | ACK);
        let s = steps(1, 3000);
        assert_eq!(s[s.len() - 3].1, FIN | ACK);
        assert_eq!(s.iter().map(|x| u64::from(x.2)).sum::<u64>(), 3120);
    }
}
