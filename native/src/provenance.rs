//! The reproducibility manifest every command that writes results writes beside them:
//! `OUT.provenance.json` next to a result file (`sos.csv` → `sos.csv.provenance.json`) or
//! `DIR/provenance.json` in a result folder. It holds what a reader needs to rerun and check the
//! result: the culturelens version and git commit it was built from, the command line and the
//! fully resolved arguments (a JSON object keyed by argument name, defaults included), the sha256
//! of every input (a folder: of its sorted file list with each file's sha256), model ids with the
//! sha256 of each file of their weights folder, seeds, prompt-set names with the repository,
//! commit, path and sha256 of each set's pinned upstream files, backend and precision, and with
//! `--ci` the bootstrap's settings and resampling unit (`uncertainty`). It holds
//! no clock time, so the same run gives the same manifest. Written atomically, once per command,
//! after the results.

use std::fmt::Display;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use culturelens_files::{HashCache, sha256_hex};
use culturelens_prompts::PromptSet;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value, json};

use crate::device::{DeviceChoice, FloatType, ModelPrecision};
use crate::output::write_json_pretty;
use culturelens_table::Metadata;

/// The git commit the binary was built from (`native/build.rs`; `unknown` outside a git
/// checkout, or `CULTURELENS_GIT_COMMIT` when set at build time).
pub const GIT_COMMIT: &str = env!("CULTURELENS_GIT_COMMIT");

/// The file name of a folder output's manifest.
pub const DIR_MANIFEST: &str = "provenance.json";

/// What a result file's manifest adds to its name.
pub const BESIDE_SUFFIX: &str = ".provenance.json";

/// The manifest path of the result file `out`.
pub fn beside(out: &Path) -> PathBuf {
    let mut name = out.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(BESIDE_SUFFIX);
    out.with_file_name(name)
}

/// A manifest being filled in by one command.
pub struct Provenance {
    command: String,
    resolved_args: Value,
    inputs: Vec<Value>,
    models: Vec<Value>,
    seeds: Map<String, Value>,
    prompt_sets: Vec<String>,
    device: Map<String, Value>,
    parts: Vec<Value>,
    uncertainty: Option<Value>,
    encoders: Vec<String>,
}

/// Every file under `dir` (recursively, symlinks followed), as paths relative to `dir` with `/`
/// separators, sorted.
fn files_under(dir: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let entries = std::fs::read_dir(dir.join(&rel))
            .with_context(|| format!("cannot list {}", dir.join(&rel).display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot list {}", dir.join(&rel).display()))?;
            let path = rel.join(entry.file_name());
            if dir.join(&path).is_dir() {
                stack.push(path);
            } else {
                out.push(path.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The provenance record of one input: a file's sha256, or a folder's (the sha256 of its
/// `sha256  path` lines, sorted by path) and its file count.
fn input_record(path: &Path) -> Result<Value> {
    Ok(if path.is_dir() {
        let files = hashed_files(path)?;
        let listing: String = files.iter().map(|(f, h)| format!("{h}  {f}\n")).collect();
        json!({"path": path.display().to_string(), "files": files.len(),
               "sha256": sha256_hex(listing.as_bytes())})
    } else {
        json!({"path": path.display().to_string(), "sha256": file_sha256(path)?.1})
    })
}

/// The size and sha256 of the file at `path`, through the hash cache (`CULTURELENS_HASH_CACHE`;
/// [`HashCache`]): a large input read again unchanged is not hashed again.
fn file_sha256(path: &Path) -> Result<(u64, String)> {
    Ok(HashCache::from_env().file_sha256(path)?)
}

/// Input records ([`Provenance::input`]) computed on a thread of their own while the command
/// works: started before the inputs are loaded, the hashing of a large table runs beside the
/// single-threaded read instead of after the computation (a 512 MB table takes about 0.4 s to
/// hash).
pub struct InputHashes(Vec<std::thread::JoinHandle<Result<Value>>>);

impl InputHashes {
    pub fn start<'a>(paths: impl IntoIterator<Item = &'a Path>) -> InputHashes {
        InputHashes(
            paths
                .into_iter()
                .map(|path| {
                    let path = path.to_path_buf();
                    std::thread::spawn(move || input_record(&path))
                })
                .collect(),
        )
    }

    /// Waits for the records and adds them to `provenance`, in the order the paths were given.
    pub fn record(self, provenance: &mut Provenance) -> Result<()> {
        for handle in self.0 {
            let value = handle.join().map_err(|_| anyhow::anyhow!("the input-hashing thread panicked"))??;
            provenance.inputs.push(value);
        }
        Ok(())
    }
}

/// Each file of `dir` with its sha256.
fn hashed_files(dir: &Path) -> Result<Vec<(String, String)>> {
    files_under(dir)?
        .into_iter()
        .map(|rel| {
            let hash = file_sha256(&dir.join(&rel))?.1;
            Ok((rel, hash))
        })
        .collect()
}

/// The pinned upstream files of each recorded name that is one of the papers' prompt sets
/// (`culturelens_prompts`' registry: repository, commit, path, sha256): an object keyed by set
/// name. CulText2I's prompts are typed in from the paper and have no upstream file (an empty
/// list); names that are no prompt set (a `set` column of the user's own) are left out.
fn prompt_set_files(names: &[String]) -> Value {
    let sets = names.iter().filter_map(|name| PromptSet::parse(name).map(|set| (name, set)));
    let files = sets.map(|(name, set)| {
        let files: Vec<Value> = set
            .info()
            .files
            .iter()
            .map(|f| {
                let u = f.upstream;
                json!({"repository": format!("{}/{}", u.owner, u.repo), "commit": u.commit,
                       "path": f.path, "sha256": f.sha256})
            })
            .collect();
        (name.clone(), Value::Array(files))
    });
    Value::Object(files.collect())
}

/// The encoders that made a table's embeddings: the distinct values of its `encoder` column
/// (written by `embed` and `embed-text`), in first-seen order; none without the column.
pub fn encoders(meta: &Metadata) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for value in meta.column(ENCODER_COLUMN).unwrap_or_default() {
        if !names.contains(value) {
            names.push(value.clone());
        }
    }
    names
}

/// The table column naming the encoder of each row (`culturelens_table::KNOWN_COLUMNS`).
pub const ENCODER_COLUMN: &str = "encoder";

impl Provenance {
    /// A manifest of `command` run with `args`, the command's clap arguments as parsed (they
    /// serialize to the resolved arguments: one key per argument, flattened groups inlined,
    /// choices by their command-line names, [`value_enum`]).
    pub fn new<A: Serialize + ?Sized>(command: &str, args: &A) -> Provenance {
        Provenance {
            command: command.to_string(),
            resolved_args: serde_json::to_value(args).expect("command-line arguments serialize to JSON"),
            inputs: Vec::new(),
            models: Vec::new(),
            seeds: Map::new(),
            prompt_sets: Vec::new(),
            device: Map::new(),
            parts: Vec::new(),
            uncertainty: None,
            encoders: Vec::new(),
        }
    }

    /// Records an input file (its sha256) or folder (the sha256 of its `sha256  path` lines,
    /// sorted by path, and its file count).
    pub fn input(&mut self, path: &Path) -> Result<&mut Self> {
        self.inputs.push(input_record(path)?);
        Ok(self)
    }

    /// Records an input file whose sha256 the command has already computed and checked (a
    /// merged shard's table, whose part file lists it), instead of reading it again.
    pub fn input_hashed(&mut self, path: &Path, sha256: &str) -> &mut Self {
        self.inputs.push(json!({"path": path.display().to_string(), "sha256": sha256}));
        self
    }

    /// Records a model: its id (a hub id, or the folder given) and the sha256 of every file of
    /// its weights folder `dir` (or of the file `dir`).
    pub fn model(&mut self, id: &str, dir: &Path) -> Result<&mut Self> {
        let files = if dir.is_dir() {
            hashed_files(dir)?
        } else {
            let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            vec![(name, file_sha256(dir)?.1)]
        };
        let files: Vec<Value> = files.into_iter().map(|(f, h)| json!({"file": f, "sha256": h})).collect();
        self.models.push(json!({"id": id, "path": dir.display().to_string(), "files": files}));
        Ok(self)
    }

    /// Records the encoders that made an input table's embeddings (the [`encoders`] of its
    /// metadata; nothing for a table without an `encoder` column).
    pub fn encoders(&mut self, names: &[String]) -> &mut Self {
        for name in names {
            if !self.encoders.contains(name) {
                self.encoders.push(name.clone());
            }
        }
        self
    }

    /// Records a seed under its argument name.
    pub fn seed(&mut self, name: &str, value: u64) -> &mut Self {
        self.seeds.insert(name.to_string(), json!(value));
        self
    }

    /// Records the prompt-set names (kept sorted and distinct).
    pub fn prompt_sets<S: AsRef<str>>(&mut self, names: impl IntoIterator<Item = S>) -> &mut Self {
        self.prompt_sets.extend(names.into_iter().map(|s| s.as_ref().to_string()));
        self.prompt_sets.sort();
        self.prompt_sets.dedup();
        self
    }

    /// Records the backend (`--device`, by its command-line name) and the float type the work
    /// ran in.
    pub fn device(&mut self, backend: DeviceChoice, precision: impl Into<FloatType>) -> &mut Self {
        self.device.insert("backend".into(), json!(value_name(&backend)));
        self.device.insert("precision".into(), json!(precision.into().name()));
        if let Some(adapter) = crate::device::adapter()
            && matches!(backend, DeviceChoice::Wgpu | DeviceChoice::Vulkan)
        {
            self.device.insert("adapter".into(), json!(adapter));
        }
        self
    }

    /// Records how the confidence intervals were computed (`uncertainty::CiArgs::record`: level,
    /// resamples, method, seed, the resampling unit); nothing without `--ci`.
    pub fn uncertainty(&mut self, record: Option<Value>) -> &mut Self {
        self.uncertainty = record;
        self
    }

    /// Records the manifest of one shard a `merge` joins (the part's own `provenance.json`, or
    /// `null` when the shard wrote none), so the merged result keeps its models, seeds and inputs.
    pub fn part(&mut self, manifest: &Path) -> Result<&mut Self> {
        let value = if manifest.is_file() {
            let bytes =
                std::fs::read(manifest).with_context(|| format!("cannot read {}", manifest.display()))?;
            serde_json::from_slice(&bytes)
                .with_context(|| format!("{}: not a JSON manifest", manifest.display()))?
        } else {
            Value::Null
        };
        self.parts.push(json!({"manifest": manifest.display().to_string(), "provenance": value}));
        Ok(self)
    }

    fn to_json(&self) -> Value {
        let mut value = json!({
            "culturelens": {"version": env!("CARGO_PKG_VERSION"), "git_commit": GIT_COMMIT},
            "command": self.command,
            "argv": std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>(),
            "resolved_args": self.resolved_args,
            "inputs": self.inputs,
            "models": self.models,
            "seeds": self.seeds,
            "prompt_sets": self.prompt_sets,
            "prompt_set_files": prompt_set_files(&self.prompt_sets),
            "backend": self.device.get("backend").cloned().unwrap_or(Value::Null),
            "precision": self.device.get("precision").cloned().unwrap_or(Value::Null),
        });
        if let Some(adapter) = self.device.get("adapter") {
            value["adapter"] = adapter.clone();
        }
        if !self.parts.is_empty() {
            value["parts"] = Value::Array(self.parts.clone());
        }
        if let Some(u) = &self.uncertainty {
            value["uncertainty"] = u.clone();
        }
        if !self.encoders.is_empty() {
            value["encoders"] = json!(self.encoders);
        }
        value
    }

    /// Writes the manifest of the result file `out` ([`beside`]).
    pub fn write_beside(&self, out: &Path) -> Result<()> {
        write_json_pretty(&beside(out), &self.to_json())
    }

    /// Writes the manifest of the result folder `dir` (`DIR/provenance.json`).
    pub fn write_for_dir(&self, dir: &Path) -> Result<()> {
        write_json_pretty(&dir.join(DIR_MANIFEST), &self.to_json())
    }
}

/// The command-line name of a `clap::ValueEnum` value (`--device wgpu`, `--pool per-model`).
pub fn value_name<T: clap::ValueEnum>(value: &T) -> String {
    value.to_possible_value().expect("no value is skipped").get_name().to_string()
}

/// Implements `serde::Serialize` for `clap::ValueEnum` types as their command-line names
/// ([`value_name`]), so the resolved arguments record a choice as it is typed.
macro_rules! value_enum {
    ($($ty:ty),+ $(,)?) => {$(
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&$crate::provenance::value_name(self))
            }
        }
    )+};
}
pub(crate) use value_enum;

value_enum!(DeviceChoice, ModelPrecision);

/// `#[serde(serialize_with = "…")]` of an argument parsed by its own `value_parser` (a shard
/// `K/N`, a prompt set, a Vendi order): the text it reads back from, its `Display`.
pub fn as_text<T: Display, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(value)
}

/// [`as_text`] of an optional argument (`null` when not given).
pub fn as_text_opt<T: Display, S: Serializer>(value: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => s.collect_str(value),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Args {
        out: PathBuf,
        seed: u64,
        #[serde(serialize_with = "as_text_opt")]
        shard: Option<crate::work::shard::Shard>,
        device: DeviceChoice,
    }

    #[test]
    fn manifest_records_inputs_models_seeds_and_device() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.csv");
        std::fs::write(&input, "abc").unwrap();
        let weights = dir.path().join("w");
        std::fs::create_dir_all(weights.join("sub")).unwrap();
        std::fs::write(weights.join("model.safetensors"), "abc").unwrap();
        std::fs::write(weights.join("sub/config.json"), "").unwrap();
        let out = dir.path().join("out.csv");
        let shard = crate::work::shard::Shard::parse("2/3").ok();
        let args = Args { out: out.clone(), seed: 7, shard, device: DeviceChoice::Wgpu };
        let mut p = Provenance::new("test", &args);
        p.input(&input).unwrap();
        p.input(&weights).unwrap();
        p.model("org/name@rev", &weights).unwrap();
        p.seed("seed", 7)
            .prompt_sets(["sos", "magbig", "sos"])
            .device(DeviceChoice::Wgpu, ModelPrecision::F16);
        p.write_beside(&out).unwrap();
        let path = dir.path().join("out.csv.provenance.json");
        let json: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        // sha256("abc") and sha256("") (FIPS 180-2 test vectors).
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(json["inputs"][0]["sha256"], abc);
        // The folder digest is the sha256 of its sorted `sha256  path` lines.
        let listing = format!("{abc}  model.safetensors\n{empty}  sub/config.json\n");
        assert_eq!(json["inputs"][1]["sha256"], sha256_hex(listing.as_bytes()));
        assert_eq!(json["inputs"][1]["files"], 2);
        assert_eq!(json["models"][0]["id"], "org/name@rev");
        assert_eq!(json["models"][0]["files"][0], json!({"file": "model.safetensors", "sha256": abc}));
        assert_eq!(json["models"][0]["files"][1]["file"], "sub/config.json");
        assert_eq!(json["seeds"], json!({"seed": 7}));
        assert_eq!(json["prompt_sets"], json!(["magbig", "sos"]));
        // Each set's pinned upstream files, with the sha256 the fetcher checks.
        let sos = &json["prompt_set_files"]["sos"][0];
        assert_eq!(sos["repository"], "TAI-HAMBURG/Surface-Over-Semantics");
        assert_eq!(sos["path"], "data/full_dataset.csv");
        assert_eq!(sos["sha256"], "6cc0e2f50a69d5e3589877ae82cf9ee681b227f4bcf9de4d45638e3cca93a376");
        let magbig = json["prompt_set_files"]["magbig"].as_array().unwrap();
        assert_eq!(magbig.len(), PromptSet::Magbig.info().files.len());
        assert!(magbig.iter().all(|f| f["sha256"].as_str().unwrap().len() == 64));
        assert_eq!((json["backend"].as_str(), json["precision"].as_str()), (Some("wgpu"), Some("f16")));
        assert_eq!(json["command"], "test");
        let resolved = json!({"out": out.display().to_string(), "seed": 7, "shard": "2/3", "device": "wgpu"});
        assert_eq!(json["resolved_args"], resolved);
        assert_eq!(json["culturelens"]["version"], env!("CARGO_PKG_VERSION"));
        let commit = json["culturelens"]["git_commit"].as_str().unwrap();
        assert!(
            commit == "unknown"
                || (commit.len() >= 40 && commit.chars().all(|c| c.is_ascii_hexdigit() || c == '-'))
        );
    }

    #[test]
    fn manifest_names() {
        assert_eq!(beside(Path::new("runs/sos.csv")), PathBuf::from("runs/sos.csv.provenance.json"));
    }
}
