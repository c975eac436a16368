//! Where a capture file's bytes go: a file or standard output, written in whole blocks.
//!
//! The writers append complete pcap/pcapng blocks to an in-memory buffer; [`Output::commit`]
//! writes the buffer out. If a write fails (a full disk), the file is cut back to the last
//! committed length, so it always ends on a block boundary and stays readable.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Buffered output that commits whole blocks.
#[derive(Debug)]
pub struct Output {
    target: Target,
    buf: Vec<u8>,
    committed: u64,
}

#[derive(Debug)]
enum Target {
    File(File, PathBuf),
    Stdout(io::Stdout),
}

/// Bytes buffered before a commit is due: small enough that the buffer stays in the
/// core's L2 cache between the copy in and the write out.
pub const COMMIT_BYTES: usize = 64 << 10;

impl Output {
    /// Creates (truncates) a file, or standard output for `-`.
    pub fn create(path: &Path) -> io::Result<Self> {
        let target = if path == Path::new("-") {
            Target::Stdout(io::stdout())
        } else {
            Target::File(File::create(path)?, path.to_owned())
        };
        Ok(Self {
            target,
            buf: Vec::with_capacity(COMMIT_BYTES + 65536),
            committed: 0,
        })
    }

    /// Whether enough is buffered that a commit is due.
    pub fn due(&self) -> bool {
        self.buf.len() >= COMMIT_BYTES
    }

    /// Bytes committed plus buffered.
    pub fn len(&self) -> u64 {
        self.committed + self.buf.len() as u64
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The file path, or None for standard output.
    pub fn path(&self) -> Option<&Path> {
        match &self.target {
            Target::File(_, p) => Some(p),
            Target::Stdout(_) => None,
        }
    }

    /// Writes the buffered blocks out. On failure the file is cut back to its last
    /// committed length and the buffered blocks are discarded.
    pub fn commit(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let r = match &mut self.target {
            Target::File(f, _) => f.write_all(&self.buf),
            Target::Stdout(s) => s.write_all(&self.buf).and_then(|_| s.flush()),
        };
        match r {
            Ok(()) => {
                self.committed += self.buf.len() as u64;
                self.buf.clear();
                Ok(())
            }
            Err(e) => {
                self.buf.clear();
                if let Target::File(f, _) = &mut self.target {
                    let _ = f.set_len(self.committed);
                    let _ = std::io::Seek::seek(f, io::SeekFrom::Start(self.committed));
                }
                Err(e)
            }
        }
    }

    /// Commits and syncs to disk (files only).
    pub fn close(&mut self) -> io::Result<()> {
        self.commit()?;
        if let Target::File(f, _) = &mut self.target {
            f.sync_data()?;
        }
        Ok(())
    }
}

impl Write for Output {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
