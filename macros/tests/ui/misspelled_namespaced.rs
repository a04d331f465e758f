use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_macros::Kind;

#[derive(Kind)]
#[kind(group = "samples.knative.dev", version = "v1alpha1", namespace)]
pub struct Thing {
    pub metadata: ObjectMeta,
}

fn main() {}
