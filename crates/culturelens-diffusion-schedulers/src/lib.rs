//! Noise schedulers as diffusers implements them (DDIM, PNDM, EulerDiscrete,
//! DPMSolverMultistep as of 0.31; FlowMatchEulerDiscrete, and EDMEuler and
//! EDMDPMSolverMultistep, SDXL's and Playground v2.5's, as of 0.42; DDPM, DeepFloyd IF's and
//! Kandinsky 3's, as of 0.42; `UnCLIPScheduler`, the Kandinsky 2.1 prior's, over image
//! embeddings rather than latents: [`UnClip`], outside [`Scheduler`]), read from
//! `scheduler_config.json` key by key the way diffusers'
//! `from_config` does: a key the file sets wins, a key it lacks takes the default of the class
//! that is instantiated (so `--scheduler ddim` on an SD 1.x PNDM config keeps its
//! `clip_sample: false`, `set_alpha_to_one: false`, `steps_offset: 1`).
//!
//! Conventions (all as diffusers): the training schedule (`betas`, `alphas_cumprod`) is float32
//! with torch's `linspace` and a double-accumulated `cumprod`; `timestep_spacing` is `leading`
//! (`arange(n) * (T // n) + steps_offset`), `linspace` or `trailing`; the per-step coefficients
//! are float32 scalars applied to float32 latents. Options diffusers offers that these
//! re-implementations do not (Karras / exponential / beta sigmas, thresholding outside DDPM, zero-SNR
//! rescaling, DPM-Solver's third order and SDE variants, …) are
//! refused with an error naming the key, never silently ignored.

mod ddim;
mod ddpm;
mod dpm_solver;
mod edm_dpm_solver;
mod edm_euler;
mod euler;
mod flow_match_euler;
mod pndm;
mod unclip;

#[cfg(test)]
mod parity;

use burn::tensor::Tensor;
use culturelens_rng::{TorchGenerator, TorchNormalPath};
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use ddim::Ddim;
pub use ddpm::{Ddpm, VarianceType};
pub use dpm_solver::DpmSolverMultistep;
pub use edm_dpm_solver::EdmDpmSolverMultistep;
pub use edm_euler::EdmEuler;
pub use euler::EulerDiscrete;
pub use flow_match_euler::FlowMatchEulerDiscrete;
pub use pndm::Pndm;
pub use unclip::UnClip;

/// Most training timesteps a scheduler config may declare: every released schedule has 1,000;
/// the schedule's arrays are built eagerly, so `"num_train_timesteps": 9999999999` asked for a
/// 40 GB allocation (found by the fuzz harness, `scheduler_config.json`, seed 1, input 1324).
pub const MAX_TRAIN_TIMESTEPS: usize = 100_000;

/// A bad or unsupported scheduler config.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    #[error("scheduler_config.json is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("scheduler_config.json: key `{key}`: {message}")]
    Key { key: String, message: String },
    #[error(
        "unknown scheduler `{0}` (known: ddim, pndm, euler, dpm, edm-euler, edm-dpm, flow-euler, ddpm, or their diffusers class names DDIMScheduler, PNDMScheduler, EulerDiscreteScheduler, DPMSolverMultistepScheduler, EDMEulerScheduler, EDMDPMSolverMultistepScheduler, FlowMatchEulerDiscreteScheduler, DDPMScheduler)"
    )]
    Unknown(String),
    #[error("{0}")]
    Steps(String),
}

fn key_error(key: &str, message: impl Into<String>) -> SchedulerError {
    SchedulerError::Key { key: key.to_string(), message: message.into() }
}

/// The scheduler families.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedulerKind {
    Ddim,
    Pndm,
    EulerDiscrete,
    DpmSolverMultistep,
    EdmEuler,
    EdmDpmSolverMultistep,
    FlowMatchEulerDiscrete,
    Ddpm,
}

impl SchedulerKind {
    /// From a `--scheduler` name or a diffusers `_class_name` (case-insensitive).
    pub fn parse(name: &str) -> Result<Self, SchedulerError> {
        match name.to_ascii_lowercase().as_str() {
            "ddim" | "ddimscheduler" => Ok(Self::Ddim),
            "pndm" | "pndmscheduler" => Ok(Self::Pndm),
            "euler" | "eulerdiscrete" | "eulerdiscretescheduler" => Ok(Self::EulerDiscrete),
            "dpm" | "dpmsolver" | "dpmsolvermultistep" | "dpmsolvermultistepscheduler" => {
                Ok(Self::DpmSolverMultistep)
            }
            "edm-euler" | "edmeuler" | "edmeulerscheduler" => Ok(Self::EdmEuler),
            "edm-dpm" | "edmdpmsolver" | "edmdpmsolvermultistep" | "edmdpmsolvermultistepscheduler" => {
                Ok(Self::EdmDpmSolverMultistep)
            }
            "flow-euler" | "flowmatcheulerdiscrete" | "flowmatcheulerdiscretescheduler" => {
                Ok(Self::FlowMatchEulerDiscrete)
            }
            "ddpm" | "ddpmscheduler" => Ok(Self::Ddpm),
            _ => Err(SchedulerError::Unknown(name.to_string())),
        }
    }

    /// The diffusers class name.
    pub fn class_name(self) -> &'static str {
        match self {
            Self::Ddim => "DDIMScheduler",
            Self::Pndm => "PNDMScheduler",
            Self::EulerDiscrete => "EulerDiscreteScheduler",
            Self::DpmSolverMultistep => "DPMSolverMultistepScheduler",
            Self::EdmEuler => "EDMEulerScheduler",
            Self::EdmDpmSolverMultistep => "EDMDPMSolverMultistepScheduler",
            Self::FlowMatchEulerDiscrete => "FlowMatchEulerDiscreteScheduler",
            Self::Ddpm => "DDPMScheduler",
        }
    }

    /// Whether the scheduler's steps draw noise from the pipeline's generator (DDPM), so that
    /// only a pipeline that hands it one ([`Scheduler::set_noise_generator`]) may run it.
    pub fn draws_noise(self) -> bool {
        matches!(self, Self::Ddpm)
    }

    /// Whether the scheduler is a flow-matching one (the SD3 and FLUX pipelines' kind), whose
    /// model predicts a velocity, rather than a noise-prediction one (the UNet pipelines').
    pub fn is_flow_matching(self) -> bool {
        matches!(self, Self::FlowMatchEulerDiscrete)
    }
}

/// What the UNet predicts (`prediction_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prediction {
    Epsilon,
    VPrediction,
}

/// How inference timesteps are spread over the training ones (`timestep_spacing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spacing {
    Leading,
    Linspace,
    Trailing,
}

/// A `scheduler_config.json` with the defaults of the class being built.
pub(crate) struct ConfigReader {
    fields: serde_json::Map<String, Value>,
}

impl ConfigReader {
    /// Python's `json.dumps` (which diffusers' `save_config` uses) writes infinities and NaN as
    /// the bare tokens `Infinity`, `-Infinity` and `NaN`; they are read as those strings.
    fn new(json: &str) -> Result<Self, SchedulerError> {
        match serde_json::from_str::<Value>(&quote_non_finite(json))? {
            Value::Object(fields) => Ok(Self { fields }),
            _ => Err(key_error("(top level)", "expected a JSON object")),
        }
    }

    /// The value of `key`, or `default` when the file lacks it or sets it to null.
    pub(crate) fn get<T: DeserializeOwned>(&self, key: &str, default: T) -> Result<T, SchedulerError> {
        match self.fields.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(value) => serde_json::from_value(value.clone())
                .map_err(|e| key_error(key, format!("{e} (found {value})"))),
        }
    }

    /// Errors when `key` is set to anything but `allowed` (the only value implemented).
    pub(crate) fn require<T>(&self, key: &str, allowed: T, default: T) -> Result<(), SchedulerError>
    where
        T: DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let value: T = self.get(key, default)?;
        if value == allowed {
            Ok(())
        } else {
            Err(key_error(key, format!("{value:?} is not supported by culturelens (only {allowed:?})")))
        }
    }

    pub(crate) fn prediction(&self) -> Result<Prediction, SchedulerError> {
        match self.get::<String>("prediction_type", "epsilon".into())?.as_str() {
            "epsilon" => Ok(Prediction::Epsilon),
            "v_prediction" => Ok(Prediction::VPrediction),
            other => Err(key_error(
                "prediction_type",
                format!("`{other}` is not supported (epsilon or v_prediction)"),
            )),
        }
    }

    pub(crate) fn spacing(&self, default: &str) -> Result<Spacing, SchedulerError> {
        match self.get::<String>("timestep_spacing", default.into())?.as_str() {
            "leading" => Ok(Spacing::Leading),
            "linspace" => Ok(Spacing::Linspace),
            "trailing" => Ok(Spacing::Trailing),
            other => Err(key_error(
                "timestep_spacing",
                format!("`{other}` is not supported (leading, linspace or trailing)"),
            )),
        }
    }

    /// `alphas_cumprod` of the training schedule, as diffusers computes it in float32.
    /// `num_train_timesteps` is at most [`MAX_TRAIN_TIMESTEPS`].
    pub(crate) fn alphas_cumprod(&self) -> Result<Vec<f32>, SchedulerError> {
        self.require("rescale_betas_zero_snr", false, false)?;
        let n: usize = self.get("num_train_timesteps", 1000)?;
        if !(2..=MAX_TRAIN_TIMESTEPS).contains(&n) {
            return Err(key_error(
                "num_train_timesteps",
                format!("must be between 2 and {MAX_TRAIN_TIMESTEPS}"),
            ));
        }
        let betas: Vec<f32> = match self.get::<Option<Vec<f64>>>("trained_betas", None)? {
            Some(betas) => {
                if betas.len() != n {
                    return Err(key_error(
                        "trained_betas",
                        format!("has {} values, num_train_timesteps is {n}", betas.len()),
                    ));
                }
                betas.into_iter().map(|b| b as f32).collect()
            }
            None => {
                let start: f64 = self.get("beta_start", 0.0001)?;
                let end: f64 = self.get("beta_end", 0.02)?;
                match self.get::<String>("beta_schedule", "linear".into())?.as_str() {
                    "linear" => torch_linspace_f32(start as f32, end as f32, n),
                    "scaled_linear" => torch_linspace_f32(start.sqrt() as f32, end.sqrt() as f32, n)
                        .into_iter()
                        .map(|b| b * b)
                        .collect(),
                    "squaredcos_cap_v2" => squaredcos_cap_v2(n),
                    other => {
                        return Err(key_error(
                            "beta_schedule",
                            format!(
                                "`{other}` is not supported (linear, scaled_linear or squaredcos_cap_v2)"
                            ),
                        ));
                    }
                }
            }
        };
        Ok(alphas_cumprod(&betas))
    }
}

/// `cumprod(1 − betas)`: torch's `cumprod` on the CPU accumulates float32 in double and stores
/// float32.
pub(crate) fn alphas_cumprod(betas: &[f32]) -> Vec<f32> {
    let mut acc = 1.0f64;
    betas
        .iter()
        .map(|b| {
            acc *= f64::from(1.0 - b);
            acc as f32
        })
        .collect()
}

/// `betas_for_alpha_bar(n)` (`squaredcos_cap_v2`, Nichol & Dhariwal 2021): in float64,
/// `min(1 − ᾱ(t₂)/ᾱ(t₁), 0.999)` with `ᾱ(t) = cos((t + 0.008)/1.008 · π/2)²` at `t₁ = i/n`,
/// `t₂ = (i+1)/n`, then stored as float32.
fn squaredcos_cap_v2(n: usize) -> Vec<f32> {
    let alpha_bar = |t: f64| {
        let c = ((t + 0.008) / 1.008 * std::f64::consts::PI / 2.0).cos();
        c * c
    };
    (0..n)
        .map(|i| {
            let (t1, t2) = (i as f64 / n as f64, (i + 1) as f64 / n as f64);
            (1.0 - alpha_bar(t2) / alpha_bar(t1)).min(0.999) as f32
        })
        .collect()
}

/// `json` with the bare tokens `-Infinity`, `Infinity` and `NaN` outside strings quoted.
fn quote_non_finite(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + 8);
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = json;
    while let Some(c) = rest.chars().next() {
        if in_string {
            in_string = c != '"' || escaped;
            escaped = c == '\\' && !escaped;
        } else if c == '"' {
            in_string = true;
        } else if let Some(token) = ["-Infinity", "Infinity", "NaN"].into_iter().find(|t| rest.starts_with(t))
        {
            out.push('"');
            out.push_str(token);
            out.push('"');
            rest = &rest[token.len()..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The discrete-time schedule DDIM and PNDM share: ᾱ per training timestep, the ᾱ used past
/// timestep 0 (`set_alpha_to_one`), and the integer inference timesteps.
#[derive(Debug, Clone)]
pub(crate) struct AlphaSchedule {
    alphas_cumprod: Vec<f32>,
    final_alpha_cumprod: f32,
    spacing: Spacing,
    steps_offset: i64,
}

impl AlphaSchedule {
    /// `set_alpha_to_one` defaults to `alpha_to_one_default` (the class's default).
    fn new(config: &ConfigReader, alpha_to_one_default: bool) -> Result<Self, SchedulerError> {
        let alphas_cumprod = config.alphas_cumprod()?;
        let set_alpha_to_one: bool = config.get("set_alpha_to_one", alpha_to_one_default)?;
        Ok(Self {
            final_alpha_cumprod: if set_alpha_to_one { 1.0 } else { alphas_cumprod[0] },
            alphas_cumprod,
            spacing: config.spacing("leading")?,
            steps_offset: config.get("steps_offset", 0)?,
        })
    }

    fn train_steps(&self) -> usize {
        self.alphas_cumprod.len()
    }

    /// Descending inference timesteps for `n` steps.
    fn timesteps(&self, n: usize) -> Vec<i64> {
        integer_timesteps(self.spacing, self.train_steps(), n, self.steps_offset)
    }

    /// (ᾱ_t, ᾱ_prev), the latter `final_alpha_cumprod` when `prev` < 0.
    fn alphas(&self, t: i64, prev: i64) -> (f32, f32) {
        let prev = if prev >= 0 { self.alphas_cumprod[prev as usize] } else { self.final_alpha_cumprod };
        (self.alphas_cumprod[t as usize], prev)
    }
}

/// `torch.linspace(start, end, n, dtype=float32)` on the CPU: a float32 step, the first half
/// counted up from `start` and the second half down from `end`, each point one fused
/// multiply-add, `[start]` for one point. That is torch's AVX2 and AVX-512 kernels (compiled with
/// FMA contraction: `start + step·i` rounded once), checked bit for bit against torch 2.15; its
/// DEFAULT-capability kernel (no FMA, e.g. `ATEN_CPU_CAPABILITY=default`) rounds the product and
/// the sum apart, which moves some points of a long ramp (a 1,000-step beta schedule) by an ulp.
fn torch_linspace_f32(start: f32, end: f32, n: usize) -> Vec<f32> {
    if n == 1 {
        return vec![start];
    }
    let step = (end - start) / (n - 1) as f32;
    let halfway = n / 2;
    (0..n)
        .map(|i| {
            if i < halfway { step.mul_add(i as f32, start) } else { (-step).mul_add((n - i - 1) as f32, end) }
        })
        .collect()
}

/// [`torch_linspace_f32`] in float64 (`dtype=torch.float64`).
fn torch_linspace_f64(start: f64, end: f64, n: usize) -> Vec<f64> {
    if n == 1 {
        return vec![start];
    }
    let step = (end - start) / (n - 1) as f64;
    let halfway = n / 2;
    (0..n)
        .map(|i| {
            if i < halfway { step.mul_add(i as f64, start) } else { (-step).mul_add((n - i - 1) as f64, end) }
        })
        .collect()
}

/// `(n, T)` → the integer inference timesteps of DDIM and PNDM (descending for DDIM; PNDM
/// reorders), before any scheduler-specific reshuffling.
pub(crate) fn integer_timesteps(spacing: Spacing, train: usize, n: usize, steps_offset: i64) -> Vec<i64> {
    match spacing {
        Spacing::Linspace => linspace(0.0, (train - 1) as f64, n)
            .into_iter()
            .rev()
            .map(|t| t.round_ties_even() as i64)
            .collect(),
        Spacing::Leading => {
            let ratio = (train / n) as i64;
            (0..n as i64).rev().map(|i| i * ratio + steps_offset).collect()
        }
        Spacing::Trailing => trailing(train as f64, train as f64 / n as f64),
    }
}

/// `np.round(np.arange(start, 0, -ratio)) - 1`, descending.
pub(crate) fn trailing(start: f64, ratio: f64) -> Vec<i64> {
    let count = (start / ratio).ceil() as usize;
    (0..count).map(|i| (start - i as f64 * ratio).round_ties_even() as i64 - 1).collect()
}

/// `np.linspace(start, end, n)` in float64 (the flow-matching pipelines build their sigmas with it).
pub fn linspace(start: f64, end: f64, n: usize) -> Vec<f64> {
    if n == 1 {
        return vec![start];
    }
    let step = (end - start) / (n - 1) as f64;
    (0..n).map(|i| if i == n - 1 { end } else { start + i as f64 * step }).collect()
}

/// `np.interp(x, arange(len(ys)), ys)`.
pub(crate) fn interp(x: f64, ys: &[f32]) -> f64 {
    if x <= 0.0 {
        return f64::from(ys[0]);
    }
    let last = ys.len() - 1;
    if x >= last as f64 {
        return f64::from(ys[last]);
    }
    let i = x.floor() as usize;
    let frac = x - i as f64;
    let (a, b) = (f64::from(ys[i]), f64::from(ys[i + 1]));
    // numpy's formula: slope * (x - xp[i]) + fp[i]
    (b - a) * frac + a
}

/// One configured scheduler with its per-run state.
#[derive(Debug, Clone)]
pub enum Scheduler {
    Ddim(Ddim),
    Pndm(Box<Pndm>),
    EulerDiscrete(EulerDiscrete),
    DpmSolverMultistep(DpmSolverMultistep),
    EdmEuler(EdmEuler),
    EdmDpmSolverMultistep(EdmDpmSolverMultistep),
    FlowMatchEulerDiscrete(FlowMatchEulerDiscrete),
    Ddpm(Box<Ddpm>),
}

impl Scheduler {
    /// Reads `scheduler_config.json`; `kind` overrides its `_class_name` (`--scheduler`).
    pub fn from_config(json: &str, kind: Option<SchedulerKind>) -> Result<Self, SchedulerError> {
        let reader = ConfigReader::new(json)?;
        let kind = match kind {
            Some(kind) => kind,
            None => {
                let class: Option<String> = reader.get("_class_name", None)?;
                let class = class.ok_or_else(|| {
                    key_error("_class_name", "missing (name the scheduler with --scheduler)")
                })?;
                SchedulerKind::parse(&class).map_err(|_| {
                    key_error(
                        "_class_name",
                        format!("`{class}` is not a supported scheduler (DDIMScheduler, PNDMScheduler, EulerDiscreteScheduler, DPMSolverMultistepScheduler, EDMEulerScheduler, EDMDPMSolverMultistepScheduler, FlowMatchEulerDiscreteScheduler, DDPMScheduler)"),
                    )
                })?
            }
        };
        Ok(match kind {
            SchedulerKind::Ddim => Self::Ddim(Ddim::new(&reader)?),
            SchedulerKind::Pndm => Self::Pndm(Box::new(Pndm::new(&reader)?)),
            SchedulerKind::EulerDiscrete => Self::EulerDiscrete(EulerDiscrete::new(&reader)?),
            SchedulerKind::DpmSolverMultistep => Self::DpmSolverMultistep(DpmSolverMultistep::new(&reader)?),
            SchedulerKind::EdmEuler => Self::EdmEuler(EdmEuler::new(&reader)?),
            SchedulerKind::EdmDpmSolverMultistep => {
                Self::EdmDpmSolverMultistep(EdmDpmSolverMultistep::new(&reader)?)
            }
            SchedulerKind::FlowMatchEulerDiscrete => {
                Self::FlowMatchEulerDiscrete(FlowMatchEulerDiscrete::new(&reader)?)
            }
            SchedulerKind::Ddpm => Self::Ddpm(Box::new(Ddpm::new(&reader)?)),
        })
    }

    pub fn kind(&self) -> SchedulerKind {
        match self {
            Self::Ddim(_) => SchedulerKind::Ddim,
            Self::Pndm(_) => SchedulerKind::Pndm,
            Self::EulerDiscrete(_) => SchedulerKind::EulerDiscrete,
            Self::DpmSolverMultistep(_) => SchedulerKind::DpmSolverMultistep,
            Self::EdmEuler(_) => SchedulerKind::EdmEuler,
            Self::EdmDpmSolverMultistep(_) => SchedulerKind::EdmDpmSolverMultistep,
            Self::FlowMatchEulerDiscrete(_) => SchedulerKind::FlowMatchEulerDiscrete,
            Self::Ddpm(_) => SchedulerKind::Ddpm,
        }
    }

    /// The flow-matching scheduler, which the SD3 and FLUX pipelines drive themselves (σs and μ
    /// from the pipeline, latents of any rank); `None` for the noise-prediction schedulers.
    pub fn flow_match(&mut self) -> Option<&mut FlowMatchEulerDiscrete> {
        match self {
            Self::FlowMatchEulerDiscrete(s) => Some(s),
            _ => None,
        }
    }

    /// DDPM, which IF and Kandinsky 3 drive with their own variance handling and noise
    /// augmentation; `None` for every other scheduler.
    pub fn ddpm(&mut self) -> Option<&mut Ddpm> {
        match self {
            Self::Ddpm(s) => Some(s),
            _ => None,
        }
    }

    /// Hands the scheduler the pipeline's torch generator, after the pipeline's own draws (the
    /// initial noise), for the noise its steps draw (diffusers' `step(..., generator=generator)`);
    /// the deterministic schedulers ignore it. DDPM's steps at `t > 0` need it.
    pub fn set_noise_generator(&mut self, generator: TorchGenerator, path: TorchNormalPath) {
        self.set_noise_generators(vec![generator], path);
    }

    /// [`Self::set_noise_generator`] with one generator per equal share of the batch's rows, in
    /// order (diffusers' list of generators, or one per prompt of a batch).
    pub fn set_noise_generators(&mut self, generators: Vec<TorchGenerator>, path: TorchNormalPath) {
        if let Self::Ddpm(s) = self {
            s.set_noise_generators(generators, path);
        }
    }

    /// The generator handed in by [`Self::set_noise_generator`], in its current state.
    pub fn take_noise_generator(&mut self) -> Option<TorchGenerator> {
        match self {
            Self::Ddpm(s) => s.take_noise_generator(),
            _ => None,
        }
    }

    /// `set_timesteps(n)`: resets the per-run state.
    pub fn set_timesteps(&mut self, n: usize) -> Result<(), SchedulerError> {
        let train = match self {
            Self::Ddim(s) => s.train_steps(),
            Self::Pndm(s) => s.train_steps(),
            Self::EulerDiscrete(s) => s.train_steps(),
            Self::DpmSolverMultistep(s) => s.train_steps(),
            Self::EdmEuler(s) => s.train_steps(),
            Self::EdmDpmSolverMultistep(s) => s.train_steps(),
            Self::FlowMatchEulerDiscrete(s) => s.train_steps(),
            Self::Ddpm(s) => s.train_steps(),
        };
        if n == 0 || n > train {
            return Err(SchedulerError::Steps(format!(
                "--steps {n}: must be between 1 and num_train_timesteps = {train}"
            )));
        }
        match self {
            Self::Ddim(s) => s.set_timesteps(n),
            Self::Pndm(s) => s.set_timesteps(n)?,
            Self::EulerDiscrete(s) => s.set_timesteps(n),
            Self::DpmSolverMultistep(s) => s.set_timesteps(n),
            Self::EdmEuler(s) => s.set_timesteps(n),
            Self::EdmDpmSolverMultistep(s) => s.set_timesteps(n),
            Self::FlowMatchEulerDiscrete(s) => s.set_timesteps(n, None, None)?,
            Self::Ddpm(s) => s.set_timesteps(n),
        }
        Ok(())
    }

    /// The timesteps the UNet is called with, in order (PNDM repeats one; Euler's may be
    /// fractional; the EDM schedulers' are `c_noise = ¼ ln σ`).
    pub fn timesteps(&self) -> Vec<f32> {
        match self {
            Self::Ddim(s) => s.timesteps.iter().map(|&t| t as f32).collect(),
            Self::Pndm(s) => s.timesteps.iter().map(|&t| t as f32).collect(),
            Self::EulerDiscrete(s) => s.timesteps.clone(),
            Self::DpmSolverMultistep(s) => s.timesteps.iter().map(|&t| t as f32).collect(),
            Self::EdmEuler(s) => s.timesteps.clone(),
            Self::EdmDpmSolverMultistep(s) => s.timesteps.clone(),
            Self::FlowMatchEulerDiscrete(s) => s.timesteps().to_vec(),
            Self::Ddpm(s) => s.timesteps.iter().map(|&t| t as f32).collect(),
        }
    }

    /// The standard deviation of the initial noise (the seed's normals are multiplied by it).
    pub fn init_noise_sigma(&self) -> f32 {
        match self {
            Self::EulerDiscrete(s) => s.init_noise_sigma(),
            Self::EdmEuler(s) => s.init_noise_sigma(),
            Self::EdmDpmSolverMultistep(s) => s.init_noise_sigma(),
            _ => 1.0,
        }
    }

    /// `scale_model_input` for the `step`-th call (0-based).
    pub fn scale_model_input(&self, sample: Tensor<4>, step: usize) -> Tensor<4> {
        match self {
            Self::EulerDiscrete(s) => s.scale_model_input(sample, step),
            Self::EdmEuler(s) => s.scale_model_input(sample, step),
            Self::EdmDpmSolverMultistep(s) => s.scale_model_input(sample, step),
            _ => sample,
        }
    }

    /// One denoising step: `model_output` at the `step`-th timestep (0-based) applied to `sample`.
    /// Counted in [`steps_taken`].
    pub fn step(&mut self, model_output: Tensor<4>, step: usize, sample: Tensor<4>) -> Tensor<4> {
        if let Some(hook) = STEP_HOOK.with(std::cell::Cell::get) {
            hook();
        }
        STEPS_TAKEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match self {
            Self::Ddim(s) => s.step(model_output, step, sample),
            Self::Pndm(s) => s.step(model_output, step, sample),
            Self::EulerDiscrete(s) => s.step(model_output, step, sample),
            Self::DpmSolverMultistep(s) => s.step(model_output, step, sample),
            Self::EdmEuler(s) => s.step(model_output, step, sample),
            Self::EdmDpmSolverMultistep(s) => s.step(model_output, step, sample),
            Self::FlowMatchEulerDiscrete(s) => s.step(model_output, step, sample),
            Self::Ddpm(s) => s.step(model_output, step, sample),
        }
    }
}

thread_local! {
    /// What [`Scheduler::step`] calls first on this thread ([`set_step_hook`]).
    static STEP_HOOK: std::cell::Cell<Option<fn()>> = const { std::cell::Cell::new(None) };
}

/// Sets the function every [`Scheduler::step`] on this thread calls before it steps (the
/// caller's cancellation point between denoising steps, `culturelens_metrics::cancel::checkpoint`,
/// which this crate does not depend on); returns the previous one.
pub fn set_step_hook(hook: Option<fn()>) -> Option<fn()> {
    STEP_HOOK.with(|h| h.replace(hook))
}

/// Denoising steps every scheduler of the process has taken ([`Scheduler::step`] calls, one per
/// timestep of a loop: PNDM's Runge–Kutta warm-up counts each of its calls).
static STEPS_TAKEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The process-wide count of denoising steps taken so far: a caller that reads it before and
/// during a generation (from another thread) shows the progress within the denoising loop, which
/// every pipeline drives through [`Scheduler::step`]. On an asynchronous backend (wgpu, CUDA) a
/// step is counted when it is queued.
pub fn steps_taken() -> u64 {
    STEPS_TAKEN.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestep_spacings_by_hand() {
        // T = 1000, n = 10: leading = 900..0 step 100 plus offset 1; linspace rounds
        // 999·i/9 (999, 888, 777, 666, 555, 444, 333, 222, 111, 0); trailing = 999, 899, …, 99.
        assert_eq!(
            integer_timesteps(Spacing::Leading, 1000, 10, 1),
            vec![901, 801, 701, 601, 501, 401, 301, 201, 101, 1]
        );
        assert_eq!(
            integer_timesteps(Spacing::Linspace, 1000, 10, 1),
            vec![999, 888, 777, 666, 555, 444, 333, 222, 111, 0]
        );
        assert_eq!(
            integer_timesteps(Spacing::Trailing, 1000, 10, 0),
            vec![999, 899, 799, 699, 599, 499, 399, 299, 199, 99]
        );
        // 1000 / 3 = 333.33…: arange(1000, 0, -333.33) = 1000, 666.67, 333.33 → round - 1.
        assert_eq!(trailing(1000.0, 1000.0 / 3.0), vec![999, 666, 332]);
    }

    #[test]
    fn python_infinity_tokens() {
        assert_eq!(
            quote_non_finite(r#"{"a": -Infinity, "b": "NaN x", "c": [NaN, Infinity]}"#),
            r#"{"a": "-Infinity", "b": "NaN x", "c": ["NaN", "Infinity"]}"#
        );
        assert_eq!(quote_non_finite(r#"{"a": "q\"-Infinity"}"#), r#"{"a": "q\"-Infinity"}"#);
    }

    #[test]
    fn linear_betas_by_hand() {
        // linspace(0.1, 0.3, 3) = 0.1, 0.2, 0.3 → alphas 0.9, 0.8, 0.7 → cumprod 0.9, 0.72, 0.504.
        let reader =
            ConfigReader::new(r#"{"num_train_timesteps": 3, "beta_start": 0.1, "beta_end": 0.3}"#).unwrap();
        let ac = reader.alphas_cumprod().unwrap();
        for (got, want) in ac.iter().zip([0.9f32, 0.72, 0.504]) {
            assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        }
    }

    #[test]
    fn squaredcos_betas_by_hand() {
        // ᾱ(t) = cos((t + 0.008)/1.008 · π/2)²; n = 2: β₀ = 1 − ᾱ(½)/ᾱ(0), β₁ = min(1 − ᾱ(1)/ᾱ(½), 0.999)
        // where ᾱ(1) = cos(π/2)² ≈ 0, so β₁ is capped.
        let reader =
            ConfigReader::new(r#"{"num_train_timesteps": 2, "beta_schedule": "squaredcos_cap_v2"}"#).unwrap();
        let ac = reader.alphas_cumprod().unwrap();
        let a = |t: f64| ((t + 0.008) / 1.008 * std::f64::consts::PI / 2.0).cos().powi(2);
        let beta0 = (1.0 - a(0.5) / a(0.0)) as f32;
        assert!((ac[0] - (1.0 - beta0)).abs() < 1e-7, "{}", ac[0]);
        assert!((ac[1] - ac[0] * (1.0 - 0.999)).abs() < 1e-7, "{}", ac[1]);
    }

    #[test]
    fn a_training_schedule_beyond_the_limit_is_refused() {
        for n in [1usize, MAX_TRAIN_TIMESTEPS + 1, 9_999_999_999] {
            let e =
                ConfigReader::new(&format!(r#"{{"num_train_timesteps": {n}}}"#)).unwrap().alphas_cumprod();
            let e = e.unwrap_err().to_string();
            assert!(e.contains("key `num_train_timesteps`: must be between 2 and 100000"), "{e}");
        }
        let ok = format!(r#"{{"num_train_timesteps": {MAX_TRAIN_TIMESTEPS}}}"#);
        assert_eq!(ConfigReader::new(&ok).unwrap().alphas_cumprod().unwrap().len(), MAX_TRAIN_TIMESTEPS);
    }

    #[test]
    fn unknown_and_unsupported_are_named() {
        let e = Scheduler::from_config(r#"{"_class_name": "LMSDiscreteScheduler"}"#, None).unwrap_err();
        assert!(
            e.to_string().contains("_class_name") && e.to_string().contains("LMSDiscreteScheduler"),
            "{e}"
        );
        let e = SchedulerKind::parse("heun").unwrap_err();
        assert!(e.to_string().contains("unknown scheduler `heun`"), "{e}");
        let e = Scheduler::from_config(
            r#"{"_class_name": "EulerDiscreteScheduler", "use_karras_sigmas": true}"#,
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("use_karras_sigmas"), "{e}");
        let e = Scheduler::from_config(r#"{"_class_name": "DDIMScheduler", "beta_start": "x"}"#, None)
            .unwrap_err();
        assert!(e.to_string().contains("`beta_start`"), "{e}");
        for (config, key) in [
            (r#"{"_class_name": "DDPMScheduler", "variance_type": "learned"}"#, "`variance_type`"),
            (r#"{"_class_name": "DDPMScheduler", "prediction_type": "sample"}"#, "`prediction_type`"),
            (r#"{"_class_name": "DDPMScheduler", "beta_schedule": "sigmoid"}"#, "`beta_schedule`"),
            (
                r#"{"_class_name": "DDPMScheduler", "rescale_betas_zero_snr": true}"#,
                "`rescale_betas_zero_snr`",
            ),
        ] {
            let e = Scheduler::from_config(config, None).unwrap_err();
            assert!(e.to_string().contains(key), "{e}");
        }
    }
}
