//! The controller and its webhook against a local, in-memory API server:
//! the main job on a machine without a cluster (`kinject_local` says what
//! the local cluster does; `-- --help` lists its switches).
//!
//! ```sh
//! cargo run -p controller --example local
//! kubectl --kubeconfig .testenv/kubeconfig get all -A   # in another shell
//! ```

use std::process::ExitCode;

fn main() -> ExitCode {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let app = kinject_local::App::new("knative-samples", root, reconcilers::controllers());
    kinject_local::main(app.webhook(generated::registry::custom_kinds()))
}
