//! What the daemon's own captures did: each base capture's workers and, with `serve
//! --record`, its recording. Read while the daemon runs (for `GET /metrics` and `serve`'s
//! statistics lines) and once it stopped (its summary), from the same counters: the
//! workers' and the recording's stage thread's, each written by its own thread and
//! summed here, off the data path.

use std::path::Path;
use std::sync::Arc;

use corecap_engine::stage::member::MemberLive;
use corecap_engine::stats::ledger::{Snapshot, WorkerCounters};
use serde::Serialize;

use crate::api::Drops;

/// The daemon's own captures now.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    /// Each base capture, in the order of `serve -i`.
    pub bases: Vec<BaseStats>,
    /// Captures running now (requests').
    pub captures_running: u64,
    /// `--retain`: the files and bytes it deleted (the spool's and the recording's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention: Option<Deleted>,
}

/// Files and bytes deleted to keep under `--retain`.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Deleted {
    /// Files deleted.
    pub files: u64,
    /// Their bytes (indexes included).
    pub bytes: u64,
}

/// One base capture: what its workers took, and its recording.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BaseStats {
    /// Its interface.
    pub interface: String,
    /// Packets its workers took from the kernel's ring.
    pub packets: u64,
    /// Their wire bytes.
    pub bytes: u64,
    /// Packets the kernel dropped because the ring was full.
    pub kernel_drops: u64,
    /// Its recording (`serve --record`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recording: Option<RecordingStats>,
}

/// A base capture's recording: what it wrote, what it lost and where, and what it keeps.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct RecordingStats {
    /// Packets written to the recording.
    pub packets: u64,
    /// Their wire bytes.
    pub bytes: u64,
    /// Packets that never reached the recording, by place: `kernel` (the ring was full),
    /// `stage_full` (the workers' pipe to the recording's stage thread was full), `app`
    /// (a block the workers could not walk, or a packet the writer refused), `disk` (the
    /// disk writer was behind, or a write failed).
    pub drops: Drops,
    /// Packets the per-flow cutoff left out (`--flow-cutoff`): counted, not written.
    pub cut_packets: u64,
    /// Wire bytes of the cut packets.
    pub cut_bytes: u64,
    /// Flows the cutoff's full table forgot before they were idle (`--cutoff-flows`).
    pub cut_evictions: u64,
    /// Packets written of connections no session table had room for
    /// (`--sessions-per-file`): their files hold them, their sessions files no record.
    pub sessions_dropped: u64,
    /// Packets written older than one written before them: the files' time order broken
    /// (a worker that broke its watermark, or one so far behind that the reorder's memory
    /// ran out). Checked as they are written; 0 when every file is in time order.
    pub out_of_order: u64,
    /// Files this run of the daemon began (the first, then one per rotation).
    pub files: u64,
    /// The oldest packet the recording keeps on disk (ns since the epoch), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_ns: Option<u64>,
    /// The newest packet written (ns since the epoch), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newest_ns: Option<u64>,
}

/// The counters of one base capture, kept apart from it so that they can be read after
/// it ended: its workers' and its own stage members' (the recording's).
#[derive(Debug, Clone)]
pub struct BaseCounters {
    /// Its interface.
    pub interface: String,
    /// One per worker.
    pub workers: Vec<Arc<WorkerCounters>>,
    /// Its own stage members (the recording's), never a request's.
    pub members: Vec<Arc<MemberLive>>,
}

impl BaseCounters {
    /// Sums the counters; with `record` (the recording's folder), reads the recording's
    /// reach from the folder's catalog.
    pub fn read(&self, record: Option<&Path>) -> BaseStats {
        let mut w = Snapshot::default();
        for c in &self.workers {
            w += c.read();
        }
        let recording = record.map(|dir| {
            let m = MemberSums::of(&self.members);
            let (oldest, newest) = kept_span(dir, &self.interface);
            RecordingStats {
                packets: m.packets,
                bytes: m.bytes,
                drops: Drops {
                    kernel: w.kernel_drops,
                    stage_full: m.stage_full,
                    app: w.app_drops + m.app_drops,
                    disk: w.disk_drops + m.disk_drops,
                },
                cut_packets: m.cut_packets,
                cut_bytes: m.cut_bytes,
                cut_evictions: m.cut_evictions,
                sessions_dropped: m.sessions_dropped,
                out_of_order: m.out_of_order,
                files: m.files,
                // Before a file is whole, the catalog has none of this run's: the oldest
                // kept packet is then the first written, unless an earlier run left older.
                oldest_ns: oldest.or(m.first_ts_ns),
                newest_ns: newest.max(m.last_ts_ns),
            }
        });
        BaseStats {
            interface: self.interface.clone(),
            packets: w.packets,
            bytes: w.bytes,
            kernel_drops: w.kernel_drops,
            recording,
        }
    }
}

/// The stage members' counters, summed.
#[derive(Debug, Default)]
struct MemberSums {
    packets: u64,
    bytes: u64,
    stage_full: u64,
    app_drops: u64,
    disk_drops: u64,
    cut_packets: u64,
    cut_bytes: u64,
    cut_evictions: u64,
    sessions_dropped: u64,
    out_of_order: u64,
    files: u64,
    first_ts_ns: Option<u64>,
    last_ts_ns: Option<u64>,
}

impl MemberSums {
    fn of(members: &[Arc<MemberLive>]) -> Self {
        use std::sync::atomic::Ordering::Relaxed;
        let mut s = Self::default();
        // Relaxed: statistics, each published by its stage thread (or by the workers'
        // pipe ends for `stage_full`); a read may mix two publications.
        for m in members {
            s.packets += m.packets.load(Relaxed);
            s.bytes += m.bytes.load(Relaxed);
            s.stage_full += m.stage_full.load(Relaxed);
            s.app_drops += m.app_drops.load(Relaxed);
            s.disk_drops += m.disk_drops.load(Relaxed);
            s.cut_packets += m.cut_packets.load(Relaxed);
            s.cut_bytes += m.cut_bytes.load(Relaxed);
            s.cut_evictions += m.cut_evictions.load(Relaxed);
            s.sessions_dropped += m.sessions_dropped.load(Relaxed);
            s.out_of_order += m.out_of_order.load(Relaxed);
            s.files += m.files.load(Relaxed);
            let (first, last) = (m.first_ts_ns.load(Relaxed), m.last_ts_ns.load(Relaxed));
            if first != 0 {
                s.first_ts_ns = Some(s.first_ts_ns.map_or(first, |f| f.min(first)));
            }
            if last != 0 {
                s.last_ts_ns = s.last_ts_ns.max(Some(last));
            }
        }
        s
    }
}

/// The oldest and newest packet times of `iface`'s whole files in the recording folder
/// `dir`, as its catalog has them (`IFACE.*` names; files of earlier runs included, as
/// queries answer over them too). None where the catalog has no time.
fn kept_span(dir: &Path, iface: &str) -> (Option<u64>, Option<u64>) {
    let Some(entries) = corecap_store::Catalog::read(dir).and_then(|c| c.entries().ok()) else {
        return (None, None);
    };
    let prefix = format!("{iface}.");
    entries
        .iter()
        .filter(|e| e.name.starts_with(&prefix))
        .filter_map(|e| e.time)
        .fold((None, None), |(a, b), (first, last)| {
            (
                Some(a.map_or(first, |a: u64| a.min(first))),
                b.max(Some(last)),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn test_sums_workers_and_members() {
        let w = Arc::new(WorkerCounters::default());
        w.publish(&Snapshot {
            packets: 10,
            bytes: 1000,
            kernel_packets: 12,
            kernel_drops: 2,
            ..Default::default()
        });
        let (a, b) = (
            Arc::new(MemberLive::default()),
            Arc::new(MemberLive::default()),
        );
        for (m, n, first, last) in [(&a, 6, 50, 90), (&b, 3, 40, 70)] {
            m.packets.store(n, Relaxed);
            m.bytes.store(n * 100, Relaxed);
            m.first_ts_ns.store(first, Relaxed);
            m.last_ts_ns.store(last, Relaxed);
            m.files.store(1, Relaxed);
        }
        a.stage_full.store(1, Relaxed);
        b.disk_drops.store(1, Relaxed);
        let c = BaseCounters {
            interface: "cap0".into(),
            workers: vec![w],
            members: vec![a, b],
        };
        let dir = std::env::temp_dir().join(format!("corecap-stats-{}", std::process::id()));
        let s = c.read(Some(&dir));
        assert_eq!((s.packets, s.bytes, s.kernel_drops), (10, 1000, 2));
        let r = s.recording.expect("recording");
        assert_eq!((r.packets, r.bytes, r.files), (9, 900, 2));
        assert_eq!(
            r.drops,
            Drops {
                kernel: 2,
                stage_full: 1,
                app: 0,
                disk: 1
            }
        );
        // No catalog: the span is the packets written.
        assert_eq!((r.oldest_ns, r.newest_ns), (Some(40), Some(90)));
        assert!(c.read(None).recording.is_none());
    }
}
