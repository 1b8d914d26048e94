//! `KandinskyPriorPipeline.__call__` of diffusers 0.42 (Kandinsky 2.1's prior): CLIP text
//! features to CLIP image embeddings with the [`PriorTransformer`] and [`UnClip`], the input of
//! the decoder ([`crate::pipeline_kandinsky21`]).
//!
//! - **Text** (`_encode_prompt`): CLIP ids padded and truncated to the tokenizer's
//!   `model_max_length` (the caller's tokenizer; the prior's `num_embeddings`), run without an
//!   attention mask: `text_embeds` (the projected pooled token) and `last_hidden_state`; the
//!   prior masks the padding after `</s>` (the tokenizer's `attention_mask`: 1 up to and
//!   including the first `</s>`). Each row repeated for the prompt's `K` images.
//! - **Negative prompt**: given, the prompts are run as `prompts + negatives` (so `2P` rows),
//!   both guided against the negatives (`uncond = 2 · negatives`), and the output splits into
//!   the image embeddings (the prompts') and the negative image embeddings (the negatives');
//!   without one, the unconditional rows are `""` and the negative image embeddings are the
//!   image encoder's embedding of an all-zero image (`get_zero_embed`, computed once at load).
//! - **Guidance** (on when `guidance > 1`): `[uncond; cond]` rows, `ε_u + g (ε_c − ε_u)`.
//! - **Latents**: `(rows · K, embedding_dim)` times `init_noise_sigma` (1); each step passes the
//!   next timestep as `prev_timestep` (`None` at the last), the variance noise drawn from the
//!   pipeline's generator; then `post_process_latents`.
//!
//! DiffusionLens (`--text-layer`) does not apply here: it reads the decoder's multilingual text
//! encoder, the one the prompts' language reaches (the prior's CLIP is English-only).

use burn::tensor::{Device, Tensor};
use culturelens_models::ModelError;
use culturelens_models::clip::ClipTextModelWithProjection;
use culturelens_rng::{TorchGenerator, TorchNormalPath};

use super::offload::on_device;
use super::pipeline_kandinsky21::ImageEmbeds;
use super::request::{GenerateError, GenerateRequest, guided, repeat_rows};
use culturelens_diffusion_models::prior_transformer::PriorTransformer;
use culturelens_diffusion_schedulers::UnClip;

/// The models of a `KandinskyPriorPipeline` folder.
#[derive(Debug)]
pub struct Kandinsky21Prior {
    pub prior: PriorTransformer,
    pub text_encoder: ClipTextModelWithProjection,
    /// `get_zero_embed()`: the image encoder's embedding of an all-zero image, `[1, width]`.
    pub zero_embed: Tensor<2>,
}

impl Kandinsky21Prior {
    /// The prior of its loaded models (an error names the prior config key that does not fit
    /// the text encoder).
    pub fn new(
        prior: PriorTransformer,
        text_encoder: ClipTextModelWithProjection,
        zero_embed: Tensor<2>,
    ) -> Result<Self, ModelError> {
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        let text = &text_encoder.config;
        if prior.num_embeddings > text.text.max_position_embeddings {
            return bad(
                "num_embeddings",
                format!(
                    "{} text tokens exceed the text encoder's max_position_embeddings {}",
                    prior.num_embeddings, text.text.max_position_embeddings
                ),
            );
        }
        let width = prior.proj_in.weight.lazy_shape().dims::<2>()[0];
        if text.projection_dim != width || text.text.encoder.hidden_size != width {
            return bad(
                "embedding_dim",
                format!(
                    "{width} differs from the text encoder's projection_dim {} or hidden_size {}",
                    text.projection_dim, text.text.encoder.hidden_size
                ),
            );
        }
        if zero_embed.dims() != [1, width] {
            return bad("projection_dim", format!("the image encoder's embeddings are not {width} wide"));
        }
        Ok(Self { prior, text_encoder, zero_embed })
    }

    /// The text tokens the prior reads (the CLIP tokenizer's `model_max_length`).
    pub fn text_tokens(&self) -> usize {
        self.prior.num_embeddings
    }

    /// The shape of the prior's initial latents for `prompts` prompts: `[rows · K, embedding_dim]`
    /// with the negative prompts' rows when `negative_given`.
    pub fn latent_shape(&self, prompts: usize, images_per_prompt: usize, negative_given: bool) -> [usize; 2] {
        let rows = if negative_given { 2 * prompts } else { prompts };
        [rows * images_per_prompt, self.prior.proj_in.weight.lazy_shape().dims::<2>()[0]]
    }

    /// `(text_embeds, last_hidden_state, padding)` of CLIP id rows, each repeated `k` times
    /// (padding row-major, `true` after the first `</s>`).
    fn encode(&self, rows: &[Vec<u32>], k: usize, device: &Device) -> (Tensor<2>, Tensor<3>, Vec<bool>) {
        let tower = on_device(&self.text_encoder, device);
        let (hidden, pooled) = tower.forward(rows, tower.num_layers(), device);
        let hidden = tower.text_model.final_layer_norm.forward(hidden);
        let text = &tower.config.text;
        let padding = rows
            .iter()
            .flat_map(|row| {
                let real = text.pooled_position(row) + 1;
                let mask: Vec<bool> = (0..row.len()).map(|j| j >= real).collect();
                std::iter::repeat_n(mask, k).flatten()
            })
            .collect();
        (repeat_rows(pooled, k), repeat_rows(hidden, k), padding)
    }

    /// Runs the prior: the image embeddings and negative image embeddings of the `P·K` images.
    /// `request.prompt_ids` rows' first ids are CLIP's (a combined pipeline's second row, the
    /// decoder's, is not read); `request.latents` fill [`Self::latent_shape`]; `generator` draws
    /// the variance noise after them.
    pub fn generate(
        &self,
        request: &GenerateRequest,
        scheduler: &mut UnClip,
        generator: &mut TorchGenerator,
        path: TorchNormalPath,
        device: &Device,
    ) -> Result<ImageEmbeds, GenerateError> {
        let (p, k) = (request.prompt_ids.len(), request.images_per_prompt);
        let [n, width] = self.latent_shape(p, k, request.negative_given);
        let mut latents = request.latents([n, width], device)?;
        let first = |rows: &[Vec<Vec<u32>>]| rows.iter().map(|r| r[0].clone()).collect::<Vec<_>>();
        let (mut rows, negatives) = (first(request.prompt_ids), first(request.negative_ids));
        let tokens = self.text_tokens();
        if let Some(row) = rows.iter().chain(&negatives).find(|row| row.len() != tokens) {
            return Err(GenerateError::Input(format!(
                "{} CLIP ids in a row: the prior reads {tokens} text tokens",
                row.len()
            )));
        }
        let uncond_rows = if request.negative_given {
            rows.extend(negatives.iter().cloned());
            [negatives.clone(), negatives].concat()
        } else {
            negatives
        };
        let cfg = request.guidance > 1.0;
        let (mut embeds, mut states, mut padding) = self.encode(&rows, k, device);
        if cfg {
            let (u_embeds, u_states, u_padding) = self.encode(&uncond_rows, k, device);
            embeds = Tensor::cat(vec![u_embeds, embeds], 0);
            states = Tensor::cat(vec![u_states, states], 0);
            padding = [u_padding, padding].concat();
        }
        scheduler.set_timesteps(request.steps)?;
        let timesteps = scheduler.timesteps().to_vec();
        let prior = on_device(&self.prior, device);
        for (i, &t) in timesteps.iter().enumerate() {
            let input =
                if cfg { Tensor::cat(vec![latents.clone(), latents.clone()], 0) } else { latents.clone() };
            let prediction = prior.forward(input, t as f32, embeds.clone(), states.clone(), Some(&padding));
            let prediction = if cfg { guided(prediction, request.guidance) } else { prediction };
            latents = scheduler.step(prediction, t, latents, timesteps.get(i + 1).copied(), generator, path);
        }
        let latents = prior.post_process_latents(latents);
        drop(prior);
        Ok(if request.negative_given {
            let mut halves = latents.chunk(2, 0);
            let negative = halves.pop().expect("two halves");
            ImageEmbeds { positive: halves.pop().expect("two halves"), negative }
        } else {
            let negative = self.zero_embed.clone().repeat_dim(0, n);
            ImageEmbeds { positive: latents, negative }
        })
    }
}

/// The all-zero image `get_zero_embed` encodes: `[1, 3, size, size]`.
pub fn zero_image(size: usize, device: &Device) -> Tensor<4> {
    Tensor::zeros([1, 3, size, size], device)
}
