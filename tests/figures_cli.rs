//! End-to-end tests of `culturelens figures` on a finished run written by the CLI itself
//! (`finished_run.rs`): every figure type is drawn from the command's own output tables, twice
//! with byte-identical files; the provenance manifest names every input; a bad table fails with
//! file, row and column and writes nothing. The pictures themselves are checked against
//! committed references in crates/culturelens-figures/tests/render.rs.

use std::collections::BTreeSet;
use std::path::Path;

use crate::common::Cli;
use crate::finished_run::finished_run;

fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect()
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_figure_type_from_the_cli_outputs_deterministically() {
    let root = tempfile::tempdir().unwrap();
    let run = finished_run(root.path());
    let figures = |out: &Path, sos: &Path| {
        Cli::new("figures")
            .opt("--sos", sos)
            .opt("--sos-report", &run.sos_report)
            .opt("--bundle", &run.bundle)
            .opt("--vendi", &run.vendi)
            .opt("--magbig", &run.magbig)
            .opt("--cultext2i-report", &run.cultext2i_report)
            .opt("--colour", &run.colour)
            .opt("--out", out)
            .opt("--scale", "1")
            .run_ok()
    };
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    figures(&a, &run.sos);
    figures(&b, &run.sos);
    let stems = [
        "sos_heatmap",
        "sos_heatmap_synth-monolingual",
        "sos_distributions",
        "sos_pearson",
        "pca",
        "vendi",
        "magbig_sd",
        "cultext2i_confusion_m",
        "colour_palettes_m",
        "colour_values_m",
    ];
    let got = names(&a);
    for stem in stems {
        for ext in ["svg", "png"] {
            assert!(got.contains(&format!("{stem}.{ext}")), "{stem}.{ext} missing from {got:?}");
        }
    }
    for name in &got {
        if name != "provenance.json" {
            assert_eq!(std::fs::read(a.join(name)).unwrap(), std::fs::read(b.join(name)).unwrap(), "{name}");
        }
    }

    // Structure: the heatmap has the demo's 10 cultures x 8 languages, the PCA one point per row.
    let heatmap = read(&a, "sos_heatmap.svg");
    assert!(
        heatmap.contains("mean over models") && heatmap.contains(">prompt language (sorted by mean SoS)<")
    );
    let pca = read(&a, "pca.svg");
    // 2,160 points and 8 legend dots (8 languages: circles only).
    assert_eq!(pca.matches("<circle").count(), 2160 + 8);
    let magbig = read(&a, "magbig_sd.svg");
    assert!(magbig.contains(">adjectives<") && magbig.contains(">fair-coin baseline<"));
    // 4 (language, set) bars with a baseline tick + the legend's.
    assert_eq!(magbig.matches("stroke-dasharray").count(), 5);
    let vendi = read(&a, "vendi.svg");
    assert!(vendi.contains("± 1 sd over batches"));
    let confusion = read(&a, "cultext2i_confusion_m.svg");
    assert!(confusion.contains(">german<") && confusion.contains(">predicted nationality<"));
    assert!(read(&a, "colour_palettes_m.svg").contains(">de · x<"));
    assert!(!got.iter().any(|n| n.contains("-0.00")));
    for name in got.iter().filter(|n| n.ends_with(".svg")) {
        assert!(!read(&a, name).contains(">-0.00<"), "{name} prints -0.00");
    }

    // The per-layer table gives a heatmap per layer and lines per model, layers in numeric order.
    let layers = root.path().join("layers");
    Cli::new("figures").opt("--sos", &run.layers).opt("--out", &layers).run_ok();
    let drawn = names(&layers);
    for layer in ["0", "1", "10"] {
        assert!(drawn.contains(&format!("sos_heatmap_layer{layer}.svg")), "layer {layer}: {drawn:?}");
    }
    assert!(!drawn.contains("sos_heatmap.svg"), "one model swept over layers: {drawn:?}");
    let svg = read(&layers, "sos_layers_m.svg");
    let (l1, l10) = (svg.find(">1<").unwrap(), svg.find(">10<").unwrap());
    assert!(l1 < l10, "layer 1 is drawn before layer 10");
    assert_eq!(svg.matches("<polyline").count(), 2);

    // Provenance: every input with its sha256.
    let manifest: serde_json::Value = serde_json::from_str(&read(&a, "provenance.json")).unwrap();
    assert_eq!(manifest["command"], "figures");
    let inputs: Vec<&str> =
        manifest["inputs"].as_array().unwrap().iter().map(|i| i["path"].as_str().unwrap()).collect();
    assert_eq!(inputs.len(), 7, "{inputs:?}");
    assert!(inputs.contains(&run.magbig.to_str().unwrap()));
    assert!(manifest["inputs"].as_array().unwrap().iter().all(|i| i["sha256"].as_str().unwrap().len() == 64));
    assert_eq!(manifest["resolved_args"]["colour_by"], "language");
}

#[test]
fn a_bad_table_names_file_row_and_column_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("magbig.csv");
    std::fs::write(
        &bad,
        "model,language,set,n_prompts,n_images,mad,mad_random,male_share\nm,en,s,1,2,0.5,0.1,0.5\nm,de,s,1,2,oops,0.1,0.5\n",
    )
    .unwrap();
    let out = dir.path().join("figs");
    let err = Cli::new("figures").opt("--magbig", &bad).opt("--out", &out).run_fails().stderr;
    assert!(
        err.contains("magbig.csv") && err.contains("mad") && err.contains("oops") && err.contains("row 1"),
        "{err}"
    );
    assert!(!out.exists(), "no output folder after a failure");
    let err = Cli::new("figures").opt("--out", &out).run_fails().stderr;
    assert!(err.contains("nothing to draw"), "{err}");
}

/// Intervals in the figures: a one-model joint table from `sos --ci` hatches the cells whose
/// interval covers 0 (and says so on the colour bar); `magbig --ci` and `vendi --ci` draw their
/// intervals as the error bars (and say so in the title).
#[test]
fn figures_draw_the_intervals_of_ci_tables() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sos = d.join("sos.csv");
    std::fs::write(
        &sos,
        "model,language,culture,n,sos,sos_lo,sos_hi\n\
         m,de,Japan,9,0.2,0.1,0.3\nm,de,Kenya,9,0.05,-0.02,0.12\n\
         m,en,Japan,9,-0.1,-0.2,-0.01\nm,en,Kenya,9,-0.03,-0.09,0.04\n",
    )
    .unwrap();
    let magbig = d.join("magbig.csv");
    std::fs::write(
        &magbig,
        "model,language,set,n_prompts,n_images,mad,mad_lo,mad_hi,mad_random,male_share,male_share_lo,male_share_hi\n\
         sd,de,occupations,5,20,0.4,0.3,0.55,0.3125,0.7,0.6,0.8\n",
    )
    .unwrap();
    let out = d.join("figs");
    Cli::new("figures")
        .opt("--sos", &sos)
        .opt("--magbig", &magbig)
        .opt("--out", &out)
        .opt("--scale", "1")
        .run_ok();
    let heatmap = std::fs::read_to_string(out.join("sos_heatmap.svg")).unwrap();
    assert!(heatmap.contains("hatched: interval covers 0"), "the colour bar says what hatching means");
    // Two of the four cells cover 0 (de/Kenya and en/Kenya); each gets several strokes.
    let strokes = heatmap.matches(&format!("stroke=\"{}\"", culturelens_figures::HATCH)).count();
    assert!(strokes >= 2 * 4, "{strokes} hatching strokes");
    let bars = std::fs::read_to_string(out.join("magbig_sd.svg")).unwrap();
    assert!(bars.contains("bootstrap interval over prompts"));
    // The error bar: one vertical 1.5 px line plus its two caps.
    assert_eq!(bars.matches("stroke-width=\"1.5\"").count(), 3);
}
