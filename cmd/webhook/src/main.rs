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

fn main() -> ExitCode {
    kinject_webhook::main("webhook", generated::registry::custom_kinds())
}
