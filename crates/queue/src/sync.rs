//! The one place that picks std or loom primitives (`--cfg loom`), after
//! tokio's `src/loom`: the lock-free modules import atomics, `Arc`, the wait
//! [`Backoff`] and the record memory [`Words`] from here, so the loom models in
//! `tests/it/loom.rs` check the same code that ships.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::Arc;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::Arc;

#[cfg(loom)]
use loom::cell::UnsafeCell;
#[cfg(not(loom))]
use std::cell::UnsafeCell;

/// Bounded exponential spin, then yield: how the consumer waits for a producer
/// that has reserved a slot but not finished writing it.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    /// Spins used so far, as a power of two; `SPIN_LIMIT` and above means yield.
    #[cfg_attr(loom, allow(dead_code))] // loom always yields
    step: u32,
}

impl Backoff {
    /// After `2^0 + .. + 2^SPIN_LIMIT` spin hints (about 127), yield the CPU.
    #[cfg_attr(loom, allow(dead_code))] // loom always yields
    const SPIN_LIMIT: u32 = 6;

    /// Waits a little longer than the previous call.
    pub(crate) fn snooze(&mut self) {
        #[cfg(loom)]
        {
            loom::thread::yield_now();
        }
        #[cfg(not(loom))]
        {
            if self.step <= Self::SPIN_LIMIT {
                for _ in 0..1u32 << self.step {
                    std::hint::spin_loop();
                }
                self.step += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Record memory: 8-byte words that producers fill and the consumer reads.
///
/// The type system does not keep writers apart here; the queue protocol does
/// (see [`crate::mpsc`]). Under loom each word is a `loom::cell::UnsafeCell`, so
/// the models also check that every read of a record happens after its write.
pub(crate) struct Words {
    cells: Box<[UnsafeCell<u64>]>,
}

// SAFETY: the mpsc protocol gives each word one writer at a time and orders every read after the write (flag R3/A4).
unsafe impl Sync for Words {}

impl Words {
    /// `len` zeroed words.
    pub(crate) fn new(len: usize) -> Self {
        Words {
            cells: (0..len).map(|_| UnsafeCell::new(0)).collect(),
        }
    }

    /// Writes `head` then `body` from word `at`, zero-filling the last word.
    ///
    /// # Safety
    /// Words `at .. at + (head.len() + body.len()).div_ceil(8)` are in bounds and
    /// the caller alone may touch them until it publishes them.
    #[cfg(not(loom))]
    pub(crate) unsafe fn write(&self, at: usize, head: &[u8], body: &[u8]) {
        let len = head.len() + body.len();
        debug_assert!(at + len.div_ceil(8) <= self.cells.len());
        let base = UnsafeCell::raw_get(self.cells.as_ptr()).cast::<u8>();
        // SAFETY: in bounds and exclusively ours by the contract; sources are other memory.
        unsafe {
            let dst = base.add(at * 8);
            std::ptr::copy_nonoverlapping(head.as_ptr(), dst, head.len());
            std::ptr::copy_nonoverlapping(body.as_ptr(), dst.add(head.len()), body.len());
            std::ptr::write_bytes(dst.add(len), 0, len.next_multiple_of(8) - len);
        }
    }

    /// Writes `head` then `body` from word `at`, zero-filling the last word.
    ///
    /// # Safety
    /// Words `at .. at + (head.len() + body.len()).div_ceil(8)` are in bounds and
    /// the caller alone may touch them until it publishes them.
    #[cfg(loom)]
    pub(crate) unsafe fn write(&self, at: usize, head: &[u8], body: &[u8]) {
        let mut bytes = [head, body].concat();
        bytes.resize(bytes.len().next_multiple_of(8), 0);
        for (i, chunk) in bytes.chunks_exact(8).enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(chunk);
            // SAFETY: the caller owns this word by the contract; loom checks it.
            self.cells[at + i].with_mut(|p| unsafe { *p = u64::from_ne_bytes(w) });
        }
    }

    /// Calls `f` with the bytes of words `at .. at + n`.
    ///
    /// # Safety
    /// The words are in bounds, were published to this thread, and nobody writes
    /// them until `f` returns.
    #[cfg(not(loom))]
    pub(crate) unsafe fn read<R>(&self, at: usize, n: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        debug_assert!(at + n <= self.cells.len());
        let base = UnsafeCell::raw_get(self.cells.as_ptr()).cast::<u8>();
        // SAFETY: in bounds, initialised (zeroed at creation), and not written while borrowed, by the contract.
        let bytes = unsafe { std::slice::from_raw_parts(base.add(at * 8), n * 8) };
        f(bytes)
    }

    /// Calls `f` with the bytes of words `at .. at + n`.
    ///
    /// # Safety
    /// The words are in bounds, were published to this thread, and nobody writes
    /// them until `f` returns.
    #[cfg(loom)]
    pub(crate) unsafe fn read<R>(&self, at: usize, n: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        let mut bytes = Vec::with_capacity(n * 8);
        for cell in &self.cells[at..at + n] {
            // SAFETY: published and not written meanwhile by the contract; loom checks it.
            let w = cell.with(|p| unsafe { *p });
            bytes.extend_from_slice(&w.to_ne_bytes());
        }
        f(&bytes)
    }
}
