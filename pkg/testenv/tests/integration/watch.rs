//! kube-runtime's watcher and reflector against testenv, in-process and over loopback HTTP.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kinject_testenv::TestEnv;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use serde_json::json;

fn cm(name: &str, v: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"v": v}})).unwrap()
}

#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Init,
    InitApply(String, String),
    InitDone,
    Apply(String, String),
    Delete(String, String),
}

/// Runs a reflector and records what the watcher yields.
fn spawn_reflector(
    api: Api<ConfigMap>,
    cfg: watcher::Config,
) -> (
    Store<ConfigMap>,
    Arc<Mutex<Vec<Seen>>>,
    tokio::task::JoinHandle<()>,
) {
    let (reader, writer) = reflector::store();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let stream = reflector::reflector(writer, watcher::watcher(api, cfg));
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            let id = |o: &ConfigMap| {
                (
                    o.metadata.name.clone().unwrap_or_default(),
                    o.metadata.resource_version.clone().unwrap_or_default(),
                )
            };
            let s = match ev {
                Ok(Event::Init) => Seen::Init,
                Ok(Event::InitApply(o)) => {
                    let (n, r) = id(&o);
                    Seen::InitApply(n, r)
                }
                Ok(Event::InitDone) => Seen::InitDone,
                Ok(Event::Apply(o)) => {
                    let (n, r) = id(&o);
                    Seen::Apply(n, r)
                }
                Ok(Event::Delete(o)) => {
                    let (n, r) = id(&o);
                    Seen::Delete(n, r)
                }
                // Errors (forced 410s) are yielded; the watcher recovers on the next poll.
                Err(_) => continue,
            };
            log.lock().unwrap().push(s);
        }
    });
    (reader, seen, task)
}

fn state_of(store: &Store<ConfigMap>) -> BTreeMap<String, String> {
    store
        .state()
        .iter()
        .map(|o| {
            (
                o.metadata.name.clone().unwrap(),
                o.metadata.resource_version.clone().unwrap(),
            )
        })
        .collect()
}

fn server_state(env: &TestEnv) -> BTreeMap<String, String> {
    env.list_objects("", "v1", "configmaps", Some("default"))
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_owned(),
                o["metadata"]["resourceVersion"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

async fn eventually(mut f: impl FnMut() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("condition not reached in 5 s");
}

/// Creates, updates and deletes; returns the expected event sequence after the initial list.
async fn churn(api: &Api<ConfigMap>, round: usize) -> Vec<Seen> {
    let mut expected = Vec::new();
    let rv = |c: &ConfigMap| c.metadata.resource_version.clone().unwrap();
    for i in 0..3 {
        let name = format!("r{round}-{i}");
        let c = api.create(&PostParams::default(), &cm(&name, "1")).await.unwrap();
        expected.push(Seen::Apply(name.clone(), rv(&c)));
        let p = json!({"data": {"v": "2"}});
        let c = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&p))
            .await
            .unwrap();
        expected.push(Seen::Apply(name.clone(), rv(&c)));
    }
    let name = format!("r{round}-0");
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    expected.push(Seen::Delete(name, String::new()));
    expected
}

fn strip_delete_rv(v: &[Seen]) -> Vec<Seen> {
    v.iter()
        .map(|s| match s {
            Seen::Delete(n, _) => Seen::Delete(n.clone(), String::new()),
            other => other.clone(),
        })
        .collect()
}

async fn scenario(env: TestEnv, client: kube::Client, cfg: watcher::Config) {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &cm("seed", "0"))
        .await
        .unwrap();
    let (store, seen, task) = spawn_reflector(api.clone(), cfg);
    tokio::time::timeout(Duration::from_secs(5), store.wait_until_ready())
        .await
        .unwrap()
        .unwrap();

    // Without faults every write arrives once, in order.
    let start = seen.lock().unwrap().len();
    let expected = churn(&api, 0).await;
    eventually(|| seen.lock().unwrap().len() >= start + expected.len()).await;
    let got = strip_delete_rv(&seen.lock().unwrap()[start..]);
    assert_eq!(got, expected);

    // Forced closes: the watcher re-watches from its last resourceVersion, losing nothing.
    for round in 1..3 {
        env.close_watches();
        let start = seen.lock().unwrap().len();
        let expected = churn(&api, round).await;
        eventually(|| seen.lock().unwrap().len() >= start + expected.len()).await;
        let got = strip_delete_rv(&seen.lock().unwrap()[start..]);
        assert_eq!(got, expected, "after forced close {round}");
    }

    // Forced 410s: the watcher relists and ends up with exactly the server's objects.
    for round in 3..5 {
        env.expire_next_watch();
        env.close_watches();
        churn(&api, round).await;
        eventually(|| state_of(&store) == server_state(&env)).await;
    }
    let log = seen.lock().unwrap().clone();
    assert!(
        log.iter().filter(|s| **s == Seen::Init).count() >= 2,
        "a forced 410 makes the watcher relist: {log:?}"
    );
    // More writes after the relist still arrive.
    churn(&api, 9).await;
    eventually(|| state_of(&store) == server_state(&env)).await;
    task.abort();
}

fn env() -> TestEnv {
    TestEnv::builder()
        .bookmark_interval(Duration::from_millis(50))
        .build()
}

#[tokio::test]
async fn list_watch_in_process() {
    let env = env();
    scenario(env.clone(), env.client(), watcher::Config::default()).await;
}

#[tokio::test]
async fn streaming_list_in_process() {
    let env = env();
    scenario(
        env.clone(),
        env.client(),
        watcher::Config::default().streaming_lists(),
    )
    .await;
}

#[tokio::test]
async fn list_watch_over_http() {
    let env = env();
    let server = env.serve().await.unwrap();
    scenario(
        env.clone(),
        server.client().unwrap(),
        watcher::Config::default().page_size(2),
    )
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn streaming_list_over_http() {
    let env = env();
    let server = env.serve().await.unwrap();
    scenario(
        env.clone(),
        server.client().unwrap(),
        watcher::Config::default().streaming_lists(),
    )
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn metadata_watcher_sees_partial_objects() {
    let env = env();
    let api: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(env.client(), "default");
    let stream = watcher::watcher(api, watcher::Config::default());
    let mut stream = std::pin::pin!(stream);
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    assert!(matches!(stream.next().await, Some(Ok(Event::Init))));
    assert!(matches!(stream.next().await, Some(Ok(Event::InitDone))));
    cms.create(&PostParams::default(), &cm("m", "1")).await.unwrap();
    match stream.next().await {
        Some(Ok(Event::Apply(o))) => assert_eq!(o.metadata.name.as_deref(), Some("m")),
        other => panic!("unexpected {other:?}"),
    }
}

async fn raw_watch(env: &TestEnv, query: &str) -> impl futures::Stream<Item = serde_json::Value> + use<> {
    let req = http::Request::get(format!("/api/v1/namespaces/default/configmaps?{query}"))
        .body(Vec::new())
        .unwrap();
    let lines = env
        .client()
        .request_events::<serde_json::Value>(req)
        .await
        .unwrap();
    lines.map(|e| serde_json::to_value(e.unwrap()).unwrap())
}

#[tokio::test]
async fn bookmarks_initial_events_and_expiry() {
    let env = env();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    api.create(&PostParams::default(), &cm("a", "1")).await.unwrap();
    let rv = env.resource_version();

    // sendInitialEvents: the current state, then the initial-events-end bookmark.
    let mut s = Box::pin(
        raw_watch(
            &env,
            "watch=true&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0",
        )
        .await,
    );
    let first = s.next().await.unwrap();
    assert_eq!(first["type"], "ADDED");
    let end = s.next().await.unwrap();
    assert_eq!(end["type"], "BOOKMARK");
    assert_eq!(end["object"]["metadata"]["resourceVersion"], rv.to_string());
    assert_eq!(
        end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    // Idle watches get periodic bookmarks.
    let bm = tokio::time::timeout(Duration::from_secs(2), s.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(bm["type"], "BOOKMARK");

    // A compacted resourceVersion: 410 Expired inside a 200 stream.
    api.create(&PostParams::default(), &cm("b", "1")).await.unwrap();
    env.compact();
    let mut s = Box::pin(raw_watch(&env, &format!("watch=true&resourceVersion={rv}")).await);
    let err = s.next().await.unwrap();
    assert_eq!(err["type"], "ERROR");
    assert_eq!(err["object"]["code"], 410);
    assert_eq!(err["object"]["reason"], "Expired");
    assert!(s.next().await.is_none(), "the stream ends after the error");

    // sendInitialEvents needs resourceVersionMatch and bookmarks.
    let req = http::Request::get("/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true")
        .body(Vec::new())
        .unwrap();
    let e = env.client().request_events::<ConfigMap>(req).await.err().unwrap();
    assert!(matches!(e, kube::Error::Api(s) if s.code == 422));
}

#[tokio::test]
async fn watch_timeout_and_selector_transitions() {
    let env = env();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let wp = WatchParams::default().labels("app=web").timeout(1);
    let start = env.resource_version().to_string();
    let stream = api.watch(&wp, &start).await.unwrap();
    let mut stream = Box::pin(stream);
    let mut c = cm("x", "1");
    c.metadata.labels = Some([("app".to_owned(), "db".to_owned())].into());
    api.create(&PostParams::default(), &c).await.unwrap();
    let into = json!({"metadata": {"labels": {"app": "web"}}});
    api.patch("x", &PatchParams::default(), &Patch::Merge(&into))
        .await
        .unwrap();
    let out = json!({"metadata": {"labels": {"app": "db"}}});
    api.patch("x", &PatchParams::default(), &Patch::Merge(&out))
        .await
        .unwrap();
    let kinds: Vec<&str> = stream
        .by_ref()
        .try_filter(|e| std::future::ready(!matches!(e, WatchEvent::Bookmark(_))))
        .map_ok(|e| match e {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Bookmark(_) => "BOOKMARK",
            WatchEvent::Error(_) => "ERROR",
        })
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    // Entering the selector is ADDED, leaving it DELETED; the stream ends at timeoutSeconds.
    assert_eq!(kinds, ["ADDED", "DELETED"]);
}

#[tokio::test]
async fn controller_reconciles_to_convergence() {
    use kube::api::DynamicObject;
    use kube::runtime::controller::{Action, Controller};

    let env = common::env_with_crd();
    let client = env.client();
    let api = common::asvc_api(client.clone(), "default");
    let owned: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..5 {
        api.create(&PostParams::default(), &common::asvc(&format!("as-{i}"), "svc"))
            .await
            .unwrap();
    }
    let ctx = Arc::new(api.clone());
    let controller = Controller::new_with(api.clone(), watcher::Config::default(), common::ar())
        .owns(owned, watcher::Config::default())
        .run(
            |obj: Arc<DynamicObject>, api: Arc<Api<DynamicObject>>| async move {
                let name = obj.metadata.name.clone().unwrap_or_default();
                let generation = obj.metadata.generation.unwrap_or_default();
                if obj.data["status"]["observedGeneration"] != json!(generation) {
                    let p = json!({"status": {"observedGeneration": generation}});
                    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&p))
                        .await?;
                }
                Ok::<_, kube::Error>(Action::await_change())
            },
            |_, _, _| Action::requeue(Duration::from_millis(50)),
            ctx,
        )
        .for_each(|_| std::future::ready(()));
    let task = tokio::spawn(controller);
    let converged = || {
        env.list_objects(
            "samples.knative.dev",
            "v1alpha1",
            "addressableservices",
            Some("default"),
        )
        .iter()
        .all(|o| o["status"]["observedGeneration"] == o["metadata"]["generation"])
    };
    eventually(converged).await;
    // A spec change bumps the generation; the controller observes it.
    let p = json!({"spec": {"serviceName": "other"}});
    api.patch("as-3", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
    eventually(converged).await;
    // Converged objects cause no further writes.
    let writes = env.request_count("patch", "addressableservices");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(env.request_count("patch", "addressableservices"), writes);
    task.abort();
}

#[tokio::test]
async fn server_shutdown_ends_open_watches() {
    let env = env();
    let server = env.serve().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "default");
    let stream = api.watch(&WatchParams::default(), "0").await.unwrap();
    let mut stream = Box::pin(stream);
    server.shutdown().await;
    let end = tokio::time::timeout(Duration::from_secs(3), async {
        while let Some(Ok(_)) = stream.next().await {}
    })
    .await;
    assert!(end.is_ok(), "the watch ended with the server");
}

type FinalizerCtx = (Api<ConfigMap>, Arc<Mutex<Vec<String>>>);

#[tokio::test]
async fn kube_runtime_finalizer_helper_adds_and_removes() {
    use kube::runtime::controller::{Action, Controller};
    use kube::runtime::finalizer::{Event as Fin, finalizer};

    let env = env();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let cleaned = Arc::new(Mutex::new(Vec::<String>::new()));
    let ctx = Arc::new((api.clone(), Arc::clone(&cleaned)));
    let controller = Controller::new(api.clone(), watcher::Config::default())
        .run(
            |obj: Arc<ConfigMap>, ctx: Arc<FinalizerCtx>| async move {
                let (api, cleaned) = (&ctx.0, Arc::clone(&ctx.1));
                finalizer(api, "testenv.dev/cleanup", obj, |ev| async move {
                    if let Fin::Cleanup(o) = ev {
                        cleaned
                            .lock()
                            .unwrap()
                            .push(o.metadata.name.clone().unwrap_or_default());
                    }
                    Ok::<_, kube::Error>(Action::await_change())
                })
                .await
            },
            |_, _, _| Action::requeue(Duration::from_millis(20)),
            ctx,
        )
        .for_each(|_| std::future::ready(()));
    let task = tokio::spawn(controller);
    api.create(&PostParams::default(), &cm("f", "1")).await.unwrap();
    let has_finalizer = || {
        env.get_object("", "v1", "configmaps", Some("default"), "f")
            .is_some_and(|o| o["metadata"]["finalizers"] == json!(["testenv.dev/cleanup"]))
    };
    eventually(has_finalizer).await;
    api.delete("f", &DeleteParams::default()).await.unwrap();
    eventually(|| {
        env.get_object("", "v1", "configmaps", Some("default"), "f")
            .is_none()
    })
    .await;
    assert_eq!(*cleaned.lock().unwrap(), ["f"]);
    task.abort();
}

#[tokio::test]
async fn a_watch_from_a_future_revision_waits_for_it() {
    let env = env();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let next = (env.resource_version() + 1).to_string();
    let writer = api.clone();
    let w = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        writer
            .create(&PostParams::default(), &cm("later", "1"))
            .await
            .unwrap();
        writer
            .create(&PostParams::default(), &cm("after", "1"))
            .await
            .unwrap();
    });
    let stream = api
        .watch(&WatchParams::default().disable_bookmarks(), &next)
        .await
        .unwrap();
    let mut stream = Box::pin(stream);
    match stream.next().await {
        Some(Ok(WatchEvent::Added(o))) => assert_eq!(o.metadata.name.as_deref(), Some("after")),
        other => panic!("unexpected {other:?}"),
    }
    w.await.unwrap();
    let far = (env.resource_version() + 100).to_string();
    let e = api.watch(&WatchParams::default(), &far).await.err().unwrap();
    assert!(matches!(e, kube::Error::Api(s) if s.code == 504));
}

/// The next `n` events of a raw watch, failing after a generous bound rather than hanging.
async fn take_events(
    s: &mut (impl futures::Stream<Item = serde_json::Value> + Unpin),
    n: usize,
) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for _ in 0..n {
        match tokio::time::timeout(Duration::from_secs(10), s.next()).await {
            Ok(Some(ev)) => out.push(ev),
            other => panic!("watch ended or stalled after {out:?}: {other:?}"),
        }
    }
    out
}

#[tokio::test]
async fn finalized_deletion_emits_one_modified_then_one_deleted() {
    let env = env();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut obj = cm("fin", "1");
    obj.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    let created = api.create(&PostParams::default(), &obj).await.unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();
    let mut s = Box::pin(raw_watch(&env, &format!("watch=true&resourceVersion={rv}")).await);

    api.delete("fin", &DeleteParams::default()).await.unwrap();
    let patch = json!({"metadata": {"finalizers": null}});
    let last = api
        .patch("fin", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    // A marker write after the deletion bounds the events to look at.
    api.create(&PostParams::default(), &cm("marker", "1"))
        .await
        .unwrap();

    let evs = take_events(&mut s, 3).await;
    let kinds: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["MODIFIED", "DELETED", "ADDED"], "{evs:#?}");
    assert!(evs[0]["object"]["metadata"]["deletionTimestamp"].is_string());
    // Emptying the finalizers deletes the stored object as it was: the DELETED event
    // carries the finalizer, at the deletion's revision. The write's answer is the
    // object the patch made, without finalizers, at the revision it was made on.
    assert_eq!(
        evs[1]["object"]["metadata"]["finalizers"],
        json!(["example.com/hold"])
    );
    assert_eq!(last.metadata.finalizers, None);
    assert_eq!(
        evs[0]["object"]["metadata"]["resourceVersion"].as_str(),
        last.metadata.resource_version.as_deref()
    );
    assert!(api.get_opt("fin").await.unwrap().is_none());
}

async fn raw_watch_at(
    env: &TestEnv,
    path_and_query: &str,
) -> impl futures::Stream<Item = serde_json::Value> + Unpin + use<> {
    let req = http::Request::get(path_and_query).body(Vec::new()).unwrap();
    let lines = env
        .client()
        .request_events::<serde_json::Value>(req)
        .await
        .unwrap();
    Box::pin(lines.map(|e| serde_json::to_value(e.unwrap()).unwrap()))
}

/// The single ERROR event the watch cache sends for a too-old revision, then the end.
async fn expect_too_old(mut s: impl futures::Stream<Item = serde_json::Value> + Unpin, rv: u64, oldest: u64) {
    let evs = take_events(&mut s, 1).await;
    assert_eq!(evs[0]["type"], "ERROR", "{evs:?}");
    let status = &evs[0]["object"];
    assert_eq!(status["code"], 410);
    assert_eq!(status["reason"], "Expired");
    assert_eq!(
        status["message"],
        format!("too old resource version: {rv} ({oldest})")
    );
    let end = tokio::time::timeout(Duration::from_secs(10), s.next()).await;
    assert!(
        matches!(end, Ok(None)),
        "the stream ends after the error: {end:?}"
    );
}

#[tokio::test]
async fn a_fresh_server_does_not_replay_history_from_before_its_start() {
    let env = TestEnv::new();
    let start = env.resource_version();
    assert!(start > 1, "the default namespaces were written at start");
    expect_too_old(
        raw_watch_at(&env, "/api/v1/namespaces?watch=true&resourceVersion=1").await,
        1,
        start,
    )
    .await;
    expect_too_old(
        raw_watch_at(
            &env,
            "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=1",
        )
        .await,
        1,
        start,
    )
    .await;

    // From the start revision itself, a watch sees what follows.
    let mut s = raw_watch_at(
        &env,
        &format!("/api/v1/namespaces?watch=true&resourceVersion={start}"),
    )
    .await;
    env.create_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "later"}}))
        .unwrap();
    let evs = take_events(&mut s, 1).await;
    assert_eq!(evs[0]["type"], "ADDED");
    assert_eq!(evs[0]["object"]["metadata"]["name"], "later");
}

#[tokio::test]
async fn each_resource_keeps_its_own_watch_window() {
    let env = TestEnv::builder().watch_history(3).build();
    let start = env.resource_version();
    env.create_object(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s1", "namespace": "default"}}))
        .unwrap();
    for i in 0..5 {
        env.create_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("c{i}"), "namespace": "default"}}))
            .unwrap();
    }
    // ConfigMaps keep their last three events (start+4 ..= start+6).
    let cms = "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=";
    expect_too_old(
        raw_watch_at(&env, &format!("{cms}{}", start + 2)).await,
        start + 2,
        start + 3,
    )
    .await;
    let mut s = raw_watch_at(&env, &format!("{cms}{}", start + 3)).await;
    let names: Vec<_> = take_events(&mut s, 3)
        .await
        .iter()
        .map(|e| e["object"]["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["c2", "c3", "c4"]);

    // The ConfigMap writes did not push the Secret out of the Secrets' window.
    let mut s = raw_watch_at(
        &env,
        &format!("/api/v1/namespaces/default/secrets?watch=true&resourceVersion={start}"),
    )
    .await;
    let evs = take_events(&mut s, 1).await;
    assert_eq!(
        (
            evs[0]["type"].as_str(),
            evs[0]["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("s1"))
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_is_not_read_is_closed_while_others_go_on() {
    const N: usize = 1500;
    let env = TestEnv::new();
    let from = env.resource_version();
    let query = format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={from}");
    let mut idle = raw_watch_at(&env, &query).await;
    let mut reader = raw_watch_at(&env, &query).await;
    let counter = tokio::spawn(async move {
        let evs = take_events(&mut reader, N).await;
        (evs.len(), reader)
    });
    for i in 0..N {
        env.create_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("c{i}"), "namespace": "default"}}))
            .unwrap();
    }
    let (seen, mut reader) = counter.await.unwrap();
    assert_eq!(seen, N);
    // The idle watch's client goes on not reading for a while (paused time: no flake).
    tokio::time::sleep(Duration::from_secs(1)).await;

    // The idle watch kept a bounded buffer and was then closed.
    let mut buffered = 0;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_secs(60), idle.next()).await {
        buffered += 1;
    }
    assert!(buffered < N, "an idle watch buffered all {buffered} events");

    // The reading watch is still open.
    env.create_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "after", "namespace": "default"}}))
        .unwrap();
    let evs = take_events(&mut reader, 1).await;
    assert_eq!(evs[0]["object"]["metadata"]["name"], "after");
}

#[tokio::test(start_paused = true)]
async fn a_watch_not_read_during_its_initial_events_is_closed_once_live_events_pile_up() {
    const INITIAL: usize = 1100;
    const LIVE: usize = 1000;
    let env = TestEnv::new();
    let cm = |name: String| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}});
    for i in 0..INITIAL {
        env.create_object(cm(format!("i{i}"))).unwrap();
    }
    let mut idle = raw_watch_at(&env, "/api/v1/namespaces/default/configmaps?watch=true").await;
    // The client reads nothing, first while the initial events wait, then while live
    // events pile up.
    tokio::time::sleep(Duration::from_secs(5)).await;
    for i in 0..LIVE {
        env.create_object(cm(format!("l{i}"))).unwrap();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut received = 0;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_secs(60), idle.next()).await {
        received += 1;
    }
    assert!(
        received < INITIAL,
        "the closed watch still delivered {received} events"
    );
}

/// A ConfigMap `big` of about 100 KB, `generation` telling its versions apart.
fn big_cm(generation: usize) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "big", "namespace": "default"},
        "data": {"blob": "x".repeat(100_000), "generation": generation.to_string()}})
}

#[tokio::test(start_paused = true)]
async fn a_watch_more_than_its_bytes_behind_is_closed_and_its_buffer_freed() {
    const BUDGET: usize = 1 << 20;
    const WRITES: usize = 30;
    let env = TestEnv::builder().watch_buffer_bytes(BUDGET).build();
    env.create_object(big_cm(0)).unwrap();
    let from = env.resource_version();
    let query = format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={from}");
    let mut idle = raw_watch_at(&env, &query).await;
    // Far fewer events than the 1,000 a buffer may hold, but three times its bytes.
    for generation in 1..=WRITES {
        env.update_object(big_cm(generation)).unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
        let held = env.held_bytes().watch_buffers;
        assert!(held <= BUDGET, "{held} bytes buffered after {generation} writes");
    }
    // The client goes on not reading for longer than the watch waits for it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        env.held_bytes().watch_buffers,
        0,
        "the closed watch's buffer is freed"
    );

    let mut received = 0;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_secs(60), idle.next()).await {
        received += 1;
    }
    assert!(received < WRITES, "the watch was not closed: {received} events");
}

async fn next_event(
    events: &mut (impl futures::Stream<Item = watcher::Result<Event<ConfigMap>>> + Unpin),
) -> Event<ConfigMap> {
    tokio::time::timeout(Duration::from_secs(60), events.next())
        .await
        .expect("the watcher stalled")
        .expect("the watcher ended")
        .expect("the watcher failed")
}

#[tokio::test(start_paused = true)]
async fn a_watcher_closed_for_falling_behind_watches_again_and_misses_nothing() {
    const WRITES: usize = 30;
    let env = TestEnv::builder().watch_buffer_bytes(1 << 20).build();
    env.create_object(big_cm(0)).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut events = Box::pin(watcher::watcher(api, watcher::Config::default()));
    while !matches!(next_event(&mut events).await, Event::InitDone) {}
    let generation = |cm: &ConfigMap| cm.data.as_ref().unwrap()["generation"].clone();
    // The first write's event shows the watch is open.
    env.update_object(big_cm(1)).unwrap();
    let mut seen = Vec::new();
    if let Event::Apply(cm) = next_event(&mut events).await {
        seen.push(generation(&cm));
    }
    assert_eq!(seen, ["1"]);
    // The watcher is not polled while the other writes go by, so its watch falls behind.
    for generation in 2..=WRITES {
        env.update_object(big_cm(generation)).unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(env.held_bytes().watch_buffers, 0, "the watch was closed");

    while seen.last().map(String::as_str) != Some("30") {
        match next_event(&mut events).await {
            Event::Apply(cm) | Event::InitApply(cm) => seen.push(generation(&cm)),
            Event::Init | Event::InitDone => {}
            Event::Delete(cm) => panic!("deleted: {cm:?}"),
        }
    }
    let written: Vec<String> = (1..=WRITES).map(|g| g.to_string()).collect();
    assert_eq!(
        seen, written,
        "every write arrives once, in order, from the history"
    );
    assert!(env.request_count("watch", "configmaps") >= 2, "it watched again");
    assert_eq!(env.request_count("list", "configmaps"), 1, "no relist was needed");
}

/// kube-apiserver's `ValidateListOptions` (the WatchList feature on, as by
/// default since 1.34): every refused combination of a list's or a watch's
/// options is one 422 with all its causes, in kube-apiserver's order.
#[tokio::test]
async fn list_and_watch_options_are_refused_as_kube_apiserver_refuses_them() {
    let env = env();
    let client = env.client();
    let refused = [
        (
            "watch=true&sendInitialEvents=true",
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            "watch=true&resourceVersionMatch=Exact&resourceVersion=1",
            "[resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents \
             is provided, resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\"]",
        ),
        (
            "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&continue=abc",
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided",
        ),
        (
            "sendInitialEvents=true",
            "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
        ),
        (
            "resourceVersionMatch=Exact&resourceVersion=0&sendInitialEvents=false",
            "[resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\", \
             sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list]",
        ),
        (
            "resourceVersionMatch=Latest",
            "[resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, \
             resourceVersionMatch: Unsupported value: \"Latest\": supported values: \"Exact\", \"NotOlderThan\", \"\"]",
        ),
    ];
    for (query, causes) in refused {
        let uri = format!("/api/v1/namespaces/default/configmaps?{query}");
        let (code, status) = common::send_bytes(&client, "GET", &uri, &[], Vec::new()).await;
        assert_eq!(code, 422, "{query}: {status}");
        assert_eq!(
            status["message"],
            format!("ListOptions.meta.k8s.io \"\" is invalid: {causes}"),
            "{query}"
        );
        assert_eq!(status["reason"], "Invalid", "{query}");
    }
}

/// A streaming list without bookmarks is served, as kube-apiserver serves
/// it: the initial events, and no bookmark to end them.
#[tokio::test]
async fn initial_events_without_bookmarks_end_with_no_bookmark() {
    let env = env();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    api.create(&PostParams::default(), &cm("a", "1")).await.unwrap();
    let mut s = Box::pin(
        raw_watch(
            &env,
            "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1",
        )
        .await,
    );
    let first = s.next().await.unwrap();
    assert_eq!(first["type"], "ADDED");
    assert!(s.next().await.is_none(), "no bookmark, and the watch times out");
}
