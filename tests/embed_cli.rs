//! End-to-end tests of `culturelens embed` / `embed-text` on the committed encoder fixtures
//! (tiny random-weight transformers models, see scripts/fixtures/make_encoder_fixtures.py).

use std::path::Path;

use culturelens_table::{load_table, read_npy};

mod common;

use common::{culturelens, encoder_fixtures as fixtures, max_abs, reference};

fn copy_images(to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(fixtures().join("images")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn embed_folder_matches_transformers_rows_in_file_order() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("clip.npy");
    let weights = fixtures().join("clip");
    let images = fixtures().join("images");
    let o = culturelens(&[
        "embed",
        "--images",
        images.to_str().unwrap(),
        "--weights",
        weights.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--batch",
        "2",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = load_table(&out, Some(&tmp.path().join("clip.csv"))).unwrap();
    let names = table.meta.column("image").unwrap();
    assert_eq!(names, ["a_rgb.png", "b_grey.png", "c_rgba.png", "d_photo.jpg", "e_lossless.webp"]);
    let want = reference("clip", "image_embeds");
    let dim = table.dim();
    // PNG and lossless WebP decode exactly as Pillow does: the rows equal get_image_features.
    for (row, name) in names.iter().enumerate() {
        let err = max_abs(table.embeddings.row(row), &want[row * dim..(row + 1) * dim]);
        let bound = if name.ends_with(".jpg") { 0.05 } else { 1e-4 };
        assert!(err <= bound, "{name}: {err}");
    }
    assert!(!tmp.path().join("clip.npy.resume").exists(), "the resume log is removed after success");
}

#[test]
fn manifest_metadata_is_carried_and_shards_concatenate() {
    let tmp = tempfile::tempdir().unwrap();
    copy_images(&tmp.path().join("imgs"));
    let manifest = tmp.path().join("manifest.csv");
    std::fs::write(
        &manifest,
        "image,language,culture\nimgs/e_lossless.webp,de,German\nimgs/a_rgb.png,fr,French\nimgs/c_rgba.png,ja,Japanese\n",
    )
    .unwrap();
    let weights = fixtures().join("dinov2_reg");
    let mut shards = Vec::new();
    for shard in ["1/2", "2/2"] {
        let out = tmp.path().join(format!("part{}.parquet", &shard[..1]));
        let o = culturelens(&[
            "embed",
            "--images",
            manifest.to_str().unwrap(),
            "--weights",
            weights.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--shard",
            shard,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        shards.push(load_table(&out, None).unwrap());
    }
    assert_eq!(shards[0].len() + shards[1].len(), 3);
    let languages: Vec<String> =
        shards.iter().flat_map(|t| t.meta.column("language").unwrap().to_vec()).collect();
    assert_eq!(languages, ["de", "fr", "ja"]);
    // Manifest order, not file-name order: row 0 is e_lossless.webp (reference row 4).
    let want = reference("dinov2_reg", "image_embeds");
    let dim = shards[0].dim();
    assert!(max_abs(shards[0].embeddings.row(0), &want[4 * dim..5 * dim]) <= 1e-4);
}

#[test]
fn a_corrupt_image_is_reported_and_the_rest_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let images = tmp.path().join("imgs");
    copy_images(&images);
    std::fs::write(images.join("b_zz_broken.png"), b"\x89PNG not really").unwrap();
    let out = tmp.path().join("e.npy");
    let weights = fixtures().join("siglip");
    let args = [
        "embed",
        "--images",
        images.to_str().unwrap(),
        "--weights",
        weights.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    let o = culturelens(&args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(stderr.contains("b_zz_broken.png"), "{stderr}");
    assert!(!out.exists(), "no partial table");
    assert!(tmp.path().join("e.npy.resume").exists(), "finished rows are kept");

    // After removing the bad file the rerun recomputes nothing that was finished.
    std::fs::remove_file(images.join("b_zz_broken.png")).unwrap();
    let o = culturelens(&args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("resuming: 5 of 5 rows already embedded"), "{stderr}");
    assert_eq!(read_npy(&out).unwrap().rows(), 5);
}

#[test]
fn skip_bad_writes_the_good_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let images = tmp.path().join("imgs");
    copy_images(&images);
    std::fs::write(images.join("zz.jpg"), b"garbage").unwrap();
    let out = tmp.path().join("e.parquet");
    let weights = fixtures().join("dinov2");
    let o = culturelens(&[
        "embed",
        "--images",
        images.to_str().unwrap(),
        "--weights",
        weights.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--skip-bad",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("zz.jpg"));
    assert_eq!(load_table(&out, None).unwrap().len(), 5);
}

#[test]
fn embed_text_matches_get_text_features() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixtures().join("clip/reference.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let texts: Vec<String> = serde_json::from_str(header["__metadata__"]["texts"].as_str().unwrap()).unwrap();
    let prompts = tmp.path().join("prompts.csv");
    let mut w = csv::Writer::from_path(&prompts).unwrap();
    w.write_record(["prompt", "language"]).unwrap();
    for (i, t) in texts.iter().enumerate() {
        w.write_record([t.as_str(), &format!("l{i}")]).unwrap();
    }
    w.flush().unwrap();
    let out = tmp.path().join("t.npy");
    let weights = fixtures().join("clip");
    let o = culturelens(&[
        "embed-text",
        "--prompts",
        prompts.to_str().unwrap(),
        "--weights",
        weights.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--batch",
        "3",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = load_table(&out, Some(&tmp.path().join("t.csv"))).unwrap();
    assert_eq!(table.meta.column("language").unwrap()[4], "l4");
    assert!(max_abs(table.embeddings.data(), &reference("clip", "text_embeds")) <= 1e-4);
}

#[test]
fn a_folder_without_weights_fails_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(fixtures().join("clip/config.json"), tmp.path().join("config.json")).unwrap();
    let out = tmp.path().join("x.npy");
    let o = culturelens(&[
        "embed",
        "--images",
        fixtures().join("images").to_str().unwrap(),
        "--weights",
        tmp.path().to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("model.safetensors"));
    assert!(!out.exists());
}

#[test]
fn half_precision_on_the_cpu_is_refused_before_any_work() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("e.npy");
    let o = culturelens(&[
        "embed",
        "--precision",
        "f16",
        "--images",
        fixtures().join("images").to_str().unwrap(),
        "--weights",
        fixtures().join("clip").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--precision f16 runs on a GPU"), "{err}");
    assert!(std::fs::read_dir(tmp.path()).unwrap().next().is_none(), "nothing is written");
}
