//! `serve --eve PATH`: follows Suricata's EVE output and pins each alert's flow with a hold.
//!
//! - **A file** (`filetype: regular`) is followed as `tail -F` follows it: lines are read as
//!   they are appended; when the name points to a new file (Suricata rotated it: renamed,
//!   then reopened on SIGHUP) the old one is read to its end first, then the new one from
//!   its start; a file cut shorter than the place read, or whose bytes before the place
//!   are no longer the last ones read (truncated, then written again past it), is read
//!   again from its start. The place (inode, offset after the last whole line) is kept synced in the
//!   recording folder after the alerts it covers, so a restart reads no line twice.
//! - **A socket** (`--eve unix:PATH`, for `filetype: unix_stream`): corecap listens on
//!   PATH and Suricata connects to it; lines are read as they come.
//! - For every record of a type asked for (`--eve-types`, default `alert`) the flow is held
//!   (by `community_id` when the record has one, else its 5-tuple both ways) from its first
//!   packet (`flow.start`, or the alert's time) until `--eve-idle` after the last record of
//!   the flow read (each later record of the flow, of any type, moves the end on).
//! - A line that is not an EVE record is counted (`malformed`) and skipped.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use corecap_store::keep::alert::{Alert, Alerts, EvePosition};
use corecap_store::keep::eve::{self, EveAlert, EveEvent};
use corecap_store::keep::hold::{HoldSpec, Holds};
use serde::Serialize;

/// Where EVE records come from.
#[derive(Clone, Debug)]
pub enum EveSource {
    /// A file Suricata appends to.
    File(PathBuf),
    /// A Unix stream socket corecap listens on.
    Socket(PathBuf),
}

impl EveSource {
    /// `unix:PATH` is a socket; anything else a file.
    pub fn parse(s: &str) -> EveSource {
        match s.strip_prefix("unix:") {
            Some(p) => EveSource::Socket(PathBuf::from(p)),
            None => EveSource::File(PathBuf::from(s)),
        }
    }
}

/// The follower's settings, its alerts and its counts.
#[derive(Debug)]
pub struct Eve {
    /// Where records come from.
    pub source: EveSource,
    /// Event types that pin their flow.
    pub types: Vec<String>,
    /// A held flow's hold ends this long after its last record.
    pub idle: Duration,
    /// The folder of the alerts and the place (the recording folder, else the spool).
    pub home: PathBuf,
    /// The folders the recording is in (for the reach an alert is told against).
    pub folders: Vec<PathBuf>,
    /// The alerts.
    pub alerts: Arc<Alerts>,
    /// The holds alerts make.
    pub holds: Arc<Holds>,
    counts: Counts,
}

/// What the follower has read.
#[derive(Debug, Default, Serialize)]
pub struct Counts {
    /// Lines read.
    pub lines: AtomicU64,
    /// Lines that are no EVE record, skipped.
    pub malformed: AtomicU64,
    /// Times the file was found rotated (a new file under the name).
    pub rotations: AtomicU64,
    /// Times the file was found cut shorter than the place read.
    pub truncations: AtomicU64,
    /// Alerts whose flow could not be held (the hold budget, a flow that cannot be named).
    pub unheld: AtomicU64,
}

impl Eve {
    /// A follower of `source` keeping its alerts and place in `home`.
    pub fn new(
        source: EveSource,
        types: Vec<String>,
        idle: Duration,
        home: &Path,
        folders: Vec<PathBuf>,
        holds: Arc<Holds>,
    ) -> Arc<Eve> {
        let (alerts, _) = Alerts::open(home);
        Arc::new(Eve {
            source,
            types,
            idle,
            home: home.to_owned(),
            folders,
            alerts,
            holds,
            counts: Counts::default(),
        })
    }

    /// The counts so far.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Follows the source until `stop` is set (on a thread of its own).
    pub fn run(self: &Arc<Self>, stop: &AtomicBool) {
        let r = match &self.source {
            EveSource::File(p) => self.follow_file(p, stop),
            EveSource::Socket(p) => self.listen(p, stop),
        };
        if let Err(e) = r {
            eprintln!("corecap: following the EVE output stopped: {e}");
        }
    }

    /// Handles one line (its place: the file's inode and the line's offset).
    fn line(&self, text: &[u8], source: Option<(u64, u64)>) {
        self.counts.lines.fetch_add(1, Ordering::Relaxed);
        let text = String::from_utf8_lossy(text);
        if text.trim().is_empty() {
            return;
        }
        match eve::parse(&text) {
            Ok(e) => self.event(e, source),
            Err(_) => {
                self.counts.malformed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// An EVE record: moves the end of its flow's hold on, and pins the flow of a record
    /// of a type asked for.
    fn event(&self, e: EveEvent, source: Option<(u64, u64)>) {
        if source.is_some_and(|s| self.alerts.seen(s, e.time_ns)) {
            return;
        }
        let idle = u64::try_from(self.idle.as_nanos()).unwrap_or(u64::MAX);
        let end = e.time_ns.saturating_add(idle);
        let earlier = self.alerts.hold_of(&e.flow);
        if let Some(h) = &earlier {
            let _ = self.holds.extend(h, end);
        }
        if !self.types.contains(&e.event_type) {
            return;
        }
        let start = e.flow_start_ns.unwrap_or(e.time_ns).min(e.time_ns);
        let oldest = self.oldest_packet();
        let mut a = Alert {
            id: self.alerts.next_id(),
            time_ns: e.time_ns,
            alert: e.alert.clone().unwrap_or_else(|| EveAlert {
                signature: format!("{} event", e.event_type),
                ..EveAlert::default()
            }),
            flow: e.flow.clone(),
            flow_start_ns: start,
            hold: earlier,
            before_reach: oldest.is_none_or(|o| start < o),
            note: None,
            source,
        };
        if a.before_reach {
            a.note = Some(match oldest {
                Some(o) => format!(
                    "the flow began at {}, before the recording's oldest packet ({}): its start is not on record",
                    corecap_store::query::utc_text(start),
                    corecap_store::query::utc_text(o)
                ),
                None => "nothing is on record yet".into(),
            });
        }
        if a.hold.is_none() {
            self.pin(&mut a, &e, end);
        }
        if let Err(e) = self.alerts.add(a) {
            eprintln!("corecap: keeping an alert: {e}");
        }
    }

    /// Makes the hold of a new alert's flow, or says in its note why not.
    fn pin(&self, a: &mut Alert, e: &EveEvent, end: u64) {
        let name = corecap_store::names::alert_hold_name(&a.id);
        let (community_id, filter) = match (&e.flow.community_id, e.flow.filter()) {
            (Some(c), _) => (Some(c.clone()), None),
            (None, Some(f)) => (None, Some(f)),
            (None, None) => {
                self.counts.unheld.fetch_add(1, Ordering::Relaxed);
                a.note = Some(
                    "the flow has no community_id and no 5-tuple a filter can name: not held"
                        .into(),
                );
                return;
            }
        };
        let spec = HoldSpec {
            name: name.clone(),
            // A second early: Suricata's flow start and the capture's clock may differ.
            from_ns: a.flow_start_ns.saturating_sub(1_000_000_000),
            to_ns: end,
            filter,
            community_id,
            ..HoldSpec::default()
        };
        match self.holds.add(spec, now_ns()) {
            Ok(_) => a.hold = Some(name),
            Err(err) => {
                self.counts.unheld.fetch_add(1, Ordering::Relaxed);
                a.note = Some(format!("not held: {err}"));
            }
        }
    }

    /// The oldest packet on record, over the recording's folders.
    fn oldest_packet(&self) -> Option<u64> {
        let files = corecap_store::query::expand_paths(&self.folders)
            .map(|(f, _)| f)
            .unwrap_or_default();
        corecap_store::read::reach::reach(&[], &files, 0, u64::MAX).oldest_ns
    }

    /// Follows a file as `tail -F` does (see the module doc).
    fn follow_file(&self, path: &Path, stop: &AtomicBool) -> io::Result<()> {
        let mut pos = EvePosition::load(&self.home).unwrap_or_default();
        let mut open: Option<File> = None;
        let mut pending: Vec<u8> = Vec::new();
        let mut chunk = vec![0u8; 64 << 10];
        // Relaxed: a flag set by the signal handler, polled here.
        while !stop.load(Ordering::Relaxed) {
            let Some(f) = open.as_mut() else {
                open = self.reopen(path, &mut pos, &mut pending)?;
                if open.is_none() {
                    std::thread::sleep(Duration::from_millis(200));
                }
                continue;
            };
            let n = f.read(&mut chunk)?;
            if n > 0 {
                pending.extend_from_slice(&chunk[..n]);
                self.whole_lines(&mut pending, &mut pos)?;
                continue;
            }
            // At the end: a new file under the name, or this one cut short.
            match std::fs::metadata(path) {
                Ok(m) if m.ino() != pos.inode => {
                    self.counts.rotations.fetch_add(1, Ordering::Relaxed);
                    open = None;
                }
                Ok(m) if m.len() < pos.offset || !pos.still_in(f) => {
                    self.counts.truncations.fetch_add(1, Ordering::Relaxed);
                    f.seek(SeekFrom::Start(0))?;
                    pos.offset = 0;
                    pos.check.clear();
                    pending.clear();
                    pos.save(&self.home)?;
                }
                _ => std::thread::sleep(Duration::from_millis(200)),
            }
        }
        Ok(())
    }

    /// Opens the file under `path`: at the kept place when it is the same file, else at
    /// its start. None while there is no file.
    fn reopen(
        &self,
        path: &Path,
        pos: &mut EvePosition,
        pending: &mut Vec<u8>,
    ) -> io::Result<Option<File>> {
        let mut f = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let m = f.metadata()?;
        pending.clear();
        if m.ino() == pos.inode && pos.offset <= m.len() && pos.still_in(&f) {
            f.seek(SeekFrom::Start(pos.offset))?;
        } else {
            *pos = EvePosition {
                inode: m.ino(),
                ..EvePosition::default()
            };
        }
        Ok(Some(f))
    }

    /// Handles the whole lines at the front of `pending` and keeps the place after them.
    fn whole_lines(&self, pending: &mut Vec<u8>, pos: &mut EvePosition) -> io::Result<()> {
        let mut at = 0;
        while let Some(nl) = pending[at..].iter().position(|&b| b == b'\n') {
            let line = &pending[at..at + nl];
            self.line(line, Some((pos.inode, pos.offset)));
            pos.offset += nl as u64 + 1;
            at += nl + 1;
        }
        if at > 0 {
            let keep = at.min(EvePosition::CHECK);
            pos.check = pending[at - keep..at].to_vec();
            pending.drain(..at);
            pos.save(&self.home)?;
        }
        Ok(())
    }

    /// Listens on a Unix stream socket and reads the lines of each connection.
    fn listen(&self, path: &Path, stop: &AtomicBool) -> io::Result<()> {
        use std::os::unix::fs::FileTypeExt;
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
            std::fs::remove_file(path)?;
        }
        let l = std::os::unix::net::UnixListener::bind(path)?;
        l.set_nonblocking(true)?;
        let mut conns: Vec<(std::os::unix::net::UnixStream, Vec<u8>)> = Vec::new();
        let mut chunk = vec![0u8; 64 << 10];
        // Relaxed: a flag set by the signal handler, polled here.
        while !stop.load(Ordering::Relaxed) {
            if let Ok((s, _)) = l.accept() {
                s.set_nonblocking(true)?;
                conns.push((s, Vec::new()));
            }
            let mut idle = true;
            conns.retain_mut(|(s, pending)| match s.read(&mut chunk) {
                Ok(0) => false,
                Ok(n) => {
                    idle = false;
                    pending.extend_from_slice(&chunk[..n]);
                    while let Some(nl) = pending.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = pending.drain(..=nl).collect();
                        self.line(&line[..nl], None);
                    }
                    true
                }
                Err(e) => e.kind() == io::ErrorKind::WouldBlock,
            });
            if idle {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = std::fs::remove_file(path);
        Ok(())
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
