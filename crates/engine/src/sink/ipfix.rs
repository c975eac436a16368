//! IPFIX export (RFC 7011) of flow records, over UDP or TCP, to a standard collector
//! (nfcapd, ntopng, goflow2, ElastiFlow).
//!
//! One [`Exporter`] per flow table. Records are encoded straight into one reused message
//! buffer and sent when the next record would not fit (at most [`MAX_MESSAGE`] bytes, under
//! the path MTU of UDP), when the flow table flushes, and at the end: no allocation per
//! record.
//!
//! Templates (see docs/ipfix.md for the element lists):
//! - 256: IPv4 flows, 257: IPv6 flows (standard IANA elements; with biflow export, RFC 5103
//!   reverse counters of enterprise 29305 are appended);
//! - 258: an options template (RFC 7011 section 4), scope observationDomainId 149, with the
//!   exporter's statistics and corecap's drop counts.
//!
//! Over UDP the templates and one options record open the first message and every message
//! after [`TEMPLATE_REFRESH`] or [`TEMPLATE_EVERY`] messages; over TCP they open each
//! connection. The sequence number of a message counts the data records (options records
//! included) sent before it in the session (RFC 7011 section 3.1).
//!
//! Send errors (ECONNREFUSED when no collector listens on UDP, a TCP reset) are counted,
//! with the records the message carried; a collector that cannot be reached, or a TCP
//! collector that went away, is dialled again with a backoff of 1 s doubling to 30 s, with
//! fresh templates.
//!
//! Nothing of this runs on a stage thread: a flow table holds an [`ExportQueue`], which
//! hands each record to a sender thread of its own over a bounded single-producer
//! single-consumer ring (`rtrb`, the ring under `corecap_queue::spsc` and the stage pipes;
//! that module carries packet bytes, these are fixed-size values). The sender thread owns
//! the [`Exporter`]: name resolution, connects, reconnects, encoding and writes happen
//! there. A full ring is a counted drop (`export_full`), never a wait; a collector that
//! accepts and never reads, or is unreachable, costs export drops, not a stage backlog.

use std::io::Write;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Largest message sent (bytes): below a 1500-byte path MTU with IPv6 and UDP headers.
pub const MAX_MESSAGE: usize = 1400;
/// Templates are resent over UDP after this long.
pub const TEMPLATE_REFRESH: Duration = Duration::from_secs(30);
/// ... or after this many messages, whichever comes first.
pub const TEMPLATE_EVERY: u64 = 1024;

/// Template id of IPv4 flow records.
pub const TEMPLATE_V4: u16 = 256;
/// Template id of IPv6 flow records.
pub const TEMPLATE_V6: u16 = 257;
/// Template id of the exporter statistics (options template).
pub const TEMPLATE_STATS: u16 = 258;

/// Private enterprise number of the RFC 5103 reverse elements.
pub const REVERSE_PEN: u32 = 29305;

/// Transport to the collector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// `ipfix://`: UDP, templates resent periodically.
    Udp,
    /// `ipfix+tcp://`: TCP, templates once per connection.
    Tcp,
}

/// Where to export, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpfixTarget {
    /// UDP or TCP.
    pub transport: Transport,
    /// `HOST:PORT` as given (port 4739 when none was).
    pub addr: String,
    /// Export biflows (RFC 5103) rather than one record per direction.
    pub biflow: bool,
    /// Observation domain id of the capture.
    pub domain: u32,
}

impl IpfixTarget {
    /// Parses `ipfix://HOST[:PORT]` or `ipfix+tcp://HOST[:PORT]` (`[v6]:PORT` for IPv6).
    pub fn parse(s: &str) -> Result<Self, String> {
        let (transport, rest) = if let Some(r) = s.strip_prefix("ipfix+tcp://") {
            (Transport::Tcp, r)
        } else if let Some(r) = s.strip_prefix("ipfix+udp://") {
            (Transport::Udp, r)
        } else if let Some(r) = s.strip_prefix("ipfix://") {
            (Transport::Udp, r)
        } else {
            return Err(format!(
                "'{s}' is not an IPFIX collector (ipfix://HOST:PORT or ipfix+tcp://HOST:PORT)"
            ));
        };
        let rest = rest.trim_end_matches('/');
        if rest.is_empty() || rest.contains('/') || rest.contains('@') {
            return Err(format!("'{s}': expected ipfix://HOST:PORT"));
        }
        let has_port = match rest.rfind(']') {
            Some(b) => rest[b..].contains(':'),
            None => rest.matches(':').count() == 1,
        };
        if !rest.starts_with('[') && rest.matches(':').count() > 1 {
            return Err(format!("'{s}': write an IPv6 collector as [ADDR]:PORT"));
        }
        let addr = if has_port {
            let (_, p) = rest.rsplit_once(':').unwrap_or((rest, ""));
            match p.parse::<u16>() {
                Ok(n) if n > 0 => {}
                _ => return Err(format!("'{s}': bad port '{p}'")),
            }
            rest.to_owned()
        } else {
            format!("{rest}:4739")
        };
        Ok(Self {
            transport,
            addr,
            biflow: false,
            domain: 0,
        })
    }

    /// The target as a URL.
    pub fn url(&self) -> String {
        match self.transport {
            Transport::Udp => format!("ipfix://{}", self.addr),
            Transport::Tcp => format!("ipfix+tcp://{}", self.addr),
        }
    }
}

/// An observation domain id for a new capture: a hash of the process id and the time,
/// never 0.
pub fn new_domain() -> u32 {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut x = t ^ (u64::from(std::process::id()) << 32);
    // splitmix64 finaliser.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x as u32).max(1)
}

/// flowEndReason (IANA 136) values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum EndCode {
    /// 1: idle timeout.
    Idle = 1,
    /// 2: active timeout.
    Active = 2,
    /// 3: end of flow detected (FIN, RST).
    EndOfFlow = 3,
    /// 4: forced end (the capture ended).
    Forced = 4,
    /// 5: lack of resources (evicted from a full table).
    LackOfResources = 5,
}

/// One flow record (one direction, or a biflow with its reverse counters).
#[derive(Clone, Copy, Debug, Default)]
pub struct FlowRecord {
    /// Source address (IPv4 in the first 4 bytes when `v6` is false).
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
    /// IPv6 addresses.
    pub v6: bool,
    /// Source port (ICMP: 0).
    pub sport: u16,
    /// Destination port (ICMP: type * 256 + code, as collectors expect, or 0).
    pub dport: u16,
    /// IP protocol.
    pub proto: u8,
    /// TCP flags seen.
    pub tcp_flags: u8,
    /// VLAN id, 0 for none.
    pub vlan: u16,
    /// ifindex of the interface.
    pub ingress: u32,
    /// Bytes.
    pub octets: u64,
    /// Packets.
    pub packets: u64,
    /// First packet, ms since the epoch.
    pub start_ms: u64,
    /// Last packet, ms since the epoch.
    pub end_ms: u64,
    /// Why it ended.
    pub end: Option<EndCode>,
    /// Reverse bytes (biflow only).
    pub rev_octets: u64,
    /// Reverse packets (biflow only).
    pub rev_packets: u64,
    /// Reverse TCP flags (biflow only).
    pub rev_tcp_flags: u8,
}

/// Exporter statistics, sent in the options record and reported at the end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExportStats {
    /// Messages sent (exportedMessageTotalCount 41).
    pub messages: u64,
    /// Flow records sent (exportedFlowRecordTotalCount 42).
    pub records: u64,
    /// Bytes of messages sent (exportedOctetTotalCount 40).
    pub octets: u64,
    /// Messages that failed to send.
    pub send_errors: u64,
    /// Flow records in those messages (notSentFlowTotalCount 166).
    pub records_lost: u64,
    /// TCP connections made after the first.
    pub reconnects: u64,
    /// Flow records dropped before the sender: its queue was full (the collector is slow,
    /// does not read, or cannot be reached). Counted in notSentFlowTotalCount too.
    pub export_full: u64,
}

/// Counts of the capture that the options record carries.
#[derive(Clone, Copy, Debug, Default)]
pub struct Drops {
    /// Packets lost before the flow table (droppedPacketTotalCount 135).
    pub dropped: u64,
    /// Packets the flow table did not account: not IP (ignoredPacketTotalCount 164).
    pub ignored: u64,
    /// Flow records dropped at the export queue, added to notSentFlowTotalCount 166.
    pub export_full: u64,
}

/// (element id, length) of the flow templates, in record order; an id with the top bit
/// set is followed by enterprise [`REVERSE_PEN`].
const V4_FIELDS: &[(u16, u16)] = &[
    (8, 4),   // sourceIPv4Address
    (12, 4),  // destinationIPv4Address
    (7, 2),   // sourceTransportPort
    (11, 2),  // destinationTransportPort
    (4, 1),   // protocolIdentifier
    (6, 2),   // tcpControlBits
    (58, 2),  // vlanId
    (10, 4),  // ingressInterface
    (1, 8),   // octetDeltaCount
    (2, 8),   // packetDeltaCount
    (152, 8), // flowStartMilliseconds
    (153, 8), // flowEndMilliseconds
    (136, 1), // flowEndReason
];
const V6_FIELDS: &[(u16, u16)] = &[
    (27, 16), // sourceIPv6Address
    (28, 16), // destinationIPv6Address
    (7, 2),
    (11, 2),
    (4, 1),
    (6, 2),
    (58, 2),
    (10, 4),
    (1, 8),
    (2, 8),
    (152, 8),
    (153, 8),
    (136, 1),
];
/// RFC 5103 reverse elements appended in biflow mode: reverseOctetDeltaCount,
/// reversePacketDeltaCount, reverseTcpControlBits.
const REVERSE_FIELDS: &[(u16, u16)] = &[(0x8000 | 1, 8), (0x8000 | 2, 8), (0x8000 | 6, 2)];
/// The options template: scope observationDomainId 149, then exportedMessageTotalCount 41,
/// exportedFlowRecordTotalCount 42, exportedOctetTotalCount 40, notSentFlowTotalCount 166,
/// droppedPacketTotalCount 135, ignoredPacketTotalCount 164.
const STATS_FIELDS: &[(u16, u16)] = &[
    (149, 4),
    (41, 8),
    (42, 8),
    (40, 8),
    (166, 8),
    (135, 8),
    (164, 8),
];
const STATS_LEN: usize = 4 + 6 * 8;

fn rec_len(fields: &[(u16, u16)]) -> usize {
    fields.iter().map(|f| usize::from(f.1)).sum()
}

/// The socket to the collector, once dialled.
enum Conn {
    /// Not dialled yet, or a TCP connection that went away.
    Down,
    Udp(UdpSocket),
    Tcp(TcpStream),
}

/// An IPFIX exporting process for one flow table.
pub struct Exporter {
    target: IpfixTarget,
    conn: Conn,
    /// No dial before this.
    retry_at: Instant,
    /// The wait after the next failed dial: 1 s doubling to 30 s.
    backoff: Duration,
    /// Connections made (sessions).
    dials: u64,
    /// The message being built; `len()` is its length so far.
    buf: Vec<u8>,
    /// Offset of the open set's header, if a data set is open, and its template.
    set: Option<(usize, u16)>,
    /// Data records in `buf`.
    pending: u32,
    /// Flow records in `buf` (options records excluded).
    pending_flows: u64,
    /// Data records sent in this session (the next message's sequence number).
    seq: u32,
    /// When the templates were last sent; None: never in this session.
    templates_at: Option<Instant>,
    messages_since_templates: u64,
    /// Counters.
    pub stats: ExportStats,
    /// Counts of the capture, for the options record.
    pub drops: Drops,
    /// The last send error, for the summary.
    pub last_error: Option<String>,
    v4_len: usize,
    v6_len: usize,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("target", &self.target)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

fn resolve(addr: &str) -> std::io::Result<SocketAddr> {
    addr.to_socket_addrs()?.next().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, format!("{addr}: no address"))
    })
}

impl Exporter {
    /// An exporter to `target` that dials when it first sends (name resolution and
    /// connects happen then, on the caller's thread: the sender thread of an
    /// [`ExportQueue`]). A failed dial is counted with the records it cost and tried
    /// again with a backoff.
    pub fn new(target: &IpfixTarget) -> Self {
        let (mut v4_len, mut v6_len) = (rec_len(V4_FIELDS), rec_len(V6_FIELDS));
        if target.biflow {
            v4_len += rec_len(REVERSE_FIELDS);
            v6_len += rec_len(REVERSE_FIELDS);
        }
        Self {
            target: target.clone(),
            conn: Conn::Down,
            retry_at: Instant::now(),
            backoff: Duration::from_secs(1),
            dials: 0,
            buf: Vec::with_capacity(MAX_MESSAGE),
            set: None,
            pending: 0,
            pending_flows: 0,
            seq: 0,
            templates_at: None,
            messages_since_templates: 0,
            stats: ExportStats::default(),
            drops: Drops::default(),
            last_error: None,
            v4_len,
            v6_len,
        }
    }

    /// An exporter to `target`, dialled now. UDP: a connected socket (no collector needs
    /// to listen yet). TCP: a connection; failing it is an error.
    pub fn connect(target: &IpfixTarget) -> std::io::Result<Self> {
        let mut e = Self::new(target);
        e.dial()?;
        Ok(e)
    }

    /// Resolves the collector's name and opens the socket; a new TCP connection is a new
    /// session (sequence 0, templates first).
    fn dial(&mut self) -> std::io::Result<()> {
        let url = self.target.url();
        let named = |e: std::io::Error| {
            std::io::Error::new(e.kind(), format!("IPFIX collector {url}: {e}"))
        };
        let to = resolve(&self.target.addr).map_err(named)?;
        self.conn = match self.target.transport {
            Transport::Udp => {
                let any: SocketAddr = if to.is_ipv6() {
                    "[::]:0".parse().expect("literal")
                } else {
                    "0.0.0.0:0".parse().expect("literal")
                };
                let s = UdpSocket::bind(any).map_err(named)?;
                s.connect(to).map_err(named)?;
                Conn::Udp(s)
            }
            Transport::Tcp => {
                let timeout = if self.dials == 0 { 2000 } else { 500 };
                let s = TcpStream::connect_timeout(&to, Duration::from_millis(timeout))
                    .map_err(named)?;
                let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                let _ = s.set_nodelay(true);
                if self.dials > 0 {
                    self.stats.reconnects += 1;
                }
                self.templates_at = None;
                self.seq = 0;
                Conn::Tcp(s)
            }
        };
        self.dials += 1;
        self.backoff = Duration::from_secs(1);
        Ok(())
    }

    /// Where it exports.
    pub fn target(&self) -> &IpfixTarget {
        &self.target
    }

    fn templates_due(&self) -> bool {
        match self.templates_at {
            None => true,
            Some(t) => {
                self.target.transport == Transport::Udp
                    && (t.elapsed() >= TEMPLATE_REFRESH
                        || self.messages_since_templates >= TEMPLATE_EVERY)
            }
        }
    }

    /// Dials the collector when there is no socket and the backoff has passed.
    fn dial_if_due(&mut self) {
        if !matches!(self.conn, Conn::Down) || Instant::now() < self.retry_at {
            return;
        }
        if let Err(e) = self.dial() {
            self.retry_at = Instant::now() + self.backoff;
            self.backoff = (self.backoff * 2).min(Duration::from_secs(30));
            self.last_error = Some(e.to_string());
        }
    }

    /// Starts a message: header, then the templates and an options record when due.
    fn begin(&mut self) {
        self.dial_if_due();
        self.buf.clear();
        self.buf.extend_from_slice(&[0u8; 16]);
        self.set = None;
        self.pending = 0;
        self.pending_flows = 0;
        if self.templates_due() {
            self.put_templates();
            self.templates_at = Some(Instant::now());
            self.messages_since_templates = 0;
        }
    }

    fn put_field(&mut self, (id, len): (u16, u16)) {
        self.buf.extend_from_slice(&id.to_be_bytes());
        self.buf.extend_from_slice(&len.to_be_bytes());
        if id & 0x8000 != 0 {
            self.buf.extend_from_slice(&REVERSE_PEN.to_be_bytes());
        }
    }

    fn put_templates(&mut self) {
        // Template set (id 2): the IPv4 and IPv6 flow templates.
        let at = self.buf.len();
        self.buf.extend_from_slice(&[0, 2, 0, 0]);
        let rev: &[(u16, u16)] = if self.target.biflow {
            REVERSE_FIELDS
        } else {
            &[]
        };
        for (id, fields) in [(TEMPLATE_V4, V4_FIELDS), (TEMPLATE_V6, V6_FIELDS)] {
            let n = (fields.len() + rev.len()) as u16;
            self.buf.extend_from_slice(&id.to_be_bytes());
            self.buf.extend_from_slice(&n.to_be_bytes());
            for f in fields.iter().chain(rev) {
                self.put_field(*f);
            }
        }
        self.close_set_at(at);
        // Options template set (id 3): one scope field.
        let at = self.buf.len();
        self.buf.extend_from_slice(&[0, 3, 0, 0]);
        self.buf.extend_from_slice(&TEMPLATE_STATS.to_be_bytes());
        self.buf
            .extend_from_slice(&(STATS_FIELDS.len() as u16).to_be_bytes());
        self.buf.extend_from_slice(&1u16.to_be_bytes());
        for f in STATS_FIELDS {
            self.put_field(*f);
        }
        self.close_set_at(at);
        // The options record itself.
        let at = self.buf.len();
        self.buf.extend_from_slice(&TEMPLATE_STATS.to_be_bytes());
        self.buf.extend_from_slice(&[0, 0]);
        let s = self.stats;
        self.buf
            .extend_from_slice(&self.target.domain.to_be_bytes());
        for v in [
            s.messages,
            s.records,
            s.octets,
            s.records_lost + self.drops.export_full,
            self.drops.dropped,
            self.drops.ignored,
        ] {
            self.buf.extend_from_slice(&v.to_be_bytes());
        }
        debug_assert_eq!(self.buf.len() - at, 4 + STATS_LEN);
        self.close_set_at(at);
        self.pending += 1;
    }

    fn close_set_at(&mut self, at: usize) {
        let len = (self.buf.len() - at) as u16;
        self.buf[at + 2..at + 4].copy_from_slice(&len.to_be_bytes());
    }

    /// Adds a flow record, sending the message first if it would not fit.
    pub fn push(&mut self, r: &FlowRecord) {
        let (tid, len) = if r.v6 {
            (TEMPLATE_V6, self.v6_len)
        } else {
            (TEMPLATE_V4, self.v4_len)
        };
        if self.buf.is_empty() {
            self.begin();
        }
        let need = len
            + if self.set.map(|s| s.1) == Some(tid) {
                0
            } else {
                4
            };
        if self.buf.len() + need > MAX_MESSAGE && self.pending_flows > 0 {
            self.flush();
            self.begin();
        }
        if self.set.map(|s| s.1) != Some(tid) {
            if let Some((at, _)) = self.set {
                self.close_set_at(at);
            }
            self.set = Some((self.buf.len(), tid));
            self.buf.extend_from_slice(&tid.to_be_bytes());
            self.buf.extend_from_slice(&[0, 0]);
        }
        let b = &mut self.buf;
        if r.v6 {
            b.extend_from_slice(&r.src);
            b.extend_from_slice(&r.dst);
        } else {
            b.extend_from_slice(&r.src[..4]);
            b.extend_from_slice(&r.dst[..4]);
        }
        b.extend_from_slice(&r.sport.to_be_bytes());
        b.extend_from_slice(&r.dport.to_be_bytes());
        b.push(r.proto);
        b.extend_from_slice(&u16::from(r.tcp_flags).to_be_bytes());
        b.extend_from_slice(&r.vlan.to_be_bytes());
        b.extend_from_slice(&r.ingress.to_be_bytes());
        b.extend_from_slice(&r.octets.to_be_bytes());
        b.extend_from_slice(&r.packets.to_be_bytes());
        b.extend_from_slice(&r.start_ms.to_be_bytes());
        b.extend_from_slice(&r.end_ms.to_be_bytes());
        b.push(r.end.map_or(0, |e| e as u8));
        if self.target.biflow {
            b.extend_from_slice(&r.rev_octets.to_be_bytes());
            b.extend_from_slice(&r.rev_packets.to_be_bytes());
            b.extend_from_slice(&u16::from(r.rev_tcp_flags).to_be_bytes());
        }
        self.pending += 1;
        self.pending_flows += 1;
    }

    /// Finishes the message in the buffer (header, set length) and returns it.
    fn seal(&mut self, export_secs: u32) -> &[u8] {
        if let Some((at, _)) = self.set.take() {
            self.close_set_at(at);
        }
        let len = self.buf.len() as u16;
        let h = &mut self.buf[..16];
        h[0..2].copy_from_slice(&10u16.to_be_bytes());
        h[2..4].copy_from_slice(&len.to_be_bytes());
        h[4..8].copy_from_slice(&export_secs.to_be_bytes());
        h[8..12].copy_from_slice(&self.seq.to_be_bytes());
        h[12..16].copy_from_slice(&self.target.domain.to_be_bytes());
        &self.buf
    }

    /// Sends the message being built, if it holds records.
    pub fn flush(&mut self) {
        if self.buf.is_empty() || self.pending == 0 {
            self.buf.clear();
            return;
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as u32);
        self.seal(now);
        let sent = match &mut self.conn {
            Conn::Udp(s) => s.send(&self.buf).map(|_| ()),
            Conn::Tcp(s) if self.templates_at.is_some() => {
                let r = s.write_all(&self.buf);
                if r.is_err() {
                    // Dial again at the next message, with fresh templates.
                    self.conn = Conn::Down;
                    self.retry_at = Instant::now();
                    self.templates_at = None;
                }
                r
            }
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "not connected to the collector",
            )),
        };
        match sent {
            Ok(()) => {
                self.stats.messages += 1;
                self.stats.records += self.pending_flows;
                self.stats.octets += self.buf.len() as u64;
                self.seq = self.seq.wrapping_add(self.pending);
                self.messages_since_templates += 1;
            }
            Err(e) => {
                self.stats.send_errors += 1;
                self.stats.records_lost += self.pending_flows;
                self.last_error = Some(format!("{}: {e}", self.target.url()));
                if self.target.transport == Transport::Udp {
                    // The collector may have lost the templates too.
                    self.templates_at = None;
                }
            }
        }
        self.buf.clear();
        self.set = None;
        self.pending = 0;
        self.pending_flows = 0;
    }

    /// Sends what is pending, with a last options record carrying the final counts.
    pub fn finish(&mut self) {
        self.flush();
        if self.target.transport == Transport::Tcp || self.stats.messages > 0 {
            // One closing message: templates and the final statistics.
            self.templates_at = None;
            self.begin();
            self.flush();
        }
    }

    /// Drops the message being built, counting its flow records as not sent (a closing
    /// capture that could not wait for the collector).
    fn discard(&mut self) {
        self.stats.records_lost += self.pending_flows;
        self.buf.clear();
        self.set = None;
        self.pending = 0;
        self.pending_flows = 0;
    }
}

/// Flow records the sender thread's ring holds: at 54 to 72 bytes a record, about 1 MB of
/// IPFIX, a few seconds of a busy table; past it records are counted in `export_full`.
pub const EXPORT_QUEUE: usize = 16 * 1024;
/// How long [`ExportQueue::finish`] lets the sender send what it holds; then the rest is
/// counted as not sent, and after as long again the thread is left behind.
pub const FINISH_WAIT: Duration = Duration::from_secs(2);

/// What a flow table hands the sender thread.
#[derive(Clone, Copy, Debug)]
enum Item {
    /// One flow record.
    Flow(FlowRecord),
    /// Send what is pending; the capture's counts for the options record.
    Flush(Drops),
    /// Send what is pending and the closing options record, then end.
    Finish(Drops),
}

/// What the sender thread shows the flow table.
#[derive(Debug, Default)]
struct Shared {
    /// The exporter's counters and last error, as of its last message or idle moment.
    /// Written by the sender thread (per message, never per record), read at the end.
    seen: Mutex<(ExportStats, Option<String>)>,
    /// Set by the flow table when the capture cannot wait any longer; the sender counts
    /// what it still holds as not sent. Relaxed both sides: it carries no data, only a
    /// hint the sender polls between items.
    hurry: AtomicBool,
}

/// The flow table's end of an IPFIX export: a bounded ring to a sender thread that owns
/// the [`Exporter`]. [`ExportQueue::push`] never blocks, allocates or locks: a full ring
/// is a counted drop.
pub struct ExportQueue {
    target: IpfixTarget,
    /// Producer end; the sender thread holds the consumer.
    tx: rtrb::Producer<Item>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// Flow records the ring took.
    queued: u64,
    /// Flow records the ring had no room for.
    export_full: u64,
    /// Counts of the capture for the options record; [`ExportQueue::flush`] sends them.
    pub drops: Drops,
}

impl std::fmt::Debug for ExportQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportQueue")
            .field("target", &self.target)
            .field("queued", &self.queued)
            .field("export_full", &self.export_full)
            .finish_non_exhaustive()
    }
}

impl ExportQueue {
    /// Starts the sender thread for `target`; it resolves and dials the collector itself.
    pub fn start(target: &IpfixTarget) -> std::io::Result<Self> {
        Self::with_capacity(target, EXPORT_QUEUE)
    }

    /// As [`ExportQueue::start`], with a ring of `capacity` items.
    pub fn with_capacity(target: &IpfixTarget, capacity: usize) -> std::io::Result<Self> {
        let (tx, rx) = rtrb::RingBuffer::new(capacity.max(2));
        let shared = Arc::new(Shared::default());
        let exporter = Exporter::new(target);
        let seen = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("ipfix-send".into())
            .spawn(move || send_loop(exporter, rx, &seen))?;
        Ok(Self {
            target: target.clone(),
            tx,
            shared,
            thread: Some(thread),
            queued: 0,
            export_full: 0,
            drops: Drops::default(),
        })
    }

    /// Where it exports.
    pub fn target(&self) -> &IpfixTarget {
        &self.target
    }

    /// Hands a flow record to the sender, or counts it in `export_full` when the ring is
    /// full.
    pub fn push(&mut self, r: &FlowRecord) {
        match self.tx.push(Item::Flow(*r)) {
            Ok(()) => self.queued += 1,
            Err(_) => self.export_full += 1,
        }
    }

    fn drops_now(&self) -> Drops {
        Drops {
            export_full: self.export_full,
            ..self.drops
        }
    }

    /// Asks the sender to send what it holds. A full ring skips it: the sender is busy
    /// and sends as it goes.
    pub fn flush(&mut self) {
        let _ = self.tx.push(Item::Flush(self.drops_now()));
    }

    /// Sends what is queued and the closing options record, waiting at most
    /// [`FINISH_WAIT`] for the collector, then [`FINISH_WAIT`] more for the thread to
    /// count the rest as not sent; returns the counters and the last error. Every flow
    /// record pushed is in `records`, `records_lost` or `export_full`.
    pub fn finish(mut self) -> (ExportStats, Option<String>) {
        let deadline = Instant::now() + FINISH_WAIT;
        let mut finish = Item::Finish(self.drops_now());
        while let Err(rtrb::PushError::Full(v)) = self.tx.push(finish) {
            if Instant::now() >= deadline {
                self.shared.hurry.store(true, Ordering::Relaxed);
            }
            if Instant::now() >= deadline + FINISH_WAIT {
                break;
            }
            finish = v;
            std::thread::sleep(Duration::from_millis(1));
        }
        let ended = self.wait_for_sender(deadline);
        let (mut stats, err) = match self.shared.seen.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        };
        stats.export_full = self.export_full;
        if !ended {
            // Left behind: what it had not accounted yet is not sent.
            let accounted = stats.records + stats.records_lost;
            stats.records_lost += self.queued.saturating_sub(accounted);
        }
        (stats, err)
    }

    /// Waits for the sender thread to end: until `deadline` as it is, then with `hurry`
    /// set for [`FINISH_WAIT`] more. True when it ended (and was joined).
    fn wait_for_sender(&mut self, deadline: Instant) -> bool {
        let Some(t) = self.thread.take() else {
            return true;
        };
        while !t.is_finished() {
            let now = Instant::now();
            if now >= deadline {
                self.shared.hurry.store(true, Ordering::Relaxed);
            }
            if now >= deadline + FINISH_WAIT {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = t.join();
        true
    }
}

/// The sender thread: takes items off the ring, encodes and sends them, and publishes its
/// counters after each flush and whenever the ring runs dry. It polls (1 ms after work,
/// backing off to 20 ms when idle), so the flow table never wakes it.
fn send_loop(mut e: Exporter, mut rx: rtrb::Consumer<Item>, shared: &Shared) {
    let publish = |e: &Exporter| {
        let mut g = match shared.seen.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        g.0 = e.stats;
        if g.1 != e.last_error {
            g.1.clone_from(&e.last_error);
        }
    };
    let mut idle = Duration::from_millis(1);
    loop {
        let hurry = shared.hurry.load(Ordering::Relaxed);
        match rx.pop() {
            Ok(Item::Flow(_)) if hurry => {
                e.discard();
                e.stats.records_lost += 1;
            }
            Ok(Item::Flow(r)) => e.push(&r),
            Ok(Item::Flush(d)) => {
                e.drops = d;
                if hurry {
                    e.discard();
                } else {
                    e.flush();
                }
                publish(&e);
            }
            Ok(Item::Finish(d)) => {
                e.drops = d;
                if hurry {
                    e.discard();
                } else {
                    e.finish();
                }
                publish(&e);
                return;
            }
            Err(_) if rx.is_abandoned() => {
                e.discard();
                publish(&e);
                return;
            }
            Err(_) => {
                publish(&e);
                std::thread::sleep(idle);
                idle = (idle * 2).min(Duration::from_millis(20));
                continue;
            }
        }
        idle = Duration::from_millis(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp_pair(biflow: bool) -> (Exporter, UdpSocket) {
        let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        rx.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        let mut t = IpfixTarget::parse(&format!("ipfix://{}", rx.local_addr().expect("addr")))
            .expect("parse");
        t.biflow = biflow;
        t.domain = 0x0102_0304;
        (Exporter::connect(&t).expect("connect"), rx)
    }

    fn rec(i: u32) -> FlowRecord {
        let mut r = FlowRecord {
            v6: false,
            sport: 1024,
            dport: 5001,
            proto: 17,
            octets: 600,
            packets: 10,
            start_ms: 1_700_000_000_000,
            end_ms: 1_700_000_000_500,
            end: Some(EndCode::Idle),
            ingress: 7,
            ..Default::default()
        };
        r.src[..4].copy_from_slice(&[10, 0, 0, 1]);
        r.dst[..4].copy_from_slice(&i.to_be_bytes());
        r
    }

    #[test]
    fn test_parse() {
        let t = IpfixTarget::parse("ipfix://127.0.0.1:2055").expect("udp");
        assert_eq!(
            (t.transport, t.addr.as_str()),
            (Transport::Udp, "127.0.0.1:2055")
        );
        let t = IpfixTarget::parse("ipfix+tcp://collector").expect("tcp");
        assert_eq!(
            (t.transport, t.addr.as_str()),
            (Transport::Tcp, "collector:4739")
        );
        let t = IpfixTarget::parse("ipfix://[::1]:9995").expect("v6");
        assert_eq!(t.addr, "[::1]:9995");
        assert_eq!(t.url(), "ipfix://[::1]:9995");
        for bad in [
            "ipfix://",
            "ipfix://h:0",
            "ipfix://h:x",
            "ipfix://::1:5",
            "http://h:1",
            "flows.jsonl",
            "ipfix://a/b",
        ] {
            assert!(IpfixTarget::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn test_emit() {
        let (mut e, rx) = udp_pair(false);
        e.push(&rec(1));
        e.flush();
        let mut b = [0u8; 2048];
        let n = rx.recv(&mut b).expect("message");
        let m = &b[..n];
        assert_eq!(&m[0..2], &[0, 10]);
        assert_eq!(usize::from(u16::from_be_bytes([m[2], m[3]])), n);
        assert_eq!(&m[8..12], &[0, 0, 0, 0], "first sequence number");
        assert_eq!(&m[12..16], &[1, 2, 3, 4], "observation domain");
        // Sets: template (2), options template (3), options data (258), data (256).
        let mut at = 16;
        let mut sets = Vec::new();
        while at < n {
            let id = u16::from_be_bytes([m[at], m[at + 1]]);
            let len = usize::from(u16::from_be_bytes([m[at + 2], m[at + 3]]));
            assert!(len >= 4 && at + len <= n);
            sets.push((id, len));
            at += len;
        }
        assert_eq!(at, n);
        let ids: Vec<u16> = sets.iter().map(|s| s.0).collect();
        assert_eq!(ids, [2, 3, TEMPLATE_STATS, TEMPLATE_V4]);
        assert_eq!(sets[3].1, 4 + rec_len(V4_FIELDS));
        // The record: protocol at offset 12, counters, times.
        let r = &m[n - rec_len(V4_FIELDS)..];
        assert_eq!(&r[0..8], &[10, 0, 0, 1, 0, 0, 0, 1]);
        assert_eq!(r[12], 17);
        assert_eq!(u32::from_be_bytes([r[17], r[18], r[19], r[20]]), 7);
        assert_eq!(u64::from_be_bytes(r[21..29].try_into().expect("8")), 600);
        assert_eq!(r[53], 1, "idle");
        // The next message: sequence = the two data records before (options + flow),
        // no templates.
        e.push(&rec(2));
        e.flush();
        let n = rx.recv(&mut b).expect("message");
        assert_eq!(&b[8..12], &[0, 0, 0, 2]);
        assert_eq!(n, 16 + 4 + rec_len(V4_FIELDS));
        assert_eq!(e.stats.records, 2);
        assert_eq!(e.stats.messages, 2);
    }

    #[test]
    fn test_batches_under_mtu() {
        let (mut e, rx) = udp_pair(true);
        for i in 0..100 {
            let mut r = rec(i);
            if i % 3 == 0 {
                r.v6 = true;
                r.src = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
            }
            e.push(&r);
        }
        e.flush();
        let mut b = [0u8; 2048];
        let mut got = 0;
        let mut seq = 0u32;
        while got < 100 {
            let n = rx.recv(&mut b).expect("message");
            assert!(n <= MAX_MESSAGE, "{n}");
            assert_eq!(u32::from_be_bytes(b[8..12].try_into().expect("4")), seq);
            let mut at = 16;
            let mut recs = 0;
            while at < n {
                let id = u16::from_be_bytes([b[at], b[at + 1]]);
                let len = usize::from(u16::from_be_bytes([b[at + 2], b[at + 3]]));
                match id {
                    TEMPLATE_V4 => recs += (len - 4) / (rec_len(V4_FIELDS) + 18),
                    TEMPLATE_V6 => recs += (len - 4) / (rec_len(V6_FIELDS) + 18),
                    TEMPLATE_STATS => seq += 1,
                    _ => {}
                }
                at += len;
            }
            seq += recs as u32;
            got += recs;
        }
        assert_eq!(got, 100);
        assert_eq!(e.stats.records, 100);
    }

    #[test]
    fn test_unreachable_collector_is_counted() {
        let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let addr = rx.local_addr().expect("addr");
        drop(rx);
        let t = IpfixTarget::parse(&format!("ipfix://{addr}")).expect("parse");
        let mut e = Exporter::connect(&t).expect("connect");
        for round in 0..3 {
            e.push(&rec(round));
            e.flush();
        }
        // The first send may succeed (the ICMP error comes back later); the next fail.
        assert!(e.stats.send_errors >= 1, "{:?}", e.stats);
        assert_eq!(e.stats.records + e.stats.records_lost, 3);
        // TCP to a closed port: an error at connect, not a panic.
        let t = IpfixTarget::parse(&format!("ipfix+tcp://{addr}")).expect("parse");
        assert!(Exporter::connect(&t).is_err());
    }

    #[test]
    fn test_tcp_reconnects_after_the_collector_goes_away() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let t = IpfixTarget::parse(&format!("ipfix+tcp://{}", l.local_addr().expect("a")))
            .expect("parse");
        let mut e = Exporter::connect(&t).expect("connect");
        let (c, _) = l.accept().expect("accept");
        e.push(&rec(1));
        e.flush();
        assert_eq!(e.stats.messages, 1);
        drop(c);
        // Writes to a reset connection fail within a few tries; then it dials again.
        for i in 0..20 {
            e.push(&rec(i));
            e.flush();
            if e.stats.send_errors > 0 && e.stats.reconnects > 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(e.stats.send_errors > 0, "{:?}", e.stats);
        assert!(e.stats.reconnects > 0, "{:?}", e.stats);
        let (mut c, _) = l.accept().expect("second connection");
        e.push(&rec(99));
        e.flush();
        c.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        let mut h = [0u8; 20];
        std::io::Read::read_exact(&mut c, &mut h).expect("message");
        assert_eq!(&h[0..2], &[0, 10]);
        assert_eq!(
            &h[16..18],
            &[0, 2],
            "a new connection starts with templates"
        );
    }

    #[test]
    fn test_queue_sends_through_the_sender_thread() {
        let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        rx.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        let t = IpfixTarget::parse(&format!("ipfix://{}", rx.local_addr().expect("addr")))
            .expect("parse");
        let mut q = ExportQueue::start(&t).expect("start");
        for i in 0..100 {
            q.push(&rec(i));
        }
        let (st, err) = q.finish();
        assert_eq!((st.records, st.records_lost, st.export_full), (100, 0, 0));
        assert_eq!(err, None);
        let mut b = [0u8; 2048];
        let n = rx.recv(&mut b).expect("message");
        assert_eq!(&b[0..2], &[0, 10]);
        assert!(n > 16);
    }

    #[test]
    fn test_queue_to_a_collector_that_never_reads_drops_and_counts() {
        // The collector accepts every connection and never reads one.
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let t = IpfixTarget::parse(&format!("ipfix+tcp://{}", l.local_addr().expect("a")))
            .expect("parse");
        let done = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&done);
        let held = std::thread::spawn(move || {
            let mut conns = Vec::new();
            let _ = l.set_nonblocking(true);
            let end = Instant::now() + Duration::from_secs(12);
            while Instant::now() < end && !stop.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((c, _)) => conns.push(c),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            conns.len()
        });
        // A ring of 128k records (7 MB of IPFIX) outgrows the sockets' buffers: the sender
        // blocks in a write and finish has to hurry it.
        let mut q = ExportQueue::with_capacity(&t, 128 * 1024).expect("start");
        // 400k records (about 22 MB of IPFIX): far more than the socket buffers hold.
        let n = 400_000u32;
        let t0 = Instant::now();
        for i in 0..n {
            q.push(&rec(i));
        }
        let pushing = t0.elapsed();
        let (st, _) = q.finish();
        let total = t0.elapsed();
        done.store(true, Ordering::Relaxed);
        assert!(pushing < Duration::from_secs(1), "pushing took {pushing:?}");
        // FINISH_WAIT for the collector, FINISH_WAIT for the rest, then a write timeout.
        assert!(
            total < Duration::from_secs(6),
            "finish took {total:?}: {st:?}"
        );
        assert!(st.export_full > 0, "{st:?}");
        assert_eq!(
            st.records + st.records_lost + st.export_full,
            u64::from(n),
            "{st:?}"
        );
        assert!(held.join().expect("collector") >= 1);
    }

    #[test]
    fn test_queue_to_a_closed_port_counts_the_records_lost() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        drop(l);
        let t = IpfixTarget::parse(&format!("ipfix+tcp://{addr}")).expect("parse");
        let mut q = ExportQueue::start(&t).expect("start: the dial is the sender's");
        for i in 0..10 {
            q.push(&rec(i));
        }
        let (st, err) = q.finish();
        assert_eq!((st.records, st.records_lost), (0, 10), "{st:?}");
        assert!(err.is_some_and(|e| e.contains(&t.url())));
    }
}
