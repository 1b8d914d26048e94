//! The device rules that every computation and both front ends share: what kind of processor
//! runs a device ([`Processor`], said by the edge that creates the device, since nothing here
//! names a backend), how a table's host rows are held ([`HostRows`]: owned or lent) and move onto
//! it in row blocks ([`Processor::upload_rows`], [`upload_rows`]), and the buffer size every GPU
//! grants ([`GPU_BUFFER_BYTES`]).

use burn::tensor::{Bytes, DType, Device, Tensor, TensorData};

/// Row-major f32 values on the host, as a table's rows reach the device rules: a `Vec` its owner
/// gives up (the CLI's tables), or memory another owner lends for as long as this value lives (the
/// Python package's numpy arrays, read in place without a copy). Lent memory is only ever read:
/// it is held as Burn's shared, copy-on-write [`Bytes`], so a device op that wanted to write into
/// its input would copy it first.
#[derive(Clone, Debug)]
pub struct HostRows {
    bytes: Bytes,
    lent: bool,
}

impl From<Vec<f32>> for HostRows {
    fn from(values: Vec<f32>) -> HostRows {
        HostRows { bytes: Bytes::from_elems(values), lent: false }
    }
}

impl PartialEq for HostRows {
    fn eq(&self, other: &HostRows) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl HostRows {
    /// Lent values: `bytes` read as f32s in place; `None` unless they are whole f32s at an
    /// f32-aligned address.
    pub fn lent(bytes: Bytes) -> Option<HostRows> {
        as_f32(&bytes)?;
        Some(HostRows { bytes, lent: true })
    }

    /// Whether the values are lent; a clone of lent values shares them (an owned `Vec` is copied).
    pub fn is_lent(&self) -> bool {
        self.lent
    }

    /// A second handle on lent values (no copy); `None` for owned ones, whose clone would copy.
    pub fn clone_if_lent(&self) -> Option<HostRows> {
        self.lent.then(|| self.clone())
    }

    pub fn as_slice(&self) -> &[f32] {
        made_f32(&self.bytes)
    }

    pub fn len(&self) -> usize {
        self.bytes.len() / size_of::<f32>()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.len() == 0
    }

    /// The values as a `Vec`: the owner's own without a copy, lent memory copied.
    pub fn into_vec(self) -> Vec<f32> {
        match self.bytes.try_into_vec::<f32>() {
            Ok(values) => values,
            Err(lent) => made_f32(&lent).to_vec(),
        }
    }
}

/// The bytes of a [`HostRows`] as f32s ([`HostRows::lent`] and `From<Vec<f32>>` only make
/// whole, aligned ones).
fn made_f32(bytes: &[u8]) -> &[f32] {
    as_f32(bytes).expect("whole, aligned f32s (checked when made)")
}

/// `bytes` as f32s in place, when they are whole f32s at an f32-aligned address.
fn as_f32(bytes: &[u8]) -> Option<&[f32]> {
    // SAFETY: every bit pattern is a valid f32; `align_to` leaves what is not aligned outside.
    let (head, values, tail) = unsafe { bytes.align_to::<f32>() };
    (head.is_empty() && tail.is_empty()).then_some(values)
}

/// Most bytes of one block of the table on a GPU: WebGPU's default `maxStorageBufferBindingSize`
/// (128 MiB), which every wgpu adapter and browser grants; a larger table goes to the device in
/// blocks of at most this size ([`Processor::upload_rows`]; SoS reads such blocks in place).
pub const GPU_BUFFER_BYTES: usize = 128 << 20;

/// Rows per block that keep a block of `dim`-dimensional f32 rows near `bytes`.
pub fn rows_for_bytes(dim: usize, bytes: usize) -> usize {
    (bytes / (4 * dim.max(1))).max(1)
}

/// What kind of processor runs a Burn device, as far as the device rules care. The edge that
/// creates the device says which (the shared crates never name a backend).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Processor {
    /// A CPU backend (`flex`, native or wasm32).
    Cpu,
    /// A GPU backend (wgpu, WebGPU, CUDA).
    Gpu,
}

impl Processor {
    /// Rows of `dim`-dimensional f32 per block when a table moves onto this processor: the whole
    /// table (`None`, no copy) on a CPU, at most [`GPU_BUFFER_BYTES`] a block on a GPU.
    pub fn upload_rows(self, dim: usize) -> Option<usize> {
        match self {
            Processor::Cpu => None,
            Processor::Gpu => Some(rows_for_bytes(dim, GPU_BUFFER_BYTES)),
        }
    }
}

/// Moves row-major `embeddings` (`rows × dim`) onto `device` as consecutive blocks of
/// `rows_per_block` rows (the last one shorter; one block for `None`). One block takes the rows
/// as they lie (a CPU device then reads them in place, lent rows included). Several are cut from
/// the end of an owned vector, so the host never holds a second copy of the table; lent rows are
/// copied one block at a time.
pub fn upload_rows(
    embeddings: impl Into<HostRows>,
    dim: usize,
    rows_per_block: Option<usize>,
    device: &Device,
) -> Vec<Tensor<2>> {
    let embeddings = embeddings.into();
    let rows = embeddings.len() / dim.max(1);
    assert_eq!(embeddings.len(), rows * dim, "embeddings must be rows × dim");
    let step = rows_per_block.unwrap_or(rows).clamp(1, rows.max(1));
    if step >= rows {
        let data = TensorData::from_bytes(embeddings.bytes, [rows, dim], DType::F32);
        return vec![Tensor::<2>::from_data(data, device)];
    }
    let starts: Vec<usize> = (0..rows).step_by(step).collect();
    let mut embeddings = match embeddings.bytes.try_into_vec::<f32>() {
        Ok(values) => values,
        Err(lent) => {
            let values = made_f32(&lent);
            return starts
                .iter()
                .map(|&start| {
                    let end = (start + step).min(rows);
                    let block = values[start * dim..end * dim].to_vec();
                    Tensor::<2>::from_data(TensorData::new(block, [end - start, dim]), device)
                })
                .collect();
        }
    };
    let mut blocks: Vec<Tensor<2>> = starts
        .iter()
        .rev()
        .map(|&start| {
            let values =
                if start == 0 { std::mem::take(&mut embeddings) } else { embeddings.split_off(start * dim) };
            let n = values.len() / dim.max(1);
            Tensor::<2>::from_data(TensorData::new(values, [n, dim]), device)
        })
        .collect();
    blocks.reverse();
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_hold_the_rows_in_order_with_a_shorter_last_block() {
        let device = Device::flex();
        let values: Vec<f32> = (0..14).map(|v| v as f32).collect();
        let blocks = upload_rows(values.clone(), 2, Some(3), &device);
        let dims: Vec<[usize; 2]> = blocks.iter().map(Tensor::dims).collect();
        assert_eq!(dims, vec![[3, 2], [3, 2], [1, 2]]);
        let back: Vec<f32> =
            blocks.into_iter().flat_map(|b| b.into_data().try_to_vec::<f32>().unwrap()).collect();
        assert_eq!(back, values);
        assert_eq!(upload_rows(values, 2, None, &device).len(), 1);
        assert_eq!(Processor::Cpu.upload_rows(1280), None);
        assert_eq!(Processor::Gpu.upload_rows(1280), Some((128 << 20) / (4 * 1280)));
    }

    /// Lent rows (here Burn's shared bytes, as the Python package lends a numpy array's) give
    /// the blocks owned rows give, and a device op that writes into its input copies them first:
    /// the lender's memory keeps its values.
    #[test]
    fn lent_rows_are_uploaded_like_owned_ones_and_never_written() {
        let device = Device::flex();
        let values: Vec<f32> = (0..14).map(|v| v as f32).collect();
        let lent = HostRows::lent(Bytes::from_elems(values.clone()).shared()).unwrap();
        assert!(lent.is_lent() && !HostRows::from(values.clone()).is_lent());
        assert_eq!(lent.as_slice(), values.as_slice());
        for rows_per_block in [None, Some(3)] {
            let blocks = upload_rows(lent.clone(), 2, rows_per_block, &device);
            let owned = upload_rows(values.clone(), 2, rows_per_block, &device);
            assert_eq!(blocks.len(), owned.len());
            for (a, b) in blocks.into_iter().zip(owned) {
                assert_eq!(a.dims(), b.dims());
                assert_eq!(
                    a.into_data().try_to_vec::<f32>().unwrap(),
                    b.into_data().try_to_vec::<f32>().unwrap()
                );
            }
        }
        let [block]: [Tensor<2>; 1] = upload_rows(lent.clone(), 2, None, &device).try_into().unwrap();
        let doubled = block.mul_scalar(2.0).into_data().try_to_vec::<f32>().unwrap();
        assert_eq!(doubled, values.iter().map(|v| v * 2.0).collect::<Vec<_>>());
        assert_eq!(lent.as_slice(), values.as_slice(), "the lent memory was written");
        assert_eq!(lent.clone().into_vec(), values);
        assert_eq!(HostRows::lent(Bytes::from_bytes_vec(vec![0; 6])), None, "6 bytes are not whole f32s");
    }
}
