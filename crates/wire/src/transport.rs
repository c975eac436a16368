//! A frame's transport layer: the flow key, fragment state, TCP flags and sequence number,
//! ICMP type and code, and the transport payload, read in place.
//!
//! [`Transport::parse`] walks the link header with [`Link::network`] and the IP header with
//! the same code as [`crate::flow_key`] (so its key is the flow key, ports 0 for every
//! fragment), then the transport header. The payload is a sub-slice of the frame, bounded by
//! the IP header's length and by the captured bytes: Ethernet padding after a short
//! datagram is never payload, and a frame cut by the snap length has a payload shorter
//! than [`Transport::payload_len`] says. Nothing is allocated.
//!
//! | protocol | payload starts after |
//! |---|---|
//! | TCP | the data offset (header and options) |
//! | UDP, UDP-Lite | the 8-byte header |
//! | ICMP, ICMPv6 | the 4-byte type, code and checksum |
//! | any other, and every later fragment | the IP headers |
//!
//! A first fragment's transport header is read (flags, type), its payload is the part of
//! the data this fragment holds; a later fragment has no transport header at all.

use crate::flow::{
    self, FlowKey, Fragment, ParseError, ETHERTYPE_IPV4, ETHERTYPE_IPV6, IPPROTO_ICMP,
    IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP, IPPROTO_UDPLITE, L3,
};
use crate::link::Link;

/// TCP flag FIN.
pub const TCP_FIN: u8 = 0x01;
/// TCP flag SYN.
pub const TCP_SYN: u8 = 0x02;
/// TCP flag RST.
pub const TCP_RST: u8 = 0x04;
/// TCP flag PSH.
pub const TCP_PSH: u8 = 0x08;
/// TCP flag ACK.
pub const TCP_ACK: u8 = 0x10;

/// A TCP header's fields that a connection's record keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tcp {
    /// The flags byte (CWR ECE URG ACK PSH RST SYN FIN).
    pub flags: u8,
    /// The sequence number.
    pub seq: u32,
}

/// One frame's transport layer; see the module doc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transport<'a> {
    /// The flow key, exactly as [`crate::flow_key`] gives it.
    pub key: FlowKey,
    /// Whether the datagram is a fragment.
    pub fragment: Fragment,
    /// TCP's flags and sequence number, when the TCP header was captured whole (20 bytes).
    pub tcp: Option<Tcp>,
    /// ICMP or ICMPv6 type and code, when captured.
    pub icmp: Option<(u8, u8)>,
    /// The transport payload that was captured (see the module doc).
    pub payload: &'a [u8],
    /// The payload's length by the IP header (and the TCP data offset): more than
    /// `payload.len()` when the capture cut the frame.
    pub payload_len: usize,
}

impl<'a> Transport<'a> {
    /// Reads the transport layer of `frame`, a frame of link type `link`; `ring_vlan` as in
    /// [`crate::flow_key`]. Errors are the flow key's. Inline: the common frame's read is
    /// built in its caller's place (the rest is a call).
    #[inline]
    pub fn parse(
        link: Link,
        frame: &'a [u8],
        ring_vlan: Option<u16>,
    ) -> Result<Transport<'a>, ParseError> {
        if link == Link::Ethernet {
            if let Some(t) = Transport::plain_ipv4(frame, ring_vlan) {
                return Ok(t);
            }
        }
        Transport::any(link, frame, ring_vlan)
    }

    /// [`Transport::parse`] for any frame, the common ones included.
    #[inline(never)]
    fn any(
        link: Link,
        frame: &'a [u8],
        ring_vlan: Option<u16>,
    ) -> Result<Transport<'a>, ParseError> {
        let l2 = link.network(frame)?;
        let vlan = match ring_vlan {
            Some(tci) => tci & 0x0fff,
            None => l2.vlan,
        };
        let ip = frame.get(l2.l3_offset..).ok_or(ParseError::Truncated)?;
        let l3 = match l2.ethertype {
            ETHERTYPE_IPV4 => flow::ipv4_l3(ip, vlan)?,
            ETHERTYPE_IPV6 => flow::ipv6_l3(ip, vlan)?,
            _ => return Err(ParseError::NotIp),
        };
        Ok(Transport::of(ip, &l3))
    }

    /// The common frame read at fixed offsets: untagged Ethernet, IPv4 without options,
    /// not a fragment, TCP or UDP with its ports captured. `None` for any other frame, which
    /// the general path reads; for these it gives what the general path gives (a test
    /// checks the two agree on every cut and mutation of such frames). The recorder reads
    /// every packet's transport for its sessions, so this is its cost per packet.
    #[inline]
    fn plain_ipv4(frame: &'a [u8], ring_vlan: Option<u16>) -> Option<Transport<'a>> {
        let h: &[u8; 38] = frame.first_chunk()?;
        // EtherType IPv4, version 4 with a 20-byte header, no fragment offset or MF bit.
        if h[12..15] != [0x08, 0x00, 0x45] || u16::from_be_bytes([h[20], h[21]]) & 0x3fff != 0 {
            return None;
        }
        let proto = h[23];
        if proto != IPPROTO_TCP && proto != IPPROTO_UDP {
            return None;
        }
        let ip = &frame[14..];
        let total = usize::from(u16::from_be_bytes([h[16], h[17]]));
        let claimed_end = match total {
            0 => ip.len(),
            // Shorter than its header, or than its ports: the general path says why.
            1..24 => return None,
            n => n,
        };
        let mut key = FlowKey {
            vlan: ring_vlan.map_or(0, |tci| tci & 0x0fff),
            proto,
            family: flow::IpFamily::V4,
            src: [0; 16],
            dst: [0; 16],
            sport: u16::from_be_bytes([h[34], h[35]]),
            dport: u16::from_be_bytes([h[36], h[37]]),
        };
        key.src[..4].copy_from_slice(&h[26..30]);
        key.dst[..4].copy_from_slice(&h[30..34]);
        let l3 = L3 {
            key,
            l4: 20,
            end: claimed_end.min(ip.len()),
            claimed_end,
            fragment: Fragment::No,
        };
        Some(Transport::of(ip, &l3))
    }

    /// The symmetric steering hash of the frame this was read from, without reading the
    /// frame again: [`Link::frame_hash`] of the same frame and link type gives it too (an IP
    /// frame's hash is its flow key's, [`crate::flow_hash`], and a frame with a transport
    /// layer has a flow key).
    #[inline]
    pub fn frame_hash(&self) -> u32 {
        crate::hash::flow_hash(&self.key)
    }

    /// Whether the capture cut the payload short.
    pub fn truncated(&self) -> bool {
        self.payload.len() < self.payload_len
    }

    fn of(ip: &'a [u8], l3: &L3) -> Transport<'a> {
        let mut t = Transport {
            key: l3.key,
            fragment: l3.fragment,
            tcp: None,
            icmp: None,
            payload: &[],
            payload_len: 0,
        };
        // The transport header, when this datagram holds one.
        let header = if l3.fragment == Fragment::Later {
            Some(0)
        } else {
            let l4 = ip.get(l3.l4..l3.end).unwrap_or_default();
            t.header(l4)
        };
        if let Some(h) = header {
            let start = l3.l4.saturating_add(h);
            t.payload = ip.get(start..l3.end).unwrap_or_default();
            t.payload_len = l3.claimed_end.saturating_sub(start);
        }
        t
    }

    /// Reads the transport header at the start of `l4` (the datagram's captured bytes from
    /// there); gives its length (the payload starts there, or would: a header cut by the
    /// capture leaves an empty payload shorter than `payload_len`), None when it has none
    /// to read (a TCP header cut before its flags, an ICMP one before its code).
    fn header(&mut self, l4: &[u8]) -> Option<usize> {
        match self.key.proto {
            IPPROTO_TCP => {
                let h: &[u8; 20] = l4.get(..20)?.try_into().ok()?;
                let offset = usize::from(h[12] >> 4) * 4;
                self.tcp = Some(Tcp {
                    flags: h[13],
                    seq: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
                });
                // A data offset under 20 is impossible; the payload is not read then. Options
                // cut by the capture leave an empty payload that says it was cut.
                (offset >= 20).then_some(offset)
            }
            IPPROTO_UDP | IPPROTO_UDPLITE => Some(8),
            IPPROTO_ICMP | IPPROTO_ICMPV6 => {
                let h = l4.get(..4)?;
                self.icmp = Some((h[0], h[1]));
                Some(4)
            }
            _ => Some(0),
        }
    }
}

impl Link {
    /// The transport layer of a frame of this link type ([`Transport::parse`]).
    #[inline]
    pub fn transport<'a>(
        self,
        frame: &'a [u8],
        ring_vlan: Option<u16>,
    ) -> Result<Transport<'a>, ParseError> {
        Transport::parse(self, frame, ring_vlan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::ETH_HEADER_LEN;

    /// Frame 1 of `dns_tcp.pcap` (tcpdump's tests/): a SYN, 74 bytes (ports and sequence
    /// number as tshark decodes them).
    const SYN: &[u8] = &[
        0x00, 0x11, 0x22, 0x33, 0x44, 0x66, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x3c, 0x9b, 0x28, 0x40, 0x00, 0x40, 0x06, 0x13, 0x76, 0xc0, 0xa8, 0x01, 0x0b,
        0xd1, 0x57, 0xf9, 0x12, 0x83, 0xf3, 0x00, 0x35, 0x23, 0xfe, 0xc8, 0x0c, 0x00, 0x00, 0x00,
        0x00, 0xa0, 0x02, 0xfa, 0xf0, 0x0c, 0x41, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02,
        0x08, 0x0a, 0x79, 0xe2, 0xca, 0x9a, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07,
    ];

    fn udp_frame(total: u16, payload: &[u8], pad: usize) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00]);
        let mut ip = vec![
            0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0x04, 0x00, 0x00, 0x35]);
        f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(payload);
        f.extend(std::iter::repeat_n(0xee, pad));
        f
    }

    /// Calls `check` with 20,000 changed copies of a SYN and of a UDP datagram each: bytes
    /// of their headers set to 0, 0xff or at random, cut anywhere, with and without the
    /// ring's VLAN (xorshift from `seed`, so a failure comes back).
    fn mutations(seed: u64, mut check: impl FnMut(&[u8], Option<u16>)) {
        let mut next = crate::xorshift::xorshift64(seed);
        for base in [SYN.to_vec(), udp_frame(36, b"12345678", 4)] {
            for _ in 0..20_000 {
                let mut f = base.clone();
                for _ in 0..next() % 3 {
                    let at = 12 + (next() as usize) % 30;
                    f[at] = match next() % 4 {
                        0 => 0,
                        1 => 0xff,
                        _ => next() as u8,
                    };
                }
                f.truncate((next() as usize) % (f.len() + 1));
                let vlan = next().is_multiple_of(3).then(|| next() as u16);
                check(&f, vlan);
            }
        }
    }

    /// The fixed-offset reading of common frames gives what the general one gives, on
    /// every cut and on random changes to the bytes it reads (a SYN, a UDP datagram).
    #[test]
    fn test_plain_ipv4_agrees_with_the_general_path() {
        let (mut fast, mut checked) = (0, 0);
        mutations(0x9e37_79b9_7f4a_7c15, |f, vlan| {
            checked += 1;
            if let Some(t) = Transport::plain_ipv4(f, vlan) {
                fast += 1;
                assert_eq!(Ok(t), Transport::any(Link::Ethernet, f, vlan), "{f:02x?}");
            }
        });
        assert!(
            fast > checked / 4,
            "{fast} of {checked} read at fixed offsets"
        );
    }

    /// A frame's hash from its transport layer is the one read from its bytes, on every
    /// cut and on random changes to its headers (fragments, other protocols, IPv4 options,
    /// other EtherTypes), with and without the ring's VLAN.
    #[test]
    fn test_frame_hash_is_the_frames() {
        let mut read = 0;
        mutations(0x2545_f491_4f6c_dd1d, |f, vlan| {
            if let Ok(t) = Transport::parse(Link::Ethernet, f, vlan) {
                read += 1;
                assert_eq!(
                    t.frame_hash(),
                    Link::Ethernet.frame_hash(f, vlan),
                    "{f:02x?}"
                );
            }
        });
        assert!(read > 10_000, "{read} read");
    }

    #[test]
    fn test_parse_tcp_syn() {
        let t = Link::Ethernet.transport(SYN, None).unwrap();
        assert_eq!(t.key, crate::flow_key(SYN, None).unwrap());
        assert_eq!((t.key.sport, t.key.dport), (33779, 53));
        let tcp = t.tcp.unwrap();
        assert_eq!(tcp.flags, TCP_SYN);
        assert_eq!(tcp.seq, 603899916); // tshark's tcp.seq_raw
        assert_eq!(t.fragment, Fragment::No);
        assert!(t.payload.is_empty() && !t.truncated());
    }

    #[test]
    fn test_padding_is_not_payload() {
        // A 3-byte UDP payload in a frame padded to 60 bytes.
        let f = udp_frame(20 + 8 + 3, b"abc", 60 - (ETH_HEADER_LEN + 31));
        assert_eq!(f.len(), 60);
        let t = Link::Ethernet.transport(&f, None).unwrap();
        assert_eq!(t.payload, b"abc");
        assert_eq!(t.payload_len, 3);
    }

    #[test]
    fn test_truncated() {
        let f = udp_frame(20 + 8 + 10, b"0123456789", 0);
        let t = Link::Ethernet.transport(&f[..f.len() - 4], None).unwrap();
        assert_eq!(t.payload, b"012345");
        assert_eq!(t.payload_len, 10);
        assert!(t.truncated());
        // Cut inside the UDP header: the key is an error, as for flow_key.
        for cut in 0..f.len() {
            let a = Link::Ethernet.transport(&f[..cut], None).map(|t| t.key);
            assert_eq!(a, crate::flow_key(&f[..cut], None), "{cut}");
        }
        // A TCP header cut at 19 bytes: no flags, no payload.
        let t = Link::Ethernet
            .transport(&SYN[..14 + 20 + 19], None)
            .unwrap();
        assert_eq!((t.tcp, t.payload.len()), (None, 0));
    }

    #[test]
    fn test_fragments() {
        let mut f = udp_frame(20 + 8 + 10, b"0123456789", 0);
        // First fragment: the UDP header is read, the key has no ports (as flow_key).
        f[14 + 6] = 0x20;
        let t = Link::Ethernet.transport(&f, None).unwrap();
        assert_eq!(
            (t.fragment, t.key.sport, t.payload),
            (Fragment::First, 0, &b"0123456789"[..])
        );
        // A later fragment: all of its data is payload, no transport header.
        f[14 + 6] = 0x00;
        f[14 + 7] = 0x10;
        let t = Link::Ethernet.transport(&f, None).unwrap();
        assert_eq!(t.fragment, Fragment::Later);
        assert_eq!(t.payload.len(), 18);
    }

    #[test]
    fn test_parse_icmp() {
        let mut f = udp_frame(20 + 8, b"", 0);
        f[14 + 9] = IPPROTO_ICMP;
        f[34] = 8;
        f[35] = 0;
        let t = Link::Ethernet.transport(&f, None).unwrap();
        assert_eq!(t.icmp, Some((8, 0)));
        assert_eq!(t.payload.len(), 4);
    }
}
