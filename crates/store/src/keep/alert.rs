//! Alerts that pin their flows: each alert read from Suricata's EVE output is kept as one
//! JSON line in the recording folder ([`crate::names::alerts_path`]), appended and synced,
//! with the hold that keeps its flow's packets ([`crate::keep::hold`]). The follower's
//! place in `eve.json` (the file's inode and the offset after the last whole line it
//! read) is kept beside them, rewritten whole and synced after the alerts it covers, and
//! each alert keeps the place of its line: a restart resumes there, and a line read again
//! (a crash between an alert and the place) is known and not counted twice.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::keep::eve::{EveAlert, EveFlow};
use crate::names::{alerts_path, eve_position_path, eve_position_tmp};

/// One alert.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alert {
    /// Its id: `aN`.
    pub id: String,
    /// The alert's time (`timestamp`), ns.
    pub time_ns: u64,
    /// The signature.
    #[serde(flatten)]
    pub alert: EveAlert,
    /// The flow.
    pub flow: EveFlow,
    /// The flow's first packet as the alert tells it (or the alert's time), ns.
    pub flow_start_ns: u64,
    /// The hold that keeps the flow's packets (None: refused, see `note`).
    pub hold: Option<String>,
    /// Whether the flow began before the recording's oldest packet: its start is not on
    /// record.
    pub before_reach: bool,
    /// Why the flow is not (wholly) kept, when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Where its line was: the EVE file's inode and the line's offset (None: a socket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<(u64, u64)>,
}

/// A recording's alerts.
#[derive(Debug)]
pub struct Alerts {
    dir: PathBuf,
    list: Mutex<Vec<Alert>>,
}

impl Alerts {
    /// The alerts of `dir` (lines that cannot be read are skipped, and counted).
    pub fn open(dir: &Path) -> (Arc<Alerts>, u64) {
        let mut list = Vec::new();
        let mut damaged = 0;
        if let Ok(text) = std::fs::read_to_string(alerts_path(dir)) {
            for l in text.lines().filter(|l| !l.trim().is_empty()) {
                match serde_json::from_str::<Alert>(l) {
                    Ok(a) => list.push(a),
                    Err(_) => damaged += 1,
                }
            }
        }
        let a = Alerts {
            dir: dir.to_owned(),
            list: Mutex::new(list),
        };
        (Arc::new(a), damaged)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Alert>> {
        self.list.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every alert, oldest first.
    pub fn list(&self) -> Vec<Alert> {
        self.lock().clone()
    }

    /// The alert `id`.
    pub fn get(&self, id: &str) -> Option<Alert> {
        self.lock().iter().find(|a| a.id == id).cloned()
    }

    /// The id the next alert takes: past every id kept (a damaged line skipped at open
    /// does not give its id again).
    pub fn next_id(&self) -> String {
        let high = self
            .lock()
            .iter()
            .filter_map(|a| a.id.strip_prefix('a')?.parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        format!("a{}", high + 1)
    }

    /// Whether the line at `source` of an alert at `time_ns` was read before (the time
    /// tells a line from another written at the same place after a truncation).
    pub fn seen(&self, source: (u64, u64), time_ns: u64) -> bool {
        self.lock()
            .iter()
            .any(|a| a.source == Some(source) && a.time_ns == time_ns)
    }

    /// The hold of an earlier alert on the same flow, if one has a hold.
    pub fn hold_of(&self, flow: &EveFlow) -> Option<String> {
        self.lock()
            .iter()
            .rev()
            .find(|a| a.hold.is_some() && a.flow.same(flow))
            .and_then(|a| a.hold.clone())
    }

    /// Appends `a` (its id from [`Alerts::next_id`]), synced.
    pub fn add(&self, a: Alert) -> io::Result<()> {
        let mut list = self.lock();
        let path = alerts_path(&self.dir);
        let mut line = serde_json::to_vec(&a).map_err(io::Error::other)?;
        line.push(b'\n');
        let made = !path.exists();
        let mut f = OpenOptions::new().create(true).append(true).open(&path)?;
        f.write_all(&line)?;
        f.sync_data()?;
        if made {
            corecap_linux::direct::sync_parent(&path)?;
        }
        list.push(a);
        Ok(())
    }
}

/// Where the follower is in an EVE file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvePosition {
    /// The file's inode.
    pub inode: u64,
    /// Bytes read, up to the end of the last whole line.
    pub offset: u64,
    /// The last bytes read (at most [`EvePosition::CHECK`]), before `offset`: a file cut
    /// and written again past the place no longer has them there.
    #[serde(default)]
    pub check: Vec<u8>,
}

impl EvePosition {
    /// Bytes kept in [`EvePosition::check`].
    pub const CHECK: usize = 64;

    /// Whether `f` still has, just before the place, the bytes read there.
    pub fn still_in(&self, f: &File) -> bool {
        use std::os::unix::fs::FileExt;
        let n = self.check.len() as u64;
        if n > self.offset {
            return false;
        }
        let mut b = vec![0u8; self.check.len()];
        f.read_exact_at(&mut b, self.offset - n).is_ok() && b == self.check
    }

    /// The place kept in `dir` (none: the start of the file).
    pub fn load(dir: &Path) -> Option<EvePosition> {
        let b = std::fs::read(eve_position_path(dir)).ok()?;
        serde_json::from_slice(&b).ok()
    }

    /// Keeps the place in `dir`, synced.
    pub fn save(&self, dir: &Path) -> io::Result<()> {
        let tmp = eve_position_tmp(dir);
        let mut f = File::create(&tmp)?;
        f.write_all(&serde_json::to_vec(self).map_err(io::Error::other)?)?;
        f.sync_all()?;
        let path = eve_position_path(dir);
        std::fs::rename(&tmp, &path)?;
        corecap_linux::direct::sync_parent(&path)
    }
}
