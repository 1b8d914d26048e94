//! Loading a bundle in the page: the built-in demo (built in memory by the same writer as
//! `culturelens demo-bundle`), a served bundle (`?bundle=URL`, streamed with progress) or local
//! files (picker or drag-and-drop). Every path ends in the shared `culturelens-bundle` checks:
//! manifest validation, size + SHA-256 of each file, embedding and metadata validation.

use std::collections::HashMap;

use culturelens_bundle::{
    BundleError, MANIFEST, Manifest, build_bundle, check_file, decode_embeddings, demo_spec, parse_metadata,
    read_bundle,
};
use js_sys::{Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{File, ReadableStream, ReadableStreamDefaultReader, Response};

use crate::dom;

/// Largest embeddings + metadata download the app accepts (wasm32 has a 4 GiB address space and
/// the decoded f32 copy must fit beside the download).
pub const MAX_BUNDLE_BYTES: u64 = 1536 * 1024 * 1024;
/// Largest manifest accepted.
const MAX_MANIFEST_BYTES: u64 = 16 * 1024 * 1024;
/// Most memory reserved ahead of a download (beyond it the buffer grows as the bytes arrive).
const PREALLOCATE_BYTES: u64 = 256 * 1024 * 1024;

/// Where a bundle comes from.
pub enum Source {
    Demo,
    Url(String),
    Files(Vec<File>),
}

/// How the app reaches a bundle's thumbnails.
#[derive(Clone)]
pub enum Thumbs {
    None,
    /// Base URL of a served bundle (with trailing slash).
    Url(String),
    /// Local files by bundle path.
    Files(HashMap<String, File>),
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
}

pub async fn load(source: Source) -> Result<Loaded, String> {
    match source {
        Source::Demo => load_demo(),
        Source::Url(url) => load_url(&url).await,
        Source::Files(files) => load_files(files).await,
    }
}

/// The built-in demo: `culturelens_core::demo::demo_table()` written by the bundle writer and read
/// back by the bundle reader, byte-identical to `culturelens demo-bundle`.
fn load_demo() -> Result<Loaded, String> {
    let demo = culturelens_core::demo::demo_table();
    let files = build_bundle(&demo_spec(), &demo.embeddings, demo.dim, &demo.columns, Vec::new())
        .map_err(|e| e.to_string())?;
    let bundle = read_bundle(|path| {
        files
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, b)| b.clone())
            .ok_or_else(|| BundleError::new(path, "missing"))
    })
    .map_err(|e| e.to_string())?;
    Ok(Loaded {
        manifest: bundle.manifest,
        embeddings: bundle.embeddings,
        columns: bundle.columns,
        thumbs: Thumbs::None,
        source_label: "built-in demo".to_string(),
    })
}

fn check_size(manifest: &Manifest) -> Result<u64, String> {
    let size = |p: &str| manifest.entry(p).map(|e| e.bytes).map_err(|e| e.to_string());
    let total = size(&manifest.embeddings)? + size(&manifest.metadata)?;
    if total > MAX_BUNDLE_BYTES {
        return Err(format!(
            "bundle too large for the browser: embeddings + metadata are {} (limit {}); use `culturelens bundle --dtype f16` or a subset, or the CLI",
            dom::mib(total),
            dom::mib(MAX_BUNDLE_BYTES)
        ));
    }
    Ok(total)
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
    let manifest_bytes =
        read_stream(body(&response, &manifest_url)?, MAX_MANIFEST_BYTES, None, MANIFEST, &mut |_| ()).await?;
    let manifest = Manifest::parse(&manifest_bytes).map_err(|e| e.to_string())?;
    let total = check_size(&manifest)?;
    let mut done = 0u64;
    let mut files = Vec::new();
    for path in [manifest.embeddings.clone(), manifest.metadata.clone()] {
        let expected = manifest.entry(&path).map_err(|e| e.to_string())?.bytes;
        let url = format!("{base}{path}");
        let response = fetch(&url).await?;
        let start = done;
        let bytes = read_stream(body(&response, &url)?, expected, Some(expected), &path, &mut |n| {
            dom::progress("downloading bundle", start + n, total)
        })
        .await?;
        done += expected;
        files.push((path, bytes));
    }
    finish(manifest, files, Thumbs::Url(base), address.to_string())
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
        read_stream(manifest_file.stream(), MAX_MANIFEST_BYTES, None, MANIFEST, &mut |_| ()).await?;
    let manifest = Manifest::parse(&manifest_bytes).map_err(|e| e.to_string())?;
    let total = check_size(&manifest)?;
    let mut done = 0u64;
    let mut loaded = Vec::new();
    for path in [manifest.embeddings.clone(), manifest.metadata.clone()] {
        let file = by_path
            .get(&path)
            .or_else(|| by_path.get(path.rsplit('/').next().unwrap_or(&path)))
            .ok_or_else(|| format!("bundle file {path} is missing among the chosen files"))?;
        let expected = manifest.entry(&path).map_err(|e| e.to_string())?.bytes;
        let start = done;
        let bytes = read_stream(file.stream(), expected, Some(expected), &path, &mut |n| {
            dom::progress("reading bundle", start + n, total)
        })
        .await?;
        done += expected;
        loaded.push((path, bytes));
    }
    finish(manifest, loaded, Thumbs::Files(by_path), "local files".to_string())
}

/// Checksums and decoding, shared by the URL and file paths.
fn finish(
    manifest: Manifest,
    files: Vec<(String, Vec<u8>)>,
    thumbs: Thumbs,
    source_label: String,
) -> Result<Loaded, String> {
    let get = |p: &str| &files.iter().find(|(q, _)| q == p).expect("fetched above").1;
    dom::status("verifying checksums…");
    let t0 = dom::now_ms();
    for (path, bytes) in &files {
        check_file(&manifest, path, bytes).map_err(|e| e.to_string())?;
    }
    let t1 = dom::now_ms();
    let columns = parse_metadata(&manifest, get(&manifest.metadata)).map_err(|e| e.to_string())?;
    let embeddings = decode_embeddings(&manifest, get(&manifest.embeddings)).map_err(|e| e.to_string())?;
    // Phase timings for tests/web/bench.mjs (the rest of data-load-ms is reading the files).
    dom::set_body_attr("data-verify-ms", &format!("{:.1}", t1 - t0));
    dom::set_body_attr("data-decode-ms", &format!("{:.1}", dom::now_ms() - t1));
    let has_thumbs = columns.iter().any(|(n, _)| n == culturelens_bundle::THUMBNAIL_COLUMN);
    Ok(Loaded {
        manifest,
        embeddings,
        columns,
        thumbs: if has_thumbs { thumbs } else { Thumbs::None },
        source_label,
    })
}

async fn fetch(url: &str) -> Result<Response, String> {
    let response = JsFuture::from(dom::window().fetch_with_str(url))
        .await
        .map_err(|e| format!("cannot fetch {url}: {}", js_error(&e)))?;
    let response: Response = response.dyn_into().map_err(|_| "fetch did not return a Response")?;
    if !response.ok() {
        return Err(format!("cannot fetch {url}: HTTP {} {}", response.status(), response.status_text()));
    }
    Ok(response)
}

fn body(response: &Response, url: &str) -> Result<ReadableStream, String> {
    response.body().ok_or_else(|| format!("{url}: empty response"))
}

/// Reads a stream into memory, failing as soon as it exceeds `limit` bytes; `exact` (when given)
/// must match the final size. Calls `progress(bytes so far)` about every 1% of `limit`.
async fn read_stream(
    stream: ReadableStream,
    limit: u64,
    exact: Option<u64>,
    file: &str,
    progress: &mut dyn FnMut(u64),
) -> Result<Vec<u8>, String> {
    let reader: ReadableStreamDefaultReader = stream.get_reader().unchecked_into();
    // Reserve what the manifest lists only up to PREALLOCATE_BYTES: a manifest that lies about a
    // size must not make the tab reserve memory for bytes that never arrive.
    let mut buf: Vec<u8> = Vec::with_capacity(exact.unwrap_or(0).min(PREALLOCATE_BYTES) as usize);
    let step = (limit / 100).max(1 << 16);
    let mut next_report = 0u64;
    loop {
        let chunk = JsFuture::from(reader.read())
            .await
            .map_err(|e| format!("{file}: read error: {}", js_error(&e)))?;
        if Reflect::get(&chunk, &"done".into()).ok().and_then(|v| v.as_bool()).unwrap_or(true) {
            break;
        }
        let value: Uint8Array = Reflect::get(&chunk, &"value".into())
            .map_err(|_| format!("{file}: bad stream chunk"))?
            .unchecked_into();
        let start = buf.len();
        let len = value.length() as usize;
        if (start + len) as u64 > limit {
            let _ = reader.cancel();
            return Err(match exact {
                Some(n) => format!(
                    "bundle file {file}: larger than the {n} bytes the manifest lists (oversized or wrong file)"
                ),
                None => format!("bundle file {file}: larger than {} (oversized)", dom::mib(limit)),
            });
        }
        buf.resize(start + len, 0);
        value.copy_to(&mut buf[start..]);
        if buf.len() as u64 >= next_report {
            progress(buf.len() as u64);
            next_report = buf.len() as u64 + step;
        }
    }
    progress(buf.len() as u64);
    Ok(buf)
}

pub fn js_error(e: &JsValue) -> String {
    e.as_string()
        .or_else(|| Reflect::get(e, &"message".into()).ok().and_then(|m| m.as_string()))
        .unwrap_or_else(|| format!("{e:?}"))
}
