//! Sessions: one record per connection of a file segment, built from the packets the writer
//! writes, and kept beside the file ([`format`](mod@format)).
//!
//! [`SessionTable`] is fed each packet as it is written ([`SessionTable::add`]: time, wire
//! length, the captured frame, its link type and the VLAN the ring reported). It reads the
//! frame's transport layer once ([`corecap_wire::Transport`]) and updates the connection's
//! record in a table reserved when it is made: the connections in the order they came,
//! found through an index of 8-byte positions (open addressing, linear probing, a tag of
//! the key's hash beside each entry's number), no allocation per packet, memory touched
//! only as connections come, and a full table counts what it could not keep
//! ([`SessionStats::sessions_dropped`]) and never fails a packet. When the file segment
//! ends, [`SessionTable::finish`] gives the records (each with its Community ID, computed
//! then, once per connection) and empties the table for the next segment.
//!
//! A connection is its canonical flow key (VLAN, protocol, both endpoints), so both
//! directions meet in one record. Its originator is the sender of its SYN when one is seen
//! (the receiver of a SYN-ACK seen first), else the sender of its first packet; counts are
//! kept per direction from there. ICMP and ICMPv6 messages are keyed like their Community
//! ID: a request and its reply are one connection (echo, router, neighbour, ...), every other
//! type (an error, a redirect) a one-way connection of its own per type and code. Fragments
//! are keyed like the flow key keys them: without ports, all of a datagram's fragments in
//! one connection, apart from that of the unfragmented packets. Non-IP frames are counted,
//! not kept.
//!
//! A per-flow cutoff leaves the tail of long connections out of the file: the packets it
//! cuts are given to the table too ([`SessionTable::add_cut`]), and counted as seen, not
//! kept ([`Session::cut_packets`], [`Session::cut_bytes`]); they move the connection's
//! times, never its originator, flags or name.
//!
//! Names ([`SessionName`]) come from the first packets, never from a fragment: the DNS
//! question of a UDP or TCP port 53 connection; the ClientHello or HTTP request that starts
//! the originator's TCP stream, put together from contiguous segments in a
//! [`corecap_wire::name::Stream`] lent from a small pool while a name waits for its bytes.
//! A gap, a retransmission with other bytes, a segment cut by the snap length, a full pool or
//! a message longer than the stream give no name, never a wrong one.

mod naming;
mod scan;
mod table;

pub mod format;

#[cfg(test)]
mod tests;

pub use scan::{scan, Scanned};
pub use table::{Prefetched, SessionConfig, SessionStats, SessionTable};

use corecap_wire::name::{ClientHello, DnsQuestion, HttpRequest};
use corecap_wire::{CommunityId, FlowKey, Link};

/// Record flag: the connection's first packet was a SYN (without ACK).
pub const BEGAN_SYN: u8 = 1;
/// Record flag: a FIN or RST was seen, in either direction.
pub const ENDED_FIN_RST: u8 = 2;
/// Record flag: a one-way ICMP connection (its endpoints are as sent, not ordered).
pub const ONE_WAY: u8 = 4;
/// Record flag: a SYN was seen, so the originator is the SYN's sender.
pub const SAW_SYN: u8 = 8;

/// The name a connection's first packets gave.
// Inline on purpose: a name is kept without allocating, in a table of names made once.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SessionName {
    /// None (not a protocol with names, or no whole message seen).
    #[default]
    None,
    /// A DNS question.
    Dns(DnsQuestion),
    /// A TLS ClientHello's server name and ALPN.
    Tls(ClientHello),
    /// An HTTP/1.x request's method, Host and path.
    Http(HttpRequest),
}

/// One connection of a file segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Session {
    /// The flow key in the originator's direction: `src` is the originator. For ICMP the
    /// ports are the message's type and its counterpart (or code), as its Community ID
    /// takes them.
    pub key: FlowKey,
    /// The link type of its first packet.
    pub link: Link,
    /// The Community ID (v1, with the table's seed).
    pub community_id: CommunityId,
    /// First and last packet time, ns since the epoch.
    pub first_ns: u64,
    /// Last packet time.
    pub last_ns: u64,
    /// Packets from the originator, and from the responder.
    pub packets: [u64; 2],
    /// Bytes (wire length, as given to [`SessionTable::add`]) from the originator, and
    /// from the responder.
    pub bytes: [u64; 2],
    /// Packets of the connection a per-flow cutoff left out of the file (both ways): seen,
    /// counted, not kept. Its packets seen are `packets` plus these.
    pub cut_packets: u64,
    /// Their bytes (wire length, as `bytes`).
    pub cut_bytes: u64,
    /// The OR of every TCP flags byte seen.
    pub tcp_flags: u8,
    /// `BEGAN_SYN`, `ENDED_FIN_RST`, `ONE_WAY`, `SAW_SYN`.
    pub flags: u8,
    /// The name from its first packets.
    pub name: SessionName,
}

impl Session {
    /// Whether the first packet was a SYN.
    pub fn began_syn(&self) -> bool {
        self.flags & BEGAN_SYN != 0
    }

    /// Packets seen, both ways: those the file holds and those a cutoff left out.
    pub fn packets_seen(&self) -> u64 {
        self.packets[0] + self.packets[1] + self.cut_packets
    }

    /// Bytes seen, both ways: those the file holds and those a cutoff left out.
    pub fn bytes_seen(&self) -> u64 {
        self.bytes[0] + self.bytes[1] + self.cut_bytes
    }

    /// Whether a FIN or RST was seen.
    pub fn ended_fin_rst(&self) -> bool {
        self.flags & ENDED_FIN_RST != 0
    }

    /// The connection's key as the table keys it: both directions in one (the endpoints
    /// ordered), a one-way ICMP message's as sent. Equal for the records of one connection
    /// in consecutive file segments, whichever end each took for the originator.
    pub fn table_key(&self) -> FlowKey {
        if self.flags & ONE_WAY != 0 {
            self.key
        } else {
            self.key.canonical()
        }
    }
}

/// The connection a captured frame of link type `link` belongs to, keyed as
/// [`Session::table_key`] keys it; None for a frame that is not IP or cannot be parsed.
pub fn frame_key(link: Link, frame: &[u8]) -> Option<FlowKey> {
    link.transport(frame, None)
        .ok()
        .map(|t| table::table_key(&t).0)
}
