//! Stamped stress tests: producers stamp each record with (producer, seq) and
//! a checksum of its payload; the consumer checks per-producer order, the
//! checksums, and that received + full == sent. Counts shrink under miri.

use std::thread;

use corecap_queue::{mpsc, spsc, SlotHeader};

const ITEMS: u64 = if cfg!(miri) { 40 } else { 200_000 };
const PRODUCERS: u32 = if cfg!(miri) { 2 } else { 3 };

/// FNV-1a over the payload.
fn checksum(d: &[u8]) -> u32 {
    d.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    })
}

/// Payload of item `seq` of `producer`: 0..=100 bytes, contents from both.
fn payload(producer: u32, seq: u64) -> Vec<u8> {
    let len = ((seq * 37 + producer as u64 * 11) % 101) as usize;
    (0..len)
        .map(|i| (seq as u8) ^ (producer as u8).wrapping_mul(61) ^ i as u8)
        .collect()
}

fn stamp(producer: u32, seq: u64, data: &[u8]) -> SlotHeader {
    SlotHeader {
        ts_ns: seq,
        queue: producer,
        hash: checksum(data),
        orig_len: data.len() as u32,
        vlan_tci: 0,
        flags: 0,
    }
}

/// Per-producer receive state.
#[derive(Clone, Default)]
struct Track {
    next_min: u64,
    received: u64,
}

fn check(tracks: &mut [Track], h: &SlotHeader, d: &[u8]) {
    let t = &mut tracks[h.queue as usize];
    assert!(
        h.ts_ns >= t.next_min,
        "producer {} seq {} after {}",
        h.queue,
        h.ts_ns,
        t.next_min
    );
    assert_eq!(
        d.len() as u32,
        h.orig_len,
        "length of {}:{}",
        h.queue,
        h.ts_ns
    );
    assert_eq!(checksum(d), h.hash, "checksum of {}:{}", h.queue, h.ts_ns);
    assert_eq!(d, payload(h.queue, h.ts_ns).as_slice());
    t.next_min = h.ts_ns + 1;
    t.received += 1;
}

/// The payloads of records `seq..seq + batch` of producer `id`.
fn payloads(id: u32, seq: u64, batch: u64) -> Vec<Vec<u8>> {
    (seq..seq + batch).map(|s| payload(id, s)).collect()
}

/// Those payloads stamped, as the batch to push.
fn stamped(
    id: u32,
    seq: u64,
    data: &[Vec<u8>],
) -> impl Iterator<Item = (SlotHeader, &[u8])> + Clone {
    data.iter()
        .zip(seq..)
        .map(move |(d, s)| (stamp(id, s, d), d.as_slice()))
}

/// How many of a batch of `batch` the queue refused when it took `pushed`; when it
/// refused any, the producer lets the consumer catch up (the drops stay counted).
fn refused(batch: u64, pushed: usize) -> u64 {
    let refused = batch - pushed as u64;
    if refused > 0 {
        thread::yield_now();
    }
    refused
}

/// Producer `id` sends ITEMS records, singly and in batches of up to 8;
/// returns how many were refused (full).
fn produce_mpsc(p: mpsc::Producer, id: u32) -> u64 {
    let mut full = 0;
    let mut seq = 0;
    while seq < ITEMS {
        let batch = (seq % 9).min(ITEMS - seq);
        if batch <= 1 {
            let d = payload(id, seq);
            if p.push(&stamp(id, seq, &d), &d).is_err() {
                full += 1;
                thread::yield_now(); // let the consumer catch up; the drop stays counted
            }
            seq += 1;
        } else {
            let data = payloads(id, seq, batch);
            full += refused(batch, p.push_batch(stamped(id, seq, &data)));
            seq += batch;
        }
    }
    full
}

fn stress_mpsc(capacity: usize) {
    let (p, mut c) = mpsc::queue(capacity);
    let handles: Vec<_> = (0..PRODUCERS)
        .map(|id| {
            let p = p.clone();
            thread::spawn(move || produce_mpsc(p, id))
        })
        .collect();
    drop(p);
    let mut tracks = vec![Track::default(); PRODUCERS as usize];
    while !c.is_abandoned() {
        if c.drain(|h, d| check(&mut tracks, h, d)) == 0 {
            thread::yield_now(); // idle: give the producers the core
        }
    }
    c.drain(|h, d| check(&mut tracks, h, d));
    assert_eq!(c.drain(|_, _| {}), 0);
    let fulls: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for (id, t) in tracks.iter().enumerate() {
        assert_eq!(
            t.received + fulls[id],
            ITEMS,
            "producer {id}: received + full == sent"
        );
    }
    let stats = c.stats();
    eprintln!("mpsc capacity {capacity}: {stats:?}");
    let received: u64 = tracks.iter().map(|t| t.received).sum();
    assert_eq!(stats.pushed, received);
    assert_eq!(stats.full_drops, fulls.iter().sum::<u64>());
    assert_eq!(stats.pushed + stats.full_drops, ITEMS * PRODUCERS as u64);
}

/// A small buffer: frequent full drops and reservations crossing the end.
#[test]
fn stress_mpsc_small_buffer() {
    stress_mpsc(1024);
}

/// A buffer that rarely fills.
#[test]
fn stress_mpsc_large_buffer() {
    stress_mpsc(256 * 1024);
}

#[test]
fn stress_spsc() {
    let (mut p, mut c) = spsc::ring(1000);
    let h = thread::spawn(move || {
        let mut full = 0;
        let mut seq = 0;
        while seq < ITEMS {
            let batch = (seq % 5 + 1).min(ITEMS - seq);
            let data = payloads(0, seq, batch);
            full += refused(batch, p.push_batch(stamped(0, seq, &data)));
            seq += batch;
        }
        full
    });
    let mut tracks = vec![Track::default()];
    while !c.is_abandoned() {
        if c.drain(|h, d| check(&mut tracks, h, d)) == 0 {
            thread::yield_now(); // idle: give the producers the core
        }
    }
    c.drain(|h, d| check(&mut tracks, h, d));
    let full = h.join().unwrap();
    eprintln!("spsc: {:?}", c.stats());
    assert_eq!(tracks[0].received + full, ITEMS);
    assert_eq!(c.stats().pushed, tracks[0].received);
    assert_eq!(c.stats().full_drops, full);
}
