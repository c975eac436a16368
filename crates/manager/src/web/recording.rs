//! `GET /recording`: what the page's Recording screen shows beside the timeline, read from
//! what the daemon already keeps: the recording's reach from its catalog (oldest and
//! newest packet), the bytes its folder and the spool hold against the `--retain` budget,
//! and each base capture's counters with its drops by place (`GET /metrics` has the same
//! figures for Prometheus).
//!
//! `{"record": path or null, "oldest_ns", "newest_ns", "files", "record_bytes",
//! "spool_bytes", "budget", "retention": {"files", "bytes"} deleted, "bases": [..],
//! "captures_running"}`.

use std::path::Path;

use crate::http::Response;
use crate::manager::Manager;

/// The bytes of the files of `dir` and of its folders, one level down (a spool's captures
/// keep their rotated files in a folder each).
fn folder_bytes(dir: &Path) -> u64 {
    let Ok(list) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut sum = 0;
    for e in list.flatten() {
        let Ok(md) = e.metadata() else { continue };
        if md.is_file() {
            sum += md.len();
        } else if md.is_dir() {
            let inner = std::fs::read_dir(e.path()).into_iter().flatten().flatten();
            sum += inner
                .filter_map(|f| f.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum::<u64>();
        }
    }
    sum
}

/// Answers `GET /recording` (see the module doc).
pub fn answer(m: &Manager) -> Response {
    Response::json(200, &summary(m))
}

/// What `GET /recording` answers.
pub fn summary(m: &Manager) -> serde_json::Value {
    let stats = m.stats();
    let entries = m.record().map(super::timeline::entries).unwrap_or_default();
    let reach = super::timeline::reach(&entries);
    serde_json::json!({
        "record": m.record().map(|p| p.display().to_string()),
        "oldest_ns": reach.map(|r| r.0),
        "newest_ns": reach.map(|r| r.1),
        "files": entries.len(),
        "record_bytes": m.record().map(folder_bytes),
        "spool_bytes": folder_bytes(m.spool().dir()),
        "budget": m.retention().map(|r| r.budget()),
        "retention": stats.retention,
        "bases": stats.bases,
        "captures_running": stats.captures_running,
    })
}
