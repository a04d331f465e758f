//! `schema`: the OpenAPI v3 schemas and CRDs of the application's custom
//! resource kinds, as the generated registry (`generated::registry`) lists them.
//!
//! ```sh
//! cargo run -p schema -- dump AddressableService     # openAPIV3Schema as YAML
//! cargo run -p schema -- crd SimpleDeployment        # the whole CRD as YAML
//! cargo run -p schema -- update-crds config          # refresh config/300-<kind>.yaml in place
//! cargo run -p schema -- update-crds --verify config # exit 1 if any is stale
//! ```
//!
//! `update-crds` rewrites only the `openAPIV3Schema` block of each manifest;
//! names, labels and printer columns stay as written. A kind without a
//! manifest gets its whole CRD, written once.

// The generated kind registry, included as a file rather than through the
// `generated` crate: `hack/update-codegen.sh` builds this command, and the
// registry needs only the API types and kinject-types, not the runtime the
// rest of `generated` is built on.
#[path = "../../../generated/src/registry.rs"]
#[allow(unreachable_pub)] // public in `generated`, where other crates use it
mod registry;
mod splice;
mod yaml;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kinject_types::registry::{CustomKind, find};
use registry::custom_kinds;

/// The OpenAPI v3 schemas and CRDs of the application's custom resource kinds.
#[derive(Debug, Parser)]
#[command(name = "schema")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print a kind's openAPIV3Schema as YAML.
    Dump {
        /// The kind, as in a manifest (`AddressableService`).
        kind: String,
    },
    /// Print a kind's CustomResourceDefinition as YAML.
    Crd {
        /// The kind, as in a manifest (`AddressableService`).
        kind: String,
    },
    /// Refresh the openAPIV3Schema of <dir>/300-<kind>.yaml for every kind;
    /// write the whole CRD there for a kind that has none yet.
    UpdateCrds {
        /// Change nothing; exit 1 if any schema is stale.
        #[arg(long)]
        verify: bool,
        /// The directory of the manifests (`config`).
        dir: PathBuf,
    },
}

fn main() -> ExitCode {
    let kinds = custom_kinds();
    match Cli::parse().command {
        Command::Dump { kind } => with_kind(&kinds, &kind, |k| {
            print!("{}", yaml::to_yaml(&k.schema()));
            ExitCode::SUCCESS
        }),
        Command::Crd { kind } => with_kind(&kinds, &kind, |k| match k.crd().and_then(serde_json::to_value) {
            Ok(crd) => {
                print!("{}", yaml::to_yaml(&crd));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: cannot build the CRD of {}: {e}", k.kind);
                ExitCode::FAILURE
            }
        }),
        Command::UpdateCrds { verify, dir } => update_crds(&kinds, &dir, verify),
    }
}

/// The manifest `update-crds` starts a new kind's CRD with: a comment saying
/// what is generated, then the whole CRD, labelled like the CRD manifests
/// already there (`labels`), so selectors over them (a release label, an
/// install label) find the new one too.
fn new_manifest(kind: &CustomKind, labels: Option<&serde_json::Value>) -> Result<String, serde_json::Error> {
    let mut crd = serde_json::to_value(kind.crd()?)?;
    if let Some(labels) = labels {
        crd["metadata"]["labels"] = labels.clone();
    }
    Ok(format!(
        "# The CRD of {plural}.{group}. The openAPIV3Schema block is generated from the Rust\n\
         # types by hack/update-codegen.sh (`cargo run -p schema -- dump {kind}`);\n\
         # edit the rest by hand.\n{yaml}",
        plural = kind.plural,
        group = kind.group,
        kind = kind.kind,
        yaml = yaml::to_yaml(&crd)
    ))
}

/// `<dir>/300-<kind>.yaml`.
fn manifest_path(dir: &Path, kind: &CustomKind) -> PathBuf {
    dir.join(format!("300-{}.yaml", kind.kind.to_lowercase()))
}

fn with_kind(kinds: &[CustomKind], name: &str, run: impl FnOnce(&CustomKind) -> ExitCode) -> ExitCode {
    match find(kinds, name) {
        Some(kind) => run(kind),
        None => {
            let known: Vec<&str> = kinds.iter().map(|k| k.kind.as_str()).collect();
            eprintln!("unknown Kind: {name}, expected one of [{}]", known.join(", "));
            ExitCode::from(2)
        }
    }
}

fn update_crds(kinds: &[CustomKind], dir: &Path, verify: bool) -> ExitCode {
    let mut stale = Vec::new();
    let sibling_labels = kinds.iter().find_map(|kind| {
        let text = std::fs::read_to_string(manifest_path(dir, kind)).ok()?;
        let manifest: serde_json::Value = serde_saphyr::from_str(&text).ok()?;
        manifest.pointer("/metadata/labels").cloned()
    });
    for kind in kinds {
        let path = manifest_path(dir, kind);
        let manifest = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            // A new kind: its whole CRD, to edit by hand from then on.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let manifest = match new_manifest(kind, sibling_labels.as_ref()) {
                    Ok(text) => text,
                    Err(e) => {
                        eprintln!("error: cannot build the CRD of {}: {e}", kind.kind);
                        return ExitCode::FAILURE;
                    }
                };
                if verify {
                    stale.push((path, "missing"));
                } else if let Err(e) = std::fs::write(&path, manifest) {
                    eprintln!("error: {}: cannot write: {e}", path.display());
                    return ExitCode::FAILURE;
                } else {
                    eprintln!("wrote {}", path.display());
                }
                continue;
            }
            Err(e) => {
                eprintln!(
                    "error: {}: cannot read the CRD manifest of {}: {e}",
                    path.display(),
                    kind.kind
                );
                return ExitCode::FAILURE;
            }
        };
        let updated = match splice::splice_schema(&manifest, &yaml::to_yaml(&kind.schema())) {
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
            stale.push((path, "openAPIV3Schema differs"));
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
    for (path, why) in &stale {
        eprintln!("  {} ({why})", path.display());
    }
    eprintln!("run `hack/update-codegen.sh` and commit the result");
    ExitCode::FAILURE
}
