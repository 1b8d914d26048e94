//! Labelled matrices drawn as coloured cells with their values printed in them: the SoS heatmap
//! culture × language (SoS Fig. 3), the language × language Pearson matrix (SoS Fig. 5) and
//! CulText2I's NA confusion matrix (CulText2I Fig. 5). Missing cells (`None`) are hatched grey
//! and labelled "n/a". Cells marked in `hatched` get thin diagonal strokes over their colour (the
//! SoS heatmap: the cell's confidence interval covers 0). Rows and columns are drawn in the order
//! given: the caller sorts them.

use crate::fonts::{max_text_width, text_width};
use crate::palette::Scale;
use crate::plot::{
    LABEL, TICK, XLabels, bottom, colour_bar, colour_bar_gap, colour_bar_width, rotated_title,
    rotated_title_room, title, title_width, x_title_baseline,
};
use crate::svg::{Anchor, FONT, Svg, value_label};

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
    /// Decimals of the printed values (more for a value below the last of them: `svg::value_label`).
    pub decimals: usize,
    /// `hatched[r][c]`: diagonal strokes over the cell (empty: no cell is hatched). The caller
    /// says what they mean in `scale_label`.
    pub hatched: Vec<Vec<bool>>,
}

/// The hatching's stroke: a mid grey, legible on both ends of every scale.
pub const HATCH: &str = "#707070";
/// Distance between two hatching strokes, along each axis.
const HATCH_STEP: f64 = 9.0;

/// The 45° strokes `x' + y' = t` (t = step, 2·step, …) clipped to the `w × h` cell at (x, y).
fn hatch(svg: &mut Svg, (x, y): (f64, f64), w: f64, h: f64) {
    let mut t = HATCH_STEP;
    while t < w + h {
        let (x0, y0) = ((t - h).max(0.0), t.min(h));
        let (x1, y1) = (t.min(w), (t - w).max(0.0));
        svg.line((x + x0, y + y0), (x + x1, y + y1), HATCH, 1.0, None);
        t += HATCH_STEP;
    }
}

/// Cells are at least this wide (more when their values need it, and up to [`CELL_MAX`] when
/// the title is wider than the matrix).
const CELL_MIN: f64 = 52.0;
const CELL_MAX: f64 = 72.0;
/// Cells are 36 px high, up to 48 when a long row title would otherwise outrun the grid.
const CELL_H: f64 = 36.0;
const CELL_H_MAX: f64 = 48.0;
/// Size of the values printed in the cells.
const VALUE: f64 = FONT * 0.8;

/// The SVG of `m`. Panics if `values` is not `rows × cols` (a caller bug).
///
/// Layout, left to right: the rotated row title, the row labels, the grid, the colour bar; the
/// column labels and title below the grid. Everything is sized from the real text widths and
/// the whole block is centred under the title.
pub fn matrix(m: &Matrix) -> String {
    assert_eq!(m.values.len(), m.rows.len(), "one value row per row label");
    assert!(m.values.iter().all(|r| r.len() == m.cols.len()), "one value per column label");
    assert!(
        m.hatched.is_empty()
            || (m.hatched.len() == m.rows.len() && m.hatched.iter().all(|r| r.len() == m.cols.len())),
        "hatching is empty or rows × cols"
    );
    let n_cols = m.cols.len().max(1) as f64;
    let row_w = max_text_width(&m.rows, LABEL);
    let widest_value = m
        .values
        .iter()
        .flatten()
        .flatten()
        .map(|v| text_width(&value_label(*v, m.decimals), VALUE))
        .fold(text_width("n/a", VALUE), f64::max);
    let top = 64.0;
    let row_title = text_width(&m.row_label, FONT);
    let n_rows = m.rows.len().max(1) as f64;
    let cell_h = (row_title / n_rows).clamp(CELL_H, CELL_H_MAX);
    let grid_h = cell_h * m.rows.len() as f64;
    let bar_h = grid_h.max(120.0);
    let bar_w = colour_bar_width(m.scale, &m.scale_label);
    let bar_gap = colour_bar_gap(&m.scale_label);
    let col_title = text_width(&m.col_label, FONT);
    // The rotated row title is centred on the grid unless it would then come near the figure
    // title; then it starts at the grid's top and runs on below the grid.
    let row_mid = (top + grid_h / 2.0).max(top - 4.0 + row_title / 2.0);
    let runs_below = row_mid + row_title / 2.0 > top + grid_h;
    // The content's horizontal extent relative to the grid's left edge at 0, for a cell width.
    let layout = |cell_w: f64| {
        let xl = XLabels::plan(&m.cols, cell_w);
        let grid_w = cell_w * n_cols;
        // How far left of the grid the row title's right edge lies: past the row labels and,
        // when it runs on below the grid, past the first column label.
        let mut title_gap = 8.0 + row_w;
        if runs_below {
            title_gap = title_gap.max(xl.overhang - cell_w / 2.0 + 4.0);
        }
        let x_min = (-title_gap - rotated_title_room())
            .min(cell_w / 2.0 - xl.overhang - 8.0)
            .min(grid_w / 2.0 - col_title / 2.0 - 16.0);
        let x_max = (grid_w + bar_gap + bar_w).max(grid_w / 2.0 + col_title / 2.0 + 16.0);
        (xl, title_gap, x_min, x_max)
    };
    let base = (widest_value + 14.0).max(CELL_MIN);
    let (_, _, x_min, x_max) = layout(base);
    let wanted = title_width(&m.title);
    let cell_w =
        if x_max - x_min < wanted { (base + (wanted - x_max + x_min) / n_cols).min(CELL_MAX) } else { base };
    let (xl, title_gap, x_min, x_max) = layout(cell_w);
    let grid_w = cell_w * n_cols;
    let width = (x_max - x_min).max(wanted);
    let left = (width - (x_max - x_min)) / 2.0 - x_min;
    let bar_x = left + grid_w + bar_gap;
    let bar_bottom = top + bar_h - 14.0;
    // Below the column labels and, when the column title reaches under the colour bar, below
    // the bar's lowest value too.
    let mut labels_end = top + grid_h + xl.height;
    if left + grid_w / 2.0 + col_title / 2.0 > bar_x - 4.0 {
        labels_end = labels_end.max(bar_bottom + TICK * 0.35);
    }
    let col_title_y = x_title_baseline(labels_end);
    let height =
        bottom(col_title_y).max(bar_bottom + TICK * 0.35 + 12.0).max(row_mid + row_title / 2.0 + 12.0);
    let mut svg = Svg::new(width, height);
    title(&mut svg, &m.title);
    for (r, row) in m.rows.iter().enumerate() {
        let y = top + r as f64 * cell_h;
        svg.text((left - 8.0, y + cell_h / 2.0 + LABEL * 0.35), row, LABEL, Anchor::End, 0.0);
        for (c, v) in m.values[r].iter().enumerate() {
            let x = left + c as f64 * cell_w;
            let centre = (x + cell_w / 2.0, y + cell_h / 2.0 + VALUE * 0.35);
            match v {
                Some(v) => {
                    svg.rect(x, y, cell_w, cell_h, &m.scale.color(*v), Some("#ffffff"));
                    if m.hatched.get(r).is_some_and(|row| row[c]) {
                        hatch(&mut svg, (x, y), cell_w, cell_h);
                    }
                    let ink = if m.scale.dark(*v) { "#ffffff" } else { "#000000" };
                    svg.text_coloured(centre, &value_label(*v, m.decimals), VALUE, ink);
                }
                None => {
                    svg.rect(x, y, cell_w, cell_h, "#bbbbbb", Some("#ffffff"));
                    svg.text(centre, "n/a", VALUE, Anchor::Middle, 0.0);
                }
            }
        }
    }
    for (c, col) in m.cols.iter().enumerate() {
        xl.draw(&mut svg, left + (c as f64 + 0.5) * cell_w, top + grid_h, col);
    }
    svg.text((left + grid_w / 2.0, col_title_y), &m.col_label, FONT, Anchor::Middle, 0.0);
    rotated_title(&mut svg, left - title_gap, row_mid, &m.row_label);
    colour_bar(&mut svg, bar_x, top + 14.0, bar_bottom, m.scale, &m.scale_label);
    svg.finish()
}
