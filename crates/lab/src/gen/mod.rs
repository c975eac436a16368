//! The traffic generator: test frames ([`frame`]) sent by a PACKET_TX_RING engine
//! ([`txring`]) or by XDP live frames ([`xdp`]); and a heavy-tailed mix of whole
//! connections written as a pcap file ([`mix`]).

pub mod frame;
pub mod mix;
pub mod txring;
pub mod xdp;

use std::time::Duration;

pub use frame::{FrameSpec, Proto};

/// What to send and how fast.
#[derive(Clone, Debug)]
pub struct GenConfig {
    /// Interface to send on.
    pub iface: String,
    /// The frames.
    pub frames: FrameSpec,
    /// Packets per second over all threads; None for as fast as possible.
    pub rate: Option<u64>,
    /// Packets to send; None for no limit.
    pub count: Option<u64>,
    /// Time to send for.
    pub duration: Option<Duration>,
    /// Sending threads.
    pub threads: usize,
    /// CPUs to pin the threads to.
    pub cpus: Vec<u32>,
}

/// What a run sent.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct GenReport {
    /// Frames the kernel accepted for transmission.
    pub sent: u64,
    /// Frames the kernel refused.
    pub errors: u64,
    /// Seconds from the first to the last frame.
    pub seconds: f64,
    /// Achieved rate, packets per second.
    pub pps: f64,
}
