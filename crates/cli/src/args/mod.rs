//! Command-line arguments as typed (clap). `config.rs` resolves them.

use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

mod cutoff;
mod lab;
mod request;
mod serve;

pub(crate) use cutoff::*;
pub(crate) use lab::*;
pub(crate) use request::*;
pub(crate) use serve::*;

/// Packet capture on every core: AF_PACKET workers, one per core, with exact accounting.
#[derive(Parser, Debug)]
#[command(name = "corecap", version, about, propagate_version = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Cmd {
    /// Capture packets on interfaces (-i) or from files (-r): print one line per packet as
    /// tcpdump does, write them (-w), or only count them (--count-only).
    Capture(Box<CaptureArgs>),
    /// Send test traffic on an interface.
    Gen(GenArgs),
    /// Create, inspect or remove the veth lab.
    Lab {
        #[command(subcommand)]
        cmd: LabCmd,
    },
    /// Bring up a lab, record generated traffic on all cores, query one host back, clean up.
    Demo(DemoArgs),
    /// Measure capture on the lab against tcpdump, dumpcap and netsniff-ng; write the papers' tables.
    Bench(BenchArgs),
    /// Make a CA, a server certificate and a client certificate for serve --listen with TLS.
    Certs(CertsArgs),
    /// Make a key file for --encrypt (256 random bits as hex, mode 0600).
    Keygen {
        /// Key file to create (an existing file is not replaced).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        out: PathBuf,
    },
    /// Decrypt a sealed capture file (written with --encrypt) back to pcapng/pcap.
    Decrypt {
        /// Sealed file.
        input: PathBuf,
        /// Decrypted file to write (default: the input without .sealed).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        out: Option<PathBuf>,
        /// Key file.
        #[arg(long, value_name = "FILE")]
        key_file: PathBuf,
        /// Accept a file that lacks its final chunk (cut short by a crash): decrypt its
        /// whole chunks and exit 0. Without it such a file exits with status 3.
        #[arg(long)]
        allow_truncated: bool,
    },
    /// Build the sidecar index (FILE.idx) of capture files, for `corecap query`.
    Index(IndexArgs),
    /// Packets from recorded files by time window and filter: one line per packet as tcpdump
    /// -r prints them, or one pcapng in time order (-w).
    Query(QueryArgs),
    /// Connections from recorded files' sessions: a table, JSON lines or CSV, by time
    /// window, Community ID, TLS server name, DNS name, HTTP Host, host, port and filter.
    Flows(crate::flow_args::FlowsArgs),
    /// Run the on-demand capture daemon: an HTTP+JSON API on a Unix socket that starts and
    /// stops captures per request (attach to a base capture's workers, or spawn a worker).
    Serve(Box<ServeArgs>),
    /// Talk to `corecap serve`: start, list, show and stop captures.
    Request(RequestArgs),
    /// Wireshark's extcap protocol: corecap's interfaces in Wireshark and tshark
    /// (`corecap extcap install` puts the link in Wireshark's extcap folder).
    Extcap(Box<ExtcapArgs>),
    /// Read NUMA nodes, cores, IRQs and queues; plan, apply and undo a placement.
    Tune {
        #[command(subcommand)]
        cmd: TuneCmd,
    },
    /// Write the man pages or a shell's completions, made from these definitions (a
    /// package ships them; `crates/cli/debian/build` runs it).
    #[command(hide = true)]
    Generate {
        #[command(subcommand)]
        what: GenerateCmd,
    },
}

/// `corecap generate`.
#[derive(Subcommand, Debug)]
pub(crate) enum GenerateCmd {
    /// One man page per command and subcommand (corecap.1, corecap-serve.1,
    /// corecap-lab-up.1 ...) into DIR, made when missing.
    Man {
        /// Folder to write the pages into.
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// The completion script of SHELL, on stdout.
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum TuneCmd {
    /// Show nodes, cores, HT twins, the NIC's node, queues, IRQs, rings, pause, RPS/XPS.
    Show(TuneArgs),
    /// Propose a placement of IRQs, capture workers and stage threads, with warnings.
    Plan(TunePlanArgs),
    /// Apply the plan (IRQ affinity, channels, ring size, pause off), saving the old state.
    Apply {
        #[command(flatten)]
        plan: TunePlanArgs,
        /// Print every write without making it.
        #[arg(long)]
        dry_run: bool,
    },
    /// Put back the state saved by `tune apply`.
    Restore {
        #[command(flatten)]
        target: TuneArgs,
        /// Print every write without making it.
        #[arg(long)]
        dry_run: bool,
    },
    /// Copy the files tune reads (and the ethtool settings) into DIR, for bug reports and tests.
    Snapshot {
        #[command(flatten)]
        target: TuneArgs,
        /// Directory to create.
        #[arg(short = 'o', long = "output", value_name = "DIR")]
        out: PathBuf,
    },
}

#[derive(Args, Debug, Clone)]
pub(crate) struct TuneArgs {
    /// Interface.
    #[arg(short = 'i', long = "interface")]
    pub(crate) iface: String,
    /// Read (and write) under DIR instead of / (DIR holds sys/..., proc/... and ethtool/IF.json).
    #[arg(long, value_name = "DIR")]
    pub(crate) root: Option<PathBuf>,
    /// Run inside this network namespace (live root only).
    #[arg(long, value_name = "NAME")]
    pub(crate) netns: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct TunePlanArgs {
    #[command(flatten)]
    pub(crate) target: TuneArgs,
    /// Capture workers (default: one per RX queue, at most one per physical core of the NIC's node).
    #[arg(long)]
    pub(crate) workers: Option<usize>,
    /// RX queues to configure (ethtool channels; default: as they are).
    #[arg(long)]
    pub(crate) queues: Option<u32>,
}

/// Cipher of sealed files (`--encrypt`).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CipherArg {
    /// AES-256-GCM.
    Aes,
    /// SEED-GCM (RFC 4269).
    Seed,
}

impl CipherArg {
    /// The name the API and `Cipher::from_str` take.
    pub(crate) fn name(self) -> &'static str {
        match self {
            CipherArg::Aes => "aes",
            CipherArg::Seed => "seed",
        }
    }
}

/// Timestamp resolution of classic pcap files (`--time-stamp-precision`).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TsPrecision {
    /// Microseconds (magic 0xa1b2c3d4), what tcpdump writes.
    Micro,
    /// Nanoseconds (magic 0xa1b23c4d).
    Nano,
}

/// Where the apps run (`capture --mode`).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RunMode {
    /// To completion on the capture cores.
    Workers,
    /// Steered to stage threads on other cores.
    Pipeline,
}

/// How packets reach the stage threads (`--transport`).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TransportArg {
    /// A ring per (worker, member).
    Spsc,
    /// One PFQ multi-producer queue per member.
    Mpsc,
}

/// What an on-demand capture produces (`request start --format`).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FormatArg {
    /// pcapng file.
    Pcapng,
    /// Classic pcap file.
    Pcap,
    /// Flow records.
    Flows,
    /// Counters only.
    Count,
}

/// How an on-demand capture starts (`request start --mode`).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StartMode {
    /// A copy consumer of the base capture's workers.
    Attach,
    /// A worker of its own.
    Spawn,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BalanceArg {
    Flow,
    Queue,
    Cpu,
    RoundRobin,
    Rollover,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct CaptureArgs {
    /// Interface to capture on; IF@Q opens RX queue Q alone. Repeatable. A number N is
    /// the Nth interface that -D lists (from 1, as tcpdump numbers them); `any` is every
    /// interface that is up.
    #[arg(short = 'i', long = "interface", value_name = "IF[@QUEUE]|N|any")]
    pub(crate) interfaces: Vec<String>,
    /// Do not put the interfaces into promiscuous mode (tcpdump's -p); by default they
    /// are, while the capture runs.
    #[arg(short = 'p', long = "no-promiscuous-mode")]
    pub(crate) no_promisc: bool,
    /// Read packets from a pcap or pcapng file instead. Repeatable.
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub(crate) read: Vec<PathBuf>,
    /// List interfaces with their RX queues and exit.
    #[arg(short = 'D', long = "list-interfaces")]
    pub(crate) list: bool,
    /// Write packets to FILE (pcapng; per worker: FILE.w0.pcapng ...). `-` is stdout.
    /// Without -w (or --count-only), one line per packet is printed, as tcpdump prints it.
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub(crate) write: Option<PathBuf>,
    /// Count the packets and print the statistics only: no packet lines and no file (what
    /// capture without -w did before it printed packets; the benchmarks use it).
    #[arg(long, conflicts_with = "write")]
    pub(crate) count_only: bool,
    /// Write classic pcap instead of pcapng, like dumpcap's -P (`--pcap` is the old name).
    #[arg(short = 'P', long = "pcap")]
    pub(crate) pcap: bool,
    /// Timestamps of classic pcap (-P): micro (microseconds, the magic tcpdump writes) or
    /// nano (nanoseconds, the 0xa1b23c4d magic). pcapng always keeps nanoseconds.
    #[arg(long, value_enum, value_name = "micro|nano")]
    pub(crate) time_stamp_precision: Option<TsPrecision>,
    /// How files are written to disk.
    #[command(flatten)]
    pub(crate) disk: DiskArgs,
    #[command(flatten)]
    pub(crate) cutoff: CutoffArgs,
    /// Write the -w file merged in timestamp order (the default, as dumpcap writes one file;
    /// kept for scripts that name it).
    #[arg(long, conflicts_with = "per_worker")]
    pub(crate) merge: bool,
    /// Write one file per worker (FILE.w0, FILE.w1 ...) instead of one merged file: no
    /// merge thread, for the highest rates. Each worker's file is in time order.
    #[arg(long)]
    pub(crate) per_worker: bool,
    /// Encrypt the capture files at rest (AES-256-GCM or SEED-GCM), in sealed chunks;
    /// `corecap decrypt` gives the pcapng back. Needs -w and --key-file.
    #[arg(long, value_enum)]
    pub(crate) encrypt: Option<CipherArg>,
    /// Key-encryption key for --encrypt (64 hex digits; `corecap keygen` makes one).
    #[arg(long, value_name = "FILE")]
    pub(crate) key_file: Option<PathBuf>,
    /// Rotate files like dumpcap: filesize:kB (1000 bytes; or with a suffix, 100M, 1G), duration:S, files:N (comma-separated or repeated).
    #[arg(short = 'b', long = "ring-buffer", value_name = "KEY:VALUE")]
    pub(crate) rotate: Vec<String>,
    /// Start a new file after N million bytes (1,000,000 bytes), like tcpdump's -C.
    #[arg(short = 'C', value_name = "MILLION_BYTES")]
    pub(crate) file_size_mb: Option<u64>,
    /// Start a new file every SECONDS, like tcpdump's -G.
    #[arg(short = 'G', value_name = "SECONDS")]
    pub(crate) rotate_seconds: Option<u64>,
    /// With -C: keep the newest N files (a ring, as tcpdump's -W); with -G and no -C: stop
    /// after N files, as tcpdump does.
    #[arg(short = 'W', value_name = "N")]
    pub(crate) file_count: Option<u64>,
    /// Stop like dumpcap's -a: duration:S (seconds), packets:N (as -c), filesize:kB (the
    /// file holds that much; with -b, the next file starts there), files:N (N files of a
    /// rotation); comma-separated or repeated, the first reached stops.
    #[arg(short = 'a', long = "autostop", value_name = "KEY:VALUE")]
    pub(crate) autostop: Vec<String>,
    /// Stop after COUNT packets (at least 1, as tcpdump).
    #[arg(short = 'c', long = "count", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) count: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub(crate) duration: Option<f64>,
    /// Bytes to keep of each packet (0: 262144, as tcpdump and dumpcap take it).
    #[arg(short = 's', long = "snaplen", default_value_t = 262144, value_parser = snaplen_arg)]
    pub(crate) snaplen: u32,
    #[command(flatten)]
    pub(crate) ring: RingArgs,
    /// Workers per interface, 1 to 1024 (default: one per RX queue, at most one per CPU,
    /// placed from the last CPU down, away from the CPUs that usually take the interrupts).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub(crate) workers: Option<usize>,
    /// CPUs to run the workers on, e.g. 0-3,6.
    #[arg(long, value_name = "LIST")]
    pub(crate) cpus: Option<String>,
    /// Do not pin workers to CPUs; the scheduler places them.
    #[arg(long)]
    pub(crate) no_pin: bool,
    /// How packets are spread over the workers of an interface (default: flow; queue
    /// with --auto on a NIC of several RX queues).
    #[arg(long, value_enum)]
    pub(crate) balance: Option<BalanceArg>,
    /// Place workers and stage threads by the `corecap tune plan` of the interface: CPUs on
    /// the NIC's node, off the IRQ CPUs and HT twins, queue i on worker i % workers.
    #[arg(long, conflicts_with = "cpus")]
    pub(crate) auto: bool,
    /// Run to completion on the capture cores (workers), or steer to stage cores (pipeline).
    #[arg(long, value_enum, default_value = "workers")]
    pub(crate) mode: RunMode,
    /// Consumer groups on stage cores, e.g. balance:3,copy:1 (implies --mode pipeline).
    #[arg(long, value_name = "KIND:N,...")]
    pub(crate) groups: Option<String>,
    /// How packets reach the stage threads: a ring per (worker, member), or one PFQ
    /// multi-producer queue per member.
    /// (`--queue` is the old name, kept for one release.)
    #[arg(long, value_enum, default_value = "spsc", alias = "queue")]
    pub(crate) transport: TransportArg,
    /// With -i xdp:IF: N AF_XDP sockets (and workers) per RX queue, sharing the queue's
    /// UMEM; the XDP program spreads the queue's frames over them by a symmetric flow
    /// hash, so both directions of a flow reach one worker.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) xdp_spread: u32,
    /// CPUs for the stage threads (group members).
    #[arg(long, value_name = "LIST")]
    pub(crate) stage_cpus: Option<String>,
    /// Read commands from this file (`-` for stdin) while capturing: `join GROUP` adds a
    /// member to a group, `leave GROUP INDEX` removes one; traffic keeps flowing.
    #[arg(long, value_name = "FILE")]
    pub(crate) control: Option<std::path::PathBuf>,
    /// Write flow records (JSON lines) per stage thread: FILE.g0m0 ...; or export them
    /// over IPFIX to ipfix://HOST:PORT (UDP) or ipfix+tcp://HOST:PORT. Give it twice for
    /// both (implies --mode pipeline).
    #[arg(long, value_name = "FILE|URL")]
    pub(crate) flows: Vec<String>,
    /// With --flows ipfix://...: export biflows (RFC 5103 reverse counters) instead of one
    /// record per direction.
    #[arg(long)]
    pub(crate) ipfix_biflow: bool,
    /// Filter of one group, as GROUP=EXPR (repeatable), e.g. 1='udp port 53'.
    #[arg(long, value_name = "G=EXPR")]
    pub(crate) group_filter: Vec<String>,
    /// Snap length of one group, as GROUP=BYTES (repeatable).
    #[arg(long, value_name = "G=BYTES")]
    pub(crate) group_snaplen: Vec<String>,
    /// Filter in tcpdump syntax (or give it as trailing arguments).
    #[arg(short = 'f', long = "filter", value_name = "EXPR")]
    pub(crate) filter: Option<String>,
    /// Print statistics as JSON lines (stdout, or stderr with -w -).
    #[arg(long)]
    pub(crate) json: bool,
    /// Seconds between statistics lines (0 = only the summary). Default: 1 on a terminal or with --json.
    #[arg(long, value_name = "SECONDS")]
    pub(crate) stats_interval: Option<f64>,
    /// Run inside this network namespace (an `ip netns` name).
    #[arg(long, value_name = "NAME")]
    pub(crate) netns: Option<String>,
    /// When no packet is printed (-w, --count-only, --groups, --flows): print nothing but
    /// errors and the summary (dumpcap's -q). When packets are printed: tcpdump's -q, less
    /// protocol detail on each line.
    #[arg(short = 'q', long)]
    pub(crate) quiet: bool,
    #[command(flatten)]
    pub(crate) print: PrintArgs,
    /// Once the sockets are open, run as this user (like tcpdump -Z): the whole process
    /// switches uid and gid, keeps no capability, and sets no_new_privs. The output
    /// directory must be writable by the user; files are theirs.
    #[arg(short = 'Z', long = "user", value_name = "USER")]
    pub(crate) user: Option<String>,
    /// Filter expression.
    #[arg(trailing_var_arg = true, value_name = "FILTER")]
    pub(crate) expr: Vec<String>,
}

/// How capture files are written.
#[derive(Args, Debug, Clone)]
pub(crate) struct DiskArgs {
    /// Keep the newest whole files under this many bytes (e.g. 500G, 5M) by deleting the
    /// oldest; with capture, it needs rotation (-b filesize: or duration:).
    #[arg(long, value_name = "SIZE")]
    pub(crate) retain: Option<String>,
    /// Delete the whole files whose last packet is older than this (14d, 12h, 90m, 3600s),
    /// oldest first; with capture, it needs rotation.
    #[arg(long, value_name = "DURATION")]
    pub(crate) retain_age: Option<String>,
    /// Delete the oldest whole files while the filesystem has less than this free: a share
    /// (10%) or a size (50G); with capture, it needs rotation.
    #[arg(long, value_name = "PERCENT|SIZE")]
    pub(crate) min_free: Option<String>,
    /// Write through the page cache instead of with direct I/O.
    #[arg(long)]
    pub(crate) no_direct: bool,
    /// Write no index beside the files (queries then scan them; the sessions files are
    /// still written, unless --no-sessions).
    #[arg(long)]
    pub(crate) no_index: bool,
    /// Keep no sessions file beside the files (one record per connection, with its
    /// Community ID and the names of its first packets: see `corecap flows`).
    #[arg(long)]
    pub(crate) no_sessions: bool,
    /// Append every closed file's connections to FILE too, one JSON object a line with the
    /// Elastic Common Schema's names and observer.name, for a log shipper; never torn,
    /// renamed to FILE.1 past 64 MiB.
    #[arg(long, value_name = "FILE")]
    pub(crate) sessions_log: Option<std::path::PathBuf>,
    /// Connections each file keeps a record of, per worker writing it [default: 65536 for
    /// recordings, 4096 for on-demand captures]: a packet of a connection past them is
    /// written, and counted as sessions_dropped. Each costs about 320 bytes of memory,
    /// reserved at start and touched as connections come.
    #[arg(long, value_name = "N")]
    pub(crate) sessions_per_file: Option<usize>,
    /// The seed of the sessions' Community IDs, as Zeek's, Suricata's and Arkime's seed.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) community_id_seed: u16,
    /// Memory that holds packets while the disk is behind (a stall, other writers), over all
    /// the files being written: seconds of the fastest input's line rate (2, 0.5s) or a
    /// size (512M, 2G). It is taken only while the disk is behind. [default: 1 s of the
    /// line rate, at least 48 MiB, at most a quarter of the available memory]
    #[arg(long, value_name = "SECONDS|SIZE")]
    pub(crate) disk_backlog: Option<String>,
    /// Seconds after which a packet is on disk even if its buffer is not full (it survives
    /// a crash of corecap); 0 hands every batch over as it comes.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    pub(crate) flush_interval: f64,
    /// Compress the recording: zstd or zstd:LEVEL (default 1; negative is faster). Each
    /// file is independent zstd frames ending in a seek table (the zstd seekable format),
    /// named `.zst`: `zstd -d` and `zstdcat | tshark -r -` read it, and queries decompress
    /// only the frames that hold their packets. Frames that do not compress are stored;
    /// at levels 1 to 3, traffic that compresses in part goes at level -3 and very
    /// compressible traffic in double frames (docs/compress.md).
    #[arg(long, value_name = "zstd[:LEVEL]")]
    pub(crate) compress: Option<String>,
}

/// TPACKET_V3 ring geometry of each worker.
#[derive(Args, Debug, Clone)]
pub(crate) struct RingArgs {
    /// Ring size per worker in KiB, as tcpdump's -B takes it, or with a suffix: 65536,
    /// 64M, 1G (dumpcap's -B counts MiB: give it as 64M) [default: 100 ms of the link's
    /// rate per worker, at least 64 MiB and at most 1 GiB, within a quarter of the
    /// available memory].
    #[arg(short = 'B', long = "buffer-size", value_name = "KiB")]
    pub(crate) buffer: Option<String>,
    /// Ring block size in KiB.
    #[arg(long, value_name = "KiB", default_value_t = 256)]
    pub(crate) block_size: u32,
    /// Milliseconds after which a partly filled block is handed over.
    #[arg(long, value_name = "MS", default_value_t = 10)]
    pub(crate) block_timeout: u32,
}

/// `corecap index`.
#[derive(Args, Debug)]
pub(crate) struct IndexArgs {
    /// pcap, pcapng or sealed capture files.
    #[arg(required = true, value_name = "FILE")]
    pub(crate) files: Vec<PathBuf>,
    /// Key file of sealed files (their index is sealed under it too).
    #[arg(long, value_name = "FILE")]
    pub(crate) key_file: Option<PathBuf>,
    /// One JSON line per file.
    #[arg(long)]
    pub(crate) json: bool,
}

/// How packets print when they are not written (`capture` and `query` without -w):
/// tcpdump's flags, with its meanings.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct PrintArgs {
    /// Do not convert addresses or ports to names (tcpdump's -n, -nn). corecap never looks
    /// names up, so this is always so; the flag is accepted for tcpdump's habits.
    #[arg(short = 'n', action = ArgAction::Count)]
    pub(crate) numeric: u8,
    /// Print the link-level header on each line (MAC addresses, Ethernet type, length).
    #[arg(short = 'e')]
    pub(crate) link_header: bool,
    /// Print each packet's bytes in hex after its line, without the link header (-xx:
    /// with it).
    #[arg(short = 'x', action = ArgAction::Count)]
    pub(crate) hex: u8,
    /// Print each packet's bytes in hex and ASCII (-XX: with the link header).
    #[arg(short = 'X', action = ArgAction::Count)]
    pub(crate) hex_ascii: u8,
    /// Time stamps: local time of day (HH:MM:SS.ffffff) by default; -t none; -tt seconds
    /// since the epoch; -ttt since the previous packet; -tttt with the date; -ttttt since
    /// the first packet.
    #[arg(short = 't', action = ArgAction::Count)]
    pub(crate) time: u8,
    /// More detail: the IP header's fields (tos, ttl, id, offset, flags, proto, length)
    /// and the checksums (-vv: also of UDP over IPv4).
    #[arg(short = 'v', action = ArgAction::Count)]
    pub(crate) verbose: u8,
    /// Write each line out as it is printed, also into a pipe (on a terminal it always is).
    #[arg(short = 'l')]
    pub(crate) line_buffered: bool,
}

impl PrintArgs {
    /// The flags given that only matter when packets are printed.
    pub(crate) fn given(&self) -> Vec<&'static str> {
        [
            (self.link_header, "-e"),
            (self.hex > 0, "-x"),
            (self.hex_ascii > 0, "-X"),
            (self.time > 0, "-t"),
            (self.verbose > 0, "-v"),
            (self.line_buffered, "-l"),
        ]
        .iter()
        .filter(|f| f.0)
        .map(|f| f.1)
        .collect()
    }
}

/// `corecap query`.
#[derive(Args, Debug)]
pub(crate) struct QueryArgs {
    /// Capture files and directories (a spool, a rotation directory), then an optional
    /// tcpdump filter expression (the arguments that are not existing paths).
    #[arg(required_unless_present = "read", value_name = "PATH... [FILTER]")]
    pub(crate) args: Vec<String>,
    /// A capture file or directory to read, as tcpdump -r (repeatable); the arguments are
    /// then the filter.
    #[arg(short = 'r', value_name = "PATH")]
    pub(crate) read: Vec<std::path::PathBuf>,
    #[command(flatten)]
    pub(crate) window: crate::flow_args::WindowArgs,
    /// Filter expression (instead of trailing words).
    #[arg(short = 'f', long = "filter", value_name = "EXPR")]
    pub(crate) filter: Option<String>,
    /// Only the packets of the connections these select (from the files' sessions), both
    /// directions, from each one's first packet to its last.
    #[command(flatten)]
    pub(crate) select: crate::flow_args::SelectArgs,
    /// Output pcapng file (`-` for stdout); never written over (see --force). Without -w
    /// (or --stats), one line per packet is printed, as tcpdump -r prints it.
    #[arg(short = 'w', value_name = "OUT")]
    pub(crate) out: Option<PathBuf>,
    /// Print at most COUNT packets (tcpdump's -c; at least 1).
    #[arg(short = 'c', long = "count", value_name = "COUNT", conflicts_with_all = ["out", "stats"], value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) count: Option<u64>,
    /// Print less protocol detail on each line (tcpdump's -q).
    #[arg(short = 'q', conflicts_with_all = ["out", "stats"])]
    pub(crate) quick: bool,
    #[command(flatten)]
    pub(crate) print: PrintArgs,
    /// Replace the -w file if it exists.
    #[arg(long)]
    pub(crate) force: bool,
    /// Print one JSON summary line (to stderr when -w -).
    #[arg(long)]
    pub(crate) json: bool,
    /// Key file of sealed files.
    #[arg(long, value_name = "FILE")]
    pub(crate) key_file: Option<PathBuf>,
    /// Ignore the indexes and read every file whole (to check an answer, or time a scan).
    #[arg(long)]
    pub(crate) scan: bool,
    /// Count, read no packet: the files the query would open and at most how many packets
    /// it would return, from the folders' catalogs and the indexes (one JSON line).
    /// `--count-only` is the same.
    #[arg(long, visible_alias = "count-only", conflicts_with_all = ["scan", "out"])]
    pub(crate) stats: bool,
}

/// `corecap extcap`: what Wireshark passes to an extcap program.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct ExtcapArgs {
    #[command(subcommand)]
    pub(crate) cmd: Option<ExtcapCmd>,
    /// List the interfaces (corecap:IF, and corecap:IF@Q per RX queue).
    #[arg(long)]
    pub(crate) extcap_interfaces: bool,
    /// Wireshark's version (with --extcap-interfaces); alone, print corecap's.
    #[arg(long, value_name = "VERSION", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub(crate) extcap_version: Option<String>,
    /// The interface, corecap:IF[@QUEUE].
    #[arg(long, value_name = "corecap:IF[@QUEUE]")]
    pub(crate) extcap_interface: Option<String>,
    /// Print the interface's link type.
    #[arg(long)]
    pub(crate) extcap_dlts: bool,
    /// Print the interface's options.
    #[arg(long)]
    pub(crate) extcap_config: bool,
    /// Capture into --fifo until stopped.
    #[arg(long)]
    pub(crate) capture: bool,
    /// The FIFO to write pcapng into.
    #[arg(long, value_name = "PATH")]
    pub(crate) fifo: Option<PathBuf>,
    /// Capture filter in tcpdump syntax.
    #[arg(long, value_name = "EXPR")]
    pub(crate) extcap_capture_filter: Option<String>,
    /// Capture workers (0: one per RX queue).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=1024))]
    pub(crate) workers: Option<u32>,
    /// Bytes to keep of each packet.
    #[arg(long)]
    pub(crate) snaplen: Option<u32>,
    /// How packets are spread over the workers.
    #[arg(long, value_enum)]
    pub(crate) balance: Option<BalanceArg>,
    /// Control pipes, passed by Wireshark when an extcap has controls; corecap has none.
    #[arg(long, value_name = "PATH", hide = true)]
    pub(crate) extcap_control_in: Option<PathBuf>,
    /// See --extcap-control-in.
    #[arg(long, value_name = "PATH", hide = true)]
    pub(crate) extcap_control_out: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub(crate) enum ExtcapCmd {
    /// Link corecap into Wireshark's extcap folder (the user's, or the system's as root)
    /// and print the link's path.
    Install {
        /// Folder to put the link in.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Remove the link that `install` made.
    Uninstall {
        /// Folder the link is in.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// `corecap certs`.
#[derive(Args, Debug)]
pub(crate) struct CertsArgs {
    /// Folder to write into (made when missing): ca.pem, ca.key, server.pem, server.key,
    /// client.pem, client.key. Existing files are never replaced.
    #[arg(value_name = "DIR")]
    pub(crate) dir: PathBuf,
    /// A name of the daemon, DNS name or IP address, as clients reach it (repeatable;
    /// default: localhost, 127.0.0.1 and ::1).
    #[arg(long = "server-name", value_name = "NAME")]
    pub(crate) server_names: Vec<String>,
    /// The client certificate's common name.
    #[arg(long, value_name = "NAME", default_value = "corecap-client")]
    pub(crate) client_name: String,
    /// Days the certificates are valid.
    #[arg(long, value_name = "N", default_value_t = 825)]
    pub(crate) days: u32,
    /// Make only another client certificate, NAME.pem and NAME.key, with the CA already in
    /// DIR (ca.pem, ca.key).
    #[arg(long, value_name = "NAME")]
    pub(crate) add_client: Option<String>,
}

/// A snap length as `-s` takes it: 0 is the largest, 262144 bytes, as tcpdump and dumpcap
/// take it; others are checked where the capture is configured.
fn snaplen_arg(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(0) => Ok(262_144),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{text:?}: {e}")),
    }
}

#[cfg(test)]
mod readme_tests {
    use super::*;

    /// Splits a shell line into words as sh would for these commands: single and double
    /// quotes, backslash escapes, and nothing from an unquoted `#` or `|` on.
    fn words(line: &str) -> Vec<String> {
        let (mut out, mut cur, mut quote, mut started) = (Vec::new(), String::new(), None, false);
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => cur.push(c),
                (None, '\'' | '"') => {
                    quote = Some(c);
                    started = true;
                }
                (None, '\\') => cur.extend(chars.next()),
                (None, '#' | '|') if !started || cur.is_empty() => break,
                (None, c) if c.is_whitespace() => {
                    if started || !cur.is_empty() {
                        out.push(std::mem::take(&mut cur));
                    }
                    started = false;
                }
                (None, c) => cur.push(c),
            }
        }
        if started || !cur.is_empty() {
            out.push(cur);
        }
        out
    }

    /// The `corecap ...` command lines of the README's sh blocks, continuations joined.
    fn readme_commands() -> Vec<String> {
        let readme = include_str!("../../../../README.md");
        let mut out = Vec::new();
        let mut in_sh = false;
        let mut pending = String::new();
        for line in readme.lines() {
            if line.starts_with("```") {
                in_sh = line == "```sh";
                continue;
            }
            if !in_sh {
                continue;
            }
            let joined = format!("{pending}{}", line.trim_start());
            match joined.strip_suffix('\\') {
                Some(head) => pending = head.to_owned(),
                None => {
                    pending.clear();
                    if joined.starts_with("corecap ") {
                        out.push(joined);
                    }
                }
            }
        }
        out
    }

    /// Issue 39: every corecap command the README shows parses as corecap reads it: each
    /// subcommand, flag and value it names exists and is well formed.
    #[test]
    fn issue39_every_command_in_the_readme_parses() {
        let commands = readme_commands();
        assert!(commands.len() >= 15, "{commands:#?}");
        for c in &commands {
            let w = words(c);
            if let Err(e) = Cli::try_parse_from(&w) {
                panic!("README: `{c}` does not parse ({w:?}): {e}");
            }
        }
    }

    #[test]
    fn test_words() {
        assert_eq!(
            words("corecap query a 'host 10.0.0.7' -w x  # comment"),
            ["corecap", "query", "a", "host 10.0.0.7", "-w", "x"]
        );
        assert_eq!(
            words("corecap capture -i eth0 -w - | tshark -r -"),
            ["corecap", "capture", "-i", "eth0", "-w", "-"]
        );
        assert_eq!(words("a \"b # c\" d"), ["a", "b # c", "d"]);
    }
}
