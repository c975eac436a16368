//! The sessions of a capture file read from its packets: for a file with no sessions file
//! of its own (written by another tool, or before sessions were kept, or still being
//! written), or one whose sessions file no longer matches it. What the recorder would have
//! kept, from the same table; a file still being written gives the connections of what is
//! on disk so far.

use std::path::Path;

use corecap_wire::{CaptureReader, Link};

use super::{Session, SessionTable};

/// What [`scan`] read of a file.
#[derive(Debug)]
pub struct Scanned {
    /// Its connections, in order of first packet.
    pub sessions: Vec<Session>,
    /// Packets the full table could not keep.
    pub dropped: u64,
    /// Why the reading ended before the end of the file, if it did (a file cut short or
    /// damaged): the connections are those of the packets before.
    pub cut_short: Option<corecap_wire::ReadError>,
}

/// The connections of the packets of `path` (of its first `upto` bytes, when given). The
/// table is empty before and after (as [`SessionTable::finish`] leaves it); a packet cut
/// by the end of the file (one being written), or damage, ends the reading, and says so.
pub fn scan(
    path: &Path,
    table: &mut SessionTable,
    upto: Option<u64>,
) -> Result<Scanned, corecap_wire::ReadError> {
    let dropped_before = table.stats().sessions_dropped;
    let mut r = CaptureReader::open(path)?;
    let mut cut_short = None;
    while upto.is_none_or(|n| r.offset() < n) {
        match r.next_packet() {
            Ok(Some(p)) => table.add(p.ts_ns, p.orig_len, p.data, Link::of(p.linktype), None),
            Ok(None) => break,
            Err(e) => {
                cut_short = Some(e);
                break;
            }
        }
    }
    let dropped = table.stats().sessions_dropped - dropped_before;
    Ok(Scanned {
        sessions: table.finish(),
        dropped,
        cut_short,
    })
}
