//! The corecap engine. Packets flow from a source through steering to the stages and sinks:
//!
//! - [`source`]: AF_PACKET rings (one per worker, in a fanout group), AF_XDP sockets, and
//!   capture files.
//! - [`worker`]: a pinned thread that runs the apps to completion on each block.
//! - [`steer`]: the data path from the workers to the consumers: userspace filters, the
//!   steering matrix of consumer groups, and its indirection tables.
//! - [`stage`]: stage threads on other cores that run the apps on steered packets (flow
//!   records, files), with the pipes that feed them and their start (`capture::spawn`).
//! - [`sink`]: pcapng/pcap files, per worker or merged in timestamp order, with rotation,
//!   sealing, direct I/O and retention; IPFIX export. What the files are once written
//!   (names, indexes, recovery, the catalog, queries) is the `corecap_store` crate's.
//! - [`capture`]: a capture from configuration to summary, in two steps: `capture::plan`
//!   decides inputs, workers and CPUs, groups, pipes and which file gets which interfaces,
//!   without touching the machine; `capture::run` opens and starts what the plan says.
//! - [`control`]: changing the consumers of a running capture: join and leave a group,
//!   attach and detach a consumer of its own.
//! - [`cutoff`]: the per-flow cutoff of recordings (`--flow-cutoff`), a flow table per worker.
//! - [`stats`]: per-worker counters and the exact ledger.
//! - [`limits`]: checked durations, sizes and snap lengths, shared by the CLI and the API.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod capture;
pub mod control;
pub mod cutoff;
pub mod limits;
pub mod packet;
pub mod sink;
pub mod source;
pub mod stage;
pub mod standby;
pub mod stats;
pub mod steer;
pub mod worker;
