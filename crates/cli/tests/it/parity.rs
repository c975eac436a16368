//! Issue 22: the index never hides a packet that libpcap matches. Captures of several link
//! types (Ethernet with VLAN tags, the same cut to a 30-byte snap length, raw IP, Linux
//! cooked) hold IPv4 and IPv6, TCP and UDP, ARP and fragments; every filter of a list that
//! libpcap reads in its own way (octal and hex numbers, `vlan`, `ip6`, `proto`, byte
//! offsets) gives, through the index, exactly what `tcpdump -r` gives. The same holds, packet
//! for packet, on the real captures of `tests/data/real/` (public test corpora, 22 link
//! types), one file at a time and as a folder whose files a filter does not all apply to.

use std::path::{Path, PathBuf};
use std::process::Command;

use corecap_wire::PcapWriter;
use serde_json::Value;

use crate::util::{corecap, u, Scratch, T0};

/// One synthetic packet: an IP packet and how it is framed.
struct Pkt {
    ip: Vec<u8>,
    ethertype: u16,
    vlan: Option<u16>,
}

fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, frag: u16, l4: &[u8]) -> Vec<u8> {
    let len = (20 + l4.len()) as u16;
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&len.to_be_bytes());
    h.extend_from_slice(&[0, 1]);
    h.extend_from_slice(&frag.to_be_bytes());
    h.extend_from_slice(&[64, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(l4);
    h
}

fn ipv6(src: [u8; 16], dst: [u8; 16], next: u8, l4: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(l4);
    h
}

fn udp(sp: u16, dp: u16, pay: usize) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sp.to_be_bytes());
    u.extend_from_slice(&dp.to_be_bytes());
    u.extend_from_slice(&((8 + pay) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.resize(8 + pay, 0x5a);
    u
}

fn tcp(sp: u16, dp: u16, flags: u8, pay: usize) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&sp.to_be_bytes());
    t.extend_from_slice(&dp.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    t.resize(20 + pay, 0x3c);
    t
}

fn v6(last: u8) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    a[15] = last;
    a
}

/// The traffic: hosts come and go over time (so an index has something to prune), every
/// kind of packet of the list in each phase.
fn traffic() -> Vec<Pkt> {
    let mut out = Vec::new();
    for i in 0..30_000u32 {
        let phase = (i / 5000) as u8;
        let h = [10, 0, phase, 1 + (i % 3) as u8];
        let peer = [10, 0, 0, 2];
        let p4 = |ip| Pkt {
            ip,
            ethertype: 0x0800,
            vlan: None,
        };
        let pkt = match i % 10 {
            0 => p4(ipv4(h, peer, 17, 0, &udp(1024, 8, 40))),
            1 => p4(ipv4(peer, h, 6, 0, &tcp(80, 40000, 0x12, 0))),
            2 => p4(ipv4(h, peer, 17, 0, &udp(5353, 53, 60))),
            3 => Pkt {
                vlan: Some(100 + u16::from(phase % 2)),
                ..p4(ipv4(h, peer, 6, 0, &tcp(40001, 443, 0x18, 100)))
            },
            4 => Pkt {
                ip: ipv6(v6(phase), v6(0xaa), 17, &udp(546, 53, 30)),
                ethertype: 0x86dd,
                vlan: None,
            },
            5 => Pkt {
                ip: ipv6(v6(0xaa), v6(phase), 6, &tcp(22, 50000, 0x02, 0)),
                ethertype: 0x86dd,
                vlan: None,
            },
            // A later fragment of a UDP datagram: no ports in it.
            6 => p4(ipv4(h, peer, 17, 185, &[0x11; 48])),
            7 => p4(ipv4(h, peer, 1, 0, &[8, 0, 0, 0, 0, 1, 0, 1])),
            8 => {
                let mut arp = vec![0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1];
                arp.extend_from_slice(&h);
                arp.extend_from_slice(&[0; 6]);
                arp.extend_from_slice(&peer);
                Pkt {
                    ip: arp,
                    ethertype: 0x0806,
                    vlan: None,
                }
            }
            _ => p4(ipv4(h, peer, 6, 0, &tcp(8080, 0o120, 0x11, 10))),
        };
        out.push(pkt);
    }
    out
}

fn ethernet(p: &Pkt) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    if let Some(v) = p.vlan {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&v.to_be_bytes());
    }
    f.extend_from_slice(&p.ethertype.to_be_bytes());
    f.extend_from_slice(&p.ip);
    f
}

fn sll(p: &Pkt) -> Vec<u8> {
    let mut f = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0];
    f.extend_from_slice(&p.ethertype.to_be_bytes());
    f.extend_from_slice(&p.ip);
    f
}

/// Writes `pkts` framed by `frame` as a pcap of `linktype`, each cut to `snap` bytes.
fn write(path: &Path, linktype: u32, snap: usize, pkts: &[Pkt], frame: fn(&Pkt) -> Vec<u8>) {
    let f = std::fs::File::create(path).expect("create");
    let mut w = PcapWriter::new(std::io::BufWriter::new(f), linktype, snap as u32).expect("pcap");
    for (i, p) in pkts.iter().enumerate() {
        let data = frame(p);
        let cut = data.len().min(snap);
        w.write_packet(
            T0 + i as u64 * 1_000_000,
            &data[..cut],
            data.len() as u32,
            None,
        )
        .expect("write");
    }
    w.flush().expect("flush");
}

/// tcpdump's packet count for `filter` on `file` (None: tcpdump refused the filter there).
fn tcpdump_count(file: &Path, filter: &str) -> Option<u64> {
    let o = Command::new("tcpdump")
        .args(["-nn", "-r"])
        .arg(file)
        .arg(filter)
        .output()
        .expect("run tcpdump");
    o.status
        .success()
        .then(|| o.stdout.iter().filter(|&&b| b == b'\n').count() as u64)
}

fn query(file: &Path, filter: &str, out: &Path) -> (bool, Value, String) {
    let o = corecap(&[
        "query",
        "--force",
        "--json",
        "-w",
        out.to_str().expect("utf8"),
        file.to_str().expect("utf8"),
        filter,
    ]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (o.status.success(), v, err)
}

const FILTERS: &[&str] = &[
    "host 10.0.2.1",
    "src host 10.0.4.3",
    "port 010",
    "tcp port 0120",
    "port 0x35",
    "udp port 53",
    "tcp",
    "udp",
    "icmp",
    "arp",
    "ip6",
    "ip6 and tcp port 22",
    "host 2001:db8::3",
    "ip6 host 2001:db8::aa and udp",
    "proto 17",
    "ip proto 6",
    "vlan 100",
    "vlan 101 and tcp port 443",
    "tcp[13] & 2 != 0",
    "tcp[tcpflags] & tcp-fin != 0",
    "ip[6:2] & 0x1fff != 0",
    "net 10.0.3.0/24",
    "net 10.0.0.0/16 and not port 53",
    "not host 10.0.0.2",
    "greater 100",
    "ether host 02:00:00:00:00:01",
];

#[test]
fn issue22_query_equals_tcpdump_across_link_types_and_filters() {
    let s = Scratch::new("parity");
    let pkts = traffic();
    let files: Vec<(PathBuf, &str)> = vec![
        (s.path("eth.pcap"), "ethernet"),
        (s.path("eth30.pcap"), "ethernet, -s 30"),
        (s.path("raw.pcap"), "raw IP"),
        (s.path("sll.pcap"), "linux cooked"),
    ];
    write(&files[0].0, 1, 65535, &pkts, ethernet);
    write(&files[1].0, 1, 30, &pkts, ethernet);
    let ip_only: Vec<Pkt> = pkts
        .iter()
        .filter(|p| p.ethertype != 0x0806 && p.vlan.is_none())
        .map(|p| Pkt {
            ip: p.ip.clone(),
            ethertype: p.ethertype,
            vlan: None,
        })
        .collect();
    write(&files[2].0, 101, 65535, &ip_only, |p| p.ip.clone());
    write(&files[3].0, 113, 65535, &pkts, sll);
    for (f, _) in &files {
        let o = corecap(&["index", f.to_str().expect("utf8")]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let out = s.path("q.pcapng");
    let mut pruned = 0;
    let mut compared = 0;
    for (f, what) in &files {
        for filter in FILTERS {
            let Some(want) = tcpdump_count(f, filter) else {
                // libpcap has no code for this filter on this link type (`vlan` on raw
                // IP): corecap must refuse it too, never answer nothing.
                let (ok, _, err) = query(f, filter, &out);
                assert!(
                    !ok,
                    "{what}: '{filter}' refused by tcpdump but answered: {err}"
                );
                continue;
            };
            let (ok, v, err) = query(f, filter, &out);
            assert!(ok, "{what}: '{filter}': {err}");
            assert_eq!(
                u(&v, "packets"),
                want,
                "{what}: '{filter}' against tcpdump: {v}"
            );
            compared += 1;
            if u(&v, "bytes_read") < u(&v, "bytes_total") {
                pruned += 1;
            }
        }
    }
    assert!(compared >= 90, "{compared} comparisons");
    // The index still does its job on the filters it can name.
    assert!(
        pruned >= 8,
        "only {pruned} queries read less than the whole file"
    );
}

#[test]
fn issue22_a_filter_that_cannot_apply_to_one_file_is_reported_for_it() {
    let s = Scratch::new("parity-mixed");
    let pkts = traffic();
    let dir = s.path("mixed");
    std::fs::create_dir(&dir).expect("dir");
    let (eth, raw) = (dir.join("eth.pcap"), dir.join("raw.pcap"));
    write(&eth, 1, 65535, &pkts, ethernet);
    let ip_only: Vec<Pkt> = pkts
        .iter()
        .filter(|p| p.ethertype == 0x0800 && p.vlan.is_none())
        .map(|p| Pkt {
            ip: p.ip.clone(),
            ethertype: p.ethertype,
            vlan: None,
        })
        .collect();
    write(&raw, 101, 65535, &ip_only, |p| p.ip.clone());
    // `vlan` has no code on raw IP: the Ethernet file is answered, the raw one named.
    let (ok, v, err) = query(&dir, "vlan 100", &s.path("q.pcapng"));
    assert!(ok, "{err}");
    assert_eq!(
        u(&v, "packets"),
        tcpdump_count(&eth, "vlan 100").expect("eth")
    );
    assert_eq!(u(&v, "files_refused"), 1, "{v}");
    assert!(v["notes"].to_string().contains("raw.pcap"), "{v}");
    // On the raw file alone it is an error, never an empty answer.
    let (ok, _, err) = query(&raw, "vlan 100", &s.path("q.pcapng"));
    assert!(!ok && err.contains("vlan"), "{err}");
}

/// The real captures of `tests/data/real/` (see its README): many link types.
fn real_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/real");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/data/real")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng"))
        .collect();
    v.sort();
    v
}

/// Filters every real file is asked, whatever it holds.
const REAL_FILTERS: &[&str] = &[
    "ip",
    "ip6",
    "tcp",
    "udp",
    "udp port 53",
    "port 0x35",
    "port 065",
    "vlan",
    "tcp[13] & 2 != 0",
    "ip[6:2] & 0x3fff != 0",
    "proto 17",
    "ip proto 47",
    "icmp or icmp6",
    "not ip",
    "arp",
    "greater 200",
];

/// Each command of the real-file comparison ends within this, or the test fails.
const STEP_LIMIT: &str = "30";

/// `tcpdump -r FILE -w OUT FILTER`: its packets, or None when libpcap cannot compile the
/// filter for the file's link type. tcpdump exits non-zero on a file cut short after writing
/// what it read, so a refusal is a failure that wrote nothing.
fn tcpdump_packets(file: &Path, filter: &str, out: &Path) -> Option<Vec<(u64, Vec<u8>)>> {
    let _ = std::fs::remove_file(out);
    let o = Command::new("timeout")
        .args([
            STEP_LIMIT,
            "tcpdump",
            "-nn",
            "--time-stamp-precision=nano",
            "-r",
        ])
        .arg(file)
        .arg("-w")
        .arg(out)
        .arg(filter)
        .output()
        .expect("run tcpdump");
    assert_ne!(o.status.code(), Some(124), "tcpdump timed out on {file:?}");
    if !o.status.success() && !out.exists() {
        return None;
    }
    Some(crate::query::sorted(crate::util::packets(out)))
}

/// `corecap query --json -w OUT TARGET FILTER`, bounded: (ok, summary, packets, stderr).
fn query_packets(
    target: &Path,
    filter: &str,
    out: &Path,
) -> (bool, Value, Vec<(u64, Vec<u8>)>, String) {
    let _ = std::fs::remove_file(out);
    let o = Command::new("timeout")
        .args([
            STEP_LIMIT,
            crate::util::bin(),
            "query",
            "--force",
            "--json",
            "-w",
        ])
        .arg(out)
        .arg(target)
        .arg(filter)
        .output()
        .expect("run corecap query");
    assert_ne!(o.status.code(), Some(124), "query timed out on {target:?}");
    let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    let p = crate::query::sorted(crate::util::packets(out));
    (
        o.status.success(),
        v,
        p,
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Filters naming addresses the file really holds: its first IPv4 and IPv6 endpoints, as
/// the file's own link type frames them.
fn address_filters(file: &Path) -> Vec<String> {
    let mut r = corecap_wire::CaptureReader::open(file).expect("open");
    let (mut v4, mut v6) = (None, None);
    while let Ok(Some(rec)) = r.next_packet() {
        if let Ok(k) = corecap_wire::Link::of(rec.linktype).flow_key(rec.data, None) {
            match k.src_ip() {
                std::net::IpAddr::V4(a) if v4.is_none() => v4 = Some((a, k.dst_ip())),
                std::net::IpAddr::V6(a) if v6.is_none() => v6 = Some(a),
                _ => {}
            }
        }
    }
    let mut f = Vec::new();
    if let Some((a, dst)) = v4 {
        let o = a.octets();
        f.push(format!("host {a}"));
        f.push(format!("src host {a} and not dst host {dst}"));
        f.push(format!("net {}.{}.{}.0/24", o[0], o[1], o[2]));
        f.push(format!("net {}.0.0.0/8 and (tcp or udp)", o[0]));
    }
    if let Some(a) = v6 {
        f.push(format!("host {a}"));
        f.push(format!("ip6 src host {a} or udp"));
    }
    f
}

#[test]
fn issue22_query_equals_tcpdump_on_real_captures_of_many_link_types() {
    if !crate::util::need("tcpdump") {
        return;
    }
    let started = std::time::Instant::now();
    let s = Scratch::new("parity-real");
    let files = real_files();
    let mut links = std::collections::BTreeSet::new();
    let (mut compared, mut matched, mut refused) = (0, 0u64, 0);
    let (tref, tq) = (s.path("ref.pcap"), s.path("q.pcapng"));
    for src in &files {
        let name = src.file_name().expect("name");
        let f = s.0.join(name);
        std::fs::copy(src, &f).expect("copy");
        let r = corecap_wire::CaptureReader::open(&f).expect("open");
        links.insert(r.interfaces().first().map_or(0, |i| i.linktype));
        let o = corecap(&["index", f.to_str().expect("utf8")]);
        assert!(
            o.status.success(),
            "index {name:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let mut filters: Vec<String> = REAL_FILTERS.iter().map(|f| f.to_string()).collect();
        filters.extend(address_filters(&f));
        for filter in &filters {
            let want = tcpdump_packets(&f, filter, &tref);
            let (ok, v, got, err) = query_packets(&f, filter, &tq);
            let Some(want) = want else {
                // libpcap has no code for it on this link type: an error, never an answer.
                assert!(
                    !ok,
                    "{name:?}: '{filter}' refused by tcpdump but answered: {v}"
                );
                refused += 1;
                continue;
            };
            assert!(ok, "{name:?}: '{filter}': {err}");
            let missed = want.iter().filter(|p| !got.contains(p)).count();
            let extra = got.iter().filter(|p| !want.contains(p)).count();
            assert!(
                missed == 0 && extra == 0 && got.len() == want.len(),
                "{name:?}: '{filter}': query missed {missed} and added {extra} of tcpdump's {} \
                 packets: {v}",
                want.len()
            );
            compared += 1;
            matched += want.len() as u64;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(600),
            "the comparison took over 10 minutes"
        );
    }
    assert!(files.len() >= 40, "{} files", files.len());
    assert!(links.len() >= 10, "link types {links:?}");
    for lt in [0u16, 1, 101, 113, 228, 229, 239, 276] {
        assert!(links.contains(&lt), "no file of link type {lt}: {links:?}");
    }
    assert!(
        compared >= 600 && matched >= 2000,
        "{compared} comparisons, {matched} packets"
    );
    assert!(refused > 0, "no filter was refused anywhere");
}

#[test]
fn issue22_a_folder_of_real_captures_answers_the_files_a_filter_applies_to() {
    if !crate::util::need("tcpdump") {
        return;
    }
    let s = Scratch::new("parity-real-mixed");
    let dir = s.path("mixed");
    std::fs::create_dir(&dir).expect("dir");
    // Ethernet with VLAN tags, raw IPv4, BSD NULL, Linux cooked v2 and NFLOG in one folder.
    let names = [
        "various_gre.pcap",
        "mptcp-tcprst.pcap",
        "quic_vn.pcap",
        "simple_http_sll2.pcap",
        "nflog.pcap",
    ];
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/real");
    for n in names {
        let f = dir.join(n);
        std::fs::copy(real.join(n), &f).expect("copy");
        let o = corecap(&["index", f.to_str().expect("utf8")]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    for filter in [
        "vlan",
        "vlan and ip proto 47",
        "ip6 or vlan",
        "udp",
        "host 127.0.0.1",
    ] {
        let (mut want, mut refusing) = (Vec::new(), Vec::new());
        for n in names {
            match tcpdump_packets(&dir.join(n), filter, &s.path("ref.pcap")) {
                Some(p) => want.extend(p),
                None => refusing.push(n),
            }
        }
        let want = crate::query::sorted(want);
        let (ok, v, got, err) = query_packets(&dir, filter, &s.path("q.pcapng"));
        assert!(ok, "'{filter}': {err}");
        assert_eq!(got, want, "'{filter}': {v}");
        assert_eq!(
            u(&v, "files_refused"),
            refusing.len() as u64,
            "'{filter}': {v}"
        );
        for n in &refusing {
            assert!(
                v["notes"].to_string().contains(n),
                "'{filter}': {n} not named: {v}"
            );
        }
        if filter == "vlan" {
            assert!(
                !refusing.is_empty() && refusing.len() < names.len(),
                "{refusing:?}"
            );
        }
    }
}

/// `capture -r FILE FILTER` compiles the filter as tcpdump does for that file too: `ip6` on a
/// macOS loopback (BSD NULL, AF_INET6 30) capture matched nothing when compiled on a dead
/// handle.
#[test]
fn issue22_capture_from_a_real_file_filters_like_tcpdump() {
    if !crate::util::need("tcpdump") {
        return;
    }
    let s = Scratch::new("parity-replay");
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/real");
    for (name, filter) in [
        ("quic_vn.pcap", "ip6"),
        ("quic_vn.pcap", "udp port 443"),
        ("icmpv6-RFC2894-RR.pcap", "icmp6"),
        ("dns-badcookie.pcap", "udp port 0x35"),
        ("simple_http_sll2.pcap", "tcp[13] & 2 != 0"),
        ("babel_rtt.pcap", "ip6 and udp"),
    ] {
        let want = tcpdump_packets(&real.join(name), filter, &s.path("ref.pcap")).expect(filter);
        assert!(!want.is_empty(), "{name}: '{filter}' matches something");
        let out = s.path("out.pcapng");
        let _ = std::fs::remove_file(&out);
        let (o, v) = crate::util::replay(
            &real.join(name),
            &["-w", out.to_str().expect("utf8"), filter],
        );
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let got = crate::query::sorted(crate::util::packets(&out));
        assert_eq!(got, want, "{name}: '{filter}': {v}");
    }
}

/// `tcpdump -r FILE -nn -tt -xx`: what it says of the file (link type and snap length, after
/// the file's name) and every packet it prints, bytes and all.
fn tcpdump_dump(file: &Path) -> (String, String) {
    let o = Command::new("tcpdump")
        .args(["-nn", "-tt", "-xx", "-r"])
        .arg(file)
        .output()
        .expect("run tcpdump");
    assert!(
        o.status.success(),
        "tcpdump -r {file:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    let head = err
        .lines()
        .find_map(|l| l.split_once(", link-type ").map(|(_, t)| t.to_owned()))
        .unwrap_or_else(|| panic!("tcpdump -r {file:?} names no link type: {err}"));
    (head, String::from_utf8_lossy(&o.stdout).into_owned())
}

/// `tshark -r FILE`: each packet's interface, link type (Wireshark's encapsulation), time
/// and lengths, one line a packet.
fn tshark_frames(file: &Path) -> Vec<String> {
    let o = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(file)
        .args(["-T", "fields", "-e", "frame.interface_id", "-e"])
        .args([
            "frame.encap_type",
            "-e",
            "frame.time_epoch",
            "-e",
            "frame.len",
        ])
        .args(["-e", "frame.cap_len"])
        .output()
        .expect("run tshark");
    assert!(
        o.status.success(),
        "tshark -r {file:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `capture -r FILE... -w OUT`, which must succeed.
fn record(files: &[&Path], out: &Path) {
    let _ = std::fs::remove_file(out);
    let mut c = Command::new(crate::util::bin());
    c.args(["capture", "--json", "--stats-interval", "0"]);
    for f in files {
        c.arg("-r").arg(f);
    }
    let o = c.arg("-w").arg(out).output().expect("run corecap capture");
    assert!(
        o.status.success(),
        "capture -r {files:?} -w: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `capture -r FILE... --count-only FILTER`: the packets that passed.
fn count_only(files: &[&Path], filter: &str) -> u64 {
    let mut c = Command::new(crate::util::bin());
    c.args(["capture", "--count-only", "--json", "--stats-interval", "0"]);
    for f in files {
        c.arg("-r").arg(f);
    }
    let o = c.arg(filter).output().expect("run corecap capture");
    let out = String::from_utf8_lossy(&o.stdout);
    let v: Value = out
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| {
            panic!(
                "capture -r {files:?} '{filter}': {out} / {}",
                String::from_utf8_lossy(&o.stderr)
            )
        });
    u(&v, "packets")
}

/// A pcapng written by `capture -r` describes each interface of its input with the input's
/// link type, keeps each packet on its interface, and filters each packet as tcpdump does for
/// its interface's link type. Every pcapng came out as Ethernet (Linux cooked, BSD NULL and
/// raw IP frames relabelled), its filters compiled for Ethernet, because the link type was
/// taken before the reader had seen the file's first Interface Description Block.
#[test]
fn capture_r_of_a_pcapng_keeps_each_interfaces_link_type() {
    if !crate::util::need("tcpdump") {
        return;
    }
    let s = Scratch::new("parity-linktype");
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/real");
    // A filter that matches some of each file's packets, as tcpdump counts them.
    let mut files: Vec<(PathBuf, &str)> = vec![
        (real.join("OSPFv2_Capture_FINAL.pcapng"), "ip proto 89"),
        (real.join("bgp-role.pcapng"), "tcp port 179"),
        (real.join("ospf2-seg-fault-1.pcapng"), "ip"),
    ];
    let listed: Vec<&PathBuf> = files.iter().map(|(p, _)| p).collect();
    for p in real_files() {
        if p.extension().is_some_and(|x| x == "pcapng") {
            assert!(listed.contains(&&p), "{p:?}: give it a filter here");
        }
    }
    let editcap = crate::util::have("editcap");
    if editcap {
        // Linux cooked v2, as a pcapng.
        let any = s.path("sll2.pcapng");
        let o = Command::new("editcap")
            .args(["-F", "pcapng"])
            .arg(real.join("simple_http_sll2.pcap"))
            .arg(&any)
            .output()
            .expect("run editcap");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        files.push((any, "tcp port 8000"));
    } else {
        eprintln!("skipped: the Linux cooked v2 pcapng, as editcap is not installed");
    }
    let out = s.path("out.pcapng");
    for (file, filter) in &files {
        record(&[file], &out);
        let (want_head, want) = tcpdump_dump(file);
        let (got_head, got) = tcpdump_dump(&out);
        assert_eq!(got_head, want_head, "{file:?}: link type and snap length");
        assert_eq!(got, want, "{file:?}: packets");
        let want = crate::util::tcpdump_packets(file, filter);
        assert!(want > 0, "{file:?}: '{filter}' matches something");
        assert_eq!(count_only(&[file], filter), want, "{file:?}: '{filter}'");
    }
    if !crate::util::need("tshark") || !editcap || !crate::util::need("mergecap") {
        return;
    }
    // Interfaces of two link types: in one file, and in two files read in turn.
    let sll = real.join("bgp-role.pcapng");
    let eth = real.join("OSPFv2_Capture_FINAL.pcapng");
    let both = s.path("both.pcapng");
    let o = Command::new("mergecap")
        .args(["-a", "-F", "pcapng", "-w"])
        .arg(&both)
        .arg(&sll)
        .arg(&eth)
        .output()
        .expect("run mergecap");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = tshark_frames(&both);
    assert!(want.iter().any(|l| l.starts_with("0\t25\t")), "{want:?}");
    assert!(want.iter().any(|l| l.starts_with("1\t1\t")), "{want:?}");
    record(&[&both], &out);
    assert_eq!(tshark_frames(&out), want, "one file of two link types");
    assert_eq!(crate::util::packets(&out), crate::util::packets(&both));
    record(&[&sll, &eth], &out);
    assert_eq!(tshark_frames(&out), want, "two files of two link types");
    assert_eq!(crate::util::packets(&out), crate::util::packets(&both));
    for filter in ["tcp port 179", "ip proto 89", "ip"] {
        let want =
            crate::util::tcpdump_packets(&sll, filter) + crate::util::tcpdump_packets(&eth, filter);
        assert_eq!(count_only(&[&both], filter), want, "one file: '{filter}'");
        assert_eq!(
            count_only(&[&sll, &eth], filter),
            want,
            "two files: '{filter}'"
        );
    }
}
