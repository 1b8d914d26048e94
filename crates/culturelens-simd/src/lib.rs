//! Runs a closure compiled for the widest vector instructions the CPU has (x86-64: AVX-512F or
//! AVX2, chosen at run time), so that plain loops over slices inside it vectorise; plain code
//! elsewhere (other architectures, wasm32). The arithmetic is the same on every path: no fused
//! multiply-adds are introduced, so the values do not depend on the CPU. Used by the Vendi
//! eigensolver (`culturelens-compute`'s `vendi/eigen.rs`) and the encoders' CPU passes
//! (`culturelens-models`'s `cpu.rs`).

#[inline(always)]
pub fn dispatch<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F.
            return unsafe { avx512(f) };
        }
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { avx2(f) };
        }
    }
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}
