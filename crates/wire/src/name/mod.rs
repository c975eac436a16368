//! Names from a connection's first packets: the DNS question, the TLS ClientHello's server
//! name and ALPN, the HTTP/1.x request's method, Host and path.
//!
//! Each parser reads bytes in place and returns a [`Parse`]: the name, a request for more
//! bytes (the message goes on past what was given), or [`Parse::Invalid`] (not this
//! protocol, or a malformed message). A name is never guessed from a part: a message cut
//! short, by the snap length or by a segment not yet seen, is `More` until its bytes are
//! there, and the caller gives up when they cannot come. What a name keeps is bounded
//! ([`Name`], inline, at most `N` bytes; a longer one is no name, except the HTTP path,
//! whose first bytes are kept and marked cut) and shown escaped ([`Name::escaped`]).
//!
//! - [`dns`]: the first question of a DNS message (UDP, and TCP after its length prefix),
//!   compression pointers followed backwards only, labels checked.
//! - [`tls`]: a ClientHello in its first TLS record: `server_name` (host_name) and the
//!   `application_layer_protocol_negotiation` list.
//! - [`http`]: an HTTP/1.0 or 1.1 request line and its headers up to Host.
//! - [`stream`]: [`Stream`], the bounded accumulator of a TCP connection's first bytes in
//!   one direction, for a hello or request split over segments.

pub mod dns;
pub mod http;
pub mod stream;
pub mod tls;

pub use dns::DnsQuestion;
pub use http::HttpRequest;
pub use stream::Stream;
pub use tls::ClientHello;

/// Most bytes a DNS name, a TLS server name, an HTTP Host or path keeps.
pub const NAME_MAX: usize = 255;

/// What a parser made of the bytes it was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parse<T> {
    /// The message, whole where the name is.
    Found(T),
    /// The bytes so far are a valid beginning; the name needs more of them.
    More,
    /// Not this protocol, or malformed: no name will come from this message.
    Invalid,
}

impl<T> Parse<T> {
    /// The name, if found.
    pub fn found(self) -> Option<T> {
        match self {
            Parse::Found(t) => Some(t),
            _ => None,
        }
    }
}

/// A name of at most `N` bytes, kept inline.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Name<const N: usize> {
    len: u16,
    bytes: [u8; N],
}

impl<const N: usize> Default for Name<N> {
    fn default() -> Self {
        Name {
            len: 0,
            bytes: [0; N],
        }
    }
}

impl<const N: usize> Name<N> {
    /// The name of `b`; None when it is longer than `N`.
    pub fn new(b: &[u8]) -> Option<Name<N>> {
        let mut n = Name::default();
        n.push(b).then_some(n)
    }

    /// The first `N` bytes of `b` at most, and whether it was cut.
    pub fn prefix(b: &[u8]) -> (Name<N>, bool) {
        let k = b.len().min(N);
        let mut n = Name::default();
        n.push(&b[..k]);
        (n, k < b.len())
    }

    /// Appends `b`; false (and nothing appended) when it does not fit.
    pub fn push(&mut self, b: &[u8]) -> bool {
        let at = usize::from(self.len);
        let Some(dst) = self.bytes.get_mut(at..at + b.len()) else {
            return false;
        };
        dst.copy_from_slice(b);
        self.len += b.len() as u16;
        true
    }

    /// The name's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The name for a terminal or a log line: see [`Escaped`].
    pub fn escaped(&self) -> Escaped<'_> {
        Escaped(self.as_bytes())
    }
}

impl<const N: usize> std::fmt::Debug for Name<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\"{}\"", self.escaped())
    }
}

/// Bytes shown safely: printable ASCII but space and backslash as they are, a backslash as
/// `\\`, every other byte (space, controls, non-ASCII) as `\xNN`. So a name from the wire
/// never moves a terminal's cursor or forges a field of a log line.
#[derive(Clone, Copy, Debug)]
pub struct Escaped<'a>(pub &'a [u8]);

impl std::fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use std::fmt::Write as _;
        for &b in self.0 {
            match b {
                b'\\' => f.write_str("\\\\")?,
                0x21..=0x7e => f.write_char(char::from(b))?,
                _ => write!(f, "\\x{b:02x}")?,
            }
        }
        Ok(())
    }
}

/// Reads a big-endian u16 at `at`, None past the end.
#[inline]
pub(crate) fn be16_at(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_name_bounds() {
        assert!(Name::<4>::new(b"abcd").is_some());
        assert!(Name::<4>::new(b"abcde").is_none());
        let (n, cut) = Name::<4>::prefix(b"abcdef");
        assert_eq!((n.as_bytes(), cut), (&b"abcd"[..], true));
        let mut n = Name::<4>::new(b"ab").unwrap();
        assert!(!n.push(b"cde"));
        assert_eq!(n.as_bytes(), b"ab");
    }

    #[test]
    fn test_escaped() {
        let n = Name::<32>::new(b"a b\\c\x1b[2J\xff.com").unwrap();
        assert_eq!(n.escaped().to_string(), "a\\x20b\\\\c\\x1b[2J\\xff.com");
        assert_eq!(format!("{n:?}"), "\"a\\x20b\\\\c\\x1b[2J\\xff.com\"");
    }
}
