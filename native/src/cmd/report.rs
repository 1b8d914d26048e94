//! `culturelens report`: a finished run folder as a static web site: the browser app with the
//! run's bundle, the figures (`crate::figure_inputs`), every result table as an HTML table, and the
//! provenance manifests. It needs nothing but a static file server, and nothing from the
//! network once loaded.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};
use culturelens_bundle::MANIFEST;
use culturelens_files::write_dir_atomic;
use culturelens_results::colour;
use culturelens_results::kind::{Place, ResultKind, outputs};

use crate::figure_inputs::{self, Figure};
use crate::input::load_bundle_table;
use crate::provenance::{BESIDE_SUFFIX, DIR_MANIFEST, Provenance};

const CONVENTIONS: &str = "\
Builds a static site from a run folder RUN_DIR (any folder of culturelens outputs) in --out:
  index.html     the report: figures, every result table (CSV) as an HTML table (at most
                 --max-rows rows each, the full file linked), the other results (JSON) and the
                 provenance manifests (*.provenance.json, provenance.json), with a link that
                 opens each bundle in the browser app
  app/           the browser app, copied from --app DIR (the output of `trunk build --release` in
                 web/); without --app, from web/dist in the current folder, else from app/ beside
                 the culturelens binary (where the release archives put it). With none of them
                 the site has everything else, its page says the app was left out and why, and
                 a note on stderr says how to add it
  bundles/NAME/  each bundle found in RUN_DIR (a folder with manifest.json), NAME its path
  figures/       SVG + PNG of every figure the run's outputs allow (as `culturelens figures`):
                 each result file is known by its provenance manifest (OUT.provenance.json:
                 the command that wrote OUT and, from its command line, the command's other
                 outputs such as `sos --report`; DIR/provenance.json: the command that wrote
                 the folder, e.g. a `colour` folder), so the sos joint CSV and report, the
                 magbig CSV, the cultext2i report, the vendi JSON and colour folders are drawn;
                 the PCA from the first bundle, by language. A CSV that no manifest names is
                 drawn only when its header is one result table's, and a note on stderr says
                 so; a JSON file that no manifest names is listed, not drawn
  results/       the run's CSV and JSON files, at their paths in RUN_DIR
Hidden files and folders are skipped. Serve --out with any static server, e.g.
`python3 -m http.server -d SITE`. The site is built in a temporary folder beside --out and moved
into place at the end; an existing --out is replaced only if it is a previous report.";

/// The marker file of a report folder (an existing `--out` without it is never replaced).
const MARKER: &str = ".culturelens-report";

/// Arguments of `culturelens report`.
#[derive(clap::Args, Debug, serde::Serialize)]
#[command(about = "A static web site of a run: browser app, bundle, figures, tables, provenance", long_about = CONVENTIONS)]
pub struct ReportArgs {
    /// The run folder (culturelens outputs: CSV, JSON, bundles, colour folders).
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
    /// The site folder to write.
    #[arg(long, value_name = "SITE")]
    pub out: PathBuf,
    /// The built browser app (`cd web && trunk build --release` writes web/dist). Default:
    /// web/dist if it has index.html, else app/ beside the binary (release archives), else none.
    #[arg(long, value_name = "DIR")]
    pub app: Option<PathBuf>,
    /// Rows of a table shown in the page (the full CSV is linked).
    #[arg(long, default_value_t = 1000)]
    pub max_rows: usize,
    /// PNG scale of the figures.
    #[arg(long, default_value_t = 2.0)]
    pub scale: f32,
}

/// What the run folder holds, by kind; paths relative to the run folder.
#[derive(Default)]
struct Run {
    bundles: Vec<PathBuf>,
    colour_dirs: Vec<PathBuf>,
    csvs: Vec<PathBuf>,
    jsons: Vec<PathBuf>,
    provenance: Vec<PathBuf>,
}

fn is_hidden(name: &std::ffi::OsStr) -> bool {
    name.to_string_lossy().starts_with('.')
}

/// Walks `root` (sorted, hidden entries skipped; a bundle folder is not entered).
fn scan(root: &Path) -> Result<Run> {
    let mut run = Run::default();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        if !rel.as_os_str().is_empty() && dir.join(MANIFEST).is_file() {
            if dir.join(DIR_MANIFEST).is_file() {
                run.provenance.push(rel.join(DIR_MANIFEST));
            }
            run.bundles.push(rel);
            continue;
        }
        if dir.join(colour::PALETTES).is_file() && dir.join(colour::VALUES).is_file() {
            run.colour_dirs.push(rel.clone());
        }
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .with_context(|| format!("cannot list {}", dir.display()))?
            .filter_map(|e| e.ok())
            .filter(|e| !is_hidden(&e.file_name()))
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries.into_iter().rev() {
            let path = rel.join(entry.file_name());
            let name = entry.file_name().to_string_lossy().into_owned();
            if root.join(&path).is_dir() {
                stack.push(path);
            } else if name == DIR_MANIFEST || name.ends_with(BESIDE_SUFFIX) {
                run.provenance.push(path);
            } else if name.to_ascii_lowercase().ends_with(".csv") {
                run.csvs.push(path);
            } else if name.to_ascii_lowercase().ends_with(".json") {
                run.jsons.push(path);
            }
        }
    }
    for list in [&mut run.bundles, &mut run.colour_dirs, &mut run.csvs, &mut run.jsons, &mut run.provenance] {
        list.sort();
    }
    Ok(run)
}

/// What the provenance manifests say about one file of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Named {
    /// A manifest names it as this result table.
    Result(ResultKind),
    /// A manifest names it, but as no result table (an input, a demo's `meta.csv`, a bundle).
    Other,
    /// No manifest names it.
    Unnamed,
}

/// The run's files as its provenance manifests name them: `OUT.provenance.json` names `OUT`,
/// `DIR/provenance.json` the folder `DIR`, by the command that wrote them
/// (`culturelens_results::kind::outputs`); the command line a manifest records names the
/// command's other outputs and its inputs. A path on it is taken relative to the manifest's own
/// file or folder, as it was on that command line, so a run folder that moved keeps its names.
#[derive(Default)]
struct Known {
    /// Result tables by path (relative to the run folder).
    results: BTreeMap<PathBuf, ResultKind>,
    /// Files and folders a manifest names.
    named: Vec<PathBuf>,
}

impl Known {
    /// Reads every manifest of `run`; one that is no culturelens manifest is noted on stderr and
    /// names nothing.
    fn read(root: &Path, run: &Run) -> Known {
        let mut known = Known::default();
        for manifest in &run.provenance {
            match read_manifest(&root.join(manifest)) {
                Ok((command, argv)) => known.add(root, manifest, &command, &argv),
                Err(e) => eprintln!("note: {} names no file: {e:#}", shown(manifest)),
            }
        }
        known
    }

    /// Adds what the manifest `manifest` of `command` run as `argv` names.
    fn add(&mut self, root: &Path, manifest: &Path, command: &str, argv: &[String]) {
        let name = manifest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let folder = name == DIR_MANIFEST;
        let target = match (folder, name.strip_suffix(BESIDE_SUFFIX)) {
            (true, _) => manifest.parent().map(Path::to_path_buf).unwrap_or_default(),
            (false, Some(out)) => manifest.with_file_name(out),
            (false, None) => return,
        };
        let values = argv_values(argv);
        // The value on the command line that is the manifest's own file or folder.
        let anchor = values.iter().map(|(_, v)| Path::new(v)).find(|v| v.file_name() == target.file_name());
        let resolve = |value: &str| {
            let anchor = anchor?;
            let from = anchor.parent().unwrap_or(Path::new(""));
            let rel = relative(from, Path::new(value))?;
            let path = normalise(&target.parent().unwrap_or(Path::new("")).join(rel))?;
            root.join(&path).exists().then_some(path)
        };
        for output in outputs(command) {
            let path = match output.place {
                Place::InFolder(file) if folder => Some(target.join(file)),
                Place::Flag(flag) if !folder => {
                    values.iter().find(|(f, _)| *f == flag).and_then(|(_, v)| resolve(v))
                }
                _ => None,
            };
            if let Some(path) = path {
                self.results.insert(path, output.kind);
            }
        }
        // The run folder itself on the command line (`report RUN`) names none of its files.
        self.named
            .extend(values.iter().filter_map(|(_, v)| resolve(v)).filter(|p| !p.as_os_str().is_empty()));
        self.named.push(target);
    }

    fn of(&self, rel: &Path) -> Named {
        match self.results.get(rel) {
            Some(kind) => Named::Result(*kind),
            None if self.named.iter().any(|n| rel.starts_with(n)) => Named::Other,
            None => Named::Unnamed,
        }
    }
}

/// A provenance manifest's command and command line.
fn read_manifest(path: &Path) -> Result<(String, Vec<String>)> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let json: serde_json::Value =
        serde_json::from_slice(&bytes).with_context(|| format!("{}: not valid JSON", path.display()))?;
    let command = json["command"].as_str().with_context(|| {
        format!("{}: no `command`, so no culturelens provenance manifest", path.display())
    })?;
    let argv =
        json["argv"].as_array().map(|a| a.iter().filter_map(|v| v.as_str()).map(str::to_string).collect());
    Ok((command.to_string(), argv.unwrap_or_default()))
}

/// The values of a command line (program and subcommand skipped): `(flag, value)` for
/// `--flag VALUE` and `--flag=VALUE`, `("", value)` for a positional argument.
fn argv_values(argv: &[String]) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut args = argv.iter().skip(2).peekable();
    while let Some(arg) = args.next() {
        match (arg.starts_with("--"), arg.split_once('=')) {
            (true, Some((flag, value))) => out.push((flag, value)),
            (true, None) => {
                if let Some(value) = args.next_if(|v| !v.starts_with("--")) {
                    out.push((arg.as_str(), value.as_str()));
                }
            }
            (false, _) => out.push(("", arg.as_str())),
        }
    }
    out
}

/// `to` relative to the folder `from`, lexically (both as typed on one command line); `None`
/// when one is absolute and the other not, or `from` climbs out with `..`.
fn relative(from: &Path, to: &Path) -> Option<PathBuf> {
    if from.is_absolute() != to.is_absolute() {
        return None;
    }
    fn parts(p: &Path) -> Vec<Component<'_>> {
        p.components().filter(|c| *c != Component::CurDir).collect()
    }
    let (from, to) = (parts(from), parts(to));
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    if from[common..].contains(&Component::ParentDir) {
        return None;
    }
    let mut out: PathBuf = from[common..].iter().map(|_| Component::ParentDir).collect();
    out.extend(&to[common..]);
    Some(out)
}

/// `path` with `..` applied, lexically; `None` when it leaves the run folder.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(part) => out.push(part),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// A CSV file's records (header first); the error names the file and line.
fn read_records(path: &Path) -> Result<Vec<Vec<String>>> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_path(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    reader
        .records()
        .map(|r| {
            r.map(|rec| rec.iter().map(str::to_string).collect())
                .with_context(|| format!("{}: not a readable CSV", path.display()))
        })
        .collect()
}

/// The figures of the run's result files, known by their provenance ([`Known`]; a CSV no
/// manifest names by its header), in file order: CSVs, JSON files, colour folders, then the PCA
/// of the first bundle.
fn figures_of(root: &Path, run: &Run) -> Result<Vec<(PathBuf, Vec<Figure>)>> {
    let mut out = Vec::new();
    let known = Known::read(root, run);
    let mut csv_kinds: BTreeMap<&Path, Option<ResultKind>> = BTreeMap::new();
    for rel in &run.csvs {
        let path = root.join(rel);
        let kind = match known.of(rel) {
            Named::Result(kind) => Some(kind),
            Named::Other => None,
            Named::Unnamed => {
                let header = read_records(&path)?.into_iter().next().unwrap_or_default();
                let kind = ResultKind::of_header(&header);
                match kind {
                    Some(kind) => eprintln!(
                        "note: no provenance manifest names {}; taken as `{}` by its header",
                        shown(rel),
                        kind.source()
                    ),
                    None => {
                        eprintln!("note: no provenance manifest names {}; shown as a table only", shown(rel))
                    }
                }
                kind
            }
        };
        csv_kinds.insert(rel, kind);
        match kind {
            Some(ResultKind::SosJoint) => out.push((rel.clone(), figure_inputs::sos_joint(&path)?)),
            Some(ResultKind::Magbig) => out.push((rel.clone(), figure_inputs::magbig(&path)?)),
            _ => {}
        }
    }
    for rel in &run.jsons {
        let path = root.join(rel);
        match known.of(rel) {
            Named::Result(ResultKind::SosReport) => {
                out.push((rel.clone(), figure_inputs::sos_report(&path)?))
            }
            Named::Result(ResultKind::Cultext2iReport) => {
                out.push((rel.clone(), figure_inputs::cultext2i(&path)?))
            }
            Named::Result(ResultKind::Vendi) => out.push((rel.clone(), vec![figure_inputs::vendi(&path)?])),
            Named::Unnamed => {
                eprintln!("note: no provenance manifest names {}; listed, not drawn", shown(rel))
            }
            Named::Result(_) | Named::Other => {}
        }
    }
    for rel in &run.colour_dirs {
        let kind = |name: &str| csv_kinds.get(rel.join(name).as_path()).copied().flatten();
        let (palettes, values) = (kind(colour::PALETTES), kind(colour::VALUES));
        if palettes == Some(ResultKind::ColourPalettes) && values == Some(ResultKind::ColourValues) {
            out.push((rel.clone(), figure_inputs::colour(&root.join(rel))?));
        }
    }
    if let Some(rel) = run.bundles.first() {
        let table = load_bundle_table(&root.join(rel))?;
        if table.meta.column("language").is_some() {
            out.push((rel.clone(), vec![figure_inputs::pca(&table, "language")?]));
        }
    }
    Ok(out)
}

/// Figure names made unique: a name already taken gets the slug of its source path in front.
fn unique_names(sources: Vec<(PathBuf, Vec<Figure>)>) -> Vec<(PathBuf, Figure)> {
    let mut taken = BTreeSet::new();
    let mut out = Vec::new();
    for (source, figures) in sources {
        for mut f in figures {
            if !taken.insert(f.name.clone()) {
                f.name = format!(
                    "{}__{}",
                    figure_inputs::slug(&source.with_extension("").to_string_lossy()),
                    f.name
                );
                taken.insert(f.name.clone());
            }
            out.push((source.clone(), f));
        }
    }
    out
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("cannot list {}", from.display()))? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst).with_context(|| format!("cannot copy {}", src.display()))?;
        }
    }
    Ok(())
}

fn copy_file(from: &Path, to: &Path) -> Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::copy(from, to).with_context(|| format!("cannot copy {}", from.display()))?;
    Ok(())
}

/// `text` escaped for HTML text and attribute values.
fn esc(text: &str) -> String {
    culturelens_figures::svg::escape(text)
}

/// A relative URL of a site path (`/` separators, each segment percent-encoded where needed).
fn url(path: &Path) -> String {
    path.iter()
        .map(|s| {
            s.to_string_lossy()
                .bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                        (b as char).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Relative path as shown (`/` separators).
fn shown(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:1rem 1.5rem;\
line-height:1.45;color:#1a1a1a}h1{margin-bottom:.2rem}h2{border-bottom:1px solid #ccc;margin-top:2.2rem}\
.figures{display:grid;grid-template-columns:repeat(auto-fill,minmax(320px,1fr));gap:1rem;align-items:start}\
figure{margin:0}figure img{width:100%;height:auto;border:1px solid #eee}figcaption{font-size:.85rem}\
.table-wrap{overflow-x:auto;max-height:32rem;overflow-y:auto;border:1px solid #ddd}\
table{border-collapse:collapse;font-size:.85rem}th,td{border:1px solid #ddd;padding:.2rem .45rem;text-align:left;\
white-space:nowrap}th{background:#f3f3f3;position:sticky;top:0}caption{text-align:left;font-weight:600;padding:.3rem 0}\
pre{background:#f6f6f6;padding:.7rem;overflow-x:auto;font-size:.8rem}.note{color:#555}";

/// The report page.
/// Where the browser app is read from: `--app` (it must hold index.html), else the first of
/// web/dist and app/ beside the running binary that holds index.html, else none.
fn find_app(args: &ReportArgs) -> Result<Option<PathBuf>> {
    if let Some(dir) = &args.app {
        if !dir.join("index.html").is_file() {
            bail!(
                "{} has no index.html: build the browser app first (`cd web && trunk build --release`, which writes web/dist) or pass another --app DIR",
                dir.display()
            );
        }
        return Ok(Some(dir.clone()));
    }
    let beside_binary = std::env::current_exe().ok().and_then(|exe| exe.parent().map(|d| d.join("app")));
    Ok([Some(PathBuf::from("web/dist")), beside_binary]
        .into_iter()
        .flatten()
        .find(|d| d.join("index.html").is_file()))
}

/// Why the site has no app, for its page and for stderr.
const NO_APP: &str = "the browser app was left out: no --app DIR was given, and neither web/dist nor app/ beside \
the culturelens binary holds a built app. The figures, tables and provenance are complete. To add the app, build \
it (`cd web && trunk build --release`) and run report again with --app web/dist, or use a release archive, which \
carries app/ beside the binary";

fn index_html(
    root: &Path,
    run: &Run,
    figures: &[(PathBuf, Figure)],
    max_rows: usize,
    with_app: bool,
) -> Result<String> {
    let mut h = String::new();
    let title =
        format!("culturelens report: {}", root.file_name().map(|n| n.to_string_lossy()).unwrap_or_default());
    let _ = write!(
        h,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n\
<link rel=\"icon\" href=\"data:,\">\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n\
<p class=\"note\">Written by culturelens {} (commit {}) from the run folder; every file below is in this \
site, so it works offline.</p>\n<nav><a href=\"#app\">Browser app</a> · <a href=\"#figures\">Figures</a> · \
<a href=\"#tables\">Tables</a> · <a href=\"#results\">Other results</a> · <a href=\"#provenance\">Provenance</a></nav>\n",
        esc(&title),
        esc(&title),
        env!("CARGO_PKG_VERSION"),
        crate::provenance::GIT_COMMIT
    );
    let _ = writeln!(h, "<section id=\"app\">\n<h2>Browser app</h2>");
    if !with_app {
        let _ = writeln!(h, "<p class=\"no-app\">{}.</p>", esc(&upper_first(NO_APP)));
    } else if run.bundles.is_empty() {
        let _ = writeln!(
            h,
            "<p>The run has no bundle; <a href=\"app/index.html\">open the app</a> to load one.</p>"
        );
    } else {
        let _ = writeln!(h, "<ul>");
        for b in &run.bundles {
            let _ = writeln!(
                h,
                "<li><a class=\"open-bundle\" href=\"app/index.html?bundle=../bundles/{}/\">Open {} in the browser app</a></li>",
                url(b),
                esc(&shown(b))
            );
        }
        let _ = writeln!(h, "</ul>");
    }
    let _ = writeln!(h, "</section>\n<section id=\"figures\">\n<h2>Figures</h2>");
    if figures.is_empty() {
        let _ = writeln!(h, "<p>No output of this run has a figure.</p>");
    }
    let _ = writeln!(h, "<div class=\"figures\">");
    for (source, f) in figures {
        let _ = writeln!(
            h,
            "<figure><img src=\"figures/{n}.png\" alt=\"{n}\" loading=\"lazy\"><figcaption>{n} (from {s}; \
<a href=\"figures/{n}.svg\">SVG</a>, <a href=\"figures/{n}.png\">PNG</a>)</figcaption></figure>",
            n = esc(&f.name),
            s = esc(&shown(source))
        );
    }
    let _ = writeln!(h, "</div>\n</section>\n<section id=\"tables\">\n<h2>Tables</h2>");
    for rel in &run.csvs {
        let records = read_records(&root.join(rel))?;
        let (header, body) = records.split_first().map(|(h, b)| (h.clone(), b)).unwrap_or_default();
        let link = format!("results/{}", url(rel));
        let shown_rows = body.len().min(max_rows);
        let _ = writeln!(
            h,
            "<div class=\"table-wrap\"><table class=\"result\" data-file=\"{}\">",
            esc(&shown(rel))
        );
        let more = if shown_rows < body.len() {
            format!(", first {shown_rows} of {} rows", body.len())
        } else {
            format!(", {} rows", body.len())
        };
        let _ = writeln!(h, "<caption><a href=\"{link}\">{}</a>{more}</caption>", esc(&shown(rel)));
        let _ = write!(h, "<thead><tr>");
        for c in &header {
            let _ = write!(h, "<th>{}</th>", esc(c));
        }
        let _ = writeln!(h, "</tr></thead>\n<tbody>");
        for row in &body[..shown_rows] {
            let _ = write!(h, "<tr>");
            for c in row {
                let _ = write!(h, "<td>{}</td>", esc(c));
            }
            let _ = writeln!(h, "</tr>");
        }
        let _ = writeln!(h, "</tbody></table></div>");
    }
    let _ = writeln!(h, "</section>\n<section id=\"results\">\n<h2>Other results</h2>\n<ul>");
    for rel in &run.jsons {
        let _ = writeln!(h, "<li><a href=\"results/{}\">{}</a></li>", url(rel), esc(&shown(rel)));
    }
    let _ = writeln!(h, "</ul>\n</section>\n<section id=\"provenance\">\n<h2>Provenance</h2>");
    for rel in &run.provenance {
        let text = std::fs::read_to_string(root.join(rel))
            .with_context(|| format!("cannot read {}", rel.display()))?;
        let _ = writeln!(
            h,
            "<details class=\"provenance\" data-file=\"{f}\"><summary><a href=\"results/{u}\">{f}</a></summary><pre>{}</pre></details>",
            esc(&text),
            f = esc(&shown(rel)),
            u = url(rel)
        );
    }
    let _ = writeln!(h, "</section>\n</body>\n</html>");
    Ok(h)
}

pub fn run(args: &ReportArgs) -> Result<()> {
    let root = &args.run_dir;
    if !root.is_dir() {
        bail!("{} is not a folder", root.display());
    }
    let app = find_app(args)?;
    if !(args.scale.is_finite() && args.scale > 0.0 && args.scale <= 8.0) {
        bail!("--scale must be in (0, 8] (got {})", args.scale);
    }
    if args.out.exists() && !args.out.join(MARKER).is_file() && std::fs::read_dir(&args.out)?.next().is_some()
    {
        bail!("{} exists and is not a culturelens report: choose another --out", args.out.display());
    }
    let run = scan(root)?;
    let figures = unique_names(figures_of(root, &run)?);
    let html = index_html(root, &run, &figures, args.max_rows, app.is_some())?;

    let just_figures: Vec<Figure> = figures.into_iter().map(|(_, f)| f).collect();
    write_dir_atomic(&args.out, |site| -> Result<()> {
        if let Some(app) = &app {
            copy_dir(app, &site.join("app"))?;
        }
        for b in &run.bundles {
            copy_dir(&root.join(b), &site.join("bundles").join(b))?;
        }
        if !just_figures.is_empty() {
            figure_inputs::write(&site.join("figures"), &just_figures, args.scale)?;
        }
        for rel in run.csvs.iter().chain(&run.jsons).chain(&run.provenance) {
            copy_file(&root.join(rel), &site.join("results").join(rel))?;
        }
        std::fs::write(site.join("index.html"), html)?;
        std::fs::File::create(site.join(MARKER))?.write_all(b"a culturelens report folder\n")?;
        let mut provenance = Provenance::new("report", args);
        provenance.input(root)?;
        if let Some(app) = &app {
            provenance.input(app)?;
        }
        provenance.write_for_dir(site)
    })?;
    if app.is_none() {
        eprintln!("note: {NO_APP}.");
    }
    println!(
        "wrote {} (serve it statically, e.g. python3 -m http.server -d {}): {} figures, {} tables, {} bundles",
        args.out.display(),
        args.out.display(),
        just_figures.len(),
        run.csvs.len(),
        run.bundles.len()
    );
    Ok(())
}

/// `text` with its first letter upper-cased.
fn upper_first(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;
    use serde_json::json;

    use super::*;

    #[test]
    fn every_flag_output_is_a_flag_of_its_command() {
        let cli = crate::Cli::command();
        for (command, list) in culturelens_results::kind::commands() {
            let sub = cli.find_subcommand(command).unwrap_or_else(|| panic!("no subcommand `{command}`"));
            for output in list {
                if let Place::Flag(flag) = output.place {
                    let long = flag.strip_prefix("--").unwrap();
                    assert!(
                        sub.get_arguments().any(|a| a.get_long() == Some(long)),
                        "`{command}` has no {flag}"
                    );
                }
            }
        }
    }

    #[test]
    fn command_line_paths_relative_to_each_other() {
        let argv: Vec<String> = [
            "bin",
            "sos",
            "--out",
            "a/sos.csv",
            "--report=a/r/x.json",
            "--timings",
            "--bundle",
            "../b",
            "RUN",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            argv_values(&argv),
            [("--out", "a/sos.csv"), ("--report", "a/r/x.json"), ("--bundle", "../b"), ("", "RUN")]
        );
        let rel = |from: &str, to: &str| relative(Path::new(from), Path::new(to));
        assert_eq!(rel("a", "a/r/x.json"), Some(PathBuf::from("r/x.json")));
        assert_eq!(rel("./a/b", "a/c.json"), Some(PathBuf::from("../c.json")));
        assert_eq!(rel("", "x.json"), Some(PathBuf::from("x.json")));
        assert_eq!(rel("/w/run", "/w/x/y.csv"), Some(PathBuf::from("../x/y.csv")));
        assert_eq!(rel("/w/run", "run/y.csv"), None);
        assert_eq!(rel("../a", "b.csv"), None);
        assert_eq!(normalise(Path::new("sub/../x/./y")), Some(PathBuf::from("x/y")));
        assert_eq!(normalise(Path::new("../x")), None);
    }

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn manifest(command: &str, argv: &[&str]) -> String {
        let argv: Vec<&str> = ["/usr/bin/culturelens", command].iter().chain(argv).copied().collect();
        json!({"command": command, "argv": argv}).to_string()
    }

    #[test]
    fn manifests_name_their_files_in_a_moved_run_folder() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // Written as /old/run by commands run in /old; the folder is now `root`.
        write(root, "sos.csv", "");
        write(root, "reports/sos.json", "");
        write(root, "attributes.csv", "");
        let sos = [
            "--bundle",
            "/old/run/bundle",
            "--out",
            "/old/run/sos.csv",
            "--report",
            "/old/run/reports/sos.json",
        ];
        write(root, "sos.csv.provenance.json", &manifest("sos", &sos));
        write(root, "m.csv", "");
        let magbig =
            ["--attributes", "run/attributes.csv", "--out=run/m.csv", "--report", "elsewhere/m.json"];
        write(root, "m.csv.provenance.json", &manifest("magbig", &magbig));
        for file in [colour::DOMINANT_COLOURS, colour::PALETTES, colour::VALUES] {
            write(root, &format!("c/{file}"), "");
        }
        write(root, "c/provenance.json", &manifest("colour", &["--images", "m.csv", "--out", "run/c"]));
        write(root, "demo/sos.csv", "");
        write(root, "demo/meta.csv", "");
        write(root, "demo/provenance.json", &manifest("demo", &["--write", "demo"]));
        write(root, "copied.csv", "");
        write(root, "broken.csv", "");
        write(root, "broken.csv.provenance.json", "{\"argv\": []}");

        let known = Known::read(root, &scan(root).unwrap());
        let of = |rel: &str| known.of(Path::new(rel));
        assert_eq!(of("sos.csv"), Named::Result(ResultKind::SosJoint));
        assert_eq!(of("reports/sos.json"), Named::Result(ResultKind::SosReport));
        assert_eq!(of("m.csv"), Named::Result(ResultKind::Magbig));
        assert_eq!(of("attributes.csv"), Named::Other, "an input on a manifest's command line");
        assert_eq!(of("c/palettes.csv"), Named::Result(ResultKind::ColourPalettes));
        assert_eq!(of("c/values.csv"), Named::Result(ResultKind::ColourValues));
        assert_eq!(of("demo/sos.csv"), Named::Result(ResultKind::SosJoint));
        assert_eq!(of("demo/meta.csv"), Named::Other);
        assert_eq!(of("copied.csv"), Named::Unnamed);
        assert_eq!(of("broken.csv"), Named::Unnamed, "a manifest without a command names nothing");
    }
}
