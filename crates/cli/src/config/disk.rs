//! How capture files are written and kept (`DiskArgs`): sizes, the flush interval, the
//! disk backlog, retention and sessions.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use corecap_engine::capture::Input;
use corecap_store::session::SessionConfig;

use super::{BACKLOG_SECONDS, UNKNOWN_SPEED_MBPS};

/// The line rate of the fastest live input in Mbit/s (a link that reports none counts as
/// [`UNKNOWN_SPEED_MBPS`]); None without live inputs.
pub(crate) fn line_rate_mbps(inputs: &[Input]) -> Option<u64> {
    inputs
        .iter()
        .map(|i| corecap_linux::netdev::speed_mbps(&i.iface).unwrap_or(UNKNOWN_SPEED_MBPS))
        .max()
}

/// What a capture's file sinks may hold together while their disk is behind
/// (`--disk-backlog`), beyond the few buffers each starts with: seconds of the
/// fastest live input's line rate (as the rings are sized), or a size; at least the least
/// backlog of a sink, at most a quarter of the available memory.
pub(crate) fn disk_backlog(given: Option<&str>, inputs: &[Input]) -> Result<u64> {
    use corecap_store::write::output::DEFAULT_BACKLOG;
    let speed = line_rate_mbps(inputs);
    let seconds = |t: &str| -> Option<f64> {
        let t = t.strip_suffix('s').unwrap_or(t);
        t.parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0)
    };
    let (want, why) = match given.map(str::trim) {
        None => (None, None),
        Some(t) => match seconds(t) {
            Some(s) => (None, Some(s)),
            None => (
                Some(size(t).with_context(|| {
                    format!("--disk-backlog {t}: expected seconds (2, 0.5s) or a size (512M)")
                })?),
                None,
            ),
        },
    };
    let secs = why.unwrap_or(BACKLOG_SECONDS);
    let bytes = match (want, speed) {
        (Some(b), _) => b,
        (None, Some(mbps)) => (secs * (mbps * 1_000_000 / 8) as f64) as u64,
        // Files only (-r): the workers wait for the disk; nothing is lost by holding less.
        (None, None) => DEFAULT_BACKLOG,
    };
    let cap = corecap_linux::memory::available().map_or(u64::MAX, |a| a / 4);
    Ok(bytes.clamp(DEFAULT_BACKLOG, cap.max(DEFAULT_BACKLOG)))
}

/// Parses `500M`, `20G`, `1048576`.
pub(crate) fn size(s: &str) -> Result<u64> {
    Ok(corecap_engine::limits::size(s, "size")?)
}

/// What the disk flags say of each file of a recording in `format` and `rotation`: direct
/// I/O, the index, its connections and their log, compression, the flush timer. No
/// sealing, owner, retention or backlog: the caller adds those.
pub(crate) fn file_options(
    d: &crate::args::DiskArgs,
    format: corecap_engine::sink::file::Format,
    rotation: corecap_engine::sink::file::Rotation,
    sessions_log: Option<Arc<corecap_store::write::sessions_log::SessionsLog>>,
    compress: Option<i32>,
) -> Result<corecap_engine::sink::file::FileOptions> {
    Ok(corecap_engine::sink::file::FileOptions {
        format,
        rotation,
        seal: None,
        direct: !d.no_direct,
        index: !d.no_index,
        sessions: sessions(d, SessionConfig::default())?,
        sessions_log,
        compress,
        flush: flush_interval(d)?,
        owner: None,
        retention: None,
        backlog: Default::default(),
    })
}

/// `--flush-interval SECONDS`: 0 hands every batch to the disk as it comes.
pub(crate) fn flush_interval(d: &crate::args::DiskArgs) -> Result<Option<std::time::Duration>> {
    if d.flush_interval == 0.0 {
        return Ok(Some(std::time::Duration::ZERO));
    }
    Ok(Some(corecap_engine::limits::seconds(
        d.flush_interval,
        "--flush-interval",
    )?))
}

/// What a capture or daemon keeps (`--retain`, `--retain-age`, `--min-free`), shared by
/// every file it writes; None when no rule is given.
pub(crate) fn retention(
    d: &crate::args::DiskArgs,
) -> Result<Option<std::sync::Arc<corecap_store::retention::Retention>>> {
    use corecap_store::retention::{MinFree, Retention};
    if d.retain.is_none() && d.retain_age.is_none() && d.min_free.is_none() {
        return Ok(None);
    }
    let budget = match &d.retain {
        Some(r) => match size(r).context("--retain")? {
            0 => bail!("--retain must be more than 0 bytes"),
            b => b,
        },
        None => u64::MAX,
    };
    let r = Retention::new(budget);
    if let Some(a) = &d.retain_age {
        r.limit_age(age(a).with_context(|| format!("--retain-age {a}"))?);
    }
    if let Some(m) = &d.min_free {
        let min = match m.strip_suffix('%') {
            Some(p) => match p.trim().parse::<f64>() {
                Ok(p) if (0.0..100.0).contains(&p) => MinFree::Percent(p),
                _ => bail!("--min-free {m}: a share is 0% to 99%"),
            },
            None => MinFree::Bytes(size(m).with_context(|| format!("--min-free {m}"))?),
        };
        r.keep_free(min);
    }
    Ok(Some(r))
}

/// A duration as `--retain-age` takes it: a number and a unit (s, m or min, h, d, w).
pub(super) fn age(s: &str) -> Result<std::time::Duration> {
    let t = s.trim();
    let at = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (n, unit) = t.split_at(at);
    let n: f64 = n
        .parse()
        .map_err(|_| anyhow::anyhow!("expected a number and a unit, as 14d or 12h"))?;
    let secs = match unit.trim() {
        "s" | "sec" | "secs" | "" => 1.0,
        "m" | "min" | "mins" => 60.0,
        "h" | "hour" | "hours" => 3600.0,
        "d" | "day" | "days" => 86_400.0,
        "w" | "week" | "weeks" => 604_800.0,
        u => bail!("unknown unit '{u}' (s, m, h, d or w)"),
    };
    if !(n * secs).is_finite() || n * secs <= 0.0 {
        bail!("the age must be more than 0");
    }
    Ok(std::time::Duration::from_secs_f64(n * secs))
}

/// The sessions kept beside each file, in a table of `size` unless `--sessions-per-file`
/// says (none with `--no-sessions`; `--no-index` leaves them: a sessions file names the
/// bytes it was made from itself). Whether the tables fit in memory is asked where their number
/// is known ([`session_tables_fit`]).
pub(super) fn sessions(
    d: &crate::args::DiskArgs,
    size: SessionConfig,
) -> Result<Option<SessionConfig>> {
    if d.no_sessions {
        if d.sessions_per_file.is_some() {
            bail!("--sessions-per-file needs the sessions files (not --no-sessions)");
        }
        return Ok(None);
    }
    let size = match d.sessions_per_file {
        None => size,
        Some(n) if n == 0 || n > MAX_SESSIONS_PER_FILE => {
            bail!("--sessions-per-file must be from 1 to {MAX_SESSIONS_PER_FILE}, not {n}")
        }
        Some(n) => SessionConfig::with_capacity(n),
    };
    Ok(Some(SessionConfig {
        seed: d.community_id_seed,
        ..size
    }))
}

/// Refuses `tables` session tables of `s` (each made whole at start: one a file being
/// written) that together take more than a quarter of the available memory.
pub(super) fn session_tables_fit(s: &SessionConfig, tables: u64) -> Result<()> {
    let need = s.bytes().saturating_mul(tables);
    if let Some(a) = corecap_linux::memory::available().filter(|&a| need > a / 4) {
        let (plural, verb) = if tables == 1 {
            ("", "takes")
        } else {
            ("s", "take")
        };
        bail!(
            "{tables} session table{plural} of {} connections {verb} {} MiB, more than a \
             quarter of the {} MiB of memory available; lower --sessions-per-file",
            s.capacity,
            need >> 20,
            a >> 20
        );
    }
    Ok(())
}

/// The most connections `--sessions-per-file` takes (a table of about 20 GiB).
const MAX_SESSIONS_PER_FILE: usize = 1 << 26;

/// The log every closed file's connections are appended to (`--sessions-log`), opened
/// once for all of a capture's files; its lines name this host as the observer.
pub(super) fn sessions_log(
    d: &crate::args::DiskArgs,
) -> Result<Option<Arc<corecap_store::write::sessions_log::SessionsLog>>> {
    let Some(p) = &d.sessions_log else {
        return Ok(None);
    };
    if d.no_sessions {
        bail!("--sessions-log needs the sessions files (not --no-sessions)");
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    let log = corecap_store::write::sessions_log::SessionsLog::open(p, &host)
        .with_context(|| format!("--sessions-log {}", p.display()))?;
    Ok(Some(log))
}

/// The zstd level of `--compress zstd[:LEVEL]`, or None when not asked for.
pub(crate) fn compress(d: &crate::args::DiskArgs) -> Result<Option<i32>> {
    d.compress
        .as_deref()
        .map(corecap_store::write::compress::parse)
        .transpose()
        .map_err(anyhow::Error::msg)
}
