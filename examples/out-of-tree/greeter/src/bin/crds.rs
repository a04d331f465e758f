//! Prints the CustomResourceDefinitions of the API as a JSON list, which
//! `kubectl apply -f -` takes: `cargo run -p greeter --bin crds | kubectl apply -f -`.

use std::io::Write as _;
use std::process::ExitCode;

fn main() -> ExitCode {
    let kinds = greeter::generated::registry::custom_kinds();
    let definitions = match kinject_types::registry::custom_resource_definitions(&kinds) {
        Ok(definitions) => definitions,
        Err(e) => {
            eprintln!("crds: {e}");
            return ExitCode::FAILURE;
        }
    };
    let crds: Result<Vec<serde_json::Value>, serde_json::Error> = definitions
        .iter()
        .map(|definition| serde_json::to_value(&definition.crd))
        .collect();
    match crds {
        Ok(items) => {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
            // A closed pipe (`| head`) ends the output; it is not a failure to report.
            match writeln!(std::io::stdout().lock(), "{list}") {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("crds: cannot write: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            eprintln!("crds: cannot encode a CRD: {e}");
            ExitCode::FAILURE
        }
    }
}
