//! SoS on a CPU device straight from the table's host rows, in two fused passes (the CPU's
//! counterpart of the GPU's fused kernels in `kernels.rs`).
//!
//! The tensor graph of `sos_tensor_blocks` (`compute.rs`) makes several temporaries per block on
//! the CPU (squares, unit rows, gathered directions, products) and scatters every unit row into the
//! pair sums. Here each output's row is read twice in all, as the graph's math says:
//!
//! 1. per reference pair, its outputs' rows in row order: `‖e_o‖²` and the sum of `e_o/‖e_o‖`
//!    (one read of the row; the second pass over it hits the cache);
//! 2. the group sums of the pair sums (pair order, as the graph's `select_assign`), their norms,
//!    and per pair the direction `sem_c/‖sem_c‖ − sur_l/‖sur_l‖`;
//! 3. per pair, each output's `(e_o · direction) / ‖e_o‖`.
//!
//! Pairs are independent in 1 and 3, so they run on rayon's threads when the crate's `rayon`
//! feature is on (natively) and in one thread otherwise (wasm32), with the same values either way:
//! each pair's sums and each output's score are computed by one thread in a fixed order. Sums of
//! squares and dot products use 16 partial sums (the lanes of [`culturelens_simd::dispatch!`]'s
//! vector path), so the values differ from the graph's by f32 rounding only (the tests hold them
//! to 1e-5, as the fused kernels).

use super::layout::SosLayout;

/// Partial sums of a dot product: one per vector lane of AVX-512 (two of AVX2).
const LANES: usize = 16;

/// The packed result of [`super::sos_packed`] (`[SoS(o) for o] ++ [‖sur_g‖] ++ [‖sem_g‖]`, the
/// norms of the group sums) for the rows `subset` of the row-major `table` (N × `dim`), every
/// row for `None`, as `sos_packed` takes them: `layout` is built from the same rows in the same
/// order (output `o` is table row `subset[o]`). The browser's CPU fallback scores a subset of
/// its table this way without gathering it.
pub fn sos_host(table: &[f32], dim: usize, subset: Option<&[u32]>, layout: &SosLayout) -> Vec<f32> {
    let n = layout.len();
    match subset {
        None => assert_eq!(table.len(), n * dim, "rows must be the layout's outputs × dim"),
        Some(rows) => {
            assert_eq!(rows.len(), n, "the subset must be the layout's outputs");
            assert!(
                rows.iter().all(|&r| (r as usize + 1) * dim <= table.len()),
                "a subset row is outside the table"
            );
        }
    }
    let row = |o: usize| {
        let r = subset.map_or(o, |rows| rows[o] as usize);
        &table[r * dim..(r + 1) * dim]
    };
    let by_pair = layout.pair_rows();

    // 1. Inverse norms and pair sums of unit rows.
    let pass1 = |p: usize| {
        let mut sum = vec![0f32; dim];
        let mut inv = Vec::with_capacity(by_pair[p].len());
        culturelens_simd::dispatch!({
            for &o in &by_pair[p] {
                let x = row(o as usize);
                let v = 1.0 / dot(x, x).sqrt();
                sum.iter_mut().zip(x).for_each(|(s, x)| *s += x * v);
                inv.push(v);
            }
        });
        (sum, inv)
    };
    let pairs: Vec<(Vec<f32>, Vec<f32>)> = map_pairs(by_pair.len(), pass1);

    // 2. Group sums (pairs in order), their norms, the unit references.
    let group = |pair_group: &[u32], count: usize| {
        let mut sums = vec![vec![0f32; dim]; count];
        for (p, (sum, _)) in pairs.iter().enumerate() {
            let g = &mut sums[pair_group[p] as usize];
            g.iter_mut().zip(sum).for_each(|(g, s)| *g += s);
        }
        let norms: Vec<f32> = sums.iter().map(|s| culturelens_simd::dispatch!(dot(s, s).sqrt())).collect();
        for (s, norm) in sums.iter_mut().zip(&norms) {
            let norm = norm.max(f32::MIN_POSITIVE);
            s.iter_mut().for_each(|v| *v /= norm);
        }
        (sums, norms)
    };
    let (sur, sur_norm) = group(&layout.pair_sur, layout.sur_names.len());
    let (sem, sem_norm) = group(&layout.pair_sem, layout.sem_names.len());

    // 3. Each output's dot product with its pair's direction.
    let pass3 = |p: usize| {
        let (s, l) = (&sem[layout.pair_sem[p] as usize], &sur[layout.pair_sur[p] as usize]);
        let direction: Vec<f32> = s.iter().zip(l).map(|(s, l)| s - l).collect();
        let inv = &pairs[p].1;
        culturelens_simd::dispatch!({
            by_pair[p]
                .iter()
                .zip(inv)
                .map(|(&o, v)| dot(row(o as usize), &direction) * v)
                .collect::<Vec<f32>>()
        })
    };
    let scores: Vec<Vec<f32>> = map_pairs(by_pair.len(), pass3);

    let mut packed = vec![0f32; n];
    for (outputs, scores) in by_pair.iter().zip(&scores) {
        for (&o, s) in outputs.iter().zip(scores) {
            packed[o as usize] = *s;
        }
    }
    packed.extend(sur_norm);
    packed.extend(sem_norm);
    packed
}

/// `f` of every pair `0..pairs`, in pair order: on rayon's threads with the `rayon` feature.
fn map_pairs<T: Send>(pairs: usize, f: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
    #[cfg(feature = "rayon")]
    {
        use rayon::prelude::*;
        (0..pairs).into_par_iter().map(f).collect()
    }
    #[cfg(not(feature = "rayon"))]
    {
        // One call per pair that is never inlined. A browser's wasm engine runs a function in
        // its baseline compiler first and switches to optimised code only at a later call, so
        // one long loop over every pair would stay in baseline code (about 2× slower) to its end.
        #[inline(never)]
        fn call<T>(f: &dyn Fn(usize) -> T, p: usize) -> T {
            f(p)
        }
        (0..pairs).map(|p| call(&f, p)).collect()
    }
}

/// `Σ a_i b_i` in [`LANES`] partial sums (lane `j` takes `i ≡ j mod LANES`), added in lane order,
/// then the tail: a loop that vectorises without reassociating, so every CPU path gives the same
/// bits.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let (ac, bc) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (a, b) in ac.zip(bc) {
        for j in 0..LANES {
            acc[j] += a[j] * b[j];
        }
    }
    let mut sum = acc.iter().sum::<f32>();
    for (a, b) in ar.iter().zip(br) {
        sum += a * b;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_adds_lanes_then_the_tail() {
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.25).collect();
        let want: f64 = a.iter().zip(&b).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum();
        assert!((f64::from(dot(&a, &b)) - want).abs() < 1e-3, "{} vs {want}", dot(&a, &b));
        assert_eq!(dot(&[3.0], &[4.0]), 12.0);
        assert_eq!(dot(&[], &[]), 0.0);
    }
}
