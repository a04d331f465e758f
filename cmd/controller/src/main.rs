//! The controller process: every reconciler of `reconcilers` (its
//! `controllers()` list) under `sharedmain`, with leader election, logging,
//! metrics and probes.
//!
//! ```sh
//! SYSTEM_NAMESPACE=knative-samples cargo run -p controller -- --kubeconfig ~/.kube/config
//! ```

use std::process::ExitCode;

/// mimalloc rather than glibc's malloc, whose share of the CPU grows with
/// the cache (a third of it at 100,000 objects); `config/controller.yaml`
/// sets `MIMALLOC_ARENA_EAGER_COMMIT=0` so freed memory goes back to the
/// system. docs/benchmarks.md (Scale) has mimalloc's figures and
/// docs/benchmarks-history.md glibc's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    kinject_sharedmain::main("controller", reconcilers::controllers())
}
