//! The JSON of the control API: what a client sends to start a capture, and what the
//! daemon says about one.

use serde::{Deserialize, Serialize};

/// How a capture is started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// A copy consumer of the base capture's workers, through the steering matrix.
    Attach,
    /// A worker with a socket of its own, on a free core (paper 004).
    Spawn,
}

impl Mode {
    /// `attach` or `spawn`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Attach => "attach",
            Mode::Spawn => "spawn",
        }
    }
}

/// What a capture produces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutputKind {
    /// A pcapng file in the spool.
    #[default]
    Pcapng,
    /// A pcap file in the spool.
    Pcap,
    /// Flow records (JSON lines) in the spool.
    Flows,
    /// Counters only.
    Count,
}

/// `POST /captures`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartRequest {
    /// Interface (`eth0`, or `eth0@2` for one RX queue in spawn mode).
    pub interface: String,
    /// tcpdump expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// Stop after this many packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Stop after this many seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<f64>,
    /// Bytes kept of each packet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snaplen: Option<u32>,
    /// What to produce.
    #[serde(default)]
    pub output: OutputKind,
    /// File name in the spool (default: the capture id with the output's extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Attach or spawn (default: attach when a base capture runs on the interface).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// CPUs to run on (spawn: the worker; attach: the stage thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<Vec<u32>>,
    /// Seal the file with the daemon's key: `aes` or `seed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypt: Option<String>,
    /// With output flows: also export them over IPFIX to this collector
    /// (`ipfix://HOST:PORT` or `ipfix+tcp://HOST:PORT`), one the daemon was started with
    /// (`serve --ipfix-collector`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collector: Option<String>,
    /// Start in the past: the file begins with the recorded packets from this time on
    /// (`-30s`, RFC 3339 or Unix seconds), then continues live. Needs `serve --record`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

/// Where a capture is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// Capturing.
    Running,
    /// Ended by itself (count or duration reached).
    Done,
    /// Stopped by a request, the quota or the daemon's shutdown.
    Stopped,
    /// Ended by an error; for a capture of an earlier run of the daemon that was running
    /// when it died: its file is gone (see `reason`).
    Failed,
    /// Ended cleanly (done or stopped, see `reason`) in an earlier run of the daemon.
    Finished,
    /// Running when an earlier run of the daemon died; its file is there (recovered,
    /// whole, or as its writer left it until recovery names it; see `reason`).
    Recovered,
}

impl State {
    /// `running`, `done`, `stopped`, `failed`, `finished` or `recovered`.
    pub fn name(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Done => "done",
            State::Stopped => "stopped",
            State::Failed => "failed",
            State::Finished => "finished",
            State::Recovered => "recovered",
        }
    }
}

/// Packets a capture lost, by place.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Drops {
    /// The kernel's ring was full (spawn mode; in attach mode see the base capture).
    pub kernel: u64,
    /// The pipe from the workers to the capture's stage thread was full (attach mode).
    #[serde(alias = "pipe_full")]
    pub stage_full: u64,
    /// The output could not take them.
    pub app: u64,
    /// Lost at the disk: it was behind (no free buffer), or a write failed (disk full).
    #[serde(default)]
    pub disk: u64,
}

/// What the daemon says about a capture (`GET /captures/{id}`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CaptureView {
    /// Id (`c1`, `c2`...).
    pub id: String,
    /// State.
    pub state: State,
    /// Why it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Attach or spawn.
    pub mode: Mode,
    /// Interface.
    pub interface: String,
    /// Filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// Output kind.
    pub output: OutputKind,
    /// Output file, in the spool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Bytes of the output file(s) so far.
    pub file_bytes: u64,
    /// CPUs it runs on.
    pub cores: Vec<u32>,
    /// When the request arrived (seconds since the epoch).
    pub requested_at: f64,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<f64>,
    /// Setup: microseconds from the request to the capture being armed, in place to take
    /// packets (attach: the consumer published to the workers; spawn: the socket open
    /// and bound).
    pub setup_us: f64,
    /// Time armed: microseconds from being armed to the first captured packet, the wait
    /// for traffic (0 when a packet was there first); before the first packet, the time
    /// armed so far (to the end, for a capture that ended without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub armed_us: Option<f64>,
    /// Time to the first packet: microseconds from the request to the first captured
    /// packet (by its kernel timestamp), setup and time armed together; none before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_packet_us: Option<f64>,
    /// The same as `first_packet_us`, under its older name (paper 004's thread lag, which
    /// is the setup only when traffic is steady); kept for the scripts that read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_us: Option<f64>,
    /// Packets captured.
    pub packets: u64,
    /// Their wire bytes.
    pub bytes: u64,
    /// Packets lost, by place.
    pub drops: Drops,
    /// Count limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Duration limit (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<f64>,
    /// Warnings (a shared core, a generic fallback...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Every file it wrote, in the spool (`path` is the first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// Started by an earlier run of the daemon (listed from the spool's catalog): it
    /// cannot be stopped, and its files stay in the spool for queries.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub earlier_run: bool,
    /// A capture that started in the past: its start (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<f64>,
    /// Of its packets, those from the recording.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<u64>,
    /// Of its packets, those that came live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<u64>,
}

impl CaptureView {
    /// The first packet came `us` microseconds after the request: the time to it, and the
    /// time armed before it.
    pub fn set_first_packet(&mut self, us: f64) {
        self.first_packet_us = Some(us);
        self.lag_us = Some(us);
        self.armed_us = Some((us - self.setup_us).max(0.0));
    }

    /// No packet yet, `us` microseconds after the request: the time armed so far.
    pub fn set_armed_until(&mut self, us: f64) {
        if self.first_packet_us.is_none() {
            self.armed_us = Some((us - self.setup_us).max(0.0));
        }
    }
}
