//! The client's side of a connection to a daemon, shared by `request` (one daemon) and
//! the fan-out (`fleet`, several): connecting within `--timeout`, and saying what went
//! wrong in the user's words (a refused certificate, a timeout, the daemon's message).

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use corecap_manager::http;
use serde_json::Value;

use crate::config::Endpoint;

/// A connection to the daemon.
pub(crate) trait Conn: std::io::Read + std::io::Write + Send {}
impl<T: std::io::Read + std::io::Write + Send> Conn for T {}

/// Connects to the daemon; returns the connection and the token to send on it.
/// Connecting and each read or write may take `timeout` (`--timeout`) at most, so a daemon
/// that takes the connection and never answers fails the request (see [`is_timeout`]).
pub(crate) fn connect(e: &Endpoint, timeout: Duration) -> Result<(Box<dyn Conn>, Option<&str>)> {
    // `--timeout` is above 0, but may round to a zero Duration, which sockets refuse.
    let timeout = timeout.max(Duration::from_millis(1));
    match e {
        Endpoint::Tcp {
            url,
            host,
            token,
            tls,
        } => {
            let s = tcp(host, timeout).with_context(|| {
                format!("connecting to {url} (is corecap serve --listen running there?)")
            })?;
            let Some(tls) = tls else {
                return Ok((Box::new(s), token.as_deref()));
            };
            let s = corecap_manager::tls::connect(tls.config.clone(), &tls.name, s)
                .with_context(|| format!("TLS with {url}"))?;
            Ok((Box::new(s), token.as_deref()))
        }
        Endpoint::Unix(socket) => {
            let s = std::os::unix::net::UnixStream::connect(socket).with_context(|| {
                format!(
                    "connecting to {} (is corecap serve running? --socket selects another)",
                    socket.display()
                )
            })?;
            s.set_read_timeout(Some(timeout))?;
            s.set_write_timeout(Some(timeout))?;
            Ok((Box::new(s), None))
        }
    }
}

/// A TCP connection to `host` (HOST:PORT), within `t`, which then bounds each read and
/// write too.
fn tcp(host: &str, t: Duration) -> std::io::Result<std::net::TcpStream> {
    use std::net::ToSocketAddrs;
    let mut last = std::io::Error::other(format!("{host}: no address"));
    for addr in host.to_socket_addrs()? {
        match std::net::TcpStream::connect_timeout(&addr, t) {
            Ok(s) => {
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(t))?;
                s.set_write_timeout(Some(t))?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// An I/O error from a daemon, with what a TLS alert means for the user: under TLS 1.3
/// the daemon refuses a client's certificate after the handshake, at the first read.
pub(crate) fn refused(e: std::io::Error) -> anyhow::Error {
    let alert = e.to_string().contains("alert");
    let e = anyhow::Error::from(e);
    if alert {
        e.context("the daemon refused this client's certificate: give --tls-cert and --tls-key signed by the CA it trusts (its --tls-client-ca)")
    } else {
        e
    }
}

/// Whether `e` comes from a socket's timeout: a read or write that waited `--timeout`
/// (EAGAIN, which the OS words as "Resource temporarily unavailable") or a connect that did.
pub(crate) fn is_timeout(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(|e| {
            matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            )
        })
}

/// What a timeout of `t` says.
pub(crate) fn timed_out(t: Duration) -> String {
    format!("timed out after {} s", t.as_secs_f64())
}

/// The daemon's message in an error body: its `"error"`, or the body itself.
pub(crate) fn error_message(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned())
}

/// `e` as it is, or for a timeout `DAEMON: timed out after N s`, naming the daemon by its
/// URL or socket.
pub(crate) fn named(e: anyhow::Error, daemon: &Endpoint, t: Duration) -> anyhow::Error {
    if is_timeout(&e) {
        anyhow!("{}: {}", daemon.label(), timed_out(t))
    } else {
        e
    }
}

/// Sends one request to the daemon, waiting at most `t` for each step; returns the status
/// and the body.
pub(crate) fn call(
    e: &Endpoint,
    t: Duration,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
) -> Result<(u16, Vec<u8>)> {
    let sent = connect(e, t)
        .and_then(|(s, token)| http::call(s, method, path, token, body).map_err(refused));
    sent.map_err(|x| named(x, e, t))
}

/// Calls and turns an error status into an error with the daemon's message.
pub(crate) fn call_ok(
    e: &Endpoint,
    t: Duration,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
) -> Result<Vec<u8>> {
    let (status, body) = call(e, t, method, path, body)?;
    if status >= 300 {
        bail!("{} (HTTP {status})", error_message(&body));
    }
    Ok(body)
}
