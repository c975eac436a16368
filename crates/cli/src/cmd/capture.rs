//! `corecap capture`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use corecap_engine::capture::{Capture, CaptureConfig};
use corecap_engine::stats::ledger::Snapshot;
use corecap_linux::privilege::RunAs;

use crate::args::CaptureArgs;
use crate::print::pipe::Pipe;
use crate::{config, print, report};

/// Lists the interfaces numbered from 1, as tcpdump -D does; `-i N` takes the number.
fn list_interfaces() -> Result<()> {
    let names = config::interface_list()?;
    for (n, name) in names.iter().enumerate() {
        let q = corecap_linux::netdev::rx_queues(name).unwrap_or(1);
        let idx = corecap_linux::netdev::ifindex(name).unwrap_or(0);
        println!(
            "{}. {name} (ifindex {idx}, {q} RX queue{})",
            n + 1,
            if q == 1 { "" } else { "s" }
        );
    }
    Ok(())
}

/// Reads control commands, one per line, on a thread of their own.
fn control_reader(path: std::path::PathBuf) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let input: Box<dyn std::io::Read> = if path.as_os_str() == "-" {
            Box::new(std::io::stdin())
        } else {
            match std::fs::File::open(&path) {
                Ok(f) => Box::new(f),
                Err(e) => {
                    eprintln!("corecap: control: cannot open {}: {e}", path.display());
                    return;
                }
            }
        };
        for line in std::io::BufReader::new(input).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Refuses up front an output directory that the file writers could not write in: rotated
/// files, indexes and each file's name at close are made there by the disk writer threads,
/// which hold no capability (so root is an ordinary owner there), and after `-Z USER` by
/// USER.
fn check_writable_by(
    out: Option<&std::path::Path>,
    who: &corecap_linux::privilege::RunAs,
    switching: bool,
) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Some(out) = out.filter(|p| p.as_os_str() != "-") else {
        return Ok(());
    };
    if corecap_store::write::disk::is_fifo(out) {
        return Ok(());
    }
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => std::path::PathBuf::from("."),
    };
    // A directory that is not there gets the engine's own error when the file is made.
    let Ok(m) = std::fs::metadata(&dir) else {
        return Ok(());
    };
    let mode = m.mode();
    let ok = (m.uid() == who.uid && mode & 0o200 != 0)
        || (m.uid() != who.uid && m.gid() == who.gid && mode & 0o020 != 0)
        || (m.uid() != who.uid && m.gid() != who.gid && mode & 0o002 != 0);
    if !ok {
        if switching {
            bail!(
                "user {} (-Z) cannot write in {} (owner {}, mode {:o}): give it a directory it can write",
                who.name,
                dir.display(),
                m.uid(),
                mode & 0o7777
            );
        }
        bail!(
            "{} is not writable by {} without capabilities (owner {}, mode {:o}), and corecap's \
             file writers hold none: write in a directory {} owns, or run as its owner with -Z",
            dir.display(),
            who.name,
            m.uid(),
            mode & 0o7777,
            who.name
        );
    }
    Ok(())
}

/// Runs a capture to its end. Returns the process exit code.
pub(crate) fn run(a: CaptureArgs) -> Result<i32> {
    if let Some(ns) = &a.netns {
        corecap_linux::netdev::enter_netns(ns)
            .with_context(|| format!("entering network namespace {ns}"))?;
    }
    if a.list {
        list_interfaces()?;
        return Ok(0);
    }
    let printing = config::capture_prints(&a);
    let mut cfg = config::capture(&a)?;
    // -q: tcpdump's quick lines when packets are printed, else dumpcap's quiet.
    let quiet = a.quiet && !printing;
    let mut printer = printing
        .then(|| {
            Pipe::start(
                config::print_options(&a.print, a.quiet),
                a.print.line_buffered,
                None,
            )
        })
        .transpose()
        .context("starting the packet printer")?;
    if let Some(p) = &printer {
        cfg.output = Some(config::print_output(p.path().to_owned()));
    }
    // Signals are registered before the workers start, so none is missed.
    let signals = Signals::register()?;
    let run_as = a
        .user
        .as_deref()
        .map(corecap_linux::privilege::lookup_user)
        .transpose()?;
    let mut cap = start(&cfg, run_as.as_ref())?;
    if let Some(p) = &mut printer {
        p.close_writer();
    }
    let commands = a.control.as_ref().map(|p| control_reader(p.clone()));
    let to_stdout = printing
        || cfg
            .output
            .as_ref()
            .is_some_and(|o| o.path.as_os_str() == "-");
    let json_out: Box<dyn Write> = if to_stdout {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    };
    if !quiet {
        announce(&cfg, &cap, printing);
    }
    let mut stats = Stats {
        // Printed packets fill the terminal: the interval lines only when asked for.
        interval: report::stats_interval(a.stats_interval, a.json, quiet || printing)?,
        json: a.json.then_some(json_out),
        before: cap.snapshot(),
        last: Instant::now(),
    };
    watch(
        &mut cap,
        &signals,
        printer.as_ref(),
        commands.as_ref(),
        &mut stats,
    );
    finish(cap, quiet, stats.json, printer)
}

/// Polls a running capture every 50 ms until it is done: a signal or a closed printer
/// stops it, SIGUSR1 prints its table, `--control` lines steer it, and the statistics
/// lines come at their interval.
fn watch(
    cap: &mut Capture,
    signals: &Signals,
    printer: Option<&Pipe>,
    commands: Option<&std::sync::mpsc::Receiver<String>>,
    stats: &mut Stats,
) {
    loop {
        std::thread::sleep(Duration::from_millis(50));
        // Relaxed: flags set by signal handlers, polled here.
        if signals.stop.load(Ordering::Relaxed) {
            cap.stop();
        }
        // The printer's output was closed (`| head`): nothing more will be read.
        if printer.is_some_and(Pipe::finished) {
            cap.stop();
        }
        if signals.usr1.swap(false, Ordering::Relaxed) {
            stats.print_now(cap);
        }
        for line in commands.into_iter().flat_map(|rx| rx.try_iter()) {
            control(cap, &line);
        }
        stats.tick(cap);
        if cap.done() {
            return;
        }
    }
}

/// The flags the signal handlers set: SIGINT and SIGTERM stop, SIGUSR1 asks for a table.
struct Signals {
    stop: Arc<AtomicBool>,
    usr1: Arc<AtomicBool>,
}

impl Signals {
    fn register() -> Result<Self> {
        let s = Self {
            stop: Arc::new(AtomicBool::new(false)),
            usr1: Arc::new(AtomicBool::new(false)),
        };
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, s.stop.clone())
                .context("installing signal handlers")?;
        }
        signal_hook::flag::register(signal_hook::consts::SIGUSR1, s.usr1.clone())
            .context("installing signal handlers")?;
        Ok(s)
    }
}

/// Starts the capture; with `-Z`, checks the user can write the output first and switches
/// to it once every socket is open. The main thread drops its capabilities either way.
fn start(cfg: &CaptureConfig, run_as: Option<&RunAs>) -> Result<Capture> {
    let out = cfg.output.as_ref().map(|o| o.path.as_path());
    match run_as {
        Some(who) => {
            check_writable_by(out, who, true)?;
            corecap_linux::privilege::prepare_switch().context("preparing -Z")?;
        }
        None => check_writable_by(out, &current_user(), false)?,
    }
    let cap = Capture::start(cfg)?;
    // Every socket is open; the main thread drops its capabilities too.
    corecap_linux::privilege::drop_thread_capabilities().context("dropping capabilities")?;
    if let Some(who) = run_as {
        if let Err(e) = corecap_linux::privilege::switch_user(who) {
            cap.stop();
            let _ = cap.finish();
            let e = corecap_linux::error_chain(&e);
            bail!("switching to user {} (-Z): {e}", who.name);
        }
    }
    Ok(cap)
}

/// The user this process runs as (its effective uid and gid).
fn current_user() -> RunAs {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata("/proc/self").ok();
    let (uid, gid) = m.map_or((0, 0), |m| (m.uid(), m.gid()));
    RunAs {
        name: if uid == 0 {
            "root".into()
        } else {
            format!("uid {uid}")
        },
        uid,
        gid,
    }
}

/// Says what runs where: the engine's notes, the IPFIX export, the output (unless packets
/// are printed), the inputs and workers.
fn announce(cfg: &CaptureConfig, cap: &Capture, printing: bool) {
    for n in &cap.notes {
        eprintln!("corecap: {n}");
    }
    if let Some(t) = cfg.flows.as_ref().and_then(|f| f.ipfix.as_ref()) {
        eprintln!(
            "corecap: exporting flows to {} ({}), IPFIX observation domain {}",
            t.url(),
            if t.biflow {
                "biflows, RFC 5103"
            } else {
                "one record per direction"
            },
            t.domain
        );
    }
    if let Some(o) = cfg.output.as_ref().filter(|_| !printing) {
        eprintln!(
            "corecap: {}",
            writing(o, &cap.files, !cfg.groups.is_empty(), cfg.files.len())
        );
        eprintln!(
            "corecap: {}",
            backlog_text(o.file.backlog.bytes(), &cfg.inputs)
        );
        if let Some(w) = reach_warning(o, &cfg.inputs) {
            eprintln!("corecap: warning: {w}");
        }
    }
    let inputs: Vec<String> = cfg
        .inputs
        .iter()
        .map(|i| i.label())
        .chain(cfg.files.iter().map(|f| f.display().to_string()))
        .collect();
    // Files are read, not taken from a ring: no ring to speak of without an interface.
    let ring = u64::from(cfg.ring.block_size) * u64::from(cfg.ring.block_nr);
    let ring = match cfg.inputs.is_empty() {
        true => String::new(),
        false => format!(", a ring of {} per worker (-B)", size_text(ring)),
    };
    eprintln!(
        "corecap: capturing on {} with {} worker{} ({:?} balance){ring}{}",
        inputs.join(", "),
        cap.workers.len(),
        if cap.workers.len() == 1 { "" } else { "s" },
        cfg.balance,
        if cfg.inputs.is_empty() || cfg.promisc {
            ""
        } else {
            ", not promiscuous (-p)"
        }
    );
}

/// A rotating recording that retention can never trim (a budget over the filesystem's
/// size), or that has no retention at all and no bound of files that fits (a ring of N
/// files of a known size, or a stop after N files): it fills its filesystem and then
/// stops. Says how long that takes at the fastest input's line rate, the most it can write.
fn reach_warning(
    o: &corecap_engine::capture::OutputConfig,
    inputs: &[corecap_engine::capture::Input],
) -> Option<String> {
    if !o.file.rotation.active() || o.path.as_os_str() == "-" {
        return None;
    }
    let dir = corecap_store::names::dir_of(&o.path);
    let (free, size) = corecap_linux::direct::fs_space(dir).ok()?;
    let fill = crate::config::line_rate_mbps(inputs)
        .map(|mbps| {
            let secs = free as f64 / (mbps * 125_000) as f64;
            let (n, unit) = match secs {
                s if s < 3600.0 => (s / 60.0, "minutes"),
                s if s < 2.0 * 86_400.0 => (s / 3600.0, "hours"),
                s => (s / 86_400.0, "days"),
            };
            format!(", in {n:.1} {unit} at the full {mbps} Mbit/s of the link")
        })
        .unwrap_or_default();
    // A ring of N files (-W, -b files:N) whose N files fit in what is free, or a stop after
    // N files (-a files:N, -G with -W) that fit or whose size is not set, bounds the
    // recording: it fills nothing.
    let rot = &o.file.rotation;
    let fits = |n: u64| rot.filesize.is_some_and(|f| n.saturating_mul(f) <= free);
    let ring_fits = rot.files.is_some_and(|n| fits(n as u64));
    let stops = rot
        .stop_after_files
        .is_some_and(|n| rot.filesize.is_none() || fits(n));
    if ring_fits || stops {
        return None;
    }
    match &o.file.retention {
        None => Some(format!(
            "no retention (--retain, --retain-age, --min-free): the files fill {} ({} free){fill}, \
             and the recording then stops",
            dir.display(),
            approx(free)
        )),
        Some(r) if r.budget() != u64::MAX && r.budget() > size => Some(format!(
            "--retain {} is more than the filesystem of {} holds ({}): it never deletes \
             before the disk is full{fill}; --min-free keeps space free",
            size_text(r.budget()),
            dir.display(),
            approx(size)
        )),
        Some(_) => None,
    }
}

/// A size said roughly, in the largest unit it has one of (`45.4 GB`).
fn approx(b: u64) -> String {
    let units = [(1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")];
    units
        .iter()
        .find(|(u, _)| b as f64 >= *u)
        .map_or(format!("{b} bytes"), |(u, n)| {
            format!("{:.1} {n}", b as f64 / u)
        })
}

/// What each file may hold in memory while the disk is behind (`--disk-backlog`), in bytes
/// and in seconds of the fastest input's line rate.
fn backlog_text(bytes: u64, inputs: &[corecap_engine::capture::Input]) -> String {
    let secs = crate::config::line_rate_mbps(inputs)
        .map(|mbps| {
            let s = bytes as f64 / (mbps * 125_000) as f64;
            if s < 1.0 {
                format!(" ({:.0} ms at {mbps} Mbit/s)", s * 1e3)
            } else {
                format!(" ({s:.1} s at {mbps} Mbit/s)")
            }
        })
        .unwrap_or_default();
    format!(
        "while the disk is behind, up to {} MiB of packets wait in memory{secs}, over all \
         the files written, taken only as needed (--disk-backlog)",
        bytes >> 20
    )
}

/// What `-w` writes, said at start: the files (one per worker or group member unless
/// merged), the format, rotation, sealing, and whether each file gets an index (on unless
/// `--no-index`) and a sessions file (on unless `--no-sessions`), so that a user knows
/// what the folder will hold.
fn writing(
    o: &corecap_engine::capture::OutputConfig,
    files: &[PathBuf],
    groups: bool,
    inputs_read: usize,
) -> String {
    use corecap_engine::sink::file::Format;
    let mut how = vec![match o.file.format {
        Format::Pcapng => "pcapng".to_owned(),
        Format::Pcap => "pcap (nanoseconds)".to_owned(),
        Format::PcapMicros => "pcap (microseconds)".to_owned(),
    }];
    // tcpdump writes classic pcap, whatever the name; corecap writes pcapng, as dumpcap
    // does, unless asked: a name ending in .pcap gets the hint.
    if o.file.format == Format::Pcapng && o.path.extension().is_some_and(|e| e == "pcap") {
        how[0] = "pcapng, though the name says .pcap (-P writes classic pcap)".into();
    }
    // Files given with -r are read one after the other: their packets are in time order
    // within each, not across them.
    match (o.merge, inputs_read) {
        (false, _) => {}
        (true, 0 | 1) => how.push("one file in time order".into()),
        (true, n) => how.push(format!(
            "one file, of {n} inputs read one after the other: in time order within each \
             input, not across them (mergecap -w merges files by time)"
        )),
    }
    if let Some(b) = o.file.rotation.filesize {
        how.push(format!("a new file every {}", size_text(b)));
    }
    if let Some(d) = o.file.rotation.duration {
        how.push(format!("a new file every {} s", d.as_secs_f64()));
    }
    if let Some(n) = o.file.rotation.files {
        how.push(format!("the newest {n} files kept"));
    }
    if o.file.seal.is_some() {
        how.push("sealed".into());
    }
    let stdout = o.path.as_os_str() == "-";
    if stdout {
        return format!("writing to standard output: {}", how.join(", "));
    }
    how.push(if o.file.index {
        "an index beside each file (.idx, what `corecap query` reads; --no-index for none)".into()
    } else {
        "no index (--no-index)".into()
    });
    if o.file.sessions.is_some() {
        how.push("a record of each connection beside each file (.sessions, what `corecap flows` reads; --no-sessions for none)".into());
    }
    // The engine's names, numbered _NNNNN as they rotate.
    let name = |p: &Path| {
        if o.file.rotation.active() {
            corecap_store::names::rotated_pattern(p)
                .display()
                .to_string()
        } else {
            p.display().to_string()
        }
    };
    match files {
        [first, .., last] => format!(
            "writing {} files, {} to {}{}: {}",
            files.len(),
            name(first),
            name(last),
            if groups {
                ""
            } else {
                " (--merge for one file)"
            },
            how.join(", ")
        ),
        [one] => format!("writing {}: {}", name(one), how.join(", ")),
        [] => format!("writing {}: {}", o.path.display(), how.join(", ")),
    }
}

/// The statistics lines printed while the capture runs: a table on stderr, or JSON lines
/// (on stdout, or stderr when the packets go to stdout).
struct Stats {
    interval: Option<Duration>,
    json: Option<Box<dyn Write>>,
    /// The counters at the last line.
    before: Vec<Snapshot>,
    last: Instant,
}

impl Stats {
    /// The counters now, as a table on stderr (SIGUSR1), with the rates since the
    /// previous line or table; the next line's rates are from this one.
    fn print_now(&mut self, cap: &Capture) {
        let now = cap.snapshot();
        let dt = self.last.elapsed().as_secs_f64();
        eprint!(
            "{}",
            report::interval_table(
                cap.elapsed().as_secs_f64(),
                &cap.workers,
                &now,
                &self.before,
                dt
            )
        );
        self.before = now;
        self.last = Instant::now();
    }

    /// Prints a line when the interval has passed.
    fn tick(&mut self, cap: &Capture) {
        let Some(iv) = self.interval else { return };
        if self.last.elapsed() < iv {
            return;
        }
        let now = cap.snapshot();
        let dt = self.last.elapsed().as_secs_f64();
        let t = cap.elapsed().as_secs_f64();
        match &mut self.json {
            Some(out) => {
                let _ = writeln!(
                    out,
                    "{}",
                    report::interval_json(t, &cap.workers, &now, &self.before, dt)
                );
                let _ = out.flush();
            }
            None => eprint!(
                "{}",
                report::interval_table(t, &cap.workers, &now, &self.before, dt)
            ),
        }
        self.before = now;
        self.last = Instant::now();
    }
}

/// Runs one control command (`join GROUP`, `leave GROUP INDEX`) and says how it went.
fn control(cap: &mut Capture, line: &str) {
    let words: Vec<&str> = line.split_whitespace().collect();
    let r = match words.as_slice() {
        ["join", g] => g
            .parse()
            .map_err(|_| "bad group".to_string())
            .and_then(|g| cap.join(g))
            .map(|n| format!("{n} joined")),
        ["leave", g, i] => match (g.parse(), i.parse()) {
            (Ok(g), Ok(i)) => cap.leave(g, i).map(|n| format!("{n} left")),
            _ => Err("bad group or index".into()),
        },
        [] => return,
        _ => Err(format!(
            "unknown command '{line}' (join GROUP | leave GROUP INDEX)"
        )),
    };
    match r {
        Ok(msg) => eprintln!("corecap: {msg}"),
        Err(e) => eprintln!("corecap: control: {e}"),
    }
}

/// Waits for the workers and for the printer to print what they wrote, then prints the
/// summary: JSON to `json`, else a table on stderr.
fn finish(
    cap: Capture,
    quiet: bool,
    json: Option<Box<dyn Write>>,
    printer: Option<Pipe>,
) -> Result<i32> {
    let summary = cap.finish();
    // The engine names the printer's pipe by its path, which means nothing to the user.
    let pipe = printer.as_ref().map(|p| p.path().display().to_string());
    let printed = printer.map(Pipe::join);
    if !quiet {
        for n in &summary.notes {
            if pipe.as_ref().is_none_or(|p| !n.contains(p.as_str())) {
                eprintln!("corecap: {n}");
            }
        }
    }
    match json {
        Some(mut out) => {
            let _ = writeln!(out, "{}", report::summary_json(&summary));
            let _ = out.flush();
        }
        None => eprint!("{}", report::summary_table(&summary)),
    }
    match printed {
        // Standard output was closed (`| head`): the reader has what it wanted, and the
        // capture's own stream into the printer broke with it.
        Some(Err(e)) if print::pipe::is_broken_pipe(&e) => return Ok(0),
        Some(Err(e)) => return Err(e.context("printing the packets")),
        _ => {}
    }
    if let Some(e) = summary.errors.first() {
        bail!("{e}");
    }
    Ok(0)
}

/// A file size as the start line shows it back: `1 GiB`, `100 MiB`, `8000 kB`.
fn size_text(b: u64) -> String {
    for (unit, name) in [(1u64 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB")] {
        if b >= unit && b.is_multiple_of(unit) {
            return format!("{} {name}", b / unit);
        }
    }
    if b.is_multiple_of(1000) {
        format!("{} kB", b / 1000)
    } else if b.is_multiple_of(1024) {
        format!("{} KiB", b / 1024)
    } else {
        format!("{b} bytes")
    }
}
