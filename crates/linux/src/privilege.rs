//! Dropping privilege once the sockets are open: a capture needs CAP_NET_RAW to open its
//! sockets and nothing after that.

use crate::error::{Error, Result};

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
const CAP_NET_RAW: u32 = 13;

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

/// Clears every capability of the calling thread (effective, permitted, inheritable).
/// Capabilities are per thread, so each thread that opened something privileged calls it.
pub fn drop_thread_capabilities() -> Result<()> {
    let hdr = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData::default(); 2];
    // SAFETY: capset reads one header and two data structs, both valid for the call.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &hdr as *const CapHeader, data.as_ptr()) };
    if rc < 0 {
        return Err(Error::last("capset"));
    }
    Ok(())
}

/// Whether the calling thread still has CAP_NET_RAW in its effective set.
pub fn has_net_raw() -> bool {
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
    rc == 0 && data[0].effective & (1 << CAP_NET_RAW) != 0
}
