//! OpenAPI v3 schemas of kinds in the shape Knative's CRDs use.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

/// The `openAPIV3Schema` of a kind: an object with `spec` and `status`, every
/// subschema inlined, descriptions from doc comments, `required` listing the
/// fields that are always written (those without `skip_serializing_if`), and
/// integer formats.
///
/// Knative's conventions are applied on top of schemars' output: no `nullable`,
/// no `default` (a default would let the API server fill in a required field
/// that the user left out), no `title`, and doc-comment lines joined with
/// spaces (paragraphs stay apart).
pub fn openapi_v3_schema<K: JsonSchema>() -> Value {
    let settings = SchemaSettings::openapi3().for_serialize().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let mut schema = settings.into_generator().into_root_schema_for::<K>().to_value();
    if let Some(root) = schema.as_object_mut() {
        root.remove("description");
    }
    tidy(&mut schema);
    schema
}

fn tidy(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for key in [
                "title",
                "default",
                "nullable",
                "$schema",
                "definitions",
                "$defs",
                "examples",
            ] {
                map.remove(key);
            }
            if let Some(Value::String(d)) = map.get_mut("description") {
                *d = join_lines(d);
            }
            map.values_mut().for_each(tidy);
        }
        Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}

fn join_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| paragraph.split('\n').map(str::trim).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_lines_within_paragraphs() {
        assert_eq!(join_lines("a\nb\n\nc\nd"), "a b\n\nc d");
    }
}
