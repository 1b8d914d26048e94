//! Checkpoint tensors → Burn parameters, by explicit key tables.
//!
//! A [`Checkpoint`] wraps one or more safetensors buffers (a sharded checkpoint is several) that
//! the caller has read or memory-mapped; nothing here touches the file system, so the same code
//! loads weights fetched by the browser. Tensors are converted to f32 on the host (F32, F16 and
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

use burn::module::Param;
use burn::nn::conv::Conv2d;
use burn::nn::{Embedding, GroupNorm, LayerNorm, Linear};
use burn::tensor::{DType, Device, FloatDType, Tensor, TensorData};
use safetensors::{Dtype, SafeTensors};

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
}

/// The tensors of a safetensors checkpoint, possibly split over several shards; modules read
/// them through the scoped view of [`Checkpoint::vars`].
pub struct Checkpoint<'a> {
    shards: Vec<SafeTensors<'a>>,
    device: Device,
    dtype: FloatDType,
}

impl<'a> Checkpoint<'a> {
    /// Parses the safetensors headers of `shards` (the data stays where it is until a tensor is
    /// requested); tensors are created on `device`, in its float type.
    pub fn from_shards(shards: &[&'a [u8]], device: &Device) -> Result<Self, WeightError> {
        let shards = shards
            .iter()
            .enumerate()
            .map(|(shard, bytes)| {
                SafeTensors::deserialize(bytes)
                    .map_err(|e| WeightError::Format { shard, message: e.to_string() })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { shards, device: device.clone(), dtype: device.settings().float_dtype })
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

    /// The host data of `key`, converted to f32, after checking it has `expected` shape.
    fn data(&self, key: &str, expected: &[usize]) -> Result<TensorData, WeightError> {
        let view = self
            .shards
            .iter()
            .find_map(|s| s.tensor(key).ok())
            .ok_or_else(|| WeightError::Missing { key: key.to_owned() })?;
        if view.shape() != expected {
            return Err(WeightError::Shape {
                key: key.to_owned(),
                expected: expected.to_vec(),
                found: view.shape().to_vec(),
            });
        }
        let bytes = view.data();
        let values: Vec<f32> = match view.dtype() {
            Dtype::F32 => {
                bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
            }
            Dtype::F16 => {
                bytes.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect()
            }
            Dtype::BF16 => {
                bytes.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect()
            }
            other => return Err(WeightError::Dtype { key: key.to_owned(), dtype: format!("{other:?}") }),
        };
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
        self.checkpoint.shards.iter().any(|s| s.tensor(&key).is_ok())
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
        let Some(view) = self.checkpoint.shards.iter().find_map(|s| s.tensor(&key).ok()) else {
            return Ok(None);
        };
        let shape = if view.shape().is_empty() { vec![] } else { vec![1] };
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
