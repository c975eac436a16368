//! The placement plan: which CPU serves each queue's IRQ, which CPU runs each capture
//! worker, which CPUs are left for pipeline stages, and the risks the papers measured.
//!
//! The rules, in order:
//! 1. Everything goes on the NIC's NUMA node (paper 001 test 2: the wrong node captured
//!    14.7%, against 15.0% for the right one with the same 16 queues, and far less once
//!    the load rose).
//! 2. One worker per physical core: first the first thread of each local core, then the
//!    hyper-threading twins, then the other nodes. Workers on twins share a core's caches
//!    and execution units (paper 000 Table 2 numbers twins 8 apart).
//! 3. A queue's IRQ goes to a local core that runs no worker if one is left, else to the
//!    twin of its worker's CPU, and only as a last resort to the worker's own CPU (paper
//!    001 test 3, IRQ and capture on one core, 8.6%; test 4, on two cores, 34.5%).
//! 4. With fewer workers than queues, worker `i` serves queues `q` with `q % workers == i`
//!    (paper 000 test 5: two queues per capture thread kept it busy and lost nothing).
//! 5. Stage CPUs are the local CPUs left over, never an IRQ CPU; other nodes' CPUs only
//!    when the node has none left.

use std::fmt;

use serde::Serialize;

use crate::cpus::format_list;
use crate::machine::Machine;
use crate::nic::Nic;
use crate::settings::{on_off, PauseFrames};

/// What the user asked of the plan.
#[derive(Clone, Copy, Debug, Default)]
pub struct PlanOptions {
    /// Capture workers (default: one per RX queue, at most one per local physical core).
    pub workers: Option<usize>,
    /// RX queues to configure with ethtool (default: as they are).
    pub queues: Option<u32>,
}

/// One receive queue in the plan.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct QueuePlan {
    /// Queue number.
    pub queue: u32,
    /// Its IRQ, if it has one.
    pub irq: Option<u32>,
    /// The CPU that will serve the IRQ.
    pub irq_cpu: Option<u32>,
}

/// One capture worker in the plan.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct WorkerPlan {
    /// Its first queue (`None` when there are more workers than queues).
    pub queue: Option<u32>,
    /// The CPU it is pinned to.
    pub cpu: u32,
    /// The IRQ of its first queue.
    pub irq: Option<u32>,
    /// The CPU serving that IRQ.
    pub irq_cpu: Option<u32>,
    /// Every queue it serves.
    pub queues: Vec<QueuePlan>,
}

/// NIC settings the plan asks for.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct NicPlan {
    /// RX queues (channels) to configure; `None` if the driver cannot report them.
    pub channels: Option<u32>,
    /// RX ring size (the driver's maximum); `None` if it cannot be set.
    pub rx_ring: Option<u32>,
    /// Pause frames off (`None` if the driver has none).
    pub pause: Option<PauseFrames>,
}

/// The kind of a warning, as JSON shows it.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WarningKind {
    /// Something runs on, or is served from, a node other than the NIC's.
    WrongNode,
    /// The NIC's node is unknown on a multi-node machine.
    NumaUnknown,
    /// More workers than physical cores on the NIC's node.
    TooManyWorkers,
    /// More workers than CPUs.
    Oversubscribed,
    /// irqbalance is running and will move IRQs.
    Irqbalance,
    /// Many queues merged into one socket.
    QueuesMerged,
    /// Two workers on hyper-threading twins.
    HtTwins,
    /// An IRQ served on a capture worker's CPU.
    IrqShared,
    /// All queue IRQs served by one CPU now.
    IrqSingleCpu,
    /// No queue IRQs found (virtual device, or names tune does not know).
    NoIrqs,
    /// RPS moves receive work to other CPUs.
    Rps,
    /// Pause frames are on.
    Pause,
    /// More workers than RX queues.
    WorkersExceedQueues,
    /// No CPU left for pipeline stages.
    NoStageCpu,
}

/// One risk in the machine or the plan, with what to do about it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Warning {
    /// What kind of risk.
    pub kind: WarningKind,
    /// The details.
    pub message: String,
}

/// A placement plan for one interface.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Plan {
    /// Interface name.
    pub interface: String,
    /// NUMA node everything is placed on.
    pub node: u32,
    /// Capture workers.
    pub workers: Vec<WorkerPlan>,
    /// CPUs for pipeline stages.
    pub stage_cpus: Vec<u32>,
    /// NIC settings.
    pub nic: NicPlan,
    /// Risks found.
    pub warnings: Vec<Warning>,
}

impl Plan {
    /// Makes the plan for `machine`.
    pub fn new(machine: &Machine, opts: PlanOptions) -> Self {
        let nic = &machine.nic;
        let mut warnings = Vec::new();
        let mut warn = |kind, message: String| warnings.push(Warning { kind, message });

        let node = nic_node(machine, &mut warn);
        let cpus = Cpus::around(machine, node);
        let channels = nic.settings.channels.map(|c| {
            let max = c.max_rx_queues().max(1);
            opts.queues.unwrap_or(nic.active_rx_queues()).clamp(1, max)
        });
        let queues = channels.unwrap_or(nic.active_rx_queues()).max(1);
        let n = opts
            .workers
            .unwrap_or_else(|| (queues as usize).min(cpus.local_cores.len()))
            .max(1);
        let worker_cpus = cpus.for_workers(n);
        let irq_cpus = irq_cpus(machine, &cpus, &worker_cpus, queues);
        let workers = worker_plans(machine, &worker_cpus, &irq_cpus, queues);
        let used_irq: Vec<u32> = irq_cpus.iter().flatten().copied().collect();
        let stage_cpus = cpus.for_stages(&worker_cpus, &used_irq);

        machine_warnings(machine, node, &cpus.local, &mut warn);
        plan_warnings(
            machine,
            &PlanShape {
                node,
                cpus: &cpus,
                queues,
                workers: &workers,
                stage_cpus: &stage_cpus,
            },
            &mut warn,
        );

        let nic_plan = NicPlan {
            channels,
            rx_ring: nic.settings.ring.map(|r| r.rx_max.max(r.rx)),
            pause: nic.settings.pause.map(|_| PauseFrames::default()),
        };
        Plan {
            interface: nic.name.clone(),
            node,
            workers,
            stage_cpus,
            nic: nic_plan,
            warnings,
        }
    }

    /// The worker CPUs, in worker order.
    pub fn worker_cpus(&self) -> Vec<u32> {
        self.workers.iter().map(|w| w.cpu).collect()
    }

    /// Warnings of one kind.
    pub fn warnings_of(&self, kind: WarningKind) -> impl Iterator<Item = &Warning> {
        self.warnings.iter().filter(move |w| w.kind == kind)
    }

    /// The plan as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plan serializes")
    }
}

/// The node everything is placed on: the NIC's, if it has CPUs, else the first node
/// with CPUs. Warns when a multi-node machine does not say where a physical NIC is.
fn nic_node(machine: &Machine, warn: &mut impl FnMut(WarningKind, String)) -> u32 {
    let topo = &machine.topology;
    let nic = &machine.nic;
    let node = nic
        .numa_node
        .filter(|n| topo.node(*n).is_some_and(|n| !n.cpus.is_empty()))
        .unwrap_or_else(|| {
            topo.nodes
                .iter()
                .find(|n| !n.cpus.is_empty())
                .map_or(0, |n| n.id)
        });
    if topo.nodes.len() > 1 && nic.numa_node.is_none() && !nic.is_virtual() {
        warn(
            WarningKind::NumaUnknown,
            format!(
                "{} does not say which NUMA node it is on; planning on node {node}",
                nic.name
            ),
        );
    }
    node
}

/// The CPUs as seen from the planned node.
struct Cpus {
    /// CPUs of the node.
    local: Vec<u32>,
    /// CPUs of every other node.
    remote: Vec<u32>,
    /// The node's physical cores, each a list of its threads.
    local_cores: Vec<Vec<u32>>,
    /// Worker placement order: first threads of local cores, local twins, then the same
    /// remotely.
    order: Vec<u32>,
}

impl Cpus {
    fn around(machine: &Machine, node: u32) -> Self {
        let topo = &machine.topology;
        let local: Vec<u32> = topo.node(node).map(|n| n.cpus.clone()).unwrap_or_default();
        let remote: Vec<u32> = topo
            .nodes
            .iter()
            .filter(|n| n.id != node)
            .flat_map(|n| n.cpus.iter().copied())
            .collect();
        let local_cores = topo.cores_of(&local);
        let order: Vec<u32> = threads_in_order(&local_cores)
            .into_iter()
            .chain(threads_in_order(&topo.cores_of(&remote)))
            .collect();
        Cpus {
            local,
            remote,
            local_cores,
            order,
        }
    }

    /// The CPU of each of `n` workers, going round `order` when there are more workers
    /// than CPUs.
    fn for_workers(&self, n: usize) -> Vec<u32> {
        (0..n).map(|i| self.order[i % self.order.len()]).collect()
    }

    /// Local CPUs that run no worker and serve no IRQ; the other nodes' when none is left.
    fn for_stages(&self, worker_cpus: &[u32], irq_cpus: &[u32]) -> Vec<u32> {
        let busy = |c: &u32| worker_cpus.contains(c) || irq_cpus.contains(c);
        let stage_cpus: Vec<u32> = self.local.iter().copied().filter(|c| !busy(c)).collect();
        if !stage_cpus.is_empty() {
            return stage_cpus;
        }
        self.remote.iter().copied().filter(|c| !busy(c)).collect()
    }
}

/// The CPU serving the IRQ of each worker's first queue (`None` for a worker with no
/// queue IRQ): free local cores first (first threads, then twins), then a twin of the
/// worker's CPU, and last the worker's own CPU.
fn irq_cpus(machine: &Machine, cpus: &Cpus, worker_cpus: &[u32], queues: u32) -> Vec<Option<u32>> {
    let worker_core = |c: u32| {
        cpus.local_cores
            .iter()
            .any(|core| core.contains(&c) && core.iter().any(|x| worker_cpus.contains(x)))
    };
    let mut pool: Vec<u32> = threads_in_order(&cpus.local_cores)
        .into_iter()
        .filter(|&c| !worker_core(c))
        .collect();
    pool.reverse();
    let has_irqs = !machine.nic.irqs.is_empty();
    let mut irq_cpus: Vec<Option<u32>> = Vec::with_capacity(worker_cpus.len());
    let mut used_irq: Vec<u32> = Vec::new();
    for (i, &cpu) in worker_cpus.iter().enumerate() {
        let serves_irq = has_irqs && (i as u32) < queues;
        if !serves_irq {
            irq_cpus.push(None);
            continue;
        }
        let pick = pool.pop().or_else(|| {
            machine.topology.cpu(cpu).and_then(|c| {
                c.siblings
                    .iter()
                    .copied()
                    .find(|&t| t != cpu && !worker_cpus.contains(&t) && !used_irq.contains(&t))
            })
        });
        let chosen = pick.unwrap_or(cpu);
        used_irq.push(chosen);
        irq_cpus.push(Some(chosen));
    }
    irq_cpus
}

/// One plan per worker: worker `i` serves queues `q` with `q % workers == i`, and its
/// queues' IRQs go to `irq_cpus[i]`.
fn worker_plans(
    machine: &Machine,
    worker_cpus: &[u32],
    irq_cpus: &[Option<u32>],
    queues: u32,
) -> Vec<WorkerPlan> {
    let n = worker_cpus.len();
    (0..n)
        .map(|i| {
            let qs: Vec<QueuePlan> = (0..queues)
                .filter(|q| *q as usize % n == i)
                .map(|q| {
                    let irq = machine
                        .nic
                        .irqs
                        .iter()
                        .find(|x| x.queue == q)
                        .map(|x| x.irq);
                    QueuePlan {
                        queue: q,
                        irq,
                        irq_cpu: irq.and(irq_cpus[i]),
                    }
                })
                .collect();
            WorkerPlan {
                queue: qs.first().map(|q| q.queue),
                cpu: worker_cpus[i],
                irq: qs.first().and_then(|q| q.irq),
                irq_cpu: qs.first().and_then(|q| q.irq_cpu),
                queues: qs,
            }
        })
        .collect()
}

/// What `plan_warnings` judges: the plan's choices and the CPUs they came from.
struct PlanShape<'a> {
    node: u32,
    cpus: &'a Cpus,
    queues: u32,
    workers: &'a [WorkerPlan],
    stage_cpus: &'a [u32],
}

/// Warnings about the plan: where the workers sit, then what they serve.
fn plan_warnings(
    machine: &Machine,
    plan: &PlanShape<'_>,
    warn: &mut impl FnMut(WarningKind, String),
) {
    placement_warnings(machine, plan, warn);
    load_warnings(plan, warn);
}

/// Workers off the node, more workers than cores or CPUs, workers on twins.
fn placement_warnings(
    machine: &Machine,
    plan: &PlanShape<'_>,
    warn: &mut impl FnMut(WarningKind, String),
) {
    let PlanShape {
        node,
        cpus,
        workers,
        ..
    } = *plan;
    let n = workers.len();
    let worker_cpus: Vec<u32> = workers.iter().map(|w| w.cpu).collect();
    let local_cores = cpus.local_cores.len();
    let remote_workers: Vec<u32> = worker_cpus
        .iter()
        .copied()
        .filter(|c| !cpus.local.contains(c))
        .collect();
    if !remote_workers.is_empty() {
        warn(
            WarningKind::WrongNode,
            format!(
                "{n} workers do not fit on node {node} ({} CPUs): CPUs {} are on another node and reach the NIC's memory across the interconnect",
                cpus.local.len(),
                format_list(&remote_workers)
            ),
        );
    }
    if n > local_cores {
        warn(
            WarningKind::TooManyWorkers,
            format!("{n} workers for {local_cores} physical cores on node {node}"),
        );
    }
    if n > cpus.order.len() {
        warn(
            WarningKind::Oversubscribed,
            format!(
                "{n} workers for {} CPUs: some CPUs run two workers",
                cpus.order.len()
            ),
        );
    }
    let twins: Vec<String> = pairs(&worker_cpus)
        .filter(|(a, b)| machine.topology.twins(*a, *b))
        .map(|(a, b)| format!("{a}/{b}"))
        .collect();
    if !twins.is_empty() {
        warn(
            WarningKind::HtTwins,
            format!(
                "workers on hyper-threading twins {}: they share one physical core",
                twins.join(", ")
            ),
        );
    }
}

/// Queues merged into one socket, IRQs on capture CPUs, more workers than queues, no
/// stage CPU.
fn load_warnings(plan: &PlanShape<'_>, warn: &mut impl FnMut(WarningKind, String)) {
    let PlanShape {
        queues,
        workers,
        stage_cpus,
        ..
    } = *plan;
    let n = workers.len();
    if let Some(w) = workers.iter().find(|w| w.queues.len() > 2) {
        warn(
            WarningKind::QueuesMerged,
            format!(
                "{} queues merged into one socket on CPU {} (queues {}); paper 001 test 1 merged 16 into one and captured 15%",
                w.queues.len(),
                w.cpu,
                format_list(&w.queues.iter().map(|q| q.queue).collect::<Vec<_>>())
            ),
        );
    }
    let shared: Vec<u32> = workers
        .iter()
        .filter(|w| w.irq_cpu == Some(w.cpu))
        .map(|w| w.cpu)
        .collect();
    if !shared.is_empty() {
        warn(
            WarningKind::IrqShared,
            format!(
                "IRQs served on the capture CPU{} {}: no free CPU left (paper 001 test 3 vs 4: 8.6% against 34.5%)",
                if shared.len() == 1 { "" } else { "s" },
                format_list(&shared)
            ),
        );
    }
    if n > queues as usize {
        warn(
            WarningKind::WorkersExceedQueues,
            format!(
                "{n} workers for {queues} RX queue{}: the extra workers share queues through fanout hashing",
                if queues == 1 { "" } else { "s" }
            ),
        );
    }
    if stage_cpus.is_empty() {
        warn(
            WarningKind::NoStageCpu,
            "no CPU left for pipeline stages: use workers mode, or fewer workers".to_owned(),
        );
    }
}

/// Warnings about the machine as it is, before the plan changes anything: irqbalance,
/// IRQs served off the NIC's node or all on one CPU, no queue IRQs, RPS, pause frames.
fn machine_warnings(
    machine: &Machine,
    node: u32,
    local: &[u32],
    warn: &mut impl FnMut(WarningKind, String),
) {
    let nic = &machine.nic;
    let multi_node = machine.topology.nodes.len() > 1;
    let has_irqs = !nic.irqs.is_empty();
    if let Some(pid) = machine.irqbalance {
        warn(
            WarningKind::Irqbalance,
            format!(
                "irqbalance is running (pid {pid}) and will move IRQ affinities back; \
                 stop it (systemctl stop irqbalance) before `corecap tune apply` (paper 001 §3.4.1)"
            ),
        );
    }
    if multi_node {
        warn_far_irqs(nic, node, local, warn);
    }
    warn_irqs_on_one_cpu(nic, warn);
    if !has_irqs {
        let why = if nic.is_virtual() {
            "a virtual device: receive work runs on the sending CPU or in NAPI threads"
        } else {
            "no queue IRQs found in /proc/interrupts"
        };
        warn(
            WarningKind::NoIrqs,
            format!("{} has no queue IRQs to place ({why})", nic.name),
        );
    }
    let rps: Vec<u32> = nic
        .rps
        .iter()
        .filter(|m| !m.cpus.is_empty())
        .map(|m| m.queue)
        .collect();
    if !rps.is_empty() {
        warn(
            WarningKind::Rps,
            format!(
                "RPS is on for RX queue{} {} of {}: receive work is moved to other CPUs after the IRQ",
                if rps.len() == 1 { "" } else { "s" },
                format_list(&rps),
                nic.name
            ),
        );
    }
    if let Some(p) = nic.settings.pause.filter(|p| p.rx || p.tx) {
        warn(
            WarningKind::Pause,
            format!(
                "pause frames are on (rx {}, tx {}): a slow capture throttles the sender instead of counting drops; apply turns them off",
                on_off(p.rx),
                on_off(p.tx)
            ),
        );
    }
}

/// Warns when queue IRQs may be served on CPUs off the NIC's node.
fn warn_far_irqs(nic: &Nic, node: u32, local: &[u32], warn: &mut impl FnMut(WarningKind, String)) {
    let mut irqs = Vec::new();
    let mut away: Vec<u32> = Vec::new();
    for q in &nic.irqs {
        let far: Vec<u32> = q
            .affinity
            .iter()
            .flatten()
            .copied()
            .filter(|c| !local.contains(c))
            .collect();
        if !far.is_empty() {
            irqs.push(q.irq);
            away.extend(far);
        }
    }
    if !irqs.is_empty() {
        warn(
            WarningKind::WrongNode,
            format!(
                "{} is on node {node} but IRQ{} {} may be served on CPUs {} of another node \
                 (paper 001 test 2: queues served on the far node)",
                nic.name,
                if irqs.len() == 1 { "" } else { "s" },
                format_list(&irqs),
                format_list(&away)
            ),
        );
    }
}

/// Warns when every queue IRQ is served by the same single CPU.
fn warn_irqs_on_one_cpu(nic: &Nic, warn: &mut impl FnMut(WarningKind, String)) {
    if nic.irqs.len() > 1 {
        let first = nic.irqs[0].affinity.clone();
        if let Some(a) = first.filter(|a| a.len() == 1) {
            if nic.irqs.iter().all(|q| q.affinity.as_ref() == Some(&a)) {
                warn(
                    WarningKind::IrqSingleCpu,
                    format!(
                        "all {} queue IRQs of {} are served by CPU {}: one core does the receive work of every queue",
                        nic.irqs.len(),
                        nic.name,
                        a[0]
                    ),
                );
            }
        }
    }
}

/// Threads of cores in placement order: every core's first thread, then every second
/// thread, and so on.
fn threads_in_order(cores: &[Vec<u32>]) -> Vec<u32> {
    let depth = cores.iter().map(Vec::len).max().unwrap_or(0);
    (0..depth)
        .flat_map(|t| cores.iter().filter_map(move |c| c.get(t).copied()))
        .collect()
}

fn pairs(v: &[u32]) -> impl Iterator<Item = (u32, u32)> + '_ {
    v.iter()
        .enumerate()
        .flat_map(move |(i, &a)| v[i + 1..].iter().map(move |&b| (a, b)))
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "plan for {} on node {}", self.interface, self.node)?;
        for (i, w) in self.workers.iter().enumerate() {
            let qs: Vec<String> = w
                .queues
                .iter()
                .map(|q| match (q.irq, q.irq_cpu) {
                    (Some(irq), Some(c)) => format!("{} (IRQ {irq} on CPU {c})", q.queue),
                    _ => q.queue.to_string(),
                })
                .collect();
            let qs = if qs.is_empty() {
                "fanout share".to_owned()
            } else {
                format!(
                    "queue{} {}",
                    if qs.len() == 1 { "" } else { "s" },
                    qs.join(", ")
                )
            };
            writeln!(f, "  worker {i}: CPU {}, {qs}", w.cpu)?;
        }
        let stage = if self.stage_cpus.is_empty() {
            "none".to_owned()
        } else {
            format_list(&self.stage_cpus)
        };
        writeln!(f, "  stage CPUs: {stage}")?;
        let mut nic = Vec::new();
        if let Some(c) = self.nic.channels {
            nic.push(format!("{c} RX queues"));
        }
        if let Some(r) = self.nic.rx_ring {
            nic.push(format!("RX ring {r}"));
        }
        if self.nic.pause.is_some() {
            nic.push("pause off".to_owned());
        }
        if !nic.is_empty() {
            writeln!(f, "  NIC: {}", nic.join(", "))?;
        }
        for w in &self.warnings {
            let kind = serde_json::to_value(w.kind).ok();
            let kind = kind.as_ref().and_then(|k| k.as_str()).unwrap_or("?");
            writeln!(f, "warning [{kind}]: {}", w.message)?;
        }
        Ok(())
    }
}
