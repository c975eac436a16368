//! `tune show`: the machine as text.

use std::fmt;

use crate::cpus::format_list;
use crate::machine::Machine;
use crate::nic::{Nic, QueueMask};
use crate::settings::{on_off, Settings};
use crate::topology::Topology;

/// Shows a [`Machine`] as the `tune show` report.
#[derive(Debug)]
pub struct Report<'a>(pub &'a Machine);

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write_nodes(f, &m.topology)?;
        write_interface(f, &m.nic)?;
        write_settings(f, &m.nic.settings)?;
        write_irqs(f, &m.nic)?;
        writeln!(f, "  RPS: {}", masks(&m.nic.rps))?;
        writeln!(f, "  XPS: {}", masks(&m.nic.xps))?;
        match m.irqbalance {
            Some(pid) => writeln!(f, "irqbalance: running (pid {pid})")?,
            None => writeln!(f, "irqbalance: not running")?,
        }
        Ok(())
    }
}

/// Each NUMA node: its CPUs, its core count and the hyper-threading twins.
fn write_nodes(f: &mut fmt::Formatter<'_>, t: &Topology) -> fmt::Result {
    writeln!(f, "NUMA nodes:")?;
    for n in &t.nodes {
        let cores = t.cores_of(&n.cpus);
        let ht = cores.iter().any(|c| c.len() > 1);
        write!(
            f,
            "  node {}: CPUs {} ({} cores",
            n.id,
            format_list(&n.cpus),
            cores.len()
        )?;
        if ht {
            let groups: Vec<String> = cores.iter().map(|c| format_list(c)).collect();
            write!(f, "; HT twins {}", groups.join(" "))?;
        }
        writeln!(f, ")")?;
    }
    Ok(())
}

/// The interface's device (PCI address and NUMA node), driver and sysfs queues.
fn write_interface(f: &mut fmt::Formatter<'_>, nic: &Nic) -> fmt::Result {
    writeln!(f, "interface {}:", nic.name)?;
    match &nic.pci {
        Some(pci) => {
            let node = nic
                .numa_node
                .map_or("unknown".to_owned(), |n| n.to_string());
            let local = nic
                .local_cpus
                .as_ref()
                .map_or("unknown".to_owned(), |c| format_list(c));
            writeln!(f, "  PCI {pci}, NUMA node {node}, local CPUs {local}")?;
        }
        None => writeln!(f, "  virtual device: no PCI device, no NUMA node")?,
    }
    let driver = nic.settings.driver.as_deref().unwrap_or("unknown");
    writeln!(f, "  driver: {driver}")?;
    writeln!(
        f,
        "  queues in sysfs: {} RX, {} TX",
        nic.rx_queues, nic.tx_queues
    )
}

/// The ethtool settings: channels, rings and pause frames.
fn write_settings(f: &mut fmt::Formatter<'_>, s: &Settings) -> fmt::Result {
    match &s.channels {
        Some(c) => writeln!(
            f,
            "  channels: combined {}/{}, rx {}/{}, tx {}/{}, other {}/{} (now/max)",
            c.combined, c.max_combined, c.rx, c.max_rx, c.tx, c.max_tx, c.other, c.max_other
        )?,
        None => writeln!(f, "  channels: not supported by the driver")?,
    }
    match &s.ring {
        Some(r) => writeln!(
            f,
            "  rings: RX {}/{}, TX {}/{} (now/max)",
            r.rx, r.rx_max, r.tx, r.tx_max
        )?,
        None => writeln!(f, "  rings: not supported by the driver")?,
    }
    match &s.pause {
        Some(p) => writeln!(
            f,
            "  pause frames: autoneg {}, rx {}, tx {}",
            on_off(p.autoneg),
            on_off(p.rx),
            on_off(p.tx)
        ),
        None => writeln!(f, "  pause frames: not supported by the driver"),
    }
}

/// Each RX queue's IRQ and the CPUs it may be served on.
fn write_irqs(f: &mut fmt::Formatter<'_>, nic: &Nic) -> fmt::Result {
    if nic.irqs.is_empty() {
        return writeln!(f, "  queue IRQs: none found");
    }
    writeln!(f, "  queue IRQs:")?;
    for q in &nic.irqs {
        let a = q
            .affinity
            .as_ref()
            .map_or("unreadable".to_owned(), |c| format_list(c));
        writeln!(
            f,
            "    RX queue {}: IRQ {} ({}) on CPUs {a}",
            q.queue, q.irq, q.name
        )?;
    }
    Ok(())
}

/// RPS or XPS masks as `queue:cpus` pairs, or `off` when no queue has one.
fn masks(v: &[QueueMask]) -> String {
    let on: Vec<String> = v
        .iter()
        .filter(|m| !m.cpus.is_empty())
        .map(|m| format!("{}:{}", m.queue, format_list(&m.cpus)))
        .collect();
    if on.is_empty() {
        "off".to_owned()
    } else {
        on.join(" ")
    }
}
