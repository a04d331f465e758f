//! The `schema` command of a project: the OpenAPI v3 schemas and CRDs of its
//! custom resource kinds, as its generated registry lists them. A project's
//! `cmd/schema` is one line, [`main`] with `generated::registry::custom_kinds()`,
//! because the schemas come from the project's compiled types.
//!
//! ```sh
//! cargo run -p schema -- dump AddressableService     # openAPIV3Schema as YAML
//! cargo run -p schema -- crd SimpleDeployment        # the whole CRD as YAML
//! cargo run -p schema -- update-crds config          # refresh config/300-<kind>.yaml in place
//! cargo run -p schema -- update-crds --verify config # exit 1 if any is stale
//! cargo run -p schema -- validate -f config/samples/  # as the API server would check them
//! ```
//!
//! `update-crds` writes each kind's whole CRD from its type and `#[kind]`
//! markers; only `metadata.labels` and `metadata.annotations` of a manifest
//! stay as written.
#![warn(missing_docs)]

mod cli;
mod manifests;
mod names;
mod validate;
mod yaml;

pub use cli::main;
