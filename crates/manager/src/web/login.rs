//! Who a request comes from, and whether a browser's change is its own (CSRF).
//!
//! A listener with a bearer token (loopback TCP, or TLS with `--token-file`) also takes a
//! login of the page: `POST /login` with the token gives a cookie (`corecap_session`,
//! `HttpOnly`, `SameSite=Strict`, `Path=/`, `Secure` under TLS) that holds a random id of
//! a login the daemon keeps. The table is bounded ([`MAX_LOGINS`], the least recently used
//! goes first) and each login expires ([`IDLE`] unused, [`LIFETIME`] at most), so the
//! cookie is worth nothing once the daemon restarts, the user logs out, or it ages.
//!
//! A change (any method but `GET` and `HEAD`) made with that cookie must carry the
//! login's own CSRF token in `X-CSRF-Token`: a page of another site can make the browser
//! send the cookie (`SameSite=Strict` already stops that in current browsers), but can
//! neither read the token nor set a header without a CORS preflight, which the API never
//! grants. A listener with no token (the Unix socket, TLS where the client certificate is
//! the login) has no cookie: a browser's change there (it sends `Origin` or
//! `Sec-Fetch-Site`) must carry the daemon's page token ([`Logins::page_csrf`]), given by
//! `GET /session` to whoever may call, so another site's form posted through the user's
//! certificate is refused. Clients that are not browsers (`corecap request`, curl) send
//! neither header and are served as before; a bearer token is never sent by a browser on
//! its own, so a request that carries it needs no CSRF token.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use hyper::header::{HeaderMap, COOKIE, ORIGIN};

use crate::http::Response;

/// Logins kept at once; past that the least recently used is dropped.
pub const MAX_LOGINS: usize = 64;
/// A login unused this long is gone.
pub const IDLE: Duration = Duration::from_secs(8 * 3600);
/// A login is gone this long after it was made, used or not.
pub const LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// The cookie's name.
pub const COOKIE_NAME: &str = "corecap_session";
/// The header that carries the CSRF token.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// How a request is allowed in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// The listener needs no token: the Unix socket, or TLS where the certificate is the
    /// login (`tls` true).
    Open {
        /// The connection is TLS.
        tls: bool,
    },
    /// `Authorization: Bearer TOKEN`.
    Bearer,
    /// The page's login cookie; its CSRF token.
    Cookie {
        /// The token a change must carry.
        csrf: String,
    },
}

/// One login of the page.
#[derive(Debug)]
struct Login {
    csrf: String,
    made: Instant,
    used: Instant,
}

/// The daemon's logins (one table per process: one daemon per process).
#[derive(Debug)]
pub struct Logins {
    table: Mutex<HashMap<String, Login>>,
    page_csrf: String,
}

/// The process's logins.
pub fn logins() -> &'static Logins {
    static LOGINS: OnceLock<Logins> = OnceLock::new();
    LOGINS.get_or_init(Logins::new)
}

/// 32 random bytes as hex; a fixed-looking value only if the kernel gives no randomness,
/// which it always does on Linux (getrandom blocks until the pool is ready).
fn random() -> String {
    crate::new_token().unwrap_or_else(|e| panic!("no randomness for a login: {e}"))
}

impl Logins {
    /// An empty table, with a page token of its own.
    fn new() -> Logins {
        Logins {
            table: Mutex::default(),
            page_csrf: random(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Login>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new login: its id (the cookie's value) and its CSRF token.
    pub fn open(&self) -> (String, String) {
        let now = Instant::now();
        let mut t = self.lock();
        t.retain(|_, l| alive(l, now));
        while t.len() >= MAX_LOGINS {
            let oldest = t.iter().min_by_key(|(_, l)| l.used).map(|(k, _)| k.clone());
            match oldest {
                Some(k) => t.remove(&k),
                None => break,
            };
        }
        let (id, csrf) = (random(), random());
        let l = Login {
            csrf: csrf.clone(),
            made: now,
            used: now,
        };
        t.insert(id.clone(), l);
        (id, csrf)
    }

    /// The CSRF token of the login `id`, if it is alive (and now used).
    pub fn check(&self, id: &str) -> Option<String> {
        let now = Instant::now();
        let mut t = self.lock();
        let l = t.get_mut(id)?;
        if !alive(l, now) {
            t.remove(id);
            return None;
        }
        l.used = now;
        Some(l.csrf.clone())
    }

    /// Ends the login `id`.
    pub fn close(&self, id: &str) {
        self.lock().remove(id);
    }

    /// The token a browser's change must carry where the listener needs no login.
    pub fn page_csrf(&self) -> &str {
        &self.page_csrf
    }
}

/// Compares a token in time independent of where it differs.
pub fn token_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |x, (p, q)| x | (p ^ q)) == 0
}

fn alive(l: &Login, now: Instant) -> bool {
    now.duration_since(l.used) < IDLE && now.duration_since(l.made) < LIFETIME
}

/// The login id the request's cookie names, if any.
pub fn cookie_id(h: &HeaderMap) -> Option<String> {
    h.get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE_NAME)
        .map(|(_, v)| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The access a live login cookie gives.
pub fn by_cookie(h: &HeaderMap) -> Option<Access> {
    let id = cookie_id(h)?;
    logins().check(&id).map(|csrf| Access::Cookie { csrf })
}

/// The `Set-Cookie` value of a login, or of its end (`id` None).
pub fn set_cookie(id: Option<&str>, tls: bool) -> String {
    let secure = if tls { "; Secure" } else { "" };
    match id {
        Some(id) => format!("{COOKIE_NAME}={id}; HttpOnly; SameSite=Strict; Path=/{secure}"),
        None => format!("{COOKIE_NAME}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{secure}"),
    }
}

/// Whether `method` changes nothing (CSRF does not apply).
fn safe(method: &str) -> bool {
    matches!(method, "GET" | "HEAD")
}

/// Whether the request comes from a browser (it says where the page that made it is).
fn from_browser(h: &HeaderMap) -> bool {
    h.contains_key(ORIGIN) || h.contains_key("sec-fetch-site")
}

/// Refuses a change that a browser may have made for another site (see the module doc);
/// `Err` is the 403.
pub fn check_csrf(access: &Access, method: &str, h: &HeaderMap) -> Result<(), Response> {
    if safe(method) {
        return Ok(());
    }
    let sent = h.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
    let refuse = |why: &str| Err(Response::error(403, why.to_owned()));
    let cross = h
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|s| s == "cross-site" || s == "same-site");
    match access {
        Access::Bearer => Ok(()),
        _ if cross => refuse("a change asked by a page of another site is refused"),
        Access::Cookie { csrf } => match sent {
            Some(s) if token_eq(s, csrf) => Ok(()),
            _ => refuse("a change made with the page's login needs its X-CSRF-Token"),
        },
        Access::Open { .. } if !from_browser(h) => Ok(()),
        Access::Open { .. } => match sent {
            Some(s) if token_eq(s, logins().page_csrf()) => Ok(()),
            _ => refuse("a change from a browser needs the page's X-CSRF-Token"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn test_login_cookie_and_its_csrf() {
        let (id, csrf) = logins().open();
        let h = headers(&[("cookie", &format!("a=b; {COOKIE_NAME}={id}"))]);
        let access = by_cookie(&h).expect("a live login");
        assert_eq!(access, Access::Cookie { csrf: csrf.clone() });
        assert!(check_csrf(&access, "GET", &h).is_ok());
        let r = check_csrf(&access, "POST", &h).expect_err("no token");
        assert_eq!(r.status, 403);
        let with = headers(&[(CSRF_HEADER, &csrf)]);
        assert!(check_csrf(&access, "DELETE", &with).is_ok());
        let wrong = headers(&[(CSRF_HEADER, "0")]);
        assert!(check_csrf(&access, "POST", &wrong).is_err());
        logins().close(&id);
        assert!(by_cookie(&h).is_none(), "logged out");
        assert!(by_cookie(&headers(&[("cookie", "corecap_session=nope")])).is_none());
    }

    #[test]
    fn test_browser_changes_on_an_open_listener_need_the_page_token() {
        let open = Access::Open { tls: true };
        // Not a browser: as before.
        assert!(check_csrf(&open, "POST", &HeaderMap::new()).is_ok());
        let cross = headers(&[
            ("origin", "https://evil.example"),
            ("sec-fetch-site", "cross-site"),
        ]);
        assert_eq!(check_csrf(&open, "POST", &cross).unwrap_err().status, 403);
        let page = headers(&[
            ("origin", "https://sensor"),
            (CSRF_HEADER, logins().page_csrf()),
        ]);
        assert!(check_csrf(&open, "POST", &page).is_ok());
        // A cross-site request is refused even with a token it could not have read.
        let both = headers(&[
            ("sec-fetch-site", "cross-site"),
            (CSRF_HEADER, logins().page_csrf()),
        ]);
        assert!(check_csrf(&open, "POST", &both).is_err());
        assert!(check_csrf(&Access::Bearer, "POST", &cross).is_ok());
    }

    #[test]
    fn test_the_table_is_bounded() {
        let t = Logins::new();
        let first = t.open().0;
        let second = t.open().0;
        assert!(t.check(&first).is_some(), "used: now the newest");
        for _ in 0..MAX_LOGINS - 1 {
            t.open();
        }
        assert!(
            t.check(&second).is_none(),
            "the least recently used went first"
        );
        assert!(t.check(&first).is_some());
        assert_eq!(t.lock().len(), MAX_LOGINS);
    }

    #[test]
    fn test_set_cookie() {
        let c = set_cookie(Some("ab"), true);
        assert_eq!(
            c,
            "corecap_session=ab; HttpOnly; SameSite=Strict; Path=/; Secure"
        );
        assert!(set_cookie(None, false).contains("Max-Age=0"));
    }
}
