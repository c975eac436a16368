//! `-v`'s detail of neighbor discovery (RFC 4861) and multicast listener (RFC 2710, 3810)
//! messages, as tcpdump 4.99's `print-icmp6.c` prints it: flags, timers, options, and
//! the groups of MLDv2.

use std::fmt::Write;

use super::l3::addr_text;
use super::{bits, bytes_at, check, hex, u16_at, u32_at, u8_at, Printer, Step, Trunc};

/// What a cut ICMPv6 message says it was cut in.
pub(super) const L6: &str = "icmp6";

/// An IPv6 address at `at` of an ICMPv6 message.
pub(super) fn a6(b: &[u8], at: usize) -> Step<String> {
    Ok(addr_text(true, bytes_at(b, at, 16, L6)?))
}

/// With `-v`, after a neighbor discovery message of type `t`: an advertisement's flags,
/// a router advertisement's fields, then the options.
pub(super) fn details(p: &mut Printer, b: &[u8], t: u8, length: u32) -> Step {
    if t == 136 {
        let flags = u32_at(b, 4, L6)?;
        let names = bits(
            flags,
            &[
                (0x8000_0000, "router"),
                (0x4000_0000, "solicited"),
                (0x2000_0000, "override"),
            ],
        );
        let _ = write!(p.line, ", Flags [{names}]");
    }
    if t == 134 {
        let flags = u8_at(b, 5, L6)?;
        let names = bits(
            u32::from(flags),
            &[
                (0x80, "managed"),
                (0x40, "other stateful"),
                (0x20, "home agent"),
                (0x02, "ipv6 only"),
            ],
        );
        let _ = write!(
            p.line,
            "\n\thop limit {}, Flags [{}], pref {}, router lifetime {}s, reachable time {}ms, retrans timer {}ms",
            u8_at(b, 4, L6)?,
            names,
            ["medium", "high", "rsv", "low"][usize::from((flags & 0x18) >> 3)],
            u16_at(b, 6, L6)?,
            u32_at(b, 8, L6)?,
            u32_at(b, 12, L6)?
        );
    }
    if matches!(t, 133..=137) {
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
    Ok(())
}

/// An MLDv2 query's group (`mldv2_query_print`): ` [gaddr ff02::1, 2 source(s)]`, with
/// `-v` the delay, the flags and the interval.
pub(super) fn mld2_query(p: &mut Printer, b: &[u8], length: u32) -> Step {
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
pub(super) fn mld2_report(p: &mut Printer, b: &[u8], length: u32) -> Step {
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
pub(super) fn mld(p: &mut Printer, b: &[u8]) -> std::fmt::Result {
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

/// `-v`'s neighbor discovery options: link-layer addresses and the MTU; others by name.
fn nd_options(p: &mut Printer, mut b: &[u8]) -> Step {
    while !b.is_empty() {
        check(b, 0, 2, L6)?;
        let t = u8_at(b, 0, L6)?;
        let units = usize::from(u8_at(b, 1, L6)?);
        let Some(opt) = b.get(..units * 8).filter(|_| units > 0) else {
            return Err(Trunc::checked(L6));
        };
        let _ = write!(
            p.line,
            "\n\t  {} option ({t}), length {} ({units}): ",
            nd_option_name(t),
            units * 8
        );
        if !nd_option(p, t, units, opt)? {
            return Ok(());
        }
        if p.opts.verbose > 1 {
            hex::hex_indented(&mut p.line, "\n\t    ", &opt[2..]);
        }
        b = &b[units * 8..];
    }
    Ok(())
}

/// tcpdump's name of the neighbor discovery option of type `t`.
fn nd_option_name(t: u8) -> &'static str {
    match t {
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
    }
}

/// One option's value (`opt`, `units` of 8 bytes, of type `t`). False after an unknown
/// option's bytes at `-v`, where tcpdump ends the list.
fn nd_option(p: &mut Printer, t: u8, units: usize, opt: &[u8]) -> Step<bool> {
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
        3 => prefix_info(p, units, opt)?,
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
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// The prefix information option: prefix, length, flags and its two lifetimes.
fn prefix_info(p: &mut Printer, units: usize, opt: &[u8]) -> Step {
    let life = |x: u32| {
        if x == u32::MAX {
            "infinity".to_owned()
        } else {
            format!("{x}s")
        }
    };
    let flags = u32::from(u8_at(opt, 3, L6)?);
    let names = bits(flags, &[(0x80, "onlink"), (0x40, "auto"), (0x20, "router")]);
    let _ = write!(
        p.line,
        "{}/{}{}, Flags [{}], valid time {}, pref. time {}",
        a6(opt, 16)?,
        u8_at(opt, 2, L6)?,
        if units != 4 { "badlen" } else { "" },
        names,
        life(u32_at(opt, 4, L6)?),
        life(u32_at(opt, 8, L6)?)
    );
    Ok(())
}
