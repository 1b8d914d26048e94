//! `culturelens vendi`: Vendi scores, quality-weighted and normalised Vendi (CUBE Def. 5.1,
//! Eq. 2–3) with cosine, categorical (Eq. 4) or precomputed kernels, optionally per group and with
//! the CUBE batch protocol.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use culturelens_core::vendi::{
    Features, Order, Precision, ProtocolScore, Route, VendiScore, categorical_features, cosine_features,
    intdiv, precomputed_spectrum, protocol, spectrum,
};
use culturelens_table::{Metadata, load_table, read_metadata_csv, read_npy, write_atomic};
use serde_json::{Map, Value, json};

use crate::device::{DeviceChoice, select_device};

const CONVENTIONS: &str = "\
Vendi scores of the CUBE paper (Def. 5.1): VS_q = exp(Renyi entropy of order q of the normalised
eigenvalues of K/N), for any q >= 0 (`--q inf` for q = infinity):
  q = 0: numerical rank; q = 1 (default): exp(-sum p ln p), 0 ln 0 = 0; q = inf: 1 / max p.
Eigenvalues <= max(N, D) * eps * max eigenvalue (eps of the accumulation precision) are set to 0
first, so q = 0 is the numerical rank and q = inf is stable.

qvs = mean(quality) * VS_q (Eq. 2), qvs_norm = qvs / N (Eq. 3); quality comes from
--quality-col (e.g. HPS-v2 scores) or is 1 for every item.

Kernels (k(x, x) = 1 for all):
  cosine       embeddings with rows L2-normalised (default with --embeddings)
  categorical  k = w1 [same continent] + w2 [same country] + w3 [same artifact] (Eq. 4) from
               metadata --columns with --weights (>= 0, summing to 1)
  precomputed  --embeddings K.npy is the N x N kernel itself (validated: symmetric, unit
               diagonal, positive semi-definite)
Routes: kernel = eigenvalues of F F^T / N (N x N); dual = eigenvalues of F^T F / N (D x D) for
the feature map F of a cosine or categorical kernel; auto (default) takes the smaller. The
product runs on --device (f64 on cpu/cuda, f32 on wgpu), the eigenvalues in f64 (faer).
Unlike the vendi-score package (0.0.3), whose score_X ignores q and whose score_K returns NaN
for q = inf, every route honours --q and q = inf is the limit 1 / max p.

Output (--out, written atomically, full f64 precision): {\"n\", \"q\", \"vs\", \"qvs\", \"qvs_norm\"}
(q = infinity is written as the string \"inf\"); with --group-by an object keyed by group value
holding such objects. --intdiv adds \"intdiv\" = 1 - mean off-diagonal similarity.
CUBE protocol (--batch-size 8): per group, --repeats batches (default 50) drawn without
replacement with --seed; n is the group size, vs/qvs/qvs_norm are means over repetitions and
vs_sd/qvs_sd/qvs_norm_sd their population standard deviations.";

/// Arguments of `culturelens vendi`.
#[derive(clap::Args, Debug)]
#[command(about = "Vendi, quality-weighted and normalised Vendi scores (CUBE Def. 5.1, Eq. 2-3)", long_about = CONVENTIONS)]
pub struct VendiArgs {
    /// Embeddings (.npy N x d with optional --meta, or .parquet); the N x N kernel with --kernel precomputed.
    #[arg(long, value_name = "FILE")]
    pub embeddings: Option<PathBuf>,
    /// Metadata CSV (one row per item): categorical columns, quality and group columns.
    #[arg(long, value_name = "FILE")]
    pub meta: Option<PathBuf>,
    /// Similarity kernel.
    #[arg(long, value_enum)]
    pub kernel: Option<KernelArg>,
    /// Metadata columns of the categorical kernel, comma-separated (e.g. continent,country,artifact).
    #[arg(long, value_delimiter = ',')]
    pub columns: Vec<String>,
    /// Weights of the categorical kernel, comma-separated, one per column (>= 0, sum 1).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub weights: Vec<f64>,
    /// Order q >= 0, or `inf`.
    #[arg(long, default_value = "1", value_parser = Order::parse)]
    pub q: Order,
    /// Metadata column with per-item quality scores (default: quality 1).
    #[arg(long, value_name = "COL")]
    pub quality_col: Option<String>,
    /// Score each value of this metadata column separately.
    #[arg(long, value_name = "COL")]
    pub group_by: Option<String>,
    /// Eigenproblem: auto picks the smaller of N x N and D x D.
    #[arg(long, value_enum, default_value_t = RouteArg::Auto)]
    pub route: RouteArg,
    /// CUBE protocol: score random batches of this many items per group.
    #[arg(long, value_name = "B")]
    pub batch_size: Option<usize>,
    /// Repetitions of the protocol.
    #[arg(long, default_value_t = 50)]
    pub repeats: usize,
    /// Seed of the protocol's batch sampling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Also report intdiv = 1 - mean off-diagonal similarity.
    #[arg(long)]
    pub intdiv: bool,
    /// Backend for the kernel product.
    #[arg(long, value_enum, default_value_t = DeviceChoice::Cpu)]
    pub device: DeviceChoice,
    /// Output JSON.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KernelArg {
    Cosine,
    Categorical,
    Precomputed,
}

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

/// What the kernel is built from.
enum Items {
    Features(Features),
    Kernel { k: Vec<f64>, n: usize },
}

impl Items {
    fn n(&self) -> usize {
        match self {
            Items::Features(f) => f.n,
            Items::Kernel { n, .. } => *n,
        }
    }

    fn subset(&self, rows: &[usize]) -> Items {
        match self {
            Items::Features(f) => Items::Features(Features {
                n: rows.len(),
                d: f.d,
                data: rows.iter().flat_map(|&i| f.data[i * f.d..(i + 1) * f.d].iter().copied()).collect(),
            }),
            Items::Kernel { k, n } => Items::Kernel {
                k: rows.iter().flat_map(|&i| rows.iter().map(move |&j| k[i * n + j])).collect(),
                n: rows.len(),
            },
        }
    }
}

pub fn run(args: &VendiArgs) -> Result<()> {
    let kernel = args.kernel.unwrap_or(if args.embeddings.is_some() {
        KernelArg::Cosine
    } else {
        KernelArg::Categorical
    });
    let (items, meta) = load_items(args, kernel)?;
    let quality = match &args.quality_col {
        Some(col) => Some(quality_column(&meta, col)?),
        None => None,
    };
    let groups: Vec<(String, Vec<usize>)> = match &args.group_by {
        Some(col) => {
            let values = meta.require_nonempty_column(col)?;
            let mut by: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
            for (i, v) in values.iter().enumerate() {
                by.entry(v).or_default().push(i);
            }
            by.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
        }
        None => vec![(String::new(), (0..items.n()).collect())],
    };
    let device = select_device(args.device)?;
    let precision = if args.device == DeviceChoice::Wgpu { Precision::F32 } else { Precision::F64 };

    let mut results = Map::new();
    for (gi, (name, rows)) in groups.iter().enumerate() {
        let sub = if rows.len() == items.n() { None } else { Some(items.subset(rows)) };
        let group = sub.as_ref().unwrap_or(&items);
        let qual: Option<Vec<f64>> = quality.as_ref().map(|q| rows.iter().map(|&i| q[i]).collect());
        let mut value = match args.batch_size {
            Some(batch) => {
                let Items::Features(f) = group else {
                    bail!("--batch-size needs a cosine or categorical kernel")
                };
                let seed = args.seed.wrapping_add(gi as u64);
                protocol_json(
                    &protocol(f, qual.as_deref(), args.q, batch, args.repeats, seed, precision, &device),
                    f.n,
                    args.q,
                )
            }
            None => {
                let spectrum = match group {
                    Items::Features(f) => spectrum(f, args.route.into(), precision, &device),
                    Items::Kernel { k, n } => {
                        precomputed_spectrum(k, *n).with_context(|| kernel_file(args))?
                    }
                };
                serde_json::to_value(VendiScore::from_spectrum(
                    &spectrum,
                    group.n(),
                    args.q,
                    qual.as_deref(),
                ))?
            }
        };
        if args.intdiv {
            let id = match group {
                Items::Features(f) => intdiv(f),
                Items::Kernel { k, n } => {
                    (*n > 1).then(|| 1.0 - (k.iter().sum::<f64>() - *n as f64) / (n * (n - 1)) as f64)
                }
            };
            value["intdiv"] = json!(id);
        }
        results.insert(name.clone(), value);
    }
    let out = match args.group_by {
        Some(_) => Value::Object(results),
        None => results.remove("").expect("ungrouped result"),
    };
    let text = serde_json::to_vec_pretty(&out)?;
    write_atomic(&args.out, |w| w.write_all(&text))?;
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

fn kernel_file(args: &VendiArgs) -> String {
    args.embeddings.as_ref().map(|p| p.display().to_string()).unwrap_or_default()
}

fn load_items(args: &VendiArgs, kernel: KernelArg) -> Result<(Items, Metadata)> {
    match kernel {
        KernelArg::Cosine => {
            let path = args.embeddings.as_deref().context("--kernel cosine needs --embeddings")?;
            let table = load_table(path, args.meta.as_deref())?;
            let f = cosine_features(table.embeddings.data(), table.len(), table.dim())
                .with_context(|| path.display().to_string())?;
            Ok((Items::Features(f), table.meta))
        }
        KernelArg::Categorical => {
            let path = args
                .meta
                .as_deref()
                .context("--kernel categorical needs --meta with the category columns")?;
            if args.columns.is_empty() || args.columns.len() != args.weights.len() {
                bail!("--kernel categorical needs --columns and --weights with one weight per column");
            }
            let meta = read_metadata_csv(path)?;
            let cols: Vec<(&str, &[String])> = args
                .columns
                .iter()
                .map(|c| meta.require_nonempty_column(c).map(|v| (c.as_str(), v)))
                .collect::<Result<_, _>>()?;
            let f = categorical_features(&cols, &args.weights).with_context(|| path.display().to_string())?;
            Ok((Items::Features(f), meta))
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
                Some(p) => read_metadata_csv(p)?,
                None => Metadata::empty(n),
            };
            if meta.n_rows() != n {
                bail!(
                    "{}: {} metadata rows but the kernel is {n} x {n}",
                    args.meta.as_ref().unwrap().display(),
                    meta.n_rows()
                );
            }
            Ok((Items::Kernel { k: m.data().iter().map(|v| f64::from(*v)).collect(), n }, meta))
        }
    }
}

fn quality_column(meta: &Metadata, col: &str) -> Result<Vec<f64>> {
    let values = meta.require_nonempty_column(col)?;
    values
        .iter()
        .enumerate()
        .map(|(row, v)| match v.trim().parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(x),
            _ => {
                let at = meta.location().row(row).line(row as u64 + 2).column(col);
                bail!("{at}: quality must be a finite number, got `{v}`")
            }
        })
        .collect()
}

fn protocol_json(p: &ProtocolScore, n: usize, q: Order) -> Value {
    let q = match q {
        Order::Finite(v) => json!(v),
        Order::Infinity => json!("inf"),
    };
    json!({
        "n": n, "q": q,
        "vs": p.vs.mean, "qvs": p.qvs.mean, "qvs_norm": p.qvs_norm.mean,
        "vs_sd": p.vs.sd, "qvs_sd": p.qvs.sd, "qvs_norm_sd": p.qvs_norm.sd,
        "batch_size": p.batch, "repeats": p.repeats,
    })
}
