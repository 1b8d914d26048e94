//! The process's global allocator: the system allocator, with large blocks marked for
//! transparent huge pages on Linux. One implementation for both front ends that own a process's
//! Rust allocations: the CLI (`native/src/main.rs`) and the Python wheel (`culturelens-py`, whose
//! extension module allocates through it; Python's and numpy's own allocations are not affected).
//!
//! Tensors, embedding tables and kernel matrices are tens to hundreds of megabytes, and a fresh
//! one is touched page by page: with 4 KiB pages that is one page fault per 4 KiB, which on a
//! virtual machine costs several milliseconds per megabyte (measured on the benchmark machine of
//! BENCHMARKS.md: 13 MB of new `f64`s took 65 ms to touch, 20 ms with huge pages). Blocks of at
//! least [`HUGE_PAGE_MIN_BYTES`] are therefore advised `MADV_HUGEPAGE` before they are touched,
//! numpy's policy for its own arrays. The advice is a hint: where transparent huge pages are off
//! (`/sys/kernel/mm/transparent_hugepage/enabled` = `never`) or the call fails, nothing changes.
//! Memory is allocated, laid out and freed exactly as by [`System`].
//!
//! [`keep_freed_blocks`] (called first thing in the CLI's `main`) sets glibc malloc's thresholds
//! so that the blocks of a model's forward pass are reused rather than mapped afresh for every op.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks up to this size come from malloc's heap and are reused after `free` (glibc's
/// largest allowed `M_MMAP_THRESHOLD`); larger ones are mapped and unmapped as before.
pub const HEAP_BLOCK_MAX_BYTES: usize = 32 << 20;

/// Free memory at the top of a heap that malloc keeps rather than returns to the system.
pub const KEEP_FREE_BYTES: usize = 1 << 30;

/// Makes glibc malloc serve blocks below [`HEAP_BLOCK_MAX_BYTES`] from its heap and keep up to
/// [`KEEP_FREE_BYTES`] of freed memory; returns whether both settings took.
///
/// By default glibc maps every block above a threshold that starts at 128 KiB with `mmap` and
/// unmaps it on `free`. An encoder's activations (2–10 MB at batch 16) are freed and
/// reallocated at every op, so each op touched fresh pages: a page fault per page and the
/// kernel zeroing them, 20 % of the CPU samples of `culturelens embed` in `perf`
/// (BENCHMARKS.md). Kept in the heap, they are reused as PyTorch's tensors are. Elsewhere than
/// glibc this does nothing (and returns `false`).
pub fn keep_freed_blocks() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes malloc's tuning parameters; both values are in range.
        unsafe {
            let mmap = libc::mallopt(libc::M_MMAP_THRESHOLD, HEAP_BLOCK_MAX_BYTES as libc::c_int);
            let trim = libc::mallopt(libc::M_TRIM_THRESHOLD, KEEP_FREE_BYTES as libc::c_int);
            mmap == 1 && trim == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

/// Smallest block advised for huge pages (numpy uses the same threshold).
pub const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

pub struct HugePageHint;

// SAFETY: every call is forwarded to `System` unchanged; `advise` only passes a sub-range of the
// block just returned by `System` to `madvise`, which does not change its contents or mapping.
unsafe impl GlobalAlloc for HugePageHint {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        advise(unsafe { System.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        advise(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        advise(unsafe { System.realloc(ptr, layout, new_size) }, new_size)
    }
}

/// Advises the whole 2 MiB-aligned part of `[ptr, ptr + size)` for huge pages when `size` is at
/// least [`HUGE_PAGE_MIN_BYTES`]; returns `ptr`.
#[inline]
fn advise(ptr: *mut u8, size: usize) -> *mut u8 {
    #[cfg(target_os = "linux")]
    if size >= HUGE_PAGE_MIN_BYTES && !ptr.is_null() {
        const HUGE: usize = 2 << 20;
        let start = (ptr as usize).next_multiple_of(HUGE);
        let end = (ptr as usize + size) / HUGE * HUGE;
        if end > start {
            // SAFETY: [start, end) lies inside the block just allocated; MADV_HUGEPAGE is a hint
            // that leaves its contents and mapping unchanged. Its result is ignored on purpose.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    ptr
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After [`keep_freed_blocks`], a 16 MiB block comes from the heap (malloc's mapped bytes
    /// do not grow) and, once freed, stays in the process (the heap's free bytes grow by its
    /// size and the heap does not shrink).
    ///
    /// malloc's statistics are process-wide, so the other tests of this binary, allocating on
    /// their threads at the same time, would move them: the measurement runs in a child process
    /// of this test binary that runs this test alone, on one thread.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn freed_activation_sized_blocks_stay_in_the_heap() {
        const CHILD: &str = "CULTURELENS_ALLOC_TEST_CHILD";
        if std::env::var_os(CHILD).is_none() {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["tests::freed_activation_sized_blocks_stay_in_the_heap", "--exact"])
                .args(["--test-threads=1", "--nocapture"])
                .env(CHILD, "1")
                .output()
                .unwrap();
            let text =
                String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success() && text.contains("1 passed"), "the child test failed:\n{text}");
            return;
        }
        assert!(keep_freed_blocks());
        // SAFETY: mallinfo2 only reads malloc's statistics.
        let info = || unsafe { libc::mallinfo2() };
        let before = info();
        let block = vec![1u8; 16 << 20];
        let during = info();
        assert_eq!(during.hblkhd, before.hblkhd, "the block was mapped, not taken from the heap");
        drop(std::hint::black_box(block));
        let after = info();
        assert!(after.fordblks >= during.fordblks + (16 << 20), "the freed block left the heap");
        assert!(after.arena >= during.arena, "the heap shrank");
    }

    /// Blocks above and below the threshold come back usable: zeroed when asked, their contents
    /// kept across a reallocation that crosses the threshold, and freed without error.
    #[test]
    fn blocks_on_both_sides_of_the_threshold_behave_like_the_system_allocator() {
        let a = HugePageHint;
        for size in [64, HUGE_PAGE_MIN_BYTES - 1, HUGE_PAGE_MIN_BYTES, 3 * HUGE_PAGE_MIN_BYTES + 12345] {
            let layout = Layout::from_size_align(size, 64).unwrap();
            // SAFETY: a non-zero-sized layout; the block is written and read within its size and
            // freed with the layout it was allocated with.
            unsafe {
                let p = a.alloc_zeroed(layout);
                assert!(!p.is_null() && (p as usize).is_multiple_of(64));
                let block = std::slice::from_raw_parts_mut(p, size);
                assert!(block.iter().all(|&b| b == 0), "zeroed at {size}");
                block.iter_mut().enumerate().for_each(|(i, b)| *b = (i % 251) as u8);
                let grown = a.realloc(p, layout, 2 * size);
                assert!(!grown.is_null());
                let kept = std::slice::from_raw_parts(grown, size);
                assert!(kept.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8), "kept at {size}");
                a.dealloc(grown, Layout::from_size_align(2 * size, 64).unwrap());
            }
        }
    }
}
