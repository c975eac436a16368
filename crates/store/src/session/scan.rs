//! The sessions of a capture file read from its packets: for a file with no sessions file
//! of its own (written by another tool, or before sessions were kept, or still being
//! written), or one whose sessions file no longer matches it. What the recorder would have
//! kept, from the same table; a file still being written gives the connections of what is
//! on disk so far.

use std::path::Path;

use corecap_wire::{CaptureReader, Link};

use super::{Session, SessionTable};

/// The connections of the packets of `path` (of its first `upto` bytes, when given), and
/// how many packets the full table could not keep. The table is empty before and after
/// (as [`SessionTable::finish`] leaves it); a packet cut by the end of the file (one being
/// written) ends the reading.
pub fn scan(
    path: &Path,
    table: &mut SessionTable,
    upto: Option<u64>,
) -> Result<(Vec<Session>, u64), corecap_wire::ReadError> {
    let dropped_before = table.stats().sessions_dropped;
    let mut r = CaptureReader::open(path)?;
    while upto.is_none_or(|n| r.offset() < n) {
        let Ok(Some(p)) = r.next_packet() else { break };
        table.add(p.ts_ns, p.orig_len, p.data, Link::of(p.linktype), None);
    }
    let dropped = table.stats().sessions_dropped - dropped_before;
    Ok((table.finish(), dropped))
}
