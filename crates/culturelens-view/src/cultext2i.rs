//! The numbers of the browser's CulText2I view: the NA confusion matrix of one model (CulText2I
//! Fig. 5; rows = the images' true nationality, columns = the nationality NA predicts, in the
//! order of the report's nationality texts) drawn as row shares, as `culturelens figures` draws
//! `cultext2i_confusion_MODEL`: each count divided by its row's total, so a row reads "of the
//! images meant to show X, this share looks most like Y"; a row without images has no shares.

/// The row shares of a confusion matrix of counts (`None` for every cell of an empty row).
pub fn row_shares(counts: &[Vec<usize>]) -> Vec<Vec<Option<f64>>> {
    counts
        .iter()
        .map(|row| {
            let total: usize = row.iter().sum();
            row.iter().map(|&c| (total > 0).then(|| c as f64 / total as f64)).collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_divided_by_their_totals() {
        let shares = row_shares(&[vec![3, 1, 0], vec![0, 0, 0], vec![1, 1, 2]]);
        assert_eq!(
            shares,
            vec![
                vec![Some(0.75), Some(0.25), Some(0.0)],
                vec![None, None, None],
                vec![Some(0.25), Some(0.25), Some(0.5)],
            ]
        );
        assert!(row_shares(&[]).is_empty());
    }
}
