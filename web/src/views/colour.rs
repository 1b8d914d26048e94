//! Colour-blind-safe colour maps: the diverging PuOr scale of ColorBrewer for signed values
//! (orange = surface, purple = semantics, near-white = 0), viridis for shares in [0, 1] and the
//! Okabe–Ito palette for categories (the palettes of `culturelens-figures`).

/// ColorBrewer PuOr (7 classes), from negative (orange) to positive (purple).
const PUOR: [[u8; 3]; 7] = [
    [0xb3, 0x58, 0x06],
    [0xf1, 0xa3, 0x40],
    [0xfe, 0xe0, 0xb6],
    [0xf7, 0xf7, 0xf7],
    [0xd8, 0xda, 0xeb],
    [0x99, 0x8e, 0xc3],
    [0x54, 0x27, 0x88],
];

/// Okabe–Ito categorical palette (black last, used for overflow categories).
pub const OKABE_ITO: [[u8; 3]; 8] = [
    [0xe6, 0x9f, 0x00],
    [0x56, 0xb4, 0xe9],
    [0x00, 0x9e, 0x73],
    [0xf0, 0xe4, 0x42],
    [0x00, 0x72, 0xb2],
    [0xd5, 0x5e, 0x00],
    [0xcc, 0x79, 0xa7],
    [0x00, 0x00, 0x00],
];

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

/// The colour at `t` in [0, 1] of a scale through `stops` (linear between stops).
fn interpolate(stops: &[[u8; 3]], t: f64) -> [u8; 3] {
    let t = if t.is_finite() { t.clamp(0.0, 1.0) } else { 0.0 } * (stops.len() - 1) as f64;
    let i = (t.floor() as usize).min(stops.len() - 2);
    let f = t - i as f64;
    let mix = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * f).round() as u8;
    [mix(stops[i][0], stops[i + 1][0]), mix(stops[i][1], stops[i + 1][1]), mix(stops[i][2], stops[i + 1][2])]
}

/// RGB of `value` on the diverging scale over `[-limit, limit]`.
pub fn diverging_rgb(value: f64, limit: f64) -> [u8; 3] {
    interpolate(&PUOR, ((value / limit.max(1e-12)).clamp(-1.0, 1.0) + 1.0) / 2.0)
}

/// RGB of a share in [0, 1] on viridis (dark purple = 0, yellow = 1).
pub fn sequential_rgb(share: f64) -> [u8; 3] {
    interpolate(&VIRIDIS, share)
}

pub fn diverging(value: f64, limit: f64) -> String {
    css(diverging_rgb(value, limit))
}

/// Black or white text, whichever has the higher WCAG 2 contrast ratio on `rgb`.
pub fn ink(rgb: [u8; 3]) -> &'static str {
    let linear = |c: u8| {
        let c = f64::from(c) / 255.0;
        if c <= 0.04045 { c / 12.92 } else { ((c + 0.055) / 1.055).powf(2.4) }
    };
    let l = 0.2126 * linear(rgb[0]) + 0.7152 * linear(rgb[1]) + 0.0722 * linear(rgb[2]);
    // Contrast with white (1.05 / (l + 0.05)) against that with near-black #111 (L ≈ 0.0056).
    if (l + 0.05) / 0.0556 > 1.05 / (l + 0.05) { "#111" } else { "#fff" }
}

pub fn category(i: usize) -> [u8; 3] {
    OKABE_ITO[i % OKABE_ITO.len()]
}

pub fn css(rgb: [u8; 3]) -> String {
    format!("rgb({},{},{})", rgb[0], rgb[1], rgb[2])
}

/// An SVG legend bar for the diverging scale.
pub fn diverging_legend(limit: f64, width: f64) -> String {
    let mut s = String::new();
    let steps = 40;
    for k in 0..steps {
        let v = -limit + 2.0 * limit * (k as f64 + 0.5) / steps as f64;
        s.push_str(&format!(
            "<rect x='{:.1}' y='0' width='{:.1}' height='12' fill='{}'/>",
            width * k as f64 / steps as f64,
            width / steps as f64 + 0.5,
            diverging(v, limit)
        ));
    }
    format!(
        "<svg class='legend' width='{w}' height='30' role='img' aria-label='colour scale'>{s}\
         <text x='0' y='26'>{lo:.2} surface</text><text x='{w}' y='26' text-anchor='end'>semantics {hi:.2}</text></svg>",
        w = width,
        lo = -limit,
        hi = limit
    )
}
