//! A file's index built after the fact, from the file itself: for a file written
//! without one, or one that recovery made whole.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;

use corecap_index::{sidecar_path, Identity, Index};

use crate::session::{SessionConfig, SessionTable};
use serde::Serialize;

use crate::read::outcome::{io_at, QueryError};
use crate::read::plan::{file_kind, FileKind};
use crate::sealed::{
    read_chunk, ChunkOpener, KeyFile, NextChunk, SealConfig, SealError, CHUNK_HEAD,
};

/// What [`build_index`] did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct IndexReport {
    /// Packets indexed.
    pub packets: u64,
    /// Regions.
    pub regions: u32,
    /// Bytes of the file covered.
    pub covered: u64,
    /// Bytes of the file.
    pub size: u64,
    /// Bytes of the sidecar.
    pub index_bytes: u64,
    /// Where the readable part ended, when the file was cut short or damaged.
    pub cut_short: Option<u64>,
    /// The sidecar is sealed.
    pub sealed: bool,
    /// Why no sidecar was written (a compressed file), if so.
    pub not_indexed: Option<String>,
    /// Connections written to the sessions file (plain files).
    pub sessions: Option<u64>,
    /// Why no sessions file was written, if none was.
    pub no_sessions: Option<String>,
}

/// Builds and writes the sidecar of a pcap, pcapng or sealed capture file (regions of
/// about 1 MiB at block boundaries; for a sealed file, runs of whole chunks). A sealed
/// file needs its key; its sidecar is sealed under it.
pub fn build_index(path: &Path, kek: Option<&Arc<KeyFile>>) -> Result<IndexReport, QueryError> {
    let size = std::fs::metadata(path).map_err(io_at(path))?.len();
    let (sidecar, mut report, seal) = match file_kind(path).map_err(io_at(path))? {
        FileKind::Other => {
            return Err(QueryError::Other(format!(
                "{}: not a pcap, pcapng or sealed capture file",
                path.display()
            )))
        }
        FileKind::Compressed(_) if is_seekable(path) => index_compressed(path)?,
        FileKind::Compressed(c) => {
            return Ok(IndexReport {
                size,
                not_indexed: Some(format!(
                "{}: {c}-compressed without a seek table; compressed files are not indexed without one (queries scan them whole)",
                path.display()
            )),
                ..IndexReport::default()
            })
        }
        FileKind::Plain => {
            let f = File::open(path).map_err(io_at(path))?;
            let b =
                corecap_index::index_file(&f, corecap_index::REGION_SIZE).map_err(io_at(path))?;
            let report = report_of(&b);
            (b.sidecar, report, None)
        }
        FileKind::Sealed => {
            let Some(kek) = kek else {
                return Err(QueryError::Other(format!(
                    "{}: sealed capture file; give --key-file",
                    path.display()
                )));
            };
            index_sealed(path, kek)?
        }
    };
    report.size = size;
    write_beside(path, &sidecar, report, seal)
}

/// Writes a file's sidecar (sealed under the file's key if `seal`), and, for a plain
/// file, its sessions; the folder's catalog then learns the file. Returns `report` with
/// what was written.
fn write_beside(
    path: &Path,
    sidecar: &[u8],
    mut report: IndexReport,
    seal: Option<SealConfig>,
) -> Result<IndexReport, QueryError> {
    let size = report.size;
    report.index_bytes = sidecar.len() as u64;
    report.sealed = seal.is_some();
    crate::sidecar::write_sidecar(&sidecar_path(path), sidecar, seal.as_ref())
        .map_err(io_at(&sidecar_path(path)))?;
    if seal.is_some() {
        report.index_bytes =
            std::fs::metadata(sidecar_path(path)).map_or(report.index_bytes, |m| m.len());
    }
    // The folder's catalog learns the file (made, or rebuilt from the files, if needed): a
    // window then opens only the files it overlaps. A catalog that cannot be written costs
    // nothing but that.
    let parsed = Index::parse(sidecar);
    if let (Ok(ix), None) = (&parsed, &seal) {
        match ix.identity.map(|id| build_sessions(path, ix.covered, id)) {
            Some(Ok(n)) => report.sessions = Some(n),
            Some(Err(e)) => report.no_sessions = Some(e),
            None => report.no_sessions = Some("the index has no identity".into()),
        }
    }
    if let (Ok(ix), Some(name)) = (parsed, path.file_name()) {
        let name = name.to_string_lossy().into_owned();
        let state = if crate::names::is_recovered(Path::new(&name)) {
            crate::State::Recovered
        } else {
            crate::State::Whole
        };
        let e = crate::Entry {
            name,
            state,
            time: ix.time_range(),
            packets: ix.packets(),
            bytes: size,
            index_bytes: report.index_bytes,
            identity: ix.identity.map(|id| (ix.covered, id)),
        };
        let _ = crate::catalog_update::record(&e, crate::names::dir_of(path));
    }
    Ok(report)
}

/// Indexes a compressed recording at offsets of its decompressed stream, which a query
/// reads through the frames (see `read::frames`).
fn index_compressed(path: &Path) -> Result<(Vec<u8>, IndexReport, Option<SealConfig>), QueryError> {
    let f = File::open(path).map_err(io_at(path))?;
    let d = corecap_wire::Decompress::new(BufReader::with_capacity(1 << 20, &f))
        .map_err(io_at(path))?;
    let b = corecap_index::index_reader_identified(d, corecap_index::REGION_SIZE, &|n| {
        crate::read::frames::identity(&f, n)
    })
    .map_err(io_at(path))?;
    let report = report_of(&b);
    Ok((b.sidecar, report, None))
}

/// What an index built from a file's packets reports.
fn report_of(b: &corecap_index::Built) -> IndexReport {
    IndexReport {
        packets: b.packets,
        regions: b.regions,
        covered: b.covered,
        cut_short: b.cut_short,
        ..IndexReport::default()
    }
}

/// Whether `path` is a compressed file ended by a seek table (a compressed recording).
fn is_seekable(path: &Path) -> bool {
    File::open(path).is_ok_and(|f| crate::read::frames::seek_table(&f).is_ok_and(|t| t.is_some()))
}

/// Writes the sessions file of a plain capture file from its packets within the first
/// `covered` bytes (the index's), tied to the same bytes; returns the connections written.
/// Community IDs take seed 0, the default of Zeek, Suricata and Arkime.
fn build_sessions(path: &Path, covered: u64, id: Identity) -> Result<u64, String> {
    let mut table = SessionTable::new(SessionConfig::default());
    // A packet past the covered bytes (a file that grew after it was indexed) is not the
    // index's, so not its sessions'.
    let records = crate::session::scan(path, &mut table, Some(covered))
        .map_err(|e| e.to_string())?
        .sessions;
    let seed = table.config().seed;
    let bytes = crate::session::format::encode(&records, seed, covered, Some(id));
    crate::session::format::write_sessions(path, &bytes, None).map_err(|e| e.to_string())?;
    Ok(records.len() as u64)
}

/// Indexes a sealed file: runs of whole chunks of about 1 MiB of plaintext are regions.
pub(crate) fn index_sealed(
    path: &Path,
    kek: &Arc<KeyFile>,
) -> Result<(Vec<u8>, IndexReport, Option<SealConfig>), QueryError> {
    let mut f = BufReader::with_capacity(1 << 20, File::open(path).map_err(io_at(path))?);
    let sealed_err = |cause| QueryError::Sealed {
        path: path.display().to_string(),
        cause,
    };
    let o = ChunkOpener::from_header(&mut f, kek).map_err(sealed_err)?;
    let mut b = corecap_index::IndexBuilder::without_postings();
    let mut report = IndexReport::default();
    let mut offset = o.header_len;
    let mut region_start = offset;
    let mut plain: Vec<u8> = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut last = false;
    let compressed =
        File::open(path).is_ok_and(|f| crate::read::frames::sealed_is_compressed(&f, &o));
    loop {
        let next = read_chunk(&mut f, &mut buf).map_err(io_at(path))?;
        let n = match next {
            NextChunk::End(n) => n,
            NextChunk::TooLong => {
                return Err(sealed_err(SealError::Tampered {
                    index: 0,
                    offset,
                    good: 0,
                }))
            }
            NextChunk::Read => CHUNK_HEAD,
        };
        let mut whole = n == CHUNK_HEAD;
        if whole {
            match o.open(&mut buf, offset).map_err(sealed_err)? {
                Some(c) => {
                    // Compress, then seal: the index holds the blocks the frames hold.
                    crate::read::frames::chunk_capture(
                        &buf[CHUNK_HEAD..CHUNK_HEAD + c.plain_len],
                        compressed,
                        &mut plain,
                    )
                    .map_err(io_at(path))?;
                    offset += c.sealed_len as u64;
                    last = c.last;
                }
                None => whole = false,
            }
        }
        if !whole && n > 0 {
            report.cut_short = Some(offset);
        }
        if !whole && n == 0 && !last {
            report.cut_short = Some(offset);
        }
        if (!whole || plain.len() >= corecap_index::REGION_SIZE) && offset > region_start {
            b.add_region(region_start..offset, &plain);
            report.regions += 1;
            plain.clear();
            region_start = offset;
        }
        if !whole {
            break;
        }
    }
    report.packets = b.packets();
    report.covered = offset;
    if offset > 0 {
        let f = File::open(path).map_err(io_at(path))?;
        b.set_identity(corecap_index::Identity::of_file(&f, b.covered()).map_err(io_at(path))?);
    }
    let cfg = SealConfig {
        cipher: o.cipher,
        kek: kek.clone(),
    };
    Ok((b.finish(), report, Some(cfg)))
}
