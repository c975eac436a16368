//! Flow keys and frame hashes on generated frames: no panic on any bytes,
//! and both directions of a flow hash alike.

use corecap_wire::flow::{flow_key, ParseError};
use corecap_wire::hash::{flow_hash, frame_hash, mac_hash};
use proptest::prelude::*;

/// An Ethernet frame from `a` to `b` (MACs, addresses, ports), optionally
/// tagged, IPv4 or IPv6, TCP or UDP.
fn frame(
    v6: bool,
    tagged: bool,
    proto: u8,
    a: ([u8; 6], [u8; 16], u16),
    b: ([u8; 6], [u8; 16], u16),
) -> Vec<u8> {
    let mut f = [b.0, a.0].concat();
    if tagged {
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x2a]);
    }
    if v6 {
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 20, proto, 64]);
        f.extend_from_slice(&a.1);
        f.extend_from_slice(&b.1);
    } else {
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 40, 0, 0, 0, 0, 64, proto, 0, 0]);
        f.extend_from_slice(&a.1[..4]);
        f.extend_from_slice(&b.1[..4]);
    }
    f.extend_from_slice(&a.2.to_be_bytes());
    f.extend_from_slice(&b.2.to_be_bytes());
    f.extend_from_slice(&[0; 16]);
    f
}

fn endpoint() -> impl Strategy<Value = ([u8; 6], [u8; 16], u16)> {
    (any::<[u8; 6]>(), any::<[u8; 16]>(), any::<u16>())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn prop_any_bytes_parse_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..160), vlan in any::<Option<u16>>()) {
        let _ = flow_key(&bytes, vlan);
        let _ = frame_hash(&bytes, vlan);
        // And the same bytes behind an IPv4 and an IPv6 Ethernet header.
        for ethertype in [[0x08, 0x00], [0x86, 0xdd], [0x81, 0x00]] {
            let mut f = vec![0u8; 12];
            f.extend_from_slice(&ethertype);
            f.extend_from_slice(&bytes);
            let _ = flow_key(&f, vlan);
            let _ = frame_hash(&f, vlan);
        }
    }

    #[test]
    fn prop_frame_hash_is_symmetric(v6 in any::<bool>(), tagged in any::<bool>(), udp in any::<bool>(), a in endpoint(), b in endpoint()) {
        let proto = if udp { 17 } else { 6 };
        let there = frame(v6, tagged, proto, a, b);
        let back = frame(v6, tagged, proto, b, a);
        let k = flow_key(&there, None).unwrap();
        prop_assert_eq!(k.reversed(), flow_key(&back, None).unwrap());
        prop_assert_eq!(k.canonical(), flow_key(&back, None).unwrap().canonical());
        prop_assert_eq!(frame_hash(&there, None), frame_hash(&back, None));
        prop_assert_eq!(frame_hash(&there, Some(7)), flow_hash(&k));
        prop_assert_eq!(k.vlan, if tagged { 42 } else { 0 });
        // Non-IP: the MAC pair decides, symmetrically.
        let mut arp_there = there.clone();
        let mut arp_back = back.clone();
        for f in [&mut arp_there, &mut arp_back] {
            let at = if tagged { 16 } else { 12 };
            f[at..at + 2].copy_from_slice(&[0x08, 0x06]);
        }
        prop_assert_eq!(flow_key(&arp_there, None), Err(ParseError::NotIp));
        prop_assert_eq!(frame_hash(&arp_there, None), frame_hash(&arp_back, None));
        prop_assert_eq!(frame_hash(&arp_there, None), mac_hash(&arp_there));
    }
}

proptest::proptest! {
    /// The fast IPv4 path of `frame_hash` gives exactly what the general path gives.
    #[test]
    fn fast_ipv4_hash_matches_the_general_path(
        body in proptest::collection::vec(proptest::num::u8::ANY, 38..80),
        proto in proptest::sample::select(vec![6u8, 17, 1, 132]),
        frag in proptest::sample::select(vec![0u16, 0x2000, 0x0001, 0x4000]),
        total in proptest::sample::select(vec![0u16, 20, 28, 40, 66, 1500]),
        ihl in proptest::sample::select(vec![0x45u8, 0x46, 0x44, 0x55]),
    ) {
        let mut f = body;
        f[12] = 0x08;
        f[13] = 0x00;
        f[14] = ihl;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        f[20..22].copy_from_slice(&frag.to_be_bytes());
        f[23] = proto;
        let general = match corecap_wire::flow::flow_key(&f, None) {
            Ok(k) => corecap_wire::hash::flow_hash(&k),
            Err(_) => corecap_wire::hash::mac_hash(&f),
        };
        proptest::prop_assert_eq!(corecap_wire::hash::frame_hash(&f, None), general);
    }
}
