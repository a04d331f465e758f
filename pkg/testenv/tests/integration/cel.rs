//! CRD validation rules (`x-kubernetes-validations`): refused in a CRD as
//! kube-apiserver refuses them, and enforced on every write of an object.

use kinject_testenv::TestEnv;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use crate::common::api_err;

fn widget_crd(spec_rules: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.tutorial.example.com"},
        "spec": {
            "group": "tutorial.example.com",
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "x-kubernetes-validations": [
                        {"rule": "self.metadata.name.size() <= 20", "message": "name too long for a widget"},
                    ],
                    "properties": {
                        "spec": {
                            "type": "object",
                            "properties": {
                                "min": {"type": "integer"},
                                "max": {"type": "integer"},
                                "size": {"type": "string"},
                            },
                            "x-kubernetes-validations": spec_rules,
                        },
                        "status": {"type": "object", "properties": {
                            "ready": {"type": "integer", "x-kubernetes-validations": [
                                {"rule": "self >= 0", "message": "ready is never negative"},
                            ]},
                        }},
                    },
                }},
            }],
        },
    })
}

fn rules() -> Value {
    json!([
        {"rule": "self.min <= self.max",
         "messageExpression": "'min (' + string(self.min) + ') must not be above max (' + string(self.max) + ')'"},
        {"rule": "!has(oldSelf.size) || self.size == oldSelf.size", "message": "size cannot change once set",
         "reason": "FieldValueForbidden", "fieldPath": ".size"},
    ])
}

fn api(env: &TestEnv) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("tutorial.example.com", "v1alpha1", "Widget"),
        "widgets",
    );
    Api::namespaced_with(env.client(), "default", &resource)
}

fn widget(name: &str, min: i64, max: i64) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "tutorial.example.com/v1alpha1", "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"min": min, "max": max, "size": "small"},
    }))
    .unwrap()
}

fn env() -> TestEnv {
    let env = TestEnv::new();
    env.install_crd(widget_crd(rules())).unwrap();
    env
}

#[tokio::test]
async fn a_create_that_breaks_a_rule_gets_kube_apiservers_answer() {
    let env = env();
    let api = api(&env);
    api.create(&PostParams::default(), &widget("w", 1, 2))
        .await
        .unwrap();
    let status = api_err(
        api.create(&PostParams::default(), &widget("w2", 3, 2))
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 422);
    assert_eq!(status.reason, "Invalid");
    assert_eq!(
        status.message,
        "Widget.tutorial.example.com \"w2\" is invalid: spec: Invalid value: \"object\": min (3) must not be above max (2)"
    );
    let causes = status.details.unwrap().causes;
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].reason, "FieldValueInvalid");
    assert_eq!(causes[0].field, "spec");

    // A rule at the root reads the object's name.
    let status = api_err(
        api.create(&PostParams::default(), &widget("a-name-longer-than-twenty", 1, 2))
            .await
            .unwrap_err(),
    );
    assert!(
        status
            .message
            .ends_with("is invalid: <nil>: Invalid value: \"object\": name too long for a widget"),
        "{}",
        status.message
    );
}

#[tokio::test]
async fn a_transition_rule_runs_on_updates_patches_and_applies_only() {
    let env = env();
    let api = api(&env);
    let stored = api
        .create(&PostParams::default(), &widget("w", 1, 2))
        .await
        .unwrap();

    let mut changed = stored.clone();
    changed.data["spec"]["size"] = json!("large");
    let status = api_err(
        api.replace("w", &PostParams::default(), &changed)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        status.message,
        "Widget.tutorial.example.com \"w\" is invalid: spec.size: Forbidden: size cannot change once set"
    );
    assert_eq!(status.details.unwrap().causes[0].reason, "FieldValueForbidden");

    let merge = Patch::Merge(json!({"spec": {"size": "large"}}));
    let status = api_err(api.patch("w", &PatchParams::default(), &merge).await.unwrap_err());
    assert!(
        status.message.contains("spec.size: Forbidden"),
        "{}",
        status.message
    );

    let apply = Patch::Apply(json!({
        "apiVersion": "tutorial.example.com/v1alpha1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"min": 5, "max": 2},
    }));
    let status = api_err(
        api.patch("w", &PatchParams::apply("test").force(), &apply)
            .await
            .unwrap_err(),
    );
    assert!(
        status.message.contains("min (5) must not be above max (2)"),
        "{}",
        status.message
    );

    // What the rules allow goes through.
    let fine = Patch::Merge(json!({"spec": {"max": 9}}));
    assert_eq!(
        api.patch("w", &PatchParams::default(), &fine).await.unwrap().data["spec"]["max"],
        9
    );
}

#[tokio::test]
async fn the_status_subresource_is_held_to_the_rules_too() {
    let env = env();
    let api = api(&env);
    let mut stored = api
        .create(&PostParams::default(), &widget("w", 1, 2))
        .await
        .unwrap();
    stored.data["status"] = json!({"ready": -1});
    let status = api_err(
        api.replace_status("w", &PostParams::default(), &stored)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        status.message,
        "Widget.tutorial.example.com \"w\" is invalid: status.ready: Invalid value: \"integer\": ready is never negative"
    );
}

#[tokio::test]
async fn an_object_stored_before_a_rule_is_ratcheted_until_its_node_changes() {
    let env = TestEnv::new();
    env.install_crd(widget_crd(json!([]))).unwrap();
    let api = api(&env);
    api.create(&PostParams::default(), &widget("w", 3, 2))
        .await
        .unwrap();
    env.update_object({
        let mut crd = env
            .get_object("apiextensions.k8s.io", "v1", "customresourcedefinitions", None, "widgets.tutorial.example.com")
            .unwrap();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] =
            rules();
        crd
    })
    .unwrap();
    // The status write leaves the spec alone.
    let status = Patch::Merge(json!({"status": {"ready": 1}}));
    api.patch_status("w", &PatchParams::default(), &status)
        .await
        .unwrap();
    let spec = Patch::Merge(json!({"spec": {"min": 4}}));
    let refused = api_err(api.patch("w", &PatchParams::default(), &spec).await.unwrap_err());
    assert!(
        refused.message.contains("min (4) must not be above max (2)"),
        "{}",
        refused.message
    );
}

#[tokio::test]
async fn a_crd_whose_rules_kube_apiserver_refuses_is_refused() {
    let env = TestEnv::new();
    let undefined = env
        .install_crd(widget_crd(json!([{"rule": "self.min <= self.maximum"}])))
        .unwrap_err()
        .to_string();
    assert!(
        undefined.contains(
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: \
             apiextensions.ValidationRule{Rule:\"self.min <= self.maximum\""
        ),
        "{undefined}"
    );
    assert!(
        undefined.contains("compilation failed: ERROR: <input>:1:17: undefined field 'maximum'"),
        "{undefined}"
    );

    let syntax = env
        .install_crd(widget_crd(json!([{"rule": "self.min <="}])))
        .unwrap_err()
        .to_string();
    assert!(
        syntax.contains("compilation failed: ERROR: <input>:1:"),
        "{syntax}"
    );

    let mut costly = widget_crd(json!([]));
    costly["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["tags"] = json!({
        "type": "array", "items": {"type": "string"},
        "x-kubernetes-validations": [{"rule": "self.all(a, self.all(b, a == b))"}],
    });
    let cost = env.install_crd(costly).unwrap_err().to_string();
    assert!(
        cost.contains(
            "x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x"
        ),
        "{cost}"
    );
    assert!(
        env.resource_for_kind("tutorial.example.com/v1alpha1", "Widget")
            .is_none()
    );
}

/// The rest of a structural schema: list types hold each item once, string
/// formats are checked, both with kube-apiserver's field errors.
#[tokio::test]
async fn list_types_and_formats_are_held_as_kube_apiserver_holds_them() {
    let env = TestEnv::new();
    let mut crd = widget_crd(json!([]));
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] = json!({
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "required": ["name"],
                "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
        "since": {"type": "string", "format": "date-time"},
        "owner": {"type": "string", "format": "email"},
    });
    env.install_crd(crd).unwrap();
    let api = api(&env);
    let with_spec = |name: &str, spec: Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "tutorial.example.com/v1alpha1", "kind": "Widget",
            "metadata": {"name": name}, "spec": spec,
        }))
        .unwrap()
    };
    let fine = with_spec(
        "fine",
        json!({"tags": ["a", "b"], "ports": [{"name": "http", "port": 80}, {"name": "grpc", "port": 80}],
               "since": "2026-12-07T04:00:00Z", "owner": "team@example.com"}),
    );
    api.create(&PostParams::default(), &fine).await.unwrap();
    let bad = with_spec(
        "bad",
        json!({"tags": ["a", "b", "a"], "ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}],
               "since": "yesterday", "owner": "nobody"}),
    );
    let status = api_err(api.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!(status.code, 422);
    let causes: Vec<(String, String, String)> = status
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| (c.field, c.reason, c.message))
        .collect();
    let want = [
        ("spec.tags[2]", "FieldValueDuplicate", "Duplicate value: \"a\""),
        (
            "spec.ports[1]",
            "FieldValueDuplicate",
            "Duplicate value: map[string]interface {}{\"name\":\"http\"}",
        ),
        (
            "spec.since",
            "FieldValueTypeInvalid",
            "Invalid value: \"yesterday\": spec.since in body must be of type date-time: \"yesterday\"",
        ),
        (
            "spec.owner",
            "FieldValueTypeInvalid",
            "Invalid value: \"nobody\": spec.owner in body must be of type email: \"nobody\"",
        ),
    ];
    for (field, reason, message) in want {
        assert!(
            causes
                .iter()
                .any(|c| (c.0.as_str(), c.1.as_str(), c.2.as_str()) == (field, reason, message)),
            "{field}: {causes:#?}"
        );
    }
    assert_eq!(causes.len(), want.len(), "{causes:#?}");
}

/// kube-apiserver defaults on read: an object stored before its schema
/// gained a default reads with it, in a get and in a list.
#[tokio::test]
async fn a_default_added_later_shows_on_read() {
    let env = env();
    let api = api(&env);
    api.create(&PostParams::default(), &widget("w", 1, 2))
        .await
        .unwrap();
    let mut crd = env
        .get_object(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            None,
            "widgets.tutorial.example.com",
        )
        .unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["zone"] =
        json!({"type": "string", "default": "eu-west"});
    env.update_object(crd).unwrap();
    let read = api.get("w").await.unwrap();
    assert_eq!(read.data["spec"]["zone"], "eu-west");
    let listed = api.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items[0].data["spec"]["zone"], "eu-west");
    assert_eq!(read.data["spec"]["size"], "small", "the rest as stored");
}

/// A list type the API server cannot hold is refused with the CRD, as
/// apiextensions refuses it.
#[tokio::test]
async fn a_map_list_needs_keys_that_are_required_scalar_properties() {
    let env = TestEnv::new();
    let with_ports = |ports: Value| {
        let mut crd = widget_crd(json!([]));
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["ports"] =
            ports;
        crd
    };
    let refused = |ports: Value| env.install_crd(with_ports(ports)).unwrap_err().to_string();
    let at = "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[ports]";
    let no_keys = refused(json!({"type": "array", "x-kubernetes-list-type": "map",
        "items": {"type": "object", "properties": {"name": {"type": "string"}}}}));
    assert!(
        no_keys.contains(&format!(
            "{at}.x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"
        )),
        "{no_keys}"
    );
    let optional_key = refused(json!({"type": "array", "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {"name": {"type": "string"}}}}));
    assert!(
        optional_key.contains(&format!(
            "{at}.items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so \
             it must have a default or be a required property"
        )),
        "{optional_key}"
    );
    let unknown_key = refused(json!({"type": "array", "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["port"],
        "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}));
    assert!(
        unknown_key.contains(&format!(
            "{at}.x-kubernetes-list-map-keys: Invalid value: []string{{\"port\"}}: entries must all be names of item \
             properties"
        )),
        "{unknown_key}"
    );
    let bad_type =
        refused(json!({"type": "array", "x-kubernetes-list-type": "bag", "items": {"type": "string"}}));
    assert!(
        bad_type.contains(&format!(
            "{at}.x-kubernetes-list-type: Unsupported value: \"bag\": supported values: \"atomic\", \"set\", \"map\""
        )),
        "{bad_type}"
    );
    env.install_crd(with_ports(
        json!({"type": "array", "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}),
    ))
    .unwrap();
}
