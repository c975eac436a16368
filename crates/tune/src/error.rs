//! The error type of the tune crate.

use std::io;
use std::path::{Path, PathBuf};

/// What went wrong while reading the machine or applying a plan.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file under the root could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The interface is not in the root's /sys/class/net.
    #[error("no such interface: {iface} (not in {dir}/sys/class/net)")]
    NoInterface {
        /// The interface asked for.
        iface: String,
        /// The root directory.
        dir: String,
    },
    /// A file had contents tune cannot parse.
    #[error("cannot parse {what}: {value:?}")]
    Parse {
        /// Which file or field.
        what: String,
        /// What it held.
        value: String,
    },
    /// An ethtool ioctl failed.
    #[error(transparent)]
    Kernel(#[from] corecap_linux::Error),
    /// A request tune cannot carry out (no saved state, for example).
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    pub(crate) fn io(path: &Path, source: io::Error) -> Self {
        Self::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;
