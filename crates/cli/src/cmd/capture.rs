//! `corecap capture`.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use corecap_engine::capture::Capture;

use crate::args::CaptureArgs;
use crate::{config, report};

fn list_interfaces() -> Result<()> {
    let mut names: Vec<String> = std::fs::read_dir("/sys/class/net")
        .context("reading /sys/class/net")?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    names.sort();
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

/// Refuses `-Z USER` up front when USER could not write in the output's directory:
/// rotated files, indexes and each file's name at close are made there after the switch.
fn check_writable_by(
    out: Option<&std::path::Path>,
    who: &corecap_linux::privilege::RunAs,
) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Some(out) = out.filter(|p| p.as_os_str() != "-") else {
        return Ok(());
    };
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => std::path::PathBuf::from("."),
    };
    let m = std::fs::metadata(&dir).with_context(|| format!("reading {}", dir.display()))?;
    let mode = m.mode();
    let ok = who.uid == 0
        || (m.uid() == who.uid && mode & 0o200 != 0)
        || (m.gid() == who.gid && mode & 0o020 != 0)
        || mode & 0o002 != 0;
    if !ok {
        bail!(
            "user {} (-Z) cannot write in {} (owner {}, mode {:o}): give it a directory it can write",
            who.name,
            dir.display(),
            m.uid(),
            mode & 0o7777
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
    let cfg = config::capture(&a)?;
    // Signals are registered before the workers start, so none is missed.
    let stop = Arc::new(AtomicBool::new(false));
    let usr1 = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, usr1.clone())
        .context("installing signal handlers")?;

    let run_as = a
        .user
        .as_deref()
        .map(corecap_linux::privilege::lookup_user)
        .transpose()?;
    if let Some(who) = &run_as {
        check_writable_by(cfg.output.as_ref().map(|o| o.path.as_path()), who)?;
        corecap_linux::privilege::prepare_switch().context("preparing -Z")?;
    }
    let mut cap = Capture::start(&cfg)?;
    // Every socket is open; the main thread drops its capabilities too.
    corecap_linux::privilege::drop_thread_capabilities().context("dropping capabilities")?;
    if let Some(who) = &run_as {
        if let Err(e) = corecap_linux::privilege::switch_user(who) {
            cap.stop();
            let _ = cap.finish();
            let e = corecap_linux::error_chain(&e);
            bail!("switching to user {} (-Z): {e}", who.name);
        }
    }
    let commands = a.control.as_ref().map(|p| control_reader(p.clone()));
    let to_stdout = cfg
        .output
        .as_ref()
        .is_some_and(|o| o.path.as_os_str() == "-");
    let mut json_out: Box<dyn Write> = if to_stdout {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    };
    if !a.quiet {
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
        let inputs: Vec<String> = cfg
            .inputs
            .iter()
            .map(|i| i.label())
            .chain(cfg.files.iter().map(|f| f.display().to_string()))
            .collect();
        eprintln!(
            "corecap: capturing on {} with {} worker{} ({:?} balance)",
            inputs.join(", "),
            cap.workers.len(),
            if cap.workers.len() == 1 { "" } else { "s" },
            cfg.balance
        );
    }
    let interval = match a.stats_interval {
        // 0 (or less) turns the interval lines off.
        Some(s) if s > 0.0 || s.is_nan() => {
            Some(corecap_engine::limits::seconds(s, "--stats-interval")?)
        }
        Some(_) => None,
        None if a.json || (std::io::stderr().is_terminal() && !a.quiet) => {
            Some(Duration::from_secs(1))
        }
        None => None,
    };
    let mut before = cap.snapshot();
    let mut last = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(50));
        // Relaxed: flags set by signal handlers, polled here.
        if stop.load(Ordering::Relaxed) {
            cap.stop();
        }
        if usr1.swap(false, Ordering::Relaxed) {
            let now = cap.snapshot();
            eprint!(
                "{}",
                report::interval_table(
                    cap.elapsed().as_secs_f64(),
                    &cap.workers,
                    &now,
                    &before,
                    0.0
                )
            );
        }
        if let Some(rx) = &commands {
            while let Ok(line) = rx.try_recv() {
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
                    [] => continue,
                    _ => Err(format!(
                        "unknown command '{line}' (join GROUP | leave GROUP INDEX)"
                    )),
                };
                match r {
                    Ok(msg) => eprintln!("corecap: {msg}"),
                    Err(e) => eprintln!("corecap: control: {e}"),
                }
            }
        }
        if let Some(iv) = interval {
            if last.elapsed() >= iv {
                let now = cap.snapshot();
                let dt = last.elapsed().as_secs_f64();
                let t = cap.elapsed().as_secs_f64();
                if a.json {
                    let _ = writeln!(
                        json_out,
                        "{}",
                        report::interval_json(t, &cap.workers, &now, &before, dt)
                    );
                    let _ = json_out.flush();
                } else {
                    eprint!(
                        "{}",
                        report::interval_table(t, &cap.workers, &now, &before, dt)
                    );
                }
                before = now;
                last = Instant::now();
            }
        }
        if cap.done() {
            break;
        }
    }
    let summary = cap.finish();
    if !a.quiet {
        for n in &summary.notes {
            eprintln!("corecap: {n}");
        }
    }
    if a.json {
        let _ = writeln!(json_out, "{}", report::summary_json(&summary));
        let _ = json_out.flush();
    } else {
        eprint!("{}", report::summary_table(&summary));
    }
    if let Some(e) = summary.errors.first() {
        bail!("{e}");
    }
    Ok(0)
}
