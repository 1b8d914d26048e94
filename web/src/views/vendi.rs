//! Vendi panel (CUBE paper Eqs. (2)–(3)): pick a subset — the scatter selection or the rows of
//! the current filter narrowed by model/language/culture — choose the kernel (cosine on the
//! embeddings, or categorical over metadata columns with weights) and the order q, and see VS_q,
//! qVS_q and qVS_q / N update live. The numbers come from `culturelens_core::vendi` on the
//! compute device (f32 products on WebGPU, which has no f64).

use burn::tensor::{Int, Tensor, TensorData};
use culturelens_core::vendi::{
    Order, Precision, Route, VendiScore, categorical_features, cosine_features, product_tensor,
    spectrum_from_product,
};

use crate::app::with_app;
use crate::compute::Backend;
use crate::dom::{self, esc};

/// Largest subset scored with the cosine kernel (its features are copied to the host in f64).
pub const MAX_COSINE_ROWS: usize = 5000;
/// Largest subset scored with a categorical kernel.
pub const MAX_CATEGORICAL_ROWS: usize = 20000;
/// Metadata columns offered for the categorical kernel.
const CATEGORICAL_COLUMNS: [&str; 4] = ["language", "culture", "person", "template"];

pub fn wire() {
    for event in ["change", "input"] {
        dom::on_id("view-vendi", event, |e| {
            let is_control = e
                .target()
                .and_then(|t| wasm_bindgen::JsCast::dyn_into::<web_sys::Element>(t).ok())
                .is_some_and(|el| el.closest(".vendi-controls").ok().flatten().is_some());
            if is_control {
                wasm_bindgen_futures::spawn_local(update());
            }
        });
    }
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
            "<h2>Vendi diversity of a subset</h2><div class='vendi-controls'>\
             <label>Subset <select id='vendi-source'><option value='filter'>current filter</option>\
             <option value='selection'{}>scatter selection ({} rows)</option></select></label>\
             {}{}{}\
             <label>Kernel <select id='vendi-kernel'><option value='cosine'>cosine (embeddings)</option>\
             <option value='categorical'>categorical (metadata)</option></select></label>\
             <fieldset><legend>Categorical weights (sum to 1)</legend>{weights}</fieldset>\
             <label>q <input id='vendi-q' value='1' size='4'></label>\
             <label>Quality <select id='vendi-quality'><option value=''>uniform (1 per image)</option>{quality}</select></label></div>\
             <table class='numbers big' id='vendi-table'><tbody><tr><th>N</th><td id='vendi-n'>–</td></tr>\
             <tr><th>VS<sub>q</sub></th><td id='vendi-vs'>–</td></tr><tr><th>qVS<sub>q</sub></th><td id='vendi-qvs'>–</td></tr>\
             <tr><th>qVS<sub>q</sub> / N</th><td id='vendi-qvs-norm'>–</td></tr></tbody></table>\
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

/// Recomputes the panel's numbers for the current controls.
async fn update() {
    match score().await {
        Ok(s) => {
            dom::set_text("vendi-n", &s.n.to_string());
            dom::set_text("vendi-vs", &format!("{:.4}", s.vs));
            dom::set_text("vendi-qvs", &format!("{:.4}", s.qvs));
            dom::set_text("vendi-qvs-norm", &format!("{:.4}", s.qvs_norm));
            dom::clear_error();
        }
        Err(e) => dom::show_error(&format!("Vendi: {e}")),
    }
}

async fn score() -> Result<VendiScore, String> {
    let q = Order::parse(&dom::input_value("vendi-q"))?;
    let kernel = dom::select_value("vendi-kernel");
    let (model, language, culture) = (
        dom::select_value("vendi-model"),
        dom::select_value("vendi-language"),
        dom::select_value("vendi-culture"),
    );
    let use_selection = dom::select_value("vendi-source") == "selection";
    let quality_col = dom::select_value("vendi-quality");
    let weights: Vec<(String, f64)> = {
        let nodes = dom::by_id("view-vendi").query_selector_all("input.weight").map_err(|_| "weights")?;
        (0..nodes.length())
            .filter_map(|i| nodes.item(i))
            .filter_map(|n| wasm_bindgen::JsCast::dyn_into::<web_sys::HtmlInputElement>(n).ok())
            .map(|i| {
                (
                    i.get_attribute("data-column").unwrap_or_default(),
                    i.value().parse::<f64>().unwrap_or(f64::NAN),
                )
            })
            .collect()
    };
    let (rows, table, backend, cat, quality) = with_app(|app| {
        let col =
            |n: &str| app.columns.iter().find(|(c, _)| c == n).map(|(_, v)| v.as_slice()).unwrap_or(&[]);
        let (m, l, c) = (col("model"), col("language"), col("culture"));
        let base: Vec<u32> = if use_selection {
            app.selection.clone()
        } else {
            app.scored.as_ref().map(|s| s.rows.clone()).unwrap_or_default()
        };
        let keep = |want: &str, have: &str| want.is_empty() || want == have;
        let rows: Vec<u32> = base
            .into_iter()
            .filter(|&r| {
                let r = r as usize;
                keep(&model, &m[r]) && keep(&language, &l[r]) && keep(&culture, &c[r])
            })
            .collect();
        let cat: Vec<(String, Vec<String>)> = weights
            .iter()
            .map(|(name, _)| (name.clone(), rows.iter().map(|&r| col(name)[r as usize].clone()).collect()))
            .collect();
        let quality: Option<Vec<f64>> = (!quality_col.is_empty()).then(|| {
            let v = col(&quality_col);
            rows.iter().map(|&r| v[r as usize].parse::<f64>().unwrap_or(f64::NAN)).collect()
        });
        (rows, app.table.clone(), app.compute.backend, cat, quality)
    })
    .ok_or("no bundle loaded")?;
    let n = rows.len();
    if n == 0 {
        return Err("the subset is empty".into());
    }
    let device = table.device();
    let features = if kernel == "categorical" {
        if n > MAX_CATEGORICAL_ROWS {
            return Err(format!(
                "{n} rows; the categorical kernel is limited to {MAX_CATEGORICAL_ROWS} here"
            ));
        }
        let cols: Vec<(&str, &[String])> =
            cat.iter().map(|(name, v)| (name.as_str(), v.as_slice())).collect();
        let w: Vec<f64> = weights.iter().map(|(_, w)| *w).collect();
        categorical_features(&cols, &w).map_err(|e| e.to_string())?
    } else {
        if n > MAX_COSINE_ROWS {
            return Err(format!(
                "{n} rows; the cosine kernel is limited to {MAX_COSINE_ROWS} rows here (narrow the subset)"
            ));
        }
        let [_, d] = table.dims();
        let idx: Vec<i32> = rows.iter().map(|&r| r as i32).collect();
        let x = table.select(0, Tensor::<1, Int>::from_data(TensorData::new(idx, [n]), &device));
        let x: Vec<f32> = x
            .into_data_async()
            .await
            .map_err(|e| format!("{e:?}"))?
            .try_to_vec::<f32>()
            .map_err(|e| format!("{e:?}"))?;
        cosine_features(&x, n, d).map_err(|e| e.to_string())?
    };
    let precision = match backend {
        Backend::WebGpu => Precision::F32,
        Backend::Cpu => Precision::F64,
    };
    let product = product_tensor(&features, Route::Auto, precision, &device)
        .into_data_async()
        .await
        .map_err(|e| format!("{e:?}"))?;
    let spectrum = spectrum_from_product(product, &features, precision);
    Ok(VendiScore::from_spectrum(&spectrum, n, q, quality.as_deref()))
}
