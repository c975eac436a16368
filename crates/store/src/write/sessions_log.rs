//! `--sessions-log FILE`: every connection of every file a recording closes, appended as one
//! JSON object a line with the Elastic Common Schema's names ([`crate::read::flow_doc`]),
//! plus `observer.name` (the sensor's host name), so a log shipper (Filebeat, Vector, Fluent
//! Bit) carries sessions into the engine a fleet already searches with no code of its own.
//!
//! Never torn: a file's lines are appended in one write and synced; a crash in the middle
//! leaves a last line without its newline, which the next open cuts off (those connections
//! stay in the file's sessions file, where `corecap flows` finds them). The log is renamed
//! to `FILE.1` (over an older one) once it passes [`ROTATE_AT`], as shippers expect of a
//! rotating log.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::read::flow_doc::FlowDoc;
use crate::read::flows::Flow;
use crate::session::Session;

/// The size past which the log is rotated.
pub const ROTATE_AT: u64 = 64 << 20;

/// An open sessions log, shared by every file sink of a capture.
#[derive(Debug)]
pub struct SessionsLog {
    path: PathBuf,
    observer: String,
    file: Mutex<(File, u64)>,
}

impl SessionsLog {
    /// Opens (or makes) the log at `path`, cutting off a torn last line; `observer` names
    /// the sensor in every line.
    pub fn open(path: &Path, observer: &str) -> io::Result<Arc<Self>> {
        let (f, len) = open_whole(path)?;
        Ok(Arc::new(Self {
            path: path.to_owned(),
            observer: observer.to_owned(),
            file: Mutex::new((f, len)),
        }))
    }

    /// Appends one line per connection of `sessions`, in one write, and syncs it.
    pub fn append(&self, sessions: &[Session]) -> io::Result<()> {
        if sessions.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::with_capacity(sessions.len() * 600);
        for s in sessions {
            let doc = FlowDoc::of(&Flow {
                session: *s,
                segments: 1,
            });
            let mut v = serde_json::to_value(&doc).map_err(io::Error::other)?;
            v["observer"] = serde_json::json!({ "name": self.observer });
            serde_json::to_writer(&mut buf, &v).map_err(io::Error::other)?;
            buf.push(b'\n');
        }
        let mut g = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if g.1 >= ROTATE_AT {
            let mut old = self.path.clone().into_os_string();
            old.push(".1");
            std::fs::rename(&self.path, &old)?;
            *g = open_whole(&self.path)?;
        }
        g.0.write_all(&buf)?;
        g.0.sync_data()?;
        g.1 += buf.len() as u64;
        Ok(())
    }
}

/// Opens `path` for appending, made when missing (0640), with any torn last line cut off;
/// returns it and its length.
fn open_whole(path: &Path) -> io::Result<(File, u64)> {
    let mut f = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o640)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    let len = f.metadata()?.len();
    let whole = whole_length(&mut f, len)?;
    if whole < len {
        f.set_len(whole)?;
        f.sync_data()?;
    }
    Ok((f, whole))
}

/// The length of `f` up to and with its last newline.
fn whole_length(f: &mut File, len: u64) -> io::Result<u64> {
    let mut end = len;
    let mut buf = vec![0u8; 64 << 10];
    while end > 0 {
        let from = end.saturating_sub(buf.len() as u64);
        let n = (end - from) as usize;
        f.seek(SeekFrom::Start(from))?;
        f.read_exact(&mut buf[..n])?;
        if let Some(i) = buf[..n].iter().rposition(|&b| b == b'\n') {
            return Ok(from + i as u64 + 1);
        }
        end = from;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_a_torn_last_line_is_cut_off() {
        let d = std::env::temp_dir().join(format!("corecap-slog-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("s.json");
        std::fs::write(&p, b"{\"a\":1}\n{\"b\":").unwrap();
        let log = SessionsLog::open(&p, "sensor").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"{\"a\":1}\n");
        log.append(&[]).unwrap();
        std::fs::write(&p, b"no newline at all").unwrap();
        drop(log);
        SessionsLog::open(&p, "sensor").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"");
        let _ = std::fs::remove_dir_all(&d);
    }
}
