//! Round trips and the corruptions the reader must reject, each with its file/row/column.

use super::*;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn columns() -> Vec<(String, Vec<String>)> {
    vec![
        ("model".into(), s(&["A", "A", "B"])),
        ("language".into(), s(&["en", "de", "en"])),
        ("culture".into(), s(&["X", "Y", "X"])),
        ("prompt".into(), s(&["a, \"quoted\" one", "", "ü"])),
    ]
}

fn spec(dtype: DType) -> BundleSpec {
    BundleSpec {
        title: "t".into(),
        synthetic: true,
        embedding_model: "none".into(),
        provenance: "unit test".into(),
        dtype,
        piece_bytes: PIECE_BYTES,
    }
}

const EMB: [f32; 6] = [1.0, 0.5, -0.25, 2.0, 0.0, 3.0];

fn files(dtype: DType) -> Vec<(String, Vec<u8>)> {
    build_bundle(&spec(dtype), &EMB, 2, &columns(), vec![]).unwrap()
}

fn read(files: &[(String, Vec<u8>)]) -> Result<Bundle, BundleError> {
    read_bundle(|path| {
        files
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, b)| b.clone())
            .ok_or_else(|| BundleError::new(path, "missing"))
    })
}

fn replace(files: &mut [(String, Vec<u8>)], path: &str, bytes: Vec<u8>) {
    files.iter_mut().find(|(p, _)| p == path).unwrap().1 = bytes;
}

#[test]
fn f32_and_f16_round_trip() {
    for dtype in [DType::F32, DType::F16] {
        let b = read(&files(dtype)).unwrap();
        assert_eq!(b.embeddings, EMB, "these values are exact in f16 too");
        assert_eq!(b.columns, columns());
        assert_eq!(b.manifest.models, ["A", "B"]);
        assert_eq!(b.manifest.languages, ["de", "en"]);
        assert_eq!((b.manifest.rows, b.manifest.dim, b.manifest.dtype), (3, 2, dtype));
        assert_eq!(b.manifest.files.len(), 2);
    }
}

#[test]
fn manifest_lists_sizes_and_checksums() {
    let f = files(DType::F32);
    let m = Manifest::parse(&f.last().unwrap().1).unwrap();
    let emb = m.entry("embeddings.f32").unwrap();
    assert_eq!(emb.bytes, 24);
    assert_eq!(emb.sha256, sha256_hex(&f[0].1));
    // SHA-256 of the empty string, a known value.
    assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

#[test]
fn corrupt_and_truncated_files_are_rejected() {
    let mut f = files(DType::F32);
    let mut emb = f[0].1.clone();
    emb[3] ^= 0x40;
    replace(&mut f, "embeddings.f32", emb);
    let err = read(&f).unwrap_err().to_string();
    assert!(err.starts_with("bundle file embeddings.f32: SHA-256 mismatch"), "{err}");

    let mut f = files(DType::F32);
    let short = f[1].1[..10].to_vec();
    replace(&mut f, "meta.csv", short);
    let err = read(&f).unwrap_err().to_string();
    assert!(err.contains("meta.csv: has 10 bytes but the manifest lists"), "{err}");
}

/// A bundle of 20,000 × 4 f32 values (320,000 bytes) listed in pieces of [`MIN_PIECE_BYTES`].
fn pieced() -> Vec<(String, Vec<u8>)> {
    let rows = 20_000;
    let emb: Vec<f32> = (0..rows * 4).map(|i| 1.0 + (i % 7) as f32).collect();
    let cols = |v: &str| vec![v.to_string(); rows];
    let columns =
        vec![("model".into(), cols("A")), ("language".into(), cols("en")), ("culture".into(), cols("X"))];
    let spec = BundleSpec { piece_bytes: MIN_PIECE_BYTES, ..spec(DType::F32) };
    build_bundle(&spec, &emb, 4, &columns, vec![]).unwrap()
}

#[test]
fn large_files_are_listed_and_checked_piece_by_piece() {
    let f = pieced();
    let m = Manifest::parse(&f.last().unwrap().1).unwrap();
    let emb = m.entry("embeddings.f32").unwrap();
    assert_eq!(emb.bytes, 320_000);
    assert_eq!(emb.sha256, sha256_hex(&f[0].1), "the whole file's digest is still listed");
    let pieces = emb.pieces.as_ref().expect("320,000 bytes are more than one 65,536-byte piece");
    assert_eq!(pieces.bytes, 65_536);
    // 320,000 = 4 × 65,536 + 57,856: four whole pieces and a shorter last one.
    let ranges: Vec<_> = emb.digests().into_iter().map(|(r, _)| r).collect();
    assert_eq!(ranges, [0..65_536, 65_536..131_072, 131_072..196_608, 196_608..262_144, 262_144..320_000]);
    assert_eq!(pieces.sha256[4], sha256_hex(&f[0].1[262_144..]));
    // Every file larger than one piece: the metadata (20,000 rows of `A,en,X`) too.
    let meta = m.entry("meta.csv").unwrap();
    assert_eq!((meta.bytes, meta.pieces.as_ref().map(|p| p.sha256.len())), (140_023, Some(3)));
    assert_eq!(read(&f).unwrap().embeddings.len(), 80_000);

    // A flipped byte is named by its piece.
    let mut bad = f.clone();
    bad[0].1[200_000] ^= 1;
    let err = read(&bad).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "bundle file embeddings.f32: SHA-256 mismatch: piece 3 of 5 (bytes 196608..262144) is {}, the manifest lists {} (corrupt file)",
            sha256_hex(&bad[0].1[196_608..262_144]),
            pieces.sha256[3]
        )
    );
    assert!(
        check_digest(&m, "embeddings.f32", 5, &pieces.sha256[0])
            .unwrap_err()
            .to_string()
            .contains("piece 5 is beyond the 5")
    );

    // Readers check the pieces where they are listed, not the whole file's digest (which only
    // `sha256sum` and readers from before pieces use): the pieces cover every byte.
    let mut v: serde_json::Value = serde_json::from_slice(&f.last().unwrap().1).unwrap();
    v["files"][0]["sha256"] = "00".repeat(32).into();
    let mut edited = f.clone();
    edited.last_mut().unwrap().1 = serde_json::to_vec(&v).unwrap();
    assert_eq!(read(&edited).unwrap().embeddings, read(&f).unwrap().embeddings);
}

#[test]
fn a_file_of_exactly_whole_pieces_ends_on_a_piece_boundary() {
    let data = vec![7u8; 3 * 65_536];
    let e = FileEntry::new("x", &data, MIN_PIECE_BYTES);
    let ranges: Vec<_> = e.digests().into_iter().map(|(r, _)| r).collect();
    assert_eq!(ranges, [0..65_536, 65_536..131_072, 131_072..196_608]);
    assert!(FileEntry::new("x", &data[..65_536], MIN_PIECE_BYTES).pieces.is_none());
    assert!(FileEntry::new("x", b"", MIN_PIECE_BYTES).digests() == [(0..0, sha256_hex(b"").as_str())]);
}

/// Rewrites `meta.csv` and its manifest entry so only the content check can catch the problem.
fn with_meta(csv: &str) -> Result<Bundle, BundleError> {
    let mut f = files(DType::F32);
    let mut m = Manifest::parse(&f.last().unwrap().1).unwrap();
    let e = m.files.iter_mut().find(|e| e.path == "meta.csv").unwrap();
    (e.bytes, e.sha256) = (csv.len() as u64, sha256_hex(csv.as_bytes()));
    replace(&mut f, "meta.csv", csv.as_bytes().to_vec());
    replace(&mut f, MANIFEST, serde_json::to_vec(&m).unwrap());
    read(&f)
}

#[test]
fn metadata_errors_name_row_and_column() {
    let err = with_meta("model,language\nA,en\nA,de\nB,en\n").unwrap_err().to_string();
    assert_eq!(
        err,
        "bundle file meta.csv, column culture: missing required column (columns present: model, language)"
    );
    let err = with_meta("model,language,culture\nA,en,X\nA,,Y\nB,en,X\n").unwrap_err().to_string();
    assert_eq!(err, "bundle file meta.csv, row 1, column language: empty value");
    let err = with_meta("model,language,culture\nA,en,X\nA,de,Y\n").unwrap_err().to_string();
    assert!(
        err.contains("row-count mismatch: 2 data rows but the manifest (and the embeddings) have 3"),
        "{err}"
    );
    let err = with_meta("model,model,language,culture\nA,A,en,X\n").unwrap_err().to_string();
    assert_eq!(err, "bundle file meta.csv, column model: duplicated column name");
    let err = with_meta("model,language,culture\nA,en,X\nA,de,Y\nC,en,X\n").unwrap_err().to_string();
    assert!(err.contains("`models` does not match"), "{err}");
    let err = with_meta("model,language,culture,thumbnail\nA,en,X,t/0.jpg\nA,de,Y,\nB,en,X,\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "bundle file meta.csv, row 0, column thumbnail: thumbnail `t/0.jpg` is not listed in the manifest"
    );
}

/// The words the browser app reads a file into: its bytes in memory order, zero-padded to a
/// whole word.
fn words_of(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks(4)
        .map(|c| u32::from_ne_bytes(std::array::from_fn(|i| c.get(i).copied().unwrap_or(0))))
        .collect()
}

#[test]
fn decoding_from_words_equals_decoding_from_bytes() {
    for dtype in [DType::F32, DType::F16] {
        let f = files(dtype);
        let manifest = read(&f).unwrap().manifest;
        let bytes = &f.iter().find(|(p, _)| *p == manifest.embeddings).unwrap().1;
        let words = decode_embeddings_words(&manifest, words_of(bytes), bytes.len()).unwrap();
        assert_eq!(words, decode_embeddings(&manifest, bytes).unwrap(), "{dtype:?}");
        assert_eq!(words, EMB);
        // A short file is refused by size, and a NaN is named by row and column, as from bytes.
        let short = decode_embeddings_words(&manifest, words_of(&bytes[..bytes.len() - 2]), bytes.len() - 2);
        assert!(short.unwrap_err().to_string().contains("expected 3 × 2"), "{dtype:?}");
    }
    let f = files(DType::F32);
    let manifest = read(&f).unwrap().manifest;
    let mut bytes = f.iter().find(|(p, _)| *p == manifest.embeddings).unwrap().1.clone();
    bytes[12..16].copy_from_slice(&f32::NAN.to_le_bytes());
    let nan = decode_embeddings_words(&manifest, words_of(&bytes), bytes.len()).unwrap_err().to_string();
    assert_eq!(nan, "bundle file embeddings.f32, row 1, column dim 1: non-finite value NaN");
}

#[test]
fn bad_embeddings_are_rejected() {
    let nan = build_bundle(&spec(DType::F32), &[1.0, 0.0, f32::NAN, 1.0, 1.0, 1.0], 2, &columns(), vec![]);
    assert_eq!(
        nan.unwrap_err().to_string(),
        "bundle file embeddings.f32, row 1, column dim 0: non-finite value NaN"
    );
    let zero = build_bundle(&spec(DType::F32), &[1.0, 0.0, 1.0, 1.0, 0.0, 0.0], 2, &columns(), vec![]);
    assert!(zero.unwrap_err().to_string().starts_with("bundle file embeddings.f32, row 2: zero-norm"));
    // 1e6 does not fit in f16.
    let overflow = build_bundle(&spec(DType::F16), &[1e6, 0.0, 1.0, 1.0, 1.0, 1.0], 2, &columns(), vec![]);
    assert!(overflow.unwrap_err().to_string().contains("non-finite value inf"));
}

#[test]
fn manifest_problems_are_rejected() {
    let f = files(DType::F32);
    let good: serde_json::Value = serde_json::from_slice(&f.last().unwrap().1).unwrap();
    let check = |edit: &dyn Fn(&mut serde_json::Value), expect: &str| {
        let mut v = good.clone();
        edit(&mut v);
        let err = Manifest::parse(&serde_json::to_vec(&v).unwrap()).unwrap_err().to_string();
        assert!(err.starts_with("bundle file manifest.json: ") && err.contains(expect), "{err}");
    };
    check(&|v| v["format_version"] = 2.into(), "format_version 2 is not supported");
    check(&|v| v["format"] = "zip".into(), "format is `zip`");
    check(&|v| v["rows"] = 4.into(), "has 24 bytes but rows × dim × 4 = 32");
    check(&|v| v["files"][1]["path"] = "../meta.csv".into(), "must be relative");
    check(&|v| v["metadata"] = "other.csv".into(), "`other.csv` is not listed");
    check(&|v| v["files"][0]["sha256"] = "xyz".into(), "64 hex digits");
    check(&|v| v.as_object_mut().unwrap().retain(|k, _| k != "dim"), "missing field `dim`");
    let pieces =
        |bytes: u64, n: usize| serde_json::json!({"bytes": bytes, "sha256": vec!["ab".repeat(32); n]});
    check(
        &|v| v["files"][0]["pieces"] = pieces(1024, 1),
        "pieces.bytes is 1024, less than the 65536-byte minimum",
    );
    check(
        &|v| v["files"][0]["pieces"] = pieces(MIN_PIECE_BYTES, 2),
        "pieces.sha256 lists 2 digests, but 24 bytes in 65536-byte pieces make 1",
    );
    check(
        &|v| {
            v["files"][0]["pieces"] = pieces(MIN_PIECE_BYTES, 1);
            v["files"][0]["pieces"]["sha256"][0] = "ab".into();
        },
        "files[0] (embeddings.f32): pieces.sha256[0] must be 64 hex digits",
    );
    let err = Manifest::parse(b"<html>not found</html>").unwrap_err().to_string();
    assert!(err.contains("not a culturelens bundle manifest"), "{err}");
}

const MAGBIG: &str = "model,language,set,n_prompts,n_images,mad,mad_random,male_share\n\
                      m,de,direct,2,7,0.75,0.3125,0.625\nm,en,direct,1,4,1,0.375,1\n";
const CULTEXT2I: &str =
    "model,language,concept,template,n,na,na_acc,cd,dp_modern\nm,de,city,t,2,0.5,0.5,0.5,0.7\n";
const REPORT: &str = r#"{"nationalities":["german","spanish"],"dimensions":["modern"],
    "confusion":{"m":{"counts":[[1,1],[0,1]],"n":3,"accuracy":0.6666666666666666}},"ccs":[]}"#;

fn with_results() -> Vec<(String, Vec<u8>)> {
    let mut f = files(DType::F32);
    let results = ResultFiles {
        magbig: Some(MAGBIG.into()),
        magbig_attributes: Some(b"model,language,set,prompt_id,gender\nm,de,direct,p1,male\n".to_vec()),
        cultext2i: Some(CULTEXT2I.into()),
        cultext2i_report: Some(REPORT.into()),
    };
    attach_results(&mut f, results, PIECE_BYTES).unwrap();
    f
}

#[test]
fn result_tables_travel_with_their_checksums() {
    let f = with_results();
    let b = read(&f).unwrap();
    let r = &b.manifest.results;
    assert_eq!(r.magbig.as_deref(), Some("results/magbig.csv"));
    assert_eq!(r.cultext2i_report.as_deref(), Some("results/cultext2i-report.json"));
    assert_eq!(b.manifest.files.len(), 6);
    for (_, path) in r.paths() {
        let bytes = &f.iter().find(|(p, _)| p == path).unwrap().1;
        check_file(&b.manifest, path, bytes).unwrap();
    }
    let rows = parse_magbig("results/magbig.csv", MAGBIG.as_bytes()).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].n_images, rows[0].mad, rows[0].mad_random), (7, 0.75, 0.3125));
    let c = parse_cultext2i("c.csv", CULTEXT2I.as_bytes()).unwrap();
    assert_eq!(c[0].dp, [("modern".to_string(), 0.7)]);
    let report = parse_cultext2i_report("r.json", REPORT.as_bytes()).unwrap();
    assert_eq!(report.confusion["m"].counts, [[1, 1], [0, 1]]);
    // Bundles without results keep their manifest unchanged (no `results` key).
    let plain = files(DType::F32).pop().unwrap().1;
    assert!(!String::from_utf8_lossy(&plain).contains("results"));
}

#[test]
fn bad_result_tables_are_refused() {
    let bad = |results: ResultFiles| {
        attach_results(&mut files(DType::F32), results, PIECE_BYTES).unwrap_err().to_string()
    };
    let e = bad(ResultFiles { magbig: Some(b"model,language,set\nm,de,x\n".to_vec()), ..Default::default() });
    assert!(e.starts_with("bundle file results/magbig.csv: header is `model,language,set`"), "{e}");
    let e = bad(ResultFiles { magbig: Some(MAGBIG.replace("0.3125", "abc").into()), ..Default::default() });
    assert_eq!(e, "bundle file results/magbig.csv, row 0, column mad_random: `abc` is not a number");
    let e = bad(ResultFiles {
        cultext2i: Some(CULTEXT2I.replace("dp_modern", "extra").into()),
        ..Default::default()
    });
    assert!(e.contains("column extra: columns after `cd` must be `dp_<label>`"), "{e}");
    let e = bad(ResultFiles {
        cultext2i_report: Some(REPORT.replace("[[1,1],[0,1]]", "[[1]]").into()),
        ..Default::default()
    });
    assert!(e.contains("confusion matrix of model `m` is not 2 × 2"), "{e}");
    let e = bad(ResultFiles {
        magbig_attributes: Some(b"model,language,set,gender\n".to_vec()),
        ..Default::default()
    });
    assert!(e.contains("column prompt_id: missing required column"), "{e}");

    // A manifest that lists a result table beyond the limit is refused before any download.
    let mut f = with_results();
    let mut m: serde_json::Value = serde_json::from_slice(&f.last().unwrap().1).unwrap();
    let entry =
        m["files"].as_array_mut().unwrap().iter_mut().find(|e| e["path"] == "results/magbig.csv").unwrap();
    entry["bytes"] = serde_json::json!(MAX_RESULT_BYTES + 1);
    f.last_mut().unwrap().1 = serde_json::to_vec(&m).unwrap();
    let e = Manifest::parse(&f.last().unwrap().1).unwrap_err().to_string();
    assert!(e.contains("results.magbig `results/magbig.csv` is listed with 67108865 bytes"), "{e}");
    let mut m: serde_json::Value = serde_json::from_slice(&with_results().last().unwrap().1).unwrap();
    m["results"]["cultext2i"] = serde_json::json!("results/absent.csv");
    let e = Manifest::parse(&serde_json::to_vec(&m).unwrap()).unwrap_err().to_string();
    assert!(e.contains("`results/absent.csv` is not listed in `files`"), "{e}");
}

/// The branch-free f16 conversion is `half`'s on every one of the 65,536 bit patterns (zeros,
/// subnormals, normals, infinities and NaNs with their payloads), to the bit.
#[test]
fn f16_to_f32_is_halfs_on_every_bit_pattern() {
    for bits in 0..=u16::MAX {
        let want = half::f16::from_bits(bits).to_f32().to_bits();
        assert_eq!(crate::read::f16_to_f32(bits).to_bits(), want, "{bits:#06x}");
    }
}

/// An f16 file of 3 × 3 values (18 bytes: the last word half padding, rows straddling words) or
/// of 3 × 4 (rows of whole words, each decoded and checked in one pass), and the f32 files of the
/// same values, decoded while they arrive, in pieces of one word, none and the rest, give what
/// decoding the whole file gives; a NaN is named by row and column as there, and a row of zeros
/// of either sign is refused.
#[test]
fn a_file_decoded_while_it_arrives_is_the_file_decoded_whole() {
    let values = [1.0, 0.5, -0.25, 2.0, 0.0, 3.0, 65504.0, -6.1e-5, 1e-7, -1.5, 0.125, 7.0];
    for (dim, dtype) in [3, 4].into_iter().flat_map(|d| [(d, DType::F16), (d, DType::F32)]) {
        let emb = &values[..3 * dim];
        let f = build_bundle(&spec(dtype), emb, dim, &columns(), vec![]).unwrap();
        let manifest = read(&f).unwrap().manifest;
        let mut bytes = f.iter().find(|(p, _)| *p == manifest.embeddings).unwrap().1.clone();
        assert_eq!(bytes.len(), 3 * dim * dtype.size());
        // Room made before the first piece, after the first (the backlog), or never (all at
        // finish); the pieces end mid-row.
        let streamed = |bytes: &[u8], room_after: usize| {
            let words = words_of(bytes);
            let mut stream = TableStream::new(&manifest);
            for (piece, upto) in [1, 1, 2, 5, words.len()].into_iter().enumerate() {
                if piece == room_after {
                    stream.reserve_for(bytes.len() as u64);
                }
                stream.advance(&words[..upto.min(words.len())]);
            }
            stream.finish(&manifest, words, bytes.len())
        };
        let whole = decode_embeddings(&manifest, &bytes).unwrap();
        for room_after in [0, 2, 9] {
            assert_eq!(
                streamed(&bytes, room_after).unwrap(),
                whole,
                "{dtype:?} × {dim}, room after piece {room_after}"
            );
        }
        assert_eq!(decode_embeddings_words(&manifest, words_of(&bytes), bytes.len()).unwrap(), whole);
        assert_eq!(whole[6], 65504.0);
        // A bad row found while the file arrives, or only at the end, is the error of the whole
        // file: its first bad row (row 1, a NaN; row 2 is all zeros).
        let at = |value: usize| value * dtype.size()..(value + 1) * dtype.size();
        let (nan, negative_zero) = match dtype {
            DType::F16 => (half::f16::NAN.to_le_bytes().to_vec(), half::f16::NEG_ZERO.to_le_bytes().to_vec()),
            DType::F32 => (f32::NAN.to_le_bytes().to_vec(), (-0.0f32).to_le_bytes().to_vec()),
        };
        bytes[at(dim + 2)].copy_from_slice(&nan);
        for v in 2 * dim..3 * dim {
            bytes[at(v)].fill(0);
        }
        let expected = decode_embeddings(&manifest, &bytes).unwrap_err().to_string();
        let name = manifest.embeddings.as_str();
        assert_eq!(expected, format!("bundle file {name}, row 1, column dim 2: non-finite value NaN"));
        for room_after in [0, 2, 9] {
            assert_eq!(streamed(&bytes, room_after).unwrap_err().to_string(), expected, "{dtype:?} × {dim}");
        }
        // Row 1 all zeros, negative ones among them (the sign bit alone is no value).
        for v in dim..2 * dim {
            bytes[at(v)].copy_from_slice(if v % 2 == 0 { &negative_zero } else { &[0; 4][..dtype.size()] });
        }
        for room_after in [0, 9] {
            let zero = streamed(&bytes, room_after).unwrap_err().to_string();
            assert!(zero.starts_with(&format!("bundle file {name}, row 1: zero-norm embedding")), "{zero}");
        }
    }
}
