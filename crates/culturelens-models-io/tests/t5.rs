//! T5 against transformers 5.23 on the fixtures of `scripts/fixtures/make_t5.py`:
//! the tokenizer's ids on 1,400 prompts of the four prompt sets in all their 35 (set, language)
//! pairs, read here with culturelens-prompts from the data mirror (a SentencePiece model with
//! NFKC read from `spiece.model`, a second one from transformers' `tokenizer.json`), and the
//! tiny gated-GELU and ReLU `T5EncoderModel`s' `final_layer_norm(hidden_states[k])` for every k
//! on flex and wgpu, with torch's relative-position buckets.

use std::path::PathBuf;

use burn::tensor::Device;
use culturelens_files::sha256_hex;
use culturelens_models::t5::{T5Config, T5EncoderModel, relative_position_bucket};
use culturelens_models::weights::Checkpoint;
use culturelens_models_io::t5_tokenizer::T5Tokenizer;
use culturelens_prompts::{Fetcher, LoadOptions, Origin, PromptSet};
use safetensors::SafeTensors;
use serde::Deserialize;

fn fixtures() -> PathBuf {
    culturelens_testkit::fixture("t5")
}

#[derive(Deserialize)]
struct Tokens {
    per_pair: usize,
    text_sha256: Vec<String>,
    nfkc: Expected,
    identity: Expected,
}

#[derive(Deserialize)]
struct Expected {
    ids_sha256: Vec<String>,
    full: Vec<Full>,
}

#[derive(Deserialize)]
struct Full {
    text: String,
    max_length: usize,
    ids: Vec<u32>,
}

/// The fixture's prompts: `per_pair` of every (set, language) pair, pairs in the order the four
/// tables list them, each at rows `floor(i · n / per_pair)` of the pair's n rows.
pub(crate) fn sampled_prompts(per_pair: usize) -> Vec<String> {
    let mirror = culturelens_testkit::upstream_mirror();
    let cache = tempfile::tempdir().unwrap();
    let fetcher = Fetcher::new(cache.path().to_owned(), Origin::Mirror(mirror));
    let mut pairs: Vec<((PromptSet, String), Vec<String>)> = Vec::new();
    for set in [PromptSet::Sos, PromptSet::Magbig, PromptSet::Cube, PromptSet::Cultext2i] {
        let table = culturelens_prompts::load(set, &fetcher, &LoadOptions::default()).unwrap();
        for row in table.rows {
            let key = (set, row.language.clone());
            match pairs.iter_mut().find(|(k, _)| *k == key) {
                Some((_, texts)) => texts.push(row.prompt),
                None => pairs.push((key, vec![row.prompt])),
            }
        }
    }
    assert_eq!(pairs.len(), 35, "(set, language) pairs of the four sets");
    let mut prompts = Vec::new();
    for (_, texts) in pairs {
        let step = texts.len() as f64 / per_pair as f64;
        let mut picks: Vec<usize> = (0..per_pair).map(|i| (i as f64 * step) as usize).collect();
        picks.dedup();
        prompts.extend(picks.into_iter().map(|i| texts[i].clone()));
    }
    prompts
}

pub(crate) fn short_sha(text: &str) -> String {
    sha256_hex(text.as_bytes())[..12].to_string()
}

#[test]
fn tokenizer_ids_equal_transformers_on_the_four_prompt_sets() {
    let tokens: Tokens =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("tokens.json")).unwrap()).unwrap();
    let prompts = sampled_prompts(tokens.per_pair);
    assert_eq!(prompts.len(), tokens.text_sha256.len());
    assert!(prompts.len() >= 1000, "{} prompts", prompts.len());
    for (i, (text, sha)) in prompts.iter().zip(&tokens.text_sha256).enumerate() {
        assert_eq!(&short_sha(text), sha, "prompt {i} ({text:?}) is not the one the fixture was made from");
    }
    for (dir, expected) in [("nfkc", &tokens.nfkc), ("identity", &tokens.identity)] {
        let tokenizer = T5Tokenizer::load(&fixtures().join(dir), 64).unwrap();
        let mut wrong = Vec::new();
        for (text, want) in prompts.iter().zip(&expected.ids_sha256) {
            let ids = tokenizer.ids(text).unwrap();
            let joined: Vec<String> = ids.iter().map(u32::to_string).collect();
            if &short_sha(&joined.join(",")) != want {
                wrong.push(text.clone());
            }
        }
        println!(
            "{dir}: {} of {} prompts with transformers' ids",
            prompts.len() - wrong.len(),
            prompts.len()
        );
        assert!(
            wrong.is_empty(),
            "{dir}: {} prompts differ, e.g. {:?}",
            wrong.len(),
            &wrong[..wrong.len().min(5)]
        );
        for case in &expected.full {
            let tokenizer = T5Tokenizer::load(&fixtures().join(dir), case.max_length).unwrap();
            assert_eq!(
                tokenizer.ids(&case.text).unwrap(),
                case.ids,
                "{dir}: {:?} to {}",
                case.text,
                case.max_length
            );
        }
    }
}

#[test]
fn a_folder_without_a_tokenizer_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let e = T5Tokenizer::load(tmp.path(), 8).err().unwrap().to_string();
    assert!(e.contains("no T5 tokenizer (expected tokenizer.json or spiece.model)"), "{e}");
    std::fs::write(tmp.path().join("spiece.model"), b"\xff\xff not a model").unwrap();
    let e = T5Tokenizer::load(tmp.path(), 8).err().unwrap().to_string();
    assert!(e.contains("spiece.model") && e.contains("not a SentencePiece model"), "{e}");
}

/// The reference tensors of `tiny-t5-reference.safetensors`.
struct Reference {
    bytes: Vec<u8>,
}

impl Reference {
    fn open() -> Self {
        Self { bytes: std::fs::read(fixtures().join("tiny-t5-reference.safetensors")).unwrap() }
    }

    fn values<T: Copy>(&self, name: &str, from: fn(&[u8]) -> T, width: usize) -> (Vec<usize>, Vec<T>) {
        let tensors = SafeTensors::deserialize(&self.bytes).unwrap();
        let view = tensors.tensor(name).unwrap();
        (view.shape().to_vec(), view.data().chunks_exact(width).map(from).collect())
    }

    fn f32s(&self, name: &str) -> Vec<f32> {
        self.values(name, |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]), 4).1
    }

    fn i64s(&self, name: &str) -> (Vec<usize>, Vec<i64>) {
        self.values(name, |b| i64::from_le_bytes(b.try_into().unwrap()), 8)
    }
}

fn encoder(name: &str, device: &Device) -> T5EncoderModel {
    let dir = fixtures().join(format!("tiny-t5-{name}"));
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let checkpoint = Checkpoint::from_bytes(&bytes, device).unwrap();
    T5Config::load(&json, checkpoint.vars()).unwrap()
}

/// The hidden states' bound: about twice the worst case measured on flex and wgpu (values up to
/// 3; the unscaled attention of the randomly perturbed weights has large logits).
const BOUND: f32 = 1e-5;

/// Every layer of both encoders through the final layer norm, as transformers'
/// `final_layer_norm(hidden_states[k])` (k = 3: `last_hidden_state`).
fn check_encoders(device: &Device) {
    let reference = Reference::open();
    let (shape, ids) = reference.i64s("ids");
    let ids: Vec<Vec<u32>> = ids.chunks(shape[1]).map(|r| r.iter().map(|&i| i as u32).collect()).collect();
    let mut worst = (0.0f32, String::new());
    for name in ["gated", "relu"] {
        let model = encoder(name, device);
        assert_eq!(model.num_layers(), 3);
        for k in 0..=3 {
            let got =
                model.encode(&ids, k, device).into_data().convert::<f32>().try_into_vec::<f32>().unwrap();
            let want = reference.f32s(&format!("{name}.lens.{k}"));
            assert_eq!(got.len(), want.len());
            let err = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max);
            println!("t5 {name} layer {k}: max abs {err:.2e}");
            if err > worst.0 {
                worst = (err, format!("{name} layer {k}"));
            }
        }
    }
    assert!(worst.0 <= BOUND, "t5 {}: max abs {:.2e}", worst.1, worst.0);
}

#[test]
fn encoders_match_transformers_on_flex() {
    check_encoders(&Device::flex());
}

#[test]
fn encoders_match_transformers_on_wgpu() {
    check_encoders(&culturelens_testkit::wgpu());
}

#[test]
fn relative_position_buckets_equal_torch() {
    let reference = Reference::open();
    for (buckets, distance) in [(32, 128), (8, 20)] {
        let (_, want) = reference.i64s(&format!("buckets.{buckets}-{distance}"));
        let got: Vec<i64> =
            (-600i64..=600).map(|r| relative_position_bucket(r, buckets, distance) as i64).collect();
        assert_eq!(got, want, "{buckets} buckets, max distance {distance}");
    }
}

#[test]
fn a_checkpoint_of_other_shapes_is_refused_with_the_key() {
    let device = Device::flex();
    let dir = fixtures().join("tiny-t5-gated");
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let checkpoint = Checkpoint::from_bytes(&bytes, &device).unwrap();
    let json =
        std::fs::read_to_string(dir.join("config.json")).unwrap().replace("\"d_ff\": 12", "\"d_ff\": 10");
    let e = T5Config::load(&json, checkpoint.vars()).unwrap_err().to_string();
    assert!(e.contains("encoder.block.0.layer.1.DenseReluDense.wi_0.weight") && e.contains("[10, 8]"), "{e}");
    // A ReLU config over the gated checkpoint asks for `wi`, which it lacks.
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap().replace("gated-gelu", "relu");
    let e = T5Config::load(&json, checkpoint.vars()).unwrap_err().to_string();
    assert!(e.contains("no tensor `encoder.block.0.layer.1.DenseReluDense.wi.weight`"), "{e}");
}
