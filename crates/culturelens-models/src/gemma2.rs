//! Gemma 2 (Gemma Team, 2024) as an encoder, as transformers 5's `Gemma2Model` computes its
//! hidden states: the text encoder of Lumina 2 (`google/gemma-2-2b`), whose pipeline reads
//! `hidden_states[-2]`. No decoding: no cache, no language-model head, no final logit soft cap.
//!
//! - **Embeddings**: `embed_tokens(ids) · √hidden_size`, the scale a float32 scalar cast to the
//!   weights' dtype (`Gemma2TextScaledWordEmbedding`).
//! - **RMS norm** `x / √(mean(x²) + ε) · (1 + w)`, computed in float32 and cast back (the
//!   weight stores the offset from 1).
//! - **Layers**: `h = x + post_attention_norm(attn(input_norm(x)))`, then
//!   `h + post_feedforward_norm(mlp(pre_feedforward_norm(h)))`; the MLP is
//!   `down(gelu_tanh(gate(x)) ⊙ up(x))` (`gelu_pytorch_tanh`), no linear layer has a bias
//!   (`attention_bias: false`).
//! - **Attention**: grouped-query (`num_key_value_heads` key/value heads, each shared by
//!   `num_attention_heads / num_key_value_heads` query heads, transformers' `repeat_kv`), RoPE on
//!   queries and keys (`rotate_half` over the two halves of each head, positions `0…len−1`
//!   whatever the padding, inverse frequencies `θ^(−2i/d)` in float32), logits scaled by
//!   `query_pre_attn_scalar^(−1/2)` (not `head_dim`'s), soft-capped as
//!   `c · tanh(logits / c)` (`attn_logit_softcapping`), then the mask added, softmax in float32
//!   (the eager attention, transformers' only one for Gemma 2 besides flash/flex).
//! - **Masks** as `create_causal_mask` / `create_sliding_window_causal_mask` build the eager
//!   mask: key `j` is seen by query `i` when `j ≤ i`, the attention mask keeps `j`, and, on the
//!   layers `layer_types` marks `sliding_attention` (by default the even ones), `j > i − w`
//!   (`sliding_window` w). A masked pair gets the dtype's most negative finite value (not −∞),
//!   so a query that sees no key at all (a left-padded row's first positions) attends uniformly
//!   to every key, as in torch.
//! - **Outputs**: `hidden_states[0]` is the embeddings, `hidden_states[k]` the output of layer
//!   `k`, and `hidden_states[L]` (`L` layers) is `last_hidden_state`, the final norm applied
//!   (transformers 5 ties the last hidden state to it). Lumina 2 reads `hidden_states[L − 1]`
//!   (`[-2]`, no final norm); DiffusionLens reads `hidden_states[K]` the same way.
//!
//! [`Gemma2Config`] mirrors `config.json` over transformers' class defaults, which are
//! `google/gemma-2-2b`'s ([`Gemma2Config::gemma_2_2b`]).

use burn::module::{Module, Param};
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::tensor::activation::{gelu_approximate, softmax};
use burn::tensor::{DType, Device, FloatDType, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::ModelError;
use super::config;
use super::vit::pad_ids;
use super::weights::{Vars, WeightError, load_linear};

/// `rope_parameters` of a transformers 5 `config.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RopeParameters {
    pub rope_type: String,
    pub rope_theta: f64,
}

/// `config.json` of a `Gemma2Model` (the keys the encoder needs; others are ignored).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gemma2Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub hidden_activation: String,
    pub rms_norm_eps: f64,
    /// transformers 5's `rope_parameters`; a transformers 4 file has `rope_theta` instead.
    pub rope_parameters: Option<RopeParameters>,
    /// transformers 4's key (`google/gemma-2-2b` has `"rope_theta": 10000.0`).
    pub rope_theta: Option<f64>,
    pub attention_bias: bool,
    pub query_pre_attn_scalar: f64,
    pub sliding_window: Option<usize>,
    /// `None`: transformers' default, sliding on even layers, full on odd ones.
    pub layer_types: Option<Vec<String>>,
    /// `None` (an explicit `null` in the file): no soft cap.
    pub attn_logit_softcapping: Option<f64>,
    pub use_bidirectional_attention: Option<bool>,
    pub pad_token_id: Option<u32>,
}

/// Gemma's default RoPE base (transformers' `default_theta`).
const DEFAULT_THETA: f64 = 10000.0;

impl Gemma2Config {
    /// `google/gemma-2-2b` (Lumina 2's `text_encoder`), which transformers' `Gemma2Config()`
    /// defaults equal: the value of every key a `config.json` leaves out.
    pub fn gemma_2_2b() -> Self {
        Self {
            vocab_size: 256000,
            hidden_size: 2304,
            intermediate_size: 9216,
            num_hidden_layers: 26,
            num_attention_heads: 8,
            num_key_value_heads: 4,
            head_dim: 256,
            hidden_activation: "gelu_pytorch_tanh".into(),
            rms_norm_eps: 1e-6,
            rope_parameters: None,
            rope_theta: None,
            attention_bias: false,
            query_pre_attn_scalar: 256.0,
            sliding_window: Some(4096),
            layer_types: None,
            attn_logit_softcapping: Some(50.0),
            use_bidirectional_attention: None,
            pad_token_id: Some(0),
        }
    }

    /// Reads `config.json` over [`Self::gemma_2_2b`] and checks what the encoder needs, naming
    /// the key. `"attn_logit_softcapping": null` turns the soft cap off, as in transformers.
    pub fn from_json(json: &str) -> Result<Self, ModelError> {
        let value: serde_json::Value = serde_json::from_str(json)?;
        let softcap_off = value.get("attn_logit_softcapping").is_some_and(serde_json::Value::is_null);
        let mut c: Self = config::from_value(value, &Self::gemma_2_2b(), &[])?;
        if softcap_off {
            c.attn_logit_softcapping = None;
        }
        config::check_layers("num_hidden_layers", c.num_hidden_layers)?;
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        if c.hidden_size == 0 || c.intermediate_size == 0 || c.vocab_size == 0 || c.head_dim == 0 {
            return bad(
                "hidden_size",
                "hidden_size, intermediate_size, head_dim and vocab_size must be positive".into(),
            );
        }
        if c.num_key_value_heads == 0 || !c.num_attention_heads.is_multiple_of(c.num_key_value_heads) {
            return bad(
                "num_key_value_heads",
                format!("must divide num_attention_heads ({})", c.num_attention_heads),
            );
        }
        if !matches!(c.hidden_activation.as_str(), "gelu_pytorch_tanh" | "gelu_new") {
            return bad(
                "hidden_activation",
                format!("`{}` is not supported (gelu_pytorch_tanh)", c.hidden_activation),
            );
        }
        if c.query_pre_attn_scalar <= 0.0 {
            return bad("query_pre_attn_scalar", "must be positive".into());
        }
        if c.attn_logit_softcapping.is_some_and(|s| s <= 0.0) {
            return bad("attn_logit_softcapping", "must be positive (or null for none)".into());
        }
        if c.use_bidirectional_attention == Some(true) {
            return bad("use_bidirectional_attention", "only the causal encoder is supported".into());
        }
        if let Some(rope) = &c.rope_parameters
            && rope.rope_type != "default"
        {
            return bad(
                "rope_parameters",
                format!("rope_type `{}` is not supported (default)", rope.rope_type),
            );
        }
        let types = c.layer_types();
        if types.len() != c.num_hidden_layers {
            return bad("layer_types", format!("{} entries for {} layers", types.len(), c.num_hidden_layers));
        }
        if let Some(t) = types.iter().find(|t| !matches!(t.as_str(), "sliding_attention" | "full_attention"))
        {
            return bad("layer_types", format!("`{t}` (sliding_attention or full_attention)"));
        }
        if types.iter().any(|t| t == "sliding_attention") && c.sliding_window.is_none_or(|w| w == 0) {
            return bad("sliding_window", "sliding layers need a positive window".into());
        }
        Ok(c)
    }

    /// `layer_types`, or transformers' default: `sliding_attention` on layers 0, 2, 4, …
    pub fn layer_types(&self) -> Vec<String> {
        self.layer_types.clone().unwrap_or_else(|| {
            (0..self.num_hidden_layers)
                .map(|i| if (i + 1) % 2 == 1 { "sliding_attention" } else { "full_attention" }.to_owned())
                .collect()
        })
    }

    /// The RoPE base: `rope_parameters.rope_theta`, else `rope_theta`, else 10,000.
    pub fn theta(&self) -> f64 {
        self.rope_parameters.as_ref().map(|r| r.rope_theta).or(self.rope_theta).unwrap_or(DEFAULT_THETA)
    }

    /// A randomly initialised (lazily materialised) encoder.
    pub fn init(&self, device: &Device) -> Gemma2Model {
        let (d, hd) = (self.hidden_size, self.head_dim);
        let linear = |i, o| LinearConfig::new(i, o).with_bias(self.attention_bias).init(device);
        let plain = |i, o| LinearConfig::new(i, o).with_bias(false).init(device);
        let norm = || GemmaRmsNorm::new(d, self.rms_norm_eps, device);
        let types = self.layer_types();
        let layers = (0..self.num_hidden_layers)
            .map(|i| Gemma2DecoderLayer {
                q_proj: linear(d, self.num_attention_heads * hd),
                k_proj: linear(d, self.num_key_value_heads * hd),
                v_proj: linear(d, self.num_key_value_heads * hd),
                o_proj: linear(self.num_attention_heads * hd, d),
                gate_proj: plain(d, self.intermediate_size),
                up_proj: plain(d, self.intermediate_size),
                down_proj: plain(self.intermediate_size, d),
                input_layernorm: norm(),
                post_attention_layernorm: norm(),
                pre_feedforward_layernorm: norm(),
                post_feedforward_layernorm: norm(),
                sliding_window: (types[i] == "sliding_attention").then(|| self.sliding_window.unwrap_or(0)),
            })
            .collect();
        Gemma2Model {
            embed_tokens: EmbeddingConfig::new(self.vocab_size, d).init(device),
            layers,
            norm: norm(),
            config: self.clone(),
        }
    }

    /// Builds the encoder of `json` and loads its checkpoint.
    pub fn load(json: &str, vars: Vars) -> Result<Gemma2Model, ModelError> {
        let mut model = Self::from_json(json)?.init(vars.device());
        model.load(vars)?;
        Ok(model)
    }
}

/// `Gemma2RMSNorm`: `x / √(mean(x²) + ε) · (1 + weight)` in float32.
#[derive(Module, Debug)]
pub struct GemmaRmsNorm {
    pub weight: Param<Tensor<1>>,
    #[module(skip)]
    pub eps: f64,
}

impl GemmaRmsNorm {
    fn new(dim: usize, eps: f64, device: &Device) -> Self {
        Self { weight: Param::from_tensor(Tensor::zeros([dim], device)), eps }
    }

    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        self.weight = vars.param("weight", &self.weight)?;
        Ok(())
    }

    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let dtype = x.dtype();
        let x = x.cast(FloatDType::F32);
        let rms = x.clone().powi_scalar(2).mean_dim(2).add_scalar(self.eps).sqrt().recip();
        let scale = self.weight.val().cast(FloatDType::F32).add_scalar(1.0).unsqueeze::<3>();
        let out = (x * rms) * scale;
        match dtype {
            DType::F16 => out.cast(FloatDType::F16),
            DType::BF16 => out.cast(FloatDType::BF16),
            _ => out,
        }
    }
}

/// `model.layers.{i}`: self-attention, MLP and their four norms.
#[derive(Module, Debug)]
pub struct Gemma2DecoderLayer {
    pub q_proj: Linear,
    pub k_proj: Linear,
    pub v_proj: Linear,
    pub o_proj: Linear,
    pub gate_proj: Linear,
    pub up_proj: Linear,
    pub down_proj: Linear,
    pub input_layernorm: GemmaRmsNorm,
    pub post_attention_layernorm: GemmaRmsNorm,
    pub pre_feedforward_layernorm: GemmaRmsNorm,
    pub post_feedforward_layernorm: GemmaRmsNorm,
    /// The window of a `sliding_attention` layer; `None` on a `full_attention` one.
    #[module(skip)]
    pub sliding_window: Option<usize>,
}

/// transformers' `Gemma2Model` (the decoder stack without a head), run as an encoder.
#[derive(Module, Debug)]
pub struct Gemma2Model {
    pub embed_tokens: Embedding,
    pub layers: Vec<Gemma2DecoderLayer>,
    pub norm: GemmaRmsNorm,
    #[module(skip)]
    pub config: Gemma2Config,
}

/// The rotary tables `(cos, sin)`, `[len, head_dim]` each: `emb = [f, f]` with
/// `f[p, i] = p · θ^(−2i/d)`, as `Gemma2RotaryEmbedding` computes them in float32.
pub fn rope_tables(len: usize, head_dim: usize, theta: f64) -> (Vec<f32>, Vec<f32>) {
    let half = head_dim / 2;
    let inv_freq: Vec<f32> = (0..half)
        .map(|i| {
            let exponent = (2 * i) as f32 / head_dim as f32;
            1.0 / (theta as f32).powf(exponent)
        })
        .collect();
    let mut cos = Vec::with_capacity(len * head_dim);
    let mut sin = Vec::with_capacity(len * head_dim);
    for p in 0..len {
        for _ in 0..2 {
            for &f in &inv_freq {
                let angle = p as f32 * f;
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
    }
    (cos, sin)
}

/// The eager additive mask `[batch, 1, len, len]`: 0 where query `i` sees key `j` (`j ≤ i`,
/// `mask[b][j] ≠ 0` and, with a window `w`, `j > i − w`), `fill` elsewhere.
pub fn additive_mask(mask: &[Vec<u32>], window: Option<usize>, fill: f32) -> Vec<f32> {
    let len = mask.first().map_or(0, Vec::len);
    let mut out = Vec::with_capacity(mask.len() * len * len);
    for row in mask {
        for i in 0..len {
            for (j, &keep) in row.iter().enumerate() {
                let seen = j <= i && keep != 0 && window.is_none_or(|w| j + w > i);
                out.push(if seen { 0.0 } else { fill });
            }
        }
    }
    out
}

/// `rotate_half(x) = [−x₂, x₁]` over the last axis.
fn rotate_half(x: Tensor<4>) -> Tensor<4> {
    let [b, h, l, d] = x.dims();
    let x1 = x.clone().slice([0..b, 0..h, 0..l, 0..d / 2]);
    let x2 = x.slice([0..b, 0..h, 0..l, d / 2..d]);
    Tensor::cat(vec![x2.neg(), x1], 3)
}

impl Gemma2DecoderLayer {
    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        let attn = vars.pp("self_attn");
        load_linear(&mut self.q_proj, attn.pp("q_proj"))?;
        load_linear(&mut self.k_proj, attn.pp("k_proj"))?;
        load_linear(&mut self.v_proj, attn.pp("v_proj"))?;
        load_linear(&mut self.o_proj, attn.pp("o_proj"))?;
        let mlp = vars.pp("mlp");
        load_linear(&mut self.gate_proj, mlp.pp("gate_proj"))?;
        load_linear(&mut self.up_proj, mlp.pp("up_proj"))?;
        load_linear(&mut self.down_proj, mlp.pp("down_proj"))?;
        self.input_layernorm.load(vars.pp("input_layernorm"))?;
        self.post_attention_layernorm.load(vars.pp("post_attention_layernorm"))?;
        self.pre_feedforward_layernorm.load(vars.pp("pre_feedforward_layernorm"))?;
        self.post_feedforward_layernorm.load(vars.pp("post_feedforward_layernorm"))
    }

    fn attention(
        &self,
        x: Tensor<3>,
        rope: &(Tensor<4>, Tensor<4>),
        mask: Tensor<4>,
        c: &Gemma2Config,
    ) -> Tensor<3> {
        let [batch, len, _] = x.dims();
        let (heads, kv_heads, hd) = (c.num_attention_heads, c.num_key_value_heads, c.head_dim);
        let split = |t: Tensor<3>, n: usize| t.reshape([batch, len, n, hd]).swap_dims(1, 2);
        let q = split(self.q_proj.forward(x.clone()), heads);
        let k = split(self.k_proj.forward(x.clone()), kv_heads);
        let v = split(self.v_proj.forward(x), kv_heads);
        // `(cos, sin)`: `[1, 1, len, head_dim]`, expanded over batch and heads.
        let rotate = |t: Tensor<4>| {
            let dims = t.dims();
            t.clone() * rope.0.clone().expand(dims) + rotate_half(t) * rope.1.clone().expand(dims)
        };
        let (q, k) = (rotate(q), rotate(k));
        // repeat_kv: key/value head g serves query heads g·rep … g·rep + rep − 1.
        let rep = heads / kv_heads;
        let repeat = |t: Tensor<4>| {
            t.unsqueeze_dim::<5>(2).expand([batch, kv_heads, rep, len, hd]).reshape([batch, heads, len, hd])
        };
        let (k, v) = (repeat(k), repeat(v));
        let scores = q.matmul(k.swap_dims(2, 3)).mul_scalar(c.query_pre_attn_scalar.powf(-0.5));
        let scores = match c.attn_logit_softcapping {
            Some(cap) => scores.div_scalar(cap).tanh().mul_scalar(cap),
            None => scores,
        };
        let scores = scores + mask;
        let dtype = scores.dtype();
        let weights = softmax(scores.cast(FloatDType::F32), 3);
        let weights = match dtype {
            DType::F16 => weights.cast(FloatDType::F16),
            DType::BF16 => weights.cast(FloatDType::BF16),
            _ => weights,
        };
        let out = weights.matmul(v).swap_dims(1, 2).reshape([batch, len, heads * hd]);
        self.o_proj.forward(out)
    }

    fn forward(
        &self,
        x: Tensor<3>,
        rope: &(Tensor<4>, Tensor<4>),
        mask: Tensor<4>,
        c: &Gemma2Config,
    ) -> Tensor<3> {
        let h = self.attention(self.input_layernorm.forward(x.clone()), rope, mask, c);
        let x = x + self.post_attention_layernorm.forward(h);
        let h = self.pre_feedforward_layernorm.forward(x.clone());
        let h = self
            .down_proj
            .forward(gelu_approximate(self.gate_proj.forward(h.clone())) * self.up_proj.forward(h));
        x + self.post_feedforward_layernorm.forward(h)
    }
}

impl Gemma2Model {
    /// Loads a `Gemma2Model` state dict (`embed_tokens.weight`, `layers.{i}.*`, `norm.weight`),
    /// or the same under `model.` (a `Gemma2ForCausalLM` checkpoint; its head is not read).
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        let vars = if !vars.contains("embed_tokens.weight") && vars.contains("model.embed_tokens.weight") {
            vars.pp("model")
        } else {
            vars
        };
        self.embed_tokens.weight = vars.pp("embed_tokens").param("weight", &self.embed_tokens.weight)?;
        for (i, layer) in self.layers.iter_mut().enumerate() {
            layer.load(vars.pp("layers").pp(i))?;
        }
        self.norm.load(vars.pp("norm"))
    }

    /// The number of layers `L`: `hidden_states` has `L + 1` entries.
    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// `hidden_states[k]` (`0 ≤ k ≤ L`) of token-id rows of equal length and their attention
    /// mask (1 keep, 0 padding), as `Gemma2Model(ids, attention_mask=mask,
    /// output_hidden_states=True)` returns it; `k = L` is `last_hidden_state` (final norm).
    ///
    /// # Panics
    /// When `k > L` or the mask's shape differs from the ids'.
    pub fn hidden_state(&self, ids: &[Vec<u32>], mask: &[Vec<u32>], k: usize, device: &Device) -> Tensor<3> {
        let c = &self.config;
        assert!(k <= self.layers.len(), "hidden_states[{k}] of {} layers", self.layers.len());
        assert!(
            mask.len() == ids.len() && mask.iter().zip(ids).all(|(m, i)| m.len() == i.len()),
            "the attention mask has the ids' shape"
        );
        let x = self.embed_tokens.forward(pad_ids(ids, 0, device));
        let scale = (c.hidden_size as f64).sqrt() as f32;
        let scale = match x.dtype() {
            DType::F16 => f64::from(half::f16::from_f32(scale)),
            DType::BF16 => f64::from(half::bf16::from_f32(scale)),
            _ => f64::from(scale),
        };
        let mut x = x.mul_scalar(scale);
        let [batch, len, _] = x.dims();
        let (cos, sin) = rope_tables(len, c.head_dim, c.theta());
        let table = |v: Vec<f32>| {
            Tensor::<2>::from_data(TensorData::new(v, [len, c.head_dim]), device)
                .cast(x.dtype())
                .unsqueeze::<4>()
        };
        let (cos, sin) = (table(cos), table(sin));
        let fill = match x.dtype() {
            DType::F16 => f32::from(half::f16::MIN),
            DType::BF16 => f32::from(half::bf16::MIN),
            _ => f32::MIN,
        };
        let mask_of = |window: Option<usize>| {
            Tensor::<4>::from_data(
                TensorData::new(additive_mask(mask, window, fill), [batch, 1, len, len]),
                device,
            )
            .cast(x.dtype())
            .expand([batch, c.num_attention_heads, len, len])
        };
        let full = mask_of(None);
        let sliding =
            c.layer_types().iter().any(|t| t == "sliding_attention").then(|| mask_of(c.sliding_window));
        let steps = k.min(self.layers.len());
        for layer in &self.layers[..steps] {
            let m = match (layer.sliding_window, &sliding) {
                (Some(_), Some(s)) => s.clone(),
                _ => full.clone(),
            };
            x = layer.forward(x, &(cos.clone(), sin.clone()), m, c);
        }
        if k == self.layers.len() { self.norm.forward(x) } else { x }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_follow_transformers_eager_masks() {
        // One row of 5 tokens, the last padded; window 2.
        let m = additive_mask(&[vec![1, 1, 1, 1, 0]], Some(2), -9.0);
        let rows: Vec<&[f32]> = m.chunks(5).collect();
        assert_eq!(rows[0], [0.0, -9.0, -9.0, -9.0, -9.0]);
        assert_eq!(rows[2], [-9.0, 0.0, 0.0, -9.0, -9.0]);
        assert_eq!(rows[4], [-9.0, -9.0, -9.0, 0.0, -9.0], "the padded key stays masked");
        let full = additive_mask(&[vec![0, 1, 1]], None, -9.0);
        assert_eq!(full, [-9.0, -9.0, -9.0, -9.0, 0.0, -9.0, -9.0, 0.0, 0.0]);
    }

    #[test]
    fn the_published_gemma_2_2b_config_reads_to_the_preset() {
        // google/gemma-2-2b's config.json (transformers 4.42), as Lumina-Image-2.0 ships it.
        let json = r#"{"architectures": ["Gemma2Model"], "attention_bias": false,
            "attention_dropout": 0.0, "attn_logit_softcapping": 50.0, "bos_token_id": 2,
            "cache_implementation": "hybrid", "eos_token_id": 1, "final_logit_softcapping": 30.0,
            "head_dim": 256, "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
            "hidden_size": 2304, "initializer_range": 0.02, "intermediate_size": 9216,
            "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 8,
            "num_hidden_layers": 26, "num_key_value_heads": 4, "pad_token_id": 0,
            "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
            "sliding_window": 4096, "torch_dtype": "bfloat16", "transformers_version": "4.42.4",
            "use_cache": true, "vocab_size": 256000}"#;
        let c = Gemma2Config::from_json(json).unwrap();
        assert_eq!(c, Gemma2Config { rope_theta: Some(10000.0), ..Gemma2Config::gemma_2_2b() });
        assert_eq!(c.theta(), 10000.0);
        assert_eq!(c.layer_types()[..3], ["sliding_attention", "full_attention", "sliding_attention"]);
        let off = Gemma2Config::from_json(r#"{"attn_logit_softcapping": null}"#).unwrap();
        assert_eq!(off.attn_logit_softcapping, None);
        for (json, key) in [
            (r#"{"num_key_value_heads": 3}"#, "`num_key_value_heads`"),
            (r#"{"hidden_activation": "relu"}"#, "`hidden_activation`"),
            (r#"{"layer_types": ["full_attention"]}"#, "`layer_types`"),
            (r#"{"rope_parameters": {"rope_type": "yarn", "rope_theta": 1.0}}"#, "`rope_parameters`"),
            (r#"{"use_bidirectional_attention": true}"#, "`use_bidirectional_attention`"),
        ] {
            let e = Gemma2Config::from_json(json).unwrap_err().to_string();
            assert!(e.contains(key), "{json}: {e}");
        }
    }
}
