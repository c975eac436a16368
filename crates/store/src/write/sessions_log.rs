//! `--sessions-log FILE`: every finished connection of a recording, appended as one JSON
//! object a line with the Elastic Common Schema's names ([`crate::read::flow_doc`]), plus
//! `observer.name` (the sensor's host name), so a log shipper (Filebeat, Vector, Fluent
//! Bit) carries sessions into the engine a fleet already searches with no code of its own.
//!
//! - **One line a connection.** The log gets each closed file's connections. One that goes
//!   on into the next file (no FIN or RST yet, or a packet near the file's end) waits, and
//!   its record in the next file is joined to it as `corecap flows` joins them
//!   ([`crate::read::flows::continues`]; `corecap.segments` counts the files). A connection
//!   is written once it has ended (FIN or RST) and been quiet for [`END_GRACE_NS`] (its
//!   last ACKs come after the FIN), or been quiet for
//!   [`crate::read::flows::JOIN_GAP_NS`] (the join's limit), by the newest packet the log
//!   has seen; the rest when the recording stops. At most [`MAX_WAITING`] wait: past that
//!   the quietest go out as they are, each still a whole record of what it was so far.
//! - **Never torn.** A write's lines are appended in one write and synced; a crash in the
//!   middle leaves a last line without its newline, which the next open cuts off. The
//!   connections that were waiting at a crash are not in the log, but in their files'
//!   sessions files, where `corecap flows` finds them.
//! - **Rotation.** The log is renamed to `FILE.1` (over an older one) once it passes
//!   [`ROTATE_AT`], as shippers expect of a rotating log.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use std::collections::HashMap;

use corecap_wire::FlowKey;

use crate::read::flow_doc::FlowDoc;
use crate::read::flows::{absorb, continues, Flow, JOIN_GAP_NS};
use crate::session::Session;

/// The size past which the log is rotated.
pub const ROTATE_AT: u64 = 64 << 20;

/// How long an ended connection (FIN or RST) is quiet before its line is written.
pub const END_GRACE_NS: u64 = 10_000_000_000;

/// Most connections waiting for their next file.
pub const MAX_WAITING: usize = 1 << 20;

/// An open sessions log, shared by every file sink of a capture.
#[derive(Debug)]
pub struct SessionsLog {
    path: PathBuf,
    observer: String,
    file: Mutex<Log>,
}

/// The log's file and the connections waiting to be written.
#[derive(Debug)]
struct Log {
    file: File,
    len: u64,
    /// Connections that may go on in a later file, by table key.
    waiting: HashMap<FlowKey, Flow>,
    /// The newest packet time of any record given, ns.
    newest: u64,
}

impl SessionsLog {
    /// Opens (or makes) the log at `path`, cutting off a torn last line; `observer` names
    /// the sensor in every line.
    pub fn open(path: &Path, observer: &str) -> io::Result<Arc<Self>> {
        let (file, len) = open_whole(path)?;
        let log = Arc::new(Self {
            path: path.to_owned(),
            observer: observer.to_owned(),
            file: Mutex::new(Log {
                file,
                len,
                waiting: HashMap::new(),
                newest: 0,
            }),
        });
        let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|w| w.strong_count() > 0);
        open.push(Arc::downgrade(&log));
        Ok(log)
    }

    /// Takes a closed file's connections: writes (in one write, synced) those that are now
    /// finished, joined with their records of earlier files (see the module doc).
    pub fn append(&self, sessions: &[Session]) -> io::Result<()> {
        let mut g = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let done = g.take(sessions);
        self.write(&mut g, &done)
    }

    /// Writes every connection still waiting (the recording stops).
    pub fn flush(&self) -> io::Result<()> {
        let mut g = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let mut done: Vec<Flow> = g.waiting.drain().map(|(_, f)| f).collect();
        done.sort_by_key(|f| f.session.first_ns);
        self.write(&mut g, &done)
    }

    /// [`SessionsLog::flush`] at the end, where an error can only be said.
    fn flush_or_say(&self) {
        if let Err(e) = self.flush() {
            eprintln!(
                "corecap: {}: the last connections were not logged: {e}",
                self.path.display()
            );
        }
    }

    /// Appends one line per connection of `done`, in one write, and syncs it.
    fn write(&self, g: &mut Log, done: &[Flow]) -> io::Result<()> {
        if done.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::with_capacity(done.len() * 600);
        for f in done {
            let mut v = serde_json::to_value(FlowDoc::of(f)).map_err(io::Error::other)?;
            v["observer"] = serde_json::json!({ "name": self.observer });
            serde_json::to_writer(&mut buf, &v).map_err(io::Error::other)?;
            buf.push(b'\n');
        }
        if g.len >= ROTATE_AT {
            let mut old = self.path.clone().into_os_string();
            old.push(".1");
            std::fs::rename(&self.path, &old)?;
            (g.file, g.len) = open_whole(&self.path)?;
        }
        g.file.write_all(&buf)?;
        g.file.sync_data()?;
        g.len += buf.len() as u64;
        Ok(())
    }
}

/// The logs open in this process, for [`flush_all`].
static OPEN: Mutex<Vec<std::sync::Weak<SessionsLog>>> = Mutex::new(Vec::new());

/// Writes the connections waiting in every log still open (the recordings have stopped):
/// the program's last step, where a log might outlive the captures that used it. Errors
/// are said, not returned: the connections are in their files' sessions files anyway.
pub fn flush_all() {
    let open: Vec<Arc<SessionsLog>> = OPEN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .collect();
    for log in open {
        log.flush_or_say();
    }
}

impl Drop for SessionsLog {
    /// The recording has stopped (every file sink has let the log go): the connections
    /// still waiting are written, as they are.
    fn drop(&mut self) {
        self.flush_or_say();
    }
}

impl Log {
    /// Joins `sessions` (one file's) to the connections waiting; the ones now finished, in
    /// order of their first packet.
    fn take(&mut self, sessions: &[Session]) -> Vec<Flow> {
        let mut done = Vec::new();
        for s in sessions {
            self.newest = self.newest.max(s.last_ns);
            let key = s.table_key();
            let flow = match self.waiting.remove(&key) {
                Some(mut f) if continues(&f, s) => {
                    absorb(&mut f, s);
                    f
                }
                other => {
                    // The one waiting under this key was another connection: it is done.
                    done.extend(other);
                    Flow {
                        session: *s,
                        segments: 1,
                    }
                }
            };
            self.waiting.insert(key, flow);
        }
        let newest = self.newest;
        let finished = |f: &Flow| {
            let quiet = newest.saturating_sub(f.session.last_ns);
            quiet > JOIN_GAP_NS || (f.session.ended_fin_rst() && quiet > END_GRACE_NS)
        };
        self.waiting.retain(|_, f| {
            let keep = !finished(f);
            if !keep {
                done.push(*f);
            }
            keep
        });
        if self.waiting.len() > MAX_WAITING {
            let mut quiet: Vec<(u64, FlowKey)> = self
                .waiting
                .iter()
                .map(|(k, f)| (f.session.last_ns, *k))
                .collect();
            quiet.sort_unstable_by_key(|q| q.0);
            for (_, k) in &quiet[..self.waiting.len() - MAX_WAITING] {
                done.extend(self.waiting.remove(k));
            }
        }
        done.sort_by_key(|f| f.session.first_ns);
        done
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
