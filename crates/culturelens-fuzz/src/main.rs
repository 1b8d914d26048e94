//! `culturelens-fuzz`: the benchmark-style run of every fuzz target (not run in CI; CI runs
//! the short seeded run of `tests/seeded.rs`).
//!
//! ```text
//! cargo run --release -p culturelens-fuzz -- [--inputs N] [--seed S] [--target NAME] [--dump INDEX]
//! ```
//!
//! Prints, per target, the inputs run, how many the parser accepted and refused, the largest
//! peak heap of one input and the time; exits non-zero at the first panic or allocation over
//! the limit, naming the input (target, seed, index). `--dump INDEX` writes that input's files
//! to `fuzz-TARGET-INDEX.N` instead of running.

use culturelens_fuzz::alloc::Meter;
use culturelens_fuzz::{ALLOC_LIMIT, MAX_INPUT, input, run, targets};

#[global_allocator]
static ALLOC: Meter = Meter;

fn main() {
    let mut inputs: u64 = 1_000_000;
    let mut seed: u64 = 1;
    let mut only: Option<String> = None;
    let mut dump: Option<u64> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage(&format!("{arg} needs a value")));
        match arg.as_str() {
            "--inputs" => inputs = value().parse().unwrap_or_else(|_| usage("--inputs N")),
            "--seed" => seed = value().parse().unwrap_or_else(|_| usage("--seed S")),
            "--target" => only = Some(value()),
            "--dump" => dump = Some(value().parse().unwrap_or_else(|_| usage("--dump INDEX"))),
            _ => usage(&format!("unknown argument {arg}")),
        }
    }
    let all = targets();
    let chosen: Vec<_> = all.iter().filter(|t| only.as_ref().is_none_or(|n| n == t.name)).collect();
    if chosen.is_empty() {
        let names: Vec<_> = all.iter().map(|t| t.name).collect();
        usage(&format!("no target {only:?}; targets: {}", names.join(", ")));
    }
    if let Some(index) = dump {
        for target in chosen {
            for (i, file) in input(target, seed, index).iter().enumerate() {
                let path = format!("fuzz-{}-{index}.{i}", target.name);
                std::fs::write(&path, file).expect("write the input");
                println!("{path}");
            }
        }
        return;
    }
    println!(
        "seed {seed}, {inputs} inputs per target; inputs up to {MAX_INPUT} bytes, peak heap limit {ALLOC_LIMIT} bytes"
    );
    println!(
        "{:<26} {:>9} {:>9} {:>9} {:>11} {:>8} {:>10}",
        "target", "inputs", "accepted", "refused", "peak heap", "seconds", "inputs/s"
    );
    let mut failed = false;
    for target in chosen {
        match run(target, seed, inputs) {
            Ok(s) => println!(
                "{:<26} {:>9} {:>9} {:>9} {:>11} {:>8.1} {:>10.0}",
                target.name,
                s.inputs,
                s.accepted,
                s.refused,
                s.peak_bytes,
                s.seconds,
                s.inputs as f64 / s.seconds
            ),
            Err(failure) => {
                println!("{:<26} FAILED: {failure}", target.name);
                failed = true;
            }
        }
    }
    assert!(Meter::installed(), "the allocation meter is the global allocator");
    if failed {
        std::process::exit(1);
    }
}

fn usage(message: &str) -> ! {
    eprintln!(
        "culturelens-fuzz: {message}\nusage: culturelens-fuzz [--inputs N] [--seed S] [--target NAME] [--dump INDEX]"
    );
    std::process::exit(2);
}
