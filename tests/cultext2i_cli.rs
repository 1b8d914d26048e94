//! End-to-end tests of `culturelens cultext2i` (CulText2I §6.1, Table 2) on a hand-worked
//! two-dimensional example: NA, DP, CD per group, the confusion matrix, CCS and XNA/XDP.

use std::path::{Path, PathBuf};

use crate::common::{Cli, read_csv};
use culturelens_table::{Matrix, write_npy};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn npy(dir: &Path, name: &str, rows: &[[f32; 2]]) -> PathBuf {
    let path = dir.join(name);
    let m = Matrix::new(rows.len(), 2, rows.iter().flatten().copied().collect());
    let mut f = std::fs::File::create(&path).unwrap();
    write_npy(&mut f, &m).unwrap();
    path
}

fn close(got: f64, want: f64, what: &str) {
    assert!((got - want).abs() <= 1e-6, "{what}: {got} vs {want}");
}

struct Inputs {
    images: PathBuf,
    image_meta: PathBuf,
    texts: PathBuf,
    text_meta: PathBuf,
}

/// Texts: german (1,0), spanish (0,1), dimension modern (1,1), concept city/en (1,0),
/// concept stadt/de (0,1). Images (model m, template t, concept city): de/german (1,0),
/// de/german (0,2), es/spanish (3,4).
fn inputs(dir: &Path, text_meta: &str) -> Inputs {
    Inputs {
        images: npy(dir, "i.npy", &[[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]]),
        image_meta: write(
            dir,
            "im.csv",
            "model,language,concept,template,nationality\nm,de,city,t,german\nm,de,city,t,german\nm,es,city,t,spanish\n",
        ),
        texts: npy(dir, "t.npy", &[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]),
        text_meta: write(dir, "tm.csv", text_meta),
    }
}

const TEXT_META: &str = "kind,label,language\nnationality,german,\nnationality,spanish,\n\
                         dimension,modern,\nconcept,city,en\nconcept,city,de\n";

fn cli(i: &Inputs, out: &Path) -> Cli {
    Cli::new("cultext2i")
        .opt("--image-embeddings", &i.images)
        .opt("--image-meta", &i.image_meta)
        .opt("--text-embeddings", &i.texts)
        .opt("--text-meta", &i.text_meta)
        .opt("--out", out)
}

#[test]
fn cultext2i_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let i = inputs(dir.path(), TEXT_META);
    let vqa = write(
        dir.path(),
        "vqa.csv",
        "model,language,concept,template,question,answer,nationality\n\
         m,de,city,t,nationality,Germany,germany\nm,de,city,t,nationality, germany ,germany\n\
         m,de,city,t,nationality,Spain,germany\n\
         m,es,city,t,nationality,Spain,spain\nm,es,city,t,nationality,Mexico,spain\n\
         m,de,city,t,modern|ancient,modern,\nm,de,city,t,modern|ancient,modern,\n\
         m,de,city,t,modern|ancient,ancient,\nm,de,food,t,modern|ancient,ancient,\n\
         m,de,house,t,modern|ancient,Modern,\n",
    );
    let (out, report) = (dir.path().join("out.csv"), dir.path().join("r.json"));
    cli(&i, &out).opt("--report", &report).opt("--vqa", &vqa).run_ok();
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().next().unwrap(), "model,language,concept,template,n,na,na_acc,cd,dp_modern");
    let (_, rows) = read_csv(&out);
    assert_eq!(rows.len(), 2);
    let v = |r: usize, c: usize| rows[r][c].parse::<f64>().unwrap();
    // m/de: NA = (e/(e+1) + 1/(1+e))/2 = ½; image 2 is predicted spanish; CD = (0 + 1)/2;
    // DP = 1/√2 for both.
    assert_eq!(rows[0][..5], ["m", "de", "city", "t", "2"].map(String::from));
    close(v(0, 5), 0.5, "na de");
    close(v(0, 6), 0.5, "na_acc de");
    close(v(0, 7), 0.5, "cd de");
    close(v(0, 8), 0.5f64.sqrt(), "dp de");
    // m/es: cosines 0.6 (german), 0.8 (spanish): NA = 1/(1 + e^−0.2); CD = 0.4; DP = 1.4/√2.
    assert_eq!(rows[1][..5], ["m", "es", "city", "t", "1"].map(String::from));
    close(v(1, 5), 1.0 / (1.0 + (-0.2f64).exp()), "na es");
    close(v(1, 6), 1.0, "na_acc es");
    close(v(1, 7), 0.4, "cd es");
    close(v(1, 8), 1.4 / 2f64.sqrt(), "dp es");

    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["nationalities"], serde_json::json!(["german", "spanish"]));
    assert_eq!(r["confusion"]["m"]["counts"], serde_json::json!([[1, 1], [0, 1]]));
    close(r["confusion"]["m"]["accuracy"].as_f64().unwrap(), 2.0 / 3.0, "accuracy");
    // CCS: cos(i0, i1) = 0, cos(i0, i2) = 0.6, cos(i1, i2) = 0.8.
    let ccs = &r["ccs"][0];
    assert_eq!(ccs["languages"], serde_json::json!(["de", "es"]));
    close(ccs["ccs"][0][0].as_f64().unwrap(), 0.0, "ccs de de");
    close(ccs["ccs"][0][1].as_f64().unwrap(), 0.7, "ccs de es");
    close(ccs["ccs"][1][0].as_f64().unwrap(), 0.7, "ccs es de");
    assert!(ccs["ccs"][1][1].is_null(), "one es image has no pair");
    // XNA: de 2 of 3 say germany (strict majority, correct) → 1; es 1:1 → can't tell → 0.
    // XDP(de): city modern, food ancient, house modern → (2 − 1)/3.
    let vqa = r["vqa"].as_array().unwrap();
    let find = |language: &str, metric: &str| {
        vqa.iter().find(|x| x["language"] == language && x["metric"] == metric).unwrap().clone()
    };
    assert_eq!(find("de", "xna")["score"], 1.0);
    assert_eq!(find("es", "xna")["score"], 0.0);
    assert!(find("es", "xna")["majority"]["city"].is_null());
    close(find("de", "xdp")["score"].as_f64().unwrap(), 1.0 / 3.0, "xdp de");
    assert_eq!(find("de", "xdp")["n_sets"], 3);

    // T = 100: the es image's NA becomes 1/(1 + e^−20).
    cli(&i, &out).opt("--temperature", "100").run_ok();
    let (_, rows) = read_csv(&out);
    close(rows[1][5].parse().unwrap(), 1.0 / (1.0 + (-20f64).exp()), "na es T=100");
}

#[test]
fn cultext2i_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.csv");
    let missing_kind = inputs(
        dir.path(),
        "kind,label,language\nnationality,german,\nnationality,spanish,\nconcept,city,en\nconcept,city,de\nconcept,x,de\n",
    );
    let err = cli(&missing_kind, &out).run_fails().stderr;
    assert!(err.contains("tm.csv") && err.contains("no dimension text"), "{err}");
    let unknown = inputs(dir.path(), &TEXT_META.replace("dimension,modern", "dimensions,modern"));
    let err = cli(&unknown, &out).run_fails().stderr;
    assert!(err.contains("tm.csv") && err.contains("line 4") && err.contains("column kind"), "{err}");
    let i = inputs(dir.path(), TEXT_META);
    std::fs::write(&i.image_meta, "model,language,concept,template,nationality\nm,de,city,t,german\nm,de,city,t,french\nm,es,city,t,spanish\n").unwrap();
    let err = cli(&i, &out).run_fails().stderr;
    assert!(err.contains("im.csv") && err.contains("line 3") && err.contains("column nationality"), "{err}");
    std::fs::write(&i.image_meta, "model,language,concept,template,nationality\nm,de,city,t,german\n")
        .unwrap();
    let err = cli(&i, &out).run_fails().stderr;
    assert!(err.contains("im.csv") || err.contains("i.npy"), "{err}");
    let i = inputs(dir.path(), TEXT_META);
    let vqa = write(
        dir.path(),
        "vqa.csv",
        "model,language,concept,template,question,answer\nm,de,city,t,modern,x\n",
    );
    let report = dir.path().join("r.json");
    let err = cli(&i, &out).opt("--report", &report).opt("--vqa", &vqa).run_fails().stderr;
    assert!(err.contains("vqa.csv") && err.contains("line 2") && err.contains("column question"), "{err}");
    assert!(!out.exists() && !report.exists(), "no output after an error");
}

/// `--ci`: the images of each group are resampled and every mean gets its bounds right after it.
/// By hand: the de group's two images have CD 0 and 1 (cosines 1 and 0 with the English `city`
/// text), so a resample's mean CD is 0, ½ or 1 with probabilities ¼, ½, ¼ and the 90 % percentile
/// interval of 300 resamples is [0, 1]; both have DP(modern) = 1/√2, a zero-width interval; the es
/// group has one image, so every interval is its value.
#[test]
fn cultext2i_ci_resamples_images_within_groups() {
    let dir = tempfile::tempdir().unwrap();
    let i = inputs(dir.path(), TEXT_META);
    let plain = dir.path().join("plain.csv");
    cli(&i, &plain).run_ok();
    let out = dir.path().join("ci.csv");
    cli(&i, &out)
        .opt("--ci", "0.9")
        .opt("--bootstrap", "300")
        .opt("--ci-method", "percentile")
        .opt("--seed", "5")
        .run_ok();
    let (header, rows) = read_csv(&out);
    assert_eq!(
        header,
        [
            "model",
            "language",
            "concept",
            "template",
            "n",
            "na",
            "na_lo",
            "na_hi",
            "na_acc",
            "na_acc_lo",
            "na_acc_hi",
            "cd",
            "cd_lo",
            "cd_hi",
            "dp_modern",
            "dp_modern_lo",
            "dp_modern_hi"
        ]
    );
    let (_, plain_rows) = read_csv(&plain);
    for (row, plain) in rows.iter().zip(&plain_rows) {
        let estimates: Vec<&String> = [0, 1, 2, 3, 4, 5, 8, 11, 14].iter().map(|&k| &row[k]).collect();
        assert_eq!(estimates, plain.iter().collect::<Vec<_>>(), "the estimates are unchanged");
    }
    let number = |cell: &str| cell.parse::<f64>().unwrap();
    let de = &rows[0];
    assert_eq!((number(&de[12]), number(&de[13])), (0.0, 1.0), "de cd: [0, 1]");
    close(number(&de[15]), std::f64::consts::FRAC_1_SQRT_2, "de dp lo");
    close(number(&de[16]), std::f64::consts::FRAC_1_SQRT_2, "de dp hi");
    let es = &rows[1];
    for k in [5, 8, 11, 14] {
        assert_eq!(
            (es[k + 1].as_str(), es[k + 2].as_str()),
            (es[k].as_str(), es[k].as_str()),
            "{}",
            header[k]
        );
    }
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("ci.csv.provenance.json")).unwrap()).unwrap();
    assert_eq!(manifest["uncertainty"]["unit"], "images within each (model, language, concept, template)");
}
