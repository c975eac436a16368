//! The link layer: where each link type keeps its network header, and what `-e` prints of
//! it (tcpdump's `print-ether.c`, `print-sll.c`, `print-raw.c`, `print-null.c`).

use std::fmt::Write;

use super::l2::{default_dump, ethertype_name, is_vlan, mac, tci_text, MAX_ETHERNET_LENGTH_VAL};
use super::{cooked, ethertype, ip, llc, u16_at, Printer, Step};
use corecap_wire::link::{
    LINKTYPE_ETHERNET, LINKTYPE_IPV4, LINKTYPE_IPV6, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2,
    LINKTYPE_LOOP, LINKTYPE_NULL, LINKTYPE_RAW,
};

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
    if !ethertype::network(p, t, payload, length)? {
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
