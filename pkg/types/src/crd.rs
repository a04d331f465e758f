//! The CustomResourceDefinition of a kind: its `kube::Resource` identity and
//! schema, with its markers (see [`CrdMarker`](crate::CrdMarker)) applied.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_core::Resource;
use schemars::JsonSchema;

use crate::kind::KindInfo;
use crate::schema::openapi_v3_schema;

/// The CRD serving `K`: one served and stored version, Knative's schema shape
/// (see [`openapi_v3_schema`]), namespaced unless a marker says otherwise,
/// with every one of `K`'s [`KindInfo::MARKERS`] applied in order (names,
/// scope, subresources, the printer columns of its `printcolumn(...)`
/// markers, ...), then the generated printer columns: when its status has
/// conditions, Ready and Reason of the Ready condition (as Knative's CRDs
/// show them), then Age, which kube-apiserver shows only for a CRD without
/// columns of its own.
pub fn custom_resource_definition<K: KindInfo + JsonSchema>()
-> Result<CustomResourceDefinition, serde_json::Error> {
    let schema = crd_schema::<K>();
    let has_conditions = schema
        .pointer("/properties/status/properties/conditions")
        .is_some();
    let mut crd = base_definition::<K>(serde_json::from_value(schema)?);
    for marker in K::MARKERS {
        marker.apply_to_crd(&mut crd);
    }
    for version in &mut crd.spec.versions {
        add_generated_columns(version, has_conditions);
    }
    Ok(crd)
}

/// The `openAPIV3Schema` the CRD of `K` carries: [`openapi_v3_schema`] with
/// the markers that shape a schema (`max_description_len`) applied.
pub fn crd_schema<K: KindInfo + JsonSchema>() -> serde_json::Value {
    let mut schema = openapi_v3_schema::<K>();
    for marker in K::MARKERS {
        marker.apply_to_schema(&mut schema);
    }
    schema
}

/// The CRD of `K` before its markers: its names from `kube::Resource`, one
/// version serving `schema`, namespaced.
fn base_definition<K: Resource<DynamicType = ()>>(schema: JSONSchemaProps) -> CustomResourceDefinition {
    let plural = K::plural(&()).into_owned();
    let group = K::group(&()).into_owned();
    CustomResourceDefinition {
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
                ..CustomResourceDefinitionNames::default()
            },
            scope: "Namespaced".to_owned(),
            versions: vec![CustomResourceDefinitionVersion {
                name: K::version(&()).into_owned(),
                served: true,
                storage: true,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(schema),
                }),
                ..CustomResourceDefinitionVersion::default()
            }],
            ..CustomResourceDefinitionSpec::default()
        },
        status: None,
    }
}

/// After the markers' columns: Ready and Reason of the Ready condition, as
/// Knative's CRDs show them, when the status has conditions; then Age when
/// there is any column, since kube-apiserver then no longer adds it.
fn add_generated_columns(version: &mut CustomResourceDefinitionVersion, has_conditions: bool) {
    let mut columns = version.additional_printer_columns.take().unwrap_or_default();
    if has_conditions {
        columns.extend([
            column("Ready", "string", ".status.conditions[?(@.type=='Ready')].status"),
            column(
                "Reason",
                "string",
                ".status.conditions[?(@.type=='Ready')].reason",
            ),
        ]);
    }
    if !columns.is_empty() {
        columns.push(column("Age", "date", ".metadata.creationTimestamp"));
    }
    version.additional_printer_columns = (!columns.is_empty()).then_some(columns);
}

fn column(name: &str, type_: &str, json_path: &str) -> CustomResourceColumnDefinition {
    CustomResourceColumnDefinition {
        name: name.to_owned(),
        type_: type_.to_owned(),
        json_path: json_path.to_owned(),
        ..CustomResourceColumnDefinition::default()
    }
}
