//! The error type of this crate: what failed, on which interface, with the errno.

use std::fmt;
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
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    what: String,
    iface: Option<String>,
    source: Option<io::Error>,
}

/// Shows the context only (what failed, on which interface); the kernel's message is the
/// [`source`](std::error::Error::source). [`error_chain`] or anyhow's `{:#}` show both.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)?;
        if let Some(i) = &self.iface {
            write!(f, " on {i}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|s| s as _)
    }
}

/// An error and each of its sources, joined by `": "`, as anyhow's `{:#}` prints them: for a
/// place that keeps an error as a string.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        next = cause.source();
    }
    s
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
        Self {
            kind,
            what: what.into(),
            iface: None,
            source: Some(source),
        }
    }

    /// Builds an error of a given kind with a message.
    pub fn new(kind: ErrorKind, what: impl Into<String>) -> Self {
        Self {
            kind,
            what: what.into(),
            iface: None,
            source: None,
        }
    }

    /// Names the interface the error is about (once).
    pub fn on(mut self, iface: &str) -> Self {
        if self.iface.is_none() && !self.what.contains(iface) {
            self.iface = Some(iface.to_owned());
        }
        self
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The errno, if the error came from a system call.
    pub fn errno(&self) -> Option<i32> {
        self.source.as_ref().and_then(|s| s.raw_os_error())
    }
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_source_is_the_io_error() {
        let e = Error::from_io(
            "opening the ring",
            io::Error::from_raw_os_error(libc::ENOMEM),
        );
        let io = io::Error::from_raw_os_error(libc::ENOMEM).to_string();
        assert_eq!(e.kind(), ErrorKind::RingMemory);
        assert_eq!(e.to_string(), "opening the ring");
        let source = std::error::Error::source(&e).expect("io error as source");
        assert_eq!(source.to_string(), io);
        assert_eq!(error_chain(&e), format!("opening the ring: {io}"));
    }

    #[test]
    fn test_chain_names_the_interface() {
        let e = Error::from_io("binding", io::Error::other("no such device")).on("eth9");
        assert_eq!(e.to_string(), "binding on eth9");
        assert_eq!(error_chain(&e), "binding on eth9: no such device");
        let plain = Error::new(ErrorKind::Filter, "bad filter");
        assert!(std::error::Error::source(&plain).is_none());
        assert_eq!(error_chain(&plain), "bad filter");
    }
}
