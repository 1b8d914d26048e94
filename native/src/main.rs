//! `culturelens`: the command-line front end. Parses arguments, picks the Burn device and hands
//! each subcommand to its module in `cmd/`. All metric and model code lives in the shared crates
//! (`culturelens-metrics`, `-compute`, `-models`, `-diffusion`, `-faces`).

mod cmd;
mod device;
mod embeddings;
mod encode;
mod error_chain;
mod examples;
mod figure_inputs;
mod flags;
use culturelens_models_io::hub;
mod input;
mod model_name;
mod output;
mod prompt_sets;
mod provenance;
mod timing;
mod uncertainty;
mod work;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[global_allocator]
static ALLOCATOR: culturelens_alloc::HugePageHint = culturelens_alloc::HugePageHint;

/// Measure how the language of a prompt, rather than its meaning, shapes text-to-image outputs.
#[derive(Parser)]
#[command(name = "culturelens", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// One value, parsed once at start-up: boxing the larger argument structs would save nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    Sos(cmd::sos::SosArgs),
    Demo(cmd::sos::DemoArgs),
    Vendi(cmd::vendi::VendiArgs),
    Embed(cmd::embed::EmbedArgs),
    EmbedText(cmd::embed::EmbedTextArgs),
    Generate(cmd::generate::GenerateArgs),
    ImportWeights(cmd::import::ImportArgs),
    Bundle(cmd::bundle::BundleArgs),
    DemoBundle(cmd::bundle::DemoBundleArgs),
    Prompts(cmd::prompts::PromptsArgs),
    Magbig(cmd::magbig::MagbigArgs),
    Agreement(cmd::agreement::AgreementArgs),
    Colour(cmd::colour::ColourArgs),
    Captions(cmd::captions::CaptionsArgs),
    Tokens(cmd::tokens::TokensArgs),
    Cultext2i(cmd::cultext2i::Cultext2iArgs),
    Validate(cmd::validate::ValidateArgs),
    Figures(cmd::figures::FiguresArgs),
    Report(cmd::report::ReportArgs),
    Merge(cmd::merge::MergeArgs),
    Slurm(cmd::slurm::SlurmArgs),
    Classify(cmd::classify::ClassifyArgs),
    Clipscore(cmd::clipscore::ClipscoreArgs),
    Quality(cmd::quality::QualityArgs),
}

fn main() {
    culturelens_alloc::keep_freed_blocks();
    let cli = parse();
    let result = match &cli.command {
        Command::Sos(args) => cmd::sos::run(args),
        Command::Demo(args) => cmd::sos::run_demo(args),
        Command::Vendi(args) => cmd::vendi::run(args),
        Command::Embed(args) => cmd::embed::run(args),
        Command::EmbedText(args) => cmd::embed::run_text(args),
        Command::Generate(args) => cmd::generate::run(args),
        Command::ImportWeights(args) => cmd::import::run(args),
        Command::Bundle(args) => cmd::bundle::run(args),
        Command::DemoBundle(args) => cmd::bundle::run_demo(args),
        Command::Prompts(args) => cmd::prompts::run(args),
        Command::Magbig(args) => cmd::magbig::run(args),
        Command::Agreement(args) => cmd::agreement::run(args),
        Command::Colour(args) => cmd::colour::run(args),
        Command::Captions(args) => cmd::captions::run(args),
        Command::Tokens(args) => cmd::tokens::run(args),
        Command::Cultext2i(args) => cmd::cultext2i::run(args),
        Command::Validate(args) => cmd::validate::run(args),
        Command::Figures(args) => cmd::figures::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Merge(args) => cmd::merge::run(args),
        Command::Slurm(args) => cmd::slurm::run(args),
        Command::Classify(args) => cmd::classify::run(args),
        Command::Clipscore(args) => cmd::clipscore::run(args),
        Command::Quality(args) => cmd::quality::run(args),
    };
    if let Err(err) = result {
        eprintln!("error: {}", error_chain::render(&err));
        std::process::exit(1);
    }
}

/// The command line, parsed by [`Cli`] with the subcommands' examples in their help and the old
/// spellings of renamed flags (a deprecation note each on stderr).
fn parse() -> Cli {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let matches = command().get_matches_from(&args);
    for note in flags::old_spelling_notes(&args, &matches) {
        eprintln!("{note}");
    }
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// The whole command tree as it parses: [`Cli`], its examples and the old flag spellings.
fn command() -> clap::Command {
    flags::with_old_spellings(examples::with_examples(Cli::command()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subcommand has examples, each parses as the command it shows, and `--help` prints
    /// them.
    #[test]
    fn every_subcommand_has_examples_that_parse() {
        let command = command();
        let names: Vec<&str> = command.get_subcommands().map(|c| c.get_name()).collect();
        let with: Vec<&str> = examples::EXAMPLES.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, with, "one entry per subcommand, in order");
        for (name, lines) in examples::EXAMPLES {
            assert!(!lines.is_empty(), "{name}");
            for line in *lines {
                let argv: Vec<&str> = line.split_whitespace().collect();
                assert_eq!(argv[..2], ["culturelens", *name], "{line}");
                let matches =
                    command.clone().try_get_matches_from(&argv).unwrap_or_else(|e| panic!("{line}: {e}"));
                Cli::from_arg_matches(&matches).unwrap_or_else(|e| panic!("{line}: {e}"));
            }
            let mut sub = command.clone();
            let help = sub.find_subcommand_mut(name).unwrap().render_long_help().to_string();
            assert!(help.contains(&format!("Examples:\n  {}", lines[0])), "{name}: {help}");
        }
    }
}
