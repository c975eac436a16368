//! What a tcpdump filter lets the index prune on.
//!
//! [`Predicate::from_filter`] reads a libpcap expression conservatively: `host`, `src host`,
//! `dst host`, `net A/N` (N ≥ 24), `port`, `src/dst port`, `portrange` (at most 64 ports),
//! `tcp`/`udp`/`sctp`/`icmp`/`icmp6`/`igmp`, `ip proto N`, `ip6 proto N`, `proto N`,
//! `vlan N`, combined with `and`/`&&`, `or`/`||`, `not`/`!` and parentheses. A negation,
//! and any primitive it does not know, can match anything ([`Predicate::Any`]); a word it
//! cannot parse at all makes the whole filter `Any`. After `vlan`, libpcap reads the rest of
//! the expression past the tag, so in an expression with `vlan` only the `vlan N`
//! primitives prune; with `mpls`, `pppoes`, `geneve` or `vxlan` nothing does.
//!
//! The predicate only says where matches cannot be. The query still runs the compiled
//! filter on every packet it reads, so the answer is exact.

use crate::format::Region;
use crate::key::{port_key, v4_key, v6_key, vlan_key};

/// What a region must contain for the filter to match some packet in it.
#[derive(Clone, Debug, PartialEq, Eq)]
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

    /// The predicate of a tcpdump filter expression (`Any` for an empty one).
    pub fn from_filter(expr: &str) -> Predicate {
        let Some(toks) = tokenize(expr) else {
            return Predicate::Any;
        };
        if toks.is_empty() {
            return Predicate::Any;
        }
        let encap = toks.iter().any(|t| {
            matches!(
                t.as_str(),
                "mpls" | "pppoes" | "pppoed" | "geneve" | "vxlan"
            )
        });
        if encap {
            return Predicate::Any;
        }
        let vlan = toks.iter().any(|t| t == "vlan");
        let mut p = Parser {
            toks: &toks,
            at: 0,
            vlan_only: vlan,
            last: None,
        };
        match p.or() {
            Some(pred) if p.at == toks.len() => simplify(pred),
            _ => Predicate::Any,
        }
    }
}

fn simplify(p: Predicate) -> Predicate {
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

/// Splits on whitespace and parentheses; `&&`, `||` and `!` become words. Characters of
/// libpcap's arithmetic (`[`, `]`, `=`, `<`, `>`, `&`, `|`, `+`...) give None.
fn tokenize(s: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars().peekable();
    let flush = |cur: &mut String, out: &mut Vec<String>| {
        if !cur.is_empty() {
            out.push(std::mem::take(cur).to_ascii_lowercase());
        }
    };
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => flush(&mut cur, &mut out),
            '(' | ')' => {
                flush(&mut cur, &mut out);
                out.push(c.to_string());
            }
            '&' if chars.peek() == Some(&'&') => {
                chars.next();
                flush(&mut cur, &mut out);
                out.push("and".into());
            }
            '|' if chars.peek() == Some(&'|') => {
                chars.next();
                flush(&mut cur, &mut out);
                out.push("or".into());
            }
            '!' if chars.peek() != Some(&'=') => {
                flush(&mut cur, &mut out);
                out.push("not".into());
            }
            c if c.is_ascii_alphanumeric() || matches!(c, '.' | ':' | '/' | '-' | '_') => {
                cur.push(c);
            }
            _ => return None,
        }
    }
    flush(&mut cur, &mut out);
    Some(out)
}

/// The kind of the last primitive, for libpcap's bare values (`host a or b`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Host,
    Net,
    Port,
}

struct Parser<'a> {
    toks: &'a [String],
    at: usize,
    /// `vlan` occurs: only `vlan N` prunes.
    vlan_only: bool,
    last: Option<Kind>,
}

const QUALIFIERS: &[&str] = &[
    "src",
    "dst",
    "ip",
    "ip6",
    "tcp",
    "udp",
    "sctp",
    "arp",
    "rarp",
    "ether",
    "host",
    "net",
    "port",
    "portrange",
    "proto",
    "vlan",
    "icmp",
    "icmp6",
    "igmp",
    "inbound",
    "outbound",
    "less",
    "greater",
    "broadcast",
    "multicast",
    "gateway",
    "mask",
    "len",
    "link",
    "ra",
    "ta",
    "addr1",
    "addr2",
    "addr3",
    "addr4",
    "wlan",
    "type",
    "subtype",
    "dir",
    "decnet",
    "iso",
    "esis",
    "isis",
    "clnp",
    "stp",
    "ipx",
    "netbeui",
    "atalk",
    "aarp",
    "lat",
    "sca",
    "moprc",
    "mopdl",
    "protochain",
    "llc",
    "ifname",
    "on",
    "rnr",
    "rulenum",
    "reason",
    "rset",
    "srnr",
    "subrulenum",
    "action",
    "ah",
    "esp",
    "pim",
    "vrrp",
    "carp",
];

impl Parser<'_> {
    fn peek(&self) -> Option<&str> {
        self.toks.get(self.at).map(String::as_str)
    }

    fn next(&mut self) -> Option<&str> {
        let t = self.toks.get(self.at).map(String::as_str);
        self.at += 1;
        t
    }

    fn or(&mut self) -> Option<Predicate> {
        let mut v = vec![self.and()?];
        while self.peek() == Some("or") {
            self.at += 1;
            v.push(self.and()?);
        }
        Some(if v.len() == 1 {
            v.remove(0)
        } else {
            Predicate::Or(v)
        })
    }

    fn and(&mut self) -> Option<Predicate> {
        let mut v = vec![self.unary()?];
        // libpcap takes juxtaposed primitives only after and/or; anything else ends here.
        while self.peek() == Some("and") {
            self.at += 1;
            v.push(self.unary()?);
        }
        Some(if v.len() == 1 {
            v.remove(0)
        } else {
            Predicate::And(v)
        })
    }

    fn unary(&mut self) -> Option<Predicate> {
        match self.peek()? {
            "not" => {
                self.at += 1;
                self.unary()?;
                Some(Predicate::Any)
            }
            "(" => {
                self.at += 1;
                let p = self.or()?;
                (self.next()? == ")").then_some(p)
            }
            _ => self.primitive(),
        }
    }

    /// One primitive: qualifiers then a value, or a protocol name alone.
    fn primitive(&mut self) -> Option<Predicate> {
        let mut words: Vec<&str> = Vec::new();
        while let Some(t) = self.peek() {
            if matches!(t, "and" | "or") && words.last() == Some(&"src") {
                // `src or dst` / `src and dst`: one direction qualifier.
                if self.toks.get(self.at + 1).map(String::as_str) == Some("dst") {
                    self.at += 1;
                    continue;
                }
            }
            if matches!(t, "and" | "or" | "not" | "(" | ")") {
                break;
            }
            let qualifier = QUALIFIERS.contains(&t);
            words.push(self.toks[self.at].as_str());
            self.at += 1;
            if !qualifier {
                // A value ends the primitive.
                break;
            }
            if words.last() == Some(&"net")
                && self.toks.get(self.at + 1).map(String::as_str) == Some("mask")
            {
                // net A mask M: four words.
                words.push(self.toks.get(self.at)?.as_str());
                words.push(self.toks.get(self.at + 1)?.as_str());
                words.push(self.toks.get(self.at + 2)?.as_str());
                self.at += 3;
                break;
            }
        }
        let p = self.meaning(&words)?;
        if self.vlan_only && !matches!(p, Predicate::Vlan(_)) {
            return Some(Predicate::Any);
        }
        Some(p)
    }

    /// The predicate of one primitive's words; None when it is not tcpdump syntax this
    /// parser can follow.
    fn meaning(&mut self, w: &[&str]) -> Option<Predicate> {
        let (&last, quals) = w.split_last()?;
        let is_qual = QUALIFIERS.contains(&last);
        // Drop direction qualifiers: the sets do not keep direction.
        let q: Vec<&str> = quals
            .iter()
            .copied()
            .filter(|q| !matches!(*q, "src" | "dst"))
            .collect();
        if is_qual {
            // A protocol alone (`tcp`, `udp`...), or a keyword without its value.
            if !q.is_empty() {
                return Some(Predicate::Any);
            }
            self.last = None;
            return Some(match last {
                "tcp" => Predicate::Proto(6),
                "udp" => Predicate::Proto(17),
                "sctp" => Predicate::Proto(132),
                "icmp" => Predicate::Proto(1),
                "icmp6" => Predicate::Proto(58),
                "igmp" => Predicate::Proto(2),
                "vlan" => Predicate::Any,
                "src" | "dst" => return None,
                _ => Predicate::Any,
            });
        }
        // `last` is a value.
        let (proto, kind): (Option<&str>, Option<&str>) = match q.as_slice() {
            [] => (None, None),
            [k] if matches!(*k, "host" | "net" | "port" | "portrange" | "proto" | "vlan") => {
                (None, Some(*k))
            }
            [p] => (Some(*p), None),
            [p, k] => (Some(*p), Some(*k)),
            _ => return Some(Predicate::Any),
        };
        let kind = match kind {
            Some(k) => k,
            // A bare value: libpcap's last kind, or a host address.
            None => match self.last {
                Some(Kind::Port) => "port",
                Some(Kind::Net) => "net",
                _ if proto.is_none() && last.parse::<std::net::IpAddr>().is_ok() => "host",
                _ => return Some(Predicate::Any),
            },
        };
        self.last = match kind {
            "host" => Some(Kind::Host),
            "net" => Some(Kind::Net),
            "port" | "portrange" => Some(Kind::Port),
            _ => None,
        };
        let pred = match kind {
            "host" => match proto {
                None | Some("ip" | "ip6" | "arp" | "rarp") => host(last),
                _ => Predicate::Any,
            },
            "net" => match proto {
                None | Some("ip" | "arp" | "rarp") => net(last, w),
                _ => Predicate::Any,
            },
            "port" | "portrange" => {
                let ports = if kind == "port" {
                    port(last)
                } else {
                    portrange(last)
                };
                match proto {
                    None | Some("ip" | "ip6") => ports,
                    Some("tcp") => Predicate::And(vec![Predicate::Proto(6), ports]),
                    Some("udp") => Predicate::And(vec![Predicate::Proto(17), ports]),
                    Some("sctp") => Predicate::And(vec![Predicate::Proto(132), ports]),
                    _ => Predicate::Any,
                }
            }
            "proto" => match (proto, number(last)) {
                (None | Some("ip" | "ip6"), Some(n)) if n < 256 => Predicate::Proto(n as u8),
                (None | Some("ip" | "ip6"), None) => match last {
                    "tcp" => Predicate::Proto(6),
                    "udp" => Predicate::Proto(17),
                    "icmp" => Predicate::Proto(1),
                    "sctp" => Predicate::Proto(132),
                    _ => Predicate::Any,
                },
                _ => Predicate::Any,
            },
            "vlan" => match (proto, number(last)) {
                (None, Some(n)) if n < 4096 => Predicate::Vlan(n as u16),
                _ => Predicate::Any,
            },
            _ => Predicate::Any,
        };
        Some(pred)
    }
}

fn number(s: &str) -> Option<u32> {
    if let Some(h) = s.strip_prefix("0x") {
        u32::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

fn host(v: &str) -> Predicate {
    match v.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(a)) => Predicate::Host4(a.octets()),
        Ok(std::net::IpAddr::V6(a)) => Predicate::Host6(a.octets()),
        // A name: libpcap resolves it, possibly to several addresses; do not prune.
        Err(_) => Predicate::Any,
    }
}

fn port(v: &str) -> Predicate {
    match number(v) {
        Some(p) if p < 65536 => Predicate::Port(p as u16),
        _ => Predicate::Any,
    }
}

fn portrange(v: &str) -> Predicate {
    let Some((a, b)) = v.split_once('-') else {
        return Predicate::Any;
    };
    match (number(a), number(b)) {
        (Some(a), Some(b)) if a <= b && b < 65536 && b - a < 64 => {
            Predicate::Or((a..=b).map(|p| Predicate::Port(p as u16)).collect())
        }
        _ => Predicate::Any,
    }
}

/// `net A/N` with N ≥ 24 (at most 256 addresses), or `net A mask 255.255.255.X`.
fn net(v: &str, w: &[&str]) -> Predicate {
    let (addr, len) = if let Some((a, l)) = v.split_once('/') {
        (a, number(l))
    } else if let [.., a, "mask", m] = w {
        let Ok(m) = m.parse::<std::net::Ipv4Addr>() else {
            return Predicate::Any;
        };
        let m = u32::from(m);
        if m.leading_ones() + m.trailing_zeros() != 32 {
            return Predicate::Any;
        }
        (*a, Some(m.leading_ones()))
    } else {
        // `net 10.1.2` and friends: libpcap's partial addresses; do not prune.
        return match v.parse::<std::net::Ipv4Addr>() {
            Ok(a) => Predicate::Host4(a.octets()),
            Err(_) => Predicate::Any,
        };
    };
    let (Ok(a), Some(len)) = (addr.parse::<std::net::Ipv4Addr>(), len) else {
        return Predicate::Any;
    };
    if !(24..=32).contains(&len) {
        return Predicate::Any;
    }
    let base = u32::from(a) & (u32::MAX << (32 - len));
    let n = 1u32 << (32 - len);
    Predicate::Or(
        (0..n)
            .map(|i| Predicate::Host4((base | i).to_be_bytes()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use Predicate::*;

    fn p(s: &str) -> Predicate {
        Predicate::from_filter(s)
    }

    #[test]
    fn test_parse_primitives() {
        assert_eq!(p("host 10.0.0.1"), Host4([10, 0, 0, 1]));
        assert_eq!(p("src host 10.0.0.1"), Host4([10, 0, 0, 1]));
        assert_eq!(p("port 53"), Port(53));
        assert_eq!(p("tcp port 80"), And(vec![Proto(6), Port(80)]));
        assert_eq!(p("udp"), Proto(17));
        assert_eq!(p("ip proto 47"), Proto(47));
        assert_eq!(p("host ::1"), Host6(std::net::Ipv6Addr::LOCALHOST.octets()));
        assert_eq!(
            p("host 10.0.0.1 and (port 1 || port 2)"),
            And(vec![Host4([10, 0, 0, 1]), Or(vec![Port(1), Port(2)])])
        );
        assert_eq!(
            p("host 10.0.0.1 or 10.0.0.2"),
            Or(vec![Host4([10, 0, 0, 1]), Host4([10, 0, 0, 2])])
        );
        assert_eq!(p("port 53 or 54"), Or(vec![Port(53), Port(54)]));
        assert_eq!(p("src or dst port 7"), Port(7));
    }

    #[test]
    fn test_parse_conservative() {
        for e in [
            "",
            "not host 10.0.0.1",
            "tcp[13] & 2 != 0",
            "host example.com",
            "ether host 00:11:22:33:44:55",
            "net 10.0.0.0/8",
            "host 10.0.0.1 or ip",
            "mpls and host 10.0.0.1",
            "less 100",
            "host 10.0.0.1 foo",
            "((host 10.0.0.1)",
        ] {
            assert!(!p(e).prunes(), "{e}: {:?}", p(e));
        }
        assert_eq!(p("host 10.0.0.1 and not port 22"), Host4([10, 0, 0, 1]));
        assert_eq!(p("vlan 100 and host 10.0.0.1"), Vlan(100));
        assert_eq!(
            p("net 10.0.0.0/31"),
            Or(vec![Host4([10, 0, 0, 0]), Host4([10, 0, 0, 1])])
        );
        assert_eq!(p("portrange 10-11"), Or(vec![Port(10), Port(11)]));
    }
}
