//! A row's world: an API server with the CRDs installed and the objects
//! stored exactly as given.

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kinject_runtime::injection::Context;
use kinject_runtime::network::DEFAULT_CLUSTER_DOMAIN;
use kinject_testenv::{TestEnv, UidGenerator};
use serde_json::Value;

use crate::check::describe;

/// A fresh API server with `crds` installed, the namespaces of `objects`
/// created and `objects` stored exactly as given (status included; any kinds, as
/// JSON), and a context over it. Keep the `TestEnv` to inspect what the code
/// under test did. Pass a generated crate's
/// `testing::custom_resource_definitions()`.
pub fn context(
    crds: &[CustomResourceDefinition],
    objects: impl IntoIterator<Item = Value>,
) -> Result<(Context, TestEnv), Box<dyn std::error::Error + Send + Sync>> {
    let env = TestEnv::builder()
        .uid_generator(UidGenerator::deterministic())
        .build();
    let objects: Vec<Value> = objects.into_iter().collect();
    seed(&env, crds, &objects, None)?;
    let ctx = Context::builder(env.client())
        .cluster_domain(DEFAULT_CLUSTER_DOMAIN)
        .build();
    Ok((ctx, env))
}

/// Installs `crds`, creates the namespaces of `objects` (and `namespace`), and
/// stores `objects` as given.
pub(crate) fn seed(
    env: &TestEnv,
    crds: &[CustomResourceDefinition],
    objects: &[Value],
    namespace: Option<&str>,
) -> Result<(), String> {
    for crd in crds {
        env.install_crd(crd).map_err(|e| format!("installing CRD: {e}"))?;
    }
    let namespaces: BTreeSet<String> = objects
        .iter()
        .filter_map(|o| o.pointer("/metadata/namespace").and_then(Value::as_str))
        .chain(namespace)
        .map(str::to_owned)
        .collect();
    for ns in namespaces {
        if env.get_object("", "v1", "namespaces", None, &ns).is_none() {
            env.create_object(
                serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )
            .map_err(|e| format!("creating namespace {ns}: {e}"))?;
        }
    }
    for obj in objects {
        env.seed_object(obj.clone())
            .map_err(|e| format!("storing {}: {e}", describe(obj)))?;
    }
    Ok(())
}
