//! Starting a capture: the request checked and admitted, its id and file chosen, then
//! attached to a base capture's workers, spawned on a worker kept ready, or started in
//! the past from the lookback ring.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use corecap_engine::capture::{Capture, CaptureConfig, Input, OutputConfig};
use corecap_engine::control::AttachSpec;
use corecap_engine::sink::file::{FileOptions, Format, Rotation};
use corecap_engine::sink::ipfix::IpfixTarget;
use corecap_engine::source::afpacket::Spare;
use corecap_engine::stage::flows::FlowOutput;
use corecap_engine::stage::member::{MemberLimits, MemberLive};
use corecap_engine::stage::pipe::Transport;
use corecap_engine::standby::Standby;
use corecap_engine::steer::filter::compile_filter;
use corecap_engine::steer::group::{GroupKind, GroupSpec};
use corecap_linux::error_chain;
use corecap_store::names::suffixed_path;
use corecap_store::sealed::{Cipher, SealConfig};

use super::end::refresh;
use super::records::display;
use super::{err, secs, start_error, wall_ns, ApiError, Entry, Inner, Manager, Runner, Started};
use crate::api::{CaptureView, Drops, Mode, OutputKind, StartRequest, State};
use crate::catalog;

pub(super) fn extension(o: OutputKind) -> &'static str {
    match o {
        OutputKind::Pcapng => "pcapng",
        OutputKind::Pcap => "pcap",
        OutputKind::Flows => "flows.jsonl",
        OutputKind::Count => "",
    }
}

/// What a capture needs to start, in either mode.
pub(super) struct Launch<'a> {
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

/// A request that passed [`Manager::validate`], resolved.
pub(super) struct Valid {
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
    /// The collector a request named, if the operator allowed it (`serve
    /// --ipfix-collector`), with a new observation domain for the capture.
    pub(super) fn allowed_collector(&self, c: &str) -> Result<IpfixTarget, ApiError> {
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

    /// Starts an attach-mode capture: a copy consumer of the base capture `base`.
    pub(super) fn start_attach(
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
        let cpu = self.stage_cpu(g, r.cores.as_deref());
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
                // A request's capture keeps whole flows.
                cutoff: None,
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

    /// The core an attached capture's stage member runs on: the first the request names,
    /// none when it names an empty list, else the next of the stage cores in turn (the
    /// allowed cores without `--stage-cpus`).
    fn stage_cpu(&self, g: &mut Inner, asked: Option<&[u32]>) -> Option<u32> {
        match asked {
            Some([c, ..]) => Some(*c),
            Some([]) => None,
            None => {
                let pool = if self.cfg.stage_cpus.is_empty() {
                    &g.cores.allowed
                } else {
                    &self.cfg.stage_cpus
                };
                let k = g.next_stage;
                g.next_stage += 1;
                pool.get(k % pool.len().max(1)).copied()
            }
        }
    }

    /// The seam of a capture that starts in the past: the clock once every worker of the
    /// base capture steers to it (at most a second; a worker that ends counts as done).
    pub(super) fn seam(&self, cap: &corecap_engine::capture::Capture) -> u64 {
        let t = Instant::now();
        while !cap.steering_current() && t.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_micros(100));
        }
        wall_ns(SystemTime::now())
    }

    /// The start of a capture that starts in the past, checked: the daemon records the
    /// interface, the capture attaches to it and writes a file, and the time is past.
    pub(super) fn lookback_start(
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
    pub(super) fn start_spawn(
        &self,
        g: &mut Inner,
        launch: Launch<'_>,
        notes: &mut Vec<String>,
    ) -> Result<Started, ApiError> {
        let (input, flows) = (launch.input, &launch.flows);
        let cores = self.spawn_cores(g, &launch, notes)?;
        g.spare_used.insert(input.iface.clone(), Instant::now());
        let standby = self.arm_standby(g, &launch, cores[0])?;
        let spare = match &standby {
            Some(s) => s.spare().clone(),
            None => self
                .opener
                .spare(launch.ifindex, self.cfg.ring)
                .map_err(|e| start_error(e.into()))?,
        };
        let cfg = self.spawn_config(&launch, &cores, spare, standby.clone());
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

    /// The cores a spawned capture runs on: those the request names, or one free core.
    fn spawn_cores(
        &self,
        g: &mut Inner,
        launch: &Launch<'_>,
        notes: &mut Vec<String>,
    ) -> Result<Vec<u32>, ApiError> {
        if let Some(c) = launch.r.cores.as_ref().filter(|c| !c.is_empty()) {
            return Ok(c.clone());
        }
        let busy = g.worker_cpus();
        let (c, note) = g
            .cores
            .pick(&launch.input.iface, &busy, self.cfg.share_cores)
            .map_err(|e| err(429, e))?;
        notes.extend(note);
        Ok(vec![c])
    }

    /// A worker kept ready, on `core` if one waits there, armed with the capture's filter:
    /// the capture makes no thread and no ring. None when no worker waits; then the worker
    /// swaps its filter into a socket the opener makes now, and the thread that starts it
    /// needs no capability.
    fn arm_standby(
        &self,
        g: &mut Inner,
        launch: &Launch<'_>,
        core: u32,
    ) -> Result<Option<Standby>, ApiError> {
        let ready = g.spares.entry(launch.input.iface.clone()).or_default();
        let Some(i) = ready
            .iter()
            .rposition(|s| s.cpu() == core)
            .or_else(|| ready.len().checked_sub(1))
        else {
            return Ok(None);
        };
        // The capture starts here: its filter goes into the waiting ring before its files,
        // its stage and its worker are in place (the ring holds the packets meanwhile). A
        // bad filter leaves the standby ready; a start that fails once it is armed closes
        // it (an armed spare is never offered again).
        let prog = corecap_engine::capture::socket_program(
            launch.input,
            launch.linktype,
            launch.r.filter.as_deref(),
            launch.snaplen,
        )
        .map_err(start_error)?;
        let s = ready.remove(i);
        s.spare()
            .arm(launch.ifindex, self.cfg.ring, &prog)
            .map_err(|e| start_error(e.into()))?;
        Ok(Some(s))
    }

    /// A spawned capture's configuration: one worker on its core; flow records go through
    /// one stage member on that core.
    fn spawn_config(
        &self,
        launch: &Launch<'_>,
        cores: &[u32],
        spare: Spare,
        standby: Option<Standby>,
    ) -> CaptureConfig {
        let (r, flows) = (launch.r, &launch.flows);
        CaptureConfig {
            inputs: vec![launch.input.clone()],
            workers: 1,
            cpus: cores.to_vec(),
            filter: r.filter.clone(),
            snaplen: launch.snaplen,
            ring: self.cfg.ring,
            count: r.count,
            output: launch.file.clone(),
            groups: flows
                .iter()
                .map(|_| GroupSpec {
                    kind: GroupKind::Copy,
                    members: 1,
                    filter: None,
                    snaplen: None,
                })
                .collect(),
            stage_cpus: cores.to_vec(),
            flows: flows.clone(),
            transport: Transport::Spsc,
            spare: Some(spare),
            standby,
            ..CaptureConfig::default()
        }
    }

    /// Checks a request before anything is started or locked: the interface, numbers,
    /// filter, key, cores and collector. Every refusal is an [`ApiError`] with its status.
    pub(super) fn validate(&self, r: &StartRequest) -> Result<Valid, ApiError> {
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
        let mut view = running_view(id, mode, &launch);
        let (runner, cores, files) = match mode {
            Mode::Attach => self.start_attach(g, base, launch)?,
            Mode::Spawn => self.start_spawn(g, launch, &mut notes)?,
        };
        g.generation += 1;
        view.path = files.first().map(|p| p.display().to_string());
        view.files = display(&files);
        view.cores = cores;
        view.notes = notes;
        view.setup_us = t0.elapsed().as_secs_f64() * 1e6;
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
    pub(super) fn fresh_id(
        &self,
        g: &mut Inner,
        r: &StartRequest,
        sealed: bool,
    ) -> Result<(String, Option<PathBuf>), ApiError> {
        for _ in 0..1000 {
            let id = corecap_store::names::id_name(g.next_id);
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
    pub(super) fn id_after(&self, g: &Inner, n: u64) -> u64 {
        n.checked_add(1).unwrap_or_else(|| {
            let mut taken = catalog::ids_in(self.cfg.spool.dir());
            taken.extend(
                g.entries
                    .iter()
                    .filter_map(|e| corecap_store::names::id_number(&e.view.id)),
            );
            catalog::lowest_free(&taken)
        })
    }

    /// Whether one more capture may start now: not while shutting down, not past
    /// `--max-captures`, and no file capture past the spool's quota.
    pub(super) fn admit(&self, g: &Inner, r: &StartRequest) -> Result<(), ApiError> {
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
    /// [`corecap_store::names::is_id_name`]), or an index's (`.idx`).
    pub(super) fn check_name(&self, name: &str) -> Result<(), ApiError> {
        let p = self.cfg.spool.resolve(name).map_err(|e| err(400, e))?;
        if corecap_store::names::is_id_name(name) {
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
    pub(super) fn spool_path(
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
    pub(super) fn outputs(
        &self,
        r: &StartRequest,
        v: &Valid,
        path: Option<&PathBuf>,
    ) -> (Option<OutputConfig>, Option<FlowOutput>) {
        let file = path.and_then(|p| match r.output {
            OutputKind::Pcapng | OutputKind::Pcap => Some(OutputConfig {
                path: p.clone(),
                merge: false,
                file: FileOptions {
                    format: if r.output == OutputKind::Pcap {
                        Format::Pcap
                    } else {
                        Format::Pcapng
                    },
                    rotation: Rotation::default(),
                    seal: v.seal.clone(),
                    direct: self.cfg.direct,
                    retention: self.cfg.retention.clone(),
                    index: self.cfg.index,
                    sessions: self.cfg.sessions,
                    sessions_log: None,
                    // On-demand captures are written plain: a file asked for one incident,
                    // to be downloaded and opened at once.
                    compress: None,
                    owner: None,
                    flush: self.cfg.flush,
                    // An on-demand capture is one of many: the least backlog of a sink.
                    backlog: Default::default(),
                },
                // On-demand captures keep whole flows: they are asked for one incident.
                cutoff: None,
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
}

/// The view of a capture that starts now, before its cores, files, notes and setup time
/// are known.
fn running_view(id: String, mode: Mode, launch: &Launch<'_>) -> CaptureView {
    let r = launch.r;
    CaptureView {
        id,
        state: State::Running,
        reason: None,
        mode,
        interface: launch.input.label(),
        filter: r.filter.clone(),
        output: r.output,
        path: None,
        file_bytes: 0,
        cores: Vec::new(),
        requested_at: secs(launch.since_ns),
        ended_at: None,
        setup_us: 0.0,
        armed_us: None,
        first_packet_us: None,
        lag_us: None,
        packets: 0,
        bytes: 0,
        drops: Drops::default(),
        count: r.count,
        duration: r.duration,
        notes: Vec::new(),
        files: Vec::new(),
        earlier_run: false,
        since: launch.lookback.map(secs),
        recorded: launch.lookback.map(|_| 0),
        live: launch.lookback.map(|_| 0),
    }
}
