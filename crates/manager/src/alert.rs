//! `GET /alerts` and `GET /alerts/{id}/pcap`: the alerts read from Suricata's EVE output
//! ([`crate::eve`]), each with its signature, severity, flow, time, hold and the packets of
//! its flow on record now (the recording's and the held recordings'), and a flow's packets
//! as one pcapng.

use serde::Serialize;

use corecap_store::keep::alert::Alert;
use corecap_store::query::QuerySpec;
use corecap_store::read::flow_match::Selectors;

use crate::http::Response;
use crate::manager::Manager;

/// One alert as `GET /alerts` lists it.
#[derive(Debug, Serialize)]
pub struct AlertView {
    /// The alert as it was kept.
    #[serde(flatten)]
    pub alert: Alert,
    /// Its time, RFC 3339 in UTC.
    pub time: String,
    /// Packets of its flow on record now (None: they could not be read).
    pub packets_kept: Option<u64>,
}

/// The body of `GET /alerts`.
#[derive(Debug, Serialize)]
pub struct AlertsView {
    /// Every alert, oldest first.
    pub alerts: Vec<AlertView>,
    /// Lines read from the EVE output.
    pub lines: u64,
    /// Lines that were no EVE record, skipped.
    pub malformed: u64,
    /// Alerts whose flow could not be held.
    pub unheld: u64,
}

/// The id of `GET /alerts/{id}/pcap`.
pub fn pcap_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/alerts/")?;
    rest.strip_suffix("/pcap").filter(|id| !id.contains('/'))
}

/// Answers `GET /alerts`; None for another path.
pub fn route(m: &Manager, method: &str, parts: &[&str]) -> Option<Response> {
    match (method, parts) {
        ("GET", ["alerts"]) => Some(match m.eve() {
            Some(_) => crate::hold::json(200, &list(m)),
            None => Response::error(404, "this daemon follows no EVE output (serve --eve PATH)"),
        }),
        (_, ["alerts"]) => Some(Response::error(
            405,
            format!("{method} is not allowed on /alerts"),
        )),
        _ => None,
    }
}

/// Every alert with the packets of its flow on record now.
pub fn list(m: &Manager) -> AlertsView {
    let Some(eve) = m.eve() else {
        return AlertsView {
            alerts: Vec::new(),
            lines: 0,
            malformed: 0,
            unheld: 0,
        };
    };
    let alerts = eve
        .alerts
        .list()
        .into_iter()
        .map(|a| AlertView {
            packets_kept: count(m, &a),
            time: corecap_store::query::utc_text(a.time_ns),
            alert: a,
        })
        .collect();
    let c = eve.counts();
    use std::sync::atomic::Ordering::Relaxed;
    AlertsView {
        alerts,
        lines: c.lines.load(Relaxed),
        malformed: c.malformed.load(Relaxed),
        unheld: c.unheld.load(Relaxed),
    }
}

/// Packets of the alert's flow on record now.
fn count(m: &Manager, a: &Alert) -> Option<u64> {
    let spec = spec(m, a).ok()?;
    corecap_store::query::run(&spec, std::io::sink())
        .ok()
        .map(|s| s.packets)
}

/// The query of an alert's flow: its packets from the flow's start (as the hold takes it)
/// to the hold's end, by Community ID or 5-tuple.
pub fn spec(m: &Manager, a: &Alert) -> Result<QuerySpec, Response> {
    let held = a
        .hold
        .as_deref()
        .and_then(|h| m.holds()?.list().into_iter().find(|x| x.spec.name == h));
    let (from, to) = held.as_ref().map_or(
        (a.flow_start_ns.saturating_sub(1_000_000_000), u64::MAX),
        |h| (h.spec.from_ns, h.spec.to_ns),
    );
    let filter = if a.flow.community_id.is_some() {
        None
    } else {
        a.flow.filter()
    };
    let spec = crate::query::over_spool(m, from, to, filter)?;
    let Some(c) = &a.flow.community_id else {
        return Ok(spec);
    };
    let select = Selectors {
        community_id: Some(c.clone()),
        ..Selectors::default()
    };
    corecap_store::read::narrow::narrow(&spec, &select)
        .map(|(s, _)| s)
        .map_err(|e| Response::error(500, e.to_string()))
}

/// The query and file name of `GET /alerts/{id}/pcap`.
pub fn pcap_spec(m: &Manager, id: &str) -> Result<(QuerySpec, String), Response> {
    let eve = m
        .eve()
        .ok_or_else(|| Response::error(404, "this daemon follows no EVE output"))?;
    let a = eve
        .alerts
        .get(id)
        .ok_or_else(|| Response::error(404, format!("no alert {id}")))?;
    Ok((spec(m, &a)?, format!("alert-{id}.pcapng")))
}
