//! Running a [`Plan`]: compile the filters, attach the XDP programs, start the stage
//! threads and open the sinks, then start the workers and wait until each has its socket
//! open. Everything the run opens, it takes from the plan; what it adds is what only the
//! kernel and libpcap can give (filter programs, sockets, threads).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use corecap_linux::abi::sock_filter;
use corecap_linux::{filter, netdev};
use corecap_wire::ReadInterface;

use super::config::{CaptureError, Input, OutputConfig};
use super::plan::{
    Facts, Interface, LivePlan, PipelinePlan, Plan, Settings, SinkPlan, SourcePlan, Via, WorkerPlan,
};
use super::Capture;
use crate::capture::spawn::{counted_member_pipes, Stage, StageCtx};
use crate::sink::file::FileSink;
use crate::sink::merge;
use crate::source::afpacket::{FanoutGroup, LiveSpec};
use crate::source::afxdp::XdpSetup;
use crate::source::replay::{FileIface, FileSpec};
use crate::stats::ledger::WorkerCounters;
use crate::steer::filter::{compile_filter, Program};
use crate::steer::group::{Control as SteerControl, Group, GroupKind, Matrix, Steer};
use crate::steer::indirection::Indirection;
use crate::worker::{self, App, Control, Outcome, Source, Worker};

/// The machine's facts, from the kernel (`corecap_linux::netdev`, the CPU affinity mask)
/// and from the `-r` files themselves.
pub(crate) struct Machine;

impl Facts for Machine {
    fn interface(&self, name: &str) -> Result<Interface, CaptureError> {
        Ok(Interface {
            ifindex: netdev::ifindex(name)?,
            linktype: netdev::linktype(name)?,
            rx_queues: netdev::rx_queues(name)?,
        })
    }

    fn allowed_cpus(&self) -> Vec<u32> {
        corecap_linux::affinity::allowed_cpus()
    }

    fn file_interfaces(&self, path: &Path) -> Result<Vec<ReadInterface>, CaptureError> {
        // A file is read twice (its interfaces first, then its packets by each worker): a
        // pipe's bytes would be gone, and its reader would wait for another writer.
        use std::os::unix::fs::FileTypeExt;
        if std::fs::metadata(path).is_ok_and(|m| {
            let t = m.file_type();
            t.is_fifo() || t.is_char_device() || t.is_socket()
        }) {
            return Err(CaptureError::Config(format!(
                "{}: a pipe or a device, not a file: -r reads a file (each worker reads it \
                 through); save the stream to a file first (for a live capture, -i)",
                path.display()
            )));
        }
        let r = corecap_wire::read::CaptureReader::open(path)
            .map_err(|e| CaptureError::Config(format!("{}: {e}", path.display())))?;
        Ok(r.into_interfaces())
    }
}

/// Runs a plan: see the module doc. Outputs are opened before any worker starts, so an
/// unwritable path fails early.
pub(crate) fn run(plan: Plan) -> Result<Capture, CaptureError> {
    let set = &plan.settings;
    let inputs: Vec<PathBuf> = plan.files.iter().map(|f| f.path.clone()).collect();
    let mut xdp = Vec::new();
    let mut notes = Vec::new();
    // A folder without a catalog before this start: a failed start takes back the one it
    // made, with its files.
    let new_catalog = set
        .output
        .as_ref()
        .filter(|o| o.path.as_os_str() != "-")
        .map(|o| corecap_store::names::dir_of(&o.path).to_owned())
        .filter(|d| d.is_dir() && !d.join(corecap_store::CATALOG).exists());
    // The cutoff's classes compile before any file is touched: a bad filter only refuses.
    let classes = cutoff_classes(set, &plan)?;
    if classes.is_some() {
        notes.extend(cutoff_spread(&plan));
    }
    // One live writer per name: a second start on it is refused before it touches a file.
    let claim = set.output.as_ref().map(claim_output).transpose()?.flatten();
    let recovered = match &set.output {
        Some(o) => prepare_output(o, &mut notes)?,
        None => Vec::new(),
    };
    let mut opened = Vec::with_capacity(plan.inputs.len());
    for input in &plan.inputs {
        opened.push(open_input(set, input, &mut xdp, &mut notes)?);
    }
    arm_spare(set, &plan, &opened)?;
    let files = file_specs(set, &plan)?;
    let sources: Vec<Source> = plan
        .workers
        .iter()
        .map(|w| source(set, &plan, w, &opened, &files))
        .collect();
    let control = Arc::new(Control::new(set.count));
    let (apps, outputs) = match &plan.pipeline {
        Some(p) => start_pipeline(set, &plan, p)?,
        None => {
            let (apps, merge) = open_sinks(set, &plan, &control)?;
            let outputs = Outputs {
                merge,
                ..Outputs::default()
            };
            (apps, outputs)
        }
    };
    let standby = set.standby.as_ref().filter(|_| plan.workers.len() == 1);
    let apps = with_cutoff(apps, classes.as_ref());
    let (handles, counters) = spawn_workers(&plan.workers, sources, apps, &control, standby)?;
    let cap = Capture {
        control,
        counters,
        files: plan.file_paths(),
        workers: plan.workers.into_iter().map(|w| w.info).collect(),
        notes: Vec::new(),
        handles,
        merge: outputs.merge,
        stages: outputs.stages,
        group_kinds: outputs.group_kinds,
        controls: outputs.controls,
        matrix: outputs.matrix,
        epoch: 0,
        next_index: outputs.next_index,
        xdp,
        retention: set.output.as_ref().and_then(|o| o.file.retention.clone()),
        recovered,
        new_catalog,
        claim,
        started: Instant::now(),
        duration: set.duration,
    };
    let mut cap = cap.wait_ready(notes)?;
    if let Some(o) = &set.output {
        cap.notes.extend(trim_earlier_runs(o, &inputs));
    }
    Ok(cap)
}

/// The output's `--flow-cutoff` classes, compiled for each interface; None when nothing
/// is cut.
fn cutoff_classes(
    set: &Settings,
    plan: &Plan,
) -> Result<Option<Arc<crate::cutoff::Classes>>, CaptureError> {
    let Some(c) = set.output.as_ref().and_then(|o| o.cutoff.as_ref()) else {
        return Ok(None);
    };
    if !c.cuts() {
        return Ok(None);
    }
    Ok(Some(crate::cutoff::Classes::compile(
        c,
        &plan.ifaces,
        set.snaplen,
    )?))
}

/// A cutoff whose connections the balance may spread over several workers says so: each
/// counts its own part, so more is kept. (Files are split by flow hash whatever the
/// balance.)
fn cutoff_spread(plan: &Plan) -> Option<String> {
    let set = &plan.settings;
    if set.balance == super::Balance::Flow || !set.live || plan.workers.len() < 2 {
        return None;
    }
    // The flag's own spelling (`round-robin`), as serde names it.
    let balance = serde_json::to_value(set.balance).unwrap_or_default();
    Some(format!(
        "--flow-cutoff with --balance {}: a connection may be spread over workers, each \
         counting its own part of it, so more of it is kept",
        balance.as_str().unwrap_or("?")
    ))
}

/// Each worker's app with the cutoff of what it records: a worker that writes a file (its
/// own or the merged one) cuts its own flows (the fanout keeps a flow on one worker).
fn with_cutoff(
    apps: Vec<App>,
    classes: Option<&Arc<crate::cutoff::Classes>>,
) -> Vec<(App, Option<crate::cutoff::Cutoff>)> {
    apps.into_iter()
        .map(|app| {
            let records = matches!(app, App::File(_) | App::Merge(_));
            let cutoff = classes
                .filter(|_| records)
                .map(|c| crate::cutoff::Cutoff::new(c.clone()));
            (app, cutoff)
        })
        .collect()
}

/// Claims the output's name for this writer (see `corecap_store::lock`); none for standard
/// output, a FIFO, or a folder that is not there (opening the output then says so).
fn claim_output(o: &OutputConfig) -> Result<Option<corecap_store::lock::WriterLock>, CaptureError> {
    let dir = corecap_store::names::dir_of(&o.path);
    if o.path.as_os_str() == "-" || corecap_store::write::disk::is_fifo(&o.path) || !dir.is_dir() {
        return Ok(None);
    }
    corecap_store::lock::WriterLock::capture(&o.path)
        .map(Some)
        .map_err(|e| CaptureError::Output(e.to_string()))
}

/// Before any file of the output is opened: recovers what a crash left in its directory
/// (one note per file). The files already there count against the byte budget once the
/// start has succeeded ([`trim_earlier_runs`]).
fn prepare_output(
    o: &OutputConfig,
    notes: &mut Vec<String>,
) -> Result<Vec<corecap_store::recover::Recovered>, CaptureError> {
    if o.path.as_os_str() == "-" || corecap_store::write::disk::is_fifo(&o.path) {
        return Ok(Vec::new());
    }
    let dir = corecap_store::names::dir_of(&o.path).to_owned();
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let kek = o.file.seal.as_ref().map(|s| s.kek.clone());
    let r = corecap_store::recover::recover_dir(&dir, kek.as_ref()).map_err(|e| {
        CaptureError::Output(format!("recovering the files in {}: {e}", dir.display()))
    })?;
    notes.extend(r.files.iter().map(|f| f.describe()));
    notes.extend(r.notes);
    Ok(r.files)
}

/// Whether `a` and `b` name the same file (the same device and inode).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Once a start has succeeded (never before: a start that fails deletes nothing): counts
/// the capture's files that earlier runs left against the byte budget and deletes the
/// oldest over it. One note for what it deleted, and one for each file whose name begins as
/// the capture's but that retention leaves alone, with why: among them the files this
/// capture reads (`-r`), which are never deleted under it.
fn trim_earlier_runs(o: &OutputConfig, inputs: &[PathBuf]) -> Vec<String> {
    let Some(ret) = &o.file.retention else {
        return Vec::new();
    };
    if o.path.as_os_str() == "-" || corecap_store::write::disk::is_fifo(&o.path) {
        return Vec::new();
    }
    let mut found = corecap_store::retention::on_disk(&o.path);
    let read = |p: &Path| inputs.iter().any(|i| same_file(i, p));
    let (files, being_read): (Vec<_>, Vec<_>) = found.files.into_iter().partition(|f| !read(&f.0));
    found.left_alone.extend(
        being_read
            .into_iter()
            .map(|f| (f.0, "this capture reads it (-r)")),
    );
    let mut notes: Vec<String> = found
        .left_alone
        .iter()
        .map(|(p, why)| format!("--retain leaves {} alone: {why}", p.display()))
        .collect();
    ret.adopt(files);
    let gone = ret.trim();
    if !gone.is_empty() {
        let _ = corecap_linux::direct::sync_parent(&o.path);
        let names: Vec<String> = gone.iter().map(|p| p.display().to_string()).collect();
        notes.push(format!(
            "--retain deleted {} files written by earlier runs to fit the budget, oldest packets first: {}",
            gone.len(),
            names.join(", ")
        ));
    }
    notes
}

/// A live input made ready for its workers.
enum Opened {
    /// AF_PACKET: the socket filter (snap length and queue prefix included) and the
    /// fanout group the sockets join.
    Packet {
        prog: Vec<sock_filter>,
        group: Option<Arc<FanoutGroup>>,
    },
    /// AF_XDP: the attached program and the userspace filter.
    Xdp {
        setup: Arc<XdpSetup>,
        filter: Option<Program>,
    },
}

/// Compiles an input's filter and, for AF_XDP, loads and attaches its program.
fn open_input(
    set: &Settings,
    p: &LivePlan,
    xdp: &mut Vec<Arc<XdpSetup>>,
    notes: &mut Vec<String>,
) -> Result<Opened, CaptureError> {
    let input = &p.input;
    match p.via {
        Via::Packet { fanout } => Ok(Opened::Packet {
            prog: socket_filter(p, set.filter.as_deref(), set.snaplen)?,
            group: fanout.then(|| Arc::new(FanoutGroup::default())),
        }),
        Via::Xdp { spread } => {
            let setup = Arc::new(XdpSetup::new(&input.iface, p.ifindex, p.queues, spread)?);
            // Attach first: a queue without a socket yet passes its frames to the stack,
            // and an interface that has another XDP program fails here, before any socket.
            let mode = setup.attach()?;
            if mode == corecap_linux::xsk::AttachMode::Generic {
                notes.push(format!(
                    "warning: {} does not support native XDP; using generic (skb) XDP, which is slower",
                    input.iface
                ));
            }
            xdp.push(setup.clone());
            let filter = set
                .filter
                .as_deref()
                .map(|e| compile_filter(p.linktype, set.snaplen, e))
                .transpose()?;
            Ok(Opened::Xdp { setup, filter })
        }
    }
}

/// A lone AF_PACKET worker with a spare socket: its filter goes into the spare now, so
/// the capture starts here, before its files, stage threads and worker are in place (the
/// ring holds the packets until the worker takes it). A spare the manager armed already
/// with this program is left as it is (see [`crate::source::afpacket::Spare`]).
fn arm_spare(set: &Settings, plan: &Plan, opened: &[Opened]) -> Result<(), CaptureError> {
    let (Some(spare), [w], [Opened::Packet { prog, group: None }]) =
        (&set.spare, plan.workers.as_slice(), opened)
    else {
        return Ok(());
    };
    if let SourcePlan::Packet { input, .. } = w.source {
        spare.arm(plan.inputs[input].ifindex, set.ring, prog)?;
    }
    Ok(())
}

/// The kernel filter of an AF_PACKET input: the expression (or accept all) cut at the
/// snap length, after a test of the RX queue for `IF@Q`.
fn socket_filter(
    p: &LivePlan,
    expr: Option<&str>,
    snaplen: u32,
) -> Result<Vec<sock_filter>, CaptureError> {
    socket_program(&p.input, p.linktype, expr, snaplen)
}

/// The kernel filter of an AF_PACKET socket on `input` (of link type `linktype`): the
/// expression (or accept all) cut at the snap length, after a test of the RX queue for
/// `IF@Q`. What a capture swaps into its socket, and what the manager swaps into a spare
/// as soon as a spawned capture is admitted.
pub fn socket_program(
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

/// The `-r` files with their filters compiled.
fn file_specs(set: &Settings, plan: &Plan) -> Result<Vec<FileSpec>, CaptureError> {
    plan.files
        .iter()
        .map(|f| {
            let ifaces = f
                .ifaces
                .iter()
                .map(|i| {
                    let filter = match set.filter.as_deref() {
                        // As tcpdump compiles it for this interface: its link type and
                        // the byte order of its section.
                        Some(e) => {
                            let insns = corecap_linux::filter::compile_for_file(
                                i.linktype,
                                i.big_endian,
                                set.snaplen,
                                e,
                            )?;
                            Some(
                                Program::new(insns)
                                    .map_err(|e| CaptureError::Config(e.to_string()))?,
                            )
                        }
                        None => None,
                    };
                    Ok(FileIface {
                        if_id: i.if_id,
                        filter,
                        link: corecap_wire::Link::of(i.linktype),
                    })
                })
                .collect::<Result<_, CaptureError>>()?;
            Ok(FileSpec {
                path: f.path.clone(),
                ifaces,
            })
        })
        .collect()
}

/// What worker `w` reads, from its plan and its input as opened.
fn source(
    set: &Settings,
    plan: &Plan,
    w: &WorkerPlan,
    opened: &[Opened],
    files: &[FileSpec],
) -> Source {
    match w.source {
        SourcePlan::Packet {
            input,
            member,
            if_id,
            queue,
        } => {
            let Opened::Packet { prog, group } = &opened[input] else {
                unreachable!("an AF_PACKET worker reads an AF_PACKET input");
            };
            let p = &plan.inputs[input];
            let spec = LiveSpec {
                iface: p.input.iface.clone(),
                ifindex: p.ifindex,
                fanout: set.balance.fanout(),
                group: group.clone(),
                member,
                ring: set.ring,
                filter: prog.clone(),
                spare: set.spare.clone(),
                promisc: set.promisc,
            };
            Source::Live {
                spec,
                if_id,
                queue,
                link: corecap_wire::Link::of(p.linktype),
            }
        }
        SourcePlan::Xdp {
            input,
            queue,
            slot,
            if_id,
        } => {
            let Opened::Xdp { setup, filter } = &opened[input] else {
                unreachable!("an AF_XDP worker reads an AF_XDP input");
            };
            Source::Xdp {
                setup: setup.clone(),
                queue,
                slot,
                if_id,
                filter: filter.clone(),
                snaplen: set.snaplen,
            }
        }
        SourcePlan::Files { workers } => Source::Files {
            files: files.to_vec(),
            workers,
        },
    }
}

/// The merge writer's thread: it returns the file and the packets it could not write.
type MergeWriter = JoinHandle<(FileSink, merge::Unwritten)>;

/// The threads and steering state besides the workers.
#[derive(Default)]
struct Outputs {
    merge: Option<MergeWriter>,
    stages: Vec<Stage>,
    group_kinds: Vec<GroupKind>,
    controls: Vec<(rtrb::Producer<SteerControl>, Arc<AtomicU64>)>,
    matrix: Option<(Arc<ArcSwap<Matrix>>, StageCtx)>,
    next_index: Vec<usize>,
}

/// Pipeline mode: compiles the group filters, makes each member's pipes and starts its
/// stage thread (which opens its files), and gives each worker a steering app over the
/// published matrix, with a control ring.
fn start_pipeline(
    set: &Settings,
    plan: &Plan,
    p: &PipelinePlan,
) -> Result<(Vec<App>, Outputs), CaptureError> {
    let groups = build_groups(set, p)?;
    // Each member gets an end per worker (spsc: a ring each; mpsc: one shared queue).
    let mut txs: Vec<Vec<_>> = (0..p.pipes.workers).map(|_| Vec::new()).collect();
    let mut rxs = Vec::new();
    for _ in &p.members {
        let (t, r, live) = counted_member_pipes(p.pipes.transport, p.pipes.workers);
        for (w, tx) in t.into_iter().enumerate() {
            txs[w].push(tx);
        }
        rxs.push((r, live));
    }
    let ctx = StageCtx {
        output: set.output.clone(),
        flows: set.flows.clone(),
        ifaces: plan.ifaces.clone(),
        snaplen: set.snaplen,
        stage_cpus: p.stage_cpus.clone(),
        pin: set.pin,
        transport: p.pipes.transport,
    };
    let mut stages = Vec::with_capacity(p.members.len());
    for (m, (rx, live)) in p.members.iter().zip(rxs) {
        stages.push(ctx.spawn(m, rx, live)?);
    }
    let shared = Arc::new(ArcSwap::from_pointee(Matrix { groups }));
    let mut apps = Vec::with_capacity(txs.len());
    let mut controls = Vec::with_capacity(txs.len());
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
    let outputs = Outputs {
        merge: None,
        stages,
        group_kinds: p.groups.iter().map(|g| g.kind).collect(),
        controls,
        matrix: Some((shared, ctx)),
        next_index: p.groups.iter().map(|g| usize::from(g.members)).collect(),
    };
    Ok((apps, outputs))
}

/// The consumer groups of the plan, with their filters compiled for its link type.
fn build_groups(set: &Settings, p: &PipelinePlan) -> Result<Vec<Group>, CaptureError> {
    let mut groups = Vec::with_capacity(p.groups.len());
    for (gi, gs) in p.groups.iter().enumerate() {
        let filter = gs
            .filter
            .as_deref()
            .map(|e| compile_filter(p.linktype, set.snaplen, e))
            .transpose()?;
        groups.push(Group {
            kind: gs.kind,
            table: Indirection::new(gs.members),
            filter,
            snaplen: gs.snaplen.unwrap_or(set.snaplen),
            members: p
                .members
                .iter()
                .filter(|m| m.group == gi)
                .map(|m| m.member)
                .collect(),
        });
    }
    Ok(groups)
}

/// Without groups: each worker's app as the plan's sink says, with the files opened (and
/// the merge writer started, for a merged file).
fn open_sinks(
    set: &Settings,
    plan: &Plan,
    control: &Arc<Control>,
) -> Result<(Vec<App>, Option<MergeWriter>), CaptureError> {
    let n = plan.workers.len();
    let counting = || Ok(((0..n).map(|_| App::Count).collect(), None));
    // The plan makes a file sink only with an output; without one, every worker counts.
    let Some(o) = set.output.as_ref() else {
        return counting();
    };
    let open = |path: &Path, ifaces: Vec<_>| o.sink(path.to_owned(), ifaces, set.snaplen);
    match &plan.sink {
        SinkPlan::Count | SinkPlan::Steer => counting(),
        SinkPlan::Single(path) => {
            let sink = open(path, plan.ifaces.clone())?;
            Ok((vec![App::File(Box::new(sink))], None))
        }
        SinkPlan::Merged(path) => {
            let mut sink = open(path, plan.ifaces.clone())?;
            let (handles, rx, back) = merge::channels(n, sink.keeps_sessions());
            let apps = handles.into_iter().map(App::Merge).collect();
            let ctl = control.clone();
            // Files read with -r wait for the disk, as each worker's own file does; live
            // packets do not wait (the workers' rings would fill instead).
            let wait = !set.live;
            let merge = std::thread::Builder::new()
                .name("corecap-merge".into())
                .spawn(move || {
                    let _ = corecap_linux::privilege::drop_thread_capabilities();
                    merge::run(rx, back, sink, &ctl.stop, wait)
                })
                .map_err(|e| CaptureError::System(format!("cannot start the merge thread: {e}")))?;
            Ok((apps, Some(merge)))
        }
        SinkPlan::PerWorker(files) => {
            let o = files_in_all(o);
            let mut apps = Vec::with_capacity(files.len());
            for f in files {
                let ifaces = f
                    .ifaces
                    .iter()
                    .map(|&i| plan.ifaces[i as usize].clone())
                    .collect();
                let sink = o.sink(f.path.clone(), ifaces, set.snaplen)?;
                apps.push(App::File(Box::new(sink)));
            }
            Ok((apps, None))
        }
    }
}

/// The output of a file per worker: `-b files:N` keeps N files in all, as dumpcap counts
/// them, not N per worker. The workers' sinks share one retention that keeps the newest N
/// (under the byte budget too, when there is one) instead of each keeping its own N.
fn files_in_all(o: &OutputConfig) -> OutputConfig {
    let mut o = o.clone();
    if let Some(n) = o.file.rotation.files.take() {
        let r = o
            .file
            .retention
            .clone()
            .unwrap_or_else(|| corecap_store::retention::Retention::new(u64::MAX));
        r.limit_files(n);
        o.file.retention = Some(r);
    }
    o
}

/// Starts a thread per worker with its source and app; a lone worker with a `standby`
/// runs on the standby's waiting thread instead (no thread made on the request's path).
#[allow(clippy::type_complexity)]
fn spawn_workers(
    workers: &[WorkerPlan],
    sources: Vec<Source>,
    apps: Vec<(App, Option<crate::cutoff::Cutoff>)>,
    control: &Arc<Control>,
    standby: Option<&crate::standby::Standby>,
) -> Result<(Vec<JoinHandle<Outcome>>, Vec<Arc<WorkerCounters>>), CaptureError> {
    let mut handles = Vec::with_capacity(workers.len());
    let mut counters = Vec::with_capacity(workers.len());
    for ((w, source), (app, cutoff)) in workers.iter().zip(sources).zip(apps) {
        let c = Arc::new(WorkerCounters::default());
        counters.push(c.clone());
        let ctl = control.clone();
        let worker = Worker {
            id: w.info.id,
            cpu: w.info.cpu,
            source,
            app,
            cutoff,
        };
        let work: crate::standby::Work = Box::new(move || worker::run(worker, ctl, c));
        // A standby that another capture took hands the work back: a thread of its own.
        let launched = match standby {
            Some(s) => s.launch(work),
            None => Err(work),
        };
        let h = match launched {
            Ok(h) => h,
            Err(work) => std::thread::Builder::new()
                .name(format!("corecap-w{}", w.info.id))
                .spawn(work)
                .map_err(|e| CaptureError::System(format!("cannot start a worker thread: {e}")))?,
        };
        handles.push(h);
    }
    Ok((handles, counters))
}

impl Capture {
    /// Waits until every worker has opened its source (or failed). A capture that stopped
    /// while starting is finished, and its first error returned.
    fn wait_ready(mut self, xdp_notes: Vec<String>) -> Result<Capture, CaptureError> {
        let n = self.handles.len() as u64;
        while self.control.ready.load(Ordering::Acquire) < n {
            if self.handles.iter().all(|h| h.is_finished()) {
                break;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        // A capture that reached its count while starting (its first packets were waiting
        // in an armed spare's ring) started well; any other stop is a failed start.
        // Acquire: pairs with the Release store of `stop` when `claim` spent the budget,
        // so `remaining` reads 0 then. Relaxed for `remaining`: ordered by that pair.
        let stopped = self.control.stop.load(Ordering::Acquire);
        let counted_out = self.control.remaining.load(Ordering::Relaxed) == 0;
        if stopped && !counted_out {
            let new_catalog = self.new_catalog.take();
            let s = self.finish();
            if s.total.packets == 0 {
                // A failed start leaves nothing behind: the files it made hold no packet.
                for f in &s.files {
                    corecap_store::names::remove_with_index(f);
                }
                corecap_store::catalog_update::forget(&s.files);
                if let Some(dir) = &new_catalog {
                    corecap_store::discard_catalog(dir);
                }
            }
            let msg = s
                .errors
                .first()
                .cloned()
                .unwrap_or_else(|| "capture failed to start".into());
            return Err(CaptureError::System(msg));
        }
        self.notes = xdp_notes;
        for x in &self.xdp {
            if let Some(mode) = x.attach_mode() {
                self.notes.push(format!(
                    "{}: {}",
                    x.iface,
                    crate::source::afxdp::describe(mode, x.bind_mode())
                ));
            }
        }
        Ok(self)
    }
}
