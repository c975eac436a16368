//! A TLS ClientHello (RFC 8446 §4.1.2, RFC 5246 §7.4.1.2): the `server_name` extension's
//! host_name (RFC 6066 §3) and the ALPN protocol list (RFC 7301).
//!
//! The hello is read from the first TLS record of the client's stream. The whole handshake
//! message must be in that record (a hello fragmented over several records gives no name),
//! and the parse needs every byte of it: a hello cut short is `More` until its bytes come,
//! never a name read from a part. Every length inside is checked against its container.

use super::{be16_at, Name, Parse, NAME_MAX};

/// TLS record type of a handshake.
const CONTENT_HANDSHAKE: u8 = 22;
/// Handshake type of a ClientHello.
const CLIENT_HELLO: u8 = 1;
/// Extension `server_name`.
const EXT_SERVER_NAME: u16 = 0;
/// Extension `application_layer_protocol_negotiation`.
const EXT_ALPN: u16 = 16;
/// Most bytes of the ALPN list kept, its protocols joined by commas.
pub const ALPN_MAX: usize = 64;

/// What a ClientHello names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientHello {
    /// The server name (host_name), empty when the hello has none.
    pub sni: Name<NAME_MAX>,
    /// The ALPN protocols joined by `,` (as tshark shows them): the first ones, as many
    /// whole protocols as fit in [`ALPN_MAX`] bytes; empty without the extension.
    pub alpn: Name<ALPN_MAX>,
    /// Whether some ALPN protocols did not fit.
    pub alpn_cut: bool,
}

/// The ClientHello at the start of `stream`, the client's first bytes.
pub fn client_hello(stream: &[u8]) -> Parse<ClientHello> {
    // The record header: type, version 3.x, length.
    match stream.get(..3) {
        None => return prefix_ok(stream),
        Some(h) if h[0] != CONTENT_HANDSHAKE || h[1] != 3 => return Parse::Invalid,
        Some(_) => {}
    }
    let Some(rec_len) = be16_at(stream, 3) else {
        return Parse::More;
    };
    let record = &stream[5.min(stream.len())..];
    let rec_len = usize::from(rec_len);
    // The handshake header: type, 3-byte length.
    let Some(h) = record.get(..4) else {
        return Parse::More;
    };
    if h[0] != CLIENT_HELLO {
        return Parse::Invalid;
    }
    let len = usize::from(h[1]) << 16 | usize::from(h[2]) << 8 | usize::from(h[3]);
    if 4 + len > rec_len {
        // Fragmented over records, or a record shorter than its message.
        return Parse::Invalid;
    }
    match record.get(4..4 + len) {
        Some(body) => hello_body(body).map_or(Parse::Invalid, Parse::Found),
        None => Parse::More,
    }
}

/// A stream of fewer than 3 bytes: a possible beginning of a handshake record, or not.
fn prefix_ok(b: &[u8]) -> Parse<ClientHello> {
    match b {
        [] | [CONTENT_HANDSHAKE] | [CONTENT_HANDSHAKE, 3] => Parse::More,
        _ => Parse::Invalid,
    }
}

/// A cursor over a message whose every length is checked.
struct Cur<'a>(&'a [u8]);

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    /// A vector with a 1- or 2-byte length.
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(usize::from(n))
    }
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }
}

/// The ClientHello's body: version, random, session id, cipher suites, compression
/// methods, extensions. None when any length is wrong.
fn hello_body(body: &[u8]) -> Option<ClientHello> {
    let mut c = Cur(body);
    c.take(2 + 32)?;
    if c.vec8()?.len() > 32 {
        return None;
    }
    if c.vec16()?.len() % 2 != 0 {
        return None;
    }
    c.vec8()?;
    let mut hello = ClientHello::default();
    if c.0.is_empty() {
        return Some(hello); // no extensions (TLS 1.0 and older)
    }
    let mut exts = Cur(c.vec16()?);
    if !c.0.is_empty() {
        return None;
    }
    while !exts.0.is_empty() {
        let ty = exts.u16()?;
        let data = exts.vec16()?;
        match ty {
            EXT_SERVER_NAME => hello.sni = server_name(data)?,
            EXT_ALPN => (hello.alpn, hello.alpn_cut) = alpn(data)?,
            _ => {}
        }
    }
    Some(hello)
}

/// The host_name of a `server_name` extension (the first, as servers take it).
fn server_name(data: &[u8]) -> Option<Name<NAME_MAX>> {
    let mut c = Cur(data);
    let mut list = Cur(c.vec16()?);
    if !c.0.is_empty() {
        return None;
    }
    while !list.0.is_empty() {
        let ty = list.u8()?;
        let name = list.vec16()?;
        if ty == 0 {
            if name.is_empty() {
                return None;
            }
            return Name::new(name);
        }
    }
    Some(Name::default())
}

/// The ALPN protocols joined by commas, and whether some did not fit.
fn alpn(data: &[u8]) -> Option<(Name<ALPN_MAX>, bool)> {
    let mut c = Cur(data);
    let mut list = Cur(c.vec16()?);
    if !c.0.is_empty() {
        return None;
    }
    let mut out = Name::<ALPN_MAX>::default();
    let mut cut = false;
    while !list.0.is_empty() {
        let p = list.vec8()?;
        if p.is_empty() {
            return None;
        }
        let sep = if out.is_empty() { 0 } else { 1 };
        if cut || out.len() + sep + p.len() > ALPN_MAX {
            cut = true;
            continue;
        }
        if sep == 1 {
            out.push(b",");
        }
        out.push(p);
    }
    Some((out, cut))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ClientHello record with server name `sni`, the ALPN list `alpn` and a
    /// supported_versions extension, built field by field.
    pub(crate) fn hello(sni: &[u8], alpn: &[&[u8]]) -> Vec<u8> {
        let mut ext = Vec::new();
        let mut sn = vec![0u8];
        sn.extend_from_slice(&(sni.len() as u16).to_be_bytes());
        sn.extend_from_slice(sni);
        let mut sn_ext = (sn.len() as u16).to_be_bytes().to_vec();
        sn_ext.extend_from_slice(&sn);
        ext.extend_from_slice(&[0, 0]);
        ext.extend_from_slice(&(sn_ext.len() as u16).to_be_bytes());
        ext.extend_from_slice(&sn_ext);
        let mut list = Vec::new();
        for p in alpn {
            list.push(p.len() as u8);
            list.extend_from_slice(p);
        }
        let mut a = (list.len() as u16).to_be_bytes().to_vec();
        a.extend_from_slice(&list);
        ext.extend_from_slice(&[0, 16]);
        ext.extend_from_slice(&(a.len() as u16).to_be_bytes());
        ext.extend_from_slice(&a);
        ext.extend_from_slice(&[0, 43, 0, 3, 2, 3, 4]);
        let mut body = vec![3, 3];
        body.extend_from_slice(&[7; 32]);
        body.extend_from_slice(&[0]); // session id
        body.extend_from_slice(&[0, 2, 0x13, 0x01]);
        body.extend_from_slice(&[1, 0]);
        body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
        body.extend_from_slice(&ext);
        let mut hs = vec![1, 0];
        hs.extend_from_slice(&(body.len() as u16).to_be_bytes());
        hs.extend_from_slice(&body);
        let mut rec = vec![22, 3, 1];
        rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
        rec.extend_from_slice(&hs);
        rec
    }

    #[test]
    fn test_parse_hello() {
        let h = client_hello(&hello(b"example.com", &[b"h2", b"http/1.1"]))
            .found()
            .unwrap();
        assert_eq!(h.sni.as_bytes(), b"example.com");
        assert_eq!(h.alpn.as_bytes(), b"h2,http/1.1");
        assert!(!h.alpn_cut);
    }

    #[test]
    fn test_truncated() {
        let r = hello(b"example.com", &[b"h2"]);
        for cut in 0..r.len() {
            assert_eq!(client_hello(&r[..cut]), Parse::More, "{cut}");
        }
        // Bytes after the record (the next record) do not matter.
        let mut more = r.clone();
        more.extend_from_slice(&[23, 3, 3, 0, 1, 0]);
        assert!(client_hello(&more).found().is_some());
    }

    #[test]
    fn test_alpn_bounded() {
        let long = [b"x".repeat(40), b"y".repeat(30), b"z".repeat(10)];
        let refs: Vec<&[u8]> = long.iter().map(|v| &v[..]).collect();
        let h = client_hello(&hello(b"a.b", &refs)).found().unwrap();
        assert_eq!(h.alpn.as_bytes(), &long[0][..]);
        assert!(h.alpn_cut);
    }

    #[test]
    fn test_not_a_hello() {
        assert_eq!(client_hello(b"GET / HTTP/1.1\r\n"), Parse::Invalid);
        assert_eq!(client_hello(&[22, 3, 1, 0, 4, 2, 0, 0, 0]), Parse::Invalid);
        let mut r = hello(b"example.com", &[]);
        // A length inside that runs past its container.
        let at = r.len() - 30;
        r[at] = 0xff;
        assert!(matches!(client_hello(&r), Parse::Invalid | Parse::Found(_)));
        // A server name longer than 255 bytes is no name.
        let r = hello(&[b'a'; 300], &[]);
        assert_eq!(client_hello(&r), Parse::Invalid);
    }
}
