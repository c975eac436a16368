//! The control API's listeners and routes: a Unix socket (mode 0600: the file's
//! permission is the access control) and, optionally, a loopback TCP port that wants a
//! bearer token. One short-lived thread per connection, at most [`MAX_CONNECTIONS`].

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

/// Serves a listener on a thread of its own.
pub fn spawn(listener: Listener, m: Arc<Manager>) -> io::Result<std::thread::JoinHandle<()>> {
    let active = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("corecap-api".into())
        .spawn(move || match listener {
            Listener::Unix(l, _) => {
                for s in l.incoming().flatten() {
                    let _ = s.set_read_timeout(Some(IO_TIMEOUT));
                    let _ = s.set_write_timeout(Some(IO_TIMEOUT));
                    connection(s, None, &m, &active);
                }
            }
            Listener::Tcp(l, token) => {
                for s in l.incoming().flatten() {
                    let _ = s.set_read_timeout(Some(IO_TIMEOUT));
                    let _ = s.set_write_timeout(Some(IO_TIMEOUT));
                    let _ = TcpStream::set_nodelay(&s, true);
                    connection(s, Some(token.clone()), &m, &active);
                }
            }
        })
}

/// Hands a connection to a thread of its own (or answers 503 when too many are open).
fn connection<S>(s: S, token: Option<Arc<String>>, m: &Arc<Manager>, active: &Arc<AtomicUsize>)
where
    S: io::Read + io::Write + Send + 'static,
{
    // Relaxed: a counter for a limit; no memory is published through it.
    if active.fetch_add(1, Ordering::Relaxed) >= MAX_CONNECTIONS {
        active.fetch_sub(1, Ordering::Relaxed);
        let mut s = s;
        let _ = http::write_response(&mut s, &Response::error(503, "too many connections"));
        return;
    }
    let m = m.clone();
    let active2 = active.clone();
    let spawned = std::thread::Builder::new()
        .name("corecap-conn".into())
        .spawn(move || {
            serve_one(s, token.as_deref().map(|t| t.as_str()), &m);
            active2.fetch_sub(1, Ordering::Relaxed);
        });
    if spawned.is_err() {
        active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Reads one request, answers it, closes.
fn serve_one<S: io::Read + io::Write>(mut s: S, token: Option<&str>, m: &Manager) {
    let resp = match http::read_request(&mut s) {
        Ok(req) => {
            // The request's arrival: its last byte is in.
            let (t0, wall) = (Instant::now(), SystemTime::now());
            match token {
                Some(t) if !req.bearer.as_deref().is_some_and(|b| token_eq(b, t)) => {
                    Response::error(
                        401,
                        "this address needs Authorization: Bearer TOKEN (see serve --token-file)",
                    )
                }
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
