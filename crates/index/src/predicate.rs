//! What a filter lets the index prune on: keys a region must hold for some packet of it to
//! match. [`Predicate::from_program`] reads it from the program libpcap compiled for the
//! filter (see `bpf.rs`), never from a second reading of the filter's text.
//!
//! The predicate only says where matches cannot be. The query still runs the compiled
//! filter on every packet it reads, so the answer is exact.

use crate::format::Region;
use crate::key::{port_key, v4_key, v6_key, vlan_key};

/// What a region must contain for the filter to match some packet in it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Predicate {
    /// Anything may match.
    Any,
    /// The IPv4 address (as source, destination, or ARP address).
    Host4([u8; 4]),
    /// The IPv6 address.
    Host6([u8; 16]),
    /// The TCP/UDP/SCTP port.
    Port(u16),
    /// The IP protocol (or IPv6 Next Header).
    Proto(u8),
    /// The VLAN id.
    Vlan(u16),
    /// All of these.
    And(Vec<Predicate>),
    /// One of these.
    Or(Vec<Predicate>),
}

impl Predicate {
    /// Whether some packet of `r` may match (false = certainly none).
    pub fn may_match(&self, r: &Region) -> bool {
        match self {
            Predicate::Any => true,
            Predicate::Host4(a) => r.may_have_key(v4_key(*a)),
            Predicate::Host6(a) => r.may_have_key(v6_key(a)),
            Predicate::Port(p) => r.may_have_key(port_key(*p)),
            Predicate::Proto(p) => r.may_have_proto(*p),
            Predicate::Vlan(v) => r.may_have_key(vlan_key(*v)),
            Predicate::And(v) => v.iter().all(|p| p.may_match(r)),
            Predicate::Or(v) => v.iter().any(|p| p.may_match(r)),
        }
    }

    /// Whether the predicate can prune anything.
    pub fn prunes(&self) -> bool {
        match self {
            Predicate::Any => false,
            Predicate::And(v) => v.iter().any(Predicate::prunes),
            Predicate::Or(v) => v.iter().all(Predicate::prunes),
            _ => true,
        }
    }
}

/// Drops what prunes nothing: `Any` in a conjunction, and a disjunction that holds `Any`.
pub(crate) fn simplify(p: Predicate) -> Predicate {
    match p {
        Predicate::And(v) => {
            let mut v: Vec<_> = v
                .into_iter()
                .map(simplify)
                .filter(|p| *p != Predicate::Any)
                .collect();
            match v.len() {
                0 => Predicate::Any,
                1 => v.pop().unwrap_or(Predicate::Any),
                _ => Predicate::And(v),
            }
        }
        Predicate::Or(v) => {
            let v: Vec<_> = v.into_iter().map(simplify).collect();
            if v.contains(&Predicate::Any) {
                Predicate::Any
            } else {
                Predicate::Or(v)
            }
        }
        p => p,
    }
}
