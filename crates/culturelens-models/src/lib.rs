//! Image and text encoders (CLIP and OpenCLIP, SigLIP, DINOv2) and an image-only EfficientNet-Lite written once in Burn, with their weight
//! loading ([`weights`]) and image preprocessing ([`preprocess`], [`resample`]).
//!
//! One file per family, each with a config struct that mirrors transformers' `config.json` and
//! one preset literal for the keys a file leaves out (read by [`config`]), Burn modules whose
//! fields mirror the checkpoint names, and a `load` that reads the checkpoint through a
//! prefix-scoped view ([`weights::Vars`]) by those names. The outputs are those of transformers: `get_image_features` /
//! `get_text_features` for CLIP and SigLIP, `pooler_output` for DINOv2, never normalised.
//! No file I/O happens here: callers hand in the bytes of `config.json`, `model.safetensors`
//! and the images.

pub mod activation;
pub mod clip;
pub mod config;
pub mod conv;
#[cfg(feature = "flex-fused")]
mod cpu;
pub mod dinov2;
pub mod efficientnet;
pub mod gemma2;
pub mod gender_v1;
pub mod glm;
pub mod multilingual_clip;
pub mod norm;
pub mod onnx;
pub mod open_clip;
pub mod preprocess;
pub mod resample;
pub mod siglip;
pub mod t5;
pub mod vit;
pub mod weights;
pub mod xlm_roberta;

use burn::tensor::{Device, Tensor};
use serde::Deserialize;

use self::weights::{Checkpoint, WeightError};

/// Why a model could not be built from its `config.json`.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("config.json: {0}")]
    Config(#[from] serde_json::Error),
    #[error(
        "config.json has model_type `{0}`; supported: clip, siglip, dinov2, dinov2_with_registers, efficientnet_lite"
    )]
    UnsupportedModelType(String),
    #[error(transparent)]
    Weights(#[from] WeightError),
    #[error("{0}")]
    Unsupported(String),
    #[error("{family} has no text tower")]
    NoTextTower { family: &'static str },
    #[error("the {tower} tower of this {family} model was not loaded (it was loaded for {loaded:?} only)")]
    TowerNotLoaded { family: &'static str, tower: &'static str, loaded: Towers },
}

/// Which towers of a two-tower model (CLIP, OpenCLIP, SigLIP) are loaded. A command that embeds
/// only images (or only texts) leaves the other tower's weights unread: its parameters stay
/// lazy, so they take neither load time nor memory. Image-only families ignore it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Towers {
    #[default]
    Both,
    Image,
    Text,
}

impl Towers {
    pub fn image(self) -> bool {
        self != Self::Text
    }

    pub fn text(self) -> bool {
        self != Self::Image
    }
}

/// Any supported encoder, chosen by `config.json`'s `model_type`.
#[derive(Debug)]
pub enum EncoderModel {
    Clip(Box<clip::Clip>),
    Siglip(Box<siglip::Siglip>),
    Dinov2(Box<dinov2::Dinov2>),
    EfficientNet(Box<efficientnet::EfficientNetLite>),
}

#[derive(Deserialize)]
struct ModelType {
    model_type: String,
}

impl EncoderModel {
    /// Builds the (randomly initialised, lazily materialised) model that `config_json` describes.
    pub fn from_config(config_json: &str, device: &Device) -> Result<Self, ModelError> {
        let ModelType { model_type } = serde_json::from_str(config_json)?;
        Ok(match model_type.as_str() {
            "clip" => Self::Clip(Box::new(clip::ClipConfig::from_json(config_json)?.init(device))),
            "siglip" => Self::Siglip(Box::new(siglip::SiglipConfig::from_json(config_json)?.init(device))),
            "dinov2" | "dinov2_with_registers" => {
                Self::Dinov2(Box::new(dinov2::Dinov2Config::from_json(config_json)?.init(device)))
            }
            "efficientnet_lite" => Self::EfficientNet(Box::new(
                efficientnet::EfficientNetLiteConfig::from_json(config_json)?.init(device),
            )),
            _ => return Err(ModelError::UnsupportedModelType(model_type)),
        })
    }

    /// Builds the model of `config_json` and loads its checkpoint: of a two-tower model, the
    /// towers `towers` only (the others' weights are not read).
    pub fn load(config_json: &str, checkpoint: &Checkpoint, towers: Towers) -> Result<Self, ModelError> {
        let mut model = Self::from_config(config_json, checkpoint.device())?;
        let vars = checkpoint.vars();
        match &mut model {
            Self::Clip(m) => m.load(vars, towers)?,
            Self::Siglip(m) => m.load(vars, towers)?,
            Self::Dinov2(m) => m.load(vars)?,
            Self::EfficientNet(m) => m.load(vars)?,
        }
        Ok(model)
    }

    /// Builds the CLIP of `config` (from an OpenCLIP `open_clip_config.json`, see
    /// [`open_clip::OpenClipConfig::clip_config`]) and loads its state dict
    /// (`open_clip_model.safetensors`) through the key table of [`open_clip`].
    /// Of the towers `towers` only.
    pub fn load_open_clip(
        config: &clip::ClipConfig,
        checkpoint: &Checkpoint,
        towers: Towers,
    ) -> Result<Self, ModelError> {
        let mut model = config.init(checkpoint.device());
        open_clip::load(&mut model, checkpoint.vars(), towers)?;
        Ok(Self::Clip(Box::new(model)))
    }

    pub fn family(&self) -> &'static str {
        match self {
            Self::Clip(_) => "clip",
            Self::Siglip(_) => "siglip",
            Self::Dinov2(_) => "dinov2",
            Self::EfficientNet(_) => "efficientnet_lite",
        }
    }

    /// The towers loaded ([`Towers::Image`] for the image-only families).
    pub fn towers(&self) -> Towers {
        match self {
            Self::Clip(m) => m.towers,
            Self::Siglip(m) => m.towers,
            Self::Dinov2(_) | Self::EfficientNet(_) => Towers::Image,
        }
    }

    /// The image embedding of `pixel_values` `[batch, 3, H, W]`.
    ///
    /// Panics if the image tower was not loaded ([`Self::load`] with [`Towers::Text`]):
    /// the command that loads the model chooses its towers.
    pub fn image_features(&self, pixel_values: Tensor<4>) -> Tensor<2> {
        assert!(self.towers().image(), "the {} model was loaded for its text tower only", self.family());
        match self {
            Self::Clip(m) => m.image_features(pixel_values),
            Self::Siglip(m) => m.image_features(pixel_values),
            Self::Dinov2(m) => m.pooled(pixel_values),
            Self::EfficientNet(m) => m.features(pixel_values),
        }
    }

    /// The text embedding of token ids (as the family's tokenizer returns them, specials
    /// included, unpadded).
    pub fn text_features(&self, ids: &[Vec<u32>], device: &Device) -> Result<Tensor<2>, ModelError> {
        let loaded = self.towers();
        if matches!(self, Self::Clip(_) | Self::Siglip(_)) && !loaded.text() {
            return Err(ModelError::TowerNotLoaded { family: self.family(), tower: "text", loaded });
        }
        match self {
            Self::Clip(m) => Ok(m.text_features(ids, device)),
            Self::Siglip(m) => Ok(m.text_features(ids, device)),
            Self::Dinov2(_) => Err(ModelError::NoTextTower { family: "dinov2" }),
            Self::EfficientNet(_) => Err(ModelError::NoTextTower { family: "efficientnet_lite" }),
        }
    }

    /// The temperature of the image–text logits, `exp(logit_scale)` of the checkpoint
    /// (transformers' `logits_per_image = exp(logit_scale) · cos`); `None` for a model without
    /// a text tower or a checkpoint without `logit_scale`.
    pub fn logit_scale(&self) -> Option<f32> {
        let log_scale = match self {
            Self::Clip(m) => m.logit_scale,
            Self::Siglip(m) => m.logit_scale,
            Self::Dinov2(_) | Self::EfficientNet(_) => None,
        };
        log_scale.map(f32::exp)
    }

    /// Width of [`Self::image_features`].
    pub fn image_dim(&self) -> usize {
        match self {
            Self::Clip(m) => m.config.projection_dim,
            Self::Siglip(m) => m.config.vision_config.encoder.hidden_size,
            Self::Dinov2(m) => m.config.hidden_size,
            Self::EfficientNet(_) => efficientnet::HEAD_WIDTH,
        }
    }

    /// Longest token sequence the text tower accepts.
    pub fn max_text_len(&self) -> Option<usize> {
        match self {
            Self::Clip(m) => Some(m.config.text_config.max_position_embeddings),
            Self::Siglip(m) => Some(m.config.text_config.max_position_embeddings),
            Self::Dinov2(_) | Self::EfficientNet(_) => None,
        }
    }
}
