//! The controller process: every reconciler of `reconcilers` (its
//! `controllers()` list) under `sharedmain`, with leader election, logging,
//! metrics and probes.
//!
//! ```sh
//! SYSTEM_NAMESPACE=knative-samples cargo run -p controller -- --kubeconfig ~/.kube/config
//! ```

use std::process::ExitCode;

fn main() -> ExitCode {
    kinject_sharedmain::main("controller", reconcilers::controllers())
}
