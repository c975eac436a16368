//! What the network layer's printers share, and the transport printers need of the IP
//! header: protocol numbers and names, the header's addresses as tcpdump writes them, and
//! the Internet checksum. Nothing here prints a packet.

use std::fmt::Write;

pub(super) const PROTO_ICMP: u8 = 1;
pub(super) const PROTO_TCP: u8 = 6;
pub(super) const PROTO_UDP: u8 = 17;
pub(super) const PROTO_ICMPV6: u8 = 58;

/// tcpdump's names of IP protocols (`ipproto_values`), as `-v` prints them.
pub(super) fn proto_name(p: u8) -> &'static str {
    match p {
        0 => "Options",
        1 => "ICMP",
        2 => "IGMP",
        4 => "IPIP",
        6 => "TCP",
        8 => "EGP",
        9 => "IGRP",
        17 => "UDP",
        33 => "DCCP",
        41 => "IPv6",
        43 => "Routing",
        44 => "Fragment",
        46 => "RSVP",
        47 => "GRE",
        50 => "ESP",
        51 => "AH",
        55 => "Mobile IP",
        58 => "ICMPv6",
        62 => "Mobile IP (old)",
        88 => "EIGRP",
        89 => "OSPF",
        103 => "PIM",
        108 => "Compressed IP",
        112 => "VRRP",
        113 => "PGM",
        132 => "SCTP",
        135 => "Mobility",
        143 => "Ethernet",
        _ => "unknown",
    }
}

/// The IP header a transport header came in.
#[derive(Clone, Copy, Debug)]
pub(super) struct Net<'a> {
    pub(super) v6: bool,
    pub(super) src: &'a [u8],
    pub(super) dst: &'a [u8],
    /// The header's own protocol (IPv6: its first next header). tcpdump prints the
    /// addresses with the ports only when it is the transport's.
    pub(super) proto: u8,
    /// More fragments follow (IPv4 MF, or an IPv6 fragment header): no checksum is checked.
    pub(super) fragmented: bool,
    /// The destination the pseudo-header names: IPv6's final one, the last address of a
    /// routing header.
    pub(super) sum_dst: &'a [u8],
}

impl Net<'_> {
    /// The source address as tcpdump prints it.
    pub(super) fn src_text(&self) -> String {
        addr_text(self.v6, self.src)
    }

    /// The destination address.
    pub(super) fn dst_text(&self) -> String {
        addr_text(self.v6, self.dst)
    }

    /// The sum of the pseudo-header of `len` bytes of `proto` (RFC 793, RFC 8200 8.1).
    pub(super) fn pseudo_sum(&self, proto: u8, len: u32) -> u64 {
        let mut acc = words(self.src, 0) + words(self.sum_dst, 0) + u64::from(proto);
        acc += u64::from(len >> 16) + u64::from(len & 0xffff);
        acc
    }
}

/// An IPv4 or IPv6 address (16 bytes) as tcpdump writes it.
pub(super) fn addr_text(v6: bool, b: &[u8]) -> String {
    if v6 {
        addr6_text(b)
    } else {
        match b {
            [a, b, c, d] => format!("{a}.{b}.{c}.{d}"),
            _ => "?".into(),
        }
    }
}

/// `acc` plus the big-endian 16-bit words of `b` (an odd last byte padded with zero).
pub(super) fn words(b: &[u8], mut acc: u64) -> u64 {
    let mut pairs = b.chunks_exact(2);
    for w in &mut pairs {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = pairs.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// The Internet checksum of a sum: 0 when the data (with its checksum field) is right.
pub(super) fn cksum(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// What the checksum field should have held (tcpdump's `in_cksum_shouldbe`, RFC 1624).
pub(super) fn should_be(field: u16, computed: u16) -> u16 {
    let mut s = u32::from(field) + u32::from(computed);
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    s as u16
}

/// An IPv6 address as tcpdump writes it (`addrtostr6`): the longest run of two or more
/// zero words as `::`, and the last four bytes dotted after `::` or `::ffff:`.
fn addr6_text(b: &[u8]) -> String {
    let Ok(b) = <[u8; 16]>::try_from(b) else {
        return "?".into();
    };
    let w: Vec<u16> = b
        .chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect();
    // (start, length) of the first longest run of zero words.
    let mut best = (0, 0);
    let mut i = 0;
    while i < 8 {
        let run = w[i..].iter().take_while(|&&x| x == 0).count();
        if run > best.1 {
            best = (i, run);
        }
        i += run.max(1);
    }
    if best.1 < 2 {
        best = (9, 0);
    }
    let mut s = String::with_capacity(40);
    for (i, word) in w.iter().enumerate() {
        if i >= best.0 && i < best.0 + best.1 {
            if i == best.0 {
                s.push(':');
            }
            continue;
        }
        if i != 0 {
            s.push(':');
        }
        if i == 6 && best.0 == 0 && (best.1 == 6 || (best.1 == 5 && w[5] == 0xffff)) {
            let _ = write!(s, "{}.{}.{}.{}", b[12], b[13], b[14], b[15]);
            return s;
        }
        let _ = write!(s, "{word:x}");
    }
    if best.0 + best.1 == 8 {
        s.push(':');
    }
    s
}
