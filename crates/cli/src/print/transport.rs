//! The protocol after an IP header (tcpdump's `ip_demux_print`), for IPv4 and IPv6 alike:
//! TCP, UDP, ICMP, ICMPv6, and IP in IP through the printer's network-layer printers.

use std::fmt::Write;

use super::l3::{Net, PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP};
use super::{icmp, icmp6, tcp, udp, Printer, Step};

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
        // IP in IP: the printers of the network layer, which the printer holds.
        4 => (p.net4)(p, b, length),
        41 => (p.net6)(p, b, length),
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
