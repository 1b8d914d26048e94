//! End-to-end tests of the visual and textual analyses of the SoS paper (§6.1, App. F–G) and the
//! tokenizer lens: `culturelens colour` on hand-made images, `culturelens captions` against the
//! numpy reference of scripts/fixtures/make_captions.py, `culturelens tokens` against
//! transformers' tokenizers (scripts/fixtures/make_tokens_reference.py); bad inputs fail with the
//! file and row named and leave no output.

use std::path::Path;

use culturelens_testkit::{fixture, read_fixture};

use crate::common::{Cli, read_csv};

/// A PNG of `w × h` pixels: the first `n_first` (row-major) are `first`, the rest `rest`.
fn png(path: &Path, w: u32, h: u32, n_first: u32, first: [u8; 3], rest: [u8; 3]) {
    let img =
        image::RgbImage::from_fn(w, h, |x, y| image::Rgb(if y * w + x < n_first { first } else { rest }));
    img.save(path).unwrap();
}

#[test]
fn colour_palettes_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    // a: 12 red + 4 navy pixels; b: 16 navy. With k = 2 each image's palette is exact:
    // a = red 0.75, navy 0.25; b = navy 1 (one distinct colour: a one-colour palette).
    // HSV V: red 1, navy 128/255 = 0.50196 (bin [0.5, 0.6) of 10). Values for m/de:
    // a's colours weighted 0.75 and 0.25, b's navy 1 → navy (0.25 + 1) / 2 = 0.625, red 0.375.
    png(&dir.path().join("a.png"), 4, 4, 12, [255, 0, 0], [0, 0, 128]);
    png(&dir.path().join("b.png"), 4, 4, 0, [255, 0, 0], [0, 0, 128]);
    std::fs::write(dir.path().join("m.csv"), "image,model,language,culture\na.png,m,de,x\nb.png,m,de,y\n")
        .unwrap();
    let out = dir.path().join("out");
    Cli::new("colour").opt("--images", dir.path().join("m.csv")).opt("--out", &out).opt("--k", "2").run_ok();
    let (header, rows) = read_csv(&out.join("dominant_colours.csv"));
    assert_eq!(
        header,
        ["image", "model", "language", "culture", "rank", "r", "g", "b", "hex", "share", "h", "s", "v"]
    );
    let brief: Vec<Vec<&str>> =
        rows.iter().map(|r| vec![r[0].as_str(), r[4].as_str(), r[8].as_str(), r[9].as_str()]).collect();
    assert_eq!(
        brief,
        [
            ["a.png", "1", "#ff0000", "0.75"],
            ["a.png", "2", "#000080", "0.25"],
            ["b.png", "1", "#000080", "1"]
        ]
    );
    assert_eq!(rows[1][12].parse::<f64>().unwrap(), 128.0 / 255.0);
    // Palettes per (model, language, culture): x pools a's pixels, y b's.
    let (_, palettes) = read_csv(&out.join("palettes.csv"));
    let brief: Vec<Vec<&str>> =
        palettes.iter().map(|r| [2, 3, 4, 8, 9].map(|c| r[c].as_str()).to_vec()).collect();
    assert_eq!(
        brief,
        [
            ["x", "1", "1", "#ff0000", "0.75"],
            ["x", "1", "2", "#000080", "0.25"],
            ["y", "1", "1", "#000080", "1"]
        ]
    );
    let (header, values) = read_csv(&out.join("values.csv"));
    assert_eq!(header, ["model", "language", "n_images", "v_lo", "v_hi", "share"]);
    let shares: Vec<f64> = values.iter().map(|r| r[5].parse().unwrap()).collect();
    assert_eq!(shares, [0.0, 0.0, 0.0, 0.0, 0.0, 0.625, 0.0, 0.0, 0.0, 0.375]);
}

#[test]
fn colour_rejects_a_non_image_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    png(&dir.path().join("a.png"), 2, 2, 0, [0; 3], [9; 3]);
    std::fs::write(dir.path().join("notes.png"), "not an image").unwrap();
    std::fs::write(
        dir.path().join("m.csv"),
        "image,model,language,culture\na.png,m,de,x\nnotes.png,m,de,x\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let run = Cli::new("colour").opt("--images", dir.path().join("m.csv")).opt("--out", &out).run_fails();
    assert!(run.stderr.contains("m.csv, line 3 (data row 1), column image"), "{}", run.stderr);
    assert!(run.stderr.contains("notes.png is not a decodable image"), "{}", run.stderr);
    assert!(!out.exists());
    let run = Cli::new("colour")
        .opt("--images", dir.path().join("m.csv"))
        .opt("--out", &out)
        .opt("--palette-by", "model,seed")
        .run_fails();
    assert!(run.stderr.contains("seed"), "{}", run.stderr);
}

fn captions_cli(dir: &Path, captions: &Path, manifest: &Path) -> Cli {
    Cli::new("captions").opt("--captions", captions).opt("--manifest", manifest).opt("--out", dir.join("out"))
}

#[test]
fn captions_match_the_numpy_reference() {
    let dir = tempfile::tempdir().unwrap();
    let fx = fixture("captions");
    captions_cli(dir.path(), &fx.join("captions.csv"), &fx.join("manifest.csv"))
        .opt("--stereotypes", fx.join("stereotypes.csv"))
        .run_ok();
    let out = dir.path().join("out");
    let (header, got) = read_csv(&out.join("terms.csv"));
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (_, want) = read_csv(&fx.join("expected_terms.csv"));
    assert_eq!(got.len(), want.len());
    let key = |r: &[String], a: usize, b: usize, c: usize| (r[a].clone(), r[b].clone(), r[c].clone());
    let got: std::collections::BTreeMap<_, _> =
        got.iter().map(|r| (key(r, col("model"), col("language"), col("term")), r.clone())).collect();
    for w in &want {
        let g = &got[&key(w, 0, 1, 2)];
        assert_eq!(g[col("images")], w[3], "{w:?}");
        for (c, i) in [("delta", 4), ("z", 5)] {
            let (a, b): (f64, f64) = (g[col(c)].parse().unwrap(), w[i].parse().unwrap());
            assert!((a - b).abs() < 1e-12, "{w:?} {c}: {a} vs {b}");
        }
    }
    let (_, top) = read_csv(&out.join("top_terms.csv"));
    let fi: Vec<(&str, &str)> =
        top.iter().filter(|r| r[0] == "A" && r[1] == "fi").map(|r| (r[3].as_str(), r[5].as_str())).collect();
    // snow in 13 and forest in 11 of the 15 A/fi images (planted), snow's z higher.
    assert_eq!(fi, [("snow", "0.8666666666666667"), ("forest", "0.7333333333333333")]);
    let (_, coverage) = read_csv(&out.join("coverage.csv"));
    let (_, want) = read_csv(&fx.join("expected_coverage.csv"));
    assert_eq!(coverage.len(), want.len());
    for (g, w) in coverage.iter().zip(&want) {
        assert_eq!((&g[..5], &g[6]), (&w[..5], &w[6]));
        assert_eq!(g[5].parse::<f64>().unwrap(), w[5].parse::<f64>().unwrap());
    }
}

#[test]
fn captions_bad_inputs_name_file_and_row() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("m.csv"), "image,model,language\na.png,m,de\nb.png,m,fi\nc.png,m,fi\n").unwrap();
    let cases = [
        (
            "image,text\na.png,a red house\nz.png,snow\n",
            "c.csv, line 3 (data row 1), column image: caption for unknown image \"z.png\"",
        ),
        (
            "image,text\na.png,a red house\na.png,snow\n",
            "line 3 (data row 1), column image: image \"a.png\" has a second caption",
        ),
        (
            "image,text\na.png,the and\nb.png,snow\n",
            "document (model \"m\", language \"de\") has no terms in any of its 1 images",
        ),
        (
            "image,text,text_language\na.png,house,xx\nb.png,snow,\n",
            "line 2 (data row 0), column text_language: no stop-word list for language \"xx\"",
        ),
    ];
    for (csv, message) in cases {
        std::fs::write(d.join("c.csv"), csv).unwrap();
        let run = captions_cli(d, &d.join("c.csv"), &d.join("m.csv")).run_fails();
        assert!(run.stderr.contains(message), "{csv}: {}", run.stderr);
        assert!(!d.join("out").exists());
    }
}

#[test]
fn tokens_show_jurist_in_and_byte_fallback_as_transformers_splits_them() {
    let enc = fixture("encoders");
    let reference: serde_json::Value = serde_json::from_str(&read_fixture("tokens/reference.json")).unwrap();
    let ids = |model: &str, text: &str| -> Vec<String> {
        reference[model][text]["ids"].as_array().unwrap().iter().map(|i| format!("[{i}]")).collect()
    };
    let run = Cli::new("tokens")
        .opt("--weights", enc.join("clip"))
        .opt("--weights", enc.join("siglip"))
        .opt("--text", "Jurist*in")
        .run_ok();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines[0].contains("clip (10 tokens)") && lines[0].ends_with("siglip (8 tokens)"), "{}", lines[0]);
    assert_eq!(lines.len(), 11);
    // Golden rows: CLIP keeps the star as its own word ("t" ends the stem, "*" a word,
    // then "i" "n" the suffix); SigLIP deletes ASCII punctuation before tokenizing.
    let expected = [
        ("\"<|startoftext|>\" [628]", "\" \" [3]"),
        ("\"j\" [73]", "\"j\" [78]"),
        ("\"ur\" [532]", "\"ur\" [43]"),
        ("\"i\" [72]", "\"i\" [9]"),
        ("\"s\" [82]", "\"s\" [14]"),
        ("\"t\"· [339]", "\"t\" [5]"),
        ("\"*\"· [265]", "\"in\" [42]"),
        ("\"i\" [72]", "\"</s>\" [1]"),
        ("\"n\"· [333]", ""),
        ("\"<|endoftext|>\" [629]", ""),
    ];
    for (i, (clip, siglip)) in expected.iter().enumerate() {
        let cells: Vec<&str> = lines[i + 1].split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
        let index = i.to_string();
        let want: Vec<&str> = [index.as_str(), clip, siglip].into_iter().filter(|c| !c.is_empty()).collect();
        assert_eq!(cells, want, "row {i}");
        assert!(clip.ends_with(&ids("clip", "Jurist*in")[i]));
    }
    let run = Cli::new("tokens")
        .opt("--weights", enc.join("clip"))
        .opt("--weights", enc.join("siglip"))
        .opt("--text", "中 ሀ")
        .run_ok();
    for cell in [
        "\"<E4 B8> of \\\"中\\\"\" [515]",
        "\"<AD> of \\\"中\\\"\"· [511]",
        "\"<E1> of \\\"ሀ\\\"\" [157]",
        "\"<unk> of \\\"ሀ\\\"\" [2]",
    ] {
        assert!(run.stdout.contains(cell), "{cell} not in\n{}", run.stdout);
    }
    assert_eq!(ids("siglip", "中 ሀ")[3], "[2]");
    let run = Cli::new("tokens").opt("--weights", enc.join("dinov2")).opt("--text", "x").run_fails();
    assert!(run.stderr.contains("dinov2: no tokenizer"), "{}", run.stderr);
}
