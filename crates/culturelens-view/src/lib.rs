//! The pure logic of the browser app (`web/`): everything a view decides that needs neither the
//! DOM nor a Burn device, so it builds and is unit-tested in the main workspace
//! (`cargo test -p culturelens-view`) while `web/` (its own workspace, wasm32 only) depends on it
//! by path.
//!
//! - [`url`]: the UI state mirrored in the page URL (`?view=…&model=…`), parsed and written back;
//! - [`filter`]: which rows the SoS computation keeps (models, languages, pooling);
//! - [`selection`]: the scatter's data → pixel transform and box/lasso selection;
//! - [`parts`]: a table stored on the GPU in parts (rows per part, runs of rows per part);
//! - [`pca`]: the two leading principal axes of a covariance matrix (block power iteration, as
//!   scikit-learn gives them);
//! - [`heatmap`]: the culture × language grid of joint scores, with means and sort orders;
//! - [`educator`]: the per-language values of an educator slide;
//! - [`present`]: the keys of the slide and of presentation mode, and the state they lead to;
//! - [`magbig`]: the MAGBIG bar chart (MAD per language and set, fair-coin baseline) and the
//!   educator's occupation slide (images per perceived gender, per language);
//! - [`cultext2i`]: the CulText2I NA confusion matrix as row shares.
//!
//! It has no dependencies, so it never changes the feature set of the main build.

pub mod cultext2i;
pub mod educator;
pub mod filter;
pub mod heatmap;
pub mod magbig;
pub mod parts;
pub mod pca;
pub mod present;
pub mod selection;
pub mod url;
