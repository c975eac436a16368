//! Retention: a recording's whole files kept under a byte budget (`--retain`).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::names::{capture_stem, dir_of, is_file_of, remove_with_index};

/// Whole files kept under a byte budget (`--retain`), shared by every file sink of a
/// capture (or by the daemon's captures): once a file is whole, the oldest are deleted
/// until the kept files and the files being written fit.
#[derive(Debug)]
pub struct Retention {
    budget: u64,
    /// Whole files, oldest first, with their bytes (index included).
    kept: Mutex<VecDeque<(PathBuf, u64)>>,
    /// Bytes of the files being written. Each disk writer adds what it writes and takes it
    /// back at close; Relaxed, a total read when a file closes.
    open_bytes: AtomicU64,
    deleted_files: AtomicU64,
    deleted_bytes: AtomicU64,
}

impl Retention {
    /// A budget of `budget` bytes.
    pub fn new(budget: u64) -> Arc<Self> {
        Arc::new(Self {
            budget,
            kept: Mutex::new(VecDeque::new()),
            open_bytes: AtomicU64::new(0),
            deleted_files: AtomicU64::new(0),
            deleted_bytes: AtomicU64::new(0),
        })
    }

    /// Files and bytes deleted so far.
    pub fn deleted(&self) -> (u64, u64) {
        (
            self.deleted_files.load(Ordering::Relaxed),
            self.deleted_bytes.load(Ordering::Relaxed),
        )
    }

    /// A file being written grew by `bytes`.
    pub fn grow_open(&self, bytes: u64) {
        self.open_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// A file being written that had reached `bytes` is closed (and counted whole by
    /// [`Retention::add`], or abandoned).
    pub fn close_open(&self, bytes: u64) {
        let now = self.open_bytes.load(Ordering::Relaxed);
        self.open_bytes.fetch_sub(bytes.min(now), Ordering::Relaxed);
    }

    /// The budget in bytes.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Counts files already on disk (written by an earlier run), oldest first, before the
    /// ones this run adds.
    pub fn adopt(&self, files: Vec<(PathBuf, u64)>) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        for f in files.into_iter().rev() {
            if !kept.iter().any(|k| k.0 == f.0) {
                kept.push_front(f);
            }
        }
    }

    /// Deletes the oldest whole files until the rest fit the budget (at a start, after
    /// [`Retention::adopt`]: a run that was killed before it closed a file never trimmed).
    /// Returns the deleted paths.
    pub fn trim(&self) -> Vec<PathBuf> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        self.trim_kept(&mut kept, 0)
    }

    /// Stops counting a file that something else deleted (`-b files:N`).
    pub fn forget(&self, path: &Path) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|k| k.0 != path);
    }

    /// Adds a whole file and deletes the oldest files over the budget (never the one just
    /// added). Returns the deleted paths.
    pub fn add(&self, path: PathBuf, bytes: u64) -> Vec<PathBuf> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.push_back((path, bytes));
        self.trim_kept(&mut kept, 1)
    }

    /// Deletes the oldest of `kept` while they and the files being written are over the
    /// budget, leaving at least `keep` of them.
    fn trim_kept(&self, kept: &mut VecDeque<(PathBuf, u64)>, keep: usize) -> Vec<PathBuf> {
        let open = self.open_bytes.load(Ordering::Relaxed);
        let mut total: u64 = kept.iter().map(|k| k.1).sum::<u64>() + open;
        let mut gone = Vec::new();
        let mut lease = None;
        while total > self.budget && kept.len() > keep {
            let Some(dir) = kept.front().map(|k| dir_of(&k.0).to_owned()) else {
                break;
            };
            if lease.is_none() {
                // A query reading the folder holds its lease: the oldest files stay until it
                // is done (the next close tries again), so no answer is cut short.
                match corecap_linux::direct::Lease::exclusive(&dir) {
                    Ok(Some(l)) => lease = Some(l),
                    Ok(None) => break,
                    // A folder where no lease can be made has no reader to wait for.
                    Err(_) => {}
                }
            }
            let Some((p, b)) = kept.pop_front() else {
                break;
            };
            remove_with_index(&p);
            total -= b;
            self.deleted_files.fetch_add(1, Ordering::Relaxed);
            self.deleted_bytes.fetch_add(b, Ordering::Relaxed);
            gone.push(p);
        }
        crate::catalog_update::forget(&gone);
        gone
    }
}

/// A capture's files already on disk, as a start finds them ([`on_disk`]).
#[derive(Debug, Default)]
pub struct OnDisk {
    /// Its whole files, oldest packets first, each with its bytes and its index's.
    pub files: Vec<(PathBuf, u64)>,
    /// Files whose names begin as the capture's but that are not its files, each with why:
    /// retention never counts or deletes them.
    pub left_alone: Vec<(PathBuf, &'static str)>,
}

/// The whole files of the capture `base` already in its directory, written by any run (see
/// [`is_file_of`] for the names), each checked to begin as a capture file, in the order of
/// their first packet's time: a clock that stepped back, or a file copied in later, does not
/// make the newest recording look the oldest. A file whose first packet cannot be read (a
/// sealed file, whose key retention does not hold) takes its modification time.
pub fn on_disk(base: &Path) -> OnDisk {
    use std::os::unix::fs::MetadataExt;
    let mut out = OnDisk::default();
    let stem = capture_stem(base);
    let Ok(entries) = std::fs::read_dir(dir_of(base)) else {
        return out;
    };
    let mut files: Vec<(u64, PathBuf, u64)> = Vec::new();
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        if !name.starts_with(&stem) || corecap_index::is_sidecar(&path) {
            continue;
        }
        let Some(m) = std::fs::symlink_metadata(&path)
            .ok()
            .filter(|m| m.is_file())
        else {
            continue;
        };
        if !is_file_of(base, &name) {
            out.left_alone
                .push((path, "not a name the files of this capture take"));
            continue;
        }
        let kind = crate::query::file_kind(&path).unwrap_or(crate::query::FileKind::Other);
        if !matches!(
            kind,
            crate::query::FileKind::Plain | crate::query::FileKind::Sealed
        ) {
            out.left_alone
                .push((path, "it does not begin as a capture file corecap writes"));
            continue;
        }
        let mtime_ns = u64::try_from(m.mtime()).unwrap_or(0) * 1_000_000_000
            + u64::try_from(m.mtime_nsec()).unwrap_or(0);
        let first = first_packet_ns(&path).unwrap_or(mtime_ns);
        let index = std::fs::metadata(corecap_index::sidecar_path(&path)).map_or(0, |m| m.len());
        files.push((first, path, m.len() + index));
    }
    files.sort();
    out.files = files.into_iter().map(|(_, p, b)| (p, b)).collect();
    out.left_alone.sort();
    out
}

/// The time of a plain capture file's first packet.
fn first_packet_ns(path: &Path) -> Option<u64> {
    let mut r = corecap_wire::read::CaptureReader::open(path).ok()?;
    r.next_packet().ok().flatten().map(|p| p.ts_ns)
}
