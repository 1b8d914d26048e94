//! Language × language Pearson correlation of joint SoS over (model, culture) cells (SoS paper
//! Fig. 5), from the core's `SosReport::language_correlation`; undefined entries are shown as "–".

use super::colour::{css, diverging_rgb, ink};
use crate::dom::{self, esc};
use crate::state::with_app;

const CELL: f64 = 46.0;
const LEFT: f64 = 60.0;

pub fn render() {
    let html = with_app(|app| {
        let corr = &app.scored.as_ref()?.report.language_correlation;
        let k = corr.languages.len();
        let size = LEFT + CELL * k as f64 + 10.0;
        let off_diagonal: Vec<f64> =
            (0..k).flat_map(|i| (0..k).filter(move |&j| j != i).map(move |j| (i, j))).filter_map(|(i, j)| corr.r[i][j]).collect();
        let range = match (off_diagonal.iter().copied().reduce(f64::min), off_diagonal.iter().copied().reduce(f64::max)) {
            (Some(lo), Some(hi)) => format!("between different languages r ranges from {lo:.2} to {hi:.2}"),
            _ => "no pair of languages shares enough cells".to_string(),
        };
        let mut s = format!(
            "<svg id='correlation-svg' class='figure' data-figure width='{size}' height='{size}' viewBox='0 0 {size} {size}' role='img' \
             aria-label='Correlation of joint SoS between {k} languages; {range}'>"
        );
        for (i, l) in corr.languages.iter().enumerate() {
            let c = LEFT + CELL * (i as f64 + 0.5);
            s.push_str(&format!("<text x='{c:.1}' y='{:.1}' text-anchor='middle'>{}</text>", LEFT - 10.0, esc(l)));
            s.push_str(&format!("<text x='{:.1}' y='{:.1}' text-anchor='end'>{}</text>", LEFT - 8.0, c + 4.0, esc(l)));
        }
        for i in 0..k {
            for j in 0..k {
                let (x, y) = (LEFT + CELL * j as f64, LEFT + CELL * i as f64);
                let (fill, label, rgb) = match corr.r[i][j] {
                    Some(r) => {
                        let rgb = diverging_rgb(r, 1.0);
                        (css(rgb), format!("{r:.2}"), rgb)
                    }
                    None => ("#ddd".to_string(), "–".to_string(), [221, 221, 221]),
                };
                s.push_str(&format!(
                    "<g class='corr' data-r='{}' data-pairs='{}'><title>{} vs {}: r = {label} over {} cells</title>\
                     <rect x='{x:.1}' y='{y:.1}' width='{w:.1}' height='{w:.1}' fill='{fill}'/>\
                     <text x='{:.1}' y='{:.1}' text-anchor='middle' fill='{}'>{label}</text></g>",
                    corr.r[i][j].map_or("null".to_string(), |r| r.to_string()),
                    corr.pairs[i][j],
                    esc(&corr.languages[i]),
                    esc(&corr.languages[j]),
                    corr.pairs[i][j],
                    x + CELL / 2.0 - 1.0,
                    y + CELL / 2.0 + 4.0,
                    ink(rgb),
                    w = CELL - 2.0,
                ));
            }
        }
        s.push_str("</svg>");
        Some(format!("<h2>Pearson correlation of joint SoS between languages</h2><p class='what'>Do two languages push the same cultures the same way? 1 = always alike (purple), −1 = opposite (orange); over (model, culture) cells present for both languages.</p>{s}"))
    })
    .flatten();
    if let Some(html) = html {
        dom::set_html("view-correlation", &html);
    }
}
