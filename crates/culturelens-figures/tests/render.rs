//! Every figure type rendered from a small hand-made table: the geometry that carries the numbers
//! (bar heights, whiskers, baselines, box quartiles, cell colours and labels, point and vertex
//! positions) is read back from the SVG through the figure's own labelled axes and compared with
//! the input values (module `geometry`); the SVG's structure (elements,
//! labels, colours) is checked, the PNG is compared with the committed reference in
//! `tests/fixtures/figures/` within a tolerance, and two renders give identical bytes.
//! `CULTURELENS_BLESS=1 cargo test -p culturelens-figures --test render` rewrites the references
//! (look at every one before committing).

use std::collections::BTreeSet;
use std::path::PathBuf;

use culturelens_figures::palette::{OKABE_ITO, Scale};
use culturelens_figures::*;
use resvg::tiny_skia::Pixmap;

fn reference(name: &str) -> PathBuf {
    culturelens_testkit::fixture(&format!("figures/{name}.png"))
}

fn count(svg: &str, needle: &str) -> usize {
    svg.matches(needle).count()
}

/// The distinct `fill` colours of the `<rect>`, `<circle>` and `<polygon>` elements.
fn fills(svg: &str) -> BTreeSet<String> {
    svg.lines()
        .filter(|l| l.starts_with("<rect") || l.starts_with("<circle") || l.starts_with("<polygon"))
        .filter_map(|l| l.split("fill=\"").nth(1).and_then(|r| r.split('"').next()).map(str::to_string))
        .collect()
}

/// Renders at scale 1, checks determinism and compares with the reference: at most 0.5 % of the
/// pixels may differ by more than 48 in any channel (anti-aliasing and float round-off between
/// machines), and the mean absolute difference must stay below 1.0.
fn check_png(name: &str, svg: &str) {
    let png1 = png(svg, 1.0, &[]).unwrap();
    let png2 = png(svg, 1.0, &[]).unwrap();
    assert_eq!(png1, png2, "{name}: the same SVG gives the same PNG bytes");
    let path = reference(name);
    if std::env::var_os("CULTURELENS_BLESS").is_some() {
        std::fs::write(&path, &png1).unwrap();
        return;
    }
    let want =
        Pixmap::decode_png(&std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
            .unwrap();
    let got = Pixmap::decode_png(&png1).unwrap();
    assert_eq!((got.width(), got.height()), (want.width(), want.height()), "{name}: size");
    let (mut far, mut sum) = (0usize, 0u64);
    for (a, b) in got.data().chunks(4).zip(want.data().chunks(4)) {
        let d = a.iter().zip(b).map(|(x, y)| x.abs_diff(*y)).max().unwrap();
        far += usize::from(d > 48);
        sum += a.iter().zip(b).map(|(x, y)| u64::from(x.abs_diff(*y))).sum::<u64>();
    }
    let pixels = (got.width() * got.height()) as usize;
    let mean = sum as f64 / (4 * pixels) as f64;
    assert!(far * 200 <= pixels && mean < 1.0, "{name}: {far} of {pixels} pixels differ, mean {mean}");
}

fn heatmap() -> Matrix {
    Matrix {
        title: "SoS, all models".into(),
        row_label: "culture".into(),
        col_label: "prompt language (sorted by mean SoS)".into(),
        rows: vec!["Ethiopia".into(), "India".into(), "Japan".into()],
        cols: vec!["am".into(), "hi".into(), "ja".into(), "en".into()],
        values: vec![
            vec![Some(-0.31), Some(-0.12), Some(0.02), None],
            vec![Some(-0.25), Some(0.05), Some(-0.04), Some(0.1)],
            vec![Some(-0.2), Some(-0.08), Some(0.22), Some(0.08)],
        ],
        scale: Scale::Diverging { limit: 0.31 },
        scale_label: "SoS".into(),
        decimals: 2,
        hatched: Vec::new(),
    }
}

#[test]
fn sos_heatmap() {
    let m = heatmap();
    let svg = matrix(&m);
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    // background + 12 cells + 32 colour-bar steps + the bar's frame
    assert_eq!(count(&svg, "<rect"), 1 + 12 + 32 + 1);
    for label in
        ["Ethiopia", "India", "Japan", ">am<", ">hi<", ">ja<", ">en<", ">n/a<", ">-0.31<", ">0.22<", "SoS"]
    {
        assert!(svg.contains(label), "{label} missing");
    }
    // The extremes take the diverging scale's end colours, 0.02 is near white.
    assert!(svg.contains("fill=\"#7f3b08\""));
    assert!(svg.contains(&format!("fill=\"{}\"", Scale::Diverging { limit: 0.31 }.color(0.02))));
    assert_eq!(svg, matrix(&m), "deterministic SVG");
    check_png("sos_heatmap", &svg);
}

#[test]
fn pearson_matrix_and_na_matrix() {
    let langs: Vec<String> = ["en", "ar", "zh"].map(String::from).to_vec();
    let pearson = Matrix {
        title: "Pearson r of joint SoS between languages".into(),
        row_label: "language".into(),
        col_label: "language".into(),
        rows: langs.clone(),
        cols: langs.clone(),
        values: vec![
            vec![Some(1.0), Some(0.42), Some(-0.3)],
            vec![Some(0.42), Some(1.0), None],
            vec![Some(-0.3), None, Some(1.0)],
        ],
        scale: Scale::Diverging { limit: 1.0 },
        scale_label: "r".into(),
        decimals: 2,
        hatched: Vec::new(),
    };
    let svg = matrix(&pearson);
    assert_eq!(count(&svg, ">n/a<"), 2);
    assert_eq!(count(&svg, ">1.00<"), 3);
    check_png("pearson", &svg);

    let na = Matrix {
        title: "CulText2I NA: SD, Translated Concept".into(),
        row_label: "ground-truth language".into(),
        col_label: "predicted culture".into(),
        rows: vec!["ru".into(), "am".into(), "hi".into()],
        cols: vec!["Russia".into(), "Ethiopia".into(), "India".into()],
        values: vec![
            vec![Some(0.7), Some(0.1), Some(0.2)],
            vec![Some(0.3), Some(0.5), Some(0.2)],
            vec![Some(0.0), Some(0.1), Some(0.9)],
        ],
        scale: Scale::Sequential { lo: 0.0, hi: 1.0 },
        scale_label: "share".into(),
        decimals: 2,
        hatched: Vec::new(),
    };
    let svg = matrix(&na);
    assert!(svg.contains("fill=\"#440154\""), "0 takes viridis' first stop");
    assert!(svg.contains(">predicted culture<") && svg.contains(">ground-truth language<"));
    check_png("na_matrix", &svg);
}

#[test]
fn per_model_distributions() {
    let d = Distributions {
        title: "Per-output SoS by model".into(),
        x_label: "model".into(),
        y_label: "SoS".into(),
        groups: vec![
            BoxStats {
                label: "sd-2.1".into(),
                n: 120,
                min: -0.4,
                q1: -0.2,
                median: -0.1,
                q3: 0.0,
                max: 0.2,
                mean: -0.12,
            },
            BoxStats {
                label: "flux".into(),
                n: 120,
                min: -0.2,
                q1: -0.05,
                median: 0.03,
                q3: 0.1,
                max: 0.3,
                mean: 0.04,
            },
        ],
    };
    let svg = distributions(&d);
    // one box per model plus the white mean diamonds (one per model and the legend's)
    assert_eq!(count(&svg, "<polygon"), 3);
    assert!(svg.contains(">median<") && svg.contains(">mean<") && svg.contains(">n=120<"));
    let colours = fills(&svg);
    assert!(
        colours.contains(OKABE_ITO[0]) && colours.contains(OKABE_ITO[1]) && !colours.contains(OKABE_ITO[2])
    );
    check_png("distributions", &svg);
}

#[test]
fn sos_per_layer() {
    let l = Lines {
        title: "SoS per text-encoder layer".into(),
        x_label: "layer".into(),
        y_label: "mean SoS".into(),
        x: (0..6).map(|i| i.to_string()).collect(),
        series: vec![
            ("en".into(), vec![Some(0.1), Some(0.05), Some(0.0), Some(-0.05), Some(-0.1), Some(-0.12)]),
            ("ar".into(), vec![Some(0.0), Some(-0.1), None, Some(-0.2), Some(-0.25), Some(-0.3)]),
        ],
    };
    let svg = lines(&l);
    // en: one unbroken line; ar: broken at the missing layer into two
    assert_eq!(count(&svg, "<polyline"), 3);
    // 11 data points + 2 legend dots
    assert_eq!(count(&svg, "<circle"), 13);
    check_png("layers", &svg);
}

#[test]
fn pca_scatter() {
    let s = Scatter {
        title: "PCA of image embeddings".into(),
        categories: vec!["en".into(), "አማርኛ".into(), "العربية".into(), "हिन्दी".into(), "中文".into()],
        points: (0..50)
            .map(|i| {
                let c = i % 5;
                let a = i as f64 * 0.7;
                (c as f64 - 2.0 + 0.3 * a.cos(), 0.5 * c as f64 - 1.0 + 0.3 * a.sin(), c)
            })
            .collect(),
    };
    let svg = scatter(&s);
    assert_eq!(count(&svg, "<circle"), 50 + 5);
    assert_eq!(fills(&svg).iter().filter(|f| OKABE_ITO.contains(&f.as_str())).count(), 5);
    for label in ["አማርኛ", "العربية", "हिन्दी", "中文", ">PC1<", ">PC2<"] {
        assert!(svg.contains(label), "{label} missing");
    }
    check_png("pca", &svg);
}

#[test]
fn vendi_and_magbig_bars() {
    let vendi = Bars {
        title: "Vendi score (q = 1) per culture".into(),
        x_label: "culture".into(),
        y_label: "VS".into(),
        groups: vec!["India".into(), "Japan".into(), "Nigeria".into()],
        series: vec!["VS".into()],
        bars: vec![
            vec![Some(Bar { value: 3.2, sd: Some(0.4), baseline: None, interval: None })],
            vec![Some(Bar { value: 4.1, sd: Some(0.3), baseline: None, interval: None })],
            vec![Some(Bar { value: 2.5, sd: Some(0.6), baseline: None, interval: None })],
        ],
        baseline_label: None,
    };
    let svg = bars(&vendi);
    // 3 bars (+ background); 3 error bars of 3 lines each
    assert_eq!(count(&svg, &format!("fill=\"{}\"", OKABE_ITO[0])), 3);
    assert_eq!(count(&svg, "stroke-width=\"1.5\""), 9);
    check_png("vendi", &svg);

    let magbig = Bars {
        title: "MAGBIG MAD, sd-2.1".into(),
        x_label: "language".into(),
        y_label: "MAD".into(),
        groups: vec!["ar".into(), "de".into(), "en".into()],
        series: vec!["adjectives".into(), "occupations".into()],
        bars: vec![
            vec![
                Some(Bar { value: 0.61, sd: None, baseline: Some(0.19), interval: None }),
                Some(Bar { value: 0.72, sd: None, baseline: Some(0.2), interval: None }),
            ],
            vec![Some(Bar { value: 0.45, sd: None, baseline: Some(0.19), interval: None }), None],
            vec![
                Some(Bar { value: 0.52, sd: None, baseline: Some(0.18), interval: None }),
                Some(Bar { value: 0.66, sd: None, baseline: Some(0.2), interval: None }),
            ],
        ],
        baseline_label: Some("fair-coin baseline".into()),
    };
    let svg = bars(&magbig);
    // 5 baseline ticks and the legend's
    assert_eq!(count(&svg, "stroke-dasharray"), 6);
    assert!(
        svg.contains(">adjectives<") && svg.contains(">occupations<") && svg.contains(">fair-coin baseline<")
    );
    assert_eq!(count(&svg, &format!("fill=\"{}\"", OKABE_ITO[1])), 2 + 1);
    check_png("magbig", &svg);
}

#[test]
fn colour_palettes() {
    let p = Palettes {
        title: "Dominant colours per (model, language, culture)".into(),
        rows: vec![
            PaletteRow {
                label: "sd-2.1 · ja · Japan".into(),
                colours: vec![
                    ("#1a1a1a".into(), 0.4),
                    ("#d4c4a8".into(), 0.3),
                    ("#8b0000".into(), 0.2),
                    ("#f5f5f5".into(), 0.1),
                ],
            },
            PaletteRow {
                label: "sd-2.1 · am · Ethiopia".into(),
                colours: vec![("#6b4226".into(), 0.55), ("#2e8b57".into(), 0.45)],
            },
        ],
    };
    let svg = palettes(&p);
    // background + 6 swatches + 2 frames
    assert_eq!(count(&svg, "<rect"), 1 + 6 + 2);
    for label in [">40%<", ">30%<", ">20%<", ">10%<", ">55%<", ">45%<", "sd-2.1 · ja · Japan"] {
        assert!(svg.contains(label), "{label} missing");
    }
    // Swatch widths are proportional to the shares (520 px strip).
    assert!(svg.contains("width=\"208\" height=\"30\" fill=\"#1a1a1a\""));
    // White ink on the dark swatch, black on the light one.
    assert!(svg.contains("fill=\"#ffffff\">40%<") && svg.contains("fill=\"#000000\">30%<"));
    check_png("palettes", &svg);
}

#[test]
fn value_histogram_with_more_than_eight_languages() {
    let langs = ["am", "ar", "de", "en", "es", "fr", "hi", "ja", "ru", "zh"];
    let l = Lines {
        title: "HSV value of dominant colours".into(),
        x_label: "value V (bin)".into(),
        y_label: "share of pixels".into(),
        x: (0..5).map(|b| format!("{:.1}–{:.1}", b as f64 / 5.0, (b + 1) as f64 / 5.0)).collect(),
        series: langs
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let shift = i as f64 / 10.0;
                let raw: Vec<f64> = (0..5).map(|b| 1.0 + ((b as f64 + shift) * 1.3).sin().abs()).collect();
                let total: f64 = raw.iter().sum();
                (l.to_string(), raw.iter().map(|v| Some(v / total)).collect())
            })
            .collect(),
    };
    let svg = lines(&l);
    // 10 lines, and the dark casing under en's yellow line (too light alone on white).
    assert_eq!(count(&svg, "<polyline"), 10 + 1);
    let en = svg.lines().filter(|l| l.starts_with("<polyline")).nth(3).unwrap();
    assert!(en.contains("stroke=\"#333333\""), "casing first: {en}");
    assert!(svg.contains(&format!("stroke=\"{}\" stroke-width=\"2.5\"", OKABE_ITO[3])));
    // Languages 9 and 10 repeat colours, so their lines are dashed (and the legend's samples).
    assert_eq!(count(&svg, "stroke-dasharray=\"8 4\""), 2 + 2);
    // Languages 9 and 10 reuse the first two colours, as squares: 2 × (5 points + 1 legend).
    assert_eq!(count(&svg, "<circle"), 8 * 6);
    // Every marker is outlined, so light colours stay visible on white.
    assert!(svg.lines().filter(|l| l.starts_with("<circle")).all(|l| l.contains("stroke=\"#333333\"")));
    assert_eq!(count(&svg, "height=\"8.1\""), 2 * 5);
    assert_eq!(count(&svg, "height=\"10.8\""), 2);
    assert!(svg.contains(">0.0–0.2<") && svg.contains(">zh<"));
    assert!(!svg.contains(">-0"), "no negative zero on the axis");
    check_png("values", &svg);
}

/// The geometry that carries the numbers, read back from the SVG (issue 32): every element is on
/// its own line, coordinates are written with two decimals, so a drawn value is recovered from
/// its pixel position through the axis the figure itself labels (its tick labels and grid
/// lines) to within 0.011 px.
mod geometry {
    use std::collections::BTreeMap;

    /// One SVG element: its tag, attributes and text content.
    pub struct Element {
        pub tag: String,
        pub attrs: BTreeMap<String, String>,
        pub text: String,
    }

    impl Element {
        pub fn f(&self, key: &str) -> f64 {
            self.attrs.get(key).unwrap_or_else(|| panic!("no {key} on <{}>", self.tag)).parse().unwrap()
        }
        pub fn is(&self, key: &str, value: &str) -> bool {
            self.attrs.get(key).is_some_and(|v| v == value)
        }
        /// The (x, y) pairs of a `points` attribute.
        pub fn points(&self) -> Vec<(f64, f64)> {
            self.attrs["points"]
                .split(' ')
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect()
        }
    }

    pub fn parse(svg: &str) -> Vec<Element> {
        svg.lines()
            .filter(|l| l.starts_with('<') && !l.starts_with("</") && !l.starts_with("<svg"))
            .map(|l| {
                let tag: String = l[1..].chars().take_while(|c| c.is_ascii_alphabetic()).collect();
                let head_end = l.find('>').unwrap();
                let head = &l[1 + tag.len()..head_end];
                let mut attrs = BTreeMap::new();
                for part in head.split('"').collect::<Vec<_>>().chunks(2) {
                    if let [key, value] = part {
                        attrs.insert(key.trim().trim_end_matches('=').to_string(), value.to_string());
                    }
                }
                let text = l[head_end + 1..].split("</").next().unwrap_or("").to_string();
                Element { tag, attrs, text }
            })
            .collect()
    }

    /// Pixel position as a linear function of a value, fitted on an axis' labelled ticks.
    #[derive(Debug, Clone, Copy)]
    pub struct Axis {
        pub offset: f64,
        pub scale: f64,
    }

    impl Axis {
        /// The value drawn at pixel `p`.
        pub fn value(&self, p: f64) -> f64 {
            (p - self.offset) / self.scale
        }
        /// How far (in value units) 0.011 px reaches: the reading's tolerance.
        pub fn tolerance(&self) -> f64 {
            0.011 / self.scale.abs()
        }
        /// From (value, pixel) pairs, checking every pair lies on the line.
        pub fn fit(pairs: &[(f64, f64)]) -> Axis {
            assert!(pairs.len() >= 2, "an axis needs two labelled ticks: {pairs:?}");
            let ((v0, p0), (v1, p1)) = (pairs[0], pairs[pairs.len() - 1]);
            let scale = (p1 - p0) / (v1 - v0);
            let axis = Axis { offset: p0 - scale * v0, scale };
            for (v, p) in pairs {
                assert!((axis.offset + axis.scale * v - p).abs() < 0.011, "tick {v} at {p}: {axis:?}");
            }
            axis
        }
    }

    fn number(text: &str) -> Option<f64> {
        text.replace('−', "-").parse().ok()
    }

    /// The vertical value axis: the right-anchored tick labels paired, top to bottom, with the
    /// horizontal grid lines they label.
    pub fn y_axis(els: &[Element]) -> Axis {
        let mut labels: Vec<(f64, f64)> = els
            .iter()
            .filter(|e| e.tag == "text" && e.is("text-anchor", "end") && !e.attrs.contains_key("transform"))
            .filter_map(|e| number(&e.text).map(|v| (v, e.f("y"))))
            .collect();
        labels.sort_by(|a, b| a.1.total_cmp(&b.1));
        let grid_colours = ["#dddddd", "#555555", "#e5e5e5"];
        let mut grid: Vec<f64> = els
            .iter()
            .filter(|e| {
                e.tag == "line" && e.f("y1") == e.f("y2") && grid_colours.iter().any(|c| e.is("stroke", c))
            })
            .map(|e| e.f("y1"))
            .collect();
        grid.sort_by(f64::total_cmp);
        grid.dedup();
        assert_eq!(grid.len(), labels.len(), "one grid line per tick label");
        Axis::fit(&labels.iter().zip(&grid).map(|((v, _), y)| (*v, *y)).collect::<Vec<_>>())
    }

    /// The horizontal value axis of the scatter: the centred tick labels under the plot, paired
    /// left to right with its vertical grid lines.
    pub fn x_axis(els: &[Element]) -> Axis {
        let mut labels: Vec<(f64, f64)> = els
            .iter()
            .filter(|e| {
                e.tag == "text" && e.is("text-anchor", "middle") && !e.attrs.contains_key("transform")
            })
            .filter_map(|e| number(&e.text).map(|v| (v, e.f("x"))))
            .collect();
        labels.sort_by(|a, b| a.1.total_cmp(&b.1));
        let mut grid: Vec<f64> = els
            .iter()
            .filter(|e| e.tag == "line" && e.f("x1") == e.f("x2") && e.is("stroke", "#e5e5e5"))
            .map(|e| e.f("x1"))
            .collect();
        grid.sort_by(f64::total_cmp);
        assert_eq!(grid.len(), labels.len(), "one grid line per tick label");
        Axis::fit(&labels.iter().zip(&grid).map(|((v, _), x)| (*v, *x)).collect::<Vec<_>>())
    }

    #[track_caller]
    pub fn close(got: f64, want: f64, tol: f64, what: &str) {
        assert!((got - want).abs() <= tol, "{what}: drawn at {got}, the input is {want} (± {tol:e})");
    }
}

/// The bars' heights, error bars (± sd, or an asymmetric interval) and baseline ticks, read back
/// through the figure's own y axis, are the input values.
#[test]
fn bar_geometry_carries_the_values() {
    use geometry::*;
    let b = Bars {
        title: "MAD".into(),
        x_label: "language".into(),
        y_label: "MAD".into(),
        groups: vec!["ar".into(), "de".into(), "en".into()],
        series: vec!["a".into(), "b".into()],
        bars: vec![
            vec![Some(Bar { value: 0.613, sd: Some(0.05), baseline: Some(0.19), interval: None }), None],
            vec![
                Some(Bar { value: 0.45, sd: Some(0.11), baseline: Some(0.2), interval: None }),
                Some(Bar { value: -0.07, sd: None, baseline: None, interval: Some((-0.16, 0.01)) }),
            ],
            vec![None, Some(Bar { value: 0.661, sd: None, baseline: Some(0.18), interval: None })],
        ],
        baseline_label: Some("baseline".into()),
    };
    let els = parse(&bars(&b));
    let y = y_axis(&els);
    let tol = y.tolerance();
    let zero = y.offset;
    // The bars in drawing order (group by group, series by series), each from the zero line.
    let rects: Vec<&Element> = els
        .iter()
        .filter(|e| e.tag == "rect" && (e.is("fill", OKABE_ITO[0]) || e.is("fill", OKABE_ITO[1])))
        .filter(|e| e.f("width") > 20.0)
        .collect();
    let drawn: Vec<&Bar> = b.bars.iter().flatten().flatten().collect();
    assert_eq!(rects.len(), drawn.len(), "one rect per bar");
    for (r, bar) in rects.iter().zip(&drawn) {
        let (top, bottom) = (r.f("y"), r.f("y") + r.f("height"));
        let end = if (top - zero).abs() > (bottom - zero).abs() { top } else { bottom };
        close(y.value(end), bar.value, 2.0 * tol, "bar height");
        close(y.value(if end == top { bottom } else { top }), 0.0, 2.0 * tol, "bar base");
    }
    // Error bars: vertical 1.5 px lines from value − sd to value + sd.
    let whiskers: Vec<(f64, f64)> = els
        .iter()
        .filter(|e| e.tag == "line" && e.is("stroke-width", "1.5") && e.f("x1") == e.f("x2"))
        .map(|e| (y.value(e.f("y1").max(e.f("y2"))), y.value(e.f("y1").min(e.f("y2")))))
        .collect();
    // An interval (asymmetric) where a bar has one, else value ± sd.
    let want: Vec<(f64, f64)> =
        drawn.iter().filter_map(|b| b.interval.or(b.sd.map(|sd| (b.value - sd, b.value + sd)))).collect();
    assert_eq!(whiskers.len(), want.len());
    for ((lo, hi), (want_lo, want_hi)) in whiskers.iter().zip(want) {
        close(*lo, want_lo, tol, "error bar low");
        close(*hi, want_hi, tol, "error bar high");
    }
    // Baselines: dashed 2.5 px ticks (the legend's sample last).
    let ticks: Vec<f64> = els
        .iter()
        .filter(|e| e.tag == "line" && e.is("stroke-dasharray", "4"))
        .map(|e| y.value(e.f("y1")))
        .collect();
    let baselines: Vec<f64> = drawn.iter().filter_map(|b| b.baseline).collect();
    assert_eq!(ticks.len(), baselines.len() + 1, "one tick per baseline and the legend's");
    for (got, want) in ticks.iter().zip(&baselines) {
        close(*got, *want, tol, "baseline");
    }
}

/// Box plots: whisker ends at min and max, the box from q1 to q3, the median line and the mean
/// diamond's centre, read back through the y axis.
#[test]
fn box_geometry_carries_the_quartiles() {
    use geometry::*;
    let g = |label: &str, v: [f64; 6]| BoxStats {
        label: label.into(),
        n: 9,
        min: v[0],
        q1: v[1],
        median: v[2],
        q3: v[3],
        max: v[4],
        mean: v[5],
    };
    let d = Distributions {
        title: "SoS".into(),
        x_label: "model".into(),
        y_label: "SoS".into(),
        groups: vec![
            g("a", [-0.41, -0.2, -0.13, 0.02, 0.21, -0.11]),
            g("b", [-0.19, -0.04, 0.03, 0.12, 0.33, 0.05]),
        ],
    };
    let els = parse(&distributions(&d));
    let y = y_axis(&els);
    let tol = y.tolerance();
    let boxes: Vec<&Element> = els
        .iter()
        .filter(|e| e.tag == "rect" && e.attrs.contains_key("stroke") && e.f("width") > 20.0)
        .collect();
    let medians: Vec<&Element> =
        els.iter().filter(|e| e.tag == "line" && e.is("stroke-width", "3")).collect();
    let means: Vec<Vec<(f64, f64)>> =
        els.iter().filter(|e| e.tag == "polygon" && e.is("fill", "#ffffff")).map(|e| e.points()).collect();
    let vertical: Vec<&Element> = els
        .iter()
        .filter(|e| e.tag == "line" && e.is("stroke-width", "1.5") && e.f("x1") == e.f("x2"))
        .collect();
    for (i, s) in d.groups.iter().enumerate() {
        close(y.value(boxes[i].f("y")), s.q3, tol, "q3");
        close(y.value(boxes[i].f("y") + boxes[i].f("height")), s.q1, 2.0 * tol, "q1");
        close(y.value(medians[i].f("y1")), s.median, tol, "median");
        close(y.value(means[i][1].1), s.mean, tol, "mean");
        let (low, high) = (vertical[2 * i], vertical[2 * i + 1]);
        close(y.value(low.f("y1")), s.min, tol, "min");
        close(y.value(high.f("y2")), s.max, tol, "max");
    }
}

/// Heatmap cells: each cell's fill is the scale's colour of its input value and its label the
/// value; cells are found by the row and column labels' positions.
#[test]
fn heatmap_cells_carry_their_values() {
    use geometry::*;
    let m = heatmap();
    let els = parse(&matrix(&m));
    let cells: Vec<&Element> = els.iter().filter(|e| e.tag == "rect" && e.is("stroke", "#ffffff")).collect();
    assert_eq!(cells.len(), m.rows.len() * m.cols.len());
    let labels: Vec<&Element> =
        els.iter().filter(|e| e.tag == "text" && e.is("text-anchor", "middle")).collect();
    for (r, row) in m.values.iter().enumerate() {
        for (c, v) in row.iter().enumerate() {
            // Cells are drawn row by row, column by column, left to right and top to bottom.
            let cell = cells[r * m.cols.len() + c];
            let (x, y) = (cell.f("x"), cell.f("y"));
            if r > 0 {
                assert!(y > cells[(r - 1) * m.cols.len() + c].f("y"), "rows go down");
            }
            if c > 0 {
                assert!(x > cells[r * m.cols.len() + c - 1].f("x"), "columns go right");
            }
            let (cx, cy) = (x + cell.f("width") / 2.0, y + cell.f("height") / 2.0);
            let label = labels
                .iter()
                .find(|t| (t.f("x") - cx).abs() < 0.011 && t.f("y") > y && t.f("y") < y + cell.f("height"))
                .unwrap_or_else(|| panic!("no label in cell {r},{c} at {cx},{cy}"));
            match v {
                Some(v) => {
                    assert_eq!(cell.attrs["fill"], m.scale.color(*v), "cell {r},{c}");
                    let shown: f64 = label.text.replace('−', "-").parse().unwrap();
                    close(shown, *v, 0.5 * 10f64.powi(-(m.decimals as i32)), "cell label");
                }
                None => assert_eq!(label.text, "n/a"),
            }
        }
    }
}

/// Scatter points: each marker's centre, read through both labelled axes, is its input point.
#[test]
fn scatter_points_sit_at_their_coordinates() {
    use geometry::*;
    let s = Scatter {
        title: "PCA".into(),
        categories: vec!["en".into(), "de".into()],
        points: (0..12)
            .map(|i| ((i as f64 * 0.37).sin() * 1.7, (i as f64 * 0.91).cos() * 0.8, i % 2))
            .collect(),
    };
    let els = parse(&scatter(&s));
    let (x, y) = (x_axis(&els), y_axis(&els));
    let circles: Vec<&Element> = els.iter().filter(|e| e.tag == "circle" && e.is("r", "3.5")).collect();
    let squares: Vec<&Element> = els.iter().filter(|e| e.tag == "rect" && e.is("width", "6.3")).collect();
    let mut markers: Vec<(f64, f64, String)> = circles
        .iter()
        .map(|e| (e.f("cx"), e.f("cy"), e.attrs["fill"].clone()))
        .chain(squares.iter().map(|e| (e.f("x") + 3.15, e.f("y") + 3.15, e.attrs["fill"].clone())))
        .collect();
    // Markers are drawn in point order; both shapes are the first eight categories' circles here.
    assert!(squares.is_empty());
    assert_eq!(markers.len(), s.points.len());
    for ((px, py, fill), (vx, vy, c)) in markers.drain(..).zip(&s.points) {
        close(x.value(px), *vx, x.tolerance(), "x");
        close(y.value(py), *vy, y.tolerance(), "y");
        assert_eq!(fill, OKABE_ITO[*c]);
    }
}

/// Line charts: every vertex of every series, read back through the y axis, is its value.
#[test]
fn line_vertices_carry_the_values() {
    use geometry::*;
    let l = Lines {
        title: "SoS per layer".into(),
        x_label: "layer".into(),
        y_label: "mean SoS".into(),
        x: (0..5).map(|i| i.to_string()).collect(),
        series: vec![
            ("en".into(), vec![Some(0.11), Some(0.052), Some(-0.013), Some(-0.05), Some(-0.1)]),
            ("ar".into(), vec![Some(0.0), Some(-0.1), Some(-0.17), Some(-0.2), Some(-0.31)]),
        ],
    };
    let els = parse(&lines(&l));
    let y = y_axis(&els);
    let polylines: Vec<&Element> =
        els.iter().filter(|e| e.tag == "polyline" && e.is("stroke-width", "2.5")).collect();
    assert_eq!(polylines.len(), 2, "one unbroken line per series");
    for (line, (_, values)) in polylines.iter().zip(&l.series) {
        let points = line.points();
        assert_eq!(points.len(), values.len());
        for ((_, py), v) in points.iter().zip(values) {
            close(y.value(*py), v.unwrap(), y.tolerance(), "vertex");
        }
    }
}

/// Hatched cells (the SoS heatmap's "interval covers 0"): strokes only over the marked cells,
/// each inside its cell, none over a missing one.
#[test]
fn hatched_cells_get_strokes_inside_them_only() {
    use geometry::*;
    let mut m = heatmap();
    m.hatched = vec![vec![false, true, true, true], vec![false; 4], vec![true, false, false, true]];
    m.scale_label = "SoS (hatched: 95 % interval covers 0)".into();
    let svg = matrix(&m);
    let els = parse(&svg);
    let cells: Vec<&Element> = els.iter().filter(|e| e.tag == "rect" && e.is("stroke", "#ffffff")).collect();
    let strokes: Vec<&Element> =
        els.iter().filter(|e| e.tag == "line" && e.is("stroke", culturelens_figures::HATCH)).collect();
    let inside = |cell: &Element, x: f64, y: f64| {
        x >= cell.f("x") - 0.01
            && x <= cell.f("x") + cell.f("width") + 0.01
            && y >= cell.f("y") - 0.01
            && y <= cell.f("y") + cell.f("height") + 0.01
    };
    let mut per_cell = vec![0usize; cells.len()];
    for s in &strokes {
        let k = cells
            .iter()
            .position(|c| inside(c, s.f("x1"), s.f("y1")) && inside(c, s.f("x2"), s.f("y2")))
            .unwrap_or_else(|| panic!("a stroke outside every cell: {:?}", s.attrs));
        per_cell[k] += 1;
    }
    // Row 0, column 3 is missing (None): never hatched; the four marked cells with values are.
    let marked: Vec<usize> = per_cell.iter().enumerate().filter(|(_, n)| **n > 0).map(|(k, _)| k).collect();
    assert_eq!(marked, [1, 2, 8, 11]);
    assert!(svg.contains("hatched: 95 % interval covers 0"));
}
