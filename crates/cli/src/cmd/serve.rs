//! `corecap serve`: the on-demand capture daemon.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use corecap_engine::capture::{Capture, CaptureConfig};
use corecap_manager::manager::{Base, Manager};
use corecap_manager::opener::Opener;
use corecap_manager::server::{self, Listener};
use corecap_manager::spool::Spool;

use crate::args::ServeArgs;
use crate::config;

/// Runs the daemon until SIGTERM or SIGINT. Returns the exit code.
pub(crate) fn run(a: ServeArgs) -> Result<i32> {
    if let Some(ns) = &a.netns {
        corecap_linux::netdev::enter_netns(ns)
            .with_context(|| format!("entering network namespace {ns}"))?;
    }
    let (stop, usr1) = signals()?;
    let interval = crate::report::stats_interval(a.stats_interval, a.json, false)?;
    let mut c = config::serve(&a)?;
    // One daemon per spool: a second is refused before it recovers or writes anything.
    let spool = c.manager.spool.dir().to_owned();
    let _claim = corecap_store::lock::WriterLock::spool(&spool)?;
    recover_spool(&mut c.manager)?;
    // The spool's files of earlier runs count against --retain beside the recording's
    // (which a base capture counts as it starts); the oldest packets go first, once the
    // daemon is up.
    let retention = c.manager.retention.clone();
    if let Some(r) = &retention {
        adopt_spool(r, &spool);
    }
    if c.run_as.is_some() {
        // Before any thread starts: they keep what the switch needs until it is done.
        corecap_linux::privilege::prepare_switch().context("preparing -Z")?;
    }
    let bases = start_bases(&c.bases)?;
    let socket_dir_made = c
        .socket
        .parent()
        .is_some_and(|d| !d.as_os_str().is_empty() && !d.exists());
    let unix = server::bind_unix(&c.socket)?;
    let tcp = match &c.listen {
        Some(l) => Some(server::bind_tcp(l.addr, l.tls.is_some())?),
        None => None,
    };
    let opener = hand_over(&c, socket_dir_made)?;
    let listeners = listeners(&c, unix, tcp)?;
    let up = serving(&c, c.manager.max_captures);
    let m = Arc::new(Manager::new(c.manager, bases).with_opener(opener));
    // Workers kept ready for spawn mode are made on a thread of their own, never on a
    // request's path.
    let refill = {
        let (m, stop) = (m.clone(), stop.clone());
        std::thread::Builder::new()
            .name("corecap-refill".into())
            .spawn(move || m.refill_loop(&stop))
            .context("starting the refill thread")?
    };
    let eve = follow_eve(&m, &stop)?;
    // What the spool's catalog told: earlier captures listed, or why not; once.
    for n in m.notes() {
        eprintln!("corecap: {n}");
    }
    if let Some(p) = c.peers.take() {
        corecap_manager::web::sensors::install(p);
    }
    let api = server::spawn(listeners, m.clone()).context("starting the API thread")?;
    if let Some(r) = &retention {
        trim_at_start(r);
    }
    eprintln!("corecap: {up}");
    let mut stats = Report::new(interval, c.json);
    // Relaxed: flags set by the signal handlers, polled here.
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(5));
        m.tick();
        stats.tick(&m, usr1.swap(false, Ordering::Relaxed));
    }
    // The listeners go first, so no new client connects; a request already in flight is
    // refused (503) once shutdown has begun, or started before it and ended by it.
    api.stop();
    let _ = refill.join();
    if let Some(t) = eve {
        let _ = t.join();
    }
    let _ = std::fs::remove_file(&c.socket);
    let ended = m.shutdown();
    report_end(&ended.captures, c.json);
    stats.summary(&ended);
    eprintln!("corecap: stopped");
    Ok(0)
}

/// The folders and files the daemon made go to the user of `-Z`, and the daemon becomes
/// that user, keeping only the capabilities it needs (CAP_SYS_NICE too for a spawn
/// priority, which is then checked). Returns the opener of the sockets captures take.
fn hand_over(c: &config::ServeConfig, socket_dir_made: bool) -> Result<Opener> {
    if let Some(who) = &c.run_as {
        give_files(who, &c.manager.spool, &c.socket, socket_dir_made)?;
        if let Some(dir) = &c.manager.record {
            std::os::unix::fs::lchown(dir, Some(who.uid), Some(who.gid))
                .with_context(|| format!("giving {} to {} (-Z)", dir.display(), who.name))?;
        }
    }
    let priority = c.manager.spawn_priority;
    let opener = drop_privilege(c.run_as.as_ref(), priority.is_some())?;
    if let Some(p) = priority {
        check_fifo(&opener, p)?;
    }
    Ok(opener)
}

/// The API's listeners: the local socket, and `--listen` with TLS or a token.
fn listeners(
    c: &config::ServeConfig,
    unix: std::os::unix::net::UnixListener,
    tcp: Option<std::net::TcpListener>,
) -> Result<Vec<Listener>> {
    let mut listeners = vec![Listener::Unix(unix, c.socket.clone())];
    if let (Some(l), Some(cfg)) = (tcp, &c.listen) {
        listeners.push(match (&cfg.tls, &cfg.token) {
            (Some(tls), t) => Listener::Tls(l, tls.clone(), t.clone().map(Arc::new)),
            (None, Some(t)) => Listener::Tcp(l, Arc::new(t.clone())),
            (None, None) => anyhow::bail!("--listen in clear needs a token"),
        });
    }
    Ok(listeners)
}

/// Suricata's alerts pin their flows (`serve --eve`), on a thread of their own until `stop`.
fn follow_eve(
    m: &Arc<Manager>,
    stop: &Arc<AtomicBool>,
) -> Result<Option<std::thread::JoinHandle<()>>> {
    let Some(e) = m.eve().cloned() else {
        return Ok(None);
    };
    let stop = stop.clone();
    let t = std::thread::Builder::new()
        .name("corecap-eve".into())
        .spawn(move || e.run(&stop))
        .context("starting the EVE follower")?;
    Ok(Some(t))
}

/// The flags SIGINT or SIGTERM (stop) and SIGUSR1 (statistics now) set.
fn signals() -> Result<(Arc<AtomicBool>, Arc<AtomicBool>)> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let usr1 = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, usr1.clone())
        .context("installing signal handlers")?;
    Ok((stop, usr1))
}

/// The line that says the daemon is up: where it listens, its spool, its capture limit.
fn serving(c: &config::ServeConfig, max_captures: usize) -> String {
    format!(
        "serving on {}{} (spool {}, at most {max_captures} captures)",
        c.socket.display(),
        c.listen.as_ref().map_or(String::new(), |l| format!(
            " and {}://{}",
            if l.tls.is_some() { "https" } else { "http" },
            l.addr
        )),
        c.spool.display(),
    )
}

/// `serve`'s statistics: a line every `--stats-interval` and on SIGUSR1, with rates over
/// the time since the previous line, and the summary at the stop; text on stderr, or JSON
/// lines on stdout with `--json`.
struct Report {
    interval: Option<Duration>,
    json: bool,
    started: Instant,
    /// When the previous line was printed (or the daemon started).
    last: Instant,
    /// Per base capture: (packets, bytes) its workers had taken at the previous line.
    before: Vec<(u64, u64)>,
}

impl Report {
    fn new(interval: Option<Duration>, json: bool) -> Self {
        let now = Instant::now();
        Self {
            interval,
            json,
            started: now,
            last: now,
            before: Vec::new(),
        }
    }

    /// Prints a line when the interval has passed, or at once when `now` (SIGUSR1).
    fn tick(&mut self, m: &Manager, now: bool) {
        let due = self.interval.is_some_and(|iv| self.last.elapsed() >= iv);
        if !due && !now {
            return;
        }
        let s = m.stats();
        let dt = self.last.elapsed().as_secs_f64();
        let t = self.started.elapsed().as_secs_f64();
        let rates: Vec<(f64, f64)> = s
            .bases
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let (p, by) = self.before.get(i).copied().unwrap_or_default();
                if dt <= 0.0 {
                    return (0.0, 0.0);
                }
                (
                    b.packets.saturating_sub(p) as f64 / dt,
                    b.bytes.saturating_sub(by) as f64 * 8.0 / dt,
                )
            })
            .collect();
        if self.json {
            let mut v = serde_json::to_value(&s).unwrap_or_default();
            v["type"] = "stats".into();
            v["t"] = ((t * 1000.0).round() / 1000.0).into();
            for (b, (pps, bps)) in v["bases"].as_array_mut().into_iter().flatten().zip(&rates) {
                b["pps"] = pps.round().into();
                b["bps"] = bps.round().into();
            }
            out_line(&v);
        } else {
            let bases: Vec<String> = s
                .bases
                .iter()
                .zip(&rates)
                .map(|(b, (pps, bps))| {
                    format!(
                        "{}: {} packets ({} pps, {} bps), {} kernel drops{}",
                        b.interface,
                        b.packets,
                        crate::report::human(*pps),
                        crate::report::human(*bps),
                        b.kernel_drops,
                        b.recording.as_ref().map_or(String::new(), recording_text)
                    )
                })
                .collect();
            eprintln!(
                "corecap: stats [{t:.1}s] {}{}; {} captures running{}",
                bases.join("; "),
                if bases.is_empty() {
                    "no base capture"
                } else {
                    ""
                },
                s.captures_running,
                retention_text(&s)
            );
        }
        self.before = s.bases.iter().map(|b| (b.packets, b.bytes)).collect();
        self.last = Instant::now();
    }

    /// The summary at the stop: what the base captures and their recording did, to the
    /// end, and how the captures ended.
    fn summary(&self, ended: &corecap_manager::manager::Ended) {
        let t = self.started.elapsed().as_secs_f64();
        let s = &ended.stats;
        let mut by_state: std::collections::BTreeMap<&str, u64> = Default::default();
        for v in ended.captures.iter().filter(|v| !v.earlier_run) {
            *by_state.entry(v.state.name()).or_default() += 1;
        }
        if self.json {
            let mut v = serde_json::to_value(s).unwrap_or_default();
            v["type"] = "summary".into();
            v["seconds"] = ((t * 1000.0).round() / 1000.0).into();
            v["captures"] = serde_json::to_value(&by_state).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.remove("captures_running");
            }
            out_line(&v);
            return;
        }
        let bases: Vec<String> = s
            .bases
            .iter()
            .map(|b| {
                format!(
                    "{}: {} packets, {} kernel drops{}",
                    b.interface,
                    b.packets,
                    b.kernel_drops,
                    b.recording.as_ref().map_or(String::new(), recording_text)
                )
            })
            .collect();
        let states: Vec<String> = by_state.iter().map(|(k, n)| format!("{n} {k}")).collect();
        eprintln!(
            "corecap: summary after {t:.1} s: {}{}; captures: {}{}",
            bases.join("; "),
            if bases.is_empty() {
                "no base capture"
            } else {
                ""
            },
            if states.is_empty() {
                "none".into()
            } else {
                states.join(", ")
            },
            retention_text(s)
        );
    }
}

/// One JSON line on stdout; a reader that went away costs the line, not the daemon.
fn out_line(v: &serde_json::Value) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{v}");
    let _ = o.flush();
}

/// `; recording: N packets, B bytes, F files, drops: ..., reach A to B` (Unix seconds).
fn recording_text(r: &corecap_manager::stats::RecordingStats) -> String {
    let reach = match (r.oldest_ns, r.newest_ns) {
        (Some(a), Some(b)) => format!(", reach {:.3} to {:.3}", a as f64 / 1e9, b as f64 / 1e9),
        _ => String::new(),
    };
    let cut = if r.cut_packets > 0 {
        format!(", cut {} packets ({} bytes)", r.cut_packets, r.cut_bytes)
    } else {
        String::new()
    };
    format!(
        "; recording: {} packets, {} bytes, {} file{}, drops: kernel {}, stage full {}, app {}, disk {}{cut}{reach}",
        r.packets,
        r.bytes,
        r.files,
        if r.files == 1 { "" } else { "s" },
        r.drops.kernel,
        r.drops.stage_full,
        r.drops.app,
        r.drops.disk
    )
}

/// `; --retain deleted N files (B bytes)`, with `--retain`.
fn retention_text(s: &corecap_manager::stats::Stats) -> String {
    s.retention.map_or(String::new(), |d| {
        format!("; --retain deleted {} files ({} bytes)", d.files, d.bytes)
    })
}

/// Counts the spool's files of earlier runs against `--retain` (see
/// `corecap_store::retention::in_spool`), saying which files it leaves alone and why.
fn adopt_spool(r: &corecap_store::retention::Retention, spool: &std::path::Path) {
    let found = corecap_store::retention::in_spool(spool);
    for (p, why) in &found.left_alone {
        eprintln!("corecap: --retain leaves {} alone: {why}", p.display());
    }
    r.adopt(found.files);
}

/// Once the daemon is up: deletes the oldest files of earlier runs over `--retain`, and
/// names them.
fn trim_at_start(r: &corecap_store::retention::Retention) {
    let gone = r.trim();
    if !gone.is_empty() {
        let names: Vec<String> = gone.iter().map(|p| p.display().to_string()).collect();
        eprintln!(
            "corecap: --retain deleted {} files written by earlier runs to fit the budget, oldest packets first: {}",
            gone.len(),
            names.join(", ")
        );
    }
}

/// Recovers what a crash of the last daemon left in the spool (each file cut to its whole
/// blocks, named and indexed; one line each), before the bases start, `-Z` is given the
/// spool and the manager settles the earlier run's captures (which follow the new names).
fn recover_spool(m: &mut corecap_manager::manager::Config) -> Result<()> {
    let dir = m.spool.dir().to_owned();
    let r = corecap_store::recover::recover_dir(&dir, m.key.as_ref())
        .with_context(|| format!("recovering the files in the spool {}", dir.display()))?;
    for f in &r.files {
        eprintln!("corecap: {}", f.describe());
    }
    for n in &r.notes {
        eprintln!("corecap: {n}");
    }
    m.recovered = r
        .files
        .iter()
        .map(|f| corecap_manager::catalog::Renamed {
            part: f.part.clone(),
            path: f.path.clone(),
            packets: f.packets,
        })
        .collect();
    Ok(())
}

/// Gives what the daemon writes after `-Z` to the user: the spool (and the files in it),
/// the API socket, and the socket's directory when serve made it (so the socket can be
/// removed at the end).
fn give_files(
    who: &corecap_linux::privilege::RunAs,
    spool: &Spool,
    socket: &std::path::Path,
    socket_dir_made: bool,
) -> Result<()> {
    spool
        .give_to(who.uid, who.gid)
        .with_context(|| format!("giving the spool to {} (-Z)", who.name))?;
    let mut paths = vec![socket];
    if socket_dir_made {
        paths.extend(socket.parent());
    }
    for p in paths {
        std::os::unix::fs::lchown(p, Some(who.uid), Some(who.gid))
            .with_context(|| format!("giving {} to {} (-Z)", p.display(), who.name))?;
    }
    Ok(())
}

/// Leaves capabilities to one thread: with `-Z`, the whole process becomes the user while
/// this thread keeps the daemon's few capabilities; the opener thread is started with
/// them; then this thread, and every thread it starts after (the API's), holds none.
/// With `fifo` (`--spawn-priority`), the opener also keeps CAP_SYS_NICE.
fn drop_privilege(run_as: Option<&corecap_linux::privilege::RunAs>, fifo: bool) -> Result<Opener> {
    use corecap_linux::privilege::{self, CAP_NET_RAW, CAP_SYS_NICE, DAEMON_CAPABILITIES};
    let keep = DAEMON_CAPABILITIES | if fifo { 1 << CAP_SYS_NICE } else { 0 };
    if let Some(who) = run_as {
        privilege::switch_user_keeping(who, keep)
            .with_context(|| format!("switching to user {} (-Z)", who.name))?;
    }
    let (opener, kept) = Opener::spawn(keep).context("starting the opener")?;
    if fifo && kept & (1 << CAP_SYS_NICE) == 0 {
        anyhow::bail!(
            "--spawn-priority fifo:N needs CAP_SYS_NICE (run as root, or give the binary \
             cap_sys_nice), or leave it out"
        );
    }
    privilege::drop_thread_capabilities().context("dropping capabilities")?;
    let o = opener.clone();
    corecap_linux::filter::set_live_opener(Box::new(move |iface, snaplen| o.live(iface, snaplen)))?;
    // libpcap is loaded, and its first compile made, now rather than on the first
    // capture's request (about 3 ms there). Without libpcap only filters fail, later.
    let _ = corecap_linux::filter::compile_offline(1, 262_144, "ip");
    if kept & (1 << CAP_NET_RAW) == 0 {
        eprintln!(
            "corecap: warning: no CAP_NET_RAW: captures in spawn mode and filters that need a live handle (vlan, inbound) will fail"
        );
    }
    Ok(opener)
}

/// Tries SCHED_FIFO at `priority` on a thread made for the purpose, so that a daemon that
/// cannot give it says so at start, not at its first spawned capture.
fn check_fifo(opener: &Opener, priority: i32) -> Result<()> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let (done_tx, done_rx) = std::sync::mpsc::sync_channel::<()>(1);
    let t = std::thread::spawn(move || {
        let _ = tx.send(corecap_linux::affinity::current_tid());
        let _ = done_rx.recv();
    });
    let tid = rx.recv().context("a thread to try --spawn-priority on")?;
    let r = opener.fifo(tid, priority);
    drop(done_tx);
    let _ = t.join();
    r.with_context(|| format!("--spawn-priority fifo:{priority}"))
}

/// Starts each base capture, and says where its workers run.
fn start_bases(configs: &[CaptureConfig]) -> Result<Vec<Base>> {
    let mut bases = Vec::new();
    for cfg in configs {
        let iface = cfg
            .inputs
            .first()
            .map(|i| i.iface.clone())
            .unwrap_or_default();
        let cap = Capture::start(cfg).with_context(|| format!("base capture on {iface}"))?;
        for n in &cap.notes {
            eprintln!("corecap: {n}");
        }
        let placed: Vec<String> = cap
            .workers
            .iter()
            .map(|w| {
                format!(
                    "w{}@cpu{}",
                    w.id,
                    w.cpu.map_or("-".into(), |c| c.to_string())
                )
            })
            .collect();
        eprintln!("corecap: base capture on {iface} ({})", placed.join(", "));
        bases.push(Base { iface, cap });
    }
    Ok(bases)
}

/// The final state of every capture, as JSON lines or one line each.
fn report_end(views: &[corecap_manager::api::CaptureView], json: bool) {
    for v in views {
        if json {
            println!("{}", serde_json::to_string(v).unwrap_or_default());
        } else {
            eprintln!(
                "corecap: {} {} ({}): {} packets{}",
                v.id,
                v.state.name(),
                v.reason.as_deref().unwrap_or(""),
                v.packets,
                v.path
                    .as_deref()
                    .map_or(String::new(), |p| format!(", {p}"))
            );
        }
    }
}
