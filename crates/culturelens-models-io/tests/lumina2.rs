//! Lumina 2 against diffusers 0.42.1 / transformers 5.23 on the fixtures of
//! `scripts/fixtures/make_diffusion_tiny_lumina2.py`: the tiny `Gemma2Model`'s
//! `hidden_states[k]` for every k (a padded batch with a row longer than the sliding window, a
//! right- and a left-padded row, and an unpadded batch), and the tiny
//! `Lumina2Transformer2DModel` of the `tiny-lumina2` pipeline on two batches, on flex and wgpu.

use burn::tensor::Device;
use culturelens_diffusion::transformer_lumina2::{Lumina2Transformer2DModel, Lumina2TransformerConfig};
use culturelens_models::gemma2::{Gemma2Config, Gemma2Model};
use culturelens_models::weights::Checkpoint;
use safetensors::SafeTensors;

fn fixture(rel: &str) -> std::path::PathBuf {
    culturelens_testkit::fixture(&format!("diffusion/{rel}"))
}

/// The reference tensors of a safetensors file.
struct Reference {
    bytes: Vec<u8>,
}

impl Reference {
    fn open(name: &str) -> Self {
        Self { bytes: std::fs::read(fixture(name)).unwrap() }
    }

    fn values<T: Copy>(&self, name: &str, from: fn(&[u8]) -> T, width: usize) -> (Vec<usize>, Vec<T>) {
        let tensors = SafeTensors::deserialize(&self.bytes).unwrap();
        let view = tensors.tensor(name).unwrap();
        (view.shape().to_vec(), view.data().chunks_exact(width).map(from).collect())
    }

    fn f32s(&self, name: &str) -> Vec<f32> {
        self.values(name, |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]), 4).1
    }

    /// An int64 matrix as rows of u32.
    fn rows(&self, name: &str) -> Vec<Vec<u32>> {
        let (shape, v) = self.values(name, |b| i64::from_le_bytes(b.try_into().unwrap()), 8);
        v.chunks(shape[1]).map(|r| r.iter().map(|&i| i as u32).collect()).collect()
    }
}

fn gemma2(device: &Device) -> Gemma2Model {
    let dir = fixture("tiny-lumina2-gemma2");
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let checkpoint = Checkpoint::from_bytes(&bytes, device).unwrap();
    Gemma2Config::load(&json, checkpoint.vars()).unwrap()
}

/// The hidden states' bound, flex and wgpu alike: about twice the worst case measured (5.3e-6
/// on flex, 4.3e-6 on wgpu; values up to 11).
const BOUND: f32 = 1e-5;

fn check_gemma2(device: &Device) {
    let reference = Reference::open("tiny-lumina2-gemma2-reference.safetensors");
    let model = gemma2(device);
    assert_eq!(model.num_layers(), 4);
    let mut worst = (0.0f32, String::new());
    for batch in ["padded", "unpadded"] {
        let ids = reference.rows(&format!("{batch}.ids"));
        let mask = reference.rows(&format!("{batch}.mask"));
        for k in 0..=4 {
            let got = model
                .hidden_state(&ids, &mask, k, device)
                .into_data()
                .convert::<f32>()
                .try_into_vec::<f32>()
                .unwrap();
            let want = reference.f32s(&format!("{batch}.hidden.{k}"));
            assert_eq!(got.len(), want.len());
            let err = culturelens_testkit::max_abs(&got, &want);
            println!("gemma2 {batch} hidden_states[{k}]: max abs {err:.2e}");
            if err > worst.0 {
                worst = (err, format!("{batch} hidden_states[{k}]"));
            }
        }
    }
    assert!(worst.0 <= BOUND, "gemma2 {}: max abs {:.2e}", worst.1, worst.0);
}

#[test]
fn gemma2_hidden_states_match_transformers_on_flex() {
    check_gemma2(&Device::flex());
}

#[test]
fn gemma2_hidden_states_match_transformers_on_wgpu() {
    check_gemma2(&culturelens_testkit::wgpu());
}

#[test]
fn a_gemma2_checkpoint_of_other_shapes_is_refused_with_the_key() {
    let device = Device::flex();
    let dir = fixture("tiny-lumina2-gemma2");
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let checkpoint = Checkpoint::from_bytes(&bytes, &device).unwrap();
    let json = std::fs::read_to_string(dir.join("config.json"))
        .unwrap()
        .replace("\"intermediate_size\": 48", "\"intermediate_size\": 40");
    let e = Gemma2Config::load(&json, checkpoint.vars()).unwrap_err().to_string();
    assert!(e.contains("layers.0.mlp.gate_proj.weight") && e.contains("[40, 32]"), "{e}");
}

fn transformer(device: &Device) -> Lumina2Transformer2DModel {
    let dir = fixture("tiny-lumina2/transformer");
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let bytes = std::fs::read(dir.join("diffusion_pytorch_model.safetensors")).unwrap();
    let checkpoint = Checkpoint::from_bytes(&bytes, device).unwrap();
    Lumina2TransformerConfig::load(&json, checkpoint.vars()).unwrap()
}

/// The transformer's bound, flex and wgpu alike: about 2.5 times the worst case measured (7.8e-7
/// on both; outputs up to 1.9).
const TRANSFORMER_BOUND: f32 = 2e-6;

/// `Lumina2Transformer2DModel(x, t, caption, mask)` for captions of different lengths (the
/// joint attention masked) and of equal lengths (unmasked, a non-square latent).
fn check_transformer(device: &Device) {
    let reference = Reference::open("tiny-lumina2-reference.safetensors");
    let model = transformer(device);
    let mut worst = 0.0f32;
    for batch in ["mixed", "equal"] {
        let (x_shape, _) = reference.values(&format!("{batch}.x"), |b| b[0], 4);
        let (cap_shape, _) = reference.values(&format!("{batch}.caption"), |b| b[0], 4);
        let tensor = |name: &str, shape: &[usize]| {
            burn::tensor::TensorData::new(reference.f32s(&format!("{batch}.{name}")), shape.to_vec())
        };
        let x = burn::tensor::Tensor::<4>::from_data(tensor("x", &x_shape), device);
        let caption = burn::tensor::Tensor::<3>::from_data(tensor("caption", &cap_shape), device);
        let t = reference.f32s(&format!("{batch}.t"));
        let lengths: Vec<usize> =
            reference.rows(&format!("{batch}.mask")).iter().map(|r| r.iter().sum::<u32>() as usize).collect();
        let got = model
            .forward(x, &t, caption, &lengths)
            .into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .unwrap();
        let want = reference.f32s(&format!("{batch}.out"));
        let err = culturelens_testkit::max_abs(&got, &want);
        println!("lumina2 transformer {batch} (caption lengths {lengths:?}): max abs {err:.2e}");
        worst = worst.max(err);
    }
    assert!(worst <= TRANSFORMER_BOUND, "lumina2 transformer: max abs {worst:.2e}");
}

#[test]
fn transformer_matches_diffusers_on_flex() {
    check_transformer(&Device::flex());
}

#[test]
fn transformer_matches_diffusers_on_wgpu() {
    check_transformer(&culturelens_testkit::wgpu());
}
