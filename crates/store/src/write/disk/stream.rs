//! A capture written in order to a stream: standard output, or a FIFO (Wireshark's extcap
//! pipe). It is never created, cut or renamed.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// A stream that a capture is written to in order: standard output, or a FIFO.
pub struct Stream {
    pub(super) out: Box<dyn Write + Send>,
    /// What errors call it: "standard output", or the FIFO's path.
    pub(super) name: String,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream").field("name", &self.name).finish()
    }
}

impl Stream {
    /// Standard output.
    pub fn stdout() -> Self {
        Self {
            out: Box::new(io::stdout()),
            name: "standard output".into(),
        }
    }

    /// Opens an existing FIFO for writing; like any writer of a FIFO, this waits until it
    /// has a reader.
    pub fn fifo(path: &Path) -> io::Result<Self> {
        let f = fs::OpenOptions::new().write(true).open(path).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot open {}: {e}", path.display()))
        })?;
        Ok(Self {
            out: Box::new(f),
            name: path.display().to_string(),
        })
    }
}

/// Whether `path` names an existing FIFO (written as a [`Stream`], not as a file).
pub fn is_fifo(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}
