//! 2-D PCA scatter of all embeddings (SoS paper App. E), coloured by language, culture or model
//! (Okabe–Ito palette), with box or lasso selection that feeds the Vendi panel. Points are
//! rasterised into one RGBA buffer per frame (a single `putImageData`), which stays interactive
//! at 150k points.

use std::cell::RefCell;
use std::collections::BTreeMap;

use wasm_bindgen::{Clamped, JsCast};
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement, ImageData, MouseEvent};

use super::colour::{category, css};
use crate::app::{self, with_app};
use crate::dom::{self, esc};
use crate::pca;

const W: u32 = 820;
const H: u32 = 560;
const MARGIN: f64 = 12.0;

thread_local! {
    /// The pointer path of the selection being drawn (canvas pixels).
    static DRAG: RefCell<Option<Vec<(f64, f64)>>> = const { RefCell::new(None) };
}

pub fn wire() {
    dom::on_id("view-scatter", "change", |e| {
        if let Some(sel) = e.target().and_then(|t| t.dyn_into::<web_sys::HtmlSelectElement>().ok()) {
            if sel.id() == "colour-by" {
                let v = sel.value();
                with_app(|app| app.ui.colour_by = v);
                app::sync_url();
                draw();
            }
        }
    });
    dom::on_id("view-scatter", "click", |e| {
        if let Some((_, action)) = dom::closest_data(&e, "action") {
            match action.as_str() {
                "clear" => {
                    with_app(|app| app.selection.clear());
                    draw();
                }
                "vendi" => super::switch("vendi"),
                _ => {}
            }
        }
    });
    dom::on_id("view-scatter", "mousedown", |e| {
        if let Some(p) = canvas_point(&e) {
            DRAG.with(|d| *d.borrow_mut() = Some(vec![p]));
        }
    });
    dom::on_id("view-scatter", "mousemove", |e| {
        let Some(p) = canvas_point(&e) else { return };
        let dragging = DRAG.with(|d| d.borrow_mut().as_mut().map(|path| path.push(p)).is_some());
        if dragging {
            draw();
        }
    });
    dom::on(&dom::document(), "mouseup", |_| {
        let Some(path) = DRAG.with(|d| d.borrow_mut().take()) else { return };
        if path.len() < 2 {
            draw();
            return;
        }
        let lasso = dom::select_value("select-mode") == "lasso";
        with_app(|app| {
            let Some(coords) = app.pca.clone() else { return };
            let t = Transform::fit(&coords);
            app.selection = (0..coords.len() / 2)
                .filter(|&i| {
                    let p = t.apply(coords[2 * i], coords[2 * i + 1]);
                    if lasso {
                        inside_polygon(p, &path)
                    } else {
                        inside_box(p, path[0], *path.last().unwrap())
                    }
                })
                .map(|i| i as u32)
                .collect();
        });
        draw();
    });
}

fn canvas_point(e: &web_sys::Event) -> Option<(f64, f64)> {
    let m = e.dyn_ref::<MouseEvent>()?;
    let canvas: HtmlCanvasElement = e.target()?.dyn_into().ok()?;
    if canvas.id() != "scatter-canvas" && DRAG.with(|d| d.borrow().is_none()) {
        return None;
    }
    let canvas: HtmlCanvasElement = dom::by_id("scatter-canvas").dyn_into().ok()?;
    let r = canvas.get_bounding_client_rect();
    Some((
        (f64::from(m.client_x()) - r.left()) * f64::from(W) / r.width(),
        (f64::from(m.client_y()) - r.top()) * f64::from(H) / r.height(),
    ))
}

fn inside_box(p: (f64, f64), a: (f64, f64), b: (f64, f64)) -> bool {
    p.0 >= a.0.min(b.0) && p.0 <= a.0.max(b.0) && p.1 >= a.1.min(b.1) && p.1 <= a.1.max(b.1)
}

/// Even-odd rule point-in-polygon.
fn inside_polygon(p: (f64, f64), poly: &[(f64, f64)]) -> bool {
    let mut inside = false;
    let mut j = poly.len() - 1;
    for i in 0..poly.len() {
        let (a, b) = (poly[i], poly[j]);
        if (a.1 > p.1) != (b.1 > p.1) && p.0 < (b.0 - a.0) * (p.1 - a.1) / (b.1 - a.1) + a.0 {
            inside = !inside;
        }
        j = i;
    }
    inside
}

/// Data → canvas pixels, fitted to the point cloud.
struct Transform {
    x0: f32,
    y0: f32,
    scale: f32,
}

impl Transform {
    fn fit(coords: &[f32]) -> Transform {
        let (mut lo, mut hi) = ([f32::MAX; 2], [f32::MIN; 2]);
        for p in coords.chunks_exact(2) {
            for k in 0..2 {
                lo[k] = lo[k].min(p[k]);
                hi[k] = hi[k].max(p[k]);
            }
        }
        let span = ((hi[0] - lo[0]) / (W as f32 - 2.0 * MARGIN as f32))
            .max((hi[1] - lo[1]) / (H as f32 - 2.0 * MARGIN as f32))
            .max(1e-12);
        Transform { x0: (lo[0] + hi[0]) / 2.0, y0: (lo[1] + hi[1]) / 2.0, scale: 1.0 / span }
    }

    fn apply(&self, x: f32, y: f32) -> (f64, f64) {
        (
            f64::from((x - self.x0) * self.scale) + f64::from(W) / 2.0,
            f64::from(H) / 2.0 - f64::from((y - self.y0) * self.scale),
        )
    }
}

pub fn render() {
    let needs_pca = with_app(|app| app.pca.is_none()).unwrap_or(false);
    let options: String = ["language", "culture", "model"]
        .iter()
        .map(|c| {
            let sel = with_app(|a| a.ui.colour_by == *c).unwrap_or(false);
            format!("<option value='{c}'{}>{c}</option>", if sel { " selected" } else { "" })
        })
        .collect();
    dom::set_html(
        "view-scatter",
        &format!(
            "<h2>PCA of the embeddings</h2><div class='controls'><label>Colour by <select id='colour-by'>{options}</select></label>\
             <label>Select <select id='select-mode'><option value='box'>box</option><option value='lasso'>lasso</option></select></label>\
             <button type='button' data-action='clear'>Clear selection</button>\
             <button type='button' data-action='vendi'>Vendi of selection →</button> <span id='selection-count'></span></div>\
             <canvas id='scatter-canvas' width='{W}' height='{H}'></canvas><div id='scatter-legend'></div>\
             <p class='muted'>Axes: first two principal components of the L2-normalised embeddings (covariance from ≤ {} rows).</p>",
            pca::SAMPLE_ROWS
        ),
    );
    if needs_pca {
        dom::status("computing PCA…");
        wasm_bindgen_futures::spawn_local(async {
            let Some(table) = with_app(|app| app.table.clone()) else { return };
            let t0 = dom::now_ms();
            match pca::pca2(&table).await {
                Ok(coords) => {
                    with_app(|app| app.pca = Some(std::rc::Rc::new(coords)));
                    dom::status(&format!("PCA in {:.0} ms", dom::now_ms() - t0));
                    draw();
                }
                Err(e) => dom::show_error(&format!("PCA failed: {e}")),
            }
        });
    } else {
        draw();
    }
}

/// Rasterises the points (2 × 2 px, selected ones larger and black) and the selection outline.
pub fn draw() {
    let Ok(canvas) = dom::document()
        .get_element_by_id("scatter-canvas")
        .ok_or(())
        .and_then(|c| c.dyn_into::<HtmlCanvasElement>().map_err(|_| ()))
    else {
        return;
    };
    let Some((coords, colours, legend, selected)) = with_app(|app| {
        let coords = app.pca.clone()?;
        let values = app.columns.iter().find(|(c, _)| *c == app.ui.colour_by).map(|(_, v)| v.as_slice())?;
        let mut index: BTreeMap<&str, usize> = BTreeMap::new();
        for v in values {
            let next = index.len();
            index.entry(v.as_str()).or_insert(next);
        }
        let legend: Vec<(String, usize)> = index.iter().map(|(k, i)| (k.to_string(), *i)).collect();
        let colours: Vec<u8> = values.iter().map(|v| index[v.as_str()] as u8).collect();
        let mut selected = vec![false; values.len()];
        app.selection.iter().for_each(|&r| selected[r as usize] = true);
        Some((coords, colours, legend, selected))
    })
    .flatten() else {
        return;
    };
    let t = Transform::fit(&coords);
    let (w, h) = (W as usize, H as usize);
    let mut px = vec![255u8; w * h * 4];
    let mut put = |x: i64, y: i64, rgb: [u8; 3]| {
        if x >= 0 && y >= 0 && (x as usize) < w && (y as usize) < h {
            let o = (y as usize * w + x as usize) * 4;
            px[o..o + 3].copy_from_slice(&rgb);
        }
    };
    for pass in [false, true] {
        for i in 0..colours.len() {
            if selected[i] != pass {
                continue;
            }
            let (x, y) = t.apply(coords[2 * i], coords[2 * i + 1]);
            let (x, y) = (x as i64, y as i64);
            let (rgb, r) = if pass { ([0, 0, 0], 2) } else { (category(colours[i] as usize), 1) };
            for dy in 0..r {
                for dx in 0..r {
                    put(x + dx, y + dy, rgb);
                }
            }
        }
    }
    let ctx: CanvasRenderingContext2d =
        canvas.get_context("2d").ok().flatten().and_then(|c| c.dyn_into().ok()).expect("2d context");
    if let Ok(image) = ImageData::new_with_u8_clamped_array_and_sh(Clamped(&px), W, H) {
        ctx.put_image_data(&image, 0.0, 0.0).ok();
    }
    if let Some(path) = DRAG.with(|d| d.borrow().clone()) {
        ctx.set_stroke_style_str("#000");
        ctx.begin_path();
        if dom::select_value("select-mode") == "lasso" {
            for (k, (x, y)) in path.iter().enumerate() {
                if k == 0 { ctx.move_to(*x, *y) } else { ctx.line_to(*x, *y) }
            }
            ctx.close_path();
        } else {
            let (a, b) = (path[0], *path.last().unwrap());
            ctx.rect(a.0.min(b.0), a.1.min(b.1), (a.0 - b.0).abs(), (a.1 - b.1).abs());
        }
        ctx.stroke();
    }
    let n_sel = selected.iter().filter(|s| **s).count();
    dom::set_text("selection-count", &format!("{n_sel} selected"));
    let items: String = legend
        .iter()
        .map(|(name, i)| {
            format!("<span class='key'><i style='background:{}'></i>{}</span>", css(category(*i)), esc(name))
        })
        .collect();
    dom::set_html("scatter-legend", &items);
}
