//! Builds one binary of the workspace in the current directory with cargo,
//! as a user would, and finds the executable from cargo's own report of
//! what it built (its JSON messages), whatever the target directory; or
//! runs one of the project's packages.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Builds `binary` (release unless `release` is false) and answers the path
/// of its executable.
pub(crate) fn binary(binary: &str, release: bool) -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.args([
        "build",
        "--bin",
        binary,
        "--message-format=json-render-diagnostics",
    ]);
    if release {
        command.arg("--release");
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot run cargo: {e}; is a Rust toolchain installed?"))?;
    let mut executable = None;
    if let Some(stdout) = child.stdout.take() {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if message["reason"] == "compiler-artifact"
                && message["target"]["name"] == binary
                && let Some(path) = message["executable"].as_str()
            {
                executable = Some(PathBuf::from(path));
            }
        }
    }
    let status = child.wait().map_err(|e| format!("cargo did not finish: {e}"))?;
    if !status.success() {
        return Err(format!(
            "cargo build --bin {binary} failed ({status}); see its errors above"
        ));
    }
    executable.ok_or_else(|| {
        format!("cargo built no binary named {binary}; name a [[bin]] of this workspace (`cargo run --bin` lists them)")
    })
}

/// Runs the binary of `package` in the workspace around the current
/// directory with `args` (`cargo run --quiet -p <package> -- <args>`), its
/// output the user's; `Ok(false)` when it ran and failed.
pub(crate) fn run_package(package: &str, args: &[std::ffi::OsString]) -> Result<bool, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["run", "--quiet", "--package", package, "--"])
        .args(args)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}; is a Rust toolchain installed?"))?;
    match status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(format!(
            "`cargo run -p {package}` failed ({status}); is this a project of this framework, with its \
             `{package}` package (`cmd/{package}`)? See the errors above"
        )),
    }
}
