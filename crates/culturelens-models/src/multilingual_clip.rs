//! Kandinsky 2.1's text encoder: diffusers' `MultilingualCLIP` (M-CLIP), an XLM-R encoder
//! ([`crate::xlm_roberta::XlmRoberta`]) whose last hidden state conditions the decoder UNet's
//! cross-attention, and whose mean over the real tokens (`Σ embs · mask / Σ mask`) through
//! `LinearTransformation` (`transformerDimensions → numDims`) is the pooled text embedding.
//!
//! DiffusionLens (SoS §5.1) reads layer `K` in place of the last: `hidden_states[K]` as the
//! states, and the pooled embedding of that same state through `LinearTransformation` (the
//! projection the UNet was trained behind); layers `1..=L` are offered, `L` being the pipeline's
//! own.
//!
//! [`MultilingualClipConfig`] mirrors `text_encoder/config.json` (`MCLIPConfig`: transformers'
//! `XLMRobertaConfig` keys plus `transformerDimensions` and `numDims`) over the class defaults.

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::ModelError;
use super::config;
use super::weights::{Vars, WeightError, load_linear};
use super::xlm_roberta::{XlmRoberta, XlmRobertaConfig};

/// `text_encoder/config.json` of a Kandinsky 2.1 decoder (`MCLIPConfig`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MultilingualClipConfig {
    #[serde(flatten)]
    pub encoder: XlmRobertaConfig,
    /// The input width of `LinearTransformation` (the encoder's `hidden_size`).
    #[serde(rename = "transformerDimensions")]
    pub transformer_dimensions: usize,
    /// The pooled embedding's width.
    #[serde(rename = "numDims")]
    pub num_dims: usize,
}

impl MultilingualClipConfig {
    /// `MCLIPConfig()`'s defaults (`transformerDimSize=1024`, `imageDimSize=768` over
    /// `XLMRobertaConfig()`).
    pub fn class_defaults() -> Self {
        Self { encoder: XlmRobertaConfig::class_defaults(), transformer_dimensions: 1024, num_dims: 768 }
    }

    /// Reads `config.json` over [`Self::class_defaults`] and refuses what is not implemented,
    /// naming the key.
    pub fn from_json(json: &str) -> Result<Self, ModelError> {
        let config: Self = config::from_json(json, &Self::class_defaults(), &[])?;
        config.encoder.check(1)?;
        if config.transformer_dimensions != config.encoder.hidden_size {
            return Err(ModelError::Unsupported(format!(
                "`transformerDimensions`: {} is not hidden_size {} (LinearTransformation reads the encoder's states)",
                config.transformer_dimensions, config.encoder.hidden_size
            )));
        }
        if config.num_dims == 0 {
            return Err(ModelError::Unsupported("`numDims`: must be positive".into()));
        }
        Ok(config)
    }

    pub fn init(&self, device: &Device) -> MultilingualClip {
        MultilingualClip {
            transformer: self.encoder.init(device),
            linear_transformation: LinearConfig::new(self.transformer_dimensions, self.num_dims).init(device),
            num_hidden_layers: self.encoder.num_hidden_layers,
        }
    }

    /// Builds the model of `json` and loads its checkpoint (`transformer.*`,
    /// `LinearTransformation`; the pooler is not read).
    pub fn load(json: &str, vars: Vars) -> Result<MultilingualClip, ModelError> {
        let mut model = Self::from_json(json)?.init(vars.device());
        model.load(vars)?;
        Ok(model)
    }
}

/// `MultilingualCLIP`.
#[derive(Module, Debug)]
pub struct MultilingualClip {
    pub transformer: XlmRoberta,
    pub linear_transformation: Linear,
    #[module(skip)]
    pub num_hidden_layers: usize,
}

impl MultilingualClip {
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        self.transformer.load(vars.pp("transformer"))?;
        load_linear(&mut self.linear_transformation, vars.pp("LinearTransformation"))
    }

    /// `(pooled [rows, numDims], states [rows, len, hidden])` of token-id rows of equal length
    /// (padded with the pad id, the tokenizer's attention mask) read at `layer` (`1..=L`; the
    /// pipeline's is `L`, `forward`'s `(LinearTransformation(mean), embs)`).
    pub fn encode(&self, ids: &[Vec<u32>], layer: usize, device: &Device) -> (Tensor<2>, Tensor<3>) {
        assert!((1..=self.num_hidden_layers).contains(&layer), "M-CLIP layer {layer}");
        let states = self.transformer.hidden_state(ids, layer, device);
        let [rows, len, _] = states.dims();
        let pad = self.transformer.pad_token_id;
        let mask: Vec<f32> = ids.iter().flatten().map(|&id| if id == pad { 0.0 } else { 1.0 }).collect();
        let counts: Vec<f32> =
            ids.iter().map(|row| row.iter().filter(|&&id| id != pad).count() as f32).collect();
        let mask = Tensor::<3>::from_data(TensorData::new(mask, [rows, len, 1]), device);
        let counts = Tensor::<2>::from_data(TensorData::new(counts, [rows, 1]), device);
        let sum = (states.clone() * mask).sum_dim(1).reshape([rows, states.dims()[2]]);
        (self.linear_transformation.forward(sum / counts), states)
    }
}
