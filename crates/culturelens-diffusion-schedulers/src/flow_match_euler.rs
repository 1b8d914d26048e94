//! `FlowMatchEulerDiscreteScheduler` (Esser et al. 2024, rectified flow), the scheduler of
//! Stable Diffusion 3 / 3.5 and FLUX.1: the model predicts the velocity `v = ε − x₀`, the sample
//! at noise level σ is `(1 − σ) x₀ + σ ε`, and each step is one Euler step in σ,
//! `x ← x + (σ_next − σ) v`, down to σ = 0. The model is called at `t = 1000 σ`; the initial
//! noise is not scaled (`init_noise_sigma` 1) and neither is the model input.
//!
//! The σ schedule, as diffusers 0.42 builds it (float64 where numpy computes in float64, float32
//! where diffusers' arrays are float32, so the steps equal its own):
//! - without given σs: `n` values from `σ_max` to `σ_min` (`np.linspace` over `1000 σ` of the
//!   training schedule, whose ends are `1` and `shift / N / (1 + (shift − 1) / N)` in float32);
//!   given σs (FLUX's pipeline passes `linspace(1, 1/n, n)`) are rounded to float32 and used in
//!   float32 from there;
//! - then `shift σ / (1 + (shift − 1) σ)` (SD3's `shift: 3.0`), or with `use_dynamic_shifting`
//!   the resolution-dependent `time_shift(μ, 1, σ)`: `e^μ / (e^μ + (1/σ − 1))` (`exponential`)
//!   or `μ / (μ + (1/σ − 1))` (`linear`, `time_shift_type`), with `μ` from the image sequence
//!   length as the pipelines' `calculate_shift` ([`FlowMatchEulerDiscrete::mu`]);
//! - then, with `shift_terminal`, stretched so that it ends at that value;
//! - then a final `σ = 0` is appended.
//!
//! `invert_sigmas`, Karras / exponential / beta σs and `stochastic_sampling` are refused by key.

use burn::tensor::Tensor;

use super::{ConfigReader, SchedulerError, key_error, linspace};

#[derive(Debug, Clone)]
pub struct FlowMatchEulerDiscrete {
    train_steps: usize,
    shift: f64,
    dynamic: bool,
    base_shift: f64,
    max_shift: f64,
    base_image_seq_len: f64,
    max_image_seq_len: f64,
    linear_time_shift: bool,
    shift_terminal: Option<f64>,
    /// The ends of the training schedule, `σ_max` and `σ_min` (float32, as diffusers' `.item()`).
    sigma_max: f32,
    sigma_min: f32,
    timesteps: Vec<f32>,
    sigmas: Vec<f32>,
}

impl FlowMatchEulerDiscrete {
    pub(super) fn new(config: &ConfigReader) -> Result<Self, SchedulerError> {
        for key in [
            "use_karras_sigmas",
            "use_exponential_sigmas",
            "use_beta_sigmas",
            "invert_sigmas",
            "stochastic_sampling",
        ] {
            config.require(key, false, false)?;
        }
        let train_steps: usize = config.get("num_train_timesteps", 1000)?;
        if !(1..=super::MAX_TRAIN_TIMESTEPS).contains(&train_steps) {
            return Err(key_error(
                "num_train_timesteps",
                format!("must be between 1 and {}", super::MAX_TRAIN_TIMESTEPS),
            ));
        }
        let shift: f64 = config.get("shift", 1.0)?;
        let dynamic: bool = config.get("use_dynamic_shifting", false)?;
        let linear_time_shift = match config.get::<String>("time_shift_type", "exponential".into())?.as_str()
        {
            "exponential" => false,
            "linear" => true,
            other => {
                return Err(key_error(
                    "time_shift_type",
                    format!("`{other}` is not supported (exponential or linear)"),
                ));
            }
        };
        let shift_terminal: Option<f64> = config.get("shift_terminal", None)?;
        if shift_terminal.is_some_and(|s| !(0.0..1.0).contains(&s)) {
            return Err(key_error("shift_terminal", "must be in [0, 1)"));
        }
        if !(shift.is_finite() && shift > 0.0) {
            return Err(key_error("shift", format!("{shift} is not a positive number")));
        }
        // The training schedule's ends: timesteps 1..=N (float32) / N, shifted unless dynamic.
        let n = train_steps as f32;
        let train = |t: f32| {
            let s = t / n;
            if dynamic { s } else { shift as f32 * s / (1.0 + (shift - 1.0) as f32 * s) }
        };
        Ok(Self {
            train_steps,
            shift,
            dynamic,
            base_shift: config.get("base_shift", 0.5)?,
            max_shift: config.get("max_shift", 1.15)?,
            base_image_seq_len: config.get::<f64>("base_image_seq_len", 256.0)?,
            max_image_seq_len: config.get::<f64>("max_image_seq_len", 4096.0)?,
            linear_time_shift,
            shift_terminal: shift_terminal.filter(|&s| s != 0.0),
            sigma_max: train(n),
            sigma_min: train(1.0),
            timesteps: Vec::new(),
            sigmas: Vec::new(),
        })
    }

    pub fn train_steps(&self) -> usize {
        self.train_steps
    }

    /// Whether `set_timesteps` needs `μ` (`use_dynamic_shifting`).
    pub fn dynamic_shifting(&self) -> bool {
        self.dynamic
    }

    /// `μ` of an image of `image_seq_len` latent tokens, as the FLUX and SD3 pipelines'
    /// `calculate_shift` over this config's `base_image_seq_len`, `max_image_seq_len`,
    /// `base_shift` and `max_shift`: the line through `(base_len, base_shift)` and
    /// `(max_len, max_shift)`, in float64.
    pub fn mu(&self, image_seq_len: usize) -> f64 {
        let m = (self.max_shift - self.base_shift) / (self.max_image_seq_len - self.base_image_seq_len);
        let b = self.base_shift - m * self.base_image_seq_len;
        image_seq_len as f64 * m + b
    }

    /// `(base_image_seq_len, base_shift, max_shift)` of the config (class defaults where it
    /// leaves them out): CogView4's pipeline computes its own `calculate_shift` from them.
    pub fn shift_config(&self) -> (f64, f64, f64) {
        (self.base_image_seq_len, self.base_shift, self.max_shift)
    }

    /// `set_timesteps(sigmas=…, timesteps=…, mu=…)` with both given (CogView4's pipeline): the
    /// σs as [`Self::set_timesteps`] shifts given σs, and the model called at the given
    /// timesteps (float32), not at `1000 σ`.
    pub fn set_timesteps_given(
        &mut self,
        sigmas: &[f64],
        timesteps: &[f32],
        mu: Option<f64>,
    ) -> Result<(), SchedulerError> {
        if sigmas.len() != timesteps.len() {
            return Err(SchedulerError::Steps("`sigmas` and `timesteps` should have the same length".into()));
        }
        self.set_timesteps(sigmas.len(), Some(sigmas), mu)?;
        self.timesteps = timesteps.to_vec();
        Ok(())
    }

    /// `set_timesteps(n, sigmas=…, mu=…)`: `sigmas`, when given, has `n` values; `mu` is
    /// needed with `use_dynamic_shifting` (and ignored without).
    pub fn set_timesteps(
        &mut self,
        n: usize,
        given: Option<&[f64]>,
        mu: Option<f64>,
    ) -> Result<(), SchedulerError> {
        if n == 0 || n > self.train_steps {
            return Err(SchedulerError::Steps(format!(
                "--steps {n}: must be between 1 and num_train_timesteps = {}",
                self.train_steps
            )));
        }
        let mu = match (self.dynamic, mu) {
            (true, None) => {
                return Err(SchedulerError::Steps("`use_dynamic_shifting` needs μ from the pipeline".into()));
            }
            (_, mu) => mu.unwrap_or(0.0),
        };
        let sigmas: Vec<f32> = match given {
            None => {
                // float64 numpy from here to the final cast.
                let t = self.train_steps as f64;
                let base = linspace(f64::from(self.sigma_max) * t, f64::from(self.sigma_min) * t, n);
                let shifted: Vec<f64> = base
                    .into_iter()
                    .map(|t_i| t_i / t)
                    .map(|s| {
                        if self.dynamic {
                            self.time_shift_f64(mu, s)
                        } else {
                            self.shift * s / (1.0 + (self.shift - 1.0) * s)
                        }
                    })
                    .collect();
                let stretched = match self.shift_terminal {
                    Some(terminal) => {
                        let last = 1.0 - shifted[shifted.len() - 1];
                        let scale = last / (1.0 - terminal);
                        shifted.iter().map(|s| 1.0 - (1.0 - s) / scale).collect()
                    }
                    None => shifted,
                };
                stretched.into_iter().map(|s| s as f32).collect()
            }
            Some(given) => {
                if given.len() != n {
                    return Err(SchedulerError::Steps(format!("{} σs given for {n} steps", given.len())));
                }
                // float32 numpy from here.
                let shifted: Vec<f32> = given
                    .iter()
                    .map(|&s| s as f32)
                    .map(|s| {
                        if self.dynamic {
                            self.time_shift_f32(mu, s)
                        } else {
                            let shift = self.shift as f32;
                            shift * s / (1.0 + (self.shift - 1.0) as f32 * s)
                        }
                    })
                    .collect();
                match self.shift_terminal {
                    Some(terminal) => {
                        let last = 1.0 - shifted[shifted.len() - 1];
                        let scale = last / (1.0 - terminal) as f32;
                        shifted.iter().map(|s| 1.0 - (1.0 - s) / scale).collect()
                    }
                    None => shifted,
                }
            }
        };
        let t = self.train_steps as f32;
        self.timesteps = sigmas.iter().map(|s| s * t).collect();
        self.sigmas = sigmas;
        self.sigmas.push(0.0);
        Ok(())
    }

    /// `time_shift(μ, 1, σ)` on a float64 σ.
    fn time_shift_f64(&self, mu: f64, s: f64) -> f64 {
        let a = if self.linear_time_shift { mu } else { mu.exp() };
        a / (a + (1.0 / s - 1.0))
    }

    /// `time_shift(μ, 1, σ)` on a float32 σ, as numpy computes it with Python-float scalars.
    fn time_shift_f32(&self, mu: f64, s: f32) -> f32 {
        let a = if self.linear_time_shift { mu as f32 } else { mu.exp() as f32 };
        a / (a + (1.0 / s - 1.0))
    }

    /// `num_train_timesteps` of the config (Lumina 2 calls its model at `1 − t / N`).
    pub fn num_train_timesteps(&self) -> usize {
        self.train_steps
    }

    /// The timesteps `1000 σ` the model is called with, in order.
    pub fn timesteps(&self) -> &[f32] {
        &self.timesteps
    }

    /// The σs of the run, the final 0 included.
    pub fn sigmas(&self) -> &[f32] {
        &self.sigmas
    }

    /// One Euler step of the `step`-th call (0-based): `sample + (σ_next − σ) · velocity`, on
    /// latents of any rank (FLUX's are packed `[batch, tokens, channels]`).
    pub fn step<const D: usize>(&self, velocity: Tensor<D>, step: usize, sample: Tensor<D>) -> Tensor<D> {
        let dt = self.sigmas[step + 1] - self.sigmas[step];
        sample + velocity.mul_scalar(dt)
    }
}
