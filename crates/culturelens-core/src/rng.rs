//! The deterministic RNG of the metrics and the demo data: SplitMix64 from the dependency-free
//! `culturelens-rng` crate, which the light prompt crate shares without pulling in the core.

pub use culturelens_rng::SplitMix64;
pub use culturelens_rng::{TorchGenerator, TorchNormalPath};
