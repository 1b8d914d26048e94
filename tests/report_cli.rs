//! End-to-end tests of `culturelens report` on a finished run written by the CLI itself
//! (`finished_run.rs`): the site holds the app, the bundle, the figures, every result table as
//! an HTML table with the CLI's exact values, and every command's provenance manifest; a rerun
//! replaces a previous report but never another folder. The same site in headless Chromium,
//! offline after load, is tests/web/report.test.mjs.

use std::path::Path;

use crate::common::{Cli, read_csv};
use crate::finished_run::finished_run;

/// A stand-in for the built browser app (web/dist): the report only copies it.
fn fake_app(dir: &Path) -> std::path::PathBuf {
    let app = dir.join("dist");
    std::fs::create_dir_all(app.join("assets")).unwrap();
    std::fs::write(app.join("index.html"), "<!doctype html><title>app</title>").unwrap();
    std::fs::write(app.join("assets/app.wasm"), b"\0asm").unwrap();
    app
}

/// The cells of the `<table data-file="FILE">` of the page, header first.
fn html_table(html: &str, file: &str) -> Vec<Vec<String>> {
    let start = html
        .find(&format!("<table class=\"result\" data-file=\"{file}\">"))
        .unwrap_or_else(|| panic!("no table {file}"));
    let table = &html[start..start + html[start..].find("</table>").unwrap()];
    let unescape = |t: &str| {
        t.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&")
    };
    table
        .split("<tr>")
        .skip(1)
        .map(|row| {
            let row = &row[..row.find("</tr>").unwrap()];
            // Cells are `<td>TEXT</td>` or `<th>TEXT</th>`; TEXT is escaped, so it holds no `<`.
            row.split("<t").skip(1).map(|cell| unescape(&cell[2..cell.find("</t").unwrap()])).collect()
        })
        .collect()
}

#[test]
fn report_site_holds_app_bundle_figures_tables_and_provenance() {
    let root = tempfile::tempdir().unwrap();
    let run = finished_run(root.path());
    let app = fake_app(root.path());
    let site = root.path().join("site");
    Cli::new("report").arg(&run.dir).opt("--out", &site).opt("--app", &app).opt("--scale", "1").run_ok();

    assert!(site.join("app/index.html").is_file() && site.join("app/assets/app.wasm").is_file());
    assert!(site.join("bundles/bundle/manifest.json").is_file());
    for stem in
        ["sos_heatmap", "sos_pearson", "sos_distributions", "sos_layers_m", "pca", "vendi", "magbig_sd"]
    {
        assert!(site.join("figures").join(format!("{stem}.png")).is_file(), "{stem}.png");
        assert!(site.join("figures").join(format!("{stem}.svg")).is_file(), "{stem}.svg");
    }
    let html = std::fs::read_to_string(site.join("index.html")).unwrap();
    assert!(html.contains("href=\"app/index.html?bundle=../bundles/bundle/\""));
    // Every result table, cell for cell as the CLI wrote it.
    for (file, path) in [
        ("sos.csv", &run.sos),
        ("magbig.csv", &run.magbig),
        ("cultext2i.csv", &run.cultext2i),
        ("colour/palettes.csv", &run.colour.join("palettes.csv")),
        ("colour/values.csv", &run.colour.join("values.csv")),
        ("colour/dominant_colours.csv", &run.colour.join("dominant_colours.csv")),
        ("sos_layers.csv", &run.layers),
    ] {
        let (header, rows) = read_csv(path);
        let table = html_table(&html, file);
        assert_eq!(table[0], header, "{file} header");
        assert_eq!(&table[1..], &rows[..], "{file} rows");
        assert_eq!(std::fs::read(site.join("results").join(file)).unwrap(), std::fs::read(path).unwrap());
    }
    // Every command of the run wrote its manifest, and the page shows each.
    for manifest in [
        "bundle/provenance.json",
        "sos.csv.provenance.json",
        "vendi.json.provenance.json",
        "magbig.csv.provenance.json",
        "cultext2i.csv.provenance.json",
        "colour/provenance.json",
    ] {
        assert!(run.dir.join(manifest).is_file(), "{manifest} missing from the run");
        assert!(html.contains(&format!("data-file=\"{manifest}\"")), "{manifest} not in the page");
    }
    let sos: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.dir.join("sos.csv.provenance.json")).unwrap()).unwrap();
    assert_eq!(sos["command"], "sos");
    assert_eq!(sos["backend"], "cpu");
    assert_eq!(sos["inputs"][0]["path"], run.bundle.to_str().unwrap());
    let vendi: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.dir.join("vendi.json.provenance.json")).unwrap()).unwrap();
    assert_eq!(vendi["seeds"]["seed"], 0);
    assert_eq!(vendi["precision"], "f64");
    let own: serde_json::Value =
        serde_json::from_slice(&std::fs::read(site.join("provenance.json")).unwrap()).unwrap();
    assert_eq!(own["command"], "report");

    // A rerun replaces the previous report; another folder is never replaced.
    std::fs::write(site.join("stale.txt"), "x").unwrap();
    Cli::new("report").arg(&run.dir).opt("--out", &site).opt("--app", &app).opt("--scale", "1").run_ok();
    assert!(!site.join("stale.txt").exists() && site.join("index.html").is_file());
    let other = root.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("keep.txt"), "x").unwrap();
    let err = Cli::new("report").arg(&run.dir).opt("--out", &other).opt("--app", &app).run_fails().stderr;
    assert!(err.contains("is not a culturelens report"), "{err}");
    assert!(other.join("keep.txt").is_file());
    let err = Cli::new("report")
        .arg(&run.dir)
        .opt("--out", root.path().join("x"))
        .opt("--app", root.path().join("nowhere"))
        .run_fails()
        .stderr;
    assert!(err.contains("trunk build"), "{err}");
}

#[test]
fn embed_text_manifest_names_the_model_its_weight_files_and_the_prompt_sets() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = dir.path().join("p.csv");
    std::fs::write(&prompts, "prompt,language,set\na photo of a cat,en,sos\nein Foto,de,magbig\n").unwrap();
    let weights = culturelens_testkit::fixture("encoders/clip");
    let out = dir.path().join("t.npy");
    Cli::new("embed-text").opt("--prompts", &prompts).opt("--weights", &weights).opt("--out", &out).run_ok();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("t.npy.provenance.json")).unwrap()).unwrap();
    assert_eq!(manifest["command"], "embed-text");
    assert_eq!(manifest["models"][0]["id"], weights.to_str().unwrap());
    let files = manifest["models"][0]["files"].as_array().unwrap();
    let safetensors =
        files.iter().find(|f| f["file"] == "model.safetensors").expect("the weight file is listed");
    assert_eq!(safetensors["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(manifest["prompt_sets"], serde_json::json!(["magbig", "sos"]));
    assert_eq!((manifest["backend"].as_str(), manifest["precision"].as_str()), (Some("cpu"), Some("f32")));
    assert!(manifest["argv"].as_array().unwrap().iter().any(|a| a == "embed-text"));
}

/// `report` from an installed binary alone (a copy of the binary in a folder of its own, run from
/// a folder without web/dist): the site has everything but the app, its page and stderr say the
/// app was left out and how to add it; with app/ beside the binary (the release archives'
/// layout) the app is copied from there without --app.
#[test]
fn report_works_from_the_binary_alone_and_finds_the_app_beside_it() {
    let root = tempfile::tempdir().unwrap();
    let run = finished_run(root.path());
    let installed = root.path().join("installed");
    std::fs::create_dir_all(&installed).unwrap();
    let binary = installed.join("culturelens");
    std::fs::copy(env!("CARGO_BIN_EXE_culturelens"), &binary).unwrap();
    let elsewhere = root.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let report = |site: &std::path::Path| {
        std::process::Command::new(&binary)
            .current_dir(&elsewhere)
            .args(["report", run.dir.to_str().unwrap(), "--out", site.to_str().unwrap(), "--scale", "1"])
            .output()
            .unwrap()
    };
    let site = root.path().join("site");
    let out = report(&site);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("the browser app was left out") && stderr.contains("--app web/dist"), "{stderr}");
    assert!(!site.join("app").exists());
    assert!(
        site.join("figures/sos_heatmap.png").is_file() && site.join("bundles/bundle/manifest.json").is_file()
    );
    let html = std::fs::read_to_string(site.join("index.html")).unwrap();
    assert!(
        html.contains("class=\"no-app\"") && !html.contains("href=\"app/index.html"),
        "no link to a missing app"
    );

    let app = fake_app(&installed);
    std::fs::rename(&app, installed.join("app")).unwrap();
    let with_app = root.path().join("with-app");
    let out = report(&with_app);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(with_app.join("app/assets/app.wasm").is_file());
    assert!(std::fs::read_to_string(with_app.join("index.html")).unwrap().contains("href=\"app/index.html"));
}
