//! AF_XDP capture tests (issue 7) on a veth lab in native XDP mode.

use std::process::Command;

use crate::util::{self, u, Lab, Scratch};

fn xdp_attached(lab: &Lab) -> bool {
    let out = Command::new("ip")
        .args(["-n", &lab.netns, "link", "show", "cap0"])
        .output()
        .expect("ip link");
    String::from_utf8_lossy(&out.stdout).contains("xdp")
}

fn xdp_capture(lab: &Lab, iface: &str, args: &[&str]) -> util::Capture {
    util::Capture::start(&["--netns", &lab.netns, "-i", iface], args)
}

#[test]
#[ignore = "needs root"]
fn issue7_af_xdp_counts_exactly_with_queue_ids_and_detaches() {
    let lab = Lab::new(2);
    let dir = Scratch::new("xdp");
    let out = dir.path("x.pcapng");
    let cap = xdp_capture(
        &lab,
        "xdp:cap0",
        &["-w", out.to_str().expect("utf8"), "--per-worker"],
    );
    assert!(xdp_attached(&lab), "program attached while capturing");
    let sent = lab.gen(
        4000,
        &["--flows", "64", "--threads", "2", "--rate", "50000"],
    );
    let v = cap.stop();
    assert_eq!(u(&v, "packets"), sent, "{v}");
    assert!(!xdp_attached(&lab), "program detached after exit");
    let workers = v["workers"].as_array().expect("workers");
    assert_eq!(workers.len(), 2, "one AF_XDP worker per RX queue");
    for w in 0..2u32 {
        let pkts = util::read_all(&dir.path(&format!("x.w{w}.pcapng")));
        assert!(!pkts.is_empty(), "queue {w} got packets");
        assert!(
            pkts.iter().all(|(_, q)| *q == Some(w)),
            "worker {w} packets carry queue {w}"
        );
    }
}

#[test]
#[ignore = "needs root"]
fn issue7_af_xdp_filter_and_single_queue_adapter() {
    let lab = Lab::new(2);
    let cap = xdp_capture(&lab, "xdp:cap0@1", &["dst", "host", "10.1.0.1"]);
    // Thread 1 (CPU 1) sends the odd flows on TX queue 1, which veth hands to RX queue 1.
    let sent = lab.gen(4000, &["--flows", "4", "--threads", "2", "--rate", "50000"]);
    let v = cap.stop();
    assert_eq!(sent, 4000);
    // Queue 1 carries flows 1 and 3, 1000 frames each; the filter keeps flow 1 (10.1.0.1).
    assert_eq!(u(&v, "packets"), 1000, "{v}");
    assert_eq!(u(&v, "filtered"), 1000, "{v}");
    assert_eq!(
        v["workers"].as_array().map(|w| w.len()),
        Some(1),
        "one worker for the adapter"
    );
    assert!(!xdp_attached(&lab));
}

#[test]
#[ignore = "needs root"]
fn issue7_af_xdp_detaches_after_sigterm_and_refuses_a_foreign_program() {
    let lab = Lab::new(2);
    let first = xdp_capture(&lab, "xdp:cap0", &[]);
    // A second capture finds an XDP program it did not attach, and refuses to replace it.
    let out = util::corecap(&[
        "capture", "--netns", &lab.netns, "-i", "xdp:cap0", "-c", "1",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("already has an XDP program attached"), "{err}");
    let pid = first.pid();
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let mut first = first;
    first.wait();
    assert!(!xdp_attached(&lab), "detached after SIGTERM");
}

#[test]
#[ignore = "needs root"]
fn issue7_af_xdp_program_leaves_with_the_process_even_on_sigkill() {
    let lab = Lab::new(1);
    let cap = xdp_capture(&lab, "xdp:cap0", &[]);
    assert!(xdp_attached(&lab));
    let _ = Command::new("kill")
        .args(["-KILL", &cap.pid().to_string()])
        .status();
    // The BPF link closes with the process; give the kernel a moment to reap it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while xdp_attached(&lab) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        !xdp_attached(&lab),
        "an XDP program was left on the interface"
    );
    drop(cap);
}

/// Issue 7, item 4: with `--xdp-spread 2` one RX queue is spread over two AF_XDP sockets
/// (two workers) by the XDP program's symmetric flow hash: exact totals, a share for each
/// worker, both directions of every flow on one worker, and every frame tagged with its
/// RX queue.
#[test]
#[ignore = "needs root"]
fn issue7_xdp_spread_balances_one_queue_by_flow_in_the_kernel() {
    let lab = Lab::new(1);
    let dir = Scratch::new("xdp-spread");
    let out = dir.path("s.pcapng");
    let cap = xdp_capture(
        &lab,
        "xdp:cap0",
        &[
            "--xdp-spread",
            "2",
            "-w",
            out.to_str().expect("utf8"),
            "--per-worker",
        ],
    );
    let sent = lab.gen(4096, &["--flows", "512", "--bidir", "--rate", "50000"]);
    let v = cap.stop();
    assert_eq!(sent, 4096);
    assert_eq!(u(&v, "packets"), sent, "{v}");
    assert_eq!(u(&v, "kernel_packets"), sent, "{v}");
    assert_eq!(v["balanced"], true, "{v}");
    let workers = v["workers"].as_array().expect("workers");
    assert_eq!(workers.len(), 2, "two sockets on the one queue: {v}");
    let files = [dir.path("s.w0.pcapng"), dir.path("s.w1.pcapng")];
    let owner = util::flow_owners(&files);
    let mut per = [0usize; 2];
    for (n, f) in per.iter_mut().zip(&files) {
        let pkts = util::read_all(f);
        *n = pkts.len();
        assert!(
            pkts.iter().all(|(_, q)| *q == Some(0)),
            "every frame came from RX queue 0"
        );
    }
    assert_eq!(owner.len(), 512);
    assert!(
        owner.values().all(|(_, n)| *n == 8),
        "4 packets each way per flow"
    );
    assert!(
        per.iter().all(|&n| n >= 1024),
        "each worker gets a share: {per:?}"
    );
    assert!(!xdp_attached(&lab), "program detached after exit");
}

#[test]
fn issue7_xdp_spread_needs_an_xdp_input() {
    let out = util::corecap(&["capture", "-i", "lo", "--xdp-spread", "2", "-c", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--xdp-spread spreads AF_XDP queues"));
}
