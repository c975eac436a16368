//! Issue 21: a recording survives crashes and restarts. Captures are killed with SIGKILL at
//! random moments and started again over what they left; tcpdump reads every file, no
//! packet older than the flush interval is lost, no earlier file changes, and the byte
//! budget holds across runs.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::util::{self, Lab, Scratch};

/// Generators running in the background, killed (they are our children) when dropped.
struct Gens(Vec<Child>);

impl Drop for Gens {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn gen(lab: &Lab, args: &[&str]) -> Child {
    lab.gen_for("300", args)
}

/// A small deterministic generator of kill moments (printed, so a failure can be replayed).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, lo: u64, hi: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        lo + (self.0 >> 33) % (hi - lo)
    }
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The whole capture files of `dir` (hidden parts excluded), with their indexes' bytes.
fn whole_files(dir: &Path) -> BTreeMap<PathBuf, u64> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).expect("read dir").flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || corecap_store::names::is_beside(Path::new(&name)) {
            continue;
        }
        let len = e.metadata().map_or(0, |m| m.len());
        let idx = std::fs::metadata(corecap_index::sidecar_path(&p)).map_or(0, |m| m.len());
        out.insert(p, len + idx);
    }
    out
}

fn digest(p: &Path) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::fs::read(p).expect("read capture").hash(&mut h);
    h.finish()
}

/// `tcpdump -r` reads the file to its end without complaint; returns the slow stream's
/// (IP id, time) pairs in it.
fn tcpdump_slow(p: &Path, host: &str) -> Vec<(u64, f64)> {
    let o = Command::new("tcpdump")
        .args(["-tt", "-nn", "-v", "-r"])
        .arg(p)
        .args(["host", host])
        .output()
        .expect("run tcpdump");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && !err.contains("truncated") && !err.contains("rror"),
        "tcpdump -r {}: {err}",
        p.display()
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let ts: f64 = l.split_whitespace().next()?.parse().ok()?;
            let id = l.split("id ").nth(1)?.split(',').next()?.parse().ok()?;
            Some((id, ts))
        })
        .collect()
}

/// What the checks remember between restarts.
#[derive(Default)]
struct Seen {
    /// Every whole file checked so far, with its digest.
    digests: BTreeMap<PathBuf, u64>,
    recovered: usize,
    slow_checked: u64,
}

const SLOW_HOST: &str = "10.1.3.232";
/// `--retain` of the test, and the slack a restart may hold above it (the file recovered at
/// the start and the file being written, until the next close trims).
const BUDGET: u64 = 40 << 20;
const SLACK: u64 = 17 << 20;

impl Seen {
    /// After a (re)start: every file whole, none changed, the budget kept, and the slow
    /// stream of the run that started and was killed at `run` (Unix seconds) complete up to
    /// the flush interval before the kill.
    fn check(&mut self, dir: &Path, run: Option<(f64, f64)>) {
        let files = whole_files(dir);
        for (p, d) in &self.digests {
            if p.exists() {
                assert_eq!(digest(p), *d, "{} changed after it was whole", p.display());
            }
        }
        let mut slow = Vec::new();
        for p in files.keys() {
            if self.digests.contains_key(p) {
                continue;
            }
            slow.extend(tcpdump_slow(p, SLOW_HOST));
            self.recovered += usize::from(p.to_string_lossy().contains(".recovered-"));
            self.digests.insert(p.clone(), digest(p));
        }
        let total: u64 = files.values().sum();
        assert!(
            total <= BUDGET + SLACK,
            "{total} bytes kept over a budget of {BUDGET}: {files:?}"
        );
        let Some((started, killed)) = run else { return };
        let ids: BTreeSet<u64> = slow.iter().map(|s| s.0).collect();
        if let (Some(lo), Some(hi)) = (ids.first(), ids.last()) {
            let holes: Vec<u64> = (*lo..=*hi).filter(|i| !ids.contains(i)).collect();
            assert!(
                holes.is_empty(),
                "slow packets lost inside a run: {holes:?}"
            );
        }
        // The flush interval is 1 s; one more second for a loaded machine.
        if killed - started > 2.5 {
            let last = slow.iter().map(|s| s.1).fold(0.0, f64::max);
            assert!(
                last >= killed - 2.0,
                "the last slow packet on disk is from {:.3} s before the kill",
                killed - last
            );
        }
        self.slow_checked += ids.len() as u64;
    }
}

#[test]
#[ignore = "needs root"]
fn issue21_sigkill_at_random_moments_loses_nothing_older_than_the_flush() {
    let lab = Lab::new(1);
    let s = Scratch::new("crash");
    let rec = s.path("rec.pcapng");
    let rec_s = rec.to_str().expect("utf8");
    // The beacon has a group (a stage thread and files) of its own, so its file fills
    // slowly and only the flush timer puts it on disk; the dense traffic rotates.
    let beacon = format!("0=host {SLOW_HOST}");
    let dense = format!("1=not host {SLOW_HOST}");
    let args = [
        "--groups",
        "balance:1,balance:1",
        "--group-filter",
        &beacon,
        "--group-filter",
        &dense,
        "-b",
        "filesize:8000",
        "--retain",
        "40M",
        "--flush-interval",
        "1",
    ];
    let _gens = Gens(vec![
        // A beacon of 50 packets a second to one host, numbered by the IP id.
        gen(
            &lab,
            &[
                "--rate",
                "50",
                "--flows",
                "1",
                "--flow-base",
                "1000",
                "--size",
                "128",
            ],
        ),
        // Dense traffic: about 3 MB/s, a new file about every 2.5 s.
        gen(&lab, &["--rate", "5000", "--flows", "64", "--size", "512"]),
    ]);
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    eprintln!("kill moments from seed {seed}");
    let mut rng = Lcg(seed);
    let mut seen = Seen::default();
    let mut killed = None;
    for _ in 0..20 {
        let mut a = vec!["-w", rec_s];
        a.extend_from_slice(&args);
        let cap = lab.capture(&a);
        seen.check(&s.0, killed);
        let started = now_s();
        std::thread::sleep(Duration::from_millis(rng.next(300, 3500)));
        killed = Some((started, now_s()));
        cap.kill();
    }
    // A last start recovers the last run's file; it ends cleanly.
    let mut a = vec!["-w", rec_s];
    a.extend_from_slice(&args);
    let cap = lab.capture(&a);
    seen.check(&s.0, killed);
    let summary = cap.stop();
    seen.check(&s.0, None);
    assert_eq!(
        summary["balanced"],
        serde_json::Value::Bool(true),
        "{summary}"
    );
    // A run killed before its file's first flush leaves an empty part (removed: it held no
    // packet older than the interval); the others leave a file to recover.
    assert!(seen.recovered >= 3, "recovered {} files", seen.recovered);
    assert!(
        seen.slow_checked > 500,
        "{} slow packets",
        seen.slow_checked
    );
    assert!(
        whole_files(&s.0)
            .keys()
            .all(|p| !p.to_string_lossy().ends_with(".part")),
        "no part is left"
    );
}

#[test]
#[ignore = "needs root"]
fn issue21_a_failed_start_touches_nothing() {
    let lab = Lab::new(1);
    let s = Scratch::new("failed-start");
    let old = s.path("old.pcapng");
    std::fs::write(&old, b"an earlier run's bytes").expect("write");
    // Over an existing file: refused before anything is made.
    let out = lab
        .capture_command()
        .arg("-w")
        .arg(&old)
        .args(["--duration", "1"])
        .output()
        .expect("run corecap");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("old.pcapng exists"), "{err}");
    // A start that fails once its file was made: the ring's mmap refused (the address
    // space is limited below the ring's size).
    let new = s.path("new.pcapng");
    let out = Command::new("prlimit")
        .arg("--as=1500000000")
        .arg(util::bin())
        .args([
            "capture", "--netns", &lab.netns, "-i", "cap0", "-B", "2000M", "-w",
        ])
        .arg(&new)
        .args(["--duration", "1"])
        .output()
        .expect("run corecap under prlimit");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("mmap"), "{err}");
    let left: Vec<String> = std::fs::read_dir(&s.0)
        .expect("dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, vec!["old.pcapng".to_string()], "nothing else is left");
    assert_eq!(
        std::fs::read(&old).expect("read"),
        b"an earlier run's bytes",
        "the earlier file is untouched"
    );
}

/// A small ext4 filesystem in a loop device, unmounted on drop.
struct Ext4(Scratch);

impl Ext4 {
    fn new(mib: u32) -> Self {
        let s = Scratch::new("ext4");
        std::fs::create_dir(s.path("mnt")).expect("mnt");
        util::mount_ext4(&s.path("fs.img"), &s.path("mnt"), u64::from(mib), &[]);
        Self(s)
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path("mnt")).status();
    }
}

#[test]
#[ignore = "needs root"]
fn issue21_a_full_ext4_disk_names_the_os_error() {
    let lab = Lab::new(1);
    let fs = Ext4::new(8);
    let out = fs.0.path("mnt").join("full.pcapng");
    let cap = lab.capture_to(&out, &["--workers", "1"]);
    // 12,000 frames of 1514 bytes is 18 MB: the 8 MiB filesystem fills.
    lab.gen(12_000, &["--size", "1518", "--rate", "40000"]);
    let (success, v, err) = cap.stop_any();
    assert!(!success, "a full disk is a failure: {v}");
    assert!(
        err.contains("full.pcapng") && err.contains("No space left on device"),
        "one line naming the file and the OS error: {err}"
    );
    assert!(!err.contains("short write"), "{err}");
    assert_eq!(v["balanced"], true, "{v}");
    assert!(v["drops"]["disk"].as_u64().unwrap_or(0) > 0, "{v}");
    // What is on disk is whole: tcpdump reads it to the end.
    tcpdump_slow(&out, "10.0.0.1");
}

#[test]
#[ignore = "needs root"]
fn issue22_a_query_reads_the_file_being_written() {
    let lab = Lab::new(1);
    let s = Scratch::new("live");
    let rec = s.path("rec.pcapng");
    let cap = lab.capture_to(&rec, &["-b", "filesize:64000", "--flush-interval", "1"]);
    let sent = lab.gen(
        60,
        &[
            "--rate",
            "100",
            "--flows",
            "1",
            "--flow-base",
            "1000",
            "--size",
            "128",
        ],
    );
    // The flush interval has passed: every packet is on disk, in the file being written.
    std::thread::sleep(Duration::from_millis(2500));
    let part = std::fs::read_dir(&s.0)
        .expect("dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".part"))
        .expect("the file being written");
    // tcpdump reads the part's whole blocks, then stops at the padding after them.
    let o = Command::new("tcpdump")
        .args(["-nn", "-r"])
        .arg(&part)
        .args(["host", SLOW_HOST])
        .output()
        .expect("run tcpdump");
    let on_disk = o.stdout.iter().filter(|&&b| b == b'\n').count() as u64;
    assert_eq!(on_disk, sent, "tcpdump reads every packet from the part");
    // The answer goes beside the recording, not into it (a query never writes over a file
    // it reads).
    let answers = Scratch::new("live-answers");
    let out = answers.path("q.pcapng");
    let q = |args: &[&str]| {
        let mut a = vec![
            "query",
            "--force",
            "--json",
            "-w",
            out.to_str().expect("utf8"),
        ];
        a.extend_from_slice(args);
        let o = util::corecap(&a);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).expect("json")
    };
    let dir = s.0.to_str().expect("utf8");
    let v = q(&[dir, "host", SLOW_HOST]);
    assert_eq!(util::u(&v, "packets"), sent, "{v}");
    assert_eq!(util::u(&v, "files_live"), 1, "{v}");
    assert_eq!(util::u(&v, "files_truncated"), 0, "{v}");
    let summary = cap.stop();
    assert_eq!(util::u(&summary, "packets"), sent);
    let v = q(&[dir, "host", SLOW_HOST]);
    assert_eq!(util::u(&v, "packets"), sent, "{v}");
    assert_eq!(util::u(&v, "files_live"), 0, "{v}");
}

#[test]
#[ignore = "needs root"]
fn issue22_retention_waits_for_a_query_and_queries_stay_whole() {
    let lab = Lab::new(1);
    let s = Scratch::new("lease");
    let rec = s.path("rec.pcapng");
    let budget: u64 = 3 << 20;
    let cap = lab.capture_to(&rec, &["-b", "filesize:1000", "--retain", "3M"]);
    // A reader holds the folder's lease (as a query does) while 8 MB arrive.
    let lease = s.path(".corecap-lease");
    let mut holder = Command::new("flock")
        .arg("-s")
        .arg(&lease)
        .args(["sleep", "4"])
        .spawn()
        .expect("flock");
    std::thread::sleep(Duration::from_millis(300));
    lab.gen(
        16_000,
        &["--size", "512", "--rate", "8000", "--flows", "16"],
    );
    let held: u64 = whole_files(&s.0).values().sum();
    assert!(
        held > budget + (2 << 20),
        "nothing deleted under the lease: {held}"
    );
    let _ = holder.wait();
    // Queries run while retention deletes: each is whole, or fails loudly.
    let answers = Scratch::new("lease-answers");
    let out = answers.path("q.pcapng");
    let dir = s.0.to_str().expect("utf8").to_owned();
    let queries = std::thread::spawn(move || {
        let mut whole = 0;
        for _ in 0..20 {
            let o = util::corecap(&[
                "query",
                "--force",
                "--json",
                "-w",
                out.to_str().expect("utf8"),
                &dir,
            ]);
            if o.status.success() {
                let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
                assert_eq!(util::u(&v, "files_truncated"), 0, "{v}");
                whole += 1;
            } else {
                assert!(!o.stderr.is_empty(), "a failed query says why");
            }
        }
        whole
    });
    lab.gen(
        16_000,
        &["--size", "512", "--rate", "8000", "--flows", "16"],
    );
    let whole = queries.join().expect("queries");
    assert!(whole > 0);
    let summary = cap.stop();
    let kept: u64 = whole_files(&s.0).values().sum();
    assert!(kept <= budget + (1 << 20), "{kept} bytes kept: {summary}");
}

#[test]
#[ignore = "needs root"]
fn issue21_writers_hold_no_privilege() {
    let lab = Lab::new(1);
    let s = Scratch::new("caps");
    let rec = s.path("rec.pcapng");
    // Root, no -Z: two workers with a disk writer each, and a pipeline's stage writing too.
    let cap = lab.capture_to(
        &rec,
        &["--workers", "2", "-b", "filesize:1000", "--per-worker"],
    );
    let piped = s.path("piped.pcapng");
    let pipe = lab.capture_to(&piped, &["--groups", "balance:1"]);
    for pid in [cap.pid(), pipe.pid()] {
        let ts = util::threads(pid);
        assert!(
            ts.iter().filter(|t| t.name == "corecap-disk").count() >= 1,
            "disk writers: {:?}",
            ts.iter().map(|t| &t.name).collect::<Vec<_>>()
        );
        for t in &ts {
            assert_eq!(
                t.field("CapEff:"),
                "0000000000000000",
                "thread {} kept capabilities",
                t.name
            );
        }
    }
    lab.gen(2000, &["--size", "1024"]);
    let a = cap.stop();
    let b = pipe.stop();
    assert_eq!(util::u(&a, "packets"), 2000, "{a}");
    assert_eq!(util::u(&b, "packets"), 2000, "{b}");
}
