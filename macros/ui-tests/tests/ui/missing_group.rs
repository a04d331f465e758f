use kinject_macros::Kind;

// What a kind embeds matters not here: the markers are refused first.
pub struct ObjectMeta;

#[derive(Kind)]
#[kind(version = "v1alpha1", namespaced)]
pub struct Thing {
    pub metadata: ObjectMeta,
}

fn main() {}
