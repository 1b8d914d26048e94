//! Empty: cargo only resolves `[build-dependencies]` for a package with a build script, and the
//! manifest's build-dependencies are how the hack asks for host-side features.
fn main() {}
