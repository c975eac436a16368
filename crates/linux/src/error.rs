//! The error type of this crate: what failed, on which interface, with the errno.

use std::io;

/// What kind of operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The interface does not exist.
    NoSuchInterface,
    /// The caller lacks CAP_NET_RAW (or CAP_NET_ADMIN, CAP_BPF).
    Permission,
    /// The kernel could not allocate the ring.
    RingMemory,
    /// A filter did not compile or was refused by the kernel.
    Filter,
    /// The kernel lacks a feature.
    Unsupported,
    /// Any other system call failure.
    Sys,
}

/// An error from a kernel interface, with the context a user can act on.
#[derive(Debug, thiserror::Error)]
#[error("{what}{}: {source}", iface.as_deref().map(|i| format!(" on {i}")).unwrap_or_default())]
pub struct Error {
    kind: ErrorKind,
    what: String,
    iface: Option<String>,
    #[source]
    source: io::Error,
}

impl Error {
    /// Builds an error from the last errno.
    pub fn last(what: impl Into<String>) -> Self {
        Self::from_io(what, io::Error::last_os_error())
    }

    /// Builds an error from an io::Error, classifying the errno.
    pub fn from_io(what: impl Into<String>, source: io::Error) -> Self {
        let kind = match source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => ErrorKind::Permission,
            Some(libc::ENODEV) | Some(libc::ENXIO) => ErrorKind::NoSuchInterface,
            Some(libc::ENOMEM) => ErrorKind::RingMemory,
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EAFNOSUPPORT) => {
                ErrorKind::Unsupported
            }
            _ => ErrorKind::Sys,
        };
        Self { kind, what: what.into(), iface: None, source }
    }

    /// Builds an error of a given kind with a message.
    pub fn new(kind: ErrorKind, what: impl Into<String>) -> Self {
        let what = what.into();
        Self { kind, source: io::Error::other(what.clone()), what, iface: None }
    }

    /// Names the interface the error is about.
    pub fn on(mut self, iface: &str) -> Self {
        self.iface = Some(iface.to_owned());
        self
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The errno, if the error came from a system call.
    pub fn errno(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;
