//! Checkpoint tensors → Burn parameters, by explicit key tables.
//!
//! A [`Checkpoint`] wraps one or more safetensors shards (a sharded checkpoint is several), each
//! either bytes the caller holds (the browser's fetched files) or a file read in place through
//! [`ReadAt`] (the CLI's folders); nothing here touches the file system itself. Only the headers
//! are read up front; each tensor's bytes are read when a module asks for it and converted a
//! chunk at a time, so loading from a file holds the weights once (the model's tensors) rather
//! than the file's bytes beside them (issue 36: CLIP B/32's peak fell from 2.05 to 1.04 times
//! its 605 MB of weights, BENCHMARKS.md). Tensors are converted to f32 on the host (F32, F16 and
//! BF16 checkpoints are accepted) and checked against the shape the module expects, so a wrong
//! config fails with the key, the expected and the found shape instead of a panic in a matmul;
//! on the device they are created in the checkpoint's float type ([`Checkpoint::with_dtype`]:
//! the device's own unless told otherwise), so an f16 model is converted here, one tensor at a
//! time, whether the device was configured in f16 (the CLI's `--precision f16`) or not (the
//! browser's f16 encoder beside its f32 tables).
//!
//! The `load_*` helpers read the PyTorch layout of the standard layers: `nn.Linear` stores
//! `weight` as `[d_out, d_in]` (Burn keeps `[d_in, d_out]`, so it is transposed), `nn.LayerNorm`
//! stores `weight`/`bias` (Burn's `gamma`/`beta`), `nn.Conv2d` and `nn.Embedding` match Burn.

use std::borrow::Cow;

use burn::module::Param;
use burn::nn::conv::Conv2d;
use burn::nn::{Embedding, GroupNorm, LayerNorm, Linear};
use burn::tensor::{DType, Device, FloatDType, Tensor, TensorData};
use safetensors::Dtype;
use safetensors::tensor::{Metadata, TensorInfo};

/// Why a checkpoint could not be loaded into a model.
#[derive(Debug, thiserror::Error)]
pub enum WeightError {
    #[error("not a safetensors file (shard {shard}): {message}")]
    Format { shard: usize, message: String },
    #[error("the checkpoint has no tensor `{key}` (is the config.json the one of this checkpoint?)")]
    Missing { key: String },
    #[error("tensor `{key}` has shape {found:?}, the model built from config.json expects {expected:?}")]
    Shape { key: String, expected: Vec<usize>, found: Vec<usize> },
    #[error("tensor `{key}` has dtype {dtype}; only F32, F16 and BF16 weights are supported")]
    Dtype { key: String, dtype: String },
    #[error("cannot read tensor `{key}`: {message}")]
    Read { key: String, message: String },
}

/// A safetensors file read in place, a range at a time: [`Shard::Reader`]. Any `Read + Seek`
/// behind a mutex is one (a `std::fs::File`; a `Cursor` in tests).
pub trait ReadAt: Send + Sync {
    /// Fills `buf` with the bytes at `offset`.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;
    /// The size of the whole file in bytes.
    fn size(&self) -> std::io::Result<u64>;
}

impl<T: std::io::Read + std::io::Seek + Send> ReadAt for std::sync::Mutex<T> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let mut inner = self.lock().unwrap_or_else(|e| e.into_inner());
        inner.seek(std::io::SeekFrom::Start(offset))?;
        inner.read_exact(buf)
    }

    fn size(&self) -> std::io::Result<u64> {
        self.lock().unwrap_or_else(|e| e.into_inner()).seek(std::io::SeekFrom::End(0))
    }
}

/// Where the bytes of one safetensors shard are: in memory (a buffer the caller read or was
/// given, as in the browser), or in a file read a tensor at a time, so that loading a model
/// from disk never holds the file's bytes beside the tensors made from them.
pub enum Shard<'a> {
    Bytes(Cow<'a, [u8]>),
    Reader(Box<dyn ReadAt + 'a>),
}

impl Shard<'_> {
    /// Fills `buf` with the shard's bytes at `offset`.
    fn read(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        match self {
            Shard::Reader(reader) => reader.read_exact_at(buf, offset),
            Shard::Bytes(bytes) => {
                let range =
                    usize::try_from(offset).ok().and_then(|start| bytes.get(start..start + buf.len()));
                let range = range.ok_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "past the end of the shard")
                })?;
                buf.copy_from_slice(range);
                Ok(())
            }
        }
    }

    fn size(&self) -> std::io::Result<u64> {
        match self {
            Shard::Reader(reader) => reader.size(),
            Shard::Bytes(bytes) => Ok(bytes.len() as u64),
        }
    }
}

/// One shard: its parsed header, where its data starts, and its bytes.
struct Part<'a> {
    metadata: Metadata,
    data_start: u64,
    shard: Shard<'a>,
}

/// Longest safetensors header accepted (the `safetensors` crate's own limit).
const MAX_HEADER_BYTES: u64 = 100_000_000;

impl<'a> Part<'a> {
    /// Reads and checks the header of `shard` (number `index`, for errors): the tensors it lists
    /// must end exactly at the end of the file.
    fn open(shard: Shard<'a>, index: usize) -> Result<Self, WeightError> {
        let format = |message: String| WeightError::Format { shard: index, message };
        let len = shard.size().map_err(|e| format(e.to_string()))?;
        let mut prefix = [0u8; 8];
        shard.read(&mut prefix, 0).map_err(|_| format(format!("{len} bytes, too short for a header")))?;
        let n = u64::from_le_bytes(prefix);
        if n > MAX_HEADER_BYTES || 8 + n > len {
            return Err(format(format!("header length {n} does not fit the file's {len} bytes")));
        }
        let mut header = vec![0u8; n as usize];
        shard.read(&mut header, 8).map_err(|e| format(e.to_string()))?;
        let metadata: Metadata =
            serde_json::from_slice(&header).map_err(|e| format(format!("invalid header: {e}")))?;
        let data_len = metadata.tensors().values().map(|info| info.data_offsets.1).max().unwrap_or(0);
        if 8 + n + data_len as u64 != len {
            return Err(format(format!(
                "the header describes {} bytes of tensors, the file has {}",
                data_len,
                len - 8 - n
            )));
        }
        Ok(Self { metadata, data_start: 8 + n, shard })
    }
}

/// The tensors of a safetensors checkpoint, possibly split over several shards; modules read
/// them through the scoped view of [`Checkpoint::vars`].
pub struct Checkpoint<'a> {
    parts: Vec<Part<'a>>,
    device: Device,
    dtype: FloatDType,
}

/// Bytes read from a [`Shard::Reader`] at a time while a tensor is converted.
const READ_CHUNK_BYTES: usize = 1 << 20;

impl<'a> Checkpoint<'a> {
    /// Parses the safetensors headers of `shards` (the data stays where it is until a tensor is
    /// requested); tensors are created on `device`, in its float type.
    pub fn from_shards(shards: &[&'a [u8]], device: &Device) -> Result<Self, WeightError> {
        Self::open(shards.iter().map(|b| Shard::Bytes(Cow::Borrowed(*b))).collect(), device)
    }

    /// [`Self::from_shards`] of shards in memory or read in place ([`Shard`]): each tensor's
    /// bytes are read when it is requested, converted, and dropped before the next.
    pub fn open(shards: Vec<Shard<'a>>, device: &Device) -> Result<Self, WeightError> {
        let parts = shards
            .into_iter()
            .enumerate()
            .map(|(i, shard)| Part::open(shard, i))
            .collect::<Result<_, _>>()?;
        Ok(Self { parts, device: device.clone(), dtype: device.settings().float_dtype })
    }

    /// The same checkpoint with its tensors created in `dtype` instead of the device's float
    /// type (the module then computes in `dtype`; its inputs must be created in it too).
    pub fn with_dtype(mut self, dtype: FloatDType) -> Self {
        self.dtype = dtype;
        self
    }

    /// The float type the tensors are created in.
    pub fn dtype(&self) -> FloatDType {
        self.dtype
    }

    /// A single-file checkpoint (`model.safetensors`).
    pub fn from_bytes(bytes: &'a [u8], device: &Device) -> Result<Self, WeightError> {
        Self::from_shards(&[bytes], device)
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The root of the checkpoint's keys, to be scoped with [`Vars::pp`].
    pub fn vars(&self) -> Vars<'_, 'a> {
        Vars { checkpoint: self, prefix: String::new() }
    }

    /// The shard holding `key` and the tensor's entry in its header.
    fn find(&self, key: &str) -> Option<(&Part<'a>, &TensorInfo)> {
        self.parts.iter().find_map(|p| p.metadata.info(key).map(|info| (p, info)))
    }

    /// The host data of `key`, converted to f32, after checking it has `expected` shape. The
    /// tensor's bytes are read and converted a chunk at a time, so only the f32 values are held.
    fn data(&self, key: &str, expected: &[usize]) -> Result<TensorData, WeightError> {
        let (part, info) = self.find(key).ok_or_else(|| WeightError::Missing { key: key.to_owned() })?;
        if info.shape != expected {
            return Err(WeightError::Shape {
                key: key.to_owned(),
                expected: expected.to_vec(),
                found: info.shape.clone(),
            });
        }
        let convert: fn(&[u8], &mut Vec<f32>) = match info.dtype {
            Dtype::F32 => {
                |b, v| v.extend(b.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            }
            Dtype::F16 => {
                |b, v| v.extend(b.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()))
            }
            Dtype::BF16 => {
                |b, v| v.extend(b.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()))
            }
            other => return Err(WeightError::Dtype { key: key.to_owned(), dtype: format!("{other:?}") }),
        };
        let (start, end) = info.data_offsets;
        let mut values = Vec::with_capacity(expected.iter().product());
        let read_error =
            |e: std::io::Error| WeightError::Read { key: key.to_owned(), message: e.to_string() };
        match &part.shard {
            Shard::Bytes(bytes) => {
                convert(&bytes[part.data_start as usize + start..part.data_start as usize + end], &mut values)
            }
            Shard::Reader(_) => {
                let mut chunk = vec![0u8; READ_CHUNK_BYTES.min(end - start)];
                let mut at = start;
                while at < end {
                    let len = READ_CHUNK_BYTES.min(end - at);
                    part.shard.read(&mut chunk[..len], part.data_start + at as u64).map_err(read_error)?;
                    convert(&chunk[..len], &mut values);
                    at += len;
                }
            }
        }
        Ok(TensorData::new(values, expected.to_vec()))
    }
}

/// A prefix-scoped view of a [`Checkpoint`] (candle's `VarBuilder::pp`): a module loads its
/// tensors by the names of its own state dict (`weight`, `fc1.bias`), and its parent scopes it
/// with its field name, so `vars.pp("text_model").pp("encoder")` reads `text_model.encoder.*`.
#[derive(Clone)]
pub struct Vars<'c, 'a> {
    checkpoint: &'c Checkpoint<'a>,
    prefix: String,
}

impl<'c, 'a> Vars<'c, 'a> {
    /// The view one level down: keys under `{prefix}.{name}` (`name` may be a layer index).
    pub fn pp(&self, name: impl std::fmt::Display) -> Self {
        Self { checkpoint: self.checkpoint, prefix: self.key(&name.to_string()) }
    }

    /// The full checkpoint key of `name` in this scope.
    pub fn key(&self, name: &str) -> String {
        if self.prefix.is_empty() { name.to_owned() } else { format!("{}.{name}", self.prefix) }
    }

    pub fn device(&self) -> &'c Device {
        &self.checkpoint.device
    }

    /// Whether the checkpoint holds `name` in this scope (checkpoints of one family differ in
    /// naming across library versions).
    pub fn contains(&self, name: &str) -> bool {
        let key = self.key(name);
        self.checkpoint.find(&key).is_some()
    }

    /// The host data of `name`, converted to f32, after checking it has `shape`.
    pub fn data(&self, name: &str, shape: &[usize]) -> Result<TensorData, WeightError> {
        self.checkpoint.data(&self.key(name), shape)
    }

    /// Tensor `name` of shape `shape` on the checkpoint's device.
    pub fn tensor<const D: usize>(&self, name: &str, shape: [usize; D]) -> Result<Tensor<D>, WeightError> {
        Ok(Tensor::from_data(self.data(name, &shape)?, self.options()))
    }

    /// Rows `rows` of the matrix `name` (of shape `shape`), transposed and stored contiguously:
    /// the `[d_in, d_out]` weight of a Linear from PyTorch's `[d_out, d_in]`.
    ///
    /// The transpose is materialised on the host rather than left as a strided view: the CPU
    /// backend's GEMM packs a strided weight one element at a time at every call, which took
    /// a quarter of `culturelens embed`'s CPU time (BENCHMARKS.md).
    pub fn transposed(
        &self,
        name: &str,
        shape: [usize; 2],
        rows: std::ops::Range<usize>,
    ) -> Result<Tensor<2>, WeightError> {
        let data = self.data(name, &shape)?.try_into_vec::<f32>().expect("f32 weights");
        let cols = shape[1];
        let values = transpose(&data[rows.start * cols..rows.end * cols], rows.len(), cols);
        Ok(Tensor::from_data(TensorData::new(values, [cols, rows.len()]), self.options()))
    }

    /// Where and in what float type the tensors are created.
    fn options(&self) -> (&'c Device, DType) {
        (&self.checkpoint.device, self.checkpoint.dtype.into())
    }

    /// The scalar `name` (shape `[]` or `[1]`, as transformers and OpenCLIP store `logit_scale`),
    /// or `None` when the checkpoint lacks it (a checkpoint of one tower only).
    pub fn optional_scalar(&self, name: &str) -> Result<Option<f32>, WeightError> {
        let key = self.key(name);
        let Some((_, info)) = self.checkpoint.find(&key) else {
            return Ok(None);
        };
        let shape = if info.shape.is_empty() { vec![] } else { vec![1] };
        let data = self.checkpoint.data(&key, &shape)?;
        Ok(Some(data.try_to_vec::<f32>().expect("f32 weights")[0]))
    }

    /// Parameter `name` of the shape `like` has (the module built from the config).
    pub fn param<const D: usize>(
        &self,
        name: &str,
        like: &Param<Tensor<D>>,
    ) -> Result<Param<Tensor<D>>, WeightError> {
        Ok(Param::from_tensor(self.tensor(name, like.lazy_shape().dims())?))
    }
}

/// Loads an `nn.Linear` (`weight` `[d_out, d_in]`, `bias`) from the scope `vars`.
pub fn load_linear(linear: &mut Linear, vars: Vars) -> Result<(), WeightError> {
    let [d_in, d_out] = linear.weight.lazy_shape().dims();
    linear.weight = Param::from_tensor(vars.transposed("weight", [d_out, d_in], 0..d_out)?);
    if linear.bias.is_some() {
        linear.bias = Some(vars.tensor("bias", [d_out]).map(Param::from_tensor)?);
    }
    Ok(())
}

/// Loads a Linear from part `part` of `parts` equal row blocks of a fused PyTorch projection
/// `{weight, bias}` in the scope `vars` (the `in_proj_weight`/`in_proj_bias` of
/// `nn.MultiheadAttention`, which stack q, k and v; DINOv2's SwiGLU `weights_in`).
pub fn load_linear_rows(
    linear: &mut Linear,
    vars: &Vars,
    [weight, bias]: [&str; 2],
    part: usize,
    parts: usize,
) -> Result<(), WeightError> {
    let [d_in, d_out] = linear.weight.lazy_shape().dims();
    let rows = d_out * parts;
    let range = part * d_out..(part + 1) * d_out;
    linear.weight = Param::from_tensor(vars.transposed(weight, [rows, d_in], range.clone())?);
    if linear.bias.is_some() {
        linear.bias = Some(Param::from_tensor(vars.tensor(bias, [rows])?.slice([range])));
    }
    Ok(())
}

/// The `cols × rows` transpose of the row-major `rows × cols` matrix `m`, in 32 × 32 tiles.
fn transpose(m: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    const TILE: usize = 32;
    let mut t = vec![0f32; m.len()];
    for r0 in (0..rows).step_by(TILE) {
        for c0 in (0..cols).step_by(TILE) {
            for r in r0..(r0 + TILE).min(rows) {
                for c in c0..(c0 + TILE).min(cols) {
                    t[c * rows + r] = m[r * cols + c];
                }
            }
        }
    }
    t
}

/// Loads an `nn.LayerNorm` (`weight` → gamma, `bias` → beta) from the scope `vars`.
pub fn load_layer_norm(norm: &mut LayerNorm, vars: Vars) -> Result<(), WeightError> {
    norm.gamma = vars.param("weight", &norm.gamma)?;
    if let Some(beta) = &norm.beta {
        norm.beta = Some(vars.param("bias", beta)?);
    }
    Ok(())
}

/// Loads an `nn.Conv2d` (`weight` `[c_out, c_in / groups, k_h, k_w]`, `bias`) from the scope
/// `vars`.
pub fn load_conv2d(conv: &mut Conv2d, vars: Vars) -> Result<(), WeightError> {
    conv.weight = vars.param("weight", &conv.weight)?;
    if let Some(bias) = &conv.bias {
        conv.bias = Some(vars.param("bias", bias)?);
    }
    Ok(())
}

/// Loads an `nn.Embedding` table (`weight`, `[n, d]`) from the scope `vars`.
pub fn load_embedding(embedding: &mut Embedding, vars: Vars) -> Result<(), WeightError> {
    embedding.weight = vars.param("weight", &embedding.weight)?;
    Ok(())
}

/// Loads an `nn.GroupNorm` (`weight` → gamma, `bias` → beta) from the scope `vars`.
pub fn load_group_norm(norm: &mut GroupNorm, vars: Vars) -> Result<(), WeightError> {
    if let Some(gamma) = &norm.gamma {
        norm.gamma = Some(vars.param("weight", gamma)?);
    }
    if let Some(beta) = &norm.beta {
        norm.beta = Some(vars.param("bias", beta)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A safetensors file of `tensors` (name, dtype, shape, little-endian bytes).
    fn safetensors(tensors: &[(&str, &str, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
        let mut header = serde_json::Map::new();
        let mut offset = 0;
        for (name, dtype, shape, bytes) in tensors {
            let offsets = [offset, offset + bytes.len()];
            header.insert(
                name.to_string(),
                serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": offsets}),
            );
            offset += bytes.len();
        }
        let header = serde_json::to_vec(&header).unwrap();
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend(header);
        tensors.iter().for_each(|t| file.extend(&t.3));
        file
    }

    /// A tensor read from a file in chunks (it spans several) equals the one read from the
    /// same bytes in memory, for F32 and F16; a truncated file is refused when opened.
    #[test]
    fn a_reader_shard_reads_what_the_bytes_hold() {
        let n = READ_CHUNK_BYTES / 4 * 2 + 3;
        let f32s: Vec<u8> = (0..n).flat_map(|i| (i as f32 * 0.25).to_le_bytes()).collect();
        let f16s: Vec<u8> = (0..n).flat_map(|i| half::f16::from_f32(i as f32 % 7.0).to_le_bytes()).collect();
        let file = safetensors(&[("a.weight", "F32", vec![n], f32s), ("b", "F16", vec![1, n], f16s)]);
        let device = Device::flex();
        let reader =
            |bytes: Vec<u8>| Shard::Reader(Box::new(std::sync::Mutex::new(std::io::Cursor::new(bytes))));
        let in_memory = Checkpoint::from_bytes(&file, &device).unwrap();
        let from_file = Checkpoint::open(vec![reader(file.clone())], &device).unwrap();
        for (key, shape) in [("a.weight", vec![n]), ("b", vec![1, n])] {
            let expected = in_memory.data(key, &shape).unwrap().try_to_vec::<f32>().unwrap();
            assert_eq!(from_file.data(key, &shape).unwrap().try_to_vec::<f32>().unwrap(), expected, "{key}");
            assert_eq!(
                expected[n - 1],
                if key == "b" { ((n - 1) % 7) as f32 } else { (n - 1) as f32 * 0.25 }
            );
        }
        assert!(from_file.vars().pp("a").contains("weight"));
        let err = from_file.data("a.weight", &[n, 1]).unwrap_err().to_string();
        assert!(err.contains("has shape [") && err.contains("expects ["), "{err}");
        let truncated = file[..file.len() - 1].to_vec();
        let Err(err) = Checkpoint::open(vec![reader(truncated)], &device) else {
            panic!("a truncated file opened")
        };
        assert!(err.to_string().contains("the file has"), "{err}");
    }

    /// Element (r, c) lands at (c, r), across partial tiles on both edges.
    #[test]
    fn transpose_moves_every_element_across_tile_edges() {
        for (rows, cols) in [(1, 1), (3, 70), (33, 32), (65, 31)] {
            let m: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
            let t = transpose(&m, rows, cols);
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(t[c * rows + r], m[r * cols + c], "{rows} x {cols} at ({r}, {c})");
                }
            }
        }
    }
}
