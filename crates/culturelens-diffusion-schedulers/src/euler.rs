//! `EulerDiscreteScheduler` (Karras et al. 2022, Algorithm 2 with no churn), the SD 2.1 default:
//! sigmas `sqrt((1 − ᾱ)/ᾱ)` interpolated linearly at the (possibly fractional) timesteps, the
//! UNet input scaled by `1/sqrt(σ² + 1)`, one Euler step in σ per call.

use burn::tensor::Tensor;

use super::{ConfigReader, Prediction, SchedulerError, Spacing, interp, linspace, trailing};

#[derive(Debug, Clone)]
pub struct EulerDiscrete {
    pub(super) prediction: Prediction,
    /// σ of every training timestep.
    train_sigmas: Vec<f32>,
    spacing: Spacing,
    steps_offset: i64,
    final_sigma_min: bool,
    pub(super) timesteps: Vec<f32>,
    sigmas: Vec<f32>,
}

impl EulerDiscrete {
    pub(super) fn new(config: &ConfigReader) -> Result<Self, SchedulerError> {
        for key in ["use_karras_sigmas", "use_exponential_sigmas", "use_beta_sigmas"] {
            config.require(key, false, false)?;
        }
        config.require("interpolation_type", "linear".to_string(), "linear".to_string())?;
        config.require("timestep_type", "discrete".to_string(), "discrete".to_string())?;
        let alphas_cumprod = config.alphas_cumprod()?;
        Ok(Self {
            prediction: config.prediction()?,
            train_sigmas: alphas_cumprod.iter().map(|a| ((1.0 - a) / a).sqrt()).collect(),
            spacing: config.spacing("linspace")?,
            steps_offset: config.get("steps_offset", 0)?,
            final_sigma_min: final_sigma_is_min(config)?,
            timesteps: Vec::new(),
            sigmas: Vec::new(),
        })
    }

    pub(super) fn train_steps(&self) -> usize {
        self.train_sigmas.len()
    }

    pub(super) fn set_timesteps(&mut self, n: usize) {
        let train = self.train_steps();
        let timesteps: Vec<f64> = match self.spacing {
            Spacing::Linspace => {
                linspace(0.0, (train - 1) as f64, n).into_iter().rev().map(|t| f64::from(t as f32)).collect()
            }
            Spacing::Leading => {
                (0..n).rev().map(|i| f64::from((i * (train / n)) as f32 + self.steps_offset as f32)).collect()
            }
            Spacing::Trailing => {
                trailing(train as f64, train as f64 / n as f64).into_iter().map(|t| t as f64).collect()
            }
        };
        let mut sigmas: Vec<f32> = timesteps.iter().map(|&t| interp(t, &self.train_sigmas) as f32).collect();
        sigmas.push(if self.final_sigma_min { self.train_sigmas[0] } else { 0.0 });
        self.timesteps = timesteps.into_iter().map(|t| t as f32).collect();
        self.sigmas = sigmas;
    }

    pub(super) fn init_noise_sigma(&self) -> f32 {
        let max = self.sigmas.iter().copied().fold(0.0f32, f32::max);
        match self.spacing {
            Spacing::Linspace | Spacing::Trailing => max,
            Spacing::Leading => (max * max + 1.0).sqrt(),
        }
    }

    pub(super) fn scale_model_input(&self, sample: Tensor<4>, step: usize) -> Tensor<4> {
        let sigma = self.sigmas[step];
        sample.div_scalar((sigma * sigma + 1.0).sqrt())
    }

    pub(super) fn step(&mut self, model_output: Tensor<4>, step: usize, sample: Tensor<4>) -> Tensor<4> {
        let sigma = self.sigmas[step];
        let x0 = match self.prediction {
            Prediction::Epsilon => sample.clone() - model_output.mul_scalar(sigma),
            Prediction::VPrediction => {
                model_output.mul_scalar(-sigma / (sigma * sigma + 1.0).sqrt())
                    + sample.clone().div_scalar(sigma * sigma + 1.0)
            }
        };
        let derivative = (sample.clone() - x0).div_scalar(sigma);
        let dt = self.sigmas[step + 1] - sigma;
        sample + derivative.mul_scalar(dt)
    }
}

/// `final_sigmas_type`: `zero` (default) or `sigma_min`.
pub(super) fn final_sigma_is_min(config: &ConfigReader) -> Result<bool, SchedulerError> {
    match config.get::<String>("final_sigmas_type", "zero".into())?.as_str() {
        "zero" => Ok(false),
        "sigma_min" => Ok(true),
        other => Err(super::key_error(
            "final_sigmas_type",
            format!("`{other}` is not supported (zero or sigma_min)"),
        )),
    }
}
