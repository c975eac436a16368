//! The lab: a network namespace holding a veth pair, `gen0` (the generator's end) and
//! `cap0` (the capture end), with nothing else on it.
//!
//! IPv6 is off in the namespace, so no router solicitation or DAD packet spoils an exact
//! count. With `queues > 1` the pair is multi-queue, GRO is on at `cap0` (which gives each
//! veth RX queue its own NAPI instance) and TSO is off at `gen0`. A packet socket sends on
//! the TX queue of its CPU, and veth hands TX queue i to RX queue i, so `corecap gen
//! --threads N` (threads pinned to distinct CPUs, each sending its own flows) spreads the
//! flows over the RX queues the way RSS would.
//! Options move the receive work onto chosen CPUs (threaded NAPI, or RPS), which is the
//! contended regime of paper 001's test 3.

use std::process::Command;

use corecap_linux::ethtool::{Ethtool, Offload};
use corecap_linux::netdev;

/// Name of the generator's end.
pub const GEN_IF: &str = "gen0";
/// Name of the capture end.
pub const CAP_IF: &str = "cap0";

/// How to build the lab.
#[derive(Clone, Debug)]
pub struct LabConfig {
    /// Network namespace name.
    pub netns: String,
    /// RX/TX queues of each veth end.
    pub queues: u32,
    /// Move cap0's NAPI processing to kernel threads pinned to this CPU.
    pub threaded_napi_cpu: Option<u32>,
    /// Steer cap0's receive processing to these CPUs with RPS.
    pub rps_cpus: Option<Vec<u32>>,
}

/// Lab errors: the command that failed and what it printed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LabError(String);

fn run(args: &[&str]) -> Result<String, LabError> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| {
            LabError(format!(
                "cannot run {}: {e} (is iproute2 installed?)",
                args[0]
            ))
        })?;
    if !out.status.success() {
        return Err(LabError(format!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether the namespace exists.
pub fn exists(netns: &str) -> bool {
    std::path::Path::new("/run/netns").join(netns).exists()
}

fn mask(cpus: &[u32]) -> String {
    let mut words = vec![0u32; cpus.iter().map(|c| *c as usize / 32 + 1).max().unwrap_or(1)];
    for c in cpus {
        words[*c as usize / 32] |= 1 << (c % 32);
    }
    words
        .iter()
        .rev()
        .map(|w| format!("{w:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Creates the lab. Fails if it already exists.
pub fn up(cfg: &LabConfig) -> Result<(), LabError> {
    if exists(&cfg.netns) {
        return Err(LabError(format!(
            "lab {} already exists; run `corecap lab down --netns {}` first",
            cfg.netns, cfg.netns
        )));
    }
    let ns = cfg.netns.as_str();
    let q = cfg.queues.max(1).to_string();
    run(&["ip", "netns", "add", ns])?;
    let r = build(cfg, ns, &q);
    if r.is_err() {
        let _ = down(ns);
    }
    r
}

/// Builds the lab in its new namespace `ns`: IPv6 off, the veth pair with `q` queues a
/// side, offloads, links up, threaded NAPI and RPS as `cfg` asks.
fn build(cfg: &LabConfig, ns: &str, q: &str) -> Result<(), LabError> {
    in_lab(ns, disable_ipv6)?;
    run(&[
        "ip",
        "-n",
        ns,
        "link",
        "add",
        GEN_IF,
        "numtxqueues",
        q,
        "numrxqueues",
        q,
        "type",
        "veth",
        "peer",
        "name",
        CAP_IF,
        "numtxqueues",
        q,
        "numrxqueues",
        q,
    ])?;
    if cfg.queues > 1 || cfg.threaded_napi_cpu.is_some() {
        // As `ethtool -K cap0 gro on` and `ethtool -K gen0 tso off gso off` would, by
        // the ioctl itself: the lab needs no ethtool program. (The legacy TSO command
        // leaves the AccECN segmentation offload on; the lab sends no AccECN traffic.)
        in_lab(ns, || {
            Ethtool::open(CAP_IF)?.set_offload(Offload::Gro, true)?;
            let gen = Ethtool::open(GEN_IF)?;
            gen.set_offload(Offload::Tso, false)?;
            gen.set_offload(Offload::Gso, false)
        })?;
    }
    for dev in ["lo", GEN_IF, CAP_IF] {
        run(&["ip", "-n", ns, "link", "set", dev, "up"])?;
    }
    if let Some(cpu) = cfg.threaded_napi_cpu {
        run(&[
            "ip",
            "netns",
            "exec",
            ns,
            "sh",
            "-c",
            &format!("echo 1 > /sys/class/net/{CAP_IF}/threaded"),
        ])?;
        pin_napi_threads(cpu)?;
    }
    if let Some(cpus) = &cfg.rps_cpus {
        let m = mask(cpus);
        let cmd = format!(
            "for f in /sys/class/net/{CAP_IF}/queues/rx-*/rps_cpus; do echo {m} > $f; done"
        );
        run(&["ip", "netns", "exec", ns, "sh", "-c", &cmd])?;
    }
    Ok(())
}

/// Turns IPv6 off in the current namespace, so its links send no neighbour discovery of
/// their own beside the generated traffic. A kernel without IPv6 has no such knob, and
/// nothing to turn off.
fn disable_ipv6() -> corecap_linux::Result<()> {
    for conf in ["all", "default"] {
        let knob = format!("/proc/sys/net/ipv6/conf/{conf}/disable_ipv6");
        match std::fs::write(&knob, "1") {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(corecap_linux::Error::from_io(knob, e));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Runs `f` in the lab's namespace (a thread of its own; see [`netdev::in_netns`]).
fn in_lab<T: Send>(
    ns: &str,
    f: impl FnOnce() -> corecap_linux::Result<T> + Send,
) -> Result<T, LabError> {
    netdev::in_netns(ns, f)
        .map_err(|e| LabError(format!("in lab {ns}: {}", corecap_linux::error_chain(&e))))
}

/// Pins the `napi/cap0-*` kernel threads to `cpu`.
fn pin_napi_threads(cpu: u32) -> Result<(), LabError> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Ok(());
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.starts_with(&format!("napi/{CAP_IF}-")) {
            run(&["taskset", "-pc", &cpu.to_string(), &name])?;
        }
    }
    Ok(())
}

/// Removes the lab (the veth pair goes with the namespace).
pub fn down(netns: &str) -> Result<(), LabError> {
    if !exists(netns) {
        return Err(LabError(format!("no lab named {netns}")));
    }
    run(&["ip", "netns", "del", netns]).map(|_| ())
}

/// A description of the lab's links and their counters.
pub fn status(netns: &str) -> Result<String, LabError> {
    if !exists(netns) {
        return Err(LabError(format!(
            "no lab named {netns} (run `corecap lab up`)"
        )));
    }
    run(&["ip", "-n", netns, "-s", "link", "show"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_mask() {
        assert_eq!(mask(&[0]), "00000001");
        assert_eq!(mask(&[1, 3]), "0000000a");
        assert_eq!(mask(&[33]), "00000002,00000000");
    }
}
