//! `corecap demo`: the whole path on one machine, with nothing to set up. It brings up a
//! veth lab in its own namespace, starts a capture on every core of the capture end,
//! sends generated traffic into the other end, prints the capture's per-worker table and
//! totals, and removes the lab.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use corecap_lab::lab::{self, LabConfig};

use crate::args::DemoArgs;

/// Removes the lab when the demo ends, however it ends.
struct LabGuard(String);

impl Drop for LabGuard {
    fn drop(&mut self) {
        let _ = lab::down(&self.0);
    }
}

pub(crate) fn run(a: DemoArgs) -> Result<i32> {
    let exe = std::env::current_exe().context("finding the corecap binary")?;
    if lab::exists(&a.netns) {
        bail!(
            "a lab named {} exists already; remove it with `corecap lab down --netns {}`",
            a.netns,
            a.netns
        );
    }
    println!(
        "corecap demo: lab {} with {} queue(s), {} packets of {} bytes in {} flows",
        a.netns, a.queues, a.packets, a.size, a.flows
    );
    lab::up(&LabConfig {
        netns: a.netns.clone(),
        queues: a.queues,
        threaded_napi_cpu: None,
        rps_cpus: None,
    })?;
    let _guard = LabGuard(a.netns.clone());

    let mut cap = Command::new(&exe);
    cap.args([
        "capture",
        "--netns",
        &a.netns,
        "-i",
        lab::CAP_IF,
        "--stats-interval",
        "0",
    ])
    .args(["-c", &a.packets.to_string(), "--duration", "60"]);
    if let Some(w) = &a.write {
        cap.arg("-w").arg(w);
    }
    let mut child = cap
        .stderr(Stdio::piped())
        .stdout(Stdio::inherit())
        .spawn()
        .context("starting the capture")?;
    let stderr = child.stderr.take().context("capture stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let mut ready = false;
    for line in lines.by_ref() {
        let line = line.unwrap_or_default();
        println!("{line}");
        if line.contains("capturing on") {
            ready = true;
            break;
        }
    }
    if !ready {
        let status = child.wait()?;
        bail!("the capture did not start ({status})");
    }
    let gen = Command::new(&exe)
        .args([
            "gen",
            "--netns",
            &a.netns,
            "-i",
            lab::GEN_IF,
            "--count",
            &a.packets.to_string(),
        ])
        .args([
            "--size",
            &a.size.to_string(),
            "--flows",
            &a.flows.to_string(),
            "--bidir",
        ])
        .output()
        .context("running the generator")?;
    print!("generator: {}", String::from_utf8_lossy(&gen.stdout));
    if !gen.status.success() {
        eprint!("{}", String::from_utf8_lossy(&gen.stderr));
    }
    for line in lines {
        println!("{}", line.unwrap_or_default());
    }
    let status = child.wait()?;
    Ok(status.code().unwrap_or(2))
}
