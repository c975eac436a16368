//! What a query is asked and what it tells: its spec, its error and its statistics, shared
//! by the planning, the reading and the merge.

use std::io;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use crate::sealed::{KeyFile, SealError};
use serde::Serialize;

/// Largest read made at once when regions are merged.
pub(crate) const MAX_READ: u64 = 16 << 20;

/// Why a query failed (a file that cannot be answered at all, or the output).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// A file or the output failed.
    #[error("{path}: {cause}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        cause: io::Error,
    },
    /// A sealed file without a key, with the wrong key, or damaged.
    #[error("{path}: {cause}")]
    Sealed {
        /// The file.
        path: String,
        /// The cause.
        cause: SealError,
    },
    /// The filter does not compile.
    #[error("filter: {0}")]
    Filter(String),
    /// Writing the output failed.
    #[error("writing the output: {0}")]
    Output(io::Error),
    /// Something else about a file.
    #[error("{0}")]
    Other(String),
}

pub(crate) fn io_at(path: &Path) -> impl FnOnce(io::Error) -> QueryError + '_ {
    move |cause| QueryError::Io {
        path: path.display().to_string(),
        cause,
    }
}

/// What to find.
#[derive(Clone, Debug, Default)]
pub struct QuerySpec {
    /// Capture files (see [`expand_paths`]).
    pub files: Vec<PathBuf>,
    /// Window start, ns since the epoch, inclusive.
    pub from: u64,
    /// Window end, ns, exclusive (`u64::MAX`: none).
    pub to: u64,
    /// tcpdump filter expression, if any.
    pub filter: Option<String>,
    /// Key-encryption key for sealed files.
    pub kek: Option<Arc<KeyFile>>,
    /// Read every file whole, ignoring its index: to check an answer, or to time a scan.
    pub scan: bool,
    /// Give once a packet that two files both hold (the same bytes at the same nanosecond,
    /// in two files): a daemon's spool holds copies of the recording's packets (an
    /// on-demand capture on a recorded interface), and its answer gives each packet once.
    pub once: bool,
    /// Only the packets of these connections, each within its first and last packet
    /// ([`super::narrow::narrow`] sets it).
    pub sessions: Option<Arc<super::session_match::SessionMatch>>,
    /// Recording folders the files were found in: the reach is stated over them too, even
    /// when no file is left ([`super::reach`]).
    pub folders: Vec<PathBuf>,
    /// Whether the answer states its reach (not for a capture's own download).
    pub reach: bool,
}

/// What a query did.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct QueryStats {
    /// Packets written.
    pub packets: u64,
    /// Files considered.
    pub files: u64,
    /// Bytes of capture files read.
    pub bytes_read: u64,
    /// Bytes of all capture files.
    pub bytes_total: u64,
    /// Regions read.
    pub regions_read: u64,
    /// Regions in the indexes of the files.
    pub regions_total: u64,
    /// Files answered from their index.
    pub files_indexed: u64,
    /// Files scanned whole (no index, or an unusable one).
    pub files_scanned: u64,
    /// Files whose readable part ended early (cut short or damaged).
    pub files_truncated: u64,
    /// Files still being written, read up to their last whole block.
    pub files_live: u64,
    /// Files left unopened because their folder's catalog puts them outside the window.
    pub files_pruned: u64,
    /// Files not answered because the filter does not apply to their link type.
    pub files_refused: u64,
    /// Packets given once though two files held them ([`QuerySpec::once`]).
    pub duplicates: u64,
    /// Bytes of sidecar indexes read.
    pub index_bytes: u64,
    /// One line per notable event (a damaged index, a file cut short), and the reach's.
    pub notes: Vec<String>,
    /// Which part of the window is on record, and why the rest is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reach: Option<super::reach::Reach>,
    /// The answer was stopped before its end (a signal): whole, but cut short.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
}
