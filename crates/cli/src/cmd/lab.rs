//! `corecap lab up|down|status`.

use anyhow::Result;
use corecap_lab::lab::{self, LabConfig};

use crate::args::LabCmd;
use crate::config;

pub(crate) fn run(cmd: LabCmd) -> Result<i32> {
    match cmd {
        LabCmd::Up(a) => {
            let cfg = LabConfig {
                netns: a.netns.clone(),
                queues: a.queues.clamp(1, 64),
                threaded_napi_cpu: a.threaded_napi,
                rps_cpus: a.rps.as_deref().map(config::cpu_list).transpose()?,
            };
            lab::up(&cfg)?;
            println!(
                "lab {} is up: send on {} (corecap gen --netns {} -i {}), capture on {} (corecap capture --netns {} -i {}); {} queue{}",
                cfg.netns,
                lab::GEN_IF,
                cfg.netns,
                lab::GEN_IF,
                lab::CAP_IF,
                cfg.netns,
                lab::CAP_IF,
                cfg.queues,
                if cfg.queues == 1 { "" } else { "s" }
            );
        }
        LabCmd::Down { netns } => {
            lab::down(&netns)?;
            println!("lab {netns} is down");
        }
        LabCmd::Status { netns } => print!("{}", lab::status(&netns)?),
    }
    Ok(0)
}
