//! The AF_PACKET source: one TPACKET_V3 ring per worker, all workers of an interface in
//! one fanout group.
//!
//! Each worker opens its own socket after it has been pinned, so the ring's pages come
//! from its core's NUMA node. The socket is set up in the order the kernel needs: ring,
//! filter, bind, then the fanout join, so that the filter is in place before the socket
//! shares any traffic. Workers of one interface join one after the other (worker 0 asks the
//! kernel for a unique group id, the others join it), which makes fanout member `i` equal
//! to worker `i` of the interface: with queue fanout, member `i` receives RX queue `i`.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use corecap_linux::abi::sock_filter;
use corecap_linux::{FanoutMode, PacketSocket, RingConfig, RxRing};

/// Join order and group id shared by the workers of one interface.
#[derive(Debug, Default)]
pub struct FanoutGroup {
    /// Members that have joined (or failed); member `i` waits until this is `i`.
    turn: AtomicUsize,
    /// 0 until the first member joined, then `0x1_0000 | id`.
    id: AtomicU32,
}

/// Everything a worker needs to open its socket on an interface.
#[derive(Clone, Debug)]
pub struct LiveSpec {
    /// Interface name.
    pub iface: String,
    /// Interface index.
    pub ifindex: u32,
    /// How packets are spread over the workers of this interface.
    pub fanout: FanoutMode,
    /// Shared join state; None for a single socket (queue adapter or one worker).
    pub group: Option<Arc<FanoutGroup>>,
    /// Position of this worker in the group.
    pub member: usize,
    /// Ring geometry.
    pub ring: RingConfig,
    /// Kernel filter (already includes the snap length and any queue prefix).
    pub filter: Vec<sock_filter>,
    /// A socket opened ahead of need, used instead of a new one when it fits.
    pub spare: Option<Spare>,
    /// Put the interface into promiscuous mode while the socket is open.
    pub promisc: bool,
}

/// A socket opened ahead of need: its ring made, bound to an interface, refusing every
/// packet. A worker that takes it swaps in its own filter (one setsockopt) instead of
/// making a ring, which costs the kernel tens of milliseconds for tens of MiB: an
/// on-demand capture in spawn mode starts in microseconds. The ring's pages come from the
/// node of the thread that opened it.
///
/// A capture may [`Spare::arm`] it as soon as its filter is compiled: from then on the
/// ring takes the capture's packets (with their kernel timestamps) and holds them until
/// the worker takes the ring, so the capture starts at the filter swap, however long its
/// worker takes to be scheduled. An armed spare is no longer [`Spare::ready`]: it is
/// taken by its capture or closed, never offered to another. It keeps the program it
/// holds, so arming it again with the same one, or a worker taking it with that one,
/// costs no setsockopt (each is a JIT compile in the kernel, about 50 µs).
#[derive(Clone, Debug, Default)]
pub struct Spare(Arc<Mutex<Option<Held>>>);

/// What a spare holds: the interface, the geometry, the ring, and the capture's filter
/// once one is in it.
#[derive(Debug)]
struct Held {
    ifindex: u32,
    ring: RingConfig,
    rx: RxRing,
    armed: Option<Vec<sock_filter>>,
}

impl Spare {
    /// Opens a spare socket on interface `ifindex` with ring geometry `ring`.
    pub fn open(ifindex: u32, ring: RingConfig) -> corecap_linux::Result<Self> {
        let sock = PacketSocket::open()?;
        let r = RxRing::new(sock, ring)?;
        r.socket()
            .attach_filter(&corecap_linux::filter::reject_all())?;
        r.socket().bind(ifindex, libc_eth_p_all())?;
        Ok(Self(Arc::new(Mutex::new(Some(Held {
            ifindex,
            ring,
            rx: r,
            armed: None,
        })))))
    }

    /// Whether it still holds its socket, refusing every packet.
    pub fn ready(&self) -> bool {
        self.0
            .lock()
            .map(|g| g.as_ref().is_some_and(|h| h.armed.is_none()))
            .unwrap_or(false)
    }

    /// Swaps `filter` into the socket if it is on `ifindex` with geometry `ring`: the ring
    /// takes the capture's packets from now on. Returns whether it did.
    pub fn arm(
        &self,
        ifindex: u32,
        ring: RingConfig,
        filter: &[sock_filter],
    ) -> corecap_linux::Result<bool> {
        // Once per capture start, never on the data path.
        let Ok(mut g) = self.0.lock() else {
            return Ok(false);
        };
        match g.as_mut() {
            Some(h) if h.ifindex == ifindex && h.ring == ring => {
                if h.armed.as_deref() != Some(filter) {
                    h.rx.socket().attach_filter(filter)?;
                    h.armed = Some(filter.to_vec());
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Takes the socket if it is on `ifindex` with geometry `ring`, with the filter it
    /// holds (None: it refuses everything).
    fn take(&self, ifindex: u32, ring: RingConfig) -> Option<(RxRing, Option<Vec<sock_filter>>)> {
        // Taken once per capture start, never on the data path.
        let mut g = self.0.lock().ok()?;
        match g.take() {
            Some(h) if h.ifindex == ifindex && h.ring == ring => Some((h.rx, h.armed)),
            other => {
                *g = other;
                None
            }
        }
    }
}

/// Opens, filters, binds and joins. Waits for this member's turn so that join order is
/// member order; a failure still passes the turn on.
pub fn open(spec: &LiveSpec, stop: &dyn Fn() -> bool) -> corecap_linux::Result<RxRing> {
    if let Some(g) = &spec.group {
        // Acquire: pairs with the Release increment of the previous member, so its group id
        // store is visible.
        while g.turn.load(Ordering::Acquire) < spec.member {
            if stop() {
                return Err(corecap_linux::Error::new(
                    corecap_linux::ErrorKind::Sys,
                    "capture stopped during setup",
                ));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let r = open_inner(spec);
    if let Some(g) = &spec.group {
        // Release: publishes the group id to the next member (pairs with the Acquire above).
        g.turn.fetch_add(1, Ordering::Release);
    }
    r.map_err(|e| e.on(&spec.iface))
}

fn open_inner(spec: &LiveSpec) -> corecap_linux::Result<RxRing> {
    let ring = open_socket(spec)?;
    if spec.promisc {
        ring.socket().set_promisc(spec.ifindex)?;
    }
    Ok(ring)
}

/// The worker's socket, bound (and joined): a spare that fits, or a new one.
fn open_socket(spec: &LiveSpec) -> corecap_linux::Result<RxRing> {
    if spec.group.is_none() {
        if let Some((ring, armed)) = spec
            .spare
            .as_ref()
            .and_then(|s| s.take(spec.ifindex, spec.ring))
        {
            // Bound, and holding what the capture's filter passed since it was armed (or
            // nothing); from here on it takes what the filter passes.
            if armed.as_deref() != Some(spec.filter.as_slice()) {
                ring.socket().attach_filter(&spec.filter)?;
            }
            return Ok(ring);
        }
    }
    let sock = PacketSocket::open()?;
    let ring = RxRing::new(sock, spec.ring)?;
    ring.socket().attach_filter(&spec.filter)?;
    ring.socket().bind(spec.ifindex, libc_eth_p_all())?;
    if let Some(g) = &spec.group {
        let known = g.id.load(Ordering::Relaxed);
        let want = (known != 0).then_some((known & 0xffff) as u16);
        let id = ring.socket().join_fanout(want, spec.fanout, false)?;
        if known == 0 {
            g.id.store(0x1_0000 | u32::from(id), Ordering::Relaxed);
        }
    }
    Ok(ring)
}

/// ETH_P_ALL in host order.
fn libc_eth_p_all() -> u16 {
    0x0003
}
