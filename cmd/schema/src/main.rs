//! `schema`: the OpenAPI v3 schemas and CRDs of the sample kinds.
//!
//! ```sh
//! cargo run -p schema -- dump AddressableService     # openAPIV3Schema as YAML
//! cargo run -p schema -- crd SimpleDeployment        # the whole CRD as YAML
//! cargo run -p schema -- update-crds config          # refresh config/300-<kind>.yaml in place
//! cargo run -p schema -- update-crds --verify config # exit 1 if any is stale
//! ```
//!
//! `update-crds` rewrites only the `openAPIV3Schema` block of each manifest;
//! names, labels and printer columns stay as written.

mod splice;
mod yaml;

use std::path::Path;
use std::process::ExitCode;

use apis::v1alpha1::{AddressableService, SimpleDeployment};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kinject_types::crd::custom_resource_definition;
use kinject_types::schema::openapi_v3_schema;
use serde_json::Value;

/// A kind this command knows.
struct Kind {
    name: &'static str,
    schema: fn() -> Value,
    crd: fn() -> Result<CustomResourceDefinition, serde_json::Error>,
}

const KINDS: &[Kind] = &[
    Kind {
        name: "AddressableService",
        schema: openapi_v3_schema::<AddressableService>,
        crd: custom_resource_definition::<AddressableService>,
    },
    Kind {
        name: "SimpleDeployment",
        schema: openapi_v3_schema::<SimpleDeployment>,
        crd: custom_resource_definition::<SimpleDeployment>,
    },
];

const USAGE: &str = "usage:
  schema dump <Kind>                  print the kind's openAPIV3Schema as YAML
  schema crd <Kind>                   print the kind's CustomResourceDefinition as YAML
  schema update-crds [--verify] <dir> refresh the openAPIV3Schema of <dir>/300-<kind>.yaml
                                      (--verify: change nothing, exit 1 if any is stale)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args[..] {
        ["dump", kind] => with_kind(kind, |k| {
            print!("{}", yaml::to_yaml(&(k.schema)()));
            ExitCode::SUCCESS
        }),
        ["crd", kind] => with_kind(kind, |k| match (k.crd)().and_then(serde_json::to_value) {
            Ok(crd) => {
                print!("{}", yaml::to_yaml(&crd));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: cannot build the CRD of {}: {e}", k.name);
                ExitCode::FAILURE
            }
        }),
        ["update-crds", dir] => update_crds(Path::new(dir), false),
        ["update-crds", "--verify", dir] => update_crds(Path::new(dir), true),
        ["-h" | "--help"] => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("error: unexpected arguments {args:?}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn with_kind(name: &str, run: impl FnOnce(&Kind) -> ExitCode) -> ExitCode {
    match KINDS.iter().find(|k| k.name == name) {
        Some(kind) => run(kind),
        None => {
            let known: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
            eprintln!("unknown Kind: {name}, expected one of [{}]", known.join(", "));
            ExitCode::from(2)
        }
    }
}

fn update_crds(dir: &Path, verify: bool) -> ExitCode {
    let mut stale = Vec::new();
    for kind in KINDS {
        let path = dir.join(format!("300-{}.yaml", kind.name.to_lowercase()));
        let manifest = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => {
                eprintln!(
                    "error: {}: cannot read the CRD manifest of {}: {e}; create it (`schema crd {}` prints a starting point)",
                    path.display(),
                    kind.name,
                    kind.name
                );
                return ExitCode::FAILURE;
            }
        };
        let updated = match splice::splice_schema(&manifest, &yaml::to_yaml(&(kind.schema)())) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("error: {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        };
        if updated == manifest {
            continue;
        }
        if verify {
            stale.push(path);
        } else if let Err(e) = std::fs::write(&path, updated) {
            eprintln!("error: {}: cannot write: {e}", path.display());
            return ExitCode::FAILURE;
        } else {
            eprintln!("wrote {}", path.display());
        }
    }
    if stale.is_empty() {
        return ExitCode::SUCCESS;
    }
    eprintln!("error: CRD schemas are out of date:");
    for path in &stale {
        eprintln!("  {} (openAPIV3Schema differs)", path.display());
    }
    eprintln!("run `hack/update-codegen.sh` and commit the result");
    ExitCode::FAILURE
}
