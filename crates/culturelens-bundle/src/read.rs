//! Reading a bundle from bytes: checksums, embeddings (f32/f16 → f32, finite, non-zero rows) and
//! metadata (CSV with a header, required columns, consistent with the manifest).

use std::collections::BTreeSet;
use std::mem::MaybeUninit;

use culturelens_files::sha256_hex;

use crate::error::BundleError;
use crate::manifest::{DType, MANIFEST, Manifest, REQUIRED_COLUMNS, THUMBNAIL_COLUMN};

/// A decoded bundle: row-major `rows × dim` f32 embeddings and named metadata columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Bundle {
    pub manifest: Manifest,
    pub embeddings: Vec<f32>,
    pub columns: Vec<(String, Vec<String>)>,
}

impl Bundle {
    pub fn column(&self, name: &str) -> Option<&[String]> {
        self.columns.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_slice())
    }
}

/// Checks that `bytes` is the file `path` of the manifest: same size, and the same SHA-256 for
/// each listed piece, or for the whole file when the manifest lists no pieces
/// ([`FileEntry::digests`](crate::FileEntry::digests)).
pub fn check_file(manifest: &Manifest, path: &str, bytes: &[u8]) -> Result<(), BundleError> {
    check_size(manifest, path, bytes.len() as u64)?;
    for (piece, (range, _)) in manifest.entry(path)?.digests().into_iter().enumerate() {
        check_digest(manifest, path, piece, &sha256_hex(&bytes[range.start as usize..range.end as usize]))?;
    }
    Ok(())
}

/// The size half of [`check_file`]: `len` bytes must be what the manifest lists for `path`.
pub fn check_size(manifest: &Manifest, path: &str, len: u64) -> Result<(), BundleError> {
    let entry = manifest.entry(path)?;
    if len != entry.bytes {
        return Err(BundleError::new(
            path,
            format!("has {len} bytes but the manifest lists {} (truncated or replaced file)", entry.bytes),
        ));
    }
    Ok(())
}

/// The checksum half of [`check_file`], for a SHA-256 computed elsewhere (the browser app hashes
/// with WebCrypto, piece by piece as the file arrives): `actual` (hex) must be what the manifest
/// lists for piece `piece` of [`FileEntry::digests`](crate::FileEntry::digests) of `path` (piece 0
/// is the whole file when no pieces are listed).
pub fn check_digest(manifest: &Manifest, path: &str, piece: usize, actual: &str) -> Result<(), BundleError> {
    let entry = manifest.entry(path)?;
    let count = entry.digest_count();
    let Some((range, listed)) = entry.digest(piece) else {
        return Err(BundleError::new(
            path,
            format!("piece {piece} is beyond the {count} the manifest lists"),
        ));
    };
    if actual.eq_ignore_ascii_case(listed) {
        return Ok(());
    }
    let what = match entry.pieces {
        Some(_) => format!("piece {piece} of {count} (bytes {}..{})", range.start, range.end),
        None => "the file".to_string(),
    };
    Err(BundleError::new(
        path,
        format!("SHA-256 mismatch: {what} is {actual}, the manifest lists {listed} (corrupt file)"),
    ))
}

/// Decodes the embeddings file to row-major f32 and checks every row: finite values, non-zero norm.
pub fn decode_embeddings(manifest: &Manifest, bytes: &[u8]) -> Result<Vec<f32>, BundleError> {
    check_embedding_bytes(manifest, bytes.len())?;
    let values: Vec<f32> = match manifest.dtype {
        DType::F32 => bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
        DType::F16 => bytes.chunks_exact(2).map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]]))).collect(),
    };
    check_embedding_rows(manifest, values, 0)
}

/// An embeddings file decoded and checked while it is still arriving: the browser app hands
/// over each piece of the download as it lands, so the work hides behind the network. An f16
/// table is decoded to f32 as it comes; the rows of either dtype are checked (finite values, a
/// non-zero one) as soon as they are complete, so that little is left once the last byte is in.
///
/// The decoded f16 values get one allocation, of their final size, made when the reader trusts
/// the size ([`TableStream::reserve_for`]): the browser reserves what a manifest lists only once
/// that much could be real (at once for a small file, after its first 256 MiB for a large one),
/// so a manifest that lies about a size cannot make the tab reserve memory for bytes that never
/// come, and the values are never moved by a growing buffer. Until then an f16 table's
/// [`TableStream::advance`] does nothing; the backlog is done at the next call after it.
/// [`TableStream::finish`] does what is left and gives what [`decode_embeddings_words`] gives,
/// errors included (the first bad row, whenever it arrived).
pub struct TableStream {
    dtype: DType,
    dim: usize,
    /// The decoded values of an f16 table (an f32 table is decoded in place at the end).
    values: Vec<f32>,
    /// Whether the room for every f16 value has been made.
    room: bool,
    /// Leading rows found fit so far (the check stops at the first unfit row, which
    /// [`TableStream::finish`] reports).
    rows: usize,
}

impl TableStream {
    /// The stream of the embeddings file of `manifest` (its dtype and dim).
    pub fn new(manifest: &Manifest) -> TableStream {
        TableStream {
            dtype: manifest.dtype,
            dim: manifest.dim.max(1),
            values: Vec::new(),
            room: false,
            rows: 0,
        }
    }

    /// Makes room for the f16 values of a file of `bytes` bytes; from now on
    /// [`TableStream::advance`] decodes.
    pub fn reserve_for(&mut self, bytes: u64) {
        if self.dtype == DType::F16 {
            let values = usize::try_from(bytes.div_ceil(4) * 2).unwrap_or(usize::MAX);
            self.values.reserve_exact(values.saturating_sub(self.values.len()));
        }
        self.room = true;
    }

    /// Decodes (f16) and checks the rows past those already done: `words` is every word of the
    /// file so far (memory order, as read), the last one complete.
    pub fn advance(&mut self, words: &[u32]) {
        match self.dtype {
            DType::F32 => {
                // The file's words are the values: check every complete row, in place.
                let complete = words.len() / self.dim;
                while self.rows < complete && row_words_are_fit(&words[self.rows * self.dim..][..self.dim]) {
                    self.rows += 1;
                }
            }
            DType::F16 => {
                if !self.room {
                    return;
                }
                // Two values per word decoded so far.
                let new = &words[(self.values.len() / 2).min(words.len())..];
                if self.dim.is_multiple_of(2) {
                    // Rows fill whole words: each complete row is decoded and checked in one pass
                    // over its words, a call of its own (a browser's wasm engine switches a
                    // function to optimised code only at a later call, never inside one long
                    // loop). The rest waits for its row's last word.
                    for row in new.chunks_exact(self.dim / 2) {
                        if self.push_f16(row) && (self.rows + 1) * self.dim == self.values.len() {
                            self.rows += 1;
                        }
                    }
                } else {
                    // Rows straddle words: decode in blocks, each a call of its own, then check
                    // the complete rows' values (a block's own verdict spans parts of rows).
                    const BLOCK: usize = 1 << 16;
                    for block in new.chunks(BLOCK) {
                        self.push_f16(block);
                    }
                    let complete = self.values.len() / self.dim;
                    while self.rows < complete && row_is_fit(&self.values[self.rows * self.dim..][..self.dim])
                    {
                        self.rows += 1;
                    }
                }
            }
        }
    }

    /// Decodes the f16 `words` onto the end of the values, straight into their uninitialised room
    /// (no zeros written first only to be overwritten), and says whether the new values are fit
    /// ([`decode_f16_words`]).
    fn push_f16(&mut self, words: &[u32]) -> bool {
        let n = 2 * words.len();
        self.values.reserve(n);
        let fit = decode_f16_words(words, &mut self.values.spare_capacity_mut()[..n]);
        // SAFETY: decode_f16_words wrote every one of the n values.
        unsafe { self.values.set_len(self.values.len() + n) };
        fit
    }

    /// The decoded table of the file of `len` bytes held in `words` (its last, partial word
    /// zero-padded), doing what [`TableStream::advance`] has not: checked as
    /// [`decode_embeddings`] checks it. An f32 table becomes the result in place.
    pub fn finish(
        mut self,
        manifest: &Manifest,
        words: Vec<u32>,
        len: usize,
    ) -> Result<Vec<f32>, BundleError> {
        check_embedding_bytes(manifest, len)?;
        let values = match self.dtype {
            DType::F32 => {
                let mut words = words;
                words.truncate(len / 4);
                // Each word holds four file bytes in memory order; `u32::from_le` of it is the
                // little-endian value (the identity on little-endian targets, so the collect
                // reuses the buffer and the loop folds away).
                words.into_iter().map(|w| f32::from_bits(u32::from_le(w))).collect()
            }
            DType::F16 => {
                if !self.room {
                    self.reserve_for(len as u64);
                }
                self.advance(&words[..len.div_ceil(4)]);
                drop(words);
                self.values.truncate(len / 2);
                self.values
            }
        };
        check_embedding_rows(manifest, values, self.rows.min(manifest.rows))
    }
}

/// Decodes the f16 pairs of little-endian `words` (the first value of each in its low half) into
/// `out`, two values per word, every one written, and says whether the values are fit
/// ([`row_is_fit`] of them), read from the f16 bits in the same pass: a value is finite unless its
/// exponent bits are all ones, and non-zero when any bit but the sign is set (the conversion is
/// exact, so this is the rule of the f32 values).
#[inline(never)]
fn decode_f16_words(words: &[u32], out: &mut [MaybeUninit<f32>]) -> bool {
    let (mut special, mut nonzero) = (false, 0u32);
    for (pair, w) in out.chunks_exact_mut(2).zip(words) {
        let w = u32::from_le(*w);
        pair[0].write(f16_to_f32(w as u16));
        pair[1].write(f16_to_f32((w >> 16) as u16));
        special |= (w & 0x7c00 == 0x7c00) | (w & 0x7c00_0000 == 0x7c00_0000);
        nonzero |= w & 0x7fff_7fff;
    }
    !special && nonzero != 0
}

/// The f32 of the IEEE 754 binary16 `bits`, exactly as `half::f16::to_f32` (a NaN keeps its
/// payload and gets the quiet bit), without branches: a finite value is its exponent and mantissa
/// moved into an f32's place and scaled by 2¹¹² (exact, subnormals included), so the loop over a
/// table vectorises. The browser has no F16C, and `half`'s fallback branches per value: 1.3 s for
/// the paper-scale table's 193 million values in wasm.
#[inline]
pub(crate) fn f16_to_f32(bits: u16) -> f32 {
    let bits = u32::from(bits);
    let sign = (bits & 0x8000) << 16;
    let magnitude = bits & 0x7fff;
    let finite = f32::from_bits(magnitude << 13) * f32::from_bits(0x7780_0000);
    let mantissa = (bits & 0x03ff) << 13;
    let quiet = if mantissa != 0 { 0x0040_0000 } else { 0 };
    let special = 0x7f80_0000 | mantissa | quiet;
    let value = if magnitude >= 0x7c00 { special } else { finite.to_bits() };
    f32::from_bits(value | sign)
}

/// [`decode_embeddings`] of a file held in 4-byte words, as the browser app reads it: the first
/// `len` bytes of `words` in memory order are the file's bytes. An f32 table becomes the result
/// in place (no second copy of a 772 MB table, and no second 772 MB of memory in the tab).
pub fn decode_embeddings_words(
    manifest: &Manifest,
    words: Vec<u32>,
    len: usize,
) -> Result<Vec<f32>, BundleError> {
    TableStream::new(manifest).finish(manifest, words, len)
}

/// The embedding file holds exactly `rows × dim` values of the manifest's dtype.
fn check_embedding_bytes(manifest: &Manifest, len: usize) -> Result<(), BundleError> {
    let (rows, dim) = (manifest.rows, manifest.dim);
    if len != rows * dim * manifest.dtype.size() {
        return Err(BundleError::new(
            manifest.embeddings.as_str(),
            format!("expected {rows} × {dim} {:?} values", manifest.dtype),
        ));
    }
    Ok(())
}

/// Whether every value of an embedding row is finite and one is non-zero: one branch-free pass
/// (the positions are found only on failure). A call per row that is never inlined, so a
/// browser's wasm engine runs the check of a large table in optimised code after its first rows.
#[inline(never)]
fn row_is_fit(v: &[f32]) -> bool {
    values_are_fit(v.iter().copied())
}

/// [`row_is_fit`] of a row of f32 held as the file's words (memory order).
#[inline(never)]
fn row_words_are_fit(v: &[u32]) -> bool {
    values_are_fit(v.iter().map(|w| f32::from_bits(u32::from_le(*w))))
}

/// The one rule of both: every value finite, one non-zero.
#[inline(always)]
fn values_are_fit(values: impl Iterator<Item = f32>) -> bool {
    let (finite, nonzero) = values.fold((true, false), |(f, z), x| (f & x.is_finite(), z | (x != 0.0)));
    finite && nonzero
}

/// Every value finite and no row all zeros, past the first `checked` rows (already found fit);
/// returns `values`.
fn check_embedding_rows(
    manifest: &Manifest,
    values: Vec<f32>,
    checked: usize,
) -> Result<Vec<f32>, BundleError> {
    let path = manifest.embeddings.as_str();
    for (row, v) in values.chunks_exact(manifest.dim).enumerate().skip(checked) {
        if row_is_fit(v) {
            continue;
        }
        if let Some(k) = v.iter().position(|x| !x.is_finite()) {
            return Err(BundleError::new(path, format!("non-finite value {}", v[k]))
                .row(row)
                .column(format!("dim {k}")));
        }
        if v.iter().all(|x| *x == 0.0) {
            return Err(BundleError::new(
                path,
                "zero-norm embedding (all values are 0): cosine similarities are undefined",
            )
            .row(row));
        }
    }
    Ok(values)
}

/// Parses the metadata CSV: a header with unique names including [`REQUIRED_COLUMNS`], exactly
/// `manifest.rows` data rows, non-empty required values, distinct models/languages/cultures equal
/// to the manifest's lists, and thumbnail paths that the manifest lists.
pub fn parse_metadata(manifest: &Manifest, bytes: &[u8]) -> Result<Vec<(String, Vec<String>)>, BundleError> {
    let path = manifest.metadata.as_str();
    let mut reader = csv::ReaderBuilder::new().has_headers(true).from_reader(bytes);
    let names: Vec<String> = reader
        .headers()
        .map_err(|e| BundleError::new(path, format!("cannot read the header row: {e}")))?
        .iter()
        .map(str::to_string)
        .collect();
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            return Err(BundleError::new(path, "duplicated column name").column(name.as_str()));
        }
    }
    for required in REQUIRED_COLUMNS {
        if !names.iter().any(|n| n == required) {
            return Err(BundleError::new(
                path,
                format!("missing required column (columns present: {})", names.join(", ")),
            )
            .column(required));
        }
    }
    let mut columns: Vec<Vec<String>> = vec![Vec::with_capacity(manifest.rows); names.len()];
    for (row, record) in reader.records().enumerate() {
        let record = record.map_err(|e| BundleError::new(path, format!("malformed CSV: {e}")).row(row))?;
        assert_eq!(
            columns.len(),
            record.len(),
            "the CSV reader is strict: every record has the header's length"
        );
        for (col, value) in columns.iter_mut().zip(record.iter()) {
            col.push(value.to_string());
        }
    }
    let found = columns.first().map_or(0, Vec::len);
    if found != manifest.rows {
        return Err(BundleError::new(
            path,
            format!(
                "row-count mismatch: {found} data rows but the manifest (and the embeddings) have {}",
                manifest.rows
            ),
        ));
    }
    assert_eq!(names.len(), columns.len());
    let columns: Vec<(String, Vec<String>)> = names.into_iter().zip(columns).collect();
    let column = |name: &str| columns.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_slice());
    for (name, listed) in
        [("model", &manifest.models), ("language", &manifest.languages), ("culture", &manifest.cultures)]
    {
        let values = column(name).expect("required columns were checked");
        if let Some(row) = values.iter().position(|v| v.trim().is_empty()) {
            return Err(BundleError::new(path, "empty value").row(row).column(name));
        }
        let distinct: BTreeSet<&str> = values.iter().map(String::as_str).collect();
        if !distinct.iter().copied().eq(listed.iter().map(String::as_str)) {
            return Err(BundleError::new(
                MANIFEST,
                format!("`{name}s` does not match the distinct values of column `{name}` in {path}"),
            ));
        }
    }
    if let Some(thumbs) = column(THUMBNAIL_COLUMN) {
        for (row, t) in thumbs.iter().enumerate() {
            if !t.is_empty() && manifest.entry(t).is_err() {
                return Err(BundleError::new(path, format!("thumbnail `{t}` is not listed in the manifest"))
                    .row(row)
                    .column(THUMBNAIL_COLUMN));
            }
        }
    }
    Ok(columns)
}

/// Reads a whole bundle through `fetch(path) -> bytes` (file system, HTTP or in-memory): manifest,
/// checksums, embeddings and metadata. Thumbnails are not fetched (the app loads them lazily).
pub fn read_bundle(
    mut fetch: impl FnMut(&str) -> Result<Vec<u8>, BundleError>,
) -> Result<Bundle, BundleError> {
    let manifest = Manifest::parse(&fetch(MANIFEST)?)?;
    let emb_bytes = fetch(&manifest.embeddings)?;
    check_file(&manifest, &manifest.embeddings, &emb_bytes)?;
    let meta_bytes = fetch(&manifest.metadata)?;
    check_file(&manifest, &manifest.metadata, &meta_bytes)?;
    let columns = parse_metadata(&manifest, &meta_bytes)?;
    let embeddings = decode_embeddings(&manifest, &emb_bytes)?;
    Ok(Bundle { manifest, embeddings, columns })
}
