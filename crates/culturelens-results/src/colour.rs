//! The folder `culturelens colour --out` writes (SoS App. F), one table per file:
//!
//! | file | schema | columns |
//! |------|--------|---------|
//! | [`DOMINANT_COLOURS`] | [`Dominant`] | `image`, the `--group-by` columns, [`COLOUR`] |
//! | [`PALETTES`] | [`Palettes`] | the `--group-by` columns, `n_images`, [`COLOUR`] |
//! | [`VALUES`] | [`Values`] | the `--value-by` columns, `n_images,v_lo,v_hi,share` |
//!
//! The group columns are the manifest's, so each schema's columns are their names. The k-means
//! and HSV values are `culturelens_metrics::colour`.

use crate::csv_file::{Cells, CsvSchema, group_columns};
use crate::error::SchemaError;

/// Per-image palettes.
pub const DOMINANT_COLOURS: &str = "dominant_colours.csv";
/// Per-group palettes of the pooled pixels.
pub const PALETTES: &str = "palettes.csv";
/// Per-group histograms of the HSV value.
pub const VALUES: &str = "values.csv";

/// The columns of one palette colour, after the group columns.
pub const COLOUR: [&str; 9] = ["rank", "r", "g", "b", "hex", "share", "h", "s", "v"];
/// The column of the dominant-colour table before the group columns.
const IMAGE: [&str; 1] = ["image"];
/// The columns of a palette after the group columns, before [`COLOUR`].
const PALETTE: [&str; 1] = ["n_images"];
/// The columns of a value histogram after the group columns.
const HISTOGRAM: [&str; 4] = ["n_images", "v_lo", "v_hi", "share"];

/// One colour of a palette: its rank by share (1 = largest cluster), sRGB in [0, 255], `#rrggbb`,
/// share of the pixels, HSV (Python's colorsys).
#[derive(Debug, Clone, PartialEq)]
pub struct PaletteColour {
    pub rank: usize,
    pub rgb: [f64; 3],
    pub hex: String,
    pub share: f64,
    pub hsv: [f64; 3],
}

impl PaletteColour {
    fn cells(&self) -> Vec<String> {
        let mut cells = vec![self.rank.to_string()];
        cells.extend(self.rgb.iter().map(f64::to_string));
        cells.push(self.hex.clone());
        cells.push(self.share.to_string());
        cells.extend(self.hsv.iter().map(f64::to_string));
        cells
    }

    /// The colour in the [`COLOUR`] columns from column `k` on.
    fn parse(c: &Cells<'_>, k: usize) -> Result<PaletteColour, SchemaError> {
        Ok(PaletteColour {
            rank: c.count(k)?,
            rgb: [c.finite(k + 1)?, c.finite(k + 2)?, c.finite(k + 3)?],
            hex: c.key(k + 4)?,
            share: c.finite(k + 5)?,
            hsv: [c.finite(k + 6)?, c.finite(k + 7)?, c.finite(k + 8)?],
        })
    }
}

/// The header `lead`, `groups`, `tail`.
fn header(lead: &[&str], groups: &[String], tail: &[&str]) -> Vec<String> {
    lead.iter()
        .map(|s| s.to_string())
        .chain(groups.iter().cloned())
        .chain(tail.iter().map(|s| s.to_string()))
        .collect()
}

/// A row's values in its `n` group columns, from column `lead` on.
fn group(c: &Cells<'_>, lead: usize, n: usize) -> Vec<String> {
    (lead..lead + n).map(|k| c.string(k)).collect()
}

/// One colour of one image's palette.
#[derive(Debug, Clone, PartialEq)]
pub struct DominantRow {
    pub image: String,
    /// The image's values in the group columns.
    pub group: Vec<String>,
    pub colour: PaletteColour,
}

/// [`DOMINANT_COLOURS`]; its columns are the group column names.
pub struct Dominant;

impl CsvSchema for Dominant {
    type Columns = Vec<String>;
    type Row = DominantRow;
    const SOURCE: &'static str = "culturelens colour --out: dominant_colours.csv";

    fn header(groups: &Vec<String>) -> Vec<String> {
        header(&IMAGE, groups, &COLOUR)
    }

    fn columns(file: &str, header: &[String]) -> Result<Vec<String>, SchemaError> {
        group_columns(file, header, &IMAGE, &COLOUR, Self::SOURCE)
    }

    fn record(_: &Vec<String>, r: &DominantRow) -> Vec<String> {
        let mut row = vec![r.image.clone()];
        row.extend(r.group.iter().cloned());
        row.extend(r.colour.cells());
        row
    }

    fn parse(groups: &Vec<String>, c: &Cells<'_>) -> Result<DominantRow, SchemaError> {
        let n = groups.len();
        Ok(DominantRow { image: c.key(0)?, group: group(c, 1, n), colour: PaletteColour::parse(c, 1 + n)? })
    }
}

/// One colour of one group's palette.
#[derive(Debug, Clone, PartialEq)]
pub struct PaletteRow {
    pub group: Vec<String>,
    /// Images in the group.
    pub n_images: usize,
    pub colour: PaletteColour,
}

/// [`PALETTES`]; its columns are the group column names.
pub struct Palettes;

impl CsvSchema for Palettes {
    type Columns = Vec<String>;
    type Row = PaletteRow;
    const SOURCE: &'static str = "culturelens colour --out: palettes.csv";

    fn header(groups: &Vec<String>) -> Vec<String> {
        header(&[], groups, &[&PALETTE[..], &COLOUR].concat())
    }

    fn columns(file: &str, header: &[String]) -> Result<Vec<String>, SchemaError> {
        group_columns(file, header, &[], &[&PALETTE[..], &COLOUR].concat(), Self::SOURCE)
    }

    fn record(_: &Vec<String>, r: &PaletteRow) -> Vec<String> {
        let mut row = r.group.clone();
        row.push(r.n_images.to_string());
        row.extend(r.colour.cells());
        row
    }

    fn parse(groups: &Vec<String>, c: &Cells<'_>) -> Result<PaletteRow, SchemaError> {
        let n = groups.len();
        Ok(PaletteRow {
            group: group(c, 0, n),
            n_images: c.count(n)?,
            colour: PaletteColour::parse(c, n + 1)?,
        })
    }
}

/// One bin of one group's histogram of the HSV value V of its images' dominant colours.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueRow {
    pub group: Vec<String>,
    pub n_images: usize,
    /// The bin `[v_lo, v_hi)` (the last bin closed).
    pub v_lo: f64,
    pub v_hi: f64,
    /// Share of the group's colour weight in the bin (the bins of a group sum to 1).
    pub share: f64,
}

/// [`VALUES`]; its columns are the group column names.
pub struct Values;

impl CsvSchema for Values {
    type Columns = Vec<String>;
    type Row = ValueRow;
    const SOURCE: &'static str = "culturelens colour --out: values.csv";

    fn header(groups: &Vec<String>) -> Vec<String> {
        header(&[], groups, &HISTOGRAM)
    }

    fn columns(file: &str, header: &[String]) -> Result<Vec<String>, SchemaError> {
        group_columns(file, header, &[], &HISTOGRAM, Self::SOURCE)
    }

    fn record(_: &Vec<String>, r: &ValueRow) -> Vec<String> {
        let mut row = r.group.clone();
        row.push(r.n_images.to_string());
        row.extend([r.v_lo, r.v_hi, r.share].map(|x| x.to_string()));
        row
    }

    fn parse(groups: &Vec<String>, c: &Cells<'_>) -> Result<ValueRow, SchemaError> {
        let n = groups.len();
        Ok(ValueRow {
            group: group(c, 0, n),
            n_images: c.count(n)?,
            v_lo: c.finite(n + 1)?,
            v_hi: c.finite(n + 2)?,
            share: c.finite(n + 3)?,
        })
    }
}
