//! Starting a member's stage thread: its pipes from the workers, its file and flow table,
//! and the thread itself, at the capture's start (from the plan) and when a member joins
//! or a consumer attaches later.

use std::sync::Arc;
use std::thread::JoinHandle;

use corecap_wire::pcapng::InterfaceDesc;

use crate::capture::config::{CaptureError, OutputConfig};
use crate::capture::plan::MemberPlan;
use crate::sink::file::FileSink;
use crate::stage::flows::{FlowConfig, FlowOutput, FlowTable};
use crate::stage::member::{self, MemberLimits, MemberLive, MemberOutcome};
use crate::stage::pipe;

/// A member's stage thread.
#[derive(Debug)]
pub(crate) struct Stage {
    pub(crate) group: usize,
    pub(crate) index: usize,
    pub(crate) member: usize,
    pub(crate) cpu: Option<u32>,
    pub(crate) handle: JoinHandle<MemberOutcome>,
    /// Its running counters, for a member of the capture's own groups (an attached
    /// consumer's are its owner's).
    pub(crate) live: Option<Arc<MemberLive>>,
}

/// What it takes to start a member's stage thread.
#[derive(Clone, Debug)]
pub(crate) struct StageCtx {
    pub(crate) output: Option<OutputConfig>,
    pub(crate) flows: Option<FlowOutput>,
    pub(crate) ifaces: Vec<InterfaceDesc>,
    pub(crate) snaplen: u32,
    pub(crate) stage_cpus: Vec<u32>,
    pub(crate) pin: bool,
    pub(crate) transport: pipe::Transport,
}

/// The pipes of one member: an end for each worker, and the member's ends (spsc: a ring
/// of 256 batches per worker; mpsc: one PFQ queue of 4 MiB per buffer, shared).
pub(crate) fn member_pipes(
    t: pipe::Transport,
    workers: usize,
) -> (Vec<pipe::PipeTx>, Vec<pipe::PipeRx>) {
    match t {
        pipe::Transport::Spsc => (0..workers).map(|_| pipe::pipe(256)).unzip(),
        pipe::Transport::Mpsc => {
            let (tx, rx) = pipe::mpsc_pipes(workers, 4 << 20);
            (tx, vec![rx])
        }
    }
}

/// The pipes of one of the capture's own members, as [`member_pipes`], with the counters
/// it publishes while it runs: the workers' ends count their losses into its
/// `stage_full`.
pub(crate) fn counted_member_pipes(
    t: pipe::Transport,
    workers: usize,
) -> (Vec<pipe::PipeTx>, Vec<pipe::PipeRx>, Arc<MemberLive>) {
    let live = Arc::new(MemberLive::default());
    let (mut txs, rxs) = member_pipes(t, workers);
    for tx in &mut txs {
        tx.count_losses_into(live.stage_full.clone());
    }
    (txs, rxs, live)
}

impl StageCtx {
    /// Member `m`, `i` of group `g`, as the plan would have it: for a member that joins
    /// while the capture runs.
    pub(crate) fn member(&self, g: usize, i: usize, m: usize) -> MemberPlan {
        MemberPlan::new(
            (g, i, m),
            &self.stage_cpus,
            self.pin,
            self.output.as_ref().map(|o| o.path.as_path()),
            self.flows.as_ref().and_then(|f| f.file.as_deref()),
        )
    }

    /// Opens a member's file and flow table where its plan says and starts its thread,
    /// which publishes its counters in `live`.
    pub(crate) fn spawn(
        &self,
        p: &MemberPlan,
        rx: Vec<pipe::PipeRx>,
        live: Arc<MemberLive>,
    ) -> Result<Stage, CaptureError> {
        let sink = match (&self.output, &p.file) {
            (Some(o), Some(path)) => {
                Some(o.sink(path.clone(), self.ifaces.clone(), self.snaplen)?)
            }
            _ => None,
        };
        let flows = match &self.flows {
            Some(f) => Some(
                FlowTable::open(
                    p.flows_file.as_deref(),
                    f.ipfix.as_ref(),
                    &format!("g{}m{}", p.group, p.index),
                    self.ifindexes(),
                    FlowConfig::default(),
                )
                .map_err(|e| CaptureError::Output(e.to_string()))?,
            ),
            None => None,
        };
        // A recording's member cuts the flows it writes, as a worker with a file does.
        let cutoff = match self.output.as_ref().and_then(|o| o.cutoff.as_ref()) {
            Some(c) if sink.is_some() && c.cuts() => Some(crate::cutoff::Cutoff::new(
                crate::cutoff::Classes::compile(c, &self.ifaces, self.snaplen)?,
            )),
            _ => None,
        };
        let limits = MemberLimits {
            live: Some(live.clone()),
            cutoff,
            ..MemberLimits::default()
        };
        let mut stage = Self::start(
            (p.group, p.index, p.member),
            p.cpu,
            rx,
            sink,
            flows,
            limits,
            None,
        )?;
        stage.live = Some(live);
        Ok(stage)
    }

    /// The interface index of each input (`IF` or `IF@Q`), 0 for a file or an interface
    /// that is gone: IPFIX ingressInterface.
    pub(crate) fn ifindexes(&self) -> Vec<u32> {
        self.ifaces
            .iter()
            .map(|d| {
                let name = d.name.split('@').next().unwrap_or(&d.name);
                corecap_linux::netdev::ifindex(name).unwrap_or(0)
            })
            .collect()
    }

    /// Starts the stage thread of member `m`, `i` of group `g` (`gGmI`), with its apps.
    pub(crate) fn start(
        (g, i, m): (usize, usize, usize),
        cpu: Option<u32>,
        rx: Vec<pipe::PipeRx>,
        sink: Option<FileSink>,
        flows: Option<FlowTable>,
        limits: MemberLimits,
        lookback: Option<member::Lookback>,
    ) -> Result<Stage, CaptureError> {
        let handle = std::thread::Builder::new()
            .name(format!("corecap-g{g}m{i}"))
            .spawn(move || member::run(cpu, rx, sink, flows, limits, lookback))
            .map_err(|e| CaptureError::System(format!("cannot start a stage thread: {e}")))?;
        Ok(Stage {
            group: g,
            index: i,
            member: m,
            cpu,
            handle,
            live: None,
        })
    }
}
