//! Labelled matrices drawn as coloured cells with their values printed in them: the SoS heatmap
//! culture × language (SoS Fig. 3), the language × language Pearson matrix (SoS Fig. 5) and
//! CulText2I's NA confusion matrix (CulText2I Fig. 5). Missing cells (`None`) are hatched grey
//! and labelled "n/a". Rows and columns are drawn in the order given: the caller sorts them.

use crate::palette::Scale;
use crate::plot::{colour_bar, title, title_width};
use crate::svg::{Anchor, FONT, Svg, fixed};

/// A labelled matrix and how to colour it.
#[derive(Clone, Debug)]
pub struct Matrix {
    pub title: String,
    /// What the rows are (drawn left of the row labels, rotated).
    pub row_label: String,
    /// What the columns are (drawn below the column labels).
    pub col_label: String,
    pub rows: Vec<String>,
    pub cols: Vec<String>,
    /// `values[r][c]`, `rows.len()` × `cols.len()`.
    pub values: Vec<Vec<Option<f64>>>,
    pub scale: Scale,
    /// The colour bar's label.
    pub scale_label: String,
    /// Decimals of the printed values.
    pub decimals: usize,
}

const CELL_MIN: f64 = 44.0;

/// The SVG of `m`. Panics if `values` is not `rows × cols` (a caller bug).
pub fn matrix(m: &Matrix) -> String {
    assert_eq!(m.values.len(), m.rows.len(), "one value row per row label");
    assert!(m.values.iter().all(|r| r.len() == m.cols.len()), "one value per column label");
    let label_w = m.rows.iter().map(|r| r.chars().count()).max().unwrap_or(1) as f64 * FONT * 0.6 + 16.0;
    let col_h = m.cols.iter().map(|c| c.chars().count()).max().unwrap_or(1) as f64 * FONT * 0.45 + 24.0;
    let cell_w = (FONT * 0.62 * (m.decimals + 3) as f64).max(CELL_MIN);
    let cell_h = 32.0;
    let left = 40.0 + label_w;
    let top = 64.0;
    let grid_w = cell_w * m.cols.len() as f64;
    let grid_h = cell_h * m.rows.len() as f64;
    let width = (left + grid_w + 110.0).max(480.0);
    let bar_bottom = top + grid_h.max(120.0) - 14.0;
    // Below the rotated column labels and below the colour bar's lowest value, which it would
    // otherwise overlap when the axis title is wider than the grid.
    let col_label_y = (top + grid_h + col_h + 24.0).max(bar_bottom + 2.2 * FONT);
    let height = col_label_y.max(bar_bottom + 24.0) + 16.0;
    let mut svg = Svg::new(width.max(title_width(&m.title)), height);
    title(&mut svg, &m.title);
    for (r, row) in m.rows.iter().enumerate() {
        let y = top + r as f64 * cell_h;
        svg.text((left - 8.0, y + cell_h / 2.0 + FONT * 0.35), row, FONT * 0.85, Anchor::End, 0.0);
        for (c, v) in m.values[r].iter().enumerate() {
            let x = left + c as f64 * cell_w;
            match v {
                Some(v) => {
                    svg.rect(x, y, cell_w, cell_h, &m.scale.color(*v), Some("#ffffff"));
                    let ink = if m.scale.dark(*v) { "#ffffff" } else { "#000000" };
                    let text = fixed(*v, m.decimals);
                    svg.text_coloured(
                        (x + cell_w / 2.0, y + cell_h / 2.0 + FONT * 0.3),
                        &text,
                        FONT * 0.7,
                        ink,
                    );
                }
                None => {
                    svg.rect(x, y, cell_w, cell_h, "#bbbbbb", Some("#ffffff"));
                    svg.text(
                        (x + cell_w / 2.0, y + cell_h / 2.0 + FONT * 0.3),
                        "n/a",
                        FONT * 0.7,
                        Anchor::Middle,
                        0.0,
                    );
                }
            }
        }
    }
    for (c, col) in m.cols.iter().enumerate() {
        let x = left + (c as f64 + 0.5) * cell_w;
        svg.text((x + FONT * 0.3, top + grid_h + 10.0), col, FONT * 0.85, Anchor::End, -45.0);
    }
    svg.text((left + grid_w / 2.0, col_label_y), &m.col_label, FONT, Anchor::Middle, 0.0);
    svg.text((18.0, top + grid_h.max(120.0) / 2.0), &m.row_label, FONT, Anchor::Middle, -90.0);
    colour_bar(&mut svg, left + grid_w + 24.0, top + 14.0, bar_bottom, m.scale, &m.scale_label);
    svg.finish()
}
