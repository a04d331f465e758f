use kinject_macros::Kind;

// What a kind embeds matters not here: the markers are refused first.
pub struct ObjectMeta;

pub struct WidgetSpec {
    pub size: i32,
}

#[derive(Kind)]
#[kind(
    group = "example.dev",
    version = "v1",
    namespaced,
    printcolumn(name = "Size", type = "int", json_path = ".spec.size")
)]
pub struct Widget {
    pub metadata: ObjectMeta,
    pub spec: WidgetSpec,
}

fn main() {}
