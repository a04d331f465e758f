//! Generates the typed layer (clients, informers, listers, the Greeting
//! reconciler glue, the CRD registry) into OUT_DIR on every build, instead of
//! checking it in: `hack/update-codegen.sh` is not needed in a project built
//! this way.

use kinject_codegen::{Builder, ExternalKind};

fn main() {
    let Some(config_map) = ExternalKind::from_k8s_openapi_path("k8s_openapi::api::core::v1::ConfigMap")
    else {
        eprintln!("k8s_openapi::api::core::v1::ConfigMap is not a k8s-openapi kind path");
        std::process::exit(1);
    };
    let result = Builder::new()
        .api(
            "greeting_api",
            "greeting_api::v1alpha1",
            "../greeting-api/src/v1alpha1",
        )
        .api(
            "greeting_api",
            "greeting_api::v1beta1",
            "../greeting-api/src/v1beta1",
        )
        .external(config_map)
        .testing(true)
        .generate();
    if let Err(err) = result {
        eprintln!("{err}");
        std::process::exit(1);
    }
}
