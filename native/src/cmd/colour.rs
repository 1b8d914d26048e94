//! `culturelens colour`: dominant colours of generated images (SoS paper App. F). The k-means,
//! palettes and HSV values are `culturelens_metrics::colour`; this module reads the images, groups
//! them by manifest columns and writes the tables.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use culturelens_metrics::colour::{
    Palette, PaletteConfig, Rgb, hsv, palette, rgb8_points, subsample, value_histogram,
};
use culturelens_results::colour::{
    DOMINANT_COLOURS, Dominant, DominantRow, PALETTES, PaletteColour, PaletteRow, Palettes, VALUES, ValueRow,
    Values,
};
use culturelens_results::records;

use crate::input::ImageList;
use crate::output::{CsvFile, write_csv_files};
use crate::provenance::Provenance;

const CONVENTIONS: &str = "\
Dominant colours (SoS paper App. F). Each image is decoded (JPEG as Pillow/libjpeg-turbo, alpha
dropped) to sRGB with channels in [0, 255]; at most --pixels pixels are kept, the one at index
floor(i*N/n) of the N pixels in row-major order. k-means in RGB with squared Euclidean distance:
k-means++ initial centres from SplitMix64(--seed) (first centre: point below(N); then D^2
sampling), then Lloyd iterations as scikit-learn's KMeans(algorithm='lloyd', tol=0) runs them
(nearest-centre ties to the lower index; an empty cluster takes the point farthest from its
centre; stop when an iteration's assignment repeats the previous one, or after --max-iter).
Fewer than k distinct colours give a shorter palette. Colours are ordered by cluster size
(share = cluster pixels / kept pixels), HSV as Python's colorsys.
Outputs in --out (a folder), written only when every image was read:
  dominant_colours.csv  image, the --palette-by columns, rank, r, g, b, hex, share, h, s, v
  palettes.csv          per --palette-by group: k-means of the pooled kept pixels of its images
                        (each image contributes its --pixels sample, so images weigh equally)
  values.csv            per --value-by group: histogram of the HSV value V of every image's
                        dominant colours, weighted by share, --bins equal bins of [0, 1] (last
                        bin closed), shares summing to 1 per group (SoS App. F.3)";

/// Arguments of `culturelens colour`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(about = "Dominant colours per image and per group, HSV value distributions (SoS App. F)", long_about = CONVENTIONS)]
pub struct ColourArgs {
    /// Image folder, or a manifest CSV with an `image` column (paths relative to the CSV).
    #[arg(long, value_name = "DIR|CSV")]
    pub images: PathBuf,
    /// Output folder.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Colours per palette (k of k-means).
    #[arg(long, default_value_t = PaletteConfig::DEFAULT.k, value_parser = clap::value_parser!(usize))]
    pub k: usize,
    /// Pixels kept per image (deterministic, evenly spaced).
    #[arg(long, default_value_t = PaletteConfig::DEFAULT.max_pixels)]
    pub pixels: usize,
    /// Lloyd iterations at most.
    #[arg(long, default_value_t = PaletteConfig::DEFAULT.max_iter)]
    pub max_iter: usize,
    /// Seed of the k-means++ initialisation.
    #[arg(long, default_value_t = PaletteConfig::DEFAULT.seed)]
    pub seed: u64,
    /// Manifest columns whose groups get a palette ('' = all images in one group).
    #[arg(long, value_delimiter = ',', default_value = "model,language,culture", value_name = "COLS")]
    pub palette_by: Vec<String>,
    /// Manifest columns whose groups get an HSV value histogram ('' = one group).
    #[arg(long, value_delimiter = ',', default_value = "model,language", value_name = "COLS")]
    pub value_by: Vec<String>,
    /// Bins of the HSV value histogram.
    #[arg(long, default_value_t = 10)]
    pub bins: usize,
}

/// Per group: its number of images and the colours of their palettes with their shares.
type ValueGroups<'a> = BTreeMap<&'a [String], (usize, Vec<(Rgb, f64)>)>;

fn columns(names: &[String]) -> Vec<String> {
    names.iter().map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect()
}

/// The group key of every row: its values in `names` (columns required).
fn group_keys(list: &ImageList, names: &[String]) -> Result<Vec<Vec<String>>> {
    let cols = names.iter().map(|n| list.meta.require_column(n)).collect::<Result<Vec<_>, _>>()?;
    Ok((0..list.meta.n_rows()).map(|r| cols.iter().map(|c| c[r].clone()).collect()).collect())
}

/// The decoded pixels of one image; errors name the file and its manifest row.
fn read_pixels(list: &ImageList, row: usize, path: &Path) -> Result<Vec<Rgb>> {
    let at = list.meta.cell(row, "image");
    let bytes = std::fs::read(path).with_context(|| format!("{at}: cannot read {}", path.display()))?;
    let decoded = culturelens_models_io::decode_image(&bytes)
        .with_context(|| format!("{at}: {} is not a decodable image", path.display()))?;
    Ok(rgb8_points(decoded.image.to_rgb8().as_raw()))
}

/// The palette's colours as the tables store them: rank, sRGB, hex, share, HSV.
fn palette_colours(palette: &Palette) -> impl Iterator<Item = PaletteColour> + '_ {
    palette.colours.iter().enumerate().map(|(rank, c)| {
        let rgb = c.rgb;
        PaletteColour {
            rank: rank + 1,
            rgb,
            hex: format!(
                "#{:02x}{:02x}{:02x}",
                rgb[0].round() as u8,
                rgb[1].round() as u8,
                rgb[2].round() as u8
            ),
            share: c.share,
            hsv: hsv(&rgb),
        }
    })
}

pub fn run(args: &ColourArgs) -> Result<()> {
    if !(1..=64).contains(&args.k) || args.pixels == 0 || args.bins == 0 {
        bail!("--k must be in 1..=64, --pixels and --bins at least 1");
    }
    let config =
        PaletteConfig { k: args.k, max_pixels: args.pixels, max_iter: args.max_iter, seed: args.seed };
    let list = ImageList::read(&args.images)?;
    let (group_by, value_by) = (columns(&args.palette_by), columns(&args.value_by));
    let (group_keys, value_keys) = (group_keys(&list, &group_by)?, group_keys(&list, &value_by)?);
    let mut dominant = Vec::new();
    let mut pooled: BTreeMap<&[String], (usize, Vec<Rgb>)> = BTreeMap::new();
    let mut values: ValueGroups = BTreeMap::new();
    for (row, path) in list.paths.iter().enumerate() {
        let pixels = read_pixels(&list, row, path)?;
        let kept = subsample(&pixels, config.max_pixels);
        let image_palette = palette(&kept, &config).with_context(|| format!("{}", path.display()))?;
        let image = &list.meta.column("image").expect("image column")[row];
        dominant.extend(palette_colours(&image_palette).map(|colour| DominantRow {
            image: image.clone(),
            group: group_keys[row].clone(),
            colour,
        }));
        let group = pooled.entry(&group_keys[row]).or_default();
        group.0 += 1;
        group.1.extend(kept);
        let value = values.entry(&value_keys[row]).or_default();
        value.0 += 1;
        value.1.extend(image_palette.colours.iter().map(|c| (c.rgb, c.share)));
    }
    let mut palettes = Vec::new();
    for (key, (n_images, pixels)) in &pooled {
        let group_config = PaletteConfig { max_pixels: pixels.len(), ..config };
        let group_palette = palette(pixels, &group_config)?;
        palettes.extend(palette_colours(&group_palette).map(|colour| PaletteRow {
            group: key.to_vec(),
            n_images: *n_images,
            colour,
        }));
    }
    let mut histogram = Vec::new();
    for (key, (n_images, colours)) in &values {
        for (bin, share) in value_histogram(colours, args.bins).into_iter().enumerate() {
            let (v_lo, v_hi) = (bin as f64 / args.bins as f64, (bin + 1) as f64 / args.bins as f64);
            histogram.push(ValueRow { group: key.to_vec(), n_images: *n_images, v_lo, v_hi, share });
        }
    }
    let file = |name, (header, rows)| CsvFile { name, header, rows };
    let files = [
        file(DOMINANT_COLOURS, records::<Dominant>(&group_by, &dominant)),
        file(PALETTES, records::<Palettes>(&group_by, &palettes)),
        file(VALUES, records::<Values>(&value_by, &histogram)),
    ];
    write_csv_files(&args.out, &files)?;
    let mut provenance = Provenance::new("colour", args);
    provenance.input(&args.images)?.seed("seed", args.seed).write_for_dir(&args.out)?;
    eprintln!(
        "wrote the colours of {} images ({} groups) to {}",
        list.paths.len(),
        pooled.len(),
        args.out.display()
    );
    Ok(())
}
