//! The bpf(2) calls corecap makes: create an array map, load an XDP program, and run it
//! on live frames (`BPF_PROG_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES`), which is how the
//! generator's XDP engine transmits.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::{Error, ErrorKind, Result};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_XDP: u32 = 37;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BpfInsn {
    /// Opcode.
    pub code: u8,
    /// Destination register in the low nibble, source register in the high nibble.
    pub regs: u8,
    /// Signed offset.
    pub off: i16,
    /// Signed immediate.
    pub imm: i32,
}

impl BpfInsn {
    /// Builds an instruction.
    pub const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Self {
        Self {
            code,
            regs: (dst & 0x0f) | (src << 4),
            off,
            imm,
        }
    }
}

const _: () = assert!(std::mem::size_of::<BpfInsn>() == 8);

/// `union bpf_attr`, as a zeroed 128-byte buffer filled at the offsets each command uses.
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Self {
        Self([0; 128])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
}

fn bpf(cmd: libc::c_long, attr: &mut Attr, what: &str) -> Result<libc::c_long> {
    // SAFETY: `attr` is a valid, initialised bpf_attr buffer of the size passed; every
    // pointer stored in it refers to memory the caller keeps alive for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.0.as_mut_ptr(),
            attr.0.len() as libc::c_uint,
        )
    };
    if rc < 0 {
        return Err(Error::last(what));
    }
    Ok(rc)
}

fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: `fd` was just returned by bpf(2) and is owned by nothing else.
    unsafe { OwnedFd::from_raw_fd(fd as i32) }
}

/// Creates an array map of `entries` values of `value_size` bytes.
pub fn array_map(value_size: u32, entries: u32) -> Result<OwnedFd> {
    map_create(BPF_MAP_TYPE_ARRAY, 4, value_size, entries)
}

/// Creates a map of type `map_type`.
pub fn map_create(map_type: u32, key_size: u32, value_size: u32, entries: u32) -> Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, map_type)
        .u32(4, key_size)
        .u32(8, value_size)
        .u32(12, entries);
    bpf(
        BPF_MAP_CREATE,
        &mut a,
        "BPF_MAP_CREATE (needs CAP_BPF or root)",
    )
    .map(owned)
}

/// Sets `key` to `value` in a map.
pub fn map_update(map: &OwnedFd, key: &[u8], value: &[u8]) -> Result<()> {
    let mut a = Attr::new();
    a.u32(0, map.as_raw_fd() as u32)
        .u64(8, key.as_ptr() as u64)
        .u64(16, value.as_ptr() as u64);
    bpf(BPF_MAP_UPDATE_ELEM, &mut a, "BPF_MAP_UPDATE_ELEM").map(|_| ())
}

/// Attaches an XDP program to an interface through a BPF link (`flags`: XDP_FLAGS_*).
/// The program stays attached exactly as long as the returned descriptor is open.
pub fn link_create_xdp(prog: &OwnedFd, ifindex: u32, flags: u32) -> Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, prog.as_raw_fd() as u32)
        .u32(4, ifindex)
        .u32(8, BPF_XDP)
        .u32(12, flags);
    bpf(
        BPF_LINK_CREATE,
        &mut a,
        "attaching the XDP program (BPF_LINK_CREATE)",
    )
    .map(owned)
}

/// Loads an XDP program. On a verifier error the message carries the verifier's log.
pub fn load_xdp(insns: &[BpfInsn]) -> Result<OwnedFd> {
    let license = c"GPL";
    let mut log = vec![0u8; 65536];
    let mut a = Attr::new();
    a.u32(0, BPF_PROG_TYPE_XDP)
        .u32(4, insns.len() as u32)
        .u64(8, insns.as_ptr() as u64)
        .u64(16, license.as_ptr() as u64)
        .u32(24, 1)
        .u32(28, log.len() as u32)
        .u64(32, log.as_mut_ptr() as u64);
    bpf(BPF_PROG_LOAD, &mut a, "BPF_PROG_LOAD")
        .map(owned)
        .map_err(|e| {
            let end = log.iter().position(|b| *b == 0).unwrap_or(0);
            let text = String::from_utf8_lossy(&log[..end]);
            let last: Vec<&str> = text.lines().rev().take(3).collect();
            if last.is_empty() {
                e
            } else {
                Error::new(
                    ErrorKind::Unsupported,
                    format!("{}; verifier: {}", crate::error_chain(&e), last.join(" | ")),
                )
            }
        })
}

/// Runs `prog` once on a copy of `frame` (BPF_PROG_TEST_RUN) and returns what it
/// returned: a way to test a program's logic without an interface.
pub fn test_run(prog: std::os::fd::BorrowedFd<'_>, frame: &[u8]) -> Result<u32> {
    let mut out = vec![0u8; frame.len() + 256];
    let mut a = Attr::new();
    a.u32(0, prog.as_raw_fd() as u32)
        .u32(8, frame.len() as u32)
        .u32(12, out.len() as u32)
        .u64(16, frame.as_ptr() as u64)
        .u64(24, out.as_mut_ptr() as u64)
        .u32(32, 1);
    bpf(BPF_PROG_TEST_RUN, &mut a, "BPF_PROG_TEST_RUN")?;
    Ok(u32::from_ne_bytes([a.0[4], a.0[5], a.0[6], a.0[7]]))
}

/// Runs `prog` `repeat` times on `frame` as live frames arriving on `ifindex`: each
/// XDP_TX verdict transmits a frame on that interface. `batch` frames go per NAPI-like
/// batch (at most 256).
pub fn run_live_frames(
    prog: &OwnedFd,
    frame: &[u8],
    ifindex: u32,
    repeat: u32,
    batch: u32,
) -> Result<()> {
    // struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index, egress_ifindex
    let ctx: [u32; 6] = [0, frame.len() as u32, 0, ifindex, 0, 0];
    let mut a = Attr::new();
    a.u32(0, prog.as_raw_fd() as u32)
        .u32(8, frame.len() as u32)
        .u64(16, frame.as_ptr() as u64)
        .u32(32, repeat)
        .u32(40, std::mem::size_of_val(&ctx) as u32)
        .u64(48, ctx.as_ptr() as u64)
        .u32(64, BPF_F_TEST_XDP_LIVE_FRAMES)
        .u32(72, batch.clamp(1, 256));
    bpf(BPF_PROG_TEST_RUN, &mut a, "BPF_PROG_RUN with live frames").map(|_| ())
}
