//! loom models of the mpsc protocol (see the `corecap_queue::mpsc` module doc):
//! two producers and one consumer that swaps while they write. Every item is
//! received exactly once, intact, or counted full.
//!
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p corecap-queue --test it --release`

use std::collections::BTreeMap;

use corecap_queue::mpsc::{self, Consumer, Producer};
use corecap_queue::SlotHeader;
use loom::sync::{Arc, Mutex};
use loom::thread;

/// Bytes of an 8-byte payload record (32-byte head + 8).
const REC8: usize = 40;

fn hdr(producer: u32, seq: u64) -> SlotHeader {
    SlotHeader {
        ts_ns: seq,
        queue: producer,
        hash: producer.wrapping_mul(0x9e37_79b9) ^ seq as u32,
        orig_len: 1000 + seq as u32,
        vlan_tci: producer as u16,
        flags: 1,
    }
}

/// A payload that tells its item apart: `len` bytes derived from (producer, seq).
fn payload(producer: u32, seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (producer as u8).wrapping_mul(31) ^ (seq as u8).wrapping_mul(7) ^ i as u8)
        .collect()
}

/// Received items, keyed by (producer, seq), with how often each arrived.
#[derive(Default)]
struct Seen(BTreeMap<(u32, u64), usize>);

impl Seen {
    fn drain(&mut self, c: &mut Consumer) {
        c.drain(|h, d| {
            let (p, s) = (h.queue, h.ts_ns);
            assert_eq!(*h, hdr(p, s), "header intact");
            assert_eq!(d, payload(p, s, d.len()).as_slice(), "payload intact");
            *self.0.entry((p, s)).or_default() += 1;
        });
    }

    /// Each item at most once, and received + full == sent.
    fn check(&self, c: &Consumer, sent: u64) {
        assert!(self.0.values().all(|&n| n == 1), "duplicate: {:?}", self.0);
        let stats = c.stats();
        assert_eq!(stats.pushed, self.0.len() as u64);
        assert_eq!(stats.pushed + stats.full_drops, sent);
    }
}

/// Runs `producers` on two threads while the consumer drains `concurrent`
/// times, then joins them and drains what is left.
fn run(
    cap: usize,
    concurrent: usize,
    producers: [fn(Producer) -> u64; 2],
    expect_full: Option<u64>,
) {
    loom::model(move || {
        let (p, mut c) = mpsc::queue_with_slots(cap, 2);
        let sent = Arc::new(Mutex::new(0u64));
        let handles: Vec<_> = producers
            .iter()
            .map(|f| {
                let (p, f, sent) = (p.clone(), *f, sent.clone());
                thread::spawn(move || {
                    let n = f(p);
                    *sent.lock().unwrap() += n;
                })
            })
            .collect();
        drop(p);
        let mut seen = Seen::default();
        for _ in 0..concurrent {
            seen.drain(&mut c);
        }
        for h in handles {
            h.join().unwrap();
        }
        assert!(c.is_abandoned());
        seen.drain(&mut c);
        seen.drain(&mut c);
        let sent = *sent.lock().unwrap();
        seen.check(&c, sent);
        if let Some(full) = expect_full {
            assert_eq!(c.stats().full_drops, full);
        }
    });
}

fn push_one_p1(p: Producer) -> u64 {
    let _ = p.push(&hdr(1, 0), &payload(1, 0, 8));
    1
}

fn push_one_p2(p: Producer) -> u64 {
    let _ = p.push(&hdr(2, 0), &payload(2, 0, 8));
    1
}

fn push_two_p1(p: Producer) -> u64 {
    for s in 0..2 {
        let _ = p.push(&hdr(1, s), &payload(1, s, 8));
    }
    2
}

fn batch_two_p2(p: Producer) -> u64 {
    let data: Vec<Vec<u8>> = (0..2).map(|s| payload(2, s, 8 + 8 * s as usize)).collect();
    p.push_batch(
        data.iter()
            .enumerate()
            .map(|(s, d)| (hdr(2, s as u64), d.as_slice())),
    );
    2
}

/// 2 producers x 1 item, room for both: nothing is full, whatever the swap hits.
#[test]
fn loom_two_producers_one_swap() {
    run(2 * REC8, 1, [push_one_p1, push_one_p2], Some(0));
}

/// Room for one and a half records: the second reservation may cross the end
/// (end mark, P4) or be refused by P1; either way it is counted, not lost.
#[test]
fn loom_crossing_reservation() {
    run(REC8 + 24, 1, [push_one_p1, push_one_p2], None);
}

/// One producer pushes 2 items while the consumer swaps twice: a producer
/// preempted after its reservation must finish before its buffer is reused.
#[test]
fn loom_two_swaps_while_writing() {
    run(2 * REC8, 2, [push_two_p1, push_one_p2], None);
}

/// A batch of two (one fetch_add) against a single push, with a tight buffer:
/// the batch may be cut at the end of the buffer.
#[test]
fn loom_batch_against_push() {
    run(2 * REC8 + 8, 1, [push_one_p1, batch_two_p2], None);
}

/// A producer leaves while another joins and may take over its counter slot:
/// the new owner continues from the old owner's counts, so none are lost.
#[test]
fn loom_slot_handover_keeps_counts() {
    loom::model(|| {
        let (p, mut c) = mpsc::queue_with_slots(4 * REC8, 1);
        let q = p.clone(); // slot taken by p: q shares the overflow slot
        let leaver = thread::spawn(move || {
            let _ = p.push(&hdr(1, 0), &payload(1, 0, 8));
            let _ = p.push(&hdr(1, 1), &payload(1, 1, 40));
        });
        let joiner = thread::spawn(move || {
            let r = q.clone(); // claims p's slot if p has left
            let _ = r.push(&hdr(2, 0), &payload(2, 0, 8));
        });
        leaver.join().unwrap();
        joiner.join().unwrap();
        let mut seen = Seen::default();
        seen.drain(&mut c);
        seen.drain(&mut c);
        seen.check(&c, 3);
    });
}

/// Two producers each push an item stamped 1, publish a watermark of 1, push one stamped
/// 2 and publish 2; the consumer, while they run, loads the smallest watermark and then
/// drains (see `corecap_queue::watermark`). Every item at or below the watermark it
/// loaded is in what it has drained by then, whatever the interleaving.
#[test]
fn loom_watermark_covers_every_packet_below_it() {
    use corecap_queue::watermark;
    loom::model(|| {
        let (p, mut c) = mpsc::queue_with_slots(8 * REC8, 2);
        let mut readers = Vec::new();
        let handles: Vec<_> = (1..=2u32)
            .map(|id| {
                let (mut w, r) = watermark::pair();
                readers.push(r);
                let p = p.clone();
                thread::spawn(move || {
                    for ts in 1..=2u64 {
                        p.push(&hdr(id, ts), &payload(id, ts, 8)).expect("room");
                        w.publish(ts);
                    }
                })
            })
            .collect();
        drop(p);
        let mut seen = Seen::default();
        for _ in 0..2 {
            let mark = watermark::min(&readers);
            seen.drain(&mut c);
            for id in 1..=2u32 {
                for ts in (1..=2u64).filter(|&t| t <= mark) {
                    assert!(
                        seen.0.contains_key(&(id, ts)),
                        "producer {id}'s item {ts} is at or below the watermark {mark} but \
                         was not drained"
                    );
                }
            }
        }
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(
            watermark::min(&readers),
            u64::MAX,
            "gone producers hold nothing back"
        );
        seen.drain(&mut c);
        seen.check(&c, 4);
    });
}
