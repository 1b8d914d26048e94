//! JPEG decoding without C: `libjpeg-turbo-rs`, a Rust rewrite of libjpeg-turbo's decoder, set
//! up as Pillow sets libjpeg-turbo up (the accurate integer IDCT `JDCT_ISLOW`, fancy
//! triangle-filter chroma upsampling, inter-block smoothing of progressive scans: the library
//! defaults). This is the JPEG path of builds without the crate feature `native` — the browser's
//! wasm32, where libjpeg-turbo's C sources cannot be built — and `tests/jpeg.rs` checks that it
//! gives the same bytes as the native path (`jpeg.rs`, libjpeg-turbo's C decoder through
//! the `mozjpeg` crate) and as Pillow.
//!
//! Pillow's modes are followed as in `jpeg.rs`: a greyscale JPEG opens as `L`, a YCbCr or
//! RGB one as `RGB`, a CMYK or YCCK one as `CMYK` with Adobe's inverted values, converted with
//! Pillow's `cmyk2rgb` ([`adobe_cmyk_to_rgb`], shared by both paths).

use image::error::{DecodingError, ImageFormatHint};
use image::{DynamicImage, GrayImage, ImageError, ImageFormat, RgbImage};
use libjpeg_turbo_rs::{ColorSpace, DctMethod, Decoder, PixelFormat};

/// Whether `bytes` start with a JPEG SOI marker followed by another marker.
pub fn is_jpeg(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0xFF, 0xD8, 0xFF])
}

/// Decodes a JPEG to the pixels Pillow gives (`L` or `RGB`; CMYK converted as Pillow's
/// `convert("RGB")` does).
pub fn decode(bytes: &[u8]) -> Result<DynamicImage, ImageError> {
    let failed = |message: String| {
        ImageError::Decoding(DecodingError::new(ImageFormatHint::Exact(ImageFormat::Jpeg), message))
    };
    let mut decoder = Decoder::new(bytes).map_err(|e| failed(e.to_string()))?;
    decoder.set_dct_method(DctMethod::IsLow);
    decoder.set_fast_upsample(false);
    decoder.set_block_smoothing(true);
    let space = decoder.jpeg_color_space();
    let format = match space {
        ColorSpace::Grayscale => PixelFormat::Grayscale,
        ColorSpace::Cmyk | ColorSpace::Ycck => PixelFormat::Cmyk,
        _ => PixelFormat::Rgb,
    };
    decoder.set_output_format(format);
    let image = decoder.decode_image().map_err(|e| failed(e.to_string()))?;
    let (width, height) = (image.width as u32, image.height as u32);
    let size = || failed("pixel buffer does not match the image size".into());
    Ok(match format {
        PixelFormat::Grayscale => {
            DynamicImage::ImageLuma8(GrayImage::from_raw(width, height, image.data).ok_or_else(size)?)
        }
        PixelFormat::Cmyk => {
            let rgb = image
                .data
                .chunks_exact(4)
                .flat_map(|p| adobe_cmyk_to_rgb([p[0], p[1], p[2], p[3]]))
                .collect();
            DynamicImage::ImageRgb8(RgbImage::from_raw(width, height, rgb).ok_or_else(size)?)
        }
        _ => DynamicImage::ImageRgb8(RgbImage::from_raw(width, height, image.data).ok_or_else(size)?),
    })
}

/// One pixel as Pillow reads it (`CMYK;I`: the stored Adobe values inverted) and converts it
/// (`cmyk2rgb`: `255 - k' - c' · (255 - k') / 255` per channel, with Pillow's rounded
/// `MULDIV255`, for the inverted `c'`, `k'`).
pub(crate) fn adobe_cmyk_to_rgb(stored: [u8; 4]) -> [u8; 3] {
    let [c, m, y, k] = stored.map(|v| 255 - u32::from(v));
    let nk = 255 - k;
    let channel = |v: u32| {
        let t = v * nk + 128;
        (nk - (((t >> 8) + t) >> 8)) as u8
    };
    [channel(c), channel(m), channel(y)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmyk_conversion_hand_values() {
        // Stored (Adobe, inverted) 255 is ink 0: white without black.
        assert_eq!(adobe_cmyk_to_rgb([255, 255, 255, 255]), [255, 255, 255]);
        // Full black ink (stored 0) gives black whatever the colour.
        assert_eq!(adobe_cmyk_to_rgb([0, 128, 255, 0]), [0, 0, 0]);
        // Cyan 100 % (stored 0), no black: R = 255 - 255·255/255 = 0, G = B = 255.
        assert_eq!(adobe_cmyk_to_rgb([0, 255, 255, 255]), [0, 255, 255]);
        // Ink 100 (stored 155), black 55 (stored 200): nk = 200, 200 - round(100·200/255) = 122.
        assert_eq!(adobe_cmyk_to_rgb([155, 155, 155, 200]), [122, 122, 122]);
    }

    #[test]
    fn garbage_is_a_decoding_error_not_a_panic() {
        let err = decode(b"\xFF\xD8\xFFnot really a jpeg").unwrap_err().to_string();
        assert!(err.to_lowercase().contains("jpeg") || !err.is_empty(), "{err}");
        assert!(is_jpeg(b"\xFF\xD8\xFF\xE0") && !is_jpeg(b"\x89PNG"));
    }
}
