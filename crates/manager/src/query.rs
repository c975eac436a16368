//! `POST /queries`: packets of the spool's files, and of the recording's with
//! `serve --record`, by time window and filter, streamed back as pcapng.
//!
//! The body is JSON: `{"from": T, "to": T, "filter": "tcpdump expression"}`, and the
//! selectors `community_id`, `sni`, `dns`, `http_host` (exactly the packets of the
//! connections they pick, as `corecap query` takes them), every field optional, T as `corecap query` takes it (Unix seconds, RFC 3339, or relative like
//! `-15m`). A bad time or filter gets 400 before anything is read. The query runs on a
//! thread of its own (see [`crate::server`]), which first moves off the CPUs capture uses
//! (base workers, spawned workers, stage threads) and drops to the idle I/O class, so a
//! query never competes with capture for a core or for the disk. The response is `200`
//! with `Content-Type: application/x-pcapng` and no length (the connection closes at the
//! end); an error after the first byte can only cut the stream short, so the daemon logs
//! it.

use std::io::{self, BufWriter, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use corecap_linux::ioprio::{self, IoClass};
use corecap_store::query::{expand_paths, parse_time, run, QuerySpec, QueryStats};
use serde::Deserialize;

use crate::http::Response;
use crate::manager::Manager;

/// The body of `POST /queries`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryRequest {
    /// Window start, inclusive.
    pub from: Option<String>,
    /// Window end, exclusive.
    pub to: Option<String>,
    /// tcpdump filter expression.
    pub filter: Option<String>,
    /// Only the packets of the connections with this Community ID.
    pub community_id: Option<String>,
    /// ... whose TLS server name matches this pattern (`*` wildcards, any case).
    pub sni: Option<String>,
    /// ... whose DNS question's name matches this pattern.
    pub dns: Option<String>,
    /// ... whose HTTP Host matches this pattern.
    pub http_host: Option<String>,
}

/// Checks a request and turns it into a query over the spool and the recording; `Err` is
/// the response.
pub fn spec(m: &Manager, body: &[u8]) -> Result<QuerySpec, Response> {
    let q: QueryRequest = if body.is_empty() {
        QueryRequest::default()
    } else {
        serde_json::from_slice(body)
            .map_err(|e| Response::error(400, format!("invalid request JSON: {e}")))?
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let time = |t: &Option<String>, what: &str, default: u64| match t {
        Some(s) => parse_time(s, now).map_err(|e| Response::error(400, format!("{what} {s}: {e}"))),
        None => Ok(default),
    };
    let from = time(&q.from, "from", 0)?;
    let to = time(&q.to, "to", u64::MAX)?;
    let filter = q.filter.filter(|f| !f.trim().is_empty());
    if let Some(f) = &filter {
        corecap_linux::filter::compile_offline(1, 262_144, f).map_err(|e| {
            let e = corecap_linux::error_chain(&e);
            Response::error(400, format!("filter: {e}"))
        })?;
    }
    let spec = over_spool(m, from, to, filter)?;
    let select = corecap_store::read::flow_match::Selectors {
        community_id: q.community_id,
        sni: q.sni,
        dns: q.dns,
        http_host: q.http_host,
        ..Default::default()
    };
    if !select.by_session() {
        return Ok(spec);
    }
    // The connections first, from the sessions files; too many for one filter is the
    // client's to narrow.
    let (narrowed, _) = corecap_store::read::narrow::narrow(&spec, &select)
        .map_err(|e| Response::error(400, e.to_string()))?;
    Ok(narrowed)
}

/// A query of the packets from `from` to `to` (matching `filter`) in the spool and the
/// recording: a packet both hold is given once, and the answer states its reach.
pub fn over_spool(
    m: &Manager,
    from: u64,
    to: u64,
    filter: Option<String>,
) -> Result<QuerySpec, Response> {
    let mut folders = vec![m.spool().dir().to_owned()];
    folders.extend(m.record().map(|d| d.to_owned()));
    let (files, _) = expand_paths(&folders).map_err(|e| Response::error(500, e.to_string()))?;
    Ok(QuerySpec {
        files,
        from,
        to,
        filter,
        kek: m.key().cloned(),
        scan: false,
        once: true,
        sessions: None,
        folders,
        reach: true,
    })
}

/// Moves the calling thread off the capture CPUs and to the idle I/O class. Returns the
/// CPUs it may run on (empty when every CPU captures: then it keeps its affinity).
pub fn step_aside(m: &Manager) -> Vec<u32> {
    let busy = m.capture_cpus();
    let free: Vec<u32> = corecap_linux::affinity::allowed_cpus()
        .into_iter()
        .filter(|c| !busy.contains(c))
        .collect();
    if !free.is_empty() {
        let _ = corecap_linux::affinity::pin_current_thread_to(&free);
    }
    let _ = ioprio::set_current_thread(IoClass::Idle);
    free
}

/// Runs a query and streams its pcapng to `s` (the body of a 200 response).
pub fn stream<S: Write>(m: &Manager, spec: &QuerySpec, s: &mut S) -> io::Result<QueryStats> {
    step_aside(m);
    let mut w = BufWriter::with_capacity(1 << 20, s);
    let stats = run(spec, &mut w).map_err(|e| io::Error::other(e.to_string()))?;
    w.flush()?;
    Ok(stats)
}
