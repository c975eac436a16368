//! Issue 38: the per-flow cutoff. A heavy-tailed mix of whole connections (`corecap lab
//! mix`) is recorded whole and with `--flow-cutoff`; for every connection the cut
//! recording holds exactly the packets of the whole one up to its cutoff, plus every TCP
//! SYN, FIN and RST, and the accounting adds up.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::util::{self, recording_daemon_args, u, Daemon, Lab, Scratch};

/// The cutoff the tests ask for, and the same rule written out for checking.
const CUTOFF_ARGS: [&str; 6] = [
    "--flow-cutoff",
    "15k",
    "--cutoff",
    "tcp port 8443=none",
    "--cutoff",
    "tcp port 443=4k",
];

/// A connection's limit by its server port, as [`CUTOFF_ARGS`] says.
fn limit_of(ports: (u16, u16)) -> u64 {
    if ports.0 == 8443 || ports.1 == 8443 {
        u64::MAX
    } else if ports.0 == 443 || ports.1 == 443 {
        4 << 10
    } else {
        15 << 10
    }
}

/// What the test reads of a frame (Ethernet, IPv4, no options): the connection (both
/// directions in one), its ports, the TCP flags (0 for UDP) and the payload length.
struct Frame {
    conn: ([u8; 6], [u8; 6]),
    ports: (u16, u16),
    flags: u8,
    payload: u64,
}

fn parse(f: &[u8]) -> Frame {
    assert!(f.len() >= 42 && f[12..14] == [8, 0], "an IPv4 frame");
    let total = u64::from(u16::from_be_bytes([f[16], f[17]]));
    let proto = f[23];
    let l4 = 34;
    let (sport, dport) = (
        u16::from_be_bytes([f[l4], f[l4 + 1]]),
        u16::from_be_bytes([f[l4 + 2], f[l4 + 3]]),
    );
    let (flags, hdr) = match proto {
        6 => (f[l4 + 13], u64::from(f[l4 + 12] >> 4) * 4),
        _ => (0, 8),
    };
    let mut a = [0u8; 6];
    a[..4].copy_from_slice(&f[26..30]);
    a[4..].copy_from_slice(&sport.to_be_bytes());
    let mut b = [0u8; 6];
    b[..4].copy_from_slice(&f[30..34]);
    b[4..].copy_from_slice(&dport.to_be_bytes());
    Frame {
        conn: (a.min(b), a.max(b)),
        ports: (sport, dport),
        flags,
        payload: total - 20 - hdr,
    }
}

type Conns = BTreeMap<([u8; 6], [u8; 6]), Vec<Vec<u8>>>;

/// The frames of each connection, in file order.
fn by_connection(frames: impl IntoIterator<Item = Vec<u8>>) -> Conns {
    let mut m = Conns::new();
    for f in frames {
        m.entry(parse(&f).conn).or_default().push(f);
    }
    m
}

/// What a cut recording must hold of each connection of the whole one: its packets while
/// the payload before them is under the limit, and every SYN, FIN and RST.
fn expected_cut(whole: &Conns) -> Conns {
    whole
        .iter()
        .map(|(k, frames)| {
            let mut seen = 0u64;
            let kept = frames
                .iter()
                .filter(|f| {
                    let p = parse(f);
                    let keep = seen < limit_of(p.ports) || p.flags & 0x07 != 0;
                    seen += p.payload;
                    keep
                })
                .cloned()
                .collect();
            (*k, kept)
        })
        .collect()
}

/// Compares two recordings connection by connection (the cut one in one file or in a file
/// per worker, each connection in one of them); returns the packets the cut one holds.
fn assert_cut_exactly(whole: &Path, cut: &[&Path]) -> u64 {
    let w = by_connection(util::packets(whole).into_iter().map(|(_, f)| f));
    let mut c = Conns::new();
    for f in cut {
        for (k, frames) in by_connection(util::packets(f).into_iter().map(|(_, f)| f)) {
            assert!(
                c.insert(k, frames).is_none(),
                "connection {k:?} in two files"
            );
        }
    }
    let want = expected_cut(&w);
    assert_eq!(
        want.keys().collect::<Vec<_>>(),
        c.keys().collect::<Vec<_>>(),
        "every connection is on record"
    );
    for (k, frames) in &want {
        let got = &c[k];
        assert_eq!(
            got.len(),
            frames.len(),
            "connection {k:?}: packets kept of {}",
            w[k].len()
        );
        assert!(got == frames, "connection {k:?}: other packets kept");
    }
    // Something was cut, and the `none` class kept whole connections past the default.
    let total: u64 = want.values().map(|v| v.len() as u64).sum();
    assert!(total < w.values().map(|v| v.len() as u64).sum::<u64>());
    let long_8443 = w.iter().any(|(_, fs)| {
        let p = parse(&fs[0]);
        p.ports.0 == 8443 || p.ports.1 == 8443
    } && fs.iter().map(|f| parse(f).payload).sum::<u64>() > 15 << 10);
    assert!(
        long_8443,
        "a port 8443 connection is longer than the default cutoff"
    );
    total
}

/// `tcpdump -r` agrees: the cut file holds every SYN, FIN and RST and every packet of the
/// `none` class that the whole one holds, and reads whole.
fn assert_tcpdump_agrees(whole: &Path, cut: &Path, kept: u64) {
    if !util::need("tcpdump") {
        return;
    }
    assert_eq!(util::tcpdump_packets(cut, ""), kept);
    for f in [
        "tcp[tcpflags] & (tcp-syn|tcp-fin|tcp-rst) != 0",
        "tcp port 8443",
        "udp port 53",
    ] {
        assert_eq!(
            util::tcpdump_packets(cut, f),
            util::tcpdump_packets(whole, f),
            "{f}"
        );
    }
    assert!(
        util::tcpdump_packets(cut, "tcp port 443") < util::tcpdump_packets(whole, "tcp port 443")
    );
}

/// The summary's accounting: counted = delivered + dropped + cut, with the cut counted.
fn assert_accounted(v: &Value, counted: u64, kept: u64) {
    assert_eq!(v["balanced"], true, "{v}");
    assert_eq!(u(v, "kernel_packets"), counted, "{v}");
    assert_eq!(u(v, "packets"), kept, "{v}");
    assert_eq!(u(&v["cut"], "packets"), counted - kept, "{v}");
    assert!(u(&v["cut"], "bytes") > 0, "{v}");
    let per_worker: u64 = v["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .map(|w| u(&w["cut"], "packets"))
        .sum();
    assert_eq!(per_worker, counted - kept, "{v}");
}

/// A heavy-tailed mix of connections (`corecap lab mix`, seed 38) as a pcap; its packet
/// count.
pub(crate) fn write_mix(s: &Scratch, connections: u32) -> (std::path::PathBuf, u64) {
    let mix = s.path("mix.pcap");
    let o = util::corecap(&[
        "lab",
        "mix",
        "-w",
        mix.to_str().expect("utf8"),
        "--connections",
        &connections.to_string(),
        "--max-bytes",
        "1M",
        "--seed",
        "38",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).expect("lab mix prints JSON");
    (mix, u(&r, "packets"))
}

#[test]
fn issue38_a_cut_replay_holds_each_connection_up_to_its_cutoff() {
    let s = Scratch::new("cutoff-replay");
    let (mix, n) = write_mix(&s, 300);
    let cut = s.path("cut.pcapng");
    let mut args = vec!["-w", cut.to_str().expect("utf8"), "--workers", "2"];
    args.extend_from_slice(&CUTOFF_ARGS);
    let (o, v) = util::replay(&mix, &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let kept = assert_cut_exactly(&mix, &[&cut]);
    assert_accounted(&v, n, kept);
    assert_tcpdump_agrees(&mix, &cut, kept);
    // A query of the cut recording answers as tcpdump does over it.
    if util::need("tcpdump") {
        let q = s.path("q.pcapng");
        let o = util::corecap(&[
            "query",
            "--force",
            "--json",
            "-w",
            q.to_str().expect("utf8"),
            cut.to_str().expect("utf8"),
            "tcp port 80",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            util::packets(&q).len() as u64,
            util::tcpdump_packets(&cut, "tcp port 80")
        );
    }
}

/// The connections of `flows --json` over `file`, keyed as [`parse`] keys a frame's.
fn flows_of(file: &Path) -> BTreeMap<([u8; 6], [u8; 6]), Value> {
    let o = util::corecap(&["flows", file.to_str().expect("utf8"), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let end = |e: &Value| {
        let ip: std::net::Ipv4Addr = e["ip"].as_str().expect("ip").parse().expect("IPv4");
        let mut k = [0u8; 6];
        k[..4].copy_from_slice(&ip.octets());
        k[4..].copy_from_slice(&(u(e, "port") as u16).to_be_bytes());
        k
    };
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let v: Value = serde_json::from_str(line).expect("one JSON object a line");
        let (a, b) = (end(&v["source"]), end(&v["destination"]));
        assert!(
            m.insert((a.min(b), a.max(b)), v).is_none(),
            "one record a connection"
        );
    }
    m
}

/// Issue 38: the sessions of a cut recording say what was seen beside what was kept. For
/// every connection, `flows --json` over the cut file gives as packets and bytes seen what
/// the whole recording holds of it, and as packets and bytes (`network.*`) what the cut
/// file holds; a bulk connection's seen bytes are many times its kept ones. Both ways the
/// cut packets travel: a worker writing its own file, and workers merged into one.
#[test]
fn issue38_sessions_of_a_cut_recording_count_bytes_seen_beside_bytes_kept() {
    let s = Scratch::new("cutoff-sessions");
    let (mix, _) = write_mix(&s, 200);
    let whole = s.path("whole.pcapng");
    let (o, _) = util::replay(&mix, &["-w", whole.to_str().expect("utf8")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let whole_flows = flows_of(&whole);
    for workers in ["1", "2"] {
        let cut = s.path(&format!("cut-{workers}.pcapng"));
        let mut args = vec!["-w", cut.to_str().expect("utf8"), "--workers", workers];
        args.extend_from_slice(&CUTOFF_ARGS);
        let (o, _) = util::replay(&mix, &args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let held = by_connection(util::packets(&cut).into_iter().map(|(_, f)| f));
        let cut_flows = flows_of(&cut);
        assert_eq!(
            cut_flows.keys().collect::<Vec<_>>(),
            whole_flows.keys().collect::<Vec<_>>(),
            "{workers} workers: every connection has its record"
        );
        let mut most_cut = (0u64, 0u64);
        for (k, c) in &cut_flows {
            let w = &whole_flows[k];
            let n = &c["network"];
            let kept_bytes: u64 = held[k].iter().map(|f| f.len() as u64).sum();
            assert_eq!(u(n, "packets"), held[k].len() as u64, "{workers}: {c}");
            assert_eq!(u(n, "bytes"), kept_bytes, "{workers}: {c}");
            assert_eq!(
                u(&c["corecap"], "packets_seen"),
                u(&w["network"], "packets"),
                "{workers}: {c}"
            );
            assert_eq!(
                u(&c["corecap"], "bytes_seen"),
                u(&w["network"], "bytes"),
                "{workers}: {c}"
            );
            // The whole recording's own records: seen is what they hold.
            assert_eq!(u(&w["corecap"], "bytes_seen"), u(&w["network"], "bytes"));
            if u(&c["corecap"], "bytes_seen") > most_cut.0 {
                most_cut = (u(&c["corecap"], "bytes_seen"), kept_bytes);
            }
        }
        // The biggest transfer (up to 1 MiB) kept little more than its first 15 KiB.
        assert!(most_cut.0 > 10 * most_cut.1, "{workers}: {most_cut:?}");
        // Sorted by bytes, the cut listing puts first the connections the whole one does:
        // by what they sent, not by what the file kept of them.
        let top = |f: &Path, json: bool| {
            let path = f.to_str().expect("utf8");
            let mut args = vec!["flows", path, "--sort", "bytes", "--limit", "5"];
            args.extend(json.then_some("--json"));
            String::from_utf8_lossy(&util::corecap(&args).stdout).into_owned()
        };
        let ids = |text: String| -> Vec<Value> {
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).expect("JSON"))
                .collect()
        };
        let (cut_top, whole_top) = (ids(top(&cut, true)), ids(top(&whole, true)));
        let id = |v: &Vec<Value>| -> Vec<Value> {
            v.iter()
                .map(|f| f["network"]["community_id"].clone())
                .collect()
        };
        assert_eq!(id(&cut_top), id(&whole_top), "{workers}: the largest first");
        // The table says how many bytes were cut, beside what the file holds.
        let first = &cut_top[0];
        let cut_bytes = u(&first["corecap"], "bytes_seen") - u(&first["network"], "bytes");
        assert!(cut_bytes > 0, "{first}");
        let table = top(&cut, false);
        let mut lines = table.lines();
        assert!(
            lines.next().is_some_and(|h| h.contains("CUT BYTES")),
            "{table}"
        );
        let row = lines.next().expect("a row");
        assert!(
            row.split_whitespace().any(|w| w == cut_bytes.to_string()),
            "{row}"
        );
        let o = util::corecap(&["flows", whole.to_str().expect("utf8"), "--limit", "1"]);
        assert!(
            !String::from_utf8_lossy(&o.stdout).contains("CUT BYTES"),
            "nothing cut, no column"
        );
    }
}

#[test]
fn issue38_a_file_per_worker_holds_each_of_its_connections_up_to_its_cutoff() {
    let s = Scratch::new("cutoff-per-worker");
    let (mix, n) = write_mix(&s, 300);
    let cut = s.path("cut.pcapng");
    let mut args = vec![
        "-w",
        cut.to_str().expect("utf8"),
        "--workers",
        "2",
        "--per-worker",
    ];
    args.extend_from_slice(&CUTOFF_ARGS);
    let (o, v) = util::replay(&mix, &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (w0, w1) = (s.path("cut.w0.pcapng"), s.path("cut.w1.pcapng"));
    let kept = assert_cut_exactly(&mix, &[&w0, &w1]);
    assert_accounted(&v, n, kept);
    let per_file: Vec<u64> = [&w0, &w1]
        .iter()
        .map(|f| util::packets(f).len() as u64)
        .collect();
    let workers = v["workers"].as_array().expect("workers");
    assert_eq!(
        per_file,
        workers.iter().map(|w| u(w, "packets")).collect::<Vec<_>>(),
        "{v}"
    );
}

#[test]
fn issue38_a_full_flow_table_errs_on_keeping_and_counts_its_evictions() {
    let s = Scratch::new("cutoff-evict");
    let (mix, n) = write_mix(&s, 300);
    let cut = s.path("cut.pcapng");
    // Four flows per worker, sixteen open at once: flows are pushed out and start over.
    let mut args = vec!["-w", cut.to_str().expect("utf8"), "--workers", "1"];
    args.extend_from_slice(&CUTOFF_ARGS);
    args.extend_from_slice(&["--cutoff-flows", "4"]);
    let (o, v) = util::replay(&mix, &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(u(&v["cut"], "evictions") > 0, "{v}");
    assert_eq!(v["balanced"], true, "{v}");
    let kept = util::packets(&cut).len() as u64;
    assert_eq!(u(&v, "packets"), kept, "{v}");
    assert_eq!(u(&v, "packets") + u(&v["cut"], "packets"), n, "{v}");
    // Each connection keeps at least what the cutoff promises, in order.
    let whole = by_connection(util::packets(&mix).into_iter().map(|(_, f)| f));
    let got = by_connection(util::packets(&cut).into_iter().map(|(_, f)| f));
    for (k, want) in expected_cut(&whole) {
        let mut have = got[&k].iter();
        for f in &want {
            assert!(have.any(|g| g == f), "connection {k:?} lost a packet");
        }
    }
}

#[test]
fn issue38_a_bad_cutoff_class_is_refused_before_any_file() {
    let s = Scratch::new("cutoff-bad");
    let (mix, _) = write_mix(&s, 4);
    let cut = s.path("cut.pcapng");
    for bad in ["tcp port=4k", "tcp port 80", "tcp port 80=4 lots"] {
        let o = Command::new(util::bin())
            .args(["capture", "-r"])
            .arg(&mix)
            .arg("-w")
            .arg(&cut)
            .args(["--cutoff", bad])
            .output()
            .expect("run corecap");
        assert_eq!(o.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.lines().count() == 1 && err.contains("--cutoff"),
            "{bad}: {err}"
        );
        assert!(!cut.exists(), "{bad}: no file made");
    }
    let o = util::corecap(&[
        "capture",
        "-r",
        mix.to_str().expect("utf8"),
        "--flow-cutoff",
        "15k",
    ]);
    assert!(!o.status.success(), "--flow-cutoff without -w is refused");
}

#[test]
#[ignore = "needs root"]
fn issue38_two_live_recordings_side_by_side_differ_only_by_the_cutoff() {
    if !util::need("tcpreplay") {
        return;
    }
    let s = Scratch::new("cutoff-live");
    let (mix, n) = write_mix(&s, 200);
    let lab = Lab::new(1);
    let (whole, cut) = (s.path("whole.pcapng"), s.path("cut.pcapng"));
    let a = lab.capture_to(&whole, &["--workers", "1"]);
    let mut args = vec!["--workers", "2"];
    args.extend_from_slice(&CUTOFF_ARGS);
    let b = lab.capture_to(&cut, &args);
    let sent = replay_into(&lab, &mix);
    assert!(sent > 0 && sent <= n);
    let (va, vb) = (a.stop(), b.stop());
    // Both saw every packet sent: the comparison is of the cut alone.
    assert_eq!(u(&va, "packets"), sent, "{va}");
    assert_eq!(u(&vb, "kernel_packets"), sent, "{vb}");
    let kept = assert_cut_exactly(&whole, &[&cut]);
    assert_accounted(&vb, sent, kept);
    assert_tcpdump_agrees(&whole, &cut, kept);
}

/// Sends the mix into the lab's gen0 with tcpreplay, as fast as it goes; returns the
/// packets it sent (`Successful packets:`).
pub(crate) fn replay_into(lab: &Lab, mix: &Path) -> u64 {
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.netns,
            "tcpreplay",
            "-q",
            "--topspeed",
            "-i",
            "gen0",
        ])
        .arg(mix)
        .output()
        .expect("run tcpreplay");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Successful packets:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count of packets sent in: {out}"))
}

/// The one sample `series` of a Prometheus text, if there.
pub(crate) fn sample(text: &str, series: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
#[ignore = "needs root"]
fn issue38_serve_record_cuts_each_connection_and_counts_the_cut_in_its_metrics() {
    if !util::need("tcpreplay") {
        return;
    }
    let dir = Scratch::new("cutoff-serve");
    let (mix, n) = write_mix(&dir, 200);
    let lab = Lab::new(1);
    let rec = dir.path("rec");
    std::fs::create_dir(&rec).expect("recording folder");
    let args = recording_daemon_args(&rec, &CUTOFF_ARGS);
    let d = Daemon::start(
        &lab,
        &dir,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let sent = replay_into(&lab, &mix);
    assert!(sent > 0 && sent <= n);
    let series = |name: &str| format!("{name}{{interface=\"cap0\"}}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let (written, cut) = loop {
        let o = d.request_ok(&["metrics"]);
        let t = String::from_utf8_lossy(&o.stdout).into_owned();
        let get = |s: &str| sample(&t, &series(s)).unwrap_or(0);
        let (w, c) = (
            get("corecap_recording_packets_total"),
            get("corecap_recording_cut_packets_total"),
        );
        if w + c >= sent {
            // The default table holds every connection of the mix: none forgotten early.
            assert_eq!(
                sample(&t, &series("corecap_recording_cut_evictions_total")),
                Some(0),
                "{t}"
            );
            break (w, c);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the recording never took the mix:\n{t}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(written + cut, sent);
    assert!(cut > 0);
    // GET /flows shows each connection's packets seen beside those its files hold (the file
    // being written has no sessions file yet: its part is read from what it holds, once the
    // disk writer has flushed it: the metrics count a packet when it is handed over).
    let listed: Vec<Value> = loop {
        let o = d.request_ok(&["flows"]);
        let listed: Vec<Value> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON line"))
            .collect();
        if !listed.is_empty() {
            break listed;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no connection listed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let seen = |v: &Value| u(&v["corecap"], "packets_seen");
    assert!(listed
        .iter()
        .all(|v| seen(v) >= u(&v["network"], "packets")));
    let (ok, _) = d.stop();
    assert!(ok, "serve stops cleanly");
    // Once every file is closed, the sessions count every packet sent: those written, and
    // those cut beside them.
    let o = util::corecap(&["flows", rec.to_str().expect("utf8"), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (mut kept, mut all) = (0, 0);
    for l in String::from_utf8_lossy(&o.stdout).lines() {
        let v: Value = serde_json::from_str(l).expect("JSON line");
        kept += u(&v["network"], "packets");
        all += seen(&v);
    }
    assert_eq!((kept, all), (written, sent));
    // The rotated files, in order, hold each connection up to its cutoff.
    let files = util::whole_files(&rec);
    let frames = files
        .iter()
        .flat_map(|f| util::packets(f).into_iter().map(|(_, p)| p));
    let got = by_connection(frames);
    let whole = by_connection(util::packets(&mix).into_iter().map(|(_, f)| f));
    let want = expected_cut(&whole);
    assert_eq!(want.len(), got.len(), "every connection is on record");
    for (k, frames) in &want {
        assert!(got.get(k) == Some(frames), "connection {k:?}");
    }
    assert_eq!(want.values().map(|v| v.len() as u64).sum::<u64>(), written);
}
