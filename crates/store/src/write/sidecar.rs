//! Writing a capture file's sidecar index (`corecap-index`), sealed when the capture is.

use std::fs;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use corecap_linux::direct::{AlignedBuf, DirectFile};

use crate::sealed::{seal_bytes, SealConfig};

/// Sidecars at least this long are written past the page cache (see [`write_direct`]).
const DIRECT_FROM: usize = 256 << 10;

/// Bytes copied into the aligned buffer, and written, at a time.
const DIRECT_CHUNK: usize = 1 << 20;

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
    let mut f = DirectFile::create(&tmp, bytes.len() >= DIRECT_FROM, 0o640)?;
    let res = write_direct(&mut f, bytes).and_then(|_| f.file().sync_data());
    drop(f);
    if let Err(e) = res.and_then(|_| fs::rename(&tmp, path)) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

/// Writes `bytes` from the start of the new file `f`: its whole units of the filesystem's
/// alignment straight to the disk when `f` is direct, through an aligned buffer a chunk at
/// a time, and the rest (or all of it, when `f` is not direct) through the page cache.
/// Copying megabytes of sessions and index into the page cache cost the recorder more than
/// the copy into an aligned buffer and a direct write (about 20 ms of CPU for 7.6 MB here).
fn write_direct(f: &mut DirectFile, bytes: &[u8]) -> io::Result<()> {
    let mut done = 0;
    if f.is_direct() {
        let align = f.align();
        let whole = bytes.len() / align * align;
        let mut buf = AlignedBuf::new(DIRECT_CHUNK.min(whole).max(align), align);
        while done < whole {
            let n = buf.capacity().min(whole - done);
            buf.bytes_mut()[..n].copy_from_slice(&bytes[done..done + n]);
            match f.file().write_all_at(&buf.bytes()[..n], done as u64) {
                Ok(()) => done += n,
                // A filesystem that takes O_DIRECT at open but refuses the write: the rest
                // goes through the page cache.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => break,
                Err(e) => return Err(e),
            }
        }
        f.make_buffered()?;
    }
    f.write_all_at(&bytes[done..], done as u64)
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

    /// Sidecars long enough to go past the page cache are written whole, byte for byte, at
    /// lengths that end on the filesystem's alignment, past it, and past a chunk; on a
    /// filesystem that takes direct I/O and on one that refuses it (tmpfs).
    #[test]
    fn test_long_sidecars_are_written_whole() {
        let mut next = corecap_wire::xorshift::xorshift64(0x5eed);
        let mut dirs = vec![std::env::temp_dir()];
        if Path::new("/dev/shm").is_dir() {
            dirs.push("/dev/shm".into());
        }
        for base in dirs {
            let dir = base.join(format!("corecap-sidecar-long-{}", std::process::id()));
            fs::create_dir_all(&dir).unwrap();
            let p = dir.join("x.pcapng.sessions");
            for len in [
                DIRECT_FROM,
                DIRECT_FROM + 1,
                DIRECT_CHUNK * 3 + 123,
                DIRECT_FROM - 1,
            ] {
                let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                write_sidecar(&p, &bytes, None).unwrap();
                assert!(fs::read(&p).unwrap() == bytes, "{} bytes in {dir:?}", len);
                assert_eq!(
                    fs::metadata(&p).unwrap().permissions().mode() & 0o777,
                    0o640
                );
            }
            fs::remove_dir_all(&dir).unwrap();
        }
    }
}
