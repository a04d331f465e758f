use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_macros::Kind;

#[derive(Default)]
pub struct ThingStatus {}

#[derive(Kind)]
#[kind(group = "samples.knative.dev", version = "v1alpha1", namespaced)]
#[genreconciler]
pub struct Thing {
    pub metadata: ObjectMeta,
    pub status: Option<ThingStatus>,
}

fn main() {}
