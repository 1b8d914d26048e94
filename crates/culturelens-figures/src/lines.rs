//! SoS per text-encoder layer and language (SoS Fig. 4): one line per language (Okabe–Ito, with
//! a marker on every point, its shape changing every eight languages) over the layers in the
//! order given; a missing value breaks the line. Also the HSV value distributions per language
//! of the colour analysis (SoS App. F.3), one line per language over the value bins.

use crate::palette::{category, shape};
use crate::plot::{YAxis, legend, title, title_width};
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
    let left = 90.0;
    let step = 56.0;
    let plot_w = (step * l.x.len() as f64).max(320.0);
    let names: Vec<String> = l.series.iter().map(|(n, _)| n.clone()).collect();
    let legend_w = names.iter().map(|s| s.chars().count()).max().unwrap_or(0) as f64 * FONT * 0.55 + 50.0;
    let axis = YAxis::fit(lo, hi, true, 60.0, 420.0);
    let width = left + plot_w + 30.0 + legend_w;
    let height = axis.bottom + 80.0;
    let mut svg = Svg::new(width.max(title_width(&l.title)), height);
    title(&mut svg, &l.title);
    axis.draw(&mut svg, left, left + plot_w, &l.y_label);
    let x_of = |i: usize| left + (i as f64 + 0.5) * plot_w / l.x.len().max(1) as f64;
    for (i, x) in l.x.iter().enumerate() {
        svg.text((x_of(i), axis.bottom + 22.0), x, FONT * 0.85, Anchor::Middle, 0.0);
    }
    for (s, (_, values)) in l.series.iter().enumerate() {
        let mut run: Vec<(f64, f64)> = Vec::new();
        for (i, v) in values.iter().enumerate() {
            match v {
                Some(v) => run.push((x_of(i), axis.y(*v))),
                None => {
                    svg.polyline(&run, category(s), 2.5);
                    run.clear();
                }
            }
        }
        svg.polyline(&run, category(s), 2.5);
        for (i, v) in values.iter().enumerate() {
            if let Some(v) = v {
                svg.marker((x_of(i), axis.y(*v)), 4.5, shape(s), category(s), Some("#333333"));
            }
        }
    }
    svg.line((left, axis.bottom), (left + plot_w, axis.bottom), "#333333", 1.0, None);
    svg.text((left + plot_w / 2.0, height - 14.0), &l.x_label, FONT, Anchor::Middle, 0.0);
    legend(&mut svg, (left + plot_w + 24.0, 76.0), &names, true);
    svg.finish()
}
