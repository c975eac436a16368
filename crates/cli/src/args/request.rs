//! The flags of `corecap request`.

use clap::{Args, Subcommand};

use super::{CipherArg, FormatArg, PrintArgs, StartMode};

#[derive(Args, Debug)]
pub(crate) struct RequestArgs {
    /// The daemon's Unix socket.
    #[arg(
        long,
        value_name = "PATH",
        default_value = "/run/corecap/corecap.sock",
        global = true
    )]
    pub(crate) socket: std::path::PathBuf,
    /// Talk to a TCP address instead: http://127.0.0.1:PORT (loopback, with a token), or
    /// https://HOST:PORT (TLS, with --tls-ca and usually --tls-cert and --tls-key).
    #[arg(long, value_name = "URL", global = true)]
    pub(crate) url: Option<String>,
    /// Ask several sensors at once ([NAME=]URL, repeatable): query merges their answers
    /// in time order, list and show answer for each.
    #[arg(long = "sensor", value_name = "[NAME=]URL", global = true)]
    pub(crate) sensors: Vec<String>,
    /// A file of sensors, one [NAME=]URL a line (# comments).
    #[arg(long = "sensors", value_name = "FILE", global = true)]
    pub(crate) sensors_file: Option<std::path::PathBuf>,
    /// With several sensors: accept the answers of those that answered when others fail
    /// (exit 0, the failures still named).
    #[arg(long, global = true)]
    pub(crate) partial: bool,
    /// Seconds a daemon (each sensor) may take to connect, and to send each part of its
    /// answer; one silent that long fails the request, named.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0, global = true)]
    pub(crate) timeout: f64,
    /// The CA that the daemon's certificate must chain to (PEM), for https:// URLs.
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) tls_ca: Option<std::path::PathBuf>,
    /// The client's certificate (PEM) for https:// URLs.
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) tls_cert: Option<std::path::PathBuf>,
    /// The key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) tls_key: Option<std::path::PathBuf>,
    /// File holding the bearer token for --url (or set CORECAP_TOKEN).
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) token_file: Option<std::path::PathBuf>,
    /// Print the API's JSON.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    #[command(subcommand)]
    pub(crate) cmd: RequestCmd,
}

#[derive(Subcommand, Debug)]
pub(crate) enum RequestCmd {
    /// Start a capture; prints its id.
    Start(RequestStartArgs),
    /// List captures.
    List,
    /// Show one capture: state, packets, setup, time armed, time to the first packet,
    /// output.
    Show {
        /// Capture id.
        id: String,
    },
    /// Stop a capture; prints its final state once its files are closed.
    Stop {
        /// Capture id.
        id: String,
    },
    /// Print the daemon's Prometheus metrics.
    Metrics,
    /// Keep packets retention would delete (POST /holds): those of the window and the
    /// filter or selectors, copied into a held recording before their file is deleted.
    Hold(RequestHoldArgs),
    /// List the holds and the bytes their held recordings take (GET /holds).
    Holds,
    /// List the alerts read from Suricata's EVE output (serve --eve): signature,
    /// severity, flow, time, hold and the packets of the flow on record (GET /alerts).
    Alerts,
    /// Download an alert's flow, from its first packet on record, as one pcapng (GET
    /// /alerts/ID/pcap).
    Alert {
        /// Alert id (aN).
        id: String,
        /// Output pcapng file (`-` for stdout). An existing file is never written over.
        #[arg(short = 'w', value_name = "OUT")]
        out: std::path::PathBuf,
        /// Replace OUT if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Release a hold (DELETE /holds/NAME): what it kept stays; later deletions no longer
    /// keep its packets.
    Release {
        /// The hold's name.
        name: String,
    },
    /// What the recording keeps (GET /status, JSON): its reach (oldest and newest packet,
    /// stretches not on record and why), retention's bytes against each budget, files
    /// deleted by rule, deletions put off by a reading query.
    Status,
    /// Show which core runs what.
    Cores,
    /// Packets of the spool's and the recording's files by time window and filter, printed one
    /// line each as tcpdump -r prints them, or as pcapng with -w (POST /queries).
    Query(RequestQueryArgs),
    /// Connections of the spool's and the recording's files, from their sessions, as JSON
    /// lines (GET /flows); with several sensors, each line names its sensor
    /// (`observer.name`).
    Flows(crate::flow_args::RequestFlowsArgs),
    /// Download a capture's packets as one pcapng in time order (GET /captures/ID/pcap).
    Fetch {
        /// Capture id.
        id: String,
        /// Output pcapng file (`-` for stdout). An existing file is never written over.
        #[arg(short = 'w', value_name = "OUT")]
        out: std::path::PathBuf,
        /// Replace OUT if it exists.
        #[arg(long)]
        force: bool,
    },
}

/// `corecap request query`.
#[derive(Args, Debug)]
pub(crate) struct RequestQueryArgs {
    /// Window start, inclusive (Unix seconds, RFC 3339, or relative like -15m).
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub(crate) from: Option<String>,
    /// Window end, exclusive.
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub(crate) to: Option<String>,
    /// Output pcapng file (`-` for stdout). An existing file is never written over.
    /// Without -w, one line per packet is printed, as tcpdump -r prints it.
    #[arg(short = 'w', value_name = "OUT")]
    pub(crate) out: Option<std::path::PathBuf>,
    /// Replace OUT if it exists.
    #[arg(long)]
    pub(crate) force: bool,
    /// Print at most COUNT packets (tcpdump's -c).
    #[arg(
        short = 'c',
        long = "count",
        value_name = "COUNT",
        conflicts_with = "out"
    )]
    pub(crate) count: Option<u64>,
    /// Print less protocol detail on each line (tcpdump's -q).
    #[arg(short = 'q', conflicts_with = "out")]
    pub(crate) quick: bool,
    #[command(flatten)]
    pub(crate) print: PrintArgs,
    /// Only the packets of the connections these select.
    #[command(flatten)]
    pub(crate) select: crate::flow_args::SelectArgs,
    /// tcpdump filter expression.
    #[arg(value_name = "FILTER")]
    pub(crate) filter: Vec<String>,
}

/// `corecap request hold`.
#[derive(Args, Debug)]
pub(crate) struct RequestHoldArgs {
    /// The hold's name (the case): letters, digits, '-', '_', '.'.
    #[arg(long)]
    pub(crate) name: String,
    /// Window start, inclusive (Unix seconds, RFC 3339, or relative like -15m).
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub(crate) from: String,
    /// Window end, exclusive (may be in the future).
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub(crate) to: String,
    /// Only the packets of the connections these select.
    #[command(flatten)]
    pub(crate) select: crate::flow_args::SelectArgs,
    /// tcpdump filter expression.
    #[arg(value_name = "FILTER")]
    pub(crate) filter: Vec<String>,
}

#[derive(Args, Debug)]
pub(crate) struct RequestStartArgs {
    /// Interface (IF, or IF@QUEUE in spawn mode).
    #[arg(short = 'i', long = "interface")]
    pub(crate) iface: String,
    /// Stop after this many packets.
    #[arg(short = 'c', long = "count")]
    pub(crate) count: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long)]
    pub(crate) duration: Option<f64>,
    /// Bytes kept of each packet.
    #[arg(short = 's', long = "snaplen")]
    pub(crate) snaplen: Option<u32>,
    /// File name in the daemon's spool.
    #[arg(short = 'w', long = "write", value_name = "NAME")]
    pub(crate) name: Option<String>,
    /// What to produce (`--output` is the old name, kept for one release).
    #[arg(long, value_enum, default_value = "pcapng", alias = "output")]
    pub(crate) format: FormatArg,
    /// attach or spawn (default: attach when the daemon runs a base capture on IF).
    #[arg(long, value_enum)]
    pub(crate) mode: Option<StartMode>,
    /// Start in the past: the file begins with the recorded packets from this time on
    /// (-30s, RFC 3339, Unix seconds), then goes on live; needs serve --record.
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub(crate) since: Option<String>,
    /// CPUs to run on, e.g. 3 (spawn: the worker; attach: the stage thread).
    #[arg(long, value_name = "LIST")]
    pub(crate) cores: Option<String>,
    /// Seal the file with the daemon's key.
    #[arg(long, value_enum)]
    pub(crate) encrypt: Option<CipherArg>,
    /// With --output flows: also export them over IPFIX to this collector, one the
    /// daemon allows (serve --ipfix-collector).
    #[arg(long, value_name = "URL")]
    pub(crate) collector: Option<String>,
    /// Wait until the capture ends (count, duration, quota; Ctrl-C stops it) and print
    /// its final state instead of its id.
    #[arg(long)]
    pub(crate) wait: bool,
    /// Filter expression (tcpdump syntax).
    #[arg(trailing_var_arg = true)]
    pub(crate) expr: Vec<String>,
}
