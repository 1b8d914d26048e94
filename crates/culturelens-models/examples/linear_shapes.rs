//! Times the encoders' linear layers on the CPU device: `burn::tensor::module::linear` of an
//! `[batch, tokens, d_in]` input with a `[d_in, d_out]` weight, the call `vit.rs` makes (Burn folds
//! the batch into the rows where that tiles better, then `gemm` runs on every core). The peer
//! side and the ratio are `scripts/bench/bench_linear_cpu.py`'s, which runs this with
//!
//!     cargo build --release -p culturelens-models --example linear_shapes
//!     target/release/examples/linear_shapes [--repeats 10] BATCHxTOKENSxD_INxD_OUT...
//!
//! It allocates as the CLI does (`culturelens-alloc`). Inputs are a fixed hash of each value's
//! index (`value(i, salt)` below, the same formula the script uses), so both sides multiply the
//! same numbers; each shape prints one JSON line: the best time of `--repeats` calls after one
//! warm-up, GFLOP/s, and `sum(y²)` in f64 for the script to compare.

use std::time::Instant;

use burn::tensor::{Device, Tensor, TensorData};

// As the CLI's `main`: large blocks advised for huge pages, and (below) malloc keeping freed
// blocks, so each product's output reuses memory as it does inside `embed`.
#[global_allocator]
static ALLOCATOR: culturelens_alloc::HugePageHint = culturelens_alloc::HugePageHint;

/// `((i · 2654435761 + salt) mod 2³²) / 2³² − ½` as f32: values in [−½, ½).
fn value(i: u64, salt: u64) -> f32 {
    ((i.wrapping_mul(2_654_435_761).wrapping_add(salt) % (1 << 32)) as f64 / 4_294_967_296.0 - 0.5) as f32
}

fn main() {
    culturelens_alloc::keep_freed_blocks();
    let mut args = std::env::args().skip(1);
    let mut repeats = 10;
    let mut shapes = Vec::new();
    while let Some(arg) = args.next() {
        if arg == "--repeats" {
            repeats = args.next().and_then(|n| n.parse().ok()).expect("--repeats takes a number");
            continue;
        }
        let dims: Vec<usize> = arg.split('x').map(|d| d.parse().expect("BATCHxTOKENSxD_INxD_OUT")).collect();
        let [batch, tokens, d_in, d_out] = dims[..] else { panic!("{arg}: BATCHxTOKENSxD_INxD_OUT") };
        shapes.push([batch, tokens, d_in, d_out]);
    }
    let device = Device::flex();
    for [batch, tokens, d_in, d_out] in shapes {
        let x: Vec<f32> = (0..(batch * tokens * d_in) as u64).map(|i| value(i, 1)).collect();
        let w: Vec<f32> = (0..(d_in * d_out) as u64).map(|i| value(i, 2)).collect();
        let x = Tensor::<3>::from_data(TensorData::new(x, [batch, tokens, d_in]), &device);
        let w = Tensor::<2>::from_data(TensorData::new(w, [d_in, d_out]), &device);
        // The CPU device runs each op when it is called: the clock covers the product only.
        let run = || burn::tensor::module::linear(x.clone(), w.clone(), None);
        let y = run().into_data().try_into_vec::<f32>().expect("f32 values");
        let best = (0..repeats)
            .map(|_| {
                let start = Instant::now();
                let y = run();
                let seconds = start.elapsed().as_secs_f64();
                drop(y);
                seconds
            })
            .fold(f64::INFINITY, f64::min);
        let flops = 2.0 * (batch * tokens * d_in * d_out) as f64;
        let sum_sq: f64 = y.iter().map(|v| f64::from(*v) * f64::from(*v)).sum();
        println!(
            "{{\"shape\": \"{batch}x{tokens}x{d_in}x{d_out}\", \"seconds\": {best:.6}, \"gflops\": {:.1}, \"sum_sq\": {sum_sq:.9e}}}",
            flops / best / 1e9
        );
    }
}
