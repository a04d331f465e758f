//! The CustomResourceDefinition of a kind, built from its `#[kind]` markers and
//! its schema.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresourceScale,
    CustomResourceSubresourceStatus, CustomResourceSubresources, CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;

use super::schema::openapi_v3_schema;
use super::{KindInfo, PrinterColumn};

/// The CRD serving `K`: one served and stored version, Knative's schema shape
/// (see [`openapi_v3_schema`]), the status subresource when `K` has a status,
/// the scale subresource of its `scale(...)` marker, and the printer columns
/// `kubectl get` shows: those of its `printcolumn(...)` markers, then, when its
/// status has conditions, Ready and Reason of the Ready condition (as Knative's
/// CRDs show them), then Age, which kube-apiserver shows only for a CRD
/// without columns of its own.
pub fn custom_resource_definition<K: KindInfo + JsonSchema>()
-> Result<CustomResourceDefinition, serde_json::Error> {
    let plural = K::plural(&()).into_owned();
    let group = K::group(&()).into_owned();
    let mut schema = openapi_v3_schema::<K>();
    if let Some(max) = K::MAX_DESCRIPTION_LEN {
        cap_descriptions(&mut schema, max);
    }
    let has_conditions = schema
        .pointer("/properties/status/properties/conditions")
        .is_some();
    let mut columns: Vec<CustomResourceColumnDefinition> =
        K::PRINTER_COLUMNS.iter().map(marker_column).collect();
    if has_conditions {
        columns.extend(condition_columns());
    }
    if !columns.is_empty() {
        columns.push(column("Age", "date", ".metadata.creationTimestamp"));
    }
    let schema: JSONSchemaProps = serde_json::from_value(schema)?;
    let strings = |items: &[&str]| (!items.is_empty()).then(|| items.iter().map(|s| s.to_string()).collect());
    let subresources = (K::HAS_STATUS || K::SCALE.is_some()).then(|| CustomResourceSubresources {
        status: K::HAS_STATUS
            .then(|| CustomResourceSubresourceStatus(serde_json::Value::Object(Default::default()))),
        scale: K::SCALE.map(|scale| CustomResourceSubresourceScale {
            spec_replicas_path: scale.spec_replicas.to_owned(),
            status_replicas_path: scale.status_replicas.to_owned(),
            label_selector_path: (!scale.label_selector.is_empty()).then(|| scale.label_selector.to_owned()),
        }),
    });
    Ok(CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("{plural}.{group}")),
            ..ObjectMeta::default()
        },
        spec: CustomResourceDefinitionSpec {
            group,
            names: CustomResourceDefinitionNames {
                kind: K::kind(&()).into_owned(),
                list_kind: Some(format!("{}List", K::kind(&()))),
                plural,
                singular: Some(K::SINGULAR.to_owned()),
                short_names: strings(K::SHORT_NAMES),
                categories: strings(K::CATEGORIES),
            },
            scope: if K::NAMESPACED { "Namespaced" } else { "Cluster" }.to_owned(),
            versions: vec![CustomResourceDefinitionVersion {
                name: K::version(&()).into_owned(),
                served: true,
                storage: true,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(schema),
                }),
                subresources,
                additional_printer_columns: (!columns.is_empty()).then_some(columns),
                ..CustomResourceDefinitionVersion::default()
            }],
            ..CustomResourceDefinitionSpec::default()
        },
        status: None,
    })
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

fn marker_column(marker: &PrinterColumn) -> CustomResourceColumnDefinition {
    let text = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    CustomResourceColumnDefinition {
        description: text(marker.description),
        format: text(marker.format),
        priority: (marker.priority != 0).then_some(marker.priority),
        ..column(marker.name, marker.type_, marker.json_path)
    }
}

fn column(name: &str, type_: &str, json_path: &str) -> CustomResourceColumnDefinition {
    CustomResourceColumnDefinition {
        name: name.to_owned(),
        type_: type_.to_owned(),
        json_path: json_path.to_owned(),
        ..CustomResourceColumnDefinition::default()
    }
}

/// Ready and Reason of the Ready condition, as Knative's CRDs show them.
fn condition_columns() -> [CustomResourceColumnDefinition; 2] {
    [
        column("Ready", "string", ".status.conditions[?(@.type=='Ready')].status"),
        column(
            "Reason",
            "string",
            ".status.conditions[?(@.type=='Ready')].reason",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::cap_descriptions;

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
