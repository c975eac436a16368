//! Network devices and namespaces: interface index, RX queues, link type, `setns`.

use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::error::{Error, ErrorKind, Result};

/// Index of interface `name`, or a `NoSuchInterface` error.
pub fn ifindex(name: &str) -> Result<u32> {
    let c = CString::new(name)
        .map_err(|_| Error::new(ErrorKind::NoSuchInterface, "interface name contains NUL"))?;
    // SAFETY: `c` is a valid NUL-terminated string for the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(Error::new(
            ErrorKind::NoSuchInterface,
            format!("no such interface: {name}"),
        ));
    }
    Ok(idx)
}

/// Number of RX queues of `name`, from /sys/class/net/NAME/queues.
pub fn rx_queues(name: &str) -> Result<u32> {
    let dir = Path::new("/sys/class/net").join(name).join("queues");
    let rd = std::fs::read_dir(&dir)
        .map_err(|e| Error::from_io(format!("reading {}", dir.display()), e))?;
    let n = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
        .count();
    Ok(n.max(1) as u32)
}

/// Link speed of `name` in Mbit/s, when the driver reports one.
pub fn speed_mbps(name: &str) -> Option<u64> {
    let p = Path::new("/sys/class/net").join(name).join("speed");
    let v: i64 = std::fs::read_to_string(p).ok()?.trim().parse().ok()?;
    u64::try_from(v).ok().filter(|&v| v > 0)
}

/// ARPHRD type of `name` (1 = Ethernet, 772 = loopback).
pub fn arphrd(name: &str) -> Result<u16> {
    let p = Path::new("/sys/class/net").join(name).join("type");
    let s = std::fs::read_to_string(&p)
        .map_err(|e| Error::from_io(format!("reading {}", p.display()), e))?;
    s.trim()
        .parse()
        .map_err(|_| Error::new(ErrorKind::Sys, format!("bad link type in {}", p.display())))
}

/// The pcap link type (DLT) of frames captured on an interface, if corecap supports it.
pub fn linktype(name: &str) -> Result<u16> {
    match arphrd(name)? {
        // Ethernet, loopback (the kernel gives a zeroed Ethernet header) and IEEE802.
        1 | 6 | 772 => Ok(1),
        t => Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "interface {name} has link type {t} (ARPHRD); corecap captures Ethernet interfaces"
            ),
        )),
    }
}

/// Moves the process into the named network namespace (`ip netns` name or a path), as
/// `ip netns exec` does: it also enters a private mount namespace and mounts a fresh sysfs,
/// so /sys/class/net shows the namespace's interfaces. Call it before starting any thread
/// (unshare of the mount namespace needs a single-threaded process); threads started
/// afterwards inherit both namespaces.
pub fn enter_netns(name: &str) -> Result<()> {
    let path = if name.contains('/') {
        name.to_owned()
    } else {
        format!("/run/netns/{name}")
    };
    let f = std::fs::File::open(&path)
        .map_err(|e| Error::from_io(format!("cannot open network namespace {path}"), e))?;
    // SAFETY: `f` is an open namespace file for the duration of the call.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc < 0 {
        return Err(Error::last(format!("setns into {path}")));
    }
    // SAFETY: plain system call; fails with EINVAL if other threads exist.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } < 0 {
        return Err(Error::last("unshare of the mount namespace"));
    }
    let none = c"none";
    let root = c"/";
    let sys = c"/sys";
    let sysfs = c"sysfs";
    // SAFETY: NUL-terminated constant strings; makes our mounts private so the remount of
    // /sys below stays in this process.
    unsafe {
        libc::mount(
            none.as_ptr(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    // SAFETY: NUL-terminated constant string; detaches the old sysfs view, if any.
    unsafe { libc::umount2(sys.as_ptr(), libc::MNT_DETACH) };
    // SAFETY: NUL-terminated constant strings; mounts sysfs for the current net namespace.
    let rc = unsafe {
        libc::mount(
            sysfs.as_ptr(),
            sys.as_ptr(),
            sysfs.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        return Err(Error::last("mounting sysfs for the network namespace"));
    }
    Ok(())
}
