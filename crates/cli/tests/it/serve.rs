//! Issue 5: the on-demand daemon (`corecap serve`) and its client (`corecap request`),
//! on a veth lab in a namespace each test creates, with traffic of known shape.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{self, bin, read_all, u, Daemon, Lab, Scratch};
use serde_json::Value;

fn udp_dport(p: &[u8]) -> u16 {
    u16::from_be_bytes([p[36], p[37]])
}

fn ipv4_proto_dst(p: &[u8]) -> (u8, [u8; 4]) {
    (p[23], [p[30], p[31], p[32], p[33]])
}

#[test]
#[ignore = "needs root"]
fn issue5_three_captures_with_different_filters_get_exactly_their_packets() {
    let lab = Lab::new(1);
    let dir = Scratch::new("serve");
    let key = dir.path("key");
    assert!(
        util::corecap(&["keygen", "-o", key.to_str().expect("utf8")])
            .status
            .success()
    );
    let d = Daemon::start(
        &lab,
        &dir,
        &["-i", "cap0", "--key-file", key.to_str().expect("utf8")],
    );
    // Background TCP traffic runs the whole time; the UDP traffic below is sent only while
    // the UDP captures run, so what each should hold is known exactly.
    let mut background = Command::new(bin())
        .args(["gen", "--netns", &lab.netns, "-i", "gen0", "--proto", "tcp"])
        .args(["--flows", "8", "--rate", "4000", "--count", "120000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start background traffic");

    // The spawned capture below takes a socket opened ahead of need.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !String::from_utf8_lossy(&d.request(&["metrics"]).stdout)
        .contains("corecap_spare_sockets{interface=\"cap0\"} 2")
    {
        assert!(Instant::now() < deadline, "spare sockets never opened");
        std::thread::sleep(Duration::from_millis(20));
    }
    let a = d.start_capture(&["-w", "a.pcapng", "udp", "port", "5001"]);
    let b = d.start_capture(&[
        "--mode",
        "spawn",
        "-w",
        "b.pcapng",
        "udp and dst host 10.1.0.1",
    ]);
    let c = d.start_capture(&["-c", "500", "-w", "c.pcapng", "tcp"]);
    // --wait blocks until the count is reached and prints the final state.
    let waited = d.json(&[
        "start", "-i", "cap0", "-c", "300", "--output", "count", "--wait", "tcp",
    ]);
    assert_eq!(
        (waited["state"].as_str(), u(&waited, "packets")),
        (Some("done"), 300)
    );
    let f = d.start_capture(&["--output", "flows", "-w", "f.jsonl", "udp"]);
    assert_eq!(d.json(&["show", &a])["mode"], "attach");
    assert_eq!(d.json(&["show", &b])["mode"], "spawn");

    // 4 flows, round robin: 10.1.0.0-3, ports 5001 5002 5001 5002.
    let sent = lab.gen(4000, &["--flows", "4", "--rate", "20000"]);
    assert_eq!(sent, 4000);
    let va = d.wait_for(&a, |v| u(v, "packets") >= 2000);
    let vb = d.wait_for(&b, |v| u(v, "packets") >= 1000);
    let vc = d.wait_for(&c, |v| v["state"] == "done");
    assert_eq!(vc["reason"], "count reached", "{vc}");
    assert_eq!(u(&vc, "packets"), 500, "{vc}");
    // The count capture saw background traffic from its start: its lag is known.
    assert!(vc["lag_us"].as_f64().is_some_and(|l| l >= 0.0), "{vc}");
    d.wait_for(&f, |v| u(v, "packets") >= 4000);
    let sf = d.json(&["stop", &f]);
    assert_eq!(u(&sf, "packets"), 4000, "{sf}");
    let sa = d.json(&["stop", &a]);
    let sb = d.json(&["stop", &b]);
    for (s, want) in [(&sa, 2000), (&sb, 1000)] {
        assert_eq!(s["state"], "stopped", "{s}");
        assert_eq!(s["reason"], "stopped by request");
        assert_eq!(u(s, "packets"), want, "{s}");
        assert!(s["lag_us"].as_f64().is_some(), "thread lag reported: {s}");
        assert_eq!(
            s["drops"],
            serde_json::json!({"kernel": 0, "stage_full": 0, "app": 0, "disk": 0})
        );
        assert!(u(s, "file_bytes") > 0);
    }
    let _ = (va, vb);

    let spool = dir.path("spool");
    // One flow record per generated UDP flow, holding all its packets.
    let records: Vec<Value> = std::fs::read_to_string(spool.join("f.jsonl"))
        .expect("flow records")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(records.len(), 4, "{records:?}");
    assert!(records
        .iter()
        .all(|r| r["proto"] == 17 && u(r, "packets_fwd") == 1000));
    let pa = read_all(&spool.join("a.pcapng"));
    let pb = read_all(&spool.join("b.pcapng"));
    let pc = read_all(&spool.join("c.pcapng"));
    assert_eq!((pa.len(), pb.len(), pc.len()), (2000, 1000, 500));
    assert!(pa
        .iter()
        .all(|(p, _)| ipv4_proto_dst(p).0 == 17 && udp_dport(p) == 5001));
    assert!(pb
        .iter()
        .all(|(p, _)| ipv4_proto_dst(p) == (17, [10, 1, 0, 1])));
    assert!(pc.iter().all(|(p, _)| ipv4_proto_dst(p).0 == 6));
    let file = spool.join("a.pcapng");
    if let Some(n) = util::tshark_count_matching(&file, &["-Y", "udp.dstport == 5001"]) {
        assert_eq!(n, 2000);
    }

    // A sealed capture still running at SIGTERM is closed validly.
    let e = d.start_capture(&["--encrypt", "aes", "-w", "e.pcapng", "udp port 5002"]);
    assert_eq!(lab.gen(400, &["--flows", "4"]), 400);
    d.wait_for(&e, |v| u(v, "packets") >= 200);
    let list = d.json(&["list"]);
    assert_eq!(list.as_array().map(Vec::len), Some(6));
    let metrics = d.request(&["metrics"]);
    let m = String::from_utf8_lossy(&metrics.stdout);
    assert!(
        m.contains("corecap_thread_lag_seconds_count{mode=\"attach\"}"),
        "{m}"
    );
    assert!(m.contains(&format!("corecap_capture_packets_total{{id=\"{a}\",mode=\"attach\",interface=\"cap0\",state=\"stopped\"}} 2000")), "{m}");
    let cores = d.json(&["cores"]);
    assert!(cores.to_string().contains("base cap0 worker 0"), "{cores}");
    let _ = Command::new("kill")
        .args(["-TERM", &background.id().to_string()])
        .status();
    let _ = background.wait();
    let (ok, views) = d.stop();
    assert!(ok, "serve exits 0 on SIGTERM");
    let ve = views
        .iter()
        .find(|v| v["id"] == e.as_str())
        .expect("final view");
    assert_eq!(
        (ve["state"].as_str(), u(ve, "packets")),
        (Some("stopped"), 200)
    );
    let sealed = spool.join("e.pcapng.sealed");
    let plain = dir.path("e.pcapng");
    let o = util::corecap(&[
        "decrypt",
        sealed.to_str().expect("utf8"),
        "-o",
        plain.to_str().expect("utf8"),
        "--key-file",
        key.to_str().expect("utf8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let pe = read_all(&plain);
    assert_eq!(pe.len(), 200);
    assert!(pe.iter().all(|(p, _)| udp_dport(p) == 5002));
}

#[test]
#[ignore = "needs root"]
fn issue5_limits_bad_requests_and_access() {
    let lab = Lab::new(1);
    let dir = Scratch::new("serve-limits");
    let token = dir.path("token");
    let d = Daemon::start(
        &lab,
        &dir,
        &[
            "-i",
            "cap0",
            "--max-captures",
            "2",
            "--quota",
            "20K",
            "--listen",
            "127.0.0.1:7391",
            "--token-file",
            token.to_str().expect("utf8"),
            // Spawned captures here open their own socket (the other test takes spares).
            "--spares",
            "0",
        ],
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&d.socket)
        .expect("socket")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the socket is the owner's alone");
    let fails = |args: &[&str], status: u16, words: &str| {
        let o = d.request(args);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(&format!("HTTP {status}")), "{args:?}: {err}");
        assert!(err.contains(words), "{args:?}: wanted '{words}' in {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    };
    fails(&["start", "-i", "cap0", "udp port"], 400, "syntax error");
    fails(
        &["start", "-i", "nosuch0"],
        404,
        "no interface named 'nosuch0'",
    );
    fails(
        &["start", "-i", "cap0", "-w", "../escape.pcapng"],
        400,
        "outside the spool",
    );
    fails(
        &["start", "-i", "cap0", "-w", "/etc/escape"],
        400,
        "outside the spool",
    );
    fails(&["start", "-i", "cap0", "--encrypt", "aes"], 400, "no key");
    fails(&["show", "c99"], 404, "no capture 'c99'");
    assert!(!dir.path("escape.pcapng").exists());

    // Malformed, oversized and abandoned requests get a status; the daemon carries on.
    let (s, body) = d.raw(b"POST /captures HTTP/1.1\r\nContent-Length: 5\r\n\r\n{bad}");
    assert!(s.contains(" 400 "), "{s}");
    assert!(body.contains("invalid request JSON"), "{body}");
    let j = br#"{"interface":"cap0","fliter":"udp"}"#;
    let mut req = format!(
        "POST /captures HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
        j.len()
    )
    .into_bytes();
    req.extend_from_slice(j);
    let (s, body) = d.raw(&req);
    assert!(
        s.contains(" 400 ") && body.contains("unknown field `fliter`"),
        "{s} {body}"
    );
    let (s, _) = d.raw(b"POST /captures HTTP/1.1\r\nContent-Length: 100000000\r\n\r\n");
    assert!(s.contains(" 413 "), "{s}");
    let (s, _) = d.raw(b"\x00\x01garbage\r\n\r\n");
    assert!(s.contains(" 400 "), "{s}");
    let (s, _) = d.raw(b"PUT /captures HTTP/1.1\r\n\r\n");
    assert!(s.contains(" 405 "), "{s}");
    {
        // A client that goes away halfway through its body.
        let mut c = UnixStream::connect(&d.socket).expect("connect");
        c.write_all(b"POST /captures HTTP/1.1\r\nContent-Length: 50\r\n\r\n{\"inter")
            .expect("send");
    }
    let _ = UnixStream::connect(&d.socket).expect("connect and leave at once");

    // The concurrent limit.
    let x = d.start_capture(&["--output", "count", "udp"]);
    let y = d.start_capture(&["--output", "count", "tcp"]);
    fails(
        &["start", "-i", "cap0", "--output", "count"],
        429,
        "--max-captures 2",
    );
    d.json(&["stop", &x]);
    let z = d.start_capture(&["--output", "count"]);
    d.json(&["stop", &z]);
    d.json(&["stop", &y]);

    // The quota: a spool over it refuses file captures and still takes count captures.
    std::fs::write(dir.path("spool").join("old.pcapng"), vec![0u8; 30 * 1024]).expect("fill");
    fails(&["start", "-i", "cap0", "-w", "more.pcapng"], 429, "quota");
    let w = d.start_capture(&["--output", "count"]);
    d.json(&["stop", &w]);
    std::fs::remove_file(dir.path("spool").join("old.pcapng")).expect("remove");
    // A file capture that fills the spool is stopped at the quota, with a valid file.
    let q = d.start_capture(&["-w", "q.pcapng", "udp"]);
    let sp = d.start_capture(&["--mode", "spawn", "--output", "count", "udp"]);
    assert_eq!(lab.gen(2000, &["--size", "1000", "--rate", "20000"]), 2000);
    let vs = d.wait_for(&sp, |v| u(v, "packets") >= 2000);
    assert_eq!(u(&d.json(&["stop", &sp]), "packets"), 2000, "{vs}");
    let vq = d.wait_for(&q, |v| v["state"] != "running");
    assert_eq!(vq["state"], "stopped", "{vq}");
    assert!(
        vq["reason"].as_str().is_some_and(|r| r.contains("quota")),
        "{vq}"
    );
    let n = read_all(&dir.path("spool").join("q.pcapng")).len() as u64;
    assert_eq!(
        n,
        u(&vq, "packets"),
        "the file holds what the capture reports"
    );

    // TCP on loopback in the lab's namespace: no token, wrong token, right token.
    let tcp = |extra: &[&str]| {
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &lab.netns,
                bin(),
                "request",
                "--url",
                "http://127.0.0.1:7391",
            ])
            .args(extra)
            .args(["list"])
            .env_remove("CORECAP_TOKEN")
            .output()
            .expect("ip netns exec")
    };
    let o = tcp(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("HTTP 401"));
    let bad = dir.path("bad-token");
    std::fs::write(&bad, "0123456789abcdef0123456789abcdef").expect("write");
    let o = tcp(&["--token-file", bad.to_str().expect("utf8")]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("HTTP 401"));
    let o = tcp(&["--token-file", token.to_str().expect("utf8")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains(&q));

    let m = String::from_utf8_lossy(&d.request(&["metrics"]).stdout).to_string();
    assert!(
        m.contains("corecap_api_responses_total{code=\"429\"}"),
        "{m}"
    );
    let (ok, _) = d.stop();
    assert!(ok);
}

/// Captures attached and detached again and again during traffic (member ids and group
/// slots reused each time) take nothing from a capture that runs throughout: it holds
/// every packet sent, and no capture loses a packet in its pipe.
#[test]
#[ignore = "needs root"]
fn issue5_attach_detach_churn_leaves_the_others_exact() {
    let lab = Lab::new(1);
    let dir = Scratch::new("serve-churn");
    let d = Daemon::start(&lab, &dir, &["-i", "cap0", "--max-captures", "64"]);
    let whole = d.start_capture(&["-w", "whole.pcapng", "udp"]);
    let mut traffic = Command::new(bin())
        .args(["gen", "--netns", &lab.netns, "-i", "gen0", "--json"])
        .args(["--flows", "16", "--rate", "20000", "--count", "30000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start traffic");
    let mut churned = Vec::new();
    while traffic.try_wait().ok().flatten().is_none() && churned.len() < 200 {
        let id = d.start_capture(&["--output", "count", "udp", "port", "5001"]);
        std::thread::sleep(Duration::from_millis(5));
        churned.push(d.json(&["stop", &id]));
    }
    let out = traffic.wait_with_output().expect("traffic ends");
    let sent = u(
        &serde_json::from_slice::<Value>(&out.stdout).expect("gen JSON"),
        "sent",
    );
    assert_eq!(sent, 30000);
    assert!(churned.len() >= 10, "only {} cycles", churned.len());
    let v = d.wait_for(&whole, |v| u(v, "packets") >= sent);
    let fin = d.json(&["stop", &whole]);
    assert_eq!(u(&fin, "packets"), sent, "{v}");
    assert_eq!(
        read_all(&dir.path("spool").join("whole.pcapng")).len() as u64,
        sent
    );
    for c in churned.iter().chain([&fin]) {
        assert_eq!(c["state"], "stopped", "{c}");
        assert_eq!(
            c["drops"],
            serde_json::json!({"kernel": 0, "stage_full": 0, "app": 0, "disk": 0}),
            "{c}"
        );
    }
    let (ok, _) = d.stop();
    assert!(ok);
}

#[test]
#[ignore = "needs root"]
fn issue16_a_full_spool_fails_the_capture_with_the_reason() {
    let lab = Lab::new(1);
    let dir = Scratch::new("serve-full");
    let spool = dir.path("spool");
    std::fs::create_dir_all(&spool).expect("spool dir");
    let _disk = util::SmallDisk::mount_at(&spool, "2m");
    let d = Daemon::start(&lab, &dir, &["-i", "cap0"]);
    let id = d.start_capture(&["-w", "full.pcapng"]);
    // 4000 frames of 1514 bytes is 6 MB: the 2 MB spool fills.
    lab.gen(4000, &["--size", "1514", "--rate", "40000"]);
    let v = d.wait_for(&id, |v| v["state"] != "running");
    assert_eq!(v["state"], "failed", "{v}");
    let reason = v["reason"].as_str().expect("reason");
    assert!(
        reason.contains("full.pcapng") && reason.contains("No space left on device"),
        "{v}"
    );
    assert!(u(&v["drops"], "disk") > 0, "{v}");
    // What was written stays readable.
    let kept = read_all(&spool.join("full.pcapng")).len() as u64;
    assert_eq!(kept, u(&v, "packets"), "{v}");
}

#[test]
#[ignore = "needs root"]
fn issue16_serve_retain_keeps_the_newest_capture_files() {
    let lab = Lab::new(1);
    let dir = Scratch::new("serve-retain");
    let d = Daemon::start(&lab, &dir, &["-i", "cap0", "--retain", "3M"]);
    let mut ids = Vec::new();
    for n in 0..3 {
        // About 1.09 MB each: two fit in 3 MiB, three do not.
        let name = format!("r{n}.pcapng");
        let id = d.start_capture(&["-w", &name, "-c", "700"]);
        lab.gen(700, &["--size", "1514"]);
        let v = d.wait_for(&id, |v| v["state"] != "running");
        assert_eq!(v["state"], "done", "{v}");
        ids.push(id);
    }
    let spool = dir.path("spool");
    assert!(!spool.join("r0.pcapng").exists(), "the oldest file went");
    assert!(spool.join("r1.pcapng").exists() && spool.join("r2.pcapng").exists());
    let m = String::from_utf8_lossy(&d.request(&["metrics"]).stdout).into_owned();
    assert!(m.contains("corecap_retain_deleted_files_total 1"), "{m}");
    assert!(m.contains("corecap_retain_budget_bytes 3145728"), "{m}");
}

#[test]
#[ignore = "needs root"]
fn issue14_a_flows_name_in_use_is_refused_not_truncated() {
    let lab = Lab::new(1);
    let dir = Scratch::new("serve-flows");
    let d = Daemon::start(&lab, &dir, &["--share-cores"]);
    let id = d.start_capture(&["--output", "flows", "-w", "f.jsonl", "-c", "200"]);
    lab.gen(200, &["--flows", "4"]);
    let v = d.wait_for(&id, |v| v["state"] != "running");
    assert_eq!(v["state"], "done", "{v}");
    let file = dir.path("spool").join("f.g0m0.jsonl");
    let before = std::fs::read(&file).expect("the flows file");
    assert!(!before.is_empty());
    // The same name again: 409, and the first capture's records stay as they were.
    let o = d.request(&["start", "-i", "cap0", "--output", "flows", "-w", "f.jsonl"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("409"), "{o:?}");
    assert_eq!(std::fs::read(&file).expect("still there"), before);
    // A link planted under a member's name is never followed.
    let target = dir.path("outside");
    std::os::unix::fs::symlink(&target, dir.path("spool").join("g.g0m0.jsonl")).unwrap();
    let o = d.request(&["start", "-i", "cap0", "--output", "flows", "-w", "g.jsonl"]);
    assert!(!o.status.success(), "{o:?}");
    assert!(!target.exists(), "the link's target was not created");
}

#[test]
#[ignore = "needs root"]
fn issue14_idle_spare_sockets_are_released() {
    let lab = Lab::new(1);
    let dir = Scratch::new("serve-spares");
    let d = Daemon::start(&lab, &dir, &["--share-cores", "--spare-idle", "1.5"]);
    let id = d.start_capture(&["--mode", "spawn", "-c", "10", "-w", "s.pcapng"]);
    lab.gen(10, &[]);
    let v = d.wait_for(&id, |v| v["state"] != "running");
    assert_eq!(v["state"], "done", "{v}");
    let metric = |d: &Daemon| String::from_utf8_lossy(&d.request(&["metrics"]).stdout).into_owned();
    let line = "corecap_spare_sockets{interface=\"cap0\"}";
    // Spares are opened for the interface a capture spawned on...
    let deadline = Instant::now() + Duration::from_secs(20);
    while !metric(&d).contains(&format!("{line} 2")) {
        assert!(
            Instant::now() < deadline,
            "spares never opened: {}",
            metric(&d)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // ...and closed once no capture has spawned there for --spare-idle.
    let deadline = Instant::now() + Duration::from_secs(20);
    while metric(&d).contains(line) {
        assert!(Instant::now() < deadline, "spares kept: {}", metric(&d));
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[ignore = "needs root"]
fn issue17_serve_exports_flows_only_to_an_allowed_collector() {
    assert!(
        util::have("nfcapd"),
        "nfcapd is missing (.ci/run installs nfdump)"
    );
    let lab = Lab::new(1);
    let ns = lab.netns.as_str();
    lab.loopback_up();
    let dir = Scratch::new("serve-ipfix");
    let nf_dir = dir.path("nfcapd");
    std::fs::create_dir_all(&nf_dir).expect("dir");
    /// Ends the child (ours) if the test fails before stopping it.
    struct Reap(Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            if let Ok(None) = self.0.try_wait() {
                let _ = self.0.kill();
            }
            let _ = self.0.wait();
        }
    }
    // nfcapd on the namespace's loopback; `ip netns exec` execs it, so the PID is its own.
    let nfcapd = Command::new("ip")
        .args(["netns", "exec", ns, "nfcapd", "-w"])
        .arg(&nf_dir)
        .args(["-p", "9996", "-b", "127.0.0.1", "-t", "3600"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nfcapd");
    let mut nfcapd = Reap(nfcapd);
    let d = Daemon::start(
        &lab,
        &dir,
        &[
            "--share-cores",
            "--ipfix-collector",
            "ipfix://127.0.0.1:9996",
        ],
    );
    // A collector the operator did not allow: 400.
    let o = d.request(&[
        "start",
        "-i",
        "cap0",
        "--output",
        "flows",
        "--collector",
        "ipfix://127.0.0.1:9997",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("400") && err.contains("not allowed"), "{err}");
    let id = d.start_capture(&[
        "--output",
        "flows",
        "-w",
        "f.jsonl",
        "-c",
        "200",
        "--collector",
        "ipfix://127.0.0.1:9996",
    ]);
    lab.gen(200, &["--flows", "4"]);
    let v = d.wait_for(&id, |v| v["state"] != "running");
    assert_eq!(v["state"], "done", "{v}");
    let _ = d.stop();
    let _ = Command::new("kill")
        .args(["-TERM", &nfcapd.0.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Ok(None) = nfcapd.0.try_wait() {
        if Instant::now() > deadline {
            panic!("nfcapd did not end in 10 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = Command::new("nfdump")
        .arg("-R")
        .arg(&nf_dir)
        .args(["-q", "-o", "fmt:%pr %pkt"])
        .output()
        .expect("nfdump");
    let out = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<(String, u64)> = out
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?.to_owned(), f.next()?.parse().ok()?))
        })
        .collect();
    assert_eq!(rows.len(), 4, "{out}");
    assert!(rows.iter().all(|r| r.0 == "UDP"), "{out}");
    assert_eq!(rows.iter().map(|r| r.1).sum::<u64>(), 200, "{out}");
}

#[test]
#[ignore = "needs root"]
fn issue14_slow_clients_do_not_lock_out_others() {
    let lab = Lab::new(1);
    let dir = Scratch::new("serve-slow");
    let d = Daemon::start(&lab, &dir, &[]);
    // More slow clients than there are slots, each sending its request a byte a second.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let slow: Vec<_> = (0..80)
        .map(|_| {
            let (path, stop) = (d.socket.clone(), stop.clone());
            std::thread::spawn(move || {
                let Ok(mut s) = UnixStream::connect(&path) else {
                    return;
                };
                for b in b"GET /captures HTTP/1.1\r\n".iter().cycle().take(60) {
                    // Relaxed: a flag polled by these clients.
                    if stop.load(std::sync::atomic::Ordering::Relaxed)
                        || s.write_all(&[*b]).is_err()
                    {
                        return;
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // An ordinary request still gets its answer, at once.
    for _ in 0..3 {
        let t = Instant::now();
        let o = d.request(&["list"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    }
    // One deadline for the whole request: a client trickling bytes is cut within about
    // five seconds, not five seconds after its last byte.
    let mut s = UnixStream::connect(&d.socket).expect("connect");
    let t = Instant::now();
    let mut cut = false;
    for _ in 0..20 {
        if s.write_all(b"G").is_err() {
            cut = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let mut rest = String::new();
    let _ = s.read_to_string(&mut rest);
    assert!(cut || rest.contains("408"), "{rest}");
    assert!(t.elapsed() < Duration::from_secs(9), "{:?}", t.elapsed());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in slow {
        let _ = h.join();
    }
}

#[test]
#[ignore = "needs root"]
fn issue14_serve_runs_as_a_service_user_with_three_capabilities() {
    use std::os::unix::fs::MetadataExt;
    let lab = Lab::new(1);
    let dir = Scratch::new("serve-user");
    let spool = dir.path("spool");
    std::fs::create_dir(&spool).expect("spool");
    let nobody = 65534;
    for p in [&dir.0, &spool] {
        std::os::unix::fs::chown(p, Some(nobody), Some(nobody)).expect("chown");
    }
    std::fs::set_permissions(&spool, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("mode");
    let socket = dir.path("api.sock");
    // What crates/cli/debian/corecap.service asks of systemd: a user, three ambient
    // capabilities, no new privileges.
    let caps = "+net_raw,+net_admin,+ipc_lock";
    let mut child = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.netns,
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
        ])
        .args([
            "--clear-groups",
            &format!("--inh-caps={caps}"),
            &format!("--ambient-caps={caps}"),
        ])
        .args([
            &format!("--bounding-set=-all,{caps}"),
            "--no-new-privs",
            bin(),
        ])
        .args(["serve", "-i", "cap0", "--spares", "1", "--socket"])
        .arg(&socket)
        .arg("--spool")
        .arg(&spool)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("setpriv");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !socket.exists() {
        assert!(child.try_wait().expect("wait").is_none(), "serve exited");
        assert!(Instant::now() < deadline, "serve did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let req = |args: &[&str]| {
        Command::new(bin())
            .args(["request", "--socket"])
            .arg(&socket)
            .args(args)
            .output()
            .expect("request")
    };
    for (name, mode) in [("a.pcapng", "attach"), ("b.pcapng", "spawn")] {
        let o = req(&[
            "start", "-i", "cap0", "--mode", mode, "-c", "100", "-w", name,
        ]);
        assert!(
            o.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    lab.gen(300, &[]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(spool.join("a.pcapng").exists() && spool.join("b.pcapng").exists()) {
        assert!(Instant::now() < deadline, "captures did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
    for f in ["a.pcapng", "b.pcapng"] {
        let p = spool.join(f);
        assert_eq!(std::fs::metadata(&p).expect("file").uid(), nobody);
        assert_eq!(read_all(&p).len(), 100, "{f}");
    }
    // setpriv execs corecap in place, so the child's pid is the daemon's. The three
    // capabilities stay with the opener thread alone.
    assert_caps_only_in_opener(child.id(), 65534, 0x7000);
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

#[test]
#[ignore = "needs root"]
fn issue16_serve_retain_counts_flow_record_files_too() {
    let lab = Lab::new(1);
    let dir = Scratch::new("serve-retain-flows");
    let d = Daemon::start(&lab, &dir, &["-i", "cap0", "--retain", "1K"]);
    let mut files = Vec::new();
    for n in 0..3 {
        let id = d.start_capture(&[
            "--format",
            "flows",
            "-w",
            &format!("f{n}.jsonl"),
            "-c",
            "100",
        ]);
        lab.gen(100, &["--flows", "8"]);
        let v = d.wait_for(&id, |v| v["state"] != "running");
        assert_eq!(v["state"], "done", "{v}");
        files.push(PathBuf::from(v["path"].as_str().expect("path")));
    }
    // Each file of records is over the 1 KiB budget: only the newest stays (retention
    // runs as the capture's file closes, beside the state the test reads: a bounded wait).
    let deadline = Instant::now() + Duration::from_secs(30);
    while (files[0].exists() || files[1].exists()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!files[0].exists() && !files[1].exists(), "{files:?}");
    assert!(files[2].exists(), "{files:?}");
    let m = String::from_utf8_lossy(&d.request(&["metrics"]).stdout).into_owned();
    assert!(m.contains("corecap_retain_deleted_files_total 2"), "{m}");
}

/// Every thread of `pid` runs as `uid` with no_new_privs; the opener thread holds exactly
/// `caps` (effective and permitted) and every other thread holds none.
fn assert_caps_only_in_opener(pid: u32, uid: u32, caps: u64) {
    let ts = util::threads(pid);
    assert!(
        ts.iter().any(|t| t.name == "corecap-priv"),
        "no opener thread: {ts:?}"
    );
    assert!(ts.len() > 2, "{ts:?}");
    for t in &ts {
        assert_eq!(t.field("Uid:"), uid.to_string(), "{t:?}");
        assert_eq!(t.field("NoNewPrivs:"), "1", "{t:?}");
        let want = if t.name == "corecap-priv" { caps } else { 0 };
        let want = format!("{want:016x}");
        assert_eq!(t.field("CapEff:"), want, "{t:?}");
        assert_eq!(t.field("CapPrm:"), want, "{t:?}");
    }
}

#[test]
#[ignore = "needs root"]
fn issue14_serve_z_user_keeps_capabilities_in_the_opener_thread_only() {
    use std::os::unix::fs::MetadataExt;
    let lab = Lab::new(1);
    let dir = Scratch::new("serve-z");
    // A socket directory serve makes, so that it is the user's and the socket can be
    // removed at the end.
    let socket = dir.path("run/api.sock");
    let d = Daemon::start_at(
        &lab,
        &dir,
        socket.clone(),
        &["-i", "cap0", "--spares", "0", "-Z", "nobody"],
    );
    let nobody = 65534;
    // Attach: a consumer of the base capture. Spawn: a socket the opener makes, and a
    // filter that needs a live libpcap handle, compiled in a thread with no capability
    // on a handle the opener opened.
    let a = d.start_capture(&["--mode", "attach", "-c", "100", "-w", "a.pcapng", "udp"]);
    let b = d.start_capture(&[
        "--mode", "spawn", "-c", "100", "-w", "b.pcapng", "udp", "or", "vlan", "100",
    ]);
    assert_caps_only_in_opener(d.pid(), nobody, 0x7000);
    lab.gen(300, &[]);
    for id in [&a, &b] {
        let v = d.wait_for(id, |v| v["state"] != "running");
        assert_eq!(v["state"], "done", "{v}");
        assert_eq!(v["packets"], 100, "{v}");
    }
    let spool = dir.path("spool");
    assert_eq!(std::fs::metadata(&spool).expect("spool").uid(), nobody);
    for f in ["a.pcapng", "b.pcapng"] {
        let p = spool.join(f);
        assert_eq!(std::fs::metadata(&p).expect("file").uid(), nobody, "{f}");
        let pk = read_all(&p);
        assert_eq!(pk.len(), 100, "{f}");
    }
    // After the captures, still: the spare the opener reopens stays with it.
    assert_caps_only_in_opener(d.pid(), nobody, 0x7000);
    let (ok, _) = d.stop();
    assert!(ok, "serve -Z exits 0");
    assert!(!socket.exists(), "the socket is removed at the end");
}

/// Waits (at most 10 s) until process `pid` has exited: gone, or a zombie left for its
/// parent to reap.
fn wait_dead(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state follows the command name in parentheses: "pid (comm) Z ...".
        let state = stat.rsplit_once(") ").map(|(_, r)| &r[..1]);
        if matches!(state, None | Some("Z" | "X")) {
            return;
        }
        assert!(Instant::now() < deadline, "{pid} still runs: {stat}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The number of an id `cN`.
fn id_number(id: &str) -> u64 {
    id.strip_prefix('c')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not an id: {id}"))
}

/// A daemon killed without warning (SIGKILL, nothing closed or written at the end) and
/// started again over the same spool lists the captures it had: the one that ended
/// cleanly as `finished`, the one that ran as `recovered` (its part is on disk), never
/// `running`. An unnamed request gets a new id (no 409 for a name the earlier run took),
/// the earlier captures cannot be stopped, the listing follows the part once a recovery
/// names it, and the earlier run's files stay queryable.
#[test]
#[ignore = "needs root"]
fn issue21_serve_remembers_after_sigkill() {
    let lab = Lab::new(1);
    let dir = Scratch::new("serve-remembers");
    let spool = dir.path("spool");
    // Every batch goes to the disk as it comes: the part holds packets when it is killed.
    let d = Daemon::start(&lab, &dir, &["-i", "cap0", "--flush-interval", "0"]);
    // 4 flows, round robin: ports 5001 5002 5001 5002, 100 packets each port.
    let done = d.start_capture(&["-c", "50", "udp", "port", "5001"]);
    let running = d.start_capture(&["udp", "port", "5002"]);
    assert_eq!(lab.gen(200, &["--flows", "4"]), 200);
    let v = d.wait_for(&done, |v| v["state"] != "running");
    assert_eq!((v["state"].as_str(), u(&v, "packets")), (Some("done"), 50));
    d.wait_for(&running, |v| u(v, "packets") >= 100);
    let part = spool.join(format!(".{running}.pcapng.part"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(&part).map_or(0, |m| m.len()) == 0 {
        assert!(Instant::now() < deadline, "nothing of {running} on disk");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Written when each capture started and when the first ended, before any kill (the
    // end is saved once the capture's files are closed, just after the API says done).
    let want = [
        (done.clone(), "done".to_owned()),
        (running.clone(), "running".to_owned()),
    ];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let catalog: Value = serde_json::from_slice(
            &std::fs::read(spool.join(".corecap-captures.json")).expect("the spool's catalog"),
        )
        .expect("JSON");
        let states: Vec<(String, String)> = catalog["captures"]
            .as_array()
            .expect("captures")
            .iter()
            .map(|r| {
                (
                    r["id"].as_str().unwrap().into(),
                    r["state"].as_str().unwrap().into(),
                )
            })
            .collect();
        if states == want {
            break;
        }
        assert!(Instant::now() < deadline, "{states:?}");
        std::thread::sleep(Duration::from_millis(20));
    }

    let pid = d.pid();
    let killed = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    wait_dead(pid);
    drop(d);

    let d = Daemon::start(&lab, &dir, &["-i", "cap0", "--share-cores"]);
    let view = |id: &str| -> Value {
        let list = d.json(&["list"]);
        list.as_array()
            .expect("a list")
            .iter()
            .find(|v| v["id"] == id)
            .unwrap_or_else(|| panic!("{id} not listed: {list}"))
            .clone()
    };
    let (vd, vr) = (view(&done), view(&running));
    assert_eq!(
        (vd["state"].as_str(), u(&vd, "packets")),
        (Some("finished"), 50),
        "{vd}"
    );
    assert_eq!(vd["reason"], "count reached", "{vd}");
    assert_eq!(vd["earlier_run"], true, "{vd}");
    let whole = spool.join(format!("{done}.pcapng"));
    assert_eq!(vd["path"].as_str(), whole.to_str(), "{vd}");
    // The daemon recovered the killed capture's part when it started: named, listed as
    // recovered, and counted in the metrics.
    assert_eq!(vr["state"], "recovered", "{vr}");
    let recovered_name = vr["path"].as_str().unwrap_or_default().to_owned();
    assert!(
        recovered_name.contains(&format!("{running}.recovered-")),
        "the listing follows the recovered name: {vr}"
    );
    let m = String::from_utf8_lossy(&d.request(&["metrics"]).stdout).to_string();
    assert!(m.contains("corecap_recovered_files 1"), "{m}");
    assert_eq!(vr["earlier_run"], true, "{vr}");
    assert!(
        vr["reason"]
            .as_str()
            .is_some_and(|r| r.contains("the daemon stopped while it ran")),
        "{vr}"
    );
    let text = String::from_utf8_lossy(&d.request_ok(&["list"]).stdout).into_owned();
    assert!(
        text.contains("finished") && text.contains("recovered"),
        "{text}"
    );

    // Nothing of them runs: a stop is refused.
    for id in [&done, &running] {
        let o = d.request(&["stop", id]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains("HTTP 409") && err.contains("earlier run"),
            "{err}"
        );
    }

    // An unnamed request gets a new id and a new file. A spawned capture's start recovers
    // the parts a dead writer left in the spool: the listing follows the part to its name.
    let fresh = d.start_capture(&["--mode", "spawn", "-c", "20", "udp", "port", "5002"]);
    assert!(
        id_number(&fresh) > id_number(&done).max(id_number(&running)),
        "{fresh} after {done}, {running}"
    );
    assert_eq!(lab.gen(40, &["--flows", "4"]), 40);
    let vf = d.wait_for(&fresh, |v| v["state"] != "running");
    assert_eq!(
        (vf["state"].as_str(), u(&vf, "packets")),
        (Some("done"), 20)
    );
    let vr = view(&running);
    let recovered = PathBuf::from(vr["path"].as_str().expect("path"));
    let name = recovered
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        vr["state"] == "recovered" && name.starts_with(&format!("{running}.recovered-")),
        "{vr}"
    );
    let kept = read_all(&recovered);
    assert!(!kept.is_empty(), "{vr}");
    assert!(kept.iter().all(|(p, _)| udp_dport(p) == 5002));
    assert!(!part.exists());

    // The earlier run's files answer queries as before; the catalog is not a capture file.
    let out = dir.path("port5001.pcapng");
    d.request_ok(&["query", "-w", out.to_str().expect("utf8"), "udp port 5001"]);
    assert_eq!(read_all(&out).len(), 50);

    let (ok, views) = d.stop();
    assert!(ok, "serve exits 0 on SIGTERM");
    assert_eq!(views.len(), 3, "{views:?}");

    // A third start lists all three as they were settled.
    let d = Daemon::start(&lab, &dir, &["-i", "cap0"]);
    let list = d.json(&["list"]);
    let states: Vec<(&str, &str, &str)> = list
        .as_array()
        .expect("a list")
        .iter()
        .map(|v| {
            let (id, state) = (v["id"].as_str().unwrap(), v["state"].as_str().unwrap());
            (id, state, v["path"].as_str().unwrap())
        })
        .collect();
    let fresh_file = spool.join(format!("{fresh}.pcapng"));
    assert_eq!(
        states,
        [
            (done.as_str(), "finished", whole.to_str().unwrap()),
            (running.as_str(), "recovered", recovered.to_str().unwrap()),
            (fresh.as_str(), "finished", fresh_file.to_str().unwrap()),
        ]
    );
    let (ok, _) = d.stop();
    assert!(ok);
}

/// (TID, scheduling policy, real-time priority) of each thread of `pid` whose name starts
/// with `prefix`, from /proc/PID/task/TID/stat (fields 40 and 41).
fn sched_of(pid: u32, prefix: &str) -> Vec<(u32, u32, u32)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).expect("tasks") {
        let t = t.expect("task").path();
        let (Ok(name), Ok(stat)) = (
            std::fs::read_to_string(t.join("comm")),
            std::fs::read_to_string(t.join("stat")),
        ) else {
            continue;
        };
        if !name.trim().starts_with(prefix) {
            continue;
        }
        // Fields after the name in parentheses start at field 3.
        let rest = &stat[stat.rfind(')').expect("comm") + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let tid = t
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse().ok())
            .expect("tid");
        out.push((
            tid,
            f[38].parse().expect("policy"),
            f[37].parse().expect("rt"),
        ));
    }
    out.sort_unstable();
    out
}

#[test]
#[ignore = "needs root"]
fn issue25_spawned_captures_run_on_workers_kept_ready_at_fifo_priority() {
    let lab = Lab::new(1);
    let dir = Scratch::new("serve-standby");
    let d = Daemon::start(
        &lab,
        &dir,
        &[
            "-i",
            "cap0",
            "--share-cores",
            "--spares",
            "2",
            "--spawn-priority",
            "fifo:10",
        ],
    );
    // A standby is made, then given its priority by the opener: both are waited for.
    let ready = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = sched_of(d.pid(), "corecap-sb");
            if s.len() == n && s.iter().all(|s| (s.1, s.2) == (1, 10)) {
                return s;
            }
            assert!(Instant::now() < deadline, "standbys: {s:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // Two workers kept ready, parked, at SCHED_FIFO (policy 1) priority 10.
    let before = ready(2);
    let workers = sched_of(d.pid(), "corecap-w").len();
    let id = d.start_capture(&["--mode", "spawn", "-c", "100", "-w", "s.pcapng", "udp"]);
    // The capture's worker is a standby's thread: no worker thread was made for it.
    assert_eq!(sched_of(d.pid(), "corecap-w").len(), workers);
    lab.gen(300, &[]);
    let v = d.wait_for(&id, |v| v["state"] != "running");
    assert_eq!(
        (v["state"].as_str(), u(&v, "packets")),
        (Some("done"), 100),
        "{v}"
    );
    assert!(v["lag_us"].as_f64().is_some_and(|l| l >= 0.0), "{v}");
    assert_eq!(read_all(&dir.path("spool").join("s.pcapng")).len(), 100);
    // The refill thread made another in its place, off the request's path.
    let after = ready(2);
    assert!(after.iter().all(|s| (s.1, s.2) == (1, 10)), "{after:?}");
    assert_ne!(before, after, "a new standby replaced the one used");
    let (ok, _) = d.stop();
    assert!(ok);
}

#[test]
fn issue25_spawn_priority_is_fifo_1_to_99() {
    for bad in ["fifo:0", "fifo:100", "rr:5", "10"] {
        let o = util::corecap(&[
            "serve",
            "--spawn-priority",
            bad,
            "--socket",
            "/nonexistent/s",
        ]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {o:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("fifo:N") || e.contains("1-99"), "{bad}: {e}");
    }
}

/// `serve -Z USER --record DIR` over a spool and a recording folder that USER owns already
/// (mode 0700, as a package makes them): accepted, the recording's files are USER's, and a
/// query answers over the recording. A folder another user owns is still refused.
#[test]
#[ignore = "needs root"]
fn issue24_serve_z_accepts_folders_the_user_owns_and_records() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let lab = Lab::new(1);
    let dir = Scratch::new("serve-z-owned");
    let nobody = 65534;
    let (spool, rec) = (dir.path("spool"), dir.path("rec"));
    for p in [&spool, &rec] {
        std::fs::create_dir(p).expect("folder");
        std::os::unix::fs::chown(p, Some(nobody), Some(nobody)).expect("chown");
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700)).expect("mode");
    }
    let d = Daemon::start(
        &lab,
        &dir,
        &[
            "-i",
            "cap0",
            "--spares",
            "0",
            "-Z",
            "nobody",
            "--record",
            rec.to_str().expect("utf8"),
            "--flush-interval",
            "0.2",
        ],
    );
    lab.gen(500, &[]);
    std::thread::sleep(Duration::from_millis(800));
    let out = dir.path("q.pcapng");
    let o = d.request(&["query", "-w", out.to_str().expect("utf8"), "udp"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(read_all(&out).len(), 500, "the recording answers");
    let (ok, _) = d.stop();
    assert!(ok);
    let files: Vec<_> = std::fs::read_dir(&rec)
        .expect("recording")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".pcapng"))
        .collect();
    assert!(!files.is_empty(), "recorded files");
    for f in files {
        assert_eq!(f.metadata().expect("meta").uid(), nobody, "{:?}", f.path());
    }
    // Owned by someone else (neither root nor the -Z user): refused with the owner named.
    let other = dir.path("other");
    std::fs::create_dir(&other).expect("folder");
    std::os::unix::fs::chown(&other, Some(4242), Some(4242)).expect("chown");
    let o = Command::new(bin())
        .args([
            "serve", "--netns", &lab.netns, "-i", "cap0", "-Z", "nobody", "--socket",
        ])
        .arg(dir.path("b.sock"))
        .arg("--spool")
        .arg(&spool)
        .arg("--record")
        .arg(&other)
        .output()
        .expect("serve");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("belongs to uid 4242"), "{err}");
}

/// Issue 40: a request that named its file `c18446744073709551615.pcapng` pushed the ids to
/// their end, so that after a restart every unnamed capture got 409 (and, one id below,
/// the ids wrapped onto ones in use, which could not be stopped); an index's name or a
/// dangling link got 500. Now a name of the daemon's own form `cN...` and an index's name
/// are 400, a name in use (a dangling link too) is 409, and a spool that holds such a name
/// already (from a daemon before this check) neither stops unnamed captures nor gives an
/// id twice.
#[test]
#[ignore = "needs root"]
fn issue40_no_request_exhausts_or_duplicates_capture_ids() {
    let lab = Lab::new(1);
    let dir = Scratch::new("serve-ids");
    let spool = dir.path("spool");
    let fails = |d: &Daemon, name: &str, status: u16, words: &str| {
        let o = d.request(&["start", "-i", "cap0", "-w", name]);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains(&format!("HTTP {status}")) && err.contains(words),
            "{name}: wanted HTTP {status} and '{words}' in {err}"
        );
        assert_eq!(err.lines().count(), 1, "{name}: one line: {err}");
    };
    let d = Daemon::start(&lab, &dir, &["-i", "cap0"]);
    fails(&d, "c18446744073709551615.pcapng", 400, "the daemon's own");
    fails(&d, "c7", 400, "the daemon's own");
    fails(&d, "x.pcapng.idx", 400, ".idx");
    let named = d.start_capture(&["-w", "named.pcapng"]);
    fails(&d, "named.pcapng", 409, "exists");
    std::os::unix::fs::symlink(dir.path("nowhere"), spool.join("dangling.pcapng")).expect("link");
    fails(&d, "dangling.pcapng", 409, "exists");
    assert!(!spool.join("c18446744073709551615.pcapng").exists());
    assert!(!dir.path("nowhere").exists());
    assert_eq!(d.json(&["stop", &named])["state"], "stopped");
    let (ok, _) = d.stop();
    assert!(ok);

    // The name as a daemon before this check let a request give it: the highest id there
    // is, whose default name is taken.
    std::fs::write(spool.join("c18446744073709551615.pcapng"), b"").expect("plant");
    let d = Daemon::start(&lab, &dir, &["-i", "cap0"]);
    let ids: Vec<String> = (0..3).map(|_| d.start_capture(&[])).collect();
    let list = d.json(&["list"]);
    let listed: Vec<&str> = list
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|v| v["id"].as_str())
        .collect();
    let mut unique = listed.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), listed.len(), "an id listed twice: {list}");
    assert!(!ids.contains(&named), "{ids:?} after {named}");
    for id in &ids {
        assert_eq!(
            listed.iter().filter(|l| *l == id).count(),
            1,
            "{id}: {list}"
        );
        let v = d.json(&["stop", id]);
        assert_eq!(v["state"], "stopped", "{v}");
        assert!(spool.join(format!("{id}.pcapng")).exists(), "{v}");
    }
    let (ok, _) = d.stop();
    assert!(ok);
}

/// Issue 36: a capture downloads as one pcapng (`GET /captures/ID/pcap`, `request fetch`):
/// the packets its file holds, in the same order, under a `Content-Disposition` that names
/// it; a download never writes over a file, and a failed one leaves none.
#[test]
#[ignore = "needs root"]
fn issue36_a_capture_downloads_as_one_pcapng_and_never_over_a_file() {
    util::need("tshark");
    let lab = Lab::new(1);
    let dir = Scratch::new("serve-fetch");
    let d = Daemon::start(&lab, &dir, &["-i", "cap0"]);
    let id = d.start_capture(&["-c", "150", "-w", "f.pcapng", "udp"]);
    lab.gen(400, &[]);
    let v = d.wait_for(&id, |v| v["state"] != "running");
    assert_eq!(u(&v, "packets"), 150, "{v}");
    let got = dir.path("got.pcapng");
    let o = d.request_ok(&["fetch", &id, "-w", got.to_str().expect("utf8")]);
    let said = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(said.contains("(whole)"), "{said}");
    let frames = |p: &std::path::Path| {
        let o = Command::new("tshark")
            .arg("-nr")
            .arg(p)
            .args(["-T", "fields", "-e", "frame.time_epoch", "-e", "frame.len"])
            .args(["-o", "frame.generate_md5_hash:TRUE", "-e", "frame.md5_hash"])
            .output()
            .expect("tshark");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let theirs = frames(&dir.path("spool").join("f.pcapng"));
    assert_eq!(theirs.lines().count(), 150);
    assert_eq!(frames(&got), theirs);
    // Never over a file: the second fetch is refused and the first answer stays.
    let before = std::fs::read(&got).expect("read");
    let o = d.request(&["fetch", &id, "-w", got.to_str().expect("utf8")]);
    assert!(!o.status.success());
    assert_eq!(std::fs::read(&got).expect("read"), before);
    // An unknown capture: the daemon's 404 is said, and no file is left.
    let none = dir.path("none.pcapng");
    let o = d.request(&["fetch", "c999", "-w", none.to_str().expect("utf8")]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no capture 'c999'"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!none.exists());
    // What a browser sees: the file's name for saving it.
    let mut s = UnixStream::connect(&d.socket).expect("connect");
    write!(
        s,
        "GET /captures/{id}/pcap HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut head = Vec::new();
    s.read_to_end(&mut head).expect("read");
    let head = String::from_utf8_lossy(&head[..head.len().min(600)]).to_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains(&format!(
            "content-disposition: attachment; filename=\"{id}.pcapng\""
        )),
        "{head}"
    );
    let (ok, _) = d.stop();
    assert!(ok);
}

/// `serve --record` with a ring of files (`-b files:N`) is refused before it starts: a ring
/// deletes its oldest file whatever holds and alerts pin in it, where retention copies
/// what they keep out first; the message names the retention flags to use instead.
#[test]
#[ignore = "needs root"]
fn issue37_serve_refuses_a_ring_of_files_for_its_recording() {
    let lab = Lab::new(1);
    let dir = Scratch::new("serve-ring");
    let (spool, rec) = (dir.path("spool"), dir.path("rec"));
    let o = Command::new(bin())
        .args(["serve", "--netns", &lab.netns, "-i", "cap0", "--socket"])
        .arg(dir.path("s.sock"))
        .arg("--spool")
        .arg(&spool)
        .arg("--record")
        .arg(&rec)
        .args(["-b", "filesize:1000,files:3"])
        .output()
        .expect("serve");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("-b files:3: serve keeps its recording by --retain"),
        "{err}"
    );
    assert!(!rec.join("rec_00001.pcapng").exists());
}
