//! Adding and removing consumers of a running capture, through the steering matrix (the
//! protocol is described in [`crate::steer::group`]).
//!
//! - [`Capture::join`] and [`Capture::leave`] change the members of a configured group
//!   (`--control`'s `join G` and `leave G I`);
//! - [`Capture::attach`] adds a consumer with a filter and apps of its own, as a copy group
//!   of one member, and [`Capture::detach`] removes it and returns what it did: the
//!   on-demand manager's attach mode. No socket or ring is made; the workers copy the
//!   packets that pass its filter from their next block on.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use corecap_linux::filter;

use crate::capture::{member_pipes, Capture, CaptureError, OutputConfig, StageCtx};
use crate::stage::member::{MemberLimits, MemberOutcome};
use crate::steer::filter::Program;
use crate::steer::group::{Control, Group, GroupKind, Matrix};
use crate::steer::indirection::Indirection;

/// A consumer to attach to a running capture.
#[derive(Debug, Default)]
pub struct AttachSpec {
    /// tcpdump expression, run on the workers in userspace.
    pub filter: Option<String>,
    /// Bytes kept of each packet (at most the capture's snap length).
    pub snaplen: u32,
    /// File to write, at exactly `path` (no per-member suffix).
    pub file: Option<OutputConfig>,
    /// Flow records: JSON lines at exactly this path, and/or IPFIX export.
    pub flows: Option<crate::stage::flows::FlowOutput>,
    /// Stage CPU for its thread.
    pub cpu: Option<u32>,
    /// Start time, packet count and live counters.
    pub limits: MemberLimits,
}

/// An attached consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attached {
    /// Its group slot in the matrix.
    pub group: usize,
    /// Its member id.
    pub member: usize,
}

/// Compiles a tcpdump expression for the workers' userspace filter.
pub fn compile_filter(linktype: u16, snaplen: u32, expr: &str) -> Result<Program, CaptureError> {
    Program::new(filter::compile_offline(linktype, snaplen, expr)?)
        .map_err(|e| CaptureError::Config(e.to_string()))
}

impl Capture {
    fn wait_acks(&self, epoch: u64) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        for ((_, ack), h) in self.controls.iter().zip(&self.handles) {
            // Acquire: pairs with the worker's Release store after it applied the message.
            while ack.load(Ordering::Acquire) < epoch && !h.is_finished() {
                if Instant::now() > deadline {
                    return Err("a worker did not take the change within 5 s".into());
                }
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        Ok(())
    }

    fn steering(&self) -> Result<(Arc<arc_swap::ArcSwap<Matrix>>, StageCtx), String> {
        self.matrix
            .clone()
            .ok_or_else(|| "no groups: start with --groups".to_string())
    }

    /// Sends a message to every worker (built per worker by `msg`), all or none: a full
    /// control ring is refused before anything is sent.
    fn tell_workers(&mut self, mut msg: impl FnMut(usize) -> Control) -> Result<(), String> {
        if self.controls.iter().any(|(c, _)| c.slots() == 0) {
            return Err("a worker's control ring is full; try again".into());
        }
        for (w, (ctl, _)) in self.controls.iter_mut().enumerate() {
            // Cannot fail: checked for room above, and only this thread pushes.
            let _ = ctl.push(msg(w));
        }
        Ok(())
    }

    /// The smallest member id no stage thread uses (ids are reused, so the workers'
    /// per-member tables stay as small as the number of live members).
    fn free_member_id(&self) -> usize {
        (0..)
            .find(|m| !self.stages.iter().any(|s| s.member == *m))
            .unwrap_or(0)
    }

    /// Adds a member to group `g` while traffic flows; returns its name (`gGmI`) once
    /// every worker steers to it.
    pub fn join(&mut self, g: usize) -> Result<String, String> {
        let (shared, ctx) = self.steering()?;
        let cur = shared.load_full();
        // Attached consumers' slots come after the configured groups and are not joinable.
        if g >= self.group_kinds.len() || cur.groups[g].members.is_empty() {
            return Err(format!(
                "no group {g} (there are {})",
                self.group_kinds.len()
            ));
        }
        let m = self.free_member_id();
        let i = self.next_index[g];
        let (txs, rxs) = member_pipes(ctx.transport, self.controls.len());
        let stage = ctx.spawn(g, i, m, rxs).map_err(|e| e.to_string())?;
        self.epoch += 1;
        let epoch = self.epoch;
        let mut txs = txs.into_iter().map(Some).collect::<Vec<_>>();
        self.tell_workers(|w| Control::Join {
            member: m,
            tx: txs[w].take().expect("one pipe end per worker"),
            epoch,
        })?;
        self.stages.push(stage);
        self.next_index[g] += 1;
        let mut next = (*cur).clone();
        let grp = &mut next.groups[g];
        grp.members.push(m);
        if grp.kind == GroupKind::Balance {
            grp.table.add_member();
        }
        shared.store(Arc::new(next));
        self.wait_acks(epoch)?;
        Ok(format!("g{g}m{i}"))
    }

    /// Removes member `i` (its index in the group's current member list) from group `g`.
    pub fn leave(&mut self, g: usize, i: usize) -> Result<String, String> {
        let (shared, _) = self.steering()?;
        let cur = shared.load_full();
        let grp = cur.groups.get(g).ok_or_else(|| format!("no group {g}"))?;
        if i >= grp.members.len() {
            return Err(format!("group {g} has {} members", grp.members.len()));
        }
        if grp.members.len() == 1 {
            return Err(format!("group {g} keeps at least one member"));
        }
        let m = grp.members[i];
        let mut next = (*cur).clone();
        let grp = &mut next.groups[g];
        grp.members.remove(i);
        if grp.kind == GroupKind::Balance {
            grp.table.remove_member(i as u16);
        }
        self.unpublish(&shared, next, m)?;
        self.wait_acks(self.epoch)?;
        let name = self
            .stages
            .iter()
            .find(|s| s.member == m)
            .map_or(format!("member {m}"), |s| {
                format!("g{}m{}", s.group, s.index)
            });
        Ok(name)
    }

    /// Publishes `next` (which no longer names member `m`), then tells the workers to let
    /// `m` go. Once they have, `m`'s stage thread ends. Its id may be given to a new member
    /// at once: each worker takes the `Leave` before any later `Join` (one ring, in order).
    fn unpublish(
        &mut self,
        shared: &arc_swap::ArcSwap<Matrix>,
        next: Matrix,
        m: usize,
    ) -> Result<(), String> {
        shared.store(Arc::new(next));
        self.epoch += 1;
        let epoch = self.epoch;
        self.tell_workers(|_| Control::Leave { member: m, epoch })
    }

    /// Attaches a consumer with its own filter and apps. It takes every packet that passes
    /// its filter from each worker's next block on (and, with `limits.since_ns`, none older
    /// than that). Returns without waiting for the workers.
    pub fn attach(&mut self, spec: AttachSpec) -> Result<Attached, CaptureError> {
        let (shared, ctx) = self.steering().map_err(CaptureError::Config)?;
        let linktype = ctx.ifaces.first().map_or(1, |i| i.linktype);
        let snaplen = if spec.snaplen == 0 {
            ctx.snaplen
        } else {
            spec.snaplen.min(ctx.snaplen)
        };
        let filter = match &spec.filter {
            Some(e) => Some(compile_filter(linktype, snaplen, e)?),
            None => None,
        };
        let sink = match &spec.file {
            Some(o) => Some(o.sink(o.path.clone(), ctx.ifaces.clone(), snaplen)?),
            None => None,
        };
        let flows = match &spec.flows {
            Some(f) => Some(
                crate::stage::flows::FlowTable::open(
                    f.file.as_deref(),
                    f.ipfix.as_ref(),
                    &f.file
                        .as_ref()
                        .and_then(|p| p.file_name())
                        .map_or("flows".into(), |n| n.to_string_lossy().into_owned()),
                    ctx.ifindexes(),
                    crate::stage::flows::FlowConfig::default(),
                )
                .map_err(|e| CaptureError::Output(e.to_string()))?,
            ),
            None => None,
        };
        let cur = shared.load_full();
        // A slot left empty by a detached consumer is reused.
        let g = cur
            .groups
            .iter()
            .position(|g| g.members.is_empty())
            .unwrap_or(cur.groups.len());
        let m = self.free_member_id();
        let (txs, rxs) = member_pipes(ctx.transport, self.controls.len());
        let lost = spec.limits.live.as_ref().map(|l| l.stage_full.clone());
        let mut txs: Vec<_> = txs
            .into_iter()
            .map(|mut t| {
                if let Some(l) = &lost {
                    t.count_losses_into(l.clone());
                }
                Some(t)
            })
            .collect();
        let stage = StageCtx::start(g, 0, m, spec.cpu, rxs, sink, flows, spec.limits)?;
        self.epoch += 1;
        let epoch = self.epoch;
        if let Err(e) = self.tell_workers(|w| Control::Join {
            member: m,
            tx: txs[w].take().expect("one pipe end per worker"),
            epoch,
        }) {
            // No worker has the pipe: the member sees its pipes closed and ends.
            drop(txs);
            let _ = stage.handle.join();
            return Err(CaptureError::System(e));
        }
        self.stages.push(stage);
        let mut next = (*cur).clone();
        let group = Group {
            kind: GroupKind::Copy,
            table: Indirection::new(1),
            filter,
            snaplen,
            members: vec![m],
        };
        match next.groups.get_mut(g) {
            Some(slot) => *slot = group,
            None => next.groups.push(group),
        }
        shared.store(Arc::new(next));
        Ok(Attached {
            group: g,
            member: m,
        })
    }

    /// Whether every worker has taken the changes made so far (an attached consumer gets
    /// packets from then on).
    pub fn steering_current(&self) -> bool {
        let epoch = self.epoch;
        self.controls
            .iter()
            .zip(&self.handles)
            // Acquire: pairs with the worker's Release store of its applied epoch.
            .all(|((_, ack), h)| ack.load(Ordering::Acquire) >= epoch || h.is_finished())
    }

    /// Detaches a consumer: no worker steers to it after its next block. Returns at once;
    /// [`Detached::wait`] gives its outcome once its files are closed.
    pub fn detach(&mut self, a: Attached) -> Result<Detached, CaptureError> {
        let (shared, _) = self.steering().map_err(CaptureError::Config)?;
        let cur = shared.load_full();
        if cur.groups.get(a.group).map(|g| g.members.as_slice()) != Some(&[a.member][..]) {
            return Err(CaptureError::Config(format!(
                "no attached consumer {}/{}",
                a.group, a.member
            )));
        }
        let mut next = (*cur).clone();
        next.groups[a.group] = Group {
            kind: GroupKind::Copy,
            table: Indirection::new(1),
            filter: None,
            snaplen: 0,
            members: vec![],
        };
        self.unpublish(&shared, next, a.member)
            .map_err(CaptureError::Config)?;
        let Some(pos) = self.stages.iter().position(|s| s.member == a.member) else {
            return Err(CaptureError::Config(format!(
                "member {} has no stage thread",
                a.member
            )));
        };
        let stage = self.stages.swap_remove(pos);
        Ok(Detached {
            handle: stage.handle,
        })
    }
}

/// A detached consumer whose stage thread is finishing.
#[derive(Debug)]
pub struct Detached {
    handle: std::thread::JoinHandle<MemberOutcome>,
}

impl Detached {
    /// Waits until every worker has let the consumer go (at its next block, or within
    /// 100 ms when idle) and it has drained its pipes and closed its files.
    pub fn wait(self) -> MemberOutcome {
        self.handle.join().unwrap_or_else(|_| MemberOutcome {
            error: Some("stage thread panicked".into()),
            ..Default::default()
        })
    }
}
