//! `EDMDPMSolverMultistepScheduler` (DPM-Solver++ of Lu et al. 2022 on EDM's σ schedule and
//! preconditioning, [`super::edm_euler`]), Playground v2.5's scheduler: `dpmsolver++` of order
//! 1 or 2 with the midpoint or Heun update, lower-order steps at the start and (as configured)
//! the end. The UNet's input is already scaled by `c_in`, so α = 1 and `λ = −ln σ`; the
//! multistep update works on the denoised samples `D` of the last two steps:
//!
//! `x ← (σₜ/σₛ) x − (e^{−h} − 1) D₀ [− ½ (e^{−h} − 1) D₁ | + ((e^{−h} − 1)/h + 1) D₁]`,
//! `h = λₜ − λₛ`, `D₁ = (D₀ − D₋₁)/r₀`, `r₀ = (λₛ − λₛ₋₁)/h`.
//!
//! Options diffusers has that this does not (third order, the SDE variant, thresholding) are
//! refused by key.

use burn::tensor::Tensor;

use super::edm_euler::{Edm, Ramp};
use super::{ConfigReader, SchedulerError, key_error};

#[derive(Debug, Clone)]
pub struct EdmDpmSolverMultistep {
    edm: Edm,
    order: usize,
    heun: bool,
    lower_order_final: bool,
    euler_at_final: bool,
    sigma_min: f32,
    pub(super) timesteps: Vec<f32>,
    sigmas: Vec<f32>,
    /// `D` of the last `order` steps, oldest first.
    outputs: Vec<Tensor<4>>,
    lower_order_nums: usize,
}

impl EdmDpmSolverMultistep {
    pub(super) fn new(config: &ConfigReader) -> Result<Self, SchedulerError> {
        config.require("thresholding", false, false)?;
        let order: usize = config.get("solver_order", 2)?;
        if !(1..=2).contains(&order) {
            return Err(key_error("solver_order", format!("{order} is not supported (1 or 2)")));
        }
        // diffusers maps the `deis` algorithm onto `dpmsolver++` (and `logrho`, `bh1`, `bh2`
        // solvers onto `midpoint`) when it builds the class.
        match config.get::<String>("algorithm_type", "dpmsolver++".into())?.as_str() {
            "dpmsolver++" | "deis" => {}
            other => {
                return Err(key_error(
                    "algorithm_type",
                    format!("`{other}` is not supported by culturelens (only dpmsolver++)"),
                ));
            }
        }
        let heun = match config.get::<String>("solver_type", "midpoint".into())?.as_str() {
            "midpoint" | "logrho" | "bh1" | "bh2" => false,
            "heun" => true,
            other => {
                return Err(key_error(
                    "solver_type",
                    format!("`{other}` is not supported (midpoint or heun)"),
                ));
            }
        };
        let edm = Edm::new(config)?;
        Ok(Self {
            sigma_min: config.get::<f64>("sigma_min", 0.002)? as f32,
            edm,
            order,
            heun,
            lower_order_final: config.get("lower_order_final", true)?,
            euler_at_final: config.get("euler_at_final", false)?,
            timesteps: Vec::new(),
            sigmas: Vec::new(),
            outputs: Vec::new(),
            lower_order_nums: 0,
        })
    }

    pub(super) fn train_steps(&self) -> usize {
        self.edm.train_steps()
    }

    pub(super) fn set_timesteps(&mut self, n: usize) {
        let mut sigmas = self.edm.sigmas(n, Ramp::F32);
        self.timesteps = Edm::timesteps(&sigmas);
        sigmas.push(if self.edm.final_sigma_min { self.sigma_min } else { 0.0 });
        self.sigmas = sigmas;
        self.outputs.clear();
        self.lower_order_nums = 0;
    }

    pub(super) fn init_noise_sigma(&self) -> f32 {
        self.edm.init_noise_sigma()
    }

    pub(super) fn scale_model_input(&self, sample: Tensor<4>, step: usize) -> Tensor<4> {
        self.edm.precondition_inputs(sample, self.sigmas[step])
    }

    /// `λ = log α − log σ` with α = 1 (`−∞` at σ = 0 gives `λ = +∞`, `e^{−h} = 0`).
    fn lambda(&self, i: usize) -> f32 {
        0.0 - self.sigmas[i].ln()
    }

    pub(super) fn step(&mut self, model_output: Tensor<4>, step: usize, sample: Tensor<4>) -> Tensor<4> {
        let n = self.timesteps.len();
        let lower_final = step == n - 1
            && (self.euler_at_final || (self.lower_order_final && n < 15) || !self.edm.final_sigma_min);
        let (sigma_s0, sigma_t) = (self.sigmas[step], self.sigmas[step + 1]);
        let d0 = self.edm.precondition_outputs(sample.clone(), model_output, sigma_s0);
        if self.outputs.len() == self.order {
            self.outputs.remove(0);
        }
        self.outputs.push(d0.clone());

        let (lambda_s0, lambda_t) = (self.lambda(step), self.lambda(step + 1));
        let h = lambda_t - lambda_s0;
        let decay = (-h).exp() - 1.0;
        let base = sample.mul_scalar(sigma_t / sigma_s0) - d0.clone().mul_scalar(decay);
        let first_order = self.order == 1 || self.lower_order_nums < 1 || lower_final;
        let prev = if first_order {
            base
        } else {
            let r0 = (lambda_s0 - self.lambda(step - 1)) / h;
            let m1 = self.outputs[self.outputs.len() - 2].clone();
            let d1 = (d0 - m1).mul_scalar(1.0 / r0);
            if self.heun { base + d1.mul_scalar(decay / h + 1.0) } else { base - d1.mul_scalar(0.5 * decay) }
        };
        if self.lower_order_nums < self.order {
            self.lower_order_nums += 1;
        }
        prev
    }
}
