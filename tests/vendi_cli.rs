//! End-to-end tests of `culturelens vendi` through the built binary.

use std::path::{Path, PathBuf};

use crate::common::Cli;
use culturelens_table::{EmbeddingTable, Matrix, Metadata, save_table};
use culturelens_testkit::sha256;
use serde_json::Value;

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn f64_of(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} is not a number in {v}"))
}

/// `culturelens vendi --embeddings NPY` (cosine kernel unless told otherwise).
fn vendi_on(npy: &Path) -> Cli {
    Cli::new("vendi").opt("--embeddings", npy)
}

/// `culturelens vendi --meta CSV --kernel categorical --columns COLS --kernel-weights WEIGHTS`.
fn categorical(meta: &Path, columns: &str, weights: &str) -> Cli {
    Cli::new("vendi")
        .opt("--meta", meta)
        .opt("--kernel", "categorical")
        .opt("--columns", columns)
        .opt("--kernel-weights", weights)
}

/// Writes `k` (n × n, row-major) as a precomputed kernel `.npy`.
fn write_kernel(path: &Path, n: usize, k: Vec<f32>) {
    save_table(&EmbeddingTable::new(Matrix::new(n, n, k), Metadata::empty(n)), path, None).unwrap();
}

/// The vendi-score README kernel K = [[1,.9,0],[.9,1,0],[0,0,1]] as cosine embeddings
/// (e₁, .9e₁ + √.19 e₂, e₃), with a group column and a quality column.
fn readme_table(dir: &Path) -> (PathBuf, PathBuf) {
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

/// The spectrum of the README kernel over N = 3: its block [[1, .9], [.9, 1]] has eigenvalues
/// 1.9 and 0.1, the third item 1 (vendi-score's README: VS₁ = 2.1573).
const README_SPECTRUM: [f64; 3] = [1.9 / 3.0, 0.1 / 3.0, 1.0 / 3.0];

/// How far the CLI's scores of the README kernel may sit from the closed form: the kernel is
/// built from f32 data (0.9 is 0.899999976 in f32); about 3× the largest difference measured
/// (3.6e-8, the precomputed kernel at q = 2), printed with `--nocapture`.
const README: f64 = 1e-7;
/// The same for the protocol's means and standard deviations against the closed form of its
/// batches (measured 5.4e-9 on the f32 README embeddings).
const CLOSED_FORM: f64 = 1.5e-8;

/// VS_q of a spectrum `p` (eigenvalues of K/N, summing to 1), CUBE Def. 5.1: the number of
/// non-zero eigenvalues at q = 0, exp(−Σ p ln p) at q = 1, 1 / max p at q = ∞, else
/// (Σ pᵠ)^(1/(1−q)).
fn vs_of_spectrum(p: &[f64], q: &str) -> f64 {
    let p: Vec<f64> = p.iter().copied().filter(|&x| x > 0.0).collect();
    match q {
        "0" => p.len() as f64,
        "1" => (-p.iter().map(|x| x * x.ln()).sum::<f64>()).exp(),
        "inf" => 1.0 / p.iter().copied().fold(0.0, f64::max),
        q => {
            let q: f64 = q.parse().unwrap();
            p.iter().map(|x| x.powf(q)).sum::<f64>().powf(1.0 / (1.0 - q))
        }
    }
}

/// VS_q of a batch of two items with similarity `s`: K/2 has eigenvalues (1 ± s)/2, so at
/// q = 2 it is 2/(1 + s²).
fn pair_vs(s: f64, q: &str) -> f64 {
    vs_of_spectrum(&[(1.0 + s) / 2.0, (1.0 - s) / 2.0], q)
}

/// Every way of drawing `repeats` batches from `kinds` kinds of batch (counts per kind).
fn compositions(repeats: usize, kinds: usize) -> Vec<Vec<usize>> {
    if kinds == 1 {
        return vec![vec![repeats]];
    }
    (0..=repeats)
        .flat_map(|first| {
            compositions(repeats - first, kinds - 1).into_iter().map(move |mut rest| {
                rest.insert(0, first);
                rest
            })
        })
        .collect()
}

/// Checks a protocol result against the closed form: every batch is one of the kinds whose
/// per-batch scores are `per_kind[kind][key]`, so for some counts of the kinds (summing to
/// `repeats`) every reported mean and population standard deviation is theirs. Returns the
/// counts that match.
fn assert_batches_in_closed_form(
    v: &Value,
    repeats: usize,
    keys: &[&str],
    per_kind: &[Vec<f64>],
) -> Vec<usize> {
    for kind in per_kind {
        assert_eq!(kind.len(), keys.len());
    }
    let reported: Vec<(f64, f64)> =
        keys.iter().map(|k| (f64_of(v, k), f64_of(v, &format!("{k}_sd")))).collect();
    let mut best = (f64::INFINITY, Vec::new());
    for counts in compositions(repeats, per_kind.len()) {
        assert_eq!(counts.len(), per_kind.len());
        let mut worst = 0.0f64;
        for (i, (mean, sd)) in reported.iter().enumerate() {
            let values = counts.iter().zip(per_kind).map(|(&c, kind)| (c as f64, kind[i]));
            let m = values.clone().map(|(c, x)| c * x).sum::<f64>() / repeats as f64;
            let var = values.map(|(c, x)| c * (x - m) * (x - m)).sum::<f64>() / repeats as f64;
            worst = worst.max((m - mean).abs()).max((var.sqrt() - sd).abs());
        }
        if worst < best.0 {
            best = (worst, counts);
        }
    }
    println!("closed form: batch counts {:?} match to {:.3e} (bound {CLOSED_FORM:.1e})", best.1, best.0);
    assert!(
        best.0 <= CLOSED_FORM,
        "no draw of {repeats} batches gives {v} (closest {:?}: {:.3e})",
        best.1,
        best.0
    );
    best.1
}

#[test]
fn cosine_scores_match_the_vendi_score_readme() {
    let dir = tempfile::tempdir().unwrap();
    let (npy, csv) = readme_table(dir.path());
    let out = dir.path().join("v.json");
    // Hand values: VS₂ = 9/4.62, VS_∞ = 3/1.9.
    assert!((vs_of_spectrum(&README_SPECTRUM, "2") - 9.0 / 4.62).abs() < 1e-15);
    assert!((vs_of_spectrum(&README_SPECTRUM, "inf") - 3.0 / 1.9).abs() < 1e-15);
    for q in ["1", "0", "2", "inf"] {
        let want = vs_of_spectrum(&README_SPECTRUM, q);
        for route in ["kernel", "dual"] {
            vendi_on(&npy).opt("--q", q).opt("--route", route).opt("--out", &out).run_ok();
            let v = json(&out);
            assert_eq!(v.as_object().unwrap().len(), 5, "exactly n, q, vs, qvs, qvs_norm: {v}");
            assert_eq!(v["n"], 3);
            let vs = f64_of(&v, "vs");
            println!(
                "q={q} {route}: vs = {vs:.9}, |vs - {want:.9}| = {:.3e} (bound {README:.0e})",
                (vs - want).abs()
            );
            assert!((vs - want).abs() <= README, "q={q} {route}: {vs}");
            assert_eq!(f64_of(&v, "qvs"), vs, "uniform quality 1");
            assert!((f64_of(&v, "qvs_norm") - vs / 3.0).abs() < 1e-15);
        }
    }
    assert_eq!(json(&out)["q"], "inf");
    // Quality from a column and grouping: one group holding the whole table, mean quality
    // (0.5 + 1 + 1.5)/3 = 1.
    vendi_on(&npy)
        .opt("--meta", &csv)
        .opt("--quality-col", "hps")
        .opt("--group-by", "prompt")
        .opt("--out", &out)
        .run_ok();
    let v = json(&out);
    assert_eq!(v.as_object().unwrap().keys().collect::<Vec<_>>(), ["p"]);
    let g = &v["p"];
    let vs = f64_of(g, "vs");
    assert!((vs - vs_of_spectrum(&README_SPECTRUM, "1")).abs() <= README, "{vs}");
    assert!((f64_of(g, "qvs") - vs).abs() < 1e-12);
    assert!((f64_of(g, "qvs_norm") - vs / 3.0).abs() < 1e-12);
    // The provenance lists both inputs, in argument order, with their sha256 (hashed on a thread
    // of their own while the command loads them).
    let manifest = json(&dir.path().join("v.json.provenance.json"));
    let inputs = manifest["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 2, "{manifest}");
    for (input, path) in inputs.iter().zip([&npy, &csv]) {
        assert_eq!(input["path"], path.to_str().unwrap());
        assert_eq!(input["sha256"], sha256(&std::fs::read(path).unwrap()).as_str(), "{}", path.display());
    }
}

#[test]
fn categorical_and_precomputed_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("cube.csv");
    std::fs::write(&meta, "continent,country,artifact\nA,JP,a\nA,CN,b\nE,DE,c\nE,DE,c\n").unwrap();
    let out = dir.path().join("v.json");
    let cube = || categorical(&meta, "continent,country,artifact", "0.5,0.3,0.2");
    cube().opt("--q", "inf").flag("--intdiv").opt("--out", &out).run_ok();
    // K/4 has eigenvalues .375, .125, .5, 0 → VS_inf = 2; intdiv = 1 - 3/12.
    let v = json(&out);
    assert!((f64_of(&v, "vs") - 2.0).abs() < 1e-12, "{v}");
    assert!((f64_of(&v, "intdiv") - 0.75).abs() < 1e-12);
    let bad = dir.path().join("x.json");
    let err =
        categorical(&meta, "continent,country,artifact", "0.5,0.3,0.3").opt("--out", &bad).run_fails().stderr;
    assert!(err.contains("sum to 1"), "{err}");
    assert!(!bad.exists());

    let kpath = dir.path().join("k.npy");
    write_kernel(&kpath, 3, vec![1.0, 0.9, 0.0, 0.9, 1.0, 0.0, 0.0, 0.0, 1.0]);
    let precomputed = || vendi_on(&kpath).opt("--kernel", "precomputed");
    precomputed().opt("--q", "2").opt("--out", &out).run_ok();
    let (vs, want) = (f64_of(&json(&out), "vs"), 9.0 / 4.62);
    println!("precomputed q=2: vs = {vs:.9}, |vs - 9/4.62| = {:.3e} (bound {README:.0e})", (vs - want).abs());
    assert!((vs - want).abs() <= README, "{vs}");
    write_kernel(&kpath, 2, vec![1.0, 2.0, 2.0, 1.0]);
    let err = precomputed().opt("--out", &out).run_fails().stderr;
    assert!(err.contains("k.npy") && err.contains("not positive semi-definite"), "{err}");
    let err = precomputed().opt("--route", "dual").opt("--out", &out).run_fails().stderr;
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
    let protocol = |cli: Cli, out: &Path| {
        cli.opt("--q", "2")
            .opt("--quality-col", "hps")
            .opt("--protocol-batch", "2")
            .opt("--repeats", "9")
            .opt("--seed", "7")
            .flag("--intdiv")
            .opt("--out", out)
            .run_ok()
    };
    protocol(categorical(&meta, "continent,country,artifact", "0.5,0.3,0.2"), &a);
    // K = [[1,.5,0,0],[.5,1,0,0],[0,0,1,1],[0,0,1,1]]
    let kpath = dir.path().join("k.npy");
    write_kernel(
        &kpath,
        4,
        vec![1.0, 0.5, 0.0, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0],
    );
    protocol(vendi_on(&kpath).opt("--meta", &meta).opt("--kernel", "precomputed"), &b);
    let (va, vb) = (json(&a), json(&b));
    for key in ["vs", "vs_sd", "qvs", "qvs_norm", "qvs_norm_sd", "intdiv", "intdiv_sd"] {
        let (x, y) = (f64_of(&va, key), f64_of(&vb, key));
        println!(
            "{key}: categorical {x:.9}, precomputed {y:.9}, |difference| = {:.3e} (bound 1e-12)",
            (x - y).abs()
        );
        // The kernel's entries (0, .5, 1) are exact in f32 and f64: measured 0.
        assert!((x - y).abs() <= 1e-12, "{key}: {x} vs {y}");
    }
    assert_eq!(
        (va["n"].as_u64(), va["batch_size"].as_u64(), va["repeats"].as_u64()),
        (Some(4), Some(2), Some(9))
    );
    // The six pairs (i, j) with similarity s = K[i][j] and mean quality (hpsᵢ + hpsⱼ)/2 give
    // vs = 2/(1+s²), qvs = quality·vs, qvs_norm = qvs/2 and intdiv = 1 − s.
    let hps = [0.2, 0.4, 0.6, 0.8];
    let pairs = [(0, 1, 0.5), (0, 2, 0.0), (0, 3, 0.0), (1, 2, 0.0), (1, 3, 0.0), (2, 3, 1.0)];
    let per_kind: Vec<Vec<f64>> = pairs
        .iter()
        .map(|&(i, j, s)| {
            let vs = pair_vs(s, "2");
            let qvs = (hps[i] + hps[j]) / 2.0 * vs;
            vec![vs, qvs, qvs / 2.0, 1.0 - s]
        })
        .collect();
    let keys = ["vs", "qvs", "qvs_norm", "intdiv"];
    let counts = assert_batches_in_closed_form(&va, 9, &keys, &per_kind);
    assert!(counts.iter().filter(|&&c| c > 0).count() > 1, "the batches differ: {counts:?}");
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
    let run = |meta: &Path, out: &Path| {
        categorical(meta, "country,artifact", "0.5,0.5")
            .opt("--group-by", "prompt")
            .opt("--protocol-batch", "3")
            .opt("--repeats", "5")
            .opt("--seed", "11")
            .opt("--out", out)
            .run_ok();
        json(out)
    };
    let (a, b) = (run(&small, &dir.path().join("a.json")), run(&large, &dir.path().join("b.json")));
    assert_eq!(b.as_object().unwrap().keys().collect::<Vec<_>>(), ["p1", "p2", "p3"]);
    assert_eq!(a["p3"], b["p3"], "p3's batches do not depend on p2");
    assert_eq!(a["p1"], b["p1"]);
}

/// `--csv FILE` writes the scores as a table for pandas and R: one row per group, the group
/// column first, every number as the JSON has it.
#[test]
fn csv_output_holds_the_json_scores() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("m.csv");
    let mut text = String::from("country,artifact,prompt\n");
    for g in ["p1", "p2"] {
        for i in 0..6 {
            text += &format!("C{},a{},{g}\n", i % 3, i % 4);
        }
    }
    std::fs::write(&meta, text).unwrap();
    let (out, csv) = (dir.path().join("v.json"), dir.path().join("v.csv"));
    categorical(&meta, "country,artifact", "0.5,0.5")
        .opt("--group-by", "prompt")
        .flag("--intdiv")
        .opt("--out", &out)
        .opt("--csv", &csv)
        .run_ok();
    let (header, rows) = crate::common::read_csv(&csv);
    assert_eq!(header, ["prompt", "n", "q", "vs", "qvs", "qvs_norm", "intdiv"]);
    let scores = json(&out);
    assert_eq!(rows.len(), 2);
    for row in &rows {
        let group = &scores[row[0].as_str()];
        for (k, key) in header.iter().enumerate().skip(1) {
            assert_eq!(row[k].parse::<f64>().unwrap(), f64_of(group, key), "{} {key}", row[0]);
        }
    }
}

#[test]
fn flags_that_would_be_ignored_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (npy, csv) = readme_table(dir.path());
    let out = dir.path().join("v.json");
    let fails = |cli: Cli| cli.opt("--out", &out).run_fails().stderr;
    let err = fails(vendi_on(&npy).opt("--columns", "prompt").opt("--kernel-weights", "1"));
    assert!(err.contains("--columns and --kernel-weights belong to --kernel categorical"), "{err}");
    let err = fails(categorical(&csv, "prompt", "1").opt("--embeddings", &npy));
    assert!(err.contains("drop --embeddings"), "{err}");
    let err = fails(vendi_on(&npy).opt("--q", "-1"));
    assert!(err.contains("order q must be a number >= 0 or `inf`"), "{err}");
    let err = fails(vendi_on(&npy).opt("--protocol-batch", "0"));
    assert!(err.contains("--protocol-batch"), "{err}");
    assert!(!out.exists(), "no output on errors");
    // --timings splits the command into stages on stderr.
    let stderr = vendi_on(&npy).flag("--timings").opt("--out", &out).run_ok().stderr;
    for stage in ["load", "device init", "product", "eigenvalues", "write"] {
        assert!(stderr.contains(&format!("timing {stage} ")), "{stage}: {stderr}");
    }
}

#[test]
fn protocol_is_deterministic_and_bad_quality_is_located() {
    let dir = tempfile::tempdir().unwrap();
    let (npy, csv) = readme_table(dir.path());
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let protocol = |out: &Path| {
        vendi_on(&npy)
            .opt("--meta", &csv)
            .opt("--protocol-batch", "2")
            .opt("--repeats", "7")
            .opt("--seed", "3")
            .opt("--out", out)
            .run_ok()
    };
    protocol(&a);
    protocol(&b);
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let v = json(&a);
    assert_eq!(
        (v["batch_size"].as_u64(), v["repeats"].as_u64(), v["n"].as_u64()),
        (Some(2), Some(7), Some(3))
    );
    // Batches of two of the README items: {0, 1} (s = .9) or {0, 2}, {1, 2} (s = 0), at q = 1
    // with quality 1 (qvs = vs, qvs_norm = vs/2).
    let per_kind: Vec<Vec<f64>> = [0.9, 0.0, 0.0]
        .iter()
        .map(|&s| vec![pair_vs(s, "1"), pair_vs(s, "1"), pair_vs(s, "1") / 2.0])
        .collect();
    assert_batches_in_closed_form(&v, 7, &["vs", "qvs", "qvs_norm"], &per_kind);

    std::fs::write(&csv, "prompt,hps\np,0.5\np,high\np,1\n").unwrap();
    let err = vendi_on(&npy)
        .opt("--meta", &csv)
        .opt("--quality-col", "hps")
        .opt("--out", dir.path().join("c.json"))
        .run_fails()
        .stderr;
    assert!(err.contains("m.csv, line 3 (data row 1), column hps: quality must be a finite number"), "{err}");
}

/// How far (relative) the CLI's scores at width 768 may sit from vendi-score's: 2.7e-15 measured
/// on an AVX-512 EPYC (printed with `--nocapture`); faer's GEMM, inside the first stage, sums in
/// another order on AVX2 machines, so the bound leaves room for a few times that.
const WIDE: f64 = 2e-14;

/// At a real embedding width (d = 768, N = 900 in 20 clusters: both routes reduce an order ≥ 512
/// in two stages), the scores equal vendi-score's `score_dual` and `score_K`
/// (tests/fixtures/vendi/wide.json; the table is rebuilt here from the script's formula).
#[test]
fn scores_at_width_768_match_vendi_score() {
    let fixture: Value = serde_json::from_str(&culturelens_testkit::read_fixture("vendi/wide.json")).unwrap();
    let (n, d, clusters) = (900usize, 768usize, 20usize);
    assert_eq!((fixture["n"].as_u64(), fixture["d"].as_u64()), (Some(n as u64), Some(d as u64)));
    // The script's h(s, k): its splitmix64 of the key, top 53 bits, = SplitMix64's first next_f64.
    let h = |stream: u64, k: usize| {
        culturelens_rng::SplitMix64::new(7 << 56 | stream << 48 | k as u64).next_f64()
    };
    let x: Vec<f32> = (0..n * d)
        .map(|ij| {
            let (i, j) = (ij / d, ij % d);
            (2.0 * (h(1, (i % clusters) * d + j) - 0.5) + (h(2, ij) - 0.5)) as f32
        })
        .collect();
    let checksum: f64 = x.iter().map(|v| f64::from(*v)).sum();
    assert!((checksum - f64_of(&fixture, "x_checksum")).abs() < 1e-6, "the table: {checksum}");
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("wide.npy");
    save_table(&EmbeddingTable::new(Matrix::new(n, d, x), Metadata::empty(n)), &npy, None).unwrap();
    let out = dir.path().join("v.json");
    let mut worst = 0f64;
    let mut cases: Vec<(&str, String, f64)> =
        ["0.5", "1", "2"].into_iter().map(|q| ("dual", q.to_string(), f64_of(&fixture["dual"], q))).collect();
    cases.push(("kernel", "1".into(), f64_of(&fixture, "kernel_q1")));
    for (route, q, want) in cases {
        vendi_on(&npy).opt("--q", &q).opt("--route", route).opt("--out", &out).run_ok();
        let vs = f64_of(&json(&out), "vs");
        let rel = (vs - want).abs() / want;
        println!("width 768, {route} q={q}: vs {vs:.12}, vendi-score {want:.12}, relative {rel:.1e}");
        worst = worst.max(rel);
    }
    assert!(worst <= WIDE, "relative difference from vendi-score {worst:.2e}");
}
