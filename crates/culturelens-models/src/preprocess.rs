//! Image preprocessing identical to the transformers image processors (PIL backend), driven by
//! `preprocessor_config.json`: convert to RGB (alpha composited onto white), resize with
//! Pillow's filter, centre crop, rescale and normalise, giving `pixel_values` in CHW order.
//!
//! [`decode`] uses the `image` crate: PNG and lossless WebP decode to the same pixels as Pillow;
//! its JPEG decoder (`zune-jpeg`) differs from Pillow's libjpeg-turbo by a few grey levels, so
//! the native reader decodes JPEG itself and hands in the [`Decoded`] image. EXIF orientation is
//! not applied, as transformers' processors do not apply it to the images they are given.

use image::{DynamicImage, ImageReader};
use serde::{Deserialize, Serialize};

use super::config;
use super::resample::{PilFilter, pil_resize_nearest_u8, pil_resize_u8, torch_bicubic_aa_matrix};

/// Why an image could not be turned into `pixel_values`.
#[derive(Debug, thiserror::Error)]
pub enum PreprocessError {
    #[error("cannot decode image: {0}")]
    Decode(#[from] image::ImageError),
    #[error("unsupported preprocessor_config.json: {0}")]
    Config(String),
}

/// A `size`/`crop_size` entry: an integer (old configs) or a dict.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SizeSpec {
    Square(u32),
    Dict { shortest_edge: Option<u32>, height: Option<u32>, width: Option<u32> },
}

/// `preprocessor_config.json` of a CLIP, SigLIP or DINOv2 (Bit) image processor.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ImageProcessorConfig {
    pub image_processor_type: Option<String>,
    pub do_convert_rgb: bool,
    pub do_resize: bool,
    pub size: Option<SizeSpec>,
    pub resample: u8,
    pub do_center_crop: bool,
    pub crop_size: Option<SizeSpec>,
    pub do_rescale: bool,
    pub rescale_factor: f64,
    pub do_normalize: bool,
    pub image_mean: Option<[f32; 3]>,
    pub image_std: Option<[f32; 3]>,
}

impl Default for ImageProcessorConfig {
    /// transformers' `BaseImageProcessor` defaults: the values of every key a file leaves
    /// out. `size`, `crop_size`, `image_mean` and `image_std` have no default here (the
    /// processor classes differ); a pipeline that needs one refuses a file without it.
    fn default() -> Self {
        Self {
            image_processor_type: None,
            do_convert_rgb: true,
            do_resize: true,
            size: None,
            resample: 2, // PILImageResampling.BILINEAR
            do_center_crop: false,
            crop_size: None,
            do_rescale: true,
            rescale_factor: 1.0 / 255.0,
            do_normalize: true,
            image_mean: None,
            image_std: None,
        }
    }
}

/// How the short side or both sides are resized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resize {
    /// Scale so the shorter side is this long (`get_resize_output_image_size`).
    ShortestEdge(u32),
    /// Resize to exactly `(height, width)`.
    Exact { height: u32, width: u32 },
    /// hpsv2's evaluation transform (`image_transform(resize_longest_max=True)` of its vendored
    /// open_clip, `ResizeMaxSize`), which works on float pixels: `ToTensor` first, then the
    /// longer side scaled to this size (each side `round(side · size / longer)`, half to even)
    /// by torch's bicubic interpolation with `antialias=True` on the float values (Pillow's
    /// coefficients, no rounding to 8 bits, no clamping), then zero padding to a square
    /// (`pad // 2` before, the rest after), then `Normalize`. The configured crop is not used.
    /// `antialias=True` is torchvision's default since 0.17 (checked with 0.29.2); hpsv2 under
    /// an older torchvision resized tensors without antialiasing and scored differently.
    /// An image whose longer side already has this size is not resized (hpsv2 then does not pad
    /// either, and its model fails on a non-square image; here it is padded). Alpha is dropped
    /// (`convert("RGB")`); hpsv2 keeps the alpha of an `RGBA` image as a fourth channel and its
    /// model fails on it.
    LongestPadFloat(u32),
}

/// What happens to an alpha channel when an image is converted to RGB.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Alpha {
    /// Composite onto white, exactly as Pillow does (transformers' `convert_rgb`).
    #[default]
    OverWhite,
    /// Resize the image in the mode Pillow opened it in, then `convert("RGB")`, dropping alpha
    /// (OpenCLIP's transform). So RGBA/LA images are resized premultiplied (`RGBa`), and palette
    /// (`P`) and bilevel (`1`) PNGs with nearest neighbour, as Pillow's `Image.resize` does.
    Drop,
}

/// How a centre crop places its window when the margin is odd.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CropOffset {
    /// transformers: `top = (H - h) // 2`; a larger crop pads, the image `ceil((h - H) / 2)` down.
    #[default]
    Floor,
    /// torchvision's `CenterCrop`: `top = int(round((H - h) / 2))` with Python's round half to
    /// even; a larger crop pads, the image `(h - H) // 2` down.
    RoundHalfEven,
}

/// A resolved preprocessing pipeline.
#[derive(Clone, Debug)]
pub struct ImageProcessor {
    pub convert_rgb: bool,
    pub alpha: Alpha,
    pub crop_offset: CropOffset,
    pub resize: Option<(Resize, PilFilter)>,
    pub crop: Option<(u32, u32)>,
    pub rescale: Option<f64>,
    pub normalize: Option<([f32; 3], [f32; 3])>,
}

impl ImageProcessorConfig {
    /// Reads `preprocessor_config.json` over [`Self::default`] (`null` is "not set").
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        config::from_json(json, &Self::default(), &[])
    }

    /// Resolves the config into a pipeline. An integer `size` means the shortest edge for
    /// `CLIPImageProcessor` and `BitImageProcessor` (`default_to_square=False`) and a square
    /// otherwise, as in transformers.
    pub fn processor(&self) -> Result<ImageProcessor, PreprocessError> {
        let kind = self.image_processor_type.as_deref().unwrap_or("");
        let shortest_by_default =
            kind.starts_with("CLIPImageProcessor") || kind.starts_with("BitImageProcessor");
        let resize = if self.do_resize {
            let size =
                self.size.as_ref().ok_or_else(|| PreprocessError::Config("do_resize without size".into()))?;
            let resize = match *size {
                SizeSpec::Square(n) if shortest_by_default => Resize::ShortestEdge(n),
                SizeSpec::Square(n) => Resize::Exact { height: n, width: n },
                SizeSpec::Dict { shortest_edge: Some(n), .. } => Resize::ShortestEdge(n),
                SizeSpec::Dict { height: Some(height), width: Some(width), .. } => {
                    Resize::Exact { height, width }
                }
                SizeSpec::Dict { .. } => {
                    return Err(PreprocessError::Config(format!(
                        "size {size:?} needs shortest_edge or height and width"
                    )));
                }
            };
            let filter = PilFilter::from_code(self.resample).ok_or_else(|| {
                PreprocessError::Config(format!(
                    "resample {} (only 1-5, Pillow's convolution filters)",
                    self.resample
                ))
            })?;
            Some((resize, filter))
        } else {
            None
        };
        let crop = if self.do_center_crop {
            match self.crop_size {
                Some(SizeSpec::Square(n)) => Some((n, n)),
                Some(SizeSpec::Dict { height: Some(h), width: Some(w), .. }) => Some((h, w)),
                ref other => {
                    return Err(PreprocessError::Config(format!(
                        "crop_size {other:?} needs height and width"
                    )));
                }
            }
        } else {
            None
        };
        let normalize = if self.do_normalize {
            match (self.image_mean, self.image_std) {
                (Some(m), Some(s)) => Some((m, s)),
                _ => {
                    return Err(PreprocessError::Config(
                        "do_normalize needs image_mean and image_std".into(),
                    ));
                }
            }
        } else {
            None
        };
        Ok(ImageProcessor {
            convert_rgb: self.do_convert_rgb,
            alpha: Alpha::OverWhite,
            crop_offset: CropOffset::Floor,
            resize,
            crop,
            rescale: self.do_rescale.then_some(self.rescale_factor),
            normalize,
        })
    }
}

/// One image's `pixel_values`: 3 × `height` × `width`, channel-major.
#[derive(Clone, Debug, PartialEq)]
pub struct PixelValues {
    pub height: usize,
    pub width: usize,
    pub data: Vec<f32>,
}

/// Interleaved RGB8 pixels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rgb8 {
    pub width: usize,
    pub height: usize,
    pub data: Vec<u8>,
}

/// A decoded image, with what of Pillow's image mode the preprocessing needs to know.
#[derive(Clone, Debug)]
pub struct Decoded {
    pub image: DynamicImage,
    /// Pillow opens the file as a palette (`P`) or bilevel (`1`) image, which its
    /// `Image.resize` samples with nearest neighbour whatever filter is asked for.
    pub palette_or_bilevel: bool,
}

/// Decodes PNG/JPEG/WebP bytes (format guessed from the content) with the `image` crate. PNG
/// and WebP pixels equal Pillow's; JPEG pixels do not quite (`zune-jpeg` is not libjpeg-turbo):
/// the native reader (`culturelens-models-io`) decodes JPEG with libjpeg-turbo's code instead.
///
/// A file that ends before its image does is refused as [`TRUNCATED`], in Pillow's words: the
/// decoder running out of data, or a WebP shorter than its RIFF header says (libwebp, and so
/// Pillow, refuses it even when the missing bytes are padding). A PNG cut within its last bytes
/// (the end of the compressed stream, the last chunk's CRC, `IEND`), which Pillow still loads, is
/// refused too.
pub fn decode(bytes: &[u8]) -> Result<Decoded, PreprocessError> {
    if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        let declared = u32::from_le_bytes(bytes[4..8].try_into().expect("four bytes")) as usize;
        if bytes.len() < declared.saturating_add(8) {
            return Err(truncated().into());
        }
    }
    let image = ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(image::ImageError::IoError)?
        .decode()
        .map_err(|e| match e {
            image::ImageError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => truncated(),
            e => e,
        })?;
    Ok(Decoded { image, palette_or_bilevel: pillow_opens_as_palette_or_bilevel(bytes) })
}

/// The error of a file that ends before its image does, in Pillow's words.
pub const TRUNCATED: &str = "image file is truncated";

/// The [`TRUNCATED`] error, as every decoder here reports it (an unexpected end of file).
pub fn truncated() -> image::ImageError {
    image::ImageError::IoError(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, TRUNCATED))
}

/// Pillow's `convert("RGB")`, compositing images with alpha onto white first
/// (`convert_to_rgb` of transformers, `ImagingAlphaComposite` arithmetic).
pub fn to_rgb8(image: &DynamicImage, alpha: Alpha) -> Rgb8 {
    let (width, height) = (image.width() as usize, image.height() as usize);
    let data = if image.color().has_alpha() && alpha == Alpha::OverWhite {
        image.to_rgba8().pixels().flat_map(|p| over_white(p.0)).collect()
    } else {
        image.to_rgb8().into_raw()
    };
    Rgb8 { width, height, data }
}

/// One pixel of `alpha_composite(white, src)` in Pillow's integer arithmetic.
fn over_white([r, g, b, a]: [u8; 4]) -> [u8; 3] {
    const BITS: u32 = 7;
    if a == 0 {
        return [255; 3];
    }
    let a = u32::from(a);
    let blend = 255 * (255 - a);
    let outa255 = a * 255 + blend;
    let coef1 = a * 255 * 255 * (1 << BITS) / outa255;
    let coef2 = 255 * (1 << BITS) - coef1;
    let channel = |c: u8| {
        let tmp = u32::from(c) * coef1 + 255 * coef2 + (0x80 << BITS);
        ((((tmp >> 8) + tmp) >> 8) >> BITS) as u8
    };
    [channel(r), channel(g), channel(b)]
}

/// Whether Pillow opens these bytes as a palette (`P`) or bilevel (`1`) image, which its
/// `Image.resize` samples with nearest neighbour whatever filter is asked for: PNGs of colour
/// type 3 (indexed), and 1-bit greyscale ones (read from the IHDR chunk).
fn pillow_opens_as_palette_or_bilevel(bytes: &[u8]) -> bool {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    if bytes.len() < 26 || !bytes.starts_with(SIGNATURE) || &bytes[12..16] != b"IHDR" {
        return false;
    }
    let (bit_depth, colour_type) = (bytes[24], bytes[25]);
    colour_type == 3 || (colour_type == 0 && bit_depth == 1)
}

/// Pillow's `RGBA` → `RGBa` channel: `c · a / 255` rounded (`MULDIV255`).
fn mul_div255(c: u8, a: u8) -> u8 {
    let t = u32::from(c) * u32::from(a) + 128;
    (((t >> 8) + t) >> 8) as u8
}

/// Pillow's `RGBa` → `RGBA`, keeping RGB: `255 · c / a` truncated and clipped, the colour kept
/// as is where `a` is 0 or 255.
fn unpremultiply([r, g, b, a]: [u8; 4]) -> [u8; 3] {
    if a == 0 || a == 255 {
        return [r, g, b];
    }
    let a = u32::from(a);
    [r, g, b].map(|c| (255 * u32::from(c) / a).min(255) as u8)
}

/// `round(n / 2)` with ties to even, as Python's `round`.
fn round_half_even_half(n: usize) -> usize {
    let (q, r) = (n / 2, n % 2);
    if r == 1 && q % 2 == 1 { q + 1 } else { q }
}

/// `(height, width)` after resizing the short side to `size`, the long side scaled and
/// truncated (`get_resize_output_image_size(default_to_square=False)`).
pub fn shortest_edge_size(height: usize, width: usize, size: u32) -> (usize, usize) {
    let size = size as usize;
    if width <= height { (size * height / width, size) } else { (size, size * width / height) }
}

/// `(height, width)` with the longer side scaled to `size`: each side `round(side · size /
/// longer)` in f64, half to even (Python's `round`, hpsv2's `ResizeMaxSize`).
pub fn longest_side_size(height: usize, width: usize, size: u32) -> (usize, usize) {
    let scale = f64::from(size) / height.max(width) as f64;
    let side = |n: usize| ((n as f64 * scale).round_ties_even() as usize).max(1);
    (side(height), side(width))
}

impl ImageProcessor {
    /// `pixel_values` of an RGB image.
    pub fn pixel_values_rgb(&self, rgb: &Rgb8) -> PixelValues {
        self.pixel_values_rgb_resampled(rgb, false)
    }

    /// [`Self::pixel_values_rgb`], resizing with nearest neighbour where `nearest`.
    fn pixel_values_rgb_resampled(&self, rgb: &Rgb8, nearest: bool) -> PixelValues {
        let (px, width, height) = self.resized::<3>(&rgb.data, rgb.width, rgb.height, nearest);
        self.crop_and_normalize(&px, width, height)
    }

    /// `pixel_values` of an image whose alpha channel is dropped after resizing, as OpenCLIP's
    /// transform does with Pillow: `Image.resize` resamples RGBA premultiplied (`RGBa`,
    /// rounded to 8 bits both ways), then `convert("RGB")` drops the alpha.
    fn pixel_values_rgba_drop(&self, image: &DynamicImage) -> PixelValues {
        let (width, height) = (image.width() as usize, image.height() as usize);
        let premultiplied: Vec<u8> = image
            .to_rgba8()
            .pixels()
            .flat_map(|p| {
                let [r, g, b, a] = p.0;
                [mul_div255(r, a), mul_div255(g, a), mul_div255(b, a), a]
            })
            .collect();
        let (px, width, height) = self.resized::<4>(&premultiplied, width, height, false);
        let rgb: Vec<u8> = px.chunks_exact(4).flat_map(|p| unpremultiply([p[0], p[1], p[2], p[3]])).collect();
        self.crop_and_normalize(&rgb, width, height)
    }

    /// The resize step on interleaved `C`-channel pixels (with nearest neighbour instead of the
    /// configured filter where `nearest`): the pixels and their new size.
    fn resized<'a, const C: usize>(
        &self,
        px: &'a [u8],
        width: usize,
        height: usize,
        nearest: bool,
    ) -> (std::borrow::Cow<'a, [u8]>, usize, usize) {
        let Some((resize, filter)) = self.resize else {
            return (std::borrow::Cow::Borrowed(px), width, height);
        };
        let (h, w) = match resize {
            Resize::ShortestEdge(n) => shortest_edge_size(height, width, n),
            Resize::Exact { height, width } => (height as usize, width as usize),
            Resize::LongestPadFloat(n) => longest_side_size(height, width, n),
        };
        let out = if nearest {
            pil_resize_nearest_u8::<C>(px, width, height, w, h)
        } else {
            pil_resize_u8::<C>(px, width, height, w, h, filter)
        };
        (std::borrow::Cow::Owned(out), w, h)
    }

    /// Centre crop, rescale and normalise of resized RGB8 pixels into channel-first f32.
    fn crop_and_normalize(&self, px: &[u8], width: usize, height: usize) -> PixelValues {
        let (out_h, out_w) = self.crop.map_or((height, width), |(h, w)| (h as usize, w as usize));
        // Centre crop placed as `self.crop_offset` says (transformers or torchvision); a crop
        // larger than the image pads with zeros.
        let offset = |size: usize, out: usize| match self.crop_offset {
            CropOffset::Floor if out <= size => ((size - out) / 2) as i64,
            CropOffset::Floor => -(((out - size) as i64 + 1) / 2),
            CropOffset::RoundHalfEven if out <= size => round_half_even_half(size - out) as i64,
            CropOffset::RoundHalfEven => -(((out - size) / 2) as i64),
        };
        let (top, left) = (offset(height, out_h), offset(width, out_w));
        let scale = self.rescale.unwrap_or(1.0);
        let mut out = vec![0f32; 3 * out_h * out_w];
        for c in 0..3 {
            let (mean, std) = self.normalize.map_or((0.0, 1.0), |(m, s)| (m[c], s[c]));
            for y in 0..out_h {
                for x in 0..out_w {
                    let (sy, sx) = (y as i64 + top, x as i64 + left);
                    let v = if sy >= 0 && sx >= 0 && (sy as usize) < height && (sx as usize) < width {
                        f64::from(px[(sy as usize * width + sx as usize) * 3 + c])
                    } else {
                        0.0
                    };
                    // Rescale in f64 then store f32 (`rescale`), normalise in f32 (`normalize`).
                    let v = (v * scale) as f32;
                    out[(c * out_h + y) * out_w + x] = (v - mean) / std;
                }
            }
        }
        PixelValues { height: out_h, width: out_w, data: out }
    }

    /// [`Resize::LongestPadFloat`]: `ToTensor`, the float resize of the longer side to `size`,
    /// zero padding to `size × size`, `Normalize` (all in f32, as torch on the CPU; the
    /// interpolation sums in f64 and rounds once, within an ulp or two of torch's f32 sums).
    fn pixel_values_longest_pad_float(&self, rgb: &Rgb8, size: usize) -> PixelValues {
        let (width, height) = (rgb.width, rgb.height);
        let (h, w) = longest_side_size(height, width, size as u32);
        let (h, w) = if width.max(height) == size { (height, width) } else { (h, w) };
        let rows = torch_bicubic_aa_matrix(height, h);
        let cols = torch_bicubic_aa_matrix(width, w);
        let (top, left) = ((size - h) / 2, (size - w) / 2);
        let mut out = vec![0f32; 3 * size * size];
        for c in 0..3 {
            // ToTensor: u8 / 255 in f32.
            let plane: Vec<f32> =
                (0..width * height).map(|i| f32::from(rgb.data[i * 3 + c]) / 255.0).collect();
            // Horizontal pass first, as torch's separable kernel, each pass rounded to f32.
            let mut tmp = vec![0f32; height * w];
            for y in 0..height {
                for x in 0..w {
                    let weights = &cols[x * width..(x + 1) * width];
                    let acc: f64 = weights
                        .iter()
                        .zip(&plane[y * width..(y + 1) * width])
                        .filter(|(k, _)| **k != 0.0)
                        .map(|(k, v)| k * f64::from(*v))
                        .sum();
                    tmp[y * w + x] = acc as f32;
                }
            }
            let (mean, std) = self.normalize.map_or((0.0, 1.0), |(m, s)| (m[c], s[c]));
            for oy in 0..size {
                for ox in 0..size {
                    let inside = oy >= top && oy < top + h && ox >= left && ox < left + w;
                    let v = if inside {
                        let (y, x) = (oy - top, ox - left);
                        let weights = &rows[y * height..(y + 1) * height];
                        let acc: f64 = weights
                            .iter()
                            .enumerate()
                            .filter(|(_, k)| **k != 0.0)
                            .map(|(i, k)| k * f64::from(tmp[i * w + x]))
                            .sum();
                        acc as f32
                    } else {
                        0.0
                    };
                    out[(c * size + oy) * size + ox] = (v - mean) / std;
                }
            }
        }
        PixelValues { height: size, width: size, data: out }
    }

    /// Output `(height, width)` for an input of `height × width`.
    pub fn output_size(&self, height: usize, width: usize) -> (usize, usize) {
        if let Some((h, w)) = self.crop {
            return (h as usize, w as usize);
        }
        match self.resize {
            Some((Resize::ShortestEdge(n), _)) => shortest_edge_size(height, width, n),
            Some((Resize::Exact { height, width }, _)) => (height as usize, width as usize),
            Some((Resize::LongestPadFloat(n), _)) => (n as usize, n as usize),
            None => (height, width),
        }
    }

    /// Decodes `bytes` with [`decode`] and returns its `pixel_values`.
    pub fn pixel_values(&self, bytes: &[u8]) -> Result<PixelValues, PreprocessError> {
        Ok(self.pixel_values_decoded(&decode(bytes)?))
    }

    /// The `pixel_values` of a decoded image.
    pub fn pixel_values_decoded(&self, decoded: &Decoded) -> PixelValues {
        let image = &decoded.image;
        if let Some((Resize::LongestPadFloat(size), _)) = self.resize {
            return self.pixel_values_longest_pad_float(&to_rgb8(image, Alpha::Drop), size as usize);
        }
        if self.alpha == Alpha::Drop && self.resize.is_some() {
            if decoded.palette_or_bilevel {
                return self.pixel_values_rgb_resampled(&to_rgb8(image, Alpha::Drop), true);
            }
            if image.color().has_alpha() {
                return self.pixel_values_rgba_drop(image);
            }
        }
        self.pixel_values_rgb(&to_rgb8(image, self.alpha))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torchvision_crop_rounds_half_to_even() {
        // int(round(m / 2)) for margins 0..8: 0, 0, 1, 2, 2, 2, 3, 4, 4.
        let got: Vec<usize> = (0..9).map(round_half_even_half).collect();
        assert_eq!(got, [0, 0, 1, 2, 2, 2, 3, 4, 4]);
        // A 1 × 7 row cropped to 1 × 4 (margin 3): transformers starts at 1, torchvision at 2.
        let rgb = Rgb8 { width: 7, height: 1, data: (0..7u8).flat_map(|v| [v * 10; 3]).collect() };
        let mut p = ImageProcessor {
            convert_rgb: true,
            alpha: Alpha::OverWhite,
            crop_offset: CropOffset::Floor,
            resize: None,
            crop: Some((1, 4)),
            rescale: None,
            normalize: None,
        };
        assert_eq!(p.pixel_values_rgb(&rgb).data[..4], [10.0, 20.0, 30.0, 40.0]);
        p.crop_offset = CropOffset::RoundHalfEven;
        assert_eq!(p.pixel_values_rgb(&rgb).data[..4], [20.0, 30.0, 40.0, 50.0]);
        // Padding a 1 × 1 image into 1 × 4: transformers puts it at 2 (ceil 3/2), torchvision at 1.
        let one = Rgb8 { width: 1, height: 1, data: vec![9; 3] };
        assert_eq!(p.pixel_values_rgb(&one).data[..4], [0.0, 9.0, 0.0, 0.0]);
        p.crop_offset = CropOffset::Floor;
        assert_eq!(p.pixel_values_rgb(&one).data[..4], [0.0, 0.0, 9.0, 0.0]);
    }

    #[test]
    fn alpha_drop_keeps_the_colour() {
        let img = DynamicImage::ImageRgba8(image::RgbaImage::from_raw(1, 1, vec![10, 20, 30, 0]).unwrap());
        assert_eq!(to_rgb8(&img, Alpha::Drop).data, [10, 20, 30]);
        assert_eq!(to_rgb8(&img, Alpha::OverWhite).data, [255, 255, 255]);
    }

    #[test]
    fn premultiplying_rounds_as_pillow() {
        assert_eq!(mul_div255(255, 128), 128);
        assert_eq!(mul_div255(100, 255), 100);
        assert_eq!(mul_div255(200, 0), 0);
        assert_eq!(mul_div255(3, 128), 2); // 1.506 rounds to 2
        assert_eq!(unpremultiply([100, 0, 7, 128]), [199, 0, 13]); // 255 · c / 128, truncated
        assert_eq!(unpremultiply([200, 50, 9, 100]), [255, 127, 22]); // clipped at 255
        assert_eq!(unpremultiply([10, 20, 30, 0]), [10, 20, 30]);
    }

    #[test]
    fn alpha_dropped_after_a_premultiplied_resize() {
        // Opaque red beside fully transparent blue, box-filtered to one pixel: premultiplied,
        // the blue weighs nothing (128, 0, 0, 128) and un-premultiplies to pure red; dropping
        // alpha first would give (128, 0, 128).
        let png = {
            let img = image::RgbaImage::from_raw(2, 1, vec![255, 0, 0, 255, 0, 0, 255, 0]).unwrap();
            let mut bytes = Vec::new();
            img.write_to(&mut std::io::Cursor::new(&mut bytes), image::ImageFormat::Png).unwrap();
            bytes
        };
        let p = ImageProcessor {
            convert_rgb: true,
            alpha: Alpha::Drop,
            crop_offset: CropOffset::RoundHalfEven,
            resize: Some((Resize::Exact { height: 1, width: 1 }, PilFilter::Box)),
            crop: None,
            rescale: None,
            normalize: None,
        };
        assert_eq!(p.pixel_values(&png).unwrap().data, [255.0, 0.0, 0.0]);
        let p = ImageProcessor { alpha: Alpha::OverWhite, ..p };
        // Composited onto white first: (255, 0, 0) and (255, 255, 255) averaged.
        assert_eq!(p.pixel_values(&png).unwrap().data, [255.0, 128.0, 128.0]);
    }

    #[test]
    fn longest_side_rounds_half_to_even() {
        assert_eq!(longest_side_size(37, 45, 28), (23, 28)); // 37 · 28 / 45 = 23.02
        assert_eq!(longest_side_size(3, 8, 28), (10, 28)); // 10.5 rounds to 10
        assert_eq!(longest_side_size(5, 8, 28), (18, 28)); // 17.5 rounds to 18
        assert_eq!(longest_side_size(52, 30, 28), (28, 16)); // 16.15
    }

    #[test]
    fn longest_pad_float_keeps_a_constant_and_pads_with_zero() {
        // A constant 6 × 3 (w × h) image to 8: resized to 8 × 4 (no rounding to 8 bits, so the
        // constant stays exact), padded by 2 rows above and 2 below with 0 before normalising.
        let rgb = Rgb8 { width: 6, height: 3, data: [51u8, 102, 204].repeat(18) };
        let p = ImageProcessor {
            convert_rgb: true,
            alpha: Alpha::Drop,
            crop_offset: CropOffset::RoundHalfEven,
            resize: Some((Resize::LongestPadFloat(8), PilFilter::Bicubic)),
            crop: None,
            rescale: Some(1.0 / 255.0),
            normalize: Some(([0.5; 3], [0.5; 3])),
        };
        let decoded = Decoded {
            image: DynamicImage::ImageRgb8(image::RgbImage::from_raw(6, 3, rgb.data).unwrap()),
            palette_or_bilevel: false,
        };
        let v = p.pixel_values_decoded(&decoded);
        assert_eq!((v.height, v.width), (8, 8));
        for (c, value) in [51.0f32, 102.0, 204.0].into_iter().enumerate() {
            let inside = (value / 255.0 - 0.5) / 0.5;
            for y in 0..8 {
                let want = if (2..6).contains(&y) { inside } else { -1.0 };
                for x in 0..8 {
                    let got = v.data[(c * 8 + y) * 8 + x];
                    assert!((got - want).abs() < 1e-6, "c {c} y {y} x {x}: {got} vs {want}");
                }
            }
        }
    }

    #[test]
    fn shortest_edge_truncates_the_long_side() {
        assert_eq!(shortest_edge_size(40, 48, 32), (32, 38)); // 32 * 48 / 40 = 38.4
        assert_eq!(shortest_edge_size(52, 30, 32), (55, 32)); // 32 * 52 / 30 = 55.47
        assert_eq!(shortest_edge_size(10, 10, 7), (7, 7));
    }

    #[test]
    fn alpha_composite_onto_white() {
        assert_eq!(over_white([10, 20, 30, 255]), [10, 20, 30]);
        assert_eq!(over_white([10, 20, 30, 0]), [255, 255, 255]);
        // Half transparent black over white: 255 * (1 - 128/255) = 127.
        assert_eq!(over_white([0, 0, 0, 128]), [127, 127, 127]);
    }

    #[test]
    fn integer_sizes_follow_the_processor_type() {
        let clip = r#"{"image_processor_type": "CLIPImageProcessor", "size": 224, "crop_size": 224,
            "do_center_crop": true, "resample": 3, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}"#;
        let p = ImageProcessorConfig::from_json(clip).unwrap().processor().unwrap();
        assert_eq!(p.resize, Some((Resize::ShortestEdge(224), PilFilter::Bicubic)));
        assert_eq!(p.crop, Some((224, 224)));
        let siglip = r#"{"image_processor_type": "SiglipImageProcessor", "size": 384, "resample": 3,
            "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}"#;
        let p = ImageProcessorConfig::from_json(siglip).unwrap().processor().unwrap();
        assert_eq!(p.resize, Some((Resize::Exact { height: 384, width: 384 }, PilFilter::Bicubic)));
        assert_eq!(p.output_size(100, 50), (384, 384));
    }

    #[test]
    fn crop_rescale_normalize_hand_values() {
        // 3 × 1 image, crop the middle pixel, rescale by 1/255, normalise with mean 0.5, std 0.25.
        let rgb = Rgb8 { width: 3, height: 1, data: vec![0, 0, 0, 255, 51, 0, 9, 9, 9] };
        let p = ImageProcessor {
            convert_rgb: true,
            alpha: Alpha::OverWhite,
            crop_offset: CropOffset::Floor,
            resize: None,
            crop: Some((1, 1)),
            rescale: Some(1.0 / 255.0),
            normalize: Some(([0.5; 3], [0.25; 3])),
        };
        let v = p.pixel_values_rgb(&rgb).data;
        assert_eq!(v.len(), 3);
        assert!((v[0] - 2.0).abs() < 1e-6);
        assert!((v[1] - (0.2 - 0.5) / 0.25).abs() < 1e-6);
        assert!((v[2] + 2.0).abs() < 1e-6);
    }
}
