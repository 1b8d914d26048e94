//! Transformer pieces shared by the CLIP and SigLIP towers (and the attention of DINOv2): the
//! pre-norm encoder layer `x + attn(ln1(x))`, `x + mlp(ln2(x))` with separate q/k/v/out
//! projections, exactly as in transformers' `CLIPEncoderLayer` / `SiglipEncoderLayer` — and the
//! padding of token ids for the text towers.

use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::activation::gelu;
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Bool, Device, FloatDType, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};

pub use super::activation::Activation;
#[cfg(feature = "flex-fused")]
use super::cpu;
use super::weights::{Vars, WeightError, load_embedding, load_layer_norm, load_linear, load_linear_rows};

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
        self.forward_queries(x.clone(), x, causal)
    }

    /// [`Self::forward`] for the queries of the tokens `queries` only, over the keys and values
    /// of every token of `kv`.
    pub fn forward_queries(&self, queries: Tensor<3>, kv: Tensor<3>, causal: bool) -> Tensor<3> {
        let q = linear(&self.q_proj, queries, None, None);
        self.attend(q, kv, causal)
    }

    /// Attention of the queries `q` (already projected) over the keys/values of `kv`.
    pub fn attend(&self, q: Tensor<3>, kv: Tensor<3>, causal: bool) -> Tensor<3> {
        self.attend_with(q, kv, AttendOptions { causal, ..AttendOptions::default() })
    }

    /// [`Attention::attend`] with a key padding mask and attention slicing ([`AttendOptions`]).
    pub fn attend_with(&self, q: Tensor<3>, kv: Tensor<3>, how: AttendOptions) -> Tensor<3> {
        self.attend_plus(q, kv, how, None)
    }

    /// [`Self::attend_with`] plus `residual` (added in the output projection's pass on the CPU).
    ///
    /// With the crate feature `flex-fused`, on the CPU backend (f32), the attention runs in
    /// place over the projections' outputs ([`super::cpu::attention`]), without the graph's
    /// head copies and score tensors (so `how.slice`, which only bounds the scores' memory,
    /// does not apply; `how.upcast` is a no-op in f32).
    fn attend_plus(
        &self,
        q: Tensor<3>,
        kv: Tensor<3>,
        how: AttendOptions,
        residual: Option<Tensor<3>>,
    ) -> Tensor<3> {
        #[cfg(feature = "flex-fused")]
        if cpu::fused(&q) {
            let k = linear(&self.k_proj, kv.clone(), None, None);
            let v = linear(&self.v_proj, kv, None, None);
            let padding = how.key_padding.map(|m| m.into_data().try_into_vec::<bool>().expect("a bool mask"));
            let scale = (self.head_dim(&q) as f64).powf(-0.5) as f32;
            let out = cpu::attention(q, k, v, self.num_heads, scale, how.causal, padding.as_deref());
            return linear(&self.out_proj, out, None, residual);
        }
        self.attend_graph(q, kv, how, residual)
    }

    fn head_dim(&self, q: &Tensor<3>) -> usize {
        q.dims()[2] / self.num_heads
    }

    /// [`Self::attend_plus`] as a tensor graph: every backend's path, and the CPU's reference.
    fn attend_graph(
        &self,
        q: Tensor<3>,
        kv: Tensor<3>,
        how: AttendOptions,
        residual: Option<Tensor<3>>,
    ) -> Tensor<3> {
        let [batch, n_q, hidden] = q.dims();
        let n_kv = kv.dims()[1];
        let head_dim = self.head_dim(&q);
        let heads = |t: Tensor<3>, n: usize| t.reshape([batch, n, self.num_heads, head_dim]).swap_dims(1, 2);
        let q = heads(q, n_q);
        let k = heads(linear(&self.k_proj, kv.clone(), None, None), n_kv);
        let v = heads(linear(&self.v_proj, kv, None, None), n_kv);
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
        linear(&self.out_proj, out.swap_dims(1, 2).reshape([batch, n_q, hidden]), None, residual)
    }
}

/// `residual + act(x W + b)` of a [`Linear`] (without `act` or `residual` where `None`), in that
/// order of operations, so the values are those of `linear.forward`, `act.forward` and `+`.
///
/// With the crate feature `flex-fused`, on the CPU backend (f32), the GEMM is one `gemm` call over
/// every row (`cpu::matmul_weight`: the backend's call, the weight packed once, no zero-filled
/// output) and the bias, the activation and the residual follow in one vectorised pass over the
/// output on every core ([`super::cpu`]; the backend would run each as its own pass, its GELUs
/// with a scalar `erff` or `tanhf` per value).
fn linear<const D: usize>(
    linear: &Linear,
    x: Tensor<D>,
    act: Option<Activation>,
    residual: Option<Tensor<D>>,
) -> Tensor<D> {
    #[cfg(feature = "flex-fused")]
    if let Some(bias) = &linear.bias
        && cpu::fused(&x)
    {
        let y = cpu::matmul_weight(x, linear.weight.val());
        return cpu::bias_act_residual(y, bias.val(), act, residual);
    }
    let y = linear.forward(x);
    let y = match act {
        Some(act) => act.forward(y),
        None => y,
    };
    match residual {
        Some(r) => r + y,
        None => y,
    }
}

/// diffusers' `GEGLU`: `[h, g] = proj(x)` split in halves on the last axis, `h · gelu(g)` (the
/// exact GELU).
///
/// With the crate feature `flex-fused`, on the CPU backend (f32), the GEMM runs as in [`linear`]
/// and the bias, the split, the GELU and the product follow in one vectorised pass on every core
/// (`cpu::bias_geglu`); values differ from the graph's by the GELU's few ulp (tested below).
pub fn geglu<const D: usize>(proj: &Linear, x: Tensor<D>) -> Tensor<D> {
    #[cfg(feature = "flex-fused")]
    if let Some(bias) = &proj.bias
        && cpu::fused(&x)
    {
        let y = cpu::matmul_weight(x, proj.weight.val());
        return cpu::bias_geglu(y, bias.val());
    }
    let mut halves = proj.forward(x).chunk(2, D - 1);
    let gate = halves.pop().expect("two halves");
    let hidden = halves.pop().expect("two halves");
    hidden * gelu(gate)
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
        self.forward_plus(x, None)
    }

    /// [`Self::forward`] plus `residual` (added in `fc2`'s pass on the CPU).
    fn forward_plus<const D: usize>(&self, x: Tensor<D>, residual: Option<Tensor<D>>) -> Tensor<D> {
        linear(&self.fc2, linear(&self.fc1, x, Some(self.act), None), None, residual)
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
    pub fn forward_layers(&self, x: Tensor<3>, causal: bool, n: usize) -> Tensor<3> {
        self.forward_range(x, causal, 0..n)
    }

    /// `x` through the layers `range` (a hidden state after `range.start` layers in, the one
    /// after `range.end` out).
    pub fn forward_range(&self, x: Tensor<3>, causal: bool, range: std::ops::Range<usize>) -> Tensor<3> {
        self.forward_range_with(x, &AttendOptions { causal, ..AttendOptions::default() }, range)
    }

    /// [`Self::forward_range`] attending as `how` says (a key padding mask as well, diffusers'
    /// `PriorTransformer`).
    pub fn forward_range_with(
        &self,
        mut x: Tensor<3>,
        how: &AttendOptions,
        range: std::ops::Range<usize>,
    ) -> Tensor<3> {
        for layer in &self.layers[range] {
            let h = layer.layer_norm1.forward(x.clone());
            let q = linear(&layer.self_attn.q_proj, h.clone(), None, None);
            x = layer.self_attn.attend_plus(q, h, how.clone(), Some(x));
            x = layer.mlp.forward_plus(layer.layer_norm2.forward(x.clone()), Some(x));
        }
        x
    }

    /// The hidden state of the one token `token` after every layer, `[batch, 1, hidden]`, of
    /// embeddings `x` `[batch, tokens, hidden]` attending without a mask: what
    /// [`Self::forward`] gives at that token, for a tower that pools one token (CLIP's and
    /// DINOv2's class token, SigLIP's last text token). The layers before the last run on every
    /// token; the last one needs every token's keys and values but only this token's query,
    /// attention output and MLP, so the rest of its work (about five sixths of a layer's
    /// products) is skipped. The values are those of the whole layer up to the rounding of
    /// products over fewer rows.
    pub fn forward_token(&self, x: Tensor<3>, token: usize) -> Tensor<3> {
        let Some((last, before)) = self.layers.split_last() else {
            let [batch, _, d] = x.dims();
            return x.slice([0..batch, token..token + 1, 0..d]);
        };
        let x = self.forward_range(x, false, 0..before.len());
        let [batch, _, d] = x.dims();
        let h = last.layer_norm1.forward(x.clone());
        let one = |t: Tensor<3>| t.slice([0..batch, token..token + 1, 0..d]);
        let q = linear(&last.self_attn.q_proj, one(h.clone()), None, None);
        let x = last.self_attn.attend_plus(q, h, AttendOptions::default(), Some(one(x)));
        last.mlp.forward_plus(last.layer_norm2.forward(x.clone()), Some(x))
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

/// [`Encoder::forward_token`] against the whole stack's output at that token.
#[cfg(test)]
mod token_tests {
    use super::*;
    use culturelens_rng::SplitMix64;

    #[test]
    fn one_token_through_the_last_layer_matches_the_whole_layer() {
        let device = Device::flex();
        let config = EncoderConfig {
            hidden_size: 32,
            intermediate_size: 64,
            num_hidden_layers: 3,
            num_attention_heads: 4,
            hidden_act: Activation::Gelu,
            layer_norm_eps: 1e-5,
        };
        let encoder = Encoder::init(&config, &device);
        let mut rng = SplitMix64::new(21);
        let data: Vec<f32> = (0..2 * 9 * 32).map(|_| rng.normal() as f32).collect();
        let x = Tensor::<3>::from_data(TensorData::new(data, [2, 9, 32]), &device);
        let values = |t: Tensor<3>| t.into_data().try_into_vec::<f32>().unwrap();
        let whole = values(encoder.forward(x.clone(), false));
        for token in [0, 4, 8] {
            let one = values(encoder.forward_token(x.clone(), token));
            assert_eq!(one.len(), 2 * 32);
            for (i, got) in one.iter().enumerate() {
                let want = whole[(i / 32 * 9 + token) * 32 + i % 32];
                assert!(
                    (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                    "token {token}, value {i}: {got} vs {want}"
                );
            }
        }
        // No layers: the token itself.
        let empty = Encoder { layers: Vec::new() };
        assert_eq!(values(empty.forward_token(x.clone(), 4)), values(x.slice([0..2, 4..5, 0..32])));
    }
}

/// The fused CPU passes give the backend's own values: the same bits without an activation,
/// within a few ulp with the quick-GELU (vectorised, `models/cpu.rs`), and with the GELUs
/// within a few ulp plus `ε |y|` (the backend's `½ y (1 + erf(y/√2))` and `½ y (1 + tanh(u))`
/// cancel in f32 for negative `y`, by up to `½ |y| ε`; the fused forms do not). Runs where the crate feature `flex-fused` is on, as in the
/// workspace's tests (the CLI turns it on).
#[cfg(all(test, feature = "flex-fused"))]
mod tests {
    use super::*;
    use culturelens_rng::SplitMix64;

    #[test]
    fn fused_linear_matches_the_backend_ops() {
        let device = Device::flex();
        let mut rng = SplitMix64::new(5);
        let mut random = |shape: [usize; 3]| {
            let data: Vec<f32> = (0..shape.iter().product()).map(|_| 3.0 * rng.normal() as f32).collect();
            Tensor::<3>::from_data(TensorData::new(data, shape), &device)
        };
        // 150 rows of width 40: three parallel tasks, the last one short.
        let (x, residual) = (random([3, 50, 24]), random([3, 50, 40]));
        let layer = LinearConfig::new(24, 40).init(&device);
        let values = |t: Tensor<3>| t.into_data().try_into_vec::<f32>().unwrap();
        let pre = values(layer.forward(x.clone()));
        for act in
            [None, Some(Activation::QuickGelu), Some(Activation::Gelu), Some(Activation::GeluPytorchTanh)]
        {
            for residual in [None, Some(residual.clone())] {
                let graph = {
                    let y = layer.forward(x.clone());
                    let y = act.map_or(y.clone(), |a| a.forward(y));
                    residual.clone().map_or(y.clone(), |r| r + y)
                };
                let fused = values(linear(&layer, x.clone(), act, residual.clone()));
                let r = residual.clone().map(values).unwrap_or(vec![0.0; fused.len()]);
                for (i, (f, g)) in fused.iter().zip(&values(graph)).enumerate() {
                    let ulps = if act.is_some() { 4.0 } else { 0.0 };
                    let gelu = matches!(act, Some(Activation::Gelu | Activation::GeluPytorchTanh));
                    let cancelled = if gelu { pre[i].abs() } else { 0.0 };
                    let bound = f32::EPSILON * (ulps * (g.abs() + r[i].abs()) + cancelled);
                    assert!(
                        (f - g).abs() <= bound,
                        "{act:?}, residual {}, value {i}: {f} vs {g}",
                        residual.is_some()
                    );
                }
            }
        }
    }

    /// The fused GEGLU against the graph's (bias, split, exact GELU, product), over more rows
    /// than one task takes: within the GELU's bound (3e-7 · max(1, |g|) of the exact function,
    /// times |h|) and the product's rounding.
    #[test]
    fn fused_geglu_matches_the_graph() {
        let device = Device::flex();
        let mut rng = SplitMix64::new(13);
        let data: Vec<f32> = (0..3 * 50 * 24).map(|_| 2.0 * rng.normal() as f32).collect();
        let x = Tensor::<3>::from_data(TensorData::new(data, [3, 50, 24]), &device);
        let proj = LinearConfig::new(24, 2 * 20).init(&device);
        let values = |t: Tensor<3>| t.into_data().try_into_vec::<f32>().unwrap();
        let y = values(proj.forward(x.clone()));
        let graph = {
            let mut halves = proj.forward(x.clone()).chunk(2, 2);
            let gate = halves.pop().unwrap();
            values(halves.pop().unwrap() * gelu(gate))
        };
        let fused = values(geglu(&proj, x));
        assert_eq!(fused.len(), 3 * 50 * 20);
        for (i, (f, g)) in fused.iter().zip(&graph).enumerate() {
            let (h, gate) = (y[i / 20 * 40 + i % 20], y[i / 20 * 40 + 20 + i % 20]);
            let bound = h.abs() * 4e-7 * gate.abs().max(1.0) + 2.0 * f32::EPSILON * g.abs();
            assert!((f - g).abs() <= bound, "value {i}: {f} vs {g}");
        }
    }

    /// The in-place CPU attention against the graph (head reshapes, Burn's `attention`), with
    /// heads 4 and 12 wide (dot products with Vᵀ) and 22, 32 and 40 wide (sums of value rows,
    /// in column blocks of 16, 8 and 1): self-attention over more queries than one task takes
    /// (the last group of queries partial), cross-attention with more keys than queries,
    /// causal, and key padding (a row with padded keys, and one without).
    #[test]
    fn cpu_attention_matches_the_graph() {
        let device = Device::flex();
        let mut rng = SplitMix64::new(9);
        for (hidden, heads) in [(32, 8), (48, 4), (44, 2), (64, 2), (80, 2)] {
            let mut random = |shape: [usize; 3]| {
                let data: Vec<f32> = (0..shape.iter().product()).map(|_| rng.normal() as f32).collect();
                Tensor::<3>::from_data(TensorData::new(data, shape), &device)
            };
            let attn = Attention::init(hidden, heads, true, &device);
            let (x, text) = (random([2, 70, hidden]), random([2, 77, hidden]));
            let padding = Tensor::<2, Bool>::from_data(
                TensorData::new((0..2 * 77).map(|i| i >= 77 + 60).collect::<Vec<bool>>(), [2, 77]),
                &device,
            );
            let cases = [
                ("self", x.clone(), AttendOptions::default()),
                ("cross", text.clone(), AttendOptions::default()),
                ("causal", x.clone(), AttendOptions { causal: true, ..AttendOptions::default() }),
                (
                    "padded",
                    text,
                    AttendOptions { key_padding: Some(padding), slice: Some(3), ..AttendOptions::default() },
                ),
            ];
            for (name, kv, how) in cases {
                let q = linear(&attn.q_proj, x.clone(), None, None);
                let fused = attn.attend_plus(q.clone(), kv.clone(), how.clone(), Some(x.clone()));
                let graph = attn.attend_graph(q, kv, how, Some(x.clone()));
                let values = |t: Tensor<3>| t.into_data().try_into_vec::<f32>().unwrap();
                let (fused, graph) = (values(fused), values(graph));
                let worst = fused.iter().zip(&graph).map(|(f, g)| (f - g).abs()).fold(0.0, f32::max);
                assert!(worst <= 2e-6, "{hidden}/{heads} {name}: max |fused - graph| = {worst:e}");
            }
        }
    }

    /// Every SIMD path the CPU can execute (`culturelens_simd::available`: scalar, AVX2,
    /// AVX-512) gives the fused passes the same bits: the linear epilogue with the vectorised
    /// quick-GELU and a residual, the group norm with its SiLU, the GEGLU, and the attention with narrow heads (dot products with Vᵀ),
    /// wide heads (sums of value rows), causal and padded keys.
    #[test]
    fn fused_passes_give_the_same_bits_on_every_simd_path() {
        let device = Device::flex();
        let mut rng = SplitMix64::new(11);
        let mut random = |shape: [usize; 3]| {
            let data: Vec<f32> = (0..shape.iter().product()).map(|_| 2.0 * rng.normal() as f32).collect();
            Tensor::<3>::from_data(TensorData::new(data, shape), &device)
        };
        let (x, residual, text) = (random([2, 70, 48]), random([2, 70, 64]), random([2, 77, 64]));
        let layer = LinearConfig::new(48, 64).init(&device);
        let padding = Tensor::<2, Bool>::from_data(
            TensorData::new((0..2 * 77).map(|i| i >= 77 + 60).collect::<Vec<bool>>(), [2, 77]),
            &device,
        );
        let values = |t: Tensor<3>| t.into_data().try_into_vec::<f32>().unwrap();
        // Heads 32 wide (sums of value rows) and 8 wide (dot products with Vᵀ); their random
        // weights are drawn once, outside the runs compared.
        let attentions = [2, 8].map(|heads| Attention::init(64, heads, true, &device));
        let norm = burn::nn::GroupNormConfig::new(8, 48).init(&device);
        let run = || {
            let mut out =
                vec![values(linear(&layer, x.clone(), Some(Activation::QuickGelu), Some(residual.clone())))];
            let planes = x.clone().swap_dims(1, 2);
            out.push(values(crate::norm::group_norm_act(&norm, planes, true)));
            out.push(values(geglu(&layer, x.clone())));
            let q = linear(&layer, x.clone(), None, None);
            for attn in &attentions {
                for how in [
                    AttendOptions::default(),
                    AttendOptions { causal: true, ..AttendOptions::default() },
                    AttendOptions { key_padding: Some(padding.clone()), ..AttendOptions::default() },
                ] {
                    let kv = if how.key_padding.is_some() { text.clone() } else { q.clone() };
                    out.push(values(attn.attend_plus(q.clone(), kv, how, None)));
                }
            }
            out
        };
        let levels = culturelens_simd::available();
        let mut first: Option<Vec<Vec<f32>>> = None;
        for &level in &levels {
            culturelens_simd::force(Some(level)).unwrap();
            let got = run();
            culturelens_simd::force(None).unwrap();
            let bits = |v: &[Vec<f32>]| v.iter().flatten().map(|x| x.to_bits()).collect::<Vec<_>>();
            match &first {
                None => first = Some(got),
                Some(want) => assert_eq!(bits(&got), bits(want), "{level:?} differs from scalar"),
            }
        }
        println!("fused passes: {levels:?} give the same bits");
    }
}
