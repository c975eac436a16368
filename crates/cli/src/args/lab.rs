//! The flags of the test bench's commands: `gen`, `lab`, `demo` and `bench`.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

/// How the generator sends (`gen --engine`, `bench --engine`): a TPACKET_V3 TX ring, or
/// AF_XDP.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EngineArg {
    Txring,
    Xdp,
}

impl EngineArg {
    /// The flag's value, as `gen --engine` takes it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            EngineArg::Txring => "txring",
            EngineArg::Xdp => "xdp",
        }
    }
}

/// A capture tool that `bench` measures (`--tools`): corecap counting, corecap writing
/// pcapng, or a peer.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BenchTool {
    Corecap,
    CorecapWrite,
    Tcpdump,
    Dumpcap,
    NetsniffNg,
}

impl BenchTool {
    /// The tool's name in the report.
    pub(crate) fn name(self) -> &'static str {
        match self {
            BenchTool::Corecap => "corecap",
            BenchTool::CorecapWrite => "corecap-write",
            BenchTool::Tcpdump => "tcpdump",
            BenchTool::Dumpcap => "dumpcap",
            BenchTool::NetsniffNg => "netsniff-ng",
        }
    }
}

/// A part of the `bench` report (`--parts`): captured % by frame size and rate (paper
/// 001, Table 1), loss-free rates by balance and workers, worker placement.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BenchPart {
    Table1,
    Lossfree,
    Placement,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProtoArg {
    Udp,
    Tcp,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct GenArgs {
    /// Interface to send on.
    #[arg(short = 'i', long = "interface")]
    pub(crate) iface: String,
    /// Run inside this network namespace.
    #[arg(long, value_name = "NAME")]
    pub(crate) netns: Option<String>,
    /// Sending engine.
    #[arg(long, value_enum, default_value_t = EngineArg::Txring)]
    pub(crate) engine: EngineArg,
    /// Frame size on the wire including FCS (64..1518).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(64..=1518))]
    pub(crate) size: u16,
    /// Number of flows (1 source to N destinations).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16_777_216))]
    pub(crate) flows: u32,
    /// Transport protocol.
    #[arg(long, value_enum, default_value_t = ProtoArg::Udp)]
    pub(crate) proto: ProtoArg,
    /// Tag frames with this 802.1Q VLAN id.
    #[arg(long, value_parser = clap::value_parser!(u16).range(0..4096))]
    pub(crate) vlan: Option<u16>,
    /// Send both directions of each flow.
    #[arg(long)]
    pub(crate) bidir: bool,
    /// Number of the first flow: flows are FLOW_BASE..FLOW_BASE+FLOWS (new hosts per run).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) flow_base: u32,
    /// Packets each flow sends in a row before the next one's turn (bursty hosts).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) burst: u32,
    /// Packets per second (default: as fast as possible).
    #[arg(long)]
    pub(crate) rate: Option<u64>,
    /// Packets to send.
    #[arg(short = 'c', long = "count")]
    pub(crate) count: Option<u64>,
    /// Seconds to send for.
    #[arg(long)]
    pub(crate) duration: Option<f64>,
    /// Sending threads.
    #[arg(long, default_value_t = 1)]
    pub(crate) threads: usize,
    /// CPUs for the sending threads.
    #[arg(long, value_name = "LIST")]
    pub(crate) cpus: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Subcommand, Debug)]
pub(crate) enum LabCmd {
    /// Create the namespace and veth pair (gen0 -> cap0).
    Up(LabUpArgs),
    /// Remove the lab.
    Down {
        /// Namespace name.
        #[arg(long, default_value = "corecap-lab")]
        netns: String,
    },
    /// Show the lab's links and counters.
    Status {
        /// Namespace name.
        #[arg(long, default_value = "corecap-lab")]
        netns: String,
    },
    /// Write a heavy-tailed mix of whole TCP connections (and a few DNS ones) as a pcap
    /// file, to send with tcpreplay or read with capture -r.
    Mix(LabMixArgs),
}

#[derive(Args, Debug, Clone)]
pub(crate) struct LabMixArgs {
    /// The pcap file to write.
    #[arg(short = 'w', value_name = "FILE")]
    pub(crate) write: std::path::PathBuf,
    /// Connections in all.
    #[arg(long, default_value_t = 1000)]
    pub(crate) connections: u32,
    /// The largest response (e.g. 20M).
    #[arg(long, value_name = "SIZE", default_value = "20M")]
    pub(crate) max_bytes: String,
    /// The seed of the connection sizes.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// The Pareto shape of the response sizes: the smaller, the more of the bytes are in
    /// the few largest connections.
    #[arg(long, default_value_t = 1.1)]
    pub(crate) alpha: f64,
    /// Random payload bytes (as encrypted traffic is to a compressor), not the
    /// connection's number and zeros: --random-share 100.
    #[arg(long, conflicts_with = "random_share")]
    pub(crate) random_payload: bool,
    /// Percent of each payload's bytes that are random, the rest zeros (as traffic that
    /// compresses in part is to a compressor).
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u8).range(0..=100))]
    pub(crate) random_share: Option<u8>,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct LabUpArgs {
    /// Namespace name.
    #[arg(long, default_value = "corecap-lab")]
    pub(crate) netns: String,
    /// RX/TX queues per veth end.
    #[arg(long, default_value_t = 1)]
    pub(crate) queues: u32,
    /// Move cap0's receive processing to NAPI threads pinned to this CPU.
    #[arg(long, value_name = "CPU")]
    pub(crate) threaded_napi: Option<u32>,
    /// Steer cap0's receive processing to these CPUs with RPS.
    #[arg(long, value_name = "LIST")]
    pub(crate) rps: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct DemoArgs {
    /// Packets to generate.
    #[arg(long, default_value_t = 200_000)]
    pub(crate) packets: u64,
    /// Frame size.
    #[arg(long, default_value_t = 64)]
    pub(crate) size: u16,
    /// Flows (one host each; each sends its packets in bursts of --burst).
    #[arg(long, default_value_t = 256)]
    pub(crate) flows: u32,
    /// Packets a flow sends in a row before the next one's turn.
    #[arg(long, default_value_t = 250)]
    pub(crate) burst: u32,
    /// Queues of the lab veth pair.
    #[arg(long, default_value_t = 2)]
    pub(crate) queues: u32,
    /// Namespace of the demo lab.
    #[arg(long, default_value = "corecap-demo")]
    pub(crate) netns: String,
    /// Folder to record into (default: a new folder under the temporary directory). It
    /// must not exist yet.
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// Keep the recording afterwards (by default it is removed).
    #[arg(long)]
    pub(crate) keep: bool,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct BenchArgs {
    /// `disk [DIR]`: the disk self-test instead of the capture tables.
    #[command(subcommand)]
    pub(crate) what: Option<BenchWhat>,
    /// A small subset that runs in about two minutes.
    #[arg(long)]
    pub(crate) quick: bool,
    /// Repetitions per cell.
    #[arg(long, default_value_t = 3)]
    pub(crate) reps: usize,
    /// Packets per cell.
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) packets: u64,
    /// Frame sizes.
    #[arg(long, value_delimiter = ',', default_values_t = [64u16, 128, 256, 512, 1024, 1280, 1518])]
    pub(crate) sizes: Vec<u16>,
    /// Offered rates, in percent of the generator maximum.
    #[arg(long, value_delimiter = ',', default_values_t = [10u32, 25, 50, 75, 100])]
    pub(crate) rates: Vec<u32>,
    /// Capture tools to measure.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [BenchTool::Corecap, BenchTool::CorecapWrite, BenchTool::Tcpdump, BenchTool::Dumpcap, BenchTool::NetsniffNg])]
    pub(crate) tools: Vec<BenchTool>,
    /// Parts of the report to run.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [BenchPart::Table1, BenchPart::Lossfree, BenchPart::Placement])]
    pub(crate) parts: Vec<BenchPart>,
    /// Install missing peers with apt-get.
    #[arg(long)]
    pub(crate) install_peers: bool,
    /// Directory for report.md, report.json and the SVG plots.
    #[arg(long, default_value = "bench-report")]
    pub(crate) out: std::path::PathBuf,
    /// Namespace of the benchmark lab.
    #[arg(long, default_value = "corecap-bench")]
    pub(crate) netns: String,
    /// Generator engine (xdp is faster than one capture core).
    #[arg(long, value_enum, default_value_t = EngineArg::Xdp)]
    pub(crate) engine: EngineArg,
}

/// Benchmarks other than the papers' tables.
#[derive(Subcommand, Debug, Clone)]
pub(crate) enum BenchWhat {
    /// What the disk under DIR keeps: write throughput and CPU per GB, buffered against
    /// direct, and the packet rates at 64, 512 and 1518 bytes that it sustains.
    Disk {
        /// Directory to test (the recording's directory).
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// MiB written in each mode.
        #[arg(long, default_value_t = 2048)]
        size: u64,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}
