//! Keeping a recording folder's catalog ([`crate::Catalog`]) true: the disk writer
//! records each file it names, recovery each file it recovers, retention each file it
//! deletes. A catalog that cannot be written costs a note, never a packet: queries still
//! have the files.

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

/// The entries of every capture file of `dir`, for a catalog made anew.
fn entries_of(dir: &Path) -> Vec<Entry> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let hidden = p
                .file_name()
                .is_none_or(|n| n.to_string_lossy().starts_with('.'));
            !hidden && !corecap_index::is_sidecar(p) && p.is_file()
        })
        .filter(|p| {
            matches!(
                crate::query::file_kind(p),
                Ok(crate::query::FileKind::Plain | crate::query::FileKind::Sealed)
            )
        })
        .filter_map(|p| {
            let state = if p.to_string_lossy().contains(".recovered-") {
                State::Recovered
            } else {
                State::Whole
            };
            entry_from_index(&p, state)
        })
        .collect()
}

/// Records a file in its folder's catalog (made, or rebuilt from the files, if needed).
pub fn record(e: &Entry, dir: &Path) -> Result<(), String> {
    Catalog::open_or_rebuild(dir, || entries_of(dir))
        .and_then(|c| c.put(e))
        .map_err(|e| e.to_string())
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
