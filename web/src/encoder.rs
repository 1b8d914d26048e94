//! Loading an encoder in the page: a transformers-layout CLIP or SigLIP folder (or an OpenCLIP
//! one) fetched from a URL (`…/resolve/main/` of a hub repository, or any static folder that
//! allows CORS) or picked from disk, read by the same loader as the CLI
//! (`culturelens_models_io::Encoder::from_folder`, on files held in memory) onto the page's
//! compute device (WebGPU, or the CPU fallback).
//!
//! Before any weights are downloaded, the page reads the small files (the config, checked to
//! build a supported model; the image processor; the tokenizer) and only the header of each
//! safetensors file (a ranged read of its first 8 bytes and then of the header JSON), and refuses
//! a model whose largest tensor does not fit the adapter's largest buffer (`maxBufferSize` and
//! `maxStorageBufferBindingSize`) or whose download and conversion would not fit the page's
//! memory (`culturelens_models_io::limits`). The weights then stream in with a progress bar
//! (bytes, time left). Every fetched file is kept in Cache Storage (`culturelens-models-v1`, keyed
//! by URL), so a reload, or the next lesson, reads the model from the browser's cache without
//! downloading it again. Nothing is uploaded anywhere.
//!
//! The encoder runs in f32, or in f16 (`?precision=`, [`Precision`]): `auto` takes f16 where the
//! WebGPU adapter has `shader-f16` and f32 elsewhere (the CPU fallback, SwiftShader); `f16` asks
//! for it on the CPU fallback too (Burn's `flex` has f16 kernels), and on an adapter without
//! `shader-f16` falls back to f32 with a notice on the page. In f16 the weights are converted at
//! load, one tensor at a time, by the loader's own conversion (`Encoder::from_folder_in`, the
//! checkpoint's float type, as the CLI's `--precision f16`), so the device holds half the bytes
//! (the size check counts 2 bytes a weight); the page's tables stay in f32 on the same device.

use std::collections::BTreeMap;
use std::path::Path;

use burn::tensor::FloatDType;
use culturelens_models::{EncoderModel, Towers};
use culturelens_models_io::folder::{Files, Folder, shard_names};
use culturelens_models_io::limits::{Needs, Summary, header_len};
use culturelens_models_io::{Encoder, LoadError};
use js_sys::{Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{File, Response};

use crate::compute::{Backend, Compute};
use crate::dom;
use crate::load::js_error;

/// The Cache Storage cache of fetched model files.
const CACHE: &str = "culturelens-models-v1";
/// The most memory a model may take in the page: wasm32 addresses 4 GiB, and the page also
/// holds the table, the views and the model's own device copy on the CPU backend.
pub const MAX_HOST_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// The small files a folder may have besides its weights (read when present).
const SMALL_FILES: [&str; 5] =
    ["config.json", "open_clip_config.json", "preprocessor_config.json", "tokenizer.json", "spiece.model"];

/// The float type the encoder computes in, as asked for (`?precision=f16|f32|auto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    Auto,
    F32,
    F16,
}

impl Precision {
    /// The value of `?precision=` (none or empty: auto).
    pub fn parse(text: Option<&str>) -> Result<Precision, String> {
        match text.map(str::trim).unwrap_or("") {
            "" | "auto" => Ok(Precision::Auto),
            "f32" => Ok(Precision::F32),
            "f16" => Ok(Precision::F16),
            other => Err(format!("?precision={other}: expected f16, f32 or auto")),
        }
    }

    /// The float type the encoder runs in on `compute`, with a notice where it is not the one
    /// asked for: `auto` is f16 on a WebGPU adapter with `shader-f16` and f32 elsewhere; `f16`
    /// on a device without f16 arithmetic (a WebGPU adapter without `shader-f16`) runs in f32,
    /// and says so, rather than stopping the lesson.
    pub fn choose(self, compute: &Compute) -> (FloatDType, Option<String>) {
        let has_f16 = compute.device.supports_dtype(FloatDType::F16);
        match self {
            Precision::F32 => (FloatDType::F32, None),
            Precision::Auto if has_f16 && compute.backend == Backend::WebGpu => (FloatDType::F16, None),
            Precision::Auto => (FloatDType::F32, None),
            Precision::F16 if has_f16 => (FloatDType::F16, None),
            Precision::F16 => (
                FloatDType::F32,
                Some(format!(
                    "f16 was asked for (precision=f16), but this WebGPU adapter ({}) has no shader-f16: \
                     the model runs in f32",
                    compute.adapter
                )),
            ),
        }
    }
}

/// The name the page shows for a float type (`f16`, `f32`).
pub fn dtype_name(dtype: FloatDType) -> &'static str {
    match dtype {
        FloatDType::F16 => "f16",
        FloatDType::BF16 => "bf16",
        FloatDType::F64 => "f64",
        _ => "f32",
    }
}

/// Where a model comes from.
pub enum ModelSource {
    /// A folder URL (ending in `/` or not).
    Url(String),
    /// Files picked or dropped from a folder on disk.
    Files(Vec<File>),
}

/// A loaded encoder and what the page says about it.
pub struct LoadedEncoder {
    pub encoder: Encoder,
    /// Short name: the folder's last path part (`clip`, `siglip-base-patch16-224`).
    pub label: String,
    /// The URL it came from (kept in `?encoder=`), if any.
    pub url: Option<String>,
    /// Bytes of weights read, and how many of them came from the browser's cache.
    pub weight_bytes: u64,
    pub cached_bytes: u64,
}

/// Loads the folder `source` onto `compute`'s device, its weights in `dtype`.
pub async fn load(
    source: ModelSource,
    compute: &Compute,
    dtype: FloatDType,
) -> Result<LoadedEncoder, String> {
    match source {
        ModelSource::Url(url) => load_url(&url, compute, dtype).await,
        ModelSource::Files(files) => load_files(files, compute, dtype).await,
    }
}

/// The folder's name from a URL or path: the last non-empty part before `resolve/<rev>/`.
pub fn label_of(base: &str) -> String {
    let parts: Vec<&str> =
        base.split(['?', '#']).next().unwrap_or(base).split('/').filter(|p| !p.is_empty()).collect();
    let end = parts.iter().rposition(|p| *p == "resolve").unwrap_or(parts.len());
    parts[..end].last().map_or_else(|| "model".to_string(), |p| p.to_string())
}

/// The first check, before any weights are read: the config builds a supported encoder with a
/// text and an image tower (a transformers folder), or the folder is an OpenCLIP one.
fn check_config(folder: &Files, compute: &Compute) -> Result<(), String> {
    if folder.has("config.json") {
        let config = folder.read_string("config.json").map_err(|e| e.to_string())?;
        let model = EncoderModel::from_config(&config, &compute.device)
            .map_err(|e| format!("{}: {e}", folder.path("config.json").display()))?;
        if !matches!(model, EncoderModel::Clip(_) | EncoderModel::Siglip(_)) {
            return Err(format!(
                "{}: a {} model; the classroom lens runs CLIP and SigLIP (a text and an image tower)",
                folder.path("config.json").display(),
                model.family()
            ));
        }
        Ok(())
    } else if folder.has("open_clip_config.json") {
        Ok(())
    } else {
        Err(format!(
            "{}: no config.json (nor open_clip_config.json): not a transformers or OpenCLIP model folder",
            folder.base
        ))
    }
}

/// The second check, from the safetensors headers alone: the weights, in `dtype`, fit the
/// device's largest buffer and the page's memory.
fn check_sizes(summary: &Summary, compute: &Compute, dtype: FloatDType) -> Result<(), String> {
    let float_bytes = if dtype == FloatDType::F32 { 4 } else { 2 };
    let needs = Needs::of(summary, float_bytes);
    needs.check(summary, compute.max_buffer_bytes, MAX_HOST_BYTES)?;
    dom::set_body_attr("data-encoder-needs", &needs.device.to_string());
    Ok(())
}

/// The weight files of the folder (`model.safetensors`, the index's shards, or OpenCLIP's).
fn weight_names(folder: &Files, index: Option<&[u8]>) -> Result<Vec<String>, String> {
    if folder.has("open_clip_config.json") && !folder.has("config.json") {
        return Ok(vec!["open_clip_model.safetensors".into()]);
    }
    match index {
        Some(bytes) => {
            let path = folder.path("model.safetensors.index.json");
            shard_names(bytes, &path).map_err(|e| e.to_string())
        }
        None => Ok(vec!["model.safetensors".into()]),
    }
}

fn build(folder: &Files, compute: &Compute, dtype: FloatDType) -> Result<Encoder, String> {
    Encoder::from_folder_in(folder, &compute.device, dtype, Towers::Both).map_err(|e: LoadError| e.to_string())
}

async fn load_url(address: &str, compute: &Compute, dtype: FloatDType) -> Result<LoadedEncoder, String> {
    let page = dom::window().location().href().map_err(|_| "no page URL")?;
    let url = web_sys::Url::new_with_base(address, &page).map_err(|_| format!("not a URL: {address}"))?;
    let href = url.href();
    let base = if href.ends_with('/') { href } else { format!("{href}/") };
    let cache = open_cache().await;
    let mut folder = Files { base: base.clone(), files: BTreeMap::new() };
    for name in SMALL_FILES {
        let needed = match name {
            "open_clip_config.json" => !folder.has("config.json"),
            "spiece.model" => !folder.has("tokenizer.json") && !folder.has("open_clip_config.json"),
            _ => true,
        };
        if needed && let Some(bytes) = get(&cache, &format!("{base}{name}"), true).await? {
            folder.files.insert(name.to_string(), bytes);
        }
    }
    check_config(&folder, compute)?;
    // Weights: the single file, else the index's shards; headers first.
    let single = format!("{base}model.safetensors");
    let mut index = None;
    let mut headers = Vec::new();
    if folder.has("open_clip_config.json") && !folder.has("config.json") {
        headers.push(header(&cache, &format!("{base}open_clip_model.safetensors")).await?);
    } else {
        match header_optional(&cache, &single).await? {
            Some(h) => headers.push(h),
            None => {
                let index_url = format!("{base}model.safetensors.index.json");
                let bytes = get(&cache, &index_url, true).await?.ok_or_else(|| {
                    format!("{base}: no model.safetensors nor model.safetensors.index.json (only safetensors weights are read)")
                })?;
                index = Some(bytes);
            }
        }
    }
    let names = weight_names(&folder, index.as_deref())?;
    if headers.is_empty() {
        for name in &names {
            headers.push(header(&cache, &format!("{base}{name}")).await?);
        }
    }
    let summary = headers.iter().fold(Summary::default(), |s, (h, _)| s.join(h.clone()));
    check_sizes(&summary, compute, dtype)?;
    let total: u64 = headers.iter().map(|(_, size)| size).sum();
    let mut done = 0u64;
    let mut cached_bytes = 0u64;
    let started = dom::now_ms();
    for (name, (_, size)) in names.iter().zip(&headers) {
        let url = format!("{base}{name}");
        let (bytes, from_cache) = download(&cache, &url, done, *size, total, started).await?;
        if from_cache {
            cached_bytes += bytes.len() as u64;
        }
        done += bytes.len() as u64;
        folder.files.insert(name.clone(), bytes);
    }
    if let Some(bytes) = index {
        folder.files.insert("model.safetensors.index.json".into(), bytes);
    }
    dom::status("building the model on the device…");
    dom::yield_to_browser().await;
    let encoder = build(&folder, compute, dtype)?;
    Ok(LoadedEncoder {
        encoder,
        label: label_of(&base),
        url: Some(address.to_string()),
        weight_bytes: done,
        cached_bytes,
    })
}

async fn load_files(files: Vec<File>, compute: &Compute, dtype: FloatDType) -> Result<LoadedEncoder, String> {
    let mut by_name: BTreeMap<String, File> = BTreeMap::new();
    let mut dir = String::new();
    for f in files {
        let rel = Reflect::get(&f, &"webkitRelativePath".into())
            .ok()
            .and_then(|v| v.as_string())
            .unwrap_or_default();
        let name = match rel.split_once('/') {
            Some((d, rest)) if !rest.is_empty() => {
                dir = d.to_string();
                rest.to_string()
            }
            _ => f.name(),
        };
        by_name.insert(name, f);
    }
    let base = if dir.is_empty() { "chosen files/".to_string() } else { format!("{dir}/") };
    let mut folder = Files { base: base.clone(), files: BTreeMap::new() };
    for name in SMALL_FILES {
        if let Some(f) = by_name.get(name) {
            folder.files.insert(name.to_string(), read_file(f, 0, f.size() as u64).await?);
        }
    }
    check_config(&folder, compute)?;
    let index = match by_name.get("model.safetensors.index.json") {
        Some(f) if !by_name.contains_key("model.safetensors") => {
            Some(read_file(f, 0, f.size() as u64).await?)
        }
        _ => None,
    };
    let names = weight_names(&folder, index.as_deref())?;
    let mut summary = Summary::default();
    for name in &names {
        let f = by_name.get(name).ok_or_else(|| {
            format!("{base}{name} is missing among the chosen files (only safetensors weights are read)")
        })?;
        let path = folder.path(name);
        let first = read_file(f, 0, 8).await?;
        let n = header_len(&first, &path).map_err(|e| e.to_string())?;
        let json = read_file(f, 8, 8 + n).await?;
        summary = summary.join(Summary::of_header(&json, &path).map_err(|e| e.to_string())?);
    }
    check_sizes(&summary, compute, dtype)?;
    let total: u64 = names.iter().map(|n| by_name[n].size() as u64).sum();
    let mut done = 0u64;
    let started = dom::now_ms();
    for name in &names {
        let f = &by_name[name];
        dom::progress_eta("reading the model", done, total, started);
        let bytes = read_file(f, 0, f.size() as u64).await?;
        done += bytes.len() as u64;
        folder.files.insert(name.clone(), bytes);
    }
    if let Some(bytes) = index {
        folder.files.insert("model.safetensors.index.json".into(), bytes);
    }
    dom::status("building the model on the device…");
    dom::yield_to_browser().await;
    let encoder = build(&folder, compute, dtype)?;
    Ok(LoadedEncoder { encoder, label: label_of(&base), url: None, weight_bytes: done, cached_bytes: 0 })
}

/// Bytes `start..end` of a local file.
async fn read_file(f: &File, start: u64, end: u64) -> Result<Vec<u8>, String> {
    let blob = f.slice_with_f64_and_f64(start as f64, end as f64).map_err(|e| js_error(&e))?;
    let buffer =
        JsFuture::from(blob.array_buffer()).await.map_err(|e| format!("{}: {}", f.name(), js_error(&e)))?;
    Ok(Uint8Array::new(&buffer).to_vec())
}

/// The page's Cache Storage cache of model files (`caches.open`), as a JS object; none where the
/// browser offers none (a page not served over https or from localhost).
async fn open_cache() -> Option<Cache> {
    let caches = Reflect::get(&dom::window(), &"caches".into()).ok().filter(|c| !c.is_undefined())?;
    let cache = JsFuture::from(call(&caches, "open", &[CACHE.into()])?).await.ok()?;
    Some(Cache(cache))
}

/// A Cache Storage cache (`Cache`), reached through its JS methods.
pub struct Cache(JsValue);

/// `target.method(args…)` when it returns a promise.
fn call(target: &JsValue, method: &str, args: &[JsValue]) -> Option<js_sys::Promise> {
    let f: js_sys::Function = Reflect::get(target, &method.into()).ok()?.dyn_into().ok()?;
    let args: js_sys::Array = args.iter().collect();
    f.apply(target, &args).ok()?.dyn_into().ok()
}

async fn cached(cache: &Option<Cache>, url: &str) -> Option<Vec<u8>> {
    let cache = cache.as_ref()?;
    let hit = JsFuture::from(call(&cache.0, "match", &[url.into()])?).await.ok()?;
    let response: Response = hit.dyn_into().ok()?;
    let buffer = JsFuture::from(response.array_buffer().ok()?).await.ok()?;
    Some(Uint8Array::new(&buffer).to_vec())
}

async fn store(cache: &Option<Cache>, url: &str, bytes: &[u8]) {
    let Some(cache) = cache else { return };
    let body = Uint8Array::from(bytes);
    if let Ok(response) = Response::new_with_opt_buffer_source(Some(&body))
        && let Some(put) = call(&cache.0, "put", &[url.into(), response.into()])
    {
        // A full cache (quota) only means the next visit downloads again.
        let _ = JsFuture::from(put).await;
    }
}

async fn fetch(url: &str, range: Option<(u64, u64)>) -> Result<Response, String> {
    let init = js_sys::Object::new();
    if let Some((start, end)) = range {
        let headers = web_sys::Headers::new().map_err(|e| js_error(&e))?;
        headers.set("Range", &format!("bytes={start}-{}", end - 1)).map_err(|e| js_error(&e))?;
        Reflect::set(&init, &"headers".into(), &headers).map_err(|e| js_error(&e))?;
    }
    let promise = call(&dom::window(), "fetch", &[url.into(), init.into()])
        .ok_or_else(|| format!("cannot fetch {url}: no fetch"))?;
    let response =
        JsFuture::from(promise).await.map_err(|e| format!("cannot fetch {url}: {}", js_error(&e)))?;
    response.dyn_into().map_err(|_| format!("{url}: not a response"))
}

/// A small file from the cache or the network (`optional`: a 404 is `None`).
async fn get(cache: &Option<Cache>, url: &str, optional: bool) -> Result<Option<Vec<u8>>, String> {
    if let Some(bytes) = cached(cache, url).await {
        return Ok(Some(bytes));
    }
    let response = fetch(url, None).await?;
    if optional && response.status() == 404 {
        return Ok(None);
    }
    if !response.ok() {
        return Err(format!("cannot fetch {url}: HTTP {} {}", response.status(), response.status_text()));
    }
    let buffer = JsFuture::from(response.array_buffer().map_err(|e| js_error(&e))?)
        .await
        .map_err(|e| format!("{url}: {}", js_error(&e)))?;
    let bytes = Uint8Array::new(&buffer).to_vec();
    store(cache, url, &bytes).await;
    Ok(Some(bytes))
}

/// Bytes `start..end` of `url` by a ranged request (a server that ignores the range sends the
/// whole file: then only the bytes asked for are read, and the rest of the stream is dropped).
async fn range(url: &str, start: u64, end: u64, optional: bool) -> Result<Option<Vec<u8>>, String> {
    let response = fetch(url, Some((start, end))).await?;
    if optional && response.status() == 404 {
        return Ok(None);
    }
    if !response.ok() {
        return Err(format!("cannot fetch {url}: HTTP {} {}", response.status(), response.status_text()));
    }
    let skip = if response.status() == 206 { 0 } else { start };
    let body = response.body().ok_or_else(|| format!("{url}: empty response"))?;
    let reader: web_sys::ReadableStreamDefaultReader = body.get_reader().unchecked_into();
    let want = (end - start) as usize;
    let mut out = Vec::with_capacity(want);
    let mut seen = 0u64;
    while out.len() < want {
        let chunk = JsFuture::from(reader.read()).await.map_err(|e| format!("{url}: {}", js_error(&e)))?;
        if Reflect::get(&chunk, &"done".into()).ok().and_then(|v| v.as_bool()).unwrap_or(true) {
            break;
        }
        let value: Uint8Array =
            Reflect::get(&chunk, &"value".into()).map_err(|e| js_error(&e))?.unchecked_into();
        let bytes = value.to_vec();
        let from = skip.saturating_sub(seen).min(bytes.len() as u64) as usize;
        seen += bytes.len() as u64;
        let take = (want - out.len()).min(bytes.len() - from);
        out.extend_from_slice(&bytes[from..from + take]);
    }
    let _ = reader.cancel();
    Ok(Some(out))
}

/// The header summary of the safetensors file at `url` and the file's size (from the cached
/// file, or two ranged reads: the length, then the JSON); `None` when the server has no such
/// file.
async fn header_optional(cache: &Option<Cache>, url: &str) -> Result<Option<(Summary, u64)>, String> {
    let path = Path::new(url);
    let with_size = |n: u64, s: Summary| {
        let size = 8 + n + s.data_bytes;
        (s, size)
    };
    if let Some(bytes) = cached(cache, url).await {
        let n = header_len(&bytes, path).map_err(|e| e.to_string())?;
        let json = bytes.get(8..8 + n as usize).ok_or_else(|| format!("{url}: shorter than its header"))?;
        let summary = Summary::of_header(json, path).map_err(|e| e.to_string())?;
        return Ok(Some(with_size(n, summary)));
    }
    let Some(first) = range(url, 0, 8, true).await? else { return Ok(None) };
    let n = header_len(&first, path).map_err(|e| e.to_string())?;
    let json = range(url, 8, 8 + n, false).await?.unwrap_or_default();
    if json.len() as u64 != n {
        return Err(format!("{url}: ends inside its {n}-byte header"));
    }
    let summary = Summary::of_header(&json, path).map_err(|e| e.to_string())?;
    Ok(Some(with_size(n, summary)))
}

async fn header(cache: &Option<Cache>, url: &str) -> Result<(Summary, u64), String> {
    header_optional(cache, url).await?.ok_or_else(|| format!("cannot fetch {url}: HTTP 404"))
}

/// The file at `url` (of `size` bytes, as its header says), from the cache or streamed from the
/// network with progress (`done` of `total` bytes so far, since `started`), then cached; and
/// whether it came from the cache.
async fn download(
    cache: &Option<Cache>,
    url: &str,
    done: u64,
    size: u64,
    total: u64,
    started: f64,
) -> Result<(Vec<u8>, bool), String> {
    if let Some(bytes) = cached(cache, url).await {
        dom::progress_eta(
            "reading the model from the browser's cache",
            done + bytes.len() as u64,
            total,
            started,
        );
        return Ok((bytes, true));
    }
    let response = fetch(url, None).await?;
    if !response.ok() {
        return Err(format!("cannot fetch {url}: HTTP {} {}", response.status(), response.status_text()));
    }
    let body = response.body().ok_or_else(|| format!("{url}: empty response"))?;
    let reader: web_sys::ReadableStreamDefaultReader = body.get_reader().unchecked_into();
    let mut bytes = Vec::new();
    let mut next = 0u64;
    loop {
        let chunk = JsFuture::from(reader.read()).await.map_err(|e| format!("{url}: {}", js_error(&e)))?;
        if Reflect::get(&chunk, &"done".into()).ok().and_then(|v| v.as_bool()).unwrap_or(true) {
            break;
        }
        let value: Uint8Array =
            Reflect::get(&chunk, &"value".into()).map_err(|e| js_error(&e))?.unchecked_into();
        let start = bytes.len();
        bytes.resize(start + value.length() as usize, 0);
        value.copy_to(&mut bytes[start..]);
        if bytes.len() as u64 > size {
            let _ = reader.cancel();
            return Err(format!("{url}: larger than its safetensors header says (a wrong or changed file)"));
        }
        if bytes.len() as u64 >= next {
            dom::progress_eta("downloading the model", done + bytes.len() as u64, total, started);
            next = bytes.len() as u64 + (total / 100).max(1 << 16);
        }
    }
    store(cache, url, &bytes).await;
    Ok((bytes, false))
}
