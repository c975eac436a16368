//! A connection as a JSON document ([`FlowDoc`]), with the field names of the Elastic
//! Common Schema (ECS) where it has one, so a log shipper maps it without code:
//!
//! | field | ECS | what |
//! |---|---|---|
//! | `@timestamp`, `event.start`, `event.end` | yes | first and last packet, RFC 3339 UTC, ns |
//! | `event.duration` | yes | last − first, ns |
//! | `network.community_id`, `network.transport`, `network.iana_number`, `network.type` | yes | Community ID v1; `tcp`, `udp`, `icmp`, `ipv6-icmp`, `sctp` or the number; `ipv4`/`ipv6` |
//! | `network.packets`, `network.bytes`, `network.vlan.id` | yes | both ways; the VLAN when tagged |
//! | `source.ip`, `source.port`, `source.packets`, `source.bytes` | yes | the originator and what it sent (ports for TCP, UDP, SCTP) |
//! | `destination.*` | yes | the responder, the same |
//! | `dns.question.name`, `dns.question.type` | yes | the first DNS question (type as `A`, `AAAA`, … or `TYPE65534`) |
//! | `tls.client.server_name` | yes | the ClientHello's SNI |
//! | `http.request.method`, `url.domain`, `url.port`, `url.path`, `url.query`, `url.original` | yes | the HTTP/1.x request's method, its Host split into name and port, its target split into path and query (of an absolute URI, after its authority), and the target as sent |
//! | `corecap.*` | no | `first_ns`, `last_ns`, `tcp_flags` (letters of the flags seen, `FSRPAUEC`), `began_syn`, `ended_fin_rst`, `one_way`, `segments` (files it was recorded in), `tls_alpn`, `packets_seen` and `bytes_seen` (both ways, with what a per-flow cutoff left out: `network.packets` and `network.bytes` are what the files hold) |
//!
//! Names are shown escaped ([`corecap_wire::name::Escaped`]): printable ASCII as it is, a
//! backslash doubled, every other byte `\xNN`.

use serde::{Deserialize, Serialize};

use super::flow_match::host_parts;
use super::flows::Flow;
use super::time::utc_text;
use crate::session::{SessionName, ENDED_FIN_RST, ONE_WAY};
use corecap_wire::flow::{IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP};
use corecap_wire::name::Escaped;
use corecap_wire::IpFamily;

/// One connection, as a JSON document (see the module doc).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct FlowDoc {
    #[serde(rename = "@timestamp")]
    pub timestamp: String,
    pub event: EventDoc,
    pub network: NetworkDoc,
    pub source: EndDoc,
    pub destination: EndDoc,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub dns: Option<DnsDoc>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tls: Option<TlsDoc>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub http: Option<HttpDoc>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub url: Option<UrlDoc>,
    pub corecap: CorecapDoc,
}

/// `event.*`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct EventDoc {
    pub start: String,
    pub end: String,
    pub duration: u64,
}

/// `network.*`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct NetworkDoc {
    pub community_id: String,
    pub transport: String,
    pub iana_number: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub packets: u64,
    pub bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub vlan: Option<VlanDoc>,
}

/// `network.vlan.*`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct VlanDoc {
    pub id: String,
}

/// `source.*` and `destination.*`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct EndDoc {
    pub ip: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub port: Option<u16>,
    pub packets: u64,
    pub bytes: u64,
}

/// `dns.*`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct DnsDoc {
    pub question: DnsQuestionDoc,
}

/// `dns.question.*`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct DnsQuestionDoc {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
}

/// `tls.*`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct TlsDoc {
    pub client: TlsClientDoc,
}

/// `tls.client.*`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct TlsClientDoc {
    pub server_name: String,
}

/// `http.*`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct HttpDoc {
    pub request: HttpRequestDoc,
}

/// `http.request.*`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct HttpRequestDoc {
    pub method: String,
}

/// `url.*`: the request's Host split into `domain` and `port` (as ECS has them), its
/// target's path and query, and the target as sent (`original`: an absolute URI when the
/// request went to a proxy).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct UrlDoc {
    pub domain: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    #[serde(default)]
    pub original: String,
}

/// A request target's path and query: of an absolute URI (`http://host/p?q`, sent to a
/// proxy) the part after its authority; the query is what follows the first `?`.
fn target_parts(target: &[u8]) -> (&[u8], Option<&[u8]>) {
    let lower: Vec<u8> = target.iter().take(8).map(u8::to_ascii_lowercase).collect();
    let path = match [&b"http://"[..], b"https://"]
        .iter()
        .find(|s| lower.starts_with(s))
    {
        Some(scheme) => {
            let rest = &target[scheme.len()..];
            rest.iter()
                .position(|&b| b == b'/')
                .map_or(&b"/"[..], |i| &rest[i..])
        }
        None => target,
    };
    match path.iter().position(|&b| b == b'?') {
        Some(i) => (&path[..i], Some(&path[i + 1..])),
        None => (path, None),
    }
}

/// `corecap.*`: what ECS has no field for.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct CorecapDoc {
    pub first_ns: u64,
    pub last_ns: u64,
    pub tcp_flags: String,
    pub began_syn: bool,
    pub ended_fin_rst: bool,
    pub one_way: bool,
    pub segments: u32,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tls_alpn: Option<String>,
    #[serde(default)]
    pub packets_seen: u64,
    #[serde(default)]
    pub bytes_seen: u64,
}

impl FlowDoc {
    /// The document of `f`.
    pub fn of(f: &Flow) -> FlowDoc {
        let s = &f.session;
        let k = &s.key;
        let ported = matches!(k.proto, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP);
        let end = |ip: std::net::IpAddr, port: u16, d: usize| EndDoc {
            ip: ip.to_string(),
            port: ported.then_some(port),
            packets: s.packets[d],
            bytes: s.bytes[d],
        };
        let mut doc = FlowDoc {
            timestamp: utc_text(s.first_ns),
            event: EventDoc {
                start: utc_text(s.first_ns),
                end: utc_text(s.last_ns),
                duration: s.last_ns.saturating_sub(s.first_ns),
            },
            network: NetworkDoc {
                community_id: s.community_id.as_str().to_owned(),
                transport: transport_name(k.proto),
                iana_number: k.proto.to_string(),
                kind: if k.family == IpFamily::V4 {
                    "ipv4"
                } else {
                    "ipv6"
                }
                .to_owned(),
                packets: s.packets[0] + s.packets[1],
                bytes: s.bytes[0] + s.bytes[1],
                vlan: (k.vlan != 0).then(|| VlanDoc {
                    id: k.vlan.to_string(),
                }),
            },
            source: end(k.src_ip(), k.sport, 0),
            destination: end(k.dst_ip(), k.dport, 1),
            dns: None,
            tls: None,
            http: None,
            url: None,
            corecap: CorecapDoc {
                first_ns: s.first_ns,
                last_ns: s.last_ns,
                tcp_flags: tcp_flag_letters(s.tcp_flags),
                began_syn: s.began_syn(),
                ended_fin_rst: s.flags & ENDED_FIN_RST != 0,
                one_way: s.flags & ONE_WAY != 0,
                segments: f.segments,
                tls_alpn: None,
                packets_seen: s.packets_seen(),
                bytes_seen: s.bytes_seen(),
            },
        };
        doc.name(&s.name);
        doc
    }

    fn name(&mut self, n: &SessionName) {
        let text = |b: &[u8]| Escaped(b).to_string();
        match n {
            SessionName::None => {}
            SessionName::Dns(q) => {
                self.dns = Some(DnsDoc {
                    question: DnsQuestionDoc {
                        name: text(q.name.as_bytes()),
                        kind: dns_type(q.qtype),
                    },
                })
            }
            SessionName::Tls(c) => {
                self.tls = Some(TlsDoc {
                    client: TlsClientDoc {
                        server_name: text(c.sni.as_bytes()),
                    },
                });
                self.corecap.tls_alpn = (!c.alpn.is_empty()).then(|| text(c.alpn.as_bytes()));
            }
            SessionName::Http(r) => {
                self.http = Some(HttpDoc {
                    request: HttpRequestDoc {
                        method: text(r.method.as_bytes()),
                    },
                });
                let (domain, port) = host_parts(r.host.as_bytes());
                let (path, query) = target_parts(r.path.as_bytes());
                self.url = Some(UrlDoc {
                    domain: text(domain),
                    port,
                    path: text(path),
                    query: query.map(text),
                    original: text(r.path.as_bytes()),
                });
            }
        }
    }

    /// The name shown in a table: the SNI, DNS question, or HTTP method, Host and path.
    pub fn name_text(&self) -> String {
        if let Some(t) = &self.tls {
            return t.client.server_name.clone();
        }
        if let Some(d) = &self.dns {
            return format!("{} {}", d.question.kind, d.question.name);
        }
        match (&self.http, &self.url) {
            // A proxy's request names its whole URI already.
            (Some(h), Some(u)) if u.original.contains("://") => {
                format!("{} {}", h.request.method, u.original)
            }
            (Some(h), Some(u)) => {
                let port = u.port.map(|p| format!(":{p}")).unwrap_or_default();
                let query = u
                    .query
                    .as_ref()
                    .map(|q| format!("?{q}"))
                    .unwrap_or_default();
                format!("{} {}{port}{}{query}", h.request.method, u.domain, u.path)
            }
            _ => String::new(),
        }
    }
}

/// ECS's `network.transport`: the IANA keyword in lower case, or the number.
fn transport_name(proto: u8) -> String {
    match proto {
        IPPROTO_TCP => "tcp".into(),
        IPPROTO_UDP => "udp".into(),
        IPPROTO_ICMP => "icmp".into(),
        IPPROTO_ICMPV6 => "ipv6-icmp".into(),
        IPPROTO_SCTP => "sctp".into(),
        p => p.to_string(),
    }
}

/// A DNS type's mnemonic, or `TYPEn` (RFC 3597).
fn dns_type(t: u16) -> String {
    let m = match t {
        1 => "A",
        2 => "NS",
        5 => "CNAME",
        6 => "SOA",
        12 => "PTR",
        15 => "MX",
        16 => "TXT",
        28 => "AAAA",
        33 => "SRV",
        35 => "NAPTR",
        43 => "DS",
        48 => "DNSKEY",
        64 => "SVCB",
        65 => "HTTPS",
        252 => "AXFR",
        255 => "ANY",
        _ => return format!("TYPE{t}"),
    };
    m.to_owned()
}

/// The TCP flags seen as letters, tcpdump's order: FIN SYN RST PSH ACK URG ECE CWR.
pub fn tcp_flag_letters(f: u8) -> String {
    b"FSRPAUEC"
        .iter()
        .enumerate()
        .filter(|(i, _)| f & (1 << i) != 0)
        .map(|(_, &c)| c as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request target's path and query, of an origin-form target and of the absolute
    /// URI a proxy is sent.
    #[test]
    fn test_target_parts() {
        type Case<'a> = (&'a [u8], &'a [u8], Option<&'a [u8]>);
        let cases: [Case; 5] = [
            (b"/", b"/", None),
            (b"/search?q=a?b", b"/search", Some(b"q=a?b")),
            (
                b"http://h.example//a/b.asp?user=t",
                b"//a/b.asp",
                Some(b"user=t"),
            ),
            (b"HTTPS://h.example", b"/", None),
            (b"*", b"*", None),
        ];
        for (target, path, query) in cases {
            assert_eq!(
                target_parts(target),
                (path, query),
                "{:?}",
                String::from_utf8_lossy(target)
            );
        }
    }
}
