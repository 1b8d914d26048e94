//! One module per subcommand; each exposes `XxxArgs` (clap) and `run(&XxxArgs) -> anyhow::Result<()>`.

pub mod agreement;
pub mod bundle;
pub mod demo;
pub mod embed;
pub mod hub;
pub mod import;
pub mod magbig;
pub mod prompts;
pub mod sos;
pub mod vendi;
