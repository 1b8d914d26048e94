//! `DDIMScheduler` (Song et al. 2021) with η = 0, the deterministic sampler diffusers' Stable
//! Diffusion pipelines run (they pass `eta=0.0`).

use burn::tensor::Tensor;

use super::{AlphaSchedule, ConfigReader, Prediction, SchedulerError};

#[derive(Debug, Clone)]
pub struct Ddim {
    pub(super) prediction: Prediction,
    schedule: AlphaSchedule,
    clip_sample: Option<f32>,
    pub(super) timesteps: Vec<i64>,
    num_inference_steps: usize,
}

impl Ddim {
    pub(super) fn new(config: &ConfigReader) -> Result<Self, SchedulerError> {
        config.require("thresholding", false, false)?;
        let clip: bool = config.get("clip_sample", true)?;
        let range: f32 = config.get("clip_sample_range", 1.0)?;
        Ok(Self {
            prediction: config.prediction()?,
            schedule: AlphaSchedule::new(config, true)?,
            clip_sample: clip.then_some(range),
            timesteps: Vec::new(),
            num_inference_steps: 0,
        })
    }

    pub(super) fn train_steps(&self) -> usize {
        self.schedule.train_steps()
    }

    pub(super) fn set_timesteps(&mut self, n: usize) {
        self.num_inference_steps = n;
        self.timesteps = self.schedule.timesteps(n);
    }

    pub(super) fn step(&mut self, model_output: Tensor<4>, step: usize, sample: Tensor<4>) -> Tensor<4> {
        let t = self.timesteps[step];
        let prev = t - (self.train_steps() / self.num_inference_steps) as i64;
        let (alpha_t, alpha_prev) = self.schedule.alphas(t, prev);
        let beta_t = 1.0 - alpha_t;
        let (mut x0, eps) = match self.prediction {
            Prediction::Epsilon => (
                (sample - model_output.clone().mul_scalar(beta_t.sqrt())).div_scalar(alpha_t.sqrt()),
                model_output,
            ),
            Prediction::VPrediction => (
                sample.clone().mul_scalar(alpha_t.sqrt()) - model_output.clone().mul_scalar(beta_t.sqrt()),
                model_output.mul_scalar(alpha_t.sqrt()) + sample.mul_scalar(beta_t.sqrt()),
            ),
        };
        if let Some(range) = self.clip_sample {
            x0 = x0.clamp(-range, range);
        }
        // η = 0: no variance term, so the direction coefficient is sqrt(1 - ᾱ_prev).
        x0.mul_scalar(alpha_prev.sqrt()) + eps.mul_scalar((1.0 - alpha_prev).sqrt())
    }
}
