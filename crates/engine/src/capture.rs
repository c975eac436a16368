//! A capture: the resolved configuration, the workers it starts, and its summary.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use corecap_linux::abi::sock_filter;
use corecap_linux::{filter, netdev, FanoutMode, RingConfig};
use corecap_wire::pcapng::InterfaceDesc;
use serde::Serialize;

use crate::sink::file::{suffixed_path, FileConfig, FileSink, Format, Rotation};
use crate::sink::merge::{self, MergeHandle};
use crate::source::afpacket::{FanoutGroup, LiveSpec};
use crate::source::afxdp::XdpSetup;
use crate::source::replay::FileSpec;
use crate::stage::member::{self as stage_member, MemberLimits, MemberOutcome};
use crate::stage::pipe;
use crate::stats::ledger::{Snapshot, WorkerCounters};
use crate::steer::consumers::compile_filter;
use crate::steer::group::{
    Control as SteerControl, Group, GroupKind, GroupSpec, Matrix, Steer, SteerCounts,
};
use crate::steer::indirection::Indirection;
use crate::worker::{self, App, Control, Outcome, Source, Worker};
use arc_swap::ArcSwap;
use std::sync::atomic::AtomicU64;

/// How packets of an interface are spread over its workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    /// Symmetric flow hash: both directions of a flow on one worker.
    Flow,
    /// By RX queue: worker i gets queue i.
    Queue,
    /// By the CPU that received the packet.
    Cpu,
    /// Round robin.
    RoundRobin,
    /// Fill one worker, then overflow to the next.
    Rollover,
}

impl Balance {
    fn fanout(self) -> FanoutMode {
        match self {
            Balance::Flow => FanoutMode::Hash,
            Balance::Queue => FanoutMode::Queue,
            Balance::Cpu => FanoutMode::Cpu,
            Balance::RoundRobin => FanoutMode::RoundRobin,
            Balance::Rollover => FanoutMode::Rollover,
        }
    }
}

/// An interface to capture on: all of it, or one RX queue (`IF@Q`, a virtual adapter),
/// through AF_PACKET or (with the `xdp:` prefix) AF_XDP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    /// Interface name.
    pub iface: String,
    /// RX queue, for a virtual adapter.
    pub queue: Option<u16>,
    /// Capture through AF_XDP instead of AF_PACKET.
    pub xdp: bool,
}

impl Input {
    /// Parses `eth0`, `eth0@2`, `xdp:eth0` or `xdp:eth0@2`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (xdp, rest) = match s.strip_prefix("xdp:") {
            Some(r) => (true, r),
            None => (false, s),
        };
        if rest.is_empty() {
            return Err(format!("empty interface name in '{s}'"));
        }
        match rest.rsplit_once('@') {
            Some((i, q)) => {
                let q = q
                    .parse()
                    .map_err(|_| format!("bad queue number in '{s}' (expected IF@QUEUE)"))?;
                Ok(Self {
                    iface: i.to_owned(),
                    queue: Some(q),
                    xdp,
                })
            }
            None => Ok(Self {
                iface: rest.to_owned(),
                queue: None,
                xdp,
            }),
        }
    }

    /// `eth0`, `eth0@2`, `xdp:eth0`...
    pub fn label(&self) -> String {
        let p = if self.xdp { "xdp:" } else { "" };
        match self.queue {
            Some(q) => format!("{p}{}@{q}", self.iface),
            None => format!("{p}{}", self.iface),
        }
    }
}

/// Where and how to write packets.
#[derive(Clone, Debug)]
pub struct OutputConfig {
    /// `-w` path; `-` is standard output.
    pub path: PathBuf,
    /// pcapng or pcap.
    pub format: Format,
    /// One file in timestamp order instead of one file per worker.
    pub merge: bool,
    /// Rotation.
    pub rotation: Rotation,
    /// Encryption at rest (sealed files), if asked for.
    pub seal: Option<crate::sink::sealed::SealConfig>,
    /// Write with direct I/O where the filesystem allows it (`--no-direct`: false).
    pub direct: bool,
    /// Keep the newest whole files under a byte budget (`--retain`).
    pub retention: Option<Arc<crate::sink::disk::Retention>>,
    /// Write each file's index beside it (`--no-index`: false).
    pub index: bool,
    /// The user the files are given to (`-Z`): the process runs as them once started.
    pub owner: Option<corecap_linux::privilege::RunAs>,
}

impl OutputConfig {
    /// Opens a file sink at `path` (the `-w` path itself or one suffixed per worker or
    /// member) describing `interfaces`, with this output's format, rotation and sealing.
    pub(crate) fn sink(
        &self,
        path: PathBuf,
        interfaces: Vec<InterfaceDesc>,
        snaplen: u32,
    ) -> Result<FileSink, CaptureError> {
        FileSink::create(FileConfig {
            path,
            format: self.format,
            rotation: self.rotation,
            interfaces,
            snaplen,
            seal: self.seal.clone(),
            direct: self.direct,
            retention: self.retention.clone(),
            index: self.index,
            owner: self.owner.clone(),
        })
        .map_err(|e| CaptureError::Output(e.to_string()))
    }
}

/// A resolved capture configuration.
#[derive(Clone, Debug)]
pub struct CaptureConfig {
    /// Live inputs.
    pub inputs: Vec<Input>,
    /// File inputs (`-r`).
    pub files: Vec<PathBuf>,
    /// Workers per whole interface (or for files).
    pub workers: usize,
    /// CPUs to pin workers to, in order (reused round robin).
    pub cpus: Vec<u32>,
    /// Pin each worker to its CPU (false leaves placement to the scheduler).
    pub pin: bool,
    /// Spreading mode.
    pub balance: Balance,
    /// tcpdump filter expression.
    pub filter: Option<String>,
    /// Bytes kept of each packet.
    pub snaplen: u32,
    /// Ring bytes per worker.
    pub ring_bytes: u64,
    /// Ring block size.
    pub block_size: u32,
    /// Block retire timeout in ms.
    pub block_timeout_ms: u32,
    /// Stop after this many packets.
    pub count: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Output files.
    pub output: Option<OutputConfig>,
    /// Consumer groups; non-empty means pipeline mode (apps on stage threads).
    pub groups: Vec<GroupSpec>,
    /// CPUs for the stage threads (group members), reused round robin.
    pub stage_cpus: Vec<u32>,
    /// Flow records: JSON lines written per stage thread (`FILE.gGmM`) and/or IPFIX
    /// export, one exporter per stage thread, all in one observation domain.
    pub flows: Option<crate::stage::flows::FlowOutput>,
    /// How packets travel from the workers to the stage threads.
    pub transport: pipe::Transport,
    /// Steer even with no groups, so that consumers can attach while it runs
    /// ([`Capture::attach`]): the base capture of the on-demand manager.
    pub attachable: bool,
    /// A socket opened ahead of need, taken by a single-socket capture on its interface
    /// with the same ring geometry.
    pub spare: Option<crate::source::afpacket::Spare>,
    /// AF_XDP sockets (and workers) per RX queue, spread by flow in the XDP program.
    pub xdp_spread: u32,
}

impl Default for CaptureConfig {
    /// Nothing to capture yet: one worker per RX queue, pinned, flow balance, whole
    /// packets, a 64 MiB ring of 1 MiB blocks retired after 10 ms, no output (counting).
    /// Callers set what they resolved and take the rest from here.
    fn default() -> Self {
        Self {
            inputs: Vec::new(),
            files: Vec::new(),
            workers: 0,
            cpus: Vec::new(),
            pin: true,
            balance: Balance::Flow,
            filter: None,
            snaplen: 262_144,
            ring_bytes: 64 << 20,
            block_size: 1 << 20,
            block_timeout_ms: 10,
            count: None,
            duration: None,
            output: None,
            groups: Vec::new(),
            stage_cpus: Vec::new(),
            flows: None,
            transport: pipe::Transport::default(),
            attachable: false,
            spare: None,
            xdp_spread: 1,
        }
    }
}

/// What kind of failure stopped a capture from starting: what the user can do about it
/// (the daemon answers 400, 404 or 500 by it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CaptureErrorKind {
    /// The configuration or request is wrong: a bad filter, a queue out of range, an
    /// unreadable input file. Fix the request.
    Invalid,
    /// An interface does not exist.
    NotFound,
    /// The machine refused: the kernel, memory, a thread, an output file, a timeout.
    System,
}

/// Errors that stop a capture before it starts.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// A kernel interface failed.
    #[error(transparent)]
    Linux(#[from] corecap_linux::Error),
    /// The configuration is not possible.
    #[error("{0}")]
    Config(String),
    /// An output file could not be created.
    #[error("{0}")]
    Output(String),
    /// A thread could not start, or a worker could not open its source.
    #[error("{0}")]
    System(String),
}

impl CaptureError {
    /// What kind of failure it is.
    pub fn kind(&self) -> CaptureErrorKind {
        use corecap_linux::ErrorKind as K;
        match self {
            CaptureError::Linux(e) => match e.kind() {
                K::NoSuchInterface => CaptureErrorKind::NotFound,
                K::Filter => CaptureErrorKind::Invalid,
                _ => CaptureErrorKind::System,
            },
            CaptureError::Config(_) => CaptureErrorKind::Invalid,
            CaptureError::Output(_) | CaptureError::System(_) => CaptureErrorKind::System,
        }
    }
}

/// A worker's line in the summary.
#[derive(Clone, Debug, Serialize)]
pub struct WorkerInfo {
    /// Worker index.
    pub id: usize,
    /// CPU it is pinned to.
    pub cpu: Option<u32>,
    /// Input it reads (`eth0`, `eth0@1`, or `files`).
    pub input: String,
    /// RX queue of all its packets, when known.
    pub queue: Option<u32>,
}

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
    pub(crate) handles: Vec<JoinHandle<Outcome>>,
    merge: Option<JoinHandle<(FileSink, u64)>>,
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
    retention: Option<Arc<crate::sink::disk::Retention>>,
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

fn compile(
    input: &Input,
    linktype: u16,
    expr: Option<&str>,
    snaplen: u32,
) -> Result<Vec<sock_filter>, CaptureError> {
    let prog = match expr {
        Some(e) => filter::compile_for_socket(&input.iface, linktype, e, snaplen)?,
        None => filter::accept_all(snaplen),
    };
    Ok(match input.queue {
        Some(q) => filter::queue_prefix(q, &prog),
        None => prog,
    })
}

/// What planning the live inputs fills in.
struct Inputs<'a> {
    ifaces: &'a mut Vec<InterfaceDesc>,
    specs: &'a mut Vec<(WorkerInfo, Source)>,
    xdp: &'a mut Vec<Arc<XdpSetup>>,
    notes: &'a mut Vec<String>,
}

impl Inputs<'_> {
    /// One `-i IF[@Q]`: its interface description and its workers (AF_PACKET sockets in a
    /// fanout group, or AF_XDP sockets after the XDP program is attached).
    fn add(
        &mut self,
        cfg: &CaptureConfig,
        input: &Input,
        cpus: &[u32],
        ring: RingConfig,
        take_cpu: &mut dyn FnMut() -> u32,
    ) -> Result<(), CaptureError> {
        let ifindex = netdev::ifindex(&input.iface)?;
        let linktype = netdev::linktype(&input.iface)?;
        let queues = netdev::rx_queues(&input.iface)?;
        if let Some(q) = input.queue {
            if u32::from(q) >= queues {
                return Err(CaptureError::Config(format!(
                    "{} has {queues} RX queue{}; queue {q} is out of range (0..{})",
                    input.iface,
                    if queues == 1 { "" } else { "s" },
                    queues - 1
                )));
            }
        }
        let if_id = self.ifaces.len() as u32;
        if input.xdp {
            self.ifaces.push(InterfaceDesc {
                name: input.label(),
                description: Some(format!("{} captured by corecap", input.label())),
                linktype,
                snaplen: cfg.snaplen,
            });
            let setup = Arc::new(XdpSetup::new(
                &input.iface,
                ifindex,
                queues,
                cfg.xdp_spread,
            )?);
            // Attach first: a queue without a socket yet passes its frames to the stack,
            // and an interface that has another XDP program fails here, before any socket.
            let mode = setup.attach()?;
            if mode == corecap_linux::xsk::AttachMode::Generic {
                self.notes.push(format!(
                    "warning: {} does not support native XDP; using generic (skb) XDP, which is slower",
                    input.iface
                ));
            }
            self.xdp.push(setup.clone());
            let filter = cfg
                .filter
                .as_deref()
                .map(|e| compile_filter(linktype, cfg.snaplen, e))
                .transpose()?;
            let qs: Vec<u32> = match input.queue {
                Some(q) => vec![u32::from(q)],
                None => (0..queues).collect(),
            };
            let spread = setup.spread;
            for (k, (q, slot)) in qs
                .iter()
                .flat_map(|&q| (0..spread).map(move |s| (q, s)))
                .enumerate()
            {
                let at = if spread > 1 { k } else { q as usize };
                let cpu = cpus[at % cpus.len()];
                let label = if spread > 1 {
                    format!("{}#{slot}", input.label())
                } else {
                    input.label()
                };
                self.specs.push((
                    WorkerInfo {
                        id: self.specs.len(),
                        cpu: Some(cpu),
                        input: label,
                        queue: Some(q),
                    },
                    Source::Xdp {
                        setup: setup.clone(),
                        queue: q,
                        slot,
                        if_id,
                        filter: filter.clone(),
                        snaplen: cfg.snaplen,
                    },
                ));
            }
            return Ok(());
        }
        let prog = compile(input, linktype, cfg.filter.as_deref(), cfg.snaplen)?;
        self.ifaces.push(InterfaceDesc {
            name: input.label(),
            description: Some(format!("{} captured by corecap", input.label())),
            linktype,
            snaplen: cfg.snaplen,
        });
        let n = match (input.queue, cfg.balance) {
            (Some(_), _) => 1,
            (None, Balance::Queue) if cfg.workers == 0 => queues as usize,
            // One worker per RX queue (TNAPI), at most one per CPU.
            (None, _) if cfg.workers == 0 => (queues as usize).clamp(1, cpus.len()),
            (None, _) => cfg.workers,
        };
        let group = (n > 1).then(|| Arc::new(FanoutGroup::default()));
        for member in 0..n {
            let queue = match (input.queue, cfg.balance) {
                (Some(q), _) => Some(u32::from(q)),
                (None, Balance::Queue) if n as u32 == queues => Some(member as u32),
                (None, _) if queues == 1 => Some(0),
                _ => None,
            };
            let spec = LiveSpec {
                iface: input.iface.clone(),
                ifindex,
                fanout: cfg.balance.fanout(),
                group: group.clone(),
                member,
                ring,
                filter: prog.clone(),
                spare: cfg.spare.clone(),
            };
            let cpu = match input.queue {
                Some(q) => cpus[q as usize % cpus.len()],
                None => take_cpu(),
            };
            self.specs.push((
                WorkerInfo {
                    id: self.specs.len(),
                    cpu: Some(cpu),
                    input: input.label(),
                    queue,
                },
                Source::Live { spec, if_id, queue },
            ));
        }
        Ok(())
    }
}

/// The consumer groups of `--groups`, with their filters compiled; their kinds; and for
/// each member, its (group, index in the group).
#[allow(clippy::type_complexity)]
fn build_groups(
    cfg: &CaptureConfig,
    lt: u16,
) -> Result<(Vec<Group>, Vec<GroupKind>, Vec<(usize, usize)>), CaptureError> {
    let mut kinds = Vec::new();
    let mut groups = Vec::new();
    let mut member_of = Vec::new(); // (group, member-in-group)
    for (gi, gs) in cfg.groups.iter().enumerate() {
        let filter = gs
            .filter
            .as_deref()
            .map(|e| compile_filter(lt, cfg.snaplen, e))
            .transpose()?;
        groups.push(Group {
            kind: gs.kind,
            table: Indirection::new(gs.members),
            filter,
            snaplen: gs.snaplen.unwrap_or(cfg.snaplen),
            members: (member_of.len()..member_of.len() + usize::from(gs.members)).collect(),
        });
        kinds.push(gs.kind);
        member_of.extend((0..usize::from(gs.members)).map(|m| (gi, m)));
    }
    Ok((groups, kinds, member_of))
}

/// The workers of `-r FILE...`: every worker reads every file and keeps its share of the
/// flows; each file is one interface of the output.
fn file_specs(
    cfg: &CaptureConfig,
    ifaces: &mut Vec<InterfaceDesc>,
    specs: &mut Vec<(WorkerInfo, Source)>,
    take_cpu: &mut dyn FnMut() -> u32,
) -> Result<(), CaptureError> {
    let n = cfg.workers.max(1);
    let mut files = Vec::new();
    for path in &cfg.files {
        let r = corecap_wire::read::CaptureReader::open(path)
            .map_err(|e| CaptureError::Config(format!("{}: {e}", path.display())))?;
        let lt = r.interfaces().first().map_or(1, |i| i.linktype);
        let filter = cfg
            .filter
            .as_deref()
            .map(|e| compile_filter(lt, cfg.snaplen, e))
            .transpose()?;
        files.push(FileSpec {
            path: path.clone(),
            if_id: ifaces.len() as u32,
            filter,
        });
        ifaces.push(InterfaceDesc {
            name: path.display().to_string(),
            description: None,
            linktype: lt,
            snaplen: cfg.snaplen,
        });
    }
    for _ in 0..n {
        let cpu = if cfg.cpus.is_empty() {
            None
        } else {
            Some(take_cpu())
        };
        specs.push((
            WorkerInfo {
                id: specs.len(),
                cpu,
                input: "files".into(),
                queue: None,
            },
            Source::Files {
                files: files.clone(),
                workers: n,
            },
        ));
    }
    Ok(())
}

impl Capture {
    /// Checks the configuration, opens outputs and starts the workers. Returns once every
    /// worker's socket is open and joined, so traffic sent after this is captured.
    pub fn start(cfg: &CaptureConfig) -> Result<Self, CaptureError> {
        let mut specs: Vec<(WorkerInfo, Source)> = Vec::new();
        let mut ifaces: Vec<InterfaceDesc> = Vec::new();
        let cpus = if cfg.cpus.is_empty() {
            corecap_linux::affinity::allowed_cpus()
        } else {
            cfg.cpus.clone()
        };
        let ring = RingConfig::with_size(cfg.ring_bytes, cfg.block_size, cfg.block_timeout_ms);
        let mut next_cpu = 0usize;
        let mut xdp: Vec<Arc<XdpSetup>> = Vec::new();
        let mut xdp_notes: Vec<String> = Vec::new();
        // With no --cpus, workers take CPUs from the end of the allowed list: interrupts and
        // the softirq work of a NIC usually land on the first CPUs, and a capture worker on
        // the same core as its packets' receive work costs several times more per packet
        // (paper 001, test 3). With --cpus the list is taken in the order given.
        let from_end = cfg.cpus.is_empty();
        let mut take_cpu = || {
            let k = next_cpu % cpus.len();
            next_cpu += 1;
            if from_end {
                cpus[cpus.len() - 1 - k]
            } else {
                cpus[k]
            }
        };
        let mut inputs = Inputs {
            ifaces: &mut ifaces,
            specs: &mut specs,
            xdp: &mut xdp,
            notes: &mut xdp_notes,
        };
        for input in &cfg.inputs {
            inputs.add(cfg, input, &cpus, ring, &mut take_cpu)?;
        }
        if !cfg.files.is_empty() {
            file_specs(cfg, &mut ifaces, &mut specs, &mut take_cpu)?;
        }
        if specs.is_empty() {
            return Err(CaptureError::Config(
                "nothing to capture: give -i IF or -r FILE".into(),
            ));
        }
        // Outputs are opened before any worker starts, so an unwritable path fails early.
        let nworkers = specs.len();
        let mut apps: Vec<App> = Vec::with_capacity(nworkers);
        let mut merge = None;
        let mut stages = Vec::new();
        let mut group_kinds = Vec::new();
        let mut controls = Vec::new();
        let mut matrix = None;
        let mut next_index: Vec<usize> = Vec::new();
        let pipeline = !cfg.groups.is_empty() || cfg.attachable;
        if pipeline {
            if cfg
                .output
                .as_ref()
                .is_some_and(|o| o.merge || o.path.as_os_str() == "-")
            {
                return Err(CaptureError::Config(
                    "--merge and -w - do not combine with --groups".into(),
                ));
            }
            let lt = ifaces.first().map_or(1, |i| i.linktype);
            let (groups, kinds, member_of) = build_groups(cfg, lt)?;
            group_kinds = kinds;
            let stage_cpus = if cfg.stage_cpus.is_empty() {
                cpus.clone()
            } else {
                cfg.stage_cpus.clone()
            };
            // Each member gets an end per worker (spsc: a ring each; mpsc: one shared queue).
            let mut txs: Vec<Vec<pipe::PipeTx>> = (0..nworkers).map(|_| Vec::new()).collect();
            let mut rxs: Vec<Vec<pipe::PipeRx>> = Vec::new();
            for _ in 0..member_of.len() {
                let (t, r) = member_pipes(cfg.transport, nworkers);
                for (w, tx) in t.into_iter().enumerate() {
                    txs[w].push(tx);
                }
                rxs.push(r);
            }
            let stage_ctx = StageCtx {
                output: cfg.output.clone(),
                flows: cfg.flows.clone(),
                ifaces: ifaces.clone(),
                snaplen: cfg.snaplen,
                stage_cpus: stage_cpus.clone(),
                pin: cfg.pin,
                transport: cfg.transport,
            };
            for (m, rx) in rxs.into_iter().enumerate() {
                let (g, i) = member_of[m];
                stages.push(stage_ctx.spawn(g, i, m, rx)?);
            }
            next_index = cfg.groups.iter().map(|g| usize::from(g.members)).collect();
            let shared = Arc::new(ArcSwap::from_pointee(Matrix { groups }));
            for tx in txs {
                let (ctl_tx, ctl_rx) = rtrb::RingBuffer::new(64);
                let ack = Arc::new(AtomicU64::new(0));
                controls.push((ctl_tx, ack.clone()));
                apps.push(App::Steer(Box::new(Steer::new(
                    shared.clone(),
                    tx,
                    ctl_rx,
                    ack,
                ))));
            }
            matrix = Some((shared, stage_ctx));
        }
        let control = Arc::new(Control::new(cfg.count));
        match &cfg.output {
            _ if pipeline => {}
            None => apps.extend((0..nworkers).map(|_| App::Count)),
            Some(o) if o.merge || o.path.as_os_str() == "-" || nworkers == 1 => {
                let sink = o.sink(o.path.clone(), ifaces.clone(), cfg.snaplen)?;
                if nworkers == 1 {
                    apps.push(App::File(Box::new(sink)));
                } else {
                    let (tx, rx) = std::sync::mpsc::sync_channel(256);
                    apps.extend((0..nworkers).map(|w| App::Merge(MergeHandle::new(w, tx.clone()))));
                    let ctl = control.clone();
                    merge = Some(
                        std::thread::Builder::new()
                            .name("corecap-merge".into())
                            .spawn(move || {
                                let _ = corecap_linux::privilege::drop_thread_capabilities();
                                merge::run(rx, nworkers, sink, &ctl)
                            })
                            .map_err(|e| {
                                CaptureError::System(format!("cannot start the merge thread: {e}"))
                            })?,
                    );
                }
            }
            Some(o) => {
                for (info, src) in &specs {
                    let interfaces = match src {
                        Source::Live { if_id, .. } | Source::Xdp { if_id, .. } => {
                            vec![ifaces[*if_id as usize].clone()]
                        }
                        Source::Files { .. } => ifaces.clone(),
                    };
                    let path = suffixed_path(&o.path, &format!("w{}", info.id));
                    let sink = o.sink(path, interfaces, cfg.snaplen)?;
                    apps.push(App::File(Box::new(sink)));
                }
            }
        }
        // A worker with its own file numbers its one interface 0.
        let own_file = matches!(apps.first(), Some(App::File(_))) && nworkers > 1;
        let mut counters = Vec::new();
        let mut handles = Vec::new();
        let mut infos = Vec::new();
        for ((mut info, mut source), app) in specs.into_iter().zip(apps) {
            if !cfg.pin {
                info.cpu = None;
            }
            if own_file {
                if let Source::Live { if_id, .. } | Source::Xdp { if_id, .. } = &mut source {
                    *if_id = 0;
                }
            }
            let c = Arc::new(WorkerCounters::default());
            counters.push(c.clone());
            let ctl = control.clone();
            let w = Worker {
                id: info.id,
                cpu: info.cpu,
                source,
                app,
            };
            let h = std::thread::Builder::new()
                .name(format!("corecap-w{}", info.id))
                .spawn(move || worker::run(w, ctl, c))
                .map_err(|e| CaptureError::System(format!("cannot start a worker thread: {e}")))?;
            handles.push(h);
            infos.push(info);
        }
        let mut cap = Capture {
            control,
            counters,
            workers: infos,
            notes: Vec::new(),
            handles,
            merge,
            stages,
            group_kinds,
            controls,
            matrix,
            epoch: 0,
            next_index,
            xdp,
            retention: cfg.output.as_ref().and_then(|o| o.retention.clone()),
            started: Instant::now(),
            duration: cfg.duration,
        };
        // Wait until every worker has opened its source (or failed).
        while cap.control.ready.load(Ordering::Acquire) < nworkers as u64 {
            if cap.handles.iter().all(|h| h.is_finished()) {
                break;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        if !cap.control.stop.load(Ordering::Relaxed) {
            cap.notes = xdp_notes;
            for x in &cap.xdp {
                if let Some(mode) = x.attach_mode() {
                    cap.notes.push(format!(
                        "{}: {}",
                        x.iface,
                        crate::source::afxdp::describe(mode, x.bind_mode())
                    ));
                }
            }
        }
        if cap.control.stop.load(Ordering::Relaxed) {
            let s = cap.finish();
            let msg = s
                .errors
                .first()
                .cloned()
                .unwrap_or_else(|| "capture failed to start".into());
            return Err(CaptureError::System(msg));
        }
        Ok(cap)
    }

    /// Current per-worker counters.
    pub fn snapshot(&self) -> Vec<Snapshot> {
        self.counters.iter().map(|c| c.read()).collect()
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

    /// Stops, waits for the workers and the merge writer, and returns the summary.
    pub fn finish(self) -> Summary {
        self.stop();
        // No new frame is redirected to a socket once the program is gone.
        for x in &self.xdp {
            x.detach();
        }
        let mut total = Snapshot::default();
        let mut workers = Vec::new();
        let mut files = Vec::new();
        let mut errors = Vec::new();
        let mut notes: Vec<String> = Vec::new();
        let mut steer_counts = Vec::new();
        for (h, info) in self.handles.into_iter().zip(self.workers) {
            let o = h.join().unwrap_or_else(|_| Outcome {
                steer: None,
                snapshot: Snapshot::default(),
                files: vec![],
                error: Some(format!("worker {} panicked", info.id)),
                notes: vec![],
            });
            total += o.snapshot;
            notes.extend(o.notes);
            files.extend(o.files);
            steer_counts.push(o.steer);
            if let Some(e) = o.error {
                if !errors.contains(&e) {
                    errors.push(e);
                }
            }
            workers.push((info, o.snapshot));
        }
        let mut groups: Vec<GroupSummary> = Vec::new();
        if !self.stages.is_empty() {
            let mut counts = SteerCounts::default();
            for sc in steer_counts.iter().flatten() {
                add_into(&mut counts.filtered, &sc.filtered);
                add_into(&mut counts.steered, &sc.steered);
                add_into(&mut counts.stage_full, &sc.stage_full);
            }
            for (gi, kind) in self.group_kinds.iter().enumerate() {
                groups.push(GroupSummary {
                    id: gi,
                    kind: *kind,
                    filtered: counts.filtered.get(gi).copied().unwrap_or(0),
                    members: vec![],
                });
            }
            for Stage {
                group: g,
                index: i,
                member: m,
                cpu,
                handle: h,
            } in self.stages
            {
                let outcome = h.join().unwrap_or_else(|_| MemberOutcome {
                    error: Some("stage thread panicked".into()),
                    ..Default::default()
                });
                if let Some(e) = &outcome.error {
                    errors.push(e.clone());
                }
                files.extend(outcome.files.iter().cloned());
                notes.extend(outcome.notes.iter().cloned());
                if let Some(gs) = groups.get_mut(g) {
                    gs.members.push(MemberSummary {
                        id: i,
                        cpu,
                        steered: counts.steered.get(m).copied().unwrap_or(0),
                        stage_full: counts.stage_full.get(m).copied().unwrap_or(0),
                        outcome,
                    });
                }
            }
        }
        if let Some(m) = self.merge {
            match m.join() {
                Ok((sink, lost)) => {
                    total.disk_drops += lost;
                    total.packets -= lost.min(total.packets);
                    let stats: Vec<(u64, u64)> = vec![(total.kernel_packets, total.kernel_drops)];
                    let done = sink.finish(&stats);
                    files.extend(done.files);
                    total.disk_drops += done.lost;
                    total.packets -= done.lost.min(total.packets);
                    if let Some(e) = done.error {
                        errors.push(e);
                    }
                    notes.extend(done.notes);
                }
                Err(_) => errors.push("the merge writer panicked".into()),
            }
        }
        Summary {
            total,
            workers,
            seconds: self.started.elapsed().as_secs_f64(),
            files,
            errors,
            groups,
            notes: {
                notes.dedup();
                notes
            },
            retention: self.retention.map(|r| r.deleted()),
        }
    }
}

fn add_into(acc: &mut Vec<u64>, v: &[u64]) {
    if acc.len() < v.len() {
        acc.resize(v.len(), 0);
    }
    for (a, x) in acc.iter_mut().zip(v) {
        *a += x;
    }
}

/// A member's stage thread.
#[derive(Debug)]
pub(crate) struct Stage {
    pub(crate) group: usize,
    pub(crate) index: usize,
    pub(crate) member: usize,
    pub(crate) cpu: Option<u32>,
    pub(crate) handle: JoinHandle<MemberOutcome>,
}

/// What it takes to start a member's stage thread.
#[derive(Clone, Debug)]
pub(crate) struct StageCtx {
    pub(crate) output: Option<OutputConfig>,
    pub(crate) flows: Option<crate::stage::flows::FlowOutput>,
    pub(crate) ifaces: Vec<InterfaceDesc>,
    pub(crate) snaplen: u32,
    pub(crate) stage_cpus: Vec<u32>,
    pub(crate) pin: bool,
    pub(crate) transport: pipe::Transport,
}

/// The pipes of one member: an end for each worker, and the member's ends.
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

impl StageCtx {
    pub(crate) fn spawn(
        &self,
        g: usize,
        i: usize,
        m: usize,
        rx: Vec<pipe::PipeRx>,
    ) -> Result<Stage, CaptureError> {
        let sink = match &self.output {
            Some(o) => Some(o.sink(
                suffixed_path(&o.path, &format!("g{g}m{i}")),
                self.ifaces.clone(),
                self.snaplen,
            )?),
            None => None,
        };
        let flows = match &self.flows {
            Some(f) => Some(
                crate::stage::flows::FlowTable::open(
                    f.file
                        .as_ref()
                        .map(|p| suffixed_path(p, &format!("g{g}m{i}")))
                        .as_deref(),
                    f.ipfix.as_ref(),
                    &format!("g{g}m{i}"),
                    self.ifindexes(),
                    crate::stage::flows::FlowConfig::default(),
                )
                .map_err(|e| CaptureError::Output(e.to_string()))?,
            ),
            None => None,
        };
        let cpu = self.pin.then(|| self.stage_cpus[m % self.stage_cpus.len()]);
        Self::start(g, i, m, cpu, rx, sink, flows, MemberLimits::default())
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

    /// Starts the stage thread of member `m` (`gGmI`) with its apps.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        g: usize,
        i: usize,
        m: usize,
        cpu: Option<u32>,
        rx: Vec<pipe::PipeRx>,
        sink: Option<FileSink>,
        flows: Option<crate::stage::flows::FlowTable>,
        limits: MemberLimits,
    ) -> Result<Stage, CaptureError> {
        let handle = std::thread::Builder::new()
            .name(format!("corecap-g{g}m{i}"))
            .spawn(move || stage_member::run(cpu, rx, sink, flows, limits))
            .map_err(|e| CaptureError::System(format!("cannot start a stage thread: {e}")))?;
        Ok(Stage {
            group: g,
            index: i,
            member: m,
            cpu,
            handle,
        })
    }
}
