//! Runs kubectl with a manifest on its standard input: `apply` and `delete`
//! are kubectl's, with every flag a user already knows (`--kubeconfig`,
//! `--context`, `--server-side`), as `ko apply` does.

use std::io::Write;
use std::process::{Command, Stdio};

/// `kubectl <verb…> <extra…>`, `manifest` on its standard input.
pub(crate) fn run(verb: &[&str], extra: &[String], manifest: &str) -> Result<(), String> {
    let mut child = Command::new("kubectl")
        .args(verb)
        .args(extra)
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run kubectl: {e}; install it and put it on PATH"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(manifest.as_bytes())
            .map_err(|e| format!("cannot hand the manifests to kubectl: {e}"))?;
    }
    let status = child.wait().map_err(|e| format!("kubectl did not finish: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "kubectl {} failed ({status}); see its message above",
            verb.join(" ")
        ))
    }
}
