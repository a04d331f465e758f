//! Shared informers and listers against testenv's API server, through a real
//! `kube::Client`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_runtime::events::{FakeRecorder, SharedRecorder};
use kinject_runtime::informer::{EventHandler, InformerMetrics, InformerSettings};
use kinject_runtime::injection::Context;
use kinject_testenv::TestEnv;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use kube::core::{PartialObjectMeta, Selector};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

const NS: &str = "default";

fn cm(name: &str, team: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            labels: Some([("team".to_string(), team.to_string())].into()),
            ..ObjectMeta::default()
        },
        data: Some([("value".to_string(), value.to_string())].into()),
        ..ConfigMap::default()
    }
}

/// Records a handler's events as "add name=value", "update name=old->new",
/// "delete name=value".
fn recorder() -> (Arc<Mutex<Vec<String>>>, EventHandler<ConfigMap>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let value = |c: &ConfigMap| {
        format!(
            "{}={}",
            c.metadata.name.as_deref().unwrap_or_default(),
            c.data
                .as_ref()
                .and_then(|d| d.get("value"))
                .map(String::as_str)
                .unwrap_or_default()
        )
    };
    let (a, u, d) = (seen.clone(), seen.clone(), seen.clone());
    let handler = EventHandler::new()
        .on_add(move |c| a.lock().unwrap().push(format!("add {}", value(c))))
        .on_update(move |o, n| {
            let (o, n) = (value(o), value(n));
            if o != n {
                u.lock()
                    .unwrap()
                    .push(format!("update {o}->{}", n.split('=').nth(1).unwrap_or_default()));
            }
        })
        .on_delete(move |c| d.lock().unwrap().push(format!("delete {}", value(c))));
    (seen, handler)
}

async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn started(ctx: &Context) -> CancellationToken {
    let stop = CancellationToken::new();
    ctx.start_informers(&stop);
    ctx.wait_for_cache_sync(Duration::from_secs(10)).await.unwrap();
    stop
}

#[tokio::test]
async fn two_controllers_on_one_informer_see_every_change_over_one_watch() {
    let env = TestEnv::new();
    let ctx = Context::new(env.client());
    // Two constructors ask for the same informer.
    let (first, first_handler) = recorder();
    let (second, second_handler) = recorder();
    ctx.informer::<ConfigMap>().add_event_handler(first_handler);
    ctx.informer::<ConfigMap>().add_event_handler(second_handler);
    let stop = started(&ctx).await;

    let api: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    api.create(&PostParams::default(), &cm("a", "x", "1"))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("b", "x", "1"))
        .await
        .unwrap();
    let mut a = api.get("a").await.unwrap();
    a.data = Some([("value".to_string(), "2".to_string())].into());
    api.replace("a", &PostParams::default(), &a).await.unwrap();
    api.delete("b", &DeleteParams::default()).await.unwrap();

    let want = ["add a=1", "add b=1", "update a=1->2", "delete b=1"];
    eventually("both handlers to see every change", || {
        first.lock().unwrap().len() == want.len()
    })
    .await;
    eventually("the second handler too", || {
        second.lock().unwrap().len() == want.len()
    })
    .await;
    assert_eq!(*first.lock().unwrap(), want);
    assert_eq!(*second.lock().unwrap(), want);
    assert_eq!(
        env.request_count("watch", "configmaps"),
        1,
        "one watch for the kind, shared"
    );
    assert_eq!(
        list_watch_requests(&env),
        ["list"],
        "one list for the kind, shared, streamed by its watch"
    );
    assert_eq!(ctx.informer_descriptions().len(), 1);
    stop.cancel();
}

/// The configmaps of `NS` as JSON by name, without `managedFields` (which the
/// informer drops).
fn by_name(objects: impl IntoIterator<Item = serde_json::Value>) -> BTreeMap<String, serde_json::Value> {
    objects
        .into_iter()
        .map(|mut o| {
            if let Some(meta) = o.get_mut("metadata").and_then(serde_json::Value::as_object_mut) {
                meta.remove("managedFields");
            }
            let name = o["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            (name, o)
        })
        .collect()
}

/// The informer's list and watch requests for configmaps, in order, as
/// `"list"` (a list, or a watch that streams one: `sendInitialEvents`) or
/// `"watch rv=<resourceVersion>"`.
fn list_watch_requests(env: &TestEnv) -> Vec<String> {
    env.actions()
        .iter()
        .filter(|a| a.resource == "configmaps" && (a.verb == "list" || a.verb == "watch"))
        .map(|a| match a.verb.as_str() {
            _ if a.lists() => "list".to_owned(),
            "watch" => {
                let rv = a
                    .query
                    .iter()
                    .find(|(k, _)| k == "resourceVersion")
                    .map(|(_, v)| v.as_str())
                    .unwrap_or_default();
                format!("watch rv={rv}")
            }
            verb => verb.to_owned(),
        })
        .collect()
}

#[tokio::test]
async fn a_forced_410_relists_without_duplicate_or_lost_events() {
    let env = TestEnv::new();
    // List, then watch: the 410 that follows is for the watch after a list
    // (a streaming list meets the same expiry as a watch does).
    let ctx = Context::builder(env.client())
        .informer_settings(InformerSettings::<ConfigMap> {
            streaming_lists: false,
            ..InformerSettings::default()
        })
        .build();
    let (seen, handler) = recorder();
    let informer = ctx.informer::<ConfigMap>();
    informer.add_event_handler(handler);
    let api: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    for name in ["changed", "deleted"] {
        api.create(&PostParams::default(), &cm(name, "x", "1"))
            .await
            .unwrap();
    }
    let stop = started(&ctx).await;
    // Created once the informer runs, "kept" reaches it through its first
    // watch: that watch is then open and past the server's check for a forced
    // expiry, so the expiry below is served to the next watch, not this one.
    let kept = api
        .create(&PostParams::default(), &cm("kept", "x", "1"))
        .await
        .unwrap();
    let kept_rv = kept.metadata.resource_version.clone().unwrap();
    eventually("the initial list and the first watch", || {
        seen.lock().unwrap().len() == 3
    })
    .await;
    assert_eq!(
        *seen.lock().unwrap(),
        ["add changed=1", "add deleted=1", "add kept=1"]
    );
    let requests = list_watch_requests(&env);
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[0], "list", "{requests:?}");
    assert!(requests[1].starts_with("watch rv="), "{requests:?}");
    env.clear_actions();
    seen.lock().unwrap().clear();

    // The watch is cut and the resume point is gone: the next watch, resuming
    // from "kept", gets 410, so the informer relists while these changes
    // happen.
    env.expire_next_watch();
    env.close_watches();
    let mut changed = api.get("changed").await.unwrap();
    changed.data = Some([("value".to_string(), "2".to_string())].into());
    api.replace("changed", &PostParams::default(), &changed)
        .await
        .unwrap();
    api.delete("deleted", &DeleteParams::default()).await.unwrap();
    api.create(&PostParams::default(), &cm("created", "x", "1"))
        .await
        .unwrap();

    // The re-watch from kept's resourceVersion got the 410, and the informer
    // answered it with exactly one list and a watch from that list. A plain
    // re-watch (no 410) would list nothing; the watcher relists only when told
    // its resourceVersion is gone.
    eventually("the relist and the watch after it", || {
        list_watch_requests(&env).len() >= 3
    })
    .await;
    let requests = list_watch_requests(&env);
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert_eq!(requests[0], format!("watch rv={kept_rv}"), "{requests:?}");
    assert_eq!(requests[1], "list", "{requests:?}");
    assert!(requests[2].starts_with("watch rv="), "{requests:?}");

    // Once the cache equals the server, every change was seen exactly once.
    let server = || by_name(env.list_objects("", "v1", "configmaps", Some(NS)));
    let cache = || {
        by_name(
            informer
                .lister()
                .list_all()
                .unwrap()
                .iter()
                .map(|c| serde_json::to_value(c.as_ref()).unwrap()),
        )
    };
    eventually("the cache to equal the server", || cache() == server()).await;
    assert_eq!(
        server().keys().collect::<Vec<_>>(),
        ["changed", "created", "kept"]
    );

    // A barrier instead of a quiet period: one more change, made after the
    // relist, arrives after anything the relist could still deliver; once it
    // is seen, the event list is final.
    let mut kept = api.get("kept").await.unwrap();
    kept.data = Some([("value".to_string(), "2".to_string())].into());
    api.replace("kept", &PostParams::default(), &kept).await.unwrap();
    eventually("the change after the relist", || {
        seen.lock().unwrap().iter().any(|e| e == "update kept=1->2")
    })
    .await;
    let events = seen.lock().unwrap().clone();
    assert_eq!(events.len(), 4, "{events:?}");
    assert_eq!(events[3], "update kept=1->2", "{events:?}");
    let mut changes = events[..3].to_vec();
    changes.sort();
    assert_eq!(
        changes,
        ["add created=1", "delete deleted=1", "update changed=1->2"]
    );
    eventually("the cache to equal the server again", || cache() == server()).await;
    assert_eq!(list_watch_requests(&env).len(), 3, "no further list or watch");
    assert_eq!(env.request_count("list", "configmaps"), 2);
    assert_eq!(env.request_count("watch", "configmaps"), 3);
    stop.cancel();
}

#[tokio::test]
async fn listers_and_indexes_answer_from_the_cache() {
    let env = TestEnv::builder().namespace("other").build();
    let ctx = Context::new(env.client());
    let informer = ctx.informer::<ConfigMap>();
    informer
        .add_index("byTeam", |c: &ConfigMap| {
            c.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("team").cloned())
                .into_iter()
                .collect()
        })
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    for (name, team) in [("a", "red"), ("b", "blue"), ("c", "red")] {
        api.create(&PostParams::default(), &cm(name, team, "1"))
            .await
            .unwrap();
    }
    let mut elsewhere = cm("d", "red", "1");
    elsewhere.metadata.namespace = Some("other".into());
    Api::<ConfigMap>::namespaced(env.client(), "other")
        .create(&PostParams::default(), &elsewhere)
        .await
        .unwrap();
    let stop = started(&ctx).await;
    let lister = informer.lister();

    let names = |objs: Vec<Arc<ConfigMap>>| -> Vec<String> {
        objs.iter()
            .map(|c| c.metadata.name.clone().unwrap_or_default())
            .collect()
    };
    assert_eq!(names(lister.by_index("byTeam", "red").unwrap()), ["a", "c", "d"]);
    assert_eq!(
        names(
            lister
                .namespaced(NS)
                .list(&Selector::from_iter([("team", "red")]))
                .unwrap()
        ),
        ["a", "c"]
    );
    assert_eq!(names(lister.list_all().unwrap()), ["a", "b", "c", "d"]);
    assert!(lister.namespaced("other").get("a").unwrap().is_none());

    // A relabel moves the object between index values.
    let mut b = api.get("b").await.unwrap();
    b.metadata.labels = Some(BTreeMap::from([("team".to_string(), "red".to_string())]));
    api.replace("b", &PostParams::default(), &b).await.unwrap();
    eventually("b to join red", || {
        lister.by_index("byTeam", "red").unwrap().len() == 4
    })
    .await;
    assert!(lister.by_index("byTeam", "blue").unwrap().is_empty());
    stop.cancel();
}

#[tokio::test]
async fn label_filtered_informers_watch_only_their_objects() {
    let env = TestEnv::new();
    let ctx = Context::new(env.client());
    let red = ctx.filtered_informer::<ConfigMap>(&Selector::from_iter([("team", "red")]));
    let all = ctx.informer::<ConfigMap>();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    api.create(&PostParams::default(), &cm("a", "red", "1"))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("b", "blue", "1"))
        .await
        .unwrap();
    let stop = started(&ctx).await;
    assert_eq!(red.lister().len(), 1);
    assert_eq!(all.lister().len(), 2);
    assert_eq!(
        env.request_count("watch", "configmaps"),
        2,
        "one watch per kind and selector"
    );
    stop.cancel();
}

#[tokio::test]
async fn a_kind_that_is_not_served_fails_sync_naming_it() {
    let env = TestEnv::new();
    let ctx = Context::new(env.client());
    ctx.informer::<crate::fixtures::Widget>();
    let stop = CancellationToken::new();
    ctx.start_informers(&stop);
    let err = ctx
        .wait_for_cache_sync(Duration::from_secs(2))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("Widget.fixtures.kinject.dev/v1alpha1"), "{err}");
    assert!(err.contains("CRDs installed"), "{err}");
    stop.cancel();
}

/// A Scaler whose replica count the API server stored but `i32`
/// cannot hold (its CRD has no bounds).
fn scaler(name: &str, replicas: i64) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "fixtures.kinject.dev/v1alpha1",
        "kind": "Scaler",
        "metadata": {"namespace": NS, "name": name},
        "spec": {"image": "nginx", "replicas": replicas},
    })
}

/// The CRD of Scaler as a hand-written (or older) one would be:
/// without the bounds the generator derives from `replicas: i32`, so the API
/// server stores numbers the type cannot hold.
fn scaler_crd_without_bounds() -> serde_json::Value {
    use crate::fixtures::Scaler;

    let mut crd =
        serde_json::to_value(kinject_types::crd::custom_resource_definition::<Scaler>().unwrap()).unwrap();
    let replicas = crd
        .pointer_mut("/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/replicas")
        .and_then(serde_json::Value::as_object_mut)
        .unwrap();
    replicas.remove("minimum");
    replicas.remove("maximum");
    crd
}

/// The generated CRD refuses a number its field cannot hold, at apply time.
#[tokio::test]
async fn the_generated_crd_refuses_a_number_the_field_cannot_hold() {
    use crate::fixtures::Scaler;

    let env = TestEnv::new();
    env.install_crd(kinject_types::crd::custom_resource_definition::<Scaler>().unwrap())
        .unwrap();
    let refused = env
        .create_object(scaler("huge", 3_000_000_000))
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("spec.replicas in body should be less than or equal to 2147483647"),
        "{refused}"
    );
}

/// One object the kind cannot hold does not stop the list: the rest syncs,
/// the bad one is counted and left out, and it comes back once fixed.
#[tokio::test]
async fn an_undecodable_object_is_skipped_not_fatal() {
    use crate::fixtures::Scaler;

    let env = TestEnv::new();
    env.install_crd(scaler_crd_without_bounds()).unwrap();
    env.create_object(scaler("good", 1)).unwrap();
    env.create_object(scaler("huge", 3_000_000_000)).unwrap();

    let recorder = Arc::new(FakeRecorder::new());
    let mut registry = Registry::default();
    let ctx = Context::builder(env.client())
        .extension(SharedRecorder(recorder.clone()))
        .extension(InformerMetrics::register(&mut registry))
        .build();
    let informer = ctx.informer::<Scaler>();
    let stop = started(&ctx).await;
    let lister = informer.lister();
    let metric = || {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text.lines()
            .find(|l| l.starts_with("informer_undecodable_objects_total{"))
            .map(str::to_owned)
            .unwrap_or_default()
    };
    let names = || -> Vec<String> {
        lister
            .list_all()
            .unwrap()
            .iter()
            .map(|d| d.metadata.name.clone().unwrap_or_default())
            .collect()
    };
    assert_eq!(names(), ["good"]);
    assert_eq!(informer.undecodable_objects(), 1);
    let events = recorder.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        events[0].starts_with(
            "Warning DecodeFailed cannot read this object as Scaler.fixtures.kinject.dev/v1alpha1, \
             so controllers ignore it until it changes: invalid value: integer `3000000000`, expected i32"
        ),
        "{events:?}"
    );
    assert_eq!(
        metric(),
        r#"informer_undecodable_objects_total{informer="Scaler.fixtures.kinject.dev/v1alpha1"} 1"#
    );

    // Listed again, the same version is counted but not announced again.
    env.expire_next_watch();
    env.close_watches();
    eventually("a second list", || informer.undecodable_objects() == 2).await;
    assert_eq!(recorder.events().len(), 1);

    let set_replicas = |replicas: i64| {
        let mut huge = env
            .get_object("fixtures.kinject.dev", "v1alpha1", "scalers", Some(NS), "huge")
            .unwrap();
        huge["spec"]["replicas"] = serde_json::json!(replicas);
        env.update_object(huge).unwrap();
    };
    set_replicas(2);
    eventually("the fixed object to be cached", || names().len() == 2).await;
    assert_eq!(names(), ["good", "huge"]);

    // Broken again: its last good version leaves the cache.
    set_replicas(5_000_000_000);
    eventually("the broken object to leave the cache", || names() == ["good"]).await;
    assert_eq!(informer.undecodable_objects(), 3);
    assert_eq!(recorder.events().len(), 2, "a new broken version is announced");
    assert!(metric().ends_with("} 3"), "{}", metric());
    stop.cancel();
}

/// An API server that went back in time (restored from a backup, or restarted
/// empty) answers the watch's resource version with 504 "Too large resource
/// version". The informer lists again from scratch instead of retrying that
/// version forever, and is unsynced until the list is done.
#[tokio::test]
async fn a_server_that_went_back_in_time_is_listed_again() {
    use kinject_testenv::{ErrorStatus, Reactor};

    let env = TestEnv::new();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    api.create(&PostParams::default(), &cm("a", "x", "1"))
        .await
        .unwrap();
    let ctx = Context::new(env.client());
    let informer = ctx.informer::<ConfigMap>();
    let stop = started(&ctx).await;
    let lists = || list_watch_requests(&env).iter().filter(|r| *r == "list").count();
    assert_eq!(lists(), 1);

    env.react(
        Reactor::on("watch", "configmaps")
            .times(1)
            .respond(ErrorStatus::new(
                504,
                "Timeout",
                "Timeout: Too large resource version: 1000, current: 5",
            )),
    );
    env.close_watches();
    eventually("a fresh list", || lists() == 2).await;
    eventually("the cache to sync again", || informer.has_synced()).await;
    assert!(ctx.unsynced_informers().is_empty());
    assert_eq!(informer.lister().list_all().unwrap().len(), 1);
    stop.cancel();
}

/// An API server that restarts empty on the same address and has objects
/// created again before the informer's watch comes back: the watch resumes in
/// a history that never deleted what the cache holds. The re-created object
/// arrives with another uid and no delete before it, which shows the history
/// changed; the informer lists again and the objects the server no longer has
/// leave the cache (with a delete for the handlers).
#[tokio::test]
async fn a_server_that_restarted_with_another_history_is_listed_again() {
    let first = TestEnv::new();
    let server = first.serve().await.unwrap();
    let port = server.addr().port();
    let client = server.client().unwrap();
    for name in ["kept", "ghost"] {
        first
            .create_object(serde_json::to_value(cm(name, "x", "old")).unwrap())
            .unwrap();
    }
    let ctx = Context::new(client);
    let informer = ctx.informer::<ConfigMap>();
    let (seen, handler) = recorder();
    informer.add_event_handler(handler);
    let stop = started(&ctx).await;
    server.shutdown().await;

    // The new world has gone past the old one's resource version before the
    // watch returns, so the watch resumes there instead of failing.
    let second = TestEnv::builder().port(port).build();
    let mut filler = 0;
    while second.resource_version() <= first.resource_version() + 1 {
        filler += 1;
        second
            .create_object(serde_json::to_value(cm(&format!("filler-{filler}"), "x", "1")).unwrap())
            .unwrap();
    }
    second
        .create_object(serde_json::to_value(cm("kept", "x", "new")).unwrap())
        .unwrap();
    let _server = second.serve().await.unwrap();

    let lister = informer.lister();
    for _ in 0..600 {
        if lister.namespaced(NS).get("ghost").unwrap().is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        lister.namespaced(NS).get("ghost").unwrap().is_none(),
        "the object only the old server had is still cached"
    );
    eventually("the cache to equal the new server", || {
        let mut keys: Vec<String> = lister.keys().into_iter().map(|(_, name)| name).collect();
        keys.sort();
        let mut want: Vec<String> = second
            .list_objects("", "v1", "configmaps", Some(NS))
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap_or_default().to_owned())
            .collect();
        want.sort();
        keys == want && informer.has_synced()
    })
    .await;
    assert_eq!(
        lister
            .namespaced(NS)
            .get("kept")
            .unwrap()
            .unwrap()
            .data
            .as_ref()
            .unwrap()["value"],
        "new"
    );
    assert!(seen.lock().unwrap().contains(&"delete ghost=old".to_owned()));
    stop.cancel();
}

/// An API server that was unreachable for a while and came back empty,
/// with a history already past the old one's and no object of the old
/// world's names: nothing in the resumed watch shows a change. The world's
/// identity does: namespace kube-system has another uid, so the informer
/// lists again (unsynced meanwhile) and the object only the old server had
/// leaves the cache.
#[tokio::test]
async fn a_new_world_that_overtook_the_old_is_told_by_its_identity() {
    let first = TestEnv::new();
    let server = first.serve().await.unwrap();
    let port = server.addr().port();
    first
        .create_object(serde_json::to_value(cm("ghost", "x", "old")).unwrap())
        .unwrap();
    let ctx = Context::builder(server.client().unwrap())
        .config(kube::Config::new(server.url().parse().unwrap()))
        .build();
    let informer = ctx.informer::<ConfigMap>();
    let stop = started(&ctx).await;
    server.shutdown().await;
    // Long enough for the informer to find the server unreachable.
    eventually("the informer to find the server gone", || {
        informer
            .last_error()
            .is_some_and(|e| e.contains("cannot reach the API server"))
    })
    .await;

    let second = TestEnv::builder().port(port).build();
    while second.resource_version() <= first.resource_version() + 5 {
        let name = format!("filler-{}", second.resource_version());
        second
            .create_object(serde_json::to_value(cm(&name, "x", "1")).unwrap())
            .unwrap();
    }
    let _server = second.serve().await.unwrap();

    let lister = informer.lister();
    eventually("the old world's object to leave the cache", || {
        lister.namespaced(NS).get("ghost").unwrap().is_none() && informer.has_synced()
    })
    .await;
    let cached = lister.keys().len();
    assert_eq!(
        cached,
        second.list_objects("", "v1", "configmaps", Some(NS)).len()
    );
    stop.cancel();
}

/// An API server that restarts empty on the same address, behind the
/// informer's resource version: the watch is refused as "Too large resource
/// version" (after the server's wait for it) and the informer lists the new
/// world, in which the old objects are gone. The informer watches through a
/// client without kube's retries, as sharedmain's does: with them, kube would
/// retry the refused version for minutes first.
#[tokio::test]
async fn a_server_that_restarted_empty_behind_the_watch_is_listed_again() {
    let first = TestEnv::new();
    let server = first.serve().await.unwrap();
    let port = server.addr().port();
    let mut config = kube::Config::new(server.url().parse().unwrap());
    config.default_retry = false;
    let watch_client = kube::Client::try_from(config).unwrap();
    for i in 0..20 {
        first
            .create_object(serde_json::to_value(cm(&format!("old-{i}"), "x", "old")).unwrap())
            .unwrap();
    }
    let ctx = Context::builder(server.client().unwrap())
        .watch_client(watch_client)
        .build();
    let informer = ctx.informer::<ConfigMap>();
    let stop = started(&ctx).await;
    server.shutdown().await;

    let second = TestEnv::builder().port(port).build();
    let _server = second.serve().await.unwrap();
    second
        .create_object(serde_json::to_value(cm("new", "x", "new")).unwrap())
        .unwrap();
    let lister = informer.lister();
    for _ in 0..600 {
        if lister.keys() == [(NS.to_string(), "new".to_string())] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(lister.keys(), [(NS.to_string(), "new".to_string())]);
    stop.cancel();
}

/// A server with the Scaler CRD installed, and the CRD.
fn env_with_scalers() -> (
    TestEnv,
    k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) {
    let env = TestEnv::new();
    let crd = kinject_types::crd::custom_resource_definition::<crate::fixtures::Scaler>().unwrap();
    env.install_crd(crd.clone()).unwrap();
    (env, crd)
}

/// Deletes `crd` through the API, as `kubectl delete crd` does.
async fn delete_crd(
    server: &kinject_testenv::Server,
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) {
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(server.client().unwrap());
    crds.delete(crd.metadata.name.as_deref().unwrap(), &DeleteParams::default())
        .await
        .unwrap();
}

/// A resource that stops being served (its CRD deleted) empties its
/// informer's cache and unsyncs it; once the CRD is back, the informer lists
/// again within a few seconds (the retries of a 404 are capped) and syncs.
#[tokio::test]
async fn a_resource_that_disappears_empties_the_cache_until_it_returns() {
    use crate::fixtures::Scaler;

    let (env, crd) = env_with_scalers();
    env.create_object(scaler("before", 1)).unwrap();
    let server = env.serve().await.unwrap();
    let ctx = Context::new(server.client().unwrap());
    let informer = ctx.informer::<Scaler>();
    let deleted = Arc::new(Mutex::new(Vec::new()));
    let seen = deleted.clone();
    informer.add_event_handler(
        EventHandler::new().on_delete(move |s: &Scaler| seen.lock().unwrap().push(s.metadata.name.clone())),
    );
    let stop = started(&ctx).await;
    let lister = informer.lister();
    assert_eq!(lister.keys().len(), 1);

    delete_crd(&server, &crd).await;
    eventually("the cache to empty and the informer to unsync", || {
        lister.keys().is_empty() && !informer.has_synced()
    })
    .await;
    assert_eq!(*deleted.lock().unwrap(), [Some("before".to_owned())]);

    env.install_crd(crd).unwrap();
    env.create_object(scaler("after", 1)).unwrap();
    for _ in 0..200 {
        if informer.has_synced() && lister.keys() == [(NS.to_string(), "after".to_string())] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(informer.has_synced(), "listed again once the CRD is back");
    assert_eq!(lister.keys(), [(NS.to_string(), "after".to_string())]);
    stop.cancel();
}

/// A CRD that returns is served again within 2 s (on the test's paused
/// clock, so the figure does not depend on the machine): a resource that
/// answers 404 is retried at least every `informer::MISSING_RESOURCE_RETRY`, and the
/// watch that resumes once the CRD is back meets 410 (its version is from
/// before the resource went) and lists again at once instead of after a
/// backoff.
#[tokio::test(start_paused = true)]
async fn a_resource_that_returns_is_served_within_two_seconds() {
    use crate::fixtures::Scaler;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

    let log = CapturedLog::default();
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer(log.clone())
            .with_max_level(tracing::Level::INFO)
            .finish(),
    );
    let (env, crd) = env_with_scalers();
    env.create_object(scaler("before", 1)).unwrap();
    let ctx = Context::new(env.client());
    let informer = ctx.informer::<Scaler>();
    let stop = started(&ctx).await;
    Api::<CustomResourceDefinition>::all(env.client())
        .delete(crd.metadata.name.as_deref().unwrap(), &DeleteParams::default())
        .await
        .unwrap();
    eventually("the informer to unsync", || !informer.has_synced()).await;
    // Long enough for kube's backoff to have grown past its first steps.
    tokio::time::sleep(Duration::from_secs(60)).await;

    env.install_crd(crd).unwrap();
    env.create_object(scaler("after", 1)).unwrap();
    let back = tokio::time::Instant::now();
    while !(informer.has_synced() && informer.lister().keys().len() == 1) {
        assert!(
            back.elapsed() < Duration::from_secs(30),
            "not listed again: {:?}",
            ctx.unsynced_informers()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        back.elapsed() <= Duration::from_secs(2),
        "served again {:?} after the CRD returned",
        back.elapsed()
    );
    stop.cancel();
    // The log says what happened, and names no RBAC rule for it.
    let text = log.text();
    assert!(
        text.contains("resource version expired after the resource was gone; listing again"),
        "{text}"
    );
    assert!(!text.contains("RBAC"), "{text}");
}

/// A log written into memory, for tests that read what was said.
#[derive(Clone, Default)]
struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl CapturedLog {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for CapturedLog {
    type Writer = CapturedLog;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// One world per process: when one informer finds the API server's history
/// changed (here, its resource 404s after it was listed), every informer of
/// the context lists again and is unsynced until it has.
#[tokio::test]
async fn a_reset_seen_by_one_informer_relists_every_informer() {
    use crate::fixtures::Scaler;

    let (env, crd) = env_with_scalers();
    env.create_object(serde_json::to_value(cm("kept", "x", "1")).unwrap())
        .unwrap();
    let server = env.serve().await.unwrap();
    let ctx = Context::new(server.client().unwrap());
    let configmaps = ctx.informer::<ConfigMap>();
    let _scalers = ctx.informer::<Scaler>();
    let stop = started(&ctx).await;
    let lists = || list_watch_requests(&env).iter().filter(|r| *r == "list").count();
    assert_eq!(lists(), 1);

    delete_crd(&server, &crd).await;
    eventually("the ConfigMap informer to list again", || {
        lists() == 2 && configmaps.has_synced()
    })
    .await;
    assert_eq!(configmaps.lister().keys(), [(NS.to_string(), "kept".to_string())]);
    let unsynced = ctx.unsynced_informers();
    assert!(
        unsynced.iter().all(|(what, _)| what.starts_with("Scaler")),
        "only the missing resource stays unsynced: {unsynced:?}"
    );
    stop.cancel();
}

/// A scope for another namespace is the same process context: what the
/// process set once (resync period, pod name, extensions) holds there too,
/// and its informers are started, waited for and reported with the rest.
#[tokio::test]
async fn a_namespace_scope_shares_the_process_context() {
    #[derive(Debug, PartialEq)]
    struct Setting(u32);

    let env = TestEnv::new();
    env.create_object(
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "system"}}),
    )
    .unwrap();
    let system_cm = {
        let mut cm = cm("in-system", "a", "1");
        cm.metadata.namespace = Some("system".into());
        cm
    };
    Api::<ConfigMap>::namespaced(env.client(), "system")
        .create(&PostParams::default(), &system_cm)
        .await
        .unwrap();
    Api::<ConfigMap>::namespaced(env.client(), NS)
        .create(&PostParams::default(), &cm("in-default", "a", "1"))
        .await
        .unwrap();

    let ctx = Context::builder(env.client())
        .resync_period(Duration::from_secs(7))
        .pod_name(Some("controller-0".into()))
        .extension(Setting(3))
        .build();
    let system = ctx.in_namespace("system");
    assert_eq!(system.namespace(), Some("system"));
    assert_eq!(system.resync_period(), Duration::from_secs(7));
    assert_eq!(system.pod_name(), Some("controller-0"));
    assert_eq!(system.get::<Setting>().as_deref(), Some(&Setting(3)));

    let everywhere = ctx.informer::<ConfigMap>();
    let scoped = system.informer::<ConfigMap>();
    assert_eq!(
        ctx.informer_descriptions().len(),
        2,
        "one informer per kind and namespace: {:?}",
        ctx.informer_descriptions()
    );
    let stop = started(&ctx).await;
    let names = |informer: &kinject_runtime::informer::Informer<ConfigMap>| -> Vec<String> {
        let mut names: Vec<String> = informer
            .lister()
            .list_all()
            .unwrap()
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(&scoped), ["in-system"]);
    assert_eq!(names(&everywhere), ["in-default", "in-system"]);
    stop.cancel();
}

/// Lists stream by default (`sendInitialEvents`): one watch lists and then
/// watches. A server that refuses it (422, as kube-apiserver without the
/// WatchList feature gate) is listed, then watched, from then on.
#[tokio::test]
async fn lists_stream_by_default_and_fall_back_where_the_server_refuses() {
    use kinject_testenv::{ErrorStatus, Reactor};

    let env = TestEnv::new();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    api.create(&PostParams::default(), &cm("a", "x", "1"))
        .await
        .unwrap();
    let ctx = Context::new(env.client());
    let informer = ctx.informer::<ConfigMap>();
    let stop = started(&ctx).await;
    assert_eq!(list_watch_requests(&env), ["list"], "one streaming watch");
    assert_eq!(env.request_count("list", "configmaps"), 0);
    assert_eq!(informer.lister().list_all().unwrap().len(), 1);
    stop.cancel();

    let env = TestEnv::new();
    env.react(Reactor::on("watch", "configmaps").times(1).respond(ErrorStatus::new(
        422,
        "Invalid",
        "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for \
         watch unless the WatchList feature gate is enabled",
    )));
    let api: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    api.create(&PostParams::default(), &cm("b", "x", "1"))
        .await
        .unwrap();
    let ctx = Context::new(env.client());
    let informer = ctx.informer::<ConfigMap>();
    let stop = started(&ctx).await;
    assert_eq!(
        env.request_count("list", "configmaps"),
        1,
        "{:?}",
        list_watch_requests(&env)
    );
    assert_eq!(informer.lister().list_all().unwrap().len(), 1);
    api.create(&PostParams::default(), &cm("c", "x", "1"))
        .await
        .unwrap();
    eventually("the watch after the list", || {
        informer.lister().list_all().unwrap().len() == 2
    })
    .await;
    assert!(informer.last_error().is_none(), "{:?}", informer.last_error());
    stop.cancel();
}

/// The list and watch requests for `configmaps` that asked for metadata alone,
/// and those that did not.
fn metadata_and_whole_requests(env: &TestEnv) -> (usize, usize) {
    let requests: Vec<_> = env
        .actions()
        .into_iter()
        .filter(|a| a.resource == "configmaps" && (a.verb == "list" || a.verb == "watch"))
        .collect();
    let metadata = requests
        .iter()
        .filter(|a| a.accept.contains("as=PartialObjectMetadata"))
        .count();
    (metadata, requests.len() - metadata)
}

/// An informer of `PartialObjectMeta<K>` lists and watches the metadata alone
/// (kube-apiserver's `as=PartialObjectMetadata`), by a streaming list or by a
/// list and then a watch, and sits beside the kind's whole-object informer.
#[tokio::test]
async fn a_metadata_informer_lists_and_watches_metadata_alone() {
    for streaming_lists in [true, false] {
        let env = TestEnv::new();
        let api: Api<ConfigMap> = Api::namespaced(env.client(), NS);
        api.create(&PostParams::default(), &cm("a", "x", "1"))
            .await
            .unwrap();
        let ctx = Context::builder(env.client())
            .informer_settings(InformerSettings::<PartialObjectMeta<ConfigMap>> {
                streaming_lists,
                ..InformerSettings::default()
            })
            .build();
        let metadata = ctx.informer::<PartialObjectMeta<ConfigMap>>();
        let stop = started(&ctx).await;
        let (asked_metadata, asked_whole) = metadata_and_whole_requests(&env);
        assert_eq!(
            (asked_metadata, asked_whole),
            (if streaming_lists { 1 } else { 2 }, 0),
            "streaming lists: {streaming_lists}"
        );
        let a = metadata.lister().namespaced(NS).get("a").unwrap().unwrap();
        assert_eq!(a.metadata.labels, cm("a", "x", "1").metadata.labels);

        api.create(&PostParams::default(), &cm("b", "y", "1"))
            .await
            .unwrap();
        eventually("the watched create", || metadata.lister().len() == 2).await;
        let team_y = Selector::from_iter([("team".to_owned(), "y".to_owned())]);
        let listed = metadata.lister().list(&team_y).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].metadata.name.as_deref(), Some("b"));
        assert!(metadata.last_error().is_none(), "{:?}", metadata.last_error());

        // RBAC is the kind's: a metadata list is a list of configmaps.
        let of_whole_objects = Context::new(env.client());
        let _whole = of_whole_objects.informer::<ConfigMap>();
        assert_eq!(
            ctx.permissions().rules(None),
            of_whole_objects.permissions().rules(None)
        );

        let whole = ctx.informer::<ConfigMap>();
        assert_ne!(whole.description(), metadata.description());
        assert!(
            metadata.description().ends_with("[metadata]"),
            "{}",
            metadata.description()
        );
        stop.cancel();
    }
}

/// A compact informer is an informer of its own, shared like the others.
#[tokio::test]
async fn a_compact_informer_is_shared_apart_from_the_decoded_one() {
    let env = TestEnv::new();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    api.create(&PostParams::default(), &cm("a", "x", "1"))
        .await
        .unwrap();
    let ctx = Context::new(env.client());
    let decoded = ctx.informer::<ConfigMap>();
    let compact = ctx.compact_informer::<ConfigMap>();
    let _again = ctx.compact_informer::<ConfigMap>();
    assert_eq!(
        ctx.informer_descriptions(),
        [decoded.description(), compact.description()],
        "one informer per form"
    );
    assert!(
        compact.description().ends_with("[compact]"),
        "{}",
        compact.description()
    );
    let stop = started(&ctx).await;
    let a = compact.lister().namespaced(NS).get("a").unwrap().unwrap();
    assert_eq!(a.data, cm("a", "x", "1").data);
    stop.cancel();
}
