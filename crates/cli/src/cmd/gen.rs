//! `corecap gen`.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use corecap_lab::gen::{self, FrameSpec, GenConfig, Proto};

use crate::args::{EngineArg, GenArgs, ProtoArg};
use crate::config;

pub(crate) fn run(a: GenArgs) -> Result<i32> {
    if let Some(ns) = &a.netns {
        corecap_linux::netdev::enter_netns(ns)
            .with_context(|| format!("entering network namespace {ns}"))?;
    }
    if a.count.is_none() && a.duration.is_none() {
        bail!("give --count or --duration, so the generator stops by itself");
    }
    if a.threads == 0 || a.threads > 64 {
        bail!("--threads must be between 1 and 64");
    }
    let cfg = GenConfig {
        iface: a.iface.clone(),
        frames: FrameSpec {
            size: a.size,
            flows: a.flows,
            proto: match a.proto {
                ProtoArg::Udp => Proto::Udp,
                ProtoArg::Tcp => Proto::Tcp,
            },
            vlan: a.vlan,
            bidir: a.bidir,
            base: a.flow_base,
            burst: a.burst.max(1),
        },
        rate: a.rate.filter(|r| *r > 0),
        count: a.count,
        duration: a
            .duration
            .map(|d| corecap_engine::limits::seconds(d, "--duration"))
            .transpose()?,
        threads: a.threads,
        cpus: match &a.cpus {
            Some(s) => config::cpu_list(s)?,
            None => vec![],
        },
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let rep = match a.engine {
        EngineArg::Txring => gen::txring::run(&cfg, stop)?,
        EngineArg::Xdp => gen::xdp::run(&cfg, stop)?,
    };
    if a.json {
        println!(
            "{}",
            serde_json::json!({"type": "gen", "sent": rep.sent, "errors": rep.errors, "seconds": rep.seconds, "pps": rep.pps.round()})
        );
    } else {
        println!(
            "sent {} packets in {:.3}s ({:.0} pps, {:.1} Mbit/s){}",
            rep.sent,
            rep.seconds,
            rep.pps,
            rep.pps * f64::from(a.size) * 8.0 / 1e6,
            if rep.errors > 0 {
                format!(", {} refused by the kernel", rep.errors)
            } else {
                String::new()
            }
        );
    }
    Ok(0)
}
