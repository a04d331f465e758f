//! The CustomResourceDefinition of a kind, built from its `#[kind]` markers and
//! its schema.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresourceStatus,
    CustomResourceSubresources, CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;

use super::KindInfo;
use super::schema::openapi_v3_schema;

/// The CRD serving `K`: one served and stored version, Knative's schema shape
/// (see [`openapi_v3_schema`]), the status subresource when `K` has a status,
/// and, when that status has conditions, the printer columns Knative's CRDs
/// show (Ready and Reason of the Ready condition) plus Age, so `kubectl get`
/// says at a glance what the controller thinks.
pub fn custom_resource_definition<K: KindInfo + JsonSchema>()
-> Result<CustomResourceDefinition, serde_json::Error> {
    let plural = K::plural(&()).into_owned();
    let group = K::group(&()).into_owned();
    let schema = openapi_v3_schema::<K>();
    let columns = schema
        .pointer("/properties/status/properties/conditions")
        .is_some()
        .then(condition_columns);
    let schema: JSONSchemaProps = serde_json::from_value(schema)?;
    let strings = |items: &[&str]| (!items.is_empty()).then(|| items.iter().map(|s| s.to_string()).collect());
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
                subresources: K::HAS_STATUS.then(|| CustomResourceSubresources {
                    status: Some(CustomResourceSubresourceStatus(serde_json::Value::Object(
                        Default::default(),
                    ))),
                    scale: None,
                }),
                additional_printer_columns: columns,
                ..CustomResourceDefinitionVersion::default()
            }],
            ..CustomResourceDefinitionSpec::default()
        },
        status: None,
    })
}

/// Ready, Reason and Age, as `kubectl get` shows them for Knative's kinds.
fn condition_columns() -> Vec<CustomResourceColumnDefinition> {
    let column = |name: &str, type_: &str, json_path: &str| CustomResourceColumnDefinition {
        name: name.to_owned(),
        type_: type_.to_owned(),
        json_path: json_path.to_owned(),
        ..CustomResourceColumnDefinition::default()
    };
    vec![
        column("Ready", "string", ".status.conditions[?(@.type=='Ready')].status"),
        column(
            "Reason",
            "string",
            ".status.conditions[?(@.type=='Ready')].reason",
        ),
        column("Age", "date", ".metadata.creationTimestamp"),
    ]
}
