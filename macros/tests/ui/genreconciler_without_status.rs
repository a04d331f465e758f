use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_macros::Kind;

#[derive(Default)]
pub struct ThingSpec;

#[derive(Kind)]
#[kind(group = "samples.knative.dev", version = "v1alpha1", namespaced)]
#[genclient]
#[genreconciler]
pub struct Thing {
    pub metadata: ObjectMeta,
    pub spec: ThingSpec,
}

fn main() {}
