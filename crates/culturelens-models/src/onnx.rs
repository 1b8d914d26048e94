//! The initializers (weights) and operator sequence of an ONNX model, read from the bytes of a
//! `.onnx` file without onnxruntime: a small reader of the protobuf wire format for the few
//! fields needed, pure Rust so it builds for wasm32 as well.
//!
//! | message | field (number) | used for |
//! |---|---|---|
//! | `ModelProto` | `graph` (7) | the graph |
//! | `GraphProto` | `node` (1), `initializer` (5) | operators in order, weights |
//! | `NodeProto` | `op_type` (4) | checking the architecture |
//! | `TensorProto` | `dims` (1), `data_type` (2), `float_data` (4), `name` (8), `raw_data` (9), `data_location` (14) | one weight |
//!
//! Only float32 initializers stored in the file are accepted (`data_type` 1, `raw_data` little
//! endian or `float_data`); external data is refused.

use std::collections::BTreeMap;

/// Why an ONNX file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    #[error("not a valid ONNX protobuf: {0}")]
    Format(String),
    #[error("initializer `{name}`: {message}")]
    Tensor { name: String, message: String },
}

/// One float32 initializer.
#[derive(Debug, Clone, PartialEq)]
pub struct Initializer {
    pub dims: Vec<usize>,
    pub values: Vec<f32>,
}

/// What culturelens reads of an ONNX model.
#[derive(Debug, Default)]
pub struct OnnxGraph {
    /// The `op_type` of every node, in graph order.
    pub ops: Vec<String>,
    pub initializers: BTreeMap<String, Initializer>,
}

/// A protobuf field: its number and payload.
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed32([u8; 4]),
    Fixed64,
}

/// The fields of one protobuf message, in order.
fn fields(mut buf: &[u8]) -> Result<Vec<(u64, Value<'_>)>, OnnxError> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        let value = match key & 7 {
            0 => Value::Varint(varint(&mut buf)?),
            1 => {
                take(&mut buf, 8)?;
                Value::Fixed64
            }
            2 => {
                let len = usize::try_from(varint(&mut buf)?).map_err(|_| fmt("length too large"))?;
                Value::Bytes(take(&mut buf, len)?)
            }
            5 => Value::Fixed32(take(&mut buf, 4)?.try_into().expect("4 bytes")),
            w => return Err(fmt(&format!("unsupported wire type {w}"))),
        };
        out.push((key >> 3, value));
    }
    Ok(out)
}

fn fmt(message: &str) -> OnnxError {
    OnnxError::Format(message.to_string())
}

fn take<'a>(buf: &mut &'a [u8], n: usize) -> Result<&'a [u8], OnnxError> {
    if buf.len() < n {
        return Err(fmt("truncated message"));
    }
    let (head, tail) = buf.split_at(n);
    *buf = tail;
    Ok(head)
}

fn varint(buf: &mut &[u8]) -> Result<u64, OnnxError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *take(buf, 1)?.first().expect("one byte");
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(fmt("varint longer than 10 bytes"))
}

impl OnnxGraph {
    /// Reads the node operators and the initializers of an ONNX `ModelProto`.
    pub fn parse(bytes: &[u8]) -> Result<Self, OnnxError> {
        let graph = fields(bytes)?
            .into_iter()
            .find_map(|(n, v)| match (n, v) {
                (7, Value::Bytes(b)) => Some(b),
                _ => None,
            })
            .ok_or_else(|| fmt("no graph"))?;
        let mut out = Self::default();
        for (n, value) in fields(graph)? {
            match (n, value) {
                (1, Value::Bytes(node)) => {
                    for (m, v) in fields(node)? {
                        if let (4, Value::Bytes(op)) = (m, v) {
                            out.ops.push(String::from_utf8_lossy(op).into_owned());
                        }
                    }
                }
                (5, Value::Bytes(tensor)) => {
                    let (name, init) = tensor_proto(tensor)?;
                    out.initializers.insert(name, init);
                }
                _ => {}
            }
        }
        Ok(out)
    }
}

/// A `TensorProto`'s name and float32 values.
fn tensor_proto(bytes: &[u8]) -> Result<(String, Initializer), OnnxError> {
    let (mut name, mut dims, mut data_type, mut raw, mut floats, mut external) =
        (String::new(), Vec::new(), 0, None, Vec::new(), false);
    for (n, value) in fields(bytes)? {
        match (n, value) {
            (1, Value::Varint(d)) => dims.push(d as usize),
            (1, Value::Bytes(mut packed)) => {
                while !packed.is_empty() {
                    dims.push(varint(&mut packed)? as usize);
                }
            }
            (2, Value::Varint(t)) => data_type = t,
            (4, Value::Fixed32(b)) => floats.push(f32::from_le_bytes(b)),
            (4, Value::Bytes(packed)) => {
                floats.extend(packed.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4"))))
            }
            (8, Value::Bytes(s)) => name = String::from_utf8_lossy(s).into_owned(),
            (9, Value::Bytes(b)) => raw = Some(b),
            (14, Value::Varint(1)) => external = true,
            _ => {}
        }
    }
    let fail = |message: String| OnnxError::Tensor { name: name.clone(), message };
    if external {
        return Err(fail("stored as external data, which is not supported".into()));
    }
    if data_type != 1 {
        return Err(fail(format!("data_type {data_type}; only float32 (1) is supported")));
    }
    let values = match raw {
        Some(raw) if raw.len() % 4 == 0 => {
            raw.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4"))).collect()
        }
        Some(raw) => return Err(fail(format!("raw_data of {} bytes is not float32", raw.len()))),
        None => floats,
    };
    let count: usize = dims.iter().product();
    if values.len() != count {
        return Err(fail(format!("{} values for dims {dims:?}", values.len())));
    }
    Ok((name, Initializer { dims, values }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(field: u64, wire: u64) -> Vec<u8> {
        encode_varint(field << 3 | wire)
    }

    fn encode_varint(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    fn bytes_field(field: u64, payload: &[u8]) -> Vec<u8> {
        [key(field, 2), encode_varint(payload.len() as u64), payload.to_vec()].concat()
    }

    #[test]
    fn reads_raw_packed_and_unpacked_initializers_and_ops() {
        // w: dims [2, 3] (unpacked varints), raw_data; b: dims [2] (packed), float_data packed;
        // s: a scalar ([]) in unpacked fixed32 float_data.
        let raw: Vec<u8> = (1..=6).flat_map(|i| (i as f32 * 0.5).to_le_bytes()).collect();
        let w = [
            key(1, 0),
            vec![2],
            key(1, 0),
            vec![3],
            key(2, 0),
            vec![1],
            bytes_field(8, b"w"),
            bytes_field(9, &raw),
        ]
        .concat();
        let packed: Vec<u8> = [-1.0f32, 300.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        let b = [bytes_field(1, &[2]), key(2, 0), vec![1], bytes_field(4, &packed), bytes_field(8, b"b")]
            .concat();
        let s =
            [key(2, 0), vec![1], key(4, 5), 7.25f32.to_le_bytes().to_vec(), bytes_field(8, b"s")].concat();
        let node = [bytes_field(1, b"x"), bytes_field(4, b"Conv")].concat();
        let graph =
            [bytes_field(1, &node), bytes_field(5, &w), bytes_field(5, &b), bytes_field(5, &s)].concat();
        let model = [key(1, 0), vec![10], bytes_field(7, &graph)].concat();
        let g = OnnxGraph::parse(&model).unwrap();
        assert_eq!(g.ops, ["Conv"]);
        assert_eq!(
            g.initializers["w"],
            Initializer { dims: vec![2, 3], values: vec![0.5, 1.0, 1.5, 2.0, 2.5, 3.0] }
        );
        assert_eq!(g.initializers["b"], Initializer { dims: vec![2], values: vec![-1.0, 300.0] });
        assert_eq!(g.initializers["s"], Initializer { dims: vec![], values: vec![7.25] });
    }

    #[test]
    fn bad_bytes_and_unsupported_tensors_are_named() {
        assert!(matches!(OnnxGraph::parse(&[0x3a, 0x05, 0x01]), Err(OnnxError::Format(_))));
        assert!(matches!(OnnxGraph::parse(&[]), Err(OnnxError::Format(_))));
        let t = [key(1, 0), vec![1], key(2, 0), vec![7], bytes_field(8, b"ids"), bytes_field(9, &[0; 8])]
            .concat();
        let model = bytes_field(7, &bytes_field(5, &t));
        let err = OnnxGraph::parse(&model).unwrap_err().to_string();
        assert_eq!(err, "initializer `ids`: data_type 7; only float32 (1) is supported");
        let t =
            [key(1, 0), vec![3], key(2, 0), vec![1], bytes_field(8, b"w"), bytes_field(9, &[0; 8])].concat();
        let err = OnnxGraph::parse(&bytes_field(7, &bytes_field(5, &t))).unwrap_err().to_string();
        assert_eq!(err, "initializer `w`: 2 values for dims [3]");
    }
}
