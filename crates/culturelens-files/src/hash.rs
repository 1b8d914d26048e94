//! SHA-256 as lower-case hex: of bytes, of a stream fed piece by piece, and of a file read in
//! 1 MiB blocks. The one hashing rule of provenance manifests, part files, bundle manifests and the
//! prompt-set downloads.

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::Error;

/// The SHA-256 of `bytes`, in lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let mut hasher = Sha256Hex::new();
    hasher.update(bytes);
    hasher.finish()
}

/// A SHA-256 computed over bytes that arrive in pieces (a download, a file read in blocks).
#[derive(Clone, Default)]
pub struct Sha256Hex(Sha256);

impl Sha256Hex {
    pub fn new() -> Self {
        Self::default()
    }

    /// Hashes the next piece.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The digest of every piece so far, in lower-case hex.
    pub fn finish(self) -> String {
        self.0.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The size in bytes and the SHA-256 (lower-case hex) of the file at `path`, read in blocks.
pub fn file_sha256(path: &Path) -> Result<(u64, String), Error> {
    let failed = |e| Error::new("read", path, e);
    let mut file = std::fs::File::open(path).map_err(failed)?;
    let mut hasher = Sha256Hex::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(failed)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        bytes += n as u64;
    }
    Ok((bytes, hasher.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FIPS 180-2's "abc" and the empty message, whole, in pieces and from a file.
    #[test]
    fn known_digests() {
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(sha256_hex(b"abc"), abc);
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        let mut pieces = Sha256Hex::new();
        pieces.update(b"a");
        pieces.update(b"");
        pieces.update(b"bc");
        assert_eq!(pieces.finish(), abc);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"abc").unwrap();
        assert_eq!(file_sha256(&path).unwrap(), (3, abc.to_string()));
        let missing = dir.path().join("missing");
        let err = file_sha256(&missing).unwrap_err();
        assert_eq!(err.to_string(), format!("cannot read {}", missing.display()));
        assert_eq!(err.source.kind(), std::io::ErrorKind::NotFound);
    }
}
