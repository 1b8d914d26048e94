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
//! they are given. Only the native build links this C code; the browser (wasm32) decodes JPEG
//! with the pure-Rust port of the same decoder, [`crate::jpeg_rs`].

use image::error::{DecodingError, ImageFormatHint};
use image::{DynamicImage, GrayImage, ImageError, ImageFormat, RgbImage};
use mozjpeg::{ColorSpace, DctMethod, Decompress};

use crate::jpeg_rs::adobe_cmyk_to_rgb;
pub use crate::jpeg_rs::is_jpeg;

/// Decodes a JPEG to the pixels Pillow gives (`L` or `RGB`; CMYK converted as Pillow's
/// `convert("RGB")` does).
pub fn decode(bytes: &[u8]) -> Result<DynamicImage, ImageError> {
    // libjpeg reports a fatal error through `error_exit`, which the mozjpeg crate turns into an
    // unwind carrying the message; catch it here and return it as a decoding error.
    let decoded = std::panic::catch_unwind(|| decode_unchecked(bytes)).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "libjpeg fatal error".to_owned());
        Err(std::io::Error::other(message))
    });
    decoded.map_err(|e| {
        ImageError::Decoding(DecodingError::new(ImageFormatHint::Exact(ImageFormat::Jpeg), e.to_string()))
    })
}

fn decode_unchecked(bytes: &[u8]) -> std::io::Result<DynamicImage> {
    let mut decompress = Decompress::new_mem(bytes)?;
    decompress.dct_method(DctMethod::IntegerSlow);
    decompress.do_fancy_upsampling(true);
    let (width, height) = (decompress.width() as u32, decompress.height() as u32);
    let too_large = || std::io::Error::other("pixel buffer does not match the image size");
    Ok(match decompress.color_space() {
        ColorSpace::JCS_GRAYSCALE => {
            let mut started = decompress.grayscale()?;
            let pixels = started.read_scanlines::<u8>()?;
            started.finish()?;
            DynamicImage::ImageLuma8(GrayImage::from_raw(width, height, pixels).ok_or_else(too_large)?)
        }
        ColorSpace::JCS_CMYK | ColorSpace::JCS_YCCK => {
            let mut started = decompress.to_colorspace(ColorSpace::JCS_CMYK)?;
            let pixels = started.read_scanlines::<u8>()?;
            started.finish()?;
            let rgb =
                pixels.chunks_exact(4).flat_map(|p| adobe_cmyk_to_rgb([p[0], p[1], p[2], p[3]])).collect();
            DynamicImage::ImageRgb8(RgbImage::from_raw(width, height, rgb).ok_or_else(too_large)?)
        }
        _ => {
            let mut started = decompress.rgb()?;
            let pixels = started.read_scanlines::<u8>()?;
            started.finish()?;
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
