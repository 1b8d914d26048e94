//! `PNDMScheduler`: the PLMS linear multistep sampler. With `skip_prk_steps: true` (SD 1.x's
//! config) it calls the UNet `n + 1` times (the second timestep twice). Without it (the class
//! default, so a config of another class swapped to PNDM, such as AltDiffusion's) the first
//! three steps are PNDM's Runge–Kutta warm-up, four UNet calls each at `t`, `t − r/2` (twice)
//! and `t − r` (`r` the step ratio), weighted 1/6, 1/3, 1/3, 1/6, then PLMS from the fourth
//! step on (`4·3 + n − 3` calls; at least 4 steps, as diffusers' arrays need).

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
    /// The Runge–Kutta warm-up (`skip_prk_steps: false`): its timesteps and the weighted sum
    /// of the current step's model outputs.
    prk: bool,
    prk_timesteps: Vec<i64>,
    cur_model_output: Option<Tensor<4>>,
}

/// diffusers' `pndm_order`.
const PNDM_ORDER: usize = 4;

impl Pndm {
    pub(super) fn new(config: &ConfigReader) -> Result<Self, SchedulerError> {
        Ok(Self {
            prk: !config.get("skip_prk_steps", false)?,
            prk_timesteps: Vec::new(),
            cur_model_output: None,
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

    pub(super) fn set_timesteps(&mut self, n: usize) -> Result<(), SchedulerError> {
        self.num_inference_steps = n;
        let base = self.schedule.timesteps(n);
        if self.prk {
            if n < PNDM_ORDER {
                return Err(SchedulerError::Steps(format!(
                    "--steps {n}: PNDM's Runge–Kutta warm-up (`skip_prk_steps` false) needs at least {PNDM_ORDER} steps"
                )));
            }
            // diffusers: the last four ascending timesteps, each followed by itself + r/2, all
            // but the last; each of those twice, less the first and last; descending.
            let half = (self.train_steps() / n / 2) as i64;
            let ascending: Vec<i64> = base.iter().rev().copied().collect();
            let mut pairs: Vec<i64> =
                ascending[n - PNDM_ORDER..].iter().flat_map(|&t| [t, t + half]).collect();
            pairs.pop();
            let doubled: Vec<i64> = pairs.iter().flat_map(|&t| [t, t]).collect();
            self.prk_timesteps = doubled[1..doubled.len() - 1].iter().rev().copied().collect();
            self.timesteps =
                self.prk_timesteps.iter().chain(base[PNDM_ORDER - 1..].iter()).copied().collect();
        } else {
            // Descending base timesteps; PLMS repeats the second one: [t0, t1, t1, t2, …, t_{n-1}].
            let mut timesteps = vec![base[0]];
            if n > 1 {
                timesteps.push(base[1]);
            }
            timesteps.extend_from_slice(&base[1..]);
            self.timesteps = timesteps;
        }
        self.ets.clear();
        self.cur_sample = None;
        self.cur_model_output = None;
        self.counter = 0;
        Ok(())
    }

    /// diffusers' `step_prk`: one of the four UNet calls of a Runge–Kutta step.
    fn step_prk(&mut self, model_output: Tensor<4>, t: i64, sample: Tensor<4>) -> Tensor<4> {
        let half = (self.train_steps() / self.num_inference_steps / 2) as i64;
        let prev = t - if self.counter % 2 == 1 { 0 } else { half };
        let t = self.prk_timesteps[self.counter / 4 * 4];
        let weighted = |w: f64, acc: Option<Tensor<4>>| match acc {
            Some(acc) => acc + model_output.clone().mul_scalar(w),
            None => model_output.clone().mul_scalar(w),
        };
        let output = match self.counter % 4 {
            0 => {
                self.cur_model_output = Some(weighted(1.0 / 6.0, self.cur_model_output.take()));
                self.ets.push(model_output.clone());
                self.cur_sample = Some(sample.clone());
                model_output.clone()
            }
            1 | 2 => {
                self.cur_model_output = Some(weighted(1.0 / 3.0, self.cur_model_output.take()));
                model_output.clone()
            }
            _ => weighted(1.0 / 6.0, self.cur_model_output.take()),
        };
        let cur_sample = self.cur_sample.clone().unwrap_or(sample);
        self.counter += 1;
        self.prev_sample(cur_sample, t, prev, output)
    }

    pub(super) fn step(&mut self, model_output: Tensor<4>, step: usize, sample: Tensor<4>) -> Tensor<4> {
        if self.prk && self.counter < self.prk_timesteps.len() {
            return self.step_prk(model_output, self.timesteps[step], sample);
        }
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
