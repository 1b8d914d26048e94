//! Loading of the culturelens encoders: a weights folder as transformers' `save_pretrained`
//! writes it (config.json, model.safetensors or a sharded index, preprocessor_config.json,
//! tokenizer.json or SigLIP's spiece.model) or an OpenCLIP hub folder (open_clip_config.json,
//! open_clip_model.safetensors), read through [`folder::Folder`] — a directory on disk or files
//! the browser holds in memory — into the Burn model of `culturelens-models` on a device, with
//! its image preprocessing and tokenizer. The `tokenizers` crate lives here so that the models
//! crate stays free of it.
//!
//! The crate feature `native` (on by default; the CLI's) adds the file system, JPEG through
//! libjpeg-turbo's C decoder ([`jpeg`]) and the embedding loop ([`embed`]) — together the feature
//! `files` — and diffusers pipeline folders ([`diffusion`]) with the generation loop
//! ([`generate`]) — together `diffusion`, all the Python wheel takes — and the pickle importer
//! ([`import`]). Without it (the browser, wasm32) the same folders load from memory and
//! JPEG goes through the pure-Rust port of libjpeg-turbo's decoder ([`jpeg_rs`]), which gives
//! the same pixels.
//!
//! Only safetensors are read: pickled `.bin`/`.pt` checkpoints can run code when unpickled and
//! are refused with a message saying how to convert them. The one exception is explicit:
//! [`import::import_pickle`] (`culturelens import-weights --pickle FILE`) converts a pickled state
//! dict of a known architecture with a reader that never executes the pickle.

pub mod clip_bpe;
#[cfg(feature = "diffusion")]
pub mod device;
#[cfg(feature = "diffusion")]
pub mod diffusion;
#[cfg(feature = "files")]
pub mod embed;
pub mod folder;
#[cfg(feature = "diffusion")]
pub mod gemma_tokenizer;
#[cfg(feature = "diffusion")]
pub mod generate;
#[cfg(feature = "hub")]
pub mod hub;
#[cfg(feature = "native")]
pub mod import;
#[cfg(feature = "files")]
pub mod jpeg;
pub mod jpeg_rs;
pub mod limits;
pub mod open_clip_text;
pub mod spiece;
#[cfg(feature = "diffusion")]
pub mod t5_tokenizer;
#[cfg(feature = "diffusion")]
pub mod xlm_roberta_tokenizer;

use std::path::{Path, PathBuf};

use burn::tensor::{DType, Device, FloatDType, Tensor, TensorData};
#[cfg(feature = "files")]
use culturelens_metrics::tokens;
use culturelens_models::open_clip::OpenClipFile;
use culturelens_models::preprocess::{
    self, Decoded, ImageProcessor, ImageProcessorConfig, PixelValues, PreprocessError,
};
#[cfg(feature = "diffusion")]
use culturelens_models::weights::Checkpoint;
use culturelens_models::{EncoderModel, ModelError, Towers};

use crate::folder::{Folder, encoder_weight_files};

/// A failure while loading a weights folder or embedding an input, with the file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {source}")]
    Json { path: PathBuf, source: serde_json::Error },
    #[error("{path}: {source}")]
    Model { path: PathBuf, source: ModelError },
    #[error("{path}: {source}")]
    Preprocess { path: PathBuf, source: PreprocessError },
    #[error("{path}: {message}")]
    Tokenizer { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("{path}: cannot read the pickled checkpoint: {message}")]
    Pickle { path: PathBuf, message: String },
    #[error("{path} already exists; culturelens does not overwrite a weights folder")]
    Exists { path: PathBuf },
    #[error("{dir}: no {what} ({hint})")]
    Missing { dir: PathBuf, what: &'static str, hint: String },
    #[cfg(feature = "diffusion")]
    #[error("{path}: {source}")]
    Scheduler { path: PathBuf, source: culturelens_diffusion_schedulers::SchedulerError },
}

/// A failure of the output kit (`import-weights` writing its folder): an I/O error at its path.
#[cfg(feature = "files")]
impl From<culturelens_files::Error> for LoadError {
    fn from(e: culturelens_files::Error) -> Self {
        LoadError::Io { path: e.path, source: e.source }
    }
}

#[cfg(feature = "files")]
pub(crate) fn read(path: &Path) -> Result<Vec<u8>, LoadError> {
    std::fs::read(path).map_err(|source| LoadError::Io { path: path.to_owned(), source })
}

#[cfg(feature = "diffusion")]
/// The ids of `text` with the tokenizer's special tokens, truncated by the tokenizer and padded
/// with `pad` to `max_len` (CLIP's and T5's tokenizers as diffusers pipelines call them).
pub(crate) fn padded_ids(
    tokenizer: &tokenizers::Tokenizer,
    path: &Path,
    text: &str,
    max_len: usize,
    pad: u32,
) -> Result<Vec<u32>, LoadError> {
    let encoding = tokenizer
        .encode(text, true)
        .map_err(|e| LoadError::Tokenizer { path: path.to_path_buf(), message: e.to_string() })?;
    let mut ids = encoding.get_ids().to_vec();
    ids.resize(max_len, pad);
    Ok(ids)
}

#[cfg(feature = "diffusion")]
pub(crate) fn read_string(path: &Path) -> Result<String, LoadError> {
    std::fs::read_to_string(path).map_err(|source| LoadError::Io { path: path.to_owned(), source })
}

/// The safetensors files of `dir`: `model.safetensors`, or the shards named by
/// `model.safetensors.index.json`.
#[cfg(feature = "files")]
pub fn safetensors_files(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    Ok(encoder_weight_files(&folder::Dir(dir))?.into_iter().map(|f| dir.join(f)).collect())
}

/// [`folder::weight_files`] of the directory `dir`, as paths.
#[cfg(feature = "diffusion")]
pub(crate) fn weight_files(
    dir: &Path,
    stem: &str,
    pickled: &[&str],
    convert: impl Fn(&Path) -> String,
) -> Result<Vec<PathBuf>, LoadError> {
    let names = folder::weight_files(&folder::Dir(dir), stem, pickled, convert)?;
    Ok(names.into_iter().map(|f| dir.join(f)).collect())
}

/// [`folder::load_model`] of files on disk (the diffusers components).
#[cfg(feature = "diffusion")]
pub(crate) fn load_model<T>(
    files: &[PathBuf],
    config_path: &Path,
    device: &Device,
    build: impl FnOnce(&Checkpoint) -> Result<T, ModelError>,
) -> Result<T, LoadError> {
    let dir = files[0].parent().unwrap_or(Path::new(""));
    let names: Vec<String> =
        files.iter().map(|f| f.strip_prefix(dir).unwrap_or(f).to_string_lossy().into_owned()).collect();
    folder::load_model(&folder::Dir(dir), &names, config_path, device, device.settings().float_dtype, build)
}

/// An encoder loaded from a weights folder, ready to embed on its device.
pub struct Encoder {
    pub model: EncoderModel,
    pub processor: Option<ImageProcessor>,
    /// The tokenizer and the file it was read from.
    pub tokenizer: Option<(tokenizers::Tokenizer, PathBuf)>,
    /// An OpenCLIP folder: texts get open_clip's cleaning before the tokenizer
    /// ([`open_clip_text::clean`]).
    pub open_clip: bool,
    pub device: Device,
    /// The float type the model's weights are stored and computed in (its inputs are created
    /// in it; the features come out in it).
    pub dtype: FloatDType,
    pub dir: PathBuf,
}

impl Encoder {
    /// Loads the model, preprocessing and tokenizer found in `dir` onto `device`: a
    /// transformers folder (`config.json`, `model.safetensors` or shards) or an OpenCLIP one
    /// (`open_clip_config.json`, `open_clip_model.safetensors`, as on the Hugging Face hub).
    /// When both are present the transformers files are used.
    #[cfg(feature = "files")]
    pub fn from_dir(dir: &Path, device: &Device) -> Result<Self, LoadError> {
        Self::from_folder(&folder::Dir(dir), device)
    }

    /// [`Self::from_dir`] with only the towers `towers` of a two-tower model (CLIP, OpenCLIP,
    /// SigLIP) read: a command that embeds only images or only texts skips the other tower's
    /// weights (their load time and memory). Embedding with a tower not loaded is an error
    /// for texts ([`culturelens_models::ModelError::TowerNotLoaded`]) and a panic for images.
    #[cfg(feature = "files")]
    pub fn from_dir_towers(dir: &Path, device: &Device, towers: Towers) -> Result<Self, LoadError> {
        Self::from_folder_in(&folder::Dir(dir), device, device.settings().float_dtype, towers)
    }

    /// [`Self::from_dir`] of any [`Folder`]: the one reading of a weights folder, on disk or in
    /// the page's memory.
    pub fn from_folder<F: Folder + ?Sized>(folder: &F, device: &Device) -> Result<Self, LoadError> {
        Self::from_folder_in(folder, device, device.settings().float_dtype, Towers::Both)
    }

    /// [`Self::from_folder`] in the float type `dtype` instead of the device's own: the
    /// browser's f16 encoder (`?precision=f16`) on a device whose tables stay in f32. The
    /// weights are converted as the CLI's `--precision f16` converts them (one tensor at a time,
    /// by [`Checkpoint`]).
    ///
    /// Of a two-tower model it reads the towers `towers` only ([`Self::from_dir_towers`]).
    pub fn from_folder_in<F: Folder + ?Sized>(
        folder: &F,
        device: &Device,
        dtype: FloatDType,
        towers: Towers,
    ) -> Result<Self, LoadError> {
        let config_path = folder.path("config.json");
        let open_clip_path = folder.path("open_clip_config.json");
        let open_clip = !folder.has("config.json") && folder.has("open_clip_config.json");
        let (model, default_processor) = if !open_clip {
            let config = folder.read_string("config.json")?;
            let files = encoder_weight_files(folder)?;
            let model = folder::load_model(folder, &files, &config_path, device, dtype, |ck| {
                EncoderModel::load(&config, ck, towers)
            })?;
            (model, None)
        } else {
            let at_config = |source| LoadError::Model { path: open_clip_path.clone(), source };
            let file =
                OpenClipFile::from_json(&folder.read_string("open_clip_config.json")?).map_err(at_config)?;
            let clip = file.model_cfg.clip_config().map_err(at_config)?;
            let processor =
                file.preprocess_cfg.processor(clip.vision_config.image_size as u32).map_err(at_config)?;
            if !folder.has("open_clip_model.safetensors") {
                let hint = if folder.has("open_clip_pytorch_model.bin") {
                    "found open_clip_pytorch_model.bin, a pickled checkpoint, which culturelens does not unpickle; \
                     the LAION repositories also ship open_clip_model.safetensors"
                        .to_string()
                } else {
                    "expected open_clip_model.safetensors next to open_clip_config.json".to_string()
                };
                return Err(LoadError::Missing {
                    dir: folder.path(""),
                    what: "OpenCLIP safetensors weights",
                    hint,
                });
            }
            let files = ["open_clip_model.safetensors".to_string()];
            let model = folder::load_model(folder, &files, &open_clip_path, device, dtype, |ck| {
                EncoderModel::load_open_clip(&clip, ck, towers)
            })?;
            (model, Some(processor))
        };
        // An OpenCLIP folder is preprocessed as open_clip does (its preprocess_cfg), even where
        // the hub repository also carries a transformers preprocessor_config.json.
        let processor_path = folder.path("preprocessor_config.json");
        let processor = if default_processor.is_some() {
            default_processor
        } else if folder.has("preprocessor_config.json") {
            let cfg = ImageProcessorConfig::from_json(&folder.read_string("preprocessor_config.json")?)
                .map_err(|source| LoadError::Json { path: processor_path.clone(), source })?;
            Some(
                cfg.processor()
                    .map_err(|source| LoadError::Preprocess { path: processor_path.clone(), source })?,
            )
        } else {
            None
        };
        let tokenizer = match folder_tokenizer(folder, matches!(model, EncoderModel::Siglip(_)))? {
            Some((mut tok, path)) => {
                if let Some(max) = model.max_text_len() {
                    tok.with_truncation(Some(tokenizers::TruncationParams {
                        max_length: max,
                        ..Default::default()
                    }))
                    .map_err(|e| LoadError::Tokenizer { path: path.clone(), message: e.to_string() })?;
                }
                tok.with_padding(None);
                Some((tok, path))
            }
            None => None,
        };
        Ok(Self {
            model,
            processor,
            tokenizer,
            open_clip,
            device: device.clone(),
            dtype,
            dir: folder.path(""),
        })
    }

    /// The image preprocessing of this folder (an error naming the missing file if it has none).
    pub fn processor(&self) -> Result<&ImageProcessor, LoadError> {
        self.processor.as_ref().ok_or_else(|| LoadError::Missing {
            dir: self.dir.clone(),
            what: "preprocessor_config.json",
            hint: "image embedding needs the image processor's settings".into(),
        })
    }

    /// `pixel_values` of the image file at `path`.
    #[cfg(feature = "files")]
    pub fn pixel_values(&self, path: &Path) -> Result<PixelValues, LoadError> {
        read_pixel_values(self.processor()?, path)
    }

    /// Embeds a batch of same-sized `pixel_values` and reads the rows back.
    pub fn embed_pixels(&self, batch: &[PixelValues]) -> Vec<Vec<f32>> {
        rows(self.image_features(batch))
    }

    /// The image features of a batch of same-sized `pixel_values`, left on the device (the
    /// browser reads them back asynchronously).
    pub fn image_features(&self, batch: &[PixelValues]) -> Tensor<2> {
        let (height, width) = (batch[0].height, batch[0].width);
        assert!(batch.iter().all(|p| (p.height, p.width) == (height, width)), "a batch must share one size");
        let flat: Vec<f32> = batch.iter().flat_map(|p| p.data.iter().copied()).collect();
        let pixels = Tensor::<4>::from_data(
            TensorData::new(flat, [batch.len(), 3, height, width]),
            (&self.device, DType::from(self.dtype)),
        );
        self.model.image_features(pixels)
    }

    /// Token ids of `texts` with the folder's tokenizer (specials added, truncated to the
    /// text tower's length).
    pub fn tokenize(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, LoadError> {
        Ok(self.tokenize_marked(texts)?.into_iter().map(|(ids, _)| ids).collect())
    }

    /// Token ids of `texts` as [`Self::tokenize`] gives them, each with whether it was cut to
    /// the text tower's length (callers that must not score a cut text refuse those).
    pub fn tokenize_marked(&self, texts: &[String]) -> Result<Vec<(Vec<u32>, bool)>, LoadError> {
        let (tok, path) = self.tokenizer.as_ref().ok_or_else(|| LoadError::Missing {
            dir: self.dir.clone(),
            what: "tokenizer.json",
            hint: "text embedding needs the tokenizer saved with `tokenizer.save_pretrained` \
                   (tokenizer.json, or spiece.model for SigLIP)"
                .into(),
        })?;
        texts
            .iter()
            .map(|t| {
                let cleaned;
                let t = if self.open_clip {
                    cleaned = open_clip_text::clean(t);
                    cleaned.as_str()
                } else {
                    t.as_str()
                };
                tok.encode(t, true)
                    .map(|e| (e.get_ids().to_vec(), !e.get_overflowing().is_empty()))
                    .map_err(|e| LoadError::Tokenizer { path: path.clone(), message: e.to_string() })
            })
            .collect()
    }

    /// Embeds token ids with the text tower.
    pub fn embed_ids(&self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, LoadError> {
        Ok(rows(self.text_features(ids)?))
    }

    /// The text features of token ids, left on the device.
    pub fn text_features(&self, ids: &[Vec<u32>]) -> Result<Tensor<2>, LoadError> {
        self.model
            .text_features(ids, &self.device)
            .map_err(|source| LoadError::Model { path: self.dir.join("config.json"), source })
    }
}

/// The tokenizer of the weights folder `dir` and the file it was read from, without the model:
/// `tokenizer.json`, or (when `spiece`, for SigLIP) the SentencePiece model its repositories ship
/// instead; `None` when the folder has neither.
#[cfg(feature = "files")]
pub fn read_tokenizer(
    dir: &Path,
    spiece: bool,
) -> Result<Option<(tokenizers::Tokenizer, PathBuf)>, LoadError> {
    folder_tokenizer(&folder::Dir(dir), spiece)
}

/// [`read_tokenizer`] of any [`Folder`].
pub fn folder_tokenizer<F: Folder + ?Sized>(
    folder: &F,
    spiece: bool,
) -> Result<Option<(tokenizers::Tokenizer, PathBuf)>, LoadError> {
    if folder.has("tokenizer.json") {
        let path = folder.path("tokenizer.json");
        Ok(Some((tokenizer_from_bytes(&folder.read("tokenizer.json")?, &path)?, path)))
    } else if spiece && folder.has("spiece.model") {
        let path = folder.path("spiece.model");
        Ok(Some((spiece::siglip_tokenizer_from_bytes(&folder.read("spiece.model")?, &path)?, path)))
    } else {
        Ok(None)
    }
}

/// Longest padding a `tokenizer.json` may ask for: every text tower read here takes at most 514
/// tokens. `"padding": {"strategy": {"Fixed": 4294967296}}` made every encoding allocate 17 GB
/// (found by the fuzz harness, `tokenizer.json`, seed 1, input 76,146).
pub const MAX_PADDING: usize = 1 << 16;

/// The tokenizer of a `tokenizer.json` file's `bytes` (`path` names it in errors). The
/// `tokenizers` crate panics on some malformed files (a JSON syntax error inside a component,
/// found by the fuzz harness), so the text is checked as JSON first and a panic left in the
/// crate is turned into an error too. A fixed padding length or multiple above
/// [`MAX_PADDING`] is refused, and so is a truncation whose stride does not fit (as
/// `Tokenizer::with_truncation` would refuse it).
pub fn tokenizer_from_bytes(bytes: &[u8], path: &Path) -> Result<tokenizers::Tokenizer, LoadError> {
    let bad = |message: String| LoadError::Tokenizer { path: path.to_owned(), message };
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
    let tokenizer = match std::panic::catch_unwind(|| tokenizers::Tokenizer::from_bytes(bytes)) {
        Ok(result) => result.map_err(|e| bad(e.to_string()))?,
        Err(_) => return Err(bad("not a tokenizer the tokenizers crate can read".to_string())),
    };
    // `tokenizers` checks the stride only in `with_truncation`, not when it reads a file, and
    // then panics while encoding (fuzz harness, `tokenizer.json`, seed 1, input 125,507).
    if let Some(t) = tokenizer.get_truncation() {
        use tokenizers::PostProcessor;
        let added = tokenizer.get_post_processor().map_or(0, |p| p.added_tokens(false));
        if t.max_length < added || (t.stride > 0 && t.stride >= t.max_length - added) {
            return Err(bad(format!(
                "truncation to {} tokens with stride {} and {added} special tokens: the stride must be less than the length left",
                t.max_length, t.stride
            )));
        }
    }
    if let Some(padding) = tokenizer.get_padding() {
        let fixed = match padding.strategy {
            tokenizers::PaddingStrategy::Fixed(n) => n,
            tokenizers::PaddingStrategy::BatchLongest => 0,
        };
        let longest = fixed.max(padding.pad_to_multiple_of.unwrap_or(0));
        if longest > MAX_PADDING {
            return Err(bad(format!("padding to {longest} tokens (at most {MAX_PADDING})")));
        }
    }
    Ok(tokenizer)
}

/// The tokenizer lens ([`culturelens_metrics::tokens`]): `text` as the tokenizer of the weights
/// folder `dir` splits it, special tokens included, no truncation; OpenCLIP folders get open_clip's
/// cleaning first, as when embedding. A token whose vocabulary piece differs from the text it
/// covers is the unknown token (SentencePiece's `<unk>`). Byte-level BPE (a `ByteLevel` decoder
/// or pre-tokenizer, as CLIP's) is read as such, every other tokenizer as SentencePiece pieces
/// ([`tokens::lens`]).
#[cfg(feature = "files")]
pub fn tokenizer_lens(dir: &Path, text: &str) -> Result<Vec<tokens::TokenView>, LoadError> {
    let open_clip = !dir.join("config.json").is_file() && dir.join("open_clip_config.json").is_file();
    let (mut tok, path) = read_tokenizer(dir, true)?.ok_or_else(|| LoadError::Missing {
        dir: dir.to_owned(),
        what: "tokenizer",
        hint: "expected tokenizer.json, or spiece.model as the SigLIP repositories ship it".into(),
    })?;
    tok.with_padding(None);
    tok.with_truncation(None)
        .map_err(|e| LoadError::Tokenizer { path: path.clone(), message: e.to_string() })?;
    let text = if open_clip { open_clip_text::clean(text) } else { text.to_string() };
    let encoding = tok
        .encode(text, true)
        .map_err(|e| LoadError::Tokenizer { path: path.clone(), message: e.to_string() })?;
    // The one reading of an encoding, shared with the browser's Tokens view.
    let encoded = tokens::Encoded {
        ids: encoding.get_ids(),
        pieces: encoding.get_tokens(),
        special_mask: encoding.get_special_tokens_mask(),
    };
    Ok(tokens::lens(encoded, |id| tok.id_to_token(id), tok.get_decoder(), tok.get_pre_tokenizer()))
}

/// Reads and decodes the image file at `path` and preprocesses it with `processor` (thread-safe:
/// the embed command decodes on several threads while the model runs).
#[cfg(feature = "files")]
pub fn read_pixel_values(processor: &ImageProcessor, path: &Path) -> Result<PixelValues, LoadError> {
    let decoded = decode_image(&read(path)?)
        .map_err(|source| LoadError::Preprocess { path: path.to_owned(), source })?;
    Ok(processor.pixel_values_decoded(&decoded))
}

/// Decodes image bytes to the pixels Pillow gives: JPEG with libjpeg-turbo's decoder (its C
/// code, [`jpeg`], natively; its Rust port, [`jpeg_rs`], without `native`), PNG and WebP with
/// the models crate's [`preprocess::decode`].
pub fn decode_image(bytes: &[u8]) -> Result<Decoded, PreprocessError> {
    if jpeg_rs::is_jpeg(bytes) {
        #[cfg(feature = "files")]
        let image = jpeg::decode(bytes)?;
        #[cfg(not(feature = "files"))]
        let image = jpeg_rs::decode(bytes)?;
        Ok(Decoded { image, palette_or_bilevel: false })
    } else {
        preprocess::decode(bytes)
    }
}

/// Reads a `[n, d]` tensor back to the host as rows (the one read-back of the embed path).
fn rows(t: Tensor<2>) -> Vec<Vec<f32>> {
    let [_, d] = t.dims();
    let values: Vec<f32> = t.into_data().convert::<f32>().try_into_vec::<f32>().expect("f32 embeddings");
    values.chunks(d.max(1)).map(<[f32]>::to_vec).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the fuzz harness (`crates/culturelens-fuzz`, target tokenizer.json): a JSON
    /// syntax error inside the `decoder` object made `tokenizers` panic instead of failing.
    #[test]
    fn a_malformed_tokenizer_json_is_an_error_not_a_panic() {
        let path = culturelens_testkit::fixture("encoders/clip/tokenizer.json");
        let good = std::fs::read_to_string(&path).unwrap();
        assert!(tokenizer_from_bytes(good.as_bytes(), &path).is_ok());
        let bad = good.replacen("\"decoder\": {", "\"decoder\":!{", 1);
        assert_ne!(bad, good);
        let err = tokenizer_from_bytes(bad.as_bytes(), &path).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}: ", path.display())) && err.contains("not JSON"), "{err}");
    }

    /// Found by the fuzz harness (`culturelens-fuzz --target tokenizer.json --seed 1`, input
    /// 76,146): a fixed padding of 2^32 tokens made every encoding allocate 17 GB.
    #[test]
    fn padding_beyond_the_limit_is_refused() {
        let path = culturelens_testkit::fixture("encoders/clip/tokenizer.json");
        let good = std::fs::read_to_string(&path).unwrap();
        let padded = |strategy: serde_json::Value, multiple: serde_json::Value| {
            let mut json: serde_json::Value = serde_json::from_str(&good).unwrap();
            json["padding"]["strategy"] = strategy;
            json["padding"]["pad_to_multiple_of"] = multiple;
            tokenizer_from_bytes(json.to_string().as_bytes(), &path)
        };
        use serde_json::json;
        assert!(padded(json!({"Fixed": 65536}), json!(null)).is_ok());
        let err = padded(json!({"Fixed": 4294967296u64}), json!(null)).unwrap_err().to_string();
        assert!(err.contains("padding to 4294967296 tokens (at most 65536)"), "{err}");
        let err = padded(json!("BatchLongest"), json!(70000)).unwrap_err().to_string();
        assert!(err.contains("padding to 70000 tokens"), "{err}");
    }

    /// Found by the fuzz harness (`culturelens-fuzz --target tokenizer.json --seed 1`, input
    /// 125,507): a truncation stride at least the length left made encoding panic.
    #[test]
    fn a_truncation_stride_that_does_not_fit_is_refused() {
        let path = culturelens_testkit::fixture("encoders/clip/tokenizer.json");
        let mut json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let mut with_stride = |max_length: u64, stride: u64| {
            json["truncation"]["max_length"] = max_length.into();
            json["truncation"]["stride"] = stride.into();
            tokenizer_from_bytes(json.to_string().as_bytes(), &path)
        };
        // CLIP adds 2 special tokens: 16 − 2 = 14 tokens are left for the text.
        assert!(with_stride(16, 13).is_ok());
        let err = with_stride(16, 14).unwrap_err().to_string();
        assert!(err.contains("truncation to 16 tokens with stride 14 and 2 special tokens"), "{err}");
        assert!(with_stride(1, 0).is_err());
    }
}
