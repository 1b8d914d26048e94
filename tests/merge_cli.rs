//! End-to-end tests of `culturelens merge`: the tables of `embed --shard K/3` merge into the
//! bytes of one unsharded run (`.npy` with its CSV, and `.parquet`), image folders with their
//! manifests merge into the one-run folder, and every kind of shard set that is not one whole
//! run is refused with a clear error and no output.

use std::path::{Path, PathBuf};

use culturelens_testkit::{fixture, sha256};

use crate::common::Cli;

/// The fixture images in file-name order.
const IMAGES: [&str; 5] = ["a_rgb.png", "b_grey.png", "c_rgba.png", "d_photo.jpg", "e_lossless.webp"];

/// A scratch folder with a copy of the fixture images in `imgs/`.
fn scratch() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let images = tmp.path().join("imgs");
    std::fs::create_dir_all(&images).unwrap();
    for name in IMAGES {
        std::fs::copy(fixture("encoders/images").join(name), images.join(name)).unwrap();
    }
    (tmp, images)
}

/// `culturelens embed --images IMAGES --weights <fixture MODEL> --out OUT [--shard SHARD]`.
fn embed(images: &Path, model: &str, out: &Path, shard: Option<&str>) {
    let mut cli = Cli::new("embed")
        .opt("--images", images)
        .opt("--weights", fixture("encoders").join(model))
        .opt("--out", out);
    if let Some(shard) = shard {
        cli = cli.opt("--shard", shard);
    }
    cli.run_ok();
}

fn merge(out: &Path, parts: &[&Path]) -> Cli {
    parts.iter().fold(Cli::new("merge").opt("--out", out), |cli, p| cli.arg(p))
}

fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The three shard tables `part{K}.EXT` of `embed --shard K/3` in `dir`.
fn three_parts(dir: &Path, images: &Path, ext: &str) -> Vec<PathBuf> {
    (1..=3)
        .map(|k| {
            let out = dir.join(format!("part{k}.{ext}"));
            embed(images, "clip", &out, Some(&format!("{k}/3")));
            out
        })
        .collect()
}

#[test]
fn three_shards_merge_into_the_bytes_of_one_run() {
    let (tmp, images) = scratch();
    for ext in ["npy", "parquet"] {
        let one = tmp.path().join(format!("one.{ext}"));
        embed(&images, "clip", &one, None);
        assert!(
            !tmp.path().join(format!("one.{ext}.part.json")).exists(),
            "unsharded runs write no part file"
        );
        let parts = three_parts(tmp.path(), &images, ext);
        for part in &parts {
            assert!(Path::new(&format!("{}.part.json", part.display())).is_file());
        }
        // Given in any order, the parts merge into the single run's bytes.
        let merged = tmp.path().join(format!("merged.{ext}"));
        let stderr = merge(&merged, &[&parts[2], &parts[0], &parts[1]]).run_ok().stderr;
        assert!(stderr.contains("merged 3 shards (5 rows)"), "{stderr}");
        assert_eq!(bytes(&merged), bytes(&one), "{ext}: merged table = one run's, byte for byte");
        if ext == "npy" {
            assert_eq!(bytes(&tmp.path().join("merged.csv")), bytes(&tmp.path().join("one.csv")));
        }
        // Its provenance manifest keeps each part's own manifest (model, weights' sha256), in
        // shard order.
        let manifest = json(&tmp.path().join(format!("merged.{ext}.provenance.json")));
        assert_eq!(manifest["command"], "merge");
        let parts_seen = manifest["parts"].as_array().expect("parts");
        assert_eq!(parts_seen.len(), 3);
        for (k, part) in parts_seen.iter().enumerate() {
            assert!(
                part["manifest"].as_str().unwrap().ends_with(&format!("part{}.{ext}.provenance.json", k + 1))
            );
            assert_eq!(part["provenance"]["command"], "embed");
            assert!(!part["provenance"]["models"][0]["files"].as_array().unwrap().is_empty());
        }
        assert_eq!(manifest["inputs"].as_array().unwrap().len(), 3);
    }
}

/// Runs a merge that must be refused; checks its message and that it wrote nothing.
fn refused(parts: &[&Path], out: &Path, message: &str) {
    let stderr = merge(out, parts).run_fails().stderr;
    assert!(stderr.contains(message), "expected `{message}` in:\n{stderr}");
    assert!(!out.exists(), "a refused merge writes no table");
    assert!(!out.with_extension("csv").exists(), "a refused merge writes no metadata");
}

#[test]
fn incomplete_duplicated_mismatched_or_changed_shards_are_refused() {
    let (tmp, images) = scratch();
    let dir = tmp.path();
    let p = three_parts(dir, &images, "npy");
    let out = dir.join("merged.npy");
    let (p1, p2, p3) = (p[0].as_path(), p[1].as_path(), p[2].as_path());

    // Incomplete and duplicated shard sets.
    refused(&[p1, p3], &out, "incomplete run: shard(s) 2/3 of 3 missing");
    std::fs::create_dir(dir.join("again")).unwrap();
    let again = dir.join("again/part1.npy");
    embed(&images, "clip", &again, Some("1/3"));
    refused(&[p1, p2, p3, &again], &out, "duplicated shard 1/3:");

    // Another model, another input (the same images in another order) and another shard count.
    let other_model = dir.join("siglip3.npy");
    embed(&images, "siglip", &other_model, Some("3/3"));
    refused(&[p1, p2, &other_model], &out, "has model");
    let manifest = dir.join("reversed.csv");
    let rows: String = IMAGES.iter().rev().map(|n| format!("imgs/{n}\n")).collect();
    std::fs::write(&manifest, format!("image\n{rows}")).unwrap();
    let other_input = dir.join("reversed3.npy");
    embed(&manifest, "clip", &other_input, Some("3/3"));
    refused(&[p1, p2, &other_input], &out, "has input");
    let four = dir.join("four3.npy");
    embed(&images, "clip", &four, Some("3/4"));
    refused(&[p1, p2, &four], &out, "is shard 1/3 of 5 items but");

    // Another precision: an f16 run needs a GPU, so this shard's part file is edited to say f16
    // (the merge trusts the part file; its checksums cover the table, not itself).
    let f16 = dir.join("f16");
    std::fs::create_dir(&f16).unwrap();
    let f16_table = f16.join("part3.npy");
    std::fs::copy(p3, &f16_table).unwrap();
    std::fs::copy(dir.join("part3.csv"), f16.join("part3.csv")).unwrap();
    let text = String::from_utf8(bytes(&dir.join("part3.npy.part.json"))).unwrap();
    assert!(text.contains("\"precision\": \"f32\""), "{text}");
    std::fs::write(f16.join("part3.npy.part.json"), text.replace("\"f32\"", "\"f16\"")).unwrap();
    refused(&[p1, p2, &f16_table], &out, "has precision f32 but");

    // Outputs changed or torn after the shard finished, and tables without a part file.
    let mut torn = bytes(p2);
    torn.truncate(torn.len() - 4);
    std::fs::write(p2, &torn).unwrap();
    refused(&[p1, p2, p3], &out, "the file was changed or torn after the shard finished");
    embed(&images, "clip", p2, Some("2/3"));
    std::fs::write(dir.join("part2.csv"), "image\nx.png\ny.png\n").unwrap();
    refused(&[p1, p2, p3], &out, "part2.csv: ");
    embed(&images, "clip", p2, Some("2/3"));
    let one = dir.join("one.npy");
    embed(&images, "clip", &one, None);
    refused(&[p1, &one, p3], &out, "one.npy.part.json: not the output of a `--shard K/N` run");

    // Once whole again, the same parts merge.
    merge(&out, &[p1, p2, p3]).run_ok();
    assert_eq!(bytes(&out), bytes(&one));
}

/// Writes an image folder `dir` holding the fixture images of `rows` under `img/` and their
/// manifest (`image`, `language`), as `generate` writes one; with `shard`, also its part file
/// (the format of `native/src/work/part.rs`).
fn image_folder(dir: &Path, rows: std::ops::Range<usize>, shard: Option<&str>) {
    std::fs::create_dir_all(dir.join("img")).unwrap();
    let mut manifest = String::from("image,language\n");
    for row in rows.clone() {
        let name = IMAGES[row];
        std::fs::copy(fixture("encoders/images").join(name), dir.join("img").join(name)).unwrap();
        manifest += &format!("img/{name},\"de, at\"\n");
    }
    std::fs::write(dir.join("manifest.csv"), &manifest).unwrap();
    if let Some(shard) = shard {
        let part = serde_json::json!({
            "format": "culturelens-part-v1",
            "command": "generate",
            "shard": shard,
            "items": IMAGES.len(),
            "range": [rows.start, rows.end],
            "rows": rows.len(),
            "model": "tiny-sd1",
            "precision": "f32",
            "input": {"name": "prompts.csv", "sha256": sha256(b"prompt\na cat\n")},
            "files": {"manifest": {"path": "manifest.csv", "bytes": manifest.len(), "sha256": sha256(manifest.as_bytes())}},
        });
        std::fs::write(dir.join("part.json"), serde_json::to_string_pretty(&part).unwrap()).unwrap();
    }
}

/// Every file under `dir`, by relative path, with its bytes.
fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&bytes(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every file under `dir` with its bytes, but the provenance manifest (its command and paths
/// differ between a merge and a single run by design).
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name() != Some("provenance.json".as_ref()) {
                files.push((path.strip_prefix(dir).unwrap().to_path_buf(), bytes(&path)));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn image_folders_merge_into_the_one_run_folder_and_embed_alike() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let one = dir.join("one");
    image_folder(&one, 0..5, None);
    // 5 items in 3 shards: ⌊5k/3⌋ bounds give rows 0..1, 1..3, 3..5.
    let ranges = [0..1, 1..3, 3..5];
    let parts: Vec<PathBuf> = (1..=3).map(|k| dir.join(format!("part{k}"))).collect();
    for (k, (part, rows)) in parts.iter().zip(ranges.clone()).enumerate() {
        image_folder(part, rows, Some(&format!("{}/3", k + 1)));
    }
    let merged = dir.join("merged");
    let stderr = merge(&merged, &[&parts[1], &parts[2], &parts[0]]).run_ok().stderr;
    assert!(stderr.contains("merged 3 shards (5 images)"), "{stderr}");
    assert_eq!(tree(&merged), tree(&one), "the merged folder is the one-run folder, file for file");
    let manifest = json(&merged.join("provenance.json"));
    assert_eq!(
        (manifest["command"].as_str(), manifest["parts"].as_array().map(Vec::len)),
        (Some("merge"), Some(3))
    );

    // embed reads the merged manifest exactly as the one-run manifest.
    embed(&merged.join("manifest.csv"), "clip", &dir.join("merged.npy"), None);
    embed(&one.join("manifest.csv"), "clip", &dir.join("one.npy"), None);
    assert_eq!(bytes(&dir.join("merged.npy")), bytes(&dir.join("one.npy")));

    // An existing output folder, a missing shard, an image outside the folder, a missing image
    // and an image listed by two shards are refused, leaving no output.
    let err = merge(&merged, &[&parts[0], &parts[1], &parts[2]]).run_fails().stderr;
    assert!(err.contains("already exists; merge into a new folder"), "{err}");
    let out = dir.join("out");
    let stderr = merge(&out, &[&parts[0], &parts[2]]).run_fails().stderr;
    assert!(stderr.contains("incomplete run: shard(s) 2/3 of 3 missing"), "{stderr}");
    let edit = |part: &Path, from: &str, to: &str| {
        let manifest = std::fs::read_to_string(part.join("manifest.csv")).unwrap().replace(from, to);
        std::fs::write(part.join("manifest.csv"), &manifest).unwrap();
        let text = std::fs::read_to_string(part.join("part.json")).unwrap();
        let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
        json["files"]["manifest"] = serde_json::json!({"path": "manifest.csv", "bytes": manifest.len(), "sha256": sha256(manifest.as_bytes())});
        std::fs::write(part.join("part.json"), json.to_string()).unwrap();
    };
    for (from, to, message) in [
        (
            "img/c_rgba.png",
            "../one/img/c_rgba.png",
            "column image: `../one/img/c_rgba.png` is not a path inside the folder",
        ),
        ("img/c_rgba.png", "img/zz.png", "manifest.csv, line 3 (data row 1), column image: image "),
        ("img/c_rgba.png", "img/a_rgb.png", "duplicated image img/a_rgb.png: in "),
    ] {
        edit(&parts[1], from, to);
        if to == "img/a_rgb.png" {
            std::fs::copy(parts[0].join(to), parts[1].join(to)).unwrap();
        }
        let stderr = merge(&out, &[&parts[0], &parts[1], &parts[2]]).run_fails().stderr;
        assert!(stderr.contains(message), "expected `{message}` in:\n{stderr}");
        assert!(!out.exists());
        edit(&parts[1], to, from);
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().and_then(|e| e.file_name().into_string().ok()))
        .filter(|n| n.starts_with(".culturelens-"))
        .collect();
    assert!(leftovers.is_empty(), "no temporary folder is left behind: {leftovers:?}");
}
