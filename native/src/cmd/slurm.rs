//! `culturelens slurm`: writes the Slurm batch scripts of a sharded pipeline, one stage per
//! script, chained by `submit.sh` with `--dependency=afterok`:
//!
//! ```text
//! [generate (array) → merge images →] embed (array, N tasks) → merge → sos
//! ```
//!
//! Every array task runs its shard, `--shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT`
//! (`--array=1-N`, so task K is shard K/N), into `parts/`; the merge step joins the parts with
//! `culturelens merge` (which refuses an incomplete or mixed set). Tasks are `--requeue`able and
//! log to `logs/STAGE-JOB_TASK.out` in append mode: a requeued task (node failure, preemption,
//! `scontrol requeue`) resumes from its resume log, and its log keeps both attempts. GPUs are
//! requested with `--gres` on the stages that run a model (`generate`, `embed`, `sos`) when
//! asked. The generate stage is written only with `--generate-args`; it runs `culturelens
//! generate … --shard K/N --out parts/images-K`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::encode::ModelArgs;
use crate::provenance::value_name;

/// Arguments of `culturelens slurm`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Write Slurm array-job scripts for a sharded [generate →] embed → merge → sos pipeline",
    long_about = "Writes into --dir the batch scripts of a sharded pipeline and submit.sh, which \
submits them chained with --dependency=afterok: [generate.sbatch (array) → merge-images.sbatch →] \
embed.sbatch (array of --tasks tasks; task K runs --shard K/N from $SLURM_ARRAY_TASK_ID/\
$SLURM_ARRAY_TASK_COUNT) → merge.sbatch (culturelens merge into embeddings.npy + embeddings.csv) → \
sos.sbatch (sos.csv and sos_per_image.csv). Tasks are requeueable and resume where they stopped; \
logs go to DIR/logs/STAGE-JOB_TASK.out. Paths are made absolute, so the scripts can be submitted \
from anywhere: run DIR/submit.sh."
)]
pub struct SlurmArgs {
    /// Folder to write the scripts into; the jobs also write their parts, logs and results here.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Array tasks (shards) per array stage.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub tasks: u32,
    /// Images to embed: a folder or a manifest CSV (as `embed --images`); SoS needs the
    /// metadata columns model, language and culture. Not used with --generate-args, where the
    /// generated images' manifest is embedded.
    #[arg(long, value_name = "DIR|CSV", required_unless_present = "generate_args")]
    pub images: Option<PathBuf>,
    /// The encoder of the embed stage and the backend of the embed and sos stages (as `embed`).
    #[command(flatten)]
    pub model: ModelArgs,
    /// Images per forward pass of the encoder.
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    /// Generic resources per task of the model stages, e.g. `gpu:1` (sbatch --gres).
    #[arg(long, value_name = "GRES")]
    pub gres: Option<String>,
    /// Partition (sbatch --partition).
    #[arg(long)]
    pub partition: Option<String>,
    /// Account (sbatch --account).
    #[arg(long)]
    pub account: Option<String>,
    /// Time limit per task (sbatch --time), e.g. 04:00:00.
    #[arg(long)]
    pub time: Option<String>,
    /// CPUs per task (sbatch --cpus-per-task).
    #[arg(long, value_name = "N")]
    pub cpus_per_task: Option<u32>,
    /// Memory per node (sbatch --mem), e.g. 16G.
    #[arg(long)]
    pub mem: Option<String>,
    /// The culturelens binary the jobs run [default: this one].
    #[arg(long, value_name = "FILE")]
    pub binary: Option<PathBuf>,
    /// Add the generate stage: `culturelens generate ARGS --shard K/N --out parts/images-K`
    /// per array task (ARGS are shell words, written as given), its image folders merged into
    /// DIR/images, whose manifest.csv is then embedded.
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    pub generate_args: Option<String>,
}

/// A word for a POSIX shell: as it is when it has no special characters, else single-quoted.
fn sh(word: &str) -> String {
    let plain =
        !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"%+,-./:=@_".contains(&b));
    if plain { word.to_string() } else { format!("'{}'", word.replace('\'', r"'\''")) }
}

fn absolute(path: &Path) -> Result<PathBuf> {
    path.canonicalize().with_context(|| format!("cannot find {}", path.display()))
}

/// One stage's script.
struct Stage {
    name: &'static str,
    /// An array stage runs `tasks` tasks.
    array: bool,
    /// A model stage gets `--gres`.
    model: bool,
    /// The command, in shell words (already quoted).
    command: String,
}

pub fn run(args: &SlurmArgs) -> Result<()> {
    if args.batch == 0 {
        bail!("--batch must be at least 1");
    }
    let binary = match &args.binary {
        Some(b) => absolute(b)?,
        None => std::env::current_exe().context("cannot locate the culturelens binary")?,
    };
    let exe = sh(&binary.to_string_lossy());
    let n = args.tasks;
    let device = value_name(&args.model.device);
    let shard = r#""${SLURM_ARRAY_TASK_ID}/${SLURM_ARRAY_TASK_COUNT}""#;
    let parts = |prefix: &str, ext: &str| -> String {
        (1..=n).map(|k| format!("parts/{prefix}-{k}{ext}")).collect::<Vec<_>>().join(" ")
    };

    let encoder = match (&args.model.weights, &args.model.model) {
        (Some(w), _) => format!("--weights {}", sh(&absolute(w)?.to_string_lossy())),
        (None, Some(m)) => format!("--model {}", sh(m)),
        (None, None) => bail!("give --weights DIR or --model HF_ID"),
    };
    let given_images = match (&args.generate_args, &args.images) {
        (None, Some(images)) => Some(sh(&absolute(images)?.to_string_lossy())),
        _ => None,
    };
    for sub in ["logs", "parts"] {
        culturelens_files::create_dir_all(&args.dir.join(sub))?;
    }
    let dir = absolute(&args.dir)?;

    let mut stages = Vec::new();
    let images = match &args.generate_args {
        Some(generate) => {
            stages.push(Stage {
                name: "generate",
                array: true,
                model: true,
                command: format!(
                    "{exe} generate {generate} --shard {shard} --out \"parts/images-${{SLURM_ARRAY_TASK_ID}}\""
                ),
            });
            stages.push(Stage {
                name: "merge-images",
                array: false,
                model: false,
                command: format!("{exe} merge --out images {}", parts("images", "")),
            });
            "images/manifest.csv".to_string()
        }
        None => given_images.expect("clap requires --images without --generate-args"),
    };
    stages.push(Stage {
        name: "embed",
        array: true,
        model: true,
        command: format!(
            "{exe} embed --images {images} {encoder} --device {device} --precision {} --batch {} \
             --shard {shard} --out \"parts/embed-${{SLURM_ARRAY_TASK_ID}}.npy\"",
            value_name(&args.model.precision),
            args.batch
        ),
    });
    stages.push(Stage {
        name: "merge",
        array: false,
        model: false,
        command: format!("{exe} merge --out embeddings.npy {}", parts("embed", ".npy")),
    });
    stages.push(Stage {
        name: "sos",
        array: false,
        model: true,
        command: format!(
            "{exe} sos --embeddings embeddings.npy --meta embeddings.csv --device {device} --out sos.csv \
             --per-image sos_per_image.csv"
        ),
    });

    for stage in &stages {
        let script = sbatch_script(args, &dir, stage);
        let path = dir.join(format!("{}.sbatch", stage.name));
        culturelens_table::write_atomic(&path, |w| w.write_all(script.as_bytes()))?;
    }
    let submit = submit_script(&stages);
    let path = dir.join("submit.sh");
    culturelens_table::write_atomic(&path, |w| w.write_all(submit.as_bytes()))?;
    make_executable(&path)?;
    let names: Vec<&str> = stages.iter().map(|s| s.name).collect();
    eprintln!("wrote {} ({}) and submit.sh into {}", names.len(), names.join(" → "), dir.display());
    Ok(())
}

fn sbatch_script(args: &SlurmArgs, dir: &Path, stage: &Stage) -> String {
    let mut s = String::from("#!/bin/bash\n");
    let _ =
        writeln!(s, "# Stage `{}` of a culturelens pipeline, written by `culturelens slurm`.", stage.name);
    let mut opt = |line: String| {
        let _ = writeln!(s, "#SBATCH {line}");
    };
    opt(format!("--job-name=culturelens-{}", stage.name));
    opt(format!("--chdir={}", dir.display()));
    if stage.array {
        opt(format!("--array=1-{}", args.tasks));
        opt(format!("--output={}/logs/{}-%A_%a.out", dir.display(), stage.name));
    } else {
        opt(format!("--output={}/logs/{}-%j.out", dir.display(), stage.name));
    }
    opt("--open-mode=append".into());
    opt("--requeue".into());
    opt("--ntasks=1".into());
    if let (true, Some(gres)) = (stage.model, &args.gres) {
        opt(format!("--gres={gres}"));
    }
    for (name, value) in [
        ("partition", args.partition.clone()),
        ("account", args.account.clone()),
        ("time", args.time.clone()),
        ("cpus-per-task", args.cpus_per_task.map(|c| c.to_string())),
        ("mem", args.mem.clone()),
    ] {
        if let Some(value) = value {
            opt(format!("--{name}={value}"));
        }
    }
    s.push_str("set -euo pipefail\n");
    if stage.array {
        s.push_str(
            "echo \"culturelens: task ${SLURM_ARRAY_TASK_ID}/${SLURM_ARRAY_TASK_COUNT} of job \
             ${SLURM_ARRAY_JOB_ID} on $(hostname), start $(( ${SLURM_RESTART_COUNT:-0} + 1 )), \
             $(date -u +%FT%TZ)\"\n",
        );
    } else {
        s.push_str(
            "echo \"culturelens: job ${SLURM_JOB_ID} on $(hostname), start \
             $(( ${SLURM_RESTART_COUNT:-0} + 1 )), $(date -u +%FT%TZ)\"\n",
        );
    }
    let _ = writeln!(s, "exec {}", stage.command);
    s
}

fn submit_script(stages: &[Stage]) -> String {
    let mut s = String::from(
        "#!/bin/bash\n# Submits the pipeline's stages, each after the previous one succeeded \
         (written by `culturelens slurm`).\nset -euo pipefail\ncd \"$(dirname \"$0\")\"\n",
    );
    let mut previous: Option<String> = None;
    for stage in stages {
        let var = stage.name.replace('-', "_");
        let dependency = previous.as_ref().map_or(String::new(), |p| format!(" --dependency=afterok:${p}"));
        let _ = writeln!(s, "{var}=$(sbatch --parsable{dependency} {}.sbatch)", stage.name);
        let _ = writeln!(s, "{var}=${{{var}%%;*}}");
        let _ = writeln!(s, "echo \"{}=${var}\"", stage.name);
        previous = Some(var);
    }
    s
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make {} executable", path.display()))
}

#[cfg(not(unix))]
fn make_executable(_: &Path) -> Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(sh("/data/run-1/e.npy"), "/data/run-1/e.npy");
        assert_eq!(sh("my images"), "'my images'");
        assert_eq!(sh("it's"), r"'it'\''s'");
        assert_eq!(sh("$HOME"), "'$HOME'");
        assert_eq!(sh(""), "''");
    }
}
