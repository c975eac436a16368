//! The names of a recording's files: rotated files (`STEM_NNNNN.EXT`), per-worker files
//! (`STEM.w0.EXT`), recovered files (`STEM.recovered-TIME.EXT`), the hidden part a file is
//! written under (`.NAME.part`) and its index (`NAME.idx`).

use std::io;
use std::path::{Path, PathBuf};

/// The path of rotated file number `seq` for `base`.
pub fn rotated_path(base: &Path, seq: u32) -> PathBuf {
    rotated_with(base, &format!("{seq:05}"))
}

/// The names rotated files of `base` take, as a user is told them (`STEM_NNNNN.EXT`).
pub fn rotated_pattern(base: &Path) -> PathBuf {
    rotated_with(base, "NNNNN")
}

fn rotated_with(base: &Path, seq: &str) -> PathBuf {
    let stem = base
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match base.extension() {
        Some(ext) => format!("{stem}_{seq}.{}", ext.to_string_lossy()),
        None => format!("{stem}_{seq}"),
    };
    base.with_file_name(name)
}

/// The number of the first rotated file of `base` that a start may write: one past the
/// highest number already in its directory, among whole files, recovered files and parts
/// (`STEM_NNNNN.EXT`, `STEM_NNNNN.recovered-...`, `.STEM_NNNNN.EXT.part`). So a restart goes
/// on after the last run's files and never writes over one of them.
pub fn next_rotation(base: &Path) -> io::Result<u32> {
    let dir = dir_of(base);
    let stem = base
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = format!("{stem}_");
    let mut high = 0u32;
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(1),
        Err(e) => return Err(e),
    };
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        let name = name.strip_prefix('.').unwrap_or(&name);
        let Some(rest) = name.strip_prefix(&prefix) else {
            continue;
        };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let after = &rest[digits.len()..];
        if digits.len() >= 5 && (after.is_empty() || after.starts_with('.')) {
            if let Ok(n) = digits.parse::<u32>() {
                high = high.max(n);
            }
        }
    }
    Ok(high.saturating_add(1))
}

/// The name of `base` without its capture extension: `rec` for `rec.pcapng` and
/// `rec.pcapng.sealed`.
pub fn capture_stem(base: &Path) -> String {
    let name = base
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    CAPTURE_EXTENSIONS
        .iter()
        .find_map(|ext| name.strip_suffix(ext).filter(|s| !s.is_empty()))
        .map_or(name.clone(), str::to_owned)
}

/// The extensions of capture files, longest first.
const CAPTURE_EXTENSIONS: [&str; 5] = [
    ".pcapng.sealed",
    ".pcap.sealed",
    ".pcapng",
    ".pcap",
    ".sealed",
];

/// The directory that holds `path` (`.` for a bare name).
pub fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// The whole files of the capture `base` already in its directory, written by any run:
/// rotated (`STEM_NNNNN`), per worker or member (`STEM.w0...`) and recovered
/// (`STEM.recovered-...`), oldest first, each with its bytes and its index's.
pub fn files_of(base: &Path) -> Vec<(PathBuf, u64)> {
    use std::os::unix::fs::MetadataExt;
    let dir = dir_of(base);
    let stem = capture_stem(base);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<(i64, PathBuf, u64)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let rest = name.strip_prefix(&stem)?;
            let ours = rest.is_empty() || rest.starts_with('_') || rest.starts_with('.');
            let path = e.path();
            if !ours || corecap_index::is_sidecar(&path) {
                return None;
            }
            let m = std::fs::symlink_metadata(&path)
                .ok()
                .filter(|m| m.is_file())?;
            let index =
                std::fs::metadata(corecap_index::sidecar_path(&path)).map_or(0, |m| m.len());
            Some((m.mtime(), path, m.len() + index))
        })
        .collect();
    files.sort();
    files.into_iter().map(|(_, p, b)| (p, b)).collect()
}

/// `out.pcapng` with suffix `w1` becomes `out.w1.pcapng`.
pub fn suffixed_path(base: &Path, suffix: &str) -> PathBuf {
    if base == Path::new("-") {
        return base.to_owned();
    }
    let name = base
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The suffix goes before the capture extension: out.w1.pcapng, out.w1.pcapng.sealed.
    let name = CAPTURE_EXTENSIONS
        .iter()
        .find_map(|ext| {
            let stem = name.strip_suffix(ext)?;
            (!stem.is_empty()).then(|| format!("{stem}.{suffix}{ext}"))
        })
        .unwrap_or_else(|| match name.rsplit_once('.') {
            Some((stem, ext)) if !stem.is_empty() => format!("{stem}.{suffix}.{ext}"),
            _ => format!("{name}.{suffix}"),
        });
    base.with_file_name(name)
}

/// Deletes a capture file and its index.
pub fn remove_with_index(p: &Path) {
    let _ = corecap_index::remove_capture(p);
}

/// The index beside a capture file: `x.pcapng` → `x.pcapng.idx`.
pub fn index_path(p: &Path) -> PathBuf {
    corecap_index::sidecar_path(p)
}

/// The hidden name a file is written under: `dir/.NAME.part`.
pub fn part_path(p: &Path) -> PathBuf {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    p.with_file_name(format!(".{name}.part"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_paths() {
        assert_eq!(
            suffixed_path(Path::new("/tmp/out.pcapng"), "w1"),
            PathBuf::from("/tmp/out.w1.pcapng")
        );
        assert_eq!(
            suffixed_path(Path::new("c.pcapng.sealed"), "g0m1"),
            PathBuf::from("c.g0m1.pcapng.sealed")
        );
        assert_eq!(
            suffixed_path(Path::new("out.bin"), "w2"),
            PathBuf::from("out.w2.bin")
        );
        assert_eq!(
            suffixed_path(Path::new("out"), "w0"),
            PathBuf::from("out.w0")
        );
        assert_eq!(
            rotated_path(Path::new("/d/out.w0.pcap"), 3),
            PathBuf::from("/d/out.w0_00003.pcap")
        );
        assert_eq!(suffixed_path(Path::new("-"), "w0"), PathBuf::from("-"));
    }
}
