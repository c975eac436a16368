//! The indirection table of a balanced group: many more buckets than members (RSS-style),
//! each bucket owned by one member. A packet goes to the owner of bucket `hash % BUCKETS`.
//!
//! Adding a member takes buckets from the members that own more than their share and
//! gives them to the newcomer; removing one hands its buckets to the members that own
//! the fewest. Either way only the buckets that must move do, so about 1/n of the flows
//! change member, not all of them (flow-stable rebalancing).

/// Buckets per table.
pub const BUCKETS: usize = 256;

/// Which member owns each bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Indirection {
    owner: Vec<u16>,
    members: u16,
}

impl Indirection {
    /// A table spread evenly over `members` members (at least one).
    pub fn new(members: u16) -> Self {
        let members = members.max(1);
        Self {
            owner: (0..BUCKETS)
                .map(|b| (b % usize::from(members)) as u16)
                .collect(),
            members,
        }
    }

    /// Number of members.
    pub fn members(&self) -> u16 {
        self.members
    }

    /// Member for a flow hash.
    #[inline]
    pub fn member(&self, hash: u32) -> u16 {
        self.owner[hash as usize % BUCKETS]
    }

    /// Buckets owned by each member.
    pub fn loads(&self) -> Vec<usize> {
        let mut l = vec![0; usize::from(self.members)];
        for o in &self.owner {
            l[usize::from(*o)] += 1;
        }
        l
    }

    /// Adds a member (its index is the old member count); returns the buckets moved.
    pub fn add_member(&mut self) -> usize {
        let new = usize::from(self.members);
        self.members += 1;
        let n = usize::from(self.members);
        let mut loads = self.loads();
        let mut moved = 0;
        // Take one bucket at a time from the most loaded member until the newcomer has
        // its share; the others end within one bucket of each other.
        while loads[new] < BUCKETS / n {
            let donor = (0..n)
                .filter(|i| *i != new)
                .max_by_key(|i| loads[*i])
                .unwrap_or(0);
            let Some(b) = self.owner.iter().rposition(|o| usize::from(*o) == donor) else {
                break;
            };
            self.owner[b] = new as u16;
            loads[donor] -= 1;
            loads[new] += 1;
            moved += 1;
        }
        moved
    }

    /// Removes member `m`: its buckets go to the least loaded members, and members above
    /// `m` are renumbered down by one. Returns the buckets moved.
    pub fn remove_member(&mut self, m: u16) -> usize {
        if self.members <= 1 || m >= self.members {
            return 0;
        }
        let mut loads = self.loads();
        loads[usize::from(m)] = usize::MAX;
        let mut moved = 0;
        for b in 0..BUCKETS {
            if self.owner[b] == m {
                let (to, _) = loads
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, l)| **l)
                    .unwrap_or((0, &0));
                loads[to] += 1;
                self.owner[b] = to as u16;
                moved += 1;
            }
        }
        for o in &mut self.owner {
            if *o > m {
                *o -= 1;
            }
        }
        self.members -= 1;
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(t: &Indirection) -> (usize, usize) {
        let l = t.loads();
        (*l.iter().min().unwrap_or(&0), *l.iter().max().unwrap_or(&0))
    }

    #[test]
    fn test_even_spread() {
        for n in 1..=16u16 {
            let t = Indirection::new(n);
            let (lo, hi) = spread(&t);
            assert!(hi - lo <= 1, "{n}: {lo}..{hi}");
        }
    }

    #[test]
    fn test_adding_a_member_moves_about_one_nth_of_4096_flows() {
        for n in 1..=8u16 {
            let mut t = Indirection::new(n);
            let before: Vec<u16> = (0..4096u32)
                .map(|f| t.member(f.wrapping_mul(2_654_435_761)))
                .collect();
            t.add_member();
            let after: Vec<u16> = (0..4096u32)
                .map(|f| t.member(f.wrapping_mul(2_654_435_761)))
                .collect();
            let moved = before.iter().zip(&after).filter(|(a, b)| a != b).count();
            let n1 = usize::from(n) + 1;
            assert!(
                moved <= 2 * 4096 / n1,
                "{n}->{n1}: {moved} of 4096 flows moved"
            );
            assert!(
                after.iter().all(|m| before.contains(m) || *m == n),
                "flows move only to the new member"
            );
            let (lo, hi) = spread(&t);
            assert!(hi - lo <= 2, "{n1} members: {lo}..{hi}");
        }
    }

    #[test]
    fn test_removing_a_member_moves_only_its_flows() {
        let mut t = Indirection::new(4);
        let before: Vec<u16> = (0..BUCKETS as u32).map(|b| t.member(b)).collect();
        let moved = t.remove_member(1);
        assert_eq!(moved, BUCKETS / 4);
        for (b, old) in before.iter().enumerate() {
            let now = t.member(b as u32);
            match *old {
                0 => assert_eq!(now, 0),
                1 => assert!(now < 3),
                o => assert_eq!(now, o - 1, "renumbered"),
            }
        }
        let (lo, hi) = spread(&t);
        assert!(hi - lo <= 1, "{lo}..{hi}");
        assert_eq!(t.remove_member(9), 0);
    }
}
