//! `#[rule]` markers reach the CRD where they sit, with their place kept for
//! the generator's errors and removed from the CRD.
#![allow(clippy::unwrap_used, reason = "a test fails loudly")]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_macros::{Kind, rules};
use kinject_types::registry::CustomKind;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[rules]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[rule(
    "self.minReplicas <= self.maxReplicas",
    message = "minReplicas must not be above maxReplicas"
)]
pub struct WidgetSpec {
    pub min_replicas: i32,
    pub max_replicas: i32,
    #[rule(
        "self == oldSelf",
        message = "size cannot change",
        reason = "FieldValueForbidden"
    )]
    #[rule("self.size() <= 10", message_expression = "'size ' + self + ' is too long'")]
    pub size: String,
    #[rule("self.all(t, t != '')", field_path = ".tags")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
}

#[derive(Kind, Clone, Debug, Default, PartialEq)]
#[kind(group = "tutorial.example.com", version = "v1alpha1", namespaced)]
#[rule("self.metadata.name.size() <= 40", message = "the name is too long")]
pub struct Widget {
    pub metadata: ObjectMeta,
    #[rule(
        "oldSelf == null || self.size != ''",
        optional_old_self,
        message = "size is required"
    )]
    pub spec: WidgetSpec,
}

fn rules_at<'a>(schema: &'a Value, pointer: &str) -> &'a Value {
    schema
        .pointer(&format!("{pointer}/x-kubernetes-validations"))
        .unwrap_or(&Value::Null)
}

#[test]
fn every_rule_sits_where_its_marker_is() {
    let schema = CustomKind::of::<Widget>().schema();
    assert_eq!(
        rules_at(&schema, ""),
        &json!([{"rule": "self.metadata.name.size() <= 40", "message": "the name is too long"}])
    );
    assert_eq!(
        rules_at(&schema, "/properties/spec"),
        &json!([
            {"rule": "self.minReplicas <= self.maxReplicas", "message": "minReplicas must not be above maxReplicas"},
            {"rule": "oldSelf == null || self.size != ''", "message": "size is required", "optionalOldSelf": true},
        ])
    );
    assert_eq!(
        rules_at(&schema, "/properties/spec/properties/size"),
        &json!([
            {"rule": "self == oldSelf", "message": "size cannot change", "reason": "FieldValueForbidden"},
            {"rule": "self.size() <= 10", "messageExpression": "'size ' + self + ' is too long'"},
        ])
    );
    assert_eq!(
        rules_at(&schema, "/properties/spec/properties/tags"),
        &json!([{"rule": "self.all(t, t != '')", "fieldPath": ".tags"}])
    );
    // The CRD carries the same, through its typed schema.
    let crd = serde_json::to_value(CustomKind::of::<Widget>().crd().unwrap()).unwrap();
    let crd_schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    assert_eq!(
        rules_at(crd_schema, "/properties/spec/properties/size"),
        rules_at(&schema, "/properties/spec/properties/size")
    );
    assert!(!crd.to_string().contains("x-kinject"), "{crd}");
}

#[test]
fn each_rule_knows_the_file_and_line_of_its_marker() {
    let sites = CustomKind::of::<Widget>().rule_sites();
    let source = include_str!("rules.rs");
    // The line of a marker is that of its `#[`, above the rule when rustfmt
    // splits the attribute.
    let line_of = |rule: &str| {
        let lines: Vec<&str> = source.lines().collect();
        let mut at = lines.iter().position(|l| l.contains(rule)).unwrap();
        while !lines[at].trim_start().starts_with("#[rule") {
            at -= 1;
        }
        format!("pkg/types/tests/rules.rs:{}", at + 1)
    };
    let site = |path: &str| {
        sites
            .iter()
            .find(|s| s.path == path)
            .map(|s| s.defined_at.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        site("x-kubernetes-validations[0]"),
        line_of("\"self.metadata.name")
    );
    assert_eq!(
        site("properties[spec].x-kubernetes-validations[0]"),
        line_of("\"self.minReplicas")
    );
    assert_eq!(
        site("properties[spec].x-kubernetes-validations[1]"),
        line_of("\"oldSelf == null")
    );
    assert_eq!(
        site("properties[spec].properties[size].x-kubernetes-validations[1]"),
        line_of("\"self.size() <= 10\"")
    );
    assert_eq!(sites.len(), 6, "{sites:#?}");
}
