//! End-to-end tests of `culturelens vendi` through the built binary.

mod common;

use common::{fails, ok, p};
use culturelens_table::{EmbeddingTable, Matrix, Metadata, save_table};
use serde_json::Value;

fn json(path: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The vendi-score README kernel K = [[1,.9,0],[.9,1,0],[0,0,1]] as cosine embeddings
/// (e₁, .9e₁ + √.19 e₂, e₃), with a group column and a quality column.
fn readme_table(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let r = 0.19f32.sqrt();
    let m = Matrix::new(3, 3, vec![1.0, 0.0, 0.0, 0.9, r, 0.0, 0.0, 0.0, 1.0]);
    let meta = Metadata::from_columns(
        None,
        vec![
            ("prompt".into(), vec!["p".into(), "p".into(), "p".into()]),
            ("hps".into(), vec!["0.5".into(), "1.0".into(), "1.5".into()]),
        ],
    )
    .unwrap();
    let (npy, csv) = (dir.join("e.npy"), dir.join("m.csv"));
    save_table(&EmbeddingTable::new(m, meta), &npy, Some(&csv)).unwrap();
    (npy, csv)
}

#[test]
fn cosine_scores_match_the_vendi_score_readme() {
    let dir = tempfile::tempdir().unwrap();
    let (npy, csv) = readme_table(dir.path());
    let out = dir.path().join("v.json");
    for (q, want) in [("1", 2.1573), ("0", 3.0), ("2", 1.94805), ("inf", 1.57895)] {
        for route in ["kernel", "dual"] {
            ok(&["vendi", "--embeddings", p(&npy), "--q", q, "--route", route, "--out", p(&out)]);
            let v = json(&out);
            assert_eq!(v.as_object().unwrap().len(), 5, "exactly n, q, vs, qvs, qvs_norm: {v}");
            assert_eq!(v["n"], 3);
            let vs = v["vs"].as_f64().unwrap();
            assert!((vs - want).abs() < 5e-5, "q={q} {route}: {vs}");
            assert_eq!(v["qvs"].as_f64().unwrap(), vs, "uniform quality 1");
            assert!((v["qvs_norm"].as_f64().unwrap() - vs / 3.0).abs() < 1e-15);
        }
    }
    assert_eq!(json(&out)["q"], "inf");
    // Quality from a column and grouping.
    ok(&[
        "vendi",
        "--embeddings",
        p(&npy),
        "--meta",
        p(&csv),
        "--quality-col",
        "hps",
        "--group-by",
        "prompt",
        "--out",
        p(&out),
    ]);
    let v = json(&out);
    let g = &v["p"];
    let vs = g["vs"].as_f64().unwrap();
    assert!((g["qvs"].as_f64().unwrap() - vs).abs() < 1e-12, "mean quality (0.5+1+1.5)/3 = 1");
}

#[test]
fn categorical_and_precomputed_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("cube.csv");
    std::fs::write(&meta, "continent,country,artifact\nA,JP,a\nA,CN,b\nE,DE,c\nE,DE,c\n").unwrap();
    let out = dir.path().join("v.json");
    let args =
        ["vendi", "--meta", p(&meta), "--kernel", "categorical", "--columns", "continent,country,artifact"];
    ok(&[&args[..], &["--weights", "0.5,0.3,0.2", "--q", "inf", "--intdiv", "--out", p(&out)]].concat());
    // K/4 has eigenvalues .375, .125, .5, 0 → VS_inf = 2; intdiv = 1 - 3/12.
    let v = json(&out);
    assert!((v["vs"].as_f64().unwrap() - 2.0).abs() < 1e-12, "{v}");
    assert!((v["intdiv"].as_f64().unwrap() - 0.75).abs() < 1e-12);
    let err =
        fails(&[&args[..], &["--weights", "0.5,0.3,0.3", "--out", p(&dir.path().join("x.json"))]].concat());
    assert!(err.contains("sum to 1"), "{err}");
    assert!(!dir.path().join("x.json").exists());

    let k = Matrix::new(3, 3, vec![1.0, 0.9, 0.0, 0.9, 1.0, 0.0, 0.0, 0.0, 1.0]);
    let kpath = dir.path().join("k.npy");
    save_table(&EmbeddingTable::new(k, Metadata::empty(3)), &kpath, None).unwrap();
    ok(&["vendi", "--embeddings", p(&kpath), "--kernel", "precomputed", "--q", "2", "--out", p(&out)]);
    assert!((json(&out)["vs"].as_f64().unwrap() - 1.94805).abs() < 5e-6);
    let bad = Matrix::new(2, 2, vec![1.0, 2.0, 2.0, 1.0]);
    save_table(&EmbeddingTable::new(bad, Metadata::empty(2)), &kpath, None).unwrap();
    let err = fails(&["vendi", "--embeddings", p(&kpath), "--kernel", "precomputed", "--out", p(&out)]);
    assert!(err.contains("k.npy") && err.contains("not positive semi-definite"), "{err}");
    let err = fails(&[
        "vendi",
        "--embeddings",
        p(&kpath),
        "--kernel",
        "precomputed",
        "--route",
        "dual",
        "--out",
        p(&out),
    ]);
    assert!(err.contains("--route applies to cosine and categorical kernels"), "{err}");
}

/// The CUBE protocol on the categorical kernel and on the same kernel precomputed: the same
/// seeded batches, the same numbers; every batch of 2 scores 2 / (1 + s²) at q = 2.
#[test]
fn protocol_on_categorical_and_precomputed_kernels_agree() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("cube.csv");
    std::fs::write(&meta, "continent,country,artifact,hps\nA,JP,a,0.2\nA,CN,b,0.4\nE,DE,c,0.6\nE,DE,c,0.8\n")
        .unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let protocol = ["--q", "2", "--quality-col", "hps", "--batch-size", "2", "--repeats", "9", "--seed", "7"];
    let categorical = [
        "vendi",
        "--meta",
        p(&meta),
        "--kernel",
        "categorical",
        "--columns",
        "continent,country,artifact",
        "--weights",
        "0.5,0.3,0.2",
        "--intdiv",
    ];
    ok(&[&categorical[..], &protocol[..], &["--out", p(&a)]].concat());
    // K = [[1,.5,0,0],[.5,1,0,0],[0,0,1,1],[0,0,1,1]]
    let k = Matrix::new(
        4,
        4,
        vec![1.0, 0.5, 0.0, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0],
    );
    let kpath = dir.path().join("k.npy");
    save_table(&EmbeddingTable::new(k, Metadata::empty(4)), &kpath, None).unwrap();
    let precomputed =
        ["vendi", "--embeddings", p(&kpath), "--meta", p(&meta), "--kernel", "precomputed", "--intdiv"];
    ok(&[&precomputed[..], &protocol[..], &["--out", p(&b)]].concat());
    let (va, vb) = (json(&a), json(&b));
    for key in ["vs", "vs_sd", "qvs", "qvs_norm", "qvs_norm_sd", "intdiv", "intdiv_sd"] {
        let (x, y) = (va[key].as_f64().unwrap(), vb[key].as_f64().unwrap());
        assert!((x - y).abs() < 1e-6, "{key}: {x} vs {y}");
    }
    assert_eq!(
        (va["n"].as_u64(), va["batch_size"].as_u64(), va["repeats"].as_u64()),
        (Some(4), Some(2), Some(9))
    );
    let vs = va["vs"].as_f64().unwrap();
    assert!((1.0..=2.0).contains(&vs) && va["vs_sd"].as_f64().unwrap() > 0.0, "{va}");
}

/// Protocol seeds mix the group value: adding a group leaves the other groups' batches alone.
#[test]
fn protocol_groups_are_seeded_by_value() {
    let dir = tempfile::tempdir().unwrap();
    let (small, large) = (dir.path().join("small.csv"), dir.path().join("large.csv"));
    let rows = |groups: &[&str]| -> String {
        let mut text = String::from("country,artifact,prompt\n");
        for g in groups {
            for i in 0..6 {
                text += &format!("C{},a{},{g}\n", i % 3, i % 4);
            }
        }
        text
    };
    std::fs::write(&small, rows(&["p1", "p3"])).unwrap();
    std::fs::write(&large, rows(&["p1", "p2", "p3"])).unwrap();
    let run = |meta: &std::path::Path, out: &std::path::Path| {
        ok(&[
            "vendi",
            "--meta",
            p(meta),
            "--kernel",
            "categorical",
            "--columns",
            "country,artifact",
            "--weights",
            "0.5,0.5",
            "--group-by",
            "prompt",
            "--batch-size",
            "3",
            "--repeats",
            "5",
            "--seed",
            "11",
            "--out",
            p(out),
        ]);
        json(out)
    };
    let (a, b) = (run(&small, &dir.path().join("a.json")), run(&large, &dir.path().join("b.json")));
    assert_eq!(b.as_object().unwrap().len(), 3);
    assert_eq!(a["p3"], b["p3"], "p3's batches do not depend on p2");
    assert_eq!(a["p1"], b["p1"]);
}

#[test]
fn flags_that_would_be_ignored_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (npy, csv) = readme_table(dir.path());
    let out = dir.path().join("v.json");
    let err =
        fails(&["vendi", "--embeddings", p(&npy), "--columns", "prompt", "--weights", "1", "--out", p(&out)]);
    assert!(err.contains("--columns and --weights belong to --kernel categorical"), "{err}");
    let err = fails(&[
        "vendi",
        "--embeddings",
        p(&npy),
        "--meta",
        p(&csv),
        "--kernel",
        "categorical",
        "--columns",
        "prompt",
        "--weights",
        "1",
        "--out",
        p(&out),
    ]);
    assert!(err.contains("drop --embeddings"), "{err}");
    let err = fails(&["vendi", "--embeddings", p(&npy), "--q", "-1", "--out", p(&out)]);
    assert!(err.contains("order q must be a number >= 0 or `inf`"), "{err}");
    let err = fails(&["vendi", "--embeddings", p(&npy), "--batch-size", "0", "--out", p(&out)]);
    assert!(err.contains("--batch-size"), "{err}");
    assert!(!out.exists(), "no output on errors");
    // --timings splits the command into stages on stderr.
    let run = common::culturelens(&["vendi", "--embeddings", p(&npy), "--timings", "--out", p(&out)]);
    let stderr = String::from_utf8(run.stderr).unwrap();
    for stage in ["load", "device init", "product", "eigenvalues", "write"] {
        assert!(stderr.contains(&format!("timing {stage} ")), "{stage}: {stderr}");
    }
}

#[test]
fn protocol_is_deterministic_and_bad_quality_is_located() {
    let dir = tempfile::tempdir().unwrap();
    let (npy, csv) = readme_table(dir.path());
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let args = [
        "vendi",
        "--embeddings",
        p(&npy),
        "--meta",
        p(&csv),
        "--batch-size",
        "2",
        "--repeats",
        "7",
        "--seed",
        "3",
    ];
    ok(&[&args[..], &["--out", p(&a)]].concat());
    ok(&[&args[..], &["--out", p(&b)]].concat());
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let v = json(&a);
    assert_eq!(
        (v["batch_size"].as_u64(), v["repeats"].as_u64(), v["n"].as_u64()),
        (Some(2), Some(7), Some(3))
    );
    assert!(v["vs_sd"].as_f64().unwrap() >= 0.0 && v["vs"].as_f64().unwrap() <= 2.0);

    std::fs::write(&csv, "prompt,hps\np,0.5\np,high\np,1\n").unwrap();
    let err = fails(&[
        "vendi",
        "--embeddings",
        p(&npy),
        "--meta",
        p(&csv),
        "--quality-col",
        "hps",
        "--out",
        p(&dir.path().join("c.json")),
    ]);
    assert!(err.contains("m.csv, line 3 (data row 1), column hps: quality must be a finite number"), "{err}");
}
