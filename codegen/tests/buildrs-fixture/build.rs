//! Generates the typed layer for the fixture API and a Pod into OUT_DIR.

use kinject_codegen::model::Scope;
use kinject_codegen::{Builder, ExternalKind};

fn main() {
    let result = Builder::new()
        .api(
            "codegen-fixture-apis",
            "codegen_fixture_apis::v1",
            "../fixture-apis/src/v1",
        )
        // An older version of Gadget, which converts through v1.
        .api(
            "codegen-fixture-apis",
            "codegen_fixture_apis::v1alpha1",
            "../fixture-apis/src/v1alpha1",
        )
        // A reconciler of Pods, generated as for our own kinds.
        .external(
            ExternalKind::new("k8s_openapi::api::core::v1::Pod", "", "v1", "Pod", "pods")
                .scope(Scope::Namespaced)
                .status(true)
                .reconciler(true),
        )
        .generate();
    if let Err(err) = result {
        eprintln!("{err}");
        std::process::exit(1);
    }
}
