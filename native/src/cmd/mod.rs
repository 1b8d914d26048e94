//! One module per subcommand (or pair of kindred subcommands: `embed`/`embed-text`,
//! `sos`/`demo`, `bundle`/`demo-bundle`); each exposes `XxxArgs` (clap) and
//! `run(&XxxArgs) -> anyhow::Result<()>`. Subcommands never import each other: what two of them
//! share lives beside `cmd/` (`input`, `output`, `work`, `hub`, `device`, `timing`, `figures`,
//! `provenance`).

pub mod agreement;
pub mod bundle;
pub mod captions;
pub mod classify;
pub mod clipscore;
pub mod colour;
pub mod cultext2i;
pub mod embed;
pub mod figures;
pub mod generate;
pub mod import;
pub mod magbig;
pub mod merge;
pub mod prompts;
pub mod quality;
pub mod report;
pub mod slurm;
pub mod sos;
pub mod tokens;
pub mod validate;
pub mod vendi;
