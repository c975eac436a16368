//! The session table on real captures (`crates/cli/tests/data/real/`, see its README):
//! counts against tshark's conversations, names against tshark's fields, Community IDs
//! against pycommunityid's, and names from split, cut, reordered and fragmented packets.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;

use corecap_wire::{CaptureReader, Link};

use super::{Session, SessionConfig, SessionName, SessionTable};

pub(crate) fn real(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../cli/tests/data/real")
        .join(name)
}

/// Each packet of a capture file: time, wire length, frame, link type.
pub(crate) fn packets(name: &str) -> Vec<(u64, u32, Vec<u8>, Link)> {
    let mut r = CaptureReader::open(&real(name)).unwrap();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        out.push((p.ts_ns, p.orig_len, p.data.to_vec(), Link::of(p.linktype)));
    }
    out
}

fn sessions_of(
    pkts: &[(u64, u32, Vec<u8>, Link)],
    cfg: SessionConfig,
) -> (Vec<Session>, SessionTable) {
    let mut t = SessionTable::new(cfg);
    for (ts, len, frame, link) in pkts {
        t.add(*ts, *len, frame, *link, None);
    }
    (t.finish(), t)
}

fn sessions(name: &str) -> Vec<Session> {
    sessions_of(&packets(name), SessionConfig::default()).0
}

/// Whether `tool` is installed. Under CI (`CI` set), where `.ci/run` installs it, a missing
/// one fails the test; elsewhere the test says which check it leaves out.
fn need(tool: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{tool} is missing: .ci/run installs it"
        );
        eprintln!("skipped: the checks with {tool}, which is not installed");
    }
    found
}

fn tshark(args: &[&str]) -> String {
    let out = Command::new("tshark").args(args).output().unwrap();
    assert!(out.status.success(), "tshark {args:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// An endpoint as tshark's conversation table prints it (`addr:port`).
type Endpoint = (IpAddr, u16);
/// Frames and bytes from A to B, then from B to A.
type Counts = [(u64, u64); 2];

/// tshark's `-z conv,PROTO` table: per pair of endpoints, frames and bytes each way.
fn tshark_conversations(file: &str, proto: &str) -> BTreeMap<(Endpoint, Endpoint), Counts> {
    let text = tshark(&["-r", file, "-q", "-z", &format!("conv,{proto}")]);
    let endpoint = |s: &str| -> Endpoint {
        let (a, p) = s.rsplit_once(':').unwrap();
        (a.parse().unwrap(), p.parse().unwrap())
    };
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| l.contains("<->")) {
        let (a, rest) = line.split_once("<->").unwrap();
        let f: Vec<&str> = rest.split_whitespace().collect();
        assert_eq!((f[3], f[6]), ("bytes", "bytes"), "{line}");
        let n = |i: usize| f[i].parse::<u64>().unwrap();
        let counts = [(n(4), n(5)), (n(1), n(2))];
        let key = (endpoint(a.trim()), endpoint(f[0]));
        assert!(out.insert(key, counts).is_none(), "{line}");
    }
    out
}

#[test]
fn test_counts_match_tshark_conversations() {
    if !need("tshark") {
        return;
    }
    // Link types: Ethernet, Linux cooked v1 and v2, BSD NULL, NFLOG, raw IPv4.
    let files = [
        "dns_tcp.pcap",
        "sessions-loopback.pcap",
        "simple_http_sll2.pcap",
        "tcp-handshake-nano.pcap",
        "quic_vn.pcap",
        "dns-badcookie.pcap",
        "nflog.pcap",
        "babel.pcap",
        "edns-opts.pcap",
        "LINKTYPE_IPV4.pcap",
        "community-id-combined.pcap",
    ];
    let mut compared = 0;
    for name in files {
        let ours = sessions(name);
        for (proto, number) in [("tcp", 6u8), ("udp", 17)] {
            let theirs = tshark_conversations(real(name).to_str().unwrap(), proto);
            let mine: Vec<&Session> = ours.iter().filter(|s| s.key.proto == number).collect();
            assert_eq!(mine.len(), theirs.len(), "{name} {proto}");
            for s in mine {
                let (o, r) = ((s.key.src_ip(), s.key.sport), (s.key.dst_ip(), s.key.dport));
                let (want_o, want_r) = match (theirs.get(&(o, r)), theirs.get(&(r, o))) {
                    (Some(c), _) => (c[0], c[1]),
                    (None, Some(c)) => (c[1], c[0]),
                    (None, None) => panic!("{name}: {s:?} is not one of tshark's"),
                };
                assert_eq!((s.packets[0], s.bytes[0]), want_o, "{name} {s:?}");
                assert_eq!((s.packets[1], s.bytes[1]), want_r, "{name} {s:?}");
                compared += 1;
            }
        }
    }
    assert!(compared >= 25, "{compared}");
}

/// The mark of a value kept cut (its first bytes, or its first ALPN protocols).
const CUT: &str = "...";

/// Whether our names are tshark's, a value kept cut being the beginning of tshark's.
fn same_names(ours: &BTreeSet<String>, theirs: &BTreeSet<String>) -> bool {
    ours.len() == theirs.len()
        && theirs.iter().all(|t| {
            ours.contains(t)
                || ours
                    .iter()
                    .any(|o| o.strip_suffix(CUT).is_some_and(|p| t.starts_with(p)))
        })
}

/// Our names as tshark's fields print them (`sni=`, `alpn=`, `dns=`, `host=`, `uri=`).
fn names_as_text(sessions: &[Session]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for s in sessions {
        match &s.name {
            SessionName::None => {}
            SessionName::Dns(q) => {
                let n = q.name.escaped().to_string();
                out.insert(format!("dns={}", if n.is_empty() { "<Root>" } else { &n }));
            }
            SessionName::Tls(h) => {
                out.insert(format!("sni={}", h.sni.escaped()));
                let cut = if h.alpn_cut { CUT } else { "" };
                out.insert(format!("alpn={}{cut}", h.alpn.escaped()));
            }
            SessionName::Http(r) => {
                out.insert(format!("host={}", r.host.escaped()));
                let cut = if r.path_cut { CUT } else { "" };
                out.insert(format!("uri={}{cut}", r.path.escaped()));
            }
        }
    }
    out
}

fn tshark_names(file: &str) -> BTreeSet<String> {
    let fields = [
        ("sni", "tls.handshake.extensions_server_name"),
        ("alpn", "tls.handshake.extensions_alpn_str"),
        ("dns", "dns.qry.name"),
        ("host", "http.host"),
        ("uri", "http.request.uri"),
    ];
    let mut args = vec!["-r", file, "-T", "fields", "-E", "separator=|"];
    for (_, f) in fields {
        args.extend(["-e", f]);
    }
    let mut out = BTreeSet::new();
    for line in tshark(&args).lines() {
        for ((tag, _), v) in fields.iter().zip(line.split('|')) {
            if !v.is_empty() {
                out.insert(format!("{tag}={v}"));
            }
        }
    }
    out
}

#[test]
fn test_names_match_tshark() {
    let expected: &[(&str, &[&str])] = &[
        ("dns_tcp.pcap", &["dns=www.tcpdump.org"]),
        ("LINKTYPE_IPV4.pcap", &["dns=example.com"]),
        ("nflog.pcap", &["dns=example.com", "dns=www.example.com"]),
        ("dns-badcookie.pcap", &["dns=<Root>"]),
        ("edns-opts.pcap", &["dns=example.com"]),
        ("simple_http_sll2.pcap", &["host=localhost:8000", "uri=/", "uri=/favicon.ico"]),
        (
            "ipv4_tcp_http_xml_tso.pcap",
            &[
                "host=gwm-ml-a2.wsodqa.com",
                "uri=http://gwm-ml-a2.wsodqa.com//research/module-loader/module-loader.asp?user_id=test",
            ],
        ),
    ];
    let tshark_here = need("tshark");
    for (name, want) in expected {
        let ours = names_as_text(&sessions(name));
        let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        assert_eq!(ours, want, "{name}");
        if tshark_here {
            assert_eq!(ours, tshark_names(real(name).to_str().unwrap()), "{name}");
        }
    }
    // The loopback capture: two hellos (one split over two segments) and two requests (one
    // with its Host in a second segment).
    let ours = names_as_text(&sessions("sessions-loopback.pcap"));
    assert!(ours.contains(&format!("sni={}", long_sni())));
    assert!(ours.contains("host=split.example.com"));
    assert_eq!(ours.len(), 8, "{ours:?}");
    if tshark_here {
        let theirs = tshark_names(real("sessions-loopback.pcap").to_str().unwrap());
        assert!(same_names(&ours, &theirs), "{ours:?}\n{theirs:?}");
    }
}

/// The server name of the split ClientHello in `sessions-loopback.pcap`.
fn long_sni() -> String {
    format!(
        "{}.{}.{}.example.net",
        "a".repeat(60),
        "b".repeat(60),
        "c".repeat(60)
    )
}

/// The names of the loopback capture's sessions, by their responder port and originator
/// port.
fn loopback_names(pkts: &[(u64, u32, Vec<u8>, Link)]) -> BTreeMap<(u16, u16), SessionName> {
    let (ss, _) = sessions_of(pkts, SessionConfig::default());
    ss.iter()
        .map(|s| ((s.key.dport, s.key.sport), s.name))
        .collect()
}

#[test]
fn test_truncated_snaplen_gives_the_right_name_or_none() {
    let pkts = packets("sessions-loopback.pcap");
    let full = loopback_names(&pkts);
    assert_eq!(full.len(), 4);
    assert!(full.values().all(|n| *n != SessionName::None));
    for snap in [40, 54, 60, 80, 100, 150, 200, 300, 350, 400] {
        let cut: Vec<_> = pkts
            .iter()
            .map(|(ts, len, f, l)| (*ts, *len, f[..f.len().min(snap)].to_vec(), *l))
            .collect();
        for (k, n) in loopback_names(&cut) {
            assert!(
                n == SessionName::None || Some(&n) == full.get(&k),
                "snap {snap}: {n:?}"
            );
        }
    }
}

#[test]
fn test_split_hello_reordered_dropped_or_changed_gives_no_name() {
    let pkts = packets("sessions-loopback.pcap");
    let full = loopback_names(&pkts);
    // The connection with the split hello: its first two data segments.
    let conns: Vec<_> = full.keys().filter(|k| k.0 == 4433).copied().collect();
    let split = conns
        .iter()
        .find(
            |k| matches!(full[k], SessionName::Tls(h) if h.sni.as_bytes() == long_sni().as_bytes()),
        )
        .copied()
        .unwrap();
    let segs: Vec<usize> = pkts
        .iter()
        .enumerate()
        .filter(|(_, (_, _, f, l))| {
            let t = l.transport(f, None).unwrap();
            (t.key.dport, t.key.sport) == split && !t.payload.is_empty()
        })
        .map(|(i, _)| i)
        .take(2)
        .collect();
    let (a, b) = (segs[0], segs[1]);
    // Reordered: the second segment first.
    let mut p = pkts.clone();
    p.swap(a, b);
    assert_eq!(loopback_names(&p)[&split], SessionName::None);
    // The first segment lost.
    let mut p = pkts.clone();
    p.remove(a);
    assert_eq!(loopback_names(&p)[&split], SessionName::None);
    // The first segment retransmitted with another last byte, before the second: a
    // mismatch.
    let mut p = pkts.clone();
    let mut changed = p[a].clone();
    let last = changed.2.len() - 1;
    changed.2[last] ^= 0xff;
    p.insert(a + 1, changed);
    assert_eq!(loopback_names(&p)[&split], SessionName::None);
    // The same retransmission with the same bytes changes nothing.
    let mut p = pkts.clone();
    p.insert(b + 1, pkts[b].clone());
    assert_eq!(loopback_names(&p)[&split], full[&split]);
}

#[test]
fn test_fragment_gives_no_name() {
    // The DNS query of LINKTYPE_IPV4.pcap, marked a first fragment, then a later one: no
    // name, and no ports in the key (all of a datagram's fragments are one connection).
    let pkts = packets("LINKTYPE_IPV4.pcap");
    for frag in [0x20u8, 0x00] {
        let mut p = pkts[0].clone();
        p.2[6] = frag;
        p.2[7] = if frag == 0 { 0x10 } else { 0 };
        let (ss, _) = sessions_of(&[p], SessionConfig::default());
        assert_eq!(ss.len(), 1);
        assert_eq!(
            (ss[0].key.sport, ss[0].name),
            (0, SessionName::None),
            "{frag:#x}"
        );
    }
}

#[test]
fn test_community_ids_match_pycommunityid() {
    let expected = std::fs::read_to_string(real("community-id-combined.txt")).unwrap();
    let want: BTreeSet<&str> = expected
        .lines()
        .map(|l| l.split_once(' ').unwrap().0)
        .filter(|id| *id != "-")
        .collect();
    let got: BTreeSet<String> = sessions("community-id-combined.pcap")
        .iter()
        .map(|s| s.community_id.to_string())
        .collect();
    let want: BTreeSet<String> = want.into_iter().map(str::to_owned).collect();
    assert_eq!(got, want);
    // Seed 1 too.
    let cfg = SessionConfig {
        seed: 1,
        ..SessionConfig::default()
    };
    let (ss, table) = sessions_of(&packets("community-id-combined.pcap"), cfg);
    let want1: BTreeSet<String> = expected
        .lines()
        .map(|l| l.split_once(' ').unwrap().1.to_owned())
        .filter(|id| id != "-")
        .collect();
    let got1: BTreeSet<String> = ss.iter().map(|s| s.community_id.to_string()).collect();
    assert_eq!(got1, want1);
    assert_eq!(table.stats().not_ip, 6);
}

#[test]
fn test_full_table_counts_and_keeps_the_rest() {
    let pkts = packets("babel.pcap");
    let cfg = SessionConfig {
        capacity: 2,
        ..SessionConfig::default()
    };
    let (ss, table) = sessions_of(&pkts, cfg);
    assert_eq!(ss.len(), 2);
    let kept: u64 = ss.iter().map(|s| s.packets[0] + s.packets[1]).sum();
    let st = table.stats();
    assert_eq!(
        kept + st.sessions_dropped + st.not_ip + st.unparsed,
        st.packets
    );
    assert!(st.sessions_dropped > 0);
    // The table is empty after finish, and takes the next segment's connections.
    let mut t = SessionTable::new(cfg);
    for (ts, len, f, l) in &pkts[..3] {
        t.add(*ts, *len, f, *l, None);
    }
    assert!(!t.is_empty());
    t.finish();
    assert!(t.is_empty());
}

/// A table that goes on from segment to segment gives each segment's connections as a new
/// table would, whether it emptied its index position by position (a large table, a few
/// connections) or whole (a table nearly full): a position left held would find, or hide,
/// a connection of the segment before.
#[test]
fn test_reused_table_is_a_new_one_each_segment() {
    let mut pkts = Vec::new();
    for f in [
        "community-id-combined.pcap",
        "sessions-loopback.pcap",
        "dns_tcp.pcap",
        "babel.pcap",
        "simple_http_sll2.pcap",
    ] {
        pkts.extend(packets(f));
    }
    for capacity in [3, 8, 4096] {
        let cfg = SessionConfig::with_capacity(capacity);
        let mut reused = SessionTable::new(cfg);
        let (mut at, mut len, mut segments, mut dropped) = (0, 1, 0, 0);
        while at < pkts.len() {
            let seg = &pkts[at..(at + len).min(pkts.len())];
            for (ts, n, frame, link) in seg {
                reused.add(*ts, *n, frame, *link, None);
            }
            let (want, fresh) = sessions_of(seg, cfg);
            assert_eq!(reused.finish(), want, "capacity {capacity}, packets {at}..");
            assert!(reused.is_empty());
            dropped += fresh.stats().sessions_dropped;
            (at, len, segments) = (at + len, len * 3 % 97 + 1, segments + 1);
        }
        assert!(segments > 5, "{segments}");
        assert_eq!(
            reused.stats().sessions_dropped,
            dropped,
            "capacity {capacity}"
        );
    }
}

#[test]
fn test_ring_vlan_is_the_key_vlan() {
    // The ring's tag (the kernel stripped it from the frame) keys the connection, its id
    // bits only; the counts are the same.
    let pkts = packets("dns_tcp.pcap");
    let mut t = SessionTable::new(SessionConfig::default());
    for (ts, len, f, l) in &pkts {
        t.add(*ts, *len + 4, f, *l, Some(0x2064));
    }
    let tagged = t.finish();
    let plain = sessions("dns_tcp.pcap");
    assert_eq!((tagged.len(), plain.len()), (1, 1));
    assert_eq!(tagged[0].key.vlan, 100);
    assert_eq!(tagged[0].packets, plain[0].packets);
    assert_eq!(
        tagged[0].bytes[0],
        plain[0].bytes[0] + 4 * plain[0].packets[0]
    );
    assert_eq!(tagged[0].name, plain[0].name);
    // The Community ID leaves the VLAN out.
    assert_eq!(tagged[0].community_id, plain[0].community_id);
}

#[test]
fn test_originator_is_the_syn_sender() {
    // dns_tcp.pcap begins with the SYN of 192.168.1.11; with its first packet missing, the
    // SYN-ACK's receiver is still the originator.
    let pkts = packets("dns_tcp.pcap");
    for skip in [0, 1] {
        let (ss, _) = sessions_of(&pkts[skip..], SessionConfig::default());
        let s = &ss[0];
        assert_eq!(s.key.src_ip().to_string(), "192.168.1.11", "{skip}");
        assert_eq!(s.began_syn(), skip == 0);
        assert!(s.ended_fin_rst());
    }
}

/// The cost of a packet: each capture replayed into a table many times, one segment per
/// replay. Run in release: `cargo test -p corecap-store --release --lib -- --ignored
/// test_rate --nocapture`.
#[test]
#[ignore = "a measurement: run in release"]
fn test_rate_on_real_captures() {
    let files = [
        "sessions-loopback.pcap",
        "dns_tcp.pcap",
        "simple_http_sll2.pcap",
        "quic_vn.pcap",
        "mptcp-v1.pcap",
        "edns-opts.pcap",
        "community-id-combined.pcap",
    ];
    let mut t = SessionTable::new(SessionConfig::default());
    for name in files {
        let pkts = packets(name);
        // Fewer rounds in a debug build (CI runs the ignored tests too).
        let total = if cfg!(debug_assertions) {
            20_000
        } else {
            200_000
        };
        let rounds = total / pkts.len() + 1;
        let (mut update, mut finish, mut sessions) = (0u128, 0u128, 0usize);
        for _ in 0..rounds {
            let start = std::time::Instant::now();
            for (ts, len, f, l) in &pkts {
                t.add(*ts, *len, f, *l, None);
            }
            let mid = std::time::Instant::now();
            sessions += t.finish().len();
            update += (mid - start).as_nanos();
            finish += mid.elapsed().as_nanos();
        }
        let n = (rounds * pkts.len()) as f64;
        println!(
            "{name}: {:.0} ns per packet to update, {:.0} ns per session to finish \
             ({n} packets, {sessions} sessions)",
            update as f64 / n,
            finish as f64 / sessions as f64
        );
    }
}

/// A full table counts the written packets of the connections it has no room for, and
/// not those a cutoff left out: these are counted as cut, and only there.
#[test]
fn test_a_full_table_counts_written_packets_it_could_not_keep_not_cut_ones() {
    let pkts = packets("sessions-loopback.pcap");
    let mut t = SessionTable::new(SessionConfig::with_capacity(1));
    let mut first = None;
    let (mut written_past, mut cut) = (0, 0);
    for (i, (ts, len, frame, link)) in pkts.iter().enumerate() {
        let Ok(tr) = link.transport(frame, None) else {
            continue;
        };
        let key = super::table::table_key(&tr).0;
        let kept = *first.get_or_insert(key) == key;
        if i % 2 == 0 {
            t.add_cut(*ts, *len, *link, &tr);
            cut += u64::from(!kept);
        } else {
            t.add_parsed(*ts, *len, *link, &tr);
            written_past += u64::from(!kept);
        }
    }
    assert!(written_past > 0 && cut > 0, "{written_past} {cut}");
    assert_eq!(t.stats().sessions_dropped, written_past);
    assert_eq!(t.finish().len(), 1);
}

/// Issue 38: packets a cutoff leaves out are counted into their connection as seen, not
/// kept. A real capture fed whole, and fed again with every other packet past each
/// connection's fourth given as cut: the same connections, each with the same originator,
/// Community ID, times and name, and packets and bytes seen equal to the whole feed's.
#[test]
fn test_cut_packets_are_seen_not_kept() {
    let pkts = packets("sessions-loopback.pcap");
    let whole = sessions_of(&pkts, SessionConfig::default()).0;
    let mut t = SessionTable::new(SessionConfig::default());
    let mut per_conn: std::collections::HashMap<corecap_wire::FlowKey, u32> = Default::default();
    let mut cut = 0;
    for (ts, len, frame, link) in &pkts {
        let Ok(tr) = link.transport(frame, None) else {
            t.add(*ts, *len, frame, *link, None);
            continue;
        };
        let n = per_conn.entry(super::table::table_key(&tr).0).or_default();
        *n += 1;
        if *n > 4 && n.is_multiple_of(2) {
            t.add_cut(*ts, *len, *link, &tr);
            cut += 1;
        } else {
            t.add_parsed(*ts, *len, *link, &tr);
        }
    }
    assert!(cut > 10, "{cut}");
    let got = t.finish();
    assert_eq!(got.len(), whole.len());
    let (mut cut_packets, mut kept) = (0, 0);
    for (g, w) in got.iter().zip(&whole) {
        assert_eq!(
            (g.key, g.community_id, g.first_ns, g.last_ns, g.name),
            (w.key, w.community_id, w.first_ns, w.last_ns, w.name)
        );
        assert_eq!(g.packets_seen(), w.packets_seen());
        assert_eq!(g.bytes_seen(), w.bytes_seen());
        assert_eq!((w.cut_packets, w.cut_bytes), (0, 0));
        cut_packets += g.cut_packets;
        kept += g.packets[0] + g.packets[1];
    }
    assert_eq!(cut_packets, cut);
    assert_eq!(
        kept + cut,
        whole.iter().map(Session::packets_seen).sum::<u64>()
    );
}

/// A segment's sessions file made record by record as the table drains
/// ([`SessionTable::finish_encoded`]) is byte for byte the file of its sessions made whole
/// ([`super::format::encode`] of [`SessionTable::finish`]), on captures of several link
/// types and names; the records read back from it are those sessions, in the same order.
#[test]
fn test_encoded_as_drained_is_the_file_of_the_finished_sessions() {
    let id = corecap_index::Identity {
        first: 0x1234,
        last: 0x5678,
    };
    for name in [
        "sessions-loopback.pcap",
        "community-id-combined.pcap",
        "dns_tcp.pcap",
        "simple_http_sll2.pcap",
        "LINKTYPE_IPV6.pcap",
    ] {
        let pkts = packets(name);
        let cfg = SessionConfig {
            seed: 7,
            ..SessionConfig::default()
        };
        let (whole, _) = sessions_of(&pkts, cfg);
        let mut t = SessionTable::new(cfg);
        for (ts, len, frame, link) in &pkts {
            t.add(*ts, *len, frame, *link, None);
        }
        let enc = t.finish_encoded();
        assert!(!whole.is_empty(), "{name}: no sessions");
        assert_eq!(enc.len(), whole.len() as u64, "{name}");
        assert_eq!(
            enc.sessions().unwrap(),
            whole,
            "{name}: the records read back"
        );
        let file = enc.into_file(4096, Some(id));
        assert_eq!(
            file,
            super::format::encode(&whole, 7, 4096, Some(id)),
            "{name}: the file"
        );
        let read = super::format::decode(&file).unwrap();
        assert_eq!((read.seed, read.covered), (7, 4096), "{name}");
        assert_eq!(read.identity, Some(id), "{name}");
        assert_eq!(read.sessions, whole, "{name}");
        assert!(t.is_empty(), "{name}: the table is empty after");
    }
}
