//! Parity with transformers on the committed fixtures (made by
//! `scripts/fixtures/make_encoders.py`): tiny random-weight CLIP, SigLIP, DINOv2 and
//! DINOv2-with-registers folders written by `save_pretrained`, a tiny OpenCLIP folder in the
//! hub layout of ViT-bigG-14 / ViT-H-14, plus the reference
//! `pixel_values`, embeddings and token ids; and real photos in PNG and JPEG through every image
//! tower (`scripts/fixtures/make_encoders_photos.py`). The image and text towers are checked on
//! Burn's CPU backend (`flex`) and on wgpu (lavapipe on a machine without GPU).

use burn::tensor::{Device, Tensor, TensorData};
use culturelens_models_io::Encoder;
use culturelens_testkit::{fixture, max_abs, wgpu};
use safetensors::{Dtype, SafeTensors};

/// Which tower's embeddings a bound is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tower {
    Image,
    Text,
}

/// The parity bound (max abs difference in f32) of `model`'s `tower`: about twice the largest
/// difference measured on flex and wgpu (printed with `--nocapture`), so a change of the
/// arithmetic that doubles the error fails. Image bounds cover the synthetic images and the real
/// photos (measured as flex / wgpu, photos PNG and JPEG).
fn bound(model: &str, tower: Tower) -> f32 {
    match (model, tower) {
        // Measured on flex / wgpu (lavapipe): 2.7e-7 / 2.5e-7; photos 2.5e-7 / 3.6e-7.
        ("clip", Tower::Image) => 6e-7,
        // 6.0e-7 / 8.3e-7.
        ("clip", Tower::Text) => 2e-6,
        // 2.5e-7 / 2.1e-7; photos 3.0e-7 / 2.4e-7.
        ("siglip", Tower::Image) => 6e-7,
        // 5.1e-7 / 5.4e-7.
        ("siglip", Tower::Text) => 1.2e-6,
        // 2.4e-7 / 3.6e-7; photos 6.0e-7 / 4.8e-7 (was 8e-7 before the photos).
        ("dinov2", Tower::Image) => 1.2e-6,
        // 3.6e-7 / 2.4e-7; photos 3.6e-7 / 7.2e-7 (was 8e-7 before the photos).
        ("dinov2_reg", Tower::Image) => 1.5e-6,
        // 6.0e-7 / 5.4e-7; photos 6.6e-7 / 6.7e-7.
        ("open_clip", Tower::Image) => 1.2e-6,
        // 8.3e-7 / 7.7e-7.
        ("open_clip", Tower::Text) => 2e-6,
        other => panic!("no parity bound for {other:?}"),
    }
}

struct Reference {
    bytes: Vec<u8>,
}

impl Reference {
    fn open(model: &str) -> Self {
        Self { bytes: std::fs::read(fixture("encoders").join(model).join("reference.safetensors")).unwrap() }
    }

    fn tensors(&self) -> SafeTensors<'_> {
        SafeTensors::deserialize(&self.bytes).unwrap()
    }

    /// The shape and values of tensor `key`, which must have `dtype`; `N`-byte little-endian
    /// elements are read with `from_le`.
    fn values<T, const N: usize>(
        &self,
        key: &str,
        dtype: Dtype,
        from_le: fn([u8; N]) -> T,
    ) -> (Vec<usize>, Vec<T>) {
        let st = self.tensors();
        let view = st.tensor(key).unwrap();
        assert_eq!(view.dtype(), dtype, "{key}");
        let data = view.data().chunks_exact(N).map(|b| from_le(b.try_into().unwrap())).collect();
        (view.shape().to_vec(), data)
    }

    fn f32(&self, key: &str) -> (Vec<usize>, Vec<f32>) {
        self.values(key, Dtype::F32, f32::from_le_bytes)
    }

    fn i64(&self, key: &str) -> (Vec<usize>, Vec<i64>) {
        self.values(key, Dtype::I64, i64::from_le_bytes)
    }

    fn images(&self) -> Vec<String> {
        let (_, meta) = SafeTensors::read_metadata(&self.bytes).unwrap();
        let images = meta.metadata().as_ref().unwrap()["images"].clone();
        serde_json::from_str(&images).unwrap()
    }

    fn texts(&self) -> Vec<String> {
        let (_, meta) = SafeTensors::read_metadata(&self.bytes).unwrap();
        let texts = meta.metadata().as_ref().unwrap()["texts"].clone();
        serde_json::from_str(&texts).unwrap()
    }
}

/// The backends every parity check runs on: flex (CPU) and wgpu (lavapipe without a GPU), the
/// wgpu device initialised once per test process.
fn devices() -> [Device; 2] {
    [Device::flex(), wgpu()]
}

fn load(model: &str, device: &Device) -> Encoder {
    Encoder::from_dir(&fixture("encoders").join(model), device).unwrap()
}

/// The model applied to the reference `pixel_values` matches the reference embeddings, on
/// every backend.
fn image_parity(model: &str) {
    for device in devices() {
        let encoder = load(model, &device);
        let reference = Reference::open(model);
        let (shape, pixels) = reference.f32("pixel_values");
        let pixels = Tensor::<4>::from_data(
            TensorData::new(pixels, [shape[0], shape[1], shape[2], shape[3]]),
            &device,
        );
        let got =
            encoder.model.image_features(pixels).into_data().convert::<f32>().try_into_vec::<f32>().unwrap();
        let (want_shape, want) = reference.f32("image_embeds");
        assert_eq!(got.len(), want_shape.iter().product::<usize>());
        let err = max_abs(&got, &want);
        eprintln!("{model} image embeddings on {device:?}: max abs difference {err:.1e}");
        let bound = bound(model, Tower::Image);
        assert!(err <= bound, "{model} on {device:?}: image embeddings differ by {err} > {bound}");
        // The check can fail: embeddings are not trivially small.
        assert!(want.iter().map(|v| v.abs()).fold(0.0, f32::max) > 0.1);
    }
}

/// How far our pixel_values may be from the processor's: none. Decoding (JPEG included) gives
/// Pillow's pixels and the arithmetic is the processor's, operation for operation (measured: 0
/// on every committed image and model).
const PIXEL_BOUND: f32 = 0.0;

/// Decoding + preprocessing of the committed images (PNG, JPEG, lossless WebP) reproduces the
/// processor's pixel_values exactly.
fn preprocessing_parity(model: &str) {
    let device = Device::flex();
    let encoder = load(model, &device);
    let reference = Reference::open(model);
    let (shape, want) = reference.f32("pixel_values");
    let per_image = shape[1] * shape[2] * shape[3];
    for (i, name) in reference.images().iter().enumerate() {
        let got = encoder.pixel_values(&fixture("encoders/images").join(name)).unwrap();
        assert_eq!((got.height, got.width), (shape[2], shape[3]), "{model}/{name}");
        let err = max_abs(&got.data, &want[i * per_image..(i + 1) * per_image]);
        eprintln!("{model}/{name}: pixel_values max abs difference {err:.1e}");
        assert!(err <= PIXEL_BOUND, "{model}/{name}: pixel_values differ by {err}");
    }
}

/// Real photos (scikit-image's astronaut, coffee and greyscale camera, matplotlib's Grace
/// Hopper), each as PNG and JPEG, from `scripts/fixtures/make_encoders_photos.py`: decoding and
/// preprocessing give the reference `pixel_values` exactly, and the model on them the reference
/// embeddings within the model's image bound, on every backend; the errors are printed per format.
fn photo_parity(model: &str) {
    let dir = fixture("encoders/photos");
    let reference = Reference { bytes: std::fs::read(dir.join(format!("{model}.safetensors"))).unwrap() };
    let names = reference.images();
    assert_eq!(names.len(), 8, "{names:?}");
    let formats = ["png", "jpg"];
    for ext in formats {
        assert_eq!(names.iter().filter(|n| n.ends_with(&format!(".{ext}"))).count(), 4, "{names:?}");
    }
    let (shape, want_pixels) = reference.f32("pixel_values");
    let per_image = shape[1] * shape[2] * shape[3];
    let flex = load(model, &Device::flex());
    let mut pixels = Vec::with_capacity(want_pixels.len());
    for (i, name) in names.iter().enumerate() {
        let got = flex.pixel_values(&dir.join(name)).unwrap();
        assert_eq!((got.height, got.width), (shape[2], shape[3]), "{model}/{name}");
        let err = max_abs(&got.data, &want_pixels[i * per_image..(i + 1) * per_image]);
        assert!(err <= PIXEL_BOUND, "{model}/photos/{name}: pixel_values differ by {err}");
        pixels.extend(got.data);
    }
    let (_, want) = reference.f32("image_embeds");
    let width = want.len() / names.len();
    // The check can fail: embeddings are not trivially small.
    assert!(want.iter().map(|v| v.abs()).fold(0.0, f32::max) > 0.1);
    let bound = bound(model, Tower::Image);
    for device in devices() {
        let encoder = load(model, &device);
        let input = Tensor::<4>::from_data(
            TensorData::new(pixels.clone(), [shape[0], shape[1], shape[2], shape[3]]),
            &device,
        );
        let got =
            encoder.model.image_features(input).into_data().convert::<f32>().try_into_vec::<f32>().unwrap();
        assert_eq!(got.len(), want.len());
        for ext in formats {
            let err = names
                .iter()
                .enumerate()
                .filter(|(_, n)| n.ends_with(&format!(".{ext}")))
                .map(|(i, _)| max_abs(&got[i * width..(i + 1) * width], &want[i * width..(i + 1) * width]))
                .fold(0.0, f32::max);
            eprintln!(
                "{model} photos ({ext}) on {device:?}: pixel_values exact, image embeddings max abs difference {err:.1e}"
            );
            assert!(
                err <= bound,
                "{model} photos ({ext}) on {device:?}: image embeddings differ by {err} > {bound}"
            );
        }
    }
}

/// The text tower applied to `ids` matches the reference `text_embeds` of `model`, on every
/// backend.
fn text_parity(model: &str, ids: &[Vec<u32>]) {
    let (_, want) = Reference::open(model).f32("text_embeds");
    // The check can fail: embeddings are not trivially small.
    assert!(want.iter().map(|v| v.abs()).fold(0.0, f32::max) > 0.1);
    for device in devices() {
        let got: Vec<f32> = load(model, &device).embed_ids(ids).unwrap().concat();
        let err = max_abs(&got, &want);
        eprintln!("{model} text embeddings on {device:?}: max abs difference {err:.1e}");
        let bound = bound(model, Tower::Text);
        assert!(err <= bound, "{model} on {device:?}: text embeddings differ by {err} > {bound}");
    }
}

#[test]
fn clip_image_features_match_transformers() {
    image_parity("clip");
}

#[test]
fn siglip_image_features_match_transformers() {
    image_parity("siglip");
}

#[test]
fn dinov2_pooler_output_matches_transformers() {
    image_parity("dinov2");
}

#[test]
fn dinov2_with_registers_swiglu_pooler_output_matches_transformers() {
    image_parity("dinov2_reg");
}

#[test]
fn clip_preprocessing_matches_the_processor() {
    preprocessing_parity("clip");
}

#[test]
fn siglip_preprocessing_matches_the_processor() {
    preprocessing_parity("siglip");
}

#[test]
fn dinov2_preprocessing_matches_the_processor() {
    preprocessing_parity("dinov2");
}

#[test]
fn clip_tokenizer_and_text_features_match_transformers() {
    let device = Device::flex();
    let encoder = load("clip", &device);
    let reference = Reference::open("clip");
    let ids = encoder.tokenize(&reference.texts()).unwrap();
    let (shape, want_ids) = reference.i64("input_ids");
    let (_, mask) = reference.i64("attention_mask");
    for (row, got) in ids.iter().enumerate() {
        let want: Vec<u32> = (0..shape[1])
            .filter(|&j| mask[row * shape[1] + j] == 1)
            .map(|j| want_ids[row * shape[1] + j] as u32)
            .collect();
        assert_eq!(got, &want, "token ids of text {row}");
    }
    text_parity("clip", &ids);
}

#[test]
fn siglip_text_features_match_transformers() {
    let reference = Reference::open("siglip");
    let (shape, ids) = reference.i64("input_ids");
    let ids: Vec<Vec<u32>> = ids.chunks(shape[1]).map(|r| r.iter().map(|&t| t as u32).collect()).collect();
    text_parity("siglip", &ids);
}

#[test]
fn open_clip_image_features_match_open_clip() {
    image_parity("open_clip");
}

#[test]
fn open_clip_preprocessing_matches_its_transform() {
    preprocessing_parity("open_clip");
}

#[test]
fn clip_on_real_photos_matches_transformers() {
    photo_parity("clip");
}

#[test]
fn siglip_on_real_photos_matches_transformers() {
    photo_parity("siglip");
}

#[test]
fn dinov2_on_real_photos_matches_transformers() {
    photo_parity("dinov2");
}

#[test]
fn dinov2_with_registers_on_real_photos_matches_transformers() {
    photo_parity("dinov2_reg");
}

#[test]
fn open_clip_on_real_photos_matches_open_clip() {
    photo_parity("open_clip");
}

/// Palette and bilevel PNGs, which Pillow resizes with nearest neighbour inside open_clip's
/// transform (reference from scripts/fixtures/make_encoders_pillow_modes.py).
#[test]
fn open_clip_preprocessing_resizes_palette_and_bilevel_pngs_as_pillow() {
    let encoder = load("open_clip", &Device::flex());
    let dir = fixture("encoders/pillow_modes");
    let bytes = std::fs::read(dir.join("open_clip_pixel_values.safetensors")).unwrap();
    let tensors = SafeTensors::deserialize(&bytes).unwrap();
    let view = tensors.tensor("pixel_values").unwrap();
    let want: Vec<f32> =
        view.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    let per_image = want.len() / 2;
    for (i, name) in ["p_palette_trns.png", "q_bilevel.png"].iter().enumerate() {
        let got = encoder.pixel_values(&dir.join(name)).unwrap();
        let err = max_abs(&got.data, &want[i * per_image..(i + 1) * per_image]);
        eprintln!("open_clip/{name}: pixel_values max abs difference {err:.1e}");
        assert!(err <= PIXEL_BOUND, "open_clip/{name}: pixel_values differ by {err}");
    }
}

#[test]
fn open_clip_text_features_match_open_clip() {
    let reference = Reference::open("open_clip");
    let (shape, ids) = reference.i64("input_ids");
    // open_clip pads rows with 0 after the end-of-text token (the highest id); culturelens
    // takes rows as the tokenizer returns them, so cut each after its highest id.
    let ids: Vec<Vec<u32>> = ids
        .chunks(shape[1])
        .map(|row| {
            let end = row.iter().enumerate().max_by_key(|&(i, &t)| (t, std::cmp::Reverse(i))).unwrap().0;
            row[..=end].iter().map(|&t| t as u32).collect()
        })
        .collect();
    assert_eq!(ids.iter().map(Vec::len).collect::<Vec<_>>(), [3, 16, 7, 1, 11]);
    text_parity("open_clip", &ids);
}

/// open_clip's text cleaning (ftfy's character fixes) followed by the CLIP tokenizer.json's
/// normaliser gives what open_clip's own tokenizer feeds its BPE (reference from
/// scripts/fixtures/make_encoders_open_clip_text.py: curly quotes, ligatures, full- and halfwidth
/// forms, control characters, line breaks, several scripts).
#[test]
fn open_clip_text_cleaning_matches_open_clip() {
    use tokenizers::{NormalizedString, Normalizer};
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("encoders/open_clip/text_clean_reference.json")).unwrap(),
    )
    .unwrap();
    let texts: Vec<String> = serde_json::from_value(reference["texts"].clone()).unwrap();
    let want: Vec<String> = serde_json::from_value(reference["normalized"].clone()).unwrap();
    let tokenizer = tokenizers::Tokenizer::from_file(fixture("encoders/clip/tokenizer.json")).unwrap();
    let normalizer = tokenizer.get_normalizer().unwrap();
    let normalized = |text: &str| {
        let mut n = NormalizedString::from(text);
        normalizer.normalize(&mut n).unwrap();
        n.get().trim().to_owned()
    };
    let mut differ_without = 0;
    for (text, want) in texts.iter().zip(&want) {
        let cleaned = culturelens_models_io::open_clip_text::clean(text);
        assert_eq!(&normalized(&cleaned), want, "{text:?}");
        differ_without += usize::from(&normalized(text) != want);
    }
    // The check can fail: most of these texts need the cleaning.
    assert!(differ_without >= 6, "only {differ_without} texts needed cleaning");
}

/// An OpenCLIP folder cleans texts before tokenizing (a curly apostrophe becomes straight); a
/// transformers folder with the same tokenizer.json does not, as transformers does not.
#[test]
fn only_open_clip_folders_clean_texts() {
    let dir = tempfile::tempdir().unwrap();
    for file in ["open_clip_config.json", "open_clip_model.safetensors"] {
        std::fs::copy(fixture("encoders/open_clip").join(file), dir.path().join(file)).unwrap();
    }
    std::fs::copy(fixture("encoders/clip/tokenizer.json"), dir.path().join("tokenizer.json")).unwrap();
    let texts = ["it\u{2019}s a photo".to_string(), "it's a photo".to_string()];
    let open_clip = Encoder::from_dir(dir.path(), &Device::flex()).unwrap();
    let ids = open_clip.tokenize(&texts).unwrap();
    assert_eq!(ids[0], ids[1]);
    let clip = load("clip", &Device::flex());
    let ids = clip.tokenize(&texts).unwrap();
    assert_ne!(ids[0], ids[1]);
}

#[test]
fn open_clip_folder_without_safetensors_names_the_pickle() {
    let dir = std::env::temp_dir().join(format!("culturelens-oc-pickle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixture("encoders/open_clip/open_clip_config.json"), dir.join("open_clip_config.json"))
        .unwrap();
    std::fs::write(dir.join("open_clip_pytorch_model.bin"), b"not read").unwrap();
    let err = Encoder::from_dir(&dir, &Device::flex()).err().expect("must fail").to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(err.contains("open_clip_pytorch_model.bin") && err.contains("does not unpickle"), "{err}");
}

#[test]
fn pickled_checkpoints_are_refused_with_a_hint() {
    let dir = std::env::temp_dir().join(format!("culturelens-pickle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixture("encoders/clip/config.json"), dir.join("config.json")).unwrap();
    std::fs::write(dir.join("pytorch_model.bin"), b"not read").unwrap();
    let err = Encoder::from_dir(&dir, &Device::flex()).err().expect("must fail").to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(err.contains("does not unpickle"), "{err}");
}

/// SigLIP's tokenizer rebuilt from `spiece.model` (no tokenizer.json in the folder, as in the
/// google/siglip-* repositories) gives the ids of transformers' `SiglipTokenizer`.
#[test]
fn siglip_sentencepiece_tokenizer_matches_transformers() {
    let device = Device::flex();
    let encoder = load("siglip", &device);
    assert!(!fixture("encoders/siglip/tokenizer.json").exists());
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("encoders/siglip/tokenizer_reference.json")).unwrap(),
    )
    .unwrap();
    let texts: Vec<String> = serde_json::from_value(reference["texts"].clone()).unwrap();
    let want: Vec<Vec<u32>> = serde_json::from_value(reference["input_ids"].clone()).unwrap();
    let got = encoder.tokenize(&texts).unwrap();
    for ((text, got), want) in texts.iter().zip(&got).zip(&want) {
        assert_eq!(got, want, "token ids of {text:?}");
    }
    // The ids feed the text tower (right-padded to max_position_embeddings inside).
    assert_eq!(encoder.embed_ids(&got).unwrap().len(), texts.len());
}

/// `logit_scale` is read from each two-tower checkpoint (`[]` in CLIP and OpenCLIP, `[1]` in
/// SigLIP) and returned as the temperature `exp(logit_scale)`; one-tower models have none.
#[test]
fn logit_scale_is_the_exp_of_the_checkpoint_scalar() {
    let device = Device::flex();
    for (model, file) in [
        ("clip", "model.safetensors"),
        ("siglip", "model.safetensors"),
        ("open_clip", "open_clip_model.safetensors"),
    ] {
        let bytes = std::fs::read(fixture("encoders").join(model).join(file)).unwrap();
        let st = SafeTensors::deserialize(&bytes).unwrap();
        let view = st.tensor("logit_scale").unwrap();
        assert_eq!(view.dtype(), Dtype::F32);
        let raw = f32::from_le_bytes(view.data()[..4].try_into().unwrap());
        assert_eq!(load(model, &device).model.logit_scale(), Some(raw.exp()), "{model}");
    }
    assert_eq!(load("dinov2", &device).model.logit_scale(), None);
}

/// A two-tower model loaded for one tower (`Encoder::from_dir_towers`): that tower gives the
/// same bits as the whole model, the other tower's parameters stay unread (lazy, never
/// materialised), and embedding with it is refused (an error for texts, a panic for images).
#[test]
fn one_tower_loads_alone_and_embeds_as_both() {
    use culturelens_models::{EncoderModel, ModelError, Towers};
    let device = Device::flex();
    let ids: Vec<Vec<u32>> = vec![vec![5, 6, 7, 2], vec![9, 2]];
    for model in ["clip", "siglip", "open_clip"] {
        let dir = fixture("encoders").join(model);
        let both = load(model, &device);
        let image = Encoder::from_dir_towers(&dir, &device, Towers::Image).unwrap();
        let text = Encoder::from_dir_towers(&dir, &device, Towers::Text).unwrap();
        let values = |t: Tensor<2>| t.into_data().convert::<f32>().try_into_vec::<f32>().unwrap();
        let texts = |e: &Encoder| e.model.text_features(&ids, &device).map(values);
        assert_eq!(texts(&text).unwrap(), texts(&both).unwrap(), "{model} text tower alone");
        let err = texts(&image).unwrap_err();
        assert!(matches!(err, ModelError::TowerNotLoaded { tower: "text", .. }), "{model}: {err}");
        assert!(err.to_string().contains("text tower"), "{err}");
        let (shape, data) = Reference::open(model).f32("pixel_values");
        let pixels = || {
            Tensor::<4>::from_data(
                TensorData::new(data.clone(), [shape[0], shape[1], shape[2], shape[3]]),
                &device,
            )
        };
        assert_eq!(
            values(image.model.image_features(pixels())),
            values(both.model.image_features(pixels())),
            "{model} image tower alone"
        );
        let refused =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| text.model.image_features(pixels())));
        assert!(refused.is_err(), "{model}: the image tower of a text-only load must not run");
        // The unread tower's weights were never materialised; the read ones were.
        let materialised = |e: &Encoder| match &e.model {
            EncoderModel::Clip(m) => {
                (m.visual_projection.weight.is_initialized(), m.text_projection.weight.is_initialized())
            }
            EncoderModel::Siglip(m) => {
                (m.vision_model.head.probe.is_initialized(), m.text_model.head.weight.is_initialized())
            }
            _ => unreachable!("{model} is a two-tower model"),
        };
        assert_eq!(materialised(&image), (true, false), "{model} loaded for images");
        assert_eq!(materialised(&text), (false, true), "{model} loaded for texts");
    }
}
