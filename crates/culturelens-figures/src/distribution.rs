//! Per-model distributions of per-output SoS (SoS Fig. 2) as box plots: the box spans the first
//! to third quartile, whiskers reach the minimum and maximum, a black line marks the median and a
//! white diamond the mean. Quantiles come from the caller (the CLI passes the `per_model`
//! summaries of `culturelens sos --report`, computed by `culturelens_metrics::stats`).

use crate::palette::category;
use crate::plot::{
    Key, LABEL, LEGEND_ROW, TICK, XLabels, YAxis, bottom, left_margin, legend_width, title, title_width,
    x_title_baseline,
};
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
    let axis = YAxis::fit(lo, hi, true, 68.0, 420.0);
    let margin = axis.margin();
    let keys = ["median".to_string(), "mean".to_string()];
    let right = legend_width(&keys, Key::Swatch) + 4.0;
    let n = d.groups.len().max(1) as f64;
    // 90 px per box, more when the title needs the width.
    let plot_w = (90.0 * n).max(title_width(&d.title) - margin - right).max(160.0);
    let slot = plot_w / n;
    let labels: Vec<String> = d.groups.iter().map(|g| g.label.clone()).collect();
    let xl = XLabels::plan(&labels, slot);
    let left = left_margin(margin, &xl, slot);
    let x_title = x_title_baseline(axis.bottom + xl.height);
    let height = bottom(x_title);
    let mut svg = Svg::new(left + plot_w + right, height);
    title(&mut svg, &d.title);
    axis.draw(&mut svg, left, left + plot_w, &d.y_label);
    for (i, g) in d.groups.iter().enumerate() {
        let cx = left + (i as f64 + 0.5) * slot;
        let half = 27.0_f64.min(slot * 0.35);
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
        xl.draw(&mut svg, cx, axis.bottom, &g.label);
        svg.text((cx, axis.top - 8.0), &format!("n={}", g.n), TICK, Anchor::Middle, 0.0);
    }
    svg.line((left, axis.bottom), (left + plot_w, axis.bottom), "#333333", 1.0, None);
    svg.text((left + plot_w / 2.0, x_title), &d.x_label, FONT, Anchor::Middle, 0.0);
    let lx = left + plot_w + 24.0;
    let y = axis.top + 24.0;
    let mid = y - LABEL * 0.35;
    svg.line((lx, mid), (lx + 16.0, mid), "#000000", 3.0, None);
    svg.text((lx + 20.0, y), &keys[0], LABEL, Anchor::Start, 0.0);
    let mid = mid + LEGEND_ROW;
    svg.polygon(
        &[(lx + 8.0, mid - 7.0), (lx + 15.0, mid), (lx + 8.0, mid + 7.0), (lx + 1.0, mid)],
        "#ffffff",
        "#000000",
    );
    svg.text((lx + 20.0, y + LEGEND_ROW), &keys[1], LABEL, Anchor::Start, 0.0);
    svg.finish()
}
