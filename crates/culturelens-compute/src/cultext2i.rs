//! The CulText2I automatic metrics of an image and a text embedding table (CulText2I §6.1,
//! Table 2), as `culturelens cultext2i` and the Python `culturelens.cultext2i` compute them: the
//! text and image roles read from the metadata, the image × text cosines on a device, NA, DP and
//! CD per image and their means (with bootstrap intervals) per (model, language, concept,
//! template) group, and the report (NA confusion matrix, CCS matrices, XNA/XDP from VQA answers).
//! The per-image and per-set formulas are `culturelens_metrics::cultext2i`; the conventions are
//! the command's help. Only with the `table` feature (it reads `culturelens_table`'s tables).

use std::collections::BTreeMap;

use burn::tensor::{Device, Tensor, TensorData};
use culturelens_metrics::bootstrap::{CiSpec, Replicates};
use culturelens_metrics::cultext2i::{
    Confusion, ImageScores, TextColumns, ccs, group_scores, image_scores, majority, xdp, xna,
};
use culturelens_results::ci::Interval;
use culturelens_results::cultext2i::{CcsMatrix, Cultext2iColumns, Cultext2iReport, Cultext2iRow, VqaScore};
use culturelens_table::{EmbeddingTable, Matrix, Metadata, TableError};

use crate::tensor::cosine_tensor;

/// What to compute besides the group means.
pub struct Options<'a> {
    /// Softmax temperature T of NA (1 = the paper, 100 = CLIP's logit scale); positive.
    pub temperature: f64,
    /// Bootstrap intervals of every group mean (the images of a group resampled).
    pub ci: Option<CiSpec>,
    /// Build the report; with VQA answers (model, language, concept, template, question, answer,
    /// nationality) also XNA/XDP.
    pub report: Option<Option<&'a Metadata>>,
}

/// The group rows (`culturelens_results::cultext2i::Groups`), their columns and the report.
pub struct Cultext2i {
    pub columns: Cultext2iColumns,
    pub rows: Vec<Cultext2iRow>,
    pub report: Option<Cultext2iReport>,
}

/// The metrics of `images` (metadata model, language, concept, template, nationality) against
/// `texts` (kind, label, language), both validated tables of one embedding dimension, with the
/// cosines computed on `device`. Errors name the table's row and column.
pub fn cultext2i(
    images: &EmbeddingTable,
    texts_table: &EmbeddingTable,
    options: &Options,
    device: &Device,
) -> Result<Cultext2i, TableError> {
    assert_eq!(images.dim(), texts_table.dim(), "image and text embeddings of one model");
    let texts = read_texts(&texts_table.meta)?;
    let (keys, truths, concept_cols) = read_images(&images.meta, &texts)?;
    let cos = cosine_matrix(&images.embeddings, &texts_table.embeddings, device);
    let k = texts_table.len();
    let cols = TextColumns { nationalities: &texts.nationality_cols, dimensions: &texts.dimension_cols };
    let scores: Vec<ImageScores> = (0..images.len())
        .map(|i| {
            image_scores(&cos[i * k..(i + 1) * k], cols, truths[i], concept_cols[i], options.temperature)
        })
        .collect();

    let mut groups: BTreeMap<&Key, Vec<usize>> = BTreeMap::new();
    for (i, key) in keys.iter().enumerate() {
        groups.entry(key).or_default().push(i);
    }
    let rows: Vec<Cultext2iRow> = groups
        .iter()
        .map(|((model, language, concept, template), rows)| {
            let s: Vec<&ImageScores> = rows.iter().map(|&i| &scores[i]).collect();
            let t: Vec<usize> = rows.iter().map(|&i| truths[i]).collect();
            let g = group_scores(&s, &t).expect("groups are non-empty");
            let ci = match &options.ci {
                Some(spec) => {
                    let key = ["cultext2i", model, language, concept, template].join("\u{1f}");
                    intervals(spec, &s, &t, &key)
                }
                None => Vec::new(),
            };
            Cultext2iRow {
                model: model.clone(),
                language: language.clone(),
                concept: concept.clone(),
                template: template.clone(),
                n: g.n,
                na: g.na,
                na_acc: g.na_acc,
                cd: g.cd,
                dp: texts.dimensions.iter().cloned().zip(g.dp).collect(),
                ci,
            }
        })
        .collect();
    let report = match options.report {
        Some(vqa) => Some(build_report(images, &keys, &truths, &scores, &texts, vqa, device)?),
        None => None,
    };
    let columns = Cultext2iColumns { dimensions: texts.dimensions.clone(), ci: options.ci.is_some() };
    Ok(Cultext2i { columns, rows, report })
}

/// The text table's roles.
struct Texts {
    nationalities: Vec<String>,
    nationality_cols: Vec<usize>,
    dimensions: Vec<String>,
    dimension_cols: Vec<usize>,
    /// English concept label → text row.
    concepts_en: BTreeMap<String, usize>,
}

/// An image's group key: (model, language, concept, template).
type Key = (String, String, String, String);

/// Per image: its group key, its nationality's index and its English concept text's row.
type ImageRoles = (Vec<Key>, Vec<usize>, Vec<usize>);

/// CCS sums and counts over concepts: (model, template) → (l1, l2) → (sum, concepts).
type CcsSums<'a> = BTreeMap<(&'a str, &'a str), BTreeMap<(&'a str, &'a str), (f64, usize)>>;

/// The intervals of one group's means (`na`, `na_acc`, `cd`, each `dp`): its images resampled with
/// replacement from the stream of `key`, one draw for all the metrics.
fn intervals(spec: &CiSpec, scores: &[&ImageScores], truths: &[usize], key: &str) -> Vec<Option<Interval>> {
    let draws = spec.draws(scores.len(), key);
    let per_image: Vec<Vec<f64>> = [
        scores.iter().map(|s| s.na).collect(),
        scores.iter().zip(truths).map(|(s, t)| f64::from(u8::from(s.predicted == *t))).collect(),
        scores.iter().map(|s| s.cd).collect(),
    ]
    .into_iter()
    .chain((0..scores[0].dp.len()).map(|d| scores.iter().map(|s| s.dp[d]).collect()))
    .collect();
    per_image.iter().map(|v| Replicates::of_mean(v, &draws).interval(spec.level, spec.method)).collect()
}

/// The text roles from the text metadata; every kind must be present and labels unique per kind.
fn read_texts(meta: &Metadata) -> Result<Texts, TableError> {
    let kind = meta.require_nonempty_column("kind")?;
    let label = meta.require_nonempty_column("label")?;
    let mut t = Texts {
        nationalities: vec![],
        nationality_cols: vec![],
        dimensions: vec![],
        dimension_cols: vec![],
        concepts_en: BTreeMap::new(),
    };
    let duplicate =
        |row: usize| TableError::invalid(meta.cell(row, "label"), "duplicated label for this kind");
    for row in 0..meta.n_rows() {
        let l = label[row].trim().to_string();
        match kind[row].trim() {
            "nationality" | "dimension" => {
                let (labels, cols) = if kind[row].trim() == "nationality" {
                    (&mut t.nationalities, &mut t.nationality_cols)
                } else {
                    (&mut t.dimensions, &mut t.dimension_cols)
                };
                if labels.contains(&l) {
                    return Err(duplicate(row));
                }
                labels.push(l);
                cols.push(row);
            }
            "concept" => {
                let language = meta.require_column("language")?;
                if language[row].trim() == "en" && t.concepts_en.insert(l, row).is_some() {
                    return Err(duplicate(row));
                }
            }
            other => {
                return Err(TableError::invalid(
                    meta.cell(row, "kind"),
                    format!("unknown text kind {other:?} (expected nationality, dimension or concept)"),
                ));
            }
        }
    }
    for (present, name) in [
        (!t.nationalities.is_empty(), "nationality"),
        (!t.dimensions.is_empty(), "dimension"),
        (!t.concepts_en.is_empty(), "concept (language en)"),
    ] {
        if !present {
            return Err(TableError::invalid(
                meta.location().column("kind"),
                format!("no {name} text: CulText2I needs nationality, dimension and English concept texts"),
            ));
        }
    }
    Ok(t)
}

/// Per image: its group key, its nationality's index and its English concept text's row.
fn read_images(meta: &Metadata, texts: &Texts) -> Result<ImageRoles, TableError> {
    let cols =
        ["model", "language", "concept", "template", "nationality"].map(|c| meta.require_nonempty_column(c));
    let [model, language, concept, template, nationality] = cols;
    let (model, language, concept, template, nationality) =
        (model?, language?, concept?, template?, nationality?);
    let (mut keys, mut truths, mut concepts) = (vec![], vec![], vec![]);
    for row in 0..meta.n_rows() {
        let n = nationality[row].trim();
        let truth = texts.nationalities.iter().position(|x| x == n).ok_or_else(|| {
            TableError::invalid(
                meta.cell(row, "nationality"),
                format!(
                    "nationality {n:?} has no nationality text (texts: {})",
                    texts.nationalities.join(", ")
                ),
            )
        })?;
        let c = concept[row].trim();
        let concept_col = *texts.concepts_en.get(c).ok_or_else(|| {
            TableError::invalid(
                meta.cell(row, "concept"),
                format!("concept {c:?} has no English (en) concept text"),
            )
        })?;
        keys.push((
            model[row].trim().to_string(),
            language[row].trim().to_string(),
            c.to_string(),
            template[row].trim().to_string(),
        ));
        truths.push(truth);
        concepts.push(concept_col);
    }
    Ok((keys, truths, concepts))
}

/// The cosine matrix of `a`'s rows against `b`'s, row-major, read back from `device`.
fn cosine_matrix(a: &Matrix, b: &Matrix, device: &Device) -> Vec<f32> {
    let upload =
        |m: &Matrix| Tensor::<2>::from_data(TensorData::new(m.data().to_vec(), [m.rows(), m.cols()]), device);
    let cos = cosine_tensor(upload(a), upload(b)).into_data();
    cos.convert::<f32>().try_to_vec::<f32>().expect("f32 data")
}

/// The `--report` of the images' scores.
fn build_report(
    images: &EmbeddingTable,
    keys: &[Key],
    truths: &[usize],
    scores: &[ImageScores],
    texts: &Texts,
    vqa: Option<&Metadata>,
    device: &Device,
) -> Result<Cultext2iReport, TableError> {
    let k = texts.nationalities.len();
    let mut per_model: BTreeMap<&str, Vec<(usize, usize)>> = BTreeMap::new();
    for (i, key) in keys.iter().enumerate() {
        per_model.entry(&key.0).or_default().push((truths[i], scores[i].predicted));
    }
    let confusion: BTreeMap<String, Confusion> =
        per_model.into_iter().map(|(m, pairs)| (m.to_string(), Confusion::of(pairs, k))).collect();

    // CCS: per (model, concept, template), the images by language.
    let mut sets: BTreeMap<(&str, &str, &str), BTreeMap<&str, Vec<usize>>> = BTreeMap::new();
    for (i, (model, language, concept, template)) in keys.iter().enumerate() {
        sets.entry((model, template, concept)).or_default().entry(language).or_default().push(i);
    }
    let mut sums: CcsSums = BTreeMap::new();
    for ((model, template, _), by_language) in &sets {
        let rows: Vec<usize> = by_language.values().flatten().copied().collect();
        let sub = images.embeddings.select_rows(&rows);
        let gram = cosine_matrix(&sub, &sub, device);
        let mut at = 0;
        let local: Vec<(&str, Vec<usize>)> = by_language
            .iter()
            .map(|(l, idx)| {
                let r = (at..at + idx.len()).collect();
                at += idx.len();
                (*l, r)
            })
            .collect();
        let entry = sums.entry((model, template)).or_default();
        for (l1, r1) in &local {
            for (l2, r2) in &local {
                if let Some(v) = ccs(&gram, rows.len(), r1, r2) {
                    let s = entry.entry((l1, l2)).or_insert((0.0, 0));
                    s.0 += v;
                    s.1 += 1;
                }
            }
        }
    }
    let ccs: Vec<CcsMatrix> = sums
        .iter()
        .map(|((model, template), pairs)| {
            let languages: Vec<&str> = sets
                .iter()
                .filter(|((m, t, _), _)| m == model && t == template)
                .flat_map(|(_, by)| by.keys().copied())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            let matrix: Vec<Vec<Option<f64>>> = languages
                .iter()
                .map(|l1| {
                    languages.iter().map(|l2| pairs.get(&(*l1, *l2)).map(|(s, c)| s / *c as f64)).collect()
                })
                .collect();
            CcsMatrix {
                ccs: matrix,
                languages: languages.iter().map(|l| l.to_string()).collect(),
                model: model.to_string(),
                template: template.to_string(),
            }
        })
        .collect();

    Ok(Cultext2iReport {
        ccs,
        confusion,
        dimensions: texts.dimensions.clone(),
        nationalities: texts.nationalities.clone(),
        vqa: vqa.map(vqa_scores).transpose()?,
    })
}

/// XNA and XDP from the VQA answers (see the conventions).
fn vqa_scores(meta: &Metadata) -> Result<Vec<VqaScore>, TableError> {
    let cols =
        ["model", "language", "concept", "template", "question"].map(|c| meta.require_nonempty_column(c));
    let [model, language, concept, template, question] = cols;
    let (model, language, concept, template, question) = (model?, language?, concept?, template?, question?);
    let answer = meta.require_column("answer")?;
    let norm = |s: &str| s.trim().to_lowercase();
    // (model, language, template, question) → concept → (answers, expected nationality).
    type Sets = BTreeMap<(String, String, String, String), BTreeMap<String, (Vec<String>, Option<String>)>>;
    let mut sets: Sets = BTreeMap::new();
    for row in 0..meta.n_rows() {
        let q = norm(&question[row]);
        let expected = if q == "nationality" {
            let n = norm(&meta.require_column("nationality")?[row]);
            if n.is_empty() {
                return Err(TableError::invalid(
                    meta.cell(row, "nationality"),
                    "an XNA row needs the expected nationality",
                ));
            }
            Some(n)
        } else if q.split('|').count() != 2 || q.split('|').any(|d| d.trim().is_empty()) {
            return Err(TableError::invalid(
                meta.cell(row, "question"),
                format!("unknown question {q:?} (expected nationality or d0|d1, e.g. modern|ancient)"),
            ));
        } else {
            None
        };
        let key = (model[row].trim().into(), language[row].trim().into(), template[row].trim().into(), q);
        let set = sets.entry(key).or_default().entry(concept[row].trim().into()).or_default();
        if set.1.is_some() && set.1 != expected {
            return Err(TableError::invalid(
                meta.cell(row, "nationality"),
                "one image set has two different nationalities",
            ));
        }
        set.1 = expected;
        set.0.push(norm(&answer[row]));
    }
    let rows: Vec<VqaScore> = sets
        .iter()
        .map(|((model, language, template, q), concepts)| {
            let majorities: Vec<(Option<&str>, Option<&str>)> = concepts
                .values()
                .map(|(answers, expected)| {
                    let a: Vec<&str> = answers.iter().map(String::as_str).collect();
                    (majority(&a), expected.as_deref())
                })
                .collect();
            let majority: BTreeMap<String, Option<String>> =
                concepts.keys().cloned().zip(majorities.iter().map(|m| m.0.map(str::to_string))).collect();
            let (metric, score) = if q == "nationality" {
                let pairs: Vec<(Option<&str>, &str)> =
                    majorities.iter().map(|(m, e)| (*m, e.expect("nationality rows carry one"))).collect();
                ("xna", xna(&pairs))
            } else {
                let (d0, d1) = q.split_once('|').expect("checked above");
                let m: Vec<Option<&str>> = majorities.iter().map(|m| m.0).collect();
                ("xdp", xdp(&m, d0.trim(), d1.trim()))
            };
            VqaScore {
                language: language.clone(),
                majority,
                metric: metric.to_string(),
                model: model.clone(),
                n_sets: concepts.len(),
                question: q.clone(),
                score,
                template: template.clone(),
            }
        })
        .collect();
    Ok(rows)
}
