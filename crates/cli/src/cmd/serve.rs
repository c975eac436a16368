//! `corecap serve`: the on-demand capture daemon.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use corecap_engine::capture::{Balance, Capture, CaptureConfig, Input};
use corecap_engine::sink::ipfix::IpfixTarget;
use corecap_engine::stage::pipe::Transport;
use corecap_manager::manager::{Base, Config, Manager};
use corecap_manager::server::{self, Listener};
use corecap_manager::spool::Spool;

use crate::args::ServeArgs;
use crate::config::{cpu_list, size};

/// Reads the token file, or makes one (mode 0600) when it does not exist.
fn token(path: &std::path::Path) -> Result<String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::read_to_string(path) {
        Ok(t) if t.trim().len() >= 16 => Ok(t.trim().to_owned()),
        Ok(_) => bail!("{}: a token has at least 16 characters", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let t = corecap_manager::new_token().context("making a token")?;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .with_context(|| format!("creating {}", path.display()))?;
            writeln!(f, "{t}")?;
            eprintln!("corecap: wrote a new API token to {}", path.display());
            Ok(t)
        }
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Runs the daemon until SIGTERM or SIGINT. Returns the exit code.
pub(crate) fn run(a: ServeArgs) -> Result<i32> {
    if let Some(ns) = &a.netns {
        corecap_linux::netdev::enter_netns(ns)
            .with_context(|| format!("entering network namespace {ns}"))?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let quota = a.quota.as_deref().map(size).transpose()?;
    let spool = Spool::open(&a.spool, quota)
        .with_context(|| format!("opening the spool {}", a.spool.display()))?;
    let key = load_key(&a)?;
    let tcp_token = match (&a.listen, &a.token_file) {
        (Some(_), Some(f)) => Some(token(f)?),
        (Some(_), None) => bail!("--listen needs --token-file FILE (made when missing)"),
        (None, Some(_)) => bail!("--token-file is for --listen"),
        (None, None) => None,
    };
    let cpus = a
        .cpus
        .as_deref()
        .map(cpu_list)
        .transpose()?
        .unwrap_or_default();
    let stage_cpus = a
        .stage_cpus
        .as_deref()
        .map(cpu_list)
        .transpose()?
        .unwrap_or_default();
    let ring = crate::config::ring(&a.ring)?;
    let spawn_ring = (
        a.spawn_buffer_size
            .checked_mul(1 << 20)
            .filter(|b| *b > 0)
            .context("--spawn-buffer-size must be 1 MiB or more")?,
        ring.1,
        ring.2,
    );
    let bases = start_bases(&a, ring, &cpus, &stage_cpus)?;
    let unix = server::bind_unix(&a.socket)?;
    let tcp = match a.listen {
        Some(addr) => Some(server::bind_tcp(addr)?),
        None => None,
    };
    let m = Arc::new(Manager::new(
        manager_config(&a, spool, key, stage_cpus, spawn_ring)?,
        bases,
    ));
    let mut listeners = vec![Listener::Unix(unix, a.socket.clone())];
    if let (Some(l), Some(t)) = (tcp, tcp_token) {
        listeners.push(Listener::Tcp(l, Arc::new(t)));
    }
    let api = server::spawn(listeners, m.clone()).context("starting the API thread")?;
    eprintln!(
        "corecap: serving on {}{} (spool {}, at most {} captures)",
        a.socket.display(),
        a.listen
            .map_or(String::new(), |l| format!(" and http://{l}")),
        a.spool.display(),
        a.max_captures
    );
    // Relaxed: a flag set by the signal handler, polled here.
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(5));
        m.tick();
    }
    // The listeners go first, so no new client connects; a request already in flight is
    // refused (503) once shutdown has begun, or started before it and ended by it.
    api.stop();
    let _ = std::fs::remove_file(&a.socket);
    let views = m.shutdown();
    report_end(&views, a.json);
    eprintln!("corecap: stopped");
    Ok(0)
}

/// The key-encryption key for `"encrypt"` requests (`--key-file`).
fn load_key(a: &ServeArgs) -> Result<Option<Arc<corecap_engine::sink::sealed::KeyFile>>> {
    Ok(match &a.key_file {
        Some(p) => {
            let k = corecap_engine::sink::sealed::KeyFile::load(p)?;
            if let Some(w) = &k.warning {
                eprintln!("corecap: warning: {w}");
            }
            Some(Arc::new(k))
        }
        None => None,
    })
}

/// Starts the base capture of each `-i IF`, attachable, and says where its workers run.
fn start_bases(
    a: &ServeArgs,
    ring: (u64, u32, u32),
    cpus: &[u32],
    stage_cpus: &[u32],
) -> Result<Vec<Base>> {
    let mut bases = Vec::new();
    for i in &a.interfaces {
        let input = Input::parse(i).map_err(anyhow::Error::msg)?;
        if input.xdp || input.queue.is_some() {
            bail!("a base capture takes a whole interface over AF_PACKET: -i IF, not '{i}'");
        }
        let cfg = CaptureConfig {
            inputs: vec![input.clone()],
            files: vec![],
            workers: a.workers.unwrap_or(0),
            cpus: cpus.to_vec(),
            pin: true,
            balance: Balance::Flow,
            filter: None,
            snaplen: 262_144,
            ring_bytes: ring.0,
            block_size: ring.1,
            block_timeout_ms: ring.2,
            count: None,
            duration: None,
            output: None,
            groups: vec![],
            stage_cpus: stage_cpus.to_vec(),
            flows: None,
            transport: Transport::Spsc,
            attachable: true,
            spare: None,
            xdp_spread: 1,
        };
        let cap = Capture::start(&cfg).with_context(|| format!("base capture on {i}"))?;
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
        eprintln!(
            "corecap: base capture on {} ({})",
            input.iface,
            placed.join(", ")
        );
        bases.push(Base {
            iface: input.iface,
            cap,
        });
    }
    Ok(bases)
}

/// The manager's configuration from the arguments.
fn manager_config(
    a: &ServeArgs,
    spool: Spool,
    key: Option<Arc<corecap_engine::sink::sealed::KeyFile>>,
    stage_cpus: Vec<u32>,
    spawn_ring: (u64, u32, u32),
) -> Result<Config> {
    Ok(Config {
        spool,
        max_captures: a.max_captures,
        key,
        share_cores: a.share_cores,
        stage_cpus,
        ring: spawn_ring,
        spares: a.spares,
        spare_idle: corecap_engine::limits::seconds(a.spare_idle, "--spare-idle")?,
        direct: !a.disk.no_direct,
        index: !a.disk.no_index,
        retention: crate::config::retention(&a.disk)?,
        ipfix_collectors: a
            .ipfix_collector
            .iter()
            .map(|c| {
                let t = IpfixTarget::parse(c).map_err(anyhow::Error::msg)?;
                Ok(IpfixTarget {
                    biflow: a.ipfix_biflow,
                    ..t
                })
            })
            .collect::<Result<Vec<_>>>()?,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_size() {
        assert_eq!(size("500M").expect("ok"), 500 << 20);
        assert_eq!(size("2g").expect("ok"), 2 << 30);
        assert_eq!(size("1234").expect("ok"), 1234);
        assert!(size("x").is_err());
        assert!(size("99999999999T").is_err());
    }
}
