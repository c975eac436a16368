//! The test harness: `Lab` (a namespace with a veth pair, removed on drop), `Gen` (the
//! generator), and `Capture` (a corecap capture process and its JSON summary).

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_corecap")
}

/// Whether the tests run as root. Tests that need root (namespaces, mounts, raw sockets)
/// are marked `#[ignore = "needs root"]`: run them as root with `--include-ignored`, so a
/// test that could not run shows as ignored, never as passed.
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
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
        let out = Command::new(bin())
            .args([
                "lab",
                "up",
                "--netns",
                &netns,
                "--queues",
                &queues.to_string(),
            ])
            .args(extra)
            .output()
            .expect("run corecap lab up");
        assert!(
            out.status.success(),
            "lab up failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self { netns }
    }

    /// Sends `count` frames of 256 two-way flows from two generator threads on two CPUs,
    /// so a 2-queue lab receives on both RX queues (like RSS); returns the count sent.
    #[allow(dead_code)]
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
        let out = Command::new(bin())
            .args([
                "gen",
                "--netns",
                &self.netns,
                "-i",
                "gen0",
                "--json",
                "--count",
                &count.to_string(),
            ])
            .args(extra)
            .output()
            .expect("run corecap gen");
        assert!(
            out.status.success(),
            "gen failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).expect("gen prints JSON");
        v["sent"].as_u64().expect("sent")
    }

    /// Starts a capture on cap0 with `args`; returns once it is capturing.
    pub fn capture(&self, args: &[&str]) -> Capture {
        Capture::start(&["--netns", &self.netns, "-i", "cap0"], args)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new(bin())
            .args(["lab", "down", "--netns", &self.netns])
            .output();
    }
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
        let mut child = Command::new(bin())
            .arg("capture")
            .args(pre)
            .args(["--json", "--stats-interval", "0", "--duration", "60"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start corecap capture");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
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
    #[allow(dead_code)]
    pub fn stderr_lines(&self) -> &[String] {
        &self.stderr
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
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
        let deadline = Instant::now() + Duration::from_secs(60);
        let st = loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                break st;
            }
            assert!(Instant::now() < deadline, "capture did not end in 60 s");
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .expect("stdout")
            .read_to_string(&mut out)
            .expect("read stdout");
        let last = out
            .lines()
            .rev()
            .find(|l| l.contains("\"summary\""))
            .unwrap_or_else(|| panic!("no summary in: {out}"));
        let v: Value = serde_json::from_str(last).expect("summary is JSON");
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
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                let mut out = String::new();
                self.child
                    .stdout
                    .take()
                    .expect("stdout")
                    .read_to_string(&mut out)
                    .expect("read stdout");
                assert!(st.success(), "capture failed ({st}): {out}");
                let last = out
                    .lines()
                    .rev()
                    .find(|l| l.contains("\"summary\""))
                    .unwrap_or_else(|| panic!("no summary in: {out}"));
                let v: Value = serde_json::from_str(last).expect("summary is JSON");
                assert_eq!(
                    v["balanced"],
                    Value::Bool(true),
                    "accounting must balance: {v}"
                );
                return v;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("capture did not end in 60 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
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

/// Runs corecap with `args` and returns its output.
pub fn corecap(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("run corecap")
}

/// Asserts that worker `w`'s file holds packets and that each carries queue `w`; returns
/// how many it holds.
#[allow(dead_code)]
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
