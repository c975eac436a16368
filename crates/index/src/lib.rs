//! The sidecar index of a capture file, and what a query needs to read only the parts of a
//! file that can match.
//!
//! A capture file `x.pcapng` gets a sidecar `x.pcapng.idx` ([`sidecar_path`]). It lists the
//! file's regions (about 1 MiB each, or one per writer buffer, always whole blocks) with,
//! for each, its byte range, its first and last timestamps, its packet count, the exact set
//! of its IP protocols and a Bloom filter of its IPv4/IPv6 addresses, ports and VLAN ids.
//! The layout is in `docs/index-format.md`.
//!
//! - [`IndexBuilder`]: the writer feeds it each region as it writes it, then stores
//!   [`IndexBuilder::finish`] beside the file. It parses the blocks itself and never panics:
//!   a bad or cut block ends the index at the blocks before it.
//! - [`index_reader`]: builds the index of a whole file from a stream (`corecap index`).
//! - [`Index::parse`]: reads a sidecar back, checking its magic, version and CRC, so a
//!   damaged index is refused and the file is scanned instead.
//! - [`Predicate`]: what a filter requires of a region, read from the program libpcap
//!   compiled for it ([`Predicate::from_program`]); with [`Region::overlaps`] it selects the
//!   regions a query reads.
//!
//! ```
//! use corecap_index::{Index, IndexBuilder, Predicate};
//!
//! // A pcap file: the global header, then one UDP packet 10.0.0.1:1024 -> 10.1.2.3:53.
//! let mut file = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
//! file.extend_from_slice(&[0; 8]);
//! file.extend_from_slice(&65535u32.to_le_bytes());
//! file.extend_from_slice(&1u32.to_le_bytes());
//! let mut frame = vec![0u8; 12];
//! frame.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0]);
//! frame.extend_from_slice(&[10, 0, 0, 1, 10, 1, 2, 3, 0x04, 0x00, 0x00, 0x35, 0, 8, 0, 0]);
//! for v in [1_700_000_000u32, 0, frame.len() as u32, frame.len() as u32] {
//!     file.extend_from_slice(&v.to_le_bytes());
//! }
//! file.extend_from_slice(&frame);
//!
//! let mut b = IndexBuilder::new();
//! b.add_region(0..file.len() as u64, &file);
//! let index = Index::parse(&b.finish())?;
//! let region = &index.regions[0];
//! assert_eq!(region.packets, 1);
//! // What `host 10.1.2.3 and udp port 53` requires (Predicate::from_program reads it from
//! // libpcap's program for the filter).
//! let q = Predicate::And(vec![
//!     Predicate::Host4([10, 1, 2, 3]),
//!     Predicate::Proto(17),
//!     Predicate::Port(53),
//! ]);
//! assert!(q.may_match(region));
//! assert!(!Predicate::Proto(6).may_match(region));
//! # Ok::<(), corecap_index::IndexError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod bloom;
mod bpf;
mod builder;
pub mod format;
pub mod key;
pub mod postings;
mod predicate;
mod split;

use std::path::{Path, PathBuf};

pub use bpf::{header_linktypes, Insn};
pub use builder::IndexBuilder;
pub use format::{CaptureFormat, Identity, Index, IndexError, Region};
pub use postings::{intersect, union, Lookup, Postings, Span};
pub use predicate::Predicate;
pub use split::{index_file, index_reader, index_reader_identified, Built};

/// Size of the regions `corecap index` makes.
pub const REGION_SIZE: usize = 1 << 20;

/// The sidecar of a capture file: `x.pcapng` → `x.pcapng.idx`, `x.pcapng.sealed` →
/// `x.pcapng.sealed.idx`.
pub fn sidecar_path(capture: &Path) -> PathBuf {
    let mut s = capture.as_os_str().to_owned();
    s.push(".idx");
    PathBuf::from(s)
}

/// The hidden name a sidecar is written under before it is renamed into place:
/// `dir/x.pcapng.idx` → `dir/.x.pcapng.idx.tmp`. It ends in `.tmp`, where the hidden name
/// of a capture being written ends in `.part`, and it is hidden, which no capture is.
pub fn sidecar_temp_path(sidecar: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(sidecar.file_name().unwrap_or_default());
    name.push(".tmp");
    sidecar.with_file_name(name)
}

/// Why `path` cannot be the name of a capture file that corecap writes (`-w`, and each
/// rotated or per-worker file), if it cannot:
///
/// - a name ending in `.idx` is a sidecar's (`x.idx` is the index of `x`; queries skip it);
/// - a hidden name (starting with `.`) is the shape of the files being written
///   (`.x.part`, `.x.idx.tmp`), which the writer replaces when it finds one left over, and
///   which queries skip;
/// - a name ending in `.sessions` is a sessions file's (`x.sessions` holds the connections
///   of `x`: the store's rule, refused here with the index's so every writer asks once).
pub fn capture_name_error(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_string_lossy();
    if is_sidecar(path) {
        Some(format!(
            "{}: a capture file's name cannot end in .idx: that is the name of an index ({} is the index of {})",
            path.display(),
            name,
            name.strip_suffix(".idx").unwrap_or_default()
        ))
    } else if name.starts_with('.') {
        Some(format!(
            "{}: a capture file's name cannot start with '.': hidden names are those of files being written, and queries skip them",
            path.display()
        ))
    } else if name.ends_with(".sessions") {
        Some(format!(
            "{}: a capture file's name cannot end in .sessions: that is the name of a file's connections ({} are those of {})",
            path.display(),
            name,
            name.strip_suffix(".sessions").unwrap_or_default()
        ))
    } else {
        None
    }
}

/// Removes a capture file and its sidecar together (retention): the sidecar first, so an
/// index never outlives its file. A missing sidecar is not an error.
pub fn remove_capture(capture: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(sidecar_path(capture)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::remove_file(capture)
}

/// Whether `path` has a sidecar's name (ends in `.idx`). No capture that corecap writes
/// has one ([`capture_name_error`]); a file from elsewhere may, so a directory query looks
/// at its first bytes before it skips it.
pub fn is_sidecar(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "idx")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_names_do_not_collide() {
        let capture = Path::new("/d/x.pcapng");
        let side = sidecar_path(capture);
        assert_eq!(side, Path::new("/d/x.pcapng.idx"));
        assert_eq!(sidecar_temp_path(&side), Path::new("/d/.x.pcapng.idx.tmp"));
        assert!(is_sidecar(&side) && !is_sidecar(capture));
        assert_eq!(capture_name_error(capture), None);
        // The collision of old: `.x.idx.part` was both the hidden name of capture `x.idx`
        // and the sidecar temporary of capture `x`. Now `x.idx` is no capture's name, and
        // the temporary ends in `.tmp`.
        let e = capture_name_error(Path::new("/d/x.idx")).expect("refused");
        assert!(e.contains("index of x"), "{e}");
        // Nor does a capture take the name of another's sessions file.
        let e = capture_name_error(Path::new("/d/x.pcapng.sessions")).expect("refused");
        assert!(e.contains("those of x.pcapng"), "{e}");
        assert_eq!(
            sidecar_temp_path(&sidecar_path(Path::new("/d/x"))),
            Path::new("/d/.x.idx.tmp")
        );
        for hidden in [".x.idx.tmp", ".x.part", ".x.pcapng"] {
            assert!(
                capture_name_error(&Path::new("/d").join(hidden)).is_some(),
                "{hidden}"
            );
        }
        // A sidecar's temporary never ends like a capture's hidden name, and is hidden.
        let t = sidecar_temp_path(Path::new("a.part.idx"));
        assert_eq!(t, Path::new(".a.part.idx.tmp"));
        assert!(!t.to_string_lossy().ends_with(".part"));
    }
}
