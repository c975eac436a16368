//! UDP (tcpdump 4.99's `print-udp.c`): `10.0.0.1.4000 > 10.0.0.2.5000: UDP, length 18`.
//! The payload is decoded on the DNS ports (53, and 5353 for mDNS); on the other ports it
//! is not, where tcpdump decodes some.

use std::fmt::Write;

use super::l3::{cksum, should_be, words, Net, PROTO_UDP};
use super::{u16_at, Printer, Step, Trunc};

/// DNS, and multicast DNS.
pub(super) const DNS_PORT: u16 = 53;
const MDNS_PORT: u16 = 5353;

/// The addresses and ports (`udpipaddr_print`): with the addresses when the IP header's
/// protocol is UDP, the ports alone after an extension header; `None` ports when they were
/// not captured.
fn endpoints(p: &mut Printer, net: &Net<'_>, ports: Option<(u16, u16)>) {
    let _ = match (net.proto == PROTO_UDP, ports) {
        (true, None) => write!(p.line, "{} > {}: ", net.src_text(), net.dst_text()),
        (true, Some((s, d))) => write!(p.line, "{}.{s} > {}.{d}: ", net.src_text(), net.dst_text()),
        (false, Some((s, d))) => write!(p.line, "{s} > {d}: "),
        (false, None) => Ok(()),
    };
}

/// A UDP datagram of `length` bytes (by the IP header).
pub(super) fn print(p: &mut Printer, net: &Net<'_>, b: &[u8], length: u32) -> Step {
    if b.len() < 4 {
        endpoints(p, net, None);
        return Err(Trunc::checked("udp"));
    }
    let ports = (u16_at(b, 0, "udp")?, u16_at(b, 2, "udp")?);
    if length < 8 {
        endpoints(p, net, Some(ports));
        let _ = write!(p.line, "truncated-udp {length}");
        return Ok(());
    }
    let Ok(field) = u16_at(b, 4, "udp") else {
        endpoints(p, net, Some(ports));
        return Err(Trunc::checked("udp"));
    };
    let mut ulen = u32::from(field);
    if ulen == 0 && length > 65535 {
        ulen = length;
    }
    if ulen < 8 {
        endpoints(p, net, Some(ports));
        let _ = write!(p.line, "truncated-udplength {ulen}");
        return Ok(());
    }
    ulen -= 8;
    let length = (length - 8).min(ulen);
    if b.len() < 8 {
        endpoints(p, net, Some(ports));
        return Err(Trunc::checked("udp"));
    }
    endpoints(p, net, Some(ports));
    if p.opts.verbose > 0 && !net.fragmented {
        checksum(p, net, b, length);
    }
    if !p.opts.quick {
        let is = |port: u16| ports.0 == port || ports.1 == port;
        if is(DNS_PORT) || is(MDNS_PORT) {
            return super::dns::print(p, &b[8..], length, false, !is(DNS_PORT));
        }
    }
    if ulen > length && !net.fragmented {
        let _ = write!(p.line, "UDP, bad length {ulen} > {length}");
    } else {
        let _ = write!(p.line, "UDP, length {ulen}");
    }
    Ok(())
}

/// `-v`: over IPv6, where the checksum is mandatory, `[bad udp cksum 0x0000 -> 0x21ce!] `
/// or `[udp sum ok] ` when the whole datagram was captured (over IPv4 tcpdump checks only
/// with `-vv`).
fn checksum(p: &mut Printer, net: &Net<'_>, b: &[u8], length: u32) {
    let field = u16::from_be_bytes([b[6], b[7]]);
    if !net.v6 {
        if p.opts.verbose < 2 {
            return;
        }
        if field == 0 {
            p.line.push_str("[no cksum] ");
            return;
        }
    }
    let total = length + 8;
    let Some(dgram) = b.get(..total as usize) else {
        return;
    };
    let sum = cksum(words(dgram, net.pseudo_sum(PROTO_UDP, total)));
    if sum != 0 {
        let _ = write!(
            p.line,
            "[bad udp cksum 0x{field:04x} -> 0x{:04x}!] ",
            should_be(field, sum)
        );
    } else {
        p.line.push_str("[udp sum ok] ");
    }
}
