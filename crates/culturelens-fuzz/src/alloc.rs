//! The allocation meter: a global allocator over the system one that keeps the live heap size,
//! so the harness can read the peak heap of each input. Install it in the binary that runs the
//! targets (`#[global_allocator] static A: Meter = Meter;`); without it every peak reads 0.
//!
//! An allocation larger than [`HARD_CAP`] is never attempted: the meter writes a fixed message
//! and aborts, since such a request would at best exhaust the machine before the harness could
//! report the input (rebuild it from the printed target, seed and index).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// The allocator (a unit struct: its state is global).
pub struct Meter;

static INSTALLED: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// The input being parsed, for the abort message.
pub static CURRENT: AtomicU64 = AtomicU64::new(0);

/// Largest single allocation ever attempted (4 GiB).
pub const HARD_CAP: usize = 4 << 30;

unsafe impl GlobalAlloc for Meter {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > HARD_CAP {
            too_large(layout.size());
        }
        INSTALLED.store(true, Ordering::Relaxed);
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > HARD_CAP {
            too_large(new_size);
        }
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let live =
                    LIVE.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size - layout.size();
                PEAK.fetch_max(live, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

/// Writes "fuzz: allocation of N bytes (input I)" without allocating, then aborts.
fn too_large(size: usize) -> ! {
    use std::io::Write;
    let mut buf = [0u8; 96];
    let prefix = b"fuzz: refused an allocation of ";
    buf[..prefix.len()].copy_from_slice(prefix);
    let mut at = prefix.len();
    at += write_u64(&mut buf[at..], size as u64);
    buf[at..at + 15].copy_from_slice(b" bytes at input");
    at += 15;
    buf[at] = b' ';
    at += 1;
    at += write_u64(&mut buf[at..], CURRENT.load(Ordering::Relaxed));
    buf[at] = b'\n';
    let _ = std::io::stderr().write_all(&buf[..=at]);
    std::process::abort();
}

fn write_u64(buf: &mut [u8], mut v: u64) -> usize {
    let mut digits = [0u8; 20];
    let mut n = 0;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for (slot, digit) in buf.iter_mut().zip(digits[..n].iter().rev()) {
        *slot = *digit;
    }
    n
}

/// The heap meter of one input: [`Meter::peak`] is the largest live heap since
/// [`Meter::start`], above the heap at that time.
pub struct Start {
    base: usize,
}

impl Meter {
    /// Starts metering (resets the peak to the live heap).
    pub fn start() -> Start {
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        Start { base }
    }

    /// Whether the meter is the global allocator (it has seen an allocation).
    pub fn installed() -> bool {
        INSTALLED.load(Ordering::Relaxed)
    }
}

impl Start {
    /// The peak heap since the start, above the heap at the start.
    pub fn peak(&self) -> usize {
        PEAK.load(Ordering::Relaxed).saturating_sub(self.base)
    }
}
