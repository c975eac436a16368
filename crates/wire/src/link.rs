//! Link-layer framings: where a frame of each link type keeps its network header.
//!
//! A live AF_PACKET socket on our interfaces hands over Ethernet frames, but a file read
//! with `-r` may hold any link type. [`Link::of`] reads a file's LINKTYPE_ value once per
//! source; the per-packet calls ([`Link::flow_key`], [`Link::frame_hash`]) then match on a
//! value that never changes for that source, so the branch is always predicted and nothing
//! is allocated or formatted per packet.
//!
//! | link type | header | network layer |
//! |---|---|---|
//! | Ethernet (1) | 14 bytes, then 802.1Q/802.1ad tags | by Ethernet type |
//! | Linux SLL (113) | 16 bytes, protocol at 14 | by Ethernet type |
//! | Linux SLL2 (276) | 20 bytes, protocol at 0 | by Ethernet type |
//! | raw IP (101, and DLT_RAW 12 and 14) | none | by version nibble |
//! | IPv4 (228), IPv6 (229) | none | IPv4, IPv6 |
//! | BSD NULL (0) | 4-byte AF_ in the writer's byte order (either is read) | AF_INET 2; AF_INET6 24, 28, 30 |
//! | BSD LOOP (108) | 4-byte AF_ in network byte order | the same values |
//! | NFLOG (239) | 4 bytes, then TLVs (length, type: little-endian; padded to 4) | the payload TLV (type 9), by version nibble |
//!
//! Every other link type, and any frame these do not lead to IPv4 or IPv6, is
//! [`ParseError::NotIp`]: a counted outcome, never a panic.

use crate::flow::{self, FlowKey, ParseError, ETHERTYPE_IPV4, ETHERTYPE_IPV6, L2};
use crate::hash;

/// LINKTYPE_NULL: BSD loopback, the AF_ value in the writer's byte order.
pub const LINKTYPE_NULL: u16 = 0;
/// LINKTYPE_ETHERNET.
pub const LINKTYPE_ETHERNET: u16 = 1;
/// LINKTYPE_RAW: raw IPv4 or IPv6.
pub const LINKTYPE_RAW: u16 = 101;
/// LINKTYPE_LOOP: OpenBSD loopback, the AF_ value in network byte order.
pub const LINKTYPE_LOOP: u16 = 108;
/// LINKTYPE_LINUX_SLL: Linux cooked capture v1.
pub const LINKTYPE_LINUX_SLL: u16 = 113;
/// LINKTYPE_IPV4: raw IPv4.
pub const LINKTYPE_IPV4: u16 = 228;
/// LINKTYPE_IPV6: raw IPv6.
pub const LINKTYPE_IPV6: u16 = 229;
/// LINKTYPE_NFLOG: Linux netfilter log messages.
pub const LINKTYPE_NFLOG: u16 = 239;
/// LINKTYPE_LINUX_SLL2: Linux cooked capture v2.
pub const LINKTYPE_LINUX_SLL2: u16 = 276;

/// Length of a Linux cooked (v1) header.
const SLL_HEADER_LEN: usize = 16;
/// Length of a Linux cooked v2 header.
const SLL2_HEADER_LEN: usize = 20;
/// Length of the BSD loopback header (the AF_ value).
const NULL_HEADER_LEN: usize = 4;
/// Length of the NFLOG header before its TLVs (family, version, resource id).
const NFLOG_HEADER_LEN: usize = 4;
/// NFLOG TLV type of the packet payload (`NFULA_PAYLOAD`).
const NFULA_PAYLOAD: u16 = 9;

/// AF_INET, the same on every system.
const AF_INET: u32 = 2;
/// AF_INET6 on NetBSD/OpenBSD/BSD/OS, FreeBSD and Darwin (libpcap's `BSD_AFNUM_INET6_*`).
const AF_INET6_BSD: [u32; 3] = [24, 28, 30];

/// How a link type frames its packets; see the module doc.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Link {
    /// Ethernet II, with VLAN tags.
    #[default]
    Ethernet,
    /// Linux cooked capture v1.
    Sll,
    /// Linux cooked capture v2.
    Sll2,
    /// Raw IP: IPv4 or IPv6 by the version nibble.
    Raw,
    /// Raw IPv4 only.
    Ipv4,
    /// Raw IPv6 only.
    Ipv6,
    /// BSD NULL: the AF_ value in either byte order.
    Null,
    /// BSD LOOP: the AF_ value in network byte order.
    Loop,
    /// Linux NFLOG.
    Nflog,
    /// Any other link type: every frame is non-IP.
    Other,
}

impl Link {
    /// Every variant, in [`Link::index`] order.
    pub const ALL: [Link; 10] = [
        Link::Ethernet,
        Link::Sll,
        Link::Sll2,
        Link::Raw,
        Link::Ipv4,
        Link::Ipv6,
        Link::Null,
        Link::Loop,
        Link::Nflog,
        Link::Other,
    ];

    /// The framing of a LINKTYPE_ value (as a file records it; the DLT_RAW values 12 and 14
    /// that some writers put there read as raw IP too).
    pub const fn of(linktype: u16) -> Link {
        match linktype {
            LINKTYPE_ETHERNET => Link::Ethernet,
            LINKTYPE_LINUX_SLL => Link::Sll,
            LINKTYPE_LINUX_SLL2 => Link::Sll2,
            LINKTYPE_RAW | 12 | 14 => Link::Raw,
            LINKTYPE_IPV4 => Link::Ipv4,
            LINKTYPE_IPV6 => Link::Ipv6,
            LINKTYPE_NULL => Link::Null,
            LINKTYPE_LOOP => Link::Loop,
            LINKTYPE_NFLOG => Link::Nflog,
            _ => Link::Other,
        }
    }

    /// Dense index of this framing, `0..Link::ALL.len()` (it fits in 4 bits).
    pub const fn index(self) -> u8 {
        match self {
            Link::Ethernet => 0,
            Link::Sll => 1,
            Link::Sll2 => 2,
            Link::Raw => 3,
            Link::Ipv4 => 4,
            Link::Ipv6 => 5,
            Link::Null => 6,
            Link::Loop => 7,
            Link::Nflog => 8,
            Link::Other => 9,
        }
    }

    /// The framing of an index from [`Link::index`]; `Other` for any other number.
    pub const fn from_index(i: u8) -> Link {
        if (i as usize) < Link::ALL.len() {
            Link::ALL[i as usize]
        } else {
            Link::Other
        }
    }

    /// Where the network header of `frame` starts and what it is, as an Ethernet type
    /// (0x0800 or 0x86dd for the link types that carry only IP), with the first in-band
    /// VLAN id. [`ParseError::Truncated`] when the frame ends inside the link header,
    /// [`ParseError::NotIp`] when the link header names no IP (or the link type is
    /// `Other`).
    #[inline]
    pub fn network(self, frame: &[u8]) -> Result<L2, ParseError> {
        match self {
            Link::Ethernet => flow::parse_l2(frame),
            Link::Sll => cooked(frame, 14, SLL_HEADER_LEN),
            Link::Sll2 => cooked(frame, 0, SLL2_HEADER_LEN),
            Link::Raw => by_version(frame, 0),
            Link::Ipv4 => Ok(untagged(ETHERTYPE_IPV4, 0)),
            Link::Ipv6 => Ok(untagged(ETHERTYPE_IPV6, 0)),
            Link::Null | Link::Loop => {
                let b: [u8; 4] = frame
                    .get(..NULL_HEADER_LEN)
                    .and_then(|b| b.try_into().ok())
                    .ok_or(ParseError::Truncated)?;
                let be = u32::from_be_bytes(b);
                let af = if self == Link::Null && be > 0xffff {
                    // Written little-endian (the AF_ values are small).
                    u32::from_le_bytes(b)
                } else {
                    be
                };
                if af == AF_INET {
                    Ok(untagged(ETHERTYPE_IPV4, NULL_HEADER_LEN))
                } else if AF_INET6_BSD.contains(&af) {
                    Ok(untagged(ETHERTYPE_IPV6, NULL_HEADER_LEN))
                } else {
                    Err(ParseError::NotIp)
                }
            }
            Link::Nflog => by_version(frame, nflog_payload(frame)?),
            Link::Other => Err(ParseError::NotIp),
        }
    }

    /// The flow key of a frame of this link type (see [`flow::flow_key`] for Ethernet and
    /// for what `ring_vlan` means). Never allocates.
    #[inline]
    pub fn flow_key(self, frame: &[u8], ring_vlan: Option<u16>) -> Result<FlowKey, ParseError> {
        if self == Link::Ethernet {
            return flow::flow_key(frame, ring_vlan);
        }
        let l2 = self.network(frame)?;
        flow::l3_key(frame, l2, ring_vlan)
    }

    /// Symmetric hash of a frame of this link type for steering: [`hash::frame_hash`] for
    /// Ethernet; for the others the [`hash::flow_hash`] of its flow key, 0 for a frame
    /// without one (non-IP frames all go one way).
    #[inline]
    pub fn frame_hash(self, frame: &[u8], ring_vlan: Option<u16>) -> u32 {
        if self == Link::Ethernet {
            return hash::frame_hash(frame, ring_vlan);
        }
        match self.flow_key(frame, ring_vlan) {
            Ok(k) => hash::flow_hash(&k),
            Err(_) => 0,
        }
    }
}

fn untagged(ethertype: u16, l3_offset: usize) -> L2 {
    L2 {
        ethertype,
        l3_offset,
        vlan: 0,
    }
}

/// A Linux cooked header: the protocol (an Ethernet type) at `proto_at`, the network
/// header at `len`; an 802.1Q protocol is walked like an Ethernet tag.
fn cooked(frame: &[u8], proto_at: usize, len: usize) -> Result<L2, ParseError> {
    let b = frame
        .get(proto_at..proto_at + 2)
        .ok_or(ParseError::Truncated)?;
    if frame.len() < len {
        return Err(ParseError::Truncated);
    }
    flow::walk_tags(frame, u16::from_be_bytes([b[0], b[1]]), len)
}

/// Raw IP at `at`: IPv4 or IPv6 by the version nibble.
fn by_version(frame: &[u8], at: usize) -> Result<L2, ParseError> {
    match frame.get(at).map(|b| b >> 4) {
        Some(4) => Ok(untagged(ETHERTYPE_IPV4, at)),
        Some(6) => Ok(untagged(ETHERTYPE_IPV6, at)),
        Some(_) => Err(ParseError::NotIp),
        None => Err(ParseError::Truncated),
    }
}

/// Offset of the payload of an NFLOG message: the value of its first `NFULA_PAYLOAD` TLV.
/// Each TLV advances at least 4 bytes, so the walk ends with the frame.
fn nflog_payload(frame: &[u8]) -> Result<usize, ParseError> {
    let mut at = NFLOG_HEADER_LEN;
    if frame.len() < at {
        return Err(ParseError::Truncated);
    }
    loop {
        let Some(h) = frame.get(at..at + 4) else {
            // No payload TLV: a message without a packet.
            return Err(if at < frame.len() {
                ParseError::Truncated
            } else {
                ParseError::NotIp
            });
        };
        let len = usize::from(u16::from_le_bytes([h[0], h[1]]));
        // The top bits of the type are netlink flags (NLA_F_NESTED, NLA_F_NET_BYTEORDER).
        let ty = u16::from_le_bytes([h[2], h[3]]) & 0x3fff;
        if len < 4 {
            return Err(ParseError::BadHeader);
        }
        if ty == NFULA_PAYLOAD {
            return Ok(at + 4);
        }
        at += len.div_ceil(4) * 4;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{IpFamily, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP};
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    // Frames of real captures: the first bytes of one packet of each link type, from the
    // files in `crates/cli/tests/data/real/` (see its README for where each came from). The
    // expected keys are what tshark decodes from the same packets.
    /// Frame 12 of `various_gre.pcap` (tcpdump's tests/), first 46 bytes.
    const ETHERNET_VLAN_GRE: &[u8] = &[
        0xaa, 0xbb, 0xcc, 0x00, 0x02, 0x00, 0xaa, 0xbb, 0xcc, 0x00, 0x01, 0x00, 0x81, 0x00, 0x04,
        0xbd, 0x08, 0x00, 0x45, 0xc0, 0x00, 0x1c, 0x00, 0xa3, 0x00, 0x00, 0xfe, 0x2f, 0x25, 0xeb,
        0x0a, 0xac, 0x40, 0x06, 0x0a, 0xac, 0x40, 0x07, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x28,
    ];
    /// Frame 1 of `forces2.pcap` (tcpdump's tests/), first 84 bytes.
    const SLL_SCTP: &[u8] = &[
        0x00, 0x04, 0x00, 0x01, 0x00, 0x06, 0x00, 0x0c, 0x29, 0xb2, 0xa1, 0x17, 0x00, 0x00, 0x08,
        0x00, 0x45, 0x02, 0x00, 0x44, 0x00, 0x00, 0x40, 0x00, 0x40, 0x84, 0xb5, 0xc6, 0xc0, 0xa8,
        0x01, 0x8e, 0xc0, 0xa8, 0x01, 0x8f, 0x84, 0xc1, 0x1a, 0x30, 0x00, 0x00, 0x00, 0x00, 0x25,
        0x9e, 0xf4, 0x3f, 0x01, 0x00, 0x00, 0x24, 0x94, 0xd0, 0x21, 0x98, 0x00, 0x00, 0xe0, 0x00,
        0x00, 0x01, 0x00, 0x01, 0xe5, 0x5c, 0xe9, 0x46, 0x00, 0x0c, 0x00, 0x06, 0x00, 0x05, 0x00,
        0x00, 0x80, 0x00, 0x00, 0x04, 0xc0, 0x00, 0x00, 0x04,
    ];
    /// Frame 1 of `simple_http_sll2.pcap` (tcpdump's tests/), first 80 bytes.
    const SLL2_TCP: &[u8] = &[
        0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x04, 0x00, 0x06, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x45, 0x00, 0x00, 0x3c, 0x34, 0xff, 0x40, 0x00, 0x40, 0x06,
        0x07, 0xbb, 0x7f, 0x00, 0x00, 0x01, 0x7f, 0x00, 0x00, 0x01, 0x92, 0xee, 0x1f, 0x40, 0x08,
        0x52, 0xae, 0x12, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xff, 0xd7, 0xfe, 0x30, 0x00, 0x00,
        0x02, 0x04, 0xff, 0xd7, 0x04, 0x02, 0x08, 0x0a, 0x1e, 0x93, 0xc7, 0xf7, 0x00, 0x00, 0x00,
        0x00, 0x01, 0x03, 0x03, 0x07,
    ];
    /// Frame 1 of `babel_rtt.pcap` (tcpdump's tests/), first 66 bytes.
    const RAW_IPV6_UDP: &[u8] = &[
        0x6c, 0x00, 0x00, 0x00, 0x00, 0x1a, 0x11, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x85, 0x5d, 0xa9, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x06, 0x1a, 0x28, 0x1a, 0x28, 0x00,
        0x1a, 0xea, 0x2b, 0x2a, 0x02, 0x00, 0x0e, 0x04, 0x0c, 0x00, 0x00, 0xe5, 0xb5, 0x01, 0x90,
        0x03, 0x04, 0x84, 0x7f, 0x99, 0x4b,
    ];
    /// Frame 1 of `mptcp-tcprst.pcap` (tcpdump's tests/), first 44 bytes.
    const RAW_IPV4_TCP: &[u8] = &[
        0x45, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00, 0xff, 0x06, 0xed, 0x05, 0xc0, 0x00, 0x02,
        0x01, 0xc0, 0xa8, 0x4c, 0x1c, 0xd9, 0xbb, 0x1f, 0x90, 0x00, 0x00, 0x00, 0x01, 0x81, 0xbd,
        0xc2, 0x86, 0x60, 0x14, 0x01, 0x00, 0xf4, 0x70, 0x00, 0x00, 0x1e, 0x04, 0x80, 0x00,
    ];
    /// Frame 1 of `LINKTYPE_IPV4.pcap` (tcpdump's tests/), first 57 bytes.
    const IPV4_UDP: &[u8] = &[
        0x45, 0x00, 0x00, 0x39, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0xa6, 0x95, 0xc0, 0xa8, 0x01,
        0x64, 0x09, 0x09, 0x09, 0x09, 0x30, 0x39, 0x00, 0x35, 0x00, 0x25, 0x19, 0x76, 0x12, 0x34,
        0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x65, 0x78, 0x61, 0x6d,
        0x70, 0x6c, 0x65, 0x03, 0x63, 0x6f, 0x6d, 0x00, 0x00, 0x01, 0x00, 0x01,
    ];
    /// Frame 1 of `ipv6_mobility_1.pcap` (tcpdump's tests/), first 48 bytes.
    const IPV6_MOBILITY: &[u8] = &[
        0x60, 0x00, 0x00, 0x00, 0x00, 0x08, 0x87, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x3b, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00,
    ];
    /// Frame 1 of `quic_vn.pcap` (tcpdump's tests/), first 64 bytes.
    const NULL_IPV6_UDP: &[u8] = &[
        0x1e, 0x00, 0x00, 0x00, 0x60, 0x06, 0x0e, 0x00, 0x04, 0xb8, 0x11, 0x40, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xe0,
        0x3e, 0x01, 0xbb, 0x04, 0xb8, 0x04, 0xcb, 0xc7, 0x1a, 0x2a, 0x3a, 0x4a, 0x08, 0x9d, 0x57,
        0x28, 0x48, 0x12, 0x87,
    ];
    /// Frame 1 of `dns-badcookie.pcap` (tcpdump's tests/), first 72 bytes.
    const NULL_IPV4_UDP: &[u8] = &[
        0x02, 0x00, 0x00, 0x00, 0x45, 0x00, 0x00, 0x44, 0x00, 0x0f, 0x00, 0x00, 0x40, 0x11, 0x00,
        0x00, 0x7f, 0x00, 0x00, 0x01, 0x7f, 0x00, 0x00, 0x01, 0xd6, 0xaa, 0x00, 0x35, 0x00, 0x30,
        0xfe, 0x43, 0xf6, 0xab, 0x01, 0x20, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
        0x00, 0x06, 0x00, 0x01, 0x00, 0x00, 0x29, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0c,
        0x00, 0x0a, 0x00, 0x08, 0x36, 0xbf, 0x11, 0x1f, 0xef, 0x2e, 0x01, 0x09,
    ];
    /// Frame 1 of `nflog.pcap` (tcpdump's tests/), first 180 bytes.
    const NFLOG_IPV4_UDP: &[u8] = &[
        0x02, 0x00, 0x00, 0x14, 0x08, 0x00, 0x01, 0x00, 0x08, 0x00, 0x01, 0x27, 0x05, 0x00, 0x0a,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x02, 0x10, 0x00,
        0x08, 0x00, 0x00, 0x06, 0xff, 0xff, 0xb8, 0xa3, 0x86, 0xb9, 0xc3, 0xd6, 0x00, 0x00, 0x06,
        0x00, 0x0f, 0x00, 0x00, 0x01, 0x00, 0x00, 0x06, 0x00, 0x11, 0x00, 0x00, 0x0e, 0x00, 0x00,
        0x12, 0x00, 0x10, 0x00, 0x08, 0x11, 0x96, 0x1c, 0x10, 0xc8, 0xb8, 0xa3, 0x86, 0xb9, 0xc3,
        0xd6, 0x08, 0x00, 0x00, 0x00, 0x14, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x52, 0x2a,
        0x1f, 0x9e, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09, 0x60, 0xfc, 0x4d, 0x00, 0x09, 0x00, 0x45,
        0x00, 0x00, 0x49, 0x00, 0x00, 0x40, 0x00, 0x37, 0x11, 0xc5, 0x14, 0x4a, 0x52, 0x2a, 0x2a,
        0x0a, 0x00, 0x00, 0x14, 0x00, 0x35, 0xa6, 0x59, 0x00, 0x35, 0x6d, 0xdf, 0x43, 0x71, 0x81,
        0x80, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x07, 0x65, 0x78, 0x61, 0x6d, 0x70,
        0x6c, 0x65, 0x03, 0x63, 0x6f, 0x6d, 0x00, 0x00, 0x01, 0x00, 0x01, 0xc0, 0x0c, 0x00, 0x01,
        0x00, 0x01, 0x00, 0x00, 0x2f, 0x96, 0x00, 0x04, 0x5d, 0xb8, 0xd8, 0x77, 0x00, 0x00, 0x00,
    ];
    /// Frame 1 of `ieee802.11_exthdr.pcap` (tcpdump's tests/), first 64 bytes.
    const RADIOTAP: &[u8] = &[
        0x00, 0x00, 0x59, 0x00, 0x6f, 0x48, 0x00, 0x80, 0xf7, 0x01, 0x77, 0x10, 0x00, 0x00, 0x00,
        0x00, 0x68, 0xd6, 0x98, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x02, 0x6c, 0x09, 0xa0, 0x00,
        0xea, 0xaa, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x6c, 0x09, 0xa0, 0x00, 0x03,
        0x1b, 0x68, 0xd6, 0x98, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x40, 0x33, 0x40,
        0x80, 0xaa, 0x00, 0x9f,
    ];

    fn v4(a: [u8; 4]) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(a))
    }

    fn v6(s: &str) -> IpAddr {
        IpAddr::V6(s.parse::<Ipv6Addr>().expect("address"))
    }

    /// (link, frame, vlan, src, dst, proto, sport, dport)
    type Case = (Link, &'static [u8], u16, IpAddr, IpAddr, u8, u16, u16);

    fn cases() -> Vec<Case> {
        vec![
            (
                Link::Ethernet,
                ETHERNET_VLAN_GRE,
                1213,
                v4([10, 172, 64, 6]),
                v4([10, 172, 64, 7]),
                47,
                0,
                0,
            ),
            (
                Link::Sll,
                SLL_SCTP,
                0,
                v4([192, 168, 1, 142]),
                v4([192, 168, 1, 143]),
                IPPROTO_SCTP,
                33985,
                6704,
            ),
            (
                Link::Sll2,
                SLL2_TCP,
                0,
                v4([127, 0, 0, 1]),
                v4([127, 0, 0, 1]),
                IPPROTO_TCP,
                37614,
                8000,
            ),
            (
                Link::Raw,
                RAW_IPV6_UDP,
                0,
                v6("fe80::5054:ff:fe85:5da9"),
                v6("ff02::1:6"),
                IPPROTO_UDP,
                6696,
                6696,
            ),
            (
                Link::Raw,
                RAW_IPV4_TCP,
                0,
                v4([192, 0, 2, 1]),
                v4([192, 168, 76, 28]),
                IPPROTO_TCP,
                55739,
                8080,
            ),
            (
                Link::Ipv4,
                IPV4_UDP,
                0,
                v4([192, 168, 1, 100]),
                v4([9, 9, 9, 9]),
                IPPROTO_UDP,
                12345,
                53,
            ),
            (
                Link::Ipv6,
                IPV6_MOBILITY,
                0,
                v6("2001:db8::1"),
                v6("2001:db8::2"),
                135,
                0,
                0,
            ),
            (
                Link::Null,
                NULL_IPV6_UDP,
                0,
                v6("::1"),
                v6("::1"),
                IPPROTO_UDP,
                57406,
                443,
            ),
            (
                Link::Null,
                NULL_IPV4_UDP,
                0,
                v4([127, 0, 0, 1]),
                v4([127, 0, 0, 1]),
                IPPROTO_UDP,
                54954,
                53,
            ),
            (
                Link::Nflog,
                NFLOG_IPV4_UDP,
                0,
                v4([74, 82, 42, 42]),
                v4([10, 0, 0, 20]),
                IPPROTO_UDP,
                53,
                42585,
            ),
        ]
    }

    #[test]
    fn test_parse_real_frames_of_each_link_type() {
        for (link, frame, vlan, src, dst, proto, sport, dport) in cases() {
            let k = link
                .flow_key(frame, None)
                .unwrap_or_else(|e| panic!("{link:?}: {e}"));
            assert_eq!(
                (k.vlan, k.src_ip(), k.dst_ip(), k.proto, k.sport, k.dport),
                (vlan, src, dst, proto, sport, dport),
                "{link:?}"
            );
            assert_eq!(k.family == IpFamily::V4, src.is_ipv4(), "{link:?}");
            // The steering hash is the key's, whatever the framing.
            assert_eq!(
                link.frame_hash(frame, None),
                hash::flow_hash(&k),
                "{link:?}"
            );
        }
    }

    /// A frame's hash from its transport layer is the one read from its bytes, for every
    /// link type, on every cut.
    #[test]
    fn test_transport_frame_hash_of_each_link_type() {
        for (link, frame, ..) in cases() {
            for cut in 0..=frame.len() {
                let f = &frame[..cut];
                if let Ok(t) = link.transport(f, Some(5)) {
                    assert_eq!(
                        t.frame_hash(),
                        link.frame_hash(f, Some(5)),
                        "{link:?} {cut}"
                    );
                }
            }
        }
    }

    #[test]
    fn test_parse_null_either_byte_order_and_loop_network_order() {
        // The same packet written by a big-endian machine: AF_INET6 (Darwin, 30) big-endian.
        let mut be = NULL_IPV6_UDP.to_vec();
        be[..4].copy_from_slice(&30u32.to_be_bytes());
        let want = Link::Null.flow_key(NULL_IPV6_UDP, None).expect("le");
        assert_eq!(Link::Null.flow_key(&be, None), Ok(want));
        // OpenBSD's LOOP is always network order: no real capture of it is in the corpus,
        // so its header is the NULL packet's in network order.
        assert_eq!(Link::Loop.flow_key(&be, None), Ok(want));
        assert_eq!(
            Link::Loop.flow_key(NULL_IPV6_UDP, None),
            Err(ParseError::NotIp)
        );
        let mut other = be.clone();
        other[..4].copy_from_slice(&7u32.to_be_bytes()); // AF_ISO
        assert_eq!(Link::Null.flow_key(&other, None), Err(ParseError::NotIp));
    }

    #[test]
    fn test_other_link_types_are_not_ip() {
        assert_eq!(Link::of(127), Link::Other);
        assert_eq!(Link::Other.flow_key(RADIOTAP, None), Err(ParseError::NotIp));
        assert_eq!(Link::Other.frame_hash(RADIOTAP, None), 0);
        // Read as Ethernet, the same radiotap frame is not IP either: no key from a wrong parse.
        assert!(Link::Ethernet.flow_key(RADIOTAP, None).is_err());
    }

    #[test]
    fn test_truncated() {
        // Every cut of every real frame is an error or a key, never a panic; cuts inside the
        // link header are Truncated.
        for (link, frame, ..) in cases() {
            for cut in 0..frame.len() {
                let _ = link.flow_key(&frame[..cut], Some(5));
                let _ = link.frame_hash(&frame[..cut], None);
            }
            assert_eq!(
                link.flow_key(&[], None),
                Err(ParseError::Truncated),
                "{link:?}"
            );
        }
        let _ = Link::Nflog.flow_key(&NFLOG_IPV4_UDP[..7], None);
    }

    #[test]
    fn test_parse_nflog_bad_tlv_length() {
        let mut f = NFLOG_IPV4_UDP.to_vec();
        f[4..6].copy_from_slice(&2u16.to_le_bytes());
        assert_eq!(Link::Nflog.flow_key(&f, None), Err(ParseError::BadHeader));
        // A message without a payload TLV carries no packet.
        assert_eq!(Link::Nflog.flow_key(&f[..4], None), Err(ParseError::NotIp));
    }

    #[test]
    fn test_index_round_trip() {
        for (i, l) in Link::ALL.iter().enumerate() {
            assert_eq!(usize::from(l.index()), i);
            assert_eq!(Link::from_index(l.index()), *l);
        }
        assert_eq!(Link::from_index(200), Link::Other);
        for lt in [0u16, 1, 101, 108, 113, 228, 229, 239, 276, 12, 14] {
            assert_ne!(Link::of(lt), Link::Other, "{lt}");
        }
    }
}
