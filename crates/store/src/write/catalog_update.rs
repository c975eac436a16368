//! Keeping a recording folder's catalog ([`crate::Catalog`]) true: the disk writer
//! records each file it names, recovery each file it recovers, retention each file it
//! deletes. A catalog that cannot be written costs a note, never a packet: queries still
//! have the files, and the next writer that can write it brings it up to date from them
//! ([`refresh`]).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::{Catalog, Entry, State};

use crate::names::dir_of;

/// The catalog entry of a capture file as its index tells it (time range and packets; both
/// unknown without a readable plain index).
pub fn entry_from_index(path: &Path, state: State) -> Option<Entry> {
    let name = path.file_name()?.to_string_lossy().into_owned();
    let bytes = std::fs::metadata(path).ok()?.len();
    let side = corecap_index::sidecar_path(path);
    let index = std::fs::read(&side)
        .ok()
        .and_then(|b| corecap_index::Index::parse(&b).ok());
    Some(Entry {
        name,
        state,
        time: index.as_ref().and_then(corecap_index::Index::time_range),
        packets: index.as_ref().map_or(0, corecap_index::Index::packets),
        bytes,
        index_bytes: std::fs::metadata(&side).map_or(0, |m| m.len()),
        identity: index
            .as_ref()
            .and_then(|ix| ix.identity.map(|id| (ix.covered, id))),
    })
}

/// The capture files of `dir` (not hidden, not indexes, pcap, pcapng or sealed).
fn capture_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let hidden = p
                .file_name()
                .is_none_or(|n| n.to_string_lossy().starts_with('.'));
            !hidden && !crate::names::is_beside(p) && p.is_file()
        })
        .filter(|p| {
            matches!(
                crate::sniff::file_kind(p),
                Ok(crate::sniff::FileKind::Plain | crate::sniff::FileKind::Sealed)
            )
        })
        .collect()
}

/// A capture file's entry, its state told by its name.
fn entry_of(p: &Path) -> Option<Entry> {
    let state = if crate::names::is_recovered(p) {
        State::Recovered
    } else {
        State::Whole
    };
    entry_from_index(p, state)
}

/// The entries of every capture file of `dir`, for a catalog made anew.
fn entries_of(dir: &Path) -> Vec<Entry> {
    capture_files(dir)
        .iter()
        .filter_map(|p| entry_of(p))
        .collect()
}

/// Records a file in its folder's catalog (made, or rebuilt from the files, if needed).
/// An error leaves the catalog as it was (see [`crate::Catalog`]).
pub fn record(e: &Entry, dir: &Path) -> Result<(), crate::Error> {
    Catalog::open_or_rebuild(dir, || entries_of(dir)).and_then(|c| c.put(e))
}

/// Brings the catalog of `dir` up to date with its files, after it missed updates (it could
/// not be written: a full disk, an I/O error). Each capture file without an entry, or whose
/// entry's byte count is not its own, gets one from its index; entries whose file is gone
/// are removed. One directory listing, and an index read per file that changed.
pub fn refresh(dir: &Path) -> Result<(), crate::Error> {
    let c = Catalog::open_or_rebuild(dir, || entries_of(dir))?;
    let known: HashMap<String, Entry> = c
        .entries()?
        .into_iter()
        .map(|e| (e.name.clone(), e))
        .collect();
    let files = capture_files(dir);
    let mut put = Vec::new();
    let mut present = HashSet::new();
    for p in &files {
        let Some(name) = p.file_name().map(|n| n.to_string_lossy().into_owned()) else {
            continue;
        };
        let size = std::fs::metadata(p).map_or(0, |m| m.len());
        if known.get(&name).is_none_or(|e| e.bytes != size) {
            put.extend(entry_of(p));
        }
        present.insert(name);
    }
    let gone: Vec<String> = known.into_keys().filter(|n| !present.contains(n)).collect();
    if put.is_empty() && gone.is_empty() {
        return Ok(());
    }
    c.update(&put, &gone)
}

/// Removes deleted files from their folders' catalogs.
pub fn forget(paths: &[PathBuf]) {
    for p in paths {
        let (Some(name), dir) = (p.file_name(), dir_of(p)) else {
            continue;
        };
        if let Ok((c, _)) = Catalog::open(dir) {
            let _ = c.remove(&name.to_string_lossy());
        }
    }
}
