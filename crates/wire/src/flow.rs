//! Flow keys: the 5-tuple (plus VLAN) that names the flow a frame belongs to.
//!
//! [`flow_key`] walks an Ethernet II frame as the capture ring hands it over:
//! in-band 802.1Q / 802.1ad tags (also stacked, QinQ), then IPv4 or IPv6 with
//! their extension headers, then the ports of TCP, UDP, SCTP, UDP-Lite and
//! DCCP. It reads the frame in place and allocates nothing, so it runs on the
//! capture hot path; a frame it cannot use yields a [`ParseError`], a `Copy`
//! reason that indexes a drop counter.
//!
//! The kernel strips the outer VLAN tag from AF_PACKET frames and reports it
//! in the ring header, so the caller passes it as `ring_vlan`; it wins over
//! any tag still in the frame.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Ethernet type of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// Ethernet type of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// Tag protocol id of an 802.1Q VLAN tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// Tag protocol id of an 802.1ad service tag (outer tag of QinQ).
pub const ETHERTYPE_QINQ: u16 = 0x88a8;
/// Pre-standard QinQ tag protocol id still sent by some switches.
pub const ETHERTYPE_QINQ_LEGACY: u16 = 0x9100;

/// IP protocol number of ICMP.
pub const IPPROTO_ICMP: u8 = 1;
/// IP protocol number of TCP.
pub const IPPROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;
/// IP protocol number of DCCP.
pub const IPPROTO_DCCP: u8 = 33;
/// IPv6 next header of the hop-by-hop options header.
pub const IPPROTO_HOPOPTS: u8 = 0;
/// IPv6 next header of the routing header.
pub const IPPROTO_ROUTING: u8 = 43;
/// IPv6 next header of the fragment header.
pub const IPPROTO_FRAGMENT: u8 = 44;
/// IP protocol number of ICMPv6.
pub const IPPROTO_ICMPV6: u8 = 58;
/// IPv6 next header of the destination options header.
pub const IPPROTO_DSTOPTS: u8 = 60;
/// IP protocol number of SCTP.
pub const IPPROTO_SCTP: u8 = 132;
/// IP protocol number of UDP-Lite.
pub const IPPROTO_UDPLITE: u8 = 136;

/// Length of an Ethernet II header without tags.
pub const ETH_HEADER_LEN: usize = 14;
/// Length of one VLAN tag (TPID + TCI).
pub const VLAN_TAG_LEN: usize = 4;

/// Most IPv6 extension headers walked before the frame is called malformed.
/// Real traffic carries one or two; the bound keeps the walk short on
/// crafted frames.
const MAX_IPV6_EXT_HEADERS: usize = 8;

/// Why a frame has no flow key.
///
/// `Copy` and field-less so the capture path can count it: [`ParseError::index`]
/// gives a slot in a `[u64; ParseError::COUNT]` drop table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ParseError {
    /// The frame ends inside a header that the key needs.
    #[error("frame truncated inside a header")]
    Truncated,
    /// The frame is not IPv4 or IPv6 (ARP, LLDP, ...).
    #[error("frame is not IP")]
    NotIp,
    /// The IP version field disagrees with the Ethernet type.
    #[error("IP version does not match the Ethernet type")]
    BadVersion,
    /// A header field is impossible (IHL < 5, total length < header, too
    /// many IPv6 extension headers).
    #[error("malformed IP header")]
    BadHeader,
}

impl ParseError {
    /// Number of variants: the length of a drop table indexed by [`ParseError::index`].
    pub const COUNT: usize = 4;

    /// Every variant, in [`ParseError::index`] order.
    pub const ALL: [ParseError; ParseError::COUNT] = [
        ParseError::Truncated,
        ParseError::NotIp,
        ParseError::BadVersion,
        ParseError::BadHeader,
    ];

    /// Dense index of this reason, `0..ParseError::COUNT`.
    pub const fn index(self) -> usize {
        match self {
            ParseError::Truncated => 0,
            ParseError::NotIp => 1,
            ParseError::BadVersion => 2,
            ParseError::BadHeader => 3,
        }
    }

    /// Short snake-case name for counters and JSON (`truncated`, `not_ip`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            ParseError::Truncated => "truncated",
            ParseError::NotIp => "not_ip",
            ParseError::BadVersion => "bad_version",
            ParseError::BadHeader => "bad_header",
        }
    }
}

/// Address family of a [`FlowKey`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IpFamily {
    /// IPv4: addresses live in the first 4 bytes of `src`/`dst`.
    V4,
    /// IPv6: addresses fill all 16 bytes.
    V6,
}

/// The flow a frame belongs to: VLAN, IP protocol, addresses and ports.
///
/// Directional as seen on the wire; [`FlowKey::canonical`] gives the same key
/// for both directions. Fragments (other than by reassembly, which this crate
/// does not do) and port-less protocols such as ICMP have both ports 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// VLAN id (12 bits), 0 when the frame has no tag.
    pub vlan: u16,
    /// IP protocol (IPv4) or upper-layer next header (IPv6).
    pub proto: u8,
    /// Address family.
    pub family: IpFamily,
    /// Source address; IPv4 in the first 4 bytes, the rest zero.
    pub src: [u8; 16],
    /// Destination address; IPv4 in the first 4 bytes, the rest zero.
    pub dst: [u8; 16],
    /// Source port, 0 when the protocol has none or the packet is a fragment.
    pub sport: u16,
    /// Destination port, 0 when the protocol has none or the packet is a fragment.
    pub dport: u16,
}

impl FlowKey {
    /// The key of the opposite direction: addresses and ports swapped.
    #[inline]
    pub fn reversed(&self) -> FlowKey {
        FlowKey {
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
            ..*self
        }
    }

    /// The key with its endpoints ordered (lower `(addr, port)` first), so
    /// both directions of a conversation give the same key.
    #[inline]
    pub fn canonical(&self) -> FlowKey {
        if self.src_first() {
            *self
        } else {
            self.reversed()
        }
    }

    /// Whether `(src, sport)` is the lower end, `<=` `(dst, dport)` (byte order): then
    /// [`FlowKey::canonical`] is the key itself. The addresses are compared as two
    /// big-endian 128-bit numbers, which orders them as their bytes.
    #[inline]
    pub fn src_first(&self) -> bool {
        let (s, d) = (u128::from_be_bytes(self.src), u128::from_be_bytes(self.dst));
        (s, self.sport) <= (d, self.dport)
    }

    /// True for an IPv4 key.
    pub fn is_v4(&self) -> bool {
        self.family == IpFamily::V4
    }

    /// Source address as a std address.
    pub fn src_ip(&self) -> IpAddr {
        self.addr(&self.src)
    }

    /// Destination address as a std address.
    pub fn dst_ip(&self) -> IpAddr {
        self.addr(&self.dst)
    }

    fn addr(&self, a: &[u8; 16]) -> IpAddr {
        match self.family {
            IpFamily::V4 => IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3])),
            IpFamily::V6 => IpAddr::V6(Ipv6Addr::from(*a)),
        }
    }
}

/// Reads a big-endian u16 at `at`; the caller has checked the bounds.
#[inline]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Result of walking the Ethernet header and its VLAN tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L2 {
    /// Ethernet type after all VLAN tags.
    pub ethertype: u16,
    /// Offset of the layer-3 header in the frame.
    pub l3_offset: usize,
    /// VLAN id of the first in-band tag, 0 when untagged.
    pub vlan: u16,
}

/// Walks the Ethernet II header and any stacked VLAN tags.
///
/// Errors with [`ParseError::Truncated`] when the frame is shorter than the
/// header or ends inside a tag.
pub fn parse_l2(frame: &[u8]) -> Result<L2, ParseError> {
    if frame.len() < ETH_HEADER_LEN {
        return Err(ParseError::Truncated);
    }
    walk_tags(frame, be16(frame, 12), ETH_HEADER_LEN)
}

/// From an Ethernet type whose payload starts at `off`, through any stacked VLAN tags.
pub(crate) fn walk_tags(
    frame: &[u8],
    mut ethertype: u16,
    mut off: usize,
) -> Result<L2, ParseError> {
    let mut vlan = 0u16;
    let mut first = true;
    // Each tag consumes 4 bytes, so the loop ends with the frame.
    while matches!(
        ethertype,
        ETHERTYPE_VLAN | ETHERTYPE_QINQ | ETHERTYPE_QINQ_LEGACY
    ) {
        if frame.len() < off + VLAN_TAG_LEN {
            return Err(ParseError::Truncated);
        }
        if first {
            vlan = be16(frame, off) & 0x0fff;
            first = false;
        }
        ethertype = be16(frame, off + 2);
        off += VLAN_TAG_LEN;
    }
    Ok(L2 {
        ethertype,
        l3_offset: off,
        vlan,
    })
}

/// True for protocols whose first 4 bytes are source and destination ports.
#[inline]
fn has_ports(proto: u8) -> bool {
    matches!(
        proto,
        IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP | IPPROTO_UDPLITE | IPPROTO_DCCP
    )
}

/// Reads the two ports at the start of an L4 header in `ip[at..end]`.
#[inline]
fn ports(ip: &[u8], at: usize, end: usize) -> Result<(u16, u16), ParseError> {
    if end < at + 4 {
        return Err(ParseError::Truncated);
    }
    Ok((be16(ip, at), be16(ip, at + 2)))
}

/// Builds the flow key of an Ethernet II frame ([`crate::link::Link::flow_key`] reads the
/// other link types).
///
/// `ring_vlan` is the VLAN the capture ring reported for the frame (the
/// kernel strips that tag); only its low 12 bits (the VLAN id) are used, and
/// it wins over any in-band tag. Without it, the first in-band tag's id is
/// used. Errors: [`ParseError::NotIp`] for non-IP frames,
/// [`ParseError::Truncated`] when the frame ends before the ports,
/// [`ParseError::BadVersion`] / [`ParseError::BadHeader`] for impossible IP
/// headers. Never allocates.
pub fn flow_key(frame: &[u8], ring_vlan: Option<u16>) -> Result<FlowKey, ParseError> {
    l3_key(frame, parse_l2(frame)?, ring_vlan)
}

/// The flow key of the network header that `l2` found in `frame`.
#[inline]
pub(crate) fn l3_key(frame: &[u8], l2: L2, ring_vlan: Option<u16>) -> Result<FlowKey, ParseError> {
    let vlan = match ring_vlan {
        Some(tci) => tci & 0x0fff,
        None => l2.vlan,
    };
    let l3 = frame.get(l2.l3_offset..).ok_or(ParseError::Truncated)?;
    match l2.ethertype {
        ETHERTYPE_IPV4 => ipv4_key(l3, vlan),
        ETHERTYPE_IPV6 => ipv6_key(l3, vlan),
        _ => Err(ParseError::NotIp),
    }
}

/// Whether a datagram is a fragment of a larger one, and which.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fragment {
    /// A whole datagram.
    #[default]
    No,
    /// The first fragment (offset 0, more to come): it holds the transport header.
    First,
    /// A later fragment: no transport header, only the middle or end of its data.
    Later,
}

/// What the walk of a network header learns: the flow key, where the transport header
/// starts and where the datagram ends, in the network header's slice.
#[derive(Clone, Copy, Debug)]
pub(crate) struct L3 {
    /// The flow key, as [`flow_key`] gives it.
    pub(crate) key: FlowKey,
    /// Offset of the transport header (of the fragment's data for a later fragment).
    pub(crate) l4: usize,
    /// End of the datagram: its length from the IP header, bounded by the captured bytes.
    pub(crate) end: usize,
    /// End of the datagram by the IP header alone (the captured bytes when it says 0).
    pub(crate) claimed_end: usize,
    /// Whether the datagram is a fragment.
    pub(crate) fragment: Fragment,
}

fn ipv4_key(ip: &[u8], vlan: u16) -> Result<FlowKey, ParseError> {
    ipv4_l3(ip, vlan).map(|l| l.key)
}

pub(crate) fn ipv4_l3(ip: &[u8], vlan: u16) -> Result<L3, ParseError> {
    if ip.len() < 20 {
        return Err(ParseError::Truncated);
    }
    if ip[0] >> 4 != 4 {
        return Err(ParseError::BadVersion);
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    if ihl < 20 {
        return Err(ParseError::BadHeader);
    }
    let total = usize::from(be16(ip, 2));
    if total != 0 && total < ihl {
        return Err(ParseError::BadHeader);
    }
    if ip.len() < ihl {
        return Err(ParseError::Truncated);
    }
    // Ethernet padding may follow the datagram; a short capture may cut it.
    // Total length 0 comes from segmentation offload (a GSO/BIG TCP packet
    // seen before the NIC splits it): the captured bytes are the datagram.
    let claimed_end = if total == 0 { ip.len() } else { total };
    let end = claimed_end.min(ip.len());
    let proto = ip[9];
    let frag = be16(ip, 6);
    let more_fragments = frag & 0x2000 != 0;
    let offset = frag & 0x1fff;
    let fragment = match (offset, more_fragments) {
        (0, false) => Fragment::No,
        (0, true) => Fragment::First,
        _ => Fragment::Later,
    };
    let mut key = FlowKey {
        vlan,
        proto,
        family: IpFamily::V4,
        src: [0; 16],
        dst: [0; 16],
        sport: 0,
        dport: 0,
    };
    key.src[..4].copy_from_slice(&ip[12..16]);
    key.dst[..4].copy_from_slice(&ip[16..20]);
    if fragment == Fragment::No && has_ports(proto) {
        (key.sport, key.dport) = ports(ip, ihl, end)?;
    }
    Ok(L3 {
        key,
        l4: ihl,
        end,
        claimed_end,
        fragment,
    })
}

fn ipv6_key(ip: &[u8], vlan: u16) -> Result<FlowKey, ParseError> {
    ipv6_l3(ip, vlan).map(|l| l.key)
}

pub(crate) fn ipv6_l3(ip: &[u8], vlan: u16) -> Result<L3, ParseError> {
    if ip.len() < 40 {
        return Err(ParseError::Truncated);
    }
    if ip[0] >> 4 != 6 {
        return Err(ParseError::BadVersion);
    }
    let payload = usize::from(be16(ip, 4));
    // Payload length 0 means a jumbogram (hop-by-hop option); use what we have.
    let claimed_end = if payload == 0 { ip.len() } else { 40 + payload };
    let end = claimed_end.min(ip.len());
    let mut l3 = L3 {
        key: FlowKey {
            vlan,
            proto: ip[6],
            family: IpFamily::V6,
            src: [0; 16],
            dst: [0; 16],
            sport: 0,
            dport: 0,
        },
        l4: 40,
        end,
        claimed_end,
        fragment: Fragment::No,
    };
    l3.key.src.copy_from_slice(&ip[8..24]);
    l3.key.dst.copy_from_slice(&ip[24..40]);

    let mut next = ip[6];
    let mut off = 40;
    for _ in 0..=MAX_IPV6_EXT_HEADERS {
        match next {
            IPPROTO_HOPOPTS | IPPROTO_ROUTING | IPPROTO_DSTOPTS => {
                if end < off + 8 {
                    return Err(ParseError::Truncated);
                }
                next = ip[off];
                off += (usize::from(ip[off + 1]) + 1) * 8;
            }
            IPPROTO_FRAGMENT => {
                if end < off + 8 {
                    return Err(ParseError::Truncated);
                }
                // Every fragment carries the same next header; ports stay 0
                // so all fragments of a datagram share one key.
                l3.key.proto = ip[off];
                let frag = be16(ip, off + 2);
                l3.fragment = match (frag >> 3, frag & 1 != 0) {
                    (0, false) => Fragment::No,
                    (0, true) => Fragment::First,
                    _ => Fragment::Later,
                };
                l3.l4 = off + 8;
                return Ok(l3);
            }
            proto => {
                l3.key.proto = proto;
                l3.l4 = off;
                if has_ports(proto) {
                    (l3.key.sport, l3.key.dport) = ports(ip, off, end)?;
                }
                return Ok(l3);
            }
        }
    }
    Err(ParseError::BadHeader)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds an Ethernet frame: MACs, then `tags` (TPID, TCI), then ethertype and payload.
    pub(crate) fn eth(tags: &[(u16, u16)], ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02];
        for &(tpid, tci) in tags {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&tci.to_be_bytes());
        }
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn ipv4(proto: u8, frag: u16, options: usize, l4: &[u8]) -> Vec<u8> {
        let ihl = 20 + options;
        let total = ihl + l4.len();
        let mut p = vec![0u8; ihl];
        p[0] = 0x40 | (ihl / 4) as u8;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[6..8].copy_from_slice(&frag.to_be_bytes());
        p[8] = 64;
        p[9] = proto;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p.extend_from_slice(l4);
        p
    }

    fn ipv6(next: u8, ext: &[u8], l4: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&((ext.len() + l4.len()) as u16).to_be_bytes());
        p[6] = next;
        p[7] = 64;
        p[8..24].copy_from_slice(&Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1).octets());
        p[24..40].copy_from_slice(&Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2).octets());
        p.extend_from_slice(ext);
        p.extend_from_slice(l4);
        p
    }

    const L4: [u8; 8] = [0x30, 0x39, 0x00, 0x50, 0, 0, 0, 0]; // 12345 -> 80

    #[test]
    fn test_parse_ipv4_tcp() {
        let f = eth(&[], ETHERTYPE_IPV4, &ipv4(IPPROTO_TCP, 0, 0, &L4));
        let k = flow_key(&f, None).unwrap();
        assert_eq!(k.proto, IPPROTO_TCP);
        assert!(k.is_v4());
        assert_eq!(k.src_ip(), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(k.dst_ip(), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
        assert_eq!(k.src[4..], [0; 12]);
        assert_eq!((k.sport, k.dport, k.vlan), (12345, 80, 0));
    }

    #[test]
    fn test_parse_ipv4_options_honour_ihl() {
        let f = eth(&[], ETHERTYPE_IPV4, &ipv4(IPPROTO_UDP, 0, 8, &L4));
        let k = flow_key(&f, None).unwrap();
        assert_eq!((k.proto, k.sport, k.dport), (IPPROTO_UDP, 12345, 80));
    }

    #[test]
    fn test_parse_ipv4_fragments_have_no_ports() {
        for frag in [0x2000u16, 0x0001, 0x2010] {
            let f = eth(&[], ETHERTYPE_IPV4, &ipv4(IPPROTO_UDP, frag, 0, &L4));
            let k = flow_key(&f, None).unwrap();
            assert_eq!(
                (k.proto, k.sport, k.dport),
                (IPPROTO_UDP, 0, 0),
                "{frag:#x}"
            );
        }
        // DF alone is not a fragment.
        let f = eth(&[], ETHERTYPE_IPV4, &ipv4(IPPROTO_UDP, 0x4000, 0, &L4));
        assert_eq!(flow_key(&f, None).unwrap().sport, 12345);
    }

    #[test]
    fn test_parse_icmp_has_no_ports() {
        let f = eth(&[], ETHERTYPE_IPV4, &ipv4(IPPROTO_ICMP, 0, 0, &L4));
        let k = flow_key(&f, None).unwrap();
        assert_eq!((k.proto, k.sport, k.dport), (IPPROTO_ICMP, 0, 0));
        let f = eth(&[], ETHERTYPE_IPV6, &ipv6(IPPROTO_ICMPV6, &[], &L4));
        let k = flow_key(&f, None).unwrap();
        assert_eq!((k.proto, k.sport, k.dport), (IPPROTO_ICMPV6, 0, 0));
    }

    #[test]
    fn test_parse_vlan_tags() {
        let p = ipv4(IPPROTO_TCP, 0, 0, &L4);
        let f = eth(&[(ETHERTYPE_VLAN, 0x2064)], ETHERTYPE_IPV4, &p);
        let k = flow_key(&f, None).unwrap();
        assert_eq!((k.vlan, k.sport), (100, 12345));
        // QinQ: the first (outer) id is used.
        let f = eth(
            &[(ETHERTYPE_QINQ, 200), (ETHERTYPE_VLAN, 300)],
            ETHERTYPE_IPV4,
            &p,
        );
        assert_eq!(flow_key(&f, None).unwrap().vlan, 200);
        // The ring's tag wins, and only its id bits count.
        assert_eq!(flow_key(&f, Some(0xe007)).unwrap().vlan, 7);
        let f = eth(&[], ETHERTYPE_IPV4, &p);
        assert_eq!(flow_key(&f, Some(42)).unwrap().vlan, 42);
    }

    #[test]
    fn test_parse_ipv6_extension_headers() {
        // hop-by-hop (8 bytes) -> destination options (16 bytes) -> UDP
        let mut ext = vec![IPPROTO_DSTOPTS, 0, 0, 0, 0, 0, 0, 0];
        ext.extend_from_slice(&[IPPROTO_UDP, 1]);
        ext.extend_from_slice(&[0; 14]);
        let f = eth(&[], ETHERTYPE_IPV6, &ipv6(IPPROTO_HOPOPTS, &ext, &L4));
        let k = flow_key(&f, None).unwrap();
        assert_eq!(k.family, IpFamily::V6);
        assert_eq!((k.proto, k.sport, k.dport), (IPPROTO_UDP, 12345, 80));
        assert_eq!(
            k.dst_ip(),
            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2))
        );
        // routing header -> fragment header: ports 0, proto from the fragment header.
        let mut ext = vec![IPPROTO_FRAGMENT, 0, 0, 0, 0, 0, 0, 0];
        ext.extend_from_slice(&[IPPROTO_TCP, 0, 0, 1, 0, 0, 0, 9]);
        let f = eth(&[], ETHERTYPE_IPV6, &ipv6(IPPROTO_ROUTING, &ext, &L4));
        let k = flow_key(&f, None).unwrap();
        assert_eq!((k.proto, k.sport, k.dport), (IPPROTO_TCP, 0, 0));
    }

    #[test]
    fn test_parse_too_many_ipv6_extension_headers() {
        let mut ext = Vec::new();
        for _ in 0..MAX_IPV6_EXT_HEADERS + 1 {
            ext.extend_from_slice(&[IPPROTO_DSTOPTS, 0, 0, 0, 0, 0, 0, 0]);
        }
        let f = eth(&[], ETHERTYPE_IPV6, &ipv6(IPPROTO_DSTOPTS, &ext, &L4));
        assert_eq!(flow_key(&f, None), Err(ParseError::BadHeader));
    }

    #[test]
    fn test_parse_not_ip() {
        let f = eth(&[], 0x0806, &[0; 28]);
        assert_eq!(flow_key(&f, None), Err(ParseError::NotIp));
        let f = eth(&[(ETHERTYPE_VLAN, 5)], 0x88cc, &[0; 28]);
        assert_eq!(flow_key(&f, None), Err(ParseError::NotIp));
    }

    #[test]
    fn test_parse_bad_headers() {
        let mut p = ipv4(IPPROTO_TCP, 0, 0, &L4);
        p[0] = 0x45 | 0x20; // version 6 in an IPv4 frame
        assert_eq!(
            flow_key(&eth(&[], ETHERTYPE_IPV4, &p), None),
            Err(ParseError::BadVersion)
        );
        let mut p = ipv4(IPPROTO_TCP, 0, 0, &L4);
        p[0] = 0x44; // IHL 4
        assert_eq!(
            flow_key(&eth(&[], ETHERTYPE_IPV4, &p), None),
            Err(ParseError::BadHeader)
        );
        let mut p = ipv4(IPPROTO_TCP, 0, 0, &L4);
        p[2..4].copy_from_slice(&10u16.to_be_bytes()); // total < header
        assert_eq!(
            flow_key(&eth(&[], ETHERTYPE_IPV4, &p), None),
            Err(ParseError::BadHeader)
        );
    }

    #[test]
    fn test_truncated() {
        let full = eth(
            &[(ETHERTYPE_VLAN, 9)],
            ETHERTYPE_IPV4,
            &ipv4(IPPROTO_TCP, 0, 0, &L4),
        );
        // Every cut before the end of the ports is Truncated, never a panic.
        for cut in 0..18 + 20 + 4 {
            assert_eq!(
                flow_key(&full[..cut], None),
                Err(ParseError::Truncated),
                "{cut}"
            );
        }
        assert!(flow_key(&full[..18 + 24], None).is_ok());
        let full = eth(&[], ETHERTYPE_IPV6, &ipv6(IPPROTO_UDP, &[], &L4));
        for cut in 0..14 + 40 + 4 {
            assert_eq!(
                flow_key(&full[..cut], None),
                Err(ParseError::Truncated),
                "{cut}"
            );
        }
    }

    #[test]
    fn test_total_length_bounds_ports() {
        // IPv4 total length says the datagram ends right after the header;
        // the bytes after it are Ethernet padding, not ports.
        let mut p = ipv4(IPPROTO_UDP, 0, 0, &L4);
        p[2..4].copy_from_slice(&20u16.to_be_bytes());
        assert_eq!(
            flow_key(&eth(&[], ETHERTYPE_IPV4, &p), None),
            Err(ParseError::Truncated)
        );
    }

    #[test]
    fn test_parse_offload_total_length_zero() {
        let mut p = ipv4(IPPROTO_TCP, 0, 0, &L4);
        p[2..4].copy_from_slice(&[0, 0]);
        let k = flow_key(&eth(&[], ETHERTYPE_IPV4, &p), None).unwrap();
        assert_eq!((k.sport, k.dport), (12345, 80));
    }

    #[test]
    fn test_canonical_and_reversed() {
        let f = eth(&[], ETHERTYPE_IPV4, &ipv4(IPPROTO_TCP, 0, 0, &L4));
        let k = flow_key(&f, None).unwrap();
        let r = k.reversed();
        assert_eq!(
            (r.src, r.dst, r.sport, r.dport),
            (k.dst, k.src, k.dport, k.sport)
        );
        assert_eq!(r.reversed(), k);
        assert_eq!(k.canonical(), r.canonical());
        assert_eq!(k.canonical(), k); // 10.0.0.1 < 10.0.0.2
                                      // Same address both ends: the port decides.
        let mut s = k;
        s.dst = s.src;
        assert_eq!(s.canonical(), s.reversed().canonical());
    }

    #[test]
    fn test_error_index() {
        for (i, e) in ParseError::ALL.iter().enumerate() {
            assert_eq!(e.index(), i);
            assert!(!e.as_str().is_empty());
        }
    }
}
