//! corecap-wire's integration tests, one binary: flow keys and hashes on generated frames,
//! Toeplitz known answers, file round trips and attacks on the reader, and interop with
//! tshark and tcpdump.

mod community_id;
mod flow;
mod interop;
mod roundtrip;
mod rss;
