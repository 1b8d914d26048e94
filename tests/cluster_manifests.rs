//! The Kubernetes manifests of `scripts/cluster/` (no cluster needed): they parse as Jobs with
//! the fields docs/cluster.md relies on, and their commands, run as a pod would run them (with
//! `JOB_COMPLETION_INDEX` set, `/data` a scratch folder), embed every shard once and merge into
//! the table of one unsharded run, byte for byte.

use std::path::PathBuf;
use std::process::Command;

use culturelens_testkit::fixture;
use serde_yaml::Value;

use crate::common::Cli;

fn manifest(name: &str) -> Value {
    let path = culturelens_testkit::root().join("scripts/cluster").join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter().fold(v, |v, k| &v[*k]).as_str().unwrap_or_else(|| panic!("{path:?} is a string"))
}

/// The one container of a Job, after checking the pod spec around it.
fn container(job: &Value) -> &Value {
    assert_eq!(str_at(job, &["apiVersion"]), "batch/v1");
    assert_eq!(str_at(job, &["kind"]), "Job");
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"].as_str(), Some("Never"));
    let containers = pod["containers"].as_sequence().unwrap();
    assert_eq!(containers.len(), 1);
    // Every mounted volume is declared, and the data volume is the shared claim.
    let volumes = pod["volumes"].as_sequence().unwrap();
    for mount in containers[0]["volumeMounts"].as_sequence().unwrap() {
        let name = mount["name"].as_str().unwrap();
        let volume = volumes.iter().find(|v| v["name"].as_str() == Some(name)).expect("declared volume");
        assert_eq!(volume["persistentVolumeClaim"]["claimName"].as_str(), Some("culturelens-data"));
        assert_eq!(mount["mountPath"].as_str(), Some("/data"));
    }
    &containers[0]
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

/// A scratch `/data`: the binary, the fixture images with their manifest and the CLIP fixture.
fn data_dir() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    for dir in ["bin", "images", "weights", "parts"] {
        std::fs::create_dir(data.join(dir)).unwrap();
    }
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_culturelens"), data.join("bin/culturelens")).unwrap();
    std::os::unix::fs::symlink(fixture("encoders/clip"), data.join("weights/clip-vit-base-patch32")).unwrap();
    let mut manifest = String::from("image\n");
    for entry in std::fs::read_dir(fixture("encoders/images")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        std::fs::copy(&path, data.join("images").join(&name)).unwrap();
        manifest += &format!("{name}\n");
    }
    std::fs::write(data.join("images/manifest.csv"), manifest).unwrap();
    tmp
}

#[test]
fn the_indexed_job_embeds_every_shard_once_and_merge_job_joins_them() {
    let embed = manifest("embed-indexed-job.yaml");
    let merge = manifest("merge-job.yaml");
    let spec = &embed["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    let n = spec["completions"].as_u64().unwrap();
    assert!(spec["parallelism"].as_u64().unwrap() <= n);
    assert!(spec["backoffLimitPerIndex"].as_u64().unwrap() >= 1, "a failed index is retried (and resumes)");
    let embed_container = container(&embed);
    assert_eq!(strings(&embed_container["command"]), ["/bin/sh", "-c"]);
    let script = &strings(&embed_container["args"])[0];
    assert!(script.contains("JOB_COMPLETION_INDEX"), "{script}");
    assert!(script.contains(&format!("--shard \"$K/{n}\"")), "N of --shard is spec.completions: {script}");

    // Run every index as its pod would, then the merge Job's command, on a scratch /data.
    let tmp = data_dir();
    let data = tmp.path().to_str().unwrap();
    let script = script.replace("/data", data);
    for index in 0..n {
        let out = Command::new("/bin/sh")
            .arg("-c")
            .arg(&script)
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .output()
            .unwrap();
        assert!(out.status.success(), "index {index}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let parts: Vec<PathBuf> = (1..=n).map(|k| tmp.path().join(format!("parts/embed-{k}.npy"))).collect();
    assert!(parts.iter().all(|p| p.is_file()), "one part per index");

    let merge_command: Vec<String> =
        strings(&container(&merge)["command"]).iter().map(|a| a.replace("/data", data)).collect();
    assert_eq!(merge_command.len() as u64, 4 + n, "the merge Job lists every part: {merge_command:?}");
    let out = Command::new(&merge_command[0]).args(&merge_command[1..]).output().unwrap();
    assert!(out.status.success(), "merge: {}", String::from_utf8_lossy(&out.stderr));

    let single = tmp.path().join("single.npy");
    Cli::new("embed")
        .opt("--images", tmp.path().join("images/manifest.csv"))
        .opt("--weights", fixture("encoders/clip"))
        .opt("--batch", "16")
        .opt("--out", &single)
        .run_ok();
    let bytes = |p: PathBuf| std::fs::read(p).unwrap();
    assert_eq!(bytes(tmp.path().join("embeddings.npy")), bytes(single.clone()));
    assert_eq!(bytes(tmp.path().join("embeddings.csv")), bytes(single.with_extension("csv")));
}
