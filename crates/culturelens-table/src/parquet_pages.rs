//! The size checks a Parquet file passes before the `parquet` crate decodes it.
//!
//! The `parquet` crate allocates what a file declares: a page's `uncompressed_page_size` before
//! it decompresses the page, a dictionary page's `num_values` before it decodes the dictionary.
//! A 2.6 KB file declaring a 890-million-entry dictionary made it reserve 3.5 GB (found by the
//! fuzz harness, `parquet`, seed 1, input 387,423). So every page header of every column chunk
//! is read first (Thrift compact protocol, [`page_header`]) and the file is refused, with the
//! row group and column named, unless:
//!
//! 1. every column chunk and every page lies inside the file, and a chunk's pages add up to
//!    exactly the values its footer entry declares;
//! 2. a page decompresses to at most what its codec can produce: its own size uncompressed,
//!    [`SNAPPY_MAX_EXPANSION`] × its size with Snappy (the only codecs this build reads);
//! 3. a dictionary page (always PLAIN) holds no more values than its decoded bytes can: at
//!    least 4 bytes per value (a byte array's length prefix, an int32 or a float), 8 for 64-bit
//!    types, the declared width for fixed-length byte arrays;
//! 4. the file declares at most [`MAX_VALUES_PER_BYTE`] × its size + [`MAX_VALUES_BASE`] values
//!    in all (RLE-encoded levels and dictionary indices can describe many values in few bytes:
//!    pyarrow's constant columns reach about 1,000 values per byte of page, embedding columns
//!    about 8).
//!
//! Files written by pyarrow and arrow-rs pass them (the reference files of
//! `tests/reference_files.rs`); what a file may then make the reader allocate is bounded by a
//! fixed multiple of its size.

use parquet::basic::{Compression, Type as PhysicalType};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::reader::ChunkReader;

/// Largest output of Snappy per input byte: a 3-byte copy tag writes at most 64 bytes.
pub const SNAPPY_MAX_EXPANSION: u64 = 22;
/// Values a file may declare per byte of its size (rule 4).
pub const MAX_VALUES_PER_BYTE: u64 = 4096;
/// Values any file may declare regardless of its size (rule 4).
pub const MAX_VALUES_BASE: u64 = 1 << 20;
/// Most bytes a page header may take (headers with statistics are a few hundred bytes).
const MAX_HEADER: u64 = 1 << 20;

/// Page types of the format (`PageType` in parquet.thrift).
const DATA_PAGE: i32 = 0;
const DICTIONARY_PAGE: i32 = 2;
const DATA_PAGE_V2: i32 = 3;

/// What a page header declares, as far as the checks need it.
#[derive(Debug, Default, PartialEq)]
pub struct PageHeader {
    pub page_type: i32,
    pub uncompressed_page_size: i64,
    pub compressed_page_size: i64,
    /// `num_values` of the data, dictionary or data v2 page header.
    pub num_values: i64,
    /// Bytes the header itself took.
    pub header_len: u64,
}

/// Checks every page header of `metadata`'s file in `reader` (rules 1–4 of the module doc);
/// the error says which rule failed where.
pub fn check_pages<R: ChunkReader>(reader: &R, metadata: &ParquetMetaData) -> Result<(), String> {
    let file_len = reader.len();
    let budget = MAX_VALUES_PER_BYTE.saturating_mul(file_len).saturating_add(MAX_VALUES_BASE);
    let mut declared = 0u64;
    for (g, group) in metadata.row_groups().iter().enumerate() {
        for chunk in group.columns() {
            let at = || format!("row group {g}, column `{}`", chunk.column_descr().path());
            let start = chunk.dictionary_page_offset().unwrap_or(chunk.data_page_offset());
            let len = chunk.compressed_size();
            let end = start.checked_add(len).filter(|&e| start >= 0 && len >= 0 && e as u64 <= file_len);
            let Some(end) = end else {
                return Err(format!(
                    "{}: column chunk [{start}, +{len}) lies outside the {file_len}-byte file",
                    at()
                ));
            };
            let width = min_value_bytes(chunk.column_type(), chunk.column_descr().type_length());
            let mut values = 0i64;
            let mut pos = start;
            while pos < end {
                let window = (MAX_HEADER).min((end - pos) as u64) as usize;
                let bytes = reader.get_bytes(pos as u64, window).map_err(|e| format!("{}: {e}", at()))?;
                let header = page_header(&bytes).map_err(|e| format!("{}: page at byte {pos}: {e}", at()))?;
                check_page(&header, chunk.compression(), width)
                    .map_err(|e| format!("{}: page at byte {pos}: {e}", at()))?;
                if header.page_type == DATA_PAGE || header.page_type == DATA_PAGE_V2 {
                    values = values.saturating_add(header.num_values);
                }
                pos =
                    pos.saturating_add(header.header_len as i64).saturating_add(header.compressed_page_size);
            }
            if pos != end {
                return Err(format!(
                    "{}: the last page ends at byte {pos}, past the chunk's end {end}",
                    at()
                ));
            }
            if values != chunk.num_values() {
                return Err(format!(
                    "{}: pages hold {values} values, the footer declares {}",
                    at(),
                    chunk.num_values()
                ));
            }
            declared = declared.saturating_add(values as u64);
        }
    }
    if declared > budget {
        return Err(format!(
            "the file declares {declared} values, more than a {file_len}-byte file may ({MAX_VALUES_PER_BYTE} per byte + {MAX_VALUES_BASE})"
        ));
    }
    Ok(())
}

/// Rules 2 and 3 for one page.
fn check_page(h: &PageHeader, codec: Compression, min_width: u64) -> Result<(), String> {
    if h.compressed_page_size < 0 || h.uncompressed_page_size < 0 || h.num_values < 0 {
        return Err(format!("negative size or count in the page header ({h:?})"));
    }
    let (compressed, uncompressed) = (h.compressed_page_size as u64, h.uncompressed_page_size as u64);
    let most = match codec {
        Compression::UNCOMPRESSED => compressed,
        Compression::SNAPPY => compressed.saturating_mul(SNAPPY_MAX_EXPANSION),
        // Other codecs are not built in: the reader refuses them with its own error.
        _ => u64::MAX,
    };
    if uncompressed > most {
        return Err(format!(
            "declares {uncompressed} bytes once decompressed, more than {compressed} {codec:?} bytes can hold"
        ));
    }
    if h.page_type == DICTIONARY_PAGE && (h.num_values as u64).saturating_mul(min_width) > uncompressed {
        return Err(format!(
            "dictionary page declares {} values in {uncompressed} bytes (at least {min_width} bytes each)",
            h.num_values
        ));
    }
    Ok(())
}

/// Fewest bytes one PLAIN-encoded value of a physical type takes (booleans are bit-packed and
/// never dictionary-encoded: 0, no bound).
fn min_value_bytes(ty: PhysicalType, type_length: i32) -> u64 {
    match ty {
        PhysicalType::BOOLEAN => 0,
        PhysicalType::INT32 | PhysicalType::FLOAT | PhysicalType::BYTE_ARRAY => 4,
        PhysicalType::INT64 | PhysicalType::DOUBLE => 8,
        PhysicalType::INT96 => 12,
        PhysicalType::FIXED_LEN_BYTE_ARRAY => type_length.max(0) as u64,
    }
}

/// Parses a `PageHeader` (Thrift compact protocol) at the start of `bytes`: the fields the
/// checks need; the others are skipped.
pub fn page_header(bytes: &[u8]) -> Result<PageHeader, String> {
    let mut r = Compact { bytes, pos: 0, depth: 0 };
    let mut h = PageHeader::default();
    let mut field = 0i16;
    while let Some((id, ty)) = r.field_header(&mut field)? {
        match (id, ty) {
            (1, I32) => h.page_type = r.int()? as i32,
            (2, I32) => h.uncompressed_page_size = r.int()?,
            (3, I32) => h.compressed_page_size = r.int()?,
            // data_page_header, dictionary_page_header, data_page_header_v2: field 1 is num_values.
            (5 | 7 | 8, STRUCT) => h.num_values = r.struct_first_int()?,
            _ => r.skip(ty)?,
        }
    }
    h.header_len = r.pos as u64;
    Ok(h)
}

const BOOL_TRUE: u8 = 1;
const BOOL_FALSE: u8 = 2;
const BYTE: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;

/// Nesting a header may use (page headers nest 3 deep: statistics inside a page header).
const MAX_DEPTH: u32 = 16;

/// A reader of the Thrift compact protocol over a byte slice.
struct Compact<'a> {
    bytes: &'a [u8],
    pos: usize,
    depth: u32,
}

impl Compact<'_> {
    fn byte(&mut self) -> Result<u8, String> {
        let b = *self.bytes.get(self.pos).ok_or("page header cut short")?;
        self.pos += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("page header: varint longer than 10 bytes".into())
    }

    /// A zigzag-encoded i16, i32 or i64.
    fn int(&mut self) -> Result<i64, String> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// The next field's id and type, or `None` at the struct's stop byte; `last` is the
    /// previous field id (ids are deltas).
    fn field_header(&mut self, last: &mut i16) -> Result<Option<(i16, u8)>, String> {
        let b = self.byte()?;
        if b == 0 {
            return Ok(None);
        }
        let (delta, ty) = (b >> 4, b & 0x0f);
        let id = if delta == 0 { self.int()? as i16 } else { last.wrapping_add(i16::from(delta)) };
        *last = id;
        Ok(Some((id, ty)))
    }

    /// Field 1 of a struct when it is an integer (else 0); the rest of the struct is skipped.
    fn struct_first_int(&mut self) -> Result<i64, String> {
        self.nest()?;
        let mut field = 0i16;
        let mut first = 0;
        while let Some((id, ty)) = self.field_header(&mut field)? {
            match (id, ty) {
                (1, I16 | I32 | I64) => first = self.int()?,
                _ => self.skip(ty)?,
            }
        }
        self.depth -= 1;
        Ok(first)
    }

    fn nest(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH { Err("page header nests too deep".into()) } else { Ok(()) }
    }

    fn skip_bytes(&mut self, n: u64) -> Result<(), String> {
        let end = (self.pos as u64).checked_add(n).filter(|&e| e <= self.bytes.len() as u64);
        self.pos = end.ok_or("page header cut short")? as usize;
        Ok(())
    }

    fn skip(&mut self, ty: u8) -> Result<(), String> {
        match ty {
            BOOL_TRUE | BOOL_FALSE => Ok(()),
            BYTE => self.skip_bytes(1),
            I16 | I32 | I64 => self.varint().map(drop),
            DOUBLE => self.skip_bytes(8),
            BINARY => {
                let n = self.varint()?;
                self.skip_bytes(n)
            }
            LIST | SET => {
                let b = self.byte()?;
                let n = if b >> 4 == 15 { self.varint()? } else { u64::from(b >> 4) };
                self.skip_elements(n, &[b & 0x0f])
            }
            MAP => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                let kv = self.byte()?;
                self.skip_elements(n, &[kv >> 4, kv & 0x0f])
            }
            STRUCT => {
                self.nest()?;
                let mut field = 0i16;
                while let Some((_, t)) = self.field_header(&mut field)? {
                    self.skip(t)?;
                }
                self.depth -= 1;
                Ok(())
            }
            other => Err(format!("page header: unknown Thrift type {other}")),
        }
    }

    /// Skips `n` elements of the given types (one for lists, key and value for maps); every
    /// element takes at least one byte, so `n` is bounded by what is left.
    fn skip_elements(&mut self, n: u64, types: &[u8]) -> Result<(), String> {
        if n > (self.bytes.len() - self.pos) as u64 {
            return Err("page header cut short".into());
        }
        self.nest()?;
        for _ in 0..n {
            for &t in types {
                // Booleans in a collection take one byte each.
                if t == BOOL_TRUE || t == BOOL_FALSE { self.skip_bytes(1)? } else { self.skip(t)? }
            }
        }
        self.depth -= 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `v` as a zigzag varint (a non-negative Thrift i32).
    fn zigzag(v: u64) -> Vec<u8> {
        let mut v = v * 2;
        let mut out = Vec::new();
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
        out
    }

    /// A page header written by hand in the compact protocol: type, sizes, and a dictionary
    /// page header with `num_values` and encoding PLAIN.
    fn dictionary_header(uncompressed: u64, compressed: u64, values: u64) -> Vec<u8> {
        let mut h = vec![0x15]; // field 1 (delta 1, i32): type
        h.extend(zigzag(DICTIONARY_PAGE as u64));
        h.push(0x15); // field 2: uncompressed_page_size
        h.extend(zigzag(uncompressed));
        h.push(0x15); // field 3: compressed_page_size
        h.extend(zigzag(compressed));
        h.push(0x4c); // field 7 (delta 4): a struct
        h.push(0x15); //   field 1: num_values
        h.extend(zigzag(values));
        h.extend([0x15, 0x00, 0x00, 0x00]); //   field 2: encoding 0 (PLAIN); stop; stop
        h
    }

    #[test]
    fn a_hand_written_header_parses() {
        let h = page_header(&dictionary_header(40, 30, 10)).unwrap();
        assert_eq!(
            h,
            PageHeader {
                page_type: DICTIONARY_PAGE,
                uncompressed_page_size: 40,
                compressed_page_size: 30,
                num_values: 10,
                header_len: 13
            }
        );
        assert!(page_header(&dictionary_header(40, 30, 10)[..7]).unwrap_err().contains("cut short"));
    }

    #[test]
    fn the_rules_by_hand() {
        let h = page_header(&dictionary_header(40, 30, 10)).unwrap();
        // 10 values × 4 bytes = 40 bytes: just fits; 11 do not.
        assert!(check_page(&h, Compression::SNAPPY, 4).is_ok());
        let h11 = page_header(&dictionary_header(40, 30, 11)).unwrap();
        assert!(check_page(&h11, Compression::SNAPPY, 4).unwrap_err().contains("11 values in 40 bytes"));
        // Uncompressed pages are their own size; Snappy expands at most 22 times.
        assert!(
            check_page(&h, Compression::UNCOMPRESSED, 4).unwrap_err().contains("40 bytes once decompressed")
        );
        let h = page_header(&dictionary_header(110, 5, 1)).unwrap();
        assert!(check_page(&h, Compression::SNAPPY, 4).is_ok());
        let h = page_header(&dictionary_header(111, 5, 1)).unwrap();
        assert!(check_page(&h, Compression::SNAPPY, 4).is_err());
    }
}
