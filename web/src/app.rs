//! App state and flow: URL parameters → load bundle → init device → upload → score → views, and
//! every later interaction (filters, view switches, selections) as a re-render or a recompute.
//! The whole UI state lives in the URL (`?bundle=…&view=…&model=…`), so any view can be shared.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

use burn::tensor::Tensor;
use culturelens_bundle::Manifest;
use culturelens_core::sos::{Pooling, SosColumns, SosLayout, SosReport};
use serde::Serialize;
use wasm_bindgen::JsCast;
use web_sys::{DragEvent, HtmlInputElement, UrlSearchParams};

use crate::compute::{self, Backend, Compute, Preference};
use crate::dom;
use crate::load::{self, Source, Thumbs};
use crate::views;

/// The views, in tab order; the value is the `view=` URL parameter.
pub const VIEWS: [(&str, &str); 7] = [
    ("heatmap", "Heatmap"),
    ("distribution", "Distribution"),
    ("correlation", "Language correlation"),
    ("flags", "Surface flags"),
    ("scatter", "PCA scatter"),
    ("vendi", "Vendi"),
    ("educator", "Educator"),
];

/// Which rows take part in the current SoS computation.
#[derive(Clone, Debug, PartialEq)]
pub struct Filter {
    pub models: Vec<(String, bool)>,
    pub languages: Vec<(String, bool)>,
    pub pooling: Pooling,
}

/// One SoS computation over the filtered rows.
pub struct Scored {
    /// Rows of the bundle that were scored (all rows when the filter keeps everything).
    pub rows: Vec<u32>,
    pub layout: SosLayout,
    pub per_image: Vec<f32>,
    pub report: SosReport,
}

/// Everything the views read.
pub struct App {
    pub manifest: Manifest,
    pub columns: Vec<(String, Vec<String>)>,
    pub thumbs: Thumbs,
    pub compute: Compute,
    /// The whole table on the device, uploaded once.
    pub table: Tensor<2>,
    pub filter: Filter,
    pub scored: Option<Scored>,
    pub ui: Ui,
    /// 2-D PCA coordinates of every row (row-major N × 2), computed on first use.
    pub pca: Option<Rc<Vec<f32>>>,
    /// Rows picked in the scatter (box or lasso), for the Vendi panel.
    pub selection: Vec<u32>,
}

/// View state mirrored in the URL.
#[derive(Clone, Debug, PartialEq)]
pub struct Ui {
    pub view: String,
    pub model: String,
    pub col_sort: Sort,
    pub row_sort: Sort,
    pub colour_by: String,
    pub culture: String,
    pub person: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sort {
    Name,
    MeanAsc,
    MeanDesc,
}

impl Sort {
    pub fn next(self) -> Sort {
        match self {
            Sort::Name => Sort::MeanDesc,
            Sort::MeanDesc => Sort::MeanAsc,
            Sort::MeanAsc => Sort::Name,
        }
    }

    fn param(self) -> &'static str {
        match self {
            Sort::Name => "name",
            Sort::MeanAsc => "asc",
            Sort::MeanDesc => "desc",
        }
    }

    fn parse(text: Option<String>) -> Sort {
        match text.as_deref() {
            Some("asc") => Sort::MeanAsc,
            Some("desc") => Sort::MeanDesc,
            _ => Sort::Name,
        }
    }
}

thread_local! {
    static APP: RefCell<Option<App>> = const { RefCell::new(None) };
    static COMPUTE: RefCell<Option<Compute>> = const { RefCell::new(None) };
    static BUSY: RefCell<bool> = const { RefCell::new(false) };
}

/// Runs `f` on the app state (if a bundle is loaded).
pub fn with_app<R>(f: impl FnOnce(&mut App) -> R) -> Option<R> {
    APP.with(|a| a.borrow_mut().as_mut().map(f))
}

fn params() -> UrlSearchParams {
    let search = dom::window().location().search().unwrap_or_default();
    UrlSearchParams::new_with_str(&search).expect("URLSearchParams")
}

/// Writes the UI state into the URL (replaceState: shareable, no history spam).
pub fn sync_url() {
    let Some(ui) = with_app(|a| a.ui.clone()) else { return };
    let p = params();
    for (k, v) in [
        ("view", ui.view.as_str()),
        ("model", ui.model.as_str()),
        ("cols", ui.col_sort.param()),
        ("rows", ui.row_sort.param()),
        ("colour", ui.colour_by.as_str()),
        ("culture", ui.culture.as_str()),
        ("person", ui.person.as_str()),
    ] {
        if v.is_empty() {
            p.delete(k);
        } else {
            p.set(k, v);
        }
    }
    let url = format!("?{}", String::from(p.to_string()));
    if let Ok(history) = dom::window().history() {
        history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&url)).ok();
    }
}

pub async fn start() {
    wire_loader();
    views::wire();
    register_offline_cache();
    dom::set_body_attr("data-loader", "ready");
    let p = params();
    match p.get("bundle") {
        Some(b) if b == "demo" => run_load(Source::Demo).await,
        Some(url) if !url.is_empty() => run_load(Source::Url(url)).await,
        _ => dom::status("Choose a bundle: the synthetic demo, a URL, or local files."),
    }
}

fn wire_loader() {
    dom::on_id("load-demo", "click", |_| {
        set_bundle_param("demo");
        wasm_bindgen_futures::spawn_local(run_load(Source::Demo));
    });
    dom::on_id("load-url", "click", |_| {
        let url = dom::input_value("bundle-url");
        if !url.trim().is_empty() {
            set_bundle_param(url.trim());
            wasm_bindgen_futures::spawn_local(run_load(Source::Url(url.trim().to_string())));
        }
    });
    for id in ["file-input", "folder-input"] {
        dom::on_id(id, "change", move |e| {
            let Some(input) = e.target().and_then(|t| t.dyn_into::<HtmlInputElement>().ok()) else { return };
            if let Some(list) = input.files() {
                let files = (0..list.length()).filter_map(|i| list.get(i)).collect();
                wasm_bindgen_futures::spawn_local(run_load(Source::Files(files)));
            }
        });
    }
    let body = dom::body();
    dom::on(&body, "dragover", |e| {
        e.prevent_default();
        dom::set_body_attr("data-drop", "over");
    });
    dom::on(&body, "dragleave", |_| dom::set_body_attr("data-drop", ""));
    dom::on(&body, "drop", |e| {
        e.prevent_default();
        dom::set_body_attr("data-drop", "");
        let Some(list) = e.dyn_ref::<DragEvent>().and_then(|d| d.data_transfer()).and_then(|t| t.files())
        else {
            return;
        };
        let files = (0..list.length()).filter_map(|i| list.get(i)).collect();
        wasm_bindgen_futures::spawn_local(run_load(Source::Files(files)));
    });
}

fn set_bundle_param(value: &str) {
    let p = params();
    p.set("bundle", value);
    let url = format!("?{}", String::from(p.to_string()));
    if let Ok(history) = dom::window().history() {
        history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&url)).ok();
    }
}

/// Service worker (`sw.js`) that keeps the app shell and fetched bundles for offline use.
fn register_offline_cache() {
    let navigator = dom::window().navigator();
    let sw = js_sys::Reflect::get(&navigator, &"serviceWorker".into()).unwrap_or_default();
    if sw.is_undefined() || !dom::window().is_secure_context() {
        return;
    }
    if let Ok(register) = js_sys::Reflect::get(&sw, &"register".into())
        && let Some(f) = register.dyn_ref::<js_sys::Function>()
    {
        f.call1(&sw, &"sw.js".into()).ok();
    }
}

/// The shared device: initialised once per page (a wgpu runtime cannot be re-initialised).
async fn compute_device() -> Compute {
    if let Some(c) = COMPUTE.with(|c| c.borrow().clone()) {
        return c;
    }
    let preference = Preference::parse(params().get("backend").as_deref());
    let c = compute::init(preference).await;
    COMPUTE.with(|slot| *slot.borrow_mut() = Some(c.clone()));
    c
}

pub async fn run_load(source: Source) {
    if BUSY.with(|b| std::mem::replace(&mut *b.borrow_mut(), true)) {
        dom::show_error("a bundle is still loading; wait for it to finish");
        return;
    }
    let result = load_and_score(source).await;
    BUSY.with(|b| *b.borrow_mut() = false);
    if let Err(e) = result {
        dom::show_error(&format!("Could not load the bundle: {e}"));
    }
}

async fn load_and_score(source: Source) -> Result<(), String> {
    let t0 = dom::now_ms();
    dom::clear_error();
    dom::set_body_attr("data-state", "loading");
    dom::status("loading bundle…");
    dom::yield_to_browser().await;
    let loaded = load::load(source).await?;
    let t_loaded = dom::now_ms();
    dom::status("starting the compute backend…");
    let compute = compute_device().await;
    dom::set_body_attr("data-backend", compute.backend.attr());
    dom::set_body_attr("data-adapter", &compute.adapter);
    let badge = match (&compute.backend, &compute.fallback_reason) {
        (Backend::WebGpu, _) => format!("WebGPU · {}", compute.adapter),
        (Backend::Cpu, Some(why)) => format!("CPU fallback (flex) · {why}"),
        (Backend::Cpu, None) => "CPU (flex)".to_string(),
    };
    dom::set_text("backend", &badge);
    let (rows, dim) = (loaded.manifest.rows, loaded.manifest.dim);
    let table = compute::upload(loaded.embeddings, rows, dim, &compute.device);
    let column =
        |n: &str| loaded.columns.iter().find(|(c, _)| c == n).map(|(_, v)| v.clone()).unwrap_or_default();
    let all = |values: &[String]| -> Vec<(String, bool)> {
        values.iter().collect::<BTreeSet<_>>().into_iter().map(|v| (v.clone(), true)).collect()
    };
    let p = params();
    let pooling =
        if p.get("pool").as_deref() == Some("per-model") { Pooling::PerModel } else { Pooling::All };
    let filter = Filter { models: all(&column("model")), languages: all(&column("language")), pooling };
    let first_model = loaded.manifest.models.first().cloned().unwrap_or_default();
    let ui = Ui {
        view: p
            .get("view")
            .filter(|v| VIEWS.iter().any(|(id, _)| id == v))
            .unwrap_or_else(|| "heatmap".into()),
        model: p.get("model").filter(|m| loaded.manifest.models.contains(m)).unwrap_or(first_model),
        col_sort: Sort::parse(p.get("cols")),
        row_sort: Sort::parse(p.get("rows")),
        colour_by: p.get("colour").unwrap_or_else(|| "language".into()),
        culture: p.get("culture").unwrap_or_default(),
        person: p.get("person").unwrap_or_default(),
    };
    let synthetic = loaded.manifest.synthetic;
    let title = format!(
        "{}{} · {} rows × {} · {:?} · {}",
        if synthetic { "SYNTHETIC DEMO DATA — " } else { "" },
        loaded.manifest.title,
        rows,
        dim,
        loaded.manifest.dtype,
        loaded.source_label
    );
    dom::set_text("bundle-title", &title);
    dom::set_body_attr("data-synthetic", if synthetic { "true" } else { "false" });
    dom::set_text(
        "provenance",
        &format!(
            "Embedding model: {} · Provenance: {}",
            loaded.manifest.embedding_model, loaded.manifest.provenance
        ),
    );
    APP.with(|a| {
        *a.borrow_mut() = Some(App {
            manifest: loaded.manifest,
            columns: loaded.columns,
            thumbs: loaded.thumbs,
            compute,
            table,
            filter,
            scored: None,
            ui,
            pca: None,
            selection: Vec::new(),
        })
    });
    views::render_filters();
    recompute().await?;
    let t_done = dom::now_ms();
    dom::set_body_attr("data-load-ms", &format!("{:.1}", t_loaded - t0));
    dom::set_body_attr("data-first-heatmap-ms", &format!("{:.1}", t_done - t0));
    dom::show("app", true);
    dom::show("progress-box", false);
    Ok(())
}

/// Rows kept by the filter (`None` when every row is kept).
fn filtered_rows(app: &App) -> Option<Vec<u32>> {
    let keep = |list: &[(String, bool)]| -> BTreeSet<String> {
        list.iter().filter(|(_, on)| *on).map(|(v, _)| v.clone()).collect()
    };
    let (models, languages) = (keep(&app.filter.models), keep(&app.filter.languages));
    if models.len() == app.filter.models.len() && languages.len() == app.filter.languages.len() {
        return None;
    }
    let col = |n: &str| app.columns.iter().find(|(c, _)| c == n).map(|(_, v)| v.as_slice()).unwrap_or(&[]);
    let (m, l) = (col("model"), col("language"));
    Some(
        (0..m.len())
            .filter(|&i| models.contains(&m[i]) && languages.contains(&l[i]))
            .map(|i| i as u32)
            .collect(),
    )
}

#[derive(Serialize)]
struct Row<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    layer: Option<&'a str>,
    language: &'a str,
    culture: &'a str,
    n: usize,
    sos: f64,
}

/// Recomputes SoS for the current filter on the device and re-renders the active view.
pub async fn recompute() -> Result<(), String> {
    let t0 = dom::now_ms();
    dom::set_body_attr("data-state", "computing");
    let prepared = with_app(|app| {
        let rows = filtered_rows(app);
        let pick = |name: &str| -> Option<Vec<String>> {
            let v = app.columns.iter().find(|(c, _)| c == name).map(|(_, v)| v)?;
            Some(match &rows {
                Some(r) => r.iter().map(|&i| v[i as usize].clone()).collect(),
                None => v.clone(),
            })
        };
        let (model, language, culture) = (pick("model")?, pick("language")?, pick("culture")?);
        let (layer, person) = (pick("layer"), pick("person"));
        let cols = SosColumns {
            model: &model,
            language: &language,
            culture: &culture,
            layer: layer.as_deref(),
            person: person.as_deref(),
        };
        let layout = SosLayout::new(cols, app.filter.pooling).map_err(|e| e.to_string());
        Some((rows, layout, app.table.clone(), app.compute.backend))
    })
    .flatten()
    .ok_or("the bundle lacks model/language/culture columns")?;
    let (rows, layout, table, backend) = prepared;
    let layout = layout.map_err(|e| format!("the current filter leaves nothing to score: {e}"))?;
    dom::status("computing SoS…");
    let (per_image, report) = compute::sos(&table, rows.as_deref(), &layout, backend).await?;
    let millis = dom::now_ms() - t0;
    let json_rows: Vec<Row> = report
        .joint
        .iter()
        .map(|j| Row {
            model: &j.model,
            layer: j.layer.as_deref(),
            language: &j.language,
            culture: &j.culture,
            n: j.n,
            sos: j.sos,
        })
        .collect();
    let json = serde_json::to_string(&json_rows).expect("rows serialise");
    dom::by_id("sos-results").set_text_content(Some(&json));
    let n_rows = layout.len();
    with_app(|app| {
        let all_rows = rows.unwrap_or_else(|| (0..app.manifest.rows as u32).collect());
        app.scored = Some(Scored { rows: all_rows, layout, per_image, report });
    });
    dom::set_body_attr("data-recompute-ms", &format!("{millis:.1}"));
    dom::set_body_attr("data-state", "ready");
    let backend_name = backend.attr();
    dom::status(&format!("SoS of {n_rows} outputs on {backend_name} in {millis:.0} ms"));
    views::render_active();
    Ok(())
}

/// Kicks off a recompute from an event handler, reporting failures on screen.
pub fn spawn_recompute() {
    wasm_bindgen_futures::spawn_local(async {
        if let Err(e) = recompute().await {
            dom::show_error(&e);
        }
    });
}
