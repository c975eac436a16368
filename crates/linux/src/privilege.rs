//! Dropping privilege once the sockets are open: a capture needs CAP_NET_RAW to open its
//! sockets and nothing after that.
//!
//! Capabilities are per thread. A capture drops them in every thread once its sockets are
//! open. The daemon keeps a few ([`DAEMON_CAPABILITIES`]) in one thread only, the one that
//! opens sockets for captures started on demand, and clears them everywhere else
//! ([`keep_thread_capabilities`], [`switch_user_keeping`]).

use crate::error::{Error, Result};

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
/// CAP_NET_ADMIN: interface settings, XDP attach.
pub const CAP_NET_ADMIN: u32 = 12;
/// CAP_NET_RAW: packet sockets, and libpcap's live handles.
pub const CAP_NET_RAW: u32 = 13;
/// CAP_IPC_LOCK: locked memory beyond RLIMIT_MEMLOCK.
pub const CAP_IPC_LOCK: u32 = 14;
/// CAP_SYS_NICE: real-time scheduling (`serve --spawn-priority fifo:N`).
pub const CAP_SYS_NICE: u32 = 23;
/// What the daemon's opener thread keeps: sockets and rings for captures started on
/// demand. As a bit mask of capability numbers.
pub const DAEMON_CAPABILITIES: u64 =
    (1 << CAP_NET_ADMIN) | (1 << CAP_NET_RAW) | (1 << CAP_IPC_LOCK);

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_SETGID: u32 = 6;
const CAP_SETUID: u32 = 7;

/// Set when the process will switch user (`-Z`): threads then keep CAP_SETUID and
/// CAP_SETGID when they drop the rest, since glibc runs the switch in every thread and a
/// thread that cannot follow aborts the process. The switch itself clears them.
static SWITCH_PENDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Announces a coming [`switch_user`], before any thread is spawned: sets no_new_privs on
/// the calling thread, which every thread spawned after inherits (it is per thread).
pub fn prepare_switch() -> Result<()> {
    // Relaxed: set before the threads that read it are spawned (spawn orders it).
    SWITCH_PENDING.store(true, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: prctl with value arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(Error::last("prctl(PR_SET_NO_NEW_PRIVS)"));
    }
    Ok(())
}

/// Clears every capability of the calling thread (effective, permitted, inheritable), but
/// CAP_SETUID and CAP_SETGID while a user switch is pending ([`prepare_switch`]).
/// Capabilities are per thread, so each thread that opened something privileged calls it.
pub fn drop_thread_capabilities() -> Result<()> {
    // Relaxed: set before the threads that read it are spawned (spawn orders it).
    if SWITCH_PENDING.load(std::sync::atomic::Ordering::Relaxed) {
        set_thread_capabilities((1 << CAP_SETUID) | (1 << CAP_SETGID))
    } else {
        set_thread_capabilities(0)
    }
}

/// Whether the calling thread still has CAP_NET_RAW in its effective set.
pub fn has_net_raw() -> bool {
    thread_capabilities().is_ok_and(|(eff, _)| eff & (1 << CAP_NET_RAW) != 0)
}

/// The calling thread's (effective, permitted) capability sets, as bit masks.
pub fn thread_capabilities() -> Result<(u64, u64)> {
    let hdr = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two data structs, both valid and writable for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &hdr as *const CapHeader,
            data.as_mut_ptr(),
        )
    };
    if rc < 0 {
        return Err(Error::last("capget"));
    }
    let join = |lo: u32, hi: u32| u64::from(lo) | (u64::from(hi) << 32);
    Ok((
        join(data[0].effective, data[1].effective),
        join(data[0].permitted, data[1].permitted),
    ))
}

/// Sets the calling thread's effective and permitted sets to `keep`, less what it does not
/// hold, and clears its inheritable set. Returns what it kept. Threads spawned after this
/// inherit exactly that; the other threads are unchanged.
pub fn keep_thread_capabilities(keep: u64) -> Result<u64> {
    let (_, permitted) = thread_capabilities()?;
    let kept = keep & permitted;
    set_thread_capabilities(kept)?;
    Ok(kept)
}

fn set_thread_capabilities(mask: u64) -> Result<()> {
    let hdr = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let (lo, hi) = (mask as u32, (mask >> 32) as u32);
    let data = [
        CapData {
            effective: lo,
            permitted: lo,
            inheritable: 0,
        },
        CapData {
            effective: hi,
            permitted: hi,
            inheritable: 0,
        },
    ];
    // SAFETY: capset reads one header and two data structs, both valid for the call.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &hdr as *const CapHeader, data.as_ptr()) };
    if rc < 0 {
        return Err(Error::last("capset"));
    }
    Ok(())
}

/// A user to run as after the privileged work is done (`-Z USER`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunAs {
    /// Login name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
}

/// Looks a user up by name (or a numeric uid) in the password database.
pub fn lookup_user(name: &str) -> Result<RunAs> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| Error::new(crate::ErrorKind::Sys, format!("bad user name {name:?}")))?;
    let mut pw = std::mem::MaybeUninit::<libc::passwd>::zeroed();
    let mut buf = vec![0 as libc::c_char; 16384];
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwnam_r writes one passwd into `pw` and its strings into `buf` (of the
    // length given), and sets `out` to `pw` or to null; all three outlive the call.
    let rc = unsafe {
        libc::getpwnam_r(
            c.as_ptr(),
            pw.as_mut_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
            &mut out,
        )
    };
    if rc == 0 && !out.is_null() {
        // SAFETY: getpwnam_r succeeded and `out` points at `pw`, now filled.
        let pw = unsafe { pw.assume_init() };
        return Ok(RunAs {
            name: name.to_owned(),
            uid: pw.pw_uid,
            gid: pw.pw_gid,
        });
    }
    if let Ok(uid) = name.parse::<u32>() {
        return Ok(RunAs {
            name: name.to_owned(),
            uid,
            gid: uid,
        });
    }
    Err(Error::new(
        crate::ErrorKind::Sys,
        format!("no user {name:?} in the password database (-Z)"),
    ))
}

/// Switches the whole process (every thread: glibc applies set*id to all of them) to
/// `who`: supplementary groups, gid, then uid, and sets no_new_privs, so no capability or
/// set-id program can bring root back. Threads keep the file descriptors they hold
/// (sockets, rings, files). Verifies that root cannot be regained.
pub fn switch_user(who: &RunAs) -> Result<()> {
    set_ids(who)?;
    seal(who)
}

/// As [`switch_user`], but the calling thread keeps `keep` (less what it does not hold) in
/// its effective and permitted sets; every other thread loses all of its capabilities with
/// the uid change. Returns what the calling thread kept. Spawn the one thread that needs
/// them from here, then clear them in this one ([`drop_thread_capabilities`]).
pub fn switch_user_keeping(who: &RunAs, keep: u64) -> Result<u64> {
    let (_, permitted) = thread_capabilities()?;
    // SAFETY: prctl with value arguments only. KEEPCAPS is per thread: only this thread
    // keeps its permitted set across the uid change.
    if unsafe { libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) } != 0 {
        return Err(Error::last("prctl(PR_SET_KEEPCAPS)"));
    }
    let switched = set_ids(who);
    // SAFETY: as above.
    unsafe { libc::prctl(libc::PR_SET_KEEPCAPS, 0, 0, 0, 0) };
    switched?;
    // The uid change cleared the effective set; the permitted set is narrowed to `keep`
    // (CAP_SETUID among the rest goes) before root is tested below.
    let kept = keep & permitted;
    set_thread_capabilities(kept)?;
    seal(who)?;
    Ok(kept)
}

/// Supplementary groups, gid, then uid.
fn set_ids(who: &RunAs) -> Result<()> {
    let name = std::ffi::CString::new(who.name.as_str())
        .map_err(|_| Error::new(crate::ErrorKind::Sys, "bad user name".to_string()))?;
    // SAFETY: initgroups reads a NUL-terminated name; the gid is a plain value.
    if unsafe { libc::initgroups(name.as_ptr(), who.gid as libc::gid_t) } != 0 {
        // A numeric uid with no passwd entry: just its own group.
        let g = [who.gid as libc::gid_t];
        // SAFETY: setgroups reads one gid from a live array.
        if unsafe { libc::setgroups(1, g.as_ptr()) } != 0 {
            return Err(Error::last("setgroups"));
        }
    }
    // SAFETY: plain system calls with value arguments.
    if unsafe { libc::setgid(who.gid) } != 0 {
        return Err(Error::last("setgid"));
    }
    // SAFETY: as above.
    if unsafe { libc::setuid(who.uid) } != 0 {
        return Err(Error::last("setuid"));
    }
    Ok(())
}

/// Sets no_new_privs and checks that root cannot be regained. The switch is done: threads
/// dropping their capabilities from now on keep none.
fn seal(who: &RunAs) -> Result<()> {
    // Relaxed: read by threads this one spawns later (spawn orders it) or that already
    // dropped what they hold.
    SWITCH_PENDING.store(false, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: prctl with value arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(Error::last("prctl(PR_SET_NO_NEW_PRIVS)"));
    }
    // SAFETY: as above; this must fail once root is gone.
    if who.uid != 0 && unsafe { libc::setuid(0) } == 0 {
        return Err(Error::new(
            crate::ErrorKind::Permission,
            "root could be regained after switching user".to_string(),
        ));
    }
    Ok(())
}

/// Gives `file` to `who` (the files a capture made before it switched user).
pub fn chown_fd(file: &std::fs::File, who: &RunAs) -> Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: fchown on a descriptor the caller owns; values only.
    if unsafe { libc::fchown(file.as_raw_fd(), who.uid, who.gid) } != 0 {
        return Err(Error::last("fchown"));
    }
    Ok(())
}
