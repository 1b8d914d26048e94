//! One meaning per flag name (issue 33, point 8): a renamed flag works under its new name, and its
//! old spelling still works, with a one-line deprecation note on stderr. (That every flag name
//! takes one kind of value across the commands, and every rename's alias, is tested on the clap
//! tree in `native/src/flags.rs`.)

use crate::common::{Cli, read_csv};

#[test]
fn renamed_flags_work_and_old_spellings_warn() {
    let tmp = tempfile::tempdir().unwrap();
    let meta = tmp.path().join("m.csv");
    std::fs::write(&meta, "a,b\nx,p\nx,q\ny,q\n").unwrap();
    let vendi = |flag: &str, out: &str| {
        Cli::new("vendi")
            .opt("--meta", &meta)
            .opt("--kernel", "categorical")
            .opt("--columns", "a,b")
            .opt(flag, "0.5,0.5")
            .opt("--out", tmp.path().join(out))
            .run_ok()
            .stderr
    };
    let new = vendi("--kernel-weights", "new.json");
    assert!(!new.contains("deprecated"), "{new}");
    let old = vendi("--weights", "old.json");
    let notes: Vec<&str> = old.lines().filter(|l| l.contains("deprecated")).collect();
    assert_eq!(notes.len(), 1, "{old}");
    assert!(notes[0].contains("--weights") && notes[0].contains("--kernel-weights"), "{old}");
    let read = |name: &str| std::fs::read_to_string(tmp.path().join(name)).unwrap();
    assert_eq!(read("old.json"), read("new.json"));

    // validate's predictor columns: `--sos-col` (`--sos` is a result file in figures).
    let labels = tmp.path().join("l.csv");
    std::fs::write(&labels, "language,r1,r2,s\nde,surface,surface,-0.1\nen,semantic,semantic,0.2\n").unwrap();
    let validate = |flag: &str, out: &str| {
        Cli::new("validate")
            .opt("--labels", &labels)
            .opt("--raters", "r1,r2")
            .opt(flag, "s")
            .opt("--out", tmp.path().join(out))
            .run_ok()
            .stderr
    };
    assert!(!validate("--sos-col", "v_new.csv").contains("deprecated"));
    assert!(validate("--sos", "v_old.csv").contains("`culturelens validate --sos` is deprecated"));
    assert_eq!(read_csv(&tmp.path().join("v_old.csv")), read_csv(&tmp.path().join("v_new.csv")));

    // The old spelling is hidden from --help; the new one is shown.
    let help = Cli::new("vendi").flag("--help").run_ok().stdout;
    assert!(help.contains("--kernel-weights") && !help.contains("--weights"), "{help}");
}
