//! JPEG decoding (`src/jpeg.rs`, libjpeg-turbo's C decoder, and `src/jpeg_rs.rs`, its Rust port
//! that the browser runs) gives Pillow's pixels byte for byte on the committed files: chroma subsampling 4:2:0, 4:2:2 and 4:4:4, greyscale, progressive,
//! CMYK (Adobe), a file with an EXIF orientation of 6 (left unrotated, as Pillow's `open` and the
//! transformers processors leave it) and the encoder fixtures' photo. Reference made by
//! `scripts/fixtures/make_jpeg.py` (Pillow 13.0.0 with libjpeg-turbo 3.2.0): the pixels
//! of `Image.open(f).convert("RGB")`.

use culturelens_models::preprocess::{self, Alpha, to_rgb8};
use culturelens_models_io::{decode_image, jpeg_rs};
use culturelens_testkit::fixtures;
use safetensors::{Dtype, SafeTensors};

#[test]
fn jpeg_pixels_equal_pillows() {
    let bytes = std::fs::read(fixtures().join("jpeg/pillow_rgb.safetensors")).unwrap();
    let (_, meta) = SafeTensors::read_metadata(&bytes).unwrap();
    let files: Vec<String> = serde_json::from_str(&meta.metadata().as_ref().unwrap()["files"]).unwrap();
    assert_eq!(files.len(), 8);
    let reference = SafeTensors::deserialize(&bytes).unwrap();
    let mut image_crate_differs = 0;
    for name in &files {
        let dir = if name == "d_photo.jpg" { "encoders/images" } else { "jpeg" };
        let file = std::fs::read(fixtures().join(dir).join(name)).unwrap();
        let view = reference.tensor(name).unwrap();
        assert_eq!(view.dtype(), Dtype::U8);
        let want = view.data();
        let ours = to_rgb8(&decode_image(&file).unwrap().image, Alpha::OverWhite);
        assert_eq!([ours.height, ours.width, 3], view.shape(), "{name}: size");
        let differing = ours.data.iter().zip(want).filter(|(a, b)| a != b).count();
        // The browser's decoder (no C): the same bytes.
        let port = to_rgb8(&jpeg_rs::decode(&file).unwrap(), Alpha::OverWhite);
        let port_differing = port.data.iter().zip(want).filter(|(a, b)| a != b).count();
        assert_eq!(port_differing, 0, "{name}: the Rust port differs from Pillow in {port_differing} bytes");
        // For comparison, the `image` crate's decoder (zune-jpeg), which the core uses.
        let theirs = to_rgb8(&preprocess::decode(&file).unwrap().image, Alpha::OverWhite);
        let theirs_max = theirs.data.iter().zip(want).map(|(a, b)| a.abs_diff(*b)).max().unwrap();
        eprintln!(
            "{name}: {differing} of {} bytes differ from Pillow (the image crate: max difference {theirs_max})",
            want.len()
        );
        assert_eq!(differing, 0, "{name}: {differing} bytes differ from Pillow's");
        image_crate_differs += usize::from(theirs_max > 0);
    }
    // The check can fail: another JPEG decoder misses Pillow's pixels on most of these files.
    assert!(image_crate_differs >= 5, "the image crate matched Pillow on {} files", 8 - image_crate_differs);
}

#[test]
fn exif_orientation_is_not_applied() {
    let file = std::fs::read(fixtures().join("jpeg/exif_rotated.jpg")).unwrap();
    let image = decode_image(&file).unwrap().image;
    // Stored 40 × 24 with orientation 6 (displayed 24 × 40): decoded as stored.
    assert_eq!((image.width(), image.height()), (40, 24));
}
