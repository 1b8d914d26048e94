//! `DDPMScheduler` (Ho et al. 2020) as diffusers 0.42 steps it: the ancestral sampler DeepFloyd
//! IF (stage I and II, and stage II's `image_noising_scheduler`) and Kandinsky 3 run.
//!
//! Per call at timestep `t` with `t' = ` the next inference timestep (`-1` after the last):
//! `ᾱ_t`, `ᾱ_t'` (1 for `t' < 0`), `β̄ = 1 − ᾱ`, `α_t = ᾱ_t / ᾱ_t'`, `β_t = 1 − α_t`, all float32
//! scalars as diffusers' 0-dim tensors;
//! `x̂₀ = (x − √β̄_t ε) / √ᾱ_t` (epsilon) or `√ᾱ_t x − √β̄_t v` (v_prediction); then dynamic
//! thresholding (`thresholding`: per image `s = clamp(quantile(|x̂₀|, ratio), 1, sample_max_value)`,
//! `x̂₀ = clamp(x̂₀, −s, s) / s`, torch's linear-interpolated quantile) or `clip_sample`
//! (`clamp(±clip_sample_range)`); the mean `(√ᾱ_t' β_t / β̄_t) x̂₀ + (√α_t β̄_t' / β̄_t) x`; and for
//! `t > 0` the variance term `σ z` with `z = randn(x.shape, generator)`, drawn from the
//! pipeline's torch generator after whatever it drew before (the initial noise), one draw per
//! step, in diffusers' order. With `v = max(β̄_t' / β̄_t · β_t, 1e-20)`: `σ = √v` (`fixed_small`),
//! `exp(½ ln v)` (`fixed_small_log`), `√β_t` (`fixed_large`), or `exp(½ (f ln β_t + (1 − f) ln v))`
//! with `f = (ν + 1)/2` for the model's variance channels `ν` (`learned_range`: the model output
//! has twice the sample's channels, noise prediction first).
//!
//! The generator is the scheduler's own state, handed in by the pipeline
//! ([`super::Scheduler::set_noise_generator`]); a step that needs noise without one panics, and
//! the pipeline loaders refuse DDPM for pipelines that do not pass one. With several generators
//! ([`super::Scheduler::set_noise_generators`], diffusers' list of generators, or culturelens'
//! prompts each with its own seed in one batch) each draws the noise of its equal share of the
//! batch's rows, in order.
//! `variance_type` `learned` and `fixed_large_log`, `prediction_type` `sample`, custom timesteps
//! and zero-SNR rescaling are refused by key.

use burn::tensor::{Tensor, TensorData};
use culturelens_rng::{TorchGenerator, TorchNormalPath};

use super::{ConfigReader, Prediction, SchedulerError, Spacing, integer_timesteps, key_error};

/// `variance_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarianceType {
    FixedSmall,
    FixedSmallLog,
    FixedLarge,
    LearnedRange,
}

#[derive(Debug, Clone)]
pub struct Ddpm {
    pub(super) prediction: Prediction,
    alphas_cumprod: Vec<f32>,
    spacing: Spacing,
    steps_offset: i64,
    variance: VarianceType,
    clip_sample: Option<f32>,
    /// `(dynamic_thresholding_ratio, sample_max_value)` when `thresholding`.
    threshold: Option<(f32, f32)>,
    pub(super) timesteps: Vec<i64>,
    noise: Option<(Vec<TorchGenerator>, TorchNormalPath)>,
}

impl Ddpm {
    pub(super) fn new(config: &ConfigReader) -> Result<Self, SchedulerError> {
        let variance = match config.get::<String>("variance_type", "fixed_small".into())?.as_str() {
            "fixed_small" => VarianceType::FixedSmall,
            "fixed_small_log" => VarianceType::FixedSmallLog,
            "fixed_large" => VarianceType::FixedLarge,
            "learned_range" => VarianceType::LearnedRange,
            other => {
                return Err(key_error(
                    "variance_type",
                    format!(
                        "`{other}` is not supported (fixed_small, fixed_small_log, fixed_large or learned_range)"
                    ),
                ));
            }
        };
        let thresholding: bool = config.get("thresholding", false)?;
        let ratio: f64 = config.get("dynamic_thresholding_ratio", 0.995)?;
        if thresholding && !(0.0..=1.0).contains(&ratio) {
            return Err(key_error("dynamic_thresholding_ratio", format!("{ratio} is not in [0, 1]")));
        }
        let max: f64 = config.get("sample_max_value", 1.0)?;
        let clip: bool = config.get("clip_sample", true)?;
        let range: f32 = config.get("clip_sample_range", 1.0)?;
        Ok(Self {
            prediction: config.prediction()?,
            alphas_cumprod: config.alphas_cumprod()?,
            spacing: config.spacing("leading")?,
            steps_offset: config.get("steps_offset", 0)?,
            variance,
            clip_sample: clip.then_some(range),
            threshold: thresholding.then_some((ratio as f32, max as f32)),
            timesteps: Vec::new(),
            noise: None,
        })
    }

    /// `num_train_timesteps`.
    pub fn train_steps(&self) -> usize {
        self.alphas_cumprod.len()
    }

    /// The variance type, which decides whether the model's variance channels are kept.
    pub fn variance_type(&self) -> VarianceType {
        self.variance
    }

    pub(super) fn set_timesteps(&mut self, n: usize) {
        self.timesteps = integer_timesteps(self.spacing, self.train_steps(), n, self.steps_offset);
    }

    pub(super) fn set_noise_generators(&mut self, generators: Vec<TorchGenerator>, path: TorchNormalPath) {
        self.noise = (!generators.is_empty()).then_some((generators, path));
    }

    pub(super) fn take_noise_generator(&mut self) -> Option<TorchGenerator> {
        self.noise.take().and_then(|(g, _)| g.into_iter().next())
    }

    /// Whether the pipeline has handed the scheduler its generator(s).
    pub fn has_noise_generator(&self) -> bool {
        self.noise.is_some()
    }

    /// `add_noise(x, z, t)` for one timestep: `√ᾱ_t x + √(1 − ᾱ_t) z` (stage II's noise
    /// augmentation of the upscaled image).
    pub fn add_noise(&self, original: Tensor<4>, noise: Tensor<4>, t: usize) -> Tensor<4> {
        let a = self.alphas_cumprod[t];
        original.mul_scalar(a.sqrt()) + noise.mul_scalar((1.0 - a).sqrt())
    }

    /// `previous_timestep`: the inference timestep after the first one equal to `t`, or −1.
    fn previous(&self, t: i64) -> i64 {
        let index = self.timesteps.iter().position(|&s| s == t).expect("t is an inference timestep");
        self.timesteps.get(index + 1).copied().unwrap_or(-1)
    }

    pub(super) fn step(&mut self, model_output: Tensor<4>, step: usize, sample: Tensor<4>) -> Tensor<4> {
        let t = self.timesteps[step];
        let prev = self.previous(t);
        let channels = sample.dims()[1];
        let (model_output, predicted_variance) = if model_output.dims()[1] == 2 * channels
            && self.variance == VarianceType::LearnedRange
        {
            (model_output.clone().narrow(1, 0, channels), Some(model_output.narrow(1, channels, channels)))
        } else {
            (model_output, None)
        };
        assert_eq!(model_output.dims(), sample.dims(), "DDPM: model output and sample shapes");
        let alpha_t = self.alphas_cumprod[t as usize];
        let alpha_prev = if prev >= 0 { self.alphas_cumprod[prev as usize] } else { 1.0 };
        let beta_t = 1.0 - alpha_t;
        let beta_prev = 1.0 - alpha_prev;
        let current_alpha = alpha_t / alpha_prev;
        let current_beta = 1.0 - current_alpha;
        let mut x0 = match self.prediction {
            Prediction::Epsilon => {
                (sample.clone() - model_output.mul_scalar(beta_t.sqrt())).div_scalar(alpha_t.sqrt())
            }
            Prediction::VPrediction => {
                sample.clone().mul_scalar(alpha_t.sqrt()) - model_output.mul_scalar(beta_t.sqrt())
            }
        };
        if let Some((ratio, max)) = self.threshold {
            x0 = threshold(x0, ratio, max);
        } else if let Some(range) = self.clip_sample {
            x0 = x0.clamp(-range, range);
        }
        let x0_coeff = (alpha_prev.sqrt() * current_beta) / beta_t;
        let sample_coeff = current_alpha.sqrt() * beta_prev / beta_t;
        let mean = x0.mul_scalar(x0_coeff) + sample.mul_scalar(sample_coeff);
        if t <= 0 {
            return mean;
        }
        let shape = mean.dims();
        let (generators, path) = self.noise.as_mut().expect(
            "DDPMScheduler draws variance noise: the pipeline must call Scheduler::set_noise_generator",
        );
        assert!(
            shape[0].is_multiple_of(generators.len()),
            "DDPM: {} rows for {} generators",
            shape[0],
            generators.len()
        );
        let share = shape.iter().product::<usize>() / generators.len();
        let z: Vec<f32> = generators.iter_mut().flat_map(|g| g.randn(share, *path)).collect();
        let z = Tensor::<4>::from_data(TensorData::new(z, shape), &mean.device());
        let variance = ((beta_prev / beta_t) * current_beta).max(1e-20);
        let sigma_z = match self.variance {
            VarianceType::FixedSmall => z.mul_scalar(variance.sqrt()),
            VarianceType::FixedSmallLog => z.mul_scalar((0.5 * variance.ln()).exp()),
            VarianceType::FixedLarge => z.mul_scalar(current_beta.sqrt()),
            VarianceType::LearnedRange => {
                let nu =
                    predicted_variance.expect("learned_range: the model output has the variance channels");
                let (min_log, max_log) = (variance.ln(), current_beta.ln());
                let frac = nu.add_scalar(1.0).div_scalar(2.0);
                let log_variance =
                    frac.clone().mul_scalar(max_log) + frac.neg().add_scalar(1.0).mul_scalar(min_log);
                log_variance.mul_scalar(0.5).exp() * z
            }
        };
        mean + sigma_z
    }
}

/// `_threshold_sample`: per image, `s = clamp(quantile(|x|, ratio), 1, max)` (torch's linear
/// interpolation between the sorted values at `floor` and `ceil` of `ratio · (n − 1)`, computed
/// in float32), then `clamp(x, −s, s) / s`.
fn threshold(x: Tensor<4>, ratio: f32, max: f32) -> Tensor<4> {
    let shape = x.dims();
    let [b, rest @ ..] = shape;
    let n: usize = rest.iter().product();
    let flat = x.reshape([b, n]);
    let sorted = flat.clone().abs().sort(1);
    let rank = ratio * (n - 1) as f32;
    let below = rank as usize;
    let above = rank.ceil() as usize;
    let weight = rank - below as f32;
    let lo = sorted.clone().narrow(1, below, 1);
    let hi = sorted.narrow(1, above, 1);
    // torch's lerp: `lo + w (hi − lo)` for |w| < ½, else `hi − (hi − lo)(1 − w)`.
    let s = if weight < 0.5 {
        lo.clone() + (hi - lo).mul_scalar(weight)
    } else {
        hi.clone() - (hi - lo).mul_scalar(1.0 - weight)
    };
    let s = s.clamp_min(1.0).clamp_max(max).expand([b, n]);
    let clamped = flat.max_pair(s.clone().neg()).min_pair(s.clone());
    (clamped / s).reshape(shape)
}
