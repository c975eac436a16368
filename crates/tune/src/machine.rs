//! Everything tune reads about the machine for one interface.

use serde::Serialize;

use crate::error::Result;
use crate::nic::Nic;
use crate::root::Root;
use crate::topology::Topology;

/// The topology, the interface and the IRQ balancer.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Machine {
    /// CPUs, cores and nodes.
    pub topology: Topology,
    /// The interface.
    pub nic: Nic,
    /// PID of a running irqbalance, if any.
    pub irqbalance: Option<u32>,
}

impl Machine {
    /// Reads the machine under `root` for interface `iface`.
    pub fn read(root: &Root, iface: &str) -> Result<Self> {
        let topology = Topology::read(root)?;
        let nic = Nic::read(root, iface)?;
        Ok(Self {
            topology,
            nic,
            irqbalance: irqbalance_pid(root),
        })
    }
}

/// The PID of a process named `irqbalance` in `proc/`.
fn irqbalance_pid(root: &Root) -> Option<u32> {
    for name in root.list("proc") {
        let Ok(pid) = name.parse::<u32>() else {
            continue;
        };
        let rel = format!("proc/{pid}/comm");
        if root
            .read_quiet(&rel)
            .is_some_and(|c| c.trim() == "irqbalance")
        {
            root.note(&rel);
            return Some(pid);
        }
    }
    None
}
