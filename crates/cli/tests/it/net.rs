//! End-to-end tests of corecap: real traffic through veth pairs in namespaces the tests
//! create, files read back with corecap's reader, tshark and tcpdump. Each test is bounded
//! in packets and time and removes its lab. Without root the network tests skip.

use std::process::Command;

use crate::util::{self, u, Lab, Scratch};
use serde_json::Value;

fn worker_packets(v: &Value) -> Vec<u64> {
    v["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .map(|w| u(w, "packets"))
        .collect()
}

#[test]
#[ignore = "needs root"]
fn issue8_every_balance_mode_captures_exactly_what_was_sent() {
    let lab = Lab::new(1);
    for mode in ["flow", "cpu", "round-robin", "rollover"] {
        let cap = lab.capture(&["--workers", "2", "--balance", mode]);
        let sent = lab.gen(3000, &["--flows", "64", "--bidir"]);
        let v = cap.stop();
        assert_eq!(sent, 3000);
        assert_eq!(u(&v, "packets"), sent, "{mode}: {v}");
        assert_eq!(u(&v, "kernel_packets"), sent, "{mode}: {v}");
        assert_eq!(v["drops"]["kernel"], 0, "{mode}");
        assert_eq!(worker_packets(&v).len(), 2);
        if mode == "round-robin" {
            // LB alternates: both workers get about half.
            assert!(worker_packets(&v).iter().all(|p| *p >= 1000), "{mode}: {v}");
        }
    }
}

#[test]
#[ignore = "needs root"]
fn issue8_queue_mode_tags_each_worker_with_its_queue() {
    let lab = Lab::new(2);
    let dir = Scratch::new("qm");
    let out = dir.path("q.pcapng");
    let cap = lab.capture_to(&out, &["--balance", "queue", "--per-worker"]);
    // Two generator threads on two CPUs send on TX queues 0 and 1, flow by flow.
    let sent = lab.gen_on_two_queues(4000);
    let v = cap.stop();
    assert_eq!(u(&v, "packets"), sent, "{v}");
    let per = worker_packets(&v);
    assert_eq!(per.len(), 2, "one worker per RX queue: {v}");
    for w in 0..2u32 {
        let n = util::assert_queue_tagged(&dir.path(&format!("q.w{w}.pcapng")), w);
        assert_eq!(n as u64, per[w as usize]);
    }
}

#[test]
#[ignore = "needs root"]
fn issue8_flow_mode_keeps_both_directions_on_one_worker() {
    let lab = Lab::new(1);
    let dir = Scratch::new("flow");
    let out = dir.path("f.pcapng");
    let cap = lab.capture_to(
        &out,
        &["--workers", "2", "--balance", "flow", "--per-worker"],
    );
    let sent = lab.gen(4096, &["--flows", "512", "--bidir"]);
    let v = cap.stop();
    assert_eq!(u(&v, "packets"), sent);
    let owner = util::flow_owners(&[dir.path("f.w0.pcapng"), dir.path("f.w1.pcapng")]);
    assert_eq!(owner.len(), 512);
    assert!(
        owner.values().all(|(_, n)| *n == 8),
        "each flow: 4 packets each way"
    );
}

#[test]
#[ignore = "needs root"]
fn issue8_filter_captures_exactly_the_matching_half() {
    let lab = Lab::new(1);
    let cap = lab.capture(&["--workers", "2", "udp", "port", "5001"]);
    let sent = lab.gen(4000, &["--flows", "100", "--bidir"]);
    let v = cap.stop();
    assert_eq!(u(&v, "packets"), sent / 2, "{v}");
}

#[test]
#[ignore = "needs root"]
fn issue8_vlan_filter_on_tagged_traffic() {
    let lab = Lab::new(1);
    let dir = Scratch::new("vlan");
    let out = dir.path("v.pcapng");
    let cap = lab.capture_to(&out, &["--workers", "1", "vlan", "100"]);
    let a = lab.gen(300, &["--vlan", "100"]);
    let b = lab.gen(200, &["--vlan", "200"]);
    let c = lab.gen(100, &[]);
    let v = cap.stop();
    assert_eq!((a, b, c), (300, 200, 100));
    assert_eq!(u(&v, "packets"), 300, "{v}");
    // The writer put the stripped tag back into every frame.
    let pkts = util::read_all(&out);
    assert_eq!(pkts.len(), 300);
    assert!(pkts
        .iter()
        .all(|(d, _)| d[12..16] == [0x81, 0x00, 0x00, 100]));
}

#[test]
#[ignore = "needs root"]
fn issue8_tshark_reads_pcapng_with_queue_and_tcpdump_reads_pcap() {
    let lab = Lab::new(1);
    let dir = Scratch::new("peer");
    let ng = dir.path("t.pcapng");
    let cap = lab.capture_to(&ng, &["--merge", "--workers", "2"]);
    let sent = lab.gen(1000, &["--flows", "16", "--size", "128"]);
    let v = cap.stop();
    assert_eq!(u(&v, "packets"), sent);
    if util::need("tshark") {
        let out = Command::new("tshark")
            .arg("-r")
            .arg(&ng)
            .args(["-T", "fields", "-e", "frame.number", "-e", "frame.len"])
            .output()
            .expect("tshark");
        assert!(
            out.status.success(),
            "tshark: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.lines().count() as u64, sent);
        assert!(
            text.lines().all(|l| l.ends_with("\t124")),
            "128-byte frames are 124 bytes without FCS"
        );
        let verbose = Command::new("tshark")
            .args(["-r", ng.to_str().expect("utf8"), "-V", "-c", "1"])
            .output()
            .expect("tshark -V");
        let vt = String::from_utf8_lossy(&verbose.stdout).to_lowercase();
        assert!(vt.contains("queue"), "tshark shows the queue option: {vt}");
    } else {
        eprintln!("note: tshark not installed; pcapng check skipped");
    }
    let pc = dir.path("t.pcap");
    let cap = lab.capture_to(&pc, &["--pcap", "--workers", "1"]);
    let sent = lab.gen(500, &[]);
    let v = cap.stop();
    assert_eq!(u(&v, "packets"), sent);
    if util::need("tcpdump") {
        let out = Command::new("tcpdump")
            .args(["-r", pc.to_str().expect("utf8"), "-nn"])
            .output()
            .expect("tcpdump");
        assert!(
            out.status.success(),
            "tcpdump: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).lines().count() as u64,
            sent
        );
    } else {
        eprintln!("note: tcpdump not installed; pcap check skipped");
    }
}

#[test]
#[ignore = "needs root"]
fn issue8_sigterm_mid_capture_leaves_a_valid_file() {
    let lab = Lab::new(1);
    let dir = Scratch::new("term");
    let out = dir.path("s.pcapng");
    let cap = lab.capture_to(&out, &["--workers", "1"]);
    let netns = lab.netns.clone();
    let g = std::thread::spawn(move || {
        Command::new(util::bin())
            .args([
                "gen",
                "--netns",
                &netns,
                "-i",
                "gen0",
                "--duration",
                "1.5",
                "--rate",
                "20000",
            ])
            .output()
            .expect("gen")
    });
    std::thread::sleep(std::time::Duration::from_millis(600));
    let _ = Command::new("kill")
        .args(["-TERM", &cap.pid().to_string()])
        .status();
    let mut cap = cap;
    let v = cap.wait();
    let _ = g.join();
    let n = u(&v, "packets");
    assert!(n > 0, "captured something before SIGTERM");
    assert_eq!(
        util::read_all(&out).len() as u64,
        n,
        "every delivered packet is in the file"
    );
}

#[test]
#[ignore = "needs root"]
fn issue8_file_input_is_split_by_flow_and_counted() {
    let lab = Lab::new(1);
    let dir = Scratch::new("replay");
    let src = dir.path("src.pcapng");
    let cap = lab.capture_to(&src, &["--workers", "1"]);
    let sent = lab.gen(2000, &["--flows", "50", "--bidir"]);
    cap.stop();
    // Replaying needs no root; the same symmetric hash splits it.
    let (out, v) = util::replay(&src, &["--workers", "2", "port", "5001"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(u(&v, "packets"), sent / 2);
    assert_eq!(u(&v, "filtered"), sent / 2);
    assert!(worker_packets(&v).iter().all(|p| *p > 0));
}

fn expect_error(args: &[&str], needle: &str) {
    let out = util::corecap(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{args:?} should exit 2; stderr: {err}"
    );
    assert!(
        err.contains(needle),
        "{args:?}: expected '{needle}' in: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        err.lines()
            .filter(|l| l.starts_with("corecap: error"))
            .count(),
        1,
        "one error line: {err}"
    );
}

#[test]
#[ignore = "needs root"]
fn issue8_bad_inputs_get_one_clear_error() {
    let lab = Lab::new(2);
    let ns = lab.netns.as_str();
    let capture_error = |args: &[&str], needle: &str| {
        expect_error(&[&["capture", "--netns", ns, "-i"], args].concat(), needle);
    };
    capture_error(&["nosuch0"], "no such interface: nosuch0");
    capture_error(&["cap0@9"], "queue 9 is out of range");
    capture_error(&["cap0", "udp", "port"], "invalid filter 'udp port'");
    capture_error(&["cap0", "-B", "100000000M"], "of memory available");
    capture_error(
        &["cap0", "-w", "/nonexistent/dir/x.pcapng", "--per-worker"],
        "cannot create /nonexistent/dir/x.w0.pcapng",
    );
    capture_error(
        &["cap0", "--workers", "1", "-w", "/nonexistent/dir/x.pcapng"],
        "cannot create /nonexistent/dir/x.pcapng",
    );
    if util::need("setpriv") {
        let out = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
                util::bin(),
                "capture",
                "-i",
                "lo",
                "-c",
                "1",
            ])
            .output()
            .expect("setpriv");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("CAP_NET_RAW"), "{err}");
    }
}

#[test]
#[ignore = "needs root"]
fn issue8_truncated_file_names_the_offset_after_good_packets() {
    let lab = Lab::new(1);
    let dir = Scratch::new("trunc");
    let src = dir.path("t.pcap");
    let cap = lab.capture_to(&src, &["--pcap", "--workers", "1"]);
    lab.gen(10, &["--size", "100"]);
    cap.stop();
    let bytes = std::fs::read(&src).expect("read");
    // pcap: 24-byte header, then 10 records of 16 + 96 bytes. Cut inside the 8th record.
    assert_eq!(bytes.len(), 24 + 10 * 112);
    let cut = dir.path("cut.pcap");
    std::fs::write(&cut, &bytes[..24 + 7 * 112 + 20]).expect("write");
    let (out, v) = util::replay(&cut, &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("offset {}", 24 + 7 * 112)), "{err}");
    assert_eq!(
        u(&v, "packets"),
        7,
        "the 7 good packets were delivered first"
    );
}

fn rx_packets(lab: &Lab) -> u64 {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.netns,
            "cat",
            "/sys/class/net/cap0/statistics/rx_packets",
        ])
        .output()
        .expect("ip netns exec");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("rx_packets")
}

#[test]
#[ignore = "needs root"]
fn issue8_xdp_generator_sends_live_frames_that_are_all_accounted() {
    let lab = Lab::new(2);
    let cap = lab.capture(&["--workers", "2"]);
    let before = rx_packets(&lab);
    let sent = lab.gen(
        20_000,
        &["--engine", "xdp", "--flows", "4096", "--size", "64"],
    );
    let v = cap.stop();
    let received = rx_packets(&lab) - before;
    assert_eq!(sent, 20_000);
    assert_eq!(
        u(&v, "kernel_packets"),
        received,
        "every frame cap0 received was counted: {v}"
    );
    assert_eq!(
        u(&v, "packets") + v["drops"]["kernel"].as_u64().unwrap_or(0),
        received,
        "{v}"
    );
    // 4096 rotating destinations spread over both workers.
    assert!(worker_packets(&v).iter().all(|p| *p > 1000), "{v}");
}

#[test]
#[ignore = "needs root"]
fn issue8_count_stops_at_exactly_count_and_counts_the_rest() {
    let lab = Lab::new(1);
    let dir = Scratch::new("count");
    let out = dir.path("c.pcapng");
    let cap = lab.capture_to(&out, &["--workers", "2", "-c", "1000", "--merge"]);
    let sent = lab.gen(3000, &["--flows", "32", "--rate", "100000"]);
    let mut cap = cap;
    let v = cap.wait();
    assert_eq!(sent, 3000);
    assert_eq!(u(&v, "packets"), 1000, "{v}");
    assert_eq!(util::read_all(&out).len(), 1000);
}

#[test]
#[ignore = "needs root"]
fn issue8_rotation_keeps_the_newest_files_each_valid() {
    let lab = Lab::new(1);
    let dir = Scratch::new("rot");
    let out = dir.path("r.pcapng");
    let cap = lab.capture_to(&out, &["--workers", "1", "-b", "filesize:1000,files:3"]);
    // 6000 frames of 1518 bytes is about 9 MB: nine or ten 1 MB files, of which 3 are kept.
    let sent = lab.gen(6000, &["--size", "1518", "--rate", "100000"]);
    let v = cap.stop();
    assert_eq!(u(&v, "packets"), sent);
    // Each kept file has its index beside it; the indexes of deleted files are gone too.
    let mut kept: Vec<_> = std::fs::read_dir(&dir.0)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| !util::folder_metadata(&p.file_name().unwrap_or_default().to_string_lossy()))
        .collect();
    kept.sort();
    // Each kept file has its sessions beside it too, and those of deleted files are gone.
    assert_eq!(kept.len(), 9, "{kept:?}");
    let beside = |p: &std::path::PathBuf| corecap_store::names::is_beside(p);
    for p in &kept {
        if beside(p) {
            let capture = p.with_extension("");
            assert!(kept.contains(&capture), "{} has its capture", p.display());
        }
    }
    kept.retain(|p| !beside(p));
    assert_eq!(kept.len(), 3, "{kept:?}");
    let names: Vec<String> = kept
        .iter()
        .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
        .collect();
    assert!(
        names[0].starts_with("r_000") && names[0].ends_with(".pcapng"),
        "{names:?}"
    );
    for p in &kept {
        let n = util::read_all(p).len();
        assert!(n > 0 && n <= 700, "{} holds {n} packets", p.display());
    }
}

#[test]
#[ignore = "needs root"]
fn issue8_write_to_stdout_streams_a_pcapng_that_tshark_reads() {
    if !util::need("tshark") {
        eprintln!("skipped: tshark not installed");
        return;
    }
    let lab = Lab::new(1);
    let mut child = lab
        .capture_command()
        .args(["--workers", "2", "-c", "800", "--duration", "30", "-w", "-"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("capture");
    let stdout = child.stdout.take().expect("stdout");
    let tshark = Command::new("tshark")
        .args(["-r", "-", "-T", "fields", "-e", "frame.interface_queue"])
        .stdin(stdout)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("tshark");
    let rx = util::lines_of(child.stderr.take().expect("stderr"));
    loop {
        let line = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("capture reports it is ready");
        if line.contains("capturing on") {
            break;
        }
    }
    let sent = lab.gen(800, &["--flows", "8", "--rate", "50000"]);
    assert_eq!(sent, 800);
    let st = child.wait().expect("wait");
    assert!(st.success());
    let out = tshark.wait_with_output().expect("tshark output");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 800);
    assert!(
        text.lines().all(|l| l.trim() == "0"),
        "every packet carries queue 0"
    );
}

#[test]
#[ignore = "needs root"]
fn issue8_capture_threads_drop_capabilities_once_sockets_are_open() {
    let lab = Lab::new(1);
    let cap = lab.capture(&["--workers", "2"]);
    let ts = crate::util::threads(cap.pid());
    for t in &ts {
        let eff = t.field("CapEff:");
        assert_eq!(
            eff, "0000000000000000",
            "a capture thread kept capabilities: {eff}"
        );
    }
    assert!(ts.len() >= 3, "main thread and two workers");
    let sent = lab.gen(100, &[]);
    assert_eq!(u(&cap.stop(), "packets"), sent);
}
