//! The project's admission webhook: defaulting and validation of every kind
//! the generated registry lists with a `Defaultable` or `Validatable` hook,
//! validation of `config-logging`, `config-leader-election` and
//! `config-observability`, and the certificates and webhook configurations
//! they need, under the same `sharedmain` phases as the controller.
//!
//! ```sh
//! SYSTEM_NAMESPACE=knative-samples cargo run -p webhook -- --kubeconfig ~/.kube/config
//! ```

use std::process::ExitCode;

/// mimalloc rather than glibc's malloc: a heavy review decodes to tens of
/// megabytes on a blocking thread, and glibc keeps each thread's arena
/// resident afterwards, so the process stayed at 168 MiB after a burst
/// against 15 MiB idle. `config/webhook.yaml` sets
/// `MIMALLOC_ARENA_EAGER_COMMIT=0` so freed memory goes back to the system.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    kinject_webhook::main("webhook", generated::registry::custom_kinds())
}
