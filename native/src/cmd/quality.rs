//! `culturelens quality`: the per-image quality score of CUBE's quality-weighted Vendi score
//! (qVS, CUBE Eq. 2–3, §5.1.2), which CUBE takes from HPS v2 (Wu et al., 2023): the Human
//! Preference Score of an image for its prompt, exactly as the `hpsv2` package (1.2.0,
//! `hpsv2.img_score.score`) computes it:
//!
//!   hps = <f_I / |f_I|, f_T / |f_T|>
//!
//! the cosine of the image and prompt features of OpenCLIP ViT-H-14 with the HPS v2 or v2.1
//! weights (no logit scale). The model runs through the same OpenCLIP code path as `embed`
//! (`culturelens-models-io`'s `Encoder`); the cosine is `culturelens-compute`'s paired cosine,
//! as `clipscore` takes it. The weights folder is one `import-weights --arch hps-v2.0|hps-v2.1`
//! made from the published checkpoint: its `open_clip_config.json` names the HPS version and
//! asks for hpsv2's own image transform (float resize of the longer side to 224, zero padding,
//! `culturelens_models::preprocess::Resize::LongestPadFloat`). Prompts are cleaned and tokenized
//! as open_clip does and cut to the 77-token context, as hpsv2 does silently (a count is printed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use culturelens_compute::tensor::paired_cosine_tensor;
use culturelens_models::Towers;
use culturelens_models::open_clip::OpenClipFile;
use culturelens_models_io::Encoder;

use crate::embeddings::{matrix, read_back, upload};
use crate::encode::{ModelArgs, PerImageArgs, check_batch, embed_images, embed_token_ids};
use crate::input::ImageList;
use crate::output::write_meta_with_columns;
use crate::work::progress::Progress;
use crate::work::resume::{ResumeLog, RunKey, canonical, split_finished};

const CONVENTIONS: &str = "\
HPS v2 / v2.1 (Wu et al., 2023), the quality score s(x) of CUBE's qVS (CUBE Sec. 5.1.2, Eq. 2-3),
exactly as the hpsv2 package (1.2.0, hpsv2.img_score.score) computes it:
  hps = cos(E_I, E_T)   (normalised OpenCLIP ViT-H-14 image and prompt features, no logit scale)
--weights is a folder made by `culturelens import-weights --arch hps-v2.0|hps-v2.1` from
HPS_v2_compressed.pt / HPS_v2.1_compressed.pt (hub repository xswu/HPSv2); it records the version
and hpsv2's own image transform (longer side to 224 on float pixels, bicubic with antialias,
zero padding to a square). RGBA images are scored with alpha dropped (hpsv2 itself fails on them).
--images is a manifest CSV (column `image`, paths relative to the CSV) with each image's prompt in
--prompt-col. Prompts longer than the 77-token context are cut, as hpsv2 does (a count is printed).
Output (--out, atomic): the manifest's columns, then `hps` and `hps_version`;
`culturelens vendi --quality-col hps` reads it. An image that cannot be read stops the run unless
--skip-bad, which keeps its row with an empty score. Image features are kept in OUT.resume as they
are computed (embed's resume log), so an interrupted run picks up where it stopped.";

/// Arguments of `culturelens quality`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(about = "HPS v2 quality score of images for their prompts (CUBE's qVS quality)", long_about = CONVENTIONS)]
pub struct QualityArgs {
    /// Manifest CSV: `image` column (paths relative to the CSV) and the prompt column.
    #[arg(long, value_name = "CSV")]
    pub images: PathBuf,
    /// Column of the manifest holding each image's prompt.
    #[arg(long, default_value = "prompt", value_name = "COL")]
    pub prompt_col: String,
    #[command(flatten)]
    #[serde(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub run: PerImageArgs,
}

pub fn run(args: &QualityArgs) -> Result<()> {
    // Read: the manifest and its prompts, the HPS folder.
    check_batch(args.run.batch)?;
    let images = ImageList::read(&args.images)?;
    let meta = &images.meta;
    let prompts = meta.require_nonempty_column(&args.prompt_col)?.to_vec();
    let weights_dir = args.model.weights_dir()?;
    let config_path = weights_dir.join("open_clip_config.json");
    let version = std::fs::read_to_string(&config_path)
        .ok()
        .and_then(|json| OpenClipFile::from_json(&json).ok())
        .and_then(|file| file.hps_version);
    let Some(version) = version else {
        bail!(
            "{}: not an HPS folder (its open_clip_config.json names no hps_version); make one with \
             `culturelens import-weights --arch hps-v2.1 --pickle HPS_v2.1_compressed.pt --tokenizer tokenizer.json --out DIR`",
            weights_dir.display()
        );
    };
    let (encoder, weights) = args.model.load(Towers::Both)?;

    // Build: prompt features (each distinct prompt once), image features, paired cosines.
    let mut distinct: Vec<String> = prompts.clone();
    distinct.sort();
    distinct.dedup();
    let marked =
        encoder.tokenize_marked(&distinct).with_context(|| format!("--prompt-col {}", args.prompt_col))?;
    let cut = marked.iter().filter(|(_, cut)| *cut).count();
    if cut > 0 {
        eprintln!("{cut} prompt(s) cut to the 77-token context, as hpsv2 does");
    }
    let ids: Vec<Vec<u32>> = marked.into_iter().map(|(ids, _)| ids).collect();
    let text_rows = embed_token_ids(&encoder, &ids, args.run.batch, None)?;
    let n = images.paths.len();
    let done = image_features(&encoder, &weights, &images, args)?;
    let texts = done.keys().map(|&row| {
        let at = distinct.binary_search(&prompts[row]).expect("every prompt is in the distinct list");
        &text_rows[at]
    });
    let cosines = read_back(paired_cosine_tensor(
        upload(&matrix(done.values()), &encoder.device),
        upload(&matrix(texts), &encoder.device),
    ));
    let mut hps = vec![String::new(); n];
    for (&row, &c) in done.keys().zip(&cosines) {
        hps[row] = c.to_string();
    }
    let added = vec![("hps".to_string(), hps), ("hps_version".to_string(), vec![version.clone(); n])];

    // Write.
    write_meta_with_columns(&args.run.out, meta, &added)?;
    args.model.provenance("quality", args, &weights)?.input(&args.images)?.write_beside(&args.run.out)?;
    let log = ResumeLog::path_for(&args.run.out);
    std::fs::remove_file(&log).with_context(|| format!("cannot remove {}", log.display()))?;
    eprintln!(
        "wrote HPS {version} scores of {} images to {} ({} with empty scores)",
        done.len(),
        args.run.out.display(),
        n - done.len()
    );
    Ok(())
}

/// The image features of every row of the manifest, resumed from and appended to `OUT.resume`
/// (the resume log of `embed`, keyed by image path, for this weights folder and precision).
/// Unreadable images stop the run unless `--skip-bad` (their rows are then left out).
fn image_features(
    encoder: &Encoder,
    weights: &Path,
    images: &ImageList,
    args: &QualityArgs,
) -> Result<BTreeMap<usize, Vec<f32>>> {
    let dim = encoder.model.image_dim();
    let key = RunKey::Embed { weights: canonical(weights), dim, precision: args.model.precision };
    let (mut log, finished) = ResumeLog::open(&args.run.out, &key)?;
    let keys: Vec<String> = images.paths.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let rows: Vec<usize> = (0..images.paths.len()).collect();
    let (mut done, todo) = split_finished(&rows, |row| keys[row].clone(), &finished);
    if todo.len() < rows.len() {
        eprintln!("resuming: {} of {} images already scored", rows.len() - todo.len(), rows.len());
    }
    let progress = Progress::new(rows.len(), rows.len() - todo.len(), "images");
    let failures = embed_images(encoder, &images.paths, &todo, args.run.batch, &progress, |batch| {
        for (row, values) in batch {
            log.append(&keys[row], &values)?;
            done.insert(row, values);
        }
        log.sync()
    })?;
    progress.finish();
    if !failures.is_empty() {
        eprintln!("{} image(s) could not be read:", failures.len());
        for (_, err) in &failures {
            // The error names its file.
            eprintln!("  {err}");
        }
        if !args.run.skip_bad {
            bail!(
                "{} image(s) failed; nothing written (finished images are kept in {}; fix or remove them, or pass --skip-bad)",
                failures.len(),
                log.path().display()
            );
        }
    }
    if done.is_empty() {
        bail!("no image could be read");
    }
    Ok(done)
}
