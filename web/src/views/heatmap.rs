//! SoS heatmap, culture × language for the chosen model (SoS paper Fig. 3, App. C): columns and
//! rows sortable by mean, hover shows the value and n, a click opens the cell's image grid when
//! the bundle has thumbnails. Every cell carries `data-sos`/`data-n` so the numbers are in the DOM.

use std::collections::{BTreeMap, BTreeSet};

use super::colour::{css, diverging_legend, diverging_rgb, ink};
use crate::app::{self, Sort, with_app};
use crate::dom::{self, esc};
use crate::load::Thumbs;

const CELL_W: f64 = 70.0;
const CELL_H: f64 = 30.0;
const LEFT: f64 = 130.0;
const TOP: f64 = 44.0;
/// Most thumbnails shown for one cell.
const MAX_IMAGES: usize = 60;

pub fn wire() {
    dom::on_id("view-heatmap", "click", |e| {
        if let Some((_, axis)) = dom::closest_data(&e, "sort") {
            with_app(|app| match axis.as_str() {
                "cols" => app.ui.col_sort = app.ui.col_sort.next(),
                _ => app.ui.row_sort = app.ui.row_sort.next(),
            });
            app::sync_url();
            render();
        } else if let Some((el, culture)) = dom::closest_data(&e, "culture") {
            let language = el.get_attribute("data-language").unwrap_or_default();
            show_images(&language, &culture);
        }
    });
    dom::on_id("view-heatmap", "mousemove", |e| {
        let tip = dom::by_id("tooltip");
        match dom::closest_data(&e, "sos") {
            Some((el, sos)) => {
                let attr = |n: &str| el.get_attribute(n).unwrap_or_default();
                let m = e.dyn_ref::<web_sys::MouseEvent>();
                tip.set_text_content(Some(&format!(
                    "{} × {}: SoS {} (n = {})",
                    attr("data-culture"),
                    attr("data-language"),
                    sos,
                    attr("data-n")
                )));
                if let (Some(m), Ok(style)) =
                    (m, tip.clone().dyn_into::<web_sys::HtmlElement>().map(|h| h.style()))
                {
                    style.set_property("left", &format!("{}px", m.page_x() + 14)).ok();
                    style.set_property("top", &format!("{}px", m.page_y() + 14)).ok();
                }
                tip.remove_attribute("hidden").ok();
            }
            None => {
                tip.set_attribute("hidden", "").ok();
            }
        }
    });
}

use wasm_bindgen::JsCast;

fn order(names: Vec<String>, means: &BTreeMap<String, f64>, sort: Sort) -> Vec<String> {
    let mut names = names;
    match sort {
        Sort::Name => names.sort(),
        Sort::MeanAsc => names.sort_by(|a, b| means[a].total_cmp(&means[b])),
        Sort::MeanDesc => names.sort_by(|a, b| means[b].total_cmp(&means[a])),
    }
    names
}

fn arrow(sort: Sort) -> &'static str {
    match sort {
        Sort::Name => "A–Z",
        Sort::MeanAsc => "mean ↑",
        Sort::MeanDesc => "mean ↓",
    }
}

pub fn render() {
    let html = with_app(|app| {
        let scored = app.scored.as_ref()?;
        let model = &app.ui.model;
        let cells: Vec<_> = scored.report.joint.iter().filter(|j| &j.model == model).collect();
        if cells.is_empty() {
            return Some(format!("<p>No scores for model {} under the current filter.</p>", esc(model)));
        }
        let layered = cells.iter().any(|c| c.layer.is_some());
        let mut value: BTreeMap<(String, String), (f64, usize)> = BTreeMap::new();
        let (mut col_sum, mut row_sum): (BTreeMap<String, Vec<f64>>, BTreeMap<String, Vec<f64>>) = Default::default();
        for c in &cells {
            // With layers, a cell averages its layers' joint scores (weighted by n).
            let e = value.entry((c.language.clone(), c.culture.clone())).or_insert((0.0, 0));
            e.0 += c.sos * c.n as f64;
            e.1 += c.n;
        }
        for ((l, c), (s, n)) in value.iter_mut() {
            *s /= *n as f64;
            col_sum.entry(l.clone()).or_default().push(*s);
            row_sum.entry(c.clone()).or_default().push(*s);
        }
        let mean = |m: BTreeMap<String, Vec<f64>>| -> BTreeMap<String, f64> {
            m.into_iter().map(|(k, v)| (k, v.iter().sum::<f64>() / v.len() as f64)).collect()
        };
        let (col_mean, row_mean) = (mean(col_sum), mean(row_sum));
        let langs = order(col_mean.keys().cloned().collect(), &col_mean, app.ui.col_sort);
        let cults = order(row_mean.keys().cloned().collect(), &row_mean, app.ui.row_sort);
        let limit = value.values().map(|(s, _)| s.abs()).fold(0.05, f64::max);
        let (w, h) = (LEFT + CELL_W * (langs.len() as f64 + 1.0) + 10.0, TOP + CELL_H * (cults.len() as f64 + 1.0) + 10.0);
        let mut s = format!(
            "<svg id='heatmap-svg' width='{w}' height='{h}' role='img' aria-label='SoS heatmap culture by language for {m}'>",
            m = esc(model)
        );
        s.push_str(&format!(
            "<text class='sort' data-sort='rows' x='8' y='{}'>culture ({}) ⇅</text>",
            TOP - 8.0,
            arrow(app.ui.row_sort)
        ));
        s.push_str(&format!(
            "<text class='sort' data-sort='cols' x='{}' y='14' text-anchor='middle'>language ({}) ⇄</text>",
            LEFT + CELL_W * langs.len() as f64 / 2.0,
            arrow(app.ui.col_sort)
        ));
        for (i, l) in langs.iter().enumerate() {
            s.push_str(&format!(
                "<text class='sort' data-sort='cols' x='{:.1}' y='{:.1}' text-anchor='middle'>{}</text>",
                LEFT + CELL_W * (i as f64 + 0.5),
                TOP - 8.0,
                esc(l)
            ));
        }
        s.push_str(&format!(
            "<text x='{:.1}' y='{:.1}' text-anchor='middle' class='muted'>mean</text>",
            LEFT + CELL_W * (langs.len() as f64 + 0.5),
            TOP - 8.0
        ));
        let cell_svg = |x: f64, y: f64, v: f64, attrs: &str| {
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
        };
        for (r, c) in cults.iter().enumerate() {
            let y = TOP + CELL_H * r as f64;
            s.push_str(&format!("<text x='{:.1}' y='{:.1}' text-anchor='end'>{}</text>", LEFT - 8.0, y + CELL_H / 2.0 + 4.0, esc(c)));
            for (i, l) in langs.iter().enumerate() {
                if let Some((v, n)) = value.get(&(l.clone(), c.clone())) {
                    let attrs = format!(
                        "class='cell' data-model='{m}' data-language='{l}' data-culture='{c}' data-sos='{v}' data-n='{n}'",
                        m = esc(model),
                        l = esc(l),
                        c = esc(c)
                    );
                    s.push_str(&cell_svg(LEFT + CELL_W * i as f64, y, *v, &attrs));
                }
            }
            s.push_str(&cell_svg(LEFT + CELL_W * langs.len() as f64, y, row_mean[c], "class='mean'"));
        }
        let y = TOP + CELL_H * cults.len() as f64;
        s.push_str(&format!("<text x='{:.1}' y='{:.1}' text-anchor='end' class='muted'>mean</text>", LEFT - 8.0, y + CELL_H / 2.0 + 4.0));
        for (i, l) in langs.iter().enumerate() {
            s.push_str(&cell_svg(LEFT + CELL_W * i as f64, y, col_mean[l], "class='mean'"));
        }
        s.push_str("</svg>");
        let note = if layered { "<p class='muted'>Cells average the layers' joint scores (weighted by n).</p>" } else { "" };
        let thumbs = if matches!(app.thumbs, Thumbs::None) { "" } else { "<p class='muted'>Click a cell to see its images.</p>" };
        Some(format!(
            "<h2>SoS of {m}: culture × language</h2>{legend}{s}{note}{thumbs}<div id='cell-images'></div>",
            m = esc(model),
            legend = diverging_legend(limit, 320.0)
        ))
    })
    .flatten();
    if let Some(html) = html {
        dom::set_html("view-heatmap", &html);
    }
}

/// Image grid of one (model, language, culture) cell.
fn show_images(language: &str, culture: &str) {
    let html = with_app(|app| {
        let scored = app.scored.as_ref()?;
        let thumb_col = app.columns.iter().find(|(n, _)| n == culturelens_bundle::THUMBNAIL_COLUMN)?;
        let col = |n: &str| app.columns.iter().find(|(c, _)| c == n).map(|(_, v)| v.as_slice());
        let (m, l, c) = (col("model")?, col("language")?, col("culture")?);
        let person = col("person");
        let mut seen = BTreeSet::new();
        let imgs: String = scored
            .rows
            .iter()
            .map(|&r| r as usize)
            .filter(|&r| {
                m[r] == app.ui.model && l[r] == language && c[r] == culture && !thumb_col.1[r].is_empty()
            })
            .filter(|&r| seen.insert(thumb_col.1[r].clone()))
            .take(MAX_IMAGES)
            .map(|r| {
                let caption = person.map(|p| p[r].as_str()).unwrap_or("");
                format!(
                    "<figure><img src='{}' alt='{}' loading='lazy'><figcaption>{}</figcaption></figure>",
                    esc(&thumb_url(&app.thumbs, &thumb_col.1[r])),
                    esc(&format!("{culture} in {language}")),
                    esc(caption)
                )
            })
            .collect();
        Some(format!(
            "<h3>{} × {} ({})</h3><div class='grid'>{imgs}</div>",
            esc(culture),
            esc(language),
            esc(&app.ui.model)
        ))
    })
    .flatten();
    if let Some(html) = html {
        dom::set_html("cell-images", &html);
    }
}

/// URL of a thumbnail: under the served bundle, or an object URL of the local file.
pub fn thumb_url(thumbs: &Thumbs, path: &str) -> String {
    match thumbs {
        Thumbs::None => String::new(),
        Thumbs::Url(base) => format!("{base}{path}"),
        Thumbs::Files(files) => files
            .get(path)
            .and_then(|f| web_sys::Url::create_object_url_with_blob(f).ok())
            .unwrap_or_default(),
    }
}
