//! Bit-exactness of `TorchGenerator` against real torch: every draw of
//! `tests/fixtures/diffusion/torch_randn.txt` (made by
//! `scripts/fixtures/make_diffusion_torch_randn.py` with ATEN_CPU_CAPABILITY=avx2 and =default),
//! compared by FNV-1a hash over all values and value by value over the first 64.

use culturelens_rng::{TorchGenerator, TorchNormalPath};
use culturelens_testkit::read_fixture;

fn fnv1a64(values: &[f32]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for v in values {
        for b in v.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

#[test]
fn matches_torch_bit_for_bit() {
    let mut generator = None;
    let mut path = TorchNormalPath::Avx2;
    let (mut draws, mut cases, mut scalar_cases) = (0, 0, 0);
    let fixture = read_fixture("diffusion/torch_randn.txt");
    for (lineno, line) in fixture.lines().enumerate() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [] => {}
            [first, ..] if first.starts_with('#') => {}
            ["case", seed, p] => {
                generator = Some(TorchGenerator::manual_seed(seed.parse().unwrap()));
                path = match *p {
                    "avx2" => TorchNormalPath::Avx2,
                    "scalar" => TorchNormalPath::Scalar,
                    other => panic!("line {}: unknown path {other}", lineno + 1),
                };
                cases += 1;
                scalar_cases += usize::from(path == TorchNormalPath::Scalar);
            }
            [op, n, hash, bits] => {
                let g = generator.as_mut().expect("draw before case");
                let n: usize = n.parse().unwrap();
                let got = match *op {
                    "randn" => g.randn(n, path),
                    "rand" => g.rand(n),
                    other => panic!("line {}: unknown op {other}", lineno + 1),
                };
                for (i, want) in bits.split(',').enumerate() {
                    let want = u32::from_str_radix(want, 16).unwrap();
                    assert_eq!(
                        got[i].to_bits(),
                        want,
                        "line {} ({op} {n}, {path:?}) element {i}: got {} want {}",
                        lineno + 1,
                        got[i],
                        f32::from_bits(want)
                    );
                }
                let want_hash = u64::from_str_radix(hash, 16).unwrap();
                assert_eq!(
                    fnv1a64(&got),
                    want_hash,
                    "line {} ({op} {n}, {path:?}): hash over all values differs",
                    lineno + 1
                );
                draws += 1;
            }
            _ => panic!("line {}: malformed", lineno + 1),
        }
    }
    assert!(cases >= 20 && scalar_cases >= 10 && draws >= 40, "fixture too small");
}

#[test]
fn paths_differ_only_in_the_last_bits() {
    // The two float paths give nearly equal normals (both are Box–Muller on the same uniforms)
    // but not identical ones, which is why the path is a parameter.
    let a = TorchGenerator::manual_seed(0).randn(4096, TorchNormalPath::Avx2);
    let b = TorchGenerator::manual_seed(0).randn(4096, TorchNormalPath::Scalar);
    let max = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
    assert!(max > 0.0 && max < 1e-5, "max difference {max}");
}

#[test]
fn capability_names() {
    assert_eq!(TorchNormalPath::from_capability("AVX2"), TorchNormalPath::Avx2);
    for other in ["AVX512", "DEFAULT", "SVE256"] {
        assert_eq!(TorchNormalPath::from_capability(other), TorchNormalPath::Scalar);
    }
}
