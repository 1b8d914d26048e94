//! Paired differences of joint SoS between two models or two languages (`culturelens sos
//! --compare-models A,B`, `--compare-languages A,B`), on the host from the per-output scores.
//!
//! - **Cells compared**: comparing models, A's (language, culture[, layer]) cell with B's cell of
//!   the same language, culture and layer; comparing languages, the (model, culture[, layer]) cell
//!   in language A with the one in language B.
//! - **Pairs**: an output of A's cell and one of B's cell with the same pairing key (the values of
//!   `--pair-by`, e.g. template, person and seed: the same prompt and seed, translated or given to
//!   another model). A key that two outputs of one cell share is an error; keys in one cell only
//!   are left out. The statistic is `mean(d)`, `d = SoS_A − SoS_B` over the pairs, with the
//!   references of the full table (the fast mode of the intervals, `bootstrap.rs`).
//! - **Interval**: the bootstrap of `mean(d)` over the pairs ([`Replicates::of_mean`]), one stream
//!   per compared cell ([`stream_seed`] of the seed and [`comparison_key`]).
//! - **Test**: the two-sided sign-flip permutation test of `mean(d) = 0`
//!   ([`culturelens_metrics::permutation::sign_flip_test`], seeded with the same stream seed), then
//!   Holm's adjustment over every compared cell of the table.

use std::collections::HashMap;

use culturelens_metrics::bootstrap::{CiSpec, Replicates, stream_seed};
use culturelens_metrics::permutation::{holm, sign_flip_test};
pub use culturelens_results::sos::{Factor, PairedDifference};

use super::bootstrap::cell_key;
use super::layout::{Cell, SosLayout};

/// A comparison that cannot be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompareError {
    #[error("{column} `{value}` is not in the table ({column}s present: {present})")]
    Unknown { column: &'static str, value: String, present: String },
    #[error("compare two different {column}s (got `{value}` twice)")]
    Same { column: &'static str, value: String },
    #[error(
        "rows {first} and {second} are both in cell {cell} with the same pairing key `{key}`: --pair-by must tell the outputs of a cell apart"
    )]
    DuplicateKey { cell: String, key: String, first: usize, second: usize },
    #[error("no output of {a} pairs with one of {b} (same {shared}, culture[, layer] and pairing key)")]
    NoPairs { a: String, b: String, shared: &'static str },
}

/// What to compare: the factor, the two values and the pairing key of every output.
#[derive(Debug, Clone, Copy)]
pub struct Comparison<'a> {
    pub factor: Factor,
    pub a: &'a str,
    pub b: &'a str,
    /// One key per output (the `--pair-by` values joined).
    pub pair_key: &'a [String],
    pub permutations: usize,
}

/// The stream key of one compared cell: the factor, both values and the cell of A.
pub fn comparison_key(factor: Factor, a: &str, b: &str, cell_a: &Cell) -> String {
    format!("{}\u{1f}{a}\u{1f}{b}\u{1f}{}", factor.columns().0, cell_key(cell_a))
}

/// The paired difference of every cell A and B share, in the layout's cell order of A, with
/// Holm-adjusted p-values (module doc).
pub fn paired_differences(
    layout: &SosLayout,
    scores: &[f32],
    comparison: Comparison<'_>,
    spec: CiSpec,
) -> Result<Vec<PairedDifference>, CompareError> {
    let Comparison { factor, a, b, pair_key, permutations } = comparison;
    assert_eq!(scores.len(), layout.len(), "one score per output");
    assert_eq!(pair_key.len(), layout.len(), "one pairing key per output");
    let (column, shared_column) = factor.columns();
    let value = |cell: &Cell| match factor {
        Factor::Models => cell.model.clone(),
        Factor::Languages => cell.language.clone(),
    };
    let present: std::collections::BTreeSet<String> = layout.cells.iter().map(value).collect();
    for v in [a, b] {
        if !present.contains(v) {
            let present = present.iter().cloned().collect::<Vec<_>>().join(", ");
            return Err(CompareError::Unknown { column, value: v.to_string(), present });
        }
    }
    if a == b {
        return Err(CompareError::Same { column, value: a.to_string() });
    }
    // The cell of the other value with the same remaining coordinates.
    let counterpart = |cell: &Cell| {
        let mut other = cell.clone();
        match factor {
            Factor::Models => other.model = b.to_string(),
            Factor::Languages => other.language = b.to_string(),
        }
        other
    };
    let index: HashMap<&Cell, usize> = layout.cells.iter().enumerate().map(|(i, c)| (c, i)).collect();
    let rows = layout.cell_rows();
    let keyed = |c: usize| -> Result<HashMap<&str, u32>, CompareError> {
        let mut map: HashMap<&str, u32> = HashMap::new();
        for &r in &rows[c] {
            if let Some(first) = map.insert(pair_key[r as usize].as_str(), r) {
                return Err(CompareError::DuplicateKey {
                    cell: cell_name(&layout.cells[c]),
                    key: pair_key[r as usize].clone(),
                    first: first as usize,
                    second: r as usize,
                });
            }
        }
        Ok(map)
    };
    let mut out = Vec::new();
    for (ca, cell) in layout.cells.iter().enumerate().filter(|(_, c)| value(c) == a) {
        let Some(&cb) = index.get(&counterpart(cell)) else { continue };
        let by_key = keyed(cb)?;
        keyed(ca)?;
        let d: Vec<f64> = rows[ca]
            .iter()
            .filter_map(|&ra| {
                let rb = *by_key.get(pair_key[ra as usize].as_str())?;
                Some(f64::from(scores[ra as usize]) - f64::from(scores[rb as usize]))
            })
            .collect();
        if d.is_empty() {
            continue;
        }
        let key = comparison_key(factor, a, b, cell);
        let replicates = Replicates::of_mean(&d, &spec.draws(d.len(), &key));
        let test = sign_flip_test(&d, permutations, stream_seed(spec.seed, &key));
        out.push(PairedDifference {
            a: a.to_string(),
            b: b.to_string(),
            shared: match factor {
                Factor::Models => cell.language.clone(),
                Factor::Languages => cell.model.clone(),
            },
            layer: cell.layer.clone(),
            culture: cell.culture.clone(),
            n_pairs: d.len(),
            diff: replicates.estimate,
            diff_ci: replicates.interval(spec.level, spec.method),
            p_value: test.p_value,
            p_holm: 0.0,
            exact: test.exact,
        });
    }
    if out.is_empty() {
        return Err(CompareError::NoPairs { a: a.to_string(), b: b.to_string(), shared: shared_column });
    }
    let adjusted = holm(&out.iter().map(|r| r.p_value).collect::<Vec<_>>());
    for (row, p) in out.iter_mut().zip(adjusted) {
        row.p_holm = p;
    }
    Ok(out)
}

/// A cell as messages name it: `model/[layer/]language/culture`.
fn cell_name(cell: &Cell) -> String {
    match &cell.layer {
        Some(layer) => format!("{}/{layer}/{}/{}", cell.model, cell.language, cell.culture),
        None => format!("{}/{}/{}", cell.model, cell.language, cell.culture),
    }
}
