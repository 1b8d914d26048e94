//! The end-to-end tests of the `culturelens` binary, as one test target: each file of `tests/` is a
//! module here, so the test binary is linked once rather than once per file (less link time and
//! disk in CI). Run one file's tests with its module name as the filter, e.g.
//! `cargo test -p culturelens --test cli generate_cli::` (add `-- --nocapture` for the measured
//! values the tests print). The wgpu files need the default `wgpu` feature and a Vulkan driver
//! (lavapipe without a GPU).

mod common;
mod finished_run;

mod analyses_cli;
mod authors_cli;
mod bundle_cli;
mod ci_cli;
mod classify_cli;
mod cluster_manifests;
mod cultext2i_cli;
mod docs_commands;
#[cfg(feature = "wgpu")]
mod embed_backends;
mod embed_cli;
mod embed_kill;
mod errors_cli;
mod faces_cli;
mod fighting_words_convokit_cli;
mod figures_cli;
mod file_modes;
mod flag_names_cli;
mod generate_cli;
mod generate_cogview4_cli;
mod generate_flow_cli;
mod generate_if_cli;
mod generate_if_upscale_cli;
mod generate_kandinsky21_cli;
mod generate_kandinsky3_cli;
mod generate_kill;
mod generate_lumina2_cli;
mod generate_offload_cli;
mod generate_sizes_cli;
mod generate_xl_cli;
mod hub_cli;
mod merge_cli;
mod prompts_cli;
mod quality_cli;
#[cfg(unix)]
mod readme_tutorial;
mod release_plan;
mod report_cli;
mod slurm_cli;
#[cfg(feature = "wgpu")]
mod sos_backends;
mod sos_cli;
mod text_analyses_cli;
#[cfg(feature = "wgpu")]
mod vendi_backends;
mod vendi_cli;
mod words_reference_cli;
