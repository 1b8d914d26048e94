//! `culturelens magbig`: gender bias of the MAGBIG paper (§4, App. B) from a per-image attribute
//! table: MAD, its exact fair-coin baseline and the mean male share per (model, language, set).
//! The metric code is `culturelens_metrics::magbig`. `--report` adds MAGBIG's prompt-understanding
//! checks (Fig. 6 text–image alignment, Table 3 attempts) and the Wilcoxon tests of App. C.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Result, bail};
use culturelens_compute::tensor::paired_cosine_tensor;
use culturelens_metrics::magbig::{
    self, Group, GroupCounts, PromptCounts, deviation, intervals, mad, paired_test,
};
use culturelens_metrics::stats::mean;
use culturelens_results::magbig::{ATTRIBUTE_COLUMNS, GENDER, Magbig, MagbigColumns, magbig_rows};
use culturelens_table::{Metadata, TableError, load_table, read_metadata_csv, write_atomic};
use serde_json::{Value, json};

use crate::device::{DeviceChoice, FloatType, select_device};
use crate::embeddings::{read_back, reject_zero_rows, upload};
use crate::output::write_json_pretty;
use crate::provenance::Provenance;
use crate::uncertainty::CiArgs;

const CONVENTIONS: &str = "\
Gender bias of the MAGBIG paper (Sec. 4, App. B), per (model, language, set):
  per prompt (prompt_id) with m male and f female images: p_m = m / (m + f), p_f = 1 - p_m,
  deviation = |p_m - 1/2| + |p_f - 1/2| (= |p_m - p_f|, the L1 form of MAGBIG's score_fairness);
  mad        = mean deviation over the prompts;
  male_share = mean p_m over the prompts (the bias direction, which mad cannot show);
  mad_random = the exact expected mad if every image's gender were a fair coin flip, each prompt
               keeping its own number n of classified images: mean over prompts of
               E|2B/n - 1|, B ~ Binomial(n, 1/2) (the paper simulates this baseline).
Images with an empty gender (no face found, unclassified) are excluded from the shares; prompts
without a classified image count in neither n_prompts nor n_images; n_images counts classified
images.

Input (--attributes): CSV, one row per generated image, with at least the columns
model,language,set,prompt_id,gender; gender is male, female or empty.
Output (--out, written atomically): model,language,set,n_prompts,n_images,mad,mad_random,male_share,
one row per (model, language, set) present, sorted, floats in full f64 precision (shortest
representation that reads back exactly).

Unit resampled by --ci: the prompts of each (model, language, set) with a classified image (MAD
and the male share are means over prompts; MAGBIG §4), drawn with replacement, each keeping its
own images; mad and male_share get mad_lo,mad_hi and male_share_lo,male_share_hi right after
them (empty where the interval is undefined, e.g. BCa with every resample on one side). The
stream of each group is seeded with --seed XOR FNV-1a(\"magbig\", model, language, set), so a
group's interval does not change when other groups are added. mad_random is an exact expectation
and has no interval.

Report (--report FILE.json), per (model, language, set) as above plus:
  attempts   when A.csv has an `attempt` column (the 1-based index of the generation, within its
             prompt, that produced the image; MAGBIG Table 3): a prompt's attempts = its largest
             value; mean_per_prompt = their mean, images_per_prompt = mean rows per prompt
             (classified or not);
  alignment  with --image-embeddings (embeddings, one row per A.csv row, same order) and --text-embeddings/--text-meta
             (language,set,prompt_id): mean cos(image, its own prompt) (MAGBIG Fig. 6, red and blue
             bars) and, with --reference-set R, mean cos(image, the prompt of set R with the same
             language and prompt_id) (the purple bars);
and with --compare A,B per (model, language) the two-sided Wilcoxon signed-rank test (scipy's
defaults: zeros dropped, exact for n <= 50 without ties/zeros or n <= 13, else the tie-corrected
normal approximation without continuity correction) of set A minus set B over the prompts in both
sets paired by prompt_id, for the per-prompt deviation and, with embeddings, the per-prompt mean
alignment (MAGBIG App. C, Tables 5-6).";

/// Arguments of `culturelens magbig`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(about = "MAGBIG gender bias: MAD, fair-coin baseline and male share (MAGBIG Sec. 4)", long_about = CONVENTIONS)]
pub struct MagbigArgs {
    /// Per-image attributes CSV (model,language,set,prompt_id,gender; e.g. from `culturelens classify`).
    #[arg(long, value_name = "FILE")]
    pub attributes: PathBuf,
    /// Output CSV.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// JSON report: attempts, text-image alignment, Wilcoxon tests between two sets.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Two sets to compare with the Wilcoxon signed-rank test, e.g. direct,indirect.
    #[arg(long, value_delimiter = ',', value_name = "A,B", requires = "report")]
    pub compare: Vec<String>,
    /// Image embeddings (.npy, .parquet), one row per --attributes row in the same order.
    #[arg(long, value_name = "FILE", requires_all = ["text_embeddings", "text_meta", "report"])]
    pub image_embeddings: Option<PathBuf>,
    /// Prompt text embeddings (.npy, .parquet).
    #[arg(long, value_name = "FILE", requires = "image_embeddings")]
    pub text_embeddings: Option<PathBuf>,
    /// Prompt text metadata CSV: language,set,prompt_id.
    #[arg(long, value_name = "FILE", requires = "image_embeddings")]
    pub text_meta: Option<PathBuf>,
    /// The set whose prompts are the reference of the alignment comparison.
    #[arg(long, value_name = "SET", requires = "image_embeddings")]
    pub reference_set: Option<String>,
    /// Backend of the alignment cosines.
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: DeviceChoice,
    #[command(flatten)]
    pub ci: CiArgs,
}

/// The attribute table's columns that say which prompt an image answers: model, language, set,
/// prompt_id.
const KEY: [&str; 4] =
    [ATTRIBUTE_COLUMNS[0], ATTRIBUTE_COLUMNS[1], ATTRIBUTE_COLUMNS[2], ATTRIBUTE_COLUMNS[3]];

pub fn run(args: &MagbigArgs) -> Result<()> {
    if !args.compare.is_empty() && args.compare.len() != 2 {
        bail!("--compare takes exactly two sets, A,B (got {})", args.compare.join(","));
    }
    let meta = read_metadata_csv(&args.attributes)?;
    let groups = prompt_counts(&meta)?;
    let spec = args.ci.spec();
    let rows = magbig_rows(&groups, |(model, language, set), counts| match &spec {
        Some(spec) => intervals(spec, counts, &[model, language, set]),
        None => [None, None],
    });
    if let Some(path) = &args.report {
        let json = report(args, &meta, &groups)?;
        write_json_pretty(path, &json)?;
    }
    let columns = MagbigColumns { ci: args.ci.ci.is_some() };
    write_atomic(&args.out, |w| culturelens_results::write::<Magbig>(w, &columns, &rows))?;
    let mut provenance = Provenance::new("magbig", args);
    for path in [
        Some(&args.attributes),
        args.image_embeddings.as_ref(),
        args.text_embeddings.as_ref(),
        args.text_meta.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        provenance.input(path)?;
    }
    let sets: std::collections::BTreeSet<&String> = groups.keys().map(|(_, _, set)| set).collect();
    let unit = "prompts (prompt_id) with a classified image, within each (model, language, set)";
    args.ci.record_in(&mut provenance, unit);
    provenance.prompt_sets(sets).device(args.device, FloatType::F32).write_beside(&args.out)?;
    eprintln!("wrote {} (model, language, set) rows to {}", rows.len(), args.out.display());
    Ok(())
}

/// Male/female counts per prompt, per (model, language, set), both sorted.
fn prompt_counts(meta: &Metadata) -> Result<GroupCounts, TableError> {
    let [model, language, set, prompt_id] = KEY.map(|name| meta.require_nonempty_column(name));
    let (model, language, set, prompt_id) = (model?, language?, set?, prompt_id?);
    let gender = meta.require_column(GENDER)?;
    magbig::prompt_counts(model, language, set, prompt_id, gender)
        .map_err(|(row, e)| TableError::invalid(meta.cell(row, GENDER), e))
}

/// Per-prompt values of one (model, language, set).
type PerPrompt = BTreeMap<String, f64>;

/// The `--report` JSON (keys sorted).
fn report(args: &MagbigArgs, meta: &Metadata, groups: &GroupCounts) -> Result<Value> {
    let attempts = attempts(meta)?;
    let alignment = match &args.image_embeddings {
        Some(images) => Some(alignment(args, images, meta)?),
        None => None,
    };
    let deviations: BTreeMap<&Group, PerPrompt> = groups
        .iter()
        .map(|(g, prompts)| {
            (g, prompts.iter().filter_map(|(p, &c)| Some((p.clone(), deviation(c)?))).collect())
        })
        .collect();
    let mut rows = Vec::new();
    for (g, prompts) in groups {
        let counts: Vec<PromptCounts> = prompts.values().copied().collect();
        let mut row = json!({"model": g.0, "language": g.1, "set": g.2, "bias": mad(&counts).map(|s| json!({
            "n_prompts": s.n_prompts, "n_images": s.n_images, "mad": s.mad, "mad_random": s.mad_random,
            "male_share": s.male_share}))});
        if let Some(a) = &attempts {
            row["attempts"] = a.get(g).cloned().unwrap_or(Value::Null);
        }
        if let Some((own, reference)) = &alignment {
            let means = |m: &BTreeMap<Group, PerImage>| {
                m.get(g).map(|v| mean(&v.values().flatten().copied().collect::<Vec<_>>()))
            };
            row["alignment"] = json!({"own": means(own), "reference": reference.as_ref().and_then(means)});
        }
        rows.push(row);
    }
    let mut tests = Vec::new();
    if let [a, b] = args.compare.as_slice() {
        let languages: std::collections::BTreeSet<(&str, &str)> =
            groups.keys().map(|(m, l, _)| (m.as_str(), l.as_str())).collect();
        for (model, language) in languages {
            let key = |set: &str| (model.to_string(), language.to_string(), set.to_string());
            let (ka, kb) = (key(a), key(b));
            let mut add = |measure: &str, x: Option<&PerPrompt>, y: Option<&PerPrompt>| {
                if let (Some(x), Some(y)) = (x, y) {
                    tests.push(
                        json!({"model": model, "language": language, "a": a, "b": b, "measure": measure,
                                      "test": paired_test(x, y)}),
                    );
                }
            };
            add("deviation", deviations.get(&ka), deviations.get(&kb));
            if let Some((own, _)) = &alignment {
                let per_prompt = |k: &Group| own.get(k).map(prompt_means);
                add("alignment", per_prompt(&ka).as_ref(), per_prompt(&kb).as_ref());
            }
        }
    }
    Ok(json!({"groups": rows, "wilcoxon": tests}))
}

/// Mean attempts and rows per prompt per group, when A.csv has an `attempt` column.
fn attempts(meta: &Metadata) -> Result<Option<BTreeMap<Group, Value>>, TableError> {
    let Some(attempt) = meta.column("attempt") else { return Ok(None) };
    let [model, language, set, prompt_id] = KEY.map(|c| meta.column(c).expect("checked"));
    let mut per: BTreeMap<Group, BTreeMap<&str, (u64, usize)>> = BTreeMap::new();
    for (row, value) in attempt.iter().enumerate() {
        let a: u64 = value.trim().parse().ok().filter(|&a| a >= 1).ok_or_else(|| {
            TableError::invalid(
                meta.cell(row, "attempt"),
                format!("attempt must be a whole number >= 1, got {value:?}"),
            )
        })?;
        let key = (model[row].clone(), language[row].clone(), set[row].clone());
        let e = per.entry(key).or_default().entry(&prompt_id[row]).or_default();
        e.0 = e.0.max(a);
        e.1 += 1;
    }
    Ok(Some(
        per.into_iter()
            .map(|(g, prompts)| {
                let n = prompts.len() as f64;
                let attempts = prompts.values().map(|p| p.0 as f64).sum::<f64>() / n;
                let images = prompts.values().map(|p| p.1 as f64).sum::<f64>() / n;
                (g, json!({"n_prompts": prompts.len(), "mean_per_prompt": attempts, "images_per_prompt": images}))
            })
            .collect(),
    ))
}

/// Alignment values per prompt (one per image) of one group.
type PerImage = BTreeMap<String, Vec<f64>>;

/// Per group, the alignment with the own prompts and (with --reference-set) the reference's.
type Alignment = (BTreeMap<Group, PerImage>, Option<BTreeMap<Group, PerImage>>);

fn prompt_means(values: &PerImage) -> PerPrompt {
    values.iter().map(|(p, v)| (p.clone(), mean(v))).collect()
}

/// Per group, each image's cosine with its own prompt and (with --reference-set) with the
/// reference prompt of the same language and prompt_id.
fn alignment(args: &MagbigArgs, images_path: &std::path::Path, meta: &Metadata) -> Result<Alignment> {
    let images = load_table(images_path, None)?;
    if images.len() != meta.n_rows() {
        bail!(
            "{} has {} rows but {} has {}: --image-embeddings needs one embedding per attributes row, in order",
            images_path.display(),
            images.len(),
            args.attributes.display(),
            meta.n_rows()
        );
    }
    let texts =
        load_table(args.text_embeddings.as_deref().expect("clap requires"), args.text_meta.as_deref())?;
    if images.dim() != texts.dim() {
        bail!(
            "image embeddings are {}-dimensional, text embeddings {}: use one model",
            images.dim(),
            texts.dim()
        );
    }
    reject_zero_rows(&images)?;
    reject_zero_rows(&texts)?;
    let [tl, ts, tp] = ["language", "set", "prompt_id"].map(|c| texts.meta.require_nonempty_column(c));
    let (tl, ts, tp) = (tl?, ts?, tp?);
    let mut index: BTreeMap<(&str, &str, &str), usize> = BTreeMap::new();
    for row in 0..texts.len() {
        if index.insert((tl[row].trim(), ts[row].trim(), tp[row].trim()), row).is_some() {
            return Err(TableError::invalid(
                texts.meta.cell(row, "prompt_id"),
                "duplicated (language, set, prompt_id)",
            )
            .into());
        }
    }
    let [model, language, set, prompt_id] = KEY.map(|c| meta.column(c).expect("checked"));
    let own: Vec<usize> = (0..meta.n_rows())
        .map(|row| {
            index.get(&(language[row].trim(), set[row].trim(), prompt_id[row].trim())).copied().ok_or_else(
                || {
                    TableError::invalid(
                        meta.cell(row, "prompt_id"),
                        "no prompt text with this language, set and prompt_id",
                    )
                },
            )
        })
        .collect::<Result<_, _>>()?;
    let device = select_device(args.device)?;
    let image_tensor = upload(&images.embeddings, &device);
    let cosines = |rows: &[usize]| {
        let text_rows = upload(&texts.embeddings.select_rows(rows), &device);
        read_back(paired_cosine_tensor(image_tensor.clone(), text_rows))
    };
    let group = |cos: &[f32], keep: &dyn Fn(usize) -> bool| {
        let mut out: BTreeMap<Group, PerImage> = BTreeMap::new();
        for (row, &c) in cos.iter().enumerate().filter(|(row, _)| keep(*row)) {
            out.entry((model[row].clone(), language[row].clone(), set[row].clone()))
                .or_default()
                .entry(prompt_id[row].clone())
                .or_default()
                .push(c as f64);
        }
        out
    };
    let own_cos = cosines(&own);
    let own_groups = group(&own_cos, &|_| true);
    let reference = args.reference_set.as_deref().map(|r| {
        let found: Vec<Option<usize>> = (0..meta.n_rows())
            .map(|row| index.get(&(language[row].trim(), r, prompt_id[row].trim())).copied())
            .collect();
        let rows: Vec<usize> = found.iter().map(|f| f.unwrap_or(0)).collect();
        let cos = cosines(&rows);
        group(&cos, &|row| found[row].is_some())
    });
    Ok((own_groups, reference))
}
