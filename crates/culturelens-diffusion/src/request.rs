//! What every pipeline of `pipelines.rs` takes and the steps their loops share: a batch of
//! prompts' token ids with the run's settings ([`GenerateRequest`]), each prompt's conditioning
//! repeated for its images ([`repeat_rows`]), classifier-free guidance over a `[uncond; cond]`
//! batch ([`guided`]), and the flow-matching scheduler the transformer pipelines need
//! ([`flow_scheduler`]); the image sizes a pipeline takes ([`SizeRule`]); and why a request
//! cannot run ([`GenerateError`]).

use burn::tensor::{Device, Int, Tensor, TensorData};

use culturelens_diffusion_schedulers::{FlowMatchEulerDiscrete, Scheduler, SchedulerError};

/// Why a generation request cannot run.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("height and width must be multiples of 8 (diffusers' rule); got {height}×{width}")]
    Size { height: usize, width: usize },
    #[error("--text-layer {layer}: DiffusionLens reads layers 1..={layers} of this text encoder")]
    Layer { layer: usize, layers: usize },
    #[error("initial latents have shape {found:?}, the pipeline expects {expected:?}")]
    Latents { expected: [usize; 4], found: [usize; 4] },
    #[error("height and width must be multiples of {multiple} for this pipeline; got {height}×{width}")]
    SizeMultiple { height: usize, width: usize, multiple: usize },
    #[error("initial latents have shape {found:?}, the pipeline expects {expected:?}")]
    LatentShape { expected: Vec<usize>, found: Vec<usize> },
    #[error(
        "the {pipeline} pipeline runs with a flow-matching scheduler (FlowMatchEulerDiscreteScheduler), not {scheduler}"
    )]
    NotFlowMatching { pipeline: &'static str, scheduler: &'static str },
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
}

/// A pipeline's image-size rule, a function of config values alone: each family's `size_rule`
/// (beside its pipeline) builds it, the loaded pipeline checks every request with it
/// (`latent_shape`), and `culturelens-models-io` builds it from a folder's configs, so that
/// `generate` refuses a size before any weights load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeRule {
    /// diffusers' default height and width.
    pub default: usize,
    /// Height and width must be positive multiples of this.
    pub multiple: usize,
    /// Whether a refusal cites diffusers' rule of 8 ([`GenerateError::Size`]: SD, SDXL,
    /// Kandinsky 3) rather than `multiple` ([`GenerateError::SizeMultiple`]).
    pub rule_of_8: bool,
    /// SD 3's position table: the latents (the image over `vae_scale_factor`) may have at most
    /// `max_patches` patches of `patch_size` a side.
    pub patch_limit: Option<PatchLimit>,
    /// Kandinsky 3: the MoVQ's scale factor; a request of `n` pixels makes images of
    /// `⌈n / 64⌉ · 8 · factor` (diffusers' `downscale_height_and_width`).
    pub movq_scale_factor: Option<usize>,
    /// Kandinsky 2.1: the MoVQ's scale factor `s`; a request of `n` pixels makes images of
    /// `⌈n / s²⌉ · s²` (diffusers' `get_new_h_w`).
    pub movq_square_factor: Option<usize>,
}

/// SD 3's limit on the latents' size (`pos_embed_max_size`), [`SizeRule::patch_limit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatchLimit {
    pub vae_scale_factor: usize,
    pub patch_size: usize,
    pub max_patches: usize,
}

impl SizeRule {
    /// A rule of `default` and `multiple` alone (refusals name `multiple`).
    pub fn multiple_of(default: usize, multiple: usize) -> Self {
        Self {
            default,
            multiple,
            rule_of_8: false,
            patch_limit: None,
            movq_scale_factor: None,
            movq_square_factor: None,
        }
    }

    /// Checks a `height × width` request against the rule.
    pub fn check(&self, height: usize, width: usize) -> Result<(), GenerateError> {
        let m = self.multiple;
        if height == 0 || width == 0 || !height.is_multiple_of(m) || !width.is_multiple_of(m) {
            return Err(if self.rule_of_8 {
                GenerateError::Size { height, width }
            } else {
                GenerateError::SizeMultiple { height, width, multiple: m }
            });
        }
        if let Some(PatchLimit { vae_scale_factor: f, patch_size: p, max_patches }) = self.patch_limit {
            // `multiple` is `f · p`: the latents split into whole patches.
            let (h, w) = (height / f, width / f);
            if h / p > max_patches || w / p > max_patches {
                return Err(GenerateError::Input(format!(
                    "latents of {h}×{w} need more than the pos_embed_max_size {max_patches} patches a side"
                )));
            }
        }
        Ok(())
    }

    /// The `[height, width]` of the images a `height × width` request makes: the request's own,
    /// but Kandinsky 3's and 2.1's rounded ([`Self::movq_scale_factor`],
    /// [`Self::movq_square_factor`]).
    pub fn image_size(&self, height: usize, width: usize) -> [usize; 2] {
        match (self.movq_scale_factor, self.movq_square_factor) {
            (Some(f), _) => [height, width].map(|n| movq_latent_side(n) * f),
            (None, Some(s)) => [height, width].map(|n| n.div_ceil(s * s) * s * s),
            (None, None) => [height, width],
        }
    }
}

/// One prompt's token ids: one row per tokenizer of the pipeline, in the order `tokenizer`,
/// `tokenizer_2`, …, each padded to its tokenizer's length (Lumina 2's unpadded: its pipeline
/// pads them and builds the attention mask).
pub type PromptIds = Vec<Vec<u32>>;

/// One batch of prompts for any [`Pipeline`].
pub struct GenerateRequest<'a> {
    pub prompt_ids: &'a [PromptIds],
    /// Each prompt's negative prompt (the ids of `""` when none is given).
    pub negative_ids: &'a [PromptIds],
    /// Whether a negative prompt was given: FLUX's true CFG runs only then (diffusers'
    /// `negative_prompt is not None`); the other pipelines guide with `""` without one.
    pub negative_given: bool,
    pub images_per_prompt: usize,
    pub height: usize,
    pub width: usize,
    pub steps: usize,
    /// `guidance_scale`: classifier-free guidance (SD, SD 3; off at ≤ 1) or FLUX-dev's distilled
    /// guidance embedding.
    pub guidance: f64,
    /// FLUX's `true_cfg_scale` (with a negative prompt; off at ≤ 1). The others ignore it.
    pub true_cfg: f64,
    /// DiffusionLens text layer (`None`: the pipeline's own conditioning).
    pub layer: Option<usize>,
    /// The initial latents of all `P·K` images, in the pipeline's `latent_shape`, before any
    /// scaling by the scheduler.
    pub latents: &'a [f32],
}

impl GenerateRequest<'_> {
    /// The latents on `device` after checking they fill `shape`.
    pub fn latents<const D: usize>(
        &self,
        shape: [usize; D],
        device: &Device,
    ) -> Result<Tensor<D>, GenerateError> {
        if self.latents.len() != shape.iter().product::<usize>() || self.prompt_ids.is_empty() {
            return Err(GenerateError::Input(format!(
                "{} latent values for {} prompt(s) of shape {shape:?}",
                self.latents.len(),
                self.prompt_ids.len()
            )));
        }
        if self.negative_ids.len() != self.prompt_ids.len() {
            return Err(GenerateError::Input("one negative prompt per prompt".into()));
        }
        Ok(Tensor::from_data(TensorData::new(self.latents.to_vec(), shape), device))
    }
}

/// Each row of `t` repeated `k` times in place (`[a, b]` → `[a, a, b, b]`): one prompt's
/// conditioning for its `k` images, as diffusers' `repeat(1, k, …).view(…)`.
pub fn repeat_rows<const D: usize>(t: Tensor<D>, k: usize) -> Tensor<D> {
    if k == 1 {
        return t;
    }
    let n = t.dims()[0];
    let index: Vec<i64> = (0..n as i64).flat_map(|i| std::iter::repeat_n(i, k)).collect();
    let device = t.device();
    t.select(0, Tensor::<1, Int>::from_data(TensorData::new(index, [n * k]), &device))
}

/// `uncond + scale · (cond − uncond)` of a prediction over `[uncond; cond]` rows (diffusers'
/// `noise_pred.chunk(2)` and guidance).
pub fn guided<const D: usize>(prediction: Tensor<D>, scale: f64) -> Tensor<D> {
    let mut halves = prediction.chunk(2, 0);
    let cond = halves.pop().expect("two halves");
    let uncond = halves.pop().expect("two halves");
    uncond.clone() + (cond - uncond) * scale
}

/// A UNet's prediction of `channels` noise channels (and learned-variance channels after them)
/// made ready for the scheduler, as IF and Kandinsky 2.1 do it: with `guidance` (rows
/// `[uncond; cond]`) the noise channels are [`guided`] and the variance is the prompt half's; the
/// variance channels are kept only when the scheduler's `variance_type` is `learned_range`.
pub fn guided_noise(
    prediction: Tensor<4>,
    channels: usize,
    guidance: Option<f64>,
    learned: bool,
) -> Tensor<4> {
    let c_out = prediction.dims()[1];
    let prediction = match guidance {
        Some(scale) => {
            let mut halves = prediction.chunk(2, 0);
            let text = halves.pop().expect("two halves");
            let uncond = halves.pop().expect("two halves");
            let noise =
                Tensor::cat(vec![uncond.narrow(1, 0, channels), text.clone().narrow(1, 0, channels)], 0);
            let noise = guided(noise, scale);
            if c_out > channels {
                Tensor::cat(vec![noise, text.narrow(1, channels, c_out - channels)], 1)
            } else {
                noise
            }
        }
        None => prediction,
    };
    if learned { prediction } else { prediction.narrow(1, 0, channels) }
}

/// The flow-matching scheduler of `pipeline` (the SD 3 and FLUX pipelines run with no other).
pub fn flow_scheduler<'s>(
    scheduler: &'s mut Scheduler,
    pipeline: &'static str,
) -> Result<&'s mut FlowMatchEulerDiscrete, GenerateError> {
    let kind = scheduler.kind();
    scheduler.flow_match().ok_or(GenerateError::NotFlowMatching { pipeline, scheduler: kind.class_name() })
}

/// Kandinsky 3's latents' side for a request of `n` pixels (its pipeline's `latent_side`):
/// diffusers' `downscale_height_and_width(n, n, 8)`, `⌈n / 64⌉ · 8`.
pub fn movq_latent_side(n: usize) -> usize {
    n.div_ceil(64) * 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_rules_refuse_with_their_family_message() {
        let sd = SizeRule { rule_of_8: true, ..SizeRule::multiple_of(512, 8) };
        assert!(sd.check(512, 768).is_ok());
        let e = sd.check(20, 512).unwrap_err().to_string();
        assert_eq!(e, "height and width must be multiples of 8 (diffusers' rule); got 20×512");
        let flux = SizeRule::multiple_of(1024, 16);
        assert_eq!(
            flux.check(1024, 0).unwrap_err().to_string(),
            "height and width must be multiples of 16 for this pipeline; got 1024×0"
        );
        let limit = PatchLimit { vae_scale_factor: 8, patch_size: 2, max_patches: 96 };
        let sd3 = SizeRule { patch_limit: Some(limit), ..SizeRule::multiple_of(1024, 16) };
        assert!(sd3.check(1536, 1536).is_ok());
        let e = sd3.check(1552, 1024).unwrap_err().to_string();
        assert_eq!(e, "latents of 194×128 need more than the pos_embed_max_size 96 patches a side");
        let kandinsky =
            SizeRule { rule_of_8: true, movq_scale_factor: Some(8), ..SizeRule::multiple_of(1024, 1) };
        assert!(kandinsky.check(1000, 1).is_ok());
        assert_eq!(kandinsky.image_size(1000, 1024), [1024, 1024]);
        assert_eq!(sd3.image_size(1000, 1024), [1000, 1024]);
    }

    #[test]
    fn rows_repeat_in_place() {
        let device = Device::flex();
        let t = Tensor::<2>::from_data(TensorData::new(vec![1f32, 2., 3., 4.], [2, 2]), &device);
        let r = repeat_rows(t, 3).into_data().try_into_vec::<f32>().unwrap();
        assert_eq!(r, [1., 2., 1., 2., 1., 2., 3., 4., 3., 4., 3., 4.]);
    }
}
