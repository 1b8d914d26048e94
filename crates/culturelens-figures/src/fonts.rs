//! The fonts every figure is drawn with, compiled into the binary so that a PNG never depends on
//! the fonts a machine happens to have: Noto Sans (Latin, Greek, Cyrillic), Noto Sans Arabic,
//! Hebrew, Devanagari and Ethiopic, and a Noto Sans CJK SC subset (every Han, kana and Hangul
//! character of the four papers' prompt sets, all kana and the 2,350 KS X 1001 syllables). They
//! are OFL-1.1 (`fonts/OFL.txt`), built by `fonts/subset_fonts.py`. Text is shaped by
//! rustybuzz inside resvg, so Arabic joins and Devanagari conjuncts render correctly; a character
//! none of them covers falls back to any extra font the caller adds, then to a missing-glyph box.

use std::sync::Arc;

use resvg::usvg::fontdb::{Database, Source};

/// The `font-family` list written into every SVG (browsers use what they have of it).
pub const FONT_FAMILY: &str = "Noto Sans, Noto Sans Arabic, Noto Sans Hebrew, Noto Sans Devanagari, \
Noto Sans Ethiopic, Noto Sans CJK SC, sans-serif";

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
