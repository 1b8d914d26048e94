//! A minimal SVG writer with fixed number formatting, so the same figure always gives the same
//! bytes. Every figure is drawn through it: rectangles, lines, circles, polylines and text, in
//! pixels of the figure's own coordinate system (origin top left, y down).

use std::fmt::Write;

use crate::palette::Shape;

/// Base font size in pixels (projector-readable at the default 2x PNG scale).
pub const FONT: f64 = 16.0;

/// Horizontal text anchor.
#[derive(Clone, Copy)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    fn name(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// The `font-family` list written into every SVG (browsers use what they have of it; `fonts`
/// bundles these fonts for the PNG and for measuring text).
pub const FONT_FAMILY: &str = "Noto Sans, Noto Sans Arabic, Noto Sans Hebrew, Noto Sans Devanagari, \
Noto Sans Ethiopic, Noto Sans CJK SC, sans-serif";

/// A number with at most two decimals and no trailing zeros (`-0` written as `0`).
pub fn num(x: f64) -> String {
    trimmed(x, 2)
}

/// A number with at most `decimals` decimals and no trailing zeros (`-0` written as `0`).
pub fn trimmed(x: f64, decimals: usize) -> String {
    let s = format!("{:.*}", decimals, x);
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.') } else { &s };
    if s == "-0" { "0".to_string() } else { s.to_string() }
}

/// `x` with exactly `decimals` decimals, a negative zero written without its sign (`-0.001` at
/// two decimals is `0.00`, never `-0.00`).
pub fn fixed(x: f64, decimals: usize) -> String {
    let s = format!("{:.*}", decimals, x);
    match s.strip_prefix('-') {
        Some(rest) if rest.chars().all(|c| c == '0' || c == '.') => rest.to_string(),
        _ => s,
    }
}

/// A value printed with `decimals` decimals, or, when it is smaller than the last of them (it
/// would read `0.00`), with two significant digits (`0.000062`): SoS scores of small or
/// random-weight models are of the order 1e-4.
pub fn value_label(x: f64, decimals: usize) -> String {
    fixed(x, decimals.max(significant_decimals(x.abs(), 2)))
}

/// The decimals that show `magnitude` with `digits` significant digits when it is below the
/// first decimal place shown otherwise (below 0.01), else 0.
pub fn significant_decimals(magnitude: f64, digits: usize) -> usize {
    if !(magnitude.is_finite() && magnitude > 0.0 && magnitude < 0.01) {
        return 0;
    }
    let lead = magnitude.log10().floor() as i64;
    (digits as i64 - 1 - lead).max(0) as usize
}

/// `text` with the five XML special characters escaped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// An SVG document being drawn.
pub struct Svg {
    width: f64,
    height: f64,
    body: String,
}

impl Svg {
    /// An empty `width × height` figure on a white background.
    pub fn new(width: f64, height: f64) -> Svg {
        let mut svg = Svg { width, height, body: String::new() };
        svg.rect(0.0, 0.0, width, height, "#ffffff", None);
        svg
    }

    pub fn width(&self) -> f64 {
        self.width
    }

    /// A filled rectangle, optionally stroked (colour) with a 1 px line.
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, stroke: Option<&str>) {
        let stroke = stroke.map(|s| format!(" stroke=\"{s}\" stroke-width=\"1\"")).unwrap_or_default();
        let _ = writeln!(
            self.body,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{fill}\"{stroke}/>",
            num(x),
            num(y),
            num(w.max(0.0)),
            num(h.max(0.0))
        );
    }

    /// A straight line of `width` px, dashed by `dash` (a `stroke-dasharray`) when given.
    pub fn line(
        &mut self,
        (x1, y1): (f64, f64),
        (x2, y2): (f64, f64),
        stroke: &str,
        width: f64,
        dash: Option<&str>,
    ) {
        let dash = dash.map(|d| format!(" stroke-dasharray=\"{d}\"")).unwrap_or_default();
        let _ = writeln!(
            self.body,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{stroke}\" stroke-width=\"{}\"{dash}/>",
            num(x1),
            num(y1),
            num(x2),
            num(y2),
            num(width)
        );
    }

    /// A filled circle.
    pub fn circle(&mut self, (cx, cy): (f64, f64), r: f64, fill: &str, stroke: Option<&str>) {
        let stroke = stroke.map(|s| format!(" stroke=\"{s}\" stroke-width=\"1\"")).unwrap_or_default();
        let _ = writeln!(
            self.body,
            "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{fill}\"{stroke}/>",
            num(cx),
            num(cy),
            num(r)
        );
    }

    /// A point marker of `shape` with radius `r` (half its width), filled, outlined by `stroke`.
    pub fn marker(&mut self, (x, y): (f64, f64), r: f64, shape: Shape, fill: &str, stroke: Option<&str>) {
        match shape {
            Shape::Circle => self.circle((x, y), r, fill, stroke),
            Shape::Square => {
                let s = r * 0.9;
                self.rect(x - s, y - s, 2.0 * s, 2.0 * s, fill, stroke)
            }
            Shape::Triangle => {
                let (h, w) = (r * 1.15, r * 1.1);
                self.polygon_stroked(&[(x, y - h), (x + w, y + h * 0.8), (x - w, y + h * 0.8)], fill, stroke)
            }
            Shape::Diamond => {
                let d = r * 1.25;
                self.polygon_stroked(&[(x, y - d), (x + d, y), (x, y + d), (x - d, y)], fill, stroke)
            }
        }
    }

    fn polygon_stroked(&mut self, points: &[(f64, f64)], fill: &str, stroke: Option<&str>) {
        let pts: Vec<String> = points.iter().map(|(x, y)| format!("{},{}", num(*x), num(*y))).collect();
        let stroke = stroke.map(|s| format!(" stroke=\"{s}\" stroke-width=\"1\"")).unwrap_or_default();
        let _ = writeln!(self.body, "<polygon points=\"{}\" fill=\"{fill}\"{stroke}/>", pts.join(" "));
    }

    /// An open polyline of `width` px with round joins, dashed by `dash` (a `stroke-dasharray`)
    /// when given.
    pub fn polyline(&mut self, points: &[(f64, f64)], stroke: &str, width: f64, dash: Option<&str>) {
        if points.len() < 2 {
            return;
        }
        let pts: Vec<String> = points.iter().map(|(x, y)| format!("{},{}", num(*x), num(*y))).collect();
        let dash = dash.map(|d| format!(" stroke-dasharray=\"{d}\"")).unwrap_or_default();
        let _ = writeln!(
            self.body,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{stroke}\" stroke-width=\"{}\" \
stroke-linejoin=\"round\"{dash}/>",
            pts.join(" "),
            num(width)
        );
    }

    /// A closed filled polygon with a 1.5 px outline.
    pub fn polygon(&mut self, points: &[(f64, f64)], fill: &str, stroke: &str) {
        let pts: Vec<String> = points.iter().map(|(x, y)| format!("{},{}", num(*x), num(*y))).collect();
        let _ = writeln!(
            self.body,
            "<polygon points=\"{}\" fill=\"{fill}\" stroke=\"{stroke}\" stroke-width=\"1.5\"/>",
            pts.join(" ")
        );
    }

    /// Text of `size` px at baseline point (x, y), rotated by `rotate` degrees about that point.
    pub fn text(&mut self, (x, y): (f64, f64), text: &str, size: f64, anchor: Anchor, rotate: f64) {
        let rotate = if rotate == 0.0 {
            String::new()
        } else {
            format!(" transform=\"rotate({} {} {})\"", num(rotate), num(x), num(y))
        };
        let _ = writeln!(
            self.body,
            "<text x=\"{}\" y=\"{}\" font-size=\"{}\" text-anchor=\"{}\"{rotate}>{}</text>",
            num(x),
            num(y),
            num(size),
            anchor.name(),
            escape(text)
        );
    }

    /// Centred text of `size` px in colour `fill` (values printed on coloured cells).
    pub fn text_coloured(&mut self, (x, y): (f64, f64), text: &str, size: f64, fill: &str) {
        let _ = writeln!(
            self.body,
            "<text x=\"{}\" y=\"{}\" font-size=\"{}\" text-anchor=\"middle\" fill=\"{fill}\">{}</text>",
            num(x),
            num(y),
            num(size),
            escape(text)
        );
    }

    /// The finished document.
    pub fn finish(self) -> String {
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
font-family=\"{FONT_FAMILY}\" fill=\"#000000\">\n{}</svg>\n",
            self.body,
            w = num(self.width),
            h = num(self.height),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_fixed_and_short() {
        assert_eq!(num(1.0), "1");
        assert_eq!(num(1.256), "1.26");
        assert_eq!(num(-0.001), "0");
        assert_eq!(num(12.5), "12.5");
        assert_eq!(num(120.0), "120");
        assert_eq!(trimmed(-0.000116, 5), "-0.00012");
        assert_eq!(trimmed(-0.000001, 5), "0");
        assert_eq!(value_label(0.05, 2), "0.05");
        assert_eq!(value_label(-0.00011638, 2), "-0.00012");
        assert_eq!(value_label(0.0000624, 2), "0.000062");
        assert_eq!(value_label(0.0, 2), "0.00");
        assert_eq!(significant_decimals(0.5, 2), 0);
        assert_eq!(fixed(-0.001, 2), "0.00");
        assert_eq!(fixed(-0.0, 1), "0.0");
        assert_eq!(fixed(-0.005, 2), "-0.01");
        assert_eq!(fixed(0.256, 2), "0.26");
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
