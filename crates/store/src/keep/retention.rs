//! Retention: a recording's whole files kept under a byte budget (`--retain`), for an age
//! (`--retain-age`), and so that the filesystem keeps some space free (`--min-free`).
//! Whichever bites first deletes the oldest whole file (by its packets' time), never the
//! newest and never one being written.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::keep::deleted::{self, Deletion, Rule};
use crate::names::{capture_stem, dir_of, is_file_of, remove_with_index};

/// Whole files kept under a byte budget (`--retain`), shared by every file sink of a
/// capture (or by the daemon's captures): once a file is whole, the oldest are deleted
/// until the kept files and the files being written fit.
#[derive(Debug)]
pub struct Retention {
    budget: u64,
    /// Whole files, oldest first: each with its bytes (index included) and the time of
    /// its first packet (`u64::MAX` for a file this run closed, newer than any before).
    kept: Mutex<VecDeque<Kept>>,
    /// Bytes of the files being written. Each disk writer adds what it writes and takes it
    /// back at close; Relaxed, a total read when a file closes.
    open_bytes: AtomicU64,
    deleted_files: AtomicU64,
    deleted_bytes: AtomicU64,
    /// Files and bytes deleted by each rule, in [`Rule::ALL`]'s order.
    by_rule: [(AtomicU64, AtomicU64); 4],
    /// Times a deletion waited because a query was reading the folder (the next close
    /// tries again).
    deferred: AtomicU64,
    /// At most this many whole files kept (`-b files:N` over a file per worker: N in all,
    /// as dumpcap counts them); `usize::MAX` for no limit.
    max_files: AtomicUsize,
    /// Files whose last packet is older than this (ns) go; `u64::MAX` for no limit.
    max_age_ns: AtomicU64,
    /// What the filesystem of the oldest file must keep free.
    min_free: Mutex<MinFree>,
    /// Holds whose packets are copied out of a file before it is deleted.
    holds: Mutex<Option<Arc<crate::keep::hold::Holds>>>,
    /// Deletions put off because the held packets of the file could not be copied.
    hold_failures: AtomicU64,
}

/// Space a recording leaves free on its filesystem (`--min-free`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum MinFree {
    /// No such rule.
    #[default]
    Nothing,
    /// At least this many bytes free.
    Bytes(u64),
    /// At least this share of the filesystem free, in percent (0 to 100).
    Percent(f64),
}

impl MinFree {
    /// Whether `free` bytes of a filesystem of `total` are less than this asks.
    fn wants_more(self, free: u64, total: u64) -> bool {
        match self {
            MinFree::Nothing => false,
            MinFree::Bytes(b) => free < b,
            MinFree::Percent(p) => (free as f64) < total as f64 * p / 100.0,
        }
    }
}

/// A whole file retention counts.
#[derive(Debug)]
struct Kept {
    path: PathBuf,
    bytes: u64,
    first_ns: u64,
    /// Its last packet's time (ns), for `--retain-age`.
    last_ns: u64,
}

impl Retention {
    /// A budget of `budget` bytes.
    pub fn new(budget: u64) -> Arc<Self> {
        Arc::new(Self {
            budget,
            kept: Mutex::new(VecDeque::new()),
            open_bytes: AtomicU64::new(0),
            deleted_files: AtomicU64::new(0),
            deleted_bytes: AtomicU64::new(0),
            by_rule: Default::default(),
            deferred: AtomicU64::new(0),
            max_files: AtomicUsize::new(usize::MAX),
            max_age_ns: AtomicU64::new(u64::MAX),
            min_free: Mutex::new(MinFree::Nothing),
            holds: Mutex::new(None),
            hold_failures: AtomicU64::new(0),
        })
    }

    /// Deletes files whose last packet is older than `age` as well.
    pub fn limit_age(&self, age: std::time::Duration) {
        // Relaxed: set before any sink starts; read under the kept list's lock.
        let ns = u64::try_from(age.as_nanos()).unwrap_or(u64::MAX);
        self.max_age_ns.store(ns, Ordering::Relaxed);
    }

    /// Copies what `holds` keep out of each file before it is deleted.
    pub fn hold_with(&self, holds: Arc<crate::keep::hold::Holds>) {
        *self.holds.lock().unwrap_or_else(|e| e.into_inner()) = Some(holds);
    }

    /// Deletes the oldest files while their filesystem has less free than `min` as well.
    pub fn keep_free(&self, min: MinFree) {
        *self.min_free.lock().unwrap_or_else(|e| e.into_inner()) = min;
    }

    /// Keeps at most `n` whole files as well (the oldest go first), over every sink that
    /// shares this retention.
    pub fn limit_files(&self, n: usize) {
        // Relaxed: set before any sink starts; read under the kept list's lock.
        self.max_files.store(n.max(1), Ordering::Relaxed);
    }

    /// Files and bytes deleted so far.
    pub fn deleted(&self) -> (u64, u64) {
        (
            self.deleted_files.load(Ordering::Relaxed),
            self.deleted_bytes.load(Ordering::Relaxed),
        )
    }

    /// A file being written grew by `bytes`.
    pub fn grow_open(&self, bytes: u64) {
        self.open_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// A file being written that had reached `bytes` is closed (and counted whole by
    /// [`Retention::add`], or abandoned).
    pub fn close_open(&self, bytes: u64) {
        let now = self.open_bytes.load(Ordering::Relaxed);
        self.open_bytes.fetch_sub(bytes.min(now), Ordering::Relaxed);
    }

    /// The budget in bytes.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Counts files already on disk (written by earlier runs, in any of the folders this
    /// budget covers), each with its first packet's time: all the files counted stay in
    /// the order of their packets, before the ones this run closes.
    pub fn adopt(&self, files: Vec<(PathBuf, u64, u64)>) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        for (path, bytes, first_ns) in files {
            if !kept.iter().any(|k| k.path == path) {
                let last_ns = last_packet_ns(&path).unwrap_or(first_ns).max(first_ns);
                kept.push_back(Kept {
                    path,
                    bytes,
                    first_ns,
                    last_ns,
                });
            }
        }
        // Stable: files of equal times keep the order they came in.
        kept.make_contiguous().sort_by_key(|k| k.first_ns);
    }

    /// Deletes the oldest whole files until the rest fit the budget (at a start, after
    /// [`Retention::adopt`]: a run that was killed before it closed a file never trimmed).
    /// Returns the deleted paths.
    pub fn trim(&self) -> Vec<PathBuf> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        self.trim_kept(&mut kept, 0)
    }

    /// Stops counting a file that something else deleted (`-b files:N`).
    pub fn forget(&self, path: &Path) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|k| k.path != path);
    }

    /// Adds a whole file whose last packet is at `last_ns` (None: now) and deletes the
    /// oldest files over the limits (never the one just added). Returns the deleted paths.
    pub fn add(&self, path: PathBuf, bytes: u64, last_ns: Option<u64>) -> Vec<PathBuf> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.push_back(Kept {
            path,
            bytes,
            first_ns: u64::MAX,
            last_ns: last_ns.unwrap_or_else(now_ns),
        });
        self.trim_kept(&mut kept, 1)
    }

    /// The rule by which the oldest of `kept` (with the files being written, `total` bytes)
    /// must go, if one does: over the budget or the file count, past the age, or too little
    /// space free.
    fn over(&self, kept: &VecDeque<Kept>, total: u64, now: u64) -> Option<Rule> {
        let oldest = kept.front()?;
        let max_age = self.max_age_ns.load(Ordering::Relaxed);
        let min_free = *self.min_free.lock().unwrap_or_else(|e| e.into_inner());
        if total > self.budget {
            Some(Rule::Size)
        } else if kept.len() > self.max_files.load(Ordering::Relaxed) {
            Some(Rule::Files)
        } else if max_age != u64::MAX && oldest.last_ns < now.saturating_sub(max_age) {
            Some(Rule::Age)
        } else if min_free != MinFree::Nothing
            && corecap_linux::direct::fs_space(dir_of(&oldest.path))
                .is_ok_and(|(free, size)| min_free.wants_more(free, size))
        {
            Some(Rule::FreeSpace)
        } else {
            None
        }
    }

    /// Deletes the oldest of `kept` while they and the files being written are over the
    /// budget, leaving at least `keep` of them. Each folder it deletes from is leased alone
    /// first (the recording and the spool are two): while a query reads the folder of the
    /// oldest file, nothing is deleted (the next close tries again), so no answer is cut
    /// short and the oldest file still goes first.
    fn trim_kept(&self, kept: &mut VecDeque<Kept>, keep: usize) -> Vec<PathBuf> {
        let open = self.open_bytes.load(Ordering::Relaxed);
        let mut total: u64 = kept.iter().map(|k| k.bytes).sum::<u64>() + open;
        let mut gone = Vec::new();
        let mut leases: Vec<(PathBuf, Option<corecap_linux::direct::Lease>)> = Vec::new();
        let now = now_ns();
        while kept.len() > keep {
            let Some(rule) = self.over(kept, total, now) else {
                break;
            };
            let Some(dir) = kept.front().map(|k| dir_of(&k.path).to_owned()) else {
                break;
            };
            if !leases.iter().any(|(d, _)| *d == dir) {
                match corecap_linux::direct::Lease::exclusive(&dir) {
                    Ok(Some(l)) => leases.push((dir.clone(), Some(l))),
                    Ok(None) => {
                        self.deferred.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    // A folder where no lease can be made has no reader to wait for.
                    Err(_) => leases.push((dir.clone(), None)),
                }
            }
            let Some(k) = kept.pop_front() else {
                break;
            };
            if !self.delete(&dir, &k, rule, now) {
                kept.push_front(k);
                break;
            }
            total -= k.bytes;
            gone.push(k.path);
        }
        crate::catalog_update::forget(&gone);
        gone
    }
}

/// Records in its folder's record of deletions, synced, that the whole file `path` goes
/// by `rule`, before the caller removes it: a rule that deletes outside this budget's
/// (`-b files:N`, the disk writer's ring of files). A query then says which part of its
/// window that rule took, as it does for retention's. Its packets' times are its index's:
/// a file without one is not read through on the writer's thread, and gets no line.
pub fn record_deletion(path: &Path, rule: Rule) -> std::io::Result<()> {
    let Some((first_ns, last_ns)) = packet_range(path) else {
        return Ok(());
    };
    let line = Deletion::of_file(path, (first_ns, last_ns), now_ns(), rule);
    deleted::record(dir_of(path), &[line])
}

impl Retention {
    /// Deletes the whole file `k` of `dir` by `rule`: what holds keep of it copied out
    /// first ([`crate::keep::hold`]), then its line in the folder's record of deletions,
    /// synced ([`deleted`]), then the file, its index and its sessions. False when the held
    /// packets could not be copied: the file stays (a hold is never lost to make room).
    fn delete(&self, dir: &Path, k: &Kept, rule: Rule, now: u64) -> bool {
        let (first_ns, last_ns) = packet_range_read(&k.path).unwrap_or((
            if k.first_ns == u64::MAX {
                k.last_ns
            } else {
                k.first_ns
            },
            k.last_ns,
        ));
        let holds = self.holds.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(h) = holds {
            if let Err(e) = h.keep(&k.path, first_ns, last_ns) {
                self.hold_failures.fetch_add(1, Ordering::Relaxed);
                eprintln!(
                    "corecap: {} is held and stays: copying its held packets: {e}",
                    k.path.display()
                );
                return false;
            }
        }
        let line = Deletion::of_file(&k.path, (first_ns, last_ns), now, rule);
        if let Err(e) = deleted::record(dir, &[line]) {
            // Retention still deletes (a full disk must make room); answers then call the
            // time a gap instead of naming retention.
            eprintln!(
                "corecap: recording the deletion of {} in {}: {e}",
                k.path.display(),
                crate::names::deleted_log(dir).display()
            );
        }
        remove_with_index(&k.path);
        self.deleted_files.fetch_add(1, Ordering::Relaxed);
        self.deleted_bytes.fetch_add(k.bytes, Ordering::Relaxed);
        let (files, bytes) = &self.by_rule[rule_slot(rule)];
        files.fetch_add(1, Ordering::Relaxed);
        bytes.fetch_add(k.bytes, Ordering::Relaxed);
        true
    }

    /// What retention keeps and has deleted, as `/status` and the metrics give it.
    pub fn report(&self) -> RetentionReport {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let kept_bytes = kept.iter().map(|k| k.bytes).sum::<u64>();
        let oldest = kept.front().map(|k| dir_of(&k.path).to_owned());
        let kept_files = kept.len() as u64;
        drop(kept);
        let max_age = self.max_age_ns.load(Ordering::Relaxed);
        let min_free = *self.min_free.lock().unwrap_or_else(|e| e.into_inner());
        let space = oldest.and_then(|d| corecap_linux::direct::fs_space(&d).ok());
        RetentionReport {
            budget_bytes: (self.budget != u64::MAX).then_some(self.budget),
            kept_files,
            kept_bytes,
            open_bytes: self.open_bytes.load(Ordering::Relaxed),
            max_age_s: (max_age != u64::MAX).then_some(max_age / 1_000_000_000),
            min_free: match min_free {
                MinFree::Nothing => None,
                MinFree::Bytes(b) => Some(format!("{b} bytes")),
                MinFree::Percent(p) => Some(format!("{p}%")),
            },
            fs_free_bytes: space.map(|(free, _)| free),
            fs_bytes: space.map(|(_, size)| size),
            deleted: Rule::ALL
                .iter()
                .map(|r| {
                    let (f, b) = &self.by_rule[rule_slot(*r)];
                    RuleCount {
                        rule: *r,
                        files: f.load(Ordering::Relaxed),
                        bytes: b.load(Ordering::Relaxed),
                    }
                })
                .collect(),
            deferred: self.deferred.load(Ordering::Relaxed),
            held_back: self.hold_failures.load(Ordering::Relaxed),
        }
    }
}

/// What retention keeps against each budget and what it has deleted ([`Retention::report`]).
#[derive(Clone, Debug, serde::Serialize)]
pub struct RetentionReport {
    /// The byte budget (`--retain`), if any.
    pub budget_bytes: Option<u64>,
    /// Whole files kept.
    pub kept_files: u64,
    /// Their bytes (indexes and sessions included).
    pub kept_bytes: u64,
    /// Bytes of the files being written.
    pub open_bytes: u64,
    /// The age limit in seconds (`--retain-age`), if any.
    pub max_age_s: Option<u64>,
    /// The free space kept (`--min-free`), as given.
    pub min_free: Option<String>,
    /// Bytes free on the filesystem of the oldest kept file.
    pub fs_free_bytes: Option<u64>,
    /// That filesystem's size.
    pub fs_bytes: Option<u64>,
    /// Files and bytes deleted, by rule (every rule listed).
    pub deleted: Vec<RuleCount>,
    /// Deletions put off because a query was reading the folder.
    pub deferred: u64,
    /// Deletions put off because the packets a hold keeps could not be copied out.
    pub held_back: u64,
}

/// Files and bytes one rule deleted.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RuleCount {
    /// The rule.
    pub rule: Rule,
    /// Files it deleted.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// The slot of `rule` in [`Rule::ALL`].
fn rule_slot(rule: Rule) -> usize {
    Rule::ALL.iter().position(|r| *r == rule).unwrap_or(0)
}

/// The time now, ns since the epoch.
fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The time of a file's last packet, from its index (a file without one: None).
fn last_packet_ns(path: &Path) -> Option<u64> {
    packet_range(path).map(|(_, last)| last)
}

/// The times of a file's first and last packets, from its index (a file without one: None).
fn packet_range(path: &Path) -> Option<(u64, u64)> {
    let b = std::fs::read(corecap_index::sidecar_path(path)).ok()?;
    corecap_index::Index::parse(&b).ok()?.time_range()
}

/// The times of a file's first and last packets, from its index, else read from the file
/// (a file of an earlier version or another tool, without an index; a sealed one cannot be
/// read without its key: None).
fn packet_range_read(path: &Path) -> Option<(u64, u64)> {
    if let Some(r) = packet_range(path) {
        return Some(r);
    }
    let mut r = corecap_wire::read::CaptureReader::open(path).ok()?;
    let mut range: Option<(u64, u64)> = None;
    while let Ok(Some(p)) = r.next_packet() {
        let (a, b) = range.unwrap_or((p.ts_ns, p.ts_ns));
        range = Some((a.min(p.ts_ns), b.max(p.ts_ns)));
    }
    range
}

/// A capture's files already on disk, as a start finds them ([`on_disk`]).
#[derive(Debug, Default)]
pub struct OnDisk {
    /// Its whole files, oldest packets first, each with its bytes (its index's included)
    /// and its first packet's time (ns).
    pub files: Vec<(PathBuf, u64, u64)>,
    /// Files whose names begin as the capture's but that are not its files, each with why:
    /// retention never counts or deletes them.
    pub left_alone: Vec<(PathBuf, &'static str)>,
}

/// The whole files of the capture `base` already in its directory, written by any run (see
/// [`is_file_of`] for the names), each checked to begin as a capture file, in the order of
/// their first packet's time: a clock that stepped back, or a file copied in later, does not
/// make the newest recording look the oldest. A file whose first packet cannot be read (a
/// sealed file, whose key retention does not hold) takes its modification time.
pub fn on_disk(base: &Path) -> OnDisk {
    let stem = capture_stem(base);
    scan(dir_of(base), Writer::MustSayCorecap, |name| {
        if !name.starts_with(&stem) {
            return Skip::Quietly;
        }
        if is_file_of(base, name) {
            Skip::No
        } else {
            Skip::Saying("not a name the files of this capture take")
        }
    })
}

/// The whole capture files in a daemon's spool, which holds only what the daemon wrote
/// (`serve` refuses a spool others can write into): every file that is not hidden and
/// begins as a capture file, ordered as [`on_disk`] orders them.
pub fn in_spool(dir: &Path) -> OnDisk {
    scan(dir, Writer::KnownByFolder, |_| Skip::No)
}

/// How [`scan`] knows corecap wrote a file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Writer {
    /// The file must say so ([`written_by_corecap`]): a recording's folder is the user's,
    /// and other programs write there.
    MustSayCorecap,
    /// By its folder: a daemon's spool, which no one else can write into.
    KnownByFolder,
}

/// What [`scan`] does with a name.
enum Skip {
    /// Look at the file.
    No,
    /// Not a name of what is counted; nothing to say.
    Quietly,
    /// A name that looks like one counted, but is not: left alone, for this reason.
    Saying(&'static str),
}

/// The capture files of `dir` whose names `skip` lets through, oldest packets first.
fn scan(dir: &Path, writer: Writer, skip: impl Fn(&str) -> Skip) -> OnDisk {
    use std::os::unix::fs::MetadataExt;
    let mut out = OnDisk::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut files: Vec<(u64, PathBuf, u64)> = Vec::new();
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        if name.starts_with('.') || crate::names::is_beside(&path) {
            continue;
        }
        let Some(m) = std::fs::symlink_metadata(&path)
            .ok()
            .filter(|m| m.is_file())
        else {
            continue;
        };
        match skip(&name) {
            Skip::No => {}
            Skip::Quietly => continue,
            Skip::Saying(why) => {
                out.left_alone.push((path, why));
                continue;
            }
        }
        let kind = crate::sniff::file_kind(&path).unwrap_or(crate::sniff::FileKind::Other);
        if !matches!(
            kind,
            crate::sniff::FileKind::Plain | crate::sniff::FileKind::Sealed
        ) {
            out.left_alone
                .push((path, "it does not begin as a capture file corecap writes"));
            continue;
        }
        if writer == Writer::MustSayCorecap
            && kind == crate::sniff::FileKind::Plain
            && !written_by_corecap(&path)
        {
            out.left_alone.push((
                path,
                "another program wrote it (its header does not name corecap, and no index \
                 or sessions file corecap made of it is beside it)",
            ));
            continue;
        }
        let mtime_ns = u64::try_from(m.mtime()).unwrap_or(0) * 1_000_000_000
            + u64::try_from(m.mtime_nsec()).unwrap_or(0);
        let first = first_packet_ns(&path).unwrap_or(mtime_ns);
        let beside = |p: PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
        let index = beside(corecap_index::sidecar_path(&path));
        let sessions = beside(crate::names::sessions_path(&path));
        files.push((first, path, m.len() + index + sessions));
    }
    files.sort();
    out.files = files.into_iter().map(|(t, p, b)| (p, b, t)).collect();
    out.left_alone.sort();
    out
}

/// Whether the plain capture file at `path` shows that corecap wrote it: a pcapng whose
/// section names corecap as the application that wrote it, or a pcap (which names none)
/// with an index or a sessions file that corecap made of these very bytes. A file another
/// program wrote under a recording's name is left alone: nothing is deleted that corecap
/// cannot tell it wrote.
fn written_by_corecap(path: &Path) -> bool {
    use std::io::Read;
    let mut head = Vec::with_capacity(4096);
    let read = std::fs::File::open(path).and_then(|f| f.take(4096).read_to_end(&mut head));
    if read.is_err() {
        return false;
    }
    if head.starts_with(&corecap_wire::pcapng::BLOCK_SHB.to_le_bytes()) {
        return corecap_wire::pcapng::shb_userappl(&head) == Some(&b"corecap"[..]);
    }
    let sessions = crate::session::format::read_sessions(path, None);
    matches!(sessions, Ok(Some(_))) || index_describes(path)
}

/// Whether the index beside `path` was made of the bytes the file holds now.
fn index_describes(path: &Path) -> bool {
    let Ok(Some((index, _, _))) = crate::read::plan::load_index(path, None) else {
        return false;
    };
    index.identity.is_some_and(|id| {
        std::fs::File::open(path)
            .and_then(|f| crate::read::frames::identity(&f, index.covered))
            .is_ok_and(|now| now == id)
    })
}

/// The time of a plain capture file's first packet.
fn first_packet_ns(path: &Path) -> Option<u64> {
    let mut r = corecap_wire::read::CaptureReader::open(path).ok()?;
    r.next_packet().ok().flatten().map(|p| p.ts_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("corecap-retain-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("dir");
        d
    }

    /// Issue 40: retention leases every folder it deletes from (the spool and the
    /// recording), not only the first: a query reading the second folder keeps its files.
    #[test]
    fn test_issue40_each_folder_is_leased_before_a_deletion_in_it() {
        let top = scratch("two");
        let (spool, record) = (top.join("spool"), top.join("record"));
        for d in [&spool, &record] {
            std::fs::create_dir(d).expect("dir");
        }
        let files = [
            (spool.join("a.pcapng"), 1u64),
            (record.join("b.pcapng"), 2),
            (spool.join("c.pcapng"), 3),
        ];
        for (p, _) in &files {
            std::fs::write(p, [0u8; 100]).expect("file");
        }
        let r = Retention::new(150);
        r.adopt(files.iter().map(|(p, t)| (p.clone(), 100, *t)).collect());
        // A query reads the recording folder.
        let reader = corecap_linux::direct::Lease::shared(&record, true).expect("lease");
        let gone = r.trim();
        assert_eq!(
            gone,
            vec![files[0].0.clone()],
            "only the spool's oldest file"
        );
        assert!(files[1].0.exists(), "the file the query reads stays");
        drop(reader);
        let gone = r.trim();
        assert_eq!(gone, vec![files[1].0.clone()], "once the query is done");
        assert!(files[2].0.exists());
        std::fs::remove_dir_all(&top).expect("clean");
    }
}
