//! Strong-surface-tendency flags (SoS paper §5.2): per model–language median SoS, flagged when at
//! or below the 25th percentile of all model–language medians (`SosReport::language_medians`).

use std::collections::BTreeSet;

use culturelens_compute::sos::LanguageMedian;

use super::colour::{css, diverging_rgb, ink};
use super::svg_label;
use crate::dom::{self, esc};
use crate::state::with_app;

const CELL_W: f64 = 64.0;
const CELL_H: f64 = 30.0;
const LEFT: f64 = 150.0;
const TOP: f64 = 24.0;

/// The figure: model × language grid of the medians, flagged pairs outlined and marked ⚑.
fn grid_svg(medians: &[LanguageMedian], threshold: f64) -> String {
    let models: BTreeSet<&str> = medians.iter().map(|m| m.model.as_str()).collect();
    let languages: BTreeSet<&str> = medians.iter().map(|m| m.language.as_str()).collect();
    let limit = medians.iter().map(|m| m.median.abs()).fold(0.05, f64::max);
    let (w, h) = (LEFT + CELL_W * languages.len() as f64 + 4.0, TOP + CELL_H * models.len() as f64 + 4.0);
    let flagged: Vec<String> = medians
        .iter()
        .filter(|m| m.strong_surface)
        .map(|m| format!("{} in {}", m.model, m.language))
        .collect();
    let mut s = format!(
        "<svg id='flags-svg' class='figure' data-figure width='{w}' height='{h}' viewBox='0 0 {w} {h}' role='img' \
         aria-label='Median SoS per model and language; flagged (at or below {threshold:.3}): {}'>",
        esc(&flagged.join(", "))
    );
    for (i, l) in languages.iter().enumerate() {
        s.push_str(&svg_label(LEFT + CELL_W * (i as f64 + 0.5), TOP - 8.0, "middle", "", l));
    }
    for (r, model) in models.iter().enumerate() {
        let y = TOP + CELL_H * r as f64;
        s.push_str(&svg_label(LEFT - 8.0, y + 19.0, "end", "", model));
        for (i, l) in languages.iter().enumerate() {
            let Some(m) = medians.iter().find(|m| m.model == *model && m.language == *l) else { continue };
            let rgb = diverging_rgb(m.median, limit);
            let x = LEFT + CELL_W * i as f64;
            s.push_str(&format!(
                "<g class='flag-cell' data-flagged='{}'><rect x='{x:.1}' y='{y:.1}' width='{:.1}' height='{:.1}' fill='{}'{}/>\
                 <text x='{:.1}' y='{:.1}' text-anchor='middle' fill='{}'>{}{:.2}</text></g>",
                m.strong_surface,
                CELL_W - 2.0,
                CELL_H - 2.0,
                css(rgb),
                if m.strong_surface { " stroke='#000' stroke-width='3'" } else { "" },
                x + CELL_W / 2.0 - 1.0,
                y + 19.0,
                ink(rgb),
                if m.strong_surface { "⚑" } else { "" },
                m.median
            ));
        }
    }
    s.push_str("</svg>");
    s
}

pub fn render() {
    let html = with_app(|app| {
        let report = &app.scored.as_ref()?.report;
        let rows: String = report
            .language_medians
            .iter()
            .map(|m| {
                format!(
                    "<tr class='{}'><td>{}</td><td>{}</td><td>{}</td><td>{:.4}</td><td>{:.4}</td><td>{}</td></tr>",
                    if m.strong_surface { "flagged" } else { "" },
                    esc(&m.model),
                    esc(&m.language),
                    m.n,
                    m.mean,
                    m.median,
                    if m.strong_surface { "⚑ strong surface" } else { "" }
                )
            })
            .collect();
        let flagged = report.language_medians.iter().filter(|m| m.strong_surface).count();
        Some(format!(
            "<h2>Strong surface tendency</h2><p class='what'>Which models draw a language's prompts more like the \
             language than the culture? {flagged} of {} model–language pairs (⚑, outlined) have a median SoS at or below \
             the 25th percentile of all pairs' medians ({:.4}).</p>{}\
             <table class='numbers' id='flags-table' tabindex='0'><caption>Median SoS per model and language</caption><thead><tr><th>model</th><th>language</th><th>n</th><th>mean</th>\
             <th>median</th><th>flag</th></tr></thead><tbody>{rows}</tbody></table>",
            report.language_medians.len(),
            report.strong_surface_threshold,
            grid_svg(&report.language_medians, report.strong_surface_threshold)
        ))
    })
    .flatten();
    if let Some(html) = html {
        dom::set_html("view-flags", &html);
    }
}
