//! The network layer of an Ethernet type (Ethernet II, and the cooked captures that carry
//! one): IPv4, IPv6, ARP.

use super::l2::{ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_REVARP};
use super::{arp, ip, Printer, Step};

/// The network layer of an Ethernet type; false when it is not one decoded here.
pub(super) fn network(p: &mut Printer, t: u16, data: &[u8], length: u32) -> Step<bool> {
    match t {
        ETHERTYPE_IPV4 => ip::v4(p, data, length)?,
        ETHERTYPE_IPV6 => ip::v6(p, data, length)?,
        ETHERTYPE_ARP | ETHERTYPE_REVARP => arp::print(p, data, length)?,
        _ => return Ok(false),
    }
    Ok(true)
}
