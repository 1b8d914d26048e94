//! Getting the bytes of an upstream file, always verified against the registry's sha256:
//! - from a local mirror (`--mirror DIR` or `CULTURELENS_DATA_MIRROR=DIR`), read in place;
//! - else from the download cache (`$CULTURELENS_CACHE`, default `<user cache dir>/culturelens`),
//!   under `upstream/<mirror path>`;
//! - else downloaded from `<base URL>/<owner>/<repo>/<commit>/<path>` (base URL
//!   `https://raw.githubusercontent.com`, or `CULTURELENS_DATA_BASE_URL`), hashed while streaming,
//!   and written into the cache (atomically: a temporary file beside it, renamed into place) only
//!   when complete and verified. A truncated or corrupted download leaves nothing in the cache.
//!
//! A cached file that no longer verifies is downloaded again. The first use of each set leaves a
//! marker file next to the cached data, so its licence is shown once ([`Fetcher::first_use`]).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use culturelens_files::{Sha256Hex, sha256_hex, write_atomic};

use crate::error::PromptError;
use crate::registry::{PromptSet, UpstreamFile};

pub use crate::registry::DEFAULT_BASE_URL;
/// Environment variable: a local folder laid out like `shared/data/upstream` to read instead of
/// downloading.
pub const ENV_MIRROR: &str = "CULTURELENS_DATA_MIRROR";
/// Environment variable: the cache folder (default `<user cache dir>/culturelens`).
pub use culturelens_files::ENV_CACHE;
/// Environment variable: the base URL of raw files (default [`DEFAULT_BASE_URL`]).
pub const ENV_BASE_URL: &str = "CULTURELENS_DATA_BASE_URL";

/// How long one download may take in total before it is abandoned.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(300);

/// Where verified upstream bytes come from.
#[derive(Debug, Clone)]
pub enum Origin {
    /// Read `<dir>/<mirror path>`; never touch the network.
    Mirror(PathBuf),
    /// Download from this base URL into the cache.
    Download { base_url: String },
}

/// Fetches and verifies upstream files; see the module docs for the order of sources.
#[derive(Debug)]
pub struct Fetcher {
    cache_root: PathBuf,
    origin: Origin,
}

impl Fetcher {
    pub fn new(cache_root: PathBuf, origin: Origin) -> Self {
        Self { cache_root, origin }
    }

    /// The fetcher the CLI uses: `mirror` (from `--mirror`) or `CULTURELENS_DATA_MIRROR`, else
    /// downloads from `CULTURELENS_DATA_BASE_URL` or [`DEFAULT_BASE_URL`]; cache at
    /// `CULTURELENS_CACHE` or `<user cache dir>/culturelens`.
    pub fn from_env(mirror: Option<PathBuf>) -> Result<Self, PromptError> {
        let cache_root = culturelens_files::cache_root().ok_or_else(|| {
            PromptError::Invalid(format!(
                "no user cache directory is known on this system; set {ENV_CACHE}=DIR"
            ))
        })?;
        let mirror =
            mirror.or_else(|| std::env::var_os(ENV_MIRROR).filter(|d| !d.is_empty()).map(PathBuf::from));
        let origin = match mirror {
            Some(dir) => Origin::Mirror(dir),
            None => Origin::Download {
                base_url: std::env::var(ENV_BASE_URL)
                    .ok()
                    .filter(|u| !u.is_empty())
                    .unwrap_or_else(|| DEFAULT_BASE_URL.to_string()),
            },
        };
        Ok(Self { cache_root, origin })
    }

    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    pub fn cache_root(&self) -> &Path {
        &self.cache_root
    }

    /// Where a downloaded file is kept.
    pub fn cache_path(&self, file: &UpstreamFile) -> PathBuf {
        self.cache_root.join("upstream").join(file.mirror_path)
    }

    /// The verified bytes of `file`.
    pub fn fetch(&self, file: &UpstreamFile) -> Result<Vec<u8>, PromptError> {
        match &self.origin {
            Origin::Mirror(dir) => {
                let path = dir.join(file.mirror_path);
                if !path.is_file() {
                    return Err(PromptError::MissingMirrorFile {
                        mirror: dir.clone(),
                        file: file.mirror_path.to_string(),
                        path,
                    });
                }
                let bytes = std::fs::read(&path).map_err(|e| PromptError::io(&path, e))?;
                file.verify(&sha256_hex(&bytes), &format!("mirror {}", dir.display()), "")?;
                Ok(bytes)
            }
            Origin::Download { base_url } => {
                let cached = self.cache_path(file);
                if let Ok(bytes) = std::fs::read(&cached)
                    && sha256_hex(&bytes) == file.sha256
                {
                    return Ok(bytes);
                }
                self.download(file, base_url, &cached)
            }
        }
    }

    /// Downloads `file`, verifies it, then writes it to `dest` (atomically).
    fn download(&self, file: &UpstreamFile, base_url: &str, dest: &Path) -> Result<Vec<u8>, PromptError> {
        let url = file.url(base_url);
        let failed = |message: String| PromptError::Download {
            file: file.mirror_path.to_string(),
            url: url.clone(),
            message,
        };
        let dir = dest.parent().expect("a cache path has a parent");
        std::fs::create_dir_all(dir).map_err(|e| PromptError::io(dir, e))?;

        let response = agent_for(base_url).get(&url).call().map_err(|e| failed(e.to_string()))?;
        let expected_len = response.header("content-length").and_then(|v| v.trim().parse::<u64>().ok());
        let mut body = response.into_reader();
        let mut hasher = Sha256Hex::new();
        let mut bytes = Vec::with_capacity(expected_len.unwrap_or(0).min(1 << 26) as usize);
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = match body.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(failed(match expected_len {
                        Some(len) => format!("{e} after {} of {len} bytes (truncated response)", bytes.len()),
                        None => format!("{e} after {} bytes", bytes.len()),
                    }));
                }
            };
            hasher.update(&buf[..n]);
            bytes.extend_from_slice(&buf[..n]);
        }
        if let Some(len) = expected_len
            && bytes.len() as u64 != len
        {
            return Err(failed(format!(
                "received {} bytes but Content-Length is {len} (truncated response)",
                bytes.len()
            )));
        }
        file.verify(&hasher.finish(), &url, "; nothing was written to the cache")?;
        write_atomic(dest, |w| w.write_all(&bytes)).map_err(|e| PromptError::io(dest, e))?;
        Ok(bytes)
    }

    /// True the first time `set` is used with this cache (a marker file records it), so the
    /// caller shows the set's licence once. If the marker cannot be written, every use is a
    /// first use.
    pub fn first_use(&self, set: PromptSet) -> bool {
        let marker = self.cache_root.join("upstream").join(format!(".licence-shown-{}", set.name()));
        if marker.exists() {
            return false;
        }
        if let Some(dir) = marker.parent() {
            let _ = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&marker, set.info().licence));
        }
        true
    }
}

/// An HTTP agent with a total timeout; proxies from the environment are honoured except for
/// loopback base URLs (local test servers).
fn agent_for(base_url: &str) -> ureq::Agent {
    ureq::AgentBuilder::new().timeout(DOWNLOAD_TIMEOUT).try_proxy_from_env(!is_loopback(base_url)).build()
}

/// Whether a URL's host is the loopback interface.
fn is_loopback(url: &str) -> bool {
    let authority = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = authority.split('/').next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    matches!(host, "127.0.0.1" | "localhost" | "::1")
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    use super::*;
    use crate::registry::{MAGBIG_FILES, SOS_FILES};
    use culturelens_testkit::upstream_mirror;

    /// The German gender-star file: small, and its folder name has the colon.
    fn star() -> &'static UpstreamFile {
        MAGBIG_FILES.iter().find(|f| f.path.ends_with("occ_german_star.csv")).unwrap()
    }

    /// A loopback HTTP/1.1 server answering by the first path segment: `good` serves `body`,
    /// `truncated` announces its full length but sends half, `corrupt` flips one byte, anything
    /// else is 404. Returns its base URL (`http://127.0.0.1:<port>`) and the request paths seen.
    fn serve(body: Vec<u8>) -> (String, std::sync::mpsc::Receiver<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (seen, paths) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let mut stream = stream.unwrap();
                let mut request = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                request.read_line(&mut line).unwrap();
                let path = line.split(' ').nth(1).unwrap_or_default().to_string();
                loop {
                    let mut header = String::new();
                    if request.read_line(&mut header).unwrap() == 0 || header == "\r\n" {
                        break;
                    }
                }
                let head = |status: &str, len: usize| {
                    format!("HTTP/1.1 {status}\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n")
                        .into_bytes()
                };
                let response = match path.split('/').nth(1).unwrap_or_default() {
                    "good" => [head("200 OK", body.len()), body.clone()].concat(),
                    "truncated" => [head("200 OK", body.len()), body[..body.len() / 2].to_vec()].concat(),
                    "corrupt" => {
                        let mut bad = body.clone();
                        bad[10] ^= 0x20;
                        [head("200 OK", bad.len()), bad].concat()
                    }
                    _ => head("404 Not Found", 0),
                };
                let _ = stream.write_all(&response);
                let _ = stream.flush();
                seen.send(path).unwrap();
            }
        });
        (base, paths)
    }

    /// Every entry under `dir`, recursively (to prove nothing was left behind).
    fn files_under(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    out.extend(files_under(&path));
                } else {
                    out.push(path);
                }
            }
        }
        out
    }

    fn real_bytes() -> Vec<u8> {
        std::fs::read(upstream_mirror().join(star().mirror_path)).unwrap()
    }

    /// A fetcher with a fresh cache that downloads from [`serve`]'s `route` (its first path
    /// segment); also returns the server's base URL and the request paths it sees.
    fn downloader(route: &str) -> (Fetcher, tempfile::TempDir, String, std::sync::mpsc::Receiver<String>) {
        let (base, paths) = serve(real_bytes());
        let cache = tempfile::tempdir().unwrap();
        let origin = Origin::Download { base_url: format!("{base}/{route}") };
        (Fetcher::new(cache.path().into(), origin), cache, base, paths)
    }

    #[test]
    fn download_verifies_then_caches_atomically() {
        let (fetcher, cache, base, paths) = downloader("good");
        assert_eq!(fetcher.fetch(star()).unwrap(), real_bytes());
        assert_eq!(
            paths.recv().unwrap(),
            "/good/felifri/MAGBIG/dce31d9e62d124f243d012c445a5dfbbb993b975/prompts/indirect%3Agender_neutral/occ_german_star.csv"
        );
        let cached = fetcher.cache_path(star());
        assert!(cached.ends_with("upstream/MAGBIG/prompts/indirect:gender_neutral/occ_german_star.csv"));
        assert_eq!(files_under(cache.path()), std::slice::from_ref(&cached), "no temporary file is left");

        // Served from the cache now: a base URL nobody answers is never contacted.
        let offline =
            Fetcher::new(cache.path().into(), Origin::Download { base_url: format!("{base}/gone") });
        assert_eq!(offline.fetch(star()).unwrap(), real_bytes());
        assert!(paths.try_recv().is_err());

        // A cached file that no longer verifies is downloaded again.
        std::fs::write(&cached, b"tampered").unwrap();
        assert_eq!(fetcher.fetch(star()).unwrap(), real_bytes());
        assert_eq!(std::fs::read(&cached).unwrap(), real_bytes());
    }

    #[test]
    fn truncated_response_is_an_error_and_leaves_nothing() {
        let (fetcher, cache, _, _paths) = downloader("truncated");
        let err = fetcher.fetch(star()).unwrap_err().to_string();
        assert!(
            err.contains("download of MAGBIG/prompts/indirect:gender_neutral/occ_german_star.csv"),
            "{err}"
        );
        // The remedy for an offline machine is named.
        assert!(err.contains("--mirror DIR or $CULTURELENS_DATA_MIRROR"), "{err}");
        assert!(err.contains("truncated response"), "{err}");
        assert!(files_under(cache.path()).is_empty(), "{:?}", files_under(cache.path()));
    }

    #[test]
    fn corrupted_response_fails_the_checksum_and_leaves_nothing() {
        let (fetcher, cache, _, _paths) = downloader("corrupt");
        let err = fetcher.fetch(star()).unwrap_err();
        let PromptError::Checksum { file, expected, actual, .. } = &err else { panic!("{err}") };
        assert_eq!(file, star().mirror_path);
        assert_eq!(expected, star().sha256);
        let mut corrupted = real_bytes();
        corrupted[10] ^= 0x20;
        assert_eq!(actual, &sha256_hex(&corrupted));
        let message = err.to_string();
        assert!(message.contains(star().sha256) && message.contains(actual.as_str()), "{message}");
        assert!(message.contains("nothing was written to the cache"), "{message}");
        assert!(files_under(cache.path()).is_empty());
    }

    #[test]
    fn http_errors_name_the_file_and_url() {
        let (fetcher, cache, _, _paths) = downloader("nothing");
        let err = fetcher.fetch(&SOS_FILES[0]).unwrap_err().to_string();
        assert!(
            err.starts_with("download of Surface-Over-Semantics/full_dataset.csv from http://127.0.0.1:"),
            "{err}"
        );
        assert!(err.contains("404"), "{err}");
        assert!(files_under(cache.path()).is_empty());
    }

    #[test]
    fn mirror_files_are_verified_and_missing_ones_named() {
        let cache = tempfile::tempdir().unwrap();
        let good = Fetcher::new(cache.path().into(), Origin::Mirror(upstream_mirror()));
        assert_eq!(good.fetch(star()).unwrap(), real_bytes());

        let fake = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(cache.path().into(), Origin::Mirror(fake.path().into()));
        let err = fetcher.fetch(&SOS_FILES[0]).unwrap_err().to_string();
        assert!(err.contains("has no Surface-Over-Semantics/full_dataset.csv"), "{err}");
        assert!(
            err.contains(&fake.path().join("Surface-Over-Semantics/full_dataset.csv").display().to_string()),
            "{err}"
        );

        let path = fake.path().join(star().mirror_path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"name,prompt\n").unwrap();
        let err = fetcher.fetch(star()).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("checksum mismatch for {} (from mirror ", star().mirror_path)),
            "{err}"
        );
        assert!(
            err.contains(&format!("expected sha256 {}, got {}", star().sha256, sha256_hex(b"name,prompt\n"))),
            "{err}"
        );
    }

    #[test]
    fn licence_is_announced_once_per_set_and_cache() {
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(cache.path().into(), Origin::Mirror(upstream_mirror()));
        assert!(fetcher.first_use(PromptSet::Cube));
        assert!(!fetcher.first_use(PromptSet::Cube));
        assert!(fetcher.first_use(PromptSet::Sos));
        let marker = std::fs::read_to_string(cache.path().join("upstream/.licence-shown-cube")).unwrap();
        assert!(marker.contains("CC BY-NC-SA 4.0"));
    }

    #[test]
    fn loopback_detection_is_exact() {
        for (url, loopback) in [
            ("http://127.0.0.1:8080/x", true),
            ("http://localhost", true),
            ("http://[::1]:9/", true),
            ("http://localhost.example.com", false),
            ("https://raw.githubusercontent.com", false),
        ] {
            assert_eq!(is_loopback(url), loopback, "{url}");
        }
    }
}
