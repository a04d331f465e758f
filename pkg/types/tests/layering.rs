#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]
#![allow(
    clippy::too_many_lines,
    reason = "the path reader is one scan over the source; a test helper"
)]

//! The crate layering docs/architecture.md promises: API types and the derive stay free of
//! I/O and code-formatting crates, so depending on them is cheap.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Package names in `package`'s normal dependency tree (build scripts and
/// proc-macros included, dev-dependencies not).
fn normal_dependencies(package: &str) -> BTreeSet<String> {
    let workspace = workspace();
    let output = match Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "--locked",
            "-e",
            "normal",
            "--prefix",
            "none",
            "-p",
            package,
        ])
        .current_dir(&workspace)
        .output()
    {
        Ok(output) => output,
        Err(e) => unreachable!("cargo, which runs this test, could not be run again: {e}"),
    };
    assert!(
        output.status.success(),
        "`cargo tree -p {package}` failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

fn assert_free_of(package: &str, forbidden: &[&str]) {
    let deps = normal_dependencies(package);
    assert!(
        deps.contains(package),
        "cargo tree did not list {package} itself: {deps:?}"
    );
    let found: Vec<&&str> = forbidden.iter().filter(|f| deps.contains(**f)).collect();
    assert!(
        found.is_empty(),
        "{package} depends on {found:?}; its dependencies: {deps:?}"
    );
}

#[test]
fn api_types_need_no_io_crates() {
    let io = [
        "tokio",
        "hyper",
        "axum",
        "tower",
        "clap",
        "prometheus-client",
        "kube",
        "kube-client",
        "kinject-runtime",
    ];
    assert_free_of("kinject-types", &io);
    assert_free_of("apis", &io);
}

#[test]
fn the_derive_needs_no_generator_or_kubernetes_crates() {
    assert_free_of(
        "kinject-macros",
        &[
            "prettyplease",
            "toml",
            "kube",
            "kube-core",
            "k8s-openapi",
            "tokio",
            "kinject-codegen",
        ],
    );
}

/// Inside each framework crate, modules form a tree: at every level of the
/// module hierarchy, no sibling module reaches back into one that depends on
/// it. Cycles are what made types hard to find and easy to write twice, so
/// these tests read every `crate::`, `super::` and `self::` path outside
/// comments, strings and unit tests, and fail on the first cycle, printing it
/// with a line that makes each step.
mod module_tree {
    use std::collections::{BTreeMap, BTreeSet};
    use std::fs;
    use std::path::Path;

    /// A module path inside a crate, `[]` for the crate root.
    type Module = Vec<String>;

    /// Where a module refers to another: file and line.
    type Edges = BTreeMap<(Module, Module), String>;

    /// The module a file under `src` defines: `a/b.rs` and `a/b/mod.rs` are `a::b`.
    fn module_of(src: &Path, file: &Path) -> Module {
        let relative = file.strip_prefix(src).unwrap_or(file);
        let mut parts: Module = relative
            .components()
            .filter_map(|c| c.as_os_str().to_str())
            .map(|s| s.strip_suffix(".rs").unwrap_or(s).to_owned())
            .collect();
        if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
            parts.pop();
        }
        parts
    }

    /// `source` without comments, the contents of string and char literals,
    /// and items behind `#[cfg(test)]`: what the compiled library depends on.
    pub(super) fn code_of(source: &str) -> String {
        let chars: Vec<char> = source.chars().collect();
        let mut out = String::with_capacity(source.len());
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let next = chars.get(i + 1).copied();
            if c == '/' && next == Some('/') {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            } else if c == '/' && next == Some('*') {
                let mut depth = 0;
                while i < chars.len() {
                    if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                        depth += 1;
                        i += 2;
                    } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        if chars[i] == '\n' {
                            out.push('\n');
                        }
                        i += 1;
                    }
                }
            } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&chars, i) {
                // A raw string: r"...", r#"..."#.
                let mut j = i + 1;
                let mut hashes = 0;
                while chars.get(j) == Some(&'#') {
                    hashes += 1;
                    j += 1;
                }
                if chars.get(j) != Some(&'"') {
                    out.push(c);
                    i += 1;
                    continue;
                }
                j += 1;
                while j < chars.len() {
                    if chars[j] == '"' && (0..hashes).all(|k| chars.get(j + 1 + k) == Some(&'#')) {
                        j += 1 + hashes;
                        break;
                    }
                    if chars[j] == '\n' {
                        out.push('\n');
                    }
                    j += 1;
                }
                out.push_str("\"\"");
                i = j;
            } else if c == '"' {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    if chars.get(i) == Some(&'\n') {
                        out.push('\n');
                    }
                    i += 1;
                }
                out.push_str("\"\"");
                i += 1;
            } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
                out.push_str("' '");
                i += 3;
            } else if c == '\'' && next == Some('\\') {
                // An escaped char literal: '\n', '\'', '\u{..}'.
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                out.push_str("' '");
                i = j + 1;
            } else {
                out.push(c);
                i += 1;
            }
        }
        drop_test_items(&out)
    }

    fn ident_before(chars: &[char], at: usize) -> bool {
        at > 0 && (chars[at - 1].is_alphanumeric() || chars[at - 1] == '_')
    }

    /// Blanks the item after each `#[cfg(test)]`, keeping line numbers.
    fn drop_test_items(code: &str) -> String {
        let mut out = String::with_capacity(code.len());
        let mut rest = code;
        while let Some(at) = rest.find("#[cfg(test)]") {
            out.push_str(&rest[..at]);
            let item = &rest[at..];
            // The item ends at its closing brace, or at `;` for `mod tests;`.
            let mut depth = 0usize;
            let mut end = item.len();
            for (i, ch) in item.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            end = i + 1;
                            break;
                        }
                    }
                    ';' if depth == 0 => {
                        end = i + 1;
                        break;
                    }
                    _ => {}
                }
            }
            out.extend(item[..end].chars().filter(|c| *c == '\n'));
            rest = &item[end..];
        }
        out.push_str(rest);
        out
    }

    /// Every path that starts with `crate`, `super` or `self` in `code`, with
    /// its line (1-based): `use` trees are expanded (`use crate::{a, b::{c}}`
    /// gives `crate::a` and `crate::b::c`).
    pub(super) fn paths(code: &str) -> Vec<(usize, Vec<String>)> {
        let tokens = tokenize(code);
        let mut found = Vec::new();
        let mut i = 0;
        while i < tokens.len() {
            let (line, word) = &tokens[i];
            let starts_path = matches!(word.as_str(), "crate" | "super" | "self")
                && tokens.get(i + 1).is_some_and(|(_, t)| t == "::")
                && (i == 0 || tokens[i - 1].1 != "::");
            if !starts_path {
                i += 1;
                continue;
            }
            let mut prefix = vec![word.clone()];
            let mut j = i + 1;
            while tokens.get(j).is_some_and(|(_, t)| t == "::") {
                match tokens.get(j + 1) {
                    Some((_, t)) if t == "{" => {
                        let (trees, after) = use_group(&tokens, j + 2);
                        for tree in trees {
                            let mut full = prefix.clone();
                            full.extend(tree);
                            found.push((*line, full));
                        }
                        j = after;
                        prefix.clear();
                        break;
                    }
                    Some((_, t)) if is_ident(t) || t == "*" => {
                        prefix.push(t.clone());
                        j += 2;
                    }
                    _ => break,
                }
            }
            if !prefix.is_empty() {
                found.push((*line, prefix));
            }
            i = j.max(i + 1);
        }
        found
    }

    /// The paths of a `{ ... }` group starting after its `{`, and the index
    /// after its `}`.
    fn use_group(tokens: &[(usize, String)], mut i: usize) -> (Vec<Vec<String>>, usize) {
        let mut trees = Vec::new();
        let mut current: Vec<String> = Vec::new();
        while i < tokens.len() {
            let t = tokens[i].1.as_str();
            match t {
                "}" => {
                    if !current.is_empty() {
                        trees.push(std::mem::take(&mut current));
                    }
                    return (trees, i + 1);
                }
                "," => {
                    if !current.is_empty() {
                        trees.push(std::mem::take(&mut current));
                    }
                    i += 1;
                }
                "{" => {
                    let (inner, after) = use_group(tokens, i + 1);
                    for tree in inner {
                        let mut full = current.clone();
                        full.extend(tree);
                        trees.push(full);
                    }
                    current.clear();
                    i = after;
                }
                "::" => i += 1,
                "as" => {
                    // `a as b`: the alias is not part of the path.
                    i += 2;
                }
                _ => {
                    current.push(t.to_owned());
                    i += 1;
                }
            }
        }
        (trees, i)
    }

    fn is_ident(t: &str) -> bool {
        t.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
    }

    fn tokenize(code: &str) -> Vec<(usize, String)> {
        let mut tokens = Vec::new();
        for (n, line) in code.lines().enumerate() {
            let chars: Vec<char> = line.chars().collect();
            let mut i = 0;
            while i < chars.len() {
                let c = chars[i];
                if c.is_alphanumeric() || c == '_' {
                    let start = i;
                    while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                        i += 1;
                    }
                    tokens.push((n + 1, chars[start..i].iter().collect()));
                } else if c == ':' && chars.get(i + 1) == Some(&':') {
                    tokens.push((n + 1, "::".to_owned()));
                    i += 2;
                } else if c.is_whitespace() {
                    i += 1;
                } else {
                    tokens.push((n + 1, c.to_string()));
                    i += 1;
                }
            }
        }
        tokens
    }

    /// The module `path` (written in `from`) names: the longest prefix that
    /// is a module of the crate.
    fn resolve(from: &Module, path: &[String], modules: &BTreeSet<Module>) -> Option<Module> {
        let mut base: Module = Vec::new();
        let mut rest = path;
        match path.first().map(String::as_str) {
            Some("crate") => rest = &path[1..],
            Some("self") => {
                base = from.clone();
                rest = &path[1..];
            }
            Some("super") => {
                base = from.clone();
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
            }
            _ => return None,
        }
        let mut target = base;
        for part in rest {
            let mut longer = target.clone();
            longer.push(part.clone());
            if modules.contains(&longer) {
                target = longer;
            } else {
                break;
            }
        }
        Some(target)
    }

    /// Module-to-module references of the crate at `dir`, each with the
    /// first place that makes it.
    fn edges(dir: &Path) -> (BTreeSet<Module>, Edges) {
        let src = dir.join("src");
        let mut files = Vec::new();
        // `src/bin/*` are crates of their own.
        let own_crate = |folder: &Path| {
            !(folder.file_name().is_some_and(|n| n == "bin") && folder.parent() == Some(&*src))
        };
        let is_rust = |file: &Path| file.extension().is_some_and(|ext| ext == "rs");
        super::files_under(&src, &own_crate, &is_rust, &mut files);
        files.sort();
        let modules: BTreeSet<Module> = files.iter().map(|f| module_of(&src, f)).collect();
        let mut edges = Edges::new();
        for file in &files {
            let from = module_of(&src, file);
            let source =
                fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
            for (line, path) in paths(&code_of(&source)) {
                let Some(to) = resolve(&from, &path, &modules) else {
                    continue;
                };
                let place = format!("{}:{line}", file.strip_prefix(dir).unwrap_or(file).display());
                edges.entry((from.clone(), to)).or_insert(place);
            }
        }
        (modules, edges)
    }

    /// The sibling modules an edge joins: below the modules' deepest common
    /// ancestor, the child on each side. `None` when one is inside the other
    /// (a child using its parent's items, or a parent its child's).
    fn siblings(from: &Module, to: &Module) -> Option<(Module, Module)> {
        let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
        if common == from.len() || common == to.len() {
            return None;
        }
        Some((from[..=common].to_vec(), to[..=common].to_vec()))
    }

    /// A cycle among sibling modules, as the steps on it with the place of each.
    pub(super) fn find_cycle(edges: &Edges) -> Option<Vec<(Module, Module, String)>> {
        let mut graph: BTreeMap<Module, BTreeMap<Module, String>> = BTreeMap::new();
        for ((from, to), place) in edges {
            if let Some((a, b)) = siblings(from, to) {
                graph
                    .entry(a)
                    .or_default()
                    .entry(b)
                    .or_insert_with(|| place.clone());
            }
        }
        fn visit(
            node: &Module,
            graph: &BTreeMap<Module, BTreeMap<Module, String>>,
            path: &mut Vec<Module>,
            done: &mut BTreeSet<Module>,
        ) -> Option<Vec<Module>> {
            if let Some(start) = path.iter().position(|n| n == node) {
                let mut cycle = path[start..].to_vec();
                cycle.push(node.clone());
                return Some(cycle);
            }
            if done.contains(node) {
                return None;
            }
            path.push(node.clone());
            for next in graph.get(node).into_iter().flat_map(BTreeMap::keys) {
                if let Some(cycle) = visit(next, graph, path, done) {
                    return Some(cycle);
                }
            }
            path.pop();
            done.insert(node.clone());
            None
        }
        let mut done = BTreeSet::new();
        let cycle = graph
            .keys()
            .find_map(|node| visit(node, &graph, &mut Vec::new(), &mut done))?;
        Some(
            cycle
                .windows(2)
                .map(|w| (w[0].clone(), w[1].clone(), graph[&w[0]][&w[1]].clone()))
                .collect(),
        )
    }

    /// Fails, printing the cycle, when the modules of the crate in `dir`
    /// (relative to the workspace) are not a tree.
    pub(super) fn assert_tree(name: &str) {
        let dir = super::workspace().join(name);
        let (modules, edges) = edges(&dir);
        assert!(!modules.is_empty(), "no Rust sources found under {name}/src");
        if let Some(cycle) = find_cycle(&edges) {
            let steps: Vec<String> = cycle
                .iter()
                .map(|(from, to, place)| format!("  {} -> {} ({place})", from.join("::"), to.join("::")))
                .collect();
            panic!(
                "the modules of {name} depend on each other in a circle; move the shared item down into a \
                 module both can use:\n{}",
                steps.join("\n")
            );
        }
    }

    pub(super) fn module(path: &str) -> Module {
        path.split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// The workspace's own packages, as `cargo metadata --no-deps` lists them.
fn workspace_metadata() -> serde_json::Value {
    let output = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--offline", "--no-deps"])
        .current_dir(workspace())
        .output()
        .expect("cargo, which runs this test, runs again");
    assert!(
        output.status.success(),
        "cargo metadata failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON")
}

fn workspace() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The framework (`codegen/`, `macros/`, `pkg/`, their test fixtures
/// included) stands alone: none of its packages depends, even for tests, on
/// a package of the sample app, so a project of one's own gets exactly what
/// the framework's tests check.
#[test]
fn the_framework_depends_on_no_crate_of_the_sample_app() {
    let metadata = workspace_metadata();
    let root = workspace().canonicalize().expect("the workspace exists");
    let in_framework = |manifest: &str| {
        let relative = Path::new(manifest)
            .strip_prefix(&root)
            .unwrap_or(Path::new(manifest));
        ["codegen", "macros", "pkg"]
            .iter()
            .any(|top| relative.starts_with(top))
    };
    let packages = metadata["packages"].as_array().expect("packages");
    let framework: BTreeSet<&str> = packages
        .iter()
        .filter(|p| in_framework(p["manifest_path"].as_str().unwrap_or_default()))
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(framework.contains("kinject-runtime"), "{framework:?}");
    let mut outside = Vec::new();
    for package in packages {
        let name = package["name"].as_str().unwrap_or_default();
        if !framework.contains(name) {
            continue;
        }
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or_default();
            if dep["path"].is_string() && !framework.contains(dep_name) {
                outside.push(format!(
                    "{name} -> {dep_name} ({})",
                    dep["kind"].as_str().unwrap_or("normal")
                ));
            }
        }
    }
    assert!(
        outside.is_empty(),
        "framework packages depend on the sample app; give their tests fixtures of their own: {outside:?}"
    );
}

/// The framework's crates as `cargo package` makes them for a registry:
/// complete metadata, no dependency a registry could not resolve, and the
/// test server a normal dependency of development tools alone, so a
/// production build of a user's controller never carries it.
#[test]
fn the_framework_crates_package_for_a_registry() {
    /// The table-test harness, the schema command that checks CRDs as the
    /// API server would, the `kinject` command that serves the local
    /// cluster, and the local cluster a project's example runs: none is
    /// linked into a controller.
    const DEVELOPMENT_TOOLS: [&str; 4] = [
        "kinject-testing",
        "kinject-schema",
        "kinject-cli",
        "kinject-local",
    ];
    let metadata = workspace_metadata();
    // `publish` is null when any registry may take the package.
    let publishable: Vec<&serde_json::Value> = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| p["publish"].is_null())
        .collect();
    let names: Vec<&str> = publishable.iter().filter_map(|p| p["name"].as_str()).collect();
    assert!(names.contains(&"kinject-runtime"), "{names:?}");
    let mut problems = Vec::new();
    for package in &publishable {
        let name = package["name"].as_str().unwrap_or_default();
        for field in ["description", "license", "readme", "documentation"] {
            if package[field].as_str().is_none_or(str::is_empty) {
                problems.push(format!("{name} has no {field}"));
            }
        }
        for field in ["keywords", "categories"] {
            if package[field].as_array().is_none_or(Vec::is_empty) {
                problems.push(format!("{name} has no {field}"));
            }
        }
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let (dep_name, kind) = (dep["name"].as_str().unwrap_or_default(), &dep["kind"]);
            if dep_name == "kinject-testenv" && kind.is_null() && !DEVELOPMENT_TOOLS.contains(&name) {
                problems.push(format!(
                    "{name} has the test server as a normal dependency; make it a dev-dependency"
                ));
            }
        }
    }
    // Cargo leaves out of a package every folder that holds a Cargo.toml (it
    // takes it for a crate of its own), so a template manifest there would be
    // missing from the crate a registry serves.
    let manifests: Vec<PathBuf> = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter_map(|p| p["manifest_path"].as_str().map(PathBuf::from))
        .collect();
    for package in &publishable {
        let own = PathBuf::from(package["manifest_path"].as_str().unwrap_or_default());
        let mut stray = Vec::new();
        // Build output left out.
        files_under(
            own.parent().expect("a manifest has a folder"),
            &|folder| !folder.ends_with("target"),
            &|file| file.ends_with("Cargo.toml"),
            &mut stray,
        );
        for path in stray.into_iter().filter(|path| !manifests.contains(path)) {
            problems.push(format!(
                "{} is left out of {}'s package (cargo takes its folder for a crate of its own); \
                 keep it under another name, such as Cargo.toml.tmpl",
                path.display(),
                package["name"].as_str().unwrap_or_default()
            ));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");

    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("package");
    let mut package = Command::new(env!("CARGO"));
    package
        .args([
            "package",
            "--no-verify",
            "--offline",
            "--allow-dirty",
            // A binary's package carries a Cargo.lock resolved against
            // crates.io, where the framework's crates are not yet; the
            // libraries it depends on are checked here all the same.
            "--exclude-lockfile",
            "--target-dir",
        ])
        .arg(&target)
        .current_dir(workspace());
    for name in &names {
        package.args(["-p", name]);
    }
    let output = package.output().expect("cargo runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "cargo package failed:\n{stderr}");
    assert!(!stderr.contains("warning"), "cargo package warned:\n{stderr}");
}

/// The cargo commands that resolve for every platform: on a machine whose
/// cargo home holds only what the build downloaded (this machine's
/// packages), each needs more (`--offline` fails, otherwise it downloads),
/// unless one of its flags keeps it to this machine's packages or to the
/// workspace's own.
const EVERY_PLATFORM: [(&str, &[&str]); 2] = [
    ("metadata", &["--no-deps", "--filter-platform"]),
    ("fetch", &["--target"]),
];

/// The cargo commands in `text` that need packages of other platforms: a
/// command line (`cargo metadata ...`) or, in Rust, an argument list
/// (`["metadata", "--format-version", ...]`) without a flag that limits it.
/// Comment lines (`//`, `#`) run nothing and are passed over.
fn commands_needing_every_platform(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let code: String = text
        .lines()
        .map(|line| {
            let line_start = line.trim_start();
            if line_start.starts_with("//") || line_start.starts_with('#') {
                ""
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    for (command, limits) in EVERY_PLATFORM {
        let limited = |rest: &str| limits.iter().any(|limit| rest.contains(limit));
        let command_line = format!("cargo {command}");
        for line in code.lines() {
            if let Some(at) = line.find(&command_line) {
                let rest = &line[at..];
                let word_ends =
                    !rest[command_line.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '-');
                if word_ends && !limited(rest) {
                    found.push(rest.trim().to_owned());
                }
            }
        }
        let first_argument = format!("\"{command}\",");
        let mut from = 0;
        while let Some(at) = code[from..].find(&first_argument).map(|at| from + at) {
            from = at + first_argument.len();
            let after = code[from..].trim_start();
            // An argument list goes on with a flag; a JSON key
            // (`"metadata": {`), a list of names or a table of these does not.
            if !after.starts_with("\"-") {
                continue;
            }
            let end = code[at..].find([']', ')']).map_or(code.len(), |end| at + end);
            let arguments = &code[at..end];
            if !limited(arguments) {
                found.push(format!("[{arguments}]"));
            }
        }
    }
    found
}

/// Every cargo command in the repository (tests, scripts, templates and
/// docs) needs only the packages a build downloads for the machine it runs
/// on. A fresh machine's `cargo test --workspace` downloads just those; a
/// command that needs another platform's packages fails there with
/// `--offline` (the copies run offline) and needs the network without it.
#[test]
fn cargo_commands_need_only_the_packages_the_build_downloads() {
    let root = workspace().canonicalize().expect("the workspace exists");
    let mut files = Vec::new();
    files_under(
        &root,
        &|folder| {
            !matches!(
                folder.file_name().and_then(|name| name.to_str()),
                Some("target" | ".git" | ".testenv")
            )
        },
        &|_| true,
        &mut files,
    );
    let mut problems = Vec::new();
    // This file names such commands as examples of what the check finds.
    for file in files.iter().filter(|file| !file.ends_with(file!())) {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for command in commands_needing_every_platform(&text) {
            problems.push(format!(
                "{}: {command}",
                file.strip_prefix(&root).unwrap_or(file).display()
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "these cargo commands need the packages of every platform, which a fresh machine's build \
         never downloads: give `metadata` `--no-deps` (or `--filter-platform`), `fetch` `--target`, \
         or settle a lock file with `cargo update --workspace`:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_platform_check_finds_unlimited_commands() {
    let found = commands_needing_every_platform(
        "let a = cargo(&copy, &[\"metadata\", \"--format-version\", \"1\", \"--offline\"]);\n\
         let b = cargo(&copy, &[\"metadata\", \"--no-deps\"]);\n\
         let c = json!({\"metadata\": {\"name\": \"x\"}});\n\
         let d = [\"metadata\",\n    \"--offline\"];\n\
         dir=$(cargo metadata --offline --no-deps)\n\
         (cd example && cargo metadata > /dev/null)\n\
         cargo fetch\n\
         cargo fetch --target x86_64-unknown-linux-gnu\n\
         // cargo metadata in a comment runs nothing\n\
         cargo metadata-like-plugin\n",
    );
    assert_eq!(
        found,
        [
            "cargo metadata > /dev/null)",
            "[\"metadata\", \"--format-version\", \"1\", \"--offline\"]",
            "[\"metadata\",\n    \"--offline\"]",
            "cargo fetch",
        ],
    );
}

/// The files under `dir` that `keep` accepts, in folders `descend` accepts.
fn files_under(
    dir: &Path,
    descend: &dyn Fn(&Path) -> bool,
    keep: &dyn Fn(&Path) -> bool,
    found: &mut Vec<PathBuf>,
) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if descend(&path) {
                files_under(&path, descend, keep, found);
            }
        } else if keep(&path) {
            found.push(path);
        }
    }
}

#[test]
fn types_modules_form_a_tree() {
    module_tree::assert_tree("pkg/types");
}

#[test]
fn runtime_modules_form_a_tree() {
    module_tree::assert_tree("pkg/runtime");
}

#[test]
fn sharedmain_modules_form_a_tree() {
    module_tree::assert_tree("pkg/sharedmain");
}

#[test]
fn webhook_modules_form_a_tree() {
    module_tree::assert_tree("pkg/webhook");
}

#[test]
fn image_modules_form_a_tree() {
    module_tree::assert_tree("pkg/image");
}

#[test]
fn schema_modules_form_a_tree() {
    module_tree::assert_tree("pkg/schema");
}

#[test]
fn testenv_modules_form_a_tree() {
    module_tree::assert_tree("pkg/testenv");
}

#[test]
fn local_modules_form_a_tree() {
    module_tree::assert_tree("pkg/local");
}

#[test]
fn testing_modules_form_a_tree() {
    module_tree::assert_tree("pkg/testing");
}

#[test]
fn codegen_modules_form_a_tree() {
    module_tree::assert_tree("codegen");
    module_tree::assert_tree("codegen/model");
    module_tree::assert_tree("macros");
}

#[test]
fn the_module_tree_check_finds_cycles_and_reads_paths() {
    use module_tree::{code_of, find_cycle, module, paths};
    let code = code_of(
        "use crate::{key::ObjectKey, leader::{self, Bucket as B}};\n\
         /// [x](crate::controller)\n\
         let s = \"crate::strings::Ignored\";\n\
         let y = super::store::Store;\n\
         #[cfg(test)]\nmod tests { use crate::testing::X; }\n",
    );
    let found: Vec<(usize, String)> = paths(&code).into_iter().map(|(l, p)| (l, p.join("::"))).collect();
    assert_eq!(
        found,
        [
            (1, "crate::key::ObjectKey".to_owned()),
            (1, "crate::leader::self".to_owned()),
            (1, "crate::leader::Bucket".to_owned()),
            (4, "super::store::Store".to_owned()),
        ]
    );

    let mut edges = BTreeMap::new();
    edges.insert(
        (module("http::watch"), module("registry")),
        "src/http/watch.rs:3".to_owned(),
    );
    edges.insert(
        (module("registry::store"), module("leaves")),
        "src/registry/store.rs:1".to_owned(),
    );
    // A child using its parent's items is no cycle.
    edges.insert(
        (module("http::watch"), module("http")),
        "src/http/watch.rs:4".to_owned(),
    );
    assert_eq!(find_cycle(&edges), None);
    edges.insert(
        (module("registry::store"), module("http")),
        "src/registry/store.rs:9".to_owned(),
    );
    assert_eq!(
        find_cycle(&edges),
        Some(vec![
            (
                module("http"),
                module("registry"),
                "src/http/watch.rs:3".to_owned()
            ),
            (
                module("registry"),
                module("http"),
                "src/registry/store.rs:9".to_owned()
            ),
        ])
    );
}

/// A framework crate's root holds its docs, its `mod` lines and its
/// re-exports, as kube-runtime's, tokio's and axum's do: what the crate
/// offers reads at a glance there, and every idea lives in a module named
/// for it. A proc-macro crate's entry points must stay at its root; each
/// is one call into a module.
mod crate_root {
    /// The items of a crate root's `code` (as `module_tree::code_of` leaves
    /// it) that belong in a module, each with its line and first line of
    /// text: anything but inner attributes, `mod` declarations, `use` lines
    /// and, in a proc-macro crate, entry points whose body is one call.
    pub(super) fn items_to_move(code: &str, proc_macro: bool) -> Vec<(usize, String)> {
        items(code)
            .into_iter()
            .filter(|(_, attributes, item)| !belongs_at_the_root(attributes, item, proc_macro))
            .map(|(line, _, item)| (line, item.lines().next().unwrap_or_default().trim().to_owned()))
            .collect()
    }

    /// The top-level items of `code`: the line each starts on, its outer
    /// attributes, and its text after them. Inner attributes are passed over.
    fn items(code: &str) -> Vec<(usize, String, String)> {
        let chars: Vec<char> = code.chars().collect();
        let mut items = Vec::new();
        let mut attributes = String::new();
        let (mut i, mut line) = (0, 1);
        while i < chars.len() {
            let start = i;
            if chars[i].is_whitespace() {
                i += 1;
            } else if chars[i] == '#' {
                i = item_end(&chars, i, true);
                if chars.get(start + 1) != Some(&'!') {
                    attributes.extend(&chars[start..i]);
                }
            } else {
                i = item_end(&chars, i, false);
                let item: String = chars[start..i].iter().collect();
                if item.trim() != ";" {
                    items.push((line, std::mem::take(&mut attributes), item));
                }
            }
            line += chars[start..i].iter().filter(|c| **c == '\n').count();
        }
        items
    }

    /// Where the item (or, with `attribute`, the attribute) starting at
    /// `start` ends: after its `;`, or after the `}` or `]` that closes it.
    fn item_end(chars: &[char], start: usize, attribute: bool) -> usize {
        let mut depth = 0usize;
        let mut i = start;
        while i < chars.len() {
            match chars[i] {
                '(' | '[' | '{' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                ']' | '}' => {
                    depth = depth.saturating_sub(1);
                    let closes_attribute = attribute && chars[i] == ']';
                    // `use a::{b, c};` goes on to its `;`.
                    let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
                    if depth == 0
                        && (closes_attribute || (!attribute && chars[i] == '}' && next != Some(&';')))
                    {
                        return i + 1;
                    }
                }
                ';' if depth == 0 && !attribute => return i + 1,
                _ => {}
            }
            i += 1;
        }
        chars.len()
    }

    fn belongs_at_the_root(attributes: &str, item: &str, proc_macro: bool) -> bool {
        let rest = without_visibility(item.trim());
        (keyword(rest, "mod") && rest.ends_with(';'))
            || keyword(rest, "use")
            || (proc_macro && attributes.contains("proc_macro") && keyword(rest, "fn") && one_call(rest))
    }

    /// `text` after a leading `pub`, `pub(crate)`, `pub(in path)`.
    fn without_visibility(text: &str) -> &str {
        if !keyword(text, "pub") {
            return text;
        }
        let rest = text["pub".len()..].trim_start();
        match rest.strip_prefix('(') {
            Some(inside) => inside
                .find(')')
                .map_or(rest, |end| inside[end + 1..].trim_start()),
            None => rest,
        }
    }

    fn keyword(text: &str, word: &str) -> bool {
        text.strip_prefix(word)
            .is_some_and(|rest| !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
    }

    /// Whether the body of the function `item` is one call (`a::b(x)`,
    /// `a::b(x).into()`): at its top level only a path, the call's
    /// parentheses and method calls on what it returns.
    fn one_call(item: &str) -> bool {
        let (Some(open), Some(close)) = (item.find('{'), item.rfind('}')) else {
            return false;
        };
        let body = item[open + 1..close].trim();
        let mut depth = 0usize;
        for c in body.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                _ if depth > 0 => {}
                c if c.is_alphanumeric() || c == '_' || c == ':' || c == '.' || c.is_whitespace() => {}
                _ => return false,
            }
        }
        body.starts_with(|c: char| c.is_alphabetic() || c == '_') && body.contains('(')
    }
}

/// The library root (`src/lib.rs`) of each framework package (a workspace
/// member under `codegen/`, `macros/` or `pkg/`), and whether it is a
/// proc-macro crate.
fn framework_crate_roots() -> Vec<(PathBuf, bool)> {
    let metadata = workspace_metadata();
    let root = workspace().canonicalize().expect("the workspace exists");
    let mut roots = Vec::new();
    for package in metadata["packages"].as_array().expect("packages") {
        let manifest = Path::new(package["manifest_path"].as_str().unwrap_or_default());
        let relative = manifest.strip_prefix(&root).unwrap_or(manifest);
        if !["codegen", "macros", "pkg"]
            .iter()
            .any(|top| relative.starts_with(top))
        {
            continue;
        }
        for target in package["targets"].as_array().into_iter().flatten() {
            let kinds: Vec<&str> = target["kind"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(serde_json::Value::as_str)
                .collect();
            let src = PathBuf::from(target["src_path"].as_str().unwrap_or_default());
            let library = kinds
                .iter()
                .any(|kind| ["lib", "rlib", "proc-macro"].contains(kind));
            if library && src.ends_with("src/lib.rs") {
                roots.push((src, kinds.contains(&"proc-macro")));
            }
        }
    }
    roots
}

/// Every framework crate asks for docs on all it exports, so an item added
/// without them warns (and fails CI's clippy) instead of reaching docs.rs
/// bare. Test crates (under a `tests/` or `ui-tests/` folder) are no
/// framework crate.
#[test]
fn framework_crates_warn_on_missing_docs() {
    let root = workspace().canonicalize().expect("the workspace exists");
    let missing: Vec<String> = framework_crate_roots()
        .iter()
        .map(|(file, _)| file.strip_prefix(&root).unwrap_or(file).to_path_buf())
        .filter(|file| {
            !file
                .components()
                .any(|c| c.as_os_str().to_string_lossy().ends_with("tests"))
        })
        .filter(|file| {
            let source = std::fs::read_to_string(root.join(file)).unwrap_or_default();
            !source.lines().any(|line| line.trim() == "#![warn(missing_docs)]")
        })
        .map(|file| file.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "add `#![warn(missing_docs)]` below the crate docs of: {missing:?}"
    );
}

#[test]
fn framework_crate_roots_hold_only_modules_and_re_exports() {
    let roots = framework_crate_roots();
    assert!(
        roots
            .iter()
            .any(|(file, _)| file.ends_with("pkg/runtime/src/lib.rs")),
        "{roots:?}"
    );
    let root = workspace().canonicalize().expect("the workspace exists");
    let mut problems = Vec::new();
    for (file, proc_macro) in &roots {
        let source =
            std::fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        for (line, item) in crate_root::items_to_move(&module_tree::code_of(&source), *proc_macro) {
            let shown = file.strip_prefix(&root).unwrap_or(file).display();
            problems.push(format!("  {shown}:{line}: `{item}`"));
        }
    }
    assert!(
        problems.is_empty(),
        "a framework crate's lib.rs holds its docs, `mod` lines and re-exports (`pub use`), and in a \
         proc-macro crate entry points that are one call each; move each of these items into a module \
         named for what it holds and re-export it from lib.rs:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_crate_root_check_finds_items_and_accepts_modules_and_re_exports() {
    use crate_root::items_to_move;
    use module_tree::code_of;
    let root = code_of(
        "//! Docs with `fn example() {}` in them.\n\
         #![forbid(unsafe_code)]\n\
         pub mod flags;\n\
         #[cfg(feature = \"x\")]\n\
         mod setup;\n\
         pub use setup::{Setup, run};\n\
         pub(crate) use kube::Client;\n\
         /// A struct.\n\
         #[derive(Debug)]\n\
         pub struct Flags {\n    a: u8,\n}\n\
         fn helper() -> u8 { 1 }\n\
         mod inline { fn x() {} }\n\
         pub const N: [u8; 2] = [1, 2];\n\
         #[cfg(test)]\nmod tests { fn t() {} }\n",
    );
    assert_eq!(
        items_to_move(&root, false),
        [
            (10, "pub struct Flags {".to_owned()),
            (13, "fn helper() -> u8 { 1 }".to_owned()),
            (14, "mod inline { fn x() {} }".to_owned()),
            (15, "pub const N: [u8; 2] = [1, 2];".to_owned()),
        ]
    );

    let proc_macros = code_of(
        "#[proc_macro_derive(Kind, attributes(kind))]\n\
         pub fn derive_kind(input: TokenStream) -> TokenStream {\n    kind::derive(input.into()).into()\n}\n\
         #[proc_macro_attribute]\n\
         pub fn marker(_: TokenStream, item: TokenStream) -> TokenStream {\n    let item = item;\n    item\n}\n\
         fn helper(input: TokenStream) -> TokenStream { kind::derive(input) }\n",
    );
    assert_eq!(
        items_to_move(&proc_macros, true),
        [
            (
                6,
                "pub fn marker(_: TokenStream, item: TokenStream) -> TokenStream {".to_owned()
            ),
            (
                10,
                "fn helper(input: TokenStream) -> TokenStream { kind::derive(input) }".to_owned()
            ),
        ]
    );
}
