//! Retention: a recording's whole files kept under a byte budget (`--retain`).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::names::{dir_of, remove_with_index};

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
