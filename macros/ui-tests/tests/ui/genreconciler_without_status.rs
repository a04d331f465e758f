use kinject_macros::Kind;

// What a kind embeds matters not here: the markers are refused first.
pub struct ObjectMeta;

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
