//! `schema`: the OpenAPI v3 schemas and CRDs of this project's custom
//! resource kinds (see `kinject_schema`).
//!
//! ```sh
//! cargo run -p schema -- dump AddressableService     # openAPIV3Schema as YAML
//! cargo run -p schema -- crd SimpleDeployment        # the whole CRD as YAML
//! cargo run -p schema -- update-crds config          # refresh config/300-<kind>.yaml in place
//! ```

fn main() -> std::process::ExitCode {
    kinject_schema::main(generated::registry::custom_kinds())
}
