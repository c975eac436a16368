//! A recording folder's catalog: one row per capture file.
//!
//! The catalog is an accelerator, never the record: the files and their indexes are. So
//! nothing the disk does to it may cost a packet or a query.
//!
//! - **A rollback journal, not a WAL** (`journal_mode=DELETE`). SQLite's WAL index is a
//!   file beside the catalog (`-shm`) that every connection maps. SQLite grows it by
//!   writing the last byte of each page, so on a filesystem whose blocks are smaller than
//!   a page the rest of the page stays a hole; on a full disk the first store through the
//!   mapping cannot get a block and the process dies of SIGBUS: the recorder, and every
//!   query of the folder until space is freed. A rollback journal maps nothing, so every
//!   failure is an error code. It also takes no space between writes (the journal lives
//!   only during a transaction, a few pages), where a WAL and its index stayed (32 KiB of
//!   index, up to 4 MB of log) on filesystems of a few MiB.
//!
//!   What a rollback journal gives up is WAL's "readers never block the writer": a
//!   commit waits (the busy timeout) for readers' shared locks. A reader holds one for a
//!   single SELECT of the folder's rows, and disk writers of one process take turns as
//!   they did under WAL, so several disk writers still update one folder's catalog while
//!   queries in other processes read it. Rejected: `locking_mode=EXCLUSIVE` keeps the WAL
//!   index in heap memory but locks every other process out for the writer connection's
//!   life; `immutable` readers may read a checkpoint half done; pre-sizing the `-shm` is
//!   undone by SQLite, which truncates it whenever a first connection opens it.
//! - **An error is not damage.** Only SQLite's "corrupt" and "not a database" move a
//!   catalog aside (`.corecap-catalog.damaged`, then `.damaged-2` ..., never over an
//!   earlier one), with its journal, before a new one is made from the files. A full
//!   disk, an I/O error or a lock held past the busy timeout returns the error and leaves
//!   the catalog as it is: the writer goes on without it and brings it up to date from
//!   the files later ([`crate::catalog_update::refresh`]); a query reads the files.
//! - **An earlier version's WAL catalog** is converted by the next writer, which opens it
//!   with `locking_mode=EXCLUSIVE` first, so that even this read keeps the WAL index in
//!   heap memory. A reader does not open one (it would map the `-shm`): the files answer
//!   until a writer has converted it.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension};

/// The catalog's file name in a recording folder (hidden: queries and recovery skip it).
pub const CATALOG: &str = ".corecap-catalog";

/// Removes the catalog of `dir` and the files SQLite keeps beside it (its journal, and a
/// WAL and its shared memory from older versions): for a catalog this run made and a
/// failed start leaves behind. Nothing else of the folder is touched.
pub fn discard(dir: &Path) {
    for ext in ["", "-journal", "-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.join(format!("{CATALOG}{ext}")));
    }
}

/// What went wrong with a catalog.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// SQLite refused an operation (a damaged file, a full disk, a lock held too long).
    #[error("catalog {path}: {source}")]
    Sqlite {
        /// The catalog.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The file system refused (reading the catalog's header, moving a damaged one aside).
    #[error("catalog {path}: {source}")]
    Io {
        /// The catalog.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The catalog is in WAL mode (an earlier version's) and could not be converted, or is
    /// not read as it is (see the module doc).
    #[error("catalog {path}: in WAL mode, left by an earlier corecap; the next recording in the folder converts it")]
    Wal {
        /// The catalog.
        path: PathBuf,
    },
}

impl Error {
    /// Whether the catalog itself is damaged (SQLite says corrupt, or not a database), as
    /// opposed to a refusal of the disk or of another connection.
    pub fn is_damage(&self) -> bool {
        let Error::Sqlite {
            source: rusqlite::Error::SqliteFailure(e, _),
            ..
        } = self
        else {
            return false;
        };
        matches!(e.code, ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
    }
}

/// Held while a thread of this process decides whether the catalog is new or damaged, so
/// two disk writers never both make one or move one aside.
static OPENING: Mutex<()> = Mutex::new(());

/// The state of a capture file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Still being written (under its hidden name).
    Writing,
    /// Whole: closed, cut to its length, synced and named.
    Whole,
    /// Recovered at a start after the writer died.
    Recovered,
}

impl State {
    fn as_str(self) -> &'static str {
        match self {
            State::Writing => "writing",
            State::Whole => "whole",
            State::Recovered => "recovered",
        }
    }

    fn parse(s: &str) -> State {
        match s {
            "writing" => State::Writing,
            "recovered" => State::Recovered,
            _ => State::Whole,
        }
    }
}

/// One capture file of the folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its name in the folder.
    pub name: String,
    /// Its state.
    pub state: State,
    /// Earliest and latest packet timestamps, ns since the epoch (None: not known, e.g. a
    /// file written without an index; a query then opens it).
    pub time: Option<(u64, u64)>,
    /// Packets in it.
    pub packets: u64,
    /// Its bytes.
    pub bytes: u64,
    /// Its index's bytes (0: none).
    pub index_bytes: u64,
    /// What ties the entry to the file's bytes, as its index has it (the covered length
    /// and [`corecap_index::Identity`]); an entry is believed only while the file still
    /// has them. None: never believed (the file is opened).
    pub identity: Option<(u64, corecap_index::Identity)>,
}

impl Entry {
    /// Whether `file` is still the one this entry describes: the same length and the same
    /// identity of its covered bytes (two small reads), as a query checks an index. A file
    /// replaced by one of the same length (fixed rotation sizes make that common) is not.
    pub fn describes(&self, file: &std::fs::File) -> bool {
        let Some((covered, id)) = self.identity else {
            return false;
        };
        // A compressed recording's covered bytes are of its decompressed stream: the
        // identity's reads fail past its end, as they do past a plain file's.
        file.metadata().is_ok_and(|m| m.len() == self.bytes)
            && covered > 0
            && crate::read::frames::identity(file, covered).is_ok_and(|now| now == id)
    }

    /// Whether some packet of the file may lie in `from..to`.
    pub fn overlaps(&self, from: u64, to: u64) -> bool {
        self.time.is_none_or(|(a, b)| b >= from && a < to)
    }
}

/// An open catalog.
#[derive(Debug)]
pub struct Catalog {
    conn: Connection,
    path: PathBuf,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS files (
    name TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    first_ns INTEGER,
    last_ns INTEGER,
    packets INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    index_bytes INTEGER NOT NULL,
    covered INTEGER,
    id_first INTEGER,
    id_last INTEGER
);";

/// The columns that tie an entry to its file's bytes, added to a catalog made before them
/// (its entries have none, so they are not believed until written again).
const IDENTITY_COLUMNS: [&str; 3] = ["covered", "id_first", "id_last"];

/// The columns an entry is read from, in [`row_entry`]'s order.
const COLUMNS: &str =
    "name, state, first_ns, last_ns, packets, bytes, index_bytes, covered, id_first, id_last";

impl Catalog {
    fn sqlite<'a>(path: &'a Path) -> impl Fn(rusqlite::Error) -> Error + 'a {
        move |source| Error::Sqlite {
            path: path.to_owned(),
            source,
        }
    }

    /// Opens the catalog of `dir` for writing, making it if it is not there. A catalog that
    /// SQLite finds damaged is moved aside (see the module doc) and a new one made; `true`
    /// in the result then says it must be filled from the files
    /// ([`Catalog::open_or_rebuild`] does). Any other error leaves the catalog as it is.
    pub fn open(dir: &Path) -> Result<(Catalog, bool), Error> {
        let _one = OPENING.lock().unwrap_or_else(PoisonError::into_inner);
        let path = dir.join(CATALOG);
        // An empty file is a catalog made and never written: it is filled like a new one.
        let fresh = std::fs::metadata(&path).map_or(true, |m| m.len() == 0);
        match Self::open_at(&path) {
            Ok(c) => Ok((c, fresh)),
            Err(e) if e.is_damage() && !fresh => {
                move_aside(dir, &path)?;
                Self::open_at(&path)
                    .map(|c| (c, true))
                    .inspect_err(|_| remove_if_empty(&path))
            }
            Err(e) => {
                // A catalog this open made (the disk was full): nothing is left of it.
                remove_if_empty(&path);
                Err(e)
            }
        }
    }

    fn open_at(path: &Path) -> Result<Catalog, Error> {
        let e = Self::sqlite(path);
        let conn = Connection::open(path).map_err(&e)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(&e)?;
        // A rollback journal (see the module doc). An earlier version's WAL catalog is read
        // with its WAL index in heap memory (exclusive locking), then converted; locking
        // goes back to normal at the next access.
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE")
            .map_err(&e)?;
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "DELETE", |r| r.get(0))
            .map_err(&e)?;
        conn.pragma_update(None, "locking_mode", "NORMAL")
            .map_err(&e)?;
        if !mode.eq_ignore_ascii_case("delete") {
            return Err(Error::Wal {
                path: path.to_owned(),
            });
        }
        // The WAL index an earlier version left is no one's now.
        let _ = std::fs::remove_file(sibling(path, "-shm"));
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(&e)?;
        conn.execute_batch(SCHEMA).map_err(&e)?;
        add_identity_columns(&conn).map_err(&e)?;
        // A file that is not a database fails only when read.
        conn.query_row("SELECT count(*) FROM files", [], |_| Ok(()))
            .map_err(&e)?;
        Ok(Catalog {
            conn,
            path: path.to_owned(),
        })
    }

    /// Opens the catalog of `dir` to read it; None when there is none (or it cannot be
    /// read: the files themselves still answer; [`Catalog::try_read`] says why).
    pub fn read(dir: &Path) -> Option<Catalog> {
        Self::try_read(dir).ok().flatten()
    }

    /// Opens the catalog of `dir` to read it: None when there is none (or it is empty), an
    /// error when it is there but cannot be read. It is never written, and never mapped:
    /// a catalog in WAL mode is not opened (see the module doc).
    pub fn try_read(dir: &Path) -> Result<Option<Catalog>, Error> {
        use std::io::Read;
        let path = dir.join(CATALOG);
        let io = |source| Error::Io {
            path: path.clone(),
            source,
        };
        let mut head = [0u8; 20];
        let n = match std::fs::File::open(&path) {
            Ok(mut f) => f.read(&mut head).map_err(io)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(e)),
        };
        if n == 0 {
            return Ok(None);
        }
        // The file format versions at offsets 18 and 19 are 2 in WAL mode.
        if n == 20 && head[18] == 2 && head[19] == 2 {
            return Err(Error::Wal { path: path.clone() });
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let opened = Connection::open_with_flags(&path, flags).and_then(|conn| {
            conn.busy_timeout(Duration::from_secs(5))?;
            conn.query_row("SELECT count(*) FROM files", [], |_| Ok(()))?;
            Ok(conn)
        });
        let conn = opened.map_err(Self::sqlite(&path))?;
        Ok(Some(Catalog { conn, path }))
    }

    /// Opens the catalog of `dir` for writing; when it was missing or damaged, fills it
    /// from `files` (each file's entry, as its index tells it).
    pub fn open_or_rebuild(
        dir: &Path,
        files: impl FnOnce() -> Vec<Entry>,
    ) -> Result<Catalog, Error> {
        let (c, fresh) = Self::open(dir)?;
        if fresh {
            c.update(&files(), &[])?;
        }
        Ok(c)
    }

    /// Adds or replaces a file's entry.
    pub fn put(&self, e: &Entry) -> Result<(), Error> {
        put_on(&self.conn, e).map_err(Self::sqlite(&self.path))
    }

    /// Adds or replaces the entries `put` and removes those named in `gone`, all at once.
    pub fn update(&self, put: &[Entry], gone: &[String]) -> Result<(), Error> {
        let tx = self
            .conn
            .unchecked_transaction()
            .map_err(Self::sqlite(&self.path))?;
        for e in put {
            put_on(&tx, e).map_err(Self::sqlite(&self.path))?;
        }
        for name in gone {
            tx.execute("DELETE FROM files WHERE name = ?1", params![name])
                .map_err(Self::sqlite(&self.path))?;
        }
        tx.commit().map_err(Self::sqlite(&self.path))
    }

    /// Removes a file's entry (retention deleted it).
    pub fn remove(&self, name: &str) -> Result<(), Error> {
        self.conn
            .execute("DELETE FROM files WHERE name = ?1", params![name])
            .map(|_| ())
            .map_err(Self::sqlite(&self.path))
    }

    /// One file's entry.
    pub fn get(&self, name: &str) -> Result<Option<Entry>, Error> {
        self.conn
            .query_row(
                &format!("SELECT {COLUMNS} FROM files WHERE name = ?1"),
                params![name],
                row_entry,
            )
            .optional()
            .map_err(Self::sqlite(&self.path))
    }

    /// Every entry, by name.
    pub fn entries(&self) -> Result<Vec<Entry>, Error> {
        let mut st = self
            .conn
            .prepare(&format!("SELECT {COLUMNS} FROM files ORDER BY name"))
            .map_err(Self::sqlite(&self.path))?;
        let rows = st
            .query_map([], row_entry)
            .map_err(Self::sqlite(&self.path))?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(Self::sqlite(&self.path))
    }
}

/// Adds [`IDENTITY_COLUMNS`] to a catalog made before them.
fn add_identity_columns(conn: &Connection) -> rusqlite::Result<()> {
    let mut st = conn.prepare("SELECT name FROM pragma_table_info('files')")?;
    let have: Vec<String> = st
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for c in IDENTITY_COLUMNS {
        if !have.iter().any(|h| h == c) {
            conn.execute_batch(&format!("ALTER TABLE files ADD COLUMN {c} INTEGER"))?;
        }
    }
    Ok(())
}

fn row_entry(r: &rusqlite::Row<'_>) -> rusqlite::Result<Entry> {
    let first: Option<i64> = r.get(2)?;
    let last: Option<i64> = r.get(3)?;
    let covered: Option<i64> = r.get(7)?;
    let id_first: Option<i64> = r.get(8)?;
    let id_last: Option<i64> = r.get(9)?;
    let state: String = r.get(1)?;
    Ok(Entry {
        name: r.get(0)?,
        state: State::parse(&state),
        time: first.zip(last).map(|(a, b)| (a as u64, b as u64)),
        packets: r.get::<_, i64>(4)? as u64,
        bytes: r.get::<_, i64>(5)? as u64,
        index_bytes: r.get::<_, i64>(6)? as u64,
        identity: match (covered, id_first, id_last) {
            (Some(c), Some(first), Some(last)) => Some((
                c as u64,
                corecap_index::Identity {
                    first: first as u64,
                    last: last as u64,
                },
            )),
            _ => None,
        },
    })
}

fn put_on(conn: &Connection, e: &Entry) -> rusqlite::Result<()> {
    let (first, last) = e.time.map_or((None, None), |(a, b)| (Some(a), Some(b)));
    conn.execute(
        &format!(
            "INSERT OR REPLACE INTO files ({COLUMNS}) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
        ),
        params![
            e.name,
            e.state.as_str(),
            first.map(|v| v as i64),
            last.map(|v| v as i64),
            e.packets as i64,
            e.bytes as i64,
            e.index_bytes as i64,
            e.identity.map(|(c, _)| c as i64),
            e.identity.map(|(_, id)| id.first as i64),
            e.identity.map(|(_, id)| id.last as i64),
        ],
    )
    .map(|_| ())
}

/// `path` with `ext` appended (SQLite's names for a database's journal and WAL files).
fn sibling(path: &Path, ext: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(ext);
    PathBuf::from(s)
}

/// Removes the catalog at `path` if it is an empty file (made, never written).
fn remove_if_empty(path: &Path) {
    if std::fs::metadata(path).is_ok_and(|m| m.len() == 0) {
        let _ = std::fs::remove_file(path);
    }
}

/// Moves a damaged catalog aside under the first free name of `.corecap-catalog.damaged`,
/// `.damaged-2` ..., with its journal and WAL (left here, SQLite would play them into the
/// new catalog); its WAL index is removed.
fn move_aside(dir: &Path, path: &Path) -> Result<PathBuf, Error> {
    let io = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    for n in 1..1000 {
        let aside = match n {
            1 => dir.join(format!("{CATALOG}.damaged")),
            n => dir.join(format!("{CATALOG}.damaged-{n}")),
        };
        match corecap_linux::direct::rename_noreplace(path, &aside) {
            Ok(()) => {
                for ext in ["-journal", "-wal"] {
                    let from = sibling(path, ext);
                    if from.exists()
                        && corecap_linux::direct::rename_noreplace(&from, &sibling(&aside, ext))
                            .is_err()
                    {
                        let _ = std::fs::remove_file(&from);
                    }
                }
                let _ = std::fs::remove_file(sibling(path, "-shm"));
                return Ok(aside);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io(e)),
        }
    }
    Err(io(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "no free name to move the damaged catalog aside",
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("corecap-catalog-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("dir");
        d
    }

    fn entry(name: &str, t: u64) -> Entry {
        Entry {
            name: name.into(),
            state: State::Whole,
            time: Some((t, t + 10)),
            packets: 5,
            bytes: 1000,
            index_bytes: 100,
            identity: None,
        }
    }

    #[test]
    fn test_put_get_remove_and_read_only() {
        let d = dir("rw");
        let (c, fresh) = Catalog::open(&d).expect("open");
        assert!(fresh);
        c.put(&entry("a.pcapng", 100)).expect("put");
        c.put(&entry("b.pcapng", 200)).expect("put");
        let mut b = entry("b.pcapng", 300);
        b.state = State::Recovered;
        c.put(&b).expect("replace");
        c.remove("a.pcapng").expect("remove");
        let r = Catalog::read(&d).expect("readable");
        assert_eq!(r.entries().expect("entries"), vec![b.clone()]);
        assert!(r.get("a.pcapng").expect("get").is_none());
        assert!(b.overlaps(305, 400) && !b.overlaps(311, 400) && !b.overlaps(0, 300));
        let (_, fresh) = Catalog::open(&d).expect("again");
        assert!(!fresh);
        std::fs::remove_dir_all(&d).expect("clean");
    }

    #[test]
    fn test_damaged_catalog_is_moved_aside_and_rebuilt() {
        let d = dir("damaged");
        std::fs::write(
            d.join(CATALOG),
            b"this is no database, but a long enough text",
        )
        .expect("w");
        let c = Catalog::open_or_rebuild(&d, || vec![entry("x.pcapng", 1)]).expect("rebuilt");
        assert_eq!(c.entries().expect("entries").len(), 1);
        assert!(d.join(format!("{CATALOG}.damaged")).exists());
        std::fs::remove_dir_all(&d).expect("clean");
    }

    /// Issue 40: damage is moved aside, never over an earlier damaged catalog.
    #[test]
    fn test_issue40_damage_never_replaces_an_earlier_damaged_catalog() {
        let d = dir("damaged-twice");
        let first = b"the catalog damaged first, kept for a look".to_vec();
        let second = b"this is no database either, but long enough".to_vec();
        std::fs::write(d.join(format!("{CATALOG}.damaged")), &first).expect("w");
        std::fs::write(d.join(CATALOG), &second).expect("w");
        let c = Catalog::open_or_rebuild(&d, || vec![entry("x.pcapng", 1)]).expect("rebuilt");
        assert_eq!(c.entries().expect("entries").len(), 1);
        let read = |n: &str| std::fs::read(d.join(format!("{CATALOG}{n}"))).expect("aside");
        assert_eq!(read(".damaged"), first);
        assert_eq!(read(".damaged-2"), second);
        std::fs::remove_dir_all(&d).expect("clean");
    }

    /// Issue 40: a catalog SQLite cannot open for now (another connection holds it locked
    /// past the busy timeout) is not damaged: the error is returned and the catalog kept.
    #[test]
    fn test_issue40_a_locked_catalog_is_not_moved_aside() {
        let d = dir("locked");
        let (c, _) = Catalog::open(&d).expect("open");
        c.put(&entry("a.pcapng", 100)).expect("put");
        drop(c);
        let holder = Connection::open(d.join(CATALOG)).expect("open");
        holder
            .execute_batch("PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE;")
            .expect("lock");
        assert!(
            Catalog::open(&d).is_err(),
            "a locked catalog cannot be written"
        );
        drop(holder);
        assert!(!d.join(format!("{CATALOG}.damaged")).exists());
        let r = Catalog::read(&d).expect("readable");
        assert_eq!(r.entries().expect("entries"), vec![entry("a.pcapng", 100)]);
        std::fs::remove_dir_all(&d).expect("clean");
    }

    /// Issue 40: the catalog maps no shared memory, so no full disk can fault a writer or a
    /// reader: no `-shm` (and no `-wal`) is beside it while a writer and a reader both have
    /// it open, and a catalog an earlier version left in WAL mode is converted.
    #[test]
    fn test_issue40_the_catalog_maps_no_shared_memory() {
        let d = dir("no-shm");
        {
            let old = Connection::open(d.join(CATALOG)).expect("open");
            old.pragma_update(None, "journal_mode", "WAL").expect("wal");
            old.execute_batch(SCHEMA).expect("schema");
        }
        let (c, fresh) = Catalog::open(&d).expect("open");
        assert!(!fresh);
        c.put(&entry("a.pcapng", 100)).expect("put");
        let r = Catalog::read(&d).expect("readable");
        assert_eq!(r.entries().expect("entries").len(), 1);
        c.put(&entry("b.pcapng", 200))
            .expect("put while a reader is open");
        assert_eq!(r.entries().expect("entries").len(), 2);
        for ext in ["-shm", "-wal"] {
            assert!(!d.join(format!("{CATALOG}{ext}")).exists(), "{ext}");
        }
        std::fs::remove_dir_all(&d).expect("clean");
    }
}
