//! Vendi panel (CUBE paper Eqs. (2)–(3)): pick a subset — the scatter selection or the rows of
//! the current filter narrowed by model/language/culture — choose the kernel (cosine on the
//! embeddings, or categorical over metadata columns with weights) and the order q, and see VS_q,
//! qVS_q and qVS_q / N update live. The numbers come from `culturelens_compute::vendi` on the
//! compute device through `compute::vendi` (the core's precision rule: f32 products on WebGPU,
//! which has no f64).
//!
//! Once the numbers are shown, each one's bootstrap interval follows in its tooltip (`title`,
//! and `data-lo`/`data-hi`/`data-ci`): the subset's items resampled and the whole Vendi
//! computation re-run per resample on the host (`VendiStatistic`, as `culturelens vendi --ci`),
//! a few runs at a time with yields to the browser between them so the page stays responsive,
//! with the runs done so far on screen. The settings are the page's (`state::ci_spec`, the
//! heatmap's `?ci=&bootstrap=&seed=&ci-method=`), with the same level/resamples control. The
//! draws are the CLI's for the group named by the one model, language or culture the panel
//! narrows to (`vendi --group-by COL`), else for an ungrouped collection (`vendi` on the subset's rows).

use std::cell::Cell;

use culturelens_compute::vendi::{Order, VendiItems, VendiStatistic, defined, vendi_draws};
use culturelens_metrics::bootstrap::{CiSpec, Interval, StatisticRuns};
use web_sys::Event;

use super::{Handler, Listen, ci};
use crate::compute::{self, VendiKernel, VendiResult};
use crate::dom::{self, esc};
use crate::state::{self, Update, with_app};

/// The value cells of the panel with their names in the tooltips.
const VALUES: [(&str, &str); 3] =
    [("vendi-vs", "VS_q"), ("vendi-qvs", "qVS_q"), ("vendi-qvs-norm", "qVS_q / N")];

/// Longest stretch of Vendi runs between two yields to the browser, in milliseconds.
const STEP_MS: f64 = 40.0;

/// Metadata columns offered for the categorical kernel.
const CATEGORICAL_COLUMNS: [&str; 4] = ["language", "culture", "person", "template"];

pub fn handlers() -> [Handler; 3] {
    [
        Handler { on: Listen::Id("view-vendi"), event: "change", run: on_ci_control },
        Handler { on: Listen::Id("view-vendi"), event: "change", run: on_control },
        Handler { on: Listen::Id("view-vendi"), event: "input", run: on_control },
    ]
}

fn on_control(e: &Event) -> Update {
    let is_control = e
        .target()
        .and_then(|t| wasm_bindgen::JsCast::dyn_into::<web_sys::Element>(t).ok())
        .is_some_and(|el| el.closest(".vendi-controls").ok().flatten().is_some());
    if is_control {
        wasm_bindgen_futures::spawn_local(update());
    }
    Update::Nothing
}

/// The intervals' level or resamples: the new setting in the URL, then the numbers again.
fn on_ci_control(e: &Event) -> Update {
    if ci::on_change("vendi-", e) {
        wasm_bindgen_futures::spawn_local(update());
    }
    Update::Nothing
}

fn choice(id: &str, label: &str, values: &[String]) -> String {
    let opts: String = std::iter::once("<option value=''>any</option>".to_string())
        .chain(values.iter().map(|v| format!("<option value='{e}'>{e}</option>", e = esc(v))))
        .collect();
    format!("<label>{label} <select id='{id}'>{opts}</select></label>")
}

pub fn render() {
    let html = with_app(|app| {
        let m = &app.manifest;
        let present: Vec<&str> =
            CATEGORICAL_COLUMNS.iter().copied().filter(|c| app.columns.iter().any(|(n, _)| n == c)).collect();
        let weight = 1.0 / present.len().max(1) as f64;
        // Numeric metadata columns can serve as per-image quality (e.g. HPS-v2 scores).
        let quality: String = app
            .columns
            .iter()
            .filter(|(_, v)| !v.is_empty() && v.iter().all(|x| x.parse::<f64>().is_ok_and(f64::is_finite)))
            .map(|(c, _)| format!("<option value='{e}'>{e}</option>", e = esc(c)))
            .collect();
        let weights: String = present
            .iter()
            .map(|c| format!("<label>{c} <input type='number' class='weight' data-column='{c}' min='0' max='1' step='0.05' value='{weight:.3}'></label>"))
            .collect();
        format!(
            "<h2>Vendi diversity of a subset</h2><p class='what'>VS is the effective number of distinct pictures in \
             the subset: 1 if they are all alike, N if all differ.</p>\
             <table class='numbers big' id='vendi-table' data-figure><tbody><tr><th>N</th><td id='vendi-n'>–</td></tr>\
             <tr><th>VS<sub>q</sub></th><td id='vendi-vs'>–</td></tr><tr><th>qVS<sub>q</sub></th><td id='vendi-qvs'>–</td></tr>\
             <tr><th>qVS<sub>q</sub> / N</th><td id='vendi-qvs-norm'>–</td></tr></tbody></table>\
             <div class='vendi-controls'>\
             <label>Subset <select id='vendi-source'><option value='filter'>current filter</option>\
             <option value='selection'{}>scatter selection ({} rows)</option></select></label>\
             {}{}{}\
             <label>Kernel <select id='vendi-kernel'><option value='cosine'>cosine (embeddings)</option>\
             <option value='categorical'>categorical (metadata)</option></select></label>\
             <fieldset><legend>Categorical weights (sum to 1)</legend>{weights}</fieldset>\
             <label>q <input id='vendi-q' value='1' size='4'></label>\
             <label>Quality <select id='vendi-quality'><option value=''>uniform (1 per image)</option>{quality}</select></label></div>\
             {}<p class='muted' id='vendi-ci-progress' role='status'></p>\
             <p class='muted'>qVS = mean quality × VS (CUBE Eq. 2), quality from a numeric metadata column of the bundle \
             (e.g. HPS-v2 scores); with uniform quality, qVS = VS.</p>",
            if app.selection.is_empty() { "" } else { " selected" },
            app.selection.len(),
            choice("vendi-model", "Model", &m.models),
            choice("vendi-language", "Language", &m.languages),
            choice("vendi-culture", "Culture", &m.cultures),
            ci::control(
                "vendi-",
                &state::ci_spec(),
                "Hover a number for its interval:",
                "the subset's pictures, the whole Vendi computation re-run per resample",
                "culturelens vendi --ci"
            ),
        )
    });
    if let Some(html) = html {
        dom::set_html("view-vendi", &html);
        wasm_bindgen_futures::spawn_local(update());
    }
}

thread_local! {
    /// Number of the latest update started; an update that finishes after a newer one started
    /// shows nothing (the newer one's controls are the current ones).
    static LATEST: Cell<u64> = const { Cell::new(0) };
}

/// Recomputes the panel's numbers for the current controls. Each value cell also carries the
/// full-precision number in `data-value` (the text shows four decimals); `#vendi-table[data-busy]`
/// is `true` until the latest update has shown its numbers.
async fn update() {
    let id = LATEST.with(|l| {
        l.set(l.get() + 1);
        l.get()
    });
    dom::by_id("vendi-table").set_attribute("data-busy", "true").ok();
    let result = score().await;
    if LATEST.with(Cell::get) != id {
        return;
    }
    dom::by_id("vendi-table").set_attribute("data-busy", "false").ok();
    match result {
        Ok(subset) => {
            let s = &subset.result.score;
            let show = |id: &str, text: String, value: f64| {
                dom::set_text(id, &text);
                dom::by_id(id).set_attribute("data-value", &value.to_string()).ok();
            };
            show("vendi-n", s.n.to_string(), s.n as f64);
            show("vendi-vs", format!("{:.4}", s.vs), s.vs);
            show("vendi-qvs", format!("{:.4}", s.qvs), s.qvs);
            show("vendi-qvs-norm", format!("{:.4}", s.qvs_norm), s.qvs_norm);
            dom::clear_error();
            intervals(id, &subset).await;
        }
        Err(e) => dom::show_error(&format!("Vendi: {e}")),
    }
}

/// A scored subset with what its intervals need.
struct Subset {
    result: VendiResult,
    quality: Option<Vec<f64>>,
    q: Order,
    /// The group whose draws the intervals use (module doc).
    group: String,
}

/// The bootstrap intervals of update `id`'s numbers, computed a stretch of at most [`STEP_MS`]
/// at a time with yields to the browser between stretches; abandoned when a newer update starts.
/// `#vendi-table[data-ci]` is `computing`, then `ready` (`data-ci-ms`: the time they took).
async fn intervals(id: u64, s: &Subset) {
    let table = dom::by_id("vendi-table");
    table.set_attribute("data-ci", "computing").ok();
    for (cell, _) in VALUES {
        let el = dom::by_id(cell);
        for name in ["data-lo", "data-hi", "data-ci", "title"] {
            el.remove_attribute(name).ok();
        }
    }
    let spec = state::ci_spec();
    let t0 = dom::now_ms();
    let stat = VendiStatistic {
        items: VendiItems::Features(&s.result.features),
        quality: s.quality.as_deref(),
        q: s.q,
        protocol: None,
        precision: s.result.precision,
    };
    let draws = vendi_draws(&spec, s.result.features.n, &s.group);
    let mut runs = StatisticRuns::new(&draws);
    let statistics = |idx: &[u32]| stat.statistics(idx);
    loop {
        let start = dom::now_ms();
        let mut finished = false;
        while !finished && dom::now_ms() - start < STEP_MS {
            finished = runs.step(1, &statistics);
        }
        if finished {
            break;
        }
        let (done, total) = (runs.done(), runs.total());
        dom::set_text(
            "vendi-ci-progress",
            &format!("Bootstrap intervals: {done} of {total} Vendi computations ({}%)…", 100 * done / total),
        );
        table.set_attribute("data-ci-progress", &format!("{done}/{total}")).ok();
        dom::yield_to_browser().await;
        if LATEST.with(Cell::get) != id {
            return;
        }
    }
    let bounds = runs.finish().map(|r| defined(r).interval(spec.level, spec.method));
    for ((cell, name), interval) in VALUES.into_iter().zip(bounds) {
        show_interval(cell, name, &spec, interval);
    }
    let ms = dom::now_ms() - t0;
    dom::set_text("vendi-ci-progress", &format!("Bootstrap intervals computed in {:.1} s.", ms / 1000.0));
    table.set_attribute("data-ci-ms", &format!("{ms:.1}")).ok();
    table.set_attribute("data-ci", "ready").ok();
}

/// The interval of the value cell `cell` (named `name` in its tooltip).
fn show_interval(cell: &str, name: &str, spec: &CiSpec, interval: Option<Interval>) {
    let el = dom::by_id(cell);
    let value = el.get_attribute("data-value").unwrap_or_default();
    let label = format!("{}, the subset's pictures resampled", ci::label(spec));
    let title = match interval {
        Some(i) => {
            el.set_attribute("data-lo", &i.lo.to_string()).ok();
            el.set_attribute("data-hi", &i.hi.to_string()).ok();
            format!("{name} {value} [{}, {}], {label}", i.lo, i.hi)
        }
        None => format!("{name} {value}: no interval ({label})"),
    };
    el.set_attribute("data-ci", &label).ok();
    el.set_attribute("title", &title).ok();
}

/// The panel's controls, read from the page.
struct Controls {
    q: Order,
    categorical: bool,
    model: String,
    language: String,
    culture: String,
    use_selection: bool,
    quality: String,
    /// (column, weight) of the categorical kernel.
    weights: Vec<(String, f64)>,
}

fn read_controls() -> Result<Controls, String> {
    let nodes = dom::by_id("view-vendi").query_selector_all("input.weight").map_err(|_| "weights")?;
    let weights = (0..nodes.length())
        .filter_map(|i| nodes.item(i))
        .filter_map(|n| wasm_bindgen::JsCast::dyn_into::<web_sys::HtmlInputElement>(n).ok())
        .map(|i| {
            (i.get_attribute("data-column").unwrap_or_default(), i.value().parse::<f64>().unwrap_or(f64::NAN))
        })
        .collect();
    Ok(Controls {
        q: Order::parse(&dom::input_value("vendi-q"))?,
        categorical: dom::select_value("vendi-kernel") == "categorical",
        model: dom::select_value("vendi-model"),
        language: dom::select_value("vendi-language"),
        culture: dom::select_value("vendi-culture"),
        use_selection: dom::select_value("vendi-source") == "selection",
        quality: dom::select_value("vendi-quality"),
        weights,
    })
}

/// Reads the controls, picks the subset's rows, kernel and quality from the state, and scores
/// them with `compute::vendi`.
async fn score() -> Result<Subset, String> {
    let c = read_controls()?;
    let narrowed: Vec<&String> =
        [&c.model, &c.language, &c.culture].into_iter().filter(|v| !v.is_empty()).collect();
    let group = match narrowed[..] {
        [one] if !c.use_selection => one.clone(),
        _ => String::new(),
    };
    let (rows, table, kernel, quality) = with_app(|app| {
        let col = |n: &str| app.column(n).unwrap_or(&[]);
        let (m, l, cu) = (col("model"), col("language"), col("culture"));
        let base: Vec<u32> = if c.use_selection {
            app.selection.clone()
        } else {
            app.scored.as_ref().map(|s| s.rows.clone()).unwrap_or_default()
        };
        let keep = |want: &str, have: &str| want.is_empty() || want == have;
        let rows: Vec<u32> = base
            .into_iter()
            .filter(|&r| {
                let r = r as usize;
                keep(&c.model, &m[r]) && keep(&c.language, &l[r]) && keep(&c.culture, &cu[r])
            })
            .collect();
        let of_rows =
            |name: &str| -> Vec<String> { rows.iter().map(|&r| col(name)[r as usize].clone()).collect() };
        let kernel = if c.categorical {
            VendiKernel::Categorical(
                c.weights.iter().map(|(name, w)| (name.clone(), of_rows(name), *w)).collect(),
            )
        } else {
            VendiKernel::Cosine
        };
        let quality: Option<Vec<f64>> = (!c.quality.is_empty()).then(|| {
            let v = col(&c.quality);
            rows.iter().map(|&r| v[r as usize].parse::<f64>().unwrap_or(f64::NAN)).collect()
        });
        (rows, app.table.clone(), kernel, quality)
    })
    .ok_or("no bundle loaded")?;
    let result = compute::vendi(&table, &rows, &kernel, c.q, quality.as_deref()).await?;
    Ok(Subset { result, quality, q: c.q, group })
}
