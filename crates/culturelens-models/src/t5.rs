//! T5's encoder (Raffel et al., 2020) as transformers' `T5EncoderModel` computes it: the text
//! encoder of Stable Diffusion 3 and FLUX.1 (`google/t5-v1_1-xxl`), and later of DeepFloyd IF and
//! Kandinsky 3.
//!
//! - **Embeddings**: `shared` (the token table; no absolute positions, no scaling).
//! - **Blocks** are pre-norm: `x + o(attn(q(n₁(x)), k(n₁(x)), v(n₁(x))))`, then
//!   `x + ff(n₂(x))`. Every linear layer is bias-free; the norms are T5's RMS norm
//!   `w · x / √(mean(x²) + ε)` (no mean subtracted, no bias). Attention is unscaled
//!   (`softmax(q kᵀ + b) v`, the `1/√d` folded into the weights at training) and bidirectional;
//!   diffusers' SD3 and FLUX pipelines pass no attention mask, so padding tokens are attended to.
//! - **Relative position bias** `b[h, i, j] = table[bucket(j − i), h]`, the table of the first
//!   block's attention shared by all blocks; `bucket` is Mesh TensorFlow's
//!   ([`relative_position_bucket`]): half the buckets per direction, exact below
//!   `buckets / 4`, logarithmic up to `relative_attention_max_distance`, clamped above.
//! - **Feed-forward** by `feed_forward_proj`: `act(wi x)` then `wo` (`relu`, T5 v1.0), or the
//!   gated `act(wi_0 x) ⊙ wi_1 x` then `wo` (`gated-gelu`, v1.1, whose GELU is the tanh
//!   approximation `gelu_new`).
//! - **Attention mask** ([`T5EncoderModel::encode_masked`]): DeepFloyd IF and Kandinsky 3 pass
//!   the tokenizer's `attention_mask`; transformers adds `finfo.min` to the position bias of the
//!   padding keys, so they get no weight (here: masked to −∞, the same zero weights). Padding
//!   is the trailing run of pad ids (`pad_token_id`, 0) after the last real token, which is
//!   what the tokenizer's mask marks: its ids always end in `</s>`.
//! - **Half precision**: in float16, as transformers, each sublayer's output is clamped to
//!   ±65504 (±(65504 − 1000) when it holds an infinity), T5-XXL's activations exceeding f16.
//! - **Outputs**: `last_hidden_state = final_layer_norm(hidden_states[L])`. DiffusionLens
//!   (SoS §5.1, Toker et al. 2024, whose DeepFloyd-IF code does exactly this for T5) reads layer
//!   `K` as `final_layer_norm(hidden_states[K])`, which is `last_hidden_state` at `K = L`.
//!
//! [`T5Config`] mirrors `config.json` over transformers' class defaults
//! ([`T5Config::class_defaults`]); [`T5Config::t5_v1_1_xxl`] is the encoder SD3 and FLUX ship.

use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig, RmsNorm, RmsNormConfig};
use burn::tensor::activation::{gelu, gelu_approximate, relu, silu};
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Bool, DType, Device, FloatDType, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::ModelError;
use super::config;
use super::vit::pad_ids;
use super::weights::{Vars, WeightError, load_linear};

/// `config.json` of a `T5EncoderModel` (the keys the encoder needs; others are ignored).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct T5Config {
    pub vocab_size: usize,
    pub d_model: usize,
    pub d_kv: usize,
    pub d_ff: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub relative_attention_num_buckets: usize,
    pub relative_attention_max_distance: usize,
    pub layer_norm_epsilon: f64,
    pub feed_forward_proj: String,
}

/// The activation of the feed-forward (`feed_forward_proj` without its `gated-` prefix).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedForwardAct {
    Relu,
    /// Exact GELU (`gelu`).
    Gelu,
    /// The tanh approximation (`gelu_new`, which `gated-gelu` means).
    GeluNew,
    Silu,
}

impl FeedForwardAct {
    fn forward(self, x: Tensor<3>) -> Tensor<3> {
        match self {
            Self::Relu => relu(x),
            Self::Gelu => gelu(x),
            Self::GeluNew => gelu_approximate(x),
            Self::Silu => silu(x),
        }
    }
}

impl T5Config {
    /// transformers' `T5Config()` defaults (those of `google-t5/t5-small`): the value of every key
    /// a `config.json` leaves out.
    pub fn class_defaults() -> Self {
        Self {
            vocab_size: 32128,
            d_model: 512,
            d_kv: 64,
            d_ff: 2048,
            num_layers: 6,
            num_heads: 8,
            relative_attention_num_buckets: 32,
            relative_attention_max_distance: 128,
            layer_norm_epsilon: 1e-6,
            feed_forward_proj: "relu".into(),
        }
    }

    /// `google/t5-v1_1-xxl`, the `text_encoder_2` of FLUX.1 and `text_encoder_3` of SD 3 / 3.5.
    pub fn t5_v1_1_xxl() -> Self {
        Self {
            d_model: 4096,
            d_ff: 10240,
            num_layers: 24,
            num_heads: 64,
            feed_forward_proj: "gated-gelu".into(),
            ..Self::class_defaults()
        }
    }

    /// Reads `config.json` over [`Self::class_defaults`] and checks what the encoder needs,
    /// naming the key.
    pub fn from_json(json: &str) -> Result<Self, ModelError> {
        let c: Self = config::from_json(json, &Self::class_defaults(), &[])?;
        config::check_layers("num_layers", c.num_layers)?;
        let bad = |key: &str, what: String| Err(ModelError::Unsupported(format!("`{key}`: {what}")));
        if c.num_heads == 0 || c.d_kv == 0 || c.d_model == 0 || c.d_ff == 0 || c.vocab_size == 0 {
            return bad("num_heads", "num_heads, d_kv, d_model, d_ff and vocab_size must be positive".into());
        }
        if c.relative_attention_num_buckets < 4 {
            return bad("relative_attention_num_buckets", "needs at least 4 buckets".into());
        }
        if c.relative_attention_max_distance < c.relative_attention_num_buckets / 4 + 1 {
            return bad(
                "relative_attention_max_distance",
                "must exceed the exact range of a quarter of the buckets".into(),
            );
        }
        c.feed_forward()?;
        Ok(c)
    }

    /// `(gated, activation)` of `feed_forward_proj`, as transformers splits it.
    pub fn feed_forward(&self) -> Result<(bool, FeedForwardAct), ModelError> {
        let parts: Vec<&str> = self.feed_forward_proj.split('-').collect();
        let (gated, name) = match parts.as_slice() {
            ["gated", act] => (true, *act),
            [act] => (false, *act),
            _ => (false, ""),
        };
        let act = match (gated, name) {
            (true, "gelu") | (_, "gelu_new" | "gelu_pytorch_tanh") => FeedForwardAct::GeluNew,
            (false, "gelu") => FeedForwardAct::Gelu,
            (_, "relu") => FeedForwardAct::Relu,
            (_, "silu" | "swish") => FeedForwardAct::Silu,
            _ => {
                return Err(ModelError::Unsupported(format!(
                    "`feed_forward_proj`: `{}` is not supported (relu, gelu, gelu_new, silu, or gated-…)",
                    self.feed_forward_proj
                )));
            }
        };
        Ok((gated, act))
    }

    /// A randomly initialised (lazily materialised) encoder.
    pub fn init(&self, device: &Device) -> Result<T5EncoderModel, ModelError> {
        let (gated, act) = self.feed_forward()?;
        let (d, inner) = (self.d_model, self.num_heads * self.d_kv);
        let linear = |i, o| LinearConfig::new(i, o).with_bias(false).init(device);
        let norm = || RmsNormConfig::new(d).with_epsilon(self.layer_norm_epsilon).init(device);
        let block = (0..self.num_layers)
            .map(|_| T5Block {
                attn_norm: norm(),
                q: linear(d, inner),
                k: linear(d, inner),
                v: linear(d, inner),
                o: linear(inner, d),
                ff_norm: norm(),
                wi: linear(d, self.d_ff),
                wi_1: gated.then(|| linear(d, self.d_ff)),
                wo: linear(self.d_ff, d),
            })
            .collect();
        Ok(T5EncoderModel {
            shared: EmbeddingConfig::new(self.vocab_size, d).init(device),
            relative_attention_bias: EmbeddingConfig::new(
                self.relative_attention_num_buckets,
                self.num_heads,
            )
            .init(device),
            block,
            final_layer_norm: norm(),
            act,
            config: self.clone(),
        })
    }

    /// Builds the encoder of `json` and loads its checkpoint.
    pub fn load(json: &str, vars: Vars) -> Result<T5EncoderModel, ModelError> {
        let mut model = Self::from_json(json)?.init(vars.device())?;
        model.load(vars)?;
        Ok(model)
    }
}

/// `encoder.block.{i}`: `layer.0` (self-attention with its RMS norm) and `layer.1` (the
/// feed-forward `DenseReluDense` with its RMS norm).
#[derive(Module, Debug)]
pub struct T5Block {
    pub attn_norm: RmsNorm,
    pub q: Linear,
    pub k: Linear,
    pub v: Linear,
    pub o: Linear,
    pub ff_norm: RmsNorm,
    /// `wi` (ungated) or `wi_0` (gated, the activated branch).
    pub wi: Linear,
    /// `wi_1`, the linear branch of a gated feed-forward.
    pub wi_1: Option<Linear>,
    pub wo: Linear,
}

/// transformers' `T5EncoderModel`.
#[derive(Module, Debug)]
pub struct T5EncoderModel {
    pub shared: Embedding,
    /// `encoder.block.0.layer.0.SelfAttention.relative_attention_bias`: `[buckets, heads]`.
    pub relative_attention_bias: Embedding,
    pub block: Vec<T5Block>,
    pub final_layer_norm: RmsNorm,
    #[module(skip)]
    pub act: FeedForwardAct,
    #[module(skip)]
    pub config: T5Config,
}

/// Mesh TensorFlow's bucket of the relative position `j − i` (bidirectional, as the encoder):
/// transformers' `T5Attention._relative_position_bucket`, with its float32 logarithm.
pub fn relative_position_bucket(relative: i64, num_buckets: usize, max_distance: usize) -> usize {
    let half = (num_buckets / 2) as i64;
    let offset = if relative > 0 { half } else { 0 };
    let n = relative.abs();
    let max_exact = half / 2;
    if n < max_exact {
        return (offset + n) as usize;
    }
    // torch: log(n.float() / max_exact) / math.log(max_distance / max_exact) * (half - max_exact),
    // in float32 (the Python scalars are rounded to float32 by the kernels), truncated.
    let ratio = ((n as f32) / max_exact as f32).ln();
    let scale = ((max_distance as f64) / max_exact as f64).ln() as f32;
    let large = max_exact + (ratio / scale * (half - max_exact) as f32) as i64;
    (offset + large.min(half - 1)) as usize
}

impl T5Block {
    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        let attn = vars.pp("layer.0");
        self.attn_norm.gamma = attn.pp("layer_norm").param("weight", &self.attn_norm.gamma)?;
        let sa = attn.pp("SelfAttention");
        load_linear(&mut self.q, sa.pp("q"))?;
        load_linear(&mut self.k, sa.pp("k"))?;
        load_linear(&mut self.v, sa.pp("v"))?;
        load_linear(&mut self.o, sa.pp("o"))?;
        let ff = vars.pp("layer.1");
        self.ff_norm.gamma = ff.pp("layer_norm").param("weight", &self.ff_norm.gamma)?;
        let dense = ff.pp("DenseReluDense");
        match &mut self.wi_1 {
            Some(wi_1) => {
                load_linear(&mut self.wi, dense.pp("wi_0"))?;
                load_linear(wi_1, dense.pp("wi_1"))?;
            }
            None => load_linear(&mut self.wi, dense.pp("wi"))?,
        }
        load_linear(&mut self.wo, dense.pp("wo"))
    }

    fn forward(
        &self,
        x: Tensor<3>,
        bias: &Tensor<4>,
        mask: Option<&Tensor<4, Bool>>,
        act: FeedForwardAct,
        heads: usize,
    ) -> Tensor<3> {
        let [batch, len, _] = x.dims();
        let h = self.attn_norm.forward(x.clone());
        let split = |t: Tensor<3>| {
            let d = t.dims()[2] / heads;
            t.reshape([batch, len, heads, d]).swap_dims(1, 2)
        };
        let (q, k, v) =
            (split(self.q.forward(h.clone())), split(self.k.forward(h.clone())), split(self.v.forward(h)));
        let options = AttentionModuleOptions { scale: Some(1.0), softcap: None, is_causal: false };
        let out = attention(q, k, v, mask.cloned(), Some(bias.clone()), options);
        let inner = out.dims()[1] * out.dims()[3];
        let x = clamp_f16(x + self.o.forward(out.swap_dims(1, 2).reshape([batch, len, inner])));
        let h = self.ff_norm.forward(x.clone());
        let hidden = act.forward(self.wi.forward(h.clone()));
        let hidden = match &self.wi_1 {
            Some(wi_1) => hidden * wi_1.forward(h),
            None => hidden,
        };
        clamp_f16(x + self.wo.forward(hidden))
    }
}

/// transformers' float16 guard after each sublayer of a `T5Block`: the hidden state clamped to
/// ±(f16 max − 1000) when it holds an infinity and to ±f16 max otherwise; other float types
/// pass unchanged.
fn clamp_f16(x: Tensor<3>) -> Tensor<3> {
    if x.dtype() != DType::F16 {
        return x;
    }
    let max = f64::from(half::f16::MAX);
    let any_inf = x.clone().is_inf().any().float().cast(FloatDType::F16);
    let limit = (any_inf * -1000.0 + max).reshape([1, 1, 1]).expand(x.dims());
    x.min_pair(limit.clone()).max_pair(limit.neg())
}

impl T5EncoderModel {
    /// Loads a `T5EncoderModel` state dict: `shared.weight` (or its tied copy
    /// `encoder.embed_tokens.weight`), `encoder.block.{i}.*`, `encoder.final_layer_norm`.
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        let table =
            if vars.contains("shared.weight") { vars.pp("shared") } else { vars.pp("encoder.embed_tokens") };
        self.shared.weight = table.param("weight", &self.shared.weight)?;
        let encoder = vars.pp("encoder");
        let bias = encoder.pp("block.0.layer.0.SelfAttention.relative_attention_bias");
        self.relative_attention_bias.weight = bias.param("weight", &self.relative_attention_bias.weight)?;
        for (i, block) in self.block.iter_mut().enumerate() {
            block.load(encoder.pp("block").pp(i))?;
        }
        self.final_layer_norm.gamma =
            encoder.pp("final_layer_norm").param("weight", &self.final_layer_norm.gamma)?;
        Ok(())
    }

    /// The number of blocks, `L`: DiffusionLens reads layers `1..=L`.
    pub fn num_layers(&self) -> usize {
        self.block.len()
    }

    /// The position bias `[batch, heads, len, len]` of sequences of `len` tokens.
    fn position_bias(&self, batch: usize, len: usize, device: &Device) -> Tensor<4> {
        let c = &self.config;
        let buckets: Vec<i64> = (0..len as i64)
            .flat_map(|i| (0..len as i64).map(move |j| (i, j)))
            .map(|(i, j)| {
                relative_position_bucket(
                    j - i,
                    c.relative_attention_num_buckets,
                    c.relative_attention_max_distance,
                ) as i64
            })
            .collect();
        let buckets = Tensor::<1, Int>::from_data(TensorData::new(buckets, [len * len]), device);
        let heads = c.num_heads;
        let values = self.relative_attention_bias.weight.val().select(0, buckets);
        values.reshape([len, len, heads]).permute([2, 0, 1]).unsqueeze::<4>().expand([batch, heads, len, len])
    }

    /// `hidden_states[n]` of token-id rows of equal length: the output of the first `n` blocks
    /// (`n = 0`: the embeddings), before the final layer norm.
    pub fn hidden_state(&self, ids: &[Vec<u32>], n: usize, device: &Device) -> Tensor<3> {
        self.hidden_state_with(ids, n, false, device)
    }

    /// [`Self::hidden_state`], with `masked` the trailing padding of each row masked out of
    /// every attention (transformers' `attention_mask`; see the module docs).
    pub fn hidden_state_with(&self, ids: &[Vec<u32>], n: usize, masked: bool, device: &Device) -> Tensor<3> {
        let mut x = self.shared.forward(pad_ids(ids, 0, device));
        let [batch, len, _] = x.dims();
        let bias = self.position_bias(batch, len, device);
        let heads = self.config.num_heads;
        let mask = masked.then(|| {
            let padding: Vec<bool> = ids
                .iter()
                .flat_map(|row| {
                    let real = row.iter().rposition(|&id| id != 0).map_or(0, |i| i + 1);
                    (0..len).map(move |j| j >= real)
                })
                .collect();
            Tensor::<2, Bool>::from_data(TensorData::new(padding, [batch, len]), device)
                .reshape([batch, 1, 1, len])
                .expand([batch, heads, len, len])
        });
        for block in &self.block[..n] {
            x = block.forward(x, &bias, mask.as_ref(), self.act, heads);
        }
        x
    }

    /// [`Self::encode`] with the attention mask of each row's trailing padding, as DeepFloyd IF
    /// calls `T5EncoderModel(ids, attention_mask=mask)`.
    pub fn encode_masked(&self, ids: &[Vec<u32>], n: usize, device: &Device) -> Tensor<3> {
        self.final_layer_norm.forward(self.hidden_state_with(ids, n, true, device))
    }

    /// `final_layer_norm(hidden_states[n])`: `last_hidden_state` at `n = L`, DiffusionLens'
    /// layer `n` below.
    pub fn encode(&self, ids: &[Vec<u32>], n: usize, device: &Device) -> Tensor<3> {
        self.final_layer_norm.forward(self.hidden_state(ids, n, device))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_by_hand() {
        // 32 buckets, 128 max distance (T5's): 16 per direction, exact below 8; 8 + ⌊ln(n/8) /
        // ln(16) · 8⌋ above: n = 16 → 10, n = 127 → 8 + ⌊7.98⌋ = 15, n ≥ 128 → 15 (clamped).
        let b = |n| relative_position_bucket(n, 32, 128);
        assert_eq!(
            [b(0), b(-1), b(-7), b(-8), b(-16), b(-127), b(-128), b(-1000)],
            [0, 1, 7, 8, 10, 15, 15, 15]
        );
        // Positive offsets use the upper half.
        assert_eq!([b(1), b(7), b(16), b(1000)], [17, 23, 26, 31]);
    }

    #[test]
    fn float16_hidden_states_are_clamped_as_transformers_does() {
        let device = Device::flex();
        let f16 = |v: &[f32]| {
            let data = TensorData::new(
                v.iter().map(|&x| half::f16::from_f32(x)).collect::<Vec<_>>(),
                [1, 1, v.len()],
            );
            Tensor::<3>::from_data(data, (&device, DType::F16))
        };
        let values = |t: Tensor<3>| t.into_data().convert::<f32>().try_into_vec::<f32>().unwrap();
        // No infinity: ±65504 stay. An infinity: everything within ±(65504 − 1000), which f16
        // rounds to 64512.
        assert_eq!(values(clamp_f16(f16(&[1.0, 65504.0, -65504.0]))), [1.0, 65504.0, -65504.0]);
        assert_eq!(values(clamp_f16(f16(&[1.0, f32::INFINITY, -65504.0]))), [1.0, 64512.0, -64512.0]);
        let f32_inf = Tensor::<3>::from_data(TensorData::new(vec![f32::INFINITY], [1, 1, 1]), &device);
        assert_eq!(values(clamp_f16(f32_inf)), [f32::INFINITY], "f32 is left alone");
    }

    #[test]
    fn feed_forward_names_follow_transformers() {
        let ff = |name: &str| {
            T5Config { feed_forward_proj: name.into(), ..T5Config::class_defaults() }.feed_forward()
        };
        assert_eq!(ff("relu").unwrap(), (false, FeedForwardAct::Relu));
        assert_eq!(ff("gated-gelu").unwrap(), (true, FeedForwardAct::GeluNew));
        assert_eq!(ff("gelu").unwrap(), (false, FeedForwardAct::Gelu));
        assert_eq!(ff("gated-silu").unwrap(), (true, FeedForwardAct::Silu));
        for bad in ["tanh", "gated-gelu-x", "double-relu"] {
            let e = ff(bad).unwrap_err().to_string();
            assert!(e.contains("`feed_forward_proj`"), "{e}");
        }
    }

    #[test]
    fn the_published_t5_v1_1_xxl_config_reads_to_the_preset() {
        // google/t5-v1_1-xxl's config.json as FLUX.1-dev ships it in text_encoder_2/.
        let json = r#"{"_name_or_path": "google/t5-v1_1-xxl", "architectures": ["T5EncoderModel"],
            "classifier_dropout": 0.0, "d_ff": 10240, "d_kv": 64, "d_model": 4096,
            "decoder_start_token_id": 0, "dense_act_fn": "gelu_new", "dropout_rate": 0.1,
            "eos_token_id": 1, "feed_forward_proj": "gated-gelu", "initializer_factor": 1.0,
            "is_encoder_decoder": true, "is_gated_act": true, "layer_norm_epsilon": 1e-06,
            "model_type": "t5", "num_decoder_layers": 24, "num_heads": 64, "num_layers": 24,
            "output_past": true, "pad_token_id": 0, "relative_attention_max_distance": 128,
            "relative_attention_num_buckets": 32, "tie_word_embeddings": false,
            "torch_dtype": "bfloat16", "transformers_version": "4.43.3", "use_cache": true,
            "vocab_size": 32128}"#;
        assert_eq!(T5Config::from_json(json).unwrap(), T5Config::t5_v1_1_xxl());
        let e = T5Config::from_json(r#"{"num_heads": 0}"#).unwrap_err().to_string();
        assert!(e.contains("`num_heads`"), "{e}");
    }
}
