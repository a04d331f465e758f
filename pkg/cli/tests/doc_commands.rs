//! Every command a reader can copy out of the docs (`README.md`, `docs/`)
//! either runs in a test, or names things that exist.
//!
//! A `sh` block marked `<!-- tested ... -->` is run by the test that names
//! that marker (the tutorial's blocks; this file checks that such a test
//! exists). Every other block's commands are checked here: the scripts they
//! run exist, `cargo` names packages, examples, binaries and tests that
//! exist (a test filter matches a test), and every `--flag` given to one of
//! the project's own commands (`kinject`, a `cargo run` binary or example
//! given arguments, `hack/new-kind.sh`) appears in that command's `--help`. `kubectl` and `cd`
//! are other people's commands and pass as written.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

// Running cargo from a test without the test's own environment.
#[path = "../../../codegen/tests/integration/copies/mod.rs"]
mod copies;

/// One command line of a doc's `sh` block: where it stands and its words,
/// without `NAME=value` prefixes, a trailing `&` and comments.
struct DocCommand {
    place: String,
    words: Vec<String>,
}

/// The `sh` blocks of `text`: each with the marker above it, if any, and its
/// command lines (a line continued with `\` joined to the next).
fn sh_blocks(file: &str, text: &str) -> Vec<(Option<String>, Vec<DocCommand>)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != "```sh" {
            i += 1;
            continue;
        }
        let marker = lines[..i]
            .iter()
            .rev()
            .find(|line| !line.trim().is_empty())
            .map(|line| line.trim())
            .filter(|line| line.starts_with("<!-- tested"))
            .map(str::to_owned);
        let mut commands = Vec::new();
        let mut pending = String::new();
        let mut start = 0;
        i += 1;
        while i < lines.len() && lines[i].trim() != "```" {
            let line = lines[i].trim();
            if pending.is_empty() {
                start = i + 1;
            }
            match line.strip_suffix('\\') {
                Some(continued) => pending.push_str(continued),
                None => {
                    pending.push_str(line);
                    let words = command_words(&pending);
                    if !words.is_empty() {
                        commands.push(DocCommand {
                            place: format!("{file}:{start}"),
                            words,
                        });
                    }
                    pending.clear();
                }
            }
            i += 1;
        }
        blocks.push((marker, commands));
        i += 1;
    }
    blocks
}

/// The words of a command line, without a comment, environment assignments
/// in front and a trailing `&`.
fn command_words(line: &str) -> Vec<String> {
    let code = match line.find(" #") {
        Some(at) => &line[..at],
        None if line.trim_start().starts_with('#') => "",
        None => line,
    };
    let mut words: Vec<String> = code.split_whitespace().map(str::to_owned).collect();
    while words
        .first()
        .is_some_and(|w| w.contains('=') && !w.starts_with('-'))
    {
        words.remove(0);
    }
    if words.last().is_some_and(|w| w == "&") {
        words.pop();
    }
    words
}

/// A package's targets, as (kind, name): `("example", "local")`.
type Targets = Vec<(String, String)>;

/// The workspace's packages and their targets, by name.
fn packages(root: &Path) -> BTreeMap<String, Targets> {
    copies::own_packages(root)["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| {
            let targets = package["targets"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|target| {
                    let name = target["name"].as_str().unwrap().to_owned();
                    target["kind"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(move |kind| (kind.as_str().unwrap().to_owned(), name.clone()))
                })
                .collect();
            (package["name"].as_str().unwrap().to_owned(), targets)
        })
        .collect()
}

/// What a program prints for `--help` after the longest run of `words`
/// (its subcommands) it accepts, with the words it took.
fn help_of(program: &dyn Fn() -> Command, words: &[String]) -> Result<(String, usize), String> {
    let leading = words.iter().take_while(|w| !w.starts_with('-')).count();
    for taken in (0..=leading).rev() {
        let out = program().args(&words[..taken]).arg("--help").output().unwrap();
        if out.status.success() {
            return Ok((String::from_utf8_lossy(&out.stdout).into_owned(), taken));
        }
    }
    let out = program().arg("--help").output().unwrap();
    Err(String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The flags of `words` the help text does not mention.
fn unknown_flags(help: &str, words: &[String]) -> Vec<String> {
    words
        .iter()
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.split('=').next().unwrap_or(w).to_owned())
        .filter(|flag| {
            !help
                .split(|c: char| !(c.is_alphanumeric() || c == '-'))
                .any(|word| word == flag)
        })
        .collect()
}

/// The value after `flag` in `words`.
fn value_of<'a>(words: &'a [String], flags: &[&str]) -> Option<&'a str> {
    let at = words.iter().position(|w| flags.contains(&w.as_str()))?;
    words.get(at + 1).map(String::as_str)
}

/// `cargo run -p <package> [--example|--bin <target>] --` with `args`, built
/// as the tests' build is (never `--release`: a flag is the same there).
fn cargo_run(root: &Path, words: &[String]) -> impl Fn() -> Command {
    let mut base = vec!["run".to_owned(), "--quiet".to_owned(), "--offline".to_owned()];
    for flag in ["-p", "--package", "--example", "--bin"] {
        if let Some(value) = value_of(words, &[flag]) {
            base.extend([flag.to_owned(), value.to_owned()]);
        }
    }
    base.push("--".to_owned());
    let root = root.to_path_buf();
    move || {
        let mut command = Command::new(env!("CARGO"));
        copies::without_test_environment(&mut command)
            .args(&base)
            .current_dir(&root);
        command
    }
}

/// What is wrong with one `cargo` command, if anything.
fn check_cargo(root: &Path, packages: &BTreeMap<String, Targets>, words: &[String]) -> Vec<String> {
    let (options, after) = match words.iter().position(|w| w == "--") {
        Some(at) => (&words[..at], &words[at + 1..]),
        None => (words, &[][..]),
    };
    let mut problems = Vec::new();
    let Some(package) = value_of(options, &["-p", "--package"]) else {
        return problems;
    };
    let Some(targets) = packages.get(package) else {
        return vec![format!("no package {package} in the workspace")];
    };
    for (flag, kind) in [("--example", "example"), ("--bin", "bin"), ("--test", "test")] {
        if let Some(name) = value_of(options, &[flag])
            && !targets.iter().any(|(k, n)| k == kind && n == name)
        {
            problems.push(format!("{package} has no {kind} {name}"));
        }
    }
    match options.get(1).map(String::as_str) {
        // Only with arguments to check: not every example takes `--help`
        // (a benchmark would run instead).
        Some("run") if !after.is_empty() => {
            let program = cargo_run(root, options);
            match help_of(&program, after) {
                Ok((help, taken)) => problems.extend(
                    unknown_flags(&help, &after[taken..])
                        .into_iter()
                        .map(|flag| format!("`{flag}` is not in the command's --help")),
                ),
                Err(e) => problems.push(format!("its --help failed: {e}")),
            }
        }
        Some("test") => {
            // `cargo test ... <filter> -- <libtest flags>`: the filter must
            // select a test.
            let filter = options
                .iter()
                .skip(2)
                .enumerate()
                .find(|(i, w)| !w.starts_with('-') && !options[1 + *i].starts_with('-'));
            if let (Some((_, filter)), Some(test)) = (filter, value_of(options, &["--test"])) {
                let out = copies::without_test_environment(&mut Command::new(env!("CARGO")))
                    .args([
                        "test",
                        "--quiet",
                        "--offline",
                        "-p",
                        package,
                        "--test",
                        test,
                        "--",
                        "--list",
                    ])
                    .current_dir(root)
                    .output()
                    .unwrap();
                let listed = String::from_utf8_lossy(&out.stdout);
                if !listed.lines().any(|line| line.contains(filter.as_str())) {
                    problems.push(format!("no test of {package}'s {test} matches {filter:?}"));
                }
            }
        }
        _ => {}
    }
    problems
}

#[test]
fn every_command_in_the_docs_is_tested_or_names_what_exists() {
    let root = copies::repo_root();
    let packages = packages(&root);
    let mut docs = vec![root.join("README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    docs.extend(pages);
    let test_sources: String = ["codegen", "pkg", "cmd"]
        .iter()
        .flat_map(|top| rust_files(&root.join(top)))
        .map(|file| std::fs::read_to_string(file).unwrap_or_default())
        .collect();
    let kinject = || Command::new(env!("CARGO_BIN_EXE_kinject"));
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in &docs {
        let name = doc.strip_prefix(&root).unwrap().display().to_string();
        for (marker, commands) in sh_blocks(&name, &std::fs::read_to_string(doc).unwrap()) {
            if let Some(marker) = marker {
                if !test_sources.contains(&format!("\"{marker}\"")) {
                    problems.push(format!("{name}: no test reads the block marked {marker}"));
                }
                continue;
            }
            for command in commands {
                checked += 1;
                let words = &command.words;
                let found = match words[0].as_str() {
                    "cd" | "kubectl" => Vec::new(),
                    "cargo" => check_cargo(&root, &packages, words),
                    "kinject" => match help_of(&kinject, &words[1..]) {
                        Ok((help, taken)) => unknown_flags(&help, &words[1 + taken..])
                            .into_iter()
                            .map(|flag| format!("`{flag}` is not in the command's --help"))
                            .collect(),
                        Err(e) => vec![format!("kinject --help failed: {e}")],
                    },
                    script if script.starts_with("hack/") => check_script(&root, script, &words[1..]),
                    other => vec![format!("{other} is not a command these docs may use")],
                };
                problems.extend(
                    found
                        .into_iter()
                        .map(|p| format!("{}: `{}`: {p}", command.place, words.join(" "))),
                );
            }
        }
    }
    assert!(checked > 10, "only {checked} commands found in {docs:?}");
    assert!(
        problems.is_empty(),
        "commands in the docs that do not hold (fix the command, or mark its block \
         `<!-- tested in <test file> -->` and run it from that test):\n{}",
        problems.join("\n")
    );
}

/// `mdbook build` renders `docs/` (book.toml's `src`) as a book: its
/// `SUMMARY.md` links every page of `docs/` once, and only pages that exist,
/// so a new page cannot be left out of the book.
#[test]
fn the_books_summary_lists_every_page_of_docs_once() {
    let root = copies::repo_root();
    let book = std::fs::read_to_string(root.join("book.toml")).unwrap();
    assert!(
        book.lines().any(|line| line.replace(' ', "") == "src=\"docs\""),
        "book.toml must take its pages from docs/:\n{book}"
    );
    let summary = std::fs::read_to_string(root.join("docs/SUMMARY.md")).unwrap();
    let mut linked: Vec<String> = summary
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("- ["))
        .filter_map(|item| item.split_once("](")?.1.strip_suffix(')'))
        .map(str::to_owned)
        .collect();
    linked.sort();
    let mut pages: Vec<String> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md") && name != "SUMMARY.md")
        .collect();
    pages.sort();
    assert_eq!(linked, pages, "docs/SUMMARY.md must link each page of docs/ once");
}

/// A `hack/` script exists (here, or in the project `kinject init` writes),
/// and the flags given to `new-kind.sh` are the generator's.
fn check_script(root: &Path, script: &str, args: &[String]) -> Vec<String> {
    let here = root.join(script);
    let in_a_project = ["own", "shared"].iter().any(|template| {
        root.join("pkg/cli/template")
            .join(template)
            .join(script)
            .is_file()
    });
    if !here.is_file() && !in_a_project {
        return vec![format!(
            "{script} exists neither here nor in a project `kinject init` writes"
        )];
    }
    let subcommand = match script {
        "hack/new-kind.sh" => "new-kind",
        "hack/drop-version.sh" => "drop-version",
        _ => return Vec::new(),
    };
    let generator = || {
        let mut command = Command::new(env!("CARGO"));
        copies::without_test_environment(&mut command)
            .args(["run", "--quiet", "--offline", "-p", "codegen", "--", subcommand])
            .current_dir(root);
        command
    };
    match help_of(&generator, &[]) {
        Ok((help, _)) => unknown_flags(&help, args)
            .into_iter()
            .map(|flag| format!("`{flag}` is not in `codegen {subcommand} --help`"))
            .collect(),
        Err(e) => vec![format!("codegen {subcommand} --help failed: {e}")],
    }
}

/// The `.rs` files under `dir`, build output left out.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && !path.ends_with("target") {
            found.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
    found
}

#[test]
fn the_doc_reader_takes_words_and_markers_as_written() {
    let text = "<!-- tested in x.rs -->\n```sh\nSYSTEM_NAMESPACE=ns cargo run -p a -- \\\n  --flag 1   # why\n```\n\n\
                ```sh\n# a comment line\nkinject registry &\n```\n";
    let blocks = sh_blocks("d.md", text);
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0].0.as_deref(), Some("<!-- tested in x.rs -->"));
    assert_eq!(
        blocks[0].1[0].words,
        ["cargo", "run", "-p", "a", "--", "--flag", "1"]
    );
    assert_eq!(blocks[0].1[0].place, "d.md:3");
    assert_eq!(blocks[1].0, None);
    assert_eq!(blocks[1].1[0].words, ["kinject", "registry"]);
    assert_eq!(
        unknown_flags(
            "  --repo <REPO>  where\n  --kubeconfig",
            &["--repo".into(), "--nope=1".into()]
        ),
        ["--nope"]
    );
}
