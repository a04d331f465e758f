//! `schema`: the OpenAPI v3 schemas and CRDs of this project's custom
//! resource kinds (see `kinject_schema`).
//!
//! ```sh
//! cargo run -p schema -- dump <Kind>         # openAPIV3Schema as YAML
//! cargo run -p schema -- crd <Kind>          # the whole CRD as YAML
//! cargo run -p schema -- update-crds config  # refresh config/300-<kind>.yaml in place
//! ```

fn main() -> std::process::ExitCode {
    kinject_schema::main(generated::registry::custom_kinds())
}
