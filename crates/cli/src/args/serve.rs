//! The flags of `corecap serve`.

use std::path::PathBuf;

use clap::Args;

use super::{CutoffArgs, DiskArgs, RingArgs};

#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    /// Read serve's settings from this TOML file: each key a long flag as typed here
    /// (`spool = "/var/lib/corecap/spool"`, `interface = ["eth0"]`, `json = true`); a flag
    /// on the command line wins over the file's key. An unknown key is an error.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Run a base capture on this interface, so requests on it attach to its workers
    /// (repeatable). Requests on other interfaces spawn a worker of their own.
    #[arg(short = 'i', long = "interface", value_name = "IF")]
    pub(crate) interfaces: Vec<String>,
    /// Run inside this network namespace.
    #[arg(long, value_name = "NAME")]
    pub(crate) netns: Option<String>,
    /// Once the base captures and the API socket are open, run as this user (like
    /// tcpdump -Z). The spool and the socket become theirs; one thread keeps CAP_NET_RAW,
    /// CAP_NET_ADMIN and CAP_IPC_LOCK to open spawned captures' sockets, and no other
    /// thread holds any capability.
    #[arg(short = 'Z', long = "user", value_name = "USER")]
    pub(crate) user: Option<String>,
    /// The API's Unix socket (mode 0600).
    #[arg(long, value_name = "PATH", default_value = "/run/corecap/corecap.sock")]
    pub(crate) socket: std::path::PathBuf,
    /// Also listen on this TCP address: on loopback in clear with --token-file, or on any
    /// address with TLS (--tls-cert, --tls-key, --tls-client-ca).
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: Option<std::net::SocketAddr>,
    /// Bearer token for --listen (required in clear, optional with TLS); made (random,
    /// mode 0600) when the file does not exist.
    #[arg(long, value_name = "FILE")]
    pub(crate) token_file: Option<std::path::PathBuf>,
    /// The daemon's certificate chain for --listen with TLS (PEM).
    #[arg(long, value_name = "FILE", requires = "listen")]
    pub(crate) tls_cert: Option<std::path::PathBuf>,
    /// The key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub(crate) tls_key: Option<std::path::PathBuf>,
    /// The CA that clients' certificates must chain to (PEM); every client needs one.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub(crate) tls_client_ca: Option<std::path::PathBuf>,
    /// Other sensors the page at / searches with this one: a file of [NAME=]URL lines
    /// (https://HOST:PORT, # comments), asked over TLS with --peer-tls-ca, --peer-tls-cert
    /// and --peer-tls-key (request's --tls-* for the daemon).
    #[arg(long, value_name = "FILE", requires = "peer_tls_ca")]
    pub(crate) peers: Option<std::path::PathBuf>,
    /// The CA the peers' certificates chain to (PEM).
    #[arg(long, value_name = "FILE", requires = "peers")]
    pub(crate) peer_tls_ca: Option<std::path::PathBuf>,
    /// The client certificate the peers accept (PEM).
    #[arg(long, value_name = "FILE", requires = "peer_tls_key")]
    pub(crate) peer_tls_cert: Option<std::path::PathBuf>,
    /// The key of --peer-tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "peer_tls_cert")]
    pub(crate) peer_tls_key: Option<std::path::PathBuf>,
    /// Record the base captures continuously into this folder (IFACE.wN_NNNNN.pcapng, with
    /// their index), like capture -w with rotation; queries answer over it and the spool.
    #[arg(long, value_name = "DIR", requires = "interfaces")]
    pub(crate) record: Option<std::path::PathBuf>,
    /// Rotation of the recording, as capture's -b (default: filesize:1G,duration:300); not
    /// files:N: --retain, --retain-age and --min-free keep the recording, and what holds pin.
    #[arg(
        short = 'b',
        long = "rotate",
        value_name = "KEY:VALUE",
        requires = "record"
    )]
    pub(crate) rotate: Vec<String>,
    /// Directory for capture files; requests name files in it, never paths.
    #[arg(long, value_name = "DIR", default_value = "/var/spool/corecap")]
    pub(crate) spool: std::path::PathBuf,
    /// Most bytes the spool may hold (e.g. 500M, 20G); a request over it gets 429, and
    /// running captures stop when it is reached.
    #[arg(long, value_name = "SIZE")]
    pub(crate) quota: Option<String>,
    /// Most bytes the held recordings may take (e.g. 10G): past it, new holds are refused
    /// (507); what holds already keep is never deleted to make room.
    #[arg(long, value_name = "SIZE")]
    pub(crate) hold_budget: Option<String>,
    /// Follow Suricata's EVE output and hold each alert's flow from its first packet on
    /// disk: a file (eve.json, followed as tail -F through rotation and truncation), or
    /// unix:PATH, a socket corecap listens on for `filetype: unix_stream`.
    #[arg(long, value_name = "PATH")]
    pub(crate) eve: Option<String>,
    /// EVE event types that hold their flow (comma-separated).
    #[arg(
        long,
        value_name = "TYPES",
        default_value = "alert",
        value_delimiter = ','
    )]
    pub(crate) eve_types: Vec<String>,
    /// An alert's flow is held until it has been idle (no EVE record) this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub(crate) eve_idle: f64,
    /// How files are written to disk.
    #[command(flatten)]
    pub(crate) disk: DiskArgs,
    #[command(flatten)]
    pub(crate) cutoff: CutoffArgs,
    /// Most captures running at once (more get 429).
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub(crate) max_captures: usize,
    /// Key file for requests that ask for "encrypt" (corecap keygen makes one).
    #[arg(long, value_name = "FILE")]
    pub(crate) key_file: Option<std::path::PathBuf>,
    /// An IPFIX collector flows requests may name ("collector"), as ipfix://HOST:PORT or
    /// ipfix+tcp://HOST:PORT (repeatable); requests naming another get 400.
    #[arg(long, value_name = "URL")]
    pub(crate) ipfix_collector: Vec<String>,
    /// Export biflows (RFC 5103) to those collectors instead of one record per direction.
    #[arg(long)]
    pub(crate) ipfix_biflow: bool,
    /// When no core is free for a spawned capture, share the least used one instead of
    /// refusing with 429.
    #[arg(long)]
    pub(crate) share_cores: bool,
    /// Workers of each base capture (default: one per RX queue, at most one per CPU).
    #[arg(long)]
    pub(crate) workers: Option<usize>,
    /// CPUs for the base captures' workers.
    #[arg(long, value_name = "LIST")]
    pub(crate) cpus: Option<String>,
    /// CPUs for attached captures' stage threads (default: all, round robin).
    #[arg(long, value_name = "LIST")]
    pub(crate) stage_cpus: Option<String>,
    #[command(flatten)]
    pub(crate) ring: RingArgs,
    /// Ring size of a spawned capture's worker in MiB (smaller than the base's: a spawned
    /// capture's filter passes a part of the traffic, and its ring is made per request).
    #[arg(long, value_name = "MiB", default_value_t = 16)]
    pub(crate) spawn_buffer_size: u64,
    /// Sockets kept open (ring made, every packet refused) per interface, so a spawned
    /// capture takes one instead of waiting for the kernel to make a ring; 0 for none.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub(crate) spares: usize,
    /// Real-time scheduling for spawned workers: `fifo:N` runs each at SCHED_FIFO
    /// priority N (1-99), so a request's worker runs as soon as it is woken, ahead of
    /// normal threads on its core. Needs CAP_SYS_NICE.
    #[arg(long, value_name = "fifo:N", value_parser = parse_spawn_priority)]
    pub(crate) spawn_priority: Option<i32>,
    /// Seconds after the last spawned capture on an interface (not a base's) when its
    /// spare sockets are closed; at most 8 interfaces keep spares, the least recently used
    /// giving way.
    #[arg(long, value_name = "SECONDS", default_value_t = 300.0)]
    pub(crate) spare_idle: f64,
    /// Print the statistics lines as JSON lines on stdout, and at exit each capture's
    /// final state and the summary.
    #[arg(long)]
    pub(crate) json: bool,
    /// Seconds between statistics lines (0 = only the summary at the stop). Default: 1 on
    /// a terminal or with --json. SIGUSR1 asks for one at once.
    #[arg(long, value_name = "SECONDS")]
    pub(crate) stats_interval: Option<f64>,
}

/// `--spawn-priority fifo:N`: the SCHED_FIFO priority, 1..=99.
pub(super) fn parse_spawn_priority(s: &str) -> Result<i32, String> {
    let n = s
        .strip_prefix("fifo:")
        .ok_or_else(|| format!("'{s}': expected fifo:N (SCHED_FIFO priority N, 1-99)"))?;
    match n.parse::<i32>() {
        Ok(p) if (1..=99).contains(&p) => Ok(p),
        _ => Err(format!("'{s}': the priority is 1-99")),
    }
}
