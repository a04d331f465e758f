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
//! `update-crds` writes each kind's whole CRD from its type and `#[kind]`
//! markers; only `metadata.labels` and `metadata.annotations` of a manifest
//! stay as written.

// The generated kind registry, included as a file rather than through the
// `generated` crate: `hack/update-codegen.sh` builds this command, and the
// registry needs only the API types and kinject-types, not the runtime the
// rest of `generated` is built on.
#[path = "../../../generated/src/registry.rs"]
#[allow(unreachable_pub)] // public in `generated`, where other crates use it
mod registry;
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
    /// Write the CRD of every kind to <dir>/300-<kind>.yaml, keeping the
    /// labels and annotations of a manifest already there.
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

/// A kind's manifest: a comment saying where it comes from, then the whole
/// CRD built from the kind's markers, with the `labels` and `annotations` of
/// `metadata` as written there before (for a new kind, the labels of the CRD
/// manifests already there, so selectors over them, a release label or an
/// install label, find the new one too).
fn manifest(kind: &CustomKind, kept: &serde_json::Value) -> Result<String, serde_json::Error> {
    let mut crd = serde_json::to_value(kind.crd()?)?;
    for key in ["labels", "annotations"] {
        if let Some(value) = kept.get(key) {
            crd["metadata"][key] = value.clone();
        }
    }
    Ok(format!(
        "# The CRD of {kind} ({plural}.{group}), generated from its Rust type\n\
         # and #[kind] markers by hack/update-codegen.sh; print it with\n\
         # `cargo run -p schema -- crd {kind}`. Change the type or its markers, not this\n\
         # file: only metadata.labels and metadata.annotations are kept as written.\n{yaml}",
        plural = kind.plural,
        group = kind.group,
        kind = kind.kind,
        yaml = yaml::to_yaml(&crd)
    ))
}

/// The `labels` and `annotations` of a manifest's metadata, as an object.
fn kept_metadata(text: &str) -> Result<serde_json::Value, String> {
    let manifest: serde_json::Value = serde_saphyr::from_str(text)
        .map_err(|e| format!("is not valid YAML: {e}; fix it or delete the file to have it written anew"))?;
    let mut kept = serde_json::Map::new();
    for key in ["labels", "annotations"] {
        if let Some(value) = manifest
            .pointer(&format!("/metadata/{key}"))
            .filter(|v| !v.is_null())
        {
            kept.insert(key.to_owned(), value.clone());
        }
    }
    Ok(serde_json::Value::Object(kept))
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
        let labels = kept_metadata(&text).ok()?.get("labels")?.clone();
        Some(serde_json::json!({ "labels": labels }))
    });
    for kind in kinds {
        let path = manifest_path(dir, kind);
        let (kept, why) = match std::fs::read_to_string(&path) {
            Ok(text) => match kept_metadata(&text) {
                Ok(kept) => (Some((text, kept)), "differs from the kind and its markers"),
                Err(e) => {
                    eprintln!("error: {}: {e}", path.display());
                    return ExitCode::FAILURE;
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, "missing"),
            Err(e) => {
                eprintln!(
                    "error: {}: cannot read the CRD manifest of {}: {e}",
                    path.display(),
                    kind.kind
                );
                return ExitCode::FAILURE;
            }
        };
        let keep = kept
            .as_ref()
            .map(|(_, kept)| kept.clone())
            .or_else(|| sibling_labels.clone())
            .unwrap_or_default();
        let updated = match manifest(kind, &keep) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("error: cannot build the CRD of {}: {e}", kind.kind);
                return ExitCode::FAILURE;
            }
        };
        if kept.as_ref().is_some_and(|(text, _)| *text == updated) {
            continue;
        }
        if verify {
            stale.push((path, why));
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
    eprintln!("error: CRD manifests are out of date:");
    for (path, why) in &stale {
        eprintln!("  {} ({why})", path.display());
    }
    eprintln!("run `hack/update-codegen.sh` and commit the result");
    ExitCode::FAILURE
}
