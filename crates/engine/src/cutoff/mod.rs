//! Per-flow cutoff (`--flow-cutoff SIZE`, `--cutoff 'FILTER=SIZE|none'`): the first bytes
//! of every connection are recorded, the rest of a long transfer is counted and left out,
//! as Time Machine does (Kornexl et al., IMC 2005; Maier et al., SIGCOMM 2008).
//!
//! A connection is the index's flow key made canonical ([`FlowKey::canonical`]), so both
//! directions count together. Its packets are written until the payload seen (by the IP
//! header's lengths, both directions) passes its limit: the packet that passes it is
//! written, the ones after are not. TCP packets with SYN, FIN or RST are always written,
//! so every connection's start and end stay on record; frames that are not IP (or do not
//! parse) are always written.
//!
//! The limit is that of the first class whose tcpdump filter matches the flow's first
//! packet seen (each filter compiled once, per interface, at start; run once per flow,
//! never per packet), else `--flow-cutoff`; `none` is no limit.
//!
//! Each worker owns a [`Cutoff`] with its own [`table::FlowTable`] (the fanout keeps a
//! flow on one worker): a bounded table with an idle timeout. A flow pushed out of a full
//! bucket, or idle past the timeout, starts again from zero when it comes back: the table
//! errs on keeping packets, never on cutting them. Evictions are counted.
//!
//! Holds: a flow that must not be cut from some moment on is never cut from then on. The
//! worker that owns it can say so ([`Cutoff::hold`]); and with the recording's holds given
//! ([`CutoffConfig::holds`]: `serve`'s holds, which Suricata's alerts make too), a flow asks
//! them by its Community ID when its cut begins and again after each [`RECHECK`] bytes
//! it goes on: a hold placed since (an alert on a long transfer) stops the cut from the
//! next packet on. The ask is once per flow and quarter MiB, never per packet; a slot
//! keeps its state in its limit ([`CUTTING`]), so the table's slot stays one cache line.

mod table;

use std::sync::Arc;
use std::time::Duration;

use corecap_wire::pcapng::InterfaceDesc;
use corecap_wire::transport::{TCP_FIN, TCP_RST, TCP_SYN};
use corecap_wire::{FlowKey, Transport};

use crate::packet::Packet;
use crate::steer::filter::{compile_filter, FilterError, Meta, Program};
use table::{FlowTable, Found};

/// A limit that never cuts.
const NEVER: u64 = u64::MAX;

/// The top bit of a slot's limit: the flow is being cut, until its payload seen reaches the
/// rest of the limit, when the holds are asked again.
const CUTTING: u64 = 1 << 63;

/// Payload bytes a cut flow goes on for between two asks of the holds.
pub const RECHECK: u64 = 256 << 10;

/// One `--cutoff 'FILTER=SIZE|none'` class, as typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CutoffClass {
    /// The tcpdump expression that picks the class's flows.
    pub filter: String,
    /// Payload bytes kept per flow; None: never cut.
    pub limit: Option<u64>,
}

impl CutoffClass {
    /// Parses `FILTER=SIZE` or `FILTER=none` (split at the last `=`; sizes as `15k`, `1M`).
    pub fn parse(s: &str) -> Result<CutoffClass, String> {
        let (filter, size) = s
            .rsplit_once('=')
            .ok_or_else(|| format!("--cutoff '{s}': expected FILTER=SIZE or FILTER=none"))?;
        let filter = filter.trim();
        if filter.is_empty() {
            return Err(format!("--cutoff '{s}': the filter before '=' is empty"));
        }
        let limit = match size.trim() {
            "none" => None,
            n => Some(crate::limits::size(n, "--cutoff").map_err(|e| e.to_string())?),
        };
        Ok(CutoffClass {
            filter: filter.to_owned(),
            limit,
        })
    }
}

/// The cutoff a capture is asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CutoffConfig {
    /// `--flow-cutoff`: payload bytes kept per flow that no class picks; None: not cut.
    pub default: Option<u64>,
    /// `--cutoff` classes, first match wins.
    pub classes: Vec<CutoffClass>,
    /// Flows each worker follows at once (`--cutoff-flows`).
    pub flows: usize,
    /// A flow without packets for this long starts again from zero (`--cutoff-idle`).
    pub idle: Duration,
    /// The recording's holds, asked before a flow is cut (see the module doc).
    pub holds: Option<HeldFlows>,
}

/// The holds a cutoff asks ([`corecap_store::keep::hold::Holds`]), compared by identity.
#[derive(Clone, Debug)]
pub struct HeldFlows(pub Arc<corecap_store::keep::hold::Holds>);

impl PartialEq for HeldFlows {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for HeldFlows {}

impl CutoffConfig {
    /// 65,536 flows per worker (4 MiB), forgotten after 120 s without a packet.
    pub const DEFAULT_FLOWS: usize = 1 << 16;
    /// See [`CutoffConfig::DEFAULT_FLOWS`].
    pub const DEFAULT_IDLE: Duration = Duration::from_secs(120);

    /// Whether any flow can be cut at all.
    pub fn cuts(&self) -> bool {
        self.default.is_some() || self.classes.iter().any(|c| c.limit.is_some())
    }
}

/// A `--cutoff` class whose filter did not compile (the message names the filter).
#[derive(Debug, thiserror::Error)]
#[error("--cutoff: {why}")]
pub struct CutoffError {
    /// Why its filter did not compile.
    pub why: FilterError,
}

impl CutoffError {
    /// Whether the machine is at fault (libpcap missing) rather than the filter.
    pub fn is_system(&self) -> bool {
        self.why.is_system()
    }
}

/// The classes compiled for each interface of a capture, shared by its workers.
#[derive(Debug)]
pub struct Classes {
    /// Per interface (a packet's `iface`), the compiled classes and their limits.
    by_iface: Vec<Vec<(Program, u64)>>,
    default: u64,
    flows: usize,
    idle_ns: u64,
    holds: Option<HeldFlows>,
}

impl Classes {
    /// Compiles every class for each interface's link type, once.
    pub fn compile(
        cfg: &CutoffConfig,
        ifaces: &[InterfaceDesc],
        snaplen: u32,
    ) -> Result<Arc<Classes>, CutoffError> {
        let mut by_iface = Vec::with_capacity(ifaces.len());
        for i in ifaces {
            let mut classes = Vec::with_capacity(cfg.classes.len());
            for c in &cfg.classes {
                let p = compile_filter(i.linktype, snaplen, &c.filter)
                    .map_err(|why| CutoffError { why })?;
                classes.push((p, c.limit.unwrap_or(NEVER)));
            }
            by_iface.push(classes);
        }
        Ok(Arc::new(Classes {
            by_iface,
            default: cfg.default.unwrap_or(NEVER),
            flows: cfg.flows,
            idle_ns: u64::try_from(cfg.idle.as_nanos()).unwrap_or(u64::MAX),
            holds: cfg.holds.clone(),
        }))
    }

    /// The limit of the flow whose first packet is `p`.
    fn limit(&self, p: &Packet<'_>) -> u64 {
        let meta = Meta {
            vlan: p.vlan,
            queue: p.queue.unwrap_or(0),
            protocol: 0,
        };
        let classes = self.by_iface.get(p.iface as usize).map_or(&[][..], |c| c);
        classes
            .iter()
            .find(|(f, _)| f.run(p.data, p.wire_len, &meta) != 0)
            .map_or(self.default, |&(_, limit)| limit)
    }

    /// Whether a hold names the flow `key` (canonical) at `ts_ns`, by its Community ID.
    fn held(&self, key: &FlowKey, ts_ns: u64) -> bool {
        self.holds.as_ref().is_some_and(|h| {
            let id = corecap_wire::community_id::community_id_of_tuple(key, false, 0);
            h.0.holds_connection(id.as_str(), ts_ns)
        })
    }
}

/// What the cutoff said of one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Write it.
    Keep,
    /// Leave it out (count it `cut`).
    Cut,
}

/// One worker's cutoff: the shared classes and a flow table of its own.
#[derive(Clone, Debug)]
pub struct Cutoff {
    classes: Arc<Classes>,
    table: FlowTable,
}

impl Cutoff {
    /// A cutoff for one worker, its table allocated now.
    pub fn new(classes: Arc<Classes>) -> Cutoff {
        let table = FlowTable::new(classes.flows, classes.idle_ns);
        Cutoff { classes, table }
    }

    /// Whether `p` is written or cut; see the module doc. No allocation, lock or syscall.
    #[inline]
    pub fn judge(&mut self, p: &Packet<'_>) -> Verdict {
        let t = p.link.transport(p.data, p.vlan).ok();
        self.judge_parsed(p, t.as_ref())
    }

    /// [`Cutoff::judge`] with `p`'s transport layer read by the caller (None: not IP, or
    /// not parsed), which then hands the same to the file's writer: one read of a
    /// packet's headers for the cutoff, the index and the sessions.
    #[inline]
    pub fn judge_parsed(&mut self, p: &Packet<'_>, t: Option<&Transport<'_>>) -> Verdict {
        let Some(t) = t else {
            return Verdict::Keep;
        };
        let key = t.key.canonical();
        let edge = t
            .tcp
            .is_some_and(|tcp| tcp.flags & (TCP_SYN | TCP_FIN | TCP_RST) != 0);
        let (slot, found) = self.table.slot(&key, p.ts_ns);
        if found == Found::New {
            slot.limit = self.classes.limit(p);
        }
        let before = slot.seen;
        slot.seen = before.saturating_add(t.payload_len as u64);
        if edge || slot.limit == NEVER {
            return Verdict::Keep;
        }
        if slot.limit & CUTTING == 0 {
            if before < slot.limit {
                return Verdict::Keep;
            }
            // Its cut begins here.
        } else if before < slot.limit & !CUTTING {
            return Verdict::Cut;
        }
        if self.classes.held(&key, p.ts_ns) {
            slot.limit = NEVER;
            return Verdict::Keep;
        }
        slot.limit = CUTTING | before.saturating_add(RECHECK);
        Verdict::Cut
    }

    /// Holds the flow `key` (either direction) from `now_ns` on: none of its packets is
    /// cut after this, until it is forgotten (idle past the timeout, or evicted: then it
    /// restarts from zero under its class, so a hold must be given again by whoever keeps
    /// it, as a new flow's first packets are kept anyway).
    pub fn hold(&mut self, key: &FlowKey, now_ns: u64) {
        let (slot, found) = self.table.slot(&key.canonical(), now_ns);
        if found == Found::New {
            slot.seen = 0;
        }
        slot.limit = NEVER;
    }

    /// Flows pushed out of the full table before they were idle.
    pub fn evictions(&self) -> u64 {
        self.table.evictions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corecap_wire::Link;

    /// An Ethernet/IPv4/TCP frame from port `sport` to `dport` with `flags` and `len`
    /// payload bytes.
    fn tcp(sport: u16, dport: u16, flags: u8, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; 54 + len];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[16..18].copy_from_slice(&((40 + len) as u16).to_be_bytes());
        f[22] = 64;
        f[23] = 6;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        if sport > dport {
            // The other direction: addresses swapped too.
            f[26..30].copy_from_slice(&[10, 0, 0, 2]);
            f[30..34].copy_from_slice(&[10, 0, 0, 1]);
        }
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f[46] = 0x50;
        f[47] = flags;
        f
    }

    fn packet(data: &[u8], ts_ns: u64) -> Packet<'_> {
        Packet::ethernet(ts_ns, data)
    }

    fn cutoff(limit: Option<u64>) -> Cutoff {
        held_cutoff(limit, None)
    }

    fn held_cutoff(limit: Option<u64>, holds: Option<HeldFlows>) -> Cutoff {
        let cfg = CutoffConfig {
            default: limit,
            classes: Vec::new(),
            flows: 64,
            idle: Duration::from_secs(1),
            holds,
        };
        Cutoff::new(Classes::compile(&cfg, &[], 0).expect("no classes to compile"))
    }

    /// Issue 38: a hold by Community ID placed while a flow is being cut (an alert on a long
    /// transfer) stops the cut within [`RECHECK`] bytes; a flow held before its cut begins is
    /// never cut; other flows are cut as before.
    #[test]
    fn test_a_flow_held_by_its_community_id_is_not_cut_from_then_on() {
        let home =
            std::env::temp_dir().join(format!("corecap-cutoff-holds-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(&home).expect("home");
        let holds = corecap_store::keep::hold::Holds::open(&home, vec![home.clone()], None, None)
            .expect("holds");
        let mut c = held_cutoff(Some(1000), Some(HeldFlows(holds.clone())));
        let f = tcp(40000, 443, 0x10, 1400);
        let other = tcp(40001, 443, 0x10, 1400);
        let verdicts = |c: &mut Cutoff, f: &[u8], from: u64, n: u64| -> Vec<Verdict> {
            (from..from + n).map(|t| c.judge(&packet(f, t))).collect()
        };
        // 1400 bytes a packet: the first passes the 1000-byte limit, the rest are cut.
        let v = verdicts(&mut c, &f, 1, 50);
        assert_eq!(v[0], Verdict::Keep);
        assert!(v[1..].iter().all(|&x| x == Verdict::Cut));
        let key = Link::Ethernet.flow_key(&f, None).expect("key").canonical();
        let id = corecap_wire::community_id::community_id_of_tuple(&key, false, 0);
        let spec = corecap_store::keep::hold::HoldSpec {
            name: "case".into(),
            from_ns: 0,
            to_ns: u64::MAX / 2,
            community_id: Some(id.as_str().to_owned()),
            ..Default::default()
        };
        holds.add(spec, 1).expect("a hold");
        // Within RECHECK bytes of cut packets the hold is seen; from then on all are kept.
        let v = verdicts(&mut c, &f, 100, 400);
        let first_kept = v
            .iter()
            .position(|&x| x == Verdict::Keep)
            .expect("kept again");
        assert!(first_kept as u64 * 1400 <= RECHECK + 1400, "{first_kept}");
        assert!(v[first_kept..].iter().all(|&x| x == Verdict::Keep));
        // Another flow is cut as before.
        let v = verdicts(&mut c, &other, 1000, 10);
        assert_eq!(v[0], Verdict::Keep);
        assert!(v[1..].iter().all(|&x| x == Verdict::Cut));
        let _ = std::fs::remove_dir_all(&home);
    }

    #[test]
    fn test_both_directions_count_and_edges_are_kept() {
        let mut c = cutoff(Some(3000));
        let data = |from_client: bool, flags: u8, len: usize| {
            if from_client {
                tcp(1, 80, flags, len)
            } else {
                tcp(80, 1, flags, len)
            }
        };
        let seq = [
            (true, TCP_SYN, 0, Verdict::Keep),
            (false, TCP_SYN | 0x10, 0, Verdict::Keep),
            (true, 0x10, 100, Verdict::Keep),
            (false, 0x10, 1448, Verdict::Keep),
            // 1548 seen before it, then 2996: still under 3000.
            (false, 0x10, 1448, Verdict::Keep),
            (true, 0x10, 0, Verdict::Keep),
            // 2996 + 1448 passes the limit with this packet: it is written.
            (false, 0x10, 1448, Verdict::Keep),
            (true, 0x10, 0, Verdict::Cut),
            (false, 0x10, 1448, Verdict::Cut),
            (false, TCP_FIN | 0x10, 0, Verdict::Keep),
            (true, TCP_RST, 0, Verdict::Keep),
        ];
        for (i, (client, flags, len, want)) in seq.into_iter().enumerate() {
            let f = data(client, flags, len);
            assert_eq!(c.judge(&packet(&f, 10 + i as u64)), want, "packet {i}");
        }
        // A frame that is not IP is always written.
        assert_eq!(c.judge(&packet(&[0u8; 60], 100)), Verdict::Keep);
    }

    #[test]
    fn test_idle_flow_starts_over_and_a_hold_is_never_cut() {
        // The packet that passes the limit is written, the next one is not.
        let mut c = cutoff(Some(5));
        let f = tcp(1, 80, 0x10, 10);
        assert_eq!(c.judge(&packet(&f, 1)), Verdict::Keep);
        assert_eq!(c.judge(&packet(&f, 2)), Verdict::Cut);
        // Idle for a second: the flow starts again from zero.
        assert_eq!(c.judge(&packet(&f, 2_000_000_002)), Verdict::Keep);
        let key = Link::Ethernet.flow_key(&f, None).expect("a flow key");
        c.hold(&key.reversed(), 2_000_000_003);
        for t in 0..5 {
            assert_eq!(c.judge(&packet(&f, 2_000_000_004 + t)), Verdict::Keep);
        }
        assert_eq!(c.evictions(), 0);
        // A limit of 0 keeps only SYN, FIN and RST.
        let mut c = cutoff(Some(0));
        assert_eq!(c.judge(&packet(&f, 1)), Verdict::Cut);
        let syn = tcp(1, 80, TCP_SYN, 0);
        assert_eq!(c.judge(&packet(&syn, 2)), Verdict::Keep);
    }
}
