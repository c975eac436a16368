//! Consumers of their own attached to a running capture (the on-demand manager's attach
//! mode).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::capture::spawn::{member_pipes, StageCtx};
use crate::capture::{Capture, CaptureError, OutputConfig};
use crate::stage::member::{MemberLimits, MemberOutcome};
use crate::steer::filter::compile_filter;
use crate::steer::group::{Control, Group, GroupKind};
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
    /// Recorded packets to write before the live ones (a capture that starts in the past).
    pub lookback: Option<crate::stage::member::Lookback>,
}

/// An attached consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attached {
    /// Its group slot in the matrix.
    pub group: usize,
    /// Its member id.
    pub member: usize,
}

/// The flow table of an attached consumer: its file (named after it) and its collector.
fn flow_table(
    f: &crate::stage::flows::FlowOutput,
    ifindexes: Vec<u32>,
) -> Result<crate::stage::flows::FlowTable, CaptureError> {
    let name = f
        .file
        .as_ref()
        .and_then(|p| p.file_name())
        .map_or("flows".into(), |n| n.to_string_lossy().into_owned());
    crate::stage::flows::FlowTable::open(
        f.file.as_deref(),
        f.ipfix.as_ref(),
        &name,
        ifindexes,
        crate::stage::flows::FlowConfig::default(),
    )
    .map_err(|e| CaptureError::Output(e.to_string()))
}

impl Capture {
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
            Some(f) => Some(flow_table(f, ctx.ifindexes())?),
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
        let (mut txs, rxs) = member_pipes(ctx.transport, self.controls.len());
        if let Some(l) = &spec.limits.live {
            for t in &mut txs {
                t.count_losses_into(l.stage_full.clone());
            }
        }
        let mut txs: Vec<_> = txs.into_iter().map(Some).collect();
        let stage = StageCtx::start(
            (g, 0, m),
            spec.cpu,
            rxs,
            sink,
            flows,
            spec.limits,
            spec.lookback,
        )?;
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
