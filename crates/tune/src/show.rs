//! `tune show`: the machine as text.

use std::fmt;

use crate::cpus::format_list;
use crate::machine::Machine;
use crate::settings::on_off;

/// Shows a [`Machine`] as the `tune show` report.
#[derive(Debug)]
pub struct Report<'a>(pub &'a Machine);

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        let t = &m.topology;
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
        let nic = &m.nic;
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
        let s = &nic.settings;
        writeln!(f, "  driver: {}", s.driver.as_deref().unwrap_or("unknown"))?;
        writeln!(
            f,
            "  queues in sysfs: {} RX, {} TX",
            nic.rx_queues, nic.tx_queues
        )?;
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
            )?,
            None => writeln!(f, "  pause frames: not supported by the driver")?,
        }
        if nic.irqs.is_empty() {
            writeln!(f, "  queue IRQs: none found")?;
        } else {
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
        }
        let masks = |v: &[crate::nic::QueueMask]| {
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
        };
        writeln!(f, "  RPS: {}", masks(&nic.rps))?;
        writeln!(f, "  XPS: {}", masks(&nic.xps))?;
        match m.irqbalance {
            Some(pid) => writeln!(f, "irqbalance: running (pid {pid})")?,
            None => writeln!(f, "irqbalance: not running")?,
        }
        Ok(())
    }
}
