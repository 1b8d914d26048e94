//! 2-D PCA scatter of all embeddings (SoS paper App. E), coloured by language, culture or model
//! (Okabe–Ito palette), with box or lasso selection that feeds the Vendi panel.
//!
//! Two stacked canvases: `#scatter-points` holds the points, `#scatter-canvas` (on top, transparent)
//! takes the pointer and shows the selection outline, so drawing a selection redraws only the
//! outline. With the WebGPU backend the points are GPU sprites (`scatter_gpu.rs`,
//! `shaders/scatter.wgsl`: one instanced draw call into an offscreen texture, read back); with the
//! CPU backend, or when WebGPU rendering fails, they are rasterised into one RGBA buffer. Either
//! way the frame reaches the canvas with a single `putImageData`. Both put each point
//! on the same pixels. `#scatter-points[data-renderer]` says which one drew. The geometry
//! (transform, box and lasso) is `culturelens_view::selection`; the drawn coordinates and the
//! selected rows are in the DOM (`#scatter-data`, `#scatter-canvas[data-selection]`), so tests
//! can check the selection against the points.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use culturelens_view::selection::{HEIGHT as H, Shape, Transform, WIDTH as W, nearest, select};
use wasm_bindgen::{Clamped, JsCast};
use web_sys::{
    CanvasRenderingContext2d, Event, HtmlCanvasElement, ImageData, KeyboardEvent, MouseEvent, PointerEvent,
};

use super::colour::{category, css};
use super::{Handler, Listen, scatter_gpu, switch};
use crate::compute::GpuHandles;
use crate::dom::{self, esc};
use crate::pca;
use crate::state::{Update, with_app};

/// Side of an unselected and of a selected point, pixels.
const POINT_PX: [u32; 2] = [2, 3];
/// Hover reach: the nearest point within this many canvas pixels shows its thumbnail.
const HOVER_PX: f64 = 6.0;

thread_local! {
    /// The pointer path of the selection being drawn (canvas pixels).
    static DRAG: RefCell<Option<Vec<(f64, f64)>>> = const { RefCell::new(None) };
    /// Number of the latest frame asked for; a GPU frame that finishes later than a newer one
    /// is dropped.
    static FRAME: Cell<u64> = const { Cell::new(0) };
    /// The row whose tooltip the keyboard shows (arrow keys on the focused scatter).
    static KEY_ROW: Cell<Option<usize>> = const { Cell::new(None) };
}

pub fn handlers() -> [Handler; 7] {
    [
        Handler { on: Listen::Id("view-scatter"), event: "keydown", run: on_key },
        Handler { on: Listen::Id("view-scatter"), event: "change", run: on_change },
        Handler { on: Listen::Id("view-scatter"), event: "click", run: on_click },
        Handler { on: Listen::Id("view-scatter"), event: "pointerdown", run: on_press },
        Handler { on: Listen::Id("view-scatter"), event: "pointermove", run: on_move },
        Handler { on: Listen::Id("view-scatter"), event: "pointerleave", run: on_leave },
        Handler { on: Listen::Document, event: "pointerup", run: on_release },
    ]
}

fn on_change(e: &Event) -> Update {
    match e.target().and_then(|t| t.dyn_into::<web_sys::HtmlSelectElement>().ok()) {
        Some(sel) if sel.id() == "colour-by" => {
            let v = sel.value();
            with_app(|app| app.ui.colour_by = v);
            draw();
            Update::Url
        }
        _ => Update::Nothing,
    }
}

fn on_click(e: &Event) -> Update {
    match dom::closest_data(e, "action").map(|(_, a)| a).as_deref() {
        Some("clear") => {
            with_app(|app| app.selection.clear());
            draw();
            Update::Nothing
        }
        Some("vendi") => switch("vendi"),
        _ => Update::Nothing,
    }
}

/// Starts a selection; the canvas captures the pointer, so a drag that leaves the canvas keeps
/// reporting where the pointer is (the box is not cut short at the canvas edge).
fn on_press(e: &Event) -> Update {
    if let Some(p) = canvas_point(e) {
        if let (Some(pe), Some(canvas)) = (e.dyn_ref::<PointerEvent>(), canvas("scatter-canvas")) {
            canvas.set_pointer_capture(pe.pointer_id()).ok();
        }
        DRAG.with(|d| *d.borrow_mut() = Some(vec![p]));
        hide_tooltip();
    }
    Update::Nothing
}

fn on_move(e: &Event) -> Update {
    let Some(p) = canvas_point(e) else { return Update::Nothing };
    let dragging = DRAG.with(|d| d.borrow_mut().as_mut().map(|path| path.push(p)).is_some());
    if dragging {
        draw_overlay();
    } else if let Some(m) = e.dyn_ref::<MouseEvent>() {
        hover(p, f64::from(m.page_x()), f64::from(m.page_y()));
    }
    Update::Nothing
}

/// Arrow keys on the focused scatter step through the points in row order (→/↓ next, ←/↑
/// previous) and show each one's tooltip, as hovering does; Escape hides it.
fn on_key(e: &Event) -> Update {
    let Some(k) = e.dyn_ref::<KeyboardEvent>() else { return Update::Nothing };
    if e.target()
        .and_then(|t| t.dyn_into::<HtmlCanvasElement>().ok())
        .is_none_or(|c| c.id() != "scatter-points")
    {
        return Update::Nothing;
    }
    let step: i64 = match k.key().as_str() {
        "ArrowRight" | "ArrowDown" => 1,
        "ArrowLeft" | "ArrowUp" => -1,
        "Escape" => {
            KEY_ROW.with(|r| r.set(None));
            hide_tooltip();
            return Update::Nothing;
        }
        _ => return Update::Nothing,
    };
    e.prevent_default();
    let Some(coords) = with_app(|app| app.pca.clone()).flatten() else { return Update::Nothing };
    let n = coords.len() / 2;
    if n == 0 {
        return Update::Nothing;
    }
    let row = KEY_ROW.with(|r| match r.get() {
        None if step > 0 => 0,
        None => n - 1,
        Some(i) => (i as i64 + step).rem_euclid(n as i64) as usize,
    });
    KEY_ROW.with(|r| r.set(Some(row)));
    let p = Transform::fit(&coords).apply(coords[2 * row], coords[2 * row + 1]);
    let Some(canvas) = canvas("scatter-canvas") else { return Update::Nothing };
    let r = canvas.get_bounding_client_rect();
    let window = web_sys::window();
    let (sx, sy) = window.map_or((0.0, 0.0), |w| (w.scroll_x().unwrap_or(0.0), w.scroll_y().unwrap_or(0.0)));
    let page_x = sx + r.left() + p.0 * r.width() / f64::from(W);
    let page_y = sy + r.top() + p.1 * r.height() / f64::from(H);
    show_row(row, page_x, page_y);
    Update::Nothing
}

fn on_leave(_: &Event) -> Update {
    if DRAG.with(|d| d.borrow().is_none()) {
        hide_tooltip();
    }
    Update::Nothing
}

fn hide_tooltip() {
    let tip = dom::by_id("tooltip");
    tip.set_attribute("hidden", "").ok();
    tip.remove_attribute("data-row").ok();
}

/// The tooltip of the point nearest to canvas pixel `p` (within [`HOVER_PX`]): its thumbnail when
/// the bundle has thumbnails, and its language, culture and person term; `#tooltip[data-row]`
/// names the row.
fn hover(p: (f64, f64), page_x: f64, page_y: f64) {
    let row = with_app(|app| {
        let coords = app.pca.clone()?;
        nearest(&coords, &Transform::fit(&coords), p, HOVER_PX)
    })
    .flatten();
    match row {
        Some(row) => show_row(row as usize, page_x, page_y),
        None => hide_tooltip(),
    }
}

/// Shows row `row`'s tooltip at page position (`page_x`, `page_y`).
fn show_row(row: usize, page_x: f64, page_y: f64) {
    let html = with_app(|app| {
        let value = |name: &str| app.column(name).map(|c| c[row].clone()).unwrap_or_default();
        let thumb = value(culturelens_bundle::THUMBNAIL_COLUMN);
        let image = if thumb.is_empty() {
            String::new()
        } else {
            format!("<img src='{}' alt=''>", esc(&app.thumbs.url(&thumb)))
        };
        let text = [value("language"), value("culture"), value("person"), value("model")]
            .into_iter()
            .filter(|v| !v.is_empty())
            .collect::<Vec<_>>()
            .join(" · ");
        format!("{image}{}", esc(&text))
    });
    match html {
        Some(html) => {
            dom::show_tooltip(&html, page_x, page_y);
            dom::by_id("tooltip").set_attribute("data-row", &row.to_string()).ok();
        }
        None => hide_tooltip(),
    }
}

fn on_release(_: &Event) -> Update {
    let Some(path) = DRAG.with(|d| d.borrow_mut().take()) else { return Update::Nothing };
    if path.len() < 2 {
        draw_overlay();
        return Update::Nothing;
    }
    let shape = if dom::select_value("select-mode") == "lasso" {
        Shape::Lasso(&path)
    } else {
        Shape::Box(path[0], path[path.len() - 1])
    };
    with_app(|app| {
        if let Some(coords) = app.pca.clone() {
            app.selection = select(&coords, &Transform::fit(&coords), shape);
        }
    });
    draw();
    Update::Nothing
}

fn canvas_point(e: &Event) -> Option<(f64, f64)> {
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

pub fn render() {
    let Some((needs_pca, colour_by)) = with_app(|app| (app.pca.is_none(), app.ui.colour_by.clone())) else {
        return;
    };
    let options: String = ["language", "culture", "model"]
        .iter()
        .map(|c| {
            format!("<option value='{c}'{}>{c}</option>", if colour_by == *c { " selected" } else { "" })
        })
        .collect();
    dom::set_html(
        "view-scatter",
        &format!(
            "<h2>PCA of the embeddings</h2><p class='what'>Every dot is one picture, placed so that similar pictures sit \
             close together; hover a dot (or focus the plot and use the arrow keys) to see it. Drag to select pictures and measure their diversity (Vendi).</p>\
             <div class='controls'><label>Colour by <select id='colour-by'>{options}</select></label>\
             <label>Select <select id='select-mode'><option value='box'>box</option><option value='lasso'>lasso</option></select></label>\
             <button type='button' data-action='clear'>Clear selection</button>\
             <button type='button' data-action='vendi'>Vendi of selection →</button> <span id='selection-count'></span></div>\
             <div class='scatter-stack' data-figure><canvas id='scatter-points' width='{W}' height='{H}' role='img' tabindex='0' \
             aria-label='Scatter of every embedding on its first two principal components, coloured by {colour_by}; \
             arrow keys step through the pictures'></canvas>\
             <canvas id='scatter-canvas' width='{W}' height='{H}' aria-hidden='true'></canvas></div><div id='scatter-legend'></div>\
             <script type='application/json' id='scatter-data'></script>\
             <p class='muted'>Axes: first two principal components of the L2-normalised embeddings (covariance from ≤ {} rows).</p>",
            culturelens_view::pca::SAMPLE_ROWS
        ),
    );
    if !needs_pca {
        show_coordinates();
        draw();
        return;
    }
    dom::status("computing PCA…");
    wasm_bindgen_futures::spawn_local(async {
        let Some(table) = with_app(|app| app.table.clone()) else { return };
        let t0 = dom::now_ms();
        match pca::pca2(&table).await {
            Ok(coords) => {
                with_app(|app| app.pca = Some(Rc::new(coords)));
                let ms = dom::now_ms() - t0;
                show_coordinates();
                dom::status(&format!("PCA in {ms:.0} ms"));
                dom::set_body_attr("data-pca-ms", &format!("{ms:.0}"));
                draw();
            }
            Err(e) => dom::show_error(&format!("PCA failed: {e}")),
        }
    });
}

/// The PCA coordinates as JSON in `#scatter-data` (once per render, not per frame).
fn show_coordinates() {
    if let Some(json) =
        with_app(|app| app.pca.as_ref().map(|c| serde_json::to_string(c.as_slice()))).flatten()
    {
        dom::set_text("scatter-data", &json.expect("coordinates serialise"));
    }
}

fn canvas(id: &str) -> Option<HtmlCanvasElement> {
    dom::document().get_element_by_id(id)?.dyn_into().ok()
}

fn context_2d(canvas: &HtmlCanvasElement) -> Option<CanvasRenderingContext2d> {
    canvas.get_context("2d").ok().flatten()?.dyn_into().ok()
}

/// What one frame draws, read from the state.
struct Frame {
    coords: Rc<Vec<f32>>,
    /// Category index of every point (its colour).
    colours: Vec<u8>,
    /// (value, category index) of the colouring column, by value.
    legend: Vec<(String, usize)>,
    selected: Vec<bool>,
    selection: Vec<u32>,
    gpu: Option<GpuHandles>,
}

/// Reads the frame: coordinates, colours by the `colour_by` column, selection and GPU handles
/// (`None` before the PCA or without the colouring column).
fn read_frame() -> Option<Frame> {
    with_app(|app| {
        let coords = app.pca.clone()?;
        let values = app.column(&app.ui.colour_by)?;
        let mut index: BTreeMap<&str, usize> = BTreeMap::new();
        for v in values {
            let next = index.len();
            index.entry(v.as_str()).or_insert(next);
        }
        let legend = index.iter().map(|(k, i)| (k.to_string(), *i)).collect();
        let colours = values.iter().map(|v| index[v.as_str()] as u8).collect();
        let mut selected = vec![false; values.len()];
        app.selection.iter().for_each(|&r| selected[r as usize] = true);
        Some(Frame {
            coords,
            colours,
            legend,
            selected,
            selection: app.selection.clone(),
            gpu: app.compute.gpu.clone(),
        })
    })
    .flatten()
}

/// Draws the points (selected ones larger, black and on top), the selection outline, the count
/// and the legend: read the frame, check the two renderers agree on its size, then build it on
/// the GPU (asynchronously; a newer draw supersedes one still in flight) or the CPU.
pub fn draw() {
    let Some(points) = canvas("scatter-points") else { return };
    let Some(frame) = read_frame() else { return };
    assert_eq!(frame.coords.len(), 2 * frame.colours.len(), "one (x, y) per point");
    assert_eq!(frame.selected.len(), frame.colours.len(), "one selection flag per point");
    let t = Transform::fit(&frame.coords);
    let t0 = dom::now_ms();
    let number = FRAME.with(|f| {
        f.set(f.get() + 1);
        f.get()
    });
    let Some(gpu) = frame.gpu.clone() else {
        raster(&points, &t, &frame);
        finish(&points, &frame, "canvas2d", t0);
        return;
    };
    let instances = gpu_instances(&frame);
    let view = scatter_gpu::ViewUniform {
        centre: [t.x0, t.y0],
        scale: t.scale,
        canvas: [W as f32, H as f32],
        point: [POINT_PX[0] as f32, POINT_PX[1] as f32],
    };
    dom::set_text("selection-count", "");
    wasm_bindgen_futures::spawn_local(async move {
        let pixels = scatter_gpu::render(&instances, view, W, H, &gpu).await;
        if FRAME.with(|f| f.get()) != number {
            return;
        }
        match pixels {
            Ok(px) => {
                put_pixels(&points, &px);
                finish(&points, &frame, "webgpu", t0);
            }
            Err(e) => {
                dom::status(&format!("scatter drawn on the CPU: {e}"));
                raster(&points, &t, &frame);
                finish(&points, &frame, "canvas2d", t0);
            }
        }
    });
}

/// The GPU instance buffer: unselected points first, then the selected ones on top.
fn gpu_instances(frame: &Frame) -> Vec<u8> {
    let (coords, colours) = (&frame.coords, &frame.colours);
    let mut instances = Vec::with_capacity(colours.len() * scatter_gpu::INSTANCE_BYTES);
    for pass in [false, true] {
        for i in (0..colours.len()).filter(|&i| frame.selected[i] == pass) {
            let rgb = category(colours[i] as usize);
            scatter_gpu::push_instance(&mut instances, coords[2 * i], coords[2 * i + 1], rgb, pass);
        }
    }
    instances
}

/// After the points are on the canvas: renderer and timing attributes, the outline, the count,
/// the legend, and the selected rows (for tests).
fn finish(points: &HtmlCanvasElement, frame: &Frame, renderer: &str, t0: f64) {
    points.set_attribute("data-renderer", renderer).ok();
    points.set_attribute("data-draw-ms", &format!("{:.1}", dom::now_ms() - t0)).ok();
    draw_overlay();
    let selection: Vec<String> = frame.selection.iter().map(u32::to_string).collect();
    dom::by_id("scatter-canvas").set_attribute("data-selection", &selection.join(",")).ok();
    let n_selected = frame.selected.iter().filter(|s| **s).count();
    dom::set_text("selection-count", &format!("{n_selected} selected"));
    let items: String = frame
        .legend
        .iter()
        .map(|(name, i)| {
            format!("<span class='key'><i style='background:{}'></i>{}</span>", css(category(*i)), esc(name))
        })
        .collect();
    dom::set_html("scatter-legend", &items);
}

fn put_pixels(canvas: &HtmlCanvasElement, px: &[u8]) {
    let Some(ctx) = context_2d(canvas) else { return };
    if let Ok(image) = ImageData::new_with_u8_clamped_array_and_sh(Clamped(px), W, H) {
        ctx.put_image_data(&image, 0.0, 0.0).ok();
    }
}

/// CPU rasteriser: the points into one RGBA buffer, one `putImageData`.
fn raster(canvas: &HtmlCanvasElement, t: &Transform, frame: &Frame) {
    let (w, h) = (W as usize, H as usize);
    let mut px = vec![255u8; w * h * 4];
    let mut put = |x: i64, y: i64, rgb: [u8; 3]| {
        if x >= 0 && y >= 0 && (x as usize) < w && (y as usize) < h {
            let o = (y as usize * w + x as usize) * 4;
            px[o..o + 3].copy_from_slice(&rgb);
        }
    };
    let (coords, colours) = (&frame.coords, &frame.colours);
    for pass in [false, true] {
        for i in (0..colours.len()).filter(|&i| frame.selected[i] == pass) {
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
            let (a, b) = (path[0], path[path.len() - 1]);
            ctx.rect(a.0.min(b.0), a.1.min(b.1), (a.0 - b.0).abs(), (a.1 - b.1).abs());
        }
        ctx.stroke();
    }
}
