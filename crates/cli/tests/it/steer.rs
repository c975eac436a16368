//! Consumer groups and pipeline mode (issue 3): copy and balanced groups on stage threads,
//! per-group filters, exact accounting per group and member.

use std::collections::HashMap;

use crate::util::{self, u, Lab, Scratch};
use serde_json::Value;

fn member(v: &Value, g: usize, m: usize) -> &Value {
    &v["groups"][g]["members"][m]
}

#[test]
#[ignore = "needs root"]
fn issue3_copy_group_members_each_get_every_packet() {
    let lab = Lab::new(1);
    let cap = lab.capture(&["--workers", "2", "--groups", "copy:2"]);
    let sent = lab.gen(3000, &["--flows", "32", "--bidir"]);
    let v = cap.stop();
    assert_eq!(u(&v, "packets"), sent, "{v}");
    for m in 0..2 {
        assert_eq!(u(member(&v, 0, m), "delivered"), sent, "member {m}: {v}");
        assert_eq!(u(member(&v, 0, m), "stage_full"), 0);
    }
}

#[test]
#[ignore = "needs root"]
fn issue3_balance_group_splits_exactly_and_keeps_flows_whole() {
    balance_and_copy("spsc");
}

#[test]
#[ignore = "needs root"]
fn issue3_pfq_mpsc_queue_carries_the_same_packets() {
    balance_and_copy("mpsc");
}

fn balance_and_copy(queue: &str) {
    let lab = Lab::new(1);
    let dir = Scratch::new("bal");
    let out = dir.path("b.pcapng");
    let cap = lab.capture(&[
        "--workers",
        "2",
        "--groups",
        "balance:2,copy:1",
        "--queue",
        queue,
        "-w",
        out.to_str().expect("utf8"),
    ]);
    let sent = lab.gen(4096, &["--flows", "256", "--bidir"]);
    let v = cap.stop();
    let a = u(member(&v, 0, 0), "delivered");
    let b = u(member(&v, 0, 1), "delivered");
    assert_eq!(a + b, sent, "balance members add up: {v}");
    assert!(a > 0 && b > 0, "{v}");
    assert_eq!(
        u(member(&v, 1, 0), "delivered"),
        sent,
        "the copy group on the same traffic: {v}"
    );
    let mut owner: HashMap<corecap_wire::flow::FlowKey, usize> = HashMap::new();
    for m in 0..2 {
        let pkts = util::read_all(&dir.path(&format!("b.g0m{m}.pcapng")));
        assert_eq!(pkts.len() as u64, if m == 0 { a } else { b });
        for (data, _) in pkts {
            let k = corecap_wire::flow::flow_key(&data, None)
                .expect("parses")
                .canonical();
            assert_eq!(*owner.entry(k).or_insert(m), m, "flow {k:?} on two members");
        }
    }
    assert_eq!(owner.len(), 256);
    assert_eq!(
        util::read_all(&dir.path("b.g1m0.pcapng")).len() as u64,
        sent
    );
}

#[test]
#[ignore = "needs root"]
fn issue3_group_filter_and_pipeline_match_workers_mode() {
    let lab = Lab::new(1);
    let cap = lab.capture(&[
        "--workers",
        "2",
        "--groups",
        "copy:1,copy:1",
        "--group-filter",
        "1=udp port 5001",
    ]);
    let sent = lab.gen(2000, &["--flows", "10", "--bidir"]);
    let v = cap.stop();
    assert_eq!(u(member(&v, 0, 0), "delivered"), sent);
    assert_eq!(u(member(&v, 1, 0), "delivered"), sent / 2, "{v}");
    assert_eq!(u(&v["groups"][1], "filtered"), sent / 2, "{v}");
    // Pipeline mode without groups: one balanced group over the stage CPUs.
    let cap = lab.capture(&[
        "--workers",
        "1",
        "--mode",
        "pipeline",
        "--stage-cpus",
        "0-1",
    ]);
    let sent = lab.gen(2000, &["--flows", "64"]);
    let v = cap.stop();
    assert_eq!(u(&v, "packets"), sent);
    let members = v["groups"][0]["members"].as_array().expect("members");
    assert_eq!(members.len(), 2);
    assert_eq!(
        members.iter().map(|m| u(m, "delivered")).sum::<u64>(),
        sent,
        "{v}"
    );
}

#[test]
#[ignore = "needs root"]
fn issue3_flow_records_match_what_was_sent() {
    let lab = Lab::new(1);
    let dir = Scratch::new("flows");
    let out = dir.path("f.jsonl");
    let cap = lab.capture(&[
        "--workers",
        "2",
        "--groups",
        "balance:2",
        "--flows",
        out.to_str().expect("utf8"),
    ]);
    // 50 flows, both directions, 20 frames of 100 bytes each way.
    let sent = lab.gen(
        2000,
        &[
            "--flows", "50", "--bidir", "--size", "100", "--proto", "tcp",
        ],
    );
    let v = cap.stop();
    assert_eq!(u(&v, "packets"), sent);
    let mut flows = 0;
    for m in 0..2 {
        let text =
            std::fs::read_to_string(dir.path(&format!("f.g0m{m}.jsonl"))).expect("flow file");
        for line in text.lines() {
            let r: Value = serde_json::from_str(line).expect("json");
            assert_eq!(r["end"], "exit");
            assert_eq!(
                (u(&r, "packets_fwd"), u(&r, "packets_rev")),
                (20, 20),
                "{r}"
            );
            assert_eq!(
                (u(&r, "bytes_fwd"), u(&r, "bytes_rev")),
                (20 * 96, 20 * 96),
                "{r}"
            );
            assert_eq!(u(&r, "tcp_flags"), 0x18);
            flows += 1;
        }
    }
    assert_eq!(flows, 50);
}

#[test]
#[ignore = "needs root"]
fn issue3_members_join_and_leave_during_traffic_and_nothing_is_lost() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let lab = Lab::new(1);
    let mut child = lab
        .capture_command()
        .args(["--workers", "2", "--groups", "balance:2", "--control", "-"])
        .args(["--json", "--stats-interval", "0", "--duration", "60"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("capture");
    let rx = util::lines_of(child.stderr.take().expect("stderr"));
    let wait_for = |needle: &str| loop {
        let l = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("no '{needle}'"));
        assert!(!l.contains("control:"), "{l}");
        if l.contains(needle) {
            break;
        }
    };
    wait_for("capturing on");
    let netns = lab.netns.clone();
    // 30000 frames at 20 kpps: 1.5 s of traffic while members come and go.
    let gen = std::thread::spawn(move || {
        let out = Command::new(util::bin())
            .args([
                "gen", "--netns", &netns, "-i", "gen0", "--json", "--count", "30000", "--rate",
                "20000",
            ])
            .args(["--flows", "4096", "--bidir"])
            .output()
            .expect("gen");
        let v: Value = serde_json::from_slice(&out.stdout).expect("json");
        u(&v, "sent")
    });
    let mut stdin = child.stdin.take().expect("stdin");
    std::thread::sleep(std::time::Duration::from_millis(400));
    writeln!(stdin, "join 0").expect("write");
    wait_for("g0m2 joined");
    std::thread::sleep(std::time::Duration::from_millis(400));
    writeln!(stdin, "leave 0 0").expect("write");
    wait_for("g0m0 left");
    let sent = gen.join().expect("gen thread");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().expect("wait");
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(text.lines().last().expect("summary")).expect("json");
    assert_eq!(u(&v, "packets"), sent, "{v}");
    let members = v["groups"][0]["members"].as_array().expect("members");
    assert_eq!(
        members.len(),
        3,
        "two first members and the one that joined: {v}"
    );
    let delivered: u64 = members.iter().map(|m| u(m, "delivered")).sum();
    assert_eq!(delivered, sent, "no member lost a packet: {v}");
    assert!(
        members
            .iter()
            .all(|m| u(m, "stage_full") == 0 && u(m, "delivered") > 0),
        "{v}"
    );
}

/// Issue 22: replayed over two workers, a real capture of any link type the flow hash reads
/// (Linux cooked v1 and v2, raw IP, BSD NULL, NFLOG, Ethernet) keeps each flow, both
/// directions, on one worker, and loses no packet. Read as Ethernet, a NULL header and the
/// IP header bytes after it hashed differently for each packet and split every flow.
#[test]
fn issue22_replay_of_any_link_type_keeps_each_flow_on_one_worker() {
    let real = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/real");
    let s = Scratch::new("steer-links");
    let mut split_files = 0;
    for name in [
        "forces2.pcap",
        "mptcp-v1.pcap",
        "simple_http_sll2.pcap",
        "babel_rtt.pcap",
        "ipv6_mobility_1.pcap",
        "quic_vn.pcap",
        "ikev2four.pcap",
        "nflog.pcap",
        "various_gre.pcap",
    ] {
        let out = s.path(&format!("{name}.pcapng"));
        let (o, v) = util::replay(
            &real.join(name),
            &[
                "--workers",
                "2",
                "--per-worker",
                "-w",
                out.to_str().expect("utf8"),
            ],
        );
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let files = [
            s.path(&format!("{name}.w0.pcapng")),
            s.path(&format!("{name}.w1.pcapng")),
        ];
        let mut owner: HashMap<corecap_wire::FlowKey, usize> = HashMap::new();
        let mut per = [0u64; 2];
        for (w, f) in files.iter().enumerate() {
            let mut r = corecap_wire::CaptureReader::open(f).expect("worker file");
            while let Some(rec) = r.next_packet().expect("read") {
                per[w] += 1;
                let Ok(k) = corecap_wire::Link::of(rec.linktype).flow_key(rec.data, None) else {
                    continue;
                };
                let first = *owner.entry(k.canonical()).or_insert(w);
                assert_eq!(first, w, "{name}: flow {k:?} on two workers");
            }
        }
        let sent = util::read_all(&real.join(name)).len() as u64;
        assert_eq!(per[0] + per[1], sent, "{name}: {v}");
        assert_eq!(u(&v, "packets"), sent, "{name}: {v}");
        if per[0] > 0 && per[1] > 0 {
            split_files += 1;
        }
    }
    // The hash spreads the flows of some files over both workers: it is not constant.
    assert!(split_files >= 2, "{split_files} files used both workers");
}
