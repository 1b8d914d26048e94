//! The pieces the MMDiT transformers of SD 3 (`transformer_sd3.rs`) and FLUX
//! (`transformer_flux.rs`) share, as diffusers 0.42 writes them in `normalization.py`,
//! `embeddings.py`, `attention.py` and the joint attention processors:
//!
//! - [`AdaNorm`]: the adaptive layer norms. `linear(silu(temb))` cut into `k` modulation vectors
//!   (`AdaLayerNormZero`: shift, scale, gate of the attention and of the MLP, `k = 6`;
//!   `SD35AdaLayerNormZeroX`: the same plus shift, scale, gate of the second attention, `k = 9`;
//!   `AdaLayerNormZeroSingle`, `k = 3`; `AdaLayerNormContinuous`: scale then shift, `k = 2`),
//!   applied to a layer norm without affine weights (ε = 10⁻⁶) as `norm(x) (1 + scale) + shift`.
//! - [`FeedForward`]: `net.2(gelu_tanh(net.0.proj(x)))`, width 4×.
//! - [`TimeTextEmbedding`]: `CombinedTimestep[Guidance]TextProjEmbeddings`: the sinusoidal
//!   embedding (256 channels, `cos` first, no frequency shift) of the timestep (and of the
//!   guidance scale, FLUX-dev) through a `TimestepEmbedding`, plus the pooled text through
//!   `PixArtAlphaTextProjection` (SiLU).
//! - [`JointAttention`]: diffusers' `Attention` as `JointAttnProcessor2_0` (SD 3) and
//!   `FluxAttnProcessor` run it: q/k/v of the image tokens and, with `added_kv_proj_dim`, of the
//!   text tokens (`add_{q,k,v}_proj`), per-head RMS norms of q and k where the model has them
//!   (`qk_norm: "rms_norm"`; FLUX always), the two sequences joined (SD 3: image first; FLUX:
//!   text first), rotary embeddings on the joined sequence (FLUX), softmax attention scaled by
//!   `1/√d_head`, then split and projected back (`to_out.0`, `to_add_out`) where the block has
//!   those layers.

use burn::module::Module;
use burn::nn::{Linear, LinearConfig, RmsNorm, RmsNormConfig};
use burn::tensor::activation::{gelu_approximate, silu};
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Device, Tensor, TensorData};

use super::unet::{TimestepEmbedding, timestep_embedding};
use culturelens_models::weights::{Vars, WeightError, load_linear};

/// The layer norms of the MMDiT blocks: `elementwise_affine=False`, ε = 10⁻⁶.
pub const NORM_EPS: f64 = 1e-6;

/// `nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)` over the last axis.
pub fn layer_norm(x: Tensor<3>) -> Tensor<3> {
    let (var, mean) = x.clone().var_mean_bias(2);
    (x - mean) / (var + NORM_EPS).sqrt()
}

/// `x (1 + scale) + shift` with `[batch, 1, dim]` modulation vectors.
pub fn modulate(x: Tensor<3>, shift: &Tensor<3>, scale: &Tensor<3>) -> Tensor<3> {
    x * (scale.clone() + 1.0) + shift.clone()
}

/// The projection of an adaptive layer norm: `linear(silu(temb))`, `dim → k · dim`.
#[derive(Module, Debug)]
pub struct AdaNorm {
    pub linear: Linear,
}

impl AdaNorm {
    pub fn init(dim: usize, parts: usize, device: &Device) -> Self {
        Self { linear: LinearConfig::new(dim, parts * dim).init(device) }
    }

    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_linear(&mut self.linear, vars.pp("linear"))
    }

    /// The modulation vectors, each `[batch, 1, dim]`, in diffusers' chunk order.
    pub fn chunks(&self, temb: &Tensor<2>) -> Vec<Tensor<3>> {
        let emb = self.linear.forward(silu(temb.clone()));
        let [_, width] = emb.dims();
        let dim = self.linear.weight.dims()[0];
        emb.chunk(width / dim, 1).into_iter().map(|c| c.unsqueeze_dim(1)).collect()
    }

    /// `AdaLayerNormContinuous`: `norm(x) (1 + scale) + shift` with `[scale, shift]`.
    pub fn continuous(&self, x: Tensor<3>, temb: &Tensor<2>) -> Tensor<3> {
        let c = self.chunks(temb);
        modulate(layer_norm(x), &c[1], &c[0])
    }
}

/// `FeedForward(dim, activation_fn="gelu-approximate")`: `net.0.proj`, tanh GELU, `net.2`.
#[derive(Module, Debug)]
pub struct FeedForward {
    pub proj: Linear,
    pub out: Linear,
}

impl FeedForward {
    pub fn init(dim: usize, device: &Device) -> Self {
        Self {
            proj: LinearConfig::new(dim, 4 * dim).init(device),
            out: LinearConfig::new(4 * dim, dim).init(device),
        }
    }

    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_linear(&mut self.proj, vars.pp("net.0.proj"))?;
        load_linear(&mut self.out, vars.pp("net.2"))
    }

    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        self.out.forward(gelu_approximate(self.proj.forward(x)))
    }
}

/// Channels of the sinusoidal timestep embedding.
const TIME_CHANNELS: usize = 256;

/// `CombinedTimestepTextProjEmbeddings` and, with `guidance_embedder`,
/// `CombinedTimestepGuidanceTextProjEmbeddings`.
#[derive(Module, Debug)]
pub struct TimeTextEmbedding {
    pub timestep_embedder: TimestepEmbedding,
    pub guidance_embedder: Option<TimestepEmbedding>,
    /// `PixArtAlphaTextProjection(act_fn="silu")`: the same two layers as a `TimestepEmbedding`.
    pub text_embedder: TimestepEmbedding,
}

impl TimeTextEmbedding {
    pub fn init(dim: usize, pooled_dim: usize, guidance: bool, device: &Device) -> Self {
        Self {
            timestep_embedder: TimestepEmbedding::init(TIME_CHANNELS, dim, device),
            guidance_embedder: guidance.then(|| TimestepEmbedding::init(TIME_CHANNELS, dim, device)),
            text_embedder: TimestepEmbedding::init(pooled_dim, dim, device),
        }
    }

    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        self.timestep_embedder.load(vars.pp("timestep_embedder"))?;
        if let Some(g) = &mut self.guidance_embedder {
            g.load(vars.pp("guidance_embedder"))?;
        }
        self.text_embedder.load(vars.pp("text_embedder"))
    }

    /// The conditioning `[batch, dim]` of timestep `t` (the same for every row), the guidance
    /// scale `g` (models with a guidance embedder) and the pooled text `[batch, pooled_dim]`.
    pub fn forward(&self, t: f32, guidance: Option<f32>, pooled: Tensor<2>) -> Tensor<2> {
        let batch = pooled.dims()[0];
        let device = pooled.device();
        let sinusoid = |v: f32| {
            let e = timestep_embedding(v, TIME_CHANNELS, true, 0.0);
            Tensor::<2>::from_data(TensorData::new(e, [1, TIME_CHANNELS]), &device)
                .expand([batch, TIME_CHANNELS])
        };
        let mut emb = self.timestep_embedder.forward(sinusoid(t));
        if let (Some(embedder), Some(g)) = (&self.guidance_embedder, guidance) {
            emb = emb + embedder.forward(sinusoid(g));
        }
        emb + self.text_embedder.forward(pooled)
    }
}

/// Where the text tokens go in the joined sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JointOrder {
    /// `[image; text]` (SD 3's `JointAttnProcessor2_0`).
    ImageFirst,
    /// `[text; image]` (FLUX).
    TextFirst,
}

/// Rotary position embeddings of a joined sequence: `cos` and `sin` `[tokens, d_head]`, each
/// frequency repeated for the two elements of its pair (FLUX's `repeat_interleave_real`).
#[derive(Clone, Debug)]
pub struct Rope {
    pub cos: Tensor<4>,
    pub sin: Tensor<4>,
}

impl Rope {
    /// From host `cos`/`sin` of `tokens × d_head` values.
    pub fn new(cos: Vec<f32>, sin: Vec<f32>, tokens: usize, d_head: usize, device: &Device) -> Self {
        let t = |v| Tensor::<2>::from_data(TensorData::new(v, [tokens, d_head]), device).unsqueeze::<4>();
        Self { cos: t(cos), sin: t(sin) }
    }

    /// `x cos + rotate(x) sin` over `[batch, heads, tokens, d_head]`, where `rotate` turns each
    /// pair `(a, b)` into `(−b, a)` (diffusers' `apply_rotary_emb` with `use_real_unbind_dim=-1`).
    pub(crate) fn apply(&self, x: Tensor<4>) -> Tensor<4> {
        let [b, h, s, d] = x.dims();
        let pairs = x.clone().reshape([b, h, s, d / 2, 2]);
        let real = pairs.clone().slice([0..b, 0..h, 0..s, 0..d / 2, 0..1]);
        let imag = pairs.slice([0..b, 0..h, 0..s, 0..d / 2, 1..2]);
        let rotated = Tensor::cat(vec![imag.neg(), real], 4).reshape([b, h, s, d]);
        x * self.cos.clone() + rotated * self.sin.clone()
    }
}

/// diffusers' `Attention` (SD 3) / `FluxAttention` as the joint processors use it.
#[derive(Module, Debug)]
pub struct JointAttention {
    pub to_q: Linear,
    pub to_k: Linear,
    pub to_v: Linear,
    pub norm_q: Option<RmsNorm>,
    pub norm_k: Option<RmsNorm>,
    pub add_q_proj: Option<Linear>,
    pub add_k_proj: Option<Linear>,
    pub add_v_proj: Option<Linear>,
    pub norm_added_q: Option<RmsNorm>,
    pub norm_added_k: Option<RmsNorm>,
    /// `to_out.0` (absent in FLUX's single-stream blocks, `pre_only`).
    pub to_out: Option<Linear>,
    /// `to_add_out` (absent in SD 3's last block, `context_pre_only`).
    pub to_add_out: Option<Linear>,
    #[module(skip)]
    pub heads: usize,
}

/// What a [`JointAttention`] has.
#[derive(Clone, Copy, Debug)]
pub struct JointAttentionShape {
    pub dim: usize,
    pub heads: usize,
    pub d_head: usize,
    /// `add_{q,k,v}_proj` for text tokens.
    pub context: bool,
    /// `to_add_out` (`context_pre_only=False`).
    pub context_out: bool,
    /// `to_out.0` (`pre_only=False`).
    pub out: bool,
    /// Per-head RMS norms of q and k (`qk_norm="rms_norm"`).
    pub qk_norm: bool,
}

impl JointAttention {
    pub fn init(shape: JointAttentionShape, device: &Device) -> Self {
        let JointAttentionShape { dim, heads, d_head, context, context_out, out, qk_norm } = shape;
        let inner = heads * d_head;
        let linear = |i, o| LinearConfig::new(i, o).init(device);
        let norm = |on: bool| on.then(|| RmsNormConfig::new(d_head).with_epsilon(NORM_EPS).init(device));
        Self {
            to_q: linear(dim, inner),
            to_k: linear(dim, inner),
            to_v: linear(dim, inner),
            norm_q: norm(qk_norm),
            norm_k: norm(qk_norm),
            add_q_proj: context.then(|| linear(dim, inner)),
            add_k_proj: context.then(|| linear(dim, inner)),
            add_v_proj: context.then(|| linear(dim, inner)),
            norm_added_q: norm(qk_norm && context),
            norm_added_k: norm(qk_norm && context),
            to_out: out.then(|| linear(inner, dim)),
            to_add_out: context_out.then(|| linear(inner, dim)),
            heads,
        }
    }

    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        let linear = |l: &mut Linear, name: &str| load_linear(l, vars.pp(name));
        let optional =
            |l: &mut Option<Linear>, name: &str| l.as_mut().map_or(Ok(()), |l| load_linear(l, vars.pp(name)));
        let norm = |n: &mut Option<RmsNorm>, name: &str| match n {
            Some(n) => {
                n.gamma = vars.pp(name).param("weight", &n.gamma)?;
                Ok(())
            }
            None => Ok(()),
        };
        linear(&mut self.to_q, "to_q")?;
        linear(&mut self.to_k, "to_k")?;
        linear(&mut self.to_v, "to_v")?;
        norm(&mut self.norm_q, "norm_q")?;
        norm(&mut self.norm_k, "norm_k")?;
        optional(&mut self.add_q_proj, "add_q_proj")?;
        optional(&mut self.add_k_proj, "add_k_proj")?;
        optional(&mut self.add_v_proj, "add_v_proj")?;
        norm(&mut self.norm_added_q, "norm_added_q")?;
        norm(&mut self.norm_added_k, "norm_added_k")?;
        optional(&mut self.to_out, "to_out.0")?;
        optional(&mut self.to_add_out, "to_add_out")
    }

    /// `[batch, tokens, heads · d_head]` → `[batch, heads, tokens, d_head]`, RMS-normed per head.
    fn heads_of(&self, x: Tensor<3>, norm: &Option<RmsNorm>) -> Tensor<4> {
        let [b, s, inner] = x.dims();
        let x = x.reshape([b, s, self.heads, inner / self.heads]);
        let x = match norm {
            Some(n) => n.forward(x),
            None => x,
        };
        x.swap_dims(1, 2)
    }

    /// Attention over the image tokens `x` `[batch, n, dim]` joined with the text tokens
    /// `context` `[batch, m, dim]` (when given) in `order`, with `rope` over the joined sequence.
    /// Returns the image part and the text part (projected by `to_out.0` / `to_add_out` where the
    /// module has them).
    pub fn forward(
        &self,
        x: Tensor<3>,
        context: Option<Tensor<3>>,
        order: JointOrder,
        rope: Option<&Rope>,
    ) -> (Tensor<3>, Option<Tensor<3>>) {
        let [batch, n, _] = x.dims();
        let mut q = self.heads_of(self.to_q.forward(x.clone()), &self.norm_q);
        let mut k = self.heads_of(self.to_k.forward(x.clone()), &self.norm_k);
        let mut v = self.heads_of(self.to_v.forward(x), &None);
        let m = context.as_ref().map_or(0, |c| c.dims()[1]);
        if let (Some(c), Some(aq), Some(ak), Some(av)) =
            (context, &self.add_q_proj, &self.add_k_proj, &self.add_v_proj)
        {
            let cq = self.heads_of(aq.forward(c.clone()), &self.norm_added_q);
            let ck = self.heads_of(ak.forward(c.clone()), &self.norm_added_k);
            let cv = self.heads_of(av.forward(c), &None);
            let join = |image: Tensor<4>, text: Tensor<4>| match order {
                JointOrder::ImageFirst => Tensor::cat(vec![image, text], 2),
                JointOrder::TextFirst => Tensor::cat(vec![text, image], 2),
            };
            (q, k, v) = (join(q, cq), join(k, ck), join(v, cv));
        }
        if let Some(rope) = rope {
            (q, k) = (rope.apply(q), rope.apply(k));
        }
        let d_head = q.dims()[3];
        let options = AttentionModuleOptions {
            scale: Some((d_head as f64).powf(-0.5)),
            softcap: None,
            is_causal: false,
        };
        let out = attention(q, k, v, None, None, options);
        let total = n + m;
        let out = out.swap_dims(1, 2).reshape([batch, total, self.heads * d_head]);
        let width = self.heads * d_head;
        let (image, text) = match order {
            JointOrder::ImageFirst => (0..n, n..total),
            JointOrder::TextFirst => (m..total, 0..m),
        };
        let project = |part: Tensor<3>, layer: &Option<Linear>| match layer {
            Some(l) => l.forward(part),
            None => part,
        };
        let text = (m > 0).then(|| project(out.clone().slice([0..batch, text, 0..width]), &self.to_add_out));
        (project(out.slice([0..batch, image, 0..width]), &self.to_out), text)
    }
}
