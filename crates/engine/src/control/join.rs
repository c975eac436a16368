//! A configured group's members, changed while traffic flows.

use std::sync::Arc;

use crate::capture::spawn::counted_member_pipes;
use crate::capture::Capture;
use crate::steer::group::{Control, GroupKind};

impl Capture {
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
        let (txs, rxs, live) = counted_member_pipes(ctx.transport, self.controls.len());
        let stage = ctx
            .spawn(&ctx.member(g, i, m), rxs, live)
            .map_err(|e| e.to_string())?;
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
}
