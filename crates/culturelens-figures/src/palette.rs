//! Colour-blind-safe palettes: Okabe & Ito's eight categorical colours (Okabe & Ito 2008, the
//! palette recommended for deuteranopia, protanopia and tritanopia), viridis for sequential
//! scales (non-negative values: NA shares, Pearson r in [-1, 1] is drawn diverging) and
//! ColorBrewer's PuOr for diverging scales centred on 0 (SoS: orange = surface, purple =
//! semantics). Colours are written as `#rrggbb`.
//!
//! Readable on white, the rule every figure follows for categorical colours:
//! - a colour with less than [`MIN_CONTRAST`] (2:1) contrast against white (WCAG 2 relative
//!   luminance; of Okabe–Ito only yellow `#F0E442`, 1.3:1, while the next lowest, orange and
//!   sky blue, have 2.3:1) keeps its hue but never stands alone on white: a line is drawn over a
//!   dark casing ([`CASING`], 2 px wider), a point or legend swatch gets a dark outline
//!   ([`low_contrast`]). The palette itself is unchanged, so Okabe & Ito's separation for
//!   colour-blind readers holds;
//! - past eight categories the colours repeat, so the 9th to 16th category also changes its
//!   point marker ([`shape`]: squares) and, on line charts, its dash pattern ([`dash`]), and so
//!   on for each further eight: no two of up to 32 series look the same.

/// Okabe–Ito, black last (used for the ninth and later categories: they repeat from the start).
pub const OKABE_ITO: [&str; 8] =
    ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000"];

/// Colour of category `i` (cycling after eight).
pub fn category(i: usize) -> &'static str {
    OKABE_ITO[i % OKABE_ITO.len()]
}

/// The least contrast against white (WCAG 2 ratio) a categorical colour may have to be drawn
/// alone on white; below it, a casing or outline ([`low_contrast`]).
pub const MIN_CONTRAST: f64 = 2.0;

/// The dark casing drawn under a low-contrast line and around a low-contrast point.
pub const CASING: &str = "#333333";

/// WCAG 2 relative luminance of `#rrggbb`; 0.5 for anything else.
pub fn luminance(hex: &str) -> f64 {
    let channel = |i: usize| {
        let c = f64::from(u8::from_str_radix(hex.get(i..i + 2).unwrap_or("80"), 16).unwrap_or(128)) / 255.0;
        if c <= 0.04045 { c / 12.92 } else { ((c + 0.055) / 1.055).powf(2.4) }
    };
    if hex.len() != 7 || !hex.starts_with('#') {
        return 0.5;
    }
    0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5)
}

/// WCAG 2 contrast ratio of `#rrggbb` against white (1 to 21).
pub fn contrast_on_white(hex: &str) -> f64 {
    1.05 / (luminance(hex) + 0.05)
}

/// Whether category `i`'s colour is below [`MIN_CONTRAST`] on white and so is drawn with a
/// dark casing (lines) or outline (points, swatches).
pub fn low_contrast(i: usize) -> bool {
    contrast_on_white(category(i)) < MIN_CONTRAST
}

/// The `stroke-dasharray` of category `i`'s line: solid for the first eight categories, then
/// dashed, dotted and dash-dotted for each further eight (with [`shape`], so that repeated
/// colours stay apart on line charts).
pub fn dash(i: usize) -> Option<&'static str> {
    [None, Some("8 4"), Some("2 3"), Some("8 3 2 3")][(i / OKABE_ITO.len()) % 4]
}

/// A point marker's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Circle,
    Square,
    Triangle,
    Diamond,
}

/// Shape of category `i`: circles for the first eight categories, then squares, triangles and
/// diamonds for each further eight, so that with more than eight categories no two share both
/// colour and shape (up to 32; a colour alone would repeat after eight).
pub fn shape(i: usize) -> Shape {
    [Shape::Circle, Shape::Square, Shape::Triangle, Shape::Diamond][(i / OKABE_ITO.len()) % 4]
}

/// viridis at 9 evenly spaced stops (matplotlib's table at 0, 1/8, …, 1).
const VIRIDIS: [[u8; 3]; 9] = [
    [68, 1, 84],
    [71, 44, 122],
    [59, 81, 139],
    [44, 113, 142],
    [33, 144, 141],
    [39, 173, 129],
    [92, 200, 99],
    [170, 220, 50],
    [253, 231, 37],
];

/// ColorBrewer PuOr (11 classes), from orange (-1) through white (0) to purple (+1).
const PUOR: [[u8; 3]; 11] = [
    [127, 59, 8],
    [179, 88, 6],
    [224, 130, 20],
    [253, 184, 99],
    [254, 224, 182],
    [247, 247, 247],
    [216, 218, 235],
    [178, 171, 210],
    [128, 115, 172],
    [84, 39, 136],
    [45, 0, 75],
];

fn interpolate(stops: &[[u8; 3]], t: f64) -> String {
    let t = if t.is_finite() { t.clamp(0.0, 1.0) } else { 0.0 };
    let pos = t * (stops.len() - 1) as f64;
    let i = (pos.floor() as usize).min(stops.len() - 2);
    let f = pos - i as f64;
    let c: Vec<u8> = (0..3)
        .map(|k| (stops[i][k] as f64 + f * (stops[i + 1][k] as f64 - stops[i][k] as f64)).round() as u8)
        .collect();
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

/// A colour scale from values to colours.
#[derive(Clone, Copy, Debug)]
pub enum Scale {
    /// viridis over `[lo, hi]`.
    Sequential { lo: f64, hi: f64 },
    /// PuOr over `[-limit, limit]`, white at 0.
    Diverging { limit: f64 },
}

impl Scale {
    /// The colour of `v` (clamped to the scale's range).
    pub fn color(self, v: f64) -> String {
        match self {
            Scale::Sequential { lo, hi } => {
                interpolate(&VIRIDIS, if hi > lo { (v - lo) / (hi - lo) } else { 0.5 })
            }
            Scale::Diverging { limit } => interpolate(&PUOR, 0.5 + 0.5 * v / limit.max(f64::MIN_POSITIVE)),
        }
    }

    /// The value range `(lo, hi)` of the scale.
    pub fn range(self) -> (f64, f64) {
        match self {
            Scale::Sequential { lo, hi } => (lo, hi),
            Scale::Diverging { limit } => (-limit, limit),
        }
    }

    /// Whether text on colour `v` should be white for contrast (dark cells).
    pub fn dark(self, v: f64) -> bool {
        match self {
            Scale::Sequential { lo, hi } => hi <= lo || (v - lo) / (hi - lo) < 0.55,
            Scale::Diverging { limit } => (v / limit).abs() > 0.6,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_and_centre_are_the_stops() {
        let d = Scale::Diverging { limit: 2.0 };
        assert_eq!(d.color(0.0), "#f7f7f7");
        assert_eq!(d.color(-2.0), "#7f3b08");
        assert_eq!(d.color(5.0), "#2d004b");
        let s = Scale::Sequential { lo: 0.0, hi: 1.0 };
        assert_eq!(s.color(0.0), "#440154");
        assert_eq!(s.color(1.0), "#fde725");
        assert_eq!(s.color(0.5), "#21908d");
    }

    #[test]
    fn only_yellow_needs_a_casing_on_white() {
        let low: Vec<usize> = (0..8).filter(|i| low_contrast(*i)).collect();
        assert_eq!(low, vec![3]);
        assert!((contrast_on_white("#F0E442") - 1.32).abs() < 0.01);
        assert!((contrast_on_white("#000000") - 21.0).abs() < 1e-9);
        assert!(low_contrast(11) && !low_contrast(8));
        assert_eq!((dash(0), dash(7), dash(8), dash(16)), (None, None, Some("8 4"), Some("2 3")));
    }
}
