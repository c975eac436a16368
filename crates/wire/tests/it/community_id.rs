//! Community IDs of a real capture against the reference implementation's: the
//! specification's `pcaps/combined.pcap.gz` (ARP, ICMP and ICMPv6 of both kinds, TCP over
//! IPv4 and IPv6, UDP, SCTP, RSVP), each packet's ID with seed 0 and seed 1 as pycommunityid
//! 1.5's `community-id-pcap` printed them (`crates/cli/tests/data/real/README.md`).

use std::path::PathBuf;

use corecap_wire::{community_id, CaptureReader, Link};

fn real(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../cli/tests/data/real")
        .join(name)
}

#[test]
fn test_community_id_of_every_packet_matches_pycommunityid() {
    let expected = std::fs::read_to_string(real("community-id-combined.txt")).unwrap();
    let mut r = CaptureReader::open(&real("community-id-combined.pcap")).unwrap();
    let mut lines = expected.lines();
    let mut ip = 0;
    while let Some(rec) = r.next_packet().unwrap() {
        let line = lines.next().expect("a line for each packet");
        let (seed0, seed1) = line.split_once(' ').unwrap();
        match Link::of(rec.linktype).transport(rec.data, None) {
            Ok(t) => {
                ip += 1;
                assert_eq!(community_id(&t.key, t.icmp, 0).as_str(), seed0, "{line}");
                assert_eq!(community_id(&t.key, t.icmp, 1).as_str(), seed1, "{line}");
            }
            Err(e) => assert_eq!((seed0, seed1), ("-", "-"), "{e}"),
        }
    }
    assert_eq!(lines.next(), None);
    assert_eq!(ip, 62);
}
