//! Parity with diffusers 0.42 (`scripts/fixtures/make_diffusion_schedulers.py`; its cases
//! of diffusers 0.31's schedulers give the same values under both): every case runs the whole
//! denoising loop with the recorded model outputs and compares the timesteps, the initial noise
//! scale, every scaled UNet input and every step's output; and `torch.linspace`, which every
//! schedule starts from, point for point. DDPM's cases hand the scheduler a torch generator of
//! the recorded `noise_seed` (its steps draw their variance noise from it).

use burn::tensor::{Device, Tensor, TensorData};
use serde::Deserialize;

use culturelens_rng::{TorchGenerator, TorchNormalPath};

use super::{Scheduler, SchedulerKind, torch_linspace_f32, torch_linspace_f64};

#[derive(Deserialize)]
struct Fixture {
    /// `torch.backends.cpu.get_cpu_capability()` of the machine that drew DDPM's noise.
    cpu_capability: String,
    cases: Vec<Case>,
    linspace: Vec<Linspace>,
}

#[derive(Deserialize)]
struct Linspace {
    /// `start` and `end` (Python floats) as float64 bit patterns.
    start_end: [u64; 2],
    n: usize,
    dtype: String,
    /// torch's values as bit patterns.
    bits: Vec<u64>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    config: String,
    scheduler: String,
    steps: usize,
    /// The sample's shape (default `(1, 2, 1, 2)`).
    #[serde(default = "default_shape")]
    shape: [usize; 4],
    /// DDPM: the seed of the generator passed to `step`.
    #[serde(default)]
    noise_seed: Option<u64>,
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

fn default_shape() -> [usize; 4] {
    [1, 2, 1, 2]
}

fn tensor(values: &[f32], device: &Device) -> Tensor<4> {
    shaped(values, [1, 2, 1, 2], device)
}

/// `values` as `shape`, or with `shape`'s channels scaled to fit (DDPM's `learned_range` model
/// outputs carry twice the sample's channels).
fn shaped(values: &[f32], shape: [usize; 4], device: &Device) -> Tensor<4> {
    let [b, _, h, w] = shape;
    let channels = values.len() / (b * h * w);
    assert_eq!(channels * b * h * w, values.len());
    Tensor::from_data(TensorData::new(values.to_vec(), [b, channels, h, w]), device)
}

/// Largest |got − want| / (1 + |want|).
fn rel_err(got: &Tensor<4>, want: &[f32]) -> f32 {
    let got = got.to_data().try_to_vec::<f32>().unwrap();
    got.iter().zip(want).map(|(g, w)| (g - w).abs() / (1.0 + w.abs())).fold(0.0, f32::max)
}

#[test]
fn matches_diffusers_step_by_step() {
    let fixture = fixture();
    assert!(fixture.cases.len() >= 100);
    for kind in ["EDMEulerScheduler", "EDMDPMSolverMultistepScheduler", "DDPMScheduler"] {
        assert!(fixture.cases.iter().filter(|c| c.scheduler == kind).count() >= 8, "{kind}");
    }
    // PNDM's Runge-Kutta warm-up (`skip_prk_steps` false, AltDiffusion's config) step by step.
    let runge_kutta = fixture
        .cases
        .iter()
        .filter(|c| c.scheduler == "PNDMScheduler" && !c.config.contains("\"skip_prk_steps\": true"))
        .count();
    assert!(runge_kutta >= 7, "{runge_kutta} Runge-Kutta cases");
    let device = Device::flex();
    let mut worst = (0.0f32, String::new());
    for case in &fixture.cases {
        let kind = SchedulerKind::parse(&case.scheduler).unwrap();
        let mut scheduler =
            Scheduler::from_config(&case.config, Some(kind)).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        scheduler.set_timesteps(case.steps).unwrap();
        if let Some(seed) = case.noise_seed {
            let path = TorchNormalPath::from_capability(&fixture.cpu_capability);
            scheduler.set_noise_generator(TorchGenerator::manual_seed(seed), path);
        }
        let timesteps = scheduler.timesteps();
        if matches!(kind, SchedulerKind::EdmEuler | SchedulerKind::EdmDpmSolverMultistep) {
            // `c_noise = ¼ ln σ`: torch's float32 `pow` and `log` are its vectorised ones (within
            // an ulp of the correctly rounded results culturelens takes, not equal to them), so
            // σ may differ in its last bit and `c_noise` by about 1e-8 (σ's relative error / 4).
            assert_eq!(timesteps.len(), case.timesteps.len(), "{}: timesteps", case.name);
            for (got, want) in timesteps.iter().zip(&case.timesteps) {
                assert!((got - want).abs() <= 5e-8, "{}: timestep {got} vs {want}", case.name);
            }
        } else {
            assert_eq!(timesteps, case.timesteps, "{}: timesteps", case.name);
        }
        let sigma = scheduler.init_noise_sigma();
        assert!(
            (sigma - case.init_noise_sigma).abs() <= 1e-6 * case.init_noise_sigma,
            "{}: init_noise_sigma {sigma} vs {}",
            case.name,
            case.init_noise_sigma
        );
        let mut sample = shaped(&case.initial, case.shape, &device);
        for (i, call) in case.calls.iter().enumerate() {
            let scaled = scheduler.scale_model_input(sample.clone(), i);
            let e = rel_err(&scaled, &call.scaled);
            assert!(e < 1e-6, "{} call {i}: scaled input off by {e}", case.name);
            sample = scheduler.step(shaped(&call.model_output, case.shape, &device), i, sample);
            let e = rel_err(&sample, &call.out);
            if e > worst.0 {
                worst = (e, format!("{} call {i}", case.name));
            }
            assert!(e < 2e-6, "{} call {i}: step output off by {e}", case.name);
            // Continue from diffusers' own output so that errors do not compound.
            sample = shaped(&call.out, case.shape, &device);
        }
    }
    eprintln!("worst relative step error {:.2e} at {}", worst.0, worst.1);
}

fn fixture() -> Fixture {
    serde_json::from_str(&culturelens_testkit::read_fixture("diffusion/schedulers.json")).unwrap()
}

/// `torch.linspace` in float32 and float64, bit for bit: one fused multiply-add per point.
#[test]
fn linspace_matches_torch() {
    let fixture = fixture();
    assert!(fixture.linspace.len() >= 50);
    for case in &fixture.linspace {
        let [start, end] = case.start_end.map(f64::from_bits);
        let got: Vec<u64> = match case.dtype.as_str() {
            "f32" => torch_linspace_f32(start as f32, end as f32, case.n)
                .into_iter()
                .map(|v| u64::from(v.to_bits()))
                .collect(),
            _ => torch_linspace_f64(start, end, case.n).into_iter().map(f64::to_bits).collect(),
        };
        assert_eq!(got, case.bits, "linspace({start}, {end}, {}, {})", case.n, case.dtype);
    }
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

#[derive(Deserialize)]
struct FlowFixture {
    cases: Vec<FlowCase>,
}

#[derive(Deserialize)]
struct FlowCase {
    name: String,
    config: String,
    steps: usize,
    sigmas_given: Option<Vec<f64>>,
    mu: Option<f64>,
    timesteps: Vec<f32>,
    sigmas: Vec<f32>,
    initial: Vec<f32>,
    calls: Vec<FlowCall>,
}

#[derive(Deserialize)]
struct FlowCall {
    model_output: Vec<f32>,
    out: Vec<f32>,
}

/// `FlowMatchEulerDiscreteScheduler` against diffusers 0.42
/// (`scripts/fixtures/make_diffusion_flow_match.py`): SD3's and both FLUX configs, the class
/// defaults, a linear time shift, `shift_terminal` and 500 training steps, each set as SD3's
/// pipeline sets it (`n` steps, μ when shifting dynamically) and as FLUX's does (given σs and
/// μ from `calculate_shift`): the whole schedule bit for bit, μ, and the first steps' outputs.
#[test]
fn flow_matching_matches_diffusers() {
    let fixture: FlowFixture =
        serde_json::from_str(include_str!("../../../tests/fixtures/diffusion/flow_match.json")).unwrap();
    assert!(fixture.cases.len() >= 70);
    let device = Device::flex();
    for case in &fixture.cases {
        let mut scheduler =
            Scheduler::from_config(&case.config, None).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert_eq!(scheduler.kind(), SchedulerKind::FlowMatchEulerDiscrete);
        let flow = scheduler.flow_match().unwrap();
        if let (Some(mu), Some(seq)) = (case.mu, seq_len(&case.name)) {
            assert_eq!(flow.mu(seq), mu, "{}: calculate_shift", case.name);
        }
        flow.set_timesteps(case.steps, case.sigmas_given.as_deref(), case.mu).unwrap();
        assert_eq!(flow.timesteps(), case.timesteps, "{}: timesteps", case.name);
        assert_eq!(flow.sigmas(), case.sigmas, "{}: sigmas", case.name);
        let mut sample = tensor(&case.initial, &device);
        for (i, call) in case.calls.iter().enumerate() {
            sample = flow.step(tensor(&call.model_output, &device), i, sample);
            let e = rel_err(&sample, &call.out);
            assert!(e == 0.0, "{} call {i}: step output off by {e}", case.name);
            sample = tensor(&call.out, &device);
        }
    }
}

/// The image sequence length a case's μ was computed for (`…-seq4096`).
fn seq_len(name: &str) -> Option<usize> {
    name.rsplit_once("-seq").and_then(|(_, n)| n.parse().ok())
}

#[test]
fn flow_matching_refuses_what_it_does_not_implement() {
    let e = Scheduler::from_config(
        r#"{"_class_name": "FlowMatchEulerDiscreteScheduler", "invert_sigmas": true}"#,
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("`invert_sigmas`"), "{e}");
    let e = Scheduler::from_config(
        r#"{"_class_name": "FlowMatchEulerDiscreteScheduler", "time_shift_type": "cubic"}"#,
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("`time_shift_type`: `cubic`"), "{e}");
    let dynamic = r#"{"_class_name": "FlowMatchEulerDiscreteScheduler", "use_dynamic_shifting": true}"#;
    let e = Scheduler::from_config(dynamic, None).unwrap().set_timesteps(4).unwrap_err();
    assert!(e.to_string().contains("needs μ"), "{e}");
    // The schedule by hand: shift 3 at σ = 1/2 gives 3·0.5 / (1 + 2·0.5) = 0.75.
    let mut s =
        Scheduler::from_config(r#"{"shift": 3.0}"#, Some(SchedulerKind::FlowMatchEulerDiscrete)).unwrap();
    let flow = s.flow_match().unwrap();
    flow.set_timesteps(2, Some(&[1.0, 0.5]), None).unwrap();
    assert_eq!(flow.sigmas(), [1.0, 0.75, 0.0]);
    assert_eq!(flow.timesteps(), [1000.0, 750.0]);
}
