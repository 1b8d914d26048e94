//! The README's tutorial, run as written, so the documentation cannot drift from the tool.
//!
//! Every ```` ```console ```` block of README.md is a list of steps: a line `$ COMMAND` (continued
//! on the next lines while it ends with `\`) followed by the output it is shown to print. The
//! steps run one after the other in one `bash` process (variables and the working directory carry
//! over), in a scratch folder that stands for the root of a clone: its `tests` is a link to the
//! repository's (the committed tiny pipeline and CLIP fixtures the tutorial names), and its
//! `web/dist` is the built browser app when `web/dist` exists, else a stand-in folder
//! (`index.html`, `assets/app.wasm`) as in `tests/report_cli.rs`, since `report` only copies the
//! app. The built `culturelens` is first on `PATH`; the prompt sets are read from the test kit's
//! upstream mirror (`CULTURELENS_DATA_MIRROR`, which the tutorial mentions as `--mirror`) with a
//! fresh `CULTURELENS_CACHE`.
//!
//! Output is compared line by line (stdout and stderr together, as a terminal shows them;
//! trailing spaces ignored): `[..]` in a shown line matches any text, a shown line `...` any
//! number of lines, and everything else must be printed exactly. Every step must exit 0.

use std::path::Path;
use std::process::{Command, Stdio};

use culturelens_testkit::{root, upstream_mirror};

/// One `$ COMMAND` of a console block and the output shown under it.
#[derive(Debug)]
struct Step {
    /// The README line of the `$`.
    line: usize,
    command: String,
    expected: Vec<String>,
}

/// The steps of every console block of `markdown`, in order; also checks that the `## Tutorial`
/// section holds no other kind of code block (every command a reader is told to run is run here).
fn console_steps(markdown: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut in_console = false;
    let mut in_other = false;
    let mut in_tutorial = false;
    let mut continued = false;
    for (i, line) in markdown.lines().enumerate() {
        let n = i + 1;
        if !in_console && !in_other && line.starts_with("## ") {
            in_tutorial = line.starts_with("## Tutorial");
        }
        if in_console {
            if line.trim_end() == "```" {
                in_console = false;
                assert!(!continued, "README.md:{n}: the block ends inside a command continued with \\");
            } else if continued {
                let step = steps.last_mut().expect("a continued command");
                step.command.push('\n');
                step.command.push_str(line);
                continued = line.ends_with('\\');
            } else if let Some(command) = line.strip_prefix("$ ") {
                steps.push(Step { line: n, command: command.to_string(), expected: Vec::new() });
                continued = command.ends_with('\\');
            } else {
                let step = steps.last_mut().unwrap_or_else(|| {
                    panic!("README.md:{n}: output before the first `$ ` line of a console block")
                });
                step.expected.push(line.trim_end().to_string());
            }
        } else if in_other {
            in_other = line.trim_end() != "```";
        } else if line.trim_end() == "```console" {
            in_console = true;
        } else if line.starts_with("```") {
            assert!(
                !in_tutorial,
                "README.md:{n}: a `{line}` block in the tutorial: use console blocks, which CI runs"
            );
            in_other = true;
        }
    }
    steps
}

/// Whether `actual` matches the shown line `pattern`, `[..]` matching any text.
fn line_matches(pattern: &str, actual: &str) -> bool {
    let parts: Vec<&str> = pattern.split("[..]").collect();
    if parts.len() == 1 {
        return pattern == actual;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !actual.starts_with(first) || actual.len() < first.len() + last.len() || !actual.ends_with(last) {
        return false;
    }
    let mut rest = &actual[first.len()..actual.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// Whether the lines `actual` match the shown lines `expected` (`...` matching any lines).
fn lines_match(expected: &[String], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((first, rest)) if first == "..." => {
            (0..=actual.len()).any(|skip| lines_match(rest, &actual[skip..]))
        }
        Some((first, rest)) => {
            !actual.is_empty() && line_matches(first, actual[0]) && lines_match(rest, &actual[1..])
        }
    }
}

/// Marker line the script prints after each step: `MARK INDEX EXIT`.
const MARK: &str = "@@readme-tutorial-step";

#[test]
fn the_matcher_takes_wildcards_and_nothing_else() {
    assert!(line_matches("wrote 36 rows", "wrote 36 rows"));
    assert!(!line_matches("wrote 36 rows", "wrote 37 rows"));
    assert!(line_matches("loaded clip in [..]", "loaded clip in 17.3ms"));
    assert!(line_matches("a [..] c [..] e", "a b c d e"));
    assert!(!line_matches("a [..] c [..] e", "a b d e"));
    assert!(!line_matches("ab[..]ba", "aba"));
    let shown = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(lines_match(&shown(&["...", "done"]), &["x", "y", "done"]));
    assert!(lines_match(&shown(&["...", "done"]), &["done"]));
    assert!(!lines_match(&shown(&["done"]), &["x", "done"]));
    assert!(!lines_match(&shown(&["x", "..."]), &["y"]));
    assert!(!lines_match(&shown(&[]), &["unexpected output"]));
}

#[test]
fn console_blocks_are_read_as_steps_with_their_output() {
    let md = "# t\n\n## Tutorial\n\n```console\n$ A=1\n$ echo a \\\n  b\na b\n```\n\n## Other\n\n```sh\nnot run\n```\n";
    let steps = console_steps(md);
    assert_eq!(steps.len(), 2);
    assert_eq!((steps[0].line, steps[0].command.as_str()), (6, "A=1"));
    assert_eq!(steps[1].command, "echo a \\\n  b");
    assert_eq!(steps[1].expected, ["a b"]);
    let err = std::panic::catch_unwind(|| console_steps("## Tutorial\n\n```sh\nls\n```\n")).unwrap_err();
    assert!(err.downcast_ref::<String>().unwrap().contains("use console blocks"));
}

#[test]
fn the_readme_is_short_and_its_tutorial_runs_as_written() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; the reference belongs in docs/ (issue 33: at most 250)"
    );
    let steps = console_steps(&readme);
    for stage in
        ["prompts export", "generate", "embed", "sos", "vendi", "magbig", "figures", "report", "bundle"]
    {
        assert!(
            steps.iter().any(|s| s.command.starts_with(&format!("culturelens {stage} "))),
            "the tutorial has no `culturelens {stage}` step"
        );
    }

    let scratch = tempfile::tempdir().unwrap();
    let work = scratch.path().join("clone");
    std::fs::create_dir_all(work.join("web")).unwrap();
    std::os::unix::fs::symlink(root().join("tests"), work.join("tests")).unwrap();
    let app = root().join("web/dist");
    if app.join("index.html").is_file() {
        std::os::unix::fs::symlink(&app, work.join("web/dist")).unwrap();
    } else {
        std::fs::create_dir_all(work.join("web/dist/assets")).unwrap();
        std::fs::write(work.join("web/dist/index.html"), "<!doctype html><title>app</title>").unwrap();
        std::fs::write(work.join("web/dist/assets/app.wasm"), b"\0asm").unwrap();
    }

    let mut script = String::from("set -u\n");
    for (i, step) in steps.iter().enumerate() {
        script.push_str(&step.command);
        script.push_str(&format!(
            "\nstatus=$?; printf '\\n{MARK} {i} %d\\n' \"$status\"; [ \"$status\" = 0 ] || exit 0\n"
        ));
    }
    let script_path = scratch.path().join("tutorial.sh");
    std::fs::write(&script_path, script).unwrap();
    let log_path = scratch.path().join("tutorial.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_culturelens")).parent().unwrap();
    let path = std::env::join_paths(
        std::iter::once(bin.to_path_buf())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();
    let status = Command::new("bash")
        .arg(&script_path)
        .current_dir(&work)
        .env("PATH", path)
        .env("CULTURELENS_DATA_MIRROR", upstream_mirror())
        .env("CULTURELENS_CACHE", scratch.path().join("cache"))
        .env_remove("CULTURELENS_PROGRESS_EVERY")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .status()
        .unwrap();
    assert!(status.success(), "bash {}: {status}", script_path.display());
    let output = std::fs::read_to_string(&log_path).unwrap();

    let mut lines = output.lines();
    for (i, step) in steps.iter().enumerate() {
        let mut printed: Vec<&str> = Vec::new();
        let code = loop {
            let Some(line) = lines.next() else {
                panic!(
                    "README.md:{}: `{}` printed no end marker; output:\n{}",
                    step.line,
                    step.command,
                    printed.join("\n")
                )
            };
            if let Some(rest) = line.strip_prefix(MARK) {
                let (index, code) = rest.trim().split_once(' ').unwrap();
                assert_eq!(index.parse::<usize>().unwrap(), i);
                break code.parse::<i32>().unwrap();
            }
            printed.push(line.trim_end());
        };
        // The marker starts on a line of its own: drop the empty line it added.
        if printed.last() == Some(&"") {
            printed.pop();
        }
        println!("README.md:{}: $ {}\n{}", step.line, step.command, printed.join("\n"));
        assert_eq!(
            code,
            0,
            "README.md:{}: `{}` exited {code}:\n{}",
            step.line,
            step.command,
            printed.join("\n")
        );
        assert!(
            lines_match(&step.expected, &printed),
            "README.md:{}: `{}` printed\n{}\n\nbut the README shows\n{}",
            step.line,
            step.command,
            printed.join("\n"),
            step.expected.join("\n")
        );
    }
}
