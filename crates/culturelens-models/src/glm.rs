//! GLM-4 (Team GLM, 2024) as transformers' `GlmModel` computes its hidden states: the text
//! encoder of CogView4 (`THUDM/CogView4-6B`'s `text_encoder/`, glm-4-9b), run as an encoder only
//! (no cache, no decoding, no language-model head).
//!
//! - **Embeddings**: `embed_tokens` (no scaling, no absolute positions).
//! - **Layers** are pre-norm: `x + o_proj(attn(input_layernorm(x)))`, then
//!   `x + mlp(post_attention_layernorm(x))`. The norms are RMS norms
//!   `w · x / √(mean(x²) + ε)` (`rms_norm_eps`).
//! - **Attention** is grouped-query: `num_attention_heads` query heads of `head_dim` (which need
//!   not be `hidden_size / heads`), `num_key_value_heads` key/value heads, query head `h` reading
//!   key/value head `h / (heads / kv_heads)` (transformers' `repeat_kv`); q, k and v carry a
//!   bias when `attention_bias` is set, `o_proj` never. Scores are scaled by `head_dim^-½`
//!   and causal; with an attention mask, a key that is padding is masked too, and a query row
//!   with no visible key (a left-padding position) attends to nothing: its attention output is
//!   zero, as torch's SDPA (the default implementation) gives for a fully masked row.
//!   CogView4 passes no mask, so its left padding tokens are attended to (causally).
//! - **Rotary embedding**, partial and interleaved (GLM's `apply_rotary_pos_emb`): the first
//!   `r = 2⌈⌊head_dim · partial_rotary_factor⌋ / 2⌉` dimensions of q and k rotate, in adjacent
//!   pairs `(x₂ⱼ, x₂ⱼ₊₁) → (x₂ⱼ cos θ − x₂ⱼ₊₁ sin θ, x₂ⱼ₊₁ cos θ + x₂ⱼ sin θ)` with
//!   `θ = p · base^(−2j / ⌊head_dim · partial_rotary_factor⌋)` (float32, as torch); the other
//!   dimensions pass unchanged. Positions `p` are `0, 1, …` over the whole row, padding included
//!   (transformers derives no position ids from the mask).
//! - **MLP**: `gate_up_proj` (bias-free) split in halves `[gate, up]`, then
//!   `down_proj(up ⊙ silu(gate))`.
//! - **Outputs**: transformers' `hidden_states` has `L + 1` entries: `hidden_states[k]` for
//!   `k < L` is the output of the first `k` layers (0: the embeddings), and
//!   `hidden_states[L]` is `norm(output of L layers)` (`last_hidden_state`). CogView4 reads
//!   `hidden_states[-2]` (`k = L − 1`, un-normed); DiffusionLens reads `hidden_states[K]` with
//!   the same numbering ([`GlmModel::hidden_state`]).
//!
//! [`GlmConfig`] mirrors `config.json` over transformers' `GlmConfig()` defaults
//! ([`GlmConfig::class_defaults`], which are glm-4-9b's); [`GlmConfig::cogview4_6b`] is the
//! encoder CogView4 ships. `rope_parameters` (transformers 5) or the older top-level
//! `rope_theta` / `partial_rotary_factor` set the rotary embedding; only `rope_type: "default"`
//! is supported.

use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig, RmsNorm, RmsNormConfig};
use burn::tensor::activation::silu;
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Device, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::ModelError;
use super::config;
use super::vit::pad_ids;
use super::weights::{Vars, WeightError, load_embedding, load_linear, load_linear_rows};

/// `rope_parameters` of a transformers 5 `config.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RopeParameters {
    pub rope_type: Option<String>,
    pub rope_theta: Option<f64>,
    pub partial_rotary_factor: Option<f64>,
}

/// `config.json` of a `GlmModel` (the keys the encoder needs; others are ignored).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GlmConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub hidden_act: String,
    pub rms_norm_eps: f64,
    pub attention_bias: bool,
    pub max_position_embeddings: usize,
    pub pad_token_id: Option<u32>,
    /// transformers 4.x's top-level keys, folded into `rope_parameters` by transformers 5.
    pub rope_theta: Option<f64>,
    pub partial_rotary_factor: Option<f64>,
    pub rope_parameters: Option<RopeParameters>,
}

/// The rotary embedding's base when no key sets it (transformers' `default_theta`).
const DEFAULT_THETA: f64 = 10_000.0;
/// `GlmConfig.__post_init__`'s `partial_rotary_factor` when no key sets it.
const DEFAULT_PARTIAL_ROTARY_FACTOR: f64 = 0.5;

impl GlmConfig {
    /// transformers' `GlmConfig()` defaults (glm-4-9b's): the value of every key a
    /// `config.json` leaves out.
    pub fn class_defaults() -> Self {
        Self {
            vocab_size: 151552,
            hidden_size: 4096,
            intermediate_size: 13696,
            num_hidden_layers: 40,
            num_attention_heads: 32,
            num_key_value_heads: 2,
            head_dim: 128,
            hidden_act: "silu".into(),
            rms_norm_eps: 1.5625e-7,
            attention_bias: true,
            max_position_embeddings: 131072,
            pad_token_id: Some(151329),
            rope_theta: None,
            partial_rotary_factor: None,
            rope_parameters: None,
        }
    }

    /// `THUDM/CogView4-6B`'s `text_encoder/config.json` (glm-4-9b as a `GlmModel`).
    pub fn cogview4_6b() -> Self {
        Self {
            max_position_embeddings: 8192,
            rope_theta: Some(DEFAULT_THETA),
            partial_rotary_factor: Some(DEFAULT_PARTIAL_ROTARY_FACTOR),
            ..Self::class_defaults()
        }
    }

    /// Reads `config.json` over [`Self::class_defaults`] and checks what the encoder needs,
    /// naming the key.
    pub fn from_json(json: &str) -> Result<Self, ModelError> {
        let c: Self = config::from_json(json, &Self::class_defaults(), &[])?;
        config::check_layers("num_hidden_layers", c.num_hidden_layers)?;
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        if [c.vocab_size, c.hidden_size, c.intermediate_size, c.head_dim].contains(&0) {
            return bad(
                "hidden_size",
                "vocab_size, hidden_size, intermediate_size and head_dim must be positive".into(),
            );
        }
        if c.num_key_value_heads == 0 || !c.num_attention_heads.is_multiple_of(c.num_key_value_heads) {
            return bad(
                "num_key_value_heads",
                format!(
                    "{} key/value heads do not divide {} heads",
                    c.num_key_value_heads, c.num_attention_heads
                ),
            );
        }
        if !matches!(c.hidden_act.as_str(), "silu" | "swish") {
            return bad("hidden_act", format!("`{}` is not supported (silu)", c.hidden_act));
        }
        if let Some(kind) = c.rope_parameters.as_ref().and_then(|r| r.rope_type.as_deref())
            && kind != "default"
        {
            return bad("rope_parameters.rope_type", format!("`{kind}` is not supported (default)"));
        }
        let (_, factor) = c.rope();
        if !(factor > 0.0 && factor <= 1.0) {
            return bad("partial_rotary_factor", format!("{factor} is not in (0, 1]"));
        }
        if c.rotary_dim() == 0 || c.rotary_dim() > c.head_dim {
            return bad(
                "partial_rotary_factor",
                format!("rotates {} of head_dim {}", c.rotary_dim(), c.head_dim),
            );
        }
        Ok(c)
    }

    /// `(rope_theta, partial_rotary_factor)` as transformers 5 standardises them:
    /// `rope_parameters`' values first, then the top-level keys, then the defaults.
    pub fn rope(&self) -> (f64, f64) {
        let params = self.rope_parameters.as_ref();
        let theta = params.and_then(|r| r.rope_theta).or(self.rope_theta).unwrap_or(DEFAULT_THETA);
        let factor = params
            .and_then(|r| r.partial_rotary_factor)
            .or(self.partial_rotary_factor)
            .unwrap_or(DEFAULT_PARTIAL_ROTARY_FACTOR);
        (theta, factor)
    }

    /// `int(head_dim · partial_rotary_factor)`, the `dim` of the inverse frequencies.
    fn rope_dim(&self) -> usize {
        (self.head_dim as f64 * self.rope().1) as usize
    }

    /// How many leading dimensions of each head rotate: two per inverse frequency.
    pub fn rotary_dim(&self) -> usize {
        2 * self.rope_dim().div_ceil(2)
    }

    /// A randomly initialised (lazily materialised) encoder.
    pub fn init(&self, device: &Device) -> GlmModel {
        let d = self.hidden_size;
        let (q_dim, kv_dim) =
            (self.num_attention_heads * self.head_dim, self.num_key_value_heads * self.head_dim);
        let biased = |i, o| LinearConfig::new(i, o).with_bias(self.attention_bias).init(device);
        let linear = |i, o| LinearConfig::new(i, o).with_bias(false).init(device);
        let norm = || RmsNormConfig::new(d).with_epsilon(self.rms_norm_eps).init(device);
        let layers = (0..self.num_hidden_layers)
            .map(|_| GlmDecoderLayer {
                input_layernorm: norm(),
                q_proj: biased(d, q_dim),
                k_proj: biased(d, kv_dim),
                v_proj: biased(d, kv_dim),
                o_proj: linear(q_dim, d),
                post_attention_layernorm: norm(),
                gate_proj: linear(d, self.intermediate_size),
                up_proj: linear(d, self.intermediate_size),
                down_proj: linear(self.intermediate_size, d),
            })
            .collect();
        GlmModel {
            embed_tokens: EmbeddingConfig::new(self.vocab_size, d).init(device),
            layers,
            norm: norm(),
            config: self.clone(),
        }
    }

    /// Builds the encoder of `json` and loads its checkpoint.
    pub fn load(json: &str, vars: Vars) -> Result<GlmModel, ModelError> {
        let mut model = Self::from_json(json)?.init(vars.device());
        model.load(vars)?;
        Ok(model)
    }
}

/// `layers.{i}`: the self-attention and the gated MLP with their RMS norms. `gate_proj` and
/// `up_proj` are the two halves of the checkpoint's `mlp.gate_up_proj`.
#[derive(Module, Debug)]
pub struct GlmDecoderLayer {
    pub input_layernorm: RmsNorm,
    pub q_proj: Linear,
    pub k_proj: Linear,
    pub v_proj: Linear,
    pub o_proj: Linear,
    pub post_attention_layernorm: RmsNorm,
    pub gate_proj: Linear,
    pub up_proj: Linear,
    pub down_proj: Linear,
}

/// transformers' `GlmModel`.
#[derive(Module, Debug)]
pub struct GlmModel {
    pub embed_tokens: Embedding,
    pub layers: Vec<GlmDecoderLayer>,
    pub norm: RmsNorm,
    #[module(skip)]
    pub config: GlmConfig,
}

/// The rotary tables of one sequence: `cos` and `sin` `[1, 1, len, rotary_dim]`, each frequency
/// repeated for the two elements of its pair.
struct Rotary {
    cos: Tensor<4>,
    sin: Tensor<4>,
    dim: usize,
}

impl Rotary {
    fn new(config: &GlmConfig, len: usize, device: &Device) -> Self {
        let (theta, _) = config.rope();
        let dim = config.rope_dim();
        // torch: 1.0 / (base ** (arange(0, dim, 2).float() / dim)), positions · inv_freq, in f32.
        let inv_freq: Vec<f32> =
            (0..dim).step_by(2).map(|i| 1.0 / (theta as f32).powf(i as f32 / dim as f32)).collect();
        let rotary = 2 * inv_freq.len();
        let (mut cos, mut sin) = (Vec::with_capacity(len * rotary), Vec::with_capacity(len * rotary));
        for p in 0..len {
            for &f in &inv_freq {
                let angle = p as f32 * f;
                cos.extend([angle.cos(); 2]);
                sin.extend([angle.sin(); 2]);
            }
        }
        let t = |v| Tensor::<2>::from_data(TensorData::new(v, [len, rotary]), device).unsqueeze::<4>();
        Self { cos: t(cos), sin: t(sin), dim: rotary }
    }

    /// GLM's `apply_rotary_pos_emb` on `[batch, heads, len, head_dim]`: the first `dim`
    /// dimensions rotated pairwise (`(a, b) → (−b, a)` times sin), the rest passed through.
    fn apply(&self, x: Tensor<4>) -> Tensor<4> {
        let [b, h, s, d] = x.dims();
        let r = self.dim;
        let rot = x.clone().slice([0..b, 0..h, 0..s, 0..r]);
        let pairs = rot.clone().reshape([b, h, s, r / 2, 2]);
        let even = pairs.clone().slice([0..b, 0..h, 0..s, 0..r / 2, 0..1]);
        let odd = pairs.slice([0..b, 0..h, 0..s, 0..r / 2, 1..2]);
        let rotated = Tensor::cat(vec![odd.neg(), even], 4).reshape([b, h, s, r]);
        let embedded = rot * self.cos.clone() + rotated * self.sin.clone();
        if r == d { embedded } else { Tensor::cat(vec![embedded, x.slice([0..b, 0..h, 0..s, r..d])], 3) }
    }
}

/// The additive attention bias `[batch, 1, len, len]` (0 where query `i` sees key `j`: `j ≤ i`
/// and, with a mask, key `j` not padding; the most negative float elsewhere) and, with a mask,
/// the `[batch, 1, len, 1]` factor that zeroes the attention output of a query that sees no
/// key (torch's SDPA on a fully masked row).
fn causal_bias(
    mask: Option<&[Vec<bool>]>,
    batch: usize,
    len: usize,
    device: &Device,
) -> (Tensor<4>, Option<Tensor<4>>) {
    const MASKED: f32 = f32::MIN;
    let mut bias = vec![0f32; batch * len * len];
    let mut seen = vec![1f32; batch * len];
    for b in 0..batch {
        for i in 0..len {
            let mut any = false;
            for j in 0..len {
                let visible = j <= i && mask.is_none_or(|m| m[b][j]);
                any |= visible;
                if !visible {
                    bias[(b * len + i) * len + j] = MASKED;
                }
            }
            if !any {
                // A row that sees no key attends to all (finite in every float type, where the
                // masked value may round to −∞) and its output is zeroed by `seen`.
                bias[(b * len + i) * len..(b * len + i + 1) * len].fill(0.0);
                seen[b * len + i] = 0.0;
            }
        }
    }
    let bias = Tensor::<3>::from_data(TensorData::new(bias, [batch, len, len]), device).unsqueeze_dim::<4>(1);
    let seen = mask.map(|_| {
        Tensor::<2>::from_data(TensorData::new(seen, [batch, len]), device).reshape([batch, 1, len, 1])
    });
    (bias, seen)
}

impl GlmDecoderLayer {
    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        self.input_layernorm.gamma =
            vars.pp("input_layernorm").param("weight", &self.input_layernorm.gamma)?;
        let attn = vars.pp("self_attn");
        load_linear(&mut self.q_proj, attn.pp("q_proj"))?;
        load_linear(&mut self.k_proj, attn.pp("k_proj"))?;
        load_linear(&mut self.v_proj, attn.pp("v_proj"))?;
        load_linear(&mut self.o_proj, attn.pp("o_proj"))?;
        self.post_attention_layernorm.gamma =
            vars.pp("post_attention_layernorm").param("weight", &self.post_attention_layernorm.gamma)?;
        let mlp = vars.pp("mlp");
        let names = ["gate_up_proj.weight", "gate_up_proj.bias"];
        load_linear_rows(&mut self.gate_proj, &mlp, names, 0, 2)?;
        load_linear_rows(&mut self.up_proj, &mlp, names, 1, 2)?;
        load_linear(&mut self.down_proj, mlp.pp("down_proj"))
    }

    fn forward(
        &self,
        x: Tensor<3>,
        rotary: &Rotary,
        (bias, seen): (&Tensor<4>, Option<&Tensor<4>>),
        c: &GlmConfig,
    ) -> Tensor<3> {
        let [batch, len, _] = x.dims();
        let (heads, kv_heads, d) = (c.num_attention_heads, c.num_key_value_heads, c.head_dim);
        let h = self.input_layernorm.forward(x.clone());
        let split = |t: Tensor<3>, n: usize| t.reshape([batch, len, n, d]).swap_dims(1, 2);
        let q = rotary.apply(split(self.q_proj.forward(h.clone()), heads));
        let k = rotary.apply(split(self.k_proj.forward(h.clone()), kv_heads));
        let v = split(self.v_proj.forward(h), kv_heads);
        // repeat_kv: query head h reads key/value head h / (heads / kv_heads).
        let repeat = |t: Tensor<4>| {
            let rep = heads / kv_heads;
            if rep == 1 {
                return t;
            }
            t.unsqueeze_dim::<5>(2).expand([batch, kv_heads, rep, len, d]).reshape([batch, heads, len, d])
        };
        let options =
            AttentionModuleOptions { scale: Some((d as f64).powf(-0.5)), softcap: None, is_causal: false };
        let bias = bias.clone().expand([batch, heads, len, len]);
        let mut out = attention(q, repeat(k), repeat(v), None, Some(bias), options);
        if let Some(seen) = seen {
            out = out * seen.clone();
        }
        let x = x + self.o_proj.forward(out.swap_dims(1, 2).reshape([batch, len, heads * d]));
        let h = self.post_attention_layernorm.forward(x.clone());
        x + self.down_proj.forward(self.up_proj.forward(h.clone()) * silu(self.gate_proj.forward(h)))
    }
}

impl GlmModel {
    /// Loads a `GlmModel` state dict (`embed_tokens`, `layers.{i}.*`, `norm`), or the
    /// `model.`-prefixed one of a `GlmForCausalLM` (whose `lm_head` is not read).
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        let vars = if vars.contains("model.embed_tokens.weight") { vars.pp("model") } else { vars };
        load_embedding(&mut self.embed_tokens, vars.pp("embed_tokens"))?;
        for (i, layer) in self.layers.iter_mut().enumerate() {
            layer.load(vars.pp("layers").pp(i))?;
        }
        self.norm.gamma = vars.pp("norm").param("weight", &self.norm.gamma)?;
        Ok(())
    }

    /// The number of layers, `L`: `hidden_states` has `L + 1` entries.
    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// transformers' `hidden_states[k]` (`0 ≤ k ≤ L`) of token-id rows of equal length:
    /// the output of the first `k` layers, `norm`ed at `k = L`. `mask` (1 for a token, 0 for
    /// padding, per row) is transformers' `attention_mask`; `None` is what CogView4 passes.
    pub fn hidden_state(
        &self,
        ids: &[Vec<u32>],
        mask: Option<&[Vec<bool>]>,
        k: usize,
        device: &Device,
    ) -> Tensor<3> {
        let len = ids.first().map_or(0, Vec::len);
        assert!(ids.iter().all(|r| r.len() == len), "GLM rows must have equal lengths (pad them first)");
        assert!(k <= self.num_layers(), "hidden_states[{k}] of {} layers", self.num_layers());
        if let Some(mask) = mask {
            assert!(mask.len() == ids.len() && mask.iter().all(|r| r.len() == len), "mask of the ids' shape");
        }
        let pad = self.config.pad_token_id.unwrap_or(0);
        let mut x = self.embed_tokens.forward(pad_ids(ids, pad, device));
        let rotary = Rotary::new(&self.config, len, device);
        let (bias, seen) = causal_bias(mask, ids.len(), len, device);
        for layer in &self.layers[..k] {
            x = layer.forward(x, &rotary, (&bias, seen.as_ref()), &self.config);
        }
        if k == self.num_layers() { self.norm.forward(x) } else { x }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_published_cogview4_text_encoder_config_reads_to_the_preset() {
        // THUDM/CogView4-6B's text_encoder/config.json.
        let json = r#"{"architectures": ["GlmModel"], "attention_bias": true, "attention_dropout": 0.0,
            "eos_token_id": [151329, 151336, 151338], "head_dim": 128, "hidden_act": "silu",
            "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 13696,
            "max_position_embeddings": 8192, "model_type": "glm", "num_attention_heads": 32,
            "num_hidden_layers": 40, "num_key_value_heads": 2, "pad_token_id": 151329,
            "partial_rotary_factor": 0.5, "rms_norm_eps": 1.5625e-07, "rope_theta": 10000.0,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16",
            "transformers_version": "4.46.0.dev0", "use_cache": true, "vocab_size": 151552}"#;
        let c = GlmConfig::from_json(json).unwrap();
        assert_eq!(c, GlmConfig::cogview4_6b());
        assert_eq!((c.rope(), c.rotary_dim()), ((10000.0, 0.5), 64));
    }

    #[test]
    fn rope_parameters_win_over_top_level_keys_and_bad_keys_are_named() {
        let c = GlmConfig::from_json(
            r#"{"partial_rotary_factor": 0.25, "rope_parameters": {"rope_type": "default", "rope_theta": 500.0}}"#,
        )
        .unwrap();
        assert_eq!(c.rope(), (500.0, 0.25));
        let c = GlmConfig::from_json(r#"{"head_dim": 10, "partial_rotary_factor": 0.3}"#).unwrap();
        // int(10 · 0.3) = 3 frequencies' dim → 2 frequencies → 4 rotated dimensions.
        assert_eq!(c.rotary_dim(), 4);
        for (json, key) in [
            (r#"{"num_key_value_heads": 3}"#, "`num_key_value_heads`"),
            (r#"{"hidden_act": "gelu"}"#, "`hidden_act`"),
            (r#"{"rope_parameters": {"rope_type": "yarn"}}"#, "`rope_parameters.rope_type`"),
            (r#"{"partial_rotary_factor": 0.0}"#, "`partial_rotary_factor`"),
            (r#"{"num_hidden_layers": 5000}"#, "`num_hidden_layers`"),
        ] {
            let e = GlmConfig::from_json(json).unwrap_err().to_string();
            assert!(e.contains(key), "{json}: {e}");
        }
    }
}
