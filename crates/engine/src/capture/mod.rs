//! A capture: the resolved configuration, the workers it starts, and its summary.
//!
//! [`Capture::start`] works in two steps: `plan` turns the configuration into a plan
//! (inputs and their workers with CPUs, the pcapng interface list, groups and members with
//! their stage CPUs, pipes, and which file gets which interfaces) without touching the
//! machine, and `run` opens, attaches and spawns what the plan says. [`Capture::finish`]
//! (in `finish`) joins it all into a [`Summary`].

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use serde::Serialize;

use crate::capture::spawn::{Stage, StageCtx};
use crate::sink::file::FileSink;
use crate::source::afxdp::XdpSetup;
use crate::stage::member::{MemberLive, MemberOutcome};
use crate::stats::ledger::{Snapshot, WorkerCounters};
use crate::steer::group::{Control as SteerControl, GroupKind, Matrix};
use crate::worker::{Control, Outcome};

mod config;
mod finish;
pub(crate) mod plan;
mod run;
pub(crate) mod spawn;
pub use run::socket_program;

pub use config::{
    Balance, CaptureConfig, CaptureError, CaptureErrorKind, Input, OutputConfig, WorkerInfo,
};

/// A running capture.
#[derive(Debug)]
pub struct Capture {
    /// The shared control block (stop flag, count budget).
    pub control: Arc<Control>,
    /// Per-worker counters.
    pub counters: Vec<Arc<WorkerCounters>>,
    /// Static description of the workers.
    pub workers: Vec<WorkerInfo>,
    /// What the capture wants the user to know (XDP modes, fallbacks).
    pub notes: Vec<String>,
    /// The capture files it writes as it starts (`-w`'s path, or one per worker or group
    /// member: FILE.wN, FILE.gGmI), before rotation numbers them.
    pub files: Vec<std::path::PathBuf>,
    pub(crate) handles: Vec<JoinHandle<Outcome>>,
    merge: Option<JoinHandle<(FileSink, crate::sink::merge::Unwritten)>>,
    pub(crate) stages: Vec<Stage>,
    pub(crate) group_kinds: Vec<GroupKind>,
    /// Per worker: its control ring and the epoch it has applied.
    pub(crate) controls: Vec<(rtrb::Producer<SteerControl>, Arc<AtomicU64>)>,
    /// The published matrix and what it takes to start a member.
    pub(crate) matrix: Option<(Arc<ArcSwap<Matrix>>, StageCtx)>,
    pub(crate) epoch: u64,
    /// Next member index of each group (file names stay unique across joins).
    pub(crate) next_index: Vec<usize>,
    xdp: Vec<Arc<XdpSetup>>,
    retention: Option<Arc<corecap_store::retention::Retention>>,
    /// Files a crash left, recovered at the start.
    pub recovered: Vec<corecap_store::recover::Recovered>,
    /// The output folder, when it had no catalog before this start.
    pub(crate) new_catalog: Option<std::path::PathBuf>,
    /// The claim on the output's name, held while the capture runs (released when it is
    /// dropped, after its files are closed).
    pub(crate) claim: Option<corecap_store::lock::WriterLock>,
    started: Instant,
    duration: Option<Duration>,
}

/// The end of a capture.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// Totals over all workers (plus merge-writer drops in `app_drops`).
    pub total: Snapshot,
    /// Per worker.
    pub workers: Vec<(WorkerInfo, Snapshot)>,
    /// Seconds the capture ran.
    pub seconds: f64,
    /// Files written.
    pub files: Vec<PathBuf>,
    /// Errors that ended workers early (e.g. a truncated input file).
    pub errors: Vec<String>,
    /// Consumer groups, in pipeline mode.
    pub groups: Vec<GroupSummary>,
    /// What the user should know about the files (a filesystem without direct I/O).
    pub notes: Vec<String>,
    /// Files and bytes that `--retain` deleted.
    pub retention: Option<(u64, u64)>,
    /// Files a crash left, recovered at the start.
    pub recovered: Vec<corecap_store::recover::Recovered>,
}

/// A member of a group in the summary.
#[derive(Clone, Debug, Serialize)]
pub struct MemberSummary {
    /// Member index in its group.
    pub id: usize,
    /// Stage CPU.
    pub cpu: Option<u32>,
    /// Packets the workers handed to it.
    pub steered: u64,
    /// Packets lost because its pipe was full.
    pub stage_full: u64,
    /// Its app's result.
    #[serde(flatten)]
    pub outcome: MemberOutcome,
}

/// A consumer group in the summary.
#[derive(Clone, Debug, Serialize)]
pub struct GroupSummary {
    /// Group index.
    pub id: usize,
    /// Copy or balance.
    pub kind: GroupKind,
    /// Packets its filter rejected.
    pub filtered: u64,
    /// Its members.
    pub members: Vec<MemberSummary>,
}

impl Capture {
    /// Checks the configuration, opens outputs and starts the workers. Returns once every
    /// worker's socket is open and joined, so traffic sent after this is captured.
    ///
    /// It plans (`plan::plan`, with the machine's facts read from the kernel), then runs
    /// the plan (`run::run`).
    pub fn start(cfg: &CaptureConfig) -> Result<Self, CaptureError> {
        let plan = plan::plan(cfg, &run::Machine)?;
        run::run(plan)
    }

    /// Current per-worker counters.
    pub fn snapshot(&self) -> Vec<Snapshot> {
        self.counters.iter().map(|c| c.read()).collect()
    }

    /// The running counters of the members of the capture's own groups (not of attached
    /// consumers), each with its group: readable while the capture runs, and final once
    /// [`Capture::finish`] has joined them (keep the `Arc`s to read them then).
    pub fn members(&self) -> Vec<(usize, Arc<MemberLive>)> {
        self.stages
            .iter()
            .filter_map(|s| Some((s.group, s.live.clone()?)))
            .collect()
    }

    /// Whether the capture has ended by itself (count, duration, end of files, error).
    pub fn done(&self) -> bool {
        if let Some(d) = self.duration {
            if self.started.elapsed() >= d {
                self.control.stop.store(true, Ordering::Relaxed);
            }
        }
        self.control.stop.load(Ordering::Relaxed) || self.handles.iter().all(|h| h.is_finished())
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Asks every worker to stop.
    pub fn stop(&self) {
        self.control.stop.store(true, Ordering::Relaxed);
    }
}
