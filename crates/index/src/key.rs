//! What a packet puts into its region's sets: the keys of its addresses, ports and VLAN ids,
//! and its IP protocols.
//!
//! Keys are 64-bit hashes tagged by kind, so an IPv4 address and a port never share a key.
//! The parser finds at least everything libpcap's primitives test (`host`, `net`, `port`,
//! `proto`, `vlan`), so a region whose sets lack a value holds no packet those primitives
//! accept:
//!
//! - VLAN tags (802.1Q, 802.1ad, 0x9100), every one of a stack, are walked and their ids kept;
//! - IPv4 addresses are kept whenever their bytes are captured (libpcap reads them at fixed
//!   offsets, whatever the version or header length say, and a capture cut short by its
//!   snap length keeps the fields before the cut), and ARP/RARP sender and target addresses
//!   too (`host` matches ARP); the protocol likewise, byte by byte;
//! - ports of TCP, UDP and SCTP, at the offset the header length gives, in first fragments;
//! - IPv6: both addresses, and every Next Header value through up to 8 extension headers
//!   (each goes into the protocol set), then the ports as for IPv4.

use corecap_wire::{FlowKey, Fragment, IpFamily, Transport};

/// Key kinds, in the top byte before mixing.
const KIND_V4: u64 = 1 << 56;
const KIND_PORT: u64 = 3 << 56;
const KIND_VLAN: u64 = 4 << 56;
const KIND_V6: u64 = 2 << 56;
const KIND_PROTO: u64 = 5 << 56;

/// A 64-bit mixer (the splitmix64 finalizer): good spread for small integer keys, a few
/// cycles each.
#[inline]
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Key of an IPv4 address.
#[inline]
pub fn v4_key(addr: [u8; 4]) -> u64 {
    mix(KIND_V4 | u64::from(u32::from_be_bytes(addr)))
}

/// Key of an IPv6 address.
#[inline]
pub fn v6_key(addr: &[u8; 16]) -> u64 {
    let mut hi = [0u8; 8];
    let mut lo = [0u8; 8];
    hi.copy_from_slice(&addr[..8]);
    lo.copy_from_slice(&addr[8..]);
    mix(mix(KIND_V6 ^ u64::from_be_bytes(hi)) ^ u64::from_be_bytes(lo))
}

/// Key of a TCP, UDP or SCTP port.
#[inline]
pub fn port_key(port: u16) -> u64 {
    mix(KIND_PORT | u64::from(port))
}

/// Key of an IP protocol (or IPv6 Next Header value), for the postings.
#[inline]
pub fn proto_key(p: u8) -> u64 {
    mix(KIND_PROTO | u64::from(p))
}

/// Key of a VLAN id (12 bits).
#[inline]
pub fn vlan_key(vid: u16) -> u64 {
    mix(KIND_VLAN | u64::from(vid & 0x0fff))
}

/// Link types the parser reads (LINKTYPE_*).
pub(crate) const LINKTYPE_NULL: u16 = 0;
pub(crate) const LINKTYPE_ETHERNET: u16 = 1;
pub(crate) const LINKTYPE_RAW: u16 = 101;
pub(crate) const LINKTYPE_LOOP: u16 = 108;
pub(crate) const LINKTYPE_LINUX_SLL: u16 = 113;
pub(crate) const LINKTYPE_IPV4: u16 = 228;
pub(crate) const LINKTYPE_IPV6: u16 = 229;
pub(crate) const LINKTYPE_LINUX_SLL2: u16 = 276;

/// The network layer a BSD NULL or LOOP header names: its AF_ value read in either byte
/// order (NULL's is the writer's, LOOP's is network order; libpcap tests the one it
/// compiled for, so reading both records at least what the filter can accept): IPv4 for
/// AF_INET (2), IPv6 for the BSD AF_INET6 values (24, 28, 30).
pub(crate) fn loopback_family(af: u32) -> Option<u16> {
    match af.min(af.swap_bytes()) {
        2 => Some(0x0800),
        24 | 28 | 30 => Some(0x86dd),
        _ => None,
    }
}

/// Where a packet's keys go.
pub(crate) trait Sink {
    fn key(&mut self, k: u64);
    fn proto(&mut self, p: u8);
}

/// The keys and IP protocols of one packet, in the order the parser found them.
#[derive(Default)]
pub(crate) struct PacketKeys {
    pub(crate) keys: Vec<u64>,
    pub(crate) protos: Vec<u8>,
}

impl PacketKeys {
    pub(crate) fn clear(&mut self) {
        self.keys.clear();
        self.protos.clear();
    }
}

impl PartialEq for PacketKeys {
    /// A loop the compiler keeps inline, where a slice comparison calls `memcmp`: these
    /// are a few values, compared once a packet.
    #[inline]
    fn eq(&self, o: &Self) -> bool {
        fn same<T: PartialEq>(a: &[T], b: &[T]) -> bool {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
        }
        same(&self.keys, &o.keys) && same(&self.protos, &o.protos)
    }
}

impl Sink for PacketKeys {
    #[inline]
    fn key(&mut self, k: u64) {
        self.keys.push(k);
    }
    #[inline]
    fn proto(&mut self, p: u8) {
        self.protos.push(p);
    }
}

/// For the commonest frame, Ethernet with no VLAN tag carrying IPv4 (with both ports
/// captured when it is a first fragment of TCP, UDP or SCTP), a value that fixes the set of
/// keys and protocols [`frame_keys`] finds in it: the protocol, whether ports follow, and
/// the two (address, port) ends in order, so both directions of a flow have the same one.
/// None for every other frame (it is parsed).
#[inline]
pub(crate) fn flow_tuple(linktype: u16, d: &[u8]) -> Option<u128> {
    if linktype != LINKTYPE_ETHERNET || d.len() < 34 || d[12..14] != [0x08, 0x00] {
        return None;
    }
    let proto = d[23];
    let first = u16::from_be_bytes([d[20], d[21]]) & 0x1fff == 0;
    let ported = first && matches!(proto, 6 | 17 | 132);
    let (sp, dp) = if ported {
        let at = 14 + usize::from(d[14] & 0x0f) * 4;
        let p = d.get(at..at + 4)?;
        (
            u16::from_be_bytes([p[0], p[1]]),
            u16::from_be_bytes([p[2], p[3]]),
        )
    } else {
        (0, 0)
    };
    let src = u64::from(u32::from_be_bytes([d[26], d[27], d[28], d[29]])) << 16 | u64::from(sp);
    let dst = u64::from(u32::from_be_bytes([d[30], d[31], d[32], d[33]])) << 16 | u64::from(dp);
    let (a, b) = (src.min(dst), src.max(dst));
    Some(u128::from(a) << 64 | u128::from(b) << 16 | u128::from(proto) << 1 | u128::from(ported))
}

/// The flow key of a frame whose [`raw_flow`] is `raw` and whose transport layer is `t`,
/// when the two say it is the commonest frame: untagged Ethernet, IPv4 with a 20-byte
/// header, TCP or UDP, not a fragment, both ports captured. Then [`tuple_of_key`] is its
/// [`flow_tuple`] and [`key_keys`] finds what [`frame_keys`] finds: its fields are the bytes
/// those read at the same fixed offsets (the transport layer refuses a datagram whose
/// ports it cannot read, and reads them right after the 20 bytes).
#[inline(always)]
pub(crate) fn plain_key<'t>(raw: [u64; 3], t: &'t Transport<'_>) -> Option<&'t FlowKey> {
    let k = &t.key;
    (raw[0] != 0
        && t.fragment == Fragment::No
        && k.vlan == 0
        && k.family == IpFamily::V4
        && matches!(k.proto, 6 | 17))
    .then_some(k)
}

/// The [`flow_tuple`] of a frame whose [`plain_key`] is `k`.
#[inline(always)]
pub(crate) fn tuple_of_key(k: &FlowKey) -> u128 {
    let [a, b, c, d, ..] = k.src;
    let [e, f, g, h, ..] = k.dst;
    let src = u64::from(u32::from_be_bytes([a, b, c, d])) << 16 | u64::from(k.sport);
    let dst = u64::from(u32::from_be_bytes([e, f, g, h])) << 16 | u64::from(k.dport);
    let (lo, hi) = (src.min(dst), src.max(dst));
    u128::from(lo) << 64 | u128::from(hi) << 16 | u128::from(k.proto) << 1 | 1
}

/// What [`frame_keys`] puts into `s` for a frame whose [`plain_key`] is `k`, in its order.
#[inline(always)]
pub(crate) fn key_keys(k: &FlowKey, s: &mut impl Sink) -> bool {
    let [a, b, c, d, ..] = k.src;
    let [e, f, g, h, ..] = k.dst;
    s.proto(k.proto);
    s.key(v4_key([a, b, c, d]));
    s.key(v4_key([e, f, g, h]));
    s.key(port_key(k.sport));
    s.key(port_key(k.dport));
    true
}

/// The bytes of an Ethernet frame that fix its [`flow_tuple`] when the frame carries IPv4
/// with a 20-byte header and has the 4 bytes after it (where ports go): the EtherType, the
/// version and header length, the fragment field, the protocol, the addresses and those 4
/// bytes, as 3 masked words. Frames with equal words have equal flow tuples, so a packet
/// of the flow before is known by 3 compares, not by working out its tuple. [0; 3] for
/// every other frame (a frame of that shape never gives it: its first word holds 0x08,
/// 0x00, 0x45), and for every other link type.
#[inline]
pub(crate) fn raw_flow(linktype: u16, d: &[u8]) -> [u64; 3] {
    raw_flow_of(raw_words(linktype, d))
}

/// The [`raw_flow`] of a frame whose [`raw_words`] are `w`.
#[inline(always)]
pub(crate) fn raw_flow_of(w: [u64; 3]) -> [u64; 3] {
    // Bytes 12..15: EtherType, and version and header length.
    if w[0] & 0x00ff_ffff != 0x45_00_08 {
        return [0; 3];
    }
    w
}

/// The 3 masked words of [`raw_flow`] for any Ethernet frame of at least 38 bytes, whatever
/// it carries ([0; 3] for a shorter frame or another link type). A frame whose words equal a
/// [`raw_flow`] other than [0; 3] has that raw flow: the words hold the bytes checked.
#[inline(always)]
pub(crate) fn raw_words(linktype: u16, d: &[u8]) -> [u64; 3] {
    let Some(b) = d
        .first_chunk::<38>()
        .filter(|_| linktype == LINKTYPE_ETHERNET)
    else {
        return [0; 3];
    };
    let le64 = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[at..at + 8]);
        u64::from_le_bytes(w)
    };
    // Bytes 12..15: EtherType and version/header length; 16..20 (length, id) vary.
    let head = le64(12) & 0x00ff_ffff;
    // Bytes 20, 21 (fragment), 23 (protocol), 26, 27 (source address); not the TTL (22)
    // or the checksum (24, 25).
    let mid = le64(20) & 0xffff_0000_ff00_ffff;
    // Bytes 28..36: the rest of the addresses, the first port; 36, 37: the second port.
    let ports = u64::from(u16::from_le_bytes([b[36], b[37]]));
    [head | ports << 32, mid, le64(28)]
}

#[inline]
fn be16(d: &[u8], at: usize) -> Option<u16> {
    d.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]))
}

/// Reads one frame of `linktype` into `s`. Returns false when the link type is not one the
/// parser knows (the region then cannot be pruned by its sets).
pub(crate) fn frame_keys(linktype: u16, d: &[u8], s: &mut impl Sink) -> bool {
    match linktype {
        LINKTYPE_ETHERNET => {
            if let Some(et) = be16(d, 12) {
                l3(et, d, 14, s);
            }
            true
        }
        LINKTYPE_LINUX_SLL => {
            if let Some(et) = be16(d, 14) {
                l3(et, d, 16, s);
            }
            true
        }
        LINKTYPE_LINUX_SLL2 => {
            if let Some(et) = be16(d, 0) {
                l3(et, d, 20, s);
            }
            true
        }
        LINKTYPE_NULL | LINKTYPE_LOOP => {
            let af = d
                .get(..4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            match af.and_then(loopback_family) {
                Some(0x0800) => ipv4(d, 4, s),
                Some(_) => ipv6(d, 4, s),
                None => {}
            }
            true
        }
        // NFLOG (239) and every other link type: not parsed, so a region holding them is
        // never pruned by its sets (the query reads it and the filter decides).
        LINKTYPE_RAW | LINKTYPE_IPV4 | LINKTYPE_IPV6 | 12 | 14 => {
            match d.first().map(|b| b >> 4) {
                Some(4) => ipv4(d, 0, s),
                Some(6) => ipv6(d, 0, s),
                _ => {}
            }
            true
        }
        _ => false,
    }
}

/// From an EtherType at `off`, through VLAN tags, to the network layer.
fn l3(mut et: u16, d: &[u8], mut off: usize, s: &mut impl Sink) {
    for _ in 0..4 {
        if !matches!(et, 0x8100 | 0x88a8 | 0x9100) {
            break;
        }
        let (Some(tci), Some(next)) = (be16(d, off), be16(d, off + 2)) else {
            return;
        };
        s.key(vlan_key(tci));
        et = next;
        off += 4;
    }
    match et {
        0x0800 => ipv4(d, off, s),
        0x86dd => ipv6(d, off, s),
        0x0806 | 0x8035 => arp(d, off, s),
        _ => {}
    }
}

fn addr4(d: &[u8], at: usize) -> Option<[u8; 4]> {
    d.get(at..at + 4).map(|b| [b[0], b[1], b[2], b[3]])
}

fn arp(d: &[u8], off: usize, s: &mut impl Sink) {
    // Ethernet/IPv4 ARP: sender protocol address at 14, target at 24. libpcap's `arp host`
    // reads these offsets without checking the hardware and protocol lengths.
    for at in [off + 14, off + 24] {
        if let Some(a) = addr4(d, at) {
            s.key(v4_key(a));
        }
    }
}

/// IPv4: each field whose bytes were captured, as libpcap reads them (a capture cut short by
/// its snap length still has the fields before the cut, and a filter can match on them).
fn ipv4(d: &[u8], off: usize, s: &mut impl Sink) {
    let proto = d.get(off + 9).copied();
    if let Some(p) = proto {
        s.proto(p);
    }
    for at in [off + 12, off + 16] {
        if let Some(a) = addr4(d, at) {
            s.key(v4_key(a));
        }
    }
    let (Some(&vhl), Some(frag)) = (d.get(off), be16(d, off + 6)) else {
        return;
    };
    if frag & 0x1fff == 0 && matches!(proto, Some(6 | 17 | 132)) {
        ports(d, off + usize::from(vhl & 0x0f) * 4, s);
    }
}

fn ports(d: &[u8], at: usize, s: &mut impl Sink) {
    if let (Some(sp), Some(dp)) = (be16(d, at), be16(d, at + 2)) {
        s.key(port_key(sp));
        s.key(port_key(dp));
    } else if let Some(sp) = be16(d, at) {
        s.key(port_key(sp));
    }
}

fn ipv6(d: &[u8], off: usize, s: &mut impl Sink) {
    for at in [off + 8, off + 24] {
        if let Some(b) = d.get(at..at + 16) {
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            s.key(v6_key(&a));
        }
    }
    let Some(&first) = d.get(off + 6) else {
        return;
    };
    let mut next = first;
    let mut at = off + 40;
    for _ in 0..8 {
        s.proto(next);
        match next {
            6 | 17 | 132 => {
                ports(d, at, s);
                return;
            }
            // Hop-by-hop, routing, destination options: length in 8-byte units after 8.
            0 | 43 | 60 => {
                let (Some(&n), Some(&len)) = (d.get(at), d.get(at + 1)) else {
                    return;
                };
                next = n;
                at += 8 + usize::from(len) * 8;
            }
            44 => {
                let (Some(&n), Some(fo)) = (d.get(at), be16(d, at + 2)) else {
                    return;
                };
                next = n;
                at += 8;
                if fo & 0xfff8 != 0 {
                    // A later fragment: its protocol is known, its ports are not there.
                    s.proto(next);
                    return;
                }
            }
            51 => {
                let (Some(&n), Some(&len)) = (d.get(at), d.get(at + 1)) else {
                    return;
                };
                next = n;
                at += (usize::from(len) + 2) * 4;
            }
            _ => return,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[derive(Default)]
    pub(crate) struct Keys {
        pub(crate) keys: Vec<u64>,
        pub(crate) protos: Vec<u8>,
    }
    impl Sink for Keys {
        fn key(&mut self, k: u64) {
            self.keys.push(k);
        }
        fn proto(&mut self, p: u8) {
            self.protos.push(p);
        }
    }

    /// Ethernet + optional 802.1Q + IPv4 + UDP frame.
    pub(crate) fn udp4(src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16, vlan: Option<u16>) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        if let Some(v) = vlan {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&v.to_be_bytes());
        }
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        f.extend_from_slice(&sp.to_be_bytes());
        f.extend_from_slice(&dp.to_be_bytes());
        f.extend_from_slice(&[0, 8, 0, 0]);
        f
    }

    #[test]
    fn test_parse_udp4_vlan() {
        let f = udp4([10, 0, 0, 1], [10, 1, 2, 3], 1024, 5001, Some(100));
        let mut k = Keys::default();
        assert!(frame_keys(1, &f, &mut k));
        for want in [
            vlan_key(100),
            v4_key([10, 0, 0, 1]),
            v4_key([10, 1, 2, 3]),
            port_key(1024),
            port_key(5001),
        ] {
            assert!(k.keys.contains(&want));
        }
        assert_eq!(k.protos, [17]);
    }

    #[test]
    fn test_parse_ipv6_fragment_header() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 16, 44, 64]);
        f.extend_from_slice(&[0x20; 16]);
        f.extend_from_slice(&[0x30; 16]);
        // Fragment header: next = TCP, offset 0.
        f.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0, 80, 0x1f, 0x90]);
        let mut k = Keys::default();
        frame_keys(1, &f, &mut k);
        assert!(k.keys.contains(&v6_key(&[0x20; 16])));
        assert!(k.keys.contains(&port_key(80)) && k.keys.contains(&port_key(8080)));
        assert_eq!(k.protos, [44, 6]);
    }

    #[test]
    fn test_truncated_frames_never_panic() {
        let f = udp4([1, 2, 3, 4], [5, 6, 7, 8], 1, 2, Some(7));
        for cut in 0..f.len() {
            let mut k = Keys::default();
            frame_keys(1, &f[..cut], &mut k);
            frame_keys(101, &f[14..cut.max(14)], &mut k);
            frame_keys(113, &f[..cut], &mut k);
            frame_keys(276, &f[..cut], &mut k);
            frame_keys(0, &f[10..cut.max(10)], &mut k);
        }
    }

    #[test]
    fn test_short_snaplen_keeps_the_fields_before_the_cut() {
        // `-s 30`: the protocol and the source address are there, the destination is not.
        let f = udp4([10, 0, 0, 1], [10, 1, 2, 3], 1024, 53, None);
        let mut k = Keys::default();
        frame_keys(1, &f[..30], &mut k);
        assert_eq!(k.protos, [17]);
        assert_eq!(k.keys, [v4_key([10, 0, 0, 1])]);
    }

    #[test]
    fn test_parse_sll2_and_bsd_loopback() {
        let eth = udp4([10, 0, 0, 1], [10, 1, 2, 3], 1024, 53, None);
        let want = [
            v4_key([10, 0, 0, 1]),
            v4_key([10, 1, 2, 3]),
            port_key(1024),
            port_key(53),
        ];
        // SLL2: the protocol at 0, the network header at 20.
        let mut sll2 = vec![0x08, 0x00, 0, 0, 0, 0, 0, 1, 0, 1, 0, 6];
        sll2.extend_from_slice(&[0; 8]);
        sll2.extend_from_slice(&eth[14..]);
        // NULL in either byte order, LOOP in network order: AF_INET then the packet.
        let frames = [
            (276, sll2),
            (0, [&2u32.to_le_bytes()[..], &eth[14..]].concat()),
            (0, [&2u32.to_be_bytes()[..], &eth[14..]].concat()),
            (108, [&2u32.to_be_bytes()[..], &eth[14..]].concat()),
        ];
        for (lt, f) in frames {
            let mut k = Keys::default();
            assert!(frame_keys(lt, &f, &mut k));
            assert_eq!(k.keys, want, "{lt}");
            assert_eq!(k.protos, [17], "{lt}");
        }
        // AF_INET6 as Darwin writes it (30, little-endian) leads to IPv6.
        assert_eq!(loopback_family(0x1e00_0000), Some(0x86dd));
        assert_eq!(loopback_family(7), None);
    }

    fn keys_of(d: &[u8]) -> (Vec<u64>, Vec<u8>) {
        let mut k = Keys::default();
        frame_keys(LINKTYPE_ETHERNET, d, &mut k);
        k.keys.sort_unstable();
        k.protos.sort_unstable();
        (k.keys, k.protos)
    }

    #[test]
    fn test_frames_with_equal_raw_flows_have_equal_tuples_and_keys() {
        let base = udp4([10, 0, 0, 1], [10, 0, 0, 2], 5353, 53, None);
        let raw = raw_flow(LINKTYPE_ETHERNET, &base);
        assert_ne!(raw[0], 0, "Ethernet, IPv4, 20-byte header: a raw flow");
        // The bytes that vary within a flow (MACs, TOS, length, id, TTL, checksum, the UDP
        // length and checksum, a longer payload) leave it as it is: the burst path hits.
        for at in [0, 5, 6, 11, 15, 16, 17, 18, 19, 22, 24, 25, 38, 39, 40, 41] {
            let mut f = base.clone();
            f[at] ^= 0x5a;
            assert_eq!(raw_flow(LINKTYPE_ETHERNET, &f), raw, "byte {at}");
        }
        // Every byte changed alone and many changed at once: equal raw flows mean equal
        // flow tuples and equal keys; a raw flow never comes from another shape of frame.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut hits = 0;
        for round in 0..20_000 {
            let mut f = base.clone();
            if round < 42 * 8 {
                f[round / 8] = (next() & 0xff) as u8;
            } else {
                for _ in 0..1 + next() % 3 {
                    let at = (next() % 42) as usize;
                    f[at] = if next() % 2 == 0 {
                        (next() & 0xff) as u8
                    } else {
                        f[at] ^ 1
                    };
                }
                f.truncate(30 + (next() % 13) as usize);
            }
            let r = raw_flow(LINKTYPE_ETHERNET, &f);
            if r[0] == 0 {
                continue;
            }
            assert_eq!(&f[12..15], &[0x08, 0x00, 0x45], "{f:02x?}");
            assert!(f.len() >= 38);
            if r == raw {
                hits += 1;
                assert_eq!(
                    flow_tuple(LINKTYPE_ETHERNET, &f),
                    flow_tuple(LINKTYPE_ETHERNET, &base)
                );
                assert_eq!(keys_of(&f), keys_of(&base), "{f:02x?}");
            } else {
                assert_ne!(flow_tuple(LINKTYPE_ETHERNET, &f), None, "{f:02x?}");
            }
        }
        assert!(hits > 100, "{hits}");
        // Other shapes: a VLAN tag, a 24-byte IPv4 header, IPv6, a frame cut at 37 bytes.
        let mut long_header = base.clone();
        long_header[14] = 0x46;
        long_header.extend_from_slice(&[0; 4]);
        let mut v6 = base.clone();
        v6[12..14].copy_from_slice(&[0x86, 0xdd]);
        for f in [
            udp4([10, 0, 0, 1], [10, 0, 0, 2], 5353, 53, Some(7)),
            long_header,
            v6,
            base[..37].to_vec(),
        ] {
            assert_eq!(raw_flow(LINKTYPE_ETHERNET, &f), [0; 3], "{f:02x?}");
        }
    }

    #[test]
    fn test_unknown_linktype() {
        let mut k = Keys::default();
        assert!(!frame_keys(127, &[0; 64], &mut k));
        assert!(!frame_keys(239, &[0; 64], &mut k));
    }
}
