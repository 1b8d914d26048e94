//! An encoder in f16 on a device whose own float type stays f32 (`Encoder::from_folder_in`):
//! the browser's `?precision=f16` beside its f32 tables. The tiny CLIP and SigLIP folders of
//! `tests/fixtures/encoders` on Burn's CPU backend (`flex`, whose f16 kernels the page's CPU
//! fallback runs): the weights and the features are f16, the device's next tensors are still
//! f32, and the text and image embeddings stay within a bound of the f32 encoder's (about 2× the
//! measured error, printed with `--nocapture`). The browser test `classroom lens in f16 on the
//! CPU` (tests/web/classroom.test.mjs) runs the same kernels in wasm on its own sentences and
//! photos, against the CLI's f32.

use burn::tensor::{DType, Device, FloatDType, Tensor, TensorData};
use culturelens_models::Towers;
use culturelens_models_io::Encoder;
use culturelens_models_io::folder::Dir;
use culturelens_testkit::{fixture, max_abs};

/// Max |f16 − f32| over the embedding values, image and text, for CLIP and SigLIP alike: about
/// 2× the measured error (flex: CLIP image 8.4e-4, text 1.7e-3; SigLIP image 8.1e-4, text
/// 1.7e-3).
const IMAGE_BOUND: f32 = 2e-3;
const TEXT_BOUND: f32 = 3.5e-3;

const SENTENCES: [&str; 4] = [
    "a photo of a Japanese woman",
    "ein Foto einer nigerianischen Frau",
    "una maestra japonesa en un aula",
    "a Nigerian teacher in a classroom",
];

fn values(t: Tensor<2>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_into_vec::<f32>().unwrap()
}

fn check(model: &str) {
    let device = Device::flex();
    let dir = fixture("encoders").join(model);
    let f32_encoder = Encoder::from_dir(&dir, &device).unwrap();
    let f16_encoder = Encoder::from_folder_in(&Dir(&dir), &device, FloatDType::F16, Towers::Both).unwrap();
    assert_eq!(f32_encoder.dtype, FloatDType::F32);
    assert_eq!(f16_encoder.dtype, FloatDType::F16);
    let processor = f32_encoder.processor().unwrap();
    let images = fixture("encoders/images");
    let pixels: Vec<_> = ["a_rgb.png", "b_grey.png", "c_rgba.png", "d_photo.jpg"]
        .iter()
        .map(|f| culturelens_models_io::read_pixel_values(processor, &images.join(f)).unwrap())
        .collect();
    let texts: Vec<String> = SENTENCES.iter().map(|s| s.to_string()).collect();
    let ids = f32_encoder.tokenize(&texts).unwrap();
    let (image_bound, text_bound) = (IMAGE_BOUND, TEXT_BOUND);

    let image16 = f16_encoder.image_features(&pixels);
    let text16 = f16_encoder.text_features(&ids).unwrap();
    assert_eq!(image16.dtype(), DType::F16, "{model}: image features computed in f16");
    assert_eq!(text16.dtype(), DType::F16, "{model}: text features computed in f16");
    // The device's own float type is untouched: the page's tables stay f32.
    let next = Tensor::<1>::from_data(TensorData::new(vec![1.0f32], [1]), &device);
    assert_eq!(next.dtype(), DType::F32);

    let image32 = values(f32_encoder.image_features(&pixels));
    let text32 = values(f32_encoder.text_features(&ids).unwrap());
    let (image16, text16) = (values(image16), values(text16));
    assert_eq!(image16.len(), image32.len());
    assert_eq!(text16.len(), text32.len());
    let image_err = max_abs(&image16, &image32);
    let text_err = max_abs(&text16, &text32);
    eprintln!(
        "{model} f16 vs f32 on flex: image max abs {image_err:.1e} (bound {image_bound:.1e}), text {text_err:.1e} (bound {text_bound:.1e})"
    );
    assert!(image_err <= image_bound, "{model}: f16 image embeddings differ by {image_err} > {image_bound}");
    assert!(text_err <= text_bound, "{model}: f16 text embeddings differ by {text_err} > {text_bound}");
    // f16 is f16: its rounding shows (an f32 run would give 0 here).
    assert!(image_err > 1e-5 && text_err > 1e-5, "{model}: no f16 rounding seen ({image_err}, {text_err})");
    // The check can fail: embeddings are not trivially small.
    assert!(image32.iter().chain(&text32).map(|v| v.abs()).fold(0.0, f32::max) > 0.1);
}

#[test]
fn clip_in_f16_on_an_f32_device_stays_near_f32() {
    check("clip");
}

#[test]
fn siglip_in_f16_on_an_f32_device_stays_near_f32() {
    check("siglip");
}
