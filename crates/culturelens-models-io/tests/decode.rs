//! Damaged image files are refused exactly where Pillow refuses them, so `embed` never embeds an
//! image that transformers or open_clip would not load: every truncation of the committed JPEG,
//! PNG and WebP files, and every single-byte corruption of the JPEG files' entropy-coded data
//! (`scripts/fixtures/make_decode.py`, Pillow 13.0.0 with libjpeg-turbo 3.2.0). A truncated file
//! is refused by name ("image file is truncated", as Pillow says), and the pixels of a truncated
//! JPEG both accept (cut after its last scanline) equal Pillow's. One deliberate difference: a
//! PNG cut within its last 22 bytes (the end of the compressed stream, the last chunk's CRC,
//! `IEND`), which Pillow still loads, is refused here.

use culturelens_models::preprocess::{Alpha, TRUNCATED, to_rgb8};
use culturelens_models_io::decode_image;
use culturelens_testkit::{fixture, read_fixture, sha256};
use serde_json::Value;

/// Whether `n` is inside one of the `[first, last]` ranges.
fn within(ranges: &Value, n: usize) -> bool {
    ranges.as_array().unwrap().iter().any(|r| {
        let (first, last) = (r[0].as_u64().unwrap() as usize, r[1].as_u64().unwrap() as usize);
        (first..=last).contains(&n)
    })
}

/// A decoding result as the disagreement messages show it.
fn shown<T, E: std::fmt::Display>(result: Result<T, E>) -> String {
    match result {
        Ok(_) => "accepted".to_string(),
        Err(e) => format!("refused ({e})"),
    }
}

#[test]
fn damaged_files_are_refused_where_pillow_refuses_them() {
    let reference: Value = serde_json::from_str(&read_fixture("decode/pillow_damaged.json")).unwrap();
    let files = reference["files"].as_object().unwrap();
    assert_eq!(files.len(), 11);
    for (rel, case) in files {
        let data = std::fs::read(fixture(rel)).unwrap();
        assert_eq!(data.len() as u64, case["size"].as_u64().unwrap(), "{rel}");
        let jpeg = rel.ends_with(".jpg");
        let mut pixels: Vec<u8> = Vec::new();
        let mut disagree = Vec::new();
        let mut unnamed = Vec::new();
        // A cut past the start of the image data (the last start of scan of a JPEG, the first
        // IDAT chunk of a PNG) must be refused as truncated.
        let data_start = if jpeg {
            case["scan_start"].as_u64().unwrap() as usize + 2
        } else {
            data.windows(4).position(|w| w == b"IDAT").unwrap_or(data.len()) + 8
        };
        for cut in 1..=data.len() {
            let refused = within(&case["refused_cuts"], cut);
            match decode_image(&data[..cut]) {
                Ok(decoded) if !refused => {
                    if jpeg && cut < data.len() {
                        pixels.extend(to_rgb8(&decoded.image, Alpha::Drop).data);
                    }
                }
                Err(e) if refused => {
                    if cut > data_start && !e.to_string().contains("image file is truncated") {
                        unnamed.push((cut, e.to_string()));
                    }
                }
                other => {
                    disagree.push(format!("cut {cut}: ours {:?}, Pillow refuses: {refused}", other.err()))
                }
            }
        }
        if jpeg {
            let start = case["scan_start"].as_u64().unwrap() as usize;
            for mask in [0xFFu8, 0x55] {
                let refused_at = &case["refused_flips"][format!("0x{mask:02x}")];
                for i in start..data.len() {
                    let mut damaged = data.clone();
                    damaged[i] ^= mask;
                    let refused = within(refused_at, i);
                    match decode_image(&damaged) {
                        Ok(_) if !refused => {}
                        Err(_) if refused => {}
                        other => disagree.push(format!(
                            "byte {i} ^ {mask:#x}: ours {}, Pillow refuses: {refused}",
                            shown(other)
                        )),
                    }
                }
            }
        }
        // The one difference allowed: a PNG missing at most its last 22 bytes, refused here.
        let png_tail = |d: &String| {
            let cut: usize = d.trim_start_matches("cut ").split(':').next().unwrap().parse().unwrap_or(0);
            rel.ends_with(".png") && d.starts_with("cut ") && d.contains(TRUNCATED) && cut + 22 >= data.len()
        };
        let (allowed, disagree): (Vec<String>, Vec<String>) = disagree.into_iter().partition(png_tail);
        assert!(
            disagree.is_empty(),
            "{rel}: {} disagreements with Pillow: {:?}",
            disagree.len(),
            &disagree[..disagree.len().min(8)]
        );
        assert!(allowed.len() <= 22, "{rel}");
        assert!(unnamed.is_empty(), "{rel}: truncations not named: {:?}", &unnamed[..unnamed.len().min(4)]);
        if jpeg {
            let want = case["accepted_cuts_sha256"].as_str().unwrap();
            assert_eq!(sha256(&pixels), want, "{rel}: the pixels of the accepted truncations");
        }
    }
}
