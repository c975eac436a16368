//! CPUs, physical cores, hyper-threading twins and NUMA nodes, from
//! `/sys/devices/system/{cpu,node}`.

use serde::Serialize;

use crate::cpus;
use crate::error::{Error, Result};
use crate::root::Root;

/// One logical CPU.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Cpu {
    /// Processor number.
    pub id: u32,
    /// NUMA node.
    pub node: u32,
    /// Socket (`physical_package_id`).
    pub package: u32,
    /// Core within the socket (`core_id`).
    pub core: u32,
    /// All logical CPUs of the same physical core, this one included.
    pub siblings: Vec<u32>,
}

/// One NUMA node.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Node {
    /// Node number.
    pub id: u32,
    /// Its online CPUs.
    pub cpus: Vec<u32>,
}

/// The machine's CPU topology.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Topology {
    /// Online CPUs, by number.
    pub cpus: Vec<Cpu>,
    /// NUMA nodes (one node 0 holding every CPU when the kernel shows none).
    pub nodes: Vec<Node>,
}

const CPU_DIR: &str = "sys/devices/system/cpu";
const NODE_DIR: &str = "sys/devices/system/node";

impl Topology {
    /// Reads the topology under `root`.
    pub fn read(root: &Root) -> Result<Self> {
        let online = match root.read_opt(format!("{CPU_DIR}/online")) {
            Some(s) => cpus::parse_list(&s).ok_or_else(|| Error::Parse {
                what: root.display(format!("{CPU_DIR}/online")),
                value: s,
            })?,
            None => root
                .list(CPU_DIR)
                .iter()
                .filter_map(|n| n.strip_prefix("cpu")?.parse().ok())
                .collect(),
        };
        if online.is_empty() {
            return Err(Error::Invalid(format!(
                "no CPUs found under {}",
                root.path(CPU_DIR).display()
            )));
        }
        let mut nodes: Vec<Node> = root
            .list(NODE_DIR)
            .iter()
            .filter_map(|n| n.strip_prefix("node")?.parse::<u32>().ok())
            .map(|id| {
                let cpus = root
                    .read_opt(format!("{NODE_DIR}/node{id}/cpulist"))
                    .and_then(|s| cpus::parse_list(&s))
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|c| online.contains(c))
                    .collect();
                Node { id, cpus }
            })
            .collect();
        nodes.sort_by_key(|n| n.id);
        if nodes.iter().all(|n| n.cpus.is_empty()) {
            nodes = vec![Node {
                id: 0,
                cpus: online.clone(),
            }];
        }
        let cpus = online
            .iter()
            .map(|&id| {
                let t = format!("{CPU_DIR}/cpu{id}/topology");
                let num = |f: &str, d: u32| {
                    root.read_opt(format!("{t}/{f}"))
                        .and_then(|s| s.parse::<i64>().ok())
                        .map(|v| v.max(0) as u32)
                        .unwrap_or(d)
                };
                let mut siblings = root
                    .read_opt(format!("{t}/thread_siblings_list"))
                    .and_then(|s| cpus::parse_list(&s))
                    .unwrap_or_else(|| vec![id]);
                siblings.retain(|c| online.contains(c));
                if !siblings.contains(&id) {
                    siblings.push(id);
                    siblings.sort_unstable();
                }
                Cpu {
                    id,
                    node: nodes
                        .iter()
                        .find(|n| n.cpus.contains(&id))
                        .map_or(0, |n| n.id),
                    package: num("physical_package_id", 0),
                    core: num("core_id", id),
                    siblings,
                }
            })
            .collect();
        Ok(Self { cpus, nodes })
    }

    /// The CPU with number `id`.
    pub fn cpu(&self, id: u32) -> Option<&Cpu> {
        self.cpus.iter().find(|c| c.id == id)
    }

    /// The node numbered `id`.
    pub fn node(&self, id: u32) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// Physical cores of a set of CPUs: each core's CPUs (of the set), cores ordered by
    /// their lowest CPU number.
    pub fn cores_of(&self, set: &[u32]) -> Vec<Vec<u32>> {
        // A core is named by its lowest thread (the first of every member's siblings).
        let mut cores: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
        for &id in set {
            if let Some(cpu) = self.cpu(id) {
                let first = cpu.siblings.first().copied().unwrap_or(id);
                cores.entry(first).or_default().push(id);
            }
        }
        let mut cores: Vec<Vec<u32>> = cores.into_values().collect();
        for c in &mut cores {
            c.sort_unstable();
        }
        cores.sort_by_key(|c| c[0]);
        cores
    }

    /// True if `a` and `b` are different threads of one physical core.
    pub fn twins(&self, a: u32, b: u32) -> bool {
        a != b && self.cpu(a).is_some_and(|c| c.siblings.contains(&b))
    }
}
