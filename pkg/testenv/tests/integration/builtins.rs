//! Every built-in kind the server declares, through a real `kube::Client`; the list of
//! kinds comes from the server's own table, so a kind added there is covered here.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ResourceQuota;
use kinject_testenv::{BuiltinKind, TestEnv};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::core::{ApiResource, DynamicObject};
use kube::discovery::{Discovery, Scope};
use serde_json::{Value, json};

/// Kinds with kube-apiserver validation rules in the server need more than the type's
/// default value; every other kind must accept its skeleton as is.
fn minimal(k: &BuiltinKind, name: &str) -> Value {
    let labels = json!({"app": name});
    let pod_spec = json!({"containers": [{"name": "c", "image": "busybox"}]});
    let mut obj = match (k.group, k.kind) {
        ("", "Pod") => json!({"spec": pod_spec}),
        ("apps", "Deployment") => json!({"spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        }}),
        ("apps", "ReplicaSet") => json!({"spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        }}),
        ("batch", "Job") => {
            let mut spec = pod_spec.clone();
            spec["restartPolicy"] = json!("Never");
            json!({"spec": {"template": {"spec": spec}}})
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => json!({
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        }),
        ("", "Service") => json!({"spec": {"ports": [{"port": 80}]}}),
        ("events.k8s.io", "Event") => json!({
            "eventTime": "2024-01-02T03:04:05.000000Z",
            "type": "Normal",
            "reason": "Tested",
            "action": "Test",
            "reportingController": "testenv.test/builtins",
            "reportingInstance": "builtins-1",
        }),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            let mut crd = json!({"spec": {
                "group": "builtins.test",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
            }});
            crd["metadata"] = json!({"name": "widgets.builtins.test"});
            crd
        }
        _ => k.skeleton.clone(),
    };
    obj["apiVersion"] = json!(k.api_version());
    obj["kind"] = json!(k.kind);
    if obj.pointer("/metadata/name").is_none() {
        obj["metadata"] = json!({"name": name});
    }
    obj
}

fn api(client: &kube::Client, k: &BuiltinKind) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: k.group.to_owned(),
        version: k.version.to_owned(),
        api_version: k.api_version(),
        kind: k.kind.to_owned(),
        plural: k.plural.to_owned(),
    };
    if k.namespaced {
        Api::namespaced_with(client.clone(), "default", &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    }
}

/// The next event that is not a bookmark: bookmarks come on a timer, so a slow run may
/// see one between any two events.
async fn next_event(
    events: &mut futures::stream::BoxStream<'_, kube::Result<WatchEvent<DynamicObject>>>,
    what: &str,
) -> Option<WatchEvent<DynamicObject>> {
    loop {
        match events
            .try_next()
            .await
            .unwrap_or_else(|e| panic!("watch {what}: {e}"))
        {
            Some(WatchEvent::Bookmark(_)) => continue,
            other => return other,
        }
    }
}

#[tokio::test]
async fn every_builtin_kind_supports_every_verb() {
    let env = TestEnv::new();
    let client = env.client();
    let kinds = kinject_testenv::builtin_kinds();
    assert!(kinds.len() >= 50, "{} kinds", kinds.len());
    for k in &kinds {
        every_verb(&client, k).await;
    }
}

/// Creates, gets, lists, watches, updates and deletes one object of `k`.
async fn every_verb(client: &kube::Client, k: &kinject_testenv::BuiltinKind) {
    let what = format!("{}/{} {}", k.group, k.version, k.kind);
    let api = api(client, k);
    let body: DynamicObject = serde_json::from_value(minimal(k, "probe")).unwrap();
    let name = body.metadata.name.clone().unwrap();

    let created = api
        .create(&PostParams::default(), &body)
        .await
        .unwrap_or_else(|e| panic!("create {what}: {e}"));
    let want_generation = k.generation.then_some(1);
    assert_eq!(created.metadata.generation, want_generation, "{what}");
    let got = api.get(&name).await.unwrap_or_else(|e| panic!("get {what}: {e}"));
    assert_eq!(got.metadata.uid, created.metadata.uid, "{what}");
    let listed = api
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list {what}: {e}"));
    assert!(
        listed
            .items
            .iter()
            .any(|o| o.metadata.name.as_deref() == Some(&name)),
        "list {what}"
    );

    let wp = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut events = api
        .watch(&wp, "0")
        .await
        .unwrap_or_else(|e| panic!("watch {what}: {e}"))
        .boxed();
    match next_event(&mut events, &what).await {
        Some(WatchEvent::Added(o)) => {
            assert_eq!(o.metadata.name.as_deref(), Some(name.as_str()), "{what}")
        }
        other => panic!("watch {what}: {other:?}"),
    }

    let mut changed = got.clone();
    changed
        .metadata
        .labels
        .get_or_insert_default()
        .insert("touched".into(), "yes".into());
    let updated = api
        .replace(&name, &PostParams::default(), &changed)
        .await
        .unwrap_or_else(|e| panic!("update {what}: {e}"));
    assert_ne!(
        updated.metadata.resource_version, got.metadata.resource_version,
        "{what}"
    );
    assert_eq!(
        updated.labels().get("touched").map(String::as_str),
        Some("yes"),
        "{what}"
    );
    match next_event(&mut events, &what).await {
        Some(WatchEvent::Modified(o)) => {
            assert_eq!(
                o.metadata.resource_version, updated.metadata.resource_version,
                "{what}"
            )
        }
        other => panic!("watch {what}: {other:?}"),
    }

    api.delete(&name, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete {what}: {e}"));
    match api
        .get_opt(&name)
        .await
        .unwrap_or_else(|e| panic!("get {what}: {e}"))
    {
        None => {}
        // A namespace waits for its namespace controller, which this server runs
        // only on request.
        Some(o) if k.kind == "Namespace" => assert!(o.metadata.deletion_timestamp.is_some()),
        Some(o) => panic!("{what} still there after delete: {o:?}"),
    }
}

#[tokio::test]
async fn builtin_table_takes_identity_from_the_types() {
    let kinds = kinject_testenv::builtin_kinds();
    let find = |group: &str, kind: &str| {
        kinds
            .iter()
            .find(|k| k.group == group && k.kind == kind)
            .unwrap_or_else(|| panic!("{group} {kind} not served"))
    };
    let rq = find("", "ResourceQuota");
    assert_eq!(
        (rq.plural, rq.list_kind, rq.namespaced, rq.status),
        ("resourcequotas", "ResourceQuotaList", true, true)
    );
    let cr = find("rbac.authorization.k8s.io", "ClusterRole");
    assert_eq!(
        (cr.plural, cr.namespaced, cr.status),
        ("clusterroles", false, false)
    );
    assert!(find("policy", "PodDisruptionBudget").status);
    assert!(!find("", "ConfigMap").status);
    let mut seen = std::collections::BTreeSet::new();
    for k in &kinds {
        assert!(seen.insert((k.group, k.plural)), "{} {} twice", k.group, k.plural);
    }
}

#[tokio::test]
async fn resource_quota_status_is_a_subresource() {
    let env = TestEnv::new();
    let quotas: Api<ResourceQuota> = Api::namespaced(env.client(), "default");
    let rq: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "q"},
        "spec": {"hard": {"pods": "10"}},
        "status": {"hard": {"pods": "99"}},
    }))
    .unwrap();
    let created = quotas.create(&PostParams::default(), &rq).await.unwrap();
    assert_eq!(created.status, None, "status is not set by create");

    let mut with_status = created.clone();
    with_status.status =
        serde_json::from_value(json!({"hard": {"pods": "10"}, "used": {"pods": "3"}})).unwrap();
    with_status.spec = None;
    let written = quotas
        .replace_status("q", &PostParams::default(), &with_status)
        .await
        .unwrap();
    let used = written.status.as_ref().and_then(|s| s.used.as_ref()).unwrap();
    assert_eq!(used["pods"].0, "3");
    assert!(written.spec.is_some(), "a status write leaves the spec alone");

    let mut spec_change = written.clone();
    spec_change.status = None;
    spec_change.spec.as_mut().unwrap().hard.as_mut().unwrap().insert(
        "pods".into(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("20".into()),
    );
    let replaced = quotas
        .replace("q", &PostParams::default(), &spec_change)
        .await
        .unwrap();
    assert_eq!(
        replaced.status, written.status,
        "the main resource ignores status"
    );
    assert_eq!(replaced.spec.unwrap().hard.unwrap()["pods"].0, "20");
    assert_eq!(replaced.metadata.generation, None, "quotas keep no generation");
}

#[tokio::test]
async fn job_status_is_a_subresource_and_spec_changes_bump_generation() {
    let env = TestEnv::new();
    let jobs: Api<Job> = Api::namespaced(env.client(), "default");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "j"},
        "spec": {
            "parallelism": 1,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}},
        },
        "status": {"active": 5},
    }))
    .unwrap();
    let created = jobs.create(&PostParams::default(), &job).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.status, None, "status is not set by create");

    let mut st = created.clone();
    st.status = serde_json::from_value(json!({"active": 1})).unwrap();
    let written = jobs
        .replace_status("j", &PostParams::default(), &st)
        .await
        .unwrap();
    assert_eq!(written.status.as_ref().and_then(|s| s.active), Some(1));
    assert_eq!(
        written.metadata.generation,
        Some(1),
        "status writes keep the generation"
    );

    let mut spec_change = written.clone();
    spec_change.spec.as_mut().unwrap().parallelism = Some(2);
    spec_change.status = None;
    let replaced = jobs
        .replace("j", &PostParams::default(), &spec_change)
        .await
        .unwrap();
    assert_eq!(replaced.metadata.generation, Some(2));
    assert_eq!(
        replaced.status.and_then(|s| s.active),
        Some(1),
        "the main resource ignores status"
    );
}

#[tokio::test]
async fn discovery_lists_roles_with_their_scope() {
    let env = TestEnv::new();
    let discovery = Discovery::new(env.client())
        .filter(&["rbac.authorization.k8s.io", "batch", ""])
        .run()
        .await
        .unwrap();
    let mut found = std::collections::BTreeMap::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            found.insert(ar.kind.clone(), caps.scope.clone());
        }
    }
    assert!(matches!(found.get("Role"), Some(Scope::Namespaced)), "{found:?}");
    assert!(
        matches!(found.get("RoleBinding"), Some(Scope::Namespaced)),
        "{found:?}"
    );
    assert!(
        matches!(found.get("ClusterRole"), Some(Scope::Cluster)),
        "{found:?}"
    );
    assert!(
        matches!(found.get("ClusterRoleBinding"), Some(Scope::Cluster)),
        "{found:?}"
    );
    assert!(
        matches!(found.get("CronJob"), Some(Scope::Namespaced)),
        "{found:?}"
    );
    assert!(
        matches!(found.get("ResourceQuota"), Some(Scope::Namespaced)),
        "{found:?}"
    );
    assert!(
        matches!(found.get("PersistentVolume"), Some(Scope::Cluster)),
        "{found:?}"
    );
}

#[tokio::test]
async fn new_kinds_reject_bodies_their_type_cannot_decode() {
    let env = TestEnv::new();
    let kinds = kinject_testenv::builtin_kinds();
    let role = kinds.iter().find(|k| k.kind == "Role").unwrap();
    let api = api(&env.client(), role);
    let body: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "bad"},
        "rules": "everything",
    }))
    .unwrap();
    let err = match api.create(&PostParams::default(), &body).await {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected a 400, got {other:?}"),
    };
    assert_eq!(err.code, 400, "{err:?}");
    assert!(
        err.message
            .starts_with("Role in version \"v1\" cannot be handled as a Role: "),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn pod_templates_of_new_kinds_merge_containers_by_name() {
    use k8s_openapi::api::apps::v1::StatefulSet;
    use kube::api::{Patch, PatchParams};
    let env = TestEnv::new();
    let sets: Api<StatefulSet> = Api::namespaced(env.client(), "default");
    let sts: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "s"},
        "spec": {
            "selector": {"matchLabels": {"app": "s"}},
            "template": {
                "metadata": {"labels": {"app": "s"}},
                "spec": {"containers": [
                    {"name": "a", "image": "a:1"},
                    {"name": "b", "image": "b:1"},
                ]},
            },
        },
    }))
    .unwrap();
    sets.create(&PostParams::default(), &sts).await.unwrap();
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b:2"}]}}}});
    let patched = sets
        .patch("s", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    let images: Vec<_> = patched
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
        .containers
        .into_iter()
        .map(|c| c.image.unwrap_or_default())
        .collect();
    assert_eq!(images, ["a:1", "b:2"]);
}

#[tokio::test]
async fn replica_sets_and_replication_controllers_scale() {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::ReplicationController;
    let env = TestEnv::new();
    let rss: Api<ReplicaSet> = Api::namespaced(env.client(), "default");
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "r"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "r"}},
            "template": {"metadata": {"labels": {"app": "r"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
    }))
    .unwrap();
    rss.create(&PostParams::default(), &rs).await.unwrap();
    let scale = rss.get_scale("r").await.unwrap();
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(2));
    assert_eq!(scale.status.and_then(|s| s.selector).as_deref(), Some("app=r"));

    let rcs: Api<ReplicationController> = Api::namespaced(env.client(), "default");
    let rc: ReplicationController = serde_json::from_value(json!({
        "metadata": {"name": "rc"},
        "spec": {"replicas": 1, "selector": {"app": "rc"}},
    }))
    .unwrap();
    rcs.create(&PostParams::default(), &rc).await.unwrap();
    let scale = rcs.get_scale("rc").await.unwrap();
    assert_eq!(scale.status.and_then(|s| s.selector).as_deref(), Some("app=rc"));
}

#[tokio::test]
async fn jobs_select_on_their_field_labels() {
    let env = TestEnv::new();
    let jobs: Api<Job> = Api::namespaced(env.client(), "default");
    for name in ["done", "running"] {
        let job: Job = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}},
        }))
        .unwrap();
        jobs.create(&PostParams::default(), &job).await.unwrap();
    }
    let mut done = jobs.get_status("done").await.unwrap();
    done.status = serde_json::from_value(json!({"succeeded": 1})).unwrap();
    jobs.replace_status("done", &PostParams::default(), &done)
        .await
        .unwrap();

    let names =
        |l: kube::core::ObjectList<Job>| -> Vec<String> { l.items.iter().map(|j| j.name_any()).collect() };
    let one = jobs
        .list(&ListParams::default().fields("status.successful=1"))
        .await
        .unwrap();
    assert_eq!(names(one), ["done"]);
    let zero = jobs
        .list(&ListParams::default().fields("status.successful=0"))
        .await
        .unwrap();
    assert_eq!(names(zero), ["running"], "a missing count reads as 0");
    let err = match jobs
        .list(&ListParams::default().fields("spec.parallelism=1"))
        .await
    {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected a 400, got {other:?}"),
    };
    assert_eq!(err.code, 400);
    assert_eq!(err.message, "field label not supported: spec.parallelism");
}

#[tokio::test]
async fn deletes_answer_as_each_registry_does() {
    let env = TestEnv::new();
    let client = env.client();
    let kinds = kinject_testenv::builtin_kinds();
    // (kind, whether kube-apiserver's registry answers with the deleted object)
    for (kind, returns_object) in [
        ("ServiceAccount", true),
        ("PodTemplate", true),
        ("PersistentVolume", true),
        ("PersistentVolumeClaim", true),
        ("StorageClass", true),
        ("ConfigMap", false),
        ("ResourceQuota", false),
        ("LimitRange", false),
        ("Role", false),
        ("Job", false),
    ] {
        let k = kinds.iter().find(|k| k.kind == kind).unwrap();
        let api = api(&client, k);
        let body: DynamicObject = serde_json::from_value(minimal(k, "gone")).unwrap();
        api.create(&PostParams::default(), &body).await.unwrap();
        let answer = api.delete("gone", &DeleteParams::default()).await.unwrap();
        assert_eq!(answer.is_left(), returns_object, "{kind}: {answer:?}");
    }
}

#[tokio::test]
async fn claims_and_volumes_start_pending() {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    let env = TestEnv::new();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client(), "default");
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound"},
    }))
    .unwrap();
    let created = claims.create(&PostParams::default(), &pvc).await.unwrap();
    assert_eq!(created.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
    assert_eq!(
        created.spec.and_then(|s| s.volume_mode).as_deref(),
        Some("Filesystem")
    );

    let volumes: Api<PersistentVolume> = Api::all(env.client());
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": "vol"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/vol"}},
    }))
    .unwrap();
    let created = volumes.create(&PostParams::default(), &pv).await.unwrap();
    assert_eq!(created.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
    let spec = created.spec.unwrap();
    assert_eq!(spec.persistent_volume_reclaim_policy.as_deref(), Some("Retain"));
}

/// kubectl and client-go ask for aggregated discovery first; every kind of the table
/// must be in it with its scope, and its status subresource when it has one.
#[tokio::test]
async fn aggregated_discovery_lists_every_builtin_kind() {
    let env = TestEnv::new();
    let client = env.client();
    let mut seen = Vec::new();
    for path in ["/api", "/apis"] {
        let req = http::Request::get(path)
            .header(
                "accept",
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
            )
            .body(kube::client::Body::empty())
            .unwrap();
        let res = client.send(req).await.unwrap();
        assert_eq!(res.status().as_u16(), 200);
        let bytes = http_body_util::BodyExt::collect(res.into_body())
            .await
            .unwrap()
            .to_bytes();
        let doc: Value = serde_json::from_slice(&bytes).unwrap();
        for group in doc["items"].as_array().unwrap() {
            let g = group["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            for version in group["versions"].as_array().unwrap() {
                for r in version["resources"].as_array().unwrap() {
                    seen.push((g.clone(), r.clone()));
                }
            }
        }
    }
    for k in kinject_testenv::builtin_kinds() {
        let (_, r) = seen
            .iter()
            .find(|(g, r)| g == k.group && r["resource"] == k.plural)
            .unwrap_or_else(|| panic!("{} {} not in aggregated discovery", k.group, k.plural));
        let scope = if k.namespaced { "Namespaced" } else { "Cluster" };
        assert_eq!(r["scope"], scope, "{}", k.plural);
        assert_eq!(r["responseKind"]["kind"], k.kind, "{}", k.plural);
        let has_status = r["subresources"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["subresource"] == "status"));
        assert_eq!(has_status, k.status, "{}", k.plural);
    }
    let role = seen
        .iter()
        .find(|(g, r)| g == "rbac.authorization.k8s.io" && r["resource"] == "roles")
        .unwrap();
    assert_eq!(role.1["scope"], "Namespaced");
    let cluster_role = seen
        .iter()
        .find(|(g, r)| g == "rbac.authorization.k8s.io" && r["resource"] == "clusterroles")
        .unwrap();
    assert_eq!(cluster_role.1["scope"], "Cluster");
}

#[tokio::test]
async fn workloads_get_the_defaults_controllers_compare_against() {
    use k8s_openapi::api::apps::v1::StatefulSet;
    let env = TestEnv::new();
    let jobs: Api<Job> = Api::namespaced(env.client(), "default");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "pi"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "perl:5"}]}}},
    }))
    .unwrap();
    let created = jobs.create(&PostParams::default(), &job).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let spec = created.spec.unwrap();
    assert_eq!(
        (spec.completions, spec.parallelism, spec.backoff_limit),
        (Some(1), Some(1), Some(6))
    );
    assert_eq!(spec.completion_mode.as_deref(), Some("NonIndexed"));
    let selector = spec.selector.unwrap().match_labels.unwrap();
    assert_eq!(selector["batch.kubernetes.io/controller-uid"], uid);
    let labels = spec.template.metadata.unwrap().labels.unwrap();
    assert_eq!(labels["batch.kubernetes.io/controller-uid"], uid);
    assert_eq!(labels["job-name"], "pi");
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    assert_eq!(pod.dns_policy.as_deref(), Some("ClusterFirst"));

    let sets: Api<StatefulSet> = Api::namespaced(env.client(), "default");
    let sts: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "db:1"}]}},
        },
    }))
    .unwrap();
    let spec = sets
        .create(&PostParams::default(), &sts)
        .await
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.pod_management_policy.as_deref(), Some("OrderedReady"));
    assert_eq!(spec.revision_history_limit, Some(10));
    assert_eq!(
        spec.update_strategy.and_then(|u| u.type_).as_deref(),
        Some("RollingUpdate")
    );
}

#[tokio::test]
async fn tables_of_new_kinds_carry_kube_apiserver_columns() {
    let env = TestEnv::new();
    let client = env.client();
    env.create_object(json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "default"},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}},
    }))
    .unwrap();
    env.create_object(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
            "metadata": {"labels": {"app": "agent"}},
            "spec": {"nodeSelector": {"zone": "a", "disk": "ssd"}, "containers": [{"name": "c", "image": "agent:1"}]}}},
    }))
    .unwrap();
    let table = |path: &'static str| {
        let client = client.clone();
        async move {
            let req = http::Request::get(path)
                .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
                .body(kube::client::Body::empty())
                .unwrap();
            let res = client.send(req).await.unwrap();
            let bytes = http_body_util::BodyExt::collect(res.into_body())
                .await
                .unwrap()
                .to_bytes();
            let t: Value = serde_json::from_slice(&bytes).unwrap();
            let names: Vec<String> = t["columnDefinitions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["name"].as_str().unwrap().to_owned())
                .collect();
            (names, t["rows"][0]["cells"].clone())
        }
    };
    let (cols, cells) = table("/apis/batch/v1/namespaces/default/cronjobs").await;
    assert_eq!(
        cols,
        [
            "Name",
            "Schedule",
            "Timezone",
            "Suspend",
            "Active",
            "Last Schedule",
            "Age"
        ]
    );
    assert_eq!(
        cells.as_array().unwrap()[1..6],
        [
            json!("0 3 * * *"),
            json!("<none>"),
            json!("False"),
            json!(0),
            json!("<none>")
        ]
    );
    let (cols, cells) = table("/apis/apps/v1/namespaces/default/daemonsets").await;
    assert_eq!(
        cols,
        [
            "Name",
            "Desired",
            "Current",
            "Ready",
            "Up-to-date",
            "Available",
            "Node Selector",
            "Age"
        ]
    );
    assert_eq!(cells[6], "disk=ssd,zone=a");
}
