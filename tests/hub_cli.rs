//! `embed --model ORG/NAME[@REVISION]` downloads through hf-hub from a loopback server that
//! answers like the Hugging Face hub (`/{repo}/resolve/{revision}/{file}` for a branch name or a
//! commit sha, `ETag`, `X-Repo-Commit`, byte ranges), fills the hub cache under `$HF_HOME`,
//! embeds exactly as `--weights` does, keeps every commit's files in its own snapshot, and runs
//! again from the cache with the server gone.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use culturelens_testkit::fixture;

use crate::common::{Cli, Run};

const REPO: &str = "test-org/tiny";
const COMMIT_A: &str = "0123456789abcdef0123456789abcdef01234567";
const COMMIT_B: &str = "fedcba9876543210fedcba9876543210fedcba98";
const COMMIT_C: &str = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00";

/// A loopback hub serving one repository: each revision (branch name or commit sha) names a
/// commit, each commit a folder of files. Every request path is recorded.
#[derive(Clone)]
struct Hub {
    endpoint: String,
    revisions: Arc<Mutex<BTreeMap<String, String>>>,
    commits: Arc<Mutex<BTreeMap<String, PathBuf>>>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Hub {
    fn start(repo: &'static str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let hub = Hub {
            endpoint: format!("http://{}", listener.local_addr().unwrap()),
            revisions: Arc::default(),
            commits: Arc::default(),
            requests: Arc::default(),
        };
        let server = hub.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                if let Some(response) = server.answer(&mut BufReader::new(stream.try_clone().unwrap()), repo)
                {
                    let _ = stream.write_all(&response);
                }
            }
        });
        hub
    }

    /// Adds commit `commit` holding the files of `dir`; it is reachable by its sha.
    fn commit(&self, commit: &str, dir: PathBuf) -> &Self {
        self.commits.lock().unwrap().insert(commit.to_string(), dir);
        self.revisions.lock().unwrap().insert(commit.to_string(), commit.to_string());
        self
    }

    /// Points branch `branch` at `commit`.
    fn branch(&self, branch: &str, commit: &str) -> &Self {
        self.revisions.lock().unwrap().insert(branch.to_string(), commit.to_string());
        self
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    /// The response to one request, or `None` when the request cannot be read.
    fn answer(&self, reader: &mut impl BufRead, repo: &str) -> Option<Vec<u8>> {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
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
        self.requests.lock().unwrap().push(path.clone());
        let (revision, file) = path.strip_prefix(&format!("/{repo}/resolve/"))?.split_once('/')?;
        let commit = self.revisions.lock().unwrap().get(revision).cloned();
        let found = commit.and_then(|c| {
            let file = self.commits.lock().unwrap()[&c].join(file);
            file.is_file().then_some((c, file))
        });
        let Some((commit, file)) = found else {
            return Some(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
            );
        };
        let body = std::fs::read(&file).unwrap();
        let size = body.len();
        let (start, end) = match range {
            Some((a, Some(b))) => (a.min(size), (b + 1).min(size)),
            Some((a, None)) => (a.min(size), size),
            None => (0, size),
        };
        let part = &body[start..end];
        let etag = format!("{:x}-{size}", body.iter().map(|&b| u64::from(b)).sum::<u64>());
        let mut response = format!(
            "HTTP/1.1 206 Partial Content\r\nETag: \"{etag}\"\r\nX-Repo-Commit: {commit}\r\n\
             Content-Range: bytes {start}-{}/{size}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            end.saturating_sub(1),
            part.len()
        )
        .into_bytes();
        response.extend_from_slice(part);
        Some(response)
    }
}

/// `culturelens embed --model MODEL --images <fixture images> --out OUT` against `endpoint`
/// with the hub cache in `hf_home`.
fn embed_model(model: &str, out: &Path, hf_home: &Path, endpoint: &str) -> Run {
    Cli::new("embed")
        .opt("--model", model)
        .opt("--images", fixture("encoders/images"))
        .opt("--out", out)
        .env("HF_ENDPOINT", endpoint)
        .env("HF_HOME", hf_home)
        .env_remove("HF_TOKEN")
        .run()
}

/// The table `--weights <fixture model>` writes (the reference for a `--model` run).
fn embed_weights(model: &str, out: &Path) -> Vec<u8> {
    Cli::new("embed")
        .opt("--weights", fixture("encoders").join(model))
        .opt("--images", fixture("encoders/images"))
        .opt("--out", out)
        .run_ok();
    std::fs::read(out).unwrap()
}

fn assert_ok(run: &Run, what: &str) {
    assert!(run.status.success(), "{what}: {}", run.stderr);
}

/// A loopback address nothing listens on.
fn dead_endpoint() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", l.local_addr().unwrap())
}

#[test]
fn model_downloads_into_the_hub_cache_and_matches_weights() {
    let tmp = tempfile::tempdir().unwrap();
    let hf_home = tmp.path().join("hf");
    let hub = Hub::start("test-org/tiny-clip");
    hub.commit(COMMIT_A, fixture("encoders/clip")).branch("main", COMMIT_A);

    let via_hub = tmp.path().join("hub.npy");
    assert_ok(&embed_model("test-org/tiny-clip", &via_hub, &hf_home, &hub.endpoint), "download");
    let requested = hub.requests();
    assert!(requested.iter().any(|p| p.ends_with("/model.safetensors")), "{requested:?}");
    assert!(!requested.iter().any(|p| p.ends_with(".bin")), "never asks for pickles: {requested:?}");
    let snapshot = hf_home.join(format!("hub/models--test-org--tiny-clip/snapshots/{COMMIT_A}"));
    assert!(snapshot.join("config.json").is_file() && snapshot.join("model.safetensors").is_file());
    let want = embed_weights("clip", &tmp.path().join("dir.npy"));
    assert_eq!(std::fs::read(&via_hub).unwrap(), want);

    // The cache alone is enough: the endpoint now refuses connections.
    let again = tmp.path().join("again.npy");
    assert_ok(&embed_model("test-org/tiny-clip", &again, &hf_home, &dead_endpoint()), "offline rerun");
    assert_eq!(std::fs::read(&again).unwrap(), want);
}

/// `@BRANCH` and `@SHA` fetch that revision's files (`/resolve/REV/FILE`), each commit into its
/// own snapshot folder; the default is `main`.
#[test]
fn revisions_by_branch_and_commit_keep_their_own_files() {
    let tmp = tempfile::tempdir().unwrap();
    let hf_home = tmp.path().join("hf");
    let hub = Hub::start(REPO);
    hub.commit(COMMIT_A, fixture("encoders/clip"))
        .commit(COMMIT_B, fixture("encoders/dinov2"))
        .commit(COMMIT_C, fixture("encoders/dinov2_reg"))
        .branch("main", COMMIT_A)
        .branch("v2", COMMIT_B);
    let cases = [
        (REPO.to_string(), "clip", COMMIT_A),
        (format!("{REPO}@v2"), "dinov2", COMMIT_B),
        (format!("{REPO}@{COMMIT_C}"), "dinov2_reg", COMMIT_C),
    ];
    for (model, folder, _) in &cases {
        let out = tmp.path().join(format!("{folder}.npy"));
        assert_ok(&embed_model(model, &out, &hf_home, &hub.endpoint), model);
        let want = embed_weights(folder, &tmp.path().join(format!("{folder}-dir.npy")));
        assert_eq!(std::fs::read(&out).unwrap(), want, "--model {model} embeds as --weights {folder}");
        let revision = model.split_once('@').map_or("main", |(_, r)| r);
        let requested = hub.requests();
        assert!(
            requested.iter().any(|p| p == &format!("/{REPO}/resolve/{revision}/config.json")),
            "{model}: {requested:?}"
        );
    }
    // Each snapshot holds exactly its commit's files, byte for byte; the branches point at
    // their commits.
    let cache = hf_home.join("hub/models--test-org--tiny");
    for (_, folder, commit) in &cases {
        let snapshot = cache.join("snapshots").join(commit);
        let mut names: Vec<String> = std::fs::read_dir(&snapshot)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        let wanted = ["config.json", "model.safetensors", "preprocessor_config.json", "tokenizer.json"];
        let mut want: Vec<String> = wanted
            .iter()
            .filter(|f| fixture("encoders").join(folder).join(f).is_file())
            .map(|f| f.to_string())
            .collect();
        want.sort();
        assert_eq!(names, want, "snapshot {commit}");
        for name in &names {
            assert_eq!(
                std::fs::read(snapshot.join(name)).unwrap(),
                std::fs::read(fixture("encoders").join(folder).join(name)).unwrap(),
                "{commit}/{name} is {folder}'s"
            );
        }
    }
    for (branch, commit) in [("main", COMMIT_A), ("v2", COMMIT_B)] {
        assert_eq!(std::fs::read_to_string(cache.join("refs").join(branch)).unwrap(), commit);
    }
}

/// A branch that moved on the hub while the cache holds part of its older commit: the run reads
/// every file at the commit it started with (`/resolve/COMMIT/FILE`), never a mix of two.
#[test]
fn a_moved_branch_never_mixes_two_commits() {
    let tmp = tempfile::tempdir().unwrap();
    let hf_home = tmp.path().join("hf");
    let hub = Hub::start(REPO);
    hub.commit(COMMIT_A, fixture("encoders/dinov2")).commit(COMMIT_B, fixture("encoders/dinov2_reg"));
    hub.branch("main", COMMIT_A);
    let first = tmp.path().join("first.npy");
    assert_ok(&embed_model(REPO, &first, &hf_home, &hub.endpoint), "first run");
    // The cached commit loses its weights (an interrupted download), and main moves on.
    let snapshot = hf_home.join(format!("hub/models--test-org--tiny/snapshots/{COMMIT_A}"));
    std::fs::remove_file(snapshot.join("model.safetensors")).unwrap();
    hub.branch("main", COMMIT_B);
    let before = hub.requests().len();

    let again = tmp.path().join("again.npy");
    assert_ok(&embed_model(REPO, &again, &hf_home, &hub.endpoint), "rerun");
    let requested = hub.requests()[before..].to_vec();
    assert!(
        requested.contains(&format!("/{REPO}/resolve/{COMMIT_A}/model.safetensors")),
        "the missing file is fetched at the cached commit: {requested:?}"
    );
    assert!(!requested.iter().any(|p| p.contains("/resolve/main/")), "{requested:?}");
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&first).unwrap());
    assert_eq!(std::fs::read(&again).unwrap(), embed_weights("dinov2", &tmp.path().join("dir.npy")));
    assert!(!hf_home.join(format!("hub/models--test-org--tiny/snapshots/{COMMIT_B}")).exists());
}

#[test]
fn a_repository_without_safetensors_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    std::fs::copy(fixture("encoders/clip/config.json"), repo.join("config.json")).unwrap();
    std::fs::write(repo.join("pytorch_model.bin"), b"pickle").unwrap();
    let hub = Hub::start("test-org/pickled");
    hub.commit(COMMIT_B, repo).branch("main", COMMIT_B);
    let (out, hf_home) = (tmp.path().join("x.npy"), tmp.path().join("hf"));
    let run = embed_model("test-org/pickled", &out, &hf_home, &hub.endpoint);
    assert!(!run.status.success());
    assert!(
        run.stderr.contains("test-org/pickled") && run.stderr.contains("only safetensors"),
        "{}",
        run.stderr
    );
    assert!(!hub.requests().iter().any(|p| p.ends_with(".bin")));
    assert!(!out.exists());
}

/// `generate --model` fetches what the pipeline class's loader reads (here a FLUX-schnell-like
/// pipeline: two text encoders, two tokenizers, the transformer, the VAE, the scheduler) at one
/// commit, and makes the images `--pipeline` makes from the same folder.
#[test]
fn generate_model_fetches_a_flux_pipeline_and_matches_the_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = Hub::start("test-org/tiny-flux");
    let folder = culturelens_testkit::fixture("diffusion/tiny-flux-schnell");
    hub.commit(COMMIT_A, folder.clone()).branch("main", COMMIT_A);
    let generate = |source: (&str, &str), out: &str| {
        Cli::new("generate")
            .opt(source.0, source.1)
            .opt("--prompt", "a street")
            .opt("--out", tmp.path().join(out))
            .opt("--out-npy", tmp.path().join(format!("{out}.npy")))
            .opt("--steps", "2")
            .opt("--height", "16")
            .opt("--width", "16")
            .opt("--max-sequence-length", "8")
            .env("HF_ENDPOINT", &hub.endpoint)
            .env("HF_HOME", tmp.path().join("hf"))
            .env_remove("HF_TOKEN")
            .run()
    };
    assert_ok(&generate(("--model", "test-org/tiny-flux"), "hub"), "generate --model");
    let requested = hub.requests();
    for file in [
        "text_encoder_2/model.safetensors",
        "tokenizer_2/tokenizer.json",
        "transformer/diffusion_pytorch_model.safetensors",
    ] {
        assert!(requested.iter().any(|p| p.ends_with(file)), "{file} not fetched: {requested:?}");
    }
    assert_ok(&generate(("--pipeline", folder.to_str().unwrap()), "dir"), "generate --pipeline");
    let read = |name: &str| std::fs::read(tmp.path().join(name)).unwrap();
    assert_eq!(read("hub.npy"), read("dir.npy"));
}

/// `generate --model` fetches the components `model_index.json` names (here an SDXL pipeline's
/// two text encoders and tokenizers, UNet, VAE, scheduler: transformers' `model.safetensors`,
/// diffusers' `diffusion_pytorch_model.safetensors`), and generates what `--pipeline` on the
/// same folder generates.
#[test]
fn generate_model_fetches_every_component_of_the_model_index() {
    let tmp = tempfile::tempdir().unwrap();
    let hf_home = tmp.path().join("hf");
    let tiny = fixture("diffusion").join("tiny-sdxl");
    let hub = Hub::start("test-org/tiny-sdxl");
    hub.commit(COMMIT_A, tiny.clone()).branch("main", COMMIT_A);
    let generate = |source: (&str, &Path), out: &Path| {
        Cli::new("generate")
            .opt(source.0, source.1)
            .opt("--prompt", "a street")
            .opt("--steps", "2")
            .opt("--out", out)
            .env("HF_ENDPOINT", &hub.endpoint)
            .env("HF_HOME", &hf_home)
            .env_remove("HF_TOKEN")
            .run()
    };
    let via_hub = tmp.path().join("hub");
    assert_ok(&generate(("--model", Path::new("test-org/tiny-sdxl")), &via_hub), "generate --model");
    let requested = hub.requests();
    for file in [
        "text_encoder_2/model.safetensors",
        "tokenizer_2/vocab.json",
        "unet/diffusion_pytorch_model.safetensors",
    ] {
        assert!(requested.iter().any(|p| p.ends_with(file)), "{file} not fetched: {requested:?}");
    }
    assert!(!requested.iter().any(|p| p.ends_with(".bin")), "never asks for pickles: {requested:?}");
    let local = tmp.path().join("local");
    assert_ok(&generate(("--pipeline", &tiny), &local), "generate --pipeline");
    assert_eq!(
        std::fs::read(via_hub.join("000000_00.png")).unwrap(),
        std::fs::read(local.join("000000_00.png")).unwrap()
    );
}

/// `generate --model` checks the request against the pipeline's configs before it downloads a
/// single weight file: a size the pipeline cannot make is refused with only configs and
/// tokenizers fetched, and nothing written.
#[test]
fn generate_model_refuses_a_bad_size_before_downloading_weights() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = Hub::start("test-org/tiny-sdxl");
    hub.commit(COMMIT_A, fixture("diffusion").join("tiny-sdxl")).branch("main", COMMIT_A);
    let out = tmp.path().join("out");
    let run = Cli::new("generate")
        .opt("--model", "test-org/tiny-sdxl")
        .opt("--prompt", "a street")
        .opt("--height", "20")
        .opt("--out", &out)
        .env("HF_ENDPOINT", &hub.endpoint)
        .env("HF_HOME", tmp.path().join("hf"))
        .env_remove("HF_TOKEN")
        .run();
    assert!(!run.status.success());
    assert!(run.stderr.contains("multiples of 8") && run.stderr.contains("got 20×16"), "{}", run.stderr);
    let requested = hub.requests();
    assert!(requested.iter().any(|p| p.ends_with("unet/config.json")), "{requested:?}");
    assert!(!requested.iter().any(|p| p.ends_with(".safetensors")), "weights fetched: {requested:?}");
    assert!(!out.exists());
}
