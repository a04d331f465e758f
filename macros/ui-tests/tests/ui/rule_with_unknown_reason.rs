use kinject_macros::rules;

// The struct is refused before its derive runs, so no schemars is needed.
#[rules]
#[derive(JsonSchema)]
pub struct WidgetSpec {
    #[rule("self == oldSelf", message = "size cannot change", reason = "Immutable")]
    pub size: i32,
}

fn main() {}
