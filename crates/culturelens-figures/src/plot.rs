//! The pieces every chart shares: "nice" tick values, a value axis mapped onto a pixel band,
//! the title, and category and colour-scale legends.

use crate::palette::{Scale, category, shape};
use crate::svg::{Anchor, FONT, Svg, fixed, num};

/// Tick values covering `[lo, hi]`: multiples of 1, 2 or 5 × 10^k, about `target` of them.
pub fn ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        return vec![lo];
    }
    let raw = (hi - lo) / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// A tick label: as few decimals as the step needs.
pub fn tick_label(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 { 0 } else { (-step.log10().floor()) as usize };
    fixed(v, decimals)
}

/// A vertical value axis: values `[lo, hi]` onto pixels `[bottom, top]`.
#[derive(Clone, Copy)]
pub struct YAxis {
    pub lo: f64,
    pub hi: f64,
    pub top: f64,
    pub bottom: f64,
}

impl YAxis {
    /// An axis over the data range `[lo, hi]` widened to include 0 when `zero`, padded by 5 %.
    pub fn fit(lo: f64, hi: f64, zero: bool, top: f64, bottom: f64) -> YAxis {
        let (mut lo, mut hi) = if zero { (lo.min(0.0), hi.max(0.0)) } else { (lo, hi) };
        if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
            lo -= 0.5;
            hi += 0.5;
        }
        let pad = 0.05 * (hi - lo);
        let lo = if zero && lo == 0.0 { 0.0 } else { lo - pad };
        let hi = if zero && hi == 0.0 { 0.0 } else { hi + pad };
        YAxis { lo, hi, top, bottom }
    }

    pub fn y(&self, v: f64) -> f64 {
        self.bottom - (v - self.lo) / (self.hi - self.lo) * (self.bottom - self.top)
    }

    /// Grid lines, tick labels left of `left` and the rotated axis `label`; the frame spans
    /// `[left, right]`.
    pub fn draw(&self, svg: &mut Svg, left: f64, right: f64, label: &str) {
        let t = ticks(self.lo, self.hi, 6);
        let step = if t.len() > 1 { t[1] - t[0] } else { 1.0 };
        for v in &t {
            let y = self.y(*v);
            let colour = if *v == 0.0 { "#555555" } else { "#dddddd" };
            svg.line((left, y), (right, y), colour, 1.0, None);
            svg.text((left - 6.0, y + FONT * 0.35), &tick_label(*v, step), FONT * 0.8, Anchor::End, 0.0);
        }
        svg.line((left, self.top), (left, self.bottom), "#333333", 1.0, None);
        let mid = (self.top + self.bottom) / 2.0;
        svg.text((left - 58.0, mid), label, FONT, Anchor::Middle, -90.0);
    }
}

/// The width a figure needs for its title not to be clipped: about 0.56 em per character of
/// the title's 1.25 × [`FONT`] size (Noto Sans' mean advance), plus margins.
pub fn title_width(text: &str) -> f64 {
    text.chars().count() as f64 * FONT * 1.25 * 0.56 + 40.0
}

/// The figure title, centred at the top.
pub fn title(svg: &mut Svg, text: &str) {
    let x = svg.width() / 2.0;
    svg.text((x, 28.0), text, FONT * 1.25, Anchor::Middle, 0.0);
}

/// A column of category swatches (Okabe–Ito, in order) starting at (x, y); `round` draws each
/// category's point marker (colour and, past eight categories, shape) instead of squares.
pub fn legend(svg: &mut Svg, (x, y): (f64, f64), names: &[String], round: bool) {
    for (i, name) in names.iter().enumerate() {
        let row = y + i as f64 * (FONT + 8.0);
        if round {
            svg.marker((x + 7.0, row - 5.0), 6.0, shape(i), category(i), None);
        } else {
            svg.rect(x, row - 12.0, 14.0, 14.0, category(i), None);
        }
        svg.text((x + 20.0, row), name, FONT * 0.85, Anchor::Start, 0.0);
    }
}

/// A vertical colour bar of `scale` at (x, top)–(x + 16, bottom) with labelled ends and middle.
pub fn colour_bar(svg: &mut Svg, x: f64, top: f64, bottom: f64, scale: Scale, label: &str) {
    const STEPS: usize = 32;
    let (lo, hi) = scale.range();
    let h = (bottom - top) / STEPS as f64;
    for k in 0..STEPS {
        let v = hi - (k as f64 + 0.5) / STEPS as f64 * (hi - lo);
        svg.rect(x, top + k as f64 * h, 16.0, h + 0.5, &scale.color(v), None);
    }
    svg.rect(x, top, 16.0, bottom - top, "none", Some("#333333"));
    for (v, y) in [(hi, top), ((lo + hi) / 2.0, (top + bottom) / 2.0), (lo, bottom)] {
        svg.text((x + 22.0, y + FONT * 0.35), &num(v), FONT * 0.8, Anchor::Start, 0.0);
    }
    svg.text((x + 8.0, top - 10.0), label, FONT * 0.85, Anchor::Middle, 0.0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_numbers() {
        assert_eq!(ticks(0.0, 1.0, 5), vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]);
        assert_eq!(ticks(-0.13, 0.07, 4), vec![-0.1, -0.05, 0.0, 0.05]);
        assert_eq!(tick_label(0.6000000000000001, 0.2), "0.6");
        assert_eq!(tick_label(-0.0, 0.05), "0.00");
    }
}
