//! Command-line arguments of `corecap flows`, and the selectors `corecap query` and
//! `corecap request` share with it (clap, as typed).

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// What picks connections by what an analyst knows of them.
#[derive(Args, Clone, Debug, Default)]
pub(crate) struct SelectArgs {
    /// A connection's Community ID (v1, `1:` and 28 base64 characters), exactly.
    #[arg(long, value_name = "ID", value_parser = community_id)]
    pub(crate) community_id: Option<String>,
    /// The TLS server name (SNI) of the ClientHello: exact (any case), or with `*`
    /// wildcards (`*.example.com`).
    #[arg(long, value_name = "PATTERN")]
    pub(crate) sni: Option<String>,
    /// The name of the first DNS question: exact (any case), or with `*` wildcards.
    #[arg(long, value_name = "PATTERN")]
    pub(crate) dns: Option<String>,
    /// The Host of the HTTP/1.x request: exact (any case), or with `*` wildcards.
    #[arg(long, value_name = "PATTERN")]
    pub(crate) http_host: Option<String>,
}

/// A Community ID as `--community-id` takes it: one that is not well formed (a typo, a cut
/// paste) is refused, where it would match nothing and give an empty answer.
fn community_id(text: &str) -> Result<String, String> {
    let text = text.trim();
    match corecap_wire::CommunityId::parse(text.as_bytes()) {
        Some(_) => Ok(text.to_owned()),
        None => Err(format!(
            "not a Community ID: {text:?} (v1 is `1:` then 28 base64 characters, as \
             Suricata's and Zeek's `community_id` fields give it)"
        )),
    }
}

impl SelectArgs {
    /// Whether any selector was given.
    pub(crate) fn any(&self) -> bool {
        self.community_id.is_some()
            || self.sni.is_some()
            || self.dns.is_some()
            || self.http_host.is_some()
    }
}

/// How `corecap flows` orders its answer.
#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum SortArg {
    /// First packet time, oldest first.
    #[default]
    First,
    /// Last packet time, oldest first.
    Last,
    /// Bytes both ways, most first: all the connection sent, with what a per-flow cutoff
    /// left out of the files.
    Bytes,
    /// Packets both ways, most first (with those a cutoff left out, as bytes).
    Packets,
}

/// `corecap flows`.
#[derive(Args, Debug)]
pub(crate) struct FlowsArgs {
    /// Capture files and directories (a spool, a rotation directory), then an optional
    /// tcpdump filter expression, asked of each connection (its addresses, ports,
    /// protocol, VLAN and TCP flags seen; not its payload).
    #[arg(required = true, value_name = "PATH... [FILTER]")]
    pub(crate) args: Vec<String>,
    #[command(flatten)]
    pub(crate) window: WindowArgs,
    /// Filter expression (instead of trailing words).
    #[arg(short = 'f', long = "filter", value_name = "EXPR")]
    pub(crate) filter: Option<String>,
    #[command(flatten)]
    pub(crate) select: SelectArgs,
    /// Either end's address.
    #[arg(long, value_name = "ADDR")]
    pub(crate) host: Option<IpAddr>,
    /// Either end's port (TCP, UDP, SCTP).
    #[arg(long, value_name = "N")]
    pub(crate) port: Option<u16>,
    /// Order of the answer.
    #[arg(long, value_enum, default_value_t)]
    pub(crate) sort: SortArg,
    /// At most N connections (after sorting).
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<usize>,
    /// One JSON object per connection and line, with Elastic Common Schema field names.
    #[arg(long, conflicts_with = "csv")]
    pub(crate) json: bool,
    /// Comma-separated values, with a header line.
    #[arg(long)]
    pub(crate) csv: bool,
    /// Key file of sealed files.
    #[arg(long, value_name = "FILE")]
    pub(crate) key_file: Option<PathBuf>,
}

/// `corecap request flows`.
#[derive(Args, Debug)]
pub(crate) struct RequestFlowsArgs {
    /// Window start, inclusive (Unix seconds, RFC 3339, or relative like -15m).
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub(crate) from: Option<String>,
    /// Window end, exclusive.
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub(crate) to: Option<String>,
    #[command(flatten)]
    pub(crate) select: SelectArgs,
    /// Either end's address.
    #[arg(long, value_name = "ADDR")]
    pub(crate) host: Option<IpAddr>,
    /// Either end's port.
    #[arg(long, value_name = "N")]
    pub(crate) port: Option<u16>,
    /// At most N connections from each daemon (its default: 10000).
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<usize>,
    /// tcpdump filter expression, asked of each connection.
    #[arg(value_name = "FILTER")]
    pub(crate) filter: Vec<String>,
}

impl RequestFlowsArgs {
    /// The path and query of `GET /flows` for these arguments, percent-encoded.
    pub(crate) fn path(&self) -> String {
        let filter = self.filter.join(" ");
        let pairs = [
            ("from", self.from.clone()),
            ("to", self.to.clone()),
            ("community_id", self.select.community_id.clone()),
            ("sni", self.select.sni.clone()),
            ("dns", self.select.dns.clone()),
            ("http_host", self.select.http_host.clone()),
            ("host", self.host.map(|h| h.to_string())),
            ("port", self.port.map(|p| p.to_string())),
            ("limit", self.limit.map(|n| n.to_string())),
            ("filter", (!filter.trim().is_empty()).then_some(filter)),
        ];
        let q: Vec<String> = pairs
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}", encode(v))))
            .collect();
        if q.is_empty() {
            "/flows".to_owned()
        } else {
            format!("/flows?{}", q.join("&"))
        }
    }
}

/// `s` percent-encoded for a URL query: letters, digits and `-._~` as they are.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A time window, as `query` and `flows` take it.
#[derive(Args, Debug, Default)]
pub(crate) struct WindowArgs {
    /// Window start, inclusive: Unix seconds (with a fraction), RFC 3339, a local date
    /// and time as Wireshark prints it ("2026-11-23 10:00:00[.frac]", "2026-11-23 10:00",
    /// "2026-11-23"), or relative (-15m, -10min, -2hours, -30s, -1d, -1week).
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub(crate) from: Option<String>,
    /// Window end, exclusive (same forms as --from).
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub(crate) to: Option<String>,
    /// Time zone of dates and times given without an offset (an IANA name such as
    /// Europe/Paris, or a POSIX TZ rule; default: TZ, else the system's zone). The summary
    /// shows the window back in UTC.
    #[arg(long, value_name = "ZONE")]
    pub(crate) tz: Option<String>,
}
