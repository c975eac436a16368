//! The analyst's page, served by the daemon at `/` on the API's own listeners, with the
//! endpoints only it needs (`docs/web.md` says why it is built so):
//!
//! - `GET /` to a browser (`Accept: text/html`): the page; to any other client the JSON
//!   description of the service, as before. `GET /ui/app.js`, `/ui/style.css`: its
//!   script and style, built into the binary ([`asset`]); no request leaves the sensor.
//! - `GET /session`, `POST /login`, `POST /logout`: the login of the page and the CSRF
//!   token its changes carry ([`login`]).
//! - `GET /recording`: the recording's reach, disk used against the budget, and its
//!   drops by place; `GET /timeline`: packets and bytes per interval ([`timeline`]).
//! - `GET /packets`: a page of a search's packets ([`packets`]); `GET /filter?expr=`:
//!   whether libpcap compiles a filter, and its message if not (always 200, so a page
//!   that checks as the user types fills no console with errors).
//! - `GET /queries?...`: `POST /queries` as a link, the same parameters in the URL, the
//!   answer a download (`Content-Disposition`) that the browser streams to disk.
//! - `GET /sensors`, and `sensor=NAME` on `/flows`, `/packets` and `/queries`: the other
//!   sensors of `serve --peers` ([`sensors`]).

pub mod asset;
pub mod login;
pub mod packets;
pub mod recording;
pub mod sensors;
pub mod timeline;

use std::time::{SystemTime, UNIX_EPOCH};

use corecap_store::query::QuerySpec;
use hyper::header::{HeaderMap, ACCEPT};

use crate::http::Response;
use crate::manager::Manager;
use login::{logins, Access};

/// What a route of the page answers.
pub enum Answer {
    /// A response as the API's others, with headers of its own (`Set-Cookie`, caching,
    /// the page's content policy).
    Page(Response, Vec<(&'static str, String)>),
    /// A query streamed as a download under this file name.
    Query(QuerySpec, String),
    /// A download written by a function of its own (a peer's answer passed on), under
    /// this file name.
    Stream(Download, String),
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answer::Page(r, h) => f.debug_tuple("Page").field(r).field(h).finish(),
            Answer::Query(q, n) => f.debug_tuple("Query").field(q).field(n).finish(),
            Answer::Stream(_, n) => f.debug_tuple("Stream").field(n).finish(),
        }
    }
}

/// What writes a download ([`Answer::Stream`]); an error cuts it.
pub type Download = Box<dyn FnOnce(&mut dyn std::io::Write) -> std::io::Result<()> + Send>;

/// What the route knows of the connection.
#[derive(Debug, Clone)]
pub struct Conn {
    /// How the request got in; None: not at all (the public routes only).
    pub access: Option<Access>,
    /// The listener's bearer token, if it has one.
    pub token: Option<std::sync::Arc<String>>,
    /// The connection is TLS.
    pub tls: bool,
}

/// Whether a request is for the HTML page (a browser's `Accept`).
fn wants_html(h: &HeaderMap) -> bool {
    h.get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/html"))
}

/// Whether a request is served without a login: the page and its files, which hold no
/// data, and the login itself.
pub fn is_public(method: &str, path: &str, h: &HeaderMap) -> bool {
    match (method, path) {
        ("GET", "/") => wants_html(h),
        ("GET", "/session") | ("POST", "/login") => true,
        ("GET", p) => p.starts_with("/ui/"),
        _ => false,
    }
}

/// Answers a request for one of the page's routes; None for the API's others.
pub fn route(
    m: &Manager,
    c: &Conn,
    method: &str,
    path: &str,
    query: &str,
    h: &HeaderMap,
    body: &[u8],
) -> Option<Answer> {
    let plain = |r| Some(Answer::Page(r, Vec::new()));
    if c.access.is_none() && !is_public(method, path, h) {
        return None;
    }
    let path = path.trim_end_matches('/');
    if let (true, Some((name, rest))) = (method == "GET", sensors::named(query)) {
        return match path {
            "/queries" => {
                let file = format!("corecap-{name}.pcapng");
                let f: Download = Box::new(move |w| sensors::download(&name, &rest, w));
                Some(Answer::Stream(f, file))
            }
            "/flows" | "/packets" => plain(sensors::relay(&name, path, &rest)),
            _ => None,
        };
    }
    match (method, path) {
        ("GET", "") if wants_html(h) => Some(asset::page()),
        ("GET", p) if p.starts_with("/ui/") => Some(asset::file(&p[4..])),
        ("GET", "/session") => plain(session(c)),
        ("POST", "/login") => Some(login(c, body)),
        ("POST", "/logout") => Some(logout(c, h)),
        ("GET", "/timeline") => plain(timeline::answer(m, query)),
        ("GET", "/recording") => plain(recording::answer(m)),
        ("GET", "/sensors") => plain(sensors::list(recording::summary(m))),
        ("GET", "/packets") => plain(packets::answer(m, query)),
        ("GET", "/filter") => plain(filter_check(query)),
        ("GET", "/queries") => Some(download(m, query)),
        _ => None,
    }
}

/// `GET /session`: how the caller is logged in, and the CSRF token its changes carry.
fn session(c: &Conn) -> Response {
    let (how, csrf) = match &c.access {
        None => ("none", String::new()),
        Some(Access::Bearer) => ("bearer", String::new()),
        Some(Access::Cookie { csrf }) => ("login", csrf.clone()),
        Some(Access::Open { tls: true }) => ("certificate", logins().page_csrf().to_owned()),
        Some(Access::Open { tls: false }) => ("socket", logins().page_csrf().to_owned()),
    };
    Response::json(200, &serde_json::json!({"login": how, "csrf": csrf}))
}

/// `POST /login` with `{"token": "..."}`: the cookie of a new login.
fn login(c: &Conn, body: &[u8]) -> Answer {
    #[derive(serde::Deserialize)]
    struct Body {
        token: String,
    }
    let Some(want) = &c.token else {
        let r = Response::error(400, "this listener needs no login");
        return Answer::Page(r, Vec::new());
    };
    let given = serde_json::from_slice::<Body>(body).map(|b| b.token);
    let ok = given.is_ok_and(|t| login::token_eq(t.trim(), want));
    if !ok {
        let r = Response::error(401, "wrong token (see serve --token-file)");
        return Answer::Page(r, Vec::new());
    }
    let (id, csrf) = logins().open();
    let r = Response::json(200, &serde_json::json!({"login": "login", "csrf": csrf}));
    let cookie = login::set_cookie(Some(&id), c.tls);
    Answer::Page(r, vec![("set-cookie", cookie)])
}

/// `POST /logout`: ends the cookie's login.
fn logout(c: &Conn, h: &HeaderMap) -> Answer {
    if let Some(id) = login::cookie_id(h) {
        logins().close(&id);
    }
    let r = Response::json(200, &serde_json::json!({"login": "none"}));
    Answer::Page(r, vec![("set-cookie", login::set_cookie(None, c.tls))])
}

/// `GET /filter?expr=`: libpcap's word on a filter, for Ethernet.
fn filter_check(query: &str) -> Response {
    let expr = crate::flows::query_pairs(query)
        .ok()
        .and_then(|p| p.into_iter().find(|(k, _)| k == "expr"))
        .map(|(_, v)| v)
        .unwrap_or_default();
    let error = if expr.trim().is_empty() {
        None
    } else {
        corecap_linux::filter::compile_offline(1, 262_144, &expr)
            .err()
            .map(|e| format!("filter: {}", corecap_linux::error_chain(&e)))
    };
    Response::json(200, &serde_json::json!({"error": error}))
}

/// The query of the URL parameters, as `POST /queries` takes them in its body; `Err` is
/// the response.
pub fn query_spec(m: &Manager, pairs: Vec<(String, String)>) -> Result<QuerySpec, Response> {
    let mut body = serde_json::Map::new();
    for (k, v) in pairs {
        if !v.trim().is_empty() {
            body.insert(k, serde_json::Value::String(v));
        }
    }
    let body = serde_json::to_vec(&body).map_err(|e| Response::error(500, e.to_string()))?;
    crate::query::spec(m, &body)
}

/// `GET /queries?...`: the query's answer as a download.
fn download(m: &Manager, query: &str) -> Answer {
    let pairs = match crate::flows::query_pairs(query) {
        Ok(p) => p,
        Err(e) => return Answer::Page(Response::error(400, e), Vec::new()),
    };
    let named = pairs
        .iter()
        .any(|(k, v)| k == "community_id" && !v.is_empty());
    match query_spec(m, pairs) {
        Ok(spec) => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let what = if named { "session" } else { "search" };
            Answer::Query(spec, format!("corecap-{what}-{now}.pcapng"))
        }
        Err(r) => Answer::Page(r, Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    #[test]
    fn test_public_routes() {
        let mut html = HeaderMap::new();
        html.insert(ACCEPT, HeaderValue::from_static("text/html,*/*"));
        let none = HeaderMap::new();
        assert!(is_public("GET", "/", &html));
        assert!(
            !is_public("GET", "/", &none),
            "the JSON description keeps its rule"
        );
        assert!(is_public("GET", "/ui/app.js", &none));
        assert!(is_public("POST", "/login", &none));
        assert!(!is_public("POST", "/logout", &none));
        assert!(!is_public("GET", "/timeline", &none));
        assert!(!is_public("GET", "/captures", &html));
    }

    #[test]
    fn test_filter_check_gives_libpcap_s_message() {
        let r = filter_check("expr=tcp+port+80");
        assert!(String::from_utf8_lossy(&r.body).contains("\"error\": null"));
        let r = filter_check("expr=tcp+prot+80");
        assert_eq!(r.status, 200);
        let body = String::from_utf8_lossy(&r.body);
        assert!(body.contains("syntax error"), "{body}");
    }
}
