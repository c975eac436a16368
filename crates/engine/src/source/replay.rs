//! The file source (`-r`): pcap and pcapng files feed the same workers as a live capture.
//!
//! Every worker reads the files in order and keeps the packets whose symmetric flow hash
//! falls to it (`hash % workers == worker`; the hash reads each packet through the link
//! type of its interface, [`Link`]), so the split is the same on every run and both
//! directions of a flow meet on one worker. Each interface of a file keeps its own link
//! type and filter, and its packets keep their interface. A file that is truncated or
//! malformed ends the read with an error naming the byte offset, after every good packet
//! before it.

use std::path::PathBuf;

use corecap_wire::read::CaptureReader;
use corecap_wire::Link;

use crate::steer::filter::{Meta, Program};

/// A file input and its interfaces.
#[derive(Clone, Debug)]
pub struct FileSpec {
    /// Path of the file.
    pub path: PathBuf,
    /// Its interfaces, in the file's order: a packet's interface in the file indexes this
    /// list.
    pub ifaces: Vec<FileIface>,
}

/// An interface of a file input.
#[derive(Clone, Debug)]
pub struct FileIface {
    /// Interface index given to its packets.
    pub if_id: u32,
    /// Userspace filter compiled for its link type.
    pub filter: Option<Program>,
    /// How it frames its packets (its link type), for the flow hash.
    pub link: Link,
}

/// Reads `spec`, calling `f(ts_ns, data, orig_len, queue, iface)` for each packet that
/// falls to worker `me` of `n` and passes its interface's filter. Returns (packets taken,
/// filtered) or an error message naming the offset.
pub fn replay(
    spec: &FileSpec,
    me: usize,
    n: usize,
    stop: &dyn Fn() -> bool,
    mut f: impl FnMut(u64, &[u8], u32, Option<u32>, &FileIface) -> bool,
) -> (u64, u64, Option<String>) {
    let (mut taken, mut filtered) = (0u64, 0u64);
    let mut r = match CaptureReader::open(&spec.path) {
        Ok(r) => r,
        Err(e) => return (0, 0, Some(format!("{}: {e}", spec.path.display()))),
    };
    loop {
        if stop() {
            return (taken, filtered, None);
        }
        let rec = match r.next_packet() {
            Ok(Some(rec)) => rec,
            Ok(None) => return (taken, filtered, None),
            Err(e) => {
                return (
                    taken,
                    filtered,
                    Some(format!("{}: {e}", spec.path.display())),
                )
            }
        };
        let Some(iface) = spec.ifaces.get(rec.if_id as usize) else {
            // The file gained an interface after the capture planned its output.
            let e = format!(
                "{}: packet of interface {} at byte offset {}, which the file did not \
                 define when the capture started",
                spec.path.display(),
                rec.if_id,
                r.offset()
            );
            return (taken, filtered, Some(e));
        };
        if n > 1 && (iface.link.frame_hash(rec.data, None) as usize) % n != me {
            continue;
        }
        if let Some(p) = &iface.filter {
            let meta = Meta {
                vlan: None,
                queue: rec.queue.unwrap_or(0),
                protocol: ethertype(rec.data),
            };
            if p.run(rec.data, rec.orig_len, &meta) == 0 {
                filtered += 1;
                continue;
            }
        }
        taken += 1;
        if !f(rec.ts_ns, rec.data, rec.orig_len, rec.queue, iface) {
            return (taken, filtered, None);
        }
    }
}

fn ethertype(d: &[u8]) -> u16 {
    d.get(12..14)
        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
}
