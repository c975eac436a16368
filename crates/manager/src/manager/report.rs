//! What the daemon tells of itself: HTTP response counters, statistics, cores and the
//! Prometheus metrics.

use std::collections::BTreeMap;

use super::end::{base_counters, refresh};
use super::Manager;
use crate::api::{CaptureView, Mode, State};
use crate::stats::{BaseCounters, Deleted, Stats};

impl Manager {
    /// Counts a response by status (for the metrics).
    pub fn count_response(&self, status: u16) {
        *self.lock().responses.entry(status).or_default() += 1;
    }

    /// Counts a TLS connection that ended in its handshake, before any request.
    pub fn count_refused_handshake(&self) {
        self.lock().handshakes_refused += 1;
    }

    /// What the base captures and their recording did so far, and the captures running.
    /// The counters are summed outside the manager's lock (the recording's reach is read
    /// from its folder's catalog).
    pub fn stats(&self) -> Stats {
        let (counters, running) = {
            let g = self.lock();
            let running = g
                .entries
                .iter()
                .filter(|e| e.view.state == State::Running && !e.view.earlier_run)
                .count() as u64;
            (
                g.bases.iter().map(base_counters).collect::<Vec<_>>(),
                running,
            )
        };
        Stats {
            captures_running: running,
            ..self.read_stats(&counters)
        }
    }

    pub(super) fn read_stats(&self, counters: &[BaseCounters]) -> Stats {
        Stats {
            bases: counters
                .iter()
                .map(|c| c.read(self.cfg.record.as_deref()))
                .collect(),
            captures_running: 0,
            retention: self.cfg.retention.as_ref().map(|r| {
                let (files, bytes) = r.deleted();
                Deleted { files, bytes }
            }),
        }
    }

    /// CPUs capture uses now: the base captures' workers and the cores of running
    /// captures (spawned workers, attached consumers' stage threads).
    pub fn capture_cpus(&self) -> Vec<u32> {
        let g = self.lock();
        let mut cpus: Vec<u32> = g
            .bases
            .iter()
            .flat_map(|b| b.cap.workers.iter().filter_map(|w| w.cpu))
            .collect();
        for e in &g.entries {
            if e.view.state == State::Running {
                cpus.extend(&e.view.cores);
            }
        }
        cpus.sort_unstable();
        cpus.dedup();
        cpus
    }

    /// `GET /cores`.
    pub fn cores(&self) -> serde_json::Value {
        let mut g = self.lock();
        let mut roles: Vec<(u32, String)> = Vec::new();
        let ifaces: Vec<String> = g.bases.iter().map(|b| b.iface.clone()).collect();
        for b in &g.bases {
            for w in &b.cap.workers {
                if let Some(c) = w.cpu {
                    roles.push((c, format!("base {} worker {}", w.input, w.id)));
                }
            }
        }
        for e in &g.entries {
            if e.view.state != State::Running {
                continue;
            }
            let what = match e.view.mode {
                Mode::Attach => "stage (attach)",
                Mode::Spawn => "worker (spawn)",
            };
            for c in &e.view.cores {
                roles.push((*c, format!("{} {what}", e.view.id)));
            }
        }
        for i in &ifaces {
            g.cores.irq_cpus(i);
        }
        serde_json::to_value(g.cores.view(&roles)).unwrap_or_default()
    }

    /// `GET /metrics`, in Prometheus text format.
    pub fn metrics(&self) -> String {
        let bases = self.stats().bases;
        let mut g = self.lock();
        for e in g.entries.iter_mut() {
            refresh(e);
        }
        // Counters are this run's: the earlier run's captures are only counted by state.
        let views: Vec<CaptureView> = g
            .entries
            .iter()
            .filter(|e| !e.view.earlier_run)
            .map(|e| e.view.clone())
            .collect();
        let mut earlier: BTreeMap<&'static str, u64> = BTreeMap::new();
        for e in g.entries.iter().filter(|e| e.view.earlier_run) {
            *earlier.entry(e.view.state.name()).or_default() += 1;
        }
        let spares: Vec<(String, usize)> =
            g.spares.iter().map(|(i, v)| (i.clone(), v.len())).collect();
        crate::metrics::render(&crate::metrics::Input {
            captures: &views,
            bases: &bases,
            responses: &g.responses,
            handshakes_refused: g.handshakes_refused,
            lag: &g.lag,
            spool_bytes: g.spool_bytes,
            quota: self.cfg.spool.quota,
            retention: self.cfg.retention.as_ref().map(|r| {
                let (f, b) = r.deleted();
                (r.budget(), f, b)
            }),
            spares: &spares,
            earlier: &earlier,
            recovered_files: self.cfg.recovered.len() as u64,
        })
    }
}
