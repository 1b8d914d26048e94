//! The 2-D PCA scatter of an embedding table coloured by language (SoS App. E): one dot per
//! output at its first two principal-component coordinates (computed by the caller), one
//! Okabe–Ito colour per category (and one marker shape per eight categories, so more than
//! eight stay apart), axes labelled PC1 and PC2 with equal scales.

use crate::palette::{category, shape};
use crate::plot::{legend, tick_label, ticks, title, title_width};
use crate::svg::{Anchor, FONT, Svg};

/// Points coloured by category.
#[derive(Clone, Debug)]
pub struct Scatter {
    pub title: String,
    /// The category names, in legend order.
    pub categories: Vec<String>,
    /// (x, y, category index).
    pub points: Vec<(f64, f64, usize)>,
}

/// The SVG of `s`. Panics if a point names a category that does not exist (a caller bug).
pub fn scatter(s: &Scatter) -> String {
    assert!(s.points.iter().all(|p| p.2 < s.categories.len()), "every point's category exists");
    let (left, top, side) = (90.0, 60.0, 480.0);
    let extent = s.points.iter().map(|p| p.0.abs().max(p.1.abs())).fold(0.0, f64::max).max(1e-12) * 1.08;
    let to_px = |v: f64| (v + extent) / (2.0 * extent) * side;
    let legend_w =
        s.categories.iter().map(|c| c.chars().count()).max().unwrap_or(0) as f64 * FONT * 0.55 + 50.0;
    let mut svg = Svg::new((left + side + 30.0 + legend_w).max(title_width(&s.title)), top + side + 70.0);
    title(&mut svg, &s.title);
    let t = ticks(-extent, extent, 6);
    let step = if t.len() > 1 { t[1] - t[0] } else { 1.0 };
    for v in &t {
        let p = to_px(*v);
        svg.line((left + p, top), (left + p, top + side), "#e5e5e5", 1.0, None);
        svg.line((left, top + side - p), (left + side, top + side - p), "#e5e5e5", 1.0, None);
        svg.text((left + p, top + side + 20.0), &tick_label(*v, step), FONT * 0.8, Anchor::Middle, 0.0);
        svg.text(
            (left - 6.0, top + side - p + FONT * 0.35),
            &tick_label(*v, step),
            FONT * 0.8,
            Anchor::End,
            0.0,
        );
    }
    svg.rect(left, top, side, side, "none", Some("#333333"));
    for (x, y, c) in &s.points {
        svg.marker((left + to_px(*x), top + side - to_px(*y)), 3.0, shape(*c), category(*c), None);
    }
    svg.text((left + side / 2.0, top + side + 50.0), "PC1", FONT, Anchor::Middle, 0.0);
    svg.text((left - 58.0, top + side / 2.0), "PC2", FONT, Anchor::Middle, -90.0);
    legend(&mut svg, (left + side + 24.0, top + 16.0), &s.categories, true);
    svg.finish()
}
