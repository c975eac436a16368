//! Captures that start in the past (`"since"` in a start request): where the daemon also
//! records (`serve --record`), the capture's file begins with the recorded packets that
//! match its filter from that time on, then continues live, each packet once.
//!
//! The seam: the capture is attached first, and once every worker of the base capture has
//! taken the change ([`corecap_engine::capture::Capture::steering_current`]) the seam is
//! the clock's time. A packet the kernel stamped from then on reaches a worker after it
//! took the change, so it arrives live; one stamped before is in the recording (which
//! holds every packet of the interface). The stage thread holds the live packets (in a
//! bounded buffer: beyond it they are counted as `hold_drops`) while this module's
//! thread waits until the recording is on disk up to the seam (its flush interval), runs
//! the query over it from `since` to the seam with the capture's filter, and sends the
//! packets in time order; then the held live packets from the seam on follow, and older
//! ones are counted (`before_seam`) and skipped.

use std::io::{BufReader, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use corecap_engine::stage::member::Recorded;
use corecap_store::query::{expand_paths, run, QuerySpec};
use corecap_store::sealed::KeyFile;
use corecap_wire::CaptureReader;

/// Bytes of live packets a capture may hold while its recorded packets are read.
pub const HOLD_BYTES: usize = 64 << 20;
/// Bytes of recorded packets sent to the stage at once.
const BATCH_BYTES: usize = 1 << 20;
/// Time past the recording's flush interval before the seam is surely on disk.
const MARGIN: Duration = Duration::from_millis(300);

/// What a lookback reads: the recording, the window, the filter and how the capture keeps
/// packets.
#[derive(Debug)]
pub struct Job {
    /// The recording folder.
    pub recording: PathBuf,
    /// Where the query's answer is kept while it is read (the spool; the file is unlinked
    /// at once).
    pub scratch: PathBuf,
    /// Window start, ns since the epoch.
    pub from_ns: u64,
    /// The seam, ns since the epoch.
    pub seam_ns: u64,
    /// The capture's filter.
    pub filter: Option<String>,
    /// The recording's key, for sealed files.
    pub kek: Option<Arc<KeyFile>>,
    /// The recording's flush interval.
    pub flush: Option<Duration>,
    /// The capture's snap length.
    pub snaplen: u32,
}

/// Starts the lookback's thread; its last message is [`Recorded::End`].
pub fn spawn(job: Job, tx: SyncSender<Recorded>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("corecap-lookback".into())
        .spawn(move || {
            let _ = corecap_linux::ioprio::set_current_thread(corecap_linux::ioprio::IoClass::Idle);
            let error = read(&job, &tx).err();
            let _ = tx.send(Recorded::End {
                seam_ns: job.seam_ns,
                error,
            });
        })?;
    Ok(())
}

/// Waits until the recording holds the seam, queries it and sends its packets.
fn read(job: &Job, tx: &SyncSender<Recorded>) -> Result<(), String> {
    let ready = UNIX_EPOCH
        + Duration::from_nanos(job.seam_ns)
        + job.flush.unwrap_or(Duration::ZERO)
        + MARGIN;
    if let Ok(wait) = ready.duration_since(SystemTime::now()) {
        std::thread::sleep(wait);
    }
    let answer = scratch_file(&job.scratch)?;
    let (files, _) =
        expand_paths(std::slice::from_ref(&job.recording)).map_err(|e| e.to_string())?;
    let spec = QuerySpec {
        files,
        from: job.from_ns,
        to: job.seam_ns,
        filter: job.filter.clone(),
        kek: job.kek.clone(),
        scan: false,
        once: false,
        sessions: None,
        folders: Vec::new(),
        reach: false,
    };
    let mut w = BufWriter::with_capacity(1 << 20, answer);
    run(&spec, &mut w).map_err(|e| format!("querying the recording: {e}"))?;
    w.flush().map_err(|e| e.to_string())?;
    let mut f = w.into_inner().map_err(|e| e.to_string())?;
    f.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
    let mut r = CaptureReader::new(BufReader::with_capacity(1 << 20, f))
        .map_err(|e| format!("reading the recording's answer: {e}"))?;
    let (mut data, mut packets) = (Vec::with_capacity(BATCH_BYTES), Vec::new());
    loop {
        let p = r
            .next_packet()
            .map_err(|e| format!("reading the recording's answer: {e}"))?;
        let Some(p) = p else { break };
        let keep = p.data.len().min(job.snaplen as usize);
        data.extend_from_slice(&p.data[..keep]);
        packets.push((p.ts_ns, keep as u32, p.orig_len, p.linktype));
        if data.len() >= BATCH_BYTES {
            let batch = Recorded::Batch {
                data: std::mem::replace(&mut data, Vec::with_capacity(BATCH_BYTES)),
                packets: std::mem::take(&mut packets),
            };
            tx.send(batch).map_err(|_| "the capture ended".to_owned())?;
        }
    }
    if !packets.is_empty() {
        tx.send(Recorded::Batch { data, packets })
            .map_err(|_| "the capture ended".to_owned())?;
    }
    Ok(())
}

/// A file in `dir` that no name reaches (made, then unlinked), so nothing is left behind
/// whatever happens to the daemon.
fn scratch_file(dir: &Path) -> Result<std::fs::File, String> {
    let name = dir.join(format!(
        ".lookback-{}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&name)
        .map_err(|e| format!("{}: {e}", name.display()))?;
    let _ = std::fs::remove_file(&name);
    Ok(f)
}
