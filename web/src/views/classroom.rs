//! The classroom lens (`?lens=classroom`): the class's own sentences and photos, embedded in the
//! page by a CLIP or SigLIP encoder running on WebGPU (CPU fallback) from the same Burn code as
//! `culturelens embed` / `embed-text`, then scored and drawn by the explorer's views.
//!
//! - **Model**: a folder URL (`?encoder=URL`, e.g. a hub repository's `…/resolve/main/`) or a
//!   folder picked from disk, loaded by `crate::encoder` (headers and limits checked before the
//!   weights download, the files kept in the browser's cache), in f32 or f16 (`?precision=`,
//!   the "Precision" choice: `auto` is f16 where the WebGPU adapter has `shader-f16`; the
//!   precision the model runs in is in its status line and `<body data-encoder-precision>`).
//! - **Sentences**: one per line as `language, culture, sentence` (`?sentences=`; a link with
//!   `encoder` and `sentences` embeds them once the model is loaded, so it shows what the class
//!   saw). They are
//!   tokenized and embedded as `embed-text` does (batches of 64), and the text embeddings become
//!   the table the views score: the text-side SoS per language and culture (the formula of
//!   `culturelens sos`, over the sentences' embeddings), the PCA scatter coloured by language,
//!   and the tokenizer lens shows the encoder's tokens of the first sentence. Prompts can be
//!   picked from the four prompt sets (`prompt-index.json`, shipped with the app: the prompts of
//!   the sets whose licence allows it, one meaning in all its languages; SoS and CUBE fetched by
//!   the page from their pinned upstream files, `fetch_set`). Before a model is
//!   loaded the tokenizer lens already splits them with CLIP's real tokenizer (shipped too).
//! - **Photos**: JPEG, PNG or WebP files, decoded as the CLI decodes them
//!   (`culturelens_models_io::decode_image`: libjpeg-turbo's decoder for JPEG), each labelled
//!   with a language and a culture (typed, or read from a CSV with `image`, `language`, `culture`
//!   columns), embedded as `embed` does (batches of 16 images of one size), and shown as a table
//!   in the views with the photos as thumbnails — alone, or (“add them to the opened bundle”)
//!   after the rows of an opened bundle embedded by the same model, so every view scores the
//!   combined table.
//!
//! The embeddings go into an in-memory bundle written by the same writer as `culturelens bundle`
//! (`load::Source::Table`) and opened like any bundle. Nothing leaves the page.

use std::cell::RefCell;
use std::collections::HashMap;

use burn::tensor::FloatDType;
use culturelens_bundle::{BundleSpec, DType, PIECE_BYTES};
use culturelens_models_io::decode_image;
use wasm_bindgen::JsCast;
use web_sys::{Event, File, HtmlInputElement, HtmlTextAreaElement};

use super::{Handler, Listen};
use crate::app;
use crate::compute::read_f32;
use crate::dom::{self, esc};
use crate::encoder::{self, LoadedEncoder, ModelSource, Precision};
use crate::load::{Loaded, Source, Table, Thumbs};
use crate::state::{self, Update};

/// Sentences per forward pass (`culturelens embed-text`'s default `--batch`).
const TEXT_BATCH: usize = 64;
/// Images per forward pass (`culturelens embed`'s default `--batch`).
const IMAGE_BATCH: usize = 16;
/// The `model` of photos added to an opened bundle.
const ADDED_MODEL: &str = "class photos";
/// What the sentence box holds before the class types: one sentence in five languages.
const DEFAULT_SENTENCES: &str = "en, Japan, a photo of a Japanese woman\n\
de, Japan, ein Foto einer japanischen Frau\n\
es, Japan, una foto de una mujer japonesa\n\
en, Nigeria, a photo of a Nigerian woman\n\
de, Nigeria, ein Foto einer nigerianischen Frau\n\
es, Nigeria, una foto de una mujer nigeriana";

/// One photo and its labels.
struct Photo {
    file: File,
    language: String,
    culture: String,
}

#[derive(Default)]
struct Lens {
    encoder: Option<LoadedEncoder>,
    photos: Vec<Photo>,
    busy: bool,
    /// The prompt index (`PROMPT_INDEX`), once loaded; whether it was asked for.
    index: Option<PromptIndex>,
    index_asked: bool,
}

/// The prompt sets' index the app ships (`web/prompt-index.json`, by
/// `scripts/make_prompt_index.py` from `culturelens prompts export`): the shipped sets' prompts,
/// grouped by meaning, and the licence of every set.
const PROMPT_INDEX: &str = "prompt-index.json";

#[derive(serde::Deserialize)]
struct PromptIndex {
    sets: Vec<IndexedSet>,
}

#[derive(serde::Deserialize)]
struct IndexedSet {
    set: String,
    title: String,
    shipped: bool,
    #[serde(default)]
    why: String,
    #[serde(default)]
    groups: Vec<PromptGroup>,
}

#[derive(serde::Deserialize)]
struct PromptGroup {
    english: String,
    /// `[id, language, culture, prompt]`.
    rows: Vec<[String; 4]>,
}

thread_local! {
    static LENS: RefCell<Lens> = RefCell::new(Lens::default());
}

/// Builds the lens from the URL (`lens`, `encoder`, `sentences`) once the page starts.
pub fn start() {
    let p = state::params();
    let sentences = p.get("sentences").unwrap_or_else(|| DEFAULT_SENTENCES.to_string());
    let precision = p.get("precision").unwrap_or_default();
    dom::set_html("view-classroom", &scaffold(&sentences, &p.get("encoder").unwrap_or_default(), &precision));
    let open = p.get("lens").as_deref() == Some("classroom");
    set_open(open);
    if let Some(url) = p.get("encoder").filter(|u| !u.is_empty()) {
        // A shared link reproduces the lens: with its sentences (and no bundle of its own) the
        // page embeds them as soon as the model is loaded.
        let embed = p.get("sentences").is_some_and(|s| !s.trim().is_empty())
            && p.get("bundle").is_none_or(|b| b.is_empty());
        wasm_bindgen_futures::spawn_local(async move {
            load_model(ModelSource::Url(url)).await;
            if embed && LENS.with(|l| l.borrow().encoder.is_some()) {
                run(embed_sentences()).await;
            }
        });
    }
}

/// The lens's listeners.
pub fn handlers() -> Vec<Handler> {
    let on = |event: &'static str, run: fn(&Event) -> Update| Handler {
        on: Listen::Id("view-classroom"),
        event,
        run,
    };
    vec![
        Handler { on: Listen::Id("open-classroom"), event: "click", run: on_toggle },
        on("click", on_click),
        on("change", on_change),
        on("input", on_input),
    ]
}

fn scaffold(sentences: &str, url: &str, precision: &str) -> String {
    let option = |value: &str, label: &str| {
        let selected =
            if value == precision || (value == "auto" && precision.is_empty()) { " selected" } else { "" };
        format!("<option value='{value}'{selected}>{label}</option>")
    };
    let precision_options =
        [option("auto", "auto (f16 with shader-f16)"), option("f32", "f32"), option("f16", "f16")].concat();
    format!(
        "<div class='lens-head'><h2 id='classroom-title'>Classroom lens</h2>\
         <button type='button' id='classroom-close'>Close the lens</button></div>\
         <p class='what'>Run an image–text encoder (CLIP or SigLIP) in this page and score the class's own \
         sentences and photos: does an embedding sit nearer its <em>language</em> or its <em>culture</em>? \
         The same code as <code>culturelens embed</code>; nothing leaves the page.</p>\
         <fieldset><legend>1. Model</legend>\
         <label>Folder URL <input id='enc-url' type='url' size='40' value='{url}' \
         placeholder='https://huggingface.co/openai/clip-vit-base-patch32/resolve/main/'></label> \
         <button type='button' id='enc-load'>Load the model</button> \
         <label class='file'>…or a model folder <input id='enc-folder' type='file' webkitdirectory multiple></label> \
         <label>Precision <select id='enc-precision'>{precision_options}</select></label>\
         <p id='enc-status' class='muted' role='status' aria-live='polite'>No model loaded.</p>\
         <p id='enc-notice' class='lens-notice' role='status' aria-live='polite'></p></fieldset>\
         <fieldset><legend>2. Sentences</legend>\
         <label>Pick prompts from the four prompt sets <select id='lens-pick'><option value=''>…</option></select></label>\
         <p id='lens-pick-status' class='muted' role='status' aria-live='polite'></p>\
         <label for='lens-sentences'>One per line: language, culture, sentence</label>\
         <textarea id='lens-sentences' rows='6' spellcheck='false'>{sentences}</textarea>\
         <div id='lens-token-counts'></div>\
         <button type='button' id='lens-embed-text'>Embed the sentences</button></fieldset>\
         <fieldset><legend>3. Photos</legend>\
         <label class='file'>Photos (JPEG, PNG, WebP) <input id='lens-photos' type='file' multiple \
         accept='image/jpeg,image/png,image/webp'></label> \
         <label class='file'>Labels CSV (image, language, culture) <input id='lens-labels' type='file' accept='.csv,text/csv'></label>\
         <div id='lens-photo-rows'></div>\
         <label><input id='lens-add' type='checkbox'> Add them to the opened bundle (embedded with the same model)</label> \
         <button type='button' id='lens-embed-photos'>Embed the photos</button></fieldset>\
         <div id='lens-errors' role='alert'></div>",
        url = esc(url),
        sentences = esc(sentences)
    )
}

fn set_open(open: bool) {
    dom::show("view-classroom", open);
    if open {
        crate::views::tokens::ensure_shipped(Some(render_token_counts));
        if !LENS.with(|l| std::mem::replace(&mut l.borrow_mut().index_asked, true)) {
            wasm_bindgen_futures::spawn_local(load_index());
        }
    }
    dom::by_id("open-classroom").set_attribute("aria-expanded", if open { "true" } else { "false" }).ok();
    let p = state::params();
    if (p.get("lens").as_deref() == Some("classroom")) == open {
        return;
    }
    if open {
        p.set("lens", "classroom");
    } else {
        p.delete("lens");
    }
    state::replace_params(&p);
}

fn on_toggle(_: &Event) -> Update {
    set_open(dom::by_id("view-classroom").has_attribute("hidden"));
    Update::Nothing
}

fn target_id(e: &Event) -> String {
    e.target().and_then(|t| t.dyn_into::<web_sys::Element>().ok()).map(|t| t.id()).unwrap_or_default()
}

fn on_click(e: &Event) -> Update {
    match target_id(e).as_str() {
        "classroom-close" => set_open(false),
        "enc-load" => {
            let url = dom::input_value("enc-url").trim().to_string();
            if !url.is_empty() {
                wasm_bindgen_futures::spawn_local(load_model(ModelSource::Url(url)));
            }
        }
        "lens-embed-text" => wasm_bindgen_futures::spawn_local(run(embed_sentences())),
        "lens-embed-photos" => wasm_bindgen_futures::spawn_local(run(embed_photos())),
        _ => {}
    }
    Update::Nothing
}

fn on_input(e: &Event) -> Update {
    if let Some(area) = e.target().and_then(|t| t.dyn_into::<HtmlTextAreaElement>().ok())
        && area.id() == "lens-sentences"
    {
        let p = state::params();
        p.set("sentences", &area.value());
        state::replace_params(&p);
        render_token_counts();
    }
    Update::Nothing
}

/// Before any model is loaded: how many tokens CLIP's tokenizer (shipped with the app) makes of
/// each sentence — one meaning often costs more tokens in one language than in another.
pub fn render_token_counts() {
    let text =
        dom::by_id("lens-sentences").dyn_into::<HtmlTextAreaElement>().map(|t| t.value()).unwrap_or_default();
    let rows: String = parse_sentences(&text)
        .unwrap_or_default()
        .iter()
        .filter_map(|[language, culture, sentence]| {
            let n = crate::views::tokens::shipped_count(sentence)?;
            Some(format!(
                "<tr><td>{}</td><td>{}</td><td class='num' data-tokens='{n}'>{n}</td><td>{}</td></tr>",
                esc(language),
                esc(culture),
                esc(sentence)
            ))
        })
        .collect();
    let head = ["Language", "Culture", "Tokens", "Sentence"];
    let html = lens_table("Tokens per sentence (CLIP's tokenizer)", &head, &rows);
    dom::set_html("lens-token-counts", &html);
}

fn on_change(e: &Event) -> Update {
    if let Some(select) = e.target().and_then(|t| t.dyn_into::<web_sys::HtmlSelectElement>().ok()) {
        match select.id().as_str() {
            "lens-pick" => pick(&select.value()),
            // The next model loaded runs in this precision (kept in the URL).
            "enc-precision" => {
                let p = state::params();
                p.set("precision", &select.value());
                state::replace_params(&p);
            }
            _ => {}
        }
        return Update::Nothing;
    }
    let Some(input) = e.target().and_then(|t| t.dyn_into::<HtmlInputElement>().ok()) else {
        return Update::Nothing;
    };
    let files = || -> Vec<File> {
        input.files().map(|l| (0..l.length()).filter_map(|i| l.get(i)).collect()).unwrap_or_default()
    };
    match input.id().as_str() {
        "enc-folder" => wasm_bindgen_futures::spawn_local(load_model(ModelSource::Files(files()))),
        "lens-photos" => {
            LENS.with(|l| {
                l.borrow_mut().photos.extend(files().into_iter().map(|file| Photo {
                    file,
                    language: String::new(),
                    culture: String::new(),
                }))
            });
            render_photos();
        }
        "lens-labels" => {
            if let Some(f) = files().into_iter().next() {
                wasm_bindgen_futures::spawn_local(read_labels(f));
            }
        }
        _ => {
            // A label typed for one photo.
            if let (Some(i), Some(field)) =
                (input.get_attribute("data-photo"), input.get_attribute("data-field"))
            {
                let i: usize = i.parse().unwrap_or(usize::MAX);
                LENS.with(|l| {
                    if let Some(p) = l.borrow_mut().photos.get_mut(i) {
                        match field.as_str() {
                            "language" => p.language = input.value().trim().to_string(),
                            _ => p.culture = input.value().trim().to_string(),
                        }
                    }
                });
            }
        }
    }
    Update::Nothing
}

/// Fetches the prompt index and fills the picker: one option per meaning of a shipped set, and
/// for a set that may not be shipped an option that fetches it from upstream ([`fetch_set`]).
async fn load_index() {
    let index = crate::load::fetch_bytes(PROMPT_INDEX).await.and_then(|bytes| {
        serde_json::from_slice::<PromptIndex>(&bytes).map_err(|e| format!("{PROMPT_INDEX}: {e}"))
    });
    match index {
        Ok(index) => {
            render_picker(&index);
            LENS.with(|l| l.borrow_mut().index = Some(index));
        }
        Err(e) => show_error(&e),
    }
}

fn render_picker(index: &PromptIndex) {
    let mut html = String::from("<option value=''>…</option>");
    for s in &index.sets {
        html += &format!("<optgroup label='{}'>", esc(&s.title));
        if s.shipped {
            for (i, g) in s.groups.iter().enumerate() {
                html += &format!(
                    "<option value='{}:{i}'>{} ({} languages)</option>",
                    esc(&s.set),
                    esc(&g.english),
                    g.rows.len()
                );
            }
        } else {
            html += &format!(
                "<option value='fetch:{}'>Fetch it from upstream ({})</option>",
                esc(&s.set),
                esc(&s.why)
            );
        }
        html += "</optgroup>";
    }
    dom::set_html("lens-pick", &html);
}

/// The upstream file of a set the app may not ship (SoS, CUBE), as the CLI's registry pins it.
fn upstream_file(set: &str) -> Option<(&'static culturelens_prompts::UpstreamFile, PromptParser)> {
    use culturelens_prompts::{cube, registry, sos};
    match set {
        "sos" => Some((&registry::SOS_FILES[0], sos::parse as PromptParser)),
        "cube" => Some((&registry::CUBE_FILES[0], cube::parse as PromptParser)),
        _ => None,
    }
}

type PromptParser = fn(&[u8]) -> Result<culturelens_prompts::PromptTable, culturelens_prompts::PromptError>;

/// Fetches a set the app may not ship from its pinned upstream file (or `?mirror=URL`, a folder
/// laid out as the CLI's `--mirror`), refuses it unless its sha256 is the pinned one, parses it
/// with the CLI's prompt-set code (`culturelens prompts export`'s rows) and offers its meanings
/// in the picker. Nothing is kept: a reload fetches it again.
async fn fetch_set(set: String) {
    let Some((file, parse)) = upstream_file(&set) else { return };
    let url = match state::params().get("mirror").filter(|m| !m.is_empty()) {
        Some(mirror) => format!("{}/{}", mirror.trim_end_matches('/'), file.mirror_path),
        None => file.url(culturelens_prompts::registry::DEFAULT_BASE_URL),
    };
    dom::set_html("lens-pick-status", &format!("Fetching {}…", esc(&url)));
    let result = crate::load::fetch_bytes(&url).await.and_then(|bytes| {
        file.verify(&culturelens_bundle::sha256_hex(&bytes), &url, "")
            .and_then(|()| parse(&bytes))
            .map_err(|e| e.to_string())
    });
    match result {
        Ok(table) => {
            let groups = group_by_meaning(&table.rows);
            dom::set_html(
                "lens-pick-status",
                &format!(
                    "{set}: {} prompts in {} meanings from {} (sha256 verified); pick one above.",
                    table.rows.len(),
                    groups.len(),
                    esc(&url)
                ),
            );
            LENS.with(|l| {
                let mut l = l.borrow_mut();
                let Some(index) = l.index.as_mut() else { return };
                if let Some(s) = index.sets.iter_mut().find(|s| s.set == set) {
                    s.shipped = true;
                    s.groups = groups;
                }
                render_picker(index);
            });
        }
        Err(e) => {
            dom::set_html("lens-pick-status", "");
            show_error(&format!("cannot use the {set} prompts: {e}"));
        }
    }
}

/// Rows sharing their `english` text, in first-seen order, as the shipped index groups them
/// (`scripts/make_prompt_index.py`): `[id, language, culture or "none", prompt]`.
fn group_by_meaning(rows: &[culturelens_prompts::Prompt]) -> Vec<PromptGroup> {
    let mut groups: Vec<PromptGroup> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    for r in rows {
        let i = *at.entry(&r.english).or_insert_with(|| {
            groups.push(PromptGroup { english: r.english.clone(), rows: Vec::new() });
            groups.len() - 1
        });
        let culture = if r.culture.is_empty() { "none" } else { &r.culture };
        groups[i].rows.push([r.id.clone(), r.language.clone(), culture.to_string(), r.prompt.clone()]);
    }
    groups
}

/// Puts a picked meaning's prompts (`set:group`) into the sentence box, one line per language.
fn pick(value: &str) {
    let Some((set, group)) = value.split_once(':') else { return };
    if set == "fetch" {
        wasm_bindgen_futures::spawn_local(fetch_set(group.to_string()));
        return;
    }
    let lines = LENS.with(|l| {
        let l = l.borrow();
        let s = l.index.as_ref()?.sets.iter().find(|s| s.set == set)?;
        let g = s.groups.get(group.parse::<usize>().ok()?)?;
        Some(
            g.rows
                .iter()
                .map(|[_, lang, culture, prompt]| format!("{lang}, {culture}, {prompt}"))
                .collect::<Vec<_>>(),
        )
    });
    if let Some(lines) = lines
        && let Ok(area) = dom::by_id("lens-sentences").dyn_into::<HtmlTextAreaElement>()
    {
        let text = lines.join("\n");
        area.set_value(&text);
        let p = state::params();
        p.set("sentences", &text);
        state::replace_params(&p);
        render_token_counts();
    }
}

fn render_photos() {
    let rows: String = LENS.with(|l| {
        l.borrow()
            .photos
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let name = esc(&p.file.name());
                format!(
                    "<tr><td>{name}</td>\
                     <td><input aria-label='language of {name}' data-photo='{i}' data-field='language' value='{}' size='6'></td>\
                     <td><input aria-label='culture of {name}' data-photo='{i}' data-field='culture' value='{}' size='10'></td></tr>",
                    esc(&p.language),
                    esc(&p.culture)
                )
            })
            .collect()
    });
    dom::set_html("lens-photo-rows", &lens_table("", &["Photo", "Language", "Culture"], &rows));
}

/// A table of the lens (`rows`: its `<tr>`s) with a caption (none when empty) and the column
/// heads `head`; nothing without rows.
fn lens_table(caption: &str, head: &[&str], rows: &str) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let caption =
        if caption.is_empty() { String::new() } else { format!("<caption>{}</caption>", esc(caption)) };
    let head: String = head.iter().map(|h| format!("<th>{h}</th>")).collect();
    format!("<table class='lens-photos'>{caption}<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
}

/// Labels from a CSV with `image`, `language` and `culture` columns (by file name).
async fn read_labels(file: File) {
    let text = wasm_bindgen_futures::JsFuture::from(file.text()).await.ok().and_then(|t| t.as_string());
    let result = text
        .ok_or_else(|| format!("{}: cannot read the file", file.name()))
        .and_then(|t| parse_labels(&file.name(), &t));
    match result {
        Ok(labels) => {
            LENS.with(|l| {
                for p in &mut l.borrow_mut().photos {
                    if let Some((language, culture)) = labels.get(&p.file.name()) {
                        p.language = language.clone();
                        p.culture = culture.clone();
                    }
                }
            });
            render_photos();
        }
        Err(e) => show_error(&e),
    }
}

/// `image → (language, culture)` of a labels CSV (plain fields, no quoting); errors name the
/// file, line and column.
fn parse_labels(name: &str, text: &str) -> Result<HashMap<String, (String, String)>, String> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or_else(|| format!("{name}: empty"))?;
    let header: Vec<&str> = header.split(',').map(str::trim).collect();
    let col = |c: &str| header.iter().position(|h| *h == c).ok_or_else(|| format!("{name}: no `{c}` column"));
    let (image, language, culture) = (col("image")?, col("language")?, col("culture")?);
    let mut labels = HashMap::new();
    for (i, line) in lines {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len() != header.len() {
            return Err(format!(
                "{name}: line {}: {} fields, the header has {}",
                i + 1,
                fields.len(),
                header.len()
            ));
        }
        let file = fields[image].rsplit('/').next().unwrap_or(fields[image]).to_string();
        labels.insert(file, (fields[language].to_string(), fields[culture].to_string()));
    }
    Ok(labels)
}

fn show_error(message: &str) {
    dom::set_html("lens-errors", &format!("<p class='lens-error'>{}</p>", esc(message)));
    dom::by_id("view-classroom").set_attribute("data-state", "error").ok();
}

fn set_state(state: &str) {
    dom::by_id("view-classroom").set_attribute("data-state", state).ok();
}

async fn load_model(source: ModelSource) {
    if LENS.with(|l| std::mem::replace(&mut l.borrow_mut().busy, true)) {
        show_error("the lens is still working; wait for it to finish");
        return;
    }
    dom::set_html("lens-errors", "");
    dom::set_text("enc-notice", "");
    set_state("loading");
    dom::set_text("enc-status", "loading the model…");
    let compute = app::compute_device().await;
    let t0 = dom::now_ms();
    let result = match Precision::parse(state::params().get("precision").as_deref()) {
        Ok(asked) => {
            let (dtype, notice) = asked.choose(&compute);
            if let Some(notice) = notice {
                dom::set_text("enc-notice", &notice);
            }
            encoder::load(source, &compute, dtype).await
        }
        Err(e) => Err(e),
    };
    dom::show("progress-box", false);
    match result {
        Ok(loaded) => {
            let family = loaded.encoder.model.family();
            let precision = encoder::dtype_name(loaded.encoder.dtype);
            let ms = dom::now_ms() - t0;
            dom::set_text(
                "enc-status",
                &format!(
                    "{} ({family}, {}) on {} in {precision}, loaded in {ms:.0} ms{}",
                    loaded.label,
                    dom::mib(loaded.weight_bytes),
                    compute.backend.attr(),
                    if loaded.cached_bytes > 0 { " · from the browser's cache" } else { "" }
                ),
            );
            dom::set_body_attr("data-encoder", &loaded.label);
            dom::set_body_attr("data-encoder-precision", precision);
            dom::set_body_attr("data-encoder-ms", &format!("{ms:.1}"));
            dom::set_body_attr("data-encoder-cached", &loaded.cached_bytes.to_string());
            if let Some(url) = &loaded.url {
                let p = state::params();
                p.set("encoder", url);
                state::replace_params(&p);
            }
            if let Some((tok, _)) = &loaded.encoder.tokenizer {
                crate::views::tokens::add(loaded.label.clone(), tok.clone());
            }
            LENS.with(|l| l.borrow_mut().encoder = Some(loaded));
            set_state("ready");
        }
        Err(e) => {
            dom::set_text("enc-status", "No model loaded.");
            show_error(&format!("Could not load the model: {e}"));
        }
    }
    LENS.with(|l| l.borrow_mut().busy = false);
}

/// Runs an embedding step, reporting failures in the lens.
async fn run(step: impl std::future::Future<Output = Result<(), String>>) {
    if LENS.with(|l| std::mem::replace(&mut l.borrow_mut().busy, true)) {
        show_error("the lens is still working; wait for it to finish");
        return;
    }
    dom::set_html("lens-errors", "");
    set_state("embedding");
    let result = step.await;
    LENS.with(|l| l.borrow_mut().busy = false);
    match result {
        Ok(()) => set_state("ready"),
        Err(e) => show_error(&e),
    }
}

/// `(language, culture, sentence)` of each non-empty line; errors name the line.
fn parse_sentences(text: &str) -> Result<Vec<[String; 3]>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let mut parts = line.splitn(3, ',').map(str::trim);
            match (parts.next(), parts.next(), parts.next()) {
                (Some(l), Some(c), Some(s)) if !l.is_empty() && !c.is_empty() && !s.is_empty() => {
                    Ok([l.to_string(), c.to_string(), s.to_string()])
                }
                _ => Err(format!("sentence line {}: expected `language, culture, sentence`", i + 1)),
            }
        })
        .collect()
}

/// Runs `f` on the loaded encoder (an error when none is loaded).
fn with_encoder<R>(f: impl FnOnce(&LoadedEncoder) -> R) -> Result<R, String> {
    LENS.with(|l| l.borrow().encoder.as_ref().map(f)).ok_or_else(|| "load a model first (step 1)".to_string())
}

async fn embed_sentences() -> Result<(), String> {
    let rows = parse_sentences(
        &dom::by_id("lens-sentences")
            .dyn_into::<HtmlTextAreaElement>()
            .map(|t| t.value())
            .unwrap_or_default(),
    )?;
    if rows.is_empty() {
        return Err("type at least one sentence".into());
    }
    let texts: Vec<String> = rows.iter().map(|r| r[2].clone()).collect();
    let (ids, label) =
        with_encoder(|e| (e.encoder.tokenize(&texts).map_err(|e| e.to_string()), e.label.clone()))?;
    let ids = ids?;
    let t0 = dom::now_ms();
    let mut embeddings = Vec::new();
    let mut dim = 0;
    for (i, chunk) in ids.chunks(TEXT_BATCH).enumerate() {
        dom::status(&format!(
            "embedding sentences {}–{} of {}…",
            i * TEXT_BATCH + 1,
            i * TEXT_BATCH + chunk.len(),
            ids.len()
        ));
        let features = with_encoder(|e| e.encoder.text_features(chunk).map_err(|e| e.to_string()))??;
        dim = features.dims()[1];
        embeddings.extend(read_f32(features.cast(FloatDType::F32)).await?);
    }
    let ms = dom::now_ms() - t0;
    dom::set_body_attr("data-lens-embed-ms", &format!("{ms:.1}"));
    let column = |k: usize| rows.iter().map(|r| r[k].clone()).collect::<Vec<_>>();
    let columns = vec![
        ("model".to_string(), vec![label.clone(); rows.len()]),
        ("language".to_string(), column(0)),
        ("culture".to_string(), column(1)),
        ("prompt".to_string(), column(2)),
    ];
    crate::views::tokens::show_text(&texts[0]);
    show_table(&label, "sentences", embeddings, dim, columns, Vec::new(), Thumbs::None).await
}

async fn embed_photos() -> Result<(), String> {
    let photos: Vec<(File, String, String)> = LENS.with(|l| {
        l.borrow().photos.iter().map(|p| (p.file.clone(), p.language.clone(), p.culture.clone())).collect()
    });
    if photos.is_empty() {
        return Err("choose photos first".into());
    }
    if let Some((f, _, _)) = photos.iter().find(|(_, l, c)| l.is_empty() || c.is_empty()) {
        return Err(format!("{}: give it a language and a culture (or choose a labels CSV)", f.name()));
    }
    let (processor, label) =
        with_encoder(|e| (e.encoder.processor().cloned().map_err(|e| e.to_string()), e.label.clone()))?;
    let processor = processor?;
    let t0 = dom::now_ms();
    let mut pixels = Vec::with_capacity(photos.len());
    let mut thumbnails = Vec::with_capacity(photos.len());
    for (i, (file, _, _)) in photos.iter().enumerate() {
        let buffer = wasm_bindgen_futures::JsFuture::from(file.array_buffer())
            .await
            .map_err(|e| format!("{}: {}", file.name(), crate::load::js_error(&e)))?;
        let bytes = js_sys::Uint8Array::new(&buffer).to_vec();
        let decoded = decode_image(&bytes).map_err(|e| format!("{}: {e}", file.name()))?;
        pixels.push(processor.pixel_values_decoded(&decoded));
        thumbnails.push((thumb_path(i, &file.name()), bytes));
    }
    let mut embeddings = Vec::new();
    let mut dim = 0;
    // Batches as `embed` makes them: at most IMAGE_BATCH images, cut where the size changes.
    let mut start = 0;
    while start < pixels.len() {
        let size = (pixels[start].height, pixels[start].width);
        let mut end = start + 1;
        while end < pixels.len()
            && end - start < IMAGE_BATCH
            && (pixels[end].height, pixels[end].width) == size
        {
            end += 1;
        }
        dom::status(&format!("embedding photos {}–{end} of {}…", start + 1, pixels.len()));
        let features = with_encoder(|e| e.encoder.image_features(&pixels[start..end]))?;
        dim = features.dims()[1];
        embeddings.extend(read_f32(features.cast(FloatDType::F32)).await?);
        start = end;
    }
    let ms = dom::now_ms() - t0;
    dom::set_body_attr("data-lens-embed-ms", &format!("{ms:.1}"));
    let names: Vec<String> = photos.iter().map(|(f, _, _)| f.name()).collect();
    let add = dom::by_id("lens-add").dyn_into::<HtmlInputElement>().is_ok_and(|i| i.checked());
    // Added to a bundle, the photos are a "model" of their own beside the bundle's generators.
    let model = if add { ADDED_MODEL.to_string() } else { label.clone() };
    let columns = vec![
        ("model".to_string(), vec![model; photos.len()]),
        ("language".to_string(), photos.iter().map(|p| p.1.clone()).collect()),
        ("culture".to_string(), photos.iter().map(|p| p.2.clone()).collect()),
        ("image".to_string(), names.clone()),
        (
            culturelens_bundle::THUMBNAIL_COLUMN.to_string(),
            names.iter().enumerate().map(|(i, n)| thumb_path(i, n)).collect(),
        ),
    ];
    let files: HashMap<String, File> =
        photos.into_iter().enumerate().map(|(i, (f, _, _))| (thumb_path(i, &f.name()), f)).collect();
    if add {
        return add_to_bundle(&label, embeddings, dim, columns, files).await;
    }
    show_table(&label, "photos", embeddings, dim, columns, thumbnails, Thumbs::Files(files)).await
}

/// Where photo `i` sits in the in-memory bundle (numbered: a class may drop two `IMG_0001.jpg`;
/// a folder of its own, apart from an opened bundle's thumbnails).
fn thumb_path(i: usize, name: &str) -> String {
    format!("lens-photos/{i}-{name}")
}

/// The opened bundle with the photos' rows added after its own, opened again: every view scores
/// and draws the combined table. The bundle must come from the same encoder (its
/// `embedding_model` names the lens's model, and the dimensions agree); its rows are read back
/// from the device as the views hold them, its result tables and thumbnails stay.
async fn add_to_bundle(
    label: &str,
    embeddings: Vec<f32>,
    dim: usize,
    added: Vec<(String, Vec<String>)>,
    files: HashMap<String, File>,
) -> Result<(), String> {
    let opened = state::with_app(|a| {
        (a.manifest.clone(), a.columns.clone(), a.table.parts().to_vec(), a.thumbs.clone())
    });
    let Some((mut manifest, columns, parts, thumbs)) = opened else {
        return Err("no bundle is open: open one first, or untick “add them to the opened bundle”".into());
    };
    if encoder::label_of(&manifest.embedding_model).to_lowercase() != label.to_lowercase()
        || manifest.dim != dim
    {
        return Err(format!(
            "the opened bundle was embedded by {} ({} dimensions), the lens's model is {label} ({dim}):              photos can only be added to a bundle of the same model",
            manifest.embedding_model, manifest.dim
        ));
    }
    let json = serde_json::to_string(&embeddings.chunks(dim.max(1)).collect::<Vec<_>>())
        .map_err(|e| e.to_string())?;
    dom::by_id("lens-embeddings").set_text_content(Some(&json));
    let mut table = Vec::with_capacity((manifest.rows + embeddings.len() / dim.max(1)) * dim);
    for part in parts {
        table.extend(read_f32(part).await?);
    }
    table.extend(embeddings);
    let (before, n) = (manifest.rows, added[0].1.len());
    let blank = |k: usize| vec![String::new(); k];
    let mut combined: Vec<(String, Vec<String>)> = columns
        .into_iter()
        .map(|(name, mut values)| {
            values
                .extend(added.iter().find(|(c, _)| *c == name).map_or_else(|| blank(n), |(_, v)| v.clone()));
            (name, values)
        })
        .collect();
    for (name, values) in added {
        if !combined.iter().any(|(c, _)| *c == name) {
            combined.push((name, [blank(before), values].concat()));
        }
    }
    let distinct = |name: &str| -> Vec<String> {
        let values = combined.iter().find(|(c, _)| c == name).map(|(_, v)| v.as_slice()).unwrap_or_default();
        values.iter().collect::<std::collections::BTreeSet<_>>().into_iter().cloned().collect()
    };
    manifest.rows = before + n;
    (manifest.models, manifest.languages, manifest.cultures) =
        (distinct("model"), distinct("language"), distinct("culture"));
    manifest.title = format!("{} + the class's {n} photos", manifest.title);
    manifest.provenance = format!("{}; {n} photos embedded in this browser by {label}", manifest.provenance);
    let results = state::with_app(|a| std::mem::take(&mut a.results)).unwrap_or_default();
    app::run_load(Source::Loaded(Box::new(Loaded {
        manifest,
        embeddings: table,
        columns: combined,
        thumbs: Thumbs::Added(files, Box::new(thumbs)),
        source_label: "the opened bundle and the classroom lens's photos".to_string(),
        results,
    })))
    .await;
    // They are in the bundle now: a second "embed" adds only photos chosen after this.
    LENS.with(|l| l.borrow_mut().photos.clear());
    render_photos();
    Ok(())
}

/// Opens the embeddings as a bundle (the same writer and reader as the CLI's bundles) and
/// shows the views; the rows also go into `#lens-embeddings` (JSON) for the browser tests.
async fn show_table(
    label: &str,
    what: &str,
    embeddings: Vec<f32>,
    dim: usize,
    columns: Vec<(String, Vec<String>)>,
    thumbnails: Vec<(String, Vec<u8>)>,
    thumbs: Thumbs,
) -> Result<(), String> {
    let rows: Vec<&[f32]> = embeddings.chunks(dim.max(1)).collect();
    let json = serde_json::to_string(&rows).map_err(|e| e.to_string())?;
    dom::by_id("lens-embeddings").set_text_content(Some(&json));
    let spec = BundleSpec {
        title: format!("classroom lens: the class's {what}, embedded in the page"),
        synthetic: false,
        embedding_model: label.to_string(),
        provenance: format!("embedded in this browser by {label}; nothing was uploaded"),
        dtype: DType::F32,
        piece_bytes: PIECE_BYTES,
    };
    let source_label = format!("the classroom lens ({what})");
    app::run_load(Source::Table(Box::new(Table {
        spec,
        embeddings,
        dim,
        columns,
        thumbnails,
        thumbs,
        source_label,
    })))
    .await;
    Ok(())
}
