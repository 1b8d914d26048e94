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

// The linker's synthesized caller of every static constructor (the `inventory` registrations of
// cubecl's IR, pliron: thousands of them).
#[cfg(target_family = "wasm")]
unsafe extern "C" {
    fn __wasm_call_ctors();
}

fn main() {
    // Runs the constructors once, first. A module that never calls `__wasm_call_ctors` is linked
    // as a "command" (wasm-ld), which wraps every export in a call to it: every call from
    // JavaScript into the app (each chunk of a download, each allocation for a string, each
    // closure) ran all of them again, about 5 s of a paper-scale bundle's load (BENCHMARKS.md).
    // The explicit call here is what tells the linker not to wrap (inventory's documented remedy).
    #[cfg(target_family = "wasm")]
    // SAFETY: called once, before anything reads a registry the constructors fill.
    unsafe {
        __wasm_call_ctors()
    };
    std::panic::set_hook(Box::new(|info| {
        let message = format!("internal error: {info}");
        web_sys::console::error_1(&message.as_str().into());
        dom::show_error(&message);
    }));
    wasm_bindgen_futures::spawn_local(app::start());
}
