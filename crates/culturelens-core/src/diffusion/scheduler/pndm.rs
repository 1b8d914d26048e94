//! `PNDMScheduler` with `skip_prk_steps: true` (the SD 1.x default): the PLMS linear multistep
//! sampler, which calls the UNet `n + 1` times (the second timestep twice).

use burn::tensor::Tensor;

use super::{AlphaSchedule, ConfigReader, Prediction, SchedulerError};

#[derive(Debug, Clone)]
pub struct Pndm {
    pub(super) prediction: Prediction,
    schedule: AlphaSchedule,
    pub(super) timesteps: Vec<i64>,
    num_inference_steps: usize,
    ets: Vec<Tensor<4>>,
    cur_sample: Option<Tensor<4>>,
    counter: usize,
}

impl Pndm {
    pub(super) fn new(config: &ConfigReader) -> Result<Self, SchedulerError> {
        config.require("skip_prk_steps", true, false)?;
        Ok(Self {
            prediction: config.prediction()?,
            schedule: AlphaSchedule::new(config, false)?,
            timesteps: Vec::new(),
            num_inference_steps: 0,
            ets: Vec::new(),
            cur_sample: None,
            counter: 0,
        })
    }

    pub(super) fn train_steps(&self) -> usize {
        self.schedule.train_steps()
    }

    pub(super) fn set_timesteps(&mut self, n: usize) {
        self.num_inference_steps = n;
        // Descending base timesteps; PLMS repeats the second one: [t0, t1, t1, t2, …, t_{n-1}].
        let base = self.schedule.timesteps(n);
        let mut timesteps = vec![base[0]];
        if n > 1 {
            timesteps.push(base[1]);
        }
        timesteps.extend_from_slice(&base[1..]);
        self.timesteps = timesteps;
        self.ets.clear();
        self.cur_sample = None;
        self.counter = 0;
    }

    pub(super) fn step(&mut self, model_output: Tensor<4>, step: usize, sample: Tensor<4>) -> Tensor<4> {
        let ratio = (self.train_steps() / self.num_inference_steps) as i64;
        let mut t = self.timesteps[step];
        let mut prev = t - ratio;
        if self.counter != 1 {
            if self.ets.len() > 3 {
                self.ets.remove(0);
            }
            self.ets.push(model_output.clone());
        } else {
            prev = t;
            t += ratio;
        }
        let ets = &self.ets;
        let k = ets.len();
        let (combined, sample) = if k == 1 && self.counter == 0 {
            self.cur_sample = Some(sample.clone());
            (model_output, sample)
        } else if k == 1 && self.counter == 1 {
            let first = self.cur_sample.take().expect("PNDM: first sample kept");
            ((model_output + ets[0].clone()).div_scalar(2.0), first)
        } else if k == 2 {
            ((ets[1].clone().mul_scalar(3.0) - ets[0].clone()).div_scalar(2.0), sample)
        } else if k == 3 {
            (
                (ets[2].clone().mul_scalar(23.0) - ets[1].clone().mul_scalar(16.0)
                    + ets[0].clone().mul_scalar(5.0))
                .div_scalar(12.0),
                sample,
            )
        } else {
            (
                (ets[3].clone().mul_scalar(55.0) - ets[2].clone().mul_scalar(59.0)
                    + ets[1].clone().mul_scalar(37.0)
                    - ets[0].clone().mul_scalar(9.0))
                .mul_scalar(1.0 / 24.0),
                sample,
            )
        };
        self.counter += 1;
        self.prev_sample(sample, t, prev, combined)
    }

    fn prev_sample(&self, sample: Tensor<4>, t: i64, prev: i64, output: Tensor<4>) -> Tensor<4> {
        let (alpha_t, alpha_prev) = self.schedule.alphas(t, prev);
        let beta_t = 1.0 - alpha_t;
        let beta_prev = 1.0 - alpha_prev;
        let output = match self.prediction {
            Prediction::Epsilon => output,
            Prediction::VPrediction => {
                output.mul_scalar(alpha_t.sqrt()) + sample.clone().mul_scalar(beta_t.sqrt())
            }
        };
        let sample_coeff = (alpha_prev / alpha_t).sqrt();
        let denom = alpha_t * beta_prev.sqrt() + (alpha_t * beta_t * alpha_prev).sqrt();
        sample.mul_scalar(sample_coeff) - output.mul_scalar(alpha_prev - alpha_t).div_scalar(denom)
    }
}
