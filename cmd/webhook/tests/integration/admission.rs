//! The admission controllers on the sample kinds, against Knative's strings.

use kinject_webhook::admission::{
    Admit, ConfigValidation, Defaulting, Request, Validation, example_checksum,
};
use serde_json::{Value, json};

fn request(kind: &str, operation: &str, object: Option<Value>, old: Option<Value>) -> Request {
    let (group, version, plural) = match kind {
        "ConfigMap" => ("", "v1", "configmaps"),
        "SimpleDeployment" => ("samples.knative.dev", "v1alpha1", "simpledeployments"),
        _ => ("samples.knative.dev", "v1alpha1", "addressableservices"),
    };
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": plural},
            "namespace": "default",
            "operation": operation,
            "userInfo": {"username": "admin"},
            "object": object,
            "oldObject": old,
        }
    });
    let review: kube::core::admission::AdmissionReview<kinject_webhook::admission::RawObject> =
        serde_json::from_value(review).unwrap();
    review.try_into().unwrap()
}

fn with_subresource(mut request: Request, subresource: &str) -> Request {
    request.sub_resource = Some(subresource.to_owned());
    request
}

fn asvc(spec: Value) -> Value {
    json!({
        "apiVersion": "samples.knative.dev/v1alpha1",
        "kind": "AddressableService",
        "metadata": {"name": "make-it-addressable", "namespace": "default"},
        "spec": spec,
    })
}

fn response(admit: &dyn Admit, request: &Request) -> Value {
    serde_json::to_value(admit.admit(request)).unwrap()
}

fn validation() -> Validation {
    Validation::new(generated::registry::custom_kinds())
}

fn defaulting() -> Defaulting {
    Defaulting::new(generated::registry::custom_kinds())
}

#[test]
fn every_sample_kind_is_defaulted_and_validated_from_the_registry() {
    let plurals = |kinds: Vec<kinject_runtime::apis::registry::CustomKind>| {
        kinds.into_iter().map(|k| k.plural).collect::<Vec<_>>()
    };
    // Every registered kind with a hook, whatever kinds the app has; the
    // sample's two among them.
    let registered = generated::registry::custom_kinds();
    let with = |hook: fn(&kinject_runtime::apis::registry::CustomKind) -> bool| {
        let mut plurals = plurals(registered.iter().filter(|k| hook(k)).cloned().collect());
        plurals.sort();
        plurals
    };
    let sorted = |mut plurals: Vec<String>| {
        plurals.sort();
        plurals
    };
    let defaulted = sorted(plurals(defaulting().kinds()));
    let validated = sorted(plurals(validation().kinds()));
    assert_eq!(defaulted, with(|k| k.is_defaulted()));
    assert_eq!(validated, with(|k| k.is_validated()));
    for sample in ["addressableservices", "simpledeployments"] {
        assert!(defaulted.iter().any(|p| p == sample), "{defaulted:?}");
        assert!(validated.iter().any(|p| p == sample), "{validated:?}");
    }
}

#[test]
fn a_missing_service_name_is_refused_with_the_field_path() {
    let got = response(
        &validation(),
        &request("AddressableService", "CREATE", Some(asvc(json!({}))), None),
    );
    assert_eq!(
        got,
        json!({
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "allowed": false,
            "status": {
                "status": "Failure",
                "code": 400,
                "reason": "BadRequest",
                "message": "validation failed: missing field(s): spec.serviceName",
            },
        })
    );
}

#[test]
fn an_invalid_service_name_is_refused_with_the_rule() {
    let got = response(
        &validation(),
        &request(
            "AddressableService",
            "UPDATE",
            Some(asvc(json!({"serviceName": "Bad_Name"}))),
            Some(asvc(json!({"serviceName": "webhook"}))),
        ),
    );
    let message = got["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "validation failed: invalid value: Bad_Name: spec.serviceName\na DNS-1035 label must consist of"
        ),
        "{message}"
    );
}

#[test]
fn a_valid_object_is_allowed_with_no_status() {
    let got = response(
        &validation(),
        &request(
            "AddressableService",
            "CREATE",
            Some(asvc(json!({"serviceName": "webhook"}))),
            None,
        ),
    );
    assert_eq!(
        got,
        json!({"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": true, "status": {}})
    );
}

#[test]
fn every_problem_of_a_simple_deployment_is_reported() {
    let sd = json!({
        "apiVersion": "samples.knative.dev/v1alpha1",
        "kind": "SimpleDeployment",
        "metadata": {"name": "sd"},
        "spec": {"image": "", "replicas": -1},
    });
    let got = response(
        &validation(),
        &request("SimpleDeployment", "CREATE", Some(sd), None),
    );
    assert_eq!(
        got["status"]["message"],
        "validation failed: invalid value: -1: spec.replicas\nmissing field(s): spec.image"
    );
}

#[test]
fn delete_and_status_updates_are_allowed() {
    let bad = asvc(json!({}));
    let delete = request("AddressableService", "DELETE", None, Some(bad.clone()));
    assert_eq!(response(&validation(), &delete)["allowed"], true);
    let status = with_subresource(
        request("AddressableService", "UPDATE", Some(bad.clone()), Some(bad)),
        "status",
    );
    assert_eq!(response(&validation(), &status)["allowed"], true);
}

#[test]
fn unknown_fields_are_refused_on_both_paths() {
    let typo = asvc(json!({"serviceName": "webhook", "servicName": "x"}));
    let got = response(
        &validation(),
        &request("AddressableService", "CREATE", Some(typo.clone()), None),
    );
    assert_eq!(
        got["status"]["message"],
        "decoding request failed: cannot decode incoming new object: json: unknown field \"spec.servicName\""
    );
    let got = response(
        &defaulting(),
        &request("AddressableService", "CREATE", Some(typo), None),
    );
    assert_eq!(
        got["status"]["message"],
        "mutation failed: cannot decode incoming new object: json: unknown field \"spec.servicName\""
    );
    assert_eq!(got["status"]["reason"], "BadRequest");
}

#[test]
fn a_value_of_the_wrong_type_names_its_field() {
    let sd = json!({"metadata": {"name": "sd"}, "spec": {"image": "x", "replicas": "two"}});
    let got = response(
        &validation(),
        &request("SimpleDeployment", "CREATE", Some(sd), None),
    );
    let message = got["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("decoding request failed: cannot decode incoming new object: json: spec.replicas: invalid type: string \"two\""),
        "{message}"
    );
}

#[test]
fn an_unregistered_kind_is_unhandled() {
    let got = response(
        &validation(),
        &request("Widget", "CREATE", Some(json!({"metadata": {}})), None),
    );
    assert_eq!(
        got["status"]["message"],
        "decoding request failed: unhandled kind: samples.knative.dev/v1alpha1, Kind=Widget"
    );
    let got = response(
        &defaulting(),
        &request("Widget", "CREATE", Some(json!({"metadata": {}})), None),
    );
    assert_eq!(
        got["status"]["message"],
        "mutation failed: unhandled kind: samples.knative.dev/v1alpha1, Kind=Widget"
    );
}

#[test]
fn defaulting_answers_the_round_trip_patch() {
    // The type writes `spec.serviceName` back even when it was left out, as
    // Knative's round trip does for a field without omitempty.
    let got = defaulting().admit(&request(
        "AddressableService",
        "CREATE",
        Some(asvc(json!({}))),
        None,
    ));
    assert!(got.allowed);
    let patch: Value = serde_json::from_slice(got.patch.as_deref().unwrap()).unwrap();
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/spec/serviceName", "value": ""}])
    );
    let review = serde_json::to_value(got.into_review()).unwrap();
    assert_eq!(review["response"]["patchType"], "JSONPatch");

    let complete = asvc(json!({"serviceName": "webhook"}));
    let got = defaulting().admit(&request("AddressableService", "CREATE", Some(complete), None));
    assert!(
        got.allowed && got.patch.is_none(),
        "nothing to change, no patch: {got:?}"
    );
}

#[test]
fn defaulting_ignores_delete() {
    let got = response(
        &defaulting(),
        &request(
            "AddressableService",
            "DELETE",
            None,
            Some(asvc(json!({"bogus": 1}))),
        ),
    );
    assert_eq!(got["allowed"], true);
}

fn config_map(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "knative-samples"}, "data": data})
}

fn config_validation() -> ConfigValidation {
    ConfigValidation::sharedmain(str::to_owned)
}

#[test]
fn a_config_map_the_controller_would_refuse_is_refused_with_its_words() {
    let cases = [
        (
            "config-logging",
            json!({"loglevel.controller": "loud"}),
            "validation failed: invalid log level \"loud\" in loglevel.controller; use one of debug, info, warn, error, dpanic, panic, fatal",
        ),
        (
            "config-logging",
            json!({"zap-logger-config": "{not json"}),
            "validation failed: zap-logger-config is not valid JSON (key must be a string at line 1 column 2); fix it or remove the key",
        ),
        (
            "config-leader-election",
            json!({"buckets": "11"}),
            "validation failed: buckets: value must be between 1 and 10, got 11",
        ),
        (
            "config-observability",
            json!({"metrics-protocol": "carrier-pigeon"}),
            "validation failed: metrics-protocol \"carrier-pigeon\" is not one of prometheus, none",
        ),
    ];
    for (name, data, message) in cases {
        let got = response(
            &config_validation(),
            &request("ConfigMap", "UPDATE", Some(config_map(name, data)), None),
        );
        assert_eq!(got["allowed"], false, "{name}");
        let got_message = got["status"]["message"].as_str().unwrap();
        assert!(got_message.starts_with(message), "{name}: {got_message}");
    }
}

#[test]
fn good_and_foreign_config_maps_are_allowed() {
    for (name, data) in [
        (
            "config-logging",
            json!({"loglevel.controller": "debug", "loglevel.webhook": "info"}),
        ),
        ("config-leader-election", json!({"buckets": "3"})),
        ("config-observability", json!({"metrics-protocol": "none"})),
        ("somebody-elses", json!({"anything": "goes"})),
    ] {
        let got = response(
            &config_validation(),
            &request("ConfigMap", "CREATE", Some(config_map(name, data)), None),
        );
        assert_eq!(got["allowed"], true, "{name}: {got}");
    }
}

#[test]
fn an_edit_of_the_example_is_refused_by_its_checksum() {
    let example = "# leaseDuration: 15s\n";
    let mut cm = config_map(
        "config-leader-election",
        json!({"_example": "# leaseDuration: 1s\n"}),
    );
    cm["metadata"]["annotations"] = json!({"knative.dev/example-checksum": example_checksum(example)});
    let got = response(
        &config_validation(),
        &request("ConfigMap", "UPDATE", Some(cm.clone()), None),
    );
    assert_eq!(
        got["status"]["message"],
        "validation failed: the update modifies a key in \"_example\" which is probably not what you want. \
         Instead, copy the respective setting to the top-level of the ConfigMap, directly below \"data\""
    );
    cm["data"]["_example"] = json!(example);
    let got = response(
        &config_validation(),
        &request("ConfigMap", "UPDATE", Some(cm), None),
    );
    assert_eq!(got["allowed"], true);
}
