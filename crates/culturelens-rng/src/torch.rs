//! PyTorch's CPU generator, re-implemented bit for bit: `torch.Generator().manual_seed(s)` followed
//! by `torch.rand` / `torch.randn` in float32, the draws diffusers makes for initial latents when it
//! is given a CPU generator. Pinned by `tests/fixtures/diffusion/torch_randn.txt` (real torch,
//! `scripts/fixtures/make_diffusion_torch_randn.py`).
//!
//! torch (ATen `CPUGeneratorImpl`, `DistributionKernels.cpp`) draws a float32 `randn` of `n`
//! elements in one of two ways:
//! - `n < 16`: one element at a time from `at::normal_distribution<double>`: two 53-bit uniforms
//!   `u1, u2` (each from two mt19937 words), `r = sqrt(-2 log1p(-u2))`, `θ = 2π u1`; returns
//!   `r cos θ` and caches `r sin θ` in the generator for the next scalar draw (the cache survives
//!   across calls until the next `manual_seed`).
//! - `n ≥ 16`: first `n` 24-bit float uniforms, then Box–Muller on blocks of 16 (`u1 = 1 − data[j]`,
//!   `u2 = data[j+8]`, cosines into the first 8, sines into the last 8); when `n % 16 ≠ 0` the last
//!   16 slots are refilled with 16 fresh uniforms and transformed again. The block transform is
//!   float32 and depends on the CPU capability torch dispatched to: [`TorchNormalPath::Avx2`]
//!   (capability `AVX2`: the Cephes polynomials of avx_mathfun's `log256_ps` / `sincos256_ps`) or
//!   [`TorchNormalPath::Scalar`] (`DEFAULT`, `AVX512` and non-x86 builds: libm's `logf`, `cosf`,
//!   `sinf`). `torch.backends.cpu.get_cpu_capability()` says which one a machine uses.
//!
//! The scalar paths call the platform's libm (`log1p`, `cos`, `sin`, `logf`, `cosf`, `sinf`) as
//! torch does; on Linux both use glibc, so the results agree bit for bit. The AVX2 path is pure
//! float arithmetic and agrees on every target.

use crate::mt19937::Mt19937;

/// How torch turns float uniforms into normals for tensors of 16 elements or more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TorchNormalPath {
    /// torch's `AVX2` CPU capability (x86-64 CPUs with AVX2 but without AVX-512).
    Avx2,
    /// torch's `DEFAULT` and `AVX512` capabilities and non-x86 CPUs (Apple silicon, ARM servers).
    Scalar,
}

impl TorchNormalPath {
    /// The path for a `torch.backends.cpu.get_cpu_capability()` name (`AVX2`, `AVX512`,
    /// `DEFAULT`, …); every capability other than AVX2 takes the scalar path.
    pub fn from_capability(capability: &str) -> Self {
        if capability.eq_ignore_ascii_case("avx2") { Self::Avx2 } else { Self::Scalar }
    }
}

/// `torch.Generator()` on the CPU after `manual_seed`.
#[derive(Debug, Clone)]
pub struct TorchGenerator {
    engine: Mt19937,
    next_double_normal: Option<f64>,
}

impl TorchGenerator {
    /// `torch.Generator().manual_seed(seed)` (mt19937 keeps the seed's low 32 bits).
    pub fn manual_seed(seed: u64) -> Self {
        Self { engine: Mt19937::new(seed), next_double_normal: None }
    }

    /// One mt19937 word (`CPUGeneratorImpl::random`).
    pub fn random(&mut self) -> u32 {
        self.engine.next_u32()
    }

    /// Two words, the first one high (`CPUGeneratorImpl::random64`).
    pub fn random64(&mut self) -> u64 {
        let hi = self.random();
        let lo = self.random();
        (u64::from(hi) << 32) | u64::from(lo)
    }

    /// `at::uniform_real_distribution<float>(0, 1)`: 24 random bits, in [0, 1).
    fn uniform_f32(&mut self) -> f32 {
        (self.random() & 0x00ff_ffff) as f32 * (1.0 / (1u32 << 24) as f32)
    }

    /// `at::uniform_real_distribution<double>(0, 1)`: 53 random bits, in [0, 1).
    fn uniform_f64(&mut self) -> f64 {
        (self.random64() & ((1u64 << 53) - 1)) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// `torch.rand(n, generator=g)` in float32.
    pub fn rand(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.uniform_f32()).collect()
    }

    /// `torch.randn(shape, generator=g)` in float32, `n` the number of elements (row-major).
    pub fn randn(&mut self, n: usize, path: TorchNormalPath) -> Vec<f32> {
        if n < 16 {
            return (0..n).map(|_| self.normal_f64() as f32).collect();
        }
        let mut data = self.rand(n);
        for block in data.chunks_exact_mut(16) {
            box_muller_16(block, path);
        }
        if !n.is_multiple_of(16) {
            let tail = &mut data[n - 16..];
            for slot in tail.iter_mut() {
                *slot = self.uniform_f32();
            }
            box_muller_16(tail, path);
        }
        data
    }

    /// `at::normal_distribution<double>(0, 1)` with the generator's cached second sample.
    fn normal_f64(&mut self) -> f64 {
        if let Some(cached) = self.next_double_normal.take() {
            return cached;
        }
        let u1 = self.uniform_f64();
        let u2 = self.uniform_f64();
        let r = (-2.0 * (-u2).ln_1p()).sqrt();
        let theta = 2.0 * std::f64::consts::PI * u1;
        self.next_double_normal = Some(r * theta.sin());
        r * theta.cos()
    }
}

/// torch's `normal_fill_16` (scalar) or `normal_fill_16_AVX2` on one block of 16 uniforms.
fn box_muller_16(data: &mut [f32], path: TorchNormalPath) {
    for j in 0..8 {
        let u1 = 1.0 - data[j];
        let u2 = data[j + 8];
        let (radius, sin, cos) = match path {
            TorchNormalPath::Avx2 => {
                let theta = (2.0 * std::f64::consts::PI) as f32 * u2;
                let (sin, cos) = cephes::sincosf(theta);
                ((-2.0 * cephes::logf(u1)).sqrt(), sin, cos)
            }
            TorchNormalPath::Scalar => {
                let theta = (2.0 * std::f64::consts::PI * f64::from(u2)) as f32;
                ((-2.0 * u1.ln()).sqrt(), theta.sin(), theta.cos())
            }
        };
        // torch applies `x * std + mean` with std = 1 and mean = 0; the `+ 0.0` keeps its one
        // visible effect, turning a -0.0 into +0.0.
        data[j] = radius * cos + 0.0;
        data[j + 8] = radius * sin + 0.0;
    }
}

/// One lane of avx_mathfun (Pommier's Cephes-derived `log256_ps` and `sincos256_ps`, as vendored
/// in ATen), operation for operation. torch's AVX2 kernels are built by GCC with `-mfma` and
/// floating-point contraction on, so each product whose only use is a sum is fused into one FMA
/// (`mul_add` here, which is exact on every target); the other operations round to float32 on
/// their own. Checked against torch on 10^6 draws: no bit differs, while the unfused form differs
/// in about 1% of them.
mod cephes {
    const SQRTHF: f32 = std::f64::consts::FRAC_1_SQRT_2 as f32;
    const LOG_P: [f32; 9] = [
        7.037_683_629_2e-2_f64 as f32,
        -1.151_461_031_0e-1_f64 as f32,
        1.167_699_874_0e-1_f64 as f32,
        -1.242_014_084_6e-1_f64 as f32,
        1.424_932_278_7e-1_f64 as f32,
        -1.666_805_766_5e-1_f64 as f32,
        2.000_071_476_5e-1_f64 as f32,
        -2.499_999_399_3e-1_f64 as f32,
        3.333_333_117_4e-1_f64 as f32,
    ];
    const LOG_Q1: f32 = -2.121_944_40e-4_f64 as f32;
    const LOG_Q2: f32 = 0.693_359_375_f64 as f32;
    const MINUS_DP: [f32; 3] = [
        -0.785_156_25_f64 as f32,
        -2.418_756_484_985_351_6e-4_f64 as f32,
        -3.774_894_977_445_941e-8_f64 as f32,
    ];
    const SINCOF: [f32; 3] =
        [-1.951_529_589_1e-4_f64 as f32, 8.332_160_873_6e-3_f64 as f32, -1.666_665_461_1e-1_f64 as f32];
    const COSCOF: [f32; 3] = [
        2.443_315_711_809_948e-5_f64 as f32,
        -1.388_731_625_493_765e-3_f64 as f32,
        4.166_664_568_298_827e-2_f64 as f32,
    ];
    const FOPI: f32 = 1.273_239_544_735_16_f64 as f32;
    const SIGN: u32 = 0x8000_0000;

    /// `log256_ps`: NaN for x <= 0, denormals cut to the smallest normal.
    pub fn logf(x: f32) -> f32 {
        let invalid = x <= 0.0;
        let min_norm = f32::from_bits(0x0080_0000);
        // `_mm256_max_ps(x, m)` returns `m` unless `x > m` (NaN included).
        let x = if x > min_norm { x } else { min_norm };
        let bits = x.to_bits();
        let exponent = (bits >> 23) as i32 - 0x7f;
        let mut x = f32::from_bits((bits & !0x7f80_0000) | 0.5f32.to_bits());
        let mut e = exponent as f32 + 1.0;
        let below = x < SQRTHF;
        let tmp = if below { x } else { 0.0 };
        x -= 1.0;
        e -= if below { 1.0 } else { 0.0 };
        x += tmp;
        let z = x * x;
        let mut y = LOG_P[0];
        for &p in &LOG_P[1..] {
            y = y.mul_add(x, p);
        }
        y *= x;
        y = y.mul_add(z, e * LOG_Q1);
        y = (-z).mul_add(0.5, y);
        x = e.mul_add(LOG_Q2, x + y);
        if invalid { f32::NAN } else { x }
    }

    /// `sincos256_ps`: (sin x, cos x).
    pub fn sincosf(x: f32) -> (f32, f32) {
        let mut sign_sin = x.to_bits() & SIGN;
        let mut x = f32::from_bits(x.to_bits() & !SIGN);
        // `_mm256_cvttps_epi32`: truncation, 0x80000000 when out of range.
        let scaled = x * FOPI;
        let mut j = if scaled < 2_147_483_648.0 { scaled as i32 } else { i32::MIN };
        j = j.wrapping_add(1) & !1;
        let y = j as f32;
        let swap_sign_sin = ((j & 4) as u32) << 29;
        let sin_poly = (j & 2) == 0;
        x = y.mul_add(MINUS_DP[0], x);
        x = y.mul_add(MINUS_DP[1], x);
        x = y.mul_add(MINUS_DP[2], x);
        let sign_cos = ((!j.wrapping_sub(2) & 4) as u32) << 29;
        sign_sin ^= swap_sign_sin;

        let z = x * x;
        let mut c = COSCOF[0];
        c = c.mul_add(z, COSCOF[1]);
        c = c.mul_add(z, COSCOF[2]);
        c *= z;
        c = c.mul_add(z, -(z * 0.5));
        c += 1.0;

        let mut s = SINCOF[0];
        s = s.mul_add(z, SINCOF[1]);
        s = s.mul_add(z, SINCOF[2]);
        s *= z;
        s = s.mul_add(x, x);

        let ysin2 = if sin_poly { s } else { 0.0 };
        let ysin1 = if sin_poly { 0.0 } else { c };
        let s_rest = s - ysin2;
        let c_rest = c - ysin1;
        let sin = ysin1 + ysin2;
        let cos = c_rest + s_rest;
        (f32::from_bits(sin.to_bits() ^ sign_sin), f32::from_bits(cos.to_bits() ^ sign_cos))
    }
}
