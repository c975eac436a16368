//! A buffer made into what goes on disk: sealed as a chunk, or compressed as zstd frames,
//! then copied into the staging buffer whose aligned part is written; the seek table at
//! the end.

use std::io;

use corecap_linux::direct::AlignedBuf;

use super::{Current, DiskWriter, Target, TAG_STAGE};
use crate::sealed::CHUNK_HEAD;
use crate::write::output::{Filled, BUFFER_BYTES, BUFFER_CAPACITY};

impl Current {
    /// Where the staged bytes end in the file: the offset of the next frame or chunk.
    fn stage_end(&self) -> u64 {
        let staged = self.stage.as_ref().map_or(0, |s| s.1);
        self.end - self.carried as u64 + staged as u64
    }
}

impl DiskWriter {
    /// Seals a plaintext buffer as one chunk, copies it into the staging buffer and writes
    /// the staging buffer's aligned part when it is full (or all of it for the last).
    pub(super) fn seal_and_stage(&mut self, mut f: Filled, last: bool) {
        let Some(cur) = self.cur.as_mut() else { return };
        let data = f.blocks.end - CHUNK_HEAD;
        // Indexed by the chunk's place in the file.
        let start = cur.stage_end();
        let compressed = cur.framer.is_some();
        if compressed {
            // Compress, then seal: the chunk holds the buffer's frames. The file's last
            // chunk is its seek table's (see [`Self::seal_seek_table`]).
            let began = std::time::Instant::now();
            let sealed = self.frames_of(&f).map(|mut chunk| {
                if let Some(sealer) = self.cur.as_mut().and_then(|c| c.sealer.as_mut()) {
                    sealer.seal(&mut chunk, false);
                }
                chunk
            });
            self.compressed.2 += began.elapsed();
            match sealed {
                Ok(chunk) => {
                    self.index_chunk(start, chunk.len(), &f);
                    self.stage_bytes(&chunk);
                }
                Err(e) => self.fail(e),
            }
        } else {
            // Indexed before sealing: sealing encrypts the blocks in place.
            let len = CHUNK_HEAD + data + crate::sealed::TAG;
            self.index_chunk(start, len, &f);
            let Some(sealer) = self.cur.as_mut().and_then(|c| c.sealer.as_mut()) else {
                return;
            };
            let chunk = sealer.seal_in(f.buf.bytes_mut(), data, last);
            self.stage_bytes(&f.buf.bytes()[..chunk]);
        }
        let cur = self.cur.as_mut().expect("file open");
        let prev = cur.bounds.back().map_or(cur.safe.1, |b| b.1);
        let boundary = cur.stage_end();
        cur.bounds.push_back((boundary, prev + f.packets));
        let _ = self.free.send(f.buf);
        // A compressed file's table chunk follows its last buffer's (at close).
        if last && !compressed {
            self.flush_stage(true);
        }
    }

    /// Adds the region of a sealed chunk at `start`, `len` bytes long, that holds the
    /// blocks of `f` (encrypted, and compressed when the file is).
    pub(super) fn index_chunk(&mut self, start: u64, len: usize, f: &Filled) {
        if let Some(ix) = self.cur.as_mut().and_then(|c| c.index.as_mut()) {
            ix.add_region(
                start..start + len as u64,
                &f.buf.bytes()[CHUNK_HEAD..f.blocks.end],
            );
        }
    }

    /// Copies `bytes` into the staging buffer, which goes out each time it holds a whole
    /// buffer's worth.
    pub(super) fn stage_bytes(&mut self, bytes: &[u8]) {
        let mut copied = 0;
        while copied < bytes.len() {
            let Some((stage, len)) = self.cur.as_mut().and_then(|c| c.stage.as_mut()) else {
                break;
            };
            let n = (stage.capacity() - *len).min(bytes.len() - copied);
            stage.bytes_mut()[*len..*len + n].copy_from_slice(&bytes[copied..copied + n]);
            *len += n;
            copied += n;
            if *len >= BUFFER_BYTES {
                self.flush_stage(false);
            }
        }
    }

    /// The frames of a buffer of whole blocks (see [`super::compress`]) after room for a
    /// chunk head: the plaintext of a compressed and sealed file's chunk.
    pub(super) fn frames_of(&mut self, f: &Filled) -> io::Result<Vec<u8>> {
        let Some(fr) = self.cur.as_mut().and_then(|c| c.framer.as_mut()) else {
            return Ok(vec![0; CHUNK_HEAD]);
        };
        let mut out = vec![0u8; CHUNK_HEAD];
        let mut pieces = f.cuts.pieces(f.blocks.clone()).peekable();
        while let Some(piece) = fr.next_piece(&mut pieces) {
            let len = piece.len();
            let at = out.len();
            out.resize(at + zstd::zstd_safe::compress_bound(len), 0);
            let n = fr.frame(&f.buf.bytes()[piece], &mut out[at..])?;
            out.truncate(at + n);
            self.compressed.0 += len as u64;
            self.compressed.1 += n as u64;
        }
        Ok(out)
    }

    /// Seals the seek table of a compressed and sealed file's frames as its final chunk:
    /// the plaintext ends as a compressed file does.
    pub(super) fn seal_seek_table(&mut self) {
        let Some(cur) = self.cur.as_mut() else { return };
        let (Some(fr), Some(sealer)) = (cur.framer.as_ref(), cur.sealer.as_mut()) else {
            return;
        };
        let mut chunk = vec![0u8; CHUNK_HEAD];
        fr.table.encode(&mut chunk);
        sealer.seal(&mut chunk, true);
        self.stage_bytes(&chunk);
    }

    /// Compresses a buffer of whole blocks as frames (see [`super::compress`]) into the
    /// staging buffer, which goes out each time it holds a whole buffer's worth.
    pub(super) fn compress_and_stage(&mut self, f: Filled) {
        let began = std::time::Instant::now();
        let mut pieces = f.cuts.pieces(f.blocks.clone()).peekable();
        loop {
            let framer = self.cur.as_ref().and_then(|c| c.framer.as_ref());
            let Some(piece) = framer.and_then(|fr| fr.next_piece(&mut pieces)) else {
                break;
            };
            if !self.frame_into_stage(&f.buf.bytes()[piece]) {
                break;
            }
        }
        let Some(cur) = self.cur.as_mut() else { return };
        let prev = cur.bounds.back().map_or(cur.safe.1, |b| b.1);
        let boundary = cur.stage_end();
        cur.bounds.push_back((boundary, prev + f.packets));
        let _ = self.free.send(f.buf);
        self.compressed.2 += began.elapsed();
    }

    /// Compresses one piece of whole blocks as a frame into the staging buffer, writing the
    /// buffer first when the frame may not fit; false when the file failed or is gone.
    fn frame_into_stage(&mut self, piece: &[u8]) -> bool {
        let bound = zstd::zstd_safe::compress_bound(piece.len());
        loop {
            let Some(cur) = self.cur.as_mut() else {
                return false;
            };
            let (Some(fr), Some((stage, len))) = (cur.framer.as_mut(), cur.stage.as_mut()) else {
                return false;
            };
            if stage.capacity() - *len < bound && *len > 0 {
                self.flush_stage(false);
                continue;
            }
            // A staging buffer too small for one frame (a block past the buffer's slack:
            // never from corecap's front end) is an error that ends the file.
            let room = stage.capacity() - *len;
            let out = &mut stage.bytes_mut()[*len..*len + room.min(bound)];
            match fr.frame(piece, out) {
                Ok(n) => {
                    *len += n;
                    self.compressed.0 += piece.len() as u64;
                    self.compressed.1 += n as u64;
                }
                Err(e) => {
                    self.fail(e);
                    return false;
                }
            }
            if *len >= BUFFER_BYTES {
                self.flush_stage(false);
            }
            return true;
        }
    }

    /// Puts the seek table of a compressed file's frames (see [`crate::seekable`]) in the
    /// staging buffer, after its last frame.
    pub(super) fn stage_seek_table(&mut self) {
        let Some(cur) = self.cur.as_mut() else { return };
        let Some(fr) = cur.framer.as_ref() else {
            return;
        };
        let mut table = Vec::with_capacity(fr.table.encoded_len());
        fr.table.encode(&mut table);
        self.stage_bytes(&table);
    }

    /// Writes the staging buffer's aligned part and carries the rest into a fresh one; with
    /// `all` (a flush, the file's end), the rest too: through the page cache as it is, or
    /// padded to the alignment on a direct file, whose unaligned tail is then carried and
    /// written again, whole, with what follows it. Returns the new staging length.
    pub(super) fn flush_stage(&mut self, all: bool) -> usize {
        let align = self.align;
        let Some(cur) = self.cur.as_mut() else {
            return 0;
        };
        let direct = matches!(&cur.target, Target::File { file, .. } if file.is_direct());
        let Some((stage, len)) = cur.stage.take() else {
            return 0;
        };
        let aligned = len / align * align;
        let cut = if all && !direct { len } else { aligned };
        let write_len = if all { len } else { aligned };
        let mut fresh = self
            .spare
            .pop()
            .unwrap_or_else(|| AlignedBuf::new(BUFFER_CAPACITY, align));
        let tail = len - cut;
        fresh.bytes_mut()[..tail].copy_from_slice(&stage.bytes()[cut..len]);
        cur.stage = Some((fresh, tail));
        let off = cur.end - cur.carried as u64;
        if write_len > 0 {
            self.write(stage, write_len, off, TAG_STAGE);
        } else {
            self.spare.push(stage);
        }
        if let Some(cur) = self.cur.as_mut() {
            cur.carried = (cur.end - (off + cut as u64)) as usize;
        }
        tail
    }
}
