//! The record of what retention deleted: one JSON line per deleted file in the folder it
//! was deleted from (`.corecap-deleted`, named by [`crate::names::deleted_log`]), with the
//! file's name, its first and last packet's time, when it was deleted and by which rule.
//! A query reads it to say which part of its window retention took, and when
//! ([`crate::read::reach`]).
//!
//! - **Durable before the deletion.** Retention appends the lines and syncs them before it
//!   removes a file: a crash between leaves a line for a file still on disk (the file
//!   answers, and wins over the line), never a deleted file without its line.
//! - **Bounded.** Past [`MAX_BYTES`], the older half of the lines is folded into one line
//!   that spans their times (`files` says how many); the file is rewritten under a
//!   temporary name, synced and renamed, so a crash leaves the old record or the new one.
//!   Retention deletes the oldest files first, so the folded files are the oldest ones and
//!   their span is the recording's oldest stretch.
//! - **Damage is skipped.** A line that does not parse (a torn append) is counted and
//!   skipped; the others still answer.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::names::{deleted_log, deleted_log_tmp};

/// Size past which the record is folded (about 8000 lines).
pub const MAX_BYTES: u64 = 1 << 20;

/// Why retention deleted a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The byte budget (`--retain`).
    Size,
    /// The age limit (`--retain-age`).
    Age,
    /// The free space the filesystem keeps (`--min-free`).
    FreeSpace,
    /// The file count (`-b files:N`).
    Files,
}

impl Rule {
    /// Every rule, in the order reports list them.
    pub const ALL: [Rule; 4] = [Rule::Size, Rule::Age, Rule::FreeSpace, Rule::Files];

    /// The rule's name in JSON and metrics labels.
    pub fn name(self) -> &'static str {
        match self {
            Rule::Size => "size",
            Rule::Age => "age",
            Rule::FreeSpace => "free_space",
            Rule::Files => "files",
        }
    }

    /// The rule as a user reads it.
    pub fn text(self) -> &'static str {
        match self {
            Rule::Size => "the byte budget (--retain)",
            Rule::Age => "the age limit (--retain-age)",
            Rule::FreeSpace => "the free space kept (--min-free)",
            Rule::Files => "the file count (-b files:N)",
        }
    }
}

/// One deleted file (or, folded, several).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deletion {
    /// The file's name in its folder (folded: `N files`).
    pub file: String,
    /// Files this line stands for.
    #[serde(default = "one")]
    pub files: u64,
    /// Its first packet's time, ns since the epoch.
    pub first_ns: u64,
    /// Its last packet's time, ns.
    pub last_ns: u64,
    /// When it was deleted, ns.
    pub at_ns: u64,
    /// The rule that deleted it.
    pub rule: Rule,
}

fn one() -> u64 {
    1
}

impl Deletion {
    /// The line of one file at `path`, whose packets span `times` (first, last), deleted at
    /// `at_ns` by `rule`.
    pub fn of_file(path: &Path, (first_ns, last_ns): (u64, u64), at_ns: u64, rule: Rule) -> Self {
        Deletion {
            file: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            files: 1,
            first_ns,
            last_ns,
            at_ns,
            rule,
        }
    }
}

/// Appends `lines` to the record of `dir` and syncs them (see the module doc); folds the
/// record first when it has grown past [`MAX_BYTES`].
pub fn record(dir: &Path, lines: &[Deletion]) -> io::Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let path = deleted_log(dir);
    let grown = std::fs::metadata(&path).map_or(0, |m| m.len());
    if grown > MAX_BYTES {
        fold(dir)?;
    }
    let made = !path.exists();
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(&path)?;
    // A torn last line (a crash in an append) is ended first, so it costs only itself.
    let mut text = Vec::new();
    if !ends_whole(&f)? {
        text.push(b'\n');
    }
    for l in lines {
        serde_json::to_writer(&mut text, l).map_err(io::Error::other)?;
        text.push(b'\n');
    }
    f.write_all(&text)?;
    f.sync_data()?;
    if made {
        corecap_linux::direct::sync_parent(&path)?;
    }
    Ok(())
}

/// Whether `f` is empty or ends with a newline.
fn ends_whole(f: &File) -> io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let len = f.metadata()?.len();
    if len == 0 {
        return Ok(true);
    }
    let mut last = [0u8];
    f.read_exact_at(&mut last, len - 1)?;
    Ok(last[0] == b'\n')
}

/// The record of `dir`, in the order it was written, and how many lines were skipped as
/// damaged. A folder without one has none.
pub fn read(dir: &Path) -> (Vec<Deletion>, u64) {
    let Ok(text) = std::fs::read_to_string(deleted_log(dir)) else {
        return (Vec::new(), 0);
    };
    let mut out = Vec::new();
    let mut skipped = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<Deletion>(line) {
            Ok(d) => out.push(d),
            Err(_) => skipped += 1,
        }
    }
    (out, skipped)
}

/// Folds the older half of the record of `dir` into one line, rewritten whole.
fn fold(dir: &Path) -> io::Result<()> {
    let (mut lines, _) = read(dir);
    let half = lines.len() / 2;
    if half < 2 {
        return Ok(());
    }
    let newer = lines.split_off(half);
    let folded = Deletion {
        file: String::new(),
        files: lines.iter().map(|d| d.files).sum(),
        first_ns: lines.iter().map(|d| d.first_ns).min().unwrap_or(0),
        last_ns: lines.iter().map(|d| d.last_ns).max().unwrap_or(0),
        at_ns: lines.iter().map(|d| d.at_ns).max().unwrap_or(0),
        rule: lines.last().map_or(Rule::Size, |d| d.rule),
    };
    let folded = Deletion {
        file: format!("{} files", folded.files),
        ..folded
    };
    let tmp = deleted_log_tmp(dir);
    let mut text = Vec::new();
    for l in std::iter::once(&folded).chain(&newer) {
        serde_json::to_writer(&mut text, l).map_err(io::Error::other)?;
        text.push(b'\n');
    }
    let mut f = File::create(&tmp)?;
    f.write_all(&text)?;
    f.sync_all()?;
    std::fs::rename(&tmp, deleted_log(dir))?;
    corecap_linux::direct::sync_parent(&tmp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("corecap-deleted-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("dir");
        d
    }

    fn line(n: u64) -> Deletion {
        Deletion {
            file: format!("rec_{n:05}.pcapng"),
            files: 1,
            first_ns: n * 10,
            last_ns: n * 10 + 9,
            at_ns: 1_000 + n,
            rule: Rule::Age,
        }
    }

    #[test]
    fn test_a_torn_line_is_skipped_and_the_rest_read() {
        let d = scratch("torn");
        record(&d, &[line(1), line(2)]).expect("record");
        let mut f = OpenOptions::new()
            .append(true)
            .open(deleted_log(&d))
            .expect("open");
        f.write_all(b"{\"file\":\"x\",\"fir").expect("write");
        drop(f);
        record(&d, &[line(3)]).expect("record");
        let (got, skipped) = read(&d);
        assert_eq!(skipped, 1);
        assert_eq!(
            got,
            vec![line(1), line(2), line(3)],
            "only the torn line is lost"
        );
        std::fs::remove_dir_all(&d).expect("clean");
    }

    #[test]
    fn test_the_record_stays_bounded_and_keeps_the_span_of_what_it_folds() {
        let d = scratch("bounded");
        let mut n = 0;
        while n < 40_000 {
            let batch: Vec<Deletion> = (n..n + 1000).map(line).collect();
            record(&d, &batch).expect("record");
            n += 1000;
        }
        let size = std::fs::metadata(deleted_log(&d)).expect("meta").len();
        assert!(size <= 2 * MAX_BYTES, "{size} bytes");
        let (got, skipped) = read(&d);
        assert_eq!(skipped, 0);
        assert_eq!(got.iter().map(|l| l.files).sum::<u64>(), 40_000);
        assert_eq!(got[0].first_ns, 0, "the oldest time is still spanned");
        assert_eq!(got.last(), Some(&line(39_999)));
        std::fs::remove_dir_all(&d).expect("clean");
    }
}
