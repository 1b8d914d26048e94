//! DINOv2 (Oquab et al., 2024), with and without register tokens (Darcet et al., 2024), in the
//! transformers layout (`Dinov2Model`, `Dinov2WithRegistersModel`). The embedding is
//! `pooler_output`: the layer-normed class token. Position embeddings are trained for
//! `image_size` (518 → 37 × 37 patches) and bicubically resized to the input's patch grid, with
//! torch's `interpolate` weights (antialiased for the register models, as in transformers).
//!
//! Checkpoints name the attention and SwiGLU weights in two ways (the hub's
//! `attention.attention.query` / `mlp.weights_in` and transformers 5's `attention.q_proj` /
//! `mlp.gate_proj`); both are read.

use burn::module::{Module, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Initializer, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::activation::silu;
use burn::tensor::{Device, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::config;
use super::resample::{torch_bicubic_aa_matrix, torch_bicubic_matrix};
use super::vit::{Activation, Attention, Mlp};
use super::weights::{Vars, WeightError, load_conv2d, load_layer_norm, load_linear, load_linear_rows};

/// `config.json` of a `Dinov2Model` or `Dinov2WithRegistersModel`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Dinov2Config {
    pub model_type: String,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub mlp_ratio: f64,
    pub hidden_act: Activation,
    pub layer_norm_eps: f64,
    pub image_size: usize,
    pub patch_size: usize,
    pub num_channels: usize,
    pub qkv_bias: bool,
    pub use_swiglu_ffn: bool,
    pub num_register_tokens: usize,
}

/// `Dinov2SwiGLUFFN`: `down(silu(gate(x)) · up(x))`.
#[derive(Module, Debug)]
pub struct SwiGlu {
    pub gate_proj: Linear,
    pub up_proj: Linear,
    pub down_proj: Linear,
}

/// The feed-forward block of a layer.
#[derive(Module, Debug)]
pub enum Ffn {
    Mlp(Mlp),
    SwiGlu(SwiGlu),
}

/// `Dinov2Layer`: pre-norm attention and MLP, each scaled by a learned `lambda1`.
#[derive(Module, Debug)]
pub struct Dinov2Layer {
    pub norm1: LayerNorm,
    pub attention: Attention,
    pub layer_scale1: Param<Tensor<1>>,
    pub norm2: LayerNorm,
    pub mlp: Ffn,
    pub layer_scale2: Param<Tensor<1>>,
}

impl Dinov2Layer {
    /// Loads `norm1`, `attention`, `layer_scale1.lambda1`, `norm2`, `mlp`,
    /// `layer_scale2.lambda1`.
    fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        load_layer_norm(&mut self.norm1, vars.pp("norm1"))?;
        let attention = vars.pp("attention");
        if attention.contains("attention.query.weight") {
            // The hub's `Dinov2SelfAttention` / `Dinov2SelfOutput` names.
            let a = &mut self.attention;
            load_linear(&mut a.q_proj, attention.pp("attention").pp("query"))?;
            load_linear(&mut a.k_proj, attention.pp("attention").pp("key"))?;
            load_linear(&mut a.v_proj, attention.pp("attention").pp("value"))?;
            load_linear(&mut a.out_proj, attention.pp("output").pp("dense"))?;
        } else {
            self.attention.load(&attention, ["q_proj", "k_proj", "v_proj", "o_proj"])?;
        }
        self.layer_scale1 = vars.pp("layer_scale1").param("lambda1", &self.layer_scale1)?;
        load_layer_norm(&mut self.norm2, vars.pp("norm2"))?;
        let mlp = vars.pp("mlp");
        match &mut self.mlp {
            Ffn::Mlp(m) => m.load(mlp)?,
            // The hub's fused `weights_in` (gate and up stacked) and `weights_out`.
            Ffn::SwiGlu(f) if mlp.contains("weights_in.weight") => {
                let weights_in = mlp.pp("weights_in");
                load_linear_rows(&mut f.gate_proj, &weights_in, ["weight", "bias"], 0, 2)?;
                load_linear_rows(&mut f.up_proj, &weights_in, ["weight", "bias"], 1, 2)?;
                load_linear(&mut f.down_proj, mlp.pp("weights_out"))?;
            }
            Ffn::SwiGlu(f) => {
                load_linear(&mut f.gate_proj, mlp.pp("gate_proj"))?;
                load_linear(&mut f.up_proj, mlp.pp("up_proj"))?;
                load_linear(&mut f.down_proj, mlp.pp("down_proj"))?;
            }
        }
        self.layer_scale2 = vars.pp("layer_scale2").param("lambda1", &self.layer_scale2)?;
        Ok(())
    }
}

/// `Dinov2Model` / `Dinov2WithRegistersModel`.
#[derive(Module, Debug)]
pub struct Dinov2 {
    pub cls_token: Param<Tensor<3>>,
    pub register_tokens: Option<Param<Tensor<3>>>,
    pub position_embeddings: Param<Tensor<3>>,
    pub patch_embeddings: Conv2d,
    pub layers: Vec<Dinov2Layer>,
    pub layernorm: LayerNorm,
    #[module(skip)]
    pub config: Dinov2Config,
}

impl Dinov2Config {
    /// `facebook/dinov2-base`, whose values are transformers' `Dinov2Config` defaults (no
    /// registers): the values of every key a `config.json` leaves out.
    pub fn dinov2_base() -> Self {
        Self {
            model_type: "dinov2".into(),
            hidden_size: 768,
            num_hidden_layers: 12,
            num_attention_heads: 12,
            mlp_ratio: 4.0,
            hidden_act: Activation::Gelu,
            layer_norm_eps: 1e-6,
            image_size: 224,
            patch_size: 14,
            num_channels: 3,
            qkv_bias: true,
            use_swiglu_ffn: false,
            num_register_tokens: 0,
        }
    }

    /// Reads `config.json` over [`Self::dinov2_base`] (`null` is "not set").
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        let c: Self = config::from_json(json, &Self::dinov2_base(), &[])?;
        config::check_layers("num_hidden_layers", c.num_hidden_layers)?;
        config::check_tower("", c.hidden_size, c.num_attention_heads, Some((c.image_size, c.patch_size)))?;
        Ok(c)
    }

    /// Whether position embeddings are resized with `antialias=True` (the register models).
    pub fn antialias(&self) -> bool {
        self.model_type == "dinov2_with_registers"
    }

    /// Patches per side the position embeddings were trained for.
    pub fn grid(&self) -> usize {
        self.image_size / self.patch_size
    }

    /// `int(hidden_size * mlp_ratio)`, and for SwiGLU the 2/3 rounded up to a multiple of 8.
    pub fn ffn_hidden(&self) -> usize {
        let hidden = (self.hidden_size as f64 * self.mlp_ratio) as usize;
        if self.use_swiglu_ffn { (hidden * 2 / 3).div_ceil(8) * 8 } else { hidden }
    }

    pub fn init(&self, device: &Device) -> Dinov2 {
        let d = self.hidden_size;
        let norm = || LayerNormConfig::new(d).with_epsilon(self.layer_norm_eps).init(device);
        let ffn = self.ffn_hidden();
        let layers = (0..self.num_hidden_layers)
            .map(|_| Dinov2Layer {
                norm1: norm(),
                attention: Attention::init(d, self.num_attention_heads, self.qkv_bias, device),
                layer_scale1: Initializer::Ones.init([d], device),
                norm2: norm(),
                mlp: if self.use_swiglu_ffn {
                    Ffn::SwiGlu(SwiGlu {
                        gate_proj: LinearConfig::new(d, ffn).init(device),
                        up_proj: LinearConfig::new(d, ffn).init(device),
                        down_proj: LinearConfig::new(ffn, d).init(device),
                    })
                } else {
                    Ffn::Mlp(Mlp::init(d, ffn, self.hidden_act, device))
                },
                layer_scale2: Initializer::Ones.init([d], device),
            })
            .collect();
        Dinov2 {
            cls_token: Initializer::Zeros.init([1, 1, d], device),
            register_tokens: (self.num_register_tokens > 0)
                .then(|| Initializer::Zeros.init([1, self.num_register_tokens, d], device)),
            position_embeddings: Initializer::Zeros.init([1, self.grid().pow(2) + 1, d], device),
            patch_embeddings: Conv2dConfig::new([self.num_channels, d], [self.patch_size; 2])
                .with_stride([self.patch_size; 2])
                .init(device),
            layers,
            layernorm: norm(),
            config: self.clone(),
        }
    }
}

impl Dinov2 {
    /// Loads a transformers DINOv2 checkpoint (either naming): `embeddings.*`,
    /// `encoder.layer.{i}.*`, `layernorm`.
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        let embeddings = vars.pp("embeddings");
        self.cls_token = embeddings.param("cls_token", &self.cls_token)?;
        if let Some(registers) = &self.register_tokens {
            self.register_tokens = Some(embeddings.param("register_tokens", registers)?);
        }
        self.position_embeddings = embeddings.param("position_embeddings", &self.position_embeddings)?;
        load_conv2d(&mut self.patch_embeddings, embeddings.pp("patch_embeddings").pp("projection"))?;
        for (i, layer) in self.layers.iter_mut().enumerate() {
            layer.load(vars.pp("encoder").pp("layer").pp(i))?;
        }
        load_layer_norm(&mut self.layernorm, vars.pp("layernorm"))
    }

    /// Position embeddings `[1 + h·w, hidden]` for an `h × w` patch grid: the class position
    /// unchanged, the patch positions resized by separable bicubic weights (`Wh ⊗ Ww`).
    fn positions(&self, h: usize, w: usize) -> Tensor<2> {
        let pos = self.position_embeddings.val();
        let [_, n, d] = pos.dims();
        let pos = pos.reshape([n, d]);
        let s = self.config.grid();
        if h == s && w == s {
            return pos;
        }
        let matrix = |out| {
            if self.config.antialias() {
                torch_bicubic_aa_matrix(s, out)
            } else {
                torch_bicubic_matrix(s, out)
            }
        };
        let (mh, mw) = (matrix(h), matrix(w));
        let mut kron = Vec::with_capacity(h * w * s * s);
        for y in 0..h {
            for x in 0..w {
                for i in 0..s {
                    kron.extend((0..s).map(|j| (mh[y * s + i] * mw[x * s + j]) as f32));
                }
            }
        }
        let kron = Tensor::<2>::from_data(TensorData::new(kron, [h * w, s * s]), &pos.device());
        let class = pos.clone().slice([0..1, 0..d]);
        Tensor::cat(vec![class, kron.matmul(pos.slice([1..n, 0..d]))], 0)
    }

    /// `pooler_output` `[batch, hidden]` of `pixel_values` `[batch, 3, H, W]`.
    pub fn pooled(&self, pixel_values: Tensor<4>) -> Tensor<2> {
        let [batch, _, height, width] = pixel_values.dims();
        let p = self.config.patch_size;
        let patches = self.patch_embeddings.forward(pixel_values).flatten::<3>(2, 3).swap_dims(1, 2);
        let d = patches.dims()[2];
        let cls = self.cls_token.val().expand([batch, 1, d]);
        let x = Tensor::cat(vec![cls, patches], 1) + self.positions(height / p, width / p).unsqueeze::<3>();
        let mut x = match &self.register_tokens {
            Some(reg) => {
                let n = x.dims()[1];
                let r = reg.val().dims()[1];
                let head = x.clone().slice([0..batch, 0..1, 0..d]);
                let tail = x.slice([0..batch, 1..n, 0..d]);
                Tensor::cat(vec![head, reg.val().expand([batch, r, d]), tail], 1)
            }
            None => x,
        };
        // The pooled output is the class token's, so the last layer runs for it alone
        // (`Dinov2Layer::forward`).
        let last = self.layers.len().saturating_sub(1);
        for (i, layer) in self.layers.iter().enumerate() {
            x = layer.forward(x, i == last);
        }
        let x = self.layernorm.forward(x.slice([0..batch, 0..1, 0..d]));
        x.reshape([batch, d])
    }
}

impl Dinov2Layer {
    /// `x` `[batch, tokens, hidden]` through the layer; with `class_only`, the class token's
    /// output alone, `[batch, 1, hidden]` (every token's keys and values, that token's query,
    /// attention output and feed-forward: the rest of the layer is skipped).
    fn forward(&self, x: Tensor<3>, class_only: bool) -> Tensor<3> {
        let h = self.norm1.forward(x.clone());
        let [batch, _, d] = x.dims();
        let class = |t: Tensor<3>| t.slice([0..batch, 0..1, 0..d]);
        let (x, queries) = match class_only {
            true => (class(x), class(h.clone())),
            false => (x, h.clone()),
        };
        let attn = self.attention.forward_queries(queries, h, false);
        let x = x + attn * self.layer_scale1.val().unsqueeze::<3>();
        let h = self.norm2.forward(x.clone());
        let ffn = match &self.mlp {
            Ffn::Mlp(mlp) => mlp.forward(h),
            Ffn::SwiGlu(f) => {
                f.down_proj.forward(silu(f.gate_proj.forward(h.clone())) * f.up_proj.forward(h))
            }
        };
        x + ffn * self.layer_scale2.val().unsqueeze::<3>()
    }
}
