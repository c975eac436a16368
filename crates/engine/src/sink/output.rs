//! Where a capture file's bytes go: a file or standard output, written in whole blocks.
//!
//! The writers append complete pcap/pcapng blocks to an in-memory buffer; [`Output::commit`]
//! writes it out in whole multiples of [`COMMIT_BYTES`], so every write to the file is
//! page-aligned (the page cache then never has to merge a partial page), and keeps the
//! remainder for the next commit. Each commit also records where the last whole block
//! ends. If a write fails (a full disk), the file is cut back to the last block boundary
//! already on disk, so it always ends on a whole block and stays readable, and
//! [`Output::lost`] tells how many packets that cut removed.
//!
//! A sealed output ([`super::sealed`]) writes its header at creation and then each commit
//! as one encrypted chunk: the buffer keeps [`CHUNK_HEAD`] bytes free at its front, so a
//! chunk is sealed in place and written with one call, and every chunk ends on a block.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::sealed::{SealConfig, Sealer, CHUNK_HEAD};

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
    /// The chunk sealer of a sealed file.
    seal: Option<Sealer>,
    /// Bytes kept free at the front of `buf` (the chunk head of a sealed file).
    head: usize,
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
    /// Creates (truncates) a file, or standard output for `-`; sealed if `seal` is given,
    /// in which case the file header (with the wrapped data key) is written at once.
    pub fn create(path: &Path, seal: Option<&SealConfig>) -> io::Result<Self> {
        let target = if path == Path::new("-") {
            Target::Stdout(io::stdout())
        } else {
            Target::File(File::create(path)?, path.to_owned())
        };
        let mut out = Self {
            target,
            buf: Vec::with_capacity(2 * COMMIT_BYTES + 65536),
            committed: 0,
            safe: (0, 0),
            pending: None,
            lost: 0,
            seal: None,
            head: 0,
        };
        if let Some(cfg) = seal {
            let (sealer, header) = Sealer::new(cfg).map_err(|e| io::Error::other(e.to_string()))?;
            out.write_target(&header)?;
            out.committed = header.len() as u64;
            out.safe = (out.committed, 0);
            out.seal = Some(sealer);
            out.head = CHUNK_HEAD;
            out.buf.resize(CHUNK_HEAD, 0);
        }
        Ok(out)
    }

    fn write_target(&mut self, b: &[u8]) -> io::Result<()> {
        match &mut self.target {
            Target::File(f, _) => f.write_all(b),
            Target::Stdout(s) => s.write_all(b).and_then(|_| s.flush()),
        }
    }

    /// Whether enough is buffered that a commit is due.
    pub fn due(&self) -> bool {
        self.buf.len() - self.head >= COMMIT_BYTES
    }

    /// Bytes committed plus buffered.
    pub fn len(&self) -> u64 {
        self.committed + (self.buf.len() - self.head) as u64
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
        if self.seal.is_some() {
            return self.commit_sealed(packets, all, false);
        }
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
                self.cut_back(packets);
                Err(e)
            }
        }
    }

    /// Seals everything buffered as one chunk (a chunk ends on a block, as a commit is
    /// called right after one) and writes it; `last` marks the final chunk of the file.
    fn commit_sealed(&mut self, packets: u64, all: bool, last: bool) -> io::Result<()> {
        let data = self.buf.len() - CHUNK_HEAD;
        if (data == 0 && !last) || (!all && data < COMMIT_BYTES) {
            return Ok(());
        }
        let sealer = self.seal.as_mut().expect("sealed output");
        sealer.seal(&mut self.buf, last);
        let mut chunk = std::mem::take(&mut self.buf);
        let r = self.write_target(&chunk);
        chunk.truncate(CHUNK_HEAD);
        self.buf = chunk;
        match r {
            Ok(()) => {
                self.committed += (data + CHUNK_HEAD + super::sealed::TAG) as u64;
                self.safe = (self.committed, packets);
                Ok(())
            }
            Err(e) => {
                if let Some(s) = self.seal.as_mut() {
                    s.unseal_last();
                }
                self.cut_back(packets);
                Err(e)
            }
        }
    }

    /// After a failed write: cuts the file back to the last whole block on disk and counts
    /// the packets that removed.
    fn cut_back(&mut self, packets: u64) {
        self.lost = packets - self.safe.1;
        if let Target::File(f, _) = &mut self.target {
            let _ = f.set_len(self.safe.0);
            let _ = std::io::Seek::seek(f, io::SeekFrom::Start(self.safe.0));
        }
        self.committed = self.safe.0;
    }

    /// Commits everything and syncs to disk (files only).
    pub fn close(&mut self, packets: u64) -> io::Result<()> {
        if self.seal.is_some() {
            self.commit_sealed(packets, true, true)?;
        } else {
            self.commit(packets, true)?;
        }
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
