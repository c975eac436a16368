//! Carrying a plan out, and undoing it.
//!
//! `apply` first saves what it is about to change in `var/lib/corecap/tune-IF.json`
//! under the root (kept if it already exists, so a second apply does not overwrite the
//! original state), then sets the channel count, the RX ring size, pause frames and the
//! IRQ affinities. `restore` writes the saved values back and removes the state file.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::cpus::{format_list, parse_list};
use crate::error::{Error, Result};
use crate::machine::Machine;
use crate::plan::Plan;
use crate::root::Root;
use crate::settings::{on_off, ChannelCounts, PauseFrames, RingSizes, Settings};

/// One write that `apply` or `restore` makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// `/proc/irq/N/smp_affinity_list`.
    IrqAffinity {
        /// The IRQ.
        irq: u32,
        /// CPU list now.
        from: String,
        /// CPU list to write.
        to: String,
    },
    /// ethtool channel counts.
    Channels {
        /// Counts now.
        from: ChannelCounts,
        /// Counts to set.
        to: ChannelCounts,
    },
    /// ethtool ring sizes.
    Ring {
        /// Sizes now.
        from: RingSizes,
        /// Sizes to set.
        to: RingSizes,
    },
    /// ethtool pause frames.
    Pause {
        /// Settings now.
        from: PauseFrames,
        /// Settings to set.
        to: PauseFrames,
    },
}

/// The display of a change names the interface through this wrapper.
#[derive(Debug)]
pub struct ChangeOn<'a>(pub &'a str, pub &'a Change);

impl fmt::Display for ChangeOn<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let iface = self.0;
        match self.1 {
            Change::IrqAffinity { irq, from, to } => write!(
                f,
                "write /proc/irq/{irq}/smp_affinity_list = {to} (was {from})"
            ),
            Change::Channels { from, to } => {
                if to.combined != from.combined {
                    write!(
                        f,
                        "ethtool -L {iface} combined {} (was {})",
                        to.combined, from.combined
                    )
                } else {
                    write!(f, "ethtool -L {iface} rx {} (was {})", to.rx, from.rx)
                }
            }
            Change::Ring { from, to } => write!(
                f,
                "ethtool -G {iface} rx {} tx {} (was rx {} tx {})",
                to.rx, to.tx, from.rx, from.tx
            ),
            Change::Pause { from, to } => write!(
                f,
                "ethtool -A {iface} autoneg {} rx {} tx {} (was autoneg {} rx {} tx {})",
                on_off(to.autoneg),
                on_off(to.rx),
                on_off(to.tx),
                on_off(from.autoneg),
                on_off(from.rx),
                on_off(from.tx)
            ),
        }
    }
}

/// What `apply` saved, to be restored.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct SavedState {
    /// Interface.
    pub interface: String,
    /// Each changed IRQ with its CPU list before.
    pub irqs: Vec<SavedIrq>,
    /// Channel counts before, if changed.
    pub channels: Option<ChannelCounts>,
    /// Ring sizes before, if changed.
    pub ring: Option<RingSizes>,
    /// Pause frames before, if changed.
    pub pause: Option<PauseFrames>,
}

/// One IRQ's affinity before `apply`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SavedIrq {
    /// The IRQ.
    pub irq: u32,
    /// Its `smp_affinity_list` before.
    pub smp_affinity_list: String,
}

/// Path of the saved state of `iface`, relative to the root.
pub fn state_path(iface: &str) -> String {
    format!("var/lib/corecap/tune-{iface}.json")
}

/// The changes that carry out `plan` on `machine` (none for settings already right).
pub fn changes(machine: &Machine, plan: &Plan) -> Vec<Change> {
    let s = &machine.nic.settings;
    let mut out = Vec::new();
    if let (Some(from), Some(want)) = (s.channels, plan.nic.channels) {
        if from.rx_queues() != want {
            let mut to = from;
            if from.max_combined > 0 {
                to.combined = want;
                to.rx = 0;
            } else {
                to.rx = want;
            }
            out.push(Change::Channels { from, to });
        }
    }
    if let (Some(from), Some(rx)) = (s.ring, plan.nic.rx_ring) {
        if from.rx != rx {
            out.push(Change::Ring {
                from,
                to: RingSizes { rx, ..from },
            });
        }
    }
    if let (Some(from), Some(to)) = (s.pause, plan.nic.pause) {
        if from != to {
            out.push(Change::Pause { from, to });
        }
    }
    for q in plan.workers.iter().flat_map(|w| &w.queues) {
        let (Some(irq), Some(cpu)) = (q.irq, q.irq_cpu) else {
            continue;
        };
        let from = machine
            .nic
            .irqs
            .iter()
            .find(|x| x.irq == irq)
            .and_then(|x| x.affinity.clone())
            .unwrap_or_default();
        if from != [cpu] {
            out.push(Change::IrqAffinity {
                irq,
                from: format_list(&from),
                to: cpu.to_string(),
            });
        }
    }
    out
}

/// Saves the state the changes overwrite (unless a saved state exists), then makes them.
/// With `dry_run`, only returns them.
pub fn apply(root: &Root, machine: &Machine, plan: &Plan, dry_run: bool) -> Result<Vec<Change>> {
    let list = changes(machine, plan);
    if dry_run || list.is_empty() {
        return Ok(list);
    }
    let iface = &machine.nic.name;
    let rel = state_path(iface);
    if !root.exists(&rel) {
        let mut saved = SavedState {
            interface: iface.clone(),
            ..Default::default()
        };
        for c in &list {
            match c {
                Change::IrqAffinity { irq, from, .. } => saved.irqs.push(SavedIrq {
                    irq: *irq,
                    smp_affinity_list: from.clone(),
                }),
                Change::Channels { from, .. } => saved.channels = Some(*from),
                Change::Ring { from, .. } => saved.ring = Some(*from),
                Change::Pause { from, .. } => saved.pause = Some(*from),
            }
        }
        let dir = root.path("var/lib/corecap");
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let json = serde_json::to_string_pretty(&saved).expect("state serializes") + "\n";
        root.write(&rel, &json)?;
    }
    make(root, iface, &list)?;
    Ok(list)
}

/// Puts back the state saved by `apply` and removes the state file. With `dry_run`, only
/// returns the changes.
pub fn restore(root: &Root, iface: &str, dry_run: bool) -> Result<Vec<Change>> {
    let rel = state_path(iface);
    let text = root.read(&rel).map_err(|_| {
        Error::Invalid(format!(
            "no saved state for {iface} at {}: nothing to restore (was `corecap tune apply` run?)",
            root.path(&rel).display()
        ))
    })?;
    let saved: SavedState = serde_json::from_str(&text).map_err(|e| Error::Parse {
        what: root.display(&rel),
        value: e.to_string(),
    })?;
    let now = Settings::read(root, iface)?;
    let mut list = Vec::new();
    if let (Some(to), Some(from)) = (saved.channels, now.channels) {
        list.push(Change::Channels { from, to });
    }
    if let (Some(to), Some(from)) = (saved.ring, now.ring) {
        list.push(Change::Ring { from, to });
    }
    if let (Some(to), Some(from)) = (saved.pause, now.pause) {
        list.push(Change::Pause { from, to });
    }
    for s in &saved.irqs {
        let from = root
            .read_opt(format!("proc/irq/{}/smp_affinity_list", s.irq))
            .unwrap_or_default();
        list.push(Change::IrqAffinity {
            irq: s.irq,
            from,
            to: s.smp_affinity_list.clone(),
        });
    }
    if dry_run {
        return Ok(list);
    }
    make(root, iface, &list)?;
    let full = root.path(&rel);
    std::fs::remove_file(&full).map_err(|e| Error::io(&full, e))?;
    Ok(list)
}

fn make(root: &Root, iface: &str, list: &[Change]) -> Result<()> {
    for c in list {
        match c {
            Change::Channels { to, .. } => Settings::set_channels(root, iface, *to)?,
            Change::Ring { to, .. } => Settings::set_ring(root, iface, to.rx, to.tx)?,
            Change::Pause { to, .. } => Settings::set_pause(root, iface, *to)?,
            Change::IrqAffinity { irq, to, .. } => {
                if parse_list(to).is_none() {
                    return Err(Error::Invalid(format!("bad CPU list {to:?} for IRQ {irq}")));
                }
                root.write(
                    format!("proc/irq/{irq}/smp_affinity_list"),
                    &format!("{to}\n"),
                )?
            }
        }
    }
    Ok(())
}
