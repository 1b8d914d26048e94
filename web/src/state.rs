//! The app state (a leaf module: it depends on no view and not on the app flow): the loaded
//! bundle and its result tables, the device table, the filter and UI state, the latest SoS
//! computation and the scatter selection; [`with_app`] to reach it, and the URL sync. Views read and change the state and
//! return an [`Update`] saying what the app must do next; `app.rs` does it.

use std::cell::RefCell;
use std::rc::Rc;

use culturelens_bundle::Manifest;
use culturelens_compute::sos::{Pooling, SosLayout, SosReport};
use culturelens_metrics::bootstrap::{CiMethod, CiSpec, DEFAULT_RESAMPLES, check_level};
pub use culturelens_view::filter::Filter;
pub use culturelens_view::url::{Slide, Sort, Ui, VIEWS};
use web_sys::UrlSearchParams;

use crate::compute::Compute;
use crate::dom;
use crate::load::{Results, Thumbs};
use crate::table::DeviceTable;

/// One SoS computation over the filtered rows.
pub struct Scored {
    /// Rows of the bundle that were scored (all rows when the filter keeps everything).
    pub rows: Vec<u32>,
    pub layout: SosLayout,
    pub per_image: Vec<f32>,
    /// The joint scores; with [`Scored::ci`], each `sos_ci` holds its interval.
    pub report: SosReport,
    /// The settings of the bootstrap intervals in `report`, once they are computed (after the
    /// first heatmap, `app::intervals`).
    pub ci: Option<CiSpec>,
}

/// The page's interval settings, `?ci=LEVEL&bootstrap=B&seed=S&ci-method=bca|percentile`
/// (defaults 0.95, 1000, 0, bca, as `culturelens sos --ci`); a value out of range falls back to
/// its default.
pub fn ci_spec() -> CiSpec {
    let p = params();
    let level = p.get("ci").and_then(|v| v.parse().ok()).filter(|&l| check_level(l).is_ok()).unwrap_or(0.95);
    let resamples = p
        .get("bootstrap")
        .and_then(|v| v.parse().ok())
        .filter(|b| (1..=MAX_RESAMPLES).contains(b))
        .unwrap_or(DEFAULT_RESAMPLES);
    let seed = p.get("seed").and_then(|v| v.parse().ok()).unwrap_or(0);
    let method = match p.get("ci-method").as_deref() {
        Some("percentile") => CiMethod::Percentile,
        _ => CiMethod::Bca,
    };
    CiSpec::new(level, resamples, seed, method).expect("level and resamples checked")
}

/// Most resamples the page draws (`?bootstrap=`).
pub const MAX_RESAMPLES: usize = 10_000;

/// Everything the views read.
pub struct App {
    pub manifest: Manifest,
    pub columns: Vec<(String, Vec<String>)>,
    pub thumbs: Thumbs,
    pub compute: Compute,
    /// The whole table on the device, uploaded once.
    pub table: DeviceTable,
    /// The result tables the bundle carries.
    pub results: Results,
    pub filter: Filter,
    pub scored: Option<Scored>,
    pub ui: Ui,
    /// 2-D PCA coordinates of every row (row-major N × 2), computed on first use.
    pub pca: Option<Rc<Vec<f32>>>,
    /// Rows picked in the scatter (box or lasso), for the Vendi panel.
    pub selection: Vec<u32>,
}

impl App {
    /// The metadata column `name`, if the bundle has it.
    pub fn column(&self, name: &str) -> Option<&[String]> {
        self.columns.iter().find(|(c, _)| c == name).map(|(_, v)| v.as_slice())
    }

    /// The SoS reference pooling the filter asks for.
    pub fn pooling(&self) -> Pooling {
        if self.filter.per_model { Pooling::PerModel } else { Pooling::All }
    }
}

/// What the app must do after an interaction changed the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update {
    /// Nothing more: the handler updated its own part of the page.
    Nothing,
    /// The UI state changed: write it into the URL.
    Url,
    /// Write the URL and re-render the active view.
    Render,
    /// The filter changed: recompute SoS on the device, then re-render.
    Recompute,
}

thread_local! {
    static APP: RefCell<Option<App>> = const { RefCell::new(None) };
}

/// Runs `f` on the app state (if a bundle is loaded).
pub fn with_app<R>(f: impl FnOnce(&mut App) -> R) -> Option<R> {
    APP.with(|a| a.borrow_mut().as_mut().map(f))
}

/// Replaces the app state (a new bundle was loaded).
pub fn install(app: App) {
    APP.with(|a| *a.borrow_mut() = Some(app));
}

/// The page URL's query parameters.
pub fn params() -> UrlSearchParams {
    let search = dom::window().location().search().unwrap_or_default();
    UrlSearchParams::new_with_str(&search).expect("URLSearchParams")
}

/// Writes `p` as the page URL's query (replaceState: shareable, no history spam).
pub fn replace_params(p: &UrlSearchParams) {
    let url = format!("?{}", String::from(p.to_string()));
    if let Ok(history) = dom::window().history() {
        history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&url)).ok();
    }
}

/// Writes the UI state into the URL.
pub fn sync_url() {
    let Some(ui) = with_app(|a| a.ui.clone()) else { return };
    let p = params();
    for (k, v) in ui.params() {
        if v.is_empty() {
            p.delete(k);
        } else {
            p.set(k, v);
        }
    }
    replace_params(&p);
}
