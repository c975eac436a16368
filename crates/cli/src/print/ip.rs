//! IPv4 (tcpdump 4.99's `print-ip.c`), the hand-off to the next protocol, and what the
//! transport printers need of the IP header: its addresses and the pseudo-header's sum.

use std::fmt::Write;

use super::{bits, check, icmp, icmp6, ip6, tcp, u16_at, u8_at, udp, Printer, Step, Trunc};

pub(super) use ip6::v6;

pub(super) const PROTO_ICMP: u8 = 1;
pub(super) const PROTO_TCP: u8 = 6;
pub(super) const PROTO_UDP: u8 = 17;
pub(super) const PROTO_ICMPV6: u8 = 58;

/// tcpdump's names of IP protocols (`ipproto_values`), as `-v` prints them.
pub(super) fn proto_name(p: u8) -> &'static str {
    match p {
        0 => "Options",
        1 => "ICMP",
        2 => "IGMP",
        4 => "IPIP",
        6 => "TCP",
        8 => "EGP",
        9 => "IGRP",
        17 => "UDP",
        33 => "DCCP",
        41 => "IPv6",
        43 => "Routing",
        44 => "Fragment",
        46 => "RSVP",
        47 => "GRE",
        50 => "ESP",
        51 => "AH",
        55 => "Mobile IP",
        58 => "ICMPv6",
        62 => "Mobile IP (old)",
        88 => "EIGRP",
        89 => "OSPF",
        103 => "PIM",
        108 => "Compressed IP",
        112 => "VRRP",
        113 => "PGM",
        132 => "SCTP",
        135 => "Mobility",
        143 => "Ethernet",
        _ => "unknown",
    }
}

/// The IP header a transport header came in.
#[derive(Clone, Copy, Debug)]
pub(super) struct Net<'a> {
    pub(super) v6: bool,
    pub(super) src: &'a [u8],
    pub(super) dst: &'a [u8],
    /// The header's own protocol (IPv6: its first next header). tcpdump prints the
    /// addresses with the ports only when it is the transport's.
    pub(super) proto: u8,
    /// More fragments follow (IPv4 MF, or an IPv6 fragment header): no checksum is checked.
    pub(super) fragmented: bool,
    /// The destination the pseudo-header names: IPv6's final one, the last address of a
    /// routing header.
    pub(super) sum_dst: &'a [u8],
}

impl Net<'_> {
    /// The source address as tcpdump prints it.
    pub(super) fn src_text(&self) -> String {
        addr_text(self.v6, self.src)
    }

    /// The destination address.
    pub(super) fn dst_text(&self) -> String {
        addr_text(self.v6, self.dst)
    }

    /// The sum of the pseudo-header of `len` bytes of `proto` (RFC 793, RFC 8200 8.1).
    pub(super) fn pseudo_sum(&self, proto: u8, len: u32) -> u64 {
        let mut acc = words(self.src, 0) + words(self.sum_dst, 0) + u64::from(proto);
        acc += u64::from(len >> 16) + u64::from(len & 0xffff);
        acc
    }
}

/// An IPv4 or IPv6 address (16 bytes) as tcpdump writes it.
pub(super) fn addr_text(v6: bool, b: &[u8]) -> String {
    if v6 {
        ip6::addr_text(b)
    } else {
        match b {
            [a, b, c, d] => format!("{a}.{b}.{c}.{d}"),
            _ => "?".into(),
        }
    }
}

/// `acc` plus the big-endian 16-bit words of `b` (an odd last byte padded with zero).
pub(super) fn words(b: &[u8], mut acc: u64) -> u64 {
    let mut pairs = b.chunks_exact(2);
    for w in &mut pairs {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = pairs.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// The Internet checksum of a sum: 0 when the data (with its checksum field) is right.
pub(super) fn cksum(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// What the checksum field should have held (tcpdump's `in_cksum_shouldbe`, RFC 1624).
pub(super) fn should_be(field: u16, computed: u16) -> u16 {
    let mut s = u32::from(field) + u32::from(computed);
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    s as u16
}

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

/// The protocol after an IP header (`ip_demux_print`): `length` bytes of it by the header.
pub(super) fn demux(p: &mut Printer, net: &Net<'_>, b: &[u8], length: u32, nh: u8) -> Step {
    match nh {
        PROTO_TCP => tcp::print(p, net, b, length),
        PROTO_UDP => udp::print(p, net, b, length),
        PROTO_ICMP | PROTO_ICMPV6 if (nh == PROTO_ICMPV6) == net.v6 => {
            if net.v6 {
                icmp6::print(p, net, b, length)
            } else {
                icmp::v4(p, b, length, net.fragmented)
            }
        }
        PROTO_ICMP => {
            p.line.push_str("[ICMP requires IPv4] (invalid)");
            Ok(())
        }
        PROTO_ICMPV6 => {
            p.line.push_str("[ICMPv6 requires IPv6] (invalid)");
            Ok(())
        }
        4 => v4(p, b, length),
        41 => v6(p, b, length),
        59 => {
            p.line.push_str("no next header");
            Ok(())
        }
        _ => {
            let _ = write!(p.line, " ip-proto-{nh} {length}");
            Ok(())
        }
    }
}
