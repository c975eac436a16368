//! Sessions read back (issue 35): `corecap flows` against tshark's conversations on real
//! captures of several link types, `corecap query` by Community ID and by name against
//! tshark's display filter of the same connection, connections joined across rotated
//! files of a lab recording, and the daemon's `GET /flows` and `request flows`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::util::*;

fn real(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/real")
        .join(name)
}

/// Real captures with TCP or UDP conversations and no tunnel (tshark would count an inner
/// conversation too), one or more per link type: Ethernet, BSD NULL, NFLOG, Linux SLL and
/// SLL2, raw IPv4 and IPv6.
const CAPTURES: &[&str] = &[
    "sessions-loopback.pcap",
    "community-id-combined.pcap",
    "dns_tcp.pcap",
    "dns-badcookie.pcap",
    "mptcp-v1.pcap",
    "nflog.pcap",
    "simple_http_sll2.pcap",
    "tcp-handshake-nano.pcap",
    "LINKTYPE_IPV4.pcap",
    "LINKTYPE_IPV6.pcap",
    "babel.pcap",
];

/// A conversation without its direction: protocol, and its two ends in order.
type Conv = (String, (IpAddr, u16), (IpAddr, u16));

/// Frames and bytes from the lower end to the higher, then back.
type Counts = [u64; 4];

fn conv_of(
    proto: &str,
    a: (IpAddr, u16),
    b: (IpAddr, u16),
    ab: [u64; 2],
    ba: [u64; 2],
) -> (Conv, Counts) {
    if a <= b {
        ((proto.to_owned(), a, b), [ab[0], ab[1], ba[0], ba[1]])
    } else {
        ((proto.to_owned(), b, a), [ba[0], ba[1], ab[0], ab[1]])
    }
}

fn end_of(text: &str) -> (IpAddr, u16) {
    let (ip, port) = text.rsplit_once(':').expect("addr:port");
    (ip.parse().expect("address"), port.parse().expect("port"))
}

fn tshark(args: &[&str]) -> String {
    let o = Command::new("tshark").args(args).output().expect("tshark");
    assert!(
        o.status.success(),
        "tshark {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("utf-8")
}

/// tshark's TCP and UDP conversations of `f` (`-z conv,tcp -z conv,udp`): frames each way
/// from its table; bytes each way from its table where it prints them in bytes, and from
/// the frames' lengths where it rounds them (`11 kB`), checked against the table's where
/// it does not.
fn tshark_convs(f: &Path) -> BTreeMap<Conv, Counts> {
    let p = f.to_str().unwrap();
    // By direction: the protocol, the sender, the receiver.
    let mut lens: BTreeMap<Conv, [u64; 2]> = BTreeMap::new();
    let fields = tshark(&[
        "-r",
        p,
        "-T",
        "fields",
        "-e",
        "ip.src",
        "-e",
        "ipv6.src",
        "-e",
        "ip.dst",
        "-e",
        "ipv6.dst",
        "-e",
        "tcp.srcport",
        "-e",
        "tcp.dstport",
        "-e",
        "udp.srcport",
        "-e",
        "udp.dstport",
        "-e",
        "frame.len",
    ]);
    for line in fields.lines() {
        let c: Vec<&str> = line.split('\t').collect();
        if c.len() < 9 || c.iter().any(|x| x.contains(',')) {
            continue;
        }
        let pick = |a: &str, b: &str| {
            if a.is_empty() {
                b.to_owned()
            } else {
                a.to_owned()
            }
        };
        let (src, dst) = (pick(c[0], c[1]), pick(c[2], c[3]));
        let (proto, sp, dp) = match (c[4], c[6]) {
            ("", "") => continue,
            (t, "") => ("tcp", t, c[5]),
            (_, u) => ("udp", u, c[7]),
        };
        let key = (
            proto.to_owned(),
            (src.parse().unwrap(), sp.parse().unwrap()),
            (dst.parse().unwrap(), dp.parse().unwrap()),
        );
        let e = lens.entry(key).or_default();
        e[0] += 1;
        e[1] += c[8].parse::<u64>().unwrap();
    }
    let table = tshark(&["-r", p, "-q", "-z", "conv,tcp", "-z", "conv,udp"]);
    let mut out = BTreeMap::new();
    let mut proto = "";
    for line in table.lines() {
        if line.starts_with("TCP Conversations") {
            proto = "tcp";
        } else if line.starts_with("UDP Conversations") {
            proto = "udp";
        }
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() < 9 || w[1] != "<->" {
            continue;
        }
        let (a, b) = (end_of(w[0]), end_of(w[2]));
        let frames_ba: u64 = w[3].parse().unwrap();
        let frames_ab: u64 = w[6].parse().unwrap();
        let sum = |x, y| {
            lens.get(&(proto.to_owned(), x, y))
                .copied()
                .unwrap_or([0, 0])
        };
        let (ab, ba) = (sum(a, b), sum(b, a));
        assert_eq!(
            (ab[0], ba[0]),
            (frames_ab, frames_ba),
            "{line}: frames by field"
        );
        for (bytes, unit, want) in [(w[4], w[5], ba[1]), (w[7], w[8], ab[1])] {
            if unit == "bytes" {
                assert_eq!(bytes.parse::<u64>().unwrap(), want, "{line}: bytes");
            }
        }
        let (k, v) = conv_of(proto, a, b, ab, ba);
        out.insert(k, v);
    }
    out
}

/// Records `src` with `corecap capture -r SRC -w DIR/x.pcapng`; returns the recording.
fn record(src: &Path, s: &Scratch, tag: &str) -> PathBuf {
    record_with(src, s, tag, &[])
}

/// [`record`] with more of `capture`'s arguments.
fn record_with(src: &Path, s: &Scratch, tag: &str, more: &[&str]) -> PathBuf {
    let dir = s.path(tag);
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("x.pcapng");
    let args = [
        "capture",
        "-r",
        src.to_str().unwrap(),
        "-w",
        out.to_str().unwrap(),
    ];
    let o = corecap(&[&args[..], more].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A compressed recording's name says so.
    let out = match more.contains(&"--compress") {
        true => dir.join("x.pcapng.zst"),
        false => out,
    };
    assert!(
        corecap_store::names::sessions_path(&out).exists(),
        "{}",
        out.display()
    );
    out
}

/// `corecap flows ARGS --json`, each line parsed; the command must succeed.
fn flows_json(args: &[&str]) -> Vec<Value> {
    let o = corecap(&[&["flows"], args, &["--json"]].concat());
    assert!(
        o.status.success(),
        "flows {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// corecap's TCP and UDP connections, as [`tshark_convs`] gives tshark's.
fn corecap_convs(flows: &[Value]) -> BTreeMap<Conv, Counts> {
    let mut out = BTreeMap::new();
    for f in flows {
        let proto = f["network"]["transport"].as_str().unwrap();
        if proto != "tcp" && proto != "udp" {
            continue;
        }
        let end = |e: &Value| {
            (
                e["ip"].as_str().unwrap().parse().unwrap(),
                e["port"].as_u64().unwrap() as u16,
            )
        };
        let (s, d) = (&f["source"], &f["destination"]);
        let (k, v) = conv_of(
            proto,
            end(s),
            end(d),
            [u(s, "packets"), u(s, "bytes")],
            [u(d, "packets"), u(d, "bytes")],
        );
        assert!(out.insert(k, v).is_none(), "one record per connection: {f}");
    }
    out
}

#[test]
fn issue35_flows_equal_tshark_conversations() {
    if !need("tshark") {
        return;
    }
    let s = Scratch::new("flows-real");
    for (i, name) in CAPTURES.iter().enumerate() {
        let src = real(name);
        let rec = record(&src, &s, &format!("r{i}"));
        let ours = corecap_convs(&flows_json(&[rec.to_str().unwrap()]));
        let theirs = tshark_convs(&src);
        assert!(!theirs.is_empty(), "{name}: tshark sees conversations");
        assert_eq!(ours, theirs, "{name}: flows against tshark -z conv");
    }
}

/// tshark's display filter for the connection of flow `f`.
fn display_filter(f: &Value) -> String {
    let proto = f["network"]["transport"].as_str().unwrap();
    let (s, d) = (&f["source"], &f["destination"]);
    let ipf = if f["network"]["type"] == "ipv6" {
        "ipv6"
    } else {
        "ip"
    };
    format!(
        "{ipf}.addr=={} && {ipf}.addr=={} && {proto}.port=={} && {proto}.port=={}",
        s["ip"].as_str().unwrap(),
        d["ip"].as_str().unwrap(),
        s["port"],
        d["port"]
    )
}

/// `corecap query REC SELECTORS -w` gives exactly the packets (time and bytes) of
/// `tshark -r SRC -Y FILTER`; returns how many.
fn query_equals_tshark(src: &Path, rec: &Path, sel: &[&str], filter: &str, s: &Scratch) -> usize {
    let n = std::fs::read_dir(&s.0).unwrap().count();
    let (ours, theirs) = (
        s.path(&format!("q{n}.pcapng")),
        s.path(&format!("t{n}.pcapng")),
    );
    let o = corecap(
        &[
            &["query", rec.to_str().unwrap()],
            sel,
            &["-w", ours.to_str().unwrap()],
        ]
        .concat(),
    );
    assert!(
        o.status.success(),
        "query {sel:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    tshark(&[
        "-r",
        src.to_str().unwrap(),
        "-Y",
        filter,
        "-F",
        "pcapng",
        "-w",
        theirs.to_str().unwrap(),
    ]);
    let (a, b) = (packets(&ours), packets(&theirs));
    assert_eq!(a, b, "{sel:?} against tshark -Y '{filter}'");
    a.len()
}

#[test]
fn issue35_query_by_community_id_equals_tshark_conversation() {
    if !need("tshark") {
        return;
    }
    let s = Scratch::new("flows-cid");
    for name in [
        "sessions-loopback.pcap",
        "community-id-combined.pcap",
        "nflog.pcap",
        "simple_http_sll2.pcap",
        "dns_tcp.pcap",
    ] {
        let src = real(name);
        let rec = record(&src, &s, name);
        for f in flows_json(&[rec.to_str().unwrap()]) {
            let proto = f["network"]["transport"].as_str().unwrap();
            if proto != "tcp" && proto != "udp" {
                continue;
            }
            let id = f["network"]["community_id"].as_str().unwrap();
            let n =
                query_equals_tshark(&src, &rec, &["--community-id", id], &display_filter(&f), &s);
            assert_eq!(n as u64, u(&f["network"], "packets"), "{name} {id}");
        }
    }
}

/// `--no-index` keeps the sessions files: a recording without an index, plain or
/// compressed, lists the same connections as one with, a query by Community ID gives the
/// packets tshark gives for the connection (the query scans, with no index to read), and
/// a file replaced under the same name has its sessions no longer believed.
#[test]
fn issue35_sessions_without_an_index_equal_those_with_one() {
    if !need("tshark") {
        return;
    }
    let s = Scratch::new("flows-no-index");
    for name in ["sessions-loopback.pcap", "nflog.pcap", "dns_tcp.pcap"] {
        let src = real(name);
        let with = flows_json(&[record(&src, &s, &format!("{name}-ix")).to_str().unwrap()]);
        assert!(!with.is_empty(), "{name}");
        for (tag, more) in [
            ("plain", &["--no-index"][..]),
            ("zstd", &["--no-index", "--compress", "zstd"]),
        ] {
            let rec = record_with(&src, &s, &format!("{name}-{tag}"), more);
            assert!(
                !corecap_index::sidecar_path(&rec).exists(),
                "{name} {tag}: no index"
            );
            let without = flows_json(&[rec.to_str().unwrap()]);
            assert_eq!(without, with, "{name} {tag}: the same connections");
            // Read from the sessions file, which is believed, not from the packets.
            let o = corecap(&["flows", rec.to_str().unwrap()]);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!err.contains("had no sessions file"), "{name} {tag}: {err}");
            for f in &without {
                if !matches!(f["network"]["transport"].as_str(), Some("tcp" | "udp")) {
                    continue;
                }
                let id = f["network"]["community_id"].as_str().unwrap();
                let sel = ["--community-id", id];
                let n = query_equals_tshark(&src, &rec, &sel, &display_filter(f), &s);
                assert_eq!(n as u64, u(&f["network"], "packets"), "{name} {tag} {id}");
            }
        }
    }
    // Replaced under its name: its old connections are not given.
    let rec = record_with(
        &real("sessions-loopback.pcap"),
        &s,
        "replaced",
        &["--no-index"],
    );
    replaced_is_not_believed(&rec);
}

#[test]
fn issue35_names_select_connections_and_their_packets() {
    let s = Scratch::new("flows-names");
    let src = real("sessions-loopback.pcap");
    let rec = record(&src, &s, "lo");
    let r = rec.to_str().unwrap();
    let ports = |args: &[&str]| -> Vec<u64> {
        let mut v: Vec<u64> = flows_json(&[&[r], args].concat())
            .iter()
            .map(|f| u(&f["source"], "port"))
            .collect();
        v.sort();
        v
    };
    assert_eq!(ports(&["--sni", "www.example.org"]), [47824]);
    assert_eq!(ports(&["--sni", "WWW.Example.ORG."]), [47824]);
    assert_eq!(ports(&["--sni", "*.EXAMPLE.net"]), [47836]);
    assert_eq!(ports(&["--sni", "example.org"]), Vec::<u64>::new());
    assert_eq!(ports(&["--http-host", "web.example.com"]), [58144]);
    // A Host with a port is matched by its name alone, or whole.
    let sll2 = real("simple_http_sll2.pcap");
    for host in ["localhost", "localhost:8000", "local*"] {
        let got = flows_json(&[sll2.to_str().unwrap(), "--http-host", host]);
        assert!(!got.is_empty(), "{host}");
        let url = &got[0]["url"];
        assert_eq!(
            (url["domain"].as_str(), url["port"].as_u64()),
            (Some("localhost"), Some(8000)),
            "{url}"
        );
    }
    assert!(flows_json(&[sll2.to_str().unwrap(), "--http-host", "localhost:9"]).is_empty());
    assert_eq!(ports(&["--http-host", "*.example.com"]), [58144, 58150]);
    assert_eq!(
        ports(&["--http-host", "*", "--sort", "bytes", "--limit", "1"]),
        [58150]
    );
    assert_eq!(ports(&["--port", "4433"]), [47824, 47836]);
    assert_eq!(ports(&["--host", "127.0.0.1", "port 8080"]), [58144, 58150]);
    assert_eq!(ports(&["tcp[tcpflags] & tcp-rst != 0"]), Vec::<u64>::new());
    let nflog = record(&real("nflog.pcap"), &s, "nflog");
    let n = nflog.to_str().unwrap();
    let names = |args: &[&str]| flows_json(&[&[n], args].concat()).len();
    assert_eq!(names(&["--dns", "example.com"]), 2);
    assert_eq!(names(&["--dns", "www.*"]), 2);
    assert_eq!(names(&["--dns", "*"]), 4);
    if !need("tshark") {
        return;
    }
    let sni = query_equals_tshark(
        &src,
        &rec,
        &["--sni", "www.example.org"],
        "tcp.port==47824",
        &s,
    );
    assert_eq!(sni, 23);
    let http = "tcp.port==58144 || tcp.port==58150";
    query_equals_tshark(&src, &rec, &["--http-host", "*.example.com"], http, &s);
    // The user's filter narrows the connections' packets further.
    let syn = "tcp.port==47824 && tcp.flags.syn==1";
    query_equals_tshark(
        &src,
        &rec,
        &["--sni", "www.example.org", "tcp[tcpflags] & tcp-syn != 0"],
        syn,
        &s,
    );
    query_equals_tshark(
        &real("nflog.pcap"),
        &nflog,
        &["--dns", "www.example.com"],
        "dns.qry.name==\"www.example.com\"",
        &s,
    );
}

#[test]
fn issue35_missing_sessions_are_noted_and_formats() {
    let s = Scratch::new("flows-notes");
    let rec = record(&real("sessions-loopback.pcap"), &s, "a");
    let dir = rec.parent().unwrap();
    // A second file without sessions (another tool's): its connections are read from its
    // packets, and are the ones its sessions file, once made, gives.
    let other = dir.join("y.pcap");
    std::fs::copy(real("community-id-combined.pcap"), &other).unwrap();
    let o = corecap(&["flows", dir.to_str().unwrap(), "--json"]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("1 files had no sessions file that matches them"),
        "{err}"
    );
    assert!(err.contains("from the sessions of 2 of 2 files"), "{err}");
    assert!(!err.contains("are not listed"), "a whole answer: {err}");
    let scanned = String::from_utf8_lossy(&o.stdout).into_owned();
    let o = corecap(&["index", other.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = corecap(&["flows", dir.to_str().unwrap(), "--json"]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("had no sessions file"), "{err}");
    let from_sidecar = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(from_sidecar.lines().count() > 4, "{from_sidecar}");
    assert_eq!(scanned, from_sidecar, "the same connections either way");
    let o = corecap(&["flows", dir.to_str().unwrap()]);
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("127.0.0.1:58144 -> 127.0.0.1:8080"),
        "{table}"
    );
    assert!(table.contains("GET web.example.com/index.html"), "{table}");
    // A stale sessions file (the capture replaced) is not believed: the capture's own
    // packets give its connections.
    replaced_is_not_believed(&rec);
    // CSV: a header and one line per connection.
    let rec = record(&real("sessions-loopback.pcap"), &s, "b");
    let o = corecap(&["flows", rec.to_str().unwrap(), "--csv"]);
    let csv = String::from_utf8_lossy(&o.stdout);
    assert_eq!(csv.lines().count(), 5, "{csv}");
    assert!(csv.starts_with("event.start,"), "{csv}");
    // A malformed Community ID (cut short by a paste) is refused, by flows and by query,
    // before any file is made: it would match nothing and give an empty answer.
    let cut_short = "1:AAAAAAAAAAAAAAAAAAAAAAAAA";
    let out = s.path("malformed.pcapng");
    for args in [
        &["flows", rec.to_str().unwrap(), "--community-id", cut_short][..],
        &[
            "query",
            rec.to_str().unwrap(),
            "--community-id",
            cut_short,
            "-w",
            out.to_str().unwrap(),
        ],
    ] {
        let o = corecap(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("not a Community ID"), "{err}");
        assert!(!out.exists(), "no file for a refused query");
    }
    // A Community ID of no connection: an empty answer, not an error.
    let out = s.path("none.pcapng");
    let id = "1:AAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let o = corecap(&[
        "query",
        rec.to_str().unwrap(),
        "--community-id",
        id,
        "-w",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(packets(&out).is_empty());
    // tcpdump reads an empty answer as empty (it refuses a pcapng without an interface).
    if have("tcpdump") {
        assert_eq!(tcpdump_packets(&out, ""), 0);
    }
}

/// Replaces the recording `rec` of `sessions-loopback.pcap` under its name with another
/// capture: its sessions file is stale and not believed, and the capture's own packets
/// give its connections, never the old file's.
fn replaced_is_not_believed(rec: &Path) {
    std::fs::copy(real("community-id-combined.pcap"), rec).unwrap();
    let o = corecap(&["flows", rec.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("1 files had no sessions file that matches"),
        "{err}"
    );
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("web.example.com"),
        "not the old file's connections"
    );
}

/// The whole capture files of a recording folder, in name order (not the hidden part
/// being written, nor the files beside them).
fn whole_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .filter(|p| !corecap_store::names::is_beside(p))
        .collect();
    files.sort();
    files
}

/// The files merged into one in time order (`mergecap`), for tshark to see them whole.
fn merged(files: &[PathBuf], s: &Scratch) -> PathBuf {
    let out = s.path("merged.pcapng");
    let o = Command::new("mergecap")
        .arg("-w")
        .arg(&out)
        .args(files)
        .output()
        .expect("mergecap");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

#[test]
#[ignore = "needs root"]
fn issue35_connections_joined_across_rotated_files_equal_tshark() {
    if !need("tshark") || !need("mergecap") {
        return;
    }
    let lab = Lab::new(1);
    let s = Scratch::new("flows-rot");
    let dir = s.path("rec");
    std::fs::create_dir(&dir).unwrap();
    let cap = lab.capture_to(
        &dir.join("r.pcapng"),
        &["--workers", "1", "-b", "filesize:1000"],
    );
    let sent = lab.gen(
        12_000,
        &[
            "--flows", "16", "--bidir", "--size", "512", "--rate", "40000",
        ],
    );
    let v = cap.stop();
    assert_eq!(u(&v, "packets"), sent, "{v}");
    let files = whole_files(&dir);
    assert!(files.len() >= 4, "rotated: {files:?}");
    let flows = flows_json(&[dir.to_str().unwrap()]);
    assert!(
        flows.iter().all(|f| u(&f["corecap"], "segments") >= 4),
        "every connection spans the files: {flows:?}"
    );
    let all = merged(&files, &s);
    let theirs = tshark_convs(&all);
    assert_eq!(theirs.len(), 16, "{theirs:?}");
    assert_eq!(corecap_convs(&flows), theirs, "joined flows against tshark");
    // One connection's packets, over every file, by its Community ID.
    let f = &flows[3];
    let id = f["network"]["community_id"].as_str().unwrap();
    let n = query_equals_tshark(&all, &dir, &["--community-id", id], &display_filter(f), &s);
    assert_eq!(n as u64, u(&f["network"], "packets"));
    // A window over the middle files only lists the connections' parts in it.
    let mid = packets(&files[1]);
    let (t1, t2) = (mid[0].0, mid[mid.len() - 1].0);
    let o = corecap(&[
        "flows",
        dir.to_str().unwrap(),
        "--from",
        &secs(t1),
        "--to",
        &secs(t2),
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let windowed: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(windowed.len(), 16);
    // The file before the window is read to join the connections that continue from it.
    assert!(
        windowed.iter().all(|f| u(&f["corecap"], "segments") == 2),
        "{windowed:?}"
    );
}

#[test]
#[ignore = "needs root"]
fn issue35_daemon_lists_flows_and_queries_by_community_id() {
    let lab = Lab::new(1);
    let s = Scratch::new("flows-serve");
    let rec = s.path("rec");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let listen = format!("127.0.0.1:{port}");
    let token = s.path("token");
    let extra = ["--listen", &listen, "--token-file", token.to_str().unwrap()];
    let args = recording_daemon_args(&rec, &extra);
    let d = Daemon::start(
        &lab,
        &s,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    lab.gen(
        6_000,
        &[
            "--flows", "8", "--bidir", "--size", "512", "--rate", "20000",
        ],
    );
    // The files the recorder closed have their sessions; the one it writes, its packets.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let o = d.request_ok(&["flows"]);
    let lines: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!lines.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(lines.len() <= 8, "{lines:?}");
    // The same as `corecap flows` over the recording's whole files (and its part, noted).
    let local = flows_json(&[rec.to_str().unwrap()]);
    let ids = |v: &[Value]| {
        let mut ids: Vec<String> = v
            .iter()
            .map(|f| f["network"]["community_id"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(&lines), ids(&local));
    // GET /flows itself: chunked JSON lines, ended by the line of figures.
    if have("curl") {
        let id = lines[0]["network"]["community_id"].as_str().unwrap();
        let url = format!(
            "http://corecap/flows?limit=1&community_id={}",
            id.replace('+', "%2B")
                .replace('/', "%2F")
                .replace('=', "%3D")
        );
        let o = Command::new("curl")
            .args(["-sS", "-i", "--unix-socket"])
            .arg(&d.socket)
            .arg(&url)
            .output()
            .expect("curl");
        let text = String::from_utf8_lossy(&o.stdout).to_lowercase();
        assert!(text.contains("transfer-encoding: chunked"), "{text}");
        let body: Vec<&str> = text.lines().filter(|l| l.starts_with('{')).collect();
        assert_eq!(body.len(), 2, "{text}");
        assert!(body[1].contains("\"type\":\"end\""), "{text}");
        assert!(body[1].contains("\"truncated\":false"), "{text}");
        // A bad parameter (a port, a Community ID cut short, a window from after to) is
        // refused before anything is read.
        for q in [
            "port=x",
            "community_id=1:AAAA",
            "from=1700000002&to=1700000001",
        ] {
            let o = Command::new("curl")
                .args([
                    "-sS",
                    "-o",
                    "/dev/null",
                    "-w",
                    "%{http_code}",
                    "--unix-socket",
                ])
                .arg(&d.socket)
                .arg(format!("http://corecap/flows?{q}"))
                .output()
                .expect("curl");
            assert_eq!(String::from_utf8_lossy(&o.stdout), "400", "{q}");
        }
    }
    // The fan-out: the same daemon under two names, each line naming its sensor.
    let url = format!("http://{listen}");
    // The daemon listens in the lab's namespace: the client asks from there.
    let o = Command::new("ip")
        .args(["netns", "exec", &lab.netns, bin()])
        .args(["request", "--token-file", token.to_str().unwrap()])
        .args([
            "--sensor",
            &format!("a={url}"),
            "--sensor",
            &format!("b={url}"),
            "flows",
        ])
        .output()
        .expect("request flows");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let both: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(both.len(), 2 * lines.len());
    for name in ["a", "b"] {
        let of: Vec<Value> = both
            .iter()
            .filter(|f| f["observer"]["name"] == name)
            .cloned()
            .collect();
        assert_eq!(ids(&of), ids(&lines), "{name}");
    }
    // POST /queries by Community ID: that connection's packets, as a local query gives them.
    let id = lines[0]["network"]["community_id"].as_str().unwrap();
    let (remote, local) = (s.path("remote.pcapng"), s.path("local.pcapng"));
    d.request_ok(&[
        "query",
        "--community-id",
        id,
        "-w",
        remote.to_str().unwrap(),
    ]);
    let o = corecap(&[
        "query",
        rec.to_str().unwrap(),
        "--community-id",
        id,
        "-w",
        local.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = packets(&remote);
    assert_eq!(got.len() as u64, u(&lines[0]["network"], "packets"));
    assert_eq!(got, packets(&local));
}

#[test]
fn issue35_too_many_connections_for_one_query_are_refused() {
    // 200 DNS questions for one name, each from a port of its own: 200 connections.
    let question = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x01a\x07example\x03com\x00\x00\x01\x00\x01";
    let file = pcapng_of((0..200u16).map(|i| {
        let mut frame = udp_frame(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            2000 + i,
            53,
            42 + question.len(),
        );
        frame[42..].copy_from_slice(question);
        (1_700_000_000_000_000_000 + u64::from(i) * 1000, frame)
    }));
    let s = Scratch::new("flows-many");
    let src = s.path("dns.pcapng");
    std::fs::write(&src, file).unwrap();
    let rec = record(&src, &s, "rec");
    let r = rec.to_str().unwrap();
    assert_eq!(flows_json(&[r, "--dns", "A.Example.com"]).len(), 200);
    let out = s.path("q.pcapng");
    let o = corecap(&[
        "query",
        r,
        "--dns",
        "a.example.com",
        "-w",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("match 200 connections, more than the 128"),
        "{err}"
    );
    assert!(!out.exists(), "no answer file is left");
    // Narrowed by the window, they fit.
    let o = corecap(&[
        "query",
        r,
        "--dns",
        "a.example.com",
        "--to",
        "1700000000.000100",
        "-w",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(packets(&out).len(), 100);
}

#[test]
#[ignore = "needs root"]
fn issue35_vlan_connections_listed_and_queried() {
    if !need("tshark") {
        return;
    }
    let lab = Lab::new(1);
    let s = Scratch::new("flows-vlan");
    let dir = s.path("rec");
    std::fs::create_dir(&dir).unwrap();
    let cap = lab.capture_to(&dir.join("v.pcapng"), &["--workers", "1"]);
    let sent = lab.gen(
        2_000,
        &["--flows", "4", "--bidir", "--vlan", "7", "--rate", "20000"],
    );
    let v = cap.stop();
    assert_eq!(u(&v, "packets"), sent, "{v}");
    let files = whole_files(&dir);
    let flows = flows_json(&[dir.to_str().unwrap(), "vlan 7"]);
    assert_eq!(flows.len(), 4, "{flows:?}");
    assert!(
        flows.iter().all(|f| f["network"]["vlan"]["id"] == "7"),
        "{flows:?}"
    );
    assert!(flows_json(&[dir.to_str().unwrap(), "vlan 8"]).is_empty());
    assert_eq!(corecap_convs(&flows), tshark_convs(&files[0]));
    let f = &flows[1];
    let id = f["network"]["community_id"].as_str().unwrap();
    let filter = format!("vlan.id==7 && {}", display_filter(f));
    let n = query_equals_tshark(&files[0], &dir, &["--community-id", id], &filter, &s);
    assert_eq!(n as u64, u(&f["network"], "packets"));
}

#[test]
fn issue35_sealed_recording_needs_its_key() {
    let s = Scratch::new("flows-sealed");
    let key = keygen(&s, "k.key");
    let dir = s.path("rec");
    std::fs::create_dir(&dir).unwrap();
    let out = dir.join("x.pcapng");
    let src = real("sessions-loopback.pcap");
    let o = corecap(&[
        "capture",
        "-r",
        src.to_str().unwrap(),
        "-w",
        out.to_str().unwrap(),
        "--encrypt",
        "aes",
        "--key-file",
        &key,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d = dir.to_str().unwrap();
    // Without the key: nothing listed, and the note says why.
    let o = corecap(&["flows", d]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("sealed sessions file: no key"), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).lines().count() <= 1);
    // With it: the connections, and a name's packets.
    assert_eq!(flows_json(&[d, "--key-file", &key]).len(), 4);
    let q = s.path("q.pcapng");
    let o = corecap(&[
        "query",
        d,
        "--key-file",
        &key,
        "--sni",
        "www.example.org",
        "-w",
        q.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(packets(&q).len(), 23);
}

/// Issue 35: the file a recorder is writing has no sessions file yet; its connections are
/// read from what is on disk of it, so the last minutes are listed too (a query by
/// Community ID finds their packets).
#[test]
#[ignore = "needs root"]
fn issue35_the_file_being_written_lists_its_connections() {
    let lab = Lab::new(1);
    let s = Scratch::new("flows-live");
    let rec = s.path("rec");
    let r = rec.to_str().unwrap();
    let args = [
        "-i",
        "cap0",
        "--record",
        r,
        "-b",
        "filesize:100000",
        "--flush-interval",
        "0.2",
    ];
    let d = Daemon::start(&lab, &s, &args);
    lab.gen(
        2_000,
        &[
            "--flows", "8", "--bidir", "--size", "256", "--rate", "20000",
        ],
    );
    std::thread::sleep(std::time::Duration::from_millis(800));
    let o = corecap(&["flows", r, "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("1 files had no sessions file"), "{err}");
    // Its time is known (its first packet to its last write): no file of unknown time.
    assert!(!err.contains("unknown time"), "{err}");
    let flows: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(flows.len(), 8, "{flows:?}");
    let id = flows[0]["network"]["community_id"].as_str().unwrap();
    let out = s.path("one.pcapng");
    let o = corecap(&[
        "query",
        r,
        "--community-id",
        id,
        "-w",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = u(&flows[0]["source"], "packets") + u(&flows[0]["destination"], "packets");
    assert_eq!(packets(&out).len() as u64, want);
    drop(d);
}

/// The daemon's recording says, while it runs, how many packets it wrote of connections
/// its full session tables kept no record of (`corecap_recording_sessions_dropped_total`):
/// with room for 10 connections a file, 40 two-way flows leave most packets without a
/// record, and the records its files hold and that count together make every packet sent.
#[test]
#[ignore = "needs root"]
fn issue35_serve_counts_what_its_session_tables_could_not_keep_in_its_metrics() {
    let lab = Lab::new(1);
    let s = Scratch::new("sessions-dropped-serve");
    let rec = s.path("rec");
    let args = recording_daemon_args(&rec, &["--sessions-per-file", "10"]);
    let d = Daemon::start(
        &lab,
        &s,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let sent = lab.gen(
        4_000,
        &[
            "--flows", "40", "--bidir", "--size", "300", "--rate", "20000",
        ],
    );
    let series = |name: &str| format!("{name}{{interface=\"cap0\"}}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let (written, dropped) = loop {
        let o = d.request_ok(&["metrics"]);
        let t = String::from_utf8_lossy(&o.stdout).into_owned();
        let get = |name: &str| crate::cutoff::sample(&t, &series(name));
        let written = get("corecap_recording_packets_total").unwrap_or(0);
        if written >= sent {
            let dropped = get("corecap_recording_sessions_dropped_total")
                .unwrap_or_else(|| panic!("no sessions_dropped in:\n{t}"));
            break (written, dropped);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the recording never took the {sent} packets sent:\n{t}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let (ok, _) = d.stop();
    assert!(ok, "the daemon ends cleanly");
    // Each file keeps at most 10 records; together they and the count make every packet
    // the generator sent (the link's own, if any, are written but never counted here).
    let files = whole_files(&rec);
    assert!(!files.is_empty());
    let mut kept = 0;
    for f in &files {
        let records = flows_json(&[f.to_str().unwrap()]);
        assert!(records.len() <= 10, "{f:?}: {}", records.len());
        kept += records
            .iter()
            .map(|r| u(&r["source"], "packets") + u(&r["destination"], "packets"))
            .sum::<u64>();
    }
    assert!(dropped > sent / 2, "{dropped} of {sent}");
    assert!(kept + dropped >= sent, "{kept} + {dropped} < {sent}");
    assert!(kept + dropped <= written, "{kept} + {dropped} > {written}");
    if written == sent {
        assert_eq!(kept + dropped, sent);
    }
}

/// `--sessions-per-file N` sizes each file's table: a replay of 300 connections kept with
/// room for 50 writes every packet, keeps 50 records, each counted as the whole table
/// counts that connection, and says what it left out; the default keeps all 300. Bad
/// sizes, and a size with no sessions kept, are refused before anything is written; by
/// serve too, for its on-demand captures' tables together.
#[test]
fn issue35_sessions_per_file_sizes_the_table() {
    let s = Scratch::new("sessions-per-file");
    let (mix, n) = crate::cutoff::write_mix(&s, 300);
    let whole = s.path("whole.pcapng");
    let (o, v) = replay(&mix, &["-w", whole.to_str().unwrap(), "--workers", "1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(u(&v, "packets"), n, "{v}");
    let all = flows_json(&[whole.to_str().unwrap()]);
    assert_eq!(all.len(), 300);
    let by_id: BTreeMap<String, &Value> = all
        .iter()
        .map(|f| (f["network"]["community_id"].as_str().unwrap().to_owned(), f))
        .collect();
    assert_eq!(by_id.len(), 300, "one record per Community ID");

    let small = s.path("small.pcapng");
    let args = ["-w", small.to_str().unwrap(), "--workers", "1"];
    let (o, v) = replay(&mix, &[&args[..], &["--sessions-per-file", "50"]].concat());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(u(&v, "packets"), n, "every packet is written: {v}");
    if let Some(c) = tshark_count(&small) {
        assert_eq!(c as u64, n, "tshark reads every packet");
    }
    let said = "past the table's 50 (sessions_dropped; --sessions-per-file keeps more)";
    assert!(err.contains(said), "{err}");
    // The JSON summary carries the notes too, for a script that reads only it.
    let notes = v["notes"].as_array().expect("notes in the summary");
    assert!(
        notes.iter().any(|n| n.as_str().unwrap().contains(said)),
        "{v}"
    );
    let kept = flows_json(&[small.to_str().unwrap()]);
    assert_eq!(kept.len(), 50);
    // The sessions file says how many of its file's packets have no record, and a listing
    // or a query by a selector over it says its answer lacks their connections.
    let recorded: u64 = kept.iter().map(|f| u(&f["network"], "packets")).sum();
    let unrecorded = format!("1 files hold {} packets of connections", n - recorded);
    let o = corecap(&["flows", small.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&unrecorded), "{err}");
    let missing = all
        .iter()
        .find(|f| {
            !kept
                .iter()
                .any(|k| k["network"]["community_id"] == f["network"]["community_id"])
        })
        .expect("a connection past the table");
    let id = missing["network"]["community_id"].as_str().unwrap();
    let out = s.path("missing.pcapng");
    let o = corecap(&[
        "query",
        small.to_str().unwrap(),
        "--community-id",
        id,
        "-w",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&unrecorded),
        "the empty answer says why it may be: {err}"
    );
    let o = corecap(&["flows", whole.to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("no record of"));
    for f in &kept {
        let id = f["network"]["community_id"].as_str().unwrap();
        let w = by_id
            .get(id)
            .unwrap_or_else(|| panic!("{id} not in the whole table"));
        for side in ["source", "destination"] {
            for k in ["packets", "bytes"] {
                assert_eq!(f[side][k], w[side][k], "{id} {side} {k}");
            }
        }
    }

    for bad in [
        &["--sessions-per-file", "0"][..],
        &["--sessions-per-file", "10", "--no-sessions"][..],
        &["--sessions-per-file", "many"][..],
        // A table a worker's file, 64 of about 310 MiB: more than a quarter of the memory.
        &[
            "--sessions-per-file",
            "1000000",
            "--workers",
            "64",
            "--per-worker",
        ][..],
    ] {
        let out = s.path("refused.pcapng");
        let o = corecap(
            &[
                &[
                    "capture",
                    "-r",
                    mix.to_str().unwrap(),
                    "-w",
                    out.to_str().unwrap(),
                ][..],
                bad,
            ]
            .concat(),
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{bad:?} was taken");
        assert!(err.contains("--sessions-per-file"), "{bad:?}: {err}");
        assert!(!out.exists(), "{bad:?} wrote a file");
    }
    // serve sizes its on-demand captures' tables the same, one a capture, as many at once
    // as --max-captures lets run: 64 of about 310 MiB are refused before it listens.
    let socket = s.path("api.sock");
    let o = corecap(&[
        "serve",
        "-i",
        "lo",
        "--socket",
        socket.to_str().unwrap(),
        "--spool",
        s.path("spool").to_str().unwrap(),
        "--sessions-per-file",
        "1000000",
        "--max-captures",
        "64",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "serve took 64 tables: {err}");
    assert!(err.contains("--max-captures lets 64 run at once"), "{err}");
    assert!(err.contains("lower --sessions-per-file"), "{err}");
    assert!(!socket.exists());
}

/// A capture file cut short (a copy that stopped, a disk that filled) with no sessions file
/// of its own is read from its packets up to the cut, and the listing says where it ended:
/// the connections after it are not listed, and it was silent about them.
#[test]
fn issue35_flows_of_a_file_cut_short_says_where_it_ended() {
    let s = Scratch::new("flows-cut-short");
    let whole = std::fs::read(real("sessions-loopback.pcap")).unwrap();
    let cut = s.path("cut.pcap");
    std::fs::write(&cut, &whole[..whole.len() - 100]).unwrap();
    let o = corecap(&["flows", cut.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("cut.pcap: read from its packets up to truncated"),
        "{err}"
    );
    let o = corecap(&["flows", real("sessions-loopback.pcap").to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("read from its packets up to"));
}
