//! `--model ORG/NAME[@REVISION]` (the CLI's `embed`/`generate`; the Python package's
//! `from_pretrained` of a hub id): the weights folder of a Hugging Face hub repository, downloaded
//! with `hf-hub` into its standard cache (`$HF_HOME/hub`, default `~/.cache/huggingface/hub`,
//! shared with transformers and huggingface_hub; `HF_ENDPOINT` selects a mirror). Files already
//! in the cache are not downloaded again, so a second run works offline.
//!
//! One run reads one commit: the first file resolves `REVISION` (a branch, tag or commit sha;
//! default `main`) to the commit the hub (or the cache's `refs/REVISION`) names, and every
//! further file is asked for at that commit, so a branch that moves between two requests, or a
//! cache that holds part of an older commit of the branch, never mixes files of two commits.
//!
//! Only what `embed` reads is fetched, and only safetensors: `config.json`, `model.safetensors`
//! (or `model.safetensors.index.json` and its shards), `preprocessor_config.json` and
//! `tokenizer.json` (else `spiece.model`) when the repository has them — or, for an OpenCLIP repository without a
//! transformers config, `open_clip_config.json` and `open_clip_model.safetensors`.

use std::path::{Path, PathBuf};

use crate::diffusion::pipeline_components;
use anyhow::{Context, Result, bail};
use hf_hub::api::sync::{ApiBuilder, ApiError, ApiRepo};
use hf_hub::{Repo, RepoType};

/// A `--model` argument: `org/name` or `org/name@revision`.
fn parse(model: &str) -> Result<Repo> {
    let (id, revision) = match model.split_once('@') {
        Some((id, rev)) if !rev.is_empty() => (id, rev.to_string()),
        Some(_) => bail!("--model {model:?}: empty revision after @"),
        None => (model, "main".to_string()),
    };
    if id.split('/').count() != 2 || id.split('/').any(str::is_empty) {
        bail!("--model {model:?}: expected a hub id ORG/NAME, optionally @REVISION");
    }
    Ok(Repo::with_revision(id.to_string(), RepoType::Model, revision))
}

fn is_not_found(err: &ApiError) -> bool {
    matches!(err, ApiError::RequestError(e) if matches!(**e, ureq::Error::Status(404, _)))
}

/// Downloads `file` (or finds it in the cache); `None` if the repository has no such file.
fn optional(repo: &ApiRepo, model: &str, file: &str) -> Result<Option<PathBuf>> {
    match repo.get(file) {
        Ok(path) => Ok(Some(path)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e).with_context(|| format!("--model {model}: cannot download {file}")),
    }
}

fn required(repo: &ApiRepo, model: &str, file: &str) -> Result<PathBuf> {
    optional(repo, model, file)?.with_context(|| format!("--model {model}: the repository has no {file}"))
}

/// The commit a file of the cache or the hub belongs to: the name of its snapshot folder
/// (`…/snapshots/COMMIT/FILE`).
fn commit_of(file: &Path) -> Result<String> {
    file.parent()
        .and_then(Path::file_name)
        .and_then(|c| c.to_str())
        .map(str::to_owned)
        .with_context(|| format!("{}: not in a hub snapshot folder", file.display()))
}

/// The local snapshot folder of `model` with every file `embed` needs.
pub fn snapshot(model: &str) -> Result<PathBuf> {
    let api = ApiBuilder::from_env().with_progress(true).build().context("cannot set up the hub client")?;
    let wanted = parse(model)?;
    // The config fixes the commit (and the layout); every other file is read at that commit.
    let at_revision = api.repo(wanted.clone());
    let (config, transformers) = match optional(&at_revision, model, "config.json")? {
        Some(config) => (config, true),
        None => {
            let config = optional(&at_revision, model, "open_clip_config.json")?.with_context(|| {
                format!("--model {model}: the repository has neither config.json nor open_clip_config.json")
            })?;
            (config, false)
        }
    };
    let repo = api.repo(Repo::with_revision(wanted.url(), RepoType::Model, commit_of(&config)?));
    if !transformers {
        required(&repo, model, "open_clip_model.safetensors")?;
    } else {
        if optional(&repo, model, "model.safetensors")?.is_none() {
            let index = optional(&repo, model, "model.safetensors.index.json")?.with_context(|| {
                format!(
                    "--model {model}: no model.safetensors or model.safetensors.index.json \
                     (culturelens reads only safetensors weights)"
                )
            })?;
            for shard in shard_files(&index)? {
                required(&repo, model, &shard)?;
            }
        }
        optional(&repo, model, "preprocessor_config.json")?;
    }
    // SigLIP repositories ship a SentencePiece model instead of a tokenizer.json.
    if optional(&repo, model, "tokenizer.json")?.is_none() {
        optional(&repo, model, "spiece.model")?;
    }
    let dir = config.parent().map(Path::to_path_buf).context("cached file without a folder")?;
    Ok(dir)
}

/// The local snapshot folder of the diffusers pipeline `model` (`generate --model`): its
/// `model_index.json` fixes the commit and names the pipeline class, then each component that
/// class's loader reads (`pipeline_components`: SD's, SDXL's, SD 3's, FLUX's or Lumina 2's) is fetched — a
/// model's config and safetensors weights (single file or shards), a tokenizer's files. With
/// `weights: false` only the configs and tokenizers are fetched (what `generate` checks a request
/// against before it downloads gigabytes); a second call with `true` adds the weights.
pub fn snapshot_pipeline(model: &str, weights: bool) -> Result<PathBuf> {
    let api = ApiBuilder::from_env().with_progress(true).build().context("cannot set up the hub client")?;
    let wanted = parse(model)?;
    let index = required(&api.repo(wanted.clone()), model, "model_index.json")?;
    let repo = api.repo(Repo::with_revision(wanted.url(), RepoType::Model, commit_of(&index)?));
    let text = std::fs::read_to_string(&index).with_context(|| format!("cannot read {}", index.display()))?;
    let classes: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", index.display()))?;
    let class = classes["_class_name"].as_str().unwrap_or("");
    let components = pipeline_components(class).with_context(|| {
        format!(
            "--model {model}: model_index.json `_class_name`: `{class}` is not a pipeline culturelens runs"
        )
    })?;
    required(&repo, model, "scheduler/scheduler_config.json")?;
    // A combined pipeline's prior (Kandinsky 2.1's `prior_scheduler`).
    optional(&repo, model, "prior_scheduler/scheduler_config.json")?;
    for component in components {
        if component.contains("tokenizer") {
            for file in TOKENIZER_FILES {
                optional(&repo, model, &format!("{component}/{file}"))?;
            }
            continue;
        }
        required(&repo, model, &format!("{component}/config.json"))?;
        if !weights {
            continue;
        }
        // transformers' components save `model.safetensors`, diffusers' the longer name.
        let library = classes[component][0].as_str().unwrap_or("");
        let stem = if library == "transformers" { "model" } else { "diffusion_pytorch_model" };
        let single = format!("{component}/{stem}.safetensors");
        if optional(&repo, model, &single)?.is_none() {
            let index = optional(&repo, model, &format!("{single}.index.json"))?.with_context(|| {
                format!("--model {model}: no {single} or its .index.json (culturelens reads only safetensors weights)")
            })?;
            for shard in shard_files(&index)? {
                required(&repo, model, &format!("{component}/{shard}"))?;
            }
        }
    }
    index.parent().map(Path::to_path_buf).context("cached file without a folder")
}

/// The files a pipeline's tokenizer folder may have, each fetched when the repository has it.
const TOKENIZER_FILES: [&str; 8] = [
    "tokenizer.json",
    "vocab.json",
    "merges.txt",
    "sentencepiece.bpe.model",
    "spiece.model",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
];

/// The shard file names of a `model.safetensors.index.json`.
fn shard_files(index: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(index).with_context(|| format!("cannot read {}", index.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", index.display()))?;
    let map =
        value["weight_map"].as_object().with_context(|| format!("{}: no weight_map", index.display()))?;
    let mut files: Vec<String> = map.values().filter_map(|v| v.as_str().map(str::to_owned)).collect();
    files.sort();
    files.dedup();
    for f in &files {
        if f.contains('/') || f.contains("..") || !f.ends_with(".safetensors") {
            bail!("{}: unexpected shard name {f:?}", index.display());
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ids_parse_with_optional_revision() {
        let repo = parse("laion/CLIP-ViT-bigG-14-laion2B-39B-b160k").unwrap();
        assert_eq!(repo.url(), "laion/CLIP-ViT-bigG-14-laion2B-39B-b160k");
        assert_eq!(repo.revision(), "main");
        assert_eq!(parse("openai/clip-vit-large-patch14@abc123").unwrap().revision(), "abc123");
        for bad in ["clip", "a/b/c", "/b", "a/", "a/b@"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
