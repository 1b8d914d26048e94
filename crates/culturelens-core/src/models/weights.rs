//! Checkpoint tensors → Burn parameters, by explicit key tables.
//!
//! A [`Checkpoint`] wraps one or more safetensors buffers (a sharded checkpoint is several) that
//! the caller has read or memory-mapped; nothing here touches the file system, so the same code
//! loads weights fetched by the browser. Tensors are converted to f32 on the host (F32, F16 and
//! BF16 checkpoints are accepted) and checked against the shape the module expects, so a wrong
//! config fails with the key, the expected and the found shape instead of a panic in a matmul.
//!
//! The `load_*` helpers read the PyTorch layout of the standard layers: `nn.Linear` stores
//! `weight` as `[d_out, d_in]` (Burn keeps `[d_in, d_out]`, so it is transposed), `nn.LayerNorm`
//! stores `weight`/`bias` (Burn's `gamma`/`beta`), `nn.Conv2d` and `nn.Embedding` match Burn.

use burn::module::Param;
use burn::nn::conv::Conv2d;
use burn::nn::{Embedding, LayerNorm, Linear};
use burn::tensor::{Device, Tensor, TensorData};
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

/// The tensors of a safetensors checkpoint, possibly split over several shards.
pub struct Checkpoint<'a> {
    shards: Vec<SafeTensors<'a>>,
    device: Device,
}

impl<'a> Checkpoint<'a> {
    /// Parses the safetensors headers of `shards` (the data stays where it is until a tensor is
    /// requested); tensors are created on `device`.
    pub fn from_shards(shards: &[&'a [u8]], device: &Device) -> Result<Self, WeightError> {
        let shards = shards
            .iter()
            .enumerate()
            .map(|(shard, bytes)| {
                SafeTensors::deserialize(bytes)
                    .map_err(|e| WeightError::Format { shard, message: e.to_string() })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { shards, device: device.clone() })
    }

    /// A single-file checkpoint (`model.safetensors`).
    pub fn from_bytes(bytes: &'a [u8], device: &Device) -> Result<Self, WeightError> {
        Self::from_shards(&[bytes], device)
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Whether the checkpoint holds `key`.
    pub fn contains(&self, key: &str) -> bool {
        self.shards.iter().any(|s| s.tensor(key).is_ok())
    }

    /// All tensor names, sorted.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> =
            self.shards.iter().flat_map(|s| s.names().into_iter().map(str::to_owned)).collect();
        keys.sort();
        keys
    }

    /// The host data of `key`, converted to f32, after checking it has `expected` elements in
    /// `expected` shape.
    pub fn data(&self, key: &str, expected: &[usize]) -> Result<TensorData, WeightError> {
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

    /// Tensor `key` of shape `shape` on the checkpoint's device.
    pub fn tensor<const D: usize>(&self, key: &str, shape: [usize; D]) -> Result<Tensor<D>, WeightError> {
        Ok(Tensor::from_data(self.data(key, &shape)?, &self.device))
    }

    /// Parameter `key` of shape `shape`.
    pub fn param<const D: usize>(
        &self,
        key: &str,
        shape: [usize; D],
    ) -> Result<Param<Tensor<D>>, WeightError> {
        Ok(Param::from_tensor(self.tensor(key, shape)?))
    }

    /// The first of `keys` the checkpoint holds (checkpoints of one family differ in naming
    /// across library versions); `Missing` names the first candidate.
    pub fn first_of<'k>(&self, keys: &[&'k str]) -> Result<&'k str, WeightError> {
        keys.iter()
            .copied()
            .find(|k| self.contains(k))
            .ok_or_else(|| WeightError::Missing { key: keys[0].to_owned() })
    }
}

/// Loads an `nn.Linear` stored under `prefix` (`prefix.weight` `[d_out, d_in]`, `prefix.bias`).
pub fn load_linear(linear: &mut Linear, ck: &Checkpoint, prefix: &str) -> Result<(), WeightError> {
    let [d_in, d_out] = linear.weight.lazy_shape().dims();
    load_linear_weight(linear, ck, &format!("{prefix}.weight"), [d_out, d_in])?;
    if linear.bias.is_some() {
        linear.bias = Some(ck.param(&format!("{prefix}.bias"), [d_out])?);
    }
    Ok(())
}

/// Sets the weight of `linear` from a PyTorch-layout `[d_out, d_in]` tensor.
fn load_linear_weight(
    linear: &mut Linear,
    ck: &Checkpoint,
    key: &str,
    shape: [usize; 2],
) -> Result<(), WeightError> {
    linear.weight = Param::from_tensor(ck.tensor(key, shape)?.transpose());
    Ok(())
}

/// Loads a Linear from rows `[start, start + d_out)` of a fused PyTorch projection (the
/// `in_proj_weight`/`in_proj_bias` of `nn.MultiheadAttention`, which stack q, k and v).
pub fn load_linear_rows(
    linear: &mut Linear,
    ck: &Checkpoint,
    weight_key: &str,
    bias_key: &str,
    part: usize,
    parts: usize,
) -> Result<(), WeightError> {
    let [d_in, d_out] = linear.weight.lazy_shape().dims();
    let rows = d_out * parts;
    let range = part * d_out..(part + 1) * d_out;
    let weight = ck.tensor(weight_key, [rows, d_in])?.slice([range.clone(), 0..d_in]);
    linear.weight = Param::from_tensor(weight.transpose());
    if linear.bias.is_some() {
        linear.bias = Some(Param::from_tensor(ck.tensor(bias_key, [rows])?.slice([range])));
    }
    Ok(())
}

/// Loads an `nn.LayerNorm` stored under `prefix` (`weight` → gamma, `bias` → beta).
pub fn load_layer_norm(norm: &mut LayerNorm, ck: &Checkpoint, prefix: &str) -> Result<(), WeightError> {
    let [d] = norm.gamma.lazy_shape().dims();
    norm.gamma = ck.param(&format!("{prefix}.weight"), [d])?;
    if norm.beta.is_some() {
        norm.beta = Some(ck.param(&format!("{prefix}.bias"), [d])?);
    }
    Ok(())
}

/// Loads an `nn.Conv2d` stored under `prefix` (`weight` `[c_out, c_in / groups, k_h, k_w]`).
pub fn load_conv2d(conv: &mut Conv2d, ck: &Checkpoint, prefix: &str) -> Result<(), WeightError> {
    let shape: [usize; 4] = conv.weight.lazy_shape().dims();
    conv.weight = ck.param(&format!("{prefix}.weight"), shape)?;
    if conv.bias.is_some() {
        conv.bias = Some(ck.param(&format!("{prefix}.bias"), [shape[0]])?);
    }
    Ok(())
}

/// Loads an `nn.Embedding` table stored at `key` (`[n, d]`).
pub fn load_embedding(embedding: &mut Embedding, ck: &Checkpoint, key: &str) -> Result<(), WeightError> {
    let shape: [usize; 2] = embedding.weight.lazy_shape().dims();
    embedding.weight = ck.param(key, shape)?;
    Ok(())
}
