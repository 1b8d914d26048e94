//! End-to-end tests of `culturelens prompts` through the built binary, reading the upstream files
//! from the shared mirror (`../shared/data/upstream` beside the checkout; CI provides it).

use std::path::Path;

use culturelens_testkit::upstream_mirror;

use crate::common::{Cli, p, read_csv};

/// `culturelens ARGS…` with its cache in `cache` and no mirror or base URL from the environment.
fn cli(cache: &Path, args: &[&str]) -> Cli {
    Cli::from_args(args)
        .env("CULTURELENS_CACHE", cache)
        .env_remove("CULTURELENS_DATA_MIRROR")
        .env_remove("CULTURELENS_DATA_BASE_URL")
}

/// Runs `cli(cache, args)`, asserts success and returns (stdout, stderr).
fn ok(cache: &Path, args: &[&str]) -> (String, String) {
    let run = cli(cache, args).run_ok();
    (run.stdout, run.stderr)
}

/// Runs `cli(cache, args)`, asserts a non-zero exit and returns stderr.
fn fails(cache: &Path, args: &[&str]) -> String {
    cli(cache, args).run_fails().stderr
}

#[test]
fn export_sos_csv_from_the_mirror() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, out) = (dir.path().join("cache"), dir.path().join("sos.csv"));
    let mirror = upstream_mirror();
    let args = ["prompts", "export", "sos", "--out", p(&out), "--mirror", p(&mirror)];
    let (stdout, stderr) = ok(&cache, &args);
    assert!(stdout.contains("wrote 21546 sos prompts (14 languages: en 1539, am 1539"), "{stdout}");
    assert!(
        stderr.contains("Licence of the sos prompt set") && stderr.contains("all rights reserved"),
        "{stderr}"
    );
    let (header, rows) = read_csv(&out);
    assert_eq!(&header[..4], ["id", "set", "language", "prompt"]);
    for column in ["english", "culture", "template", "person", "gender_form"] {
        assert!(header.iter().any(|h| h == column), "{column}");
    }
    assert_eq!(rows.len(), 21_546);
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let honduran = rows.iter().find(|r| r[0] == "sos-de-b-honduran-man").unwrap();
    assert_eq!(honduran[col("culture")], "Honduran");
    assert_eq!(honduran[col("english")], "A Honduran man");
    assert_eq!(honduran[col("language")], "de");
    // The licence is shown once per cache.
    let (_, stderr) = ok(&cache, &args);
    assert!(!stderr.contains("Licence"), "{stderr}");
}

#[test]
fn export_magbig_languages_as_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, out) = (dir.path().join("cache"), dir.path().join("magbig.parquet"));
    let mirror = upstream_mirror();
    let export = |out: &Path| {
        ok(
            &cache,
            &["prompts", "export", "magbig", "--out", p(out), "--languages", "en,de", "--mirror", p(&mirror)],
        )
    };
    let (stdout, _) = export(&out);
    assert!(stdout.contains("wrote 795 magbig prompts (2 languages: en 322, de 473)"), "{stdout}");
    let bytes = std::fs::read(&out).unwrap();
    assert!(bytes.starts_with(b"PAR1") && bytes.ends_with(b"PAR1"));

    // The Parquet rows equal the CSV export's, column by column.
    let csv = dir.path().join("magbig.csv");
    export(&csv);
    let (header, rows) = read_csv(&csv);
    let parquet = culturelens_table::read_metadata_parquet(&out).unwrap();
    assert_eq!(parquet.names(), header.as_slice());
    assert_eq!((parquet.n_rows(), rows.len()), (795, 795));
    for (i, name) in header.iter().enumerate() {
        let from_csv: Vec<&str> = rows.iter().map(|r| r[i].as_str()).collect();
        assert_eq!(parquet.column(name).unwrap(), from_csv.as_slice(), "column {name}");
    }
    let de = rows.iter().position(|r| r[2] == "de").unwrap();
    assert_eq!(parquet.column("language").unwrap()[de], "de");
}

#[test]
fn export_cube_and_cultext2i_with_translations() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let out = dir.path().join("cube.csv");
    let (stdout, _) =
        ok(&cache, &["prompts", "export", "cube", "--out", p(&out), "--mirror", p(&upstream_mirror())]);
    assert!(stdout.contains("wrote 1031 cube prompts (1 languages: en 1031)"), "{stdout}");
    let (header, rows) = read_csv(&out);
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let awareness: Vec<&Vec<String>> = rows.iter().filter(|r| r[col("kind")] == "awareness").collect();
    assert_eq!(awareness.len(), 1_002);
    assert_eq!(awareness.iter().filter(|r| r[col("culture")] == "Nigeria").count(), 108);
    assert!(awareness.iter().all(|r| r[col("negative_prompt")].starts_with("multiple items, blurry")));

    let translations = dir.path().join("tr.csv");
    std::fs::write(
        &translations,
        "language,concept,translated_prompt,translated_concept\nru,food,фото еда,еда\n",
    )
    .unwrap();
    let out = dir.path().join("cultext2i.csv");
    let (stdout, _) = ok(
        &cache,
        &[
            "prompts",
            "export",
            "cultext2i",
            "--out",
            p(&out),
            "--translations",
            p(&translations),
            "--languages",
            "ru",
        ],
    );
    assert!(stdout.contains("wrote 406 cultext2i prompts (1 languages: ru 406)"), "{stdout}");
    let (header, rows) = read_csv(&out);
    let food = rows.iter().find(|r| r[0] == "cultext2i-ru-translated_prompt-food").unwrap();
    assert_eq!(food[header.iter().position(|h| h == "prompt").unwrap()], "фото еда");
}

#[test]
fn list_and_show_describe_the_sets() {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, _) = ok(dir.path(), &["prompts", "list"]);
    for name in ["sos", "magbig", "cube", "cultext2i"] {
        assert!(stdout.lines().any(|l| l.starts_with(name)), "{name}: {stdout}");
    }
    assert!(stdout.contains("0 of 31 cached"), "{stdout}");
    let (stdout, _) = ok(dir.path(), &["prompts", "show", "magbig"]);
    assert!(stdout.contains("prompts/indirect:gender_neutral/occ_german_star.csv"), "{stdout}");
    assert!(
        stdout.contains("Apache-2.0") && stdout.contains("gender_system") && stdout.contains("salesperson")
    );
    let (stdout, _) = ok(dir.path(), &["prompts", "show", "cube"]);
    assert!(
        stdout.contains("CC BY-NC-SA 4.0")
            && stdout.contains("landscapes")
            && stdout.contains("negative_prompt")
    );
    let stderr = fails(dir.path(), &["prompts", "show", "laion"]);
    assert!(stderr.contains("unknown prompt set \"laion\""), "{stderr}");
}

#[test]
fn bad_requests_fail_without_output() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let out = dir.path().join("x.csv");
    let mirror = upstream_mirror();

    let empty = dir.path().join("empty-mirror");
    std::fs::create_dir(&empty).unwrap();
    let stderr = fails(&cache, &["prompts", "export", "cube", "--out", p(&out), "--mirror", p(&empty)]);
    assert!(stderr.contains("has no cube/cube_1k.json"), "{stderr}");

    let corrupt = dir.path().join("corrupt-mirror");
    std::fs::create_dir_all(corrupt.join("cube")).unwrap();
    std::fs::write(corrupt.join("cube/cube_1k.json"), "[]").unwrap();
    let stderr = fails(&cache, &["prompts", "export", "cube", "--out", p(&out), "--mirror", p(&corrupt)]);
    assert!(stderr.contains("checksum mismatch for cube/cube_1k.json"), "{stderr}");
    assert!(
        stderr.contains("expected sha256 bdb5b477bb75f54112d44a540b064ae6cbb5600e3b719c47a645b459b140db76")
    );

    let stderr = fails(
        &cache,
        &["prompts", "export", "cube", "--out", p(&out), "--languages", "de", "--mirror", p(&mirror)],
    );
    assert!(stderr.contains("cube has no prompts in de (languages: en)"), "{stderr}");
    let stderr = fails(
        &cache,
        &["prompts", "export", "sos", "--out", p(&dir.path().join("x.json")), "--mirror", p(&mirror)],
    );
    assert!(stderr.contains("must end in .csv or .parquet"), "{stderr}");
    let stderr = fails(
        &cache,
        &["prompts", "export", "sos", "--out", p(&out), "--translations", "t.csv", "--mirror", p(&mirror)],
    );
    assert!(stderr.contains("a translation file applies to the cultext2i set, not sos"), "{stderr}");

    let bad = dir.path().join("bad-tr.csv");
    std::fs::write(&bad, "language,concept,translated_prompt,translated_concept\nde,Spaceship,x,y\n")
        .unwrap();
    let stderr =
        fails(&cache, &["prompts", "export", "cultext2i", "--out", p(&out), "--translations", p(&bad)]);
    assert!(
        stderr.contains("bad-tr.csv, line 2, column concept: \"Spaceship\" is not a Table 9 concept"),
        "{stderr}"
    );
    assert!(!out.exists(), "no partial output");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 4, "only cache, mirrors and bad-tr.csv");
}

#[test]
fn download_failures_name_the_url_and_cache_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let out = dir.path().join("x.csv");
    // A loopback port with nothing listening: the connection is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let stderr = Cli::new("prompts")
        .arg("export")
        .arg("cube")
        .opt("--out", &out)
        .env("CULTURELENS_CACHE", &cache)
        .env("CULTURELENS_DATA_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env_remove("CULTURELENS_DATA_MIRROR")
        .run_fails()
        .stderr;
    assert!(
        stderr.contains(&format!(
            "download of cube/cube_1k.json from http://127.0.0.1:{port}/google-deepmind/cube/4ec2d350102dcfc03e41aa51ee0f2398d642a1a6/dataset/cube_1k.json failed"
        )),
        "{stderr}"
    );
    assert!(!out.exists());
    assert!(
        !cache.join("upstream/cube").exists()
            || std::fs::read_dir(cache.join("upstream/cube")).unwrap().count() == 0
    );
}

/// `--cultures`, `--persons`, `--templates` and `--limit` (first N per language) on `prompts
/// export`; the same filters on `generate --prompts FILE` keep the same rows; a filter on a
/// missing column, one that keeps nothing, and a filter beside a single `--prompt` are refused.
#[test]
fn export_and_generate_filter_by_culture_person_template_and_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, out) = (dir.path().join("cache"), dir.path().join("sos.csv"));
    let mirror = upstream_mirror();
    let filters = ["--languages", "en,de", "--persons", "woman", "--templates", "a", "--limit", "4"];
    let mut args = vec!["prompts", "export", "sos", "--out", p(&out), "--mirror", p(&mirror)];
    args.extend(filters);
    let (stdout, _) = ok(&cache, &args);
    assert!(stdout.contains("wrote 8 sos prompts (2 languages: en 4, de 4)"), "{stdout}");
    let (header, rows) = read_csv(&out);
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    assert!(rows.iter().all(|r| r[col("person")] == "woman" && r[col("template")] == "a"));
    // The first four of each language: the same cultures in both (the set lists its languages
    // in parallel).
    let cultures = |l: &str| {
        rows.iter().filter(|r| r[col("language")] == l).map(|r| r[col("culture")].clone()).collect::<Vec<_>>()
    };
    assert_eq!(cultures("en"), cultures("de"));
    // --cultures on top, case-insensitive.
    let first = cultures("en")[0].to_lowercase();
    let one = dir.path().join("one.csv");
    let mut args =
        vec!["prompts", "export", "sos", "--out", p(&one), "--mirror", p(&mirror), "--cultures", &first];
    args.extend(filters);
    let (stdout, _) = ok(&cache, &args);
    assert!(stdout.contains("wrote 2 sos prompts"), "{stdout}");

    // generate --prompts FILE applies the same filters to the file's columns (refusals only: the
    // images themselves are generate_cli's).
    let stderr =
        fails(&cache, &["generate", "--prompt", "a cat", "--limit", "2", "--pipeline", "x", "--out", "y"]);
    assert!(stderr.contains("a single --prompt has nothing to filter"), "{stderr}");
    let no_person = dir.path().join("plain.csv");
    std::fs::write(&no_person, "prompt,language\na cat,en\n").unwrap();
    let pipeline = culturelens_testkit::fixture("diffusion/tiny-sd1");
    let gen_out = dir.path().join("imgs");
    let stderr = fails(
        &cache,
        &[
            "generate",
            "--prompts",
            p(&no_person),
            "--persons",
            "woman",
            "--pipeline",
            p(&pipeline),
            "--out",
            p(&gen_out),
        ],
    );
    assert!(stderr.contains("--persons filters on a `person` column, which it does not have"), "{stderr}");
    let stderr = fails(
        &cache,
        &["prompts", "export", "sos", "--out", p(&one), "--mirror", p(&mirror), "--templates", "z"],
    );
    assert!(stderr.contains("no prompt left after --templates z"), "{stderr}");
    assert!(!gen_out.exists());
}
