//! Which core runs what: base capture workers, spawned workers, stage threads, and the
//! cores that serve an interface's interrupts. Spawn mode takes a free core: one that
//! runs no capture worker and serves none of the interface's IRQs.

use std::collections::BTreeMap;

/// Roles of each CPU the daemon may use.
#[derive(Debug, Default)]
pub struct Cores {
    /// CPUs the daemon may use.
    pub allowed: Vec<u32>,
    /// Per interface: CPUs its queue IRQs are pinned to (empty when none are known).
    irqs: BTreeMap<String, Vec<u32>>,
}

/// A CPU's line in `GET /cores`.
#[derive(Debug, serde::Serialize)]
pub struct CoreView {
    /// CPU number.
    pub cpu: u32,
    /// What runs there (`base cap0 worker 0`, `c3 worker`, `c2 stage`).
    pub roles: Vec<String>,
    /// Interfaces whose queue IRQs this CPU serves.
    pub irqs: Vec<String>,
}

impl Cores {
    /// The CPUs this process may run on.
    pub fn new() -> Self {
        Self {
            allowed: corecap_linux::affinity::allowed_cpus(),
            irqs: BTreeMap::new(),
        }
    }

    /// CPUs serving the queue IRQs of `iface` (read once, from sysfs and /proc).
    pub fn irq_cpus(&mut self, iface: &str) -> &[u32] {
        self.irqs.entry(iface.to_owned()).or_insert_with(|| {
            let root = corecap_tune::Root::live();
            let mut v: Vec<u32> = corecap_tune::Nic::read(&root, iface)
                .map(|n| {
                    n.irqs
                        .iter()
                        .filter_map(|q| q.affinity.clone())
                        // An IRQ allowed on every CPU says nothing about where it runs.
                        .filter(|a| a.len() < corecap_linux::affinity::online_cpus().len())
                        .flatten()
                        .collect()
                })
                .unwrap_or_default();
            v.sort_unstable();
            v.dedup();
            v
        })
    }

    /// A free CPU for a spawned worker on `iface`, given the CPUs workers run on now.
    /// With `share`, the least used CPU when none is free (and a note saying so).
    pub fn pick(
        &mut self,
        iface: &str,
        workers: &[u32],
        share: bool,
    ) -> Result<(u32, Option<String>), String> {
        let irq = self.irq_cpus(iface).to_vec();
        let allowed = self.allowed.clone();
        // From the last CPU down, as capture workers are placed (interrupts usually land low).
        if let Some(c) = allowed
            .iter()
            .rev()
            .find(|c| !workers.contains(c) && !irq.contains(c))
        {
            return Ok((*c, None));
        }
        if !share {
            return Err(format!(
                "no free core for a spawned capture: CPUs {allowed:?} run capture workers{} \
                 (stop a capture, give \"cores\", use attach mode, or start serve with --share-cores)",
                if irq.is_empty() {
                    String::new()
                } else {
                    format!(" or serve {iface}'s IRQs ({irq:?})")
                }
            ));
        }
        let load =
            |c: &u32| workers.iter().filter(|w| *w == c).count() + usize::from(irq.contains(c));
        let c = *allowed
            .iter()
            .rev()
            .min_by_key(|c| load(c))
            .ok_or("no CPU is allowed")?;
        Ok((
            c,
            Some(format!(
                "no free core: shares CPU {c} with {} other worker(s)",
                load(&c)
            )),
        ))
    }

    /// The `GET /cores` view, given `(cpu, role)` pairs.
    pub fn view(&self, roles: &[(u32, String)]) -> Vec<CoreView> {
        self.allowed
            .iter()
            .map(|&cpu| CoreView {
                cpu,
                roles: roles
                    .iter()
                    .filter(|(c, _)| *c == cpu)
                    .map(|(_, r)| r.clone())
                    .collect(),
                irqs: self
                    .irqs
                    .iter()
                    .filter(|(_, v)| v.contains(&cpu))
                    .map(|(k, _)| k.clone())
                    .collect(),
            })
            .collect()
    }
}
