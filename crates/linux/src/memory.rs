//! Memory the kernel can still give: rings are checked against it before they are asked
//! for, since a ring larger than free memory sets off the global OOM killer. And large
//! tables read at random (a session table) asked to sit on huge pages, and their entries
//! fetched ahead of use.

/// Asks that the whole 2 MiB pages within `len` bytes at `addr` be huge pages
/// (`madvise(MADV_HUGEPAGE)`), before they are first touched: a table of many MiB read at
/// random then costs no TLB miss a lookup. Where transparent huge pages are off, or the
/// range holds no whole huge page, nothing changes; the advice is never an error.
pub fn advise_huge(addr: usize, len: usize) {
    const HUGE: usize = 2 << 20;
    let start = addr.next_multiple_of(HUGE);
    let end = addr.saturating_add(len) / HUGE * HUGE;
    if end <= start {
        return;
    }
    // SAFETY: MADV_HUGEPAGE changes only how the range is paged, never what it holds, and
    // the kernel checks the range itself (a range not mapped is refused with ENOMEM).
    let _ = unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
}

/// Asks the processor to bring every cache line of `*r` into its caches, ahead of the
/// load that needs it: a table entry looked up at random misses the caches, and the hint
/// lets other work run while its lines come. Only a hint: it reads nothing the program
/// sees, cannot fault, and does nothing on an architecture it has no instruction for here.
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    prefetch_at(r as *const T);
}

/// [`prefetch`] of the `T` at `p`, which need not be valid: an entry a table will most
/// likely look at, or the room just past its last one.
#[inline(always)]
pub fn prefetch_at<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    for at in (0..size_of::<T>()).step_by(64) {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let line = p.cast::<i8>().wrapping_add(at);
        // SAFETY: a prefetch never faults and changes no memory, whatever the address
        // (nothing is read through `p`); SSE, the instruction's feature, is in every x86-64
        // processor.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(line) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// `MemAvailable` from /proc/meminfo, in bytes.
pub fn available() -> Option<u64> {
    parse_meminfo(
        &std::fs::read_to_string("/proc/meminfo").ok()?,
        "MemAvailable:",
    )
}

/// The value of `key` (a line `Key:   N kB`) in bytes.
fn parse_meminfo(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kb: u64 = line[key.len()..].split_whitespace().next()?.parse().ok()?;
    kb.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn test_parse() {
        let t = "MemTotal:       24000000 kB\nMemAvailable:    2048 kB\n";
        assert_eq!(super::parse_meminfo(t, "MemAvailable:"), Some(2 << 20));
        assert_eq!(super::parse_meminfo(t, "Nope:"), None);
        assert!(super::available().is_some_and(|b| b > 0));
    }

    #[test]
    fn test_prefetch_is_only_a_hint() {
        let slots = vec![[7u64; 16]; 3];
        for s in &slots {
            super::prefetch(s);
        }
        super::prefetch(&());
        assert_eq!(slots, vec![[7u64; 16]; 3]);
    }
}
