//! Loading a bundle in the page: the built-in demo (built in memory by the same writer as
//! `culturelens demo-bundle`), a served bundle (`?bundle=URL`, streamed with progress) or local
//! files (picker or drag-and-drop). Every path ends in the shared `culturelens-bundle` checks:
//! manifest validation, size + SHA-256 of each file, embedding and metadata validation, and the
//! result tables the bundle carries (manifest field `results`), parsed for the result views.
//!
//! SHA-256 runs in the browser's native code, WebCrypto's `crypto.subtle.digest`, where the page
//! has it, on each piece of a file as soon as the piece has arrived (a large file's manifest entry
//! lists a digest per piece, `FileEntry::digests`), so that the hashing runs beside the download
//! instead of after it. Browsers expose SubtleCrypto only in secure contexts (https, or http from
//! localhost / 127.0.0.1): on a page served over plain http from another host the app hashes with
//! the `sha2` crate compiled to wasm instead, the same check about 20 times slower
//! (BENCHMARKS.md).
//! `<body data-digest>` says which one ran (`webcrypto` or `wasm`).

use std::collections::HashMap;
use std::ops::Range;

use culturelens_bundle::{
    BundleError, BundleSpec, FileEntry, MANIFEST, Manifest, TableStream, build_bundle, check_digest,
    check_size, decode_embeddings_words, demo_spec, parse_attributes, parse_cultext2i,
    parse_cultext2i_report, parse_magbig, parse_metadata, read_bundle, sha256_hex,
};
use culturelens_metrics::magbig::Gender;
use culturelens_results::cultext2i::{Cultext2iReport, Cultext2iRow};
use culturelens_results::magbig::{GENDER, MagbigRow};
use js_sys::{ArrayBuffer, Object, Promise, Reflect, Uint8Array};
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{File, ReadableStream, ReadableStreamDefaultReader, Response};

use crate::dom;

/// Largest embeddings + metadata download the app accepts (wasm32 has a 4 GiB address space and
/// the decoded f32 copy must fit beside the download).
pub const MAX_BUNDLE_BYTES: u64 = 1536 * 1024 * 1024;
/// Largest manifest accepted.
const MAX_MANIFEST_BYTES: u64 = 16 * 1024 * 1024;
/// Most memory reserved ahead of a download before that much has arrived (then the rest of the
/// listed size is reserved at once).
const PREALLOCATE_BYTES: u64 = 256 * 1024 * 1024;

/// Where a bundle comes from.
pub enum Source {
    Demo,
    Url(String),
    Files(Vec<File>),
    /// A table made in the page (the classroom lens's embeddings).
    Table(Box<Table>),
    /// A bundle already read and checked, extended in the page (the opened bundle with the
    /// classroom lens's photos added).
    Loaded(Box<Loaded>),
}

/// An embedding table made in the page, opened as the bundle the CLI's writer would make of it.
pub struct Table {
    pub spec: BundleSpec,
    pub embeddings: Vec<f32>,
    pub dim: usize,
    pub columns: Vec<(String, Vec<String>)>,
    /// Thumbnail files (path inside the bundle, bytes) and how the page shows them.
    pub thumbnails: Vec<(String, Vec<u8>)>,
    pub thumbs: Thumbs,
    pub source_label: String,
}

/// How the app reaches a bundle's thumbnails.
#[derive(Clone)]
pub enum Thumbs {
    None,
    /// Base URL of a served bundle (with trailing slash).
    Url(String),
    /// Local files by bundle path.
    Files(HashMap<String, File>),
    /// Local files by bundle path first, the rest as before (photos added to an opened bundle).
    Added(HashMap<String, File>, Box<Thumbs>),
}

impl Thumbs {
    /// URL of the thumbnail at bundle path `path`: under the served bundle, or an object URL of
    /// the local file (empty without thumbnails).
    pub fn url(&self, path: &str) -> String {
        match self {
            Thumbs::None => String::new(),
            Thumbs::Url(base) => format!("{base}{path}"),
            Thumbs::Files(files) => files
                .get(path)
                .and_then(|f| web_sys::Url::create_object_url_with_blob(f).ok())
                .unwrap_or_default(),
            Thumbs::Added(files, before) => match files.get(path) {
                Some(f) => web_sys::Url::create_object_url_with_blob(f).unwrap_or_default(),
                None => before.url(path),
            },
        }
    }
}

/// A loaded, validated bundle.
pub struct Loaded {
    pub manifest: Manifest,
    pub embeddings: Vec<f32>,
    pub columns: Vec<(String, Vec<String>)>,
    pub thumbs: Thumbs,
    pub source_label: String,
    pub results: Results,
}

/// The result tables a bundle carries (manifest field `results`), parsed.
#[derive(Default)]
pub struct Results {
    /// `culturelens magbig --out`.
    pub magbig: Option<Vec<MagbigRow>>,
    /// The attribute table behind it.
    pub attributes: Option<Attributes>,
    /// `culturelens cultext2i --out`.
    pub cultext2i: Option<Vec<Cultext2iRow>>,
    /// `culturelens cultext2i --report`.
    pub cultext2i_report: Option<Cultext2iReport>,
}

/// The MAGBIG attribute table: its columns, and each row's perceived gender read with the core's
/// parser (`Some(true)` male, `Some(false)` female, `None` unclassified).
pub struct Attributes {
    pub columns: Vec<(String, Vec<String>)>,
    pub is_male: Vec<Option<bool>>,
}

impl Attributes {
    pub fn column(&self, name: &str) -> Option<&[String]> {
        self.columns.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_slice())
    }
}

pub async fn load(source: Source) -> Result<Loaded, String> {
    match source {
        Source::Demo => load_demo(),
        Source::Url(url) => load_url(&url).await,
        Source::Files(files) => load_files(files).await,
        Source::Table(table) => {
            let Table { spec, embeddings, dim, columns, thumbnails, thumbs, source_label } = *table;
            in_memory(&spec, &embeddings, dim, &columns, thumbnails, thumbs, source_label)
        }
        Source::Loaded(loaded) => Ok(*loaded),
    }
}

/// The built-in demo: `culturelens_metrics::demo::demo_table()` written by the bundle writer and read
/// back by the bundle reader, byte-identical to `culturelens demo-bundle`.
fn load_demo() -> Result<Loaded, String> {
    let demo = culturelens_metrics::demo::demo_table();
    let label = "built-in demo".to_string();
    in_memory(&demo_spec(), &demo.embeddings, demo.dim, &demo.columns, Vec::new(), Thumbs::None, label)
}

/// A table written by the bundle writer (with `thumbnails`) and read back by the bundle reader in
/// memory (the checks of every bundle), shown with `thumbs` when it has a thumbnail column.
fn in_memory(
    spec: &BundleSpec,
    embeddings: &[f32],
    dim: usize,
    columns: &[(String, Vec<String>)],
    thumbnails: Vec<(String, Vec<u8>)>,
    thumbs: Thumbs,
    source_label: String,
) -> Result<Loaded, String> {
    let files = build_bundle(spec, embeddings, dim, columns, thumbnails).map_err(|e| e.to_string())?;
    let bundle = read_bundle(|path| {
        files
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, b)| b.clone())
            .ok_or_else(|| BundleError::new(path, "missing"))
    })
    .map_err(|e| e.to_string())?;
    let has_thumbs = bundle.columns.iter().any(|(n, _)| n == culturelens_bundle::THUMBNAIL_COLUMN);
    Ok(Loaded {
        manifest: bundle.manifest,
        embeddings: bundle.embeddings,
        columns: bundle.columns,
        thumbs: if has_thumbs { thumbs } else { Thumbs::None },
        source_label,
        results: Results::default(),
    })
}

/// The files the app downloads: embeddings, metadata and the result tables, with their total size
/// (refused beyond [`MAX_BUNDLE_BYTES`] for embeddings + metadata).
fn downloads(manifest: &Manifest) -> Result<(Vec<String>, u64), String> {
    let size = |p: &str| manifest.entry(p).map(|e| e.bytes).map_err(|e| e.to_string());
    let table = size(&manifest.embeddings)? + size(&manifest.metadata)?;
    if table > MAX_BUNDLE_BYTES {
        return Err(format!(
            "bundle too large for the browser: embeddings + metadata are {} (limit {}); use `culturelens bundle --dtype f16` or a subset, or the CLI",
            dom::mib(table),
            dom::mib(MAX_BUNDLE_BYTES)
        ));
    }
    let results: Vec<String> = manifest.results.paths().map(|(_, p)| p.to_string()).collect();
    let mut total = table;
    for p in &results {
        total += size(p)?;
    }
    let paths = [manifest.embeddings.clone(), manifest.metadata.clone()].into_iter().chain(results).collect();
    Ok((paths, total))
}

/// The decoder of bundle file `path` while it is read: the embeddings (f16 decoded, rows of
/// either dtype checked as they arrive).
fn decoded_while_read(manifest: &Manifest, path: &str) -> Option<TableStream> {
    (path == manifest.embeddings).then(|| TableStream::new(manifest))
}

/// Base URL (ending in `/`) and manifest URL of a bundle address (a directory or its manifest).
fn bundle_urls(address: &str) -> Result<(String, String), String> {
    let page = dom::window().location().href().map_err(|_| "no page URL")?;
    let url = web_sys::Url::new_with_base(address, &page).map_err(|_| format!("not a URL: {address}"))?;
    let href = url.href();
    if href.ends_with(".json") {
        let base = href[..href.rfind('/').map_or(0, |i| i + 1)].to_string();
        Ok((base, href))
    } else {
        let base = if href.ends_with('/') { href } else { format!("{href}/") };
        Ok((base.clone(), format!("{base}{MANIFEST}")))
    }
}

async fn load_url(address: &str) -> Result<Loaded, String> {
    let (base, manifest_url) = bundle_urls(address)?;
    let response = fetch(&manifest_url).await?;
    let manifest_bytes = read_stream(
        body(&response, &manifest_url)?,
        MAX_MANIFEST_BYTES,
        None,
        MANIFEST,
        &mut |_| (),
        None,
        None,
    )
    .await?;
    let manifest = Manifest::parse(manifest_bytes.bytes()).map_err(|e| e.to_string())?;
    let (paths, total) = downloads(&manifest)?;
    let subtle = digest_engine();
    let mut done = 0u64;
    let mut files = Vec::new();
    for path in paths {
        let entry = manifest.entry(&path).map_err(|e| e.to_string())?;
        let expected = entry.bytes;
        let url = format!("{base}{path}");
        let response = fetch(&url).await?;
        let start = done;
        let table = decoded_while_read(&manifest, &path);
        let bytes = read_stream(
            body(&response, &url)?,
            expected,
            Some(expected),
            &path,
            &mut |n| dom::progress("downloading bundle", start + n, total),
            table,
            Some(Hashes::new(entry, subtle.clone())),
        )
        .await?;
        done += expected;
        files.push((path, bytes));
    }
    finish(manifest, files, Thumbs::Url(base), address.to_string()).await
}

async fn load_files(files: Vec<File>) -> Result<Loaded, String> {
    // Key every file by its path inside the bundle: a folder pick gives `folder/thumbs/x.jpg`.
    let mut by_path: HashMap<String, File> = HashMap::new();
    for f in files {
        let rel = Reflect::get(&f, &"webkitRelativePath".into())
            .ok()
            .and_then(|v| v.as_string())
            .unwrap_or_default();
        let key = match rel.split_once('/') {
            Some((_, rest)) if !rest.is_empty() => rest.to_string(),
            _ => f.name(),
        };
        by_path.insert(key, f);
    }
    let manifest_file = by_path.get(MANIFEST).cloned().ok_or_else(|| {
        format!("no {MANIFEST} among the chosen files: choose the bundle folder or all of its files")
    })?;
    if manifest_file.size() as u64 > MAX_MANIFEST_BYTES {
        return Err(format!("{MANIFEST} is too large ({})", dom::mib(manifest_file.size() as u64)));
    }
    let manifest_bytes =
        read_stream(manifest_file.stream(), MAX_MANIFEST_BYTES, None, MANIFEST, &mut |_| (), None, None)
            .await?;
    let manifest = Manifest::parse(manifest_bytes.bytes()).map_err(|e| e.to_string())?;
    let (paths, total) = downloads(&manifest)?;
    let subtle = digest_engine();
    let mut done = 0u64;
    let mut loaded = Vec::new();
    for path in paths {
        let file = by_path
            .get(&path)
            .or_else(|| by_path.get(path.rsplit('/').next().unwrap_or(&path)))
            .ok_or_else(|| format!("bundle file {path} is missing among the chosen files"))?;
        let entry = manifest.entry(&path).map_err(|e| e.to_string())?;
        let expected = entry.bytes;
        let start = done;
        let table = decoded_while_read(&manifest, &path);
        let bytes = read_stream(
            file.stream(),
            expected,
            Some(expected),
            &path,
            &mut |n| dom::progress("reading bundle", start + n, total),
            table,
            Some(Hashes::new(entry, subtle.clone())),
        )
        .await?;
        done += expected;
        loaded.push((path, bytes));
    }
    finish(manifest, loaded, Thumbs::Files(by_path), "local files".to_string()).await
}

/// Checksums and decoding, shared by the URL and file paths.
///
/// Every piece's digest was started while the file was read ([`Hashes`]); with WebCrypto the
/// browser hashes them on its own thread, so all but the last pieces are done by now, and the
/// table is decoded here while the last ones finish. A file whose size or digest does not match
/// is reported before any parse or decode error (a corrupted download is named as such), and
/// nothing decoded is used before every digest has matched.
async fn finish(
    manifest: Manifest,
    mut files: Vec<(String, Download)>,
    thumbs: Thumbs,
    source_label: String,
) -> Result<Loaded, String> {
    dom::status("verifying checksums…");
    let mut digests = Vec::with_capacity(files.len());
    for (path, download) in &mut files {
        check_size(&manifest, path, download.len as u64).map_err(|e| e.to_string())?;
        digests.push((path.clone(), std::mem::take(&mut download.digests)));
    }
    let t1 = dom::now_ms();
    // The table leaves `files` to be decoded in place; WebCrypto has copied its bytes already.
    let at = files.iter().position(|(p, _)| *p == manifest.embeddings).expect("fetched above");
    let table = files.swap_remove(at).1;
    let get = |p: &str| files.iter().find(|(q, _)| q == p).map(|(_, b)| b.bytes());
    let decoded = decode(&manifest, table, get);
    let t2 = dom::now_ms();
    let count: usize = digests.iter().map(|(_, d)| d.len()).sum();
    for (path, digests) in digests {
        for (piece, digest) in digests.into_iter().enumerate() {
            let digest = match digest {
                Digest::Pending(promise) => {
                    webcrypto_hex(promise).await.map_err(|e| format!("{path}: {e}"))?
                }
                Digest::Done(hex) => hex,
            };
            check_digest(&manifest, &path, piece, &digest).map_err(|e| e.to_string())?;
        }
    }
    let t3 = dom::now_ms();
    let (columns, embeddings, results) = decoded?;
    // Phase timings for tests/web/bench.mjs: the wait for the digests after decoding (the hashing
    // the download and the decoding did not hide), and the decoding; the rest of data-load-ms is
    // reading the files, which starts the digests.
    dom::set_body_attr("data-verify-ms", &format!("{:.1}", t3 - t2));
    dom::set_body_attr("data-decode-ms", &format!("{:.1}", t2 - t1));
    dom::set_body_attr("data-digests", &count.to_string());
    let has_thumbs = columns.iter().any(|(n, _)| n == culturelens_bundle::THUMBNAIL_COLUMN);
    Ok(Loaded {
        manifest,
        embeddings,
        columns,
        thumbs: if has_thumbs { thumbs } else { Thumbs::None },
        source_label,
        results,
    })
}

/// A piece's SHA-256: still being computed by WebCrypto, or already known (the wasm hash).
enum Digest {
    Pending(js_sys::Promise),
    Done(String),
}

/// The SHA-256s of a file being read, one per piece of its manifest entry
/// ([`FileEntry::digests`]: the listed pieces, or the whole file as one), each started as soon
/// as its last byte has arrived.
struct Hashes {
    /// WebCrypto where the page has it; the wasm `sha2` otherwise.
    subtle: Option<web_sys::SubtleCrypto>,
    pieces: Vec<Range<u64>>,
    started: Vec<Digest>,
}

impl Hashes {
    fn new(entry: &FileEntry, subtle: Option<web_sys::SubtleCrypto>) -> Hashes {
        let pieces: Vec<_> = entry.digests().into_iter().map(|(range, _)| range).collect();
        Hashes { subtle, started: Vec::with_capacity(pieces.len()), pieces }
    }

    /// Starts the digest of every piece that lies wholly within `bytes`, the file so far.
    fn advance(&mut self, bytes: &[u8], file: &str) -> Result<(), String> {
        while let Some(range) = self.pieces.get(self.started.len()).filter(|r| r.end <= bytes.len() as u64) {
            let piece = &bytes[range.start as usize..range.end as usize];
            self.started.push(match &self.subtle {
                Some(subtle) => Digest::Pending(
                    start_webcrypto_sha256(subtle, piece).map_err(|e| format!("{file}: {e}"))?,
                ),
                None => Digest::Done(sha256_hex(piece)),
            });
        }
        Ok(())
    }
}

/// The metadata columns, the decoded table and the result tables of fetched bundle files.
type Decoded = (Vec<(String, Vec<String>)>, Vec<f32>, Results);

fn decode<'a>(
    manifest: &Manifest,
    table: Download,
    get: impl Fn(&str) -> Option<&'a [u8]>,
) -> Result<Decoded, String> {
    let metadata = get(&manifest.metadata).expect("fetched above");
    let columns = parse_metadata(manifest, metadata).map_err(|e| e.to_string())?;
    let embeddings = match table.table {
        Some(stream) => stream.finish(manifest, table.words, table.len),
        None => decode_embeddings_words(manifest, table.words, table.len),
    }
    .map_err(|e| e.to_string())?;
    let results = read_results(manifest, get).map_err(|e| e.to_string())?;
    Ok((columns, embeddings, results))
}

/// Parses the result tables the manifest lists (already fetched and checked); a perceived gender
/// other than `male`, `female` or empty is an error naming the file, row and column.
fn read_results<'a, 'm>(
    manifest: &'m Manifest,
    get: impl Fn(&str) -> Option<&'a [u8]>,
) -> Result<Results, BundleError> {
    let r = &manifest.results;
    let file = |path: Option<&'m str>| path.map(|p| (p, get(p).expect("fetched above")));
    let attributes = match file(r.magbig_attributes.as_deref()) {
        Some((path, bytes)) => {
            let columns = parse_attributes(path, bytes)?;
            let gender = &columns.iter().find(|(n, _)| n == GENDER).expect("a required column").1;
            let is_male = gender
                .iter()
                .enumerate()
                .map(|(row, g)| {
                    Gender::parse(g.trim())
                        .map(|g| g.map(|g| g == Gender::Male))
                        .map_err(|e| BundleError::new(path, e).row(row).column(GENDER))
                })
                .collect::<Result<_, _>>()?;
            Some(Attributes { columns, is_male })
        }
        None => None,
    };
    Ok(Results {
        magbig: file(r.magbig.as_deref()).map(|(p, b)| parse_magbig(p, b)).transpose()?,
        attributes,
        cultext2i: file(r.cultext2i.as_deref()).map(|(p, b)| parse_cultext2i(p, b)).transpose()?,
        cultext2i_report: file(r.cultext2i_report.as_deref())
            .map(|(p, b)| parse_cultext2i_report(p, b))
            .transpose()?,
    })
}

/// The page's `crypto.subtle` for the bundle's digests, where the browser offers it, and
/// `<body data-digest>` set to the engine that will hash (`webcrypto` or `wasm`).
fn digest_engine() -> Option<web_sys::SubtleCrypto> {
    let subtle = subtle_crypto();
    dom::set_body_attr("data-digest", if subtle.is_some() { "webcrypto" } else { "wasm" });
    subtle
}

/// The page's `crypto.subtle`, where the browser offers it (secure contexts only).
fn subtle_crypto() -> Option<web_sys::SubtleCrypto> {
    let crypto = Reflect::get(&dom::window(), &"crypto".into()).ok()?;
    let subtle = Reflect::get(&crypto, &"subtle".into()).ok()?;
    (!subtle.is_undefined() && !subtle.is_null()).then(|| subtle.unchecked_into())
}

/// Starts WebCrypto's SHA-256 of `bytes`. The digest copies the bytes when it is called
/// (WebCrypto spec, "get a copy of the bytes held by the buffer source"), so the view into wasm
/// memory is read before anything else runs, and the hashing goes on off the page's thread.
fn start_webcrypto_sha256(subtle: &web_sys::SubtleCrypto, bytes: &[u8]) -> Result<js_sys::Promise, String> {
    subtle
        .digest_with_str_and_u8_array("SHA-256", bytes)
        .map_err(|e| format!("WebCrypto digest failed: {}", js_error(&e)))
}

/// Lower-case hex of a finished WebCrypto digest.
async fn webcrypto_hex(promise: js_sys::Promise) -> Result<String, String> {
    let digest =
        JsFuture::from(promise).await.map_err(|e| format!("WebCrypto digest failed: {}", js_error(&e)))?;
    let digest = Uint8Array::new(&digest).to_vec();
    Ok(digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// A successful response for `url`; errors name the URL.
pub(crate) async fn fetch(url: &str) -> Result<Response, String> {
    let response = JsFuture::from(dom::window().fetch_with_str(url))
        .await
        .map_err(|e| format!("cannot fetch {url}: {}", js_error(&e)))?;
    let response: Response = response.dyn_into().map_err(|_| "fetch did not return a Response")?;
    if !response.ok() {
        return Err(format!("cannot fetch {url}: HTTP {} {}", response.status(), response.status_text()));
    }
    Ok(response)
}

/// The whole body of `url`, in memory (a small file: the lenses' vocabulary and prompt index).
pub(crate) async fn fetch_bytes(url: &str) -> Result<Vec<u8>, String> {
    let fail = |e: wasm_bindgen::JsValue| format!("cannot fetch {url}: {}", js_error(&e));
    let buffer = fetch(url).await?.array_buffer().map_err(fail)?;
    Ok(Uint8Array::new(&JsFuture::from(buffer).await.map_err(fail)?).to_vec())
}

fn body(response: &Response, url: &str) -> Result<ReadableStream, String> {
    response.body().ok_or_else(|| format!("{url}: empty response"))
}

/// A file read into memory: its bytes in 4-byte words (memory order, the last word zero-padded),
/// so that an f32 table can become the decoded table in place
/// ([`decode_embeddings_words`]) instead of being copied a second time; a table is decoded (f16)
/// and checked row by row as it arrives ([`TableStream`]), behind the network.
pub struct Download {
    words: Vec<u32>,
    len: usize,
    /// The embeddings table, decoded and checked while it was read.
    table: Option<TableStream>,
    /// The digests of the file's pieces, started while it was read ([`Hashes`]).
    digests: Vec<Digest>,
}

impl Download {
    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }
}

/// Reads a stream into memory, failing as soon as it exceeds `limit` bytes; `exact` (when given)
/// must match the final size. Calls `progress(bytes so far)` about every 1% of `limit`. Starts
/// the digest of each piece of `hashes` as soon as the piece has arrived.
#[allow(clippy::too_many_arguments)]
async fn read_stream(
    stream: ReadableStream,
    limit: u64,
    exact: Option<u64>,
    file: &str,
    progress: &mut dyn FnMut(u64),
    mut table: Option<TableStream>,
    mut hashes: Option<Hashes>,
) -> Result<Download, String> {
    let mut reader = Chunks::new(&stream);
    // Reserve what the manifest lists only up to PREALLOCATE_BYTES: a manifest that lies about a
    // size must not make the tab reserve memory for bytes that never arrive. Once that much has
    // arrived, the rest of the listed size is reserved in one step, so a large file moves at most
    // once instead of at every doubling of the buffer.
    let words_for = |bytes: u64| bytes.div_ceil(4) as usize;
    let mut words: Vec<u32> = Vec::with_capacity(words_for(exact.unwrap_or(0).min(PREALLOCATE_BYTES)));
    // An f16 table's values get their room by the same rule, in one allocation of their final
    // size: at once for a file listed within PREALLOCATE_BYTES, below with the rest of a larger one.
    if let (Some(table), Some(n)) = (&mut table, exact.filter(|&n| n <= PREALLOCATE_BYTES)) {
        table.reserve_for(n);
    }
    let mut len = 0usize;
    let step = (limit / 100).max(1 << 16);
    let mut next_report = 0u64;
    while let Some(value) =
        reader.next().await.map_err(|e| format!("{file}: read error: {}", js_error(&e)))?
    {
        let start = len;
        let got = value.length() as usize;
        if (start + got) as u64 > limit {
            reader.cancel();
            return Err(match exact {
                Some(n) => format!(
                    "bundle file {file}: larger than the {n} bytes the manifest lists (oversized or wrong file)"
                ),
                None => format!("bundle file {file}: larger than {} (oversized)", dom::mib(limit)),
            });
        }
        if let Some(n) = exact
            && words.capacity() < words_for((start + got) as u64)
            && start as u64 >= PREALLOCATE_BYTES
        {
            words.reserve_exact(words_for(n).saturating_sub(words.len()));
            if let Some(table) = &mut table {
                table.reserve_for(n);
            }
        }
        len = start + got;
        words.resize(words_for(len as u64), 0);
        value.copy_to(&mut bytemuck::cast_slice_mut(&mut words)[start..len]);
        if let Some(hashes) = &mut hashes {
            // First, so that WebCrypto hashes on its own thread while the page decodes.
            hashes.advance(&bytemuck::cast_slice(&words)[..len], file)?;
        }
        if let Some(table) = &mut table {
            // The complete words so far, decoded and checked while the next piece is on its way.
            table.advance(&words[..len / 4]);
        }
        if len as u64 >= next_report {
            progress(len as u64);
            next_report = len as u64 + step;
        }
    }
    progress(len as u64);
    // An empty file's one piece has arrived without a chunk.
    let digests = match hashes {
        Some(mut hashes) => {
            hashes.advance(&bytemuck::cast_slice(&words)[..len], file)?;
            hashes.started
        }
        None => Vec::new(),
    };
    Ok(Download { words, len, table, digests })
}

/// The least a read of [`Chunks`] waits for: a fetch body arrives in pieces of about 64 KiB, and
/// each read costs a promise, a round trip between JavaScript and wasm and a pass of the loop
/// (about 6,000 of them for the paper-scale table).
const READ_MIN_BYTES: u32 = 1 << 20;

/// The pieces of a stream as `Uint8Array`s: read into one reused buffer with a "bring your own
/// buffer" reader, each read waiting for at least [`READ_MIN_BYTES`] (the `min` option; the last
/// read of a stream gives what is left) where the stream is a byte stream (fetch bodies and files
/// in current browsers); the default reader's pieces otherwise. A browser that does not know
/// `min` ignores it, and its reads give what has arrived.
enum Chunks {
    Byob { reader: ByobReader, buffer: Option<ArrayBuffer>, done: bool },
    Default(ReadableStreamDefaultReader),
}

#[wasm_bindgen]
extern "C" {
    /// `ReadableStreamBYOBReader`, with `read`'s options argument (web-sys's binding has none).
    type ByobReader;
    #[wasm_bindgen(method)]
    fn read(this: &ByobReader, view: &Uint8Array, options: &Object) -> Promise;
    #[wasm_bindgen(method)]
    fn cancel(this: &ByobReader) -> Promise;
    /// A `ReadableStream`, for `getReader`'s options argument.
    type ByteStream;
    #[wasm_bindgen(method, catch, js_name = getReader)]
    fn get_reader_with(this: &ByteStream, options: &Object) -> Result<ByobReader, JsValue>;
}

impl Chunks {
    fn new(stream: &ReadableStream) -> Chunks {
        let options = Object::new();
        let _ = Reflect::set(&options, &"mode".into(), &"byob".into());
        match stream.unchecked_ref::<ByteStream>().get_reader_with(&options) {
            Ok(reader) => Chunks::Byob { reader, buffer: None, done: false },
            // Not a byte stream: that reader does not exist for it.
            Err(_) => Chunks::Default(stream.get_reader().unchecked_into()),
        }
    }

    /// The next piece, or `None` once the stream has ended.
    async fn next(&mut self) -> Result<Option<Uint8Array>, JsValue> {
        let result = match self {
            Chunks::Byob { done: true, .. } => return Ok(None),
            Chunks::Byob { reader, buffer, .. } => {
                // The buffer is handed to the stream (detached here) and comes back in the result.
                let buffer = buffer.take().unwrap_or_else(|| ArrayBuffer::new(READ_MIN_BYTES));
                let view = Uint8Array::new_with_byte_offset_and_length(&buffer, 0, READ_MIN_BYTES);
                let options = Object::new();
                Reflect::set(&options, &"min".into(), &READ_MIN_BYTES.into())?;
                JsFuture::from(reader.read(&view, &options)).await?
            }
            Chunks::Default(reader) => JsFuture::from(reader.read()).await?,
        };
        let value = Reflect::get(&result, &"value".into())?.dyn_into::<Uint8Array>().ok();
        if let (Chunks::Byob { buffer, .. }, Some(value)) = (&mut *self, &value) {
            *buffer = Some(value.buffer());
        }
        if Reflect::get(&result, &"done".into())?.as_bool().unwrap_or(true) {
            // A BYOB read still waiting for `min` bytes when the stream closes ends it with the
            // bytes it has: the last piece comes with `done`.
            if let Chunks::Byob { done, .. } = self {
                *done = true;
            }
            return Ok(value.filter(|v| v.length() > 0));
        }
        value.map(Some).ok_or_else(|| "a stream piece that is no Uint8Array".into())
    }

    fn cancel(&self) {
        let _ = match self {
            Chunks::Byob { reader, .. } => reader.cancel(),
            Chunks::Default(reader) => reader.cancel(),
        };
    }
}

pub fn js_error(e: &JsValue) -> String {
    e.as_string()
        .or_else(|| Reflect::get(e, &"message".into()).ok().and_then(|m| m.as_string()))
        .unwrap_or_else(|| format!("{e:?}"))
}
