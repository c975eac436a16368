//! The AF_XDP source: one socket per RX queue, each with its own UMEM, fed by an XDP
//! program that redirects every queue to its socket through an XSKMAP.
//!
//! In spread mode (`--xdp-spread N`) each queue has N sockets sharing the queue's UMEM and
//! fill ring, one per worker, and the program picks the socket by a symmetric flow hash
//! (see `corecap_linux::xdp_prog`): a queue that RSS made too busy for one core is spread
//! over N cores in the kernel, with both directions of a flow on one worker.
//!
//! The program is attached once for the capture (by [`XdpSetup::attach`]) after every
//! worker has put its socket in the map, and leaves the interface when the capture ends:
//! it is held by a BPF link whose descriptor closes on exit, SIGKILL included.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use corecap_linux::xsk::{AttachMode, BindMode, SharedUmem, XdpRedirect, XskSocket};
use corecap_linux::{Error, ErrorKind, Result};

/// Frames per UMEM: enough to absorb a burst of about 30 ms at 1 Mpps.
pub const UMEM_FRAMES: u32 = 32768;
/// Bytes per UMEM frame.
pub const FRAME_SIZE: u32 = 2048;

/// The program and map shared by the workers of one interface.
#[derive(Debug)]
pub struct XdpSetup {
    /// The redirect program with its XSKMAP.
    pub redirect: std::sync::Mutex<XdpRedirect>,
    /// Interface index.
    pub ifindex: u32,
    /// Interface name.
    pub iface: String,
    /// Bind mode of each socket opened so far (written at setup only).
    modes: std::sync::Mutex<Vec<BindMode>>,
    /// Sockets per queue.
    pub spread: u32,
    /// Spread mode: each queue's first socket's UMEM, for the queue's other sockets.
    firsts: std::sync::Mutex<BTreeMap<u32, SharedUmem>>,
}

impl XdpSetup {
    /// Loads the program for an interface with `queues` RX queues and `spread` sockets
    /// per queue.
    pub fn new(iface: &str, ifindex: u32, queues: u32, spread: u32) -> Result<Self> {
        Ok(Self {
            redirect: std::sync::Mutex::new(XdpRedirect::new(queues, spread)?),
            ifindex,
            iface: iface.to_owned(),
            modes: std::sync::Mutex::new(Vec::new()),
            spread: spread.max(1),
            firsts: std::sync::Mutex::new(BTreeMap::new()),
        })
    }

    /// Opens socket `slot` of `queue` and puts it in the map. Called by the worker, after
    /// it is pinned, so the UMEM pages come from its node (slot 0's, in spread mode: the
    /// queue's other sockets share its UMEM and wait for it).
    pub fn open(&self, queue: u32, slot: u32, stop: &dyn Fn() -> bool) -> Result<XskSocket> {
        let s = if slot == 0 {
            let s = XskSocket::open(self.ifindex, queue, UMEM_FRAMES, FRAME_SIZE, false)
                .map_err(|e| e.on(&self.iface))?;
            if self.spread > 1 {
                self.firsts
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(queue, s.shared_umem());
            }
            s
        } else {
            let deadline = Instant::now() + Duration::from_secs(10);
            let first = loop {
                let got = self
                    .firsts
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&queue)
                    .cloned();
                if let Some(f) = got {
                    break f;
                }
                if stop() || Instant::now() > deadline {
                    return Err(Error::new(
                        ErrorKind::Sys,
                        format!("queue {queue}'s first AF_XDP socket did not open"),
                    ));
                }
                std::thread::sleep(Duration::from_micros(200));
            };
            XskSocket::open_shared(&first, self.ifindex, queue).map_err(|e| e.on(&self.iface))?
        };
        // The mutex is taken once per worker at setup, never on the data path.
        let mut r = self.redirect.lock().unwrap_or_else(|p| p.into_inner());
        r.insert(queue * self.spread + slot, &s)?;
        self.modes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(s.mode());
        Ok(s)
    }

    /// Attaches the program (native, else generic).
    pub fn attach(&self) -> Result<AttachMode> {
        let mut r = self.redirect.lock().unwrap_or_else(|p| p.into_inner());
        r.attach(self.ifindex, &self.iface)
    }

    /// Zero-copy if every socket got it, else copy mode.
    pub fn bind_mode(&self) -> BindMode {
        let m = self.modes.lock().unwrap_or_else(|p| p.into_inner());
        if !m.is_empty() && m.iter().all(|b| *b == BindMode::ZeroCopy) {
            BindMode::ZeroCopy
        } else {
            BindMode::Copy
        }
    }

    /// How the program is attached, if it is.
    pub fn attach_mode(&self) -> Option<AttachMode> {
        self.redirect
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .mode()
    }

    /// Detaches the program.
    pub fn detach(&self) {
        let mut r = self.redirect.lock().unwrap_or_else(|p| p.into_inner());
        r.detach();
    }
}

/// Words for the modes, for messages.
pub fn describe(attach: AttachMode, bind: BindMode) -> String {
    format!(
        "{} XDP, {} AF_XDP",
        match attach {
            AttachMode::Native => "native",
            AttachMode::Generic => "generic (skb)",
        },
        match bind {
            BindMode::ZeroCopy => "zero-copy",
            BindMode::Copy => "copy-mode",
        }
    )
}
