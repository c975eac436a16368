//! Listing connections: the sessions files beside the capture files a path list names, read
//! over a time window, the records of one connection in consecutive file segments joined
//! into one, and those that pass the selectors ([`Selectors`]) sorted and counted.
//!
//! - **Files.** The paths expand as a query's do ([`super::plan::expand_paths`]); a file its
//!   folder's catalog puts wholly outside the window is not opened. Each file's sessions
//!   come from its sessions file ([`crate::session::format::read_sessions`]). A file
//!   without one (written by another tool, before sessions were kept, or still being
//!   written) or with a stale one (the capture file was replaced) has its packets read
//!   instead ([`crate::session::scan`]): slower, and the same connections. A file that
//!   cannot be read either way (a damaged sessions file, a sealed file without its key) is
//!   counted in [`FlowStats`] and named in its notes: its connections are missing from the
//!   answer, and the answer says so.
//! - **Joining.** A connection that spans rotated files has one record per file. Records
//!   with the same key ([`Session::table_key`]) in different files are one connection when
//!   the later one starts within [`JOIN_GAP_NS`] of the earlier one's last packet and does
//!   not begin with a SYN (a new connection on the same ports). The joined record counts
//!   both, each direction from the first record's originator, and keeps the first record's
//!   name. The files the window opens are joined, and the one just before the first of
//!   them in each folder: a connection that began further back is listed from there on,
//!   without the name its first packets gave.
//! - **Window.** A connection is listed when its first-to-last packet range overlaps the
//!   window `from..to`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

use super::flow_match::{Selectors, SessionFilter};
use super::outcome::QueryError;
use super::plan::Catalogs;
use crate::names::is_part;
use crate::sealed::KeyFile;
use crate::session::format::{read_sessions, SessionsError};
use crate::session::{Session, SessionName, ENDED_FIN_RST};
use crate::session::{SessionConfig, SessionTable};

/// Largest gap between a connection's last packet in one file and its first in the next
/// for the two records to be joined: a rotation cuts a connection between two packets, so
/// the later record starts soon after; a longer silence is taken for a new connection.
pub const JOIN_GAP_NS: u64 = 120_000_000_000;

/// How flows are ordered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlowSort {
    /// By first packet time, oldest first.
    #[default]
    First,
    /// By last packet time, oldest first.
    Last,
    /// By bytes both ways, most first.
    Bytes,
    /// By packets both ways, most first.
    Packets,
}

/// What to list.
#[derive(Clone, Debug, Default)]
pub struct FlowSpec {
    /// Capture files (see [`super::plan::expand_paths`]).
    pub files: Vec<PathBuf>,
    /// Window start, ns since the epoch, inclusive.
    pub from: u64,
    /// Window end, ns, exclusive (`u64::MAX`: none).
    pub to: u64,
    /// What a connection must match.
    pub select: Selectors,
    /// Key-encryption key for sealed sessions files.
    pub kek: Option<Arc<KeyFile>>,
    /// Order of the answer.
    pub sort: FlowSort,
    /// At most this many flows (after sorting).
    pub limit: Option<usize>,
    /// Recording folders the files were found in ([`super::reach`]).
    pub folders: Vec<PathBuf>,
    /// Whether the listing states its reach.
    pub reach: bool,
}

/// A connection: one session record, or several joined across file segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    /// The connection (for a joined one: counts and times over every segment).
    pub session: Session,
    /// How many file segments it was recorded in.
    pub segments: u32,
}

/// What a listing did.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct FlowStats {
    /// Capture files considered.
    pub files: u64,
    /// Files left unopened because their folder's catalog puts them outside the window.
    pub files_pruned: u64,
    /// Files whose sessions were read.
    pub files_read: u64,
    /// Files outside the window whose sessions were read to join the connections that
    /// continue from them into it.
    pub files_joined: u64,
    /// Files without a sessions file (their connections are read from their packets).
    pub files_without: u64,
    /// Files whose sessions file no longer matches them (read from their packets too).
    pub files_stale: u64,
    /// Files whose connections were read from their packets, for want of a sessions file
    /// that matches them.
    pub files_scanned: u64,
    /// Files whose sessions file is damaged or cannot be opened: not listed.
    pub files_unreadable: u64,
    /// Session records read.
    pub records: u64,
    /// Packets that files read hold of connections their sessions files have no record of
    /// (the recorder's table had no room for them): those connections are not listed.
    pub unrecorded_packets: u64,
    /// Files read with such packets.
    pub files_incomplete: u64,
    /// Connections that matched (before the limit).
    pub matched: u64,
    /// Whether the limit cut the answer.
    pub truncated: bool,
    /// One line per file whose connections are missing, and why; and the reach's.
    pub notes: Vec<String>,
    /// Which part of the window is on record, and why the rest is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reach: Option<super::reach::Reach>,
}

/// Lists the connections of `spec` (see the module doc).
pub fn list(spec: &FlowSpec) -> Result<(Vec<Flow>, FlowStats), QueryError> {
    let filter = SessionFilter::new(spec.select.filter.as_deref())?;
    let mut stats = FlowStats::default();
    let records = read_all(spec, &mut stats);
    if spec.reach {
        let reach = super::reach::reach(&spec.folders, &spec.files, spec.from, spec.to);
        stats.notes.extend(reach.lines());
        stats.reach = Some(reach);
    }
    let mut flows: Vec<Flow> = join(records)
        .into_iter()
        .filter(|f| f.session.first_ns < spec.to && f.session.last_ns >= spec.from)
        .filter(|f| spec.select.matches(&f.session) && filter.matches(&f.session))
        .collect();
    stats.matched = flows.len() as u64;
    sort(&mut flows, spec.sort);
    if let Some(n) = spec.limit {
        stats.truncated = flows.len() > n;
        flows.truncate(n);
    }
    Ok((flows, stats))
}

/// Orders `flows` by `by`; ties by first time, then key, so an answer is the same each time.
/// Bytes and packets are those the connection sent, with what a per-flow cutoff left out of
/// the files: the largest transfer comes first however little of it was kept.
pub fn sort(flows: &mut [Flow], by: FlowSort) {
    flows.sort_by(|a, b| {
        let (x, y) = (&a.session, &b.session);
        let main = match by {
            FlowSort::First => x.first_ns.cmp(&y.first_ns),
            FlowSort::Last => x.last_ns.cmp(&y.last_ns),
            FlowSort::Bytes => y.bytes_seen().cmp(&x.bytes_seen()),
            FlowSort::Packets => y.packets_seen().cmp(&x.packets_seen()),
        };
        main.then(x.first_ns.cmp(&y.first_ns))
            .then_with(|| key_order(x).cmp(&key_order(y)))
    });
}

fn key_order(s: &Session) -> (u8, [u8; 16], u16, [u8; 16], u16, u16) {
    let k = &s.key;
    (k.proto, k.src, k.sport, k.dst, k.dport, k.vlan)
}

/// Every file's session records, each with the position of its file, counting in `stats`
/// the files that have none to give. A file the window leaves out that comes just before
/// one it opens, in the same folder, is read too: the connections that continue from it
/// into the window are joined whole, with the names their first packets gave.
fn read_all(spec: &FlowSpec, stats: &mut FlowStats) -> Vec<(usize, Session)> {
    let mut catalogs = Catalogs::default();
    let mut out = Vec::new();
    let mut missing: HashMap<&'static str, (u64, String)> = HashMap::new();
    let mut table = None;
    let mut pruned_before = false;
    // The first file whose sessions file lacks some of its connections, for the note.
    let mut incomplete_first = None;
    for (i, f) in spec.files.iter().enumerate() {
        stats.files += 1;
        if catalogs.outside(f, spec.from, spec.to) {
            stats.files_pruned += 1;
            pruned_before = true;
            continue;
        }
        if let (true, Some(prev)) = (pruned_before, i.checked_sub(1)) {
            let p = &spec.files[prev];
            if crate::names::dir_of(p) == crate::names::dir_of(f) {
                if let Ok(Some(file)) = read_sessions(p, spec.kek.as_deref()) {
                    stats.files_joined += 1;
                    out.extend(file.sessions.into_iter().map(|s| (prev, s)));
                }
            }
        }
        pruned_before = false;
        let incomplete_before = stats.files_incomplete;
        let why = read_one(spec, i, stats, &mut out, &mut table);
        if stats.files_incomplete > incomplete_before {
            incomplete_first.get_or_insert_with(|| f.display().to_string());
        }
        if let Some(why) = why {
            let e = missing.entry(why).or_insert((0, f.display().to_string()));
            e.0 += 1;
        }
    }
    if let Some(first) = incomplete_first {
        stats.notes.push(format!(
            "{} files hold {} packets of connections their sessions files have no record of \
             (the recorder's table was full; --sessions-per-file keeps more) (the first: \
             {first}): those connections are not listed; a query by filter finds their packets",
            stats.files_incomplete, stats.unrecorded_packets
        ));
    }
    let mut missing: Vec<_> = missing.into_iter().collect();
    missing.sort();
    for (why, (n, first)) in missing {
        stats.notes.push(format!(
            "{n} files {why} (the first: {first}): their connections are not listed"
        ));
    }
    stats.notes.append(&mut catalogs.notes);
    out
}

/// Reads the sessions of file `i` into `out`; why it has none to give, when it has none.
/// A file without a sessions file that matches it has its packets read instead, with
/// `table` (made at the first such file, with all its memory, and kept for the next).
fn read_one(
    spec: &FlowSpec,
    i: usize,
    stats: &mut FlowStats,
    out: &mut Vec<(usize, Session)>,
    table: &mut Option<SessionTable>,
) -> Option<&'static str> {
    let f = &spec.files[i];
    match read_sessions(f, spec.kek.as_deref()) {
        Ok(Some(file)) => {
            stats.files_read += 1;
            stats.records += file.sessions.len() as u64;
            if file.unrecorded > 0 {
                stats.files_incomplete += 1;
                stats.unrecorded_packets += file.unrecorded;
            }
            out.extend(file.sessions.into_iter().map(|s| (i, s)));
            None
        }
        Ok(None) => {
            stats.files_without += 1;
            scan_one(spec, i, stats, out, table).then_some(if is_part(f) {
                "being written, and not readable for its connections"
            } else {
                "without a sessions file, and not readable for their connections"
            })
        }
        Err(SessionsError::Stale) => {
            stats.files_stale += 1;
            scan_one(spec, i, stats, out, table).then_some(
                "with a sessions file that no longer matches the capture file, and not \
                 readable for their connections",
            )
        }
        Err(e) => {
            stats.files_unreadable += 1;
            stats.notes.push(format!(
                "{}: sessions not read: {e}; its connections are not listed",
                f.display()
            ));
            None
        }
    }
}

/// Reads the connections of file `i` from its packets into `out` (a file with no sessions
/// file that matches it); whether that failed (the file is not a capture this reader
/// reads: a sealed one, or damaged at its start).
fn scan_one(
    spec: &FlowSpec,
    i: usize,
    stats: &mut FlowStats,
    out: &mut Vec<(usize, Session)>,
    table: &mut Option<SessionTable>,
) -> bool {
    let f = &spec.files[i];
    let t = table.get_or_insert_with(|| SessionTable::new(SessionConfig::default()));
    match crate::session::scan(f, t, None) {
        Ok(crate::session::Scanned {
            sessions,
            dropped,
            cut_short,
        }) => {
            stats.files_scanned += 1;
            stats.records += sessions.len() as u64;
            if let Some(e) = cut_short {
                stats.notes.push(format!(
                    "{}: read from its packets up to {e}: the connections of what follows are \
                     not listed, and those it cut show only their packets before",
                    f.display()
                ));
            }
            if dropped > 0 {
                stats.notes.push(format!(
                    "{}: {dropped} packets of connections beyond the {} its reading keeps at \
                     once: those connections are not listed",
                    f.display(),
                    t.config().capacity
                ));
            }
            out.extend(sessions.into_iter().map(|s| (i, s)));
            false
        }
        Err(_) => true,
    }
}

/// Joins the records of one connection in consecutive file segments (see the module doc).
pub fn join(mut records: Vec<(usize, Session)>) -> Vec<Flow> {
    records.sort_by(|(fa, a), (fb, b)| {
        key_order_of(&a.table_key())
            .cmp(&key_order_of(&b.table_key()))
            .then(a.first_ns.cmp(&b.first_ns))
            .then(fa.cmp(fb))
    });
    let mut out: Vec<Flow> = Vec::with_capacity(records.len());
    let mut last_file = usize::MAX;
    for (file, s) in records {
        if let Some(cur) = out.last_mut() {
            if file != last_file && continues(cur, &s) {
                absorb(cur, &s);
                last_file = file;
                continue;
            }
        }
        out.push(Flow {
            session: s,
            segments: 1,
        });
        last_file = file;
    }
    out
}

fn key_order_of(k: &corecap_wire::FlowKey) -> (u16, u8, bool, [u8; 16], u16, [u8; 16], u16) {
    (k.vlan, k.proto, k.is_v4(), k.src, k.sport, k.dst, k.dport)
}

/// Whether `s`, a record of a later file, is more of the connection `flow`: the same key,
/// no new SYN, and a start within [`JOIN_GAP_NS`] of the flow's last packet.
pub(crate) fn continues(flow: &Flow, s: &Session) -> bool {
    let c = &flow.session;
    c.table_key() == s.table_key()
        && !s.began_syn()
        && s.first_ns >= c.first_ns
        && s.first_ns <= c.last_ns.saturating_add(JOIN_GAP_NS)
}

/// Adds the later record `s` of the same connection to `flow`.
pub(crate) fn absorb(flow: &mut Flow, s: &Session) {
    let c = &mut flow.session;
    // Each record counts from its own originator: a later one without a SYN takes the
    // sender of its first packet, which may be the other end.
    let same_way = s.key == c.key;
    let (p, b) = if same_way {
        (s.packets, s.bytes)
    } else {
        ([s.packets[1], s.packets[0]], [s.bytes[1], s.bytes[0]])
    };
    for d in 0..2 {
        c.packets[d] += p[d];
        c.bytes[d] += b[d];
    }
    c.cut_packets += s.cut_packets;
    c.cut_bytes += s.cut_bytes;
    c.first_ns = c.first_ns.min(s.first_ns);
    c.last_ns = c.last_ns.max(s.last_ns);
    c.tcp_flags |= s.tcp_flags;
    c.flags |= s.flags & ENDED_FIN_RST;
    if c.name == SessionName::None {
        c.name = s.name;
    }
    flow.segments += 1;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::flow_match::SessionFilter;
    use crate::session::{BEGAN_SYN, SAW_SYN};
    use corecap_wire::flow::IPPROTO_TCP;
    use corecap_wire::{community_id::community_id_of_tuple, FlowKey, IpFamily, Link};

    const S: u64 = 1_000_000_000;

    fn key() -> FlowKey {
        let mut k = FlowKey {
            vlan: 0,
            proto: IPPROTO_TCP,
            family: IpFamily::V4,
            src: [0; 16],
            dst: [0; 16],
            sport: 40000,
            dport: 443,
        };
        k.src[..4].copy_from_slice(&[10, 0, 0, 1]);
        k.dst[..4].copy_from_slice(&[10, 0, 0, 2]);
        k
    }

    fn session(key: FlowKey, first: u64, last: u64, packets: [u64; 2], flags: u8) -> Session {
        Session {
            key,
            link: Link::Ethernet,
            community_id: community_id_of_tuple(&key, false, 0),
            first_ns: first,
            last_ns: last,
            packets,
            bytes: [packets[0] * 100, packets[1] * 100],
            cut_packets: packets[0],
            cut_bytes: packets[0] * 1000,
            tcp_flags: 0x10,
            flags,
            name: SessionName::None,
        }
    }

    #[test]
    fn test_join_across_files() {
        let k = key();
        let syn = BEGAN_SYN | SAW_SYN;
        let records = vec![
            (0, session(k, 10 * S, 20 * S, [5, 4], syn)),
            // The next file: its first packet came from the responder, so its record counts
            // from the other end.
            (1, session(k.reversed(), 21 * S, 30 * S, [3, 2], 0)),
            (2, session(k, 31 * S, 40 * S, [1, 1], ENDED_FIN_RST)),
            // A new connection on the same ports: it begins with a SYN.
            (3, session(k, 41 * S, 42 * S, [2, 1], syn)),
            // Long after: a connection of its own.
            (
                4,
                session(k, 42 * S + JOIN_GAP_NS + 1, 43 * S + JOIN_GAP_NS, [1, 0], 0),
            ),
        ];
        let flows = join(records);
        assert_eq!(flows.len(), 3, "{flows:?}");
        let f = &flows[0].session;
        assert_eq!(flows[0].segments, 3);
        assert_eq!(f.key, k);
        assert_eq!(f.packets, [5 + 2 + 1, 4 + 3 + 1]);
        assert_eq!(f.bytes, [800, 800]);
        assert_eq!((f.first_ns, f.last_ns), (10 * S, 40 * S));
        assert!(f.began_syn() && f.ended_fin_rst());
        assert_eq!((flows[1].segments, flows[2].segments), (1, 1));
    }

    #[test]
    fn test_session_filter() {
        let s = session(key(), S, 2 * S, [1, 1], BEGAN_SYN);
        let yes = |e: &str| SessionFilter::new(Some(e)).unwrap().matches(&s);
        assert!(yes("tcp port 443"));
        assert!(
            yes("src host 10.0.0.2 and dst port 40000"),
            "either direction"
        );
        assert!(yes("net 10.0.0.0/24 and tcp[tcpflags] & tcp-ack != 0"));
        assert!(!yes("udp"));
        assert!(!yes("tcp[tcpflags] & tcp-rst != 0"));
        assert!(!yes("vlan 5"));
        assert!(SessionFilter::new(Some("no such thing")).is_err());
    }
}
