//! A query narrowed to the connections that selectors name: found from the sessions files
//! ([`super::flows`]), then read through the index with a filter of their keys, each packet
//! checked against its connection ([`super::session_match`]).

use std::fmt::Write as _;
use std::sync::Arc;

use corecap_wire::flow::{IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP};
use corecap_wire::{FlowKey, IpFamily};

use super::flow_match::{has_ports, Selectors};
use super::flows::{list, Flow, FlowSort, FlowSpec, FlowStats};
use super::outcome::{QueryError, QuerySpec};
use super::session_match::SessionMatch;

/// Most connections one query asks for by name: their keys become one filter program,
/// which libpcap compiles to a few instructions per connection (a program holds 4096).
pub const MAX_QUERY_FLOWS: usize = 128;

/// The query for exactly the packets of the connections of `spec`'s files that match
/// `select` and `spec`'s filter: found from the sessions files first, then read through
/// the index with a filter of their keys (ORed, and with `spec`'s filter) over the window
/// from the first connection's first packet to the last one's last, each packet checked
/// against its connection's key and time range ([`SessionMatch`]). More than
/// [`MAX_QUERY_FLOWS`] connections is an error that says how many matched.
pub fn narrow(spec: &QuerySpec, select: &Selectors) -> Result<(QuerySpec, FlowStats), QueryError> {
    let fs = FlowSpec {
        files: spec.files.clone(),
        from: spec.from,
        to: spec.to,
        select: Selectors {
            filter: spec.filter.clone(),
            ..select.clone()
        },
        kek: spec.kek.clone(),
        sort: FlowSort::First,
        limit: None,
        folders: Vec::new(),
        reach: false,
    };
    let (flows, stats) = list(&fs)?;
    if flows.len() > MAX_QUERY_FLOWS {
        return Err(QueryError::Other(format!(
            "the selectors match {} connections, more than the {MAX_QUERY_FLOWS} one query \
             asks for; narrow the window or the selectors (`corecap flows` lists them)",
            flows.len()
        )));
    }
    let mut q = spec.clone();
    if flows.is_empty() {
        q.files.clear();
        return Ok((q, stats));
    }
    let keys = keys_filter(&flows);
    q.filter = Some(
        match spec.filter.as_deref().filter(|f| !f.trim().is_empty()) {
            Some(user) => format!("({user}) and ({keys})"),
            None => keys,
        },
    );
    q.from = flows.iter().map(|f| f.session.first_ns).min().unwrap_or(0);
    q.to = flows
        .iter()
        .map(|f| f.session.last_ns)
        .max()
        .unwrap_or(u64::MAX - 1)
        + 1;
    let mut m = SessionMatch::new(flows.iter().map(|f| &f.session));
    m.user_filter = spec.filter.clone().filter(|f| !f.trim().is_empty());
    q.sessions = Some(Arc::new(m));
    Ok((q, stats))
}

/// A tcpdump filter that passes every packet of `flows` (and maybe others, which the
/// exact check drops): per connection its protocol, both addresses and both ports; the
/// connections on a VLAN after `vlan`, last, as libpcap reads every test after a `vlan`
/// past the tag.
pub fn keys_filter(flows: &[Flow]) -> String {
    let mut plain: Vec<String> = Vec::new();
    let mut tagged: Vec<String> = Vec::new();
    for f in flows {
        let k = f.session.table_key();
        let t = key_term(&k);
        let list = if k.vlan != 0 { &mut tagged } else { &mut plain };
        if !list.contains(&t) {
            list.push(t);
        }
    }
    let mut out = plain.join(" or ");
    if !tagged.is_empty() {
        if !out.is_empty() {
            out.push_str(" or ");
        }
        let _ = write!(out, "(vlan and ({}))", tagged.join(" or "));
    }
    out
}

fn key_term(k: &FlowKey) -> String {
    let v6 = k.family == IpFamily::V6;
    let mut t = match k.proto {
        IPPROTO_TCP => "tcp".to_owned(),
        IPPROTO_UDP => "udp".to_owned(),
        IPPROTO_SCTP => "sctp".to_owned(),
        IPPROTO_ICMP if !v6 => "icmp".to_owned(),
        IPPROTO_ICMPV6 if v6 => "icmp6".to_owned(),
        p if v6 => format!("ip6 proto {p}"),
        p => format!("ip proto {p}"),
    };
    let (a, b) = (k.src_ip(), k.dst_ip());
    let _ = write!(t, " and host {a}");
    if a != b {
        let _ = write!(t, " and host {b}");
    }
    if has_ports(k.proto) && (k.sport, k.dport) != (0, 0) {
        let _ = write!(t, " and port {}", k.sport);
        if k.sport != k.dport {
            let _ = write!(t, " and port {}", k.dport);
        }
    }
    format!("({t})")
}
