//! The other sensors the page searches with this one (`serve --peers FILE`): one
//! `[NAME=]URL` a line (`https://HOST:PORT`, `#` comments), asked over mutual TLS with the
//! client certificate of `--peer-tls-cert` (`--peer-tls-ca` checks theirs), as `corecap
//! request --sensor` asks them.
//!
//! - `GET /sensors`: this sensor and each peer, asked for its `GET /recording` at once
//!   (each within [`TIMEOUT`]): reachable or why not, its reach, disk and drops.
//! - `GET /flows`, `GET /packets`, `GET /queries` with `sensor=NAME`: the same request
//!   made to that peer and its answer passed on (a download streamed through), so the page
//!   lists, opens and downloads a peer's sessions as its own. The page asks every sensor
//!   and applies `request`'s partial rule itself (see `search.js`).

use std::io::{self, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::http::{self, Response};
use crate::tls::ClientConfig;

/// How long a peer may take to connect, and to send each part of its answer.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// One peer: its name and where it listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Its name on the page (`NAME=`, else its host).
    pub name: String,
    /// Its URL as given.
    pub url: String,
    /// The name its certificate carries (the URL's host).
    host: String,
    /// `host:port`.
    addr: String,
}

/// The peers, and the TLS client they are asked with.
#[derive(Debug)]
pub struct Sensors {
    peers: Vec<Peer>,
    tls: Arc<ClientConfig>,
}

static SENSORS: OnceLock<Sensors> = OnceLock::new();

/// Makes `s` the daemon's peers (once, at its start).
pub fn install(s: Sensors) {
    let _ = SENSORS.set(s);
}

/// The daemon's peers, if it has any.
fn sensors() -> Option<&'static Sensors> {
    SENSORS.get()
}

/// Reads a peers file: `[NAME=]https://HOST:PORT` a line.
pub fn parse(text: &str) -> Result<Vec<Peer>, String> {
    let mut out: Vec<Peer> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (name, url) = match line.split_once('=') {
            Some((name, url)) if !name.contains('/') => (Some(name.trim()), url.trim()),
            _ => (None, line),
        };
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| format!("line {}: {url}: a peer is https://HOST:PORT", n + 1))?;
        let addr = rest.trim_end_matches('/');
        let (host, port) = addr
            .rsplit_once(':')
            .filter(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
            .ok_or_else(|| format!("line {}: {url}: no HOST:PORT", n + 1))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let name = name.map_or_else(|| host.clone(), str::to_owned);
        if name == "local" || out.iter().any(|p| p.name == name) {
            return Err(format!("line {}: the name {name} is taken", n + 1));
        }
        out.push(Peer {
            name,
            url: url.to_owned(),
            host,
            addr: format!("{}:{port}", addr.rsplit_once(':').map_or("", |x| x.0)),
        });
    }
    Ok(out)
}

impl Sensors {
    /// The peers of `file`, asked with the CA `ca` and the client certificate `cert`/`key`.
    pub fn load(
        file: &Path,
        ca: &Path,
        cert: Option<&Path>,
        key: Option<&Path>,
    ) -> io::Result<Sensors> {
        let text = std::fs::read_to_string(file)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", file.display())))?;
        let peers = parse(&text).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: {e}", file.display()),
            )
        })?;
        let tls = Arc::new(crate::tls::client_config(ca, cert, key)?);
        Ok(Sensors { peers, tls })
    }

    fn peer(&self, name: &str) -> Option<&Peer> {
        self.peers.iter().find(|p| p.name == name)
    }
}

/// A TLS connection to `p`, its timeouts set.
fn connect(s: &Sensors, p: &Peer) -> io::Result<impl io::Read + io::Write> {
    let addr = p
        .addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::other(format!("{}: no address", p.addr)))?;
    let tcp = TcpStream::connect_timeout(&addr, TIMEOUT)?;
    tcp.set_read_timeout(Some(TIMEOUT))?;
    tcp.set_write_timeout(Some(TIMEOUT))?;
    crate::tls::connect(s.tls.clone(), &p.host, tcp)
}

/// `GET path` of peer `p`: (status, body).
fn ask(s: &Sensors, p: &Peer, path: &str) -> io::Result<(u16, Vec<u8>)> {
    http::call(connect(s, p)?, "GET", path, None, None)
}

/// `GET /sensors` (see the module doc).
pub fn list(local: serde_json::Value) -> Response {
    let mut rows =
        vec![serde_json::json!({"name": "local", "url": null, "ok": true, "recording": local})];
    if let Some(s) = sensors() {
        let answers: Vec<serde_json::Value> = std::thread::scope(|sc| {
            let asks: Vec<_> = s
                .peers
                .iter()
                .map(|p| (p, sc.spawn(move || ask(s, p, "/recording"))))
                .collect();
            asks.into_iter()
                .map(|(p, h)| {
                    let got = h.join().unwrap_or_else(|_| Err(io::Error::other("failed")));
                    let (ok, error, recording) = match got {
                        Ok((200, body)) => (true, None, serde_json::from_slice::<serde_json::Value>(&body).ok()),
                        Ok((st, body)) => (false, Some(format!("{st}: {}", String::from_utf8_lossy(&body).trim())), None),
                        Err(e) => (false, Some(e.to_string()), None),
                    };
                    serde_json::json!({"name": p.name, "url": p.url, "ok": ok, "error": error, "recording": recording})
                })
                .collect()
        });
        rows.extend(answers);
    }
    Response::json(200, &serde_json::json!({ "sensors": rows }))
}

/// The peer a URL query names (`sensor=NAME`, not `local`), and the query without it.
pub fn named(query: &str) -> Option<(String, String)> {
    let pairs = crate::flows::query_pairs(query).ok()?;
    let name = pairs
        .iter()
        .find(|(k, v)| k == "sensor" && !v.is_empty() && v != "local")?
        .1
        .clone();
    let rest: Vec<&str> = query
        .split('&')
        .filter(|kv| kv.split('=').next() != Some("sensor"))
        .collect();
    Some((name, rest.join("&")))
}

/// `GET path?query` made to the peer `name`, its answer passed on whole.
pub fn relay(name: &str, path: &str, query: &str) -> Response {
    let Some((s, p)) = sensors().and_then(|s| s.peer(name).map(|p| (s, p))) else {
        return Response::error(404, format!("no sensor {name} (serve --peers)"));
    };
    match ask(s, p, &format!("{path}?{query}")) {
        Ok((status, body)) => Response {
            status,
            content_type: if path == "/flows" && status == 200 {
                "application/x-ndjson"
            } else {
                "application/json"
            },
            body,
        },
        Err(e) => Response::error(502, format!("sensor {name}: {e}")),
    }
}

/// A download from the peer `name` (`GET /queries?query`), copied to `out` as it comes;
/// an answer other than 200, or one cut short, is an error (the download fails).
pub fn download(name: &str, query: &str, out: &mut dyn Write) -> io::Result<()> {
    let (s, p) = sensors()
        .and_then(|s| s.peer(name).map(|p| (s, p)))
        .ok_or_else(|| io::Error::other(format!("no sensor {name}")))?;
    let mut out = out;
    let got = http::call_streaming(
        connect(s, p)?,
        "GET",
        &format!("/queries?{query}"),
        None,
        None,
        &mut out,
    )?;
    if got.status != 200 {
        return Err(io::Error::other(format!(
            "sensor {name}: {}: {}",
            got.status,
            String::from_utf8_lossy(&got.error).trim()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_parse_peers() {
        let p = parse("# the fleet\ns1=https://10.0.0.1:7443\nhttps://sensor2:7443/ # second\n")
            .unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(
            (p[0].name.as_str(), p[0].host.as_str(), p[0].addr.as_str()),
            ("s1", "10.0.0.1", "10.0.0.1:7443")
        );
        assert_eq!(
            (p[1].name.as_str(), p[1].addr.as_str()),
            ("sensor2", "sensor2:7443")
        );
        assert!(parse("http://a:1").unwrap_err().contains("https://"));
        assert!(parse("https://a").unwrap_err().contains("HOST:PORT"));
        assert!(parse("a=https://x:1\na=https://y:1")
            .unwrap_err()
            .contains("taken"));
        assert!(parse("local=https://x:1").is_err());
    }

    #[test]
    fn test_named() {
        assert_eq!(
            named("a=1&sensor=s1&b=2"),
            Some(("s1".into(), "a=1&b=2".into()))
        );
        assert_eq!(named("a=1&sensor=local"), None);
        assert_eq!(named("a=1"), None);
    }
}
