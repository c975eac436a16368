//! ICMPv6 (tcpdump 4.99's `print-icmp6.c`): `ICMP6, neighbor solicitation, who has
//! fe80::2, length 32`. With `-v`: the checksum, and neighbor discovery's fields and
//! options.

use std::fmt::Write;

use super::l3::{cksum, should_be, words, Net, PROTO_ICMPV6};
use super::nd::{self, a6, L6};
use super::{check, hex, u16_at, u32_at, u8_at, Printer, Step, Trunc};

/// ICMPv6 type names (`icmp6_type_values`).
fn v6_name(t: u8) -> Option<&'static str> {
    Some(match t {
        1 => "destination unreachable",
        2 => "packet too big",
        3 => "time exceeded in-transit",
        4 => "parameter problem",
        128 => "echo request",
        129 => "echo reply",
        130 => "multicast listener query",
        131 => "multicast listener report",
        132 => "multicast listener done",
        133 => "router solicitation",
        134 => "router advertisement",
        135 => "neighbor solicitation",
        136 => "neighbor advertisement",
        137 => "redirect",
        138 => "router renumbering",
        141 => "inverse neighbor solicitation",
        142 => "inverse neighbor advertisement",
        143 => "multicast listener report v2",
        144 => "ha discovery request",
        145 => "ha discovery reply",
        146 => "mobile router solicitation",
        147 => "mobile router advertisement",
        139 => "node information query",
        140 => "node information reply",
        200 => "mtrace response",
        201 => "mtrace message",
        155 => "RPL",
        _ => return None,
    })
}

/// An ICMPv6 message of `length` bytes.
pub(super) fn print(p: &mut Printer, net: &Net<'_>, b: &[u8], length: u32) -> Step {
    if length == 0 {
        p.line.push_str("ICMP6, length 0 (invalid)");
        return Ok(());
    }
    let v = p.opts.verbose > 0;
    if v && !net.fragmented {
        if let Some(msg) = b.get(..length as usize) {
            let field = u16_at(b, 2, L6)?;
            let sum = cksum(words(msg, net.pseudo_sum(PROTO_ICMPV6, length)));
            if sum != 0 {
                let want = should_be(field, sum);
                let _ = write!(p.line, "[bad icmp6 cksum 0x{field:04x} -> 0x{want:04x}!] ");
            } else {
                p.line.push_str("[icmp6 sum ok] ");
            }
        }
    }
    let t = u8_at(b, 0, L6)?;
    match v6_name(t) {
        Some(n) => {
            let _ = write!(p.line, "ICMP6, {n}");
        }
        None => {
            let _ = write!(p.line, "ICMP6, unknown icmp6 type ({t})");
        }
    }
    if v && matches!(t, 133..=137 | 145 | 147) {
        let _ = write!(p.line, ", length {length}");
    }
    let code = u8_at(b, 1, L6)?;
    if !v6_body(p, b, t, code, length)? {
        return Ok(());
    }
    if !v {
        let _ = write!(p.line, ", length {length}");
    }
    Ok(())
}

/// What follows the type name; false when the message ended the line itself.
fn v6_body(p: &mut Printer, b: &[u8], t: u8, code: u8, length: u32) -> Step<bool> {
    let v = p.opts.verbose > 0;
    let _ = match t {
        1 => return unreachable6(p, b, code, length),
        2 => write!(p.line, ", mtu {}", u32_at(b, 4, L6)?),
        3 => match code {
            0 => write!(p.line, " for {}", a6(b, 32)?),
            1 => write!(p.line, " (reassembly)"),
            c => write!(p.line, ", unknown code ({c})"),
        },
        4 => {
            check(b, 32, 16, L6)?;
            let octet = u32_at(b, 4, L6)?;
            match code {
                0 => write!(p.line, ", erroneous - octet {octet}"),
                1 => write!(p.line, ", next header - octet {octet}"),
                2 => write!(p.line, ", option - octet {octet}"),
                3 => write!(p.line, ", incomplete header chain - octet {octet}"),
                c => write!(p.line, ", code-#{c}"),
            }
        }
        128 | 129 => write!(
            p.line,
            ", id {}, seq {}",
            u16_at(b, 4, L6)?,
            u16_at(b, 6, L6)?
        ),
        130 if length == 24 => nd::mld(p, b),
        130 if length >= 28 => {
            p.line.push_str(" v2");
            nd::mld2_query(p, b, length)?;
            Ok(())
        }
        130 => write!(p.line, " unknown-version (len {length}) "),
        131 | 132 => nd::mld(p, b),
        135 => write!(p.line, ", who has {}", a6(b, 8)?),
        136 => write!(p.line, ", tgt is {}", a6(b, 8)?),
        137 => write!(p.line, ", {} to {}", a6(b, 24)?, a6(b, 8)?),
        143 if length < 8 => write!(p.line, " [invalid len {length}]"),
        143 => {
            nd::mld2_report(p, b, length)?;
            Ok(())
        }
        144 | 146 => write!(p.line, ", id 0x{:04x}", u16_at(b, 4, L6)?),
        133 | 134 | 141 | 142 | 145 | 147 => Ok(()),
        _ if v6_name(t).is_some() && !matches!(t, 138..=140 | 155 | 200 | 201) => Ok(()),
        _ => {
            let _ = write!(p.line, ", length {length}");
            if p.opts.verbose <= 1 {
                unknown_data(p, b, length);
            }
            return Ok(false);
        }
    };
    if v {
        nd::details(p, b, t, length)?;
    }
    Ok(true)
}

/// The bytes of a message not decoded, in hex (`print_unknown_data`).
fn unknown_data(p: &mut Printer, b: &[u8], length: u32) {
    hex::hex_indented(&mut p.line, "\n\t", &b[..b.len().min(length as usize)]);
}

/// Destination unreachable: the code's text and the quoted destination.
fn unreachable6(p: &mut Printer, b: &[u8], code: u8, length: u32) -> Step<bool> {
    let name = match code {
        0 => "unreachable route".to_owned(),
        1 => " unreachable prohibited".into(),
        2 => "beyond scope".into(),
        3 => "unreachable address".into(),
        4 => "unreachable port".into(),
        c => format!("unknown unreach code ({c})"),
    };
    let _ = write!(p.line, ", {name}");
    let _ = match code {
        0 | 1 | 3 => write!(p.line, " {}", a6(b, 32)?),
        2 => write!(p.line, " {}, source address {}", a6(b, 32)?, a6(b, 16)?),
        4 => {
            let Some((proto, dport)) = upper_layer(&b[8.min(b.len())..])? else {
                return Err(Trunc::checked(L6));
            };
            let dst = a6(b, 32)?;
            match proto {
                6 => write!(p.line, ", {dst} tcp port {dport}"),
                17 => write!(p.line, ", {dst} udp port {dport}"),
                _ => write!(p.line, ", {dst} protocol {proto} port {dport} unreachable"),
            }
        }
        _ if p.opts.verbose <= 1 => {
            unknown_data(p, b, length);
            return Ok(false);
        }
        _ => Ok(()),
    };
    Ok(true)
}

/// The protocol and destination port of the packet an ICMPv6 error quotes, past its
/// extension headers (`get_upperlayer`); `None` when they were not captured.
fn upper_layer(ip6: &[u8]) -> Step<Option<(u8, u16)>> {
    let Some(&first) = ip6.get(6) else {
        return Ok(None);
    };
    let (mut nh, mut at) = (first, 40);
    loop {
        match nh {
            6 | 17 => return Ok(u16_at(ip6, at + 2, L6).ok().map(|d| (nh, d))),
            0 | 43 | 60 => {
                let Some(&len) = ip6.get(at + 1) else {
                    return Ok(None);
                };
                nh = ip6[at];
                at += (usize::from(len) + 1) * 8;
            }
            44 => {
                let Ok(off) = u16_at(ip6, at + 2, L6) else {
                    return Ok(None);
                };
                if off & 0xfff8 != 0 {
                    return Ok(None);
                }
                nh = ip6[at];
                at += 8;
            }
            _ => return Ok(None),
        }
        if at >= ip6.len() {
            return Ok(None);
        }
    }
}
