//! Network devices and namespaces: interface index, RX queues, link type, `setns`.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd};
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
    // SIOCGIFHWADDR: one ioctl on a throwaway socket of the caller's namespace; reading
    // /sys/class/net/NAME/type costs three syscalls and a sysfs walk (about 35 µs, on the
    // path of every capture request).
    let none = || {
        Error::new(
            ErrorKind::NoSuchInterface,
            format!("no such interface: {name}"),
        )
    };
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(none());
    }
    // SAFETY: plain call; the result is checked and owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(Error::last("socket for SIOCGIFHWADDR"));
    }
    // SAFETY: `fd` is a socket we just opened and own alone.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is a plain C struct for which all zero bytes are valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: `ifr` is a valid ifreq with a NUL-terminated name (its tail stays zero); the
    // kernel writes only inside it.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR as _, &mut ifr) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENODEV) {
            return Err(none());
        }
        return Err(Error::from_io(format!("SIOCGIFHWADDR on {name}"), e));
    }
    // SAFETY: SIOCGIFHWADDR filled the hwaddr member of the union.
    Ok(unsafe { ifr.ifr_ifru.ifru_hwaddr }.sa_family)
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

/// Runs `f` on a thread of its own that has entered the named network namespace (`ip
/// netns` name or a path), and returns what it returns. A network namespace is a property
/// of a thread, so the rest of the process stays where it is: what `f` opens (a socket, a
/// file under `/proc/sys/net`) belongs to the namespace. The mount namespace is not
/// changed, so `/sys/class/net` still shows the caller's interfaces.
pub fn in_netns<T: Send>(name: &str, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    let path = netns_path(name);
    let ns = std::fs::File::open(&path)
        .map_err(|e| Error::from_io(format!("cannot open network namespace {path}"), e))?;
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: `ns` is an open namespace file for the duration of the call; setns
            // with CLONE_NEWNET moves only this thread, which ends with the scope.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } < 0 {
                return Err(Error::last(format!("setns into {path}")));
            }
            f()
        })
        .join()
        .unwrap_or_else(|_| {
            Err(Error::new(
                ErrorKind::Sys,
                format!("the thread in network namespace {path} panicked"),
            ))
        })
    })
}

fn netns_path(name: &str) -> String {
    if name.contains('/') {
        name.to_owned()
    } else {
        format!("/run/netns/{name}")
    }
}

/// Moves the process into the named network namespace (`ip netns` name or a path), as
/// `ip netns exec` does: it also enters a private mount namespace and mounts a fresh sysfs,
/// so /sys/class/net shows the namespace's interfaces. Call it before starting any thread
/// (unshare of the mount namespace needs a single-threaded process); threads started
/// afterwards inherit both namespaces.
pub fn enter_netns(name: &str) -> Result<()> {
    let path = netns_path(name);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_arphrd_of_loopback_and_of_no_interface() {
        assert_eq!(arphrd("lo").expect("lo"), 772);
        assert_eq!(linktype("lo").expect("lo"), 1);
        for bad in ["corecap-none0", "", "a-name-longer-than-ifnamsiz", "a\0b"] {
            let e = arphrd(bad).expect_err(bad);
            assert_eq!(e.kind(), ErrorKind::NoSuchInterface, "{bad:?}: {e}");
        }
    }
}
