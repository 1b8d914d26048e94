//! The pieces every chart shares: "nice" tick values, a value axis mapped onto a pixel band,
//! the title, category labels under an axis, and category and colour-scale legends. Every
//! margin is sized from the real text widths ([`text_width`]), so nothing is clipped and no
//! figure carries blank space sized by a guess.

use crate::fonts::{max_text_width, text_width};
use crate::palette::{CASING, Scale, category, dash, low_contrast, shape};
use crate::svg::{Anchor, FONT, Svg, fixed, num, significant_decimals, trimmed};

/// Size of tick labels.
pub const TICK: f64 = FONT * 0.85;
/// Size of legend entries and category labels.
pub const LABEL: f64 = FONT * 0.9;
/// Size of the title.
pub const TITLE: f64 = FONT * 1.25;
/// Gap between a rotated axis title's glyphs and what it labels, and margin at the figure edge.
const GAP: f64 = 10.0;

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

    fn tick_labels(&self) -> Vec<(f64, String)> {
        let t = ticks(self.lo, self.hi, 6);
        let step = if t.len() > 1 { t[1] - t[0] } else { 1.0 };
        t.iter().map(|v| (*v, tick_label(*v, step))).collect()
    }

    /// The room left of the axis line its tick labels and rotated title need.
    pub fn margin(&self) -> f64 {
        let widest = self.tick_labels().iter().map(|(_, l)| text_width(l, TICK)).fold(0.0, f64::max);
        6.0 + widest + rotated_title_room()
    }

    /// Grid lines, tick labels left of `left` and the rotated axis `label` just left of them;
    /// the frame spans `[left, right]`.
    pub fn draw(&self, svg: &mut Svg, left: f64, right: f64, label: &str) {
        let labels = self.tick_labels();
        let mut widest: f64 = 0.0;
        for (v, text) in &labels {
            let y = self.y(*v);
            let colour = if *v == 0.0 { "#555555" } else { "#dddddd" };
            svg.line((left, y), (right, y), colour, 1.0, None);
            svg.text((left - 6.0, y + TICK * 0.35), text, TICK, Anchor::End, 0.0);
            widest = widest.max(text_width(text, TICK));
        }
        svg.line((left, self.top), (left, self.bottom), "#333333", 1.0, None);
        let mid = (self.top + self.bottom) / 2.0;
        rotated_title(svg, left - 6.0 - widest, mid, label);
    }
}

/// The horizontal room a rotated axis title of [`FONT`] size takes, gaps included.
pub fn rotated_title_room() -> f64 {
    GAP + FONT + GAP
}

/// An axis title rotated to read upwards, its glyphs ending [`GAP`] px left of `right` and
/// centred on `mid`.
pub fn rotated_title(svg: &mut Svg, right: f64, mid: f64, label: &str) {
    // Rotated by -90°, the baseline is vertical: ascenders lie left of it, descenders (about
    // a quarter em) right of it.
    svg.text((right - GAP - FONT * 0.25, mid), label, FONT, Anchor::Middle, -90.0);
}

/// The width a figure needs for its title not to be clipped: the title's real width plus a
/// margin on each side.
pub fn title_width(text: &str) -> f64 {
    text_width(text, TITLE) + 2.0 * 16.0
}

/// The figure title, centred at the top.
pub fn title(svg: &mut Svg, text: &str) {
    let x = svg.width() / 2.0;
    svg.text((x, 28.0), text, TITLE, Anchor::Middle, 0.0);
}

/// Category labels under a horizontal axis, one per slot: horizontal when every label fits
/// its slot, otherwise rotated by 45° (reading up to the right, ending under the slot centre).
pub struct XLabels {
    rotate: bool,
    /// The height they take below the axis, gaps included.
    pub height: f64,
    /// How far the first label reaches left of its slot centre.
    pub overhang: f64,
}

/// The left margin of a chart whose first category slot is `slot` px wide: the y axis' own
/// `margin`, or more when the first (rotated) category label would reach past the figure edge.
pub fn left_margin(margin: f64, labels: &XLabels, slot: f64) -> f64 {
    margin.max(labels.overhang - slot / 2.0 + GAP)
}

impl XLabels {
    /// The layout of `labels` in slots of `slot` px.
    pub fn plan(labels: &[String], slot: f64) -> XLabels {
        let widest = max_text_width(labels, LABEL);
        let first = labels.first().map(|l| text_width(l, LABEL)).unwrap_or(0.0);
        if widest <= slot - 6.0 {
            XLabels { rotate: false, height: 8.0 + LABEL * 1.05, overhang: first / 2.0 }
        } else {
            let s = std::f64::consts::FRAC_1_SQRT_2;
            XLabels {
                rotate: true,
                height: 8.0 + LABEL * 0.55 + s * (widest + 0.25 * LABEL),
                overhang: s * (first + 0.75 * LABEL) - LABEL * 0.3,
            }
        }
    }

    /// Draws `label` under the slot centred at `cx`, below the axis at `y`.
    pub fn draw(&self, svg: &mut Svg, cx: f64, y: f64, label: &str) {
        if self.rotate {
            svg.text((cx + LABEL * 0.3, y + 8.0 + LABEL * 0.55), label, LABEL, Anchor::End, -45.0);
        } else {
            svg.text((cx, y + 8.0 + LABEL * 0.8), label, LABEL, Anchor::Middle, 0.0);
        }
    }
}

/// The baseline of a horizontal axis title under labels that end at `y`.
pub fn x_title_baseline(y: f64) -> f64 {
    y + GAP + FONT * 0.8
}

/// The bottom margin under a horizontal axis title at baseline `y`.
pub fn bottom(y: f64) -> f64 {
    y + FONT * 0.25 + GAP
}

/// How a legend entry shows its category.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A filled square (bars, boxes).
    Swatch,
    /// The category's point marker (scatter plots).
    Point,
    /// A short stretch of the category's line (dash pattern included) with its marker.
    Line,
}

/// Row pitch of legend entries.
pub const LEGEND_ROW: f64 = LABEL + 9.0;

/// The width of a legend of `names` drawn with `key`, including the gap before it.
pub fn legend_width(names: &[String], key: Key) -> f64 {
    let sample = if key == Key::Line { 30.0 } else { 14.0 };
    24.0 + sample + 6.0 + max_text_width(names, LABEL) + 12.0
}

/// A column of category keys (Okabe–Ito, in order) whose first entry's baseline is at (x, y),
/// x being the left end of the keys; see [`Key`]. Low-contrast colours get a dark outline
/// (see [`crate::palette`]).
pub fn legend(svg: &mut Svg, (x, y): (f64, f64), names: &[String], key: Key) {
    for (i, name) in names.iter().enumerate() {
        let row = y + i as f64 * LEGEND_ROW;
        let outline = low_contrast(i).then_some(CASING);
        let mid = row - LABEL * 0.35;
        let text_x = match key {
            Key::Swatch => {
                svg.rect(x, mid - 7.0, 14.0, 14.0, category(i), outline);
                x + 20.0
            }
            Key::Point => {
                svg.marker((x + 7.0, mid), 6.0, shape(i), category(i), outline);
                x + 20.0
            }
            Key::Line => {
                if let Some(casing) = outline {
                    svg.line((x, mid), (x + 30.0, mid), casing, 4.5, dash(i));
                }
                svg.line((x, mid), (x + 30.0, mid), category(i), 2.5, dash(i));
                svg.marker((x + 15.0, mid), 6.0, shape(i), category(i), Some("#333333"));
                x + 36.0
            }
        };
        svg.text((text_x, row), name, LABEL, Anchor::Start, 0.0);
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
    for (v, y) in colour_bar_values(scale).into_iter().zip([top, (top + bottom) / 2.0, bottom]) {
        svg.text((x + 22.0, y + TICK * 0.35), &v, TICK, Anchor::Start, 0.0);
    }
    svg.text((x + 8.0, top - 10.0), label, LABEL, Anchor::Middle, 0.0);
}

/// The labels of a [`colour_bar`], top to bottom: its high end, middle and low end, with at most
/// two decimals and no trailing zeros, or two significant digits when the range is below 0.01
/// (`0.00012`, `0`, `-0.00012` rather than `0`, `0`, `0`).
fn colour_bar_values(scale: Scale) -> [String; 3] {
    let (lo, hi) = scale.range();
    let decimals = significant_decimals(lo.abs().max(hi.abs()), 2);
    [hi, (lo + hi) / 2.0, lo].map(|v| if decimals == 0 { num(v) } else { trimmed(v, decimals) })
}

/// The gap to leave between what a [`colour_bar`] labels and the bar: 24 px, more when the
/// bar's title (centred over the 16 px bar) is wider than the bar and would reach back.
pub fn colour_bar_gap(label: &str) -> f64 {
    (text_width(label, LABEL) / 2.0 - 8.0 + 8.0).max(24.0)
}

/// The width a [`colour_bar`] at `x` takes right of `x`: the bar, its value labels and its
/// title (centred over the bar), plus a margin.
pub fn colour_bar_width(scale: Scale, label: &str) -> f64 {
    let ticks = colour_bar_values(scale).iter().map(|v| text_width(v, TICK)).fold(0.0, f64::max);
    (22.0 + ticks).max(8.0 + text_width(label, LABEL) / 2.0) + 12.0
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
