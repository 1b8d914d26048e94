//! `null` in a config file means "not set", as in transformers (whose 4.x `save_pretrained`
//! writes `"do_convert_rgb": null` into SigLIP's preprocessor_config.json) and open_clip: for
//! every key of every committed fixture config (config.json, preprocessor_config.json,
//! open_clip_config.json of each family), the file with that key set to `null` reads exactly as
//! the file without the key — the same config, or the same error for a required key — and keys
//! the hub's files carry as `null` but the fixtures lack read as absent too.

use burn::tensor::Device;
use culturelens_models::clip::ClipConfig;
use culturelens_models::dinov2::Dinov2Config;
use culturelens_models::efficientnet::EfficientNetLiteConfig;
use culturelens_models::open_clip::OpenClipFile;
use culturelens_models::preprocess::ImageProcessorConfig;
use culturelens_models::siglip::SiglipConfig;
use culturelens_models_io::Encoder;
use culturelens_testkit::fixture;
use serde_json::{Value, json};

/// What a config file reads as: the config's debug form (with the pipeline a preprocessor
/// config resolves to), or the error. `name` is `model/file`; the family of a config.json is
/// the one of the committed file, so a nulled `model_type` still reads with its family.
fn read(name: &str, json: &str) -> Result<String, String> {
    let (model, file) = name.split_once('/').unwrap();
    let model_type = match model {
        "dinov2_reg" => "dinov2",
        "efficientnet_lite0" => "efficientnet_lite",
        other => other,
    };
    match (file, Some(model_type)) {
        ("preprocessor_config.json", _) => ImageProcessorConfig::from_json(json)
            .map_err(|e| e.to_string())
            .and_then(|c| c.processor().map(|p| format!("{c:?} {p:?}")).map_err(|e| e.to_string())),
        ("open_clip_config.json", _) => OpenClipFile::from_json(json)
            .and_then(|f| Ok(format!("{f:?} {:?}", f.model_cfg.clip_config()?)))
            .map_err(|e| e.to_string()),
        (_, Some("clip")) => ClipConfig::from_json(json).map(|c| format!("{c:?}")).map_err(|e| e.to_string()),
        (_, Some("siglip")) => {
            SiglipConfig::from_json(json).map(|c| format!("{c:?}")).map_err(|e| e.to_string())
        }
        (_, Some("dinov2" | "dinov2_with_registers")) => {
            Dinov2Config::from_json(json).map(|c| format!("{c:?}")).map_err(|e| e.to_string())
        }
        (_, Some("efficientnet_lite")) => {
            EfficientNetLiteConfig::from_json(json).map(|c| format!("{c:?}")).map_err(|e| e.to_string())
        }
        other => panic!("no reader for {file} of model_type {other:?}"),
    }
}

/// The paths of every object member of `value` (`["text_config", "hidden_size"]`, …).
fn member_paths(value: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    if let Value::Object(fields) = value {
        for (key, child) in fields {
            prefix.push(key.clone());
            out.push(prefix.clone());
            member_paths(child, prefix, out);
            prefix.pop();
        }
    }
}

/// `value` with the member at `path` set to `null` (`Some(Value::Null)`) or removed (`None`).
fn with_member(value: &Value, path: &[String], new: Option<Value>) -> Value {
    let mut value = value.clone();
    let (last, parents) = path.split_last().unwrap();
    let mut object = &mut value;
    for key in parents {
        object = object.get_mut(key).unwrap();
    }
    let fields = object.as_object_mut().unwrap();
    match new {
        Some(v) => fields.insert(last.clone(), v),
        None => fields.remove(last),
    };
    value
}

/// Every committed config file with the efficientnet config `import-weights` writes.
fn config_files() -> Vec<(String, String)> {
    let mut files = Vec::new();
    for model in ["clip", "siglip", "dinov2", "dinov2_reg", "open_clip"] {
        for file in ["config.json", "preprocessor_config.json", "open_clip_config.json"] {
            let path = fixture("encoders").join(model).join(file);
            if path.is_file() {
                files.push((format!("{model}/{file}"), std::fs::read_to_string(path).unwrap()));
            }
        }
    }
    let (config, processor) = culturelens_models_io::import::arch_configs("efficientnet-lite0").unwrap();
    files.push(("efficientnet_lite0/config.json".into(), config));
    files.push(("efficientnet_lite0/preprocessor_config.json".into(), processor));
    files
}

#[test]
fn every_key_set_to_null_reads_as_absent() {
    let mut checked = 0;
    let mut required = Vec::new();
    for (name, json) in config_files() {
        let value: Value = serde_json::from_str(&json).unwrap();
        assert!(read(&name, &json).is_ok(), "{name} itself must read");
        let mut paths = Vec::new();
        member_paths(&value, &mut Vec::new(), &mut paths);
        for path in paths {
            let nulled = with_member(&value, &path, Some(Value::Null)).to_string();
            let absent = with_member(&value, &path, None).to_string();
            let (got, want) = (read(&name, &nulled), read(&name, &absent));
            assert_eq!(got, want, "{name}: {} = null", path.join("."));
            if got.is_err() {
                required.push(format!("{name}:{}", path.join(".")));
            }
            checked += 1;
        }
    }
    eprintln!("{checked} keys checked; required (error when absent or null): {required:?}");
    assert!(checked > 150, "only {checked} keys");
    // The required keys are the towers, the variant and OpenCLIP's model fields — nothing else.
    assert!(required.iter().any(|k| k.ends_with("clip/config.json:text_config")), "{required:?}");
    assert!(required.iter().any(|k| k.ends_with("efficientnet_lite0/config.json:variant")), "{required:?}");
}

/// Keys the hub's files write as `null` (transformers 4.x `save_pretrained`, open_clip's
/// `push_to_hf_hub`), absent from the committed fixtures: set to `null`, the file reads as
/// before.
#[test]
fn hub_style_null_keys_read_as_absent() {
    let hub_nulls: [(&str, &[&str]); 8] = [
        ("clip/config.json", &["projection_dim", "text_config.pad_token_id", "vision_config.hidden_act"]),
        ("clip/preprocessor_config.json", &["do_convert_rgb", "image_processor_type", "rescale_factor"]),
        (
            "siglip/config.json",
            &["text_config.projection_size", "text_config.pad_token_id", "vision_config.num_channels"],
        ),
        ("siglip/preprocessor_config.json", &["do_convert_rgb", "do_center_crop", "crop_size"]),
        ("dinov2_reg/config.json", &["num_register_tokens", "use_swiglu_ffn", "layer_norm_eps", "qkv_bias"]),
        ("dinov2/preprocessor_config.json", &["do_convert_rgb", "resample"]),
        (
            "open_clip/open_clip_config.json",
            &["model_cfg.quick_gelu", "model_cfg.vision_cfg.ls_init_value", "preprocess_cfg.resize_mode"],
        ),
        ("efficientnet_lite0/config.json", &["num_classes", "batch_norm_epsilon"]),
    ];
    let files = config_files();
    for (name, keys) in hub_nulls {
        let json = &files.iter().find(|(n, _)| n == name).unwrap().1;
        let mut nulled: Value = serde_json::from_str(json).unwrap();
        let mut absent = nulled.clone();
        for key in keys {
            let path: Vec<String> = key.split('.').map(str::to_owned).collect();
            nulled = with_member(&nulled, &path, Some(Value::Null));
            absent = with_member(&absent, &path, None);
            let got = read(name, &nulled.to_string());
            assert!(got.is_ok(), "{name} with {key} null: {got:?}");
            assert_eq!(got, read(name, &absent.to_string()), "{name}: {key}");
        }
    }
}

/// The reported case end to end: a SigLIP folder whose preprocessor_config.json holds
/// `"do_convert_rgb": null` (transformers 4.x) embeds exactly as the committed one.
#[test]
fn siglip_folder_with_null_do_convert_rgb_embeds() {
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixture("encoders/siglip")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), tmp.path().join(entry.file_name())).unwrap();
    }
    let path = tmp.path().join("preprocessor_config.json");
    let mut processor: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    processor["do_convert_rgb"] = Value::Null;
    processor["processor_class"] = json!("SiglipProcessor");
    std::fs::write(&path, processor.to_string()).unwrap();

    let device = Device::flex();
    let image = fixture("encoders/images/c_rgba.png");
    let ours = Encoder::from_dir(tmp.path(), &device).unwrap();
    let committed = Encoder::from_dir(&fixture("encoders/siglip"), &device).unwrap();
    let (a, b) = (ours.pixel_values(&image).unwrap(), committed.pixel_values(&image).unwrap());
    assert_eq!(a, b);
    assert_eq!(ours.embed_pixels(&[a]), committed.embed_pixels(&[b]));
}
