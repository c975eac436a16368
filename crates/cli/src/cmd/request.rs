//! `corecap request`: the client of `corecap serve`.

use anyhow::{bail, Context, Result};
use corecap_manager::api::{CaptureView, Mode, OutputKind, StartRequest, State};
use corecap_manager::http;
use serde_json::Value;

use crate::args::{RequestArgs, RequestCmd, RequestQueryArgs, RequestStartArgs};
use crate::config::cpu_list;

/// A connection to the daemon, and the token to send on it.
trait Conn: std::io::Read + std::io::Write {}
impl<T: std::io::Read + std::io::Write> Conn for T {}

fn connect(a: &RequestArgs) -> Result<(Box<dyn Conn>, Option<String>)> {
    match &a.url {
        Some(url) => {
            let host = url
                .strip_prefix("http://")
                .with_context(|| format!("--url {url}: expected http://HOST:PORT"))?
                .trim_end_matches('/');
            let token = match (&a.token_file, std::env::var("CORECAP_TOKEN")) {
                (Some(f), _) => Some(
                    std::fs::read_to_string(f)
                        .with_context(|| format!("reading the token file {}", f.display()))?
                        .trim()
                        .to_owned(),
                ),
                (None, Ok(t)) => Some(t),
                (None, Err(_)) => None,
            };
            let s = std::net::TcpStream::connect(host).with_context(|| {
                format!("connecting to {url} (is corecap serve --listen running?)")
            })?;
            Ok((Box::new(s), token))
        }
        None => {
            let s = std::os::unix::net::UnixStream::connect(&a.socket).with_context(|| {
                format!(
                    "connecting to {} (is corecap serve running? --socket selects another)",
                    a.socket.display()
                )
            })?;
            Ok((Box::new(s), None))
        }
    }
}

/// Sends one request to the daemon; returns the status and the body.
fn call(a: &RequestArgs, method: &str, path: &str, body: Option<&[u8]>) -> Result<(u16, Vec<u8>)> {
    let (s, token) = connect(a)?;
    Ok(http::call(s, method, path, token.as_deref(), body)?)
}

/// `corecap request query`: the daemon's answer (pcapng) to `-w OUT`.
fn query(a: &RequestArgs, q: &RequestQueryArgs) -> Result<i32> {
    let words = q.filter.join(" ");
    let body = serde_json::json!({
        "from": q.from,
        "to": q.to,
        "filter": (!words.is_empty()).then_some(words),
    });
    let body = serde_json::to_vec(&body)?;
    let (s, token) = connect(a)?;
    let to_stdout = q.out == std::path::Path::new("-");
    let (status, n, err) = if to_stdout {
        let mut out = std::io::stdout().lock();
        http::call_streaming(
            s,
            "POST",
            "/queries",
            token.as_deref(),
            Some(&body),
            &mut out,
        )?
    } else {
        let mut out = std::io::BufWriter::new(
            std::fs::File::create(&q.out)
                .with_context(|| format!("creating {}", q.out.display()))?,
        );
        let r = http::call_streaming(
            s,
            "POST",
            "/queries",
            token.as_deref(),
            Some(&body),
            &mut out,
        )?;
        std::io::Write::flush(&mut out)?;
        r
    };
    if status != 200 {
        let msg = serde_json::from_slice::<Value>(&err)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_owned))
            .unwrap_or_else(|| String::from_utf8_lossy(&err).into_owned());
        bail!("{msg} (HTTP {status})");
    }
    if !to_stdout {
        eprintln!("wrote {n} bytes of pcapng to {}", q.out.display());
    }
    Ok(0)
}

/// Calls and turns an error status into an error with the daemon's message.
fn call_ok(a: &RequestArgs, method: &str, path: &str, body: Option<&[u8]>) -> Result<Vec<u8>> {
    let (status, body) = call(a, method, path, body)?;
    if status >= 300 {
        let msg = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_owned))
            .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
        bail!("{msg} (HTTP {status})");
    }
    Ok(body)
}

fn start_request(s: &RequestStartArgs) -> Result<StartRequest> {
    use crate::args::{FormatArg, StartMode};
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
        filter: (!s.expr.is_empty()).then(|| s.expr.join(" ")),
        count: s.count,
        duration: s.duration,
        snaplen: s.snaplen,
        output,
        name: s.name.clone(),
        mode,
        cores: s.cores.as_deref().map(cpu_list).transpose()?,
        encrypt: s.encrypt.map(|c| c.name().to_owned()),
        collector: s.collector.clone(),
    })
}

/// A capture in a few lines.
fn describe(v: &CaptureView) -> String {
    let mut o = format!(
        "{}: {}{} ({} on {})\n",
        v.id,
        v.state.name(),
        v.reason
            .as_deref()
            .map_or(String::new(), |r| format!(", {r}")),
        v.mode.name(),
        v.interface
    );
    if let Some(f) = &v.filter {
        o += &format!("  filter: {f}\n");
    }
    o += &format!("  packets: {} ({} bytes)\n", v.packets, v.bytes);
    o += &match v.lag_us {
        Some(l) => format!("  thread lag: {l:.0} us (set up in {:.0} us)\n", v.setup_us),
        None => format!(
            "  thread lag: no packet yet (set up in {:.0} us)\n",
            v.setup_us
        ),
    };
    if let Some(p) = &v.path {
        o += &format!("  output: {p} ({} bytes)\n", v.file_bytes);
    }
    o += &format!(
        "  drops: kernel {}, stage full {}, app {}, disk {}\n",
        v.drops.kernel, v.drops.stage_full, v.drops.app, v.drops.disk
    );
    if !v.cores.is_empty() {
        let c: Vec<String> = v.cores.iter().map(|c| c.to_string()).collect();
        o += &format!("  cores: {}\n", c.join(","));
    }
    for n in &v.notes {
        o += &format!("  note: {n}\n");
    }
    o
}

/// Polls a capture until it ends; SIGINT or SIGTERM stops it first. Returns its final view.
fn wait(a: &RequestArgs, id: &str) -> Result<CaptureView> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    loop {
        // Relaxed: a flag set by the signal handler, polled here.
        if stop.load(Ordering::Relaxed) {
            return view(&call_ok(a, "DELETE", &format!("/captures/{id}"), None)?);
        }
        let v = view(&call_ok(a, "GET", &format!("/captures/{id}"), None)?)?;
        if v.state != State::Running {
            return Ok(v);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn view(body: &[u8]) -> Result<CaptureView> {
    serde_json::from_slice(body).context("the daemon's answer is not a capture")
}

/// Runs a client command. Returns the exit code.
pub(crate) fn run(a: RequestArgs) -> Result<i32> {
    let raw = |b: &[u8]| print!("{}", String::from_utf8_lossy(b));
    match &a.cmd {
        RequestCmd::Query(q) => return query(&a, q),
        RequestCmd::Start(s) => {
            let body = serde_json::to_vec(&start_request(s)?)?;
            let b = call_ok(&a, "POST", "/captures", Some(&body))?;
            if s.wait {
                let v = wait(&a, &view(&b)?.id)?;
                if a.json {
                    println!("{}", serde_json::to_string_pretty(&v)?);
                } else {
                    print!("{}", describe(&v));
                }
                return Ok(if v.state == State::Failed { 1 } else { 0 });
            }
            if a.json {
                raw(&b);
            } else {
                let v = view(&b)?;
                for n in &v.notes {
                    eprintln!("corecap: {n}");
                }
                println!("{}", v.id);
            }
        }
        RequestCmd::List => {
            let b = call_ok(&a, "GET", "/captures", None)?;
            if a.json {
                raw(&b);
            } else {
                let vs: Vec<CaptureView> =
                    serde_json::from_slice(&b).context("the daemon's answer is not a list")?;
                println!(
                    "{:<6} {:<8} {:<7} {:<12} {:>10} {:>10}  {:<24} filter",
                    "id", "state", "mode", "interface", "packets", "lag us", "output"
                );
                for v in vs {
                    println!(
                        "{:<6} {:<8} {:<7} {:<12} {:>10} {:>10}  {:<24} {}",
                        v.id,
                        v.state.name(),
                        v.mode.name(),
                        v.interface,
                        v.packets,
                        v.lag_us.map_or("-".into(), |l| format!("{l:.0}")),
                        v.path.as_deref().unwrap_or("-"),
                        v.filter.as_deref().unwrap_or("")
                    );
                }
            }
        }
        RequestCmd::Show { id } | RequestCmd::Stop { id } => {
            let method = if matches!(a.cmd, RequestCmd::Stop { .. }) {
                "DELETE"
            } else {
                "GET"
            };
            let b = call_ok(&a, method, &format!("/captures/{id}"), None)?;
            if a.json {
                raw(&b);
            } else {
                print!("{}", describe(&view(&b)?));
            }
        }
        RequestCmd::Metrics => raw(&call_ok(&a, "GET", "/metrics", None)?),
        RequestCmd::Cores => {
            let b = call_ok(&a, "GET", "/cores", None)?;
            if a.json {
                raw(&b);
            } else {
                let v: Value = serde_json::from_slice(&b)?;
                for c in v.as_array().into_iter().flatten() {
                    let strs = |k: &str| -> Vec<String> {
                        c[k].as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|r| r.as_str().map(str::to_owned))
                            .collect()
                    };
                    let (roles, irqs) = (strs("roles"), strs("irqs"));
                    println!(
                        "cpu {}: {}{}",
                        c["cpu"],
                        if roles.is_empty() {
                            "free".to_string()
                        } else {
                            roles.join(", ")
                        },
                        if irqs.is_empty() {
                            String::new()
                        } else {
                            format!(" [IRQs of {}]", irqs.join(", "))
                        }
                    );
                }
            }
        }
    }
    Ok(0)
}
