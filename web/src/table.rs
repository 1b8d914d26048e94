//! The embedding table on the compute device, stored in parts. WebGPU caps the size of one
//! buffer (the adapter's `maxStorageBufferBindingSize` and `maxBufferSize`; 128 MiB and 256 MiB
//! unless the adapter offers more), so a larger table (the SoS paper's 150,822 × 1280 f32 is
//! 772 MB) is uploaded as several tensors of whole rows, each within the smaller of the two
//! (`culturelens_view::parts`); on the CPU the table is one part, which reads the host rows in
//! place, and the table keeps them (`host_rows`) for the core's fused CPU passes of SoS. Readers
//! see row blocks: on WebGPU SoS runs on the parts through the core's `sos_packed`; the Vendi
//! cosine kernel and the PCA gather rows across parts.

use burn::tensor::{Bytes, Device, Tensor};
use culturelens_compute::device::{HostRows, upload_rows};
use culturelens_compute::tensor::id_tensor;
use culturelens_view::parts::{Local, rows_per_part, runs};

/// A `rows × dim` f32 table in parts of `per_part` rows (the last one shorter).
#[derive(Clone)]
pub struct DeviceTable {
    parts: Vec<Tensor<2>>,
    per_part: usize,
    rows: usize,
    dim: usize,
    device: Device,
    /// On the CPU: the rows the one part reads in place, for the fused SoS passes
    /// (`culturelens_compute::sos::sos_host`), which need no tensor.
    host: Option<HostRows>,
}

impl DeviceTable {
    /// Uploads row-major `embeddings` in parts of at most `max_part_bytes` each (the core's
    /// `upload_rows`: no second copy of the table on the host). With `keep_host` (the CPU) and
    /// the table in one part, the part reads the rows in place and the table keeps a second
    /// handle on them ([`DeviceTable::host_rows`]): still one copy.
    pub fn upload(
        embeddings: Vec<f32>,
        rows: usize,
        dim: usize,
        device: &Device,
        max_part_bytes: u64,
        keep_host: bool,
    ) -> DeviceTable {
        assert_eq!(embeddings.len(), rows * dim, "embeddings must be rows × dim");
        let per_part = rows_per_part(dim, max_part_bytes).min(rows.max(1));
        let (parts, host) = if keep_host && per_part >= rows && !embeddings.is_empty() {
            let lent = HostRows::lent(Bytes::from_elems(embeddings).shared()).expect("a Vec<f32> is whole, aligned f32s");
            (upload_rows(lent.clone(), dim, None, device), Some(lent))
        } else {
            (upload_rows(embeddings, dim, Some(per_part), device), None)
        };
        DeviceTable { parts, per_part, rows, dim, device: device.clone(), host }
    }

    /// The table's rows on the host (row-major), where [`DeviceTable::upload`] kept them.
    pub fn host_rows(&self) -> Option<&[f32]> {
        self.host.as_ref().map(HostRows::as_slice)
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The device tensors holding the table: consecutive row blocks, in order.
    pub fn parts(&self) -> &[Tensor<2>] {
        &self.parts
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The rows `rows` (every row for `None`) in the order asked, as consecutive row blocks, each
    /// inside one part and of at most `max_rows` rows (no cut for `None`).
    pub fn blocks(&self, rows: Option<&[u32]>, max_rows: Option<usize>) -> Vec<Tensor<2>> {
        runs(self.rows, self.per_part, rows, max_rows)
            .into_iter()
            .map(|run| {
                let part = self.parts[run.part].clone();
                match run.local {
                    Local::Range(r) => part.slice([r, 0..self.dim]),
                    Local::Rows(ids) => part.select(0, id_tensor(&ids, &self.device)),
                }
            })
            .collect()
    }

    /// The rows `rows`, in that order, as one tensor (for subsets that fit one buffer).
    pub fn gather(&self, rows: &[u32]) -> Tensor<2> {
        Tensor::cat(self.blocks(Some(rows), None), 0)
    }
}
