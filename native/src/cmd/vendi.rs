//! `culturelens vendi`: Vendi scores, quality-weighted and normalised Vendi (CUBE Def. 5.1,
//! Eq. 2–3) with cosine, categorical (Eq. 4) or precomputed kernels, optionally per group and with
//! the CUBE batch protocol (§5.2, App. J). The metric code is `culturelens_compute::vendi`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use culturelens_compute::vendi::{
    Collection, CosineRows, Order, ProductPrecision, ProtocolPlan, ProtocolScore, Route, VendiItems,
    VendiStatistic, categorical_features, point_scores, precomputed_spectrum, protocol, protocol_precomputed,
    vendi_draws,
};
use culturelens_results::vendi::{self as schema, Protocol, VendiFile, VendiScores};
use culturelens_table::{Metadata, load_table, read_metadata_csv, read_npy, write_atomic};

use crate::device::{DeviceChoice, select_device};
use crate::provenance::{InputHashes, Provenance, as_text, value_enum};
use crate::timing::Stages;
use crate::uncertainty::CiArgs;

const CONVENTIONS: &str = concat!(
    "\
Vendi scores of the CUBE paper (Def. 5.1): VS_q = exp(Renyi entropy of order q of the
eigenvalues of K/N, normalised to sum 1), for any q >= 0 (`--q inf` for q = infinity):
  q = 0: the numerical rank; q = 1 (default): the Shannon limit exp(-sum p ln p), with
  0 ln 0 = 0; q = inf: 1 / max p; otherwise (sum p^q)^(1/(1-q)).
Round-off: eigenvalues <= max(N, D) * eps * (largest eigenvalue) are set to 0 first (eps of the
precision the kernel was accumulated in), so q = 0 is the numerical rank and q = inf is stable.

qvs = mean(quality) * VS_q (Eq. 2) and qvs_norm = qvs / N (Eq. 3), quality from --quality-col
(e.g. HPS-v2 scores in [0, 1] computed elsewhere) or 1 for every item.

Kernels (every one has k(x, x) = 1):
  cosine       rows of --embeddings L2-normalised (the default with --embeddings)
  categorical  k = w1 [same continent] + w2 [same country] + w3 [same artifact] (Eq. 4) from
               the metadata --columns with --weights (>= 0, summing to 1); the default
               without --embeddings
  precomputed  --embeddings K.npy is the N x N kernel matrix itself, read as float32; it is
               validated: finite, symmetric and unit diagonal to 1e-6, and positive
               semi-definite (no eigenvalue of K/N below -N * eps32 * largest eigenvalue)
Routes (cosine and categorical): kernel = eigenvalues of F F^T / N (N x N), dual = eigenvalues
of F^T F / N (D x D), for the feature map F of the kernel (D = embedding dimension or number of
categories); auto (default) takes the smaller. Both give the same scores. The product runs on
--device, accumulated in f64 where the device computes in f64 (cpu, cuda, wgpu adapters with
SHADER_F64 such as lavapipe) and in f32 where it cannot (other wgpu adapters, WebGPU in the
browser: scores agree to about 1e-6); eigenvalues are computed in f64 (faer's solver below
order 512, a two-stage reduction of culturelens's own from 512 on).

Differences from the vendi-score package (0.0.3): its score_X ignores q and always returns the
q = 1 score, and its score_K returns NaN for q = inf. Here every route honours --q (Def. 5.1
defines VS_q for every order, and the routes share one spectrum) and q = inf is the limit
1 / max p. It also counts round-off eigenvalues, which changes its q = 0 and, by about 1e-8,
its q < 1 scores of rank-deficient kernels.

Output (--out, written atomically, full f64 precision): {\"n\", \"q\", \"vs\", \"qvs\", \"qvs_norm\"},
q = infinity written as the string \"inf\"; with --group-by, an object keyed by group value
holding such objects. --intdiv adds \"intdiv\" = 1 - mean similarity of distinct items.
--csv FILE writes the same numbers as a table: the --group-by column, then
n,q,vs,qvs,qvs_norm[,intdiv][,batch_size,repeats,vs_sd,qvs_sd,qvs_norm_sd[,intdiv_sd]], one row
per group (q = infinity as inf, an undefined intdiv as an empty cell).

CUBE protocol (--batch-size, 8 in the paper): per group, --repeats batches (default 50) of
min(batch size, group size) distinct items, drawn with --seed mixed with the group value, are
scored; vs, qvs, qvs_norm (and intdiv) are the means over the batches, vs_sd, qvs_sd,
qvs_norm_sd (intdiv_sd) their population standard deviations, n is the group size and
qvs_norm = qvs / batch size. Without --batch-size each group is scored whole.

Unit resampled by --ci: the items of each group (of the whole collection without --group-by),
with replacement; every resample re-runs the whole Vendi computation on the resampled collection
(the protocol's batches drawn from it with the protocol's seed under --batch-size), since a
diversity is no mean over items. A resample is scored from its distinct items weighted by their
counts (the same spectrum as the collection with the repeats), so it costs one Vendi computation
of up to N items; BCa adds one per item (the jackknife). Adds vs_ci, qvs_ci, qvs_norm_ci.

",
    crate::uncertainty::ci_help!()
);

/// Arguments of `culturelens vendi`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(about = "Vendi, quality-weighted and normalised Vendi scores (CUBE Def. 5.1, Eq. 2-4)", long_about = CONVENTIONS)]
pub struct VendiArgs {
    /// Embeddings (.npy N x d with optional --meta, or .parquet); the N x N kernel with --kernel precomputed.
    #[arg(long, value_name = "FILE")]
    pub embeddings: Option<PathBuf>,
    /// Metadata CSV (one row per item): categorical, quality and group columns.
    #[arg(long, value_name = "FILE")]
    pub meta: Option<PathBuf>,
    /// Similarity kernel [default: cosine with --embeddings, else categorical].
    #[arg(long, value_enum)]
    pub kernel: Option<KernelArg>,
    /// Metadata columns of the categorical kernel, comma-separated (e.g. continent,country,artifact).
    #[arg(long, value_delimiter = ',', value_name = "COLS")]
    pub columns: Vec<String>,
    /// Weights of the categorical kernel, comma-separated, one per column (>= 0, sum 1).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true, value_name = "W1,W2,...")]
    pub weights: Vec<f64>,
    /// Order q >= 0, or `inf`.
    #[arg(long, default_value = "1", value_parser = Order::parse, value_name = "Q", allow_negative_numbers = true)]
    #[serde(serialize_with = "as_text")]
    pub q: Order,
    /// Metadata column with per-item quality scores [default: quality 1].
    #[arg(long, value_name = "COL")]
    pub quality_col: Option<String>,
    /// Score each value of this metadata column separately.
    #[arg(long, value_name = "COL")]
    pub group_by: Option<String>,
    /// Eigenproblem for cosine and categorical kernels: auto picks the smaller of N x N and D x D.
    #[arg(long, value_enum, default_value_t = RouteArg::Auto)]
    pub route: RouteArg,
    /// CUBE protocol: score random batches of this many items per group (8 in the paper).
    #[arg(long, value_name = "B", value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_size: Option<u64>,
    /// Repetitions of the protocol.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    pub repeats: u64,
    /// Also report intdiv = 1 - mean similarity of distinct items.
    #[arg(long)]
    pub intdiv: bool,
    /// Backend for the kernel product.
    #[arg(long, value_enum, default_value_t = DeviceChoice::Cpu)]
    pub device: DeviceChoice,
    /// Print `timing <stage> <seconds>` lines to stderr.
    #[arg(long)]
    pub timings: bool,
    /// Output JSON.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Also write the scores as CSV (one row per group: the --group-by column, then the JSON's
    /// numbers), for pandas or R.
    #[arg(long, value_name = "FILE.csv")]
    pub csv: Option<PathBuf>,
    #[command(flatten)]
    #[serde(flatten)]
    pub ci: CiArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KernelArg {
    Cosine,
    Categorical,
    Precomputed,
}

value_enum!(KernelArg, RouteArg);

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RouteArg {
    Auto,
    Kernel,
    Dual,
}

impl From<RouteArg> for Route {
    fn from(r: RouteArg) -> Self {
        match r {
            RouteArg::Auto => Route::Auto,
            RouteArg::Kernel => Route::Kernel,
            RouteArg::Dual => Route::Dual,
        }
    }
}

pub fn run(args: &VendiArgs) -> Result<()> {
    let mut clock = Stages::new(args.timings);
    let kernel = args.kernel.unwrap_or(if args.embeddings.is_some() {
        KernelArg::Cosine
    } else {
        KernelArg::Categorical
    });
    check_flags(args, kernel)?;
    let inputs =
        InputHashes::start([&args.embeddings, &args.meta].into_iter().flatten().map(PathBuf::as_path));
    let (items, meta) = load_items(args, kernel)?;
    let quality = args.quality_col.as_deref().map(|col| meta.number_column(col, "quality")).transpose()?;
    let groups = groups(&meta, args.group_by.as_deref(), items.n())?;
    clock.lap("load");
    let device = select_device(args.device)?;
    let precision = ProductPrecision::for_device(&device);
    clock.lap("device init");

    let mut results = BTreeMap::new();
    for (name, rows) in &groups {
        let sub = (rows.len() != items.n()).then(|| items.subset(rows));
        let group = sub.as_ref().unwrap_or(&items);
        let qual: Option<Vec<f64>> = quality.as_ref().map(|q| rows.iter().map(|&i| q[i]).collect());
        let value = match args.batch_size {
            Some(batch) => {
                let plan = ProtocolPlan {
                    batch: batch as usize,
                    repeats: args.repeats as usize,
                    seed: group_seed(args.ci.seed, name),
                };
                let score = match (group, group.features()) {
                    (Collection::Kernel { k, n }, _) => {
                        precomputed_spectrum(k, *n, ProductPrecision::F32)
                            .with_context(|| kernel_path(args))?;
                        protocol_precomputed(k, *n, qual.as_deref(), args.q, plan, ProductPrecision::F32)
                    }
                    (_, Some(f)) => protocol(&f, qual.as_deref(), args.q, plan, precision, &device),
                    (_, None) => unreachable!("only a precomputed kernel has no feature map"),
                };
                clock.lap("protocol");
                protocol_scores(&score, group.n(), args.q, args.intdiv)
            }
            None => {
                let mut lap = |stage: &'static str| clock.lap(stage);
                point_scores(
                    group,
                    args.q,
                    qual.as_deref(),
                    Route::from(args.route),
                    args.intdiv,
                    args.device.processor(),
                    precision,
                    &device,
                    &mut lap,
                )
                .with_context(|| kernel_path(args))?
            }
        };
        let value = match args.ci.spec() {
            Some(spec) => {
                let features = group.features();
                let items = match (group, &features) {
                    (Collection::Kernel { k, n }, _) => VendiItems::Kernel { k, n: *n },
                    (_, Some(f)) => VendiItems::Features(f),
                    (_, None) => unreachable!("only a precomputed kernel has no feature map"),
                };
                let precision = if matches!(group, Collection::Kernel { .. }) {
                    ProductPrecision::F32
                } else {
                    precision
                };
                let protocol = args.batch_size.map(|batch| ProtocolPlan {
                    batch: batch as usize,
                    repeats: args.repeats as usize,
                    seed: group_seed(args.ci.seed, name),
                });
                let stat = VendiStatistic { items, quality: qual.as_deref(), q: args.q, protocol, precision };
                let draws = vendi_draws(&spec, group.n(), name);
                let [vs, qvs, qvs_norm] =
                    stat.replicates(&draws).map(|r| r.interval(spec.level, spec.method));
                clock.lap("bootstrap");
                VendiScores { vs_ci: vs, qvs_ci: qvs, qvs_norm_ci: qvs_norm, ..value }
            }
            None => value,
        };
        results.insert(name.clone(), value);
    }
    let out = match args.group_by {
        Some(_) => VendiFile::Groups(results),
        None => VendiFile::Whole(results.remove("").expect("the ungrouped result")),
    };
    let mut text = Vec::new();
    schema::write(&mut text, &out)?;
    write_atomic(&args.out, |w| w.write_all(&text))?;
    if let Some(path) = &args.csv {
        write_table(path, args.group_by.as_deref(), args.ci.ci.is_some(), &out)?;
    }
    let mut provenance = Provenance::new("vendi", args);
    inputs.record(&mut provenance)?;
    let unit = match &args.group_by {
        Some(col) => {
            format!("items within each {col} group, the whole Vendi computation re-run per resample")
        }
        None => "items of the collection, the whole Vendi computation re-run per resample".to_string(),
    };
    args.ci.record_in(&mut provenance, &unit);
    if args.batch_size.is_some() {
        // The CUBE protocol's batches are drawn from --seed too.
        provenance.seed("seed", args.ci.seed);
    }
    provenance.device(args.device, precision).write_beside(&args.out)?;
    clock.lap("write");
    println!("{}", String::from_utf8_lossy(&text));
    Ok(())
}

/// Writes `file` as the `--csv` table (`culturelens_results::vendi::Table`): one row per group,
/// the `group_by` column holding its value.
fn write_table(path: &Path, group_by: Option<&str>, ci: bool, file: &VendiFile) -> Result<()> {
    let (columns, rows) = schema::table_rows(file, group_by, ci);
    write_atomic(path, |w| culturelens_results::write::<schema::Table>(w, &columns, &rows))?;
    Ok(())
}

/// The groups of `--group-by COL` (value and rows, in value order), or one group named `""`
/// of all `n` rows.
fn groups(meta: &Metadata, group_by: Option<&str>, n: usize) -> Result<Vec<(String, Vec<usize>)>> {
    Ok(match group_by {
        Some(col) => meta.row_groups(col)?,
        None => vec![(String::new(), (0..n).collect())],
    })
}

/// The kernel file named in errors of a precomputed kernel (the only kernel that can be refused).
fn kernel_path(args: &VendiArgs) -> String {
    args.embeddings.as_deref().map_or_else(String::new, |p| p.display().to_string())
}

/// Rejects flag combinations that would otherwise be silently ignored.
fn check_flags(args: &VendiArgs, kernel: KernelArg) -> Result<()> {
    let categorical = kernel == KernelArg::Categorical;
    if !categorical && (!args.columns.is_empty() || !args.weights.is_empty()) {
        bail!("--columns and --weights belong to --kernel categorical");
    }
    if categorical && args.embeddings.is_some() {
        bail!("--kernel categorical is built from --meta alone; drop --embeddings");
    }
    if kernel == KernelArg::Precomputed && args.route != RouteArg::Auto {
        bail!(
            "--route applies to cosine and categorical kernels; a precomputed kernel is diagonalised as given"
        );
    }
    Ok(())
}

/// The protocol seed of one group: `seed` mixed with the FNV-1a hash of the group value, so a
/// group's batches do not change when other groups are added or removed (the bootstrap's
/// per-stratum streams are seeded the same way).
fn group_seed(seed: u64, group: &str) -> u64 {
    culturelens_metrics::bootstrap::stream_seed(seed, group)
}

fn load_items(args: &VendiArgs, kernel: KernelArg) -> Result<(Collection, Metadata)> {
    match kernel {
        KernelArg::Cosine => {
            let path = args.embeddings.as_deref().context("--kernel cosine needs --embeddings")?;
            let table = load_table(path, args.meta.as_deref())?;
            let (n, d) = (table.len(), table.dim());
            let rows = CosineRows::new(table.embeddings.into_data(), n, d)
                .with_context(|| path.display().to_string())?;
            Ok((Collection::Cosine(rows), table.meta))
        }
        KernelArg::Categorical => {
            let path = args
                .meta
                .as_deref()
                .context("--kernel categorical needs --meta with the category columns")?;
            if args.columns.is_empty() || args.columns.len() != args.weights.len() {
                bail!(
                    "--kernel categorical needs --columns and --weights with one weight per column (got {} columns, {} weights)",
                    args.columns.len(),
                    args.weights.len()
                );
            }
            let meta = read_metadata_csv(path)?;
            let cols: Vec<(&str, &[String])> = args
                .columns
                .iter()
                .map(|c| meta.require_nonempty_column(c).map(|v| (c.as_str(), v)))
                .collect::<Result<_, _>>()?;
            let f = categorical_features(&cols, &args.weights).with_context(|| path.display().to_string())?;
            Ok((Collection::Features(f), meta))
        }
        KernelArg::Precomputed => {
            let path = args
                .embeddings
                .as_deref()
                .context("--kernel precomputed needs --embeddings K.npy (N x N)")?;
            let m = read_npy(path)?;
            if m.rows() != m.cols() {
                bail!(
                    "{}: a kernel matrix must be square, found {} x {}",
                    path.display(),
                    m.rows(),
                    m.cols()
                );
            }
            let n = m.rows();
            let meta = match &args.meta {
                Some(p) => precomputed_meta(p, n)?,
                None => Metadata::empty(n),
            };
            let k = m.data().iter().map(|v| f64::from(*v)).collect();
            Ok((Collection::Kernel { k, n }, meta))
        }
    }
}

/// The metadata of a precomputed kernel: one row per kernel row.
fn precomputed_meta(path: &Path, n: usize) -> Result<Metadata> {
    let meta = read_metadata_csv(path)?;
    if meta.n_rows() != n {
        bail!("{}: {} metadata rows but the kernel is {n} x {n}", path.display(), meta.n_rows());
    }
    Ok(meta)
}

/// The scores of the CUBE protocol: the means over the batches, with their spreads.
fn protocol_scores(p: &ProtocolScore, n: usize, q: Order, with_intdiv: bool) -> VendiScores {
    VendiScores {
        n,
        q,
        vs: p.vs.mean,
        qvs: p.qvs.mean,
        qvs_norm: p.qvs_norm.mean,
        intdiv: with_intdiv.then(|| p.intdiv.map(|d| d.mean)),
        protocol: Some(Protocol {
            batch_size: p.batch,
            repeats: p.repeats,
            vs_sd: p.vs.sd,
            qvs_sd: p.qvs.sd,
            qvs_norm_sd: p.qvs_norm.sd,
            intdiv_sd: with_intdiv.then(|| p.intdiv.map(|d| d.sd)),
        }),
        vs_ci: None,
        qvs_ci: None,
        qvs_norm_ci: None,
    }
}
