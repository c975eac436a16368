//! `corecap bench disk`: what a directory's disk keeps, before recording (like n2disk's
//! simulation mode). It writes the same bytes twice, buffered (write(2) of 1 MiB, then
//! fsync) and direct (the recorder's own path: aligned 1 MiB buffers, `O_DIRECT`,
//! fallocate, io_uring with 8 writes in flight), and reports throughput and CPU per GB,
//! the process's own and the whole machine's (writeback runs in kernel threads). From the
//! direct figures it gives the packet rates the disk sustains at 64, 512 and 1518 bytes,
//! with the bytes each packet takes in a corecap pcapng file.

use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use corecap_linux::direct::{AlignedBuf, DirectFile, WriteRing};
use corecap_wire::pcapng::{Epb, InterfaceDesc, PcapngWriter};
use serde::Serialize;

const CHUNK: usize = 1 << 20;

/// One write mode's figures.
#[derive(Clone, Debug, Serialize)]
pub struct DiskRun {
    /// `buffered` or `direct`.
    pub mode: &'static str,
    /// Whether direct I/O was in effect (the filesystem may refuse it).
    pub direct: bool,
    /// Bytes written.
    pub bytes: u64,
    /// Seconds from the first write to the data being on disk.
    pub seconds: f64,
    /// GB (10^9 bytes) per second.
    pub gb_per_s: f64,
    /// The process's CPU seconds per GB.
    pub cpu_per_gb: f64,
    /// The machine's CPU seconds per GB (all cores, writeback included).
    pub system_cpu_per_gb: f64,
}

/// The packet rate a disk sustains at one frame size.
#[derive(Clone, Debug, Serialize)]
pub struct RateAt {
    /// Frame size on the wire (with FCS, as RFC 2544 counts it).
    pub frame: u32,
    /// Bytes the packet takes in a corecap pcapng file.
    pub file_bytes: u32,
    /// Packets per second the direct writer sustains at this size.
    pub pps: f64,
    /// Bit rate on the wire that this is.
    pub wire_gbps: f64,
}

/// The whole self-test.
#[derive(Clone, Debug, Serialize)]
pub struct DiskReport {
    /// The directory tested.
    pub dir: PathBuf,
    /// Buffered, then direct.
    pub runs: Vec<DiskRun>,
    /// Rates from the direct run.
    pub rates: Vec<RateAt>,
}

/// Busy and total jiffies of the whole machine, from /proc/stat.
fn system_cpu() -> (f64, f64) {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = s.lines().next() else {
        return (0.0, 0.0);
    };
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: f64 = v.iter().sum();
    // idle and iowait are not busy.
    let idle = v.get(3).copied().unwrap_or(0.0) + v.get(4).copied().unwrap_or(0.0);
    (total - idle, total)
}

/// Jiffies per second in /proc/stat (USER_HZ, 100 on Linux).
fn hz() -> f64 {
    100.0
}

fn measure(
    mode: &'static str,
    bytes: u64,
    f: impl FnOnce() -> io::Result<bool>,
) -> io::Result<DiskRun> {
    let (busy0, _) = system_cpu();
    let cpu0 = corecap_linux::affinity::process_cpu_seconds();
    let t0 = Instant::now();
    let direct = f()?;
    let seconds = t0.elapsed().as_secs_f64();
    let cpu = corecap_linux::affinity::process_cpu_seconds() - cpu0;
    let (busy1, _) = system_cpu();
    let gb = bytes as f64 / 1e9;
    Ok(DiskRun {
        mode,
        direct,
        bytes,
        seconds,
        gb_per_s: gb / seconds.max(1e-9),
        cpu_per_gb: cpu / gb,
        system_cpu_per_gb: (busy1 - busy0) / hz() / gb,
    })
}

fn buffered(path: &Path, bytes: u64) -> io::Result<bool> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    let buf = vec![0x5au8; CHUNK];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        f.write_all(&buf[..n])?;
        left -= n as u64;
    }
    f.sync_all()?;
    Ok(false)
}

fn direct(path: &Path, bytes: u64) -> io::Result<bool> {
    let file = DirectFile::create(path, true, 0o600)?;
    let _ = file.reserve(bytes);
    let align = file.align();
    let mut ring = WriteRing::new(8, true);
    let mut free: Vec<AlignedBuf> = (0..8)
        .map(|_| {
            let mut b = AlignedBuf::new(CHUNK, align);
            b.bytes_mut().fill(0x5a);
            b
        })
        .collect();
    let mut done = Vec::new();
    let mut off = 0u64;
    while off < bytes {
        let buf = match free.pop() {
            Some(b) => b,
            None => {
                ring.reap(1, &mut done)?;
                for d in done.drain(..) {
                    d.result?;
                    free.push(d.buf);
                }
                continue;
            }
        };
        let n = (bytes - off).min(CHUNK as u64) as usize;
        let n = n.div_ceil(align) * align;
        if let Err(b) = ring.submit(file.file(), buf, n, off, 0) {
            free.push(b);
            ring.reap(1, &mut done)?;
        }
        off += n as u64;
        for d in done.drain(..) {
            d.result?;
            free.push(d.buf);
        }
    }
    while ring.in_flight() > 0 {
        let n = ring.in_flight();
        ring.reap(n, &mut done)?;
        for d in done.drain(..) {
            d.result?;
        }
    }
    file.file().set_len(bytes)?;
    file.file().sync_all()?;
    Ok(file.is_direct())
}

/// Bytes one packet of `frame` bytes on the wire (FCS included) takes in a corecap pcapng
/// file: its EPB with the queue and hash options.
pub fn pcapng_bytes(frame: u32) -> u32 {
    let data = vec![0u8; frame.saturating_sub(4) as usize];
    let mut w = match PcapngWriter::new(Vec::new(), "", &[InterfaceDesc::ethernet("x", 262144)]) {
        Ok(w) => w,
        Err(_) => return frame + 40,
    };
    let before = w.get_ref().len();
    let _ = w.write_epb(&Epb {
        if_id: 0,
        ts_ns: 1,
        data: &data,
        orig_len: data.len() as u32,
        vlan_tci: None,
        queue: Some(0),
        hash: Some(1),
        dropcount: None,
    });
    (w.get_ref().len() - before) as u32
}

/// Runs the self-test in `dir` with files of `bytes`, removed afterwards.
pub fn run(dir: &Path, bytes: u64) -> io::Result<DiskReport> {
    let tag = std::process::id();
    let pb = dir.join(format!(".corecap-bench-{tag}-buffered"));
    let pd = dir.join(format!(".corecap-bench-{tag}-direct"));
    let runs = (|| {
        let b = measure("buffered", bytes, || buffered(&pb, bytes));
        let _ = std::fs::remove_file(&pb);
        let d = measure("direct", bytes, || direct(&pd, bytes));
        let _ = std::fs::remove_file(&pd);
        Ok::<_, io::Error>(vec![b?, d?])
    })();
    let _ = std::fs::remove_file(&pb);
    let _ = std::fs::remove_file(&pd);
    let runs = runs?;
    let bps = runs[1].gb_per_s * 1e9;
    let rates = [64u32, 512, 1518]
        .iter()
        .map(|&frame| {
            let file_bytes = pcapng_bytes(frame);
            let pps = bps / f64::from(file_bytes);
            RateAt {
                frame,
                file_bytes,
                pps,
                // Preamble, SFD and the inter-frame gap: 20 bytes more per frame.
                wire_gbps: pps * f64::from(frame + 20) * 8.0 / 1e9,
            }
        })
        .collect();
    Ok(DiskReport {
        dir: dir.to_owned(),
        runs,
        rates,
    })
}

/// The report as a table.
pub fn table(r: &DiskReport) -> String {
    let mut s = format!("disk self-test in {}\n", r.dir.display());
    s.push_str(&format!(
        "  {:<9} {:>8} {:>9} {:>13} {:>16}\n",
        "mode", "GB", "GB/s", "CPU s/GB", "system CPU s/GB"
    ));
    for x in &r.runs {
        s.push_str(&format!(
            "  {:<9} {:>8.2} {:>9.2} {:>13.3} {:>16.3}{}\n",
            x.mode,
            x.bytes as f64 / 1e9,
            x.gb_per_s,
            x.cpu_per_gb,
            x.system_cpu_per_gb,
            if x.mode == "direct" && !x.direct {
                "  (the filesystem refused direct I/O)"
            } else {
                ""
            }
        ));
    }
    s.push_str("  packet rates this disk keeps (direct, corecap pcapng):\n");
    for r in &r.rates {
        s.push_str(&format!(
            "    {:>5} B frames: {:>6} B each on disk, {:>10.0} packets/s ({:.2} Gbit/s on the wire)\n",
            r.frame, r.file_bytes, r.pps, r.wire_gbps
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_pcapng_bytes() {
        // 28-byte EPB head, data padded to 4, options, 4-byte trailer.
        let b = pcapng_bytes(64);
        assert!(b >= 60 + 32 && b.is_multiple_of(4), "{b}");
        assert_eq!(pcapng_bytes(1518) - pcapng_bytes(1514), 4);
    }

    #[test]
    fn test_run_small() {
        let d = std::env::temp_dir();
        let r = run(&d, 8 << 20).expect("disk self-test");
        assert_eq!(r.runs.len(), 2);
        assert!(r.runs.iter().all(|x| x.gb_per_s > 0.0));
        assert_eq!(r.rates.len(), 3);
        assert!(r.rates[0].pps > r.rates[2].pps);
        assert!(table(&r).contains("direct"));
    }
}
