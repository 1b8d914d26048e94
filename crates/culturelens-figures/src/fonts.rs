//! The fonts every figure is drawn with, compiled into the binary so that a PNG never depends on
//! the fonts a machine happens to have: Noto Sans (Latin, Greek, Cyrillic), Noto Sans Arabic,
//! Hebrew, Devanagari and Ethiopic, and a Noto Sans CJK SC subset (every Han, kana and Hangul
//! character of the four papers' prompt sets, all kana and the 2,350 KS X 1001 syllables). They
//! are OFL-1.1 (`fonts/OFL.txt`), built by `fonts/subset_fonts.py`. Text is shaped by
//! rustybuzz inside resvg, so Arabic joins and Devanagari conjuncts render correctly; a character
//! none of them covers falls back to any extra font the caller adds, then to a missing-glyph box.

use std::sync::{Arc, OnceLock};

use resvg::usvg::fontdb::{Database, Source};
use resvg::usvg::{self, Node};

use crate::svg::{FONT_FAMILY, escape, num};

const BUNDLED: [&[u8]; 6] = [
    include_bytes!("../fonts/NotoSans-Regular.ttf"),
    include_bytes!("../fonts/NotoSansArabic-Regular.ttf"),
    include_bytes!("../fonts/NotoSansHebrew-Regular.ttf"),
    include_bytes!("../fonts/NotoSansDevanagari-Regular.ttf"),
    include_bytes!("../fonts/NotoSansEthiopic-Regular.ttf"),
    include_bytes!("../fonts/NotoSansCJKsc-Subset.otf"),
];

/// The font database for PNG rendering: the bundled fonts, then `extra` (font file bytes, in
/// the caller's order), and nothing from the system.
pub fn database(extra: &[Vec<u8>]) -> Arc<Database> {
    let mut db = Database::new();
    for bytes in BUNDLED {
        db.load_font_source(Source::Binary(Arc::new(bytes)));
    }
    for bytes in extra {
        db.load_font_data(bytes.clone());
    }
    db.set_sans_serif_family("Noto Sans");
    Arc::new(db)
}

/// The bundled fonts alone, loaded once for [`text_width`].
fn bundled() -> Arc<Database> {
    static DB: OnceLock<Arc<Database>> = OnceLock::new();
    DB.get_or_init(|| database(&[])).clone()
}

/// The advance width in px of `text` at `size` px as the PNG renderer lays it out: shaped by
/// resvg with the bundled fonts (and their fallback order), so figures size their margins,
/// legends and labels from the real text rather than a per-character guess. Characters no
/// bundled font covers are measured as the missing-glyph box. Deterministic: the fonts are
/// compiled in.
pub fn text_width(text: &str, size: f64) -> f64 {
    if text.trim().is_empty() {
        return 0.0;
    }
    let svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\" font-family=\"{FONT_FAMILY}\">\
<text x=\"0\" y=\"0\" font-size=\"{}\">{}</text></svg>",
        num(size),
        escape(text)
    );
    let options = usvg::Options { fontdb: bundled(), ..usvg::Options::default() };
    let Ok(tree) = usvg::Tree::from_str(&svg, &options) else {
        return 0.6 * size * text.chars().count() as f64;
    };
    tree.root()
        .children()
        .iter()
        .map(|node| match node {
            Node::Text(t) => f64::from(t.bounding_box().width()),
            other => f64::from(other.bounding_box().width()),
        })
        .fold(0.0, f64::max)
}

/// The widest of `texts` at `size` px ([`text_width`]); 0 for none.
pub fn max_text_width<'a>(texts: impl IntoIterator<Item = &'a String>, size: f64) -> f64 {
    texts.into_iter().map(|t| text_width(t, size)).fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_come_from_the_fonts() {
        assert_eq!(text_width("", 16.0), 0.0);
        let m = text_width("m", 16.0);
        let i = text_width("i", 16.0);
        assert!(m > 2.0 * i && m > 8.0 && m < 16.0, "m {m} i {i}");
        // Twice the size, twice the width; scripts the bundled fonts cover have real widths.
        assert!((text_width("language", 32.0) - 2.0 * text_width("language", 16.0)).abs() < 0.5);
        assert!(text_width("中文", 16.0) > 28.0 && text_width("العربية", 16.0) > 20.0);
    }
}
