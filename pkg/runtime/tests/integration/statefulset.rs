//! StatefulSet-ordinal mode: two pods of one StatefulSet, each running every
//! controller over the same API server, own the bucket of their ordinal and
//! nothing else, without a single Lease request; and each reports the keys per
//! bucket and its leadership in its metrics.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::fixtures::{Scaler, Widget};
use kinject_runtime::apis::Object;
use kinject_runtime::client::ApiScope;
use kinject_runtime::controller::{Impl, ObjectKey, WorkqueueMetrics};
use kinject_runtime::injection::Context;
use kinject_runtime::leader::Bucket;
use kinject_runtime::leaderelection::{HashBucket, StatefulSetConfig, promote_ordinal};
use kinject_runtime::reconciler::{
    KindConfig, NoFinalizer, Options, ReconcileContext, ReconcileKind, ReconcileResult, Reconciled, new_impl,
};
use kinject_testing::obj;
use kube::api::ObjectMeta;
use prometheus_client::registry::Registry;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

const NS: &str = "knative-samples";
const BUCKETS: u32 = 2;
const PER_KIND: usize = 24;

static WIDGET: KindConfig<Widget> = KindConfig {
    agent_name: "widget-controller",
    finalizer_name: "widgets.fixtures.kinject.dev",
    class_keys: &[],
    status: None,
    krshaped: None,
};

static SCALER: KindConfig<Scaler> = KindConfig {
    agent_name: "scaler-controller",
    finalizer_name: "scalers.fixtures.kinject.dev",
    class_keys: &[],
    status: None,
    krshaped: None,
};

/// `(queue, key)` of every reconcile a pod ran as the key's leader.
type Seen = Arc<Mutex<Vec<(String, ObjectKey)>>>;

/// Records each key it reconciles; one queue per kind, named after `K`.
struct Recorder<K> {
    queue: String,
    seen: Seen,
    kind: PhantomData<fn() -> K>,
}

#[kinject_runtime::async_trait]
impl<K: Object> ReconcileKind<K> for Recorder<K> {
    type Finalizer = NoFinalizer;

    async fn reconcile_kind(&self, ctx: &ReconcileContext, resource: &mut K) -> ReconcileResult {
        assert!(ctx.is_leader(), "reconcile_kind runs on the leader only");
        self.seen
            .lock()
            .unwrap()
            .push((self.queue.clone(), ObjectKey::of(resource)));
        Ok(Reconciled::done())
    }
}

fn build<K>(ctx: &Context, seen: &Seen, kind: &'static KindConfig<K>) -> Impl
where
    K: Object<Scope: ApiScope>,
{
    let queue = kinject_runtime::reconciler::queue_name(std::any::type_name::<Recorder<K>>());
    let recorder = Recorder {
        queue,
        seen: seen.clone(),
        kind: PhantomData,
    };
    let controller = new_impl(ctx, recorder, kind, None, Options::default());
    ctx.informer::<K>()
        .add_event_handler(controller.enqueue_handler());
    controller
}

/// The controllers every pod runs, as a process's constructors list them.
fn constructors() -> Vec<fn(&Context, &Seen) -> Impl> {
    vec![|ctx, seen| build(ctx, seen, &WIDGET), |ctx, seen| {
        build(ctx, seen, &SCALER)
    }]
}

/// `PER_KIND` objects of each controller's kind.
fn objects() -> Vec<Value> {
    let meta = |i: usize| ObjectMeta {
        name: Some(format!("obj-{i:02}")),
        namespace: Some(NS.to_owned()),
        ..ObjectMeta::default()
    };
    (0..PER_KIND)
        .flat_map(|i| {
            [
                obj(&Widget {
                    metadata: meta(i),
                    ..Widget::default()
                }),
                obj(&Scaler {
                    metadata: meta(i),
                    ..Scaler::default()
                }),
            ]
        })
        .collect()
}

/// One pod of the StatefulSet: its own context, informers, metrics and
/// controllers, promoted for the bucket of its ordinal.
struct Pod {
    own: HashBucket,
    controllers: Vec<Impl>,
    seen: Seen,
    registry: Registry,
    informers: CancellationToken,
}

fn pod(env: &kinject_testenv::TestEnv, ordinal: u32) -> Pod {
    let vars = BTreeMap::from([
        ("STATEFUL_CONTROLLER_ORDINAL", format!("controller-{ordinal}")),
        ("STATEFUL_SERVICE_NAME", "controller".to_owned()),
    ]);
    let config = StatefulSetConfig::from_lookup(|name| vars.get(name).cloned())
        .unwrap()
        .unwrap();
    let own = config.own_bucket(BUCKETS, NS, "cluster.local").unwrap();
    let mut registry = Registry::default();
    let metrics = WorkqueueMetrics::register(&mut registry);
    let ctx = Context::builder(env.client()).extension(metrics).build();
    let seen = Seen::default();
    let controllers: Vec<Impl> = constructors().iter().map(|c| c(&ctx, &seen)).collect();
    for controller in &controllers {
        promote_ordinal(controller, &own).unwrap();
    }
    let informers = CancellationToken::new();
    ctx.start_informers(&informers);
    Pod {
        own,
        controllers,
        seen,
        registry,
        informers,
    }
}

fn scrape(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text
}

/// The samples of `family` in `text`, by their labels.
fn samples(text: &str, family: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter_map(|line| line.strip_prefix(family)?.strip_prefix('{'))
        .filter_map(|rest| {
            let (labels, value) = rest.rsplit_once("} ")?;
            Some((labels.to_owned(), value.parse().ok()?))
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn two_statefulset_pods_lead_only_their_own_bucket_and_together_every_key() {
    let crds = vec![
        kinject_types::crd::custom_resource_definition::<Widget>().unwrap(),
        kinject_types::crd::custom_resource_definition::<Scaler>().unwrap(),
    ];
    let objects = objects();
    let (_seeded, env) = kinject_testing::context(&crds, objects.clone()).unwrap();
    env.clear_actions();
    let pods: Vec<Pod> = (0..BUCKETS).map(|ordinal| pod(&env, ordinal)).collect();
    let controllers = constructors().len();
    let queues: Vec<String> = pods[0].controllers.iter().map(|c| c.name().to_owned()).collect();
    // Every kind has an object under each of these keys.
    let keys: BTreeSet<ObjectKey> = objects
        .iter()
        .map(|o| {
            ObjectKey::new(
                o["metadata"]["namespace"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    let set = pods[0].own.set().clone();
    assert_eq!(
        set.names(),
        pods[1].own.set().names(),
        "the pods agree on the buckets"
    );
    // Who should lead each key, from the hashing alone.
    let owner = |key: &ObjectKey| -> usize {
        let name = set.owner_of(key).unwrap();
        pods.iter().position(|p| p.own.name() == name).unwrap()
    };

    let stop = CancellationToken::new();
    let mut running = Vec::new();
    for pod in &pods {
        for controller in &pod.controllers {
            let (controller, stop) = (controller.clone(), stop.clone());
            running.push(tokio::spawn(async move { controller.run(stop).await }));
        }
    }
    let every_key_reconciled = async {
        loop {
            let reconciled: BTreeSet<(String, ObjectKey)> =
                pods.iter().flat_map(|p| p.seen.lock().unwrap().clone()).collect();
            if reconciled.len() == controllers * keys.len() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(600), every_key_reconciled)
        .await
        .expect("some keys were never reconciled");
    stop.cancel();
    for run in running {
        run.await.unwrap();
    }
    let all: BTreeSet<(String, ObjectKey)> = queues
        .iter()
        .flat_map(|q| keys.iter().map(move |k| (q.clone(), k.clone())))
        .collect();
    let reconciled: BTreeSet<(String, ObjectKey)> =
        pods.iter().flat_map(|p| p.seen.lock().unwrap().clone()).collect();
    assert_eq!(
        reconciled, all,
        "together the pods lead every key of every controller"
    );

    for (ordinal, pod) in pods.iter().enumerate() {
        let led: BTreeSet<(String, ObjectKey)> = pod.seen.lock().unwrap().iter().cloned().collect();
        let expected: BTreeSet<(String, ObjectKey)> =
            all.iter().filter(|(_, k)| owner(k) == ordinal).cloned().collect();
        assert!(!expected.is_empty(), "pod {ordinal} owns some keys");
        assert_eq!(led, expected, "pod {ordinal} leads exactly its bucket's keys");

        let text = scrape(&pod.registry);
        let status = samples(&text, "leader_election_master_status");
        assert_eq!(
            status,
            BTreeMap::from([(format!("name=\"{}\"", pod.own.name()), 1.0)]),
            "pod {ordinal} leads its own bucket and no other\n{text}"
        );
        let per_bucket = samples(&text, "kinject_bucket_keys");
        assert_eq!(per_bucket.len(), controllers * set.names().len(), "{text}");
        for queue in &queues {
            for name in set.names() {
                let owned = keys
                    .iter()
                    .filter(|k| set.owner_of(k) == Some(name.as_str()))
                    .count();
                let series = format!("controller=\"{queue}\",name=\"{name}\"");
                assert_eq!(per_bucket.get(&series), Some(&(owned as f64)), "{series}\n{text}");
            }
        }
    }
    let lease_requests: Vec<String> = env
        .actions()
        .iter()
        .filter(|a| a.resource == "leases")
        .map(|a| format!("{} {}", a.verb, a.name))
        .collect();
    assert_eq!(lease_requests, Vec::<String>::new(), "no Lease traffic");
    for pod in &pods {
        pod.informers.cancel();
    }
}
