//! The name a table gives the model that made its rows: `generate`'s `model` column (the
//! pipeline) and `embed`/`embed-text`'s `encoder` column (the encoder). One rule for both:
//! the name the user gives (`--model-name`, `--encoder-name`), else the `--model` hub id, else the
//! `_name_or_path` that `save_pretrained` wrote into the folder's config when it is a hub id
//! `ORG/NAME` (diffusers writes the id a pipeline was loaded from into `model_index.json`;
//! transformers 4 wrote it into `config.json`, transformers 5 no longer does), else the folder's
//! own name. A local path in `_name_or_path` (a pipeline loaded from a folder) is not used: it
//! names the saving machine's folder, not the model.

use std::path::Path;

use crate::work::resume::canonical;

/// A `--model-name` or `--encoder-name`: not empty, one line (a CSV cell and a figure label).
pub fn parse_name(text: &str) -> Result<String, String> {
    if text.trim().is_empty() || text.contains(['\n', '\r']) {
        return Err("a model name is a non-empty single line".into());
    }
    Ok(text.to_string())
}

/// The default name of the model in `dir` (read with `--model hub_id`, if given) whose config
/// file is `config` (`model_index.json`, `config.json`).
pub fn default_name(hub_id: Option<&str>, dir: &Path, config: &str) -> String {
    if let Some(id) = hub_id {
        return id.to_string();
    }
    if let Some(id) = saved_hub_id(&dir.join(config)) {
        return id;
    }
    canonical(dir).file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// The `_name_or_path` of the JSON file `config` when it is a hub id.
fn saved_hub_id(config: &Path) -> Option<String> {
    let text = std::fs::read_to_string(config).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    let name = json.get("_name_or_path")?.as_str()?;
    is_hub_id(name).then(|| name.to_string())
}

/// `ORG/NAME` as the hub spells a repository: two non-empty parts of letters, digits, `-`, `_`
/// and `.`, neither starting with `.` (so `./x`, `../x`, `/abs/x` and `x/` are paths).
fn is_hub_id(name: &str) -> bool {
    let parts: Vec<&str> = name.split('/').collect();
    parts.len() == 2
        && parts.iter().all(|p| {
            !p.is_empty()
                && !p.starts_with('.')
                && p.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_ids_and_paths() {
        for id in ["stabilityai/stable-diffusion-xl-base-1.0", "openai/clip-vit-large-patch14", "a_b/c.d"] {
            assert!(is_hub_id(id), "{id}");
        }
        for path in
            ["/work/sd", "./sd/x", "../x/y", "clip-vit-large-patch14/", "x", "a/b/c", "C:\\x\\y", "a b/c"]
        {
            assert!(!is_hub_id(path), "{path}");
        }
    }

    #[test]
    fn the_name_comes_from_the_flag_the_config_or_the_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("pipeline");
        std::fs::create_dir(&dir).unwrap();
        assert_eq!(default_name(None, &dir, "model_index.json"), "pipeline", "no config");
        std::fs::write(dir.join("model_index.json"), r#"{"_name_or_path": "/home/me/sd"}"#).unwrap();
        assert_eq!(default_name(None, &dir, "model_index.json"), "pipeline", "a path");
        std::fs::write(dir.join("model_index.json"), r#"{"_name_or_path": "org/sd-tiny"}"#).unwrap();
        assert_eq!(default_name(None, &dir, "model_index.json"), "org/sd-tiny");
        assert_eq!(default_name(Some("hub/id"), &dir, "model_index.json"), "hub/id");
        assert!(parse_name(" ").is_err() && parse_name("a\nb").is_err());
    }
}
