//! OpenAPI v3 schemas of kinds in the shape Knative's CRDs use.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

/// The `openAPIV3Schema` of a kind: an object with `spec` and `status`, every
/// subschema inlined (an embedded `ObjectMeta` as just `type: object`),
/// descriptions from doc comments, `required` listing the
/// fields that are always written and must be given (neither
/// `skip_serializing_if` nor `#[serde(default)]`, as controller-gen leaves
/// `omitempty` and `+optional` fields out), and
/// integer formats with their ranges as `minimum`/`maximum` (an `i32` field
/// gets int32's, a `u32` field 0 to 4294967295), so the API server refuses
/// numbers the type cannot hold.
///
/// Knative's conventions are applied on top of schemars' output: no `nullable`,
/// no `default` (a default would let the API server fill in a required field
/// that the user left out), no `title`, and doc-comment lines joined with
/// spaces (paragraphs stay apart).
pub fn openapi_v3_schema<K: JsonSchema>() -> Value {
    openapi_v3_schema_and_rule_sites::<K>().0
}

/// Where one CEL rule of a schema comes from: its place in the schema
/// (`properties[spec].x-kubernetes-validations[0]`, as kube-apiserver's
/// errors name it under `openAPIV3Schema`) and the `file:line` of its
/// `#[rule]` marker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleSite {
    /// `properties[spec].x-kubernetes-validations[0]`.
    pub path: String,
    /// `apis/src/v1alpha1/widget_types.rs:31`.
    pub defined_at: String,
}

/// [`openapi_v3_schema`], and the place of each `#[rule]` marker in it.
pub fn openapi_v3_schema_and_rule_sites<K: JsonSchema>() -> (Value, Vec<RuleSite>) {
    let settings = SchemaSettings::openapi3().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    // What is written (serialize) and what may be left out (deserialize)
    // each drop fields from `required`; the CRD requires only what both keep.
    let mut schema = settings
        .clone()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<K>()
        .to_value();
    let accepted = settings
        .for_deserialize()
        .into_generator()
        .into_root_schema_for::<K>();
    require_only_what_must_be_given(&mut schema, accepted.as_value());
    if let Some(root) = schema.as_object_mut() {
        root.remove("description");
    }
    let mut sites = Vec::new();
    rule_sites(&schema, "", &mut sites);
    tidy(&mut schema);
    (schema, sites)
}

fn rule_sites(schema: &Value, path: &str, out: &mut Vec<RuleSite>) {
    let Some(map) = schema.as_object() else {
        return;
    };
    let at = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    for (i, rule) in map
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if let Some(place) = rule.get(crate::rule::DEFINED_AT).and_then(Value::as_str) {
            out.push(RuleSite {
                path: at(&format!("x-kubernetes-validations[{i}]")),
                defined_at: place.to_owned(),
            });
        }
    }
    for (name, child) in map
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        rule_sites(child, &at(&format!("properties[{name}]")), out);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = map.get(key) {
            rule_sites(child, &at(key), out);
        }
    }
}

/// Removes from each `required` of `written` the fields `accepted`, the same
/// schema as deserializing sees it, lets a user leave out (those with
/// `#[serde(default)]`). The two schemas have the same shape; where they do
/// not, `written` is kept as it is.
fn require_only_what_must_be_given(written: &mut Value, accepted: &Value) {
    match (written, accepted) {
        (Value::Object(map), Value::Object(other)) => {
            if other.contains_key("properties")
                && let Some(Value::Array(required)) = map.get_mut("required")
            {
                let given: Vec<&Value> = other
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|names| names.iter().collect())
                    .unwrap_or_default();
                required.retain(|name| given.contains(&name));
                if required.is_empty() {
                    map.remove("required");
                }
            }
            for (key, value) in map.iter_mut() {
                if let Some(counterpart) = other.get(key) {
                    require_only_what_must_be_given(value, counterpart);
                }
            }
        }
        (Value::Array(items), Value::Array(others)) => {
            for (item, counterpart) in items.iter_mut().zip(others) {
                require_only_what_must_be_given(item, counterpart);
            }
        }
        _ => {}
    }
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
                crate::rule::DEFINED_AT,
            ] {
                map.remove(key);
            }
            if let Some(Value::String(d)) = map.get_mut("description") {
                *d = join_lines(d);
            }
            bound_integer(map);
            unit_enum(map);
            if is_object_meta(map) {
                map.retain(|key, _| key == "description");
                map.insert("type".into(), Value::from("object"));
                return;
            }
            map.values_mut().for_each(tidy);
        }
        Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}

/// A Rust enum of unit variants with doc comments comes from schemars as a
/// `oneOf` of one-value string enums, which a structural schema cannot have
/// (a type inside `oneOf`, none beside it); it becomes one `type: string`
/// with every value in `enum`, as controller-gen writes Go enums.
fn unit_enum(map: &mut serde_json::Map<String, Value>) {
    let Some(Value::Array(variants)) = map.get("oneOf") else {
        return;
    };
    let values: Option<Vec<Value>> = variants
        .iter()
        .map(|variant| {
            let single = match (variant.get("enum"), variant.get("const")) {
                (Some(Value::Array(values)), None) if values.len() == 1 => values[0].clone(),
                (None, Some(value)) => value.clone(),
                _ => return None,
            };
            (variant.get("type").and_then(Value::as_str) == Some("string") && single.is_string())
                .then_some(single)
        })
        .collect();
    if let Some(values) = values {
        map.remove("oneOf");
        map.insert("type".into(), Value::from("string"));
        map.insert("enum".into(), Value::Array(values));
    }
}

/// True for the schema of an embedded `ObjectMeta` (the `metadata` of a
/// `PodTemplateSpec` or `JobTemplateSpec` field), which is written as just
/// `type: object`, as controller-gen writes it: the API server checks the
/// metadata of the objects it creates from a template itself, and the whole
/// ObjectMeta schema (managedFields, ownerReferences, ...) would make the CRD
/// too big for `kubectl apply`. Inlined schemas carry no type name, so
/// ObjectMeta is known by fields no other Kubernetes type has together.
fn is_object_meta(map: &serde_json::Map<String, Value>) -> bool {
    let Some(properties) = map.get("properties").and_then(Value::as_object) else {
        return false;
    };
    [
        "managedFields",
        "ownerReferences",
        "resourceVersion",
        "generateName",
        "creationTimestamp",
    ]
    .iter()
    .all(|field| properties.contains_key(*field))
}

/// The range of an integer format, so the API server refuses a number the
/// Rust field cannot hold: kube-apiserver does not check integer formats, and
/// an `i32` field stored as 3000000000 would make the object undecodable for
/// every controller.
fn format_range(format: &str) -> Option<(i64, Option<i64>)> {
    Some(match format {
        "int8" => (i8::MIN.into(), Some(i8::MAX.into())),
        "int16" => (i16::MIN.into(), Some(i16::MAX.into())),
        "int32" => (i32::MIN.into(), Some(i32::MAX.into())),
        "uint8" => (0, Some(u8::MAX.into())),
        "uint16" => (0, Some(u16::MAX.into())),
        "uint32" => (0, Some(u32::MAX.into())),
        // JSON numbers the API server keeps are at most int64, so an unsigned
        // 64-bit field needs only its lower bound.
        "uint64" | "uint" => (0, None),
        _ => return None,
    })
}

/// Adds the bounds of an integer schema's format, keeping any tighter bound
/// a marker already set.
fn bound_integer(map: &mut serde_json::Map<String, Value>) {
    if map.get("type").and_then(Value::as_str) != Some("integer") {
        return;
    }
    let Some((min, max)) = map.get("format").and_then(Value::as_str).and_then(format_range) else {
        return;
    };
    let tighter = |existing: Option<&Value>, bound: i64, lower: bool| match existing.and_then(Value::as_f64) {
        // Integer bounds fit an f64 exactly within these ranges.
        Some(set) if (lower && set >= bound as f64) || (!lower && set <= bound as f64) => None,
        _ => Some(Value::from(bound)),
    };
    if let Some(min) = tighter(map.get("minimum"), min, true) {
        map.insert("minimum".into(), min);
    }
    if let Some(max) = max.and_then(|max| tighter(map.get("maximum"), max, false)) {
        map.insert("maximum".into(), max);
    }
}

fn join_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| paragraph.split('\n').map(str::trim).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Cuts every description in `schema` to at most `max` bytes, at the last
/// space before the limit, marked with `...`; 0 removes them.
pub fn cap_descriptions(schema: &mut serde_json::Value, max: usize) {
    use serde_json::Value;
    match schema {
        Value::Object(map) => {
            if max == 0 {
                map.remove("description");
            } else if let Some(Value::String(text)) = map.get_mut("description")
                && text.len() > max
            {
                let mut end = max;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                let cut = text[..end]
                    .rfind(char::is_whitespace)
                    .filter(|at| *at > 0)
                    .unwrap_or(end);
                text.truncate(cut);
                text.push_str("...");
            }
            for (key, value) in map.iter_mut() {
                match (key.as_str(), value) {
                    // Field names to schemas: a field called `description` is
                    // a schema, not a text to cut.
                    ("properties" | "patternProperties", Value::Object(fields)) => {
                        fields.values_mut().for_each(|field| cap_descriptions(field, max));
                    }
                    ("description", _) => {}
                    (_, value) => cap_descriptions(value, max),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| cap_descriptions(item, max)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn integer_formats_get_their_range_and_keep_tighter_bounds() {
        let mut schema = serde_json::json!({"type": "object", "properties": {
            "replicas": {"type": "integer", "format": "int32"},
            "port": {"type": "integer", "format": "uint16", "minimum": 1},
            "count": {"type": "integer", "format": "uint64", "minimum": 0},
            "big": {"type": "integer", "format": "int64"},
            "ratio": {"type": "number", "format": "double"},
        }});
        tidy(&mut schema);
        let p = &schema["properties"];
        assert_eq!(p["replicas"]["minimum"], -2_147_483_648_i64);
        assert_eq!(p["replicas"]["maximum"], 2_147_483_647_i64);
        assert_eq!(p["port"]["minimum"], 1, "a marker's tighter bound stays");
        assert_eq!(p["port"]["maximum"], 65_535);
        assert_eq!(p["count"]["minimum"], 0);
        assert!(p["count"].get("maximum").is_none());
        assert!(p["big"].get("minimum").is_none());
        assert!(p["ratio"].get("minimum").is_none());
    }

    #[derive(serde::Serialize, serde::Deserialize, JsonSchema)]
    #[allow(dead_code, reason = "only the schema is read")]
    struct Spec {
        always: i32,
        #[serde(default)]
        defaulted: i32,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        omitted_when_empty: Vec<String>,
        maybe: Option<String>,
        inner: Inner,
    }

    #[derive(serde::Serialize, serde::Deserialize, JsonSchema)]
    #[schemars(extend("required" = ["kept"]))]
    #[allow(dead_code, reason = "only the schema is read")]
    struct Inner {
        #[serde(default)]
        kept: String,
        #[serde(default)]
        loose: String,
    }

    #[test]
    fn required_lists_what_is_always_written_and_must_be_given() {
        let schema = openapi_v3_schema::<Spec>();
        assert_eq!(schema["required"], json!(["always", "inner"]));
        // Asked for by name, as a field Knative's CRD requires but that
        // decodes when missing (Go's zero value).
        assert_eq!(schema["properties"]["inner"]["required"], json!(["kept"]));
    }

    #[test]
    fn joins_lines_within_paragraphs() {
        assert_eq!(join_lines("a\nb\n\nc\nd"), "a b\n\nc d");
    }

    #[test]
    fn descriptions_are_cut_at_a_space_or_dropped_but_fields_named_description_stay() {
        let schema = json!({
            "description": "A widget that does things well",
            "type": "object",
            "properties": {
                "description": {"description": "Free text about the widget", "type": "string"},
                "sizes": {"type": "array", "items": {"description": "ünïcödé size", "type": "integer"}},
            },
        });
        let mut cut = schema.clone();
        cap_descriptions(&mut cut, 12);
        assert_eq!(cut["description"], "A widget...");
        assert_eq!(cut["properties"]["description"]["description"], "Free text...");
        assert_eq!(cut["properties"]["sizes"]["items"]["description"], "ünïcödé...");
        let mut dropped = schema.clone();
        cap_descriptions(&mut dropped, 0);
        assert_eq!(
            dropped,
            json!({"type": "object", "properties": {
                "description": {"type": "string"},
                "sizes": {"type": "array", "items": {"type": "integer"}},
            }})
        );
        let mut kept = schema.clone();
        cap_descriptions(&mut kept, 1000);
        assert_eq!(kept, schema);
    }
}
