//! `corecap bench`: the papers' tables on this machine, with the other tools in the same
//! run. It drives the lab, the generator and each capture tool as child processes, one at
//! a time, and measures each tool's CPU from its rusage.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use corecap_lab::bench::bisect::loss_free_rate;
use corecap_lab::bench::peer::{self, PeerKind};
use corecap_lab::bench::report::{self, GenMax, Header, LossFreeRow, PlacementRow, Report};
use corecap_lab::bench::Sample;
use corecap_lab::lab::{self, LabConfig};
use corecap_linux::affinity::children_cpu_seconds;

use crate::args::{BenchArgs, BenchPart, BenchTool, EngineArg};

/// The lab of one experiment, removed on drop.
struct BenchLab(String);

impl BenchLab {
    fn up(netns: &str, queues: u32) -> Result<Self> {
        if lab::exists(netns) {
            lab::down(netns)?;
        }
        lab::up(&LabConfig {
            netns: netns.into(),
            queues,
            threaded_napi_cpu: None,
            rps_cpus: None,
        })?;
        Ok(Self(netns.into()))
    }

    fn rx_packets(&self) -> Result<u64> {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.0,
                "cat",
                "/sys/class/net/cap0/statistics/rx_packets",
            ])
            .output()
            .context("reading cap0 counters")?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .context("parsing cap0 rx_packets")
    }
}

impl Drop for BenchLab {
    fn drop(&mut self) {
        let _ = lab::down(&self.0);
    }
}

/// Packet sockets in `netns` bound to `iface` and running: the rows of its
/// /proc/net/packet (`sk RefCnt Type Proto Iface R Rmem User Inode`) with the interface's
/// index and R = 1.
fn bound_sockets(netns: &str, iface: &str) -> usize {
    let Ok(out) = Command::new("ip")
        .args(["netns", "exec", netns, "sh", "-c"])
        .arg(format!(
            "cat /sys/class/net/{iface}/ifindex /proc/net/packet"
        ))
        .output()
    else {
        return 0;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let Some(ifindex) = lines.next().map(str::trim) else {
        return 0;
    };
    lines
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() >= 6 && f[4] == ifindex && f[5] == "1"
        })
        .count()
}

/// The peer that `--tools` names; None for corecap itself.
fn peer(t: BenchTool) -> Option<PeerKind> {
    match t {
        BenchTool::Corecap | BenchTool::CorecapWrite => None,
        BenchTool::Tcpdump => Some(PeerKind::Tcpdump),
        BenchTool::Dumpcap => Some(PeerKind::Dumpcap),
        BenchTool::NetsniffNg => Some(PeerKind::NetsniffNg),
    }
}

/// How to run one capture tool.
#[derive(Clone, Debug)]
struct Tool {
    name: String,
    peer: Option<PeerKind>,
    /// Extra corecap capture arguments.
    extra: Vec<String>,
}

struct Runner {
    exe: PathBuf,
    scratch: PathBuf,
    packets: u64,
    engine: EngineArg,
}

impl Runner {
    fn command(&self, tool: &Tool, netns: &str) -> Command {
        let out = |f: &str| self.scratch.join(f).to_string_lossy().into_owned();
        match tool.peer {
            None => {
                let mut c = Command::new(&self.exe);
                c.args([
                    "capture",
                    "--netns",
                    netns,
                    "-i",
                    "cap0",
                    "--json",
                    "--stats-interval",
                    "0",
                ]);
                c.args(&tool.extra);
                if tool.name == "corecap-write" {
                    c.args(["-w", &out("corecap.pcapng")]);
                } else {
                    // Counting only, no packet printed.
                    c.arg("--count-only");
                }
                c
            }
            Some(kind) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", netns, kind.program()]);
                match kind {
                    // Every tool runs with its default buffer: what a user gets.
                    PeerKind::Tcpdump => c.args(["-i", "cap0", "-n", "-w", &out("tcpdump.pcap")]),
                    PeerKind::Dumpcap => c.args(["-i", "cap0", "-q", "-w", &out("dumpcap.pcapng")]),
                    PeerKind::NetsniffNg => {
                        c.args(["--in", "cap0", "--out", &out("netsniff.pcap"), "--silent"])
                    }
                };
                c
            }
        }
    }

    /// Waits until the tool has bound one more packet socket to cap0 than `before` (its
    /// ring is set up before the bind), so traffic never meets a tool still starting: a
    /// slow start (netsniff-ng's large default ring) is never measured as loss.
    fn wait_ready(
        &self,
        child: &mut Child,
        err_path: &Path,
        netns: &str,
        before: usize,
    ) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = child.try_wait()? {
                let text = std::fs::read_to_string(err_path).unwrap_or_default();
                bail!(
                    "capture tool exited before it was ready ({st}): {}",
                    text.trim()
                );
            }
            if bound_sockets(netns, "cap0") > before {
                std::thread::sleep(Duration::from_millis(200));
                return Ok(());
            }
            if Instant::now() > deadline {
                let text = std::fs::read_to_string(err_path).unwrap_or_default();
                bail!("the capture tool bound no socket in 60 s: {}", text.trim());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends `packets` frames of `size` at `rate` (None: maximum) from `threads` threads
    /// pinned from CPU 0, returning (sent, achieved pps).
    fn gen(&self, netns: &str, size: u16, rate: Option<f64>, threads: usize) -> Result<(u64, f64)> {
        let mut c = Command::new(&self.exe);
        c.args([
            "gen",
            "--netns",
            netns,
            "-i",
            "gen0",
            "--json",
            "--flows",
            "4096",
            "--engine",
            self.engine.name(),
        ])
        .args([
            "--count",
            &self.packets.to_string(),
            "--size",
            &size.to_string(),
        ])
        .args([
            "--threads",
            &threads.to_string(),
            "--cpus",
            if threads > 1 { "0-1" } else { "0" },
        ]);
        if let Some(r) = rate {
            c.args(["--rate", &(r.max(1.0) as u64).to_string()]);
        }
        let out = c.output().context("running the generator")?;
        if !out.status.success() {
            bail!(
                "generator failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).context("generator report")?;
        Ok((
            v["sent"].as_u64().unwrap_or(0),
            v["pps"].as_f64().unwrap_or(0.0),
        ))
    }

    /// One cell: start the tool, send, stop the tool, read its counts and CPU.
    fn cell(
        &self,
        lab: &BenchLab,
        tool: &Tool,
        size: u16,
        fraction: f64,
        max_pps: f64,
        threads: usize,
    ) -> Result<Sample> {
        let err_path = self.scratch.join("tool.err");
        let out_path = self.scratch.join("tool.out");
        let mut cmd = self.command(tool, &lab.0);
        cmd.stdout(File::create(&out_path)?)
            .stderr(File::create(&err_path)?)
            .stdin(Stdio::null());
        let before = bound_sockets(&lab.0, "cap0");
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", tool.name))?;
        self.wait_ready(&mut child, &err_path, &lab.0, before)?;
        let rx0 = lab.rx_packets()?;
        let rate = (fraction < 0.999).then_some(fraction * max_pps);
        let gen = self.gen(&lab.0, size, rate, threads);
        std::thread::sleep(Duration::from_millis(500));
        let rx1 = lab.rx_packets()?;
        let cpu0 = children_cpu_seconds();
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        while child.try_wait()?.is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let cpu_s = children_cpu_seconds() - cpu0;
        let (sent, achieved) = gen?;
        let _ = sent;
        let text = format!(
            "{}\n{}",
            std::fs::read_to_string(&out_path).unwrap_or_default(),
            std::fs::read_to_string(&err_path).unwrap_or_default()
        );
        let (captured, drops) = match tool.peer {
            None => {
                let line = text
                    .lines()
                    .rev()
                    .find(|l| l.contains("\"summary\""))
                    .context("no corecap summary")?;
                let v: serde_json::Value = serde_json::from_str(line)?;
                (
                    v["packets"].as_u64().unwrap_or(0),
                    v["drops"]["kernel"].as_u64().unwrap_or(0),
                )
            }
            Some(kind) => kind.parse_stats(&text).with_context(|| {
                format!("cannot read {} statistics from: {}", tool.name, text.trim())
            })?,
        };
        for e in std::fs::read_dir(&self.scratch)?.flatten() {
            let _ = std::fs::remove_file(e.path());
        }
        Ok(Sample {
            tool: tool.name.clone(),
            size,
            fraction,
            asked_pps: rate.unwrap_or(max_pps),
            achieved_pps: achieved,
            offered: rx1 - rx0,
            captured,
            drops,
            cpu_s,
        })
    }
}

fn text_of(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn header(a: &BenchArgs, versions: Vec<(String, String)>, skipped: Vec<String>) -> Header {
    let cpu = text_of("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_default();
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M:%S UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    Header {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        date,
        cpu,
        cores: corecap_linux::affinity::online_cpus().len(),
        kernel: text_of("/proc/sys/kernel/osrelease").trim().to_owned(),
        nic: format!(
            "veth pair in a namespace (gen0 -> cap0, 2 queues), generator engine {}; every tool with its default buffer",
            a.engine.name()
        ),
        versions,
        skipped,
        packets: a.packets,
        reps: a.reps,
    }
}

pub(crate) fn run(mut a: BenchArgs) -> Result<i32> {
    if let Some(crate::args::BenchWhat::Disk { dir, size, json }) = &a.what {
        return disk(dir, *size, *json);
    }
    if a.quick {
        a.reps = a.reps.min(1);
        a.packets = a.packets.min(200_000);
        a.sizes = vec![64, 1518];
        a.rates = vec![50, 100];
    }
    if a.reps == 0 || a.packets == 0 {
        bail!("--reps and --packets must be at least 1");
    }
    let Lineup {
        tools,
        versions,
        skipped,
    } = pick_tools(&a)?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let scratch = std::env::temp_dir().join(format!("corecap-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let runner = Runner {
        exe: std::env::current_exe()?,
        scratch: scratch.clone(),
        packets: a.packets,
        engine: a.engine,
    };
    let mut rep = Report {
        header: header(&a, versions, skipped),
        ..Default::default()
    };
    let result = measure(&a, &runner, &tools, &mut rep);
    let _ = std::fs::remove_dir_all(&scratch);
    // Whatever was measured is written, even after a failure.
    write_report(&a.out, &rep, &tools)?;
    result.map(|_| 0)
}

/// `bench disk`: the disk self-test under `dir`, `size_mib` written in each mode.
fn disk(dir: &Path, size_mib: u64, json: bool) -> Result<i32> {
    let bytes = size_mib
        .checked_mul(1 << 20)
        .filter(|b| *b > 0)
        .context("--size must be 1..2^44 MiB")?;
    let r = corecap_lab::bench::disk::run(dir, bytes)
        .with_context(|| format!("testing the disk under {}", dir.display()))?;
    if json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        print!("{}", corecap_lab::bench::disk::table(&r));
    }
    Ok(0)
}

/// The tools a run measures.
struct Lineup {
    /// The tools of `--tools` that can run.
    tools: Vec<Tool>,
    /// (tool, version) of corecap and of each peer that runs.
    versions: Vec<(String, String)>,
    /// The peers skipped because they are not installed.
    skipped: Vec<String>,
}

/// The tools of `--tools` that can run, after `--install-peers` installed what it could.
fn pick_tools(a: &BenchArgs) -> Result<Lineup> {
    let path = std::env::var("PATH").unwrap_or_default();
    let (mut found, mut missing) = peer::detect(&path);
    let wanted: Vec<PeerKind> = PeerKind::ALL
        .into_iter()
        .filter(|k| a.tools.iter().any(|&t| peer(t) == Some(*k)))
        .collect();
    if a.install_peers && wanted.iter().any(|k| missing.contains(k)) {
        install_peers(&wanted, &missing)?;
        (found, missing) = peer::detect(&path);
    }
    let mut versions = vec![("corecap".to_string(), env!("CARGO_PKG_VERSION").to_string())];
    let mut tools = Vec::new();
    let mut skipped = Vec::new();
    for &t in &a.tools {
        let name = t.name();
        match peer(t) {
            None => tools.push(Tool {
                name: name.into(),
                peer: None,
                extra: vec![],
            }),
            Some(kind) if !missing.contains(&kind) => {
                if let Some(p) = found.iter().find(|p| p.kind == kind) {
                    versions.push((name.into(), p.version.clone()));
                }
                tools.push(Tool {
                    name: name.into(),
                    peer: Some(kind),
                    extra: vec![],
                });
            }
            Some(_) => {
                eprintln!(
                    "corecap bench: {name} is not installed; skipped (--install-peers installs it)"
                );
                skipped.push(name.to_string());
            }
        }
    }
    Ok(Lineup {
        tools,
        versions,
        skipped,
    })
}

/// `apt-get install` of the wanted peers that are missing.
fn install_peers(wanted: &[PeerKind], missing: &[PeerKind]) -> Result<()> {
    let pkgs: Vec<&str> = wanted
        .iter()
        .filter(|k| missing.contains(k))
        .map(|k| k.package())
        .collect();
    let st = Command::new("apt-get")
        .args(["install", "-y", "-q"])
        .args(&pkgs)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()?;
    if !st.success() {
        bail!("apt-get install {} failed", pkgs.join(" "));
    }
    Ok(())
}

/// report.md, report.json and a plot per tool in `out`; prints the markdown.
fn write_report(out: &Path, rep: &Report, tools: &[Tool]) -> Result<()> {
    let md = report::markdown(rep);
    std::fs::write(out.join("report.md"), &md)?;
    std::fs::write(out.join("report.json"), serde_json::to_string_pretty(rep)?)?;
    for t in tools {
        std::fs::write(
            out.join(format!("captured-{}.svg", t.name)),
            report::svg_captured(&rep.table1, &t.name),
        )?;
    }
    print!("{md}");
    println!("\nwrote {}", out.join("report.md").display());
    Ok(())
}

/// Runs the parts of `--parts` on a lab of their own, after measuring the generator's
/// maximum rate for each frame size.
fn measure(a: &BenchArgs, r: &Runner, tools: &[Tool], rep: &mut Report) -> Result<()> {
    // Two queues: GRO on cap0 gives it NAPI, which the XDP generator needs.
    let lab = BenchLab::up(&a.netns, 2)?;
    for &size in &a.sizes {
        let (_, pps) = r.gen(&lab.0, size, None, 1)?;
        eprintln!("corecap bench: generator maximum for {size}-byte frames: {pps:.0} pps");
        rep.gen_max.push(GenMax { size, pps });
    }
    if a.parts.contains(&BenchPart::Table1) {
        table1(a, r, &lab, tools, rep)?;
    }
    let cores = corecap_linux::affinity::online_cpus().len().max(1);
    if a.parts.contains(&BenchPart::Lossfree) {
        loss_free(a, r, &lab, cores, rep);
    }
    if a.parts.contains(&BenchPart::Placement) {
        placement(a, r, &lab, cores, rep)?;
    }
    Ok(())
}

/// The generator's maximum rate for `size`-byte frames (1 when it was not measured).
fn max_of(rep: &Report, size: u16) -> f64 {
    rep.gen_max
        .iter()
        .find(|g| g.size == size)
        .map_or(1.0, |g| g.pps)
}

/// Table 1: captured % of each tool by frame size and offered rate.
fn table1(
    a: &BenchArgs,
    r: &Runner,
    lab: &BenchLab,
    tools: &[Tool],
    rep: &mut Report,
) -> Result<()> {
    for t in tools {
        for &size in &a.sizes {
            for &pct in &a.rates {
                for _ in 0..a.reps {
                    let s = r.cell(lab, t, size, f64::from(pct) / 100.0, max_of(rep, size), 1)?;
                    eprintln!(
                        "corecap bench: {} {size} B {pct}%: {:.2}% captured",
                        t.name,
                        s.captured_pct()
                    );
                    rep.table1.push(s);
                }
            }
        }
    }
    Ok(())
}

/// The loss-free rate of corecap by balance mode and number of workers, found by bisection;
/// a probe that fails counts as a loss.
fn loss_free(a: &BenchArgs, r: &Runner, lab: &BenchLab, cores: usize, rep: &mut Report) {
    let size = a.sizes[0];
    let max = max_of(rep, size);
    let balances: &[&str] = if a.quick {
        &["flow"]
    } else {
        &["flow", "round-robin", "cpu", "rollover"]
    };
    for &bal in balances {
        for workers in 1..=cores {
            let tool = Tool {
                name: "corecap".into(),
                peer: None,
                extra: vec![
                    "--workers".into(),
                    workers.to_string(),
                    "--balance".into(),
                    bal.into(),
                ],
            };
            let mut last_cpu = None;
            let res =
                loss_free_rate(
                    0.05 * max,
                    max,
                    0.02,
                    if a.quick { 4 } else { 8 },
                    |rate| match r.cell(lab, &tool, size, rate / max, max, 1) {
                        Ok(s) => {
                            let ok = s.captured == s.offered && s.drops == 0;
                            if ok {
                                last_cpu = s.cpu_per_mpkt();
                            }
                            ok
                        }
                        Err(e) => {
                            eprintln!("corecap bench: probe failed: {e:#}");
                            false
                        }
                    },
                );
            eprintln!(
                "corecap bench: {bal} with {workers} worker(s): loss-free up to {:.0} pps",
                res.rate
            );
            rep.loss_free.push(LossFreeRow {
                balance: bal.into(),
                workers,
                size,
                rate: res.rate,
                cpu_per_mpkt: last_cpu,
                probes: res.probes,
            });
        }
    }
}

/// Placement (papers 000 and 001): one worker on the sender's core, on another core or
/// unpinned, one per core; then queue against flow balance with a sender per queue.
fn placement(
    a: &BenchArgs,
    r: &Runner,
    lab: &BenchLab,
    cores: usize,
    rep: &mut Report,
) -> Result<()> {
    let size = a.sizes[0];
    let max = max_of(rep, size);
    let other = if cores > 1 { "1" } else { "0" };
    let setups: [(&str, Vec<&str>, usize); 6] = [
        (
            "1 worker on the sender's core (CPU 0)",
            vec!["--workers", "1", "--cpus", "0"],
            1,
        ),
        (
            "1 worker on another core",
            vec!["--workers", "1", "--cpus", other],
            1,
        ),
        ("1 worker, unpinned", vec!["--workers", "1", "--no-pin"], 1),
        ("one worker per core, pinned", vec![], 1),
        // Queue mode against flow mode: two sending threads, one per queue.
        ("2-queue veth, queue mode", vec!["--balance", "queue"], 2),
        ("2-queue veth, flow mode", vec!["--balance", "flow"], 2),
    ];
    for (name, extra, threads) in setups {
        let tool = Tool {
            name: "corecap".into(),
            peer: None,
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        let mut samples = Vec::new();
        for _ in 0..a.reps {
            samples.push(r.cell(lab, &tool, size, 1.0, max, threads)?);
        }
        rep.placement.push(PlacementRow {
            setup: name.into(),
            samples,
        });
    }
    Ok(())
}
