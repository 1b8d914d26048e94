//! The short seeded run of every fuzz target that CI runs (`cargo test -p culturelens-fuzz`):
//! a fixed number of inputs per target from a fixed seed, with the allocation meter installed;
//! any panic or allocation over the limit fails the test and names the input. One test
//! function, so no other test thread's allocations are metered with a target's.

use culturelens_fuzz::alloc::Meter;
use culturelens_fuzz::{run, targets};

#[global_allocator]
static ALLOC: Meter = Meter;

/// Inputs per target in CI (about 7 s for all targets in a debug build on 2 cores).
const INPUTS: u64 = 1000;
/// Inputs for a target whose seeds are larger than [`LARGE_SEED`] bytes: the 0.5 MB ONNX file
/// parses at about 40 inputs/s in a debug build, so 1000 inputs would add 25 s to CI.
const LARGE_SEED_INPUTS: u64 = 200;
const LARGE_SEED: usize = 64 << 10;
const SEED: u64 = 2026;

#[test]
fn every_seed_parses_and_every_parser_survives_the_seeded_run() {
    let mut failures = Vec::new();
    for target in targets() {
        // The seeds are valid, except the SoS file cut to a few rows (incomplete by design).
        for (i, seed) in target.seeds.iter().enumerate() {
            let result = (target.parse)(seed);
            if target.name != "prompts-sos" {
                assert!(result.is_ok(), "{} seed {i}: {result:?}", target.name);
            }
        }
        let large = target.seeds.iter().flatten().any(|file| file.len() > LARGE_SEED);
        let inputs = if large { LARGE_SEED_INPUTS } else { INPUTS };
        match run(&target, SEED, inputs) {
            Ok(stats) => {
                println!(
                    "{}: {} inputs, {} accepted, {} refused, peak heap {} bytes, {:.2} s",
                    target.name, stats.inputs, stats.accepted, stats.refused, stats.peak_bytes, stats.seconds
                );
                assert_eq!(stats.inputs, inputs);
                // Mutations are refused sometimes and accepted sometimes: a target that only
                // ever refuses tests nothing past its first check.
                assert!(stats.refused > 0 && stats.accepted > 0, "{}: {stats:?}", target.name);
            }
            Err(failure) => failures.push(failure.to_string()),
        }
    }
    assert!(Meter::installed());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
