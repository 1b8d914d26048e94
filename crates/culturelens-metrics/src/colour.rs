//! Dominant colours of generated images (SoS paper App. F): k-means on an image's pixels, the
//! palette of a group of images, and the HSV value (brightness) of each colour (App. F.3).
//!
//! Conventions (stated once here; the CLI's `--help` and docs/analyses.md repeat them):
//! - Colour space: sRGB as decoded, channels in `[0, 255]` as `f64`, squared Euclidean distance.
//! - Subsampling ([`subsample`]): at most `n` pixels, the pixel at index `⌊i·N/n⌋` for
//!   `i = 0..n` of the `N` pixels in row-major order. No randomness, so every image is read the
//!   same way on every run.
//! - Initialisation ([`kmeans_plus_plus`]): k-means++ (Arthur & Vassilvitskii 2007) on
//!   SplitMix64 seeded with `seed`. The first centre is point `below(N)`; each further centre is
//!   the first point whose running sum of `D²` (squared distance to the nearest chosen centre)
//!   exceeds `u · ΣD²` with `u = next_f64()`. When `ΣD² = 0` every point already coincides with
//!   a centre: fewer than `k` distinct colours exist and the palette stops there.
//! - Iterations ([`lloyd`]): Lloyd's algorithm as scikit-learn's `KMeans(algorithm="lloyd")`
//!   runs it with `tol = 0`: each iteration assigns each point to its nearest centre (ties: the
//!   lowest centre index) and moves each centre to its points' mean; it stops after the
//!   iteration whose assignment equals the previous one, when no centre moved, or after
//!   `max_iter` iterations (then the labels are reassigned to the final centres).
//! - Empty clusters (scikit-learn's rule): after an assignment, each empty cluster in index order
//!   takes the next point farthest from its assigned centre (ties: the lower point index); that
//!   point leaves its old cluster's sum.
//! - Palette order ([`Palette`]): clusters by size, largest first (ties: lower cluster index);
//!   `share` = cluster size / points.
//! - HSV ([`hsv`]): Python's `colorsys.rgb_to_hsv` on channels scaled to `[0, 1]`; the value `V`
//!   is the brightness the SoS paper plots (App. F.3).

use culturelens_rng::SplitMix64;

/// An sRGB colour, channels in `[0, 255]`.
pub type Rgb = [f64; 3];

/// Errors of the colour analysis.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ColourError {
    #[error("k-means needs k >= 1 (got {0})")]
    ZeroK(usize),
    #[error("k-means got no pixels")]
    NoPoints,
}

/// At most `n` pixels of the `N = pixels.len()` given, the one at `⌊i·N/n⌋` for each `i < n`
/// (all of them when `N <= n`).
pub fn subsample(pixels: &[Rgb], n: usize) -> Vec<Rgb> {
    let total = pixels.len();
    if total <= n {
        return pixels.to_vec();
    }
    (0..n).map(|i| pixels[((i as u128 * total as u128) / n as u128) as usize]).collect()
}

/// Pixels of a packed RGB8 buffer as [`Rgb`] points.
pub fn rgb8_points(rgb: &[u8]) -> Vec<Rgb> {
    rgb.chunks_exact(3).map(|p| [p[0] as f64, p[1] as f64, p[2] as f64]).collect()
}

fn dist2(a: &Rgb, b: &Rgb) -> f64 {
    (a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)
}

/// Index and squared distance of the nearest centre (ties: the lowest index).
fn nearest(point: &Rgb, centres: &[Rgb]) -> (usize, f64) {
    let mut best = (0, f64::INFINITY);
    for (c, centre) in centres.iter().enumerate() {
        let d = dist2(point, centre);
        if d < best.1 {
            best = (c, d);
        }
    }
    best
}

/// k-means++ initial centres (at most `k`, fewer when the points have fewer distinct colours).
pub fn kmeans_plus_plus(points: &[Rgb], k: usize, seed: u64) -> Result<Vec<Rgb>, ColourError> {
    if k == 0 {
        return Err(ColourError::ZeroK(k));
    }
    if points.is_empty() {
        return Err(ColourError::NoPoints);
    }
    let mut rng = SplitMix64::new(seed);
    let mut centres = vec![points[rng.below(points.len() as u64) as usize]];
    let mut d2: Vec<f64> = points.iter().map(|p| dist2(p, &centres[0])).collect();
    while centres.len() < k {
        let total: f64 = d2.iter().sum();
        if total <= 0.0 {
            break;
        }
        let target = rng.next_f64() * total;
        let mut running = 0.0;
        let mut chosen = None;
        for (i, d) in d2.iter().enumerate() {
            running += d;
            if running > target && *d > 0.0 {
                chosen = Some(i);
                break;
            }
        }
        // Rounding can leave `running` just short of `target`: take the last point with D² > 0.
        let chosen = chosen.unwrap_or_else(|| d2.iter().rposition(|d| *d > 0.0).expect("total > 0"));
        let centre = points[chosen];
        for (p, d) in points.iter().zip(d2.iter_mut()) {
            *d = d.min(dist2(p, &centre));
        }
        centres.push(centre);
    }
    Ok(centres)
}

/// The result of [`lloyd`].
#[derive(Debug, Clone, PartialEq)]
pub struct KMeans {
    pub centres: Vec<Rgb>,
    /// Cluster of each point.
    pub labels: Vec<usize>,
    /// Sum of squared distances of the points to their centres.
    pub inertia: f64,
    /// Centre updates run (scikit-learn's `n_iter_`).
    pub iterations: usize,
}

/// Lloyd iterations from `init` (see the module conventions; scikit-learn `KMeans(init=init,
/// n_init=1, algorithm="lloyd", tol=0, max_iter=max_iter)`).
pub fn lloyd(points: &[Rgb], init: &[Rgb], max_iter: usize) -> Result<KMeans, ColourError> {
    if init.is_empty() {
        return Err(ColourError::ZeroK(0));
    }
    if points.is_empty() {
        return Err(ColourError::NoPoints);
    }
    let k = init.len();
    let mut centres = init.to_vec();
    let assign = |centres: &[Rgb]| points.iter().map(|p| nearest(p, centres).0).collect::<Vec<usize>>();
    let mut labels_old: Option<Vec<usize>> = None;
    let mut labels = Vec::new();
    let mut iterations = 0;
    let mut strict = false;
    while iterations < max_iter {
        labels = assign(&centres);
        let mut sums = vec![[0.0; 3]; k];
        let mut counts = vec![0usize; k];
        for (p, &l) in points.iter().zip(&labels) {
            for ch in 0..3 {
                sums[l][ch] += p[ch];
            }
            counts[l] += 1;
        }
        relocate_empty(points, &centres, &labels, &mut sums, &mut counts);
        let mut shift = 0.0;
        for c in 0..k {
            if counts[c] > 0 {
                let moved = sums[c].map(|s| s / counts[c] as f64);
                shift += dist2(&moved, &centres[c]);
                centres[c] = moved;
            }
        }
        iterations += 1;
        if labels_old.as_ref() == Some(&labels) {
            strict = true;
            break;
        }
        if shift == 0.0 {
            break;
        }
        labels_old = Some(labels.clone());
    }
    if !strict {
        labels = assign(&centres);
    }
    let inertia = points.iter().zip(&labels).map(|(p, &l)| dist2(p, &centres[l])).sum();
    Ok(KMeans { centres, labels, inertia, iterations })
}

/// scikit-learn's `_relocate_empty_clusters_dense`: each empty cluster takes one of the points
/// farthest from their (old) centres, farthest first.
fn relocate_empty(points: &[Rgb], centres: &[Rgb], labels: &[usize], sums: &mut [Rgb], counts: &mut [usize]) {
    let empty: Vec<usize> = (0..counts.len()).filter(|&c| counts[c] == 0).collect();
    if empty.is_empty() {
        return;
    }
    let mut far: Vec<(f64, usize)> =
        points.iter().zip(labels).enumerate().map(|(i, (p, &l))| (dist2(p, &centres[l]), i)).collect();
    far.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for (&cluster, &(_, i)) in empty.iter().zip(&far) {
        let old = labels[i];
        for ch in 0..3 {
            sums[old][ch] -= points[i][ch];
        }
        counts[old] -= 1;
        sums[cluster] = points[i];
        counts[cluster] = 1;
    }
}

/// One colour of a palette.
#[derive(Debug, Clone, PartialEq)]
pub struct PaletteColour {
    pub rgb: Rgb,
    /// Share of the points in this cluster.
    pub share: f64,
}

/// Dominant colours, largest cluster first.
#[derive(Debug, Clone, PartialEq)]
pub struct Palette {
    pub colours: Vec<PaletteColour>,
}

/// The k-means settings of a palette.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PaletteConfig {
    pub k: usize,
    pub max_pixels: usize,
    pub max_iter: usize,
    pub seed: u64,
}

impl PaletteConfig {
    /// The CLI's defaults: 8 colours as the SoS paper's App. F.3 plots, 10 000 pixels, 300
    /// iterations (scikit-learn's default), seed 0.
    pub const DEFAULT: Self = Self { k: 8, max_pixels: 10_000, max_iter: 300, seed: 0 };
}

/// The palette of `pixels`: subsample, k-means++, Lloyd, clusters ordered by size.
pub fn palette(pixels: &[Rgb], config: &PaletteConfig) -> Result<Palette, ColourError> {
    let points = subsample(pixels, config.max_pixels);
    let init = kmeans_plus_plus(&points, config.k, config.seed)?;
    let fit = lloyd(&points, &init, config.max_iter)?;
    Ok(palette_of(&fit, points.len()))
}

/// Orders a fit's clusters by size (ties: lower cluster index) with their shares.
pub fn palette_of(fit: &KMeans, n_points: usize) -> Palette {
    let mut counts = vec![0usize; fit.centres.len()];
    for &l in &fit.labels {
        counts[l] += 1;
    }
    let mut order: Vec<usize> = (0..counts.len()).collect();
    order.sort_by(|&a, &b| counts[b].cmp(&counts[a]).then(a.cmp(&b)));
    let colours = order
        .into_iter()
        .filter(|&c| counts[c] > 0)
        .map(|c| PaletteColour { rgb: fit.centres[c], share: counts[c] as f64 / n_points as f64 })
        .collect();
    Palette { colours }
}

/// HSV of an sRGB colour (channels in `[0, 255]`), each of H, S, V in `[0, 1]`, as Python's
/// `colorsys.rgb_to_hsv(r/255, g/255, b/255)`.
pub fn hsv(rgb: &Rgb) -> [f64; 3] {
    let [r, g, b] = rgb.map(|c| c / 255.0);
    let max = r.max(g).max(b);
    let min = r.min(g).min(b);
    let v = max;
    if min == max {
        return [0.0, 0.0, v];
    }
    let s = (max - min) / max;
    let rc = (max - r) / (max - min);
    let gc = (max - g) / (max - min);
    let bc = (max - b) / (max - min);
    let h = if r == max {
        bc - gc
    } else if g == max {
        2.0 + rc - bc
    } else {
        4.0 + gc - rc
    };
    [(h / 6.0).rem_euclid(1.0), s, v]
}

/// Histogram of HSV values `V` over `bins` equal bins of `[0, 1]` (the last bin closed), each
/// colour weighted by `weight`; the weights are normalised to sum to 1 (all zeros when the total
/// weight is 0).
pub fn value_histogram(colours: &[(Rgb, f64)], bins: usize) -> Vec<f64> {
    let mut hist = vec![0.0; bins];
    for (rgb, w) in colours {
        let v = hsv(rgb)[2];
        let bin = ((v * bins as f64).floor() as usize).min(bins - 1);
        hist[bin] += w;
    }
    let total: f64 = hist.iter().sum();
    if total > 0.0 {
        hist.iter_mut().for_each(|h| *h /= total);
    }
    hist
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lloyd_on_a_tiny_case_matches_the_hand_computation() {
        // Points 0, 2, 10, 12 on the red axis; centres start at 0 and 2.
        // Iteration 1: labels [0, 1, 1, 1] → centres 0 and 8. Iteration 2: 2 is nearer 0 (2 < 6):
        // labels [0, 0, 1, 1] → centres 1 and 11. Iteration 3: labels unchanged → stop (n_iter 3).
        // Inertia: 1 + 1 + 1 + 1 = 4.
        let points: Vec<Rgb> = [0.0, 2.0, 10.0, 12.0].iter().map(|&x| [x, 0.0, 0.0]).collect();
        let fit = lloyd(&points, &[[0.0, 0.0, 0.0], [2.0, 0.0, 0.0]], 300).unwrap();
        assert_eq!(fit.centres, vec![[1.0, 0.0, 0.0], [11.0, 0.0, 0.0]]);
        assert_eq!(fit.labels, vec![0, 0, 1, 1]);
        assert_eq!(fit.iterations, 3);
        assert_eq!(fit.inertia, 4.0);
        let pal = palette_of(&fit, 4);
        assert_eq!(pal.colours[0], PaletteColour { rgb: [1.0, 0.0, 0.0], share: 0.5 });
    }

    #[test]
    fn an_empty_cluster_takes_the_farthest_point() {
        // Duplicate centres: cluster 1 is empty after the first assignment (ties go to 0). The
        // farthest point from centre 0 (= 0) is 12, which moves to cluster 1: centres (0+2+10)/3
        // = 4 and 12. With one iteration the labels are then reassigned: [0, 0, 1, 1] (10 is
        // nearer 12). Run on: centres 1 and 11.
        let points: Vec<Rgb> = [0.0, 2.0, 10.0, 12.0].iter().map(|&x| [x, 0.0, 0.0]).collect();
        let fit = lloyd(&points, &[[0.0; 3], [0.0; 3]], 1).unwrap();
        assert_eq!(fit.centres, vec![[4.0, 0.0, 0.0], [12.0, 0.0, 0.0]]);
        assert_eq!(
            (fit.labels.as_slice(), fit.iterations, fit.inertia),
            ([0, 0, 1, 1].as_slice(), 1, 16.0 + 4.0 + 4.0 + 0.0)
        );
        let fit = lloyd(&points, &[[0.0; 3], [0.0; 3]], 300).unwrap();
        assert_eq!(fit.centres, vec![[1.0, 0.0, 0.0], [11.0, 0.0, 0.0]]);
    }

    #[test]
    fn kmeans_plus_plus_is_seeded_and_stops_at_the_distinct_colours() {
        let points: Vec<Rgb> = vec![[10.0, 20.0, 30.0], [10.0, 20.0, 30.0], [200.0, 0.0, 0.0]];
        let a = kmeans_plus_plus(&points, 8, 3).unwrap();
        assert_eq!(a, kmeans_plus_plus(&points, 8, 3).unwrap());
        assert_eq!(a.len(), 2);
        assert!(a.contains(&[200.0, 0.0, 0.0]) && a.contains(&[10.0, 20.0, 30.0]));
        assert_eq!(kmeans_plus_plus(&points, 0, 3), Err(ColourError::ZeroK(0)));
        assert_eq!(kmeans_plus_plus(&[], 2, 3), Err(ColourError::NoPoints));
    }

    #[test]
    fn subsampling_takes_evenly_spaced_pixels() {
        let pixels: Vec<Rgb> = (0..10).map(|i| [i as f64, 0.0, 0.0]).collect();
        let picked: Vec<f64> = subsample(&pixels, 4).iter().map(|p| p[0]).collect();
        assert_eq!(picked, [0.0, 2.0, 5.0, 7.0]); // ⌊0⌋, ⌊2.5⌋, ⌊5⌋, ⌊7.5⌋
        assert_eq!(subsample(&pixels, 20).len(), 10);
    }

    #[test]
    fn hsv_matches_colorsys() {
        // colorsys.rgb_to_hsv(1, 0.5, 0) = (1/12, 1, 1); (0.2, 0.4, 0.4) = (0.5, 0.5, 0.4).
        let [h, s, v] = hsv(&[255.0, 127.5, 0.0]);
        assert!((h - 1.0 / 12.0).abs() < 1e-15 && s == 1.0 && v == 1.0);
        let [h, s, v] = hsv(&[51.0, 102.0, 102.0]);
        assert!((h - 0.5).abs() < 1e-15 && (s - 0.5).abs() < 1e-15 && (v - 0.4).abs() < 1e-15);
        assert_eq!(hsv(&[0.0, 0.0, 0.0]), [0.0, 0.0, 0.0]);
        // Value histogram: V = 1 (last bin), 0.4 (bin 1 of 2 is [0.5, 1] → bin 0), weights 3 and 1.
        assert_eq!(
            value_histogram(&[([255.0, 0.0, 0.0], 3.0), ([51.0, 102.0, 102.0], 1.0)], 2),
            [0.25, 0.75]
        );
    }

    /// scikit-learn KMeans from the same initial centres
    /// (`scripts/fixtures/make_colour.py`).
    #[test]
    fn lloyd_matches_scikit_learn() {
        let fixture: serde_json::Value =
            serde_json::from_str(&culturelens_testkit::read_fixture("colour/kmeans_parity.json")).unwrap();
        let rgb = |v: &serde_json::Value| -> Vec<Rgb> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    let p = p.as_array().unwrap();
                    [0, 1, 2].map(|c| p[c].as_f64().unwrap())
                })
                .collect()
        };
        for case in fixture["cases"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let points = rgb(&case["points"]);
            let max_iter = case["max_iter"].as_u64().unwrap() as usize;
            let fit = lloyd(&points, &rgb(&case["init"]), max_iter).unwrap();
            let labels: Vec<usize> =
                case["labels"].as_array().unwrap().iter().map(|l| l.as_u64().unwrap() as usize).collect();
            assert_eq!(fit.labels, labels, "{name}");
            assert_eq!(fit.iterations as u64, case["n_iter"].as_u64().unwrap(), "{name}");
            for (got, want) in fit.centres.iter().zip(rgb(&case["centres"])) {
                for c in 0..3 {
                    assert!((got[c] - want[c]).abs() < 1e-9, "{name}: {got:?} vs {want:?}");
                }
            }
            let inertia = case["inertia"].as_f64().unwrap();
            assert!((fit.inertia - inertia).abs() < 1e-9 * inertia, "{name}: {} vs {inertia}", fit.inertia);
        }
    }
}
