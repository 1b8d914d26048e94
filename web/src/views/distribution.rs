//! Per-model distribution of per-output SoS (SoS paper Fig. 2): a violin (Gaussian kernel density,
//! Silverman bandwidth) with the box (quartiles), whiskers (min/max), median line and mean dot,
//! plus the summary table of the core's `SosReport::per_model`.

use std::collections::BTreeMap;

use super::colour::{category, css};
use crate::dom::{self, esc};
use crate::state::with_app;

const W: f64 = 160.0;
const H: f64 = 320.0;
const PAD: f64 = 40.0;
const GRID: usize = 64;

pub fn render() {
    let html = with_app(|app| {
        let scored = app.scored.as_ref()?;
        let mut by_model: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for (i, c) in scored.layout.cell.iter().enumerate() {
            by_model.entry(scored.layout.cells[*c as usize].model.as_str()).or_default().push(f64::from(scored.per_image[i]));
        }
        let (lo, hi) = scored.report.per_model.values().fold((f64::MAX, f64::MIN), |(a, b), s| (a.min(s.min), b.max(s.max)));
        let (lo, hi) = (lo.min(-0.05), hi.max(0.05));
        let y = |v: f64| PAD + (hi - v) / (hi - lo) * (H - 2.0 * PAD);
        let width = W * by_model.len() as f64 + 60.0;
        let label: Vec<String> = scored
            .report
            .per_model
            .iter()
            .map(|(m, v)| format!("{m}: median {:.3}, mean {:.3}, range {:.3} to {:.3}", v.median, v.mean, v.min, v.max))
            .collect();
        let mut s = format!(
            "<svg id='distribution-svg' class='figure' data-figure width='{width}' height='{H}' viewBox='0 0 {width} {H}' role='img' aria-label='Per-output SoS per model. {}'>",
            esc(&label.join("; "))
        );
        s.push_str(&format!("<line x1='50' x2='{width}' y1='{0:.1}' y2='{0:.1}' class='zero'/>", y(0.0)));
        for t in [-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0].into_iter().filter(|t| *t >= lo && *t <= hi) {
            s.push_str(&format!("<text x='44' y='{:.1}' text-anchor='end' class='muted'>{t}</text>", y(t) + 4.0));
        }
        for (k, (model, values)) in by_model.iter().enumerate() {
            let summary = &scored.report.per_model[*model];
            let cx = 60.0 + W * (k as f64 + 0.5);
            let colour = css(category(k));
            let n = values.len() as f64;
            let sd = (values.iter().map(|v| (v - summary.mean).powi(2)).sum::<f64>() / n).sqrt();
            let iqr = summary.q3 - summary.q1;
            let bw = (0.9 * sd.min(iqr / 1.34).max(1e-3) * n.powf(-0.2)).max(1e-3);
            let grid: Vec<f64> = (0..=GRID).map(|i| summary.min + (summary.max - summary.min) * i as f64 / GRID as f64).collect();
            let density: Vec<f64> = grid
                .iter()
                .map(|g| values.iter().map(|v| (-0.5 * ((g - v) / bw).powi(2)).exp()).sum::<f64>())
                .collect();
            let peak = density.iter().copied().fold(1e-12, f64::max);
            let half = |d: f64| d / peak * (W * 0.4);
            let right: Vec<String> = grid.iter().zip(&density).map(|(g, d)| format!("{:.1},{:.1}", cx + half(*d), y(*g))).collect();
            let left: Vec<String> = grid.iter().zip(&density).rev().map(|(g, d)| format!("{:.1},{:.1}", cx - half(*d), y(*g))).collect();
            s.push_str(&format!(
                "<polygon points='{} {}' fill='{colour}' fill-opacity='0.35' stroke='{colour}'/>",
                right.join(" "),
                left.join(" ")
            ));
            s.push_str(&format!(
                "<line x1='{cx}' x2='{cx}' y1='{:.1}' y2='{:.1}' class='whisker'/>\
                 <rect x='{:.1}' y='{:.1}' width='16' height='{:.1}' class='box'/>\
                 <line x1='{:.1}' x2='{:.1}' y1='{m:.1}' y2='{m:.1}' class='median'/>\
                 <circle cx='{cx}' cy='{:.1}' r='4' class='mean'/>\
                 <text x='{cx}' y='{:.1}' text-anchor='middle'>{}</text>",
                y(summary.max),
                y(summary.min),
                cx - 8.0,
                y(summary.q3),
                (y(summary.q1) - y(summary.q3)).max(1.0),
                cx - 12.0,
                cx + 12.0,
                y(summary.mean),
                H - 10.0,
                esc(model),
                m = y(summary.median),
            ));
        }
        s.push_str("</svg>");
        let rows: String = scored
            .report
            .per_model
            .iter()
            .map(|(m, v)| {
                format!(
                    "<tr><td>{}</td><td>{}</td><td>{:.4}</td><td>{:.4}</td><td>{:.4}</td><td>{:.4}</td><td>{:.4}</td><td>{:.4}</td></tr>",
                    esc(m), v.n, v.mean, v.median, v.q1, v.q3, v.min, v.max
                )
            })
            .collect();
        Some(format!(
            "<h2>Per-output SoS per model</h2><p class='what'>How every picture of each model scores: below 0 it leans to \
             its prompt's language, above 0 to the culture. Violin = density; box = quartiles; line = median; dot = mean; \
             whiskers = min/max.</p>{s}\
             <table class='numbers' tabindex='0'><caption>Per-output SoS per model</caption><thead><tr><th>model</th><th>n</th><th>mean</th><th>median</th><th>q1</th><th>q3</th><th>min</th><th>max</th></tr></thead><tbody>{rows}</tbody></table>"
        ))
    })
    .flatten();
    if let Some(html) = html {
        dom::set_html("view-distribution", &html);
    }
}
