//! Hand-computed and cross-route tests of the Vendi family on the CPU (`flex`) backend.

use burn::tensor::TensorData;

use super::*;
use culturelens_rng::SplitMix64;
use culturelens_testkit::{cpu, read_fixture};

const ORDERS: [Order; 5] =
    [Order::Finite(0.0), Order::Finite(0.5), Order::Finite(1.0), Order::Finite(2.0), Order::Infinity];

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// Continent [A, A, E, E], country [JP, CN, DE, DE], artifact [a, b, c, c], w = (.5, .3, .2):
/// K = [[1,.5,0,0],[.5,1,0,0],[0,0,1,1],[0,0,1,1]], eigenvalues of K/4 = .375, .125, .5, 0.
fn categorical() -> Features {
    let (cont, country, artifact) =
        (s(&["A", "A", "E", "E"]), s(&["JP", "CN", "DE", "DE"]), s(&["a", "b", "c", "c"]));
    let cols: [(&str, &[String]); 3] = [("continent", &cont), ("country", &country), ("artifact", &artifact)];
    categorical_features(&cols, &[0.5, 0.3, 0.2]).unwrap()
}

#[test]
fn categorical_kernel_hand_values() {
    let f = categorical();
    assert_eq!(f.d, 2 + 3 + 3, "one-hot columns: 2 continents, 3 countries, 3 artifacts");
    let p = [0.375f64, 0.125, 0.5];
    let shannon = (-p.iter().map(|x| x * x.ln()).sum::<f64>()).exp();
    let expect = [
        3.0,
        p.iter().map(|x| x.sqrt()).sum::<f64>().powi(2),
        shannon,
        1.0 / p.iter().map(|x| x * x).sum::<f64>(),
        2.0,
    ];
    for route in [Route::Kernel, Route::Dual] {
        let eig = spectrum(&f, route, ProductPrecision::F64, &cpu());
        for (q, want) in ORDERS.iter().zip(expect) {
            let got = vendi_from_eigenvalues(&eig, *q);
            assert!((got - want).abs() < 1e-12, "{route:?} q={q}: {got} vs {want}");
        }
    }
    // intdiv: off-diagonal entries .5, .5, 1, 1 over 12 ordered pairs → mean .25.
    assert!((intdiv(&f).unwrap() - 0.75).abs() < 1e-15);
}

#[test]
fn categorical_weights_are_validated() {
    let a = s(&["x", "y"]);
    let cols: [(&str, &[String]); 2] = [("a", &a), ("b", &a)];
    assert!(matches!(categorical_features(&cols, &[0.5, 0.6]), Err(VendiError::Weights { .. })));
    assert!(matches!(categorical_features(&cols, &[1.5, -0.5]), Err(VendiError::Weights { .. })));
    let e = s(&["x", ""]);
    let cols: [(&str, &[String]); 1] = [("country", &e)];
    assert_eq!(
        categorical_features(&cols, &[1.0]).unwrap_err(),
        VendiError::EmptyCategory { row: 1, column: "country".into() }
    );
}

fn random_features(seed: u64, n: usize, d: usize) -> Features {
    let mut rng = SplitMix64::new(seed);
    let x: Vec<f32> = (0..n * d).map(|_| rng.normal() as f32).collect();
    cosine_features(&x, n, d).unwrap()
}

#[test]
fn kernel_and_dual_routes_agree() {
    for (seed, n, d) in [(1, 40, 12), (2, 10, 30), (3, 25, 25), (4, 60, 3), (8, 300, 270), (10, 20, 600)] {
        let f = random_features(seed, n, d);
        let kernel = spectrum(&f, Route::Kernel, ProductPrecision::F64, &cpu());
        let dual = spectrum(&f, Route::Dual, ProductPrecision::F64, &cpu());
        for q in ORDERS {
            let (a, b) = (vendi_from_eigenvalues(&kernel, q), vendi_from_eigenvalues(&dual, q));
            assert!((a - b).abs() <= 1e-9 * a.abs(), "n={n} d={d} q={q}: kernel {a} vs dual {b}");
        }
        assert_eq!(vendi_from_eigenvalues(&kernel, Order::Finite(0.0)), n.min(d) as f64, "rank");
        assert_eq!(Route::Auto.resolve(n, d), if d < n { Route::Dual } else { Route::Kernel });
    }
}

#[test]
fn duplicates_count_once() {
    // The same 5 random directions each repeated 3 times: VS_1 = 5 exactly in the limit of
    // orthogonality; here, rank (q = 0) is exactly 5 on both routes.
    let base = random_features(9, 5, 64);
    let data: Vec<f64> = (0..15).flat_map(|i| base.data[(i % 5) * 64..(i % 5 + 1) * 64].to_vec()).collect();
    let f = Features { n: 15, d: 64, data };
    for route in [Route::Kernel, Route::Dual] {
        let eig = spectrum(&f, route, ProductPrecision::F64, &cpu());
        assert_eq!(vendi_from_eigenvalues(&eig, Order::Finite(0.0)), 5.0, "{route:?}");
    }
}

#[test]
fn precomputed_kernel_validation() {
    let ok = vec![1.0, 0.9, 0.0, 0.9, 1.0, 0.0, 0.0, 0.0, 1.0];
    let eig = precomputed_spectrum(&ok, 3, ProductPrecision::F64).unwrap();
    assert!((vendi_from_eigenvalues(&eig, Order::Finite(1.0)) - 2.1573).abs() < 5e-5);
    let mut diag = ok.clone();
    diag[4] = 0.8;
    assert_eq!(
        precomputed_spectrum(&diag, 3, ProductPrecision::F64).unwrap_err(),
        VendiError::Diagonal { row: 1, col: 1, value: 0.8 }
    );
    let mut asym = ok.clone();
    asym[1] = 0.5;
    assert!(matches!(
        precomputed_spectrum(&asym, 3, ProductPrecision::F64),
        Err(VendiError::Asymmetric { row: 1, col: 0, .. })
    ));
    // [[1, 2], [2, 1]] has eigenvalues 3 and −1, so K/2 has −0.5: not PSD.
    assert_eq!(
        precomputed_spectrum(&[1.0, 2.0, 2.0, 1.0], 2, ProductPrecision::F64).unwrap_err(),
        VendiError::NotPsd { min: -0.5, tol: 2.0 * f64::EPSILON * 1.5 }
    );
    let mut nan = ok.clone();
    nan[5] = f64::NAN;
    assert!(matches!(
        precomputed_spectrum(&nan, 3, ProductPrecision::F64),
        Err(VendiError::NonFinite { row: 1, col: 2, .. })
    ));
    assert_eq!(precomputed_spectrum(&[], 0, ProductPrecision::F64).unwrap_err(), VendiError::Empty);
    // Two identical items stored in f32: the round-off eigenvalue is zeroed, rank 1.
    let dup = [1.0, 1.0, 1.0, 1.0];
    let eig = precomputed_spectrum(&dup, 2, ProductPrecision::F32).unwrap();
    assert_eq!(vendi_from_eigenvalues(&eig, Order::Finite(0.0)), 1.0);
}

#[test]
fn protocol_is_seeded_and_matches_direct_scores() {
    let f = random_features(5, 30, 16);
    let quality: Vec<f64> = (0..30).map(|i| 0.5 + i as f64 / 60.0).collect();
    let run = |seed| {
        let plan = ProtocolPlan { batch: 8, repeats: 20, seed };
        protocol(&f, Some(&quality), Order::Finite(1.0), plan, ProductPrecision::F64, &cpu())
    };
    let (a, b, c) = (run(42), run(42), run(43));
    assert_eq!(a, b, "same seed, same result");
    assert_ne!(a.vs.mean, c.vs.mean);
    assert_eq!((a.batch, a.repeats), (8, 20));
    assert!(a.vs.mean > 1.0 && a.vs.mean <= 8.0 && a.vs.sd > 0.0);
    // A group no larger than the batch: every repetition scores the whole group (sd = 0) and
    // equals the direct score.
    let small = random_features(6, 6, 16);
    let p = protocol(
        &small,
        None,
        Order::Infinity,
        ProtocolPlan { batch: 8, repeats: 5, seed: 1 },
        ProductPrecision::F64,
        &cpu(),
    );
    let direct = VendiScore::from_spectrum(
        &spectrum(&small, Route::Kernel, ProductPrecision::F64, &cpu()),
        6,
        Order::Infinity,
        None,
    );
    assert_eq!(p.batch, 6);
    assert!((p.vs.mean - direct.vs).abs() < 1e-9 && p.vs.sd < 1e-9);
    assert!((p.qvs_norm.mean - direct.qvs_norm).abs() < 1e-9);
}

#[test]
fn protocol_is_the_mean_of_direct_batch_scores() {
    let f = categorical();
    let quality = [0.2, 0.4, 0.6, 0.8];
    let (batch, repeats, seed) = (2, 9, 7);
    let p = protocol(
        &f,
        Some(&quality),
        Order::Finite(2.0),
        ProtocolPlan { batch, repeats, seed },
        ProductPrecision::F64,
        &cpu(),
    );
    let picks = protocol_batches(4, ProtocolPlan { batch, repeats, seed });
    assert_eq!(picks.len(), repeats);
    let (mut vs, mut qvs_norm, mut div) = (vec![], vec![], vec![]);
    for pick in &picks {
        assert!(pick.len() == 2 && pick[0] != pick[1], "distinct items: {pick:?}");
        let sub = f.select_rows(pick);
        let qual: Vec<f64> = pick.iter().map(|&i| quality[i]).collect();
        let eig = spectrum(&sub, Route::Kernel, ProductPrecision::F64, &cpu());
        let s = VendiScore::from_spectrum(&eig, 2, Order::Finite(2.0), Some(&qual));
        vs.push(s.vs);
        qvs_norm.push(s.qvs_norm);
        div.push(intdiv(&sub).unwrap());
    }
    let close = |a: MeanSd, b: MeanSd| (a.mean - b.mean).abs() < 1e-12 && (a.sd - b.sd).abs() < 1e-12;
    assert!(close(p.vs, MeanSd::of(&vs)), "{:?} vs {:?}", p.vs, MeanSd::of(&vs));
    assert!(close(p.qvs_norm, MeanSd::of(&qvs_norm)));
    assert!(close(p.intdiv.unwrap(), MeanSd::of(&div)));
    // Pairs of this kernel have similarity .5 (items 0, 1), 1 (items 2, 3) or 0: VS_2 of
    // [[1, s], [s, 1]] is 2 / (1 + s²), so every batch score is one of 1.6, 1 and 2.
    assert!(vs.iter().all(|v| [1.6, 1.0, 2.0].iter().any(|w| (v - w).abs() < 1e-12)), "{vs:?}");
    // Batch by batch: each score is the closed form of its own pair's similarity (the hand kernel
    // of `categorical`), and the protocol's mean ± sd is that of the closed forms.
    let hand_k = [[1.0, 0.5, 0.0, 0.0], [0.5, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]];
    let closed: Vec<f64> =
        picks.iter().map(|b| 2.0 / (1.0 + hand_k[b[0]][b[1]] * hand_k[b[0]][b[1]])).collect();
    assert_eq!(closed.len(), vs.len());
    for (i, (got, want)) in vs.iter().zip(&closed).enumerate() {
        assert!((got - want).abs() < 1e-12, "batch {i} {:?}: {got} vs 2/(1+s²) = {want}", picks[i]);
    }
    assert!(close(p.vs, MeanSd::of(&closed)), "{:?} vs {:?}", p.vs, MeanSd::of(&closed));

    // The same protocol on the precomputed kernel matrix gives the same numbers.
    let k: Vec<f64> = (0..4)
        .flat_map(|i| {
            let f = &f;
            (0..4).map(move |j| (0..f.d).map(|c| f.data[i * f.d + c] * f.data[j * f.d + c]).sum::<f64>())
        })
        .collect();
    let pk = protocol_precomputed(
        &k,
        4,
        Some(&quality),
        Order::Finite(2.0),
        ProtocolPlan { batch, repeats, seed },
        ProductPrecision::F64,
    );
    assert_eq!((pk.batch, pk.repeats), (p.batch, p.repeats));
    assert!(close(pk.vs, p.vs) && close(pk.qvs, p.qvs) && close(pk.intdiv.unwrap(), p.intdiv.unwrap()));
    assert!((intdiv_of_kernel(&k, 4).unwrap() - intdiv(&f).unwrap()).abs() < 1e-15);
    assert_eq!(intdiv_of_kernel(&[1.0], 1), None);
}

/// The blocked product holds `F Fᵀ` / `Fᵀ F` in its lower triangle and zeros in the blocks above
/// it, on both routes, for sizes spanning several blocks.
#[test]
fn blocked_product_lower_triangle() {
    let (n, d) = (PRODUCT_BLOCK + 40, PRODUCT_BLOCK + 14);
    let f = random_features(11, n, d);
    for (route, size) in [(Route::Kernel, n), (Route::Dual, d)] {
        let product = product_tensor(&f, route, ProductPrecision::F64, &cpu()).into_data();
        assert_eq!(product.shape().as_slice(), [size, size]);
        let m: Vec<f64> = product.try_into_vec_as::<f64>().unwrap();
        let entry = |i: usize, j: usize| -> f64 {
            match route {
                Route::Kernel => (0..d).map(|c| f.data[i * d + c] * f.data[j * d + c]).sum(),
                _ => (0..n).map(|r| f.data[r * d + i] * f.data[r * d + j]).sum(),
            }
        };
        for (i, j) in [
            (0, 0),
            (size - 1, 0),
            (size - 1, size - 1),
            (PRODUCT_BLOCK, 3),
            (PRODUCT_BLOCK + 5, PRODUCT_BLOCK + 2),
        ] {
            assert!((m[i * size + j] - entry(i, j)).abs() < 1e-12, "{route:?} ({i}, {j})");
        }
        // Inside a diagonal block the upper part is computed too; above it, zeros.
        assert!((m[2 * size + 5] - entry(2, 5)).abs() < 1e-12);
        assert_eq!(m[3 * size + PRODUCT_BLOCK + 1], 0.0, "{route:?}: upper block not computed");
    }
}

/// The host product (faer's triangular GEMM) equals the device product on the lower triangle to
/// round-off, and its scores equal the device route's to 1e-9, on both routes, for sizes
/// spanning several blocks and a tiny one.
#[test]
fn host_product_matches_the_device_product() {
    for (seed, n, d) in [(12, PRODUCT_BLOCK + 40, PRODUCT_BLOCK + 14), (13, 7, 3)] {
        let f = random_features(seed, n, d);
        for route in [Route::Kernel, Route::Dual] {
            let host = host_product(&f, route);
            let device = product_tensor(&f, route, ProductPrecision::F64, &cpu()).into_data();
            assert_eq!(host.shape(), device.shape(), "{route:?}");
            let size = host.shape()[0];
            let (h, g): (Vec<f64>, Vec<f64>) = (
                host.clone().try_into_vec_as::<f64>().unwrap(),
                device.clone().try_into_vec_as::<f64>().unwrap(),
            );
            for i in 0..size {
                for j in 0..=i {
                    let (a, b) = (h[i * size + j], g[i * size + j]);
                    assert!(
                        (a - b).abs() < 1e-12,
                        "n={n} d={d} {route:?} ({i}, {j}): host {a} vs device {b}"
                    );
                }
            }
            let (eh, eg) = (
                spectrum_from_product(host, &f, ProductPrecision::F64),
                spectrum_from_product(device, &f, ProductPrecision::F64),
            );
            for q in ORDERS {
                let (a, b) = (vendi_from_eigenvalues(&eh, q), vendi_from_eigenvalues(&eg, q));
                assert!(
                    (a - b).abs() <= 1e-9 * b.abs(),
                    "n={n} d={d} {route:?} q={q}: host {a} vs device {b}"
                );
            }
        }
    }
}

#[test]
fn scores_serialise_infinity_as_a_string() {
    let s = VendiScore::from_spectrum(&[0.5, 0.25, 0.25], 3, Order::Infinity, None);
    let v = serde_json::to_value(s).unwrap();
    assert_eq!(v, serde_json::json!({"n": 3, "q": "inf", "vs": 2.0, "qvs": 2.0, "qvs_norm": 2.0 / 3.0}));
    let s = VendiScore::from_spectrum(&[0.5, 0.25, 0.25], 3, Order::Finite(0.5), None);
    assert_eq!(serde_json::to_value(s).unwrap()["q"], 0.5);
}

#[test]
fn bad_embeddings_are_rejected() {
    assert_eq!(cosine_features(&[1.0, 0.0, 0.0, 0.0], 2, 2).unwrap_err(), VendiError::ZeroNorm { row: 1 });
    assert!(matches!(
        cosine_features(&[1.0, 0.0, 0.0, f32::INFINITY], 2, 2).unwrap_err(),
        VendiError::NonFinite { row: 1, col: 1, .. }
    ));
    assert_eq!(cosine_features(&[], 0, 4).unwrap_err(), VendiError::Empty);
    assert_eq!(categorical_features(&[("country", &[])], &[1.0]).unwrap_err(), VendiError::Empty);
}

/// Parity with the `vendi-score` package (fixtures from `scripts/fixtures/make_vendi.py`).
#[test]
fn parity_with_vendi_score_package() {
    let text = read_fixture("vendi/parity.json");
    let fixture: serde_json::Value = serde_json::from_str(&text).unwrap();
    for case in fixture["cases"].as_array().unwrap() {
        let (n, d) = (case["n"].as_u64().unwrap() as usize, case["d"].as_u64().unwrap() as usize);
        let x: Vec<f64> = case["x"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()))
            .collect();
        // Normalise in f64 exactly as vendi-score does (no f32 round trip).
        let data: Vec<f64> = x
            .chunks(d)
            .flat_map(|r| {
                let norm = r.iter().map(|v| v * v).sum::<f64>().sqrt();
                r.iter().map(move |v| v / norm)
            })
            .collect();
        let f = Features { n, d, data };
        let close = |got: f64, want: f64, what: &str| {
            assert!((got - want).abs() <= 1e-9 * want, "n={n} {what}: {got} vs {want}")
        };
        let host = |route| spectrum_from_product(host_product(&f, route), &f, ProductPrecision::F64);
        let spectra = [Route::Kernel, Route::Dual].into_iter().flat_map(|route| {
            [(route, spectrum(&f, route, ProductPrecision::F64, &cpu())), (route, host(route))]
        });
        for (route, eig) in spectra {
            for (q, key) in [(0.5, "0.5"), (1.0, "1"), (2.0, "2")] {
                let (got, want) =
                    (vendi_from_eigenvalues(&eig, Order::Finite(q)), case["score_K"][key].as_f64().unwrap());
                if q < 1.0 && n > d {
                    // Rank-deficient K: vendi-score also sums the N − d round-off eigenvalues
                    // (~1e-17, so ~3e-9 each at q = 0.5) that culturelens zeroes by design.
                    assert!((got - want).abs() <= 1e-7 * want, "n={n} {route:?} q={q}: {got} vs {want}");
                } else {
                    close(got, want, &format!("{route:?} q={q}"));
                }
            }
            // score_X ignores its q (= 2 in the fixture) and returns the q = 1 score; score_dual honours it.
            close(
                vendi_from_eigenvalues(&eig, Order::Finite(1.0)),
                case["score_X_q2"].as_f64().unwrap(),
                "score_X",
            );
            close(
                vendi_from_eigenvalues(&eig, Order::Finite(2.0)),
                case["score_dual_q2"].as_f64().unwrap(),
                "score_dual",
            );
        }
    }
}

/// `got` and the lower triangle of `whole` (d × d, row-major) agree to 1e-12.
fn lower_triangles_agree(got: &[f64], whole: &TensorData, d: usize, what: &str) {
    let w = whole.clone().try_into_vec::<f64>().unwrap();
    for i in 0..d {
        for j in 0..=i {
            let (a, c) = (got[i * d + j], w[i * d + j]);
            assert!((a - c).abs() <= 1e-12 * c.abs().max(1.0), "{what} d={d} ({i}, {j}): {a} vs {c}");
        }
    }
}

/// The blocked dual product from the f32 rows (the AVX-512 and AVX2 tiles where this CPU has
/// them, and faer's fallback) equals the host product of the whole f64 feature matrix to
/// round-off, over several blocks with a short last one, one short block, widths off the tile
/// sizes and one on them (48: no padding to cut away); and their scores agree to 1e-9.
#[test]
fn host_dual_product_equals_the_product_of_the_features() {
    for (seed, n, d) in [(21, 2 * HOST_BLOCK_ROWS + 77, 45), (22, 9, 5), (23, 300, 70), (24, 200, 48)] {
        let mut rng = SplitMix64::new(seed);
        let x: Vec<f32> = (0..n * d).map(|_| rng.normal() as f32 + 0.5).collect();
        let rows = CosineRows::new(x, n, d).unwrap();
        let features = rows.features();
        let whole = host_product(&features, Route::Dual);
        #[cfg(target_arch = "x86_64")]
        for (gram, what) in
            [(gram::avx2_lower_gram(&rows), "avx2"), (gram::avx512_lower_gram(&rows), "avx512")]
        {
            if let Some(gram) = gram {
                lower_triangles_agree(&gram, &whole, d, what);
            }
        }
        lower_triangles_agree(&gram::faer_lower_gram(&rows), &whole, d, "faer");
        let blocked = host_dual_product(&rows);
        lower_triangles_agree(
            &blocked.clone().try_into_vec::<f64>().unwrap(),
            &whole,
            d,
            "host_dual_product",
        );
        let (eb, ew) = (
            spectrum_of_product(blocked, n, d, ProductPrecision::F64),
            spectrum_from_product(whole, &features, ProductPrecision::F64),
        );
        for q in ORDERS {
            let (a, c) = (vendi_from_eigenvalues(&eb, q), vendi_from_eigenvalues(&ew, q));
            assert!((a - c).abs() <= 1e-9 * c.abs(), "n={n} q={q}: {a} vs {c}");
        }
    }
    // The selected rows of the f32 map are the selected rows of the f64 map.
    let rows = CosineRows::new((0..12).map(|v| v as f32 + 1.0).collect::<Vec<f32>>(), 4, 3).unwrap();
    assert_eq!(rows.select_rows(&[3, 1]).features(), rows.features().select_rows(&[3, 1]));
}

#[test]
fn kernel_submatrix_picks_rows_and_columns_in_order() {
    // K[i][j] = 10 i + j
    let k: Vec<f64> = (0..3).flat_map(|i| (0..3).map(move |j| (10 * i + j) as f64)).collect();
    assert_eq!(kernel_submatrix(&k, 3, &[2, 0]), vec![22.0, 20.0, 2.0, 0.0]);
}

#[test]
fn precision_rule_follows_the_device() {
    // The CPU backend computes in f64 (WebGPU, without f64, is checked by tests/web).
    assert_eq!(ProductPrecision::for_device(&cpu()), ProductPrecision::F64);
}

mod bootstrap {
    //! A resample is scored as the Vendi computation of the duplicated collection would score it.
    use super::*;
    use culturelens_metrics::bootstrap::{CiMethod, CiSpec};

    fn random_features(n: usize, d: usize, seed: u64) -> Features {
        let mut rng = SplitMix64::new(seed);
        let x: Vec<f32> = (0..n * d).map(|_| rng.normal() as f32).collect();
        cosine_features(&x, n, d).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-10 * b.abs().max(1.0)
    }

    /// The scores of the collection with the rows `items` repeated as drawn, the ordinary way.
    fn duplicated(f: &Features, items: &[u32], quality: &[f64], q: Order) -> [f64; 3] {
        let rows: Vec<usize> = items.iter().map(|&i| i as usize).collect();
        let dup = f.select_rows(&rows);
        let spec = spectrum(&dup, Route::Auto, ProductPrecision::F64, &cpu());
        let s: Vec<f64> = rows.iter().map(|&i| quality[i]).collect();
        let v = VendiScore::from_spectrum(&spec, rows.len(), q, Some(&s));
        [v.vs, v.qvs, v.qvs_norm]
    }

    #[test]
    fn weighted_distinct_items_equal_the_duplicated_collection() {
        let items = [3u32, 3, 0, 5, 5, 5, 1, 7, 2, 3];
        let quality: Vec<f64> = (0..10).map(|i| 0.5 + 0.05 * i as f64).collect();
        // d = 4 < 7 distinct items: the dual route; d = 16: the weighted kernel route.
        for d in [4, 16] {
            let f = random_features(10, d, d as u64);
            for q in [Order::Finite(1.0), Order::Finite(2.0), Order::Finite(0.5), Order::Infinity] {
                let stat = VendiStatistic {
                    items: VendiItems::Features(&f),
                    quality: Some(&quality),
                    q,
                    protocol: None,
                    precision: ProductPrecision::F64,
                };
                let (got, want) = (stat.score(&items), duplicated(&f, &items, &quality, q));
                assert!(
                    got.iter().zip(&want).all(|(a, b)| close(*a, *b)),
                    "d {d} q {q}: {got:?} vs {want:?}"
                );
                // All items once: the point estimate.
                let all: Vec<u32> = (0..10).collect();
                let whole = duplicated(&f, &all, &quality, q);
                assert!(stat.score(&all).iter().zip(&whole).all(|(a, b)| close(*a, *b)));
            }
            // A precomputed kernel gives the same numbers.
            let k: Vec<f64> = (0..100)
                .map(|ij| (0..d).map(|c| f.data[ij / 10 * d + c] * f.data[ij % 10 * d + c]).sum())
                .collect();
            let stat = VendiStatistic {
                items: VendiItems::Kernel { k: &k, n: 10 },
                quality: Some(&quality),
                q: Order::Finite(1.0),
                protocol: None,
                precision: ProductPrecision::F64,
            };
            let want = duplicated(&f, &items, &quality, Order::Finite(1.0));
            assert!(stat.score(&items).iter().zip(&want).all(|(a, b)| close(*a, *b)));
        }
    }

    #[test]
    fn the_protocol_on_all_items_is_the_protocol() {
        let f = random_features(20, 6, 9);
        let plan = ProtocolPlan { batch: 8, repeats: 5, seed: 3 };
        let stat = VendiStatistic {
            items: VendiItems::Features(&f),
            quality: None,
            q: Order::Finite(1.0),
            protocol: Some(plan),
            precision: ProductPrecision::F64,
        };
        let all: Vec<u32> = (0..20).collect();
        let p = protocol(&f, None, Order::Finite(1.0), plan, ProductPrecision::F64, &cpu());
        let got = stat.score(&all);
        assert!(close(got[0], p.vs.mean) && close(got[1], p.qvs.mean) && close(got[2], p.qvs_norm.mean));
        // Intervals over the resamples bracket the estimate and are seeded.
        let spec = CiSpec::new(0.9, 60, 4, CiMethod::Percentile).unwrap();
        let [vs, ..] = stat.replicates(&spec.draws(20, "g"));
        let ci = vs.interval(0.9, CiMethod::Percentile).unwrap();
        assert!(ci.lo < ci.hi && ci.hi <= 8.0, "{ci:?}");
        assert_eq!(stat.replicates(&spec.draws(20, "g"))[0], vs);
    }
}
