//! kube-apiserver's validation of the built-in kinds controllers write most: one test
//! per rule, each checking the field path, cause type and message of the 422.

use crate::common;

use kinject_testenv::TestEnv;
use serde_json::{Value, json};

async fn send(env: &TestEnv, method: &str, uri: &str, body: &Value) -> (u16, Value) {
    common::send_bytes(
        &env.client(),
        method,
        uri,
        &[("content-type", "application/json")],
        body.to_string().into_bytes(),
    )
    .await
}

/// The `(field, reason, message)` of each cause of a 422, or a panic naming the answer.
fn causes(code: u16, st: &Value) -> Vec<(String, String, String)> {
    assert_eq!(code, 422, "{st}");
    st["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            (s("field"), s("reason"), s("message"))
        })
        .collect()
}

fn cause(field: &str, reason: &str, message: &str) -> (String, String, String) {
    (field.to_owned(), reason.to_owned(), message.to_owned())
}

fn pod_spec() -> Value {
    json!({"containers": [{"name": "c", "image": "busybox"}]})
}

const PODS: &str = "/api/v1/namespaces/default/pods";
const RS: &str = "/apis/apps/v1/namespaces/default/replicasets";
const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";
const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

#[tokio::test]
async fn pod_containers_need_unique_names() {
    let env = TestEnv::new();
    let spec = json!({"containers": [{"name": "c", "image": "a"}, {"name": "c", "image": "b"}]});
    let (code, st) = send(
        &env,
        "POST",
        PODS,
        &json!({"metadata": {"name": "p"}, "spec": spec}),
    )
    .await;
    assert_eq!(
        causes(code, &st),
        [cause(
            "spec.containers[1].name",
            "FieldValueDuplicate",
            "Duplicate value: \"c\""
        )]
    );
}

#[tokio::test]
async fn pod_port_names_are_unique_per_container() {
    let env = TestEnv::new();
    let spec = json!({"containers": [{"name": "c", "image": "a", "ports": [
        {"name": "http", "containerPort": 80}, {"name": "http", "containerPort": 81},
        {"name": "Bad_Name", "containerPort": 82}]}]});
    let (code, st) = send(
        &env,
        "POST",
        PODS,
        &json!({"metadata": {"name": "p"}, "spec": spec}),
    )
    .await;
    let got = causes(code, &st);
    assert_eq!(
        got[0],
        cause(
            "spec.containers[0].ports[1].name",
            "FieldValueDuplicate",
            "Duplicate value: \"http\""
        )
    );
    assert_eq!(got[1].0, "spec.containers[0].ports[2].name");
    assert_eq!(got[1].1, "FieldValueInvalid");
}

#[tokio::test]
async fn pod_restart_policy_is_one_of_three() {
    let env = TestEnv::new();
    let mut spec = pod_spec();
    spec["restartPolicy"] = json!("Sometimes");
    let (code, st) = send(
        &env,
        "POST",
        PODS,
        &json!({"metadata": {"name": "p"}, "spec": spec}),
    )
    .await;
    assert_eq!(
        causes(code, &st),
        [cause(
            "spec.restartPolicy",
            "FieldValueNotSupported",
            "Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\""
        )]
    );
}

fn pod_with_resources(resources: &Value) -> Value {
    json!({"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "busybox", "resources": resources}]}})
}

#[tokio::test]
async fn pod_resource_amounts_are_not_negative() {
    let env = TestEnv::new();
    let resources = json!({"limits": {"memory": "-1Gi"}, "requests": {"cpu": "-100m"}});
    let (code, st) = send(&env, "POST", PODS, &pod_with_resources(&resources)).await;
    assert_eq!(
        causes(code, &st),
        [
            cause(
                "spec.containers[0].resources.limits[memory]",
                "FieldValueInvalid",
                "Invalid value: \"-1Gi\": must be greater than or equal to 0"
            ),
            cause(
                "spec.containers[0].resources.requests[cpu]",
                "FieldValueInvalid",
                "Invalid value: \"-100m\": must be greater than or equal to 0"
            ),
        ]
    );
}

/// A request above its limit is reported at `requests` itself, not at the resource.
#[tokio::test]
async fn pod_resource_requests_do_not_exceed_limits() {
    let env = TestEnv::new();
    let resources = json!({
        "limits": {"cpu": "500m", "memory": "1Gi"},
        "requests": {"cpu": "1", "memory": "1024Mi"},
    });
    let mut pod = pod_with_resources(&resources);
    pod["spec"]["initContainers"] = pod["spec"]["containers"].clone();
    pod["spec"]["initContainers"][0]["name"] = json!("init");
    let (code, st) = send(&env, "POST", PODS, &pod).await;
    let want = |list: &str| {
        cause(
            &format!("spec.{list}[0].resources.requests"),
            "FieldValueInvalid",
            "Invalid value: \"1\": must be less than or equal to cpu limit of 500m",
        )
    };
    assert_eq!(causes(code, &st), [want("containers"), want("initContainers")]);
    // Equal amounts written differently are within the limit.
    let resources = json!({"limits": {"cpu": "1.5"}, "requests": {"cpu": "1500m"}});
    let (code, st) = send(&env, "POST", PODS, &pod_with_resources(&resources)).await;
    assert_eq!(code, 201, "{st}");
}

/// A quantity that does not parse fails decoding, as Go's `resource.Quantity` does,
/// in a Pod and in a workload's template alike.
#[tokio::test]
async fn pod_resource_quantities_must_parse() {
    let env = TestEnv::new();
    let resources = json!({"limits": {"cpu": "lots"}});
    let (code, st) = send(&env, "POST", PODS, &pod_with_resources(&resources)).await;
    assert_eq!(code, 400, "{st}");
    assert_eq!(
        st["message"],
        "Pod in version \"v1\" cannot be handled as a Pod: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    );
    let mut rs = replica_set(&json!({"matchLabels": {"app": "a"}}), &json!({"app": "a"}));
    rs["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({"requests": {"memory": "1mi"}});
    let (code, st) = send(&env, "POST", RS, &rs).await;
    assert_eq!(code, 400, "{st}");
    assert_eq!(
        st["message"],
        "ReplicaSet in version \"v1\" cannot be handled as a ReplicaSet: unable to parse quantity's suffix"
    );
}

fn replica_set(selector: &Value, labels: &Value) -> Value {
    json!({"metadata": {"name": "r"}, "spec": {"selector": selector,
        "template": {"metadata": {"labels": labels}, "spec": pod_spec()}}})
}

#[tokio::test]
async fn replica_sets_need_a_selector_matching_the_template() {
    let env = TestEnv::new();
    // A missing selector reads as an empty one here (the type round trip fills it in),
    // which kube-apiserver refuses too.
    let rs = replica_set(&json!({}), &json!({"app": "a"}));
    let (code, st) = send(&env, "POST", RS, &rs).await;
    assert_eq!(
        causes(code, &st),
        [cause(
            "spec.selector",
            "FieldValueInvalid",
            "Invalid value: \"empty\": empty selector is invalid for deployment"
        )]
    );
    let rs = replica_set(&json!({"matchLabels": {"app": "b"}}), &json!({"app": "a"}));
    let (code, st) = send(&env, "POST", RS, &rs).await;
    assert_eq!(
        causes(code, &st),
        [cause(
            "spec.template.metadata.labels",
            "FieldValueInvalid",
            "Invalid value: map[string]string{\"app\":\"a\"}: `selector` does not match template `labels`"
        )]
    );
}

#[tokio::test]
async fn a_replica_sets_selector_is_immutable() {
    let env = TestEnv::new();
    let rs = replica_set(
        &json!({"matchLabels": {"app": "a"}}),
        &json!({"app": "a", "x": "y"}),
    );
    let (code, _) = send(&env, "POST", RS, &rs).await;
    assert_eq!(code, 201);
    let changed = replica_set(
        &json!({"matchLabels": {"x": "y"}}),
        &json!({"app": "a", "x": "y"}),
    );
    let (code, st) = send(&env, "PUT", &format!("{RS}/r"), &changed).await;
    assert_eq!(
        causes(code, &st),
        [cause(
            "spec.selector",
            "FieldValueInvalid",
            "Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"x\":\"y\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
        )]
    );
}

#[tokio::test]
async fn replica_set_pods_restart_always() {
    let env = TestEnv::new();
    let mut rs = replica_set(&json!({"matchLabels": {"app": "a"}}), &json!({"app": "a"}));
    rs["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    let (code, st) = send(&env, "POST", RS, &rs).await;
    assert_eq!(
        causes(code, &st),
        [cause(
            "spec.template.spec.restartPolicy",
            "FieldValueNotSupported",
            "Unsupported value: \"Never\": supported values: \"Always\""
        )]
    );
}

fn job(restart: Option<&str>) -> Value {
    let mut spec = pod_spec();
    if let Some(r) = restart {
        spec["restartPolicy"] = json!(r);
    }
    json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": spec}}})
}

#[tokio::test]
async fn job_pods_restart_on_failure_or_never() {
    let env = TestEnv::new();
    let (code, st) = send(&env, "POST", JOBS, &job(None)).await;
    assert_eq!(
        causes(code, &st),
        [cause(
            "spec.template.spec.restartPolicy",
            "FieldValueRequired",
            "Required value: valid values: \"OnFailure\", \"Never\""
        )]
    );
    let (code, _) = send(&env, "POST", JOBS, &job(Some("OnFailure"))).await;
    assert_eq!(code, 201);
}

#[tokio::test]
async fn a_jobs_template_and_selector_are_immutable() {
    let env = TestEnv::new();
    let (code, created) = send(&env, "POST", JOBS, &job(Some("Never"))).await;
    assert_eq!(code, 201);
    let mut changed = created.clone();
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = json!("other");
    let (code, st) = send(&env, "PUT", &format!("{JOBS}/j"), &changed).await;
    let got = causes(code, &st);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0].0.as_str(), got[0].1.as_str()),
        ("spec.template", "FieldValueInvalid")
    );
    assert!(got[0].2.ends_with(": field is immutable"));
    let mut changed = created;
    changed["spec"]["selector"]["matchLabels"]["extra"] = json!("x");
    let (code, st) = send(&env, "PUT", &format!("{JOBS}/j"), &changed).await;
    let got = causes(code, &st);
    assert_eq!(got[0].0, "spec.selector");
    assert!(got[0].2.ends_with(": field is immutable"));
}

#[tokio::test]
async fn namespace_names_are_dns_labels() {
    let env = TestEnv::new();
    let (code, st) = send(
        &env,
        "POST",
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "Bad"}}),
    )
    .await;
    let got = causes(code, &st);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0].0.as_str(), got[0].1.as_str()),
        ("metadata.name", "FieldValueInvalid")
    );
    assert!(
        got[0]
            .2
            .starts_with("Invalid value: \"Bad\": a lowercase RFC 1123 label must consist of"),
        "{got:?}"
    );
}

#[tokio::test]
async fn resource_quota_amounts_are_not_negative_and_counts_whole() {
    let env = TestEnv::new();
    let quota = json!({"metadata": {"name": "q"}, "spec": {"hard": {"cpu": "-1", "pods": "1500m"}}});
    let (code, st) = send(&env, "POST", "/api/v1/namespaces/default/resourcequotas", &quota).await;
    assert_eq!(
        causes(code, &st),
        [
            cause(
                "spec.hard[cpu]",
                "FieldValueInvalid",
                "Invalid value: \"-1\": must be greater than or equal to 0"
            ),
            cause(
                "spec.hard[pods]",
                "FieldValueInvalid",
                "Invalid value: \"1500m\": must be an integer"
            ),
        ]
    );
}

#[tokio::test]
async fn role_rules_need_verbs_groups_and_resources() {
    let env = TestEnv::new();
    let role = json!({"metadata": {"name": "r"}, "rules": [{"resources": ["pods"]}]});
    let (code, st) = send(&env, "POST", &format!("{RBAC}/namespaces/default/roles"), &role).await;
    assert_eq!(
        causes(code, &st),
        [
            cause(
                "rules[0].verbs",
                "FieldValueRequired",
                "Required value: verbs must contain at least one value"
            ),
            cause(
                "rules[0].apiGroups",
                "FieldValueRequired",
                "Required value: resource rules must supply at least one api group"
            ),
        ]
    );
}

fn binding(kind: &str, role: &str) -> Value {
    json!({"metadata": {"name": "b"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "default"}]})
}

#[tokio::test]
async fn a_bindings_role_ref_is_immutable() {
    let env = TestEnv::new();
    for (path, kind) in [
        (format!("{RBAC}/namespaces/default/rolebindings"), "Role"),
        (format!("{RBAC}/clusterrolebindings"), "ClusterRole"),
    ] {
        let (code, created) = send(&env, "POST", &path, &binding(kind, "one")).await;
        assert_eq!(code, 201, "{created}");
        let mut changed = binding(kind, "two");
        changed["metadata"] = created["metadata"].clone();
        let (code, st) = send(&env, "PUT", &format!("{path}/b"), &changed).await;
        let shown = format!(
            "Invalid value: rbac.RoleRef{{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"{kind}\", Name:\"two\"}}: cannot change roleRef"
        );
        assert_eq!(causes(code, &st), [cause("roleRef", "FieldValueInvalid", &shown)]);
    }
    // A ClusterRoleBinding can only refer to a ClusterRole.
    let (code, st) = send(
        &env,
        "POST",
        &format!("{RBAC}/clusterrolebindings"),
        &binding("Role", "x"),
    )
    .await;
    assert_eq!(
        causes(code, &st),
        [cause(
            "roleRef.kind",
            "FieldValueNotSupported",
            "Unsupported value: \"Role\": supported values: \"ClusterRole\""
        )]
    );
}

#[tokio::test]
async fn config_map_and_secret_keys_are_file_names() {
    let env = TestEnv::new();
    let why = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
    let cm = json!({"metadata": {"name": "c"}, "data": {"a/b": "x"}});
    let (code, st) = send(&env, "POST", "/api/v1/namespaces/default/configmaps", &cm).await;
    assert_eq!(
        causes(code, &st),
        [cause(
            "data[a/b]",
            "FieldValueInvalid",
            &format!("Invalid value: \"a/b\": {why}")
        )]
    );
    let secret = json!({"metadata": {"name": "s"}, "data": {"..x": "eA=="}});
    let (code, st) = send(&env, "POST", "/api/v1/namespaces/default/secrets", &secret).await;
    assert_eq!(
        causes(code, &st),
        [cause(
            "data[..x]",
            "FieldValueInvalid",
            "Invalid value: \"..x\": must not start with '..'"
        )]
    );
}
