//! `corecap request`: the client of `corecap serve`.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use corecap_manager::api::{CaptureView, StartRequest, State};
use corecap_manager::http;
use serde_json::Value;

use crate::args::RequestArgs;
use crate::config::{self, Call, Endpoint, Printing};

use super::client::{call_ok, connect, error_message, named, refused};

/// `corecap request query`: the daemon's answer (pcapng) to `out` (`-`: stdout), which
/// is made before the daemon is asked and never written over unless `force`; without
/// `out`, its packets printed one line each.
fn query(
    e: &Endpoint,
    t: Duration,
    body: &Value,
    (out, force): (Option<&Path>, bool),
    print: &Printing,
) -> Result<i32> {
    let body = serde_json::to_vec(body)?;
    let call = ("POST", "/queries", Some(body.as_slice()));
    let Some(out) = out else {
        let printed = super::query::into_printer(print, |file| {
            answer_to(e, t, call, None, Some(file)).map_err(|x| named(x, e, t))
        })?;
        return Ok(printed.unwrap_or(0));
    };
    super::query::into_new_file(out, force, |file| {
        answer_to(e, t, call, Some(out), file).map_err(|x| named(x, e, t))
    })
}

/// `request fetch` and `request alert`: the packets at `path` (a capture's, an alert's)
/// into `out`, which is never written over (unless `force`) and is removed when the
/// download fails.
fn download(e: &Endpoint, t: Duration, path: &str, out: &Path, force: bool) -> Result<i32> {
    super::query::into_new_file(out, force, |file| {
        answer_to(e, t, ("GET", path, None), Some(out), file).map_err(|x| named(x, e, t))
    })
}

/// A streamed pcapng answer (a query's, or a download's) into `file` (None: stdout), its
/// errors as they come. `out` names the file the user gave (None: the file is the
/// printer's pipe, and no line says where the answer went).
fn answer_to(
    e: &Endpoint,
    t: Duration,
    (method, path, body): (&str, &str, Option<&[u8]>),
    out: Option<&Path>,
    file: Option<std::fs::File>,
) -> Result<i32> {
    let (s, token) = connect(e, t)?;
    let to_stdout = file.is_none() || out.is_none();
    let got = match file {
        None => {
            let mut w = std::io::stdout().lock();
            http::call_streaming(s, method, path, token, body, &mut w).map_err(refused)?
        }
        Some(f) => {
            let mut w = std::io::BufWriter::new(f);
            let r = http::call_streaming(s, method, path, token, body, &mut w).map_err(refused)?;
            std::io::Write::flush(&mut w)?;
            r
        }
    };
    if got.status != 200 {
        bail!("{} (HTTP {})", error_message(&got.error), got.status);
    }
    // The daemon's notes on its answer, as a local query prints them.
    for n in got.notes() {
        eprintln!("corecap: {n}");
    }
    let answer = got.partial().unwrap_or_else(|| "whole".to_owned());
    if let (false, Some(out)) = (to_stdout, out) {
        eprintln!(
            "wrote {} bytes of pcapng to {} ({answer})",
            got.bytes,
            out.display()
        );
    } else if got.partial().is_some() {
        eprintln!("corecap: the answer is {answer}");
    }
    Ok(0)
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
    if let (Some(since), Some(rec), Some(live)) = (v.since, v.recorded, v.live) {
        o += &format!("  since {since:.3}: {rec} from the recording, {live} live\n");
    }
    o += &start_figures(v);
    if let Some(p) = &v.path {
        o += &format!("  output: {p} ({} bytes)\n", v.file_bytes);
    }
    for f in v.files.iter().skip(1) {
        o += &format!("  also: {f}\n");
    }
    if v.earlier_run {
        o += "  started by an earlier run of the daemon\n";
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

/// How the capture started, as three figures: setup (request to armed), time armed
/// (the wait for traffic), and time to the first packet (both together).
fn start_figures(v: &CaptureView) -> String {
    let mut o = format!("  setup: {:.0} us (request to armed)\n", v.setup_us);
    match (v.first_packet_us.or(v.lag_us), v.armed_us) {
        (Some(first), armed) => {
            o += &format!(
                "  armed: {:.0} us before the first packet (waiting for traffic)\n",
                armed.unwrap_or((first - v.setup_us).max(0.0))
            );
            o += &format!("  first packet: {first:.0} us after the request\n");
        }
        (None, Some(armed)) => {
            o += &format!("  armed: {armed:.0} us, no packet yet\n");
            o += "  first packet: none yet\n";
        }
        // A capture that starts in the past: its first packet is older than the request.
        (None, None) if v.since.is_some() => o += "  first packet: from the recording\n",
        (None, None) => o += "  first packet: none yet\n",
    }
    o
}

/// Polls a capture until it ends; SIGINT or SIGTERM stops it first. Returns its final view.
fn wait(e: &Endpoint, t: Duration, id: &str) -> Result<CaptureView> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    loop {
        // Relaxed: a flag set by the signal handler, polled here.
        if stop.load(Ordering::Relaxed) {
            return view(&call_ok(e, t, "DELETE", &format!("/captures/{id}"), None)?);
        }
        let v = view(&call_ok(e, t, "GET", &format!("/captures/{id}"), None)?)?;
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
    let c = config::request(&a)?;
    if !c.sensors.is_empty() {
        return fleet(&c);
    }
    let (e, t) = (&c.endpoint, c.timeout);
    match &c.call {
        Call::Start { request, wait } => return start(e, t, request, *wait, c.json),
        Call::Query {
            from,
            to,
            filter,
            out,
            force,
            select,
            print,
        } => {
            let body = query_body(from, to, filter, select);
            return query(e, t, &body, (out.as_deref(), *force), print);
        }
        Call::Flows(path) => return super::remote_flows::one(e, t, path),
        Call::Fetch { id, out, force } => {
            return download(e, t, &format!("/captures/{id}/pcap"), out, *force)
        }
        Call::Alert { id, out, force } => {
            return download(e, t, &format!("/alerts/{id}/pcap"), out, *force)
        }
        Call::List => list(&call_ok(e, t, "GET", "/captures", None)?, c.json)?,
        Call::Show(id) => show(
            &call_ok(e, t, "GET", &format!("/captures/{id}"), None)?,
            c.json,
        )?,
        Call::Stop(id) => show(
            &call_ok(e, t, "DELETE", &format!("/captures/{id}"), None)?,
            c.json,
        )?,
        Call::Metrics => raw(&call_ok(e, t, "GET", "/metrics", None)?),
        Call::Status => raw(&call_ok(e, t, "GET", "/status", None)?),
        Call::Hold(body) => {
            let body = serde_json::to_vec(body)?;
            raw(&call_ok(e, t, "POST", "/holds", Some(&body))?);
        }
        Call::Holds => raw(&call_ok(e, t, "GET", "/holds", None)?),
        Call::Alerts => raw(&call_ok(e, t, "GET", "/alerts", None)?),
        Call::Release(name) => raw(&call_ok(e, t, "DELETE", &format!("/holds/{name}"), None)?),
        Call::Cores => cores(&call_ok(e, t, "GET", "/cores", None)?, c.json)?,
    }
    Ok(0)
}

/// The body of `POST /queries`.
fn query_body(
    from: &Option<String>,
    to: &Option<String>,
    filter: &Option<String>,
    [community_id, sni, dns, http_host]: &[Option<String>; 4],
) -> serde_json::Value {
    let mut v = serde_json::json!({ "from": from, "to": to, "filter": filter });
    // Only the selectors given: an older daemon refuses fields it does not know.
    for (k, s) in [
        ("community_id", community_id),
        ("sni", sni),
        ("dns", dns),
        ("http_host", http_host),
    ] {
        if let Some(s) = s {
            v[k] = serde_json::Value::from(s.as_str());
        }
    }
    v
}

/// A request to several sensors (`--sensor`, `--sensors`): queries, lists and shows.
fn fleet(c: &config::RequestConfig) -> Result<i32> {
    let (sensors, partial, timeout) = (&c.sensors, c.partial, c.timeout);
    match &c.call {
        Call::Query {
            from,
            to,
            filter,
            out,
            force,
            select,
            print,
        } => super::fleet::query(
            sensors,
            &query_body(from, to, filter, select),
            (out.as_deref(), *force, print),
            partial,
            timeout,
            c.json,
        ),
        Call::List => super::fleet::get(sensors, "/captures", partial, timeout, c.json),
        Call::Flows(path) => super::remote_flows::fleet(sensors, path, partial, timeout),
        Call::Show(id) => {
            super::fleet::get(sensors, &format!("/captures/{id}"), partial, timeout, c.json)
        }
        _ => bail!("with several sensors, request does query, flows, list and show; start, stop, metrics, status and cores go to one daemon (--url)"),
    }
}

/// The daemon's answer as it came.
fn raw(b: &[u8]) {
    print!("{}", String::from_utf8_lossy(b));
}

/// `request start`: prints the new capture's id, or with `wait` its final state; exits 1
/// when it failed.
fn start(
    e: &Endpoint,
    t: Duration,
    request: &StartRequest,
    wait_end: bool,
    json: bool,
) -> Result<i32> {
    let body = serde_json::to_vec(request)?;
    let b = call_ok(e, t, "POST", "/captures", Some(&body))?;
    if wait_end {
        let v = wait(e, t, &view(&b)?.id)?;
        if json {
            println!("{}", serde_json::to_string_pretty(&v)?);
        } else {
            print!("{}", describe(&v));
        }
        return Ok(if v.state == State::Failed { 1 } else { 0 });
    }
    if json {
        raw(&b);
    } else {
        let v = view(&b)?;
        for n in &v.notes {
            eprintln!("corecap: {n}");
        }
        println!("{}", v.id);
    }
    Ok(0)
}

/// `request list`: one line a capture.
fn list(b: &[u8], json: bool) -> Result<()> {
    if json {
        raw(b);
        return Ok(());
    }
    let vs: Vec<CaptureView> =
        serde_json::from_slice(b).context("the daemon's answer is not a list")?;
    println!(
        "{:<6} {:<9} {:<7} {:<12} {:>10} {:>10}  {:<24} filter",
        "id", "state", "mode", "interface", "packets", "1st pkt us", "output"
    );
    for v in vs {
        println!(
            "{:<6} {:<9} {:<7} {:<12} {:>10} {:>10}  {:<24} {}",
            v.id,
            v.state.name(),
            v.mode.name(),
            v.interface,
            v.packets,
            v.first_packet_us
                .or(v.lag_us)
                .map_or("-".into(), |l| format!("{l:.0}")),
            v.path.as_deref().unwrap_or("-"),
            v.filter.as_deref().unwrap_or("")
        );
    }
    Ok(())
}

/// `request show` and `request stop`: the capture in a few lines.
fn show(b: &[u8], json: bool) -> Result<()> {
    if json {
        raw(b);
    } else {
        print!("{}", describe(&view(b)?));
    }
    Ok(())
}

/// `request cores`: a line a CPU, with its roles and the IRQs it takes.
fn cores(b: &[u8], json: bool) -> Result<()> {
    if json {
        raw(b);
        return Ok(());
    }
    let v: Value = serde_json::from_slice(b)?;
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
    Ok(())
}
