//! Grouped bar charts: Vendi scores per group with ± 1 sd error bars (CUBE's Vendi figures) or
//! bootstrap intervals (`--ci`), and
//! MAGBIG's MAD per language and prompt set with the fair-coin baseline drawn as a black dashed
//! tick across each bar (MAGBIG Fig. 5). One colour per series (Okabe–Ito), groups on the x axis
//! in the order given.

use crate::palette::category;
use crate::plot::{
    Key, LABEL, LEGEND_ROW, XLabels, YAxis, bottom, left_margin, legend, legend_width, title, title_width,
    x_title_baseline,
};
use crate::svg::{Anchor, FONT, Svg};

/// One bar: its height, an optional error bar and an optional baseline (a dashed tick at that
/// height).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bar {
    pub value: f64,
    /// An error bar from value − sd to value + sd.
    pub sd: Option<f64>,
    pub baseline: Option<f64>,
    /// An error bar from `lo` to `hi` (a confidence interval); drawn instead of `sd` when given.
    pub interval: Option<(f64, f64)>,
}

impl Bar {
    /// The ends of its error bar, if any: the interval, else value ± sd.
    fn whisker(&self) -> Option<(f64, f64)> {
        self.interval.or(self.sd.map(|sd| (self.value - sd, self.value + sd)))
    }
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
    let ends = |x: &Bar| x.whisker().unwrap_or((x.value, x.value));
    let hi = all
        .iter()
        .map(|x| x.value.max(ends(x).1))
        .chain(all.iter().filter_map(|x| x.baseline))
        .fold(0.0, f64::max);
    let lo = all.iter().map(|x| x.value.min(ends(x).0)).fold(0.0, f64::min);
    let (n_groups, n_series) = (b.groups.len().max(1) as f64, b.series.len().max(1) as f64);
    // Bars are 26 to 44 px wide with 18 px between groups; the plot is as wide as its groups
    // need, or as the title needs (then the groups spread out and the bars widen).
    let (min_bar, max_bar, group_gap) = (26.0, 44.0, 18.0);
    let axis = YAxis::fit(lo, hi, true, 60.0, 420.0);
    let margin = axis.margin();
    let legend_names: Vec<String> = if b.series.len() > 1 { b.series.clone() } else { Vec::new() }
        .into_iter()
        .chain(b.baseline_label.clone())
        .collect();
    let right = if legend_names.is_empty() { 16.0 } else { legend_width(&legend_names, Key::Swatch) };
    let natural = (min_bar * n_series + group_gap) * n_groups;
    let plot_w = natural.max(title_width(&b.title) - margin - right).max(160.0);
    let group_w = plot_w / n_groups;
    let bar_w = ((group_w - group_gap) / n_series).clamp(min_bar, max_bar);
    let labels = XLabels::plan(&b.groups, group_w);
    let left = left_margin(margin, &labels, group_w);
    let x_title = x_title_baseline(axis.bottom + labels.height);
    let height = bottom(x_title);
    let mut svg = Svg::new(left + plot_w + right, height);
    title(&mut svg, &b.title);
    axis.draw(&mut svg, left, left + plot_w, &b.y_label);
    for (g, group) in b.groups.iter().enumerate() {
        let cx = left + (g as f64 + 0.5) * group_w;
        let gx = cx - bar_w * n_series / 2.0;
        for (s, bar) in b.bars[g].iter().enumerate() {
            let Some(bar) = bar else { continue };
            let x = gx + s as f64 * bar_w;
            let (y0, y1) = (axis.y(0.0), axis.y(bar.value));
            svg.rect(x + 2.0, y0.min(y1), bar_w - 4.0, (y0 - y1).abs(), category(s), Some("#333333"));
            let bx = x + bar_w / 2.0;
            if let Some((lo, hi)) = bar.whisker() {
                let (ya, yb) = (axis.y(lo), axis.y(hi));
                svg.line((bx, ya), (bx, yb), "#000000", 1.5, None);
                svg.line((bx - 5.0, ya), (bx + 5.0, ya), "#000000", 1.5, None);
                svg.line((bx - 5.0, yb), (bx + 5.0, yb), "#000000", 1.5, None);
            }
            if let Some(base) = bar.baseline {
                let y = axis.y(base);
                svg.line((x, y), (x + bar_w, y), "#000000", 2.5, Some("4"));
            }
        }
        labels.draw(&mut svg, cx, axis.bottom, group);
    }
    svg.line((left, axis.bottom), (left + plot_w, axis.bottom), "#333333", 1.0, None);
    svg.text((left + plot_w / 2.0, x_title), &b.x_label, FONT, Anchor::Middle, 0.0);
    if !legend_names.is_empty() {
        let lx = left + plot_w + 24.0;
        let y = axis.top + 16.0;
        if b.series.len() > 1 {
            legend(&mut svg, (lx, y), &b.series, Key::Swatch);
        }
        if let Some(label) = &b.baseline_label {
            let n = if b.series.len() > 1 { b.series.len() } else { 0 };
            let y = y + n as f64 * LEGEND_ROW + 6.0;
            let mid = y - LABEL * 0.35;
            svg.line((lx, mid), (lx + 14.0, mid), "#000000", 2.5, Some("4"));
            svg.text((lx + 20.0, y), label, LABEL, Anchor::Start, 0.0);
        }
    }
    svg.finish()
}
