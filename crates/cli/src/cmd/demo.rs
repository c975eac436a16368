//! `corecap demo`: the recorder's whole job on one machine, with nothing to set up. It
//! brings up a veth lab in its own namespace, records generated traffic on every core of
//! the capture end into rotated, indexed files in a fresh folder, prints the per-worker
//! table and the accounting line, then asks the recording for one host's packets and sets
//! what that cost beside a full scan of the same files. It removes the lab, and the folder
//! unless `--keep`.
//!
//! The demo needs no libpcap: the capture runs without a filter. Where libpcap is
//! installed the query is `host ADDR` (a tcpdump filter, which libpcap compiles); where it is
//! not, the query is a time window in the middle of the recording, and one line says what
//! to install for filters.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use corecap_lab::gen::FrameSpec;
use corecap_lab::lab::{self, LabConfig};

use crate::args::DemoArgs;

/// Removes the lab when the demo ends, however it ends.
struct LabGuard(String);

impl Drop for LabGuard {
    fn drop(&mut self) {
        let _ = lab::down(&self.0);
    }
}

/// The demo's folder: removed when the demo ends unless it is kept.
struct Folder {
    path: PathBuf,
    keep: bool,
}

impl Drop for Folder {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Rotation size of the demo's recording, in MB: a few files for the query to choose from.
const FILE_MB: u32 = 4;

/// The flow whose host the demo asks for.
const QUERY_FLOW: u32 = 7;

pub(crate) fn run(a: DemoArgs) -> Result<i32> {
    let exe = std::env::current_exe().context("finding the corecap binary")?;
    if !is_root() {
        return rerun_with_sudo(&exe);
    }
    if lab::exists(&a.netns) {
        bail!(
            "a lab named {} exists already; remove it with `corecap lab down --netns {}`",
            a.netns,
            a.netns
        );
    }
    let folder = make_folder(&a)?;
    let rec = folder.path.join("rec");
    std::fs::create_dir(&rec).with_context(|| format!("creating {}", rec.display()))?;
    println!(
        "corecap demo: lab {} with {} queue(s); {} packets of {} bytes from {} hosts, recorded to {}",
        a.netns,
        a.queues,
        a.packets,
        a.size,
        a.flows,
        rec.display()
    );
    lab::up(&LabConfig {
        netns: a.netns.clone(),
        queues: a.queues,
        threaded_napi_cpu: None,
        rps_cpus: None,
    })?;
    let guard = LabGuard(a.netns.clone());
    let (from, to) = record(&exe, &a, &rec)?;
    drop(guard);

    let answers = folder.path.join("answers");
    std::fs::create_dir(&answers).with_context(|| format!("creating {}", answers.display()))?;
    let host = std::net::Ipv4Addr::from(FrameSpec::daddr(QUERY_FLOW));
    let ask = if corecap_linux::filter::libpcap_available() {
        Ask::Host(host.to_string())
    } else {
        println!(
            "libpcap is not installed, so tcpdump filters are off (Debian/Ubuntu: apt-get install \
             libpcap0.8); asking for a time window instead of host {host}"
        );
        let third = (to - from) / 3;
        Ask::Window(from + third, to - third)
    };
    let indexed = query(&exe, &rec, &answers.join("indexed.pcapng"), &ask, false)?;
    let scanned = query(&exe, &rec, &answers.join("scanned.pcapng"), &ask, true)?;
    report(&ask, &indexed, &scanned);
    if indexed.packets != scanned.packets {
        bail!(
            "the indexed query found {} packets and the full scan {}",
            indexed.packets,
            scanned.packets
        );
    }
    footer(&folder, &rec, &ask);
    Ok(0)
}

/// Whether this process runs as root (the owner of `/proc/self` is the effective user).
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Runs the same command again under sudo: the lab's namespace and veth pair need root, and
/// `cargo run` as a user (whose cargo is in `~/.cargo/bin`, not on root's PATH) builds as
/// that user and lands here.
fn rerun_with_sudo(exe: &Path) -> Result<i32> {
    use std::os::unix::process::CommandExt;
    println!("corecap demo: the lab needs root; running it again with sudo");
    let err = Command::new("sudo")
        .arg("--")
        .arg(exe)
        .args(std::env::args_os().skip(1))
        .exec();
    bail!("the demo needs root (it makes a network namespace), and sudo did not run: {err}")
}

/// The demo's folder, made new: `--dir`, or a fresh one under the temporary directory.
fn make_folder(a: &DemoArgs) -> Result<Folder> {
    let path = match &a.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("corecap-demo-{}", std::process::id())),
    };
    std::fs::create_dir(&path).with_context(|| {
        format!(
            "creating {} (the demo records into a folder that does not exist yet)",
            path.display()
        )
    })?;
    Ok(Folder { path, keep: a.keep })
}

/// Records the generated traffic into `rec`, forwarding the capture's table and summary.
/// Returns the wall-clock span of the traffic, in ns since the epoch.
fn record(exe: &Path, a: &DemoArgs, rec: &Path) -> Result<(u64, u64)> {
    let mut cap = Command::new(exe);
    cap.args(["capture", "--netns", &a.netns, "-i", lab::CAP_IF])
        .args(["--stats-interval", "0", "-w"])
        .arg(rec.join("rec.pcapng"))
        .args(["-b", &format!("filesize:{FILE_MB}M")])
        .args(["-c", &a.packets.to_string(), "--duration", "60"]);
    let mut child = cap
        .stderr(Stdio::piped())
        .stdout(Stdio::inherit())
        .spawn()
        .context("starting the capture")?;
    let stderr = child.stderr.take().context("capture stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let mut ready = false;
    for line in lines.by_ref() {
        let line = line.unwrap_or_default();
        println!("{line}");
        if line.contains("capturing on") {
            ready = true;
            break;
        }
    }
    if !ready {
        let status = child.wait()?;
        bail!("the capture did not start ({status})");
    }
    let from = now_ns();
    let gen = Command::new(exe)
        .args(["gen", "--netns", &a.netns, "-i", lab::GEN_IF])
        .args([
            "--count",
            &a.packets.to_string(),
            "--size",
            &a.size.to_string(),
        ])
        .args([
            "--flows",
            &a.flows.to_string(),
            "--burst",
            &a.burst.to_string(),
        ])
        .output()
        .context("running the generator")?;
    let to = now_ns();
    print!("generator: {}", String::from_utf8_lossy(&gen.stdout));
    if !gen.status.success() {
        eprint!("{}", String::from_utf8_lossy(&gen.stderr));
    }
    for line in lines {
        println!("{}", line.unwrap_or_default());
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("the capture failed ({status})");
    }
    Ok((from, to))
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// What the demo asks the recording for.
enum Ask {
    /// One host's packets (a tcpdump filter).
    Host(String),
    /// The packets of a window, ns since the epoch.
    Window(u64, u64),
}

/// What `corecap query --json` said, and how long it took.
struct Answer {
    packets: u64,
    files: u64,
    bytes_read: u64,
    bytes_total: u64,
    index_bytes: u64,
    seconds: f64,
}

fn query(exe: &Path, rec: &Path, out: &Path, ask: &Ask, scan: bool) -> Result<Answer> {
    let mut q = Command::new(exe);
    q.arg("query").arg(rec).arg("-w").arg(out).arg("--json");
    if scan {
        q.arg("--scan");
    }
    match ask {
        Ask::Host(h) => q.args(["host", h]),
        Ask::Window(from, to) => q
            .arg(format!("--from={}", seconds(*from)))
            .arg(format!("--to={}", seconds(*to))),
    };
    let t = Instant::now();
    let o = q.output().context("running corecap query")?;
    let secs = t.elapsed().as_secs_f64();
    if !o.status.success() {
        bail!(
            "corecap query failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text
        .lines()
        .rfind(|l| l.starts_with('{'))
        .context("corecap query printed no JSON summary")?;
    let v: serde_json::Value = serde_json::from_str(line).context("reading the query summary")?;
    let n = |k: &str| v[k].as_u64().unwrap_or(0);
    Ok(Answer {
        packets: n("packets"),
        files: n("files"),
        bytes_read: n("bytes_read"),
        bytes_total: n("bytes_total"),
        index_bytes: n("index_bytes"),
        seconds: secs,
    })
}

/// Unix seconds with nine decimals, as `--from` and `--to` take them.
fn seconds(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

fn report(ask: &Ask, indexed: &Answer, scanned: &Answer) {
    let what = match ask {
        Ask::Host(h) => format!("host {h}"),
        Ask::Window(..) => "the middle third of the recording".to_string(),
    };
    let pct = |a: &Answer| 100.0 * a.bytes_read as f64 / a.bytes_total.max(1) as f64;
    println!(
        "query {what}: {} packets from {} files; read {} of {} bytes recorded ({:.1}%) plus {} \
         bytes of index, in {:.1} ms",
        indexed.packets,
        indexed.files,
        indexed.bytes_read,
        indexed.bytes_total,
        pct(indexed),
        indexed.index_bytes,
        indexed.seconds * 1e3
    );
    println!(
        "full scan of the same files: {} packets; read {} bytes ({:.1}%) in {:.1} ms; the index \
         read {:.1}x fewer bytes",
        scanned.packets,
        scanned.bytes_read,
        pct(scanned),
        scanned.seconds * 1e3,
        scanned.bytes_read as f64 / (indexed.bytes_read + indexed.index_bytes).max(1) as f64
    );
}

fn footer(folder: &Folder, rec: &Path, ask: &Ask) {
    let filter = match ask {
        Ask::Host(h) => format!("host {h}"),
        Ask::Window(..) => "host 10.1.0.7".to_string(),
    };
    if folder.keep {
        println!(
            "the recording is in {} and the answers in {} (kept)",
            rec.display(),
            folder.path.join("answers").display()
        );
    } else {
        println!(
            "the recording in {} is removed now (keep it with --keep)",
            folder.path.display()
        );
    }
    println!("next:");
    println!(
        "  corecap capture -i IF -w DIR/rec.pcapng -b filesize:1G --retain SIZE   # record \
         under a byte budget"
    );
    println!("  corecap query DIR '{filter}' -w out.pcapng                  # one host back out");
    println!("  tshark -r out.pcapng");
}
