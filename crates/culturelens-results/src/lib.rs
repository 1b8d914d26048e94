//! The schema of every culturelens result file: for each file a command writes, its column names
//! (or JSON keys) written once, a typed row, a writer and a reader whose errors name the file, row,
//! line and column ([`SchemaError`]). The commands write through these schemas, and the figures
//! (`culturelens figures`), the report (`culturelens report`), bundles (`culturelens-bundle`) and
//! the browser app read through them, so a header exists in one place only.
//!
//! | command | files | module |
//! |---------|-------|--------|
//! | `sos` | joint CSV, per-output CSV, report JSON | [`sos`] |
//! | `vendi` | scores JSON | [`vendi`] |
//! | `magbig` | result CSV (and the attribute table it reads) | [`magbig`] |
//! | `cultext2i` | group CSV, report JSON | [`cultext2i`] |
//! | `colour` | `dominant_colours.csv`, `palettes.csv`, `values.csv` | [`colour`] |
//! | `captions` | `terms.csv`, `top_terms.csv`, `coverage.csv` | [`captions`] |
//! | `validate` | validation CSV | [`validate`] |
//!
//! A CSV table is a [`CsvSchema`] (header from its variable columns, row to cells and back),
//! written by [`write`] and read by [`read`]; a JSON file is a serde type with its module's
//! `write…`/`read…`, which keep the file's key order and number format. [`kind`] says which
//! command writes which file, for readers that start from a provenance manifest. [`ci`] is the
//! one convention of confidence-interval columns (`<metric>_lo`, `<metric>_hi` with `--ci`).
//!
//! Invariants: no I/O beyond the readers and writers handed in, no Burn, builds for wasm32 (the
//! browser reads bundles' result tables through it). Changing a writer changes its reader with it;
//! the bytes a command writes are a contract (tests outside the project read them).

pub mod captions;
pub mod ci;
pub mod colour;
mod csv_file;
pub mod cultext2i;
mod error;
pub mod kind;
pub mod magbig;
pub mod sos;
pub mod validate;
pub mod vendi;

pub use csv_file::{Cells, CsvSchema, read, records, write, write_records};
pub use error::SchemaError;

#[cfg(test)]
mod tests;
