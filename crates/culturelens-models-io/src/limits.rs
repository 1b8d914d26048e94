//! What a checkpoint will need, read from its safetensors headers alone, so that a browser can
//! refuse a model its GPU or its memory cannot hold before downloading the weights.
//!
//! A safetensors file starts with an 8-byte little-endian header length `n` and `n` bytes of
//! JSON: every tensor's dtype, shape and byte range (`data_offsets`), plus an optional
//! `__metadata__`. [`header_len`] reads the first 8 bytes and [`Summary::of_header`] the JSON, so
//! a ranged read of `8 + n` bytes tells the whole size of the model. The model is built in f32
//! (or f16 on a device that computes in it): each tensor becomes one device buffer of
//! `elements × 4` (or `× 2`) bytes, which must fit the device's largest buffer
//! ([`Needs::check`]: WebGPU's `maxBufferSize` and `maxStorageBufferBindingSize`); the host holds
//! the downloaded files and one converted tensor at a time.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::LoadError;

/// Longest safetensors header read (the format's own limit is 100 MB).
pub const MAX_HEADER_BYTES: u64 = 100 * 1024 * 1024;

/// The header length of a safetensors file from its first 8 bytes.
pub fn header_len(first: &[u8], path: &Path) -> Result<u64, LoadError> {
    let bad = |message: String| LoadError::Invalid { path: path.to_owned(), message };
    let bytes: [u8; 8] = first
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| bad(format!("{} bytes: too short for a safetensors file", first.len())))?;
    let n = u64::from_le_bytes(bytes);
    if !(2..=MAX_HEADER_BYTES).contains(&n) {
        return Err(bad(format!(
            "a header of {n} bytes: not a safetensors file (its first 8 bytes are the header length, at most {MAX_HEADER_BYTES})"
        )));
    }
    Ok(n)
}

#[derive(Deserialize)]
struct Entry {
    dtype: String,
    shape: Vec<u64>,
    data_offsets: [u64; 2],
}

/// The tensors of one or more safetensors headers, as sizes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    pub tensors: usize,
    /// Elements over all tensors.
    pub elements: u64,
    /// Bytes of tensor data in the files.
    pub data_bytes: u64,
    /// The tensor with the most elements, and that number.
    pub largest: (String, u64),
}

impl Summary {
    /// The summary of the header JSON `json` (the `n` bytes after the length; `path` names the
    /// file in errors). Dtypes other than F32, F16 and BF16 are refused, as the loader refuses
    /// them, and so is a byte range that does not match its shape.
    pub fn of_header(json: &[u8], path: &Path) -> Result<Summary, LoadError> {
        let bad = |message: String| LoadError::Invalid { path: path.to_owned(), message };
        let map: BTreeMap<String, serde_json::Value> =
            serde_json::from_slice(json).map_err(|e| bad(format!("not a safetensors header: {e}")))?;
        let mut summary = Summary::default();
        for (key, value) in map {
            if key == "__metadata__" {
                continue;
            }
            let entry: Entry = serde_json::from_value(value)
                .map_err(|e| bad(format!("tensor `{key}`: not a safetensors entry: {e}")))?;
            let width = match entry.dtype.as_str() {
                "F32" => 4,
                "F16" | "BF16" => 2,
                other => {
                    return Err(bad(format!(
                        "tensor `{key}` has dtype {other}; only F32, F16 and BF16 weights are supported"
                    )));
                }
            };
            let elements = entry
                .shape
                .iter()
                .try_fold(1u64, |n, &d| n.checked_mul(d))
                .ok_or_else(|| bad(format!("tensor `{key}`: shape {:?} overflows", entry.shape)))?;
            let [start, end] = entry.data_offsets;
            if end.checked_sub(start) != elements.checked_mul(width) {
                return Err(bad(format!(
                    "tensor `{key}`: byte range {start}..{end} does not hold {} × {width} bytes",
                    elements
                )));
            }
            summary.tensors += 1;
            summary.elements += elements;
            summary.data_bytes += end - start;
            if elements > summary.largest.1 {
                summary.largest = (key, elements);
            }
        }
        Ok(summary)
    }

    /// The summary of several shards together.
    pub fn join(mut self, other: Summary) -> Summary {
        self.tensors += other.tensors;
        self.elements += other.elements;
        self.data_bytes += other.data_bytes;
        if other.largest.1 > self.largest.1 {
            self.largest = other.largest;
        }
        self
    }
}

/// What loading a checkpoint of [`Summary`] needs, in bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Needs {
    /// The largest device buffer: the largest tensor in the device's float type.
    pub largest_buffer: u64,
    /// All the weights on the device.
    pub device: u64,
    /// The host's peak: the downloaded files, plus the largest tensor converted to f32.
    pub host: u64,
}

impl Needs {
    /// Needs of `summary` on a device computing in floats of `float_bytes` (4 or 2).
    pub fn of(summary: &Summary, float_bytes: u64) -> Needs {
        Needs {
            largest_buffer: summary.largest.1 * float_bytes,
            device: summary.elements * float_bytes,
            host: summary.data_bytes + summary.largest.1 * 4,
        }
    }

    /// An error naming what does not fit: the largest tensor against the device's largest
    /// buffer (`max_buffer`), the host's peak against `max_host` (the page's memory).
    pub fn check(&self, summary: &Summary, max_buffer: u64, max_host: u64) -> Result<(), String> {
        let mib = |b: u64| format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0));
        if self.largest_buffer > max_buffer {
            return Err(format!(
                "the model is too big for this GPU: its largest tensor `{}` needs a buffer of {}, and this adapter's largest is {} (maxBufferSize / maxStorageBufferBindingSize)",
                summary.largest.0,
                mib(self.largest_buffer),
                mib(max_buffer)
            ));
        }
        if self.host > max_host {
            return Err(format!(
                "the model is too big for this page: loading it needs about {} of memory ({} of weights), more than the {} a page may use",
                mib(self.host),
                mib(summary.data_bytes),
                mib(max_host)
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(json: &str) -> Vec<u8> {
        let mut b = (json.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(json.as_bytes());
        b
    }

    #[test]
    fn sizes_of_a_hand_written_header() {
        let json = r#"{"__metadata__": {"format": "pt"},
            "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
            "b": {"dtype": "F16", "shape": [10], "data_offsets": [24, 44]}}"#;
        let bytes = header(json);
        let p = Path::new("m.safetensors");
        let n = header_len(&bytes, p).unwrap();
        assert_eq!(n as usize, json.len());
        let s = Summary::of_header(&bytes[8..], p).unwrap();
        assert_eq!(s, Summary { tensors: 2, elements: 16, data_bytes: 44, largest: ("b".into(), 10) });
        // f32 on the device: 16 × 4 bytes, the largest buffer 10 × 4; the host holds 44 + 40.
        let needs = Needs::of(&s, 4);
        assert_eq!(needs, Needs { largest_buffer: 40, device: 64, host: 84 });
        assert!(needs.check(&s, 40, 84).is_ok());
        let err = needs.check(&s, 39, 84).unwrap_err();
        assert!(err.contains("largest tensor `b` needs a buffer of 0.0 MiB"), "{err}");
        assert!(needs.check(&s, 40, 83).unwrap_err().contains("too big for this page"));
        assert_eq!(Needs::of(&s, 2).largest_buffer, 20);
    }

    #[test]
    fn wrong_files_are_named() {
        let p = Path::new("model.safetensors");
        assert!(header_len(b"{\"a\"", p).unwrap_err().to_string().contains("too short"));
        let err = header_len(b"<!DOCTYPE html>", p).unwrap_err().to_string();
        assert!(
            err.starts_with("model.safetensors: a header of") && err.contains("not a safetensors file"),
            "{err}"
        );
        let bad = |json: &str| Summary::of_header(json.as_bytes(), p).unwrap_err().to_string();
        assert!(
            bad(r#"{"a": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}"#).contains("dtype I64")
        );
        assert!(
            bad(r#"{"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}"#)
                .contains("byte range 0..8")
        );
        assert!(bad("[1, 2]").contains("not a safetensors header"));
    }
}
