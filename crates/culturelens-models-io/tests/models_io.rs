//! The integration tests of `culturelens-models-io`, as one test target: each file of `tests/` is
//! a module here (one link instead of one per file). Run one file's tests with its module name as
//! the filter, e.g. `cargo test -p culturelens-models-io --test models_io diffusion_parity::`
//! (add `-- --nocapture` for the measured differences the tests print). A new test file needs its
//! `mod` line here (`autotests = false`).

mod clip_bpe;
mod cogview4;
mod configs;
mod decode;
mod diffusion_flow_parity;
mod diffusion_if_parity;
mod diffusion_kandinsky21_parity;
mod diffusion_kandinsky3_parity;
mod diffusion_parity;
mod diffusion_sizes;
mod efficientnet;
mod embed_loop;
mod gender_v1;
mod half;
mod jpeg;
mod load_memory;
mod lumina2;
mod parity;
mod t5;
