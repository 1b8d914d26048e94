//! The resume log `OUT.resume`: where a run keeps its finished items until its output is
//! written, so an interrupted run (killed, out of time, requeued) picks up where it stopped.
//!
//! Format: one header line naming the run (a rerun with another header starts afresh), then one
//! record per finished item: its key (`u32` LE length + UTF-8) and `width` × `f32` LE values
//! (`width` may be 0 when the item's output is a file of its own). Records are keyed, not
//! numbered, so a rerun after adding, removing or reordering items reuses every finished one.
//!
//! A record is finished only when it is whole: records have a known length, and only the last
//! one can be torn (appends are sequential), so a torn tail is recognised and dropped. Opening a
//! log rewrites it with its whole records only (atomically: temp file and rename, so a kill
//! during the rewrite keeps the old log), and appends go after that; [`ResumeLog::sync`] flushes
//! and syncs to disk, so a finished batch survives the node as well as the process.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

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

    /// Opens (or starts) the log of the run writing `out`, identified by `header` (one line),
    /// whose records hold `width` values; returns the log and the items already finished.
    pub fn open(out: &Path, header: &str, width: usize) -> Result<(Self, BTreeMap<String, Vec<f32>>)> {
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
        rewrite(&path, header, &finished)?;
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
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let context = || format!("cannot write {}", path.display());
    let tmp = tempfile::NamedTempFile::new_in(dir).with_context(context)?;
    let mut writer = BufWriter::new(tmp);
    writeln!(writer, "{header}").with_context(context)?;
    for (key, values) in finished {
        write_record(&mut writer, key, values).with_context(context)?;
    }
    let tmp = writer.into_inner().map_err(|e| e.into_error()).with_context(context)?;
    tmp.as_file().sync_data().with_context(context)?;
    tmp.persist(path).map_err(|e| e.error).with_context(context)?;
    Ok(())
}

fn write_record(w: &mut impl Write, key: &str, values: &[f32]) -> std::io::Result<()> {
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

    const HEADER: &str = "culturelens-test-v1\tweights\t2";

    fn record(key: &str, values: &[f32]) -> Vec<u8> {
        let mut bytes = Vec::new();
        write_record(&mut bytes, key, values).unwrap();
        bytes
    }

    #[test]
    fn finished_items_survive_a_reopen_in_the_documented_format() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("e.npy");
        let (mut log, finished) = ResumeLog::open(&out, HEADER, 2).unwrap();
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
        let (log, finished) = ResumeLog::open(&out, HEADER, 2).unwrap();
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
            let (mut log, finished) = ResumeLog::open(&out, HEADER, 2).unwrap();
            assert_eq!(finished.keys().collect::<Vec<_>>(), ["a.png"], "cut at {cut}");
            log.append("c.png", &[5.0, 6.0]).unwrap();
            log.sync().unwrap();
            drop(log);
            let (_, finished) = ResumeLog::open(&out, HEADER, 2).unwrap();
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
            let (_, finished) = ResumeLog::open(&out, HEADER, 2).unwrap();
            assert!(finished.is_empty());
            let rewritten = std::fs::read(ResumeLog::path_for(&out)).unwrap();
            assert_eq!(rewritten, format!("{HEADER}\n").into_bytes());
        }
    }

    #[test]
    fn items_without_values_are_logged_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("images");
        let (mut log, _) = ResumeLog::open(&out, HEADER, 0).unwrap();
        log.append("000001.png", &[]).unwrap();
        log.sync().unwrap();
        drop(log);
        let (_, finished) = ResumeLog::open(&out, HEADER, 0).unwrap();
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
