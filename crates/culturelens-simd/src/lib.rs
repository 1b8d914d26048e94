//! Runs code compiled for the widest vector instructions the CPU has (x86-64: AVX-512F or
//! AVX2, chosen at run time), so that plain loops over slices inside it vectorise; plain code
//! elsewhere (other architectures, wasm32). The arithmetic is the same on every path: no fused
//! multiply-adds are introduced, so the values do not depend on the CPU. Used by the Vendi
//! eigensolver (`culturelens-compute`'s `vendi/eigen.rs`) and the encoders' CPU passes
//! (`culturelens-models`'s `cpu.rs`).
//!
//! Which path runs is the CPU's choice, so one test machine exercises only one of them. [`force`]
//! pins every later [`dispatch!`] (in every thread) to a narrower [`Level`] the CPU can also
//! execute; the tests run each computation under every level of [`available`] and require equal
//! bits. The environment variable `CULTURELENS_SIMD` (`scalar`, `avx2` or `avx512`), read once,
//! does the same for a whole process (a level the CPU lacks is ignored, with no error: the path
//! cannot run there).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

/// A code path of [`dispatch!`], narrowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// The closure as compiled for the target's baseline (SSE2 on x86-64).
    Scalar,
    /// Compiled with AVX2 enabled.
    Avx2,
    /// Compiled with AVX-512F enabled.
    Avx512,
}

impl Level {
    /// The name `CULTURELENS_SIMD` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Scalar => "scalar",
            Self::Avx2 => "avx2",
            Self::Avx512 => "avx512",
        }
    }

    /// The level named `name` (as [`Level::name`] writes it).
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Scalar, Self::Avx2, Self::Avx512].into_iter().find(|l| l.name() == name)
    }

    fn code(self) -> u8 {
        self as u8 + 1
    }
}

/// Every level this CPU can execute, narrowest first (always [`Level::Scalar`]).
pub fn available() -> Vec<Level> {
    // `mut` is used on x86-64 only (wasm32 has the scalar level alone).
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut levels = vec![Level::Scalar];
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            levels.push(Level::Avx2);
        }
        if std::is_x86_feature_detected!("avx512f") {
            levels.push(Level::Avx512);
        }
    }
    levels
}

/// The widest level this CPU can execute: what [`dispatch!`] runs unless forced.
pub fn detected() -> Level {
    *available().last().expect("scalar is always available")
}

/// 0: not forced; otherwise [`Level::code`].
static FORCED: AtomicU8 = AtomicU8::new(0);

/// The level [`dispatch!`] runs now: the forced one, else `CULTURELENS_SIMD`'s, else the widest.
pub fn level() -> Level {
    match FORCED.load(Ordering::Relaxed) {
        0 => *from_env().get_or_init(|| {
            let wanted = std::env::var("CULTURELENS_SIMD").ok().and_then(|v| Level::parse(v.trim()));
            wanted.filter(|l| available().contains(l)).unwrap_or_else(detected)
        }),
        code => [Level::Scalar, Level::Avx2, Level::Avx512][code as usize - 1],
    }
}

fn from_env() -> &'static OnceLock<Level> {
    static ENV: OnceLock<Level> = OnceLock::new();
    &ENV
}

/// A level the CPU cannot execute, refused by [`force`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unsupported(pub Level);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "this CPU cannot execute the {} path", self.0.name())
    }
}

impl std::error::Error for Unsupported {}

/// Pins every later [`dispatch!`], in every thread, to `level` (`None`: back to the default of
/// [`level`]). For tests and benchmarks: since every path computes the same bits, running
/// concurrent work under another level changes its speed only.
pub fn force(level: Option<Level>) -> Result<(), Unsupported> {
    match level {
        Some(l) if !available().contains(&l) => Err(Unsupported(l)),
        Some(l) => {
            FORCED.store(l.code(), Ordering::Relaxed);
            Ok(())
        }
        None => {
            FORCED.store(0, Ordering::Relaxed);
            Ok(())
        }
    }
}

/// Runs `$body` (an expression, as a closure's body: `return` and `?` leave the body, not the
/// caller) compiled for the path of [`level`]: `dispatch!({ ... })`.
///
/// A macro, not a function taking a closure: a closure passed to a `#[target_feature]` function
/// runs with that function's instructions only if the optimiser inlines it there, and a closure
/// called from three paths (one per level) is a large function with three callers, which it
/// does not inline, so every path ran the baseline (SSE2) code (found on 2026-11-28: no `ymm`
/// register in any dispatched loop of the release binary). The macro writes the body once per
/// path, each copy a closure with a single caller, which the optimiser inlines into its path.
#[macro_export]
macro_rules! dispatch {
    ($body:expr) => {{
        #[cfg(target_arch = "x86_64")]
        let out = match $crate::level() {
            $crate::Level::Avx512 => {
                let f = || $body;
                // SAFETY: `level` only returns levels of `available`, which the CPU has.
                unsafe { $crate::avx512(f) }
            }
            $crate::Level::Avx2 => {
                let f = || $body;
                // SAFETY: as above.
                unsafe { $crate::avx2(f) }
            }
            $crate::Level::Scalar => $crate::baseline(|| $body),
        };
        #[cfg(not(target_arch = "x86_64"))]
        let out = $crate::baseline(|| $body);
        out
    }};
}

/// The scalar path of [`dispatch!`].
#[doc(hidden)]
#[inline(always)]
pub fn baseline<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// The AVX-512F path of [`dispatch!`]; the caller checks that the CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[doc(hidden)]
#[inline]
#[target_feature(enable = "avx512f")]
pub unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// The AVX2 path of [`dispatch!`]; the caller checks that the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[doc(hidden)]
#[inline]
#[target_feature(enable = "avx2")]
pub unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_available_level_runs_and_computes_the_same_bits() {
        let x: Vec<f32> = (0..1000).map(|i| ((i * 7919) % 1013) as f32 / 97.0 - 5.0).collect();
        let run = || {
            dispatch!({
                let mut acc = 0f32;
                let y: Vec<f32> = x.iter().map(|v| v * 1.5 + 0.25).collect();
                for (a, b) in x.iter().zip(&y) {
                    acc += a * b;
                }
                (y, acc)
            })
        };
        let levels = available();
        assert_eq!(levels[0], Level::Scalar);
        let mut results = Vec::new();
        for &l in &levels {
            force(Some(l)).unwrap();
            assert_eq!(level(), l);
            results.push(run());
        }
        force(None).unwrap();
        assert_eq!(level(), detected());
        for (l, r) in levels.iter().zip(&results) {
            assert_eq!(r.0, results[0].0, "{l:?}");
            assert_eq!(r.1.to_bits(), results[0].1.to_bits(), "{l:?}");
        }
    }

    #[test]
    fn names_round_trip_and_unsupported_levels_are_refused() {
        for l in [Level::Scalar, Level::Avx2, Level::Avx512] {
            assert_eq!(Level::parse(l.name()), Some(l));
            if !available().contains(&l) {
                assert_eq!(force(Some(l)), Err(Unsupported(l)));
            }
        }
        assert_eq!(Level::parse("sse9"), None);
    }
}
