//! IPv4 (tcpdump 4.99's `print-ip.c`), and raw IP of either version; the protocol after
//! the header is `transport`'s.

use std::fmt::Write;

use super::l3::{addr_text, cksum, proto_name, should_be, words, Net, PROTO_TCP, PROTO_UDP};
use super::transport::demux;
use super::{bits, check, ip6, u16_at, u8_at, Printer, Step, Trunc};

pub(super) use ip6::v6;

/// Raw IP: IPv4 or IPv6 by the version nibble (`ipN_print`).
pub(super) fn any(p: &mut Printer, data: &[u8], length: u32) -> Step {
    if length < 1 {
        let _ = write!(p.line, "truncated-ip {length}");
        return Ok(());
    }
    match u8_at(data, 0, "ipn")? >> 4 {
        4 => v4(p, data, length),
        6 => v6(p, data, length),
        v => {
            let _ = write!(p.line, "unknown ip {v}");
            Ok(())
        }
    }
}

/// An IPv4 packet of `length` bytes on the wire.
pub(super) fn v4(p: &mut Printer, data: &[u8], length: u32) -> Step {
    let first = u8_at(data, 0, "ip")?;
    if first >> 4 != 4 {
        let _ = match first >> 4 {
            6 => write!(p.line, "IP6, wrong link-layer encapsulation"),
            v => write!(p.line, "IP{v}"),
        };
        p.line.push_str(" (invalid)");
        return Ok(());
    }
    if !p.opts.link {
        p.line.push_str("IP ");
    }
    check(data, 0, 20, "ip")?;
    if length < 20 {
        let _ = write!(p.line, "truncated-ip {length}");
        return Ok(());
    }
    let hlen = usize::from(first & 0xf) * 4;
    if hlen < 20 {
        let _ = write!(p.line, "bad-hlen {hlen}");
        return Ok(());
    }
    let len = u32::from(u16_at(data, 2, "ip")?);
    if length < len {
        let _ = write!(p.line, "truncated-ip - {} bytes missing! ", len - length);
    }
    if len < hlen as u32 {
        let _ = write!(p.line, "bad-len {len}");
        return Ok(());
    }
    // What follows the IP payload (Ethernet padding) is not the transport's.
    let data = &data[..data.len().min(len as usize)];
    let off = u16_at(data, 6, "ip")?;
    let proto = data[9];
    let net = Net {
        v6: false,
        src: &data[12..16],
        dst: &data[16..20],
        proto,
        fragmented: off & 0x2000 != 0,
        sum_dst: &data[16..20],
    };
    if p.opts.verbose > 0 && !v4_details(p, data, hlen, off, proto)? {
        let _ = write!(p.line, "{} > {}: ", net.src_text(), net.dst_text());
        return Err(Trunc::checked("ip"));
    }
    if off & 0x1fff != 0 {
        let _ = write!(
            p.line,
            "{} > {}: ip-proto-{proto}",
            net.src_text(),
            net.dst_text()
        );
        return Ok(());
    }
    if proto != PROTO_TCP && proto != PROTO_UDP {
        let _ = write!(p.line, "{} > {}: ", net.src_text(), net.dst_text());
    }
    if data.len() < hlen {
        let _ = write!(
            p.line,
            " [remaining caplen({}) < header length({hlen})]",
            data.len()
        );
        return Err(Trunc::read("ip"));
    }
    demux(p, &net, &data[hlen..], len - hlen as u32, proto)
}

/// `-v`'s IPv4 fields: `(tos 0x0, ttl 64, id 4660, offset 0, flags [DF], proto TCP (6),
/// length 60)` and a new line. False when the options were cut short.
fn v4_details(p: &mut Printer, data: &[u8], hlen: usize, off: u16, proto: u8) -> Step<bool> {
    let tos = data[1];
    let _ = write!(p.line, "(tos 0x{tos:x}");
    p.line.push_str(match tos & 3 {
        1 => ",ECT(1)",
        2 => ",ECT(0)",
        3 => ",CE",
        _ => "",
    });
    if data[8] >= 1 {
        let _ = write!(p.line, ", ttl {}", data[8]);
    }
    let flags = bits(
        u32::from(off),
        &[(0x2000, "+"), (0x4000, "DF"), (0x8000, "rsvd")],
    );
    let _ = write!(
        p.line,
        ", id {}, offset {}, flags [{}], proto {} ({proto}), length {}",
        u16_at(data, 4, "ip")?,
        (off & 0x1fff) * 8,
        flags,
        proto_name(proto),
        u16_at(data, 2, "ip")?
    );
    let mut whole = true;
    if hlen > 20 {
        p.line.push_str(", options (");
        whole = v4_options(p, data.get(20..hlen).unwrap_or(&data[20..]), hlen - 20)?;
        if !whole {
            p.line.push_str(" [truncated-option]");
        }
        p.line.push(')');
    }
    if let Some(h) = data.get(..hlen) {
        let sum = cksum(words(h, 0));
        if sum != 0 {
            let field = u16_at(data, 10, "ip")?;
            let _ = write!(
                p.line,
                ", bad cksum {field:x} (->{:x})!",
                should_be(field, sum)
            );
        }
    }
    p.line.push_str(")\n    ");
    Ok(whole)
}

/// IPv4 options by name (`ip_optprint`); false when an option runs past what was captured.
fn v4_options(p: &mut Printer, b: &[u8], mut length: usize) -> Step<bool> {
    let mut at = 0;
    let mut sep = "";
    while length > 0 {
        p.line.push_str(sep);
        sep = ",";
        let code = u8_at(b, at, "ip")?;
        let name = match code {
            0 => "EOL".to_owned(),
            1 => "NOP".into(),
            68 => "timestamp".into(),
            130 => "security".into(),
            7 => "RR".into(),
            137 => "SSRR".into(),
            131 => "LSRR".into(),
            148 => "RA".into(),
            82 => "traceroute".into(),
            c => format!("unknown {c}"),
        };
        p.line.push_str(&name);
        let opt_len = if code <= 1 {
            1
        } else {
            match u8_at(b, at + 1, "ip")? {
                l if l >= 2 => usize::from(l),
                l => {
                    let _ = write!(p.line, " [bad length {l}]");
                    return Ok(true);
                }
            }
        };
        if opt_len > length {
            let _ = write!(p.line, " [bad length {opt_len}]");
            return Ok(true);
        }
        let Some(opt) = b.get(at..at + opt_len) else {
            return Ok(false);
        };
        match code {
            0 => return Ok(true),
            7 | 131 | 137 => route(p, opt),
            148 if opt_len < 4 => {
                let _ = write!(p.line, " [bad length {opt_len}]");
            }
            148 => {
                let v = u16::from_be_bytes([opt[2], opt[3]]);
                if v != 0 {
                    let _ = write!(p.line, " value {v}");
                }
            }
            _ => {}
        }
        at += opt_len;
        length -= opt_len;
    }
    Ok(true)
}

/// The addresses of a record-route or source-route option (`ip_printroute`).
fn route(p: &mut Printer, opt: &[u8]) {
    let length = opt.len();
    if length < 3 {
        let _ = write!(p.line, " [bad length {length}]");
        return;
    }
    if (length + 1) & 3 != 0 {
        let _ = write!(p.line, " [bad length {length}]");
    }
    let ptr = usize::from(opt[2]).wrapping_sub(1);
    if ptr < 3 || (ptr + 1) & 3 != 0 || ptr > length + 1 {
        let _ = write!(p.line, " [bad ptr {}]", opt[2]);
    }
    let mut at = 3;
    while at + 4 <= length {
        let _ = write!(p.line, " {}", addr_text(false, &opt[at..at + 4]));
        if ptr > at {
            p.line.push(',');
        }
        at += 4;
    }
}
