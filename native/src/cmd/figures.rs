//! `culturelens figures`: publication figures (SVG and PNG) from the result tables the other
//! subcommands wrote. The table readers are `crate::figure_inputs`, the drawing `culturelens-figures`.

use std::path::PathBuf;

use anyhow::{Result, bail};
use culturelens_table::load_table;

use crate::figure_inputs::{self, Figure};
use crate::input::load_bundle_table;
use crate::provenance::Provenance;

const CONVENTIONS: &str = "\
Draws every figure the given result tables allow, as NAME.svg and NAME.png in --out:
  --sos sos.csv            (culturelens sos --out) sos_heatmap: culture x language, mean joint SoS
                           over models (each at its last layer), columns sorted by their mean
                           (SoS Fig. 3), and one sos_heatmap_MODEL per model when there are
                           several; a model with several layers in the `layer` column gets one
                           sos_heatmap[_MODEL]_layerL per layer and sos_layers_MODEL: mean SoS
                           over cultures per layer and language (Fig. 4)
  --sos-report r.json      (culturelens sos --report) sos_distributions: per-model box plots with
                           mean and median (Fig. 2); sos_pearson: language x language r (Fig. 5)
  --bundle DIR | --embeddings E [--meta M]
                           pca: rows L2-normalised, first two principal components (the browser
                           scatter's rule), coloured by --colour-by (default language; App. E)
  --vendi v.json           (culturelens vendi --out) vendi: VS per group, +/- 1 sd bars when the
                           CUBE batch protocol gave vs_sd
  --magbig m.csv           (culturelens magbig --out) magbig_MODEL: MAD per language and set, the
                           fair-coin mad_random as a dashed tick (MAGBIG Fig. 5)
  --cultext2i-report r.json (culturelens cultext2i --report) cultext2i_confusion_MODEL: NA
                           confusion matrix as shares of each true nationality's images
  --colour DIR             (culturelens colour --out) colour_palettes and colour_values (HSV value
                           distribution per group, App. F.3), one figure per value of the first
                           group column when there are several
Palettes are colour-blind safe (Okabe-Ito, viridis, PuOr; past eight categories markers also
change shape). Fonts are compiled in (Noto: Latin, Arabic, Hebrew, Devanagari, Ethiopic, CJK), so
the same tables give byte-identical files on any machine running the same build. PNGs are
--scale times the SVG size (2: projector-readable). Everything is rendered before anything is
written; files are written atomically, with DIR/provenance.json.";

/// Arguments of `culturelens figures`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(about = "Publication figures (SVG + PNG) from culturelens result tables", long_about = CONVENTIONS)]
pub struct FiguresArgs {
    /// Joint SoS CSV (`culturelens sos --out`).
    #[arg(long, value_name = "FILE")]
    pub sos: Option<PathBuf>,
    /// SoS report JSON (`culturelens sos --report`).
    #[arg(long, value_name = "FILE")]
    pub sos_report: Option<PathBuf>,
    /// A bundle directory whose embeddings are drawn as a PCA scatter.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["embeddings", "meta"])]
    pub bundle: Option<PathBuf>,
    /// An embedding table (`.npy` with --meta, or `.parquet`) drawn as a PCA scatter.
    #[arg(long, value_name = "FILE")]
    pub embeddings: Option<PathBuf>,
    /// Metadata CSV of --embeddings.
    #[arg(long, value_name = "FILE", requires = "embeddings")]
    pub meta: Option<PathBuf>,
    /// Metadata column that colours the PCA points.
    #[arg(long, value_name = "COL", default_value = "language")]
    pub colour_by: String,
    /// Vendi result JSON (`culturelens vendi --out`).
    #[arg(long, value_name = "FILE")]
    pub vendi: Option<PathBuf>,
    /// MAGBIG result CSV (`culturelens magbig --out`).
    #[arg(long, value_name = "FILE")]
    pub magbig: Option<PathBuf>,
    /// CulText2I report JSON (`culturelens cultext2i --report`).
    #[arg(long, value_name = "FILE")]
    pub cultext2i_report: Option<PathBuf>,
    /// Folder written by `culturelens colour --out`.
    #[arg(long, value_name = "DIR")]
    pub colour: Option<PathBuf>,
    /// Output folder.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// PNG scale relative to the SVG size.
    #[arg(long, default_value_t = 2.0)]
    pub scale: f32,
}

pub fn run(args: &FiguresArgs) -> Result<()> {
    if !(args.scale.is_finite() && args.scale > 0.0 && args.scale <= 8.0) {
        bail!("--scale must be in (0, 8] (got {})", args.scale);
    }
    let mut provenance = Provenance::new("figures", args);
    let mut all: Vec<Figure> = Vec::new();
    if let Some(path) = &args.sos {
        all.extend(figure_inputs::sos_joint(path)?);
        provenance.input(path)?;
    }
    if let Some(path) = &args.sos_report {
        all.extend(figure_inputs::sos_report(path)?);
        provenance.input(path)?;
    }
    let table = match (&args.bundle, &args.embeddings) {
        (Some(dir), _) => Some(load_bundle_table(dir)?),
        (None, Some(path)) => Some(load_table(path, args.meta.as_deref())?),
        _ => None,
    };
    if let Some(table) = table {
        all.push(figure_inputs::pca(&table, &args.colour_by)?);
        for path in [&args.bundle, &args.embeddings, &args.meta].into_iter().flatten() {
            provenance.input(path)?;
        }
    }
    if let Some(path) = &args.vendi {
        all.push(figure_inputs::vendi(path)?);
        provenance.input(path)?;
    }
    if let Some(path) = &args.magbig {
        all.extend(figure_inputs::magbig(path)?);
        provenance.input(path)?;
    }
    if let Some(path) = &args.cultext2i_report {
        all.extend(figure_inputs::cultext2i(path)?);
        provenance.input(path)?;
    }
    if let Some(dir) = &args.colour {
        all.extend(figure_inputs::colour(dir)?);
        provenance.input(dir)?;
    }
    if all.is_empty() {
        bail!(
            "nothing to draw: give at least one of --sos, --sos-report, --bundle/--embeddings, --vendi, --magbig, --cultext2i-report, --colour"
        );
    }
    let written = figure_inputs::write(&args.out, &all, args.scale)?;
    provenance.write_for_dir(&args.out)?;
    for path in &written {
        println!("{}", path.display());
    }
    eprintln!("wrote {} figures to {}", all.len(), args.out.display());
    Ok(())
}
