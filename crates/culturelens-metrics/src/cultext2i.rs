//! The automatic metrics of the CulText2I paper (§6.1, Table 2): national association (NA),
//! cultural-dimension projection (DP), cultural distance (CD), cross-cultural similarity (CCS) and
//! the extrinsic XNA/XDP from VQA answers.
//!
//! With `I` an image embedding and `X` a text embedding, both L2-normalised (cosine similarity):
//! - `NA(I)` = the entry of the image's own nationality in `softmax_k(T · cos(I, X_k))` over the
//!   `k` nationality texts ([`image_scores`]; `T = 1` is the paper's literal definition, `T = 100`
//!   CLIP's logit scale); the argmax (first on ties, in the text table's order) is the predicted
//!   nationality, scored by a [`Confusion`] matrix and its accuracy;
//! - `DP_d(I) = cos(I, X_d)` for each cultural-dimension text `d`;
//! - `CD(I) = 1 − cos(I, X_c)` with the *English* concept text of the image's concept `c`;
//! - `CCS(l1, l2)` of one (model, concept, template) = the mean cosine over every pair of images,
//!   one generated in `l1` and one in `l2` ([`ccs`]; for `l1 = l2` the pairs of two *different*
//!   images, so that self-similarity does not count);
//! - XNA and XDP ([`majority`], [`xna`], [`xdp`]): per image set the VQA answer given by a strict
//!   majority (more than half) of its images, "can't tell" (`None`) otherwise. XNA = the share of
//!   sets whose majority answer is the expected nationality; XDP(d0, d1) = (#sets answering `d0` −
//!   #sets answering `d1`) / #sets, in `[−1, 1]` (the paper's Fig. 6: 0.6 modern, 0.3 ancient and
//!   0.1 can't tell give 0.3).
//!
//! The cosine matrices come from the device (`culturelens_compute::tensor::cosine_tensor`); the
//! softmax, the means and the votes here run in f64 on the host.
//!
//! The authors' code is not public (github.com/venturamor/CulText-2-I holds a README only), so
//! these definitions are this project's reading of the paper, checked on hand-worked values, not
//! against the authors' implementation.

use crate::stats::{argmax, softmax};

/// The intrinsic scores of one image.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageScores {
    /// NA: the softmax probability of the image's own nationality.
    pub na: f64,
    /// Index (into the nationality texts) of the most probable nationality.
    pub predicted: usize,
    /// `DP_d` per dimension text, in the order given.
    pub dp: Vec<f64>,
    /// CD against the English concept text.
    pub cd: f64,
}

/// Where an image's scores come from in its row of the image × text cosine matrix.
#[derive(Debug, Clone, Copy)]
pub struct TextColumns<'a> {
    /// Columns of the nationality texts (the softmax runs over these, in this order).
    pub nationalities: &'a [usize],
    /// Columns of the dimension texts.
    pub dimensions: &'a [usize],
}

/// NA, the predicted nationality, DP and CD of one image from its cosine row; `truth` indexes
/// `cols.nationalities`, `concept` is the column of its English concept text.
pub fn image_scores(
    cos_row: &[f32],
    cols: TextColumns<'_>,
    truth: usize,
    concept: usize,
    temperature: f64,
) -> ImageScores {
    let probs =
        softmax(&cols.nationalities.iter().map(|&c| temperature * cos_row[c] as f64).collect::<Vec<_>>());
    let predicted = argmax(&probs);
    ImageScores {
        na: probs[truth],
        predicted,
        dp: cols.dimensions.iter().map(|&c| cos_row[c] as f64).collect(),
        cd: 1.0 - cos_row[concept] as f64,
    }
}

/// Means of the intrinsic scores over one group of images.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupScores {
    pub n: usize,
    pub na: f64,
    /// Share of images whose predicted nationality is their own.
    pub na_acc: f64,
    pub cd: f64,
    pub dp: Vec<f64>,
}

/// Group means of `scores` (`truths[i]` is image `i`'s nationality index); `None` when empty.
pub fn group_scores(scores: &[&ImageScores], truths: &[usize]) -> Option<GroupScores> {
    assert_eq!(scores.len(), truths.len());
    let n = scores.len();
    if n == 0 {
        return None;
    }
    let mean = |f: &dyn Fn(usize) -> f64| (0..n).map(f).sum::<f64>() / n as f64;
    Some(GroupScores {
        n,
        na: mean(&|i| scores[i].na),
        na_acc: mean(&|i| f64::from(u8::from(scores[i].predicted == truths[i]))),
        cd: mean(&|i| scores[i].cd),
        dp: (0..scores[0].dp.len()).map(|d| mean(&|i| scores[i].dp[d])).collect(),
    })
}

/// A confusion matrix: `counts[truth][predicted]`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Confusion {
    pub counts: Vec<Vec<usize>>,
    pub n: usize,
    /// Share of the diagonal (`None` when empty).
    pub accuracy: Option<f64>,
}

impl Confusion {
    /// Counts `(truth, predicted)` pairs over `k` classes.
    pub fn of(pairs: impl IntoIterator<Item = (usize, usize)>, k: usize) -> Confusion {
        let mut counts = vec![vec![0; k]; k];
        for (t, p) in pairs {
            counts[t][p] += 1;
        }
        let n: usize = counts.iter().flatten().sum();
        let hits: usize = (0..k).map(|i| counts[i][i]).sum();
        Confusion { counts, n, accuracy: (n > 0).then(|| hits as f64 / n as f64) }
    }
}

/// `CCS(l1, l2)` of one (model, concept, template): the mean of `gram[i][j]` (a square cosine
/// matrix, row-major, `n × n`) over `i ∈ rows1`, `j ∈ rows2`, `i ≠ j`; `None` without such a pair.
pub fn ccs(gram: &[f32], n: usize, rows1: &[usize], rows2: &[usize]) -> Option<f64> {
    let (mut sum, mut count) = (0.0f64, 0usize);
    for &i in rows1 {
        for &j in rows2 {
            if i != j {
                sum += gram[i * n + j] as f64;
                count += 1;
            }
        }
    }
    (count > 0).then(|| sum / count as f64)
}

/// The answer given by strictly more than half of `answers` (compared as given), or `None`
/// ("can't tell").
pub fn majority<'a>(answers: &[&'a str]) -> Option<&'a str> {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for &a in answers {
        match counts.iter_mut().find(|(x, _)| *x == a) {
            Some((_, c)) => *c += 1,
            None => counts.push((a, 1)),
        }
    }
    counts.into_iter().find(|&(_, c)| 2 * c > answers.len()).map(|(a, _)| a)
}

/// XNA over image sets: the share of sets whose majority answer equals the expected nationality
/// (`(majority, expected)` per set); `None` for no set.
pub fn xna(sets: &[(Option<&str>, &str)]) -> Option<f64> {
    let hits = sets.iter().filter(|(m, want)| *m == Some(*want)).count();
    (!sets.is_empty()).then(|| hits as f64 / sets.len() as f64)
}

/// XDP(d0, d1) over the majority answers of image sets: (#`d0` − #`d1`) / #sets; `None` for no
/// set. A set without a majority, or whose majority is neither end, counts only in #sets.
pub fn xdp(majorities: &[Option<&str>], d0: &str, d1: &str) -> Option<f64> {
    let count = |d: &str| majorities.iter().filter(|m| **m == Some(d)).count() as f64;
    (!majorities.is_empty()).then(|| (count(d0) - count(d1)) / majorities.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_scores_by_hand() {
        // Texts: nationalities at columns 0 and 2, a dimension at 1, the concept at 3.
        let row = [0.5f32, 0.25, 0.0, 0.75];
        let cols = TextColumns { nationalities: &[0, 2], dimensions: &[1] };
        let s = image_scores(&row, cols, 1, 3, 1.0);
        // softmax(0.5, 0) = (e^0.5, 1)/(e^0.5 + 1); truth is the second entry.
        let e = 0.5f64.exp();
        assert!((s.na - 1.0 / (e + 1.0)).abs() < 1e-15);
        assert_eq!(s.predicted, 0);
        assert_eq!(s.dp, vec![0.25]);
        assert_eq!(s.cd, 0.25);
        // T = 100 sharpens: 1/(e^50 + 1).
        let t = image_scores(&row, cols, 1, 3, 100.0);
        assert!((t.na - 1.0 / (50f64.exp() + 1.0)).abs() < 1e-25);
        assert_eq!(argmax(&[1.0, 3.0, 3.0]), 1);
    }

    #[test]
    fn group_means_and_confusion_by_hand() {
        let a = ImageScores { na: 0.2, predicted: 0, dp: vec![0.1, 0.3], cd: 0.5 };
        let b = ImageScores { na: 0.6, predicted: 1, dp: vec![0.3, 0.1], cd: 0.7 };
        let g = group_scores(&[&a, &b], &[1, 1]).unwrap();
        assert_eq!(g.n, 2);
        assert!((g.na - 0.4).abs() < 1e-15 && (g.cd - 0.6).abs() < 1e-15);
        assert_eq!(g.na_acc, 0.5);
        assert!((g.dp[0] - 0.2).abs() < 1e-15 && (g.dp[1] - 0.2).abs() < 1e-15);
        assert_eq!(group_scores(&[], &[]), None);
        let c = Confusion::of([(0, 0), (0, 1), (1, 1), (1, 1)], 2);
        assert_eq!(c.counts, vec![vec![1, 1], vec![0, 2]]);
        assert_eq!((c.n, c.accuracy), (4, Some(0.75)));
    }

    #[test]
    fn ccs_by_hand() {
        // Images 0, 1 in l1 and 2 in l2.
        let gram = [1.0f32, 0.5, 0.25, 0.5, 1.0, 0.75, 0.25, 0.75, 1.0];
        assert_eq!(ccs(&gram, 3, &[0, 1], &[2]), Some(0.5));
        // Same language: only the pairs (0,1), (1,0).
        assert_eq!(ccs(&gram, 3, &[0, 1], &[0, 1]), Some(0.5));
        assert_eq!(ccs(&gram, 3, &[2], &[2]), None);
    }

    #[test]
    fn votes_by_hand() {
        assert_eq!(majority(&["spain", "spain", "mexico"]), Some("spain"));
        assert_eq!(majority(&["spain", "mexico"]), None); // a tie is no strict majority
        assert_eq!(majority(&["a", "a", "b", "c"]), None); // 2 of 4 is not more than half
        assert_eq!(majority(&[]), None);
        assert_eq!(
            xna(&[(Some("spain"), "spain"), (None, "spain"), (Some("peru"), "chile")]),
            Some(1.0 / 3.0)
        );
        let m = [Some("modern"); 6].into_iter().chain([Some("ancient"); 3]).chain([None]).collect::<Vec<_>>();
        assert!((xdp(&m, "modern", "ancient").unwrap() - 0.3).abs() < 1e-15); // the paper's Fig. 6
        assert_eq!(xdp(&[], "a", "b"), None);
    }
}
