//! Holds: packets retention must not take. A hold names a window and what to keep in it (a
//! tcpdump filter, or connections by Community ID, TLS server name, DNS name or HTTP Host);
//! when retention reaches a file whose time a hold covers, the hold's packets are first
//! copied into a held recording under the file's folder (`DIR/held/NAME`, the file's own
//! name), indexed and with its sessions, and only then is the file deleted.
//!
//! - **Durable.** The holds are one JSON file in the recording folder
//!   ([`crate::names::holds_path`]), rewritten under a temporary name, synced and renamed;
//!   a hold is reported made only once it is synced.
//! - **Crash-safe copies.** A held copy is written as a hidden part, synced, renamed and its
//!   folder synced before retention records and deletes the file. A crash before the rename
//!   leaves a part, removed by the next copy of that file; a crash after it leaves both the
//!   file and its held copy: [`crate::names::held_files`] gives a held copy only while its file is gone,
//!   so an answer never holds a packet twice, nor loses one.
//! - **Several holds on one file.** Each hold's packets go to a part of their own, then one
//!   query merges the parts in time order, giving once a packet two holds both name.
//! - **A budget that refuses.** `--hold-budget` refuses new holds once the held recordings
//!   reach it; it never deletes what a hold keeps.
//!
//! The API is small so that other parts of the recorder can ask it: [`Holds::covering`]
//! says which holds cover a time, [`Holds::holds_connection`] whether a connection is held
//! (a per-flow cutoff lifts itself for a held flow).

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::names::{
    dir_of, held_dir, held_hold_part, held_path_nth, holds_path, holds_tmp, part_path,
};
use crate::query::{QuerySpec, QueryStats};
use crate::read::flow_match::Selectors;
use crate::sealed::KeyFile;

/// What a hold keeps, as it is asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldSpec {
    /// Its name (the case): letters, digits, `-`, `_` and `.`, at most 64.
    pub name: String,
    /// Window start, ns since the epoch, inclusive.
    pub from_ns: u64,
    /// Window end, ns, exclusive.
    pub to_ns: u64,
    /// A tcpdump filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// Only the connections with this Community ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub community_id: Option<String>,
    /// ... whose TLS server name matches this pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sni: Option<String>,
    /// ... whose DNS question's name matches this pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<String>,
    /// ... whose HTTP Host matches this pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_host: Option<String>,
}

/// A hold, with what it has kept so far.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    /// What it keeps.
    #[serde(flatten)]
    pub spec: HoldSpec,
    /// When it was made, ns.
    pub made_ns: u64,
    /// Packets copied into held recordings for it.
    #[serde(default)]
    pub packets: u64,
    /// Files retention deleted whose packets it kept.
    #[serde(default)]
    pub files: u64,
}

/// Why a hold was refused, or not found.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HoldError {
    /// A hold of that name exists.
    #[error("a hold named {0} exists; release it first, or choose another name")]
    Exists(String),
    /// No hold of that name.
    #[error("no hold named {0}")]
    NotFound(String),
    /// The name is not one a hold may take.
    #[error(
        "hold name {0:?}: use 1 to 64 letters, digits, '-', '_' or '.', not starting with '.'"
    )]
    BadName(String),
    /// The window is empty.
    #[error("the hold's window is empty: from must be before to")]
    BadWindow,
    /// The held recordings have reached `--hold-budget`.
    #[error("held recordings take {held} bytes, at the hold budget of {budget} (--hold-budget): release a hold first; old holds are never deleted to make room")]
    Budget {
        /// Bytes held.
        held: u64,
        /// The budget.
        budget: u64,
    },
    /// The holds file could not be written.
    #[error("writing the holds {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
}

/// A recording's holds (see the module doc).
#[derive(Debug)]
pub struct Holds {
    /// The folder whose holds file this is.
    home: PathBuf,
    /// Every folder retention deletes from (their `held/` folders count in the bytes held).
    folders: Vec<PathBuf>,
    list: Mutex<Vec<Hold>>,
    /// `--hold-budget`; `u64::MAX` for none.
    budget: u64,
    kek: Option<Arc<KeyFile>>,
}

impl Holds {
    /// The holds of the recording folder `home` (none when it has no holds file); held
    /// recordings may be in the `held/` folder of any of `folders`. A holds file that
    /// cannot be read is an error: a start must not forget a hold.
    pub fn open(
        home: &Path,
        folders: Vec<PathBuf>,
        budget: Option<u64>,
        kek: Option<Arc<KeyFile>>,
    ) -> io::Result<Arc<Holds>> {
        let path = holds_path(home);
        let list: Vec<Hold> = match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: {e} (move it aside to start without its holds)",
                        path.display()
                    ),
                )
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(Arc::new(Holds {
            home: home.to_owned(),
            folders,
            list: Mutex::new(list),
            budget: budget.unwrap_or(u64::MAX),
            kek,
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Hold>> {
        self.list.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every hold, in the order they were made.
    pub fn list(&self) -> Vec<Hold> {
        self.lock().clone()
    }

    /// The budget, if any.
    pub fn budget(&self) -> Option<u64> {
        (self.budget != u64::MAX).then_some(self.budget)
    }

    /// Makes a hold, synced before it returns; refused past the budget.
    pub fn add(&self, spec: HoldSpec, now_ns: u64) -> Result<Hold, HoldError> {
        check_name(&spec.name)?;
        if spec.from_ns >= spec.to_ns {
            return Err(HoldError::BadWindow);
        }
        let held = self.held_bytes();
        if held >= self.budget {
            return Err(HoldError::Budget {
                held,
                budget: self.budget,
            });
        }
        let mut list = self.lock();
        if list.iter().any(|h| h.spec.name == spec.name) {
            return Err(HoldError::Exists(spec.name));
        }
        let hold = Hold {
            spec,
            made_ns: now_ns,
            packets: 0,
            files: 0,
        };
        list.push(hold.clone());
        if let Err(e) = self.save(&list) {
            list.pop();
            return Err(e);
        }
        Ok(hold)
    }

    /// Widens the window of the hold `name` to end at `to_ns` at least (a held flow still
    /// active); synced.
    pub fn extend(&self, name: &str, to_ns: u64) -> Result<(), HoldError> {
        let mut list = self.lock();
        let h = list
            .iter_mut()
            .find(|h| h.spec.name == name)
            .ok_or_else(|| HoldError::NotFound(name.to_owned()))?;
        if h.spec.to_ns >= to_ns {
            return Ok(());
        }
        h.spec.to_ns = to_ns;
        self.save(&list)
    }

    /// Releases a hold: retention no longer keeps its packets from files it deletes later.
    /// What it kept stays in the held recordings (they are the user's to delete).
    pub fn remove(&self, name: &str) -> Result<Hold, HoldError> {
        let mut list = self.lock();
        let i = list
            .iter()
            .position(|h| h.spec.name == name)
            .ok_or_else(|| HoldError::NotFound(name.to_owned()))?;
        let gone = list.remove(i);
        if let Err(e) = self.save(&list) {
            list.insert(i, gone);
            return Err(e);
        }
        Ok(gone)
    }

    /// The holds whose window covers some of `from..=to`.
    pub fn covering(&self, from_ns: u64, to_ns: u64) -> Vec<HoldSpec> {
        self.lock()
            .iter()
            .filter(|h| h.spec.from_ns <= to_ns && h.spec.to_ns > from_ns)
            .map(|h| h.spec.clone())
            .collect()
    }

    /// Whether a hold names the connection with this Community ID at `ts_ns` (a per-flow
    /// cutoff asks it before it stops keeping a connection's packets). Holds by filter or
    /// by name are not asked: their packets are copied when retention deletes the file.
    pub fn holds_connection(&self, community_id: &str, ts_ns: u64) -> bool {
        self.lock().iter().any(|h| {
            h.spec.community_id.as_deref() == Some(community_id)
                && h.spec.from_ns <= ts_ns
                && ts_ns < h.spec.to_ns
        })
    }

    /// Bytes of the held recordings (their indexes and sessions included).
    pub fn held_bytes(&self) -> u64 {
        let mut dirs: Vec<PathBuf> = self.folders.iter().map(|d| held_dir(d)).collect();
        dirs.push(held_dir(&self.home));
        dirs.sort();
        dirs.dedup();
        dirs.iter()
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flat_map(|rd| rd.filter_map(Result::ok))
            .filter_map(|e| e.metadata().ok())
            .filter(std::fs::Metadata::is_file)
            .map(|m| m.len())
            .sum()
    }

    /// Writes the list under a temporary name, syncs it and renames it over the holds file.
    fn save(&self, list: &[Hold]) -> Result<(), HoldError> {
        let (tmp, path) = (holds_tmp(&self.home), holds_path(&self.home));
        let io = |source| HoldError::Io {
            path: path.clone(),
            source,
        };
        let text = serde_json::to_vec_pretty(list).map_err(|e| io(io::Error::other(e)))?;
        let mut f = File::create(&tmp).map_err(io)?;
        f.write_all(&text).map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)?;
        corecap_linux::direct::sync_parent(&path).map_err(io)
    }

    /// Copies what the holds keep of `file` (whose packets span `first..=last`) into its
    /// held copy, synced and named, before retention deletes it (see the module doc).
    /// Returns the packets kept. Called by retention while it keeps queries out of the
    /// folder.
    pub fn keep(&self, file: &Path, first: u64, last: u64) -> io::Result<u64> {
        let holds = self.covering(first, last);
        if holds.is_empty() {
            return Ok(0);
        }
        let Some(held) = free_held_path(file, first, last) else {
            // Copied before a crash stopped the deletion: that copy is whole.
            return Ok(0);
        };
        let dir = held_dir(dir_of(file));
        if !dir.exists() {
            std::fs::create_dir(&dir)?;
            corecap_linux::direct::sync_parent(&dir)?;
        }
        let part = part_path(&held);
        let mut kept = Vec::new();
        let packets = if holds.len() == 1 {
            let s = self.copy(file, &holds[0], &part)?;
            kept.push((holds[0].name.clone(), s.packets));
            s.packets
        } else {
            let mut parts = Vec::new();
            for (i, h) in holds.iter().enumerate() {
                let p = held_hold_part(file, i);
                let s = self.copy(file, h, &p)?;
                kept.push((h.name.clone(), s.packets));
                if s.packets > 0 {
                    parts.push(p);
                } else {
                    let _ = std::fs::remove_file(&p);
                }
            }
            let merged = self.merge(&parts, &part);
            for p in &parts {
                let _ = std::fs::remove_file(p);
            }
            merged?
        };
        if packets == 0 {
            let _ = std::fs::remove_file(&part);
            return Ok(0);
        }
        std::fs::rename(&part, &held)?;
        corecap_linux::direct::sync_parent(&held)?;
        // The index and sessions after the name: a crash between leaves a held copy a
        // query scans whole.
        let _ = crate::query::build_index(&held, self.kek.as_ref());
        self.count(&kept);
        Ok(packets)
    }

    /// Adds what each hold kept of one file to its counts (a note on failure: the packets
    /// are kept either way).
    fn count(&self, kept: &[(String, u64)]) {
        let mut list = self.lock();
        for (name, n) in kept.iter().filter(|(_, n)| *n > 0) {
            if let Some(h) = list.iter_mut().find(|h| h.spec.name == *name) {
                h.packets += n;
                h.files += 1;
            }
        }
        if let Err(e) = self.save(&list) {
            eprintln!("corecap: {e}");
        }
    }

    /// One hold's packets of `file` into `out` (a new part), synced.
    fn copy(&self, file: &Path, h: &HoldSpec, out: &Path) -> io::Result<QueryStats> {
        let mut spec = QuerySpec {
            files: vec![file.to_owned()],
            from: h.from_ns,
            to: h.to_ns,
            filter: h.filter.clone().filter(|f| !f.trim().is_empty()),
            kek: self.kek.clone(),
            ..QuerySpec::default()
        };
        let select = Selectors {
            community_id: h.community_id.clone(),
            sni: h.sni.clone(),
            dns: h.dns.clone(),
            http_host: h.http_host.clone(),
            ..Selectors::default()
        };
        if select.by_session() {
            spec = crate::read::narrow::narrow(&spec, &select)
                .map_err(|e| io::Error::other(e.to_string()))?
                .0;
        }
        write_answer(&spec, out)
    }

    /// The parts of several holds merged in time order into `out`, each packet once.
    fn merge(&self, parts: &[PathBuf], out: &Path) -> io::Result<u64> {
        if parts.is_empty() {
            return Ok(0);
        }
        let spec = QuerySpec {
            files: parts.to_vec(),
            to: u64::MAX,
            once: true,
            ..QuerySpec::default()
        };
        write_answer(&spec, out).map(|s| s.packets)
    }
}

/// The name the held copy of `file` (packets `first..=last`) takes: the first of its names
/// not taken; None when one is taken by this file's own copy (its first packet in the
/// file's span: a crash came between the copy and the deletion).
fn free_held_path(file: &Path, first: u64, last: u64) -> Option<PathBuf> {
    (1..)
        .map(|n| held_path_nth(file, n))
        .find_map(|p| {
            if !p.exists() {
                return Some(Some(p));
            }
            let mut r = corecap_wire::read::CaptureReader::open(&p).ok()?;
            let ts = r.next_packet().ok().flatten()?.ts_ns;
            (first..=last).contains(&ts).then_some(None)
        })
        .flatten()
}

/// Runs `spec` into the new file `out` (removed first if a crash left it), synced.
fn write_answer(spec: &QuerySpec, out: &Path) -> io::Result<QueryStats> {
    let _ = std::fs::remove_file(out);
    let f = File::create_new(out)?;
    let mut w = io::BufWriter::with_capacity(1 << 20, f);
    let stats = crate::read::query::run_leased(spec, &mut w).map_err(|e| {
        let _ = std::fs::remove_file(out);
        io::Error::other(format!("keeping held packets: {e}"))
    })?;
    let f = w.into_inner().map_err(io::IntoInnerError::into_error)?;
    f.sync_all()?;
    Ok(stats)
}

fn check_name(name: &str) -> Result<(), HoldError> {
    let ok = (1..=64).contains(&name.len())
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(HoldError::BadName(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("corecap-hold-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("dir");
        d
    }

    fn spec(name: &str) -> HoldSpec {
        HoldSpec {
            name: name.into(),
            from_ns: 10,
            to_ns: 20,
            filter: Some("udp".into()),
            ..HoldSpec::default()
        }
    }

    #[test]
    fn test_holds_are_kept_across_a_reopen_and_released_by_name() {
        let d = scratch("reopen");
        let h = Holds::open(&d, vec![d.clone()], None, None).expect("open");
        h.add(spec("a"), 1).expect("a");
        h.add(spec("b"), 2).expect("b");
        assert!(matches!(h.add(spec("a"), 3), Err(HoldError::Exists(_))));
        assert!(matches!(h.add(spec("../x"), 3), Err(HoldError::BadName(_))));
        let empty = HoldSpec {
            to_ns: 10,
            ..spec("c")
        };
        assert!(matches!(h.add(empty, 3), Err(HoldError::BadWindow)));
        h.extend("b", 50).expect("extend");
        let again = Holds::open(&d, vec![d.clone()], None, None).expect("reopen");
        let names: Vec<(String, u64)> = again
            .list()
            .into_iter()
            .map(|h| (h.spec.name, h.spec.to_ns))
            .collect();
        assert_eq!(names, [("a".into(), 20), ("b".into(), 50)]);
        assert_eq!(again.covering(15, 16).len(), 2);
        assert_eq!(again.covering(30, 40).len(), 1, "only the extended one");
        assert!(
            !again.holds_connection("1:x=", 15),
            "held by filter, not by connection"
        );
        again.remove("a").expect("release");
        assert!(matches!(again.remove("a"), Err(HoldError::NotFound(_))));
        let third = Holds::open(&d, vec![d.clone()], None, None).expect("reopen");
        assert_eq!(third.list().len(), 1);
        std::fs::remove_dir_all(&d).expect("clean");
    }

    #[test]
    fn test_the_budget_refuses_new_holds_and_keeps_old_ones() {
        let d = scratch("budget");
        let h = Holds::open(&d, vec![d.clone()], Some(100), None).expect("open");
        h.add(spec("a"), 1).expect("under the budget");
        std::fs::create_dir(held_dir(&d)).expect("held");
        std::fs::write(held_dir(&d).join("x.pcapng"), [0u8; 100]).expect("held file");
        assert!(matches!(
            h.add(spec("b"), 2),
            Err(HoldError::Budget { held: 100, .. })
        ));
        assert_eq!(h.list().len(), 1, "the old hold stays");
        std::fs::remove_dir_all(&d).expect("clean");
    }

    #[test]
    fn test_a_damaged_holds_file_stops_the_start() {
        let d = scratch("damaged");
        std::fs::write(holds_path(&d), b"[{\"name\":").expect("write");
        let e = Holds::open(&d, Vec::new(), None, None).expect_err("damaged");
        assert!(e.to_string().contains("move it aside"), "{e}");
        std::fs::remove_dir_all(&d).expect("clean");
    }
}
