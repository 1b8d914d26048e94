//! Golden and property tests of SoS on the CPU (`flex`) backend. The golden case is computed by
//! hand in the comments; the wgpu backend is checked against these numbers in `tests/`.

use super::*;
use culturelens_rng::SplitMix64;
use culturelens_testkit::cpu;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// Eight outputs in 2-D. Model A draws by language (en → x-axis, de → y-axis); model B by culture
/// (X → x-axis, Y → y-axis). Rows are scaled by k = 1..8 to check that embeddings are normalised.
struct Golden {
    emb: Vec<f32>,
    model: Vec<String>,
    language: Vec<String>,
    culture: Vec<String>,
    person: Vec<String>,
}

fn golden() -> Golden {
    let axes = [[1., 0.], [0., 1.], [1., 0.], [0., 1.], [1., 0.], [1., 0.], [0., 1.], [0., 1.]];
    let emb = axes.iter().enumerate().flat_map(|(k, v)| v.map(|x: f32| x * (k + 1) as f32)).collect();
    Golden {
        emb,
        model: s(&["A", "A", "A", "A", "B", "B", "B", "B"]),
        language: s(&["en", "de", "en", "de", "en", "de", "en", "de"]),
        culture: s(&["X", "X", "Y", "Y", "X", "X", "Y", "Y"]),
        person: s(&["woman", "man", "man", "woman", "woman", "woman", "man", "man"]),
    }
}

impl Golden {
    fn cols(&self) -> SosColumns<'_> {
        SosColumns {
            model: &self.model,
            language: &self.language,
            culture: &self.culture,
            layer: None,
            person: Some(&self.person),
        }
    }
}

fn assert_close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol, "index {i}: {x} vs {y} (all: {a:?} vs {b:?})");
    }
}

// Pooled references (unit vectors; every group has 4 outputs):
//   sur_en = (1,0)+(1,0)+(1,0)+(0,1) ∝ (3,1)/√10    sur_de ∝ (1,3)/√10
//   sem_X  = (1,0)+(0,1)+(1,0)+(1,0) ∝ (3,1)/√10    sem_Y  ∝ (1,3)/√10
// SoS(o) = cos(sem_c, e) − cos(sur_l, e), with a = 2/√10:
//   A: 3/√10−3/√10 = 0, 1/√10−3/√10 = −a, 1/√10−3/√10 = −a, 0
//   B: 0, 3/√10−1/√10 = +a, +a, 0
const A: f64 = 0.632_455_532_033_675_9; // 2/√10

#[test]
fn golden_per_image_pooled() {
    let g = golden();
    let (_, values, report) = sos(g.emb.clone(), 2, g.cols(), Pooling::All, &cpu(), Some(3)).unwrap();
    let got: Vec<f64> = values.per_image.iter().map(|v| f64::from(*v)).collect();
    assert_close(&got, &[0.0, -A, -A, 0.0, 0.0, A, A, 0.0], 1e-6);
    // ‖mean of unit vectors‖ = |(3,1)/4| = √10/4 for every reference.
    let r = 10f64.sqrt() / 4.0;
    assert_close(&values.sur_mean_norm.iter().map(|v| f64::from(*v)).collect::<Vec<_>>(), &[r, r], 1e-6);

    // Joint scores: one output per cell, sorted by (model, language, culture).
    let joint: Vec<(&str, &str, &str, usize)> = report
        .joint
        .iter()
        .map(|j| (j.model.as_str(), j.language.as_str(), j.culture.as_str(), j.n))
        .collect();
    assert_eq!(
        joint,
        [
            ("A", "de", "X", 1),
            ("A", "de", "Y", 1),
            ("A", "en", "X", 1),
            ("A", "en", "Y", 1),
            ("B", "de", "X", 1),
            ("B", "de", "Y", 1),
            ("B", "en", "X", 1),
            ("B", "en", "Y", 1)
        ]
    );
    let sos: Vec<f64> = report.joint.iter().map(|j| j.sos).collect();
    assert_close(&sos, &[-A, 0.0, 0.0, -A, A, 0.0, 0.0, A], 1e-6);
}

#[test]
fn golden_summaries_flags_correlation_and_person_means() {
    let g = golden();
    let (_, _, report) = sos(g.emb.clone(), 2, g.cols(), Pooling::All, &cpu(), Some(3)).unwrap();
    // Model A: [0, −a, −a, 0] → mean −a/2, median −a/2, q1 = −a (h = 0.75 between −a and −a), q3 = 0.
    let a = &report.per_model["A"];
    assert_close(&[a.mean, a.median, a.q1, a.q3, a.min, a.max], &[-A / 2., -A / 2., -A, 0., -A, 0.], 1e-6);
    let b = &report.per_model["B"];
    assert_close(&[b.mean, b.median, b.q1, b.q3, b.min, b.max], &[A / 2., A / 2., 0., A, 0., A], 1e-6);

    // Model–language medians: A-de, A-en = −a/2; B-de, B-en = +a/2. P25 of
    // [−a/2, −a/2, a/2, a/2] (h = 0.75) = −a/2, so both A pairs are flagged, no B pair.
    assert_close(&[report.strong_surface_threshold], &[-A / 2.], 1e-6);
    let flags: Vec<(&str, &str, bool)> = report
        .language_medians
        .iter()
        .map(|m| (m.model.as_str(), m.language.as_str(), m.strong_surface))
        .collect();
    assert_eq!(flags, [("A", "de", true), ("A", "en", true), ("B", "de", false), ("B", "en", false)]);

    // Pearson over (model, culture) cells: de = [−a, 0, a, 0], en = [0, −a, 0, a] → r = 0.
    let c = &report.language_correlation;
    assert_eq!(c.languages, ["de", "en"]);
    assert_eq!(c.pairs, [[4, 4], [4, 4]]);
    assert!((c.r[0][0].unwrap() - 1.0).abs() < 1e-12);
    assert!(c.r[0][1].unwrap().abs() < 1e-6);

    // Person means. Overall: woman rows 1,4,5,6 = [0, 0, 0, a] → a/4; man rows 2,3,7,8 → −a/4.
    // Per model: A woman [0, 0] → 0, A man [−a, −a] → −a, B woman [0, a] → a/2, B man [a, 0] → a/2.
    let p: Vec<(Option<&str>, &str, usize, f64)> =
        report.person_means.iter().map(|p| (p.model.as_deref(), p.person.as_str(), p.n, p.mean)).collect();
    let expect = [
        (None, "man", 4, -A / 4.),
        (None, "woman", 4, A / 4.),
        (Some("A"), "man", 2, -A),
        (Some("A"), "woman", 2, 0.),
        (Some("B"), "man", 2, A / 2.),
        (Some("B"), "woman", 2, A / 2.),
    ];
    assert_eq!(p.len(), expect.len());
    for (got, want) in p.iter().zip(expect) {
        assert_eq!((got.0, got.1, got.2), (want.0, want.1, want.2));
        assert!((got.3 - want.3).abs() < 1e-6, "{got:?} vs {want:?}");
    }
}

// Per-model references. A: sur_en = (1,0), sur_de = (0,1), sem_X = sem_Y ∝ (1,1)/√2, so every A
// output scores 1/√2 − 1. B: sur_en = sur_de ∝ (1,1)/√2, sem_X = (1,0), sem_Y = (0,1): 1 − 1/√2.
#[test]
fn golden_per_model_pooling() {
    let g = golden();
    let (_, values, _) = sos(g.emb.clone(), 2, g.cols(), Pooling::PerModel, &cpu(), None).unwrap();
    let h = 1.0 - std::f64::consts::FRAC_1_SQRT_2;
    let got: Vec<f64> = values.per_image.iter().map(|v| f64::from(*v)).collect();
    assert_close(&got, &[-h, -h, -h, -h, h, h, h, h], 1e-6);
}

// An asymmetric per-model case (2-D; rows 5 and 7 scaled by 2 and 3). Per-model references
// (unit vectors summed, then normalised):
//   A: sur_en ∝ (1,1)/√2, sur_de = (1,0), sem_X = (1,0), sem_Y ∝ (1,1)/√2
//   B: sur_en ∝ (1,1)/√2, sur_de = (0,1), sem_X ∝ (1,1)/√2, sem_Y = (0,1)
// SoS(o) = cos(sem_c, e) − cos(sur_l, e), h = 1 − 1/√2:
//   A: (en,X,(1,0)) 1 − 1/√2 = h; (en,Y,(0,1)) 1/√2 − 1/√2 = 0; (de,X,(1,0)) 1 − 1 = 0;
//      (de,Y,(1,0)) 1/√2 − 1 = −h
//   B: (en,X,(1,0)) 0; (de,X,(0,1)) 1/√2 − 1 = −h; (en,Y,(0,1)) 1 − 1/√2 = h; (de,Y,(0,1)) 0
// Per model the scores are {−h, 0, 0, h}: mean 0, median 0, q1 = −h + 0.75·h = −h/4, q3 = h/4.
// ‖mean of unit vectors‖: A/en 1/√2, A/de 1, B/en 1/√2, B/de 1 (surface); A/X 1, A/Y 1/√2,
// B/X 1/√2, B/Y 1 (semantic).
#[test]
fn per_model_pooling_hand_case() {
    let emb = vec![1., 0., 0., 1., 1., 0., 1., 0., 2., 0., 0., 1., 0., 3., 0., 1.];
    let model = s(&["A", "A", "A", "A", "B", "B", "B", "B"]);
    let language = s(&["en", "en", "de", "de", "en", "de", "en", "de"]);
    let culture = s(&["X", "Y", "X", "Y", "X", "X", "Y", "Y"]);
    let cols =
        SosColumns { model: &model, language: &language, culture: &culture, layer: None, person: None };
    let (layout, values, report) = sos(emb.clone(), 2, cols, Pooling::PerModel, &cpu(), Some(3)).unwrap();
    let h = 1.0 - std::f64::consts::FRAC_1_SQRT_2;
    let got: Vec<f64> = values.per_image.iter().map(|v| f64::from(*v)).collect();
    assert_close(&got, &[h, 0., 0., -h, 0., -h, h, 0.], 1e-6);

    let r = std::f64::consts::FRAC_1_SQRT_2;
    let norms = |names: &[String], norms: &[f32]| -> Vec<(String, f64)> {
        assert_eq!(names.len(), norms.len());
        let mut v: Vec<(String, f64)> =
            names.iter().cloned().zip(norms.iter().map(|x| f64::from(*x))).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let sur = norms(&layout.sur_names, &values.sur_mean_norm);
    let sem = norms(&layout.sem_names, &values.sem_mean_norm);
    assert_eq!(sur.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(), ["A/de", "A/en", "B/de", "B/en"]);
    assert_close(&sur.iter().map(|x| x.1).collect::<Vec<_>>(), &[1., r, 1., r], 1e-6);
    assert_eq!(sem.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(), ["A/X", "A/Y", "B/X", "B/Y"]);
    assert_close(&sem.iter().map(|x| x.1).collect::<Vec<_>>(), &[1., r, r, 1.], 1e-6);

    // Joint scores, sorted by (model, language, culture).
    let keys: Vec<String> =
        report.joint.iter().map(|j| format!("{}/{}/{}", j.model, j.language, j.culture)).collect();
    assert_eq!(keys, ["A/de/X", "A/de/Y", "A/en/X", "A/en/Y", "B/de/X", "B/de/Y", "B/en/X", "B/en/Y"]);
    let joint: Vec<f64> = report.joint.iter().map(|j| j.sos).collect();
    assert_close(&joint, &[0., -h, h, 0., -h, 0., 0., h], 1e-6);
    for model in ["A", "B"] {
        let m = &report.per_model[model];
        assert_eq!(m.n, 4);
        assert_close(&[m.mean, m.median, m.q1, m.q3, m.min, m.max], &[0., 0., -h / 4., h / 4., -h, h], 1e-6);
    }

    // Pooled over both models the references differ, and so do the scores.
    let (_, pooled, _) = sos(emb, 2, cols, Pooling::All, &cpu(), Some(3)).unwrap();
    assert_eq!(pooled.per_image.len(), values.per_image.len());
    assert!(pooled.per_image.iter().zip(&values.per_image).any(|(a, b)| (a - b).abs() > 0.1));
}

#[test]
fn layers_get_their_own_references() {
    // The golden table twice, as layer "1" and layer "2" with the second copy's semantics flipped:
    // per-(model, layer) references make each layer score exactly like the per-model golden case.
    let g = golden();
    let mut emb = g.emb.clone();
    emb.extend(g.emb.chunks(2).flat_map(|v| [v[1], v[0]]));
    let dup = |v: &[String]| [v, v].concat();
    let (model, language, culture) = (dup(&g.model), dup(&g.language), dup(&g.culture));
    let layer: Vec<String> = (0..16).map(|i| if i < 8 { "1".into() } else { "2".into() }).collect();
    let cols = SosColumns {
        model: &model,
        language: &language,
        culture: &culture,
        layer: Some(&layer),
        person: None,
    };
    let (_, values, report) = sos(emb, 2, cols, Pooling::All, &cpu(), Some(5)).unwrap();
    let h = 1.0 - std::f64::consts::FRAC_1_SQRT_2;
    let got: Vec<f64> = values.per_image.iter().map(|v| f64::from(*v)).collect();
    assert_close(&got, &[[-h; 4], [h; 4], [-h; 4], [h; 4]].concat(), 1e-6);
    assert_eq!(report.joint.len(), 16);
    assert_eq!(report.joint[0].layer.as_deref(), Some("1"));
}

fn random_case(
    seed: u64,
    n_models: usize,
    n_lang: usize,
    n_cult: usize,
    reps: usize,
    d: usize,
) -> (Vec<f32>, [Vec<String>; 3]) {
    let mut rng = SplitMix64::new(seed);
    let (mut model, mut language, mut culture, mut emb) = (vec![], vec![], vec![], vec![]);
    for m in 0..n_models {
        for l in 0..n_lang {
            for c in 0..n_cult {
                for _ in 0..reps {
                    model.push(format!("m{m}"));
                    language.push(format!("l{l}"));
                    culture.push(format!("c{c}"));
                    emb.extend((0..d).map(|k| {
                        rng.normal() as f32
                            + if k == l { 1.5 } else { 0.0 }
                            + if k == n_lang + c { 1.0 } else { 0.0 }
                    }));
                }
            }
        }
    }
    (emb, [model, language, culture])
}

#[test]
fn property_range_scaling_invariance_and_label_swap() {
    for seed in 0..4 {
        let (emb, [model, language, culture]) = random_case(seed, 3, 4, 5, 3, 16);
        let cols =
            SosColumns { model: &model, language: &language, culture: &culture, layer: None, person: None };
        let (_, base, _) = sos(emb.clone(), 16, cols, Pooling::All, &cpu(), Some(7)).unwrap();
        assert!(base.per_image.iter().all(|v| (-1.0..=1.0).contains(v)), "SoS must lie in [-1, 1]");

        // Positive per-row scaling leaves every score unchanged.
        let mut rng = SplitMix64::new(seed + 100);
        let scaled: Vec<f32> = emb
            .chunks(16)
            .flat_map(|row| {
                let f = (0.01 + 100.0 * rng.next_f64()) as f32;
                row.iter().map(move |x| x * f)
            })
            .collect();
        let (_, sc, _) = sos(scaled, 16, cols, Pooling::All, &cpu(), None).unwrap();
        assert_eq!(base.per_image.len(), sc.per_image.len());
        for (a, b) in base.per_image.iter().zip(&sc.per_image) {
            assert!((a - b).abs() < 1e-5, "scaling changed {a} to {b}");
        }

        // Swapping the language and culture labels swaps sur and sem, so every score flips sign.
        let swapped = SosColumns { language: &culture, culture: &language, ..cols };
        let (_, sw, _) = sos(emb.clone(), 16, swapped, Pooling::All, &cpu(), Some(1000)).unwrap();
        assert_eq!(base.per_image.len(), sw.per_image.len());
        for (a, b) in base.per_image.iter().zip(&sw.per_image) {
            assert!((a + b).abs() < 1e-5, "swap should flip {a} to {}, got {b}", -a);
        }
    }
}

#[test]
fn degenerate_reference_is_an_error() {
    // Two outputs of the only culture point in opposite directions: sem has no direction.
    let emb = vec![1.0, 0.0, -1.0, 0.0];
    let (model, language, culture) = (s(&["A", "A"]), s(&["en", "de"]), s(&["X", "X"]));
    let cols =
        SosColumns { model: &model, language: &language, culture: &culture, layer: None, person: None };
    let err = sos(emb, 2, cols, Pooling::All, &cpu(), Some(5)).unwrap_err();
    assert!(err.to_string().contains("semantic reference of group `X` has near-zero norm"), "{err}");
}

#[test]
fn block_size_does_not_change_scores() {
    let (emb, [model, language, culture]) = random_case(11, 2, 3, 4, 5, 24);
    let cols =
        SosColumns { model: &model, language: &language, culture: &culture, layer: None, person: None };
    let (_, whole, _) = sos(emb.clone(), 24, cols, Pooling::PerModel, &cpu(), None).unwrap();
    for rows in [1, 7, 64, 119, 120, 10_000] {
        let (_, blocked, _) = sos(emb.clone(), 24, cols, Pooling::PerModel, &cpu(), Some(rows)).unwrap();
        assert_eq!(whole.per_image.len(), blocked.per_image.len());
        for (a, b) in whole.per_image.iter().zip(&blocked.per_image) {
            assert!((a - b).abs() < 1e-6, "block size {rows}: {a} vs {b}");
        }
        assert_eq!(whole.sur_mean_norm.len(), blocked.sur_mean_norm.len());
    }
}

#[test]
fn blocking_rule_per_processor() {
    // 1 MiB of 64-dimensional f32 rows is 4096 rows, of 1280-dimensional ones 204 (rounded down).
    assert_eq!(Blocking::Default(Processor::Cpu).chunk_rows(64), Some(4096));
    assert_eq!(Blocking::Default(Processor::Cpu).chunk_rows(1280), Some(204));
    assert_eq!(Blocking::Default(Processor::Gpu).chunk_rows(1280), None);
    assert_eq!(Blocking::Rows(100).chunk_rows(1280), Some(100));
    assert_eq!(Blocking::Rows(0).chunk_rows(1280), Some(1));
}

#[test]
fn sos_packed_on_selected_rows_equals_scoring_those_rows_alone() {
    // The browser's path: the whole table on the device once, a filter's rows selected there.
    let d = 16;
    let (emb, [model, language, culture]) = random_case(5, 2, 3, 4, 3, d);
    let rows: Vec<u32> =
        (0..model.len() as u32).filter(|r| r % 4 != 1 && language[*r as usize] != "l2").collect();
    let pick = |v: &[String]| -> Vec<String> { rows.iter().map(|&r| v[r as usize].clone()).collect() };
    let (m, l, c) = (pick(&model), pick(&language), pick(&culture));
    let cols = SosColumns { model: &m, language: &l, culture: &c, layer: None, person: None };
    let sub: Vec<f32> =
        rows.iter().flat_map(|&r| emb[r as usize * d..(r as usize + 1) * d].to_vec()).collect();
    let (layout, alone, _) = sos(sub, d, cols, Pooling::All, &cpu(), None).unwrap();
    let table = Tensor::<2>::from_data(TensorData::new(emb, [model.len(), d]), &cpu());
    let packed = sos_packed(&[table], Some(&rows), &layout, Some(5)).into_data();
    let selected = unpack(packed, &layout).unwrap();
    assert_eq!(selected.per_image.len(), alone.per_image.len());
    for (a, b) in selected.per_image.iter().zip(&alone.per_image) {
        assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    }
}

mod bootstrap {
    //! The SoS intervals: the exact mode against SoS recomputed from scratch on a materialised
    //! resample, the fast mode against the metrics crate's ratio bootstrap, clusters, determinism.
    use super::*;
    use culturelens_metrics::bootstrap::{CiMethod, CiSpec, Replicates};

    fn spec(resamples: usize, method: CiMethod) -> CiSpec {
        CiSpec::new(0.9, resamples, 17, method).unwrap()
    }

    fn table(emb: Vec<f32>, n: usize, d: usize) -> Tensor<2> {
        Tensor::<2>::from_data(TensorData::new(emb, [n, d]), &cpu())
    }

    #[test]
    fn exact_replicates_are_sos_on_the_materialised_resample() {
        let d = 12;
        let (emb, [model, language, culture]) = random_case(3, 2, 3, 2, 4, d);
        let cols =
            SosColumns { model: &model, language: &language, culture: &culture, layer: None, person: None };
        let (layout, point, report) = sos(emb.clone(), d, cols, Pooling::All, &cpu(), None).unwrap();
        let units = CellUnits::outputs(&layout);
        let s = spec(3, CiMethod::Percentile);
        let n = model.len();
        let got = sos_exact_replicates(
            &[table(emb.clone(), n, d)],
            &layout,
            &units,
            &point.per_image,
            s,
            Some(7),
            |_| {},
        )
        .unwrap();
        let mut draws = ExactResamples::new(&layout, &units, s);
        for b in 0..3 {
            // The resample as a table of its own: its rows copied, its metadata picked, SoS from scratch.
            let rows = draws.next_rows().unwrap();
            assert_eq!(rows.len(), n, "every cell keeps its size");
            let pick =
                |v: &[String]| -> Vec<String> { rows.iter().map(|&r| v[r as usize].clone()).collect() };
            let (m, l, c) = (pick(&model), pick(&language), pick(&culture));
            let sub: Vec<f32> =
                rows.iter().flat_map(|&r| emb[r as usize * d..(r as usize + 1) * d].to_vec()).collect();
            let cols = SosColumns { model: &m, language: &l, culture: &c, layer: None, person: None };
            let (_, _, alone) = sos(sub, d, cols, Pooling::All, &cpu(), None).unwrap();
            for (cell, j) in alone.joint.iter().enumerate() {
                assert_eq!(
                    (&j.model, &j.language, &j.culture),
                    (&report.joint[cell].model, &report.joint[cell].language, &report.joint[cell].culture)
                );
                assert!(
                    (got[cell].values[b] - j.sos).abs() < 1e-6,
                    "resample {b} cell {cell}: {} vs {}",
                    got[cell].values[b],
                    j.sos
                );
            }
        }
        assert!(draws.next_rows().is_none());
        // The estimate is the joint score of the full table.
        for (r, j) in got.iter().zip(&report.joint) {
            assert!((r.estimate - j.sos).abs() < 1e-12);
        }
    }

    #[test]
    fn fast_mode_resamples_the_point_scores_per_cell() {
        let d = 10;
        let (emb, [model, language, culture]) = random_case(8, 2, 2, 3, 9, d);
        let cols =
            SosColumns { model: &model, language: &language, culture: &culture, layer: None, person: None };
        let (layout, point, report) = sos(emb, d, cols, Pooling::All, &cpu(), None).unwrap();
        let s = spec(200, CiMethod::Bca);
        let got = sos_fast_intervals(&layout, &CellUnits::outputs(&layout), &point.per_image, s);
        for (c, cell) in layout.cells.iter().enumerate() {
            let scores: Vec<f64> =
                layout.cell_rows()[c].iter().map(|&r| f64::from(point.per_image[r as usize])).collect();
            let want = Replicates::of_mean(&scores, &s.draws(scores.len(), &cell_key(cell)))
                .interval(0.9, CiMethod::Bca);
            assert_eq!(got[c], want);
            let ci = got[c].unwrap();
            assert!(
                ci.lo < report.joint[c].sos && report.joint[c].sos < ci.hi,
                "{ci:?} around {}",
                report.joint[c].sos
            );
        }
        // Seeded: the same seed gives the same intervals, another seed others.
        assert_eq!(got, sos_fast_intervals(&layout, &CellUnits::outputs(&layout), &point.per_image, s));
        let other = CiSpec { seed: 18, ..s };
        assert_ne!(got, sos_fast_intervals(&layout, &CellUnits::outputs(&layout), &point.per_image, other));
    }

    #[test]
    fn clusters_resample_whole_prompts() {
        let d = 8;
        let (emb, [model, language, culture]) = random_case(4, 1, 2, 2, 6, d);
        let cols =
            SosColumns { model: &model, language: &language, culture: &culture, layer: None, person: None };
        let (layout, point, _) = sos(emb.clone(), d, cols, Pooling::All, &cpu(), None).unwrap();
        // Three prompts of two seeds each per cell.
        let prompt: Vec<String> = (0..model.len()).map(|r| format!("p{}", (r % 6) / 2)).collect();
        let units = CellUnits::clusters(&layout, &[&prompt]);
        assert!(
            (0..units.len()).all(|c| units.cell(c).len() == 3 && units.cell(c).iter().all(|u| u.len() == 2))
        );
        // A key unique per output gives the outputs themselves.
        let row: Vec<String> = (0..model.len()).map(|r| r.to_string()).collect();
        assert_eq!(CellUnits::clusters(&layout, &[&row]), CellUnits::outputs(&layout));
        // Every exact resample draws whole prompts: its rows come in seed pairs.
        let mut draws = ExactResamples::new(&layout, &units, spec(5, CiMethod::Percentile));
        while let Some(rows) = draws.next_rows() {
            assert!(
                rows.chunks(2).all(|p| prompt[p[0] as usize] == prompt[p[1] as usize] && p[0] + 1 == p[1])
            );
        }
        let s = spec(100, CiMethod::Percentile);
        let fast = sos_fast_intervals(&layout, &units, &point.per_image, s);
        let exact =
            sos_exact_intervals(&[table(emb, model.len(), d)], &layout, &units, &point.per_image, s, None)
                .unwrap();
        assert!(fast.iter().chain(&exact).all(Option::is_some));
    }

    #[test]
    fn fast_and_exact_agree_when_references_pool_many_outputs() {
        // 12 languages × 12 cultures × 9 outputs: every reference pools 108 outputs, so a cell's
        // resampled (and duplicated) outputs move their own references little.
        let d = 32;
        let (emb, [model, language, culture]) = random_case(21, 1, 12, 12, 9, d);
        let cols =
            SosColumns { model: &model, language: &language, culture: &culture, layer: None, person: None };
        let (layout, point, _) = sos(emb.clone(), d, cols, Pooling::All, &cpu(), None).unwrap();
        let units = CellUnits::outputs(&layout);
        let s = spec(100, CiMethod::Percentile);
        let fast = sos_fast_intervals(&layout, &units, &point.per_image, s);
        let exact =
            sos_exact_intervals(&[table(emb, model.len(), d)], &layout, &units, &point.per_image, s, None)
                .unwrap();
        // Per cell the two differ by the references' own sampling noise; over the 144 cells the
        // exact intervals are a little wider (that noise added) and centred alike.
        let (mut shift_lo, mut shift_hi, mut width) = (0.0, 0.0, 0.0);
        for (f, e) in fast.iter().zip(&exact) {
            let (f, e) = (f.unwrap(), e.unwrap());
            shift_lo += (e.lo - f.lo) / (f.hi - f.lo);
            shift_hi += (e.hi - f.hi) / (f.hi - f.lo);
            width += (e.hi - e.lo) / (f.hi - f.lo);
        }
        let k = fast.len() as f64;
        let (shift_lo, shift_hi, width) = (shift_lo / k, shift_hi / k, width / k);
        assert!((1.0..1.25).contains(&width), "exact / fast width {width}");
        assert!(shift_lo.abs() < 0.1 && shift_hi.abs() < 0.1, "mean shifts {shift_lo}, {shift_hi} widths");
    }
}

mod compare {
    //! Paired differences by hand: the pairs, the exact sign-flip p-values and Holm.
    use super::*;
    use culturelens_metrics::bootstrap::{CiMethod, CiSpec};

    #[test]
    fn paired_differences_by_hand() {
        // Cells (model, language, culture X), three outputs each, paired by prompt p0..p2:
        //   en: A 0.3, 0.2, 0.1 vs B 0.1, 0.1, 0.1 → d = 0.2, 0.1, 0 (mean 0.1)
        //   de: A 0.5, 0.5, 0.5 vs B 0.0, 0.1, 0.2 → d = 0.5, 0.4, 0.3 (mean 0.4)
        // Sign flips (2³ = 8, exact): en's means ±0.1 (twice each, the 0 flips), ±0.0333…: two
        // reach 0.1, p = 2·2/8 = 0.5; de: only the identity reaches 0.4, p = 2·1/8 = 0.25.
        // Holm over (de, en): 2·0.25 = 0.5, then max(0.5, 1·0.5) = 0.5.
        let model = s(&["A", "A", "A", "B", "B", "B", "A", "A", "A", "B", "B", "B"]);
        let language = s(&["en", "en", "en", "en", "en", "en", "de", "de", "de", "de", "de", "de"]);
        let culture = s(&["X"; 12]);
        let key = s(&["p0", "p1", "p2", "p2", "p1", "p0", "p0", "p1", "p2", "p0", "p1", "p2"]);
        let scores = [0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.5, 0.5, 0.5, 0.0, 0.1, 0.2];
        let cols =
            SosColumns { model: &model, language: &language, culture: &culture, layer: None, person: None };
        let layout = SosLayout::new(cols, Pooling::All).unwrap();
        let spec = CiSpec::new(0.95, 200, 1, CiMethod::Percentile).unwrap();
        let cmp = Comparison { factor: Factor::Models, a: "A", b: "B", pair_key: &key, permutations: 9999 };
        let rows = paired_differences(&layout, &scores, cmp, spec).unwrap();
        let got: Vec<(&str, usize, f64, f64, f64, bool)> = rows
            .iter()
            .map(|r| (r.shared.as_str(), r.n_pairs, r.diff, r.p_value, r.p_holm, r.exact))
            .collect();
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].0, got[1].0), ("de", "en"));
        assert!((got[0].2 - 0.4).abs() < 1e-7 && (got[1].2 - 0.1).abs() < 1e-7, "{got:?}");
        assert_eq!((got[0].3, got[1].3), (0.25, 0.5));
        assert_eq!((got[0].4, got[1].4), (0.5, 0.5));
        assert!(got.iter().all(|g| g.1 == 3 && g.5));
        let ci = rows[0].diff_ci.unwrap();
        assert!(ci.lo >= 0.3 - 1e-7 && ci.hi <= 0.5 + 1e-7 && ci.covers(rows[0].diff));

        // Comparing languages pairs de with en within each model: A's d = 0.5−0.3, 0.5−0.2, 0.5−0.1.
        let cmp =
            Comparison { factor: Factor::Languages, a: "de", b: "en", pair_key: &key, permutations: 9999 };
        let rows = paired_differences(&layout, &scores, cmp, spec).unwrap();
        assert_eq!(rows.iter().map(|r| r.shared.as_str()).collect::<Vec<_>>(), ["A", "B"]);
        assert!((rows[0].diff - 0.3).abs() < 1e-7);

        // Errors name what is wrong.
        let unknown = Comparison { factor: Factor::Models, a: "A", b: "Z", pair_key: &key, permutations: 10 };
        let e = paired_differences(&layout, &scores, unknown, spec).unwrap_err().to_string();
        assert!(e.contains("model `Z`") && e.contains("A, B"), "{e}");
        let same = s(&["p0"; 12]);
        let dup = Comparison { factor: Factor::Models, a: "A", b: "B", pair_key: &same, permutations: 10 };
        let e = paired_differences(&layout, &scores, dup, spec).unwrap_err().to_string();
        assert!(e.contains("same pairing key `p0`") && e.contains("B/de/X"), "{e}");
    }
}

/// The CPU's fused passes (`host.rs`, what `score_rows` runs on a CPU device with the default
/// blocking) against the tensor graph: the hand-computed golden, then random tables with their
/// rows shuffled (pairs not contiguous), per-model references and layers, to f32 rounding; and
/// the same bits on every vector path of `culturelens_simd`.
#[test]
fn cpu_fused_passes_equal_the_graph() {
    let score = |emb: Vec<f32>, d: usize, cols: SosColumns<'_>, pooling: Pooling| {
        let blocking = Blocking::Default(Processor::Cpu);
        score_rows(emb, d, cols, pooling, &cpu(), Processor::Cpu, blocking, &mut |_| {}).unwrap().values
    };
    let g = golden();
    let host = score(g.emb.clone(), 2, g.cols(), Pooling::All);
    let got: Vec<f64> = host.per_image.iter().map(|v| f64::from(*v)).collect();
    assert_close(&got, &[0.0, -A, -A, 0.0, 0.0, A, A, 0.0], 1e-6);

    let mut rng = SplitMix64::new(5);
    for (seed, pooling, layered) in
        [(1, Pooling::All, false), (2, Pooling::PerModel, false), (3, Pooling::All, true)]
    {
        let (emb, [model, language, culture]) = random_case(seed, 2, 3, 4, 5, 37);
        let n = model.len();
        // Shuffle the rows (Fisher–Yates), so a pair's outputs are scattered over the table.
        let mut order: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            order.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
        }
        let pick = |v: &[String]| order.iter().map(|&i| v[i].clone()).collect::<Vec<_>>();
        let (model, language, culture) = (pick(&model), pick(&language), pick(&culture));
        let emb: Vec<f32> = order.iter().flat_map(|&i| emb[i * 37..(i + 1) * 37].to_vec()).collect();
        let layer: Vec<String> = (0..n).map(|i| format!("{}", i % 2)).collect();
        fn columns<'a>(
            m: &'a [String],
            l: &'a [String],
            c: &'a [String],
            layer: Option<&'a [String]>,
        ) -> SosColumns<'a> {
            SosColumns { model: m, language: l, culture: c, layer, person: None }
        }
        let cols = columns(&model, &language, &culture, layered.then_some(layer.as_slice()));
        let (_, graph, _) = sos(emb.clone(), 37, cols, pooling, &cpu(), Some(7)).unwrap();
        let mut bits = Vec::new();
        for level in culturelens_simd::available() {
            culturelens_simd::force(Some(level)).unwrap();
            let host = score(emb.clone(), 37, cols, pooling);
            culturelens_simd::force(None).unwrap();
            for (a, b) in host.per_image.iter().zip(&graph.per_image) {
                assert!((a - b).abs() < 1e-5, "seed {seed}: {a} vs {b}");
            }
            for (a, b) in host.sur_mean_norm.iter().zip(&graph.sur_mean_norm) {
                assert!((a - b).abs() < 1e-5, "seed {seed}: {a} vs {b}");
            }
            bits.push(host.per_image.iter().map(|v| v.to_bits()).collect::<Vec<u32>>());
        }
        assert!(bits.windows(2).all(|w| w[0] == w[1]), "every vector path gives the same bits");

        // A subset of the table's rows (every third row but one, in reverse), as the browser
        // scores one: the passes over the whole table through `subset` give the graph's values
        // on the same rows, and the passes on the gathered rows to the bit.
        let subset: Vec<u32> = (0..n as u32).rev().filter(|r| r % 3 != 1).collect();
        let take = |v: &[String]| subset.iter().map(|&r| v[r as usize].clone()).collect::<Vec<_>>();
        let (model, language, culture, layer) = (take(&model), take(&language), take(&culture), take(&layer));
        let cols = columns(&model, &language, &culture, layered.then_some(layer.as_slice()));
        let layout = SosLayout::new(cols, pooling).unwrap();
        let blocks = crate::device::upload_rows(emb.clone(), 37, None, &cpu());
        let graph =
            sos_packed(&blocks, Some(&subset), &layout, Some(7)).into_data().try_to_vec::<f32>().unwrap();
        let host = sos_host(&emb, 37, Some(&subset), &layout);
        assert_eq!(host.len(), graph.len());
        for (a, b) in host.iter().zip(&graph) {
            assert!((a - b).abs() < 1e-5, "seed {seed}, subset: {a} vs {b}");
        }
        let gathered: Vec<f32> = subset.iter().flat_map(|&r| emb[r as usize * 37..][..37].to_vec()).collect();
        assert_eq!(sos_host(&gathered, 37, None, &layout), host);
    }
}
