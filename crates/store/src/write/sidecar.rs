//! Writing a capture file's sidecar index (`corecap-index`), sealed when the capture is.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::sealed::{seal_bytes, SealConfig};

/// Writes `index` as the sidecar at `path` (see `corecap_index::sidecar_path`). With `seal`,
/// the sidecar is a sealed file (its own data key, wrapped by the same key-encryption key)
/// whose plaintext is the index: the index names addresses, so it is kept as secret as the
/// capture.
///
/// The bytes go to a hidden `.NAME.tmp` in the same directory
/// (`corecap_index::sidecar_temp_path`, a name no capture file and no capture being written
/// has; created with `O_EXCL | O_NOFOLLOW`, mode 0640; a stale one left by a crash is
/// removed first), are synced, and are renamed over `path`, so a reader sees either no
/// sidecar or a whole one.
pub fn write_sidecar(path: &Path, index: &[u8], seal: Option<&SealConfig>) -> io::Result<()> {
    if path.file_name().is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "sidecar path has no file name",
        ));
    }
    let tmp = corecap_index::sidecar_temp_path(path);
    if fs::symlink_metadata(&tmp).is_ok_and(|m| m.file_type().is_file()) {
        fs::remove_file(&tmp)?;
    }
    let sealed;
    let bytes = match seal {
        Some(cfg) => {
            sealed = seal_bytes(cfg, index).map_err(|e| io::Error::other(e.to_string()))?;
            &sealed[..]
        }
        None => index,
    };
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o640)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    let res = f.write_all(bytes).and_then(|_| f.sync_data());
    drop(f);
    if let Err(e) = res.and_then(|_| fs::rename(&tmp, path)) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sealed::{unseal, Cipher, KeyFile};
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;

    #[test]
    fn test_write_plain_and_sealed() {
        let dir = std::env::temp_dir().join(format!("corecap-sidecar-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.pcapng.idx");
        // A stale temp file from a crash does not block the write.
        fs::write(dir.join(".x.pcapng.idx.tmp"), b"stale").unwrap();
        // The hidden name of a capture file being written is left alone.
        fs::write(dir.join(".x.pcapng.idx.part"), b"capture").unwrap();
        write_sidecar(&p, b"plain index", None).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"plain index");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o640
        );
        assert!(!dir.join(".x.pcapng.idx.tmp").exists());
        assert_eq!(
            fs::read(dir.join(".x.pcapng.idx.part")).unwrap(),
            b"capture"
        );
        let key = dir.join("k");
        KeyFile::generate(&key).unwrap();
        let cfg = SealConfig {
            cipher: Cipher::Aes256Gcm,
            kek: Arc::new(KeyFile::load(&key).unwrap()),
        };
        write_sidecar(&p, b"sealed index", Some(&cfg)).unwrap();
        let mut out = Vec::new();
        unseal(&mut &fs::read(&p).unwrap()[..], &cfg.kek, &mut out).unwrap();
        assert_eq!(out, b"sealed index");
        fs::remove_dir_all(&dir).unwrap();
    }
}
