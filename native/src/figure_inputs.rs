//! The inputs of the publication figures: the CLI's own result files, read through their schemas
//! (`culturelens-results`) and turned into the plain structs of `culturelens-figures`, shared by
//! `culturelens figures` (inputs named one by one) and `culturelens report` (inputs known by their
//! provenance in a run folder). [`write`] renders every figure as `NAME.svg` and `NAME.png`
//! (deterministic bytes, written atomically).
//!
//! | input                                   | figures                                             |
//! |-----------------------------------------|-----------------------------------------------------|
//! | `sos --out` (joint CSV)                 | `sos_heatmap[_MODEL][_layerL]`: culture × language, columns sorted by mean SoS (SoS Fig. 3), per layer present; for a model with several layers also `sos_layers_MODEL`: mean SoS per layer and language (Fig. 4) |
//! | `sos --report` (JSON)                   | `sos_distributions` (Fig. 2), `sos_pearson` (Fig. 5) |
//! | an embedding table or bundle            | `pca`: 2-D PCA coloured by a column (App. E)        |
//! | `vendi --out` (JSON, grouped or not)    | `vendi`: VS per group with ± sd bars (CUBE)         |
//! | `magbig --out` (CSV)                    | `magbig_MODEL`: MAD per language and set, `mad_random` dashed (MAGBIG Fig. 5) |
//! | `cultext2i --report` (JSON)             | `cultext2i_confusion_MODEL`: NA confusion, row shares (CulText2I) |
//! | `colour --out` (folder)                 | `colour_palettes[_GROUP]`, `colour_values[_GROUP]` (SoS App. F) |

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufReader;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use culturelens_figures::palette::Scale;
use culturelens_figures::svg::{fixed, num};
use culturelens_figures::{
    Bar, Bars, BoxStats, Distributions, Lines, Matrix, PaletteRow, Palettes, Scatter, bars, distributions,
    lines, matrix, palettes, png, scatter,
};
use culturelens_results::vendi::Order;
use culturelens_results::{CsvSchema, colour, cultext2i, magbig, sos, vendi};
use culturelens_table::{EmbeddingTable, write_atomic};

/// One rendered figure: its file stem and SVG text.
pub struct Figure {
    pub name: String,
    pub svg: String,
}

/// A file-name-safe stem: ASCII letters, digits, `.`, `-` and `_` kept, anything else `_`.
pub fn slug(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect()
}

/// `path` opened for a schema reader, and the name its errors give the file.
fn open(path: &Path) -> Result<(String, BufReader<std::fs::File>)> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok((path.display().to_string(), BufReader::new(file)))
}

/// The table of schema `S` in `path`: its columns and rows.
fn read_table<S: CsvSchema>(path: &Path) -> Result<(S::Columns, Vec<S::Row>)> {
    let (name, reader) = open(path)?;
    Ok(culturelens_results::read::<S>(&name, reader)?)
}

/// Mean of the values per key.
fn means<K: Ord>(pairs: impl IntoIterator<Item = (K, f64)>) -> BTreeMap<K, f64> {
    let mut sums: BTreeMap<K, (f64, usize)> = BTreeMap::new();
    for (k, v) in pairs {
        let s = sums.entry(k).or_insert((0.0, 0));
        s.0 += v;
        s.1 += 1;
    }
    sums.into_iter().map(|(k, (s, n))| (k, s / n as f64)).collect()
}

/// Layer names in numeric order when every one is an integer, else in text order.
fn sort_layers(layers: &mut [String]) {
    if layers.iter().all(|l| l.trim().parse::<i64>().is_ok()) {
        layers.sort_by_key(|l| l.trim().parse::<i64>().unwrap_or(0));
    } else {
        layers.sort();
    }
}

/// From the joint SoS CSV of `culturelens sos`: the culture × language heatmap (SoS Fig. 3) of
/// every layer present, and the per-layer lines (Fig. 4) of every model with several layers.
///
/// `sos_heatmap` is the mean over models, each model at its last layer (the pipeline's own
/// conditioning, which `generate` writes without `--text-layer`); with several models each also
/// gets `sos_heatmap_MODEL`. A model with several layers gets `sos_heatmap[_MODEL]_layerL` per
/// layer and `sos_layers_MODEL`; a table of one model swept over layers has no plain
/// `sos_heatmap` (it would repeat its last layer's).
pub fn sos_joint(path: &Path) -> Result<Vec<Figure>> {
    let (columns, joint) = read_table::<sos::Joint>(path)?;
    if joint.is_empty() {
        bail!("{}: no joint scores to draw", path.display());
    }
    let models: BTreeSet<&str> = joint.iter().map(|j| j.model.as_str()).collect();
    let layer = |j: &sos::JointScore| j.layer.clone().unwrap_or_default();
    // Each model's layers in layer order (one empty name without a `layer` column).
    let layers_of: BTreeMap<&str, Vec<String>> = models
        .iter()
        .map(|m| {
            let set: BTreeSet<String> = joint.iter().filter(|j| j.model == *m).map(layer).collect();
            let mut layers: Vec<String> = set.into_iter().collect();
            sort_layers(&mut layers);
            (*m, layers)
        })
        .collect();
    let several_models = models.len() > 1;
    let sweep = layers_of.values().any(|l| l.len() > 1);
    let at = |l: &str| if columns.layer { format!(", layer {l}") } else { String::new() };
    let mut figures = Vec::new();
    if several_models || !sweep {
        let last: Vec<&sos::JointScore> = joint
            .iter()
            .filter(|j| layers_of[j.model.as_str()].last().is_some_and(|l| *l == layer(j)))
            .collect();
        let title = match (several_models, sweep) {
            (true, false) => "Joint SoS, mean over models".to_string(),
            (true, true) => "Joint SoS, mean over models, each at its last layer".to_string(),
            (false, _) => format!("Joint SoS, {}{}", joint[0].model, at(&layer(&joint[0]))),
        };
        // A mean over models has no interval: hatching only where one model is drawn.
        let hatch = columns.ci && !several_models;
        figures.push(Figure { name: "sos_heatmap".into(), svg: sos_heatmap(title, &last, hatch) });
    }
    for m in &models {
        let layers = &layers_of[m];
        for l in layers.iter().filter(|_| several_models || layers.len() > 1) {
            let rows: Vec<&sos::JointScore> =
                joint.iter().filter(|j| j.model == *m && layer(j) == *l).collect();
            let mut name = "sos_heatmap".to_string();
            if several_models {
                name += &format!("_{}", slug(m));
            }
            if layers.len() > 1 {
                name += &format!("_layer{}", slug(l));
            }
            let svg = sos_heatmap(format!("Joint SoS, {m}{}", at(l)), &rows, columns.ci);
            figures.push(Figure { name, svg });
        }
        if layers.len() > 1 {
            let rows: Vec<&sos::JointScore> = joint.iter().filter(|j| j.model == *m).collect();
            let languages: BTreeSet<&str> = rows.iter().map(|j| j.language.as_str()).collect();
            let mean = means(rows.iter().map(|j| ((layer(j), j.language.as_str()), j.sos)));
            let lines_fig = Lines {
                title: format!("SoS per text-encoder layer, {m}"),
                x_label: "layer".into(),
                y_label: "mean SoS over cultures".into(),
                series: languages
                    .iter()
                    .map(|l| {
                        (l.to_string(), layers.iter().map(|x| mean.get(&(x.clone(), *l)).copied()).collect())
                    })
                    .collect(),
                x: layers.clone(),
            };
            figures.push(Figure { name: format!("sos_layers_{}", slug(m)), svg: lines(&lines_fig) });
        }
    }
    Ok(figures)
}

/// The culture × language heatmap of `rows` (cells averaged over models), columns sorted by
/// their mean SoS (SoS Fig. 3). With `hatch` (`rows` of one model and layer, from `sos --ci`), a
/// cell whose interval covers 0 is hatched: its sign is not established at the interval's level.
fn sos_heatmap(title: String, rows: &[&sos::JointScore], hatch: bool) -> String {
    let cell = means(rows.iter().map(|j| ((j.culture.as_str(), j.language.as_str()), j.sos)));
    let column_mean = means(cell.iter().map(|((_, l), v)| (*l, *v)));
    let mut cols: Vec<&str> = column_mean.keys().copied().collect();
    cols.sort_by(|a, b| column_mean[a].total_cmp(&column_mean[b]).then(a.cmp(b)));
    let cultures: BTreeSet<&str> = cell.keys().map(|(c, _)| *c).collect();
    let limit = cell.values().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-9);
    let covers_zero: BTreeSet<(&str, &str)> = rows
        .iter()
        .filter(|j| j.sos_ci.is_some_and(|i| i.lo <= 0.0 && 0.0 <= i.hi))
        .map(|j| (j.culture.as_str(), j.language.as_str()))
        .collect();
    let hatched = if hatch {
        cultures.iter().map(|c| cols.iter().map(|l| covers_zero.contains(&(*c, *l))).collect()).collect()
    } else {
        Vec::new()
    };
    let scale_label = if hatch { "SoS (hatched: interval covers 0)" } else { "SoS" };
    matrix(&Matrix {
        title,
        row_label: "culture".into(),
        col_label: "prompt language (sorted by mean SoS)".into(),
        values: cultures
            .iter()
            .map(|c| cols.iter().map(|l| cell.get(&(*c, *l)).copied()).collect())
            .collect(),
        rows: cultures.iter().map(|c| c.to_string()).collect(),
        cols: cols.iter().map(|c| c.to_string()).collect(),
        scale: Scale::Diverging { limit },
        scale_label: scale_label.into(),
        decimals: 2,
        hatched,
    })
}

/// From the `--report` JSON of `culturelens sos`: the per-model distributions and the language
/// × language Pearson matrix.
pub fn sos_report(path: &Path) -> Result<Vec<Figure>> {
    let (name, reader) = open(path)?;
    let report = sos::read_report(&name, reader)?;
    let groups = report
        .per_model
        .iter()
        .map(|(model, s)| BoxStats {
            label: model.clone(),
            n: s.n,
            min: s.min,
            q1: s.q1,
            median: s.median,
            q3: s.q3,
            max: s.max,
            mean: s.mean,
        })
        .collect();
    let mut figures = vec![Figure {
        name: "sos_distributions".into(),
        svg: distributions(&Distributions {
            title: "Per-output SoS by model".into(),
            x_label: "model".into(),
            y_label: "SoS".into(),
            groups,
        }),
    }];
    let corr = report.language_correlation;
    if !corr.languages.is_empty() {
        figures.push(Figure {
            name: "sos_pearson".into(),
            svg: matrix(&Matrix {
                title: "Pearson r of joint SoS between languages".into(),
                row_label: "prompt language".into(),
                col_label: "prompt language".into(),
                rows: corr.languages.clone(),
                cols: corr.languages,
                values: corr.r,
                scale: Scale::Diverging { limit: 1.0 },
                scale_label: "r".into(),
                decimals: 2,
                hatched: Vec::new(),
            }),
        });
    }
    Ok(figures)
}

/// The 2-D PCA of `table` coloured by `colour_by`, with the browser scatter's rule (`culturelens_view::pca`):
/// rows L2-normalised, the covariance of an evenly strided sample, its two leading eigenvectors by block
/// power iteration to convergence, every row projected (f64 on the host).
pub fn pca(table: &EmbeddingTable, colour_by: &str) -> Result<Figure> {
    let (n, d) = (table.len(), table.dim());
    let labels = table.meta.require_nonempty_column(colour_by)?;
    if n == 0 {
        bail!("the embedding table has no rows to draw");
    }
    let rows: Vec<Vec<f64>> = (0..n)
        .map(|r| {
            let row = &table.embeddings.data()[r * d..(r + 1) * d];
            let norm = row.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>().sqrt();
            if !(norm.is_finite() && norm > 0.0) {
                let at = table.meta.location().row(r);
                bail!("{at}: the embedding has zero or non-finite norm and cannot be projected");
            }
            Ok(row.iter().map(|v| f64::from(*v) / norm).collect())
        })
        .collect::<Result<_>>()?;
    let sample = culturelens_view::pca::sample_rows(n);
    let mean: Vec<f64> = (0..d)
        .map(|k| sample.iter().map(|&r| rows[r as usize][k]).sum::<f64>() / sample.len() as f64)
        .collect();
    let mut cov = vec![0.0; d * d];
    for &r in &sample {
        let c: Vec<f64> = rows[r as usize].iter().zip(&mean).map(|(x, m)| x - m).collect();
        for (row, ci) in cov.chunks_mut(d).zip(&c) {
            for (v, cj) in row.iter_mut().zip(&c) {
                *v += ci * cj;
            }
        }
    }
    let [v1, v2] = culturelens_view::pca::principal_axes(&cov, d);
    let categories: Vec<String> = labels.iter().cloned().collect::<BTreeSet<_>>().into_iter().collect();
    let points = rows
        .iter()
        .zip(labels)
        .map(|(row, label)| {
            let dot = |v: &[f64]| row.iter().zip(&mean).zip(v).map(|((x, m), a)| (x - m) * a).sum::<f64>();
            (dot(&v1), dot(&v2), categories.binary_search(label).expect("label is a category"))
        })
        .collect();
    Ok(Figure {
        name: "pca".into(),
        svg: scatter(&Scatter { title: format!("PCA of the embeddings by {colour_by}"), categories, points }),
    })
}

/// From the `--out` JSON of `culturelens vendi`: VS per group (one bar without `--group-by`),
/// with its bootstrap interval as the error bar when `--ci` gave `vs_ci`, else ± sd bars when
/// the CUBE protocol gave `vs_sd`.
pub fn vendi(path: &Path) -> Result<Figure> {
    let (name, reader) = open(path)?;
    let groups = vendi::read(&name, reader)?.groups();
    let q = groups
        .first()
        .map(|(_, v)| match v.q {
            Order::Finite(q) => num(q),
            Order::Infinity => "inf".to_string(),
        })
        .unwrap_or_default();
    let sd = |v: &vendi::VendiScores| v.protocol.map(|p| p.vs_sd);
    let bars_of = groups
        .iter()
        .map(|(_, v)| {
            let interval = v.vs_ci.map(|i| (i.lo, i.hi));
            vec![Some(Bar { value: v.vs, sd: sd(v), baseline: None, interval })]
        })
        .collect();
    let protocol = groups.iter().any(|(_, v)| v.protocol.is_some());
    let intervals = groups.iter().any(|(_, v)| v.vs_ci.is_some());
    Ok(Figure {
        name: "vendi".into(),
        svg: bars(&Bars {
            title: format!(
                "Vendi score (q = {q}) per group{}",
                match (intervals, protocol) {
                    (true, _) => ", bootstrap interval",
                    (false, true) => ", ± 1 sd over batches",
                    (false, false) => "",
                }
            ),
            x_label: "group".into(),
            y_label: "VS".into(),
            groups: groups.iter().map(|(g, _)| g.clone()).collect(),
            series: vec!["VS".into()],
            bars: bars_of,
            baseline_label: None,
        }),
    })
}

/// From the `--out` CSV of `culturelens magbig`: per model, MAD per language and set with the
/// fair-coin `mad_random` as a dashed tick, and with `--ci` its bootstrap interval as error bars.
pub fn magbig(path: &Path) -> Result<Vec<Figure>> {
    let (columns, rows) = read_table::<magbig::Magbig>(path)?;
    let mut cells: BTreeMap<(&str, &str, &str), Bar> = BTreeMap::new();
    for r in &rows {
        let interval = r.mad_ci.map(|i| (i.lo, i.hi));
        let bar = Bar { value: r.mad, sd: None, baseline: Some(r.mad_random), interval };
        cells.insert((r.model.as_str(), r.language.as_str(), r.set.as_str()), bar);
    }
    let models: BTreeSet<&str> = cells.keys().map(|k| k.0).collect();
    Ok(models
        .into_iter()
        .map(|m| {
            let languages: Vec<&str> =
                cells.keys().filter(|k| k.0 == m).map(|k| k.1).collect::<BTreeSet<_>>().into_iter().collect();
            let sets: Vec<&str> =
                cells.keys().filter(|k| k.0 == m).map(|k| k.2).collect::<BTreeSet<_>>().into_iter().collect();
            Figure {
                name: format!("magbig_{}", slug(m)),
                svg: bars(&Bars {
                    title: format!(
                        "MAGBIG MAD, {m}{}",
                        if columns.ci { ", bootstrap interval over prompts" } else { "" }
                    ),
                    x_label: "prompt language".into(),
                    y_label: "MAD".into(),
                    bars: languages
                        .iter()
                        .map(|l| sets.iter().map(|s| cells.get(&(m, *l, *s)).copied()).collect())
                        .collect(),
                    groups: languages.iter().map(|l| l.to_string()).collect(),
                    series: sets.iter().map(|s| s.to_string()).collect(),
                    baseline_label: Some("fair-coin baseline".into()),
                }),
            }
        })
        .collect())
}

/// From the `--report` JSON of `culturelens cultext2i`: per model, the NA confusion matrix as
/// row shares (true nationality × predicted nationality).
pub fn cultext2i(path: &Path) -> Result<Vec<Figure>> {
    let (name, reader) = open(path)?;
    let report = cultext2i::read_report(&name, reader)?;
    let names = &report.nationalities;
    Ok(report
        .confusion
        .iter()
        .map(|(model, c)| {
            let values: Vec<Vec<Option<f64>>> = c
                .counts
                .iter()
                .map(|row| {
                    let total: usize = row.iter().sum();
                    row.iter().map(|v| (total > 0).then(|| *v as f64 / total as f64)).collect()
                })
                .collect();
            let accuracy = c.accuracy.map(|a| format!(" (accuracy {})", fixed(a, 2))).unwrap_or_default();
            Figure {
                name: format!("cultext2i_confusion_{}", slug(model)),
                svg: matrix(&Matrix {
                    title: format!("CulText2I NA confusion, {model}{accuracy}"),
                    row_label: "true nationality".into(),
                    col_label: "predicted nationality".into(),
                    rows: names.clone(),
                    cols: names.clone(),
                    values,
                    scale: Scale::Sequential { lo: 0.0, hi: 1.0 },
                    scale_label: "share".into(),
                    decimals: 2,
                    hatched: Vec::new(),
                }),
            }
        })
        .collect())
}

/// A colour table row's (figure suffix, row label): split by the first group column when there
/// are several (one figure each, labelled by the rest).
fn split_group(group: &[String]) -> (String, String) {
    match group.split_first() {
        Some((first, rest)) if !rest.is_empty() => (first.clone(), rest.join(" · ")),
        _ => (String::new(), group.join(" · ")),
    }
}

fn suffixed(stem: &str, suffix: &str) -> String {
    if suffix.is_empty() { stem.to_string() } else { format!("{stem}_{}", slug(suffix)) }
}

/// A value histogram: (bin label, share) in bin order.
type Bins = Vec<(String, f64)>;

/// From the folder of `culturelens colour`: the palettes ([`colour::PALETTES`]) and the HSV value
/// distributions ([`colour::VALUES`]), one figure per value of the first group column when there
/// are several group columns.
pub fn colour(dir: &Path) -> Result<Vec<Figure>> {
    let mut figures = Vec::new();
    let (_, rows) = read_table::<colour::Palettes>(&dir.join(colour::PALETTES))?;
    let mut by: BTreeMap<String, Vec<PaletteRow>> = BTreeMap::new();
    for row in &rows {
        let (figure, label) = split_group(&row.group);
        let (hex, share) = (row.colour.hex.clone(), row.colour.share);
        let rows = by.entry(figure).or_default();
        match rows.last_mut() {
            Some(last) if last.label == label => last.colours.push((hex, share)),
            _ => rows.push(PaletteRow { label, colours: vec![(hex, share)] }),
        }
    }
    for (figure, rows) in by {
        let title = if figure.is_empty() {
            "Dominant colours".to_string()
        } else {
            format!("Dominant colours, {figure}")
        };
        figures.push(Figure {
            name: suffixed("colour_palettes", &figure),
            svg: palettes(&Palettes { title, rows }),
        });
    }
    let (_, rows) = read_table::<colour::Values>(&dir.join(colour::VALUES))?;
    let mut by: BTreeMap<String, BTreeMap<String, Bins>> = BTreeMap::new();
    for row in &rows {
        let (figure, label) = split_group(&row.group);
        let bin = format!("{}–{}", fixed(row.v_lo, 2), fixed(row.v_hi, 2));
        by.entry(figure).or_default().entry(label).or_default().push((bin, row.share));
    }
    for (figure, series) in by {
        let x: Vec<String> =
            series.values().next().map(|s| s.iter().map(|(b, _)| b.clone()).collect()).unwrap_or_default();
        let title = if figure.is_empty() {
            "HSV value of the dominant colours".to_string()
        } else {
            format!("HSV value of the dominant colours, {figure}")
        };
        let series: Vec<(String, Vec<Option<f64>>)> = series
            .into_iter()
            .map(|(label, bins)| {
                (label, x.iter().map(|b| bins.iter().find(|(bb, _)| bb == b).map(|(_, s)| *s)).collect())
            })
            .collect();
        figures.push(Figure {
            name: suffixed("colour_values", &figure),
            svg: lines(&Lines {
                title,
                x_label: "HSV value V (bin)".into(),
                y_label: "share".into(),
                x,
                series,
            }),
        });
    }
    Ok(figures)
}

/// Writes every figure as `DIR/NAME.svg` and `DIR/NAME.png` (PNG at `scale` × the SVG size),
/// each atomically, after rendering all of them (a figure that fails leaves no new file).
/// Returns the written paths.
pub fn write(dir: &Path, figures: &[Figure], scale: f32) -> Result<Vec<PathBuf>> {
    let mut names = BTreeSet::new();
    for f in figures {
        if !names.insert(&f.name) {
            bail!("two figures would both be named {}: rename a model or group", f.name);
        }
    }
    let pngs: Vec<Vec<u8>> = figures
        .iter()
        .map(|f| png(&f.svg, scale, &[]).with_context(|| format!("cannot render {}", f.name)))
        .collect::<Result<_>>()?;
    culturelens_files::create_dir_all(dir)?;
    let mut written = Vec::new();
    for (f, png) in figures.iter().zip(pngs) {
        for (ext, bytes) in [("svg", f.svg.as_bytes()), ("png", png.as_slice())] {
            let path = dir.join(format!("{}.{ext}", f.name));
            write_atomic(&path, |w| w.write_all(bytes))?;
            written.push(path);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_and_layer_order() {
        assert_eq!(slug("openai/clip-vit@main"), "openai_clip-vit_main");
        let mut layers = vec!["10".to_string(), "2".into(), "0".into()];
        sort_layers(&mut layers);
        assert_eq!(layers, ["0", "2", "10"]);
    }

    #[test]
    fn heatmap_columns_are_sorted_by_mean_and_cells_averaged_over_models() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sos.csv");
        std::fs::write(
            &path,
            "model,language,culture,n,sos\nA,en,Japan,1,0.5\nB,en,Japan,1,0.1\nA,ja,Japan,1,-0.2\nB,ja,Japan,1,-0.4\n",
        )
        .unwrap();
        let figures = sos_joint(&path).unwrap();
        let names: Vec<&str> = figures.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["sos_heatmap", "sos_heatmap_A", "sos_heatmap_B"]);
        let svg = &figures[0].svg;
        // mean over models: en 0.3, ja -0.3; ja (lower mean) is the first column.
        assert!(svg.contains(">0.30<") && svg.contains(">-0.30<"));
        assert!(svg.find(">ja<").unwrap() < svg.find(">en<").unwrap());
    }

    /// `generate` always writes a `layer` column: a table with one layer per model is drawn as
    /// the SoS heatmap (Fig. 3), not as a one-point "per layer" plot; a model with several
    /// layers gets one heatmap per layer and the layer plot (Fig. 4).
    #[test]
    fn the_heatmap_is_drawn_per_layer_and_the_layer_plot_only_for_several_layers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sos.csv");
        let header = "model,layer,language,culture,n,sos\n";
        std::fs::write(&path, format!("{header}m,12,en,Japan,1,0.5\nm,12,ja,Japan,1,-0.2\n")).unwrap();
        let figures = sos_joint(&path).unwrap();
        let names: Vec<&str> = figures.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["sos_heatmap"]);
        assert!(figures[0].svg.contains("Joint SoS, m, layer 12"), "{}", figures[0].svg);

        // Two models, each at its own (last) layer: the mean over models and one per model.
        let two = "A,12,en,Japan,1,0.5\nA,12,ja,Japan,1,-0.2\nB,23,en,Japan,1,0.1\nB,23,ja,Japan,1,-0.4\n";
        std::fs::write(&path, format!("{header}{two}")).unwrap();
        let names: Vec<String> = sos_joint(&path).unwrap().into_iter().map(|f| f.name).collect();
        assert_eq!(names, ["sos_heatmap", "sos_heatmap_A", "sos_heatmap_B"]);

        // One model swept over layers 2 and 10: a heatmap per layer, then the layer plot.
        let sweep = "m,10,en,Japan,1,0.5\nm,10,ja,Japan,1,-0.2\nm,2,en,Japan,1,0.1\nm,2,ja,Japan,1,-0.4\n";
        std::fs::write(&path, format!("{header}{sweep}")).unwrap();
        let figures = sos_joint(&path).unwrap();
        let names: Vec<&str> = figures.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["sos_heatmap_layer2", "sos_heatmap_layer10", "sos_layers_m"]);
        assert!(figures[0].svg.contains(">-0.40<") && figures[1].svg.contains(">0.50<"));
    }

    /// SoS of random-weight models is of the order 1e-4: the cells and the colour bar keep two
    /// significant digits instead of printing "0.00" and "0, 0, 0".
    #[test]
    fn small_scores_keep_their_significant_digits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sos.csv");
        let rows = "m,en,Japan,1,-0.00011638\nm,ja,Japan,1,0.0000624\n";
        std::fs::write(&path, format!("model,language,culture,n,sos\n{rows}")).unwrap();
        let svg = &sos_joint(&path).unwrap()[0].svg;
        assert!(svg.contains(">-0.00012<") && svg.contains(">0.000062<"), "{svg}");
        // The colour bar: ±limit and 0.
        assert!(svg.contains(">0.00012<") && svg.contains(">0<"), "{svg}");
        assert!(!svg.contains(">0.00<") && !svg.contains(">-0<"), "{svg}");
    }

    #[test]
    fn bad_number_names_file_row_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("magbig.csv");
        let header = culturelens_results::magbig::HEADER.join(",");
        std::fs::write(&path, format!("{header}\nm,en,s,1,2,0.5,0.1,0.5\nm,de,s,1,2,x,0.1,0.5\n")).unwrap();
        let err = format!("{:#}", magbig(&path).err().unwrap());
        assert!(err.contains("magbig.csv") && err.contains("mad") && err.contains("`x`"), "{err}");
        assert!(err.contains('3') || err.contains('2'), "{err}");
    }
}
