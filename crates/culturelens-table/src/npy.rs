//! NumPy `.npy` (format versions 1.0–3.0) for 2-D float matrices: little- or big-endian float32,
//! float16 and float64, C order. Read into f32 in one bulk pass; written as little-endian float32.
//!
//! The format is small and fully specified (numpy `lib/format.py`); reading it directly lets a
//! 150,822 × 1280 table load at disk speed with one allocation.

use std::io::{Read, Write};
use std::path::Path;

use crate::error::{Location, TableError};
use crate::matrix::Matrix;

const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Element type of a `.npy` file as given by its `descr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dtype {
    F16,
    F32,
    F64,
}

#[derive(Debug)]
struct Header {
    dtype: Dtype,
    big_endian: bool,
    shape: Vec<usize>,
}

/// Reads a 2-D float `.npy` file (N rows × d columns) into an f32 [`Matrix`]. Little-endian
/// float32 (the common case) is read straight into the matrix buffer: one allocation, one pass.
pub fn read_npy(path: &Path) -> Result<Matrix, TableError> {
    Ok(read_npy_screened(path)?.0)
}

/// [`read_npy`], and whether every row was seen finite with a non-zero norm while it was read
/// (little-endian float32 only; `false` means not screened or not clean, and the caller checks
/// the rows itself, naming the offending one).
pub(crate) fn read_npy_screened(path: &Path) -> Result<(Matrix, bool), TableError> {
    let at = Location::file(path);
    let mut file = std::fs::File::open(path).map_err(|e| TableError::io(path, e))?;
    let file_len = file.metadata().map_err(|e| TableError::io(path, e))?.len() as usize;
    let mut head = vec![0u8; file_len.min(12)];
    file.read_exact(&mut head).map_err(|e| TableError::io(path, e))?;
    let (already, end) = (head.len(), header_end(&head, &at)?.min(file_len));
    if end > already {
        head.resize(end, 0);
        file.read_exact(&mut head[already..]).map_err(|e| TableError::io(path, e))?;
    }
    let (header, offset) = parse_header(&head, &at)?;
    let (rows, cols, width) = matrix_shape(&header, &at)?;
    check_payload_len(file_len - offset, rows, cols, width, header.dtype, &at)?;
    if header.dtype == Dtype::F32 && !header.big_endian && cfg!(target_endian = "little") {
        let mut data = vec![0f32; rows * cols];
        let clean = read_screened(&file, offset as u64, &mut data, cols, read_threads(rows * cols * 4))
            .map_err(|e| TableError::io(path, e))?;
        // An empty table is never clean: the check names what is missing.
        return Ok((Matrix::new(rows, cols, data), clean && rows > 0 && cols > 0));
    }
    let mut payload = Vec::with_capacity(file_len - offset);
    file.read_to_end(&mut payload).map_err(|e| TableError::io(path, e))?;
    Ok((Matrix::new(rows, cols, decode(&payload, &header)), false))
}

/// Payloads above this size are read by several threads at once.
const PARALLEL_READ_MIN_BYTES: usize = 64 << 20;

/// Rows are read and screened in blocks of about this size, so that each block is screened while
/// it is still in the cache.
#[cfg(unix)]
const BLOCK_BYTES: usize = 4 << 20;

/// How many threads read a payload of `bytes`: one per core (at most 8) from
/// [`PARALLEL_READ_MIN_BYTES`], else one.
fn read_threads(bytes: usize) -> usize {
    if bytes < PARALLEL_READ_MIN_BYTES {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(8)
}

/// Reads the little-endian f32 payload of `file` at `offset` into `out` (rows of `cols`
/// values) and screens every row as it arrives ([`crate::row_is_valid`]): returns whether all
/// rows are finite with a non-zero norm.
///
/// The payload is read in `threads` contiguous row ranges ([`read_threads`]), each by a thread
/// of its own with positioned reads: copying 772 MB out of the page cache into fresh pages is
/// bound by one core's page faults and copy (0.18 s here), not by memory bandwidth. Each range
/// goes in blocks of [`BLOCK_BYTES`], screened while cache-hot, so the table's check costs no
/// pass of its own.
fn read_screened(
    file: &std::fs::File,
    offset: u64,
    out: &mut [f32],
    cols: usize,
    threads: usize,
) -> std::io::Result<bool> {
    let width = cols.max(1);
    let screen = |rows: &[f32]| rows.chunks_exact(width).all(crate::row_is_valid);
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        let row_bytes = width * 4;
        let block_rows = (BLOCK_BYTES / row_bytes).max(1);
        let range_rows = (out.len() / width).div_ceil(threads).max(1);
        let read_range = |first_row: usize, range: &mut [f32]| -> std::io::Result<bool> {
            let mut clean = true;
            for (i, block) in range.chunks_mut(block_rows * width).enumerate() {
                let at = offset + ((first_row + i * block_rows) * row_bytes) as u64;
                file.read_exact_at(bytemuck::cast_slice_mut(block), at)?;
                clean &= screen(block);
            }
            Ok(clean)
        };
        if threads == 1 {
            return read_range(0, out);
        }
        std::thread::scope(|scope| {
            let reads: Vec<_> = out
                .chunks_mut(range_rows * width)
                .enumerate()
                .map(|(i, range)| scope.spawn(move || read_range(i * range_rows, range)))
                .collect();
            reads
                .into_iter()
                .try_fold(true, |clean, read| Ok(read.join().expect("a read thread panicked")? & clean))
        })
    }
    #[cfg(not(unix))]
    {
        let _ = threads;
        let mut file = file;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(offset))?;
        file.read_exact(bytemuck::cast_slice_mut(out))?;
        Ok(screen(out))
    }
}

/// Parses `.npy` bytes; `at` names the source in errors.
pub fn parse_npy(bytes: &[u8], at: &Location) -> Result<Matrix, TableError> {
    let (header, offset) = parse_header(bytes, at)?;
    let (rows, cols, width) = matrix_shape(&header, at)?;
    let payload = &bytes[offset..];
    check_payload_len(payload.len(), rows, cols, width, header.dtype, at)?;
    Ok(Matrix::new(rows, cols, decode(payload, &header)))
}

/// Reads a float `.npy` array of any rank (C order) into f32: its shape and values (the
/// initial latents `(K, 4, h, w)` of `culturelens generate --latents`).
pub fn read_npy_nd(path: &Path) -> Result<(Vec<usize>, Vec<f32>), TableError> {
    let at = Location::file(path);
    let bytes = std::fs::read(path).map_err(|e| TableError::io(path, e))?;
    let (header, offset) = parse_header(&bytes, &at)?;
    let width = match header.dtype {
        Dtype::F16 => 2,
        Dtype::F32 => 4,
        Dtype::F64 => 8,
    };
    let count: usize = header.shape.iter().product();
    let payload = &bytes[offset..];
    if payload.len() != count * width {
        return Err(TableError::format(
            at,
            format!(
                "data section holds {} bytes but shape {:?} of {:?} needs {} (truncated or corrupt file)",
                payload.len(),
                header.shape,
                header.dtype,
                count * width
            ),
        ));
    }
    Ok((header.shape.clone(), decode(payload, &header)))
}

/// (rows, cols, bytes per element) of a 2-D header.
fn matrix_shape(header: &Header, at: &Location) -> Result<(usize, usize, usize), TableError> {
    if header.shape.len() != 2 {
        return Err(TableError::format(
            at.clone(),
            format!(
                "expected a 2-D array (N embeddings × d dimensions), found ndim = {} with shape {:?}",
                header.shape.len(),
                header.shape
            ),
        ));
    }
    let width = match header.dtype {
        Dtype::F16 => 2,
        Dtype::F32 => 4,
        Dtype::F64 => 8,
    };
    Ok((header.shape[0], header.shape[1], width))
}

fn check_payload_len(
    len: usize,
    rows: usize,
    cols: usize,
    width: usize,
    dtype: Dtype,
    at: &Location,
) -> Result<(), TableError> {
    let expected = rows
        .checked_mul(cols)
        .and_then(|n| n.checked_mul(width))
        .ok_or_else(|| TableError::format(at.clone(), "shape overflows memory"))?;
    if len != expected {
        return Err(TableError::format(
            at.clone(),
            format!(
                "data section holds {len} bytes but shape ({rows}, {cols}) of {dtype:?} needs {expected} (truncated or corrupt file)"
            ),
        ));
    }
    Ok(())
}

/// Converts a payload of any supported dtype/byte order to f32.
fn decode(payload: &[u8], header: &Header) -> Vec<f32> {
    let be = header.big_endian;
    match header.dtype {
        Dtype::F32 => payload
            .chunks_exact(4)
            .map(|c| {
                let b = [c[0], c[1], c[2], c[3]];
                if be { f32::from_be_bytes(b) } else { f32::from_le_bytes(b) }
            })
            .collect(),
        Dtype::F16 => payload
            .chunks_exact(2)
            .map(|c| {
                let b = [c[0], c[1]];
                let bits = if be { u16::from_be_bytes(b) } else { u16::from_le_bytes(b) };
                half::f16::from_bits(bits).to_f32()
            })
            .collect(),
        Dtype::F64 => payload
            .chunks_exact(8)
            .map(|c| {
                let b: [u8; 8] = c.try_into().expect("chunks_exact(8)");
                (if be { f64::from_be_bytes(b) } else { f64::from_le_bytes(b) }) as f32
            })
            .collect(),
    }
}

/// Byte offset where the header of a file starting with `prefix` (≥ 12 bytes or the whole file)
/// ends.
fn header_end(prefix: &[u8], at: &Location) -> Result<usize, TableError> {
    let bad = |m: &str| TableError::format(at.clone(), format!("not a valid .npy file: {m}"));
    if prefix.len() < 10 || &prefix[..6] != MAGIC {
        return Err(bad("missing \\x93NUMPY magic"));
    }
    match prefix[6] {
        1 => Ok(10 + u16::from_le_bytes([prefix[8], prefix[9]]) as usize),
        2 | 3 if prefix.len() >= 12 => {
            Ok(12 + u32::from_le_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]) as usize)
        }
        2 | 3 => Err(bad("truncated header")),
        v => Err(bad(&format!("unsupported format version {v}"))),
    }
}

fn parse_header(bytes: &[u8], at: &Location) -> Result<(Header, usize), TableError> {
    let bad = |m: &str| TableError::format(at.clone(), format!("not a valid .npy file: {m}"));
    let end = header_end(bytes, at)?;
    let start = if bytes[6] == 1 { 10 } else { 12 };
    if bytes.len() < end {
        return Err(bad("truncated header"));
    }
    let text = std::str::from_utf8(&bytes[start..end]).map_err(|_| bad("header is not UTF-8"))?;
    let descr = dict_value(text, "descr").ok_or_else(|| bad("header has no 'descr'"))?;
    let descr = descr.trim().trim_matches(|c| c == '\'' || c == '"');
    let (big_endian, kind) = match descr.split_at_checked(1) {
        Some(("<", k)) | Some(("|", k)) | Some(("=", k)) => (false, k),
        Some((">", k)) => (true, k),
        _ => (false, descr),
    };
    let dtype = match kind {
        "f2" => Dtype::F16,
        "f4" => Dtype::F32,
        "f8" => Dtype::F64,
        other => {
            return Err(TableError::format(
                at.clone(),
                format!("unsupported dtype '{other}': embeddings must be float16, float32 or float64"),
            ));
        }
    };
    let fortran = dict_value(text, "fortran_order").ok_or_else(|| bad("header has no 'fortran_order'"))?;
    if fortran.trim() != "False" {
        return Err(TableError::format(
            at.clone(),
            "Fortran-ordered arrays are not supported: save with np.ascontiguousarray(x)",
        ));
    }
    let shape = dict_value(text, "shape").ok_or_else(|| bad("header has no 'shape'"))?;
    let shape = shape.trim().trim_start_matches('(').trim_end_matches(')');
    let shape = shape
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| bad("malformed 'shape'"))?;
    Ok((Header { dtype, big_endian, shape }, end))
}

/// Returns the raw text of `key`'s value in the header's Python dict literal.
fn dict_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let pos = text.find(&format!("'{key}'")).or_else(|| text.find(&format!("\"{key}\"")))?;
    let rest = &text[pos + key.len() + 2..];
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    let end =
        if rest.starts_with('(') { rest.find(')')? + 1 } else { rest.find([',', '}']).unwrap_or(rest.len()) };
    Some(&rest[..end])
}

/// Writes `m` as a little-endian float32 `.npy` (format 1.0) to `w`.
pub fn write_npy(w: &mut dyn Write, m: &Matrix) -> std::io::Result<()> {
    write_npy_nd(w, &[m.rows(), m.cols()], m.data())
}

/// Writes `data` (C order) as a little-endian float32 `.npy` (format 1.0) of `shape` to `w`.
pub fn write_npy_nd(w: &mut dyn Write, shape: &[usize], data: &[f32]) -> std::io::Result<()> {
    assert_eq!(shape.iter().product::<usize>(), data.len(), "npy data length must match its shape");
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let shape = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    // Pad so that magic + version + length + header is a multiple of 64 and ends with '\n'.
    let unpadded = MAGIC.len() + 2 + 2 + dict.len() + 1;
    let pad = (64 - unpadded % 64) % 64;
    let header = format!("{dict}{}\n", " ".repeat(pad));
    w.write_all(MAGIC)?;
    w.write_all(&[1, 0])?;
    w.write_all(&(header.len() as u16).to_le_bytes())?;
    w.write_all(header.as_bytes())?;
    let mut buf = Vec::with_capacity(data.len().min(1 << 18) * 4);
    for chunk in data.chunks(1 << 18) {
        buf.clear();
        buf.extend(chunk.iter().flat_map(|v| v.to_le_bytes()));
        w.write_all(&buf)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy_bytes(descr: &str, shape: &str, payload: &[u8]) -> Vec<u8> {
        let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}\n");
        let mut out = MAGIC.to_vec();
        out.extend([1, 0]);
        out.extend((dict.len() as u16).to_le_bytes());
        out.extend(dict.as_bytes());
        out.extend(payload);
        out
    }

    /// Row ranges read by 1, 2, 3 and 7 threads in blocks (rows of 4.4 KB, so one range spans
    /// several 4 MiB blocks) give the file's values; a non-finite value or a zero row anywhere,
    /// the last row included, makes the screen say not clean.
    #[test]
    fn ranges_read_by_threads_are_the_file_and_screen_every_row() {
        let (rows, cols) = (2_003, 1_100);
        let values: Vec<f32> = (0..rows * cols).map(|i| (i % 977) as f32 - 488.5).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.npy");
        let bytes = |values: &[f32]| {
            let mut buf = Vec::new();
            write_npy(&mut buf, &Matrix::new(rows, cols, values.to_vec())).unwrap();
            buf
        };
        let offset = (bytes(&values).len() - rows * cols * 4) as u64;
        let read = |values: &[f32], threads| {
            std::fs::write(&path, bytes(values)).unwrap();
            let mut out = vec![0f32; rows * cols];
            let clean =
                read_screened(&std::fs::File::open(&path).unwrap(), offset, &mut out, cols, threads).unwrap();
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&out), bits(values), "{threads} threads");
            clean
        };
        for threads in [1, 2, 3, 7] {
            assert!(read(&values, threads), "{threads} threads");
            for (row, bad) in [(0, f32::NAN), (1_337, f32::INFINITY), (rows - 1, f32::NEG_INFINITY)] {
                let mut broken = values.clone();
                broken[row * cols + 17] = bad;
                assert!(!read(&broken, threads), "{bad} in row {row}, {threads} threads");
            }
            let mut zero = values.clone();
            zero[(rows - 1) * cols..].fill(0.0);
            assert!(!read(&zero, threads), "zero last row, {threads} threads");
        }
        assert_eq!(read_threads(PARALLEL_READ_MIN_BYTES - 1), 1);
    }

    #[test]
    fn roundtrip_f32() {
        let m = Matrix::new(2, 3, vec![1.0, -2.5, 3.0, 0.0, 1e-7, 7.25]);
        let mut buf = Vec::new();
        write_npy(&mut buf, &m).unwrap();
        assert_eq!((buf.len() - m.data().len() * 4) % 64, 0, "header padded to 64 bytes");
        let back = parse_npy(&buf, &Location::default()).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn reads_f16_and_big_endian_f64() {
        let f16: Vec<u8> =
            [1.5f32, -0.25].iter().flat_map(|v| half::f16::from_f32(*v).to_le_bytes()).collect();
        let m = parse_npy(&npy_bytes("<f2", "(1, 2)", &f16), &Location::default()).unwrap();
        assert_eq!(m.data(), &[1.5, -0.25]);
        let f64be: Vec<u8> = [2.0f64, 3.5].iter().flat_map(|v| v.to_be_bytes()).collect();
        let m = parse_npy(&npy_bytes(">f8", "(2, 1)", &f64be), &Location::default()).unwrap();
        assert_eq!((m.rows(), m.cols()), (2, 1));
        assert_eq!(m.data(), &[2.0, 3.5]);
    }

    #[test]
    fn file_reader_matches_byte_parser_and_rejects_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let m = Matrix::new(3, 2, vec![0.5, -1.0, 2.0, 3.0, 1e9, -7.0]);
        let mut buf = Vec::new();
        write_npy(&mut buf, &m).unwrap();
        let path = dir.path().join("m.npy");
        std::fs::write(&path, &buf).unwrap();
        assert_eq!(read_npy(&path).unwrap(), m);
        std::fs::write(&path, &buf[..buf.len() - 3]).unwrap();
        let err = read_npy(&path).unwrap_err().to_string();
        assert!(err.contains("m.npy") && err.contains("truncated"), "{err}");
        std::fs::write(&path, &buf[..20]).unwrap();
        assert!(read_npy(&path).unwrap_err().to_string().contains("truncated header"));
        std::fs::write(&path, b"\x93NU").unwrap();
        assert!(read_npy(&path).unwrap_err().to_string().contains("magic"));
    }

    #[test]
    fn rejects_wrong_ndim_dtype_and_truncation() {
        let err = parse_npy(&npy_bytes("<f4", "(4,)", &[0; 16]), &Location::default()).unwrap_err();
        assert!(err.to_string().contains("ndim = 1"), "{err}");
        let err = parse_npy(&npy_bytes("<i8", "(1, 1)", &[0; 8]), &Location::default()).unwrap_err();
        assert!(err.to_string().contains("unsupported dtype 'i8'"), "{err}");
        let err = parse_npy(&npy_bytes("<f4", "(2, 2)", &[0; 12]), &Location::default()).unwrap_err();
        assert!(err.to_string().contains("truncated"), "{err}");
        let err = parse_npy(b"PK\x03\x04 not npy", &Location::default()).unwrap_err();
        assert!(err.to_string().contains("magic"), "{err}");
    }
}
