//! YAML for schemas and CRDs as Kubernetes writes them: block style, two-space
//! indent, schema keys in `JSONSchemaProps` field order (description, type,
//! format, required, items, properties, ...), property names sorted.

use serde_json::{Map, Value};

/// Keys in the order Kubernetes declares them: the CRD's fields first, then
/// `JSONSchemaProps`. Keys not listed follow, sorted.
const KEY_ORDER: &[&str] = &[
    // CustomResourceDefinition and its parts.
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "labels",
    "annotations",
    "spec",
    "group",
    "names",
    "plural",
    "singular",
    "shortNames",
    "listKind",
    "categories",
    "scope",
    "versions",
    "served",
    "storage",
    "deprecated",
    "schema",
    "openAPIV3Schema",
    "subresources",
    "status",
    "additionalPrinterColumns",
    // JSONSchemaProps.
    "id",
    "$schema",
    "$ref",
    "description",
    "type",
    "format",
    "title",
    "default",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "enum",
    "maxProperties",
    "minProperties",
    "required",
    "items",
    "allOf",
    "oneOf",
    "anyOf",
    "not",
    "properties",
    "additionalProperties",
    "patternProperties",
    "dependencies",
    "additionalItems",
    "definitions",
    "externalDocs",
    "example",
    "nullable",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
];

/// Maps whose keys are data (property names, labels), not field names: sorted.
const DATA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "definitions",
    "labels",
    "annotations",
];

/// `value` as a YAML document (no leading `---`), ending in a newline.
pub(crate) fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => write_map(&mut out, map, 0, false),
        Value::Array(items) if !items.is_empty() => write_seq(&mut out, items, 0),
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
    out
}

fn ordered_keys(map: &Map<String, Value>, data: bool) -> Vec<&String> {
    let mut keys: Vec<&String> = map.keys().collect();
    if data {
        keys.sort();
    } else {
        keys.sort_by_key(|k| {
            (
                KEY_ORDER.iter().position(|o| o == k).unwrap_or(usize::MAX),
                k.as_str(),
            )
        });
    }
    keys
}

fn write_map(out: &mut String, map: &Map<String, Value>, indent: usize, data: bool) {
    for key in ordered_keys(map, data) {
        let value = &map[key];
        out.push_str(&" ".repeat(indent));
        out.push_str(&string(key));
        out.push(':');
        write_nested(out, value, indent, DATA_MAPS.contains(&key.as_str()) && !data);
    }
}

/// The value after `key:` (or `- `): inline when scalar or empty, else a block.
fn write_nested(out: &mut String, value: &Value, indent: usize, data: bool) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push('\n');
            write_map(out, map, indent + 2, data);
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            write_seq(out, items, indent + 2);
        }
        other => {
            out.push(' ');
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
}

fn write_seq(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        match item {
            Value::Object(map) if !map.is_empty() => {
                // The first key shares the line with the dash.
                let mut block = String::new();
                write_map(&mut block, map, indent + 2, false);
                out.push_str(&" ".repeat(indent));
                out.push_str("- ");
                out.push_str(&block[indent + 2..]);
            }
            Value::Array(inner) if !inner.is_empty() => {
                out.push_str(&" ".repeat(indent));
                out.push('-');
                out.push('\n');
                write_seq(out, inner, indent + 2);
            }
            other => {
                out.push_str(&" ".repeat(indent));
                out.push_str("- ");
                out.push_str(&scalar(other));
                out.push('\n');
            }
        }
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => string(s),
        Value::Object(_) => "{}".to_owned(),
        Value::Array(_) => "[]".to_owned(),
    }
}

/// A string as a plain scalar when YAML reads it back as the same string,
/// else double-quoted (JSON escapes are valid YAML escapes).
fn string(s: &str) -> String {
    if is_plain_safe(s) {
        s.to_owned()
    } else {
        serde_json::Value::String(s.to_owned()).to_string()
    }
}

fn is_plain_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    if "-?:,[]{}#&*!|>'\"%@`".contains(first) || first.is_whitespace() || s.ends_with(char::is_whitespace) {
        return false;
    }
    if s.contains(": ") || s.contains(" #") || s.ends_with(':') || s.chars().any(char::is_control) {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    if ["true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"].contains(&lower.as_str()) {
        return false;
    }
    // Anything a YAML 1.1 or 1.2 reader might take for a number stays quoted.
    let numeric = s.parse::<f64>().is_ok()
        || (first.is_ascii_digit() || first == '.' || first == '+')
            && s.chars()
                .all(|c| c.is_ascii_hexdigit() || "._:+-xXoO".contains(c));
    !numeric
}

/// A number as Go's `encoding/json` writes a `float64` (the type of a schema's
/// bounds in `JSONSchemaProps`): a whole number without a fraction, so the
/// bound of an `i32` reads `2147483647`, not `2147483647.0`.
fn number(n: &serde_json::Number) -> String {
    match n.as_f64() {
        // Whole floats below 2^53 are exact as integers.
        Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 => {
            (f as i64).to_string()
        }
        _ => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn orders_schema_keys_like_kubernetes_and_sorts_properties() {
        let schema = json!({
            "properties": {"type": {"type": "string"}, "CACerts": {"type": "string"}, "audience": {"type": "string"}},
            "required": ["url"],
            "type": "object",
            "description": "Address: where to reach it.",
        });
        assert_eq!(
            to_yaml(&schema),
            "description: \"Address: where to reach it.\"\ntype: object\nrequired:\n  - url\nproperties:\n  \
             CACerts:\n    type: string\n  audience:\n    type: string\n  type:\n    type: string\n"
        );
    }

    #[test]
    fn lists_of_maps_and_empty_values() {
        let value = json!({"versions": [{"served": true, "name": "v1"}], "status": {}, "shortNames": []});
        assert_eq!(
            to_yaml(&value),
            "shortNames: []\nversions:\n  - name: v1\n    served: true\nstatus: {}\n"
        );
    }

    #[test]
    fn quotes_what_yaml_would_misread() {
        for (s, plain) in [
            ("ServiceName holds the name, of a Service.", true),
            ("int32", true),
            (".status.address.url", true),
            ("true", false),
            ("1.5", false),
            ("0x1F", false),
            ("", false),
            ("- item", false),
            ("a: b", false),
            ("two\n\nparagraphs", false),
        ] {
            assert_eq!(is_plain_safe(s), plain, "{s:?}");
        }
        assert_eq!(string("two\n\nlines"), "\"two\\n\\nlines\"");
    }

    #[test]
    fn whole_floats_read_as_integers_as_go_writes_them() {
        let value = json!({"maximum": 2_147_483_647.0, "minimum": -2_147_483_648.0});
        assert_eq!(to_yaml(&value), "maximum: 2147483647\nminimum: -2147483648\n");
        let n = |v: serde_json::Value| number(v.as_number().unwrap());
        assert_eq!(n(json!(0.5)), "0.5");
        assert_eq!(n(json!(1e300)), "1e+300");
        assert_eq!(n(json!(3)), "3");
    }
}
