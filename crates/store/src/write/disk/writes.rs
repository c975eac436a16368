//! The writes of a file: submitted through the io_uring with space reserved ahead, reaped,
//! made durable, and what a failed one (a full disk) leaves.

use std::io::{self, Write};
use std::sync::atomic::Ordering;

use corecap_linux::direct::{AlignedBuf, Done};

use super::{DiskWriter, Target, RESERVE_MAX, RESERVE_MIN, TAG_STAGE};

impl DiskWriter {
    /// Submits one write (padding a direct file's last, unaligned one), after space is
    /// reserved and a slot is free.
    pub(super) fn write(&mut self, mut buf: AlignedBuf, len: usize, off: u64, tag: u64) {
        let align = self.align;
        let Some(cur) = self.cur.as_mut() else { return };
        if let Some(r) = &self.cfg.retention {
            // The file grows by what this write adds past its old end.
            let grow = (off + len as u64).saturating_sub(cur.end);
            r.grow_open(grow);
        }
        cur.end = off + len as u64;
        let file = match &mut cur.target {
            Target::File { file, .. } => &*file,
            Target::Stream(st) => {
                let result = st
                    .out
                    .write_all(&buf.bytes()[..len])
                    .and_then(|_| st.out.flush())
                    .map(|_| len);
                self.scratch.push(Done {
                    tag,
                    buf,
                    len,
                    offset: off,
                    result,
                });
                self.complete();
                return;
            }
        };
        let mut wlen = len;
        if file.is_direct() && !len.is_multiple_of(align) {
            wlen = len.div_ceil(align) * align;
            buf.bytes_mut()[len..wlen].fill(0);
        }
        let overlaps = off < cur.pad_end;
        if wlen > len || !file.is_direct() {
            cur.pad_end = cur.pad_end.max(off + wlen as u64);
        }
        if overlaps {
            // Writes in flight may land in any order: the one that this rewrites goes first.
            self.drain();
        }
        let Some(cur) = self.cur.as_mut() else { return };
        let Target::File { file: _, .. } = &cur.target else {
            return;
        };
        if cur.reserved != u64::MAX && off + wlen as u64 > cur.reserved {
            // fallocate waits for the file's direct writes in flight (inode_dio_wait),
            // whose completions this thread reaps: reserving with writes in flight hung
            // writers on ext4 under load. So the writes in flight end first.
            self.drain();
            let Some(cur) = self.cur.as_mut() else { return };
            let Target::File { file, .. } = &cur.target else {
                return;
            };
            let end = off + wlen as u64;
            let want = end + end.clamp(RESERVE_MIN, RESERVE_MAX);
            cur.reserved = match file.reserve(want) {
                Ok(()) => want,
                Err(_) => u64::MAX,
            };
        }
        while !self.ring.has_room() {
            self.reap(1);
        }
        let Some(cur) = self.cur.as_ref() else { return };
        let Target::File { file, .. } = &cur.target else {
            return;
        };
        if let Err(buf) = self.ring.submit(file.file(), buf, wlen, off, tag) {
            self.scratch.push(Done {
                tag,
                buf,
                len: wlen,
                offset: off,
                result: Err(io::Error::other("the write ring refused a write")),
            });
            self.complete();
        }
        self.reap(0);
    }

    /// Waits for every write in flight (or for the ring to give them up as stalled).
    pub(super) fn drain(&mut self) {
        while self.ring.in_flight() > 0 {
            let n = self.ring.in_flight();
            self.reap(n);
        }
    }

    /// Takes finished writes: recycles buffers, advances the durable prefix, notes errors.
    pub(super) fn reap(&mut self, min: usize) {
        let mut out = std::mem::take(&mut self.scratch);
        if let Err(e) = self.ring.reap(min, &mut out) {
            self.fail(e);
        }
        self.scratch = out;
        self.complete();
    }

    pub(super) fn complete(&mut self) {
        let done = std::mem::take(&mut self.scratch);
        for d in done {
            let mut result = d.result;
            if let Ok(n) = result {
                if n < d.len {
                    // What went is on disk, whatever the rest does.
                    self.durable(d.offset, d.offset + n as u64);
                    // The rest, once more, synchronously: it either goes or says why
                    // (ENOSPC, "No space left on device").
                    result = self.write_rest(&d.buf, d.len, d.offset, n);
                }
            }
            if result.as_ref().is_err_and(is_out_of_space) {
                // Refused whole for space: as much as still fits goes, so a full disk is
                // filled before it is reported.
                self.write_what_fits(&d.buf, d.len, d.offset);
            }
            // A direct write the filesystem refuses (EINVAL, 22: alignment): once more,
            // buffered.
            if let (Err(e), Some(cur)) = (&result, self.cur.as_mut()) {
                if let Target::File { file, .. } = &mut cur.target {
                    if e.raw_os_error() == Some(22) && file.is_direct() {
                        result = file
                            .make_buffered()
                            .and_then(|_| file.write_all_at(&d.buf.bytes()[..d.len], d.offset))
                            .map(|_| d.len);
                    }
                }
            }
            match result {
                Ok(_) => self.durable(d.offset, d.offset + d.len as u64),
                Err(e) => self.fail(e),
            }
            if d.tag == TAG_STAGE {
                self.spare.push(d.buf);
            } else {
                let _ = self.free.send(d.buf);
            }
        }
    }

    /// Writes what a short write left, synchronously, to learn the OS error if it fails.
    pub(super) fn write_rest(
        &mut self,
        buf: &AlignedBuf,
        len: usize,
        offset: u64,
        n: usize,
    ) -> io::Result<usize> {
        let short = || {
            io::Error::new(
                io::ErrorKind::StorageFull,
                format!("short write ({n} of {len} bytes)"),
            )
        };
        let Some(Target::File { file, .. }) = self.cur.as_mut().map(|c| &mut c.target) else {
            return Err(short());
        };
        let rest = &buf.bytes()[n..len];
        let at = offset + n as u64;
        match file.write_all_at(rest, at) {
            Ok(()) => Ok(len),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && file.is_direct() => {
                file.make_buffered()?;
                file.write_all_at(rest, at).map(|_| len)
            }
            Err(e) if e.kind() == io::ErrorKind::WriteZero => Err(short()),
            Err(e) => Err(e),
        }
    }

    /// Writes a refused write's bytes in pieces of [`FIT_PIECE`] (whole alignment units),
    /// synchronously, until one is refused; each piece that goes is durable. The close of
    /// the failed file keeps the whole blocks of the durable prefix.
    pub(super) fn write_what_fits(&mut self, buf: &AlignedBuf, len: usize, offset: u64) {
        let Some(Target::File { file, .. }) = self.cur.as_mut().map(|c| &mut c.target) else {
            return;
        };
        let piece = FIT_PIECE.max(self.align);
        let mut at = 0;
        while at < len {
            let n = piece.min(len - at);
            if file
                .write_all_at(&buf.bytes()[at..at + n], offset + at as u64)
                .is_err()
            {
                break;
            }
            at += n;
        }
        if at > 0 {
            self.durable(offset, offset + at as u64);
        }
    }

    pub(super) fn durable(&mut self, from: u64, to: u64) {
        let Some(cur) = self.cur.as_mut() else { return };
        let e = cur.done.entry(from).or_insert(to);
        *e = (*e).max(to);
        // Writes may overlap (a flush's padded unit is written again): any finished write
        // that starts at or before the durable end extends it.
        while let Some((&f, &t)) = cur.done.range(..=cur.durable).next() {
            cur.done.remove(&f);
            cur.durable = cur.durable.max(t);
        }
        while cur.bounds.front().is_some_and(|b| b.0 <= cur.durable) {
            cur.safe = cur.bounds.pop_front().expect("front checked");
        }
    }

    pub(super) fn fail(&mut self, e: io::Error) {
        let Some(cur) = self.cur.as_mut() else { return };
        if cur.failed {
            return;
        }
        cur.failed = true;
        // Relaxed: a flag the front end polls once per buffer; the report carries the rest.
        self.failed.store(true, Ordering::Relaxed);
        let name = match &cur.target {
            Target::File { path, .. } => path.display().to_string(),
            Target::Stream(st) => {
                if e.kind() == io::ErrorKind::BrokenPipe {
                    // The reader chose to stop (`| head`, Wireshark's stop): an end, not a
                    // failure.
                    self.report
                        .notes
                        .push(format!("the reader of {} closed it", st.name));
                    return;
                }
                st.name.clone()
            }
        };
        self.report
            .error
            .get_or_insert_with(|| format!("writing {name}: {e}"));
    }
}

/// Whether a write failed for want of space (a full filesystem, or a quota).
pub(super) fn is_out_of_space(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::StorageFull
        || e.kind() == io::ErrorKind::QuotaExceeded
        || matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// The piece [`DiskWriter::write_what_fits`] writes at a time.
pub(super) const FIT_PIECE: usize = 64 << 10;
