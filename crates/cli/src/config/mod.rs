//! Resolving what was typed (`args.rs`) into what runs: the engine's `CaptureConfig` for
//! `capture`, `ServeConfig` for `serve` and `RequestConfig` for `request`. The commands in
//! `cmd/` run what these say.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use corecap_engine::capture::{Balance, CaptureConfig, Input, OutputConfig};
use corecap_engine::sink::file::{FileOptions, Format, Rotation};
use corecap_engine::stage::pipe::Transport;
use corecap_engine::steer::group::{GroupKind, GroupSpec};
use corecap_store::write::output::Backlog;

use crate::args::{
    BalanceArg, CaptureArgs, PrintArgs, RingArgs, RunMode, TransportArg, TsPrecision,
};

mod cutoff;
mod disk;
mod request;
mod serve;

pub(crate) use cutoff::*;
pub(crate) use disk::*;
pub(crate) use request::*;
pub(crate) use serve::*;

/// Parses `-b` options as dumpcap: `filesize:kB` (or a size with a suffix), `duration:S`,
/// `files:N`.
pub(crate) fn rotation(specs: &[String]) -> Result<Rotation> {
    let mut r = Rotation::default();
    for spec in specs.iter().flat_map(|s| s.split(',')) {
        let (k, n) = dumpcap_option("-b", spec)?;
        match k {
            "filesize" => r.filesize = Some(n),
            "duration" => r.duration = Some(Duration::from_secs(n)),
            "files" => r.files = Some(n as usize),
            _ => bail!(
                "unknown -b option '{k}' (use filesize:kB (or 100M, 1G), duration:S or files:N)"
            ),
        }
    }
    if r.files.is_some() && !r.active() {
        bail!("-b files:N needs filesize: or duration: as well");
    }
    Ok(r)
}

/// Rotation from `-b` and tcpdump's `-C` (millions of bytes), `-G` (seconds) and `-W`
/// (files); also the number of files after which tcpdump's `-G N -W N` stops.
fn capture_rotation(a: &CaptureArgs) -> Result<(Rotation, Option<u64>)> {
    let mut r = rotation(&a.rotate)?;
    if let Some(c) = a.file_size_mb {
        if r.filesize.is_some() {
            bail!("give the file size once: -C or -b filesize:");
        }
        if c == 0 {
            bail!("-C must be greater than 0");
        }
        r.filesize = Some(c.checked_mul(1_000_000).context("-C is too large")?);
    }
    if let Some(g) = a.rotate_seconds {
        if r.duration.is_some() {
            bail!("give the rotation time once: -G or -b duration:");
        }
        if g == 0 {
            bail!("-G must be greater than 0");
        }
        r.duration = Some(Duration::from_secs(g));
    }
    let mut stop_files = None;
    match a.file_count {
        None => {}
        Some(0) => bail!("-W must be greater than 0"),
        Some(_) if a.file_size_mb.is_none() && a.rotate_seconds.is_none() => {
            bail!("-W goes with -C or -G")
        }
        Some(_) if r.files.is_some() => bail!("give the number of files once: -W or -b files:"),
        // tcpdump: -G with -W (and no -C) writes N files and exits; with -C, -W keeps a
        // ring of the newest N files.
        Some(n) if a.file_size_mb.is_none() => stop_files = Some(n),
        Some(n) => r.files = Some(usize::try_from(n).context("-W is too large")?),
    }
    Ok((r, stop_files))
}

/// When a capture stops by itself: dumpcap's `-a` keys, `-c`, `--duration`, and tcpdump's
/// `-G -W`. The first reached stops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AutoStop {
    pub(crate) duration: Option<Duration>,
    /// Bytes written to one file.
    pub(crate) filesize: Option<u64>,
    /// Files written.
    pub(crate) files: Option<u64>,
    pub(crate) packets: Option<u64>,
}

/// Parses `-a` options as dumpcap: `duration:S`, `filesize:kB` (1000 bytes, or a size
/// with a suffix), `files:N`, `packets:N`.
pub(crate) fn autostop(specs: &[String]) -> Result<AutoStop> {
    let mut s = AutoStop::default();
    for spec in specs.iter().flat_map(|s| s.split(',')) {
        let (k, n) = dumpcap_option("-a", spec)?;
        match k {
            "duration" => s.duration = Some(Duration::from_secs(n)),
            "filesize" => s.filesize = Some(n),
            "files" => s.files = Some(n),
            "packets" => s.packets = Some(n),
            _ => {
                bail!("unknown -a option '{k}' (use duration:S, filesize:kB, files:N or packets:N)")
            }
        }
    }
    Ok(s)
}

/// One `KEY:VALUE` of dumpcap's `-b` or `-a` (`flag`): the key, and the value, a whole
/// number above 0. A `filesize` counts kB (1000 bytes) as dumpcap does, or is a size with
/// a suffix (K, M, G, T: powers of 1024, as -B and --retain take them).
fn dumpcap_option<'a>(flag: &str, spec: &'a str) -> Result<(&'a str, u64)> {
    let (k, v) = spec
        .split_once(':')
        .with_context(|| format!("bad {flag} option '{spec}' (expected KEY:VALUE)"))?;
    let n: u64 = if k == "filesize" && v.ends_with(|c: char| c.is_ascii_alphabetic()) {
        corecap_engine::limits::size(v, &format!("{flag} filesize"))?
    } else {
        let n: u64 = v
            .parse()
            .with_context(|| format!("bad number in {flag} option '{spec}'"))?;
        if k == "filesize" {
            n.checked_mul(1000)
                .with_context(|| format!("{flag} filesize is too large"))?
        } else {
            n
        }
    };
    if n == 0 {
        bail!("{flag} {k} must be greater than 0");
    }
    Ok((k, n))
}

/// The smaller of two optional limits.
fn first<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The interfaces of `-i`: names as typed, `N` for the Nth interface `-D` lists, `any`
/// for every interface that is up.
///
/// `any` opens each up interface as an input of its own rather than one socket bound to
/// ifindex 0 (the kernel's "any", which tcpdump reads as cooked SLL): each interface then
/// keeps its own ring, fanout group and counters, so its drops are counted against it
/// and the summary still balances per interface; its packets keep their Ethernet header
/// and their interface in the pcapng file. Interfaces whose link type corecap cannot
/// write (not Ethernet or loopback) are left out, and said so.
pub(crate) fn interfaces(typed: &[String], quiet: bool) -> Result<Vec<Input>> {
    let mut out: Vec<Input> = Vec::new();
    for t in typed {
        if t == "any" {
            let mut skipped = Vec::new();
            for name in interface_list()? {
                if !is_up(&name) {
                    continue;
                }
                if corecap_linux::netdev::linktype(&name).is_err() {
                    skipped.push(name);
                    continue;
                }
                if !out
                    .iter()
                    .any(|i| i.iface == name && i.queue.is_none() && !i.xdp)
                {
                    out.push(Input::parse(&name).map_err(anyhow::Error::msg)?);
                }
            }
            if !skipped.is_empty() && !quiet {
                eprintln!(
                    "corecap: -i any leaves out {} (not Ethernet)",
                    skipped.join(", ")
                );
            }
            if out.is_empty() {
                bail!("-i any: no interface is up");
            }
            continue;
        }
        let (prefix, rest) = match t.strip_prefix("xdp:") {
            Some(r) => ("xdp:", r),
            None => ("", t.as_str()),
        };
        let (name, queue) = match rest.rsplit_once('@') {
            Some((n, q)) => (n, Some(q)),
            None => (rest, None),
        };
        let resolved = if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
            let list = interface_list()?;
            let n: usize = name.parse().unwrap_or(0);
            let Some(iface) = n.checked_sub(1).and_then(|i| list.get(i)) else {
                bail!(
                    "-i {t}: there are {} interfaces (corecap capture -D numbers them from 1)",
                    list.len()
                );
            };
            match queue {
                Some(q) => format!("{prefix}{iface}@{q}"),
                None => format!("{prefix}{iface}"),
            }
        } else {
            t.clone()
        };
        out.push(Input::parse(&resolved).map_err(anyhow::Error::msg)?);
    }
    Ok(out)
}

/// The interfaces as `capture -D` lists and numbers them: by name.
pub(crate) fn interface_list() -> Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir("/sys/class/net")
        .context("reading /sys/class/net")?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    names.sort();
    Ok(names)
}

/// Whether an interface is up (IFF_UP in its flags).
fn is_up(name: &str) -> bool {
    std::fs::read_to_string(format!("/sys/class/net/{name}/flags"))
        .ok()
        .and_then(|f| u32::from_str_radix(f.trim().trim_start_matches("0x"), 16).ok())
        .is_some_and(|f| f & 1 != 0)
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
    let bytes = r.buffer.as_deref().map(buffer_bytes).transpose()?;
    if r.block_size < 4 || !r.block_size.is_multiple_of(4) {
        bail!("--block-size must be a multiple of 4 KiB");
    }
    let block = r
        .block_size
        .checked_mul(1024)
        .context("--block-size is too large")?;
    Ok((bytes, block, r.block_timeout.max(1)))
}

/// `-B`: KiB as tcpdump counts them (`-B 4096` is 4 MiB), or a size with a suffix (64M,
/// 1G); at least 1 MiB.
fn buffer_bytes(s: &str) -> Result<u64> {
    let bytes = if s.trim().ends_with(|c: char| c.is_ascii_alphabetic()) {
        corecap_engine::limits::size(s, "-B")?
    } else {
        let kib: u64 = s
            .trim()
            .parse()
            .with_context(|| format!("-B {s}: expected KiB (65536) or a size (64M, 1G)"))?;
        kib.checked_mul(1024).context("-B is too large")?
    };
    if bytes < 1 << 20 {
        bail!("-B {s} is less than 1 MiB (-B counts KiB: 1024 or more, or 1M)");
    }
    Ok(bytes)
}

/// Line rate assumed for a link that reports no speed, in Mbit/s.
const UNKNOWN_SPEED_MBPS: u64 = 10_000;

/// Rings per worker: `-B`, or sized from the links like netsniff-ng sizes its ring: 100 ms
/// of the fastest input's whole line rate in each worker's ring (one worker may get all of
/// it: a few flows, or a hash that puts the heavy ones together), at least 64 MiB and at
/// most 1 GiB, and all rings together within a quarter of the available memory. A ring larger than the
/// available memory is refused before the kernel is asked for it; one that holds less than
/// 50 ms of line rate gets a warning.
pub(crate) fn ring_bytes(
    given: Option<u64>,
    block: u32,
    inputs: &[Input],
    workers: usize,
) -> Result<u64> {
    let rings = ring_count(inputs, workers);
    let speed = line_rate_mbps(inputs).unwrap_or(UNKNOWN_SPEED_MBPS);
    let per_worker = (rings / inputs.len().max(1) as u64).max(1);
    let line_bytes_per_s = speed * 1_000_000 / 8;
    let avail = corecap_linux::memory::available();
    let block = u64::from(block);
    let bytes = match given {
        Some(b) => b,
        None => {
            let want = (line_bytes_per_s / 10).clamp(64 << 20, 1 << 30);
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
    let ms = bytes as f64 / line_bytes_per_s as f64 * 1e3;
    if ms < 50.0 && !inputs.is_empty() {
        eprintln!(
            "corecap: warning: a ring of {} MiB per worker holds {ms:.0} ms of {speed} Mbit/s \
             if one of the {per_worker} worker{} gets all of it: a worker that stalls longer \
             loses packets (raise -B)",
            bytes >> 20,
            if per_worker == 1 { "" } else { "s" }
        );
    }
    Ok(bytes)
}

/// The rings a capture of `inputs` opens with `workers` (0: one per RX queue): one a worker
/// per input, one for an input given with its queue; at least 1.
fn ring_count(inputs: &[Input], workers: usize) -> u64 {
    let per_input = |i: &Input| -> u64 {
        match (i.queue, workers) {
            (Some(_), _) => 1,
            (None, 0) => u64::from(corecap_linux::netdev::rx_queues(&i.iface).unwrap_or(1)),
            (None, w) => w as u64,
        }
    };
    inputs.iter().map(per_input).sum::<u64>().max(1)
}

/// Refuses session tables that together take more than a quarter of the available memory:
/// one per file being written (one for a merged file; a worker's or a group member's
/// each), made at start (`--sessions-per-file`).
fn check_session_tables(o: &OutputConfig, tables: u64) -> Result<()> {
    let Some(s) = o.file.sessions else {
        return Ok(());
    };
    let tables = if o.merge { 1 } else { tables.max(1) };
    disk::session_tables_fit(&s, tables)
}

/// Seconds of line rate that `--disk-backlog` holds by default.
const BACKLOG_SECONDS: f64 = 1.0;

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
fn seal(a: &CaptureArgs) -> Result<Option<corecap_store::sealed::SealConfig>> {
    use corecap_store::sealed::SealConfig;
    let (cipher, key) = match (&a.encrypt, &a.key_file) {
        (None, None) => return Ok(None),
        (Some(_), None) => {
            bail!("--encrypt needs --key-file FILE (corecap keygen -o FILE makes one)")
        }
        (None, Some(_)) => bail!("--key-file is for --encrypt aes|seed"),
        (Some(c), Some(k)) => (c, k),
    };
    Ok(Some(SealConfig {
        kek: key_file(key)?,
        cipher: cipher.name().parse().map_err(anyhow::Error::msg)?,
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
    let printing = capture_prints(a);
    check_print_flags(
        &a.print,
        printing,
        "-w, --count-only, --groups, --mode pipeline or --flows",
    )?;
    let inputs = interfaces(&a.interfaces, a.quiet && !printing)?;
    let cpus = optional_cpu_list(a.cpus.as_deref())?;
    let workers = a.workers.unwrap_or(0);
    if workers > 1024 {
        bail!("--workers {workers} is more than 1024");
    }
    corecap_engine::limits::snaplen(a.snaplen, "-s")?;
    let (given_ring, block_size, block_timeout_ms) = ring_geometry(&a.ring)?;
    let mut output = output(a)?;
    if let Some(o) = output.as_mut() {
        o.file.backlog = Backlog::new(disk_backlog(a.disk.disk_backlog.as_deref(), &inputs)?);
    }
    let stop = capture_autostop(a)?;
    let flows = flow_output(&a.flows, a.ipfix_biflow)?;
    let pipeline = a.mode == RunMode::Pipeline || flows.is_some();
    let groups = groups(a, pipeline)?;
    if let Some(o) = output.as_mut().filter(|_| !groups.is_empty() && !a.merge) {
        // Groups (and pipeline mode) write a file per member; only an explicit --merge is
        // refused with them.
        o.merge = false;
    }
    let mut place = Placement {
        workers,
        cpus,
        stage_cpus: optional_cpu_list(a.stage_cpus.as_deref())?,
        balance: a.balance.unwrap_or(BalanceArg::Flow),
    };
    if a.auto {
        place.follow(&auto(a, &inputs)?, !groups.is_empty(), a.balance.is_none());
    }
    if groups.is_empty() && a.stage_cpus.is_some() {
        bail!("--stage-cpus needs --mode pipeline or --groups");
    }
    let ring_bytes = ring_bytes(given_ring, block_size, &inputs, place.workers)?;
    if let Some(o) = &output {
        let members: u64 = groups.iter().map(|g| u64::from(g.members)).sum();
        let writers = match a.read.is_empty() {
            true => ring_count(&inputs, place.workers),
            false => place.workers.max(1) as u64,
        };
        check_session_tables(o, writers.max(members))?;
    }
    Ok(CaptureConfig {
        inputs,
        files: a.read.clone(),
        workers: place.workers,
        cpus: place.cpus,
        pin: !a.no_pin,
        balance: balance(place.balance),
        filter: filter(a)?,
        snaplen: a.snaplen,
        ring: corecap_linux::RingConfig::with_size(ring_bytes, block_size, block_timeout_ms),
        count: stop.packets,
        duration: stop.duration,
        promisc: !a.no_promisc,
        output,
        groups,
        stage_cpus: place.stage_cpus,
        flows,
        transport: transport(a.transport),
        xdp_spread: a.xdp_spread,
        ..CaptureConfig::default()
    })
}

/// What stops a capture: `-a`, `-c`, `--duration`, and `-G N -W N`.
pub(crate) fn capture_autostop(a: &CaptureArgs) -> Result<AutoStop> {
    let mut s = autostop(&a.autostop)?;
    let duration = a
        .duration
        .map(|d| corecap_engine::limits::seconds(d, "--duration"))
        .transpose()?;
    s.duration = first(s.duration, duration);
    s.packets = first(s.packets, a.count);
    s.files = first(s.files, capture_rotation(a)?.1);
    if (s.filesize.is_some() || s.files.is_some()) && a.write.is_none() {
        bail!("-a filesize: and -a files: (and -G with -W) count what -w writes: give -w FILE");
    }
    Ok(s)
}

/// What `-a filesize:` and `-a files:` (and tcpdump's `-G` with `-W`) make of the file
/// sink's rotation, as dumpcap: `filesize` stops the capture once the file holds that
/// much, or with rotation starts the next file there; `files` stops it at the packet that
/// would begin one file more than that. One file in all: refused with --per-worker and
/// groups, whose files would each stop on their own.
fn apply_autostop(a: &CaptureArgs, rotation: &mut Rotation) -> Result<()> {
    let stop = capture_autostop(a)?;
    if stop.filesize.is_none() && stop.files.is_none() {
        return Ok(());
    }
    if a.per_worker || a.groups.is_some() || !a.flows.is_empty() || a.mode == RunMode::Pipeline {
        bail!(
            "-a filesize: and -a files: (and -G with -W) count the files of one -w output: \
             not with --per-worker, --groups or --mode pipeline"
        );
    }
    if let Some(b) = stop.filesize {
        if rotation.active() {
            rotation.filesize = Some(rotation.filesize.map_or(b, |f| f.min(b)));
        } else {
            rotation.stop_at_bytes = Some(b);
        }
    }
    if let Some(n) = stop.files {
        if !rotation.active() {
            bail!("-a files:{n} counts the files of a rotation: give -b filesize:, -b duration:, -C or -G");
        }
        rotation.stop_after_files = Some(n);
    }
    Ok(())
}

/// Where a capture's workers and stage threads run, and how its packets are spread.
struct Placement {
    workers: usize,
    cpus: Vec<u32>,
    stage_cpus: Vec<u32>,
    balance: BalanceArg,
}

impl Placement {
    /// Takes what `--auto`'s plan says: its workers and their CPUs, its stage CPUs when
    /// there are groups and none were given, and queue balance over several RX queues when
    /// no balance was given.
    fn follow(&mut self, plan: &corecap_tune::Plan, groups: bool, balance_default: bool) {
        self.workers = plan.workers.len();
        self.cpus = plan.worker_cpus();
        if self.stage_cpus.is_empty() && groups {
            self.stage_cpus = plan.stage_cpus.clone();
        }
        let queues: usize = plan.workers.iter().map(|w| w.queues.len()).sum();
        if balance_default && queues > 1 {
            self.balance = BalanceArg::Queue;
        }
    }
}

/// Whether `capture` prints a line per packet: without -w and --count-only, and without
/// consumer groups (`--groups`, `--mode pipeline`, `--flows`), whose members' work is the
/// output and whose packets are not merged into one stream.
pub(crate) fn capture_prints(a: &CaptureArgs) -> bool {
    a.write.is_none()
        && !a.count_only
        && !a.list
        && a.groups.is_none()
        && a.mode != RunMode::Pipeline
        && a.flows.is_empty()
}

/// What each printed line shows, by tcpdump's flags; `quick` is tcpdump's -q.
pub(crate) fn print_options(p: &PrintArgs, quick: bool) -> crate::print::Options {
    crate::print::Options {
        stamp: crate::print::Stamp::from_count(p.time),
        link: p.link_header,
        quick,
        hex: p.hex,
        hex_ascii: p.hex_ascii,
        verbose: p.verbose,
    }
}

/// Refuses the flags that only shape printed lines when no line is printed (`instead`
/// names what stops the printing).
pub(crate) fn check_print_flags(p: &PrintArgs, printing: bool, instead: &str) -> Result<()> {
    let given = p.given();
    if !printing && !given.is_empty() {
        bail!(
            "no packet is printed with {instead}, so {} (how packets print) cannot apply",
            given.join(", ")
        );
    }
    Ok(())
}

/// The output of a capture that prints: its packets merged in time order, as pcapng, into
/// the printer's pipe at `path`, handed over as they come.
pub(crate) fn print_output(path: PathBuf) -> OutputConfig {
    OutputConfig {
        path,
        merge: true,
        file: FileOptions {
            format: Format::Pcapng,
            rotation: Rotation::default(),
            seal: None,
            direct: false,
            retention: None,
            index: false,
            sessions: None,
            sessions_log: None,
            compress: None,
            owner: None,
            flush: Some(Duration::ZERO),
            // A pipe to the printer, which reads as fast as it prints: the least backlog.
            backlog: Default::default(),
        },
        cutoff: None,
    }
}

/// The output files of `-w`, or none; the output options refused without `-w`.
fn output(a: &CaptureArgs) -> Result<Option<OutputConfig>> {
    let Some(path) = &a.write else {
        refuse_output_flags(a)?;
        return Ok(None);
    };
    let (mut rotation, _) = capture_rotation(a)?;
    apply_autostop(a, &mut rotation)?;
    let rotating = rotation.active();
    let format = match (a.pcap, a.time_stamp_precision) {
        (false, _) => Format::Pcapng,
        // Microseconds by default, as tcpdump writes pcap.
        (true, None | Some(TsPrecision::Micro)) => Format::PcapMicros,
        (true, Some(TsPrecision::Nano)) => Format::Pcap,
    };
    let seal = seal(a)?;
    let sessions_log = sessions_log(&a.disk)?;
    let compress = compress(&a.disk)?;
    let cutoff = cutoff(&a.cutoff)?;
    let o = OutputConfig {
        path: path.clone(),
        // One file in time order, as dumpcap writes, unless --per-worker (groups write a
        // file per member: see `capture`).
        merge: a.merge || !a.per_worker,
        file: FileOptions {
            seal,
            owner: a
                .user
                .as_deref()
                .map(corecap_linux::privilege::lookup_user)
                .transpose()?,
            retention: {
                let r = retention(&a.disk)?;
                if r.is_some() && !rotating {
                    bail!(
                        "--retain, --retain-age and --min-free need rotation (-b filesize:kB or -b duration:S)"
                    );
                }
                // A budget under one file, given as a bare number (bytes), deletes every
                // file as the next begins: most likely a size without its unit.
                let given = a.disk.retain.as_deref().unwrap_or_default();
                let bare = given.trim().ends_with(|c: char| c.is_ascii_digit());
                let budget = r.as_ref().map_or(u64::MAX, |r| r.budget());
                if let Some(size) = rotation.filesize.filter(|&f| bare && budget < f) {
                    bail!(
                        "--retain {} is {budget} bytes, less than one file ({size} bytes, by -C or \
                         -b filesize): each file would be deleted as the next began; give the \
                         budget with its unit (--retain 500M, 20G)",
                        given
                    );
                }
                r
            },
            // Set from the inputs' line rate by `capture`.
            backlog: Default::default(),
            ..file_options(&a.disk, format, rotation, sessions_log, compress)?
        },
        cutoff,
    };
    if o.path.as_os_str() == "-" && rotating {
        bail!("-b cannot rotate standard output");
    }
    let mut o = o;
    if o.file.compress.is_some() && !corecap_store::write::disk::is_fifo(&o.path) {
        o.path = corecap_store::names::compressed_path(&o.path);
    }
    if !corecap_store::write::disk::is_fifo(&o.path) && o.path.as_os_str() != "-" {
        if let Some(why) = corecap_index::capture_name_error(&o.path) {
            bail!("-w {why}");
        }
    }
    Ok(Some(o))
}

/// Refuses the output options given without `-w`: they shape files that are not written.
fn refuse_output_flags(a: &CaptureArgs) -> Result<()> {
    if a.merge
        || a.per_worker
        || a.pcap
        || a.time_stamp_precision.is_some()
        || !a.rotate.is_empty()
        || a.file_size_mb.is_some()
        || a.rotate_seconds.is_some()
        || a.encrypt.is_some()
        || a.disk.retain.is_some()
        || a.disk.disk_backlog.is_some()
        || a.disk.compress.is_some()
    {
        bail!("--merge, --per-worker, -P, --time-stamp-precision, -b, -C, -G, --retain, --disk-backlog, --compress and --encrypt need -w FILE");
    }
    if cutoff_given(&a.cutoff) {
        bail!("--flow-cutoff and --cutoff need -w FILE (they cut what is recorded)");
    }
    Ok(())
}

/// The consumer groups: `--groups`, or in pipeline mode one balance group of a member per
/// stage CPU; then each group's `--group-filter` and `--group-snaplen`.
fn groups(a: &CaptureArgs, pipeline: bool) -> Result<Vec<GroupSpec>> {
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
    Ok(groups)
}

fn transport(t: TransportArg) -> Transport {
    match t {
        TransportArg::Mpsc => Transport::Mpsc,
        TransportArg::Spsc => Transport::Spsc,
    }
}

fn balance(b: BalanceArg) -> Balance {
    match b {
        BalanceArg::Flow => Balance::Flow,
        BalanceArg::Queue => Balance::Queue,
        BalanceArg::Cpu => Balance::Cpu,
        BalanceArg::RoundRobin => Balance::RoundRobin,
        BalanceArg::Rollover => Balance::Rollover,
    }
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
        assert_eq!(r.filesize, Some(10_000), "dumpcap's kB");
        assert_eq!(r.files, Some(3));
        assert_eq!(r.duration, Some(Duration::from_secs(60)));
        let r = rotation(&["filesize:100M".into()]).expect("a suffix");
        assert_eq!(r.filesize, Some(100 << 20));
        assert!(rotation(&["size:1".into()]).is_err());
        assert!(rotation(&["files:3".into()]).is_err());
        assert!(rotation(&["filesize:x".into()]).is_err());
    }

    /// `corecap capture ARGS` as clap parses it.
    fn capture_args(args: &[&str]) -> CaptureArgs {
        use clap::Parser;
        let cli =
            crate::args::Cli::try_parse_from(["corecap", "capture"].iter().chain(args).copied())
                .expect("parses");
        match cli.cmd {
            crate::args::Cmd::Capture(a) => *a,
            _ => unreachable!("a capture"),
        }
    }

    #[test]
    fn issue39_tcpdump_rotation_flags() {
        let a = capture_args(&["-w", "x.pcapng", "-C", "2", "-W", "3"]);
        let (r, stop) = capture_rotation(&a).expect("valid");
        assert_eq!(r.filesize, Some(2_000_000), "-C counts millions of bytes");
        assert_eq!(r.files, Some(3), "-W with -C keeps a ring of files");
        assert_eq!(stop, None);
        let a = capture_args(&["-w", "x.pcapng", "-G", "60"]);
        let (r, _) = capture_rotation(&a).expect("valid");
        assert_eq!(r.duration, Some(Duration::from_secs(60)));
        assert_eq!(r.filesize, None);
        let a = capture_args(&["-w", "x.pcapng", "-C", "1", "-G", "5", "-W", "2"]);
        let (r, _) = capture_rotation(&a).expect("valid");
        assert_eq!(
            (r.filesize, r.duration, r.files),
            (Some(1_000_000), Some(Duration::from_secs(5)), Some(2))
        );
        for bad in [
            &["-w", "x.pcapng", "-W", "3"][..],
            &["-w", "x.pcapng", "-C", "0"],
            &["-w", "x.pcapng", "-C", "1", "-b", "filesize:10"],
            &["-w", "x.pcapng", "-C", "1", "-W", "2", "-b", "files:3"],
        ] {
            assert!(capture_rotation(&capture_args(bad)).is_err(), "{bad:?}");
        }
        // -C and -G write files: they need -w, and say so.
        assert!(output(&capture_args(&["-i", "lo", "-C", "1"])).is_err());
    }

    #[test]
    fn issue39_autostop() {
        let s = autostop(&["duration:30,packets:100".into()]).expect("valid");
        assert_eq!(s.duration, Some(Duration::from_secs(30)));
        assert_eq!(s.packets, Some(100));
        let s = autostop(&["filesize:10".into(), "files:4".into()]).expect("valid");
        assert_eq!(
            (s.filesize, s.files),
            (Some(10_000), Some(4)),
            "dumpcap's kB"
        );
        assert!(autostop(&["packets:0".into()]).is_err());
        assert!(autostop(&["bytes:1".into()]).is_err());
        assert!(autostop(&["packets".into()]).is_err());
        // -a packets: is -c, -a duration: is --duration; the first reached stops.
        let a = capture_args(&["-i", "lo", "-a", "packets:100", "-c", "500"]);
        assert_eq!(capture_autostop(&a).expect("valid").packets, Some(100));
        let a = capture_args(&["-i", "lo", "-a", "duration:90", "--duration", "60"]);
        assert_eq!(
            capture_autostop(&a).expect("valid").duration,
            Some(Duration::from_secs(60))
        );
        // What -w writes: without -w there is nothing to count.
        let a = capture_args(&["-i", "lo", "-a", "files:2"]);
        assert!(capture_autostop(&a).is_err());
        // As dumpcap: filesize stops a file without rotation, or rotates with it; files
        // counts the files of a rotation (and -G with -W is tcpdump's same stop).
        let rot = |extra: &[&str]| {
            let args: Vec<&str> = ["-i", "lo", "-w", "x.pcapng"]
                .iter()
                .chain(extra)
                .copied()
                .collect();
            let a = capture_args(&args);
            let (mut r, _) = capture_rotation(&a)?;
            apply_autostop(&a, &mut r).map(|()| r)
        };
        let r = rot(&["-a", "filesize:100"]).expect("valid");
        assert_eq!((r.stop_at_bytes, r.filesize), (Some(100_000), None));
        let r = rot(&["-b", "filesize:500", "-a", "filesize:100"]).expect("valid");
        assert_eq!((r.stop_at_bytes, r.filesize), (None, Some(100_000)));
        let r = rot(&["-b", "duration:5", "-a", "files:3"]).expect("valid");
        assert_eq!(r.stop_after_files, Some(3));
        let r = rot(&["-G", "5", "-W", "2"]).expect("valid");
        assert_eq!(r.stop_after_files, Some(2));
        assert!(rot(&["-a", "files:3"]).is_err());
        assert!(rot(&["--per-worker", "-a", "filesize:9"]).is_err());
    }

    #[test]
    fn issue39_buffer_in_kib() {
        let ring = |args: &[&str]| ring_geometry(&capture_args(args).ring);
        assert_eq!(
            ring(&["-B", "4096"]).expect("valid").0,
            Some(4 << 20),
            "KiB"
        );
        assert_eq!(ring(&["-B", "64M"]).expect("valid").0, Some(64 << 20));
        assert_eq!(ring(&["-B", "1G"]).expect("valid").0, Some(1 << 30));
        assert_eq!(ring(&[]).expect("valid").0, None);
        assert!(ring(&["-B", "512"]).is_err(), "under 1 MiB");
        assert!(ring(&["-B", "x"]).is_err());
        assert!(ring(&["-B", "99999999999999999"]).is_err());
    }

    #[test]
    fn issue39_pcap_flags() {
        let fmt = |args: &[&str]| {
            output(&capture_args(args))
                .expect("valid")
                .map(|o| o.file.format)
        };
        assert_eq!(fmt(&["-w", "x.pcap", "-P"]), Some(Format::PcapMicros));
        assert_eq!(fmt(&["-w", "x.pcap", "--pcap"]), Some(Format::PcapMicros));
        assert_eq!(
            fmt(&["-w", "x.pcap", "-P", "--time-stamp-precision", "nano"]),
            Some(Format::Pcap)
        );
        assert_eq!(
            fmt(&["-w", "x.pcap", "-P", "--time-stamp-precision", "micro"]),
            Some(Format::PcapMicros)
        );
        assert_eq!(fmt(&["-w", "x.pcapng"]), Some(Format::Pcapng));
        assert!(output(&capture_args(&["-P"])).is_err(), "-P needs -w");
    }

    #[test]
    fn issue39_interface_by_number() {
        let list = interface_list().expect("reads /sys/class/net");
        for (n, name) in list.iter().enumerate() {
            let got = interfaces(&[(n + 1).to_string()], true).expect("in range");
            assert_eq!(got[0].iface, *name, "-i {} is the {}th of -D", n + 1, n + 1);
        }
        if let Some(second) = list.get(1) {
            let got = interfaces(&["2@1".into()], true).expect("in range");
            assert_eq!(
                (got[0].iface.as_str(), got[0].queue),
                (second.as_str(), Some(1))
            );
        }
        assert!(interfaces(&["0".into()], true).is_err(), "numbered from 1");
        assert!(interfaces(&[(list.len() + 1).to_string()], true).is_err());
        // Several -i, and names as typed.
        let got = interfaces(&["lo".into(), "eth9@2".into()], true).expect("names");
        assert_eq!(got.len(), 2);
        assert_eq!((got[1].iface.as_str(), got[1].queue), ("eth9", Some(2)));
    }

    #[test]
    fn issue39_promiscuous_by_default() {
        let c = |args: &[&str]| capture(&capture_args(args)).expect("valid");
        assert!(
            c(&["-i", "lo", "-B", "1M"]).promisc,
            "promiscuous, as tcpdump"
        );
        assert!(!c(&["-i", "lo", "-B", "1M", "-p"]).promisc, "-p: not");
        assert_eq!(
            c(&["-i", "lo", "-B", "4096"]).ring.block_nr,
            16,
            "4 MiB of 256 KiB"
        );
    }

    #[test]
    fn test_size() {
        assert_eq!(size("500M").expect("ok"), 500 << 20);
        assert_eq!(size("2g").expect("ok"), 2 << 30);
        assert_eq!(size("1234").expect("ok"), 1234);
        assert!(size("x").is_err());
        assert!(size("99999999999T").is_err());
    }

    #[test]
    fn test_base_capture() {
        let ring = corecap_linux::RingConfig::with_size(8 << 20, 1 << 20, 5);
        let c = base_capture("cap0", 2, &[1], &[0], ring).expect("valid");
        assert_eq!(c.inputs[0].iface, "cap0");
        assert!(c.attachable && c.groups.is_empty() && c.output.is_none());
        assert_eq!((c.workers, c.cpus, c.stage_cpus), (2, vec![1], vec![0]));
        assert_eq!(c.ring, ring);
        assert!(base_capture("cap0@1", 0, &[], &[], ring).is_err());
        assert!(base_capture("xdp:cap0", 0, &[], &[], ring).is_err());
    }
}
