//! Capture files: pcapng (default) or classic pcap, with dumpcap-style rotation.
//!
//! A rotated file set is named `STEM_NNNNN.EXT` (N from 00001); with `files:N` only the
//! newest N files are kept. Each pcapng file ends with one Interface Statistics Block per
//! interface, written at close.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use corecap_wire::pcap::PcapWriter;
use corecap_wire::pcapng::{Epb, InterfaceDesc, Isb, PcapngWriter};

use super::output::Output;
use crate::packet::Packet;

/// File format of a capture file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// pcapng with queue and hash options.
    Pcapng,
    /// Classic pcap with nanosecond timestamps.
    Pcap,
}

/// When to start a new file (`-b filesize:MB,duration:S,files:N`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rotation {
    /// Start a new file after this many bytes.
    pub filesize: Option<u64>,
    /// Start a new file after this long.
    pub duration: Option<Duration>,
    /// Keep at most this many files.
    pub files: Option<usize>,
}

impl Rotation {
    /// Whether any rotation is asked for.
    pub fn active(&self) -> bool {
        self.filesize.is_some() || self.duration.is_some()
    }
}

/// What a file sink writes and where.
#[derive(Clone, Debug)]
pub struct FileConfig {
    /// Output path (`-` is standard output).
    pub path: PathBuf,
    /// File format.
    pub format: Format,
    /// Rotation rules.
    pub rotation: Rotation,
    /// Interfaces described in the file; packet `iface` indexes this list.
    pub interfaces: Vec<InterfaceDesc>,
    /// Snap length recorded in the file header.
    pub snaplen: u32,
    /// Encryption at rest, if asked for.
    pub seal: Option<super::sealed::SealConfig>,
}

enum Writer {
    Pcapng(PcapngWriter<Output>),
    Pcap(PcapWriter<Output>),
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Writer::Pcapng(_) => "Pcapng",
            Writer::Pcap(_) => "Pcap",
        })
    }
}

impl Writer {
    fn out(&mut self) -> &mut Output {
        match self {
            Writer::Pcapng(w) => w.get_mut(),
            Writer::Pcap(w) => w.get_mut(),
        }
    }
}

/// A capture file being written, with rotation.
#[derive(Debug)]
pub struct FileSink {
    cfg: FileConfig,
    writer: Writer,
    seq: u32,
    opened: Instant,
    kept: VecDeque<PathBuf>,
    first_ts: Option<u64>,
    last_ts: u64,
    /// Packets written per interface in the current file.
    delivered: Vec<u64>,
    /// Packets written to the current file.
    written: u64,
    /// Packets removed from files cut back after a failed write.
    lost: u64,
    failed: Option<io::ErrorKind>,
}

/// The path of rotated file number `seq` for `base`.
pub fn rotated_path(base: &Path, seq: u32) -> PathBuf {
    let stem = base
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match base.extension() {
        Some(ext) => format!("{stem}_{seq:05}.{}", ext.to_string_lossy()),
        None => format!("{stem}_{seq:05}"),
    };
    base.with_file_name(name)
}

/// `out.pcapng` with suffix `w1` becomes `out.w1.pcapng`.
pub fn suffixed_path(base: &Path, suffix: &str) -> PathBuf {
    if base == Path::new("-") {
        return base.to_owned();
    }
    let name = base
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The suffix goes before the capture extension: out.w1.pcapng, out.w1.pcapng.sealed.
    let name = [
        ".pcapng.sealed",
        ".pcap.sealed",
        ".pcapng",
        ".pcap",
        ".sealed",
    ]
    .iter()
    .find_map(|ext| {
        let stem = name.strip_suffix(ext)?;
        (!stem.is_empty()).then(|| format!("{stem}.{suffix}{ext}"))
    })
    .unwrap_or_else(|| match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => format!("{stem}.{suffix}.{ext}"),
        _ => format!("{name}.{suffix}"),
    });
    base.with_file_name(name)
}

fn open(cfg: &FileConfig, path: &Path) -> io::Result<Writer> {
    let out = Output::create(path, cfg.seal.as_ref())
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display())))?;
    Ok(match cfg.format {
        Format::Pcapng => Writer::Pcapng(PcapngWriter::new(out, "corecap", &cfg.interfaces)?),
        Format::Pcap => {
            let lt = cfg.interfaces.first().map(|i| i.linktype).unwrap_or(1);
            Writer::Pcap(PcapWriter::new(out, u32::from(lt), cfg.snaplen)?)
        }
    })
}

impl FileSink {
    /// Creates the first file.
    pub fn create(cfg: FileConfig) -> io::Result<Self> {
        let path = if cfg.rotation.active() {
            rotated_path(&cfg.path, 1)
        } else {
            cfg.path.clone()
        };
        let writer = open(&cfg, &path)?;
        let n = cfg.interfaces.len();
        Ok(Self {
            cfg,
            writer,
            seq: 1,
            opened: Instant::now(),
            kept: VecDeque::from([path]),
            first_ts: None,
            last_ts: 0,
            delivered: vec![0; n],
            written: 0,
            lost: 0,
            failed: None,
        })
    }

    /// Writes one packet. An error means the packet was not written (count it).
    pub fn write(&mut self, p: &Packet<'_>) -> io::Result<()> {
        if let Some(kind) = self.failed {
            return Err(kind.into());
        }
        let rot = self.cfg.rotation;
        if rot.active() {
            let size_due = rot.filesize.is_some_and(|s| self.writer.out().len() >= s);
            let time_due = rot.duration.is_some_and(|d| self.opened.elapsed() >= d);
            if size_due || time_due {
                self.rotate()?;
            }
        }
        let r = match &mut self.writer {
            Writer::Pcapng(w) => w.write_epb(&Epb {
                if_id: p.iface,
                ts_ns: p.ts_ns,
                data: p.data,
                orig_len: p.wire_len,
                vlan_tci: p.vlan,
                queue: p.queue,
                hash: Some(p.hash()),
                dropcount: None,
            }),
            Writer::Pcap(w) => w.write_packet(p.ts_ns, p.data, p.wire_len, p.vlan),
        };
        r?;
        self.first_ts.get_or_insert(p.ts_ns);
        self.last_ts = p.ts_ns;
        if let Some(d) = self.delivered.get_mut(p.iface as usize) {
            *d += 1;
        }
        self.written += 1;
        if self.writer.out().due() {
            // A failed commit cuts the file back; the packets it removes, this one
            // included, are counted by `lost`, and later packets are refused.
            let _ = self.commit();
        }
        Ok(())
    }

    fn commit(&mut self) -> io::Result<()> {
        let written = self.written;
        let r = self.writer.out().commit(written, false);
        self.note(r)
    }

    fn note(&mut self, r: io::Result<()>) -> io::Result<()> {
        if let Err(e) = &r {
            self.failed = Some(e.kind());
            self.lost += self.writer.out().lost();
        }
        r
    }

    /// Packets that were written and then removed when a failed write cut a file back;
    /// they count as app drops, not as delivered.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.close_current(&[])?;
        self.seq += 1;
        self.written = 0;
        let path = rotated_path(&self.cfg.path, self.seq);
        self.writer = open(&self.cfg, &path)?;
        self.opened = Instant::now();
        self.first_ts = None;
        self.delivered.iter_mut().for_each(|d| *d = 0);
        self.kept.push_back(path);
        if let Some(max) = self.cfg.rotation.files {
            while self.kept.len() > max.max(1) {
                if let Some(old) = self.kept.pop_front() {
                    let _ = std::fs::remove_file(old);
                }
            }
        }
        Ok(())
    }

    /// Interface statistics (per interface: packets counted by the source, drops) written
    /// in the last file's ISBs.
    fn close_current(&mut self, stats: &[(u64, u64)]) -> io::Result<()> {
        if let Writer::Pcapng(w) = &mut self.writer {
            for i in 0..self.cfg.interfaces.len() {
                let (recv, drop) = stats
                    .get(i)
                    .copied()
                    .map_or((None, None), |(r, d)| (Some(r), Some(d)));
                let isb = Isb {
                    start_ns: self.first_ts,
                    end_ns: Some(self.last_ts),
                    ifrecv: recv,
                    ifdrop: drop,
                    osdrop: drop,
                    usrdeliv: self.delivered.get(i).copied(),
                    ..Default::default()
                };
                w.write_isb(i as u32, self.last_ts, &isb)?;
            }
        }
        let written = self.written;
        let r = self.writer.out().close(written);
        self.note(r)
    }

    /// Closes the file, with per-interface (received, dropped) statistics for the ISBs.
    /// Returns the paths of the files kept and the packets lost to a cut-back file.
    pub fn finish(mut self, stats: &[(u64, u64)]) -> (Vec<PathBuf>, u64, Option<io::Error>) {
        // A file cut back to its last good block after a failed write gets nothing more.
        let err = if self.failed.is_some() {
            None
        } else {
            self.close_current(stats).err()
        };
        (self.kept.into(), self.lost, err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_paths() {
        assert_eq!(
            suffixed_path(Path::new("/tmp/out.pcapng"), "w1"),
            PathBuf::from("/tmp/out.w1.pcapng")
        );
        assert_eq!(
            suffixed_path(Path::new("c.pcapng.sealed"), "g0m1"),
            PathBuf::from("c.g0m1.pcapng.sealed")
        );
        assert_eq!(
            suffixed_path(Path::new("out.bin"), "w2"),
            PathBuf::from("out.w2.bin")
        );
        assert_eq!(
            suffixed_path(Path::new("out"), "w0"),
            PathBuf::from("out.w0")
        );
        assert_eq!(
            rotated_path(Path::new("/d/out.w0.pcap"), 3),
            PathBuf::from("/d/out.w0_00003.pcap")
        );
        assert_eq!(suffixed_path(Path::new("-"), "w0"), PathBuf::from("-"));
    }
}
