//! Builds one binary of the workspace in the current directory with cargo,
//! as a user would, and finds the executable from cargo's own report of
//! what it built (its JSON messages), whatever the target directory.

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
