#![allow(
    clippy::too_many_lines,
    reason = "each test walks one behaviour through a sequence of requests that build on each other"
)]
//! Storage and verb semantics, driven through a real `kube::Client`.

use crate::common;

use common::{api_err, asvc, asvc_api, client_with_kubeconfig, env_with_crd};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use kinject_testenv::TestEnv;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

async fn raw(client: &kube::Client, method: &str, uri: &str, content_type: &str, body: &str) -> (u16, Value) {
    common::send_bytes(
        client,
        method,
        uri,
        &[("content-type", content_type)],
        body.as_bytes().to_vec(),
    )
    .await
}

#[tokio::test]
async fn create_get_update_delete_with_system_metadata() {
    let env = TestEnv::new();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let rv0 = env.resource_version();
    let created = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.as_deref().is_some_and(|u| u.len() == 36));
    assert!(meta.creation_timestamp.is_some());
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    let rv1: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();
    assert_eq!(rv1, rv0 + 1);
    assert_eq!(meta.generation, None, "ConfigMaps have no generation");

    let got = api.get("a").await.unwrap();
    assert_eq!(got, created);

    let mut changed = got.clone();
    changed.data = Some([("k".to_owned(), "w".to_owned())].into());
    let updated = api.replace("a", &PostParams::default(), &changed).await.unwrap();
    let rv2: u64 = updated
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1);
    assert_eq!(updated.metadata.uid, created.metadata.uid);
    assert_eq!(
        updated.metadata.creation_timestamp,
        created.metadata.creation_timestamp
    );

    // An update that changes nothing is not a write.
    let same = api.replace("a", &PostParams::default(), &updated).await.unwrap();
    assert_eq!(same.metadata.resource_version, updated.metadata.resource_version);
    assert_eq!(env.resource_version(), rv2);

    let deleted = api.delete("a", &DeleteParams::default()).await.unwrap();
    let status = deleted.right().expect("ConfigMap deletion answers a Status");
    assert_eq!(status.status, Some(kube::core::response::StatusSummary::Success));
    let details = status.details.unwrap();
    assert_eq!(details.name, "a");
    assert_eq!(details.kind, "configmaps");
    assert_eq!(env.resource_version(), rv2 + 1, "deletion takes a revision");

    let e = api_err(api.get("a").await.unwrap_err());
    assert_eq!(e.code, 404);
    assert_eq!(e.reason, "NotFound");
    assert_eq!(e.message, "configmaps \"a\" not found");
    let d = e.details.unwrap();
    assert_eq!(
        (d.name.as_str(), d.kind.as_str(), d.group.as_str()),
        ("a", "configmaps", "")
    );
}

#[tokio::test]
async fn conflicts_and_already_exists() {
    let env = TestEnv::new();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let created = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let e = api_err(api.create(&PostParams::default(), &cm("a")).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(e.message, "configmaps \"a\" already exists");

    let mut newer = created.clone();
    newer.data = Some([("k".to_owned(), "newer".to_owned())].into());
    api.replace("a", &PostParams::default(), &newer).await.unwrap();
    let mut stale = created.clone();
    stale.data = Some([("x".to_owned(), "y".to_owned())].into());
    let e = api_err(
        api.replace("a", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );

    // A merge patch carrying a stale resourceVersion is a precondition.
    let patch =
        json!({"metadata": {"resourceVersion": created.metadata.resource_version}, "data": {"z": "1"}});
    let e = api_err(
        api.patch("a", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 409);
}

#[tokio::test]
async fn custom_resources_need_resource_version_and_track_generation() {
    let env = env_with_crd();
    let api = asvc_api(env.client(), "default");
    let created = api
        .create(&PostParams::default(), &asvc("rut", "webhook"))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    // Schema defaults apply.
    assert_eq!(created.data["spec"]["replicas"], json!(1));

    let mut no_rv = created.clone();
    no_rv.metadata.resource_version = None;
    let e = api_err(
        api.replace("rut", &PostParams::default(), &no_rv)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        "addressableservices.samples.knative.dev \"rut\" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update"
    );

    // Metadata-only change: no generation bump.
    let p = json!({"metadata": {"labels": {"a": "b"}}});
    let o = api
        .patch("rut", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
    assert_eq!(o.metadata.generation, Some(1));
    // Spec change: +1.
    let p = json!({"spec": {"serviceName": "other"}});
    let o = api
        .patch("rut", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
    assert_eq!(o.metadata.generation, Some(2));
    // Status change through the status subresource: no bump.
    let p = json!({"status": {"observedGeneration": 2}});
    let o = api
        .patch_status("rut", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
    assert_eq!(o.metadata.generation, Some(2));
    assert_eq!(o.data["status"]["observedGeneration"], json!(2));
}

#[tokio::test]
async fn status_subresource_rules() {
    let env = env_with_crd();
    let api = asvc_api(env.client(), "default");
    let mut obj = asvc("rut", "webhook");
    obj.data["status"] = json!({"observedGeneration": 7});
    let created = api.create(&PostParams::default(), &obj).await.unwrap();
    assert!(
        created.data.get("status").is_none(),
        "status is dropped on create"
    );

    // Status written on the main resource is ignored.
    let mut with_status = created.clone();
    with_status.data["status"] = json!({"observedGeneration": 3});
    with_status.data["spec"]["serviceName"] = json!("x");
    let o = api
        .replace("rut", &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert!(o.data.get("status").is_none());
    assert_eq!(o.data["spec"]["serviceName"], json!("x"));

    // Only status changes apply on the status subresource.
    let mut via_status = o.clone();
    via_status.data["status"] = json!({"observedGeneration": 3});
    via_status.data["spec"]["serviceName"] = json!("ignored");
    via_status.metadata.labels = Some([("ignored".to_owned(), "yes".to_owned())].into());
    let o2 = api
        .replace_status("rut", &PostParams::default(), &via_status)
        .await
        .unwrap();
    assert_eq!(o2.data["status"]["observedGeneration"], json!(3));
    assert_eq!(o2.data["spec"]["serviceName"], json!("x"));
    assert!(o2.metadata.labels.is_none());

    // Stale status updates conflict.
    let e = api_err(
        api.replace_status("rut", &PostParams::default(), &via_status)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 409);

    // Built-in kinds follow the same rules.
    let deps: Api<Deployment> = Api::namespaced(env.client(), "default");
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}},
                              "spec": {"containers": [{"name": "c", "image": "img:1"}]}}},
        "status": {"replicas": 5}
    }))
    .unwrap();
    let d = deps.create(&PostParams::default(), &d).await.unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    assert_eq!(d.spec.as_ref().unwrap().replicas, Some(1), "defaulted");
    assert_eq!(d.status.as_ref().and_then(|s| s.replicas), None);
    let p = json!({"status": {"replicas": 2}});
    let d2 = deps
        .patch_status("d", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
    assert_eq!(d2.status.unwrap().replicas, Some(2));
    assert_eq!(d2.metadata.generation, Some(1));
}

#[tokio::test]
async fn schema_validation_and_pruning() {
    let env = env_with_crd();
    let api = asvc_api(env.client(), "default");
    let mut bad = asvc("bad", "svc");
    bad.data["spec"] = json!({"replicas": "three", "mode": "c"});
    let e = api_err(api.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(
        e.message
            .starts_with("AddressableService.samples.knative.dev \"bad\" is invalid: ["),
        "{}",
        e.message
    );
    assert!(e.message.contains(
        "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
    ));
    assert!(
        e.message
            .contains("spec.mode: Unsupported value: \"c\": supported values: \"a\", \"b\"")
    );
    assert!(e.message.contains("spec.serviceName: Required value"));
    let causes = e.details.unwrap().causes;
    assert!(
        causes
            .iter()
            .any(|c| c.field == "spec.serviceName" && c.reason == "FieldValueRequired")
    );

    let mut extra = asvc("extra", "svc");
    extra.data["spec"]["unknown"] = json!(1);
    extra.data["spec"]["free"] = json!({"anything": {"goes": true}});
    extra.data["topLevel"] = json!("x");
    let o = api.create(&PostParams::default(), &extra).await.unwrap();
    assert!(o.data["spec"].get("unknown").is_none());
    assert!(o.data.get("topLevel").is_none());
    assert_eq!(o.data["spec"]["free"]["anything"]["goes"], json!(true));

    // fieldValidation=Strict rejects unknown fields instead.
    let mut strict = asvc("strict", "svc");
    strict.data["spec"]["unknown"] = json!(1);
    let (code, body) = raw(
        &env.client(),
        "POST",
        "/apis/samples.knative.dev/v1alpha1/namespaces/default/addressableservices?fieldValidation=Strict",
        "application/json",
        &serde_json::to_string(&strict).unwrap(),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        body["message"],
        json!("strict decoding error: unknown field \"spec.unknown\"")
    );
}

#[tokio::test]
async fn finalizers_keep_objects_until_removed() {
    let env = env_with_crd();
    let api = asvc_api(env.client(), "default");
    let mut obj = asvc("rut", "webhook");
    obj.metadata.finalizers = Some(vec!["addressableservices.samples.knative.dev".into()]);
    api.create(&PostParams::default(), &obj).await.unwrap();

    let pending = api.delete("rut", &DeleteParams::default()).await.unwrap();
    let pending = pending.left().expect("pending deletion answers the object");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert_eq!(
        pending.metadata.generation,
        Some(2),
        "graceful deletion bumps generation"
    );
    // Deleting again changes nothing.
    let again = api
        .delete("rut", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(again.metadata.resource_version, pending.metadata.resource_version);

    // No new finalizers while deleting.
    let p = json!({"metadata": {"finalizers": ["addressableservices.samples.knative.dev", "other.dev/x"]}});
    let e = api_err(
        api.patch("rut", &PatchParams::default(), &Patch::Merge(&p))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert!(
        e.message
            .contains("no new finalizers can be added if the object is being deleted")
    );

    // Knative's exact finalizer-removal patch deletes the object.
    let body = format!(
        r#"{{"metadata":{{"finalizers":[],"resourceVersion":"{}"}}}}"#,
        pending.metadata.resource_version.unwrap()
    );
    let (code, _) = raw(
        &env.client(),
        "PATCH",
        "/apis/samples.knative.dev/v1alpha1/namespaces/default/addressableservices/rut",
        "application/merge-patch+json",
        &body,
    )
    .await;
    assert_eq!(code, 200);
    assert!(api.get_opt("rut").await.unwrap().is_none());
    let last = env.actions().into_iter().rfind(|a| a.verb == "patch").unwrap();
    assert_eq!(last.content_type, "application/merge-patch+json");
    assert_eq!(
        last.body.as_deref(),
        Some(body.as_bytes()),
        "patch bytes logged as received"
    );
}

#[tokio::test]
async fn delete_preconditions_and_propagation() {
    let env = TestEnv::new();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let c = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let e = api_err(
        api.delete(
            "a",
            &DeleteParams::default().preconditions(kube::api::Preconditions {
                uid: Some("nope".into()),
                resource_version: None,
            }),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    assert_eq!(
        e.message,
        format!(
            "Operation cannot be fulfilled on ConfigMap \"a\": the UID in the precondition (nope) does not match the UID in record ({}). The object might have been deleted and then recreated",
            c.metadata.uid.clone().unwrap()
        )
    );
    // Orphan adds the `orphan` finalizer; with no garbage collector it stays.
    let o = api
        .delete("a", &DeleteParams::orphan())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(o.metadata.finalizers, Some(vec!["orphan".into()]));
    // Pods answer with the deleted object.
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}))
    .unwrap();
    let p = pods.create(&PostParams::default(), &pod).await.unwrap();
    let spec = p.spec.as_ref().unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.containers[0].image_pull_policy.as_deref(), Some("Always"));
    assert!(
        pods.delete("p", &DeleteParams::default())
            .await
            .unwrap()
            .is_left()
    );
}

#[tokio::test]
async fn namespaces_and_names() {
    let env = TestEnv::new();
    let client = env.client();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "missing");
    let e = api_err(api.create(&PostParams::default(), &cm("a")).await.unwrap_err());
    assert_eq!(
        (e.code, e.message.as_str()),
        (404, "namespaces \"missing\" not found")
    );

    let mut other = cm("a");
    other.metadata.namespace = Some("kube-system".into());
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let e = api_err(api.create(&PostParams::default(), &other).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    assert_eq!(
        e.message,
        "the namespace of the provided object does not match the namespace sent on the request"
    );

    let e = api_err(
        api.create(&PostParams::default(), &cm("Bad_Name"))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert!(e.message.starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"));

    let mut generated = cm("");
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("sd-".into());
    let g = api.create(&PostParams::default(), &generated).await.unwrap();
    let name = g.metadata.name.unwrap();
    assert_eq!(name.len(), 8);
    assert!(
        name[3..]
            .bytes()
            .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b))
    );

    let seq = TestEnv::builder()
        .name_generator(kinject_testenv::NameGenerator::sequential())
        .build();
    let api: Api<ConfigMap> = Api::namespaced(seq.client(), "default");
    let g = api.create(&PostParams::default(), &generated).await.unwrap();
    assert_eq!(g.metadata.name.as_deref(), Some("sd-00001"));
    api.create(&PostParams::default(), &cm("sd-00002")).await.unwrap();
    let g = api.create(&PostParams::default(), &generated).await.unwrap();
    assert_eq!(
        g.metadata.name.as_deref(),
        Some("sd-00003"),
        "a taken generated name is retried"
    );

    // Namespace deletion as on a bare kube-apiserver: Terminating, and no new content.
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap();
    let ns = nss.create(&PostParams::default(), &ns).await.unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Active"));
    let gone = nss
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(gone.status.unwrap().phase.as_deref(), Some("Terminating"));
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "doomed");
    let e = api_err(api.create(&PostParams::default(), &cm("a")).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    // Admission names a generated object by its prefix (the name is not chosen yet).
    let generated: ConfigMap = serde_json::from_value(json!({"metadata": {"generateName": "gen-"}})).unwrap();
    let e = api_err(api.create(&PostParams::default(), &generated).await.unwrap_err());
    assert_eq!(
        e.message,
        "configmaps \"gen-\" is forbidden: unable to create new content in namespace doomed because it is being terminated"
    );
    assert_eq!(e.details.unwrap().name, "gen-");
    let e = api_err(nss.delete("default", &DeleteParams::default()).await.unwrap_err());
    assert_eq!(e.code, 403);
}

#[tokio::test]
async fn label_and_field_selectors() {
    let env = TestEnv::new();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    for (n, env_label, tier) in [
        ("a", "prod", "web"),
        ("b", "dev", "web"),
        ("c", "prod", "db"),
        ("d", "", ""),
    ] {
        let mut c = cm(n);
        if !env_label.is_empty() {
            c.metadata.labels = Some(
                [
                    ("env".to_owned(), env_label.to_owned()),
                    ("tier".to_owned(), tier.to_owned()),
                ]
                .into(),
            );
        }
        api.create(&PostParams::default(), &c).await.unwrap();
    }
    let names = |l: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        l.items.into_iter().map(|c| c.metadata.name.unwrap()).collect()
    };
    let q = |s: &str| ListParams::default().labels(s);
    assert_eq!(names(api.list(&q("env=prod")).await.unwrap()), ["a", "c"]);
    assert_eq!(
        names(api.list(&q("env in (prod,dev),tier!=db")).await.unwrap()),
        ["a", "b"]
    );
    assert_eq!(names(api.list(&q("!env")).await.unwrap()), ["d"]);
    assert_eq!(names(api.list(&q("env notin (prod)")).await.unwrap()), ["b", "d"]);
    assert_eq!(names(api.list(&q("tier")).await.unwrap()), ["a", "b", "c"]);
    let f = ListParams::default().fields("metadata.name=b");
    assert_eq!(names(api.list(&f).await.unwrap()), ["b"]);
    let f = ListParams::default().fields("metadata.namespace!=default");
    assert!(api.list(&f).await.unwrap().items.is_empty());

    let e = api_err(api.list(&q("env in prod")).await.unwrap_err());
    assert_eq!(e.code, 400);
    let e = api_err(
        api.list(&ListParams::default().fields("data.k=v"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            400,
            "\"data.k\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        )
    );
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let e = api_err(
        pods.list(&ListParams::default().fields("spec.bogus=x"))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.message, "field label not supported: spec.bogus");
    pods.list(&ListParams::default().fields("status.phase=Running,spec.nodeName="))
        .await
        .unwrap();
    let env2 = env_with_crd();
    let e = api_err(
        asvc_api(env2.client(), "default")
            .list(&ListParams::default().fields("spec.serviceName=x"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        e.message,
        "\"spec.serviceName\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
    );

    // Items in a built-in list carry no kind; the list has the current revision.
    let all: Api<ConfigMap> = Api::all(env.client());
    let l = all.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        l.metadata.resource_version,
        Some(env.resource_version().to_string())
    );
    let m = all.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(m.items.len(), 4);
}

#[tokio::test]
async fn pagination_is_consistent_and_tokens_expire() {
    let env = TestEnv::builder().watch_history(50).build();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    for i in 0..10 {
        api.create(&PostParams::default(), &cm(&format!("c{i}")))
            .await
            .unwrap();
    }
    let page1 = api.list(&ListParams::default().limit(4)).await.unwrap();
    assert_eq!(page1.items.len(), 4);
    assert_eq!(page1.metadata.remaining_item_count, Some(6));
    let token = page1.metadata.continue_.clone().unwrap();
    // Writes after the first page do not show in later pages: the list is a snapshot.
    api.delete("c5", &DeleteParams::default()).await.unwrap();
    api.create(&PostParams::default(), &cm("c99")).await.unwrap();
    let page2 = api
        .list(&ListParams::default().limit(4).continue_token(&token))
        .await
        .unwrap();
    let names: Vec<_> = page2
        .items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["c4", "c5", "c6", "c7"]);
    assert_eq!(page2.metadata.resource_version, page1.metadata.resource_version);
    let page3 = api
        .list(
            &ListParams::default()
                .limit(4)
                .continue_token(page2.metadata.continue_.as_ref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(page3.items.len(), 2);
    assert!(page3.metadata.continue_.is_none());

    // Once the history window has moved past the token, it has expired.
    env.compact();
    let e = api_err(
        api.list(&ListParams::default().limit(4).continue_token(&token))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
    assert!(
        e.message
            .starts_with("The provided continue parameter is too old")
    );
}

#[tokio::test]
async fn patch_types() {
    let env = env_with_crd();
    let client = env.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "finalizers": ["a.dev/x"]},
        "spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:1"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();

    // Strategic merge patch merges containers by name and finalizers as a set.
    let smp = json!({"metadata": {"finalizers": ["b.dev/y"]},
                     "spec": {"containers": [{"name": "b", "image": "y:2"}]}});
    let p = pods
        .patch("p", &PatchParams::default(), &Patch::Strategic(&smp))
        .await
        .unwrap();
    let cs = &p.spec.as_ref().unwrap().containers;
    assert_eq!((cs.len(), cs[1].image.as_deref()), (2, Some("y:2")));
    assert_eq!(
        p.metadata.finalizers,
        Some(vec!["a.dev/x".into(), "b.dev/y".into()])
    );
    assert_eq!(p.metadata.generation, Some(2));

    // JSON patch, including `test` (kube-rs's finalizer helper relies on it).
    let ok: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": ["a.dev/x", "b.dev/y"]},
        {"op": "remove", "path": "/metadata/finalizers/0"}
    ]))
    .unwrap();
    let p = pods
        .patch("p", &PatchParams::default(), &Patch::Json::<()>(ok))
        .await
        .unwrap();
    assert_eq!(p.metadata.finalizers, Some(vec!["b.dev/y".into()]));
    let failing: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": []}
    ]))
    .unwrap();
    let e = api_err(
        pods.patch("p", &PatchParams::default(), &Patch::Json::<()>(failing))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));

    // Custom resources take merge and JSON patches, not strategic ones.
    let api = asvc_api(client.clone(), "default");
    api.create(&PostParams::default(), &asvc("rut", "webhook"))
        .await
        .unwrap();
    let e = api_err(
        api.patch(
            "rut",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (415, "UnsupportedMediaType"));
    let (code, body) = raw(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/pods/p",
        "application/x-yaml",
        "{}",
    )
    .await;
    assert_eq!(code, 415);
    assert_eq!(body["reason"], json!("UnsupportedMediaType"));
    let (code, _) = raw(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/pods/p",
        "application/merge-patch+json",
        "{not json",
    )
    .await;
    assert_eq!(code, 400);
}

#[tokio::test]
async fn error_statuses_for_paths_and_methods() {
    let env = TestEnv::new();
    let client = env.client();
    let (code, body) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps/x",
        "application/json",
        "{}",
    )
    .await;
    assert_eq!(code, 405);
    assert_eq!(body["reason"], json!("MethodNotAllowed"));
    assert_eq!(body["kind"], json!("Status"));
    assert_eq!(body["apiVersion"], json!("v1"));
    assert_eq!(body["status"], json!("Failure"));
    let (code, body) = raw(&client, "GET", "/api/v1/things", "", "").await;
    assert_eq!((code, body["reason"].clone()), (404, json!("NotFound")));
    let (code, body) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        "{",
    )
    .await;
    assert_eq!((code, body["reason"].clone()), (400, json!("BadRequest")));
    let (code, _) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/vnd.kubernetes.protobuf",
        "x",
    )
    .await;
    assert_eq!(code, 400, "malformed protobuf");
    // An empty envelope is an empty Pod of the endpoint's kind, which validation refuses.
    let (code, body) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/pods",
        "application/vnd.kubernetes.protobuf",
        "k8s\u{0}",
    )
    .await;
    assert_eq!((code, body["reason"].clone()), (422, json!("Invalid")), "{body}");
    let (code, body) = raw(
        &client,
        "GET",
        "/api/v1/configmaps?resourceVersionMatch=Exact",
        "",
        "",
    )
    .await;
    assert_eq!((code, body["reason"].clone()), (422, json!("Invalid")));
}

#[tokio::test]
async fn discovery_serves_builtins_and_crds() {
    let env = env_with_crd();
    let d = kube::Discovery::new(env.client()).run().await.unwrap();
    let (ar, caps) = d
        .resolve_gvk(&kube::core::GroupVersionKind::gvk(
            "samples.knative.dev",
            "v1alpha1",
            "AddressableService",
        ))
        .unwrap();
    assert_eq!(ar.plural, "addressableservices");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    assert!(
        caps.subresources
            .iter()
            .any(|(s, _)| s.plural == "addressableservices/status" || s.plural == "status")
    );
    assert!(d.has_group("apps"));
    assert!(d.has_group("coordination.k8s.io"));
    // Aggregated discovery (apidiscovery.k8s.io/v2) finds the same.
    let agg = kube::Discovery::new(env.client()).run_aggregated().await.unwrap();
    let (ar2, caps2) = agg
        .resolve_gvk(&kube::core::GroupVersionKind::gvk(
            "samples.knative.dev",
            "v1alpha1",
            "AddressableService",
        ))
        .unwrap();
    assert_eq!(ar2.plural, "addressableservices");
    assert_eq!(caps2.scope, kube::discovery::Scope::Namespaced);
    assert!(agg.has_group(""));
    assert!(agg.has_group("apiextensions.k8s.io"));
    let v = env.client().apiserver_version().await.unwrap();
    assert_eq!((v.major.as_str(), v.minor.as_str()), ("1", "33"));
    let list = env
        .client()
        .list_api_group_resources("samples.knative.dev/v1alpha1")
        .await
        .unwrap();
    let r = &list.resources[0];
    assert_eq!(r.short_names, Some(vec!["asvc".into()]));
    assert_eq!(r.categories, Some(vec!["all".into(), "knative".into()]));
    assert_eq!(r.singular_name, "addressableservice");
}

#[tokio::test]
async fn hooks_reactors_actions_counters() {
    let env = env_with_crd();
    let client = env.client();
    let api = asvc_api(client.clone(), "default");
    let created = api
        .create(&PostParams::default(), &asvc("rut", "webhook"))
        .await
        .unwrap();

    env.react(
        kinject_testenv::Reactor::on("update", "addressableservices")
            .subresource("status")
            .times(1)
            .respond(kinject_testenv::ErrorStatus::conflict()),
    );
    let mut s = created.clone();
    s.data["status"] = json!({"observedGeneration": 1});
    let e = api_err(
        api.replace_status("rut", &PostParams::default(), &s)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on addressableservices.samples.knative.dev \"rut\": the object has been modified; please apply your changes to the latest version and try again"
    );
    // Only once.
    api.replace_status("rut", &PostParams::default(), &s)
        .await
        .unwrap();

    env.react(kinject_testenv::Reactor::on("create", "pods"));
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x"}]}}))
    .unwrap();
    let e = api_err(pods.create(&PostParams::default(), &pod).await.unwrap_err());
    assert_eq!(
        (e.code, e.message.as_str()),
        (500, "inducing failure for create pods")
    );

    env.react(kinject_testenv::Reactor::on("get", "configmaps").nth(2).respond(
        kinject_testenv::ErrorStatus::new(503, "ServiceUnavailable", "later"),
    ));
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    assert_eq!(api_err(cms.get("x").await.unwrap_err()).code, 404);
    assert_eq!(api_err(cms.get("x").await.unwrap_err()).code, 503);
    assert_eq!(api_err(cms.get("x").await.unwrap_err()).code, 404);

    let actions = env.actions();
    let verbs: Vec<(&str, &str, &str)> = actions
        .iter()
        .map(|a| (a.verb.as_str(), a.resource.as_str(), a.subresource.as_str()))
        .collect();
    assert_eq!(
        verbs,
        [
            ("create", "addressableservices", ""),
            ("update", "addressableservices", "status"),
            ("update", "addressableservices", "status"),
            ("create", "pods", ""),
            ("get", "configmaps", ""),
            ("get", "configmaps", ""),
            ("get", "configmaps", ""),
        ]
    );
    assert_eq!(actions[1].namespace, "default");
    assert_eq!(actions[1].name, "rut");
    assert_eq!(env.request_count("get", "configmaps"), 3);
    assert_eq!(env.request_count("update", "addressableservices"), 2);
    env.clear_actions();
    assert!(env.actions().is_empty());

    env.set_latency(std::time::Duration::from_millis(30));
    let t = std::time::Instant::now();
    let _ = cms.get("x").await;
    assert!(t.elapsed() >= std::time::Duration::from_millis(30));
}

#[tokio::test]
async fn direct_access_matches_the_http_path() {
    let env = env_with_crd();
    let o = env
        .create_object(
            json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
            "metadata": {"name": "rut", "namespace": "default"}, "spec": {"serviceName": "w"},
            "status": {"observedGeneration": 1}}),
        )
        .unwrap();
    assert_eq!(o["metadata"]["generation"], json!(1));
    assert!(o.get("status").is_none());
    let mut with_status = o.clone();
    with_status["status"] = json!({"observedGeneration": 1});
    let s = env.update_status(with_status).unwrap();
    assert_eq!(s["status"]["observedGeneration"], json!(1));
    let via_api = asvc_api(env.client(), "default").get("rut").await.unwrap();
    assert_eq!(via_api.data["status"]["observedGeneration"], json!(1));
    let got = env
        .get_object(
            "samples.knative.dev",
            "v1alpha1",
            "addressableservices",
            Some("default"),
            "rut",
        )
        .unwrap();
    assert_eq!(
        got["metadata"]["resourceVersion"],
        s["metadata"]["resourceVersion"]
    );
    assert!(
        env.actions().iter().all(|a| a.verb == "get"),
        "direct access is not logged"
    );
    env.delete_object(
        "samples.knative.dev",
        "v1alpha1",
        "addressableservices",
        Some("default"),
        "rut",
    )
    .unwrap();
    assert!(
        env.get_object(
            "samples.knative.dev",
            "v1alpha1",
            "addressableservices",
            Some("default"),
            "rut"
        )
        .is_none()
    );
}

#[tokio::test]
async fn optional_garbage_collection_and_namespace_deletion() {
    let env = TestEnv::builder()
        .garbage_collection(true)
        .namespace_deletion(true)
        .build();
    let client = env.client();
    let owners: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let owner = owners.create(&PostParams::default(), &cm("owner")).await.unwrap();
    let owner_ref = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
        "uid": owner.metadata.uid.clone().unwrap(), "controller": true, "blockOwnerDeletion": true}]);
    let mut child = cm("child");
    child.metadata.owner_references = Some(serde_json::from_value(owner_ref.clone()).unwrap());
    owners.create(&PostParams::default(), &child).await.unwrap();

    // Foreground: the child goes first, then the owner.
    owners.delete("owner", &DeleteParams::foreground()).await.unwrap();
    assert!(owners.get_opt("child").await.unwrap().is_none());
    assert!(owners.get_opt("owner").await.unwrap().is_none());

    // Orphan: the owner goes, the child stays without its owner reference.
    let owner = owners.create(&PostParams::default(), &cm("owner")).await.unwrap();
    let mut child = cm("child");
    let mut r = owner_ref.clone();
    r[0]["uid"] = json!(owner.metadata.uid.clone().unwrap());
    child.metadata.owner_references = Some(serde_json::from_value(r.clone()).unwrap());
    owners.create(&PostParams::default(), &child).await.unwrap();
    owners.delete("owner", &DeleteParams::orphan()).await.unwrap();
    assert!(owners.get_opt("owner").await.unwrap().is_none());
    let kept = owners.get("child").await.unwrap();
    assert!(kept.metadata.owner_references.unwrap_or_default().is_empty());

    // Background (the default): the child is collected after the owner.
    let owner = owners
        .create(&PostParams::default(), &cm("owner2"))
        .await
        .unwrap();
    let mut child = cm("child2");
    r[0]["uid"] = json!(owner.metadata.uid.clone().unwrap());
    r[0]["name"] = json!("owner2");
    child.metadata.owner_references = Some(serde_json::from_value(r).unwrap());
    owners.create(&PostParams::default(), &child).await.unwrap();
    owners.delete("owner2", &DeleteParams::default()).await.unwrap();
    assert!(owners.get_opt("child2").await.unwrap().is_none());

    // A Terminating namespace is emptied at once and removed on the namespace
    // controller's tick, as in a cluster: meanwhile it answers Terminating,
    // and a create into it gets 403 NamespaceTerminating, not 404.
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "tmp"}})).unwrap();
    nss.create(&PostParams::default(), &ns).await.unwrap();
    let in_ns: Api<ConfigMap> = Api::namespaced(client.clone(), "tmp");
    in_ns.create(&PostParams::default(), &cm("x")).await.unwrap();
    let deleted = nss.delete("tmp", &DeleteParams::default()).await.unwrap();
    let terminating = deleted
        .left()
        .expect("a namespace is answered Terminating, not gone");
    assert_eq!(
        terminating.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    assert_eq!(
        terminating.spec.and_then(|s| s.finalizers),
        Some(vec!["kubernetes".to_owned()])
    );
    assert!(env.list_objects("", "v1", "configmaps", Some("tmp")).is_empty());
    let refused = in_ns
        .create(&PostParams::default(), &cm("late"))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("not an API error: {refused}")
    };
    assert_eq!(status.code, 403, "{status:?}");
    assert_eq!(
        status.message,
        "configmaps \"late\" is forbidden: unable to create new content in namespace tmp because it is being terminated"
    );
    // Gone within two ticks; the bound only keeps a broken server from
    // hanging the test.
    tokio::time::timeout(kinject_testenv::NAMESPACE_TICK * 20, async {
        while nss.get_opt("tmp").await.unwrap().is_some() {
            tokio::time::sleep(kinject_testenv::NAMESPACE_TICK / 5).await;
        }
    })
    .await
    .expect("the emptied namespace goes");
}

#[tokio::test]
async fn server_side_apply() {
    let env = env_with_crd();
    let client = env.client();
    let api = asvc_api(client.clone(), "default");
    let pp = |m: &str| PatchParams::apply(m);
    let cfg = json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
        "metadata": {"name": "rut", "labels": {"team": "a"}}, "spec": {"serviceName": "webhook"}});
    // Apply creates a missing object and records the manager's fields.
    let o = api.patch("rut", &pp("ctl"), &Patch::Apply(&cfg)).await.unwrap();
    assert_eq!(o.metadata.generation, Some(1));
    let mf = o.metadata.managed_fields.clone().unwrap();
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0].manager.as_deref(), Some("ctl"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));

    // Fields a manager stops applying are removed.
    let cfg2 = json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
        "metadata": {"name": "rut"}, "spec": {"serviceName": "webhook"}});
    let o = api.patch("rut", &pp("ctl"), &Patch::Apply(&cfg2)).await.unwrap();
    assert!(o.metadata.labels.unwrap_or_default().is_empty());

    // Another manager changing an owned field conflicts unless it forces.
    let other = json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
        "metadata": {"name": "rut"}, "spec": {"serviceName": "elsewhere"}});
    let e = api_err(
        api.patch("rut", &pp("other"), &Patch::Apply(&other))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert!(
        e.message
            .starts_with("Apply failed with 1 conflict: conflict with \"ctl\""),
        "{}",
        e.message
    );
    let o = api
        .patch("rut", &pp("other").force(), &Patch::Apply(&other))
        .await
        .unwrap();
    assert_eq!(o.data["spec"]["serviceName"], json!("elsewhere"));
    assert_eq!(o.metadata.generation, Some(2));

    // Knative's SSA finalizer: apply [ours], then [] removes only ours.
    let fin = |f: Value| {
        json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
        "metadata": {"name": "rut", "namespace": "default", "uid": o.metadata.uid.clone(), "finalizers": f}})
    };
    api.patch(
        "rut",
        &pp("fin-a").force(),
        &Patch::Apply(&fin(json!(["a.dev/f"]))),
    )
    .await
    .unwrap();
    api.patch(
        "rut",
        &pp("fin-b").force(),
        &Patch::Apply(&fin(json!(["b.dev/f"]))),
    )
    .await
    .unwrap();
    let o = api
        .patch("rut", &pp("fin-a").force(), &Patch::Apply(&fin(json!([]))))
        .await
        .unwrap();
    assert_eq!(o.metadata.finalizers, Some(vec!["b.dev/f".to_owned()]));

    // Status through the status subresource.
    let st = json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
        "metadata": {"name": "rut"}, "status": {"observedGeneration": 2}});
    let o = api
        .patch_status("rut", &pp("ctl").force(), &Patch::Apply(&st))
        .await
        .unwrap();
    assert_eq!(o.data["status"]["observedGeneration"], json!(2));
    assert_eq!(o.metadata.generation, Some(2));

    let (code, body) = raw(
        &client,
        "PATCH",
        "/apis/samples.knative.dev/v1alpha1/namespaces/default/addressableservices/rut",
        "application/apply-patch+yaml",
        "apiVersion: samples.knative.dev/v1alpha1\nkind: AddressableService\nmetadata:\n  name: rut\n",
    )
    .await;
    assert_eq!(
        (code, body["reason"].clone()),
        (422, json!("Invalid")),
        "fieldManager is required"
    );
    let (code, body) = raw(
        &client,
        "PATCH",
        "/apis/samples.knative.dev/v1alpha1/namespaces/default/addressableservices/rut?fieldManager=yaml",
        "application/apply-patch+yaml",
        "apiVersion: samples.knative.dev/v1alpha1\nkind: AddressableService\nmetadata:\n  name: rut\n  labels:\n    from: yaml\n",
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["metadata"]["labels"]["from"], json!("yaml"));
}

#[tokio::test]
async fn deletecollection_dry_run_yaml_and_tables() {
    let env = TestEnv::new();
    let client = env.client();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for n in ["a", "b", "c"] {
        let mut c = cm(n);
        c.metadata.labels = Some([("x".to_owned(), n.to_owned())].into());
        api.create(&PostParams::default(), &c).await.unwrap();
    }
    // dryRun=All validates and answers but stores nothing.
    let rv = env.resource_version();
    api.create(
        &PostParams {
            dry_run: true,
            ..Default::default()
        },
        &cm("d"),
    )
    .await
    .unwrap();
    assert_eq!(env.resource_version(), rv);
    assert!(api.get_opt("d").await.unwrap().is_none());

    let deleted = api
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("x in (a,b)"),
        )
        .await
        .unwrap();
    let names: Vec<String> = deleted
        .left()
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(names, ["a", "b"]);
    let left: Vec<_> = api.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(left.len(), 1);

    // YAML bodies are accepted.
    let (code, body) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  k: v\n",
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["data"]["k"], json!("v"));

    // Server-side printing for kubectl.
    let req = http::Request::get("/api/v1/namespaces/default/configmaps")
        .header(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())
        .unwrap();
    let table: Value = client.request(req).await.unwrap();
    assert_eq!(table["kind"], json!("Table"));
    let cols: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, ["Name", "Data", "Age"]);
    assert_eq!(table["rows"][0]["cells"][0], json!("c"));
    assert_eq!(table["rows"][0]["object"]["kind"], json!("PartialObjectMetadata"));
}

#[tokio::test]
async fn events_are_one_resource_in_two_versions() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use k8s_openapi::api::events::v1::Event as EventV1;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};

    let env = TestEnv::new();
    let client = env.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let c = cms.create(&PostParams::default(), &cm("subject")).await.unwrap();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "sample-controller".into(),
            instance: Some("pod-1".into()),
        },
    );
    let reference = kube::Resource::object_ref(&c, &());
    let ev = Event {
        type_: EventType::Normal,
        reason: "Reconciled".into(),
        note: Some("all good".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    recorder.publish(&ev, &reference).await.unwrap();
    recorder.publish(&ev, &reference).await.unwrap();

    let v1: Api<EventV1> = Api::namespaced(client.clone(), "default");
    let got = v1.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(got.len(), 1, "the second publish updates the series");
    assert_eq!(got[0].note.as_deref(), Some("all good"));
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let got = core
        .list(&ListParams::default().fields("involvedObject.name=subject,reason=Reconciled"))
        .await
        .unwrap()
        .items;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].message.as_deref(), Some("all good"));
    assert_eq!(got[0].reporting_component.as_deref(), Some("sample-controller"));
    assert_eq!(got[0].involved_object.name.as_deref(), Some("subject"));

    // events.k8s.io/v1 requires what a recorder must set.
    let bad: EventV1 =
        serde_json::from_value(json!({"metadata": {"name": "bad"}, "eventTime": null})).unwrap();
    let e = api_err(v1.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!(e.code, 422);
    assert!(e.message.contains("eventTime: Required value"), "{}", e.message);
}

#[tokio::test]
async fn updates_record_field_ownership() {
    let env = env_with_crd();
    let api = asvc_api(env.client(), "default");
    let pp = PostParams {
        field_manager: Some("creator".into()),
        ..Default::default()
    };
    let o = api.create(&pp, &asvc("rut", "webhook")).await.unwrap();
    let mf = o.metadata.managed_fields.clone().unwrap();
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0].manager.as_deref(), Some("creator"));
    assert_eq!(mf[0].operation.as_deref(), Some("Update"));
    let fields = serde_json::to_value(&mf[0].fields_v1).unwrap();
    assert_eq!(fields["f:spec"]["f:serviceName"], json!({}));

    // An applier changing a field another manager set conflicts unless it forces.
    let cfg = json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
        "metadata": {"name": "rut"}, "spec": {"serviceName": "mine"}});
    let e = api_err(
        api.patch("rut", &PatchParams::apply("applier"), &Patch::Apply(&cfg))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    assert!(e.message.contains("conflict with \"creator\""), "{}", e.message);

    // A write that changes nothing keeps managedFields and the resourceVersion.
    let again = api.replace("rut", &pp, &o).await.unwrap();
    assert_eq!(again.metadata.resource_version, o.metadata.resource_version);
    assert_eq!(again.metadata.managed_fields, o.metadata.managed_fields);
}

#[tokio::test]
async fn built_in_kind_rules() {
    let env = TestEnv::new();
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let empty: Pod =
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": []}})).unwrap();
    let e = api_err(pods.create(&PostParams::default(), &empty).await.unwrap_err());
    assert_eq!(e.message, "Pod \"p\" is invalid: spec.containers: Required value");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "img:1"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    // The image may change; most of the spec may not.
    let p = json!({"spec": {"containers": [{"name": "c", "image": "img:2"}]}});
    pods.patch("p", &PatchParams::default(), &Patch::Strategic(&p))
        .await
        .unwrap();
    let p = json!({"spec": {"restartPolicy": "Never"}});
    let e = api_err(
        pods.patch("p", &PatchParams::default(), &Patch::Merge(&p))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert!(
        e.message.starts_with(
            "Pod \"p\" is invalid: spec: Forbidden: pod updates may not change fields other than"
        ),
        "{}",
        e.message
    );

    let deps: Api<Deployment> = Api::namespaced(env.client(), "default");
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "a"}},
                 "template": {"metadata": {"labels": {"app": "b"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
    .unwrap();
    let e = api_err(deps.create(&PostParams::default(), &d).await.unwrap_err());
    assert_eq!(
        e.message,
        "Deployment.apps \"d\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"b\"}: `selector` does not match template `labels`"
    );
}

#[tokio::test]
async fn garbage_collector_runs_after_creates_too() {
    let env = TestEnv::builder().garbage_collection(true).build();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut orphan = cm("orphan");
    orphan.metadata.owner_references = Some(
        serde_json::from_value(json!([{"apiVersion": "v1", "kind": "ConfigMap",
            "name": "gone", "uid": "00000000-0000-0000-0000-000000000000"}]))
        .unwrap(),
    );
    api.create(&PostParams::default(), &orphan).await.unwrap();
    assert!(
        api.get_opt("orphan").await.unwrap().is_none(),
        "its owner does not exist"
    );
}

#[tokio::test]
async fn scale_subresource() {
    let env = env_with_crd();
    let deps: Api<Deployment> = Api::namespaced(env.client(), "default");
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
    .unwrap();
    deps.create(&PostParams::default(), &d).await.unwrap();
    let s = deps.get_scale("d").await.unwrap();
    assert_eq!(s.spec.unwrap().replicas, Some(1));
    assert_eq!(s.status.unwrap().selector.as_deref(), Some("app=d"));
    let p = json!({"spec": {"replicas": 4}});
    let s = deps
        .patch_scale("d", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
    assert_eq!(s.spec.unwrap().replicas, Some(4));
    let d = deps.get("d").await.unwrap();
    assert_eq!(d.spec.unwrap().replicas, Some(4));
    assert_eq!(d.metadata.generation, Some(2));

    // client-go's scale client sends the Scale as protobuf.
    use k8s_pb::api::autoscaling::v1 as pb_autoscaling;
    use k8s_pb::apimachinery::pkg::{apis::meta::v1 as pb_meta, runtime as pb_runtime};
    use prost::Message as _;
    let scale = pb_autoscaling::Scale {
        metadata: Some(pb_meta::ObjectMeta {
            name: Some("d".into()),
            namespace: Some("default".into()),
            ..Default::default()
        }),
        spec: Some(pb_autoscaling::ScaleSpec { replicas: Some(6) }),
        status: Some(pb_autoscaling::ScaleStatus::default()),
    };
    let unknown = pb_runtime::Unknown {
        type_meta: Some(pb_runtime::TypeMeta {
            api_version: Some("autoscaling/v1".into()),
            kind: Some("Scale".into()),
        }),
        raw: Some(scale.encode_to_vec()),
        ..Default::default()
    };
    let req = http::Request::builder()
        .method("PUT")
        .uri("/apis/apps/v1/namespaces/default/deployments/d/scale")
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .body(kube::client::Body::from(
            [b"k8s\x00".as_slice(), &unknown.encode_to_vec()].concat(),
        ))
        .unwrap();
    let res = env.client().send(req).await.unwrap();
    assert_eq!(res.status().as_u16(), 200);
    assert_eq!(deps.get("d").await.unwrap().spec.unwrap().replicas, Some(6));

    let api = asvc_api(env.client(), "default");
    api.create(&PostParams::default(), &asvc("rut", "w"))
        .await
        .unwrap();
    let p = json!({"spec": {"replicas": 3}});
    api.patch_scale("rut", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
    assert_eq!(api.get("rut").await.unwrap().data["spec"]["replicas"], json!(3));
    let p = json!({"spec": {"replicas": -1}});
    let e = api_err(
        api.patch_scale("rut", &PatchParams::default(), &Patch::Merge(&p))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    cms.create(&PostParams::default(), &cm("c")).await.unwrap();
    let e = api_err(cms.get_scale("c").await.unwrap_err());
    assert_eq!(e.code, 404, "ConfigMaps have no scale subresource");
}

#[tokio::test]
async fn apply_conflicts_are_per_field_inside_list_elements() {
    let env = TestEnv::new();
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let pp = PostParams {
        field_manager: Some("creator".into()),
        ..Default::default()
    };
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "labels": {"a": "1"}},
        "spec": {"containers": [{"name": "c", "image": "img:1"}]}}))
    .unwrap();
    pods.create(&pp, &pod).await.unwrap();
    // Another manager applies a label on the same object: no conflict with the creator's fields.
    let cfg = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"b": "2"}}});
    let o = pods
        .patch("p", &PatchParams::apply("labeler"), &Patch::Apply(&cfg))
        .await
        .unwrap();
    let labels = o.metadata.labels.unwrap();
    assert_eq!((labels["a"].as_str(), labels["b"].as_str()), ("1", "2"));
    // Changing the creator's image conflicts on that field.
    let cfg = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "img:2"}]}});
    let e = api_err(
        pods.patch("p", &PatchParams::apply("imager"), &Patch::Apply(&cfg))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    assert!(
        e.message.contains(".spec.containers[name=\"c\"].image"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn create_from_yaml_creates_every_document_in_order() {
    let env = TestEnv::new();
    let yaml = "# a comment-only document\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: one\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: one\ndata:\n  k: v\n";
    let created = env.create_from_yaml("inline.yaml", yaml).unwrap();
    assert_eq!(created.len(), 2);
    assert!(
        env.get_object("", "v1", "configmaps", Some("one"), "cm")
            .is_some()
    );
    let err = env
        .create_from_yaml("bad.yaml", "apiVersion: v1\nkind: Nope\nmetadata: {name: x}\n")
        .unwrap_err();
    assert!(err.to_string().contains("bad.yaml, document 1"), "{err}");
}

/// A request body that yields `chunk`-byte frames until `total` bytes, counting what
/// the server pulled.
struct CountingBody {
    pulled: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    total: usize,
    chunk: usize,
}

impl http_body::Body for CountingBody {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        use std::sync::atomic::Ordering;
        let sent = self.pulled.load(Ordering::SeqCst);
        if sent >= self.total {
            return std::task::Poll::Ready(None);
        }
        let n = self.chunk.min(self.total - sent);
        self.pulled.fetch_add(n, Ordering::SeqCst);
        std::task::Poll::Ready(Some(Ok(http_body::Frame::data(bytes::Bytes::from(vec![
            b' ';
            n
        ])))))
    }
}

#[tokio::test]
async fn request_bodies_and_stored_objects_have_size_limits() {
    const LIMIT: usize = 3 * 1024 * 1024;
    let env = TestEnv::new();

    // A 50 MB body is refused once it passes 3 MiB, without being read to the end.
    let pulled = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let req = http::Request::post("/api/v1/namespaces/default/configmaps")
        .header("content-type", "application/json")
        .body(CountingBody {
            pulled: pulled.clone(),
            total: 50 * 1024 * 1024,
            chunk: 64 * 1024,
        })
        .unwrap();
    let mut svc = env.service();
    let res = tower_service::Service::call(&mut svc, req).await.unwrap();
    assert_eq!(res.status().as_u16(), 413);
    let bytes = http_body_util::BodyExt::collect(res.into_body())
        .await
        .unwrap()
        .to_bytes();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        body,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Request entity too large: limit is 3145728",
            "reason": "RequestEntityTooLarge", "code": 413,
        })
    );
    let read = pulled.load(std::sync::atomic::Ordering::SeqCst);
    assert!(read <= LIMIT + 64 * 1024, "read {read} bytes of a refused body");

    // Exactly the limit is still read; one byte more is not.
    let client = env.client();
    let padded = |len: usize| {
        let head = r#"{"metadata":{"name":"big"}}"#;
        format!("{head}{}", " ".repeat(len - head.len()))
    };
    let (code, body) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps?dryRun=All",
        "application/json",
        &padded(LIMIT),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = raw(
        &client,
        "PUT",
        "/api/v1/namespaces/default/configmaps/big",
        "application/json",
        &padded(LIMIT + 1),
    )
    .await;
    assert_eq!(
        (code, body["reason"].clone()),
        (413, json!("RequestEntityTooLarge"))
    );

    // An object etcd would refuse (over 1.5 MiB) is a 500 with etcd's message, unless
    // the write is a dry run (which never reaches etcd).
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut big = cm("big");
    big.data = Some([("k".to_owned(), "x".repeat(1600 * 1024))].into());
    let e = api_err(api.create(&PostParams::default(), &big).await.unwrap_err());
    assert_eq!(
        (e.code, e.reason.as_str(), e.message.as_str()),
        (500, "", "etcdserver: request is too large")
    );
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    api.create(&dry, &big).await.unwrap();
    assert!(
        env.get_object("", "v1", "configmaps", Some("default"), "big")
            .is_none()
    );

    // Growing a stored object past the limit fails the same way and leaves it as it was.
    let mut small = cm("grow");
    small.data = Some([("k".to_owned(), "x".repeat(1024 * 1024))].into());
    let created = api.create(&PostParams::default(), &small).await.unwrap();
    let mut grown = created.clone();
    grown.data = Some([("k".to_owned(), "x".repeat(1600 * 1024))].into());
    let e = api_err(
        api.replace("grow", &PostParams::default(), &grown)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (500, "etcdserver: request is too large")
    );
    assert_eq!(api.get("grow").await.unwrap(), created);
}

#[tokio::test]
async fn bodies_must_name_the_endpoints_type() {
    let env = env_with_crd();
    let client = env.client();
    let url = "/apis/samples.knative.dev/v1alpha1/namespaces/default/addressableservices";

    // A custom resource without kind cannot be decoded at all.
    let body =
        r#"{"apiVersion":"samples.knative.dev/v1alpha1","metadata":{"name":"x"},"spec":{"serviceName":"s"}}"#;
    let (code, status) = raw(&client, "POST", url, "application/json", body).await;
    assert_eq!(code, 400);
    assert_eq!(status["reason"], json!("BadRequest"));
    assert_eq!(
        status["message"],
        json!(format!(
            "the object provided is unrecognized (must be of type AddressableService): Object 'Kind' is missing in '{body}' ({} ...)",
            &body[..30]
        ))
    );
    let (code, status) = raw(
        &client,
        "POST",
        &format!("{url}?fieldValidation=Ignore"),
        "application/json",
        body,
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        status["message"],
        json!(format!(
            "AddressableService in version \"v1alpha1\" cannot be handled as a AddressableService: Object 'Kind' is missing in '{body}'"
        ))
    );

    // Without apiVersion it fails the handler's version check.
    let body = r#"{"kind":"AddressableService","metadata":{"name":"x"},"spec":{"serviceName":"s"}}"#;
    let (code, status) = raw(&client, "POST", url, "application/json", body).await;
    assert_eq!(code, 400);
    assert_eq!(
        status["message"],
        json!(
            "the API version in the data () does not match the expected API version (samples.knative.dev/v1alpha1)"
        )
    );

    // Another kind is refused by the custom resource validator, on field `kind`.
    let body = r#"{"apiVersion":"samples.knative.dev/v1alpha1","kind":"Other","metadata":{"name":"x"},"spec":{"serviceName":"s"}}"#;
    let (code, status) = raw(&client, "POST", url, "application/json", body).await;
    assert_eq!(code, 422);
    assert_eq!(
        status,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Other.samples.knative.dev \"x\" is invalid: kind: Invalid value: \"Other\": must be AddressableService",
            "reason": "Invalid",
            "details": {"name": "x", "group": "samples.knative.dev", "kind": "Other", "causes": [
                {"reason": "FieldValueInvalid", "message": "Invalid value: \"Other\": must be AddressableService", "field": "kind"}
            ]},
            "code": 422,
        })
    );
    assert!(
        env.list_objects("samples.knative.dev", "v1alpha1", "addressableservices", None)
            .is_empty()
    );

    // The same on update.
    let api = asvc_api(client.clone(), "default");
    let created = api.create(&PostParams::default(), &asvc("y", "s")).await.unwrap();
    let mut other = serde_json::to_value(&created).unwrap();
    other["kind"] = json!("Other");
    let (code, status) = raw(
        &client,
        "PUT",
        &format!("{url}/y"),
        "application/json",
        &other.to_string(),
    )
    .await;
    assert_eq!(
        (code, status["details"]["causes"][0]["field"].clone()),
        (422, json!("kind"))
    );

    // Built-in bodies take a missing kind from the endpoint, and another kind fails to
    // convert.
    let (code, _) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        r#"{"metadata":{"name":"a"}}"#,
    )
    .await;
    assert_eq!(code, 201);
    let (code, status) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        r#"{"kind":"Secret","metadata":{"name":"b"}}"#,
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        status["message"],
        json!(
            "Secret in version \"v1\" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): unknown conversion"
        )
    );
}

#[tokio::test]
async fn continue_tokens_are_checked_as_kube_apiserver_checks_them() {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    let env = TestEnv::new();
    let client = env.client();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..3 {
        api.create(&PostParams::default(), &cm(&format!("c{i}")))
            .await
            .unwrap();
    }
    let list = |token: String| {
        let client = client.clone();
        async move {
            raw(
                &client,
                "GET",
                &format!("/api/v1/namespaces/default/configmaps?limit=1&continue={token}"),
                "",
                "",
            )
            .await
        }
    };
    // A token of a namespaced list starts below the namespace, at the last key it read.
    let page1 = api.list(&ListParams::default().limit(1)).await.unwrap();
    let token = page1.metadata.continue_.unwrap();
    let rv = page1.metadata.resource_version.unwrap();
    let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(&token)
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&decoded).unwrap(),
        json!({"v": "meta.k8s.io/v1", "rv": rv.parse::<i64>().unwrap(), "start": "c0\u{0}"})
    );

    let cases = [
        ("!!!!".to_owned(), "illegal base64 data at input byte 0"),
        ("eyJ2Ijo=".to_owned(), "illegal base64 data at input byte 7"),
        (
            "eyJ2IjoxfQA".to_owned(),
            "invalid character '\\x00' after top-level value",
        ),
        (b64("{\"v\":"), "unexpected end of JSON input"),
        (
            b64("nope"),
            "invalid character 'o' in literal null (expecting 'u')",
        ),
        (
            b64("[1]"),
            "json: cannot unmarshal array into Go value of type storage.continueToken",
        ),
        (
            b64(r#"{"v":"meta.k8s.io/v1","rv":"5","start":"a"}"#),
            "json: cannot unmarshal string into Go struct field continueToken.rv of type int64",
        ),
        (
            b64(r#"{"v":"meta.k8s.io/v2","rv":5,"start":"a"}"#),
            "server does not recognize this encoded version meta.k8s.io/v2",
        ),
        (
            b64(r#"{"v":"meta.k8s.io/v1","start":"a"}"#),
            "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ),
        (
            b64(r#"{"v":"meta.k8s.io/v1","rv":5}"#),
            "encoded start key empty (version meta.k8s.io/v1)",
        ),
        (
            b64(r#"{"v":"meta.k8s.io/v1","rv":5,"start":"../kube-system/x"}"#),
            "../kube-system/x",
        ),
    ];
    for (token, why) in cases {
        let (code, status) = list(token.clone()).await;
        assert_eq!(code, 400, "{token}: {status}");
        assert_eq!(status["reason"], json!("BadRequest"));
        let expected = if why.starts_with("continue key") {
            why.to_owned()
        } else {
            format!("invalid continue token: continue key is not valid: {why}")
        };
        assert_eq!(status["message"], json!(expected), "{token}");
    }

    // A revision the server has not reached is etcd's untyped 500.
    let future = b64(r#"{"v":"meta.k8s.io/v1","rv":999999,"start":"c0\u0000"}"#);
    let (code, status) = list(future).await;
    assert_eq!(
        (code, status["message"].clone(), status.get("reason")),
        (
            500,
            json!("etcdserver: mvcc: required revision is a future revision"),
            None
        )
    );
    // resourceVersionMatch cannot go with continue.
    let (code, _) = raw(
        &client,
        "GET",
        &format!("/api/v1/namespaces/default/configmaps?continue={token}&resourceVersion=1&resourceVersionMatch=Exact"),
        "",
        "",
    )
    .await;
    assert_eq!(code, 422);

    // Once compacted away, the token gets 410 with a token to go on at the latest revision.
    api.create(&PostParams::default(), &cm("c3")).await.unwrap();
    env.compact();
    let (code, status) = list(token).await;
    assert_eq!((code, status["reason"].clone()), (410, json!("Expired")));
    let again = status["metadata"]["continue"].as_str().unwrap().to_owned();
    let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(&again)
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&decoded).unwrap(),
        json!({"v": "meta.k8s.io/v1", "rv": -1, "start": "c0\u{0}"})
    );
    let (code, page) = list(again).await;
    assert_eq!(code, 200);
    assert_eq!(page["items"][0]["metadata"]["name"], json!("c1"));
}

#[tokio::test]
async fn lists_across_namespaces_are_in_etcd_key_order() {
    let env = TestEnv::builder().namespace("a").namespace("a-b").build();
    for ns in ["a", "a-b"] {
        let api: Api<ConfigMap> = Api::namespaced(env.client(), ns);
        api.create(&PostParams::default(), &cm("x")).await.unwrap();
    }
    let all: Api<ConfigMap> = Api::all(env.client());
    let first = all.list(&ListParams::default().limit(1)).await.unwrap();
    // "a-b/x" < "a/x" byte-wise, as etcd orders its keys.
    assert_eq!(first.items[0].metadata.namespace.as_deref(), Some("a-b"));
    let rest = all
        .list(&ListParams::default().continue_token(first.metadata.continue_.as_deref().unwrap()))
        .await
        .unwrap();
    assert_eq!(rest.items[0].metadata.namespace.as_deref(), Some("a"));
}

#[tokio::test]
async fn crd_schemas_are_validated_as_kube_apiserver_does() {
    let env = TestEnv::new();
    let client = env.client();
    let create = |crd: Value| {
        let client = client.clone();
        async move {
            raw(
                &client,
                "POST",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                "application/json",
                &crd.to_string(),
            )
            .await
        }
    };
    let causes = |status: &Value| -> Vec<(String, String, String)> {
        status["details"]["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["reason"].as_str().unwrap_or_default().to_owned(),
                    c["field"].as_str().unwrap_or_default().to_owned(),
                    c["message"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    let cause =
        |reason: &str, field: &str, message: &str| (reason.to_owned(), field.to_owned(), message.to_owned());
    let root = "spec.versions[0].schema.openAPIV3Schema";

    // Properties without type, a pattern that does not compile, bad defaults.
    let mut crd = common::crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {
                "untyped": {"description": "no type"},
                "free": {"x-kubernetes-preserve-unknown-fields": true},
                "port": {"x-kubernetes-int-or-string": true},
                "list": {"type": "array", "items": {}},
                "name": {"type": "string", "pattern": "(a"},
                "replicas": {"type": "integer", "default": "one"},
                "size": {"type": "integer", "minimum": 1, "default": 0},
                "opts": {"type": "object", "properties": {"a": {"type": "string"}},
                         "default": {"a": "x", "b": "y"}}
            }}
        }
    });
    let (code, status) = create(crd).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], json!("Invalid"));
    let got = causes(&status);
    let expected = [
        cause(
            "FieldValueRequired",
            &format!("{root}.properties[spec].properties[list].items.type"),
            "Required value: must not be empty for specified array items",
        ),
        cause(
            "FieldValueInvalid",
            &format!("{root}.properties[spec].properties[name].pattern"),
            "Invalid value: \"(a\": must be a valid regular expression, but isn't: error parsing regexp: missing closing ): `(a`",
        ),
        cause(
            "FieldValueInvalid",
            &format!("{root}.properties[spec].properties[opts].default"),
            "Invalid value: map[string]interface {}{\"a\":\"x\", \"b\":\"y\"}: must not have unknown fields",
        ),
        cause(
            "FieldValueTypeInvalid",
            &format!("{root}.properties[spec].properties[replicas].default"),
            "Invalid value: \"string\":  in body must be of type integer: \"string\"",
        ),
        cause(
            "FieldValueInvalid",
            &format!("{root}.properties[spec].properties[size].default"),
            "Invalid value: 0:  in body should be greater than or equal to 1",
        ),
        cause(
            "FieldValueRequired",
            &format!("{root}.properties[spec].properties[untyped].type"),
            "Required value: must not be empty for specified object fields",
        ),
    ];
    for e in &expected {
        assert!(got.contains(e), "missing {e:?} in {got:#?}");
    }
    assert_eq!(got.len(), expected.len(), "{got:#?}");

    // Version names are DNS-1035 labels, unique; the root must be an object.
    let mut crd = common::crd();
    let v = crd["spec"]["versions"][0].clone();
    let mut second = v.clone();
    second["storage"] = json!(false);
    crd["spec"]["versions"] = json!([v, second]);
    crd["spec"]["versions"][0]["name"] = json!("V1");
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["type"] = json!("string");
    let (code, status) = create(crd).await;
    assert_eq!(code, 422, "{status}");
    let got = causes(&status);
    assert!(
        got.contains(&cause(
            "FieldValueInvalid",
            "spec.versions[0].name",
            "Invalid value: \"V1\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        )),
        "{got:#?}"
    );
    assert!(
        got.contains(&cause(
            "FieldValueInvalid",
            &format!("{root}.type"),
            "Invalid value: \"string\": must be object at the root",
        )),
        "{got:#?}"
    );
    assert!(
        env.list_objects("apiextensions.k8s.io", "v1", "customresourcedefinitions", None)
            .is_empty()
    );

    // The fixture CRD, with int-or-string and preserved fields, is fine.
    let (code, status) = create(common::crd()).await;
    assert_eq!(code, 201, "{status}");
}

#[tokio::test]
async fn immutable_config_and_allocated_cluster_ips() {
    use k8s_openapi::api::core::v1::{Secret, Service};
    let env = TestEnv::new();
    let client = env.client();
    let causes = |e: &kube::core::Status| -> Vec<(String, String, String)> {
        e.details
            .as_ref()
            .unwrap()
            .causes
            .iter()
            .map(|c| (c.reason.clone(), c.field.clone(), c.message.clone()))
            .collect()
    };
    let forbidden = |field: &str| {
        (
            "FieldValueForbidden".to_owned(),
            field.to_owned(),
            "Forbidden: field is immutable when `immutable` is set".to_owned(),
        )
    };

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut frozen = cm("frozen");
    frozen.immutable = Some(true);
    let created = cms.create(&PostParams::default(), &frozen).await.unwrap();
    let mut changed = created.clone();
    changed.data = Some([("k".to_owned(), "w".to_owned())].into());
    changed.immutable = None;
    let e = api_err(
        cms.replace("frozen", &PostParams::default(), &changed)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(causes(&e), [forbidden("immutable"), forbidden("data")]);
    // Metadata may still change.
    let mut labelled = created.clone();
    labelled.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
    cms.replace("frozen", &PostParams::default(), &labelled)
        .await
        .unwrap();

    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "s"}, "immutable": true, "data": {"k": "dg=="}
    }))
    .unwrap();
    let created = secrets.create(&PostParams::default(), &secret).await.unwrap();
    let mut changed = created.clone();
    changed.data = None;
    changed.type_ = Some("kubernetes.io/tls".into());
    let e = api_err(
        secrets
            .replace("s", &PostParams::default(), &changed)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        causes(&e),
        [
            (
                "FieldValueInvalid".to_owned(),
                "type".to_owned(),
                "Invalid value: \"kubernetes.io/tls\": field is immutable".to_owned()
            ),
            forbidden("data"),
        ]
    );

    // A Service's cluster IP stays once allocated; leaving it out keeps it.
    let svcs: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}
    }))
    .unwrap();
    let created = svcs.create(&PostParams::default(), &svc).await.unwrap();
    let ip = created.spec.as_ref().unwrap().cluster_ip.clone().unwrap();
    let mut moved = created.clone();
    moved.spec.as_mut().unwrap().cluster_ip = Some("10.0.0.99".into());
    let e = api_err(
        svcs.replace("web", &PostParams::default(), &moved)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        e.message,
        "Service \"web\" is invalid: spec.clusterIPs[0]: Invalid value: []string{\"10.0.0.99\"}: may not change once set"
    );
    let mut omitted = created.clone();
    let spec = omitted.spec.as_mut().unwrap();
    spec.cluster_ip = None;
    spec.cluster_ips = None;
    spec.ports.as_mut().unwrap()[0].port = 8080;
    let updated = svcs
        .replace("web", &PostParams::default(), &omitted)
        .await
        .unwrap();
    assert_eq!(
        updated.spec.as_ref().unwrap().cluster_ip.as_deref(),
        Some(ip.as_str())
    );
    assert_eq!(updated.spec.unwrap().cluster_ips, Some(vec![ip]));
}

#[tokio::test]
async fn unknown_paths_answer_as_kube_apiserver_routes_them() {
    let env = env_with_crd();
    let client = env.client();
    let get = |path: &'static str| {
        let client = client.clone();
        async move {
            let req = http::Request::get(path)
                .body(kube::client::Body::empty())
                .unwrap();
            let res = client.send(req).await.unwrap();
            let code = res.status().as_u16();
            let ct = res
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default();
            let bytes = http_body_util::BodyExt::collect(res.into_body())
                .await
                .unwrap()
                .to_bytes();
            (code, ct, String::from_utf8(bytes.to_vec()).unwrap())
        }
    };
    let plain = (
        404,
        "text/plain; charset=utf-8".to_owned(),
        "404 page not found\n".to_owned(),
    );
    // Groups and versions nobody serves, and whatever the custom resource handler
    // passes on (unknown resources of a CRD's group, scope mismatches): Go's 404.
    for path in [
        "/apis/nope.dev",
        "/apis/nope.dev/v1/things",
        "/apis/apps/v2/deployments",
        "/apis/samples.knative.dev/v1alpha1/unknowns",
        "/apis/samples.knative.dev/v1alpha1/addressableservices/x",
    ] {
        assert_eq!(get(path).await, plain, "{path}");
    }
    // Inside a built-in group version's web service, go-restful's Status.
    let no_route = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "the server could not find the requested resource",
        "reason": "NotFound", "details": {}, "code": 404,
    });
    for path in [
        "/api/v1/things",
        "/api/v2/pods",
        "/apis/apps/v1/things",
        "/api/v1/namespaces/default/configmaps/x/status",
    ] {
        let (code, _, body) = get(path).await;
        assert_eq!(code, 404, "{path}");
        assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), no_route, "{path}");
    }
    // A subresource a CRD does not declare: the custom resource handler's NotFound.
    let (code, _, body) =
        get("/apis/samples.knative.dev/v1alpha1/namespaces/default/addressableservices/x/logs").await;
    assert_eq!(code, 404);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body["message"],
        json!("addressableservices.samples.knative.dev \"x\" not found")
    );
}

#[tokio::test]
async fn failing_json_patch_answers_the_generic_422_without_causes() {
    let env = TestEnv::new();
    let client = env.client();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &cm("jp")).await.unwrap();
    let uri = "/api/v1/namespaces/default/configmaps/jp";
    for patch in [
        r#"[{"op": "test", "path": "/data/k", "value": "other"}]"#,
        r#"[{"op": "remove", "path": "/data/missing"}]"#,
        r#"[{"op": "replace", "path": "/spec/nothing", "value": 1}]"#,
        // Operations evanphx/json-patch cannot make sense of fail when applied.
        r#"[{"op": "frobnicate", "path": "/data"}]"#,
        r#"[{"op": "add", "value": 1}]"#,
        r#"[null]"#,
    ] {
        let (code, body) = raw(&client, "PATCH", uri, "application/json-patch+json", patch).await;
        assert_eq!(code, 422, "{patch}");
        assert_eq!(
            body,
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "the server rejected our request due to an error in our request",
                "reason": "Invalid", "details": {}, "code": 422
            }),
            "{patch}"
        );
    }
    // A document that does not decode as operations is a 400: from kube-apiserver's own
    // typed decode, unless fieldValidation=Ignore skips it and the library's remains.
    for (query, body, message) in [
        (
            "",
            r#"{"op": "add"}"#,
            "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp",
        ),
        (
            "",
            "[1]",
            "error decoding patch: json: cannot unmarshal number into Go value of type handlers.jsonPatchOp",
        ),
        (
            "",
            r#"[{"op": 1}]"#,
            "error decoding patch: json: cannot unmarshal number into Go struct field jsonPatchOp.op of type string",
        ),
        (
            "?fieldValidation=Ignore",
            r#"{"op": "add"}"#,
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        ),
        (
            "?fieldValidation=Ignore",
            "[1]",
            "json: cannot unmarshal number into Go value of type jsonpatch.Operation",
        ),
    ] {
        let (code, st) = raw(
            &client,
            "PATCH",
            &format!("{uri}{query}"),
            "application/json-patch+json",
            body,
        )
        .await;
        assert_eq!(
            (code, st["message"].as_str()),
            (400, Some(message)),
            "{query} {body}"
        );
    }
    let many = serde_json::to_string(&vec![
        json!({"op": "test", "path": "/data/k", "value": "v"});
        10_001
    ])
    .unwrap();
    let (code, body) = raw(&client, "PATCH", uri, "application/json-patch+json", &many).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (413, Some("RequestEntityTooLarge"))
    );
    assert_eq!(
        body["message"],
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
    );
}

#[tokio::test(start_paused = true)]
async fn serve_drops_a_connection_that_never_finishes_its_headers() {
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let env = TestEnv::new();
    let server = env.serve().await.unwrap();

    // A complete request is answered.
    let mut ok = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    ok.write_all(b"GET /version HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    ok.read_to_end(&mut answer).await.unwrap();
    assert!(
        answer.starts_with(b"HTTP/1.1 200 OK"),
        "{}",
        String::from_utf8_lossy(&answer)
    );

    // A head that never ends: closed without an answer after the 32 s header timeout
    // (paused time, so the wait is virtual; the bound only stops a hang).
    let mut slow = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    slow.write_all(b"GET /version HTTP/1.1\r\nHost: t\r\n")
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(3600), slow.read_to_end(&mut rest)).await;
    assert!(matches!(read, Ok(Ok(0))), "{read:?}");
    assert!(rest.is_empty());
    assert!(
        started.elapsed() <= Duration::from_secs(33),
        "{:?}",
        started.elapsed()
    );
    server.shutdown().await;
}

#[tokio::test]
async fn status_details_name_the_resource_or_the_kind_as_kube_apiserver_does() {
    let env = env_with_crd();
    let client = env.client();
    let base = "/apis/samples.knative.dev/v1alpha1/namespaces/default/addressableservices";
    let body = json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
        "metadata": {"name": "d"}, "spec": {"serviceName": "s"}})
    .to_string();
    let (code, _) = raw(&client, "POST", base, "application/json", &body).await;
    assert_eq!(code, 201);

    // Storage errors name the resource (plural) and its group.
    let (code, st) = raw(&client, "GET", &format!("{base}/nope"), "application/json", "").await;
    assert_eq!(code, 404);
    assert_eq!(
        st["details"],
        json!({"name": "nope", "group": "samples.knative.dev", "kind": "addressableservices"})
    );
    let (code, st) = raw(&client, "POST", base, "application/json", &body).await;
    assert_eq!(code, 409);
    assert_eq!(
        st["details"],
        json!({"name": "d", "group": "samples.knative.dev", "kind": "addressableservices"})
    );
    let stale = json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
        "metadata": {"name": "d", "resourceVersion": "1"}, "spec": {"serviceName": "s"}})
    .to_string();
    let (code, st) = raw(&client, "PUT", &format!("{base}/d"), "application/json", &stale).await;
    assert_eq!((code, st["reason"].as_str()), (409, Some("Conflict")));
    assert_eq!(
        st["details"],
        json!({"name": "d", "group": "samples.knative.dev", "kind": "addressableservices"})
    );

    // Validation errors name the kind.
    let bad = json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
        "metadata": {"name": "e"}, "spec": {}})
    .to_string();
    let (code, st) = raw(&client, "POST", base, "application/json", &bad).await;
    assert_eq!(code, 422);
    assert_eq!(st["details"]["kind"], "AddressableService");
    assert_eq!(st["details"]["group"], "samples.knative.dev");
    let cms = "/api/v1/namespaces/default/configmaps";
    let (code, st) = raw(
        &client,
        "POST",
        cms,
        "application/json",
        r#"{"metadata": {"name": "Not_Valid"}}"#,
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(st["details"]["kind"], "ConfigMap");
    assert!(st["details"].get("group").is_none());

    // An apply conflict (NewApplyConflict) names nothing: its details are the causes.
    let apply = |manager: &'static str, service: &'static str| {
        let client = client.clone();
        async move {
            let body = json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
                "metadata": {"name": "ap"}, "spec": {"serviceName": service}})
            .to_string();
            raw(&client, "PATCH",
                &format!("/apis/samples.knative.dev/v1alpha1/namespaces/default/addressableservices/ap?fieldManager={manager}"),
                "application/apply-patch+yaml", &body).await
        }
    };
    assert_eq!(apply("one", "a").await.0, 201);
    let (code, st) = apply("two", "b").await;
    assert_eq!(code, 409);
    assert_eq!(
        st["details"],
        json!({"causes": [{"reason": "FieldManagerConflict",
            "message": "conflict with \"one\"", "field": ".spec.serviceName"}]})
    );
}

#[tokio::test]
async fn deleting_a_crd_answers_the_terminating_crd_and_cleans_up_its_instances() {
    use futures::StreamExt;
    let env = env_with_crd();
    let client = env.client();
    let api = asvc_api(client.clone(), "default");
    api.create(&PostParams::default(), &asvc("free", "s"))
        .await
        .unwrap();
    let mut held = asvc("held", "s");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let name = "addressableservices.samples.knative.dev";
    let req = http::Request::get(format!(
        "{crds}?watch=true&resourceVersion={}&fieldSelector=metadata.name%3D{name}",
        env.resource_version()
    ))
    .body(Vec::new())
    .unwrap();
    let mut events = Box::pin(client.request_events::<Value>(req).await.unwrap());
    let instances = http::Request::get(format!(
        "/apis/samples.knative.dev/v1alpha1/namespaces/default/addressableservices?watch=true&resourceVersion={}",
        env.resource_version()
    ))
    .body(Vec::new())
    .unwrap();
    let mut instance_events = Box::pin(client.request_events::<Value>(instances).await.unwrap());

    let (code, body) = raw(
        &client,
        "DELETE",
        &format!("{crds}/{name}"),
        "application/json",
        "",
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(body["kind"], "CustomResourceDefinition");
    assert!(body["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        body["metadata"]["finalizers"],
        json!(["customresourcecleanup.apiextensions.k8s.io"])
    );
    let terminating = body["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Terminating")
        .unwrap();
    assert_eq!(
        (
            &terminating["status"],
            &terminating["reason"],
            &terminating["message"]
        ),
        (
            &json!("True"),
            &json!("InstanceDeletionPending"),
            &json!("CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon")
        )
    );

    // The instance without finalizers is gone; the held one waits, and so does the CRD,
    // which refuses new instances meanwhile.
    assert!(api.get_opt("free").await.unwrap().is_none());
    let h = api.get("held").await.unwrap();
    assert!(h.metadata.deletion_timestamp.is_some());
    let e = api_err(
        api.create(&PostParams::default(), &asvc("new", "s"))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 405);
    assert_eq!(
        e.message,
        "create not allowed while custom resource definition is terminating"
    );
    let (code, _) = raw(&client, "GET", &format!("{crds}/{name}"), "application/json", "").await;
    assert_eq!(code, 200);

    // Releasing the last instance lets the cleanup finish: the CRD goes, and its
    // resource is no longer served.
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let (code, _) = raw(&client, "GET", &format!("{crds}/{name}"), "application/json", "").await;
    assert_eq!(code, 404);
    let (code, _) = raw(
        &client,
        "GET",
        "/apis/samples.knative.dev/v1alpha1/namespaces/default/addressableservices",
        "application/json",
        "",
    )
    .await;
    assert_eq!(code, 404);

    let mut seen = Vec::new();
    for _ in 0..3 {
        let ev = tokio::time::timeout(std::time::Duration::from_secs(10), events.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let v = serde_json::to_value(&ev).unwrap();
        let reason = v["object"]["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Terminating"))
            .map(|c| c["reason"].clone());
        seen.push((v["type"].as_str().unwrap().to_owned(), reason));
    }
    assert_eq!(
        seen,
        [
            ("MODIFIED".to_owned(), Some(json!("InstanceDeletionPending"))),
            ("MODIFIED".to_owned(), Some(json!("InstanceDeletionInProgress"))),
            ("DELETED".to_owned(), Some(json!("InstanceDeletionInProgress"))),
        ]
    );
    // Watches on the instances saw them go, then ended with the resource.
    let mut kinds = Vec::new();
    while let Some(ev) = tokio::time::timeout(std::time::Duration::from_secs(10), instance_events.next())
        .await
        .unwrap()
    {
        let v = serde_json::to_value(ev.unwrap()).unwrap();
        kinds.push((
            v["type"].as_str().unwrap().to_owned(),
            v["object"]["metadata"]["name"].as_str().unwrap().to_owned(),
        ));
    }
    let k = |t: &str, n: &str| (t.to_owned(), n.to_owned());
    assert_eq!(
        kinds,
        [k("DELETED", "free"), k("MODIFIED", "held"), k("DELETED", "held")]
    );
}

#[tokio::test]
async fn service_port_errors_are_all_reported_in_kube_apiserver_order() {
    let env = TestEnv::new();
    let client = env.client();
    let body = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ports"},
    "spec": {"ports": [
        {"port": 0, "protocol": "FOO"},
        {"port": 70000, "protocol": ""},
        {"name": "c", "port": 80, "targetPort": "Not--ok-"}
    ]}})
    .to_string();
    let (code, st) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/services",
        "application/json",
        &body,
    )
    .await;
    assert_eq!(code, 422);
    let range = "must be between 1 and 65535, inclusive";
    let causes: Vec<(String, String, String)> = st["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["reason"].as_str().unwrap().to_owned(),
                c["field"].as_str().unwrap().to_owned(),
                c["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let want = |r: &str, f: &str, m: &str| (r.to_owned(), f.to_owned(), m.to_owned());
    assert_eq!(
        causes,
        [
            want("FieldValueRequired", "spec.ports[0].name", "Required value"),
            want(
                "FieldValueInvalid",
                "spec.ports[0].port",
                &format!("Invalid value: 0: {range}")
            ),
            want(
                "FieldValueNotSupported",
                "spec.ports[0].protocol",
                "Unsupported value: \"FOO\": supported values: \"SCTP\", \"TCP\", \"UDP\""
            ),
            // An unset targetPort defaults to the port, so it is out of range as well.
            want(
                "FieldValueInvalid",
                "spec.ports[0].targetPort",
                &format!("Invalid value: 0: {range}")
            ),
            want("FieldValueRequired", "spec.ports[1].name", "Required value"),
            want(
                "FieldValueInvalid",
                "spec.ports[1].port",
                &format!("Invalid value: 70000: {range}")
            ),
            want(
                "FieldValueInvalid",
                "spec.ports[1].targetPort",
                &format!("Invalid value: 70000: {range}")
            ),
            want(
                "FieldValueInvalid",
                "spec.ports[2].targetPort",
                "Invalid value: \"Not--ok-\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"
            ),
            want(
                "FieldValueInvalid",
                "spec.ports[2].targetPort",
                "Invalid value: \"Not--ok-\": must not contain consecutive hyphens"
            ),
            want(
                "FieldValueInvalid",
                "spec.ports[2].targetPort",
                "Invalid value: \"Not--ok-\": must not begin or end with a hyphen"
            ),
        ]
    );
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .starts_with("Service \"ports\" is invalid: [spec.ports[0].name: Required value, spec.ports[0].port: Invalid value: 0: "),
        "{st}"
    );
}

#[tokio::test]
async fn lease_micro_times_parse_and_serialise_as_kube_apiserver_does() {
    let env = TestEnv::new();
    let client = env.client();
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let lease = |name: &str, renew: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": "a", "renewTime": renew}})
        .to_string()
    };

    // Exactly six digits parse; the offset is normalised to UTC.
    let (code, body) = raw(
        &client,
        "POST",
        leases,
        "application/json",
        &lease("l", "2024-01-01T01:00:00.000001+02:00"),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["spec"]["renewTime"], "2023-12-31T23:00:00.000001Z");

    // Other precisions do not parse: 400 on create.
    let (code, body) = raw(
        &client,
        "POST",
        leases,
        "application/json",
        &lease("m", "2024-01-01T00:00:00.123Z"),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        body["message"],
        r#"Lease in version "v1" cannot be handled as a Lease: parsing time "2024-01-01T00:00:00.123Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse ".123Z" as ".000000""#
    );

    // A merge patch: 422 about `patch`, quoting the patched object.
    let uri = format!("{leases}/l");
    let patch = r#"{"spec": {"renewTime": "2024-01-01T00:00:00.123456789Z"}}"#;
    let (code, body) = raw(&client, "PATCH", &uri, "application/merge-patch+json", patch).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(body["reason"], "Invalid");
    let why = r#"parsing time "2024-01-01T00:00:00.123456789Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "789Z" as "Z07:00""#;
    let msg = body["message"].as_str().unwrap();
    assert!(
        msg.starts_with(r#" "" is invalid: patch: Invalid value: "{\"apiVersion\":"#),
        "{msg}"
    );
    assert!(msg.ends_with(&format!("\": {why}")), "{msg}");
    let causes = body["details"]["causes"].as_array().unwrap();
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0]["field"], "patch");
    assert!(body["details"].get("kind").is_none() && body["details"].get("name").is_none());

    // A strategic merge patch quotes the patch as Go prints a map.
    let (code, body) = raw(
        &client,
        "PATCH",
        &uri,
        "application/strategic-merge-patch+json",
        r#"{"spec": {"renewTime": "soon", "leaseDurationSeconds": 15}}"#,
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        r#" "" is invalid: patch: Invalid value: "map[spec:map[leaseDurationSeconds:15 renewTime:soon]]": parsing time "soon" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "soon" as "2006""#
    );

    // Nothing was stored by the failed writes; a valid patch is normalised too.
    let (code, body) = raw(
        &client,
        "PATCH",
        &uri,
        "application/merge-patch+json",
        r#"{"spec": {"acquireTime": "2024-06-01T12:00:00.500000-01:30"}}"#,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["spec"]["acquireTime"], "2024-06-01T13:30:00.500000Z");
    assert_eq!(body["spec"]["renewTime"], "2023-12-31T23:00:00.000001Z");
}

/// CRD validation ratcheting (GA in Kubernetes 1.33): once a schema tightens,
/// objects stored before keep working as long as an update leaves their
/// now-invalid values as they are; a status write in particular goes through.
/// A change to the invalid value, or a new invalid value, is refused.
#[tokio::test]
async fn a_tightened_schema_ratchets_values_an_update_leaves_alone() {
    let env = env_with_crd();
    let api = asvc_api(env.client(), "default");
    let mut stored = asvc("old", "webhook");
    stored.data["spec"]["mode"] = json!("a");
    let stored = api.create(&PostParams::default(), &stored).await.unwrap();

    // The schema now allows only "b" and "c".
    let mut crd = env
        .get_object(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            None,
            "addressableservices.samples.knative.dev",
        )
        .unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["mode"]["enum"] =
        json!(["b", "c"]);
    env.update_object(crd).unwrap();

    let mut with_status = stored.clone();
    with_status.data["status"] = json!({"observedGeneration": 1});
    let written = api
        .replace_status("old", &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert_eq!(written.data["status"]["observedGeneration"], 1);

    let mut other_field = written.clone();
    other_field.data["spec"]["serviceName"] = json!("other");
    let written = api
        .replace("old", &PostParams::default(), &other_field)
        .await
        .unwrap();
    assert_eq!(written.data["spec"]["mode"], "a", "the old value stays");

    let mut changed = written.clone();
    changed.data["spec"]["mode"] = json!("d");
    let status = api_err(
        api.replace("old", &PostParams::default(), &changed)
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 422);
    assert!(
        status.message.contains("spec.mode: Unsupported value: \"d\""),
        "{}",
        status.message
    );

    // A new object gets no ratcheting.
    let mut fresh = asvc("new", "webhook");
    fresh.data["spec"]["mode"] = json!("a");
    let status = api_err(api.create(&PostParams::default(), &fresh).await.unwrap_err());
    assert_eq!(status.code, 422, "{}", status.message);
}

/// `Builder::address`: every interface when asked, with the kubeconfig URL on
/// the loopback address; a taken port is an error naming the address.
#[tokio::test]
async fn serves_on_the_address_it_is_given() {
    use std::io::{Read, Write};
    let env = TestEnv::builder()
        .address(std::net::Ipv4Addr::UNSPECIFIED.into())
        .build();
    let server = env.serve().await.unwrap();
    assert!(server.addr().ip().is_unspecified());
    let port = server.addr().port();
    assert_eq!(server.url(), format!("http://127.0.0.1:{port}"));
    let response = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .write_all(b"GET /version HTTP/1.1\r\nHost: testenv\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    })
    .await
    .unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");

    let err = TestEnv::builder()
        .port(port)
        .build()
        .serve()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(&format!("failed to listen on 127.0.0.1:{port}: ")),
        "{err}"
    );
}

#[tokio::test]
async fn a_service_account_gets_what_rbac_grants_and_a_403_for_the_rest() {
    let env = TestEnv::new();
    for obj in [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "aggregate"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"part-of": "aggregate"}}]}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "read-configmaps", "labels": {"part-of": "aggregate"}},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "bot-reads"},
            "subjects": [{"kind": "ServiceAccount", "namespace": "default", "name": "bot"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "aggregate"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "write-configmaps", "namespace": "default"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "bot-writes", "namespace": "default"},
            "subjects": [{"kind": "ServiceAccount", "namespace": "default", "name": "bot"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "write-configmaps"}}),
    ] {
        env.create_object(obj).unwrap();
    }
    env.create_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}))
        .unwrap();
    let server = env.serve().await.unwrap();
    let token = env.service_account_token("default", "bot");
    let bot = client_with_kubeconfig(&server.kubeconfig_with_token(&token)).await;

    let here: Api<ConfigMap> = Api::namespaced(bot.clone(), "default");
    here.create(&PostParams::default(), &cm("mine")).await.unwrap();
    here.get("mine").await.unwrap();
    let there: Api<ConfigMap> = Api::namespaced(bot.clone(), "other");
    there.list(&ListParams::default()).await.unwrap();
    let err = api_err(
        there
            .create(&PostParams::default(), &cm("theirs"))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        err.message,
        "configmaps is forbidden: User \"system:serviceaccount:default:bot\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"other\""
    );
    let err = api_err(here.delete("mine", &DeleteParams::default()).await.unwrap_err());
    assert_eq!(
        err.message,
        "configmaps \"mine\" is forbidden: User \"system:serviceaccount:default:bot\" cannot delete resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    let namespaces: Api<Namespace> = Api::all(bot.clone());
    let err = api_err(namespaces.list(&ListParams::default()).await.unwrap_err());
    assert!(
        err.message
            .ends_with("cannot list resource \"namespaces\" in API group \"\" at the cluster scope"),
        "{}",
        err.message
    );
    assert_eq!(env.denied_requests().len(), 3);
    // Discovery needs no grant, and requests without a token are an administrator's.
    bot.apiserver_version().await.unwrap();
    let admin: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "other");
    admin.create(&PostParams::default(), &cm("theirs")).await.unwrap();
    // A token testenv would not mint is not a user.
    let stranger = client_with_kubeconfig(&server.kubeconfig_with_token("forged")).await;
    let err = api_err(
        Api::<ConfigMap>::namespaced(stranger, "default")
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.message.as_str()), (401, "Unauthorized"));
}

#[tokio::test]
async fn resource_names_grant_a_list_and_watch_that_select_the_name() {
    use futures::{StreamExt, TryStreamExt};
    use kube::api::{WatchEvent, WatchParams};

    let env = TestEnv::new();
    for obj in [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "one-secret", "namespace": "default"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["certs"],
                "verbs": ["get", "list", "watch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "bot-one-secret", "namespace": "default"},
            "subjects": [{"kind": "ServiceAccount", "namespace": "default", "name": "bot"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "one-secret"}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "certs", "namespace": "default"}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "other", "namespace": "default"}}),
    ] {
        env.create_object(obj).unwrap();
    }
    let server = env.serve().await.unwrap();
    let token = env.service_account_token("default", "bot");
    let bot = client_with_kubeconfig(&server.kubeconfig_with_token(&token)).await;
    let secrets: Api<Secret> = Api::namespaced(bot, "default");

    let mine = secrets
        .list(&ListParams::default().fields("metadata.name=certs"))
        .await
        .unwrap();
    assert_eq!(mine.items.len(), 1);
    let mut events = secrets
        .watch(&WatchParams::default().fields("metadata.name==certs"), "0")
        .await
        .unwrap()
        .boxed();
    assert!(matches!(events.try_next().await, Ok(Some(WatchEvent::Added(_)))));

    for (what, fields) in [
        ("every Secret", ""),
        ("another Secret", "metadata.name=other"),
        ("all but one", "metadata.name!=certs"),
    ] {
        let err = api_err(
            secrets
                .list(&ListParams::default().fields(fields))
                .await
                .unwrap_err(),
        );
        assert_eq!(err.code, 403, "{what}: {}", err.message);
    }
    let err = api_err(secrets.watch(&WatchParams::default(), "0").await.err().unwrap());
    assert!(
        err.message
            .ends_with("cannot watch resource \"secrets\" in API group \"\" in the namespace \"default\""),
        "{}",
        err.message
    );
    secrets.get("certs").await.unwrap();
    assert_eq!(api_err(secrets.get("other").await.unwrap_err()).code, 403);
}

fn crd_with_spec_schema(spec: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.dev"},
        "spec": {
            "group": "example.dev",
            "names": {"kind": "Widget", "plural": "widgets"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": spec},
            }}}],
        },
    })
}

#[test]
fn the_crd_check_answers_as_kube_apiserver_would_to_plain_kubectl_apply() {
    let ok = crd_with_spec_schema(json!({"type": "object", "properties": {"size": {"type": "integer"}}}));
    kinject_testenv::check_custom_resource_definition(&ok).unwrap();

    let untyped = crd_with_spec_schema(json!({"type": "object", "properties": {"anything": {}}}));
    let err = kinject_testenv::check_custom_resource_definition(&untyped).unwrap_err();
    assert_eq!(err.code, 422);
    assert!(
        err.message.contains(
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[anything].type: Required value: must not be empty for specified object fields"
        ),
        "{}",
        err.message
    );

    // Client-side apply keeps the whole CRD in an annotation.
    let huge = crd_with_spec_schema(json!({"type": "object", "description": "x".repeat(262_144)}));
    let err = kinject_testenv::check_custom_resource_definition(&huge).unwrap_err();
    assert!(
        err.message
            .ends_with("metadata.annotations: Too long: may not be more than 262144 bytes"),
        "{}",
        err.message
    );
}

/// kube-apiserver has no protobuf form of a custom resource and answers 415; a
/// protobuf body of a built-in kind that does not decode is a 400.
#[tokio::test]
async fn protobuf_bodies_of_custom_resources_are_unsupported() {
    let env = env_with_crd();
    let client = env.client();
    let (code, body) = raw(
        &client,
        "POST",
        "/apis/samples.knative.dev/v1alpha1/namespaces/default/addressableservices",
        "application/vnd.kubernetes.protobuf",
        "k8s\u{0}",
    )
    .await;
    assert_eq!(
        (code, body["reason"].clone()),
        (415, json!("UnsupportedMediaType"))
    );
    assert_eq!(
        body["message"],
        json!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"
        )
    );
    // A length that runs past the end of the body.
    let (code, body) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/services",
        "application/vnd.kubernetes.protobuf",
        "k8s\u{0}\u{12}\u{7f}",
    )
    .await;
    assert_eq!(
        (code, body["reason"].clone()),
        (400, json!("BadRequest")),
        "{body}"
    );
    let msg = body["message"].as_str().unwrap();
    assert!(
        msg.starts_with("Service in version \"v1\" cannot be handled as a Service: "),
        "{msg}"
    );
}

/// Objects are stored in the storage version: after the storage version
/// moves, an unchanged write of an object stored before rewrites it (a new
/// resourceVersion) and one of an object stored since does not. The CRD's
/// `status.storedVersions` gains the new storage version, keeps a version
/// from leaving `spec.versions` while it is listed, and loses it through
/// `/status`, as kube-apiserver's do.
#[tokio::test]
async fn objects_are_stored_in_the_storage_version_and_stored_versions_guard_the_crd() {
    let env = TestEnv::new();
    let mut crd = common::crd();
    let mut second = crd["spec"]["versions"][0].clone();
    second["name"] = json!("v1beta1");
    second["storage"] = json!(false);
    crd["spec"]["versions"].as_array_mut().unwrap().push(second);
    env.create_object(crd.clone()).unwrap();
    let object = |name: &str, version: &str| {
        json!({"apiVersion": format!("samples.knative.dev/{version}"), "kind": "AddressableService",
               "metadata": {"name": name, "namespace": "default"}, "spec": {"serviceName": "web"}})
    };
    let old = env.create_object(object("old", "v1beta1")).unwrap();
    let current_crd = |env: &TestEnv| {
        env.get_object(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            None,
            "addressableservices.samples.knative.dev",
        )
        .unwrap()
    };
    assert_eq!(current_crd(&env)["status"]["storedVersions"], json!(["v1alpha1"]));

    // The storage version moves to v1beta1.
    crd["spec"]["versions"][0]["storage"] = json!(false);
    crd["spec"]["versions"][1]["storage"] = json!(true);
    crd["metadata"]["resourceVersion"] = current_crd(&env)["metadata"]["resourceVersion"].clone();
    env.update_object(crd.clone()).unwrap();
    assert_eq!(
        current_crd(&env)["status"]["storedVersions"],
        json!(["v1alpha1", "v1beta1"])
    );
    let new = env.create_object(object("new", "v1alpha1")).unwrap();

    let rewrite = |written: &Value| {
        let mut again = env
            .get_object(
                "samples.knative.dev",
                "v1beta1",
                "addressableservices",
                Some("default"),
                written["metadata"]["name"].as_str().unwrap(),
            )
            .unwrap();
        again["metadata"]["managedFields"] = Value::Null;
        env.update_object(again).unwrap()["metadata"]["resourceVersion"].clone()
    };
    assert_ne!(
        rewrite(&old),
        old["metadata"]["resourceVersion"],
        "stored in v1alpha1: rewritten"
    );
    assert_eq!(
        rewrite(&new),
        new["metadata"]["resourceVersion"],
        "stored in v1beta1 already: no write"
    );

    // v1alpha1 cannot leave the CRD while it is listed as stored.
    let mut dropped = crd.clone();
    dropped["spec"]["versions"].as_array_mut().unwrap().remove(0);
    dropped["metadata"]["resourceVersion"] = current_crd(&env)["metadata"]["resourceVersion"].clone();
    let refused = env.update_object(dropped.clone()).unwrap_err().to_string();
    assert!(
        refused.contains(
            "CustomResourceDefinition.apiextensions.k8s.io \"addressableservices.samples.knative.dev\" is invalid: \
             status.storedVersions[0]: Invalid value: \"v1alpha1\": must appear in spec.versions"
        ),
        "{refused}"
    );
    // A migration trims it through the status subresource; then it can go.
    let client = env.client();
    let crds: kube::Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = kube::Api::all(client);
    crds.patch_status(
        "addressableservices.samples.knative.dev",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"status": {"storedVersions": ["v1beta1"]}})),
    )
    .await
    .unwrap();
    dropped["metadata"]["resourceVersion"] = current_crd(&env)["metadata"]["resourceVersion"].clone();
    env.update_object(dropped).unwrap();
    assert_eq!(current_crd(&env)["status"]["storedVersions"], json!(["v1beta1"]));
    assert_eq!(
        env.list_objects(
            "samples.knative.dev",
            "v1beta1",
            "addressableservices",
            Some("default")
        )
        .len(),
        2
    );
}
