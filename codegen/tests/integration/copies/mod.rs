//! What the tests of the sample app's scripts share: copies of the sample
//! app (a project of its own that reaches the framework by path in this
//! checkout), commands run in them, and the check that they compiled only
//! their own crates.
//!
//! **What keeps them from being slow.** A copy holds only the sample app, as
//! a project of one's own would. Every copy and `examples/out-of-tree` build
//! in this workspace's build directory (`CARGO_BUILD_BUILD_DIR`, with the
//! same profile and features), so the framework and every registry crate
//! come from the build `cargo test --workspace` already made; their binaries
//! go to a target directory of their own, so they never replace the ones
//! other tests run. Each test checks afterwards that no crate but the copy's
//! own was compiled, and says which was when one is.

// Each test binary uses some of these.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

/// The checkout: the nearest directory above the test's package holding
/// the lock file (other packages' tests include this module too).
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").is_file())
        .unwrap()
        .to_path_buf()
}

/// The top-level folders of the framework; the rest of the checkout is the
/// sample app (or not part of a project: `target`, `.git`, `examples`).
pub(crate) const FRAMEWORK: [&str; 3] = ["codegen", "macros", "pkg"];

/// Where this workspace's build lives: the directory above `debug/` that
/// holds this test's own executable.
pub(crate) fn build_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors()
        .find(|dir| dir.file_name().is_some_and(|name| name == "debug"))
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("{} is not in a debug/ build directory", exe.display()))
        .to_path_buf()
}

/// Where the copies and their binaries live.
pub(crate) fn scratch() -> PathBuf {
    build_dir().join("hack-scripts-test")
}

/// Copies `from` to `to`. The copies get new modification times: a copy a
/// test changed on an earlier run is built anew, never taken for the build of
/// its changed content.
pub(crate) fn copy_tree(from: &Path, to: &Path, skip: &[&str]) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if skip.iter().any(|s| name == *s) {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&src, &dst, &[]);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// A fresh copy of the sample app named `name` (the `number`th kind of copy):
/// a project of its own whose workspace lists the sample's crates and
/// reaches the framework's by path in this checkout.
///
/// The framework's folders are links to this checkout's, so the framework's
/// crates sit at the same paths relative to the copy's workspace root as to
/// this one's: cargo names a path crate's build by that relative path, and
/// only so does the copy find this workspace's build of them.
pub(crate) fn sample_copy(name: &str, number: u32) -> PathBuf {
    let copy = scratch().join(name);
    let _ = std::fs::remove_dir_all(&copy);
    let mut skip = vec!["target", ".git", "examples", "Cargo.toml"];
    skip.extend(FRAMEWORK);
    copy_tree(&repo_root(), &copy, &skip);
    link_framework(&repo_root(), &copy);
    std::fs::write(copy.join("Cargo.toml"), copy_manifest(&repo_root(), number)).unwrap();
    // The lock file drops the framework's members from its root list now, not
    // in the middle of a step that checks which files changed. `update
    // --workspace` resolves without downloading: `cargo metadata` would need
    // every package of the lock file, other platforms' too, which a fresh
    // machine's build never downloads.
    let settled = cargo(&copy, &["update", "--workspace"]);
    assert!(settled.ok, "{}", settled.stderr);
    copy
}

/// Links `dir`'s framework folders to `root`'s.
pub(crate) fn link_framework(root: &Path, dir: &Path) {
    for top in FRAMEWORK {
        std::os::unix::fs::symlink(root.join(top), dir.join(top)).unwrap();
    }
}

/// The workspace manifest of the `number`th kind of copy: this one's, with
/// the framework's crates dependencies rather than members, and its own
/// crates built with a profile of their own.
///
/// Cargo names the build of a crate in a workspace by its path relative to
/// the workspace root, so the copy's `apis` and this workspace's (or another
/// copy's) would be one build in the shared build directory, each taking the
/// other's for its own. A profile setting of each copy's own (line tables
/// only, and `256 - number` codegen units) gives its crates builds of their
/// own; it changes nothing they do.
pub(crate) fn copy_manifest(root: &Path, number: u32) -> String {
    let text = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let mut manifest: toml::Table = text.parse().unwrap();
    let in_framework = |path: &str| FRAMEWORK.iter().any(|top| Path::new(path).starts_with(top));
    let workspace = manifest["workspace"].as_table_mut().unwrap();
    let members = workspace["members"].as_array_mut().unwrap();
    let (framework, app): (Vec<_>, Vec<_>) = members
        .drain(..)
        .partition(|member| in_framework(member.as_str().unwrap()));
    members.extend(app);
    assert!(!members.is_empty(), "the workspace has no sample app members");
    let packages = member_packages(root, members);
    let overrides = manifest["profile"]["dev"]["package"].as_table_mut().unwrap();
    // A framework package without a library (the `kinject` command) is in no
    // copy's build; cargo would warn that its profile setting matches nothing.
    for (member, package) in framework.iter().zip(member_packages(root, &framework)) {
        let dir = root.join(member.as_str().unwrap());
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        if !dir.join("src/lib.rs").exists() && !manifest.contains("[lib]") {
            overrides.remove(&package);
        }
    }
    for package in packages {
        let mut own = toml::Table::new();
        own.insert("debug".into(), "line-tables-only".into());
        own.insert("codegen-units".into(), i64::from(256 - number).into());
        overrides.insert(package, own.into());
    }
    format!(
        "# A copy of the sample app, written by codegen/tests/integration/copies/mod.rs.\n{}",
        toml::to_string(&manifest).unwrap()
    )
}

/// The package names of a workspace's `members` (paths from `root`).
pub(crate) fn member_packages(root: &Path, members: &[toml::Value]) -> Vec<String> {
    members
        .iter()
        .map(|member| {
            let member: toml::Table =
                std::fs::read_to_string(root.join(member.as_str().unwrap()).join("Cargo.toml"))
                    .unwrap()
                    .parse()
                    .unwrap();
            member["package"]["name"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// What the shared build directory holds: its compiled files, each with when
/// it was last written (a crate compiled again under the same name is a
/// newer file, not a new one).
pub(crate) fn artifacts() -> BTreeSet<(OsString, SystemTime)> {
    std::fs::read_dir(build_dir().join("debug/deps"))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| Some((e.file_name(), e.metadata().ok()?.modified().ok()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// The crate (or test, binary, example) a file of `debug/deps` was
/// compiled for: `libkube_client-1f2e.rlib` and `e2e-0a1b.d` name
/// `kube_client` and `e2e`.
pub(crate) fn compiled_crate(file: &OsString) -> String {
    let file = file.to_string_lossy();
    let (stem, library) = match file.rsplit_once('.') {
        Some((stem, "rlib" | "rmeta" | "so" | "a")) => (stem, true),
        Some((stem, "d")) => (stem, false),
        _ => (&*file, false),
    };
    let stem = if library {
        stem.strip_prefix("lib").unwrap_or(stem)
    } else {
        stem
    };
    stem.rsplit_once('-').map_or(stem, |(name, _)| name).to_owned()
}

/// `workspace`'s own packages, as `cargo metadata --no-deps` lists them.
pub(crate) fn own_packages(workspace: &Path) -> serde_json::Value {
    let out = without_test_environment(&mut Command::new(env!("CARGO")))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(workspace)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The crate names of `workspace`'s own packages: every target of each.
pub(crate) fn own_crates(workspace: &Path) -> BTreeSet<String> {
    own_packages(workspace)["packages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|package| package["targets"].as_array().unwrap())
        .map(|target| target["name"].as_str().unwrap().replace('-', "_"))
        .collect()
}

/// Fails when anything but `workspace`'s own crates was compiled since
/// `before`: a framework or registry crate compiled again means some setting
/// that makes two workspaces share a build differs between them.
pub(crate) fn assert_only_own_crates_compiled(workspace: &Path, before: &BTreeSet<(OsString, SystemTime)>) {
    assert_only_compiled(workspace, before, &own_crates(workspace), &BTreeSet::new());
}

/// Fails when a crate other than `own` and `built_apart` (crates the
/// workspace builds apart from this one's, under other names) was compiled
/// since `before`.
pub(crate) fn assert_only_compiled(
    workspace: &Path,
    before: &BTreeSet<(OsString, SystemTime)>,
    own: &BTreeSet<String>,
    built_apart: &BTreeSet<String>,
) {
    let again: BTreeSet<String> = artifacts()
        .difference(before)
        .map(|(file, _)| compiled_crate(file))
        .filter(|name| !own.contains(name) && !built_apart.contains(name))
        .collect();
    // A crate the build directory never held before was built, not built
    // again: this workspace's build left it out, as testing one package
    // does (`cargo test -p kinject-cli` builds that package's dependencies
    // alone, with its features). Sharing is judged against the whole
    // workspace's build, which CI always makes first.
    let held_before: BTreeSet<String> = before.iter().map(|(file, _)| compiled_crate(file)).collect();
    let first_built: Vec<&String> = again.iter().filter(|name| !held_before.contains(*name)).collect();
    if !first_built.is_empty() && std::env::var_os("CI").is_none() {
        use std::io::Write as _;
        // The harness shows printed output only for failures.
        let _ = writeln!(
            std::io::stderr(),
            "notice: {} built crates this workspace's build had not ({first_built:?}), so whether it shares \
             that build is not checked; run `cargo test --workspace` to check it",
            workspace.display()
        );
        return;
    }
    assert!(
        again.is_empty(),
        "{} compiled again crates this workspace had built: {again:?}. A shared dependency resolves \
         other features, another version or another profile there: keep every feature in the root \
         [workspace.dependencies], the same [profile] settings and a lock file with the same versions \
         (compare `cargo tree -e features -i <crate>` here and there).",
        workspace.display()
    );
}

/// Builds the generator here, before a copy's scripts run it. `cargo run -p
/// codegen` resolves a dependency graph of its own: none of the runtime's
/// proc-macros, so their shared crates (syn, proc-macro2) get fewer features
/// and are another build. Made here once, it is what every copy (and
/// `hack/verify-codegen.sh` after the tests) reuses.
pub(crate) fn build_the_generator_here() {
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let out = without_test_environment(&mut Command::new(env!("CARGO")))
            .args(["build", "--offline", "-p", "codegen"])
            .current_dir(repo_root())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    });
}

/// One copy at a time: two would compile the same sample crates in turn.
pub(crate) static ONE_COPY_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub(crate) struct Run {
    pub(crate) ok: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// `cargo test` tells the test it runs about the crate under test
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, ...). A cargo started from the
/// test would pass them on to build scripts, and those that rerun when such
/// a variable changes (ring's does) would take this workspace's build of
/// them for stale and build them again: so they are left out.
///
/// Every such cargo runs `--offline`, so the packages are fetched first
/// ([`fetch_packages_once`]).
pub(crate) fn without_test_environment(command: &mut Command) -> &mut Command {
    fetch_packages_once();
    strip_test_environment(command)
}

/// Downloads, once per test binary, every package this workspace's lock
/// file names for this machine, so that the `--offline` commands these tests
/// run (in copies, in projects, in this workspace) find them even when only
/// part of the workspace was built before: `cargo test -p kinject-cli` from a
/// cargo home that held nothing. `--target` keeps it to this platform's
/// packages, which the workspace's own build downloads anyway; once they are
/// there it needs no network.
pub(crate) fn fetch_packages_once() {
    static FETCHED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    FETCHED.get_or_init(|| {
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        let version = Command::new(rustc).arg("-vV").output().unwrap();
        let version = String::from_utf8_lossy(&version.stdout);
        let host = version
            .lines()
            .find_map(|line| line.strip_prefix("host: "))
            .unwrap_or_else(|| panic!("`rustc -vV` names no host:\n{version}"));
        let out = strip_test_environment(&mut Command::new(env!("CARGO")))
            .args(["fetch", "--locked", "--target", host])
            .current_dir(repo_root())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "downloading the packages these tests' --offline commands need failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

fn strip_test_environment(command: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name == "OUT_DIR"
            || [
                "CARGO_MANIFEST_",
                "CARGO_PKG_",
                "CARGO_CRATE_",
                "CARGO_BIN_",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "CARGO_RUSTC_CURRENT_DIR",
            ]
            .iter()
            .any(|prefix| name.starts_with(prefix))
        {
            command.env_remove(&*name);
        }
    }
    command
}

/// `command` with its intermediate files in this workspace's build
/// directory and its binaries in the copies' own target directory.
pub(crate) fn in_copies(command: &mut Command) -> &mut Command {
    without_test_environment(command)
        .env("CARGO_BUILD_BUILD_DIR", build_dir())
        .env("CARGO_TARGET_DIR", scratch().join("target"))
        .env("CARGO_NET_OFFLINE", "true")
}

/// Runs `command` to its end (see [`in_copies`]).
pub(crate) fn run(mut command: Command) -> Run {
    let out = in_copies(&mut command).output().unwrap();
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs a script of the copy by absolute path from another directory, as a
/// user might.
pub(crate) fn script(copy: &Path, name: &str) -> Run {
    script_with(copy, name, &[])
}

pub(crate) fn script_with(copy: &Path, name: &str, args: &[&str]) -> Run {
    let mut command = Command::new("bash");
    command
        .arg(copy.join("hack").join(name))
        .args(args)
        .current_dir(std::env::temp_dir());
    run(command)
}

/// `cargo <args>` in the copy.
pub(crate) fn cargo(copy: &Path, args: &[&str]) -> Run {
    fetch_packages_once();
    let mut command = Command::new(env!("CARGO"));
    command.args(args).current_dir(copy);
    run(command)
}

/// A shell command line in the copy, as a user types it.
pub(crate) fn shell(copy: &Path, line: &str) -> Run {
    let mut command = Command::new("bash");
    command.args(["-c", line]).current_dir(copy);
    run(command)
}

/// A process killed when the check ends, however it ends; with its process
/// group, when it leads one ([`background`]), so nothing it started (a
/// server on a fixed port) outlives a failed check.
pub(crate) struct Running(pub(crate) std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(std::process::Stdio::null())
            .status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A shell command line in the copy, as a user types it in a shell of its
/// own: started in a process group of its own (so [`interrupt`] reaches
/// every process it starts, as Ctrl-C does), its output (both streams, as
/// a terminal shows them) in `log`.
pub(crate) fn background(copy: &Path, line: &str, log: &Path) -> Running {
    use std::os::unix::process::CommandExt as _;
    let output = std::fs::File::create(log).unwrap();
    let mut command = Command::new("bash");
    command
        .args(["-c", line])
        .current_dir(copy)
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(output.try_clone().unwrap())
        .stderr(output);
    Running(in_copies(&mut command).spawn().unwrap())
}

/// Ctrl-C for a command started by [`background`]: SIGINT to its process
/// group; whether it exited cleanly.
pub(crate) fn interrupt(running: &mut Running) -> bool {
    let group = format!("-{}", running.0.id());
    let sent = Command::new("kill").args(["-INT", "--", &group]).status();
    assert!(sent.is_ok_and(|s| s.success()), "kill -INT {group} failed");
    running.0.wait().unwrap().success()
}

/// Whether `program` runs here. Without it a check that needs it is
/// skipped, saying so; in CI (`CI` set, where `.ci/run` installs it) its
/// absence is a failure.
pub(crate) fn installed(program: &str, what: &str) -> bool {
    use std::io::Write as _;
    let has = Command::new(program).arg("--help").output().is_ok();
    if !has {
        assert!(
            std::env::var_os("CI").is_none(),
            "{program} is not installed but CI is set: {what} need it; .ci/run installs it"
        );
        let _ = writeln!(std::io::stderr(), "skipped: {what} ({program} is not installed)");
    }
    has
}

/// The commands of `docs/tutorial.md`'s sh blocks marked `marker`, in order,
/// a command continued with `\` joined into one line.
pub(crate) fn tutorial_commands(marker: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo_root().join("docs/tutorial.md")).unwrap();
    let mut commands = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() != marker {
            continue;
        }
        assert_eq!(lines.next().map(str::trim), Some("```sh"), "a tested block is sh");
        let mut command = String::new();
        for line in lines.by_ref().take_while(|l| l.trim() != "```") {
            let line = line.trim();
            if command.is_empty() && (line.is_empty() || line.starts_with('#')) {
                continue;
            }
            match line.strip_suffix('\\') {
                Some(continued) => command.push_str(continued),
                None => {
                    command.push_str(line);
                    commands.push(std::mem::take(&mut command));
                }
            }
        }
        assert!(
            command.is_empty(),
            "a tested block ends in the middle of a command: {command}"
        );
    }
    assert!(
        !commands.is_empty(),
        "docs/tutorial.md has no block marked {marker}"
    );
    commands
}

/// The Rust blocks of `docs/tutorial.md` marked `<marker>PATH -->`
/// (`<!-- tested: replaces an item of PATH -->`), in order, each with its
/// path.
pub(crate) fn tutorial_rust_blocks(marker: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo_root().join("docs/tutorial.md")).unwrap();
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(path) = line
            .trim()
            .strip_prefix(marker)
            .and_then(|rest| rest.strip_suffix(" -->"))
        else {
            continue;
        };
        assert_eq!(
            lines.next().map(str::trim),
            Some("```rust"),
            "a tested item is rust"
        );
        let code: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
        blocks.push((path.to_owned(), code.join("\n") + "\n"));
    }
    assert!(
        !blocks.is_empty(),
        "docs/tutorial.md has no Rust item marked {marker}"
    );
    blocks
}

/// `source` with the item `block` declares (`pub struct WidgetSpec`, `fn
/// example_spec`), its doc comment and attributes included, replaced by
/// `block`, as a reader following the tutorial does.
pub(crate) fn replace_item(source: &str, block: &str) -> String {
    let is_declaration = |line: &str| {
        let line = line.trim_start_matches("pub ");
        ["struct ", "enum ", "fn ", "impl "]
            .iter()
            .any(|k| line.starts_with(k))
    };
    let declaration = block
        .lines()
        .find(|l| is_declaration(l))
        .expect("the block declares an item");
    let head = declaration.split(['{', '(', '<']).next().unwrap().trim_end();
    let lines: Vec<&str> = source.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.split(['{', '(', '<']).next().unwrap().trim_end() == head)
        .unwrap_or_else(|| panic!("`{head}` is not in the file:\n{source}"));
    let mut start = at;
    while start > 0 {
        let above = lines[start - 1].trim_start();
        if above.starts_with("///") || above.starts_with("#[") {
            start -= 1;
        } else if above.starts_with(")]")
            && let Some(open) = lines[..start - 1]
                .iter()
                .rposition(|l| l.trim_start().starts_with("#["))
        {
            // The end of an attribute over several lines (`#[rule(`).
            start = open;
        } else {
            break;
        }
    }
    let end = at
        + lines[at..]
            .iter()
            .position(|l| *l == "}")
            .expect("the item ends with `}` alone");
    let mut out: Vec<String> = lines[..start].iter().map(|l| (*l).to_owned()).collect();
    out.push(block.trim_end().to_owned());
    out.extend(lines[end + 1..].iter().map(|l| (*l).to_owned()));
    out.join("\n") + "\n"
}

/// Waits until `done` accepts the log of a command started by
/// [`background`]; fails, showing the log, if it exits first or a minute
/// passes.
pub(crate) fn until_logged(running: &mut Running, log: &Path, done: impl Fn(&str) -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if done(&text) {
            return;
        }
        let exited = running.0.try_wait().unwrap();
        assert!(
            exited.is_none() && std::time::Instant::now() < deadline,
            "{} ({}):\n{text}",
            log.display(),
            exited.map_or("a minute passed".to_owned(), |s| format!("exited: {s}"))
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Polls a shell command line in `dir` until `done` accepts its output,
/// for a minute; a failure shows the last output and `log`, the log of
/// whatever was expected to make it happen.
pub(crate) fn until_output(dir: &Path, line: &str, log: &Path, done: impl Fn(&str) -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let run = shell(dir, line);
        if run.ok && done(&run.stdout) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{line}\n{}{}\n{}:\n{}",
            run.stdout,
            run.stderr,
            log.display(),
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The JSON log lines at one of `levels`.
pub(crate) fn lines_at<'a>(log: &'a str, levels: &[&str]) -> Vec<&'a str> {
    log.lines()
        .filter(|line| {
            serde_json::from_str::<serde_json::Value>(line)
                .is_ok_and(|v| v["level"].as_str().is_some_and(|l| levels.contains(&l)))
        })
        .collect()
}

/// The lines of a log that say something went wrong: JSON at WARN or worse,
/// and the plain `error:` and `warning:` lines of a script or of cargo.
pub(crate) fn loud_lines(log: &str) -> Vec<&str> {
    let mut loud = lines_at(log, &["warn", "error", "fatal", "panic", "dpanic"]);
    loud.extend(
        log.lines()
            .filter(|line| line.starts_with("error") || line.starts_with("warning")),
    );
    loud
}
