//! Filter compilation with libpcap (`pcap_compile`, loaded at run time) and the small classic BPF programs
//! corecap builds itself: the snap-length program and the queue adapter prefix.
//!
//! A filter for a live interface is compiled on an activated libpcap handle of that
//! interface, so that libpcap emits the VLAN ancillary loads the kernel needs (`vlan 100`
//! matches nothing when compiled on a dead handle, because the kernel strips the tag).

use std::ffi::{c_char, c_int, c_uint, CStr, CString};

use crate::abi::{self, sock_filter};
use crate::error::{Error, ErrorKind, Result};

#[repr(C)]
struct BpfProgram {
    bf_len: c_uint,
    bf_insns: *mut sock_filter,
}

#[repr(C)]
struct PcapT {
    _opaque: [u8; 0],
}

const PCAP_ERRBUF_SIZE: usize = 256;
const PCAP_NETMASK_UNKNOWN: u32 = 0xffff_ffff;

/// The shared objects tried, in order, when `CORECAP_LIBPCAP` names none: the runtime
/// package's soname on Debian and Ubuntu (libpcap0.8), then on Fedora, Arch and Alpine, then
/// the development link.
const LIBPCAP_NAMES: [&str; 3] = ["libpcap.so.0.8", "libpcap.so.1", "libpcap.so"];

/// libpcap's entry points, resolved once at run time. corecap does not link libpcap: a build
/// needs no system library, and a machine without libpcap runs everything but filters (a
/// filter there gets one error naming the package to install).
struct Libpcap {
    create: unsafe extern "C" fn(*const c_char, *mut c_char) -> *mut PcapT,
    set_snaplen: unsafe extern "C" fn(*mut PcapT, c_int) -> c_int,
    set_buffer_size: unsafe extern "C" fn(*mut PcapT, c_int) -> c_int,
    activate: unsafe extern "C" fn(*mut PcapT) -> c_int,
    open_dead: unsafe extern "C" fn(c_int, c_int) -> *mut PcapT,
    fopen_offline: unsafe extern "C" fn(*mut libc::FILE, *mut c_char) -> *mut PcapT,
    compile: unsafe extern "C" fn(*mut PcapT, *mut BpfProgram, *const c_char, c_int, u32) -> c_int,
    freecode: unsafe extern "C" fn(*mut BpfProgram),
    geterr: unsafe extern "C" fn(*mut PcapT) -> *mut c_char,
    statustostr: unsafe extern "C" fn(c_int) -> *const c_char,
    close: unsafe extern "C" fn(*mut PcapT),
    /// Keeps the object mapped for as long as the pointers above are used: for ever, since
    /// the one `Libpcap` lives in a static.
    _lib: libloading::Library,
}

static LIBPCAP: std::sync::OnceLock<std::result::Result<Libpcap, String>> =
    std::sync::OnceLock::new();

/// libpcap, loaded on first use; the error says what was tried and what to install.
fn libpcap() -> Result<&'static Libpcap> {
    LIBPCAP
        .get_or_init(Libpcap::load)
        .as_ref()
        .map_err(|msg| Error::new(ErrorKind::Unsupported, msg.clone()))
}

/// Whether libpcap can be loaded on this machine (filters need it; nothing else does).
pub fn libpcap_available() -> bool {
    libpcap().is_ok()
}

impl Libpcap {
    fn load() -> std::result::Result<Self, String> {
        let named = std::env::var_os("CORECAP_LIBPCAP");
        let candidates: Vec<std::ffi::OsString> = match &named {
            Some(path) => vec![path.clone()],
            None => LIBPCAP_NAMES.iter().map(Into::into).collect(),
        };
        let mut last = String::new();
        for name in &candidates {
            // SAFETY: libpcap's initialisers only set up its own tables; loading it runs no
            // code that depends on the state of this process.
            match unsafe { libloading::Library::new(name) } {
                Ok(lib) => return Self::resolve(lib).map_err(|e| format!("{e}")),
                Err(e) => last = e.to_string(),
            }
        }
        let tried = candidates
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(", ");
        Err(format!(
            "filters need libpcap, which is not installed (tried {tried}: {last}); install it \
             (Debian/Ubuntu: apt-get install libpcap0.8, Fedora: dnf install libpcap) or name \
             it in CORECAP_LIBPCAP"
        ))
    }

    fn resolve(lib: libloading::Library) -> std::result::Result<Self, libloading::Error> {
        // SAFETY: each symbol is looked up by its libpcap name and given the C signature
        // libpcap declares for it in pcap/pcap.h (1.x, stable since 1.0).
        unsafe {
            Ok(Self {
                create: *lib.get(b"pcap_create\0")?,
                set_snaplen: *lib.get(b"pcap_set_snaplen\0")?,
                set_buffer_size: *lib.get(b"pcap_set_buffer_size\0")?,
                activate: *lib.get(b"pcap_activate\0")?,
                open_dead: *lib.get(b"pcap_open_dead\0")?,
                fopen_offline: *lib.get(b"pcap_fopen_offline\0")?,
                compile: *lib.get(b"pcap_compile\0")?,
                freecode: *lib.get(b"pcap_freecode\0")?,
                geterr: *lib.get(b"pcap_geterr\0")?,
                statustostr: *lib.get(b"pcap_statustostr\0")?,
                close: *lib.get(b"pcap_close\0")?,
                _lib: lib,
            })
        }
    }
}

/// An open libpcap handle, closed on drop.
struct Handle(*mut PcapT, &'static Libpcap);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle came from pcap_create/pcap_open_dead and is closed once.
        unsafe { (self.1.close)(self.0) };
    }
}

impl Handle {
    fn error(&self) -> String {
        // SAFETY: pcap_geterr returns a NUL-terminated string owned by the live handle.
        unsafe { CStr::from_ptr((self.1.geterr)(self.0)) }
            .to_string_lossy()
            .into_owned()
    }

    fn compile(&self, expr: &str) -> Result<Vec<sock_filter>> {
        let c =
            CString::new(expr).map_err(|_| Error::new(ErrorKind::Filter, "filter contains NUL"))?;
        let mut prog = BpfProgram {
            bf_len: 0,
            bf_insns: std::ptr::null_mut(),
        };
        // SAFETY: valid handle, program out-parameter and NUL-terminated expression.
        let rc =
            unsafe { (self.1.compile)(self.0, &mut prog, c.as_ptr(), 1, PCAP_NETMASK_UNKNOWN) };
        if rc != 0 {
            return Err(Error::new(
                ErrorKind::Filter,
                format!("invalid filter '{expr}': {}", self.error()),
            ));
        }
        let out = if prog.bf_insns.is_null() {
            Vec::new()
        } else {
            // SAFETY: libpcap returned `bf_len` instructions at `bf_insns`.
            unsafe { std::slice::from_raw_parts(prog.bf_insns, prog.bf_len as usize) }.to_vec()
        };
        // SAFETY: frees the program libpcap allocated above, once.
        unsafe { (self.1.freecode)(&mut prog) };
        Ok(out)
    }
}

// SAFETY: a pcap_t is not tied to the thread that made it; libpcap needs only that one
// thread uses it at a time, which owning the Handle ensures (it is not Sync).
unsafe impl Send for Handle {}

/// An activated libpcap handle of an interface: what a filter that needs a live handle is
/// compiled on. Opening one needs CAP_NET_RAW; compiling on it needs nothing.
pub struct LiveHandle {
    h: Handle,
    iface: String,
}

impl std::fmt::Debug for LiveHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveHandle")
            .field("iface", &self.iface)
            .finish_non_exhaustive()
    }
}

impl LiveHandle {
    /// Opens and activates a handle on `iface` with a 1 MiB buffer (needs CAP_NET_RAW).
    pub fn open(iface: &str, snaplen: u32) -> Result<Self> {
        let dev = CString::new(iface)
            .map_err(|_| Error::new(ErrorKind::NoSuchInterface, "interface name contains NUL"))?;
        let lib = libpcap()?;
        let mut errbuf = [0 as c_char; PCAP_ERRBUF_SIZE];
        // SAFETY: NUL-terminated name and an errbuf of PCAP_ERRBUF_SIZE bytes.
        let p = unsafe { (lib.create)(dev.as_ptr(), errbuf.as_mut_ptr()) };
        if p.is_null() {
            // SAFETY: libpcap wrote a NUL-terminated message into errbuf.
            let msg = unsafe { CStr::from_ptr(errbuf.as_ptr()) }
                .to_string_lossy()
                .into_owned();
            return Err(Error::new(ErrorKind::Filter, msg).on(iface));
        }
        let h = Handle(p, lib);
        // SAFETY: valid handle not yet activated; these only set fields.
        unsafe {
            (lib.set_snaplen)(h.0, snaplen.min(i32::MAX as u32) as c_int);
            (lib.set_buffer_size)(h.0, 1 << 20);
        }
        // SAFETY: valid handle.
        let rc = unsafe { (lib.activate)(h.0) };
        if rc < 0 {
            let msg = h.error();
            let msg = if msg.is_empty() {
                // SAFETY: pcap_statustostr returns a static NUL-terminated string.
                unsafe { CStr::from_ptr((lib.statustostr)(rc)) }
                    .to_string_lossy()
                    .into_owned()
            } else {
                msg
            };
            return Err(Error::new(
                ErrorKind::Filter,
                format!("cannot open {iface} to compile the filter: {msg}"),
            ));
        }
        Ok(Self {
            h,
            iface: iface.to_owned(),
        })
    }

    /// Compiles `expr` for this interface.
    pub fn compile(&self, expr: &str) -> Result<Vec<sock_filter>> {
        self.h.compile(expr)
    }
}

/// Opens a live handle for an interface and snap length.
pub type LiveOpener = dyn Fn(&str, u32) -> Result<LiveHandle> + Send + Sync;

static LIVE_OPENER: std::sync::OnceLock<Box<LiveOpener>> = std::sync::OnceLock::new();

/// Makes [`compile_live`] get its handles from `open` instead of opening them in the calling
/// thread: the daemon's threads that parse requests hold no capability, so one thread that
/// keeps CAP_NET_RAW opens the handle and the filter is compiled where it was asked for.
/// Set once per process; a second call is refused.
pub fn set_live_opener(open: Box<LiveOpener>) -> Result<()> {
    LIVE_OPENER.set(open).map_err(|_| {
        Error::new(
            ErrorKind::Sys,
            "the live-handle opener is already set".to_string(),
        )
    })
}

/// Compiles `expr` for live capture on `iface`. Opening the handle needs CAP_NET_RAW, like
/// the capture itself, unless [`set_live_opener`] gave another way to open it.
pub fn compile_live(iface: &str, expr: &str, snaplen: u32) -> Result<Vec<sock_filter>> {
    let h = match LIVE_OPENER.get() {
        Some(open) => open(iface, snaplen)?,
        None => LiveHandle::open(iface, snaplen)?,
    };
    h.compile(expr)
}

/// Primitives whose code differs on a live Linux handle: VLAN tags live in the packet's
/// metadata there (libpcap's special VLAN handling), and direction and ifindex need the
/// socket's ancillary data.
const LIVE_ONLY: [&str; 4] = ["vlan", "inbound", "outbound", "ifindex"];

/// Whether `expr` needs a live handle to compile right (see [`LIVE_ONLY`]).
pub fn needs_live_handle(expr: &str) -> bool {
    expr.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| LIVE_ONLY.iter().any(|l| w.eq_ignore_ascii_case(l)))
}

/// Compiles `expr` for a socket on `iface` of link type `linktype`. Only expressions that
/// need it open a live handle (which costs a socket and a ring, tens of milliseconds);
/// the others compile offline to the same program.
pub fn compile_for_socket(
    iface: &str,
    linktype: u16,
    expr: &str,
    snaplen: u32,
) -> Result<Vec<sock_filter>> {
    if needs_live_handle(expr) {
        compile_live(iface, expr, snaplen)
    } else {
        compile_offline(linktype, snaplen, expr)
    }
}

/// The DLT_ value libpcap's `pcap_open_dead` wants for a file's LINKTYPE_ value. They are
/// the same number except for the few link types whose DLT_ differs between platforms,
/// which files record under a number of their own (libpcap's `linktype_to_dlt`): raw IP is
/// LINKTYPE_RAW 101 in a file and DLT_RAW 12 on Linux.
pub fn dlt_of_linktype(linktype: u16) -> c_int {
    match linktype {
        100 => 11, // ATM_RFC1483
        101 => 12, // RAW
        102 => 15, // SLIP_BSDOS
        103 => 16, // PPP_BSDOS
        106 => 19, // ATM_CLIP
        lt => c_int::from(lt),
    }
}

/// Compiles `expr` for frames of link type `linktype` (a LINKTYPE_ value) on a dead handle:
/// what a socket of that link type on this machine needs. A filter on a file's packets is
/// compiled by [`compile_for_file`], as tcpdump compiles it for that file.
pub fn compile_offline(linktype: u16, snaplen: u32, expr: &str) -> Result<Vec<sock_filter>> {
    let key = (linktype, snaplen, expr);
    if let Some(p) = recent::get(key) {
        return Ok(p);
    }
    let prog = compile_dead(linktype, snaplen, expr)?;
    recent::put(key, &prog);
    Ok(prog)
}

/// The programs of the last few offline compiles. One expression is compiled several
/// times on a capture's start (checked on the request, then for the socket and for the
/// workers), and a daemon sees the same expressions again and again; libpcap's answer
/// depends only on the link type, the snap length and the text. Not on the data path.
mod recent {
    use std::sync::Mutex;

    use crate::abi::sock_filter;

    /// Programs kept, the newest last.
    const KEPT: usize = 32;

    type Entry = (u16, u32, String, Vec<sock_filter>);
    static RECENT: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

    pub(super) fn get((linktype, snaplen, expr): (u16, u32, &str)) -> Option<Vec<sock_filter>> {
        let g = RECENT.lock().ok()?;
        g.iter()
            .rev()
            .find(|(l, s, e, _)| *l == linktype && *s == snaplen && e == expr)
            .map(|(.., p)| p.clone())
    }

    pub(super) fn put((linktype, snaplen, expr): (u16, u32, &str), prog: &[sock_filter]) {
        let Ok(mut g) = RECENT.lock() else {
            return;
        };
        if g.len() == KEPT {
            g.remove(0);
        }
        g.push((linktype, snaplen, expr.to_owned(), prog.to_vec()));
    }
}

/// Compiles on a dead handle of the link type (see [`compile_offline`]).
fn compile_dead(linktype: u16, snaplen: u32, expr: &str) -> Result<Vec<sock_filter>> {
    let lib = libpcap()?;
    let dlt = dlt_of_linktype(linktype);
    // SAFETY: plain constructor; the result is checked.
    let p = unsafe { (lib.open_dead)(dlt, snaplen.min(i32::MAX as u32) as c_int) };
    if p.is_null() {
        return Err(Error::new(ErrorKind::Filter, "pcap_open_dead failed"));
    }
    Handle(p, lib).compile(expr)
}

/// Compiles `expr` exactly as tcpdump compiles it for a file of link type `linktype` (its
/// LINKTYPE_ value) written in the given byte order: on a savefile handle, not a dead one.
/// libpcap's code differs between the two where a link header depends on the machine that
/// wrote it: on a BSD NULL capture, `ip6` tests every BSD AF_INET6 value (24, 28, 30) in the
/// file's byte order, where a dead handle tests Linux's 10 alone and matches nothing.
pub fn compile_for_file(
    linktype: u16,
    big_endian: bool,
    snaplen: u32,
    expr: &str,
) -> Result<Vec<sock_filter>> {
    let lib = libpcap()?;
    // A pcap file header and no packets: what libpcap reads to learn the link type, the
    // byte order (its `swapped`) and the snap length.
    let fields = [
        0xa1b2_c3d4u32,
        0x0004_0002,
        0,
        0,
        snaplen,
        u32::from(linktype),
    ];
    let mut head = Vec::with_capacity(24);
    for (i, v) in fields.iter().enumerate() {
        // The version is two u16 fields (2, 4), in the same byte order.
        let b = if i == 1 {
            let (maj, min) = (2u16, 4u16);
            if big_endian {
                [maj.to_be_bytes(), min.to_be_bytes()].concat()
            } else {
                [maj.to_le_bytes(), min.to_le_bytes()].concat()
            }
        } else if big_endian {
            v.to_be_bytes().to_vec()
        } else {
            v.to_le_bytes().to_vec()
        };
        head.extend_from_slice(&b);
    }
    // SAFETY: `head` outlives the stream: the stream is closed (by pcap_close, or by
    // fclose below) before `head` is dropped at the end of this function; "r" never writes.
    let fp = unsafe { libc::fmemopen(head.as_mut_ptr().cast(), head.len(), c"r".as_ptr()) };
    if fp.is_null() {
        return Err(Error::new(ErrorKind::Filter, "fmemopen failed"));
    }
    let mut errbuf = [0 as c_char; PCAP_ERRBUF_SIZE];
    // SAFETY: an open stream and an errbuf of PCAP_ERRBUF_SIZE bytes; on success libpcap
    // owns the stream and closes it in pcap_close.
    let p = unsafe { (lib.fopen_offline)(fp, errbuf.as_mut_ptr()) };
    if p.is_null() {
        // SAFETY: libpcap wrote a NUL-terminated message into errbuf; the stream is still
        // ours on failure, closed once here.
        let msg = unsafe {
            libc::fclose(fp);
            CStr::from_ptr(errbuf.as_ptr())
        }
        .to_string_lossy()
        .into_owned();
        return Err(Error::new(ErrorKind::Filter, msg));
    }
    let out = Handle(p, lib).compile(expr);
    drop(head);
    out
}

/// `ret #snaplen`: accepts every packet, truncated to `snaplen` bytes by the kernel.
pub fn accept_all(snaplen: u32) -> Vec<sock_filter> {
    vec![sock_filter {
        code: 0x06,
        jt: 0,
        jf: 0,
        k: snaplen,
    }]
}

/// `ret #0`: accepts nothing. Attached at shutdown so the ring drains to a known end.
pub fn reject_all() -> Vec<sock_filter> {
    vec![sock_filter {
        code: 0x06,
        jt: 0,
        jf: 0,
        k: 0,
    }]
}

/// Prefixes `prog` with a test of the packet's RX queue, so the socket sees queue `queue`
/// alone: a "virtual adapter" in the sense of TNAPI.
pub fn queue_prefix(queue: u16, prog: &[sock_filter]) -> Vec<sock_filter> {
    let mut out = Vec::with_capacity(prog.len() + 4);
    // ld [SKF_AD_OFF + SKF_AD_QUEUE]
    out.push(sock_filter {
        code: 0x20,
        jt: 0,
        jf: 0,
        k: (abi::SKF_AD_OFF + abi::SKF_AD_QUEUE) as u32,
    });
    // jeq #queue, +1 (to the program), +0 (to the jump to `ret #0`)
    out.push(sock_filter {
        code: 0x15,
        jt: 1,
        jf: 0,
        k: u32::from(queue),
    });
    // ja past the program
    out.push(sock_filter {
        code: 0x05,
        jt: 0,
        jf: 0,
        k: prog.len() as u32,
    });
    out.extend_from_slice(prog);
    out.push(sock_filter {
        code: 0x06,
        jt: 0,
        jf: 0,
        k: 0,
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_offline_compile() {
        let p = compile_offline(1, 65535, "udp port 53").expect("compiles");
        assert!(p.len() > 4);
        assert_eq!(p.last().map(|i| i.code), Some(0x06));
        let e = compile_offline(1, 65535, "udp port").expect_err("invalid");
        assert_eq!(e.kind(), ErrorKind::Filter);
    }

    #[test]
    fn test_file_compile_reads_null_in_the_writers_byte_order() {
        let ks = |p: &[sock_filter]| p.iter().map(|i| i.k).collect::<Vec<_>>();
        // `ip6` on BSD NULL: the BSD, FreeBSD and Darwin AF_INET6 values, as the file has them.
        let le = compile_for_file(0, false, 65535, "ip6").expect("compiles");
        let be = compile_for_file(0, true, 65535, "ip6").expect("compiles");
        for af in [24u32, 28, 30] {
            assert!(ks(&le).contains(&af.swap_bytes()), "{le:?}");
            assert!(ks(&be).contains(&af), "{be:?}");
        }
        // A dead handle compiles it for this machine's AF_INET6 (10) alone.
        let dead = compile_offline(0, 65535, "ip6").expect("compiles");
        assert!(!ks(&dead).contains(&30u32.swap_bytes()), "{dead:?}");
        // Raw IP goes by its LINKTYPE_ number (101), which libpcap maps itself.
        assert!(compile_for_file(101, false, 65535, "udp port 53").is_ok());
        let e = compile_for_file(101, false, 65535, "vlan 1").expect_err("no vlan on raw IP");
        assert_eq!(e.kind(), ErrorKind::Filter);
    }

    #[test]
    fn test_kept_programs_are_libpcap_programs() {
        // The same text for another link type or snap length is another program.
        for (lt, snap, e) in [
            (1, 262_144, "udp port 53"),
            (1, 96, "udp port 53"),
            (113, 262_144, "udp port 53"),
            (1, 262_144, "tcp"),
        ] {
            let first = compile_offline(lt, snap, e).expect("libpcap");
            assert_eq!(first, compile_dead(lt, snap, e).expect("libpcap"));
            assert_eq!(compile_offline(lt, snap, e).expect("kept"), first);
        }
        assert_ne!(
            compile_offline(1, 96, "udp port 53").unwrap(),
            compile_offline(113, 96, "udp port 53").unwrap()
        );
        // A refused expression is refused every time, never kept.
        assert!(compile_offline(1, 262_144, "port 99999999").is_err());
        assert!(compile_offline(1, 262_144, "port 99999999").is_err());
    }

    #[test]
    fn test_only_vlan_and_direction_need_a_live_handle() {
        assert!(needs_live_handle("vlan 100 and udp"));
        assert!(needs_live_handle("(VLAN)"));
        assert!(needs_live_handle("inbound"));
        assert!(!needs_live_handle("udp port 5001 and host 10.0.0.1"));
        assert!(!needs_live_handle("ether host 00:11:22:33:44:55"));
    }

    #[test]
    fn test_offline_and_live_programs_agree_without_vlan() {
        // The live handle needs CAP_NET_RAW; without it there is nothing to compare.
        let Ok(live) = compile_live("lo", "udp port 5001 or tcp", 262144) else {
            return;
        };
        let offline = compile_for_socket("lo", 1, "udp port 5001 or tcp", 262144).expect("ok");
        let key = |p: &[sock_filter]| {
            p.iter()
                .map(|i| (i.code, i.jt, i.jf, i.k))
                .collect::<Vec<_>>()
        };
        assert_eq!(key(&live), key(&offline));
    }

    #[test]
    fn test_queue_prefix_jumps() {
        let p = queue_prefix(2, &accept_all(100));
        assert_eq!(p.len(), 5);
        assert_eq!(p[2].k, 1);
        assert_eq!(p[4].k, 0);
    }
}
