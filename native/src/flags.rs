//! One meaning per flag name across all subcommands (issue 33). A flag renamed so that its name
//! means the same thing everywhere keeps its old spelling as a hidden alias, and using the old
//! spelling prints a one-line deprecation note on stderr. [`RENAMED`] is the one list of them;
//! the test below walks every subcommand's flags and requires each name to take one kind of value.

use std::ffi::OsString;

/// A flag of `command` renamed from `--old` to `--new`.
pub struct Renamed {
    pub command: &'static str,
    pub old: &'static str,
    pub new: &'static str,
}

/// Every renamed flag, with why its old name had two meanings.
pub const RENAMED: &[Renamed] = &[
    // `--weights` is a model folder in embed, classify, tokens, …
    Renamed { command: "vendi", old: "weights", new: "kernel-weights" },
    // `--batch` is items per model call; CUBE's protocol batch is a sample size.
    Renamed { command: "vendi", old: "batch-size", new: "protocol-batch" },
    // `--group-by` is one column in vendi; colour's groups are lists, as `--value-by`.
    Renamed { command: "colour", old: "group-by", new: "palette-by" },
    // `--images` are image files in embed, bundle, colour, classify, clipscore, quality.
    Renamed { command: "magbig", old: "images", new: "image-embeddings" },
    Renamed { command: "magbig", old: "texts", new: "text-embeddings" },
    Renamed { command: "cultext2i", old: "images", new: "image-embeddings" },
    Renamed { command: "cultext2i", old: "texts", new: "text-embeddings" },
    // `--sos` is a result file in figures; validate's predictors are columns.
    Renamed { command: "validate", old: "sos", new: "sos-col" },
    Renamed { command: "validate", old: "clipscore", new: "clipscore-cols" },
    // `--captions` is a captions CSV in captions; clipscore's are columns of its manifest.
    Renamed { command: "clipscore", old: "captions", new: "caption-cols" },
];

/// `command` with each renamed flag's old spelling as a hidden alias. Every subcommand is visited
/// in its order (`mut_subcommand` moves the one it changes to the end).
pub fn with_old_spellings(command: clap::Command) -> clap::Command {
    let names: Vec<String> = command.get_subcommands().map(|s| s.get_name().to_owned()).collect();
    names.iter().fold(command, |command, name| {
        command.mut_subcommand(name, |sub| {
            RENAMED
                .iter()
                .filter(|r| r.command == name)
                .fold(sub, |sub, r| sub.mut_arg(r.new.replace('-', "_"), |arg| arg.alias(r.old)))
        })
    })
}

/// The deprecation notes for the old spellings on the command line `args` (the program name
/// first), one line each: a renamed flag the parse in `matches` set from the command line,
/// written with its old spelling before any `--`.
pub fn old_spelling_notes(args: &[OsString], matches: &clap::ArgMatches) -> Vec<String> {
    let Some((command, sub)) = matches.subcommand() else { return Vec::new() };
    let options = args.iter().skip(2).take_while(|a| *a != "--").filter_map(|a| a.to_str());
    let options: Vec<&str> = options.collect();
    RENAMED
        .iter()
        .filter(|r| r.command == command)
        .filter(|r| sub.value_source(&r.new.replace('-', "_")) == Some(clap::parser::ValueSource::CommandLine))
        .filter(|r| {
            let old = format!("--{}", r.old);
            options.iter().any(|a| *a == old || a.strip_prefix(&old).is_some_and(|rest| rest.starts_with('=')))
        })
        .map(|r| {
            format!(
                "note: `culturelens {command} --{}` is deprecated; it is now --{} (the old spelling still works for now)",
                r.old, r.new
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// What a flag takes: nothing (a switch), or values named by its value name, where value
    /// names that say the same thing are one kind.
    fn kind(arg: &clap::Arg) -> String {
        if !arg.get_action().takes_values() {
            return "switch".into();
        }
        let names: Vec<String> = arg.get_value_names().map_or_else(
            || vec![arg.get_id().as_str().to_uppercase()],
            |v| v.iter().map(|n| n.as_str().to_owned()).collect(),
        );
        let name = names.join(" ");
        match name.as_str() {
            "COL" => "one column".into(),
            "COLS" | "COL1,COL2,..." | "SUR,SEM" => "columns".into(),
            _ => name,
        }
    }

    /// Flags whose value is a path of a kind that differs by command within one meaning: the
    /// output (a file or a folder), the images (a folder, a manifest CSV or image files).
    const PATH_KINDS: &[(&str, &[&str])] = &[
        ("out", &["FILE", "DIR", "FILE|DIR", "SITE"]),
        ("images", &["DIR|CSV|FILE...", "DIR|CSV", "CSV", "DIR"]),
    ];

    #[test]
    fn every_flag_name_takes_one_kind_of_value() {
        let command = crate::command();
        let mut uses: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        for sub in command.get_subcommands() {
            for arg in sub.get_arguments().filter(|a| a.get_long().is_some() && !a.is_hide_set()) {
                let long = arg.get_long().unwrap().to_owned();
                let mut kind = kind(arg);
                if let Some((_, kinds)) = PATH_KINDS.iter().find(|(name, _)| *name == long) {
                    assert!(
                        kinds.contains(&kind.as_str()),
                        "{} --{long} <{kind}>: not one of {kinds:?}",
                        sub.get_name()
                    );
                    kind = format!("{long} path");
                }
                uses.entry(long).or_default().entry(kind).or_default().push(sub.get_name().to_owned());
            }
        }
        let twice: Vec<String> = uses
            .iter()
            .filter(|(_, kinds)| kinds.len() > 1)
            .map(|(long, kinds)| format!("--{long}: {kinds:?}"))
            .collect();
        assert!(twice.is_empty(), "flags with two meanings:\n{}", twice.join("\n"));
    }

    #[test]
    fn old_spellings_parse_as_the_new_names_and_are_noted() {
        let command = crate::command();
        for r in RENAMED {
            let sub = command.find_subcommand(r.command).unwrap();
            let arg = sub
                .get_arguments()
                .find(|a| a.get_long() == Some(r.new))
                .unwrap_or_else(|| panic!("{} has no --{}", r.command, r.new));
            assert!(
                arg.get_all_aliases().unwrap_or_default().contains(&r.old),
                "--{} aliases --{}",
                r.new,
                r.old
            );
            assert!(
                sub.get_arguments().all(|a| a.get_long() != Some(r.old)),
                "{}: --{} is still a flag of its own",
                r.command,
                r.old
            );
        }
        // An example line with an old spelling: parses, and is noted once.
        let line = ["culturelens", "vendi", "--meta", "m.csv", "--kernel", "categorical", "--columns", "a"];
        let mut args: Vec<OsString> = line.iter().map(OsString::from).collect();
        args.extend(["--weights", "1", "--out", "v.json"].map(OsString::from));
        let matches = command.clone().try_get_matches_from(&args).unwrap();
        let notes = old_spelling_notes(&args, &matches);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("--weights") && notes[0].contains("--kernel-weights"), "{}", notes[0]);
        let vendi = matches.subcommand_matches("vendi").unwrap();
        assert_eq!(vendi.get_many::<f64>("kernel_weights").unwrap().copied().collect::<Vec<_>>(), [1.0]);
        // The new spelling: no note.
        args[8] = "--kernel-weights".into();
        let matches = command.try_get_matches_from(&args).unwrap();
        assert!(old_spelling_notes(&args, &matches).is_empty());
    }
}
