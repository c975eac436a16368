//! The manager: starts, watches and stops on-demand captures (paper 004).
//!
//! A capture is started in one of two ways:
//! - attach: a copy consumer of the base capture's workers, with its own filter, added
//!   to the steering matrix ([`Capture::attach`]); no socket or ring is made, so it takes
//!   packets from the workers' next block on;
//! - spawn: a capture of its own (one worker, one socket with the filter in the kernel)
//!   on a free core, as in paper 004. Its worker runs on a standby
//!   ([`corecap_engine::standby`]): a thread made ahead of need, parked and pinned, with
//!   a spare socket; the refill thread ([`Manager::refill_loop`]) remakes them.
//!
//! Either way the request's arrival time is the capture's start: packets stamped earlier
//! are not taken. A capture tells its setup (from the request to being armed), its time
//! armed before the first packet (the wait for traffic), and the time from the request to
//! the first packet, both together (paper 004's thread lag, under steady traffic).
//! The manager's state sits behind one mutex: it is the control plane, never touched by
//! the data path.
//!
//! What it knows of its captures outlives it: the spool's catalog (see [`crate::catalog`])
//! is written when a capture starts and when one ends, outside that mutex. A new manager
//! lists the captures of the earlier run as `finished`, `recovered` or `failed`, never as
//! running, and gives unnamed captures ids past every id that run gave.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use corecap_engine::capture::{
    Capture, CaptureConfig, CaptureError, CaptureErrorKind, Input, OutputConfig,
};
use corecap_engine::control::{AttachSpec, Attached, Detached};
use corecap_engine::sink::file::{Format, Rotation};
use corecap_engine::sink::ipfix::IpfixTarget;
use corecap_engine::stage::flows::FlowOutput;
use corecap_engine::stage::member::{MemberLimits, MemberLive, MemberOutcome};
use corecap_engine::stage::pipe::Transport;
use corecap_engine::standby::Standby;
use corecap_engine::steer::filter::compile_filter;
use corecap_engine::steer::group::{GroupKind, GroupSpec};
use corecap_linux::error_chain;
use corecap_store::names::suffixed_path;
use corecap_store::sealed::{Cipher, KeyFile, SealConfig};

use crate::api::{CaptureView, Drops, Mode, OutputKind, StartRequest, State};
use crate::catalog::{self, Catalog, Record, Renamed};
use crate::cores::Cores;
use crate::metrics::LagHistogram;
use crate::opener::Opener;
use crate::spool::Spool;
use crate::stats::{BaseCounters, Deleted, Stats};

/// How the daemon runs.
#[derive(Debug)]
pub struct Config {
    /// Where capture files go, and its quota.
    pub spool: Spool,
    /// Most captures running at once.
    pub max_captures: usize,
    /// Key for `"encrypt"` requests.
    pub key: Option<Arc<KeyFile>>,
    /// Let a spawned worker share a core when none is free.
    pub share_cores: bool,
    /// CPUs for attached consumers' stage threads (round robin); empty: any allowed CPU.
    pub stage_cpus: Vec<u32>,
    /// Ring geometry of spawned workers.
    pub ring: corecap_linux::RingConfig,
    /// Workers kept ready per interface for spawn mode: a parked thread each, pinned, with
    /// a spare socket (ring made, every packet refused).
    pub spares: usize,
    /// SCHED_FIFO priority of spawned workers (`serve --spawn-priority fifo:N`), set by
    /// the opener thread (CAP_SYS_NICE) on each standby thread when it is made.
    pub spawn_priority: Option<i32>,
    /// How long an interface without a base keeps its spares after its last spawn.
    pub spare_idle: Duration,
    /// Write capture files with direct I/O where the filesystem allows it.
    pub direct: bool,
    /// Write each capture file's index beside it.
    pub index: bool,
    /// Sessions kept beside each on-demand capture's file (a small table: captures are
    /// many); None: no sessions file.
    pub sessions: Option<corecap_store::session::SessionConfig>,
    /// Packets older than this are on disk (`--flush-interval`).
    pub flush: Option<Duration>,
    /// Keep the newest whole capture files under a byte budget (`serve --retain`).
    pub retention: Option<Arc<corecap_store::retention::Retention>>,
    /// IPFIX collectors a flows request may name (`serve --ipfix-collector`).
    pub ipfix_collectors: Vec<IpfixTarget>,
    /// The files the recovery step renamed in the spool before the manager started (what a
    /// daemon that died left being written): captures of the earlier run that wrote them
    /// are listed as `recovered` with their new names.
    pub recovered: Vec<Renamed>,
    /// The folder the base captures record into (`serve --record`): queries answer over
    /// it beside the spool.
    pub record: Option<std::path::PathBuf>,
}

impl Config {
    /// A daemon on `spool` that takes nothing but what it is given: no capture at once
    /// until `max_captures` is set, no key, no spare socket, a 1 MiB ring for spawned
    /// workers, direct I/O and indexes on, no retention, no collector. Callers set what
    /// they resolved (`Config { max_captures: 8, ..Config::new(spool) }`).
    pub fn new(spool: Spool) -> Self {
        Self {
            spool,
            max_captures: 0,
            key: None,
            share_cores: true,
            stage_cpus: Vec::new(),
            ring: corecap_linux::RingConfig::with_size(1 << 20, 1 << 16, 10),
            spares: 0,
            spawn_priority: None,
            spare_idle: Duration::from_secs(1),
            direct: true,
            index: true,
            sessions: Some(corecap_store::session::SessionConfig::on_demand()),
            flush: Some(Duration::from_secs(1)),
            retention: None,
            ipfix_collectors: Vec::new(),
            recovered: Vec::new(),
            record: None,
        }
    }
}

/// What the daemon did, once stopped.
#[derive(Debug)]
pub struct Ended {
    /// Every capture's final view.
    pub captures: Vec<CaptureView>,
    /// The base captures and their recording, to the end.
    pub stats: Stats,
}

/// An error for the client: an HTTP status and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// What went wrong, for the user.
    pub message: String,
}

fn err(status: u16, message: impl Into<String>) -> ApiError {
    ApiError {
        status,
        message: message.into(),
    }
}

/// A base capture: the workers that attached captures ride on.
#[derive(Debug)]
pub struct Base {
    /// Interface.
    pub iface: String,
    /// The running capture (attachable, no groups of its own).
    pub cap: Capture,
}

#[derive(Debug)]
enum Runner {
    Attach {
        iface: String,
        handle: Attached,
        live: Arc<MemberLive>,
    },
    Spawn(Box<Capture>),
    /// Being detached or finished, outside the lock.
    Ending,
    Ended,
}

/// The slow part of ending a capture (waiting for workers, draining, closing files),
/// done without the manager's lock so other requests go on.
#[derive(Debug)]
enum EndWork {
    Detached(Detached, Arc<MemberLive>),
    Spawn(Box<Capture>),
    Failed(String),
}

/// A capture on its way out.
#[derive(Debug)]
struct Ending {
    id: String,
    state: State,
    reason: String,
    work: EndWork,
}

/// What ending it gave.
#[derive(Debug)]
enum EndResult {
    Member(Box<MemberOutcome>, u64),
    Summary(Box<corecap_engine::capture::Summary>),
    Failed(String),
}

impl Ending {
    fn finish(self) -> (String, State, String, EndResult) {
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

#[derive(Debug)]
struct Entry {
    view: CaptureView,
    runner: Runner,
    since_ns: u64,
    deadline: Option<Instant>,
    files: Vec<PathBuf>,
    lag_observed: bool,
    /// The file name the request gave.
    name: Option<String>,
}

#[derive(Debug, Default)]
struct Inner {
    bases: Vec<Base>,
    entries: Vec<Entry>,
    next_id: u64,
    next_stage: usize,
    cores: Cores,
    responses: BTreeMap<u16, u64>,
    /// TLS connections closed in their handshake (a refused certificate among them).
    handshakes_refused: u64,
    lag: BTreeMap<&'static str, LagHistogram>,
    spool_bytes: u64,
    quota_checked: Option<Instant>,
    /// Per interface: workers kept ready, each a parked thread with a spare socket
    /// (bases' interfaces, and the interfaces spawned captures ran on lately). Filled by
    /// [`Manager::refill`], off the request's path.
    spares: BTreeMap<String, Vec<Standby>>,
    /// When a capture last spawned on each interface that keeps spares without a base.
    spare_used: BTreeMap<String, Instant>,
    /// Set by [`Manager::shutdown`]: no capture starts after it.
    closing: bool,
    /// Counts changes to what the catalog holds (captures started, ended, settled,
    /// forgotten); the catalog on disk is behind while [`Saved::generation`] is lower.
    generation: u64,
}

/// What was last written to the catalog.
#[derive(Debug, Default)]
struct Saved {
    /// The [`Inner::generation`] written.
    generation: u64,
    /// The last write failed (said once on stderr, until one succeeds).
    failing: bool,
}

/// Interfaces without a base capture that keep spare sockets at once.
const SPARE_IFACES: usize = 8;

/// The refill thread waits until no capture has spawned for this long: making a ring maps
/// it into the process (the kernel inserts every page under the process's mmap lock), and
/// a burst of requests should not wait for that lock. The pool covers the burst.
const REFILL_QUIET: Duration = Duration::from_millis(20);

/// The on-demand manager.
#[derive(Debug)]
pub struct Manager {
    cfg: Config,
    inner: Mutex<Inner>,
    /// Where spawned captures' sockets are opened (see [`crate::opener`]).
    opener: Opener,
    /// Held while the catalog is written; writers go one at a time, the newest last.
    saved: Mutex<Saved>,
    /// The generation last written, read without waiting for a write in progress; only
    /// raised, under `saved`.
    written: AtomicU64,
    /// What loading the catalog found worth saying.
    notes: Vec<String>,
}

/// Ended captures kept for `GET /captures`.
const HISTORY: usize = 256;

fn wall_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn extension(o: OutputKind) -> &'static str {
    match o {
        OutputKind::Pcapng => "pcapng",
        OutputKind::Pcap => "pcap",
        OutputKind::Flows => "flows.jsonl",
        OutputKind::Count => "",
    }
}

/// What a capture needs to start, in either mode.
struct Launch<'a> {
    r: &'a StartRequest,
    input: &'a Input,
    ifindex: u32,
    linktype: u16,
    snaplen: u32,
    file: Option<OutputConfig>,
    flows: Option<FlowOutput>,
    path: &'a Option<PathBuf>,
    since_ns: u64,
    /// The start of a capture that starts in the past (ns).
    lookback: Option<u64>,
}

/// A started capture: its runner, its cores and its files.
type Started = (Runner, Vec<u32>, Vec<PathBuf>);

/// A request that passed [`Manager::validate`], resolved.
struct Valid {
    input: Input,
    /// The interface's index and link type.
    ifindex: u32,
    linktype: u16,
    duration: Option<Duration>,
    snaplen: u32,
    seal: Option<SealConfig>,
    ipfix: Option<IpfixTarget>,
}

impl Manager {
    /// A manager with these base captures (already running), over the spool's catalog:
    /// the earlier run's captures are listed, settled (see [`crate::catalog`]), and ids
    /// continue past theirs. A catalog that cannot be read stops nothing; see
    /// [`Manager::notes`].
    pub fn new(cfg: Config, bases: Vec<Base>) -> Self {
        let spares = bases
            .iter()
            .map(|b| (b.iface.clone(), Vec::new()))
            .collect();
        let dir = cfg.spool.dir().to_owned();
        let catalog::Loaded {
            catalog: mut earlier,
            mut notes,
        } = catalog::load(&dir);
        let died: Vec<usize> = (earlier.captures.iter().enumerate())
            .filter(|(_, r)| r.state == State::Running)
            .map(|(i, _)| i)
            .collect();
        let settled = earlier.settle(&dir, &cfg.recovered);
        if !died.is_empty() {
            let what: Vec<String> = died
                .iter()
                .map(|i| &earlier.captures[*i])
                .map(|r| format!("{} {}", r.id, r.state.name()))
                .collect();
            notes.push(format!(
                "the earlier run ended while {} captures ran: {}",
                died.len(),
                what.join(", ")
            ));
        }
        let entries = earlier
            .captures
            .iter()
            .map(|r| earlier_entry(&dir, r))
            .collect();
        let inner = Inner {
            spares,
            bases,
            cores: Cores::new(),
            next_id: earlier.next_id,
            entries,
            // Written at once when loading changed or rebuilt it.
            generation: u64::from(settled || !notes.is_empty()),
            ..Default::default()
        };
        let m = Self {
            cfg,
            inner: Mutex::new(inner),
            opener: Opener::inline(),
            saved: Mutex::new(Saved::default()),
            written: AtomicU64::new(0),
            notes,
        };
        m.save();
        m
    }

    /// What loading the spool's catalog found that the user should hear once: an
    /// unreadable or missing catalog, and where ids continue.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Writes the catalog if it is behind, outside the manager's lock. A failed write is
    /// said once on stderr (the captures go on; the next change tries again).
    fn save(&self) {
        let (generation, c) = {
            let g = self.lock();
            // Relaxed: a hint that spares building a catalog; `saved` decides.
            if g.generation <= self.written.load(Ordering::Relaxed) {
                return;
            }
            (g.generation, g.catalog())
        };
        let mut s = self.saved_lock();
        // Another caller wrote a newer catalog meanwhile.
        if s.generation >= generation {
            return;
        }
        match catalog::write(self.cfg.spool.dir(), &c) {
            Ok(()) => {
                s.generation = generation;
                self.written.store(generation, Ordering::Relaxed);
                if std::mem::take(&mut s.failing) {
                    eprintln!("corecap: the spool's catalog is written again");
                }
            }
            Err(e) if !s.failing => {
                s.failing = true;
                eprintln!(
                    "corecap: cannot write the spool's catalog {}: {e} (captures go on; a restart may not list them)",
                    self.cfg.spool.dir().join(catalog::FILE).display()
                );
            }
            Err(_) => {}
        }
    }

    fn saved_lock(&self) -> MutexGuard<'_, Saved> {
        self.saved.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens spawned captures' sockets through `opener`: the daemon's one thread that keeps
    /// capabilities, when the threads that call the manager hold none.
    pub fn with_opener(mut self, opener: Opener) -> Self {
        self.opener = opener;
        self
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent-enough state for stopping.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The collector a request named, if the operator allowed it (`serve
    /// --ipfix-collector`), with a new observation domain for the capture.
    fn allowed_collector(&self, c: &str) -> Result<IpfixTarget, ApiError> {
        let want = IpfixTarget::parse(c).map_err(|e| err(400, e))?;
        let Some(ok) = self
            .cfg
            .ipfix_collectors
            .iter()
            .find(|a| a.transport == want.transport && a.addr == want.addr)
        else {
            let allowed: Vec<String> = self.cfg.ipfix_collectors.iter().map(|a| a.url()).collect();
            return Err(err(
                400,
                format!(
                    "collector {} is not allowed; this daemon exports to: {} (serve --ipfix-collector)",
                    want.url(),
                    if allowed.is_empty() { "none".into() } else { allowed.join(", ") }
                ),
            ));
        };
        Ok(IpfixTarget {
            domain: corecap_engine::sink::ipfix::new_domain(),
            ..ok.clone()
        })
    }

    /// Counts a response by status (for the metrics).
    pub fn count_response(&self, status: u16) {
        *self.lock().responses.entry(status).or_default() += 1;
    }

    /// Counts a TLS connection that ended in its handshake, before any request.
    pub fn count_refused_handshake(&self) {
        self.lock().handshakes_refused += 1;
    }

    /// Starts an attach-mode capture: a copy consumer of the base capture `base`.
    fn start_attach(
        &self,
        g: &mut Inner,
        base: Option<usize>,
        launch: Launch<'_>,
    ) -> Result<Started, ApiError> {
        let (r, input) = (launch.r, launch.input);
        let Some(bi) = base else {
            return Err(err(
                400,
                format!(
                    "attach mode needs a base capture on {}: start serve with -i {}, or ask for mode spawn",
                    input.iface, input.iface
                ),
            ));
        };
        if input.queue.is_some() {
            return Err(err(
                400,
                "attach mode takes whole interfaces; use mode spawn for IF@QUEUE",
            ));
        }
        let cpu = match r.cores.as_deref() {
            Some([c, ..]) => Some(*c),
            Some([]) => None,
            None => {
                let pool = if self.cfg.stage_cpus.is_empty() {
                    g.cores.allowed.clone()
                } else {
                    self.cfg.stage_cpus.clone()
                };
                let k = g.next_stage;
                g.next_stage += 1;
                pool.get(k % pool.len().max(1)).copied()
            }
        };
        let live = Arc::new(MemberLive::default());
        let (recorded, lookback) = match launch.lookback {
            Some(_) => {
                let (tx, rx) = std::sync::mpsc::sync_channel(4);
                let feed = corecap_engine::stage::member::Lookback {
                    recorded: rx,
                    hold_bytes: crate::lookback::HOLD_BYTES,
                };
                (Some(tx), Some(feed))
            }
            None => (None, None),
        };
        let spec = AttachSpec {
            filter: r.filter.clone(),
            snaplen: launch.snaplen,
            file: launch.file,
            flows: launch.flows,
            cpu,
            limits: MemberLimits {
                since_ns: launch.lookback.unwrap_or(launch.since_ns),
                count: r.count,
                live: Some(live.clone()),
            },
            lookback,
        };
        let handle = g.bases[bi].cap.attach(spec).map_err(start_error)?;
        if let (Some(from_ns), Some(tx)) = (launch.lookback, recorded) {
            let seam_ns = self.seam(&g.bases[bi].cap);
            let job = crate::lookback::Job {
                recording: self.cfg.record.clone().unwrap_or_default(),
                scratch: self.cfg.spool.dir().to_owned(),
                from_ns,
                seam_ns,
                filter: r.filter.clone(),
                kek: self.cfg.key.clone(),
                flush: self.cfg.flush,
                snaplen: launch.snaplen,
            };
            // Without its thread the channel is closed: the stage notes it and goes on live.
            let _ = crate::lookback::spawn(job, tx);
        }
        Ok((
            Runner::Attach {
                iface: input.iface.clone(),
                handle,
                live,
            },
            cpu.into_iter().collect::<Vec<_>>(),
            launch.path.iter().cloned().collect::<Vec<_>>(),
        ))
    }

    /// The seam of a capture that starts in the past: the clock once every worker of the
    /// base capture steers to it (at most a second; a worker that ends counts as done).
    fn seam(&self, cap: &corecap_engine::capture::Capture) -> u64 {
        let t = Instant::now();
        while !cap.steering_current() && t.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_micros(100));
        }
        wall_ns(SystemTime::now())
    }

    /// The start of a capture that starts in the past, checked: the daemon records the
    /// interface, the capture attaches to it and writes a file, and the time is past.
    fn lookback_start(
        &self,
        r: &StartRequest,
        mode: Mode,
        base: Option<usize>,
        now_ns: u64,
    ) -> Result<Option<u64>, ApiError> {
        let Some(since) = &r.since else {
            return Ok(None);
        };
        if self.cfg.record.is_none() {
            return Err(err(
                400,
                "since needs a daemon that records its base captures (serve --record DIR)",
            ));
        }
        if mode != Mode::Attach || base.is_none() {
            return Err(err(
                400,
                format!(
                    "since takes packets from the recording of a base capture: attach mode on an interface serve records (-i {})",
                    r.interface
                ),
            ));
        }
        if !matches!(r.output, OutputKind::Pcapng | OutputKind::Pcap) {
            return Err(err(
                400,
                "since is for captures that write a file (pcapng, pcap)",
            ));
        }
        let from = corecap_store::query::parse_time(since, now_ns)
            .map_err(|e| err(400, format!("since {since}: {e}")))?;
        if from >= now_ns {
            return Err(err(400, format!("since {since}: a time in the past")));
        }
        Ok(Some(from))
    }

    /// Starts a spawn-mode capture: a worker of its own on a free core.
    fn start_spawn(
        &self,
        g: &mut Inner,
        launch: Launch<'_>,
        notes: &mut Vec<String>,
    ) -> Result<Started, ApiError> {
        let (r, input, flows) = (launch.r, launch.input, &launch.flows);
        let cores = match r.cores.clone() {
            Some(c) if !c.is_empty() => c,
            _ => {
                let busy = g.worker_cpus();
                let share = self.cfg.share_cores;
                let (c, note) = g
                    .cores
                    .pick(&input.iface, &busy, share)
                    .map_err(|e| err(429, e))?;
                notes.extend(note);
                vec![c]
            }
        };
        g.spare_used.insert(input.iface.clone(), Instant::now());
        // A worker kept ready, on the chosen core if one waits there: the capture makes no
        // thread and no ring. Without one, the worker swaps its filter into a socket the
        // opener makes now: the thread that starts it needs no capability.
        let ready = g.spares.entry(input.iface.clone()).or_default();
        let pick = ready
            .iter()
            .rposition(|s| s.cpu() == cores[0])
            .or_else(|| ready.len().checked_sub(1));
        let standby = match pick {
            Some(i) => {
                // The capture starts here: its filter goes into the waiting ring before its
                // files, its stage and its worker are in place (the ring holds the packets
                // meanwhile). A bad filter leaves the standby ready; a start that fails
                // once it is armed closes it (an armed spare is never offered again).
                let prog = corecap_engine::capture::socket_program(
                    input,
                    launch.linktype,
                    r.filter.as_deref(),
                    launch.snaplen,
                )
                .map_err(start_error)?;
                let s = ready.remove(i);
                s.spare()
                    .arm(launch.ifindex, self.cfg.ring, &prog)
                    .map_err(|e| start_error(e.into()))?;
                Some(s)
            }
            None => None,
        };
        let spare = match &standby {
            Some(s) => s.spare().clone(),
            None => self
                .opener
                .spare(launch.ifindex, self.cfg.ring)
                .map_err(|e| start_error(e.into()))?,
        };
        let spare = Some(spare);
        // One worker on its core; flow records go through one stage member on that core.
        let cfg = CaptureConfig {
            inputs: vec![input.clone()],
            workers: 1,
            cpus: cores.clone(),
            filter: r.filter.clone(),
            snaplen: launch.snaplen,
            ring: self.cfg.ring,
            count: r.count,
            output: launch.file,
            groups: flows
                .iter()
                .map(|_| GroupSpec {
                    kind: GroupKind::Copy,
                    members: 1,
                    filter: None,
                    snaplen: None,
                })
                .collect(),
            stage_cpus: cores.clone(),
            flows: flows.clone(),
            transport: Transport::Spsc,
            spare: spare.clone(),
            standby: standby.clone(),
            ..CaptureConfig::default()
        };
        let cap = Capture::start(&cfg);
        // A start that failed before its worker ran leaves the standby ready.
        if let Some(s) = standby.filter(Standby::ready) {
            g.spares.entry(input.iface.clone()).or_default().push(s);
        }
        let cap = cap.map_err(start_error)?;
        notes.extend(cap.notes.iter().cloned());
        // A flow table of a spawned capture is its one stage member's.
        let files = match (flows.as_ref().and_then(|f| f.file.as_ref()), launch.path) {
            (Some(f), _) => vec![suffixed_path(f, "g0m0")],
            (None, Some(p)) => vec![p.clone()],
            _ => vec![],
        };
        Ok((Runner::Spawn(Box::new(cap)), cores, files))
    }

    /// Checks a request before anything is started or locked: the interface, numbers,
    /// filter, key, cores and collector. Every refusal is an [`ApiError`] with its status.
    fn validate(&self, r: &StartRequest) -> Result<Valid, ApiError> {
        if let Some(name) = &r.name {
            self.check_name(name)?;
        }
        let input = Input::parse(&r.interface).map_err(|e| err(400, e))?;
        if input.xdp {
            return Err(err(
                400,
                "AF_XDP captures are not started on demand (one XDP program per interface); give the interface without xdp:",
            ));
        }
        let Ok(ifindex) = corecap_linux::netdev::ifindex(&input.iface) else {
            return Err(err(404, format!("no interface named '{}'", input.iface)));
        };
        let duration = r
            .duration
            .map(|d| corecap_engine::limits::seconds(d, "duration"))
            .transpose()
            .map_err(|e| err(400, e.to_string()))?;
        if r.count == Some(0) {
            return Err(err(400, "count must be at least 1"));
        }
        let snaplen = corecap_engine::limits::snaplen(r.snaplen.unwrap_or(262_144), "snaplen")
            .map_err(|e| err(400, e.to_string()))?;
        let linktype =
            corecap_linux::netdev::linktype(&input.iface).map_err(|e| err(500, error_chain(&e)))?;
        if let Some(f) = &r.filter {
            // Checked here, for either mode, so a bad expression is a 400 with libpcap's words.
            compile_filter(linktype, snaplen, f).map_err(|e| err(400, error_chain(&e)))?;
        }
        let seal = match (&r.encrypt, &self.cfg.key) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(err(
                    400,
                    "this daemon has no key: start serve with --key-file to accept \"encrypt\"",
                ))
            }
            (Some(c), Some(k)) => Some(SealConfig {
                cipher: c.parse::<Cipher>().map_err(|e| err(400, e))?,
                kek: k.clone(),
            }),
        };
        if seal.is_some() && !matches!(r.output, OutputKind::Pcapng | OutputKind::Pcap) {
            return Err(err(400, "encryption is for pcapng and pcap output"));
        }
        if let Some(cores) = &r.cores {
            let online = corecap_linux::affinity::online_cpus();
            if let Some(bad) = cores.iter().find(|c| !online.contains(c)) {
                return Err(err(
                    400,
                    format!("CPU {bad} is not online ({online:?} are)"),
                ));
            }
        }
        let ipfix = match &r.collector {
            None => None,
            Some(_) if r.output != OutputKind::Flows => {
                return Err(err(400, "a collector is for output flows"));
            }
            Some(c) => Some(self.allowed_collector(c)?),
        };
        Ok(Valid {
            input,
            ifindex,
            linktype,
            duration,
            snaplen,
            seal,
            ipfix,
        })
    }

    /// Starts a capture for a request that arrived at `t0` (`wall` on the system clock):
    /// validated, admitted under the limits, named in the spool, then attached or spawned.
    pub fn start(
        &self,
        r: StartRequest,
        t0: Instant,
        wall: SystemTime,
    ) -> Result<CaptureView, ApiError> {
        let since_ns = wall_ns(wall);
        let valid = self.validate(&r)?;
        let mut guard = self.lock();
        let g = &mut *guard;
        self.admit(g, &r)?;
        let (id, path) = self.fresh_id(g, &r, valid.seal.is_some())?;
        let base = g.bases.iter().position(|b| b.iface == valid.input.iface);
        let mode = match (r.mode, base) {
            (Some(m), _) => m,
            (None, Some(_)) if valid.input.queue.is_none() => Mode::Attach,
            (None, _) => Mode::Spawn,
        };
        let lookback = self.lookback_start(&r, mode, base, since_ns)?;
        let (file, flows) = self.outputs(&r, &valid, path.as_ref());
        let mut notes = Vec::new();
        let launch = Launch {
            r: &r,
            input: &valid.input,
            ifindex: valid.ifindex,
            linktype: valid.linktype,
            snaplen: valid.snaplen,
            file,
            flows,
            path: &path,
            since_ns,
            lookback,
        };
        let (runner, cores, files) = match mode {
            Mode::Attach => self.start_attach(g, base, launch)?,
            Mode::Spawn => self.start_spawn(g, launch, &mut notes)?,
        };
        g.generation += 1;
        let view = CaptureView {
            id,
            state: State::Running,
            reason: None,
            mode,
            interface: valid.input.label(),
            filter: r.filter.clone(),
            output: r.output,
            path: files.first().map(|p| p.display().to_string()),
            file_bytes: 0,
            cores,
            requested_at: secs(since_ns),
            ended_at: None,
            setup_us: t0.elapsed().as_secs_f64() * 1e6,
            armed_us: None,
            first_packet_us: None,
            lag_us: None,
            packets: 0,
            bytes: 0,
            drops: Drops::default(),
            count: r.count,
            duration: r.duration,
            notes,
            files: display(&files),
            earlier_run: false,
            since: lookback.map(secs),
            recorded: lookback.map(|_| 0),
            live: lookback.map(|_| 0),
        };
        g.entries.push(Entry {
            view,
            runner,
            since_ns,
            deadline: valid.duration.map(|d| t0 + d),
            files,
            lag_observed: false,
            name: r.name.clone(),
        });
        // After the push: past the top, the next id is one that no listed capture holds.
        g.next_id = self.id_after(g, g.next_id);
        let e = g.entries.last_mut().expect("just pushed");
        refresh(e);
        let view = e.view.clone();
        drop(guard);
        // On disk before the client hears the id: a restart never gives it again.
        self.save();
        Ok(view)
    }

    /// The id of a new capture and its file in the spool. Ids pass over one a listed
    /// capture holds (possible past the top, see [`Manager::id_after`]), and an unnamed
    /// capture passes over the ids whose default name is in use (a file left by hand, or
    /// by a daemon that let a request name it `c9.pcapng`), so it never gets 409.
    fn fresh_id(
        &self,
        g: &mut Inner,
        r: &StartRequest,
        sealed: bool,
    ) -> Result<(String, Option<PathBuf>), ApiError> {
        for _ in 0..1000 {
            let id = format!("c{}", g.next_id);
            if g.entries.iter().any(|e| e.view.id == id) {
                g.next_id = self.id_after(g, g.next_id);
                continue;
            }
            match self.spool_path(&id, r, sealed) {
                Err(e) if e.status == 409 && r.name.is_none() => {
                    g.next_id = self.id_after(g, g.next_id);
                }
                p => return p.map(|p| (id, p)),
            }
        }
        Err(err(
            409,
            format!(
                "the default names of ids up to c{} are all in use in the spool; give a name",
                g.next_id
            ),
        ))
    }

    /// The id number to try after `n`: `n + 1`, or past the top (ids continue past every
    /// `cN` in the spool's names, and a name may say c18446744073709551615) the lowest
    /// that no listed capture and no file name in the spool holds. Never one in use, and
    /// the ids never run out.
    fn id_after(&self, g: &Inner, n: u64) -> u64 {
        n.checked_add(1).unwrap_or_else(|| {
            let mut taken = catalog::ids_in(self.cfg.spool.dir());
            taken.extend(
                g.entries
                    .iter()
                    .filter_map(|e| catalog::id_number(&e.view.id)),
            );
            catalog::lowest_free(&taken)
        })
    }

    /// Whether one more capture may start now: not while shutting down, not past
    /// `--max-captures`, and no file capture past the spool's quota.
    fn admit(&self, g: &Inner, r: &StartRequest) -> Result<(), ApiError> {
        // Checked under the lock that shutdown takes first: a request racing a SIGTERM
        // either starts before shutdown (which then ends it) or is refused here.
        if g.closing {
            return Err(err(503, "the daemon is stopping"));
        }
        let running = g
            .entries
            .iter()
            .filter(|e| e.view.state == State::Running)
            .count();
        if running >= self.cfg.max_captures {
            return Err(err(
                429,
                format!(
                    "{running} captures are running, the most this daemon takes (--max-captures {})",
                    self.cfg.max_captures
                ),
            ));
        }
        if let (true, Some(q)) = (r.output != OutputKind::Count, self.cfg.spool.quota) {
            let used = self.cfg.spool.usage();
            if used >= q {
                return Err(err(
                    429,
                    format!("the spool holds {used} bytes, at its quota of {q} (--quota); remove files from {}", self.cfg.spool.dir().display()),
                ));
            }
        }
        Ok(())
    }

    /// Refuses (400) a file name no request may give: one that is not a plain name in the
    /// spool (see [`Spool::resolve`]), one of the daemon's own form `cN...` (see
    /// [`catalog::is_id_name`]), or an index's (`.idx`).
    fn check_name(&self, name: &str) -> Result<(), ApiError> {
        let p = self.cfg.spool.resolve(name).map_err(|e| err(400, e))?;
        if catalog::is_id_name(name) {
            return Err(err(
                400,
                format!(
                    "'{name}' has the form of the daemon's own names (cN..., as c7.pcapng), which unnamed captures get; choose another name"
                ),
            ));
        }
        if let Some(why) = corecap_index::capture_name_error(&p) {
            return Err(err(400, why));
        }
        Ok(())
    }

    /// The file a capture `id` writes in the spool (none for a count), refused with 409
    /// when that name, its hidden name while written, its index or its flows member's is
    /// in use (a link too, dangling or not: files are never written through one).
    fn spool_path(
        &self,
        id: &str,
        r: &StartRequest,
        sealed: bool,
    ) -> Result<Option<PathBuf>, ApiError> {
        if r.output == OutputKind::Count {
            return Ok(None);
        }
        let name = r
            .name
            .clone()
            .unwrap_or_else(|| format!("{id}.{}", extension(r.output)));
        let mut p = self.cfg.spool.resolve(&name).map_err(|e| err(400, e))?;
        if sealed && !name.ends_with(".sealed") {
            p = PathBuf::from(format!("{}.sealed", p.display()));
        }
        // A file being written has only its hidden name until it is whole; a spawned
        // flows capture writes its one member's file, NAME.g0m0.
        let flows_member = suffixed_path(&p, "g0m0");
        let taken = |p: &Path| std::fs::symlink_metadata(p).is_ok();
        if taken(&p)
            || taken(&corecap_store::names::part_path(&p))
            || taken(&corecap_index::sidecar_path(&p))
            || (r.output == OutputKind::Flows && taken(&flows_member))
        {
            return Err(err(
                409,
                format!("{} exists in the spool; choose another name", p.display()),
            ));
        }
        Ok(Some(p))
    }

    /// What a capture writes to `path`: a pcapng or pcap file, or flow records (to the
    /// file and to the collector).
    fn outputs(
        &self,
        r: &StartRequest,
        v: &Valid,
        path: Option<&PathBuf>,
    ) -> (Option<OutputConfig>, Option<FlowOutput>) {
        let file = path.and_then(|p| match r.output {
            OutputKind::Pcapng | OutputKind::Pcap => Some(OutputConfig {
                path: p.clone(),
                format: if r.output == OutputKind::Pcap {
                    Format::Pcap
                } else {
                    Format::Pcapng
                },
                merge: false,
                rotation: Rotation::default(),
                seal: v.seal.clone(),
                direct: self.cfg.direct,
                retention: self.cfg.retention.clone(),
                index: self.cfg.index,
                sessions: self.cfg.sessions,
                owner: None,
                flush: self.cfg.flush,
                // An on-demand capture is one of many: the least backlog of a sink.
                backlog: Default::default(),
            }),
            _ => None,
        });
        let flows = path
            .filter(|_| r.output == OutputKind::Flows)
            .map(|p| FlowOutput {
                file: Some(p.clone()),
                ipfix: v.ipfix.clone(),
            });
        (file, flows)
    }

    /// Every capture, running and ended (the last 256 ended), the earlier run's first.
    pub fn list(&self) -> Vec<CaptureView> {
        let (views, changed) = {
            let mut g = self.lock();
            let dir = self.cfg.spool.dir();
            let mut changed = false;
            let views = g
                .entries
                .iter_mut()
                .map(|e| {
                    changed |= refresh_earlier(e, dir);
                    refresh(e);
                    e.view.clone()
                })
                .collect();
            g.generation += u64::from(changed);
            (views, changed)
        };
        if changed {
            self.save();
        }
        views
    }

    /// The packet files of capture `id`, for a download: each under its whole name, or
    /// its hidden part while it is written. An error for a capture that writes flow records
    /// or no file.
    pub fn packet_files(&self, id: &str) -> Result<Vec<PathBuf>, ApiError> {
        let g = self.lock();
        let e = g
            .entries
            .iter()
            .find(|e| e.view.id == id)
            .ok_or_else(|| err(404, format!("no capture '{id}'")))?;
        if !matches!(e.view.output, OutputKind::Pcapng | OutputKind::Pcap) {
            return Err(err(
                409,
                format!("capture '{id}' writes flow records, not packets"),
            ));
        }
        let files: Vec<PathBuf> = e
            .files
            .iter()
            .filter_map(|p| {
                let part = corecap_store::names::part_path(p);
                [p.clone(), part].into_iter().find(|f| f.is_file())
            })
            .collect();
        if files.is_empty() {
            return Err(err(409, format!("capture '{id}' has no file (yet)")));
        }
        Ok(files)
    }

    /// One capture.
    pub fn show(&self, id: &str) -> Result<CaptureView, ApiError> {
        let (view, changed) = {
            let mut g = self.lock();
            let e = g
                .entries
                .iter_mut()
                .find(|e| e.view.id == id)
                .ok_or_else(|| err(404, format!("no capture '{id}'")))?;
            let changed = refresh_earlier(e, self.cfg.spool.dir());
            refresh(e);
            let view = e.view.clone();
            g.generation += u64::from(changed);
            (view, changed)
        };
        if changed {
            self.save();
        }
        Ok(view)
    }

    /// Stops a capture; returns its final view once its files are closed. A capture of an
    /// earlier run of the daemon gets 409: nothing of it runs.
    pub fn stop(&self, id: &str) -> Result<CaptureView, ApiError> {
        let ending = {
            let mut g = self.lock();
            let i = g
                .entries
                .iter()
                .position(|e| e.view.id == id)
                .ok_or_else(|| err(404, format!("no capture '{id}'")))?;
            let v = &g.entries[i].view;
            if v.earlier_run {
                return Err(err(
                    409,
                    format!(
                        "{id} was started by an earlier run of the daemon and is {}; it cannot be stopped (its files stay in the spool for queries)",
                        v.state.name()
                    ),
                ));
            }
            g.begin_end(i, State::Stopped, "stopped by request".into())
        };
        if let Some(e) = ending {
            let done = e.finish();
            self.lock().record(done);
            self.save();
        }
        // Ended here, or by the housekeeping that got to it first: wait for its end.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let v = self.show(id)?;
            if v.state != State::Running || Instant::now() > deadline {
                return Ok(v);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Ends captures outside the lock, then records how they ended.
    fn end_all(&self, endings: Vec<Ending>) {
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
    fn release_idle_spares(&self, g: &mut Inner) {
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

    fn tick_locked(&self) -> Vec<Ending> {
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
            let ended = ended.or_else(|| {
                e.deadline
                    .is_some_and(|d| now >= d)
                    .then(|| (State::Done, "duration reached".to_string()))
            });
            let ended = ended.or_else(|| {
                over_quota
                    .filter(|_| e.view.output != OutputKind::Count)
                    .map(|q| {
                        (
                            State::Stopped,
                            format!("the spool reached its quota of {q} bytes"),
                        )
                    })
            });
            if let Some(lag) = e.view.lag_us.filter(|_| !e.lag_observed) {
                e.lag_observed = true;
                let mode = e.view.mode.name();
                g.lag.entry(mode).or_default().observe(lag / 1e6);
            }
            if let Some((state, reason)) = ended {
                endings.extend(g.begin_end(i, state, reason));
            }
        }
        // Keep the last HISTORY ended captures.
        let ended = g
            .entries
            .iter()
            .filter(|e| e.view.state != State::Running)
            .count();
        if ended > HISTORY {
            // The catalog forgets them with the next write.
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

    /// What the base captures and their recording did so far, and the captures running.
    /// The counters are summed outside the manager's lock (the recording's reach is read
    /// from its folder's catalog).
    pub fn stats(&self) -> Stats {
        let (counters, running) = {
            let g = self.lock();
            let running = g
                .entries
                .iter()
                .filter(|e| e.view.state == State::Running && !e.view.earlier_run)
                .count() as u64;
            (
                g.bases.iter().map(base_counters).collect::<Vec<_>>(),
                running,
            )
        };
        Stats {
            captures_running: running,
            ..self.read_stats(&counters)
        }
    }

    fn read_stats(&self, counters: &[BaseCounters]) -> Stats {
        Stats {
            bases: counters
                .iter()
                .map(|c| c.read(self.cfg.record.as_deref()))
                .collect(),
            captures_running: 0,
            retention: self.cfg.retention.as_ref().map(|r| {
                let (files, bytes) = r.deleted();
                Deleted { files, bytes }
            }),
        }
    }

    /// CPUs capture uses now: the base captures' workers and the cores of running
    /// captures (spawned workers, attached consumers' stage threads).
    pub fn capture_cpus(&self) -> Vec<u32> {
        let g = self.lock();
        let mut cpus: Vec<u32> = g
            .bases
            .iter()
            .flat_map(|b| b.cap.workers.iter().filter_map(|w| w.cpu))
            .collect();
        for e in &g.entries {
            if e.view.state == State::Running {
                cpus.extend(&e.view.cores);
            }
        }
        cpus.sort_unstable();
        cpus.dedup();
        cpus
    }

    /// The spool.
    pub fn spool(&self) -> &Spool {
        &self.cfg.spool
    }

    /// The recording folder, if the base captures record.
    pub fn record(&self) -> Option<&std::path::Path> {
        self.cfg.record.as_deref()
    }

    /// The key-encryption key of sealed files, if the daemon has one.
    pub fn key(&self) -> Option<&Arc<KeyFile>> {
        self.cfg.key.as_ref()
    }

    /// `GET /cores`.
    pub fn cores(&self) -> serde_json::Value {
        let mut g = self.lock();
        let mut roles: Vec<(u32, String)> = Vec::new();
        let ifaces: Vec<String> = g.bases.iter().map(|b| b.iface.clone()).collect();
        for b in &g.bases {
            for w in &b.cap.workers {
                if let Some(c) = w.cpu {
                    roles.push((c, format!("base {} worker {}", w.input, w.id)));
                }
            }
        }
        for e in &g.entries {
            if e.view.state != State::Running {
                continue;
            }
            let what = match e.view.mode {
                Mode::Attach => "stage (attach)",
                Mode::Spawn => "worker (spawn)",
            };
            for c in &e.view.cores {
                roles.push((*c, format!("{} {what}", e.view.id)));
            }
        }
        for i in &ifaces {
            g.cores.irq_cpus(i);
        }
        serde_json::to_value(g.cores.view(&roles)).unwrap_or_default()
    }

    /// `GET /metrics`, in Prometheus text format.
    pub fn metrics(&self) -> String {
        let bases = self.stats().bases;
        let mut g = self.lock();
        for e in g.entries.iter_mut() {
            refresh(e);
        }
        // Counters are this run's: the earlier run's captures are only counted by state.
        let views: Vec<CaptureView> = g
            .entries
            .iter()
            .filter(|e| !e.view.earlier_run)
            .map(|e| e.view.clone())
            .collect();
        let mut earlier: BTreeMap<&'static str, u64> = BTreeMap::new();
        for e in g.entries.iter().filter(|e| e.view.earlier_run) {
            *earlier.entry(e.view.state.name()).or_default() += 1;
        }
        let spares: Vec<(String, usize)> =
            g.spares.iter().map(|(i, v)| (i.clone(), v.len())).collect();
        crate::metrics::render(&crate::metrics::Input {
            captures: &views,
            bases: &bases,
            responses: &g.responses,
            handshakes_refused: g.handshakes_refused,
            lag: &g.lag,
            spool_bytes: g.spool_bytes,
            quota: self.cfg.spool.quota,
            retention: self.cfg.retention.as_ref().map(|r| {
                let (f, b) = r.deleted();
                (r.budget(), f, b)
            }),
            spares: &spares,
            earlier: &earlier,
            recovered_files: self.cfg.recovered.len() as u64,
        })
    }
}

impl Inner {
    /// What the catalog holds now: the next id, and every capture listed.
    fn catalog(&self) -> Catalog {
        Catalog {
            version: catalog::VERSION,
            next_id: self.next_id,
            captures: self.entries.iter().map(record_of).collect(),
        }
    }

    /// CPUs running capture workers now: the bases' and the spawned captures'.
    fn worker_cpus(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .bases
            .iter()
            .flat_map(|b| b.cap.workers.iter().filter_map(|w| w.cpu))
            .collect();
        for e in &self.entries {
            if let Runner::Spawn(c) = &e.runner {
                v.extend(c.workers.iter().filter_map(|w| w.cpu));
            }
        }
        v
    }

    /// Starts ending capture `i` (if it runs): detaches it from its base, or takes its
    /// capture out, for [`Ending::finish`] outside the lock.
    fn begin_end(&mut self, i: usize, state: State, reason: String) -> Option<Ending> {
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
    fn record(&mut self, (id, state, reason, r): (String, State, String, EndResult)) {
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
fn base_counters(b: &Base) -> BaseCounters {
    BaseCounters {
        interface: b.iface.clone(),
        workers: b.cap.counters.clone(),
        members: b.cap.members().into_iter().map(|(_, l)| l).collect(),
    }
}

/// A capture that could not start: a wrong request is 400, a missing interface 404, and
/// whatever the machine refused (kernel, memory, threads, files, timeouts) 500 with its
/// message.
fn start_error(e: CaptureError) -> ApiError {
    let status = match e.kind() {
        CaptureErrorKind::Invalid => 400,
        CaptureErrorKind::NotFound => 404,
        _ => 500,
    };
    match e {
        CaptureError::Output(m) => err(status, format!("cannot create the output: {m}")),
        other => err(status, error_chain(&other)),
    }
}

/// Paths as the API shows them.
fn display(files: &[PathBuf]) -> Vec<String> {
    files.iter().map(|p| p.display().to_string()).collect()
}

/// A capture as the catalog keeps it: its files by name in the spool.
fn record_of(e: &Entry) -> Record {
    let v = &e.view;
    Record {
        id: v.id.clone(),
        name: e.name.clone(),
        interface: v.interface.clone(),
        mode: v.mode,
        filter: v.filter.clone(),
        output: v.output,
        count: v.count,
        duration: v.duration,
        requested_at: v.requested_at,
        ended_at: v.ended_at,
        state: v.state,
        reason: v.reason.clone(),
        files: e
            .files
            .iter()
            .filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
            .collect(),
        packets: v.packets,
        bytes: v.bytes,
        drops: v.drops.clone(),
        lag_us: v.lag_us,
        setup_us: v.setup_us,
        cores: v.cores.clone(),
        earlier_run: v.earlier_run,
    }
}

/// A capture of an earlier run, listed from the catalog (already settled).
fn earlier_entry(dir: &std::path::Path, r: &Record) -> Entry {
    let files: Vec<PathBuf> = r.files.iter().map(|f| dir.join(f)).collect();
    let view = CaptureView {
        id: r.id.clone(),
        state: r.state,
        reason: r.reason.clone(),
        mode: r.mode,
        interface: r.interface.clone(),
        filter: r.filter.clone(),
        output: r.output,
        path: files.first().map(|p| p.display().to_string()),
        file_bytes: file_bytes(&files),
        cores: r.cores.clone(),
        requested_at: r.requested_at,
        ended_at: r.ended_at,
        setup_us: r.setup_us,
        armed_us: r.lag_us.map(|l| (l - r.setup_us).max(0.0)),
        first_packet_us: r.lag_us,
        lag_us: r.lag_us,
        packets: r.packets,
        bytes: r.bytes,
        drops: r.drops.clone(),
        count: r.count,
        duration: r.duration,
        notes: Vec::new(),
        files: display(&files),
        earlier_run: true,
        since: None,
        recorded: None,
        live: None,
    };
    Entry {
        view,
        runner: Runner::Ended,
        since_ns: (r.requested_at.max(0.0) * 1e9) as u64,
        deadline: None,
        files,
        lag_observed: true,
        name: r.name.clone(),
    }
}

/// Follows a capture of an earlier run whose file was still its writer's part when the
/// manager started: a recovery since (at the first file capture's start) named it, or
/// removed it. Returns whether its entry changed.
fn refresh_earlier(e: &mut Entry, dir: &std::path::Path) -> bool {
    if !e.view.earlier_run || e.view.state != State::Recovered {
        return false;
    }
    let mut r = record_of(e);
    if !r.resettle(dir) {
        return false;
    }
    *e = earlier_entry(dir, &r);
    true
}

/// Microseconds from `since_ns` to `ns` (ns since the epoch; negative when earlier).
fn us_since(ns: u64, since_ns: u64) -> f64 {
    (ns as i128 - since_ns as i128) as f64 / 1e3
}

fn file_bytes(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

fn set_from_snapshot(e: &mut Entry, s: &corecap_engine::stats::ledger::Snapshot) {
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
fn refresh(e: &mut Entry) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn manager() -> (Manager, PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "corecap-manager-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).expect("spool");
        let cfg = Config {
            max_captures: 4,
            ipfix_collectors: vec![IpfixTarget::parse("ipfix://127.0.0.1:4739").expect("url")],
            ..Config::new(Spool::open(&dir, None, None).expect("spool"))
        };
        (Manager::new(cfg, vec![]), dir)
    }

    #[test]
    fn test_collector_must_be_allowed() {
        let (m, dir) = manager();
        for (req, want) in [
            (
                r#"{"interface":"lo","output":"flows","collector":"ipfix://10.9.9.9:4739"}"#,
                "not allowed",
            ),
            (
                r#"{"interface":"lo","output":"flows","collector":"ipfix+tcp://127.0.0.1:4739"}"#,
                "not allowed",
            ),
            (
                r#"{"interface":"lo","output":"flows","collector":"udp://127.0.0.1:4739"}"#,
                "not an IPFIX collector",
            ),
            (
                r#"{"interface":"lo","output":"pcapng","collector":"ipfix://127.0.0.1:4739"}"#,
                "for output flows",
            ),
        ] {
            let r: StartRequest = serde_json::from_str(req).expect("request");
            let e = m
                .start(r, Instant::now(), SystemTime::now())
                .expect_err("refused");
            assert_eq!(e.status, 400, "{req}: {e:?}");
            assert!(e.message.contains(want), "{req}: {e:?}");
        }
        let ok = m
            .allowed_collector("ipfix://127.0.0.1:4739")
            .expect("allowed");
        assert_ne!(ok.domain, 0);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn test_no_capture_starts_once_shutdown_began() {
        let (m, dir) = manager();
        assert!(m.shutdown().captures.is_empty());
        let r: StartRequest =
            serde_json::from_str(r#"{"interface":"lo","output":"count"}"#).expect("request");
        let e = m
            .start(r, Instant::now(), SystemTime::now())
            .expect_err("refused");
        assert_eq!(e.status, 503, "{e:?}");
        assert!(m.list().is_empty(), "nothing was started");
        std::fs::remove_dir_all(dir).expect("clean");
    }

    #[test]
    fn test_spool_names() {
        let (m, dir) = manager();
        let req = |body: &str| -> StartRequest { serde_json::from_str(body).expect("request") };
        let spool = m.cfg.spool.dir().to_owned();
        // Default names: the id and the output's extension; none for a count.
        let r = req(r#"{"interface":"lo"}"#);
        assert_eq!(
            m.spool_path("c7", &r, false).expect("ok"),
            Some(spool.join("c7.pcapng"))
        );
        let r = req(r#"{"interface":"lo","output":"flows"}"#);
        assert_eq!(
            m.spool_path("c8", &r, false).expect("ok"),
            Some(spool.join("c8.flows.jsonl"))
        );
        let r = req(r#"{"interface":"lo","output":"count"}"#);
        assert_eq!(m.spool_path("c9", &r, false).expect("ok"), None);
        // A sealed file says so in its name, once.
        let r = req(r#"{"interface":"lo","name":"x.pcapng"}"#);
        assert_eq!(
            m.spool_path("c1", &r, true).expect("ok"),
            Some(spool.join("x.pcapng.sealed"))
        );
        let r = req(r#"{"interface":"lo","name":"y.pcapng.sealed"}"#);
        assert_eq!(
            m.spool_path("c1", &r, true).expect("ok"),
            Some(spool.join("y.pcapng.sealed"))
        );
        // In use: the name itself, its hidden name while written, a flows member's file.
        let r = req(r#"{"interface":"lo","name":"a.pcapng"}"#);
        std::fs::write(spool.join("a.pcapng"), b"").expect("file");
        assert_eq!(
            m.spool_path("c1", &r, false).expect_err("in use").status,
            409
        );
        let r = req(r#"{"interface":"lo","name":"b.pcapng"}"#);
        std::fs::write(spool.join(".b.pcapng.part"), b"").expect("file");
        assert_eq!(
            m.spool_path("c1", &r, false)
                .expect_err("being written")
                .status,
            409
        );
        let r = req(r#"{"interface":"lo","name":"f.jsonl","output":"flows"}"#);
        std::fs::write(suffixed_path(&spool.join("f.jsonl"), "g0m0"), b"").expect("file");
        assert_eq!(
            m.spool_path("c1", &r, false).expect_err("member").status,
            409
        );
        // Never outside the spool, never hidden.
        for bad in ["../x", "/etc/passwd", ".hidden"] {
            let r = req(&format!(r#"{{"interface":"lo","name":"{bad}"}}"#));
            assert_eq!(
                m.spool_path("c1", &r, false).expect_err(bad).status,
                400,
                "{bad}"
            );
        }
        std::fs::remove_dir_all(dir).expect("clean");
    }

    #[test]
    fn test_requests_are_validated_before_anything_starts() {
        let (m, dir) = manager();
        let start = |body: &str| {
            let r: StartRequest = serde_json::from_str(body).expect("request");
            m.start(r, Instant::now(), SystemTime::now())
        };
        let e = start(r#"{"interface":"lo","filter":"udp port"}"#).expect_err("bad filter");
        assert_eq!(e.status, 400, "{e:?}");
        let e = start(r#"{"interface":"no-such-if0"}"#).expect_err("no interface");
        assert_eq!(e.status, 404, "{e:?}");
        let e = start(r#"{"interface":"lo","duration":1e20}"#).expect_err("duration");
        assert_eq!(e.status, 400, "{e:?}");
        let e = start(r#"{"interface":"lo","snaplen":8}"#).expect_err("snaplen");
        assert_eq!(e.status, 400, "{e:?}");
        let e = start(r#"{"interface":"lo","name":"../x"}"#).expect_err("name");
        assert_eq!(e.status, 400, "{e:?}");
        assert!(m.list().is_empty());
        std::fs::remove_dir_all(dir).expect("clean");
    }

    #[test]
    fn test_earlier_captures_are_listed_and_ids_continue() {
        use crate::catalog::{Catalog, Record};
        let dir =
            std::env::temp_dir().join(format!("corecap-manager-earlier-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("spool");
        let record = |id: &str, state: State, file: &str| Record {
            id: id.into(),
            name: None,
            interface: "eth0".into(),
            mode: Mode::Attach,
            filter: None,
            output: OutputKind::Pcapng,
            count: None,
            duration: None,
            requested_at: 1_700_000_000.0,
            ended_at: None,
            state,
            reason: None,
            files: vec![file.into()],
            packets: 5,
            bytes: 500,
            drops: Drops::default(),
            lag_us: None,
            setup_us: 10.0,
            cores: vec![],
            earlier_run: false,
        };
        let earlier = Catalog {
            version: catalog::VERSION,
            next_id: 4,
            captures: vec![
                record("c1", State::Done, "c1.pcapng"),
                record("c2", State::Running, "c2.pcapng"),
                record("c3", State::Running, "c3.pcapng"),
            ],
        };
        catalog::write(&dir, &earlier).expect("catalog");
        // c1 ended whole; c3's writer died, leaving its part; a request named a file c9.
        for f in ["c1.pcapng", ".c3.pcapng.part", "c9.pcapng"] {
            std::fs::write(dir.join(f), b"x").expect("file");
        }
        let open = || {
            let cfg = Config {
                max_captures: 4,
                ..Config::new(Spool::open(&dir, None, None).expect("spool"))
            };
            Manager::new(cfg, vec![])
        };
        let m = open();
        assert_eq!(
            m.notes(),
            ["the earlier run ended while 2 captures ran: c2 failed, c3 recovered"]
        );
        let states = |m: &Manager| -> Vec<(String, State, Option<String>)> {
            m.list()
                .into_iter()
                .inspect(|v| assert!(v.earlier_run, "{v:?}"))
                .map(|v| (v.id, v.state, v.path))
                .collect()
        };
        let at = |f: &str| Some(dir.join(f).display().to_string());
        assert_eq!(
            states(&m),
            [
                ("c1".into(), State::Finished, at("c1.pcapng")),
                ("c2".into(), State::Failed, at("c2.pcapng")),
                ("c3".into(), State::Recovered, at(".c3.pcapng.part")),
            ]
        );
        // Nothing of them runs: they cannot be stopped.
        for id in ["c1", "c2", "c3"] {
            let e = m.stop(id).expect_err("earlier");
            assert_eq!(e.status, 409, "{e:?}");
            assert!(e.message.contains("earlier run"), "{e:?}");
        }
        // Ids go past the catalog's and the spool's names; an unnamed capture passes over
        // an id whose default name a request took meanwhile.
        assert_eq!(m.lock().next_id, 10);
        std::fs::write(dir.join("c10.pcapng"), b"x").expect("file");
        let r: StartRequest = serde_json::from_str(r#"{"interface":"lo"}"#).expect("request");
        let (id, path) = m.fresh_id(&mut m.lock(), &r, false).expect("fresh");
        assert_eq!((id.as_str(), path), ("c11", Some(dir.join("c11.pcapng"))));
        let named: StartRequest =
            serde_json::from_str(r#"{"interface":"lo","name":"c9.pcapng"}"#).expect("request");
        assert_eq!(
            m.fresh_id(&mut m.lock(), &named, false)
                .expect_err("taken")
                .status,
            409
        );
        // The settled catalog is on disk at once.
        let disk = catalog::load(&dir).catalog;
        let got: Vec<(State, bool)> = disk
            .captures
            .iter()
            .map(|r| (r.state, r.earlier_run))
            .collect();
        assert_eq!(
            got,
            [
                (State::Finished, true),
                (State::Failed, true),
                (State::Recovered, true)
            ]
        );
        // The earlier run's counters are not this run's metrics.
        let text = m.metrics();
        assert!(
            text.contains("corecap_captures_earlier{state=\"recovered\"} 1"),
            "{text}"
        );
        assert!(!text.contains("id=\"c1\""), "{text}");
        // A recovery names c3's part later: the listing follows it, and so does the catalog.
        std::fs::rename(
            dir.join(".c3.pcapng.part"),
            dir.join("c3.recovered-20261125T080102Z.pcapng"),
        )
        .expect("rename");
        assert_eq!(
            states(&m)[2],
            (
                "c3".into(),
                State::Recovered,
                at("c3.recovered-20261125T080102Z.pcapng")
            )
        );
        assert_eq!(
            catalog::load(&dir).catalog.captures[2].files,
            ["c3.recovered-20261125T080102Z.pcapng"]
        );
        // A second start over the same spool: the same list, nothing more to say.
        drop(m);
        let m = open();
        assert!(m.notes().is_empty(), "{:?}", m.notes());
        assert_eq!(states(&m).len(), 3);
        assert_eq!(m.lock().next_id, 11);
        std::fs::remove_dir_all(dir).expect("clean");
    }

    /// Issue 40: a request naming a file of the daemon's own form
    /// (`c18446744073709551615.pcapng`) pushed the ids to their end, so that after a
    /// restart every unnamed capture got 409, and the ids then wrapped onto ones in use.
    /// Such names are refused now (400, like an index's name), and a spool that holds one
    /// already (from a daemon before this check) neither stops unnamed captures nor makes
    /// an id come twice.
    #[test]
    fn issue40_ids_are_never_exhausted_nor_given_twice() {
        use crate::catalog::{Catalog, Record};
        let dir =
            std::env::temp_dir().join(format!("corecap-manager-issue40-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("spool");
        let req = |body: &str| -> StartRequest { serde_json::from_str(body).expect("request") };
        let record = |id: &str| Record {
            id: id.into(),
            name: Some(format!("{id}-named.pcapng")),
            interface: "eth0".into(),
            mode: Mode::Attach,
            filter: None,
            output: OutputKind::Pcapng,
            count: None,
            duration: None,
            requested_at: 1_700_000_000.0,
            ended_at: Some(1_700_000_001.0),
            state: State::Done,
            reason: None,
            files: vec![format!("{id}-named.pcapng")],
            packets: 5,
            bytes: 500,
            drops: Drops::default(),
            lag_us: None,
            setup_us: 10.0,
            cores: vec![],
            earlier_run: false,
        };
        let earlier = Catalog {
            version: catalog::VERSION,
            next_id: 3,
            captures: vec![record("c1"), record("c2")],
        };
        catalog::write(&dir, &earlier).expect("catalog");
        for f in ["c18446744073709551615.pcapng", "c3.pcapng"] {
            std::fs::write(dir.join(f), b"x").expect("file");
        }
        let cfg = Config {
            max_captures: 4,
            ..Config::new(Spool::open(&dir, None, None).expect("spool"))
        };
        let m = Manager::new(cfg, vec![]);
        // Names of the daemon's own form and an index's name: 400 before anything starts.
        for bad in [
            "c18446744073709551615.pcapng",
            "c18446744073709551615",
            "c7.pcapng",
            "c99999999999999999999999.pcap",
            "x.pcapng.idx",
        ] {
            let r = req(&format!(r#"{{"interface":"lo","name":"{bad}"}}"#));
            let e = m
                .validate(&r)
                .err()
                .unwrap_or_else(|| panic!("{bad} taken"));
            assert_eq!(e.status, 400, "{bad}: {e:?}");
        }
        for good in ["c.pcapng", "cap7.pcapng", "dns-c7.pcapng", "C7.pcapng"] {
            let r = req(&format!(r#"{{"interface":"lo","name":"{good}"}}"#));
            assert!(m.validate(&r).is_ok(), "{good}");
        }
        // The highest id in the spool is the last there is, and its default name is taken:
        // an unnamed capture gets the lowest id that no capture listed and no file holds.
        let unnamed = req(r#"{"interface":"lo"}"#);
        let (id, path) = m
            .fresh_id(&mut m.lock(), &unnamed, false)
            .expect("an id is left");
        assert_eq!((id.as_str(), path), ("c4", Some(dir.join("c4.pcapng"))));
        // Past the top, never onto an id in use: the next after c18446744073709551615 is
        // again the lowest free one, and the one after it follows.
        {
            let mut g = m.lock();
            g.next_id = u64::MAX;
            let count = req(r#"{"interface":"lo","output":"count"}"#);
            let (top, _) = m.fresh_id(&mut g, &count, false).expect("the top id");
            assert_eq!(top, "c18446744073709551615");
            assert_eq!(m.id_after(&g, u64::MAX), 4);
            assert_eq!(m.id_after(&g, 4), 5);
        }
        std::fs::remove_dir_all(dir).expect("clean");
    }

    #[test]
    fn test_start_errors_get_their_status() {
        let bad = start_error(CaptureError::Config("queue 9 is out of range".into()));
        assert_eq!(bad.status, 400);
        let gone = start_error(CaptureError::Linux(corecap_linux::Error::new(
            corecap_linux::ErrorKind::NoSuchInterface,
            "no interface eth9".to_string(),
        )));
        assert_eq!(gone.status, 404);
        let ring = start_error(CaptureError::Linux(corecap_linux::Error::new(
            corecap_linux::ErrorKind::RingMemory,
            "could not allocate a ring".to_string(),
        )));
        assert_eq!(
            (ring.status, ring.message.as_str()),
            (500, "could not allocate a ring")
        );
        let thread = start_error(CaptureError::System("worker 0: timed out".into()));
        assert_eq!(thread.status, 500);
        let file = start_error(CaptureError::Output("permission denied".into()));
        assert_eq!(file.status, 500);
        assert!(file.message.contains("cannot create the output"));
    }
}
