//! Vendi panel (CUBE paper Eqs. (2)–(3)): pick a subset — the scatter selection or the rows of
//! the current filter narrowed by model/language/culture — choose the kernel (cosine on the
//! embeddings, or categorical over metadata columns with weights) and the order q, and see VS_q,
//! qVS_q and qVS_q / N update live. The numbers come from `culturelens_compute::vendi` on the
//! compute device through `compute::vendi` (the core's precision rule: f32 products on WebGPU,
//! which has no f64).

use std::cell::Cell;

use culturelens_compute::vendi::{Order, VendiScore};
use web_sys::Event;

use super::{Handler, Listen};
use crate::compute::{self, VendiKernel};
use crate::dom::{self, esc};
use crate::state::{Update, with_app};

/// Metadata columns offered for the categorical kernel.
const CATEGORICAL_COLUMNS: [&str; 4] = ["language", "culture", "person", "template"];

pub fn handlers() -> [Handler; 2] {
    [
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
             <p class='muted'>qVS = mean quality × VS (CUBE Eq. 2), quality from a numeric metadata column of the bundle \
             (e.g. HPS-v2 scores); with uniform quality, qVS = VS.</p>",
            if app.selection.is_empty() { "" } else { " selected" },
            app.selection.len(),
            choice("vendi-model", "Model", &m.models),
            choice("vendi-language", "Language", &m.languages),
            choice("vendi-culture", "Culture", &m.cultures),
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
        Ok(s) => {
            let show = |id: &str, text: String, value: f64| {
                dom::set_text(id, &text);
                dom::by_id(id).set_attribute("data-value", &value.to_string()).ok();
            };
            show("vendi-n", s.n.to_string(), s.n as f64);
            show("vendi-vs", format!("{:.4}", s.vs), s.vs);
            show("vendi-qvs", format!("{:.4}", s.qvs), s.qvs);
            show("vendi-qvs-norm", format!("{:.4}", s.qvs_norm), s.qvs_norm);
            dom::clear_error();
        }
        Err(e) => dom::show_error(&format!("Vendi: {e}")),
    }
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
async fn score() -> Result<VendiScore, String> {
    let c = read_controls()?;
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
    compute::vendi(&table, &rows, &kernel, c.q, quality.as_deref()).await
}
