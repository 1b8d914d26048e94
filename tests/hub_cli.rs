//! `embed --model ORG/NAME` downloads through hf-hub from a loopback server that answers like the
//! Hugging Face hub (`/{repo}/resolve/{revision}/{file}`, `ETag`, `X-Repo-Commit`, byte ranges),
//! fills the hub cache under `$HF_HOME`, embeds exactly as `--weights` does, and runs again from
//! the cache with the server gone.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/culturelens-models-io/tests/fixtures/encoders")
}

/// Serves the files of `dir` as repository `repo` at commit `commit`; records each request path.
fn serve(dir: PathBuf, repo: &'static str, commit: &'static str) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let log = Arc::new(Mutex::new(Vec::new()));
    let seen = log.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            // `Range: bytes=S-E` (hf-hub's metadata probe asks for 0-0) or `bytes=S-` (download).
            let mut range: Option<(usize, Option<usize>)> = None;
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                    break;
                }
                if let Some(spec) = header.to_ascii_lowercase().trim().strip_prefix("range: bytes=") {
                    let (a, b) = spec.split_once('-').unwrap_or((spec, ""));
                    range = a.parse().ok().map(|a| (a, b.parse().ok()));
                }
            }
            seen.lock().unwrap().push(path.clone());
            let prefix = format!("/{repo}/resolve/main/");
            let file = path.strip_prefix(&prefix).map(|f| dir.join(f)).filter(|f| f.is_file());
            let response = match file {
                None => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
                Some(file) => {
                    let body = std::fs::read(&file).unwrap();
                    let size = body.len();
                    let (start, end) = match range {
                        Some((a, Some(b))) => (a.min(size), (b + 1).min(size)),
                        Some((a, None)) => (a.min(size), size),
                        None => (0, size),
                    };
                    let part = &body[start..end];
                    let etag = format!("{:x}-{size}", body.iter().map(|&b| u64::from(b)).sum::<u64>());
                    let mut head = format!(
                        "HTTP/1.1 206 Partial Content\r\nETag: \"{etag}\"\r\nX-Repo-Commit: {commit}\r\n\
                         Content-Range: bytes {start}-{}/{size}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        end.saturating_sub(1),
                        part.len()
                    )
                    .into_bytes();
                    head.extend_from_slice(part);
                    head
                }
            };
            let _ = stream.write_all(&response);
        }
    });
    (endpoint, log)
}

/// `culturelens embed <source> --images DIR --out OUT` with `HF_ENDPOINT` (and `HF_HOME`) set.
fn embed(source: [&str; 2], images: &Path, out: &Path, hf_home: Option<&Path>, endpoint: &str) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_culturelens"));
    cmd.arg("embed").args(source).arg("--images").arg(images).arg("--out").arg(out);
    cmd.env("HF_ENDPOINT", endpoint).env_remove("HF_TOKEN");
    if let Some(home) = hf_home {
        cmd.env("HF_HOME", home);
    }
    cmd.output().unwrap()
}

#[test]
fn model_downloads_into_the_hub_cache_and_matches_weights() {
    let tmp = tempfile::tempdir().unwrap();
    let hf_home = tmp.path().join("hf");
    let images = fixtures().join("images");
    let (endpoint, log) =
        serve(fixtures().join("clip"), "test-org/tiny-clip", "0123456789abcdef0123456789abcdef01234567");

    let via_hub = tmp.path().join("hub.npy");
    let o = embed(["--model", "test-org/tiny-clip"], &images, &via_hub, Some(&hf_home), &endpoint);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let requested = log.lock().unwrap().clone();
    assert!(requested.iter().any(|p| p.ends_with("/model.safetensors")), "{requested:?}");
    assert!(!requested.iter().any(|p| p.ends_with(".bin")), "never asks for pickles: {requested:?}");
    let snapshot =
        hf_home.join("hub/models--test-org--tiny-clip/snapshots/0123456789abcdef0123456789abcdef01234567");
    assert!(snapshot.join("config.json").is_file() && snapshot.join("model.safetensors").is_file());

    let via_dir = tmp.path().join("dir.npy");
    let clip = fixtures().join("clip");
    let o = embed(["--weights", clip.to_str().unwrap()], &images, &via_dir, None, &endpoint);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&via_hub).unwrap(), std::fs::read(&via_dir).unwrap());

    // The cache alone is enough: the endpoint now refuses connections.
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let again = tmp.path().join("again.npy");
    let o = embed(["--model", "test-org/tiny-clip"], &images, &again, Some(&hf_home), &dead);
    assert!(o.status.success(), "offline rerun: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&via_dir).unwrap());
}

#[test]
fn a_repository_without_safetensors_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    std::fs::copy(fixtures().join("clip/config.json"), repo.join("config.json")).unwrap();
    std::fs::write(repo.join("pytorch_model.bin"), b"pickle").unwrap();
    let (endpoint, log) = serve(repo, "test-org/pickled", "fedcba9876543210fedcba9876543210fedcba98");
    let (images, out, hf_home) = (fixtures().join("images"), tmp.path().join("x.npy"), tmp.path().join("hf"));
    let o = embed(["--model", "test-org/pickled"], &images, &out, Some(&hf_home), &endpoint);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("test-org/pickled") && err.contains("only safetensors"), "{err}");
    assert!(!log.lock().unwrap().iter().any(|p| p.ends_with(".bin")));
    assert!(!out.exists());
}
