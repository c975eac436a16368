//! IPv6 (tcpdump 4.99's `print-ip6.c`): the header, the hop-by-hop, destination-options
//! and fragment headers, then the protocol after them.

use std::fmt::Write;

use super::l3::{addr_text, proto_name, Net, PROTO_TCP, PROTO_UDP};
use super::transport::demux;
use super::{bytes_at, check, u16_at, u32_at, u8_at, Printer, Step, Trunc};

const HOPOPTS: u8 = 0;
const ROUTING: u8 = 43;
const FRAGMENT: u8 = 44;
const DSTOPTS: u8 = 60;

/// An IPv6 packet of `length` bytes on the wire.
pub(super) fn v6(p: &mut Printer, data: &[u8], length: u32) -> Step {
    check(data, 0, 40, "ip6")?;
    if length < 40 {
        let _ = write!(p.line, "truncated-ip6 {length}");
        return Ok(());
    }
    if !p.opts.link {
        p.line.push_str("IP6 ");
    }
    let version = data[0] >> 4;
    if version != 6 {
        let _ = write!(p.line, "version error: {version} != 6");
        return Ok(());
    }
    let payload_len = u32::from(u16_at(data, 4, "ip6")?);
    let mut len = if payload_len != 0 {
        let len = payload_len + 40;
        if length < len {
            let _ = write!(p.line, "truncated-ip6 - {} bytes missing!", len - length);
        }
        len
    } else {
        length + 40
    };
    let mut nh = data[6];
    if p.opts.verbose > 0 {
        details(p, data, payload_len)?;
    }
    let data = &data[..data.len().min(len as usize)];
    let mut net = Net {
        v6: true,
        src: &data[8..24],
        dst: &data[24..40],
        proto: nh,
        fragmented: false,
        sum_dst: &data[24..40],
    };
    if nh != PROTO_TCP && nh != PROTO_UDP {
        let _ = write!(p.line, "{} > {}: ", net.src_text(), net.dst_text());
    }
    let mut at = 40;
    len -= 40;
    let mut found_extension = false;
    loop {
        let advance = match extension(p, data, at, nh, payload_len, &mut net)? {
            Next::Header(advance) => advance,
            Next::Payload => break,
            Next::End => return Ok(()),
        };
        nh = u8_at(data, at, "ip6")?;
        found_extension = true;
        if (len as usize) < advance {
            return Err(Trunc::checked("ip6"));
        }
        at += advance;
        len -= advance as u32;
    }
    if payload_len == 0 && found_extension {
        return Err(Trunc::checked("ip6"));
    }
    // No payload: tcpdump cuts the packet after the header.
    let data = if payload_len == 0 {
        len = 0;
        &data[..at]
    } else {
        data
    };
    demux(p, &net, &data[at..], len, nh)
}

/// `-v`'s IPv6 fields: `(class 0x10, flowlabel 0x12345, hlim 64, next-header UDP (17)
/// payload length: 18) `.
fn details(p: &mut Printer, data: &[u8], payload_len: u32) -> Step {
    let flow = u32_at(data, 0, "ip6")?;
    p.line.push('(');
    if flow & 0x0ff0_0000 != 0 {
        let _ = write!(p.line, "class 0x{:02x}, ", (flow & 0x0ff0_0000) >> 20);
    }
    if flow & 0x000f_ffff != 0 {
        let _ = write!(p.line, "flowlabel 0x{:05x}, ", flow & 0x000f_ffff);
    }
    let _ = write!(
        p.line,
        "hlim {}, next-header {} ({}) payload length: {payload_len}) ",
        data[7],
        proto_name(data[6]),
        data[6]
    );
    Ok(())
}

/// What follows an extension header.
enum Next {
    /// Another header, this many bytes on.
    Header(usize),
    /// Not an extension header: the payload protocol's.
    Payload,
    /// Nothing more is printed (a later fragment, an invalid routing header).
    End,
}

/// Prints the extension header `nh` at `at` (`HBH `, `DSTOPT `, `frag (0|16) `, `RT6 (...) `).
fn extension<'a>(
    p: &mut Printer,
    data: &'a [u8],
    at: usize,
    nh: u8,
    payload_len: u32,
    net: &mut Net<'a>,
) -> Step<Next> {
    Ok(match nh {
        HOPOPTS | DSTOPTS => {
            let layer = if nh == HOPOPTS { "hbhopt" } else { "dstopt" };
            let ext = (usize::from(u8_at(data, at + 1, layer)?) + 1) * 8;
            check(data, at, ext, layer)?;
            let opts = bytes_at(data, at, ext, layer)?;
            p.line
                .push_str(if nh == HOPOPTS { "HBH " } else { "DSTOPT " });
            if p.opts.verbose > 0 || nh == HOPOPTS {
                options(p, &opts[2..], layer)?;
            }
            Next::Header(ext)
        }
        FRAGMENT => {
            let off = u16_at(data, at + 2, "frag6")? & 0xfff8;
            let rest = (payload_len + 40).saturating_sub(at as u32 + 8);
            if p.opts.verbose > 0 {
                let ident = u32_at(data, at + 4, "frag6")?;
                let _ = write!(p.line, "frag (0x{ident:08x}:{off}|{rest})");
            } else {
                let _ = write!(p.line, "frag ({off}|{rest})");
            }
            // A later fragment has no header of the next protocol to decode.
            if off != 0 {
                return Ok(Next::End);
            }
            p.line.push(' ');
            if data.len() <= at + 8 {
                return Ok(Next::End);
            }
            net.fragmented = true;
            Next::Header(8)
        }
        ROUTING => match routing(p, data, at, net)? {
            Some(ext) => Next::Header(ext),
            None => Next::End,
        },
        _ => Next::Payload,
    })
}

/// A routing header (`rt6_print`): `RT6 (len=2, type=0 [Deprecated], segleft=1,
/// [0]2001:db8::9) `. Its last address (type 0 and 2) or first segment (type 4) is the
/// destination the checksums' pseudo-header names. `None` when it is invalid, which ends
/// the line.
fn routing<'a>(
    p: &mut Printer,
    data: &'a [u8],
    at: usize,
    net: &mut Net<'a>,
) -> Step<Option<usize>> {
    const L: &str = "rt6";
    p.line.push_str("RT6");
    let len = u8_at(data, at + 1, L)?;
    let _ = write!(p.line, " (len={len}");
    let kind = u8_at(data, at + 2, L)?;
    let _ = write!(p.line, ", type={kind}");
    if kind == 0 {
        p.line.push_str(" [Deprecated]");
    }
    let _ = write!(p.line, ", segleft={}", u8_at(data, at + 3, L)?);
    let v = p.opts.verbose > 0;
    match kind {
        0 | 2 => {
            let reserved = u32_at(data, at + 4, L)?;
            if reserved != 0 || v {
                let _ = write!(p.line, ", rsv=0x{reserved:x}");
            }
        }
        4 => {
            let _ = write!(p.line, ", last-entry={}", u8_at(data, at + 4, L)?);
            let flags = u8_at(data, at + 5, L)?;
            if flags != 0 || v {
                let _ = write!(p.line, ", flags=0x{flags:x}");
            }
            let _ = write!(p.line, ", tag={:x}", u16_at(data, at + 6, L)?);
        }
        _ => {
            p.line.push_str(" (unknown type) (invalid)");
            return Ok(None);
        }
    }
    if len % 2 == 1 {
        let _ = write!(p.line, " (invalid length {len}) (invalid)");
        return Ok(None);
    }
    for i in 0..usize::from(len / 2) {
        let a = bytes_at(data, at + 8 + i * 16, 16, L)?;
        let _ = write!(p.line, ", [{i}]{}", addr_text(true, a));
        if kind != 4 || i == 0 {
            net.sum_dst = a;
        }
    }
    p.line.push_str(") ");
    Ok(Some((usize::from(len) + 1) * 8))
}

/// The options of a hop-by-hop or destination-options header (`ip6_opt_process`): with
/// `-v`, `(padn)`, `(rtalert: 0x0000) ` and the like.
fn options(p: &mut Printer, b: &[u8], layer: &'static str) -> Step {
    let v = p.opts.verbose > 0;
    let mut i = 0;
    while i < b.len() {
        let t = b[i];
        let len = if t == 0 {
            1
        } else {
            usize::from(*b.get(i + 1).ok_or(Trunc::checked(layer))?) + 2
        };
        let opt = b.get(i..i + len).ok_or(Trunc::checked(layer))?;
        let _ = match t {
            0 if v => write!(p.line, "(pad1)"),
            1 if v => write!(p.line, "(padn)"),
            5 if len == 4 && v => write!(p.line, "(rtalert: 0x{:04x}) ", u16_at(opt, 2, layer)?),
            5 if len != 4 => {
                let _ = write!(p.line, "(rtalert: invalid len {})", len - 2);
                return Err(Trunc::checked(layer));
            }
            0 | 1 | 5 => Ok(()),
            _ if v => write!(p.line, "(opt_type 0x{t:02x}: len={})", len - 2),
            _ => Ok(()),
        };
        i += len;
    }
    if v {
        p.line.push(' ');
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::addr_text;

    #[test]
    fn test_addresses() {
        let a = |s: &str| addr_text(true, &s.parse::<std::net::Ipv6Addr>().unwrap().octets());
        assert_eq!(a("2001:db8::1"), "2001:db8::1");
        assert_eq!(a("::"), "::");
        assert_eq!(a("::1"), "::1");
        assert_eq!(a("fe80::"), "fe80::");
        assert_eq!(a("2001:db8:0:1:0:0:0:1"), "2001:db8:0:1::1");
        assert_eq!(a("2001:0:0:1:0:0:0:1"), "2001:0:0:1::1");
        assert_eq!(a("1:0:2:3:4:5:6:7"), "1:0:2:3:4:5:6:7");
        assert_eq!(a("::ffff:10.0.0.1"), "::ffff:10.0.0.1");
        assert_eq!(a("::10.0.0.1"), "::10.0.0.1");
        assert_eq!(a("ff02::1:ff00:2"), "ff02::1:ff00:2");
    }
}
