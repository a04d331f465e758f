use kinject_macros::rules;

#[derive(Clone)]
#[rules]
pub struct WidgetSpec {
    #[rule("self >= 0")]
    pub size: i32,
}

fn main() {}
