//! Indexes and queries (issue 13): `corecap index` and `corecap query` give, packet for
//! packet, what `tcpdump -r FILE -w - FILTER` finds in the same files and window, while
//! reading only the regions that can match. Synthetic files (pcap and pcapng written here)
//! and files that `corecap capture` recorded from lab traffic: rotated, sealed, unindexed,
//! cut short.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{
    self, corecap, decrypt, keygen, packets, secs, u, udp_frame, Daemon, Lab, Scratch, T0,
};
use corecap_wire::{CaptureReader, Epb, InterfaceDesc, PcapWriter, PcapngWriter};
use serde_json::Value;

/// What tcpdump finds in `files` with `filter`, in the window, sorted by time then bytes.
pub(crate) fn tcpdump(
    files: &[PathBuf],
    filter: &str,
    from: u64,
    to: u64,
    s: &Scratch,
) -> Vec<(u64, Vec<u8>)> {
    let mut all = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let out = s.path(&format!("ref{i}.pcap"));
        let mut c = Command::new("tcpdump");
        c.args([
            "-nn",
            "--time-stamp-precision=nano",
            "-r",
            f.to_str().unwrap(),
            "-w",
            out.to_str().unwrap(),
        ]);
        if !filter.is_empty() {
            c.arg(filter);
        }
        // tcpdump exits non-zero on a file cut short, after writing what it read.
        let o = c.output().expect("run tcpdump");
        assert!(
            out.exists(),
            "tcpdump: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        all.extend(
            packets(&out)
                .into_iter()
                .filter(|(t, _)| *t >= from && *t < to),
        );
    }
    all.sort();
    all
}

/// Runs `corecap query`; returns its packets (in output order) and its JSON summary.
fn query(args: &[&str], s: &Scratch) -> (Vec<(u64, Vec<u8>)>, Value) {
    let out = s.path("q.pcapng");
    let mut a = vec!["query", "--force", "--json", "-w", out.to_str().unwrap()];
    a.extend_from_slice(args);
    let o = corecap(&a);
    assert!(
        o.status.success(),
        "query {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).expect("query prints JSON");
    let p = packets(&out);
    assert_eq!(p.len() as u64, u(&v, "packets"), "{v}");
    assert!(
        p.windows(2).all(|w| w[0].0 <= w[1].0),
        "output in timestamp order"
    );
    (p, v)
}

pub(crate) fn sorted(mut v: Vec<(u64, Vec<u8>)>) -> Vec<(u64, Vec<u8>)> {
    v.sort();
    v
}

/// Checks one query against tcpdump; returns the summary.
fn check(
    files: &[PathBuf],
    paths: &[&str],
    filter: &str,
    from: Option<u64>,
    to: Option<u64>,
    s: &Scratch,
) -> Value {
    let (f, t) = (from.unwrap_or(0), to.unwrap_or(u64::MAX));
    let want = tcpdump(files, filter, f, t, s);
    let fs = from.map(secs);
    let ts = to.map(secs);
    let mut args: Vec<&str> = paths.to_vec();
    if let Some(x) = &fs {
        args.extend(["--from", x]);
    }
    if let Some(x) = &ts {
        args.extend(["--to", x]);
    }
    if !filter.is_empty() {
        args.push(filter);
    }
    let (got, v) = query(&args, s);
    assert_eq!(got.len(), want.len(), "{filter} {from:?}..{to:?}: {v}");
    assert!(
        sorted(got) == want,
        "{filter}: packets differ from tcpdump's"
    );
    v
}

/// A synthetic pcap of `n` 512-byte packets, 1 ms apart: hosts come and go (host h talks
/// during its own slice of time, in bursts), ports follow the host.
fn synthetic_pcap(p: &Path, n: u32, t0: u64) {
    let f = std::fs::File::create(p).unwrap();
    let mut w = PcapWriter::new(std::io::BufWriter::new(f), 1, 65535).unwrap();
    for i in 0..n {
        let h = (i / 500) as u8; // a new host every 500 packets
        let burst = (i / 50) % 3 == 0; // and a background host in bursts
        let (src, dst) = if burst {
            ([10, 9, 9, 9], [10, 2, 0, 1])
        } else {
            ([10, 0, 0, 1], [10, 1, h, 1 + (i % 4) as u8])
        };
        let dp = if burst { 53 } else { 6000 + u16::from(h) };
        let fr = udp_frame(src, dst, 1024 + (i % 7) as u16, dp, 512);
        w.write_packet(t0 + u64::from(i) * 1_000_000, &fr, 512, None)
            .unwrap();
    }
    w.flush().unwrap();
}

/// A synthetic pcapng with two interfaces, VLAN tags and queue/hash options.
fn synthetic_pcapng(p: &Path, n: u32, t0: u64) {
    let f = std::fs::File::create(p).unwrap();
    let ifs = [
        InterfaceDesc::ethernet("eth0@0", 0),
        InterfaceDesc::ethernet("eth0@1", 0),
    ];
    let mut w = PcapngWriter::new(std::io::BufWriter::new(f), "test", &ifs).unwrap();
    for i in 0..n {
        let vlan = if (i / 1000) % 2 == 0 { 100 } else { 200 };
        let fr = udp_frame(
            [10, 5, 0, 1],
            [10, 6, (i / 1000) as u8, 1],
            2000,
            7000 + (i / 1000) as u16,
            400,
        );
        w.write_epb(&Epb {
            if_id: i % 2,
            ts_ns: t0 + u64::from(i) * 1_000_000,
            data: &fr,
            orig_len: 400,
            vlan_tci: Some(vlan),
            queue: Some(i % 2),
            hash: Some(i),
            ..Epb::default()
        })
        .unwrap();
    }
    w.flush().unwrap();
}

fn index(files: &[&Path], extra: &[&str]) -> std::process::Output {
    let mut a = vec!["index", "--json"];
    a.extend_from_slice(extra);
    let names: Vec<String> = files
        .iter()
        .map(|p| p.to_str().unwrap().to_owned())
        .collect();
    a.extend(names.iter().map(String::as_str));
    let o = corecap(&a);
    assert!(
        o.status.success(),
        "index: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

#[test]
fn issue13_synthetic_host_port_window_and_filter() {
    let s = Scratch::new("query-syn");
    let a = s.path("a.pcap");
    synthetic_pcap(&a, 20_000, T0);
    let o = index(&[&a], &[]);
    let rep: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(u(&rep, "packets"), 20_000);
    assert!(u(&rep, "regions") >= 9, "{rep}");
    let size = u(&rep, "size");
    assert!(
        u(&rep, "index_bytes") * 50 <= size,
        "index ≤ 2% of the capture: {rep}"
    );
    let files = [a.clone()];
    let pa = a.to_str().unwrap();
    // One host: reads only the regions of its time slice.
    let v = check(&files, &[pa], "host 10.1.7.2", None, None, &s);
    assert!(u(&v, "packets") > 50, "{v}");
    assert!(
        u(&v, "bytes_read") * 4 < u(&v, "bytes_total"),
        "host query reads few bytes: {v}"
    );
    assert!(u(&v, "regions_read") < u(&v, "regions_total"));
    // A port.
    let v = check(&files, &[pa], "udp dst port 6015", None, None, &s);
    assert!(
        u(&v, "packets") > 0 && u(&v, "bytes_read") * 4 < u(&v, "bytes_total"),
        "{v}"
    );
    // A window with no filter: 2 s out of 20.
    let v = check(
        &files,
        &[pa],
        "",
        Some(T0 + 5_000_000_000),
        Some(T0 + 7_000_000_000),
        &s,
    );
    assert_eq!(u(&v, "packets"), 2000);
    assert!(u(&v, "bytes_read") * 3 < u(&v, "bytes_total"), "{v}");
    // A window and a filter, and filters the index cannot prune on.
    check(
        &files,
        &[pa],
        "port 53",
        Some(T0 + 1_000_000_000),
        Some(T0 + 12_345_678_901),
        &s,
    );
    for filter in [
        "not host 10.9.9.9 and udp[8] = 0xab",
        "host 10.1.3.1 or host 10.1.12.4",
        "net 10.1.4.0/24 and not port 53",
    ] {
        check(&files, &[pa], filter, None, None, &s);
    }
    // A host that never occurs: nothing read but (at most) false-positive regions.
    let v = check(&files, &[pa], "host 192.0.2.77", None, None, &s);
    assert!(u(&v, "regions_read") <= 1, "{v}");
}

#[test]
fn issue13_pcapng_vlan_interfaces_and_options_kept() {
    let s = Scratch::new("query-ng");
    let a = s.path("v.pcapng");
    synthetic_pcapng(&a, 6000, T0);
    index(&[&a], &[]);
    let files = [a.clone()];
    let pa = a.to_str().unwrap();
    let v = check(&files, &[pa], "vlan 200", None, None, &s);
    assert_eq!(u(&v, "packets"), 3000);
    let v = check(&files, &[pa], "vlan 100 and host 10.6.2.1", None, None, &s);
    assert_eq!(u(&v, "packets"), 1000);
    // Interfaces and queue/hash options survive.
    let out = s.path("q.pcapng");
    let r = CaptureReader::open(&out).unwrap();
    drop(r);
    let mut r = CaptureReader::open(&out).unwrap();
    let rec = r.next_packet().unwrap().unwrap();
    assert!(rec.queue.is_some() && rec.hash.is_some());
    let names: Vec<_> = r
        .interfaces()
        .iter()
        .map(|i| i.name.clone().unwrap_or_default())
        .collect();
    assert!(names.iter().all(|n| n.starts_with("eth0@")), "{names:?}");
}

#[test]
fn issue13_unindexed_damaged_index_and_cut_short() {
    let s = Scratch::new("query-cut");
    std::fs::create_dir(s.path("rec")).unwrap();
    let a = s.path("rec/a.pcap");
    let b = s.path("rec/b.pcap");
    let c = s.path("rec/c.pcap");
    synthetic_pcap(&a, 6000, T0);
    synthetic_pcap(&b, 6000, T0 + 6_000_000_000);
    synthetic_pcap(&c, 6000, T0 + 3_000_000_000);
    index(&[&a, &b], &[]);
    // b's index is damaged in its head (regions, key table): the file is scanned, with a
    // note, and the answer is the same.
    let side = corecap_index::sidecar_path(&b);
    let mut bytes = std::fs::read(&side).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&side, bytes).unwrap();
    // a's lists are all damaged (a query reads only the lists it looks up, each checked by
    // its own CRC): the regions are read instead, with a note, and the answer is the same.
    let side = corecap_index::sidecar_path(&a);
    let mut bytes = std::fs::read(&side).unwrap();
    let t = bytes.len() - corecap_index::format::TRAILER_LEN;
    let head = corecap_index::Index::head_len(&bytes[t..]).unwrap() as usize;
    assert!(t - head > 1000, "a has lists");
    bytes[head..t].iter_mut().for_each(|b| *b ^= 0x55);
    std::fs::write(&side, bytes).unwrap();
    // c has no index. Query the directory (with a hidden file being written, skipped).
    std::fs::write(s.path("rec/.d.pcap.part"), b"garbage").unwrap();
    let files = [a.clone(), b.clone(), c.clone()];
    let dir = s.path("rec").to_str().unwrap().to_owned();
    let v = check(&files, &[&dir], "host 10.1.5.3", None, None, &s);
    assert_eq!(u(&v, "files"), 3, "{v}");
    assert_eq!(u(&v, "files_scanned"), 2, "{v}");
    assert!(v["notes"].to_string().contains("checksum"), "{v}");
    assert!(
        v["notes"]
            .to_string()
            .contains("list of its index is damaged"),
        "{v}"
    );
    check(
        &files,
        &[&dir],
        "",
        Some(T0 + 4_000_000_000),
        Some(T0 + 8_000_000_000),
        &s,
    );
    // A file cut short inside a record: indexed up to it (said on stderr), answered from
    // its readable part like tcpdump does.
    let raw = std::fs::read(&a).unwrap();
    let cut = s.path("cut.pcap");
    std::fs::write(&cut, &raw[..raw.len() * 2 / 3 + 100]).unwrap();
    let o = index(&[&cut], &[]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("cut short"),
        "{o:?}"
    );
    let pc = cut.to_str().unwrap();
    check(
        std::slice::from_ref(&cut),
        &[pc],
        "host 10.1.7.1 or port 53",
        None,
        None,
        &s,
    );
    // The same file unindexed: the scan notes the cut.
    std::fs::remove_file(corecap_index::sidecar_path(&cut)).unwrap();
    let v = check(std::slice::from_ref(&cut), &[pc], "port 53", None, None, &s);
    assert_eq!(u(&v, "files_truncated"), 1, "{v}");
}

/// The first packet's IPv4 destination, as text.
fn first_dst(p: &Path) -> String {
    let pk = packets(p);
    let f = &pk[pk.len() / 2].1;
    let off = if f[12..14] == [0x81, 0x00] { 18 } else { 14 };
    format!(
        "{}.{}.{}.{}",
        f[off + 16],
        f[off + 17],
        f[off + 18],
        f[off + 19]
    )
}

#[test]
#[ignore = "needs root"]
fn issue13_rotated_lab_recording() {
    let lab = Lab::new(1);
    let s = Scratch::new("query-rot");
    let dir = s.path("rec");
    std::fs::create_dir(&dir).unwrap();
    let base = dir.join("r.pcapng");
    let cap = lab.capture_to(&base, &["--workers", "1", "-b", "filesize:1000"]);
    let sent = lab.gen(
        12_000,
        &["--flows", "64", "--size", "512", "--rate", "40000"],
    );
    let v = cap.stop();
    assert_eq!(u(&v, "packets"), sent, "{v}");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .filter(|p| !corecap_store::names::is_beside(p))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "rotated: {files:?}");
    // The recorder indexed every file as it wrote it; the last one loses its index, to be
    // answered by scanning.
    for f in &files {
        assert!(
            corecap_index::sidecar_path(f).exists(),
            "{} has its index",
            f.display()
        );
    }
    std::fs::remove_file(corecap_index::sidecar_path(files.last().unwrap())).unwrap();
    let host = first_dst(&files[1]);
    let d = dir.to_str().unwrap();
    let v = check(&files, &[d], &format!("host {host}"), None, None, &s);
    assert!(u(&v, "packets") > 0 && u(&v, "files_scanned") == 1, "{v}");
    let all = packets(&files[1]);
    let (t1, t2) = (all[10].0, all[all.len() - 10].0);
    check(&files, &[d], "udp port 5001", Some(t1), Some(t2), &s);
    check(&files, &[d], "", Some(t1), Some(t2), &s);
}

#[test]
#[ignore = "needs root"]
fn issue13_sealed_recording() {
    let lab = Lab::new(1);
    let s = Scratch::new("query-seal");
    let key = keygen(&s, "k.key");
    let k = key.as_str();
    let sealed = s.path("c.pcapng.sealed");
    let cap = lab.capture_to(
        &sealed,
        &["--workers", "1", "--encrypt", "aes", "--key-file", k],
    );
    let sent = lab.gen(8000, &["--flows", "32", "--size", "512", "--rate", "40000"]);
    let v = cap.stop();
    assert_eq!(u(&v, "packets"), sent, "{v}");
    let plain = s.path("c.pcapng");
    let o = decrypt(&sealed, &plain, k);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Without the key, a sealed file is an error naming it.
    let out = s.path("x.pcapng");
    let o = corecap(&[
        "query",
        "--force",
        sealed.to_str().unwrap(),
        "-w",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("c.pcapng.sealed"));
    // Index with the key: the sidecar is sealed too.
    index(&[&sealed], &["--key-file", k]);
    let side = std::fs::read(corecap_index::sidecar_path(&sealed)).unwrap();
    assert!(side.starts_with(b"CORECAPS"), "sealed sidecar");
    let host = first_dst(&plain);
    let ps = sealed.to_str().unwrap();
    let v = check(
        std::slice::from_ref(&plain),
        &[ps, "--key-file", k],
        &format!("host {host}"),
        None,
        None,
        &s,
    );
    assert!(u(&v, "packets") > 0 && u(&v, "files_indexed") == 1, "{v}");
    assert!(u(&v, "bytes_read") < u(&v, "bytes_total"), "{v}");
    let all = packets(&plain);
    let (t1, t2) = (all[1000].0, all[3000].0);
    let v = check(
        std::slice::from_ref(&plain),
        &[ps, "--key-file", k],
        "",
        Some(t1),
        Some(t2),
        &s,
    );
    assert_eq!(u(&v, "packets"), 2000, "{v}");
    // A sealed file cut short: answered from its whole chunks.
    let raw = std::fs::read(&sealed).unwrap();
    let cut = s.path("cut.pcapng.sealed");
    std::fs::write(&cut, &raw[..raw.len() / 2]).unwrap();
    let o = index(&[&cut], &["--key-file", k]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("cut short"),
        "{o:?}"
    );
    let cut_plain = s.path("cut.pcapng");
    corecap(&[
        "decrypt",
        cut.to_str().unwrap(),
        "-o",
        cut_plain.to_str().unwrap(),
        "--key-file",
        k,
    ]);
    check(
        &[cut_plain],
        &[cut.to_str().unwrap(), "--key-file", k],
        &format!("host {host}"),
        None,
        None,
        &s,
    );
}

/// A daemon on the lab whose spool `spool` (made in `s`) holds `old.pcap`, a synthetic pcap
/// of `n` packets, with its index; returns the daemon, the spool and the file.
fn serve_indexed_spool(lab: &Lab, s: &Scratch, n: u32) -> (Daemon, PathBuf, PathBuf) {
    let spool = s.path("spool");
    std::fs::create_dir(&spool).unwrap();
    let old = spool.join("old.pcap");
    synthetic_pcap(&old, n, T0);
    index(&[&old], &[]);
    (Daemon::start(lab, s, &["-i", "cap0"]), spool, old)
}

#[test]
#[ignore = "needs root"]
fn issue13_serve_streams_query_results() {
    let lab = Lab::new(1);
    let s = Scratch::new("query-serve");
    let (d, spool, a) = serve_indexed_spool(&lab, &s, 8000);
    // A recording made through the daemon lands in the spool too.
    d.request_ok(&["start", "-i", "cap0", "-c", "3000", "-w", "live.pcapng"]);
    lab.gen(3000, &["--flows", "16", "--size", "256", "--rate", "30000"]);
    let o = d.request(&["list", "--json"]);
    let live = spool.join("live.pcapng");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while packets(&live).len() < 3000 {
        assert!(std::time::Instant::now() < deadline, "{o:?}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let files = [live.clone(), a.clone()];
    for filter in ["host 10.1.7.2", "udp port 5001 or port 53"] {
        let out = s.path("served.pcapng");
        d.request_ok(&["query", "--force", "-w", out.to_str().unwrap(), filter]);
        let want = tcpdump(&files, filter, 0, u64::MAX, &s);
        let got = packets(&out);
        assert!(got.windows(2).all(|w| w[0].0 <= w[1].0), "time order");
        assert_eq!(got.len(), want.len(), "{filter}");
        assert!(sorted(got) == want, "{filter}");
    }
    // A window only, and errors before any byte is sent.
    let out = s.path("w.pcapng");
    let from = secs(T0 + 2_000_000_000);
    let to = secs(T0 + 3_000_000_000);
    d.request_ok(&[
        "query",
        "--from",
        &from,
        "--to",
        &to,
        "-w",
        out.to_str().unwrap(),
    ]);
    assert_eq!(packets(&out).len(), 1000);
    let o = d.request(&["query", "--force", "-w", out.to_str().unwrap(), "udp port"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("400"), "{o:?}");
    // The refused answer left the file it was to replace as it was.
    assert_eq!(packets(&out).len(), 1000);
    let o = d.request(&[
        "query",
        "--force",
        "--from",
        "yesterday",
        "-w",
        out.to_str().unwrap(),
    ]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("from yesterday"),
        "{o:?}"
    );
}

#[test]
#[ignore = "needs root"]
fn issue13_queries_during_traffic_do_not_raise_capture_drops() {
    let lab = Lab::new(1);
    let s = Scratch::new("query-busy");
    // Something to search: 200,000 packets (about 20 MB) with their index.
    let (d, _, _) = serve_indexed_spool(&lab, &s, 200_000);
    let o = d.request_ok(&["start", "-i", "cap0", "-w", "rec.pcapng"]);
    let id = String::from_utf8_lossy(&o.stdout).trim().to_owned();
    // Three seconds of traffic while queries scan the spool over and over.
    let mut traffic = Command::new(util::bin())
        .args(["gen", "--netns", &lab.netns, "-i", "gen0", "--flows", "64"])
        .args(["--size", "512", "--rate", "20000", "--count", "60000"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("traffic");
    let mut queries = 0;
    while traffic.try_wait().unwrap().is_none() {
        let out = s.path("q.pcapng");
        d.request_ok(&[
            "query",
            "--force",
            "-w",
            out.to_str().unwrap(),
            "not host 10.9.9.9",
        ]);
        queries += 1;
    }
    assert!(queries >= 2, "queries ran during the traffic: {queries}");
    let o = d.request_ok(&["--json", "stop", &id]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(
        u(&v, "packets"),
        60_000,
        "the recording kept every packet: {v}"
    );
    for (k, n) in v["drops"].as_object().expect("drops") {
        assert_eq!(n, 0, "no {k} drops while queries ran: {v}");
    }
    let m = String::from_utf8_lossy(&d.request(&["metrics"]).stdout).into_owned();
    assert!(
        m.contains("corecap_base_drops_total{interface=\"cap0\",at=\"kernel\"} 0"),
        "{m}"
    );
}

#[test]
fn issue21_replaced_capture_under_old_index() {
    let s = Scratch::new("replaced");
    let a = s.path("a.pcap");
    synthetic_pcap(&a, 20_000, T0);
    index(&[&a], &[]);
    let old_index = std::fs::read(corecap_index::sidecar_path(&a)).expect("index");
    // The same name, other packets, a longer file: the old index would prune them all away.
    synthetic_pcap(&a, 25_000, T0 + 3_600_000_000_000);
    std::fs::write(corecap_index::sidecar_path(&a), &old_index).expect("old index back");
    let files = [a.clone()];
    let pa = a.to_str().unwrap();
    let v = check(&files, &[pa], "host 10.1.45.2", None, None, &s);
    assert!(u(&v, "packets") > 0, "{v}");
    assert_eq!(u(&v, "files_scanned"), 1, "{v}");
    let notes = v["notes"].as_array().expect("notes");
    assert_eq!(notes.len(), 1, "said once: {v}");
    assert!(
        notes[0].as_str().unwrap_or("").contains("does not match"),
        "{v}"
    );
    // `corecap index` rewrites it, and the index is used again.
    index(&[&a], &[]);
    let v = check(&files, &[pa], "host 10.1.45.2", None, None, &s);
    assert_eq!(u(&v, "files_indexed"), 1, "{v}");
    assert!(v["notes"].as_array().is_some_and(Vec::is_empty), "{v}");
    assert!(u(&v, "bytes_read") * 10 < u(&v, "bytes_total"), "{v}");
}

#[test]
fn issue21_an_index_of_the_old_format_is_not_trusted() {
    let s = Scratch::new("v1-index");
    let a = s.path("a.pcap");
    synthetic_pcap(&a, 5000, T0);
    index(&[&a], &[]);
    // The same index, saying it is of version 1.
    let side = corecap_index::sidecar_path(&a);
    let mut ix = std::fs::read(&side).expect("index");
    ix[8..10].copy_from_slice(&1u16.to_le_bytes());
    std::fs::write(&side, &ix).expect("write");
    let v = check(
        std::slice::from_ref(&a),
        &[a.to_str().unwrap()],
        "host 10.1.3.2",
        None,
        None,
        &s,
    );
    assert_eq!(u(&v, "files_scanned"), 1, "{v}");
    assert!(v["notes"].to_string().contains("version 1"), "{v}");
}

/// A beacon: one host sends a packet every 100 ms among dense traffic; its query reads its
/// packets' blocks and the index, not the regions it touches.
#[test]
fn issue22_a_beacon_in_dense_traffic_costs_its_packets() {
    let s = Scratch::new("beacon");
    let a = s.path("dense.pcap");
    {
        let f = std::fs::File::create(&a).unwrap();
        let mut w = PcapWriter::new(std::io::BufWriter::new(f), 1, 65535).unwrap();
        for i in 0..100_000u32 {
            let (src, dst) = if i % 100 == 50 {
                ([10, 9, 9, 9], [192, 0, 2, 1])
            } else {
                (
                    [10, 0, (i % 200) as u8, 1],
                    [10, 1, (i / 1000) as u8, (i % 7) as u8],
                )
            };
            let fr = udp_frame(src, dst, 1024 + (i % 9) as u16, 443, 400);
            w.write_packet(T0 + u64::from(i) * 1_000_000, &fr, 400, None)
                .unwrap();
        }
        w.flush().unwrap();
    }
    index(&[&a], &[]);
    let pa = a.to_str().unwrap();
    let v = check(
        std::slice::from_ref(&a),
        &[pa],
        "host 10.9.9.9",
        None,
        None,
        &s,
    );
    assert_eq!(u(&v, "packets"), 1000, "{v}");
    // Each packet is read with the 4 KiB blocks that hold it (they are 40 KB apart): one
    // block, or two for one that crosses a boundary.
    assert!(
        u(&v, "bytes_read") <= 1000 * 8192 && u(&v, "bytes_read") * 4 <= 1000 * 4096 * 5,
        "a 4 KiB read per packet: {v}"
    );
    assert!(u(&v, "bytes_read") * 8 < u(&v, "bytes_total"), "{v}");
    // A window of a tenth of the time reads a tenth of its packets.
    let (from, to) = (T0 + 10_000_000_000, T0 + 20_000_000_000);
    let v = check(
        std::slice::from_ref(&a),
        &[pa],
        "host 10.9.9.9",
        Some(from),
        Some(to),
        &s,
    );
    assert_eq!(u(&v, "packets"), 100, "{v}");
    assert!(u(&v, "bytes_read") <= 100 * 8192, "{v}");
    // --stats counts from the index alone: the beacon's packets (exactly, over the whole
    // file), and at most the packets of the regions the window touches.
    let stats = |args: &[&str]| -> Value {
        let mut a = vec!["query", "--stats", pa];
        a.extend_from_slice(args);
        let o = corecap(&a);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).expect("json")
    };
    let v = stats(&["host", "10.9.9.9"]);
    assert_eq!(u(&v, "packets_at_most"), 1000, "{v}");
    assert_eq!(u(&v, "files_indexed"), 1, "{v}");
    let (f, t) = (secs(from), secs(to));
    let v = stats(&["--from", &f, "--to", &t, "host", "10.9.9.9"]);
    let n = u(&v, "packets_at_most");
    // A region holds about 25 of the beacon's packets: the two the window cuts add at most 50.
    assert!((100..=150).contains(&n), "{v}");
}

/// Records `src` into the sealed file `out` under `key` (`capture -r --encrypt aes`).
fn record_sealed(src: &Path, out: &Path, key: &str) {
    let o = corecap(&[
        "capture",
        "--stats-interval",
        "0",
        "--encrypt",
        "aes",
        "--key-file",
        key,
        "-r",
        src.to_str().unwrap(),
        "-w",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{o:?}");
}

/// The notes of a query saying an index does not match its file.
fn mismatch_notes(v: &Value) -> Vec<String> {
    v["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .map(|n| n.as_str().unwrap_or_default().to_owned())
        .filter(|n| n.contains("index does not match"))
        .collect()
}

#[test]
fn issue21_recorded_index_names_its_file() {
    let s = Scratch::new("query-recorded");
    std::fs::create_dir(s.path("rec")).unwrap();
    let src = s.path("src.pcap");
    synthetic_pcap(&src, 20_000, T0);
    // The recorder writes the index when it closes the file.
    let rec = s.path("rec/r.pcapng");
    let o = corecap(&[
        "capture",
        "--stats-interval",
        "0",
        "-r",
        src.to_str().unwrap(),
        "-w",
        rec.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{o:?}");
    let side = corecap_index::sidecar_path(&rec);
    let ix = corecap_index::Index::parse(&std::fs::read(&side).unwrap()).unwrap();
    let f = std::fs::File::open(&rec).unwrap();
    let id = ix.identity.expect("the recorder's index has its identity");
    assert_eq!(
        corecap_index::Identity::of_file(&f, ix.covered).unwrap(),
        id,
        "the index names the bytes on disk"
    );
    assert_eq!(ix.covered, f.metadata().unwrap().len());
    let dir = s.path("rec").to_str().unwrap().to_owned();
    let files = [rec.clone()];
    let v = check(&files, &[&dir], "host 10.1.7.2", None, None, &s);
    assert_eq!(u(&v, "files_indexed"), 1, "{v}");
    // Replaced by another recording of other traffic: scanned, with the note.
    let other = s.path("other.pcap");
    synthetic_pcapng(&other, 30_000, T0);
    let tmp = s.path("rec2.pcapng");
    let o = corecap(&[
        "capture",
        "--stats-interval",
        "0",
        "--no-index",
        "-r",
        other.to_str().unwrap(),
        "-w",
        tmp.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{o:?}");
    // Put in place by rename, as a tool that writes a file whole does.
    std::fs::rename(&tmp, &rec).unwrap();
    let v = check(
        &files,
        &[&dir],
        "vlan 200 and host 10.6.3.1",
        None,
        None,
        &s,
    );
    assert_eq!(u(&v, "packets"), 1000, "{v}");
    assert_eq!(mismatch_notes(&v).len(), 1, "{v}");
    // A sealed recording: its index names the sealed bytes on disk.
    let key = keygen(&s, "k.key");
    let sealed = s.path("rec/r.pcapng.sealed");
    record_sealed(&src, &sealed, &key);
    let plain = s.path("r-plain.pcapng");
    let o = decrypt(&sealed, &plain, &key);
    assert!(o.status.success(), "{o:?}");
    let ps = sealed.to_str().unwrap();
    let v = check(
        std::slice::from_ref(&plain),
        &[ps, "--key-file", &key],
        "host 10.1.7.2",
        None,
        None,
        &s,
    );
    assert_eq!(u(&v, "files_indexed"), 1, "{v}");
    assert!(v["notes"].as_array().unwrap().is_empty(), "{v}");
}

#[test]
fn issue21_no_capture_is_named_like_an_index() {
    let s = Scratch::new("query-names");
    let src = s.path("src.pcap");
    synthetic_pcap(&src, 1000, T0);
    // `-w x.idx` is refused: x.idx is the index of x. So is a hidden name, and the name of
    // a file's sessions.
    for name in ["x.idx", "x.pcapng.idx", ".x.pcapng", "x.pcapng.sessions"] {
        let out = s.path(name);
        let o = corecap(&[
            "capture",
            "-r",
            src.to_str().unwrap(),
            "-w",
            out.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains("a capture file's name cannot"),
            "{name}: {err}"
        );
        assert!(!out.exists(), "{name}");
    }
    // A directory query skips sidecars and the files being written, but a pcap that
    // another tool named `.idx` is a capture.
    let dir = s.path("d");
    std::fs::create_dir(&dir).unwrap();
    let a = dir.join("a.pcap");
    synthetic_pcap(&a, 3000, T0);
    index(&[&a], &[]);
    std::fs::write(dir.join(".b.pcap.part"), b"being written").unwrap();
    std::fs::write(dir.join(".a.pcap.idx.tmp"), b"being written").unwrap();
    let other = dir.join("trace.idx");
    synthetic_pcap(&other, 2000, T0 + 3_000_000_000);
    let d = dir.to_str().unwrap();
    let v = check(&[a.clone(), other.clone()], &[d], "", None, None, &s);
    assert_eq!(u(&v, "files"), 2, "{v}");
    assert_eq!(u(&v, "packets"), 5000, "{v}");
    assert_eq!(u(&v, "files_skipped"), 0, "{v}");
}

#[test]
fn issue22_a_window_opens_only_its_files_and_a_damaged_catalog_is_rebuilt() {
    let s = Scratch::new("catalog");
    let src = s.path("src.pcap");
    synthetic_pcap(&src, 20_000, T0);
    let dir = s.path("rec");
    std::fs::create_dir(&dir).unwrap();
    let rec = dir.join("rec.pcapng");
    let record = |input: &Path| {
        let o = corecap(&[
            "capture",
            "--stats-interval",
            "0",
            "-r",
            input.to_str().unwrap(),
            "-w",
            rec.to_str().unwrap(),
            "-b",
            "filesize:1000",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    record(&src);
    assert!(dir.join(corecap_store::CATALOG).exists());
    let files: Vec<PathBuf> = {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "pcapng"))
            .collect();
        v.sort();
        v
    };
    assert!(files.len() >= 8, "{files:?}");
    let d = dir.to_str().unwrap();
    let (from, to) = (T0 + 5_000_000_000, T0 + 7_000_000_000);
    let v = check(&files, &[d], "", Some(from), Some(to), &s);
    assert_eq!(u(&v, "packets"), 2000, "{v}");
    assert!(
        u(&v, "files_pruned") + 4 >= files.len() as u64,
        "only the window's files are opened: {v}"
    );
    // A damaged catalog: queries do without it, the next writer rebuilds it from the files.
    std::fs::write(dir.join(corecap_store::CATALOG), vec![0x5a; 8192]).unwrap();
    for ext in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.join(format!("{}{ext}", corecap_store::CATALOG)));
    }
    let v = check(&files, &[d], "", Some(from), Some(to), &s);
    assert_eq!(u(&v, "files_pruned"), 0, "{v}");
    let later = s.path("later.pcap");
    synthetic_pcap(&later, 2000, T0 + 100_000_000_000);
    record(&later);
    assert!(dir
        .join(format!("{}.damaged", corecap_store::CATALOG))
        .exists());
    let v = check(&files, &[d], "", Some(from), Some(to), &s);
    assert!(u(&v, "files_pruned") + 4 >= files.len() as u64, "{v}");
}

/// A query that cannot read all of its answer ends with an error that `corecap request`
/// reports with a non-zero exit, never a 200 and exit 0 with less than the answer.
#[test]
#[ignore = "needs root"]
fn issue22_a_served_query_cut_short_fails_loudly() {
    let lab = Lab::new(1);
    let s = Scratch::new("query-cut");
    let (d, spool, _a) = serve_indexed_spool(&lab, &s, 4000);
    let out = s.path("served.pcapng");
    let o = d.request(&["query", "-w", out.to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(packets(&out).len(), 4000);
    // A sealed capture in the spool of a daemon that has no key: it cannot be read.
    let src = s.path("src.pcap");
    synthetic_pcap(&src, 100, T0 + 10_000_000_000);
    let key = keygen(&s, "k.key");
    let sealed = spool.join("sealed.pcapng.sealed");
    record_sealed(&src, &sealed, &key);
    let o = d.request(&["query", "--force", "-w", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "a cut answer is a failure: {err}");
    assert!(err.contains("cut short"), "{err}");
}

/// A file of the spool that the daemon's query threads cannot open (they hold no
/// capability; it is nobody's, mode 000) may be a capture: the query fails and says which.
#[test]
#[ignore = "needs root"]
fn issue22_an_unreadable_file_is_an_error_not_a_smaller_answer() {
    let lab = Lab::new(1);
    let s = Scratch::new("query-locked");
    let (d, spool, _a) = serve_indexed_spool(&lab, &s, 2000);
    let locked = spool.join("locked.pcap");
    synthetic_pcap(&locked, 100, T0 + 10_000_000_000);
    std::os::unix::fs::chown(&locked, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    let out = s.path("served.pcapng");
    let o = d.request(&["query", "-w", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("locked.pcap"), "{err}");
}

/// Issue 40: `--from 2026-02-31T00:00:00Z` was taken as March 3. A date or a time of day
/// that does not exist is refused with one line that names it and says what is wrong, and
/// nothing is written.
#[test]
fn issue40_an_impossible_date_is_refused() {
    let s = Scratch::new("query-dates");
    let src = s.path("src.pcap");
    synthetic_pcap(&src, 10, T0);
    let out = s.path("out.pcapng");
    for (flag, time, says) in [
        (
            "--from",
            "2026-02-31T00:00:00Z",
            "February 2026 has 28 days",
        ),
        ("--to", "2026-02-29T00:00:00Z", "February 2026 has 28 days"),
        ("--from", "2026-13-01T00:00:00Z", "month 13"),
        ("--to", "2026-01-01T24:00:00Z", "hour 24"),
        ("--from", "2026-01-01T10:60:00Z", "minute 60"),
    ] {
        let o = corecap(&[
            "query",
            "--force",
            src.to_str().unwrap(),
            flag,
            time,
            "-w",
            out.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{time}: {err}");
        assert!(
            err.contains(&format!("{flag} {time}")) && err.contains(says),
            "{time}: wanted '{says}' in {err}"
        );
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(!out.exists(), "{time}");
    }
}

/// A pcapng file of 200 UDP frames, one a millisecond from `t0_ns`.
fn frames_at(path: &Path, t0_ns: u64) {
    let times = (0..200u64).map(|i| t0_ns + i * 1_000_000);
    std::fs::write(path, util::udp_pcapng(times, 200)).unwrap();
}

/// Issue 40: a catalog entry is believed only under the identity its file's index has: a
/// recording replaced by another of the same length (with its own correct index beside
/// it) is not pruned by the old file's time range.
#[test]
fn issue40_a_file_replaced_by_one_of_the_same_length_is_not_pruned_by_the_catalog() {
    let s = Scratch::new("catalog-identity");
    let day = 1_780_000_000_000_000_000u64;
    // Names of one length: each input's name goes into its recording's header.
    let (early, late) = (s.path("in1.pcapng"), s.path("in2.pcapng"));
    frames_at(&early, day);
    frames_at(&late, day + 3_600_000_000_000);
    for (input, dir) in [(&early, "rec"), (&late, "other")] {
        std::fs::create_dir(s.path(dir)).unwrap();
        let out = s.path(dir).join("r.pcapng");
        let o = corecap(&[
            "capture",
            "-r",
            input.to_str().unwrap(),
            "-w",
            out.to_str().unwrap(),
            "--stats-interval",
            "0",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let (rec, other) = (
        s.path("rec").join("r.pcapng"),
        s.path("other").join("r.pcapng"),
    );
    let len = |p: &Path| std::fs::metadata(p).unwrap().len();
    assert_eq!(len(&rec), len(&other), "the two recordings have one length");
    // The later recording, with its own index, replaces the earlier one under its name.
    for (from, to) in [
        (other.clone(), rec.clone()),
        (
            corecap_index::sidecar_path(&other),
            corecap_index::sidecar_path(&rec),
        ),
    ] {
        std::fs::copy(from, to).unwrap();
    }
    let dir = s.path("rec");
    let from = secs(day + 3_600_000_000_000);
    let to = secs(day + 3_601_000_000_000);
    let (got, v) = query(&[dir.to_str().unwrap(), "--from", &from, "--to", &to], &s);
    assert_eq!(got.len(), 200, "{v}");
}

/// Issue 40: a daemon that records its interface and also stores an on-demand capture of
/// it answers each packet once, though the recording and the spool both hold it.
#[test]
#[ignore = "needs root"]
fn issue40_a_packet_in_the_recording_and_the_spool_is_given_once() {
    let lab = Lab::new(1);
    let s = Scratch::new("query-once");
    let rec = s.path("rec");
    let args = util::recording_daemon_args(&rec, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let d = Daemon::start(&lab, &s, &args);
    let id = d.start_capture(&["-w", "copy.pcapng", "-c", "300"]);
    let sent = lab.gen(500, &["--flows", "8", "--size", "256"]);
    let v = d.wait_for(&id, |v| v["state"] != "running");
    assert_eq!(v["state"], "done", "{v}");
    let out = s.path("once.pcapng");
    // The recording is on disk within its flush interval (0.2 s).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let got = loop {
        let o = d.request_ok(&["query", "--force", "-w", out.to_str().unwrap()]);
        let got = packets(&out);
        if got.len() as u64 >= sent || std::time::Instant::now() > deadline {
            let err = String::from_utf8_lossy(&o.stderr).into_owned();
            assert!(err.contains("300 packets held by two files"), "{err}");
            break got;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(got.len() as u64, sent, "each packet once");
    let mut unique = got.clone();
    unique.dedup();
    assert_eq!(unique.len(), got.len(), "no packet twice");
}

/// Issue 39: `query` takes the times Wireshark and capinfos print, in `--tz` (or `TZ`), and
/// spelled-out relative times; it shows the window back in UTC; and its `-w` never writes
/// over a file, as `capture -w` (`--force` to allow it).
#[test]
fn issue39_query_takes_local_times_and_never_writes_over_a_file() {
    let s = Scratch::new("query-times");
    let file = s.path("f.pcapng");
    // 200 packets a millisecond apart from 2026-05-27 13:20:00 UTC.
    let t0 = 1_779_888_000_000_000_000u64;
    frames_at(&file, t0);
    let out = s.path("o.pcapng");
    let f = file.to_str().unwrap();
    let o = out.to_str().unwrap();
    // 15:20:00.050 to 15:20:00.150 in Paris (summer time, UTC+2): packets 50 to 149.
    let args = [
        "query",
        "--json",
        f,
        "-w",
        o,
        "--tz",
        "Europe/Paris",
        "--from",
        "2026-05-27 15:20:00.050",
        "--to",
        "2026-05-27 15:20:00.150",
    ];
    let r = corecap(&args);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let v: Value = serde_json::from_slice(&r.stdout).expect("json");
    assert_eq!(u(&v, "packets"), 100, "{v}");
    assert_eq!(v["from"], "2026-05-27T13:20:00.050000000Z", "{v}");
    assert_eq!(v["to"], "2026-05-27T13:20:00.150000000Z", "{v}");
    // The same in TZ's zone.
    let r = Command::new(util::bin())
        .env("TZ", "Europe/Paris")
        .args(&args[..5])
        .args([
            "--force",
            "--from",
            "2026-05-27 15:20:00.050",
            "--to",
            "2026-05-27 15:20:00.150",
        ])
        .output()
        .expect("run");
    let v: Value = serde_json::from_slice(&r.stdout).expect("json");
    assert_eq!(u(&v, "packets"), 100, "{v}");
    // Without --force the file that is there stays as it is.
    let before = std::fs::read(&out).expect("answer");
    let r = corecap(&["query", f, "-w", o, "--from", "-2hours"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(err.contains("--force"), "{err}");
    assert_eq!(
        std::fs::read(&out).expect("answer"),
        before,
        "not written over"
    );
}

/// Issue 40: `serve --record` from two workers writes its files in time order (a stage
/// drained the workers' pipes in turn, and every other batch stepped back in time).
#[test]
#[ignore = "needs root"]
fn issue40_serve_records_two_workers_in_time_order() {
    let lab = Lab::new(2);
    let s = Scratch::new("record-order");
    let rec = s.path("rec");
    let args = util::recording_daemon_args(&rec, &["--workers", "2"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let d = Daemon::start(&lab, &s, &args);
    let sent = lab.gen(6000, &["--size", "600", "--threads", "2", "--flows", "64"]);
    drop(d);
    let mut names: Vec<PathBuf> = std::fs::read_dir(&rec)
        .expect("recording")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcapng"))
        .collect();
    names.sort();
    let all: Vec<(u64, Vec<u8>)> = names.iter().flat_map(|p| packets(p)).collect();
    assert_eq!(all.len() as u64, sent, "{names:?}");
    let back: Vec<u64> = all
        .windows(2)
        .filter(|w| w[0].0 > w[1].0)
        .map(|w| w[0].0 - w[1].0)
        .collect();
    // The member lets packets go by the workers' watermarks (stage::reorder): a worker
    // kept off its CPU holds the other's packets back instead of being overtaken.
    assert!(
        back.is_empty(),
        "steps back in time over {names:?}: {} (ns: {:?})",
        back.len(),
        &back[..back.len().min(10)]
    );
}

/// Issue 39: `query -r FILE FILTER` reads as `tcpdump -r FILE FILTER` does.
#[test]
fn issue39_query_r_takes_the_file_and_the_rest_is_the_filter() {
    let s = Scratch::new("query-r");
    let file = s.path("f.pcapng");
    frames_at(&file, 1_780_000_000_000_000_000);
    let out = s.path("o.pcapng");
    let o = corecap(&[
        "query",
        "--json",
        "-r",
        file.to_str().unwrap(),
        "-w",
        out.to_str().unwrap(),
        "udp",
        "src",
        "port",
        "1007",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(u(&v, "packets"), 1, "{v}");
}

/// Issue 40: a query never reads more than the whole file. A host in every eighth packet of
/// small frames has a match in every 4 KiB block; a run that crossed a block's end made the
/// next read start at that block again, and the query read 1,055,188 bytes of a 928,212-byte
/// file. Now each block is read once: at most the file.
#[test]
fn issue40_a_query_reads_no_byte_twice() {
    let s = Scratch::new("query-once");
    let f = s.path("spread.pcap");
    let file = std::fs::File::create(&f).unwrap();
    let mut w = PcapWriter::new(std::io::BufWriter::new(file), 1, 65535).unwrap();
    let n = 8000u32;
    for i in 0..n {
        let dst = [10, 1, 0, 1 + (i % 8) as u8];
        let fr = udp_frame([10, 0, 0, 1], dst, 1024, 5002, 100 + (i % 13) as usize);
        let len = fr.len() as u32;
        w.write_packet(T0 + u64::from(i) * 1_000, &fr, len, None)
            .unwrap();
    }
    w.flush().unwrap();
    drop(w);
    index(&[&f], &[]);
    let (p, v) = query(&[f.to_str().unwrap(), "host 10.1.0.7"], &s);
    assert_eq!(p.len() as u32, n / 8, "{v}");
    assert!(
        u(&v, "bytes_read") <= u(&v, "bytes_total"),
        "read no more than the file: {v}"
    );
}

/// Issue 40: `request query -w FILE`, to one daemon or to several sensors, never writes over
/// a file, as `query -w` and `capture -w` do not (`--force` replaces it); the refusal comes
/// before any sensor is asked. It used to truncate the user's file.
#[test]
#[ignore = "needs root"]
fn issue40_request_query_never_writes_over_a_file() {
    let lab = Lab::new(1);
    let s = Scratch::new("request-no-overwrite");
    let d = Daemon::start(&lab, &s, &[]);
    let mine = s.path("notes.pcapng");
    std::fs::write(&mine, b"the user's own bytes").expect("write");
    let out = mine.to_str().unwrap();
    let o = d.request(&["query", "-w", out]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "refused: {err}");
    assert!(err.contains("exists") && err.contains("--force"), "{err}");
    let o = d.request(&["--sensor", "s1=http://127.0.0.1:9", "query", "-w", out]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "the fan-out refuses too: {err}");
    assert!(err.contains("exists"), "before asking the sensor: {err}");
    assert_eq!(std::fs::read(&mine).expect("read"), b"the user's own bytes");
    // The answer is written under a hidden part and named when whole: none is left.
    let part = s.path(".notes.pcapng.part");
    assert!(!part.exists());
    d.request_ok(&["query", "--force", "-w", out]);
    assert_ne!(std::fs::read(&mine).expect("read"), b"the user's own bytes");
    assert!(!part.exists());
    packets(&mine);
    // A part another answer left (killed before it ended) is named, not written over.
    std::fs::write(&part, b"half an answer").expect("write");
    let o = d.request(&["query", "--force", "-w", out]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains(".notes.pcapng.part exists"), "{err}");
    assert_eq!(std::fs::read(&part).expect("read"), b"half an answer");
}

/// Issue 40 (fault run): `query --json` whose standard output is closed (`| head -c 100`)
/// exits 0, as a closed output is the reader's choice; it panicked in `println!`.
#[test]
fn issue40_query_json_into_a_closed_output_exits_0_without_a_panic() {
    let s = Scratch::new("query-closed-out");
    let file = s.path("f.pcapng");
    frames_at(&file, 1_780_000_000_000_000_000);
    let out = s.path("o.pcapng");
    for args in [
        &["query", "--json", "-w", out.to_str().unwrap(), "--force"][..],
        &["query", "--json", "--stats"],
    ] {
        // A pipe whose reading end is closed before the query writes a byte.
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let o = Command::new(util::bin())
            .args(args)
            .arg(&file)
            .stdout(writer)
            .output()
            .expect("run corecap");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
    }
}

/// A `corecap lab mix` of `connections` connections at `name` in `s` (its default sizes: a
/// 10,000-connection mix is about 70 MB).
fn lab_mix(s: &Scratch, name: &str, connections: u32) -> PathBuf {
    let path = s.path(name);
    let n = connections.to_string();
    let o = corecap(&[
        "lab",
        "mix",
        "-w",
        path.to_str().unwrap(),
        "--connections",
        &n,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    path
}

/// `query -c 3 FILTER > FILE` prints 3 packets and exits 0, as tcpdump -c does; the rest
/// of the answer, which had nowhere to go, ended it with "writing the output: Broken pipe"
/// and exit 2. `-w -` into an output closed early (`| head -c 100`) ends quietly with 0 too.
#[test]
fn query_c_stops_after_its_packets_with_exit_0() {
    let s = Scratch::new("query-count");
    let big = lab_mix(&s, "mix.pcap", 2000);
    let lines = s.path("f");
    let o = Command::new(util::bin())
        .args(["query", big.to_str().unwrap(), "-c", "3", "tcp"])
        .stdout(std::fs::File::create(&lines).expect("create"))
        .output()
        .expect("run corecap");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("error"), "{err}");
    let text = std::fs::read_to_string(&lines).expect("read");
    assert_eq!(text.lines().count(), 3, "{text}");
    // A reader that takes 100 bytes of the pcapng stream, then closes its end.
    let mut c = Command::new(util::bin())
        .args(["query", big.to_str().unwrap(), "-w", "-", "tcp"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run corecap");
    let mut head = [0u8; 100];
    std::io::Read::read_exact(c.stdout.as_mut().expect("stdout"), &mut head).expect("read");
    drop(c.stdout.take());
    let o = c.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("error"), "{err}");
}

/// The capture `capture -r` records of the real loopback sessions (with its index and its
/// sessions file), in `s`.
fn recorded_sessions(s: &Scratch) -> PathBuf {
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/real/sessions-loopback.pcap"
    );
    std::fs::create_dir_all(s.path("t1")).expect("mkdir");
    let rec = s.path("t1/out.pcapng");
    let o = corecap(&["capture", "-r", src, "-w", rec.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    rec
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `query -w` that fails leaves no file (neither the answer nor its hidden part), so the
/// corrected command runs; it left a 96-byte pcapng, and the rerun was refused because the
/// file existed. A filter that does not parse, or applies to none of the files, is refused
/// before any file is made, as tcpdump compiles its filter before it opens its output. A
/// selection that matches nothing is an empty answer, and written.
#[test]
fn query_w_that_fails_leaves_no_file_and_the_rerun_works() {
    let s = Scratch::new("query-fail-no-file");
    let rec = recorded_sessions(&s);
    let r = rec.to_str().unwrap();
    let out = s.path("x.pcapng");
    let o = out.to_str().unwrap();
    let before = names_in(&s.0);
    for bad in [
        &["host 10.0.0.7 and"][..],
        &["ip6 host 10.0.0.7"],
        &["--sni", "nothing.example", "host 10.0.0.7 and"],
    ] {
        let mut args = vec!["query", r, "-w", o];
        args.extend_from_slice(bad);
        let q = corecap(&args);
        let err = String::from_utf8_lossy(&q.stderr);
        assert_eq!(q.status.code(), Some(2), "{bad:?}: {err}");
        assert!(err.contains("filter"), "{bad:?}: {err}");
        assert_eq!(names_in(&s.0), before, "{bad:?} left a file: {err}");
    }
    let q = corecap(&["query", r, "-w", o, "host 127.0.0.1"]);
    assert!(q.status.success(), "{}", String::from_utf8_lossy(&q.stderr));
    assert!(util::tcpdump_packets(&out, "") > 0);
    // No connection selected: an empty answer, which tcpdump reads as empty.
    let empty = s.path("empty.pcapng");
    let q = corecap(&[
        "query",
        r,
        "-w",
        empty.to_str().unwrap(),
        "--sni",
        "nothing.example",
    ]);
    assert!(q.status.success(), "{}", String::from_utf8_lossy(&q.stderr));
    assert_eq!(util::tcpdump_packets(&empty, ""), 0);
}

/// `query -w` stopped by SIGINT ends its answer whole, as tcpdump -w does: the file holds
/// what was written, tcpdump reads it without an error, and the note and the exit status
/// (130) say it was cut short. It left a torn pcapng under its final name ("truncated
/// pcapng dump file"), and no word. Whether the signal comes before the end depends on
/// the machine; either way no torn file and no part are left.
#[test]
fn query_w_stopped_by_sigint_leaves_a_whole_file() {
    let s = Scratch::new("query-sigint");
    let big = lab_mix(&s, "big.pcap", 10000);
    let out = s.path("qi.pcapng");
    let part = s.path(".qi.pcapng.part");
    let mut child = Command::new(util::bin())
        .args([
            "query",
            big.to_str().unwrap(),
            "-w",
            out.to_str().unwrap(),
            "tcp",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run corecap");
    // Once bytes reach the disk (under either name), or the query ended (at most 30 s).
    let written = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.len() > 0);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !written(&part) && !written(&out) && std::time::Instant::now() < until {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let o = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&o.stderr);
    let code = o.status.code();
    assert!(
        code == Some(0) || code == Some(130),
        "ends by itself, not by the signal: {:?}: {err}",
        o.status
    );
    assert!(!part.exists(), "the part is gone: {err}");
    // A torn file makes tcpdump fail ("truncated pcapng dump file"): this asserts it reads
    // the file whole.
    let n = util::tcpdump_packets(&out, "");
    if code == Some(130) {
        assert!(err.contains("cut short"), "{err}");
        assert!(err.contains(&format!("{n} packets")), "{n}: {err}");
    }
}

/// `query IN -w IN --force` is refused and IN stays as it is, under its own name or another
/// (a hard link): it emptied the file it read ("0 packets", exit 0). An answer written into
/// the folder it reads is not read back into itself.
#[test]
fn query_w_never_writes_over_its_input() {
    let s = Scratch::new("query-own-input");
    let file = s.path("f.pcapng");
    frames_at(&file, 1_780_000_000_000_000_000);
    let link = s.path("link.pcapng");
    std::fs::hard_link(&file, &link).expect("hard link");
    let bytes = std::fs::read(&file).expect("read");
    let f = file.to_str().unwrap();
    for out in [f, link.to_str().unwrap()] {
        let q = corecap(&["query", f, "-w", out, "--force"]);
        let err = String::from_utf8_lossy(&q.stderr);
        assert_eq!(q.status.code(), Some(2), "-w {out}: {err}");
        assert!(err.contains("input"), "{err}");
        assert_eq!(std::fs::read(&file).expect("read"), bytes, "-w {out}");
    }
    std::fs::remove_file(&link).expect("remove link");
    // The folder holds f.pcapng alone: the answer written into it is f's packets, once.
    let out = s.path("answer.pcapng");
    let q = corecap(&["query", s.0.to_str().unwrap(), "-w", out.to_str().unwrap()]);
    assert!(q.status.success(), "{}", String::from_utf8_lossy(&q.stderr));
    assert_eq!(packets(&out), packets(&file));
}

/// A file named twice, under other names or inside a folder named too, is read once: the
/// query's answer and its file count are those of the file named once.
#[test]
fn query_reads_a_file_named_twice_once() {
    let s = Scratch::new("named-twice");
    let dir = s.path("rec");
    std::fs::create_dir(&dir).unwrap();
    let f = dir.join("a.pcapng");
    synthetic_pcapng(&f, 200, 1_700_000_000);
    let (d, f_s) = (dir.to_str().unwrap(), f.to_str().unwrap());
    let once = query(&[d], &s);
    let dotted = format!("{d}/./");
    let twice = query(&[d, f_s, &dotted], &s);
    assert_eq!(twice.0, once.0, "the same packets, once each");
    assert_eq!(u(&twice.1, "files"), 1, "{}", twice.1);
    assert!(!once.0.is_empty());
}

/// A second path that is not there is said to be missing, not taken as the start of the
/// filter and refused as its syntax error; a filter whose words look like none (a `net`
/// with its mask) is still a filter.
#[test]
fn query_a_missing_path_is_named_as_missing() {
    let s = Scratch::new("missing-path");
    let f = s.path("a.pcapng");
    synthetic_pcapng(&f, 20, 1_700_000_000);
    let missing = s.path("nonexist.pcapng");
    let (f_s, m_s) = (f.to_str().unwrap(), missing.to_str().unwrap());
    for cmd in ["query", "flows"] {
        let o = corecap(&[cmd, f_s, m_s, "host", "10.0.0.1"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {err}");
        assert!(
            err.contains("nonexist.pcapng: no such file or directory"),
            "{cmd}: {err}"
        );
    }
    let o = corecap(&["query", f_s, "net", "10.0.0.0/8"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
