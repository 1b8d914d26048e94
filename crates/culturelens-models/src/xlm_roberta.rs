//! AltDiffusion's text encoder: diffusers' `RobertaSeriesModelWithTransformation`, an XLM-R
//! encoder (transformers' `XLMRobertaModel`) followed by a projection into the UNet's
//! cross-attention width.
//!
//! - **Embeddings**: word + absolute position + token type 0, then a layer norm. Positions are
//!   RoBERTa's: `pad + cumsum(id ≠ pad)` for a token, `pad` for padding (transformers'
//!   `create_position_ids_from_input_ids`), so the first token sits at position `pad + 1`.
//! - **Layers** are post-norm (BERT): `x = LN(x + attn(x))`, `x = LN(x + W₂ gelu(W₁ x))`, exact
//!   GELU. Padding keys get no attention weight (`use_attention_mask`: the pipeline passes the
//!   tokenizer's mask, which is `id ≠ pad`; no non-padding token has the pad id).
//! - **Projection** (`has_pre_transformation`, as AltDiffusion ships): the second-to-last hidden
//!   state `hidden_states[L − 1]` through `pre_LN` and `transformation_pre` is the UNet's
//!   conditioning. The other branch (the last state through `transformation`) and a model
//!   without the mask are refused by key: no AltDiffusion checkpoint uses them.
//! - **DiffusionLens** (SoS §5.1) reads layer `K` as the pipeline reads its own: `hidden_states[K]`
//!   through `pre_LN` and `transformation_pre`, the projection the UNet was trained behind (as
//!   the lens passes CLIP's layers through its final layer norm). Layers `1..=L − 1` are
//!   offered, `L − 1` being the pipeline's own conditioning; the last layer is never an input of
//!   `transformation_pre` and is refused.
//!
//! [`RobertaSeriesConfig`] mirrors `text_encoder/config.json` with transformers'
//! `RobertaSeriesConfig` / `XLMRobertaConfig` class defaults as the preset.

use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::{Bool, Device, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::ModelError;
use super::config;
use super::vit::{Activation, AttendOptions, Attention};
use super::weights::{Vars, WeightError, load_embedding, load_layer_norm, load_linear};

/// The keys of transformers' `XLMRobertaConfig` that shape the encoder (both text encoders'
/// configs hold them flattened, as `config.json` does).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct XlmRobertaConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: Activation,
    pub layer_norm_eps: f64,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub pad_token_id: u32,
    pub position_embedding_type: String,
}

impl XlmRobertaConfig {
    /// transformers' `XLMRobertaConfig()` defaults (pad 1 as RoBERTa's configs set it).
    pub fn class_defaults() -> Self {
        Self {
            vocab_size: 30522,
            hidden_size: 768,
            num_hidden_layers: 12,
            num_attention_heads: 12,
            intermediate_size: 3072,
            hidden_act: Activation::Gelu,
            layer_norm_eps: 1e-12,
            max_position_embeddings: 512,
            type_vocab_size: 2,
            pad_token_id: 1,
            position_embedding_type: "absolute".into(),
        }
    }

    /// Refuses what the encoder does not implement, naming the key; `min_layers` is the fewest
    /// layers the model on top reads.
    pub fn check(&self, min_layers: usize) -> Result<(), ModelError> {
        let refuse = |key: &str, why: String| Err(ModelError::Unsupported(format!("`{key}`: {why}")));
        if self.position_embedding_type != "absolute" {
            return refuse("position_embedding_type", "only `absolute` is supported".into());
        }
        if self.num_hidden_layers < min_layers {
            return refuse("num_hidden_layers", format!("at least {min_layers}"));
        }
        config::check_layers("num_hidden_layers", self.num_hidden_layers)?;
        config::check_tower("", self.hidden_size, self.num_attention_heads, None)?;
        if self.max_position_embeddings <= self.pad_token_id as usize + 1 {
            return refuse("max_position_embeddings", "leaves no position after the padding index".into());
        }
        Ok(())
    }

    pub fn init(&self, device: &Device) -> XlmRoberta {
        let d = self.hidden_size;
        let norm = || LayerNormConfig::new(d).with_epsilon(self.layer_norm_eps).init(device);
        let layers = (0..self.num_hidden_layers)
            .map(|_| RobertaLayer {
                attention: Attention::init(d, self.num_attention_heads, true, device),
                attention_norm: norm(),
                intermediate: LinearConfig::new(d, self.intermediate_size).init(device),
                output: LinearConfig::new(self.intermediate_size, d).init(device),
                output_norm: norm(),
            })
            .collect();
        XlmRoberta {
            word_embeddings: EmbeddingConfig::new(self.vocab_size, d).init(device),
            position_embeddings: EmbeddingConfig::new(self.max_position_embeddings, d).init(device),
            token_type_embeddings: EmbeddingConfig::new(self.type_vocab_size.max(1), d).init(device),
            embeddings_norm: norm(),
            layers,
            pad_token_id: self.pad_token_id,
            hidden_act: self.hidden_act,
        }
    }
}

/// `text_encoder/config.json` of an AltDiffusion pipeline (`RobertaSeriesConfig`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RobertaSeriesConfig {
    #[serde(flatten)]
    pub encoder: XlmRobertaConfig,
    pub project_dim: usize,
    pub has_pre_transformation: bool,
    pub use_attention_mask: bool,
}

impl RobertaSeriesConfig {
    /// transformers' class defaults (`XLMRobertaConfig()` with `RobertaSeriesConfig`'s own:
    /// pad 1, `project_dim` 512, the attention mask on; `has_pre_transformation` is read with
    /// `getattr(config, …, False)`).
    pub fn class_defaults() -> Self {
        Self {
            encoder: XlmRobertaConfig::class_defaults(),
            project_dim: 512,
            has_pre_transformation: false,
            use_attention_mask: true,
        }
    }

    /// Reads `config.json` over [`Self::class_defaults`] and refuses what is not implemented, naming
    /// the key.
    pub fn from_json(json: &str) -> Result<Self, ModelError> {
        let config: Self = config::from_json(json, &Self::class_defaults(), &[])?;
        let refuse = |key: &str, why: &str| Err(ModelError::Unsupported(format!("`{key}`: {why}")));
        if !config.has_pre_transformation {
            return refuse(
                "has_pre_transformation",
                "false is not supported (AltDiffusion conditions on pre_LN + transformation_pre)",
            );
        }
        if !config.use_attention_mask {
            return refuse("use_attention_mask", "false is not supported (AltDiffusion passes the mask)");
        }
        // The projection reads the second-to-last layer.
        config.encoder.check(2)?;
        Ok(config)
    }

    pub fn init(&self, device: &Device) -> RobertaSeries {
        let norm = || {
            LayerNormConfig::new(self.encoder.hidden_size)
                .with_epsilon(self.encoder.layer_norm_eps)
                .init(device)
        };
        RobertaSeries {
            roberta: self.encoder.init(device),
            pre_ln: norm(),
            transformation_pre: LinearConfig::new(self.encoder.hidden_size, self.project_dim).init(device),
            config: self.clone(),
        }
    }

    /// Builds the model of `json` and loads its checkpoint (`roberta.*`, `pre_LN`,
    /// `transformation_pre`; the unused `transformation` and `roberta.pooler` are not read).
    pub fn load(json: &str, vars: Vars) -> Result<RobertaSeries, ModelError> {
        let mut model = Self::from_json(json)?.init(vars.device());
        model.load(vars)?;
        Ok(model)
    }
}

/// One post-norm `XLMRobertaLayer`.
#[derive(Module, Debug)]
pub struct RobertaLayer {
    pub attention: Attention,
    pub attention_norm: LayerNorm,
    pub intermediate: Linear,
    pub output: Linear,
    pub output_norm: LayerNorm,
}

/// transformers' `XLMRobertaModel` without its pooler: embeddings and post-norm layers.
#[derive(Module, Debug)]
pub struct XlmRoberta {
    pub word_embeddings: Embedding,
    pub position_embeddings: Embedding,
    pub token_type_embeddings: Embedding,
    pub embeddings_norm: LayerNorm,
    pub layers: Vec<RobertaLayer>,
    #[module(skip)]
    pub pad_token_id: u32,
    #[module(skip)]
    pub hidden_act: Activation,
}

/// `RobertaSeriesModelWithTransformation` with `has_pre_transformation`.
#[derive(Module, Debug)]
pub struct RobertaSeries {
    pub roberta: XlmRoberta,
    pub pre_ln: LayerNorm,
    pub transformation_pre: Linear,
    #[module(skip)]
    pub config: RobertaSeriesConfig,
}

/// RoBERTa's position ids of one row of token ids: `pad + (number of non-padding tokens up to
/// and including this one)` for a token, `pad` for padding.
pub fn position_ids(ids: &[u32], pad: u32) -> Vec<i64> {
    let mut seen = 0i64;
    ids.iter()
        .map(|&id| {
            if id == pad {
                i64::from(pad)
            } else {
                seen += 1;
                i64::from(pad) + seen
            }
        })
        .collect()
}

impl XlmRoberta {
    /// Loads `embeddings.*` and `encoder.layer.{i}.*` from the model's scope (`roberta`,
    /// `transformer`); the pooler is not read.
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        let emb = vars.pp("embeddings");
        load_embedding(&mut self.word_embeddings, emb.pp("word_embeddings"))?;
        load_embedding(&mut self.position_embeddings, emb.pp("position_embeddings"))?;
        load_embedding(&mut self.token_type_embeddings, emb.pp("token_type_embeddings"))?;
        load_layer_norm(&mut self.embeddings_norm, emb.pp("LayerNorm"))?;
        for (i, layer) in self.layers.iter_mut().enumerate() {
            let vars = vars.pp("encoder.layer").pp(i);
            let attention = vars.pp("attention");
            layer.attention.load(&attention, ["self.query", "self.key", "self.value", "output.dense"])?;
            load_layer_norm(&mut layer.attention_norm, attention.pp("output.LayerNorm"))?;
            load_linear(&mut layer.intermediate, vars.pp("intermediate.dense"))?;
            load_linear(&mut layer.output, vars.pp("output.dense"))?;
            load_layer_norm(&mut layer.output_norm, vars.pp("output.LayerNorm"))?;
        }
        Ok(())
    }

    /// `hidden_states[layer]` `[rows, len, hidden]` of token-id rows of equal length, padding
    /// (the pad id: the tokenizer's `attention_mask == 0`) getting no attention weight.
    pub fn hidden_state(&self, ids: &[Vec<u32>], layer: usize, device: &Device) -> Tensor<3> {
        let pad = self.pad_token_id;
        let (rows, len) = (ids.len(), ids.first().map_or(0, Vec::len));
        assert!(ids.iter().all(|r| r.len() == len), "token rows of equal length");
        let flat: Vec<i64> = ids.iter().flatten().map(|&id| i64::from(id)).collect();
        let positions: Vec<i64> = ids.iter().flat_map(|row| position_ids(row, pad)).collect();
        let padding: Vec<bool> = ids.iter().flatten().map(|&id| id == pad).collect();
        let input = Tensor::<2, Int>::from_data(TensorData::new(flat, [rows, len]), device);
        let positions = Tensor::<2, Int>::from_data(TensorData::new(positions, [rows, len]), device);
        let key_padding = Tensor::<2, Bool>::from_data(TensorData::new(padding, [rows, len]), device);
        let d = self.word_embeddings.weight.lazy_shape().dims::<2>()[1];
        let token_type = self.token_type_embeddings.weight.val().slice([0..1, 0..d]).unsqueeze::<3>();
        let mut x = self.embeddings_norm.forward(
            self.word_embeddings.forward(input) + self.position_embeddings.forward(positions) + token_type,
        );
        for l in &self.layers[..layer] {
            let how = AttendOptions { key_padding: Some(key_padding.clone()), ..AttendOptions::default() };
            let attended = l.attention.attend_with(l.attention.q_proj.forward(x.clone()), x.clone(), how);
            x = l.attention_norm.forward(x + attended);
            let hidden = self.hidden_act.forward(l.intermediate.forward(x.clone()));
            x = l.output_norm.forward(x + l.output.forward(hidden));
        }
        x
    }
}

impl RobertaSeries {
    pub fn load(&mut self, vars: Vars) -> Result<(), WeightError> {
        self.roberta.load(vars.pp("roberta"))?;
        load_layer_norm(&mut self.pre_ln, vars.pp("pre_LN"))?;
        load_linear(&mut self.transformation_pre, vars.pp("transformation_pre"))
    }

    /// The layer whose state conditions the pipeline (`L − 1`), and the last one DiffusionLens
    /// offers.
    pub fn conditioning_layer(&self) -> usize {
        self.config.encoder.num_hidden_layers - 1
    }

    /// `[rows, len, project_dim]`: `transformation_pre(pre_LN(hidden_states[layer]))` of
    /// token-id rows of equal length (`layer` in `1..=L − 1`; the pipeline's is `L − 1`).
    pub fn encode(&self, ids: &[Vec<u32>], layer: usize, device: &Device) -> Tensor<3> {
        self.transformation_pre.forward(self.pre_ln.forward(self.roberta.hidden_state(ids, layer, device)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_tokens_after_the_padding_index() {
        // pad = 1: tokens at 2, 3, 4; padding stays at 1 (also between tokens).
        assert_eq!(position_ids(&[0, 57, 2, 1, 1], 1), [2, 3, 4, 1, 1]);
        assert_eq!(position_ids(&[0, 1, 2], 1), [2, 1, 3]);
    }

    #[test]
    fn unsupported_options_are_refused_by_key() {
        let err = RobertaSeriesConfig::from_json("{}").unwrap_err().to_string();
        assert!(err.contains("`has_pre_transformation`"), "{err}");
        let ok = r#"{"has_pre_transformation": true"#;
        for (extra, key) in [
            (r#", "use_attention_mask": false}"#, "`use_attention_mask`"),
            (r#", "position_embedding_type": "relative_key"}"#, "`position_embedding_type`"),
            (r#", "num_hidden_layers": 1}"#, "`num_hidden_layers`"),
            (r#", "num_attention_heads": 5}"#, "`num_attention_heads`"),
        ] {
            let err = RobertaSeriesConfig::from_json(&format!("{ok}{extra}")).unwrap_err().to_string();
            assert!(err.contains(key), "{extra}: {err}");
        }
        let c = RobertaSeriesConfig::from_json(&format!("{ok}}}")).unwrap();
        assert_eq!((c.encoder.hidden_size, c.encoder.pad_token_id, c.project_dim), (768, 1, 512));
    }
}
