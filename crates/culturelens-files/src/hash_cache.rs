//! A cache of file SHA-256s, so that a command run again on the same large inputs does not hash
//! them again (a 772 MB embedding table takes 0.43 s of a core, as long as the whole SoS command
//! without it).
//!
//! An entry is keyed by what identifies a file's bytes without reading them: its device and inode,
//! and holds its size, modification time and change time (both to the nanosecond). A lookup that
//! finds all five equal to the file's `stat` returns the stored hash; anything else is a miss,
//! and the file is hashed again. Rewriting a file changes its size or mtime; restoring an mtime
//! (`touch -d`) or writing through a new file renamed into place changes the ctime or the inode,
//! which no user process can set back. This is the rule git's index uses to skip unchanged files.
//!
//! Two rules keep a stale entry out ("racily clean" files, as git calls them):
//! - a file whose mtime or ctime lies less than [`RACY_WINDOW`] before the moment it was stat'ed
//!   is hashed but not stored: a write in the same clock tick as the stat would leave both
//!   times unchanged;
//! - the file is stat'ed again after hashing, and the hash is stored only if nothing changed.
//!
//! Entries live in `<cache root>/sha256/<device>-<inode>` ([`cache_root`]), one line each,
//! written atomically. Set `CULTURELENS_HASH_CACHE=off` to hash every time. Unix only: elsewhere
//! every call hashes. A cache that cannot be read or written is ignored (the hash is computed, as
//! without a cache); it never makes a command fail.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::error::Error;
use crate::hash::file_sha256;

/// Environment variable: the cache folder of every culturelens cache (the prompt-set downloads,
/// the file hashes). Default `<user cache dir>/culturelens`.
pub const ENV_CACHE: &str = "CULTURELENS_CACHE";

/// Environment variable: `off` (or `0`, `false`, `no`) turns the hash cache off.
pub const ENV_HASH_CACHE: &str = "CULTURELENS_HASH_CACHE";

/// How recent a file's mtime or ctime may be, before its stat, for its hash to be stored.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// The cache root: `CULTURELENS_CACHE`, else `<user cache dir>/culturelens`; `None` when the
/// system knows no user cache folder.
pub fn cache_root() -> Option<PathBuf> {
    match std::env::var_os(ENV_CACHE) {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
        _ => dirs::cache_dir().map(|d| d.join("culturelens")),
    }
}

/// File hashes kept between runs; see the module docs.
#[derive(Debug, Clone)]
pub struct HashCache {
    /// `None`: off (every call hashes).
    dir: Option<PathBuf>,
}

impl HashCache {
    /// The cache the CLI uses: `<cache root>/sha256`, or off when `CULTURELENS_HASH_CACHE` says
    /// so or no cache root is known.
    pub fn from_env() -> Self {
        let off = std::env::var(ENV_HASH_CACHE)
            .map(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "off" | "0" | "false" | "no"))
            .unwrap_or(false);
        Self { dir: if off { None } else { cache_root().map(|root| root.join("sha256")) } }
    }

    /// A cache kept in `dir`.
    pub fn in_dir(dir: PathBuf) -> Self {
        Self { dir: Some(dir) }
    }

    /// No cache: every call hashes.
    pub fn off() -> Self {
        Self { dir: None }
    }

    /// The size and SHA-256 of the file at `path` ([`file_sha256`]), from the cache when its
    /// entry still describes the file.
    pub fn file_sha256(&self, path: &Path) -> Result<(u64, String), Error> {
        self.file_sha256_at(path, SystemTime::now())
    }

    /// [`HashCache::file_sha256`] with the clock given (tests).
    fn file_sha256_at(&self, path: &Path, now: SystemTime) -> Result<(u64, String), Error> {
        let Some(dir) = &self.dir else { return file_sha256(path) };
        let Some(before) = Stamp::of(path) else { return file_sha256(path) };
        let entry = dir.join(before.entry_name());
        if let Some(hash) = std::fs::read_to_string(&entry).ok().and_then(|line| before.stored_hash(&line)) {
            return Ok((before.size, hash));
        }
        let (size, hash) = file_sha256(path)?;
        if size == before.size && !before.is_racy(now) && Stamp::of(path).as_ref() == Some(&before) {
            // Best effort: a cache that cannot be written is as good as none.
            let _ = crate::write_atomic(&entry, |w| w.write_all(before.line(&hash).as_bytes()));
        }
        Ok((size, hash))
    }
}

/// What a cache entry is checked against: a file's identity, size and times.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    device: u64,
    inode: u64,
    size: u64,
    /// (seconds, nanoseconds) since the epoch.
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    #[cfg(unix)]
    fn of(path: &Path) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok().filter(std::fs::Metadata::is_file)?;
        Some(Stamp {
            device: m.dev(),
            inode: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }

    #[cfg(not(unix))]
    fn of(_: &Path) -> Option<Stamp> {
        None
    }

    fn entry_name(&self) -> String {
        format!("{:x}-{:x}", self.device, self.inode)
    }

    /// The entry's line: size, mtime, ctime, hash.
    fn line(&self, hash: &str) -> String {
        let (m, c) = (self.mtime, self.ctime);
        format!("{} {}.{:09} {}.{:09} {hash}\n", self.size, m.0, m.1, c.0, c.1)
    }

    /// The hash of an entry's `line` when the line describes this stamp.
    fn stored_hash(&self, line: &str) -> Option<String> {
        let hash = line.trim_end().rsplit(' ').next()?;
        let valid = hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        (valid && self.line(hash) == line).then(|| hash.to_string())
    }

    /// Whether either time lies within [`RACY_WINDOW`] of `now` (or after it).
    fn is_racy(&self, now: SystemTime) -> bool {
        let Ok(now) = now.duration_since(SystemTime::UNIX_EPOCH) else { return true };
        let limit = now.saturating_sub(RACY_WINDOW);
        let at = |(s, ns): (i64, i64)| match u64::try_from(s) {
            Ok(s) => Duration::new(s, ns.clamp(0, 999_999_999) as u32),
            Err(_) => Duration::ZERO,
        };
        at(self.mtime) > limit || at(self.ctime) > limit
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    /// The clock a test passes: far enough after the file's times that it is not racy.
    fn later() -> SystemTime {
        SystemTime::now() + Duration::from_secs(60)
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = match std::fs::read_dir(dir) {
            Ok(list) => list.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect(),
            Err(_) => Vec::new(),
        };
        names.sort();
        names
    }

    /// A second call answers from the entry the first wrote: the test plants a wrong hash in a
    /// valid entry and gets it back, so the file was not read.
    #[test]
    fn a_stored_hash_is_used_while_the_file_is_unchanged() {
        let tmp = tempfile::tempdir().unwrap();
        let (file, dir) = (tmp.path().join("f"), tmp.path().join("cache"));
        std::fs::write(&file, b"abc").unwrap();
        let cache = HashCache::in_dir(dir.clone());
        assert_eq!(cache.file_sha256_at(&file, later()).unwrap(), (3, ABC.to_string()));
        let names = entries(&dir);
        assert_eq!(names.len(), 1);
        let entry = dir.join(&names[0]);
        let stored = std::fs::read_to_string(&entry).unwrap();
        assert!(stored.starts_with("3 ") && stored.ends_with(&format!(" {ABC}\n")), "{stored}");
        let planted = "0".repeat(64);
        std::fs::write(&entry, stored.replace(ABC, &planted)).unwrap();
        assert_eq!(cache.file_sha256_at(&file, later()).unwrap(), (3, planted));
    }

    /// New bytes of the same size with the old mtime set back: the ctime moved, so the entry no
    /// longer matches and the file is hashed again (and the entry replaced).
    #[test]
    fn a_rewritten_file_is_hashed_again_even_with_its_mtime_restored() {
        let tmp = tempfile::tempdir().unwrap();
        let (file, dir) = (tmp.path().join("f"), tmp.path().join("cache"));
        std::fs::write(&file, b"abc").unwrap();
        let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
        let cache = HashCache::in_dir(dir.clone());
        assert_eq!(cache.file_sha256_at(&file, later()).unwrap().1, ABC);
        let first = std::fs::read_to_string(dir.join(&entries(&dir)[0])).unwrap();
        // The ctime clock must move on before the rewrite.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&file, b"abd").unwrap();
        std::fs::File::options().write(true).open(&file).unwrap().set_modified(mtime).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().modified().unwrap(), mtime);
        let abd = crate::sha256_hex(b"abd");
        assert_eq!(cache.file_sha256_at(&file, later()).unwrap(), (3, abd.clone()));
        let second = std::fs::read_to_string(dir.join(&entries(&dir)[0])).unwrap();
        assert_ne!(first, second);
        assert!(second.ends_with(&format!(" {abd}\n")));
        // A longer file under the same name: the size differs.
        std::fs::write(&file, b"abcd").unwrap();
        assert_eq!(cache.file_sha256_at(&file, later()).unwrap(), (4, crate::sha256_hex(b"abcd")));
    }

    /// A file changed within the racy window of the clock is hashed but not stored; an entry
    /// that does not parse, or is truncated, is a miss, never an error; the cache off stores
    /// nothing.
    #[test]
    fn racy_files_broken_entries_and_the_cache_off() {
        let tmp = tempfile::tempdir().unwrap();
        let (file, dir) = (tmp.path().join("f"), tmp.path().join("cache"));
        std::fs::write(&file, b"abc").unwrap();
        let cache = HashCache::in_dir(dir.clone());
        assert_eq!(cache.file_sha256_at(&file, SystemTime::now()).unwrap().1, ABC);
        assert!(entries(&dir).is_empty(), "a file written just now was stored");
        HashCache::off().file_sha256(&file).unwrap();
        assert!(entries(&dir).is_empty());
        cache.file_sha256_at(&file, later()).unwrap();
        let entry = dir.join(&entries(&dir)[0]);
        let stored = std::fs::read_to_string(&entry).unwrap();
        for broken in [&stored[..stored.len() - 2], "", "garbage", &stored.replace(ABC, "xyz")] {
            std::fs::write(&entry, broken).unwrap();
            assert_eq!(cache.file_sha256_at(&file, later()).unwrap().1, ABC, "{broken:?}");
        }
        // A cache folder that cannot be made (a file is in its way) is ignored.
        let blocked = HashCache::in_dir(file.join("sub"));
        assert_eq!(blocked.file_sha256_at(&file, later()).unwrap().1, ABC);
        // A missing file is the same error as without a cache.
        let missing = tmp.path().join("missing");
        let err = cache.file_sha256_at(&missing, later()).unwrap_err();
        assert_eq!(err.to_string(), format!("cannot read {}", missing.display()));
    }
}
