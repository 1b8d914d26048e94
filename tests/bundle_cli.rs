//! End-to-end tests of `culturelens bundle`, `culturelens demo-bundle` and `culturelens sos --bundle`.

use std::path::Path;

use crate::common::{fails, ok, p, read_csv};

fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

/// The arguments of `culturelens bundle` for the table `culturelens demo --write demo` wrote,
/// into `out`, followed by `extra`.
fn bundle_args(demo: &Path, out: &Path, extra: &[&str]) -> Vec<String> {
    let (npy, meta) = (demo.join("embeddings.npy"), demo.join("meta.csv"));
    let args = ["bundle", "--embeddings", p(&npy), "--meta", p(&meta), "--out", p(out)];
    args.iter().chain(extra).map(|s| s.to_string()).collect()
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// (cell key, n, sos) of a joint-score CSV `model,language,culture,n,sos`.
fn joint_scores(path: &Path) -> Vec<(String, f64)> {
    let (header, rows) = read_csv(path);
    assert_eq!(header, ["model", "language", "culture", "n", "sos"], "{}", path.display());
    rows.iter().map(|r| (r[..4].join("/"), r[4].parse().unwrap())).collect()
}

/// Largest |a − b| over two joint-score tables with the same cells in the same order.
fn max_difference(a: &[(String, f64)], b: &[(String, f64)]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            assert_eq!(x.0, y.0, "same (model, language, culture, n)");
            (x.1 - y.1).abs()
        })
        .fold(0.0, f64::max)
}

/// The committed numpy reference of the demo table's joint scores
/// (scripts/fixtures/make_demo_sos_reference.py).
fn numpy_reference() -> Vec<(String, f64)> {
    joint_scores(&culturelens_testkit::fixture("demo_sos_reference.csv"))
}

#[test]
fn demo_bundle_scores_like_the_demo_table() {
    let tmp = tempfile::tempdir().unwrap();
    let (bundle, demo) = (tmp.path().join("demo-bundle"), tmp.path().join("demo"));
    assert!(ok(&["demo-bundle", "--out", p(&bundle)]).contains("SYNTHETIC"));
    let m = manifest(&bundle);
    assert_eq!(
        (m["rows"].as_u64(), m["dim"].as_u64(), m["synthetic"].as_bool()),
        (Some(2160), Some(64), Some(true))
    );
    assert_eq!(m["languages"].as_array().unwrap().len(), 8);
    ok(&["demo", "--write", p(&demo)]);
    let out = tmp.path().join("sos.csv");
    ok(&["sos", "--bundle", p(&bundle), "--out", p(&out)]);
    assert_eq!(read_csv(&out), read_csv(&demo.join("sos.csv")), "a bundle scores exactly like its table");
    let numpy = max_difference(&joint_scores(&out), &numpy_reference());
    println!("max |bundle joint SoS - numpy reference| = {numpy:.2e}");
    assert!(numpy <= 2e-7, "measured 9.2e-8, like the table: {numpy}");

    // `culturelens bundle` of the same table: same embeddings and metadata bytes, and rewriting
    // an existing bundle replaces it.
    let packed = tmp.path().join("packed");
    for _ in 0..2 {
        ok(&strs(&bundle_args(&demo, &packed, &[])));
    }
    for file in ["embeddings.f32", "meta.csv"] {
        assert_eq!(
            std::fs::read(packed.join(file)).unwrap(),
            std::fs::read(bundle.join(file)).unwrap(),
            "{file}"
        );
    }
    let no_leftovers = std::fs::read_dir(tmp.path())
        .unwrap()
        .all(|e| !e.unwrap().file_name().to_string_lossy().starts_with('.'));
    assert!(no_leftovers, "temporary directories are cleaned up");
}

#[test]
fn f16_bundle_and_thumbnails() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let images = d.join("images");
    std::fs::create_dir_all(&images).unwrap();
    for (i, name) in ["a.png", "b.png"].iter().enumerate() {
        image::RgbImage::from_pixel(320, 200, image::Rgb([40 * i as u8, 90, 200]))
            .save(images.join(name))
            .unwrap();
    }
    let table = culturelens_table::EmbeddingTable::new(
        culturelens_table::Matrix::new(
            4,
            3,
            vec![1.0, 0.5, 0.0, 0.0, 1.0, 0.25, 1.0, 1.0, 1.0, -1.0, 0.5, 2.0],
        ),
        culturelens_table::Metadata::from_columns(
            None,
            [
                ("model", ["M", "M", "M", "M"]),
                ("language", ["en", "de", "en", "de"]),
                ("culture", ["X", "X", "Y", "Y"]),
                ("image", ["a.png", "b.png", "a.png", "b.png"]),
            ]
            .into_iter()
            .map(|(n, v)| (n.to_string(), v.iter().map(|s| s.to_string()).collect()))
            .collect(),
        )
        .unwrap(),
    );
    let (npy, csv) = (d.join("e.npy"), d.join("m.csv"));
    culturelens_table::save_table(&table, &npy, Some(&csv)).unwrap();
    let out = d.join("b");
    let args = ["bundle", "--embeddings", p(&npy), "--meta", p(&csv), "--out", p(&out)];
    ok(&[&args[..], &["--images", p(&images), "--dtype", "f16"]].concat());
    let m = manifest(&out);
    assert_eq!(m["dtype"], "f16");
    assert_eq!(m["files"].as_array().unwrap().len(), 4, "embeddings, metadata, two distinct thumbnails");
    let thumb = image::open(out.join("thumbs/000000.jpg")).unwrap();
    assert_eq!((thumb.width(), thumb.height()), (160, 100));
    let (header, rows) = read_csv(&out.join("meta.csv"));
    assert_eq!(header.last().unwrap(), "thumbnail");
    assert_eq!(rows[2].last().unwrap(), "thumbs/000000.jpg");
    let scores = d.join("s.csv");
    ok(&["sos", "--bundle", p(&out), "--out", p(&scores)]);
    assert_eq!(read_csv(&scores).1.len(), 4);
    // Every value of this table is exact in f16, so the f16 bundle scores exactly like the table.
    let from_table = d.join("t.csv");
    ok(&["sos", "--embeddings", p(&npy), "--meta", p(&csv), "--out", p(&from_table)]);
    assert_eq!(read_csv(&scores), read_csv(&from_table));

    // A missing image fails with row and column, and leaves no bundle behind.
    std::fs::remove_file(images.join("b.png")).unwrap();
    let out2 = d.join("b2");
    let args2 = ["bundle", "--embeddings", p(&npy), "--meta", p(&csv), "--out", p(&out2)];
    let err = fails(&[&args2[..], &["--images", p(&images)]].concat());
    assert!(err.contains("row 1, column image: cannot read image"), "{err}");
    assert!(!out2.exists());
}

/// Bound on |SoS(f16 bundle) − SoS(f32 table)| over the demo's joint scores: measured 2.5e-5
/// (f16 keeps 11 significant bits; the bound is stated in culturelens-bundle's crate docs).
const F16_BOUND: f64 = 5e-5;

#[test]
fn f16_demo_bundle_scores_like_f32_within_the_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let (demo, bundle) = (tmp.path().join("demo"), tmp.path().join("f16"));
    ok(&["demo", "--write", p(&demo)]);
    ok(&strs(&bundle_args(&demo, &bundle, &["--dtype", "f16"])));
    assert_eq!(manifest(&bundle)["dtype"], "f16");
    let out = tmp.path().join("sos.csv");
    ok(&["sos", "--bundle", p(&bundle), "--out", p(&out)]);
    let (f16, f32) = (joint_scores(&out), joint_scores(&demo.join("sos.csv")));
    let worst = max_difference(&f16, &f32);
    println!("max |joint SoS(f16 bundle) - SoS(f32)| = {worst:.2e} (bound {F16_BOUND:e})");
    assert!(worst <= F16_BOUND, "{worst}");
    assert!(worst > 0.0, "the f16 bundle really is rounded");
}

#[test]
fn corrupt_bundles_fail_without_output() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("b");
    ok(&["demo-bundle", "--out", p(&bundle)]);
    let out = tmp.path().join("sos.csv");
    let emb = bundle.join("embeddings.f32");
    let mut bytes = std::fs::read(&emb).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&emb, &bytes).unwrap();
    let err = fails(&["sos", "--bundle", p(&bundle), "--out", p(&out)]);
    assert!(err.contains("bundle file embeddings.f32: SHA-256 mismatch"), "{err}");
    std::fs::write(&emb, &bytes[..1000]).unwrap();
    let err = fails(&["sos", "--bundle", p(&bundle), "--out", p(&out)]);
    assert!(err.contains("has 1000 bytes but the manifest lists 552960"), "{err}");
    std::fs::write(bundle.join("manifest.json"), "{}").unwrap();
    let err = fails(&["sos", "--bundle", p(&bundle), "--out", p(&out)]);
    assert!(err.contains("manifest.json: not a culturelens bundle manifest"), "{err}");
    let err = fails(&["sos", "--bundle", p(tmp.path()), "--out", p(&out)]);
    assert!(err.contains("is not a bundle directory"), "{err}");
    assert!(!out.exists());
    // `bundle` refuses to replace a directory that is not a bundle.
    let demo = tmp.path().join("demo");
    ok(&["demo", "--write", p(&demo)]);
    let err = fails(&strs(&bundle_args(&demo, &demo, &[])));
    assert!(err.contains("exists and is not a bundle"), "{err}");
}

/// `bundle --piece-bytes`: the demo's 552,960-byte table in 65,536-byte pieces (eight whole ones
/// and 28,672 bytes), each listed with its SHA-256; `sos --bundle` scores it as the unpieced
/// bundle and names the piece a flipped byte lies in.
#[test]
fn large_files_are_hashed_piece_by_piece() {
    let tmp = tempfile::tempdir().unwrap();
    let (demo, bundle) = (tmp.path().join("demo"), tmp.path().join("b"));
    ok(&["demo", "--write", p(&demo)]);
    ok(&strs(&bundle_args(&demo, &bundle, &["--piece-bytes", "65536"])));
    let m = manifest(&bundle);
    let emb = &m["files"][0];
    assert_eq!((emb["path"].as_str(), emb["bytes"].as_u64()), (Some("embeddings.f32"), Some(552_960)));
    assert_eq!(emb["pieces"]["bytes"], 65_536);
    let pieces: Vec<&str> =
        emb["pieces"]["sha256"].as_array().unwrap().iter().map(|h| h.as_str().unwrap()).collect();
    assert_eq!(pieces.len(), 9);
    let bytes = std::fs::read(bundle.join("embeddings.f32")).unwrap();
    assert_eq!(pieces[8], culturelens_bundle::sha256_hex(&bytes[8 * 65_536..]));
    let out = tmp.path().join("sos.csv");
    ok(&["sos", "--bundle", p(&bundle), "--out", p(&out)]);
    assert_eq!(joint_scores(&out), joint_scores(&demo.join("sos.csv")));

    let mut bad = bytes.clone();
    bad[300_000] ^= 1;
    std::fs::write(bundle.join("embeddings.f32"), &bad).unwrap();
    std::fs::remove_file(&out).unwrap();
    let err = fails(&["sos", "--bundle", p(&bundle), "--out", p(&out)]);
    assert!(
        err.contains("bundle file embeddings.f32: SHA-256 mismatch: piece 4 of 9 (bytes 262144..327680)"),
        "{err}"
    );
    assert!(!out.exists());
    let err = fails(&strs(&bundle_args(&demo, &tmp.path().join("c"), &["--piece-bytes", "4096"])));
    assert!(err.contains("--piece-bytes") && err.contains("65536"), "{err}");
}

/// `bundle --magbig/--cultext2i`: the commands' tables travel unchanged under results/, listed in
/// the manifest with size and SHA-256; a table that does not parse is refused naming the user's
/// file, row and column, and no bundle is written.
#[test]
fn bundle_carries_result_tables() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = tmp.path().join("demo");
    ok(&["demo", "--write", p(&demo)]);
    let attributes = tmp.path().join("a.csv");
    std::fs::write(
        &attributes,
        "model,language,set,prompt_id,gender\nm,de,direct,p1,male\nm,de,direct,p1,female\nm,en,direct,p1,male\n",
    )
    .unwrap();
    let magbig = tmp.path().join("magbig.csv");
    ok(&["magbig", "--attributes", p(&attributes), "--out", p(&magbig)]);
    let cultext2i = tmp.path().join("c.csv");
    std::fs::write(
        &cultext2i,
        "model,language,concept,template,n,na,na_acc,cd,dp_modern\nm,de,city,t,2,0.5,0.5,0.5,0.7\n",
    )
    .unwrap();
    let out = tmp.path().join("b");
    let extra = ["--magbig", p(&magbig), "--magbig-attributes", p(&attributes), "--cultext2i", p(&cultext2i)];
    ok(&strs(&bundle_args(&demo, &out, &extra)));
    let m = manifest(&out);
    assert_eq!(
        m["results"],
        serde_json::json!({"magbig": "results/magbig.csv",
        "magbig_attributes": "results/magbig-attributes.csv", "cultext2i": "results/cultext2i.csv"})
    );
    assert_eq!(std::fs::read(out.join("results/magbig.csv")).unwrap(), std::fs::read(&magbig).unwrap());
    let listed =
        m["files"].as_array().unwrap().iter().find(|f| f["path"] == "results/magbig.csv").unwrap().clone();
    assert_eq!(listed["bytes"], std::fs::metadata(&magbig).unwrap().len());
    // The bundle still scores like the table.
    ok(&["sos", "--bundle", p(&out), "--out", p(&tmp.path().join("s.csv"))]);

    std::fs::write(
        &cultext2i,
        "model,language,concept,template,n,na,na_acc,cd\nm,de,city,t,two,0.5,0.5,0.5\n",
    )
    .unwrap();
    let bad = tmp.path().join("bad");
    let err = fails(&strs(&bundle_args(&demo, &bad, &["--cultext2i", p(&cultext2i)])));
    assert!(
        err.contains(&format!(
            "{}: bundle file results/cultext2i.csv, row 0, column n: `two` is not a number",
            p(&cultext2i)
        )),
        "{err}"
    );
    assert!(!bad.exists(), "no bundle written");
}
