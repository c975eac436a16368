//! Ending captures: the housekeeping tick that ends captures at their count, duration or
//! failure, closes their files off the manager's lock and records how they ended; the
//! refill of workers kept ready; the daemon's shutdown.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use corecap_engine::capture::Capture;
use corecap_engine::control::Detached;
use corecap_engine::stage::member::{MemberLive, MemberOutcome};
use corecap_engine::standby::Standby;

use super::records::{display, file_bytes};
use super::{
    secs, us_since, wall_ns, Base, Ended, Entry, Inner, Manager, Runner, HISTORY, REFILL_QUIET,
    SPARE_IFACES,
};
use crate::api::{OutputKind, State};
use crate::stats::BaseCounters;

/// The slow part of ending a capture (waiting for workers, draining, closing files),
/// done without the manager's lock so other requests go on.
#[derive(Debug)]
pub(super) enum EndWork {
    Detached(Detached, Arc<MemberLive>),
    Spawn(Box<Capture>),
    Failed(String),
}

/// A capture on its way out.
#[derive(Debug)]
pub(super) struct Ending {
    id: String,
    state: State,
    reason: String,
    work: EndWork,
}

/// What ending it gave.
#[derive(Debug)]
pub(super) enum EndResult {
    Member(Box<MemberOutcome>, u64),
    Summary(Box<corecap_engine::capture::Summary>),
    Failed(String),
}

impl Ending {
    pub(super) fn finish(self) -> (String, State, String, EndResult) {
        let r = match self.work {
            EndWork::Detached(d, live) => {
                let o = d.wait();
                // Final once the stage thread has ended: every pipe end was dropped.
                EndResult::Member(Box::new(o), live.stage_full.load(Ordering::Relaxed))
            }
            EndWork::Spawn(cap) => EndResult::Summary(Box::new(cap.finish())),
            EndWork::Failed(m) => EndResult::Failed(m),
        };
        (self.id, self.state, self.reason, r)
    }
}

pub(super) fn set_from_snapshot(e: &mut Entry, s: &corecap_engine::stats::ledger::Snapshot) {
    e.view.packets = s.packets;
    e.view.bytes = s.bytes;
    e.view.drops.kernel = s.kernel_drops;
    e.view.drops.app = s.app_drops;
    e.view.drops.disk = s.disk_drops;
    if s.first_ts_ns != 0 {
        e.view.set_first_packet(us_since(s.first_ts_ns, e.since_ns));
    }
}

/// Updates a running capture's counters in its view.
pub(super) fn refresh(e: &mut Entry) {
    match &e.runner {
        Runner::Attach { live, .. } => {
            // Relaxed: statistics published by the stage thread.
            e.view.packets = live.packets.load(Ordering::Relaxed);
            e.view.bytes = live.bytes.load(Ordering::Relaxed);
            e.view.drops.stage_full = live.stage_full.load(Ordering::Relaxed);
            e.view.drops.app = live.app_drops.load(Ordering::Relaxed);
            e.view.drops.disk = live.disk_drops.load(Ordering::Relaxed);
            let first = live.first_ts_ns.load(Ordering::Relaxed);
            // A capture that starts in the past has no lag: its first packet is older.
            if first != 0 && e.view.since.is_none() {
                e.view.set_first_packet(us_since(first, e.since_ns));
            }
            if e.view.since.is_some() {
                let recorded = live.recorded.load(Ordering::Relaxed);
                e.view.recorded = Some(recorded);
                e.view.live = Some(e.view.packets.saturating_sub(recorded));
            }
        }
        Runner::Spawn(cap) => {
            let mut t = corecap_engine::stats::ledger::Snapshot::default();
            for s in cap.snapshot() {
                t += s;
            }
            set_from_snapshot(e, &t);
        }
        Runner::Ending | Runner::Ended => return,
    }
    if e.view.since.is_none() {
        e.view
            .set_armed_until(us_since(wall_ns(SystemTime::now()), e.since_ns));
    }
    e.view.file_bytes = file_bytes(&e.files);
}

impl Manager {
    /// Ends captures outside the lock, then records how they ended.
    pub(super) fn end_all(&self, endings: Vec<Ending>) {
        let done: Vec<_> = endings.into_iter().map(Ending::finish).collect();
        let mut flows = Vec::new();
        {
            let mut g = self.lock();
            for d in done {
                let id = d.0.clone();
                g.record(d);
                // Capture files join the byte budget as their disk writer closes them;
                // flow record files are written apart, and join it here, once ended.
                if let Some(e) = g.entries.iter().find(|e| e.view.id == id) {
                    if e.view.output == OutputKind::Flows {
                        flows.extend(e.files.iter().cloned());
                    }
                }
            }
        }
        self.save();
        if let Some(r) = &self.cfg.retention {
            for f in flows {
                if let Ok(m) = std::fs::metadata(&f) {
                    r.add(f, m.len(), None);
                }
            }
        }
    }

    /// Housekeeping, called often: ends captures whose count or duration is reached,
    /// whose base capture is gone, or that would overrun the spool quota.
    pub fn tick(&self) {
        let endings = self.tick_locked();
        if !endings.is_empty() {
            self.end_all(endings);
        }
    }

    /// Makes one missing standby (a spare socket, then its parked thread pinned to the
    /// core a spawn would take now), outside the lock: making a ring takes the kernel
    /// milliseconds. Waits until no capture has spawned for 20 ms. Returns whether one
    /// was made. Called by the refill thread
    /// ([`Manager::refill_loop`]), never on a request's path.
    pub fn refill(&self) -> bool {
        let want = {
            let mut g = self.lock();
            self.release_idle_spares(&mut g);
            let now = Instant::now();
            if g.spare_used
                .values()
                .any(|t| now.duration_since(*t) < REFILL_QUIET)
            {
                return false;
            }
            let iface = g
                .spares
                .iter()
                .find(|(_, v)| v.len() < self.cfg.spares)
                .map(|(i, _)| i.clone());
            match iface {
                Some(i) => {
                    let busy = g.worker_cpus();
                    let cpu = g.cores.pick(&i, &busy, true).map(|(c, _)| c);
                    Some((i, cpu))
                }
                None => None,
            }
        };
        let Some((iface, cpu)) = want else {
            return false;
        };
        let made = cpu.map_err(|e| e.to_string()).and_then(|cpu| {
            let spare = corecap_linux::netdev::ifindex(&iface)
                .and_then(|ix| self.opener.spare(ix, self.cfg.ring))
                .map_err(|e| e.to_string())?;
            let s = Standby::start(cpu, spare).map_err(|e| e.to_string())?;
            if let Some(p) = self.cfg.spawn_priority {
                self.opener.fifo(s.tid(), p).map_err(|e| e.to_string())?;
            }
            Ok(s)
        });
        let mut g = self.lock();
        match made {
            Ok(s) => {
                // An interface whose spares were released meanwhile does not take it.
                if let Some(v) = g.spares.get_mut(&iface) {
                    v.push(s);
                }
                true
            }
            // An interface that went away, no memory for a ring, no real-time priority:
            // stop keeping standbys for it; spawned captures start their own worker.
            Err(e) => {
                if g.spares.remove(&iface).is_some() {
                    eprintln!("corecap: no workers kept ready on {iface}: {e}");
                }
                false
            }
        }
    }

    /// The refill thread's loop, until `stop`: [`Manager::refill`] while there is work,
    /// else a 2 ms nap. It runs on the allowed CPUs that run no base worker, when any.
    pub fn refill_loop(&self, stop: &std::sync::atomic::AtomicBool) {
        let quiet: Vec<u32> = {
            let g = self.lock();
            let busy: Vec<u32> = g
                .bases
                .iter()
                .flat_map(|b| b.cap.workers.iter().filter_map(|w| w.cpu))
                .collect();
            g.cores
                .allowed
                .iter()
                .copied()
                .filter(|c| !busy.contains(c))
                .collect()
        };
        if !quiet.is_empty() {
            let _ = corecap_linux::affinity::pin_current_thread_to(&quiet);
        }
        // Relaxed: a flag polled between refills.
        while !stop.load(Ordering::Relaxed) {
            if !self.refill() {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }

    /// Closes the spares of interfaces without a base whose last spawn is older than
    /// `spare_idle`, and of the least recently used beyond [`SPARE_IFACES`] of them.
    pub(super) fn release_idle_spares(&self, g: &mut Inner) {
        let now = Instant::now();
        let based: Vec<String> = g.bases.iter().map(|b| b.iface.clone()).collect();
        let mut used: Vec<(Instant, String)> = g
            .spare_used
            .iter()
            .filter(|(i, _)| !based.contains(i))
            .map(|(i, t)| (*t, i.clone()))
            .collect();
        used.sort();
        let over = used.len().saturating_sub(SPARE_IFACES);
        for (k, (t, iface)) in used.into_iter().enumerate() {
            if k < over || now.duration_since(t) >= self.cfg.spare_idle {
                g.spares.remove(&iface);
                g.spare_used.remove(&iface);
            }
        }
    }

    /// One look at every running capture under the lock: the spool's usage (at most every
    /// 200 ms), each capture that reached its end (count, duration, quota, a failed file,
    /// its base gone) begun to end, and the ended ones past [`HISTORY`] forgotten.
    pub(super) fn tick_locked(&self) -> Vec<Ending> {
        let mut endings = Vec::new();
        let mut guard = self.lock();
        let g = &mut *guard;
        let now = Instant::now();
        let quota_due = g
            .quota_checked
            .is_none_or(|t| now.duration_since(t) >= Duration::from_millis(200));
        if quota_due {
            g.quota_checked = Some(now);
            g.spool_bytes = self.cfg.spool.usage();
        }
        let over_quota = self.cfg.spool.quota.filter(|q| g.spool_bytes > *q);
        let dead_bases: Vec<String> = g
            .bases
            .iter()
            .filter(|b| b.cap.done())
            .map(|b| b.iface.clone())
            .collect();
        for i in 0..g.entries.len() {
            if g.entries[i].view.state != State::Running
                || !matches!(
                    g.entries[i].runner,
                    Runner::Attach { .. } | Runner::Spawn(_)
                )
            {
                continue;
            }
            let e = &mut g.entries[i];
            refresh(e);
            let ended = end_reached(e, &dead_bases, now, over_quota);
            if let Some(lag) = e.view.lag_us.filter(|_| !e.lag_observed) {
                e.lag_observed = true;
                let mode = e.view.mode.name();
                g.lag.entry(mode).or_default().observe(lag / 1e6);
            }
            if let Some((state, reason)) = ended {
                endings.extend(g.begin_end(i, state, reason));
            }
        }
        forget_past_history(g);
        endings
    }

    /// Stops every capture (files closed validly), then the base captures. Returns the
    /// final views and what the base captures and their recording did, to the end.
    pub fn shutdown(&self) -> Ended {
        let (endings, bases) = {
            let mut g = self.lock();
            g.closing = true;
            let mut endings = Vec::new();
            for i in 0..g.entries.len() {
                endings.extend(g.begin_end(i, State::Stopped, "the daemon stopped".into()));
            }
            (endings, std::mem::take(&mut g.bases))
        };
        self.end_all(endings);
        // Their counters outlive them: read once every thread that writes them has ended.
        let counters: Vec<BaseCounters> = bases.iter().map(base_counters).collect();
        for b in bases {
            let _ = b.cap.finish();
        }
        let mut stats = self.read_stats(&counters);
        let g = self.lock();
        stats.captures_running = 0;
        Ended {
            captures: g.entries.iter().map(|e| e.view.clone()).collect(),
            stats,
        }
    }
}

impl Inner {
    /// Starts ending capture `i` (if it runs): detaches it from its base, or takes its
    /// capture out, for [`Ending::finish`] outside the lock.
    pub(super) fn begin_end(&mut self, i: usize, state: State, reason: String) -> Option<Ending> {
        let e = &mut self.entries[i];
        if e.view.state != State::Running {
            return None;
        }
        refresh(e);
        let work = match std::mem::replace(&mut e.runner, Runner::Ending) {
            Runner::Attach {
                iface,
                handle,
                live,
            } => match self.bases.iter_mut().find(|b| b.iface == iface) {
                Some(b) => match b.cap.detach(handle) {
                    Ok(d) => EndWork::Detached(d, live),
                    Err(x) => EndWork::Failed(format!("detaching: {x}")),
                },
                None => EndWork::Failed(format!("the base capture on {iface} is gone")),
            },
            Runner::Spawn(cap) => EndWork::Spawn(cap),
            r @ (Runner::Ending | Runner::Ended) => {
                e.runner = r;
                return None;
            }
        };
        Some(Ending {
            id: e.view.id.clone(),
            state,
            reason,
            work,
        })
    }

    /// Records how a capture ended.
    pub(super) fn record(&mut self, (id, state, reason, r): (String, State, String, EndResult)) {
        let Some(e) = self.entries.iter_mut().find(|e| e.view.id == id) else {
            return;
        };
        e.runner = Runner::Ended;
        let (mut state, mut reason) = (state, reason);
        match r {
            EndResult::Member(o, stage_full) => {
                e.view.packets = o.delivered;
                e.view.bytes = o.bytes;
                e.view.drops.app = o.app_drops;
                e.view.drops.disk = o.disk_drops;
                e.view.drops.stage_full = stage_full;
                if o.first_ts_ns != 0 && e.view.since.is_none() {
                    e.view.set_first_packet(us_since(o.first_ts_ns, e.since_ns));
                }
                if e.view.since.is_some() {
                    e.view.recorded = Some(o.recorded);
                    e.view.live = Some(o.delivered.saturating_sub(o.recorded));
                    e.view.notes.extend(o.notes.iter().cloned());
                    if o.hold_drops > 0 {
                        e.view.notes.push(format!(
                            "{} live packets lost while the recorded ones were read (the hold buffer was full)",
                            o.hold_drops
                        ));
                    }
                }
                if let Some(x) = o.error {
                    (state, reason) = (State::Failed, x);
                }
            }
            EndResult::Summary(s) => {
                set_from_snapshot(e, &s.total);
                if let Some(x) = s.errors.first() {
                    (state, reason) = (State::Failed, x.clone());
                }
                if !s.files.is_empty() {
                    e.files = s.files.clone();
                }
            }
            EndResult::Failed(x) => (state, reason) = (State::Failed, x),
        }
        e.view.file_bytes = file_bytes(&e.files);
        e.view.files = display(&e.files);
        e.view.path = e.view.files.first().cloned();
        e.view.state = state;
        e.view.reason = Some(reason);
        let end_ns = wall_ns(SystemTime::now());
        e.view.ended_at = Some(secs(end_ns));
        if e.view.since.is_none() {
            e.view.set_armed_until(us_since(end_ns, e.since_ns));
        }
        self.generation += 1;
        if let Some(lag) = e.view.lag_us.filter(|_| !e.lag_observed) {
            e.lag_observed = true;
            self.lag
                .entry(e.view.mode.name())
                .or_default()
                .observe(lag / 1e6);
        }
    }
}

/// The counters of a base capture and of its own stage members (the recording's).
pub(super) fn base_counters(b: &Base) -> BaseCounters {
    BaseCounters {
        interface: b.iface.clone(),
        workers: b.cap.counters.clone(),
        members: b.cap.members().into_iter().map(|(_, l)| l).collect(),
    }
}

/// The end a running capture reached, with its reason, or None while it goes on: its
/// base capture ended, its file failed, its count or duration reached, or the spool
/// over its quota (`over_quota`, a capture that writes files only).
fn end_reached(
    e: &Entry,
    dead_bases: &[String],
    now: Instant,
    over_quota: Option<u64>,
) -> Option<(State, String)> {
    let ended = match &e.runner {
        Runner::Attach { live, iface, .. } => {
            if dead_bases.contains(iface) {
                Some((State::Failed, format!("the base capture on {iface} ended")))
            } else if live.failed.load(Ordering::Relaxed) {
                Some((State::Failed, "writing the capture file failed".to_string()))
            } else if live.done.load(Ordering::Relaxed) {
                Some((State::Done, "count reached".to_string()))
            } else {
                None
            }
        }
        Runner::Spawn(cap) => cap
            .done()
            .then(|| (State::Done, "count reached".to_string())),
        Runner::Ending | Runner::Ended => None,
    };
    ended
        .or_else(|| {
            e.deadline
                .is_some_and(|d| now >= d)
                .then(|| (State::Done, "duration reached".to_string()))
        })
        .or_else(|| {
            over_quota
                .filter(|_| e.view.output != OutputKind::Count)
                .map(|q| {
                    (
                        State::Stopped,
                        format!("the spool reached its quota of {q} bytes"),
                    )
                })
        })
}

/// Keeps the last [`HISTORY`] ended captures; the catalog forgets the others with its
/// next write.
fn forget_past_history(g: &mut Inner) {
    let ended = g
        .entries
        .iter()
        .filter(|e| e.view.state != State::Running)
        .count();
    if ended <= HISTORY {
        return;
    }
    g.generation += 1;
    let mut drop = ended - HISTORY;
    g.entries.retain(|e| {
        if drop > 0 && e.view.state != State::Running {
            drop -= 1;
            false
        } else {
            true
        }
    });
}
