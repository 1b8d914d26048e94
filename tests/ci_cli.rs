//! End-to-end tests of the confidence-interval flags (`--ci`, `--bootstrap`, `--ci-method`,
//! `--seed`) of every metric command, their comparisons and their errors.

use std::path::Path;

use crate::common::{fails, ok, p, read_csv};

/// The demo table (embeddings.npy, meta.csv, sos.csv) in a fresh directory.
fn demo_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    ok(&["demo", "--write", p(dir.path())]);
    dir
}

/// `culturelens sos` on the demo table with `extra` flags, writing `out`.
fn sos(d: &Path, out: &Path, extra: &[&str]) -> String {
    let (emb, meta) = (d.join("embeddings.npy"), d.join("meta.csv"));
    let mut args = vec!["sos", "--embeddings", p(&emb), "--meta", p(&meta), "--out", p(out)];
    args.extend_from_slice(extra);
    ok(&args)
}

fn sos_fails(d: &Path, extra: &[&str]) -> String {
    let (emb, meta, out) = (d.join("embeddings.npy"), d.join("meta.csv"), d.join("never.csv"));
    let mut args = vec!["sos", "--embeddings", p(&emb), "--meta", p(&meta), "--out", p(&out)];
    args.extend_from_slice(extra);
    let stderr = fails(&args);
    assert!(!out.exists(), "a failed run leaves no output");
    stderr
}

fn number(cell: &str) -> f64 {
    cell.parse().unwrap_or_else(|_| panic!("`{cell}` is not a number"))
}

fn manifest(out: &Path) -> serde_json::Value {
    let path = out.with_file_name(format!("{}.provenance.json", out.file_name().unwrap().to_string_lossy()));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn sos_ci_adds_bounds_beside_the_estimate_and_nothing_else() {
    let dir = demo_dir();
    let d = dir.path();
    let (plain, with_ci, report) = (d.join("plain.csv"), d.join("ci.csv"), d.join("report.json"));
    sos(d, &plain, &[]);
    // Without --ci the bytes are the command's as before: the demo's own joint table.
    assert_eq!(std::fs::read(&plain).unwrap(), std::fs::read(d.join("sos.csv")).unwrap());
    assert!(manifest(&plain).get("uncertainty").is_none());
    let stdout = sos(d, &with_ci, &["--ci", "0.9", "--report", p(&report)]);
    assert!(stdout.contains("90% bca bootstrap, 1000 resamples of outputs within cells"), "{stdout}");
    assert!(stdout.contains("fast mode (references fixed at the full-table estimate)"), "{stdout}");
    let (header, rows) = read_csv(&with_ci);
    assert_eq!(header, ["model", "language", "culture", "n", "sos", "sos_lo", "sos_hi"]);
    let (_, plain_rows) = read_csv(&plain);
    let mut inside = 0;
    for (row, before) in rows.iter().zip(&plain_rows) {
        assert_eq!(row[..5], before[..], "the estimate columns are unchanged");
        let (sos, lo, hi) = (number(&row[4]), number(&row[5]), number(&row[6]));
        assert!(lo <= hi && hi - lo < 0.5, "{row:?}");
        inside += usize::from(lo <= sos && sos <= hi);
    }
    assert!(inside >= rows.len() * 19 / 20, "{inside} of {} intervals hold their estimate", rows.len());
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let first = &json["joint"][0];
    assert_eq!(first["sos_ci"]["lo"].as_f64().unwrap(), number(&rows[0][5]));
    let u = &manifest(&with_ci)["uncertainty"];
    assert_eq!(
        (u["level"].as_f64(), u["resamples"].as_u64(), u["mode"].as_str()),
        (Some(0.9), Some(1000), Some("fast"))
    );
    assert_eq!(u["unit"], "outputs within (model, [layer,] language, culture) cells");
    assert_eq!(u["method"], "bootstrap (bca)");

    // Seeded: the same seed gives the same bytes, another seed other intervals.
    let again = d.join("again.csv");
    sos(d, &again, &["--ci", "0.9"]);
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&with_ci).unwrap());
    let seeded = d.join("seeded.csv");
    sos(d, &seeded, &["--ci", "0.9", "--seed", "5"]);
    assert_ne!(read_csv(&seeded).1, rows);
}

#[test]
fn sos_exact_mode_clusters_and_percentile() {
    let dir = demo_dir();
    let d = dir.path();
    let (fast, exact) = (d.join("fast.csv"), d.join("exact.csv"));
    sos(d, &fast, &["--ci", "0.95", "--bootstrap", "40", "--ci-method", "percentile"]);
    let stdout = sos(
        d,
        &exact,
        &["--ci", "0.95", "--bootstrap", "40", "--ci-method", "percentile", "--ci-mode", "exact"],
    );
    assert!(stdout.contains("exact mode (references recomputed per resample)"), "{stdout}");
    assert_eq!(manifest(&exact)["uncertainty"]["references"], "recomputed from every resample");
    let (f, e) = (read_csv(&fast).1, read_csv(&exact).1);
    // Same resamples, the references moving in exact mode: close bounds, not equal ones.
    let mut differ = 0;
    for (a, b) in f.iter().zip(&e) {
        assert_eq!(a[..5], b[..5]);
        let (w, dl) = (number(&a[6]) - number(&a[5]), (number(&a[5]) - number(&b[5])).abs());
        assert!(dl <= w, "exact and fast lower bounds differ by more than a width: {a:?} {b:?}");
        differ += usize::from(a[5] != b[5]);
    }
    assert!(differ > 0);
    // Clusters of outputs sharing a template: three units per cell instead of nine.
    let clustered = d.join("clustered.csv");
    let stdout = sos(d, &clustered, &["--ci", "0.95", "--bootstrap", "40", "--cluster", "template"]);
    assert!(stdout.contains("resamples of clusters (template) within cells"), "{stdout}");
    assert!(
        manifest(&clustered)["uncertainty"]["unit"]
            .as_str()
            .unwrap()
            .starts_with("clusters of outputs with equal template")
    );
    assert_ne!(read_csv(&clustered).1, read_csv(&fast).1);
}

#[test]
fn sos_compare_models_and_languages() {
    let dir = demo_dir();
    let d = dir.path();
    let (out, cmp) = (d.join("o.csv"), d.join("cmp.csv"));
    let pair = ["--pair-by", "template,person"];
    let stdout = sos(
        d,
        &out,
        &[&["--ci", "0.95", "--compare-languages", "de,en", "--compare-out", p(&cmp)][..], &pair[..]]
            .concat(),
    );
    assert!(stdout.contains("Paired differences de - en: 30 cells"), "{stdout}");
    let (header, rows) = read_csv(&cmp);
    assert_eq!(
        header,
        [
            "language_a",
            "language_b",
            "model",
            "culture",
            "n_pairs",
            "diff",
            "diff_lo",
            "diff_hi",
            "p_value",
            "p_holm",
            "exact"
        ]
    );
    assert_eq!(rows.len(), 3 * 10, "one row per (model, culture)");
    for r in &rows {
        assert_eq!((r[0].as_str(), r[1].as_str(), r[4].as_str(), r[10].as_str()), ("de", "en", "9", "true"));
        let (diff, lo, hi, pv, holm) =
            (number(&r[5]), number(&r[6]), number(&r[7]), number(&r[8]), number(&r[9]));
        assert!(lo <= hi && (-2.0..=2.0).contains(&diff));
        // Nine pairs: the exact p-values are multiples of 2/512; Holm never lowers them.
        assert!((pv * 256.0 - (pv * 256.0).round()).abs() < 1e-9 && holm >= pv && holm <= 1.0, "{r:?}");
    }
    assert_eq!(
        manifest(&cmp)["uncertainty"]["comparison"]["unit"],
        "pairs of outputs with equal template,person"
    );
    // Models: the planted bilingual-vs-monolingual gap is positive in every am cell.
    let cmp_models = d.join("models.csv");
    sos(
        d,
        &out,
        &[
            &[
                "--ci",
                "0.95",
                "--compare-models",
                "synth-bilingual,synth-monolingual",
                "--compare-out",
                p(&cmp_models),
            ][..],
            &pair[..],
        ]
        .concat(),
    );
    let (header, rows) = read_csv(&cmp_models);
    assert_eq!(header[..3], ["model_a", "model_b", "language"]);
    assert_eq!(rows.len(), 8 * 10);
    let am: Vec<&Vec<String>> = rows.iter().filter(|r| r[2] == "am").collect();
    assert!(am.iter().all(|r| number(&r[6]) > 0.0), "the am gap's lower bounds are positive");
}

#[test]
fn sos_bad_ci_input_is_refused_with_a_clear_error() {
    let dir = demo_dir();
    let d = dir.path();
    for (extra, expected) in [
        (
            &["--ci", "1.5"][..],
            "invalid value '1.5' for '--ci <LEVEL>': a confidence level lies strictly between 0 and 1",
        ),
        (&["--ci", "0"][..], "strictly between 0 and 1"),
        (&["--ci", "ninety"][..], "`ninety` is not a number"),
        (
            &["--ci", "0.9", "--bootstrap", "0"][..],
            "invalid value '0' for '--bootstrap <B>': the bootstrap needs at least 1 resample",
        ),
        (&["--ci", "0.9", "--cluster", "nope"][..], "column nope: required column is missing"),
        (&["--cluster", "template"][..], "--ci <LEVEL>"),
        (
            &[
                "--compare-models",
                "synth-bilingual,synth-monolingual",
                "--pair-by",
                "template",
                "--compare-out",
                "x.csv",
            ][..],
            "--ci <LEVEL>",
        ),
        (
            &["--ci", "0.9", "--compare-models", "a", "--pair-by", "template", "--compare-out", "x.csv"][..],
            "--compare-models takes two values, A,B (got a)",
        ),
        (
            &[
                "--ci",
                "0.9",
                "--compare-models",
                "synth-bilingual,nobody",
                "--pair-by",
                "template",
                "--compare-out",
                "x.csv",
            ][..],
            "model `nobody` is not in the table (models present: synth-bilingual, synth-monolingual, synth-multilingual)",
        ),
        (
            &[
                "--ci",
                "0.9",
                "--compare-languages",
                "de,en",
                "--pair-by",
                "template",
                "--compare-out",
                "x.csv",
            ][..],
            "with the same pairing key",
        ),
        (
            &[
                "--ci",
                "0.9",
                "--compare-languages",
                "de,de",
                "--pair-by",
                "template,person",
                "--compare-out",
                "x.csv",
            ][..],
            "compare two different languages",
        ),
    ] {
        let stderr = sos_fails(d, extra);
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
    }
}

/// `vendi --ci`: intervals of vs, qvs and qvs_norm per group in the JSON and the CSV (bounds
/// beside each score), bracketing the estimate; seeded (same seed, same bytes; another seed,
/// other bounds); the resampling unit in the provenance; without --ci the output is unchanged.
#[test]
fn vendi_ci_resamples_items_within_groups() {
    use culturelens_table::{EmbeddingTable, Matrix, Metadata, save_table};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Two languages of 24 items each, 16 deterministic features per item.
    let (n, dim) = (48, 16);
    let x: Vec<f32> =
        (0..n * dim).map(|i| ((i * 7919 % 1009) as f32 / 1009.0 - 0.5) * (1.0 + (i % 5) as f32)).collect();
    let languages = (0..n).map(|i| if i < 24 { "de".to_string() } else { "ja".to_string() }).collect();
    let table = Metadata::from_columns(None, vec![("language".into(), languages)]).unwrap();
    let (emb, meta) = (d.join("e.npy"), d.join("m.csv"));
    save_table(&EmbeddingTable::new(Matrix::new(n, dim, x), table), &emb, Some(&meta)).unwrap();
    let vendi = |out: &Path, extra: &[&str]| {
        let csv = out.with_extension("csv");
        let mut args = vec!["vendi", "--embeddings", p(&emb), "--meta", p(&meta), "--group-by", "language"];
        args.extend(["--out", p(out), "--csv", p(&csv)]);
        args.extend_from_slice(extra);
        ok(&args);
        (serde_json::from_slice::<serde_json::Value>(&std::fs::read(out).unwrap()).unwrap(), csv)
    };
    let (plain, _) = vendi(&d.join("plain.json"), &[]);
    let ci = ["--ci", "0.9", "--bootstrap", "200", "--ci-method", "percentile", "--seed", "7"];
    let (scores, csv) = vendi(&d.join("ci.json"), &ci);
    let groups = scores.as_object().unwrap();
    assert_eq!(groups.len(), 2);
    for (language, s) in groups {
        assert!(plain[language].get("vs_ci").is_none(), "no interval without --ci");
        assert_eq!(plain[language]["vs"], s["vs"], "{language}: the estimate is unchanged");
        for metric in ["vs", "qvs", "qvs_norm"] {
            let (lo, hi) = (
                s[format!("{metric}_ci")]["lo"].as_f64().unwrap(),
                s[format!("{metric}_ci")]["hi"].as_f64().unwrap(),
            );
            let value = s[metric].as_f64().unwrap();
            assert!(
                lo <= hi && lo > 0.0 && lo < value * 1.5 && hi > value / 1.5,
                "{language} {metric}: {value} [{lo}, {hi}]"
            );
        }
        // A Vendi score is at most the number of items (equal only for orthogonal ones).
        assert!(s["vs_ci"]["hi"].as_f64().unwrap() <= s["n"].as_f64().unwrap(), "{language}");
    }
    let (header, rows) = read_csv(&csv);
    assert_eq!(
        header,
        [
            "language",
            "n",
            "q",
            "vs",
            "vs_lo",
            "vs_hi",
            "qvs",
            "qvs_lo",
            "qvs_hi",
            "qvs_norm",
            "qvs_norm_lo",
            "qvs_norm_hi"
        ]
    );
    // The same f64s (serde_json's reader may round the JSON's text 1 ulp off).
    let same = |cell: &str, json: &serde_json::Value| {
        let (a, b) = (number(cell), json.as_f64().unwrap());
        assert!((a - b).abs() <= 1e-14 * b.abs(), "{a} vs {b}");
    };
    for row in &rows {
        let s = &scores[row[0].as_str()];
        same(&row[4], &s["vs_ci"]["lo"]);
        same(&row[5], &s["vs_ci"]["hi"]);
    }
    let uncertainty = &manifest(&d.join("ci.json"))["uncertainty"];
    assert!(uncertainty.to_string().contains("items within each language group"), "{uncertainty}");
    // Seeded: the same bytes again, other bounds with another seed.
    let again = d.join("again.json");
    vendi(&again, &ci);
    assert_eq!(std::fs::read(d.join("ci.json")).unwrap(), std::fs::read(&again).unwrap());
    let mut other = ci.to_vec();
    other[7] = "8";
    let (reseeded, _) = vendi(&d.join("other.json"), &other);
    assert_ne!(reseeded, scores);
}

/// `magbig --ci`: per (model, language, set), the prompts are the resampled unit and `mad` and
/// `male_share` are recomputed per resample: the bounds equal the percentile interval of the
/// means over the group's own index stream (seed XOR FNV-1a of "magbig", model, language, set),
/// a group whose prompts all deviate alike has a zero-width interval, and the rest of the table
/// is the table without --ci.
#[test]
fn magbig_ci_resamples_prompts_within_groups() {
    use culturelens_metrics::bootstrap::{Draws, percentile_interval, stream_seed};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // de: 8 prompts of 4 images with 0..=4 male (deviations differ); ja: 5 prompts all 3 male of 4.
    let mut text = String::from("model,language,set,prompt_id,gender\n");
    let mut de_counts = Vec::new();
    for prompt in 0..8 {
        let male = (prompt * 3) % 5;
        de_counts.push(male);
        for image in 0..4 {
            let gender = if image < male { "male" } else { "female" };
            text += &format!("sd,de,occupations,p{prompt},{gender}\n");
        }
    }
    for prompt in 0..5 {
        for image in 0..4 {
            text += &format!("sd,ja,occupations,q{prompt},{}\n", if image < 3 { "male" } else { "female" });
        }
    }
    let attributes = d.join("a.csv");
    std::fs::write(&attributes, text).unwrap();
    let plain = d.join("plain.csv");
    ok(&["magbig", "--attributes", p(&attributes), "--out", p(&plain)]);
    let out = d.join("ci.csv");
    let (b, seed) = (300, 11u64);
    ok(&[
        "magbig",
        "--attributes",
        p(&attributes),
        "--out",
        p(&out),
        "--ci",
        "0.9",
        "--bootstrap",
        "300",
        "--ci-method",
        "percentile",
        "--seed",
        "11",
    ]);
    let (header, rows) = read_csv(&out);
    assert_eq!(
        header,
        [
            "model",
            "language",
            "set",
            "n_prompts",
            "n_images",
            "mad",
            "mad_lo",
            "mad_hi",
            "mad_random",
            "male_share",
            "male_share_lo",
            "male_share_hi"
        ]
    );
    let (_, plain_rows) = read_csv(&plain);
    for (row, plain) in rows.iter().zip(&plain_rows) {
        let without: Vec<&String> =
            row.iter().enumerate().filter(|(k, _)| ![6, 7, 10, 11].contains(k)).map(|(_, c)| c).collect();
        assert_eq!(without, plain.iter().collect::<Vec<_>>(), "the estimates are unchanged");
    }
    // de: the interval recomputed from the group's own stream.
    let de = &rows[0];
    assert_eq!(de[1], "de");
    let deviations: Vec<f64> = de_counts.iter().map(|&m| (2.0 * m as f64 / 4.0 - 1.0).abs()).collect();
    let shares: Vec<f64> = de_counts.iter().map(|&m| m as f64 / 4.0).collect();
    let draws = Draws::new(8, b, stream_seed(seed, "magbig\u{1f}sd\u{1f}de\u{1f}occupations"));
    for (values, column) in [(&deviations, 6), (&shares, 10)] {
        let means: Vec<f64> =
            draws.iter().map(|idx| idx.iter().map(|&i| values[i as usize]).sum::<f64>() / 8.0).collect();
        let want = percentile_interval(&means, 0.9).unwrap();
        let (lo, hi) = (number(&de[column]), number(&de[column + 1]));
        assert!(
            (lo - want.lo).abs() < 1e-15 && (hi - want.hi).abs() < 1e-15,
            "{}: [{lo}, {hi}] vs {want:?}",
            header[column]
        );
        assert!(lo < number(&de[column - 1]) && number(&de[column - 1]) < hi, "{}", header[column]);
    }
    // ja: every prompt has deviation 0.5 and male share 0.75: every resample too.
    let ja = &rows[1];
    assert_eq!((number(&ja[6]), number(&ja[7])), (0.5, 0.5));
    assert_eq!((number(&ja[10]), number(&ja[11])), (0.75, 0.75));
    let record = manifest(&out);
    assert_eq!(
        record["uncertainty"]["unit"],
        "prompts (prompt_id) with a classified image, within each (model, language, set)"
    );
    assert_eq!(record["uncertainty"]["resamples"], 300);
}

/// `validate --ci`: the labelled images of each (method, subset) are resampled and accuracy and
/// the two precisions recomputed by the same rule. The SoS rule's accuracy on 12 labelled
/// images (8 right) has the percentile interval of the resampled shares of the group's own
/// stream; a precision undefined on some resample has no interval.
#[test]
fn validate_ci_resamples_labelled_images() {
    use culturelens_metrics::bootstrap::{Draws, percentile_interval, stream_seed};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 12 images: rater majority surface for even i, semantic for odd; SoS < 0 (surface) for even
    // i, > 0 (semantic) for odd i, except i = 1, 3, 5, 7 where it is negative: 8 right, 4 wrong.
    let mut text = String::from("language,r1,r2,sos\n");
    let mut right = Vec::new();
    for i in 0..12 {
        let human = if i % 2 == 0 { "surface" } else { "semantic" };
        let sos = if i % 2 == 0 || i < 8 { -0.1 } else { 0.2 };
        right.push(f64::from(u8::from((sos < 0.0) == (human == "surface"))));
        text += &format!("de,{human},{human},{sos}\n");
    }
    assert_eq!(right.iter().sum::<f64>(), 8.0);
    let labels = d.join("l.csv");
    std::fs::write(&labels, text).unwrap();
    let out = d.join("v.csv");
    ok(&[
        "validate",
        "--labels",
        p(&labels),
        "--raters",
        "r1,r2",
        "--sos-col",
        "sos",
        "--out",
        p(&out),
        "--ci",
        "0.8",
        "--bootstrap",
        "400",
        "--ci-method",
        "percentile",
        "--seed",
        "2",
    ]);
    let (header, rows) = read_csv(&out);
    assert_eq!(
        header,
        [
            "method", "subset", "n", "acc", "acc_lo", "acc_hi", "p_sur", "p_sur_lo", "p_sur_hi", "p_sem",
            "p_sem_lo", "p_sem_hi"
        ]
    );
    let all = &rows[0];
    assert_eq!(all[..4], ["sos", "all", "12", &(8.0f64 / 12.0).to_string()]);
    let draws = Draws::new(12, 400, stream_seed(2, "validate\u{1f}sos\u{1f}all"));
    let shares: Vec<f64> =
        draws.iter().map(|idx| idx.iter().map(|&i| right[i as usize]).sum::<f64>() / 12.0).collect();
    let want = percentile_interval(&shares, 0.8).unwrap();
    assert!(
        (number(&all[4]) - want.lo).abs() < 1e-15 && (number(&all[5]) - want.hi).abs() < 1e-15,
        "{all:?} vs {want:?}"
    );
    // Surface is predicted on the 6 even and 4 odd images (6 of 10 right): an interval around
    // 0.6. Semantic only on images 9 and 11: about one resample in nine draws neither, where
    // p_sem is undefined, so its interval is undefined too (two empty cells), as documented.
    assert!(number(&all[7]) <= number(&all[6]) && number(&all[6]) <= number(&all[8]), "{all:?}");
    assert_eq!((all[9].as_str(), all[10].as_str(), all[11].as_str()), ("1", "", ""));
    // no_en: every image is German, the same labelled images, another stream.
    assert_eq!(rows[1][..3], ["sos", "no_en", "12"]);
    assert_eq!(
        manifest(&out)["uncertainty"]["unit"],
        "images with a human label, within each (method, subset)"
    );
}

/// `clipscore --summary --summary-by model,language --ci`: the mean CLIPScore per group over its
/// images, by hand from the per-image scores, and intervals by hand from known draws: with seed
/// 2, the one resample of group (A, en) draws its images [1, 1] and that of (B, en) [0, 0]
/// (SplitMix64 from seed XOR FNV-1a("clipscore", model, language), scripts/fixtures/
/// make_bootstrap.py's `draws`), so the percentile interval of one replicate is that image's
/// score twice; a group of one image has the interval [score, score].
#[test]
fn clipscore_ci_resamples_images_within_groups() {
    use crate::common::Cli;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let images = culturelens_testkit::fixture("encoders/images");
    // Captions of tests/fixtures/clipscore/tiny_clip.json: "\u{125}" and "\u{12d}" score above the
    // tiny CLIP's clamp, "man" and "woman" below it.
    let rows = [
        ("A", "en", "a_rgb.png", "\u{125}"),
        ("A", "en", "b_grey.png", "\u{12d}"),
        ("B", "en", "d_photo.jpg", "\u{125}"),
        ("B", "en", "c_rgba.png", "man"),
        ("C", "ja", "e_lossless.webp", "woman"),
    ];
    let mut text = String::from("image,model,language,caption\n");
    for (model, language, name, caption) in rows {
        text += &format!("{},{model},{language},{caption}\n", images.join(name).display());
    }
    let manifest_csv = d.join("m.csv");
    std::fs::write(&manifest_csv, text).unwrap();
    let run = |out: &Path, extra: &[&str]| {
        let mut cli = Cli::new("clipscore")
            .opt("--images", &manifest_csv)
            .opt("--weights", culturelens_testkit::fixture("encoders/clip"))
            .opt("--caption-cols", "caption")
            .opt("--out", out);
        for a in extra {
            cli = cli.arg(a);
        }
        cli
    };
    let (plain, scored, summary) = (d.join("plain.csv"), d.join("scored.csv"), d.join("summary.csv"));
    run(&plain, &[]).run_ok();
    let hand =
        ["--summary-by", "model,language", "--ci", "0.9", "--ci-method", "percentile", "--bootstrap", "1"];
    let stdout =
        run(&scored, &[&["--summary", p(&summary), "--seed", "2"][..], &hand].concat()).run_ok().stdout;
    assert!(stdout.contains("90% percentile bootstrap, 1 resamples of scored images within each (model, language) group, seed 2"), "{stdout}");
    assert_eq!(
        std::fs::read(&plain).unwrap(),
        std::fs::read(&scored).unwrap(),
        "--summary leaves --out as it was"
    );
    let (_, per_image) = read_csv(&scored);
    let score: Vec<f64> = per_image.iter().map(|r| number(&r[5])).collect();
    eprintln!("clipscore per image: {score:?}");
    assert!(score[0] != score[1] && score[2] != score[3], "the draws must be told apart: {score:?}");
    let (header, rows) = read_csv(&summary);
    assert_eq!(
        header,
        ["model", "language", "n", "caption_clipscore", "caption_clipscore_lo", "caption_clipscore_hi"]
    );
    let want = [
        ("A", "2", (score[0] + score[1]) / 2.0, score[1]),
        ("B", "2", (score[2] + score[3]) / 2.0, score[2]),
        ("C", "1", score[4], score[4]),
    ];
    assert_eq!(rows.len(), 3);
    for (row, (model, n, mean, replicate)) in rows.iter().zip(want) {
        assert_eq!((row[0].as_str(), row[2].as_str()), (model, n), "{row:?}");
        assert_eq!(number(&row[3]), mean, "{row:?}");
        assert_eq!((number(&row[4]), number(&row[5])), (replicate, replicate), "{row:?}");
    }
    let uncertainty = &manifest(&summary)["uncertainty"];
    assert_eq!(uncertainty["unit"], "scored images within each (model, language) group");
    assert_eq!(uncertainty["method"], "bootstrap (percentile)");
    assert_eq!(manifest(&scored)["uncertainty"], *uncertainty);

    // The default BCa at 0.95 with 1000 resamples: the same seed gives the same bytes; the
    // interval of each group with two images lies between its two scores.
    let (again, first) = (d.join("again.csv"), d.join("first.csv"));
    for path in [&first, &again] {
        run(&scored, &["--summary", p(path), "--summary-by", "model,language", "--ci", "0.95"]).run_ok();
    }
    assert_eq!(std::fs::read(&first).unwrap(), std::fs::read(&again).unwrap());
    let (_, rows) = read_csv(&first);
    for (row, pair) in rows.iter().zip([[score[0], score[1]], [score[2], score[3]]]) {
        let (lo, hi) = (number(&row[4]), number(&row[5]));
        let (min, max) = (pair[0].min(pair[1]), pair[0].max(pair[1]));
        assert!(min <= lo && lo <= number(&row[3]) && number(&row[3]) <= hi && hi <= max, "{row:?}");
    }
    // Without --ci: no bounds; without --group-by: one group of all scored images.
    run(&scored, &["--summary", p(&summary)]).run_ok();
    let (header, rows) = read_csv(&summary);
    assert_eq!(header, ["n", "caption_clipscore"]);
    assert_eq!(rows, [vec!["5".to_string(), (score.iter().sum::<f64>() / 5.0).to_string()]]);
    assert!(manifest(&summary).get("uncertainty").is_none());

    // Bad input: a clear error, nothing written.
    let never = d.join("never.csv");
    let stderr = run(&never, &["--ci", "0.9"]).run_fails().stderr;
    assert!(stderr.contains("--summary FILE"), "{stderr}");
    let stderr = run(&never, &["--summary-by", "model"]).run_fails().stderr;
    assert!(stderr.contains("--summary"), "{stderr}");
    let stderr = run(&never, &["--summary", p(&d.join("s2.csv")), "--summary-by", "seed"]).run_fails().stderr;
    assert!(stderr.contains("seed"), "{stderr}");
    assert!(!never.exists() && !d.join("s2.csv").exists());
}
