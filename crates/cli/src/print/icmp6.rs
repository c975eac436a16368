//! ICMPv6 (tcpdump 4.99's `print-icmp6.c`): `ICMP6, neighbor solicitation, who has
//! fe80::2, length 32`. With `-v`: the checksum, and neighbor discovery's fields and
//! options.

use std::fmt::Write;

use super::ip::{addr_text, cksum, should_be, words, Net, PROTO_ICMPV6};
use super::{bytes_at, check, hex, u16_at, u32_at, u8_at, Printer, Step, Trunc};

const L6: &str = "icmp6";

/// An IPv6 address at `at`.
fn a6(b: &[u8], at: usize) -> Step<String> {
    Ok(addr_text(true, bytes_at(b, at, 16, L6)?))
}

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
        130 if length == 24 => mld(p, b),
        130 if length >= 28 => {
            p.line.push_str(" v2");
            mld2_query(p, b, length)?;
            Ok(())
        }
        130 => write!(p.line, " unknown-version (len {length}) "),
        131 | 132 => mld(p, b),
        135 => write!(p.line, ", who has {}", a6(b, 8)?),
        136 => write!(p.line, ", tgt is {}", a6(b, 8)?),
        137 => write!(p.line, ", {} to {}", a6(b, 24)?, a6(b, 8)?),
        143 if length < 8 => write!(p.line, " [invalid len {length}]"),
        143 => {
            mld2_report(p, b, length)?;
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
    if v && t == 136 {
        let flags = u32_at(b, 4, L6)?;
        let names: Vec<&str> = [
            (0x8000_0000, "router"),
            (0x4000_0000, "solicited"),
            (0x2000_0000, "override"),
        ]
        .iter()
        .filter(|f| flags & f.0 != 0)
        .map(|f| f.1)
        .collect();
        let _ = write!(
            p.line,
            ", Flags [{}]",
            if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            }
        );
    }
    if v && t == 134 {
        let flags = u8_at(b, 5, L6)?;
        let names: Vec<&str> = [
            (0x80, "managed"),
            (0x40, "other stateful"),
            (0x20, "home agent"),
            (0x02, "ipv6 only"),
        ]
        .iter()
        .filter(|f| flags & f.0 != 0)
        .map(|f| f.1)
        .collect();
        let _ = write!(
            p.line,
            "\n\thop limit {}, Flags [{}], pref {}, router lifetime {}s, reachable time {}ms, retrans timer {}ms",
            u8_at(b, 4, L6)?,
            if names.is_empty() { "none".into() } else { names.join(", ") },
            ["medium", "high", "rsv", "low"][usize::from((flags & 0x18) >> 3)],
            u16_at(b, 6, L6)?,
            u32_at(b, 8, L6)?,
            u32_at(b, 12, L6)?
        );
    }
    if v && matches!(t, 133 | 134 | 135 | 136 | 137) {
        let start = match t {
            133 => 8,
            134 => 16,
            137 => 40,
            _ => 24,
        };
        nd_options(
            p,
            b.get(start..(length as usize).min(b.len()))
                .unwrap_or_default(),
        )?;
    }
    Ok(true)
}

/// An MLDv2 query's group (`mldv2_query_print`): ` [gaddr ff02::1, 2 source(s)]`, with
/// `-v` the delay, the flags and the interval.
fn mld2_query(p: &mut Printer, b: &[u8], length: u32) -> Step {
    let v = p.opts.verbose;
    let mrc = u32::from(u16_at(b, 4, L6)?);
    let mrt = if mrc < 32768 {
        mrc
    } else {
        ((mrc & 0x0fff) | 0x1000) << (((mrc & 0x7000) >> 12) + 3)
    };
    if v > 0 {
        let _ = write!(p.line, " [max resp delay={mrt}]");
    }
    let _ = write!(p.line, " [gaddr {}", a6(b, 8)?);
    if v > 0 {
        let s = u8_at(b, 24, L6)?;
        if s & 0x08 != 0 {
            p.line.push_str(" sflag");
        }
        if s & 0x07 != 0 {
            let _ = write!(p.line, " robustness={}", s & 0x07);
        }
        let q = u32::from(u8_at(b, 25, L6)?);
        let qqi = if q < 128 {
            q
        } else {
            ((q & 0x0f) | 0x10) << (((q & 0x70) >> 4) + 3)
        };
        let _ = write!(p.line, " qqi={qqi}");
    }
    let sources = usize::from(u16_at(b, 26, L6)?);
    if sources > 0 {
        if (length as usize) < 28 + sources * 16 {
            p.line.push_str(" [invalid number of sources]");
        } else if v > 1 {
            p.line.push_str(" {");
            for i in 0..sources {
                let _ = write!(p.line, " {}", a6(b, 28 + i * 16)?);
            }
            p.line.push_str(" }");
        } else {
            let _ = write!(p.line, ", {sources} source(s)");
        }
    }
    p.line.push(']');
    Ok(())
}

/// An MLDv2 report (`mldv2_report_print`): `, 1 group record(s)`, with `-v` each record.
fn mld2_report(p: &mut Printer, b: &[u8], length: u32) -> Step {
    let length = length as usize;
    if length < 8 {
        let _ = write!(p.line, " [invalid len {length}]");
        return Ok(());
    }
    let groups = u16_at(b, 6, L6)?;
    let _ = write!(p.line, ", {groups} group record(s)");
    if p.opts.verbose == 0 {
        return Ok(());
    }
    let mut at = 8;
    for _ in 0..groups {
        if length < at + 20 {
            p.line.push_str(" [invalid number of groups]");
            return Ok(());
        }
        let _ = write!(p.line, " [gaddr {}", a6(b, at + 4)?);
        let kind = u8_at(b, at, L6)?;
        let _ = match kind {
            1..=6 => write!(
                p.line,
                " {}",
                ["is_in", "is_ex", "to_in", "to_ex", "allow", "block"][usize::from(kind - 1)]
            ),
            k => write!(p.line, "  [v2-report-#{k}]"),
        };
        let sources = usize::from(u16_at(b, at + 2, L6)?);
        if length < at + 20 + sources * 16 {
            let _ = write!(p.line, " [invalid number of sources {sources}]");
            return Ok(());
        }
        if p.opts.verbose == 1 {
            let _ = write!(p.line, ", {sources} source(s)");
        } else {
            p.line.push_str(" {");
            for i in 0..sources {
                let _ = write!(p.line, " {}", a6(b, at + 20 + i * 16)?);
            }
            p.line.push_str(" }");
        }
        at += 20 + sources * 16;
        p.line.push(']');
    }
    Ok(())
}

/// `max resp delay: 0 addr: ff02::1` (no separator before it, as tcpdump).
fn mld(p: &mut Printer, b: &[u8]) -> std::fmt::Result {
    if b.len() < 24 {
        return Ok(());
    }
    write!(
        p.line,
        "max resp delay: {} addr: {}",
        u16::from_be_bytes([b[4], b[5]]),
        addr_text(true, &b[8..24])
    )
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

/// `-v`'s neighbor discovery options: link-layer addresses and the MTU; others by name.
fn nd_options(p: &mut Printer, mut b: &[u8]) -> Step {
    while !b.is_empty() {
        check(b, 0, 2, L6)?;
        let t = u8_at(b, 0, L6)?;
        let units = usize::from(u8_at(b, 1, L6)?);
        let Some(opt) = b.get(..units * 8).filter(|_| units > 0) else {
            return Err(Trunc::checked(L6));
        };
        let name = match t {
            1 => "source link-address",
            2 => "destination link-address",
            3 => "prefix info",
            4 => "redirected header",
            5 => "mtu",
            25 => "rdnss",
            31 => "dnssl",
            7 => "advertisement interval",
            8 => "homeagent information",
            24 => "route info",
            _ => "unknown",
        };
        let _ = write!(
            p.line,
            "\n\t  {name} option ({t}), length {} ({units}): ",
            units * 8
        );
        match t {
            1 | 2 => {
                let parts: Vec<String> = opt[2..].iter().map(|x| format!("{x:02x}")).collect();
                p.line.push_str(&parts.join(":"));
            }
            5 => {
                let bad = if units != 1 { "bad option length" } else { "" };
                let _ = write!(p.line, " {}{bad}", u32_at(opt, 4, L6)?);
            }
            7 => {
                let _ = write!(p.line, " {}ms", u32_at(opt, 4, L6)?);
            }
            3 => {
                let life = |x: u32| {
                    if x == u32::MAX {
                        "infinity".to_owned()
                    } else {
                        format!("{x}s")
                    }
                };
                let flags = u8_at(opt, 3, L6)?;
                let names: Vec<&str> = [(0x80, "onlink"), (0x40, "auto"), (0x20, "router")]
                    .iter()
                    .filter(|f| flags & f.0 != 0)
                    .map(|f| f.1)
                    .collect();
                let _ = write!(
                    p.line,
                    "{}/{}{}, Flags [{}], valid time {}, pref. time {}",
                    a6(opt, 16)?,
                    u8_at(opt, 2, L6)?,
                    if units != 4 { "badlen" } else { "" },
                    if names.is_empty() {
                        "none".into()
                    } else {
                        names.join(", ")
                    },
                    life(u32_at(opt, 4, L6)?),
                    life(u32_at(opt, 8, L6)?)
                );
            }
            25 => {
                let _ = write!(p.line, " lifetime {}s,", u32_at(opt, 4, L6)?);
                for i in 0..(units - 1) / 2 {
                    let _ = write!(p.line, " addr: {}", a6(opt, 8 + i * 16)?);
                }
            }
            8 => {
                let _ = write!(
                    p.line,
                    " preference {}, lifetime {}",
                    u16_at(opt, 4, L6)?,
                    u16_at(opt, 6, L6)?
                );
            }
            4 | 24 | 31 => {}
            _ => {
                if p.opts.verbose <= 1 {
                    hex::hex_indented(&mut p.line, "\n\t  ", &opt[2..]);
                    return Ok(());
                }
            }
        }
        if p.opts.verbose > 1 {
            hex::hex_indented(&mut p.line, "\n\t    ", &opt[2..]);
        }
        b = &b[units * 8..];
    }
    Ok(())
}
