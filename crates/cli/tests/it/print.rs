//! Issue 39: without -w, `query` and `capture` print one line per packet as tcpdump does.
//! The lines are checked against tcpdump's own: the same files, read by `corecap query -r`
//! and `tcpdump -n -r` with the same flags (in UTC), must print the same text, line for
//! line, over several link types and packet kinds (cut and malformed ones too). The
//! packets use no port tcpdump decodes an application on, which corecap does not.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::{self, Lab, Scratch};

/// A classic pcap file (microseconds) of `link` holding `packets`, one a millisecond from
/// 2023-11-14 22:13:20 UTC; a packet is its bytes and, if cut, its length on the wire.
fn pcap(path: &Path, link: u32, packets: &[(Vec<u8>, Option<u32>)]) {
    let mut f = Vec::new();
    for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 262_144, link] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    for (i, (p, wire)) in packets.iter().enumerate() {
        let (sec, usec) = (
            1_700_000_000 + i as u32 / 3,
            123_456 + (i as u32 % 800) * 1000,
        );
        for v in [sec, usec, p.len() as u32, wire.unwrap_or(p.len() as u32)] {
            f.extend_from_slice(&v.to_le_bytes());
        }
        f.extend_from_slice(p);
    }
    std::fs::write(path, f).expect("write the pcap");
}

/// The Internet checksum of `b`.
fn csum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

const A: [u8; 4] = [10, 0, 0, 1];
const B: [u8; 4] = [10, 0, 0, 2];
const A6: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const B6: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
const MA: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MB: [u8; 6] = [2, 0, 0, 0, 0, 2];

fn ip4(src: [u8; 4], dst: [u8; 4], proto: u8, flags: u16, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&(20 + payload.len() as u16).to_be_bytes());
    h.extend_from_slice(&[0x12, 0x34]);
    h.extend_from_slice(&flags.to_be_bytes());
    h.extend_from_slice(&[64, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    let c = csum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

fn ip6(src: [u8; 16], dst: [u8; 16], next: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(payload);
    h
}

fn tcp(ports: (u16, u16), seq: u32, ack: u32, flags: u8, opts: &[u8], data: &[u8]) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&ports.0.to_be_bytes());
    t.extend_from_slice(&ports.1.to_be_bytes());
    t.extend_from_slice(&seq.to_be_bytes());
    t.extend_from_slice(&ack.to_be_bytes());
    t.extend_from_slice(&[
        ((20 + opts.len()) as u8 / 4) << 4,
        flags,
        0xfa,
        0xf0,
        0,
        0,
        0,
        0,
    ]);
    t.extend_from_slice(opts);
    t.extend_from_slice(data);
    t
}

fn udp(ports: (u16, u16), data: &[u8]) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&ports.0.to_be_bytes());
    u.extend_from_slice(&ports.1.to_be_bytes());
    u.extend_from_slice(&(8 + data.len() as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(data);
    u
}

/// An ICMP or ICMPv6 message with a right checksum (ICMPv6's is left 0: tcpdump -v says so).
fn icmp(t: u8, code: u8, rest: [u8; 4], data: &[u8]) -> Vec<u8> {
    let mut m = vec![t, code, 0, 0];
    m.extend_from_slice(&rest);
    m.extend_from_slice(data);
    if t < 128 {
        let c = csum(&m);
        m[2..4].copy_from_slice(&c.to_be_bytes());
    }
    m
}

fn eth(t: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = [MB, MA].concat();
    f.extend_from_slice(&t.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn arp(op: u16, target_mac: [u8; 6]) -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4];
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&[MA.as_slice(), &A, &target_mac, &B].concat());
    a
}

/// Network-layer packets of every kind decoded: (Ethernet type, bytes).
fn network_packets() -> Vec<(u16, Vec<u8>)> {
    let syn_opts = [
        2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
    ];
    let p = (40000, 23456);
    let q = (23456, 40000);
    let quoted = ip4(B, A, 17, 0x4000, &udp((5000, 4000), b""));
    vec![
        (
            0x800,
            ip4(A, B, 6, 0x4000, &tcp(p, 1000, 0, 0x02, &syn_opts, b"")),
        ),
        (
            0x800,
            ip4(
                B,
                A,
                6,
                0x4000,
                &tcp(q, 5000, 1001, 0x12, &[1, 1, 4, 2], b""),
            ),
        ),
        (
            0x800,
            ip4(A, B, 6, 0x4000, &tcp(p, 1001, 5001, 0x10, &[], b"")),
        ),
        (
            0x800,
            ip4(A, B, 6, 0x4000, &tcp(p, 1001, 5001, 0x18, &[], b"hello")),
        ),
        (
            0x800,
            ip4(
                B,
                A,
                6,
                0x4000,
                &tcp(
                    q,
                    5001,
                    1006,
                    0x10,
                    &[1, 1, 5, 10, 0, 0, 3, 0xe9, 0, 0, 3, 0xf0],
                    b"",
                ),
            ),
        ),
        (
            0x800,
            ip4(A, B, 6, 0x4000, &tcp(p, 1006, 5001, 0x11, &[], b"")),
        ),
        (0x800, ip4(A, B, 6, 0x4000, &tcp(p, 9, 0, 0x04, &[], b""))),
        (
            0x800,
            ip4(A, B, 17, 0x4000, &udp((4000, 5000), &[0x78; 18])),
        ),
        (0x800, ip4(A, B, 17, 0x2000, &udp((4000, 5000), b"frag"))),
        (0x800, ip4(A, B, 17, 0x0010, &[0x55; 16])),
        (
            0x800,
            ip4(A, B, 1, 0, &icmp(8, 0, [0, 1, 0, 1], &[0x61; 56])),
        ),
        (
            0x800,
            ip4(B, A, 1, 0, &icmp(0, 0, [0, 1, 0, 1], &[0x61; 56])),
        ),
        (0x800, ip4(B, A, 1, 0, &icmp(3, 3, [0; 4], &quoted))),
        (0x800, ip4(B, A, 1, 0, &icmp(11, 0, [0; 4], &quoted))),
        (0x800, ip4(A, B, 253, 0, &[0x71; 20])),
        (0x806, arp(1, [0; 6])),
        (0x806, arp(2, MB)),
        (0x86dd, ip6(A6, B6, 17, &udp((4000, 5000), &[0x79; 10]))),
        (0x86dd, ip6(A6, B6, 6, &tcp(p, 1, 0, 0x02, &syn_opts, b""))),
        (
            0x86dd,
            ip6(A6, B6, 58, &icmp(128, 0, [0, 7, 0, 3], b"pingping")),
        ),
        (
            0x86dd,
            ip6(B6, A6, 58, &icmp(129, 0, [0, 7, 0, 3], b"pingping")),
        ),
        (
            0x86dd,
            ip6(
                A6,
                B6,
                58,
                &icmp(135, 0, [0; 4], &[B6.as_slice(), &[1, 1], &MA].concat()),
            ),
        ),
        (
            0x86dd,
            ip6(
                A6,
                B6,
                44,
                &[
                    [17, 0, 0, 1, 0, 0, 0, 9].as_slice(),
                    &udp((4000, 5000), b"x"),
                ]
                .concat(),
            ),
        ),
    ]
}

/// Ethernet frames: every network packet, one in a VLAN, an unknown type, and frames cut
/// at every layer or malformed.
fn ethernet_frames() -> Vec<(Vec<u8>, Option<u32>)> {
    let mut out: Vec<(Vec<u8>, Option<u32>)> = network_packets()
        .into_iter()
        .map(|(t, p)| (eth(t, &p), None))
        .collect();
    let udp4 = ip4(A, B, 17, 0, &udp((4000, 5000), &[0x7a; 100]));
    out.push((
        eth(0x8100, &[[0x60, 0x64, 8, 0].as_slice(), &udp4].concat()),
        None,
    ));
    out.push((eth(0x88b5, &[1, 2, 3, 4, 5, 6, 7, 8, 9]), None));
    // Cut by the snap length: the wire length says more.
    let whole = eth(0x800, &udp4);
    for keep in [20, 36, 40, 60] {
        out.push((whole[..keep].to_vec(), Some(whole.len() as u32)));
    }
    let syn = eth(
        0x800,
        &ip4(A, B, 6, 0, &tcp((1, 2), 1, 0, 2, &[2, 4, 5, 0xb4], b"")),
    );
    for keep in [3, 13, 15, 30, 40, 50, 56] {
        out.push((syn[..keep].to_vec(), None));
    }
    out.push((eth(0x800, &[0x46, 0, 0, 20]), None));
    out.push((eth(0x800, &[0x60; 30]), None));
    out.push((eth(0x86dd, &[0x45; 44]), None));
    out.push((eth(0x8100, &[0]), None));
    out
}

/// Runs `corecap query -r FILE FLAGS` and `tcpdump -n -r FILE FLAGS`; asserts the same
/// lines and returns how many.
fn same_as_tcpdump(file: &Path, flags: &[&str]) -> usize {
    let run = |mut c: Command| {
        let o = c.env("TZ", "UTC").output().expect("run");
        assert!(
            o.status.success(),
            "{c:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).expect("utf8")
    };
    let mut ours = Command::new(util::bin());
    ours.args(["query", "-r"]).arg(file).args(flags);
    let mut theirs = Command::new("tcpdump");
    theirs.args(["-n", "-r"]).arg(file).args(flags);
    let (ours, theirs) = (run(ours), run(theirs));
    for (i, (a, b)) in ours.lines().zip(theirs.lines()).enumerate() {
        assert_eq!(a, b, "{} {flags:?}, line {}", file.display(), i + 1);
    }
    assert_eq!(ours.lines().count(), theirs.lines().count(), "{flags:?}");
    theirs.lines().count()
}

#[test]
fn issue39_query_prints_the_lines_tcpdump_prints() {
    assert!(
        util::have("tcpdump"),
        "tcpdump is installed (.ci/run installs it)"
    );
    let s = Scratch::new("print");
    let files = [
        ("eth.pcap", 1, ethernet_frames()),
        // Linux cooked v1 and v2, raw IP and BSD loopback carry the same packets.
        ("sll.pcap", 113, cooked(16)),
        ("sll2.pcap", 276, cooked(20)),
        ("raw.pcap", 101, network_only(|_, p| p)),
        (
            "null.pcap",
            0,
            network_only(|t, p| {
                [
                    if t == 0x800 { 2u32 } else { 30 }.to_le_bytes().as_slice(),
                    &p,
                ]
                .concat()
            }),
        ),
    ];
    let flag_sets: &[&[&str]] = &[
        &[],
        &["-e"],
        &["-q"],
        &["-v"],
        &["-x"],
        &["-X"],
        &["-xx"],
        &["-XX"],
        &["-tttt"],
        &["-tt"],
        &["-ttt"],
        &["-e", "-q"],
        &["-e", "-v"],
        &["-vv", "-X"],
    ];
    let mut lines = 0;
    for (name, link, packets) in &files {
        let path = s.path(name);
        pcap(&path, *link, packets);
        for flags in flag_sets {
            lines += same_as_tcpdump(&path, flags);
        }
    }
    assert!(lines > 2000, "{lines} lines compared");
    eprintln!("{lines} lines the same as tcpdump's");
}

/// The network packets framed by a Linux cooked header of `len` bytes (16: v1, 20: v2).
fn cooked(len: usize) -> Vec<(Vec<u8>, Option<u32>)> {
    network_packets()
        .into_iter()
        .enumerate()
        .map(|(i, (t, p))| {
            let mut h = vec![0u8; len];
            if len == 16 {
                h[0..2].copy_from_slice(&((i % 5) as u16).to_be_bytes());
                h[4..6].copy_from_slice(&6u16.to_be_bytes());
                h[6..12].copy_from_slice(&MA);
                h[14..16].copy_from_slice(&t.to_be_bytes());
            } else {
                h[0..2].copy_from_slice(&t.to_be_bytes());
                // Interface 1 is lo where tcpdump runs too; 999999 is none.
                let index: u32 = if i % 2 == 0 { 1 } else { 999_999 };
                h[4..8].copy_from_slice(&index.to_be_bytes());
                h[10] = (i % 5) as u8;
                h[11] = 6;
                h[12..18].copy_from_slice(&MA);
            }
            ([h, p].concat(), None)
        })
        .collect()
}

/// The IP packets (no ARP) framed by `frame`.
fn network_only(frame: impl Fn(u16, Vec<u8>) -> Vec<u8>) -> Vec<(Vec<u8>, Option<u32>)> {
    network_packets()
        .into_iter()
        .filter(|(t, _)| *t != 0x806)
        .map(|(t, p)| (frame(t, p), None))
        .collect()
}

#[test]
fn issue39_query_prints_a_recording_and_stops_at_c() {
    let s = Scratch::new("print-c");
    let f = s.path("r.pcapng");
    std::fs::write(
        &f,
        util::udp_pcapng((0..5).map(|i| util::T0 + i * 1_000_000), 60),
    )
    .expect("write");
    let o = Command::new(util::bin())
        // -q: port 53 would print as DNS, and these payloads are not DNS messages.
        .args(["query", "-tt", "-q", "-c", "3"])
        .arg(&f)
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    for (i, l) in lines.iter().enumerate() {
        let want = format!(
            "1700000000.00{i}000 IP 10.0.0.1.{} > 10.0.0.2.53: UDP, length 18",
            1000 + i
        );
        assert_eq!(*l, want);
    }
    // --count-only is --stats: counts from the index, no line.
    let o = Command::new(util::bin())
        .args(["query", "--count-only"])
        .arg(&f)
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("\"type\":\"stats\""));
}

#[test]
#[ignore = "needs root"]
fn issue39_capture_prints_one_line_per_packet_in_time_order() {
    let lab = Lab::new(2);
    let mut child = lab
        .capture_command()
        .args(["--workers", "2", "-c", "500", "-tt", "--duration", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start capture");
    let err = util::lines_of(child.stderr.take().expect("stderr"));
    let out = util::lines_of(child.stdout.take().expect("stdout"));
    loop {
        let l = err
            .recv_timeout(Duration::from_secs(20))
            .expect("capture ready");
        if l.contains("capturing on") {
            break;
        }
    }
    lab.gen_on_two_queues(2000);
    assert!(child.wait().expect("wait").success());
    let lines: Vec<String> = out.iter().collect();
    assert_eq!(lines.len(), 500, "-c 500 prints 500 lines");
    let mut last = 0.0;
    for l in &lines {
        let (t, rest) = l.split_once(' ').expect("time stamp");
        let t: f64 = t.parse().expect("seconds");
        assert!(t >= last, "time order: {l}");
        last = t;
        assert!(
            rest.starts_with("IP 10.") && rest.ends_with("UDP, length 18"),
            "{l}"
        );
    }
}

/// Issue 39: DNS messages (UDP and TCP, mDNS, EDNS options, DNSSEC records, bad labels,
/// pointer loops) print as tcpdump prints them, at every verbosity.
#[test]
fn issue39_dns_prints_as_tcpdump_prints_it() {
    assert!(
        util::have("tcpdump"),
        "tcpdump is installed (.ci/run installs it)"
    );
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut files: Vec<PathBuf> = std::fs::read_dir(data.join("apps"))
        .expect("tests/data/apps")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("dns"))
        })
        .collect();
    for f in [
        "dns-badcookie.pcap",
        "dns_tcp.pcap",
        "edns-opts.pcap",
        "community-id-combined.pcap",
    ] {
        files.push(data.join("real").join(f));
    }
    files.sort();
    assert!(files.len() >= 13, "{files:?}");
    let flag_sets: &[&[&str]] = &[
        &[],
        &["-v"],
        &["-vv"],
        &["-vvv"],
        &["-q"],
        &["-x"],
        &["-vv", "-X"],
    ];
    let mut lines = 0;
    for f in &files {
        for flags in flag_sets {
            let mut with_filter = flags.to_vec();
            with_filter.extend(["port", "53", "or", "port", "5353"]);
            lines += same_as_tcpdump(f, &with_filter);
        }
    }
    assert!(lines > 600, "{lines} lines compared");
    eprintln!("{lines} lines of DNS the same as tcpdump's");
}

/// Issue 39: the text protocols over TCP (HTTP requests and responses, SMTP, WHOIS) print
/// as tcpdump prints them: their first line, or with -v every line.
#[test]
fn issue39_text_protocols_print_as_tcpdump_prints_them() {
    assert!(
        util::have("tcpdump"),
        "tcpdump is installed (.ci/run installs it)"
    );
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let files = [
        data.join("apps/print-flags.pcap"),
        data.join("apps/whois.pcap"),
        data.join("real/community-id-combined.pcap"),
        data.join("real/sessions-loopback.pcap"),
        data.join("real/ipv4_tcp_http_xml_tso.pcap"),
    ];
    let filter = "tcp port 25 or tcp port 43 or tcp port 21 or tcp port 80 or tcp port 8080 \
                  or tcp port 554 or tcp port 8554";
    let flag_sets: &[&[&str]] = &[&[], &["-v"], &["-vv"], &["-x"], &["-X"], &["-e"]];
    let mut lines = 0;
    for f in &files {
        for flags in flag_sets {
            let mut with_filter = flags.to_vec();
            with_filter.extend(filter.split_whitespace());
            lines += same_as_tcpdump(f, &with_filter);
        }
    }
    assert!(lines > 300, "{lines} lines compared");
    eprintln!("{lines} lines of text protocols the same as tcpdump's");
}
