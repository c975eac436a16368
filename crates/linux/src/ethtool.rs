//! The SIOCETHTOOL ioctls that placement tuning reads and writes: channel counts
//! (`ETHTOOL_GCHANNELS`/`SCHANNELS`), ring sizes (`ETHTOOL_GRINGPARAM`/`SRINGPARAM`),
//! pause frames (`ETHTOOL_GPAUSEPARAM`/`SPAUSEPARAM`), the driver name (`ETHTOOL_GDRVINFO`),
//! and the offloads the veth lab sets (`ETHTOOL_SGRO`, `ETHTOOL_STSO`, `ETHTOOL_SGSO`), so
//! that neither needs the `ethtool` program.
//!
//! A driver that does not implement an operation answers `EOPNOTSUPP`; the getters turn
//! that into `Ok(None)` so callers can report "not supported by the driver" instead of an
//! error (veth has no pause frames, for example).

use std::ffi::c_void;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::{Error, ErrorKind, Result};

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GRINGPARAM: u32 = 0x10;
const ETHTOOL_SRINGPARAM: u32 = 0x11;
const ETHTOOL_GPAUSEPARAM: u32 = 0x12;
const ETHTOOL_SPAUSEPARAM: u32 = 0x13;
const ETHTOOL_STSO: u32 = 0x1f;
const ETHTOOL_SGSO: u32 = 0x24;
const ETHTOOL_SGRO: u32 = 0x2c;
const ETHTOOL_GCHANNELS: u32 = 0x3c;
const ETHTOOL_SCHANNELS: u32 = 0x3d;

/// `struct ethtool_channels`: maximum and current queue counts by kind.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Channels {
    cmd: u32,
    /// Maximum RX-only channels.
    pub max_rx: u32,
    /// Maximum TX-only channels.
    pub max_tx: u32,
    /// Maximum other channels (link interrupts, for example).
    pub max_other: u32,
    /// Maximum combined RX/TX channels.
    pub max_combined: u32,
    /// Current RX-only channels.
    pub rx: u32,
    /// Current TX-only channels.
    pub tx: u32,
    /// Current other channels.
    pub other: u32,
    /// Current combined channels.
    pub combined: u32,
}

/// `struct ethtool_ringparam`: maximum and current descriptor ring sizes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ring {
    cmd: u32,
    /// Largest RX ring the driver allows.
    pub rx_max: u32,
    rx_mini_max: u32,
    rx_jumbo_max: u32,
    /// Largest TX ring the driver allows.
    pub tx_max: u32,
    /// Current RX ring size.
    pub rx: u32,
    rx_mini: u32,
    rx_jumbo: u32,
    /// Current TX ring size.
    pub tx: u32,
}

/// `struct ethtool_pauseparam`: Ethernet flow control.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pause {
    cmd: u32,
    /// Pause autonegotiation (0 or 1).
    pub autoneg: u32,
    /// Honour received pause frames (0 or 1).
    pub rx: u32,
    /// Send pause frames (0 or 1).
    pub tx: u32,
}

/// An offload that [`Ethtool::set_offload`] turns on or off (`ethtool -K IFACE gro on`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offload {
    /// Generic receive offload: on a veth, it gives each RX queue its own NAPI instance.
    Gro,
    /// TCP segmentation offload.
    Tso,
    /// Generic segmentation offload.
    Gso,
}

impl Offload {
    fn set_cmd(self) -> u32 {
        match self {
            Offload::Gro => ETHTOOL_SGRO,
            Offload::Tso => ETHTOOL_STSO,
            Offload::Gso => ETHTOOL_SGSO,
        }
    }
}

/// `struct ethtool_value`: one word for the one-value commands.
#[repr(C)]
struct Value {
    cmd: u32,
    data: u32,
}

#[repr(C)]
struct DrvInfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// `struct ifreq` with the `ifr_data` member of its union; 40 bytes on 64-bit Linux.
#[repr(C)]
struct IfreqData {
    name: [u8; libc::IFNAMSIZ],
    data: *mut c_void,
    pad: [u8; 24 - size_of::<*mut c_void>()],
}

const _: () = assert!(size_of::<Channels>() == 36);
const _: () = assert!(size_of::<Ring>() == 36);
const _: () = assert!(size_of::<Pause>() == 16);
const _: () = assert!(size_of::<DrvInfo>() == 196);
const _: () = assert!(size_of::<Value>() == 8);
const _: () = assert!(size_of::<IfreqData>() == 40);

/// An ethtool handle on one interface (a datagram socket used only for ioctls).
#[derive(Debug)]
pub struct Ethtool {
    fd: OwnedFd,
    name: [u8; libc::IFNAMSIZ],
    iface: String,
}

impl Ethtool {
    /// Opens an ethtool handle for interface `iface` in the current network namespace.
    pub fn open(iface: &str) -> Result<Self> {
        if iface.is_empty() || iface.len() >= libc::IFNAMSIZ || iface.contains('\0') {
            return Err(Error::new(
                ErrorKind::NoSuchInterface,
                format!("bad interface name {iface:?}"),
            ));
        }
        crate::netdev::ifindex(iface)?;
        // SAFETY: plain system call; the result is checked before use.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(Error::last("socket for ethtool ioctls"));
        }
        // SAFETY: `fd` was just returned by socket() and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut name = [0u8; libc::IFNAMSIZ];
        name[..iface.len()].copy_from_slice(iface.as_bytes());
        Ok(Self {
            fd,
            name,
            iface: iface.to_owned(),
        })
    }

    /// Runs one SIOCETHTOOL command on `arg`, whose first field is the command word.
    /// `Ok(false)` means the driver does not support it.
    fn ioctl<T>(&self, arg: &mut T, what: &str) -> Result<bool> {
        let mut ifr = IfreqData {
            name: self.name,
            data: (arg as *mut T).cast(),
            pad: [0; 24 - size_of::<*mut c_void>()],
        };
        // SAFETY: `ifr` names the interface and points at `arg`, a live #[repr(C)] ethtool
        // structure of the size the command expects; the kernel reads and writes only it.
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), SIOCETHTOOL as _, &mut ifr) };
        if rc == 0 {
            return Ok(true);
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EOPNOTSUPP) => Ok(false),
            _ => Err(Error::from_io(format!("ethtool {what}"), err).on(&self.iface)),
        }
    }

    /// Channel counts, or `None` when the driver does not report them.
    pub fn channels(&self) -> Result<Option<Channels>> {
        let mut c = Channels {
            cmd: ETHTOOL_GCHANNELS,
            ..Default::default()
        };
        Ok(self.ioctl(&mut c, "get channels")?.then_some(c))
    }

    /// Sets the channel counts (fields copied from `c`).
    pub fn set_channels(&self, c: &Channels) -> Result<()> {
        let mut c = Channels {
            cmd: ETHTOOL_SCHANNELS,
            ..*c
        };
        self.supported(self.ioctl(&mut c, "set channels")?, "setting channels")
    }

    /// Ring sizes, or `None` when the driver does not report them.
    pub fn ring(&self) -> Result<Option<Ring>> {
        let mut r = Ring {
            cmd: ETHTOOL_GRINGPARAM,
            ..Default::default()
        };
        Ok(self.ioctl(&mut r, "get ring parameters")?.then_some(r))
    }

    /// Sets the ring sizes: `rx` and `tx` from `r`, the rest as they are now.
    pub fn set_ring(&self, rx: u32, tx: u32) -> Result<()> {
        let mut r = self
            .ring()?
            .ok_or_else(|| self.unsupported("ring parameters"))?;
        r.cmd = ETHTOOL_SRINGPARAM;
        r.rx = rx;
        r.tx = tx;
        self.supported(self.ioctl(&mut r, "set ring parameters")?, "setting rings")
    }

    /// Pause-frame settings, or `None` when the driver has none.
    pub fn pause(&self) -> Result<Option<Pause>> {
        let mut p = Pause {
            cmd: ETHTOOL_GPAUSEPARAM,
            ..Default::default()
        };
        Ok(self.ioctl(&mut p, "get pause parameters")?.then_some(p))
    }

    /// Sets pause autonegotiation, RX and TX pause.
    pub fn set_pause(&self, autoneg: bool, rx: bool, tx: bool) -> Result<()> {
        let mut p = Pause {
            cmd: ETHTOOL_SPAUSEPARAM,
            autoneg: autoneg as u32,
            rx: rx as u32,
            tx: tx as u32,
        };
        self.supported(self.ioctl(&mut p, "set pause parameters")?, "setting pause")
    }

    /// Turns an offload on or off, as `ethtool -K IFACE gro on` does.
    pub fn set_offload(&self, offload: Offload, on: bool) -> Result<()> {
        let mut v = Value {
            cmd: offload.set_cmd(),
            data: on as u32,
        };
        let what = format!("setting {offload:?} {}", if on { "on" } else { "off" });
        self.supported(self.ioctl(&mut v, &what)?, &what)
    }

    /// The driver's name (`veth`, `ixgbe`, `virtio_net`), or `None`.
    pub fn driver(&self) -> Result<Option<String>> {
        let mut d = DrvInfo {
            cmd: ETHTOOL_GDRVINFO,
            driver: [0; 32],
            version: [0; 32],
            fw_version: [0; 32],
            bus_info: [0; 32],
            erom_version: [0; 32],
            reserved2: [0; 12],
            n_priv_flags: 0,
            n_stats: 0,
            testinfo_len: 0,
            eedump_len: 0,
            regdump_len: 0,
        };
        if !self.ioctl(&mut d, "get driver info")? {
            return Ok(None);
        }
        let end = d.driver.iter().position(|&b| b == 0).unwrap_or(32);
        Ok(Some(String::from_utf8_lossy(&d.driver[..end]).into_owned()))
    }

    fn unsupported(&self, what: &str) -> Error {
        Error::new(
            ErrorKind::Unsupported,
            format!("the driver of {} does not support {what}", self.iface),
        )
    }

    fn supported(&self, ok: bool, what: &str) -> Result<()> {
        if ok {
            Ok(())
        } else {
            Err(self.unsupported(what))
        }
    }
}
