//! One live writer per name: a capture's base name (`-w rec.pcapng`) or a daemon's spool is
//! claimed by a lock file beside it (`.rec.pcapng.lock`, `.corecap-spool.lock`), held with
//! `flock` for as long as the writer lives. A second writer on the same name is refused at
//! start with a message that names the holder (its pid, command line and start time, which
//! the holder writes into the lock file), before it recovers, deletes or writes anything.
//!
//! `flock` goes with the process: a writer killed by SIGKILL or the OOM killer releases its
//! claim, and the next start takes it. A writer that stops cleanly removes the file while
//! it still holds the lock; a start that locked a file just removed sees that the name now
//! points elsewhere (another inode, or none) and tries again, so two writers never both
//! hold a claim.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A claim on a name, held until dropped.
#[derive(Debug)]
pub struct WriterLock {
    file: File,
    path: PathBuf,
}

/// Why a claim was refused.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// A live writer holds the name.
    #[error(
        "{what} is being written by another writer ({holder}); stop it, or write to another name"
    )]
    Held {
        /// The name claimed.
        what: String,
        /// Who holds it, as the holder wrote it.
        holder: String,
    },
    /// The lock file could not be made or locked.
    #[error("claiming {}: {source}", path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
}

/// The lock file of a capture's base name: `dir/.NAME.lock`.
pub fn lock_path(base: &Path) -> PathBuf {
    let name = base
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    base.with_file_name(format!(".{name}.lock"))
}

impl WriterLock {
    /// Claims the capture `base` (see the module doc).
    pub fn capture(base: &Path) -> Result<WriterLock, LockError> {
        Self::take(&lock_path(base), &base.display().to_string())
    }

    /// Claims the folder `dir` for a daemon's spool.
    pub fn spool(dir: &Path) -> Result<WriterLock, LockError> {
        Self::take(
            &dir.join(".corecap-spool.lock"),
            &format!("the spool {}", dir.display()),
        )
    }

    fn take(path: &Path, what: &str) -> Result<WriterLock, LockError> {
        let io = |source| LockError::Io {
            path: path.to_owned(),
            source,
        };
        loop {
            let (mut file, writable) = open(path).map_err(io)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    let mut holder = String::new();
                    let _ = file.read_to_string(&mut holder);
                    let holder = holder.trim();
                    return Err(LockError::Held {
                        what: what.to_owned(),
                        holder: if holder.is_empty() {
                            "a writer that has not said who it is yet".to_owned()
                        } else {
                            holder.replace('\n', ", ")
                        },
                    });
                }
                Err(TryLockError::Error(e)) => return Err(io(e)),
            }
            // The holder before may have removed the name between our open and our lock.
            let same = std::fs::symlink_metadata(path).is_ok_and(|m| {
                file.metadata()
                    .is_ok_and(|f| f.ino() == m.ino() && f.dev() == m.dev())
            });
            if !same {
                continue;
            }
            if writable {
                // Who holds it, for a second writer's message; best effort: a full disk
                // must not stop the writer that holds the claim (the lock is what counts).
                let _ = file
                    .set_len(0)
                    .and_then(|()| file.rewind())
                    .and_then(|()| file.write_all(describe_self().as_bytes()));
            }
            return Ok(WriterLock {
                file,
                path: path.to_owned(),
            });
        }
    }
}

/// Opens (or makes) a lock file; a writer that may not write it (one left by a writer that
/// ran as another user) still locks it, read-only, and says nothing in it.
fn open(path: &Path) -> io::Result<(File, bool)> {
    let flags = libc::O_NOFOLLOW | libc::O_CLOEXEC;
    match OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(flags)
        .open(path)
    {
        Ok(f) => Ok((f, true)),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied && path.exists() => {
            let f = OpenOptions::new()
                .read(true)
                .custom_flags(flags)
                .open(path)?;
            Ok((f, false))
        }
        Err(e) => Err(e),
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        // Removed while still locked (see the module doc); the lock goes with `file`.
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

/// `pid N: COMMAND LINE, since UNIX-SECONDS`.
fn describe_self() -> String {
    let cmd = std::fs::read("/proc/self/cmdline")
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!(
        "pid {}: {cmd}, since {}\n",
        std::process::id(),
        crate::recover::utc_stamp(since)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_issue40_a_second_claim_is_refused_and_names_the_holder() {
        let d = std::env::temp_dir().join(format!("corecap-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("dir");
        let base = d.join("rec.pcapng");
        let first = WriterLock::capture(&base).expect("first claim");
        let e = WriterLock::capture(&base).expect_err("second claim");
        let msg = e.to_string();
        assert!(matches!(e, LockError::Held { .. }), "{msg}");
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        assert!(msg.contains("rec.pcapng"), "{msg}");
        // Another name in the same folder is free.
        let other = WriterLock::capture(&d.join("other.pcapng")).expect("other name");
        drop(first);
        assert!(!lock_path(&base).exists(), "a clean stop removes its claim");
        let again = WriterLock::capture(&base).expect("claim after the stop");
        drop((again, other));
        let spool = WriterLock::spool(&d).expect("spool");
        assert!(WriterLock::spool(&d).is_err());
        drop(spool);
        std::fs::remove_dir_all(&d).expect("clean");
    }
}
