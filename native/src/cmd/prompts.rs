//! `culturelens prompts list|show|export`: the prompt sets of the four papers by name. Fetching,
//! verification and parsing live in `culturelens-prompts`; this module formats and writes.

use std::path::PathBuf;

use anyhow::{Context, Result};
use culturelens_prompts::cultext2i::DEFAULT_GIBBERISH_LENGTH;
use culturelens_prompts::fetch::{DEFAULT_BASE_URL, ENV_BASE_URL, ENV_CACHE, ENV_MIRROR};
use culturelens_prompts::{COMMON_COLUMNS, Fetcher, LoadOptions, Origin, PromptSet, extra_columns, notes};

use crate::prompt_sets::{PromptFilter, load_set, parse_set};

use crate::provenance::{Provenance, as_text};

const ABOUT: &str = "\
The prompt sets of the four papers, downloaded on first use from their pinned upstream commits and
verified against a pinned sha256 (a mismatch is an error and nothing is cached):
  sos        SoS: 171 cultures x 3 templates x 3 person terms, 13 languages + English
  magbig     MAGBIG: 20 adjectives, 151 occupations (direct, indirect, German gender star)
  cube       CUBE-1K cultural-awareness prompts + under-specified cultural-diversity prompts
  cultext2i  CulText2I: Table 9 concepts x Table 1 templates x 10 languages (typed in from the paper)

Environment: CULTURELENS_CACHE (cache folder, default <user cache dir>/culturelens),
CULTURELENS_DATA_MIRROR or --mirror (read the upstream files from a local folder laid out like
the cache's upstream/ folder, e.g. ../shared/data/upstream), CULTURELENS_DATA_BASE_URL (instead of
https://raw.githubusercontent.com). Each set's licence is printed to stderr on its first use.";

/// Arguments of `culturelens prompts`.
#[derive(clap::Args, Debug)]
#[command(about = "Prompt sets of the four papers (SoS, MAGBIG, CUBE, CulText2I): list, show, export", long_about = ABOUT)]
pub struct PromptsArgs {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(clap::Subcommand, Debug)]
// Parsed once at start-up: boxing ExportArgs would save nothing.
#[allow(clippy::large_enum_variant)]
pub enum Action {
    /// List the prompt sets, their sources and whether they are cached.
    List,
    /// Show a set: paper, licence, pinned files, columns and every normalisation.
    Show {
        /// sos, magbig, cube or cultext2i.
        #[arg(value_parser = parse_set)]
        set: PromptSet,
    },
    /// Export a set's normalised prompt table as CSV or Parquet (written atomically).
    Export(ExportArgs),
}

/// Arguments of `culturelens prompts export`.
#[derive(clap::Args, Debug, serde::Serialize)]
pub struct ExportArgs {
    /// sos, magbig, cube or cultext2i.
    #[arg(value_parser = parse_set)]
    #[serde(serialize_with = "as_text")]
    pub set: PromptSet,
    /// Output file: .csv (header row) or .parquet (UTF-8 columns).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Row filters: --languages, --cultures, --persons, --templates, --limit N per language.
    #[command(flatten)]
    pub filter: PromptFilter,
    /// Read the upstream files from this folder instead of the cache or the network.
    #[arg(long, value_name = "DIR")]
    pub mirror: Option<PathBuf>,
    /// magbig: feminine-occupation prompts (long `language,name,prompt` or wide `name,<lang>...`).
    #[arg(long, value_name = "FILE")]
    pub feminine: Option<PathBuf>,
    /// cultext2i: translations (columns language, concept, translated_prompt, translated_concept).
    #[arg(long, value_name = "FILE")]
    pub translations: Option<PathBuf>,
    /// cultext2i: letters of gibberish in the "English with Gibberish" template.
    #[arg(long, default_value_t = DEFAULT_GIBBERISH_LENGTH, value_name = "N")]
    pub gibberish_length: usize,
    /// cultext2i: seed of the gibberish generator.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

pub fn run(args: &PromptsArgs) -> Result<()> {
    match &args.action {
        Action::List => list(),
        Action::Show { set } => show(*set),
        Action::Export(export_args) => export(export_args),
    }
}

fn list() -> Result<()> {
    let fetcher = Fetcher::from_env(None)?;
    for set in PromptSet::ALL {
        let info = set.info();
        println!("{:<10} {}", info.name, info.title);
        println!("{:<10} paper: {}", "", info.paper);
        if info.files.is_empty() {
            println!("{:<10} files: none (typed in from the paper)", "");
            continue;
        }
        let upstream = info.files[0].upstream;
        let cached = match fetcher.origin() {
            Origin::Mirror(dir) => format!("read from mirror {}", dir.display()),
            Origin::Download { .. } => {
                let n = info.files.iter().filter(|f| fetcher.cache_path(f).is_file()).count();
                format!(
                    "{n} of {} cached in {}",
                    info.files.len(),
                    fetcher.cache_root().join("upstream").display()
                )
            }
        };
        println!(
            "{:<10} files: {} from {}/{}@{} ({cached})",
            "",
            info.files.len(),
            upstream.owner,
            upstream.repo,
            &upstream.commit[..12]
        );
    }
    Ok(())
}

fn show(set: PromptSet) -> Result<()> {
    let info = set.info();
    println!("{} — {}\n", info.name, info.title);
    println!("Paper: {}\n", info.paper);
    println!("Licence: {}\n", info.licence);
    if !info.files.is_empty() {
        println!(
            "Upstream files (downloaded from {DEFAULT_BASE_URL} or ${ENV_BASE_URL}, cached in ${ENV_CACHE}, or read from ${ENV_MIRROR} / --mirror):"
        );
        for f in info.files {
            let u = f.upstream;
            println!("  {}/{}@{} {}", u.owner, u.repo, u.commit, f.path);
            println!("    mirror path {}  sha256 {}", f.mirror_path, f.sha256);
        }
        println!();
    }
    println!("Columns:");
    for c in COMMON_COLUMNS.iter().chain(extra_columns(set)) {
        println!("  {:<18} {}", c.name, c.doc);
    }
    println!();
    print!("{}", notes(set));
    Ok(())
}

fn export(args: &ExportArgs) -> Result<()> {
    let set = args.set;
    let options = LoadOptions {
        magbig_feminine: args.feminine.clone(),
        cultext2i_translations: args.translations.clone(),
        cultext2i: culturelens_prompts::cultext2i::Options {
            gibberish_length: args.gibberish_length,
            seed: args.seed,
        },
    };
    let mut table = load_set(set, &args.filter.languages, args.mirror.clone(), &options)?;
    if args.filter.is_active() {
        let keep = args.filter.keep(&format!("the {set} prompt set"), &table.to_metadata())?;
        let mut rows: Vec<Option<_>> = std::mem::take(&mut table.rows).into_iter().map(Some).collect();
        table.rows = keep.iter().map(|&i| rows[i].take().expect("kept once")).collect();
    }
    table.write(&args.out).with_context(|| format!("writing {}", args.out.display()))?;
    let mut provenance = Provenance::new("prompts export", args);
    for path in [&args.feminine, &args.translations].into_iter().flatten() {
        provenance.input(path)?;
    }
    provenance.prompt_sets([set.to_string()]).seed("seed", args.seed).write_beside(&args.out)?;
    let counts: Vec<String> = table.counts_by_language().iter().map(|(l, n)| format!("{l} {n}")).collect();
    println!(
        "wrote {} {set} prompts ({} languages: {}) to {}",
        table.len(),
        counts.len(),
        counts.join(", "),
        args.out.display()
    );
    Ok(())
}
