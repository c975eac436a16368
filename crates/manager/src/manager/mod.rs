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
//!
//! The registry of captures (this module: the manager, its lock, list, show, stop) is
//! split by what a capture goes through: `start` (a request checked, admitted and
//! started), `end` (the housekeeping tick, ends, the refill of workers kept ready, the
//! shutdown), `records` (captures as the spool's catalog keeps them) and `report`
//! (counters, statistics, cores and metrics).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use corecap_engine::capture::{Capture, CaptureError, CaptureErrorKind};
use corecap_engine::control::Attached;
use corecap_engine::sink::ipfix::IpfixTarget;
use corecap_engine::stage::member::MemberLive;
use corecap_engine::standby::Standby;
use corecap_linux::error_chain;
use corecap_store::sealed::KeyFile;

use crate::api::{CaptureView, OutputKind, State};
use crate::catalog::{self, Catalog, Renamed};
use crate::cores::Cores;
use crate::metrics::LagHistogram;
use crate::opener::Opener;
use crate::spool::Spool;
use crate::stats::Stats;

mod end;
mod records;
mod report;
mod start;

use end::*;
use records::*;

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
    /// The recording's holds (`POST /holds`).
    pub holds: Option<Arc<corecap_store::keep::hold::Holds>>,
    /// The follower of Suricata's EVE output (`serve --eve`).
    pub eve: Option<Arc<crate::eve::Eve>>,
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
            holds: None,
            eve: None,
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

/// A started capture: its runner, its cores and its files.
type Started = (Runner, Vec<u32>, Vec<PathBuf>);

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

    /// The recording's holds, if the daemon keeps any.
    pub fn holds(&self) -> Option<&Arc<corecap_store::keep::hold::Holds>> {
        self.cfg.holds.as_ref()
    }

    /// The follower of Suricata's EVE output, if the daemon has one.
    pub fn eve(&self) -> Option<&Arc<crate::eve::Eve>> {
        self.cfg.eve.as_ref()
    }

    /// The retention of the spool and the recording, if the daemon has one.
    pub fn retention(&self) -> Option<&Arc<corecap_store::retention::Retention>> {
        self.cfg.retention.as_ref()
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

/// Microseconds from `since_ns` to `ns` (ns since the epoch; negative when earlier).
fn us_since(ns: u64, since_ns: u64) -> f64 {
    (ns as i128 - since_ns as i128) as f64 / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Drops, Mode, StartRequest};
    use corecap_store::names::suffixed_path;

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

    /// An empty spool folder of test `name`'s own.
    fn empty_spool(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("corecap-manager-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("spool");
        dir
    }

    /// The catalog's record of capture `id` of an earlier run, in `state`, that wrote `file`.
    fn earlier_record(id: &str, state: State, file: &str) -> crate::catalog::Record {
        crate::catalog::Record {
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
        }
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
        use crate::catalog::Catalog;
        let dir = empty_spool("earlier");
        let earlier = Catalog {
            version: catalog::VERSION,
            next_id: 4,
            captures: vec![
                earlier_record("c1", State::Done, "c1.pcapng"),
                earlier_record("c2", State::Running, "c2.pcapng"),
                earlier_record("c3", State::Running, "c3.pcapng"),
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
        let dir = empty_spool("issue40");
        let req = |body: &str| -> StartRequest { serde_json::from_str(body).expect("request") };
        let record = |id: &str| Record {
            name: Some(format!("{id}-named.pcapng")),
            ended_at: Some(1_700_000_001.0),
            ..earlier_record(id, State::Done, &format!("{id}-named.pcapng"))
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
