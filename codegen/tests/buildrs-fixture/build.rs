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
        .external(ExternalKind {
            path: "k8s_openapi::api::core::v1::Pod".into(),
            group: String::new(),
            version: "v1".into(),
            kind: "Pod".into(),
            plural: "pods".into(),
            scope: Some(Scope::Namespaced),
            status: true,
            // A reconciler of Pods, generated as for our own kinds.
            reconciler: true,
        })
        .generate();
    if let Err(err) = result {
        eprintln!("{err}");
        std::process::exit(1);
    }
}
