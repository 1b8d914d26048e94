//! A weights folder as a set of named files, wherever its bytes come from: a directory on disk
//! ([`Dir`], the CLI) or files already in memory ([`Files`], the browser, which fetched them
//! from a URL or read them from a dropped folder). Everything that decides what a folder is —
//! which files hold the weights (`model.safetensors` or the shards of its index), which
//! checkpoint tensors a header lists, which config and tokenizer are read — is written once here
//! against [`Folder`], so the page loads a folder exactly as `culturelens embed` does.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::tensor::{Device, FloatDType};
use culturelens_models::ModelError;
use culturelens_models::weights::{Checkpoint, Shard};
use serde::Deserialize;

use crate::LoadError;

/// A folder of named files (`config.json`, `model.safetensors`, …).
pub trait Folder {
    /// Where the file `name` lives, as errors name it (a path, or the URL it was fetched from).
    fn path(&self, name: &str) -> PathBuf;
    /// Whether the folder holds `name`.
    fn has(&self, name: &str) -> bool;
    /// The bytes of `name` (borrowed where the folder already holds them).
    fn read(&self, name: &str) -> Result<Cow<'_, [u8]>, LoadError>;

    /// The safetensors file `name` as a checkpoint [`Shard`]: by default its bytes; a folder
    /// on disk reads it a tensor at a time instead, so the file is never held whole.
    fn shard(&self, name: &str) -> Result<Shard<'_>, LoadError> {
        self.read(name).map(Shard::Bytes)
    }

    /// The text of `name` (UTF-8).
    fn read_string(&self, name: &str) -> Result<String, LoadError> {
        let bytes = self.read(name)?.into_owned();
        String::from_utf8(bytes).map_err(|e| LoadError::Io {
            path: self.path(name),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })
    }
}

/// A directory on disk.
#[cfg(feature = "files")]
pub struct Dir<'a>(pub &'a Path);

#[cfg(feature = "files")]
impl Folder for Dir<'_> {
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn has(&self, name: &str) -> bool {
        self.0.join(name).is_file()
    }

    fn read(&self, name: &str) -> Result<Cow<'_, [u8]>, LoadError> {
        crate::read(&self.0.join(name)).map(Cow::Owned)
    }

    fn shard(&self, name: &str) -> Result<Shard<'_>, LoadError> {
        let path = self.0.join(name);
        let file = std::fs::File::open(&path).map_err(|source| LoadError::Io { path, source })?;
        Ok(Shard::Reader(Box::new(std::sync::Mutex::new(file))))
    }
}

/// Files held in memory under their names in the folder, with the place they came from
/// (`base`: a URL ending in `/`, or a dropped folder's name) for messages.
#[derive(Default)]
pub struct Files {
    pub base: String,
    pub files: BTreeMap<String, Vec<u8>>,
}

impl Folder for Files {
    fn path(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("{}{name}", self.base))
    }

    fn has(&self, name: &str) -> bool {
        self.files.contains_key(name)
    }

    fn read(&self, name: &str) -> Result<Cow<'_, [u8]>, LoadError> {
        self.files.get(name).map(|b| Cow::Borrowed(b.as_slice())).ok_or_else(|| LoadError::Io {
            path: self.path(name),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "not among the folder's files"),
        })
    }
}

#[derive(Deserialize)]
struct ShardIndex {
    weight_map: BTreeMap<String, String>,
}

/// The shard file names of a `*.safetensors.index.json` (`bytes`; `path` names it in errors),
/// sorted and without repeats.
pub fn shard_names(bytes: &[u8], path: &Path) -> Result<Vec<String>, LoadError> {
    let parsed: ShardIndex =
        serde_json::from_slice(bytes).map_err(|source| LoadError::Json { path: path.to_owned(), source })?;
    let mut files: Vec<String> = parsed.weight_map.into_values().collect();
    files.sort();
    files.dedup();
    if let Some(bad) = files.iter().find(|f| f.contains("..") || f.starts_with('/')) {
        return Err(LoadError::Invalid {
            path: path.to_owned(),
            message: format!("shard `{bad}` is not a file name inside the folder"),
        });
    }
    Ok(files)
}

/// The safetensors files `{stem}.safetensors`, or the shards named by
/// `{stem}.safetensors.index.json`, of `folder`; when there are none, an error that names the
/// first of `pickled` found (a checkpoint culturelens does not unpickle) with `convert`'s hint.
pub fn weight_files<F: Folder + ?Sized>(
    folder: &F,
    stem: &str,
    pickled: &[&str],
    convert: impl Fn(&Path) -> String,
) -> Result<Vec<String>, LoadError> {
    let single = format!("{stem}.safetensors");
    if folder.has(&single) {
        return Ok(vec![single]);
    }
    let index = format!("{stem}.safetensors.index.json");
    if folder.has(&index) {
        return shard_names(&folder.read(&index)?, &folder.path(&index));
    }
    let hint = match pickled.iter().find(|f| folder.has(f)) {
        Some(f) => format!(
            "found {f}, a pickled checkpoint, which culturelens does not unpickle; {}",
            convert(&folder.path(""))
        ),
        None => format!("expected {stem}.safetensors or {stem}.safetensors.index.json"),
    };
    Err(LoadError::Missing { dir: folder.path(""), what: "safetensors weights", hint })
}

/// The safetensors files of an encoder folder: `model.safetensors`, or the shards named by
/// `model.safetensors.index.json`.
pub fn encoder_weight_files<F: Folder + ?Sized>(folder: &F) -> Result<Vec<String>, LoadError> {
    weight_files(folder, "model", &["pytorch_model.bin", "model.pt", "model.bin"], |dir| {
        format!(
            "convert it with `python -c \"from transformers import AutoModel; AutoModel.from_pretrained('{}').save_pretrained('OUT', safe_serialization=True)\"`",
            dir.display()
        )
    })
}

/// Opens the shards `files` of one checkpoint in `folder` ([`Folder::shard`]) and builds the model with `build`
/// in the float type `dtype` ([`Checkpoint::with_dtype`]), mapping a weights error to the first shard and any other error to `config_path`.
pub fn load_model<T, F: Folder + ?Sized>(
    folder: &F,
    files: &[String],
    config_path: &Path,
    device: &Device,
    dtype: FloatDType,
    build: impl FnOnce(&Checkpoint) -> Result<T, ModelError>,
) -> Result<T, LoadError> {
    let shards = files.iter().map(|f| folder.shard(f)).collect::<Result<Vec<_>, _>>()?;
    let weights_path = folder.path(&files[0]);
    let checkpoint = Checkpoint::open(shards, device)
        .map_err(|e| LoadError::Model { path: weights_path.clone(), source: e.into() })?
        .with_dtype(dtype);
    build(&checkpoint).map_err(|source| {
        let path =
            if matches!(source, ModelError::Weights(_)) { weights_path } else { config_path.to_owned() };
        LoadError::Model { path, source }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(names: &[(&str, &[u8])]) -> Files {
        Files {
            base: "https://host/m/".into(),
            files: names.iter().map(|(n, b)| (n.to_string(), b.to_vec())).collect(),
        }
    }

    #[test]
    fn a_single_file_wins_over_an_index() {
        let f = files(&[("model.safetensors", b""), ("model.safetensors.index.json", b"{}")]);
        assert_eq!(encoder_weight_files(&f).unwrap(), ["model.safetensors"]);
    }

    #[test]
    fn an_index_lists_its_shards_once_in_order() {
        let index = br#"{"weight_map": {"a": "model-2.safetensors", "b": "model-1.safetensors", "c": "model-2.safetensors"}}"#;
        let f = files(&[("model.safetensors.index.json", index)]);
        assert_eq!(encoder_weight_files(&f).unwrap(), ["model-1.safetensors", "model-2.safetensors"]);
        let escape = br#"{"weight_map": {"a": "../secret.safetensors"}}"#;
        let err = encoder_weight_files(&files(&[("model.safetensors.index.json", escape)])).unwrap_err();
        assert!(err.to_string().contains("../secret.safetensors"), "{err}");
    }

    #[test]
    fn a_pickled_checkpoint_is_named_with_the_folder() {
        let err = encoder_weight_files(&files(&[("pytorch_model.bin", b"")])).unwrap_err().to_string();
        assert!(err.starts_with("https://host/m/: no safetensors weights (found pytorch_model.bin"), "{err}");
        let err = encoder_weight_files(&files(&[])).unwrap_err().to_string();
        assert!(err.contains("expected model.safetensors or model.safetensors.index.json"), "{err}");
    }
}
