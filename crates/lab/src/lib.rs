//! corecap's test bench, apart from the data path: what tests, the demo and the
//! benchmarks use to make traffic and measure, and nothing that a capture runs.
//!
//! - [`lab`]: a network namespace with a veth pair (gen0 → cap0), made and removed.
//! - [`gen`]: the traffic generator: RFC 2544 frame sizes, N flows, TX ring or XDP live
//!   frames.
//! - [`bench`]: the benchmark's samples, loss-free-rate search, peers and reports, and the
//!   disk self-test.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod bench;
pub mod gen;
pub mod lab;
