//! A member of a consumer group, running on a stage core: it drains one pipe per capture
//! worker and runs its app on every packet, until every worker has ended.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::Duration;

use crate::sink::file::FileSink;
use crate::stage::pipe::PipeRx;
use crate::stage::reorder::Reorder;

/// What a member ended with.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct MemberOutcome {
    /// Packets the app took.
    pub delivered: u64,
    /// Wire bytes of those packets.
    pub bytes: u64,
    /// Packets the app could not take.
    pub app_drops: u64,
    /// Packets lost at the disk (no free buffer, or cut from a file after a failed write).
    pub disk_drops: u64,
    /// Files written.
    pub files: Vec<PathBuf>,
    /// A file error, if any.
    pub error: Option<String>,
    /// Notes for the user (a filesystem without direct I/O).
    #[serde(skip)]
    pub notes: Vec<String>,
    /// Flow accounting, when it ran.
    pub flows: Option<crate::stage::flows::FlowStats>,
    /// Packets older than the member's start (an on-demand capture takes packets from its
    /// request on; the first block it sees may hold older ones).
    #[serde(skip_serializing_if = "is_zero")]
    pub before_start: u64,
    /// Packets after the member's count was reached, until it left the matrix.
    #[serde(skip_serializing_if = "is_zero")]
    pub over_count: u64,
    /// Timestamp of the first delivered packet (ns since the epoch), 0 if none.
    #[serde(skip_serializing_if = "is_zero")]
    pub first_ts_ns: u64,
    /// The latest timestamp of a delivered packet (ns since the epoch), 0 if none.
    #[serde(skip_serializing_if = "is_zero")]
    pub last_ts_ns: u64,
    /// Packets delivered from the recording (a capture that starts in the past).
    #[serde(skip_serializing_if = "is_zero")]
    pub recorded: u64,
    /// Live packets older than the seam: the recording gave them.
    #[serde(skip_serializing_if = "is_zero")]
    pub before_seam: u64,
    /// Live packets lost because the hold buffer was full while the recorded ones were
    /// read.
    #[serde(skip_serializing_if = "is_zero")]
    pub hold_drops: u64,
    /// Packets written to the file older than one written before them (their worker broke
    /// its watermark, or fell behind by more than the reorder holds).
    #[serde(skip_serializing_if = "is_zero")]
    pub out_of_order: u64,
    /// Packets the per-flow cutoff left out of the file ([`crate::cutoff`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub cut_packets: u64,
    /// Wire bytes of the cut packets.
    #[serde(skip_serializing_if = "is_zero")]
    pub cut_bytes: u64,
    /// Flows the cutoff's full table forgot before they were idle.
    #[serde(skip_serializing_if = "is_zero")]
    pub cut_evictions: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Counters of a running member, for whoever started it (the on-demand manager). The
/// member publishes them once per drain with Relaxed stores; only it writes them, except
/// `stage_full`, which the workers' pipe ends add to once per lossy batch.
#[derive(Debug, Default)]
pub struct MemberLive {
    /// Packets delivered so far.
    pub packets: AtomicU64,
    /// Their wire bytes.
    pub bytes: AtomicU64,
    /// Timestamp of the first delivered packet (ns since the epoch), 0 before it.
    pub first_ts_ns: AtomicU64,
    /// The latest timestamp of a delivered packet (ns since the epoch), 0 before the first.
    pub last_ts_ns: AtomicU64,
    /// Files its file sink has begun (the first, then one per rotation); 0 without one.
    pub files: AtomicU64,
    /// Packets lost because the member's pipe was full.
    pub stage_full: Arc<AtomicU64>,
    /// Packets the app could not take.
    pub app_drops: AtomicU64,
    /// Packets lost at the disk.
    pub disk_drops: AtomicU64,
    /// Packets the per-flow cutoff left out of the file.
    pub cut_packets: AtomicU64,
    /// Their wire bytes.
    pub cut_bytes: AtomicU64,
    /// Flows the cutoff's full table forgot before they were idle.
    pub cut_evictions: AtomicU64,
    /// Packets written to the file of connections its full session table could not keep
    /// a record of.
    pub sessions_dropped: AtomicU64,
    /// Packets written to the file older than one written before them.
    pub out_of_order: AtomicU64,
    /// Set when the member's file failed (a write error): the capture should end.
    pub failed: AtomicBool,
    /// The count was reached: the member takes no more packets.
    pub done: AtomicBool,
    /// Packets delivered from the recording so far.
    pub recorded: AtomicU64,
    /// Set once the recorded packets are all written and live packets follow.
    pub seamed: AtomicBool,
}

/// Limits of a member started on demand.
#[derive(Clone, Debug, Default)]
pub struct MemberLimits {
    /// Packets with an older timestamp (ns since the epoch) are skipped.
    pub since_ns: u64,
    /// Stop taking packets after this many.
    pub count: Option<u64>,
    /// Where to publish the running counters.
    pub live: Option<Arc<MemberLive>>,
    /// The per-flow cutoff of the member's file (a recording's), taken by the member.
    pub cutoff: Option<crate::cutoff::Cutoff>,
}

/// Recorded packets, in time order, that go to a member's file before its live ones (a
/// capture that starts in the past). Until [`Recorded::End`], live packets are held in a
/// bounded buffer; then those from the seam on follow, and older ones (which the
/// recording gave) are counted and skipped.
#[derive(Debug)]
pub enum Recorded {
    /// Packets: their bytes back to back, and per packet (timestamp, length, wire length).
    Batch {
        /// The packets' bytes.
        data: Vec<u8>,
        /// (timestamp ns, captured length, wire length, link type) of each packet, in
        /// order.
        packets: Vec<(u64, u32, u32, u16)>,
    },
    /// The end: every live packet from `seam_ns` on is delivered live; `error` says why
    /// the recorded ones stopped early, if they did.
    End {
        /// The seam, ns since the epoch.
        seam_ns: u64,
        /// Why the recorded packets ended before the seam.
        error: Option<String>,
    },
}

/// A member's lookback: where its recorded packets come from, and how many bytes of live
/// packets it may hold meanwhile.
#[derive(Debug)]
pub struct Lookback {
    /// The recorded packets.
    pub recorded: Receiver<Recorded>,
    /// Most bytes of live packets held while they come.
    pub hold_bytes: usize,
}

/// Live packets held while the recorded ones are written: one arena, no allocation per
/// packet once it has grown.
#[derive(Debug, Default)]
struct Hold {
    data: Vec<u8>,
    /// (timestamp, start in `data`, length, wire length, VLAN TCI, framing) of each held
    /// packet.
    packets: Vec<(u64, usize, u32, u32, Option<u16>, corecap_wire::Link)>,
}

/// What a member does with its lookback.
struct Past {
    feed: Lookback,
    hold: Hold,
}

impl Past {
    /// Holds a live packet (a copy), or counts it lost when the buffer is full.
    fn hold(&mut self, p: &crate::packet::Packet<'_>, o: &mut MemberOutcome) {
        if self.hold.data.len() + p.data.len() > self.feed.hold_bytes {
            o.hold_drops += 1;
            return;
        }
        let at = self.hold.data.len();
        self.hold.data.extend_from_slice(p.data);
        self.hold
            .packets
            .push((p.ts_ns, at, p.data.len() as u32, p.wire_len, p.vlan, p.link));
    }
}

/// Writes what came of the recorded packets; returns the seam once they ended (and the
/// held live packets from it on were delivered).
fn take_recorded(
    past: &mut Past,
    flows: &mut Option<crate::stage::flows::FlowTable>,
    sink: &mut Option<FileSink>,
    lim: &MemberLimits,
    o: &mut MemberOutcome,
) -> Option<u64> {
    loop {
        let msg = match past.feed.recorded.try_recv() {
            Ok(m) => m,
            Err(TryRecvError::Empty) => return None,
            Err(TryRecvError::Disconnected) => Recorded::End {
                seam_ns: 0,
                error: Some("the recording's reader ended".into()),
            },
        };
        match msg {
            Recorded::Batch { data, packets } => {
                let mut at = 0usize;
                for (ts_ns, len, wire_len, linktype) in packets {
                    let end = at + len as usize;
                    let Some(bytes) = data.get(at..end) else {
                        break;
                    };
                    let before = o.delivered;
                    deliver(
                        &crate::packet::Packet {
                            ts_ns,
                            data: bytes,
                            wire_len,
                            iface: 0,
                            queue: None,
                            vlan: None,
                            link: corecap_wire::Link::of(linktype),
                        },
                        flows,
                        sink,
                        lim,
                        o,
                    );
                    o.recorded += o.delivered - before;
                    at = end;
                }
            }
            Recorded::End { seam_ns, error } => {
                if let Some(e) = error {
                    o.notes.push(format!("packets from the recording: {e}"));
                }
                let hold = std::mem::take(&mut past.hold);
                for (ts_ns, at, len, wire_len, vlan, link) in hold.packets {
                    let p = crate::packet::Packet {
                        ts_ns,
                        data: &hold.data[at..at + len as usize],
                        wire_len,
                        iface: 0,
                        queue: None,
                        vlan,
                        link,
                    };
                    if ts_ns < seam_ns {
                        o.before_seam += 1;
                    } else {
                        deliver(&p, flows, sink, lim, o);
                    }
                }
                return Some(seam_ns);
            }
        }
    }
}

/// Runs the member's apps on one packet.
fn deliver(
    p: &crate::packet::Packet<'_>,
    flows: &mut Option<crate::stage::flows::FlowTable>,
    sink: &mut Option<FileSink>,
    lim: &MemberLimits,
    o: &mut MemberOutcome,
) {
    deliver_cut(p, flows, sink, lim, o, &mut None);
}

/// Runs the member's apps on one packet, with its cutoff (flow records still count a cut
/// packet: they describe the traffic, not the file).
fn deliver_cut(
    p: &crate::packet::Packet<'_>,
    flows: &mut Option<crate::stage::flows::FlowTable>,
    sink: &mut Option<FileSink>,
    lim: &MemberLimits,
    o: &mut MemberOutcome,
    cutoff: &mut Option<crate::cutoff::Cutoff>,
) {
    if p.ts_ns < lim.since_ns {
        o.before_start += 1;
        return;
    }
    if lim
        .count
        .is_some_and(|c| o.delivered + o.app_drops + o.disk_drops >= c)
    {
        o.over_count += 1;
        return;
    }
    if o.delivered == 0 && o.app_drops == 0 && o.disk_drops == 0 {
        o.first_ts_ns = p.ts_ns;
    }
    if let Some(t) = flows {
        t.packet(p);
    }
    // Read once, for the cutoff and the file's index and sessions.
    let parsed = match cutoff {
        Some(_) => p.link.transport(p.data, p.vlan).ok(),
        None => None,
    };
    if let Some(c) = cutoff.as_mut() {
        let verdict = c.judge_parsed(p, parsed.as_ref());
        o.cut_evictions = c.evictions();
        if verdict == crate::cutoff::Verdict::Cut {
            o.cut_packets += 1;
            o.cut_bytes += u64::from(p.wire_len);
            // Seen, not kept: its connection's record in the file counts it.
            if let Some(s) = sink.as_mut() {
                s.count_cut(p, parsed.as_ref());
            }
            return;
        }
    }
    match sink
        .as_mut()
        .map_or(Ok(()), |s| s.write_parsed(p, parsed.as_ref()))
    {
        Ok(()) => {
            o.delivered += 1;
            o.bytes += u64::from(p.wire_len);
            // The workers' batches interleave: the latest, not the last one seen.
            o.last_ts_ns = o.last_ts_ns.max(p.ts_ns);
        }
        Err(_) => o.disk_drops += 1,
    }
}

impl MemberOutcome {
    /// Publishes the running counters, with the files `sink` has begun.
    fn publish(&self, lim: &MemberLimits, sink: Option<&FileSink>) {
        if let Some(l) = &lim.live {
            // Relaxed: statistics, read for display; only this thread writes them.
            l.packets.store(self.delivered, Ordering::Relaxed);
            l.bytes.store(self.bytes, Ordering::Relaxed);
            l.first_ts_ns.store(self.first_ts_ns, Ordering::Relaxed);
            l.last_ts_ns.store(self.last_ts_ns, Ordering::Relaxed);
            if let Some(s) = sink {
                l.files.store(s.files_begun(), Ordering::Relaxed);
                l.sessions_dropped
                    .store(s.sessions_dropped(), Ordering::Relaxed);
            }
            l.app_drops.store(self.app_drops, Ordering::Relaxed);
            l.disk_drops.store(self.disk_drops, Ordering::Relaxed);
            l.cut_packets.store(self.cut_packets, Ordering::Relaxed);
            l.cut_bytes.store(self.cut_bytes, Ordering::Relaxed);
            l.cut_evictions.store(self.cut_evictions, Ordering::Relaxed);
            l.out_of_order.store(self.out_of_order, Ordering::Relaxed);
            l.recorded.store(self.recorded, Ordering::Relaxed);
            if lim
                .count
                .is_some_and(|c| self.delivered + self.app_drops + self.disk_drops >= c)
            {
                l.done.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// Runs a member to its end; with a lookback, its recorded packets first.
pub fn run(
    cpu: Option<u32>,
    mut rx: Vec<PipeRx>,
    mut sink: Option<FileSink>,
    mut flows: Option<crate::stage::flows::FlowTable>,
    mut lim: MemberLimits,
    lookback: Option<Lookback>,
) -> MemberOutcome {
    let mut past = lookback.map(|feed| Past {
        feed,
        hold: Hold::default(),
    });
    if let Some(c) = cpu {
        let _ = corecap_linux::affinity::pin_current_thread(c);
    }
    let _ = corecap_linux::privilege::drop_thread_capabilities();
    let mut o = MemberOutcome::default();
    let mut cutoff = lim.cutoff.take();
    let mut order = sink.is_some().then(Reorder::default);
    // Its first file is begun before its first packet.
    o.publish(&lim, sink.as_ref());
    let mut idle = 0u32;
    loop {
        let got = match past.as_mut() {
            Some(pa) => {
                let mut got = false;
                for r in rx.iter_mut() {
                    got |= r.drain(|p, _hash| pa.hold(p, &mut o)) > 0;
                }
                if let Some(seam) = take_recorded(pa, &mut flows, &mut sink, &lim, &mut o) {
                    // Live from the seam on: an older packet still in a pipe was recorded.
                    lim.since_ns = lim.since_ns.max(seam);
                    past = None;
                    if let Some(l) = &lim.live {
                        // Relaxed: a flag for display; the counters follow at the publish.
                        l.seamed.store(true, Ordering::Relaxed);
                    }
                    got = true;
                }
                got
            }
            None => {
                let mut out = Out::new(&mut flows, &mut sink, &lim, &mut o, &mut cutoff);
                drain_live(&mut rx, &mut order, &mut out)
            }
        };
        if let Some(s) = sink.as_mut() {
            // The flush timer (a no-op until it is due).
            s.hand_over();
        }
        if got {
            tell_failed(&lim, sink.as_ref());
            o.publish(&lim, sink.as_ref());
            idle = 0;
            continue;
        }
        if past.is_none() && rx.iter().all(|r| r.closed()) {
            let mut out = Out::new(&mut flows, &mut sink, &lim, &mut o, &mut cutoff);
            if drain_last(&mut rx, &mut order, &mut out) == 0 {
                break;
            }
            continue;
        }
        // Back off while idle: spin briefly, then sleep, so an idle stage costs nothing.
        idle += 1;
        if idle == 64 {
            going_idle(&mut flows, &lim, &o);
        }
        if idle < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    if let Some(late) = order.as_ref().map(Reorder::late).filter(|&n| n > 0) {
        o.notes.push(late_note(late));
    }
    end(o, flows, sink, &lim)
}

/// Tells the manager (through the member's live counters) that its file failed.
fn tell_failed(lim: &MemberLimits, sink: Option<&FileSink>) {
    if let (true, Some(l)) = (sink.is_some_and(FileSink::failed), &lim.live) {
        // Relaxed: a flag the manager polls; the outcome carries the error.
        l.failed.store(true, Ordering::Relaxed);
    }
}

/// The note of `late` packets written out of time order.
fn late_note(late: u64) -> String {
    format!(
        "{late} packets came after newer ones had been written (their worker broke its \
         watermark, or more than {} MiB were held for a worker that fell behind) and were \
         written out of time order",
        crate::stage::reorder::MAX_BYTES >> 20
    )
}

/// Where a member's live packets go ([`deliver_cut`]): its app, limits, outcome and cutoff.
struct Out<'a> {
    flows: &'a mut Option<crate::stage::flows::FlowTable>,
    sink: &'a mut Option<FileSink>,
    lim: &'a MemberLimits,
    o: &'a mut MemberOutcome,
    cutoff: &'a mut Option<crate::cutoff::Cutoff>,
}

impl<'a> Out<'a> {
    fn new(
        flows: &'a mut Option<crate::stage::flows::FlowTable>,
        sink: &'a mut Option<FileSink>,
        lim: &'a MemberLimits,
        o: &'a mut MemberOutcome,
        cutoff: &'a mut Option<crate::cutoff::Cutoff>,
    ) -> Self {
        Self {
            flows,
            sink,
            lim,
            o,
            cutoff,
        }
    }

    fn deliver(&mut self, p: &crate::packet::Packet<'_>) {
        deliver_cut(p, self.flows, self.sink, self.lim, self.o, self.cutoff);
    }
}

/// Drains the pipes' live packets: through the reorder when the member writes a file (a
/// file is written in time order: see there), straight to the app otherwise. Whether any
/// came or went out.
fn drain_live(rx: &mut [PipeRx], order: &mut Option<Reorder>, out: &mut Out<'_>) -> bool {
    let mut got = false;
    match order.as_mut() {
        Some(ro) => {
            got |= ro.take(rx);
            if ro.due() {
                got |= ro.release(false, |p| out.deliver(p)) > 0;
                out.o.out_of_order = ro.late();
            }
        }
        None => {
            for r in rx.iter_mut() {
                got |= r.drain(|p, _hash| out.deliver(p)) > 0;
            }
        }
    }
    got
}

/// Every producer has ended: what the last of them pushed between the member's drain and
/// their exit, and all the reorder holds, go out; how many did.
fn drain_last(rx: &mut [PipeRx], order: &mut Option<Reorder>, out: &mut Out<'_>) -> usize {
    let mut rest = 0;
    match order.as_mut() {
        Some(ro) => {
            ro.take(rx);
            rest += ro.release(true, |p| out.deliver(p));
            out.o.out_of_order = ro.late();
        }
        None => {
            for r in rx.iter_mut() {
                rest += r.drain(|p, _| out.deliver(p));
            }
        }
    }
    rest
}

/// Going idle: flow records waiting in an IPFIX message go out now, with the drops so far.
fn going_idle(
    flows: &mut Option<crate::stage::flows::FlowTable>,
    lim: &MemberLimits,
    o: &MemberOutcome,
) {
    if let Some(t) = flows.as_mut() {
        let piped = lim
            .live
            .as_ref()
            .map_or(0, |l| l.stage_full.load(Ordering::Relaxed));
        t.set_dropped(o.app_drops + o.disk_drops + piped);
        t.flush_export();
    }
}

/// A member's end: its flow records' last message and its file closed, their losses and
/// errors counted, the final counters published.
fn end(
    mut o: MemberOutcome,
    flows: Option<crate::stage::flows::FlowTable>,
    sink: Option<FileSink>,
    lim: &MemberLimits,
) -> MemberOutcome {
    if let Some(mut t) = flows {
        // The final drop count goes into the exporter's last options record.
        let piped = lim
            .live
            .as_ref()
            .map_or(0, |l| l.stage_full.load(Ordering::Relaxed));
        t.set_dropped(o.app_drops + o.disk_drops + piped);
        match t.finish() {
            Ok(st) => o.flows = Some(st),
            Err(e) => o.error = Some(format!("writing flow records: {e}")),
        }
    }
    let files = sink.as_ref().map(FileSink::files_begun);
    if let Some(s) = sink {
        let done = s.finish(&[]);
        o.files = done.files;
        o.delivered -= done.lost.min(o.delivered);
        o.disk_drops += done.lost;
        if let Some(e) = done.error {
            o.error = Some(e);
        }
        o.notes.extend(done.notes);
    }
    o.publish(lim, None);
    if let (Some(l), Some(n)) = (&lim.live, files) {
        // Relaxed: as in `publish`.
        l.files.store(n, Ordering::Relaxed);
    }
    o
}
