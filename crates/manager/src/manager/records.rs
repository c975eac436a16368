//! Captures as the spool's catalog keeps them, and those of earlier runs listed from it.

use std::path::PathBuf;

use super::{Entry, Runner};
use crate::api::{CaptureView, State};
use crate::catalog::Record;

/// Paths as the API shows them.
pub(super) fn display(files: &[PathBuf]) -> Vec<String> {
    files.iter().map(|p| p.display().to_string()).collect()
}

/// A capture as the catalog keeps it: its files by name in the spool.
pub(super) fn record_of(e: &Entry) -> Record {
    let v = &e.view;
    Record {
        id: v.id.clone(),
        name: e.name.clone(),
        interface: v.interface.clone(),
        mode: v.mode,
        filter: v.filter.clone(),
        output: v.output,
        count: v.count,
        duration: v.duration,
        requested_at: v.requested_at,
        ended_at: v.ended_at,
        state: v.state,
        reason: v.reason.clone(),
        files: e
            .files
            .iter()
            .filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
            .collect(),
        packets: v.packets,
        bytes: v.bytes,
        drops: v.drops.clone(),
        lag_us: v.lag_us,
        setup_us: v.setup_us,
        cores: v.cores.clone(),
        earlier_run: v.earlier_run,
    }
}

/// A capture of an earlier run, listed from the catalog (already settled).
pub(super) fn earlier_entry(dir: &std::path::Path, r: &Record) -> Entry {
    let files: Vec<PathBuf> = r.files.iter().map(|f| dir.join(f)).collect();
    let view = CaptureView {
        id: r.id.clone(),
        state: r.state,
        reason: r.reason.clone(),
        mode: r.mode,
        interface: r.interface.clone(),
        filter: r.filter.clone(),
        output: r.output,
        path: files.first().map(|p| p.display().to_string()),
        file_bytes: file_bytes(&files),
        cores: r.cores.clone(),
        requested_at: r.requested_at,
        ended_at: r.ended_at,
        setup_us: r.setup_us,
        armed_us: r.lag_us.map(|l| (l - r.setup_us).max(0.0)),
        first_packet_us: r.lag_us,
        lag_us: r.lag_us,
        packets: r.packets,
        bytes: r.bytes,
        drops: r.drops.clone(),
        count: r.count,
        duration: r.duration,
        notes: Vec::new(),
        files: display(&files),
        earlier_run: true,
        since: None,
        recorded: None,
        live: None,
    };
    Entry {
        view,
        runner: Runner::Ended,
        since_ns: (r.requested_at.max(0.0) * 1e9) as u64,
        deadline: None,
        files,
        lag_observed: true,
        name: r.name.clone(),
    }
}

/// Follows a capture of an earlier run whose file was still its writer's part when the
/// manager started: a recovery since (at the first file capture's start) named it, or
/// removed it. Returns whether its entry changed.
pub(super) fn refresh_earlier(e: &mut Entry, dir: &std::path::Path) -> bool {
    if !e.view.earlier_run || e.view.state != State::Recovered {
        return false;
    }
    let mut r = record_of(e);
    if !r.resettle(dir) {
        return false;
    }
    *e = earlier_entry(dir, &r);
    true
}

pub(super) fn file_bytes(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}
