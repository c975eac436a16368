//! What the link-layer printers share: Ethernet type names and numbers, MAC addresses,
//! 802.1Q tags, and the bytes of a protocol that is not decoded. Nothing here hands a
//! packet on.

use std::fmt::Write;

use super::{hex, Printer};

pub(super) const ETHERTYPE_IPV4: u16 = 0x0800;
pub(super) const ETHERTYPE_ARP: u16 = 0x0806;
pub(super) const ETHERTYPE_REVARP: u16 = 0x8035;
pub(super) const ETHERTYPE_IPV6: u16 = 0x86dd;
/// The largest value of the type field that is an 802.3 length instead.
pub(super) const MAX_ETHERNET_LENGTH_VAL: u16 = 1500;

/// tcpdump's names of Ethernet types (`ethertype_values`).
const ETHERTYPE_NAMES: &[(u16, &str)] = &[
    (0x0800, "IPv4"),
    (0x8847, "MPLS unicast"),
    (0x8848, "MPLS multicast"),
    (0x86dd, "IPv6"),
    (0x8100, "802.1Q"),
    (0x9100, "802.1Q-9100"),
    (0x88a8, "802.1Q-QinQ"),
    (0x9200, "802.1Q-9200"),
    (0x88e5, "802.1AE MACsec"),
    (0x0200, "PUP"),
    (0x0806, "ARP"),
    (0x8035, "Reverse ARP"),
    (0x0600, "NS"),
    (0x0500, "Sprite"),
    (0x1000, "Trail"),
    (0x6001, "MOP DL"),
    (0x6002, "MOP RC"),
    (0x6003, "DN"),
    (0x6004, "LAT"),
    (0x6007, "SCA"),
    (0x6558, "TEB"),
    (0x8038, "Lanbridge"),
    (0x803c, "DEC DNS"),
    (0x803e, "DEC DTS"),
    (0x805b, "VEXP"),
    (0x805c, "VPROD"),
    (0x809b, "Appletalk"),
    (0x80f3, "Appletalk ARP"),
    (0x8137, "IPX"),
    (0x880b, "PPP"),
    (0x8808, "MPCP"),
    (0x8809, "Slow Protocols"),
    (0x8863, "PPPoE D"),
    (0x8864, "PPPoE S"),
    (0x888e, "EAPOL"),
    (0x8899, "Realtek protocols"),
    (0x886f, "MS NLB heartbeat"),
    (0x8870, "Jumbo"),
    (0x894f, "NSH"),
    (0x9000, "Loopback"),
    (0xfefe, "OSI"),
    (0xabcd, "CFM (old)"),
    (0x8902, "CFM"),
    (0x893a, "IEEE1905.1"),
    (0x88cc, "LLDP"),
    (0x88ca, "TIPC"),
    (0x0707, "GeoNet (old)"),
    (0x8947, "GeoNet"),
    (0x1111, "CALM FAST"),
    (0x88a2, "AoE"),
    (0x88f7, "PTP"),
    (0xd28b, "Arista Vendor Specific Protocol"),
];

/// tcpdump's name of an Ethernet type, if it has one.
pub(super) fn ethertype_name(t: u16) -> Option<&'static str> {
    ETHERTYPE_NAMES.iter().find(|e| e.0 == t).map(|e| e.1)
}

/// Tag types of 802.1Q and its variants, followed by another type field.
pub(super) fn is_vlan(t: u16) -> bool {
    matches!(t, 0x8100 | 0x9100 | 0x9200 | 0x88a8)
}

/// A MAC address as tcpdump prints it: `02:00:00:00:00:01`.
pub(super) fn mac(b: &[u8]) -> String {
    let parts: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    parts.join(":")
}

/// The bytes of a protocol that is not decoded, unless -x, -X or -q.
pub(super) fn default_dump(p: &mut Printer, b: &[u8]) {
    if p.opts.default_dump() {
        hex::hex_ascii(&mut p.line, b);
    }
}

/// An 802.1Q tag: `vlan 100, p 3` (and `, DEI`).
pub(super) fn tci_text(p: &mut Printer, tci: u16) {
    let dei = if tci & 0x1000 != 0 { ", DEI" } else { "" };
    let _ = write!(p.line, "vlan {}, p {}{dei}", tci & 0xfff, tci >> 13);
}
