//! Runs kubectl with a manifest on its standard input: `apply` and `delete`
//! are kubectl's, with every flag a user already knows (`--kubeconfig`,
//! `--context`, `--server-side`), as `ko apply` does.

use std::io::Write;
use std::process::{Command, Stdio};

/// `kubectl <verb…> <extra…>`, `manifest` on its standard input. What
/// kubectl prints goes to the standard output as it would, and comes back
/// for the caller to tell when kubectl had nothing to say.
pub(crate) fn run(verb: &[&str], extra: &[String], manifest: &str) -> Result<String, String> {
    let (output, written) = with_input(verb, extra, manifest, Stdio::inherit())?;
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    print!("{printed}");
    written.map_err(|e| format!("cannot hand the manifests to kubectl: {e}"))?;
    if output.status.success() {
        Ok(printed)
    } else {
        Err(format!(
            "kubectl {} failed ({}); see its message above",
            verb.join(" "),
            output.status
        ))
    }
}

/// `kubectl <args…> <extra…>` with `input` on its standard input, its
/// standard output kept and its standard error sent to `stderr`; beside
/// what it printed, whether writing its input failed. kubectl reads all of
/// its input before it answers, so writing it whole first cannot wait on a
/// full output pipe.
fn with_input(
    args: &[&str],
    extra: &[String],
    input: &str,
    stderr: Stdio,
) -> Result<(std::process::Output, std::io::Result<()>), String> {
    let mut child = Command::new("kubectl")
        .args(args)
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("cannot run kubectl: {e}; install it and put it on PATH"))?;
    let written = child
        .stdin
        .take()
        .map_or(Ok(()), |mut stdin| stdin.write_all(input.as_bytes()));
    let output = child
        .wait_with_output()
        .map_err(|e| format!("kubectl did not finish: {e}"))?;
    Ok((output, written))
}

/// `kubectl delete --ignore-not-found`, which prints nothing when nothing
/// was there; then this says so, naming what it looked for.
pub(crate) fn delete(extra: &[String], manifest: &str, what: &str) -> Result<(), String> {
    let printed = run(&["delete", "--ignore-not-found", "-f", "-"], extra, manifest)?;
    if printed.trim().is_empty() {
        println!("nothing to remove: none of {what} exists in the cluster");
    }
    Ok(())
}

/// `kubectl <args…> <extra…>`, `input` on its standard input, what it prints
/// kept: its standard output when it succeeds, else its standard error
/// (kubectl's `Error from server (…)` lines) for the caller to read.
pub(crate) fn capture(args: &[&str], extra: &[String], input: &str) -> Result<String, String> {
    let (output, written) = with_input(args, extra, input, Stdio::piped())?;
    written.map_err(|e| format!("cannot hand kubectl its input: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        let said = String::from_utf8_lossy(&output.stderr).trim_end().to_owned();
        Err(if said.is_empty() {
            format!("kubectl {} failed ({})", args.join(" "), output.status)
        } else {
            said
        })
    }
}
