//! Planning a capture: from a [`CaptureConfig`] and a few facts about the machine to a
//! [`Plan`] that says which workers read what on which CPU, which consumer groups and stage
//! threads there are, and which file gets which interfaces. Nothing is opened here, so
//! every refusal that the configuration alone decides happens before anything is touched,
//! and the plan is checked by unit tests without root.
//!
//! The machine's facts come through [`Facts`]: [`super::run::Machine`] reads them from the
//! kernel and the files; tests write them by hand.

use std::path::{Path, PathBuf};

use corecap_wire::pcapng::InterfaceDesc;
use corecap_wire::ReadInterface;

use super::config::{Balance, CaptureConfig, CaptureError, Input, OutputConfig, WorkerInfo};
use crate::sink::file::Format;
use crate::stage::pipe::Transport;
use crate::steer::group::GroupSpec;
use corecap_store::names::suffixed_path;

/// What the planner needs to know about the machine.
pub(crate) trait Facts {
    /// Index, link type and RX queue count of interface `name`.
    fn interface(&self, name: &str) -> Result<Interface, CaptureError>;
    /// The CPUs this process may run on, in order.
    fn allowed_cpus(&self) -> Vec<u32>;
    /// The interfaces of a capture file, all of them (a pcapng file may define some after
    /// its first packets), in the file's order.
    fn file_interfaces(&self, path: &Path) -> Result<Vec<ReadInterface>, CaptureError>;
}

/// An interface as the kernel reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Interface {
    /// Interface index.
    pub(crate) ifindex: u32,
    /// Link type of its frames.
    pub(crate) linktype: u16,
    /// Number of RX queues.
    pub(crate) rx_queues: u32,
}

/// A capture, planned: what to open, start and write, in the order the run step does it.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The pcapng interface list: one per live input, then those of each `-r` file.
    pub(crate) ifaces: Vec<InterfaceDesc>,
    /// The live inputs, in the order given.
    pub(crate) inputs: Vec<LivePlan>,
    /// The `-r` files, in the order given.
    pub(crate) files: Vec<FilePlan>,
    /// The workers, by id.
    pub(crate) workers: Vec<WorkerPlan>,
    /// Consumer groups and their stage threads (pipeline mode, or attachable).
    pub(crate) pipeline: Option<PipelinePlan>,
    /// Where the workers' packets go.
    pub(crate) sink: SinkPlan,
    /// How the run opens and reads the inputs, when it stops, and how files are written.
    pub(crate) settings: Settings,
}

/// What the run takes from the configuration besides the layout above: copied once by
/// [`plan`], so that [`super::run::run`] reads the plan alone.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// How packets are spread over the workers.
    pub(crate) balance: Balance,
    /// tcpdump filter expression of the inputs.
    pub(crate) filter: Option<String>,
    /// Bytes kept of each packet.
    pub(crate) snaplen: u32,
    /// Ring geometry of each AF_PACKET worker.
    pub(crate) ring: corecap_linux::RingConfig,
    /// Stop after this many packets.
    pub(crate) count: Option<u64>,
    /// Stop after this long.
    pub(crate) duration: Option<std::time::Duration>,
    /// Promiscuous mode on the AF_PACKET interfaces.
    pub(crate) promisc: bool,
    /// Stage threads pinned to their CPUs.
    pub(crate) pin: bool,
    /// How files are written (format, rotation, retention, cutoff, seal): there is a file
    /// sink to open only with one (`-w`).
    pub(crate) output: Option<OutputConfig>,
    /// Flow records of the stage threads.
    pub(crate) flows: Option<crate::stage::flows::FlowOutput>,
    /// A socket opened ahead of need.
    pub(crate) spare: Option<crate::source::afpacket::Spare>,
    /// A parked thread for the capture's one worker.
    pub(crate) standby: Option<crate::standby::Standby>,
    /// Whether there is a live input (else only `-r` files, which wait for their disk).
    pub(crate) live: bool,
}

impl Settings {
    fn of(cfg: &CaptureConfig) -> Self {
        Self {
            balance: cfg.balance,
            filter: cfg.filter.clone(),
            snaplen: cfg.snaplen,
            ring: cfg.ring,
            count: cfg.count,
            duration: cfg.duration,
            promisc: cfg.promisc,
            pin: cfg.pin,
            output: cfg.output.clone(),
            flows: cfg.flows.clone(),
            spare: cfg.spare.clone(),
            standby: cfg.standby.clone(),
            live: !cfg.inputs.is_empty(),
        }
    }
}

/// A live input (`-i IF[@Q]`) and what the kernel said about its interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LivePlan {
    /// The input as given.
    pub(crate) input: Input,
    /// Its interface in the capture (index into [`Plan::ifaces`]).
    pub(crate) if_id: u32,
    /// Interface index.
    pub(crate) ifindex: u32,
    /// Link type.
    pub(crate) linktype: u16,
    /// RX queues of the interface.
    pub(crate) queues: u32,
    /// How its workers read it.
    pub(crate) via: Via,
}

/// How the workers of a live input read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    /// AF_PACKET sockets; `fanout` when there are several, in one fanout group.
    Packet {
        /// Whether the sockets join a fanout group.
        fanout: bool,
    },
    /// AF_XDP sockets, `spread` per RX queue.
    Xdp {
        /// Sockets per queue.
        spread: u32,
    },
}

/// A `-r` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FilePlan {
    /// Its path.
    pub(crate) path: PathBuf,
    /// Its interfaces, in the file's order: the interface a packet of the file names
    /// indexes this list.
    pub(crate) ifaces: Vec<FileIface>,
}

/// An interface of a `-r` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileIface {
    /// Its interface in the capture (index into [`Plan::ifaces`]).
    pub(crate) if_id: u32,
    /// Link type.
    pub(crate) linktype: u16,
    /// Whether its file or section was written big-endian: a filter on BSD NULL frames
    /// tests the AF_ value in the writer's byte order.
    pub(crate) big_endian: bool,
}

/// A worker: its line in the summary and what it reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WorkerPlan {
    /// Id, CPU (None when not pinned), input label and RX queue.
    pub(crate) info: WorkerInfo,
    /// What it reads.
    pub(crate) source: SourcePlan,
}

/// What a worker reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SourcePlan {
    /// Socket `member` of live input `input` (AF_PACKET).
    Packet {
        /// Index into [`Plan::inputs`].
        input: usize,
        /// Its place in the fanout group.
        member: usize,
        /// The interface number it writes (0 when it has a file of its own).
        if_id: u32,
        /// RX queue of every packet it gets, when known.
        queue: Option<u32>,
    },
    /// Socket `slot` of RX queue `queue` of live input `input` (AF_XDP).
    Xdp {
        /// Index into [`Plan::inputs`].
        input: usize,
        /// RX queue.
        queue: u32,
        /// Its socket among the queue's sockets.
        slot: u32,
        /// The interface number it writes (0 when it has a file of its own).
        if_id: u32,
    },
    /// Every `-r` file, keeping its share of the flows among `workers` workers.
    Files {
        /// Workers sharing the files.
        workers: usize,
    },
}

/// The consumer groups and their members' stage threads.
#[derive(Clone, Debug)]
pub(crate) struct PipelinePlan {
    /// The groups as configured.
    pub(crate) groups: Vec<GroupSpec>,
    /// Link type the group filters are compiled for (the first interface's).
    pub(crate) linktype: u16,
    /// Every member of every group, in member-id order.
    pub(crate) members: Vec<MemberPlan>,
    /// CPUs of the stage threads, reused round robin (also for members that join later).
    pub(crate) stage_cpus: Vec<u32>,
    /// The pipes from the workers to each member.
    pub(crate) pipes: Pipes,
}

/// The pipes from the workers to one member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pipes {
    /// spsc: a ring per worker; mpsc: one queue the workers share.
    pub(crate) transport: Transport,
    /// Workers writing to it.
    pub(crate) workers: usize,
}

/// A member of a consumer group: its stage thread and the files it writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MemberPlan {
    /// Group index.
    pub(crate) group: usize,
    /// Index in the group (`gGmI`).
    pub(crate) index: usize,
    /// Member id, the workers' pipe slot.
    pub(crate) member: usize,
    /// Stage CPU (None when not pinned).
    pub(crate) cpu: Option<u32>,
    /// Its packet file (`FILE.gGmI`).
    pub(crate) file: Option<PathBuf>,
    /// Its flow records (`FLOWS.gGmI`).
    pub(crate) flows_file: Option<PathBuf>,
}

impl MemberPlan {
    /// Member `member`, `index` of group `group`: its CPU from `stage_cpus` and its files
    /// suffixed `gGmI`.
    pub(crate) fn new(
        (group, index, member): (usize, usize, usize),
        stage_cpus: &[u32],
        pin: bool,
        file: Option<&Path>,
        flows_file: Option<&Path>,
    ) -> Self {
        let suffix = format!("g{group}m{index}");
        Self {
            group,
            index,
            member,
            cpu: pin.then(|| stage_cpus[member % stage_cpus.len()]),
            file: file.map(|p| suffixed_path(p, &suffix)),
            flows_file: flows_file.map(|p| suffixed_path(p, &suffix)),
        }
    }
}

/// Where the workers' packets go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SinkPlan {
    /// No output: each worker counts.
    Count,
    /// Pipeline mode: the workers steer to the members, which write their own files.
    Steer,
    /// One worker writes every interface to the `-w` path.
    Single(PathBuf),
    /// The merge thread writes every interface to the `-w` path in timestamp order.
    Merged(PathBuf),
    /// Each worker writes its own file, in worker order.
    PerWorker(Vec<WorkerFile>),
}

/// A worker's own file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WorkerFile {
    /// `FILE.wN`.
    pub(crate) path: PathBuf,
    /// Its interfaces (indexes into [`Plan::ifaces`]).
    pub(crate) ifaces: Vec<u32>,
}

/// The CPUs workers take, one after the other.
struct Cpus {
    list: Vec<u32>,
    /// With no `--cpus`, from the end of the allowed list.
    from_end: bool,
    next: usize,
}

impl Cpus {
    /// With no `--cpus`, workers take CPUs from the end of the allowed list: interrupts and
    /// the softirq work of a NIC usually land on the first CPUs, and a capture worker on
    /// the same core as its packets' receive work costs several times more per packet
    /// (paper 001, test 3). With `--cpus` the list is taken in the order given.
    fn new(cfg: &CaptureConfig, facts: &dyn Facts) -> Result<Self, CaptureError> {
        let from_end = cfg.cpus.is_empty();
        let list = if from_end {
            facts.allowed_cpus()
        } else {
            cfg.cpus.clone()
        };
        if list.is_empty() {
            return Err(CaptureError::Config("no CPU to run on".into()));
        }
        Ok(Self {
            list,
            from_end,
            next: 0,
        })
    }

    /// The next CPU in taking order.
    fn take(&mut self) -> u32 {
        let k = self.next % self.list.len();
        self.next += 1;
        if self.from_end {
            self.list[self.list.len() - 1 - k]
        } else {
            self.list[k]
        }
    }

    /// The CPU at `i` of the list (round robin), for a worker tied to RX queue `i`.
    fn at(&self, i: usize) -> u32 {
        self.list[i % self.list.len()]
    }
}

/// Plans a capture. Refuses what the configuration and the facts alone decide: an
/// interface that is not there, a queue out of range, an unreadable file, nothing to
/// capture, `--merge` or `-w -` with groups.
pub(crate) fn plan(cfg: &CaptureConfig, facts: &dyn Facts) -> Result<Plan, CaptureError> {
    let mut cpus = Cpus::new(cfg, facts)?;
    let mut p = Plan {
        ifaces: Vec::new(),
        inputs: Vec::new(),
        files: Vec::new(),
        workers: Vec::new(),
        pipeline: None,
        sink: SinkPlan::Count,
        settings: Settings::of(cfg),
    };
    for input in &cfg.inputs {
        let iface = facts.interface(&input.iface)?;
        p.add_input(cfg, input, iface, &mut cpus)?;
    }
    if !cfg.files.is_empty() {
        p.add_files(cfg, facts, &mut cpus)?;
    }
    if p.workers.is_empty() {
        return Err(CaptureError::Config(
            "nothing to capture: give -i IF or -r FILE".into(),
        ));
    }
    if !cfg.pin {
        for w in &mut p.workers {
            w.info.cpu = None;
        }
    }
    if !cfg.groups.is_empty() || cfg.attachable {
        if cfg
            .output
            .as_ref()
            .is_some_and(|o| o.merge || o.path.as_os_str() == "-")
        {
            return Err(CaptureError::Config(
                "--merge and -w - do not combine with --groups".into(),
            ));
        }
        p.pipeline = Some(p.pipeline_plan(cfg, &cpus.list));
        p.sink = SinkPlan::Steer;
    } else {
        p.sink = p.sink_plan(cfg);
    }
    p.check_linktypes(cfg)?;
    Ok(p)
}

/// The shorter of two snap lengths, 0 being no limit.
fn shorter_snaplen(a: u32, b: u32) -> u32 {
    match (a, b) {
        (0, s) | (s, 0) => s,
        (a, b) => a.min(b),
    }
}

impl Plan {
    /// Refuses what would treat a packet as framed by another interface's link type: a
    /// pcap file (one link type in its header) holding interfaces of several, and consumer
    /// group filters (compiled for one link type) over interfaces of several.
    fn check_linktypes(&self, cfg: &CaptureConfig) -> Result<(), CaptureError> {
        let mixed = |ids: &mut dyn Iterator<Item = u32>| {
            let mut lts = ids.map(|i| self.ifaces[i as usize].linktype);
            let first = lts.next()?;
            lts.find(|&l| l != first).map(|other| (first, other))
        };
        let all = || 0..self.ifaces.len() as u32;
        if cfg.groups.iter().any(|g| g.filter.is_some()) {
            if let Some((a, b)) = mixed(&mut all()) {
                return Err(CaptureError::Config(format!(
                    "a group filter is compiled for one link type, and the inputs have \
                     link types {a} and {b}: give the groups no filter, or inputs of one \
                     link type"
                )));
            }
        }
        let Some(o) = cfg
            .output
            .as_ref()
            .filter(|o| o.file.format != Format::Pcapng)
        else {
            return Ok(());
        };
        let files: Vec<Vec<u32>> = match &self.sink {
            SinkPlan::PerWorker(files) => files.iter().map(|f| f.ifaces.clone()).collect(),
            _ => vec![all().collect()],
        };
        for ids in files {
            if let Some((a, b)) = mixed(&mut ids.into_iter()) {
                return Err(CaptureError::Config(format!(
                    "{}: a pcap file has one link type, and its inputs have link types \
                     {a} and {b}: write pcapng (leave out -P)",
                    o.path.display()
                )));
            }
        }
        Ok(())
    }

    fn interface_desc(&mut self, input: &Input, linktype: u16, snaplen: u32) -> u32 {
        let if_id = self.ifaces.len() as u32;
        self.ifaces.push(InterfaceDesc {
            name: input.label(),
            description: Some(format!("{} captured by corecap", input.label())),
            linktype,
            snaplen,
        });
        if_id
    }

    /// One `-i IF[@Q]`: its interface and its workers (AF_PACKET sockets, in a fanout
    /// group when there are several, or AF_XDP sockets, `--xdp-spread` per queue).
    fn add_input(
        &mut self,
        cfg: &CaptureConfig,
        input: &Input,
        iface: Interface,
        cpus: &mut Cpus,
    ) -> Result<(), CaptureError> {
        let queues = iface.rx_queues;
        if let Some(q) = input.queue {
            if u32::from(q) >= queues {
                return Err(CaptureError::Config(format!(
                    "{} has {queues} RX queue{}; queue {q} is out of range (0..{})",
                    input.iface,
                    if queues == 1 { "" } else { "s" },
                    queues.saturating_sub(1)
                )));
            }
        }
        let if_id = self.interface_desc(input, iface.linktype, cfg.snaplen);
        let index = self.inputs.len();
        let via = if input.xdp {
            let spread = cfg.xdp_spread.max(1);
            self.add_xdp_workers(input, index, if_id, queues, spread, cpus);
            Via::Xdp { spread }
        } else {
            let n = self.add_packet_workers(cfg, input, index, if_id, queues, cpus);
            Via::Packet { fanout: n > 1 }
        };
        self.inputs.push(LivePlan {
            input: input.clone(),
            if_id,
            ifindex: iface.ifindex,
            linktype: iface.linktype,
            queues,
            via,
        });
        Ok(())
    }

    /// AF_XDP: a worker per socket, `spread` sockets per queue. A worker takes the CPU of
    /// its queue (of its place among the sockets, in spread mode).
    fn add_xdp_workers(
        &mut self,
        input: &Input,
        index: usize,
        if_id: u32,
        queues: u32,
        spread: u32,
        cpus: &Cpus,
    ) {
        let qs: Vec<u32> = match input.queue {
            Some(q) => vec![u32::from(q)],
            None => (0..queues).collect(),
        };
        let sockets = qs
            .iter()
            .flat_map(|&q| (0..spread).map(move |s| (q, s)))
            .enumerate();
        for (k, (queue, slot)) in sockets {
            let at = if spread > 1 { k } else { queue as usize };
            let label = if spread > 1 {
                format!("{}#{slot}", input.label())
            } else {
                input.label()
            };
            self.workers.push(WorkerPlan {
                info: WorkerInfo {
                    id: self.workers.len(),
                    cpu: Some(cpus.at(at)),
                    input: label,
                    queue: Some(queue),
                },
                source: SourcePlan::Xdp {
                    input: index,
                    queue,
                    slot,
                    if_id,
                },
            });
        }
    }

    /// AF_PACKET: one socket for `IF@Q`; for a whole interface, `--workers`, or one per RX
    /// queue (TNAPI) and at most one per CPU (all queues with `--balance queue`). Returns
    /// how many.
    fn add_packet_workers(
        &mut self,
        cfg: &CaptureConfig,
        input: &Input,
        index: usize,
        if_id: u32,
        queues: u32,
        cpus: &mut Cpus,
    ) -> usize {
        let n = match (input.queue, cfg.balance) {
            (Some(_), _) => 1,
            (None, Balance::Queue) if cfg.workers == 0 => queues as usize,
            (None, _) if cfg.workers == 0 => (queues as usize).clamp(1, cpus.list.len()),
            (None, _) => cfg.workers,
        };
        for member in 0..n {
            let queue = match (input.queue, cfg.balance) {
                (Some(q), _) => Some(u32::from(q)),
                (None, Balance::Queue) if n as u32 == queues => Some(member as u32),
                (None, _) if queues == 1 => Some(0),
                _ => None,
            };
            let cpu = match input.queue {
                Some(q) => cpus.at(usize::from(q)),
                None => cpus.take(),
            };
            self.workers.push(WorkerPlan {
                info: WorkerInfo {
                    id: self.workers.len(),
                    cpu: Some(cpu),
                    input: input.label(),
                    queue,
                },
                source: SourcePlan::Packet {
                    input: index,
                    member,
                    if_id,
                    queue,
                },
            });
        }
        n
    }

    /// `-r FILE...`: each interface of each file is one interface of the output, with its
    /// own link type and snap length (the file's, when shorter than `-s`), and each of
    /// `--workers` workers (at least one) reads every file and keeps its share of the
    /// flows. They are pinned only with `--cpus`.
    fn add_files(
        &mut self,
        cfg: &CaptureConfig,
        facts: &dyn Facts,
        cpus: &mut Cpus,
    ) -> Result<(), CaptureError> {
        for path in &cfg.files {
            let found = facts.file_interfaces(path)?;
            let mut ifaces = Vec::with_capacity(found.len());
            for (i, f) in found.iter().enumerate() {
                let if_id = self.ifaces.len() as u32;
                ifaces.push(FileIface {
                    if_id,
                    linktype: f.linktype,
                    big_endian: f.big_endian,
                });
                let name = match found.len() {
                    1 => path.display().to_string(),
                    _ => format!("{}#{i}", path.display()),
                };
                self.ifaces.push(InterfaceDesc {
                    name,
                    description: f.name.clone().or_else(|| f.description.clone()),
                    linktype: f.linktype,
                    snaplen: shorter_snaplen(f.snaplen, cfg.snaplen),
                });
            }
            self.files.push(FilePlan {
                path: path.clone(),
                ifaces,
            });
        }
        let n = cfg.workers.max(1);
        for _ in 0..n {
            let cpu = (!cfg.cpus.is_empty()).then(|| cpus.take());
            self.workers.push(WorkerPlan {
                info: WorkerInfo {
                    id: self.workers.len(),
                    cpu,
                    input: "files".into(),
                    queue: None,
                },
                source: SourcePlan::Files { workers: n },
            });
        }
        Ok(())
    }

    /// The groups, their members in member-id order (group by group), each member's stage
    /// CPU (from `--stage-cpus`, else the workers' CPU list) and files.
    fn pipeline_plan(&self, cfg: &CaptureConfig, cpus: &[u32]) -> PipelinePlan {
        let stage_cpus = if cfg.stage_cpus.is_empty() {
            cpus.to_vec()
        } else {
            cfg.stage_cpus.clone()
        };
        let file = cfg.output.as_ref().map(|o| o.path.as_path());
        let flows_file = cfg.flows.as_ref().and_then(|f| f.file.as_deref());
        let mut members = Vec::new();
        for (g, gs) in cfg.groups.iter().enumerate() {
            for i in 0..usize::from(gs.members) {
                let m = members.len();
                members.push(MemberPlan::new(
                    (g, i, m),
                    &stage_cpus,
                    cfg.pin,
                    file,
                    flows_file,
                ));
            }
        }
        PipelinePlan {
            groups: cfg.groups.clone(),
            linktype: self.ifaces.first().map_or(1, |i| i.linktype),
            members,
            stage_cpus,
            pipes: Pipes {
                transport: cfg.transport,
                workers: self.workers.len(),
            },
        }
    }

    /// The capture files the plan writes (before rotation numbers them): each group
    /// member's, or the sink's.
    pub(crate) fn file_paths(&self) -> Vec<PathBuf> {
        if let Some(p) = &self.pipeline {
            return p.members.iter().filter_map(|m| m.file.clone()).collect();
        }
        match &self.sink {
            SinkPlan::Count | SinkPlan::Steer => Vec::new(),
            SinkPlan::Single(p) | SinkPlan::Merged(p) => vec![p.clone()],
            SinkPlan::PerWorker(files) => files.iter().map(|f| f.path.clone()).collect(),
        }
    }

    /// Without groups: counting with no `-w`; one file for one worker; one merged file
    /// with `--merge` or `-w -`; else a file per worker (`FILE.wN`) with its own interface
    /// (numbered 0 in it), or every file's for a `-r` worker.
    fn sink_plan(&mut self, cfg: &CaptureConfig) -> SinkPlan {
        let Some(o) = &cfg.output else {
            return SinkPlan::Count;
        };
        if self.workers.len() == 1 {
            return SinkPlan::Single(o.path.clone());
        }
        if o.merge || o.path.as_os_str() == "-" {
            return SinkPlan::Merged(o.path.clone());
        }
        let all: Vec<u32> = (0..self.ifaces.len() as u32).collect();
        let mut files = Vec::new();
        for w in &mut self.workers {
            let ifaces = match &mut w.source {
                SourcePlan::Packet { if_id, .. } | SourcePlan::Xdp { if_id, .. } => {
                    let own = vec![*if_id];
                    *if_id = 0;
                    own
                }
                SourcePlan::Files { .. } => all.clone(),
            };
            files.push(WorkerFile {
                path: suffixed_path(&o.path, &format!("w{}", w.info.id)),
                ifaces,
            });
        }
        SinkPlan::PerWorker(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::OutputConfig;
    use crate::sink::file::{FileOptions, Format};
    use crate::stage::flows::FlowOutput;
    use crate::steer::group::GroupKind;

    /// The machine, written by hand.
    struct Lab {
        ifaces: Vec<(&'static str, Interface)>,
        cpus: Vec<u32>,
        files: Vec<(&'static str, Vec<u16>)>,
    }

    impl Facts for Lab {
        fn interface(&self, name: &str) -> Result<Interface, CaptureError> {
            self.ifaces
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, i)| *i)
                .ok_or_else(|| CaptureError::Config(format!("no interface {name}")))
        }
        fn allowed_cpus(&self) -> Vec<u32> {
            self.cpus.clone()
        }
        fn file_interfaces(&self, path: &Path) -> Result<Vec<ReadInterface>, CaptureError> {
            let (_, lts) = self
                .files
                .iter()
                .find(|(p, _)| Path::new(p) == path)
                .ok_or_else(|| CaptureError::Config(format!("{}: no such file", path.display())))?;
            Ok(lts
                .iter()
                .map(|&linktype| ReadInterface {
                    name: None,
                    description: None,
                    linktype,
                    snaplen: 65535,
                    tsresol: 6,
                    tsoffset: 0,
                    big_endian: false,
                })
                .collect())
        }
    }

    /// eth0 (2 RX queues), eth1 (4), lo (1); CPUs 0..4; a.pcap (Ethernet), b.pcap (raw IP),
    /// c.pcapng (Linux cooked, then Ethernet); each file's snap length is 65535.
    fn lab() -> Lab {
        let iface = |ifindex, rx_queues| Interface {
            ifindex,
            linktype: 1,
            rx_queues,
        };
        Lab {
            ifaces: vec![
                ("eth0", iface(2, 2)),
                ("eth1", iface(3, 4)),
                ("lo", iface(1, 1)),
            ],
            cpus: vec![0, 1, 2, 3],
            files: vec![
                ("a.pcap", vec![1]),
                ("b.pcap", vec![101]),
                ("c.pcapng", vec![113, 1]),
            ],
        }
    }

    fn live(inputs: &[&str]) -> CaptureConfig {
        CaptureConfig {
            inputs: inputs.iter().map(|i| Input::parse(i).unwrap()).collect(),
            ..CaptureConfig::default()
        }
    }

    fn output(path: &str, merge: bool) -> Option<OutputConfig> {
        Some(OutputConfig {
            path: PathBuf::from(path),
            merge,
            file: FileOptions::plain(Format::Pcapng),
            cutoff: None,
        })
    }

    fn err(cfg: &CaptureConfig, facts: &Lab) -> String {
        plan(cfg, facts).unwrap_err().to_string()
    }

    /// (id, cpu, input label, queue) of each worker.
    fn infos(p: &Plan) -> Vec<(usize, Option<u32>, String, Option<u32>)> {
        p.workers
            .iter()
            .map(|w| (w.info.id, w.info.cpu, w.info.input.clone(), w.info.queue))
            .collect()
    }

    fn packet(input: usize, member: usize, if_id: u32, queue: Option<u32>) -> SourcePlan {
        SourcePlan::Packet {
            input,
            member,
            if_id,
            queue,
        }
    }

    #[test]
    fn test_two_queues_flow_balance() {
        let p = plan(&live(&["eth0"]), &lab()).unwrap();
        assert_eq!(
            p.ifaces,
            vec![InterfaceDesc {
                name: "eth0".into(),
                description: Some("eth0 captured by corecap".into()),
                linktype: 1,
                snaplen: 262_144,
            }]
        );
        assert_eq!(
            p.inputs,
            vec![LivePlan {
                input: Input::parse("eth0").unwrap(),
                if_id: 0,
                ifindex: 2,
                linktype: 1,
                queues: 2,
                via: Via::Packet { fanout: true },
            }]
        );
        // One worker per RX queue, in one fanout group; flow balance knows no queue.
        assert_eq!(
            infos(&p),
            vec![
                (0, Some(3), "eth0".into(), None),
                (1, Some(2), "eth0".into(), None),
            ]
        );
        let sources: Vec<_> = p.workers.iter().map(|w| w.source).collect();
        assert_eq!(sources, vec![packet(0, 0, 0, None), packet(0, 1, 0, None)]);
        assert!(p.files.is_empty());
        assert!(p.pipeline.is_none());
        assert_eq!(p.sink, SinkPlan::Count);
    }

    #[test]
    fn test_queue_adapter() {
        let p = plan(&live(&["eth1@2", "lo"]), &lab()).unwrap();
        // IF@Q takes the CPU at its queue's place; a whole interface takes from the end.
        assert_eq!(
            infos(&p),
            vec![
                (0, Some(2), "eth1@2".into(), Some(2)),
                (1, Some(3), "lo".into(), Some(0)),
            ]
        );
        assert_eq!(p.inputs[0].via, Via::Packet { fanout: false });
        assert_eq!(p.inputs[1].via, Via::Packet { fanout: false });
        assert_eq!(p.workers[0].source, packet(0, 0, 0, Some(2)));
        assert_eq!(p.workers[1].source, packet(1, 0, 1, Some(0)));
        assert_eq!(p.ifaces[0].name, "eth1@2");
        assert_eq!(p.ifaces[1].name, "lo");
    }

    #[test]
    fn test_queue_out_of_range() {
        assert_eq!(
            err(&live(&["eth1@4"]), &lab()),
            "eth1 has 4 RX queues; queue 4 is out of range (0..3)"
        );
        assert_eq!(
            err(&live(&["lo", "lo@1"]), &lab()),
            "lo has 1 RX queue; queue 1 is out of range (0..0)"
        );
        assert_eq!(err(&live(&["eth9"]), &lab()), "no interface eth9");
    }

    #[test]
    fn test_nothing_to_capture() {
        assert_eq!(
            err(&CaptureConfig::default(), &lab()),
            "nothing to capture: give -i IF or -r FILE"
        );
    }

    #[test]
    fn test_balance_queue_workers() {
        // --balance queue: one worker per RX queue even past the CPU count, each labelled
        // with its queue.
        let mut facts = lab();
        facts.cpus = vec![0, 1];
        let cfg = CaptureConfig {
            balance: Balance::Queue,
            ..live(&["eth1"])
        };
        let p = plan(&cfg, &facts).unwrap();
        assert_eq!(
            infos(&p),
            vec![
                (0, Some(1), "eth1".into(), Some(0)),
                (1, Some(0), "eth1".into(), Some(1)),
                (2, Some(1), "eth1".into(), Some(2)),
                (3, Some(0), "eth1".into(), Some(3)),
            ]
        );
        // Other modes stop at one worker per CPU.
        let p = plan(&live(&["eth1"]), &facts).unwrap();
        assert_eq!(p.workers.len(), 2);
        // --workers 3 with --balance queue on 4 queues: the queues are not one per worker.
        let cfg = CaptureConfig {
            balance: Balance::Queue,
            workers: 3,
            ..live(&["eth1"])
        };
        let p = plan(&cfg, &facts).unwrap();
        assert!(p.workers.iter().all(|w| w.info.queue.is_none()));
        assert_eq!(p.workers.len(), 3);
    }

    #[test]
    fn test_files() {
        let cfg = CaptureConfig {
            files: vec!["a.pcap".into(), "b.pcap".into()],
            workers: 2,
            ..CaptureConfig::default()
        };
        let p = plan(&cfg, &lab()).unwrap();
        let iface = |if_id, linktype| FileIface {
            if_id,
            linktype,
            big_endian: false,
        };
        assert_eq!(
            p.files,
            vec![
                FilePlan {
                    path: "a.pcap".into(),
                    ifaces: vec![iface(0, 1)],
                },
                FilePlan {
                    path: "b.pcap".into(),
                    ifaces: vec![iface(1, 101)],
                },
            ]
        );
        assert_eq!(p.ifaces[1].name, "b.pcap");
        assert_eq!(p.ifaces[1].description, None);
        assert_eq!(p.ifaces[1].linktype, 101);
        // The file's snap length, shorter than -s.
        assert_eq!(p.ifaces[1].snaplen, 65535);
        // Not pinned without --cpus.
        assert_eq!(
            infos(&p),
            vec![
                (0, None, "files".into(), None),
                (1, None, "files".into(), None)
            ]
        );
        assert!(p
            .workers
            .iter()
            .all(|w| w.source == SourcePlan::Files { workers: 2 }));
        // With --cpus, in the order given.
        let cfg = CaptureConfig {
            cpus: vec![5, 4],
            ..cfg
        };
        let p = plan(&cfg, &lab()).unwrap();
        let cpus: Vec<_> = p.workers.iter().map(|w| w.info.cpu).collect();
        assert_eq!(cpus, vec![Some(5), Some(4)]);
        let cfg = CaptureConfig {
            files: vec!["c.pcap".into()],
            ..CaptureConfig::default()
        };
        assert_eq!(err(&cfg, &lab()), "c.pcap: no such file");
    }

    #[test]
    fn test_sink_paths() {
        // eth0: workers 0 and 1; lo: worker 2.
        let cfg = CaptureConfig {
            output: output("/cap/out.pcapng", false),
            ..live(&["eth0", "lo"])
        };
        let p = plan(&cfg, &lab()).unwrap();
        let file = |path: &str, ifaces: Vec<u32>| WorkerFile {
            path: path.into(),
            ifaces,
        };
        assert_eq!(
            p.sink,
            SinkPlan::PerWorker(vec![
                file("/cap/out.w0.pcapng", vec![0]),
                file("/cap/out.w1.pcapng", vec![0]),
                file("/cap/out.w2.pcapng", vec![1]),
            ])
        );
        // Each worker's own interface is interface 0 of its file.
        assert_eq!(p.workers[2].source, packet(1, 0, 0, Some(0)));
        // --merge: one file, every interface, numbered as in the capture.
        let merged = CaptureConfig {
            output: output("/cap/out.pcapng", true),
            ..cfg.clone()
        };
        let p = plan(&merged, &lab()).unwrap();
        assert_eq!(p.sink, SinkPlan::Merged("/cap/out.pcapng".into()));
        assert_eq!(p.workers[2].source, packet(1, 0, 1, Some(0)));
        let stdout = CaptureConfig {
            output: output("-", false),
            ..cfg.clone()
        };
        assert_eq!(
            plan(&stdout, &lab()).unwrap().sink,
            SinkPlan::Merged("-".into())
        );
        // One worker writes the file itself, merged or not.
        let single = CaptureConfig {
            output: output("/cap/out.pcapng", false),
            ..live(&["lo"])
        };
        assert_eq!(
            plan(&single, &lab()).unwrap().sink,
            SinkPlan::Single("/cap/out.pcapng".into())
        );
        // -r workers write every file's interface.
        let files = CaptureConfig {
            files: vec!["a.pcap".into(), "b.pcap".into()],
            workers: 2,
            output: output("/cap/r.pcap", false),
            ..CaptureConfig::default()
        };
        assert_eq!(
            plan(&files, &lab()).unwrap().sink,
            SinkPlan::PerWorker(vec![
                file("/cap/r.w0.pcap", vec![0, 1]),
                file("/cap/r.w1.pcap", vec![0, 1]),
            ])
        );
    }

    /// Each interface of a file is one of the capture, with its own link type; what would
    /// read one interface's packets with another's link type is refused.
    #[test]
    fn test_files_of_several_link_types() {
        let cfg = CaptureConfig {
            files: vec!["c.pcapng".into(), "a.pcap".into()],
            output: output("/cap/r.pcapng", false),
            ..CaptureConfig::default()
        };
        let p = plan(&cfg, &lab()).unwrap();
        let ifaces: Vec<(u32, u16)> = p.files[0]
            .ifaces
            .iter()
            .map(|i| (i.if_id, i.linktype))
            .collect();
        assert_eq!(ifaces, [(0, 113), (1, 1)]);
        assert_eq!(p.files[1].ifaces[0].if_id, 2);
        let names: Vec<&str> = p.ifaces.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["c.pcapng#0", "c.pcapng#1", "a.pcap"]);
        assert_eq!(p.ifaces[0].linktype, 113);
        // A pcap file holds one link type.
        let mut pcap = cfg.clone();
        if let Some(o) = &mut pcap.output {
            o.file.format = Format::Pcap;
        }
        assert!(
            err(&pcap, &lab()).contains("link types 113 and 1"),
            "{}",
            err(&pcap, &lab())
        );
        pcap.files = vec!["a.pcap".into()];
        assert!(plan(&pcap, &lab()).is_ok());
        // A group filter is compiled for one link type.
        let mut filtered = groups();
        filtered[1].filter = Some("tcp".into());
        let grouped = CaptureConfig {
            groups: filtered,
            ..cfg.clone()
        };
        assert!(err(&grouped, &lab()).contains("group filter"));
        let unfiltered = CaptureConfig {
            groups: groups(),
            ..cfg
        };
        assert!(plan(&unfiltered, &lab()).is_ok());
    }

    fn groups() -> Vec<GroupSpec> {
        GroupSpec::parse_list("balance:2,copy:1").unwrap()
    }

    #[test]
    fn test_groups() {
        let cfg = CaptureConfig {
            groups: groups(),
            stage_cpus: vec![6, 7],
            output: output("/cap/o.pcapng", false),
            flows: Some(FlowOutput::file("/cap/f.json".into())),
            ..live(&["eth0"])
        };
        let p = plan(&cfg, &lab()).unwrap();
        assert_eq!(p.sink, SinkPlan::Steer);
        let pl = p.pipeline.unwrap();
        let member = |group, index, member, cpu, suffix: &str| MemberPlan {
            group,
            index,
            member,
            cpu: Some(cpu),
            file: Some(format!("/cap/o.{suffix}.pcapng").into()),
            flows_file: Some(format!("/cap/f.{suffix}.json").into()),
        };
        assert_eq!(
            pl.members,
            vec![
                member(0, 0, 0, 6, "g0m0"),
                member(0, 1, 1, 7, "g0m1"),
                member(1, 0, 2, 6, "g1m0"),
            ]
        );
        assert_eq!(
            pl.groups.iter().map(|g| g.kind).collect::<Vec<_>>(),
            vec![GroupKind::Balance, GroupKind::Copy]
        );
        assert_eq!(pl.linktype, 1);
        assert_eq!(pl.stage_cpus, vec![6, 7]);
        assert_eq!(
            pl.pipes,
            Pipes {
                transport: Transport::Spsc,
                workers: 2
            }
        );
        // Workers keep their interface numbers: members write every interface.
        assert_eq!(p.workers[1].source, packet(0, 1, 0, None));
        // No --stage-cpus: the workers' list, in its own order; no -w: no member file.
        let cfg = CaptureConfig {
            groups: groups(),
            transport: Transport::Mpsc,
            ..live(&["eth0"])
        };
        let pl = plan(&cfg, &lab()).unwrap().pipeline.unwrap();
        assert_eq!(pl.stage_cpus, vec![0, 1, 2, 3]);
        let cpus: Vec<_> = pl.members.iter().map(|m| m.cpu).collect();
        assert_eq!(cpus, vec![Some(0), Some(1), Some(2)]);
        assert!(pl.members.iter().all(|m| m.file.is_none()));
        assert_eq!(pl.pipes.transport, Transport::Mpsc);
        // Not pinned: neither the workers nor the stage threads.
        let cfg = CaptureConfig { pin: false, ..cfg };
        let p = plan(&cfg, &lab()).unwrap();
        assert!(p.workers.iter().all(|w| w.info.cpu.is_none()));
        assert!(p.pipeline.unwrap().members.iter().all(|m| m.cpu.is_none()));
        // Attachable with no groups: steering with an empty matrix.
        let cfg = CaptureConfig {
            attachable: true,
            ..live(&["eth0"])
        };
        let p = plan(&cfg, &lab()).unwrap();
        assert_eq!(p.sink, SinkPlan::Steer);
        assert!(p.pipeline.unwrap().members.is_empty());
    }

    #[test]
    fn test_pipeline_refuses_merge_and_stdout() {
        for out in [output("-", false), output("/cap/o.pcapng", true)] {
            let cfg = CaptureConfig {
                groups: groups(),
                output: out,
                ..live(&["eth0"])
            };
            assert_eq!(
                err(&cfg, &lab()),
                "--merge and -w - do not combine with --groups"
            );
        }
    }

    #[test]
    fn test_cpu_order() {
        // No --cpus: from the end of the allowed list, across inputs.
        let p = plan(&live(&["eth0", "eth0"]), &lab()).unwrap();
        let cpus: Vec<_> = p.workers.iter().map(|w| w.info.cpu).collect();
        assert_eq!(cpus, vec![Some(3), Some(2), Some(1), Some(0)]);
        // --cpus: in the order given, round robin.
        let cfg = CaptureConfig {
            cpus: vec![2, 0, 3],
            ..live(&["eth0", "eth0"])
        };
        let p = plan(&cfg, &lab()).unwrap();
        let cpus: Vec<_> = p.workers.iter().map(|w| w.info.cpu).collect();
        assert_eq!(cpus, vec![Some(2), Some(0), Some(3), Some(2)]);
    }

    #[test]
    fn test_xdp_spread() {
        let cfg = CaptureConfig {
            xdp_spread: 2,
            ..live(&["xdp:eth0"])
        };
        let p = plan(&cfg, &lab()).unwrap();
        assert_eq!(p.inputs[0].via, Via::Xdp { spread: 2 });
        assert_eq!(
            infos(&p),
            vec![
                (0, Some(0), "xdp:eth0#0".into(), Some(0)),
                (1, Some(1), "xdp:eth0#1".into(), Some(0)),
                (2, Some(2), "xdp:eth0#0".into(), Some(1)),
                (3, Some(3), "xdp:eth0#1".into(), Some(1)),
            ]
        );
        assert_eq!(
            p.workers[3].source,
            SourcePlan::Xdp {
                input: 0,
                queue: 1,
                slot: 1,
                if_id: 0
            }
        );
        // One socket per queue: the CPU at the queue's place.
        let p = plan(&live(&["xdp:eth1@3"]), &lab()).unwrap();
        assert_eq!(infos(&p), vec![(0, Some(3), "xdp:eth1@3".into(), Some(3))]);
        assert_eq!(p.inputs[0].via, Via::Xdp { spread: 1 });
    }
}
