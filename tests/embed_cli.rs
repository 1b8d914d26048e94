//! End-to-end tests of `culturelens embed` / `embed-text` on the committed encoder fixtures
//! (tiny random-weight transformers models, see scripts/fixtures/make_encoders.py).

use std::path::{Path, PathBuf};

use culturelens_table::load_table;
use culturelens_testkit::{fixture, max_abs};

use crate::common::{Cli, reference, reference_texts};

/// The fixture images in file-name order; their rows in the reference follow this order.
const IMAGES: [&str; 5] = ["a_rgb.png", "b_grey.png", "c_rgba.png", "d_photo.jpg", "e_lossless.webp"];

fn copy_images(to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for name in IMAGES {
        std::fs::copy(fixture("encoders/images").join(name), to.join(name)).unwrap();
    }
}

/// A scratch folder with a copy of the fixture images in `imgs/` and `clean.EXT`, the table an
/// uninterrupted run of `model` (with `batch` images per pass) writes from them; returns the
/// folder, the images and the clean table.
fn clean_run(model: &str, ext: &str, batch: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let images = tmp.path().join("imgs");
    copy_images(&images);
    let clean = tmp.path().join(format!("clean.{ext}"));
    embed(&images, model, &clean).opt("--batch", batch).run_ok();
    (tmp, images, clean)
}

/// `culturelens embed --images IMAGES --weights <fixture MODEL> --out OUT`.
fn embed(images: &Path, model: &str, out: &Path) -> Cli {
    Cli::new("embed")
        .opt("--images", images)
        .opt("--weights", fixture("encoders").join(model))
        .opt("--out", out)
}

/// The rows of the embedding table at `out` (with its metadata CSV beside a `.npy`) and its
/// `image` column.
fn table(out: &Path) -> (Vec<Vec<f32>>, Vec<String>) {
    let meta = out.with_extension("csv");
    let table =
        load_table(out, out.extension().is_some_and(|e| e == "npy").then_some(meta.as_path())).unwrap();
    let rows = (0..table.len()).map(|r| table.embeddings.row(r).to_vec()).collect();
    (rows, table.meta.column("image").unwrap().to_vec())
}

/// Largest max-abs difference from transformers' features allowed for every image (PNG, WebP
/// and JPEG, which decodes as Pillow's libjpeg-turbo does) and prompt (about 2.5× the largest
/// measured, 6.0e-7; printed with `--nocapture`).
const PARITY: f32 = 1.5e-6;

/// Row `row` of `model`'s reference image embeddings.
fn reference_row(model: &str, row: usize, dim: usize) -> Vec<f32> {
    let all = reference(model, "image_embeds");
    assert_eq!(all.len(), IMAGES.len() * dim, "{model}: one reference row per fixture image");
    all[row * dim..(row + 1) * dim].to_vec()
}

#[test]
fn embed_folder_matches_transformers_rows_in_file_order() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("clip.npy");
    embed(&fixture("encoders/images"), "clip", &out).opt("--batch", "2").run_ok();
    let (rows, names) = table(&out);
    assert_eq!(names, IMAGES);
    assert_eq!(rows.len(), names.len());
    // Every format decodes exactly as Pillow does: the rows equal get_image_features.
    for (row, (name, values)) in names.iter().zip(&rows).enumerate() {
        let err = max_abs(values, &reference_row("clip", row, values.len()));
        println!("clip {name}: max |culturelens - transformers| = {err:.3e} (bound {PARITY:.1e})");
        assert!(err <= PARITY, "{name}: {err}");
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
    let whole = tmp.path().join("whole.parquet");
    embed(&manifest, "dinov2_reg", &whole).run_ok();
    let mut shards = Vec::new();
    for shard in ["1/2", "2/2"] {
        let out = tmp.path().join(format!("part{}.parquet", &shard[..1]));
        embed(&manifest, "dinov2_reg", &out).opt("--shard", shard).run_ok();
        shards.push(load_table(&out, None).unwrap());
    }
    // Shard 1/2 of 3 rows is row 0, shard 2/2 rows 1 and 2 (⌊k·3/2⌋ bounds).
    assert_eq!((shards[0].len(), shards[1].len()), (1, 2));
    let languages: Vec<String> =
        shards.iter().flat_map(|t| t.meta.column("language").unwrap().to_vec()).collect();
    assert_eq!(languages, ["de", "fr", "ja"]);
    let cultures: Vec<String> =
        shards.iter().flat_map(|t| t.meta.column("culture").unwrap().to_vec()).collect();
    assert_eq!(cultures, ["German", "French", "Japanese"]);
    // Manifest order, not file-name order: rows are e_lossless.webp, a_rgb.png, c_rgba.png
    // (reference rows 4, 0, 2), each equal to transformers' features.
    let concatenated: Vec<Vec<f32>> =
        shards.iter().flat_map(|t| (0..t.len()).map(|r| t.embeddings.row(r).to_vec())).collect();
    assert_eq!(concatenated.len(), 3);
    for (values, reference_index) in concatenated.iter().zip([4, 0, 2]) {
        let err = max_abs(values, &reference_row("dinov2_reg", reference_index, values.len()));
        let name = IMAGES[reference_index];
        println!("dinov2_reg {name}: max |shard row - transformers| = {err:.3e} (bound {PARITY:.1e})");
        assert!(err <= PARITY, "{name}: {err}");
    }
    // The shards concatenated are the whole run's table, bit for bit.
    assert_eq!(concatenated, table(&whole).0);
}

#[test]
fn a_corrupt_image_is_reported_and_the_rest_resume() {
    let (tmp, images, clean) = clean_run("siglip", "npy", "16");
    std::fs::write(images.join("b_zz_broken.png"), b"\x89PNG not really").unwrap();
    let out = tmp.path().join("e.npy");
    let log = tmp.path().join("e.npy.resume");
    let stderr = embed(&images, "siglip", &out).run_fails().stderr;
    assert!(stderr.contains("b_zz_broken.png"), "{stderr}");
    assert!(!out.exists(), "no partial table");
    assert!(log.exists(), "finished rows are kept");

    // After removing the bad file the rerun recomputes nothing that was finished, and its rows
    // are the uninterrupted run's, bit for bit.
    std::fs::remove_file(images.join("b_zz_broken.png")).unwrap();
    let stderr = embed(&images, "siglip", &out).run_ok().stderr;
    assert!(stderr.contains("resuming: 5 of 5 rows already embedded"), "{stderr}");
    let (resumed, names) = table(&out);
    assert_eq!(names, IMAGES);
    assert_eq!(resumed, table(&clean).0, "resumed rows equal the uninterrupted run's");
}

/// A run killed while appending a row leaves a torn record at the end of the log: the rerun
/// takes only the whole records as finished, embeds the rest, and writes the uninterrupted
/// run's table.
#[test]
fn a_torn_resume_record_is_embedded_again() {
    let (tmp, images, clean) = clean_run("dinov2", "npy", "1");

    std::fs::write(images.join("zz_broken.png"), b"\x89PNG not really").unwrap();
    let out = tmp.path().join("e.npy");
    embed(&images, "dinov2", &out).opt("--batch", "1").run_fails();
    std::fs::remove_file(images.join("zz_broken.png")).unwrap();
    let log = tmp.path().join("e.npy.resume");
    let bytes = std::fs::read(&log).unwrap();
    let dim = table(&clean).0[0].len();
    // Five whole records of (4-byte length, path, dim f32) after the header; cut the last in half.
    let record = |name: &str| 4 + images.join(name).to_str().unwrap().len() + 4 * dim;
    let header = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    assert_eq!(bytes.len(), header + IMAGES.iter().map(|n| record(n)).sum::<usize>());
    std::fs::write(&log, &bytes[..bytes.len() - record("e_lossless.webp") / 2]).unwrap();

    let stderr = embed(&images, "dinov2", &out).opt("--batch", "1").run_ok().stderr;
    assert!(stderr.contains("resuming: 4 of 5 rows already embedded"), "{stderr}");
    assert!(stderr.contains("embedded 1 images"), "{stderr}");
    assert_eq!(table(&out), table(&clean), "rows equal the uninterrupted run's");
    assert!(!log.exists());
}

#[test]
fn skip_bad_writes_the_good_rows() {
    let (tmp, images, clean) = clean_run("dinov2", "parquet", "16");
    std::fs::write(images.join("zz.jpg"), b"garbage").unwrap();
    let out = tmp.path().join("e.parquet");
    let stderr = embed(&images, "dinov2", &out).flag("--skip-bad").run_ok().stderr;
    assert!(stderr.contains("zz.jpg"), "{stderr}");
    assert_eq!(table(&out), table(&clean), "the good images' rows, as a clean run writes them");
}

/// A JPEG cut short (here the photo's first 1,200 of 1,802 bytes) decodes to a grey-filled image
/// that is not the photo; Pillow, and so transformers, refuse it ("image file is truncated").
/// `embed` refuses it by that name, naming the file once, and `--skip-bad` leaves it out.
#[test]
fn a_truncated_jpeg_is_refused_by_name_and_skipped_with_skip_bad() {
    let (tmp, images, clean) = clean_run("clip", "npy", "16");
    let photo = std::fs::read(images.join("d_photo.jpg")).unwrap();
    std::fs::write(images.join("zz_cut.jpg"), &photo[..1200]).unwrap();
    let out = tmp.path().join("e.npy");
    let stderr = embed(&images, "clip", &out).run_fails().stderr;
    let cut = images.join("zz_cut.jpg").display().to_string();
    assert!(stderr.contains(&format!("  {cut}: cannot decode image: image file is truncated")), "{stderr}");
    assert_eq!(stderr.matches(&cut).count(), 1, "the file is named once: {stderr}");
    assert!(!out.exists());
    let stderr = embed(&images, "clip", &out).flag("--skip-bad").run_ok().stderr;
    assert!(stderr.contains("image file is truncated"), "{stderr}");
    assert_eq!(table(&out), table(&clean), "the intact images' rows only");
}

#[test]
fn embed_text_matches_get_text_features() {
    let tmp = tempfile::tempdir().unwrap();
    let texts = reference_texts("clip");
    let prompts = tmp.path().join("prompts.csv");
    let mut w = csv::Writer::from_path(&prompts).unwrap();
    w.write_record(["prompt", "language"]).unwrap();
    for (i, t) in texts.iter().enumerate() {
        w.write_record([t.as_str(), &format!("l{i}")]).unwrap();
    }
    w.flush().unwrap();
    let out = tmp.path().join("t.npy");
    Cli::new("embed-text")
        .opt("--prompts", &prompts)
        .opt("--weights", fixture("encoders/clip"))
        .opt("--out", &out)
        .opt("--batch", "3")
        .run_ok();
    let table = load_table(&out, Some(&tmp.path().join("t.csv"))).unwrap();
    let want_languages: Vec<String> = (0..texts.len()).map(|i| format!("l{i}")).collect();
    assert_eq!(table.meta.column("language").unwrap(), want_languages);
    assert_eq!(table.meta.column("prompt").unwrap(), texts);
    let err = max_abs(table.embeddings.data(), &reference("clip", "text_embeds"));
    println!("clip text: max |culturelens - transformers| = {err:.3e} (bound {PARITY:.1e})");
    assert!(err <= PARITY, "{err}");
}

#[test]
fn a_folder_without_weights_fails_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(fixture("encoders/clip/config.json"), tmp.path().join("config.json")).unwrap();
    let out = tmp.path().join("x.npy");
    let stderr = Cli::new("embed")
        .opt("--images", fixture("encoders/images"))
        .opt("--weights", tmp.path())
        .opt("--out", &out)
        .run_fails()
        .stderr;
    assert!(stderr.contains("model.safetensors"), "{stderr}");
    assert!(!out.exists());
}

#[test]
fn half_precision_on_the_cpu_is_refused_before_any_work() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("e.npy");
    let stderr =
        embed(&fixture("encoders/images"), "clip", &out).opt("--precision", "f16").run_fails().stderr;
    assert!(stderr.contains("--precision f16 runs on a GPU"), "{stderr}");
    assert!(std::fs::read_dir(tmp.path()).unwrap().next().is_none(), "nothing is written");
}

/// The table names the encoder that made it (`encoder` column): the folder's name, the hub id
/// `_name_or_path` in its config.json, or `--encoder-name`; `sos` records it in its provenance
/// and `bundle` in its manifest. An input that has an `encoder` column already is refused.
#[test]
fn the_table_names_its_encoder_and_later_steps_carry_it() {
    let tmp = tempfile::tempdir().unwrap();
    let encoder_column = |out: &Path| {
        let table = load_table(out, Some(&out.with_extension("csv"))).unwrap();
        let mut names = table.meta.column("encoder").expect("an encoder column").to_vec();
        names.dedup();
        names
    };
    let by_folder = tmp.path().join("folder.npy");
    embed(&fixture("encoders/images"), "clip", &by_folder).run_ok();
    assert_eq!(encoder_column(&by_folder), ["clip"]);
    // A folder saved with the hub id it was loaded from.
    let saved = tmp.path().join("weights");
    std::fs::create_dir(&saved).unwrap();
    for entry in std::fs::read_dir(fixture("encoders/clip")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, saved.join(path.file_name().unwrap())).unwrap();
    }
    let config = saved.join("config.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    json["_name_or_path"] = "openai/clip-vit-base-patch32".into();
    std::fs::write(&config, json.to_string()).unwrap();
    let by_config = tmp.path().join("config.npy");
    Cli::new("embed")
        .opt("--images", fixture("encoders/images"))
        .opt("--weights", &saved)
        .opt("--out", &by_config)
        .run_ok();
    assert_eq!(encoder_column(&by_config), ["openai/clip-vit-base-patch32"]);
    let named = tmp.path().join("named.npy");
    embed(&fixture("encoders/images"), "clip", &named).opt("--encoder-name", "tiny CLIP").run_ok();
    assert_eq!(encoder_column(&named), ["tiny CLIP"]);
    let prompts = tmp.path().join("p.txt");
    std::fs::write(&prompts, "a\nb\n").unwrap();
    let text = tmp.path().join("text.npy");
    Cli::new("embed-text")
        .opt("--prompts", &prompts)
        .opt("--weights", fixture("encoders/clip"))
        .opt("--encoder-name", "tiny CLIP text")
        .opt("--out", &text)
        .run_ok();
    assert_eq!(encoder_column(&text), ["tiny CLIP text"]);

    // sos (its provenance) and bundle (its manifest) carry the encoder on.
    let meta = tmp.path().join("named.csv");
    let csv = std::fs::read_to_string(&meta).unwrap();
    let mut lines = csv.lines();
    let mut with_groups = format!("{},model,language,culture\n", lines.next().unwrap());
    for (i, line) in lines.enumerate() {
        with_groups += &format!("{line},m,{},c{}\n", ["en", "de"][i % 2], i % 2);
    }
    std::fs::write(&meta, with_groups).unwrap();
    let sos = tmp.path().join("sos.csv");
    Cli::new("sos").opt("--embeddings", &named).opt("--meta", &meta).opt("--out", &sos).run_ok();
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("sos.csv.provenance.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["encoders"], serde_json::json!(["tiny CLIP"]), "{manifest}");
    let bundle = tmp.path().join("bundle");
    Cli::new("bundle").opt("--embeddings", &named).opt("--meta", &meta).opt("--out", &bundle).run_ok();
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["embedding_model"], "tiny CLIP", "{manifest}");

    // An image list with an `encoder` column of its own is refused, by file and column.
    let list = tmp.path().join("list.csv");
    let images = fixture("encoders/images");
    std::fs::write(&list, format!("image,encoder\n{}/a_rgb.png,x\n", images.display())).unwrap();
    let err = embed(&list, "clip", &tmp.path().join("refused.npy")).run_fails().stderr;
    assert!(err.contains("list.csv") && err.contains("`encoder`"), "{err}");
    assert!(!tmp.path().join("refused.npy").exists());
}
