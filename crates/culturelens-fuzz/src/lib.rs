//! Seeded, deterministic fuzzing of every culturelens parser of untrusted input, on the stable
//! toolchain: no compiler instrumentation, so no coverage feedback, but a structure-aware
//! mutator over valid seed inputs, a panic catcher and an allocation meter.
//!
//! - [`targets`]: one [`Target`] per parser (npy, CSV metadata, Parquet, bundle manifest and
//!   files, safetensors headers, `config.json`, `preprocessor_config.json`, `tokenizer.json`,
//!   SentencePiece models, the four prompt sets), each with its valid seed inputs.
//! - [`mutate`]: input `i` of a run with seed `s` is a function of `(s, target, i)` alone, so
//!   any input a run reports can be rebuilt on its own ([`input`]).
//! - [`alloc::Meter`], installed as the global allocator by the harness binary and its test,
//!   records the largest single allocation and the peak heap of each input.
//!
//! The contract checked for every input: the parser returns (`Ok` or an error), never panics,
//! and allocates at most [`ALLOC_LIMIT`] bytes at its peak. Inputs are at most [`MAX_INPUT`]
//! bytes, so the limit is far above what a well-behaved parser needs for any of them, and far
//! below what a parser trusting a declared size (rows, lengths, shapes) would ask for.

pub mod alloc;
pub mod mutate;
pub mod targets;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use culturelens_rng::SplitMix64;

pub use targets::{Target, targets};

/// Largest input (all of its files together) the mutator makes.
pub const MAX_INPUT: usize = 1 << 20;

/// Largest peak heap (bytes above the heap at the input's start) one input may cause.
pub const ALLOC_LIMIT: usize = 64 << 20;

/// One fuzz input: the files a parser reads (most parsers read one).
pub type Input = Vec<Vec<u8>>;

/// What a run of one target saw.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub inputs: u64,
    /// Inputs the parser accepted.
    pub accepted: u64,
    /// Inputs the parser refused with an error.
    pub refused: u64,
    /// The largest peak heap of one input, in bytes.
    pub peak_bytes: usize,
    pub seconds: f64,
}

/// A contract violation: the input that caused it, rebuilt by [`input`].
#[derive(Debug)]
pub struct Failure {
    pub target: &'static str,
    pub seed: u64,
    pub index: u64,
    pub message: String,
    pub input: Input,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sizes: Vec<usize> = self.input.iter().map(Vec::len).collect();
        write!(
            f,
            "{}: input {} of seed {} (files of {sizes:?} bytes): {}",
            self.target, self.index, self.seed, self.message
        )
    }
}

/// The generator of input `index` of target `target` in a run seeded `seed`.
fn rng_for(seed: u64, target: &str, index: u64) -> SplitMix64 {
    let name = target
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let mut mix = SplitMix64::new(seed ^ name);
    SplitMix64::new(mix.next_u64() ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Input `index` of `target` in a run seeded `seed`: a seed input, mutated 1 to 8 times.
pub fn input(target: &Target, seed: u64, index: u64) -> Input {
    let mut rng = rng_for(seed, target.name, index);
    mutate::mutate_input(&target.seeds, &target.mutable, &mut rng)
}

/// Runs `inputs` inputs of `target` from `seed`; stops at the first contract violation.
pub fn run(target: &Target, seed: u64, inputs: u64) -> Result<Stats, Box<Failure>> {
    let started = Instant::now();
    let mut stats = Stats::default();
    // Panics are caught and reported as failures, without the default hook's backtrace noise.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = (|| {
        for index in 0..inputs {
            let data = input(target, seed, index);
            let fail =
                |message: String| Failure { target: target.name, seed, index, message, input: data.clone() };
            alloc::CURRENT.store(index, std::sync::atomic::Ordering::Relaxed);
            let meter = alloc::Meter::start();
            let outcome = catch_unwind(AssertUnwindSafe(|| (target.parse)(&data)));
            let peak = meter.peak();
            stats.peak_bytes = stats.peak_bytes.max(peak);
            match outcome {
                Ok(Ok(())) => stats.accepted += 1,
                Ok(Err(_)) => stats.refused += 1,
                Err(panic) => {
                    let message = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    return Err(Box::new(fail(format!("panicked: {message}"))));
                }
            }
            if peak > ALLOC_LIMIT {
                return Err(Box::new(fail(format!(
                    "allocated {peak} bytes at its peak (limit {ALLOC_LIMIT})"
                ))));
            }
            stats.inputs += 1;
        }
        Ok(())
    })();
    std::panic::set_hook(hook);
    result?;
    stats.seconds = started.elapsed().as_secs_f64();
    Ok(stats)
}
