//! `corecap lab up|down|status|mix`.

use anyhow::{Context, Result};
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
        LabCmd::Mix(a) => mix(&a)?,
    }
    Ok(0)
}

/// `lab mix`: writes the heavy-tailed mix and says what it holds (JSON).
fn mix(a: &crate::args::LabMixArgs) -> Result<()> {
    use corecap_lab::gen::mix::{write_mix, MixSpec};
    let spec = MixSpec {
        connections: a.connections,
        max_bytes: corecap_engine::limits::size(&a.max_bytes, "--max-bytes")?,
        seed: a.seed,
        alpha: a.alpha,
        random_share: match a.random_payload {
            true => 100,
            false => a.random_share.unwrap_or(0),
        },
    };
    if !(a.alpha > 0.0 && a.alpha.is_finite()) {
        anyhow::bail!("--alpha must be a number above 0 (got {})", a.alpha);
    }
    let f = std::fs::File::create(&a.write)
        .with_context(|| format!("creating {}", a.write.display()))?;
    let mut out = std::io::BufWriter::new(f);
    let r = write_mix(&spec, &mut out)
        .and_then(|r| std::io::Write::flush(&mut out).map(|()| r))
        .with_context(|| format!("writing {}", a.write.display()))?;
    println!("{}", serde_json::to_string(&r)?);
    Ok(())
}
