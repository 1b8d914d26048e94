//! End-to-end tests of `culturelens sos` and `culturelens demo` through the built binary.

mod common;

use common::{fails, ok, p, read_csv};

/// Writes the synthetic demo table (embeddings.npy, meta.csv, sos.csv) into a fresh directory.
fn demo_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let stdout = ok(&["demo", "--write", p(dir.path())]);
    assert!(stdout.contains("SYNTHETIC"), "the demo must say it is synthetic:\n{stdout}");
    dir
}

#[test]
fn sos_on_demo_table_writes_the_contract_csv() {
    let dir = demo_dir();
    let d = dir.path();
    let out = d.join("out.csv");
    let stdout = ok(&[
        "sos",
        "--embeddings",
        p(&d.join("embeddings.npy")),
        "--meta",
        p(&d.join("meta.csv")),
        "--out",
        p(&out),
        "--per-image",
        p(&d.join("per_image.csv")),
        "--report",
        p(&d.join("report.json")),
    ]);
    assert!(stdout.contains("synth-monolingual") && stdout.contains("Strong surface tendency"), "{stdout}");
    let (header, rows) = read_csv(&out);
    assert_eq!(header, ["model", "language", "culture", "n", "sos"]);
    assert_eq!(rows.len(), 3 * 8 * 10, "one row per (model, language, culture)");
    for row in &rows {
        assert_eq!(row[3], "9", "3 templates x 3 person terms per cell");
        let v: f64 = row[4].parse().unwrap();
        assert!((-1.0..=1.0).contains(&v));
        let digits = row[4].trim_start_matches('-').replace('.', "").trim_start_matches('0').len();
        assert!(digits >= 9 || v == 0.0, "sos needs >= 9 significant digits: {}", row[4]);
    }
    // The demo command's own scores are the same numbers.
    assert_eq!(read_csv(&d.join("sos.csv")).1, rows);
    let (ph, prow) = read_csv(&d.join("per_image.csv"));
    assert_eq!(ph, ["row", "model", "language", "culture", "person", "sos"]);
    assert_eq!(prow.len(), 2160);
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["language_correlation"]["languages"].as_array().unwrap().len(), 8);
    // Planted tendency: the monolingual model follows the surface for am (strong flag).
    let flagged =
        report["language_medians"].as_array().unwrap().iter().any(|m| {
            m["model"] == "synth-monolingual" && m["language"] == "am" && m["strong_surface"] == true
        });
    assert!(flagged);
}

#[test]
fn parquet_table_gives_the_same_scores_and_per_model_pooling_differs() {
    let dir = demo_dir();
    let d = dir.path();
    let (npy, meta) = (d.join("embeddings.npy"), d.join("meta.csv"));
    ok(&["sos", "--embeddings", p(&npy), "--meta", p(&meta), "--out", p(&d.join("a.csv"))]);
    // Convert to Parquet through the embed-table writer used by every command.
    let table = culturelens_table::load_table(&npy, Some(&meta)).unwrap();
    culturelens_table::save_table(&table, &d.join("t.parquet"), None).unwrap();
    ok(&["sos", "--embeddings", p(&d.join("t.parquet")), "--out", p(&d.join("b.csv"))]);
    assert_eq!(read_csv(&d.join("a.csv")), read_csv(&d.join("b.csv")));
    ok(&[
        "sos",
        "--embeddings",
        p(&npy),
        "--meta",
        p(&meta),
        "--out",
        p(&d.join("c.csv")),
        "--pool",
        "per-model",
    ]);
    assert_ne!(read_csv(&d.join("a.csv")).1, read_csv(&d.join("c.csv")).1);
}

#[test]
fn bad_inputs_fail_clearly_and_leave_no_output() {
    let dir = demo_dir();
    let d = dir.path();
    let npy = d.join("embeddings.npy");
    let meta_text = std::fs::read_to_string(d.join("meta.csv")).unwrap();
    let out = d.join("out.csv");
    std::fs::write(&out, "previous contents").unwrap();
    let run = |meta: &str| {
        let m = d.join("bad.csv");
        std::fs::write(&m, meta).unwrap();
        fails(&["sos", "--embeddings", p(&npy), "--meta", p(&m), "--out", p(&out)])
    };

    // Row-count mismatch.
    let short: String = meta_text.lines().take(100).map(|l| format!("{l}\n")).collect();
    let err = run(&short);
    assert!(err.contains("bad.csv") && err.contains("row-count mismatch"), "{err}");
    // Missing required column.
    let no_culture = meta_text.replacen("culture", "kultur", 1);
    let err = run(&no_culture);
    assert!(err.contains("bad.csv, column culture: required column is missing"), "{err}");
    // Duplicated header name.
    let dup = meta_text.replacen("template", "model", 1);
    let err = run(&dup);
    assert!(err.contains("bad.csv, line 1, column model: duplicated column name"), "{err}");
    // Empty value: line 6 is data row 4.
    let mut lines: Vec<String> = meta_text.lines().map(String::from).collect();
    lines[5] = lines[5].replacen(",en,", ",,", 1);
    let err = run(&(lines.join("\n") + "\n"));
    assert!(err.contains("bad.csv, line 6 (data row 4), column language: empty value"), "{err}");
    // The pre-existing output is untouched and no temp file is left behind.
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "previous contents");
    let leftovers = std::fs::read_dir(d)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".tmp"))
        .count();
    assert_eq!(leftovers, 0);
}

#[test]
fn non_finite_and_malformed_embeddings_are_rejected() {
    let dir = demo_dir();
    let d = dir.path();
    let meta = d.join("meta.csv");
    let mut table = culturelens_table::load_table(&d.join("embeddings.npy"), Some(&meta)).unwrap();
    let mut data = table.embeddings.data().to_vec();
    data[7 * 64 + 3] = f32::INFINITY;
    table.embeddings = culturelens_table::Matrix::new(2160, 64, data);
    let bad = d.join("inf.npy");
    culturelens_table::save_table(&table, &bad, None).unwrap();
    let out = d.join("never.csv");
    let err = fails(&["sos", "--embeddings", p(&bad), "--meta", p(&meta), "--out", p(&out)]);
    assert!(err.contains("inf.npy, row 7, column dim 3: non-finite value inf"), "{err}");
    assert!(!out.exists());
    std::fs::write(d.join("junk.npy"), b"not an npy file").unwrap();
    let err = fails(&["sos", "--embeddings", p(&d.join("junk.npy")), "--meta", p(&meta), "--out", p(&out)]);
    assert!(err.contains("junk.npy") && err.contains("magic"), "{err}");
    assert!(!out.exists());
}

#[test]
fn help_documents_the_conventions() {
    let help = ok(&["sos", "--help"]);
    for needle in [
        "L2-normalised",
        "includes the output itself",
        "--pool",
        "per (model, layer)",
        "25th percentile",
        "Pearson",
        "model,language,culture,n,sos",
    ] {
        assert!(help.contains(needle), "sos --help should mention `{needle}`");
    }
}
