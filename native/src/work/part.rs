//! The part file of a sharded run: what `culturelens merge` needs to know about one shard's
//! output to join the shards into exactly what one run writes, and to refuse shards that do not
//! belong together.
//!
//! A run with `--shard K/N` writes, after its outputs, a small JSON file: `OUT.part.json` beside
//! a table output (`embed`), or `part.json` inside a folder output (the image folders of
//! `generate`: a `manifest.csv` with an `image` column and the images it lists). It names
//!
//! - `format` ([`FORMAT`]), `command` (`embed`, `generate`), `shard` (`K/N`);
//! - `items`, the number of items of the whole run, and `range`, the `[start, end)` of them
//!   this shard owns (`crate::work::shard`), and `rows`, the rows it wrote (fewer than the range
//!   only with `--skip-bad` or failed prompts); `rows_per_item` (written when not 1): the rows
//!   one item makes (`generate`: images per prompt × text layers), so a shard holds at most
//!   `range × rows_per_item` rows;
//! - `settings` (written when not empty): every other setting that shapes the rows (`generate`:
//!   scheduler, steps, guidance, size, seeds, images per prompt, negative prompt, latents, text
//!   layers), compared as a whole, so shards run with another seed or step count are refused;
//! - `model` and `precision`, and `input`: the input's name and the SHA-256 of its item list
//!   (for `embed`, the image list's metadata as CSV; for `generate`, the prompt set), so shards
//!   of another model, precision, prompt set or shard count are told apart;
//! - `files`: each output file by role (`table`, `meta`, `manifest`) with its path (relative to
//!   the part file's folder), size and SHA-256, written last, so an output replaced or torn after
//!   its part file is caught instead of merged.
//!
//! Runs without `--shard` write no part file: their outputs are unchanged (backward compatible).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use culturelens_files::{file_sha256, parent_dir};
use serde::{Deserialize, Serialize};

use super::shard::Shard;

/// The `format` of every part file this version writes and reads.
pub const FORMAT: &str = "culturelens-part-v1";

/// The part file inside a folder output.
pub const DIR_PART: &str = "part.json";

/// Largest part file read (they are a few hundred bytes; a larger one is not a part file).
pub const MAX_PART_BYTES: u64 = 1 << 20;

/// One shard's part file (module doc).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Part {
    pub format: String,
    pub command: String,
    pub shard: String,
    pub items: usize,
    pub range: [usize; 2],
    pub rows: usize,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub rows_per_item: usize,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub settings: String,
    pub model: String,
    pub precision: String,
    pub input: Input,
    pub files: BTreeMap<String, FileSum>,
}

fn one() -> usize {
    1
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

/// Most rows one item may make (a larger `rows_per_item` is not a part file's).
const MAX_ROWS_PER_ITEM: usize = 1 << 20;

/// The input a run read: its name as given and the SHA-256 of its item list.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Input {
    pub name: String,
    pub sha256: String,
}

/// One output file: path relative to the part file's folder, size and SHA-256.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FileSum {
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

impl Part {
    /// `OUT.part.json`, the part file of the table output `out`.
    pub fn path_for(out: &Path) -> PathBuf {
        let mut name = out.as_os_str().to_owned();
        name.push(".part.json");
        PathBuf::from(name)
    }

    /// The part file of shard `shard` of a run over `items` items that wrote `rows` rows.
    pub fn new(
        command: &str,
        shard: Shard,
        items: usize,
        rows: usize,
        model: String,
        precision: &str,
        input: Input,
    ) -> Self {
        let range = shard.range(items);
        Self {
            format: FORMAT.to_string(),
            command: command.to_string(),
            shard: shard.to_string(),
            items,
            range: [range.start, range.end],
            rows,
            rows_per_item: 1,
            settings: String::new(),
            model,
            precision: precision.to_string(),
            input,
            files: BTreeMap::new(),
        }
    }

    /// Each item makes `rows_per_item` rows (a folder of images per prompt, say), under
    /// `settings` that every shard of the run must share.
    pub fn with_items_of(mut self, rows_per_item: usize, settings: String) -> Self {
        self.rows_per_item = rows_per_item;
        self.settings = settings;
        self
    }

    /// Records the output file `path` (already written) under `role`, for the part file at
    /// `part_path`.
    pub fn add_file(&mut self, part_path: &Path, role: &str, path: &Path) -> Result<()> {
        let (bytes, sha256) = file_sha256(path)?;
        // Beside the part file: its name, so the two can move together; else an absolute path.
        let shown = match path.file_name() {
            Some(name) if parent_dir(path) == parent_dir(part_path) => PathBuf::from(name),
            _ => path.canonicalize().unwrap_or_else(|_| path.to_owned()),
        };
        self.files
            .insert(role.to_string(), FileSum { path: shown.to_string_lossy().into_owned(), bytes, sha256 });
        Ok(())
    }

    /// Writes the part file to `path`, atomically (after the outputs it describes).
    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)? + "\n";
        culturelens_table::write_atomic(path, |w| w.write_all(text.as_bytes()))?;
        Ok(())
    }

    /// Parses and checks a part file's text (`path` names it in errors): the format, the shard,
    /// and that the range is the shard's range of `items` holding at least `rows` rows.
    pub fn parse(text: &[u8], path: &Path) -> Result<(Self, Shard)> {
        let part: Self = serde_json::from_slice(text)
            .with_context(|| format!("{}: not a culturelens part file", path.display()))?;
        if part.format != FORMAT {
            bail!("{}: format `{}`, expected `{FORMAT}`", path.display(), part.format);
        }
        let shard = Shard::parse(&part.shard).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let range = shard.range(part.items);
        if part.range != [range.start, range.end] {
            bail!(
                "{}: range {:?} is not shard {shard}'s range {range:?} of {} items",
                path.display(),
                part.range,
                part.items
            );
        }
        if part.rows_per_item == 0 || part.rows_per_item > MAX_ROWS_PER_ITEM {
            bail!(
                "{}: rows_per_item {} is not in 1..={MAX_ROWS_PER_ITEM}",
                path.display(),
                part.rows_per_item
            );
        }
        if part.rows > range.len() * part.rows_per_item {
            bail!(
                "{}: {} rows in a shard of {} items of {} row(s) each",
                path.display(),
                part.rows,
                range.len(),
                part.rows_per_item
            );
        }
        Ok((part, shard))
    }

    /// Reads and checks the part file at `path` ([`Part::parse`]).
    pub fn read(path: &Path) -> Result<(Self, Shard)> {
        let file = std::fs::File::open(path).with_context(|| {
            format!(
                "cannot read {}: not the output of a `--shard K/N` run (or written before part files)",
                path.display()
            )
        })?;
        let mut text = Vec::new();
        file.take(MAX_PART_BYTES + 1)
            .read_to_end(&mut text)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if text.len() as u64 > MAX_PART_BYTES {
            bail!("{}: larger than {MAX_PART_BYTES} bytes, not a part file", path.display());
        }
        Self::parse(&text, path)
    }

    /// The output file of `role`, resolved against the folder of the part file at `part_path`,
    /// after checking that its size and SHA-256 are still the recorded ones.
    pub fn checked_file(&self, part_path: &Path, role: &str) -> Result<PathBuf> {
        let Some(sum) = self.files.get(role) else {
            bail!("{}: no `{role}` file listed", part_path.display());
        };
        let path = parent_dir(part_path).join(&sum.path);
        let (bytes, sha256) = file_sha256(&path)?;
        if (bytes, &sha256) != (sum.bytes, &sum.sha256) {
            bail!(
                "{}: {bytes} bytes with SHA-256 {sha256}, but {} records {} bytes with SHA-256 {}: \
                 the file was changed or torn after the shard finished; rerun the shard",
                path.display(),
                part_path.display(),
                sum.bytes,
                sum.sha256
            );
        }
        Ok(path)
    }
}

/// Puts the shards `parts` (each named by its part file) in shard order, after checking that
/// they are one whole run: same command, model, precision, input and item count, the same shard
/// count N, and every shard `1/N … N/N` exactly once. The error names the parts that disagree.
pub fn order_parts<T>(parts: Vec<(PathBuf, Part, Shard, T)>) -> Result<Vec<(PathBuf, Part, T)>> {
    let Some((first_path, first, first_shard, _)) = parts.first() else { bail!("no parts to merge") };
    let n = first_shard.count();
    for (path, part, shard, _) in &parts[1..] {
        let fields = [
            ("command", &first.command, &part.command),
            ("model", &first.model, &part.model),
            ("precision", &first.precision, &part.precision),
            ("input", &first.input.sha256, &part.input.sha256),
            ("settings", &first.settings, &part.settings),
        ];
        for (what, a, b) in fields {
            if a != b {
                let (a, b) = match what {
                    "input" => (
                        format!("{} (SHA-256 {a})", first.input.name),
                        format!("{} (SHA-256 {b})", part.input.name),
                    ),
                    _ => (a.clone(), b.clone()),
                };
                bail!(
                    "mismatched shards: {} (shard {first_shard}) has {what} {a} but {} (shard {shard}) has {what} {b}",
                    first_path.display(),
                    path.display()
                );
            }
        }
        if part.rows_per_item != first.rows_per_item {
            bail!(
                "mismatched shards: {} (shard {first_shard}) makes {} row(s) per item but {} (shard {shard}) makes {}",
                first_path.display(),
                first.rows_per_item,
                path.display(),
                part.rows_per_item
            );
        }
        if shard.count() != n || part.items != first.items {
            bail!(
                "mismatched shards: {} is shard {first_shard} of {} items but {} is shard {shard} of {} items",
                first_path.display(),
                first.items,
                path.display(),
                part.items
            );
        }
    }
    let mut slots: Vec<Option<(PathBuf, Part, T)>> = (0..n).map(|_| None).collect();
    for (path, part, shard, extra) in parts {
        let slot = &mut slots[shard.index() - 1];
        if let Some((other, _, _)) = slot {
            bail!("duplicated shard {shard}: {} and {}", other.display(), path.display());
        }
        *slot = Some((path, part, extra));
    }
    let missing: Vec<String> =
        (1..=n).filter(|k| slots[k - 1].is_none()).map(|k| format!("{k}/{n}")).collect();
    if !missing.is_empty() {
        bail!("incomplete run: shard(s) {} of {n} missing", missing.join(", "));
    }
    Ok(slots.into_iter().map(|s| s.expect("every shard is present")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use culturelens_files::sha256_hex;

    fn part(shard: &str, model: &str) -> (PathBuf, Part, Shard, ()) {
        let s = Shard::parse(shard).unwrap();
        let input = Input { name: "m.csv".into(), sha256: sha256_hex(b"image\na.png\n") };
        let p = Part::new("embed", s, 10, s.range(10).len(), model.into(), "f32", input);
        (PathBuf::from(format!("p{}.npy.part.json", &shard[..1])), p, s, ())
    }

    #[test]
    fn parts_are_ordered_and_checked_whole() {
        let ordered = order_parts(vec![part("3/3", "m"), part("1/3", "m"), part("2/3", "m")]).unwrap();
        let shards: Vec<&str> = ordered.iter().map(|(_, p, _)| p.shard.as_str()).collect();
        assert_eq!(shards, ["1/3", "2/3", "3/3"]);
        // Hand-computed ranges of 10 items in 3 shards: ⌊10k/3⌋ bounds.
        let ranges: Vec<[usize; 2]> = ordered.iter().map(|(_, p, _)| p.range).collect();
        assert_eq!(ranges, [[0, 3], [3, 6], [6, 10]]);
        let err = order_parts(vec![part("1/3", "m"), part("3/3", "m")]).unwrap_err().to_string();
        assert_eq!(err, "incomplete run: shard(s) 2/3 of 3 missing");
        let err = order_parts(vec![part("1/2", "m"), part("1/2", "m"), part("2/2", "m")]).unwrap_err();
        assert_eq!(err.to_string(), "duplicated shard 1/2: p1.npy.part.json and p1.npy.part.json");
        let err = order_parts(vec![part("1/2", "m"), part("2/2", "other")]).unwrap_err().to_string();
        assert_eq!(
            err,
            "mismatched shards: p1.npy.part.json (shard 1/2) has model m but p2.npy.part.json (shard 2/2) has model other"
        );
        let (a, b) = (part("1/2", "m"), part("2/2", "m"));
        let b = (b.0, b.1.with_items_of(1, "seed=1".into()), b.2, ());
        let err = order_parts(vec![(a.0, a.1.with_items_of(1, "seed=0".into()), a.2, ()), b]).unwrap_err();
        assert!(
            err.to_string()
                .contains("has settings seed=0 but p2.npy.part.json (shard 2/2) has settings seed=1"),
            "{err}"
        );
        let (a, b) = (part("1/2", "m"), part("2/2", "m"));
        let b = (b.0, b.1.with_items_of(2, String::new()), b.2, ());
        let err = order_parts(vec![a, b]).unwrap_err().to_string();
        assert!(err.contains("makes 1 row(s) per item but p2.npy.part.json (shard 2/2) makes 2"), "{err}");
        let err = order_parts(vec![part("1/2", "m"), part("2/3", "m")]).unwrap_err().to_string();
        assert!(err.contains("is shard 1/2 of 10 items but p2.npy.part.json is shard 2/3"), "{err}");
    }

    #[test]
    fn part_files_round_trip_and_bad_ones_are_refused() {
        let (_, p, shard, ()) = part("2/3", "m");
        let text = serde_json::to_vec(&p).unwrap();
        assert_eq!(Part::parse(&text, Path::new("x")).unwrap(), (p.clone(), shard));
        let mut bad = p.clone();
        bad.range = [3, 7];
        let err = Part::parse(&serde_json::to_vec(&bad).unwrap(), Path::new("x")).unwrap_err().to_string();
        assert_eq!(err, "x: range [3, 7] is not shard 2/3's range 3..6 of 10 items");
        let mut bad = p.clone();
        bad.format = "v0".into();
        let err = Part::parse(&serde_json::to_vec(&bad).unwrap(), Path::new("x")).unwrap_err().to_string();
        assert_eq!(err, "x: format `v0`, expected `culturelens-part-v1`");
        let err = Part::parse(b"{\"format\": 1", Path::new("x")).unwrap_err().to_string();
        assert_eq!(err, "x: not a culturelens part file");
        // An embed part file has neither optional field; a generate part of 3 prompts × 2
        // images may hold 6 rows, not 7.
        let text = String::from_utf8(text).unwrap();
        assert!(!text.contains("rows_per_item") && !text.contains("settings"), "{text}");
        let mut images = p.clone().with_items_of(2, "steps=4".into());
        images.rows = 6;
        let round = Part::parse(&serde_json::to_vec(&images).unwrap(), Path::new("x")).unwrap().0;
        assert_eq!((round.rows_per_item, round.settings.as_str()), (2, "steps=4"));
        images.rows = 7;
        let err = Part::parse(&serde_json::to_vec(&images).unwrap(), Path::new("x")).unwrap_err().to_string();
        assert_eq!(err, "x: 7 rows in a shard of 3 items of 2 row(s) each");
        let mut zero = p.clone();
        zero.rows_per_item = 0;
        let err = Part::parse(&serde_json::to_vec(&zero).unwrap(), Path::new("x")).unwrap_err().to_string();
        assert!(err.contains("rows_per_item 0 is not in 1..="), "{err}");
    }

    #[test]
    fn a_changed_output_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("e.npy");
        std::fs::write(&out, b"abc").unwrap();
        let (_, mut p, _, ()) = part("1/1", "m");
        let part_path = Part::path_for(&out);
        p.add_file(&part_path, "table", &out).unwrap();
        // SHA-256("abc"), the FIPS 180-2 test vector.
        let want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(p.files["table"], FileSum { path: "e.npy".into(), bytes: 3, sha256: want.into() });
        assert_eq!(p.checked_file(&part_path, "table").unwrap(), dir.path().join("e.npy"));
        std::fs::write(&out, b"ab").unwrap();
        let err = p.checked_file(&part_path, "table").unwrap_err().to_string();
        assert!(err.contains("the file was changed or torn after the shard finished"), "{err}");
    }
}
