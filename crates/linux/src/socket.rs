//! AF_PACKET sockets: creation, binding, socket options, fanout, filters and statistics.
//!
//! Every `setsockopt`/`getsockopt` of the crate goes through [`set_opt`] and [`get_opt`],
//! the only places that pass raw pointers to the kernel.

use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::abi::{self, sock_filter, sock_fprog, tpacket_stats_v3};
use crate::error::{Error, Result};

/// Fanout mode of a group of sockets (`PACKET_FANOUT_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanoutMode {
    /// Symmetric flow hash (`PACKET_FANOUT_HASH`), with IP defragmentation.
    Hash,
    /// Round robin (`PACKET_FANOUT_LB`).
    RoundRobin,
    /// By the receiving CPU (`PACKET_FANOUT_CPU`).
    Cpu,
    /// Fill one socket, then the next (`PACKET_FANOUT_ROLLOVER`).
    Rollover,
    /// By the RX queue recorded in the skb (`PACKET_FANOUT_QM`).
    Queue,
    /// Random (`PACKET_FANOUT_RND`).
    Random,
}

impl FanoutMode {
    fn kernel_type(self) -> u16 {
        match self {
            FanoutMode::Hash => abi::PACKET_FANOUT_HASH | abi::PACKET_FANOUT_FLAG_DEFRAG,
            FanoutMode::RoundRobin => abi::PACKET_FANOUT_LB,
            FanoutMode::Cpu => abi::PACKET_FANOUT_CPU,
            FanoutMode::Rollover => abi::PACKET_FANOUT_ROLLOVER,
            FanoutMode::Queue => abi::PACKET_FANOUT_QM,
            FanoutMode::Random => abi::PACKET_FANOUT_RND,
        }
    }
}

/// Kernel counters of one socket since the last read (`PACKET_STATISTICS` resets on read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Packets the kernel counted for this socket, drops included.
    pub packets: u64,
    /// Packets dropped because the ring was full.
    pub drops: u64,
    /// Times the ring froze because every block was owned by user space.
    pub freezes: u64,
}

impl std::ops::AddAssign for KernelStats {
    fn add_assign(&mut self, o: Self) {
        self.packets += o.packets;
        self.drops += o.drops;
        self.freezes += o.freezes;
    }
}

/// An AF_PACKET socket of type SOCK_RAW.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
}

/// Sets a socket option from a plain-data value.
fn set_opt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, val: &T, what: &str) -> Result<()> {
    // SAFETY: `val` is a live reference to `size_of::<T>()` readable bytes for the call.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (val as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(Error::last(what));
    }
    Ok(())
}

/// Reads a socket option into a plain-data value.
fn get_opt<T: Default>(fd: RawFd, level: libc::c_int, name: libc::c_int, what: &str) -> Result<T> {
    let mut val = T::default();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `val` is writable for `len` bytes and outlives the call.
    let rc = unsafe { libc::getsockopt(fd, level, name, (&mut val as *mut T).cast(), &mut len) };
    if rc < 0 {
        return Err(Error::last(what));
    }
    Ok(val)
}

impl PacketSocket {
    /// Opens a packet socket that receives nothing until [`bind`](Self::bind) names a protocol.
    pub fn open() -> Result<Self> {
        // SAFETY: plain system call; the result is checked below.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(Error::last(
                "cannot open an AF_PACKET socket (needs root or CAP_NET_RAW)",
            ));
        }
        // SAFETY: `fd` was just returned by socket() and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd })
    }

    /// Raw descriptor, for `poll` and `mmap`.
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Selects the ring header version (`TPACKET_V2` or `TPACKET_V3`).
    pub fn set_version(&self, version: libc::c_int) -> Result<()> {
        set_opt(
            self.raw(),
            abi::SOL_PACKET,
            abi::PACKET_VERSION,
            &version,
            "PACKET_VERSION",
        )
    }

    /// Sends frames straight to the driver, skipping the qdisc layer.
    pub fn set_qdisc_bypass(&self) -> Result<()> {
        let one: libc::c_int = 1;
        set_opt(
            self.raw(),
            abi::SOL_PACKET,
            abi::PACKET_QDISC_BYPASS,
            &one,
            "PACKET_QDISC_BYPASS",
        )
    }

    /// Does not capture packets this host sends on the interface.
    pub fn set_ignore_outgoing(&self) -> Result<()> {
        let one: libc::c_int = 1;
        set_opt(
            self.raw(),
            abi::SOL_PACKET,
            abi::PACKET_IGNORE_OUTGOING,
            &one,
            "PACKET_IGNORE_OUTGOING",
        )
    }

    /// Puts interface `ifindex` into promiscuous mode for as long as this socket is open
    /// (a `PACKET_MR_PROMISC` membership: the kernel counts them, so the interface leaves
    /// promiscuous mode when the last socket that asked closes, even after a crash).
    pub fn set_promisc(&self, ifindex: u32) -> Result<()> {
        let mreq = abi::packet_mreq {
            mr_ifindex: libc::c_int::try_from(ifindex)
                .map_err(|_| Error::new(crate::ErrorKind::Sys, format!("ifindex {ifindex}")))?,
            mr_type: abi::PACKET_MR_PROMISC,
            ..Default::default()
        };
        set_opt(
            self.raw(),
            abi::SOL_PACKET,
            abi::PACKET_ADD_MEMBERSHIP,
            &mreq,
            "PACKET_ADD_MEMBERSHIP",
        )
    }

    /// Requests a TPACKET_V3 receive ring.
    pub fn set_rx_ring(&self, req: &abi::tpacket_req3) -> Result<()> {
        set_opt(
            self.raw(),
            abi::SOL_PACKET,
            abi::PACKET_RX_RING,
            req,
            "PACKET_RX_RING",
        )
    }

    /// Requests a TPACKET_V2 transmit ring.
    pub fn set_tx_ring(&self, req: &abi::tpacket_req) -> Result<()> {
        set_opt(
            self.raw(),
            abi::SOL_PACKET,
            abi::PACKET_TX_RING,
            req,
            "PACKET_TX_RING",
        )
    }

    /// Attaches a classic BPF program; it replaces any earlier one.
    pub fn attach_filter(&self, prog: &[sock_filter]) -> Result<()> {
        let len = u16::try_from(prog.len()).map_err(|_| {
            Error::new(
                crate::ErrorKind::Filter,
                "filter has more than 65535 instructions",
            )
        })?;
        let fprog = sock_fprog {
            len,
            filter: prog.as_ptr(),
        };
        set_opt(
            self.raw(),
            libc::SOL_SOCKET,
            abi::SO_ATTACH_FILTER,
            &fprog,
            "SO_ATTACH_FILTER",
        )
    }

    /// Binds to an interface and starts receiving `protocol` (host order; 0 receives nothing).
    pub fn bind(&self, ifindex: u32, protocol: u16) -> Result<()> {
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = protocol.to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
        let rc = unsafe {
            libc::bind(
                self.raw(),
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(Error::last("bind"));
        }
        Ok(())
    }

    /// Joins fanout group `id` (or asks the kernel for a unique id when `id` is None) and
    /// returns the group id.
    pub fn join_fanout(&self, id: Option<u16>, mode: FanoutMode, rollover: bool) -> Result<u16> {
        let mut kind = mode.kernel_type();
        if rollover && mode != FanoutMode::Rollover {
            kind |= abi::PACKET_FANOUT_FLAG_ROLLOVER;
        }
        if id.is_none() {
            kind |= abi::PACKET_FANOUT_FLAG_UNIQUEID;
        }
        let arg: u32 = u32::from(id.unwrap_or(0)) | (u32::from(kind) << 16);
        set_opt(
            self.raw(),
            abi::SOL_PACKET,
            abi::PACKET_FANOUT,
            &arg,
            "PACKET_FANOUT",
        )?;
        let got: u32 = get_opt(
            self.raw(),
            abi::SOL_PACKET,
            abi::PACKET_FANOUT,
            "PACKET_FANOUT",
        )?;
        Ok((got & 0xffff) as u16)
    }

    /// Reads and resets the kernel counters of this socket.
    pub fn take_stats(&self) -> Result<KernelStats> {
        let s: tpacket_stats_v3 = get_opt(
            self.raw(),
            abi::SOL_PACKET,
            abi::PACKET_STATISTICS,
            "PACKET_STATISTICS",
        )?;
        // tp_packets already includes tp_drops (packet_getsockopt adds them).
        Ok(KernelStats {
            packets: u64::from(s.tp_packets),
            drops: u64::from(s.tp_drops),
            freezes: u64::from(s.tp_freeze_q_cnt),
        })
    }

    /// Waits up to `timeout_ms` for the socket to become readable (or writable with `out`).
    /// Returns false on timeout or interruption.
    pub fn poll(&self, timeout_ms: i32, out: bool) -> bool {
        let events = if out {
            libc::POLLOUT
        } else {
            libc::POLLIN | libc::POLLERR
        };
        let mut pfd = libc::pollfd {
            fd: self.raw(),
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        rc > 0
    }

    /// Asks the kernel to transmit every frame marked `TP_STATUS_SEND_REQUEST`.
    pub fn kick_tx(&self, wait: bool) -> Result<usize> {
        let flags = if wait { 0 } else { libc::MSG_DONTWAIT };
        // SAFETY: a null buffer of length 0 is how a TX ring is flushed (tpacket_snd).
        let rc = unsafe { libc::send(self.raw(), std::ptr::null(), 0, flags) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::ENOBUFS)) {
                return Ok(0);
            }
            return Err(Error::from_io("send on TX ring", e));
        }
        Ok(rc as usize)
    }
}
