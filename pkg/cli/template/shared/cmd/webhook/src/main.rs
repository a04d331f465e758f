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

/// jemalloc with background threads rather than glibc's malloc or the
/// controller's mimalloc: a heavy review decodes to tens of megabytes, and
/// both of those keep freed memory until the thread that owns it allocates
/// again, which an idle webhook's threads do not (glibc's stayed at 168 MiB
/// after a burst, mimalloc's at 2.7-3.3 times idle a minute later).
/// jemalloc's background threads purge while every other thread sleeps;
/// `config/webhook.yaml` sets `_RJEM_MALLOC_CONF` so they purge at once,
/// which also keeps the peak under a burst low. docs/webhook.md (Memory)
/// has the figures.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    kinject_webhook::main("webhook", generated::registry::custom_kinds())
}
