//! `corecap request flows`: the connections a daemon lists (`GET /flows`), or several
//! daemons at once (`--sensor`), as JSON lines on stdout and the notes on stderr.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::client::error_message;
use crate::config::{Endpoint, Sensor};

/// A daemon's connections, and its end line (figures and notes).
type Answer = (Vec<Value>, Value);

/// A daemon's answer: its connections, and its end line (figures and notes).
fn parse(body: &[u8]) -> Result<Answer> {
    let mut flows = Vec::new();
    for line in body.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let v: Value = serde_json::from_slice(line).context("the answer is not JSON lines")?;
        if v["type"] == "end" {
            return Ok((flows, v));
        }
        flows.push(v);
    }
    bail!(
        "the answer was cut short (no end line after {} connections)",
        flows.len()
    )
}

/// The notes of an end line, each on stderr after `who`.
fn notes(who: &str, end: &Value) {
    for n in end["notes"].as_array().into_iter().flatten() {
        eprintln!("corecap: {who}note: {}", n.as_str().unwrap_or_default());
    }
    if end["truncated"] == true {
        eprintln!(
            "corecap: {who}{} connections matched; the first {} given (limit)",
            end["matched"], end["given"]
        );
    }
}

/// `request flows` to one daemon.
pub(crate) fn one(e: &Endpoint, t: Duration, path: &str) -> Result<i32> {
    let body = super::client::call_ok(e, t, "GET", path, None)?;
    let (flows, end) = parse(&body)?;
    for f in &flows {
        println!("{f}");
    }
    notes("", &end);
    Ok(0)
}

/// `request flows` to every sensor at once: the lines of all, each with its sensor's name
/// (`observer.name`), in order of first packet.
pub(crate) fn fleet(sensors: &[Sensor], path: &str, partial: bool, t: Duration) -> Result<i32> {
    let answers: Vec<(String, Result<Answer>)> =
        super::fleet::get_each(sensors, path, t, |status, body| {
            if status >= 300 {
                bail!("{} (HTTP {status})", error_message(&body));
            }
            parse(&body)
        });
    let mut all = Vec::new();
    let mut failed = Vec::new();
    for (name, r) in answers {
        match r {
            Ok((flows, end)) => {
                notes(&format!("{name}: "), &end);
                for mut f in flows {
                    f["observer"] = serde_json::json!({ "name": name });
                    all.push(f);
                }
            }
            Err(e) => {
                eprintln!("corecap: {name}: {e:#}");
                failed.push(name);
            }
        }
    }
    all.sort_by_key(|f| f["corecap"]["first_ns"].as_u64().unwrap_or(0));
    for f in &all {
        println!("{f}");
    }
    super::fleet::enough_answered(&failed, sensors.len(), partial, "")?;
    Ok(0)
}
