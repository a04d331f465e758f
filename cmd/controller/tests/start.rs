//! How many times, and why, the sample's controllers reconcile each key when
//! they start over objects that exist already (`converge`), and when they
//! start again over the objects they converged (`restart`): once each, for the
//! reason `changed`, whether the replica leads every key alone
//! (`--disable-ha`) or through leader election.
//!
//! In process, on tokio's paused clock, so "nothing more happened" means the
//! runtime had nothing left to run: the controllers of
//! `reconcilers::controllers()` over an in-memory testenv holding copies of
//! every sample in `config/samples`, started in sharedmain's order
//! (`pkg/sharedmain/src/run_loop.rs`: informers, then elections, then each
//! controller once its informers have synced). A tracing layer notes each
//! reconcile from the span its controller opens for it (`reconcile`, with the
//! key and the reason it was queued for).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kinject_runtime::controller::Impl;
use kinject_runtime::injection::Context;
use kinject_runtime::leaderelection;
use kinject_testenv::TestEnv;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::field::{Field, Visit};
use tracing::span;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context as LayerContext, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

const NS: &str = "knative-samples";
/// Copies of each sample.
const COPIES: usize = 5;
/// Leader election buckets, more than one so the workers wait for several
/// electors.
const BUCKETS: &str = "2";
/// How long the controllers must have had nothing to do to be done: longer
/// than any requeue of theirs (a stale cache is looked at again after 250 ms).
const QUIET: Duration = Duration::from_secs(30);

fn config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config")
}

/// The reconciles of each key (`namespace/name`), as the reasons they were
/// queued for, in order.
type PerKey = BTreeMap<String, Vec<String>>;

/// Every reconcile the controllers of this thread start.
#[derive(Clone, Default)]
struct Reconciles(Arc<Mutex<PerKey>>);

impl Reconciles {
    fn take(&self) -> PerKey {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

#[derive(Default)]
struct SpanFields {
    key: Option<String>,
    reason: Option<String>,
}

impl Visit for SpanFields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "knative.dev/key" => self.key = Some(format!("{value:?}")),
            "reason" => self.reason = Some(format!("{value:?}")),
            _ => {}
        }
    }
}

impl<S> Layer<S> for Reconciles
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, _: &span::Id, _: LayerContext<'_, S>) {
        if attrs.metadata().name() != "reconcile" {
            return;
        }
        let mut fields = SpanFields::default();
        attrs.record(&mut fields);
        let (Some(key), Some(reason)) = (fields.key, fields.reason) else {
            panic!("a reconcile span without its key or reason: {attrs:?}");
        };
        self.0.lock().unwrap().entry(key).or_default().push(reason);
    }
}

fn manifests(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension().is_some_and(|e| e == "yaml")
                && keep(&path.file_name().unwrap().to_string_lossy())
        })
        .collect();
    files.sort();
    files
}

fn apply(env: &TestEnv, file: &Path) -> Vec<Value> {
    env.create_from_yaml(&file.to_string_lossy(), &std::fs::read_to_string(file).unwrap())
        .unwrap_or_else(|e| panic!("applying {}: {e}", file.display()))
}

/// An API server with the namespace, the CRDs and the Services of `config/`,
/// and `COPIES` copies of every sample in the namespace; the keys of the
/// copies.
fn world() -> (TestEnv, Vec<String>) {
    let setup = manifests(&config(), |name| {
        name.starts_with("100-") || name.starts_with("300-") || name.ends_with("-service.yaml")
    });
    let env = TestEnv::new();
    // The samples as `kubectl apply` stores them, to copy from.
    let samples = TestEnv::new();
    for file in &setup {
        apply(&env, file);
        apply(&samples, file);
    }
    let mut keys = Vec::new();
    for file in manifests(&config().join("samples"), |_| true) {
        for sample in apply(&samples, &file) {
            for i in 0..COPIES {
                let name = format!("{}-{i}", sample["metadata"]["name"].as_str().unwrap());
                env.create_object(json!({
                    "apiVersion": sample["apiVersion"], "kind": sample["kind"],
                    "metadata": {"name": name, "namespace": NS},
                    "spec": sample["spec"],
                }))
                .unwrap();
                keys.push(format!("{NS}/{name}"));
            }
        }
    }
    keys.sort();
    (env, keys)
}

/// How the replica leads its keys.
#[derive(Clone, Copy, Debug)]
enum Leading {
    /// `--disable-ha`: every key, from the start.
    Alone,
    /// Lease elections, as by default.
    Elected,
}

/// A replica's controllers over `env`, running.
struct Replica {
    controllers: Vec<Impl>,
    stop: CancellationToken,
    stop_elections: CancellationToken,
    stop_informers: CancellationToken,
    controller_tasks: Vec<tokio::task::JoinHandle<()>>,
    electors: Vec<tokio::task::JoinHandle<()>>,
}

impl Replica {
    /// Starts every controller of the sample as sharedmain does.
    fn start(env: &TestEnv, leading: Leading) -> Replica {
        let ctx = Context::builder(env.client()).build();
        let built = kinject_sharedmain::construct(&ctx, &reconcilers::controllers(), &[]).unwrap();
        let stop_informers = CancellationToken::new();
        ctx.start_informers(&stop_informers);
        let controllers: Vec<Impl> = built.iter().map(|b| b.controller.clone()).collect();
        let stop_elections = CancellationToken::new();
        let mut electors = Vec::new();
        match leading {
            Leading::Alone => controllers.iter().for_each(leaderelection::promote_unopposed),
            Leading::Elected => {
                let data = BTreeMap::from([("buckets".to_owned(), BUCKETS.to_owned())]);
                let config = leaderelection::Config::from_map(&data)
                    .unwrap()
                    .component_config("controller");
                let identity = leaderelection::unique_id().unwrap();
                for controller in &controllers {
                    electors.push(
                        leaderelection::spawn_electors(
                            env.client(),
                            NS,
                            controller,
                            &config,
                            &identity,
                            stop_elections.clone(),
                        )
                        .unwrap(),
                    );
                }
            }
        }
        let stop = CancellationToken::new();
        let controller_tasks = built
            .into_iter()
            .map(|built| {
                let stop = stop.clone();
                tokio::spawn(async move {
                    built.informers.wait_for_sync().await;
                    built
                        .controller
                        .reconcile_only_when_synced(Arc::new(built.informers.clone()));
                    built.controller.run(stop).await;
                })
            })
            .collect();
        Replica {
            controllers,
            stop,
            stop_elections,
            stop_informers,
            controller_tasks,
            electors,
        }
    }

    /// Returns once no controller has had a key queued, delayed or in
    /// progress for [`QUIET`].
    async fn settle(&self) {
        let step = Duration::from_millis(100);
        let mut quiet = Duration::ZERO;
        while quiet < QUIET {
            tokio::time::sleep(step).await;
            let busy = self.controllers.iter().any(|c| {
                let queue = c.work_queue().snapshot();
                !(queue.fast.is_empty()
                    && queue.slow.is_empty()
                    && queue.processing.is_empty()
                    && queue.waiting.is_empty())
            });
            quiet = if busy { Duration::ZERO } else { quiet + step };
        }
    }

    /// Stops as sharedmain does: controllers, then elections, then informers.
    async fn stop(self) {
        self.stop.cancel();
        for task in self.controller_tasks {
            task.await.unwrap();
        }
        self.stop_elections.cancel();
        for elector in self.electors {
            elector.await.unwrap();
        }
        self.stop_informers.cancel();
    }
}

/// The keys of the objects that the controllers created objects for, as
/// the created objects name their controller.
fn owners(env: &TestEnv) -> Vec<String> {
    let mut owners: Vec<String> = env
        .actions()
        .iter()
        .filter(|a| a.verb == "create")
        .filter_map(|a| {
            let body = a.body_json()?;
            let references = body["metadata"]["ownerReferences"].as_array()?.clone();
            let namespace = a.namespace.clone();
            Some(
                references
                    .into_iter()
                    .filter(|r| r["controller"] == true)
                    .map(move |r| format!("{namespace}/{}", r["name"].as_str().unwrap_or_default())),
            )
        })
        .flatten()
        .collect();
    owners.sort();
    owners.dedup();
    owners
}

/// The writes to anything but Leases since the last clear.
fn writes(env: &TestEnv) -> Vec<String> {
    env.actions()
        .iter()
        .filter(|a| !["get", "list", "watch"].contains(&a.verb.as_str()))
        .filter(|a| a.resource != "leases")
        .map(|a| format!("{} {}/{} {}", a.verb, a.resource, a.subresource, a.name))
        .collect()
}

/// Every key reconciled exactly once, because it was `changed` (its
/// object's add), and nothing else reconciled.
fn once_each(keys: &[String]) -> PerKey {
    keys.iter()
        .map(|k| (k.clone(), vec!["changed".to_owned()]))
        .collect()
}

async fn start_and_restart(leading: Leading) {
    let reconciles = Reconciles::default();
    let _subscriber =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(reconciles.clone()));
    let (env, keys) = world();

    let first = Replica::start(&env, leading);
    first.settle().await;
    first.stop().await;
    let converge = reconciles.take();
    // A key whose reconcile created objects is reconciled again when they
    // appear (and, in a cluster, when they become ready): those are changes
    // of the world, not of the start.
    let owners = owners(&env);
    assert!(
        owners.len() < keys.len(),
        "some sample must own nothing to show the start alone: {owners:?}"
    );
    let (owning, owning_nothing): (PerKey, PerKey) = converge
        .clone()
        .into_iter()
        .partition(|(key, _)| owners.contains(key));
    let expected: Vec<String> = keys.iter().filter(|k| !owners.contains(k)).cloned().collect();
    assert_eq!(
        owning_nothing,
        once_each(&expected),
        "{leading:?}: converge, keys that own nothing, by key: {converge:#?}"
    );
    assert_eq!(
        owning.keys().cloned().collect::<Vec<_>>(),
        owners,
        "{leading:?}: converge, every owner reconciled"
    );
    for (key, reasons) in &owning {
        assert_eq!(
            reasons[0], "changed",
            "{leading:?}: {key} first reconciled for {reasons:?}"
        );
        assert!(
            reasons
                .iter()
                .all(|r| ["changed", "related", "requeue"].contains(&r.as_str())),
            "{leading:?}: {key} reconciled for {reasons:?}: neither its start nor a child explains it"
        );
    }

    env.clear_actions();
    let second = Replica::start(&env, leading);
    second.settle().await;
    second.stop().await;
    assert_eq!(
        reconciles.take(),
        once_each(&keys),
        "{leading:?}: restart, by key"
    );
    assert_eq!(writes(&env), Vec::<String>::new(), "{leading:?}: restart writes");
}

#[tokio::test(start_paused = true)]
async fn a_start_and_a_restart_reconcile_each_key_once_leading_alone() {
    start_and_restart(Leading::Alone).await;
}

#[tokio::test(start_paused = true)]
async fn a_start_and_a_restart_reconcile_each_key_once_with_leader_election() {
    start_and_restart(Leading::Elected).await;
}
