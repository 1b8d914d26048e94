//! The papers' metrics that need no device: they work on host slices and strings, in f64, and
//! never touch Burn or a model (Cargo enforces it: this crate does not depend on either).
//!
//! - [`magbig`]: MAGBIG's MAD, its fair-coin baseline and the male share (§4, App. B);
//! - [`cultext2i`]: CulText2I's NA, DP, CD, CCS and XNA/XDP from cosines (§6.1, Table 2);
//! - [`agreement`]: the inter-rater agreement of the SoS validation (App. B.2);
//! - [`validation`]: CLIPScore and the SoS validation's labelling rules (SoS §4.2, Table 2);
//! - [`colour`]: the SoS colour analysis (App. F); [`words`]: the caption analysis (§6.1, App. G);
//! - [`tokens`]: the tokenizer lens; [`stats`]: the shared statistics conventions;
//!   [`demo`]: the synthetic demo table;
//! - [`bootstrap`]: seeded bootstrap confidence intervals (percentile, BCa) of every metric;
//!   [`cancel`]: the cancellation points of long loops (the Python package's Ctrl-C);
//!   [`permutation`]: the sign-flip test of paired differences and Holm's correction.
//!
//! Invariants: no file or network I/O (callers hand in slices and strings).

pub mod agreement;
pub mod bootstrap;
pub mod cancel;
pub mod colour;
pub mod cultext2i;
pub mod demo;
pub mod magbig;
pub mod permutation;
pub mod stats;
pub mod tokens;
pub mod validation;
pub mod words;
