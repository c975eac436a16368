//! What the recording keeps, as the daemon tells it: `GET /status` gives the reach of the
//! spool and the recording (their oldest and newest packet, and every stretch not on
//! record with why: deleted by retention, a gap), retention's bytes against each budget,
//! the files it deleted by rule and the deletions a reading query put off; the same
//! figures are in `/metrics` ([`metrics`]). `GET /holds`, `POST /holds` and
//! `DELETE /holds/NAME` list, make and release holds ([`crate::hold`]).

use std::fmt::Write as _;
use std::path::PathBuf;

use corecap_store::query::expand_paths;
use corecap_store::read::reach::{reach, Reach};
use corecap_store::retention::RetentionReport;
use serde::Serialize;

use crate::http::Response;
use crate::manager::Manager;

/// Answers the routes of this module; None for a path that is not one of them.
pub fn route(m: &Manager, method: &str, parts: &[&str], body: &[u8]) -> Option<Response> {
    if let Some(r) = crate::alert::route(m, method, parts) {
        return Some(r);
    }
    let r = match (method, parts) {
        ("GET", ["status"]) => crate::hold::json(200, &status(m)),
        ("GET", ["holds"]) => crate::hold::json(200, &holds_view(m)),
        ("POST", ["holds"]) => crate::hold::make(m, body),
        ("DELETE", ["holds", name]) => crate::hold::release(m, name),
        (_, ["status"]) | (_, ["holds"]) | (_, ["holds", _]) => Response::error(
            405,
            format!("{method} is not allowed on /{}", parts.join("/")),
        ),
        _ => return None,
    };
    Some(r)
}

/// What holds keep, as `GET /holds` and `/status` give it.
#[derive(Debug, Serialize)]
pub struct HoldsView {
    /// Every hold, oldest first.
    pub holds: Vec<corecap_store::keep::hold::Hold>,
    /// Bytes of the held recordings.
    pub held_bytes: u64,
    /// `--hold-budget`, if any.
    pub budget_bytes: Option<u64>,
}

/// The daemon's holds now (none without a holds file).
pub fn holds_view(m: &Manager) -> HoldsView {
    match m.holds() {
        Some(h) => HoldsView {
            holds: h.list(),
            held_bytes: h.held_bytes(),
            budget_bytes: h.budget(),
        },
        None => HoldsView {
            holds: Vec::new(),
            held_bytes: 0,
            budget_bytes: None,
        },
    }
}

/// The body of `GET /status`.
#[derive(Debug, Serialize)]
pub struct Status {
    /// The folders read: the spool, and the recording with `serve --record`.
    pub folders: Vec<PathBuf>,
    /// Capture files in them.
    pub files: u64,
    /// The reach of the whole recording (its window is its first to its last packet).
    pub reach: Reach,
    /// Retention's budgets and deletions, with `--retain`, `--retain-age` or `--min-free`.
    pub retention: Option<RetentionReport>,
    /// The holds, and the bytes their held recordings take.
    pub holds: HoldsView,
}

/// The folders whose files the daemon answers from.
fn folders(m: &Manager) -> Vec<PathBuf> {
    let mut f = vec![m.spool().dir().to_owned()];
    f.extend(m.record().map(|d| d.to_owned()));
    f
}

/// The daemon's [`Status`] now.
pub fn status(m: &Manager) -> Status {
    let folders = folders(m);
    let files = expand_paths(&folders).map(|(f, _)| f).unwrap_or_default();
    Status {
        reach: reach(&folders, &files, 0, u64::MAX),
        files: files.len() as u64,
        folders,
        retention: m.retention().map(|r| r.report()),
        holds: holds_view(m),
    }
}

/// The recording's reach and retention's figures, in Prometheus text format.
pub fn metrics(m: &Manager) -> String {
    let s = status(m);
    let mut o = String::new();
    if let Some(e) = m.eve() {
        eve_metrics(&mut o, e);
    }
    let secs = |ns: u64| ns as f64 / 1e9;
    let mut gauge = |name: &str, help: &str, v: String| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
    };
    if let (Some(a), Some(b)) = (s.reach.oldest_ns, s.reach.newest_ns) {
        gauge(
            "corecap_recording_oldest_packet_seconds",
            "Time of the oldest packet on record (spool and recording), seconds since the epoch.",
            format!("{:.3}", secs(a)),
        );
        gauge(
            "corecap_recording_newest_packet_seconds",
            "Time of the newest packet on record, seconds since the epoch.",
            format!("{:.3}", secs(b)),
        );
    }
    gauge(
        "corecap_holds",
        "Holds in force (POST /holds, alerts).",
        s.holds.holds.len().to_string(),
    );
    gauge(
        "corecap_held_bytes",
        "Bytes of the held recordings: packets holds kept from files retention deleted.",
        s.holds.held_bytes.to_string(),
    );
    let Some(r) = &s.retention else {
        return o;
    };
    gauge(
        "corecap_retention_kept_bytes",
        "Bytes of the whole files retention keeps (indexes and sessions included).",
        r.kept_bytes.to_string(),
    );
    gauge(
        "corecap_retention_open_bytes",
        "Bytes of the files being written, counted against the budget.",
        r.open_bytes.to_string(),
    );
    if let Some(age) = r.max_age_s {
        gauge(
            "corecap_retention_max_age_seconds",
            "Files whose last packet is older than this are deleted (--retain-age).",
            age.to_string(),
        );
    }
    if let (Some(free), Some(size)) = (r.fs_free_bytes, r.fs_bytes) {
        gauge(
            "corecap_retention_fs_free_bytes",
            "Bytes free on the filesystem of the oldest kept file (--min-free watches it).",
            free.to_string(),
        );
        gauge(
            "corecap_retention_fs_bytes",
            "Size of that filesystem.",
            size.to_string(),
        );
    }
    by_rule(&mut o, r);
    let _ = writeln!(
        o,
        "# HELP corecap_retention_deferred_total Deletions put off because a query was reading the folder.\n# TYPE corecap_retention_deferred_total counter\ncorecap_retention_deferred_total {}",
        r.deferred
    );
    let _ = writeln!(
        o,
        "# HELP corecap_retention_held_back_total Deletions put off because a hold's packets could not be copied out.\n# TYPE corecap_retention_held_back_total counter\ncorecap_retention_held_back_total {}",
        r.held_back
    );
    o
}

/// Files and bytes deleted, by rule.
fn by_rule(o: &mut String, r: &RetentionReport) {
    for (what, help) in [
        (
            "files",
            "Files retention deleted, by the rule that deleted them.",
        ),
        ("bytes", "Bytes of the files retention deleted, by rule."),
    ] {
        let name = format!("corecap_retention_deleted_{what}_by_rule_total");
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter");
        for c in &r.deleted {
            let v = if what == "files" { c.files } else { c.bytes };
            let _ = writeln!(o, "{name}{{rule=\"{}\"}} {v}", c.rule.name());
        }
    }
}

/// The EVE follower's counts.
fn eve_metrics(o: &mut String, e: &crate::eve::Eve) {
    use std::sync::atomic::Ordering::Relaxed;
    let c = e.counts();
    for (name, help, v) in [
        (
            "corecap_eve_lines_total",
            "Lines read from Suricata's EVE output.",
            &c.lines,
        ),
        (
            "corecap_eve_malformed_total",
            "EVE lines that were no record, skipped.",
            &c.malformed,
        ),
        (
            "corecap_eve_rotations_total",
            "Times eve.json was found rotated.",
            &c.rotations,
        ),
        (
            "corecap_eve_truncations_total",
            "Times eve.json was found truncated.",
            &c.truncations,
        ),
        (
            "corecap_alerts_unheld_total",
            "Alerts whose flow could not be held.",
            &c.unheld,
        ),
    ] {
        let _ = writeln!(
            o,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
            v.load(Relaxed)
        );
    }
    let _ = writeln!(
        o,
        "# HELP corecap_alerts Alerts kept.\n# TYPE corecap_alerts gauge\ncorecap_alerts {}",
        e.alerts.list().len()
    );
}
