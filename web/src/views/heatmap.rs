//! SoS heatmap, culture × language for the chosen model (SoS paper Fig. 3, App. C): columns and
//! rows sortable by mean, hover shows the value, n and, once computed, the bootstrap interval
//! (`app::intervals`; not for layered tables, whose cells average layers), a click opens the
//! cell's image grid when the bundle has thumbnails. Every cell carries `data-sos`/`data-n` (and
//! `data-lo`/`data-hi`/`data-ci`) so the numbers are in the DOM. A control under the heatmap sets
//! the level and the resamples (`?ci=`, `?bootstrap=`).
//!
//! Rendering is read → check → build: [`render`] reads the model's joint scores into a
//! `culturelens_view::heatmap::Grid` (values, means, sort orders), checks there is something to
//! show, and [`grid_svg`] builds the SVG from the grid alone.

use std::collections::{BTreeMap, BTreeSet};

use culturelens_metrics::bootstrap::{CiSpec, Interval};

use culturelens_view::heatmap::{Grid, Joint};
use wasm_bindgen::JsCast;
use web_sys::Event;

use super::colour::{css, diverging_legend, diverging_rgb, ink};
use super::{Handler, Listen, ci, svg_label};
use crate::dom::{self, esc};
use crate::load::Thumbs;
use crate::state::{Sort, Update, with_app};

const CELL_W: f64 = 70.0;
const CELL_H: f64 = 30.0;
const LEFT: f64 = 130.0;
const TOP: f64 = 44.0;
/// Most thumbnails shown for one cell.
const MAX_IMAGES: usize = 60;

pub fn handlers() -> [Handler; 6] {
    [
        Handler { on: Listen::Id("view-heatmap"), event: "change", run: on_ci_control },
        Handler { on: Listen::Id("view-heatmap"), event: "click", run: on_click },
        Handler { on: Listen::Id("view-heatmap"), event: "keydown", run: on_key },
        Handler { on: Listen::Id("view-heatmap"), event: "mousemove", run: on_hover },
        Handler { on: Listen::Id("view-heatmap"), event: "focusin", run: on_focus },
        Handler { on: Listen::Id("view-heatmap"), event: "focusout", run: hide_tooltip },
    ]
}

/// Enter or Space on a focused cell opens its images, on a focused axis label sorts.
fn on_key(e: &Event) -> Update {
    let Some(k) = e.dyn_ref::<web_sys::KeyboardEvent>() else { return Update::Nothing };
    if k.key() != "Enter" && k.key() != " " {
        return Update::Nothing;
    }
    e.prevent_default();
    on_click(e)
}

/// A focused cell shows the hover tooltip beside it.
fn on_focus(e: &Event) -> Update {
    if let Some((el, _)) = dom::closest_data(e, "sos") {
        let r = el.get_bounding_client_rect();
        let (sx, sy) = (dom::window().scroll_x().unwrap_or(0.0), dom::window().scroll_y().unwrap_or(0.0));
        show_tooltip(&el, r.right() + sx, r.bottom() + sy);
    }
    Update::Nothing
}

/// The level or resamples control: the new setting in the URL, then a recompute (its intervals).
fn on_ci_control(e: &Event) -> Update {
    if ci::on_change("", e) { Update::Recompute } else { Update::Nothing }
}

fn hide_tooltip(_: &Event) -> Update {
    dom::by_id("tooltip").set_attribute("hidden", "").ok();
    Update::Nothing
}

fn on_click(e: &Event) -> Update {
    if let Some((_, axis)) = dom::closest_data(e, "sort") {
        with_app(|app| match axis.as_str() {
            "cols" => app.ui.col_sort = app.ui.col_sort.next(),
            _ => app.ui.row_sort = app.ui.row_sort.next(),
        });
        return Update::Render;
    }
    if let Some((el, culture)) = dom::closest_data(e, "culture") {
        let language = el.get_attribute("data-language").unwrap_or_default();
        show_images(&language, &culture);
    }
    Update::Nothing
}

fn on_hover(e: &Event) -> Update {
    match (dom::closest_data(e, "sos"), e.dyn_ref::<web_sys::MouseEvent>()) {
        (Some((el, _)), Some(m)) => show_tooltip(&el, f64::from(m.page_x()), f64::from(m.page_y())),
        _ => return hide_tooltip(e),
    }
    Update::Nothing
}

/// The tooltip of cell `el` near page position (`x`, `y`).
fn show_tooltip(el: &web_sys::Element, x: f64, y: f64) {
    let attr = |n: &str| el.get_attribute(n).unwrap_or_default();
    let ci = match (el.get_attribute("data-lo"), el.get_attribute("data-hi")) {
        (Some(lo), Some(hi)) => format!(" [{lo}, {hi}], {}", attr("data-ci")),
        _ => String::new(),
    };
    let text = format!(
        "{} × {}: SoS {}{ci} (n = {})",
        attr("data-culture"),
        attr("data-language"),
        attr("data-sos"),
        attr("data-n")
    );
    dom::show_tooltip(&dom::esc(&text), x, y);
}

fn arrow(sort: Sort) -> &'static str {
    match sort {
        Sort::Name => "A–Z",
        Sort::MeanAsc => "mean ↑",
        Sort::MeanDesc => "mean ↓",
    }
}

/// What the heatmap of one model shows, read from the state.
struct Heatmap {
    model: String,
    /// `None` when the model has no scores under the current filter.
    grid: Option<Grid>,
    layered: bool,
    thumbs: bool,
    col_sort: Sort,
    row_sort: Sort,
    /// The intervals' settings once computed, and each cell's interval (layered tables: none).
    ci: Option<CellIntervals>,
}

pub fn render() {
    // Read.
    let Some(Some(h)) = with_app(|app| {
        let scored = app.scored.as_ref()?;
        let model = app.ui.model.clone();
        let cells: Vec<_> = scored.report.joint.iter().filter(|j| j.model == model).collect();
        let joint =
            cells.iter().map(|c| Joint { language: &c.language, culture: &c.culture, sos: c.sos, n: c.n });
        let layered = cells.iter().any(|c| c.layer.is_some());
        let ci = model_intervals(scored, &model);
        Some(Heatmap {
            grid: Grid::new(joint, app.ui.col_sort, app.ui.row_sort),
            ci,
            layered,
            thumbs: !matches!(app.thumbs, Thumbs::None),
            col_sort: app.ui.col_sort,
            row_sort: app.ui.row_sort,
            model,
        })
    }) else {
        return;
    };
    // Check.
    let m = esc(&h.model);
    let Some(grid) = &h.grid else {
        dom::set_html("view-heatmap", &format!("<p>No scores for model {m} under the current filter.</p>"));
        return;
    };
    // Build.
    let note = if h.layered {
        "<p class='muted'>Cells average the layers' joint scores (weighted by n).</p>"
    } else {
        ""
    };
    let thumbs = if h.thumbs { " Click a cell (or press Enter on it) to see its images." } else { "" };
    dom::set_html(
        "view-heatmap",
        &format!(
            "<h2>SoS of {m}: culture × language</h2><p class='what'>Each cell: how the pictures for a culture, \
             prompted in a language, lean — orange towards the language, purple towards the culture.{thumbs}</p>\
             {svg}{legend}{note}{control}<div id='cell-images' tabindex='-1'></div>",
            legend = diverging_legend(grid.limit, 320.0),
            svg = grid_svg(grid, &h.model, h.col_sort, h.row_sort, h.ci.as_ref()),
            control = ci_control(h.ci.as_ref().map(|(spec, _)| spec))
        ),
    );
}

/// A cell's interval, and the settings they were computed with.
type CellIntervals = (CiSpec, BTreeMap<(String, String), Interval>);

/// The intervals of `model`'s cells by (language, culture), once computed; none for a layered
/// table (its heatmap cells average the layers' cells).
fn model_intervals(scored: &crate::state::Scored, model: &str) -> Option<CellIntervals> {
    let spec = scored.ci?;
    let cells: Vec<_> = scored.report.joint.iter().filter(|j| j.model == model).collect();
    if cells.iter().any(|c| c.layer.is_some()) {
        return Some((spec, BTreeMap::new()));
    }
    Some((
        spec,
        cells.iter().filter_map(|c| Some(((c.language.clone(), c.culture.clone()), c.sos_ci?))).collect(),
    ))
}

/// The attributes of a cell's interval (`data-lo`, `data-hi`, `data-ci`) and its words in the
/// cell's `aria-label`.
fn interval_attrs(spec: &CiSpec, i: &Interval) -> [(&'static str, String); 3] {
    [("data-lo", i.lo.to_string()), ("data-hi", i.hi.to_string()), ("data-ci", ci_label(spec))]
}

/// A cell's `aria-label`.
fn cell_aria(culture: &str, language: &str, sos: f64, n: usize, ci: Option<(&CiSpec, &Interval)>) -> String {
    let interval = ci.map_or_else(String::new, |(spec, i)| {
        format!(" [{:.3}, {:.3}] ({}% interval)", i.lo, i.hi, spec.level * 100.0)
    });
    format!("{culture} × {language}: SoS {sos:.3}{interval}, n = {n}")
}

/// Puts the intervals just computed into the heatmap on screen in place (no re-render, so the
/// focus, an open image grid and the tooltip stay); nothing when no heatmap is drawn.
pub fn show_intervals() {
    let Some(Some((spec, cells))) =
        with_app(|app| app.scored.as_ref().and_then(|s| model_intervals(s, &app.ui.model)))
    else {
        return;
    };
    let Some(svg) = dom::document().get_element_by_id("heatmap-svg") else { return };
    let Ok(nodes) = svg.query_selector_all(".cell") else { return };
    for k in 0..nodes.length() {
        let Some(el) = nodes.item(k).and_then(|n| n.dyn_into::<web_sys::Element>().ok()) else { continue };
        let attr = |n: &str| el.get_attribute(n).unwrap_or_default();
        let (language, culture) = (attr("data-language"), attr("data-culture"));
        let Some(interval) = cells.get(&(language.clone(), culture.clone())) else { continue };
        for (name, value) in interval_attrs(&spec, interval) {
            el.set_attribute(name, &value).ok();
        }
        let (sos, n) = (attr("data-sos").parse().unwrap_or(f64::NAN), attr("data-n").parse().unwrap_or(0));
        el.set_attribute("aria-label", &cell_aria(&culture, &language, sos, n, Some((&spec, interval)))).ok();
    }
    if let Some(control) = dom::document().get_element_by_id("ci-control") {
        control.set_outer_html(&ci_control(Some(&spec)));
    }
}

/// How an interval was computed, as the tooltip states it.
fn ci_label(spec: &CiSpec) -> String {
    format!("{}, fast mode", ci::label(spec))
}

/// The level and resamples of the intervals (`spec`: the computed ones; `None` while computing).
fn ci_control(spec: Option<&CiSpec>) -> String {
    let Some(spec) = spec else {
        return "<p class='muted' id='ci-control'>Computing the confidence intervals…</p>".into();
    };
    ci::control(
        "",
        spec,
        "Hover a cell for its interval:",
        "the outputs within each cell",
        "culturelens sos --ci",
    )
}

/// One coloured cell with its value printed in it.
fn cell_svg(x: f64, y: f64, v: f64, limit: f64, attrs: &str) -> String {
    let rgb = diverging_rgb(v, limit);
    format!(
        "<g {attrs}><rect x='{x:.1}' y='{y:.1}' width='{cw:.1}' height='{ch:.1}' fill='{fill}'/>\
         <text x='{tx:.1}' y='{ty:.1}' text-anchor='middle' fill='{ink}'>{v:.3}</text></g>",
        cw = CELL_W - 2.0,
        ch = CELL_H - 2.0,
        fill = css(rgb),
        tx = x + CELL_W / 2.0 - 1.0,
        ty = y + CELL_H / 2.0 + 4.0,
        ink = ink(rgb)
    )
}

/// The heatmap SVG of `grid`: axis labels (sort toggles), one cell per (culture, language) with a
/// value, and the row and column means.
fn grid_svg(grid: &Grid, model: &str, col_sort: Sort, row_sort: Sort, ci: Option<&CellIntervals>) -> String {
    let (langs, cults) = (&grid.languages, &grid.cultures);
    let (w, h) =
        (LEFT + CELL_W * (langs.len() as f64 + 1.0) + 10.0, TOP + CELL_H * (cults.len() as f64 + 1.0) + 10.0);
    let m = esc(model);
    let extremes = |means: &std::collections::BTreeMap<String, f64>| {
        let lo = means.iter().min_by(|a, b| a.1.total_cmp(b.1));
        let hi = means.iter().max_by(|a, b| a.1.total_cmp(b.1));
        match (lo, hi) {
            (Some(lo), Some(hi)) => format!("lowest {} ({:.3}), highest {} ({:.3})", lo.0, lo.1, hi.0, hi.1),
            _ => String::new(),
        }
    };
    let label = format!(
        "SoS heatmap, culture by language, for {model}: {} cultures × {} languages. Language means: {}. Culture means: {}.",
        cults.len(),
        langs.len(),
        extremes(&grid.language_mean),
        extremes(&grid.culture_mean)
    );
    let mut s = format!(
        "<svg id='heatmap-svg' class='figure' data-figure width='{w}' height='{h}' viewBox='0 0 {w} {h}' role='group' aria-label='{}'>",
        esc(&label)
    );
    s.push_str(&format!(
        "<text class='sort' data-sort='rows' tabindex='0' role='button' x='8' y='{}'>culture ({}) ⇅</text>",
        TOP - 8.0,
        arrow(row_sort)
    ));
    s.push_str(&format!(
        "<text class='sort' data-sort='cols' tabindex='0' role='button' x='{}' y='14' text-anchor='middle'>language ({}) ⇄</text>",
        LEFT + CELL_W * langs.len() as f64 / 2.0,
        arrow(col_sort)
    ));
    for (i, l) in langs.iter().enumerate() {
        s.push_str(&svg_label(
            LEFT + CELL_W * (i as f64 + 0.5),
            TOP - 8.0,
            "middle",
            "class='sort' data-sort='cols'",
            l,
        ));
    }
    s.push_str(&format!(
        "<text x='{:.1}' y='{:.1}' text-anchor='middle' class='muted'>mean</text>",
        LEFT + CELL_W * (langs.len() as f64 + 0.5),
        TOP - 8.0
    ));
    for (r, c) in cults.iter().enumerate() {
        let y = TOP + CELL_H * r as f64;
        s.push_str(&svg_label(LEFT - 8.0, y + CELL_H / 2.0 + 4.0, "end", "", c));
        for (i, l) in langs.iter().enumerate() {
            let key = (l.clone(), c.clone());
            if let Some((v, n)) = grid.value.get(&key) {
                let interval = ci.and_then(|(spec, cells)| Some((spec, cells.get(&key)?)));
                let bounds: String = interval
                    .map(|(spec, i)| interval_attrs(spec, i))
                    .into_iter()
                    .flatten()
                    .map(|(name, value)| format!(" {name}='{}'", esc(&value)))
                    .collect();
                let attrs = format!(
                    "class='cell' tabindex='0' role='button' aria-label='{aria}' \
                     data-model='{m}' data-language='{l}' data-culture='{c}' data-sos='{v}' data-n='{n}'{bounds}",
                    aria = esc(&cell_aria(c, l, *v, *n, interval)),
                    l = esc(l),
                    c = esc(c)
                );
                s.push_str(&cell_svg(LEFT + CELL_W * i as f64, y, *v, grid.limit, &attrs));
            }
        }
        let x = LEFT + CELL_W * langs.len() as f64;
        s.push_str(&cell_svg(x, y, grid.culture_mean[c], grid.limit, "class='mean'"));
    }
    let y = TOP + CELL_H * cults.len() as f64;
    s.push_str(&format!(
        "<text x='{:.1}' y='{:.1}' text-anchor='end' class='muted'>mean</text>",
        LEFT - 8.0,
        y + CELL_H / 2.0 + 4.0
    ));
    for (i, l) in langs.iter().enumerate() {
        s.push_str(&cell_svg(LEFT + CELL_W * i as f64, y, grid.language_mean[l], grid.limit, "class='mean'"));
    }
    s.push_str("</svg>");
    s
}

/// Image grid of one (model, language, culture) cell.
fn show_images(language: &str, culture: &str) {
    let html = with_app(|app| {
        let scored = app.scored.as_ref()?;
        let thumb_col = app.column(culturelens_bundle::THUMBNAIL_COLUMN)?;
        let (m, l, c) = (app.column("model")?, app.column("language")?, app.column("culture")?);
        let person = app.column("person");
        let mut seen = BTreeSet::new();
        let imgs: String = scored
            .rows
            .iter()
            .map(|&r| r as usize)
            .filter(|&r| {
                m[r] == app.ui.model && l[r] == language && c[r] == culture && !thumb_col[r].is_empty()
            })
            .filter(|&r| seen.insert(thumb_col[r].clone()))
            .take(MAX_IMAGES)
            .map(|r| {
                let caption = person.map(|p| p[r].as_str()).unwrap_or("");
                format!(
                    "<figure><img src='{}' alt='{}' loading='lazy'><figcaption>{}</figcaption></figure>",
                    esc(&app.thumbs.url(&thumb_col[r])),
                    esc(&format!("{culture} in {language}")),
                    esc(caption)
                )
            })
            .collect();
        let imgs = if imgs.is_empty() { "<p>No images for this cell.</p>".to_string() } else { imgs };
        Some(format!(
            "<h3>Images of {} × {} ({})</h3><div class='grid'>{imgs}</div>",
            esc(culture),
            esc(language),
            esc(&app.ui.model)
        ))
    })
    .flatten();
    if let Some(html) = html {
        dom::set_html("cell-images", &html);
        let grid = dom::by_id("cell-images");
        grid.scroll_into_view();
        if let Ok(h) = grid.dyn_into::<web_sys::HtmlElement>() {
            h.focus().ok();
        }
    }
}
