//! 2-D PCA scatter of all embeddings (SoS paper App. E), coloured by language, culture or model
//! (Okabe–Ito palette), with box or lasso selection that feeds the Vendi panel.
//!
//! Two stacked canvases: `#scatter-points` holds the points, `#scatter-canvas` (on top, transparent)
//! takes the pointer and shows the selection outline, so drawing a selection redraws only the
//! outline. With the WebGPU backend the points are GPU sprites (`scatter_gpu.rs`,
//! `shaders/scatter.wgsl`: one instanced draw call into an offscreen texture, read back); with the
//! CPU backend, or when WebGPU rendering fails, they are rasterised into one RGBA buffer. Either
//! way the frame reaches the canvas with a single `putImageData`. Both put each point
//! on the same pixels. `#scatter-points[data-renderer]` says which one drew.

use std::cell::RefCell;
use std::collections::BTreeMap;

use wasm_bindgen::{Clamped, JsCast};
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement, ImageData, MouseEvent};

use super::colour::{category, css};
use super::scatter_gpu;
use crate::app::{self, with_app};
use crate::dom::{self, esc};
use crate::pca;

const W: u32 = 820;
const H: u32 = 560;
const MARGIN: f64 = 12.0;
/// Side of an unselected and of a selected point, pixels.
const POINT_PX: [u32; 2] = [2, 3];

thread_local! {
    /// The pointer path of the selection being drawn (canvas pixels).
    static DRAG: RefCell<Option<Vec<(f64, f64)>>> = const { RefCell::new(None) };
    /// Number of the latest frame asked for; a GPU frame that finishes later than a newer one
    /// is dropped.
    static FRAME: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

pub fn wire() {
    dom::on_id("view-scatter", "change", |e| {
        if let Some(sel) = e.target().and_then(|t| t.dyn_into::<web_sys::HtmlSelectElement>().ok())
            && sel.id() == "colour-by"
        {
            let v = sel.value();
            with_app(|app| app.ui.colour_by = v);
            app::sync_url();
            draw();
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
            draw_overlay();
        }
    });
    dom::on(&dom::document(), "mouseup", |_| {
        let Some(path) = DRAG.with(|d| d.borrow_mut().take()) else { return };
        if path.len() < 2 {
            draw_overlay();
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
             <div class='scatter-stack'><canvas id='scatter-points' width='{W}' height='{H}'></canvas>\
             <canvas id='scatter-canvas' width='{W}' height='{H}'></canvas></div><div id='scatter-legend'></div>\
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
                    let ms = dom::now_ms() - t0;
                    dom::status(&format!("PCA in {ms:.0} ms"));
                    dom::set_body_attr("data-pca-ms", &format!("{ms:.0}"));
                    draw();
                }
                Err(e) => dom::show_error(&format!("PCA failed: {e}")),
            }
        });
    } else {
        draw();
    }
}

fn canvas(id: &str) -> Option<HtmlCanvasElement> {
    dom::document().get_element_by_id(id)?.dyn_into().ok()
}

fn context_2d(canvas: &HtmlCanvasElement) -> Option<CanvasRenderingContext2d> {
    canvas.get_context("2d").ok().flatten()?.dyn_into().ok()
}

/// Draws the points (selected ones larger, black and on top), the selection outline, the count
/// and the legend. With WebGPU the frame is rendered on the GPU asynchronously; a newer draw
/// supersedes one still in flight.
pub fn draw() {
    let Some(points) = canvas("scatter-points") else { return };
    let Some((coords, colours, legend, selected, gpu)) = with_app(|app| {
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
        Some((coords, colours, legend, selected, app.compute.gpu.clone()))
    })
    .flatten() else {
        return;
    };
    let t = Transform::fit(&coords);
    let t0 = dom::now_ms();
    let frame = FRAME.with(|f| {
        f.set(f.get() + 1);
        f.get()
    });
    let n_selected = selected.iter().filter(|s| **s).count();
    let done = move |points: &HtmlCanvasElement, renderer: &str| {
        points.set_attribute("data-renderer", renderer).ok();
        points.set_attribute("data-draw-ms", &format!("{:.1}", dom::now_ms() - t0)).ok();
        draw_overlay();
        dom::set_text("selection-count", &format!("{n_selected} selected"));
        let items: String = legend
            .iter()
            .map(|(name, i)| {
                format!(
                    "<span class='key'><i style='background:{}'></i>{}</span>",
                    css(category(*i)),
                    esc(name)
                )
            })
            .collect();
        dom::set_html("scatter-legend", &items);
    };
    let Some(gpu) = gpu else {
        raster(&points, &t, &coords, &colours, &selected);
        done(&points, "canvas2d");
        return;
    };
    let mut instances = Vec::with_capacity(colours.len() * scatter_gpu::INSTANCE_BYTES);
    for pass in [false, true] {
        for i in (0..colours.len()).filter(|&i| selected[i] == pass) {
            let rgb = category(colours[i] as usize);
            scatter_gpu::push_instance(&mut instances, coords[2 * i], coords[2 * i + 1], rgb, pass);
        }
    }
    let view = scatter_gpu::ViewUniform {
        centre: [t.x0, t.y0],
        scale: t.scale,
        canvas: [W as f32, H as f32],
        point: [POINT_PX[0] as f32, POINT_PX[1] as f32],
    };
    dom::set_text("selection-count", "");
    wasm_bindgen_futures::spawn_local(async move {
        let pixels = scatter_gpu::render(&instances, view, W, H, &gpu).await;
        if FRAME.with(|f| f.get()) != frame {
            return;
        }
        match pixels {
            Ok(px) => {
                put_pixels(&points, &px);
                done(&points, "webgpu");
            }
            Err(e) => {
                dom::status(&format!("scatter drawn on the CPU: {e}"));
                raster(&points, &t, &coords, &colours, &selected);
                done(&points, "canvas2d");
            }
        }
    });
}

fn put_pixels(canvas: &HtmlCanvasElement, px: &[u8]) {
    let Some(ctx) = context_2d(canvas) else { return };
    if let Ok(image) = ImageData::new_with_u8_clamped_array_and_sh(Clamped(px), W, H) {
        ctx.put_image_data(&image, 0.0, 0.0).ok();
    }
}

/// CPU rasteriser: the points into one RGBA buffer, one `putImageData`.
fn raster(canvas: &HtmlCanvasElement, t: &Transform, coords: &[f32], colours: &[u8], selected: &[bool]) {
    let (w, h) = (W as usize, H as usize);
    let mut px = vec![255u8; w * h * 4];
    let mut put = |x: i64, y: i64, rgb: [u8; 3]| {
        if x >= 0 && y >= 0 && (x as usize) < w && (y as usize) < h {
            let o = (y as usize * w + x as usize) * 4;
            px[o..o + 3].copy_from_slice(&rgb);
        }
    };
    for pass in [false, true] {
        for i in (0..colours.len()).filter(|&i| selected[i] == pass) {
            let (x, y) = t.apply(coords[2 * i], coords[2 * i + 1]);
            let (x, y) = (x as i64, y as i64);
            let (rgb, r) =
                if pass { ([0, 0, 0], POINT_PX[1]) } else { (category(colours[i] as usize), POINT_PX[0]) };
            for dy in 0..i64::from(r) {
                for dx in 0..i64::from(r) {
                    put(x + dx, y + dy, rgb);
                }
            }
        }
    }
    put_pixels(canvas, &px);
}

/// The selection outline being drawn (box or lasso) on the transparent top canvas.
fn draw_overlay() {
    let Some(ctx) = canvas("scatter-canvas").as_ref().and_then(context_2d) else { return };
    ctx.clear_rect(0.0, 0.0, f64::from(W), f64::from(H));
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
}
