//! Embedding tables on a Burn device, shared by the analysis subcommands that compare images with
//! texts (`cultext2i`, `magbig --report`, `classify`, `clipscore`): upload, the zero-row check a cosine needs, and the
//! synchronous read-back.

use burn::tensor::{Device, Tensor, TensorData};
use culturelens_table::{EmbeddingTable, Matrix, TableError};

/// The matrix as a `[rows, cols]` tensor on `device`.
pub fn upload(m: &Matrix, device: &Device) -> Tensor<2> {
    Tensor::<2>::from_data(TensorData::new(m.data().to_vec(), [m.rows(), m.cols()]), device)
}

/// Equal-length rows as a matrix (at least one row).
pub fn matrix<'a>(rows: impl Iterator<Item = &'a Vec<f32>>) -> Matrix {
    let mut n = 0;
    let mut data = Vec::new();
    for row in rows {
        data.extend_from_slice(row);
        n += 1;
    }
    assert!(n > 0, "at least one row");
    Matrix::new(n, data.len() / n, data)
}

/// A tensor's values as f32, read back synchronously.
pub fn read_back<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_to_vec::<f32>().expect("f32 data")
}

/// Zero or non-finite rows have no direction: an error naming the file and row.
pub fn reject_zero_rows(table: &EmbeddingTable) -> Result<(), TableError> {
    for i in 0..table.len() {
        let norm: f64 = table.embeddings.row(i).iter().map(|&x| (x as f64) * (x as f64)).sum();
        if !(norm.is_finite() && norm > 0.0) {
            return Err(TableError::invalid(
                table.meta.location().row(i),
                "embedding is zero or not finite: it has no direction for a cosine",
            ));
        }
    }
    Ok(())
}
