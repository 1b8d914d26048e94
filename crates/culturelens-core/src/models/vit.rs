//! Transformer pieces shared by the CLIP and SigLIP towers (and the attention of DINOv2): the
//! pre-norm encoder layer `x + attn(ln1(x))`, `x + mlp(ln2(x))` with separate q/k/v/out
//! projections, exactly as in transformers' `CLIPEncoderLayer` / `SiglipEncoderLayer` — and the
//! padding of token ids for the text towers.

use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::activation::{gelu, gelu_approximate, sigmoid};
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Bool, Device, FloatDType, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::weights::{Vars, WeightError, load_embedding, load_layer_norm, load_linear, load_linear_rows};

/// The `hidden_act` of a transformers config.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// `x · sigmoid(1.702 x)` (OpenAI CLIP).
    QuickGelu,
    /// Exact GELU with erf (OpenCLIP/LAION CLIP in transformers, DINOv2).
    Gelu,
    /// The tanh approximation of GELU (SigLIP).
    #[serde(alias = "gelu_new", alias = "gelu_fast")]
    GeluPytorchTanh,
}

impl Activation {
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        match self {
            Activation::QuickGelu => x.clone() * sigmoid(x * 1.702),
            Activation::Gelu => gelu(x),
            Activation::GeluPytorchTanh => gelu_approximate(x),
        }
    }
}

/// Multi-head self-attention with separate q/k/v/out projections (`CLIPAttention`).
#[derive(Module, Debug)]
pub struct Attention {
    pub q_proj: Linear,
    pub k_proj: Linear,
    pub v_proj: Linear,
    pub out_proj: Linear,
    #[module(skip)]
    pub num_heads: usize,
}

impl Attention {
    pub fn init(hidden: usize, num_heads: usize, qkv_bias: bool, device: &Device) -> Self {
        let proj = |bias| LinearConfig::new(hidden, hidden).with_bias(bias).init(device);
        Self {
            q_proj: proj(qkv_bias),
            k_proj: proj(qkv_bias),
            v_proj: proj(qkv_bias),
            out_proj: proj(true),
            num_heads,
        }
    }

    /// Loads the projections `q`, `k`, `v`, `out` from the scopes `vars.pp(name)` of `names`
    /// (`["q_proj", "k_proj", "v_proj", "out_proj"]` in transformers' CLIP and SigLIP).
    pub fn load(&mut self, vars: &Vars, names: [&str; 4]) -> Result<(), WeightError> {
        load_linear(&mut self.q_proj, vars.pp(names[0]))?;
        load_linear(&mut self.k_proj, vars.pp(names[1]))?;
        load_linear(&mut self.v_proj, vars.pp(names[2]))?;
        load_linear(&mut self.out_proj, vars.pp(names[3]))
    }

    /// Loads an `nn.MultiheadAttention`: q, k and v stacked in `in_proj_weight` /
    /// `in_proj_bias`, and `out_proj`.
    pub fn load_fused(&mut self, vars: Vars) -> Result<(), WeightError> {
        for (part, proj) in [&mut self.q_proj, &mut self.k_proj, &mut self.v_proj].into_iter().enumerate() {
            load_linear_rows(proj, &vars, ["in_proj_weight", "in_proj_bias"], part, 3)?;
        }
        load_linear(&mut self.out_proj, vars.pp("out_proj"))
    }

    /// `softmax(q kᵀ / √d_head) v` over `[batch, tokens, hidden]`; `causal` masks future tokens.
    pub fn forward(&self, x: Tensor<3>, causal: bool) -> Tensor<3> {
        let q = self.q_proj.forward(x.clone());
        self.attend(q, x, causal)
    }

    /// Attention of the queries `q` (already projected) over the keys/values of `kv`.
    pub fn attend(&self, q: Tensor<3>, kv: Tensor<3>, causal: bool) -> Tensor<3> {
        self.attend_with(q, kv, AttendOptions { causal, ..AttendOptions::default() })
    }

    /// [`Attention::attend`] with a key padding mask and attention slicing ([`AttendOptions`]).
    pub fn attend_with(&self, q: Tensor<3>, kv: Tensor<3>, how: AttendOptions) -> Tensor<3> {
        let [batch, n_q, hidden] = q.dims();
        let n_kv = kv.dims()[1];
        let head_dim = hidden / self.num_heads;
        let heads = |t: Tensor<3>, n: usize| t.reshape([batch, n, self.num_heads, head_dim]).swap_dims(1, 2);
        let q = heads(q, n_q);
        let k = heads(self.k_proj.forward(kv.clone()), n_kv);
        let v = heads(self.v_proj.forward(kv), n_kv);
        let options = AttentionModuleOptions {
            scale: Some((head_dim as f64).powf(-0.5)),
            softcap: None,
            is_causal: how.causal,
        };
        let mask = how
            .key_padding
            .map(|m| m.reshape([batch, 1, 1, n_kv]).expand([batch, self.num_heads, n_q, n_kv]));
        let dtype = FloatDType::from(q.dtype());
        let (q, k, v) = match how.upcast {
            true => (q.cast(FloatDType::F32), k.cast(FloatDType::F32), v.cast(FloatDType::F32)),
            false => (q, k, v),
        };
        let out = match how.slice {
            Some(rows) if rows < batch * self.num_heads => sliced_attention(q, k, v, mask, options, rows),
            _ => attention(q, k, v, mask, None, options),
        }
        .cast(dtype);
        self.out_proj.forward(out.swap_dims(1, 2).reshape([batch, n_q, hidden]))
    }
}

/// How [`Attention::attend_with`] attends, beyond `softmax(q kᵀ / √d_head) v`.
#[derive(Clone, Debug, Default)]
pub struct AttendOptions {
    /// Mask future tokens (CLIP's text tower).
    pub causal: bool,
    /// `[batch, n_kv]`, `true` where a key is padding and gets no weight (transformers'
    /// `attention_mask == 0`).
    pub key_padding: Option<Tensor<2, Bool>>,
    /// diffusers' `attention_slice`: at most this many of the `batch × heads` score matrices
    /// at a time, in order (`None`: all at once). Each (image, head) pair is computed alone
    /// either way, so the result does not depend on it; it bounds the memory of a backend that
    /// materialises the scores.
    pub slice: Option<usize>,
    /// Compute the attention in f32 whatever the device's float type (diffusers'
    /// `upcast_attention`); a no-op in f32.
    pub upcast: bool,
}

/// Burn's `attention` over consecutive runs of `rows` (batch, head) pairs of `[batch, heads,
/// n, d]` tensors, as diffusers' `SlicedAttnProcessor` walks `batch × heads`.
fn sliced_attention(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    mask: Option<Tensor<4, Bool>>,
    options: AttentionModuleOptions,
    rows: usize,
) -> Tensor<4> {
    let [batch, heads, n_q, d] = q.dims();
    let (n_kv, d_v) = (k.dims()[2], v.dims()[3]);
    let pairs = batch * heads;
    let flat = |t: Tensor<4>, n: usize, w: usize| t.reshape([1, pairs, n, w]);
    let (q, k, v) = (flat(q, n_q, d), flat(k, n_kv, d), flat(v, n_kv, d_v));
    let mask = mask.map(|m| m.reshape([1, pairs, n_q, n_kv]));
    let parts = (0..pairs)
        .step_by(rows.max(1))
        .map(|start| {
            let r = start..(start + rows.max(1)).min(pairs);
            attention(
                q.clone().slice([0..1, r.clone()]),
                k.clone().slice([0..1, r.clone()]),
                v.clone().slice([0..1, r.clone()]),
                mask.clone().map(|m| m.slice([0..1, r])),
                None,
                options,
            )
        })
        .collect();
    Tensor::cat(parts, 1).reshape([batch, heads, n_q, d_v])
}

/// `fc2(act(fc1(x)))` (`CLIPMLP`, `SiglipMLP`, `Dinov2MLP`).
#[derive(Module, Debug)]
pub struct Mlp {
    pub fc1: Linear,
    pub fc2: Linear,
    #[module(skip)]
    pub act: Activation,
}

impl Mlp {
    pub fn init(hidden: usize, intermediate: usize, act: Activation, device: &Device) -> Self {
        Self {
            fc1: LinearConfig::new(hidden, intermediate).init(device),
            fc2: LinearConfig::new(intermediate, hidden).init(device),
            act,
        }
    }

    /// Loads `fc1` and `fc2`.
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_linear(&mut self.fc1, vars.pp("fc1"))?;
        load_linear(&mut self.fc2, vars.pp("fc2"))
    }

    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        self.fc2.forward(self.act.forward(self.fc1.forward(x)))
    }
}

/// The keys of a transformers tower config (`CLIPTextConfig`, `SiglipVisionConfig`, …) that
/// shape its encoder stack; each tower config holds them flattened, as `config.json` does.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct EncoderConfig {
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub hidden_act: Activation,
    pub layer_norm_eps: f64,
}

/// One pre-norm layer (`CLIPEncoderLayer`).
#[derive(Module, Debug)]
pub struct EncoderLayer {
    pub layer_norm1: LayerNorm,
    pub self_attn: Attention,
    pub layer_norm2: LayerNorm,
    pub mlp: Mlp,
}

/// `encoder.layers.{i}` of a CLIP or SigLIP tower.
#[derive(Module, Debug)]
pub struct Encoder {
    pub layers: Vec<EncoderLayer>,
}

impl Encoder {
    pub fn init(config: &EncoderConfig, device: &Device) -> Self {
        let d = config.hidden_size;
        let norm = || LayerNormConfig::new(d).with_epsilon(config.layer_norm_eps).init(device);
        let layers = (0..config.num_hidden_layers)
            .map(|_| EncoderLayer {
                layer_norm1: norm(),
                self_attn: Attention::init(d, config.num_attention_heads, true, device),
                layer_norm2: norm(),
                mlp: Mlp::init(d, config.intermediate_size, config.hidden_act, device),
            })
            .collect();
        Self { layers }
    }

    /// Loads `layers.{i}.{layer_norm1, self_attn.{q,k,v,out}_proj, layer_norm2, mlp}`.
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        for (i, layer) in self.layers.iter_mut().enumerate() {
            let vars = vars.pp("layers").pp(i);
            load_layer_norm(&mut layer.layer_norm1, vars.pp("layer_norm1"))?;
            layer.self_attn.load(&vars.pp("self_attn"), ["q_proj", "k_proj", "v_proj", "out_proj"])?;
            load_layer_norm(&mut layer.layer_norm2, vars.pp("layer_norm2"))?;
            layer.mlp.load(vars.pp("mlp"))?;
        }
        Ok(())
    }

    /// Loads OpenCLIP's `resblocks.{i}.{ln_1, attn, ln_2, mlp.c_fc, mlp.c_proj}`
    /// (`ResidualAttentionBlock` with `nn.MultiheadAttention`).
    pub fn load_open_clip(&mut self, vars: Vars) -> Result<(), WeightError> {
        for (i, layer) in self.layers.iter_mut().enumerate() {
            let vars = vars.pp("resblocks").pp(i);
            load_layer_norm(&mut layer.layer_norm1, vars.pp("ln_1"))?;
            layer.self_attn.load_fused(vars.pp("attn"))?;
            load_layer_norm(&mut layer.layer_norm2, vars.pp("ln_2"))?;
            load_linear(&mut layer.mlp.fc1, vars.pp("mlp").pp("c_fc"))?;
            load_linear(&mut layer.mlp.fc2, vars.pp("mlp").pp("c_proj"))?;
        }
        Ok(())
    }

    pub fn forward(&self, x: Tensor<3>, causal: bool) -> Tensor<3> {
        self.forward_layers(x, causal, self.layers.len())
    }

    /// The hidden state after the first `n` layers (transformers' `hidden_states[n]`; `n = 0`
    /// is the embeddings).
    pub fn forward_layers(&self, mut x: Tensor<3>, causal: bool, n: usize) -> Tensor<3> {
        for layer in &self.layers[..n] {
            x = x.clone() + layer.self_attn.forward(layer.layer_norm1.forward(x), causal);
            x = x.clone() + layer.mlp.forward(layer.layer_norm2.forward(x));
        }
        x
    }
}

/// `CLIPTextEmbeddings` / `SiglipTextEmbeddings`: token plus learned position embeddings.
#[derive(Module, Debug)]
pub struct TextEmbeddings {
    pub token_embedding: Embedding,
    pub position_embedding: Embedding,
}

impl TextEmbeddings {
    pub fn init(vocab_size: usize, max_positions: usize, hidden: usize, device: &Device) -> Self {
        Self {
            token_embedding: EmbeddingConfig::new(vocab_size, hidden).init(device),
            position_embedding: EmbeddingConfig::new(max_positions, hidden).init(device),
        }
    }

    /// Loads `token_embedding` and `position_embedding`.
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_embedding(&mut self.token_embedding, vars.pp("token_embedding"))?;
        load_embedding(&mut self.position_embedding, vars.pp("position_embedding"))
    }

    /// `[batch, len, hidden]` of `input_ids` `[batch, len]` at positions `0..len`.
    pub fn forward(&self, input_ids: Tensor<2, Int>) -> Tensor<3> {
        let len = input_ids.dims()[1];
        let positions = self.position_embedding.weight.val();
        let d = positions.dims()[1];
        self.token_embedding.forward(input_ids) + positions.slice([0..len, 0..d]).unsqueeze::<3>()
    }
}

/// Right-pads `ids` with `pad` to the longest row: the `[batch, len]` input of a text tower.
pub fn pad_ids(ids: &[Vec<u32>], pad: u32, device: &Device) -> Tensor<2, Int> {
    let len = ids.iter().map(Vec::len).max().unwrap_or(0);
    let flat: Vec<i64> = ids
        .iter()
        .flat_map(|row| row.iter().copied().chain(std::iter::repeat(pad)).take(len).map(i64::from))
        .collect();
    Tensor::from_data(TensorData::new(flat, [ids.len(), len]), device)
}
