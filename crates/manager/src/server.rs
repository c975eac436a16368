//! The control API's listeners and routes: a Unix socket (mode 0600: the file's
//! permission is the access control) and, optionally, a TCP port: on loopback in clear
//! with a bearer token, or on any address with TLS and client certificates checked
//! against a CA ([`crate::tls`]), the bearer token optional on top. The TLS handshake
//! runs on the connection's own task within the request's deadline, after it has its
//! slot: a client whose certificate is refused never reaches a handler.
//!
//! HTTP/1.1 is hyper's (server side, HTTP/1 only). One tokio `current_thread` runtime, on
//! one thread named `corecap-api`, serves every listener; that thread runs on the allowed
//! CPUs less those capture uses when any are left ([`Manager::capture_cpus`]). Manager
//! calls that may block (a start takes about 15 ms, a stop waits for its threads) run on the
//! runtime's blocking pool (at most [`MAX_BLOCKING`] threads, `corecap-api-job`), so one
//! slow call stalls no other connection. A query (`POST /queries`) streams from a thread of
//! its own into a bounded channel that is the response body: the query waits while the
//! client reads slowly, and ends at its next write once the client is gone. Every thread of
//! the API runs `api_thread_start` first.
//!
//! One request per connection (`Connection: close` on every response). Slow, silent or
//! hostile clients cannot lock others out:
//! - one deadline for the whole request, head and body: [`IO_TIMEOUT`] from the moment
//!   the connection has its slot. A head not in by then closes the connection (hyper's
//!   header read timeout, set to what is left); a body not in by then gets 408. A write
//!   that makes no progress for [`IO_TIMEOUT`] ends the connection too.
//! - the token is checked on the head, before any byte of the body is read: a refused
//!   client gets 401 at once.
//! - a head over [`MAX_HEAD`], or with more than 100 header fields, gets 431 (hyper's
//!   answer, with an empty body); a body over [`MAX_BODY`] gets 413, by its
//!   `Content-Length` before it is read, or once that many bytes of a chunked body are in;
//!   a repeated `Content-Length` with different values, or a malformed head, gets 400
//!   (hyper).
//! - at most [`MAX_CONNECTIONS`] connections per listener. When every slot is taken, a
//!   newcomer closes the oldest connection still sending its head and takes its slot; a
//!   newcomer that gets no slot within a second gets 503. An authenticated or answered
//!   request is never cut.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONNECTION, CONTENT_TYPE};
use hyper::StatusCode;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::{mpsc, watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

use crate::api::StartRequest;
use crate::http::{self, Request, Response, MAX_BODY, MAX_HEAD};
use crate::manager::Manager;
use crate::web::login::{token_eq, Access};
use crate::web::Answer;

/// Connections served at once on one listener.
pub const MAX_CONNECTIONS: usize = 64;
/// Threads of the blocking pool that runs manager calls.
pub const MAX_BLOCKING: usize = 16;
/// How long a client may take to send its request, and a write may stall.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a newcomer waits for a slot before it gets 503.
const SLOT_WAIT: Duration = Duration::from_secs(1);
/// Chunks (up to 1 MiB each, the query's write buffer) a query may have in flight.
const QUERY_CHUNKS: usize = 4;

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

/// Binds a TCP address. In clear (`tls` false) only a loopback address is accepted; any
/// other needs TLS.
pub fn bind_tcp(addr: SocketAddr, tls: bool) -> io::Result<TcpListener> {
    if !addr.ip().is_loopback() && !tls {
        return Err(io::Error::other(format!(
            "{addr} is not a loopback address; in clear the API listens on 127.0.0.1 or ::1 only (give --tls-cert, --tls-key and --tls-client-ca to listen elsewhere)"
        )));
    }
    TcpListener::bind(addr)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot bind {addr}: {e}")))
}

/// A listener and its access rule.
#[derive(Debug)]
pub enum Listener {
    /// Unix socket: whoever can open the file may call.
    Unix(UnixListener, PathBuf),
    /// Loopback TCP: each request needs `Authorization: Bearer TOKEN`.
    Tcp(TcpListener, Arc<String>),
    /// TCP with TLS: each client presents a certificate the config's verifier accepts,
    /// and the bearer token when one is given.
    Tls(TcpListener, Arc<rustls::ServerConfig>, Option<Arc<String>>),
}

/// Runs first on every thread of the API: the runtime's, its blocking pool's and each
/// query's. These threads read requests (HTTP, JSON, filter expressions) and hold no
/// capability: they inherit none from the daemon's main thread, which dropped its own
/// once the opener thread was started ([`crate::opener`]), and this clears whatever a
/// caller that did not might have left. A spawn-mode start on a pool thread gets its
/// socket from the opener.
fn api_thread_start() {
    let _ = corecap_linux::privilege::drop_thread_capabilities();
}

/// The running API: the switch that closes its listeners. Dropped without [`Api::stop`],
/// the API serves on until the process ends.
#[derive(Debug)]
pub struct Api {
    stop: watch::Sender<bool>,
    closed: std::sync::mpsc::Receiver<()>,
}

impl Api {
    /// Closes the listeners and returns once they are closed (at most a second): no new
    /// connection is accepted from then on. Requests in flight go on; once they are all
    /// answered the API thread ends.
    pub fn stop(&self) {
        let _ = self.stop.send(true);
        let _ = self.closed.recv_timeout(Duration::from_secs(1));
    }
}

/// Serves the listeners on the API thread (see the module doc).
pub fn spawn(listeners: Vec<Listener>, m: Arc<Manager>) -> io::Result<Api> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .max_blocking_threads(MAX_BLOCKING)
        .thread_name("corecap-api-job")
        .on_thread_start(api_thread_start)
        .build()?;
    let accepts = {
        let _in_runtime = rt.enter();
        listeners
            .into_iter()
            .map(|l| {
                Ok(match l {
                    Listener::Unix(l, _) => {
                        l.set_nonblocking(true)?;
                        Accept::Unix(tokio::net::UnixListener::from_std(l)?)
                    }
                    Listener::Tcp(l, token) => {
                        l.set_nonblocking(true)?;
                        Accept::Tcp(tokio::net::TcpListener::from_std(l)?, Some(token), None)
                    }
                    Listener::Tls(l, config, token) => {
                        l.set_nonblocking(true)?;
                        let tls = tokio_rustls::TlsAcceptor::from(config);
                        Accept::Tcp(tokio::net::TcpListener::from_std(l)?, token, Some(tls))
                    }
                })
            })
            .collect::<io::Result<Vec<_>>>()?
    };
    let busy = m.capture_cpus();
    let free: Vec<u32> = corecap_linux::affinity::allowed_cpus()
        .into_iter()
        .filter(|c| !busy.contains(c))
        .collect();
    let (stop, stopped) = watch::channel(false);
    let (closed_tx, closed) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("corecap-api".into())
        .spawn(move || {
            // The pool's threads are made by this one, and so run where it runs.
            if !free.is_empty() {
                let _ = corecap_linux::affinity::pin_current_thread_to(&free);
            }
            api_thread_start();
            rt.block_on(serve(accepts, m, stopped, closed_tx));
        })?;
    Ok(Api { stop, closed })
}

/// A listener on the runtime: a TCP one has its token, and its TLS acceptor when the
/// connection is TLS.
enum Accept {
    Unix(tokio::net::UnixListener),
    Tcp(
        tokio::net::TcpListener,
        Option<Arc<String>>,
        Option<tokio_rustls::TlsAcceptor>,
    ),
}

/// A connection's byte stream, whatever the listener.
trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// Runs the accept loops until `stopped`, says so on `closed`, then waits for the
/// connections in flight.
async fn serve(
    accepts: Vec<Accept>,
    m: Arc<Manager>,
    stopped: watch::Receiver<bool>,
    closed: std::sync::mpsc::Sender<()>,
) {
    let gates: Vec<Arc<Gate>> = accepts.iter().map(|_| Arc::new(Gate::default())).collect();
    let loops: Vec<_> = accepts
        .into_iter()
        .zip(&gates)
        .map(|(a, g)| tokio::spawn(accept_loop(a, m.clone(), g.clone(), stopped.clone())))
        .collect();
    for l in loops {
        let _ = l.await;
    }
    let _ = closed.send(());
    for g in gates {
        let _ = g.slots.acquire_many(MAX_CONNECTIONS as u32).await;
    }
}

/// Accepts connections, one slot each, until `stopped`; the listener closes on return.
async fn accept_loop(
    a: Accept,
    m: Arc<Manager>,
    gate: Arc<Gate>,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        let next = async {
            match &a {
                Accept::Unix(l) => l
                    .accept()
                    .await
                    .map(|(s, _)| (Box::new(s) as Box<dyn Io>, None, None)),
                Accept::Tcp(l, token, tls) => l.accept().await.map(|(s, _)| {
                    let _ = s.set_nodelay(true);
                    (Box::new(s) as Box<dyn Io>, token.clone(), tls.clone())
                }),
            }
        };
        let stop = async {
            // The `Api` dropped without `stop`: serve on.
            if stopped.wait_for(|s| *s).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let Some(accepted) = race(next, stop).await else {
            return;
        };
        let (s, token, tls) = match accepted {
            Ok(c) => c,
            // Out of descriptors, or a connection reset before it was taken: try again soon.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Some(slot) = gate.slot().await else {
            tokio::spawn(refuse(s));
            continue;
        };
        let until = tokio::time::Instant::now() + IO_TIMEOUT;
        let (id, cut) = gate.track();
        let c = Conn {
            m: m.clone(),
            token,
            tls: tls.is_some(),
            until,
            gate: Some((gate.clone(), id)),
        };
        let gate = gate.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let serve = async {
                let s = match tls {
                    Some(tls) => match tokio::time::timeout_at(until, tls.accept(s)).await {
                        Ok(Ok(s)) => Box::new(s) as Box<dyn Io>,
                        // A refused certificate, a failed or slow handshake: closed
                        // before any request is read.
                        _ => return c.m.count_refused_handshake(),
                    },
                    None => s,
                };
                Arc::new(c).serve(s).await;
            };
            race(serve, cut.notified()).await;
            gate.untrack(id);
        });
    }
}

/// Answers 503 to a connection that got no slot.
async fn refuse(mut s: Box<dyn Io>) {
    let mut b = Vec::new();
    let _ = http::write_response(&mut b, &Response::error(503, "too many connections"));
    let _ = tokio::time::timeout(IO_TIMEOUT, s.write_all(&b)).await;
    let _ = tokio::time::timeout(IO_TIMEOUT, s.shutdown()).await;
}

/// Polls `f` until it is ready, unless `cancel` is ready first.
async fn race<F: Future, C: Future>(f: F, cancel: C) -> Option<F::Output> {
    let (mut f, mut cancel) = (pin!(f), pin!(cancel));
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = f.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        if cancel.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        Poll::Pending
    })
    .await
}

/// One listener's connection slots, and the connections that may still be cut: those
/// sending their head, oldest first.
struct Gate {
    slots: Arc<Semaphore>,
    pending: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    next: u64,
    /// (id, what cuts it), oldest first.
    list: VecDeque<(u64, Arc<Notify>)>,
}

impl Default for Gate {
    fn default() -> Self {
        Self {
            slots: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            pending: Mutex::default(),
        }
    }
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A slot: a free one, else the one of the oldest connection still sending its head,
    /// once it has let go. None when none comes within [`SLOT_WAIT`].
    async fn slot(&self) -> Option<OwnedSemaphorePermit> {
        if let Ok(p) = self.slots.clone().try_acquire_owned() {
            return Some(p);
        }
        let oldest = self.lock().list.pop_front();
        if let Some((_, cut)) = oldest {
            cut.notify_one();
        }
        tokio::time::timeout(SLOT_WAIT, self.slots.clone().acquire_owned())
            .await
            .ok()?
            .ok()
    }

    /// Lists a new connection as one that may be cut.
    fn track(&self) -> (u64, Arc<Notify>) {
        let mut g = self.lock();
        let id = g.next;
        g.next += 1;
        let cut = Arc::new(Notify::new());
        g.list.push_back((id, cut.clone()));
        (id, cut)
    }

    /// The connection `id` may no longer be cut.
    fn untrack(&self, id: u64) {
        self.lock().list.retain(|(i, _)| *i != id);
    }
}

/// Serves one connection of a listener with this access rule, against `m`: what the
/// daemon runs for each connection it accepts (without the connection limit), open to
/// tests and fuzzing over any byte stream.
pub async fn connection<S>(io: S, m: Arc<Manager>, token: Option<Arc<String>>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let c = Conn {
        m,
        token,
        tls: false,
        until: tokio::time::Instant::now() + IO_TIMEOUT,
        gate: None,
    };
    Arc::new(c).serve(io).await;
}

/// One connection: its manager, access rule, deadline and slot.
struct Conn {
    m: Arc<Manager>,
    /// The bearer token every request needs (TCP), or none (Unix socket).
    token: Option<Arc<String>>,
    /// The connection is TLS (the page's cookie is then `Secure`).
    tls: bool,
    /// When the request must be in, head and body.
    until: tokio::time::Instant,
    /// Where the connection is listed while it may be cut.
    gate: Option<(Arc<Gate>, u64)>,
}

impl Conn {
    /// Serves the connection's one request.
    async fn serve<S: Io>(self: Arc<Self>, io: S) {
        let mut b = hyper::server::conn::http1::Builder::new();
        b.timer(TokioTimer::new())
            .header_read_timeout(
                self.until
                    .saturating_duration_since(tokio::time::Instant::now()),
            )
            .keep_alive(false)
            // Header names as they were before hyper: `Content-Type`, `Connection`.
            .title_case_headers(true)
            // A client may send its request and shut its write side while it waits.
            .half_close(true)
            .max_buf_size(MAX_HEAD)
            .max_header_size(MAX_HEAD);
        let c = self.clone();
        let service = hyper::service::service_fn(move |req| {
            let c = c.clone();
            async move {
                let resp = c.handle(req).await;
                c.received();
                Ok::<_, Infallible>(resp)
            }
        });
        let served = b
            .serve_connection(TokioIo::new(WriteDeadline::new(io)), service)
            .await;
        // hyper answered a malformed head itself: counted as the routes' answers are.
        if let Err(e) = served {
            if e.is_parse_too_large() {
                self.m.count_response(431);
            } else if e.is_parse() && !e.is_parse_version_h2() {
                self.m.count_response(400);
            }
        }
    }

    /// The request is authenticated or answered: it may no longer be cut.
    fn received(&self) {
        if let Some((g, id)) = &self.gate {
            g.untrack(*id);
        }
    }

    /// How the request is allowed in: no token needed, the bearer token, or the page's
    /// login cookie ([`crate::web::login`]); None: it is not.
    fn access(&self, h: &HeaderMap) -> Option<Access> {
        let bearer = h
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        match self.token.as_deref() {
            None => Some(Access::Open { tls: self.tls }),
            Some(t) if bearer.is_some_and(|b| token_eq(b, t)) => Some(Access::Bearer),
            Some(_) => crate::web::login::by_cookie(h),
        }
    }

    /// Lets the request in on its head: how (None: a public route of the page without a
    /// login), or the 401 or 403 that refuses it.
    fn admit(&self, req: &hyper::Request<Incoming>) -> Result<Option<Access>, Response> {
        let (method, h) = (req.method().as_str(), req.headers());
        let access = self.access(h);
        if access.is_none() && !crate::web::is_public(method, req.uri().path(), h) {
            return Err(Response::error(
                401,
                "this address needs Authorization: Bearer TOKEN (see serve --token-file)",
            ));
        }
        if let Some(a) = &access {
            crate::web::login::check_csrf(a, method, h)?;
        }
        Ok(access)
    }

    /// Checks the token on the head, reads the body within the deadline, answers.
    async fn handle(&self, req: hyper::Request<Incoming>) -> hyper::Response<ApiBody> {
        let admitted = self.admit(&req);
        if let Err(r) = admitted {
            return self.reply(r);
        }
        // Let in: the request may no longer be cut.
        self.received();
        let access = admitted.ok().flatten();
        let headers = req.headers().clone();
        if req.body().size_hint().lower() > MAX_BODY as u64 {
            return self.reply(Response::error(413, "request body over 64 KiB"));
        }
        let method = req.method().as_str().to_owned();
        let path = req.uri().path().to_owned();
        let query = req.uri().query().unwrap_or("").to_owned();
        let read = Limited::new(req.into_body(), MAX_BODY).collect();
        let body = match tokio::time::timeout_at(self.until, read).await {
            Ok(Ok(b)) => b.to_bytes().to_vec(),
            Ok(Err(e)) if e.is::<LengthLimitError>() => {
                return self.reply(Response::error(413, "request body over 64 KiB"));
            }
            // Cut short, or malformed chunks; a client that went away never sees it.
            Ok(Err(e)) => return self.reply(Response::error(400, format!("request body: {e}"))),
            Err(_) => return self.reply(Response::error(408, "request not received in time")),
        };
        // The request's arrival: its last byte is in.
        let (t0, wall) = (Instant::now(), SystemTime::now());
        let req = Request { method, path, body };
        if req.method == "POST" && req.path.trim_end_matches('/') == "/queries" {
            return self.query(req).await;
        }
        let local = crate::web::sensors::named(&query).is_none();
        if req.method == "GET" && req.path.trim_end_matches('/') == "/flows" && local {
            return self.flows(query).await;
        }
        if let (true, Some(id)) = (req.method == "GET", crate::download::capture_of(&req.path)) {
            return self.download(id.to_owned()).await;
        }
        if let (true, Some(id)) = (req.method == "GET", crate::alert::pcap_of(&req.path)) {
            let (m, id) = (self.m.clone(), id.to_owned());
            let got = tokio::task::spawn_blocking(move || crate::alert::pcap_spec(&m, &id)).await;
            return match got {
                Ok(Ok((spec, name))) => self.stream_query(spec, Some(name)),
                Ok(Err(r)) => self.reply(r),
                Err(_) => self.reply(Response::error(500, "the request failed")),
            };
        }
        let m = self.m.clone();
        let web = crate::web::Conn {
            access,
            token: self.token.clone(),
            tls: self.tls,
        };
        let answer = tokio::task::spawn_blocking(move || {
            let (method, path) = (req.method.as_str(), req.path.as_str());
            match crate::web::route(&m, &web, method, path, &query, &headers, &req.body) {
                Some(a) => a,
                None if web.access.is_none() => {
                    Answer::Page(Response::error(401, "log in"), vec![])
                }
                None => Answer::Page(route(&m, req, t0, wall), vec![]),
            }
        })
        .await
        .unwrap_or_else(|_| Answer::Page(Response::error(500, "the request failed"), vec![]));
        match answer {
            Answer::Page(r, extra) => self.reply_with(r, extra),
            Answer::Query(spec, name) => self.stream_query(spec, Some(name)),
            Answer::Stream(write, name) => self.stream_download(write, name),
        }
    }

    /// [`Conn::reply`] with headers of the page's own.
    fn reply_with(
        &self,
        r: Response,
        extra: Vec<(&'static str, String)>,
    ) -> hyper::Response<ApiBody> {
        let mut h = self.reply(r);
        for (k, v) in extra {
            if let Ok(v) = HeaderValue::from_str(&v) {
                h.headers_mut()
                    .append(hyper::header::HeaderName::from_static(k), v);
            }
        }
        h
    }

    /// Counts a response and gives it to hyper.
    fn reply(&self, r: Response) -> hyper::Response<ApiBody> {
        self.m.count_response(r.status);
        let mut h = hyper::Response::new(ApiBody::Full(Full::new(Bytes::from(r.body))));
        *h.status_mut() =
            StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        h.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(r.content_type));
        h.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
        h
    }

    /// `POST /queries`: checks the request, then streams the query from a thread of its
    /// own through a bounded channel.
    ///
    /// The answer is chunked (HTTP/1.1, no length): a query that ends early (a read error,
    /// a file that vanished) aborts the connection before the last chunk, so any HTTP client
    /// (`corecap request query`, curl) sees a cut answer as an error, never as a whole one.
    async fn query(&self, req: Request) -> hyper::Response<ApiBody> {
        let m = self.m.clone();
        let spec =
            match tokio::task::spawn_blocking(move || crate::query::spec(&m, &req.body)).await {
                Ok(Ok(spec)) => spec,
                Ok(Err(r)) => return self.reply(r),
                Err(_) => return self.reply(Response::error(500, "the request failed")),
            };
        self.stream_query(spec, None)
    }

    /// `GET /captures/{id}/pcap`: the capture's packets, streamed as a query's answer
    /// ([`crate::download`]), with the file name a browser saves it under.
    async fn download(&self, id: String) -> hyper::Response<ApiBody> {
        let m = self.m.clone();
        let got = tokio::task::spawn_blocking(move || crate::download::spec(&m, &id)).await;
        match got {
            Ok(Ok((spec, name))) => self.stream_query(spec, Some(name)),
            Ok(Err(r)) => self.reply(r),
            Err(_) => self.reply(Response::error(500, "the request failed")),
        }
    }

    /// Streams the answer of `spec` as pcapng, its statistics in the trailer; `name` makes
    /// it a download (`Content-Disposition: attachment`).
    fn stream_query(
        &self,
        spec: corecap_store::query::QuerySpec,
        name: Option<String>,
    ) -> hyper::Response<ApiBody> {
        let m = self.m.clone();
        let mut headers = vec![(
            hyper::header::TRAILER,
            HeaderValue::from_static(http::QUERY_TRAILER),
        )];
        // The name is the daemon's id (cN): nothing a header cannot carry.
        let disposition =
            name.and_then(|n| HeaderValue::from_str(&format!("attachment; filename=\"{n}\"")).ok());
        headers.extend(disposition.map(|d| (hyper::header::CONTENT_DISPOSITION, d)));
        let spawn = Spawn {
            thread: "corecap-query",
            ended: "query stream",
            refused: "cannot start the query",
        };
        self.stream(spawn, "application/x-pcapng", headers, move |w| {
            // What the query says of its answer (files cut short, refused, notes) follows
            // it as a trailer, so a client tells whole from partial.
            let stats = crate::query::stream(&m, &spec, w)?;
            let _ =
                w.0.blocking_send(Ok(Frame::trailers(query_trailer(&stats))));
            Ok(())
        })
    }

    /// A chunked answer of `content_type` that `write` makes on a thread of its own
    /// (`spawn`), through a bounded channel; `headers` go with it. An error of `write` ends
    /// the body in an error, so hyper drops the connection unfinished: an HTTP client sees
    /// a cut answer as an error, never as a whole one.
    fn stream(
        &self,
        spawn: Spawn,
        content_type: &'static str,
        headers: Vec<(hyper::header::HeaderName, HeaderValue)>,
        write: impl FnOnce(&mut ChannelWriter) -> io::Result<()> + Send + 'static,
    ) -> hyper::Response<ApiBody> {
        let (tx, rx) = mpsc::channel(QUERY_CHUNKS);
        let spawned = std::thread::Builder::new()
            .name(spawn.thread.into())
            .spawn(move || {
                api_thread_start();
                let mut w = ChannelWriter(tx);
                if let Err(e) = write(&mut w) {
                    eprintln!("corecap: {} ended: {e}", spawn.ended);
                    let _ = w.0.blocking_send(Err(e));
                }
            });
        if let Err(e) = spawned {
            return self.reply(Response::error(503, format!("{}: {e}", spawn.refused)));
        }
        self.m.count_response(200);
        let mut h = hyper::Response::new(ApiBody::Stream(rx));
        let map = h.headers_mut();
        map.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        for (k, v) in headers {
            map.insert(k, v);
        }
        map.insert(CONNECTION, HeaderValue::from_static("close"));
        h
    }
}

/// The thread of a streamed answer: its name, what its error says ended, and what the
/// 503 says when it cannot start.
struct Spawn {
    thread: &'static str,
    ended: &'static str,
    refused: &'static str,
}

impl Conn {
    /// A download that `write` makes on a thread of its own (a peer's answer passed on),
    /// chunked as a query's: an error cuts the connection before the last chunk.
    fn stream_download(
        &self,
        write: crate::web::Download,
        name: String,
    ) -> hyper::Response<ApiBody> {
        let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{name}\""));
        let headers = disposition
            .map(|d| (hyper::header::CONTENT_DISPOSITION, d))
            .into_iter()
            .collect();
        let spawn = Spawn {
            thread: "corecap-relay",
            ended: "download",
            refused: "cannot start the download",
        };
        self.stream(spawn, "application/x-pcapng", headers, move |w| write(w))
    }

    /// `GET /flows`: checks the parameters, then lists the connections from a thread of
    /// its own and streams them as JSON lines, chunked, ended by the line of figures
    /// ([`crate::flows`]). A listing that fails after the first byte aborts the connection.
    async fn flows(&self, query: String) -> hyper::Response<ApiBody> {
        let m = self.m.clone();
        let spec = match tokio::task::spawn_blocking(move || crate::flows::spec(&m, &query)).await {
            Ok(Ok(spec)) => spec,
            Ok(Err(r)) => return self.reply(r),
            Err(_) => return self.reply(Response::error(500, "the request failed")),
        };
        let m = self.m.clone();
        let spawn = Spawn {
            thread: "corecap-flows",
            ended: "flows stream",
            refused: "cannot list the flows",
        };
        self.stream(spawn, "application/x-ndjson", Vec::new(), move |w| {
            crate::flows::stream(&m, &spec, w)
        })
    }
}

/// A response body: whole, or a query's chunks as its thread sends them (an error ends
/// it unfinished).
enum ApiBody {
    Full(Full<Bytes>),
    Stream(mpsc::Receiver<io::Result<Frame<Bytes>>>),
}

impl Body for ApiBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.get_mut() {
            ApiBody::Full(b) => Pin::new(b)
                .poll_frame(cx)
                .map(|f| f.map(|r| r.map_err(|e: Infallible| match e {}))),
            ApiBody::Stream(rx) => rx.poll_recv(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ApiBody::Full(b) => b.is_end_stream(),
            ApiBody::Stream(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ApiBody::Full(b) => b.size_hint(),
            ApiBody::Stream(_) => SizeHint::default(),
        }
    }
}

/// The query thread's end of the channel: a write waits while the channel is full, and
/// fails once the response body is dropped (the client went away).
struct ChannelWriter(mpsc::Sender<io::Result<Frame<Bytes>>>);

/// The trailer of a query's answer: its statistics and notes as one line of JSON, every
/// character past ASCII escaped (a header value is ASCII).
fn query_trailer(stats: &corecap_store::query::QueryStats) -> HeaderMap {
    let json = serde_json::to_string(stats).unwrap_or_default();
    let mut ascii = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_ascii() {
            ascii.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                ascii.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    let mut map = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(&ascii) {
        map.insert(http::QUERY_TRAILER, v);
    }
    map
}

impl io::Write for ChannelWriter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0
            .blocking_send(Ok(Frame::data(Bytes::copy_from_slice(b))))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))?;
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A stream whose writes fail once one has made no progress for [`IO_TIMEOUT`] (a client
/// that does not read its answer).
struct WriteDeadline<S> {
    io: S,
    stall: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteDeadline<S> {
    fn new(io: S) -> Self {
        Self { io, stall: None }
    }

    /// Passes on a write's result; a pending one arms (or checks) the stall deadline.
    fn check<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if r.is_ready() {
            self.stall = None;
            return r;
        }
        let stall = self
            .stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(IO_TIMEOUT)));
        match stall.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client does not read",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write(cx, b);
        this.check(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        b: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, b);
        this.check(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_flush(cx);
        this.check(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_shutdown(cx);
        this.check(cx, r)
    }
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
    if let Some(r) = crate::keep::route(m, &req.method, &parts, &req.body) {
        return r;
    }
    match (req.method.as_str(), parts.as_slice()) {
        ("GET", []) => Response::json(
            200,
            &serde_json::json!({"service": "corecap", "version": env!("CARGO_PKG_VERSION"),
                "endpoints": ["/captures", "/captures/{id}", "/metrics", "/cores", "/queries", "/flows", "/status", "/holds", "/alerts"]}),
        ),
        ("GET", ["captures"]) => view_json(200, &m.list()),
        ("POST", ["captures"]) => match serde_json::from_slice::<StartRequest>(&req.body) {
            Ok(s) => r(m.start(s, t0, wall), 201),
            Err(e) => Response::error(400, format!("invalid request JSON: {e}")),
        },
        ("GET", ["captures", id]) => r(m.show(id), 200),
        ("DELETE", ["captures", id]) => r(m.stop(id), 200),
        ("GET", ["metrics"]) => Response::text(200, m.metrics() + &crate::keep::metrics(m)),
        ("GET", ["cores"]) => Response::json(200, &m.cores()),
        (_, ["captures"])
        | (_, ["captures", _])
        | (_, ["metrics"])
        | (_, ["cores"])
        | (_, ["flows"])
        | (_, []) => Response::error(
            405,
            format!("{} is not allowed on {}", req.method, req.path),
        ),
        _ => Response::error(404, format!("no endpoint {}", req.path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// The spool folder of the test manager `name`.
    fn spool_dir(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("corecap-server-{}-{name}", std::process::id()))
    }

    /// A manager with an empty spool of its own and no base captures (the test removes
    /// the folder, [`spool_dir`], when it is done).
    fn manager(name: &str) -> Arc<Manager> {
        let dir = spool_dir(name);
        std::fs::create_dir_all(&dir).expect("spool");
        let cfg = crate::manager::Config::new(
            crate::spool::Spool::open(&dir, None, None).expect("spool"),
        );
        Arc::new(Manager::new(cfg, vec![]))
    }

    /// How a test client sends its request.
    struct Send<'a> {
        token: Option<&'a str>,
        /// Written one after another, `gap` apart.
        parts: Vec<&'a [u8]>,
        gap: Duration,
        /// Shut the write side once all is sent.
        close: bool,
    }

    /// One request over an in-memory stream to the connection handler the daemon runs;
    /// returns what came back (until the close, or 8 s), how long until the server closed
    /// or the last byte came, and whether a write failed.
    fn exchange(name: &str, s: Send<'_>) -> (String, Duration, bool) {
        let out = exchange_with(manager(name), s);
        let _ = std::fs::remove_dir_all(spool_dir(name));
        out
    }

    fn exchange_with(m: Arc<Manager>, s: Send<'_>) -> (String, Duration, bool) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let (mut client, server) = tokio::io::duplex(1 << 20);
            let token = s.token.map(|t| Arc::new(t.to_owned()));
            tokio::spawn(connection(server, m, token));
            let t = tokio::time::Instant::now();
            let (mut rd, mut wr) = tokio::io::split(&mut client);
            let send = async {
                for (i, p) in s.parts.iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(s.gap).await;
                    }
                    if wr.write_all(p).await.is_err() {
                        return true;
                    }
                }
                if s.close {
                    let _ = wr.shutdown().await;
                }
                false
            };
            let recv = async {
                let mut out = Vec::new();
                let mut b = [0u8; 4096];
                let mut last = t.elapsed();
                loop {
                    match tokio::time::timeout(Duration::from_secs(8), rd.read(&mut b)).await {
                        Ok(Ok(0)) | Ok(Err(_)) => return (out, t.elapsed()),
                        Ok(Ok(n)) => {
                            out.extend_from_slice(&b[..n]);
                            last = t.elapsed();
                        }
                        Err(_) => return (out, last),
                    }
                }
            };
            let mut send = pin!(send);
            let mut recv = pin!(recv);
            let mut write_failed = None;
            let (out, took) = std::future::poll_fn(|cx| {
                if write_failed.is_none() {
                    if let Poll::Ready(f) = send.as_mut().poll(cx) {
                        write_failed = Some(f);
                    }
                }
                recv.as_mut().poll(cx)
            })
            .await;
            (
                String::from_utf8_lossy(&out).into_owned(),
                took,
                write_failed == Some(true),
            )
        })
    }

    fn once<'a>(raw: &'a [u8]) -> Send<'a> {
        Send {
            token: None,
            parts: vec![raw],
            gap: Duration::ZERO,
            close: true,
        }
    }

    fn status(resp: &str) -> &str {
        resp.split(' ').nth(1).unwrap_or("")
    }

    #[test]
    fn test_token_checked_before_the_body() {
        // The head announces a body that never comes: a refused token is answered at once.
        let head =
            b"POST /captures HTTP/1.1\r\nAuthorization: Bearer nope\r\nContent-Length: 100\r\n\r\n";
        let send = |token| Send {
            token,
            parts: vec![head],
            gap: Duration::ZERO,
            close: false,
        };
        let (resp, took, _) = exchange("token", send(Some("right")));
        assert_eq!(status(&resp), "401", "{resp}");
        assert!(resp.contains("Bearer TOKEN"), "{resp}");
        assert!(took < Duration::from_secs(1), "{took:?}");
        // No token needed (the Unix socket): the body is waited for, until the deadline.
        let (resp, took, _) = exchange("token-none", send(None));
        assert_eq!(status(&resp), "408", "{resp}");
        assert!(took >= Duration::from_millis(4900), "{took:?}");
        // The right token gets through.
        let (resp, _, _) = exchange(
            "token-ok",
            Send {
                token: Some("right"),
                ..once(b"GET /captures HTTP/1.1\r\nAuthorization: Bearer right\r\n\r\n")
            },
        );
        assert_eq!(status(&resp), "200", "{resp}");
        assert!(resp.contains("\r\nConnection: close\r\n"), "{resp}");
    }

    #[test]
    fn test_repeated_content_length_is_refused() {
        let (resp, _, _) = exchange(
            "repeated",
            once(b"POST /captures HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{}"),
        );
        assert_eq!(status(&resp), "400", "{resp}");
    }

    #[test]
    fn test_limits_get_their_status() {
        let mut big = b"GET / HTTP/1.1\r\n".to_vec();
        big.extend(std::iter::repeat_n(b"X-A: b\r\n".as_slice(), 4000).flatten());
        big.extend_from_slice(b"\r\n");
        let m = manager("head");
        let (resp, _, _) = exchange_with(m.clone(), once(&big));
        assert_eq!(status(&resp), "431", "{resp}");
        let (resp, _, _) = exchange_with(m.clone(), once(b"\x00\x01garbage\r\n\r\n"));
        assert_eq!(status(&resp), "400", "{resp}");
        let counted = m.metrics();
        assert!(counted.contains("{code=\"431\"} 1"), "{counted}");
        assert!(counted.contains("{code=\"400\"} 1"), "{counted}");
        drop(m);
        let _ = std::fs::remove_dir_all(spool_dir("head"));
        // A few long headers, under hyper's count of headers but over 16 KiB.
        let mut long = b"GET / HTTP/1.1\r\n".to_vec();
        for _ in 0..3 {
            long.extend_from_slice(b"X-A: ");
            long.extend(std::iter::repeat_n(b'a', 6000));
            long.extend_from_slice(b"\r\n");
        }
        long.extend_from_slice(b"\r\n");
        let (resp, _, _) = exchange("head-long", once(&long));
        assert_eq!(status(&resp), "431", "{resp}");

        let (resp, _, _) = exchange(
            "length",
            Send {
                close: false,
                ..once(b"POST /captures HTTP/1.1\r\nContent-Length: 100000000\r\n\r\n")
            },
        );
        assert_eq!(status(&resp), "413", "{resp}");
        // A chunked body is taken within the limit, and cut at it.
        let chunked = |n: usize| {
            let mut r = b"POST /captures HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            r.extend_from_slice(format!("{n:x}\r\n").as_bytes());
            r.extend(std::iter::repeat_n(b' ', n));
            r.extend_from_slice(b"\r\n0\r\n\r\n");
            r
        };
        let (resp, _, _) = exchange("chunked-small", once(&chunked(100)));
        assert_eq!(status(&resp), "400", "{resp}");
        assert!(resp.contains("invalid request JSON"), "{resp}");
        let (resp, _, _) = exchange("chunked-big", once(&chunked(MAX_BODY + 1)));
        assert_eq!(status(&resp), "413", "{resp}");

        for (raw, want) in [
            (&b"\x00\x01garbage\r\n\r\n"[..], "400"),
            (
                b"POST /captures HTTP/1.1\r\nContent-Length: 5\r\n\r\n{bad}",
                "400",
            ),
            (b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n", "400"),
            (b"PUT /captures HTTP/1.1\r\n\r\n", "405"),
            (b"GET /nowhere HTTP/1.1\r\n\r\n", "404"),
            (b"GET / HTTP/1.1\r\n\r\n", "200"),
        ] {
            let (resp, _, _) = exchange("bad", once(raw));
            assert_eq!(status(&resp), want, "{resp}");
        }
        // A client that goes away mid-request gets nothing, and nothing hangs.
        let (resp, took, _) = exchange(
            "gone",
            once(b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n{"),
        );
        assert!(status(&resp) == "400" || resp.is_empty(), "{resp}");
        assert!(took < Duration::from_secs(1), "{took:?}");
    }

    #[test]
    fn test_a_trickled_request_is_cut_at_the_deadline() {
        let head = b"GET /captures HTTP/1.1\r\n";
        let parts: Vec<&[u8]> = head
            .iter()
            .cycle()
            .take(60)
            .map(std::slice::from_ref)
            .collect();
        let (resp, took, _) = exchange(
            "trickle",
            Send {
                token: None,
                parts,
                gap: Duration::from_millis(200),
                close: true,
            },
        );
        assert!(resp.is_empty() || status(&resp) == "408", "{resp}");
        assert!(
            took >= Duration::from_millis(4900) && took < Duration::from_secs(6),
            "{took:?}"
        );
        // The body trickled after a whole head: 408 at the same deadline.
        let mut parts: Vec<&[u8]> = vec![b"POST /captures HTTP/1.1\r\nContent-Length: 60\r\n\r\n"];
        parts.extend(std::iter::repeat_n(&b" "[..], 60));
        let (resp, took, _) = exchange(
            "trickle-body",
            Send {
                token: None,
                parts,
                gap: Duration::from_millis(200),
                close: true,
            },
        );
        assert_eq!(status(&resp), "408", "{resp}");
        assert!(
            took >= Duration::from_millis(4900) && took < Duration::from_secs(6),
            "{took:?}"
        );
    }

    #[test]
    fn test_query_streams_until_the_close() {
        let (resp, _, _) = exchange(
            "query",
            once(b"POST /queries HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"),
        );
        assert!(resp.starts_with("HTTP/1.1 200 OK\r\n"), "{resp}");
        assert!(
            resp.contains("Content-Type: application/x-pcapng"),
            "{resp}"
        );
        // Chunked, ended by the last chunk: a whole answer, told from a cut one.
        assert!(
            resp.to_ascii_lowercase()
                .contains("transfer-encoding: chunked"),
            "{resp}"
        );
        assert!(resp.ends_with("0\r\n\r\n"), "{resp}");
        let (resp, _, _) = exchange(
            "query-bad",
            once(b"POST /queries HTTP/1.1\r\nContent-Length: 13\r\n\r\n{\"from\":\"x\"}"),
        );
        assert_eq!(status(&resp), "400", "{resp}");
    }

    #[test]
    fn test_query_writes_wait_for_the_reader_and_fail_once_it_is_gone() {
        use std::io::Write;
        let (tx, mut rx) = mpsc::channel(QUERY_CHUNKS);
        let writer = std::thread::spawn(move || {
            let mut w = ChannelWriter(tx);
            let mut sent = 0;
            while w.write_all(b"x").is_ok() {
                sent += 1;
            }
            sent
        });
        // The channel fills and the writer waits: QUERY_CHUNKS in it, one more taken.
        std::thread::sleep(Duration::from_millis(100));
        assert!(!writer.is_finished(), "the writer waits for the reader");
        assert!(rx.try_recv().is_ok());
        std::thread::sleep(Duration::from_millis(100));
        // The client goes away: the body is dropped, and the next write fails.
        drop(rx);
        assert_eq!(writer.join().expect("writer"), QUERY_CHUNKS + 1);
    }

    #[test]
    fn test_a_newcomer_cuts_the_oldest_pending_connection() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let g = Arc::new(Gate::default());
            let mut held = Vec::new();
            for _ in 0..MAX_CONNECTIONS {
                held.push(g.slot().await.expect("a free slot"));
            }
            let (first, cut_first) = g.track();
            let (_, cut_second) = g.track();
            let g2 = g.clone();
            let freed = held.pop().expect("held");
            tokio::spawn(async move {
                cut_first.notified().await;
                g2.untrack(first);
                drop(freed);
            });
            let taken = g.slot().await;
            assert!(taken.is_some(), "the oldest let go of its slot");
            assert_eq!(g.lock().list.len(), 1, "the second one is left");
            assert!(race(cut_second.notified(), std::future::ready(()))
                .await
                .is_none());
            // Nothing left to cut: the newcomer gets no slot.
            g.untrack(1);
            assert!(g.slot().await.is_none());
        });
    }

    #[test]
    fn test_spawn_serves_until_stopped() {
        let path = std::env::temp_dir().join(format!("corecap-server-{}.sock", std::process::id()));
        let l = bind_unix(&path).expect("bind");
        let api = spawn(vec![Listener::Unix(l, path.clone())], manager("spawn")).expect("spawn");
        let s = UnixStream::connect(&path).expect("connect");
        let (st, body) = http::call(s, "GET", "/captures", None, None).expect("call");
        assert_eq!(st, 200, "{}", String::from_utf8_lossy(&body));
        api.stop();
        assert!(
            UnixStream::connect(&path).is_err(),
            "the listener is closed"
        );
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_dir_all(spool_dir("spawn"));
    }

    #[test]
    fn test_token_eq() {
        assert!(token_eq("abc", "abc"));
        assert!(!token_eq("abc", "abd"));
        assert!(!token_eq("abc", "abcd"));
    }

    #[test]
    fn test_tcp_must_be_loopback() {
        let e = bind_tcp("0.0.0.0:0".parse().expect("addr"), false).expect_err("refused");
        assert!(e.to_string().contains("not a loopback"));
    }
}
