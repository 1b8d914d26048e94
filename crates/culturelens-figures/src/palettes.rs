//! Dominant-colour palettes (SoS App. F, Fig. 14–15): one horizontal strip per group (model,
//! language, culture), its k-means colours side by side in the order given (largest cluster
//! first), each as wide as its share of the group's pixels, with the share printed on swatches
//! wide enough to hold it (black or white, whichever contrasts more).

use crate::plot::{title, title_width};
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

/// Relative luminance (WCAG) of `#rrggbb`; 0.5 for anything else.
fn luminance(hex: &str) -> f64 {
    let channel = |i: usize| {
        let c = f64::from(u8::from_str_radix(hex.get(i..i + 2).unwrap_or("80"), 16).unwrap_or(128)) / 255.0;
        if c <= 0.04045 { c / 12.92 } else { ((c + 0.055) / 1.055).powf(2.4) }
    };
    0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5)
}

/// The SVG of `p`.
pub fn palettes(p: &Palettes) -> String {
    let label_w =
        p.rows.iter().map(|r| r.label.chars().count()).max().unwrap_or(1) as f64 * FONT * 0.5 + 24.0;
    let (left, top, gap) = (label_w + 16.0, 60.0, 10.0);
    let height = top + p.rows.len() as f64 * (STRIP_H + gap) + 50.0;
    let mut svg = Svg::new((left + STRIP_W + 30.0).max(480.0).max(title_width(&p.title)), height);
    title(&mut svg, &p.title);
    for (r, row) in p.rows.iter().enumerate() {
        let y = top + r as f64 * (STRIP_H + gap);
        svg.text((left - 10.0, y + STRIP_H / 2.0 + FONT * 0.3), &row.label, FONT * 0.8, Anchor::End, 0.0);
        let total: f64 = row.colours.iter().map(|c| c.1.max(0.0)).sum();
        let mut x = left;
        for (hex, share) in &row.colours {
            let w = if total > 0.0 { share.max(0.0) / total * STRIP_W } else { 0.0 };
            svg.rect(x, y, w, STRIP_H, hex, None);
            if w >= 42.0 {
                let ink = if luminance(hex) > 0.18 { "#000000" } else { "#ffffff" };
                let text = format!("{:.0}%", 100.0 * share);
                svg.text_coloured((x + w / 2.0, y + STRIP_H / 2.0 + FONT * 0.3), &text, FONT * 0.7, ink);
            }
            x += w;
        }
        svg.rect(left, y, STRIP_W, STRIP_H, "none", Some("#333333"));
    }
    svg.text((left + STRIP_W / 2.0, height - 18.0), "share of pixels", FONT, Anchor::Middle, 0.0);
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
