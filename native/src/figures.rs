//! Publication figures from the CLI's own output tables, shared by `culturelens figures` (inputs
//! named one by one) and `culturelens report` (inputs found in a run folder). Each reader turns
//! one output of one subcommand into the plain structs of `culturelens-figures`; [`write`]
//! renders every figure as `NAME.svg` and `NAME.png` (deterministic bytes, written atomically).
//!
//! | input                                   | figures                                             |
//! |-----------------------------------------|-----------------------------------------------------|
//! | `sos --out` (joint CSV)                 | `sos_heatmap[_MODEL]`: culture × language, columns sorted by mean SoS (SoS Fig. 3); with a `layer` column `sos_layers_MODEL`: mean SoS per layer and language (Fig. 4) |
//! | `sos --report` (JSON)                   | `sos_distributions` (Fig. 2), `sos_pearson` (Fig. 5) |
//! | an embedding table or bundle            | `pca`: 2-D PCA coloured by a column (App. E)        |
//! | `vendi --out` (JSON, grouped or not)    | `vendi`: VS per group with ± sd bars (CUBE)         |
//! | `magbig --out` (CSV)                    | `magbig_MODEL`: MAD per language and set, `mad_random` dashed (MAGBIG Fig. 5) |
//! | `cultext2i --report` (JSON)             | `cultext2i_confusion_MODEL`: NA confusion, row shares (CulText2I) |
//! | `colour --out` (folder)                 | `colour_palettes[_GROUP]`, `colour_values[_GROUP]` (SoS App. F) |

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use culturelens_figures::palette::Scale;
use culturelens_figures::svg::{fixed, num};
use culturelens_figures::{
    Bar, Bars, BoxStats, Distributions, Lines, Matrix, PaletteRow, Palettes, Scatter, bars, distributions,
    lines, matrix, palettes, png, scatter,
};
use culturelens_table::{EmbeddingTable, Metadata, TableError, read_metadata_csv, write_atomic};
use serde_json::Value;

/// One rendered figure: its file stem and SVG text.
pub struct Figure {
    pub name: String,
    pub svg: String,
}

/// A file-name-safe stem: ASCII letters, digits, `.`, `-` and `_` kept, anything else `_`.
pub fn slug(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect()
}

fn read_csv(path: &Path) -> Result<Metadata> {
    Ok(read_metadata_csv(path)?)
}

/// The finite number in `column` of `row`; the error names file, row, line and column.
fn number(meta: &Metadata, row: usize, column: &str) -> Result<f64, TableError> {
    let text = meta.require_column(column)?[row].trim();
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(TableError::invalid(
            meta.cell(row, column),
            format!("expected a finite number, got `{text}`"),
        )),
    }
}

fn read_json(path: &Path) -> Result<Value> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("{}: not valid JSON", path.display()))
}

/// `value[key]` as a finite number; the error names the file and the JSON path.
fn json_number(value: &Value, path: &Path, at: &str) -> Result<f64> {
    value
        .as_f64()
        .filter(|v| v.is_finite())
        .with_context(|| format!("{}: {at} must be a number", path.display()))
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

/// From the joint SoS CSV of `culturelens sos`: the culture × language heatmap(s), or with a
/// `layer` column the per-layer lines of every model.
pub fn sos_joint(path: &Path) -> Result<Vec<Figure>> {
    let meta = read_csv(path)?;
    let (model, language, culture) = (
        meta.require_nonempty_column("model")?,
        meta.require_nonempty_column("language")?,
        meta.require_nonempty_column("culture")?,
    );
    let sos: Vec<f64> = (0..meta.n_rows()).map(|r| number(&meta, r, "sos")).collect::<Result<_, _>>()?;
    if meta.n_rows() == 0 {
        bail!("{}: no joint scores to draw", path.display());
    }
    if let Some(layer) = meta.column("layer") {
        let models: BTreeSet<&str> = model.iter().map(String::as_str).collect();
        let mut figures = Vec::new();
        for m in models {
            let rows: Vec<usize> = (0..meta.n_rows()).filter(|&r| model[r] == m).collect();
            let mut layers: Vec<String> =
                rows.iter().map(|&r| layer[r].clone()).collect::<BTreeSet<_>>().into_iter().collect();
            sort_layers(&mut layers);
            let languages: BTreeSet<&str> = rows.iter().map(|&r| language[r].as_str()).collect();
            let mean = means(rows.iter().map(|&r| ((layer[r].as_str(), language[r].as_str()), sos[r])));
            let lines_fig = Lines {
                title: format!("SoS per text-encoder layer, {m}"),
                x_label: "layer".into(),
                y_label: "mean SoS over cultures".into(),
                series: languages
                    .iter()
                    .map(|l| {
                        (l.to_string(), layers.iter().map(|x| mean.get(&(x.as_str(), *l)).copied()).collect())
                    })
                    .collect(),
                x: layers,
            };
            figures.push(Figure { name: format!("sos_layers_{}", slug(m)), svg: lines(&lines_fig) });
        }
        return Ok(figures);
    }
    let models: BTreeSet<&str> = model.iter().map(String::as_str).collect();
    let heatmap = |title: String, rows: &[usize]| {
        let cell = means(rows.iter().map(|&r| ((culture[r].as_str(), language[r].as_str()), sos[r])));
        let column_mean = means(cell.iter().map(|((_, l), v)| (*l, *v)));
        let mut cols: Vec<&str> = column_mean.keys().copied().collect();
        cols.sort_by(|a, b| column_mean[a].total_cmp(&column_mean[b]).then(a.cmp(b)));
        let cultures: BTreeSet<&str> = cell.keys().map(|(c, _)| *c).collect();
        let limit = cell.values().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-9);
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
            scale_label: "SoS".into(),
            decimals: 2,
        })
    };
    let all: Vec<usize> = (0..meta.n_rows()).collect();
    let mut figures = vec![Figure {
        name: "sos_heatmap".into(),
        svg: heatmap(
            if models.len() > 1 {
                "Joint SoS, mean over models".into()
            } else {
                format!("Joint SoS, {}", model[0])
            },
            &all,
        ),
    }];
    if models.len() > 1 {
        for m in models {
            let rows: Vec<usize> = all.iter().copied().filter(|&r| model[r] == m).collect();
            figures.push(Figure {
                name: format!("sos_heatmap_{}", slug(m)),
                svg: heatmap(format!("Joint SoS, {m}"), &rows),
            });
        }
    }
    Ok(figures)
}

/// From the `--report` JSON of `culturelens sos`: the per-model distributions and the language
/// × language Pearson matrix.
pub fn sos_report(path: &Path) -> Result<Vec<Figure>> {
    let json = read_json(path)?;
    let per_model = json["per_model"]
        .as_object()
        .with_context(|| format!("{}: no `per_model` object", path.display()))?;
    let groups = per_model
        .iter()
        .map(|(model, s)| {
            let f = |key: &str| json_number(&s[key], path, &format!("per_model.{model}.{key}"));
            Ok(BoxStats {
                label: model.clone(),
                n: s["n"]
                    .as_u64()
                    .with_context(|| format!("{}: per_model.{model}.n must be a count", path.display()))?
                    as usize,
                min: f("min")?,
                q1: f("q1")?,
                median: f("median")?,
                q3: f("q3")?,
                max: f("max")?,
                mean: f("mean")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut figures = vec![Figure {
        name: "sos_distributions".into(),
        svg: distributions(&Distributions {
            title: "Per-output SoS by model".into(),
            x_label: "model".into(),
            y_label: "SoS".into(),
            groups,
        }),
    }];
    let corr = &json["language_correlation"];
    let languages: Vec<String> = corr["languages"]
        .as_array()
        .with_context(|| format!("{}: no `language_correlation.languages`", path.display()))?
        .iter()
        .map(|l| l.as_str().map(str::to_string))
        .collect::<Option<_>>()
        .with_context(|| format!("{}: language names must be strings", path.display()))?;
    let values: Vec<Vec<Option<f64>>> = (0..languages.len())
        .map(|i| (0..languages.len()).map(|j| corr["r"][i][j].as_f64()).collect())
        .collect();
    if !languages.is_empty() {
        figures.push(Figure {
            name: "sos_pearson".into(),
            svg: matrix(&Matrix {
                title: "Pearson r of joint SoS between languages".into(),
                row_label: "prompt language".into(),
                col_label: "prompt language".into(),
                rows: languages.clone(),
                cols: languages,
                values,
                scale: Scale::Diverging { limit: 1.0 },
                scale_label: "r".into(),
                decimals: 2,
            }),
        });
    }
    Ok(figures)
}

/// The 2-D PCA of `table` coloured by `colour_by`, with the browser scatter's rule
/// (`culturelens_view::pca`): rows L2-normalised, the covariance of an evenly strided sample,
/// its two leading eigenvectors by power iteration, every row projected (f64 on the host).
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
/// with ± sd bars when the CUBE protocol gave `vs_sd`.
pub fn vendi(path: &Path) -> Result<Figure> {
    let json = read_json(path)?;
    let object =
        json.as_object().with_context(|| format!("{}: not a Vendi result object", path.display()))?;
    let groups: Vec<(String, &Value)> = if object.contains_key("vs") {
        vec![("all".to_string(), &json)]
    } else {
        object.iter().map(|(k, v)| (k.clone(), v)).collect()
    };
    let q = groups
        .first()
        .map(|(_, v)| v["q"].as_f64().map_or_else(|| v["q"].as_str().unwrap_or("?").to_string(), num))
        .unwrap_or_default();
    let bars_of = groups
        .iter()
        .map(|(name, v)| {
            Ok(vec![Some(Bar {
                value: json_number(&v["vs"], path, &format!("{name}.vs"))?,
                sd: v["vs_sd"].as_f64(),
                baseline: None,
            })])
        })
        .collect::<Result<Vec<_>>>()?;
    let protocol = groups.iter().any(|(_, v)| v["vs_sd"].is_number());
    Ok(Figure {
        name: "vendi".into(),
        svg: bars(&Bars {
            title: format!(
                "Vendi score (q = {q}) per group{}",
                if protocol { ", ± 1 sd over batches" } else { "" }
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
/// fair-coin `mad_random` as a dashed tick.
pub fn magbig(path: &Path) -> Result<Vec<Figure>> {
    let meta = read_csv(path)?;
    let (model, language, set) = (
        meta.require_nonempty_column("model")?,
        meta.require_nonempty_column("language")?,
        meta.require_nonempty_column("set")?,
    );
    let mut cells: BTreeMap<(&str, &str, &str), Bar> = BTreeMap::new();
    for r in 0..meta.n_rows() {
        let bar = Bar {
            value: number(&meta, r, "mad")?,
            sd: None,
            baseline: Some(number(&meta, r, "mad_random")?),
        };
        cells.insert((model[r].as_str(), language[r].as_str(), set[r].as_str()), bar);
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
                    title: format!("MAGBIG MAD, {m}"),
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
    let json = read_json(path)?;
    let names: Vec<String> = json["nationalities"]
        .as_array()
        .and_then(|a| a.iter().map(|v| v.as_str().map(str::to_string)).collect())
        .with_context(|| format!("{}: no `nationalities` list of strings", path.display()))?;
    let confusion = json["confusion"]
        .as_object()
        .with_context(|| format!("{}: no `confusion` object", path.display()))?;
    confusion
        .iter()
        .map(|(model, c)| {
            let counts: Vec<Vec<f64>> = (0..names.len())
                .map(|t| {
                    (0..names.len())
                        .map(|p| {
                            json_number(
                                &c["counts"][t][p],
                                path,
                                &format!("confusion.{model}.counts[{t}][{p}]"),
                            )
                        })
                        .collect::<Result<Vec<f64>>>()
                })
                .collect::<Result<_>>()?;
            let values: Vec<Vec<Option<f64>>> = counts
                .iter()
                .map(|row| {
                    let total: f64 = row.iter().sum();
                    row.iter().map(|v| (total > 0.0).then(|| v / total)).collect()
                })
                .collect();
            let accuracy =
                c["accuracy"].as_f64().map(|a| format!(" (accuracy {})", fixed(a, 2))).unwrap_or_default();
            Ok(Figure {
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
                }),
            })
        })
        .collect()
}

/// The group columns of a colour table: every column before `n_images`.
fn group_columns(meta: &Metadata, path: &Path) -> Result<Vec<String>> {
    let names = meta.names();
    let end = names
        .iter()
        .position(|n| n == "n_images")
        .with_context(|| format!("{}: no `n_images` column", path.display()))?;
    Ok(names[..end].to_vec())
}

/// Rows of a colour table split by the first group column when there are several (one figure
/// each, labelled by the rest), keyed by (figure suffix, row label).
fn split_groups(meta: &Metadata, columns: &[String]) -> Result<Vec<(String, String)>> {
    let cols: Vec<&[String]> = columns.iter().map(|c| meta.require_column(c)).collect::<Result<_, _>>()?;
    Ok((0..meta.n_rows())
        .map(|r| {
            let key: Vec<&str> = cols.iter().map(|c| c[r].as_str()).collect();
            match key.split_first() {
                Some((first, rest)) if !rest.is_empty() => (first.to_string(), rest.join(" · ")),
                _ => (String::new(), key.join(" · ")),
            }
        })
        .collect())
}

fn suffixed(stem: &str, suffix: &str) -> String {
    if suffix.is_empty() { stem.to_string() } else { format!("{stem}_{}", slug(suffix)) }
}

/// A value histogram: (bin label, share) in bin order.
type Bins = Vec<(String, f64)>;

/// From the folder of `culturelens colour`: the palettes (`palettes.csv`) and the HSV value
/// distributions (`values.csv`), one figure per value of the first group column when there are
/// several group columns.
pub fn colour(dir: &Path) -> Result<Vec<Figure>> {
    let mut figures = Vec::new();
    let path = dir.join("palettes.csv");
    let meta = read_csv(&path)?;
    let keys = split_groups(&meta, &group_columns(&meta, &path)?)?;
    let hex = meta.require_nonempty_column("hex")?;
    let mut by: BTreeMap<&str, Vec<PaletteRow>> = BTreeMap::new();
    for (r, (figure, label)) in keys.iter().enumerate() {
        let share = number(&meta, r, "share")?;
        let rows = by.entry(figure.as_str()).or_default();
        match rows.last_mut() {
            Some(last) if &last.label == label => last.colours.push((hex[r].clone(), share)),
            _ => rows.push(PaletteRow { label: label.clone(), colours: vec![(hex[r].clone(), share)] }),
        }
    }
    for (figure, rows) in by {
        let title = if figure.is_empty() {
            "Dominant colours".to_string()
        } else {
            format!("Dominant colours, {figure}")
        };
        figures.push(Figure {
            name: suffixed("colour_palettes", figure),
            svg: palettes(&Palettes { title, rows }),
        });
    }
    let path = dir.join("values.csv");
    let meta = read_csv(&path)?;
    let keys = split_groups(&meta, &group_columns(&meta, &path)?)?;
    let mut by: BTreeMap<&str, BTreeMap<&str, Bins>> = BTreeMap::new();
    for (r, (figure, label)) in keys.iter().enumerate() {
        let bin = format!("{}–{}", fixed(number(&meta, r, "v_lo")?, 2), fixed(number(&meta, r, "v_hi")?, 2));
        by.entry(figure.as_str())
            .or_default()
            .entry(label.as_str())
            .or_default()
            .push((bin, number(&meta, r, "share")?));
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
                (
                    label.to_string(),
                    x.iter().map(|b| bins.iter().find(|(bb, _)| bb == b).map(|(_, s)| *s)).collect(),
                )
            })
            .collect();
        figures.push(Figure {
            name: suffixed("colour_values", figure),
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
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
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

    #[test]
    fn bad_number_names_file_row_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("magbig.csv");
        std::fs::write(&path, "model,language,set,mad,mad_random\nm,en,s,0.5,0.1\nm,de,s,x,0.1\n").unwrap();
        let err = format!("{:#}", magbig(&path).err().unwrap());
        assert!(err.contains("magbig.csv") && err.contains("mad") && err.contains("`x`"), "{err}");
        assert!(err.contains('3') || err.contains('2'), "{err}");
    }
}
