//! Consumer groups (PFQ): a copy group gives every packet to each member; a balanced
//! group gives each packet to one member, chosen by the symmetric flow hash through an
//! indirection table. A group may have its own filter and snap length; a packet can go to
//! several groups. [`Steer`] runs on a capture worker: it sends each packet to the members
//! that take it, through per-member pipes to the stage threads.

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
    /// Global index of the group's first member.
    pub first: usize,
    /// Members.
    pub members: usize,
}

/// Steering counters of one worker.
#[derive(Clone, Debug, Default)]
pub struct SteerCounts {
    /// Per group: packets its filter rejected.
    pub filtered: Vec<u64>,
    /// Per member: packets handed to its pipe.
    pub steered: Vec<u64>,
    /// Per member: packets dropped because its pipe was full.
    pub steer_full: Vec<u64>,
}

/// The steering stage of one capture worker.
#[derive(Debug)]
pub struct Steer {
    groups: Vec<Group>,
    tx: Vec<PipeTx>,
    /// Counters, read when the worker ends.
    pub counts: SteerCounts,
    need_hash: bool,
}

impl Steer {
    /// Steering over `groups` into one pipe per member (global member order).
    pub fn new(groups: Vec<Group>, tx: Vec<PipeTx>) -> Self {
        let need_hash = groups.iter().any(|g| g.kind == GroupKind::Balance);
        let counts = SteerCounts {
            filtered: vec![0; groups.len()],
            steered: vec![0; tx.len()],
            steer_full: vec![0; tx.len()],
        };
        Self {
            groups,
            tx,
            counts,
            need_hash,
        }
    }

    /// Sends one packet to the members that take it.
    pub fn packet(&mut self, p: &Packet<'_>) {
        // One hash per packet, shared by every balanced group (and carried to the stage).
        let hash = if self.need_hash { p.hash() } else { 0 };
        for (gi, g) in self.groups.iter().enumerate() {
            if let Some(f) = &g.filter {
                let meta = Meta {
                    vlan: p.vlan,
                    queue: p.queue.unwrap_or(0),
                    protocol: 0,
                };
                if f.run(p.data, p.wire_len, &meta) == 0 {
                    self.counts.filtered[gi] += 1;
                    continue;
                }
            }
            match g.kind {
                GroupKind::Copy => {
                    for m in g.first..g.first + g.members {
                        self.tx[m].cur.push(p, hash, g.snaplen);
                        self.counts.steered[m] += 1;
                    }
                }
                GroupKind::Balance => {
                    let m = g.first + usize::from(g.table.member(hash));
                    self.tx[m].cur.push(p, hash, g.snaplen);
                    self.counts.steered[m] += 1;
                }
            }
        }
    }

    /// Hands every member its batch (once per ring block).
    pub fn flush(&mut self) {
        for (m, t) in self.tx.iter_mut().enumerate() {
            self.counts.steer_full[m] += t.send();
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
