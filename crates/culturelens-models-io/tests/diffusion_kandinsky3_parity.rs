//! Parity with diffusers 0.42 on the committed tiny random-weight Kandinsky 3 pipeline
//! (`scripts/fixtures/make_diffusion_tiny_kandinsky3.py`): the MoVQ decoder
//! (`movq.decode(latents, force_not_quantize=True)`, spatial norms, an attention up block) and
//! the `Kandinsky3UNet` (with a text mask whose second row is all zeros) component by component,
//! on flex (CPU) and wgpu.

use std::path::PathBuf;

use burn::tensor::{Device, Tensor, TensorData};
use culturelens_diffusion::unet_kandinsky3::Kandinsky3UNetConfig;
use culturelens_diffusion::vq_model::VqModelConfig;
use culturelens_models::weights::Checkpoint;
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    movq: Movq,
    unet: Unet,
}

#[derive(Deserialize)]
struct Movq {
    latents: Vec<f32>,
    latents_shape: Vec<usize>,
    sample: Vec<f32>,
    sample_shape: Vec<usize>,
}

#[derive(Deserialize)]
struct Unet {
    sample: Vec<f32>,
    sample_shape: Vec<usize>,
    timestep: f32,
    states: Vec<f32>,
    states_shape: Vec<usize>,
    mask: Vec<f32>,
    output: Vec<f32>,
    output_shape: Vec<usize>,
}

fn fixtures() -> PathBuf {
    culturelens_testkit::fixture("diffusion")
}

fn fixture() -> Fixture {
    let json = std::fs::read_to_string(fixtures().join("tiny-kandinsky3.json")).unwrap();
    serde_json::from_str(&json).unwrap()
}

/// `(config.json, safetensors bytes)` of a component of the tiny pipeline.
fn component(name: &str) -> (String, Vec<u8>) {
    let dir = fixtures().join("tiny-kandinsky3").join(name);
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
    (json, std::fs::read(dir.join("diffusion_pytorch_model.safetensors")).unwrap())
}

fn max_abs(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    got.iter().zip(want).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max)
}

fn tensor<const D: usize>(values: &[f32], shape: &[usize], device: &Device) -> Tensor<D> {
    Tensor::from_data(TensorData::new(values.to_vec(), shape.to_vec()), device)
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_into_vec::<f32>().unwrap()
}

/// The MoVQ decoder's max abs error against diffusers on `device`.
fn movq_error(device: &Device) -> f32 {
    let f = fixture().movq;
    let (json, bytes) = component("movq");
    let checkpoint = Checkpoint::from_bytes(&bytes, device).unwrap();
    let movq = VqModelConfig::load(&json, checkpoint.vars()).unwrap();
    let out = movq.decode(tensor(&f.latents, &f.latents_shape, device));
    assert_eq!(out.dims().to_vec(), f.sample_shape);
    max_abs(&values(out), &f.sample)
}

/// The UNet's max abs error against diffusers on `device`.
fn unet_error(device: &Device) -> f32 {
    let f = fixture().unet;
    let (json, bytes) = component("unet");
    let checkpoint = Checkpoint::from_bytes(&bytes, device).unwrap();
    let unet = Kandinsky3UNetConfig::load(&json, checkpoint.vars()).unwrap();
    let [b, l] = [f.states_shape[0], f.states_shape[1]];
    let out = unet.forward(
        tensor(&f.sample, &f.sample_shape, device),
        f.timestep,
        tensor(&f.states, &f.states_shape, device),
        tensor(&f.mask, &[b, l], device),
    );
    assert_eq!(out.dims().to_vec(), f.output_shape);
    max_abs(&values(out), &f.output)
}

/// Components' bounds on the CPU and on wgpu, each 1.5–3× the error measured there (flex:
/// MoVQ 1.6e-6, UNet 5.1e-6; wgpu on lavapipe: 1.7e-6 and 4.0e-6).
const MOVQ_CPU: f32 = 4e-6;
const UNET_CPU: f32 = 1e-5;
const MOVQ_WGPU: f32 = 4e-6;
const UNET_WGPU: f32 = 1e-5;

#[test]
fn movq_decoder_matches_diffusers_on_flex() {
    let err = movq_error(&Device::flex());
    println!("movq decode on flex: max abs {err:.2e}");
    assert!(err <= MOVQ_CPU, "{err:.2e}");
}

#[test]
fn unet_matches_diffusers_on_flex() {
    let err = unet_error(&Device::flex());
    println!("Kandinsky3UNet on flex: max abs {err:.2e}");
    assert!(err <= UNET_CPU, "{err:.2e}");
}

#[test]
fn components_match_diffusers_on_wgpu() {
    let device = culturelens_testkit::wgpu();
    let (movq, unet) = (movq_error(&device), unet_error(&device));
    println!("on wgpu: movq decode max abs {movq:.2e}, Kandinsky3UNet max abs {unet:.2e}");
    assert!(movq <= MOVQ_WGPU, "movq {movq:.2e}");
    assert!(unet <= UNET_WGPU, "unet {unet:.2e}");
}

#[test]
fn component_configs_are_refused_by_key() {
    let (movq, _) = component("movq");
    let e = VqModelConfig::from_json(
        &movq.replace("\"lookup_from_codebook\": false", "\"lookup_from_codebook\": true"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("`lookup_from_codebook`"), "{e}");
    let e = VqModelConfig::from_json(&movq.replace("\"norm_type\": \"spatial\"", "\"norm_type\": \"batch\""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("`norm_type`"), "{e}");
    let e = VqModelConfig::from_json(&movq.replace("\"vq_embed_dim\": 4", "\"vq_embed_dim\": 3"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("`vq_embed_dim`"), "{e}");
    let (unet, _) = component("unet");
    let e =
        Kandinsky3UNetConfig::from_json(&unet.replace("\"layers_per_block\": 2", "\"layers_per_block\": 1"))
            .unwrap_err()
            .to_string();
    assert!(e.contains("`layers_per_block`"), "{e}");
    let e = Kandinsky3UNetConfig::from_json(&unet.replace("\"groups\": 2", "\"groups\": 3"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("`groups`"), "{e}");
    let e = Kandinsky3UNetConfig::from_json(
        &unet.replace("\"attention_head_dim\": 4", "\"attention_head_dim\": 3"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("`attention_head_dim`"), "{e}");
    let e = Kandinsky3UNetConfig::from_json(
        &unet.replace("\"block_out_channels\": [\n    8,", "\"block_out_channels\": [\n    6,"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("`block_out_channels`"), "{e}");
}
