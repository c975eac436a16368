//! An HTTP/1.0 or 1.1 request (RFC 9112 §3): the method, the request-target (the path) and
//! the Host header.
//!
//! The request line must be whole (`METHOD SP TARGET SP HTTP/1.x CRLF`, the method of
//! upper-case letters), and so must each header line read: a Host is taken only from a line
//! that ends, before the blank line that ends the headers. A request without Host
//! (HTTP/1.0) is found at that blank line, with an empty host. The path keeps its first
//! [`super::NAME_MAX`] bytes, and says when it was cut; the method is at most 16 bytes, the
//! host 255 (a longer host is no name). Header lines are looked at up to [`HEAD_MAX`] bytes.

use super::{Name, Parse, NAME_MAX};

/// Most bytes of the request line and headers read for the Host.
pub const HEAD_MAX: usize = 4096;
/// Most bytes of a method.
pub const METHOD_MAX: usize = 16;

/// What an HTTP request names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpRequest {
    /// The method (`GET`, `POST`, ...).
    pub method: Name<METHOD_MAX>,
    /// The request-target: its first [`NAME_MAX`] bytes.
    pub path: Name<NAME_MAX>,
    /// Whether the request-target was longer.
    pub path_cut: bool,
    /// The Host header's value, trimmed; empty without one.
    pub host: Name<NAME_MAX>,
}

/// The request at the start of `stream`, the client's first bytes.
pub fn request(stream: &[u8]) -> Parse<HttpRequest> {
    let stream = &stream[..stream.len().min(HEAD_MAX)];
    let Some(line_end) = find_crlf(stream) else {
        return if plausible_start(stream) && stream.len() < HEAD_MAX {
            Parse::More
        } else {
            Parse::Invalid
        };
    };
    let Some(mut req) = request_line(&stream[..line_end]) else {
        return Parse::Invalid;
    };
    let mut at = line_end + 2;
    loop {
        let Some(len) = find_crlf(&stream[at..]) else {
            return if stream.len() < HEAD_MAX {
                Parse::More
            } else {
                Parse::Invalid
            };
        };
        let line = &stream[at..at + len];
        if line.is_empty() {
            return Parse::Found(req);
        }
        if let Some(value) = header_value(line, b"host") {
            return match Name::new(value) {
                Some(h) => {
                    req.host = h;
                    Parse::Found(req)
                }
                None => Parse::Invalid,
            };
        }
        at += len + 2;
    }
}

/// Whether `b` (no CRLF yet) can begin a request line: upper-case letters, then a space
/// and bytes of the target or version, nothing that cannot be in them.
fn plausible_start(b: &[u8]) -> bool {
    let b = b.strip_suffix(b"\r").unwrap_or(b);
    let m = b.iter().take_while(|c| c.is_ascii_uppercase()).count();
    if m > METHOD_MAX || (m == 0 && !b.is_empty()) {
        return false;
    }
    match b.get(m) {
        None => true,
        Some(b' ') => b[m + 1..]
            .iter()
            .all(|&c| c > 0x20 && c < 0x7f || c == b' '),
        Some(_) => false,
    }
}

/// `METHOD SP TARGET SP HTTP/1.x`.
fn request_line(line: &[u8]) -> Option<HttpRequest> {
    let mut parts = line.split(|&c| c == b' ');
    let method = parts.next()?;
    let target = parts.next()?;
    let version = parts.next()?;
    if parts.next().is_some()
        || method.is_empty()
        || !method.iter().all(u8::is_ascii_uppercase)
        || target.is_empty()
        || !target.iter().all(|&c| c > 0x20 && c < 0x7f)
        || !matches!(version, b"HTTP/1.0" | b"HTTP/1.1")
    {
        return None;
    }
    let (path, path_cut) = Name::prefix(target);
    Some(HttpRequest {
        method: Name::new(method)?,
        path,
        path_cut,
        host: Name::default(),
    })
}

/// The value of header `name` (lower case) in `line`, without the spaces around it.
fn header_value<'a>(line: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let colon = line.iter().position(|&c| c == b':')?;
    if !line[..colon].eq_ignore_ascii_case(name) {
        return None;
    }
    let v = &line[colon + 1..];
    let start = v
        .iter()
        .position(|&c| c != b' ' && c != b'\t')
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|&c| c != b' ' && c != b'\t')
        .map_or(start, |e| e + 1);
    Some(&v[start..end])
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const GET: &[u8] =
        b"GET /index.html?q=1 HTTP/1.1\r\nUser-Agent: curl/8\r\nhost:  example.com \r\nAccept: */*\r\n\r\n";

    #[test]
    fn test_parse_request() {
        let r = request(GET).found().unwrap();
        assert_eq!(r.method.as_bytes(), b"GET");
        assert_eq!(r.path.as_bytes(), b"/index.html?q=1");
        assert_eq!(r.host.as_bytes(), b"example.com");
        assert!(!r.path_cut);
        let r = request(b"POST /x HTTP/1.0\r\n\r\nbody").found().unwrap();
        assert!(r.host.is_empty());
    }

    #[test]
    fn test_truncated() {
        // Until the Host line ends, more is needed; from then on, the request is found.
        let host_end = GET.windows(4).position(|w| w == b"com ").unwrap() + 6;
        for cut in 0..GET.len() {
            let p = request(&GET[..cut]);
            if cut < host_end {
                assert_eq!(p, Parse::More, "{cut}");
            } else {
                assert_eq!(p.found().unwrap().host.as_bytes(), b"example.com", "{cut}");
            }
        }
    }

    #[test]
    fn test_not_a_request() {
        for bad in [
            &b"\x16\x03\x01\x02\x00"[..],
            b"get / HTTP/1.1\r\n",
            b"GET / HTTP/2.0\r\n\r\n",
            b"GET  / HTTP/1.1\r\n\r\n",
            b"GET\r\n",
            b"SSH-2.0-OpenSSH_9.6\r\n",
        ] {
            assert_eq!(
                request(bad),
                Parse::Invalid,
                "{}",
                super::super::Escaped(bad)
            );
        }
        // A long path is kept cut; a host longer than 255 bytes is no name.
        let long = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "p".repeat(400));
        let r = request(long.as_bytes()).found().unwrap();
        assert!(r.path_cut && r.path.len() == NAME_MAX);
        let long = format!("GET / HTTP/1.1\r\nHost: {}\r\n\r\n", "h".repeat(300));
        assert_eq!(request(long.as_bytes()), Parse::Invalid);
        // Headers that never end within HEAD_MAX bytes.
        let mut big = b"GET / HTTP/1.1\r\n".to_vec();
        while big.len() < HEAD_MAX + 10 {
            big.extend_from_slice(b"X-Pad: 0123456789\r\n");
        }
        assert_eq!(request(&big), Parse::Invalid);
    }
}
