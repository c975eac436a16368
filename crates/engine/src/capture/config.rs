//! What a capture is asked to do: its inputs, workers and placement, its output files, and
//! why it could not start. The CLI and the daemon build a [`CaptureConfig`]; `plan` reads
//! it.

use std::path::PathBuf;
use std::time::Duration;

use corecap_linux::{FanoutMode, RingConfig};
use corecap_wire::pcapng::InterfaceDesc;
use serde::Serialize;

use crate::sink::file::{FileConfig, FileOptions, FileSink};
use crate::stage::pipe;
use crate::steer::group::GroupSpec;

/// How packets of an interface are spread over its workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    /// Symmetric flow hash: both directions of a flow on one worker.
    Flow,
    /// By RX queue: worker i gets queue i.
    Queue,
    /// By the CPU that received the packet.
    Cpu,
    /// Round robin.
    RoundRobin,
    /// Fill one worker, then overflow to the next.
    Rollover,
}

impl Balance {
    pub(crate) fn fanout(self) -> FanoutMode {
        match self {
            Balance::Flow => FanoutMode::Hash,
            Balance::Queue => FanoutMode::Queue,
            Balance::Cpu => FanoutMode::Cpu,
            Balance::RoundRobin => FanoutMode::RoundRobin,
            Balance::Rollover => FanoutMode::Rollover,
        }
    }
}

/// An interface to capture on: all of it, or one RX queue (`IF@Q`, a virtual adapter),
/// through AF_PACKET or (with the `xdp:` prefix) AF_XDP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    /// Interface name.
    pub iface: String,
    /// RX queue, for a virtual adapter.
    pub queue: Option<u16>,
    /// Capture through AF_XDP instead of AF_PACKET.
    pub xdp: bool,
}

impl Input {
    /// Parses `eth0`, `eth0@2`, `xdp:eth0` or `xdp:eth0@2`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (xdp, rest) = match s.strip_prefix("xdp:") {
            Some(r) => (true, r),
            None => (false, s),
        };
        if rest.is_empty() {
            return Err(format!("empty interface name in '{s}'"));
        }
        match rest.rsplit_once('@') {
            Some((i, q)) => {
                let q = q
                    .parse()
                    .map_err(|_| format!("bad queue number in '{s}' (expected IF@QUEUE)"))?;
                Ok(Self {
                    iface: i.to_owned(),
                    queue: Some(q),
                    xdp,
                })
            }
            None => Ok(Self {
                iface: rest.to_owned(),
                queue: None,
                xdp,
            }),
        }
    }

    /// `eth0`, `eth0@2`, `xdp:eth0`...
    pub fn label(&self) -> String {
        let p = if self.xdp { "xdp:" } else { "" };
        match self.queue {
            Some(q) => format!("{p}{}@{q}", self.iface),
            None => format!("{p}{}", self.iface),
        }
    }
}

/// Where and how to write packets.
#[derive(Clone, Debug)]
pub struct OutputConfig {
    /// `-w` path; `-` is standard output.
    pub path: PathBuf,
    /// One file in timestamp order instead of one file per worker.
    pub merge: bool,
    /// How each file is written: format, rotation, sealing, index and the rest.
    pub file: FileOptions,
    /// Leave the tail of long flows out (`--flow-cutoff`, `--cutoff`): see
    /// [`crate::cutoff`].
    pub cutoff: Option<crate::cutoff::CutoffConfig>,
}

impl OutputConfig {
    /// Opens a file sink at `path` (the `-w` path itself or one suffixed per worker or
    /// member) describing `interfaces`, with this output's format, rotation and sealing.
    pub(crate) fn sink(
        &self,
        path: PathBuf,
        interfaces: Vec<InterfaceDesc>,
        snaplen: u32,
    ) -> Result<FileSink, CaptureError> {
        FileSink::create(FileConfig {
            path,
            interfaces,
            snaplen,
            file: self.file.clone(),
        })
        .map_err(|e| CaptureError::Output(e.to_string()))
    }
}

/// A resolved capture configuration.
#[derive(Clone, Debug)]
pub struct CaptureConfig {
    /// Live inputs.
    pub inputs: Vec<Input>,
    /// File inputs (`-r`).
    pub files: Vec<PathBuf>,
    /// Workers per whole interface (or for files).
    pub workers: usize,
    /// CPUs to pin workers to, in order (reused round robin).
    pub cpus: Vec<u32>,
    /// Pin each worker to its CPU (false leaves placement to the scheduler).
    pub pin: bool,
    /// Spreading mode.
    pub balance: Balance,
    /// tcpdump filter expression.
    pub filter: Option<String>,
    /// Bytes kept of each packet.
    pub snaplen: u32,
    /// Ring geometry of each AF_PACKET worker: block size, block count, block retire
    /// timeout.
    pub ring: RingConfig,
    /// Stop after this many packets.
    pub count: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Put AF_PACKET interfaces into promiscuous mode while the capture runs (tcpdump's
    /// default; `capture -p` turns it off). Off by default here: a daemon's captures
    /// leave the interface as they found it.
    pub promisc: bool,
    /// Output files.
    pub output: Option<OutputConfig>,
    /// Consumer groups; non-empty means pipeline mode (apps on stage threads).
    pub groups: Vec<GroupSpec>,
    /// CPUs for the stage threads (group members), reused round robin.
    pub stage_cpus: Vec<u32>,
    /// Flow records: JSON lines written per stage thread (`FILE.gGmM`) and/or IPFIX
    /// export, one exporter per stage thread, all in one observation domain.
    pub flows: Option<crate::stage::flows::FlowOutput>,
    /// How packets travel from the workers to the stage threads.
    pub transport: pipe::Transport,
    /// Steer even with no groups, so that consumers can attach while it runs
    /// ([`Capture::attach`]): the base capture of the on-demand manager.
    pub attachable: bool,
    /// A socket opened ahead of need, taken by a single-socket capture on its interface
    /// with the same ring geometry.
    pub spare: Option<crate::source::afpacket::Spare>,
    /// A parked worker thread for the capture's one worker (spawn mode): it runs the worker
    /// instead of a new thread; its spare is `spare`.
    pub standby: Option<crate::standby::Standby>,
    /// AF_XDP sockets (and workers) per RX queue, spread by flow in the XDP program.
    pub xdp_spread: u32,
}

impl Default for CaptureConfig {
    /// Nothing to capture yet: one worker per RX queue, pinned, flow balance, whole
    /// packets, a 64 MiB ring of 1 MiB blocks retired after 10 ms, no output (counting).
    /// Callers set what they resolved and take the rest from here.
    fn default() -> Self {
        Self {
            inputs: Vec::new(),
            files: Vec::new(),
            workers: 0,
            cpus: Vec::new(),
            pin: true,
            balance: Balance::Flow,
            filter: None,
            snaplen: 262_144,
            ring: RingConfig::with_size(64 << 20, 1 << 20, 10),
            count: None,
            duration: None,
            promisc: false,
            output: None,
            groups: Vec::new(),
            stage_cpus: Vec::new(),
            flows: None,
            transport: pipe::Transport::default(),
            attachable: false,
            spare: None,
            standby: None,
            xdp_spread: 1,
        }
    }
}

/// What kind of failure stopped a capture from starting: what the user can do about it
/// (the daemon answers 400, 404 or 500 by it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CaptureErrorKind {
    /// The configuration or request is wrong: a bad filter, a queue out of range, an
    /// unreadable input file. Fix the request.
    Invalid,
    /// An interface does not exist.
    NotFound,
    /// The machine refused: the kernel, memory, a thread, an output file, a timeout.
    System,
}

/// Errors that stop a capture before it starts.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// A kernel interface failed.
    #[error(transparent)]
    Linux(#[from] corecap_linux::Error),
    /// A filter did not compile.
    #[error(transparent)]
    Filter(#[from] crate::steer::filter::FilterError),
    /// A `--cutoff` class's filter did not compile.
    #[error(transparent)]
    Cutoff(#[from] crate::cutoff::CutoffError),
    /// The configuration is not possible.
    #[error("{0}")]
    Config(String),
    /// An output file could not be created.
    #[error("{0}")]
    Output(String),
    /// A thread could not start, or a worker could not open its source.
    #[error("{0}")]
    System(String),
}

impl CaptureError {
    /// What kind of failure it is.
    pub fn kind(&self) -> CaptureErrorKind {
        use corecap_linux::ErrorKind as K;
        match self {
            CaptureError::Linux(e) => match e.kind() {
                K::NoSuchInterface => CaptureErrorKind::NotFound,
                K::Filter => CaptureErrorKind::Invalid,
                _ => CaptureErrorKind::System,
            },
            CaptureError::Filter(e) if e.is_system() => CaptureErrorKind::System,
            CaptureError::Cutoff(e) if e.is_system() => CaptureErrorKind::System,
            CaptureError::Cutoff(_) => CaptureErrorKind::Invalid,
            CaptureError::Config(_) | CaptureError::Filter(_) => CaptureErrorKind::Invalid,
            CaptureError::Output(_) | CaptureError::System(_) => CaptureErrorKind::System,
        }
    }
}

/// A worker's line in the summary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkerInfo {
    /// Worker index.
    pub id: usize,
    /// CPU it is pinned to.
    pub cpu: Option<u32>,
    /// Input it reads (`eth0`, `eth0@1`, or `files`).
    pub input: String,
    /// RX queue of all its packets, when known.
    pub queue: Option<u32>,
}
