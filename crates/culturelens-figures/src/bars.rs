//! Grouped bar charts: Vendi scores per group with ± 1 sd error bars (CUBE's Vendi figures) and
//! MAGBIG's MAD per language and prompt set with the fair-coin baseline drawn as a black dashed
//! tick across each bar (MAGBIG Fig. 5). One colour per series (Okabe–Ito), groups on the x axis
//! in the order given.

use crate::palette::category;
use crate::plot::{YAxis, legend, title, title_width};
use crate::svg::{Anchor, FONT, Svg};

/// One bar: its height, an optional standard deviation (error bar from value − sd to value + sd)
/// and an optional baseline (a dashed tick at that height).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bar {
    pub value: f64,
    pub sd: Option<f64>,
    pub baseline: Option<f64>,
}

/// A grouped bar chart.
#[derive(Clone, Debug)]
pub struct Bars {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// The x-axis groups.
    pub groups: Vec<String>,
    /// The series (one colour each, shown in the legend when there are two or more).
    pub series: Vec<String>,
    /// `bars[g][s]`: the bar of series `s` in group `g`, if any.
    pub bars: Vec<Vec<Option<Bar>>>,
    /// The legend entry of the baseline ticks, when any bar has one.
    pub baseline_label: Option<String>,
}

/// The SVG of `b`. Panics if `bars` is not `groups × series` (a caller bug).
pub fn bars(b: &Bars) -> String {
    assert_eq!(b.bars.len(), b.groups.len(), "one bar row per group");
    assert!(b.bars.iter().all(|g| g.len() == b.series.len()), "one bar per series");
    let all: Vec<&Bar> = b.bars.iter().flatten().flatten().collect();
    let hi = all
        .iter()
        .map(|x| x.value + x.sd.unwrap_or(0.0))
        .chain(all.iter().filter_map(|x| x.baseline))
        .fold(0.0, f64::max);
    let lo = all.iter().map(|x| x.value - x.sd.unwrap_or(0.0)).fold(0.0, f64::min);
    let bar_w = 26.0;
    let group_w = bar_w * b.series.len() as f64 + 18.0;
    let left = 90.0;
    let legend_w = if b.series.len() > 1 || b.baseline_label.is_some() {
        b.series.iter().chain(&b.baseline_label).map(|s| s.chars().count()).max().unwrap_or(0) as f64
            * FONT
            * 0.55
            + 50.0
    } else {
        0.0
    };
    let plot_w = (group_w * b.groups.len() as f64).max(240.0);
    let label_h = b.groups.iter().map(|g| g.chars().count()).max().unwrap_or(1) as f64 * FONT * 0.4 + 30.0;
    let width = left + plot_w + 30.0 + legend_w;
    let axis = YAxis::fit(lo, hi, true, 60.0, 420.0);
    let height = axis.bottom + label_h + 40.0;
    let mut svg = Svg::new(width.max(title_width(&b.title)), height);
    title(&mut svg, &b.title);
    axis.draw(&mut svg, left, left + plot_w, &b.y_label);
    let x0 = left + (plot_w - group_w * b.groups.len() as f64) / 2.0;
    for (g, group) in b.groups.iter().enumerate() {
        let gx = x0 + g as f64 * group_w + 9.0;
        for (s, bar) in b.bars[g].iter().enumerate() {
            let Some(bar) = bar else { continue };
            let x = gx + s as f64 * bar_w;
            let (y0, y1) = (axis.y(0.0), axis.y(bar.value));
            svg.rect(x + 2.0, y0.min(y1), bar_w - 4.0, (y0 - y1).abs(), category(s), Some("#333333"));
            let cx = x + bar_w / 2.0;
            if let Some(sd) = bar.sd {
                let (ya, yb) = (axis.y(bar.value - sd), axis.y(bar.value + sd));
                svg.line((cx, ya), (cx, yb), "#000000", 1.5, None);
                svg.line((cx - 5.0, ya), (cx + 5.0, ya), "#000000", 1.5, None);
                svg.line((cx - 5.0, yb), (cx + 5.0, yb), "#000000", 1.5, None);
            }
            if let Some(base) = bar.baseline {
                let y = axis.y(base);
                svg.line((x, y), (x + bar_w, y), "#000000", 2.5, Some(4.0));
            }
        }
        let cx = gx + bar_w * b.series.len() as f64 / 2.0;
        svg.text((cx + FONT * 0.3, axis.bottom + 14.0), group, FONT * 0.85, Anchor::End, -45.0);
    }
    svg.line((left, axis.bottom), (left + plot_w, axis.bottom), "#333333", 1.0, None);
    svg.text((left + plot_w / 2.0, height - 12.0), &b.x_label, FONT, Anchor::Middle, 0.0);
    if legend_w > 0.0 {
        let lx = left + plot_w + 24.0;
        if b.series.len() > 1 {
            legend(&mut svg, (lx, 76.0), &b.series, false);
        }
        if let Some(label) = &b.baseline_label {
            let y = 76.0 + b.series.len() as f64 * (FONT + 8.0) + 8.0;
            svg.line((lx, y - 5.0), (lx + 14.0, y - 5.0), "#000000", 2.5, Some(4.0));
            svg.text((lx + 20.0, y), label, FONT * 0.85, Anchor::Start, 0.0);
        }
    }
    svg.finish()
}
