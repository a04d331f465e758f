//! The sample controller process: both reconcilers under `sharedmain`, with
//! leader election, logging, metrics and probes.
//!
//! ```sh
//! SYSTEM_NAMESPACE=knative-samples cargo run -p controller -- --kubeconfig ~/.kube/config
//! ```

use std::process::ExitCode;

use kinject_sharedmain::controller;
use reconcilers::{addressableservice, simpledeployment};

fn main() -> ExitCode {
    kinject_sharedmain::main(
        "controller",
        [
            controller!(addressableservice::new_controller),
            controller!(simpledeployment::new_controller),
        ],
    )
}
