//! `DPMSolverMultistepScheduler` (Lu et al. 2022), algorithm `dpmsolver++` of order 1 or 2 with
//! the midpoint or Heun second-order update, lower-order steps at the start and (as configured)
//! the end — AltDiffusion's scheduler. Works on the data prediction x̂₀ in log-SNR time λ.

use burn::tensor::Tensor;
use serde_json::Value;

use super::euler::final_sigma_is_min;
use super::{ConfigReader, Prediction, SchedulerError, Spacing, interp, key_error, linspace, trailing};

#[derive(Debug, Clone)]
pub struct DpmSolverMultistep {
    pub(super) prediction: Prediction,
    alphas_cumprod: Vec<f32>,
    spacing: Spacing,
    steps_offset: i64,
    order: usize,
    heun: bool,
    lower_order_final: bool,
    euler_at_final: bool,
    final_sigma_min: bool,
    lambda_min_clipped: f64,
    pub(super) timesteps: Vec<i64>,
    sigmas: Vec<f32>,
    /// x̂₀ of the last `order` steps, oldest first.
    outputs: Vec<Tensor<4>>,
    lower_order_nums: usize,
}

impl DpmSolverMultistep {
    pub(super) fn new(config: &ConfigReader) -> Result<Self, SchedulerError> {
        for key in [
            "thresholding",
            "use_karras_sigmas",
            "use_exponential_sigmas",
            "use_beta_sigmas",
            "use_lu_lambdas",
        ] {
            config.require(key, false, false)?;
        }
        let order: usize = config.get("solver_order", 2)?;
        if !(1..=2).contains(&order) {
            return Err(key_error("solver_order", format!("{order} is not supported (1 or 2)")));
        }
        config.require("algorithm_type", "dpmsolver++".to_string(), "dpmsolver++".to_string())?;
        config.require::<Option<String>>("variance_type", None, None)?;
        let heun = match config.get::<String>("solver_type", "midpoint".into())?.as_str() {
            "midpoint" => false,
            "heun" => true,
            other => {
                return Err(key_error(
                    "solver_type",
                    format!("`{other}` is not supported (midpoint or heun)"),
                ));
            }
        };
        // diffusers writes the default as the bare token -Infinity, which the JSON reader keeps
        // as a string (see `ConfigReader::new`).
        let lambda_min_clipped = match config.get::<Value>("lambda_min_clipped", Value::Null)? {
            Value::Null => f64::NEG_INFINITY,
            Value::String(s) if s == "-Infinity" => f64::NEG_INFINITY,
            Value::Number(n) => n.as_f64().unwrap_or(f64::NEG_INFINITY),
            other => {
                return Err(key_error("lambda_min_clipped", format!("expected a number, found {other}")));
            }
        };
        Ok(Self {
            prediction: config.prediction()?,
            alphas_cumprod: config.alphas_cumprod()?,
            spacing: config.spacing("linspace")?,
            steps_offset: config.get("steps_offset", 0)?,
            order,
            heun,
            lower_order_final: config.get("lower_order_final", true)?,
            euler_at_final: config.get("euler_at_final", false)?,
            final_sigma_min: final_sigma_is_min(config)?,
            lambda_min_clipped,
            timesteps: Vec::new(),
            sigmas: Vec::new(),
            outputs: Vec::new(),
            lower_order_nums: 0,
        })
    }

    pub(super) fn train_steps(&self) -> usize {
        self.alphas_cumprod.len()
    }

    pub(super) fn set_timesteps(&mut self, n: usize) {
        let train = self.train_steps();
        // λ(t) = log √ᾱ − log √(1 − ᾱ) decreases in t; timesteps whose λ is below
        // `lambda_min_clipped` are cut from the top.
        let clipped = self
            .alphas_cumprod
            .iter()
            .rev()
            .filter(|&&a| f64::from(a.sqrt().ln() - (1.0 - a).sqrt().ln()) < self.lambda_min_clipped)
            .count();
        let last = train - clipped;
        self.timesteps = match self.spacing {
            Spacing::Linspace => {
                let mut t: Vec<i64> = linspace(0.0, (last - 1) as f64, n + 1)
                    .into_iter()
                    .rev()
                    .map(|t| t.round_ties_even() as i64)
                    .collect();
                t.pop();
                t
            }
            Spacing::Leading => {
                let ratio = (last / (n + 1)) as i64;
                (1..=n as i64).rev().map(|i| i * ratio + self.steps_offset).collect()
            }
            Spacing::Trailing => trailing(last as f64, train as f64 / n as f64),
        };
        let train_sigmas: Vec<f32> = self.alphas_cumprod.iter().map(|a| ((1.0 - a) / a).sqrt()).collect();
        let mut sigmas: Vec<f32> =
            self.timesteps.iter().map(|&t| interp(t as f64, &train_sigmas) as f32).collect();
        sigmas.push(if self.final_sigma_min { train_sigmas[0] } else { 0.0 });
        self.sigmas = sigmas;
        self.outputs.clear();
        self.lower_order_nums = 0;
    }

    /// (α_t, σ_t, λ_t) of the `i`-th sigma.
    fn alpha_sigma_lambda(&self, i: usize) -> (f32, f32, f32) {
        let sigma = self.sigmas[i];
        let alpha_t = 1.0 / (sigma * sigma + 1.0).sqrt();
        let sigma_t = sigma * alpha_t;
        (alpha_t, sigma_t, alpha_t.ln() - sigma_t.ln())
    }

    pub(super) fn step(&mut self, model_output: Tensor<4>, step: usize, sample: Tensor<4>) -> Tensor<4> {
        let n = self.timesteps.len();
        let lower_final = step == n - 1
            && (self.euler_at_final || (self.lower_order_final && n < 15) || !self.final_sigma_min);

        let (alpha_s0, sigma_s0, lambda_s0) = self.alpha_sigma_lambda(step);
        let x0 = match self.prediction {
            Prediction::Epsilon => (sample.clone() - model_output.mul_scalar(sigma_s0)).div_scalar(alpha_s0),
            Prediction::VPrediction => {
                sample.clone().mul_scalar(alpha_s0) - model_output.mul_scalar(sigma_s0)
            }
        };
        if self.outputs.len() == self.order {
            self.outputs.remove(0);
        }
        self.outputs.push(x0.clone());

        let (alpha_t, sigma_t, lambda_t) = self.alpha_sigma_lambda(step + 1);
        let h = lambda_t - lambda_s0;
        let decay = alpha_t * ((-h).exp() - 1.0);
        let first_order = self.order == 1 || self.lower_order_nums < 1 || lower_final;
        let prev = if first_order {
            sample.mul_scalar(sigma_t / sigma_s0) - x0.mul_scalar(decay)
        } else {
            let (_, _, lambda_s1) = self.alpha_sigma_lambda(step - 1);
            let m1 = self.outputs[self.outputs.len() - 2].clone();
            let r0 = (lambda_s0 - lambda_s1) / h;
            let d1 = (x0.clone() - m1).mul_scalar(1.0 / r0);
            let base = sample.mul_scalar(sigma_t / sigma_s0) - x0.mul_scalar(decay);
            if self.heun {
                base + d1.mul_scalar(alpha_t * (((-h).exp() - 1.0) / h + 1.0))
            } else {
                base - d1.mul_scalar(0.5 * decay)
            }
        };
        if self.lower_order_nums < self.order {
            self.lower_order_nums += 1;
        }
        prev
    }
}
