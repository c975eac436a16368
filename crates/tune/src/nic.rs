//! One network interface as sysfs and procfs show it: PCI device, NUMA node, queues,
//! the IRQ of each queue and where it is served, RPS/XPS masks.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::cpus;
use crate::error::{Error, Result};
use crate::root::Root;
use crate::settings::Settings;

/// The IRQ that serves one receive queue.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct QueueIrq {
    /// Receive queue.
    pub queue: u32,
    /// IRQ number.
    pub irq: u32,
    /// Action name in /proc/interrupts (`eth0-TxRx-3`).
    pub name: String,
    /// CPUs allowed to serve it (`/proc/irq/N/smp_affinity_list`), if readable.
    pub affinity: Option<Vec<u32>>,
}

/// One queue's steering mask (RPS for RX queues, XPS for TX queues).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct QueueMask {
    /// Queue number.
    pub queue: u32,
    /// CPUs in the mask (empty when off).
    pub cpus: Vec<u32>,
}

/// A network interface.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Nic {
    /// Interface name.
    pub name: String,
    /// PCI address (`0000:03:00.0`), `None` for virtual devices.
    pub pci: Option<String>,
    /// NUMA node of the device (`None` for virtual devices or -1).
    pub numa_node: Option<u32>,
    /// CPUs local to the device (`local_cpulist`).
    pub local_cpus: Option<Vec<u32>>,
    /// RX queues in /sys/class/net/IF/queues.
    pub rx_queues: u32,
    /// TX queues in /sys/class/net/IF/queues.
    pub tx_queues: u32,
    /// RPS masks of the RX queues.
    pub rps: Vec<QueueMask>,
    /// XPS masks of the TX queues.
    pub xps: Vec<QueueMask>,
    /// The IRQ of each RX queue that has one, by queue.
    pub irqs: Vec<QueueIrq>,
    /// ethtool settings.
    pub settings: Settings,
}

/// An interface's queues in sysfs (`queues/rx-N`, `queues/tx-N`): how many of each, and
/// their RPS and XPS masks in queue order.
struct Queues {
    rx: u32,
    tx: u32,
    rps: Vec<QueueMask>,
    xps: Vec<QueueMask>,
}

impl Queues {
    fn read(root: &Root, qdir: &std::path::Path) -> Self {
        let mut q = Queues {
            rx: 0,
            tx: 0,
            rps: Vec::new(),
            xps: Vec::new(),
        };
        let mask = |name: &str, file: &str| {
            root.read_opt(qdir.join(name).join(file))
                .map(|m| cpus::parse_mask(&m).unwrap_or_default())
        };
        for name in root.list(qdir) {
            if let Some(n) = name.strip_prefix("rx-").and_then(|n| n.parse().ok()) {
                q.rx += 1;
                if let Some(cpus) = mask(&name, "rps_cpus") {
                    q.rps.push(QueueMask { queue: n, cpus });
                }
            } else if let Some(n) = name.strip_prefix("tx-").and_then(|n| n.parse().ok()) {
                q.tx += 1;
                if let Some(cpus) = mask(&name, "xps_cpus") {
                    q.xps.push(QueueMask { queue: n, cpus });
                }
            }
        }
        q.rps.sort_by_key(|m| m.queue);
        q.xps.sort_by_key(|m| m.queue);
        q
    }
}

impl Nic {
    /// Reads interface `iface` under `root`.
    pub fn read(root: &Root, iface: &str) -> Result<Self> {
        if iface.is_empty() || iface.contains('/') || iface.starts_with('.') {
            return Err(Error::Invalid(format!("bad interface name {iface:?}")));
        }
        let netdev = root
            .resolve(format!("sys/class/net/{iface}"))
            .ok_or_else(|| Error::NoInterface {
                iface: iface.to_owned(),
                dir: root
                    .dir()
                    .display()
                    .to_string()
                    .trim_end_matches('/')
                    .to_owned(),
            })?;
        let pci_dir = root
            .resolve(netdev.join("device"))
            .and_then(|d| find_pci(root, &d));
        let pci = pci_dir
            .as_ref()
            .and_then(|d| d.file_name())
            .map(|n| n.to_string_lossy().into_owned());
        let numa_node = pci_dir
            .as_ref()
            .and_then(|d| root.read_opt(d.join("numa_node")))
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|&n| n >= 0)
            .map(|n| n as u32);
        let local_cpus = pci_dir
            .as_ref()
            .and_then(|d| root.read_opt(d.join("local_cpulist")))
            .and_then(|s| cpus::parse_list(&s));
        let msi: Vec<u32> = pci_dir
            .as_ref()
            .map(|d| {
                root.list(d.join("msi_irqs"))
                    .iter()
                    .filter_map(|n| n.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        for irq in &msi {
            // Recorded so a snapshot keeps the directory.
            let _ = pci_dir
                .as_ref()
                .map(|d| root.read(d.join(format!("msi_irqs/{irq}"))));
        }
        let q = Queues::read(root, &netdev.join("queues"));
        let irqs = queue_irqs(root, iface, &msi)?;
        let settings = Settings::read(root, iface)?;
        Ok(Self {
            name: iface.to_owned(),
            pci,
            numa_node,
            local_cpus,
            rx_queues: q.rx,
            tx_queues: q.tx,
            rps: q.rps,
            xps: q.xps,
            irqs,
            settings,
        })
    }

    /// Receive queues in use: ethtool's count if known, else the queue IRQs, else sysfs.
    pub fn active_rx_queues(&self) -> u32 {
        if let Some(c) = &self.settings.channels {
            if c.rx_queues() > 0 {
                return c.rx_queues();
            }
        }
        if !self.irqs.is_empty() {
            return self.irqs.len() as u32;
        }
        self.rx_queues.max(1)
    }

    /// True for a device with no bus behind it (veth, bridge, loopback).
    pub fn is_virtual(&self) -> bool {
        self.pci.is_none()
    }
}

/// Walks up from the device directory to the PCI function (the directory with
/// `numa_node`): a virtio NIC's `device` is `…/0000:00:03.0/virtio2`.
fn find_pci(root: &Root, dev: &Path) -> Option<PathBuf> {
    let mut d = dev.to_owned();
    for _ in 0..3 {
        if root.exists(d.join("numa_node")) {
            return Some(d);
        }
        if !d.pop() || d.as_os_str().is_empty() {
            return None;
        }
    }
    None
}

/// The RX-queue IRQs of `iface` from /proc/interrupts: the device's MSI vectors (or,
/// without them, the lines naming the interface) whose action ends in a queue number.
/// Vectors for TX only, configuration or link events are left out.
fn queue_irqs(root: &Root, iface: &str, msi: &[u32]) -> Result<Vec<QueueIrq>> {
    let Some(text) = root.read_opt("proc/interrupts") else {
        return Ok(Vec::new());
    };
    let mut out: Vec<QueueIrq> = Vec::new();
    for line in text.lines() {
        let Some((num, rest)) = line.trim_start().split_once(':') else {
            continue;
        };
        let Ok(irq) = num.trim().parse::<u32>() else {
            continue;
        };
        let Some(name) = rest.split_whitespace().last() else {
            continue;
        };
        let ours = if msi.is_empty() {
            name.contains(iface)
        } else {
            msi.contains(&irq)
        };
        // ixgbe names its link vector after the interface alone.
        if !ours || name == iface {
            continue;
        }
        let Some(queue) = rx_queue_of(name) else {
            continue;
        };
        if out.iter().any(|q| q.queue == queue) {
            continue;
        }
        let affinity = root
            .read_opt(format!("proc/irq/{irq}/smp_affinity_list"))
            .and_then(|s| cpus::parse_list(&s));
        out.push(QueueIrq {
            queue,
            irq,
            name: name.to_owned(),
            affinity,
        });
    }
    out.sort_by_key(|q| q.queue);
    Ok(out)
}

/// The RX queue an IRQ action name serves: `eth0-TxRx-3`, `eth0-rx-3`, `virtio2-input.3`,
/// `mlx5_comp3@pci:0000:03:00.0`, `i40e-eth0-TxRx-3` → 3; `eth0-tx-0`, `virtio2-config`,
/// `i40e-0000:03:00.0:misc` → none.
pub fn rx_queue_of(name: &str) -> Option<u32> {
    let base = name.split('@').next().unwrap_or(name);
    let lower = base.to_ascii_lowercase();
    let tx_only = (lower.contains("-tx") || lower.contains("output") || lower.contains("_tx"))
        && !lower.contains("txrx")
        && !lower.contains("rxtx");
    if tx_only
        || ["config", "misc", "async", "lsc", "event", "ctrl", "fdir"]
            .iter()
            .any(|w| lower.contains(w))
    {
        return None;
    }
    let digits: String = base
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    if digits.is_empty() || digits.len() == base.len() {
        return None;
    }
    let before = base[..base.len() - digits.len()].chars().last()?;
    if !(before == '-' || before == '.' || before == '_' || before.is_ascii_alphabetic()) {
        return None;
    }
    digits.chars().rev().collect::<String>().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::rx_queue_of;

    #[test]
    fn test_queue_names() {
        assert_eq!(rx_queue_of("eth0-TxRx-3"), Some(3));
        assert_eq!(rx_queue_of("i40e-eth2-TxRx-12"), Some(12));
        assert_eq!(rx_queue_of("eth0-rx-0"), Some(0));
        assert_eq!(rx_queue_of("virtio2-input.1"), Some(1));
        assert_eq!(rx_queue_of("mlx5_comp3@pci:0000:03:00.0"), Some(3));
        assert_eq!(rx_queue_of("eth0-tx-0"), None);
        assert_eq!(rx_queue_of("virtio2-output.0"), None);
        assert_eq!(rx_queue_of("virtio2-config"), None);
        assert_eq!(rx_queue_of("i40e-0000:03:00.0:misc"), None);
    }
}
