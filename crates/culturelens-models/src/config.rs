//! Reading a model's JSON configs as transformers' config classes read them: a family's preset
//! (the class defaults, which are one known model's values) with every key the file sets laid
//! over it, nested configs (`text_config`, `vision_config`) key by key, and `null` taken as "not
//! set" — transformers 4.x `save_pretrained` writes `"do_convert_rgb": null` and the like.
//!
//! Each family's config type derives `Serialize` and `Deserialize` with no serde defaults of its
//! own; its preset is one literal (`ClipConfig::clip_vit_base_patch32()`), so a default is written
//! once, where a reader looks for the model's shape.

use serde::Serialize;
use serde::de::{DeserializeOwned, Error as _};
use serde_json::Value;

/// Parses `json` as a `T`: `preset` with the file's keys laid over it (`null` values ignored).
/// Keys in `required` must be in the file (the error is serde's "missing field").
pub fn from_json<T: Serialize + DeserializeOwned>(
    json: &str,
    preset: &T,
    required: &[&'static str],
) -> Result<T, serde_json::Error> {
    from_value(serde_json::from_str(json)?, preset, required)
}

/// [`from_json`] of an already parsed value.
pub fn from_value<T: Serialize + DeserializeOwned>(
    value: Value,
    preset: &T,
    required: &[&'static str],
) -> Result<T, serde_json::Error> {
    let value = without_nulls(value);
    if let Some(fields) = value.as_object()
        && let Some(missing) = required.iter().find(|key| !fields.contains_key(**key))
    {
        return Err(serde_json::Error::missing_field(missing));
    }
    let mut merged = serde_json::to_value(preset)?;
    overlay(&mut merged, value);
    let config = T::deserialize(merged)?;
    check_integers(&serde_json::to_value(&config)?, "")?;
    Ok(config)
}

/// Largest magnitude a number of a parsed config may have, integer or float: above every size,
/// count, token id and ratio of the model families read here (the largest, XLM-R's vocabulary,
/// is 250,002), and small enough that the products a model is built from (a patch's
/// `channels × patch²`, a layer's `in × out`, `hidden × mlp_ratio`) stay far from overflowing.
/// A config beyond it is refused before any module is built. Floats count too: `"mlp_ratio":
/// 18446744073709551616` (a float to serde) overflowed `hidden × mlp_ratio` (fuzz harness,
/// `config.json`, seed 1, input 4764).
pub const MAX_CONFIG_INTEGER: u64 = 1 << 20;

/// Most layers (transformer layers of a tower, resnet or transformer blocks of a UNet or VAE) a
/// config may build: far above every real model (the largest ViT towers have 48 layers, SDXL's
/// UNet about 140 blocks) and small enough that the lazily initialised module tree, which is
/// built before any weight is read, stays within a few MB. Without it a `config.json` with
/// `"layers_per_block": 65535` made the VAE decoder allocate 0.95 GB of (empty) modules (found
/// by the fuzz harness, `vae-config.json`, seed 1, input 1604).
pub const MAX_LAYERS: usize = 1024;

/// Refuses a config that builds more than [`MAX_LAYERS`] layers; `key` names the setting.
pub fn check_layers(key: &str, layers: usize) -> Result<(), serde_json::Error> {
    if layers > MAX_LAYERS {
        return Err(serde_json::Error::custom(format!(
            "config key `{key}`: the model would have {layers} layers (at most {MAX_LAYERS})"
        )));
    }
    Ok(())
}

/// The shape rules of a ViT tower, checked before any module is built (`prefix` is the tower's
/// key path, `"vision_config."` or empty): at least one attention head, heads that split the
/// width evenly, and for an image tower (`patch` = `(image_size, patch_size)`) a patch of at
/// least one pixel that fits in the image. `"patch_size": 0` divided by zero (fuzz harness,
/// `config.json`, seed 1, input 8475).
pub fn check_tower(
    prefix: &str,
    hidden_size: usize,
    num_attention_heads: usize,
    patch: Option<(usize, usize)>,
) -> Result<(), serde_json::Error> {
    let bad = |key: &str, what: String| {
        Err(serde_json::Error::custom(format!("config key `{prefix}{key}`: {what}")))
    };
    if num_attention_heads == 0 || !hidden_size.is_multiple_of(num_attention_heads) {
        return bad(
            "num_attention_heads",
            format!("{num_attention_heads} heads do not split hidden_size {hidden_size} evenly"),
        );
    }
    if let Some((image_size, patch_size)) = patch
        && (patch_size == 0 || patch_size > image_size)
    {
        return bad("patch_size", format!("{patch_size} is not between 1 and image_size {image_size}"));
    }
    Ok(())
}

/// Refuses a number of the parsed config beyond [`MAX_CONFIG_INTEGER`] in magnitude, naming its key
/// path (`vision_config.patch_size`).
fn check_integers(value: &Value, path: &str) -> Result<(), serde_json::Error> {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(v) if v.abs() > MAX_CONFIG_INTEGER as f64 => Err(serde_json::Error::custom(format!(
                "config key `{path}` = {n} is out of range (at most {MAX_CONFIG_INTEGER} in magnitude)"
            ))),
            _ => Ok(()),
        },
        Value::Object(fields) => fields.iter().try_for_each(|(key, v)| {
            let inner = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
            check_integers(v, &inner)
        }),
        Value::Array(items) => {
            items.iter().enumerate().try_for_each(|(i, v)| check_integers(v, &format!("{path}[{i}]")))
        }
        _ => Ok(()),
    }
}

/// `value` with every object member whose value is `null` removed, at any depth (array
/// elements are kept: a `null` in a list is a value, not an unset key).
pub fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, without_nulls(v))).collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

/// Lays `over` onto `base`: objects merge key by key (recursively), anything else replaces.
fn overlay(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(&key) {
                    Some(slot) => overlay(slot, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (slot, value) => *slot = value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[test]
    fn an_integer_beyond_the_limit_is_refused_with_its_key() {
        // Found by the fuzz harness (config.json, seed 1, input 2814): patch_size 2^32 overflowed
        // a product while the model was built.
        let json = r#"{"model_type": "dinov2", "patch_size": 4294967296}"#;
        let err = crate::dinov2::Dinov2Config::from_json(json).unwrap_err().to_string();
        assert!(err.contains("config key `patch_size` = 4294967296 is out of range"), "{err}");
        let json = r#"{"model_type": "clip", "text_config": {}, "vision_config": {"patch_size": 1048577}}"#;
        let err = crate::clip::ClipConfig::from_json(json).unwrap_err().to_string();
        assert!(err.contains("`vision_config.patch_size` = 1048577"), "{err}");
        let json = r#"{"model_type": "clip", "text_config": {}, "vision_config": {"image_size": 1048576, "patch_size": 1048576}}"#;
        assert!(crate::clip::ClipConfig::from_json(json).is_ok());
        // Found by the fuzz harness (config.json, seed 1, input 4764): a float that overflowed
        // `hidden × mlp_ratio`.
        let json = r#"{"model_type": "dinov2", "mlp_ratio": 18446744073709551616}"#;
        let err = crate::dinov2::Dinov2Config::from_json(json).unwrap_err().to_string();
        assert!(err.contains("config key `mlp_ratio` = 1.8446744073709552e+19 is out of range"), "{err}");
        let json = r#"{"model_type": "dinov2", "layer_norm_eps": -2e6}"#;
        assert!(crate::dinov2::Dinov2Config::from_json(json).is_err());
    }

    #[test]
    fn towers_with_a_zero_patch_or_heads_that_do_not_split_the_width_are_refused() {
        // Found by the fuzz harness (config.json, seed 1, input 8475): a division by zero.
        let json =
            r#"{"model_type": "dinov2", "hidden_size": 32, "num_attention_heads": 4, "patch_size": 0}"#;
        let err = crate::dinov2::Dinov2Config::from_json(json).unwrap_err().to_string();
        assert!(err.contains("config key `patch_size`: 0 is not between 1 and image_size 224"), "{err}");
        let json = r#"{"model_type": "clip", "text_config": {"hidden_size": 30, "num_attention_heads": 4}, "vision_config": {}}"#;
        let err = crate::clip::ClipConfig::from_json(json).unwrap_err().to_string();
        assert!(
            err.contains("`text_config.num_attention_heads`: 4 heads do not split hidden_size 30 evenly"),
            "{err}"
        );
        let json = r#"{"model_type": "siglip", "text_config": {}, "vision_config": {"image_size": 8, "patch_size": 16}}"#;
        let err = crate::siglip::SiglipConfig::from_json(json).unwrap_err().to_string();
        assert!(err.contains("`vision_config.patch_size`: 16 is not between 1 and image_size 8"), "{err}");
    }

    #[test]
    fn a_config_with_too_many_layers_is_refused_with_its_key() {
        let json = r#"{"model_type": "dinov2", "num_hidden_layers": 1025}"#;
        let err = crate::dinov2::Dinov2Config::from_json(json).unwrap_err().to_string();
        assert!(
            err.contains("`num_hidden_layers`: the model would have 1025 layers (at most 1024)"),
            "{err}"
        );
        let json = r#"{"model_type": "dinov2", "num_hidden_layers": 1024}"#;
        assert!(crate::dinov2::Dinov2Config::from_json(json).is_ok());
        let json = r#"{"model_type": "clip", "text_config": {"num_hidden_layers": 1000}, "vision_config": {"num_hidden_layers": 25}}"#;
        let err = crate::clip::ClipConfig::from_json(json).unwrap_err().to_string();
        assert!(err.contains("`num_hidden_layers`: the model would have 1025 layers"), "{err}");
        let json =
            r#"{"model_type": "siglip", "text_config": {"num_hidden_layers": 2000}, "vision_config": {}}"#;
        assert!(crate::siglip::SiglipConfig::from_json(json).is_err());
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Tower {
        width: usize,
        name: Option<String>,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Model {
        tower: Tower,
        flag: bool,
        sizes: Vec<Option<u32>>,
    }

    fn preset() -> Model {
        Model { tower: Tower { width: 8, name: Some("p".into()) }, flag: true, sizes: vec![Some(1)] }
    }

    #[test]
    fn file_keys_override_the_preset_and_null_means_unset() {
        let got: Model = from_json(
            r#"{"tower": {"width": 3, "name": null}, "flag": null, "sizes": [null, 4]}"#,
            &preset(),
            &[],
        )
        .unwrap();
        // `width` set, `name` null → the preset's; `flag` null → the preset's; a list replaces.
        assert_eq!(
            got,
            Model {
                tower: Tower { width: 3, name: Some("p".into()) },
                flag: true,
                sizes: vec![None, Some(4)]
            }
        );
        let got: Model = from_json("{}", &preset(), &[]).unwrap();
        assert_eq!(got, preset());
    }

    #[test]
    fn required_keys_and_wrong_types_fail() {
        let err = from_json::<Model>(r#"{"flag": false}"#, &preset(), &["tower"]).unwrap_err();
        assert_eq!(err.to_string(), "missing field `tower`");
        let err = from_json::<Model>(r#"{"tower": null}"#, &preset(), &["tower"]).unwrap_err();
        assert_eq!(err.to_string(), "missing field `tower`");
        let err = from_json::<Model>(r#"{"flag": "yes"}"#, &preset(), &[]).unwrap_err();
        assert!(err.to_string().contains("expected a boolean"), "{err}");
        assert!(from_json::<Model>("{", &preset(), &[]).unwrap_err().to_string().contains("line 1"));
    }
}
