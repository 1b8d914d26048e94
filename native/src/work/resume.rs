//! The resume log `OUT.resume`: where a run keeps its finished items until its output is
//! written, so an interrupted run (killed, out of time, requeued) picks up where it stopped.
//!
//! Format: one header line naming the run ([`RunKey`]: a rerun with another key starts afresh),
//! then one record per finished item: its key (`u32` LE length + UTF-8) and `width` × `f32` LE
//! values (`width` may be 0 when the item's output is a file of its own). Records are keyed, not
//! numbered, so a rerun after adding, removing or reordering items reuses every finished one.
//!
//! A record is finished only when it is whole: records have a known length, and only the last
//! one can be torn (appends are sequential), so a torn tail is recognised and dropped. Opening a
//! log rewrites it with its whole records only (atomically: temp file and rename, so a kill
//! during the rewrite keeps the old log), and appends go after that; [`ResumeLog::sync`] flushes
//! and syncs to disk, so a finished batch survives the node as well as the process.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use culturelens_files::write_atomic;

use crate::device::ModelPrecision;

/// The identity of a run, the header line of its resume log: the settings that make its
/// finished records reusable, and the width of a record. A rerun with another key starts
/// afresh. The line's bytes are the log format: they stay the same for the same settings, so
/// the logs of earlier versions resume.
#[derive(Clone, Debug, PartialEq)]
pub enum RunKey {
    /// `embed`: the weights folder (canonical), the embedding width and the precision. f16 runs
    /// are tagged, so they never reuse f32 rows nor the reverse; f32 logs keep the header they
    /// always had.
    Embed { weights: PathBuf, dim: usize, precision: ModelPrecision },
    /// `generate`: the pipeline folder (canonical) and every setting that changes an image;
    /// `pixels` is the width of a record (an image's floats kept for `--out-npy`, or 0).
    Generate {
        pipeline: PathBuf,
        scheduler: &'static str,
        steps: usize,
        guidance: f64,
        height: usize,
        width: usize,
        images_per_prompt: usize,
        seed: u64,
        seed_per_image: bool,
        negative_prompt: Option<String>,
        latents: Option<PathBuf>,
        precision: ModelPrecision,
        pixels: usize,
        /// FLUX's `--true-cfg` (1: off) and the T5 length of SD 3 and FLUX; written only when set,
        /// so the other pipelines' headers keep their bytes.
        true_cfg: f64,
        max_sequence_length: Option<usize>,
        /// IF stage II's settings (`--upscale`), written only when set.
        upscale: Option<String>,
        /// Kandinsky 2.1's prior settings, written only for that pipeline.
        prior: Option<String>,
    },
}

impl RunKey {
    /// The number of `f32` values in each record of the run's log.
    pub fn width(&self) -> usize {
        match self {
            RunKey::Embed { dim, .. } => *dim,
            RunKey::Generate { pixels, .. } => *pixels,
        }
    }
}

/// `path` as the key names a model folder: canonical where it can be resolved.
pub fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_owned())
}

/// The header line (without its newline): fields separated by tabs, the format's name first.
impl fmt::Display for RunKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunKey::Embed { weights, dim, precision } => {
                let tag = match precision {
                    ModelPrecision::F32 => "",
                    ModelPrecision::F16 => "\tf16",
                    ModelPrecision::Bf16 => "\tbf16",
                };
                write!(f, "culturelens-embed-v1\t{}\t{dim}{tag}", weights.display())
            }
            RunKey::Generate {
                pipeline,
                scheduler,
                steps,
                guidance,
                height,
                width,
                images_per_prompt,
                seed,
                seed_per_image,
                negative_prompt,
                latents,
                precision,
                pixels,
                true_cfg,
                max_sequence_length,
                upscale,
                prior,
            } => {
                write!(
                    f,
                    "culturelens-generate-v1\t{}\t{scheduler}\t{steps}\t{guidance}\t{height}x{width}\t\
                     {images_per_prompt}\t{seed}\t{seed_per_image}\t{negative_prompt:?}\t{latents:?}\t\
                     {precision:?}\t{pixels}",
                    pipeline.display()
                )?;
                if *true_cfg != 1.0 {
                    write!(f, "\ttrue_cfg={true_cfg}")?;
                }
                if let Some(n) = max_sequence_length {
                    write!(f, "\tmax_sequence_length={n}")?;
                }
                if let Some(u) = upscale {
                    write!(f, "\tupscale={u}")?;
                }
                if let Some(p) = prior {
                    write!(f, "\tprior={p}")?;
                }
                Ok(())
            }
        }
    }
}

/// The finished items of a run, and the open log new ones are appended to.
pub struct ResumeLog {
    path: PathBuf,
    width: usize,
    writer: BufWriter<File>,
}

impl ResumeLog {
    /// `OUT.resume`, the log of the run writing `out`.
    pub fn path_for(out: &Path) -> PathBuf {
        let mut name = out.as_os_str().to_owned();
        name.push(".resume");
        PathBuf::from(name)
    }

    /// Opens (or starts) the log of the run `key` writing `out` (records of `key.width()`
    /// values); returns the log and the items already finished.
    pub fn open(out: &Path, key: &RunKey) -> Result<(Self, BTreeMap<String, Vec<f32>>)> {
        let (header, width) = (key.to_string(), key.width());
        debug_assert!(!header.contains('\n'), "the header is one line");
        let path = Self::path_for(out);
        let finished = match std::fs::read(&path) {
            Ok(bytes) => match bytes.strip_prefix(header.as_bytes()).and_then(|b| b.strip_prefix(b"\n")) {
                Some(records) => whole_records(records, width),
                // The header itself was torn: nothing was finished yet.
                None if format!("{header}\n").as_bytes().starts_with(&bytes) => BTreeMap::new(),
                None => {
                    eprintln!("note: {} belongs to another run; starting afresh", path.display());
                    BTreeMap::new()
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        rewrite(&path, &header, &finished)?;
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok((Self { path, width, writer: BufWriter::new(file) }, finished))
    }

    /// The log's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends a finished item (durable after the next [`ResumeLog::sync`]).
    pub fn append(&mut self, key: &str, values: &[f32]) -> Result<()> {
        assert_eq!(values.len(), self.width, "a record of {key} holds {} values", self.width);
        write_record(&mut self.writer, key, values)
            .with_context(|| format!("cannot write {}", self.path.display()))
    }

    /// Makes the appended items durable: flushed to the file and synced to disk.
    pub fn sync(&mut self) -> Result<()> {
        self.writer
            .flush()
            .and_then(|()| self.writer.get_ref().sync_data())
            .with_context(|| format!("cannot write {}", self.path.display()))
    }

    /// Deletes the log once the run's output is written.
    pub fn remove(self) -> Result<()> {
        drop(self.writer);
        std::fs::remove_file(&self.path).with_context(|| format!("cannot remove {}", self.path.display()))
    }
}

/// The whole records at the start of `bytes`; a torn last record (or anything after a record
/// that cannot be whole) is dropped.
fn whole_records(mut bytes: &[u8], width: usize) -> BTreeMap<String, Vec<f32>> {
    let mut finished = BTreeMap::new();
    while let Some(len) = bytes.get(..4) {
        let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
        let Some(record) = bytes.get(4..4 + len + 4 * width) else { break };
        let Ok(key) = std::str::from_utf8(&record[..len]) else { break };
        let values =
            record[len..].chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")));
        finished.insert(key.to_owned(), values.collect());
        bytes = &bytes[4 + len + 4 * width..];
    }
    finished
}

/// Replaces the log at `path` by `header` and the `finished` records, atomically.
fn rewrite(path: &Path, header: &str, finished: &BTreeMap<String, Vec<f32>>) -> Result<()> {
    write_atomic(path, |w| {
        writeln!(w, "{header}")?;
        for (key, values) in finished {
            write_record(w, key, values)?;
        }
        Ok(())
    })
    .with_context(|| format!("cannot write {}", path.display()))
}

fn write_record(w: &mut (impl Write + ?Sized), key: &str, values: &[f32]) -> std::io::Result<()> {
    w.write_all(&(key.len() as u32).to_le_bytes())?;
    w.write_all(key.as_bytes())?;
    for v in values {
        w.write_all(&v.to_le_bytes())?;
    }
    Ok(())
}

/// Splits `items` into the finished ones (with their values, looked up by `key`) and the ones
/// still to do, both in the order of `items`.
pub fn split_finished(
    items: &[usize],
    key: impl Fn(usize) -> String,
    finished: &BTreeMap<String, Vec<f32>>,
) -> (BTreeMap<usize, Vec<f32>>, Vec<usize>) {
    let mut done = BTreeMap::new();
    let mut todo = Vec::new();
    for &item in items {
        match finished.get(&key(item)) {
            Some(values) => {
                done.insert(item, values.clone());
            }
            None => todo.push(item),
        }
    }
    (done, todo)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests' run: records of `width` values.
    fn key(width: usize) -> RunKey {
        RunKey::Embed { weights: "weights".into(), dim: width, precision: ModelPrecision::F32 }
    }

    /// The header line of `key(2)`.
    const HEADER: &str = "culturelens-embed-v1\tweights\t2";

    /// The keys' lines are the headers `embed` and `generate` have always written, byte for byte
    /// (so their earlier logs resume).
    #[test]
    fn run_keys_are_the_header_lines_of_earlier_versions() {
        let embed = |precision| RunKey::Embed { weights: "/w/clip".into(), dim: 512, precision };
        assert_eq!(embed(ModelPrecision::F32).to_string(), "culturelens-embed-v1\t/w/clip\t512");
        assert_eq!(embed(ModelPrecision::F16).to_string(), "culturelens-embed-v1\t/w/clip\t512\tf16");
        assert_eq!(embed(ModelPrecision::F16).width(), 512);
        let flow_key = |negative_prompt: Option<&str>,
                        latents: Option<&str>,
                        true_cfg,
                        max_sequence_length| RunKey::Generate {
            pipeline: "/p/sd".into(),
            scheduler: "PNDMScheduler",
            steps: 4,
            guidance: 7.5,
            height: 16,
            width: 24,
            images_per_prompt: 2,
            seed: 42,
            seed_per_image: true,
            negative_prompt: negative_prompt.map(String::from),
            latents: latents.map(PathBuf::from),
            precision: ModelPrecision::F32,
            pixels: 1152,
            true_cfg,
            max_sequence_length,
            upscale: None,
            prior: None,
        };
        let generate = |negative_prompt, latents| flow_key(negative_prompt, latents, 1.0, None);
        assert_eq!(
            generate(None, None).to_string(),
            "culturelens-generate-v1\t/p/sd\tPNDMScheduler\t4\t7.5\t16x24\t2\t42\ttrue\tNone\tNone\tF32\t1152"
        );
        assert_eq!(
            generate(Some("a \"street\"\tat night"), Some("l.npy")).to_string(),
            r#"culturelens-generate-v1	/p/sd	PNDMScheduler	4	7.5	16x24	2	42	true	Some("a \"street\"\tat night")	Some("l.npy")	F32	1152"#
        );
        assert_eq!(generate(None, None).width(), 1152);
        // FLUX's true CFG and a T5 length are appended only when set.
        assert_eq!(
            flow_key(None, None, 4.0, Some(256)).to_string(),
            "culturelens-generate-v1\t/p/sd\tPNDMScheduler\t4\t7.5\t16x24\t2\t42\ttrue\tNone\tNone\tF32\t1152\ttrue_cfg=4\tmax_sequence_length=256"
        );
        // Kandinsky 2.1's prior settings likewise.
        let mut prior = flow_key(None, None, 1.0, None);
        if let RunKey::Generate { prior: settings, .. } = &mut prior {
            *settings = Some("steps=25:guidance=4:latents=None".into());
        }
        assert_eq!(
            prior.to_string(),
            "culturelens-generate-v1\t/p/sd\tPNDMScheduler\t4\t7.5\t16x24\t2\t42\ttrue\tNone\tNone\tF32\t1152\tprior=steps=25:guidance=4:latents=None"
        );
    }

    fn record(key: &str, values: &[f32]) -> Vec<u8> {
        let mut bytes = Vec::new();
        write_record(&mut bytes, key, values).unwrap();
        bytes
    }

    #[test]
    fn finished_items_survive_a_reopen_in_the_documented_format() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("e.npy");
        let (mut log, finished) = ResumeLog::open(&out, &key(2)).unwrap();
        assert!(finished.is_empty());
        log.append("b.png", &[1.5, -2.0]).unwrap();
        log.append("a.png", &[0.25, 3.0]).unwrap();
        log.sync().unwrap();
        // The process dies here: the log is left as it is.
        drop(log);
        let bytes = std::fs::read(dir.path().join("e.npy.resume")).unwrap();
        let want = [
            format!("{HEADER}\n").into_bytes(),
            record("b.png", &[1.5, -2.0]),
            record("a.png", &[0.25, 3.0]),
        ]
        .concat();
        assert_eq!(bytes, want);
        // Hand-checked bytes of one record: length 5 (LE), "a.png", 0.25 = 0x3e800000, 3.0 = 0x40400000.
        assert_eq!(record("a.png", &[0.25, 3.0]), b"\x05\0\0\0a.png\0\0\x80\x3e\0\0\x40\x40");
        let (log, finished) = ResumeLog::open(&out, &key(2)).unwrap();
        assert_eq!(finished.len(), 2);
        assert_eq!(finished["a.png"], [0.25, 3.0]);
        assert_eq!(finished["b.png"], [1.5, -2.0]);
        log.remove().unwrap();
        assert!(!dir.path().join("e.npy.resume").exists());
    }

    #[test]
    fn a_torn_record_is_never_taken_as_finished() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("e.npy");
        let whole = [format!("{HEADER}\n").into_bytes(), record("a.png", &[1.0, 2.0])].concat();
        let torn = record("b.png", &[3.0, 4.0]);
        // Cut the second record at every byte: only the first is ever finished, and an append
        // after the reopen lands after it (the torn bytes are gone).
        for cut in 0..torn.len() {
            std::fs::write(ResumeLog::path_for(&out), [&whole[..], &torn[..cut]].concat()).unwrap();
            let (mut log, finished) = ResumeLog::open(&out, &key(2)).unwrap();
            assert_eq!(finished.keys().collect::<Vec<_>>(), ["a.png"], "cut at {cut}");
            log.append("c.png", &[5.0, 6.0]).unwrap();
            log.sync().unwrap();
            drop(log);
            let (_, finished) = ResumeLog::open(&out, &key(2)).unwrap();
            assert_eq!(finished.keys().collect::<Vec<_>>(), ["a.png", "c.png"], "cut at {cut}");
            assert_eq!(finished["c.png"], [5.0, 6.0]);
        }
    }

    #[test]
    fn another_run_or_a_torn_header_starts_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("e.npy");
        let other = [b"culturelens-test-v1\tother\t2\n".to_vec(), record("a.png", &[1.0, 2.0])].concat();
        for bytes in [other, HEADER.as_bytes().to_vec(), HEADER.as_bytes()[..7].to_vec(), Vec::new()] {
            std::fs::write(ResumeLog::path_for(&out), &bytes).unwrap();
            let (_, finished) = ResumeLog::open(&out, &key(2)).unwrap();
            assert!(finished.is_empty());
            let rewritten = std::fs::read(ResumeLog::path_for(&out)).unwrap();
            assert_eq!(rewritten, format!("{HEADER}\n").into_bytes());
        }
    }

    #[test]
    fn items_without_values_are_logged_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("images");
        let (mut log, _) = ResumeLog::open(&out, &key(0)).unwrap();
        log.append("000001.png", &[]).unwrap();
        log.sync().unwrap();
        drop(log);
        let (_, finished) = ResumeLog::open(&out, &key(0)).unwrap();
        assert_eq!(finished.into_iter().collect::<Vec<_>>(), [("000001.png".to_string(), vec![])]);
    }

    #[test]
    fn items_split_into_finished_and_todo_in_order() {
        let finished: BTreeMap<String, Vec<f32>> =
            [("k1".to_string(), vec![1.0]), ("k3".to_string(), vec![3.0]), ("k9".to_string(), vec![9.0])]
                .into();
        let (done, todo) = split_finished(&[4, 3, 2, 1], |i| format!("k{i}"), &finished);
        assert_eq!(done.into_iter().collect::<Vec<_>>(), [(1, vec![1.0]), (3, vec![3.0])]);
        assert_eq!(todo, [4, 2]);
    }
}
