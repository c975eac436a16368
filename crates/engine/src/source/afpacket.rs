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
use std::sync::Arc;
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
