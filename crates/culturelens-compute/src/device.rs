//! The device rules that every computation and both front ends share: what kind of processor
//! runs a device ([`Processor`], said by the edge that creates the device, since nothing here
//! names a backend), how a table moves onto it in row blocks ([`Processor::upload_rows`],
//! [`upload_rows`]), and the buffer size every GPU grants ([`GPU_BUFFER_BYTES`]).

use burn::tensor::{Device, Tensor, TensorData};

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
/// `rows_per_block` rows (the last one shorter; one block for `None`). The blocks are cut from the
/// end of the vector, so the host never holds a second copy of the table.
pub fn upload_rows(
    mut embeddings: Vec<f32>,
    dim: usize,
    rows_per_block: Option<usize>,
    device: &Device,
) -> Vec<Tensor<2>> {
    let rows = embeddings.len() / dim.max(1);
    assert_eq!(embeddings.len(), rows * dim, "embeddings must be rows × dim");
    let step = rows_per_block.unwrap_or(rows).clamp(1, rows.max(1));
    let starts: Vec<usize> = (0..rows.max(1)).step_by(step).collect();
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
}
