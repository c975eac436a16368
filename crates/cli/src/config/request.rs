//! `corecap request`: the endpoint or sensors, and the call, resolved from the client's
//! flags.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use corecap_manager::api::{Mode, OutputKind, StartRequest};

use super::{check_print_flags, cpu_list, print_options};
use crate::args::{FormatArg, RequestArgs, RequestCmd, RequestStartArgs, StartMode};

/// What `corecap request` sends, resolved from [`RequestArgs`].
pub(crate) struct RequestConfig {
    /// Where the daemon listens.
    pub(crate) endpoint: Endpoint,
    /// The sensors of `--sensor` and `--sensors`, when several daemons are asked at once.
    pub(crate) sensors: Vec<Sensor>,
    /// Accept what answered when some sensors fail.
    pub(crate) partial: bool,
    /// How long a daemon may take to connect, and to send each part of its answer.
    pub(crate) timeout: Duration,
    /// Print the API's JSON.
    pub(crate) json: bool,
    /// The request.
    pub(crate) call: Call,
}

/// Where `corecap request` reaches the daemon.
#[derive(Clone)]
pub(crate) enum Endpoint {
    /// Its Unix socket (`--socket`).
    Unix(PathBuf),
    /// A TCP address (`--url http://HOST:PORT` or `https://HOST:PORT`), with the bearer
    /// token of `--token-file` or `CORECAP_TOKEN`, and TLS for https.
    Tcp {
        url: String,
        host: String,
        token: Option<String>,
        tls: Option<Tls>,
    },
}

impl Endpoint {
    /// How messages name it: its URL, or its socket's path.
    pub(crate) fn label(&self) -> String {
        match self {
            Endpoint::Tcp { url, .. } => url.clone(),
            Endpoint::Unix(socket) => socket.display().to_string(),
        }
    }
}

/// TLS to one daemon: the client's config and the name its certificate must carry.
#[derive(Clone)]
pub(crate) struct Tls {
    pub(crate) config: Arc<corecap_manager::tls::ClientConfig>,
    pub(crate) name: String,
}

/// One sensor of many: its name (for messages and interface names) and where it listens.
pub(crate) struct Sensor {
    pub(crate) name: String,
    pub(crate) endpoint: Endpoint,
}

/// One request to the daemon.
pub(crate) enum Call {
    /// Start a capture; with `wait`, follow it to its end.
    Start {
        request: StartRequest,
        wait: bool,
    },
    List,
    Show(String),
    Stop(String),
    Metrics,
    Status,
    /// `POST /holds` with this body.
    Hold(serde_json::Value),
    Holds,
    Release(String),
    Alerts,
    /// An alert's packets, as pcapng to `out` (`-`: stdout).
    Alert {
        id: String,
        out: PathBuf,
        force: bool,
    },
    Cores,
    /// Packets of the spool's files, as pcapng to `out` (`-`: stdout), or printed one
    /// line each (no `out`).
    Query {
        from: Option<String>,
        to: Option<String>,
        filter: Option<String>,
        out: Option<PathBuf>,
        force: bool,
        print: Printing,
        /// Community ID, SNI, DNS and HTTP Host selectors, in `POST /queries`'s names.
        select: [Option<String>; 4],
    },
    /// Connections, `GET` this path (with its query).
    Flows(String),
    /// A capture's packets, as pcapng to `out` (`-`: stdout).
    Fetch {
        id: String,
        out: PathBuf,
        force: bool,
    },
}

/// How an answer's packets print when it is not written to a file (tcpdump's flags).
pub(crate) struct Printing {
    pub(crate) opts: crate::print::Options,
    pub(crate) line_buffered: bool,
    /// Print at most this many packets.
    pub(crate) count: Option<u64>,
}

/// Resolves the client's arguments: the endpoint (and its token) and the request.
pub(crate) fn request(a: &RequestArgs) -> Result<RequestConfig> {
    let call = match &a.cmd {
        RequestCmd::Start(s) => Call::Start {
            request: start_request(s)?,
            wait: s.wait,
        },
        RequestCmd::List => Call::List,
        RequestCmd::Show { id } => Call::Show(id.clone()),
        RequestCmd::Stop { id } => Call::Stop(id.clone()),
        RequestCmd::Metrics => Call::Metrics,
        RequestCmd::Status => Call::Status,
        RequestCmd::Hold(h) => Call::Hold(hold_body(h)),
        RequestCmd::Holds => Call::Holds,
        RequestCmd::Alerts => Call::Alerts,
        RequestCmd::Alert { id, out, force } => Call::Alert {
            id: id.clone(),
            out: out.clone(),
            force: *force,
        },
        RequestCmd::Release { name } => Call::Release(name.clone()),
        RequestCmd::Cores => Call::Cores,
        RequestCmd::Query(q) => Call::Query {
            from: q.from.clone(),
            to: q.to.clone(),
            filter: words(&q.filter),
            out: q.out.clone(),
            force: q.force,
            print: {
                check_print_flags(&q.print, q.out.is_none(), "-w")?;
                Printing {
                    opts: print_options(&q.print, q.quick),
                    line_buffered: q.print.line_buffered,
                    count: q.count,
                }
            },
            select: [
                q.select.community_id.clone(),
                q.select.sni.clone(),
                q.select.dns.clone(),
                q.select.http_host.clone(),
            ],
        },
        RequestCmd::Flows(f) => Call::Flows(f.path()),
        RequestCmd::Fetch { id, out, force } => Call::Fetch {
            id: id.clone(),
            out: out.clone(),
            force: *force,
        },
    };
    let tls = match &a.tls_ca {
        Some(ca) => Some(Arc::new(
            corecap_manager::tls::client_config(ca, a.tls_cert.as_deref(), a.tls_key.as_deref())
                .context("TLS")?,
        )),
        None if a.tls_cert.is_some() || a.tls_key.is_some() => {
            bail!("--tls-cert and --tls-key go with --tls-ca (the CA of the daemons' certificates)")
        }
        None => None,
    };
    let token = token_of(a)?;
    let endpoint = match &a.url {
        Some(url) => endpoint(url, token.clone(), tls.clone())?,
        None => Endpoint::Unix(a.socket.clone()),
    };
    let sensors = sensors(a, &token, &tls)?;
    if !sensors.is_empty() && a.url.is_some() {
        bail!("--url is one daemon, --sensor several: give one or the other");
    }
    if a.partial && sensors.is_empty() {
        bail!("--partial is for several sensors (--sensor, --sensors)");
    }
    Ok(RequestConfig {
        endpoint,
        sensors,
        partial: a.partial,
        timeout: corecap_engine::limits::seconds(a.timeout, "--timeout")?,
        json: a.json,
        call,
    })
}

/// The sensors of `--sensor [NAME=]URL` and `--sensors FILE`; a sensor's name defaults to
/// its URL's HOST:PORT. Names are unique.
pub(super) fn sensors(
    a: &RequestArgs,
    token: &Option<String>,
    tls: &Option<Arc<corecap_manager::tls::ClientConfig>>,
) -> Result<Vec<Sensor>> {
    let mut specs = a.sensors.clone();
    if let Some(f) = &a.sensors_file {
        let text = std::fs::read_to_string(f)
            .with_context(|| format!("reading the sensors file {}", f.display()))?;
        specs.extend(
            text.lines()
                .map(|l| l.split('#').next().unwrap_or("").trim())
                .filter(|l| !l.is_empty())
                .map(str::to_owned),
        );
    }
    let mut out: Vec<Sensor> = Vec::new();
    for spec in specs {
        let (name, url) = match spec.split_once('=') {
            Some((n, u)) if !n.contains("://") => (Some(n.trim().to_owned()), u.trim()),
            _ => (None, spec.as_str()),
        };
        let endpoint = endpoint(url, token.clone(), tls.clone())?;
        let Endpoint::Tcp { host, .. } = &endpoint else {
            bail!("--sensor {spec}: expected [NAME=]URL");
        };
        let name = name.unwrap_or_else(|| host.clone());
        if name.is_empty()
            || name.contains(char::is_whitespace)
            || name.contains(':') && !name.eq(host)
        {
            bail!("--sensor {spec}: a name is a word without spaces or ':'");
        }
        if out.iter().any(|s| s.name == name) {
            bail!("--sensor {spec}: the name {name} is given twice");
        }
        out.push(Sensor { name, endpoint });
    }
    Ok(out)
}

/// A daemon's URL: `http://HOST:PORT` (clear, loopback) or `https://HOST:PORT` (TLS, which
/// needs `--tls-ca`).
pub(super) fn endpoint(
    url: &str,
    token: Option<String>,
    tls: Option<Arc<corecap_manager::tls::ClientConfig>>,
) -> Result<Endpoint> {
    let (host, tls) = if let Some(h) = url.strip_prefix("https://") {
        let config = tls.with_context(|| {
            format!("{url}: https needs --tls-ca FILE (and --tls-cert, --tls-key for the daemon's client check)")
        })?;
        let h = h.trim_end_matches('/');
        let name = match h.rsplit_once(':') {
            Some((n, _)) => n.trim_start_matches('[').trim_end_matches(']'),
            None => h,
        };
        (
            h,
            Some(Tls {
                config,
                name: name.to_owned(),
            }),
        )
    } else {
        let h = url
            .strip_prefix("http://")
            .with_context(|| format!("{url}: expected http://HOST:PORT or https://HOST:PORT"))?;
        (h.trim_end_matches('/'), None)
    };
    if !host.contains(':') {
        bail!("{url}: give the port (HOST:PORT)");
    }
    Ok(Endpoint::Tcp {
        url: url.to_owned(),
        host: host.to_owned(),
        token,
        tls,
    })
}

/// The bearer token of `--token-file` or `CORECAP_TOKEN`, if any.
pub(super) fn token_of(a: &RequestArgs) -> Result<Option<String>> {
    Ok(match (&a.token_file, std::env::var("CORECAP_TOKEN")) {
        (Some(f), _) => Some(
            std::fs::read_to_string(f)
                .with_context(|| format!("reading the token file {}", f.display()))?
                .trim()
                .to_owned(),
        ),
        (None, Ok(t)) => Some(t),
        (None, Err(_)) => None,
    })
}

/// The body of `request start`.
pub(super) fn start_request(s: &RequestStartArgs) -> Result<StartRequest> {
    let output = match s.format {
        FormatArg::Pcapng => OutputKind::Pcapng,
        FormatArg::Pcap => OutputKind::Pcap,
        FormatArg::Flows => OutputKind::Flows,
        FormatArg::Count => OutputKind::Count,
    };
    let mode = s.mode.map(|m| match m {
        StartMode::Attach => Mode::Attach,
        StartMode::Spawn => Mode::Spawn,
    });
    Ok(StartRequest {
        interface: s.iface.clone(),
        filter: words(&s.expr),
        count: s.count,
        duration: s.duration,
        snaplen: s.snaplen,
        output,
        name: s.name.clone(),
        mode,
        cores: s.cores.as_deref().map(cpu_list).transpose()?,
        encrypt: s.encrypt.map(|c| c.name().to_owned()),
        collector: s.collector.clone(),
        since: s.since.clone(),
    })
}

/// Trailing filter words joined as tcpdump joins them; None when there are none.
pub(super) fn words(w: &[String]) -> Option<String> {
    (!w.is_empty()).then(|| w.join(" "))
}

/// `--flows`, given at most once as a file and once as an IPFIX collector.
pub(super) fn flow_output(
    given: &[String],
    biflow: bool,
) -> Result<Option<corecap_engine::stage::flows::FlowOutput>> {
    use corecap_engine::sink::ipfix::{new_domain, IpfixTarget};
    let mut out = corecap_engine::stage::flows::FlowOutput::default();
    for f in given {
        if f.starts_with("ipfix") && f.contains("://") {
            if out.ipfix.is_some() {
                bail!("--flows names two IPFIX collectors; give one");
            }
            let t = IpfixTarget::parse(f).map_err(anyhow::Error::msg)?;
            out.ipfix = Some(IpfixTarget {
                biflow,
                domain: new_domain(),
                ..t
            });
        } else if f.contains("://") {
            bail!("--flows '{f}': not a file nor ipfix://HOST:PORT or ipfix+tcp://HOST:PORT");
        } else {
            if out.file.is_some() {
                bail!("--flows names two files; give one");
            }
            out.file = Some(f.into());
        }
    }
    if biflow && out.ipfix.is_none() {
        bail!("--ipfix-biflow needs --flows ipfix://HOST:PORT");
    }
    Ok((out.file.is_some() || out.ipfix.is_some()).then_some(out))
}

/// The body of `POST /holds`: only the selectors given.
fn hold_body(h: &crate::args::RequestHoldArgs) -> serde_json::Value {
    let mut v = serde_json::json!({"name": h.name, "from": h.from, "to": h.to});
    if let Some(f) = words(&h.filter) {
        v["filter"] = serde_json::Value::from(f);
    }
    for (k, s) in [
        ("community_id", &h.select.community_id),
        ("sni", &h.select.sni),
        ("dns", &h.select.dns),
        ("http_host", &h.select.http_host),
    ] {
        if let Some(s) = s {
            v[k] = serde_json::Value::from(s.as_str());
        }
    }
    v
}
