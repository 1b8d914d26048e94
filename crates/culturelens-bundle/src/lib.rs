//! The culturelens **bundle**: an embedding table packed for static hosting and the browser app —
//! `manifest.json` + raw little-endian embeddings (f32 or f16) + metadata CSV + optional
//! thumbnails, every file listed in the manifest with its size and SHA-256 (format: `web/BUNDLE.md`).
//!
//! Everything here works on bytes (no file system, no threads), so the `culturelens` CLI and the
//! wasm32 browser app read, validate and write bundles with this one implementation:
//! [`Manifest::parse`] → [`check_file`] per file → [`decode_embeddings`] + [`parse_metadata`]
//! (or [`read_bundle`] for all of it), and [`build_bundle`] to write one.
//!
//! Precision of f16 bundles: f16 keeps 11 significant bits (relative rounding ≤ 2⁻¹¹ ≈ 4.9e-4 per
//! value); on the synthetic demo table the joint SoS of an f16 bundle differs from the f32 table's
//! by at most 2.5e-5 (measured; `tests/bundle_cli.rs` holds it to 5e-5), and on the SoS paper's
//! scale (150,822 × 1280) by at most 1.03e-5 (`scripts/bench/web_bench.py --dtype f16`).

mod error;
mod manifest;
mod read;
mod results;
mod write;

/// The checksum of every listed file: lower-case hex SHA-256 (the output kit's one rule).
pub use culturelens_files::sha256_hex;
pub use error::BundleError;
pub use manifest::{
    DType, FORMAT, FORMAT_VERSION, FileEntry, MANIFEST, MAX_RESULT_BYTES, MIN_PIECE_BYTES, Manifest,
    PIECE_BYTES, Pieces, REQUIRED_COLUMNS, Results, THUMBNAIL_COLUMN,
};
pub use read::{
    Bundle, TableStream, check_digest, check_file, check_size, decode_embeddings, decode_embeddings_words,
    parse_metadata, read_bundle,
};
pub use results::{
    ResultFiles, attach_results, parse_attributes, parse_cultext2i, parse_cultext2i_report, parse_magbig,
};
pub use write::{BundleSpec, build_bundle, demo_spec, distinct_sorted};

#[cfg(test)]
mod tests;
