//! The output kit: the one implementation of how culturelens writes a file or a folder, names the
//! folder a path sits in, and hashes bytes.
//!
//! - [`write_atomic`] and [`write_dir_atomic`]: a file or a whole folder is built beside its
//!   target and renamed into place only when complete, so a failed or killed run never leaves a
//!   partial output, and an existing one is replaced only on success. Outputs get the user's
//!   umask (files `0666 & !umask`, folders `0777 & !umask`), as `std::fs::write` and
//!   `create_dir_all` would, not the owner-only mode of a temporary file. Both create the missing
//!   folders above an output ([`create_dir_all`], the one output-folder rule of every command),
//!   and their errors name the output, never the temporary file.
//! - [`error_line`]: an error and its causes as the one line a user sees (the CLI's `error:` line,
//!   the Python package's exception text).
//! - [`parent_dir`] and [`sibling`]: the folder a path sits in (`.` for a bare name), and a name
//!   relative to a file's folder.
//! - [`sha256_hex`], [`Sha256Hex`] and [`file_sha256`]: SHA-256 in lower-case hex, of bytes, of a
//!   stream and of a file.
//! - [`HashCache`]: file hashes kept between runs, keyed by device, inode, size and times (not on
//!   wasm32), and [`cache_root`], the folder of every culturelens cache.
//!
//! std, sha2, tempfile and dirs only; the browser (wasm32) builds the hashing and path rules without the
//! atomic writes.

mod error;
mod hash;
mod paths;

#[cfg(not(target_arch = "wasm32"))]
mod atomic;
#[cfg(not(target_arch = "wasm32"))]
mod hash_cache;

#[cfg(not(target_arch = "wasm32"))]
pub use atomic::{create_dir_all, write_atomic, write_dir_atomic};
pub use error::Error;
pub use hash::{Sha256Hex, file_sha256, sha256_hex};
#[cfg(not(target_arch = "wasm32"))]
pub use hash_cache::{ENV_CACHE, ENV_HASH_CACHE, HashCache, RACY_WINDOW, cache_root};
pub use paths::{parent_dir, sibling};

/// `err` and its causes as one line, joined by ": " as anyhow's `{:#}` joins them, except that a
/// cause whose text the message above it already ends with is not printed again (a `thiserror`
/// message such as `"{at}: {source}"` that also returns `source` as its cause would otherwise
/// print it twice).
pub fn error_line(err: &(dyn std::error::Error + 'static)) -> String {
    let mut line = String::new();
    let mut above = String::new();
    let mut cause = Some(err);
    while let Some(e) = cause {
        let text = e.to_string();
        if above.is_empty() || !above.ends_with(&text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
        above = text;
        cause = e.source();
    }
    line
}
