//! The AF_XDP source: one socket per RX queue, each with its own UMEM, fed by an XDP
//! program that redirects every queue to its socket through an XSKMAP.
//!
//! The program is attached once for the capture (by [`XdpSetup::attach`]) after every
//! worker has put its socket in the map, and leaves the interface when the capture ends:
//! it is held by a BPF link whose descriptor closes on exit, SIGKILL included.

use corecap_linux::xsk::{AttachMode, BindMode, XdpRedirect, XskSocket};
use corecap_linux::Result;

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
}

impl XdpSetup {
    /// Loads the program for an interface with `queues` RX queues.
    pub fn new(iface: &str, ifindex: u32, queues: u32) -> Result<Self> {
        Ok(Self {
            redirect: std::sync::Mutex::new(XdpRedirect::new(queues)?),
            ifindex,
            iface: iface.to_owned(),
            modes: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// Opens a socket on `queue` and puts it in the map. Called by the worker, after it
    /// is pinned, so the UMEM pages come from its node.
    pub fn open(&self, queue: u32) -> Result<XskSocket> {
        let s = XskSocket::open(self.ifindex, queue, UMEM_FRAMES, FRAME_SIZE, false)
            .map_err(|e| e.on(&self.iface))?;
        // The mutex is taken once per worker at setup, never on the data path.
        let r = self.redirect.lock().unwrap_or_else(|p| p.into_inner());
        r.insert(queue, &s)?;
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
