//! End-to-end tests of `culturelens sos` and `culturelens demo` through the built binary.

use crate::common::{fails, ok, p, read_csv};

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

/// A committed file of the independent numpy reference (scripts/fixtures/make_demo_sos_reference.py,
/// run on `culturelens demo --write`).
fn numpy_reference(name: &str) -> (Vec<String>, Vec<Vec<String>>) {
    read_csv(&culturelens_testkit::fixture(name))
}

/// Largest |CLI − reference| over joint-score rows keyed by (model, language, culture); the keys
/// and cell sizes must agree exactly.
fn max_joint_difference(cli: &[Vec<String>], reference: &[Vec<String>]) -> f64 {
    assert_eq!(cli.len(), reference.len(), "one row per (model, language, culture) on both sides");
    let mut worst = 0f64;
    for (got, want) in cli.iter().zip(reference) {
        assert_eq!(got[..4], want[..4], "same cell and n");
        let (g, w): (f64, f64) = (got[4].parse().unwrap(), want[4].parse().unwrap());
        worst = worst.max((g - w).abs());
    }
    worst
}

/// f32 on the device against numpy in f64, for the joint scores, per-model distributions,
/// model–language medians and language correlations of the demo table: measured 9.2e-8 (flex).
const NUMPY_BOUND: f64 = 2e-7;

/// A table `generate` → `embed` made has an `image` column: the per-image CSV carries it (so a
/// score finds its image in pandas or R), and every score is the device's f32 in full (its exact
/// value as f64 text, not rounded to 10 decimals).
#[test]
fn per_image_scores_name_their_image_in_full_precision() {
    let dir = demo_dir();
    let d = dir.path();
    let meta = std::fs::read_to_string(d.join("meta.csv")).unwrap();
    let mut lines = meta.lines();
    let mut with_images = format!("{},image\n", lines.next().unwrap());
    for (i, line) in lines.enumerate() {
        with_images += &format!("{line},imgs/{i:06}_00.png\n");
    }
    std::fs::write(d.join("meta_images.csv"), with_images).unwrap();
    let per_image = d.join("per_image.csv");
    ok(&[
        "sos",
        "--embeddings",
        p(&d.join("embeddings.npy")),
        "--meta",
        p(&d.join("meta_images.csv")),
        "--out",
        p(&d.join("out.csv")),
        "--per-image",
        p(&per_image),
    ]);
    let (header, rows) = read_csv(&per_image);
    assert_eq!(header, ["row", "image", "model", "language", "culture", "person", "sos"]);
    assert_eq!(rows[5][1], "imgs/000005_00.png");
    for row in &rows {
        let text = &row[6];
        let value: f64 = text.parse().unwrap();
        assert_eq!(value, f64::from(value as f32), "{text} is an f32 written in full");
    }
}

#[test]
fn sos_on_demo_table_equals_the_numpy_reference() {
    let dir = demo_dir();
    let d = dir.path();
    let (npy, meta) = (d.join("embeddings.npy"), d.join("meta.csv"));
    let (out, per_model, report) = (d.join("out.csv"), d.join("per-model.csv"), d.join("report.json"));
    let table = ["--embeddings", p(&npy), "--meta", p(&meta)];
    ok(&[&["sos"], &table[..], &["--out", p(&out), "--report", p(&report)]].concat());
    ok(&[&["sos"], &table[..], &["--out", p(&per_model), "--pool", "per-model"]].concat());

    let (header, rows) = read_csv(&out);
    let (ref_header, ref_rows) = numpy_reference("demo_sos_reference.csv");
    assert_eq!(header, ref_header);
    let pooled = max_joint_difference(&rows, &ref_rows);
    let per_model_pooling =
        max_joint_difference(&read_csv(&per_model).1, &numpy_reference("demo_sos_reference_per_model.csv").1);
    println!("max |joint SoS - numpy|: pooled {pooled:.2e}, per-model pooling {per_model_pooling:.2e}");
    assert!(pooled <= NUMPY_BOUND && per_model_pooling <= NUMPY_BOUND);

    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let num = |s: &str| s.parse::<f64>().unwrap();
    let mut worst = 0f64;
    let mut close = |got: &serde_json::Value, want: &str, what: &str| {
        let diff = (got.as_f64().unwrap_or_else(|| panic!("{what}: {got}")) - num(want)).abs();
        assert!(diff <= NUMPY_BOUND, "{what}: {got} vs numpy {want}");
        worst = worst.max(diff);
    };
    let (h, summary) = numpy_reference("demo_sos_reference_summary.csv");
    assert_eq!(h, ["model", "n", "mean", "median", "q1", "q3", "min", "max"]);
    assert_eq!(summary.len(), report["per_model"].as_object().unwrap().len());
    for row in &summary {
        let m = &report["per_model"][&row[0]];
        assert_eq!(m["n"].as_u64().unwrap().to_string(), row[1], "{}", row[0]);
        for (i, key) in h.iter().enumerate().skip(2) {
            close(&m[key.as_str()], &row[i], &format!("per_model {} {key}", row[0]));
        }
    }
    let (_, languages) = numpy_reference("demo_sos_reference_languages.csv");
    let medians = report["language_medians"].as_array().unwrap();
    assert_eq!(medians.len(), languages.len());
    for (m, want) in medians.iter().zip(&languages) {
        assert_eq!((m["model"].as_str().unwrap(), m["language"].as_str().unwrap()), (&*want[0], &*want[1]));
        assert_eq!(m["n"].as_u64().unwrap().to_string(), want[2]);
        close(&m["mean"], &want[3], "language mean");
        close(&m["median"], &want[4], "language median");
        assert_eq!(m["strong_surface"].as_bool().unwrap().to_string(), want[5], "{}/{}", want[0], want[1]);
    }
    let (_, correlation) = numpy_reference("demo_sos_reference_correlation.csv");
    let c = &report["language_correlation"];
    let langs: Vec<&str> = c["languages"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    assert_eq!(correlation.len(), langs.len() * langs.len());
    for row in &correlation {
        let (a, b) = (
            langs.iter().position(|l| *l == row[0]).unwrap(),
            langs.iter().position(|l| *l == row[1]).unwrap(),
        );
        assert_eq!(c["pairs"][a][b].as_u64().unwrap().to_string(), row[2]);
        if row[3].is_empty() {
            assert!(c["r"][a][b].is_null(), "r {}/{} is undefined in numpy", row[0], row[1]);
        } else {
            close(&c["r"][a][b], &row[3], &format!("r {}/{}", row[0], row[1]));
        }
    }
    println!("max |report value - numpy| (distributions, medians, correlations): {worst:.2e}");
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

/// `--device wgpu` names its adapter on stderr and in the provenance, and warns when it is a
/// software one (lavapipe on a machine without a GPU: the CI's case).
#[test]
fn wgpu_names_its_adapter_and_warns_on_a_software_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    crate::common::Cli::new("demo").opt("--write", d).run_ok();
    let out = d.join("s.csv");
    let run = crate::common::Cli::new("sos")
        .opt("--embeddings", d.join("embeddings.npy"))
        .opt("--meta", d.join("meta.csv"))
        .opt("--out", &out)
        .opt("--device", "wgpu")
        .run_ok();
    let line =
        run.stderr.lines().find_map(|l| l.strip_prefix("wgpu adapter: ")).expect(&run.stderr).to_string();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("s.csv.provenance.json")).unwrap()).unwrap();
    assert_eq!(manifest["adapter"], line.as_str());
    let software = line.ends_with(", Cpu)");
    assert_eq!(run.stderr.contains("is a software adapter"), software, "{}", run.stderr);
    // The CPU device has no adapter.
    let cpu = d.join("cpu.csv");
    let run = crate::common::Cli::new("sos")
        .opt("--embeddings", d.join("embeddings.npy"))
        .opt("--meta", d.join("meta.csv"))
        .opt("--out", &cpu)
        .run_ok();
    assert!(!run.stderr.contains("wgpu adapter"));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("cpu.csv.provenance.json")).unwrap()).unwrap();
    assert!(manifest.get("adapter").is_none());
}

/// An `.npy` table without `--meta` is refused by a message that says what to give, not by an
/// empty list of present columns.
#[test]
fn sos_without_metadata_says_to_give_meta() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(&["demo", "--write", p(d)]);
    let out = d.join("never.csv");
    let err = fails(&["sos", "--embeddings", p(&d.join("embeddings.npy")), "--out", p(&out)]);
    assert!(err.contains("embeddings.npy: the table has no metadata columns; give --meta M.csv with the columns model, language, culture"), "{err}");
    assert!(!out.exists());
}
