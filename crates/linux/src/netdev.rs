//! Network devices and namespaces: interface index, RX queues, link type, `setns`.

use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::error::{Error, ErrorKind, Result};

/// Index of interface `name`, or a `NoSuchInterface` error.
pub fn ifindex(name: &str) -> Result<u32> {
    let c = CString::new(name).map_err(|_| Error::new(ErrorKind::NoSuchInterface, "interface name contains NUL"))?;
    // SAFETY: `c` is a valid NUL-terminated string for the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(Error::new(ErrorKind::NoSuchInterface, format!("no such interface: {name}")));
    }
    Ok(idx)
}

/// Number of RX queues of `name`, from /sys/class/net/NAME/queues.
pub fn rx_queues(name: &str) -> Result<u32> {
    let dir = Path::new("/sys/class/net").join(name).join("queues");
    let rd = std::fs::read_dir(&dir).map_err(|e| Error::from_io(format!("reading {}", dir.display()), e))?;
    let n = rd.filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().starts_with("rx-")).count();
    Ok(n.max(1) as u32)
}

/// ARPHRD type of `name` (1 = Ethernet, 772 = loopback).
pub fn arphrd(name: &str) -> Result<u16> {
    let p = Path::new("/sys/class/net").join(name).join("type");
    let s = std::fs::read_to_string(&p).map_err(|e| Error::from_io(format!("reading {}", p.display()), e))?;
    s.trim().parse().map_err(|_| Error::new(ErrorKind::Sys, format!("bad link type in {}", p.display())))
}

/// The pcap link type (DLT) of frames captured on an interface, if corecap supports it.
pub fn linktype(name: &str) -> Result<u16> {
    match arphrd(name)? {
        // Ethernet, loopback (the kernel gives a zeroed Ethernet header) and IEEE802.
        1 | 6 | 772 => Ok(1),
        t => Err(Error::new(
            ErrorKind::Unsupported,
            format!("interface {name} has link type {t} (ARPHRD); corecap captures Ethernet interfaces"),
        )),
    }
}

/// Moves the calling thread into the named network namespace (`ip netns` name or a path).
/// Threads started afterwards inherit it.
pub fn enter_netns(name: &str) -> Result<()> {
    let path = if name.contains('/') { name.to_owned() } else { format!("/run/netns/{name}") };
    let f = std::fs::File::open(&path).map_err(|e| Error::from_io(format!("cannot open network namespace {path}"), e))?;
    // SAFETY: `f` is an open namespace file for the duration of the call.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc < 0 {
        return Err(Error::last(format!("setns into {path}")));
    }
    Ok(())
}
