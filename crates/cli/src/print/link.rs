//! The link layer: where each link type keeps its network header, and what `-e` prints of
//! it (tcpdump's `print-ether.c`, `print-sll.c`, `print-raw.c`, `print-null.c`).

use std::fmt::Write;

use super::{arp, cooked, hex, ip, llc, u16_at, Printer, Step};
use corecap_wire::link::{
    LINKTYPE_ETHERNET, LINKTYPE_IPV4, LINKTYPE_IPV6, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2,
    LINKTYPE_LOOP, LINKTYPE_NULL, LINKTYPE_RAW,
};

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const ETHERTYPE_REVARP: u16 = 0x8035;
const ETHERTYPE_IPV6: u16 = 0x86dd;
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
fn is_vlan(t: u16) -> bool {
    matches!(t, 0x8100 | 0x9100 | 0x9200 | 0x88a8)
}

/// A MAC address as tcpdump prints it: `02:00:00:00:00:01`.
pub(super) fn mac(b: &[u8]) -> String {
    let parts: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    parts.join(":")
}

/// Prints the packet from its link header on. Each framing sets `p.ll_len` to the length
/// of its header before it hands the rest on.
pub(super) fn print(p: &mut Printer, linktype: u16, data: &[u8], wire: u32) -> Step {
    match linktype {
        LINKTYPE_ETHERNET => ether(p, data, wire),
        LINKTYPE_LINUX_SLL => cooked::sll(p, data, wire),
        LINKTYPE_LINUX_SLL2 => cooked::sll2(p, data, wire),
        LINKTYPE_RAW | 12 | 14 | LINKTYPE_IPV4 | LINKTYPE_IPV6 => {
            if p.opts.link {
                p.line.push_str("ip: ");
            }
            ip::any(p, data, wire)
        }
        LINKTYPE_NULL | LINKTYPE_LOOP => null(p, data, wire, linktype == LINKTYPE_LOOP),
        other => {
            let _ = write!(p.line, "link-type {other}, length {wire}: ");
            default_dump(p, data);
            Ok(())
        }
    }
}

/// The bytes of a protocol that is not decoded, unless -x, -X or -q.
pub(super) fn default_dump(p: &mut Printer, b: &[u8]) {
    if p.opts.default_dump() {
        hex::hex_ascii(&mut p.line, b);
    }
}

/// `-e`'s Ethernet type: `ethertype IPv4 (0x0800)`, with -q `IPv4`.
fn type_text(p: &mut Printer, t: u16) {
    let _ = match (p.opts.quick, ethertype_name(t)) {
        (false, name) => write!(
            p.line,
            "ethertype {} (0x{t:04x})",
            name.unwrap_or("Unknown")
        ),
        (true, Some(name)) => write!(p.line, "{name}"),
        (true, None) => write!(p.line, "Unknown Ethertype (0x{t:04x})"),
    };
}

/// The network layer of an Ethernet type; false when it is not one decoded here.
pub(super) fn ethertype(p: &mut Printer, t: u16, data: &[u8], length: u32) -> Step<bool> {
    match t {
        ETHERTYPE_IPV4 => ip::v4(p, data, length)?,
        ETHERTYPE_IPV6 => ip::v6(p, data, length)?,
        ETHERTYPE_ARP | ETHERTYPE_REVARP => arp::print(p, data, length)?,
        _ => return Ok(false),
    }
    Ok(true)
}

/// Ethernet II, with any number of VLAN tags (`ether_common_print`).
fn ether(p: &mut Printer, data: &[u8], wire: u32) -> Step {
    if data.len() < 14 {
        p.line.push_str(" [|ether]");
        p.ll_len = data.len();
        return Ok(());
    }
    let e = p.opts.link;
    let addresses = format!("{} > {}, ", mac(&data[6..12]), mac(&data[0..6]));
    if e {
        p.line.push_str(&addresses);
    }
    let mut t = u16_at(data, 12, "ether")?;
    let mut at = 14;
    let mut length = wire.saturating_sub(14);
    let mut printed_length = false;
    while is_vlan(t) {
        if data.len() < at + 4 || length < 4 {
            p.line.push_str(" [|vlan]");
            p.ll_len = data.len().min(at + length as usize);
            return Ok(());
        }
        if e {
            type_text(p, t);
            length_once(p, &mut printed_length, wire);
            let tci = u16_at(data, at, "vlan")?;
            tci_text(p, tci);
            p.line.push_str(", ");
        }
        t = u16_at(data, at + 2, "vlan")?;
        at += 4;
        length -= 4;
    }
    let payload = &data[at..];
    p.ll_len = at;
    if t <= MAX_ETHERNET_LENGTH_VAL {
        if e {
            p.line.push_str("802.3");
            if !printed_length {
                let _ = write!(p.line, ", length {}: ", t.min(length as u16));
            }
        }
        let length = u32::from(t).min(length);
        let payload = &payload[..payload.len().min(length as usize)];
        llc::print(p, payload, length, Some((&data[6..12], &data[0..6])));
        return Ok(());
    }
    if e {
        type_text(p, t);
        length_once(p, &mut printed_length, wire);
    }
    if !ethertype(p, t, payload, length)? {
        if !e {
            p.line.push_str(&addresses);
            type_text(p, t);
            let _ = write!(p.line, ", length {wire}: ");
        }
        default_dump(p, payload);
    }
    Ok(())
}

/// `, length N: ` the first time, `, ` after.
fn length_once(p: &mut Printer, printed: &mut bool, wire: u32) {
    if *printed {
        p.line.push_str(", ");
    } else {
        let _ = write!(p.line, ", length {wire}: ");
        *printed = true;
    }
}

/// An 802.1Q tag: `vlan 100, p 3` (and `, DEI`).
pub(super) fn tci_text(p: &mut Printer, tci: u16) {
    let dei = if tci & 0x1000 != 0 { ", DEI" } else { "" };
    let _ = write!(p.line, "vlan {}, p {}{dei}", tci & 0xfff, tci >> 13);
}

/// BSD loopback: a 4-byte address family, in the writer's byte order (NULL) or network
/// order (LOOP).
fn null(p: &mut Printer, data: &[u8], wire: u32, network_order: bool) -> Step {
    let b = super::bytes_at(data, 0, 4, "null")?;
    let mut family = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    if network_order || family & 0xffff_0000 != 0 {
        family = family.swap_bytes();
    }
    let name = match family {
        2 => Some("IPv4"),
        24 | 28 | 30 => Some("IPv6"),
        7 => Some("ISO"),
        16 => Some("Appletalk"),
        23 => Some("IPX"),
        6 => Some("NS"),
        _ => None,
    };
    let head = |p: &mut Printer| {
        let _ = match (p.opts.quick, name) {
            (false, n) => write!(p.line, "AF {} ({family})", n.unwrap_or("Unknown")),
            (true, Some(n)) => write!(p.line, "{n}"),
            (true, None) => write!(p.line, "Unknown AF {family}"),
        };
        let _ = write!(p.line, ", length {wire}: ");
    };
    if p.opts.link {
        head(p);
    }
    let (payload, length) = (&data[4..], wire.saturating_sub(4));
    p.ll_len = 4;
    match family {
        2 => ip::v4(p, payload, length)?,
        24 | 28 | 30 => ip::v6(p, payload, length)?,
        _ => {
            if !p.opts.link {
                head(p);
            }
            default_dump(p, payload);
        }
    }
    Ok(())
}
