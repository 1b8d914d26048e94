//! The 2-D PCA scatter of an embedding table coloured by language (SoS App. E): one dot per
//! output at its first two principal-component coordinates (computed by the caller), one
//! Okabe–Ito colour per category (and one marker shape per eight categories, so more than
//! eight stay apart), axes labelled PC1 and PC2 with equal scales.

use crate::fonts::text_width;
use crate::palette::{CASING, category, low_contrast, shape};
use crate::plot::{
    Key, TICK, bottom, legend, legend_width, rotated_title, rotated_title_room, tick_label, ticks, title,
    title_width, x_title_baseline,
};
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
    let (top, side) = (60.0, 480.0);
    let extent = s.points.iter().map(|p| p.0.abs().max(p.1.abs())).fold(0.0, f64::max).max(1e-12) * 1.08;
    let to_px = |v: f64| (v + extent) / (2.0 * extent) * side;
    let t = ticks(-extent, extent, 6);
    let step = if t.len() > 1 { t[1] - t[0] } else { 1.0 };
    let widest = t.iter().map(|v| text_width(&tick_label(*v, step), TICK)).fold(0.0, f64::max);
    let left = 6.0 + widest + rotated_title_room();
    let legend_w = legend_width(&s.categories, Key::Point);
    let x_title = x_title_baseline(top + side + 8.0 + TICK * 1.05);
    let width = (left + side + legend_w).max(title_width(&s.title));
    let mut svg = Svg::new(width, bottom(x_title));
    title(&mut svg, &s.title);
    for v in &t {
        let p = to_px(*v);
        svg.line((left + p, top), (left + p, top + side), "#e5e5e5", 1.0, None);
        svg.line((left, top + side - p), (left + side, top + side - p), "#e5e5e5", 1.0, None);
        svg.text((left + p, top + side + 8.0 + TICK * 0.8), &tick_label(*v, step), TICK, Anchor::Middle, 0.0);
        svg.text((left - 6.0, top + side - p + TICK * 0.35), &tick_label(*v, step), TICK, Anchor::End, 0.0);
    }
    svg.rect(left, top, side, side, "none", Some("#333333"));
    for (x, y, c) in &s.points {
        let outline = low_contrast(*c).then_some(CASING);
        svg.marker((left + to_px(*x), top + side - to_px(*y)), 3.5, shape(*c), category(*c), outline);
    }
    svg.text((left + side / 2.0, x_title), "PC1", FONT, Anchor::Middle, 0.0);
    rotated_title(&mut svg, left - 6.0 - widest, top + side / 2.0, "PC2");
    legend(&mut svg, (left + side + 24.0, top + 16.0), &s.categories, Key::Point);
    svg.finish()
}
