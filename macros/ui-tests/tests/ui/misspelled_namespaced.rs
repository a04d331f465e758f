use kinject_macros::Kind;

// What a kind embeds matters not here: the markers are refused first.
pub struct ObjectMeta;

#[derive(Kind)]
#[kind(group = "samples.knative.dev", version = "v1alpha1", namespace)]
pub struct Thing {
    pub metadata: ObjectMeta,
}

fn main() {}
