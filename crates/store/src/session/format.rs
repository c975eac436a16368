//! The sessions file beside a capture file (`x.pcapng` → `x.pcapng.sessions`,
//! [`crate::names::sessions_path`]): a file segment's connections, written once when the
//! segment is whole, and read back by whoever lists or looks up sessions.
//!
//! Like the index, it names the bytes it describes: the capture file's covered length and
//! the xxh3 of its first and last 4 KiB ([`corecap_index::Identity`]). [`read_sessions`]
//! believes it only while the capture file still has those bytes, so the sessions of a file
//! replaced or rewritten under the same name are never given.
//!
//! Layout, version 2, little-endian throughout:
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `CORESESS` |
//! | 2 | version (2; 1 is read too) |
//! | 2 | record length ([`RECORD_LEN`]) |
//! | 2 | flags (1: the identity is set) |
//! | 2 | Community ID seed |
//! | 8 | record count |
//! | 8 | bytes of the names area |
//! | 8 | covered bytes of the capture file |
//! | 8 + 8 | identity: xxh3-64 of the first and of the last 4 KiB covered |
//! | 8 | packets written of connections the table had no room for (no record here; 0 in files written before this was counted) |
//! | count × 152 | records, in order of first packet (136 in version 1) |
//! | names | each record's name bytes, where its record says |
//! | 8 | xxh3-64 of every byte before it |
//! | 8 | `SESSEND\0` |
//!
//! A record: first and last time (ns), packets and bytes from the originator then the
//! responder (8 bytes each); originator and responder addresses (16 each, IPv4 in the first
//! 4); their ports, VLAN (2 each); protocol, family (4 or 6), link type index, TCP flags
//! seen, record flags, name kind (0 none, 1 DNS, 2 TLS, 3 HTTP), name flags (1 the second
//! name was cut, 2 a DNS response), method length (1 each); DNS type, first and second
//! name lengths (2 each); where the names start in the names area (4); the Community ID in
//! text (30, then 2 zero); then (version 2) the packets and the bytes a per-flow cutoff
//! left out of the file (8 each: seen, not kept). A version 1 record has no such counts,
//! and reads as a connection nothing was cut from. A DNS record's first name is the question, a TLS record's the
//! server name and its second the ALPN list, an HTTP record's the Host and the path, then
//! the method.
//!
//! The reader checks the magic, the version, the checksum, and that the count and every
//! length fit in the bytes it has, before it allocates anything by them: a damaged, cut or
//! hostile file is an error, never a panic or an allocation larger than the file.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use corecap_index::Identity;
use corecap_wire::name::{ClientHello, DnsQuestion, HttpRequest, Name};
use corecap_wire::{CommunityId, FlowKey, IpFamily, Link};

use super::{Session, SessionName};
use crate::sealed::{KeyFile, SealConfig};

/// The first 8 bytes of a sessions file.
pub const MAGIC: &[u8; 8] = b"CORESESS";
/// The format version written.
pub const VERSION: u16 = 2;
/// Bytes of the header.
pub const HEADER_LEN: usize = 64;
/// Bytes of one record.
pub const RECORD_LEN: usize = 152;
/// Bytes of one record of version 1 (no cut counts).
pub const RECORD_LEN_V1: usize = 136;
/// Bytes of the trailer: the checksum and [`END`].
pub const TRAILER_LEN: usize = 16;
/// The last 8 bytes.
pub const END: &[u8; 8] = b"SESSEND\0";
/// Largest sessions file read (a segment of a million connections is about 200 MiB).
pub const MAX_FILE: u64 = 1 << 30;

const FLAG_IDENTIFIED: u16 = 1;
const NAME_CUT: u8 = 1;
const NAME_RESPONSE: u8 = 2;

/// Why a sessions file was not read or not believed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionsError {
    /// Not a sessions file.
    #[error("not a corecap sessions file (bad magic)")]
    Magic,
    /// A version this reader does not know.
    #[error("sessions file version {0} is not supported (this corecap reads versions 1 and 2)")]
    Version(u16),
    /// The checksum does not match: the file is damaged.
    #[error("sessions file checksum mismatch (damaged)")]
    Checksum,
    /// The file ends early, or a length or a value is impossible.
    #[error("sessions file is malformed: {0}")]
    Malformed(&'static str),
    /// The capture file is not the one the sessions were made from (or no identity).
    #[error("the sessions do not match their capture file (it was replaced or rewritten)")]
    Stale,
    /// A sealed sessions file and no key, or a key that does not open it.
    #[error("sealed sessions file: {0}")]
    Sealed(String),
    /// Reading a file failed.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// A sessions file, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionsFile {
    /// The Community ID seed of its records.
    pub seed: u16,
    /// Bytes of the capture file it describes.
    pub covered: u64,
    /// The identity of those bytes, when the writer knew it.
    pub identity: Option<Identity>,
    /// The connections, in order of first packet.
    pub sessions: Vec<Session>,
    /// Packets the capture file holds of connections that have no record here: the
    /// recorder's table had no room for them (`--sessions-per-file`). A listing that
    /// reads this file is missing their connections.
    pub unrecorded: u64,
}

/// The bytes of a sessions file for `sessions`, describing the first `covered` bytes of
/// their capture file, whose identity is `identity`.
pub fn encode(
    sessions: &[Session],
    seed: u16,
    covered: u64,
    identity: Option<Identity>,
) -> Vec<u8> {
    let mut e = Encoder::new(seed, sessions.len());
    for s in sessions {
        e.push(s);
    }
    e.into_file(covered, identity)
}

/// A sessions file made one record at a time, in order of first packet: the records go
/// straight into the file's bytes, so a segment's connections are never held as
/// [`Session`]s (several hundred bytes each, for their names). The capture file's covered
/// length and identity are known last, when it is closed ([`Encoder::into_file`]).
#[derive(Debug)]
pub struct Encoder {
    /// The header (its counts set at the end), then the records.
    out: Vec<u8>,
    /// The names area.
    names: Vec<u8>,
    count: u64,
    /// Packets of connections with no record ([`SessionsFile::unrecorded`]).
    unrecorded: u64,
}

impl Encoder {
    /// An encoder for about `capacity` records with Community IDs of `seed`.
    pub fn new(seed: u16, capacity: usize) -> Encoder {
        let mut out = Vec::with_capacity(HEADER_LEN + capacity * RECORD_LEN);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(RECORD_LEN as u16).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&seed.to_le_bytes());
        out.resize(HEADER_LEN, 0);
        Encoder {
            out,
            names: Vec::new(),
            count: 0,
            unrecorded: 0,
        }
    }

    /// Says how many packets the file holds of connections the table had no room for.
    pub fn set_unrecorded(&mut self, packets: u64) {
        self.unrecorded = packets;
    }

    /// Adds the next record.
    pub fn push(&mut self, s: &Session) {
        encode_record(s, &mut self.out, &mut self.names);
        self.count += 1;
    }

    /// Records so far.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// Whether no record was added.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The records again, for a reader of them other than the file (the sessions log).
    pub fn sessions(&self) -> Result<Vec<Session>, SessionsError> {
        self.out[HEADER_LEN..]
            .chunks_exact(RECORD_LEN)
            .map(|r| decode_record(r, &self.names))
            .collect()
    }

    /// The whole file, for the first `covered` bytes of a capture file of `identity`.
    pub fn into_file(self, covered: u64, identity: Option<Identity>) -> Vec<u8> {
        let Encoder {
            mut out,
            names,
            count,
            unrecorded,
        } = self;
        let flags = if identity.is_some() {
            FLAG_IDENTIFIED
        } else {
            0
        };
        out[12..14].copy_from_slice(&flags.to_le_bytes());
        let id = identity.unwrap_or(Identity { first: 0, last: 0 });
        let fields = [
            count,
            names.len() as u64,
            covered,
            id.first,
            id.last,
            unrecorded,
        ];
        for (n, v) in fields.into_iter().enumerate() {
            out[16 + 8 * n..24 + 8 * n].copy_from_slice(&v.to_le_bytes());
        }
        out.reserve_exact(names.len() + TRAILER_LEN);
        out.extend_from_slice(&names);
        let sum = xxhash_rust::xxh3::xxh3_64(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out.extend_from_slice(END);
        out
    }
}

/// The names of a record: kind, flags, the two names, the method, the DNS type.
fn name_parts(n: &SessionName) -> (u8, u8, &[u8], &[u8], &[u8], u16) {
    match n {
        SessionName::None => (0, 0, &[], &[], &[], 0),
        SessionName::Dns(q) => {
            let flags = if q.response { NAME_RESPONSE } else { 0 };
            (1, flags, q.name.as_bytes(), &[], &[], q.qtype)
        }
        SessionName::Tls(h) => {
            let flags = if h.alpn_cut { NAME_CUT } else { 0 };
            (2, flags, h.sni.as_bytes(), h.alpn.as_bytes(), &[], 0)
        }
        SessionName::Http(r) => {
            let flags = if r.path_cut { NAME_CUT } else { 0 };
            let m = r.method.as_bytes();
            (3, flags, r.host.as_bytes(), r.path.as_bytes(), m, 0)
        }
    }
}

fn encode_record(s: &Session, out: &mut Vec<u8>, names: &mut Vec<u8>) {
    let start = out.len();
    for v in [
        s.first_ns,
        s.last_ns,
        s.packets[0],
        s.packets[1],
        s.bytes[0],
        s.bytes[1],
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&s.key.src);
    out.extend_from_slice(&s.key.dst);
    for v in [s.key.sport, s.key.dport, s.key.vlan] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let family = if s.key.is_v4() { 4 } else { 6 };
    let (kind, flags, one, two, method, qtype) = name_parts(&s.name);
    out.extend_from_slice(&[s.key.proto, family, s.link.index(), s.tcp_flags, s.flags]);
    out.extend_from_slice(&[kind, flags, method.len() as u8]);
    for v in [qtype, one.len() as u16, two.len() as u16] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&(names.len() as u32).to_le_bytes());
    out.extend_from_slice(s.community_id.as_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&s.cut_packets.to_le_bytes());
    out.extend_from_slice(&s.cut_bytes.to_le_bytes());
    debug_assert_eq!(out.len() - start, RECORD_LEN);
    names.extend_from_slice(one);
    names.extend_from_slice(two);
    names.extend_from_slice(method);
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Reads the bytes of a whole sessions file; see the module doc for what is checked.
pub fn decode(b: &[u8]) -> Result<SessionsFile, SessionsError> {
    if b.len() < 8 || &b[..8] != MAGIC {
        return Err(SessionsError::Magic);
    }
    if b.len() < HEADER_LEN + TRAILER_LEN {
        return Err(SessionsError::Malformed("cut short"));
    }
    let version = u16_at(b, 8);
    let record_len = match version {
        1 => RECORD_LEN_V1,
        VERSION => RECORD_LEN,
        _ => return Err(SessionsError::Version(version)),
    };
    let body = b.len() - TRAILER_LEN;
    if &b[body + 8..] != END {
        return Err(SessionsError::Malformed("no end mark (cut short)"));
    }
    if xxhash_rust::xxh3::xxh3_64(&b[..body]) != u64_at(b, body) {
        return Err(SessionsError::Checksum);
    }
    if usize::from(u16_at(b, 10)) != record_len {
        return Err(SessionsError::Malformed("record length"));
    }
    let (count, names_len) = (u64_at(b, 16), u64_at(b, 24));
    let room = (body - HEADER_LEN) as u64;
    if count > room / record_len as u64 || count * record_len as u64 + names_len != room {
        return Err(SessionsError::Malformed("counts do not fit the file"));
    }
    let names_at = HEADER_LEN + count as usize * record_len;
    let names = &b[names_at..body];
    let identified = u16_at(b, 12) & FLAG_IDENTIFIED != 0;
    let sessions = b[HEADER_LEN..names_at]
        .chunks_exact(record_len)
        .map(|r| decode_record(r, names))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SessionsFile {
        seed: u16_at(b, 14),
        covered: u64_at(b, 32),
        identity: identified.then(|| Identity {
            first: u64_at(b, 40),
            last: u64_at(b, 48),
        }),
        sessions,
        unrecorded: u64_at(b, 56),
    })
}

fn decode_record(r: &[u8], names: &[u8]) -> Result<Session, SessionsError> {
    let bad = SessionsError::Malformed;
    let family = match r[87] {
        4 => IpFamily::V4,
        6 => IpFamily::V6,
        _ => return Err(bad("address family")),
    };
    let mut key = FlowKey {
        vlan: u16_at(r, 84),
        proto: r[86],
        family,
        src: [0; 16],
        dst: [0; 16],
        sport: u16_at(r, 80),
        dport: u16_at(r, 82),
    };
    key.src.copy_from_slice(&r[48..64]);
    key.dst.copy_from_slice(&r[64..80]);
    if family == IpFamily::V4 && (key.src[4..] != [0; 12] || key.dst[4..] != [0; 12]) {
        return Err(bad("IPv4 address"));
    }
    if usize::from(r[88]) >= Link::ALL.len() {
        return Err(bad("link type"));
    }
    let community_id = CommunityId::parse(&r[104..134]).ok_or(bad("community id"))?;
    Ok(Session {
        key,
        link: Link::from_index(r[88]),
        community_id,
        first_ns: u64_at(r, 0),
        last_ns: u64_at(r, 8),
        packets: [u64_at(r, 16), u64_at(r, 24)],
        bytes: [u64_at(r, 32), u64_at(r, 40)],
        // Version 1 records end before the cut counts: nothing was cut.
        cut_packets: if r.len() >= RECORD_LEN {
            u64_at(r, 136)
        } else {
            0
        },
        cut_bytes: if r.len() >= RECORD_LEN {
            u64_at(r, 144)
        } else {
            0
        },
        tcp_flags: r[89],
        flags: r[90],
        name: decode_name(r, names)?,
    })
}

fn decode_name(r: &[u8], names: &[u8]) -> Result<SessionName, SessionsError> {
    let bad = SessionsError::Malformed;
    let (kind, flags, method_len) = (r[91], r[92], usize::from(r[93]));
    let (one_len, two_len) = (usize::from(u16_at(r, 96)), usize::from(u16_at(r, 98)));
    let at = u32::from_le_bytes([r[100], r[101], r[102], r[103]]) as usize;
    let end = at + one_len + two_len + method_len;
    let b = names.get(at..end).ok_or(bad("name past the names area"))?;
    let (one, rest) = b.split_at(one_len);
    let (two, method) = rest.split_at(two_len);
    let cut = flags & NAME_CUT != 0;
    let name = match kind {
        0 if b.is_empty() => SessionName::None,
        1 if two.is_empty() && method.is_empty() => SessionName::Dns(DnsQuestion {
            name: Name::new(one).ok_or(bad("DNS name too long"))?,
            qtype: u16_at(r, 94),
            response: flags & NAME_RESPONSE != 0,
        }),
        2 if method.is_empty() => SessionName::Tls(ClientHello {
            sni: Name::new(one).ok_or(bad("server name too long"))?,
            alpn: Name::new(two).ok_or(bad("ALPN too long"))?,
            alpn_cut: cut,
        }),
        3 => SessionName::Http(HttpRequest {
            method: Name::new(method).ok_or(bad("method too long"))?,
            path: Name::new(two).ok_or(bad("path too long"))?,
            path_cut: cut,
            host: Name::new(one).ok_or(bad("host too long"))?,
        }),
        _ => return Err(bad("name kind")),
    };
    Ok(name)
}

/// Writes the sessions file of `capture` (at [`crate::names::sessions_path`]), sealed when
/// `seal` is given, whole or not at all (as [`crate::sidecar::write_sidecar`]).
pub fn write_sessions(capture: &Path, bytes: &[u8], seal: Option<&SealConfig>) -> io::Result<()> {
    crate::sidecar::write_sidecar(&crate::names::sessions_path(capture), bytes, seal)
}

/// The sessions of `capture`, if it has a sessions file, believed only when the capture
/// file still holds the bytes they were made from ([`SessionsError::Stale`] if not). A
/// sealed sessions file is opened with `kek`.
pub fn read_sessions(
    capture: &Path,
    kek: Option<&KeyFile>,
) -> Result<Option<SessionsFile>, SessionsError> {
    let side = crate::names::sessions_path(capture);
    let f = match File::open(&side) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let size = f.metadata()?.len();
    if size > MAX_FILE {
        return Err(SessionsError::Malformed("larger than any sessions file"));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    f.take(MAX_FILE).read_to_end(&mut bytes)?;
    if bytes.starts_with(crate::sealed::MAGIC) {
        let kek = kek.ok_or_else(|| SessionsError::Sealed("no key".into()))?;
        let mut plain = Vec::new();
        let r = crate::sealed::unseal(&mut &bytes[..], kek, &mut plain)
            .map_err(|e| SessionsError::Sealed(e.to_string()))?;
        if !r.complete() {
            return Err(SessionsError::Sealed("cut short".into()));
        }
        bytes = plain;
    }
    let file = decode(&bytes)?;
    let id = file.identity.ok_or(SessionsError::Stale)?;
    let cap = File::open(capture)?;
    if crate::read::frames::content_len(&cap)? < file.covered
        || crate::read::frames::identity(&cap, file.covered)? != id
    {
        return Err(SessionsError::Stale);
    }
    Ok(Some(file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::tests::{packets, real};
    use crate::session::{SessionConfig, SessionTable};

    fn sample() -> Vec<Session> {
        let mut t = SessionTable::new(SessionConfig::default());
        for name in [
            "sessions-loopback.pcap",
            "nflog.pcap",
            "community-id-combined.pcap",
        ] {
            for (ts, len, f, l) in packets(name) {
                t.add(ts, len, &f, l, None);
            }
        }
        t.finish()
    }

    #[test]
    fn test_emit_and_parse() {
        let ss = sample();
        assert!(ss.iter().any(|s| matches!(s.name, SessionName::Http(_))));
        let id = Identity { first: 1, last: 2 };
        let b = encode(&ss, 7, 1234, Some(id));
        let f = decode(&b).unwrap();
        assert_eq!((f.seed, f.covered, f.identity), (7, 1234, Some(id)));
        assert_eq!(f.sessions, ss);
        assert_eq!(decode(&encode(&[], 0, 0, None)).unwrap().sessions, vec![]);
    }

    /// A version 1 file (before the cut counts): the bytes of `encode` with each record
    /// cut to its first 136 bytes, the header's version and record length set back.
    fn encode_v1(sessions: &[Session], seed: u16, covered: u64) -> Vec<u8> {
        let b = encode(sessions, seed, covered, None);
        let names_at = HEADER_LEN + sessions.len() * RECORD_LEN;
        let mut out = b[..HEADER_LEN].to_vec();
        out[8..10].copy_from_slice(&1u16.to_le_bytes());
        out[10..12].copy_from_slice(&(RECORD_LEN_V1 as u16).to_le_bytes());
        for r in b[HEADER_LEN..names_at].chunks_exact(RECORD_LEN) {
            out.extend_from_slice(&r[..RECORD_LEN_V1]);
        }
        out.extend_from_slice(&b[names_at..b.len() - TRAILER_LEN]);
        let sum = xxhash_rust::xxh3::xxh3_64(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out.extend_from_slice(END);
        out
    }

    /// Issue 38: the cut counts of version 2 round-trip, and a version 1 file still reads,
    /// as connections nothing was cut from.
    #[test]
    fn test_cut_counts_and_version_1() {
        let mut ss = sample();
        for (i, s) in ss.iter_mut().enumerate() {
            s.cut_packets = i as u64;
            s.cut_bytes = 1500 * i as u64 + 7;
        }
        assert_eq!(decode(&encode(&ss, 3, 99, None)).unwrap().sessions, ss);
        let old = decode(&encode_v1(&ss, 3, 99)).unwrap();
        assert_eq!((old.seed, old.covered), (3, 99));
        let uncut: Vec<Session> = ss
            .iter()
            .map(|s| Session {
                cut_packets: 0,
                cut_bytes: 0,
                ..*s
            })
            .collect();
        assert_eq!(old.sessions, uncut);
        // A version 1 header over version 2 records is refused, not misread.
        let mut d = encode(&ss, 3, 99, None);
        d[8..10].copy_from_slice(&1u16.to_le_bytes());
        let body = d.len() - TRAILER_LEN;
        let sum = xxhash_rust::xxh3::xxh3_64(&d[..body]);
        d[body..body + 8].copy_from_slice(&sum.to_le_bytes());
        assert!(matches!(decode(&d), Err(SessionsError::Malformed(_))));
    }

    #[test]
    fn test_truncated() {
        let b = encode(&sample(), 0, 10, None);
        for cut in 0..b.len() {
            assert!(decode(&b[..cut]).is_err(), "{cut}");
        }
    }

    #[test]
    fn test_damaged() {
        let b = encode(&sample(), 0, 10, None);
        for at in (0..b.len()).step_by(7) {
            let mut d = b.clone();
            d[at] ^= 0x40;
            assert!(decode(&d).is_err(), "{at}");
        }
        // A count that does not fit, with a checksum made to match: refused before any
        // allocation by it.
        let mut d = b.clone();
        d[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        let body = d.len() - TRAILER_LEN;
        let sum = xxhash_rust::xxh3::xxh3_64(&d[..body]);
        d[body..body + 8].copy_from_slice(&sum.to_le_bytes());
        assert!(matches!(decode(&d), Err(SessionsError::Malformed(_))));
        let mut d = b.clone();
        d[8] = 3;
        assert!(matches!(decode(&d), Err(SessionsError::Version(3))));
    }

    #[test]
    fn test_read_believes_only_its_capture_file() {
        let dir = std::env::temp_dir().join(format!("corecap-sessions-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cap = dir.join("x.pcap");
        std::fs::copy(real("sessions-loopback.pcap"), &cap).unwrap();
        let ss = sample();
        let covered = std::fs::metadata(&cap).unwrap().len();
        let id = Identity::of_file(&File::open(&cap).unwrap(), covered).unwrap();
        assert_eq!(read_sessions(&cap, None).unwrap(), None);
        write_sessions(&cap, &encode(&ss, 0, covered, Some(id)), None).unwrap();
        assert!(crate::names::sessions_path(&cap).exists());
        assert_eq!(read_sessions(&cap, None).unwrap().unwrap().sessions, ss);
        // The file replaced by another of the same length: not believed.
        let mut other = std::fs::read(&cap).unwrap();
        other[100] ^= 1;
        std::fs::write(&cap, &other).unwrap();
        assert!(matches!(
            read_sessions(&cap, None),
            Err(SessionsError::Stale)
        ));
        // Without an identity: not believed either.
        write_sessions(&cap, &encode(&ss, 0, covered, None), None).unwrap();
        assert!(matches!(
            read_sessions(&cap, None),
            Err(SessionsError::Stale)
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
