//! `corecap tune` (issue 6) through the command line: plans as JSON from fixture roots,
//! apply with --dry-run, apply and restore, and `tune show` on a real veth.

use std::path::{Path, PathBuf};

use crate::util::{self, corecap, Lab, Scratch};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tune/tests/fixtures")
        .join(name)
}

fn run_ok(args: &[&str]) -> String {
    let out = corecap(args);
    assert!(
        out.status.success(),
        "corecap {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A copy of a fixture root in a scratch directory.
fn copy(name: &str, s: &Scratch) -> PathBuf {
    let dst = s.path(name);
    let ok = std::process::Command::new("cp")
        .arg("-a")
        .arg(fixture(name))
        .arg(&dst)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    dst
}

#[test]
fn issue6_plan_json_on_dual_socket_fixture() {
    let root = fixture("dual-node1");
    let out = run_ok(&[
        "tune",
        "plan",
        "-i",
        "eth0",
        "--root",
        root.to_str().unwrap(),
        "--json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["interface"], "eth0");
    assert_eq!(v["node"], 1);
    let cpus: Vec<u64> = v["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["cpu"].as_u64().unwrap())
        .collect();
    assert_eq!(cpus, vec![1, 3, 5, 7]);
    assert_eq!(v["workers"][0]["irq"], 50);
    assert_eq!(v["workers"][0]["irq_cpu"], 9);
    assert_eq!(v["stage_cpus"].as_array().unwrap().len(), 8);
    let kinds: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["wrong_node", "pause"]);
}

#[test]
fn issue6_apply_dry_run_then_apply_then_restore() {
    let s = Scratch::new("tune");
    let root = copy("irqbalance", &s);
    let r = root.to_str().unwrap();
    let irq =
        |n: u32| std::fs::read_to_string(root.join(format!("proc/irq/{n}/smp_affinity_list")));

    let dry = run_ok(&["tune", "apply", "-i", "eth0", "--root", r, "--dry-run"]);
    assert!(
        dry.contains("would write /proc/irq/70/smp_affinity_list = 4 (was 0)"),
        "{dry}"
    );
    assert_eq!(dry.lines().count(), 4, "{dry}");
    assert_eq!(irq(70).unwrap(), "0\n", "dry run wrote");

    let out = corecap(&["tune", "apply", "-i", "eth0", "--root", r]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("irqbalance is running (pid 1234)"), "{err}");
    for (n, cpu) in (70..74).zip(4..8) {
        assert_eq!(irq(n).unwrap(), format!("{cpu}\n"));
    }
    assert!(root.join("var/lib/corecap/tune-eth0.json").exists());

    let back = run_ok(&["tune", "restore", "-i", "eth0", "--root", r]);
    assert_eq!(back.lines().count(), 4, "{back}");
    for n in 70..74 {
        assert_eq!(irq(n).unwrap(), "0\n");
    }
    let again = corecap(&["tune", "restore", "-i", "eth0", "--root", r]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing to restore"));
}

#[test]
fn issue6_bad_input() {
    let root = fixture("vm2");
    let r = root.to_str().unwrap();
    let out = corecap(&["tune", "show", "-i", "nope0", "--root", r]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no such interface: nope0"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let out = corecap(&["tune", "plan", "-i", "eth0", "--root", "/nonexistent-root"]);
    assert_eq!(out.status.code(), Some(2));
    let out = corecap(&["tune", "plan", "-i", "eth0", "--root", r, "--workers", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
#[ignore = "needs root"]
fn issue6_show_on_veth_says_what_the_driver_lacks() {
    let lab = Lab::new(2);
    let out = run_ok(&["tune", "show", "-i", "cap0", "--netns", &lab.netns]);
    assert!(out.contains("virtual device"), "{out}");
    assert!(out.contains("driver: veth"), "{out}");
    assert!(out.contains("queues in sysfs: 2 RX, 2 TX"), "{out}");
    assert!(
        out.contains("pause frames: not supported by the driver"),
        "{out}"
    );
    assert!(out.contains("queue IRQs: none found"), "{out}");

    let plan = run_ok(&[
        "tune", "plan", "-i", "cap0", "--netns", &lab.netns, "--json",
    ]);
    let v: Value = serde_json::from_str(&plan).unwrap();
    assert_eq!(v["workers"].as_array().unwrap().len(), 2);
    assert_eq!(v["workers"][1]["queue"], 1);
    assert!(v["workers"][0]["irq"].is_null());
    assert_eq!(v["warnings"][0]["kind"], "no_irqs");

    // A snapshot of the live veth plans the same as the live machine.
    let s = Scratch::new("snap");
    let snap = s.path("snap");
    run_ok(&[
        "tune",
        "snapshot",
        "-i",
        "cap0",
        "--netns",
        &lab.netns,
        "-o",
        snap.to_str().unwrap(),
    ]);
    let again = run_ok(&[
        "tune",
        "plan",
        "-i",
        "cap0",
        "--root",
        snap.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(again, plan);
    // Nothing to apply on veth: no IRQs, no rings, no pause, channels as they are.
    let dry = run_ok(&[
        "tune",
        "apply",
        "-i",
        "cap0",
        "--netns",
        &lab.netns,
        "--dry-run",
    ]);
    assert!(dry.contains("already in place"), "{dry}");
}

#[test]
#[ignore = "needs root"]
fn issue6_capture_auto_places_one_worker_per_queue() {
    let lab = Lab::new(2);
    let dir = Scratch::new("auto");
    let out = dir.path("a.pcapng");
    let cap = lab.capture(&["--auto", "--per-worker", "-w", out.to_str().unwrap()]);
    let said = cap.stderr_lines().join("\n");
    assert!(said.contains("--auto: 2 workers on CPUs 0-1"), "{said}");
    assert!(said.contains("has no queue IRQs"), "{said}");
    let sent = lab.gen_on_two_queues(4000);
    let v = cap.stop();
    assert_eq!(util::u(&v, "packets"), sent, "{v}");
    let workers = v["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2, "{v}");
    // The plan's mapping: queue i on worker i, pinned to the plan's CPU i.
    for (w, info) in workers.iter().enumerate() {
        assert_eq!(info["cpu"].as_u64(), Some(w as u64), "{v}");
        util::assert_queue_tagged(&dir.path(&format!("a.w{w}.pcapng")), w as u32);
    }
}
