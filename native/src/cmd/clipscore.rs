//! `culturelens clipscore`: the CLIPScore of Hessel et al. (2021), `w · max(cos(image, caption),
//! 0)`, of every image against its captions, as the SoS validation (§4.2) scores an image against
//! "A photo of a {c} person" for its surface and its semantic culture. The formula is
//! `culturelens_metrics::validation::clipscore`; the cosines come from a CLIP-family model of
//! `embed`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Result, bail};
use culturelens_compute::tensor::clip_scores;
use culturelens_metrics::validation::{CLIPSCORE_W, clipscore_means};
use culturelens_models::Towers;
use culturelens_results::ci::{bound_cells, bound_columns};
use culturelens_table::{Metadata, TableError};

use crate::embeddings::matrix;
use crate::encode::{ModelArgs, PerImageArgs, check_batch, embed_image_list, embed_token_ids};
use crate::input::ImageList;
use crate::output::{write_csv_rows, write_meta_with_columns};
use crate::uncertainty::CiArgs;

const CONVENTIONS: &str = concat!(
    "\
CLIPScore (Hessel et al., 2021) as the SoS validation uses it (SoS Sec. 4.2):
  CLIPScore(I, C) = w * max(cos(E_I, E_C), 0), w = 2.5 (--w; torchmetrics' CLIPScore is w = 100)
with E_I, E_C the image and caption embeddings of a CLIP-family model that `embed` supports.
--images is a manifest CSV (column `image`, paths relative to the CSV) whose --caption-cols columns
hold each image's captions; with --template (e.g. \"A photo of a {} person\") a cell's value is put
in place of {} (so a column of culture names gives the SoS captions). A caption longer than the
text tower's context is an error naming its row and column, unless --truncate (then it is cut
to the context, as torchmetrics does silently).
Output (--out, atomic): the manifest's columns, then COL_cos and COL_clipscore per caption column
(`culturelens validate --clipscore-cols SUR_cos,SEM_cos` labels the images from these). An image that
cannot be read stops the run unless --skip-bad, which keeps its row with empty scores.

--summary FILE also writes the aggregate the CLIPScore literature reports, the mean CLIPScore over
images, per group of the --summary-by columns (e.g. model,language; one row over all images without
them): the --summary-by columns, n (the group's scored images), then COL_clipscore per caption column.
Unit resampled by --ci: the scored images of each group (the unit the mean is taken over), one draw
of a group's images for all its caption columns.

",
    crate::uncertainty::ci_help!()
);

/// Arguments of `culturelens clipscore`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(about = "CLIPScore of images against their captions (Hessel et al.; SoS Sec. 4.2)", long_about = CONVENTIONS)]
pub struct ClipscoreArgs {
    /// Manifest CSV: `image` column (paths relative to the CSV) and the caption columns.
    #[arg(long, value_name = "CSV")]
    pub images: PathBuf,
    /// Caption columns of the manifest, comma-separated.
    #[arg(long, value_delimiter = ',', required = true, value_name = "COL1,COL2,...")]
    pub caption_cols: Vec<String>,
    /// Caption template; `{}` is replaced by the cell's value.
    #[arg(long, value_name = "TEXT")]
    pub template: Option<String>,
    #[command(flatten)]
    #[serde(flatten)]
    pub model: ModelArgs,
    /// The weight w of CLIPScore.
    #[arg(long, default_value_t = CLIPSCORE_W)]
    pub w: f64,
    /// Cut captions longer than the text tower's context instead of failing.
    #[arg(long)]
    pub truncate: bool,
    #[command(flatten)]
    #[serde(flatten)]
    pub run: PerImageArgs,
    /// Also write the mean CLIPScore per --summary-by group as CSV (atomic).
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
    /// Manifest columns whose values make the --summary groups, comma-separated.
    #[arg(long, value_delimiter = ',', requires = "summary", value_name = "COL1,COL2,...")]
    pub summary_by: Vec<String>,
    #[command(flatten)]
    #[serde(flatten)]
    pub ci: CiArgs,
}

pub fn run(args: &ClipscoreArgs) -> Result<()> {
    // Read: the manifest, its captions (each distinct text once), the model.
    check_batch(args.run.batch)?;
    if let Some(t) = &args.template
        && !t.contains("{}")
    {
        bail!("--template {t:?} has no {{}} for the cell's value");
    }
    if args.ci.ci.is_some() && args.summary.is_none() {
        bail!("--ci gives intervals of the --summary means; pass --summary FILE");
    }
    let images = ImageList::read(&args.images)?;
    let meta = &images.meta;
    let group_of = group_keys(meta, &args.summary_by)?;
    let mut texts: Vec<String> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    // Per caption column, per row: the index of its text in `texts`.
    let mut caption_of: Vec<Vec<usize>> = Vec::new();
    for col in &args.caption_cols {
        let values = meta.require_nonempty_column(col)?;
        let rows = values
            .iter()
            .map(|v| {
                let text = args.template.as_ref().map_or_else(|| v.clone(), |t| t.replace("{}", v));
                let next = index.len();
                *index.entry(text.clone()).or_insert_with(|| {
                    texts.push(text);
                    next
                })
            })
            .collect();
        caption_of.push(rows);
    }
    let (encoder, weights) = args.model.load(Towers::Both)?;
    let marked = encoder.tokenize_marked(&texts)?;
    if !args.truncate {
        for (c, col) in args.caption_cols.iter().enumerate() {
            if let Some(row) = caption_of[c].iter().position(|&t| marked[t].1) {
                let max = encoder.model.max_text_len().unwrap_or(0);
                return Err(TableError::invalid(
                    meta.cell(row, col),
                    format!("caption {:?} is longer than the text tower's context ({max} tokens); pass --truncate to cut it", texts[caption_of[c][row]]),
                )
                .into());
            }
        }
    }
    let cut = marked.iter().filter(|(_, cut)| *cut).count();
    if cut > 0 {
        eprintln!("{cut} caption(s) cut to the text tower's context (--truncate)");
    }

    // Build: caption and image embeddings, then each row's cosines on the device.
    let ids: Vec<Vec<u32>> = marked.into_iter().map(|(ids, _)| ids).collect();
    let text_rows = embed_token_ids(&encoder, &ids, args.run.batch, None)?;
    let n = images.paths.len();
    let done = embed_image_list(&encoder, &images.paths, args.run.batch, args.run.skip_bad)?;
    let mut added = Vec::new();
    // Per caption column, per scored row (in row order): its CLIPScore.
    let mut scores: Vec<Vec<f64>> = Vec::new();
    for (col, captions) in args.caption_cols.iter().zip(&caption_of) {
        let captions = done.keys().map(|&row| &text_rows[captions[row]]);
        let images = matrix(done.values());
        let dim = images.cols();
        let pairs =
            clip_scores(images.into_data(), matrix(captions).into_data(), dim, args.w, &encoder.device);
        let (mut cos, mut score) = (vec![String::new(); n], vec![String::new(); n]);
        let mut column = Vec::with_capacity(done.len());
        for (&row, &(c, s)) in done.keys().zip(&pairs) {
            cos[row] = c.to_string();
            score[row] = s.to_string();
            column.push(s);
        }
        added.push((format!("{col}_cos"), cos));
        added.push((format!("{col}_clipscore"), score));
        scores.push(column);
    }
    let rows: Vec<usize> = done.keys().copied().collect();
    let summary = args.summary.as_ref().map(|_| summary_table(args, &group_of, &rows, &scores));

    // Write.
    write_meta_with_columns(&args.run.out, meta, &added)?;
    let mut provenance = args.model.provenance("clipscore", args, &weights)?;
    provenance.input(&args.images)?;
    let unit = match args.summary_by.as_slice() {
        [] => "scored images (one group: the whole manifest)".to_string(),
        cols => format!("scored images within each ({}) group", cols.join(", ")),
    };
    args.ci.record_in(&mut provenance, &unit);
    provenance.write_beside(&args.run.out)?;
    if let (Some(path), Some((header, table))) = (&args.summary, &summary) {
        write_csv_rows(path, header, table)?;
        provenance.write_beside(path)?;
        eprintln!("wrote {} group(s) to {}", table.len(), path.display());
    }
    if let Some(spec) = args.ci.spec() {
        println!(
            "Confidence intervals: {}% {} bootstrap, {} resamples of {unit}, seed {}",
            spec.level * 100.0,
            spec.method.name(),
            spec.resamples,
            spec.seed
        );
    }
    eprintln!("wrote {n} rows to {} ({} with empty scores)", args.run.out.display(), n - done.len());
    Ok(())
}

/// The `--summary-by` values of every row (columns required, values non-empty); `[]` per row without
/// `--summary-by`.
fn group_keys(meta: &Metadata, names: &[String]) -> Result<Vec<Vec<String>>> {
    let cols = names.iter().map(|n| meta.require_nonempty_column(n)).collect::<Result<Vec<_>, _>>()?;
    Ok((0..meta.n_rows()).map(|r| cols.iter().map(|c| c[r].clone()).collect()).collect())
}

/// The `--summary` table: per group of the scored `rows` (in value order), the `--summary-by`
/// values, n, and per caption column the mean CLIPScore (`scores[c][k]`: row `rows[k]`'s score
/// against caption column `c`), each followed by its interval's bounds with `--ci`.
fn summary_table(
    args: &ClipscoreArgs,
    group_of: &[Vec<String>],
    rows: &[usize],
    scores: &[Vec<f64>],
) -> (Vec<String>, Vec<Vec<String>>) {
    let spec = args.ci.spec();
    let mut header: Vec<String> = args.summary_by.clone();
    header.push("n".into());
    for col in &args.caption_cols {
        let metric = format!("{col}_clipscore");
        if spec.is_some() {
            header.extend(bound_columns(&metric));
            header.insert(header.len() - 2, metric);
        } else {
            header.push(metric);
        }
    }
    let mut groups: BTreeMap<&[String], Vec<usize>> = BTreeMap::new();
    for (k, &row) in rows.iter().enumerate() {
        groups.entry(&group_of[row]).or_default().push(k);
    }
    let table = groups
        .into_iter()
        .map(|(key, members)| {
            let columns: Vec<Vec<f64>> =
                scores.iter().map(|s| members.iter().map(|&k| s[k]).collect()).collect();
            let values: Vec<&str> = key.iter().map(String::as_str).collect();
            let mut cells: Vec<String> = key.to_vec();
            cells.push(members.len().to_string());
            for (mean, ci) in clipscore_means(&columns, spec.as_ref(), &values) {
                cells.push(mean.to_string());
                if spec.is_some() {
                    cells.extend(bound_cells(ci));
                }
            }
            cells
        })
        .collect();
    (header, table)
}
