//! Publication figures of culturelens from plain tables, as SVG text and PNG bytes.
//!
//! Every figure type the papers show and culturelens computes has one function taking a plain
//! struct (no file reading here; the CLI's `culturelens figures` reads the result tables):
//! - [`matrix`]: SoS heatmap culture × language (SoS Fig. 3), language × language Pearson
//!   matrix (SoS Fig. 5), CulText2I NA confusion matrix (CulText2I Fig. 5);
//! - [`distributions`]: per-model SoS distributions with mean and median (SoS Fig. 2);
//! - [`lines`]: SoS per text-encoder layer and language (SoS Fig. 4);
//! - [`scatter`]: 2-D PCA of embeddings coloured by language (SoS App. E);
//! - [`bars`]: Vendi per group with sd bars (CUBE) and MAGBIG MAD per language and set with
//!   the fair-coin baseline (MAGBIG Fig. 5);
//! - [`palettes`] (`swatches.rs`): dominant-colour swatches per group (SoS App. F); the HSV value
//!   distributions per language (App. F.3) are [`lines`] over the value bins.
//!
//! Conventions: colour-blind-safe palettes ([`palette`]: Okabe–Ito, viridis, PuOr), readable on
//! white: a categorical colour with less than 2:1 contrast against white (of Okabe–Ito only
//! yellow) is drawn over a dark casing as a line and with a dark outline as a point or swatch,
//! and past eight categories the point markers change shape and the lines their dash pattern as
//! well as colour; text at 16 px base size (ticks 0.85×, labels and legends 0.9×, titles
//! 1.25×) on figures about 300–1000 px wide, rendered to PNG at `scale` (2 by default in the
//! CLI) so it stays readable on a projector; margins, legends and label rotation are sized from
//! the real text widths ([`fonts::text_width`]), never from a per-character guess, and a figure
//! widened for its title spreads its plot (or centres its matrix) over the width rather than
//! leaving it blank; the SVG is written with fixed number formatting and the PNG with
//! compiled-in fonts only ([`fonts`]), so the same input gives the same bytes on the same build.

mod bars;
mod distribution;
pub mod fonts;
mod lines;
mod matrix;
pub mod palette;
mod plot;
mod scatter;
pub mod svg;
mod swatches;

pub use bars::{Bar, Bars, bars};
pub use distribution::{BoxStats, Distributions, distributions};
pub use lines::{Lines, lines};
pub use matrix::{HATCH, Matrix, matrix};
pub use scatter::{Scatter, scatter};
pub use swatches::{PaletteRow, Palettes, palettes};

use resvg::{tiny_skia, usvg};

/// Why a PNG could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum FigureError {
    #[error("the figure's SVG does not parse: {0}")]
    Svg(#[from] usvg::Error),
    #[error("a {0} x {1} px image cannot be allocated (scale too large?)")]
    Size(u32, u32),
    #[error("PNG encoding failed: {0}")]
    Png(String),
}

/// Renders `svg` to PNG at `scale` × its size, with the bundled fonts and then `extra_fonts`
/// (font file bytes); no system font is ever consulted.
pub fn png(svg: &str, scale: f32, extra_fonts: &[Vec<u8>]) -> Result<Vec<u8>, FigureError> {
    let options = usvg::Options { fontdb: fonts::database(extra_fonts), ..usvg::Options::default() };
    let tree = usvg::Tree::from_str(svg, &options)?;
    let size = tree.size();
    let (w, h) = ((size.width() * scale).ceil() as u32, (size.height() * scale).ceil() as u32);
    let mut pixmap = tiny_skia::Pixmap::new(w, h).ok_or(FigureError::Size(w, h))?;
    resvg::render(&tree, tiny_skia::Transform::from_scale(scale, scale), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(|e| FigureError::Png(e.to_string()))
}
