//! `culturelens.Encoder`: an image/text encoder of a weights folder (`culturelens embed
//! --weights DIR`), embedding with the CLI's own loop (`culturelens_models_io::embed`): image
//! files read and decoded as `embed` reads them (libjpeg-turbo for JPEG, Pillow's pixels), in
//! batches of one pixel size, and prompts tokenized and embedded as `embed-text` does. Decoded
//! RGB(A) pixels (the Python half's PIL images and arrays) skip the file decoder and go through
//! the same preprocessing and batches. Errors carry the CLI's messages (`error: ...`, without the
//! prefix). The CPU backend only: this wheel is built without Burn's GPU backends.

use std::path::PathBuf;
use std::sync::Arc;

use culturelens_models::preprocess::{Decoded, PixelValues};
use culturelens_models_io::{Encoder as Model, embed};
use image::{DynamicImage, RgbImage, RgbaImage};
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray3, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::interruptible;

/// A loaded encoder; shared with the computation threads, which run without the GIL.
#[pyclass(module = "culturelens._native", frozen)]
pub struct Encoder {
    model: Arc<Model>,
}

/// `err` as the CLI prints it (`culturelens_files::error_line`: the error and its causes joined
/// by ": ", a repeated cause once).
pub(crate) fn cli_error(err: impl Into<anyhow::Error>) -> PyErr {
    PyValueError::new_err(culturelens_files::error_line(err.into().as_ref()))
}

/// Row-major `rows` as an `n x d` float32 array.
fn array(py: Python<'_>, rows: Vec<Vec<f32>>) -> PyResult<Bound<'_, PyArray2<f32>>> {
    let (n, d) = (rows.len(), rows.first().map_or(0, Vec::len));
    let flat: Vec<f32> = rows.into_iter().flatten().collect();
    PyArray1::from_vec(py, flat).reshape([n, d])
}

/// The CLI's refusal of images that failed (`embed` without `--skip-bad`): how many, then each
/// error, which names its file or index.
fn failed(failures: &[String]) -> PyErr {
    let mut message = format!("{} image(s) could not be embedded:", failures.len());
    for e in failures {
        message.push_str("\n  ");
        message.push_str(e);
    }
    PyValueError::new_err(message)
}

#[pymethods]
impl Encoder {
    /// Loads the encoder of the weights folder `folder` (`culturelens embed --weights`), or of
    /// the hub snapshot of the id `folder` (`--model`), onto `device` in `precision`.
    #[staticmethod]
    #[pyo3(signature = (folder, device = "cpu", precision = "f32"))]
    fn from_pretrained(py: Python<'_>, folder: PathBuf, device: &str, precision: &str) -> PyResult<Self> {
        let device = crate::device::select(device, precision, "embed").map_err(cli_error)?;
        let model = interruptible(py, move || {
            let folder = folder_or_hub(folder, culturelens_models_io::hub::snapshot)?;
            Model::from_dir(&folder, &device).map_err(cli_error)
        })?;
        Ok(Self { model: Arc::new(model) })
    }

    /// The model family (`clip`, `siglip`, ...) as the CLI names it when loading.
    #[getter]
    fn family(&self) -> &'static str {
        self.model.model.family()
    }

    /// Embeds the image files `paths` (`culturelens embed`), `batch` per forward pass; an
    /// `n x d` float32 array in the order of `paths`.
    #[pyo3(signature = (paths, batch = 16))]
    fn embed_image_files<'py>(
        &self,
        py: Python<'py>,
        paths: Vec<PathBuf>,
        batch: usize,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        check_batch(batch, paths.len(), "images")?;
        let model = Arc::clone(&self.model);
        let rows = interruptible(py, move || {
            let todo: Vec<usize> = (0..paths.len()).collect();
            let mut done = vec![Vec::new(); paths.len()];
            let failures = embed::embed_image_files(
                &model,
                &paths,
                &todo,
                batch,
                |_| {},
                |rows| {
                    rows.into_iter().for_each(|(row, values)| done[row] = values);
                    Ok::<_, anyhow::Error>(())
                },
            )
            .map_err(cli_error)?;
            if !failures.is_empty() {
                return Err(failed(&failures.into_iter().map(|(_, e)| e).collect::<Vec<_>>()));
            }
            Ok(done)
        })?;
        array(py, rows)
    }

    /// Embeds decoded images, each a C-contiguous `height x width x 3` (RGB) or `x 4` (RGBA)
    /// uint8 array of pixels with whether it was a palette or bilevel image (which the
    /// preprocessing resamples with nearest neighbour, as Pillow does), `batch` per forward pass;
    /// an `n x d` float32 array.
    #[pyo3(signature = (images, batch = 16))]
    fn embed_pixels<'py>(
        &self,
        py: Python<'py>,
        images: Vec<(PyReadonlyArray3<'py, u8>, bool)>,
        batch: usize,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        check_batch(batch, images.len(), "images")?;
        let mut decoded = Vec::with_capacity(images.len());
        for (i, (pixels, palette_or_bilevel)) in images.iter().enumerate() {
            let bad = |why: String| PyValueError::new_err(format!("images[{i}]: {why}"));
            let &[height, width, channels] = pixels.shape() else { unreachable!("a 3-D array") };
            if !matches!(channels, 3 | 4) || height == 0 || width == 0 {
                return Err(bad(format!(
                    "{height} x {width} x {channels} pixels, expected height x width x 3 (RGB) or 4 (RGBA) with at least one pixel"
                )));
            }
            let bytes =
                pixels.as_slice().map_err(|_| bad("the pixels must be C-contiguous".into()))?.to_vec();
            let (Ok(w), Ok(h)) = (u32::try_from(width), u32::try_from(height)) else {
                return Err(bad(format!("{height} x {width} pixels is too large")));
            };
            let image = if channels == 3 {
                DynamicImage::ImageRgb8(RgbImage::from_raw(w, h, bytes).expect("height * width * 3 bytes"))
            } else {
                DynamicImage::ImageRgba8(RgbaImage::from_raw(w, h, bytes).expect("height * width * 4 bytes"))
            };
            decoded.push(Decoded { image, palette_or_bilevel: *palette_or_bilevel });
        }
        let model = Arc::clone(&self.model);
        let rows = interruptible(py, move || {
            let processor = model.processor().map_err(cli_error)?;
            let decode = |row: usize| -> Result<PixelValues, String> {
                Ok(processor.pixel_values_decoded(&decoded[row]))
            };
            let todo: Vec<usize> = (0..decoded.len()).collect();
            let mut done = vec![Vec::new(); decoded.len()];
            embed::embed_rows(
                &model,
                &todo,
                batch,
                decode,
                |_| {},
                |rows| {
                    rows.into_iter().for_each(|(row, values)| done[row] = values);
                    Ok::<_, anyhow::Error>(())
                },
            )
            .map_err(cli_error)?;
            Ok(done)
        })?;
        array(py, rows)
    }

    /// Embeds `texts` with the text tower (`culturelens embed-text`), `batch` per forward pass;
    /// an `n x d` float32 array in the order of `texts`.
    #[pyo3(signature = (texts, batch = 64))]
    fn embed_texts<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<String>,
        batch: usize,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        check_batch(batch, texts.len(), "texts")?;
        let model = Arc::clone(&self.model);
        let rows = interruptible(py, move || {
            let ids = model.tokenize(&texts).map_err(cli_error)?;
            embed::embed_token_ids(&model, &ids, batch, |_| {}).map_err(cli_error)
        })?;
        array(py, rows)
    }
}

/// The folder of a `from_pretrained`: `folder` itself, or, where no such path exists and it reads
/// as a hub id `ORG/NAME[@REVISION]` (no leading `/`, `.` or `~`, one `/`), the local snapshot
/// that `fetch` (`culturelens_models_io::hub`, the CLI's `--model`) finds in the hub cache or
/// downloads.
pub(crate) fn folder_or_hub(
    folder: PathBuf,
    fetch: impl FnOnce(&str) -> anyhow::Result<PathBuf>,
) -> PyResult<PathBuf> {
    let id = match folder.to_str() {
        Some(s) if !folder.exists() && !s.starts_with(['/', '.', '~']) => s,
        _ => return Ok(folder),
    };
    let repo = id.split_once('@').map_or(id, |(repo, _)| repo);
    if repo.split('/').count() != 2 || repo.split('/').any(str::is_empty) {
        return Ok(folder);
    }
    fetch(id).map_err(cli_error)
}

/// `batch` must be at least 1 (the CLI's `--batch` rule) and there must be something to embed.
fn check_batch(batch: usize, n: usize, what: &str) -> PyResult<()> {
    if batch == 0 {
        return Err(PyValueError::new_err("batch must be at least 1"));
    }
    if n == 0 {
        return Err(PyValueError::new_err(format!("{what}: nothing to embed")));
    }
    Ok(())
}
