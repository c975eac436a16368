//! The names of a recording's files: rotated files (`STEM_NNNNN.EXT`), per-worker files
//! (`STEM.w0.EXT`), recovered files (`STEM.recovered-TIME.EXT`), the hidden part a file is
//! written under (`.NAME.part`), its index (`NAME.idx`) and its sessions (`NAME.sessions`).

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
    let (stem, ext) = stem_and_extension(base);
    base.with_file_name(format!("{stem}_{seq}{ext}"))
}

/// A file's name cut where rotation puts its number: before a compressed capture's two
/// extensions (`rec` and `.pcapng.zst`), else before its last one (`rec` and `.pcapng`,
/// `rec.pcapng` and `.sealed`); the extension is empty when the name has none.
fn stem_and_extension(base: &Path) -> (String, String) {
    let name = base
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some((stem, ext)) = COMPRESSED_EXTENSIONS
        .iter()
        .find_map(|ext| Some((name.strip_suffix(ext).filter(|s| !s.is_empty())?, *ext)))
    {
        return (stem.to_owned(), ext.to_owned());
    }
    let stem = base
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = base
        .extension()
        .map_or(String::new(), |e| format!(".{}", e.to_string_lossy()));
    (stem, ext)
}

/// The suffix of a compressed recording (`--compress zstd`): a zstd stream, as `zstd`
/// names its files and as every reader of captures tells them.
pub const COMPRESSED_SUFFIX: &str = ".zst";

/// The extensions of compressed captures, compressed and sealed ones first.
const COMPRESSED_EXTENSIONS: [&str; 4] = [
    ".pcapng.zst.sealed",
    ".pcap.zst.sealed",
    ".pcapng.zst",
    ".pcap.zst",
];

/// The name a recording takes when it is compressed: `rec.pcapng` → `rec.pcapng.zst`
/// (unchanged when it already ends in `.zst`). A sealed name takes it before `.sealed`,
/// as the file is compressed, then sealed: `rec.pcapng.sealed` → `rec.pcapng.zst.sealed`.
pub fn compressed_path(base: &Path) -> PathBuf {
    let name = base.to_string_lossy();
    let sealed = name.strip_suffix(SEALED_SUFFIX);
    let inner = sealed.unwrap_or(&name);
    if base == Path::new("-") || inner.ends_with(COMPRESSED_SUFFIX) {
        return base.to_owned();
    }
    let mut s = base.as_os_str().to_owned();
    if sealed.is_some() {
        s = format!("{inner}{COMPRESSED_SUFFIX}{SEALED_SUFFIX}").into();
    } else {
        s.push(COMPRESSED_SUFFIX);
    }
    PathBuf::from(s)
}

/// The suffix of a sealed capture's name, by custom (the file is told by its magic).
const SEALED_SUFFIX: &str = ".sealed";

/// The number of the first rotated file of `base` that a start may write: one past the
/// highest number already in its directory, among whole files, recovered files and parts
/// (`STEM_NNNNN.EXT`, `STEM_NNNNN.recovered-...`, `.STEM_NNNNN.EXT.part`). So a restart goes
/// on after the last run's files and never writes over one of them.
pub fn next_rotation(base: &Path) -> io::Result<u32> {
    let dir = dir_of(base);
    let (stem, _) = stem_and_extension(base);
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
const CAPTURE_EXTENSIONS: [&str; 9] = [
    ".pcapng.zst.sealed",
    ".pcap.zst.sealed",
    ".pcapng.sealed",
    ".pcapng.zst",
    ".pcap.sealed",
    ".pcap.zst",
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

/// Whether `name` is one of the names the files of the capture `base` take, built by the
/// same functions that name them when they are written: `base` itself, per worker or member
/// (`STEM.w0.EXT`, `STEM.g0m1.EXT`), rotated (`STEM_NNNNN.EXT`, `STEM.w0_NNNNN.EXT`), and
/// each of those recovered (`STEM_NNNNN.recovered-TIME[-N].EXT`). A name that only begins
/// with the stem (`rec.notes.txt`, `rec_rotate.sh`) is not one.
pub fn is_file_of(base: &Path, name: &str) -> bool {
    let Some(base_name) = base.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return false;
    };
    let plain = match recovered_tag(name) {
        Some(tag) => name.replacen(&format!(".{tag}"), "", 1),
        None => name.to_owned(),
    };
    let bare = Path::new(&base_name);
    let members = std::iter::once(None).chain(member_tags(&plain).into_iter().map(Some));
    for member in members {
        let named = match &member {
            Some(tag) => suffixed_path(bare, tag),
            None => bare.to_owned(),
        };
        if named.as_os_str() == plain.as_str() {
            return true;
        }
        if let Some(seq) = rotation_number(&plain) {
            if rotated_path(&named, seq).as_os_str() == plain.as_str() {
                return true;
            }
        }
    }
    false
}

/// The name a recovered file takes (see `recover`): `path` with the tag `recovered-STAMP`,
/// or `recovered-STAMP-N` for the `copy`th name tried (from 2) when that is taken.
pub fn recovered_path(path: &Path, stamp: &str, copy: u32) -> PathBuf {
    let tag = if copy <= 1 {
        format!("recovered-{stamp}")
    } else {
        format!("recovered-{stamp}-{copy}")
    };
    suffixed_path(path, &tag)
}

/// Whether `path` is a recovered file's name ([`recovered_path`]).
pub fn is_recovered(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| recovered_tag(&n.to_string_lossy()).is_some())
}

/// The `recovered-TIME[-N]` tag of a recovered file's name, if it has one.
fn recovered_tag(name: &str) -> Option<&str> {
    let at = name.find(".recovered-")? + 1;
    let tag = &name[at..];
    let tag = &tag[..tag.find('.').unwrap_or(tag.len())];
    let stamp = &tag["recovered-".len()..];
    let (time, copy) = match stamp.split_once('-') {
        Some((t, n)) => (t, Some(n)),
        None => (stamp, None),
    };
    let b = time.as_bytes();
    let time_ok = b.len() == 16
        && b[8] == b'T'
        && b[15] == b'Z'
        && b[..8].iter().chain(&b[9..15]).all(u8::is_ascii_digit);
    let copy_ok = copy.is_none_or(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()));
    (time_ok && copy_ok).then_some(tag)
}

/// The worker and member tags (`w3`, `g0m1`) that `name` holds between dots.
fn member_tags(name: &str) -> Vec<String> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    name.split(['.', '_'])
        .filter(|part| {
            part.strip_prefix('w').is_some_and(digits)
                || part
                    .strip_prefix('g')
                    .and_then(|r| r.split_once('m'))
                    .is_some_and(|(g, m)| digits(g) && digits(m))
        })
        .map(str::to_owned)
        .collect()
}

/// The number after the last `_` in `name`, when it has at least 5 digits.
fn rotation_number(name: &str) -> Option<u32> {
    let rest = &name[name.rfind('_')? + 1..];
    let digits: &str = &rest[..rest.bytes().take_while(u8::is_ascii_digit).count()];
    (digits.len() >= 5).then(|| digits.parse().ok()).flatten()
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

/// Deletes a capture file, its index and its sessions file.
pub fn remove_with_index(p: &Path) {
    let _ = corecap_index::remove_capture(p);
    // After the file: a crash between leaves a sessions file that no file's bytes match,
    // never a file without its sessions.
    let _ = std::fs::remove_file(sessions_path(p));
}

/// The index beside a capture file: `x.pcapng` → `x.pcapng.idx`.
pub fn index_path(p: &Path) -> PathBuf {
    corecap_index::sidecar_path(p)
}

/// The sessions file beside a capture file: `x.pcapng` → `x.pcapng.sessions`,
/// `x.pcapng.sealed` → `x.pcapng.sealed.sessions` (see [`crate::session::format`]). Written
/// like the index, under the hidden `.x.pcapng.sessions.tmp` and renamed whole.
pub fn sessions_path(capture: &Path) -> PathBuf {
    let mut s = capture.as_os_str().to_owned();
    s.push(".sessions");
    PathBuf::from(s)
}

/// Whether `path` has a sessions file's name (ends in `.sessions`).
pub fn is_sessions(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "sessions")
}

/// Whether `path` has the name of a file that describes the capture file beside it (its
/// index or its sessions), not a capture file.
pub fn is_beside(path: &Path) -> bool {
    corecap_index::is_sidecar(path) || is_sessions(path)
}

/// The hidden name a file is written under: `dir/.NAME.part`.
pub fn part_path(p: &Path) -> PathBuf {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    p.with_file_name(part_name(&name))
}

/// The hidden name of the file `name` while it is written: `.NAME.part`.
pub fn part_name(name: &str) -> String {
    format!(".{name}.part")
}

/// Whether `path` is the hidden part of a capture file being written (`.NAME.part`, not an
/// index's temporary file).
pub fn is_part(path: &Path) -> bool {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return false;
    };
    whole_of_part(&name).is_some_and(|own| !is_beside(Path::new(own)))
}

/// The name a hidden part gets once its file is whole: `.NAME.part` → `NAME`; None for a
/// name that is no part.
pub fn whole_of_part(part: &str) -> Option<&str> {
    part.strip_prefix('.')?
        .strip_suffix(".part")
        .filter(|n| !n.is_empty())
}

/// The name of a recording folder's record of what retention deleted (hidden: queries,
/// recovery and retention skip it; see [`crate::keep::deleted`]).
pub const DELETED_LOG: &str = ".corecap-deleted";

/// The record of what retention deleted in the folder `dir`.
pub fn deleted_log(dir: &Path) -> PathBuf {
    dir.join(DELETED_LOG)
}

/// The temporary name the record of deletions is rewritten under when it is compacted.
pub fn deleted_log_tmp(dir: &Path) -> PathBuf {
    dir.join(format!("{DELETED_LOG}.tmp"))
}

/// The name of a recording folder's holds (hidden; see [`crate::keep::hold`]).
pub const HOLDS_FILE: &str = ".corecap-holds";

/// The holds of the recording folder `dir`.
pub fn holds_path(dir: &Path) -> PathBuf {
    dir.join(HOLDS_FILE)
}

/// The temporary name the holds are rewritten under.
pub fn holds_tmp(dir: &Path) -> PathBuf {
    dir.join(format!("{HOLDS_FILE}.tmp"))
}

/// The folder of held recordings inside a recording folder: `dir/held`. What holds keep of
/// a file retention deletes goes there under the file's own name.
pub fn held_dir(dir: &Path) -> PathBuf {
    dir.join("held")
}

/// The held copy of the capture file `file`: `DIR/held/NAME`.
pub fn held_path(file: &Path) -> PathBuf {
    held_path_nth(file, 1)
}

/// The `n`th name a held copy of `file` may take: `DIR/held/NAME`, then `DIR/held/N~NAME`
/// (a spool's name used again by a later capture whose file retention deletes too).
pub fn held_path_nth(file: &Path, n: u32) -> PathBuf {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = if n <= 1 { name } else { format!("{n}~{name}") };
    held_dir(dir_of(file)).join(name)
}

/// The capture file a held copy keeps packets of: `DIR/held/NAME` and `DIR/held/N~NAME`
/// → `DIR/NAME`.
pub fn original_of_held(held: &Path) -> Option<PathBuf> {
    let name = held.file_name()?.to_string_lossy().into_owned();
    let own = match name.split_once('~') {
        Some((n, rest)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => rest,
        _ => name.as_str(),
    };
    Some(dir_of(dir_of(held)).join(own))
}

/// The hidden part one hold's packets of `file` are gathered in before the held copies of
/// several holds are merged: `DIR/held/.NAME.hold-N.part`.
pub fn held_hold_part(file: &Path, n: usize) -> PathBuf {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    held_dir(dir_of(file)).join(part_name(&format!("{name}.hold-{n}")))
}

/// The name of a recording folder's alerts (hidden; see [`crate::keep::alert`]).
pub const ALERTS_FILE: &str = ".corecap-alerts";

/// The alerts of the recording folder `dir`, one JSON line each.
pub fn alerts_path(dir: &Path) -> PathBuf {
    dir.join(ALERTS_FILE)
}

/// Where the follower of Suricata's `eve.json` is in it: `dir/.corecap-eve-position`.
pub fn eve_position_path(dir: &Path) -> PathBuf {
    dir.join(".corecap-eve-position")
}

/// The temporary name the follower's position is rewritten under.
pub fn eve_position_tmp(dir: &Path) -> PathBuf {
    dir.join(".corecap-eve-position.tmp")
}

/// The name of the hold an alert makes: `alert-aN`.
pub fn alert_hold_name(alert_id: &str) -> String {
    format!("alert-{alert_id}")
}

/// The held recordings of the recording folder `dir` that answer a query: every whole
/// capture file of `dir/held` whose file is gone from `dir` (while the file is there, it
/// answers itself: see [`crate::keep::hold`]), in name order.
pub fn held_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(held_dir(dir)) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let hidden = p
                .file_name()
                .is_none_or(|n| n.to_string_lossy().starts_with('.'));
            !hidden
                && !is_part(p)
                && !is_beside(p)
                && p.is_file()
                && original_of_held(p).is_some_and(|o| !o.exists())
        })
        .collect();
    out.sort();
    out
}

/// The id a daemon gives an unnamed capture: `cN`.
pub fn id_name(n: u64) -> String {
    format!("c{n}")
}

/// `N` of an id `cN`.
pub fn id_number(id: &str) -> Option<u64> {
    let digits = id.strip_prefix('c')?;
    if digits.is_empty() || digits.len() > 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// `N` of a file name that starts with an id `cN` the daemon may have given: `cN.EXT`,
/// `cN.g0m0.flows.jsonl`, `cN.recovered-TIME.pcapng`, the hidden `.cN.pcapng.part`.
pub fn name_id(name: &str) -> Option<u64> {
    let n = name.strip_prefix('.').unwrap_or(name);
    let end = n.find('.').unwrap_or(n.len());
    id_number(&n[..end])
}

/// Whether a file name a request gives has the shape of the names the daemon gives its
/// unnamed captures: `c` and digits before the first `.` (`c7.pcapng`, `c12`,
/// `c18446744073709551615.pcap`). Those names are the daemon's own: ids continue past
/// every `cN` in the spool's names, so a request taking one could push the ids to their
/// end, or take an id's name before the id comes.
pub fn is_id_name(name: &str) -> bool {
    let stem = name.split('.').next().unwrap_or_default();
    stem.strip_prefix('c')
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// The recovered names of `name` in the spool (`NAME.recovered-TIME.EXT`, see
/// [`crate::recover`]) last written at `since` (seconds since the epoch) or after, in name
/// (so time) order. The time tells them from an older capture's file of the same name.
pub fn recovered_names(dir: &Path, name: &str, since: f64) -> Vec<String> {
    let probe = suffixed_path(Path::new(name), "recovered-*");
    let probe = probe.to_string_lossy();
    let Some((head, tail)) = probe.split_once('*') else {
        return Vec::new();
    };
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<String> = rd
        .filter_map(Result::ok)
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.len() > head.len() + tail.len() && n.starts_with(head) && n.ends_with(tail)
        })
        .filter(|e| {
            e.metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .is_some_and(|t| t.as_secs_f64() + 1.0 >= since)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_held_names_lead_back_to_their_file() {
        let f = Path::new("/s/x.pcapng");
        assert_eq!(held_path(f), Path::new("/s/held/x.pcapng"));
        assert_eq!(held_path_nth(f, 3), Path::new("/s/held/3~x.pcapng"));
        for n in [1, 2, 12] {
            assert_eq!(original_of_held(&held_path_nth(f, n)).as_deref(), Some(f));
        }
        assert_eq!(
            original_of_held(Path::new("/s/held/a~b.pcapng")).as_deref(),
            Some(Path::new("/s/a~b.pcapng"))
        );
    }

    #[test]
    fn test_compressed_and_sealed_names_keep_their_three_extensions() {
        let base = compressed_path(Path::new("/d/rec.pcapng.sealed"));
        assert_eq!(base, Path::new("/d/rec.pcapng.zst.sealed"));
        assert_eq!(compressed_path(&base), base);
        assert_eq!(
            rotated_path(&base, 7),
            Path::new("/d/rec_00007.pcapng.zst.sealed")
        );
        assert_eq!(
            suffixed_path(&base, "w1"),
            Path::new("/d/rec.w1.pcapng.zst.sealed")
        );
        assert_eq!(capture_stem(&base), "rec");
        assert_eq!(
            recovered_path(&rotated_path(&base, 7), "20261128T010203Z", 1),
            Path::new("/d/rec_00007.recovered-20261128T010203Z.pcapng.zst.sealed")
        );
        assert!(is_file_of(&base, "rec_00007.pcapng.zst.sealed"));
        assert!(is_file_of(&base, "rec.w1_00002.pcapng.zst.sealed"));
        assert!(!is_file_of(&base, "rec_00007.pcapng.zst"));
        assert_eq!(
            index_path(&rotated_path(&base, 7)),
            Path::new("/d/rec_00007.pcapng.zst.sealed.idx")
        );
        // A sealed recording named without `.sealed` takes `.zst` at the end.
        assert_eq!(
            compressed_path(Path::new("/d/rec.pcap")),
            Path::new("/d/rec.pcap.zst")
        );
    }

    #[test]
    fn test_compressed_names_keep_their_two_extensions() {
        let base = compressed_path(Path::new("/d/rec.pcapng"));
        assert_eq!(base, Path::new("/d/rec.pcapng.zst"));
        assert_eq!(compressed_path(&base), base);
        assert_eq!(rotated_path(&base, 7), Path::new("/d/rec_00007.pcapng.zst"));
        assert_eq!(
            suffixed_path(&base, "w1"),
            Path::new("/d/rec.w1.pcapng.zst")
        );
        assert_eq!(capture_stem(&base), "rec");
        assert_eq!(
            recovered_path(&rotated_path(&base, 7), "20261128T010203Z", 1),
            Path::new("/d/rec_00007.recovered-20261128T010203Z.pcapng.zst")
        );
        assert!(is_file_of(&base, "rec_00007.pcapng.zst"));
        assert!(is_file_of(&base, "rec.w1_00002.pcapng.zst"));
        assert!(is_file_of(
            &base,
            "rec_00007.recovered-20261128T010203Z.pcapng.zst"
        ));
        assert!(!is_file_of(&base, "rec_00007.pcapng"));
        assert_eq!(
            index_path(&rotated_path(&base, 7)),
            Path::new("/d/rec_00007.pcapng.zst.idx")
        );
        // Plain and sealed names are as they were.
        assert_eq!(
            rotated_path(Path::new("/d/rec.pcapng"), 7),
            Path::new("/d/rec_00007.pcapng")
        );
        assert_eq!(
            rotated_path(Path::new("/d/rec.pcapng.sealed"), 7),
            Path::new("/d/rec.pcapng_00007.sealed")
        );
        let dir = std::env::temp_dir().join(format!("corecap-zst-names-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(".rec_00041.pcapng.zst.part"), b"").unwrap();
        assert_eq!(next_rotation(&dir.join("rec.pcapng.zst")).unwrap(), 42);
        std::fs::remove_dir_all(&dir).unwrap();
    }

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

    #[test]
    fn test_sessions_names() {
        let capture = Path::new("/d/x.pcapng");
        let side = sessions_path(capture);
        assert_eq!(side, Path::new("/d/x.pcapng.sessions"));
        assert!(is_sessions(&side) && !is_sessions(capture));
        assert!(!corecap_index::is_sidecar(&side));
        assert_eq!(
            corecap_index::sidecar_temp_path(&side),
            Path::new("/d/.x.pcapng.sessions.tmp")
        );
        assert_eq!(
            sessions_path(Path::new("x.pcapng.sealed")),
            Path::new("x.pcapng.sealed.sessions")
        );
        assert!(!is_file_of(capture, "x.pcapng.sessions"));
    }

    #[test]
    fn test_issue40_only_the_names_a_capture_writes_are_its_files() {
        let base = Path::new("/d/rec.pcapng");
        for ours in [
            "rec.pcapng",
            "rec_00001.pcapng",
            "rec_123456.pcapng",
            "rec.w0.pcapng",
            "rec.w12_00007.pcapng",
            "rec.g0m1.pcapng",
            "rec.g2m3_00010.pcapng",
            "rec_00003.recovered-20261125T080102Z.pcapng",
            "rec_00003.recovered-20261125T080102Z-2.pcapng",
            "rec.w1.recovered-20261125T080102Z.pcapng",
        ] {
            assert!(is_file_of(base, ours), "{ours}");
        }
        for theirs in [
            "rec.notes.txt",
            "rec_rotate.sh",
            "rec.pcapng.bak",
            "rec_1.pcapng",
            "rec_00001.pcap",
            "rec.old.pcapng",
            "rec.w.pcapng",
            "record.pcapng",
            "rec_00001.recovered-yesterday.pcapng",
            "rec.pcapng.idx",
            ".rec_00001.pcapng.part",
        ] {
            assert!(!is_file_of(base, theirs), "{theirs}");
        }
        let sealed = Path::new("c.pcapng.sealed");
        assert!(is_file_of(sealed, "c.pcapng_00002.sealed"));
        assert!(is_file_of(sealed, "c.w1.pcapng.sealed"));
        assert!(!is_file_of(sealed, "c.pcapng"));
    }
}
