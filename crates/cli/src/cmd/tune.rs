//! `corecap tune show|plan|apply|restore|snapshot`.

use anyhow::{bail, Context, Result};
use corecap_tune::apply::{self, ChangeOn};
use corecap_tune::settings::fixture_path;
use corecap_tune::show::Report;
use corecap_tune::{Machine, Plan, PlanOptions, Root};

use crate::args::{TuneArgs, TuneCmd, TunePlanArgs};

pub(crate) fn run(cmd: TuneCmd) -> Result<i32> {
    match cmd {
        TuneCmd::Show(a) => {
            let root = open(&a, false)?;
            let m = read(&root, &a)?;
            if a.json {
                println!("{}", serde_json::to_string_pretty(&m)?);
            } else {
                print!("{}", Report(&m));
            }
        }
        TuneCmd::Plan(p) => {
            let root = open(&p.target, false)?;
            let (_, plan) = plan(&root, &p)?;
            if p.target.json {
                println!("{}", plan.to_json());
            } else {
                print!("{plan}");
            }
        }
        TuneCmd::Apply { plan: p, dry_run } => {
            let root = open(&p.target, false)?;
            let (m, plan) = plan(&root, &p)?;
            if !p.target.json {
                for w in &plan.warnings {
                    eprintln!("corecap: warning: {}", w.message);
                }
            }
            let list = apply::apply(&root, &m, &plan, dry_run)
                .with_context(|| format!("applying the plan for {}", p.target.iface))?;
            report(&p.target, &list, dry_run, "the plan is already in place")?;
        }
        TuneCmd::Restore { target, dry_run } => {
            let root = open(&target, false)?;
            let list = apply::restore(&root, &target.iface, dry_run)
                .with_context(|| format!("restoring {}", target.iface))?;
            report(&target, &list, dry_run, "nothing to change")?;
        }
        TuneCmd::Snapshot { target, out } => {
            if out.exists() {
                bail!("{} exists; give a new directory", out.display());
            }
            let root = open(&target, true)?;
            let m = read(&root, &target)?;
            std::fs::create_dir_all(out.join("ethtool"))
                .with_context(|| format!("creating {}", out.display()))?;
            let n = root
                .copy_record(&out)
                .with_context(|| format!("writing {}", out.display()))?;
            if root.is_live() {
                std::fs::write(
                    out.join(fixture_path(&target.iface)),
                    m.nic.settings.to_json(),
                )
                .with_context(|| format!("writing {}", out.display()))?;
            }
            println!(
                "snapshot of {} in {}: {n} files and links; read it with --root {}",
                target.iface,
                out.display(),
                out.display()
            );
        }
    }
    Ok(0)
}

fn open(a: &TuneArgs, recording: bool) -> Result<Root> {
    let root = match &a.root {
        Some(dir) => {
            if a.netns.is_some() {
                bail!("--netns applies to the live machine, not to --root");
            }
            Root::at(dir).with_context(|| format!("opening root {}", dir.display()))?
        }
        None => {
            if let Some(ns) = &a.netns {
                corecap_linux::netdev::enter_netns(ns)?;
            }
            Root::live()
        }
    };
    Ok(if recording { root.recording() } else { root })
}

fn read(root: &Root, a: &TuneArgs) -> Result<Machine> {
    Machine::read(root, &a.iface).with_context(|| format!("reading {}", a.iface))
}

fn plan(root: &Root, p: &TunePlanArgs) -> Result<(Machine, Plan)> {
    if p.workers == Some(0) {
        bail!("--workers must be at least 1");
    }
    if p.queues == Some(0) {
        bail!("--queues must be at least 1");
    }
    let m = read(root, &p.target)?;
    let plan = Plan::new(
        &m,
        PlanOptions {
            workers: p.workers,
            queues: p.queues,
        },
    );
    Ok((m, plan))
}

fn report(a: &TuneArgs, list: &[apply::Change], dry_run: bool, none: &str) -> Result<()> {
    if a.json {
        let lines: Vec<String> = list
            .iter()
            .map(|c| ChangeOn(&a.iface, c).to_string())
            .collect();
        println!(
            "{}",
            serde_json::json!({"interface": a.iface, "dry_run": dry_run, "changes": lines})
        );
        return Ok(());
    }
    if list.is_empty() {
        println!("{}: {none}", a.iface);
    }
    for c in list {
        let line = ChangeOn(&a.iface, c);
        if dry_run {
            println!("would {line}");
        } else {
            println!("{line}");
        }
    }
    Ok(())
}
