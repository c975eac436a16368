//! The control API's listeners and routes: a Unix socket (mode 0600: the file's
//! permission is the access control) and, optionally, a loopback TCP port that wants a
//! bearer token. One short-lived thread per connection, at most [`MAX_CONNECTIONS`].
//!
//! Slow or silent clients cannot lock others out: a request must arrive whole within
//! [`IO_TIMEOUT`] (one deadline for the head and the body, not per read), the token is
//! checked on the head before the body is read, and when every slot is taken a new
//! connection closes the oldest one still sending its request (an answered or
//! authenticated request is never cut).

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::api::StartRequest;
use crate::http::{self, Request, Response};
use crate::manager::Manager;

/// Connections served at once; more get 503.
pub const MAX_CONNECTIONS: usize = 64;
/// How long a client may take to send its request.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Binds the Unix socket at `path` with mode 0600. A stale socket file is replaced; a
/// socket with a daemon behind it, or any other file, is an error.
pub fn bind_unix(path: &Path) -> io::Result<UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display()))
        })?;
    }
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_socket() {
            return Err(io::Error::other(format!(
                "{} exists and is not a socket; not replacing it",
                path.display()
            )));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(io::Error::other(format!(
                "another daemon is listening on {}",
                path.display()
            )));
        }
        std::fs::remove_file(path)?;
    }
    let l = UnixListener::bind(path)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot bind {}: {e}", path.display())))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(l)
}

/// Binds a loopback TCP address; any other address is refused.
pub fn bind_tcp(addr: SocketAddr) -> io::Result<TcpListener> {
    if !addr.ip().is_loopback() {
        return Err(io::Error::other(format!(
            "{addr} is not a loopback address; the API listens on 127.0.0.1 or ::1 only (use the Unix socket, or a tunnel, from elsewhere)"
        )));
    }
    TcpListener::bind(addr)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot bind {addr}: {e}")))
}

/// Compares a token in time independent of where it differs.
fn token_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |x, (p, q)| x | (p ^ q)) == 0
}

/// A listener and its access rule.
#[derive(Debug)]
pub enum Listener {
    /// Unix socket: whoever can open the file may call.
    Unix(UnixListener, PathBuf),
    /// Loopback TCP: each request needs `Authorization: Bearer TOKEN`.
    Tcp(TcpListener, Arc<String>),
}

/// A stream whose reads share one deadline: each read may wait only for the time left.
struct Deadline<S> {
    s: S,
    until: Instant,
}

/// A socket whose read timeout can be set.
trait ReadTimeout {
    fn set_timeout(&self, d: Option<Duration>) -> io::Result<()>;
    /// A second handle, to close it from another thread.
    fn handle(&self) -> io::Result<Box<dyn Fn() + Send>>;
}

/// Both socket types have the same inherent methods, but no trait that names them.
macro_rules! read_timeout {
    ($($t:ty),*) => {$(
        impl ReadTimeout for $t {
            fn set_timeout(&self, d: Option<Duration>) -> io::Result<()> {
                self.set_read_timeout(d)
            }
            fn handle(&self) -> io::Result<Box<dyn Fn() + Send>> {
                let c = self.try_clone()?;
                Ok(Box::new(move || {
                    let _ = c.shutdown(std::net::Shutdown::Both);
                }))
            }
        }
    )*};
}

read_timeout!(UnixStream, TcpStream);

impl<S: ReadTimeout> ReadTimeout for &mut S {
    fn set_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        (**self).set_timeout(d)
    }
    fn handle(&self) -> io::Result<Box<dyn Fn() + Send>> {
        (**self).handle()
    }
}

impl<S: io::Read + ReadTimeout> io::Read for Deadline<S> {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.s.set_timeout(Some(left))?;
        self.s.read(b)
    }
}

/// Connections still sending their request, oldest first: (id, a way to close it).
type Pending = std::sync::Mutex<std::collections::VecDeque<(u64, Box<dyn Fn() + Send>)>>;

/// Serves a listener on a thread of its own.
pub fn spawn(listener: Listener, m: Arc<Manager>) -> io::Result<std::thread::JoinHandle<()>> {
    let active = Arc::new(AtomicUsize::new(0));
    let pending: Arc<Pending> = Arc::default();
    std::thread::Builder::new()
        .name("corecap-api".into())
        .spawn(move || match listener {
            Listener::Unix(l, _) => {
                for s in l.incoming().flatten() {
                    let _ = s.set_write_timeout(Some(IO_TIMEOUT));
                    connection(s, None, &m, &active, &pending);
                }
            }
            Listener::Tcp(l, token) => {
                for s in l.incoming().flatten() {
                    let _ = s.set_write_timeout(Some(IO_TIMEOUT));
                    let _ = TcpStream::set_nodelay(&s, true);
                    connection(s, Some(token.clone()), &m, &active, &pending);
                }
            }
        })
}

/// Hands a connection to a thread of its own. When every slot is taken, the oldest
/// connection still sending its request is closed to make room (a new client that cannot
/// get a slot within a second gets 503).
fn connection<S>(
    s: S,
    token: Option<Arc<String>>,
    m: &Arc<Manager>,
    active: &Arc<AtomicUsize>,
    pending: &Arc<Pending>,
) where
    S: io::Read + io::Write + ReadTimeout + Send + 'static,
{
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let deadline = Instant::now() + Duration::from_secs(1);
    // Relaxed: a counter for a limit; no memory is published through it.
    while active.fetch_add(1, Ordering::Relaxed) >= MAX_CONNECTIONS {
        active.fetch_sub(1, Ordering::Relaxed);
        let oldest = pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front();
        match oldest {
            Some((_, close)) => close(),
            None if Instant::now() >= deadline => {
                let mut s = s;
                let _ = http::write_response(&mut s, &Response::error(503, "too many connections"));
                return;
            }
            None => {}
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Relaxed: a unique id, nothing else.
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    if let Ok(close) = s.handle() {
        pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back((id, close));
    }
    let m = m.clone();
    let active2 = active.clone();
    let pending2 = pending.clone();
    let spawned = std::thread::Builder::new()
        .name("corecap-conn".into())
        .spawn(move || {
            serve_one(s, token.as_deref().map(|t| t.as_str()), &m, &|| {
                pending2
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .retain(|(i, _)| *i != id);
            });
            pending2
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|(i, _)| *i != id);
            active2.fetch_sub(1, Ordering::Relaxed);
        });
    if spawned.is_err() {
        pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(i, _)| *i != id);
        active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Reads one request (whole within [`IO_TIMEOUT`], the token checked before the body),
/// answers it, closes. `received` is called once the request is in: from then on the
/// connection is no longer one that a newcomer may close.
fn serve_one<S: io::Read + io::Write + ReadTimeout>(
    mut s: S,
    token: Option<&str>,
    m: &Manager,
    received: &dyn Fn(),
) {
    let read = http::read_request_checked(
        Deadline {
            s: &mut s,
            until: Instant::now() + IO_TIMEOUT,
        },
        |bearer| token.is_none_or(|t| bearer.is_some_and(|b| token_eq(b, t))),
    );
    received();
    let _ = s.set_timeout(Some(IO_TIMEOUT));
    let resp = match read {
        Ok(req) => {
            // The request's arrival: its last byte is in.
            let (t0, wall) = (Instant::now(), SystemTime::now());
            match token {
                _ if req.method == "POST" && req.path.trim_end_matches('/') == "/queries" => {
                    match crate::query::spec(m, &req.body) {
                        Ok(spec) => {
                            m.count_response(200);
                            if let Err(e) = crate::query::stream(m, &spec, &mut s) {
                                eprintln!("corecap: query stream ended: {e}");
                            }
                            return;
                        }
                        Err(r) => r,
                    }
                }
                _ => route(m, req, t0, wall),
            }
        }
        Err(Some(r)) => r,
        Err(None) => return,
    };
    m.count_response(resp.status);
    let _ = http::write_response(&mut s, &resp);
}

fn view_json<T: serde::Serialize>(status: u16, v: &T) -> Response {
    match serde_json::to_value(v) {
        Ok(j) => Response::json(status, &j),
        Err(e) => Response::error(500, e.to_string()),
    }
}

/// Answers one request.
pub fn route(m: &Manager, req: Request, t0: Instant, wall: SystemTime) -> Response {
    let path = req.path.trim_end_matches('/');
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let r = |x: Result<crate::api::CaptureView, crate::manager::ApiError>, ok: u16| match x {
        Ok(v) => view_json(ok, &v),
        Err(e) => Response::error(e.status, e.message),
    };
    match (req.method.as_str(), parts.as_slice()) {
        ("GET", []) => Response::json(
            200,
            &serde_json::json!({"service": "corecap", "version": env!("CARGO_PKG_VERSION"),
                "endpoints": ["/captures", "/captures/{id}", "/metrics", "/cores", "/queries"]}),
        ),
        ("GET", ["captures"]) => view_json(200, &m.list()),
        ("POST", ["captures"]) => match serde_json::from_slice::<StartRequest>(&req.body) {
            Ok(s) => r(m.start(s, t0, wall), 201),
            Err(e) => Response::error(400, format!("invalid request JSON: {e}")),
        },
        ("GET", ["captures", id]) => r(m.show(id), 200),
        ("DELETE", ["captures", id]) => r(m.stop(id), 200),
        ("GET", ["metrics"]) => Response::text(200, m.metrics()),
        ("GET", ["cores"]) => Response::json(200, &m.cores()),
        (_, ["captures"]) | (_, ["captures", _]) | (_, ["metrics"]) | (_, ["cores"]) | (_, []) => {
            Response::error(
                405,
                format!("{} is not allowed on {}", req.method, req.path),
            )
        }
        _ => Response::error(404, format!("no endpoint {}", req.path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_token_eq() {
        assert!(token_eq("abc", "abc"));
        assert!(!token_eq("abc", "abd"));
        assert!(!token_eq("abc", "abcd"));
    }

    #[test]
    fn test_tcp_must_be_loopback() {
        let e = bind_tcp("0.0.0.0:0".parse().expect("addr")).expect_err("refused");
        assert!(e.to_string().contains("not a loopback"));
    }
}
