//! `UnCLIPScheduler` as diffusers 0.42 steps it: the Kandinsky 2.1 prior's sampler over CLIP
//! image embeddings (`[batch, width]`, any rank here), a DDPM variant from Karlo.
//!
//! The training schedule is always `squaredcos_cap_v2` (`betas_for_alpha_bar`, float32) with
//! `alphas = 1 − betas` and their float32 cumulative product. `set_timesteps(n)`:
//! `round(arange(n) · (T − 1)/(n − 1))` reversed (numpy's round half to even; `n ≥ 2`, since
//! diffusers divides by `n − 1`).
//!
//! Per call at timestep `t` with `prev` (the pipeline passes the next inference timestep, and
//! `None`, meaning `t − 1`, at the last step): `ᾱ_t`, `ᾱ_prev` (1 for `prev < 0`), `β̄ = 1 − ᾱ`;
//! `β = betas[t]`, `α = alphas[t]` when `prev = t − 1`, else `β = 1 − ᾱ_t / ᾱ_prev`, `α = 1 − β`;
//! `x̂₀ = (x − √β̄_t ε) / √ᾱ_t` (`epsilon`) or the model output itself (`sample`), clamped to
//! `±clip_sample_range` under `clip_sample`; the mean `(√ᾱ_prev β / β̄_t) x̂₀ + (√α β̄_prev / β̄_t) x`;
//! and for `t > 0` plus `σ z` with `z = randn(sample.shape, generator)` (drawn from the
//! pipeline's generator after what it drew before) and `v = β̄_prev / β̄_t · β`: `σ = exp(½ ln max(v, 1e−20))`
//! (`fixed_small_log`) or `exp(½ (f ln β + (1 − f) ln v))` with `f = (ν + 1)/2` for the model's
//! variance half `ν` (`learned_range`: the model output is twice the sample's width, noise
//! prediction first; diffusers fails on one without the variance half, and so does this). All scalars are float32 as diffusers' 0-dim tensors.
//!
//! Every key of the config is read or refused by name: a key diffusers' class does not have
//! (other than the `_`-prefixed metadata), and a `beta_schedule` other than `squaredcos_cap_v2`.

use burn::tensor::{Tensor, TensorData};
use culturelens_rng::{TorchGenerator, TorchNormalPath};

use super::{ConfigReader, SchedulerError, alphas_cumprod, key_error, squaredcos_cap_v2};

/// The keys of diffusers' `UnCLIPScheduler.__init__`.
const KEYS: [&str; 6] = [
    "num_train_timesteps",
    "variance_type",
    "clip_sample",
    "clip_sample_range",
    "prediction_type",
    "beta_schedule",
];

/// `prediction_type` of the UnCLIP scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnClipPrediction {
    Epsilon,
    Sample,
}

#[derive(Debug, Clone)]
pub struct UnClip {
    prediction: UnClipPrediction,
    learned_range: bool,
    clip_sample: Option<f32>,
    betas: Vec<f32>,
    alphas_cumprod: Vec<f32>,
    timesteps: Vec<i64>,
}

impl UnClip {
    /// Reads `scheduler_config.json` over the class defaults.
    pub fn from_config(json: &str) -> Result<Self, SchedulerError> {
        let config = ConfigReader::new(json)?;
        if let Some(key) = config.fields.keys().find(|k| !k.starts_with('_') && !KEYS.contains(&k.as_str())) {
            return Err(key_error(key, "is not a key of diffusers' UnCLIPScheduler"));
        }
        if let Some(class) = config.get::<Option<String>>("_class_name", None)?
            && class != "UnCLIPScheduler"
        {
            return Err(key_error("_class_name", format!("`{class}` is not UnCLIPScheduler")));
        }
        config.require("beta_schedule", "squaredcos_cap_v2".to_string(), "squaredcos_cap_v2".to_string())?;
        let n: usize = config.get("num_train_timesteps", 1000)?;
        if !(2..=super::MAX_TRAIN_TIMESTEPS).contains(&n) {
            return Err(key_error(
                "num_train_timesteps",
                format!("must be between 2 and {}", super::MAX_TRAIN_TIMESTEPS),
            ));
        }
        let learned_range = match config.get::<String>("variance_type", "fixed_small_log".into())?.as_str() {
            "fixed_small_log" => false,
            "learned_range" => true,
            other => {
                return Err(key_error(
                    "variance_type",
                    format!("`{other}` is not supported (fixed_small_log or learned_range)"),
                ));
            }
        };
        let prediction = match config.get::<String>("prediction_type", "epsilon".into())?.as_str() {
            "epsilon" => UnClipPrediction::Epsilon,
            "sample" => UnClipPrediction::Sample,
            other => {
                return Err(key_error(
                    "prediction_type",
                    format!("`{other}` is not supported (epsilon or sample)"),
                ));
            }
        };
        let clip: bool = config.get("clip_sample", true)?;
        let range: f32 = config.get("clip_sample_range", 1.0)?;
        let betas = squaredcos_cap_v2(n);
        Ok(Self {
            prediction,
            learned_range,
            clip_sample: clip.then_some(range),
            alphas_cumprod: alphas_cumprod(&betas),
            betas,
            timesteps: Vec::new(),
        })
    }

    /// `prediction_type`.
    pub fn prediction(&self) -> UnClipPrediction {
        self.prediction
    }

    /// `set_timesteps(n)`.
    pub fn set_timesteps(&mut self, n: usize) -> Result<(), SchedulerError> {
        if n < 2 {
            return Err(SchedulerError::Steps(format!(
                "UnCLIPScheduler needs at least 2 steps (got {n}): diffusers divides by steps − 1"
            )));
        }
        let ratio = (self.alphas_cumprod.len() - 1) as f64 / (n - 1) as f64;
        self.timesteps = (0..n).rev().map(|i| (i as f64 * ratio).round_ties_even() as i64).collect();
        Ok(())
    }

    /// The inference timesteps, descending.
    pub fn timesteps(&self) -> &[i64] {
        &self.timesteps
    }

    /// One step from timestep `t` to `prev` (`None`: `t − 1`), its variance noise drawn from
    /// `generator` when `t > 0`.
    pub fn step<const D: usize>(
        &self,
        model_output: Tensor<D>,
        t: i64,
        sample: Tensor<D>,
        prev: Option<i64>,
        generator: &mut TorchGenerator,
        path: TorchNormalPath,
    ) -> Tensor<D> {
        let width = sample.dims()[1];
        let (model_output, predicted_variance) = if self.learned_range {
            assert_eq!(
                model_output.dims()[1],
                2 * width,
                "UnCLIPScheduler learned_range: the model output carries the variance half"
            );
            (model_output.clone().narrow(1, 0, width), Some(model_output.narrow(1, width, width)))
        } else {
            (model_output, None)
        };
        let prev = prev.unwrap_or(t - 1);
        let alpha_t = self.alphas_cumprod[t as usize];
        let alpha_prev = if prev >= 0 { self.alphas_cumprod[prev as usize] } else { 1.0 };
        let beta_t = 1.0 - alpha_t;
        let beta_prev = 1.0 - alpha_prev;
        // diffusers' `alphas[t]` is `1 − betas[t]` in float32 too.
        let beta = if prev == t - 1 { self.betas[t as usize] } else { 1.0 - alpha_t / alpha_prev };
        let alpha = 1.0 - beta;
        let mut x0 = match self.prediction {
            UnClipPrediction::Epsilon => {
                (sample.clone() - model_output.mul_scalar(beta_t.sqrt())).div_scalar(alpha_t.sqrt())
            }
            UnClipPrediction::Sample => model_output,
        };
        if let Some(range) = self.clip_sample {
            x0 = x0.clamp(-range, range);
        }
        let x0_coeff = (alpha_prev.sqrt() * beta) / beta_t;
        let sample_coeff = alpha.sqrt() * beta_prev / beta_t;
        let mean = x0.mul_scalar(x0_coeff) + sample.mul_scalar(sample_coeff);
        if t <= 0 {
            return mean;
        }
        let shape = mean.dims();
        let z = generator.randn(shape.iter().product(), path);
        let z = Tensor::<D>::from_data(TensorData::new(z, shape), &mean.device());
        let variance = beta_prev / beta_t * beta;
        match predicted_variance {
            None => mean + z.mul_scalar((0.5 * variance.max(1e-20).ln()).exp()),
            Some(nu) => {
                let (min_log, max_log) = (variance.ln(), beta.ln());
                let frac = nu.add_scalar(1.0).div_scalar(2.0);
                let log_variance =
                    frac.clone().mul_scalar(max_log) + frac.neg().add_scalar(1.0).mul_scalar(min_log);
                mean + log_variance.mul_scalar(0.5).exp() * z
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Parity with diffusers 0.42 (`scripts/fixtures/make_diffusion_tiny_kandinsky21.py`,
    //! `unclip`): each case runs the whole loop with the recorded model outputs, a torch
    //! generator of the recorded `noise_seed` for the variance noise, and the `prev_timestep`
    //! diffusers was passed, comparing the timesteps and every step's output (continuing from
    //! diffusers' own output so that errors do not compound).

    use burn::tensor::{Device, Tensor, TensorData};
    use serde::Deserialize;

    use super::*;

    #[derive(Deserialize)]
    struct Fixture {
        cpu_capability: String,
        unclip: Vec<Case>,
    }

    #[derive(Deserialize)]
    struct Case {
        name: String,
        config: String,
        steps: usize,
        shape: [usize; 2],
        noise_seed: u64,
        timesteps: Vec<i64>,
        initial: Vec<f32>,
        calls: Vec<Call>,
    }

    #[derive(Deserialize)]
    struct Call {
        model_output: Vec<f32>,
        prev_timestep: Option<i64>,
        out: Vec<f32>,
    }

    fn tensor(values: &[f32], rows: usize, device: &Device) -> Tensor<2> {
        Tensor::from_data(TensorData::new(values.to_vec(), [rows, values.len() / rows]), device)
    }

    #[test]
    fn matches_diffusers_step_by_step() {
        let fixture: Fixture =
            serde_json::from_str(&culturelens_testkit::read_fixture("diffusion/tiny-kandinsky21.json"))
                .unwrap();
        assert!(fixture.unclip.len() >= 6);
        let path = TorchNormalPath::from_capability(&fixture.cpu_capability);
        let device = Device::flex();
        let mut worst = (0.0f32, String::new());
        for case in &fixture.unclip {
            let mut scheduler =
                UnClip::from_config(&case.config).unwrap_or_else(|e| panic!("{}: {e}", case.name));
            scheduler.set_timesteps(case.steps).unwrap();
            assert_eq!(scheduler.timesteps(), case.timesteps, "{}: timesteps", case.name);
            let mut generator = TorchGenerator::manual_seed(case.noise_seed);
            let rows = case.shape[0];
            let mut sample = tensor(&case.initial, rows, &device);
            for (i, call) in case.calls.iter().enumerate() {
                let t = case.timesteps[i];
                let out = scheduler.step(
                    tensor(&call.model_output, rows, &device),
                    t,
                    sample,
                    call.prev_timestep,
                    &mut generator,
                    path,
                );
                let got = out.into_data().try_into_vec::<f32>().unwrap();
                let e = got.iter().zip(&call.out).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max);
                if e > worst.0 {
                    worst = (e, format!("{} step {i}", case.name));
                }
                // Measured 1.6e-6 (values up to 10, the prior's clip range).
                assert!(e <= 4e-6, "{} step {i}: off by {e}", case.name);
                sample = tensor(&call.out, rows, &device);
            }
        }
        eprintln!("UnCLIPScheduler: worst max abs step error {:.2e} at {}", worst.0, worst.1);
    }

    #[test]
    fn refuses_by_key() {
        for (config, key) in [
            (r#"{"beta_schedule": "linear"}"#, "`beta_schedule`"),
            (r#"{"variance_type": "fixed_small"}"#, "`variance_type`"),
            (r#"{"prediction_type": "v_prediction"}"#, "`prediction_type`"),
            (r#"{"thresholding": true}"#, "`thresholding`"),
            (r#"{"_class_name": "DDPMScheduler"}"#, "`_class_name`"),
            (r#"{"num_train_timesteps": 1}"#, "`num_train_timesteps`"),
        ] {
            let e = UnClip::from_config(config).unwrap_err().to_string();
            assert!(e.contains(key), "{config}: {e}");
        }
        let mut s =
            UnClip::from_config(r#"{"_class_name": "UnCLIPScheduler", "_diffusers_version": "0.42.1"}"#)
                .unwrap();
        assert!(s.set_timesteps(1).unwrap_err().to_string().contains("at least 2 steps"));
    }
}
