//! Flow accounting (`--flows FILE`, `--flows ipfix://HOST:PORT`): a flow table per stage
//! thread, keyed by the symmetric 5-tuple with the VLAN, counting packets, bytes, first and
//! last timestamps and TCP flags in each direction. A flow ends on an idle timeout, an
//! active timeout, FIN from both sides, RST, eviction from a full table, or the end of the
//! capture; each end writes one JSON line and/or exports IPFIX records
//! ([`crate::sink::ipfix`]: one per direction, or one biflow). Memory is bounded by the
//! table size; evictions are counted.
//!
//! The table keeps its flows in the order of their last packet (a linked hash map: each
//! packet moves its flow to the back), so the flow a full table evicts is at the front,
//! and the idle sweep reads from the front until the first flow that is still active:
//! both are O(1) per flow ended, whatever the table holds, so a SYN flood costs no more
//! per packet than any other traffic.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use corecap_wire::flow::FlowKey;
use corecap_wire::Link;
use hashlink::LinkedHashMap;

use crate::packet::Packet;
use crate::sink::ipfix::{EndCode, ExportQueue, ExportStats, FlowRecord, IpfixTarget};

/// Where a capture's flow records go: a JSON lines file per stage thread, an IPFIX
/// collector, or both.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowOutput {
    /// JSON lines, `FILE.gGmM` per stage thread (exactly FILE for an attached consumer).
    pub file: Option<PathBuf>,
    /// IPFIX collector.
    pub ipfix: Option<IpfixTarget>,
}

impl FlowOutput {
    /// JSON lines to `path` only.
    pub fn file(path: PathBuf) -> Self {
        Self {
            file: Some(path),
            ipfix: None,
        }
    }
}

/// Timeouts and size of a flow table.
#[derive(Clone, Copy, Debug)]
pub struct FlowConfig {
    /// End a flow after this long without packets (ns).
    pub idle_ns: u64,
    /// End a flow this long after its first packet, and start a new record (ns).
    pub active_ns: u64,
    /// Most flows held at once.
    pub capacity: usize,
}

impl Default for FlowConfig {
    fn default() -> Self {
        Self {
            idle_ns: 30_000_000_000,
            active_ns: 300_000_000_000,
            capacity: 1 << 20,
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Rec {
    packets: [u64; 2],
    bytes: [u64; 2],
    first_ns: u64,
    last_ns: u64,
    /// First and last packet of each direction (0 while it has none).
    dir_first: [u64; 2],
    dir_last: [u64; 2],
    flags: [u8; 2],
    fin: [bool; 2],
    iface: u32,
}

/// Why a flow record was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// No packet for the idle timeout.
    Idle,
    /// Open for the active timeout.
    Active,
    /// FIN seen in both directions.
    Fin,
    /// RST seen.
    Rst,
    /// Pushed out of a full table.
    Evicted,
    /// The capture ended.
    Exit,
}

impl EndReason {
    fn as_str(self) -> &'static str {
        match self {
            EndReason::Idle => "idle",
            EndReason::Active => "active",
            EndReason::Fin => "fin",
            EndReason::Rst => "rst",
            EndReason::Evicted => "evicted",
            EndReason::Exit => "exit",
        }
    }

    fn code(self) -> EndCode {
        match self {
            EndReason::Idle => EndCode::Idle,
            EndReason::Active => EndCode::Active,
            EndReason::Fin | EndReason::Rst => EndCode::EndOfFlow,
            EndReason::Evicted => EndCode::LackOfResources,
            EndReason::Exit => EndCode::Forced,
        }
    }
}

/// Counters of a flow table.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct FlowStats {
    /// Records written.
    pub records: u64,
    /// Flows pushed out of a full table.
    pub evicted: u64,
    /// Packets that are not IP (not accounted in any flow).
    pub non_ip: u64,
    /// IPFIX observation domain id, when exporting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observation_domain: Option<u32>,
    /// IPFIX exporter counters, when exporting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipfix: Option<ExportStats>,
    /// The last IPFIX send error, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipfix_error: Option<String>,
}

/// A flow table writing JSON lines and/or exporting IPFIX.
#[derive(Debug)]
pub struct FlowTable {
    cfg: FlowConfig,
    /// Open flows, least recently seen first.
    map: LinkedHashMap<FlowKey, Rec>,
    out: Option<BufWriter<File>>,
    member: String,
    /// The ring to the IPFIX sender thread.
    export: Option<ExportQueue>,
    /// ifindex of each input of the capture (ingressInterface), 0 when unknown.
    ifindex: Vec<u32>,
    /// Its counters.
    pub stats: FlowStats,
    next_sweep: u64,
}

/// TCP flags of an IP frame of framing `link`, if it is TCP (0 otherwise).
fn tcp_flags(link: Link, frame: &[u8]) -> u8 {
    let Ok(l2) = link.network(frame) else {
        return 0;
    };
    let o = l2.l3_offset;
    let (proto, l4) = match l2.ethertype {
        0x0800 => match (frame.get(o + 9), frame.get(o)) {
            (Some(p), Some(v)) => (*p, o + usize::from(v & 0x0f) * 4),
            _ => return 0,
        },
        0x86dd => match frame.get(o + 6) {
            Some(p) => (*p, o + 40),
            None => return 0,
        },
        _ => return 0,
    };
    if proto != 6 {
        return 0;
    }
    frame.get(l4 + 13).copied().unwrap_or(0)
}

impl FlowTable {
    /// A table writing to `path`, a new file (never through a link, never over a file,
    /// mode 0640); `member` names the writer in each record.
    pub fn create(path: &Path, member: &str, cfg: FlowConfig) -> std::io::Result<Self> {
        Self::open(Some(path), None, member, Vec::new(), cfg)
    }

    /// A table writing JSON lines to `path` (as [`FlowTable::create`]) and/or exporting
    /// to `ipfix`; `ifindex` maps the capture's inputs to interface indexes.
    pub fn open(
        path: Option<&Path>,
        ipfix: Option<&IpfixTarget>,
        member: &str,
        ifindex: Vec<u32>,
        cfg: FlowConfig,
    ) -> std::io::Result<Self> {
        let out = match path {
            Some(p) => Some(BufWriter::new(Self::new_file(p)?)),
            None => None,
        };
        let export = match ipfix {
            Some(t) => Some(ExportQueue::start(t)?),
            None => None,
        };
        Ok(Self {
            cfg,
            map: LinkedHashMap::new(),
            out,
            // Escaped once, as a JSON string.
            member: serde_json::to_string(member).unwrap_or_else(|_| "\"\"".into()),
            stats: FlowStats {
                observation_domain: ipfix.map(|t| t.domain),
                ..Default::default()
            },
            next_sweep: 0,
            export,
            ifindex,
        })
    }

    fn new_file(path: &Path) -> std::io::Result<File> {
        use std::os::unix::fs::OpenOptionsExt;
        /// `O_NOFOLLOW` on Linux.
        const O_NOFOLLOW: i32 = 0o400000;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o640)
            .custom_flags(O_NOFOLLOW)
            .open(path);
        f.map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display()))
        })
    }

    /// Packets lost before the table (ring, pipe, stage), for the exporter's options
    /// record.
    pub fn set_dropped(&mut self, n: u64) {
        if let Some(e) = &mut self.export {
            e.drops.dropped = n;
        }
    }

    /// Asks the IPFIX sender to send the records waiting in its current message (the
    /// stage calls it when it goes idle, so records do not wait for the next packet).
    pub fn flush_export(&mut self) {
        if let Some(e) = &mut self.export {
            e.drops.ignored = self.stats.non_ip;
            e.flush();
        }
    }

    /// Accounts one packet.
    pub fn packet(&mut self, p: &Packet<'_>) {
        let Ok(k) = p.link.flow_key(p.data, p.vlan.map(|t| t & 0x0fff)) else {
            self.stats.non_ip += 1;
            return;
        };
        let c = k.canonical();
        let dir = usize::from(c != k);
        let now = p.ts_ns;
        if now >= self.next_sweep {
            self.sweep(now);
            self.next_sweep = now + 1_000_000_000;
            self.flush_export();
        }
        let flags = tcp_flags(p.link, p.data);
        if self.map.contains_key(&c) {
            self.map.to_back(&c);
        } else {
            if self.map.len() >= self.cfg.capacity {
                self.evict_oldest();
            }
            self.map.insert(
                c,
                Rec {
                    first_ns: now,
                    iface: p.iface,
                    ..Default::default()
                },
            );
        }
        let Some(r) = self.map.get_mut(&c) else {
            return;
        };
        r.packets[dir] += 1;
        r.bytes[dir] += u64::from(p.wire_len);
        r.last_ns = r.last_ns.max(now);
        if r.dir_first[dir] == 0 {
            r.dir_first[dir] = now;
        }
        r.dir_last[dir] = r.dir_last[dir].max(now);
        r.flags[dir] |= flags;
        let mut end = None;
        if flags & 0x04 != 0 {
            end = Some(EndReason::Rst);
        } else if flags & 0x01 != 0 {
            r.fin[dir] = true;
            if r.fin[0] && r.fin[1] {
                end = Some(EndReason::Fin);
            }
        } else if now.saturating_sub(r.first_ns) >= self.cfg.active_ns {
            end = Some(EndReason::Active);
        }
        if let Some(why) = end {
            if let Some(r) = self.map.remove(&c) {
                self.emit(&c, &r, why);
            }
        }
    }

    /// Ends the idle flows: those at the front, up to the first one still active. (Packets
    /// of several workers may arrive slightly out of time order; a flow seen a little
    /// out of order ends at a later sweep.)
    fn sweep(&mut self, now: u64) {
        let idle = self.cfg.idle_ns;
        while self
            .map
            .front()
            .is_some_and(|(_, r)| now.saturating_sub(r.last_ns) >= idle)
        {
            if let Some((k, r)) = self.map.pop_front() {
                self.emit(&k, &r, EndReason::Idle);
            }
        }
    }

    /// Ends the least recently seen flow, to make room.
    fn evict_oldest(&mut self) {
        if let Some((k, r)) = self.map.pop_front() {
            self.stats.evicted += 1;
            self.emit(&k, &r, EndReason::Evicted);
        }
    }

    /// Writes one record: formatted straight into the file's buffer (no JSON tree, no
    /// allocation per record; the member name was escaped once, at creation), and/or
    /// encoded into the exporter's message.
    fn emit(&mut self, k: &FlowKey, r: &Rec, why: EndReason) {
        if let Some(out) = &mut self.out {
            write_json(out, &self.member, k, r, why);
        }
        if let Some(e) = &mut self.export {
            let ingress = self.ifindex.get(r.iface as usize).copied().unwrap_or(0);
            export_ipfix(e, ingress, k, r, why);
        }
        self.stats.records += 1;
    }

    /// Ends every open flow, flushes the file and sends the last IPFIX messages.
    pub fn finish(mut self) -> std::io::Result<FlowStats> {
        while let Some((k, r)) = self.map.pop_front() {
            self.emit(&k, &r, EndReason::Exit);
        }
        if let Some(mut e) = self.export.take() {
            e.drops.ignored = self.stats.non_ip;
            let (stats, error) = e.finish();
            self.stats.ipfix = Some(stats);
            self.stats.ipfix_error = error;
        }
        if let Some(out) = &mut self.out {
            out.flush()?;
        }
        Ok(self.stats)
    }
}

/// Writes one ended flow as a JSON line; `member` is already a JSON string.
fn write_json(out: &mut impl Write, member: &str, k: &FlowKey, r: &Rec, why: EndReason) {
    let _ = writeln!(
        out,
        concat!(
            "{{\"type\":\"flow\",\"member\":{},\"proto\":{},\"vlan\":{},\"src\":\"{}\",",
            "\"sport\":{},\"dst\":\"{}\",\"dport\":{},\"packets_fwd\":{},\"bytes_fwd\":{},",
            "\"packets_rev\":{},\"bytes_rev\":{},\"first_ns\":{},\"last_ns\":{},",
            "\"first_fwd_ns\":{},\"last_fwd_ns\":{},\"first_rev_ns\":{},\"last_rev_ns\":{},",
            "\"tcp_flags\":{},\"end\":\"{}\"}}"
        ),
        member,
        k.proto,
        k.vlan,
        k.src_ip(),
        k.sport,
        k.dst_ip(),
        k.dport,
        r.packets[0],
        r.bytes[0],
        r.packets[1],
        r.bytes[1],
        r.first_ns,
        r.last_ns,
        r.dir_first[0],
        r.dir_last[0],
        r.dir_first[1],
        r.dir_last[1],
        r.flags[0] | r.flags[1],
        why.as_str()
    );
}

/// Sends one ended flow to the IPFIX exporter: one biflow record (RFC 5103), or one record
/// per direction that saw packets, each with its own times.
fn export_ipfix(e: &mut ExportQueue, ingress: u32, k: &FlowKey, r: &Rec, why: EndReason) {
    let base = FlowRecord {
        v6: !k.is_v4(),
        proto: k.proto,
        vlan: k.vlan,
        ingress,
        end: Some(why.code()),
        ..Default::default()
    };
    if e.target().biflow {
        e.push(&FlowRecord {
            src: k.src,
            dst: k.dst,
            sport: k.sport,
            dport: k.dport,
            tcp_flags: r.flags[0],
            octets: r.bytes[0],
            packets: r.packets[0],
            start_ms: r.first_ns / 1_000_000,
            end_ms: r.last_ns / 1_000_000,
            rev_octets: r.bytes[1],
            rev_packets: r.packets[1],
            rev_tcp_flags: r.flags[1],
            ..base
        });
    } else {
        // One record per direction that saw packets, each with its own times.
        for d in 0..2 {
            if r.packets[d] == 0 {
                continue;
            }
            let (src, dst, sport, dport) = if d == 0 {
                (k.src, k.dst, k.sport, k.dport)
            } else {
                (k.dst, k.src, k.dport, k.sport)
            };
            e.push(&FlowRecord {
                src,
                dst,
                sport,
                dport,
                tcp_flags: r.flags[d],
                octets: r.bytes[d],
                packets: r.packets[d],
                start_ms: r.dir_first[d] / 1_000_000,
                end_ms: r.dir_last[d] / 1_000_000,
                ..base
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corecap_lab::gen::frame::{FrameSpec, Proto};

    /// `flows` flows of 64-byte frames, one packet of each in turn.
    fn spec(flows: u32, proto: Proto, bidir: bool) -> FrameSpec {
        FrameSpec {
            size: 64,
            flows,
            proto,
            vlan: None,
            bidir,
            base: 0,
            burst: 1,
        }
    }

    fn frames(spec: FrameSpec, n: u64) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                let mut b = vec![0u8; 2048];
                let len = spec.fill(i, &mut b);
                b.truncate(len);
                b
            })
            .collect()
    }

    fn read(path: &Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(path)
            .expect("read")
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect()
    }

    #[test]
    fn test_flows_per_direction_and_timeouts() {
        let dir = std::env::temp_dir().join(format!("corecap-flows-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("f.jsonl");
        let cfg = FlowConfig {
            idle_ns: 5_000_000_000,
            active_ns: u64::MAX,
            capacity: 3,
        };
        let mut t = FlowTable::create(&path, "g0m0", cfg).expect("create");
        for (i, f) in frames(spec(2, Proto::Tcp, true), 40).iter().enumerate() {
            t.packet(&Packet::ethernet(1_000 + i as u64, f));
        }
        // A third flow 10 s later: the first two go idle.
        let f = &frames(spec(3, Proto::Udp, false), 3)[2];
        t.packet(&Packet::ethernet(10_000_000_000, f));
        let stats = t.finish().expect("finish");
        let recs = read(&path);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(stats.records, 3);
        let idle: Vec<&serde_json::Value> = recs.iter().filter(|r| r["end"] == "idle").collect();
        assert_eq!(idle.len(), 2);
        for r in idle {
            assert_eq!(
                (r["packets_fwd"].as_u64(), r["packets_rev"].as_u64()),
                (Some(10), Some(10)),
                "{r}"
            );
            assert_eq!(r["bytes_fwd"].as_u64(), Some(600));
            assert_eq!(r["tcp_flags"].as_u64(), Some(0x18));
            assert!(r["first_fwd_ns"].as_u64() <= r["last_fwd_ns"].as_u64());
            assert!(r["first_rev_ns"].as_u64() > r["first_fwd_ns"].as_u64());
        }
        assert!(recs.iter().any(|r| r["end"] == "exit" && r["proto"] == 17));
    }

    /// Real captures of Linux cooked v2, BSD NULL and NFLOG (crates/cli/tests/data/real):
    /// every packet is accounted in a flow, none is non-IP, and the TCP conversation of
    /// the SLL2 file is one flow with both directions and their flags.
    #[test]
    fn test_flows_of_real_captures_of_other_link_types() {
        let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/data/real");
        let dir = std::env::temp_dir().join(format!("corecap-flows-real-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        for name in ["simple_http_sll2.pcap", "quic_vn.pcap", "nflog.pcap"] {
            let path = dir.join(format!("{name}.jsonl"));
            let mut t = FlowTable::create(&path, "g0m0", FlowConfig::default()).expect("create");
            let mut r = corecap_wire::CaptureReader::open(&real.join(name)).expect("open");
            let mut n = 0u64;
            while let Some(rec) = r.next_packet().expect("read") {
                n += 1;
                t.packet(&Packet {
                    ts_ns: rec.ts_ns,
                    data: rec.data,
                    wire_len: rec.orig_len,
                    iface: 0,
                    queue: None,
                    vlan: None,
                    link: corecap_wire::Link::of(rec.linktype),
                });
            }
            let stats = t.finish().expect("finish");
            let recs = read(&path);
            assert_eq!(stats.non_ip, 0, "{name}");
            let counted: u64 = recs
                .iter()
                .map(|r| {
                    r["packets_fwd"].as_u64().unwrap_or(0) + r["packets_rev"].as_u64().unwrap_or(0)
                })
                .sum();
            assert_eq!(counted, n, "{name}: {recs:?}");
            if name == "simple_http_sll2.pcap" {
                // The conversation ends on FIN from both sides (a last ACK may open another
                // record): SYN and FIN were seen through the cooked header, both ways.
                let whole = recs.iter().any(|r| {
                    r["proto"] == 6
                        && r["end"] == "fin"
                        && r["packets_fwd"].as_u64() > Some(0)
                        && r["packets_rev"].as_u64() > Some(0)
                        && r["tcp_flags"].as_u64().unwrap_or(0) & 0x03 == 0x03
                });
                assert!(whole, "{recs:?}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn test_full_table_evicts_the_least_recently_seen() {
        let fs = frames(spec(3, Proto::Udp, false), 3);
        let dir = std::env::temp_dir().join(format!("corecap-evict-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("f.jsonl");
        let _ = std::fs::remove_file(&path);
        let cfg = FlowConfig {
            capacity: 2,
            ..Default::default()
        };
        let mut t = FlowTable::create(&path, "g0m0", cfg).expect("create");
        // Flows 0, 1, 0 again, then 2: the table is full and flow 1 is the least recently
        // seen, though flow 0 started first.
        for (i, f) in [0usize, 1, 0, 2].into_iter().enumerate() {
            t.packet(&Packet::ethernet(1_000 + i as u64, &fs[f]));
        }
        assert_eq!(t.stats.evicted, 1);
        let stats = t.finish().expect("finish");
        assert_eq!(stats.records, 3);
        let recs = read(&path);
        assert_eq!(recs[0]["end"], "evicted");
        assert_eq!(recs[0]["dst"], "10.1.0.1", "{}", recs[0]);
        assert_eq!(recs[1]["dst"], "10.1.0.0");
        assert_eq!(recs[1]["packets_fwd"], 2);
        std::fs::remove_dir_all(&dir).expect("clean");
    }

    /// An ICMP echo and its reply, Ethernet + IPv4.
    fn icmp(src: [u8; 4], dst: [u8; 4], kind: u8) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&28u16.to_be_bytes());
        f[22] = 64;
        f[23] = 1;
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        f[34] = kind;
        f
    }

    #[test]
    fn test_ipfix_icmp_records_per_direction_carry_the_protocol() {
        use crate::sink::ipfix::{IpfixTarget, TEMPLATE_V4};
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .expect("timeout");
        let mut t = IpfixTarget::parse(&format!("ipfix://{}", rx.local_addr().expect("a")))
            .expect("target");
        t.domain = 7;
        let mut table = FlowTable::open(None, Some(&t), "g0m0", vec![42], FlowConfig::default())
            .expect("table");
        let (a, b) = ([10, 0, 0, 2], [10, 0, 0, 1]);
        // Requests from a at 1.000 s and 1.002 s, replies from b at 1.001 s and 1.003 s.
        for (i, f) in [icmp(a, b, 8), icmp(b, a, 0), icmp(a, b, 8), icmp(b, a, 0)]
            .iter()
            .enumerate()
        {
            table.packet(&Packet::ethernet(1_000_000_000 + i as u64 * 1_000_000, f));
        }
        let st = table.finish().expect("finish");
        assert_eq!(st.ipfix.expect("stats").records, 2);
        let mut recs = Vec::new();
        while recs.len() < 2 {
            let mut m = [0u8; 1500];
            let n = rx.recv(&mut m).expect("message");
            let mut at = 16;
            while at < n {
                let id = u16::from_be_bytes([m[at], m[at + 1]]);
                let len = usize::from(u16::from_be_bytes([m[at + 2], m[at + 3]]));
                if id == TEMPLATE_V4 {
                    recs.extend(m[at + 4..at + len].chunks(54).map(<[u8]>::to_vec));
                }
                at += len;
            }
        }
        let ms = |r: &[u8], o: usize| u64::from_be_bytes(r[o..o + 8].try_into().expect("8"));
        for r in &recs {
            assert_eq!(r[12], 1, "protocolIdentifier is ICMP");
            assert_eq!(u32::from_be_bytes(r[17..21].try_into().expect("4")), 42);
            assert_eq!(ms(r, 29), 2, "packets");
            assert!(ms(r, 37) <= ms(r, 45), "start after end");
            assert_eq!(r[53], 4, "exported at the end");
        }
        // Each direction has its own times: b's replies start 1 ms after a's requests.
        let from = |ip: [u8; 4]| recs.iter().find(|r| r[0..4] == ip).expect("direction");
        assert_eq!((ms(from(a), 37), ms(from(a), 45)), (1000, 1002));
        assert_eq!((ms(from(b), 37), ms(from(b), 45)), (1001, 1003));
    }
}
