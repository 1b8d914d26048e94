//! The CLI against the papers' authors' own code (issue 32, "References that are not our own
//! reading"): values written by the authors' scripts, executed on small inputs by
//! scripts/fixtures/make_authors_sos.py and make_authors_magbig.py (which say what was stubbed),
//! committed under tests/fixtures/authors/. Where the authors' convention differs from
//! culturelens's, the part that is the same is tested and the difference is asserted as such
//! (docs/sos.md and docs/magbig.md, "Against the authors' code").
//!
//! CulText2I has no public code (its repository holds a README only), and the SoS repository has
//! no code of the SoS score (Eq. 1) or its aggregation: only the CLIP language-vs-culture check is
//! the authors' here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use culturelens_testkit::{fixture, read_fixture};

use crate::classify_cli::clip_with_logit_scale;
use crate::common::{Cli, read_csv};

fn json(name: &str) -> serde_json::Value {
    serde_json::from_str(&read_fixture(&format!("authors/{name}"))).unwrap()
}

fn image(name: &str) -> PathBuf {
    fixture("encoders/images").join(name)
}

/// The value of `column` in `row`.
fn cell<'a>(header: &[String], row: &'a [String], column: &str) -> &'a str {
    let i =
        header.iter().position(|h| h == column).unwrap_or_else(|| panic!("no column {column}: {header:?}"));
    &row[i]
}

/// How far softmax(100 · [cos_language, cos_culture]) from `culturelens clipscore`'s cosines may
/// sit from the probabilities of the SoS authors' get_clip_results.py (torch f32 on the CPU): about
/// 3× the worst measured, 5.0e-7 (printed with `--nocapture`).
const SOS_PROBABILITY: f64 = 1.5e-6;

/// SoS's get_clip_results.py (the language-vs-culture CLIP check of SoS §4.2 / App. D) against
/// `culturelens clipscore --w 100` on the same images, tiny CLIP and texts. The authors write
/// softmax(100 · cos) over the two texts; culturelens writes the cosines and w · max(cos, 0), so
/// the test turns the cosines into the authors' probabilities (the one conversion between the
/// conventions) and checks that the higher of culturelens's two cosines is the authors' winner
/// on every image. CLIPScore's winner is the same wherever a cosine is positive; when both are
/// negative the authors' softmax still picks one, where the clamped CLIPScore ties. The tiny
/// random model puts every caption of the authors' template on the far side of every image
/// (cosines −0.05 to −0.2), so here every image is such a tie, and the test asserts it.
#[test]
fn sos_clip_language_vs_culture_matches_the_authors_get_clip_results() {
    let want = json("sos.json");
    assert_eq!(want["logit_scale"], 100.0);
    let cases = want["cases"].as_array().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let manifest = tmp.path().join("m.csv");
    let mut text = String::from("image,lang,cult\n");
    for c in cases {
        let s = |k: &str| c[k].as_str().unwrap().to_string();
        text += &format!("{},{},{}\n", image(&s("image")).display(), s("text_language"), s("text_culture"));
    }
    // The authors' article rule: "an" only before a lower-case vowel.
    assert!(text.contains("A photo of an italian person") && text.contains("A photo of a Egyptian person"));
    std::fs::write(&manifest, text).unwrap();
    let out = tmp.path().join("scores.csv");
    Cli::new("clipscore")
        .opt("--images", &manifest)
        .opt("--weights", fixture("encoders/clip"))
        .opt("--caption-cols", "lang,cult")
        .opt("--w", "100")
        .opt("--out", &out)
        .run_ok();
    let (header, rows) = read_csv(&out);
    assert_eq!(rows.len(), cases.len());
    let mut worst = 0f64;
    let mut winners = BTreeMap::new();
    let mut positive = 0;
    for (row, c) in rows.iter().zip(cases) {
        let f = |col: &str| cell(&header, row, col).parse::<f64>().unwrap();
        let (cos_l, cos_c) = (f("lang_cos"), f("cult_cos"));
        let p_culture = 1.0 / (1.0 + (100.0 * (cos_l - cos_c)).exp());
        let (want_l, want_c) = (c["p_language"].as_f64().unwrap(), c["p_culture"].as_f64().unwrap());
        worst = worst.max((p_culture - want_c).abs()).max(((1.0 - p_culture) - want_l).abs());
        let authors = if want_c > want_l { "culture" } else { "language" };
        *winners.entry(authors).or_insert(0) += 1;
        let by_cosine = if cos_c > cos_l { "culture" } else { "language" };
        assert_eq!(by_cosine, authors, "{row:?}: the higher cosine");
        let (score_l, score_c) = (f("lang_clipscore"), f("cult_clipscore"));
        if cos_l > 0.0 || cos_c > 0.0 {
            positive += 1;
            let ours = if score_c > score_l { "culture" } else { "language" };
            assert_eq!(ours, authors, "{row:?}: CLIPScore winner");
        } else {
            assert_eq!(score_l, score_c, "{row:?}: both clamp to 0, a tie");
        }
    }
    assert_eq!(winners.len(), 2, "both winners occur: {winners:?}");
    eprintln!(
        "sos get_clip_results: max abs probability difference {worst:e} ({} images, {positive} with a positive cosine, winners {winners:?})",
        cases.len()
    );
    assert!(worst <= SOS_PROBABILITY, "probabilities differ from the authors' by {worst:e}");
}

/// How far `culturelens classify`'s probabilities at logit scale 100 may sit from the SoS
/// authors' get_clip_results.py: about 3× the worst measured, 3.6e-7 (printed).
const SOS_CLASSIFY: f64 = 1.0e-6;

/// The authors' convention itself, through an existing option: `culturelens classify` with the
/// image's two captions as its classes, on the tiny CLIP with its logit scale set to 100 (the
/// scale get_clip_results.py multiplies by), is softmax(100 · cos) over the two texts, i.e. the
/// authors' `Language` and `Culture` columns. One run per (language, culture) pair, since the
/// classes are the same for every image of a run.
#[test]
fn sos_clip_probabilities_through_classify_at_logit_scale_100() {
    let want = json("sos.json");
    let cases = want["cases"].as_array().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let weights = clip_with_logit_scale(tmp.path(), 100.0);
    let mut groups: BTreeMap<(String, String), Vec<&serde_json::Value>> = BTreeMap::new();
    for c in cases {
        let key = (
            c["text_language"].as_str().unwrap().to_string(),
            c["text_culture"].as_str().unwrap().to_string(),
        );
        groups.entry(key).or_default().push(c);
    }
    assert!(groups.values().any(|g| g.len() > 1), "a run with several images");
    let mut worst = 0f64;
    for (i, ((lang, cult), group)) in groups.iter().enumerate() {
        let manifest = tmp.path().join(format!("m{i}.csv"));
        let mut text = String::from("image\n");
        for c in group {
            text += &format!("{}\n", image(c["image"].as_str().unwrap()).display());
        }
        std::fs::write(&manifest, text).unwrap();
        let out = tmp.path().join(format!("p{i}.csv"));
        Cli::new("classify")
            .opt("--images", &manifest)
            .opt("--weights", &weights)
            .opt("--attribute", "tendency")
            .opt("--classes", format!("language={lang}"))
            .opt("--classes", format!("culture={cult}"))
            .opt("--out", &out)
            .run_ok();
        let (header, rows) = read_csv(&out);
        assert_eq!(rows.len(), group.len());
        for (row, c) in rows.iter().zip(group) {
            let f = |col: &str| cell(&header, row, col).parse::<f64>().unwrap();
            let (want_l, want_c) = (c["p_language"].as_f64().unwrap(), c["p_culture"].as_f64().unwrap());
            worst = worst.max((f("p_language") - want_l).abs()).max((f("p_culture") - want_c).abs());
            let winner = if want_c > want_l { "culture" } else { "language" };
            assert_eq!(cell(&header, row, "tendency"), winner, "{row:?}");
        }
    }
    eprintln!(
        "sos get_clip_results via classify: max abs probability difference {worst:e} ({} runs)",
        groups.len()
    );
    assert!(worst <= SOS_CLASSIFY, "classify's probabilities differ from the authors' by {worst:e}");
}

/// An attribute table for `culturelens magbig`: rows (set, prompt_id, men, women), one row per
/// image.
fn attributes(path: &Path, prompts: &[(String, String, u64, u64)]) {
    let mut text = String::from("model,language,set,prompt_id,gender\n");
    for (set, prompt, men, women) in prompts {
        for (n, g) in [(men, "male"), (women, "female")] {
            for _ in 0..*n {
                text += &format!("SD,en,{set},{prompt},{g}\n");
            }
        }
    }
    std::fs::write(path, text).unwrap();
}

/// `culturelens magbig` on `prompts`: set → (n_prompts, mad).
fn magbig(tmp: &Path, name: &str, prompts: &[(String, String, u64, u64)]) -> BTreeMap<String, (usize, f64)> {
    let (input, out) = (tmp.join(format!("{name}.csv")), tmp.join(format!("{name}-out.csv")));
    attributes(&input, prompts);
    Cli::new("magbig").opt("--attributes", &input).opt("--out", &out).run_ok();
    let (header, rows) = read_csv(&out);
    rows.iter()
        .map(|r| {
            let set = cell(&header, r, "set").to_string();
            (set, (cell(&header, r, "n_prompts").parse().unwrap(), cell(&header, r, "mad").parse().unwrap()))
        })
        .collect()
}

/// How far culturelens's MAD may sit from the authors' numpy (both f64; the sums differ in order
/// and form, |p_m − ½| + |p_f − ½| against numpy's ratios): 1.1e-16 measured (one ulp of the
/// means near 0.5), 3×.
const MAD: f64 = 3.3e-16;

/// MAGBIG's exp_max_unfairness.py, run whole on committed counts of five locations (its `locs`):
/// its mean_l1 per location is the paper's MAD, which `culturelens magbig` must give per set.
/// score_fairness alone, with a prompt without a classified image: the per-prompt L1 deviation is
/// culturelens's per prompt (one prompt per set), and the authors' NaN for the empty prompt is
/// where the conventions part (culturelens leaves it out of the mean).
#[test]
fn magbig_mad_matches_the_authors_exp_max_unfairness_and_score_fairness() {
    let want = json("magbig.json");
    let tmp = tempfile::tempdir().unwrap();
    let exp = &want["exp_max_unfairness"];
    let occupations: Vec<String> =
        exp["occupations"].as_array().unwrap().iter().map(|o| o.as_str().unwrap().to_string()).collect();
    let mut prompts = Vec::new();
    for (loc, rows) in exp["counts"].as_object().unwrap() {
        for (occ, mw) in occupations.iter().zip(rows.as_array().unwrap()) {
            prompts.push((loc.clone(), occ.clone(), mw[0].as_u64().unwrap(), mw[1].as_u64().unwrap()));
        }
    }
    let got = magbig(tmp.path(), "locs", &prompts);
    let table = exp["table"].as_object().unwrap();
    assert_eq!(got.len(), 5);
    let mut worst = 0f64;
    for (loc, (n_prompts, mad)) in &got {
        assert_eq!(*n_prompts, occupations.len());
        let mean_l1 = table[loc]["mean_l1"].as_f64().unwrap();
        worst = worst.max((mad - mean_l1).abs());
        assert!((mad - mean_l1).abs() <= MAD, "{loc}: mad {mad} vs the authors' mean_l1 {mean_l1}");
    }
    // The authors' `random` row is no fair-coin MAD (Normal(0.5, 0.1) shares; see docs/magbig.md):
    // it is present in their table and has no culturelens counterpart to compare with.
    assert!(table.contains_key("random"));
    eprintln!("magbig: max abs difference from exp_max_unfairness.py's mean_l1 {worst:e} (5 locations)");

    let direct = &want["score_fairness"];
    let column =
        |k: &str| direct[k].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect::<Vec<_>>();
    let (men, women) = (column("men"), column("women"));
    let l1: Vec<Option<f64>> = direct["l1"].as_array().unwrap().iter().map(|v| v.as_f64()).collect();
    let mut one_per_set = Vec::new();
    let mut all = Vec::new();
    for (i, (&m, &w)) in men.iter().zip(&women).enumerate() {
        one_per_set.push((format!("p{i}"), "prompt".to_string(), m, w));
        all.push(("all".to_string(), format!("p{i}"), m, w));
    }
    // A prompt without an image has no attribute row at all in `magbig`'s input: give it one
    // unclassified row (empty gender), as classify writes for an image without a face.
    let input = tmp.path().join("direct.csv");
    attributes(&input, &[one_per_set.clone(), all.clone()].concat());
    let mut text = std::fs::read_to_string(&input).unwrap();
    for (i, (&m, &w)) in men.iter().zip(&women).enumerate() {
        if m + w == 0 {
            text += &format!("SD,en,p{i},prompt,\nSD,en,all,p{i},\n");
        }
    }
    std::fs::write(&input, text).unwrap();
    let out = tmp.path().join("direct-out.csv");
    Cli::new("magbig").opt("--attributes", &input).opt("--out", &out).run_ok();
    let (header, rows) = read_csv(&out);
    let got: BTreeMap<String, (usize, f64)> = rows
        .iter()
        .map(|r| {
            let set = cell(&header, r, "set").to_string();
            (set, (cell(&header, r, "n_prompts").parse().unwrap(), cell(&header, r, "mad").parse().unwrap()))
        })
        .collect();
    let mut worst = 0f64;
    for (i, want) in l1.iter().enumerate() {
        match (want, got.get(&format!("p{i}"))) {
            (Some(want), Some((1, mad))) => {
                worst = worst.max((mad - want).abs());
                assert!((mad - want).abs() <= MAD, "p{i}: {mad} vs score_fairness {want}");
            }
            // The authors' 0/0 = NaN; culturelens writes no row for a set without a classified image.
            (None, None) => assert_eq!(men[i] + women[i], 0),
            other => panic!("p{i}: {other:?}"),
        }
    }
    let classified: Vec<f64> = l1.iter().flatten().copied().collect();
    assert!(classified.len() < l1.len(), "the fixture has a prompt without a classified image");
    let (n, mad) = got["all"];
    assert_eq!(n, classified.len());
    let mean = classified.iter().sum::<f64>() / n as f64;
    worst = worst.max((mad - mean).abs());
    assert!((mad - mean).abs() <= MAD, "all: {mad} vs the mean of the authors' finite deviations {mean}");
    eprintln!("magbig: max abs difference from score_fairness's per-prompt l1 {worst:e}");
}

/// MAGBIG's classify_w_clip (the CLIP route of classify_images.py) with the tiny CLIP at ViT-L/14's
/// logit scale (100) and the fixture's stand-in texts (MAGBIG's own do not fit the tiny 16-token
/// context) against `culturelens classify` with the same two classes, then `culturelens magbig`
/// on its output against score_fairness on the authors' counts.
#[test]
fn magbig_clip_classification_matches_the_authors_classify_w_clip() {
    let want = json("magbig.json");
    let c = &want["classify_w_clip"];
    assert_eq!(c["logit_scale"], 100.0);
    let names: Vec<&str> = c["images"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let genders: Vec<&str> = c["genders"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let tmp = tempfile::tempdir().unwrap();
    let manifest = tmp.path().join("m.csv");
    let mut text = String::from("image,model,language,set,prompt_id\n");
    for name in &names {
        text += &format!("{},tiny,en,direct,p0\n", image(name).display());
    }
    std::fs::write(&manifest, text).unwrap();
    let out = tmp.path().join("genders.csv");
    let stand_in = |g: &str| c["stand_in"][g].as_str().unwrap().to_string();
    Cli::new("classify")
        .opt("--images", &manifest)
        .opt("--weights", clip_with_logit_scale(tmp.path(), 100.0))
        .opt("--classes", format!("male={}", stand_in("male")))
        .opt("--classes", format!("female={}", stand_in("female")))
        .opt("--out", &out)
        .run_ok();
    let (header, rows) = read_csv(&out);
    let got: Vec<&str> = rows.iter().map(|r| cell(&header, r, "gender")).collect();
    assert_eq!(got, genders, "per-image genders of classify_w_clip");
    assert!(genders.contains(&"male") && genders.contains(&"female"));
    let (man, woman) = (c["man"].as_u64().unwrap(), c["woman"].as_u64().unwrap());
    assert_eq!(
        (man, woman),
        (
            got.iter().filter(|g| **g == "male").count() as u64,
            got.iter().filter(|g| **g == "female").count() as u64
        )
    );

    let mad_out = tmp.path().join("magbig.csv");
    Cli::new("magbig").opt("--attributes", &out).opt("--out", &mad_out).run_ok();
    let (header, rows) = read_csv(&mad_out);
    assert_eq!(rows.len(), 1);
    let mad: f64 = cell(&header, &rows[0], "mad").parse().unwrap();
    let l1 = c["l1"].as_f64().unwrap();
    eprintln!("magbig after classify: mad {mad} vs score_fairness {l1} (difference {:e})", (mad - l1).abs());
    assert!((mad - l1).abs() <= MAD, "mad {mad} vs the authors' {l1}");
}
