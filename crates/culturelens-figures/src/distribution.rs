//! Per-model distributions of per-output SoS (SoS Fig. 2) as box plots: the box spans the first
//! to third quartile, whiskers reach the minimum and maximum, a black line marks the median and a
//! white diamond the mean. Quantiles come from the caller (the CLI passes the `per_model`
//! summaries of `culturelens sos --report`, computed by `culturelens_core::stats`).

use crate::palette::category;
use crate::plot::{YAxis, title, title_width};
use crate::svg::{Anchor, FONT, Svg};

/// The five-number summary and mean of one group.
#[derive(Clone, Debug, PartialEq)]
pub struct BoxStats {
    pub label: String,
    pub n: usize,
    pub min: f64,
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
    pub max: f64,
    pub mean: f64,
}

/// Box plots, one per group, in the order given.
#[derive(Clone, Debug)]
pub struct Distributions {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub groups: Vec<BoxStats>,
}

/// The SVG of `d`.
pub fn distributions(d: &Distributions) -> String {
    let lo = d.groups.iter().map(|g| g.min).fold(0.0, f64::min);
    let hi = d.groups.iter().map(|g| g.max).fold(0.0, f64::max);
    let left = 90.0;
    let slot = 90.0;
    let plot_w = (slot * d.groups.len() as f64).max(240.0);
    let label_h =
        d.groups.iter().map(|g| g.label.chars().count()).max().unwrap_or(1) as f64 * FONT * 0.4 + 30.0;
    let axis = YAxis::fit(lo, hi, true, 60.0, 420.0);
    let width = left + plot_w + 150.0;
    let height = axis.bottom + label_h + 40.0;
    let mut svg = Svg::new(width.max(title_width(&d.title)), height);
    title(&mut svg, &d.title);
    axis.draw(&mut svg, left, left + plot_w, &d.y_label);
    let x0 = left + (plot_w - slot * d.groups.len() as f64) / 2.0;
    for (i, g) in d.groups.iter().enumerate() {
        let cx = x0 + (i as f64 + 0.5) * slot;
        let half = slot * 0.3;
        svg.line((cx, axis.y(g.min)), (cx, axis.y(g.q1)), "#333333", 1.5, None);
        svg.line((cx, axis.y(g.q3)), (cx, axis.y(g.max)), "#333333", 1.5, None);
        for v in [g.min, g.max] {
            svg.line((cx - half / 2.0, axis.y(v)), (cx + half / 2.0, axis.y(v)), "#333333", 1.5, None);
        }
        svg.rect(
            cx - half,
            axis.y(g.q3),
            2.0 * half,
            axis.y(g.q1) - axis.y(g.q3),
            category(i),
            Some("#333333"),
        );
        svg.line((cx - half, axis.y(g.median)), (cx + half, axis.y(g.median)), "#000000", 3.0, None);
        let (my, r) = (axis.y(g.mean), 7.0);
        svg.polygon(&[(cx, my - r), (cx + r, my), (cx, my + r), (cx - r, my)], "#ffffff", "#000000");
        svg.text((cx + FONT * 0.3, axis.bottom + 14.0), &g.label, FONT * 0.85, Anchor::End, -45.0);
        svg.text((cx, 56.0), &format!("n={}", g.n), FONT * 0.7, Anchor::Middle, 0.0);
    }
    svg.line((left, axis.bottom), (left + plot_w, axis.bottom), "#333333", 1.0, None);
    svg.text((left + plot_w / 2.0, height - 12.0), &d.x_label, FONT, Anchor::Middle, 0.0);
    let lx = left + plot_w + 24.0;
    svg.line((lx, 86.0), (lx + 18.0, 86.0), "#000000", 3.0, None);
    svg.text((lx + 24.0, 91.0), "median", FONT * 0.85, Anchor::Start, 0.0);
    svg.polygon(
        &[(lx + 9.0, 106.0), (lx + 16.0, 113.0), (lx + 9.0, 120.0), (lx + 2.0, 113.0)],
        "#ffffff",
        "#000000",
    );
    svg.text((lx + 24.0, 118.0), "mean", FONT * 0.85, Anchor::Start, 0.0);
    svg.finish()
}
