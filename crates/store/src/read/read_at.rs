//! A file read from an offset on, by `pread`: the plain and sealed streams and the frames
//! of a compressed file read through it, none moving a shared file position.

use std::fs::File;
use std::io::{self, Read};

/// Reads a file from an offset on, by `pread`.
pub(crate) struct ReadAt<'a>(pub(crate) &'a File, pub(crate) u64);

impl Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let n = self.0.read_at(buf, self.1)?;
        self.1 += n as u64;
        Ok(n)
    }
}
