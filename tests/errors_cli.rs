//! Error messages and output folders, the same for every command (issue 33, point 9): a cause is
//! printed once, an error names the path the user gave (never a temporary file beside it), a size
//! a pipeline cannot take is refused before its weights load, and every command creates the
//! missing folders of its outputs.

use culturelens_testkit::fixture;

use crate::common::{Cli, p};

/// `demo --write DIR`: the demo table (`embeddings.npy`, `meta.csv`) in `DIR`.
fn demo_table(dir: &std::path::Path) {
    Cli::new("demo").opt("--write", dir).run_ok();
}

#[test]
fn a_cause_is_printed_once() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope.npy");
    let stderr = Cli::new("sos")
        .opt("--embeddings", &missing)
        .opt("--meta", tmp.path().join("nope.csv"))
        .opt("--out", tmp.path().join("sos.csv"))
        .run_fails()
        .stderr;
    assert!(stderr.contains(p(&missing)), "{stderr}");
    assert_eq!(stderr.matches("No such file or directory").count(), 1, "{stderr}");
}

/// The one output-folder rule: the folders above an output file or folder are created.
#[test]
fn every_command_creates_the_folders_of_its_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = tmp.path().join("new/demo");
    demo_table(&demo);
    let (embeddings, meta) = (demo.join("embeddings.npy"), demo.join("meta.csv"));
    let sos = tmp.path().join("a/b/sos.csv");
    Cli::new("sos").opt("--embeddings", &embeddings).opt("--meta", &meta).opt("--out", &sos).run_ok();
    assert!(sos.is_file());
    let vendi = tmp.path().join("c/d/vendi.json");
    Cli::new("vendi").opt("--embeddings", &embeddings).opt("--meta", &meta).opt("--out", &vendi).run_ok();
    assert!(vendi.is_file());
    let embedded = tmp.path().join("e/f/emb.npy");
    Cli::new("embed")
        .opt("--images", fixture("encoders/images"))
        .opt("--weights", fixture("encoders/clip"))
        .opt("--out", &embedded)
        .run_ok();
    assert!(embedded.is_file() && embedded.with_extension("csv").is_file());
    let figures = tmp.path().join("g/h/figures");
    Cli::new("figures").opt("--sos", &sos).opt("--out", &figures).run_ok();
    assert!(figures.is_dir());
}

/// A file where an output's folder should be: the error names that folder and the output, never
/// the temporary file the output is built in.
#[test]
fn a_blocked_output_names_the_users_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = tmp.path().join("demo");
    demo_table(&demo);
    let blocked = tmp.path().join("file");
    std::fs::write(&blocked, "f").unwrap();
    // `sos --out OUT` on the demo table: what it prints on stderr as it fails.
    let sos_fails = |out: &std::path::Path| {
        Cli::new("sos")
            .opt("--embeddings", demo.join("embeddings.npy"))
            .opt("--meta", demo.join("meta.csv"))
            .opt("--out", out)
            .run_fails()
            .stderr
    };
    let stderr = sos_fails(&blocked.join("sos.csv"));
    assert!(stderr.contains(&format!("cannot create the folder {}", p(&blocked))), "{stderr}");
    assert!(!stderr.contains(".culturelens-") && !stderr.contains("at path"), "{stderr}");
    let stderr = Cli::new("demo").opt("--write", blocked.join("sub")).run_fails().stderr;
    assert!(stderr.contains(&format!("cannot create the folder {}", p(&blocked.join("sub")))), "{stderr}");
    // An existing folder where the output file should be.
    let taken = tmp.path().join("taken.csv");
    std::fs::create_dir(&taken).unwrap();
    std::fs::write(taken.join("inside"), "i").unwrap();
    let stderr = sos_fails(&taken);
    assert!(stderr.contains(p(&taken)), "{stderr}");
    assert!(!stderr.contains(".culturelens-") && !stderr.contains("at path"), "{stderr}");
}
