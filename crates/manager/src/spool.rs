//! The spool: the one directory the daemon writes capture files into, and its quota.
//! A request names a file; it never chooses a path.

use std::path::{Path, PathBuf};

/// The user this process runs as (the owner of /proc/self).
fn current_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map_or(0, |m| m.uid())
}

/// A folder that neither this process's user nor `also` (the user of `-Z`, when a package
/// made the folder theirs) owns, or that others can write into (group or world writable,
/// sticky or not), is refused: they could plant links or files there.
fn check_owner_and_mode(
    dir: &Path,
    m: &std::fs::Metadata,
    uid: u32,
    also: Option<u32>,
) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    if m.uid() != uid && Some(m.uid()) != also {
        let whose = also.map_or(String::new(), |u| format!(" nor to the -Z user (uid {u})"));
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} belongs to uid {}, not to this process (uid {uid}){whose}; give a folder of its own",
                dir.display(),
                m.uid()
            ),
        ));
    }
    if m.mode() & 0o022 != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} can be written by others (mode {:o}); chmod go-w it or give another folder",
                dir.display(),
                m.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

/// Opens a folder the daemon writes into (the spool, the recording): made with mode 0700
/// when missing, then checked as [`check_owner_and_mode`] says. Returns its canonical path.
pub fn open_folder(dir: &Path, also: Option<u32>) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let dir = dir.canonicalize()?;
    if !dir.is_dir() {
        return Err(std::io::Error::other(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    check_owner_and_mode(&dir, &std::fs::metadata(&dir)?, current_uid(), also)?;
    Ok(dir)
}

/// The spool directory and its disk quota.
#[derive(Clone, Debug)]
pub struct Spool {
    dir: PathBuf,
    /// Bytes the spool may hold; None for no quota.
    pub quota: Option<u64>,
}

impl Spool {
    /// Uses (and creates, mode 0700) `dir`.
    /// `also`: the uid of the `-Z` user, who may own it already.
    pub fn open(dir: &Path, quota: Option<u64>, also: Option<u32>) -> std::io::Result<Self> {
        Ok(Self {
            dir: open_folder(dir, also)?,
            quota,
        })
    }

    /// Gives the spool to `uid`:`gid`, the user the daemon runs as once started (`-Z`):
    /// the directory and the files directly in it, links themselves never followed. A spool
    /// that another user owns was refused at [`Spool::open`].
    pub fn give_to(&self, uid: u32, gid: u32) -> std::io::Result<()> {
        std::os::unix::fs::lchown(&self.dir, Some(uid), Some(gid))?;
        for e in std::fs::read_dir(&self.dir)? {
            let p = e?.path();
            std::os::unix::fs::lchown(&p, Some(uid), Some(gid)).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("giving {} to uid {uid}: {e}", p.display()),
                )
            })?;
        }
        Ok(())
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of file `name` in the spool. Only a plain file name is accepted: no
    /// directory part, no `..`, no hidden or control characters.
    pub fn resolve(&self, name: &str) -> Result<PathBuf, String> {
        if name.contains('/') || name.contains('\\') || name == ".." || name.starts_with("..") {
            return Err(format!(
                "'{name}' is a path outside the spool; give a plain file name (it is written in {})",
                self.dir.display()
            ));
        }
        if name.is_empty() || name.starts_with('.') || name.len() > 200 {
            return Err(format!(
                "'{name}' is not a usable file name (1 to 200 characters, not starting with '.')"
            ));
        }
        if let Some(c) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+' | '=')))
        {
            return Err(format!(
                "'{name}': the character {c:?} is not allowed in a spool file name (use letters, digits, . - _ + =)"
            ));
        }
        Ok(self.dir.join(name))
    }

    /// Bytes the spool's files hold now.
    pub fn usage(&self) -> u64 {
        std::fs::read_dir(&self.dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok()?.metadata().ok())
                    .filter(|m| m.is_file())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_spool_owner_and_mode() {
        use std::os::unix::fs::PermissionsExt;
        let d = std::env::temp_dir().join(format!("corecap-spool-mode-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = Spool::open(&d, None, None).unwrap_err();
        assert!(e.to_string().contains("can be written by others"), "{e}");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o750)).unwrap();
        assert!(Spool::open(&d, None, None).is_ok());
        let m = std::fs::metadata(&d).unwrap();
        let e = check_owner_and_mode(&d, &m, current_uid() + 1, None).unwrap_err();
        assert!(e.to_string().contains("belongs to uid"), "{e}");
        // A folder that the -Z user owns is theirs to give.
        check_owner_and_mode(&d, &m, current_uid() + 1, Some(current_uid())).expect("-Z user's");
        std::fs::remove_dir(&d).unwrap();
    }

    #[test]
    fn test_names_stay_inside() {
        let d = std::env::temp_dir().join(format!("corecap-spool-{}", std::process::id()));
        let s = Spool::open(&d, None, None).expect("spool");
        assert_eq!(
            s.resolve("dns.pcapng").expect("plain"),
            s.dir().join("dns.pcapng")
        );
        for bad in [
            "../x",
            "/etc/passwd",
            "a/b",
            "..",
            "...x",
            ".hidden",
            "",
            "a b",
            "x\0y",
        ] {
            assert!(s.resolve(bad).is_err(), "{bad:?} accepted");
        }
        assert!(s.resolve("../x").unwrap_err().contains("outside the spool"));
        std::fs::write(d.join("f"), [0u8; 100]).expect("write");
        assert_eq!(s.usage(), 100);
        let _ = std::fs::remove_dir_all(&d);
    }
}
