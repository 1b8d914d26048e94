//! Parity with diffusers 0.31 (`scripts/fixtures/make_diffusion_schedulers.py`): every
//! case runs the whole denoising loop with the recorded model outputs and compares the
//! timesteps, the initial noise scale, every scaled UNet input and every step's output.

use burn::tensor::{Device, Tensor, TensorData};
use serde::Deserialize;

use super::{Scheduler, SchedulerKind};

#[derive(Deserialize)]
struct Fixture {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    config: String,
    scheduler: String,
    steps: usize,
    timesteps: Vec<f32>,
    init_noise_sigma: f32,
    initial: Vec<f32>,
    calls: Vec<Call>,
}

#[derive(Deserialize)]
struct Call {
    model_output: Vec<f32>,
    scaled: Vec<f32>,
    out: Vec<f32>,
}

fn tensor(values: &[f32], device: &Device) -> Tensor<4> {
    Tensor::from_data(TensorData::new(values.to_vec(), [1, 2, 1, 2]), device)
}

/// Largest |got − want| / (1 + |want|).
fn rel_err(got: &Tensor<4>, want: &[f32]) -> f32 {
    let got = got.to_data().try_to_vec::<f32>().unwrap();
    got.iter().zip(want).map(|(g, w)| (g - w).abs() / (1.0 + w.abs())).fold(0.0, f32::max)
}

#[test]
fn matches_diffusers_step_by_step() {
    let fixture: Fixture =
        serde_json::from_str(&culturelens_testkit::read_fixture("diffusion/schedulers.json")).unwrap();
    assert!(fixture.cases.len() >= 70);
    let device = Device::flex();
    let mut worst = (0.0f32, String::new());
    for case in &fixture.cases {
        let kind = SchedulerKind::parse(&case.scheduler).unwrap();
        let mut scheduler =
            Scheduler::from_config(&case.config, Some(kind)).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        scheduler.set_timesteps(case.steps).unwrap();
        assert_eq!(scheduler.timesteps(), case.timesteps, "{}: timesteps", case.name);
        let sigma = scheduler.init_noise_sigma();
        assert!(
            (sigma - case.init_noise_sigma).abs() <= 1e-6 * case.init_noise_sigma,
            "{}: init_noise_sigma {sigma} vs {}",
            case.name,
            case.init_noise_sigma
        );
        let mut sample = tensor(&case.initial, &device);
        for (i, call) in case.calls.iter().enumerate() {
            let scaled = scheduler.scale_model_input(sample.clone(), i);
            let e = rel_err(&scaled, &call.scaled);
            assert!(e < 1e-6, "{} call {i}: scaled input off by {e}", case.name);
            sample = scheduler.step(tensor(&call.model_output, &device), i, sample);
            let e = rel_err(&sample, &call.out);
            if e > worst.0 {
                worst = (e, format!("{} call {i}", case.name));
            }
            assert!(e < 2e-6, "{} call {i}: step output off by {e}", case.name);
            // Continue from diffusers' own output so that errors do not compound.
            sample = tensor(&call.out, &device);
        }
    }
    eprintln!("worst relative step error {:.2e} at {}", worst.0, worst.1);
}

#[test]
fn pndm_runge_kutta_warm_up_timesteps_and_its_step_floor() {
    // AltDiffusion's config has no `skip_prk_steps`; PNDM built from it takes the class default
    // (false): the Runge–Kutta warm-up, whose images are checked against diffusers on the tiny
    // AltDiffusion pipeline (culturelens-models-io's diffusion_parity). Its timesteps for 4 steps
    // (r = 250, steps_offset 1), as diffusers lists them: 3 warm-up steps of 4 calls, then PLMS.
    let config = r#"{"_class_name": "DPMSolverMultistepScheduler", "steps_offset": 1}"#;
    let mut s = Scheduler::from_config(config, Some(SchedulerKind::Pndm)).unwrap();
    s.set_timesteps(4).unwrap();
    let want = [751, 626, 626, 501, 501, 376, 376, 251, 251, 126, 126, 1, 1];
    assert_eq!(s.timesteps(), want.map(|t| t as f32));
    // Fewer than 4 steps: diffusers' arrays do not broadcast; culturelens says why.
    let e = s.set_timesteps(3).unwrap_err();
    assert!(e.to_string().contains("`skip_prk_steps`"), "{e}");
}
