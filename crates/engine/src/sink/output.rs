//! Where a capture file's bytes go: a file or standard output, written in whole blocks.
//!
//! The writers append complete pcap/pcapng blocks to an in-memory buffer; [`Output::commit`]
//! writes it out in whole multiples of [`COMMIT_BYTES`], so every write to the file is
//! page-aligned (the page cache then never has to merge a partial page), and keeps the
//! remainder for the next commit. Each commit also records where the last whole block
//! ends. If a write fails (a full disk), the file is cut back to the last block boundary
//! already on disk, so it always ends on a whole block and stays readable, and
//! [`Output::lost`] tells how many packets that cut removed.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Buffered output that commits whole blocks.
#[derive(Debug)]
pub struct Output {
    target: Target,
    buf: Vec<u8>,
    /// Bytes written to the target.
    committed: u64,
    /// The last block boundary (file length, packets before it) known to be on disk.
    safe: (u64, u64),
    /// A block boundary past `committed`, with the packets before it.
    pending: Option<(u64, u64)>,
    /// Packets removed by cutting the file back after a failed write.
    lost: u64,
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
            buf: Vec::with_capacity(2 * COMMIT_BYTES + 65536),
            committed: 0,
            safe: (0, 0),
            pending: None,
            lost: 0,
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

    /// Packets removed by cutting the file back after a failed write.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Writes out the buffered blocks. Call it right after a whole block, with the number of
    /// packets written so far. Files get whole multiples of [`COMMIT_BYTES`] unless `all`.
    /// On failure the file is cut back to its last block boundary on disk.
    pub fn commit(&mut self, packets: u64, all: bool) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let boundary = (self.committed + self.buf.len() as u64, packets);
        let n = match self.target {
            Target::File(..) if !all => self.buf.len() / COMMIT_BYTES * COMMIT_BYTES,
            _ => self.buf.len(),
        };
        if n == 0 {
            return Ok(());
        }
        let r = match &mut self.target {
            Target::File(f, _) => f.write_all(&self.buf[..n]),
            Target::Stdout(s) => s.write_all(&self.buf[..n]).and_then(|_| s.flush()),
        };
        match r {
            Ok(()) => {
                self.committed += n as u64;
                self.buf.drain(..n);
                for b in [self.pending.take(), Some(boundary)].into_iter().flatten() {
                    if b.0 <= self.committed {
                        self.safe = b;
                    } else {
                        self.pending = Some(b);
                    }
                }
                Ok(())
            }
            Err(e) => {
                self.buf.clear();
                self.pending = None;
                self.lost = packets - self.safe.1;
                if let Target::File(f, _) = &mut self.target {
                    let _ = f.set_len(self.safe.0);
                    let _ = std::io::Seek::seek(f, io::SeekFrom::Start(self.safe.0));
                }
                self.committed = self.safe.0;
                Err(e)
            }
        }
    }

    /// Commits everything and syncs to disk (files only).
    pub fn close(&mut self, packets: u64) -> io::Result<()> {
        self.commit(packets, true)?;
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
