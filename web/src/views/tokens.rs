//! The tokenizer lens (MAGBIG §5.1) in the browser: how each loaded tokenizer splits a prompt,
//! token by token, one row per tokenizer, side by side. It needs no bundle: the user loads
//! `tokenizer.json` files (file picker, drag and drop onto the lens, or `?tokenizers=URL,URL`
//! for files hosted beside the app) and types a prompt (`?text=`); `?lens=tokens` opens it.
//!
//! Tokenizing runs in wasm with the `tokenizers` crate, as `culturelens tokens` does natively
//! (special tokens included, no padding or truncation); the encoding is read by the same core
//! function, [`culturelens_metrics::tokens::lens`], so a chip shows exactly the CLI's token text.
//! Only `tokenizer.json` is read here (no `spiece.model`, and no open_clip text cleaning). With
//! nothing loaded the lens starts with CLIP's real tokenizer: the app ships open_clip's BPE
//! vocabulary beside it (`clip-bpe-16e6.txt.gz`, fetched when a lens opens) and builds
//! transformers' `CLIPTokenizer` from it with `culturelens_models_io::clip_bpe`.
//!
//! The lens keeps its own state (it lives outside the bundle's [`crate::state::App`]): its
//! handlers update the lens and its part of the URL themselves and return [`Update::Nothing`].

use std::cell::RefCell;

use culturelens_metrics::tokens::{self, Encoded, Scheme, TokenKind, TokenView};
use tokenizers::{ModelWrapper, Tokenizer};
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{DragEvent, Event, File, HtmlInputElement, HtmlTextAreaElement};

use super::{Handler, Listen};
use crate::dom::{self, esc};
use crate::state::{self, Update};

/// The prompt shown before the user types one: MAGBIG's gender-star example and a script
/// (Amharic) that many vocabularies lack.
const DEFAULT_TEXT: &str = "Die Jurist*innen ሀገር";
/// CLIP's real BPE vocabulary, shipped beside the app (open_clip 3.3.0's
/// `bpe_simple_vocab_16e6.txt.gz`, MIT; put there by `web/clip-vocab.sh` at build time).
const SHIPPED_VOCAB: &str = "clip-bpe-16e6.txt.gz";
/// Its row's label.
const SHIPPED_LABEL: &str = "CLIP";

/// One loaded tokenizer.
struct Loaded {
    label: String,
    /// Where it came from when that was a URL (kept in `?tokenizers=`).
    url: Option<String>,
    tok: Tokenizer,
    scheme: Scheme,
    model: &'static str,
}

#[derive(Default)]
struct Lens {
    loaded: Vec<Loaded>,
    text: String,
    errors: Vec<String>,
    /// Loads still running.
    pending: usize,
    /// Whether the shipped CLIP tokenizer was asked for.
    shipped: bool,
    /// What other views run once the shipped tokenizer has loaded (the classroom lens's token
    /// counts), registered through [`ensure_shipped`] so this view depends on none of them.
    on_shipped: Vec<fn()>,
}

thread_local! {
    static LENS: RefCell<Lens> = RefCell::new(Lens::default());
}

/// Builds the lens from the URL (`lens`, `text`, `tokenizers`) once the page starts.
pub fn start() {
    let p = state::params();
    let text = p.get("text").unwrap_or_else(|| DEFAULT_TEXT.to_string());
    let urls: Vec<String> = p
        .get("tokenizers")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(String::from)
        .collect();
    dom::set_html("view-tokens", &scaffold(&text));
    LENS.with(|l| l.borrow_mut().text = text);
    render();
    let open = p.get("lens").as_deref() == Some("tokens") || !urls.is_empty();
    set_open(open);
    if open {
        ensure_shipped(None);
    }
    if !urls.is_empty() {
        wasm_bindgen_futures::spawn_local(load_urls(urls));
    }
}

/// The lens's listeners (wired by the app with the other views').
pub fn handlers() -> Vec<Handler> {
    let on = |event: &'static str, run: fn(&Event) -> Update| Handler {
        on: Listen::Id("view-tokens"),
        event,
        run,
    };
    vec![
        Handler { on: Listen::Id("open-tokens"), event: "click", run: on_toggle },
        on("input", on_input),
        on("change", on_files),
        on("click", on_click),
        on("keydown", on_key),
        on("dragover", on_dragover),
        on("drop", on_drop),
    ]
}

/// The static part of the lens (controls, legend); the rows go into `#tokens-rows`.
fn scaffold(text: &str) -> String {
    format!(
        "<div class='lens-head'><h2 id='tokens-title'>Tokenizer lens</h2>\
         <button type='button' id='tokens-close'>Close the lens</button></div>\
         <p class='what'>How each text encoder's tokenizer splits a prompt, token by token (MAGBIG §5.1): \
         a gender star splits “Jurist*in” into stem, star and feminine suffix, and a script the vocabulary \
         lacks falls back to bytes or to the unknown token. One row per tokenizer, the same tokens as \
         <code>culturelens tokens</code>.</p>\
         <div class='lens-controls'>\
         <label for='tokens-text'>Prompt</label>\
         <textarea id='tokens-text' rows='2' spellcheck='false'>{}</textarea>\
         <label class='file'>tokenizer.json files <input id='tokens-files' type='file' accept='.json,application/json' multiple></label>\
         <label>tokenizer.json URL <input id='tokens-url' type='url' placeholder='https://…/tokenizer.json' size='28'></label>\
         <button type='button' id='tokens-add-url'>Add</button>\
         <span class='muted'>…or drop tokenizer.json files here.</span></div>\
         <p class='legend'><span class='chip k-text'>text</span> whole characters \
         <span class='chip k-text ws'><span class='ws-mark' aria-hidden='true'>▁</span>word</span> starts a word \
         <span class='chip k-text we'>word</span> ends a word \
         <span class='chip k-bytes'>&lt;E1&gt;</span> bytes of a character \
         <span class='chip k-special'>&lt;s&gt;</span> special \
         <span class='chip k-unknown'>&lt;unk&gt;</span> unknown. Hover or focus a token for its id.</p>\
         <div id='tokens-errors' role='alert'></div>\
         <p id='tokens-status' class='muted' role='status' aria-live='polite'></p>\
         <div id='tokens-rows'></div>",
        esc(text)
    )
}

fn set_open(open: bool) {
    dom::show("view-tokens", open);
    dom::by_id("open-tokens").set_attribute("aria-expanded", if open { "true" } else { "false" }).ok();
    let p = state::params();
    if (p.get("lens").as_deref() == Some("tokens")) == open {
        return;
    }
    if open {
        p.set("lens", "tokens");
    } else {
        p.delete("lens");
    }
    state::replace_params(&p);
}

fn on_toggle(_: &Event) -> Update {
    let open = dom::by_id("view-tokens").has_attribute("hidden");
    set_open(open);
    if open {
        ensure_shipped(None);
    }
    if open && let Ok(t) = dom::by_id("tokens-text").dyn_into::<web_sys::HtmlElement>() {
        t.focus().ok();
    }
    Update::Nothing
}

/// Typing the prompt: re-tokenizes at once and keeps the prompt in the URL (`text=`).
fn on_input(e: &Event) -> Update {
    let Some(area) = e.target().and_then(|t| t.dyn_into::<HtmlTextAreaElement>().ok()) else {
        return Update::Nothing;
    };
    let text = area.value();
    let p = state::params();
    p.set("text", &text);
    state::replace_params(&p);
    LENS.with(|l| l.borrow_mut().text = text);
    render();
    Update::Nothing
}

fn on_files(e: &Event) -> Update {
    let Some(input) = e.target().and_then(|t| t.dyn_into::<HtmlInputElement>().ok()) else {
        return Update::Nothing;
    };
    if input.id() != "tokens-files" {
        return Update::Nothing;
    }
    if let Some(list) = input.files() {
        let files: Vec<File> = (0..list.length()).filter_map(|i| list.get(i)).collect();
        wasm_bindgen_futures::spawn_local(load_files(files));
    }
    input.set_value("");
    Update::Nothing
}

fn on_click(e: &Event) -> Update {
    if let Some((_, index)) = dom::closest_data(e, "remove") {
        remove(index.parse().unwrap_or(usize::MAX));
        return Update::Nothing;
    }
    let id =
        e.target().and_then(|t| t.dyn_into::<web_sys::Element>().ok()).map(|t| t.id()).unwrap_or_default();
    match id.as_str() {
        "tokens-close" => {
            set_open(false);
            if let Ok(b) = dom::by_id("open-tokens").dyn_into::<web_sys::HtmlElement>() {
                b.focus().ok();
            }
        }
        "tokens-add-url" => add_url(),
        _ => {}
    }
    Update::Nothing
}

/// Enter in the URL field adds it.
fn on_key(e: &Event) -> Update {
    let enter = e.dyn_ref::<web_sys::KeyboardEvent>().is_some_and(|k| k.key() == "Enter");
    let in_url = e
        .target()
        .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
        .is_some_and(|t| t.id() == "tokens-url");
    if enter && in_url {
        e.prevent_default();
        add_url();
    }
    Update::Nothing
}

fn add_url() {
    let url = dom::input_value("tokens-url").trim().to_string();
    if !url.is_empty() {
        if let Ok(i) = dom::by_id("tokens-url").dyn_into::<HtmlInputElement>() {
            i.set_value("");
        }
        wasm_bindgen_futures::spawn_local(load_urls(vec![url]));
    }
}

/// A drag over the lens is the lens's (not a bundle for the page's loader).
fn on_dragover(e: &Event) -> Update {
    e.prevent_default();
    e.stop_propagation();
    Update::Nothing
}

fn on_drop(e: &Event) -> Update {
    e.prevent_default();
    e.stop_propagation();
    dom::set_body_attr("data-drop", "");
    if let Some(list) = e.dyn_ref::<DragEvent>().and_then(|d| d.data_transfer()).and_then(|t| t.files()) {
        let files: Vec<File> = (0..list.length()).filter_map(|i| list.get(i)).collect();
        wasm_bindgen_futures::spawn_local(load_files(files));
    }
    Update::Nothing
}

fn remove(index: usize) {
    let removed = LENS.with(|l| {
        let mut l = l.borrow_mut();
        (index < l.loaded.len()).then(|| l.loaded.remove(index))
    });
    if let Some(gone) = removed {
        if gone.url.is_some() {
            sync_urls();
        }
        render();
        dom::set_text("tokens-status", &format!("removed {}", gone.label));
    }
}

/// Writes the URLs of the loaded tokenizers into `?tokenizers=`.
fn sync_urls() {
    let urls: Vec<String> = LENS.with(|l| l.borrow().loaded.iter().filter_map(|t| t.url.clone()).collect());
    let p = state::params();
    if urls.is_empty() {
        p.delete("tokenizers");
    } else {
        p.set("tokenizers", &urls.join(","));
    }
    state::replace_params(&p);
}

async fn load_files(files: Vec<File>) {
    for file in files {
        let name = file.name();
        let label = label_of(&name);
        begin();
        let text = JsFuture::from(file.text()).await.ok().and_then(|t| t.as_string());
        let result =
            text.ok_or_else(|| format!("{name}: cannot read the file")).and_then(|t| parse(&t, label, None));
        finish(result);
    }
}

async fn load_urls(urls: Vec<String>) {
    for url in urls {
        begin();
        let result = match fetch_text(&url).await {
            Ok(text) => parse(&text, label_of(&url), Some(url)),
            Err(e) => Err(e),
        };
        let was_url = result.is_ok();
        finish(result);
        if was_url {
            sync_urls();
        }
    }
}

async fn fetch_text(url: &str) -> Result<String, String> {
    let fail = |why: String| format!("cannot fetch {url}: {why}");
    let response = crate::load::fetch(url).await?;
    let text = response.text().map_err(|e| fail(js_text(&e)))?;
    JsFuture::from(text)
        .await
        .map_err(|e| fail(js_text(&e)))?
        .as_string()
        .ok_or_else(|| fail("no text".into()))
}

fn js_text(e: &wasm_bindgen::JsValue) -> String {
    e.as_string()
        .or_else(|| e.dyn_ref::<js_sys::Error>().map(|e| String::from(e.message())))
        .unwrap_or_else(|| format!("{e:?}"))
}

/// A row's name: the file name, or its folder's for a file called `tokenizer.json`
/// (`…/xlm-r/tokenizer.json` → `xlm-r`).
fn label_of(path: &str) -> String {
    let path = path.split(['?', '#']).next().unwrap_or(path);
    let mut parts = path.rsplit('/').filter(|s| !s.is_empty());
    let last = parts.next().unwrap_or(path);
    match parts.next() {
        Some(dir) if last == "tokenizer.json" && !dir.contains(':') => dir.to_string(),
        _ => last.to_string(),
    }
}

/// Reads a `tokenizer.json` (checked as JSON first: a syntax error inside a component makes the
/// `tokenizers` crate panic, which in wasm would stop the app), without padding or truncation.
fn parse(json: &str, label: String, url: Option<String>) -> Result<Loaded, String> {
    serde_json::from_str::<serde::de::IgnoredAny>(json).map_err(|e| format!("{label}: not JSON: {e}"))?;
    let mut tok: Tokenizer = json
        .parse()
        .map_err(|e| format!("{label}: not a tokenizer.json the tokenizers library reads: {e}"))?;
    tok.with_padding(None);
    tok.with_truncation(None).map_err(|e| format!("{label}: {e}"))?;
    let json = |v: Result<serde_json::Value, serde_json::Error>| v.unwrap_or_default();
    let scheme = Scheme::of_tokenizer(
        &json(serde_json::to_value(tok.get_decoder())),
        &json(serde_json::to_value(tok.get_pre_tokenizer())),
    );
    let model = model_name(&tok);
    Ok(Loaded { label, url, tok, scheme, model })
}

/// Adds a tokenizer the page already holds (the classroom lens's encoder) as a row.
pub fn add(label: String, tok: Tokenizer) {
    begin();
    finish(loaded(label, tok));
}

/// A tokenizer as a row of the lens: untruncated, unpadded.
fn loaded(label: String, mut tok: Tokenizer) -> Result<Loaded, String> {
    tok.with_padding(None);
    match tok.with_truncation(None) {
        Ok(_) => {
            let json = |v: Result<serde_json::Value, serde_json::Error>| v.unwrap_or_default();
            let scheme = Scheme::of_tokenizer(
                &json(serde_json::to_value(tok.get_decoder())),
                &json(serde_json::to_value(tok.get_pre_tokenizer())),
            );
            let model = model_name(&tok);
            Ok(Loaded { label, url: None, tok, scheme, model })
        }
        Err(e) => Err(format!("{label}: {e}")),
    }
}

/// Loads the tokenizer the app ships, CLIP's (open_clip's BPE vocabulary, `SHIPPED_VOCAB` beside
/// the app), once per page: called when a lens opens, unless the URL names tokenizers (`?tokenizers=`).
pub fn ensure_shipped(then: Option<fn()>) {
    if let Some(f) = then {
        LENS.with(|l| l.borrow_mut().on_shipped.push(f));
        if shipped_count("").is_some() {
            f();
        }
    }
    let first = LENS.with(|l| !std::mem::replace(&mut l.borrow_mut().shipped, true));
    if first && state::params().get("tokenizers").is_none_or(|t| t.trim().is_empty()) {
        wasm_bindgen_futures::spawn_local(load_shipped());
    }
}

/// How many tokens the shipped CLIP tokenizer makes of `text` (start and end included), once it
/// is loaded.
pub fn shipped_count(text: &str) -> Option<usize> {
    LENS.with(|l| {
        let l = l.borrow();
        let t = l.loaded.iter().find(|t| t.label == SHIPPED_LABEL && t.url.is_none())?;
        t.tok.encode(text, true).ok().map(|e| e.get_ids().len())
    })
}

async fn load_shipped() {
    begin();
    let result = crate::load::fetch_bytes(SHIPPED_VOCAB).await.and_then(|bytes| {
        let text = gunzip_text(SHIPPED_VOCAB, &bytes)?;
        let path = std::path::Path::new(SHIPPED_VOCAB);
        let tok =
            culturelens_models_io::clip_bpe::from_open_clip_bpe(&text, path).map_err(|e| e.to_string())?;
        loaded(SHIPPED_LABEL.to_string(), tok)
    });
    finish(result);
    for f in LENS.with(|l| l.borrow().on_shipped.clone()) {
        f();
    }
}

/// The text of a gzip file, or of the bytes as they are when a server already unpacked them
/// (`Content-Encoding: gzip`).
fn gunzip_text(name: &str, bytes: &[u8]) -> Result<String, String> {
    use std::io::Read;
    let mut text = String::new();
    if bytes.starts_with(&[0x1f, 0x8b]) {
        flate2::read::GzDecoder::new(bytes).read_to_string(&mut text).map_err(|e| format!("{name}: {e}"))?;
    } else {
        text = String::from_utf8(bytes.to_vec()).map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(text)
}

/// Shows how the loaded tokenizers split `text` (the classroom lens's first sentence).
pub fn show_text(text: &str) {
    LENS.with(|l| l.borrow_mut().text = text.to_string());
    if let Ok(area) = dom::by_id("tokens-text").dyn_into::<HtmlTextAreaElement>() {
        area.set_value(text);
    }
    render();
}

fn model_name(tok: &Tokenizer) -> &'static str {
    match tok.get_model() {
        ModelWrapper::BPE(_) => "BPE",
        ModelWrapper::Unigram(_) => "Unigram",
        ModelWrapper::WordPiece(_) => "WordPiece",
        ModelWrapper::WordLevel(_) => "WordLevel",
    }
}

fn begin() {
    LENS.with(|l| l.borrow_mut().pending += 1);
    dom::by_id("view-tokens").set_attribute("data-state", "loading").ok();
    dom::set_text("tokens-status", "loading tokenizer…");
}

fn finish(result: Result<Loaded, String>) {
    let done = LENS.with(|l| {
        let mut l = l.borrow_mut();
        l.pending -= 1;
        match result {
            Ok(mut t) => {
                let base = t.label.clone();
                let mut n = 2;
                while l.loaded.iter().any(|o| o.label == t.label) {
                    t.label = format!("{base} ({n})");
                    n += 1;
                }
                let msg = format!("loaded {} ({}, {})", t.label, scheme_name(t.scheme), t.model);
                l.loaded.push(t);
                msg
            }
            Err(e) => {
                let msg = format!("could not load a tokenizer: {e}");
                l.errors.push(e);
                msg
            }
        }
    });
    render();
    dom::set_text("tokens-status", &done);
}

fn scheme_name(scheme: Scheme) -> &'static str {
    match scheme {
        Scheme::ByteLevel => "byte-level",
        Scheme::SentencePiece => "SentencePiece",
    }
}

/// The tokens of `text` as the tokenizer splits it: the same reading as `culturelens tokens`.
fn split(tok: &Tokenizer, text: &str) -> Result<Vec<TokenView>, String> {
    let encoding = tok.encode(text, true).map_err(|e| e.to_string())?;
    let encoded = Encoded {
        ids: encoding.get_ids(),
        pieces: encoding.get_tokens(),
        special_mask: encoding.get_special_tokens_mask(),
    };
    Ok(tokens::lens(encoded, |id| tok.id_to_token(id), tok.get_decoder(), tok.get_pre_tokenizer()))
}

/// Redraws the rows (and the errors) from the lens state.
fn render() {
    let (rows, errors, pending) = LENS.with(|l| {
        let l = l.borrow();
        let rows: String = l.loaded.iter().enumerate().map(|(i, t)| row(i, t, &l.text)).collect();
        let errors: String =
            l.errors.iter().map(|e| format!("<p class='lens-error'>{}</p>", esc(e))).collect();
        (if l.loaded.is_empty() { empty() } else { rows }, errors, l.pending)
    });
    dom::set_html("tokens-rows", &rows);
    dom::set_html("tokens-errors", &errors);
    let state = if pending > 0 { "loading" } else { "ready" };
    dom::by_id("view-tokens").set_attribute("data-state", state).ok();
}

fn empty() -> String {
    "<p class='muted'>No tokenizer loaded yet: add a model's <code>tokenizer.json</code> \
     (from its Hugging Face folder) above.</p>"
        .to_string()
}

fn row(index: usize, t: &Loaded, text: &str) -> String {
    let label = esc(&t.label);
    let head = |detail: String| {
        format!(
            "<h3><span class=\"tok-name\">{label}</span> <span class=\"muted\">{detail}</span> \
             <button type=\"button\" class=\"tok-remove\" data-remove=\"{index}\" aria-label=\"Remove {label}\">×</button></h3>"
        )
    };
    let kind = format!("{} {}", scheme_name(t.scheme), t.model);
    match split(&t.tok, text) {
        Err(e) => format!(
            "<section class=\"tok-row\" data-tokenizer=\"{label}\">{}<p class=\"lens-error\">{}</p></section>",
            head(kind),
            esc(&e)
        ),
        Ok(views) => {
            let chips: String = views.iter().enumerate().map(|(i, v)| chip(i, v)).collect();
            format!(
                "<section class=\"tok-row\" data-tokenizer=\"{label}\" data-count=\"{n}\" aria-label=\"{label}: {n} tokens\">\
                 {}<ol class=\"chips\">{chips}</ol></section>",
                head(format!("{kind} · {} token{}", views.len(), if views.len() == 1 { "" } else { "s" })),
                n = views.len()
            )
        }
    }
}

fn chip(position: usize, v: &TokenView) -> String {
    let kind = match v.kind {
        TokenKind::Text => "text",
        TokenKind::Bytes => "bytes",
        TokenKind::Special => "special",
        TokenKind::Unknown => "unknown",
    };
    // A word start (SentencePiece's `▁`, a byte-level leading space) shows as a mark.
    let (starts, shown) = match (v.kind, v.text.strip_prefix(' ')) {
        (TokenKind::Text, Some(rest)) => (true, rest),
        _ => (false, v.text.as_str()),
    };
    let mut said = vec![format!("token {}", position + 1)];
    match v.kind {
        TokenKind::Bytes => said.push("bytes".into()),
        TokenKind::Special => said.push("special".into()),
        TokenKind::Unknown => said.push("unknown".into()),
        TokenKind::Text => {}
    }
    if starts {
        said.push("starts a word".into());
    }
    if v.word_end {
        said.push("ends a word".into());
    }
    said.push(format!("id {}", v.id));
    let tip = format!("#{} · id {} · piece {:?}", position + 1, v.id, v.piece);
    format!(
        "<li class=\"chip k-{kind}{ws}{we}\" tabindex=\"0\" data-id=\"{id}\" data-kind=\"{kind}\" data-text=\"{text}\" \
         data-piece=\"{piece}\" data-word-end=\"{word_end}\" data-tip=\"{tip}\">{mark}<span class=\"t\">{shown}</span>\
         <span class=\"sr\"> ({said})</span></li>",
        ws = if starts { " ws" } else { "" },
        we = if v.word_end { " we" } else { "" },
        id = v.id,
        text = esc(&v.text),
        piece = esc(&v.piece),
        word_end = v.word_end,
        tip = esc(&tip),
        mark = if starts { "<span class='ws-mark' aria-hidden='true'>▁</span>" } else { "" },
        shown = esc(shown),
        said = esc(&said.join(", ")),
    )
}
