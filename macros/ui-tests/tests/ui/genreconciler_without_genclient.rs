use kinject_macros::Kind;

// What a kind embeds matters not here: the markers are refused first.
pub struct ObjectMeta;

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
