//! Native side of text-to-image generation: reads a diffusers pipeline folder
//! (`model_index.json` and one subfolder per component, as `save_pretrained` writes it,
//! safetensors weights only) and builds the diffusion crate's [`Pipeline`] on a device, with the
//! tokenizers diffusers uses. `model_index.json`'s `_class_name` picks the family, each loaded by
//! its own module:
//!
//! | `_class_name` | module | components read |
//! |---|---|---|
//! | `StableDiffusionPipeline`, `AltDiffusionPipeline` | [`stable_diffusion`] | `text_encoder`, `tokenizer`, `unet`, `vae`, `scheduler` |
//! | `StableDiffusionXLPipeline` | [`stable_diffusion_xl`] | `text_encoder{,_2}`, `tokenizer{,_2}`, `unet`, `vae`, `scheduler` |
//! | `StableDiffusion3Pipeline` | [`stable_diffusion_3`] | `text_encoder{,_2,_3}`, `tokenizer{,_2,_3}`, `transformer`, `vae`, `scheduler` |
//! | `FluxPipeline` | [`flux`] | `text_encoder{,_2}`, `tokenizer{,_2}`, `transformer`, `vae`, `scheduler` |
//! | `CogView4Pipeline` | [`cogview4`] | `text_encoder`, `tokenizer`, `transformer`, `vae`, `scheduler` |
//! | `Lumina2Pipeline` | [`lumina2`] | `text_encoder`, `tokenizer`, `transformer`, `vae`, `scheduler` |
//! | `Kandinsky3Pipeline` | [`kandinsky3`] | `text_encoder`, `tokenizer`, `unet`, `movq`, `scheduler` |
//! | `IFPipeline` | [`deepfloyd_if`] | `text_encoder`, `tokenizer`, `unet`, `scheduler` (DDPM) |
//! | `KandinskyCombinedPipeline` | [`kandinsky21`] | `text_encoder`, `tokenizer`, `unet`, `movq`, `scheduler`, `prior_{prior,text_encoder,tokenizer,image_encoder,scheduler}` |
//!
//! Every config is read key by key by the model crates; an unsupported pipeline or component
//! class, a scheduler of the wrong kind (a flow-matching one for a UNet pipeline or the other way
//! round), a missing or pickled weights file, a tensor of the wrong shape or an unknown
//! scheduler is an error naming the file (and the key), before anything is generated.
//!
//! A new family is a row of [`PIPELINES`], a module beside these and a variant of [`Pipeline`].

pub mod cogview4;
mod deepfloyd_if;

pub use deepfloyd_if::load_super_resolution;

mod flux;
mod kandinsky21;
mod kandinsky3;
mod lumina2;
mod stable_diffusion;
mod stable_diffusion_3;
mod stable_diffusion_xl;

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use culturelens_diffusion::pipeline::unet_size_rule;
use culturelens_diffusion::pipelines::{Pipeline, PromptIds};
use culturelens_diffusion::request::SizeRule;
use culturelens_diffusion::{
    pipeline_cogview4, pipeline_flux, pipeline_if, pipeline_kandinsky3, pipeline_kandinsky21,
    pipeline_lumina2, pipeline_stable_diffusion_3,
};
use culturelens_diffusion_models::transformer_cogview4::CogView4TransformerConfig;
use culturelens_diffusion_models::transformer_lumina2::Lumina2TransformerConfig;
use culturelens_diffusion_models::transformer_sd3::Sd3TransformerConfig;
use culturelens_diffusion_models::unet::UNetConfig;
use culturelens_diffusion_models::unet_if::IfUNetConfig;
use culturelens_diffusion_models::vae::VaeConfig;
use culturelens_diffusion_models::vq_model::VqModelConfig;
use culturelens_diffusion_schedulers::{Scheduler, SchedulerKind};
use culturelens_models::ModelError;
use serde_json::Value;

use crate::gemma_tokenizer::GemmaTokenizer;
use crate::t5_tokenizer::T5Tokenizer;
use crate::xlm_roberta_tokenizer::XlmRobertaTokenizer;
use crate::{LoadError, read_string, weight_files};

/// The families culturelens runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    StableDiffusion,
    AltDiffusion,
    StableDiffusionXl,
    StableDiffusion3,
    Flux,
    CogView4,
    Lumina2,
    Kandinsky3,
    DeepFloydIf,
    Kandinsky21,
}

/// The pipeline classes culturelens runs and the component classes each must have.
const PIPELINES: &[(&str, Family, Components)] = &[
    (
        "StableDiffusionPipeline",
        Family::StableDiffusion,
        &[
            ("text_encoder", &["CLIPTextModel"]),
            ("tokenizer", CLIP_TOKENIZERS),
            ("unet", &["UNet2DConditionModel"]),
            ("vae", &["AutoencoderKL"]),
        ],
    ),
    (
        "AltDiffusionPipeline",
        Family::AltDiffusion,
        &[
            ("text_encoder", &["RobertaSeriesModelWithTransformation"]),
            ("tokenizer", &["XLMRobertaTokenizer", "XLMRobertaTokenizerFast"]),
            ("unet", &["UNet2DConditionModel"]),
            ("vae", &["AutoencoderKL"]),
        ],
    ),
    (
        "StableDiffusionXLPipeline",
        Family::StableDiffusionXl,
        &[
            ("text_encoder", &["CLIPTextModel"]),
            ("text_encoder_2", &["CLIPTextModelWithProjection"]),
            ("tokenizer", CLIP_TOKENIZERS),
            ("tokenizer_2", CLIP_TOKENIZERS),
            ("unet", &["UNet2DConditionModel"]),
            ("vae", &["AutoencoderKL"]),
        ],
    ),
    (
        "StableDiffusion3Pipeline",
        Family::StableDiffusion3,
        &[
            ("text_encoder", &["CLIPTextModelWithProjection"]),
            ("text_encoder_2", &["CLIPTextModelWithProjection"]),
            ("text_encoder_3", &["T5EncoderModel"]),
            ("tokenizer", CLIP_TOKENIZERS),
            ("tokenizer_2", CLIP_TOKENIZERS),
            ("tokenizer_3", T5_TOKENIZERS),
            ("transformer", &["SD3Transformer2DModel"]),
            ("vae", &["AutoencoderKL"]),
        ],
    ),
    (
        "FluxPipeline",
        Family::Flux,
        &[
            ("text_encoder", &["CLIPTextModel"]),
            ("text_encoder_2", &["T5EncoderModel"]),
            ("tokenizer", CLIP_TOKENIZERS),
            ("tokenizer_2", T5_TOKENIZERS),
            ("transformer", &["FluxTransformer2DModel"]),
            ("vae", &["AutoencoderKL"]),
        ],
    ),
    (
        "CogView4Pipeline",
        Family::CogView4,
        &[
            ("text_encoder", &["GlmModel"]),
            ("tokenizer", &["PreTrainedTokenizerFast", "TokenizersBackend"]),
            ("transformer", &["CogView4Transformer2DModel"]),
            ("vae", &["AutoencoderKL"]),
        ],
    ),
    (
        "Lumina2Pipeline",
        Family::Lumina2,
        &[
            ("text_encoder", &["Gemma2Model"]),
            ("tokenizer", &["GemmaTokenizer", "GemmaTokenizerFast"]),
            ("transformer", &["Lumina2Transformer2DModel"]),
            ("vae", &["AutoencoderKL"]),
        ],
    ),
    (
        "Kandinsky3Pipeline",
        Family::Kandinsky3,
        &[
            ("text_encoder", &["T5EncoderModel"]),
            ("tokenizer", T5_TOKENIZERS),
            ("unet", &["Kandinsky3UNet"]),
            ("movq", &["VQModel"]),
        ],
    ),
    (
        "IFPipeline",
        Family::DeepFloydIf,
        &[
            ("text_encoder", &["T5EncoderModel"]),
            ("tokenizer", T5_TOKENIZERS),
            ("unet", &["UNet2DConditionModel"]),
        ],
    ),
    (
        "KandinskyCombinedPipeline",
        Family::Kandinsky21,
        &[
            ("text_encoder", &["MultilingualCLIP"]),
            ("tokenizer", &["XLMRobertaTokenizer", "XLMRobertaTokenizerFast"]),
            ("unet", &["UNet2DConditionModel"]),
            ("movq", &["VQModel"]),
            ("prior_prior", &["PriorTransformer"]),
            ("prior_text_encoder", &["CLIPTextModelWithProjection"]),
            ("prior_tokenizer", CLIP_TOKENIZERS),
            ("prior_image_encoder", &["CLIPVisionModelWithProjection"]),
        ],
    ),
];
type Components = &'static [(&'static str, &'static [&'static str])];
const CLIP_TOKENIZERS: &[&str] = &["CLIPTokenizer", "CLIPTokenizerFast"];
const T5_TOKENIZERS: &[&str] = &["T5Tokenizer", "T5TokenizerFast"];

/// The component folders [`PipelineFolder::load`] reads for the pipeline class `class`
/// (`model_index.json`'s `_class_name`), the scheduler aside; `None` for a class it does not
/// run. `generate --model` downloads exactly these.
pub fn pipeline_components(class: &str) -> Option<Vec<&'static str>> {
    PIPELINES
        .iter()
        .find(|(name, _, _)| *name == class)
        .map(|(_, _, c)| c.iter().map(|(name, _)| *name).collect())
}

/// One of a pipeline's tokenizers.
pub enum PromptTokenizer {
    Clip(Box<ClipTokenizer>),
    XlmRoberta(XlmRobertaTokenizer),
    T5(Box<T5Tokenizer>),
    Glm(Box<cogview4::GlmTokenizer>),
    /// Lumina 2's: unpadded ids, the system prompt prefixed to prompts (not to negatives).
    Gemma(Box<GemmaTokenizer>),
    /// DeepFloyd IF's T5 tokenizer, after IF's `lower().strip()` of the prompt.
    IfT5(Box<T5Tokenizer>),
}

impl PromptTokenizer {
    /// The ids of `text`, padded and truncated to the tokenizer's length as diffusers calls it.
    pub fn ids(&self, text: &str) -> Result<Vec<u32>, LoadError> {
        match self {
            Self::Clip(t) => t.ids(text),
            Self::XlmRoberta(t) => t.ids(text),
            Self::T5(t) => t.ids(text),
            Self::IfT5(t) => t.ids(&deepfloyd_if::preprocess(text)),
            Self::Glm(t) => t.ids(text),
            Self::Gemma(t) => t.ids(&culturelens_diffusion::pipeline_lumina2::prompt_text(text)),
        }
    }

    /// The ids of a negative prompt: as [`Self::ids`], but Lumina 2 adds no system prompt.
    pub fn negative_ids(&self, text: &str) -> Result<Vec<u32>, LoadError> {
        match self {
            Self::Gemma(t) => t.ids(text),
            _ => self.ids(text),
        }
    }

    /// How many tokens truncation cuts from the prompt `text` (CogView4's GLM and Lumina 2's
    /// Gemma tokenizers, whose pipelines warn; 0 for the others).
    pub fn cut(&self, text: &str) -> Result<usize, LoadError> {
        match self {
            Self::Glm(t) => t.cut(text),
            Self::Gemma(t) => t.cut(&culturelens_diffusion::pipeline_lumina2::prompt_text(text)),
            _ => Ok(0),
        }
    }
}

/// A loaded pipeline folder.
pub struct PipelineFolder {
    pub dir: PathBuf,
    pub model: Pipeline,
    /// `tokenizer`, `tokenizer_2`, … in that order, one per id row of a prompt.
    pub tokenizers: Vec<PromptTokenizer>,
    /// `scheduler/scheduler_config.json`, already checked to build.
    pub scheduler_config: String,
    pub scheduler_path: PathBuf,
}

pub(crate) fn unsupported(path: &Path, message: String) -> LoadError {
    LoadError::Model { path: path.to_owned(), source: ModelError::Unsupported(message) }
}

/// A component subfolder: its `config.json` path and text, and its safetensors files
/// (`{stem}.safetensors` or shards).
pub(crate) struct Component {
    pub config_path: PathBuf,
    pub json: String,
    pub files: Vec<PathBuf>,
}

impl Component {
    /// Reads `dir/name/config.json` and finds the weights `dir/name/{stem}.safetensors`.
    pub(crate) fn read(dir: &Path, name: &str, stem: &str) -> Result<Self, LoadError> {
        let sub = dir.join(name);
        let config_path = sub.join("config.json");
        let json = read_string(&config_path)?;
        let files = weight_files(&sub, stem, &[format!("{stem}.bin").as_str(), "pytorch_model.bin"], |_| {
            "re-save the pipeline with `pipe.save_pretrained(OUT, safe_serialization=True)`".into()
        })?;
        Ok(Self { config_path, json, files })
    }

    /// Builds the component's model with `build` from its config text and checkpoint on the
    /// compute device, then parks it on the host if the placement offloads.
    pub(crate) fn load<T: culturelens_diffusion::offload::Component>(
        &self,
        place: &Placement,
        build: impl FnOnce(&str, culturelens_models::weights::Vars) -> Result<T, ModelError>,
    ) -> Result<T, LoadError> {
        let model = crate::load_model(&self.files, &self.config_path, &place.device, |ck| {
            build(&self.json, ck.vars())
        })?;
        Ok(match &place.host {
            Some(host) => model.to_device(host),
            None => model,
        })
    }
}

/// Where a pipeline's components go ([`culturelens_diffusion::offload`]): each is built on
/// `device`; with a `host` (`generate --offload`) it is moved there right after, before the next
/// is built, so at most one component is on the compute device while loading as while running.
#[derive(Clone, Debug)]
pub struct Placement {
    pub device: Device,
    pub host: Option<Device>,
}

impl Placement {
    /// Every component stays on `device`.
    pub fn resident(device: &Device) -> Self {
        Self { device: device.clone(), host: None }
    }

    /// Components wait on `host` (the CLI's: Burn's CPU device, in the machine's memory) and
    /// visit `device` one at a time. When `device` is the host there is nothing to move: the
    /// same as [`Self::resident`].
    pub fn offloaded(device: &Device, host: &Device) -> Self {
        Self { device: device.clone(), host: (host != device).then(|| host.clone()) }
    }
}

impl From<&Device> for Placement {
    fn from(device: &Device) -> Self {
        Self::resident(device)
    }
}

impl std::ops::Deref for Placement {
    type Target = Device;

    fn deref(&self) -> &Device {
        &self.device
    }
}

impl PipelineFolder {
    /// Loads the pipeline in `dir` onto `device`; `scheduler` overrides the folder's scheduler
    /// class (`--scheduler`).
    pub fn load(dir: &Path, device: &Device, scheduler: Option<SchedulerKind>) -> Result<Self, LoadError> {
        Self::load_to(dir, &Placement::resident(device), scheduler)
    }

    /// [`Self::load`] with the components placed by `device` (offloaded to the host or not).
    pub fn load_to(
        dir: &Path,
        device: &Placement,
        scheduler: Option<SchedulerKind>,
    ) -> Result<Self, LoadError> {
        let (index, index_path, family) = read_index(dir)?;
        let class = index.get("_class_name").and_then(Value::as_str).unwrap_or("");
        let scheduler_path = dir.join("scheduler").join("scheduler_config.json");
        let scheduler_config = read_string(&scheduler_path)?;
        fitting_scheduler(&scheduler_config, &scheduler_path, family, class, scheduler)?;
        let (model, tokenizers) = match family {
            Family::StableDiffusion | Family::AltDiffusion => {
                stable_diffusion::load(dir, device, family == Family::AltDiffusion)?
            }
            Family::StableDiffusionXl => stable_diffusion_xl::load(dir, &index, &index_path, device)?,
            Family::StableDiffusion3 => stable_diffusion_3::load(dir, device)?,
            Family::Flux => flux::load(dir, device)?,
            Family::CogView4 => cogview4::load(dir, device)?,
            Family::Lumina2 => lumina2::load(dir, device)?,
            Family::Kandinsky3 => kandinsky3::load(dir, device)?,
            Family::DeepFloydIf => deepfloyd_if::load(dir, device)?,
            Family::Kandinsky21 => kandinsky21::load(dir, device)?,
        };
        Ok(Self { dir: dir.to_owned(), model, tokenizers, scheduler_config, scheduler_path })
    }

    /// The image sizes the pipeline in `dir` takes, from `model_index.json` and the size-setting
    /// components' configs alone (each family's `size_rule` in `culturelens-diffusion`, the one
    /// its loaded pipeline checks requests with): `generate` refuses a size with it before any
    /// weights load.
    pub fn size_rule(dir: &Path) -> Result<SizeRule, LoadError> {
        let (_, _, family) = read_index(dir)?;
        let vae = || Ok::<_, LoadError>(component_config(dir, "vae", VaeConfig::from_json)?.scale_factor());
        Ok(match family {
            Family::StableDiffusion | Family::AltDiffusion | Family::StableDiffusionXl => {
                let unet = component_config(dir, "unet", UNetConfig::from_json)?;
                unet_size_rule(unet.sample_size, vae()?)
            }
            Family::StableDiffusion3 => {
                let transformer = component_config(dir, "transformer", Sd3TransformerConfig::from_json)?;
                pipeline_stable_diffusion_3::size_rule(&transformer, vae()?)
            }
            Family::Flux => pipeline_flux::size_rule(vae()?),
            Family::CogView4 => {
                let transformer = component_config(dir, "transformer", CogView4TransformerConfig::from_json)?;
                pipeline_cogview4::size_rule(&transformer, vae()?)
            }
            Family::Lumina2 => {
                let transformer = component_config(dir, "transformer", Lumina2TransformerConfig::from_json)?;
                pipeline_lumina2::size_rule(transformer.sample_size)
            }
            Family::Kandinsky3 => pipeline_kandinsky3::size_rule(
                component_config(dir, "movq", VqModelConfig::from_json)?.scale_factor(),
            ),
            Family::DeepFloydIf => {
                pipeline_if::size_rule(&component_config(dir, "unet", IfUNetConfig::from_json)?)
            }
            Family::Kandinsky21 => pipeline_kandinsky21::size_rule(
                component_config(dir, "movq", VqModelConfig::from_json)?.scale_factor(),
            ),
        })
    }

    /// A prompt's token ids, one row per tokenizer.
    pub fn ids(&self, text: &str) -> Result<PromptIds, LoadError> {
        self.tokenizers.iter().map(|t| t.ids(text)).collect()
    }

    /// A negative prompt's token ids, one row per tokenizer (Lumina 2's without the system
    /// prompt; the others' as [`Self::ids`]).
    pub fn negative_ids(&self, text: &str) -> Result<PromptIds, LoadError> {
        self.tokenizers.iter().map(|t| t.negative_ids(text)).collect()
    }

    /// How many tokens of `text` a tokenizer's truncation cuts (the most over the pipeline's
    /// tokenizers; CogView4's GLM and Lumina 2's Gemma tokenizers count them, the others report
    /// 0), for the warning diffusers prints.
    pub fn cut(&self, text: &str) -> Result<usize, LoadError> {
        self.tokenizers.iter().try_fold(0, |most, t| Ok(most.max(t.cut(text)?)))
    }

    /// Pads and truncates the T5 tokenizer's ids to `n` tokens (diffusers'
    /// `max_sequence_length`, at most 512; the pipelines' defaults are 256 for SD 3 and 512 for
    /// FLUX); an error for a pipeline without T5. CogView4: GLM's ids truncated to `n` (default
    /// 1024, no 512 limit); Lumina 2: Gemma's ids truncated to `n` (default 256).
    pub fn set_max_sequence_length(&mut self, n: usize) -> Result<(), LoadError> {
        // CogView4: GLM's tokens (default 1024), no 512 limit.
        if let Some(PromptTokenizer::Glm(glm)) = self.tokenizers.first_mut() {
            return glm.set_max_len(n);
        }
        if matches!(self.model, Pipeline::Kandinsky3(_)) {
            return Err(unsupported(
                &self.dir,
                "--max-sequence-length: Kandinsky3Pipeline's encode_prompt fixes 128 tokens".into(),
            ));
        }
        if n == 0 || n > 512 {
            return Err(unsupported(
                &self.dir,
                format!("--max-sequence-length {n}: must be between 1 and 512 (diffusers' limit)"),
            ));
        }
        if let Some(gemma) = self.tokenizers.iter_mut().find_map(|t| match t {
            PromptTokenizer::Gemma(g) => Some(g),
            _ => None,
        }) {
            return gemma.set_max_len(n);
        }
        let t5 = self.tokenizers.iter_mut().find_map(|t| match t {
            PromptTokenizer::T5(t5) => Some(t5),
            _ => None,
        });
        match t5 {
            Some(t5) => t5.set_max_len(n),
            None => {
                Err(unsupported(&self.dir, "--max-sequence-length: this pipeline has no T5 tokenizer".into()))
            }
        }
    }

    /// Checks, as [`Self::load`] does, that the scheduler class `kind` (`--scheduler`) fits this
    /// pipeline.
    pub fn check_scheduler(&self, kind: Option<SchedulerKind>) -> Result<(), LoadError> {
        let (index, _, family) = read_index(&self.dir)?;
        let class = index.get("_class_name").and_then(Value::as_str).unwrap_or("");
        fitting_scheduler(&self.scheduler_config, &self.scheduler_path, family, class, kind)
    }

    /// A fresh scheduler of the folder's config (`kind` overrides its class).
    pub fn scheduler(&self, kind: Option<SchedulerKind>) -> Result<Scheduler, LoadError> {
        Scheduler::from_config(&self.scheduler_config, kind)
            .map_err(|source| LoadError::Scheduler { path: self.scheduler_path.clone(), source })
    }
}

/// Checks that the scheduler of `config` (the file `path`; `scheduler` overrides its class,
/// `--scheduler`) fits the pipeline `class` of `family`: flow matching or noise prediction as its
/// loop needs, and DDPM only where the loop hands it a generator (IF needs it).
fn fitting_scheduler(
    config: &str,
    path: &Path,
    family: Family,
    class: &str,
    scheduler: Option<SchedulerKind>,
) -> Result<(), LoadError> {
    let built = Scheduler::from_config(config, scheduler)
        .map_err(|source| LoadError::Scheduler { path: path.to_owned(), source })?;
    let flow = matches!(family, Family::StableDiffusion3 | Family::Flux | Family::CogView4 | Family::Lumina2);
    if built.kind().is_flow_matching() != flow {
        let (what, key) = if scheduler.is_some() { ("--scheduler", "") } else { ("", "`_class_name`: ") };
        let needs = if flow {
            "a flow-matching scheduler (FlowMatchEulerDiscreteScheduler)"
        } else {
            "a noise-prediction scheduler (DDIM, PNDM, Euler, DPM-Solver, EDM Euler, EDM DPM-Solver)"
        };
        return Err(unsupported(
            path,
            format!(
                "{key}{what}{}{} does not fit {class}, which needs {needs}",
                if what.is_empty() { "" } else { " " },
                built.kind().class_name()
            ),
        ));
    }
    // DDPM draws noise at every step: only the loops that hand it the run's generator run it
    // (Kandinsky 3 and 2.1, IF); IF's learned-variance loop runs nothing else.
    let key = if scheduler.is_some() { "--scheduler" } else { "`_class_name`:" };
    let name = built.kind().class_name();
    if built.kind().draws_noise() && !passes_generator(family) {
        let message = format!(
            "{key} {name} does not fit {class}: its loop hands the scheduler no generator for DDPM's noise"
        );
        return Err(unsupported(path, message));
    }
    if family == Family::DeepFloydIf && !built.kind().draws_noise() {
        let message = format!("{key} {name} does not fit {class}, which runs DDPMScheduler");
        return Err(unsupported(path, message));
    }
    Ok(())
}

/// `dir/model_index.json`, its path and the family its `_class_name` picks, after checking that
/// the class and each component's class are ones culturelens runs.
fn read_index(dir: &Path) -> Result<(Value, PathBuf, Family), LoadError> {
    let index_path = dir.join("model_index.json");
    let index: Value = serde_json::from_str(&read_string(&index_path)?)
        .map_err(|source| LoadError::Json { path: index_path.clone(), source })?;
    let class = index.get("_class_name").and_then(Value::as_str).unwrap_or("");
    let Some(&(_, family, components)) = PIPELINES.iter().find(|(name, _, _)| *name == class) else {
        let names: Vec<&str> = PIPELINES.iter().map(|(name, _, _)| *name).collect();
        return Err(unsupported(
            &index_path,
            format!("`_class_name`: `{class}` is not a supported pipeline (supported: {})", names.join(", ")),
        ));
    };
    for (component, classes) in components {
        let found = index.get(*component).and_then(|v| v.get(1)).and_then(Value::as_str).unwrap_or("");
        if !classes.contains(&found) {
            return Err(unsupported(
                &index_path,
                format!("`{component}`: `{found}` is not supported (expected {})", classes.join(" or ")),
            ));
        }
    }
    Ok((index, index_path, family))
}

/// The config `dir/component/config.json` read by `parse` (an error names the file).
fn component_config<T>(
    dir: &Path,
    component: &str,
    parse: impl FnOnce(&str) -> Result<T, ModelError>,
) -> Result<T, LoadError> {
    let path = dir.join(component).join("config.json");
    parse(&read_string(&path)?).map_err(|source| LoadError::Model { path, source })
}

/// Whether the family's loop hands its scheduler the run's generator, so that it may run a
/// scheduler whose steps draw noise (DDPM); the others run the deterministic ones only.
fn passes_generator(family: Family) -> bool {
    matches!(family, Family::DeepFloydIf | Family::Kandinsky3 | Family::Kandinsky21)
}

/// `model_max_length` of `dir/tokenizer_config.json`: the length diffusers pads and truncates
/// XLM-R's ids to.
pub(crate) fn model_max_length(dir: &Path) -> Result<usize, LoadError> {
    let path = dir.join("tokenizer_config.json");
    let config: Value = serde_json::from_str(&read_string(&path)?)
        .map_err(|source| LoadError::Json { path: path.clone(), source })?;
    config
        .get("model_max_length")
        .and_then(Value::as_u64)
        .filter(|&n| n <= 1 << 20)
        .map(|n| n as usize)
        .ok_or_else(|| LoadError::Tokenizer {
            path,
            message: "`model_max_length` is missing or not a length".into(),
        })
}

/// diffusers' `CLIPTokenizer`: byte-level BPE with `</w>` word ends, start and end tokens,
/// truncated to the text tower's length and padded to it with the pad token
/// (`padding="max_length"`).
pub struct ClipTokenizer {
    tokenizer: tokenizers::Tokenizer,
    pad: u32,
    max_len: usize,
    path: PathBuf,
}

/// A special token of `tokenizer_config.json` / `special_tokens_map.json`: a string or
/// `{"content": …}`.
pub(crate) fn token_string(config: &Value, key: &str) -> Option<String> {
    match config.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

impl ClipTokenizer {
    /// Reads `tokenizer.json` when the folder has one, otherwise `vocab.json` + `merges.txt`
    /// (what `CLIPTokenizer.save_pretrained` writes), rebuilt as transformers' fast CLIP
    /// tokenizer (NFC, whitespace runs to one space, lower case, CLIP's pre-split, byte-level
    /// BPE). The special tokens come from `tokenizer_config.json` or `special_tokens_map.json`
    /// (pad defaults to `<|endoftext|>`, as `CLIPTokenizer` does).
    pub fn load(dir: &Path, max_len: usize) -> Result<Self, LoadError> {
        let mut specials = Value::Null;
        for name in ["special_tokens_map.json", "tokenizer_config.json"] {
            let path = dir.join(name);
            if path.is_file() {
                let v: Value = serde_json::from_str(&read_string(&path)?)
                    .map_err(|source| LoadError::Json { path: path.clone(), source })?;
                match (&mut specials, v) {
                    (Value::Object(base), Value::Object(over)) => {
                        base.extend(over.into_iter().filter(|(_, x)| !x.is_null()));
                    }
                    (slot, v) => *slot = v,
                }
            }
        }
        let bos = token_string(&specials, "bos_token").unwrap_or_else(|| "<|startoftext|>".into());
        let eos = token_string(&specials, "eos_token").unwrap_or_else(|| "<|endoftext|>".into());
        let pad = token_string(&specials, "pad_token").unwrap_or_else(|| eos.clone());
        let json_path = dir.join("tokenizer.json");
        let (mut tokenizer, path) = if json_path.is_file() {
            (crate::tokenizer_from_bytes(&crate::read(&json_path)?, &json_path)?, json_path)
        } else {
            let vocab_path = dir.join("vocab.json");
            if !vocab_path.is_file() {
                return Err(LoadError::Missing {
                    dir: dir.to_owned(),
                    what: "tokenizer",
                    hint: "expected tokenizer.json, or vocab.json and merges.txt".into(),
                });
            }
            let vocab: Value = serde_json::from_str(&read_string(&vocab_path)?)
                .map_err(|source| LoadError::Json { path: vocab_path.clone(), source })?;
            let merges_path = dir.join("merges.txt");
            let merges_text = read_string(&merges_path)?;
            let merges: Vec<&str> =
                merges_text.lines().filter(|l| !l.starts_with("#version") && !l.trim().is_empty()).collect();
            let id = |token: &str| -> Result<u64, LoadError> {
                vocab.get(token).and_then(Value::as_u64).ok_or_else(|| LoadError::Tokenizer {
                    path: vocab_path.clone(),
                    message: format!("special token `{token}` is not in the vocabulary"),
                })
            };
            let (bos_id, eos_id) = (id(&bos)?, id(&eos)?);
            let spec = crate::clip_bpe::tokenizer_json(vocab, &merges, (&bos, bos_id), (&eos, eos_id));
            // Through the one checked reader of tokenizer JSON: the vocabulary and merges are the
            // user's bytes, and the tokenizers crate may panic on what it cannot build.
            (crate::tokenizer_from_bytes(spec.to_string().as_bytes(), &merges_path)?, vocab_path)
        };
        let pad_id = tokenizer.token_to_id(&pad).ok_or_else(|| LoadError::Tokenizer {
            path: path.clone(),
            message: format!("pad token `{pad}` is not in the vocabulary"),
        })?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams { max_length: max_len, ..Default::default() }))
            .map_err(|e| LoadError::Tokenizer { path: path.clone(), message: e.to_string() })?;
        Ok(Self { tokenizer, pad: pad_id, max_len, path })
    }

    /// The ids of `text` with start and end tokens, truncated and padded to the text tower's
    /// length.
    pub fn ids(&self, text: &str) -> Result<Vec<u32>, LoadError> {
        crate::padded_ids(&self.tokenizer, &self.path, text, self.max_len, self.pad)
    }
}
