//! `culturelens slurm`: the scripts it writes (their Slurm options, shard expressions and the
//! dependency chain), and that they are valid bash. The pipeline itself runs on a real Slurm
//! in `tests/slurm/run.sh` (scripts/test.sh).

use std::path::Path;
use std::process::Command;

use culturelens_testkit::fixture;

use crate::common::Cli;

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn bash_syntax_ok(path: &Path) {
    let out = Command::new("bash").arg("-n").arg(path).output().unwrap();
    assert!(out.status.success(), "{}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
}

#[test]
fn embed_merge_sos_scripts_shard_by_array_task_and_chain_afterok() {
    let tmp = tempfile::tempdir().unwrap();
    let jobs = tmp.path().join("my jobs");
    Cli::new("slurm")
        .opt("--dir", &jobs)
        .opt("--tasks", "8")
        .opt("--images", fixture("encoders/images"))
        .opt("--weights", fixture("encoders/clip"))
        .opt("--device", "wgpu")
        .opt("--gres", "gpu:1")
        .opt("--partition", "gpu")
        .opt("--time", "02:00:00")
        .run_ok();
    let dir = jobs.canonicalize().unwrap();
    let shown = dir.display().to_string();

    let embed = read(&dir, "embed.sbatch");
    for line in [
        "#SBATCH --job-name=culturelens-embed",
        "#SBATCH --array=1-8",
        "#SBATCH --requeue",
        "#SBATCH --open-mode=append",
        "#SBATCH --gres=gpu:1",
        "#SBATCH --partition=gpu",
        "#SBATCH --time=02:00:00",
    ] {
        assert!(embed.lines().any(|l| l == line), "embed.sbatch lacks `{line}`:\n{embed}");
    }
    assert!(embed.contains(&format!("#SBATCH --chdir={shown}\n")), "{embed}");
    assert!(
        embed.contains(&format!("#SBATCH --output={shown}/logs/embed-%A_%a.out\n")),
        "per-task logs:\n{embed}"
    );
    assert!(embed.contains(r#"--shard "${SLURM_ARRAY_TASK_ID}/${SLURM_ARRAY_TASK_COUNT}""#), "{embed}");
    assert!(embed.contains(r#"--out "parts/embed-${SLURM_ARRAY_TASK_ID}.npy""#), "{embed}");
    assert!(embed.contains(" --device wgpu "), "{embed}");
    let weights = fixture("encoders/clip").canonicalize().unwrap();
    assert!(embed.contains(&format!("--weights {}", weights.display())), "absolute paths:\n{embed}");

    let merge = read(&dir, "merge.sbatch");
    let parts: Vec<String> = (1..=8).map(|k| format!("parts/embed-{k}.npy")).collect();
    assert!(merge.contains(&format!(" merge --out embeddings.npy {}\n", parts.join(" "))), "{merge}");
    assert!(!merge.contains("--array") && !merge.contains("--gres"), "merge is one CPU task:\n{merge}");
    let sos = read(&dir, "sos.sbatch");
    assert!(
        sos.contains(" sos --embeddings embeddings.npy --meta embeddings.csv --device wgpu --out sos.csv"),
        "{sos}"
    );
    assert!(sos.contains("#SBATCH --gres=gpu:1\n"), "{sos}");

    // submit.sh chains the stages with afterok, in order.
    let submit = read(&dir, "submit.sh");
    let expected = [
        "embed=$(sbatch --parsable embed.sbatch)",
        "merge=$(sbatch --parsable --dependency=afterok:$embed merge.sbatch)",
        "sos=$(sbatch --parsable --dependency=afterok:$merge sos.sbatch)",
    ];
    let positions: Vec<usize> =
        expected.iter().map(|l| submit.find(l).unwrap_or_else(|| panic!("`{l}`:\n{submit}"))).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{submit}");
    assert!(!dir.join("generate.sbatch").exists());
    for name in ["embed.sbatch", "merge.sbatch", "sos.sbatch", "submit.sh"] {
        bash_syntax_ok(&dir.join(name));
    }
}

#[test]
fn the_generate_stage_comes_first_with_generate_args() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("jobs");
    Cli::new("slurm")
        .opt("--dir", &dir)
        .opt("--tasks", "4")
        .opt("--model", "openai/clip-vit-base-patch32")
        .opt("--generate-args", "--prompts prompts.csv --model-dir /models/sd15")
        .run_ok();
    let generate = read(&dir, "generate.sbatch");
    assert!(generate.contains("#SBATCH --array=1-4\n"), "{generate}");
    assert!(
        generate.contains(r#" generate --prompts prompts.csv --model-dir /models/sd15 --shard "${SLURM_ARRAY_TASK_ID}/${SLURM_ARRAY_TASK_COUNT}" --out "parts/images-${SLURM_ARRAY_TASK_ID}""#),
        "{generate}"
    );
    assert!(!generate.contains("--gres"), "no --gres unless asked:\n{generate}");
    let merge_images = read(&dir, "merge-images.sbatch");
    assert!(
        merge_images
            .contains(" merge --out images parts/images-1 parts/images-2 parts/images-3 parts/images-4\n")
    );
    let embed = read(&dir, "embed.sbatch");
    assert!(
        embed.contains(" embed --images images/manifest.csv --model openai/clip-vit-base-patch32 "),
        "{embed}"
    );
    let submit = read(&dir, "submit.sh");
    assert!(submit.contains("generate=$(sbatch --parsable generate.sbatch)"), "{submit}");
    assert!(
        submit
            .contains("merge_images=$(sbatch --parsable --dependency=afterok:$generate merge-images.sbatch)")
    );
    assert!(submit.contains("embed=$(sbatch --parsable --dependency=afterok:$merge_images embed.sbatch)"));
}

#[test]
fn missing_inputs_are_refused_before_writing() {
    let tmp = tempfile::tempdir().unwrap();
    let run = Cli::new("slurm")
        .opt("--dir", tmp.path().join("jobs"))
        .opt("--tasks", "2")
        .opt("--images", tmp.path().join("nope"))
        .opt("--weights", fixture("encoders/clip"))
        .run_fails();
    assert!(run.stderr.contains("cannot find") && run.stderr.contains("nope"), "{}", run.stderr);
    assert!(!tmp.path().join("jobs/submit.sh").exists());
    let run = Cli::new("slurm")
        .opt("--dir", tmp.path().join("j"))
        .opt("--tasks", "0")
        .opt("--images", ".")
        .opt("--weights", ".")
        .run_fails();
    assert!(run.stderr.contains("--tasks"), "{}", run.stderr);
}
