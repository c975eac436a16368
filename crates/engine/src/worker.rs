//! A capture worker: pinned to its core, it owns one source and runs the apps to completion
//! on every packet of a block before handing the block back.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use corecap_linux::{error_chain, filter, RingPacket, RxRing};

use crate::cutoff::{Cutoff, Verdict};
use crate::packet::Packet;
use crate::sink::file::FileSink;
use crate::sink::merge::MergeHandle;
use crate::source::afpacket::{self, LiveSpec};
use crate::source::replay::{self, FileSpec};
use crate::source::ring_mark::RingMark;
use crate::source::ring_order::{self, RingOrder};
use crate::stats::ledger::{Snapshot, WorkerCounters};
use corecap_store::write::output::Refused;

/// What a worker reads.
#[derive(Debug)]
pub enum Source {
    /// A socket on a live interface.
    Live {
        /// How to open it.
        spec: LiveSpec,
        /// Interface index in the capture.
        if_id: u32,
        /// RX queue every packet of this worker comes from, when known.
        queue: Option<u32>,
        /// Framing of the interface's packets.
        link: corecap_wire::Link,
    },
    /// An AF_XDP socket on one RX queue.
    Xdp {
        /// The interface's shared program and map.
        setup: Arc<crate::source::afxdp::XdpSetup>,
        /// RX queue of this worker.
        queue: u32,
        /// Its socket among the queue's sockets (spread mode), else 0.
        slot: u32,
        /// Interface index in the capture.
        if_id: u32,
        /// Userspace filter (AF_XDP has no socket filter).
        filter: Option<crate::steer::filter::Program>,
        /// Snap length.
        snaplen: u32,
    },
    /// Files, split over the workers by flow hash.
    Files {
        /// The files, read in order.
        files: Vec<FileSpec>,
        /// Number of workers sharing them.
        workers: usize,
    },
}

/// What a worker does with each packet.
#[derive(Debug)]
pub enum App {
    /// Count only (like pfcount).
    Count,
    /// Write a file of its own.
    File(Box<FileSink>),
    /// Send to the merged output.
    Merge(MergeHandle),
    /// Steer to consumer groups on stage cores (pipeline mode).
    Steer(Box<crate::steer::group::Steer>),
}

/// State shared by all workers of a capture.
#[derive(Debug)]
pub struct Control {
    /// Set to stop the capture (signal, duration, count reached, error).
    pub stop: AtomicBool,
    /// Packets still allowed by `-c` (u64::MAX for no limit).
    pub remaining: AtomicU64,
    /// Workers whose source is open and joined.
    pub ready: AtomicU64,
}

impl Control {
    /// Control for a capture of at most `count` packets.
    pub fn new(count: Option<u64>) -> Self {
        Self {
            stop: AtomicBool::new(false),
            remaining: AtomicU64::new(count.unwrap_or(u64::MAX)),
            ready: AtomicU64::new(0),
        }
    }

    fn stopped(&self) -> bool {
        // Relaxed: a flag polled once per block; lateness only delays the stop.
        self.stop.load(Ordering::Relaxed)
    }

    /// Stopped by something other than `-c` running out (a signal, the duration, an
    /// error): what a packet already taken need not wait for.
    fn interrupted(&self) -> bool {
        self.stopped() && self.remaining.load(Ordering::Relaxed) != 0
    }

    /// Claims up to `n` packets from the `-c` budget; stops the capture when it runs out.
    fn claim(&self, n: u64) -> u64 {
        let mut cur = self.remaining.load(Ordering::Relaxed);
        loop {
            if cur == u64::MAX {
                return n;
            }
            let take = cur.min(n);
            // Relaxed: the budget is a counter; no other memory depends on it.
            match self.remaining.compare_exchange_weak(
                cur,
                cur - take,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    if cur - take == 0 {
                        // Release: pairs with the Acquire load of `stop` in
                        // `Capture::wait_ready`, which then sees the budget at 0.
                        self.stop.store(true, Ordering::Release);
                    }
                    return take;
                }
                Err(now) => cur = now,
            }
        }
    }
}

/// A worker as configured.
#[derive(Debug)]
pub struct Worker {
    /// Worker index.
    pub id: usize,
    /// CPU to pin to.
    pub cpu: Option<u32>,
    /// Its source.
    pub source: Source,
    /// Its app.
    pub app: App,
    /// The per-flow cutoff of what it records (`--flow-cutoff`), when asked for.
    pub cutoff: Option<Cutoff>,
}

/// What a worker hands back when it ends.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Final counters.
    pub snapshot: Snapshot,
    /// Files written, when the app wrote its own.
    pub files: Vec<std::path::PathBuf>,
    /// The error that ended the worker early, if any.
    pub error: Option<String>,
    /// Steering counters, in pipeline mode.
    pub steer: Option<crate::steer::group::SteerCounts>,
    /// Notes for the user (a filesystem without direct I/O).
    pub notes: Vec<String>,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

struct Run<'a> {
    ctl: &'a Control,
    counters: &'a WorkerCounters,
    app: App,
    s: Snapshot,
    /// A live ring written to a file of the worker's own is written in time order (see
    /// [`ring_order`]); other apps take blocks as they come (the merge and the stages
    /// order what they write themselves).
    order: Option<RingOrder>,
    /// Leaves the tail of long flows out of what the app records (see [`crate::cutoff`]).
    cutoff: Option<Cutoff>,
    /// The newest timestamp of a packet read (for the watermark, [`RingMark`]).
    newest_ns: u64,
}

impl Run<'_> {
    /// For a source that can wait (files): while the file's disk writer is behind, waits
    /// for it rather than dropping, as `tcpdump -r -w` does, until the capture is stopped
    /// (not by `-c`'s last packet) or the file fails (then the packet is counted as a
    /// `disk` drop by `deliver`).
    #[inline]
    fn wait_for_disk(&mut self) {
        if let App::File(f) = &mut self.app {
            let ctl = self.ctl;
            // A stop gives the wait up (the packet is counted a `disk` drop), but not the
            // stop that this packet made by being the last one `-c` allows: it was taken.
            f.wait_for_disk(|| ctl.interrupted());
        }
    }

    /// Delivers one packet to the app. Returns false if the app refused it.
    fn deliver(&mut self, p: &Packet<'_>) {
        self.newest_ns = self.newest_ns.max(p.ts_ns);
        // Read once, for the cutoff and the file's index and sessions.
        let read;
        let parsed = match self.cutoff.as_mut() {
            Some(c) => {
                read = p.link.transport(p.data, p.vlan).ok();
                if c.judge_parsed(p, read.as_ref()) == Verdict::Cut {
                    self.s.cut_packets += 1;
                    self.s.cut_bytes +=
                        u64::from(p.wire_len) + if p.vlan.is_some() { 4 } else { 0 };
                    // Seen, not kept: its connection's record in the file counts it.
                    match &mut self.app {
                        App::File(f) => f.count_cut(p, read.as_ref()),
                        App::Merge(m) => m.push_cut(p),
                        App::Count | App::Steer(_) => {}
                    }
                    return;
                }
                read.as_ref()
            }
            None => None,
        };
        let ok = match &mut self.app {
            App::Count => true,
            App::File(f) => match f.write_parsed(p, parsed) {
                Ok(()) => true,
                Err(Refused::Limit) => {
                    // The file has all it was asked to hold: the capture ends.
                    self.s.stop_drops += 1;
                    self.ctl.stop.store(true, Ordering::Relaxed);
                    return;
                }
                Err(why) => {
                    self.s.disk_drops += 1;
                    if why == Refused::Failed {
                        // A write failed: the capture ends, every other file closed valid.
                        self.ctl.stop.store(true, Ordering::Relaxed);
                    }
                    return;
                }
            },
            App::Merge(m) => {
                m.push(p);
                true
            }
            App::Steer(st) => {
                st.packet(p);
                true
            }
        };
        if ok {
            if self.s.packets == 0 {
                self.s.first_ts_ns = p.ts_ns;
            }
            self.s.packets += 1;
            self.s.bytes += u64::from(p.wire_len) + if p.vlan.is_some() { 4 } else { 0 };
        } else {
            self.s.app_drops += 1;
        }
    }

    /// Before a block's packets: steering takes the current matrix and any joins or
    /// leaves. Done when the block is already there, not before waiting for it, so a
    /// consumer that joined during the wait gets this block.
    fn begin_batch(&mut self) {
        if let App::Steer(st) = &mut self.app {
            st.refresh();
        }
    }

    /// Hands the app what the batch gave it, with the worker's watermark: every packet up
    /// to that time that it will send is sent (see [`RingMark`]).
    fn end_batch(&mut self, watermark: u64) {
        // The merge thread is gone only after a failure: stop capturing.
        let failed = match &mut self.app {
            App::Merge(m) => !m.send(watermark),
            App::Steer(st) => {
                st.flush(watermark);
                false
            }
            // A failed write (or a stream's reader gone) ends the capture, idle or not.
            App::File(f) => {
                f.hand_over();
                f.failed()
            }
            App::Count => false,
        };
        if failed {
            self.ctl.stop.store(true, Ordering::Relaxed);
        }
        if let Some(c) = &self.cutoff {
            self.s.cut_evictions = c.evictions();
        }
        self.counters.publish(&self.s);
    }

    /// Runs every packet of a block through the app (or counts it as a stop drop).
    fn block(&mut self, ring: &mut RxRing, src: Src) -> bool {
        let Some(mut block) = ring.next_block() else {
            return false;
        };
        self.begin_batch();
        let n = u64::from(block.len());
        let allowed = self.ctl.claim(n);
        let mut i = 0u64;
        let mut order = self.order.take();
        if let Some(o) = order.as_mut() {
            o.begin();
        }
        let mut packets = block.packets();
        while let Some((off, rp)) = packets.next_at() {
            i += 1;
            if i > allowed {
                self.s.stop_drops += 1;
                continue;
            }
            match order.as_mut() {
                Some(o) => o.add(ring_order::ts_ns(&rp), off),
                None => self.deliver(&packet(&rp, src)),
            }
        }
        // A block whose packet walk stopped early still had `n` packets counted by the kernel.
        if i < n {
            self.s.app_drops += n - i;
        }
        if let Some(o) = order.as_mut() {
            let (kept, cur) = (block.kept_packets(), block.packets());
            let keep = o.write_due(
                kept.as_ref().map(|k| |off| k.at(off)),
                |off| cur.at(off),
                |rp| self.deliver_parsed(rp, src),
            );
            if keep {
                block.keep();
            }
        }
        self.order = order;
        drop(block);
        true
    }

    /// Writes what is left of the ring's kept block and gives it back (see
    /// [`ring_order`]).
    fn flush_kept(&mut self, ring: &mut RxRing, src: Src) {
        if let Some(mut o) = self.order.take() {
            let kept = ring.kept_packets();
            o.flush(kept.as_ref().map(|k| |off| k.at(off)), |rp| {
                self.deliver_parsed(rp, src)
            });
            self.order = Some(o);
        }
        ring.release_kept();
    }

    /// Delivers a packet found again by its offset, or counts it as an `app` drop when its
    /// block no longer parses there.
    fn deliver_parsed(&mut self, rp: Option<RingPacket<'_>>, src: Src) {
        match rp {
            Some(rp) => self.deliver(&packet(&rp, src)),
            None => self.s.app_drops += 1,
        }
    }
}

/// Where a ring's packets come from: the capture's interface index, the RX queue, the
/// link's framing.
type Src = (u32, Option<u32>, corecap_wire::Link);

/// The packet of a ring slot, as the apps take it.
fn packet<'p>(rp: &RingPacket<'p>, (iface, queue, link): Src) -> Packet<'p> {
    Packet {
        ts_ns: ring_order::ts_ns(rp),
        data: rp.data,
        wire_len: rp.len,
        iface,
        queue,
        vlan: rp.vlan(),
        link,
    }
}

/// Runs a worker to its end.
pub fn run(w: Worker, ctl: Arc<Control>, counters: Arc<WorkerCounters>) -> Outcome {
    if let Some(cpu) = w.cpu {
        if let Err(e) = corecap_linux::affinity::pin_current_thread(cpu) {
            ctl.ready.fetch_add(1, Ordering::Release);
            return Outcome {
                snapshot: Snapshot::default(),
                files: vec![],
                error: Some(format!("worker {}: {}", w.id, error_chain(&e))),
                steer: None,
                notes: vec![],
            };
        }
    }
    let order = (matches!(w.app, App::File(_)) && matches!(w.source, Source::Live { .. }))
        .then(RingOrder::default);
    let mut run = Run {
        ctl: &ctl,
        counters: &counters,
        app: w.app,
        s: Snapshot::default(),
        order,
        cutoff: w.cutoff,
        newest_ns: 0,
    };
    let error = match w.source {
        Source::Live {
            spec,
            if_id,
            queue,
            link,
        } => live(&mut run, &spec, if_id, queue, link),
        Source::Xdp {
            setup,
            queue,
            slot,
            if_id,
            filter,
            snaplen,
        } => xdp(
            &mut run,
            &setup,
            (queue, slot),
            if_id,
            filter.as_ref(),
            snaplen,
        ),
        Source::Files { files, workers } => {
            ctl.ready.fetch_add(1, Ordering::Release);
            files_loop(&mut run, &files, w.id, workers)
        }
    };
    counters.publish(&run.s);
    run.finish(error)
}

impl Run<'_> {
    /// Ends the app once the source is done: a steering worker's last packets go out, a
    /// file is closed (packets a failed write cut from it become `disk` drops), a merge
    /// is told. Returns the worker's outcome, `error` first among its errors.
    fn finish(mut self, mut error: Option<String>) -> Outcome {
        let mut files = vec![];
        let mut steer = None;
        let mut notes = Vec::new();
        match self.app {
            App::Steer(mut st) => {
                // The worker's last packets; its pipes then close (a watermark of u64::MAX).
                st.flush(u64::MAX);
                steer = Some(st.counts.clone());
            }
            App::File(f) => {
                let stats = [(self.s.kernel_packets, self.s.kernel_drops)];
                let done = f.finish(&stats);
                files = done.files;
                // Packets cut from a file after a failed write were not delivered after all.
                self.s.packets -= done.lost.min(self.s.packets);
                self.s.disk_drops += done.lost;
                if let Some(e) = done.error {
                    error.get_or_insert(e);
                }
                notes = done.notes;
                self.counters.publish(&self.s);
            }
            App::Merge(m) => m.finish(),
            App::Count => {}
        }
        Outcome {
            snapshot: self.s,
            files,
            error,
            steer,
            notes,
        }
    }
}

/// Counts the worker's source as set up, opened or not; a source that did not open stops
/// the capture, and its error (with the kernel's message) is the worker's.
fn opened<T>(run: &Run<'_>, source: corecap_linux::Result<T>) -> Result<T, String> {
    run.ctl.ready.fetch_add(1, Ordering::Release);
    source.map_err(|e| {
        run.ctl.stop.store(true, Ordering::Relaxed);
        error_chain(&e)
    })
}

fn live(
    run: &mut Run<'_>,
    spec: &LiveSpec,
    if_id: u32,
    queue: Option<u32>,
    link: corecap_wire::Link,
) -> Option<String> {
    let ring = afpacket::open(spec, &|| run.ctl.stopped());
    let mut ring = match opened(run, ring) {
        Ok(r) => r,
        Err(e) => return Some(e),
    };
    // The socket is open: this thread needs no capability from here on.
    let _ = corecap_linux::privilege::drop_thread_capabilities();
    let tov = spec.ring.retire_tov_ms.max(1) as i32;
    let mut last_stats = Instant::now();
    let take_stats = |run: &mut Run<'_>, ring: &RxRing| {
        if let Ok(k) = ring.socket().take_stats() {
            run.s.kernel_packets += k.packets;
            run.s.kernel_drops += k.drops;
            run.s.freezes += k.freezes;
        }
    };
    let mut mark = RingMark::new(spec.ring.retire_tov_ms);
    while !run.ctl.stopped() {
        // Each time is taken before the look at the ring that found it empty.
        let t = now_ns();
        let got = run.block(&mut ring, (if_id, queue, link)) || {
            mark.empty_at(t);
            ring.wait(100);
            let t = now_ns();
            run.block(&mut ring, (if_id, queue, link)) || {
                mark.empty_at(t);
                false
            }
        };
        if !got {
            // Idle: the kept block is written, and joins and leaves are still taken, so a
            // leaving consumer is let go.
            run.flush_kept(&mut ring, (if_id, queue, link));
            run.begin_batch();
        }
        mark.packet(run.newest_ns);
        run.end_batch(mark.get());
        if last_stats.elapsed() >= Duration::from_millis(500) {
            take_stats(run, &ring);
            run.counters.publish(&run.s);
            last_stats = Instant::now();
        }
    }
    // Drain: refuse new packets, then read every block the kernel still closes, until each
    // packet it counted is delivered or counted as dropped.
    let _ = ring.socket().attach_filter(&filter::reject_all());
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        while run.block(&mut ring, (if_id, queue, link)) {}
        run.flush_kept(&mut ring, (if_id, queue, link));
        take_stats(run, &ring);
        let accounted = run.s.packets
            + run.s.kernel_drops
            + run.s.app_drops
            + run.s.disk_drops
            + run.s.stop_drops
            + run.s.cut_packets;
        if accounted >= run.s.kernel_packets && !ring.wait(3 * tov + 10) {
            break;
        }
        if Instant::now() > deadline {
            break;
        }
        ring.wait(tov);
    }
    run.end_batch(now_ns());
    None
}

fn xdp(
    run: &mut Run<'_>,
    setup: &crate::source::afxdp::XdpSetup,
    (queue, slot): (u32, u32),
    if_id: u32,
    filter: Option<&crate::steer::filter::Program>,
    snaplen: u32,
) -> Option<String> {
    let sock = setup.open(queue, slot, &|| run.ctl.stopped());
    let mut sock = match opened(run, sock) {
        Ok(s) => s,
        Err(e) => return Some(e),
    };
    let _ = corecap_linux::privilege::drop_thread_capabilities();
    let mut frames = Vec::with_capacity(256);
    let mut passed = 0u64; // frames that passed the filter: the source's count
    let mut last_stats = Instant::now();
    let fold = |run: &mut Run<'_>, sock: &corecap_linux::xsk::XskSocket, passed: u64| {
        if let Ok(k) = sock.stats() {
            // XDP_STATISTICS is cumulative: set, don't add.
            run.s.kernel_drops = k.rx_dropped + k.rx_ring_full;
        }
        run.s.kernel_packets = passed + run.s.kernel_drops;
    };
    let rx = XdpFrames {
        filter,
        // AF_XDP frames carry no VLAN tag or protocol metadata for the filter.
        meta: crate::steer::filter::Meta {
            vlan: None,
            queue,
            protocol: 0,
        },
        snaplen,
        queue,
        if_id,
    };
    let mut draining = false;
    loop {
        draining |= run.ctl.stopped();
        // The watermark: every frame received from here on is stamped later.
        let mark = now_ns();
        let n = sock.receive(&mut frames, 256);
        if n == 0 {
            if draining {
                break;
            }
            if !sock.wait(100) {
                run.begin_batch();
            }
        } else {
            run.begin_batch();
            passed += rx.deliver(run, &sock, &frames);
            sock.release(&frames);
        }
        let stats_due = last_stats.elapsed() >= Duration::from_millis(500);
        if stats_due {
            fold(run, &sock, passed);
            last_stats = Instant::now();
        } else if n > 0 {
            run.s.kernel_packets = passed + run.s.kernel_drops;
        }
        run.end_batch(mark);
    }
    fold(run, &sock, passed);
    run.end_batch(now_ns());
    None
}

/// What an AF_XDP socket's frames become packets with: its filter (run here: the frames
/// come before any socket filter), the filter's metadata, the snap length, and where they
/// came from.
struct XdpFrames<'f> {
    filter: Option<&'f crate::steer::filter::Program>,
    meta: crate::steer::filter::Meta,
    snaplen: u32,
    queue: u32,
    if_id: u32,
}

impl XdpFrames<'_> {
    /// Delivers the frames that pass the filter, stamped now, as far as the capture's
    /// count allows (the rest are `stop` drops). Returns how many passed the filter.
    fn deliver(
        &self,
        run: &mut Run<'_>,
        sock: &corecap_linux::xsk::XskSocket,
        frames: &[corecap_linux::xsk::XskFrame],
    ) -> u64 {
        let ts = now_ns();
        let allowed = run.ctl.claim(frames.len() as u64);
        let mut passed = 0u64;
        for f in frames {
            let data = sock.data(f);
            if let Some(p) = self.filter {
                if p.run(data, data.len() as u32, &self.meta) == 0 {
                    run.s.filtered += 1;
                    continue;
                }
            }
            passed += 1;
            if passed > allowed {
                run.s.stop_drops += 1;
                continue;
            }
            let p = Packet {
                ts_ns: ts,
                data: &data[..data.len().min(self.snaplen as usize)],
                wire_len: data.len() as u32,
                iface: self.if_id,
                queue: Some(self.queue),
                vlan: None,
                // AF_XDP runs on Ethernet devices only.
                link: corecap_wire::Link::Ethernet,
            };
            run.deliver(&p);
        }
        passed
    }
}

fn files_loop(run: &mut Run<'_>, files: &[FileSpec], me: usize, n: usize) -> Option<String> {
    let ctl = run.ctl;
    let stop = || ctl.stopped();
    let mut since = 0u32;
    for spec in files {
        let (taken, filtered, err) =
            replay::replay(spec, me, n, &stop, |ts, data, orig, queue, i| {
                let p = Packet {
                    ts_ns: ts,
                    data,
                    wire_len: orig,
                    iface: i.if_id,
                    queue,
                    vlan: None,
                    link: i.link,
                };
                run.s.kernel_packets += 1;
                if since == 0 {
                    run.begin_batch();
                }
                if run.ctl.claim(1) == 0 {
                    run.s.stop_drops += 1;
                    return false;
                }
                run.wait_for_disk();
                run.deliver(&p);
                since += 1;
                if since >= 256 {
                    since = 0;
                    run.end_batch(ts);
                }
                true
            });
        let _ = taken;
        run.s.filtered += filtered;
        if err.is_some() {
            run.end_batch(u64::MAX - 1);
            return err;
        }
        if run.ctl.stopped() {
            break;
        }
    }
    run.end_batch(u64::MAX - 1);
    None
}
