//! The PACKET_TX_RING engine: each thread owns a socket with a TPACKET_V2 transmit ring
//! and `PACKET_QDISC_BYPASS`, fills a batch of frames, and flushes it with one `send()`.
//!
//! Thread `t` of `T` sends the frames of the flows `f` with `f % T == t`, in frame order,
//! so both directions of a flow leave from one thread. The kernel picks a packet socket's
//! TX queue from the sending CPU (`packet_pick_tx_queue`), and veth hands TX queue `i` to
//! the peer's RX queue `i`; so with threads pinned to different CPUs, each flow arrives on
//! one RX queue and the flows spread over the queues, as RSS would spread them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use corecap_linux::{netdev, PacketSocket, TxRing};

use super::{GenConfig, GenReport};

/// Frames filled before each `send()`.
const BATCH: u64 = 256;

/// Sends frames as configured; stops early when `stop` is set.
pub fn run(cfg: &GenConfig, stop: Arc<AtomicBool>) -> Result<GenReport, corecap_linux::Error> {
    let ifindex = netdev::ifindex(&cfg.iface)?;
    let threads = cfg.threads.max(1);
    // Open every ring first, so a failure (permission, unknown interface) ends the run early.
    let mut rings = Vec::with_capacity(threads);
    for _ in 0..threads {
        let sock = PacketSocket::open()?;
        let _ = sock.set_qdisc_bypass();
        let ring = TxRing::new(sock, 2048, 4096)?;
        ring.socket()
            .bind(ifindex, 0)
            .map_err(|e| e.on(&cfg.iface))?;
        rings.push(ring);
    }
    let start = Instant::now();
    let handles: Vec<_> = rings
        .into_iter()
        .enumerate()
        .map(|(t, ring)| {
            let cfg = cfg.clone();
            let stop = stop.clone();
            std::thread::spawn(move || thread(t, threads, ring, &cfg, &stop))
        })
        .collect();
    let mut rep = GenReport::default();
    for h in handles {
        match h.join() {
            Ok(Ok((sent, errors))) => {
                rep.sent += sent;
                rep.errors += errors;
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(corecap_linux::Error::new(
                    corecap_linux::ErrorKind::Sys,
                    "generator thread panicked",
                ))
            }
        }
    }
    rep.seconds = start.elapsed().as_secs_f64();
    rep.pps = if rep.seconds > 0.0 {
        rep.sent as f64 / rep.seconds
    } else {
        0.0
    };
    Ok(rep)
}

fn thread(
    t: usize,
    threads: usize,
    mut ring: TxRing,
    cfg: &GenConfig,
    stop: &AtomicBool,
) -> Result<(u64, u64), corecap_linux::Error> {
    pin(t, threads, cfg);
    let tn = threads as u64;
    let spec = cfg.frames;
    let mine = |i: u64| threads == 1 || spec.flow_of(i).0 as usize % threads == t;
    let my_count = cfg.count.map(|n| {
        if threads == 1 {
            n
        } else {
            (0..n).filter(|i| mine(*i)).count() as u64
        }
    });
    let rate = cfg.rate.map(|r| (r as f64 / tn as f64).max(1.0));
    let start = Instant::now();
    let mut k = 0u64; // frames this thread submitted
    let mut i = 0u64; // next frame index to consider
    loop {
        // Relaxed: a stop flag polled once per batch.
        if stop.load(Ordering::Relaxed) || cfg.duration.is_some_and(|d| start.elapsed() >= d) {
            break;
        }
        let mut want = BATCH;
        if let Some(n) = my_count {
            if k >= n {
                break;
            }
            want = want.min(n - k);
        }
        if let Some(r) = rate {
            let due = (start.elapsed().as_secs_f64() * r) as u64 + 1;
            if due <= k {
                let wait = (k + 1) as f64 / r - start.elapsed().as_secs_f64();
                if wait > 0.0002 {
                    std::thread::sleep(Duration::from_secs_f64(wait.min(0.01)));
                } else {
                    std::hint::spin_loop();
                }
                continue;
            }
            want = want.min(due - k);
        }
        let mut filled = 0;
        while filled < want {
            while !mine(i) {
                i += 1;
            }
            if !ring.push(|buf| spec.fill(i, buf)) {
                break;
            }
            i += 1;
            filled += 1;
        }
        if filled == 0 {
            ring.flush(true)?;
            continue;
        }
        k += filled;
        ring.flush(true)?;
    }
    drain(&mut ring, k)
}

/// Pins sending thread `t` of `threads`: pinned threads send on distinct TX queues; by
/// default thread t runs on CPU t, and a lone thread is not pinned.
fn pin(t: usize, threads: usize, cfg: &GenConfig) {
    let cpu = if cfg.cpus.is_empty() {
        (threads > 1).then(|| {
            let all = corecap_linux::affinity::allowed_cpus();
            all[t % all.len().max(1)]
        })
    } else {
        Some(cfg.cpus[t % cfg.cpus.len()])
    };
    if let Some(cpu) = cpu {
        let _ = corecap_linux::affinity::pin_current_thread(cpu);
    }
}

/// Waits (at most 5 s) until the kernel has handed back every frame of the `k` submitted;
/// returns those sent and those the kernel refused.
fn drain(ring: &mut TxRing, k: u64) -> Result<(u64, u64), corecap_linux::Error> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while ring.in_flight() > 0 && Instant::now() < deadline {
        ring.flush(true)?;
        std::thread::sleep(Duration::from_millis(1));
    }
    // Frames refused by the kernel are found when their slot is reused; scan them now.
    let wrong = ring.wrong_format();
    Ok((k - wrong.min(k), wrong))
}
