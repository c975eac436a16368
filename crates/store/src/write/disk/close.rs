//! The end of a file: cut to length, synced, its index and sessions beside it, named, kept
//! by retention; or discarded when it holds no packet.

use std::fs;
use std::io::{self};
use std::path::Path;

use corecap_index::Identity;
use corecap_linux::direct::DirectFile;

use super::{Current, DiskWriter, Target};
use crate::names::{index_path, remove_with_index};
use crate::session::format::Encoder;

impl DiskWriter {
    /// Ends the current file: waits for its writes, cuts it to length (or back to its last
    /// durable block after a failure), syncs it, writes what goes beside it and gives it its
    /// name.
    pub(super) fn close(&mut self) {
        if self
            .cur
            .as_ref()
            .is_some_and(|c| c.framer.is_some() && !c.failed)
        {
            if self.cur.as_ref().is_some_and(|c| c.sealer.is_some()) {
                self.seal_seek_table();
            } else {
                self.stage_seek_table();
            }
        }
        if self.cur.as_ref().is_some_and(|c| c.stage.is_some()) {
            self.flush_stage(true);
        }
        self.drain();
        let Some(mut cur) = self.cur.take() else {
            return;
        };
        self.framer = cur.framer.take();
        if let Some(r) = &self.cfg.retention {
            r.close_open(cur.end);
        }
        if let Some((stage, _)) = cur.stage.take() {
            self.spare.push(stage);
        }
        if !matches!(cur.target, Target::File { .. }) {
            if cur.failed {
                self.report.lost += cur.packets - cur.safe.1.min(cur.packets);
            }
            return;
        }
        let packets = self.cut_to_length(&mut cur);
        let Target::File { file, part, path } = &cur.target else {
            return;
        };
        if cur.failed && packets == 0 {
            // A file that holds no packet gets no capture name, as a failed start leaves
            // none: the error says what happened.
            let removed = fs::remove_file(part.as_path())
                .and_then(|_| corecap_linux::direct::sync_parent(part.as_path()));
            if let Err(e) = removed {
                self.report
                    .notes
                    .push(format!("could not remove {}: {e}", part.display()));
            }
            return;
        }
        let time = cur.index.as_ref().and_then(|ix| ix.time_range());
        let (index, sessions) = (cur.index.take(), cur.sessions.take());
        let (identity, beside) = self.write_beside(part, path, index, sessions, cur.failed);
        // Never over another file; then the directory is synced, so the name survives a
        // power cut (the index's name too, made just before).
        let named = corecap_linux::direct::rename_noreplace(part, path)
            .and_then(|_| corecap_linux::direct::sync_parent(path));
        if let Err(e) = named {
            self.report.error.get_or_insert_with(|| {
                format!("naming {} (from {}): {e}", path.display(), part.display())
            });
            return;
        }
        let size = file.file().metadata().map_or(0, |m| m.len());
        let entry = crate::Entry {
            name: path
                .file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into_owned()),
            state: crate::State::Whole,
            time,
            packets,
            bytes: size,
            index_bytes: fs::metadata(index_path(path)).map_or(0, |m| m.len()),
            identity,
        };
        let path = path.clone();
        self.keep(&path, &entry, size + beside);
    }

    /// Cuts the closing file to its length and syncs it; after a failure, back to the whole
    /// blocks that reached the disk. Returns the packets it holds.
    pub(super) fn cut_to_length(&mut self, cur: &mut Current) -> u64 {
        let Target::File { file, part, path } = &mut cur.target else {
            return 0;
        };
        if cur.failed && cur.sealer.is_none() && self.framer.is_none() {
            // The whole blocks of all that reached the disk, which may reach past the last
            // buffer's end that was whole (a full disk takes part of a buffer).
            if let Ok(Some((bytes, packets))) =
                crate::recover::whole_prefix_within(part, cur.durable)
            {
                if bytes > cur.safe.0 {
                    cur.safe = (bytes, packets);
                }
            }
        }
        let r = if cur.failed {
            self.report.lost += cur.packets - cur.safe.1.min(cur.packets);
            cut_back(file, cur.safe.0, &cur.header).and_then(|()| match self.framer.as_mut() {
                // A sealed file ends on a whole chunk: its table would be plaintext.
                Some(fr) if cur.safe.0 > 0 && cur.sealer.is_none() => {
                    end_frames(file, &mut fr.table, cur.safe.0)
                }
                _ => Ok(()),
            })
        } else {
            file.file()
                .set_len(cur.end)
                .and_then(|_| file.file().sync_data())
        };
        if let Err(e) = r {
            self.report
                .error
                .get_or_insert_with(|| format!("closing {}: {e}", path.display()));
        }
        if cur.failed {
            cur.safe.1.min(cur.packets)
        } else {
            cur.packets
        }
    }

    /// Writes the index and the sessions file of the file at `part` (to be named `path`),
    /// before the file takes its name. A file cut back after a failed write gets neither (a
    /// query scans it). Returns the identity the index is tied to, and their bytes.
    pub(super) fn write_beside(
        &mut self,
        part: &Path,
        path: &Path,
        index: Option<Box<corecap_index::IndexBuilder>>,
        sessions: Option<Box<Encoder>>,
        failed: bool,
    ) -> (Option<(u64, Identity)>, u64) {
        if failed {
            return (None, 0);
        }
        let Some(mut ix) = index else {
            let bytes = sessions.map_or(0, |s| self.sessions_alone(part, path, *s));
            return (None, bytes);
        };
        let at = index_path(path);
        // The identity of the bytes on disk, read back (the writer's descriptor may be a
        // direct one, which takes aligned buffers only).
        let covered = ix.covered();
        let id = fs::File::open(part).and_then(|f| crate::read::frames::identity(&f, covered));
        let written = id.and_then(|id| {
            ix.set_identity(id);
            crate::sidecar::write_sidecar(&at, &ix.finish(), self.cfg.seal.as_ref()).map(|()| id)
        });
        let id = match written {
            Ok(id) => id,
            Err(e) => {
                self.report
                    .notes
                    .push(format!("no index for {}: {e}", path.display()));
                return (None, 0);
            }
        };
        let mut bytes = fs::metadata(&at).map_or(0, |m| m.len());
        // The sessions file too, tied to the same bytes as the index.
        if let Some(s) = sessions {
            self.log_sessions(path, &s);
            bytes += self.write_sessions(path, *s, covered, id);
        }
        (Some((covered, id)), bytes)
    }

    /// Writes the sessions file of a file with no index (`--no-index`), tied to all the
    /// capture bytes the file at `part` holds (its whole length; a compressed file's
    /// decompressed stream), which the writer cut it to; returns its bytes, 0 when it could
    /// not be (a note says why).
    fn sessions_alone(&mut self, part: &Path, path: &Path, s: Encoder) -> u64 {
        let id = fs::File::open(part).and_then(|f| {
            let covered = crate::read::frames::content_len(&f)?;
            Ok((covered, crate::read::frames::identity(&f, covered)?))
        });
        match id {
            Ok((covered, id)) => {
                self.log_sessions(path, &s);
                self.write_sessions(path, s, covered, id)
            }
            Err(e) => {
                self.report
                    .notes
                    .push(format!("no sessions file for {}: {e}", path.display()));
                0
            }
        }
    }

    /// Writes the sessions file of `path` (sealed as the file is); returns its bytes, 0
    /// when it could not be written (a note says why: a query still finds the packets).
    pub(super) fn write_sessions(
        &mut self,
        path: &Path,
        s: Encoder,
        covered: u64,
        id: Identity,
    ) -> u64 {
        let bytes = s.into_file(covered, Some(id));
        match crate::session::format::write_sessions(path, &bytes, self.cfg.seal.as_ref()) {
            Ok(()) => fs::metadata(crate::names::sessions_path(path)).map_or(0, |m| m.len()),
            Err(e) => {
                self.report
                    .notes
                    .push(format!("no sessions file for {}: {e}", path.display()));
                0
            }
        }
    }

    /// Appends the file's connections to the sessions log, if there is one; a log that
    /// cannot be written costs a note, once.
    pub(super) fn log_sessions(&mut self, path: &Path, s: &Encoder) {
        let Some(log) = &self.cfg.sessions_log else {
            return;
        };
        // The log reads the records back from the file's bytes: only a log pays for them.
        let records = s.sessions().map_err(io::Error::other);
        if let Err(e) = records.and_then(|r| log.append(&r)) {
            self.report.notes.push(format!(
                "the connections of {} are not in the sessions log: {e} (they are in its \
                 sessions file)",
                path.display()
            ));
        }
    }

    /// A file just named: recorded in its folder's catalog, then kept under `-b files:N`
    /// and the byte budget, which may delete the oldest.
    pub(super) fn keep(&mut self, path: &Path, entry: &crate::Entry, bytes: u64) {
        // A catalog behind its files (this writer's first file, or one after a failed
        // update) is brought up to date from them first. The catalog is an accelerator:
        // one that cannot be written costs a note, and recording goes on.
        let dir = crate::names::dir_of(path);
        let kept = if self.catalog_behind {
            crate::catalog_update::refresh(dir)
                .and_then(|()| crate::catalog_update::record(entry, dir))
        } else {
            crate::catalog_update::record(entry, dir)
        };
        self.catalog_behind = kept.is_err();
        if let Err(e) = kept {
            if !self.noted_catalog {
                self.noted_catalog = true;
                self.report.notes.push(format!(
                    "the folder's catalog is not kept for now: {e} (recording goes on; \
                     it is brought up to date from the files when it can be written)"
                ));
            }
        }
        self.report.files.push(path.to_owned());
        self.kept.push_back(path.to_owned());
        if let Some(max) = self.cfg.files {
            while self.kept.len() > max.max(1) {
                if let Some(old) = self.kept.pop_front() {
                    // Said where a query reads what was deleted, before it goes.
                    let recorded =
                        crate::retention::record_deletion(&old, crate::keep::deleted::Rule::Files);
                    if let Err(e) = recorded {
                        self.report.notes.push(format!(
                            "recording the deletion of {} (-b files:N): {e}",
                            old.display()
                        ));
                    }
                    remove_with_index(&old);
                    self.ring_deleted += 1;
                    crate::catalog_update::forget(std::slice::from_ref(&old));
                    if let Some(r) = &self.cfg.retention {
                        r.forget(&old);
                    }
                    self.report.files.retain(|f| *f != old);
                }
            }
        }
        if let Some(r) = &self.cfg.retention {
            for gone in r.add(path.to_owned(), bytes, entry.time.map(|(_, last)| last)) {
                self.kept.retain(|k| *k != gone);
                self.report.files.retain(|f| *f != gone);
            }
        }
    }
}

impl DiskWriter {
    /// Removes the current file, which holds no packet.
    pub(super) fn discard(&mut self) {
        self.drain();
        if let Some(Current {
            target: Target::File { part, .. },
            ..
        }) = self.cur.take()
        {
            let _ = fs::remove_file(&part);
        }
    }
}

/// Cuts a failed file back to `safe` bytes, restoring its header if the cut went below it.
pub(super) fn cut_back(file: &mut DirectFile, safe: u64, header: &[u8]) -> io::Result<()> {
    if safe >= header.len() as u64 {
        return file.file().set_len(safe);
    }
    file.file().set_len(0)?;
    file.make_buffered()?;
    file.write_all_at(header, 0)
}

/// Ends a compressed file cut back to `safe` bytes (a frame's end) with the seek table of
/// the frames before it. A table that does not fit (the disk is full) is left off: the file
/// is still a zstd stream, which readers scan.
pub(super) fn end_frames(
    file: &mut DirectFile,
    table: &mut crate::seekable::SeekTable,
    safe: u64,
) -> io::Result<()> {
    let keep = table.frames().partition_point(|f| f.end() <= safe);
    table.truncate(keep);
    if table.frames_len() != safe {
        return Ok(());
    }
    let mut bytes = Vec::with_capacity(table.encoded_len());
    table.encode(&mut bytes);
    file.make_buffered()?;
    if file.write_all_at(&bytes, safe).is_err() {
        file.file().set_len(safe)?;
    }
    file.file().sync_data()
}
