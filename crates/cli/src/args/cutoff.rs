//! The per-flow cutoff of recordings, as typed (`capture -w` and `serve --record`).

use clap::Args;

/// Leave the tail of long connections out of the recording.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct CutoffArgs {
    /// Record only the first SIZE bytes of payload of each connection (both directions
    /// together, e.g. 15k, 1M): later packets are counted as `cut`, not written. TCP SYN,
    /// FIN and RST are always written.
    #[arg(long, value_name = "SIZE")]
    pub(crate) flow_cutoff: Option<String>,
    /// A class of connections with a cutoff of its own: 'FILTER=SIZE' or 'FILTER=none' (a
    /// tcpdump filter, matched on a connection's first packet); repeated, the first match
    /// wins, the rest take --flow-cutoff.
    #[arg(long = "cutoff", value_name = "FILTER=SIZE|none")]
    pub(crate) classes: Vec<String>,
    /// Connections each worker follows at once for the cutoff; one pushed out starts again
    /// from zero (more of it is kept).
    #[arg(long, value_name = "N", default_value_t = corecap_engine::cutoff::CutoffConfig::DEFAULT_FLOWS)]
    pub(crate) cutoff_flows: usize,
    /// Seconds without a packet after which a connection starts again from zero.
    #[arg(long, value_name = "SECONDS", default_value_t = 120.0)]
    pub(crate) cutoff_idle: f64,
}
