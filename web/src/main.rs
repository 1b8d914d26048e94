//! culturelens in the browser: loads a bundle (built-in demo, URL or local files), or embeds the
//! class's own sentences and photos with an encoder running in the page (the classroom lens), scores
//! it with the same `culturelens-compute` SoS code as the CLI on WebGPU (CPU `flex` fallback), and
//! shows the explorer views. Entry point: installs the panic hook and starts [`app::start`].

mod app;
mod compute;
mod dom;
mod encoder;
mod load;
mod pca;
mod state;
mod table;
mod views;

fn main() {
    std::panic::set_hook(Box::new(|info| {
        let message = format!("internal error: {info}");
        web_sys::console::error_1(&message.as_str().into());
        dom::show_error(&message);
    }));
    wasm_bindgen_futures::spawn_local(app::start());
}
