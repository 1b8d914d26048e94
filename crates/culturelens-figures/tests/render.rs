//! Every figure type rendered from a small hand-made table: the SVG's structure (elements,
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
            vec![Some(Bar { value: 3.2, sd: Some(0.4), baseline: None })],
            vec![Some(Bar { value: 4.1, sd: Some(0.3), baseline: None })],
            vec![Some(Bar { value: 2.5, sd: Some(0.6), baseline: None })],
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
                Some(Bar { value: 0.61, sd: None, baseline: Some(0.19) }),
                Some(Bar { value: 0.72, sd: None, baseline: Some(0.2) }),
            ],
            vec![Some(Bar { value: 0.45, sd: None, baseline: Some(0.19) }), None],
            vec![
                Some(Bar { value: 0.52, sd: None, baseline: Some(0.18) }),
                Some(Bar { value: 0.66, sd: None, baseline: Some(0.2) }),
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
