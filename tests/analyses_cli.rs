//! End-to-end tests of the analysis commands on hand-worked inputs and reference fixtures:
//! `culturelens magbig` (MAGBIG §4) and `culturelens agreement` (SoS App. B.2, against statsmodels,
//! scikit-learn and the krippendorff package: scripts/fixtures/make_agreement.py).

use std::path::Path;

use culturelens_testkit::{fixture, read_fixture};

use crate::common::{Cli, read_csv};

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn close(got: f64, want: f64, tol: f64, what: &str) {
    assert!((got - want).abs() <= tol, "{what}: {got} vs {want}");
}

#[test]
fn magbig_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    // m1/de/direct: prompt a 3 male + 1 female (+1 unclassified), prompt b 0 male + 2 female,
    // prompt c only unclassified (skipped). m1/de/indirect: prompt a 1 + 1.
    // m0/en/direct: prompt x 1 male (sorted first).
    let a = write(
        dir.path(),
        "a.csv",
        "model,language,set,prompt_id,gender,image\n\
         m1,de,direct,a,male,1.png\nm1,de,direct,a,male,2.png\nm1,de,direct,a,female,3.png\n\
         m1,de,direct,a,male,4.png\nm1,de,direct,a,,5.png\nm1,de,direct,b,female,6.png\n\
         m1,de,direct,b,female,7.png\nm1,de,direct,c,,8.png\nm1,de,indirect,a,male,9.png\n\
         m1,de,indirect,a,female,10.png\nm0,en,direct,x,male,11.png\n",
    );
    let out = dir.path().join("out.csv");
    Cli::new("magbig").opt("--attributes", &a).opt("--out", &out).run_ok();
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        text.lines().next().unwrap(),
        "model,language,set,n_prompts,n_images,mad,mad_random,male_share"
    );
    let (_, rows) = read_csv(&out);
    let keys: Vec<String> = rows.iter().map(|r| r[..3].join("/")).collect();
    assert_eq!(keys, ["m0/en/direct", "m1/de/direct", "m1/de/indirect"]);
    let value = |row: usize, col: usize| rows[row][col].parse::<f64>().unwrap();
    // m0/en/direct: one prompt, one male image: deviation 1, E|2B − 1| = 1, p_m = 1.
    assert_eq!(rows[0][3..5], ["1".to_string(), "1".to_string()]);
    close(value(0, 5), 1.0, 0.0, "mad m0");
    close(value(0, 6), 1.0, 1e-15, "mad_random m0");
    close(value(0, 7), 1.0, 0.0, "male_share m0");
    // m1/de/direct: prompts a (¾ male: deviation ½, n = 4) and b (0 male: deviation 1, n = 2).
    // mad = ¾; male_share = 3/8; mad_random = (E_4 + E_2)/2 = (0.375 + 0.5)/2.
    assert_eq!(rows[1][3..5], ["2".to_string(), "6".to_string()]);
    close(value(1, 5), 0.75, 1e-15, "mad m1 direct");
    close(value(1, 6), 0.4375, 1e-15, "mad_random m1 direct");
    close(value(1, 7), 0.375, 1e-15, "male_share m1 direct");
    // m1/de/indirect: 1 + 1: deviation 0, E_2 = ½, p_m = ½.
    close(value(2, 5), 0.0, 0.0, "mad m1 indirect");
    close(value(2, 6), 0.5, 1e-15, "mad_random m1 indirect");
    close(value(2, 7), 0.5, 0.0, "male_share m1 indirect");
}

#[test]
fn magbig_bad_input_names_file_row_and_column_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.csv");
    let bad = write(
        dir.path(),
        "bad.csv",
        "model,language,set,prompt_id,gender\nm,de,direct,a,male\nm,de,direct,a,Frau\n",
    );
    let err = Cli::new("magbig").opt("--attributes", &bad).opt("--out", &out).run_fails().stderr;
    assert!(err.contains("bad.csv") && err.contains("line 3") && err.contains("column gender"), "{err}");
    assert!(err.contains("unknown gender \"Frau\""), "{err}");
    let missing = write(dir.path(), "missing.csv", "model,language,prompt_id,gender\nm,de,a,male\n");
    let err = Cli::new("magbig").opt("--attributes", &missing).opt("--out", &out).run_fails().stderr;
    assert!(
        err.contains("missing.csv") && err.contains("column set") && err.contains("required column"),
        "{err}"
    );
    assert!(!out.exists(), "no output after an error");
}

/// Compares a statistic that may be null.
fn same(got: &serde_json::Value, want: &serde_json::Value, what: &str) {
    match (got.as_f64(), want.as_f64()) {
        (Some(g), Some(w)) => close(g, w, 1e-12, what),
        _ => assert!(got.is_null() && want.is_null(), "{what}: {got} vs {want}"),
    }
}

#[test]
fn agreement_matches_statsmodels_sklearn_and_krippendorff() {
    let expected: serde_json::Value = serde_json::from_str(&read_fixture("agreement/expected.json")).unwrap();
    let cases = expected["cases"].as_object().unwrap();
    assert_eq!(cases.len(), 3);
    let dir = tempfile::tempdir().unwrap();
    for (name, want) in cases {
        let raters: Vec<&str> =
            want["raters"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
        let out = dir.path().join(format!("{name}.json"));
        let labels = fixture(&format!("agreement/{name}.csv"));
        let joined = raters.join(",");
        let level = want["level"].as_str().unwrap();
        Cli::new("agreement")
            .opt("--labels", &labels)
            .opt("--raters", &joined)
            .opt("--level", level)
            .opt("--out", &out)
            .run_ok();
        let text = std::fs::read_to_string(&out).unwrap();
        let got: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(got["n_items"], want["n_items"], "{name} n_items");
        same(&got["fleiss_kappa"], &want["fleiss_kappa"], &format!("{name} fleiss"));
        same(&got["krippendorff_alpha"], &want["krippendorff_alpha"], &format!("{name} alpha"));
        let pairs: Vec<&String> = want["cohen_kappa"].as_object().unwrap().keys().collect();
        assert_eq!(pairs.len(), raters.len() * (raters.len() - 1) / 2);
        for pair in &pairs {
            same(
                &got["cohen_kappa"][pair.as_str()],
                &want["cohen_kappa"][pair.as_str()],
                &format!("{name} cohen {pair}"),
            );
        }
        // Pairs appear in the order the raters were given: A|B before A|C before B|C.
        let first = format!("\"{}|{}\"", raters[0], raters[1]);
        let last = format!("\"{}|{}\"", raters[raters.len() - 2], raters[raters.len() - 1]);
        assert!(text.find(&first).unwrap() < text.find(&last).unwrap(), "{text}");
        let labels = want["per_label"].as_object().unwrap();
        assert_eq!(got["per_label"].as_object().unwrap().len(), labels.len(), "{name} labels");
        for (label, by_pair) in labels {
            for (pair, value) in by_pair.as_object().unwrap() {
                same(&got["per_label"][label][pair], value, &format!("{name} per_label {label} {pair}"));
            }
        }
    }
}

#[test]
fn agreement_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.json");
    let labels = write(dir.path(), "l.csv", "a,b\n1,2\nx,1\n");
    let agreement = |raters: &str| {
        Cli::new("agreement").opt("--labels", &labels).opt("--raters", raters).opt("--out", &out)
    };
    let err = agreement("a,c").run_fails().stderr;
    assert!(err.contains("l.csv") && err.contains("column c"), "{err}");
    let err = agreement("a,b").opt("--level", "ordinal").run_fails().stderr;
    assert!(err.contains("l.csv") && err.contains("line 3") && err.contains("column a"), "{err}");
    let err = agreement("a").run_fails().stderr;
    assert!(err.contains("at least two"), "{err}");
    assert!(!out.exists(), "no output after an error");
}

#[test]
fn magbig_report_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    // Direct: a 2 male (dev 1), b 1:1 (dev 0), c 1 male (dev 1); indirect: a 1:1, b 1 female, c 1:1.
    let a = write(
        dir.path(),
        "a.csv",
        "model,language,set,prompt_id,gender,attempt\n\
         m,de,direct,a,male,1\nm,de,direct,a,male,3\nm,de,direct,b,female,1\nm,de,direct,b,male,2\n\
         m,de,direct,c,male,1\nm,de,indirect,a,male,1\nm,de,indirect,a,female,4\n\
         m,de,indirect,b,female,1\nm,de,indirect,c,male,2\nm,de,indirect,c,female,5\n",
    );
    let npy = |name: &str, rows: &[[f32; 2]]| {
        let path = dir.path().join(name);
        let m = culturelens_table::Matrix::new(rows.len(), 2, rows.iter().flatten().copied().collect());
        culturelens_table::write_npy(&mut std::fs::File::create(&path).unwrap(), &m).unwrap();
        path
    };
    let images = npy(
        "i.npy",
        &[
            [1.0, 0.0],
            [0.0, 1.0],
            [1.0, 0.0],
            [3.0, 4.0],
            [1.0, 0.0],
            [0.0, 1.0],
            [0.0, 2.0],
            [0.0, 1.0],
            [0.0, 1.0],
            [0.0, 1.0],
        ],
    );
    // Direct prompts (1,0), indirect (0,1), the reference of prompt a (1,1).
    let texts =
        npy("t.npy", &[[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [1.0, 1.0]]);
    let text_meta = write(
        dir.path(),
        "tm.csv",
        "language,set,prompt_id\nde,direct,a\nde,direct,b\nde,direct,c\nde,indirect,a\nde,indirect,b\nde,indirect,c\nde,ref,a\n",
    );
    let (out, report) = (dir.path().join("out.csv"), dir.path().join("r.json"));
    Cli::new("magbig")
        .opt("--attributes", &a)
        .opt("--out", &out)
        .opt("--report", &report)
        .opt("--compare", "direct,indirect")
        .opt("--image-embeddings", &images)
        .opt("--text-embeddings", &texts)
        .opt("--text-meta", &text_meta)
        .opt("--reference-set", "ref")
        .run_ok();
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let groups = r["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    let (direct, indirect) = (&groups[0], &groups[1]);
    assert_eq!((direct["set"].as_str(), indirect["set"].as_str()), (Some("direct"), Some("indirect")));
    // Attempts: direct a 3, b 2, c 1; indirect a 4, b 1, c 5; 5 rows over 3 prompts each.
    close(direct["attempts"]["mean_per_prompt"].as_f64().unwrap(), 2.0, 0.0, "attempts direct");
    close(indirect["attempts"]["mean_per_prompt"].as_f64().unwrap(), 10.0 / 3.0, 1e-15, "attempts indirect");
    close(direct["attempts"]["images_per_prompt"].as_f64().unwrap(), 5.0 / 3.0, 1e-15, "images direct");
    // Alignment: direct images score 1, 0, 1, 0.6, 1 with their prompts; indirect all 1; the
    // reference (1,1) of prompt a scores 1/√2 for each of the four a images.
    close(direct["alignment"]["own"].as_f64().unwrap(), 0.72, 1e-6, "own direct");
    close(indirect["alignment"]["own"].as_f64().unwrap(), 1.0, 1e-6, "own indirect");
    close(direct["alignment"]["reference"].as_f64().unwrap(), 0.5f64.sqrt(), 1e-6, "ref direct");
    close(indirect["alignment"]["reference"].as_f64().unwrap(), 0.5f64.sqrt(), 1e-6, "ref indirect");
    close(direct["bias"]["mad"].as_f64().unwrap(), 2.0 / 3.0, 1e-15, "mad direct");
    let tests = r["wilcoxon"].as_array().unwrap();
    assert_eq!(tests.len(), 2);
    // Deviation differences 1, −1, 1: tied ranks 2, 2, 2, R+ = 4, R− = 2; of the 8 sign patterns
    // R+ ≥ 4 in 4, so p = min(1, 2·4/8) = 1.
    let dev = &tests[0];
    assert_eq!(dev["measure"], "deviation");
    assert_eq!(dev["test"]["n_pairs"], 3);
    assert_eq!(dev["test"]["statistic"], 2.0);
    assert_eq!(dev["test"]["pvalue"], 1.0);
    assert_eq!(dev["test"]["method"], "exact");
    // Alignment per prompt: a 0.5 − 1, b 0.8 − 1, c 0 (dropped): ranks 2, 1 both negative,
    // R+ = 0: P(R+ ≤ 0) = 1/4, p = 1/2.
    let al = &tests[1];
    assert_eq!(al["measure"], "alignment");
    assert_eq!((al["test"]["n_zero"].as_u64(), al["test"]["statistic"].as_f64()), (Some(1), Some(0.0)));
    assert_eq!(al["test"]["pvalue"], 0.5);
}

#[test]
fn magbig_report_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(
        dir.path(),
        "a.csv",
        "model,language,set,prompt_id,gender,attempt\nm,de,direct,a,male,1\nm,de,direct,a,male,zero\n",
    );
    let (out, report) = (dir.path().join("out.csv"), dir.path().join("r.json"));
    let err = Cli::new("magbig")
        .opt("--attributes", &a)
        .opt("--out", &out)
        .opt("--report", &report)
        .run_fails()
        .stderr;
    assert!(err.contains("a.csv") && err.contains("line 3") && err.contains("column attempt"), "{err}");
    assert!(!out.exists() && !report.exists(), "no output after an error");
}

#[test]
fn validate_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    // Human majorities: surface, semantic (2 of 2 given), japan (a distractor), none (left out),
    // surface. SoS labels: surface, semantic, semantic, -, none (SoS = 0). CLIPScore labels
    // (2.5·max(cos, 0)): surface, surface, none (0 = 0), -, semantic.
    let labels = write(
        dir.path(),
        "l.csv",
        "language,r1,r2,r3,sos,cs_sur,cs_sem\n\
         de,surface,surface,semantic,-0.1,0.3,0.2\nde,semantic,semantic,,0.2,0.3,0.2\n\
         en,surface,japan,japan,0.1,-0.1,-0.2\nen,surface,semantic,japan,0.1,0.1,0.3\n\
         ja,surface,surface,surface,0,0.1,0.4\n",
    );
    let out = dir.path().join("v.csv");
    Cli::new("validate")
        .opt("--labels", &labels)
        .opt("--raters", "r1,r2,r3")
        .opt("--sos-col", "sos")
        .opt("--clipscore-cols", "cs_sur,cs_sem")
        .opt("--out", &out)
        .run_ok();
    assert_eq!(
        std::fs::read_to_string(&out).unwrap().lines().next().unwrap(),
        "method,subset,n,acc,p_sur,p_sem"
    );
    let (_, rows) = read_csv(&out);
    // (method, subset, n, acc, p_sur, p_sem)
    type Row<'a> = (&'a str, &'a str, &'a str, f64, Option<f64>, Option<f64>);
    let want: [Row; 4] = [
        ("sos", "all", "4", 0.5, Some(1.0), Some(0.5)),
        ("sos", "no_en", "3", 2.0 / 3.0, Some(1.0), Some(1.0)),
        ("clipscore", "all", "4", 0.25, Some(0.5), Some(0.0)),
        ("clipscore", "no_en", "3", 1.0 / 3.0, Some(0.5), Some(0.0)),
    ];
    assert_eq!(rows.len(), want.len());
    for (row, (method, subset, n, acc, p_sur, p_sem)) in rows.iter().zip(want) {
        assert_eq!(row[..3], [method, subset, n].map(String::from), "{row:?}");
        close(row[3].parse().unwrap(), acc, 1e-15, "acc");
        let opt = |s: &str| (!s.is_empty()).then(|| s.parse::<f64>().unwrap());
        assert_eq!((opt(&row[4]), opt(&row[5])), (p_sur, p_sem), "{row:?}");
    }
    let bad = write(dir.path(), "b.csv", "language,r1,r2,sos\nde,surface,surface,x\n");
    let err = Cli::new("validate")
        .opt("--labels", &bad)
        .opt("--raters", "r1,r2")
        .opt("--sos-col", "sos")
        .opt("--out", dir.path().join("b.out"))
        .run_fails()
        .stderr;
    assert!(err.contains("b.csv") && err.contains("line 2") && err.contains("column sos"), "{err}");
    assert!(!dir.path().join("b.out").exists());
}
