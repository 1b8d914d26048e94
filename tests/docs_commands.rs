//! The reference pages in `docs/` and the binary's `--help` name the same commands (issue 33,
//! "Done when"): every command of `culturelens --help`, and every subcommand of each command's own
//! `--help` (e.g. `prompts list`), is shown in `docs/` as code (`culturelens CMD [SUB]` in a code
//! block or an inline code span); every `culturelens WORD` shown as code in `docs/` is a command
//! of `--help` (and a following word, where the command has subcommands and the word is not an
//! argument, one of them). Also: the README links every page of `docs/`, and every relative link
//! of the README and the pages points at a file that exists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use culturelens_testkit::root;

use crate::common::Cli;

/// The names under `Commands:` of a clap help text, without clap's own `help`.
fn commands_of(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim_end() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// Every command of the binary, each with its subcommands (empty for most), read from `--help`.
fn help_commands() -> BTreeMap<String, BTreeSet<String>> {
    let top = Cli::from_args(&["--help"]).run_ok().stdout;
    let commands = commands_of(&top);
    assert!(commands.len() >= 20 && commands.iter().any(|c| c == "sos"), "{top}");
    commands
        .into_iter()
        .map(|c| {
            let subs: BTreeSet<String> =
                commands_of(&Cli::from_args(&[c.as_str(), "--help"]).run_ok().stdout).into_iter().collect();
            for s in &subs {
                Cli::from_args(&[c.as_str(), s.as_str(), "--help"]).run_ok();
            }
            (c, subs)
        })
        .collect()
}

/// The code of a Markdown text: the lines of its fenced blocks (without shell comments) and its
/// inline code spans.
fn code_of(markdown: &str) -> Vec<String> {
    let mut code = Vec::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if fenced {
            // Shell comments are prose.
            let command =
                if line.trim_start().starts_with('#') { "" } else { line.split(" # ").next().unwrap() };
            code.push(command.to_string());
        } else {
            code.extend(line.split('`').skip(1).step_by(2).map(str::to_string));
        }
    }
    code
}

/// `(word, next word)` after each `culturelens ` in `code` that is the command's name (not part of
/// a path, a crate name such as `culturelens-fuzz` or `-p culturelens --features`).
fn mentions(code: &str) -> Vec<(String, Option<String>)> {
    let word = |s: &str| -> Option<String> {
        let w: String =
            s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect();
        (w.starts_with(|c: char| c.is_ascii_lowercase())).then_some(w)
    };
    let mut out = Vec::new();
    for (at, _) in code.match_indices("culturelens ") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || "-_/.$".contains(c)) {
            continue;
        }
        if code[..at].trim_end().ends_with("-p") || code[..at].trim_end().ends_with("binstall") {
            continue;
        }
        let rest = &code[at + "culturelens ".len()..];
        let Some(first) = word(rest) else { continue };
        let second = rest[first.len()..].strip_prefix(' ').and_then(word);
        out.push((first, second));
    }
    out
}

fn docs_pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    assert!(pages.len() >= 10, "{pages:?}");
    pages
}

#[test]
fn every_command_of_help_is_in_docs_and_every_command_in_docs_is_in_help() {
    let help = help_commands();
    let mut shown: BTreeSet<String> = BTreeSet::new();
    let mut unknown = Vec::new();
    for page in docs_pages() {
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        for code in code_of(&std::fs::read_to_string(&page).unwrap()) {
            for (command, next) in mentions(&code) {
                let Some(subs) = help.get(&command) else {
                    unknown.push(format!("{name}: `culturelens {command}` in `{code}`"));
                    continue;
                };
                shown.insert(command.clone());
                if let Some(sub) = next.filter(|_| !subs.is_empty()) {
                    if subs.contains(&sub) {
                        shown.insert(format!("{command} {sub}"));
                    } else {
                        unknown.push(format!("{name}: `culturelens {command} {sub}` in `{code}`"));
                    }
                }
            }
        }
    }
    assert!(unknown.is_empty(), "commands in docs/ that `--help` does not list:\n{}", unknown.join("\n"));
    let missing: Vec<String> = help
        .iter()
        .flat_map(|(c, subs)| std::iter::once(c.clone()).chain(subs.iter().map(move |s| format!("{c} {s}"))))
        .filter(|c| !shown.contains(c))
        .collect();
    assert!(missing.is_empty(), "commands of `--help` that no page of docs/ shows as code: {missing:?}");
    println!("{} commands and subcommands, each in --help and in docs/", shown.len());
}

#[test]
fn the_mention_reader_skips_paths_crates_and_prose_words() {
    let m = |s: &str| mentions(s);
    assert_eq!(m("culturelens prompts export sos"), [("prompts".into(), Some("export".into()))]);
    assert_eq!(m("cargo run --release -p culturelens -- demo"), []);
    assert_eq!(m("cargo build -p culturelens --features cuda"), []);
    assert_eq!(m("cargo binstall culturelens"), []);
    assert_eq!(m("target/release/culturelens sos"), []);
    assert_eq!(m("cargo test -p culturelens-fuzz"), []);
    assert_eq!(m("x; culturelens merge --out a b"), [("merge".into(), None)]);
    assert_eq!(
        code_of(
            "a `culturelens sos` b\n```sh\n# culturelens aligns\nculturelens vendi # culturelens x\n```\nculturelens prose"
        ),
        ["culturelens sos", "", "culturelens vendi"]
    );
    assert_eq!(commands_of("Commands:\n  sos   a\n  help  b\n      wrapped\n\nOptions:\n  -h"), ["sos"]);
}

/// The relative link targets (`](TARGET)` without a scheme, before any `#`) of a Markdown text.
fn links(markdown: &str) -> Vec<String> {
    markdown
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .filter(|t| !t.contains("://") && !t.starts_with('#') && !t.starts_with("mailto:"))
        .map(|t| t.split('#').next().unwrap().to_string())
        .collect()
}

#[test]
fn the_readme_links_every_docs_page_and_every_relative_link_resolves() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let linked = links(&readme);
    for page in docs_pages() {
        let rel = page.strip_prefix(root()).unwrap().display().to_string();
        assert!(linked.contains(&rel), "README.md does not link {rel}");
    }
    let mut files: Vec<PathBuf> =
        vec![root().join("README.md"), root().join("ARCHITECTURE.md"), root().join("BENCHMARKS.md")];
    files.extend(docs_pages());
    for file in files {
        let dir = file.parent().unwrap();
        for target in links(&std::fs::read_to_string(&file).unwrap()) {
            assert!(
                Path::new(dir).join(&target).exists(),
                "{}: the link {target} points at nothing",
                file.display()
            );
        }
    }
}
