//! Small DOM helpers: element lookup, HTML escaping, event listeners, the on-screen error box
//! and the status/progress line. Views build their markup as strings (SVG/HTML) and use these.

use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{Document, Element, Event, HtmlElement, HtmlInputElement, HtmlProgressElement, Window};

pub fn window() -> Window {
    web_sys::window().expect("a browser window")
}

pub fn document() -> Document {
    window().document().expect("a document")
}

/// The element with `id`; the page template (`index.html`) defines every id the app uses.
pub fn by_id(id: &str) -> Element {
    document().get_element_by_id(id).unwrap_or_else(|| panic!("index.html has no element #{id}"))
}

pub fn set_html(id: &str, html: &str) {
    by_id(id).set_inner_html(html);
}

pub fn set_text(id: &str, text: &str) {
    by_id(id).set_text_content(Some(text));
}

pub fn body() -> HtmlElement {
    document().body().expect("a body")
}

pub fn set_body_attr(name: &str, value: &str) {
    body().set_attribute(name, value).expect("body attribute");
}

pub fn show(id: &str, visible: bool) {
    let el = by_id(id);
    if visible {
        el.remove_attribute("hidden").ok();
    } else {
        el.set_attribute("hidden", "").ok();
    }
}

/// Escapes text for HTML/SVG content and attribute values.
pub fn esc(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Adds an event listener that lives as long as the page.
pub fn on(target: &web_sys::EventTarget, event: &str, handler: impl FnMut(Event) + 'static) {
    let closure = Closure::<dyn FnMut(Event)>::new(handler);
    target.add_event_listener_with_callback(event, closure.as_ref().unchecked_ref()).expect("add listener");
    closure.forget();
}

pub fn on_id(id: &str, event: &str, handler: impl FnMut(Event) + 'static) {
    on(&by_id(id), event, handler);
}

/// The `data-NAME` attribute of the nearest ancestor-or-self of the event target that has it.
pub fn closest_data(event: &Event, name: &str) -> Option<(Element, String)> {
    let target: Element = event.target()?.dyn_into().ok()?;
    let el = target.closest(&format!("[data-{name}]")).ok()??;
    let value = el.get_attribute(&format!("data-{name}"))?;
    Some((el, value))
}

pub fn input_value(id: &str) -> String {
    by_id(id).dyn_into::<HtmlInputElement>().map(|i| i.value()).unwrap_or_default()
}

pub fn select_value(id: &str) -> String {
    by_id(id).dyn_into::<web_sys::HtmlSelectElement>().map(|s| s.value()).unwrap_or_default()
}

/// Shows `message` in the error box (never a blank page) and hides the progress bar.
pub fn show_error(message: &str) {
    if let Some(doc) = web_sys::window().and_then(|w| w.document()) {
        if let Some(el) = doc.get_element_by_id("error") {
            el.set_text_content(Some(message));
            el.remove_attribute("hidden").ok();
        }
        if let Some(el) = doc.get_element_by_id("progress-box") {
            el.set_attribute("hidden", "").ok();
        }
        if let Some(body) = doc.body() {
            body.set_attribute("data-state", "error").ok();
        }
    }
}

pub fn clear_error() {
    show("error", false);
}

pub fn status(text: &str) {
    set_text("status", text);
}

/// Progress of the current download: `done` of `total` bytes.
pub fn progress(label: &str, done: u64, total: u64) {
    show("progress-box", true);
    if let Ok(p) = by_id("progress").dyn_into::<HtmlProgressElement>() {
        p.set_max(total.max(1) as f64);
        p.set_value(done as f64);
    }
    set_text("progress-label", &format!("{label}: {} / {}", mib(done), mib(total)));
}

/// [`progress`] with the time left at the rate since `started_ms` (`now_ms()` when it began).
pub fn progress_eta(label: &str, done: u64, total: u64, started_ms: f64) {
    let seconds = (now_ms() - started_ms) / 1000.0;
    let left = if done > 0 && done < total && seconds > 0.5 {
        let rate = done as f64 / seconds;
        format!(" · about {:.0} s left", (total - done) as f64 / rate)
    } else {
        String::new()
    };
    progress(&format!("{label}{left}"), done, total);
}

pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// Milliseconds since page start (performance.now()).
pub fn now_ms() -> f64 {
    window().performance().map(|p| p.now()).unwrap_or(0.0)
}

/// Lets the browser paint (progress bar, status) before a long synchronous step.
pub async fn yield_to_browser() {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        window().set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, 0).expect("setTimeout");
    });
    wasm_bindgen_futures::JsFuture::from(promise).await.ok();
}

/// Whether an element of the page is fullscreen (`document.fullscreenElement`).
pub fn is_fullscreen() -> bool {
    js_sys::Reflect::get(&document(), &"fullscreenElement".into())
        .is_ok_and(|e| !e.is_null() && !e.is_undefined())
}

/// Asks for fullscreen of the whole page, or leaves it; a refusal (no user gesture, no support)
/// is ignored: the page stays as it is.
pub fn set_fullscreen(on: bool) {
    if on == is_fullscreen() {
        return;
    }
    let (target, method): (wasm_bindgen::JsValue, &str) = if on {
        (document().document_element().map(Into::into).unwrap_or_default(), "requestFullscreen")
    } else {
        (document().into(), "exitFullscreen")
    };
    let Some(f) = js_sys::Reflect::get(&target, &method.into())
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
    else {
        return;
    };
    if let Ok(p) = f.call0(&target).and_then(|p| p.dyn_into::<js_sys::Promise>()) {
        let ignore = Closure::<dyn FnMut(wasm_bindgen::JsValue)>::new(|_| {});
        let _ = p.catch(&ignore);
        ignore.forget();
    }
}

/// Shows the tooltip with `html` near page position (`x`, `y`), kept inside the page's width.
pub fn show_tooltip(html: &str, x: f64, y: f64) {
    let tip = by_id("tooltip");
    tip.set_inner_html(html);
    tip.remove_attribute("hidden").ok();
    let width = window().inner_width().ok().and_then(|w| w.as_f64()).unwrap_or(0.0);
    let left = (x + 14.0).min(width - f64::from(tip.client_width()) - 4.0).max(0.0);
    if let Ok(h) = tip.dyn_into::<HtmlElement>() {
        h.style().set_property("left", &format!("{left}px")).ok();
        h.style().set_property("top", &format!("{}px", y + 14.0)).ok();
    }
}
