//! Consumer groups (PFQ): a copy group gives every packet to each member; a balanced
//! group gives each packet to one member, chosen by the symmetric flow hash through an
//! indirection table. A group may have its own filter and snap length; a packet can go to
//! several groups. [`Steer`] runs on a capture worker: it sends each packet to the members
//! that take it, through per-member pipes to the stage threads.
//!
//! # Changing the matrix while traffic flows
//!
//! The groups form a [`Matrix`], published through an `ArcSwap` (RCU style): a worker
//! loads it once per block, with no lock, and steers the whole block with that version.
//! Members join and leave through a control ring to each worker. A worker refreshes
//! before each block: it loads the matrix, applies the control messages, and loads the
//! matrix again if there were any.
//!
//! - join: the controller pushes the producer end of a new pipe to every worker, then
//!   publishes a matrix that names the new member. A worker that loads that matrix pops
//!   its pipe in the same refresh: the push happened before the publication (program
//!   order, then the ArcSwap store's Release and the load's Acquire), so the pop that
//!   follows the load sees it. No worker steers to a pipe it does not have, and the new
//!   member gets the very next block of every worker: an on-demand capture starts within
//!   one block of its request. The controller then waits until every worker has
//!   acknowledged (each stores the epoch it has applied, Release; the controller loads
//!   it, Acquire) before it reports the member as running;
//! - leave: the controller first publishes a matrix without the member, then tells the
//!   workers. A worker that pops the message loads the matrix again, which is then the
//!   new one (publication before push), so it drops its end only after every block steered
//!   with the old matrix was flushed, and never steers to it again. The member drains its
//!   pipes and ends.
//!
//! The other members never see a change but in the indirection table, and lose nothing.
//! A group whose last member left stays in the matrix with no members (its slot is
//! reused by the next group added), so group indices, and their counters, never move.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::packet::Packet;
use crate::stage::pipe::PipeTx;
use crate::steer::filter::{Meta, Program};
use crate::steer::indirection::Indirection;

/// Copy or balance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupKind {
    /// Every member gets every packet.
    Copy,
    /// One member per packet, by flow.
    Balance,
}

/// A group as configured.
#[derive(Clone, Debug)]
pub struct GroupSpec {
    /// Copy or balance.
    pub kind: GroupKind,
    /// Number of members.
    pub members: u16,
    /// Userspace filter (tcpdump syntax).
    pub filter: Option<String>,
    /// Bytes kept per packet for this group.
    pub snaplen: Option<u32>,
}

impl GroupSpec {
    /// Parses `balance:3,copy:1` (zbalance_ipc's `-n 3,1` shape).
    pub fn parse_list(s: &str) -> Result<Vec<GroupSpec>, String> {
        s.split(',')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, n) = p.split_once(':').unwrap_or((p, "1"));
                let kind = match k {
                    "balance" => GroupKind::Balance,
                    "copy" => GroupKind::Copy,
                    _ => return Err(format!("unknown group kind '{k}' (balance or copy)")),
                };
                let members: u16 = n
                    .parse()
                    .map_err(|_| format!("bad member count in '{p}'"))?;
                if members == 0 || members > 256 {
                    return Err(format!("a group has 1 to 256 members, not {members}"));
                }
                Ok(GroupSpec {
                    kind,
                    members,
                    filter: None,
                    snaplen: None,
                })
            })
            .collect()
    }
}

/// A group on the data path.
#[derive(Clone, Debug)]
pub struct Group {
    /// Copy or balance.
    pub kind: GroupKind,
    /// Bucket owners, for a balanced group.
    pub table: Indirection,
    /// Compiled filter.
    pub filter: Option<Program>,
    /// Snap length.
    pub snaplen: u32,
    /// Global ids of the members, in member order.
    pub members: Vec<usize>,
}

/// Every group, as published to the workers.
#[derive(Clone, Debug, Default)]
pub struct Matrix {
    /// The groups.
    pub groups: Vec<Group>,
}

/// A message from the controller to a worker.
#[derive(Debug)]
pub enum Control {
    /// Start steering to member `member` through `tx` (as soon as a matrix names it).
    Join {
        /// Global member id.
        member: usize,
        /// The worker's end of the member's pipe.
        tx: PipeTx,
        /// Controller epoch to acknowledge.
        epoch: u64,
    },
    /// The member is gone from the matrix: flush and drop its pipe.
    Leave {
        /// Global member id.
        member: usize,
        /// Controller epoch to acknowledge.
        epoch: u64,
    },
}

/// Steering counters of one worker.
#[derive(Clone, Debug, Default)]
pub struct SteerCounts {
    /// Per group: packets its filter rejected.
    pub filtered: Vec<u64>,
    /// Per member: packets handed to its pipe.
    pub steered: Vec<u64>,
    /// Per member: packets dropped because its pipe was full.
    pub stage_full: Vec<u64>,
}

/// Copies a packet into member `m`'s batch.
#[inline]
fn push(
    tx: &mut [Option<PipeTx>],
    counts: &mut SteerCounts,
    m: usize,
    p: &Packet<'_>,
    hash: u32,
    snaplen: u32,
) {
    counts.steered[m] += 1;
    match tx.get_mut(m).and_then(|t| t.as_mut()) {
        Some(t) => t.cur.push(p, hash, snaplen),
        // Not reachable by the join protocol (a matrix names a member only after every
        // worker has its pipe); counted, never silent.
        None => counts.stage_full[m] += 1,
    }
}

/// The steering stage of one capture worker.
#[derive(Debug)]
pub struct Steer {
    matrix: Arc<ArcSwap<Matrix>>,
    cur: Arc<Matrix>,
    tx: Vec<Option<PipeTx>>,
    control: rtrb::Consumer<Control>,
    ack: Arc<AtomicU64>,
    /// Counters, read when the worker ends.
    pub counts: SteerCounts,
    need_hash: bool,
}

impl Steer {
    /// Steering with the published `matrix` into one pipe per member (by global id).
    pub fn new(
        matrix: Arc<ArcSwap<Matrix>>,
        tx: Vec<PipeTx>,
        control: rtrb::Consumer<Control>,
        ack: Arc<AtomicU64>,
    ) -> Self {
        let cur = matrix.load_full();
        let n = tx.len();
        let mut s = Self {
            matrix,
            cur,
            tx: tx.into_iter().map(Some).collect(),
            control,
            ack,
            counts: SteerCounts {
                filtered: vec![],
                steered: vec![0; n],
                stage_full: vec![0; n],
            },
            need_hash: false,
        };
        s.reload();
        s
    }

    fn reload(&mut self) {
        self.cur = self.matrix.load_full();
        if let Some(m) = self
            .cur
            .groups
            .iter()
            .flat_map(|g| g.members.iter())
            .max()
            .copied()
        {
            self.grow(m);
        }
        self.need_hash = self.cur.groups.iter().any(|g| g.kind == GroupKind::Balance);
        if self.counts.filtered.len() < self.cur.groups.len() {
            self.counts.filtered.resize(self.cur.groups.len(), 0);
        }
    }

    fn grow(&mut self, m: usize) {
        if self.tx.len() <= m {
            self.tx.resize_with(m + 1, || None);
            self.counts.steered.resize(m + 1, 0);
            self.counts.stage_full.resize(m + 1, 0);
        }
    }

    /// Loads the current matrix and applies control messages (see the module comment for
    /// the order). Called before each block.
    pub fn refresh(&mut self) {
        self.reload();
        let mut epoch = None;
        while let Ok(msg) = self.control.pop() {
            match msg {
                Control::Join {
                    member,
                    tx,
                    epoch: e,
                } => {
                    self.grow(member);
                    self.tx[member] = Some(tx);
                    epoch = Some(e);
                }
                Control::Leave { member, epoch: e } => {
                    if let Some(mut t) = self.tx.get_mut(member).and_then(|t| t.take()) {
                        self.counts.stage_full[member] += t.send();
                    }
                    epoch = Some(e);
                }
            }
        }
        if let Some(e) = epoch {
            // A message may come with a matrix published after our first load.
            self.reload();
            // Release: pairs with the controller's Acquire load when it waits for acks.
            self.ack.store(e, Ordering::Release);
        }
    }

    /// Sends one packet to the members that take it.
    pub fn packet(&mut self, p: &Packet<'_>) {
        let Self {
            cur,
            tx,
            counts,
            need_hash,
            ..
        } = self;
        // One hash per packet, shared by every balanced group (and carried to the stage).
        let hash = if *need_hash { p.hash() } else { 0 };
        for (gi, g) in cur.groups.iter().enumerate() {
            if g.members.is_empty() {
                continue;
            }
            if let Some(f) = &g.filter {
                let meta = Meta {
                    vlan: p.vlan,
                    queue: p.queue.unwrap_or(0),
                    protocol: 0,
                };
                if f.run(p.data, p.wire_len, &meta) == 0 {
                    counts.filtered[gi] += 1;
                    continue;
                }
            }
            match g.kind {
                GroupKind::Copy => {
                    for &m in &g.members {
                        push(tx, counts, m, p, hash, g.snaplen);
                    }
                }
                GroupKind::Balance => {
                    let m = g.members[usize::from(g.table.member(hash)) % g.members.len().max(1)];
                    push(tx, counts, m, p, hash, g.snaplen);
                }
            }
        }
    }

    /// Hands every member its batch (once per ring block), then the worker's watermark:
    /// every packet up to that time it will steer is sent ([`PipeTx::publish`]).
    pub fn flush(&mut self, watermark: u64) {
        for (m, t) in self.tx.iter_mut().enumerate() {
            if let Some(t) = t {
                self.counts.stage_full[m] += t.send();
                t.publish(watermark);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_parse_groups() {
        let g = GroupSpec::parse_list("balance:3,copy:1").expect("valid");
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].kind, g[0].members), (GroupKind::Balance, 3));
        assert_eq!((g[1].kind, g[1].members), (GroupKind::Copy, 1));
        assert!(GroupSpec::parse_list("spread:2").is_err());
        assert!(GroupSpec::parse_list("copy:0").is_err());
        assert!(GroupSpec::parse_list("copy:x").is_err());
    }
}
