//! JPEG decoding with libjpeg-turbo's decoder, set up as Pillow sets it up, so that `embed`
//! sees the pixels transformers and open_clip see.
//!
//! Pillow decodes JPEG with libjpeg-turbo: the accurate integer IDCT (`JDCT_ISLOW`, the
//! library default) and fancy (triangle-filter) chroma upsampling. The `mozjpeg` crate builds
//! mozjpeg — a libjpeg-turbo fork whose decoder is libjpeg-turbo's — from its bundled C sources
//! with the C compiler (no nasm, no cmake: without SIMD, whose integer IDCT, upsampling and
//! colour conversion give the same bytes as the C code), and the same two settings are made
//! here explicitly. `tests/jpeg.rs` checks the pixels against Pillow's on committed files.
//!
//! Pillow's modes are followed: a greyscale JPEG opens as `L` (then replicated into RGB), a
//! YCbCr or RGB one as `RGB`, a CMYK or YCCK one as `CMYK` with Adobe's inverted values
//! (`CMYK;I`), converted with Pillow's `cmyk2rgb`. (open_clip resizes a CMYK image before it
//! converts it; that order is not reproduced: CMYK photos are rare and get the conversion first.)
//! EXIF orientation is not applied, as transformers' processors do not apply it to the images
//! they are given.
//!
//! Damaged files: Pillow feeds libjpeg through a suspending source, so a file that ends before
//! the decoder has read its last scanline is refused ("image file is truncated"); libjpeg's
//! warnings about corrupt data (`JWRN_HIT_MARKER`, `JWRN_HUFF_BAD_CODE`, `JWRN_EXTRANEOUS_DATA`,
//! …) it ignores, decoding what it can, and only libjpeg's fatal errors fail. The `mozjpeg`
//! crate's memory source instead ends a short file with a fake end-of-image marker after the
//! warning `JWRN_JPEG_EOF`, so that warning, raised before the last scanline is read, is the
//! truncation Pillow refuses, and is refused here by the same name. A missing end-of-image
//! marker after the last scanline is not (Pillow does not read it either).
//!
//! Only the native build links this C code; the browser (wasm32) decodes JPEG with the pure-Rust
//! port of the same decoder, [`crate::jpeg_rs`].

use std::cell::Cell;
use std::os::raw::c_int;

use image::error::{DecodingError, ImageFormatHint};
use image::{DynamicImage, GrayImage, ImageError, ImageFormat, RgbImage};
use mozjpeg::{ColorSpace, DctMethod, Decompress};
use mozjpeg_sys::{JERR_FILE_READ, JWRN_JPEG_EOF, jpeg_common_struct, jpeg_error_mgr, jpeg_std_error};

use culturelens_models::preprocess::{TRUNCATED, truncated};

thread_local! {
    /// Whether libjpeg, decoding on this thread, ran out of data (`JWRN_JPEG_EOF`): one decode
    /// runs on one thread from start to end.
    static RAN_OUT: Cell<bool> = const { Cell::new(false) };
}

use crate::jpeg_rs::adobe_cmyk_to_rgb;
pub use crate::jpeg_rs::is_jpeg;

/// Decodes a JPEG to the pixels Pillow gives (`L` or `RGB`; CMYK converted as Pillow's
/// `convert("RGB")` does).
/// A file that ends before its last scanline is refused as [`TRUNCATED`], as Pillow refuses it.
pub fn decode(bytes: &[u8]) -> Result<DynamicImage, ImageError> {
    RAN_OUT.with(|r| r.set(false));
    // libjpeg reports a fatal error through `error_exit`, which [`unwind_error_exit`] turns into
    // an unwind carrying the message; catch it here and return it as a decoding error.
    let decoded = std::panic::catch_unwind(|| decode_unchecked(bytes)).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "libjpeg fatal error".to_owned());
        Err(std::io::Error::other(message))
    });
    // A fatal error after the data ran out (a bogus marker in the fake end) is the truncation.
    let ran_out = RAN_OUT.with(Cell::get);
    decoded.map_err(|e| match ran_out {
        true => truncated(),
        false => {
            ImageError::Decoding(DecodingError::new(ImageFormatHint::Exact(ImageFormat::Jpeg), e.to_string()))
        }
    })
}

/// libjpeg's standard error manager with two changes: a fatal error unwinds (caught by
/// [`decode`]) instead of exiting, and a warning is noted only when it says the data ran out.
fn error_manager() -> jpeg_error_mgr {
    // SAFETY: `jpeg_error_mgr` is a plain C struct that `jpeg_std_error` fills in completely.
    let mut err: jpeg_error_mgr = unsafe { std::mem::zeroed() };
    unsafe { jpeg_std_error(&mut err) };
    err.error_exit = Some(unwind_error_exit);
    err.emit_message = Some(note_running_out);
    err
}

/// libjpeg's `emit_message`: level −1 is a warning; `JWRN_JPEG_EOF` is the source running out.
extern "C-unwind" fn note_running_out(cinfo: &mut jpeg_common_struct, level: c_int) {
    // SAFETY: libjpeg calls this with the decompressor whose `err` is our error manager.
    let code = unsafe { (*cinfo.err).msg_code };
    if level < 0 && code == JWRN_JPEG_EOF as c_int {
        RAN_OUT.with(|r| r.set(true));
    }
}

/// libjpeg's `error_exit`: unwinds with the formatted message (never returns to the C code). The
/// memory source failing to skip past the end of the data (`JERR_FILE_READ`: a marker whose length
/// runs past it) is the data running out too, where Pillow's source would suspend.
extern "C-unwind" fn unwind_error_exit(cinfo: &mut jpeg_common_struct) {
    // SAFETY: libjpeg calls this with the decompressor whose `err` is our error manager.
    if unsafe { (*cinfo.err).msg_code } == JERR_FILE_READ as c_int {
        RAN_OUT.with(|r| r.set(true));
    }
    let mut buffer = [0u8; 80];
    // SAFETY: `format_message` writes at most 80 bytes (JMSG_LENGTH_MAX), NUL-terminated, into
    // the buffer; the binding declares it `&[u8; 80]`, so it is passed as the pointer it is.
    unsafe {
        if let Some(format) = (*cinfo.err).format_message {
            let format: unsafe extern "C-unwind" fn(&mut jpeg_common_struct, *mut u8) =
                std::mem::transmute(format);
            format(cinfo, buffer.as_mut_ptr());
        }
    }
    let text = buffer.split(|&c| c == 0).next().unwrap_or_default();
    std::panic::resume_unwind(Box::new(format!("libjpeg fatal error: {}", String::from_utf8_lossy(text))));
}

/// An error when libjpeg ran out of data before the last scanline (checked after reading them).
fn whole() -> std::io::Result<()> {
    if RAN_OUT.with(Cell::get) { Err(std::io::Error::other(TRUNCATED)) } else { Ok(()) }
}

/// `jpeg_finish_decompress` after the last scanline, which reads on to the end-of-image marker:
/// running out of data there is no error (Pillow stops once it has every scanline), any other
/// fatal error is.
fn finish<R>(started: mozjpeg::decompress::DecompressStarted<R>) -> std::io::Result<()> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| started.finish())) {
        Ok(done) => done,
        Err(_) if RAN_OUT.with(Cell::get) => Ok(()),
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

fn decode_unchecked(bytes: &[u8]) -> std::io::Result<DynamicImage> {
    let mut decompress = Decompress::with_err(error_manager()).from_mem(bytes)?;
    decompress.dct_method(DctMethod::IntegerSlow);
    decompress.do_fancy_upsampling(true);
    let (width, height) = (decompress.width() as u32, decompress.height() as u32);
    let too_large = || std::io::Error::other("pixel buffer does not match the image size");
    Ok(match decompress.color_space() {
        ColorSpace::JCS_GRAYSCALE => {
            let mut started = decompress.grayscale()?;
            let pixels = started.read_scanlines::<u8>()?;
            whole()?;
            finish(started)?;
            DynamicImage::ImageLuma8(GrayImage::from_raw(width, height, pixels).ok_or_else(too_large)?)
        }
        ColorSpace::JCS_CMYK | ColorSpace::JCS_YCCK => {
            let mut started = decompress.to_colorspace(ColorSpace::JCS_CMYK)?;
            let pixels = started.read_scanlines::<u8>()?;
            whole()?;
            finish(started)?;
            let rgb =
                pixels.chunks_exact(4).flat_map(|p| adobe_cmyk_to_rgb([p[0], p[1], p[2], p[3]])).collect();
            DynamicImage::ImageRgb8(RgbImage::from_raw(width, height, rgb).ok_or_else(too_large)?)
        }
        _ => {
            let mut started = decompress.rgb()?;
            let pixels = started.read_scanlines::<u8>()?;
            whole()?;
            finish(started)?;
            DynamicImage::ImageRgb8(RgbImage::from_raw(width, height, pixels).ok_or_else(too_large)?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_a_decoding_error_not_a_panic() {
        let err = decode(b"\xFF\xD8\xFFnot really a jpeg").unwrap_err().to_string();
        assert!(err.to_lowercase().contains("jpeg"), "{err}");
        assert!(is_jpeg(b"\xFF\xD8\xFF\xE0") && !is_jpeg(b"\x89PNG"));
    }
}
