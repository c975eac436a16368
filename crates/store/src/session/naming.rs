//! Which parser a connection's first bytes go to, and where a name waits for more bytes.

use corecap_wire::name::{dns, http, tls, Parse};

use super::SessionName;

/// UDP or TCP port of DNS.
pub(crate) const DNS_PORT: u16 = 53;
/// UDP datagrams of a DNS connection looked at for a question before it is given up.
pub(crate) const UDP_TRIES: u8 = 4;

/// Where a connection's name stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Naming {
    /// Not looked for yet, or looked for in `tries` datagrams.
    Pending { tries: u8 },
    /// Waiting for more of the originator's bytes in stream `0` of the pool.
    Waiting(u16),
    /// Found or given up.
    Done,
}

fn map<T>(p: Parse<T>, f: impl FnOnce(T) -> SessionName) -> Parse<SessionName> {
    match p {
        Parse::Found(t) => Parse::Found(f(t)),
        Parse::More => Parse::More,
        Parse::Invalid => Parse::Invalid,
    }
}

/// What the first bytes of an originator's TCP stream name: DNS on port 53, else a TLS
/// ClientHello (a handshake record) or an HTTP request (an upper-case method), by the first
/// byte.
pub(crate) fn probe_tcp(bytes: &[u8], dns_port: bool) -> Parse<SessionName> {
    if dns_port {
        return map(dns::question_tcp(bytes), SessionName::Dns);
    }
    match bytes.first() {
        None => Parse::More,
        Some(22) => map(tls::client_hello(bytes), SessionName::Tls),
        Some(b'A'..=b'Z') => map(http::request(bytes), SessionName::Http),
        Some(_) => Parse::Invalid,
    }
}

/// The question of a whole DNS datagram.
pub(crate) fn probe_udp(payload: &[u8]) -> Option<SessionName> {
    dns::question(payload).found().map(SessionName::Dns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_probe_by_first_byte() {
        assert_eq!(probe_tcp(b"", false), Parse::More);
        assert_eq!(probe_tcp(b"\x16\x03", false), Parse::More);
        assert_eq!(probe_tcp(b"GET / HT", false), Parse::More);
        assert_eq!(probe_tcp(b"SSH-2.0-x\r\n", false), Parse::Invalid);
        assert_eq!(probe_tcp(b"\x00\x05", true), Parse::Invalid);
        assert!(matches!(
            probe_tcp(b"GET / HTTP/1.1\r\nHost: h\r\n", false),
            Parse::Found(SessionName::Http(_))
        ));
    }
}
