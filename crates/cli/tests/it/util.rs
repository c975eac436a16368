//! The test harness: `Lab` (a namespace with a veth pair, removed on drop), `Gen` (the
//! generator), `Capture` (a corecap capture process and its JSON summary), `Daemon` (a
//! `corecap serve` and its client), and the synthetic frames and files the tests share.

#![allow(unreachable_pub)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_corecap")
}

/// Whether `tool` is installed, for a test that checks its answer with it. Under CI (`CI`
/// set), where `.ci/run` installs the tools, a missing one fails the test; elsewhere the
/// test says which check it leaves out, and goes on without it.
pub fn need(tool: &str) -> bool {
    if have(tool) {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{tool} is missing: .ci/run installs it"
    );
    eprintln!("skipped: the checks with {tool}, which is not installed");
    false
}

pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A scratch directory, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "corecap-test-{}-{}-{tag}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).expect("create scratch dir");
        Self(p)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether a file name is one of a recording folder's own files (its catalog, with SQLite's
/// journal, and the lease queries hold), not a capture or an index.
pub fn folder_metadata(name: &str) -> bool {
    name.starts_with(".corecap-")
}

/// A lab namespace made by `corecap lab up`, removed by `corecap lab down` on drop.
pub struct Lab {
    pub netns: String,
}

impl Lab {
    pub fn new(queues: u32) -> Self {
        Self::with_args(queues, &[])
    }

    pub fn with_args(queues: u32, extra: &[&str]) -> Self {
        let netns = format!(
            "cc-t{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        run_ok(
            "lab up",
            &[
                "lab",
                "up",
                "--netns",
                &netns,
                "--queues",
                &queues.to_string(),
            ],
            extra,
        );
        Self { netns }
    }

    /// Sends `count` frames of 256 two-way flows from two generator threads on two CPUs,
    /// so a 2-queue lab receives on both RX queues (like RSS); returns the count sent.
    pub fn gen_on_two_queues(&self, count: u64) -> u64 {
        self.gen(
            count,
            &[
                "--flows",
                "256",
                "--rate",
                "50000",
                "--threads",
                "2",
                "--bidir",
            ],
        )
    }

    /// Sends `count` frames with extra generator arguments; returns the count sent.
    pub fn gen(&self, count: u64, extra: &[&str]) -> u64 {
        let count = count.to_string();
        let gen = [
            "gen",
            "--netns",
            &self.netns,
            "-i",
            "gen0",
            "--json",
            "--count",
            &count,
        ];
        let out = run_ok("gen", &gen, extra);
        let v: Value = serde_json::from_slice(&out.stdout).expect("gen prints JSON");
        v["sent"].as_u64().expect("sent")
    }

    /// Brings the namespace's loopback up, for a collector listening in it.
    pub fn loopback_up(&self) {
        let up = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.netns,
                "ip",
                "link",
                "set",
                "lo",
                "up",
            ])
            .status()
            .expect("ip");
        assert!(up.success());
    }

    /// Starts the generator in the background for at most `secs` seconds with extra
    /// arguments; its output is dropped.
    pub fn gen_for(&self, secs: &str, extra: &[&str]) -> Child {
        Command::new(bin())
            .args([
                "gen",
                "--netns",
                &self.netns,
                "-i",
                "gen0",
                "--duration",
                secs,
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the generator")
    }

    /// Starts a capture on cap0 with `args`; returns once it is capturing.
    pub fn capture(&self, args: &[&str]) -> Capture {
        Capture::start(&["--netns", &self.netns, "-i", "cap0"], args)
    }

    /// Starts a capture on cap0 writing to `out` (`-w OUT`, then `args`); returns once it is
    /// capturing.
    pub fn capture_to(&self, out: &Path, args: &[&str]) -> Capture {
        let mut a = vec!["-w", out.to_str().expect("utf8")];
        a.extend_from_slice(args);
        self.capture(&a)
    }

    /// `corecap capture --netns NS -i cap0`, for a test that runs the process itself.
    pub fn capture_command(&self) -> Command {
        let mut c = Command::new(bin());
        c.args(["capture", "--netns", &self.netns, "-i", "cap0"]);
        c
    }
}

/// Runs corecap with `args` then `extra`, expecting success (`what` failed otherwise).
fn run_ok(what: &str, args: &[&str], extra: &[&str]) -> Output {
    let out = Command::new(bin())
        .args(args)
        .args(extra)
        .output()
        .unwrap_or_else(|e| panic!("run corecap {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The lines a child prints on `stream`, as they come (read by a thread of their own).
pub fn lines_of(stream: impl Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new(bin())
            .args(["lab", "down", "--netns", &self.netns])
            .output();
    }
}

/// Whether capture arguments write packets (`-w`); without, the tests count only
/// (`--count-only`), as capture did before it printed a line per packet.
fn writes(args: &[&str]) -> bool {
    args.iter().any(|a| *a == "-w" || *a == "--write")
}

/// A running `corecap capture --json`.
pub struct Capture {
    child: Child,
    stderr: Vec<String>,
    /// Lines the capture prints on stderr after it was ready.
    rest: std::sync::mpsc::Receiver<String>,
}

impl Capture {
    pub fn start(pre: &[&str], args: &[&str]) -> Self {
        let count_only = !writes(pre) && !writes(args);
        let mut child = Command::new(bin())
            .arg("capture")
            .args(pre)
            .args(["--json", "--stats-interval", "0", "--duration", "60"])
            .args(count_only.then_some("--count-only"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start corecap capture");
        let rx = lines_of(child.stderr.take().expect("stderr"));
        let mut lines = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(l) => {
                    let ready = l.contains("capturing on");
                    lines.push(l);
                    if ready {
                        break;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if let Ok(Some(st)) = child.try_wait() {
                        panic!(
                            "capture exited before it was ready ({st}): {}",
                            lines.join("\n")
                        );
                    }
                    assert!(
                        Instant::now() < deadline,
                        "capture not ready in 20 s: {}",
                        lines.join("\n")
                    );
                }
                Err(_) => {
                    let st = child.wait().expect("wait");
                    panic!(
                        "capture exited before it was ready ({st}): {}",
                        lines.join("\n")
                    );
                }
            }
        }
        Self {
            child,
            stderr: lines,
            rest: rx,
        }
    }

    /// What the capture printed on stderr before it was ready.
    pub fn stderr_lines(&self) -> &[String] {
        &self.stderr
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the capture with SIGKILL (it is our child) and reaps it: a crash.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM to the capture (by its PID) and returns its summary.
    pub fn stop(mut self) -> Value {
        // Let the last blocks retire before stopping.
        std::thread::sleep(Duration::from_millis(300));
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.wait()
    }

    /// Sends SIGTERM and waits (at most 60 s), whatever the exit status: returns whether
    /// it succeeded, the JSON summary, and everything it printed on stderr.
    pub fn stop_any(mut self) -> (bool, Value, String) {
        std::thread::sleep(Duration::from_millis(300));
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let st = self.exit_status();
        let v = summary(&self.read_stdout());
        // The stderr reader ends with the process; take what it read.
        let mut err = self.stderr.join("\n");
        while let Ok(l) = self.rest.recv_timeout(Duration::from_secs(2)) {
            err.push('\n');
            err.push_str(&l);
        }
        (st.success(), v, err)
    }

    /// Waits (at most 60 s) for the capture to end and returns its JSON summary.
    pub fn wait(&mut self) -> Value {
        let st = self.exit_status();
        let out = self.read_stdout();
        assert!(st.success(), "capture failed ({st}): {out}");
        let v = summary(&out);
        assert_eq!(
            v["balanced"],
            Value::Bool(true),
            "accounting must balance: {v}"
        );
        v
    }

    /// Waits (at most 60 s, then kills it) for the capture to end.
    fn exit_status(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                return st;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("capture did not end in 60 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Everything the ended capture printed on stdout.
    fn read_stdout(&mut self) -> String {
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .expect("stdout")
            .read_to_string(&mut out)
            .expect("read stdout");
        out
    }
}

/// The last summary line of a capture's stdout, parsed.
fn summary(out: &str) -> Value {
    let last = out
        .lines()
        .rev()
        .find(|l| l.contains("\"summary\""))
        .unwrap_or_else(|| panic!("no summary in: {out}"));
    serde_json::from_str(last).expect("summary is JSON")
}

impl Drop for Capture {
    /// A capture left running by a failed test is ended (it is our child) and reaped.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// A child of a test (a README command, say), ready once a line of its stderr holds a
/// word; ended by SIGTERM (by its PID) or by itself, and killed (it is our child) on drop
/// if it still runs.
pub struct Background {
    child: Child,
    stderr: std::sync::mpsc::Receiver<String>,
    /// The stderr lines read so far.
    seen: Vec<String>,
}

impl Background {
    /// Spawns `c` with its stderr piped here; returns once a line holds `ready` (at most
    /// 30 s).
    pub fn start(mut c: Command, ready: &str) -> Self {
        let mut child = c
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {c:?}: {e}"));
        let stderr = lines_of(child.stderr.take().expect("stderr"));
        let mut seen: Vec<String> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !seen.last().is_some_and(|l| l.contains(ready)) {
            match stderr.recv_timeout(Duration::from_millis(100)) {
                Ok(l) => seen.push(l),
                Err(_) => {
                    if let Ok(Some(st)) = child.try_wait() {
                        panic!("{c:?} ended ({st}) before {ready:?}: {}", seen.join("\n"));
                    }
                    assert!(
                        Instant::now() < deadline,
                        "{c:?}: no {ready:?} in 30 s: {}",
                        seen.join("\n")
                    );
                }
            }
        }
        Self {
            child,
            stderr,
            seen,
        }
    }

    /// Its stdout, when the command had it piped.
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.stdout.take()
    }

    /// SIGTERM (by its PID), then as [`wait`](Self::wait).
    pub fn term(self) -> (std::process::ExitStatus, String) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.wait()
    }

    /// Waits (at most 30 s) for its end; returns its status and all it printed on stderr.
    pub fn wait(mut self) -> (std::process::ExitStatus, String) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let st = loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                break st;
            }
            assert!(
                Instant::now() < deadline,
                "did not end in 30 s: {}",
                self.seen.join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        // The reader ends with the process's stderr.
        while let Ok(l) = self.stderr.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(l);
        }
        (st, self.seen.join("\n"))
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Packets `tcpdump -r P FILTER` prints (every packet with an empty filter); tcpdump must
/// read the file without an error.
pub fn tcpdump_packets(p: &Path, filter: &str) -> u64 {
    let mut c = Command::new("tcpdump");
    c.args(["-nn", "-r"]).arg(p);
    if !filter.is_empty() {
        c.arg(filter);
    }
    let o = c.output().expect("run tcpdump");
    assert!(
        o.status.success(),
        "tcpdump -r {} {filter}: {}",
        p.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout.iter().filter(|&&b| b == b'\n').count() as u64
}

/// Runs corecap with `args` and returns its output.
pub fn corecap(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("run corecap")
}

/// Replays `file` (`corecap capture -r FILE --json --stats-interval 0 ARGS`, counting only
/// without -w), whatever its exit status; returns its output and the summary, its last line
/// on stdout.
pub fn replay(file: &Path, args: &[&str]) -> (Output, Value) {
    let out = Command::new(bin())
        .args(["capture", "-r"])
        .arg(file)
        .args(["--json", "--stats-interval", "0"])
        .args((!writes(args)).then_some("--count-only"))
        .args(args)
        .output()
        .expect("run corecap capture -r");
    let text = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(text.lines().last().expect("summary")).expect("json");
    (out, v)
}

/// Asserts that worker `w`'s file holds packets and that each carries queue `w`; returns
/// how many it holds.
pub fn assert_queue_tagged(path: &Path, w: u32) -> usize {
    let pkts = read_all(path);
    assert!(!pkts.is_empty(), "queue {w} received packets");
    assert!(
        pkts.iter().all(|(_, q)| *q == Some(w)),
        "worker {w} packets carry queue {w}"
    );
    pkts.len()
}

/// A small tmpfs mounted for one test, unmounted on drop.
pub struct SmallDisk(pub Scratch);

impl SmallDisk {
    pub fn new(size: &str) -> Self {
        let s = Scratch::new("disk");
        mount_tmpfs(&s.0, size);
        Self(s)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0 .0).status();
    }
}

fn mount_tmpfs(at: &Path, size: &str) {
    let st = Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            &format!("size={size},mode=0700"),
            "tmpfs",
        ])
        .arg(at)
        .status()
        .expect("mount");
    assert!(st.success(), "mount tmpfs");
}

/// A small tmpfs mounted on a directory of the caller's, unmounted on drop.
pub struct Mounted(PathBuf);

impl SmallDisk {
    pub fn mount_at(at: &Path, size: &str) -> Mounted {
        mount_tmpfs(at, size);
        Mounted(at.to_owned())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A small ext4 filesystem of 1 KiB blocks with no blocks reserved for root, made in a
/// file by `mkfs.ext4` and loop-mounted for one test; unmounted on drop. Blocks smaller
/// than a page are what a tmpfs cannot show: a file written one byte per page holds holes
/// that a later write through a mapping must allocate.
pub struct LoopDisk {
    pub mnt: Scratch,
    _image: Scratch,
}

impl LoopDisk {
    pub fn ext4(mib: u64) -> Self {
        let image = Scratch::new("image");
        let mnt = Scratch::new("ext4");
        mount_ext4(
            &image.path("fs.img"),
            &mnt.0,
            mib,
            &["-b", "1024", "-m", "0"],
        );
        Self { mnt, _image: image }
    }
}

/// Makes an ext4 filesystem of `mib` MiB in the file `image` (`mkfs.ext4 -q -F`, then
/// `mkfs`) and loop-mounts it on the directory `at`. The caller unmounts it.
pub fn mount_ext4(image: &Path, at: &Path, mib: u64, mkfs: &[&str]) {
    std::fs::File::create(image)
        .and_then(|f| f.set_len(mib << 20))
        .expect("image file");
    let run = |c: &mut Command| {
        let o = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
        assert!(
            o.status.success(),
            "{c:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    run(Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .args(mkfs)
        .arg(image));
    run(Command::new("mount")
        .args(["-o", "loop"])
        .arg(image)
        .arg(at));
}

/// Free (to a user) and total bytes of the filesystem of `dir`, as `df` gives them.
pub fn fs_space(dir: &Path) -> (u64, u64) {
    let o = Command::new("df")
        .args(["-B1", "--output=avail,size"])
        .arg(dir)
        .output()
        .expect("df");
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let nums: Vec<u64> = text
        .lines()
        .nth(1)
        .expect("df line")
        .split_whitespace()
        .map(|n| n.parse().expect("number"))
        .collect();
    (nums[0], nums[1])
}

impl Drop for LoopDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt.0).status();
    }
}

/// A slow disk: writes to the block device under `dir` from the processes moved into it are
/// held to a few bytes a second by the kernel's block throttle (a cgroup v1 `blkio`
/// group, or cgroup v2's `io.max`), until [`Throttle::lift`]. Direct I/O is throttled as
/// it is issued; writes through the page cache are not (their writeback is the kernel's).
pub struct Throttle {
    group: PathBuf,
    dev: String,
    v2: bool,
}

impl Throttle {
    pub fn new(dir: &Path, bytes_per_s: u64) -> Self {
        let out = Command::new("findmnt")
            .args(["-no", "MAJ:MIN", "--target"])
            .arg(dir)
            .output()
            .expect("run findmnt (util-linux)");
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(
            dev.contains(':'),
            "the device of {}: {dev:?}",
            dir.display()
        );
        let name = format!("corecap-test-{}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/blkio");
        let (group, v2) = if v1.join("blkio.throttle.write_bps_device").exists() {
            (v1.join(name), false)
        } else {
            let root = Path::new("/sys/fs/cgroup");
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+io");
            (root.join(name), true)
        };
        std::fs::create_dir_all(&group).expect("make the cgroup");
        let t = Self { group, dev, v2 };
        t.set(Some(bytes_per_s));
        t
    }

    fn set(&self, bytes_per_s: Option<u64>) {
        let (file, line) = match (self.v2, bytes_per_s) {
            (false, b) => (
                "blkio.throttle.write_bps_device",
                format!("{} {}", self.dev, b.unwrap_or(0)),
            ),
            (true, Some(b)) => ("io.max", format!("{} wbps={b}", self.dev)),
            (true, None) => ("io.max", format!("{} wbps=max", self.dev)),
        };
        std::fs::write(self.group.join(file), line).expect("set the write throttle");
    }

    /// Moves every thread of process `pid` into the throttled group.
    pub fn add(&self, pid: u32) {
        std::fs::write(self.group.join("cgroup.procs"), pid.to_string()).expect("join the cgroup");
    }

    /// Writes go at the disk's speed again.
    pub fn lift(&self) {
        self.set(None);
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        self.lift();
        // Processes still in it go back to the root group; then the group can go.
        if let Ok(pids) = std::fs::read_to_string(self.group.join("cgroup.procs")) {
            let root = self
                .group
                .parent()
                .expect("the hierarchy")
                .join("cgroup.procs");
            for pid in pids.lines() {
                let _ = std::fs::write(&root, pid);
            }
        }
        let _ = std::fs::remove_dir(&self.group);
    }
}

/// Fills the filesystem of `dir` with `dir/FILLER` until a write is refused for space, then
/// gives `leave` bytes back; returns the filler's path (delete it to free the space).
pub fn fill(dir: &Path, leave: u64) -> PathBuf {
    let p = dir.join("FILLER");
    let mut f = std::fs::File::create(&p).expect("filler");
    let chunk = [0xa5u8; 1024];
    loop {
        match f.write(&chunk) {
            Ok(n) if n > 0 => {}
            Ok(_) => break,
            Err(e) if e.raw_os_error() == Some(28) => break,
            Err(e) => panic!("filling {}: {e}", p.display()),
        }
    }
    let _ = f.sync_all();
    let len = f.metadata().expect("filler size").len();
    f.set_len(len.saturating_sub(leave)).expect("give back");
    f.sync_all().expect("sync filler");
    p
}

/// (timestamp, frame) of every packet of a file, up to its first error.
pub fn packets(p: &Path) -> Vec<(u64, Vec<u8>)> {
    let Ok(mut r) = corecap_wire::CaptureReader::open(p) else {
        return Vec::new();
    };
    let mut v = Vec::new();
    while let Ok(Some(rec)) = r.next_packet() {
        v.push((rec.ts_ns, rec.data.to_vec()));
    }
    v
}

/// Reads every packet of a capture file with the project's reader.
pub fn read_all(path: &Path) -> Vec<(Vec<u8>, Option<u32>)> {
    let mut r = corecap_wire::read::CaptureReader::open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut v = Vec::new();
    while let Some(rec) = r
        .next_packet()
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    {
        v.push((rec.data.to_vec(), rec.queue));
    }
    v
}

pub fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

/// Which file (index in `paths`) holds each flow, and how many packets: panics when a flow
/// (both directions together) shows up in two files.
pub fn flow_owners(
    paths: &[PathBuf],
) -> std::collections::HashMap<corecap_wire::flow::FlowKey, (usize, u32)> {
    let mut owner = std::collections::HashMap::new();
    for (w, p) in paths.iter().enumerate() {
        for (data, _) in read_all(p) {
            let k = corecap_wire::flow::flow_key(&data, None)
                .expect("generated frames parse")
                .canonical();
            let e = owner.entry(k).or_insert((w, 0));
            assert_eq!(e.0, w, "flow {k:?} seen in two files");
            e.1 += 1;
        }
    }
    owner
}

/// The first timestamp of the synthetic captures (ns since the epoch, November 2023).
pub const T0: u64 = 1_700_000_000_000_000_000;

/// `ns` as the `SECS.NANOS` that `--from` and `--to` take.
pub fn secs(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// An Ethernet/IPv4/UDP frame of `len` bytes, for the synthetic captures.
pub fn udp_frame(src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16, len: usize) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    let ip_len = (len - 14) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&ip_len.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&sp.to_be_bytes());
    f.extend_from_slice(&dp.to_be_bytes());
    f.extend_from_slice(&(ip_len - 20).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.resize(len, 0xab);
    f
}

/// A pcapng file (its bytes) of UDP frames of `len` bytes from 10.0.0.1 to 10.0.0.2 port
/// 53, one at each time of `times_ns`: frame `i` comes from port `1000 + i % 1000` and
/// carries `i` in its first payload bytes, so no two are alike.
pub fn udp_pcapng(times_ns: impl IntoIterator<Item = u64>, len: usize) -> Vec<u8> {
    udp_pcapng_by("t", times_ns, len)
}

/// [`udp_pcapng`] whose section names `app` as the program that wrote it (`corecap` for a
/// file as a recording of an earlier run left it: retention counts only those).
pub fn udp_pcapng_by(app: &str, times_ns: impl IntoIterator<Item = u64>, len: usize) -> Vec<u8> {
    pcapng_by(
        app,
        times_ns.into_iter().enumerate().map(|(i, ts_ns)| {
            let mut frame = udp_frame(
                [10, 0, 0, 1],
                [10, 0, 0, 2],
                1000 + (i % 1000) as u16,
                53,
                len,
            );
            frame[42..46].copy_from_slice(&(i as u32).to_be_bytes());
            (ts_ns, frame)
        }),
    )
}

/// A pcapng file (its bytes) of whole Ethernet frames on one interface, each at its time
/// (ns since the epoch).
pub fn pcapng_of(frames: impl IntoIterator<Item = (u64, Vec<u8>)>) -> Vec<u8> {
    pcapng_by("t", frames)
}

/// [`pcapng_of`] whose section names `app` as the program that wrote it.
pub fn pcapng_by(app: &str, frames: impl IntoIterator<Item = (u64, Vec<u8>)>) -> Vec<u8> {
    let ifs = [corecap_wire::InterfaceDesc::ethernet("e", 262144)];
    let mut w = corecap_wire::PcapngWriter::new(Vec::new(), app, &ifs).expect("writer");
    for (ts_ns, frame) in frames {
        w.write_epb(&corecap_wire::Epb {
            if_id: 0,
            ts_ns,
            data: &frame,
            orig_len: frame.len() as u32,
            ..corecap_wire::Epb::default()
        })
        .expect("epb");
    }
    w.into_inner()
}

/// Packets tshark reads from a file (None when tshark is not installed).
pub fn tshark_count(p: &Path) -> Option<usize> {
    tshark_count_matching(p, &[])
}

/// Packets tshark reads from a file with `args` (a display filter `-Y FILTER`, say); None
/// when tshark is not installed.
pub fn tshark_count_matching(p: &Path, args: &[&str]) -> Option<usize> {
    if !need("tshark") {
        return None;
    }
    let out = Command::new("tshark")
        .arg("-r")
        .arg(p)
        .args(args)
        .args(["-T", "fields", "-e", "frame.number"])
        .output()
        .expect("tshark");
    assert!(
        out.status.success(),
        "tshark failed on {}: {}",
        p.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).lines().count())
}

/// A new key file `name` in `s` (mode 0600, checked); returns its path.
pub fn keygen(s: &Scratch, name: &str) -> String {
    let k = s.path(name);
    let out = corecap(&["keygen", "-o", k.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mode = std::fs::metadata(&k).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    k.to_str().unwrap().to_owned()
}

/// Runs `corecap decrypt INPUT -o OUT --key-file KEY`.
pub fn decrypt(input: &Path, out: &Path, key: &str) -> std::process::Output {
    corecap(&[
        "decrypt",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--key-file",
        key,
    ])
}

/// `serve` arguments for a daemon that records cap0 into `rec` (1 MB files, a 0.2 s flush
/// interval), then `extra`.
/// `serve`'s flags to listen on `listen` with TLS and client certificates, from what
/// `corecap certs` wrote in `pki`.
pub fn tls_serve_args(listen: &str, pki: &Path) -> Vec<String> {
    let p = |f: &str| pki.join(f).to_str().expect("utf8").to_owned();
    vec![
        "--listen".into(),
        listen.into(),
        "--tls-cert".into(),
        p("server.pem"),
        "--tls-key".into(),
        p("server.key"),
        "--tls-client-ca".into(),
        p("ca.pem"),
    ]
}

pub fn recording_daemon_args(rec: &Path, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = ["-i", "cap0", "--record"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    a.push(rec.to_str().expect("utf8").to_owned());
    a.extend(["-b", "filesize:1000", "--flush-interval", "0.2"].map(str::to_owned));
    a.extend(extra.iter().map(|s| (*s).to_owned()));
    a
}

/// The recording's whole files (not the one being written), in order.
pub fn whole_files(rec: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(rec)
        .expect("recording")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcapng"))
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    v.sort();
    v
}

/// A `corecap serve --json` child in the lab's namespace, its socket `api.sock` and its
/// spool `spool` in a scratch directory; stopped by SIGTERM (by its PID), on drop too.
pub struct Daemon {
    child: Child,
    /// The API socket.
    pub socket: PathBuf,
    stderr: std::sync::mpsc::Receiver<String>,
    /// Its stdout, read as it comes (statistics lines come once a second with --json).
    stdout: std::sync::mpsc::Receiver<String>,
}

impl Daemon {
    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn start(lab: &Lab, dir: &Scratch, extra: &[&str]) -> Self {
        Self::start_at(lab, dir, dir.path("api.sock"), extra)
    }

    /// A daemon whose API socket is at `socket`.
    pub fn start_at(lab: &Lab, dir: &Scratch, socket: PathBuf, extra: &[&str]) -> Self {
        let spool = dir.path("spool");
        let mut child = Command::new(bin())
            .args(["serve", "--netns", &lab.netns, "--json", "--socket"])
            .arg(&socket)
            .arg("--spool")
            .arg(&spool)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start corecap serve");
        let rx = lines_of(child.stderr.take().expect("stderr"));
        let stdout = lines_of(child.stdout.take().expect("stdout"));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(l) if l.contains("serving on") => break,
                Ok(_) => {}
                Err(_) => {
                    if let Ok(Some(st)) = child.try_wait() {
                        panic!("serve exited early: {st}");
                    }
                    assert!(Instant::now() < deadline, "serve did not come up in 30 s");
                }
            }
        }
        Self {
            child,
            socket,
            stderr: rx,
            stdout,
        }
    }

    /// Runs `corecap request` against this daemon.
    pub fn request(&self, args: &[&str]) -> std::process::Output {
        Command::new(bin())
            .arg("request")
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run corecap request")
    }

    /// Runs `corecap request` against this daemon, expecting success.
    pub fn request_ok(&self, args: &[&str]) -> std::process::Output {
        let o = self.request(args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o
    }

    /// Runs `corecap request --json ...`, expecting success; returns the JSON.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let o = self.request(&a);
        assert!(
            o.status.success(),
            "request {args:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_slice(&o.stdout).expect("request prints JSON")
    }

    /// Starts a capture; returns its id.
    pub fn start_capture(&self, args: &[&str]) -> String {
        let mut a = vec!["start", "-i", "cap0"];
        a.extend_from_slice(args);
        let v = self.json(&a);
        assert_eq!(v["state"], "running", "{v}");
        v["id"].as_str().expect("id").to_owned()
    }

    /// Polls a capture until `pred` holds (at most 120 s: a loop-mounted disk's writes
    /// wait for the loop device's thread, which a machine running the whole suite on two
    /// cores can starve for tens of seconds); returns its last view.
    pub fn wait_for(&self, id: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let v = self.json(&["show", id]);
            if pred(&v) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "capture {id} never got there: {v}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One raw HTTP exchange on the socket; returns the status line and the body.
    pub fn raw(&self, bytes: &[u8]) -> (String, String) {
        let mut s = UnixStream::connect(&self.socket).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        s.write_all(bytes).expect("send");
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        let status = out.lines().next().unwrap_or("").to_owned();
        let body = out.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
        (status, body)
    }

    /// SIGTERM; waits for the exit and returns (success, the final views of the captures
    /// it printed on stdout; statistics lines left out).
    pub fn stop(self) -> (bool, Vec<Value>) {
        let (ok, lines) = self.stop_lines();
        let views = lines
            .into_iter()
            .filter(|v| v.get("type").is_none())
            .collect();
        (ok, views)
    }

    /// SIGTERM; waits for the exit and returns (success, every stdout line as JSON: the
    /// statistics lines, the captures' final views and the summary).
    pub fn stop_lines(mut self) -> (bool, Vec<Value>) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                break st;
            }
            assert!(Instant::now() < deadline, "serve did not stop in 30 s");
            std::thread::sleep(Duration::from_millis(20));
        };
        // The reader ends with the process's stdout.
        let mut lines = Vec::new();
        while let Ok(l) = self.stdout.recv_timeout(Duration::from_secs(5)) {
            lines.extend(serde_json::from_str::<Value>(&l).ok());
        }
        (status.success(), lines)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        while self.stderr.try_recv().is_ok() {}
    }
}

/// One thread of a process, as /proc shows it.
#[derive(Debug)]
pub struct ThreadStatus {
    /// Its name (`comm`).
    pub name: String,
    /// Its `status` text.
    pub status: String,
}

impl ThreadStatus {
    /// The first word of a `status` line (`Uid:`, `CapEff:`...), empty when missing.
    pub fn field(&self, key: &str) -> String {
        self.status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .unwrap_or("")
            .to_owned()
    }
}

/// Each thread of process `pid`. A short-lived thread (a connection's) may end between the
/// listing and the read; it is left out.
pub fn threads(pid: u32) -> Vec<ThreadStatus> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).expect("tasks") {
        let t = t.expect("task").path();
        let (Ok(name), Ok(status)) = (
            std::fs::read_to_string(t.join("comm")),
            std::fs::read_to_string(t.join("status")),
        ) else {
            continue;
        };
        out.push(ThreadStatus {
            name: name.trim().to_owned(),
            status,
        });
    }
    out
}

/// The id of the thread of process `pid` named `name` (its `comm`), if it has one.
pub fn thread_id(pid: u32, name: &str) -> Option<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .filter_map(Result::ok)
        .find(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name))
        .and_then(|t| t.file_name().to_str()?.parse().ok())
}

/// One thread of another process held off every CPU by the cgroup v1 freezer, until
/// dropped: then thawed and moved back to the root group. (SIGSTOP stops the whole
/// process, even when sent to one of its threads.)
pub struct Frozen {
    group: PathBuf,
    tid: u32,
}

impl Frozen {
    /// Freezes thread `tid` and waits (at most 10 s) until the kernel says it is frozen.
    /// None, said on stderr, where the machine has no cgroup v1 freezer.
    pub fn thread(tid: u32) -> Option<Self> {
        let root = Path::new("/sys/fs/cgroup/freezer");
        if !root.join("tasks").exists() {
            eprintln!("skipped: freezing thread {tid} (no cgroup v1 freezer here)");
            return None;
        }
        let group = root.join(format!(
            "corecap-test-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&group).expect("make the freezer group");
        let f = Self { group, tid };
        std::fs::write(f.group.join("tasks"), tid.to_string()).expect("move the thread");
        std::fs::write(f.group.join("freezer.state"), "FROZEN").expect("freeze");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(f.group.join("freezer.state"))
            .is_ok_and(|s| s.trim() != "FROZEN")
        {
            assert!(Instant::now() < deadline, "thread {tid} not frozen in 10 s");
            std::thread::sleep(Duration::from_millis(5));
        }
        Some(f)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = std::fs::write(self.group.join("freezer.state"), "THAWED");
        if let Some(root) = self.group.parent() {
            let _ = std::fs::write(root.join("tasks"), self.tid.to_string());
        }
        let _ = std::fs::remove_dir(&self.group);
    }
}

/// Whether capinfos says the capture file `p` is in strict time order.
pub fn capinfos_strict_order(p: &Path) -> bool {
    let o = Command::new("capinfos")
        .arg("-o")
        .arg(p)
        .output()
        .expect("run capinfos");
    assert!(
        o.status.success(),
        "capinfos -o {}: {}",
        p.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.starts_with("Strict time order:"))
        .unwrap_or_else(|| panic!("capinfos -o {} says no order: {out}", p.display()));
    line.trim_end().ends_with("True")
}
