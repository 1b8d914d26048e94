//! The embedding loop of an [`Encoder`] over many inputs, shared by the CLI's commands that embed
//! (`embed`, `embed-text`, `classify`, `clipscore`, `quality`) and the Python package's
//! `Encoder.embed_images` / `embed_texts`: images decoded and preprocessed on all cores ahead of
//! the model, in batches of one pixel size, and prompts in batches of token ids; on the CPU,
//! batches side by side, one per thread ([`in_workers`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use culturelens_models::preprocess::PixelValues;
use rayon::prelude::*;

use crate::{Encoder, LoadError, read_pixel_values};

/// Embeds the image files `paths[row]` of every row of `todo`, `size` per forward pass (see
/// [`embed_rows`]): each file is read and decoded as [`read_pixel_values`] does. Returns the
/// images that could not be read or decoded, each with its error (which names the file).
pub fn embed_image_files<E: From<LoadError>>(
    encoder: &Encoder,
    paths: &[PathBuf],
    todo: &[usize],
    size: usize,
    progress: impl FnMut(usize),
    sink: impl FnMut(Vec<(usize, Vec<f32>)>) -> Result<(), E>,
) -> Result<Vec<(PathBuf, String)>, E> {
    let processor = encoder.processor()?;
    let decode = |row: usize| read_pixel_values(processor, &paths[row]).map_err(|e| e.to_string());
    let failures = embed_rows(encoder, todo, size, decode, progress, sink)?;
    Ok(failures.into_iter().map(|(row, e)| (paths[row].clone(), e)).collect())
}

/// Embeds the rows of `todo`, `size` per forward pass (a batch is cut early where the pixel size
/// changes): a producer thread turns the rows into `pixel_values` with `decode` (on all cores,
/// through rayon) and cuts them into batches, ahead of the model ([`in_workers`]: on the CPU
/// backend several batches side by side). Each finished batch's `(row, embedding)` pairs go to
/// `sink`, in the order of `todo`; `progress` counts the rows done (embedded or failed).
/// Returns the rows `decode` refused, with its error.
pub fn embed_rows<E: From<LoadError>>(
    encoder: &Encoder,
    todo: &[usize],
    size: usize,
    decode: impl Fn(usize) -> Result<PixelValues, String> + Sync,
    mut progress: impl FnMut(usize),
    mut sink: impl FnMut(Vec<(usize, Vec<f32>)>) -> Result<(), E>,
) -> Result<Vec<(usize, String)>, E> {
    assert!(size > 0, "a batch holds at least one image");
    let mut failures = Vec::new();
    let produce = |send: &mut dyn FnMut(Item<Batch, (usize, String)>) -> bool| {
        let mut pending = Pending { size, rows: Vec::new(), pixels: Vec::new() };
        for chunk in todo.chunks(size) {
            let decoded: Vec<_> = chunk.par_iter().map(|&row| (row, decode(row))).collect();
            for (row, result) in decoded {
                let items = match result {
                    Ok(pixels) => pending.push(row, pixels).into_iter().map(Item::Job).collect(),
                    Err(e) => vec![Item::Note((row, e))],
                };
                for item in items {
                    if !send(item) {
                        return;
                    }
                }
            }
        }
        if let Some(batch) = pending.take() {
            send(Item::Job(batch));
        }
    };
    let compute = |(rows, pixels): Batch| {
        let embeddings = encoder.embed_pixels(&pixels);
        assert_eq!(embeddings.len(), rows.len(), "one embedding per image");
        rows.into_iter().zip(embeddings).collect::<Vec<_>>()
    };
    in_workers(encoder, todo.len().div_ceil(size), produce, compute, |item| {
        match item {
            Item::Job(rows) => {
                let n = rows.len();
                sink(rows)?;
                progress(n);
            }
            Item::Note(failure) => {
                progress(1);
                failures.push(failure);
            }
        }
        Ok::<_, E>(())
    })?;
    Ok(failures)
}

/// The text embeddings of token ids ([`Encoder::tokenize`]), `batch` rows per forward pass, in
/// order ([`in_workers`]: on the CPU backend several batches side by side); `progress` counts
/// the rows.
pub fn embed_token_ids(
    encoder: &Encoder,
    ids: &[Vec<u32>],
    batch: usize,
    mut progress: impl FnMut(usize),
) -> Result<Vec<Vec<f32>>, LoadError> {
    assert!(batch > 0, "a batch holds at least one prompt");
    let mut rows = Vec::with_capacity(ids.len());
    let produce = |send: &mut dyn FnMut(Item<_, std::convert::Infallible>) -> bool| {
        ids.chunks(batch).map(Item::Job).all(send);
    };
    let compute = |chunk: &[Vec<u32>]| encoder.embed_ids(chunk);
    in_workers(encoder, ids.len().div_ceil(batch), produce, compute, |item| {
        let Item::Job(embedded) = item;
        let embedded = embedded?;
        progress(embedded.len());
        rows.extend(embedded);
        Ok::<_, LoadError>(())
    })?;
    Ok(rows)
}

/// What a producer of [`in_workers`] sends: a job for the workers, or a note for the caller
/// (a row it could not decode), passed on at once.
enum Item<J, N> {
    Job(J),
    Note(N),
}

/// Row numbers and their decoded images, one pixel size.
type Batch = (Vec<usize>, Vec<PixelValues>);

/// Runs `compute` on each job that `produce` sends, and hands `consume` the results in the order
/// the jobs were sent, and the notes as they come. `produce` runs on a thread of its own, ahead
/// of the model (its `send` says `false` once nothing more is wanted); `consume` runs on this
/// thread, which stops at the cancel checkpoint before each item.
///
/// On the CPU backend in f32 with several rayon threads and at least two of the `jobs` expected,
/// the jobs are spread over workers, as many as threads (at most one per job), each computing in
/// its own rayon pool with its share of the threads (one each when the jobs outnumber the
/// threads): two batches side by side keep both cores of a 2-core machine busier than one
/// batch's GEMMs split over both (BENCHMARKS.md, "Batches side by side"). A batch's rows get the
/// same bits whatever the thread count. Elsewhere one worker computes with the backend's own
/// parallelism.
fn in_workers<J: Send, N: Send, R: Send, E>(
    encoder: &Encoder,
    jobs: usize,
    produce: impl FnOnce(&mut dyn FnMut(Item<J, N>) -> bool) + Send,
    compute: impl Fn(J) -> R + Sync,
    mut consume: impl FnMut(Item<R, N>) -> Result<(), E>,
) -> Result<(), E> {
    let threads = worker_threads(encoder, jobs);
    let workers = threads.len();
    // Raised when this thread leaves the loop (an error, a cancel), so that the workers stop at
    // their next job; the producer stops when the last worker has dropped the jobs' receiver.
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| -> Result<(), E> {
        let _raise = RaiseOnDrop(&stop);
        let (job_tx, job_rx) = mpsc::sync_channel::<(usize, J)>(workers);
        let job_rx = Arc::new(Mutex::new(job_rx));
        let (done_tx, done_rx) = mpsc::channel::<Item<(usize, R), N>>();
        let (stop, compute) = (&stop, &compute);
        let notes = done_tx.clone();
        scope.spawn(move || {
            let mut seq = 0;
            produce(&mut |item| match item {
                Item::Job(job) => {
                    seq += 1;
                    !stop.load(Ordering::Relaxed) && job_tx.send((seq - 1, job)).is_ok()
                }
                Item::Note(note) => notes.send(Item::Note(note)).is_ok(),
            });
        });
        for threads in threads {
            let (job_rx, done_tx) = (Arc::clone(&job_rx), done_tx.clone());
            scope.spawn(move || {
                // One worker of several computes in a pool of its share of the threads; a lone
                // worker as the caller would.
                let pool = (workers > 1).then(|| {
                    rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a rayon pool")
                });
                loop {
                    let job = job_rx.lock().expect("no worker panics holding the lock").recv();
                    let Ok((seq, job)) = job else { break };
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let result = match &pool {
                        Some(pool) => pool.install(|| compute(job)),
                        None => compute(job),
                    };
                    if done_tx.send(Item::Job((seq, result))).is_err() {
                        break;
                    }
                }
            });
        }
        drop((job_rx, done_tx));
        // Jobs finish out of order on several workers: each waits here for those before it.
        let mut waiting = std::collections::BTreeMap::new();
        let mut next = 0;
        for item in done_rx {
            culturelens_metrics::cancel::checkpoint();
            match item {
                Item::Note(note) => consume(Item::Note(note))?,
                Item::Job((seq, result)) => {
                    waiting.insert(seq, result);
                    while let Some(result) = waiting.remove(&next) {
                        consume(Item::Job(result))?;
                        next += 1;
                    }
                }
            }
        }
        Ok(())
    })
}

/// The threads of each worker of [`in_workers`]: on the CPU backend in f32, one worker per rayon
/// thread, at most one per job, the threads shared out between them; else one worker (which
/// computes with the backend's own parallelism: its count is then not used).
fn worker_threads(encoder: &Encoder, jobs: usize) -> Vec<usize> {
    let cpu = matches!(encoder.device.as_dispatch(), burn::backend::DispatchDevice::Flex(_));
    let threads = rayon::current_num_threads();
    let workers = match cpu && encoder.dtype == burn::tensor::FloatDType::F32 {
        true => threads.min(jobs).max(1),
        false => 1,
    };
    (0..workers).map(|w| threads / workers + usize::from(w < threads % workers)).collect()
}

/// The producer's batch in the making: up to `size` images of one pixel size.
struct Pending {
    size: usize,
    rows: Vec<usize>,
    pixels: Vec<PixelValues>,
}

impl Pending {
    /// Adds the decoded image of `row`; returns the batches it finishes: the pending one when
    /// `pixels` has another size, and the one it fills.
    fn push(&mut self, row: usize, pixels: PixelValues) -> Vec<Batch> {
        let mut done = Vec::new();
        let same_size =
            self.pixels.first().is_none_or(|q| (q.height, q.width) == (pixels.height, pixels.width));
        if !same_size {
            done.extend(self.take());
        }
        self.rows.push(row);
        self.pixels.push(pixels);
        if self.rows.len() == self.size {
            done.extend(self.take());
        }
        done
    }

    /// The pending batch, if any.
    fn take(&mut self) -> Option<Batch> {
        (!self.rows.is_empty()).then(|| (std::mem::take(&mut self.rows), std::mem::take(&mut self.pixels)))
    }
}

/// Raises its flag when it is dropped, also while unwinding.
struct RaiseOnDrop<'a>(&'a AtomicBool);

impl Drop for RaiseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
