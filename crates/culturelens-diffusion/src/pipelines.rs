//! The text-to-image pipelines culturelens runs, one variant per diffusers pipeline family, and
//! the request every one of them takes. `culturelens-models-io` picks the variant from
//! `model_index.json`'s `_class_name` and loads its components; the CLI then only asks the
//! [`Pipeline`] for its defaults, shapes and images. A new family (Kandinsky, …) is a new variant
//! here, its `pipeline_*.rs` beside the others, and its loader in models-io.
//!
//! | variant | diffusers classes | tokenizers (one id row each) |
//! |---|---|---|
//! | [`Pipeline::StableDiffusion`] | `StableDiffusionPipeline`, `AltDiffusionPipeline` | `tokenizer` |
//! | [`Pipeline::StableDiffusionXl`] | `StableDiffusionXLPipeline` (SDXL, Playground v2.5) | `tokenizer`, `tokenizer_2` |
//! | [`Pipeline::StableDiffusion3`] | `StableDiffusion3Pipeline` | `tokenizer`, `tokenizer_2`, `tokenizer_3` |
//! | [`Pipeline::Flux`] | `FluxPipeline` | `tokenizer`, `tokenizer_2` |
//! | [`Pipeline::CogView4`] | `CogView4Pipeline` | `tokenizer` (GLM's ids, left-padded to a multiple of 16) |
//! | [`Pipeline::Lumina2`] | `Lumina2Pipeline` | `tokenizer` (unpadded; the system prompt on prompts only) |
//! | [`Pipeline::Kandinsky3`] | `Kandinsky3Pipeline` | `tokenizer` |
//! | [`Pipeline::DeepFloydIf`] | `IFPipeline` (stage I) | `tokenizer` |
//! | [`Pipeline::Kandinsky21`] | `KandinskyCombinedPipeline` (prior + decoder) | `prior_tokenizer` (CLIP), `tokenizer` (XLM-R) |
//!
//! Initial latents are the array the pipeline's own `latents=` argument takes
//! ([`Pipeline::latent_shape`]; packed `(K, tokens, 4c)` for FLUX), drawn from
//! `torch.Generator().manual_seed(seed)` as diffusers draws them with a CPU generator
//! ([`Pipeline::initial_latents`]: FLUX draws the unpacked `(K, c, h, w)` and packs it). IF's
//! DDPM scheduler goes on drawing from that generator ([`Pipeline::noise_generator`]).
//! Kandinsky 2.1 draws its prior's latents first and the decoder's after the prior's loop, from
//! one generator: it runs through [`Kandinsky21::generate`], which takes that generator.

use burn::tensor::{Device, Tensor};

use super::pipeline::{Request, StableDiffusion, seed_latents};
use super::pipeline_cogview4::CogView4;
use super::pipeline_flux::Flux;
use super::pipeline_if::DeepFloydIf;
use super::pipeline_kandinsky3::Kandinsky3;
use super::pipeline_kandinsky21_combined::Kandinsky21;
use super::pipeline_lumina2::Lumina2;
use super::pipeline_stable_diffusion_3::StableDiffusion3;
use super::pipeline_stable_diffusion_xl::StableDiffusionXl;
pub use super::request::{GenerateError, GenerateRequest, PromptIds};
use culturelens_diffusion_models::unet::AttentionSlice;
use culturelens_diffusion_schedulers::Scheduler;
use culturelens_models::ModelError;
use culturelens_rng::{TorchGenerator, TorchNormalPath};

/// A loaded text-to-image pipeline.
#[derive(Debug)]
pub enum Pipeline {
    StableDiffusion(Box<StableDiffusion>),
    StableDiffusionXl(Box<StableDiffusionXl>),
    StableDiffusion3(Box<StableDiffusion3>),
    Flux(Box<Flux>),
    CogView4(Box<CogView4>),
    Lumina2(Box<Lumina2>),
    Kandinsky3(Box<Kandinsky3>),
    DeepFloydIf(Box<DeepFloydIf>),
    Kandinsky21(Box<Kandinsky21>),
}

impl Pipeline {
    /// The number of token-id rows a prompt has (one per tokenizer).
    pub fn tokenizers(&self) -> usize {
        match self {
            Self::StableDiffusion(_)
            | Self::CogView4(_)
            | Self::Lumina2(_)
            | Self::Kandinsky3(_)
            | Self::DeepFloydIf(_) => 1,
            Self::StableDiffusion3(_) => 3,
            Self::StableDiffusionXl(_) | Self::Flux(_) | Self::Kandinsky21(_) => 2,
        }
    }

    /// diffusers' default height and width.
    pub fn default_size(&self) -> usize {
        match self {
            Self::StableDiffusion(p) => p.default_size(),
            Self::StableDiffusionXl(p) => p.default_size(),
            Self::StableDiffusion3(p) => p.default_size(),
            Self::Flux(p) => p.default_size(),
            Self::CogView4(p) => p.default_size(),
            Self::Lumina2(p) => p.default_size(),
            Self::Kandinsky3(p) => p.default_size(),
            Self::DeepFloydIf(p) => p.default_size(),
            Self::Kandinsky21(p) => p.decoder.default_size(),
        }
    }

    /// diffusers' default `num_inference_steps`.
    pub fn default_steps(&self) -> usize {
        match self {
            Self::StableDiffusion(_) | Self::StableDiffusionXl(_) | Self::CogView4(_) => 50,
            Self::StableDiffusion3(_) | Self::Flux(_) => 28,
            Self::Lumina2(_) => 30,
            Self::Kandinsky3(_) => 25,
            Self::DeepFloydIf(_) | Self::Kandinsky21(_) => 100,
        }
    }

    /// diffusers' default `guidance_scale`.
    pub fn default_guidance(&self) -> f64 {
        match self {
            Self::StableDiffusion(_) => 7.5,
            Self::StableDiffusionXl(_) | Self::CogView4(_) => 5.0,
            Self::StableDiffusion3(_) => 7.0,
            Self::Flux(_) => 3.5,
            Self::Lumina2(_) | Self::Kandinsky21(_) => 4.0,
            Self::Kandinsky3(_) => 3.0,
            Self::DeepFloydIf(_) => 7.0,
        }
    }

    /// Whether the pipeline needs a flow-matching scheduler.
    pub fn flow_matching(&self) -> bool {
        !matches!(
            self,
            Self::StableDiffusion(_)
                | Self::StableDiffusionXl(_)
                | Self::Kandinsky3(_)
                | Self::DeepFloydIf(_)
                | Self::Kandinsky21(_)
        )
    }

    /// The layers DiffusionLens reads, `1..=lens_layers()`; the last is the pipeline's own
    /// conditioning (SD: the text encoder's; SDXL: `text_encoder_2`'s penultimate; SD 3 and
    /// FLUX: T5's; CogView4: GLM's `hidden_states[L − 1]`; Lumina 2: Gemma 2's
    /// `hidden_states[L − 1]`; Kandinsky 2.1: the decoder's M-CLIP, not the prior's CLIP).
    pub fn lens_layers(&self) -> usize {
        match self {
            Self::StableDiffusion(p) => p.text_encoder.lens_layers(),
            Self::StableDiffusionXl(p) => p.lens_layers(),
            Self::StableDiffusion3(p) => p.lens_layers(),
            Self::Flux(p) => p.lens_layers(),
            Self::CogView4(p) => p.lens_layers(),
            Self::Lumina2(p) => p.lens_layers(),
            Self::Kandinsky3(p) => p.lens_layers(),
            Self::DeepFloydIf(p) => p.lens_layers(),
            Self::Kandinsky21(p) => p.decoder.lens_layers(),
        }
    }

    /// Checks a DiffusionLens layer against the text encoder it reads.
    pub fn check_layer(&self, layer: Option<usize>) -> Result<(), GenerateError> {
        let layers = self.lens_layers();
        match layer {
            Some(k) if k == 0 || k > layers => Err(GenerateError::Layer { layer: k, layers }),
            _ => Ok(()),
        }
    }

    /// The shape of the pipeline's `latents=` for `images` images of `height × width`.
    pub fn latent_shape(
        &self,
        images: usize,
        height: usize,
        width: usize,
    ) -> Result<Vec<usize>, GenerateError> {
        Ok(match self {
            Self::StableDiffusion(p) => p.latent_shape(images, height, width)?.to_vec(),
            Self::StableDiffusionXl(p) => p.latent_shape(images, height, width)?.to_vec(),
            Self::StableDiffusion3(p) => p.latent_shape(images, height, width)?.to_vec(),
            Self::Flux(p) => p.latent_shape(images, height, width)?.to_vec(),
            Self::CogView4(p) => p.latent_shape(images, height, width)?.to_vec(),
            Self::Lumina2(p) => p.latent_shape(images, height, width)?.to_vec(),
            Self::Kandinsky3(p) => p.latent_shape(images, height, width)?.to_vec(),
            Self::DeepFloydIf(p) => p.latent_shape(images, height, width)?.to_vec(),
            Self::Kandinsky21(p) => p.decoder.latent_shape(images, height, width)?.to_vec(),
        })
    }

    /// The `[height, width]` of the images [`Self::generate`] returns for an `height × width`
    /// request: the request's own, but Kandinsky 3's `⌈H / 64⌉ · 8 · 2^(MoVQ levels − 1)`
    /// (diffusers' `downscale_height_and_width`) and Kandinsky 2.1's `⌈H / s²⌉ · s²`
    /// (`get_new_h_w`, `s` the MoVQ's scale factor).
    pub fn image_size(&self, height: usize, width: usize) -> [usize; 2] {
        match self {
            Self::Kandinsky3(p) => p.image_size(height, width),
            Self::Kandinsky21(p) => p.decoder.image_size(height, width),
            _ => [height, width],
        }
    }

    /// Whether a prompt's images are the same in any batch of prompts. Kandinsky 3's are not:
    /// `encode_prompt` cuts the batch's text to its longest prompt, and the UNet's attention
    /// pooling averages every kept position, so callers run it one prompt per call. Neither
    /// are Kandinsky 2.1's: one generator runs through a call's prior and decoder, and the
    /// combined pipeline pairs prompts and image embeddings across the batch.
    pub fn batch_independent(&self) -> bool {
        !matches!(self, Self::Kandinsky3(_) | Self::Kandinsky21(_))
    }

    /// `images` images' initial latents from one `torch.Generator().manual_seed(seed)` draw, in
    /// [`Self::latent_shape`].
    pub fn initial_latents(
        &self,
        seed: u64,
        images: usize,
        height: usize,
        width: usize,
        path: TorchNormalPath,
    ) -> Result<Vec<f32>, GenerateError> {
        Ok(match self {
            Self::StableDiffusion(p) => seed_latents(seed, p.latent_shape(images, height, width)?, path),
            Self::StableDiffusionXl(p) => seed_latents(seed, p.latent_shape(images, height, width)?, path),
            Self::StableDiffusion3(p) => seed_latents(seed, p.latent_shape(images, height, width)?, path),
            Self::CogView4(p) => seed_latents(seed, p.latent_shape(images, height, width)?, path),
            Self::Lumina2(p) => seed_latents(seed, p.latent_shape(images, height, width)?, path),
            Self::Flux(p) => {
                let shape = p.unpacked_shape(images, height, width)?;
                pack_host(&seed_latents(seed, shape, path), shape)
            }
            Self::Kandinsky3(p) => seed_latents(seed, p.latent_shape(images, height, width)?, path),
            Self::DeepFloydIf(p) => seed_latents(seed, p.latent_shape(images, height, width)?, path),
            Self::Kandinsky21(_) => return Err(combined_generator()),
        })
    }

    /// The generator of `seed` in the state a pipeline's scheduler goes on drawing from (IF's
    /// DDPM variance noise, `Scheduler::set_noise_generators`): past the draw of `images`
    /// images' initial latents ([`Self::initial_latents`]), or fresh when the latents were given
    /// (diffusers then draws nothing before the loop).
    pub fn noise_generator(
        &self,
        seed: u64,
        images: usize,
        height: usize,
        width: usize,
        latents_given: bool,
        path: TorchNormalPath,
    ) -> Result<TorchGenerator, GenerateError> {
        if let Self::Kandinsky21(_) = self {
            return Err(combined_generator());
        }
        let mut generator = TorchGenerator::manual_seed(seed);
        if !latents_given {
            let n: usize = self.latent_shape(images, height, width)?.iter().product();
            generator.randn(n, path);
        }
        Ok(generator)
    }

    /// Attention slicing (diffusers' `set_attention_slice`): the SD UNet's; the transformer
    /// pipelines have none and refuse a setting.
    pub fn set_attention_slice(&mut self, slice: Option<AttentionSlice>) -> Result<(), ModelError> {
        match (self, slice) {
            (Self::StableDiffusion(p), _) => p.set_attention_slice(slice),
            (Self::StableDiffusionXl(p), _) => p.set_attention_slice(slice),
            (_, None) => Ok(()),
            (_, Some(_)) => Err(ModelError::Unsupported(
                "attention slicing applies to the UNet pipelines (SD 1.x/2.x, AltDiffusion, SDXL)".into(),
            )),
        }
    }

    /// Runs the pipeline: `[P·K, 3, H, W]` images in `[0, 1]` on `device` (the caller reads
    /// them back). `scheduler` is reset to `request.steps`.
    pub fn generate(
        &self,
        request: &GenerateRequest,
        scheduler: &mut Scheduler,
        device: &Device,
    ) -> Result<Tensor<4>, GenerateError> {
        match self {
            Self::StableDiffusion(p) => {
                let first = |rows: &[PromptIds]| rows.iter().map(|r| r[0].clone()).collect::<Vec<_>>();
                let shape = p.latent_shape(
                    request.prompt_ids.len() * request.images_per_prompt,
                    request.height,
                    request.width,
                )?;
                let (prompt_ids, negative_ids) = (first(request.prompt_ids), first(request.negative_ids));
                let sd = Request {
                    prompt_ids: &prompt_ids,
                    negative_ids: &negative_ids,
                    steps: request.steps,
                    guidance: request.guidance,
                    layer: request.layer,
                    latents: request.latents(shape, device)?,
                };
                p.generate(&sd, scheduler)
            }
            Self::StableDiffusionXl(p) => p.generate(request, scheduler, device),
            Self::StableDiffusion3(p) => p.generate(request, scheduler, device),
            Self::Flux(p) => p.generate(request, scheduler, device),
            Self::CogView4(p) => p.generate(request, scheduler, device),
            Self::Lumina2(p) => p.generate(request, scheduler, device),
            Self::Kandinsky3(p) => p.generate(request, scheduler, device),
            Self::DeepFloydIf(p) => p.generate(request, scheduler, device),
            Self::Kandinsky21(_) => Err(combined_generator()),
        }
    }
}

/// Kandinsky 2.1's refusal of the one-draw entry points: its decoder's latents are drawn after
/// the prior's loop, so it runs through [`Kandinsky21::generate`] with the run's generator.
fn combined_generator() -> GenerateError {
    GenerateError::Input(
        "Kandinsky 2.1 draws the decoder's latents after the prior's loop from one generator: run it with \
         Kandinsky21::generate"
            .into(),
    )
}

/// FLUX's `_pack_latents` of host values `[n, c, h, w]` (as [`culturelens_diffusion_models::transformer_flux::pack_latents`]
/// on a device).
fn pack_host(values: &[f32], [n, c, h, w]: [usize; 4]) -> Vec<f32> {
    let mut out = Vec::with_capacity(values.len());
    for b in 0..n {
        for i in 0..h / 2 {
            for j in 0..w / 2 {
                for ch in 0..c {
                    for (di, dj) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                        out.push(values[((b * c + ch) * h + 2 * i + di) * w + 2 * j + dj]);
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use burn::tensor::TensorData;

    use super::*;
    use culturelens_diffusion_models::transformer_flux::pack_latents;

    #[test]
    fn host_packing_equals_the_device_packing() {
        let shape = [2, 3, 4, 6];
        let values: Vec<f32> = (0..shape.iter().product::<usize>()).map(|v| v as f32).collect();
        let device = Device::flex();
        let packed = pack_latents(Tensor::from_data(TensorData::new(values.clone(), shape), &device));
        assert_eq!(pack_host(&values, shape), packed.into_data().try_into_vec::<f32>().unwrap());
    }
}
