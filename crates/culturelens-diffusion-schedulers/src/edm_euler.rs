//! `EDMEulerScheduler` (Karras et al. 2022, "Elucidating the Design Space of Diffusion-Based
//! Generative Models", Algorithm 2 without churn, as the SDXL pipeline calls it), and the EDM
//! parts it shares with `EDMDPMSolverMultistepScheduler` ([`super::EdmDpmSolverMultistep`],
//! Playground v2.5's scheduler): the σ schedule and the preconditioning of EDM's Table 1.
//!
//! - σ schedule: Karras' `σᵢ = (σ_max^{1/ρ} + rᵢ (σ_min^{1/ρ} − σ_max^{1/ρ}))^ρ` over a ramp
//!   `r` of `n` points in `[0, 1]` (`sigma_schedule: "karras"`), or `exp` of `n` points evenly
//!   spaced from `ln σ_max` down to `ln σ_min` (`"exponential"`); then the final σ, `0`
//!   (`final_sigmas_type: "zero"`) or `σ_min`.
//! - The UNet is called at `c_noise = ¼ ln σ` on `c_in · x`, `c_in = 1/√(σ² + σ_d²)`, and its
//!   output `F` becomes the denoised sample `D = c_skip x + c_out F` with
//!   `c_skip = σ_d²/(σ² + σ_d²)`, `c_out = ±σ σ_d/√(σ² + σ_d²)` (`−` for `v_prediction`).
//! - Euler step: `x ← x + (x − D)/σᵢ · (σᵢ₊₁ − σᵢ)`.
//! - The initial noise is scaled by `√(σ_max² + 1)` (diffusers' `init_noise_sigma`).
//!
//! Arithmetic as diffusers 0.42 on the CPU: the Euler class builds its ramp and Karras σs in
//! float64 and stores float32, the DPM-Solver class computes them in float32; every coefficient
//! is a float32 scalar (`σ_d²/(…)` is torch's `reciprocal(…) · σ_d²`, Python's reflected
//! division on a tensor).

use burn::tensor::Tensor;

use super::euler::final_sigma_is_min;
use super::{ConfigReader, Prediction, SchedulerError, key_error, torch_linspace_f32, torch_linspace_f64};

/// `sigma_schedule`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SigmaSchedule {
    Karras,
    Exponential,
}

/// The EDM configuration both EDM schedulers read: σ range, σ_data, ρ, the schedule, the
/// prediction type and the final σ.
#[derive(Debug, Clone)]
pub(super) struct Edm {
    pub(super) prediction: Prediction,
    sigma_min: f64,
    sigma_max: f64,
    sigma_data: f64,
    rho: f64,
    schedule: SigmaSchedule,
    pub(super) final_sigma_min: bool,
    train_steps: usize,
}

/// The precision a σ schedule is computed in before it is stored as float32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ramp {
    /// `torch.linspace(0, 1, n, dtype=float64)` (`EDMEulerScheduler`).
    F64,
    /// `torch.linspace(0, 1, n)` in float32 (`EDMDPMSolverMultistepScheduler`).
    F32,
}

impl Edm {
    pub(super) fn new(config: &ConfigReader) -> Result<Self, SchedulerError> {
        let schedule = match config.get::<String>("sigma_schedule", "karras".into())?.as_str() {
            "karras" => SigmaSchedule::Karras,
            "exponential" => SigmaSchedule::Exponential,
            other => {
                return Err(key_error(
                    "sigma_schedule",
                    format!("`{other}` is not supported (karras or exponential)"),
                ));
            }
        };
        let edm = Self {
            prediction: config.prediction()?,
            sigma_min: config.get("sigma_min", 0.002)?,
            sigma_max: config.get("sigma_max", 80.0)?,
            sigma_data: config.get("sigma_data", 0.5)?,
            rho: config.get("rho", 7.0)?,
            schedule,
            final_sigma_min: final_sigma_is_min(config)?,
            train_steps: config.get("num_train_timesteps", 1000)?,
        };
        for (key, value) in
            [("sigma_min", edm.sigma_min), ("sigma_max", edm.sigma_max), ("sigma_data", edm.sigma_data)]
        {
            if !(value.is_finite() && value > 0.0) {
                return Err(key_error(key, format!("{value} is not a positive number")));
            }
        }
        if edm.sigma_min >= edm.sigma_max {
            return Err(key_error(
                "sigma_min",
                format!("{} is not below sigma_max {}", edm.sigma_min, edm.sigma_max),
            ));
        }
        if !(edm.rho.is_finite() && edm.rho > 0.0) {
            return Err(key_error("rho", format!("{} is not a positive number", edm.rho)));
        }
        if edm.train_steps == 0 || edm.train_steps > super::MAX_TRAIN_TIMESTEPS {
            return Err(key_error(
                "num_train_timesteps",
                format!("must be between 1 and {}", super::MAX_TRAIN_TIMESTEPS),
            ));
        }
        Ok(edm)
    }

    pub(super) fn train_steps(&self) -> usize {
        self.train_steps
    }

    /// The `n` σs of the schedule (without the final one), float32.
    pub(super) fn sigmas(&self, n: usize, ramp: Ramp) -> Vec<f32> {
        match self.schedule {
            SigmaSchedule::Karras => {
                let min_inv_rho = self.sigma_min.powf(1.0 / self.rho);
                let max_inv_rho = self.sigma_max.powf(1.0 / self.rho);
                match ramp {
                    Ramp::F64 => torch_linspace_f64(0.0, 1.0, n)
                        .into_iter()
                        .map(|r| (max_inv_rho + r * (min_inv_rho - max_inv_rho)).powf(self.rho) as f32)
                        .collect(),
                    Ramp::F32 => {
                        let (span, base, rho) =
                            ((min_inv_rho - max_inv_rho) as f32, max_inv_rho as f32, self.rho as f32);
                        torch_linspace_f32(0.0, 1.0, n)
                            .into_iter()
                            .map(|r| (base + r * span).powf(rho))
                            .collect()
                    }
                }
            }
            // float32 in both classes: `torch.linspace(ln σ_min, ln σ_max, n).exp().flip(0)`.
            SigmaSchedule::Exponential => {
                let (lo, hi) = (self.sigma_min.ln() as f32, self.sigma_max.ln() as f32);
                torch_linspace_f32(lo, hi, n).into_iter().rev().map(f32::exp).collect()
            }
        }
    }

    /// `c_noise = ¼ ln σ` of each σ: the timesteps the UNet is called with.
    pub(super) fn timesteps(sigmas: &[f32]) -> Vec<f32> {
        sigmas.iter().map(|s| 0.25 * s.ln()).collect()
    }

    /// `√(σ_max² + 1)`.
    pub(super) fn init_noise_sigma(&self) -> f32 {
        (self.sigma_max * self.sigma_max + 1.0).sqrt() as f32
    }

    /// `σ_d²` as the float32 scalar diffusers adds to a float32 `σ²`.
    fn sigma_data_sq(&self) -> f32 {
        (self.sigma_data * self.sigma_data) as f32
    }

    /// `c_in · sample`, `c_in = 1/√(σ² + σ_d²)`.
    pub(super) fn precondition_inputs(&self, sample: Tensor<4>, sigma: f32) -> Tensor<4> {
        let c_in = 1.0 / (sigma * sigma + self.sigma_data_sq()).sqrt();
        sample.mul_scalar(c_in)
    }

    /// The denoised sample `c_skip · sample + c_out · model_output`.
    pub(super) fn precondition_outputs(
        &self,
        sample: Tensor<4>,
        model_output: Tensor<4>,
        sigma: f32,
    ) -> Tensor<4> {
        let sd2 = self.sigma_data_sq();
        let total = sigma * sigma + sd2;
        let c_skip = (1.0 / total) * sd2;
        let c_out = sigma * self.sigma_data as f32 / total.sqrt();
        let c_out = match self.prediction {
            Prediction::Epsilon => c_out,
            Prediction::VPrediction => -c_out,
        };
        sample.mul_scalar(c_skip) + model_output.mul_scalar(c_out)
    }
}

#[derive(Debug, Clone)]
pub struct EdmEuler {
    edm: Edm,
    pub(super) timesteps: Vec<f32>,
    sigmas: Vec<f32>,
}

impl EdmEuler {
    pub(super) fn new(config: &ConfigReader) -> Result<Self, SchedulerError> {
        Ok(Self { edm: Edm::new(config)?, timesteps: Vec::new(), sigmas: Vec::new() })
    }

    pub(super) fn train_steps(&self) -> usize {
        self.edm.train_steps()
    }

    pub(super) fn set_timesteps(&mut self, n: usize) {
        let mut sigmas = self.edm.sigmas(n, Ramp::F64);
        self.timesteps = Edm::timesteps(&sigmas);
        // "sigma_min" repeats the schedule's last σ (σ_min itself only for Karras' schedule).
        let last = if self.edm.final_sigma_min { sigmas[n - 1] } else { 0.0 };
        sigmas.push(last);
        self.sigmas = sigmas;
    }

    pub(super) fn init_noise_sigma(&self) -> f32 {
        self.edm.init_noise_sigma()
    }

    pub(super) fn scale_model_input(&self, sample: Tensor<4>, step: usize) -> Tensor<4> {
        self.edm.precondition_inputs(sample, self.sigmas[step])
    }

    pub(super) fn step(&mut self, model_output: Tensor<4>, step: usize, sample: Tensor<4>) -> Tensor<4> {
        let sigma = self.sigmas[step];
        let denoised = self.edm.precondition_outputs(sample.clone(), model_output, sigma);
        let derivative = (sample.clone() - denoised).div_scalar(sigma);
        sample + derivative.mul_scalar(self.sigmas[step + 1] - sigma)
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Device, TensorData};

    use super::super::{Scheduler, SchedulerKind};
    use super::*;

    fn values(t: Tensor<4>) -> Vec<f32> {
        t.into_data().try_into_vec::<f32>().unwrap()
    }

    #[test]
    fn preconditioning_and_schedules_by_hand() {
        let config = ConfigReader::new(r#"{"rho": 1.0, "sigma_min": 1.0, "sigma_max": 9.0}"#).unwrap();
        let edm = Edm::new(&config).unwrap();
        // ρ = 1: σ runs linearly from σ_max to σ_min.
        assert_eq!(edm.sigmas(3, Ramp::F64), [9.0, 5.0, 1.0]);
        assert_eq!(edm.sigmas(3, Ramp::F32), [9.0, 5.0, 1.0]);
        // c_noise: ¼ ln 1 = 0, ¼ ln 16 = ln 2.
        let t = Edm::timesteps(&[1.0, 16.0]);
        assert!(t[0] == 0.0 && (t[1] - std::f32::consts::LN_2).abs() < 1e-7, "{t:?}");
        assert_eq!(edm.init_noise_sigma(), 82f32.sqrt());
        // σ = σ_d = 0.5: σ² + σ_d² = ½, so c_in = √2, c_skip = ½, c_out = ¼ / √½ = √2 / 4.
        let device = Device::flex();
        let x = Tensor::<4>::from_data(TensorData::new(vec![1f32, -2.0], [1, 1, 1, 2]), &device);
        let f = Tensor::<4>::from_data(TensorData::new(vec![4f32, 0.0], [1, 1, 1, 2]), &device);
        let c_in = values(edm.precondition_inputs(x.clone(), 0.5));
        assert!((c_in[0] - 2f32.sqrt()).abs() < 1e-6 && (c_in[1] + 2.0 * 2f32.sqrt()).abs() < 1e-6);
        let d = values(edm.precondition_outputs(x, f, 0.5));
        assert!((d[0] - (0.5 + 2f32.sqrt())).abs() < 1e-6 && (d[1] + 1.0).abs() < 1e-6, "{d:?}");
        // Exponential: e^{ln 9 → ln 1} in float32.
        let config =
            ConfigReader::new(r#"{"sigma_min": 1.0, "sigma_max": 9.0, "sigma_schedule": "exponential"}"#);
        let s = Edm::new(&config.unwrap()).unwrap().sigmas(3, Ramp::F64);
        assert!((s[0] - 9.0).abs() < 1e-5 && (s[1] - 3.0).abs() < 1e-5 && s[2] == 1.0, "{s:?}");
    }

    #[test]
    fn unsupported_edm_options_are_named() {
        for (config, key) in [
            (r#"{"_class_name": "EDMDPMSolverMultistepScheduler", "solver_order": 3}"#, "`solver_order`"),
            (
                r#"{"_class_name": "EDMDPMSolverMultistepScheduler", "algorithm_type": "sde-dpmsolver++"}"#,
                "`algorithm_type`",
            ),
            (r#"{"_class_name": "EDMDPMSolverMultistepScheduler", "thresholding": true}"#, "`thresholding`"),
            (r#"{"_class_name": "EDMEulerScheduler", "sigma_schedule": "linear"}"#, "`sigma_schedule`"),
            (r#"{"_class_name": "EDMEulerScheduler", "prediction_type": "sample"}"#, "`prediction_type`"),
            (r#"{"_class_name": "EDMEulerScheduler", "sigma_min": 100.0}"#, "`sigma_min`"),
            (r#"{"_class_name": "EDMEulerScheduler", "sigma_data": 0}"#, "`sigma_data`"),
        ] {
            let e = Scheduler::from_config(config, None).unwrap_err().to_string();
            assert!(e.contains(key), "{config}: {e}");
        }
        assert_eq!(SchedulerKind::parse("edm-dpm").unwrap(), SchedulerKind::EdmDpmSolverMultistep);
        assert_eq!(SchedulerKind::parse("EDMEulerScheduler").unwrap(), SchedulerKind::EdmEuler);
    }
}
