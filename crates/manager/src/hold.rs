//! `POST /holds` and `DELETE /holds/NAME`: holds made and released over the API.
//!
//! The body of `POST /holds` is JSON: `{"name": CASE, "from": T, "to": T, "filter":
//! "tcpdump expression"}` and the selectors `community_id`, `sni`, `dns`, `http_host`, T as
//! `POST /queries` takes it (Unix seconds, RFC 3339, or relative like `-15m`); `to` may be
//! in the future. The hold is synced in the recording folder before the answer (201, the
//! hold). A bad time, filter or name gets 400, a name in use 409, held recordings at
//! `--hold-budget` 507.

use std::time::{SystemTime, UNIX_EPOCH};

use corecap_store::keep::hold::{HoldError, HoldSpec};
use corecap_store::query::parse_time;
use serde::{Deserialize, Serialize};

use crate::http::Response;
use crate::manager::Manager;

/// The body of `POST /holds`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HoldRequest {
    /// The hold's name.
    pub name: String,
    /// Window start, inclusive.
    pub from: String,
    /// Window end, exclusive.
    pub to: String,
    /// tcpdump filter expression.
    pub filter: Option<String>,
    /// Only the connections with this Community ID.
    pub community_id: Option<String>,
    /// ... whose TLS server name matches this pattern.
    pub sni: Option<String>,
    /// ... whose DNS question's name matches this pattern.
    pub dns: Option<String>,
    /// ... whose HTTP Host matches this pattern.
    pub http_host: Option<String>,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The response of a refused hold.
fn refused(e: &HoldError) -> Response {
    let status = match e {
        HoldError::Exists(_) => 409,
        HoldError::NotFound(_) => 404,
        HoldError::Budget { .. } => 507,
        HoldError::BadName(_) | HoldError::BadWindow => 400,
        _ => 500,
    };
    Response::error(status, e.to_string())
}

/// `POST /holds`.
pub fn make(m: &Manager, body: &[u8]) -> Response {
    let Some(holds) = m.holds() else {
        return Response::error(404, "this daemon keeps no holds");
    };
    let q: HoldRequest = match serde_json::from_slice(body) {
        Ok(q) => q,
        Err(e) => return Response::error(400, format!("invalid request JSON: {e}")),
    };
    let now = now_ns();
    let time = |s: &str, what: &str| {
        parse_time(s, now).map_err(|e| Response::error(400, format!("{what} {s}: {e}")))
    };
    let (from_ns, to_ns) = match (time(&q.from, "from"), time(&q.to, "to")) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(r), _) | (_, Err(r)) => return r,
    };
    let filter = q.filter.filter(|f| !f.trim().is_empty());
    if let Some(f) = &filter {
        if let Err(e) = corecap_linux::filter::compile_offline(1, 262_144, f) {
            let e = corecap_linux::error_chain(&e);
            return Response::error(400, format!("filter: {e}"));
        }
    }
    let spec = HoldSpec {
        name: q.name,
        from_ns,
        to_ns,
        filter,
        community_id: q.community_id,
        sni: q.sni,
        dns: q.dns,
        http_host: q.http_host,
    };
    match holds.add(spec, now) {
        Ok(h) => json(201, &h),
        Err(e) => refused(&e),
    }
}

/// `DELETE /holds/NAME`.
pub fn release(m: &Manager, name: &str) -> Response {
    let Some(holds) = m.holds() else {
        return Response::error(404, "this daemon keeps no holds");
    };
    match holds.remove(name) {
        Ok(h) => json(200, &h),
        Err(e) => refused(&e),
    }
}

/// A JSON response of `v`.
pub(crate) fn json<T: Serialize>(status: u16, v: &T) -> Response {
    match serde_json::to_value(v) {
        Ok(v) => Response::json(status, &v),
        Err(e) => Response::error(500, e.to_string()),
    }
}
