//! The corecap engine. Packets flow from a source through steering to the apps and sinks:
//!
//! - [`source`]: AF_PACKET rings (one per worker, in a fanout group) and capture files.
//! - [`steer`]: userspace filters.
//! - [`worker`]: a pinned thread that runs the apps to completion on each block.
//! - [`sink`]: pcapng/pcap files, per worker or merged in timestamp order, with rotation.
//! - [`query`]: recorded files back out by time window and filter, reading only the regions
//!   their sidecar index says can match.
//! - [`stats`]: per-worker counters and the exact ledger.
//! - [`capture`]: a capture from configuration to summary.
//! - [`limits`]: checked durations, sizes and snap lengths, shared by the CLI and the API.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod capture;
pub mod limits;
pub mod packet;
pub mod query;
pub mod sink;
pub mod source;
pub mod stage;
pub mod stats;
pub mod steer;
pub mod worker;
