//! App flow: URL parameters → load bundle → init device → upload → score → views, and every
//! later interaction as the [`Update`] a view handler returns (URL sync, re-render, recompute).
//! The state itself lives in `state.rs`; the whole UI state is in the URL
//! (`?bundle=…&view=…&model=…`), so any view can be shared.

use std::borrow::Cow;
use std::cell::RefCell;

use culturelens_compute::sos::{CellUnits, SosColumns, SosLayout, sos_fast_replicates};
use culturelens_view::url::{per_model_pooling, views_for};
use serde::Serialize;
use wasm_bindgen::JsCast;
use web_sys::{DragEvent, HtmlInputElement};

use crate::compute::{self, Backend, Compute, Preference};
use crate::dom;
use crate::load::{self, Source};
use crate::state::{self, App, Filter, Scored, Ui, Update, params, with_app};
use crate::table::DeviceTable;
use crate::views::{self, Listen};

thread_local! {
    static COMPUTE: RefCell<Option<Compute>> = const { RefCell::new(None) };
    static BUSY: RefCell<bool> = const { RefCell::new(false) };
}

/// Does what a view handler asked for.
pub fn apply(update: Update) {
    match update {
        Update::Nothing => {}
        Update::Url => state::sync_url(),
        Update::Render => {
            state::sync_url();
            apply(views::render_active());
        }
        Update::Recompute => spawn_recompute(),
    }
}

/// Wires the view handlers: each runs on its event and returns the [`Update`] to apply.
fn wire_views() {
    views::wire_tabs();
    for handler in views::handlers() {
        let run = handler.run;
        let listener = move |e: web_sys::Event| apply(run(&e));
        match handler.on {
            Listen::Id(id) => dom::on_id(id, handler.event, listener),
            Listen::Document => dom::on(&dom::document(), handler.event, listener),
        }
    }
}

pub async fn start() {
    wire_loader();
    wire_views();
    views::tokens::start();
    views::classroom::start();
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
    dom::on_id("load-another", "click", |_| {
        let loader = dom::by_id("loader");
        let open = loader.class_list().toggle("reopened").unwrap_or(false);
        dom::by_id("load-another").set_attribute("aria-expanded", if open { "true" } else { "false" }).ok();
    });
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
    state::replace_params(&p);
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

/// The shared device: initialised once per page (a wgpu runtime cannot be re-initialised); the
/// classroom lens's encoders run on it too.
pub async fn compute_device() -> Compute {
    if let Some(c) = COMPUTE.with(|c| c.borrow().clone()) {
        return c;
    }
    let preference = Preference::parse(params().get("backend").as_deref());
    let c = compute::init(preference).await;
    dom::set_body_attr("data-backend", c.backend.attr());
    dom::set_body_attr("data-adapter", &c.adapter);
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
    let badge = match (&compute.backend, &compute.fallback_reason) {
        (Backend::WebGpu, _) => format!("WebGPU · {}", compute.adapter),
        (Backend::Cpu, Some(why)) => format!("CPU fallback (flex) · {why}"),
        (Backend::Cpu, None) => "CPU (flex)".to_string(),
    };
    dom::set_text("backend", &badge);
    let p = params();
    let (rows, dim) = (loaded.manifest.rows, loaded.manifest.dim);
    // `?part-bytes=N` lowers the size of the table's device parts below the adapter's limit (the
    // browser tests use it to spread a small bundle over several GPU buffers).
    let part_bytes = p
        .get("part-bytes")
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(compute.max_buffer_bytes, |b| b.min(compute.max_buffer_bytes));
    let t_upload = dom::now_ms();
    let on_cpu = compute.backend == Backend::Cpu;
    let table = DeviceTable::upload(loaded.embeddings, rows, dim, &compute.device, part_bytes, on_cpu);
    dom::set_body_attr("data-upload-ms", &format!("{:.1}", dom::now_ms() - t_upload));
    dom::set_body_attr("data-table-parts", &table.parts().len().to_string());
    let column =
        |n: &str| loaded.columns.iter().find(|(c, _)| c == n).map(|(_, v)| v.clone()).unwrap_or_default();
    let per_model = per_model_pooling(p.get("pool").as_deref());
    let filter = Filter::all(&column("model"), &column("language"), per_model);
    let results = loaded.results;
    let views = views_for(
        results.magbig.is_some(),
        results.cultext2i.is_some() || results.cultext2i_report.is_some(),
    );
    views::show_tabs(&views);
    let ui = Ui::from_params(|name| p.get(name), &loaded.manifest.models, &views);
    let synthetic = loaded.manifest.synthetic;
    let title = format!("{}{}", if synthetic { "SYNTHETIC DEMO DATA — " } else { "" }, loaded.manifest.title);
    dom::set_text("bundle-title", &title);
    dom::set_body_attr("data-synthetic", if synthetic { "true" } else { "false" });
    dom::set_text(
        "provenance",
        &format!(
            "{rows} rows × {dim} · {:?} · from {} · embedding model: {} · provenance: {}",
            loaded.manifest.dtype,
            loaded.source_label,
            loaded.manifest.embedding_model,
            loaded.manifest.provenance
        ),
    );
    state::install(App {
        manifest: loaded.manifest,
        columns: loaded.columns,
        thumbs: loaded.thumbs,
        compute,
        table,
        results,
        filter,
        scored: None,
        ui,
        pca: None,
        selection: Vec::new(),
    });
    views::render_filters();
    // The first heatmap is on the page when `score_and_draw` returns (no await between its
    // `data-state=ready` and these attributes); its intervals follow (`data-ci-ms`).
    let t_done = score_and_draw().await?;
    dom::set_body_attr("data-load-ms", &format!("{:.1}", t_loaded - t0));
    dom::set_body_attr("data-first-heatmap-ms", &format!("{:.1}", t_done - t0));
    dom::show("app", true);
    dom::show("progress-box", false);
    // Figure first: the loader collapses to one button; the filters stay open beside the figure
    // on a wide screen and fold away on a narrow one.
    dom::set_body_attr("data-loaded", "true");
    dom::by_id("loader").class_list().remove_1("reopened").ok();
    dom::show("load-another", true);
    views::reveal_active_tab();
    let wide = dom::window().inner_width().ok().and_then(|w| w.as_f64()).unwrap_or(0.0) >= 1100.0;
    if wide {
        dom::by_id("filters-box").set_attribute("open", "").ok();
    }
    intervals().await;
    Ok(())
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

/// Recomputes SoS for the current filter on the device and re-renders the active view, then
/// adds the intervals.
pub async fn recompute() -> Result<(), String> {
    score_and_draw().await?;
    intervals().await;
    Ok(())
}

/// [`recompute`] up to the drawn view: scores the current filter and renders the active view;
/// returns the time (`dom::now_ms`) the view was drawn.
async fn score_and_draw() -> Result<f64, String> {
    let t0 = dom::now_ms();
    dom::set_body_attr("data-state", "computing");
    let prepared = with_app(|app| {
        let rows = app.filter.rows(app.column("model")?, app.column("language")?);
        // Every row: the columns as they are (no copy of 150,000 strings per column).
        let pick = |name: &str| -> Option<Cow<'_, [String]>> {
            let v = app.column(name)?;
            Some(match &rows {
                Some(r) => Cow::Owned(r.iter().map(|&i| v[i as usize].clone()).collect()),
                None => Cow::Borrowed(v),
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
        let layout = SosLayout::new(cols, app.pooling()).map_err(|e| e.to_string());
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
        app.scored = Some(Scored { rows: all_rows, layout, per_image, report, ci: None });
    });
    dom::set_body_attr("data-recompute-ms", &format!("{millis:.1}"));
    dom::set_body_attr("data-state", "ready");
    let backend_name = backend.attr();
    dom::status(&format!("SoS of {n_rows} outputs on {backend_name} in {millis:.0} ms"));
    apply(views::render_active());
    Ok(dom::now_ms())
}

/// The bootstrap intervals of the joint scores just computed, after the heatmap is drawn: fast
/// mode (`culturelens_compute::sos::sos_fast_replicates`, the references fixed, the per-output
/// scores the device computed resampled within cells) with the page's [`state::ci_spec`], so they
/// equal `culturelens sos --ci LEVEL --bootstrap B --seed S` on the same rows. The heatmap on
/// screen gets them in place; `<body data-ci>` is `ready` then.
async fn intervals() {
    dom::set_body_attr("data-ci", "computing");
    dom::yield_to_browser().await;
    let t0 = dom::now_ms();
    let spec = state::ci_spec();
    let done = with_app(|app| {
        let scored = app.scored.as_mut()?;
        let units = CellUnits::outputs(&scored.layout);
        let replicates = sos_fast_replicates(&scored.layout, &units, &scored.per_image, spec);
        for (joint, r) in scored.report.joint.iter_mut().zip(&replicates) {
            joint.sos_ci = r.interval(spec.level, spec.method);
        }
        scored.ci = Some(spec);
        Some(())
    })
    .flatten();
    if done.is_some() {
        dom::set_body_attr("data-ci-ms", &format!("{:.1}", dom::now_ms() - t0));
        dom::set_body_attr("data-ci", "ready");
        views::heatmap::show_intervals();
    }
}

/// Kicks off a recompute from an event handler, reporting failures on screen.
pub fn spawn_recompute() {
    wasm_bindgen_futures::spawn_local(async {
        if let Err(e) = recompute().await {
            dom::show_error(&e);
        }
    });
}
