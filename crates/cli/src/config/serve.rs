//! `corecap serve`: the daemon's configuration, its base captures and its recording,
//! resolved from its flags.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use corecap_engine::capture::{CaptureConfig, Input, OutputConfig};
use corecap_engine::sink::file::{FileOptions, Format, Rotation};
use corecap_engine::sink::ipfix::IpfixTarget;
use corecap_engine::steer::group::{GroupKind, GroupSpec};
use corecap_manager::manager::Config as ManagerConfig;
use corecap_manager::spool::Spool;
use corecap_store::sealed::KeyFile;
use corecap_store::session::SessionConfig;
use corecap_store::write::output::Backlog;

use super::cutoff::{cutoff, cutoff_given};
use super::disk::{
    compress, disk_backlog, file_options, flush_interval, retention, session_tables_fit, sessions,
    sessions_log, size,
};
use super::{cpu_list, ring, rotation};
use crate::args::ServeArgs;

/// What `corecap serve` runs, resolved from [`ServeArgs`]: the listeners, one base capture
/// per `-i`, and the manager's configuration.
pub(crate) struct ServeConfig {
    /// The API's Unix socket.
    pub(crate) socket: PathBuf,
    /// A TCP listener too (`--listen`).
    pub(crate) listen: Option<Listen>,
    /// The spool as given, for messages.
    pub(crate) spool: PathBuf,
    /// One attachable capture of a whole interface per `-i`.
    pub(crate) bases: Vec<CaptureConfig>,
    /// The spool (opened), limits, key, spawned workers' rings and IPFIX collectors.
    pub(crate) manager: ManagerConfig,
    /// Print each capture's final state as JSON lines at exit.
    pub(crate) json: bool,
    /// The user to run as once the base captures and the socket are open (`-Z`).
    pub(crate) run_as: Option<corecap_linux::privilege::RunAs>,
    /// The other sensors the page searches (`--peers`).
    pub(crate) peers: Option<corecap_manager::web::sensors::Sensors>,
}

/// `serve --listen`: the address, the bearer token, and TLS.
pub(crate) struct Listen {
    pub(crate) addr: SocketAddr,
    /// Required in clear, optional with TLS.
    pub(crate) token: Option<String>,
    /// The daemon's certificate and the CA of its clients' certificates.
    pub(crate) tls: Option<Arc<corecap_manager::tls::ServerConfig>>,
}

/// `--listen` with its token and TLS files, checked: in clear only on loopback and with a
/// token; elsewhere with TLS and client certificates.
pub(super) fn listen(a: &ServeArgs) -> Result<Option<Listen>> {
    let Some(addr) = a.listen else {
        if a.token_file.is_some() {
            bail!("--token-file is for --listen");
        }
        return Ok(None);
    };
    let token = a.token_file.as_deref().map(token).transpose()?;
    let tls = match (&a.tls_cert, &a.tls_key, &a.tls_client_ca) {
        (Some(c), Some(k), Some(ca)) => Some(Arc::new(
            corecap_manager::tls::server_config(c, k, ca).context("--listen with TLS")?,
        )),
        (None, None, None) => None,
        _ => bail!("TLS needs --tls-cert, --tls-key and --tls-client-ca together (corecap certs DIR makes them)"),
    };
    if tls.is_none() {
        if !addr.ip().is_loopback() {
            bail!("--listen {addr}: an address other than loopback needs TLS with client certificates (--tls-cert, --tls-key, --tls-client-ca; corecap certs DIR makes them)");
        }
        if token.is_none() {
            bail!("--listen in clear needs --token-file FILE (made when missing)");
        }
    }
    Ok(Some(Listen { addr, token, tls }))
}

/// Resolves the daemon's arguments: opens the spool (and the recording folder), loads the
/// key, the token and the TLS files, and builds the base captures' configurations.
pub(crate) fn serve(a: &ServeArgs) -> Result<ServeConfig> {
    let run_as = a
        .user
        .as_deref()
        .map(corecap_linux::privilege::lookup_user)
        .transpose()?;
    let also = run_as.as_ref().map(|u| u.uid);
    let quota = a.quota.as_deref().map(size).transpose()?;
    let spool = Spool::open(&a.spool, quota, also)
        .with_context(|| format!("opening the spool {}", a.spool.display()))?;
    let key = a.key_file.as_deref().map(key_file).transpose()?;
    let listen = listen(a)?;
    let cpus = optional_cpu_list(a.cpus.as_deref())?;
    let stage_cpus = optional_cpu_list(a.stage_cpus.as_deref())?;
    let ring = ring(&a.ring)?;
    let spawn_ring = corecap_linux::RingConfig::with_size(
        a.spawn_buffer_size
            .checked_mul(1 << 20)
            .filter(|b| *b > 0)
            .context("--spawn-buffer-size must be 1 MiB or more")?,
        ring.block_size,
        ring.retire_tov_ms,
    );
    let mut bases = a
        .interfaces
        .iter()
        .map(|i| base_capture(i, a.workers.unwrap_or(0), &cpus, &stage_cpus, ring))
        .collect::<Result<Vec<_>>>()?;
    let retention = retention(&a.disk)?;
    let record = match &a.record {
        Some(dir) => Some(record_into(
            dir,
            a,
            &spool,
            &mut bases,
            (&retention, &run_as),
        )?),
        None if cutoff_given(&a.cutoff) => {
            bail!("--flow-cutoff and --cutoff need --record DIR (they cut what is recorded)")
        }
        None => None,
    };
    let holds = holds(a, &spool, record.as_deref(), &retention, key.as_ref())?;
    give_holds(&mut bases, &holds);
    let eve = eve(a, &spool, record.as_deref(), holds.as_ref())?;
    let manager = ManagerConfig {
        eve,
        holds,
        spool,
        max_captures: a.max_captures,
        key,
        share_cores: a.share_cores,
        stage_cpus,
        ring: spawn_ring,
        spares: a.spares,
        spawn_priority: a.spawn_priority,
        spare_idle: corecap_engine::limits::seconds(a.spare_idle, "--spare-idle")?,
        direct: !a.disk.no_direct,
        index: !a.disk.no_index,
        sessions: on_demand_sessions(a)?,
        flush: flush_interval(&a.disk)?,
        retention,
        ipfix_collectors: ipfix_collectors(&a.ipfix_collector, a.ipfix_biflow)?,
        recovered: Vec::new(),
        record,
    };
    Ok(ServeConfig {
        socket: a.socket.clone(),
        listen,
        spool: a.spool.clone(),
        bases,
        manager,
        json: a.json,
        run_as,
        peers: peers(a)?,
    })
}

/// The sessions of on-demand captures: a table of 4,096 connections each unless
/// `--sessions-per-file` says, refused when the tables of as many captures as
/// `--max-captures` lets run at once (one table a capture: a spawned capture has one worker,
/// an attached one one stage member) take more than a quarter of the memory available.
fn on_demand_sessions(a: &ServeArgs) -> Result<Option<SessionConfig>> {
    let s = sessions(&a.disk, SessionConfig::on_demand())?;
    if let (Some(s), Some(_)) = (&s, a.disk.sessions_per_file) {
        session_tables_fit(s, a.max_captures.max(1) as u64).with_context(|| {
            format!(
                "each on-demand capture has its own table, and --max-captures lets {} run at once",
                a.max_captures
            )
        })?;
    }
    Ok(s)
}

/// `--record DIR`: opens the recording folder (not the spool), and has each base capture
/// record into it with its rotation (1 GB or 300 s unless `-b` says), written by a stage
/// thread of one balance group, as `capture --pipeline` does. Returns the folder.
fn record_into(
    dir: &std::path::Path,
    a: &ServeArgs,
    spool: &Spool,
    bases: &mut [CaptureConfig],
    (retention, run_as): (
        &Option<Arc<corecap_store::retention::Retention>>,
        &Option<corecap_linux::privilege::RunAs>,
    ),
) -> Result<PathBuf> {
    let also = run_as.as_ref().map(|u| u.uid);
    let dir = corecap_manager::spool::open_folder(dir, also)
        .with_context(|| format!("opening the recording folder {}", dir.display()))?;
    if dir == spool.dir() {
        bail!(
            "--record {}: give a folder other than the spool",
            dir.display()
        );
    }
    let rotation = if a.rotate.is_empty() {
        rotation(&["filesize:1G,duration:300".to_owned()])?
    } else {
        rotation(&a.rotate)?
    };
    if !rotation.active() {
        bail!("--record needs rotation (-b filesize:kB or duration:S)");
    }
    if let Some(n) = rotation.files {
        // A ring of files deletes the oldest whatever holds and alerts pin in it; retention
        // copies what they keep out first.
        bail!(
            "-b files:{n}: serve keeps its recording by --retain, --retain-age and --min-free, \
             which keep what holds and alerts pin; a ring of files would delete it"
        );
    }
    for b in bases.iter_mut() {
        b.output = Some(recording(&dir, b, a, rotation, retention, run_as)?);
        b.groups = vec![GroupSpec {
            kind: GroupKind::Balance,
            members: 1,
            filter: None,
            snaplen: None,
        }];
    }
    // One session table a base capture's recording (its one stage member writes it).
    if let Some(s) = bases.first().and_then(|b| b.output.as_ref()?.file.sessions) {
        session_tables_fit(&s, bases.len() as u64)?;
    }
    Ok(dir)
}

/// `--peers FILE` with the TLS client files it is asked with.
fn peers(a: &ServeArgs) -> Result<Option<corecap_manager::web::sensors::Sensors>> {
    let (Some(file), Some(ca)) = (&a.peers, &a.peer_tls_ca) else {
        return Ok(None);
    };
    let s = corecap_manager::web::sensors::Sensors::load(
        file,
        ca,
        a.peer_tls_cert.as_deref(),
        a.peer_tls_key.as_deref(),
    )
    .context("--peers")?;
    Ok(Some(s))
}

/// What a base capture records with `serve --record DIR`: `DIR/IF.pcapng` (from a stage
/// thread, `IF.g0m0_NNNNN.pcapng`), rotated, indexed and kept under `--retain` with the
/// spool, as `capture -w`.
pub(super) fn recording(
    dir: &Path,
    base: &CaptureConfig,
    a: &ServeArgs,
    rotation: Rotation,
    retention: &Option<Arc<corecap_store::retention::Retention>>,
    run_as: &Option<corecap_linux::privilege::RunAs>,
) -> Result<OutputConfig> {
    let iface = base.inputs.first().map_or("capture", |i| i.iface.as_str());
    let compress = compress(&a.disk)?;
    let mut path = dir.join(format!("{iface}.pcapng"));
    if compress.is_some() {
        path = corecap_store::names::compressed_path(&path);
    }
    if let Some(why) = corecap_index::capture_name_error(&path) {
        bail!("--record: {why}");
    }
    let sessions_log = sessions_log(&a.disk)?;
    let cutoff = cutoff(&a.cutoff)?;
    Ok(OutputConfig {
        path,
        merge: false,
        file: FileOptions {
            owner: run_as.clone(),
            retention: retention.clone(),
            backlog: Backlog::new(disk_backlog(a.disk.disk_backlog.as_deref(), &base.inputs)?),
            ..file_options(&a.disk, Format::Pcapng, rotation, sessions_log, compress)?
        },
        cutoff,
    })
}

/// The base capture of `serve -i IF`: the whole interface over AF_PACKET, attachable, with
/// no groups of its own.
pub(super) fn base_capture(
    typed: &str,
    workers: usize,
    cpus: &[u32],
    stage_cpus: &[u32],
    ring: corecap_linux::RingConfig,
) -> Result<CaptureConfig> {
    let input = Input::parse(typed).map_err(anyhow::Error::msg)?;
    if input.xdp || input.queue.is_some() {
        bail!("a base capture takes a whole interface over AF_PACKET: -i IF, not '{typed}'");
    }
    Ok(CaptureConfig {
        inputs: vec![input],
        workers,
        cpus: cpus.to_vec(),
        stage_cpus: stage_cpus.to_vec(),
        ring,
        attachable: true,
        ..CaptureConfig::default()
    })
}

/// A CPU list flag, empty when not given.
pub(super) fn optional_cpu_list(s: Option<&str>) -> Result<Vec<u32>> {
    Ok(s.map(cpu_list).transpose()?.unwrap_or_default())
}

/// A key-encryption key file (`--key-file`); warns about one others can read.
pub(crate) fn key_file(path: &Path) -> Result<Arc<KeyFile>> {
    let k = KeyFile::load(path)?;
    if let Some(w) = &k.warning {
        eprintln!("corecap: warning: {w}");
    }
    Ok(Arc::new(k))
}

/// Reads the token file, or makes one (mode 0600) when it does not exist.
pub(super) fn token(path: &Path) -> Result<String> {
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

/// The IPFIX collectors flows requests may name (`--ipfix-collector`).
pub(super) fn ipfix_collectors(urls: &[String], biflow: bool) -> Result<Vec<IpfixTarget>> {
    urls.iter()
        .map(|c| {
            let t = IpfixTarget::parse(c).map_err(anyhow::Error::msg)?;
            Ok(IpfixTarget { biflow, ..t })
        })
        .collect()
}

/// Gives the recording's cutoff the holds: it asks them (and so the alerts) before it cuts
/// a flow.
fn give_holds(bases: &mut [CaptureConfig], holds: &Option<Arc<corecap_store::keep::hold::Holds>>) {
    for c in bases
        .iter_mut()
        .filter_map(|b| b.output.as_mut()?.cutoff.as_mut())
    {
        c.holds = holds.clone().map(corecap_engine::cutoff::HeldFlows);
    }
}

/// The recording's holds (in the recording folder, else the spool), read before any file
/// is deleted, and given to retention so that it copies their packets out first.
fn holds(
    a: &ServeArgs,
    spool: &corecap_manager::spool::Spool,
    record: Option<&std::path::Path>,
    retention: &Option<Arc<corecap_store::retention::Retention>>,
    key: Option<&Arc<corecap_store::sealed::KeyFile>>,
) -> Result<Option<Arc<corecap_store::keep::hold::Holds>>> {
    let budget = a
        .hold_budget
        .as_deref()
        .map(|b| size(b).with_context(|| format!("--hold-budget {b}")))
        .transpose()?;
    let home = record.unwrap_or(spool.dir());
    let mut folders = vec![spool.dir().to_owned()];
    folders.extend(record.map(|r| r.to_owned()));
    let holds = corecap_store::keep::hold::Holds::open(home, folders, budget, key.cloned())
        .with_context(|| format!("reading the holds of {}", home.display()))?;
    if let Some(r) = retention {
        r.hold_with(holds.clone());
    }
    Ok(Some(holds))
}

/// The follower of Suricata's EVE output (`--eve`), keeping its alerts where the holds are.
fn eve(
    a: &ServeArgs,
    spool: &corecap_manager::spool::Spool,
    record: Option<&std::path::Path>,
    holds: Option<&Arc<corecap_store::keep::hold::Holds>>,
) -> Result<Option<Arc<corecap_manager::eve::Eve>>> {
    let (Some(path), Some(holds)) = (&a.eve, holds) else {
        return Ok(None);
    };
    let idle = corecap_engine::limits::seconds(a.eve_idle, "--eve-idle")?;
    let home = record.unwrap_or(spool.dir());
    let mut folders = vec![spool.dir().to_owned()];
    folders.extend(record.map(|r| r.to_owned()));
    let types: Vec<String> = a
        .eve_types
        .iter()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect();
    Ok(Some(corecap_manager::eve::Eve::new(
        corecap_manager::eve::EveSource::parse(path),
        types,
        idle,
        home,
        folders,
        holds.clone(),
    )))
}
