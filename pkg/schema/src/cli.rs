//! The command line: `dump`, `crd`, `validate` and `update-crds`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kinject_types::registry::{CustomKind, custom_resource_definitions};

use crate::manifests::{crd_for, update_crds};
use crate::{names, yaml};

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
        /// The kind: as in a manifest (`AddressableService`), or any name
        /// kubectl takes for it (`addressableservices`, `asvc`, with the
        /// group: `addressableservices.samples.knative.dev`).
        kind: String,
        /// Which version of a kind that has several (default: the stored one).
        #[arg(long)]
        version: Option<String>,
    },
    /// Print a kind's CustomResourceDefinition as YAML.
    Crd {
        /// The kind, by any name `dump` takes.
        kind: String,
        /// The directory of the manifests, whose webhook Service the CRD of
        /// a kind with a hub converts through.
        #[arg(long, default_value = "config")]
        dir: PathBuf,
    },
    /// Check manifests against the CRDs, with no cluster, as the API server
    /// would on `kubectl apply`: schema, CEL rules, and transition rules
    /// against --old. Prints the API server's message for each refusal;
    /// exits 1 if there is one.
    Validate {
        /// A manifest, or a directory of `.yaml`/`.yml` manifests; repeatable.
        #[arg(short = 'f', long = "filename", required = true)]
        paths: Vec<PathBuf>,
        /// The same objects as they are stored now: each manifest is then
        /// checked as an update of its old self; repeatable.
        #[arg(long)]
        old: Vec<PathBuf>,
        /// Skip objects of kinds that are neither this project's nor
        /// Kubernetes' (another operator's CRDs), instead of failing.
        #[arg(long)]
        skip_unknown: bool,
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

/// Runs the command line over `kinds` (a project's generated registry).
#[must_use]
pub fn main(kinds: Vec<CustomKind>) -> ExitCode {
    // Only the CRD commands merge versions: `dump` of one type works even
    // while its versions disagree.
    let definitions = || {
        custom_resource_definitions(&kinds).map_err(|e| {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        })
    };
    match Cli::parse().command {
        Command::Dump { kind, version } => match find_version(&kinds, &kind, version.as_deref()) {
            Ok(k) => {
                print!("{}", yaml::to_yaml(&k.schema()));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(2)
            }
        },
        Command::Crd { kind, dir } => match definitions() {
            Err(code) => code,
            Ok(definitions) => match names::resolve(&kinds, &kind).map(|k| {
                definitions
                    .iter()
                    .find(|d| d.kind == k.kind && d.crd.spec.group == k.group)
            }) {
                Ok(Some(definition)) => match crd_for(definition, &dir) {
                    Ok(crd) => {
                        print!("{}", yaml::to_yaml(&crd));
                        ExitCode::SUCCESS
                    }
                    Err(e) => {
                        eprintln!("error: {e}");
                        ExitCode::FAILURE
                    }
                },
                Ok(None) => {
                    eprintln!("error: {kind} has no CRD among the registry's");
                    ExitCode::FAILURE
                }
                Err(e) => {
                    eprintln!("{e}");
                    ExitCode::from(2)
                }
            },
        },
        Command::Validate {
            paths,
            old,
            skip_unknown,
        } => match definitions() {
            Err(code) => code,
            Ok(definitions) => crate::validate::validate(&definitions, &paths, &old, skip_unknown),
        },
        Command::UpdateCrds { verify, dir } => match definitions() {
            Err(code) => code,
            Ok(definitions) => update_crds(&definitions, &dir, verify),
        },
    }
}

/// The entry of `kind` in `version`, or, without one, the version stored.
pub(crate) fn find_version<'a>(
    kinds: &'a [CustomKind],
    kind: &str,
    version: Option<&str>,
) -> Result<&'a CustomKind, String> {
    let named = names::resolve(kinds, kind)?;
    let versions: Vec<&CustomKind> = kinds
        .iter()
        .filter(|k| k.kind == named.kind && k.group == named.group)
        .collect();
    let kind = named.kind.as_str();
    let found = match version {
        Some(version) => versions.iter().find(|k| k.version == version),
        None if versions.len() == 1 => versions.first(),
        // The hub is stored unless another version says `storage`.
        None => versions
            .iter()
            .find(|k| k.storage)
            .or_else(|| versions.iter().find(|k| k.hub)),
    };
    let asked = match version {
        Some(version) => format!("no version {version}"),
        None => "no stored version (storage or hub)".to_owned(),
    };
    match found {
        Some(k) => Ok(k),
        None => Err(format!(
            "{kind} has {asked}; its versions are [{}]",
            versions
                .iter()
                .map(|k| k.version.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}
