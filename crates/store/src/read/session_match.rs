//! The connections a query was narrowed to, asked of each packet it reads: a packet is one
//! of theirs when its key is and its time is within that connection's first and last.

use std::collections::HashMap;

use corecap_wire::{FlowKey, Link};

use crate::session::{frame_key, Session};

/// The connections a query was narrowed to: a packet belongs when its key is one of
/// theirs and its time is within that connection's first and last packet.
#[derive(Clone, Debug, Default)]
pub struct SessionMatch {
    by_key: HashMap<FlowKey, Vec<(u64, u64)>>,
    /// The user's filter alone, for a link type the keys' filter does not compile for.
    pub user_filter: Option<String>,
}

impl SessionMatch {
    /// The match of `sessions` (one per connection).
    pub fn new<'a>(sessions: impl IntoIterator<Item = &'a Session>) -> SessionMatch {
        let mut by_key: HashMap<FlowKey, Vec<(u64, u64)>> = HashMap::new();
        for s in sessions {
            by_key
                .entry(s.table_key())
                .or_default()
                .push((s.first_ns, s.last_ns));
        }
        SessionMatch {
            by_key,
            user_filter: None,
        }
    }

    /// Whether the packet `frame` (of link type `link`) at `ts_ns` is one of theirs.
    pub fn matches(&self, link: Link, frame: &[u8], ts_ns: u64) -> bool {
        frame_key(link, frame)
            .and_then(|k| self.by_key.get(&k))
            .is_some_and(|times| times.iter().any(|&(a, b)| a <= ts_ns && ts_ns <= b))
    }
}
