//! The catalog: what the daemon remembers of its captures across restarts, in one small
//! file in the spool, [`FILE`] (`.corecap-captures.json`).
//!
//! It holds the next capture id and, per capture, its id, the name its request gave, its
//! interface, mode, filter and output, its limits, when it was requested and when it ended,
//! its state and reason, its last counters and the names of the files it wrote. The manager
//! writes it when a capture starts and when one ends, never per packet.
//!
//! A write never leaves a torn file: the whole catalog goes to a hidden temporary file
//! ([`TEMP`]), which is synced, renamed over the catalog, and the spool directory synced.
//! JSON in a file of its own, rather than SQLite: the catalog is a few hundred records,
//! rewritten whole a few times per capture, read once at start; an atomic rename gives
//! every guarantee it needs without a C library in the daemon or a database to migrate.
//!
//! Both names are hidden (they start with `.`), so a query over the spool skips them
//! (`expand_paths`), and they do not end in `.part`, so neither recovery nor a query takes
//! them for a capture file being written. Retention only deletes the files captures wrote.
//!
//! At start ([`load`]) a missing or unreadable catalog stops nothing: the records that can
//! be read are kept, and ids continue past every `cN` in the spool's file names (whole,
//! hidden `.cN....part`, recovered), so an unnamed capture never takes a name in use. Then
//! [`Catalog::settle`] gives each capture of the earlier run its final state:
//! - ended cleanly (done or stopped): `finished`;
//! - still `running` at the last write (the daemon died): `recovered` when its file is
//!   there (renamed by the recovery step, left whole by its writer, or still the hidden
//!   part the writer left), `failed` with the reason when it is not.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use corecap_store::names::{id_number, name_id, recovered_names};
use serde::{Deserialize, Serialize};

use crate::api::{Drops, Mode, OutputKind, State};

/// The catalog's name in the spool.
pub const FILE: &str = ".corecap-captures.json";
/// The temporary file a write goes to before it is renamed over [`FILE`].
pub const TEMP: &str = ".corecap-captures.json.tmp";
/// Where an unreadable catalog is kept aside for a look.
pub const BAD: &str = ".corecap-captures.json.bad";
/// The format's version.
pub const VERSION: u32 = 1;

/// One capture, as the catalog keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Its id (`c1`, `c2`...).
    pub id: String,
    /// The file name its request gave (none: the id and the output's extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Interface (`eth0`, `eth0@2`).
    pub interface: String,
    /// Attach or spawn.
    pub mode: Mode,
    /// Filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// Output kind.
    #[serde(default)]
    pub output: OutputKind,
    /// Count limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Duration limit (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<f64>,
    /// When the request arrived (seconds since the epoch).
    pub requested_at: f64,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<f64>,
    /// Its state at the last write (`running` for one that ran then).
    pub state: State,
    /// Why it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The files it wrote, by name in the spool (a hidden `.NAME.part` for a file its
    /// writer never finished and no recovery has named yet).
    #[serde(default)]
    pub files: Vec<String>,
    /// Packets captured, as of the last write.
    #[serde(default)]
    pub packets: u64,
    /// Their wire bytes.
    #[serde(default)]
    pub bytes: u64,
    /// Packets lost, by place.
    #[serde(default)]
    pub drops: Drops,
    /// Thread lag in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_us: Option<f64>,
    /// Set-up time in microseconds.
    #[serde(default)]
    pub setup_us: f64,
    /// CPUs it ran on.
    #[serde(default)]
    pub cores: Vec<u32>,
    /// Started by an earlier run of the daemon than the one that wrote the catalog.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub earlier_run: bool,
}

/// The whole file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    /// [`VERSION`].
    pub version: u32,
    /// The number of the next unnamed capture's id: past every id ever given.
    pub next_id: u64,
    /// Captures, oldest first: the running ones and the last ended ones.
    pub captures: Vec<Record>,
}

/// A file the recovery step renamed at start (`sink::recover`'s `Recovered`): the hidden
/// part a dead writer left, and the name it has now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Renamed {
    /// `.NAME.part`.
    pub part: PathBuf,
    /// `NAME.recovered-TIME.EXT`.
    pub path: PathBuf,
    /// Whole packets it kept.
    pub packets: u64,
}

/// What [`load`] found.
#[derive(Debug)]
pub struct Loaded {
    /// The catalog, with `next_id` past every `cN` of the spool's file names.
    pub catalog: Catalog,
    /// What the user should hear once (an unreadable or missing catalog); empty when all
    /// was well.
    pub notes: Vec<String>,
}

/// Writes `c` as the spool's catalog, atomically: the temporary file, synced, renamed
/// over the catalog, the directory synced.
pub fn write(dir: &Path, c: &Catalog) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = dir.join(TEMP);
    let body = serde_json::to_vec_pretty(c).map_err(io::Error::other)?;
    // Made new (O_EXCL): a link planted under the temporary name is never followed.
    match fs::remove_file(&tmp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(&body)?;
    f.write_all(b"\n")?;
    f.sync_all()?;
    drop(f);
    fs::rename(&tmp, dir.join(FILE))?;
    File::open(dir)?.sync_all()
}

/// Reads the spool's catalog. Never fails: what cannot be read is said in the notes, an
/// unreadable file is kept aside as [`BAD`], and ids continue past every `cN` of the
/// spool's file names either way.
pub fn load(dir: &Path) -> Loaded {
    let path = dir.join(FILE);
    let mut notes = Vec::new();
    let unreadable = |why: String, notes: &mut Vec<String>| {
        let aside = match fs::rename(&path, dir.join(BAD)) {
            Ok(()) => format!("kept as {BAD}"),
            Err(x) => format!("could not keep it as {BAD}: {x}"),
        };
        notes.push(format!(
            "{} is unreadable ({why}; {aside}): earlier captures are not listed",
            path.display()
        ));
        Catalog::default()
    };
    let mut catalog = match fs::read(&path) {
        Ok(b) => match parse(&b) {
            Ok((c, dropped)) => {
                if dropped > 0 {
                    notes.push(format!(
                        "{}: {dropped} capture records could not be read and are left out",
                        path.display()
                    ));
                }
                c
            }
            Err(e) => unreadable(e, &mut notes),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => Catalog::default(),
        Err(e) => unreadable(e.to_string(), &mut notes),
    };
    let stored = catalog.next_id;
    let in_names = highest_id_in(dir).map_or(0, |n| n.saturating_add(1));
    let in_records = catalog
        .captures
        .iter()
        .filter_map(|r| id_number(&r.id))
        .max()
        .map_or(0, |n| n.saturating_add(1));
    catalog.next_id = stored.max(in_names).max(in_records).max(1);
    catalog.version = VERSION;
    let missing = !path.exists() && notes.is_empty();
    if (missing && in_names > 0) || (!notes.is_empty() && catalog.next_id > 1) {
        notes.push(format!(
            "{}ids continue from c{}, past the ids in the spool's file names",
            if missing {
                format!("{} is missing: ", path.display())
            } else {
                String::new()
            },
            catalog.next_id
        ));
    }
    Loaded { catalog, notes }
}

/// The catalog in `b`, and how many of its records could not be read (left out). An error
/// when `b` is no JSON object at all.
fn parse(b: &[u8]) -> Result<(Catalog, usize), String> {
    let v: serde_json::Value = serde_json::from_slice(b).map_err(|e| e.to_string())?;
    let o = v.as_object().ok_or("not a JSON object")?;
    let version = o.get("version").and_then(|v| v.as_u64()).unwrap_or(0);
    if version > u64::from(VERSION) {
        return Err(format!(
            "version {version}, newer than this daemon's {VERSION}"
        ));
    }
    let next_id = o.get("next_id").and_then(|v| v.as_u64()).unwrap_or(1);
    let mut dropped = 0;
    let captures = o
        .get("captures")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let r = serde_json::from_value::<Record>(r.clone()).ok();
            dropped += usize::from(r.is_none());
            r
        })
        .collect();
    Ok((
        Catalog {
            version: VERSION,
            next_id,
            captures,
        },
        dropped,
    ))
}

/// The highest `N` of the spool's file names that start with an id `cN`.
pub fn highest_id_in(dir: &Path) -> Option<u64> {
    ids_in(dir).last().copied()
}

/// Every `N` of the spool's file names that start with an id `cN`.
pub fn ids_in(dir: &Path) -> BTreeSet<u64> {
    let Ok(rd) = fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    rd.filter_map(Result::ok)
        .filter_map(|e| name_id(&e.file_name().to_string_lossy()))
        .collect()
}

/// The lowest id number, from 1, that `taken` does not hold.
pub fn lowest_free(taken: &BTreeSet<u64>) -> u64 {
    let mut n = 1u64;
    for &t in taken.range(1..) {
        if t != n {
            break;
        }
        n = n.saturating_add(1);
    }
    n
}

/// Where a file the catalog names is now, for a capture whose daemon died while it ran:
/// the name the recovery step gave its part, or the name its writer gave it, or a name
/// recovery gave it since, or the part still as the writer left it.
fn locate(dir: &Path, name: &str, since: f64, renamed: &[Renamed]) -> Option<(String, u64)> {
    let (own, part) = match corecap_store::names::whole_of_part(name) {
        Some(own) => (own.to_owned(), name.to_owned()),
        None => (name.to_owned(), corecap_store::names::part_name(name)),
    };
    if let Some(r) = renamed.iter().find(|r| r.part == dir.join(&part)) {
        let n = r.path.file_name()?.to_string_lossy().into_owned();
        return Some((n, r.packets));
    }
    // Its writer finished it before the daemon died. Once the catalog names the part,
    // the file under its own name can only be a later capture's.
    if corecap_store::names::whole_of_part(name).is_none() && dir.join(&own).is_file() {
        return Some((own, 0));
    }
    if let Some(n) = recovered_names(dir, &own, since).into_iter().next() {
        return Some((n, 0));
    }
    dir.join(&part).is_file().then_some((part, 0))
}

impl Record {
    /// Gives a capture the daemon died under (state `running` at the last write, or
    /// `recovered` while its file is still the writer's part) the state its files tell.
    /// Returns whether anything changed.
    fn settle_died(&mut self, dir: &Path, renamed: &[Renamed]) -> bool {
        let before = (self.state, self.files.clone(), self.packets);
        if self.files.is_empty() {
            self.state = State::Failed;
            self.reason = Some(
                "the daemon stopped while it ran; a count capture keeps no file, so its counts are lost"
                    .into(),
            );
            return before.0 != self.state;
        }
        let mut found = Vec::new();
        let mut packets = 0;
        for f in &self.files {
            if let Some((n, p)) = locate(dir, f, self.requested_at, renamed) {
                found.push(n);
                packets += p;
            }
        }
        if found.is_empty() {
            self.state = State::Failed;
            self.reason = Some(format!(
                "the daemon stopped while it ran, and its file is gone ({})",
                self.files.join(", ")
            ));
        } else {
            self.state = State::Recovered;
            let waiting = found
                .iter()
                .any(|n| corecap_store::names::whole_of_part(n).is_some());
            self.reason = Some(if waiting {
                format!(
                    "the daemon stopped while it ran; its file is as its writer left it ({}), not yet recovered",
                    found.join(", ")
                )
            } else {
                format!(
                    "the daemon stopped while it ran; its file is {}",
                    found.join(", ")
                )
            });
            self.files = found;
            self.packets = self.packets.max(packets);
        }
        (self.state, &self.files, self.packets) != (before.0, &before.1, before.2)
    }

    /// Whether it is a capture the daemon died under whose file is still the writer's
    /// part, so that a later recovery may name it.
    pub fn awaits_recovery(&self) -> bool {
        self.state == State::Recovered
            && self
                .files
                .iter()
                .any(|f| corecap_store::names::whole_of_part(f).is_some())
    }

    /// Settles a capture that [`Record::awaits_recovery`] again: the part may have been
    /// recovered (or removed) since. Returns whether anything changed.
    pub fn resettle(&mut self, dir: &Path) -> bool {
        self.awaits_recovery() && self.settle_died(dir, &[])
    }
}

impl Catalog {
    /// Marks every capture as one of an earlier run and gives it its final state (see the
    /// module doc); `renamed` is what the recovery step did at this start. Returns whether
    /// anything changed.
    pub fn settle(&mut self, dir: &Path, renamed: &[Renamed]) -> bool {
        let mut changed = false;
        for r in &mut self.captures {
            changed |= !r.earlier_run;
            r.earlier_run = true;
            changed |= match r.state {
                State::Running => r.settle_died(dir, renamed),
                State::Recovered if r.awaits_recovery() => r.settle_died(dir, renamed),
                State::Done | State::Stopped => {
                    r.state = State::Finished;
                    true
                }
                State::Failed | State::Finished | State::Recovered => false,
            };
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spool directory of its own, removed on drop.
    struct Dir(PathBuf);

    impl Dir {
        fn new(tag: &str) -> Self {
            let d =
                std::env::temp_dir().join(format!("corecap-catalog-{}-{tag}", std::process::id()));
            let _ = fs::remove_dir_all(&d);
            fs::create_dir_all(&d).expect("dir");
            Self(d)
        }
        fn touch(&self, name: &str) {
            fs::write(self.0.join(name), b"x").expect("file");
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn record(id: &str, state: State, files: &[&str]) -> Record {
        Record {
            id: id.into(),
            name: None,
            interface: "eth0".into(),
            mode: Mode::Attach,
            filter: Some("udp port 53".into()),
            output: OutputKind::Pcapng,
            count: Some(100),
            duration: None,
            requested_at: 1_700_000_000.25,
            ended_at: None,
            state,
            reason: None,
            files: files.iter().map(|f| f.to_string()).collect(),
            packets: 7,
            bytes: 700,
            drops: Drops::default(),
            lag_us: Some(12.5),
            setup_us: 40.0,
            cores: vec![2],
            earlier_run: false,
        }
    }

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(d)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn test_round_trip() {
        let d = Dir::new("round-trip");
        let c = Catalog {
            version: VERSION,
            next_id: 3,
            captures: vec![
                record("c1", State::Done, &["c1.pcapng"]),
                Record {
                    name: Some("dns.pcap".into()),
                    output: OutputKind::Pcap,
                    ended_at: Some(1_700_000_100.5),
                    reason: Some("stopped by request".into()),
                    ..record("c2", State::Running, &["dns.pcap"])
                },
            ],
        };
        write(&d.0, &c).expect("write");
        let l = load(&d.0);
        assert!(l.notes.is_empty(), "{:?}", l.notes);
        assert_eq!(l.catalog, c);
        // Only the catalog is left, the owner's alone.
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(names(&d.0), [FILE]);
        let mode = fs::metadata(d.0.join(FILE))
            .expect("file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn test_write_replaces_whole() {
        let d = Dir::new("replace");
        let mut c = Catalog {
            version: VERSION,
            next_id: 2,
            captures: vec![record("c1", State::Running, &["c1.pcapng"])],
        };
        write(&d.0, &c).expect("first");
        // A write the daemon died in left a torn temporary file: it is never read, and the
        // next write replaces it.
        fs::write(d.0.join(TEMP), b"{\"version\":1,\"next_id\":99,\"capt").expect("torn");
        assert_eq!(load(&d.0).catalog, c);
        c.captures[0].state = State::Done;
        c.next_id = 5;
        write(&d.0, &c).expect("second");
        assert_eq!(load(&d.0).catalog, c);
        assert_eq!(names(&d.0), [FILE]);
        // A link planted under the temporary name is replaced, not followed.
        let outside = d.0.join("outside");
        std::os::unix::fs::symlink(&outside, d.0.join(TEMP)).expect("link");
        write(&d.0, &c).expect("third");
        assert!(!outside.exists());
        assert_eq!(load(&d.0).catalog, c);
    }

    #[test]
    fn test_corrupt_catalog_starts_from_the_files() {
        let d = Dir::new("corrupt");
        d.touch("c4.pcapng");
        fs::write(
            d.0.join(FILE),
            b"{\"version\":1,\"next_id\":2,\"captures\":[{\"id\"",
        )
        .unwrap();
        let l = load(&d.0);
        assert_eq!(l.catalog.captures, []);
        assert_eq!(l.catalog.next_id, 5);
        assert_eq!(l.notes.len(), 2, "{:?}", l.notes);
        assert!(l.notes[0].contains("unreadable"), "{:?}", l.notes);
        assert!(l.notes[1].contains("c5"), "{:?}", l.notes);
        // Kept aside, and not taken for a capture's file by the id scan or a query.
        assert_eq!(names(&d.0), [BAD, "c4.pcapng"]);
        // One bad record out of two: the other is kept.
        let good = serde_json::to_value(record("c1", State::Done, &["c1.pcapng"])).unwrap();
        let body = serde_json::json!({"version": 1, "next_id": 3,
            "captures": [good, {"id": "c2", "state": "exploded"}]});
        fs::write(d.0.join(FILE), body.to_string()).unwrap();
        let l = load(&d.0);
        assert_eq!(l.catalog.captures.len(), 1);
        assert_eq!(l.catalog.next_id, 5);
        assert!(l.notes[0].contains("1 capture records"), "{:?}", l.notes);
        // Not JSON at all, or from a newer daemon: unreadable, never a stop.
        for bad in [&b"\0\0\0\0"[..], br#"{"version": 9}"#, b"[1,2]"] {
            fs::write(d.0.join(FILE), bad).unwrap();
            let l = load(&d.0);
            assert!(l.notes[0].contains("unreadable"), "{:?}", l.notes);
            assert_eq!(l.catalog.next_id, 5);
        }
    }

    #[test]
    fn test_ids_continue_past_the_files() {
        let d = Dir::new("ids");
        // A fresh spool: c1, and nothing to say.
        let l = load(&d.0);
        assert_eq!((l.catalog.next_id, l.notes.len()), (1, 0));
        for n in [
            "c7.pcapng",
            "c7.pcapng.idx",
            ".c9.pcapng.part",
            "c3.g0m0.flows.jsonl",
            "c12.recovered-20261125T080102Z.pcapng",
            "c2.pcapng.sealed",
            "cap.pcapng",
            "c99x.pcapng",
            "c.pcapng",
            "dns.pcapng",
            "c123456789012345678901.pcapng",
        ] {
            d.touch(n);
        }
        // No catalog: past every cN in the names, said once.
        let l = load(&d.0);
        assert_eq!(l.catalog.next_id, 13);
        assert_eq!(l.notes.len(), 1, "{:?}", l.notes);
        assert!(l.notes[0].contains("missing") && l.notes[0].contains("c13"));
        // A catalog behind the files (files written after its last write): past both.
        let c = Catalog {
            version: VERSION,
            next_id: 4,
            captures: vec![record("c3", State::Done, &["c3.pcapng"])],
        };
        write(&d.0, &c).unwrap();
        let l = load(&d.0);
        assert_eq!((l.catalog.next_id, l.notes.len()), (13, 0));
        // A catalog ahead of the files (their files deleted): past the catalog's.
        write(
            &d.0,
            &Catalog {
                next_id: 40,
                ..c.clone()
            },
        )
        .unwrap();
        assert_eq!(load(&d.0).catalog.next_id, 40);
        // Records ahead of next_id (a hand-edited file): past the records.
        let mut c = c;
        c.captures.push(record("c50", State::Done, &[]));
        write(&d.0, &c).unwrap();
        assert_eq!(load(&d.0).catalog.next_id, 51);
        assert_eq!(name_id("c18446744073709551615.pcapng"), Some(u64::MAX));
        assert!(highest_id_in(&d.0.join("none")).is_none());
    }

    #[test]
    fn test_settle_earlier_captures() {
        let d = Dir::new("settle");
        d.touch("c2.pcapng");
        d.touch(".c3.pcapng.part");
        d.touch("c4.recovered-20261125T080102Z.pcapng");
        d.touch("c4.recovered-20261125T080102Z.pcapng.idx");
        let mut c = Catalog {
            version: VERSION,
            next_id: 8,
            captures: vec![
                record("c1", State::Done, &["c1.pcapng"]),
                record("c2", State::Running, &["c2.pcapng"]),
                record("c3", State::Running, &["c3.pcapng"]),
                record("c4", State::Running, &["c4.pcapng"]),
                record("c5", State::Running, &["c5.pcapng"]),
                record("c6", State::Running, &[]),
                record("c7", State::Running, &["c7.pcapng"]),
                record("c8", State::Failed, &["c8.pcapng"]),
            ],
        };
        d.touch(".c7.pcapng.part");
        let renamed = [Renamed {
            part: d.0.join(".c7.pcapng.part"),
            path: d.0.join("c7.recovered-20261125T090000Z.pcapng"),
            packets: 31,
        }];
        assert!(c.settle(&d.0, &renamed));
        let got: Vec<(&str, State, Vec<String>)> = c
            .captures
            .iter()
            .map(|r| (r.id.as_str(), r.state, r.files.clone()))
            .collect();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            got,
            [
                ("c1", State::Finished, s(&["c1.pcapng"])),
                ("c2", State::Recovered, s(&["c2.pcapng"])),
                ("c3", State::Recovered, s(&[".c3.pcapng.part"])),
                (
                    "c4",
                    State::Recovered,
                    s(&["c4.recovered-20261125T080102Z.pcapng"])
                ),
                ("c5", State::Failed, s(&["c5.pcapng"])),
                ("c6", State::Failed, s(&[])),
                (
                    "c7",
                    State::Recovered,
                    s(&["c7.recovered-20261125T090000Z.pcapng"])
                ),
                ("c8", State::Failed, s(&["c8.pcapng"])),
            ]
        );
        assert!(c.captures.iter().all(|r| r.earlier_run));
        assert_eq!(c.captures[6].packets, 31);
        assert!(c.captures[4]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("gone")));
        assert!(c.captures[5]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("count")));
        // Settled once: a second start changes nothing.
        assert!(!c.clone().settle(&d.0, &[]));
        // The part waiting for recovery is named later: the capture follows it, and a
        // later capture's file under the freed name is not taken for its.
        assert!(c.captures[2].awaits_recovery());
        assert!(!c.captures[2].resettle(&d.0));
        fs::rename(
            d.0.join(".c3.pcapng.part"),
            d.0.join("c3.recovered-20261125T100000Z.pcapng"),
        )
        .unwrap();
        d.touch("c3.pcapng");
        assert!(c.captures[2].resettle(&d.0));
        assert_eq!(
            (c.captures[2].state, c.captures[2].files.clone()),
            (
                State::Recovered,
                s(&["c3.recovered-20261125T100000Z.pcapng"])
            )
        );
        assert!(!c.captures[2].awaits_recovery());
        // An old recovered file of the same name, from before the capture: not its.
        let mut r = record("c9", State::Running, &["old.pcapng"]);
        r.requested_at = 4e9;
        d.touch("old.recovered-20200101T000000Z.pcapng");
        assert!(r.settle_died(&d.0, &[]));
        assert_eq!(r.state, State::Failed);
    }
}
