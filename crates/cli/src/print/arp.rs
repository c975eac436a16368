//! ARP and RARP (tcpdump's `print-arp.c`): `ARP, Request who-has 10.0.0.2 tell 10.0.0.1,
//! length 28`.

use std::fmt::Write;

use super::l2::{ethertype_name, mac};
use super::{bytes_at, u16_at, u8_at, Printer, Step};

/// Hardware type names (`arphrd_values`).
fn hardware(h: u16) -> Option<&'static str> {
    Some(match h {
        1 => "Ethernet",
        6 => "TokenRing",
        7 => "ArcNet",
        15 => "FrameRelay",
        23 => "Strip",
        24 => "IEEE 1394",
        19 => "ATM",
        32 => "InfiniBand",
        _ => return None,
    })
}

/// A hardware address of any length: six bytes as a MAC, others as hex bytes joined by
/// colons (`<empty>` for none).
fn link_addr(b: &[u8]) -> String {
    match b.len() {
        0 => "<empty>".into(),
        6 => mac(b),
        _ => b
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<Vec<_>>()
            .join(":"),
    }
}

/// A protocol address: IPv4 when the protocol is IPv4 (or trailer) and 4 bytes long.
fn proto_addr(pro: u16, b: &[u8]) -> String {
    if pro != 0x0800 && pro != 0x1000 {
        "<wrong proto type>".into()
    } else if b.len() != 4 {
        "<wrong len>".into()
    } else {
        std::net::Ipv4Addr::new(b[0], b[1], b[2], b[3]).to_string()
    }
}

/// Prints an ARP packet of `length` bytes (on the wire, after the link header).
pub(super) fn print(p: &mut Printer, b: &[u8], length: u32) -> Step {
    bytes_at(b, 0, 8, "arp")?;
    let hrd = u16_at(b, 0, "arp")?;
    let pro = u16_at(b, 2, "arp")?;
    let hln = usize::from(u8_at(b, 4, "arp")?);
    let pln = usize::from(u8_at(b, 5, "arp")?);
    let op = u16_at(b, 6, "arp")?;
    let sha = bytes_at(b, 8, hln, "arp")?;
    let spa = bytes_at(b, 8 + hln, pln, "arp")?;
    let tha = bytes_at(b, 8 + hln + pln, hln, "arp")?;
    let tpa = bytes_at(b, 8 + 2 * hln + pln, pln, "arp")?;
    if !p.opts.link {
        p.line.push_str("ARP, ");
    }
    let v = p.opts.verbose > 0;
    if (pro != 0x0800 && pro != 0x1000) || pln != 4 || hln == 0 || v {
        let h = hardware(hrd).map_or_else(|| format!("Unknown Hardware ({hrd})"), Into::into);
        let pr = ethertype_name(pro)
            .map_or_else(|| format!("Unknown Protocol (0x{pro:04x})"), Into::into);
        let _ = write!(p.line, "{h} (len {hln}), {pr} (len {pln})");
        if !v {
            let _ = write!(p.line, ", length {length}");
            return Ok(());
        }
    }
    let name = match op {
        1 => "Request".to_owned(),
        2 => "Reply".into(),
        3 => "Reverse Request".into(),
        4 => "Reverse Reply".into(),
        8 => "Inverse Request".into(),
        9 => "Inverse Reply".into(),
        10 => "NACK Reply".into(),
        o => format!("Unknown ({o})"),
    };
    let _ = write!(p.line, "{}{name} ", if v { ", " } else { "" });
    let _ = match op {
        1 => {
            let _ = write!(p.line, "who-has {}", proto_addr(pro, tpa));
            if tha.iter().any(|&x| x != 0) {
                let _ = write!(p.line, " ({})", link_addr(tha));
            }
            write!(p.line, " tell {}", proto_addr(pro, spa))
        }
        2 => write!(p.line, "{} is-at {}", proto_addr(pro, spa), link_addr(sha)),
        3 | 8 => write!(p.line, "who-is {} tell {}", link_addr(tha), link_addr(sha)),
        4 => write!(p.line, "{} at {}", link_addr(tha), proto_addr(pro, tpa)),
        9 => write!(p.line, "{} at {}", link_addr(sha), proto_addr(pro, spa)),
        _ => {
            super::hex::hex_ascii(&mut p.line, b);
            return Ok(());
        }
    };
    let _ = write!(p.line, ", length {length}");
    Ok(())
}
