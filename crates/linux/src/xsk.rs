//! AF_XDP sockets: a UMEM per socket, its fill and completion rings, the RX ring, the
//! XSKMAP redirect program, and attaching it to an interface through a BPF link.
//!
//! # Ring protocol (single producer, single consumer)
//!
//! Each ring is an array of `n` (a power of two) descriptors with two free-running u32
//! indices, `producer` and `consumer`, in memory shared with the kernel. The producer
//! writes descriptors, then stores `producer` with Release (R3); the consumer loads
//! `producer` with Acquire (A3), reads descriptors, then stores `consumer` with Release
//! (R4), which the producer loads with Acquire (A4) before reusing slots.
//!
//! - Fill ring: user space produces free UMEM frame addresses; the kernel consumes them.
//! - RX ring: the kernel produces `xdp_desc {addr, len}` of received frames; user space
//!   consumes them and gives each frame back through the fill ring.
//!
//! Only the worker that owns the socket touches its RX ring, so the local copy of our own
//! index is a plain field. The fill ring is the UMEM's: with one socket per queue only its
//! worker writes it; when the sockets of a queue share a UMEM (spread mode) their workers
//! write it under a mutex, once per batch.
//!
//! # Attachment
//!
//! The redirect program is attached with `BPF_LINK_CREATE`: the link lives exactly as long
//! as its file descriptor, so the program leaves the interface when corecap exits, even
//! when it is killed. An interface that already has an XDP program is refused, never
//! replaced.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::bpf;
use crate::error::{Error, ErrorKind, Result};

const AF_XDP: libc::c_int = 44;
const SOL_XDP: libc::c_int = 283;
const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_STATISTICS: libc::c_int = 7;
const XDP_PGOFF_RX_RING: i64 = 0;
const XDP_UMEM_PGOFF_FILL_RING: i64 = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: i64 = 0x1_8000_0000;
const XDP_SHARED_UMEM: u16 = 1 << 0;
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;

/// How the socket moves packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindMode {
    /// Frames land directly in the UMEM (driver support needed).
    ZeroCopy,
    /// The kernel copies frames into the UMEM.
    Copy,
}

/// How the XDP program is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachMode {
    /// In the driver (native XDP).
    Native,
    /// In the generic (skb) path.
    Generic,
}

#[repr(C)]
#[derive(Default)]
struct XdpUmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// Kernel counters of an AF_XDP socket (`XDP_STATISTICS`); cumulative, not reset on read.
#[repr(C)]
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdpStats {
    /// Dropped for reasons other than a full ring (no UMEM frame, bad length).
    pub rx_dropped: u64,
    /// Descriptors the kernel found invalid on RX.
    pub rx_invalid_descs: u64,
    /// Descriptors the kernel found invalid on TX.
    pub tx_invalid_descs: u64,
    /// Dropped because the RX ring was full.
    pub rx_ring_full: u64,
    /// Times the fill ring was empty when a frame arrived.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the TX ring was empty.
    pub tx_ring_empty_descs: u64,
}

fn set<T>(fd: i32, name: libc::c_int, v: &T, what: &str) -> Result<()> {
    // SAFETY: `v` is valid for `size_of::<T>()` bytes during the call.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            SOL_XDP,
            name,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as u32,
        )
    };
    if rc < 0 {
        return Err(Error::last(what));
    }
    Ok(())
}

fn get<T: Default>(fd: i32, name: libc::c_int, what: &str) -> Result<T> {
    let mut v = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `v` is writable for `len` bytes during the call.
    let rc = unsafe { libc::getsockopt(fd, SOL_XDP, name, (&mut v as *mut T).cast(), &mut len) };
    if rc < 0 {
        return Err(Error::last(what));
    }
    Ok(v)
}

/// A private anonymous or ring mapping, unmapped on drop.
#[derive(Debug)]
struct Map {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: plain memory. A socket's own rings are touched by its one worker; a UMEM
// shared by the sockets of a queue is read frame by frame by the worker whose RX ring
// delivered the frame (the kernel hands each frame to one socket), its fill ring is
// written under a mutex, and the index words are atomics.
unsafe impl Send for Map {}
// SAFETY: as above: shared access goes through atomics, the fill-ring mutex, or frames
// owned by one worker at a time.
unsafe impl Sync for Map {}

impl Map {
    fn anon(len: usize) -> Result<Self> {
        // SAFETY: a fresh private anonymous mapping; the result is checked. Pages are
        // touched first by the calling (pinned) worker, so they come from its NUMA node.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        Self::checked(p, len, "mmap of the UMEM")
    }

    fn ring(fd: i32, len: usize, pgoff: i64) -> Result<Self> {
        // SAFETY: maps a ring the kernel made for this socket; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff,
            )
        };
        Self::checked(p, len, "mmap of an AF_XDP ring")
    }

    fn checked(p: *mut libc::c_void, len: usize, what: &str) -> Result<Self> {
        if p == libc::MAP_FAILED {
            return Err(Error::last(what));
        }
        let ptr = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| Error::new(ErrorKind::Sys, "mmap returned null"))?;
        Ok(Self { ptr, len })
    }

    fn word(&self, off: u64) -> &AtomicU32 {
        let off = off as usize;
        assert!(off.is_multiple_of(4) && off + 4 <= self.len);
        // SAFETY: in bounds, aligned; the word is shared with the kernel and only accessed
        // atomically from user space.
        unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(off).cast::<u32>()) }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly this mapping; no borrow of it outlives `self`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// One ring of a socket: descriptors plus the two indices.
#[derive(Debug)]
struct Ring {
    map: Map,
    off: RingOffset,
    mask: u32,
    /// Our own index (producer for the fill ring, consumer for RX); only we write it.
    local: u32,
}

impl Ring {
    /// Maps the ring of `entries` entries of `entry` bytes the kernel made at `pgoff`.
    fn map(fd: i32, off: RingOffset, entries: u32, entry: usize, pgoff: i64) -> Result<Self> {
        Ok(Self {
            map: Map::ring(fd, off.desc as usize + entries as usize * entry, pgoff)?,
            off,
            mask: entries - 1,
            local: 0,
        })
    }

    fn producer(&self) -> &AtomicU32 {
        self.map.word(self.off.producer)
    }
    fn consumer(&self) -> &AtomicU32 {
        self.map.word(self.off.consumer)
    }
    fn desc_u64(&self, idx: u32, word: usize) -> u64 {
        let off = self.off.desc as usize + (idx & self.mask) as usize * 16 + word * 8;
        assert!(off + 8 <= self.map.len);
        // SAFETY: in bounds; the descriptor was published by the kernel (A3) and is not
        // rewritten until we move the consumer index past it (R4).
        unsafe { std::ptr::read_volatile(self.map.ptr.as_ptr().add(off).cast::<u64>()) }
    }
    fn write_addr(&self, idx: u32, addr: u64) {
        let off = self.off.desc as usize + (idx & self.mask) as usize * 8;
        assert!(off + 8 <= self.map.len);
        // SAFETY: in bounds; this fill-ring slot is ours until we publish it (R3).
        unsafe { std::ptr::write_volatile(self.map.ptr.as_ptr().add(off).cast::<u64>(), addr) };
    }
}

/// A UMEM: the frames, the fill ring and the completion ring, registered by the first
/// socket of a queue. In spread mode the other sockets of the queue share it (and its
/// fill ring, as the kernel requires for one queue), so the fill ring has several
/// producers: they write it under `fill`'s mutex, once per batch of frames. The mutex
/// orders their slot writes and producer stores (R3 inside the lock).
#[derive(Debug)]
struct Umem {
    map: Map,
    fill: Mutex<Ring>,
    _comp: Ring,
    frames: u32,
    frame_size: u32,
    /// A duplicate of the registering socket, named by `XDP_SHARED_UMEM` binds.
    owner: OwnedFd,
}

/// The UMEM of a queue's first socket, to bind the queue's other sockets to.
#[derive(Clone, Debug)]
pub struct SharedUmem {
    umem: Arc<Umem>,
    mode: BindMode,
}

/// An AF_XDP socket bound to one RX queue, with its own UMEM or one shared with the
/// other sockets of its queue.
#[derive(Debug)]
pub struct XskSocket {
    fd: OwnedFd,
    umem: Arc<Umem>,
    rx: Ring,
    mode: BindMode,
}

/// Binds an AF_XDP socket to `queue` of `ifindex`.
fn bind(raw: i32, ifindex: u32, queue: u32, flags: u16, shared_umem_fd: u32) -> Result<()> {
    let sa = SockaddrXdp {
        family: AF_XDP as u16,
        flags,
        ifindex,
        queue_id: queue,
        shared_umem_fd,
    };
    // SAFETY: `sa` is a valid sockaddr_xdp of the size passed.
    let rc = unsafe {
        libc::bind(
            raw,
            (&sa as *const SockaddrXdp).cast(),
            std::mem::size_of::<SockaddrXdp>() as u32,
        )
    };
    if rc < 0 {
        return Err(Error::last(format!("binding AF_XDP to queue {queue}")));
    }
    Ok(())
}

/// One received frame.
#[derive(Clone, Copy, Debug)]
pub struct XskFrame {
    addr: u64,
    len: u32,
}

impl XskSocket {
    /// Creates a socket with `frames` UMEM frames of `frame_size` bytes and binds it to
    /// `queue` of `ifindex`, trying zero-copy first unless `force_copy`.
    pub fn open(
        ifindex: u32,
        queue: u32,
        frames: u32,
        frame_size: u32,
        force_copy: bool,
    ) -> Result<Self> {
        let frames = frames.next_power_of_two();
        // SAFETY: plain system call; the result is checked.
        let fd = unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            let e = Error::last("cannot open an AF_XDP socket");
            return Err(if e.kind() == ErrorKind::Unsupported {
                Error::new(
                    ErrorKind::Unsupported,
                    "this kernel has no AF_XDP (CONFIG_XDP_SOCKETS)",
                )
            } else {
                e
            });
        }
        // SAFETY: `fd` was just returned by socket() and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let raw = fd.as_raw_fd();
        let umem = Map::anon(frames as usize * frame_size as usize)?;
        let reg = XdpUmemReg {
            addr: umem.ptr.as_ptr() as u64,
            len: umem.len as u64,
            chunk_size: frame_size,
            ..Default::default()
        };
        set(raw, XDP_UMEM_REG, &reg, "XDP_UMEM_REG")?;
        let n = frames as libc::c_int;
        set(raw, XDP_UMEM_FILL_RING, &n, "XDP_UMEM_FILL_RING")?;
        set(
            raw,
            XDP_UMEM_COMPLETION_RING,
            &n,
            "XDP_UMEM_COMPLETION_RING",
        )?;
        set(raw, XDP_RX_RING, &n, "XDP_RX_RING")?;
        let off: MmapOffsets = get(raw, XDP_MMAP_OFFSETS, "XDP_MMAP_OFFSETS")?;
        // Fill and completion entries are u64 addresses; RX entries are 16-byte xdp_desc.
        let mut fill = Ring::map(raw, off.fr, frames, 8, XDP_UMEM_PGOFF_FILL_RING)?;
        let comp = Ring::map(raw, off.cr, frames, 8, XDP_UMEM_PGOFF_COMPLETION_RING)?;
        let rx = Ring::map(raw, off.rx, frames, 16, XDP_PGOFF_RX_RING)?;
        // Give the kernel every frame.
        for i in 0..frames {
            fill.write_addr(i, u64::from(i) * u64::from(frame_size));
        }
        fill.local = frames;
        // R3: descriptors first, then the producer index.
        fill.producer().store(frames, Ordering::Release);
        let mode = if !force_copy && bind(raw, ifindex, queue, XDP_ZEROCOPY, 0).is_ok() {
            BindMode::ZeroCopy
        } else {
            bind(raw, ifindex, queue, XDP_COPY, 0)?;
            BindMode::Copy
        };
        let owner = fd
            .try_clone()
            .map_err(|e| Error::new(ErrorKind::Sys, format!("dup of the AF_XDP socket: {e}")))?;
        Ok(Self {
            fd,
            umem: Arc::new(Umem {
                map: umem,
                fill: Mutex::new(fill),
                _comp: comp,
                frames,
                frame_size,
                owner,
            }),
            rx,
            mode,
        })
    }

    /// A handle on this socket's UMEM, for [`XskSocket::open_shared`] on other threads.
    pub fn shared_umem(&self) -> SharedUmem {
        SharedUmem {
            umem: self.umem.clone(),
            mode: self.mode,
        }
    }

    /// Another socket on the same queue, sharing the first socket's UMEM and fill ring:
    /// the XDP program spreads the queue's frames over such sockets.
    pub fn open_shared(first: &SharedUmem, ifindex: u32, queue: u32) -> Result<Self> {
        // SAFETY: plain system call; the result is checked.
        let fd = unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(Error::last("cannot open an AF_XDP socket"));
        }
        // SAFETY: `fd` was just returned by socket() and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let raw = fd.as_raw_fd();
        let umem = first.umem.clone();
        let n = umem.frames as libc::c_int;
        // Only an RX ring: a socket sharing a queue's UMEM must not make fill or
        // completion rings of its own.
        set(raw, XDP_RX_RING, &n, "XDP_RX_RING")?;
        let off: MmapOffsets = get(raw, XDP_MMAP_OFFSETS, "XDP_MMAP_OFFSETS")?;
        let rx = Ring::map(raw, off.rx, umem.frames, 16, XDP_PGOFF_RX_RING)?;
        bind(
            raw,
            ifindex,
            queue,
            XDP_SHARED_UMEM,
            umem.owner.as_raw_fd() as u32,
        )?;
        Ok(Self {
            fd,
            umem,
            rx,
            mode: first.mode,
        })
    }

    /// The bind mode the kernel accepted.
    pub fn mode(&self) -> BindMode {
        self.mode
    }

    /// Raw descriptor (for the XSKMAP and poll).
    pub fn raw(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Takes up to `max` received frames into `out`; returns how many.
    pub fn receive(&mut self, out: &mut Vec<XskFrame>, max: usize) -> usize {
        out.clear();
        // A3: pairs with the kernel's release of the RX producer (xskq_prod_submit).
        let prod = self.rx.producer().load(Ordering::Acquire);
        let avail = prod.wrapping_sub(self.rx.local) as usize;
        let n = avail.min(max);
        for k in 0..n as u32 {
            let idx = self.rx.local.wrapping_add(k);
            let addr = self.rx.desc_u64(idx, 0);
            let len = self.rx.desc_u64(idx, 1) as u32;
            out.push(XskFrame { addr, len });
        }
        n
    }

    /// The bytes of a received frame, or an empty slice for a descriptor out of range.
    pub fn data(&self, f: &XskFrame) -> &[u8] {
        let start = f.addr as usize;
        let end = start.saturating_add(f.len as usize);
        let map = &self.umem.map;
        if end > map.len {
            return &[];
        }
        // SAFETY: [start, end) is inside the UMEM; the kernel gave this frame to this
        // socket alone and does not write it until it is handed back through the fill ring
        // in `release`.
        unsafe { std::slice::from_raw_parts(map.ptr.as_ptr().add(start), end - start) }
    }

    /// Hands the frames back: moves the RX consumer past them and refills the fill ring.
    pub fn release(&mut self, frames: &[XskFrame]) {
        if frames.is_empty() {
            return;
        }
        let chunk = u64::from(self.umem.frame_size);
        {
            // Once per batch; uncontended unless the queue is spread over several sockets.
            let mut fill = self.umem.fill.lock().unwrap_or_else(|p| p.into_inner());
            for (k, f) in frames.iter().enumerate() {
                // Align down to the chunk start (the kernel may add headroom).
                let base = f.addr - f.addr % chunk;
                fill.write_addr(fill.local.wrapping_add(k as u32), base);
            }
            fill.local = fill.local.wrapping_add(frames.len() as u32);
            // R3: pairs with the kernel's Acquire of the fill producer.
            fill.producer().store(fill.local, Ordering::Release);
        }
        self.rx.local = self.rx.local.wrapping_add(frames.len() as u32);
        // R4: our reads of these descriptors end before the kernel reuses the slots.
        self.rx.consumer().store(self.rx.local, Ordering::Release);
    }

    /// Waits up to `timeout_ms` for frames.
    pub fn wait(&self, timeout_ms: i32) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.raw(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the call.
        unsafe { libc::poll(&mut pfd, 1, timeout_ms) > 0 }
    }

    /// Kernel counters (cumulative).
    pub fn stats(&self) -> Result<XdpStats> {
        get(self.raw(), XDP_STATISTICS, "XDP_STATISTICS")
    }
}

/// The XDP program (bpf/corecap_xdp.c, built by build.rs) with its XSKMAP, attached to an
/// interface through a BPF link for as long as this value lives.
#[derive(Debug)]
pub struct XdpRedirect {
    ebpf: aya::Ebpf,
    link: Option<aya::programs::xdp::XdpLinkId>,
    mode: Option<AttachMode>,
}

/// The compiled program, aligned as the ELF loader wants it.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/corecap_xdp.o"));
const PROGRAM: &str = "corecap_xdp";
const MAP: &str = "XSKS";

fn load_error(e: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!("loading the XDP program: {e} (needs root and a kernel with BPF)"),
    )
}

impl XdpRedirect {
    /// Loads the program with an XSKMAP of `queues * spread` slots: with `spread` 1, queue
    /// q goes to slot q; with more, the frames of queue q are spread over slots
    /// `q * spread ..` by the symmetric flow hash (see [`crate::xdp_prog`]).
    pub fn new(queues: u32, spread: u32) -> Result<Self> {
        Self::load(queues.max(1), spread.max(1), false)
    }

    /// Loads the program; with `return_slot` it returns the slot instead of redirecting
    /// (for tests through BPF_PROG_TEST_RUN).
    fn load(queues: u32, spread: u32, return_slot: bool) -> Result<Self> {
        let ret = u32::from(return_slot);
        let mut ebpf = aya::EbpfLoader::new()
            .set_global("SPREAD", &spread, true)
            .set_global("RETURN_SLOT", &ret, true)
            .set_max_entries(MAP, queues * spread)
            .load(OBJECT)
            .map_err(load_error)?;
        let prog: &mut aya::programs::Xdp = ebpf
            .program_mut(PROGRAM)
            .ok_or_else(|| load_error("no program in the object"))?
            .try_into()
            .map_err(load_error)?;
        prog.load().map_err(load_error)?;
        Ok(Self {
            ebpf,
            link: None,
            mode: None,
        })
    }

    fn program(&mut self) -> Result<&mut aya::programs::Xdp> {
        self.ebpf
            .program_mut(PROGRAM)
            .ok_or_else(|| load_error("no program in the object"))?
            .try_into()
            .map_err(load_error)
    }

    /// Puts `sock` in the map at `slot` (`queue * spread + k`).
    pub fn insert(&mut self, slot: u32, sock: &XskSocket) -> Result<()> {
        let map = self
            .ebpf
            .map_mut(MAP)
            .ok_or_else(|| load_error("no XSKMAP in the object"))?;
        let mut xsks = aya::maps::XskMap::try_from(map).map_err(load_error)?;
        xsks.set(slot, sock.raw(), 0).map_err(|e| {
            Error::new(
                ErrorKind::Sys,
                format!("adding the socket to the XSKMAP: {e}"),
            )
        })
    }

    /// Attaches to `ifindex`, natively if the driver allows, else generically. Refuses an
    /// interface that already has an XDP program.
    pub fn attach(&mut self, ifindex: u32, iface: &str) -> Result<AttachMode> {
        use aya::programs::{ProgramError, XdpFlags};
        let mut last = None;
        for mode in [AttachMode::Native, AttachMode::Generic] {
            let flags = match mode {
                AttachMode::Native => XdpFlags::DRV_MODE,
                AttachMode::Generic => XdpFlags::SKB_MODE,
            };
            match self.program()?.attach_to_if_index(ifindex, flags) {
                Ok(link) => {
                    self.link = Some(link);
                    self.mode = Some(mode);
                    return Ok(mode);
                }
                Err(ProgramError::SyscallError(e))
                    if matches!(
                        e.io_error.raw_os_error(),
                        Some(libc::EBUSY) | Some(libc::EEXIST)
                    ) =>
                {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        format!("{iface} already has an XDP program attached; corecap does not replace it (see `ip link show {iface}`)"),
                    ));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "attaching the XDP program: {}",
                last.map_or("no mode worked".into(), |e| {
                    let src = std::error::Error::source(&e).map(|s| format!(": {s}"));
                    format!("{e}{}", src.unwrap_or_default())
                })
            ),
        )
        .on(iface))
    }

    /// How the program is attached, if it is.
    pub fn mode(&self) -> Option<AttachMode> {
        self.link.as_ref().and(self.mode)
    }

    /// Detaches now (also done on drop, and by the kernel when the process exits: the
    /// link is a file descriptor).
    pub fn detach(&mut self) {
        if let Some(link) = self.link.take() {
            if let Ok(p) = self.program() {
                let _ = p.detach(link);
            }
        }
    }

    /// Runs the program once on `frame` (BPF_PROG_TEST_RUN) and returns its verdict.
    pub fn test_run(&mut self, frame: &[u8]) -> Result<u32> {
        use std::os::fd::AsFd;
        let p = self.program()?;
        let fd = p.fd().map_err(load_error)?;
        bpf::test_run(fd.as_fd(), frame)
    }
}

/// A program that returns the slot it would redirect `frame` to, for tests.
pub fn slot_program(spread: u32) -> Result<XdpRedirect> {
    XdpRedirect::load(1, spread.max(1), true)
}
