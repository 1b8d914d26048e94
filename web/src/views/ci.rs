//! The bootstrap intervals' words and their level/resamples control, shared by the SoS heatmap
//! and the Vendi panel. Both read their settings from the page's URL (`state::ci_spec`:
//! `?ci=&bootstrap=&seed=&ci-method=`); the control writes `ci` and `bootstrap` there.

use culturelens_metrics::bootstrap::{CiMethod, CiSpec};
use wasm_bindgen::JsCast;
use web_sys::Event;

/// The name of an interval method in words.
pub fn method_name(spec: &CiSpec) -> &'static str {
    match spec.method {
        CiMethod::Bca => "BCa",
        CiMethod::Percentile => "percentile",
    }
}

/// How an interval was computed, as a tooltip states it.
pub fn label(spec: &CiSpec) -> String {
    format!(
        "{}% {} bootstrap, {} resamples, seed {}",
        spec.level * 100.0,
        method_name(spec),
        spec.resamples,
        spec.seed
    )
}

/// The level and resamples control of `spec`, its selects `{prefix}ci-level` and
/// `{prefix}ci-resamples`, in a `<p id='{prefix}ci-control'>` that starts with `lead` and ends
/// by naming the resampled `unit` and the CLI `command` that gives the same intervals.
pub fn control(prefix: &str, spec: &CiSpec, lead: &str, unit: &str, command: &str) -> String {
    let options = |values: &[f64], current: f64, show: &dyn Fn(f64) -> String| -> String {
        let mut values = values.to_vec();
        if !values.contains(&current) {
            values.push(current);
        }
        values
            .iter()
            .map(|&v| {
                let selected = if v == current { " selected" } else { "" };
                format!("<option value='{v}'{selected}>{}</option>", show(v))
            })
            .collect()
    };
    format!(
        "<p class='muted' id='{prefix}ci-control'>{lead} <label>level <select id='{prefix}ci-level'>{}</select></label> \
         <label>resamples <select id='{prefix}ci-resamples'>{}</select></label> \
         ({} bootstrap of {unit}, seed {}, as <code>{command}</code>).</p>",
        options(&[0.9, 0.95, 0.99], spec.level, &|v| format!("{}%", v * 100.0)),
        options(&[200.0, 1000.0, 2000.0], spec.resamples as f64, &|v| format!("{v}")),
        method_name(spec),
        spec.seed
    )
}

/// A change of the control with this `prefix`: its setting written to the URL (`ci` or
/// `bootstrap`); whether the event was one.
pub fn on_change(prefix: &str, e: &Event) -> bool {
    let Some(select) = e.target().and_then(|t| t.dyn_into::<web_sys::HtmlSelectElement>().ok()) else {
        return false;
    };
    let id = select.id();
    let name = match id.strip_prefix(prefix) {
        Some("ci-level") => "ci",
        Some("ci-resamples") => "bootstrap",
        _ => return false,
    };
    let p = crate::state::params();
    p.set(name, &select.value());
    crate::state::replace_params(&p);
    true
}
