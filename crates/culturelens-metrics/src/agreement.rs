//! Inter-rater agreement, as the SoS paper validates its human labels (App. B.2, Tables 8–9):
//! Fleiss' κ, Cohen's κ per rater pair, category-specific Cohen's κ, and Krippendorff's α.
//!
//! Labels are category codes `0..k` (the caller maps its label strings onto them; for the ordinal
//! level, codes must follow the labels' order). Conventions, matching the reference
//! implementations the tests compare with:
//! - **Fleiss' κ** (Fleiss 1971; statsmodels `fleiss_kappa(method="fleiss")`) over items rated by
//!   every rater: `P_i = (Σ_j n_ij² − m) / (m(m − 1))`, `P̄ = mean P_i`, `p_j = Σ_i n_ij / (N m)`,
//!   `P_e = Σ_j p_j²`, `κ = (P̄ − P_e) / (1 − P_e)`.
//! - **Cohen's κ** (scikit-learn `cohen_kappa_score`, unweighted) of two raters over the same
//!   items: `p_o` the share of equal labels, `p_e = Σ_j a_j b_j / N²` from the two marginals,
//!   `κ = (p_o − p_e) / (1 − p_e)`.
//! - **Category-specific κ** (SoS Table 9): for one label, Cohen's κ of the two raters' indicators
//!   "gave this label" / "did not".
//! - **Krippendorff's α** (Krippendorff 2011; the `krippendorff` package) over all items, missing
//!   ratings allowed: the coincidence matrix `o_ck = Σ_u Σ_{i≠j} [c_ui = c, c_uj = k] / (m_u − 1)`
//!   over units with `m_u ≥ 2` ratings, `n_c = Σ_k o_ck`, `n = Σ_c n_c`,
//!   `α = 1 − (n − 1) Σ o_ck δ²_ck / Σ_{c,k} n_c n_k δ²_ck`; nominal `δ²_ck = [c ≠ k]`, ordinal
//!   `δ²_ck = (Σ_{g=c}^{k} n_g − (n_c + n_k)/2)²`.
//!
//! Every statistic is `None` where its denominator is zero (for example all raters always use one
//! label), where the references return NaN.

/// Krippendorff's level of measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Nominal,
    Ordinal,
}

fn ratio(num: f64, den: f64) -> Option<f64> {
    (den != 0.0).then(|| num / den)
}

/// Fleiss' κ of `items` (each the codes the `m` raters gave one item; all rows the same length
/// `m ≥ 2`) over `k` categories.
pub fn fleiss_kappa(items: &[Vec<usize>], k: usize) -> Option<f64> {
    let m = items.first()?.len();
    assert!(items.iter().all(|row| row.len() == m), "every item needs the same number of ratings");
    if m < 2 {
        return None;
    }
    let (n_items, mf) = (items.len() as f64, m as f64);
    let mut column_totals = vec![0.0f64; k];
    let mut p_bar = 0.0;
    for row in items {
        let mut counts = vec![0.0f64; k];
        for &c in row {
            counts[c] += 1.0;
        }
        p_bar += (counts.iter().map(|n| n * n).sum::<f64>() - mf) / (mf * (mf - 1.0));
        column_totals.iter_mut().zip(&counts).for_each(|(t, n)| *t += n);
    }
    p_bar /= n_items;
    let p_e: f64 = column_totals.iter().map(|t| (t / (n_items * mf)).powi(2)).sum();
    ratio(p_bar - p_e, 1.0 - p_e)
}

/// Cohen's κ of two raters' codes for the same items (`a.len() == b.len()`), `k` categories.
pub fn cohen_kappa(a: &[usize], b: &[usize], k: usize) -> Option<f64> {
    assert_eq!(a.len(), b.len(), "both raters must rate the same items");
    if a.is_empty() {
        return None;
    }
    let n = a.len() as f64;
    let (mut ma, mut mb) = (vec![0.0f64; k], vec![0.0f64; k]);
    let mut agree = 0.0;
    for (&x, &y) in a.iter().zip(b) {
        ma[x] += 1.0;
        mb[y] += 1.0;
        agree += f64::from(u8::from(x == y));
    }
    let p_o = agree / n;
    let p_e: f64 = ma.iter().zip(&mb).map(|(x, y)| x * y).sum::<f64>() / (n * n);
    ratio(p_o - p_e, 1.0 - p_e)
}

/// Cohen's κ of the indicators "rated `label`" of two raters (category-specific agreement).
pub fn category_kappa(a: &[usize], b: &[usize], label: usize) -> Option<f64> {
    let indicator = |codes: &[usize]| codes.iter().map(|&c| usize::from(c == label)).collect::<Vec<_>>();
    cohen_kappa(&indicator(a), &indicator(b), 2)
}

/// Krippendorff's α of `units` (each the optional codes of every rater for one item) over `k`
/// categories.
pub fn krippendorff_alpha(units: &[Vec<Option<usize>>], k: usize, level: Level) -> Option<f64> {
    let mut o = vec![vec![0.0f64; k]; k];
    for unit in units {
        let mut counts = vec![0.0f64; k];
        unit.iter().flatten().for_each(|&c| counts[c] += 1.0);
        let m_u: f64 = counts.iter().sum();
        if m_u < 2.0 {
            continue;
        }
        for c in 0..k {
            for j in 0..k {
                let pairs = counts[c] * (counts[j] - f64::from(u8::from(c == j)));
                o[c][j] += pairs / (m_u - 1.0);
            }
        }
    }
    let n_c: Vec<f64> = o.iter().map(|row| row.iter().sum()).collect();
    let n: f64 = n_c.iter().sum();
    let delta = |c: usize, j: usize| -> f64 {
        match level {
            Level::Nominal => f64::from(u8::from(c != j)),
            Level::Ordinal => {
                let (lo, hi) = (c.min(j), c.max(j));
                let between: f64 = n_c[lo..=hi].iter().sum();
                (between - (n_c[lo] + n_c[hi]) / 2.0).powi(2)
            }
        }
    };
    let (mut observed, mut expected) = (0.0, 0.0);
    for c in 0..k {
        for j in 0..k {
            let d = delta(c, j);
            observed += o[c][j] * d;
            expected += n_c[c] * n_c[j] * d;
        }
    }
    ratio((n - 1.0) * observed, expected).map(|r| 1.0 - r)
}

/// A statistic of two raters' codes over the same items.
type PairStatistic<'a> = &'a dyn Fn(&[usize], &[usize]) -> Option<f64>;

/// Ratings as codes into `labels` (sorted: by value for the ordinal level, as text otherwise).
#[derive(Debug, Clone, PartialEq)]
pub struct Coded {
    pub labels: Vec<String>,
    /// items × raters.
    pub codes: Vec<Vec<Option<usize>>>,
}

/// A label [`code_ratings`] cannot read: rater (index into its columns), 0-based row, message.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelError {
    pub rater: usize,
    pub row: usize,
    pub message: String,
}

/// Maps each non-empty label (trimmed) of the rater `columns` (one value per item each) onto
/// its code: `culturelens agreement`'s coding, and the Python package's `agreement`. An ordinal
/// label must be a finite number.
pub fn code_ratings(columns: &[&[String]], level: Level) -> Result<Coded, LabelError> {
    let mut labels: Vec<String> = Vec::new();
    for (rater, column) in columns.iter().enumerate() {
        for (row, value) in column.iter().enumerate() {
            let value = value.trim();
            if value.is_empty() {
                continue;
            }
            if level == Level::Ordinal && value.parse::<f64>().map_or(true, |v| !v.is_finite()) {
                return Err(LabelError {
                    rater,
                    row,
                    message: format!("ordinal labels must be numbers, got {value:?}"),
                });
            }
            labels.push(value.to_string());
        }
    }
    match level {
        Level::Nominal => labels.sort(),
        Level::Ordinal => {
            labels.sort_by(|a, b| a.parse::<f64>().unwrap().total_cmp(&b.parse::<f64>().unwrap()))
        }
    }
    labels.dedup();
    let code = |v: &str| labels.iter().position(|l| l == v);
    let rows = columns.first().map_or(0, |c| c.len());
    let codes = (0..rows).map(|row| columns.iter().map(|c| code(c[row].trim())).collect()).collect();
    Ok(Coded { labels, codes })
}

/// The JSON report of `culturelens agreement` (and the Python package's `agreement`), keys in a
/// fixed order (pairs in the order the raters were given), numbers in full f64 precision.
pub fn report(coded: &Coded, raters: &[String], level: Level) -> String {
    let k = coded.labels.len();
    let complete: Vec<Vec<usize>> =
        coded.codes.iter().filter_map(|item| item.iter().copied().collect::<Option<Vec<_>>>()).collect();
    let columns: Vec<Vec<usize>> =
        (0..raters.len()).map(|r| complete.iter().map(|item| item[r]).collect()).collect();
    let pairs: Vec<(usize, usize)> =
        (0..raters.len()).flat_map(|a| (a + 1..raters.len()).map(move |b| (a, b))).collect();
    let pair_object = |f: PairStatistic| {
        object(
            pairs
                .iter()
                .map(|&(a, b)| (format!("{}|{}", raters[a], raters[b]), number(f(&columns[a], &columns[b])))),
        )
    };
    let per_label = object(
        coded
            .labels
            .iter()
            .enumerate()
            .map(|(label, name)| (name.clone(), pair_object(&|a, b| category_kappa(a, b, label)))),
    );
    let level_name = match level {
        Level::Nominal => "nominal",
        Level::Ordinal => "ordinal",
    };
    let entries = [
        ("n_items".to_string(), complete.len().to_string()),
        ("fleiss_kappa".to_string(), number(fleiss_kappa(&complete, k))),
        ("cohen_kappa".to_string(), pair_object(&|a, b| cohen_kappa(a, b, k))),
        ("krippendorff_alpha".to_string(), number(krippendorff_alpha(&coded.codes, k, level))),
        ("level".to_string(), serde_json::to_string(level_name).unwrap()),
        ("per_label".to_string(), per_label),
    ];
    object(entries.into_iter()) + "\n"
}

/// A JSON number in full f64 precision, or `null`.
fn number(value: Option<f64>) -> String {
    serde_json::to_string(&value).unwrap()
}

/// A JSON object from (key, already-serialised value) pairs, in the order given.
fn object(entries: impl Iterator<Item = (String, String)>) -> String {
    let body: Vec<String> =
        entries.map(|(key, value)| format!("{}: {value}", serde_json::to_string(&key).unwrap())).collect();
    format!("{{{}}}", body.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: Option<f64>, want: f64) {
        let got = got.expect("defined");
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    }

    #[test]
    fn cohen_by_hand() {
        // 4 items: a = [0,0,1,1], b = [0,1,1,1]. p_o = 3/4; marginals a (2,2), b (1,3):
        // p_e = (2·1 + 2·3)/16 = ½; κ = (¾ − ½)/(1 − ½) = ½.
        close(cohen_kappa(&[0, 0, 1, 1], &[0, 1, 1, 1], 2), 0.5);
        close(cohen_kappa(&[0, 1, 2], &[0, 1, 2], 3), 1.0);
        // One label only on both sides: p_e = 1, undefined (NaN in scikit-learn).
        assert_eq!(cohen_kappa(&[1, 1], &[1, 1], 2), None);
    }

    #[test]
    fn category_kappa_by_hand() {
        // Label 2's indicators: a = [1,0,0,1], b = [1,0,1,1]: p_o = ¾, marginals (2,2), (1,3):
        // κ = ½ as above.
        close(category_kappa(&[2, 0, 1, 2], &[2, 1, 2, 2], 2), 0.5);
    }

    #[test]
    fn fleiss_by_hand() {
        // 3 raters, 2 categories, items [0,0,0], [0,0,1], [1,1,1].
        // P_i = (9−3)/6 = 1, (5−3)/6 = ⅓, 1 → P̄ = 7/9. p = (5/9, 4/9), P_e = 41/81.
        // κ = (7/9 − 41/81)/(1 − 41/81) = (22/81)/(40/81) = 0.55.
        close(fleiss_kappa(&[vec![0, 0, 0], vec![0, 0, 1], vec![1, 1, 1]], 2), 0.55);
    }

    #[test]
    fn krippendorff_nominal_by_hand() {
        // Units (two raters): [0,0], [1,1], [0,1], [1,None] (not pairable).
        // o: o00 = 2, o11 = 2, o01 = o10 = 1; n_c = (3,3), n = 6.
        // α = 1 − 5·(o01 + o10)/(2·n0·n1) = 1 − 5·2/18 = 4/9.
        let units =
            vec![vec![Some(0), Some(0)], vec![Some(1), Some(1)], vec![Some(0), Some(1)], vec![Some(1), None]];
        close(krippendorff_alpha(&units, 2, Level::Nominal), 4.0 / 9.0);
    }

    #[test]
    fn krippendorff_ordinal_by_hand() {
        // Units: [0,1], [1,2], [2,2]. o01 = o10 = 1, o12 = o21 = 1, o22 = 2; n_c = (1,2,3), n = 6.
        // δ²01 = (1+2 − 1.5)² = 2.25, δ²12 = (2+3 − 2.5)² = 6.25, δ²02 = (6 − 2)² = 16.
        // Observed Σ o δ² = 2·2.25 + 2·6.25 = 17.
        // Expected Σ n_c n_k δ² = 2·(1·2·2.25 + 2·3·6.25 + 1·3·16) = 2·(4.5 + 37.5 + 48) = 180.
        // α = 1 − 5·17/180.
        let units = vec![vec![Some(0), Some(1)], vec![Some(1), Some(2)], vec![Some(2), Some(2)]];
        close(krippendorff_alpha(&units, 3, Level::Ordinal), 1.0 - 85.0 / 180.0);
    }
}
