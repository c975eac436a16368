//! ICMP (tcpdump 4.99's `print-icmp.c`): `ICMP echo request, id 1, seq 1, length 64`.
//! With `-v`: the checksum, and the IP header an ICMP error quotes.

use std::fmt::Write;

use super::l3::{addr_text, cksum, should_be, words};
use super::{bytes_at, check, u16_at, u32_at, u8_at, Printer, Step, Trunc};

const L: &str = "icmp";

/// An IPv4 address at `at`.
fn a4(b: &[u8], at: usize, layer: &'static str) -> Step<String> {
    Ok(addr_text(false, bytes_at(b, at, 4, layer)?))
}

/// An ICMP message of `plen` bytes.
pub(super) fn v4(p: &mut Printer, b: &[u8], plen: u32, fragmented: bool) -> Step {
    let t = u8_at(b, 0, L)?;
    let text = message(b, t, u8_at(b, 1, L)?)?;
    let _ = write!(p.line, "ICMP {text}, length {plen}");
    if p.opts.verbose > 0 && !fragmented {
        if let Some(msg) = b.get(..plen as usize) {
            let sum = cksum(words(msg, 0));
            if sum != 0 {
                let field = u16_at(b, 2, L)?;
                let _ = write!(
                    p.line,
                    " (wrong icmp cksum {field:x} (->{:x})!)",
                    should_be(field, sum)
                );
            }
        }
    }
    if p.opts.verbose > 0 && matches!(t, 3 | 4 | 5 | 11 | 12) {
        quoted(p, b)?;
    }
    if p.opts.verbose > 0 && plen > EXT_OFFSET && matches!(t, 3 | 11 | 12) {
        extensions(p, b, plen)?;
    }
    Ok(())
}

/// The message of type `t` and `code`, as the line says it: `echo request, id 1, seq 1`.
fn message(b: &[u8], t: u8, code: u8) -> Step<String> {
    Ok(match t {
        0 | 8 => format!(
            "echo {}, id {}, seq {}",
            if t == 8 { "request" } else { "reply" },
            u16_at(b, 4, L)?,
            u16_at(b, 6, L)?
        ),
        3 => unreachable(b, code)?,
        5 => redirect(b, code)?,
        9 => router_advertisement(b)?,
        11 => {
            check(b, 24, 4, L)?;
            match code {
                0 => "time exceeded in-transit".into(),
                1 => "ip reassembly time exceeded".into(),
                c => format!("time exceeded-#{c}"),
            }
        }
        12 if code != 0 => format!("parameter problem - code {code}"),
        12 => format!("parameter problem - octet {}", u8_at(b, 4, L)?),
        18 => format!("address mask is 0x{:08x}", u32_at(b, 8, L)?),
        13 => format!(
            "time stamp query id {} seq {}",
            u16_at(b, 4, L)?,
            u16_at(b, 6, L)?
        ),
        14 => {
            check(b, 16, 4, L)?;
            let ms = |at| u32_at(b, at, L).map(clock_ms);
            format!(
                "time stamp reply id {} seq {}: org {}, recv {}, xmit {}",
                u16_at(b, 4, L)?,
                u16_at(b, 6, L)?,
                ms(8)?,
                ms(12)?,
                ms(16)?
            )
        }
        4 => "source quench".into(),
        10 => "router solicitation".into(),
        15 => "information request".into(),
        16 => "information reply".into(),
        17 => "address mask request".into(),
        t => format!("type-#{t}"),
    })
}

/// A redirect: `redirect 10.0.0.9 to host 10.0.0.1`.
fn redirect(b: &[u8], code: u8) -> Step<String> {
    let kind = match code {
        0 => "redirect {} to net {}",
        1 => "redirect {} to host {}",
        2 => "redirect-tos {} to net {}",
        3 => "redirect-tos {} to host {}",
        _ => "",
    };
    let (dst, gw) = (a4(b, 24, L)?, a4(b, 4, L)?);
    Ok(if kind.is_empty() {
        format!("redirect-#{code} {dst} to {gw}")
    } else {
        kind.replacen("{}", &dst, 1).replacen("{}", &gw, 1)
    })
}

/// `-v`: the IP header (and the start of its payload) that an error quotes, on a line of
/// its own.
fn quoted(p: &mut Printer, b: &[u8]) -> Step {
    p.line.push_str("\n\t");
    let inner = b.get(8..).unwrap_or_default();
    let len = u16_at(inner, 2, L)?;
    if len < 4 {
        // tcpdump cuts the packet at the quoted length before it reads that length again
        // to pass it on.
        return Err(Trunc::read(L));
    }
    let inner = &inner[..inner.len().min(usize::from(len))];
    // The quoted header, by the printer's IPv4 printer (the network layer above this).
    let quoted = (p.net4)(p, inner, u32::from(len));
    super::ended_here(p, quoted)
}

/// Where RFC 4884 extensions start in an ICMP error: after 128 bytes of the original
/// datagram (tcpdump's `ICMP_EXTD_MINLEN`).
const EXT_OFFSET: u32 = 136;

/// `-v`: an error's RFC 4884 extension structure and its objects (MPLS label stacks), as
/// tcpdump prints them; nothing when its checksum says there is none.
fn extensions(p: &mut Printer, b: &[u8], plen: u32) -> Step {
    // tcpdump checks the whole fixed part (141 bytes) before it looks.
    check(b, 0, 141, L)?;
    let at = EXT_OFFSET as usize;
    let hlen = (plen - EXT_OFFSET) as usize;
    let whole = b.get(at..at + hlen);
    if b[5] == 0 {
        if let Some(ext) = whole {
            if cksum(words(ext, 0)) != 0 {
                return Ok(());
            }
        }
    }
    let version = b[at] >> 4;
    let _ = write!(p.line, "\n\tICMP Multi-Part extension v{version}");
    if version != 2 {
        p.line.push_str(" packet not supported");
        return Ok(());
    }
    if let Some(ext) = whole {
        let _ = write!(
            p.line,
            ", checksum 0x{:04x} ({}correct), length {hlen}",
            u16_at(b, at + 2, L)?,
            if cksum(words(ext, 0)) != 0 { "in" } else { "" }
        );
    }
    let mut left = hlen.saturating_sub(4);
    let mut obj = at + 4;
    while left > 4 {
        check(b, obj, 4, L)?;
        let len = usize::from(u16_at(b, obj, L)?);
        let (class, ctype) = (u8_at(b, obj + 2, L)?, u8_at(b, obj + 3, L)?);
        let name = match class {
            1 => "MPLS Stack Entry",
            2 => "Interface Identification",
            _ => "unknown",
        };
        let _ = write!(
            p.line,
            "\n\t  {name} Object ({class}), Class-Type: {ctype}, length {len}"
        );
        left -= 4;
        if class == 0 || len < 4 {
            return Ok(());
        }
        let body = len - 4;
        obj += 4;
        if class == 1 && ctype == 1 {
            let label = u32_at(b, obj, L)?;
            let _ = write!(
                p.line,
                "\n\t    label {}, tc {}",
                label >> 12,
                (label >> 9) & 7
            );
            if label & 0x100 != 0 {
                p.line.push_str(", [S]");
            }
            let _ = write!(p.line, ", ttl {}", label & 0xff);
        } else {
            let shown = b.get(obj..).unwrap_or_default();
            super::hex::hex_indented(&mut p.line, "\n\t    ", &shown[..shown.len().min(body)]);
        }
        if left < body {
            break;
        }
        left -= body;
        obj += body;
    }
    Ok(())
}

/// Milliseconds since midnight as `HH:MM:SS.mmm`.
fn clock_ms(ms: u32) -> String {
    let s = ms / 1000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        s / 3600,
        s / 60 % 60,
        s % 60,
        ms % 1000
    )
}

/// The text of a destination unreachable of `code`, naming the quoted destination.
fn unreachable(b: &[u8], code: u8) -> Step<String> {
    let what = match code {
        0 => "net {} unreachable",
        1 => "host {} unreachable",
        5 => "{} unreachable - source route failed",
        6 => "net {} unreachable - unknown",
        7 => "host {} unreachable - unknown",
        8 => "{} unreachable - source host isolated",
        9 => "net {} unreachable - admin prohibited",
        10 => "host {} unreachable - admin prohibited",
        11 => "net {} unreachable - tos prohibited",
        12 => "host {} unreachable - tos prohibited",
        13 => "host {} unreachable - admin prohibited filter",
        14 => "host {} unreachable - host precedence violation",
        15 => "host {} unreachable - precedence cutoff",
        2 => {
            let dst = a4(b, 24, L)?;
            return Ok(format!("{dst} protocol {} unreachable", u8_at(b, 17, L)?));
        }
        3 => {
            check(b, 17, 1, L)?;
            let proto = u8_at(b, 17, L)?;
            let hlen = usize::from(u8_at(b, 8, L)? & 0xf) * 4;
            let dport = u16_at(b, 8 + hlen + 2, L)?;
            let dst = a4(b, 24, L)?;
            return Ok(match proto {
                6 => format!("{dst} tcp port {dport} unreachable"),
                17 => format!("{dst} udp port {dport} unreachable"),
                _ => format!("{dst} protocol {proto} port {dport} unreachable"),
            });
        }
        4 => {
            let mtu = u16_at(b, 6, L)?;
            let dst = a4(b, 24, L)?;
            return Ok(if mtu != 0 {
                format!("{dst} unreachable - need to frag (mtu {mtu})")
            } else {
                format!("{dst} unreachable - need to frag")
            });
        }
        c => return Ok(format!("{} unreachable - #{c}", a4(b, 24, L)?)),
    };
    Ok(what.replacen("{}", &a4(b, 24, L)?, 1))
}

/// `router advertisement lifetime 30:00 1: {10.0.0.1 0}`.
fn router_advertisement(b: &[u8]) -> Step<String> {
    let mut s = String::from("router advertisement lifetime ");
    check(b, 4, 4, L)?;
    let life = u32::from(u16_at(b, 6, L)?);
    let _ = match life {
        l if l < 60 => write!(s, "{l}"),
        l if l < 3600 => write!(s, "{}:{:02}", l / 60, l % 60),
        l => write!(s, "{}:{:02}:{:02}", l / 3600, l % 3600 / 60, l % 60),
    };
    let num = u8_at(b, 4, L)?;
    let _ = write!(s, " {num}:");
    let size = u8_at(b, 5, L)?;
    if size != 2 {
        let _ = write!(s, " [size {size}]");
        return Ok(s);
    }
    for i in 0..usize::from(num) {
        let at = 8 + i * 8;
        check(b, at, 8, L)?;
        let _ = write!(s, " {{{} {}}}", a4(b, at, L)?, u32_at(b, at + 4, L)?);
    }
    Ok(s)
}
