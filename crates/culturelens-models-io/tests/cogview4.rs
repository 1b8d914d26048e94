//! CogView4 against transformers 5.23 and diffusers 0.42 on the fixtures of
//! `scripts/fixtures/make_diffusion_tiny_cogview4.py`: the tiny random-weight `GlmModel`'s
//! `hidden_states[k]` for every k (grouped-query attention with biases, head_dim ≠ hidden / heads,
//! the partial interleaved rotary embedding) on the left-padded ids CogView4's pipeline builds,
//! without a mask (as the pipeline calls it) and with the tokenizer's mask, and on an unpadded
//! row; and one `CogView4Transformer2DModel` call against diffusers' (non-square latents, size
//! conditions that differ from each other); on flex (CPU) and wgpu.

use std::path::PathBuf;

use burn::tensor::{Device, Tensor, TensorData};
use culturelens_diffusion::transformer_cogview4::{
    CogView4Transformer2DModel, CogView4TransformerConfig, rotary_embedding,
};
use culturelens_models::glm::{GlmConfig, GlmModel};
use culturelens_models::weights::Checkpoint;
use safetensors::SafeTensors;

/// `tests/fixtures/diffusion/` of this crate's repository (from this crate's own manifest
/// folder, as `culturelens_testkit::fixture` computes it from the testkit's).
fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/diffusion")
}

/// The reference tensors of `tiny-cogview4-glm.safetensors`.
struct Reference {
    bytes: Vec<u8>,
}

impl Reference {
    fn open() -> Self {
        Self { bytes: std::fs::read(fixtures().join("tiny-cogview4-glm.safetensors")).unwrap() }
    }

    fn values<T: Copy>(&self, name: &str, from: fn(&[u8]) -> T, width: usize) -> (Vec<usize>, Vec<T>) {
        let tensors = SafeTensors::deserialize(&self.bytes).unwrap();
        let view = tensors.tensor(name).unwrap();
        (view.shape().to_vec(), view.data().chunks_exact(width).map(from).collect())
    }

    fn f32s(&self, name: &str) -> Vec<f32> {
        self.values(name, |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]), 4).1
    }

    fn rows(&self, name: &str) -> Vec<Vec<i64>> {
        let (shape, v) = self.values(name, |b| i64::from_le_bytes(b.try_into().unwrap()), 8);
        v.chunks(shape[1]).map(<[i64]>::to_vec).collect()
    }

    fn ids(&self, name: &str) -> Vec<Vec<u32>> {
        self.rows(name).into_iter().map(|r| r.into_iter().map(|i| i as u32).collect()).collect()
    }
}

fn text_encoder(device: &Device) -> GlmModel {
    let dir = fixtures().join("tiny-cogview4").join("text_encoder");
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let checkpoint = Checkpoint::from_bytes(&bytes, device).unwrap();
    GlmConfig::load(&json, checkpoint.vars()).unwrap()
}

/// The hidden states' bound on flex and wgpu alike: about twice the worst case measured on
/// either (printed with `--nocapture`).
const BOUND: f32 = 4e-6;

fn check_glm(device: &Device) {
    let reference = Reference::open();
    let model = text_encoder(device);
    assert_eq!(model.num_layers(), 3);
    let padded = reference.ids("ids.padded");
    let mask: Vec<Vec<bool>> =
        reference.rows("mask.padded").into_iter().map(|r| r.into_iter().map(|m| m == 1).collect()).collect();
    assert!(mask.iter().flatten().any(|m| !m), "the fixture's batch is padded");
    let single = reference.ids("ids.single");
    let mut worst = (0.0f32, String::new());
    for (name, ids, mask) in
        [("nomask", &padded, None), ("masked", &padded, Some(mask.as_slice())), ("single", &single, None)]
    {
        for k in 0..=3 {
            let got = model
                .hidden_state(ids, mask, k, device)
                .into_data()
                .convert::<f32>()
                .try_into_vec::<f32>()
                .unwrap();
            let want = reference.f32s(&format!("{name}.{k}"));
            assert_eq!(got.len(), want.len(), "{name}.{k}");
            let err = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max);
            println!("glm {name} hidden_states[{k}]: max abs {err:.2e}");
            if err > worst.0 || err.is_nan() {
                worst = (err, format!("{name} hidden_states[{k}]"));
            }
        }
    }
    assert!(worst.0 <= BOUND, "glm {}: max abs {:.2e}", worst.1, worst.0);
}

#[test]
fn glm_hidden_states_match_transformers_on_flex() {
    check_glm(&Device::flex());
}

#[test]
fn glm_hidden_states_match_transformers_on_wgpu() {
    check_glm(&culturelens_testkit::wgpu());
}

#[test]
fn a_glm_checkpoint_of_other_shapes_is_refused_with_the_key() {
    let device = Device::flex();
    let dir = fixtures().join("tiny-cogview4").join("text_encoder");
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let checkpoint = Checkpoint::from_bytes(&bytes, &device).unwrap();
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let e = GlmConfig::load(
        &json.replace("\"intermediate_size\": 40", "\"intermediate_size\": 20"),
        checkpoint.vars(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("layers.0.mlp.gate_up_proj.weight") && e.contains("[40, 32]"), "{e}");
    let e = GlmConfig::load(
        &json.replace("\"attention_bias\": true", "\"attention_bias\": false"),
        checkpoint.vars(),
    )
    .map(|_| ())
    .err();
    assert!(e.is_none(), "a bias-free config reads the weights it needs and ignores the biases");
    let e = GlmConfig::load(&json.replace("\"head_dim\": 12", "\"head_dim\": 8"), checkpoint.vars())
        .unwrap_err()
        .to_string();
    assert!(e.contains("layers.0.self_attn.q_proj.weight"), "{e}");
}

fn transformer(device: &Device) -> CogView4Transformer2DModel {
    let dir = fixtures().join("tiny-cogview4").join("transformer");
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let bytes = std::fs::read(dir.join("diffusion_pytorch_model.safetensors")).unwrap();
    let checkpoint = Checkpoint::from_bytes(&bytes, device).unwrap();
    CogView4TransformerConfig::load(&json, checkpoint.vars()).unwrap()
}

/// The transformer output's bound on flex and wgpu alike: about twice the worst case measured.
const TRANSFORMER_BOUND: f32 = 1e-6;

/// One call of `CogView4Transformer2DModel` on non-square latents (8 × 4 patches) with size
/// conditions that differ from each other (original 48 × 24, crop (4, 8), target 32 × 16).
fn check_transformer(device: &Device) {
    let bytes = std::fs::read(fixtures().join("tiny-cogview4-transformer.safetensors")).unwrap();
    let tensors = SafeTensors::deserialize(&bytes).unwrap();
    let get = |name: &str| {
        let view = tensors.tensor(name).unwrap();
        let values: Vec<f32> =
            view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        (view.shape().to_vec(), values)
    };
    let model = transformer(device);
    let (shape, latents) = get("latents");
    let latents =
        Tensor::<4>::from_data(TensorData::new(latents, [shape[0], shape[1], shape[2], shape[3]]), device);
    let (shape, context) = get("context");
    let context = Tensor::<3>::from_data(TensorData::new(context, [shape[0], shape[1], shape[2]]), device);
    let t = get("timestep").1[0];
    let sizes: [f32; 6] = get("sizes").1.try_into().unwrap();
    let c = &model.config;
    let rope = rotary_embedding(
        c.attention_head_dim,
        [c.rope_axes_dim[0], c.rope_axes_dim[1]],
        16 / c.patch_size,
        8 / c.patch_size,
        device,
    );
    let got = model.forward(latents, context, t, &sizes, &rope).into_data().try_into_vec::<f32>().unwrap();
    let want = get("out").1;
    assert_eq!(got.len(), want.len());
    let err = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max);
    println!("cogview4 transformer: max abs {err:.2e}");
    assert!(err <= TRANSFORMER_BOUND, "cogview4 transformer: max abs {err:.2e}");
}

#[test]
fn transformer_matches_diffusers_on_flex() {
    check_transformer(&Device::flex());
}

#[test]
fn transformer_matches_diffusers_on_wgpu() {
    check_transformer(&culturelens_testkit::wgpu());
}
