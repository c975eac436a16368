//! Toeplitz hash known answers and the symmetry of the flow hash.
//!
//! Known answers: Microsoft, "Verifying the RSS Hash Calculation" (Windows
//! driver documentation, network/verifying-the-rss-hash-calculation), the
//! RSS verification suite, with the key 6d5a56da255b0ec2... (the same tables
//! appear in the Intel 82599 datasheet, section 7.1.2.8.3). Each row is
//! (destination, destination port, source, source port, hash over the
//! addresses only, hash over addresses and ports). The input is source
//! address, destination address, source port, destination port.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use corecap_wire::hash::{
    flow_hash_with, rss_input, ToeplitzTable, MICROSOFT_RSS_KEY, RSS_INPUT_MAX, SYMMETRIC_RSS_KEY,
};
use corecap_wire::{flow_hash, toeplitz, FlowKey, IpFamily};
use proptest::prelude::*;

const IPV4: &[(&str, u16, &str, u16, u32, u32)] = &[
    (
        "161.142.100.80",
        1766,
        "66.9.149.187",
        2794,
        0x323e8fc2,
        0x51ccc178,
    ),
    (
        "65.69.140.83",
        4739,
        "199.92.111.2",
        14230,
        0xd718262a,
        0xc626b0ea,
    ),
    (
        "12.22.207.184",
        38024,
        "24.19.198.95",
        12898,
        0xd2d0a5de,
        0x5c2b394a,
    ),
    (
        "209.142.163.6",
        2217,
        "38.27.205.30",
        48228,
        0x82989176,
        0xafc7327f,
    ),
    (
        "202.188.127.2",
        1303,
        "153.39.163.191",
        44251,
        0x5d1809c5,
        0x10e828a2,
    ),
];

const IPV6: &[(&str, u16, &str, u16, u32, u32)] = &[
    (
        "3ffe:2501:200:3::1",
        1766,
        "3ffe:2501:200:1fff::7",
        2794,
        0x2cc18cd5,
        0x40207d3d,
    ),
    (
        "ff02::1",
        4739,
        "3ffe:501:8::260:97ff:fe40:efab",
        14230,
        0x0f0c461c,
        0xdde51bbf,
    ),
    (
        "fe80::200:f8ff:fe21:67cf",
        38024,
        "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
        44251,
        0x4b61e985,
        0x02d1feef,
    ),
];

fn octets(s: &str) -> Vec<u8> {
    match s.parse::<IpAddr>().unwrap() {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

fn key_of(src: &[u8], dst: &[u8], sport: u16, dport: u16) -> FlowKey {
    let mut k = FlowKey {
        vlan: 0,
        proto: 6,
        family: if src.len() == 4 {
            IpFamily::V4
        } else {
            IpFamily::V6
        },
        src: [0; 16],
        dst: [0; 16],
        sport,
        dport,
    };
    k.src[..src.len()].copy_from_slice(src);
    k.dst[..dst.len()].copy_from_slice(dst);
    k
}

#[test]
fn test_microsoft_verification_suite() {
    let table = ToeplitzTable::new(&MICROSOFT_RSS_KEY);
    for &(dst, dport, src, sport, h2, h4) in IPV4.iter().chain(IPV6) {
        let (s, d) = (octets(src), octets(dst));
        let mut input = [s.clone(), d.clone()].concat();
        assert_eq!(toeplitz(&MICROSOFT_RSS_KEY, &input), h2, "{src} -> {dst}");
        assert_eq!(table.hash(&input), h2, "{src} -> {dst}");
        input.extend_from_slice(&sport.to_be_bytes());
        input.extend_from_slice(&dport.to_be_bytes());
        assert_eq!(
            toeplitz(&MICROSOFT_RSS_KEY, &input),
            h4,
            "{src}:{sport} -> {dst}:{dport}"
        );
        assert_eq!(table.hash(&input), h4, "{src}:{sport} -> {dst}:{dport}");
        // The same through a flow key: the RSS input order is src, dst, sport, dport.
        let k = key_of(&s, &d, sport, dport);
        assert_eq!(flow_hash_with(&table, &k), h4);
        let k2 = key_of(&s, &d, 0, 0);
        assert_eq!(flow_hash_with(&table, &k2), h2);
    }
}

#[test]
fn test_rss_input_layout() {
    let k = key_of(&[1, 2, 3, 4], &[5, 6, 7, 8], 0x0102, 0x0304);
    let mut buf = [0u8; RSS_INPUT_MAX];
    assert_eq!(rss_input(&k, &mut buf), 12);
    assert_eq!(&buf[..12], &[1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4]);
    let k = key_of(&[1, 2, 3, 4], &[5, 6, 7, 8], 0, 0);
    assert_eq!(rss_input(&k, &mut buf), 8);
    let v6 = Ipv6Addr::LOCALHOST.octets();
    assert_eq!(rss_input(&key_of(&v6, &v6, 1, 0), &mut buf), 36);
    assert_eq!(rss_input(&key_of(&v6, &v6, 0, 0), &mut buf), 32);
    assert_eq!(k.src_ip(), IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4)));
}

fn arb_key() -> impl Strategy<Value = FlowKey> {
    (
        any::<bool>(),
        any::<[u8; 16]>(),
        any::<[u8; 16]>(),
        any::<u16>(),
        any::<u16>(),
        any::<u8>(),
        0u16..4096,
    )
        .prop_map(|(v4, mut src, mut dst, sport, dport, proto, vlan)| {
            if v4 {
                src[4..].fill(0);
                dst[4..].fill(0);
            }
            FlowKey {
                vlan,
                proto,
                family: if v4 { IpFamily::V4 } else { IpFamily::V6 },
                src,
                dst,
                sport,
                dport,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    #[test]
    fn prop_flow_hash_is_symmetric(k in arb_key()) {
        prop_assert_eq!(flow_hash(&k), flow_hash(&k.reversed()));
        prop_assert_eq!(flow_hash(&k), flow_hash(&k.canonical()));
    }

    #[test]
    fn prop_flow_hash_is_symmetric_toeplitz(k in arb_key()) {
        let mut buf = [0u8; RSS_INPUT_MAX];
        let n = rss_input(&k, &mut buf);
        prop_assert_eq!(flow_hash(&k), toeplitz(&SYMMETRIC_RSS_KEY, &buf[..n]));
    }

    #[test]
    fn prop_table_matches_reference(key in any::<[u8; 40]>(), input in proptest::collection::vec(any::<u8>(), 0..48)) {
        let table = ToeplitzTable::new(&key);
        prop_assert_eq!(table.hash(&input), toeplitz(&key, &input));
    }
}

/// The symmetric hash spreads generated flows over 64 buckets: no bucket is
/// empty and none holds more than twice its share.
#[test]
fn test_symmetric_hash_balance() {
    let mut buckets = [0u32; 64];
    let n = 64 * 1024;
    for i in 0..n {
        let k = key_of(
            &[10, 0, (i >> 8) as u8, i as u8],
            &[192, 168, 1, 1],
            (i as u16).wrapping_mul(7).wrapping_add(1024),
            443,
        );
        buckets[(flow_hash(&k) & 63) as usize] += 1;
    }
    let share = n / 64;
    for (b, &c) in buckets.iter().enumerate() {
        assert!(c > 0 && c < 2 * share, "bucket {b}: {c}");
    }
}
