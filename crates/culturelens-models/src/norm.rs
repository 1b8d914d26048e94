//! Group normalisation followed by an optional SiLU, for the diffusion models' ResNet blocks and
//! output heads (`silu(norm(x))` in diffusers' `ResnetBlock2D`, `conv_norm_out`), and the plain
//! group norm of their attention blocks.

use burn::nn::GroupNorm;
use burn::tensor::Tensor;
use burn::tensor::activation::silu;

#[cfg(feature = "flex-fused")]
use super::cpu;

/// `silu(norm.forward(x))` when `silu`, else `norm.forward(x)`, of `x` `[batch, channels, …]`.
///
/// With the crate feature `flex-fused`, on the CPU backend (f32), the statistics, the affine map
/// and the SiLU run in one task per (image, group), vectorised (`cpu::group_norm`: the mean
/// and variance summed in f64, one reciprocal square root a group), where the backend runs a
/// dozen passes; the values differ from the graph's by rounding (tested below).
pub fn group_norm_act<const D: usize>(norm: &GroupNorm, x: Tensor<D>, silu_after: bool) -> Tensor<D> {
    #[cfg(feature = "flex-fused")]
    if cpu::fused(&x) {
        let affine = match (&norm.gamma, &norm.beta) {
            (Some(g), Some(b)) if norm.affine => Some((g.val(), b.val())),
            _ => None,
        };
        return cpu::group_norm(x, norm.num_groups, norm.epsilon, affine, silu_after);
    }
    let y = norm.forward(x);
    if silu_after { silu(y) } else { y }
}

#[cfg(all(test, feature = "flex-fused"))]
mod tests {
    use super::*;
    use burn::nn::GroupNormConfig;
    use burn::tensor::{Device, TensorData};
    use culturelens_rng::SplitMix64;

    fn random<const D: usize>(rng: &mut SplitMix64, shape: [usize; D], scale: f64, offset: f64) -> Tensor<D> {
        let data: Vec<f32> =
            (0..shape.iter().product()).map(|_| (offset + scale * rng.normal()) as f32).collect();
        Tensor::from_data(TensorData::new(data, shape), &Device::flex())
    }

    fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        t.into_data().try_into_vec::<f32>().unwrap()
    }

    /// The fused group norm against Burn's `GroupNorm` (and `silu`), on groups of one and of
    /// several channels, values offset from zero (the variance's cancellation), affine and not,
    /// rank 3 and 4, and a group shorter than the 8 lanes of the sums. The bound, relative to
    /// max(1, |value|), is 2.5× the worst measured (1.2e-6: the graph's own f32 statistics of
    /// values offset by 5); a wrong statistic or channel would be off by O(1).
    #[test]
    fn fused_group_norm_matches_the_graph() {
        const BOUND: f32 = 3e-6;
        let device = Device::flex();
        let mut rng = SplitMix64::new(21);
        let cases: [(usize, usize, &[usize], bool); 4] =
            [(32, 64, &[9, 7], true), (4, 4, &[5, 3], true), (2, 6, &[1, 1], true), (3, 12, &[17], false)];
        for (groups, channels, spatial, affine) in cases {
            let mut norm =
                GroupNormConfig::new(groups, channels).with_epsilon(1e-6).with_affine(affine).init(&device);
            if affine {
                norm.gamma = Some(burn::module::Param::from_tensor(random(&mut rng, [channels], 0.5, 1.0)));
                norm.beta = Some(burn::module::Param::from_tensor(random(&mut rng, [channels], 0.5, 0.0)));
            }
            for silu_after in [false, true] {
                let (fused, graph) = match spatial {
                    [h, w] => {
                        let x: Tensor<4> = random(&mut rng, [2, channels, *h, *w], 3.0, 5.0);
                        let graph = norm.forward(x.clone());
                        let graph = if silu_after { silu(graph) } else { graph };
                        (values(group_norm_act(&norm, x, silu_after)), values(graph))
                    }
                    [l] => {
                        let x: Tensor<3> = random(&mut rng, [2, channels, *l], 3.0, 5.0);
                        let graph = norm.forward(x.clone());
                        let graph = if silu_after { silu(graph) } else { graph };
                        (values(group_norm_act(&norm, x, silu_after)), values(graph))
                    }
                    _ => unreachable!(),
                };
                let worst = fused
                    .iter()
                    .zip(&graph)
                    .map(|(f, g)| (f - g).abs() / g.abs().max(1.0))
                    .fold(0.0, f32::max);
                println!("{groups} groups of {channels}, silu {silu_after}: worst {worst:.2e}");
                assert!(worst <= BOUND, "{groups} groups of {channels}, silu {silu_after}: {worst:e}");
            }
        }
    }

    /// A shared input is not written in place: the caller's tensor keeps its values.
    #[test]
    fn a_shared_input_is_left_as_it_was() {
        let mut rng = SplitMix64::new(3);
        let norm = GroupNormConfig::new(2, 4).init(&Device::flex());
        let x: Tensor<4> = random(&mut rng, [1, 4, 3, 3], 1.0, 2.0);
        let before = values(x.clone());
        let _ = group_norm_act(&norm, x.clone(), true);
        assert_eq!(values(x), before);
    }
}
