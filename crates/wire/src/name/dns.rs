//! The first question of a DNS message (RFC 1035 §4.1): its name and type.
//!
//! The name is read label by label. A compression pointer may only point before every byte
//! the walk has read so far, so the walk always moves to lower offsets and ends, however the
//! pointers are set. A label is 1 to 63 bytes and holds no `.` (it would make the dotted
//! form ambiguous); the extended label types (`01` and `10` in the top bits) are refused; the
//! whole name is at most 255 bytes on the wire. The name is kept in its dotted form, without
//! the final dot: the root is the empty name.

use super::{be16_at, Name, Parse, NAME_MAX};

/// Bytes of the DNS header.
const HEADER_LEN: usize = 12;
/// Most bytes of a name on the wire (RFC 1035 §2.3.4).
const WIRE_MAX: usize = 255;

/// A DNS message's first question.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DnsQuestion {
    /// The name, dotted, without the final dot (empty for the root).
    pub name: Name<NAME_MAX>,
    /// QTYPE (1 A, 28 AAAA, 65 HTTPS, ...).
    pub qtype: u16,
    /// Whether the message was a response (QR set).
    pub response: bool,
}

/// The first question of the DNS message `msg` (a UDP payload, or a TCP message after its
/// length). `More` when `msg` ends before the question does; `Invalid` for a message with
/// no question or a malformed name.
pub fn question(msg: &[u8]) -> Parse<DnsQuestion> {
    if msg.len() < HEADER_LEN {
        return Parse::More;
    }
    if be16_at(msg, 4) == Some(0) {
        return Parse::Invalid;
    }
    let (name, end) = match read_name(msg, HEADER_LEN) {
        Parse::Found(n) => n,
        Parse::More => return Parse::More,
        Parse::Invalid => return Parse::Invalid,
    };
    // QTYPE and QCLASS follow the name.
    if msg.len() < end + 4 {
        return Parse::More;
    }
    Parse::Found(DnsQuestion {
        name,
        qtype: be16_at(msg, end).unwrap_or_default(),
        response: msg[2] & 0x80 != 0,
    })
}

/// The first question of the first message of a DNS-over-TCP stream (RFC 1035 §4.2.2: each
/// message after a 2-byte length). `More` while the question is not whole in `stream` and
/// the message says it goes on.
pub fn question_tcp(stream: &[u8]) -> Parse<DnsQuestion> {
    let Some(len) = be16_at(stream, 0) else {
        return Parse::More;
    };
    let len = usize::from(len);
    if len < HEADER_LEN {
        return Parse::Invalid;
    }
    let have = &stream[2..];
    match question(&have[..have.len().min(len)]) {
        Parse::More if have.len() >= len => Parse::Invalid,
        p => p,
    }
}

/// Reads the name at `at`: the name and the offset just after it (after its first pointer
/// when it has one).
fn read_name(msg: &[u8], at: usize) -> Parse<(Name<NAME_MAX>, usize)> {
    let mut name = Name::<NAME_MAX>::default();
    let mut pos = at;
    // The lowest offset read: a pointer must point below it.
    let mut low = at;
    let mut end = None;
    let mut wire = 0usize;
    loop {
        let Some(&len) = msg.get(pos) else {
            return Parse::More;
        };
        match len >> 6 {
            0 if len == 0 => break,
            0 => {
                let len = usize::from(len);
                let Some(label) = msg.get(pos + 1..pos + 1 + len) else {
                    return Parse::More;
                };
                wire += 1 + len;
                if wire + 1 > WIRE_MAX || label.contains(&b'.') {
                    return Parse::Invalid;
                }
                if !name.is_empty() && !name.push(b".") || !name.push(label) {
                    return Parse::Invalid;
                }
                pos += 1 + len;
            }
            3 => {
                let Some(ptr) = be16_at(msg, pos) else {
                    return Parse::More;
                };
                let target = usize::from(ptr & 0x3fff);
                end.get_or_insert(pos + 2);
                if target >= low {
                    return Parse::Invalid;
                }
                low = target;
                pos = target;
            }
            _ => return Parse::Invalid,
        }
    }
    Parse::Found((name, end.unwrap_or(pos + 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The DNS payload of frame 1 of `LINKTYPE_IPV4.pcap` (tcpdump's tests/): a query for
    /// `example.com`, type A (tshark: dns.qry.name example.com, dns.qry.type 1).
    const QUERY: &[u8] = &[
        0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x65, 0x78,
        0x61, 0x6d, 0x70, 0x6c, 0x65, 0x03, 0x63, 0x6f, 0x6d, 0x00, 0x00, 0x01, 0x00, 0x01,
    ];

    fn with_name(wire_name: &[u8]) -> Vec<u8> {
        let mut m = QUERY[..12].to_vec();
        m.extend_from_slice(wire_name);
        m.extend_from_slice(&[0, 28, 0, 1]);
        m
    }

    #[test]
    fn test_parse_query() {
        let q = question(QUERY).found().unwrap();
        assert_eq!(q.name.as_bytes(), b"example.com");
        assert_eq!((q.qtype, q.response), (1, false));
    }

    #[test]
    fn test_parse_tcp() {
        let mut s = (QUERY.len() as u16).to_be_bytes().to_vec();
        s.extend_from_slice(QUERY);
        assert_eq!(question_tcp(&s), question(QUERY));
        for cut in 0..s.len() {
            assert_eq!(question_tcp(&s[..cut]), Parse::More, "{cut}");
        }
        // The length says the message ends inside the question.
        s[1] = 20;
        assert_eq!(question_tcp(&s), Parse::Invalid);
    }

    #[test]
    fn test_truncated() {
        for cut in 0..QUERY.len() {
            assert_eq!(question(&QUERY[..cut]), Parse::More, "{cut}");
        }
    }

    #[test]
    fn test_parse_root_and_pointers() {
        let q = question(&with_name(&[0])).found().unwrap();
        assert!(q.name.is_empty());
        // A pointer into the header moves backwards: allowed, and it ends.
        let m = with_name(&[1, b'a', 0xc0, 11]);
        assert!(matches!(question(&m), Parse::Found(_) | Parse::Invalid));
        // A pointer to itself, or forward, is refused.
        assert_eq!(question(&with_name(&[0xc0, 12])), Parse::Invalid);
        assert_eq!(question(&with_name(&[1, b'a', 0xc0, 12])), Parse::Invalid);
        assert_eq!(question(&with_name(&[0xc0, 40])), Parse::Invalid);
    }

    #[test]
    fn test_labels_checked() {
        assert_eq!(question(&with_name(&[0x40, 0])), Parse::Invalid);
        assert_eq!(question(&with_name(&[0x80, 0])), Parse::Invalid);
        assert_eq!(
            question(&with_name(&[3, b'a', b'.', b'b', 0])),
            Parse::Invalid
        );
        // 255 bytes on the wire at most: four 63-byte labels are 256.
        let mut long = Vec::new();
        for _ in 0..4 {
            long.push(63);
            long.extend_from_slice(&[b'x'; 63]);
        }
        long.push(0);
        assert_eq!(question(&with_name(&long)), Parse::Invalid);
        let mut ok = long[..64 * 3].to_vec();
        ok.extend_from_slice(&[61]);
        ok.extend_from_slice(&[b'y'; 61]);
        ok.push(0);
        assert_eq!(ok.len(), 255);
        assert_eq!(question(&with_name(&ok)).found().unwrap().name.len(), 253);
        // No question at all.
        let mut m = QUERY.to_vec();
        m[5] = 0;
        assert_eq!(question(&m), Parse::Invalid);
    }
}
