//! Transformer pieces shared by the CLIP and SigLIP towers (and the attention of DINOv2): the
//! pre-norm encoder layer `x + attn(ln1(x))`, `x + mlp(ln2(x))` with separate q/k/v/out
//! projections, exactly as in transformers' `CLIPEncoderLayer` / `SiglipEncoderLayer`.

use burn::module::Module;
use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::activation::{gelu, gelu_approximate, sigmoid};
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Device, Tensor};
use serde::Deserialize;

use super::weights::{Checkpoint, WeightError, load_layer_norm, load_linear, load_linear_rows};

/// The `hidden_act` of a transformers config.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
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

    /// Loads the projections named `q`, `k`, `v`, `out` under `prefix`.
    pub fn load(&mut self, ck: &Checkpoint, prefix: &str, names: [&str; 4]) -> Result<(), WeightError> {
        load_linear(&mut self.q_proj, ck, &format!("{prefix}.{}", names[0]))?;
        load_linear(&mut self.k_proj, ck, &format!("{prefix}.{}", names[1]))?;
        load_linear(&mut self.v_proj, ck, &format!("{prefix}.{}", names[2]))?;
        load_linear(&mut self.out_proj, ck, &format!("{prefix}.{}", names[3]))
    }

    /// Loads an `nn.MultiheadAttention` stored under `prefix`: q, k and v stacked in
    /// `in_proj_weight` / `in_proj_bias`, and `out_proj`.
    pub fn load_fused(&mut self, ck: &Checkpoint, prefix: &str) -> Result<(), WeightError> {
        let (w, b) = (format!("{prefix}.in_proj_weight"), format!("{prefix}.in_proj_bias"));
        for (part, proj) in [&mut self.q_proj, &mut self.k_proj, &mut self.v_proj].into_iter().enumerate() {
            load_linear_rows(proj, ck, &w, &b, part, 3)?;
        }
        load_linear(&mut self.out_proj, ck, &format!("{prefix}.out_proj"))
    }

    /// `softmax(q kᵀ / √d_head) v` over `[batch, tokens, hidden]`; `causal` masks future tokens.
    pub fn forward(&self, x: Tensor<3>, causal: bool) -> Tensor<3> {
        let q = self.q_proj.forward(x.clone());
        self.attend(q, x, causal)
    }

    /// Attention of the queries `q` (already projected) over the keys/values of `kv`.
    pub fn attend(&self, q: Tensor<3>, kv: Tensor<3>, causal: bool) -> Tensor<3> {
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
            is_causal: causal,
        };
        let out = attention(q, k, v, None, None, options);
        self.out_proj.forward(out.swap_dims(1, 2).reshape([batch, n_q, hidden]))
    }
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

    pub fn load(&mut self, ck: &Checkpoint, prefix: &str) -> Result<(), WeightError> {
        load_linear(&mut self.fc1, ck, &format!("{prefix}.fc1"))?;
        load_linear(&mut self.fc2, ck, &format!("{prefix}.fc2"))
    }

    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        self.fc2.forward(self.act.forward(self.fc1.forward(x)))
    }
}

/// Shape of a CLIP/SigLIP transformer stack, read from the tower's config.
#[derive(Clone, Copy, Debug)]
pub struct EncoderShape {
    pub hidden: usize,
    pub intermediate: usize,
    pub layers: usize,
    pub heads: usize,
    pub layer_norm_eps: f64,
    pub act: Activation,
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
    pub fn init(shape: &EncoderShape, device: &Device) -> Self {
        let norm = || LayerNormConfig::new(shape.hidden).with_epsilon(shape.layer_norm_eps).init(device);
        let layers = (0..shape.layers)
            .map(|_| EncoderLayer {
                layer_norm1: norm(),
                self_attn: Attention::init(shape.hidden, shape.heads, true, device),
                layer_norm2: norm(),
                mlp: Mlp::init(shape.hidden, shape.intermediate, shape.act, device),
            })
            .collect();
        Self { layers }
    }

    /// Loads `{prefix}.layers.{i}.{layer_norm1, self_attn.{q,k,v,out}_proj, layer_norm2, mlp}`.
    pub fn load(&mut self, ck: &Checkpoint, prefix: &str) -> Result<(), WeightError> {
        for (i, layer) in self.layers.iter_mut().enumerate() {
            let p = format!("{prefix}.layers.{i}");
            load_layer_norm(&mut layer.layer_norm1, ck, &format!("{p}.layer_norm1"))?;
            layer.self_attn.load(
                ck,
                &format!("{p}.self_attn"),
                ["q_proj", "k_proj", "v_proj", "out_proj"],
            )?;
            load_layer_norm(&mut layer.layer_norm2, ck, &format!("{p}.layer_norm2"))?;
            layer.mlp.load(ck, &format!("{p}.mlp"))?;
        }
        Ok(())
    }

    /// Loads OpenCLIP's `{prefix}.resblocks.{i}.{ln_1, attn, ln_2, mlp.c_fc, mlp.c_proj}`
    /// (`ResidualAttentionBlock` with `nn.MultiheadAttention`).
    pub fn load_open_clip(&mut self, ck: &Checkpoint, prefix: &str) -> Result<(), WeightError> {
        for (i, layer) in self.layers.iter_mut().enumerate() {
            let p = format!("{prefix}.resblocks.{i}");
            load_layer_norm(&mut layer.layer_norm1, ck, &format!("{p}.ln_1"))?;
            layer.self_attn.load_fused(ck, &format!("{p}.attn"))?;
            load_layer_norm(&mut layer.layer_norm2, ck, &format!("{p}.ln_2"))?;
            load_linear(&mut layer.mlp.fc1, ck, &format!("{p}.mlp.c_fc"))?;
            load_linear(&mut layer.mlp.fc2, ck, &format!("{p}.mlp.c_proj"))?;
        }
        Ok(())
    }

    pub fn forward(&self, mut x: Tensor<3>, causal: bool) -> Tensor<3> {
        for layer in &self.layers {
            x = x.clone() + layer.self_attn.forward(layer.layer_norm1.forward(x), causal);
            x = x.clone() + layer.mlp.forward(layer.layer_norm2.forward(x));
        }
        x
    }
}
