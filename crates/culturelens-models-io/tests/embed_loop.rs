//! The shared embedding loop (`culturelens_models_io::embed::embed_rows`) with one worker and
//! with several side by side (the CPU backend runs one per rayon thread, at most one per batch):
//! the same embeddings to the bit, handed to the sink in the order of the rows, batches cut
//! where the pixel size changes, refused rows reported and counted, whatever the thread count.

use burn::prelude::Device;
use culturelens_models::preprocess::PixelValues;
use culturelens_models_io::{Encoder, LoadError, embed::embed_rows};
use culturelens_testkit::fixture;

/// Row `row`'s image: seeded values, 56 px (the fixture's size) but 40 px for rows 9 and 10
/// (DINOv2 interpolates its position embeddings), refused for rows 4 and 13.
fn decode(row: usize) -> Result<PixelValues, String> {
    if row == 4 || row == 13 {
        return Err(format!("row {row}: not an image"));
    }
    let side = if row == 9 || row == 10 { 40 } else { 56 };
    let mut state = (row as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let data = (0..3 * side * side)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 2001) as f32 / 1000.0 - 1.0
        })
        .collect();
    Ok(PixelValues { height: side, width: side, data })
}

/// One run of the loop in a rayon pool of `threads`: the rows as the sink got them (each
/// call's rows), the embeddings by row, the refused rows and the progress count.
#[allow(clippy::type_complexity)]
fn run(
    encoder: &Encoder,
    todo: &[usize],
    size: usize,
    threads: usize,
) -> (Vec<Vec<usize>>, Vec<Vec<f32>>, Vec<usize>, usize) {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    pool.install(|| {
        let mut calls = Vec::new();
        let mut embeddings = Vec::new();
        let mut counted = 0;
        let failures = embed_rows(
            encoder,
            todo,
            size,
            decode,
            |n| counted += n,
            |rows: Vec<(usize, Vec<f32>)>| {
                calls.push(rows.iter().map(|(row, _)| *row).collect());
                embeddings.extend(rows.into_iter().map(|(_, values)| values));
                Ok::<_, LoadError>(())
            },
        )
        .unwrap();
        (calls, embeddings, failures.into_iter().map(|(row, _)| row).collect(), counted)
    })
}

#[test]
fn several_workers_give_the_same_embeddings_in_order() {
    let encoder = Encoder::from_dir(&fixture("encoders").join("dinov2"), &Device::flex()).unwrap();
    let todo: Vec<usize> = (0..17).collect();
    let (calls, one, failures, counted) = run(&encoder, &todo, 3, 1);
    // Batches of 3 of one size: rows 9 and 10 are a batch of their own between the others.
    let expected: Vec<Vec<usize>> =
        vec![vec![0, 1, 2], vec![3, 5, 6], vec![7, 8], vec![9, 10], vec![11, 12, 14], vec![15, 16]];
    assert_eq!(calls, expected);
    assert_eq!(failures, [4, 13]);
    assert_eq!(counted, 17);
    // Each row as a batch of its own, on this thread.
    let alone: Vec<Vec<f32>> =
        expected.iter().flatten().flat_map(|&row| encoder.embed_pixels(&[decode(row).unwrap()])).collect();
    assert_eq!(one, alone, "a batch gives each row the bits it gets alone");
    // Two and three workers of one thread each, two of two threads (two batches of 8 and 7).
    for (threads, size) in [(2, 3), (3, 3), (3, 1), (4, 8)] {
        let (calls_n, embeddings, failures_n, counted_n) = run(&encoder, &todo, size, threads);
        assert_eq!(failures_n, [4, 13], "{threads} threads");
        assert_eq!(counted_n, 17, "{threads} threads");
        let rows: Vec<usize> = calls_n.iter().flatten().copied().collect();
        assert_eq!(
            rows,
            expected.iter().flatten().copied().collect::<Vec<_>>(),
            "{threads} threads: rows in order"
        );
        if size == 3 {
            assert_eq!(calls_n, expected, "{threads} threads: the same batches");
        }
        assert_eq!(embeddings, one, "{threads} threads, batches of {size}: the same bits");
    }
}

#[test]
fn a_sink_error_stops_the_workers() {
    let encoder = Encoder::from_dir(&fixture("encoders").join("dinov2"), &Device::flex()).unwrap();
    let todo: Vec<usize> = (0..40).collect();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let mut calls = 0;
    let result = pool.install(|| {
        embed_rows(
            &encoder,
            &todo,
            2,
            decode,
            |_| {},
            |_rows: Vec<(usize, Vec<f32>)>| {
                calls += 1;
                match calls {
                    2 => Err(LoadError::Invalid { path: "sink".into(), message: "full".into() }),
                    _ => Ok(()),
                }
            },
        )
    });
    assert!(matches!(result, Err(LoadError::Invalid { message, .. }) if message == "full"));
    assert_eq!(calls, 2, "nothing reaches the sink after its error");
}
