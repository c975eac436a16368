//! Resolving what was typed into an engine configuration: interfaces, CPUs, filter, output.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use corecap_engine::capture::{Balance, CaptureConfig, Input, OutputConfig};
use corecap_engine::sink::file::{Format, Rotation};
use corecap_engine::stage::pipe::Transport;
use corecap_engine::steer::group::{GroupKind, GroupSpec};

use crate::args::{BalanceArg, CaptureArgs, RingArgs};

/// Parses `-b` options: `filesize:MB`, `duration:S`, `files:N`.
pub(crate) fn rotation(specs: &[String]) -> Result<Rotation> {
    let mut r = Rotation::default();
    for spec in specs.iter().flat_map(|s| s.split(',')) {
        let (k, v) = spec
            .split_once(':')
            .with_context(|| format!("bad -b option '{spec}' (expected KEY:VALUE)"))?;
        let n: u64 = v
            .parse()
            .with_context(|| format!("bad number in -b option '{spec}'"))?;
        if n == 0 {
            bail!("-b {k} must be greater than 0");
        }
        match k {
            "filesize" => r.filesize = Some(n * 1_000_000),
            "duration" => r.duration = Some(Duration::from_secs(n)),
            "files" => r.files = Some(n as usize),
            _ => bail!("unknown -b option '{k}' (use filesize:MB, duration:S or files:N)"),
        }
    }
    if r.files.is_some() && !r.active() {
        bail!("-b files:N needs filesize: or duration: as well");
    }
    Ok(r)
}

/// The ring geometry from `-B` (64 MiB when not given), `--block-size` and
/// `--block-timeout`.
pub(crate) fn ring(r: &RingArgs) -> Result<corecap_linux::RingConfig> {
    let (bytes, block, tov) = ring_geometry(r)?;
    Ok(corecap_linux::RingConfig::with_size(
        bytes.unwrap_or(64 << 20),
        block,
        tov,
    ))
}

/// The ring geometry as given: bytes per worker (None: sized from the link), block size and
/// block timeout.
fn ring_geometry(r: &RingArgs) -> Result<(Option<u64>, u32, u32)> {
    if r.buffer_mib == Some(0) {
        bail!("-B must be at least 1 MiB");
    }
    if r.block_size < 4 || !r.block_size.is_multiple_of(4) {
        bail!("--block-size must be a multiple of 4 KiB");
    }
    let block = r
        .block_size
        .checked_mul(1024)
        .context("--block-size is too large")?;
    let bytes = r
        .buffer_mib
        .map(|m| m.checked_mul(1 << 20).context("-B is too large"))
        .transpose()?;
    Ok((bytes, block, r.block_timeout.max(1)))
}

/// Line rate assumed for a link that reports no speed, in Mbit/s.
const UNKNOWN_SPEED_MBPS: u64 = 10_000;

/// Rings per worker: `-B`, or sized from the links like netsniff-ng sizes its ring: 100 ms
/// of the fastest input's line rate per worker, at least 64 MiB and at most 1 GiB, and all
/// rings together within a quarter of the available memory. A ring larger than the
/// available memory is refused before the kernel is asked for it; one that holds less than
/// 50 ms of line rate gets a warning.
pub(crate) fn ring_bytes(
    given: Option<u64>,
    block: u32,
    inputs: &[Input],
    workers: usize,
) -> Result<u64> {
    let per_input = |i: &Input| -> u64 {
        match (i.queue, workers) {
            (Some(_), _) => 1,
            (None, 0) => u64::from(corecap_linux::netdev::rx_queues(&i.iface).unwrap_or(1)),
            (None, w) => w as u64,
        }
    };
    let rings: u64 = inputs.iter().map(per_input).sum::<u64>().max(1);
    let speed = inputs
        .iter()
        .map(|i| corecap_linux::netdev::speed_mbps(&i.iface).unwrap_or(UNKNOWN_SPEED_MBPS))
        .max()
        .unwrap_or(UNKNOWN_SPEED_MBPS);
    let per_worker = (rings / inputs.len().max(1) as u64).max(1);
    let line_bytes_per_s = speed * 1_000_000 / 8;
    let avail = corecap_linux::memory::available();
    let block = u64::from(block);
    let bytes = match given {
        Some(b) => b,
        None => {
            let want = (line_bytes_per_s / 10 / per_worker).clamp(64 << 20, 1 << 30);
            let cap = avail.map_or(want, |a| a / 4 / rings);
            want.min(cap).max(4 * block)
        }
    };
    let bytes = bytes.div_ceil(block) * block;
    if let Some(a) = avail {
        if bytes.saturating_mul(rings) > a {
            bail!(
                "{rings} ring{} of {} MiB need {} MiB, more than the {} MiB of memory available; \
                 lower -B (or the number of workers)",
                if rings == 1 { "" } else { "s" },
                bytes >> 20,
                bytes.saturating_mul(rings) >> 20,
                a >> 20
            );
        }
    }
    let ms = bytes as f64 * per_worker as f64 / line_bytes_per_s as f64 * 1e3;
    if ms < 50.0 && !inputs.is_empty() {
        eprintln!(
            "corecap: warning: a ring of {} MiB per worker holds {ms:.0} ms of {speed} Mbit/s \
             over {per_worker} worker{}: a worker that stalls longer loses packets (raise -B)",
            bytes >> 20,
            if per_worker == 1 { "" } else { "s" }
        );
    }
    Ok(bytes)
}

/// Parses `500M`, `20G`, `1048576`.
pub(crate) fn size(s: &str) -> Result<u64> {
    Ok(corecap_engine::limits::size(s, "size")?)
}

/// The byte budget of `--retain`, shared by every file of a capture or daemon.
pub(crate) fn retention(
    d: &crate::args::DiskArgs,
) -> Result<Option<std::sync::Arc<corecap_engine::sink::disk::Retention>>> {
    let Some(r) = &d.retain else { return Ok(None) };
    let b = size(r).context("--retain")?;
    if b == 0 {
        bail!("--retain must be more than 0 bytes");
    }
    Ok(Some(corecap_engine::sink::disk::Retention::new(b)))
}

/// Parses a CPU list such as `0-3,6`.
pub(crate) fn cpu_list(s: &str) -> Result<Vec<u32>> {
    let v = corecap_linux::affinity::parse_cpu_list(s)
        .with_context(|| format!("bad CPU list '{s}'"))?;
    let online = corecap_linux::affinity::online_cpus();
    if let Some(c) = v.iter().find(|c| !online.contains(c)) {
        bail!("CPU {c} is not online (online: {online:?})");
    }
    Ok(v)
}

/// The filter: `-f EXPR` or the trailing words, joined as tcpdump joins them.
pub(crate) fn filter(a: &CaptureArgs) -> Result<Option<String>> {
    match (&a.filter, a.expr.is_empty()) {
        (Some(_), false) => {
            bail!("give the filter either with -f or as trailing arguments, not both")
        }
        (Some(f), true) => Ok(Some(f.clone())),
        (None, false) => Ok(Some(a.expr.join(" "))),
        (None, true) => Ok(None),
    }
}

/// The `tune` plan for the one interface of `--auto`; prints where it puts the workers
/// and each warning, on stderr.
fn auto(a: &CaptureArgs, inputs: &[Input]) -> Result<corecap_tune::Plan> {
    let [input] = inputs else {
        bail!("--auto places the workers of one interface; give exactly one -i");
    };
    if input.queue.is_some() {
        bail!("--auto places every queue of an interface; drop @QUEUE");
    }
    let root = corecap_tune::Root::live();
    let machine = corecap_tune::Machine::read(&root, &input.iface)
        .with_context(|| format!("--auto: reading the topology of {}", input.iface))?;
    let plan = corecap_tune::Plan::new(
        &machine,
        corecap_tune::PlanOptions {
            workers: a.workers,
            queues: None,
        },
    );
    if !a.quiet {
        eprintln!(
            "corecap: --auto: {} worker{} on CPUs {} (node {}), stage CPUs {}",
            plan.workers.len(),
            if plan.workers.len() == 1 { "" } else { "s" },
            corecap_tune::cpus::format_list(&plan.worker_cpus()),
            plan.node,
            if plan.stage_cpus.is_empty() {
                "none".to_owned()
            } else {
                corecap_tune::cpus::format_list(&plan.stage_cpus)
            }
        );
        for w in &plan.warnings {
            eprintln!("corecap: warning: {}", w.message);
        }
    }
    Ok(plan)
}

/// The sealing of `--encrypt` with `--key-file`; warns about a key file others can read.
fn seal(a: &CaptureArgs) -> Result<Option<corecap_engine::sink::sealed::SealConfig>> {
    use corecap_engine::sink::sealed::{KeyFile, SealConfig};
    let (cipher, key) = match (&a.encrypt, &a.key_file) {
        (None, None) => return Ok(None),
        (Some(_), None) => {
            bail!("--encrypt needs --key-file FILE (corecap keygen -o FILE makes one)")
        }
        (None, Some(_)) => bail!("--key-file is for --encrypt aes|seed"),
        (Some(c), Some(k)) => (c, k),
    };
    let kek = KeyFile::load(key)?;
    if let Some(w) = &kek.warning {
        eprintln!("corecap: warning: {w}");
    }
    Ok(Some(SealConfig {
        cipher: cipher.name().parse().map_err(anyhow::Error::msg)?,
        kek: std::sync::Arc::new(kek),
    }))
}

/// Resolves the capture arguments.
pub(crate) fn capture(a: &CaptureArgs) -> Result<CaptureConfig> {
    if a.xdp_spread > 1 && !a.interfaces.iter().any(|i| i.starts_with("xdp:")) {
        bail!("--xdp-spread spreads AF_XDP queues; give -i xdp:IF");
    }
    if a.interfaces.is_empty() && a.read.is_empty() {
        bail!("nothing to capture: give -i IF or -r FILE (corecap capture -D lists interfaces)");
    }
    let inputs = a
        .interfaces
        .iter()
        .map(|s| Input::parse(s).map_err(anyhow::Error::msg))
        .collect::<Result<Vec<_>>>()?;
    let mut cpus = match &a.cpus {
        Some(s) => cpu_list(s)?,
        None => vec![],
    };
    let mut workers = a.workers.unwrap_or(0);
    if workers > 1024 {
        bail!("--workers {workers} is more than 1024");
    }
    corecap_engine::limits::snaplen(a.snaplen, "-s")?;
    let (given_ring, block_size, block_timeout_ms) = ring_geometry(&a.ring)?;
    let output = match &a.write {
        Some(p) => Some(OutputConfig {
            path: p.clone(),
            format: if a.pcap { Format::Pcap } else { Format::Pcapng },
            merge: a.merge,
            rotation: rotation(&a.rotate)?,
            seal: seal(a)?,
            direct: !a.disk.no_direct,
            index: !a.disk.no_index,
            owner: a
                .user
                .as_deref()
                .map(corecap_linux::privilege::lookup_user)
                .transpose()?,
            retention: {
                let r = retention(&a.disk)?;
                if r.is_some() && !rotation(&a.rotate)?.active() {
                    bail!("--retain needs rotation (-b filesize:MB or -b duration:S)");
                }
                r
            },
        }),
        None => {
            if a.merge
                || a.pcap
                || !a.rotate.is_empty()
                || a.encrypt.is_some()
                || a.disk.retain.is_some()
            {
                bail!("--merge, --pcap, -b, --retain and --encrypt need -w FILE");
            }
            None
        }
    };
    if let Some(o) = &output {
        if o.path.as_os_str() == "-" && o.rotation.active() {
            bail!("-b cannot rotate standard output");
        }
    }
    let duration = a
        .duration
        .map(|d| corecap_engine::limits::seconds(d, "--duration"))
        .transpose()?;
    let flows = flow_output(&a.flows, a.ipfix_biflow)?;
    let pipeline = a.mode == crate::args::RunMode::Pipeline || flows.is_some();
    let mut groups = match (&a.groups, pipeline) {
        (Some(g), _) => GroupSpec::parse_list(g).map_err(anyhow::Error::msg)?,
        (None, true) => {
            let n = a
                .stage_cpus
                .as_deref()
                .map(cpu_list)
                .transpose()?
                .map_or(1, |v| v.len().max(1));
            vec![GroupSpec {
                kind: GroupKind::Balance,
                members: n as u16,
                filter: None,
                snaplen: None,
            }]
        }
        (None, false) => vec![],
    };
    let ngroups = groups.len();
    for (flag, list) in [
        ("--group-filter", &a.group_filter),
        ("--group-snaplen", &a.group_snaplen),
    ] {
        for item in list {
            let (g, v) = item
                .split_once('=')
                .with_context(|| format!("bad {flag} '{item}' (expected GROUP=VALUE)"))?;
            let g: usize = g
                .trim()
                .parse()
                .with_context(|| format!("bad group number in {flag} '{item}'"))?;
            let spec = groups.get_mut(g).with_context(|| {
                format!("{flag} names group {g}, but there are {ngroups} groups")
            })?;
            if flag == "--group-filter" {
                spec.filter = Some(v.to_owned());
            } else {
                let n: u32 = v
                    .parse()
                    .with_context(|| format!("bad snap length in '{item}'"))?;
                spec.snaplen = Some(corecap_engine::limits::snaplen(n, flag)?);
            }
        }
    }
    let mut stage_cpus = match &a.stage_cpus {
        Some(s) => cpu_list(s)?,
        None => vec![],
    };
    let mut balance = a.balance.unwrap_or(BalanceArg::Flow);
    if a.auto {
        let placed = auto(a, &inputs)?;
        workers = placed.workers.len();
        cpus = placed.worker_cpus();
        if stage_cpus.is_empty() && !groups.is_empty() {
            stage_cpus = placed.stage_cpus.clone();
        }
        let queues: usize = placed.workers.iter().map(|w| w.queues.len()).sum();
        if a.balance.is_none() && queues > 1 {
            balance = BalanceArg::Queue;
        }
    }
    if groups.is_empty() && a.stage_cpus.is_some() {
        bail!("--stage-cpus needs --mode pipeline or --groups");
    }
    let ring_bytes = ring_bytes(given_ring, block_size, &inputs, workers)?;
    Ok(CaptureConfig {
        groups: std::mem::take(&mut groups),
        stage_cpus,
        flows,
        transport: match a.transport {
            crate::args::TransportArg::Mpsc => Transport::Mpsc,
            crate::args::TransportArg::Spsc => Transport::Spsc,
        },
        attachable: false,
        spare: None,
        xdp_spread: a.xdp_spread,
        inputs,
        files: a.read.clone(),
        workers,
        cpus,
        pin: !a.no_pin,
        balance: match balance {
            BalanceArg::Flow => Balance::Flow,
            BalanceArg::Queue => Balance::Queue,
            BalanceArg::Cpu => Balance::Cpu,
            BalanceArg::RoundRobin => Balance::RoundRobin,
            BalanceArg::Rollover => Balance::Rollover,
        },
        filter: filter(a)?,
        snaplen: a.snaplen,
        ring: corecap_linux::RingConfig::with_size(ring_bytes, block_size, block_timeout_ms),
        count: a.count,
        duration,
        output,
    })
}

/// `--flows`, given at most once as a file and once as an IPFIX collector.
fn flow_output(
    given: &[String],
    biflow: bool,
) -> Result<Option<corecap_engine::stage::flows::FlowOutput>> {
    use corecap_engine::sink::ipfix::{new_domain, IpfixTarget};
    let mut out = corecap_engine::stage::flows::FlowOutput::default();
    for f in given {
        if f.starts_with("ipfix") && f.contains("://") {
            if out.ipfix.is_some() {
                bail!("--flows names two IPFIX collectors; give one");
            }
            let t = IpfixTarget::parse(f).map_err(anyhow::Error::msg)?;
            out.ipfix = Some(IpfixTarget {
                biflow,
                domain: new_domain(),
                ..t
            });
        } else if f.contains("://") {
            bail!("--flows '{f}': not a file nor ipfix://HOST:PORT or ipfix+tcp://HOST:PORT");
        } else {
            if out.file.is_some() {
                bail!("--flows names two files; give one");
            }
            out.file = Some(f.into());
        }
    }
    if biflow && out.ipfix.is_none() {
        bail!("--ipfix-biflow needs --flows ipfix://HOST:PORT");
    }
    Ok((out.file.is_some() || out.ipfix.is_some()).then_some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_flow_output() {
        let o = flow_output(&["f.jsonl".into(), "ipfix+tcp://h:9".into()], true)
            .expect("valid")
            .expect("some");
        assert_eq!(o.file.as_deref(), Some(std::path::Path::new("f.jsonl")));
        let t = o.ipfix.expect("ipfix");
        assert!(t.biflow && t.domain != 0);
        assert!(flow_output(&[], false).expect("none").is_none());
        assert!(flow_output(&["a".into(), "b".into()], false).is_err());
        assert!(flow_output(&["udp://h:1".into()], false).is_err());
        assert!(flow_output(&["a".into()], true).is_err());
    }

    #[test]
    fn test_rotation() {
        let r = rotation(&["filesize:10,files:3".into(), "duration:60".into()]).expect("valid");
        assert_eq!(r.filesize, Some(10_000_000));
        assert_eq!(r.files, Some(3));
        assert_eq!(r.duration, Some(Duration::from_secs(60)));
        assert!(rotation(&["size:1".into()]).is_err());
        assert!(rotation(&["files:3".into()]).is_err());
        assert!(rotation(&["filesize:x".into()]).is_err());
    }
}
