//! What a file holds, told from its first bytes: a plain capture (pcap, pcapng), a sealed
//! one, a compressed one, or something else. Recovery, retention, the catalog and the query
//! all ask it; it asks none of them.

use std::fs::File;
use std::io::{self, BufReader};
use std::path::Path;

use corecap_wire::{Compression, Decompress};

use crate::sealed::{read_full, MAGIC};

/// What kind of file a path holds, by its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// pcap or pcapng.
    Plain,
    /// A sealed capture file.
    Sealed,
    /// pcap or pcapng compressed with gzip, zstd or lz4 (or a compressed stream too damaged
    /// to tell: reading it says why).
    Compressed(Compression),
    /// Something else.
    Other,
}

/// Tells a capture file from its first bytes (for a compressed file, from the first bytes
/// of its decompressed stream).
pub fn file_kind(path: &Path) -> io::Result<FileKind> {
    let mut f = File::open(path)?;
    // Eight bytes are wanted, not the readahead window a first read starts (up to the
    // device's read_ahead_kb, megabytes).
    corecap_linux::direct::advise_random(&f);
    let mut m = [0u8; 8];
    let n = read_full(&mut f, &mut m)?;
    if n == 8 && &m == MAGIC {
        return Ok(FileKind::Sealed);
    }
    if corecap_wire::read::sniff(&m[..n]).is_some() {
        return Ok(FileKind::Plain);
    }
    let c = Compression::detect(&m[..n]);
    if !c.is_compressed() {
        return Ok(FileKind::Other);
    }
    f = File::open(path)?;
    let mut d = Decompress::new(BufReader::with_capacity(64 * 1024, f))?;
    let mut head = [0u8; 4];
    Ok(match read_full(&mut d, &mut head) {
        Ok(n) if corecap_wire::read::sniff(&head[..n]).is_none() => FileKind::Other,
        // A stream that fails this early is a damaged capture as likely as anything else:
        // reading it reports the damage.
        _ => FileKind::Compressed(c),
    })
}
