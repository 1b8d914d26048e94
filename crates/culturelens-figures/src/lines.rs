//! SoS per text-encoder layer and language (SoS Fig. 4): one line per language (Okabe–Ito, with
//! a dark-outlined marker on every point, marker shape and dash pattern changing every eight
//! languages, yellow over a dark casing) over the layers in the order given; a missing value
//! breaks the line. Also the HSV value distributions per language
//! of the colour analysis (SoS App. F.3), one line per language over the value bins.

use crate::palette::{CASING, category, dash, low_contrast, shape};
use crate::plot::{
    Key, LEGEND_ROW, XLabels, YAxis, bottom, left_margin, legend, legend_width, title, title_width,
    x_title_baseline,
};
use crate::svg::{Anchor, FONT, Svg};

/// Lines over categorical x positions.
#[derive(Clone, Debug)]
pub struct Lines {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// The x positions (layers), in order.
    pub x: Vec<String>,
    /// (series name, one value per x position).
    pub series: Vec<(String, Vec<Option<f64>>)>,
}

/// The SVG of `l`. Panics if a series does not have one value per x position (a caller bug).
pub fn lines(l: &Lines) -> String {
    assert!(l.series.iter().all(|(_, v)| v.len() == l.x.len()), "one value per x position");
    let values: Vec<f64> = l.series.iter().flat_map(|(_, v)| v.iter().flatten().copied()).collect();
    let lo = values.iter().copied().fold(0.0, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    let axis = YAxis::fit(lo, hi, true, 60.0, 420.0);
    let margin = axis.margin();
    let names: Vec<String> = l.series.iter().map(|(n, _)| n.clone()).collect();
    let right = legend_width(&names, Key::Line);
    let n = l.x.len().max(1) as f64;
    let plot_w = (56.0 * n).max(320.0).max(title_width(&l.title) - margin - right);
    let slot = plot_w / n;
    let xl = XLabels::plan(&l.x, slot);
    let left = left_margin(margin, &xl, slot);
    let x_title = x_title_baseline(axis.bottom + xl.height);
    let height = bottom(x_title).max(axis.top + 16.0 + names.len() as f64 * LEGEND_ROW);
    let mut svg = Svg::new(left + plot_w + right, height);
    title(&mut svg, &l.title);
    axis.draw(&mut svg, left, left + plot_w, &l.y_label);
    let x_of = |i: usize| left + (i as f64 + 0.5) * slot;
    for (i, x) in l.x.iter().enumerate() {
        xl.draw(&mut svg, x_of(i), axis.bottom, x);
    }
    for (s, (_, values)) in l.series.iter().enumerate() {
        // The runs between missing values; a low-contrast colour goes over a dark casing.
        let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
        for (i, v) in values.iter().enumerate() {
            match v {
                Some(v) => runs.last_mut().unwrap().push((x_of(i), axis.y(*v))),
                None => runs.push(Vec::new()),
            }
        }
        for run in &runs {
            if low_contrast(s) {
                svg.polyline(run, CASING, 4.5, dash(s));
            }
            svg.polyline(run, category(s), 2.5, dash(s));
        }
        for (i, v) in values.iter().enumerate() {
            if let Some(v) = v {
                svg.marker((x_of(i), axis.y(*v)), 4.5, shape(s), category(s), Some("#333333"));
            }
        }
    }
    svg.line((left, axis.bottom), (left + plot_w, axis.bottom), "#333333", 1.0, None);
    svg.text((left + plot_w / 2.0, x_title), &l.x_label, FONT, Anchor::Middle, 0.0);
    legend(&mut svg, (left + plot_w + 24.0, axis.top + 16.0), &names, Key::Line);
    svg.finish()
}
