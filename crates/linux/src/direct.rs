//! Direct I/O for capture files: aligned buffers, files opened with `O_DIRECT` (buffered
//! where the filesystem refuses it), space reserved ahead with `fallocate`, and an io_uring
//! that keeps several writes in flight.
//!
//! Ownership of a buffer under the write ring: [`WriteRing::submit`] moves the buffer into
//! the ring's in-flight table, and only [`WriteRing::reap`] gives it back, after the kernel
//! has posted the write's completion. So no Rust reference to a buffer exists while the
//! kernel reads it, and dropping the ring first waits for every write still in flight.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::ptr::NonNull;

use io_uring::{opcode, types, IoUring};

/// A zeroed buffer aligned for direct I/O, mapped straight from the kernel (anonymous
/// `mmap`): its pages cost memory only once written, and all of it goes back to the
/// kernel when it is dropped (a heap allocation this size would stay in the allocator's
/// arenas, and be zeroed by hand when reused).
pub struct AlignedBuf {
    /// Start of the mapping.
    base: NonNull<u8>,
    /// Bytes mapped.
    map_len: usize,
    /// Start of the buffer inside the mapping (`base` rounded up to `align`); valid and
    /// initialised (zero pages) for `cap` bytes.
    ptr: NonNull<u8>,
    cap: usize,
    align: usize,
}

// SAFETY: the buffer owns its mapping exclusively, like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AlignedBuf {{ cap: {}, align: {} }}",
            self.cap, self.align
        )
    }
}

impl AlignedBuf {
    /// A zeroed buffer of `cap` bytes (rounded up to `align`), aligned to `align` (a power
    /// of two, at least 512). Aborts like any allocation when the kernel has no memory.
    pub fn new(cap: usize, align: usize) -> Self {
        Self::try_new(cap, align).unwrap_or_else(|| {
            let layout =
                std::alloc::Layout::from_size_align(cap, align.max(512).next_power_of_two())
                    .expect("buffer layout");
            std::alloc::handle_alloc_error(layout)
        })
    }

    /// As [`AlignedBuf::new`], or None when the kernel refuses the memory: for buffers
    /// that are grown while the disk is behind, where a refusal means growing no further.
    pub fn try_new(cap: usize, align: usize) -> Option<Self> {
        let align = align.max(512).next_power_of_two();
        let cap = cap.max(align).div_ceil(align) * align;
        // Pages are 4096-aligned; a larger alignment maps that much more and rounds up.
        let extra = if align > 4096 { align } else { 0 };
        let map_len = cap + extra;
        // SAFETY: an anonymous private mapping at an address the kernel picks; no file
        // and no existing memory is involved.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        let base = NonNull::new(p.cast::<u8>())?;
        let off = (align - (base.as_ptr() as usize) % align) % align;
        // SAFETY: `off < align <= extra` when align > 4096, else 0; the result stays
        // inside the mapping of `map_len` bytes.
        let ptr = unsafe { NonNull::new_unchecked(base.as_ptr().add(off)) };
        Some(Self {
            base,
            map_len,
            ptr,
            cap,
            align,
        })
    }

    /// Bytes in the buffer.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// The whole buffer.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` is valid and initialised for `cap` bytes, and borrowed with `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.cap) }
    }

    /// The whole buffer, writable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; no reference to it outlives
        // `self`.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.map_len) };
    }
}

/// A file being written, directly when the filesystem allows it.
#[derive(Debug)]
pub struct DirectFile {
    file: File,
    direct: bool,
    align: usize,
}

/// Offset and memory alignment direct I/O needs on the filesystem of `dir` (from
/// `statx(STATX_DIOALIGN)`), at least 4096; 4096 when the kernel does not say.
pub fn dio_align(path: &Path) -> usize {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return 4096;
    };
    let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: `c` is a NUL-terminated path and `stx` is writable for one statx.
    let rc = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c.as_ptr(),
            0,
            libc::STATX_DIOALIGN,
            stx.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return 4096;
    }
    // SAFETY: statx succeeded and filled the struct (it was zeroed before).
    let stx = unsafe { stx.assume_init() };
    if stx.stx_mask & libc::STATX_DIOALIGN == 0 {
        return 4096;
    }
    let a = stx.stx_dio_offset_align.max(stx.stx_dio_mem_align) as usize;
    a.clamp(4096, 1 << 20).next_power_of_two()
}

impl DirectFile {
    /// Creates `path` new (`O_EXCL | O_NOFOLLOW`: never follows a link, never reuses a
    /// file) with `mode`, opened with `O_DIRECT` when `direct` and the filesystem accepts
    /// it. [`DirectFile::is_direct`] tells which it got. The file holds an exclusive
    /// `flock` while it is open, so [`is_abandoned`] can tell a file that a crashed writer
    /// left from one being written.
    pub fn create(path: &Path, direct: bool, mode: u32) -> io::Result<Self> {
        let open = |flags: i32| {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | flags)
                .open(path)
        };
        let align = path.parent().map_or(4096, |d| {
            dio_align(if d.as_os_str().is_empty() {
                Path::new(".")
            } else {
                d
            })
        });
        let mut got = None;
        if direct {
            match open(libc::O_DIRECT) {
                Ok(file) => got = Some((file, true)),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => return Err(e),
            }
        }
        let (file, direct) = match got {
            Some(g) => g,
            None => (open(0)?, false),
        };
        // SAFETY: flock on a descriptor this function owns; no memory is passed.
        let _ = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        Ok(Self {
            file,
            direct,
            align,
        })
    }

    /// Whether writes bypass the page cache.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// Offset and memory alignment of direct writes.
    pub fn align(&self) -> usize {
        self.align
    }

    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Turns direct I/O off (a write the filesystem refused with EINVAL).
    pub fn make_buffered(&mut self) -> io::Result<()> {
        let fd = self.file.as_raw_fd();
        // SAFETY: F_GETFL/F_SETFL on a descriptor this struct owns.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above.
        if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_DIRECT) } < 0 {
            return Err(io::Error::last_os_error());
        }
        self.direct = false;
        Ok(())
    }

    /// Reserves `len` bytes from offset 0 (the file's size becomes at least `len`, so the
    /// writes that follow extend nothing and run asynchronously). Unsupported filesystems
    /// answer `EOPNOTSUPP`, which the caller may ignore.
    pub fn reserve(&self, len: u64) -> io::Result<()> {
        let len = i64::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: fallocate on a descriptor this struct owns; no memory is passed.
        let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), 0, 0, len) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Writes `b` at `offset` synchronously, all of it (the unaligned tail of a file is
    /// written this way, after [`DirectFile::make_buffered`]).
    pub fn write_all_at(&self, b: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(b, offset)
    }
}

/// Renames `from` to `to` unless `to` exists (`renameat2` with `RENAME_NOREPLACE`), so a
/// file is never put over another by accident: `AlreadyExists` if `to` is there.
pub fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths that live across the call; AT_FDCWD resolves them
    // like rename(2) does.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Tells the kernel that `file` is read at random places (`POSIX_FADV_RANDOM`): no
/// readahead, so a read of 4 KiB costs 4 KiB of disk. A refusal is ignored (it is advice).
pub fn advise_random(file: &File) {
    // SAFETY: posix_fadvise on a descriptor the caller's File owns; no memory is passed.
    let _ = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
}

/// Asks the kernel to start reading `len` bytes of `file` at `offset` now
/// (`POSIX_FADV_WILLNEED`), without waiting: a batch of scattered reads announced this way
/// goes to the device together, instead of one round trip each. Advice only.
pub fn advise_willneed(file: &File, offset: u64, len: u64) {
    let (Ok(off), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return;
    };
    // SAFETY: posix_fadvise on a descriptor the caller's File owns; no memory is passed.
    let _ = unsafe { libc::posix_fadvise(file.as_raw_fd(), off, len, libc::POSIX_FADV_WILLNEED) };
}

/// The name of a recording folder's lease file.
pub const LEASE: &str = ".corecap-lease";

/// A lease on a recording folder: queries hold it shared while they read the folder's
/// files, and retention deletes only while it holds it alone, so a query is never cut short
/// by a deletion (one descriptor per folder, whatever the number of files). Released on drop.
#[derive(Debug)]
pub struct Lease {
    /// Held for its lock, which goes with it.
    _file: File,
}

impl Lease {
    fn open(dir: &Path, create: bool) -> io::Result<File> {
        let path = dir.join(LEASE);
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
        {
            // A reader without write access to the folder still locks an existing lease.
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path),
            r => r,
        }
    }

    fn lock(f: File, op: i32) -> io::Result<Option<Lease>> {
        // SAFETY: flock on a descriptor this function owns; no memory is passed.
        if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
            return Ok(Some(Lease { _file: f }));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Ok(None);
        }
        Err(e)
    }

    /// A query's lease on `dir`: shared, waits only while retention deletes. The lease
    /// file is made only with `create` (a folder corecap records into): a query leaves
    /// another folder as it found it, and takes the lease only if one is there already
    /// (`NotFound` else: nothing there to wait for).
    pub fn shared(dir: &Path, create: bool) -> io::Result<Lease> {
        let f = Self::open(dir, create)?;
        Self::lock(f, libc::LOCK_SH)?.ok_or_else(|| io::Error::from(io::ErrorKind::WouldBlock))
    }

    /// Retention's lease on `dir`, alone; None while a query reads the folder.
    pub fn exclusive(dir: &Path) -> io::Result<Option<Lease>> {
        Self::lock(Self::open(dir, true)?, libc::LOCK_EX | libc::LOCK_NB)
    }
}

/// Syncs the directory that holds `path`, so that a name made, changed or removed in it
/// survives a power cut (as PostgreSQL and SQLite do after a rename).
pub fn sync_parent(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::File::open(dir)?.sync_all()
}

/// Space of the filesystem that holds `path` (`statvfs`): bytes free to an unprivileged
/// writer, and its size in bytes.
pub fn fs_space(path: &Path) -> io::Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c` is a NUL-terminated path and `st` a statvfs the call fills.
    if unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it filled `st` (and it was zeroed before).
    let st = unsafe { st.assume_init() };
    let unit = st.f_frsize.max(1);
    Ok((
        st.f_bavail.saturating_mul(unit),
        st.f_blocks.saturating_mul(unit),
    ))
}

/// Whether the regular file at `path` was left by a writer that is gone: nobody holds the
/// `flock` that [`DirectFile::create`] takes. Links and other files are never abandoned.
pub fn is_abandoned(path: &Path) -> bool {
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
    else {
        return false;
    };
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    // SAFETY: flock on a descriptor this function owns; no memory is passed.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// One finished write.
#[derive(Debug)]
pub struct Done {
    /// The caller's tag.
    pub tag: u64,
    /// The buffer, back in the caller's hands.
    pub buf: AlignedBuf,
    /// Bytes asked to be written.
    pub len: usize,
    /// The file offset.
    pub offset: u64,
    /// Bytes written, or the error.
    pub result: io::Result<usize>,
}

/// Writes in flight through io_uring, or synchronous `pwrite` where io_uring is not
/// available (disabled by sysctl, or a seccomp profile).
///
/// A disk that completes none of the writes in flight for [`STALL_LIMIT`] (a dead device, a
/// filesystem wedged in the kernel) does not hang its writer: `reap` gives those writes up
/// with an error, their buffers are leaked (the kernel may still read them), and their slots
/// stay out of use until their completions come.
pub struct WriteRing {
    ring: Option<IoUring>,
    /// In-flight writes by slot; a slot's buffer is owned here until its completion.
    slots: Vec<Option<(u64, AlignedBuf, usize, u64)>>,
    /// Slots of writes given up as stalled whose completions have not come yet.
    lost: Vec<bool>,
    /// Completed synchronous writes, returned by the next reap.
    ready: Vec<Done>,
    in_flight: usize,
    stall: std::time::Duration,
}

/// How long the writes in flight may all go without a completion before they are given up:
/// the kernel's own hung-task warning time. A disk shared with heavy writers took over 20 s
/// to flush here, and giving up on a slow but live disk would lose what waiting keeps.
pub const STALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

impl std::fmt::Debug for WriteRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "WriteRing {{ uring: {}, in_flight: {} }}",
            self.ring.is_some(),
            self.in_flight
        )
    }
}

impl WriteRing {
    /// A ring for up to `depth` writes in flight; falls back to synchronous writes when
    /// io_uring cannot be set up or `uring` is false.
    pub fn new(depth: u32, uring: bool) -> Self {
        let depth = depth.clamp(1, 256);
        let ring = if uring {
            IoUring::new(depth.next_power_of_two()).ok()
        } else {
            None
        };
        Self {
            ring,
            slots: (0..depth).map(|_| None).collect(),
            lost: vec![false; depth as usize],
            ready: Vec::new(),
            in_flight: 0,
            stall: STALL_LIMIT,
        }
    }

    /// Sets how long writes in flight may go without any completion (default [`STALL_LIMIT`]).
    pub fn set_stall_limit(&mut self, stall: std::time::Duration) {
        self.stall = stall;
    }

    /// Whether writes go through io_uring.
    pub fn is_uring(&self) -> bool {
        self.ring.is_some()
    }

    /// Writes not yet reaped.
    pub fn in_flight(&self) -> usize {
        self.in_flight + self.ready.len()
    }

    /// Whether another write can be submitted.
    pub fn has_room(&self) -> bool {
        self.in_flight() + self.lost.iter().filter(|l| **l).count() < self.slots.len()
    }

    /// Writes `buf[..len]` at `offset` of `file`. The file must stay open until the write
    /// is reaped. Fails (giving the buffer back) when the ring is full.
    pub fn submit(
        &mut self,
        file: &File,
        buf: AlignedBuf,
        len: usize,
        offset: u64,
        tag: u64,
    ) -> Result<(), AlignedBuf> {
        let len = len.min(buf.capacity());
        if !self.has_room() {
            return Err(buf);
        }
        let Some(ring) = self.ring.as_mut() else {
            let result = file.write_all_at(&buf.bytes()[..len], offset).map(|_| len);
            self.ready.push(Done {
                tag,
                buf,
                len,
                offset,
                result,
            });
            return Ok(());
        };
        let lost = &self.lost;
        let Some(slot) = (0..self.slots.len()).find(|&i| self.slots[i].is_none() && !lost[i])
        else {
            return Err(buf);
        };
        let ptr = buf.bytes().as_ptr();
        let entry = opcode::Write::new(types::Fd(file.as_raw_fd()), ptr, len as u32)
            .offset(offset)
            .build()
            .user_data(slot as u64);
        // The buffer moves into its slot before the kernel sees the entry; its heap memory
        // does not move with it.
        self.slots[slot] = Some((tag, buf, len, offset));
        // SAFETY: the entry points at `len` bytes of the buffer now held in `slots[slot]`,
        // which is released only in `reap` after this entry's completion (or never, if the
        // write is given up as stalled or the ring is dropped with it in flight).
        let pushed = unsafe { ring.submission().push(&entry) }.is_ok();
        if !pushed || ring.submit().is_err() {
            let (_, buf, ..) = self.slots[slot].take().expect("slot just filled");
            // A pushed entry that failed to submit is still in the queue: it goes with the
            // next submit, so keep the buffer where it is in that case.
            if pushed {
                self.slots[slot] = Some((tag, buf, len, offset));
                self.in_flight += 1;
                return Ok(());
            }
            return Err(buf);
        }
        self.in_flight += 1;
        Ok(())
    }

    /// Moves finished writes into `out`, waiting until at least `min` are there (bounded
    /// by the writes in flight).
    pub fn reap(&mut self, min: usize, out: &mut Vec<Done>) -> io::Result<()> {
        let mut got = self.ready.len();
        out.append(&mut self.ready);
        let Some(ring) = self.ring.as_mut() else {
            return Ok(());
        };
        let mut since = std::time::Instant::now();
        loop {
            for cqe in ring.completion() {
                let slot = cqe.user_data() as usize;
                if let Some(l) = self.lost.get_mut(slot).filter(|l| **l) {
                    // A write given up as stalled has ended: its slot is free again.
                    *l = false;
                    continue;
                }
                let Some((tag, buf, len, offset)) = self.slots.get_mut(slot).and_then(Option::take)
                else {
                    continue;
                };
                since = std::time::Instant::now();
                self.in_flight -= 1;
                got += 1;
                let r = cqe.result();
                let result = if r < 0 {
                    Err(io::Error::from_raw_os_error(-r))
                } else {
                    Ok(r as usize)
                };
                out.push(Done {
                    tag,
                    buf,
                    len,
                    offset,
                    result,
                });
            }
            let want = min.min(got + self.in_flight);
            if got >= want {
                return Ok(());
            }
            if since.elapsed() >= self.stall {
                return Err(self.give_up());
            }
            // Waits a second at most, so a stall is seen; kernels before 5.11 have no
            // timed wait (EINVAL) and wait as long as it takes.
            let ts = types::Timespec::new().sec(1);
            let args = types::SubmitArgs::new().timespec(&ts);
            match ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::ETIME)) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => match ring.submit_and_wait(1) {
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(e) => return Err(e),
                },
                Err(e) => return Err(e),
            }
        }
    }

    /// Gives up the writes in flight: their buffers are leaked, since the kernel may still
    /// read them, and their slots wait for their completions before they are used again.
    fn give_up(&mut self) -> io::Error {
        let n = self.in_flight;
        for (slot, lost) in self.slots.iter_mut().zip(self.lost.iter_mut()) {
            if let Some(b) = slot.take() {
                std::mem::forget(b);
                *lost = true;
            }
        }
        self.in_flight = 0;
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the disk completed none of {n} writes in {} s; they are given up",
                self.stall.as_secs_f64()
            ),
        )
    }
}

impl Drop for WriteRing {
    fn drop(&mut self) {
        let mut done = Vec::new();
        while self.in_flight > 0 {
            if self.reap(self.in_flight, &mut done).is_err() {
                break;
            }
            done.clear();
        }
        // Writes the kernel may still read from keep their buffers for ever.
        for s in self.slots.iter_mut() {
            if let Some(b) = s.take() {
                std::mem::forget(b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of one test's own, removed when the test ends (passed or not).
    struct TestDir(std::path::PathBuf);

    impl std::ops::Deref for TestDir {
        type Target = std::path::Path;
        fn deref(&self) -> &std::path::Path {
            &self.0
        }
    }

    impl Drop for TestDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn tmpdir(test: &str) -> TestDir {
        let d = std::env::temp_dir().join(format!("corecap-direct-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TestDir(d)
    }

    #[test]
    fn test_aligned_buf() {
        let mut b = AlignedBuf::new(5000, 4096);
        assert_eq!(b.capacity(), 8192);
        assert_eq!(b.bytes().as_ptr() as usize % 4096, 0);
        b.bytes_mut()[8191] = 7;
        assert_eq!(b.bytes()[8191], 7);
        assert!(b.bytes()[..8191].iter().all(|&x| x == 0));
        let big = AlignedBuf::new(100_000, 65536);
        assert_eq!(big.bytes().as_ptr() as usize % 65536, 0);
        assert_eq!(big.capacity(), 131072);
    }

    fn ring_writes(uring: bool) {
        let d = tmpdir(if uring { "uring" } else { "sync" });
        let p = d.join(format!("w{uring}"));
        let _ = std::fs::remove_file(&p);
        let f = DirectFile::create(&p, true, 0o600).unwrap();
        assert!(DirectFile::create(&p, true, 0o600).is_err(), "O_EXCL");
        let _ = f.reserve(1 << 20);
        let mut r = WriteRing::new(4, uring);
        for i in 0..4u8 {
            let mut b = AlignedBuf::new(65536, f.align());
            b.bytes_mut().fill(i + 1);
            r.submit(f.file(), b, 65536, u64::from(i) * 65536, u64::from(i))
                .unwrap();
        }
        assert!(!r.has_room());
        let mut done = Vec::new();
        r.reap(4, &mut done).unwrap();
        assert_eq!(done.len(), 4);
        for d in &done {
            assert_eq!(*d.result.as_ref().unwrap(), 65536);
        }
        f.file().set_len(4 * 65536 - 3).unwrap();
        let data = std::fs::read(&p).unwrap();
        assert_eq!(data.len(), 4 * 65536 - 3);
        for i in 0..4 {
            assert!(data[i * 65536..((i + 1) * 65536).min(data.len())]
                .iter()
                .all(|&x| x == i as u8 + 1));
        }
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn test_uring_writes() {
        ring_writes(true);
    }

    #[test]
    fn test_sync_writes() {
        ring_writes(false);
    }

    #[test]
    fn test_abandoned() {
        let d = tmpdir("abandoned");
        let p = d.join("held");
        let _ = std::fs::remove_file(&p);
        let f = DirectFile::create(&p, false, 0o600).unwrap();
        assert!(!is_abandoned(&p), "held while open");
        drop(f);
        assert!(is_abandoned(&p), "abandoned once closed");
        std::fs::remove_file(&p).unwrap();
    }

    /// A write that never completes (into a full pipe nobody reads) is given up after the
    /// stall limit, not waited for; its slot is used again only once its completion comes.
    #[test]
    fn test_a_stalled_write_is_given_up_not_waited_for() {
        use std::io::{Read, Write};
        let mut ring = WriteRing::new(2, true);
        if !ring.is_uring() {
            eprintln!("skipped: io_uring is not available here");
            return;
        }
        ring.set_stall_limit(std::time::Duration::from_millis(1500));
        let (mut rd, wr) = std::io::pipe().unwrap();
        let wr = File::from(std::os::fd::OwnedFd::from(wr));
        // Fill the pipe so that the next write blocks.
        // SAFETY: F_SETFL on a descriptor this test owns.
        unsafe {
            let fl = libc::fcntl(wr.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(wr.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        let mut filled = 0usize;
        while let Ok(n) = (&wr).write(&[7u8; 4096]) {
            filled += n;
        }
        // SAFETY: as above.
        unsafe {
            let fl = libc::fcntl(wr.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(wr.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
        let mut buf = AlignedBuf::new(4096, 4096);
        buf.bytes_mut().fill(1);
        ring.submit(&wr, buf, 4096, 0, 9).unwrap();
        let mut out = Vec::new();
        let t = std::time::Instant::now();
        let e = ring.reap(1, &mut out).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(t.elapsed() >= std::time::Duration::from_millis(1500));
        assert!(out.is_empty());
        assert_eq!(ring.in_flight(), 0);
        // One slot of two is out of use until the given-up write ends.
        let spare = AlignedBuf::new(4096, 4096);
        assert!(ring.has_room());
        ring.submit(&wr, spare, 4096, 0, 10).unwrap();
        assert!(!ring.has_room(), "the lost slot must not be reused");
        // Reading the pipe lets both writes end; the given-up one frees its slot silently.
        let mut sink = vec![0u8; filled + 8192];
        let mut got = 0;
        while got < filled + 8192 {
            got += rd.read(&mut sink[got..]).unwrap();
        }
        ring.reap(1, &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].tag, 10);
        assert_eq!(out[0].result.as_ref().unwrap(), &4096);
        while !ring.has_room() {
            ring.reap(0, &mut out).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    #[test]
    fn test_no_follow() {
        let d = tmpdir("no-follow");
        let link = d.join("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(d.join("target"), &link).unwrap();
        assert!(DirectFile::create(&link, true, 0o600).is_err());
        assert!(!d.join("target").exists());
        std::fs::remove_file(&link).unwrap();
    }
}
