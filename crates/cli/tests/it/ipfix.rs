//! IPFIX export checked by real collectors and decoders: nfcapd (Debian's nfdump 1.7)
//! listening on the loopback of the lab's namespace stores what corecap exports, and tshark
//! decodes every message of the same export. Each test is bounded in packets and time,
//! stops the processes it started by their PIDs and removes its lab.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{self, u, Lab, Scratch};
use serde_json::Value;

/// A process started in the lab's namespace, ended by its PID (SIGTERM) on drop.
struct Daemon {
    child: Child,
    name: &'static str,
}

impl Daemon {
    fn start(netns: &str, name: &'static str, args: &[&str]) -> Self {
        // `ip netns exec` execs the program: the PID is the daemon's.
        let child = Command::new("ip")
            .args(["netns", "exec", netns, name])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        Self { child, name }
    }

    /// SIGTERM, then wait (at most 10 s) for it to end.
    fn stop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Ok(None) = self.child.try_wait() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("{} did not end in 10 s after SIGTERM", self.name);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Milliseconds since the epoch of nfdump's "YYYY-MM-DDTHH:MM:SS.mmm" (printed in UTC).
fn epoch_ms(s: &str) -> u64 {
    let n = |a: usize, b: usize| -> i64 { s[a..b].parse().expect("digits") };
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    // Days from civil (H. Hinnant).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + n(11, 13) * 3600 + n(14, 16) * 60 + n(17, 19);
    (secs * 1000 + n(20, 23)) as u64
}

type Key = (String, String, u64, u64, u64);
/// (packets, bytes, first ms, last ms) per (src, dst, sport, dport, proto).
type Flows = BTreeMap<Key, (u64, u64, u64, u64)>;

/// corecap's JSON records, one entry per direction that saw packets.
fn json_flows(path: &Path) -> Flows {
    let mut out = Flows::new();
    let text = std::fs::read_to_string(path).expect("flow records");
    for l in text.lines() {
        let r: Value = serde_json::from_str(l).expect("JSON record");
        let (src, dst) = (
            r["src"].as_str().expect("src"),
            r["dst"].as_str().expect("dst"),
        );
        let (sp, dp, pr) = (u(&r, "sport"), u(&r, "dport"), u(&r, "proto"));
        for (dir, k) in [
            ("fwd", (src.to_owned(), dst.to_owned(), sp, dp, pr)),
            ("rev", (dst.to_owned(), src.to_owned(), dp, sp, pr)),
        ] {
            let p = u(&r, &format!("packets_{dir}"));
            if p == 0 {
                continue;
            }
            let v = (
                p,
                u(&r, &format!("bytes_{dir}")),
                u(&r, &format!("first_{dir}_ns")) / 1_000_000,
                u(&r, &format!("last_{dir}_ns")) / 1_000_000,
            );
            assert!(v.2 <= v.3, "a direction ends before it starts: {r}");
            assert!(out.insert(k, v).is_none(), "one record per flow: {r}");
        }
    }
    out
}

/// What nfcapd stored, read back with `nfdump -o json`.
fn nfdump_flows(dir: &Path) -> (Flows, Vec<Value>) {
    let mut out = Flows::new();
    let mut all = Vec::new();
    for e in std::fs::read_dir(dir).expect("nfcapd dir") {
        let p = e.expect("entry").path();
        let name = p.file_name().expect("name").to_string_lossy().into_owned();
        assert!(
            !name.contains("current"),
            "nfcapd left {name} unrotated after SIGTERM"
        );
        let o = Command::new("nfdump")
            .env("TZ", "UTC")
            .arg("-r")
            .arg(&p)
            .args(["-o", "json"])
            .output()
            .expect("run nfdump");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8_lossy(&o.stdout);
        if text.trim().is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("nfdump JSON: {e}: {text}"));
        for r in v.as_array().expect("array") {
            all.push(r.clone());
            let k = (
                r["src4_addr"].as_str().expect("src4").to_owned(),
                r["dst4_addr"].as_str().expect("dst4").to_owned(),
                u(r, "src_port"),
                u(r, "dst_port"),
                u(r, "proto"),
            );
            let v = (
                u(r, "in_packets"),
                u(r, "in_bytes"),
                epoch_ms(r["first"].as_str().expect("first")),
                epoch_ms(r["last"].as_str().expect("last")),
            );
            assert!(out.insert(k, v).is_none(), "one record per flow: {r}");
        }
    }
    (out, all)
}

/// tshark on `pcap`, decoding UDP port `port` as IPFIX (`-d udp.port==PORT,cflow`), with
/// `args`.
fn tshark_cflow(pcap: &Path, port: &str, args: &[&str]) -> std::process::Output {
    Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(["-d", &format!("udp.port=={port},cflow")])
        .args(args)
        .output()
        .expect("run tshark")
}

#[test]
fn test_epoch_ms() {
    assert_eq!(epoch_ms("1970-01-01T00:00:00.000"), 0);
    assert_eq!(epoch_ms("2026-11-18T11:06:40.001"), 1_795_000_000_001);
}

#[test]
#[ignore = "needs root"]
fn issue17_nfcapd_stores_the_flows_of_the_json_records_and_tshark_decodes_every_message() {
    for tool in ["nfcapd", "nfdump", "tshark", "dumpcap"] {
        assert!(util::have(tool), "{tool} is missing (.ci/run installs it)");
    }
    let lab = Lab::new(1);
    let ns = lab.netns.as_str();
    lab.loopback_up();
    let tmp = Scratch::new("ipfix");
    let nf_dir = tmp.path("nfcapd");
    std::fs::create_dir_all(&nf_dir).expect("dir");
    let port = "9995";
    let export_pcap = tmp.path("export.pcap");
    // dumpcap reads the export on the namespace's loopback, for tshark.
    let mut dumpcap = Daemon::start(
        ns,
        "dumpcap",
        &[
            "-q",
            "-i",
            "lo",
            "-f",
            &format!("udp port {port}"),
            "-P",
            "-w",
            export_pcap.to_str().expect("utf-8"),
        ],
    );
    let mut nfcapd = Daemon::start(
        ns,
        "nfcapd",
        &[
            "-w",
            nf_dir.to_str().expect("utf-8"),
            "-p",
            port,
            "-b",
            "127.0.0.1",
            "-t",
            "3600",
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !export_pcap.exists() {
        assert!(Instant::now() < deadline, "dumpcap did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));

    let json = tmp.path("flows.jsonl");
    let cap = lab.capture(&[
        "--flows",
        json.to_str().expect("utf-8"),
        "--flows",
        &format!("ipfix://127.0.0.1:{port}"),
    ]);
    assert!(
        cap.stderr_lines()
            .iter()
            .any(|l| l.contains("IPFIX observation domain")),
        "{:?}",
        cap.stderr_lines()
    );
    // 64 two-way TCP flows (128 directions), 4000 packets: more records than one message
    // holds.
    let sent = lab.gen(
        4000,
        &[
            "--flows", "64", "--bidir", "--proto", "tcp", "--rate", "40000",
        ],
    );
    assert_eq!(sent, 4000);
    let v = cap.stop();
    assert_eq!(u(&v, "packets"), sent, "{v}");
    std::thread::sleep(Duration::from_millis(300));
    nfcapd.stop();
    dumpcap.stop();

    let member = json.with_file_name("flows.g0m0.jsonl");
    let ours = json_flows(&member);
    assert_eq!(ours.len(), 128, "{ours:?}");
    assert_eq!(ours.values().map(|f| f.0).sum::<u64>(), sent);
    let (theirs, raw) = nfdump_flows(&nf_dir);
    assert_eq!(theirs, ours, "nfdump and corecap's JSON records differ");
    let ifindex = Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/sys/class/net/cap0/ifindex"])
        .output()
        .expect("ifindex");
    let ifindex: u64 = String::from_utf8_lossy(&ifindex.stdout)
        .trim()
        .parse()
        .expect("ifindex");
    for r in &raw {
        assert_eq!(u(r, "input_snmp"), ifindex, "ingressInterface: {r}");
        assert_eq!(u(r, "proto"), 6, "{r}");
    }

    // tshark: every message decodes, no malformed packet, no expert warning or error.
    let o = tshark_cflow(&export_pcap, port, &["-q", "-z", "expert,note"]);
    let report = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{report}");
    for bad in ["Malformed", "Warns (", "Errors ("] {
        assert!(
            !report.contains(bad),
            "tshark expert report has {bad}:\n{report}"
        );
    }
    let o = tshark_cflow(
        &export_pcap,
        port,
        &[
            "-T",
            "fields",
            "-e",
            "cflow.version",
            "-e",
            "cflow.od_id",
            "-e",
            "_ws.malformed",
        ],
    );
    let lines = String::from_utf8_lossy(&o.stdout).into_owned();
    let messages: Vec<&str> = lines.lines().collect();
    let flows = &v["groups"][0]["members"][0]["flows"];
    let domain = u(flows, "observation_domain");
    let sent_messages = u(&flows["ipfix"], "messages");
    assert_eq!(messages.len() as u64, sent_messages, "{flows}\n{lines}");
    for m in &messages {
        // version, observation domain (again as the options record's scope), not malformed
        let f: Vec<&str> = m.split('\t').collect();
        assert_eq!((f[0], f[2]), ("10", ""), "{lines}");
        assert!(f[1].split(',').all(|d| d == domain.to_string()), "{lines}");
    }
    assert_eq!(u(&flows["ipfix"], "records"), 128, "{flows}");
    assert_eq!(u(&flows["ipfix"], "send_errors"), 0, "{flows}");
}

/// A TCP collector on the loopback of `netns` that accepts every connection and never
/// reads one; it holds them until dropped.
struct DeafCollector {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<usize>>,
}

impl DeafCollector {
    fn start(netns: &str) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let (ns, done) = (netns.to_owned(), std::sync::Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            // setns moves this thread alone into the lab's namespace.
            corecap_linux::netdev::enter_netns(&ns).expect("enter the lab's namespace");
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.set_nonblocking(true).expect("nonblocking");
            tx.send(l.local_addr().expect("addr").port()).expect("port");
            let mut held = Vec::new();
            let end = Instant::now() + Duration::from_secs(120);
            while !done.load(Ordering::Relaxed) && Instant::now() < end {
                match l.accept() {
                    Ok((c, _)) => held.push(c),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            held.len()
        });
        let port = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("collector port");
        Self {
            port,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops accepting; returns how many connections it held.
    fn stop(mut self) -> usize {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread
            .take()
            .map_or(0, |t| t.join().expect("collector thread"))
    }
}

impl Drop for DeafCollector {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

#[test]
#[ignore = "needs root"]
fn issue24_a_collector_that_never_reads_costs_export_drops_not_a_stage_backlog() {
    let lab = Lab::new(1);
    let ns = lab.netns.as_str();
    lab.loopback_up();
    let collector = DeafCollector::start(ns);
    let cap = lab.capture(&[
        "--flows",
        &format!("ipfix+tcp://127.0.0.1:{}", collector.port),
    ]);
    // 150000 one-packet TCP flows: 150000 records, about 8 MB of IPFIX, far more than the
    // sockets buffer for a collector that does not read, and more than the export queue.
    let n = 150_000u64;
    let sent = lab.gen(
        n,
        &[
            "--flows",
            &n.to_string(),
            "--proto",
            "tcp",
            "--rate",
            "50000",
        ],
    );
    assert_eq!(sent, n);
    let t0 = Instant::now();
    let v = cap.stop();
    let took = t0.elapsed();
    let held = collector.stop();
    // Two FINISH_WAITs (2 s each) and a write timeout at most, plus the capture's own end.
    assert!(
        took < Duration::from_secs(10),
        "the capture took {took:?} to end"
    );
    assert!(held >= 1, "corecap never connected");
    // Every packet reached the flow table: nothing lost at the ring or the stage.
    assert_eq!(u(&v, "packets"), sent, "{v}");
    let m = &v["groups"][0]["members"][0];
    assert_eq!(u(m, "stage_full"), 0, "{m}");
    assert_eq!(u(m, "delivered"), sent, "{m}");
    let flows = &m["flows"];
    assert_eq!(u(flows, "records"), n, "{flows}");
    let x = &flows["ipfix"];
    assert!(u(x, "export_full") > 0, "{flows}");
    assert_eq!(
        u(x, "records") + u(x, "records_lost") + u(x, "export_full"),
        n,
        "every record is sent, lost or dropped at the export queue: {flows}"
    );
}
