//! Where tune reads and writes: a root directory holding `sys/…` and `proc/…`.
//!
//! On a live machine the root is `/`. A fixture root is a copied tree (made by
//! `corecap tune snapshot` or by hand) with the same relative paths and the same relative
//! symbolic links (`sys/class/net/IF` → `../../devices/…`). Every read can be recorded,
//! so a snapshot copies exactly the files tune looked at.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// A root directory for sysfs/procfs reads, with an optional record of what was read.
#[derive(Debug)]
pub struct Root {
    dir: PathBuf,
    record: Option<RefCell<Record>>,
}

#[derive(Debug, Default)]
struct Record {
    /// Files read, relative to the root, at their resolved location.
    files: BTreeSet<PathBuf>,
    /// Symbolic links followed, relative to the root, with their target as stored.
    links: BTreeMap<PathBuf, PathBuf>,
}

impl Root {
    /// The live machine (`/`).
    pub fn live() -> Self {
        Self {
            dir: PathBuf::from("/"),
            record: None,
        }
    }

    /// A fixture tree at `dir`.
    pub fn at(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let dir = fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
        Ok(Self { dir, record: None })
    }

    /// Records every file and link read from now on (for `snapshot`).
    pub fn recording(mut self) -> Self {
        self.record = Some(RefCell::new(Record::default()));
        self
    }

    /// True for the live machine, where ethtool settings come from ioctls.
    pub fn is_live(&self) -> bool {
        self.dir == Path::new("/")
    }

    /// The root directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The absolute path of `rel`.
    pub fn path(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.dir.join(rel)
    }

    /// How a path is shown to users: `/sys/…` whatever the root.
    pub fn display(&self, rel: impl AsRef<Path>) -> String {
        format!("/{}", rel.as_ref().display())
    }

    /// Reads a file, recording it.
    pub fn read(&self, rel: impl AsRef<Path>) -> Result<String> {
        let rel = rel.as_ref();
        let full = self.path(rel);
        let s = fs::read_to_string(&full).map_err(|e| Error::io(&full, e))?;
        self.note_file(&full);
        Ok(s)
    }

    /// Reads a file and trims it; `None` if it is missing or unreadable.
    pub fn read_opt(&self, rel: impl AsRef<Path>) -> Option<String> {
        self.read(rel).ok().map(|s| s.trim().to_owned())
    }

    /// Reads a file without recording it (used to scan processes for one name).
    pub fn read_quiet(&self, rel: impl AsRef<Path>) -> Option<String> {
        fs::read_to_string(self.path(rel)).ok()
    }

    /// Entry names of a directory, sorted; empty if it is missing.
    pub fn list(&self, rel: impl AsRef<Path>) -> Vec<String> {
        let mut v: Vec<String> = match fs::read_dir(self.path(rel)) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
            Err(_) => Vec::new(),
        };
        v.sort();
        v
    }

    /// Whether `rel` exists.
    pub fn exists(&self, rel: impl AsRef<Path>) -> bool {
        self.path(rel).exists()
    }

    /// Resolves symbolic links in `rel` (recording each one followed) and returns the
    /// resolved path relative to the root; `None` if it does not exist or leaves the root.
    pub fn resolve(&self, rel: impl AsRef<Path>) -> Option<PathBuf> {
        let rel = rel.as_ref();
        let mut cur = PathBuf::new();
        let mut hops = 0;
        let mut pending: Vec<PathBuf> = rel
            .components()
            .rev()
            .map(|c| PathBuf::from(c.as_os_str()))
            .collect();
        while let Some(part) = pending.pop() {
            match part.components().next()? {
                Component::ParentDir => {
                    if !cur.pop() {
                        return None;
                    }
                    continue;
                }
                Component::CurDir => continue,
                Component::Normal(_) => {}
                _ => return None,
            }
            let next = cur.join(&part);
            let meta = fs::symlink_metadata(self.path(&next)).ok()?;
            if meta.file_type().is_symlink() {
                hops += 1;
                if hops > 40 {
                    return None;
                }
                let target = fs::read_link(self.path(&next)).ok()?;
                if target.is_absolute() {
                    // A live root can follow absolute links; a fixture must not leave its tree.
                    if !self.is_live() {
                        return None;
                    }
                    cur = PathBuf::new();
                } else if let Some(r) = &self.record {
                    r.borrow_mut().links.insert(next.clone(), target.clone());
                }
                let parts: Vec<PathBuf> = target
                    .components()
                    .filter(|c| !matches!(c, Component::RootDir))
                    .map(|c| PathBuf::from(c.as_os_str()))
                    .collect();
                pending.extend(parts.into_iter().rev());
            } else {
                cur = next;
            }
        }
        Some(cur)
    }

    /// Writes a file (for `apply` and `restore`).
    pub fn write(&self, rel: impl AsRef<Path>, contents: &str) -> Result<()> {
        let full = self.path(rel);
        fs::write(&full, contents).map_err(|e| Error::io(&full, e))
    }

    fn note_file(&self, full: &Path) {
        if let Some(r) = &self.record {
            if let Ok(real) = fs::canonicalize(full) {
                if let Ok(rel) = real.strip_prefix(&self.dir) {
                    r.borrow_mut().files.insert(rel.to_owned());
                }
            }
        }
    }

    /// Records a file read elsewhere (a process's `comm` found by a quiet scan).
    pub fn note(&self, rel: impl AsRef<Path>) {
        self.note_file(&self.path(rel));
    }

    /// Copies every recorded file and link into `out`, which becomes a fixture root.
    pub fn copy_record(&self, out: &Path) -> Result<usize> {
        let Some(r) = &self.record else {
            return Ok(0);
        };
        let r = r.borrow();
        for f in &r.files {
            let dst = out.join(f);
            if let Some(p) = dst.parent() {
                fs::create_dir_all(p).map_err(|e| Error::io(p, e))?;
            }
            let data = fs::read(self.path(f)).map_err(|e| Error::io(&self.path(f), e))?;
            fs::write(&dst, data).map_err(|e| Error::io(&dst, e))?;
        }
        for (link, target) in &r.links {
            let dst = out.join(link);
            if let Some(p) = dst.parent() {
                fs::create_dir_all(p).map_err(|e| Error::io(p, e))?;
            }
            match fs::symlink_metadata(&dst) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    std::os::unix::fs::symlink(target, &dst).map_err(|e| Error::io(&dst, e))?;
                }
                Err(e) => return Err(Error::io(&dst, e)),
            }
        }
        Ok(r.files.len() + r.links.len())
    }
}
