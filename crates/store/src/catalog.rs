//! A recording folder's catalog: one row per capture file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

/// The catalog's file name in a recording folder (hidden: queries and recovery skip it).
pub const CATALOG: &str = ".corecap-catalog";

/// What went wrong with a catalog.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// SQLite refused an operation (a damaged file, a full disk).
    #[error("catalog {path}: {source}")]
    Sqlite {
        /// The catalog.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The file system refused (moving a damaged catalog aside).
    #[error("catalog {path}: {source}")]
    Io {
        /// The catalog.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

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
        file.metadata().is_ok_and(|m| m.len() == self.bytes)
            && covered > 0
            && covered <= self.bytes
            && corecap_index::Identity::of_file(file, covered).is_ok_and(|now| now == id)
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
    /// SQLite cannot read is moved aside (`.corecap-catalog.damaged`) and a new one made;
    /// `true` in the result then says it must be filled from the files
    /// ([`Catalog::open_or_rebuild`] does).
    pub fn open(dir: &Path) -> Result<(Catalog, bool), Error> {
        let path = dir.join(CATALOG);
        let fresh = !path.exists();
        match Self::open_at(&path) {
            Ok(c) => Ok((c, fresh)),
            Err(Error::Sqlite { .. }) if !fresh => {
                let aside = dir.join(format!("{CATALOG}.damaged"));
                std::fs::rename(&path, &aside).map_err(|source| Error::Io {
                    path: path.clone(),
                    source,
                })?;
                for ext in ["-wal", "-shm"] {
                    let _ = std::fs::remove_file(dir.join(format!("{CATALOG}{ext}")));
                }
                Ok((Self::open_at(&path)?, true))
            }
            Err(e) => Err(e),
        }
    }

    fn open_at(path: &Path) -> Result<Catalog, Error> {
        let e = Self::sqlite(path);
        let conn = Connection::open(path).map_err(&e)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(&e)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(&e)?;
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
    /// read: the files themselves still answer).
    pub fn read(dir: &Path) -> Option<Catalog> {
        let path = dir.join(CATALOG);
        if !path.exists() {
            return None;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&path, flags).ok()?;
        conn.busy_timeout(Duration::from_secs(5)).ok()?;
        Some(Catalog { conn, path })
    }

    /// Opens the catalog of `dir` for writing; when it was missing or damaged, fills it
    /// from `files` (each file's entry, as its index tells it).
    pub fn open_or_rebuild(
        dir: &Path,
        files: impl FnOnce() -> Vec<Entry>,
    ) -> Result<Catalog, Error> {
        let (c, fresh) = Self::open(dir)?;
        if fresh {
            for e in files() {
                c.put(&e)?;
            }
        }
        Ok(c)
    }

    /// Adds or replaces a file's entry.
    pub fn put(&self, e: &Entry) -> Result<(), Error> {
        let (first, last) = e.time.map_or((None, None), |(a, b)| (Some(a), Some(b)));
        self.conn
            .execute(
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
            .map_err(Self::sqlite(&self.path))
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
}
