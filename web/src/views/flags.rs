//! Strong-surface-tendency flags (SoS paper §5.2): per model–language median SoS, flagged when at
//! or below the 25th percentile of all model–language medians (`SosReport::language_medians`).

use crate::dom::{self, esc};
use crate::state::with_app;

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
            "<h2>Strong surface tendency</h2><p>{flagged} of {} model–language pairs have a median SoS at or below the \
             25th percentile of all pairs' medians ({:.4}).</p>\
             <table class='numbers' id='flags-table'><thead><tr><th>model</th><th>language</th><th>n</th><th>mean</th>\
             <th>median</th><th>flag</th></tr></thead><tbody>{rows}</tbody></table>",
            report.language_medians.len(),
            report.strong_surface_threshold
        ))
    })
    .flatten();
    if let Some(html) = html {
        dom::set_html("view-flags", &html);
    }
}
