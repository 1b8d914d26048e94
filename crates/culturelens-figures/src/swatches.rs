//! Dominant-colour palettes (SoS App. F, Fig. 14–15): one horizontal strip per group (model,
//! language, culture), its k-means colours side by side in the order given (largest cluster
//! first), each as wide as its share of the group's pixels, with the share printed on swatches
//! wide enough to hold it (black or white, whichever contrasts more).

use crate::fonts::max_text_width;
use crate::palette::luminance;
use crate::plot::{LABEL, TICK, bottom, title, title_width, x_title_baseline};
use crate::svg::{Anchor, FONT, Svg};

/// One palette: its label and (colour `#rrggbb`, share) pairs.
#[derive(Clone, Debug)]
pub struct PaletteRow {
    pub label: String,
    pub colours: Vec<(String, f64)>,
}

/// Palettes, one strip each, in the order given.
#[derive(Clone, Debug)]
pub struct Palettes {
    pub title: String,
    pub rows: Vec<PaletteRow>,
}

const STRIP_W: f64 = 520.0;
const STRIP_H: f64 = 30.0;

/// The SVG of `p`.
pub fn palettes(p: &Palettes) -> String {
    let labels: Vec<String> = p.rows.iter().map(|r| r.label.clone()).collect();
    let content = 16.0 + max_text_width(&labels, LABEL) + 10.0 + STRIP_W + 16.0;
    let width = content.max(title_width(&p.title));
    // The labels and strips are centred under the title.
    let left = (width - content) / 2.0 + 16.0 + max_text_width(&labels, LABEL) + 10.0;
    let (top, gap) = (60.0, 10.0);
    let x_title = x_title_baseline(top + p.rows.len() as f64 * (STRIP_H + gap) - gap);
    let height = bottom(x_title);
    let mut svg = Svg::new(width, height);
    title(&mut svg, &p.title);
    for (r, row) in p.rows.iter().enumerate() {
        let y = top + r as f64 * (STRIP_H + gap);
        svg.text((left - 10.0, y + STRIP_H / 2.0 + LABEL * 0.35), &row.label, LABEL, Anchor::End, 0.0);
        let total: f64 = row.colours.iter().map(|c| c.1.max(0.0)).sum();
        let mut x = left;
        for (hex, share) in &row.colours {
            let w = if total > 0.0 { share.max(0.0) / total * STRIP_W } else { 0.0 };
            svg.rect(x, y, w, STRIP_H, hex, None);
            if w >= 42.0 {
                let ink = if luminance(hex) > 0.18 { "#000000" } else { "#ffffff" };
                let text = format!("{:.0}%", 100.0 * share);
                svg.text_coloured((x + w / 2.0, y + STRIP_H / 2.0 + TICK * 0.35), &text, TICK, ink);
            }
            x += w;
        }
        svg.rect(left, y, STRIP_W, STRIP_H, "none", Some("#333333"));
    }
    svg.text((left + STRIP_W / 2.0, x_title), "share of pixels", FONT, Anchor::Middle, 0.0);
    svg.finish()
}

#[cfg(test)]
mod tests {
    use super::luminance;

    #[test]
    fn luminance_of_black_white_and_grey() {
        assert_eq!(luminance("#000000"), 0.0);
        assert!((luminance("#ffffff") - 1.0).abs() < 1e-12);
        assert!((luminance("#777777") - 0.184).abs() < 1e-3);
    }
}
