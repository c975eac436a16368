//! The end of a capture: stop, join the workers, the stage threads and the merge writer,
//! in that order, and add up what they did.

use std::path::PathBuf;
use std::thread::JoinHandle;

use super::{Capture, GroupSummary, MemberSummary, Summary};
use crate::capture::spawn::Stage;
use crate::sink::file::FileSink;
use crate::sink::merge::Unwritten;
use crate::stage::member::MemberOutcome;
use crate::stats::ledger::Snapshot;
use crate::steer::group::{GroupKind, SteerCounts};
use crate::worker::Outcome;

/// What the threads of a capture report, gathered as they are joined.
#[derive(Default)]
struct Tally {
    total: Snapshot,
    files: Vec<PathBuf>,
    errors: Vec<String>,
    notes: Vec<String>,
}

impl Capture {
    /// Stops, waits for the workers and the merge writer, and returns the summary.
    pub fn finish(self) -> Summary {
        self.stop();
        // No new frame is redirected to a socket once the program is gone.
        for x in &self.xdp {
            x.detach();
        }
        let mut t = Tally::default();
        let mut workers = Vec::new();
        let mut steer_counts = Vec::new();
        for (h, info) in self.handles.into_iter().zip(self.workers) {
            let o = h.join().unwrap_or_else(|_| Outcome {
                steer: None,
                snapshot: Snapshot::default(),
                files: vec![],
                error: Some(format!("worker {} panicked", info.id)),
                notes: vec![],
            });
            t.total += o.snapshot;
            t.notes.extend(o.notes);
            t.files.extend(o.files);
            steer_counts.push(o.steer);
            if let Some(e) = o.error {
                if !t.errors.contains(&e) {
                    t.errors.push(e);
                }
            }
            workers.push((info, o.snapshot));
        }
        let groups = if self.stages.is_empty() {
            Vec::new()
        } else {
            let mut counts = SteerCounts::default();
            for sc in steer_counts.iter().flatten() {
                add_into(&mut counts.filtered, &sc.filtered);
                add_into(&mut counts.steered, &sc.steered);
                add_into(&mut counts.stage_full, &sc.stage_full);
            }
            t.join_stages(self.stages, &self.group_kinds, &counts)
        };
        if let Some(m) = self.merge {
            t.join_merge(m);
        }
        // Every file is closed and named: the output's name is free for the next writer.
        drop(self.claim);
        // Sinks that share a retention delete each other's oldest files: the summary names
        // the files still there, whichever sink wrote them.
        t.files.retain(|f| f.exists());
        t.notes.dedup();
        Summary {
            total: t.total,
            workers,
            seconds: self.started.elapsed().as_secs_f64(),
            files: t.files,
            errors: t.errors,
            groups,
            notes: t.notes,
            retention: self.retention.map(|r| r.deleted()),
            recovered: self.recovered,
        }
    }
}

impl Tally {
    /// Joins the stage threads; returns each group with its members' outcomes and the
    /// workers' counts for them.
    fn join_stages(
        &mut self,
        stages: Vec<Stage>,
        kinds: &[GroupKind],
        counts: &SteerCounts,
    ) -> Vec<GroupSummary> {
        let mut groups: Vec<GroupSummary> = kinds
            .iter()
            .enumerate()
            .map(|(gi, kind)| GroupSummary {
                id: gi,
                kind: *kind,
                filtered: counts.filtered.get(gi).copied().unwrap_or(0),
                members: vec![],
            })
            .collect();
        for Stage {
            group: g,
            index: i,
            member: m,
            cpu,
            handle: h,
            ..
        } in stages
        {
            let outcome = h.join().unwrap_or_else(|_| MemberOutcome {
                error: Some("stage thread panicked".into()),
                ..Default::default()
            });
            if let Some(e) = &outcome.error {
                self.errors.push(e.clone());
            }
            self.files.extend(outcome.files.iter().cloned());
            self.notes.extend(outcome.notes.iter().cloned());
            if let Some(gs) = groups.get_mut(g) {
                gs.members.push(MemberSummary {
                    id: i,
                    cpu,
                    steered: counts.steered.get(m).copied().unwrap_or(0),
                    stage_full: counts.stage_full.get(m).copied().unwrap_or(0),
                    outcome,
                });
            }
        }
        groups
    }

    /// Joins the merge writer and closes its file: what it could not write counts as
    /// disk drops, no longer as packets.
    fn join_merge(&mut self, m: JoinHandle<(FileSink, Unwritten)>) {
        let total = &mut self.total;
        match m.join() {
            Ok((sink, lost)) => {
                total.disk_drops += lost.disk;
                total.stop_drops += lost.stop;
                total.packets -= (lost.disk + lost.stop).min(total.packets);
                let stats: Vec<(u64, u64)> = vec![(total.kernel_packets, total.kernel_drops)];
                let done = sink.finish(&stats);
                self.files.extend(done.files);
                total.disk_drops += done.lost;
                total.packets -= done.lost.min(total.packets);
                if let Some(e) = done.error {
                    self.errors.push(e);
                }
                self.notes.extend(done.notes);
            }
            Err(_) => self.errors.push("the merge writer panicked".into()),
        }
    }
}

fn add_into(acc: &mut Vec<u64>, v: &[u64]) {
    if acc.len() < v.len() {
        acc.resize(v.len(), 0);
    }
    for (a, x) in acc.iter_mut().zip(v) {
        *a += x;
    }
}
