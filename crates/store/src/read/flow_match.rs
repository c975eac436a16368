//! What a connection must match to be listed ([`Selectors`]) and a tcpdump filter asked of a
//! connection ([`SessionFilter`]). The step from connections to their packets is
//! [`super::narrow`].

use std::net::IpAddr;

use corecap_linux::cbpf::{Meta, Program};
use corecap_wire::flow::{IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP};
use corecap_wire::name::Name;
use corecap_wire::{FlowKey, IpFamily};

use super::outcome::QueryError;
use crate::session::{Session, SessionName, ONE_WAY};

/// What a connection must match; every selector given must match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selectors {
    /// The Community ID (`1:...`), exactly.
    pub community_id: Option<String>,
    /// The TLS server name: a pattern ([`name_matches`]).
    pub sni: Option<String>,
    /// The DNS question's name: a pattern.
    pub dns: Option<String>,
    /// The HTTP request's Host: a pattern.
    pub http_host: Option<String>,
    /// Either end's address.
    pub host: Option<IpAddr>,
    /// Either end's port (TCP, UDP, SCTP).
    pub port: Option<u16>,
    /// A tcpdump filter, asked of the connection (see [`SessionFilter`]).
    pub filter: Option<String>,
}

impl Selectors {
    /// Whether a selector only sessions can answer is given (a Community ID or a name),
    /// so a query must find the connections first.
    pub fn by_session(&self) -> bool {
        self.community_id.is_some()
            || self.sni.is_some()
            || self.dns.is_some()
            || self.http_host.is_some()
    }

    /// Whether `s` matches every selector but the filter.
    pub fn matches(&self, s: &Session) -> bool {
        let k = &s.key;
        let names = |want: &Option<String>, got: Option<&[u8]>| match want {
            None => true,
            Some(p) => got.is_some_and(|n| name_matches(p, n)),
        };
        self.community_id
            .as_deref()
            .is_none_or(|c| c == s.community_id.as_str())
            && names(&self.sni, tls_name(&s.name))
            && names(&self.dns, dns_name(&s.name))
            && (names(&self.http_host, http_host(&s.name))
                || names(&self.http_host, http_host(&s.name).map(|h| host_parts(h).0)))
            && self.host.is_none_or(|h| k.src_ip() == h || k.dst_ip() == h)
            && self
                .port
                .is_none_or(|p| has_ports(k.proto) && (k.sport == p || k.dport == p))
    }
}

fn tls_name(n: &SessionName) -> Option<&[u8]> {
    match n {
        SessionName::Tls(c) => non_empty(&c.sni),
        _ => None,
    }
}

fn dns_name(n: &SessionName) -> Option<&[u8]> {
    match n {
        SessionName::Dns(q) => non_empty(&q.name),
        _ => None,
    }
}

fn http_host(n: &SessionName) -> Option<&[u8]> {
    match n {
        SessionName::Http(r) => non_empty(&r.host),
        _ => None,
    }
}

/// A Host header's name and port: `example.com:8080` is (`example.com`, 8080), an IPv6
/// literal keeps its brackets (`[::1]:80` is (`[::1]`, 80)); a port that is not a number
/// is left in the name.
pub fn host_parts(host: &[u8]) -> (&[u8], Option<u16>) {
    let after_literal = match host.first() {
        Some(b'[') => host
            .iter()
            .position(|&b| b == b']')
            .map_or(host.len(), |i| i + 1),
        _ => 0,
    };
    match host[after_literal..].iter().rposition(|&b| b == b':') {
        Some(i) => {
            let at = after_literal + i;
            let port = std::str::from_utf8(&host[at + 1..])
                .ok()
                .and_then(|p| p.parse().ok());
            match port {
                Some(p) => (&host[..at], Some(p)),
                None => (host, None),
            }
        }
        None => (host, None),
    }
}

fn non_empty<const N: usize>(n: &Name<N>) -> Option<&[u8]> {
    (!n.is_empty()).then(|| n.as_bytes())
}

/// Whether the protocol has ports a `--port` or `port` test reads.
pub(crate) fn has_ports(proto: u8) -> bool {
    matches!(proto, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP)
}

/// Whether `name` matches `pattern`: ASCII letters in either case, `*` any run of bytes
/// (none too), every other byte itself; a final dot on either is ignored (`example.com.`
/// is `example.com`). So `*.example.com` matches `www.example.com`, not `example.com`.
pub fn name_matches(pattern: &str, name: &[u8]) -> bool {
    let p = pattern.as_bytes();
    let p = p.strip_suffix(b".").unwrap_or(p);
    let n = name.strip_suffix(b".").unwrap_or(name);
    let (mut pi, mut ni) = (0, 0);
    // Where the last `*` was, and the name position it now stands for up to.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi].eq_ignore_ascii_case(&n[ni]) {
            pi += 1;
            ni += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// A tcpdump filter asked of a connection rather than of a packet: the filter runs on a
/// made-up frame of each direction, and the connection matches when either passes.
///
/// The frame is Ethernet (zero MAC addresses), the connection's 802.1Q tag when it has a
/// VLAN, an IPv4 or IPv6 header with its addresses and protocol (no options, no extension
/// headers, not a fragment, TTL 64), and a transport header: TCP with its ports and the
/// OR of every TCP flag the connection saw, UDP or SCTP with its ports, ICMP with the type
/// of that direction's messages. So the filter can ask about addresses, nets, ports,
/// protocols, the VLAN and TCP flags (`tcp[tcpflags] & tcp-rst != 0`: was a RST seen). It
/// cannot ask about what a frame has and a connection does not: payload bytes, lengths
/// (`len`, `greater`), MAC addresses, TTLs, IP options, or the link type the packets were
/// captured on (every connection is asked as Ethernet).
#[derive(Clone, Debug, Default)]
pub struct SessionFilter {
    program: Option<Program>,
}

impl SessionFilter {
    /// Compiles `expr` (None or blank: every connection matches).
    pub fn new(expr: Option<&str>) -> Result<SessionFilter, QueryError> {
        let Some(expr) = expr.filter(|e| !e.trim().is_empty()) else {
            return Ok(SessionFilter::default());
        };
        let lt = corecap_wire::pcapng::LINKTYPE_ETHERNET;
        let insns = corecap_linux::filter::compile_for_file(lt, false, 262_144, expr)
            .map_err(|e| QueryError::Filter(corecap_linux::error_chain(&e)))?;
        let p = Program::new(insns).map_err(|e| QueryError::Filter(e.to_string()))?;
        Ok(SessionFilter { program: Some(p) })
    }

    /// Whether either direction of `s` passes.
    pub fn matches(&self, s: &Session) -> bool {
        let Some(p) = &self.program else {
            return true;
        };
        let ways: &[bool] = if s.flags & ONE_WAY != 0 {
            &[false]
        } else {
            &[false, true]
        };
        ways.iter().any(|&back| {
            let f = frame(s, back);
            let protocol = u16::from_be_bytes([f[12], f[13]]);
            let meta = Meta {
                vlan: None,
                queue: 0,
                protocol,
            };
            p.run(&f, f.len() as u32, &meta) != 0
        })
    }
}

/// The made-up frame of one direction of `s` (see [`SessionFilter`]).
fn frame(s: &Session, back: bool) -> Vec<u8> {
    let k = if back { s.key.reversed() } else { s.key };
    let l4 = transport(s, &k, back);
    let mut f = vec![0u8; 12];
    if k.vlan != 0 {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&k.vlan.to_be_bytes());
    }
    match k.family {
        IpFamily::V4 => {
            f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
            f.extend_from_slice(&(20 + l4.len() as u16).to_be_bytes());
            f.extend_from_slice(&[0, 0, 0, 0, 64, k.proto, 0, 0]);
            f.extend_from_slice(&k.src[..4]);
            f.extend_from_slice(&k.dst[..4]);
        }
        IpFamily::V6 => {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
            f.extend_from_slice(&[k.proto, 64]);
            f.extend_from_slice(&k.src);
            f.extend_from_slice(&k.dst);
        }
    }
    f.extend_from_slice(&l4);
    f
}

/// The transport header of the made-up frame of `k`, a direction of `s`.
fn transport(s: &Session, k: &FlowKey, back: bool) -> Vec<u8> {
    let ports = || [k.sport.to_be_bytes(), k.dport.to_be_bytes()].concat();
    match k.proto {
        IPPROTO_TCP => {
            let mut t = ports();
            t.extend_from_slice(&[0; 8]);
            t.extend_from_slice(&[0x50, s.tcp_flags, 0xff, 0xff, 0, 0, 0, 0]);
            t
        }
        IPPROTO_UDP => {
            let mut t = ports();
            t.extend_from_slice(&[0, 8, 0, 0]);
            t
        }
        // The key's ports are the message type and its counterpart (a one-way message:
        // its type and code), as its Community ID takes them.
        IPPROTO_ICMP | IPPROTO_ICMPV6 if s.flags & ONE_WAY != 0 => {
            vec![s.key.sport as u8, s.key.dport as u8, 0, 0, 0, 0, 0, 0]
        }
        IPPROTO_ICMP | IPPROTO_ICMPV6 => {
            let ty = if back { s.key.dport } else { s.key.sport };
            vec![ty as u8, 0, 0, 0, 0, 0, 0, 0]
        }
        IPPROTO_SCTP => {
            let mut t = ports();
            t.extend_from_slice(&[0; 8]);
            t
        }
        _ => vec![0; 8],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Host is split into its name and port as ECS's `url.domain` and `url.port` want;
    /// what is not a port stays in the name.
    #[test]
    fn test_host_parts() {
        let cases: [(&[u8], &[u8], Option<u16>); 7] = [
            (b"example.com", b"example.com", None),
            (b"localhost:8000", b"localhost", Some(8000)),
            (b"[::1]:80", b"[::1]", Some(80)),
            (b"[::1]", b"[::1]", None),
            (b"host:", b"host:", None),
            (b"host:99999", b"host:99999", None),
            (b"", b"", None),
        ];
        for (host, name, port) in cases {
            assert_eq!(
                host_parts(host),
                (name, port),
                "{:?}",
                String::from_utf8_lossy(host)
            );
        }
    }

    #[test]
    fn test_name_patterns() {
        assert!(name_matches("example.com", b"EXAMPLE.com"));
        assert!(name_matches("example.com.", b"example.com"));
        assert!(name_matches("*.example.com", b"www.example.com"));
        assert!(!name_matches("*.example.com", b"example.com"));
        assert!(name_matches("*", b"anything"));
        assert!(name_matches("w*w.*.c*m", b"www.example.com"));
        assert!(!name_matches("example.co", b"example.com"));
        assert!(!name_matches("example.com", b"example.co"));
        assert!(name_matches("*ample*", b"example.com"));
        assert!(!name_matches("a*b", b"ac"));
    }
}
