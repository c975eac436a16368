//! Queues between capture cores and stage cores.
//!
//! A capture worker owns one RX queue and one core; the heavy per-packet work
//! (flow accounting, pcapng writing, encryption) runs as stages on other cores.
//! This crate carries packets between them, copying each packet once together
//! with a small [`SlotHeader`] of what the engine knows about it:
//!
//! - [`mpsc`]: the PFQ socket queue (paper 002, Bonelli et al., Algorithm 1), a
//!   wait-free multi-producer single-consumer double buffer. Producers reserve
//!   room with one `fetch_add` per packet or per batch; the consumer swaps the
//!   buffers and reads the old one in place.
//! - [`spsc`]: one [`rtrb`] byte ring per producer carrying the same records, the
//!   alternative layout when each capture core gets its own ring.
//! - [`counter`]: cache-padded per-worker counters.
//! - [`watermark`]: per-producer watermarks ("every packet up to time T is sent"),
//!   by which a consumer merges its producers' packets in time order.
//!
//! Every record that is offered is either delivered or counted: a producer that
//! finds no room counts the record in `full_drops` ([`QueueStats`]) and writes
//! nothing.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod counter;
pub mod mpsc;
mod slot;
pub mod spsc;
mod sync;
pub mod watermark;

pub use slot::SlotHeader;

/// A record was dropped because the queue had no room for it; it was counted in
/// [`QueueStats::full_drops`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("queue full: record dropped and counted")]
pub struct Full;

/// Totals of a queue, summed over its producers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Records written into the queue.
    pub pushed: u64,
    /// Records dropped because the queue had no room (the `stage_full` place of
    /// the drop ledger).
    pub full_drops: u64,
}
