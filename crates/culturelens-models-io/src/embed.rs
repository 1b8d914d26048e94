//! The embedding loop of an [`Encoder`] over many inputs, shared by the CLI's commands that embed
//! (`embed`, `embed-text`, `classify`, `clipscore`, `quality`) and the Python package's
//! `Encoder.embed_images` / `embed_texts`: images decoded and preprocessed on all cores one batch
//! ahead of the model, in batches of one pixel size, and prompts in batches of token ids.

use std::path::PathBuf;

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
/// changes): a producer thread turns the next batch's rows into `pixel_values` with `decode`
/// (on all cores, through rayon) while this thread embeds the current one. Each finished
/// batch's `(row, embedding)` pairs go to `sink`; `progress` counts the rows done (embedded or
/// failed). Returns the rows `decode` refused, with its error.
pub fn embed_rows<E: From<LoadError>>(
    encoder: &Encoder,
    todo: &[usize],
    size: usize,
    decode: impl Fn(usize) -> Result<PixelValues, String> + Sync,
    progress: impl FnMut(usize),
    sink: impl FnMut(Vec<(usize, Vec<f32>)>) -> Result<(), E>,
) -> Result<Vec<(usize, String)>, E> {
    assert!(size > 0, "a batch holds at least one image");
    let mut batches = Batches { encoder, size, pending: Vec::new(), progress, sink };
    let mut failures = Vec::new();
    std::thread::scope(|scope| -> Result<(), E> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(usize, Result<PixelValues, String>)>>(2);
        let decode = &decode;
        scope.spawn(move || {
            for batch in todo.chunks(size) {
                let decoded: Vec<_> = batch.par_iter().map(|&row| (row, decode(row))).collect();
                if tx.send(decoded).is_err() {
                    break; // the consumer stopped on an error
                }
            }
        });
        for decoded in rx {
            for (row, result) in decoded {
                match result {
                    Ok(pixels) => batches.push(row, pixels)?,
                    Err(e) => {
                        (batches.progress)(1);
                        failures.push((row, e));
                    }
                }
            }
        }
        Ok(())
    })?;
    batches.flush()?;
    Ok(failures)
}

/// The text embeddings of token ids ([`Encoder::tokenize`]), `batch` rows per forward pass, in
/// order; `progress` counts the rows.
pub fn embed_token_ids(
    encoder: &Encoder,
    ids: &[Vec<u32>],
    batch: usize,
    mut progress: impl FnMut(usize),
) -> Result<Vec<Vec<f32>>, LoadError> {
    assert!(batch > 0, "a batch holds at least one prompt");
    let mut rows = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(batch) {
        culturelens_metrics::cancel::checkpoint();
        rows.extend(encoder.embed_ids(chunk)?);
        progress(chunk.len());
    }
    Ok(rows)
}

/// Decoded images on their way through the model: batches of up to `size` images of one pixel
/// size; each finished batch goes to `sink`.
struct Batches<'a, P, S> {
    encoder: &'a Encoder,
    size: usize,
    pending: Vec<(usize, PixelValues)>,
    progress: P,
    sink: S,
}

impl<E, P: FnMut(usize), S: FnMut(Vec<(usize, Vec<f32>)>) -> Result<(), E>> Batches<'_, P, S> {
    /// Adds the decoded image of `row`; embeds the batch when it is full (or before an image of
    /// another pixel size joins it).
    fn push(&mut self, row: usize, pixels: PixelValues) -> Result<(), E> {
        let same_size =
            self.pending.first().is_none_or(|(_, q)| (q.height, q.width) == (pixels.height, pixels.width));
        if !same_size {
            self.flush()?;
        }
        self.pending.push((row, pixels));
        if self.pending.len() == self.size {
            self.flush()?;
        }
        Ok(())
    }

    /// Embeds the pending images and hands their rows to the sink.
    fn flush(&mut self) -> Result<(), E> {
        if self.pending.is_empty() {
            return Ok(());
        }
        culturelens_metrics::cancel::checkpoint();
        let pixels: Vec<PixelValues> = self.pending.iter().map(|(_, p)| p.clone()).collect();
        let embeddings = self.encoder.embed_pixels(&pixels);
        assert_eq!(embeddings.len(), self.pending.len(), "one embedding per image");
        let n = self.pending.len();
        let rows = self.pending.drain(..).map(|(row, _)| row).zip(embeddings).collect();
        (self.sink)(rows)?;
        (self.progress)(n);
        Ok(())
    }
}
