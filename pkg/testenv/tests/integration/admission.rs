//! Admission webhooks called over HTTPS, as kube-apiserver calls them.

use base64::Engine as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kinject_testenv::TestEnv;

use crate::common::ReviewServer;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const NS: &str = "default";

/// What a test webhook answers for one review's `request`: `(allowed, status, patch, warnings)`.
type Decide = dyn Fn(&Value) -> Answer + Send + Sync;

#[derive(Default)]
struct Answer {
    allowed: bool,
    status: Option<Value>,
    patch: Option<Value>,
    warnings: Vec<String>,
    /// Answer with this uid instead of the request's.
    uid: Option<String>,
}

fn allow() -> Answer {
    Answer {
        allowed: true,
        ..Answer::default()
    }
}

/// An HTTPS server answering AdmissionReviews as `decide` says.
struct TestWebhook;

impl TestWebhook {
    async fn start(decide: impl Fn(&Value) -> Answer + Send + Sync + 'static) -> ReviewServer {
        Self::start_for("webhook.system.svc", decide).await
    }

    async fn start_for(
        host: &str,
        decide: impl Fn(&Value) -> Answer + Send + Sync + 'static,
    ) -> ReviewServer {
        ReviewServer::start(host, move |review| answer(review, &decide)).await
    }
}

/// The AdmissionReview answering `review` as `decide` says.
fn answer(review: &Value, decide: &Decide) -> Value {
    let request = &review["request"];
    let a = decide(request);
    let mut response = json!({
        "uid": a.uid.clone().unwrap_or_else(|| request["uid"].as_str().unwrap().to_owned()),
        "allowed": a.allowed,
    });
    if let Some(s) = a.status {
        response["status"] = s;
    }
    if let Some(p) = a.patch {
        response["patchType"] = json!("JSONPatch");
        response["patch"] =
            json!(base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&p).unwrap()));
    }
    if !a.warnings.is_empty() {
        response["warnings"] = json!(a.warnings);
    }
    json!({"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": response})
}

/// One webhook on ConfigMaps, reached through Service `system/webhook`.
fn webhook(name: &str, path: &str, ca_bundle: &str, extra: Value) -> Value {
    let mut hook = json!({
        "name": name,
        "clientConfig": {"service": {"namespace": "system", "name": "webhook", "path": path}, "caBundle": ca_bundle},
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    if let (Some(h), Some(e)) = (hook.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            h.insert(k.clone(), v.clone());
        }
    }
    hook
}

fn install(env: &TestEnv, kind: &str, name: &str, hooks: Vec<Value>) {
    env.create_object(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": name}, "webhooks": hooks,
    }))
    .unwrap();
}

/// A configuration holding one webhook of the same name.
fn install_one(env: &TestEnv, kind: &str, name: &str, path: &str, ca_bundle: &str, extra: Value) {
    install(env, kind, name, vec![webhook(name, path, ca_bundle, extra)]);
}

fn cm(name: &str, labels: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})).unwrap()
}

fn api_err(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("not an API error: {other:?}"),
    }
}

fn env_with(webhook: &ReviewServer) -> TestEnv {
    let env = TestEnv::new();
    env.route_service("system", "webhook", 443, webhook.addr);
    env
}

#[tokio::test]
async fn a_validating_webhook_denies_with_kube_apiservers_status() {
    let hook = TestWebhook::start(|req| {
        if req["object"]["metadata"]["labels"]["bad"].is_string() {
            Answer {
                status: Some(json!({"code": 400, "reason": "BadRequest", "message": "validation failed: invalid value: bad: metadata.labels"})),
                ..Answer::default()
            }
        } else {
            Answer {
                warnings: vec!["looks fine".into()],
                ..allow()
            }
        }
    })
    .await;
    let env = env_with(&hook);
    install_one(
        &env,
        "ValidatingWebhookConfiguration",
        "validation.example.dev",
        "/validate",
        &hook.ca_bundle(),
        json!({}),
    );
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    let err = api_err(
        cms.create(&PostParams::default(), &cm("refused", json!({"bad": "yes"})))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 400);
    assert_eq!(err.reason, "BadRequest");
    assert_eq!(
        err.message,
        "configmaps \"refused\" is forbidden: admission webhook \"validation.example.dev\" denied the request: validation failed: invalid value: bad: metadata.labels"
    );
    assert!(
        env.get_object("", "v1", "configmaps", Some(NS), "refused")
            .is_none(),
        "a denied create stores nothing"
    );

    cms.create(&PostParams::default(), &cm("accepted", json!({})))
        .await
        .unwrap();
    let reviews = hook.reviews();
    let last = &reviews.last().unwrap()["request"];
    assert_eq!(reviews.last().unwrap()["path"], "/validate?timeout=10s");
    assert_eq!(last["operation"], "CREATE");
    assert_eq!(
        last["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        last["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(last["namespace"], NS);
    assert_eq!(last["name"], "accepted");
    assert!(
        last["object"]["metadata"]["uid"].is_string(),
        "validating webhooks see the object as stored"
    );
    assert!(last["oldObject"].is_null());

    // A webhook that gives no status is a 403 Forbidden without explanation.
    let silent = TestWebhook::start(|_| Answer::default()).await;
    env.route_service("system", "webhook", 443, silent.addr);
    env.update_object(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "validation.example.dev"},
        "webhooks": [webhook("validation.example.dev", "/validate", &silent.ca_bundle(), json!({}))],
    }))
    .unwrap();
    let err = api_err(
        cms.create(&PostParams::default(), &cm("silent", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        err.message,
        "configmaps \"silent\" is forbidden: admission webhook \"validation.example.dev\" denied the request without explanation"
    );
}

#[tokio::test]
async fn mutating_webhooks_patch_before_validation_and_validating_ones_see_the_result() {
    let hook = TestWebhook::start(|req| {
        let mutating = req["object"]["metadata"]["labels"]["defaulted"].is_null();
        if mutating {
            let labels = &req["object"]["metadata"]["labels"];
            let patch = if labels.is_object() {
                json!([{"op": "add", "path": "/metadata/labels/defaulted", "value": "true"}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {"defaulted": "true"}}])
            };
            Answer {
                patch: Some(patch),
                ..allow()
            }
        } else {
            allow()
        }
    })
    .await;
    let env = env_with(&hook);
    install_one(
        &env,
        "MutatingWebhookConfiguration",
        "defaulting.example.dev",
        "/defaulting",
        &hook.ca_bundle(),
        json!({}),
    );
    install_one(
        &env,
        "ValidatingWebhookConfiguration",
        "validation.example.dev",
        "/validate",
        &hook.ca_bundle(),
        json!({}),
    );
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    let before = env.resource_version();
    let created = cms
        .create(&PostParams::default(), &cm("plain", json!({})))
        .await
        .unwrap();
    assert_eq!(created.metadata.labels.unwrap()["defaulted"], "true");
    assert_eq!(env.resource_version(), before + 1, "one write, one revision");

    let reviews = hook.reviews();
    let paths: Vec<&str> = reviews.iter().map(|r| r["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/defaulting?timeout=10s", "/validate?timeout=10s"]);
    let mutating_saw = &reviews[0]["request"]["object"]["metadata"];
    assert!(
        mutating_saw["uid"].is_null() && mutating_saw["creationTimestamp"].is_null(),
        "{mutating_saw}"
    );
    assert_eq!(
        reviews[1]["request"]["object"]["metadata"]["labels"]["defaulted"],
        "true"
    );

    // A patch goes through them too, with the stored object as oldObject.
    let patched = cms
        .patch(
            "plain",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"defaulted": null, "other": "x"}}})),
        )
        .await
        .unwrap();
    let labels = patched.metadata.labels.unwrap();
    assert_eq!(
        (labels["defaulted"].as_str(), labels["other"].as_str()),
        ("true", "x")
    );
    let update = &hook.reviews()[2]["request"];
    assert_eq!(update["operation"], "UPDATE");
    assert_eq!(update["oldObject"]["metadata"]["labels"]["defaulted"], "true");
    let stored = env.get_object("", "v1", "configmaps", Some(NS), "plain").unwrap();
    assert_eq!(stored["metadata"]["labels"]["defaulted"], "true");
}

#[tokio::test]
async fn a_mutating_webhook_may_fill_in_what_validation_requires() {
    // A Service of type ClusterIP needs ports; a webhook that adds them makes the create valid.
    let hook = TestWebhook::start(|req| Answer {
        patch: req["object"]["spec"]["ports"]
            .is_null()
            .then(|| json!([{"op": "add", "path": "/spec/ports", "value": [{"port": 80}]}])),
        ..allow()
    })
    .await;
    let env = env_with(&hook);
    install_one(
        &env,
        "MutatingWebhookConfiguration",
        "ports.example.dev",
        "/ports",
        &hook.ca_bundle(),
        json!({"rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["services"]}]}),
    );
    let svcs: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(env.client(), NS);
    let svc =
        serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}}}))
            .unwrap();
    let created = svcs.create(&PostParams::default(), &svc).await.unwrap();
    assert_eq!(created.spec.unwrap().ports.unwrap()[0].port, 80);
}

#[tokio::test]
async fn failure_policy_decides_what_an_unreachable_webhook_means() {
    let hook = TestWebhook::start(|_| allow()).await;
    let env = TestEnv::new(); // no route: the Service cannot be reached
    install_one(
        &env,
        "ValidatingWebhookConfiguration",
        "strict.example.dev",
        "/v",
        &hook.ca_bundle(),
        json!({"failurePolicy": "Fail"}),
    );
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    let err = api_err(
        cms.create(&PostParams::default(), &cm("a", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (500, "InternalError"));
    assert!(
        err.message.starts_with(
            "Internal error occurred: failed calling webhook \"strict.example.dev\": failed to call webhook: Post \"https://webhook.system.svc:443/v?timeout=10s\": dial tcp: lookup webhook.system.svc: no such host"
        ),
        "{}",
        err.message
    );

    env.update_object(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "strict.example.dev"},
        "webhooks": [webhook("strict.example.dev", "/v", &hook.ca_bundle(), json!({"failurePolicy": "Ignore"}))],
    }))
    .unwrap();
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();

    // A certificate from another CA is refused as kube-apiserver refuses it.
    let other = TestWebhook::start(|_| allow()).await;
    env.route_service("system", "webhook", 443, other.addr);
    env.update_object(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "strict.example.dev"},
        "webhooks": [webhook("strict.example.dev", "/v", &hook.ca_bundle(), json!({}))],
    }))
    .unwrap();
    let err = api_err(
        cms.create(&PostParams::default(), &cm("b", json!({})))
            .await
            .unwrap_err(),
    );
    assert!(
        err.message
            .ends_with("tls: failed to verify certificate: x509: certificate signed by unknown authority"),
        "{}",
        err.message
    );
    assert!(other.reviews().is_empty());
}

#[tokio::test]
async fn rules_and_selectors_choose_the_requests_a_webhook_sees() {
    let hook = TestWebhook::start(|_| allow()).await;
    let env = env_with(&hook);
    env.create_object(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "watched", "labels": {"team": "a"}}}))
        .unwrap();
    env.create_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ignored"}}))
        .unwrap();
    install(
        &env,
        "ValidatingWebhookConfiguration",
        "selective.example.dev",
        vec![webhook(
            "selective.example.dev",
            "/v",
            &hook.ca_bundle(),
            json!({
                "namespaceSelector": {"matchLabels": {"team": "a"}},
                "objectSelector": {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps/*"], "scope": "Namespaced"}],
            }),
        )],
    );
    let watched: Api<ConfigMap> = Api::namespaced(env.client(), "watched");
    let ignored: Api<ConfigMap> = Api::namespaced(env.client(), "ignored");
    watched
        .create(&PostParams::default(), &cm("seen", json!({})))
        .await
        .unwrap();
    watched
        .create(&PostParams::default(), &cm("skipped", json!({"skip": "yes"})))
        .await
        .unwrap();
    ignored
        .create(&PostParams::default(), &cm("elsewhere", json!({})))
        .await
        .unwrap();
    // UPDATE is not in the rule.
    watched
        .patch(
            "seen",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "w"}})),
        )
        .await
        .unwrap();
    let names: Vec<String> = hook
        .reviews()
        .iter()
        .map(|r| r["request"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["seen"]);
}

#[tokio::test]
async fn dry_runs_reach_only_webhooks_without_side_effects() {
    let hook = TestWebhook::start(|_| allow()).await;
    let env = env_with(&hook);
    install_one(
        &env,
        "ValidatingWebhookConfiguration",
        "effects.example.dev",
        "/v",
        &hook.ca_bundle(),
        json!({"sideEffects": "Unknown"}),
    );
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    let err = api_err(
        cms.create(
            &PostParams {
                dry_run: true,
                ..PostParams::default()
            },
            &cm("a", json!({})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 400);
    assert_eq!(
        err.message,
        "admission webhook \"effects.example.dev\" does not support dry run"
    );

    env.update_object(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "effects.example.dev"},
        "webhooks": [webhook("effects.example.dev", "/v", &hook.ca_bundle(), json!({"sideEffects": "NoneOnDryRun"}))],
    }))
    .unwrap();
    cms.create(
        &PostParams {
            dry_run: true,
            ..PostParams::default()
        },
        &cm("a", json!({})),
    )
    .await
    .unwrap();
    assert_eq!(hook.reviews()[0]["request"]["dryRun"], true);
    assert!(env.get_object("", "v1", "configmaps", Some(NS), "a").is_none());
}

#[tokio::test]
async fn a_webhook_asking_to_be_reinvoked_sees_a_later_webhooks_change() {
    // "first" stamps the number of labels it saw; "second" adds a label afterwards.
    let hook = TestWebhook::start(|req| {
        let labels = req["object"]["metadata"]["labels"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let path = |k: &str| format!("/metadata/labels/{k}");
        if req["options"].is_object() && !labels.contains_key("second") && labels.contains_key("first") {
            return Answer {
                patch: Some(json!([{"op": "add", "path": path("second"), "value": "x"}])),
                ..allow()
            };
        }
        Answer {
            patch: Some(json!([{"op": "add", "path": path("first"), "value": labels.len().to_string()}])),
            ..allow()
        }
    })
    .await;
    let env = env_with(&hook);
    install(
        &env,
        "MutatingWebhookConfiguration",
        "a.example.dev",
        vec![webhook(
            "first.example.dev",
            "/first",
            &hook.ca_bundle(),
            json!({"reinvocationPolicy": "IfNeeded"}),
        )],
    );
    install(
        &env,
        "MutatingWebhookConfiguration",
        "b.example.dev",
        vec![webhook(
            "second.example.dev",
            "/second",
            &hook.ca_bundle(),
            json!({}),
        )],
    );
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    let created = cms
        .create(&PostParams::default(), &cm("x", json!({"given": "1"})))
        .await
        .unwrap();
    let labels = created.metadata.labels.unwrap();
    let paths: Vec<String> = hook
        .reviews()
        .iter()
        .map(|r| r["path"].as_str().unwrap().split('?').next().unwrap().to_owned())
        .collect();
    assert_eq!(paths, ["/first", "/second", "/first"]);
    // The second call of "first" saw given, first and second.
    assert_eq!(labels["first"], "3");
    assert_eq!(labels["second"], "x");
}

#[tokio::test]
async fn a_response_for_another_request_is_an_internal_error() {
    let hook = TestWebhook::start(|_| Answer {
        uid: Some("someone-else".into()),
        ..allow()
    })
    .await;
    let env = env_with(&hook);
    install_one(
        &env,
        "ValidatingWebhookConfiguration",
        "confused.example.dev",
        "/v",
        &hook.ca_bundle(),
        json!({}),
    );
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    let err = api_err(
        cms.create(&PostParams::default(), &cm("a", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 500);
    assert!(err.message.contains("expected response.uid="), "{}", err.message);
}

#[tokio::test]
async fn webhooks_are_called_over_a_url_and_for_deletes() {
    let hook = TestWebhook::start_for("localhost", |req| {
        if req["operation"] == "DELETE" {
            Answer {
                status: Some(json!({"message": "kept on purpose"})),
                ..Answer::default()
            }
        } else {
            allow()
        }
    })
    .await;
    let env = TestEnv::new();
    install(
        &env,
        "ValidatingWebhookConfiguration",
        "keeper.example.dev",
        vec![json!({
            "name": "keeper.example.dev",
            "clientConfig": {"url": format!("https://localhost:{}/keep", hook.addr.port()), "caBundle": hook.ca_bundle()},
            "rules": [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1beta1", "v1"],
        })],
    );
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    cms.create(&PostParams::default(), &cm("kept", json!({})))
        .await
        .unwrap();
    let err = api_err(cms.delete("kept", &Default::default()).await.unwrap_err());
    assert_eq!(err.code, 403);
    assert_eq!(
        err.message,
        "configmaps \"kept\" is forbidden: admission webhook \"keeper.example.dev\" denied the request: kept on purpose"
    );
    let review = &hook.reviews()[0];
    assert_eq!(
        review["apiVersion"], "admission.k8s.io/v1beta1",
        "the first version listed is used"
    );
    assert!(review["request"]["object"].is_null());
    assert_eq!(review["request"]["oldObject"]["metadata"]["name"], "kept");
    assert!(env.get_object("", "v1", "configmaps", Some(NS), "kept").is_some());
}
