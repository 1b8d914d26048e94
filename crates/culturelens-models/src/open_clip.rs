//! OpenCLIP checkpoints (`open_clip_config.json` + `open_clip_model.safetensors`, the layout of
//! the LAION repositories on the Hugging Face hub, e.g. ViT-bigG-14 and ViT-H-14) mapped onto
//! the [`Clip`] modules by an explicit key table.
//!
//! OpenCLIP's `CLIP` is the same network as transformers' `CLIPModel`; only the names and two
//! layouts differ:
//!
//! | OpenCLIP | transformers / [`Clip`] |
//! |---|---|
//! | `visual.conv1` | `vision_model.embeddings.patch_embedding` |
//! | `visual.class_embedding`, `visual.positional_embedding` | `…class_embedding`, `…position_embedding.weight` |
//! | `visual.ln_pre`, `visual.ln_post` | `vision_model.pre_layrnorm`, `vision_model.post_layernorm` |
//! | `*.transformer.resblocks.{i}.ln_1`, `ln_2` | `*.encoder.layers.{i}.layer_norm1`, `layer_norm2` |
//! | `*.resblocks.{i}.attn.in_proj_weight` (q, k, v stacked) | `self_attn.{q,k,v}_proj` |
//! | `*.resblocks.{i}.attn.out_proj`, `mlp.c_fc`, `mlp.c_proj` | `self_attn.out_proj`, `mlp.fc1`, `mlp.fc2` |
//! | `visual.proj` `[width, embed]`, used as `x @ proj` | `visual_projection.weight` `[embed, width]` |
//! | `token_embedding`, `positional_embedding`, `ln_final` | `text_model.embeddings.*`, `final_layer_norm` |
//! | `text_projection` `[width, embed]` | `text_projection.weight` `[embed, width]` |
//! | `logit_scale` | `logit_scale` |
//!
//! With `custom_text: true` the text tower's keys sit under `text.`. The architecture comes from
//! `model_cfg`: vision heads are `width / head_width`, MLP widths `int(width * mlp_ratio)` (as
//! OpenCLIP computes them, so bigG's `mlp_ratio` 4.9231 gives 8192), the activation is exact
//! GELU unless `quick_gelu`, LayerNorm ε is PyTorch's 1e-5, and the text embedding is taken at
//! the highest token id (`pool_type: "argmax"`, the end-of-text token). Options that change the
//! network beyond this (timm or Hugging Face towers, attentional pooling, layer scale, custom
//! attention blocks) are refused with the option's name rather than loaded wrongly.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::clip::{Clip, ClipConfig, ClipTextConfig, ClipVisionConfig};
use super::config::{self, without_nulls};
use super::preprocess::{Alpha, CropOffset, ImageProcessor, Resize};
use super::resample::PilFilter;
use super::vit::{Activation, EncoderConfig};
use super::weights::{Vars, WeightError, load_conv2d, load_embedding, load_layer_norm};
use super::{ModelError, Towers};

/// `open_clip_config.json`: `{"model_cfg": {...}, "preprocess_cfg": {...}}` (what
/// `open_clip.push_to_hf_hub` writes). A bare model config (the files of
/// `open_clip/model_configs/`) is accepted as `model_cfg` with default preprocessing.
///
/// A folder made by `import-weights` from an HPS v2 checkpoint also carries `"hps_version"`
/// (`"v2.0"` or `"v2.1"`, culturelens' key) and `preprocess_cfg.resize_mode` =
/// [`HPSV2_RESIZE_MODE`], the `hpsv2` package's own evaluation transform
/// ([`Resize::LongestPadFloat`]).
#[derive(Clone, Debug)]
pub struct OpenClipFile {
    pub model_cfg: OpenClipConfig,
    pub preprocess_cfg: OpenClipPreprocess,
    pub hps_version: Option<String>,
}

/// `preprocess_cfg.resize_mode` of hpsv2's evaluation transform (see [`Resize::LongestPadFloat`]).
pub const HPSV2_RESIZE_MODE: &str = "hpsv2_longest_pad";

/// `model_cfg` of an OpenCLIP `CLIP` with a ViT image tower and the built-in text tower.
#[derive(Clone, Debug, Deserialize)]
pub struct OpenClipConfig {
    pub embed_dim: usize,
    #[serde(default)]
    pub quick_gelu: bool,
    #[serde(default)]
    pub custom_text: bool,
    pub vision_cfg: Value,
    pub text_cfg: Value,
}

/// `preprocess_cfg`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OpenClipPreprocess {
    pub mean: [f32; 3],
    pub std: [f32; 3],
    pub interpolation: String,
    pub resize_mode: String,
}

impl Default for OpenClipPreprocess {
    /// OpenCLIP's defaults: OpenAI's mean and std, bicubic, `resize_mode: "shortest"`.
    fn default() -> Self {
        Self {
            mean: [0.481_454_66, 0.457_827_5, 0.408_210_73],
            std: [0.268_629_54, 0.261_302_6, 0.275_777_1],
            interpolation: "bicubic".into(),
            resize_mode: "shortest".into(),
        }
    }
}

impl OpenClipPreprocess {
    /// OpenCLIP's evaluation transform (`image_transform(is_train=False)`) for a square input
    /// of `image_size`: `Resize(image_size)` of the shorter side (or to a square for
    /// `resize_mode: "squash"`) with Pillow's filter, `CenterCrop`, `convert("RGB")` (alpha
    /// dropped), `ToTensor`, `Normalize(mean, std)`.
    pub fn processor(&self, image_size: u32) -> Result<ImageProcessor, ModelError> {
        let filter = match self.interpolation.as_str() {
            "bicubic" => PilFilter::Bicubic,
            "bilinear" => PilFilter::Bilinear,
            other => {
                return Err(ModelError::Unsupported(format!(
                    "open_clip_config.json: preprocess_cfg.interpolation = {other:?} (bicubic or bilinear)"
                )));
            }
        };
        let resize = match self.resize_mode.as_str() {
            "shortest" => Resize::ShortestEdge(image_size),
            "squash" => Resize::Exact { height: image_size, width: image_size },
            // HPS v2's own transform (culturelens' name; `import-weights --arch hps-v2*`).
            HPSV2_RESIZE_MODE => Resize::LongestPadFloat(image_size),
            other => {
                return Err(ModelError::Unsupported(format!(
                    "open_clip_config.json: preprocess_cfg.resize_mode = {other:?} (shortest, squash or {HPSV2_RESIZE_MODE})"
                )));
            }
        };
        let crop =
            if matches!(resize, Resize::LongestPadFloat(_)) { None } else { Some((image_size, image_size)) };
        Ok(ImageProcessor {
            convert_rgb: true,
            alpha: Alpha::Drop,
            crop_offset: CropOffset::RoundHalfEven,
            resize: Some((resize, filter)),
            crop,
            rescale: Some(1.0 / 255.0),
            normalize: Some((self.mean, self.std)),
        })
    }
}

/// The fields of `vision_cfg` this loader maps.
#[derive(Serialize, Deserialize)]
struct VisionCfg {
    /// A number for a ViT, a list of stage depths for a ResNet.
    layers: Value,
    width: usize,
    head_width: usize,
    mlp_ratio: f64,
    patch_size: usize,
    /// A number or a `[height, width]` pair.
    image_size: Value,
}

impl Default for VisionCfg {
    /// OpenCLIP's `CLIPVisionCfg` defaults.
    fn default() -> Self {
        Self {
            layers: Value::from(12),
            width: 768,
            head_width: 64,
            mlp_ratio: 4.0,
            patch_size: 16,
            image_size: Value::from(224),
        }
    }
}

/// The fields of `text_cfg` this loader maps.
#[derive(Serialize, Deserialize)]
struct TextCfg {
    context_length: usize,
    vocab_size: usize,
    width: usize,
    heads: usize,
    layers: usize,
    mlp_ratio: f64,
    pad_id: u32,
}

impl Default for TextCfg {
    /// OpenCLIP's `CLIPTextCfg` defaults.
    fn default() -> Self {
        Self {
            context_length: 77,
            vocab_size: 49408,
            width: 512,
            heads: 8,
            layers: 12,
            mlp_ratio: 4.0,
            pad_id: 0,
        }
    }
}

/// Options of `vision_cfg` / `text_cfg` that must keep their default for this key table to be
/// the whole network: (name, default). `null` defaults mean "absent or null".
const VISION_DEFAULTS: &[(&str, &str)] = &[
    ("timm_model_name", "null"),
    ("attentional_pool", "false"),
    ("no_ln_pre", "false"),
    ("pos_embed_type", "\"learnable\""),
    ("pool_type", "\"tok\""),
    ("input_patchnorm", "false"),
];
const TEXT_DEFAULTS: &[(&str, &str)] = &[
    ("hf_model_name", "null"),
    ("embed_cls", "false"),
    ("no_causal_mask", "false"),
    ("pool_type", "\"argmax\""),
    ("proj_bias", "false"),
    ("proj_type", "\"linear\""),
];
/// Options of the residual blocks, shared by both towers.
const BLOCK_DEFAULTS: &[(&str, &str)] = &[
    ("ls_init_value", "null"),
    ("act_kwargs", "null"),
    ("norm_kwargs", "null"),
    ("qk_norm", "false"),
    ("scaled_cosine_attn", "false"),
    ("scale_heads", "false"),
    ("scale_attn_inner", "false"),
    ("scale_attn", "false"),
    ("scale_fc", "false"),
];

fn check_defaults(cfg: &Value, tower: &str, defaults: &[(&str, &str)]) -> Result<(), ModelError> {
    for (name, default) in defaults {
        let default: Value = serde_json::from_str(default).expect("valid JSON default");
        if let Some(v) = cfg.get(name)
            && !v.is_null()
            && *v != default
        {
            return Err(ModelError::Unsupported(format!(
                "open_clip_config.json: {tower}.{name} = {v} is not supported (only {default})"
            )));
        }
    }
    Ok(())
}

/// `int(width * mlp_ratio)`, as OpenCLIP sizes its MLPs.
fn mlp_width(width: usize, mlp_ratio: f64) -> usize {
    (width as f64 * mlp_ratio) as usize
}

impl OpenClipFile {
    /// Reads the file; `null` anywhere is "not set", as in OpenCLIP's dataclass configs.
    pub fn from_json(json: &str) -> Result<Self, ModelError> {
        let value = without_nulls(serde_json::from_str(json)?);
        let hps_version = value.get("hps_version").and_then(Value::as_str).map(str::to_owned);
        let (model, preprocess) = match value.get("model_cfg") {
            Some(model) => (model.clone(), value.get("preprocess_cfg").cloned()),
            None => (value, None),
        };
        let model_cfg: OpenClipConfig = serde_json::from_value(model)?;
        let preprocess_cfg = match preprocess {
            Some(p) => config::from_value(p, &OpenClipPreprocess::default(), &[])?,
            None => OpenClipPreprocess::default(),
        };
        Ok(Self { model_cfg, preprocess_cfg, hps_version })
    }
}

impl OpenClipConfig {
    /// The transformers-style config of the same network.
    pub fn clip_config(&self) -> Result<ClipConfig, ModelError> {
        for (cfg, tower, defaults) in
            [(&self.vision_cfg, "vision_cfg", VISION_DEFAULTS), (&self.text_cfg, "text_cfg", TEXT_DEFAULTS)]
        {
            check_defaults(cfg, tower, defaults)?;
            check_defaults(cfg, tower, BLOCK_DEFAULTS)?;
        }
        let vision: VisionCfg = config::from_value(self.vision_cfg.clone(), &VisionCfg::default(), &[])?;
        let text: TextCfg = config::from_value(self.text_cfg.clone(), &TextCfg::default(), &[])?;
        let layers = vision.layers.as_u64().ok_or_else(|| {
            ModelError::Unsupported(format!(
                "open_clip_config.json: vision_cfg.layers = {} describes a ResNet image tower; only ViT towers are supported",
                vision.layers
            ))
        })? as usize;
        config::check_layers("layers", layers.saturating_add(text.layers))?;
        config::check_tower("text_cfg.", text.width, text.heads, None)?;
        let image_size = match &vision.image_size {
            Value::Number(n) => n.as_u64().map(|n| n as usize),
            Value::Array(a) if a.len() == 2 && a[0] == a[1] => a[0].as_u64().map(|n| n as usize),
            _ => None,
        }
        .ok_or_else(|| {
            ModelError::Unsupported(format!(
                "open_clip_config.json: vision_cfg.image_size = {} (only square sizes)",
                vision.image_size
            ))
        })?;
        if vision.head_width == 0 || !vision.width.is_multiple_of(vision.head_width) {
            return Err(ModelError::Unsupported(format!(
                "open_clip_config.json: vision_cfg.width {} is not a multiple of head_width {}",
                vision.width, vision.head_width
            )));
        }
        let act = if self.quick_gelu { Activation::QuickGelu } else { Activation::Gelu };
        let encoder = |width: usize, mlp_ratio: f64, layers: usize, heads: usize| EncoderConfig {
            hidden_size: width,
            intermediate_size: mlp_width(width, mlp_ratio),
            num_hidden_layers: layers,
            num_attention_heads: heads,
            hidden_act: act,
            layer_norm_eps: 1e-5,
        };
        Ok(ClipConfig {
            projection_dim: self.embed_dim,
            vision_config: ClipVisionConfig {
                encoder: encoder(vision.width, vision.mlp_ratio, layers, vision.width / vision.head_width),
                num_channels: 3,
                image_size,
                patch_size: vision.patch_size,
            },
            text_config: ClipTextConfig {
                vocab_size: text.vocab_size,
                encoder: encoder(text.width, text.mlp_ratio, text.layers, text.heads),
                max_position_embeddings: text.context_length,
                // `eos_token_id == 2` selects the highest-id pooling (`pool_type: "argmax"`).
                eos_token_id: 2,
                pad_token_id: Some(text.pad_id),
            },
        })
    }
}

/// Loads an OpenCLIP state dict into `clip` (built from [`OpenClipConfig::clip_config`]).
/// `visual.proj` and `text_projection` are `[d_in, d_out]` matrices applied as `x @ proj`:
/// already Burn's `Linear` layout, so they are not transposed.
///
/// Only the towers `towers` are read (both for [`Towers::Both`]).
pub fn load(clip: &mut Clip, vars: Vars, towers: Towers) -> Result<(), WeightError> {
    clip.towers = towers;
    clip.logit_scale = vars.optional_scalar("logit_scale")?;
    if towers.image() {
        load_visual(clip, &vars)?;
    }
    if towers.text() {
        load_text(clip, vars)?;
    }
    Ok(())
}

/// OpenCLIP's `visual.*` onto the image tower.
fn load_visual(clip: &mut Clip, vars: &Vars) -> Result<(), WeightError> {
    let visual = vars.pp("visual");
    let v = &mut clip.vision_model;
    load_conv2d(&mut v.patch_embedding, visual.pp("conv1"))?;
    v.class_embedding = visual.param("class_embedding", &v.class_embedding)?;
    let positions = &mut v.position_embedding.weight;
    *positions = visual.param("positional_embedding", positions)?;
    load_layer_norm(&mut v.pre_layrnorm, visual.pp("ln_pre"))?;
    v.encoder.load_open_clip(visual.pp("transformer"))?;
    load_layer_norm(&mut v.post_layernorm, visual.pp("ln_post"))?;
    clip.visual_projection.weight = visual.param("proj", &clip.visual_projection.weight)?;
    Ok(())
}

/// OpenCLIP's text tower onto the text tower: the built-in one sits at the top level;
/// `custom_text` models nest it under `text.`.
fn load_text(clip: &mut Clip, vars: Vars) -> Result<(), WeightError> {
    let text = if vars.contains("text.token_embedding.weight") { vars.pp("text") } else { vars };
    let t = &mut clip.text_model;
    load_embedding(&mut t.embeddings.token_embedding, text.pp("token_embedding"))?;
    let positions = &mut t.embeddings.position_embedding.weight;
    *positions = text.param("positional_embedding", positions)?;
    t.encoder.load_open_clip(text.pp("transformer"))?;
    load_layer_norm(&mut t.final_layer_norm, text.pp("ln_final"))?;
    clip.text_projection.weight = text.param("text_projection", &clip.text_projection.weight)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bigg_and_h_configs_map_to_clip_shapes() {
        let bigg = r#"{"embed_dim": 1280, "vision_cfg": {"image_size": 224, "layers": 48, "width": 1664,
            "head_width": 104, "mlp_ratio": 4.9231, "patch_size": 14}, "text_cfg": {"context_length": 77,
            "vocab_size": 49408, "width": 1280, "heads": 20, "layers": 32}}"#;
        let c = OpenClipFile::from_json(bigg).unwrap().model_cfg.clip_config().unwrap();
        assert_eq!(c.projection_dim, 1280);
        let v = &c.vision_config;
        let e = &v.encoder;
        assert_eq!(
            (e.hidden_size, e.intermediate_size, e.num_attention_heads, e.num_hidden_layers),
            (1664, 8192, 16, 48)
        );
        assert_eq!((v.patch_size, v.image_size), (14, 224));
        assert!(matches!(e.hidden_act, Activation::Gelu));
        let t = &c.text_config;
        let e = &t.encoder;
        assert_eq!(
            (e.hidden_size, e.intermediate_size, e.num_attention_heads, e.num_hidden_layers),
            (1280, 5120, 20, 32)
        );
        assert_eq!((t.max_position_embeddings, t.eos_token_id, t.pad_token_id), (77, 2, Some(0)));

        let h = r#"{"model_cfg": {"embed_dim": 1024, "vision_cfg": {"image_size": 224, "layers": 32, "width": 1280,
            "head_width": 80, "patch_size": 14}, "text_cfg": {"width": 1024, "heads": 16, "layers": 24}},
            "preprocess_cfg": {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}}"#;
        let file = OpenClipFile::from_json(h).unwrap();
        let c = file.model_cfg.clip_config().unwrap();
        let e = &c.vision_config.encoder;
        assert_eq!((e.intermediate_size, e.num_attention_heads), (5120, 16));
        assert_eq!(file.preprocess_cfg.mean, [0.5; 3]);
        assert_eq!(file.preprocess_cfg.interpolation, "bicubic");
    }

    #[test]
    fn unsupported_options_are_named() {
        let cfg =
            r#"{"embed_dim": 8, "vision_cfg": {"width": 64, "attentional_pool": true}, "text_cfg": {}}"#;
        let err = OpenClipFile::from_json(cfg).unwrap().model_cfg.clip_config().unwrap_err().to_string();
        assert!(err.contains("vision_cfg.attentional_pool"), "{err}");
        let cfg = r#"{"embed_dim": 8, "vision_cfg": {"layers": [3, 4, 6, 3]}, "text_cfg": {}}"#;
        let err = OpenClipFile::from_json(cfg).unwrap().model_cfg.clip_config().unwrap_err().to_string();
        assert!(err.contains("ResNet"), "{err}");
        let cfg = r#"{"embed_dim": 8, "vision_cfg": {}, "text_cfg": {"hf_model_name": "xlm-roberta-base"}}"#;
        let err = OpenClipFile::from_json(cfg).unwrap().model_cfg.clip_config().unwrap_err().to_string();
        assert!(err.contains("text_cfg.hf_model_name"), "{err}");
        // Defaults spelled out are fine.
        let cfg = r#"{"embed_dim": 8, "vision_cfg": {"pool_type": "tok", "ls_init_value": null}, "text_cfg": {"pool_type": "argmax"}}"#;
        assert!(OpenClipFile::from_json(cfg).unwrap().model_cfg.clip_config().is_ok());
    }
}
