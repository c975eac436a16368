//! Throughput between two threads (one producer, one consumer) of 64-byte
//! packets, for batch sizes 1, 16 and 128: the mpsc double buffer, the spsc
//! byte ring, rtrb and crossbeam `ArrayQueue` (of fixed 64-byte records), all
//! in the same run. Prints a Markdown table of million items per second.
//!
//! A producer that finds the queue full spins and retries, so every item is
//! delivered and the figure is the transfer rate; for mpsc the retries show up
//! as `full_drops`, printed beside it.
//!
//! `cargo run -p corecap-queue --release --example queue_bench [ITEMS] [REPS]`

use std::hint::{black_box, spin_loop};
use std::thread;
use std::time::{Duration, Instant};

use corecap_queue::{mpsc, spsc, SlotHeader};
use crossbeam_queue::ArrayQueue;

const PAYLOAD: usize = 64;
/// Bytes of queue memory for each kind: a buffer of the mpsc pair, the ring, or records x 64.
const QUEUE_BYTES: usize = 256 * 1024;
const BATCHES: [usize; 3] = [1, 16, 128];

type Record = [u8; PAYLOAD];

fn record(seq: u64) -> Record {
    let mut r = [0u8; PAYLOAD];
    r[..8].copy_from_slice(&seq.to_ne_bytes());
    r
}

fn header(seq: u64) -> SlotHeader {
    SlotHeader {
        ts_ns: seq,
        orig_len: PAYLOAD as u32,
        ..SlotHeader::default()
    }
}

/// The records from `first` on as the slots of a corecap queue's batch.
fn slots(records: &[Record], first: u64) -> impl Iterator<Item = (SlotHeader, &[u8])> + Clone {
    (first..).zip(records).map(|(seq, r)| (header(seq), &r[..]))
}

/// A corecap queue's producer: pushes `items` records in batches of `batch`, spinning
/// and pushing again what `push_batch` did not take. `push_batch(records, first)` pushes
/// `records`, numbered from `first`, and says how many it took.
fn push_batches(items: u64, batch: usize, mut push_batch: impl FnMut(&[Record], u64) -> usize) {
    let mut bufs = vec![record(0); batch];
    let mut seq = 0;
    while seq < items {
        let k = batch.min((items - seq) as usize);
        for (i, b) in bufs[..k].iter_mut().enumerate() {
            *b = record(seq + i as u64);
        }
        let mut done = 0;
        while done < k {
            let n = push_batch(&bufs[done..k], seq + done as u64);
            if n == 0 {
                spin_loop();
            }
            done += n;
        }
        seq += k as u64;
    }
}

/// What a corecap queue's consumer adds to its sum for one slot.
fn add_slot(sum: u64, h: &SlotHeader, d: &[u8]) -> u64 {
    sum.wrapping_add(h.ts_ns ^ d[8] as u64)
}

/// A corecap queue's consumer: drains until `items` arrived, spinning while the queue is
/// empty. `drain(sum)` drains once, adds each slot to `sum` and says how many it took; the
/// sum is kept so that the reads are not optimised away.
fn drain_all(items: u64, mut drain: impl FnMut(&mut u64) -> usize) {
    let mut got = 0u64;
    let mut sum = 0u64;
    while got < items {
        let n = drain(&mut sum);
        if n == 0 {
            spin_loop();
        }
        got += n as u64;
    }
    black_box(sum);
}

/// Runs `produce` and `consume` on two threads; returns the wall time.
fn two_threads(produce: impl FnOnce() + Send, consume: impl FnOnce() + Send) -> Duration {
    let start = Instant::now();
    thread::scope(|s| {
        s.spawn(produce);
        s.spawn(consume);
    });
    start.elapsed()
}

/// Returns (elapsed, full retries).
fn run_mpsc(items: u64, batch: usize) -> (Duration, u64) {
    let (p, mut c) = mpsc::queue(QUEUE_BYTES);
    let t = two_threads(
        move || {
            if batch == 1 {
                for seq in 0..items {
                    let r = record(seq);
                    while p.push(&header(seq), &r).is_err() {
                        spin_loop();
                    }
                }
            } else {
                push_batches(items, batch, |rest, first| p.push_batch(slots(rest, first)));
            }
        },
        || drain_all(items, |sum| c.drain(|h, d| *sum = add_slot(*sum, h, d))),
    );
    // The consumer was moved into the scope only by reference; read its stats here.
    (t, c.stats().full_drops)
}

fn run_spsc(items: u64, batch: usize) -> Duration {
    let (mut p, mut c) = spsc::ring(QUEUE_BYTES);
    two_threads(
        move || {
            push_batches(items, batch, |rest, first| p.push_batch(slots(rest, first)));
        },
        move || drain_all(items, |sum| c.drain(|h, d| *sum = add_slot(*sum, h, d))),
    )
}

fn run_rtrb(items: u64, batch: usize) -> Duration {
    let (mut p, mut c) = rtrb::RingBuffer::<Record>::new(QUEUE_BYTES / PAYLOAD);
    two_threads(
        move || {
            let mut seq = 0;
            while seq < items {
                let k = batch.min((items - seq) as usize);
                if let Ok(chunk) = p.write_chunk_uninit(k) {
                    chunk.fill_from_iter((seq..seq + k as u64).map(record));
                    seq += k as u64;
                } else {
                    spin_loop();
                }
            }
        },
        move || {
            let mut got = 0u64;
            let mut sum = 0u64;
            while got < items {
                let n = c.slots().min(batch);
                if n == 0 {
                    spin_loop();
                    continue;
                }
                if let Ok(chunk) = c.read_chunk(n) {
                    let (a, b) = chunk.as_slices();
                    for r in a.iter().chain(b) {
                        sum = sum.wrapping_add(r[0] as u64 ^ r[8] as u64);
                    }
                    chunk.commit_all();
                    got += n as u64;
                }
            }
            black_box(sum);
        },
    )
}

fn run_array_queue(items: u64, batch: usize) -> Duration {
    let q = ArrayQueue::<Record>::new(QUEUE_BYTES / PAYLOAD);
    two_threads(
        || {
            let mut seq = 0;
            while seq < items {
                let k = batch.min((items - seq) as usize);
                for s in seq..seq + k as u64 {
                    let mut r = record(s);
                    while let Err(back) = q.push(r) {
                        r = back;
                        spin_loop();
                    }
                }
                seq += k as u64;
            }
        },
        || {
            let mut got = 0u64;
            let mut sum = 0u64;
            while got < items {
                let mut n = 0;
                while n < batch {
                    match q.pop() {
                        Some(r) => {
                            sum = sum.wrapping_add(r[0] as u64 ^ r[8] as u64);
                            n += 1;
                        }
                        None => break,
                    }
                }
                if n == 0 {
                    spin_loop();
                }
                got += n as u64;
            }
            black_box(sum);
        },
    )
}

/// One timed run: (elapsed, full retries).
type Run<'a> = dyn Fn() -> (Duration, u64) + 'a;

fn mips(items: u64, t: Duration) -> f64 {
    items as f64 / t.as_secs_f64() / 1e6
}

fn main() {
    let mut args = std::env::args().skip(1);
    let items: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(5_000_000);
    let reps: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let cpus = thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{items} items of {PAYLOAD} B per run, {reps} runs per cell, {cpus} CPUs, loadavg {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!();
    println!("| queue | batch | M items/s median | min | max | full retries (median run) |");
    println!("|---|---|---|---|---|---|");
    for batch in BATCHES {
        let kinds: [(&str, &Run); 4] = [
            ("corecap mpsc (PFQ double buffer)", &|| {
                run_mpsc(items, batch)
            }),
            ("corecap spsc (rtrb bytes)", &|| (run_spsc(items, batch), 0)),
            ("rtrb RingBuffer<[u8; 64]>", &|| (run_rtrb(items, batch), 0)),
            ("crossbeam ArrayQueue<[u8; 64]>", &|| {
                (run_array_queue(items, batch), 0)
            }),
        ];
        // Round-robin over the kinds, so load from other processes hits all alike.
        let mut runs: Vec<Vec<(f64, u64)>> = vec![Vec::new(); kinds.len()];
        for _ in 0..reps {
            for (k, (_, run)) in kinds.iter().enumerate() {
                let (t, full) = run();
                runs[k].push((mips(items, t), full));
            }
        }
        for ((name, _), mut runs) in kinds.iter().zip(runs) {
            runs.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (med, full) = runs[runs.len() / 2];
            let (min, max) = (runs[0].0, runs[runs.len() - 1].0);
            let full = if name.contains("mpsc") {
                full.to_string()
            } else {
                "-".into()
            };
            println!("| {name} | {batch} | {med:.1} | {min:.1} | {max:.1} | {full} |");
        }
    }
}
