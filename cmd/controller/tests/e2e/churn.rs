//! Three replicas of the controller, stopped and started again in turn while
//! objects are created, changed and deleted, must still converge every
//! object, create no pod twice and write no status outside a lease held.
//!
//! What the test knows comes from the API server, never from a clock: the
//! test watches the Leases, every controller's kind and the pods, and each
//! event carries the revision at which the write landed, so a status write
//! and the lease changes around it are ordered exactly as the server ordered
//! them. Who wrote a status is the action log's: each status update carries
//! the resourceVersion it was based on, and only one write can land on a
//! given version of an object. Who created a pod is narrowed down to the
//! replicas that asked for pods of its SimpleDeployment (the request names
//! no pod: the server generates the name).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use kinject_runtime::controller::ObjectKey;
use kinject_runtime::leader::Bucket as _;
use kinject_runtime::leaderelection::{ComponentConfig, Config, HashBucket};
use kinject_testenv::{Action, TestEnv};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, WatchEvent, WatchParams};
use serde_json::{Value, json};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::{
    Controller, NS, addressable_service, cluster, controller_count, get, log_lines, service, status, tempdir,
    wait_for,
};

/// Leases short enough for a hard-killed replica's buckets to move within
/// seconds; the retry period is longer than the failover test's so that
/// three replicas renewing 10 buckets per controller leave the shared
/// machine some CPU.
fn election() -> BTreeMap<String, String> {
    [
        ("buckets", "10"),
        ("leaseDuration", "3s"),
        ("renewDeadline", "2s"),
        ("retryPeriod", "500ms"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// Room for the leases' traffic of three replicas, so no lease waits on
/// the client's rate limiter (see the failover test).
const BUDGET: [(&str, &str); 2] = [("KUBE_API_QPS", "200"), ("KUBE_API_BURST", "400")];

/// The Services the AddressableServices point at, switched between by the churn.
const SERVICES: [&str; 2] = ["svc-a", "svc-b"];

/// The most replicas the churn scales a SimpleDeployment to.
const MAX_REPLICAS: i64 = 3;

/// One controller the binary runs: its queue, the custom kind it reconciles
/// and that kind's buckets, hashed as every replica hashes them.
struct Controlled {
    /// The controller's name (`--disable-controllers`), for the report.
    name: &'static str,
    queue: String,
    resource: ApiResource,
    buckets: Vec<HashBucket>,
}

impl Controlled {
    fn bucket_of(&self, name: &str) -> &HashBucket {
        let key = ObjectKey::new(NS, name);
        self.buckets
            .iter()
            .find(|b| b.has(&key))
            .unwrap_or_else(|| panic!("{key} hashes into no bucket of {}", self.queue))
    }
}

/// Every controller of `reconcilers::controllers()`, each matched with the
/// custom kind its module is named after, and its queue (which names its
/// leases) as the binary builds it.
fn controlled(env: &TestEnv, config: &ComponentConfig) -> Vec<Controlled> {
    let ctx = kinject_runtime::injection::Context::new(env.client());
    let queues: BTreeMap<&'static str, String> = reconcilers::controllers()
        .iter()
        .map(|c| (c.name(), c.construct(&ctx).name().to_owned()))
        .collect();
    let controlled: Vec<Controlled> = generated::registry::custom_kinds()
        .into_iter()
        .filter_map(|kind| {
            let (name, queue) = queues.get_key_value(kind.kind.to_lowercase().as_str())?;
            Some(Controlled {
                name,
                queue: queue.clone(),
                buckets: config.bucket_set(queue).buckets(),
                resource: ApiResource::from_gvk_with_plural(
                    &GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind),
                    &kind.plural,
                ),
            })
        })
        .collect();
    assert_eq!(
        controlled.len(),
        controller_count(),
        "every controller is named after the custom kind it reconciles"
    );
    controlled
}

fn lease_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease"),
        "leases",
    )
}

fn pod_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Pod"), "pods")
}

/// One run of the binary: a pod of a Deployment, so a restart is a new pod
/// with a name of its own, and the identity it holds leases under.
struct Replica {
    pod: String,
    identity: String,
    controller: Controller,
}

impl Replica {
    fn spawn(kubeconfig: &Path, dir: &Path, pod: String) -> (String, Controller) {
        let controller = Controller::start_with(kubeconfig, &pod, dir, &BUDGET);
        (pod, controller)
    }

    /// Waits for a spawned replica to say which identity it elects under.
    async fn identified((pod, controller): (String, Controller)) -> Replica {
        let mut identity = None;
        wait_for(
            &format!("{pod} to start leader election"),
            Duration::from_secs(60),
            || {
                identity = log_lines(&controller)
                    .iter()
                    .find(|l| l["msg"] == "Running with Standard leader election")
                    .and_then(|l| l["identity"].as_str().map(str::to_owned));
                identity.is_some()
            },
        )
        .await;
        Replica {
            pod,
            identity: identity.unwrap(),
            controller,
        }
    }
}

/// How a replica is stopped.
#[derive(Clone, Copy, Debug)]
enum Stop {
    /// SIGTERM: it demotes, releases its leases, and the others take them at once.
    Term,
    /// SIGKILL (`Child::kill`), as a node failure would: its leases expire.
    Kill,
}

impl Stop {
    fn apply(self, replica: Replica) {
        match self {
            Stop::Term => {
                let (exit, _) = replica.controller.terminate();
                assert!(exit.success(), "{} exited with {exit}", replica.pod);
            }
            Stop::Kill => replica.controller.kill(),
        }
    }
}

/// Each bucket lease's holder now (empty when released).
fn holders(env: &TestEnv) -> BTreeMap<String, String> {
    env.list_objects("coordination.k8s.io", "v1", "leases", Some(NS))
        .into_iter()
        .map(|l| {
            let name = l["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            let holder = l["spec"]["holderIdentity"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            (name, holder)
        })
        .collect()
}

/// True when every bucket of every controller is led by one of `live`, each
/// leading ⌊B/R⌋ or ⌈B/R⌉ of a controller's B buckets.
fn evenly_led(env: &TestEnv, controlled: &[Controlled], live: &[Replica]) -> bool {
    let holders = holders(env);
    controlled.iter().all(|c| {
        let mut led: BTreeMap<&str, usize> = live.iter().map(|r| (r.identity.as_str(), 0)).collect();
        for bucket in &c.buckets {
            let holder = holders.get(bucket.name()).map(String::as_str).unwrap_or_default();
            match led.get_mut(holder) {
                Some(n) => *n += 1,
                None => return false,
            }
        }
        let (b, r) = (c.buckets.len(), live.len());
        led.values().all(|n| *n == b / r || *n == b.div_ceil(r))
    })
}

async fn wait_evenly_led(env: &TestEnv, controlled: &[Controlled], live: &[Replica]) {
    let pods: Vec<&str> = live.iter().map(|r| r.pod.as_str()).collect();
    wait_for(
        &format!("the buckets to be shared evenly by {pods:?}"),
        Duration::from_secs(60),
        || evenly_led(env, controlled, live),
    )
    .await;
}

/// One change seen by the test's watches.
#[derive(Clone, Debug)]
struct Seen {
    /// The revision at which the write landed.
    rv: u64,
    /// When the test saw it: for the report only, never for ordering.
    at: Instant,
    resource: String,
    kind: &'static str,
    object: Value,
}

impl Seen {
    fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap_or_default()
    }
}

/// Watches resources in the system namespace from a revision on, keeping
/// every event.
struct Recorder {
    seen: Arc<Mutex<Vec<Seen>>>,
    /// The revision each watch has reached (events and bookmarks).
    reached: Arc<Mutex<BTreeMap<String, u64>>>,
    stop: CancellationToken,
    tasks: JoinSet<()>,
}

impl Recorder {
    fn start(env: &TestEnv, resources: Vec<ApiResource>) -> Recorder {
        let from = env.resource_version();
        let mut recorder = Recorder {
            seen: Arc::default(),
            reached: Arc::default(),
            stop: CancellationToken::new(),
            tasks: JoinSet::new(),
        };
        for resource in resources {
            let api: Api<DynamicObject> = Api::namespaced_with(env.client(), NS, &resource);
            let (seen, reached, stop) = (
                recorder.seen.clone(),
                recorder.reached.clone(),
                recorder.stop.clone(),
            );
            recorder
                .tasks
                .spawn(watch_from(api, resource.plural, from, seen, reached, stop));
        }
        recorder
    }

    /// Every event up to the server's current revision, in revision order.
    async fn finish(mut self, env: &TestEnv) -> Vec<Seen> {
        let head = env.resource_version();
        let watches = self.tasks.len();
        // Bookmarks carry an idle watch to the head within a second.
        wait_for("the test's watches to catch up", Duration::from_secs(30), || {
            let reached = self.reached.lock().unwrap();
            reached.len() == watches && reached.values().all(|rv| *rv >= head)
        })
        .await;
        self.stop.cancel();
        while let Some(watched) = self.tasks.join_next().await {
            watched.expect("a watch of the test failed");
        }
        let mut seen = std::mem::take(&mut *self.seen.lock().unwrap());
        seen.sort_by_key(|s| s.rv);
        seen
    }
}

async fn watch_from(
    api: Api<DynamicObject>,
    resource: String,
    from: u64,
    seen: Arc<Mutex<Vec<Seen>>>,
    reached: Arc<Mutex<BTreeMap<String, u64>>>,
    stop: CancellationToken,
) {
    let mut from = from;
    loop {
        let stream = api
            .watch(&WatchParams::default(), &from.to_string())
            .await
            .unwrap_or_else(|e| panic!("watching {resource}: {e}"));
        let mut stream = std::pin::pin!(stream);
        loop {
            let next = tokio::select! {
                () = stop.cancelled() => return,
                next = stream.try_next() => next.unwrap_or_else(|e| panic!("watching {resource}: {e}")),
            };
            let (kind, object) = match next {
                // The server ended the watch; go on from where it was.
                None => break,
                Some(WatchEvent::Added(o)) => ("ADDED", o),
                Some(WatchEvent::Modified(o)) => ("MODIFIED", o),
                Some(WatchEvent::Deleted(o)) => ("DELETED", o),
                Some(WatchEvent::Bookmark(b)) => {
                    from = b.metadata.resource_version.parse().unwrap();
                    reached.lock().unwrap().insert(resource.clone(), from);
                    continue;
                }
                Some(WatchEvent::Error(e)) => panic!("watching {resource}: {e:?}"),
            };
            let object = serde_json::to_value(object).unwrap();
            let rv = object["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|rv| rv.parse().ok())
                .unwrap();
            from = rv;
            seen.lock().unwrap().push(Seen {
                rv,
                at: Instant::now(),
                resource: resource.clone(),
                kind,
                object,
            });
            reached.lock().unwrap().insert(resource.clone(), rv);
        }
    }
}

/// The objects the churn made, as the test last wrote them.
#[derive(Debug, Default)]
struct Churn {
    /// AddressableService → the Service it names.
    services: BTreeMap<String, String>,
    /// SimpleDeployment → its replicas.
    replicas: BTreeMap<String, i64>,
    /// The most replicas each SimpleDeployment ever asked for.
    most_replicas: BTreeMap<String, i64>,
    created: usize,
    changed: usize,
    deleted: usize,
}

impl Churn {
    /// One step of a fixed cycle: per six steps, three creates, two
    /// changes and a delete, so the objects keep growing while some go.
    /// SimpleDeployments only ever scale up, and their image never changes:
    /// a correct controller then creates exactly `replicas` pods for each,
    /// and deletes none, so any extra create is a pod created twice.
    fn step(&mut self, env: &TestEnv, i: usize) {
        let n = self.created;
        match i % 6 {
            0 | 4 => {
                let svc = SERVICES[n % SERVICES.len()];
                let name = format!("asvc-{n:04}");
                env.create_object(addressable_service(&name, svc)).unwrap();
                self.services.insert(name, svc.to_owned());
                self.created += 1;
            }
            1 => {
                let name = format!("sd-{n:04}");
                env.create_object(simple_deployment(&name, 1)).unwrap();
                self.replicas.insert(name.clone(), 1);
                self.most_replicas.insert(name, 1);
                self.created += 1;
            }
            2 => self.switch_service(env, i),
            3 => self.scale_up(env, i),
            _ => self.delete_oldest(env, i),
        }
    }

    /// Points an AddressableService at the other Service.
    fn switch_service(&mut self, env: &TestEnv, i: usize) {
        let Some(name) = pick(self.services.keys(), i) else {
            return;
        };
        let svc = if self.services[&name] == SERVICES[0] {
            SERVICES[1]
        } else {
            SERVICES[0]
        };
        let mut obj = get(env, "addressableservices", NS, &name).unwrap();
        obj["spec"]["serviceName"] = json!(svc);
        update_spec(env, obj);
        self.services.insert(name, svc.to_owned());
        self.changed += 1;
    }

    fn scale_up(&mut self, env: &TestEnv, i: usize) {
        let scalable = self.replicas.iter().filter(|(_, r)| **r < MAX_REPLICAS);
        let Some(name) = pick(scalable.map(|(name, _)| name), i) else {
            return;
        };
        let replicas = self.replicas[&name] + 1;
        let mut obj = get(env, "simpledeployments", NS, &name).unwrap();
        obj["spec"]["replicas"] = json!(replicas);
        update_spec(env, obj);
        self.replicas.insert(name.clone(), replicas);
        self.most_replicas.insert(name, replicas);
        self.changed += 1;
    }

    /// Deletes the oldest AddressableService or SimpleDeployment, by turns.
    fn delete_oldest(&mut self, env: &TestEnv, i: usize) {
        let (plural, name) = if (i / 6).is_multiple_of(2) {
            ("addressableservices", self.services.pop_first().map(|(n, _)| n))
        } else {
            ("simpledeployments", self.replicas.pop_first().map(|(n, _)| n))
        };
        if let Some(name) = name {
            env.delete_object("samples.knative.dev", "v1alpha1", plural, Some(NS), &name)
                .unwrap();
            self.deleted += 1;
        }
    }

    fn remaining(&self) -> usize {
        self.services.len() + self.replicas.len()
    }

    /// The remaining objects whose status is not yet what their spec asks.
    fn unconverged(&self, env: &TestEnv) -> Vec<String> {
        let services = self.services.iter().filter(|(name, svc)| {
            let url = format!("http://{svc}.{NS}.svc.cluster.local");
            get(env, "addressableservices", NS, name).is_none_or(|o| {
                status(&o)
                    != json!({"observedGeneration": o["metadata"]["generation"],
                              "conditions": [{"type": "Ready", "status": "True"}],
                              "address": {"url": url}})
            })
        });
        let deployments = self.replicas.iter().filter(|(name, replicas)| {
            get(env, "simpledeployments", NS, name).is_none_or(|o| {
                status(&o)
                    != json!({"observedGeneration": o["metadata"]["generation"],
                              "readyReplicas": replicas,
                              "conditions": [{"type": "Ready", "status": "True"}]})
            })
        });
        services
            .map(|(name, _)| name)
            .chain(deployments.map(|(name, _)| name))
            .cloned()
            .collect()
    }
}

/// The `i`-th name (wrapping) among `names`, spread by a stride.
fn pick<'a>(names: impl Iterator<Item = &'a String>, i: usize) -> Option<String> {
    let names: Vec<&String> = names.collect();
    (!names.is_empty()).then(|| names[(i * 7) % names.len()].clone())
}

fn simple_deployment(name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "SimpleDeployment",
           "metadata": {"name": name, "namespace": NS},
           "spec": {"image": "busybox", "replicas": replicas}})
}

/// Writes a changed spec over whatever is current: the controllers write
/// only statuses, which a write of the main resource leaves alone.
fn update_spec(env: &TestEnv, mut obj: Value) {
    obj["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    env.update_object(obj).unwrap();
}

/// Plays the kubelet: pods not yet running become Running and Ready.
fn run_new_pods(env: &TestEnv) {
    for mut pod in env.list_objects("", "v1", "pods", Some(NS)) {
        if pod["status"]["phase"] != "Running" {
            pod["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
            // The pod may have just been deleted with its SimpleDeployment.
            let _ = env.update_status(pod);
        }
    }
}

/// The pod named in a User-Agent, `controller/<version> (<pod>)`.
fn pod_of(user_agent: &str) -> &str {
    user_agent
        .rsplit_once('(')
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .unwrap_or(user_agent)
}

/// A status write that landed, and the replicas that sent it.
#[derive(Debug)]
struct Landed {
    rv: u64,
    at: Instant,
    resource: String,
    name: String,
    /// Usually one; more when replicas sent the same status from the same
    /// version, and the server's answer does not say whose landed.
    writers: BTreeSet<String>,
}

/// Whether `cur` differs from `prev` in its status only.
fn status_only_change(prev: &Value, cur: &Value) -> bool {
    let same = |pointer: &str| prev.pointer(pointer) == cur.pointer(pointer);
    same("/spec")
        && same("/metadata/generation")
        && same("/metadata/labels")
        && same("/metadata/annotations")
        && same("/metadata/deletionTimestamp")
        && !same("/status")
}

/// A write's resource, object name and the version it was based on.
type Based<'a> = (&'a str, &'a str, u64);

/// Each status change of the controllers' kinds, with who wrote it, and the
/// status changes no request accounts for.
fn landed_status_writes(
    seen: &[Seen],
    actions: &[Action],
    controlled: &[Controlled],
) -> (Vec<Landed>, Vec<String>) {
    let resources: BTreeSet<&str> = controlled.iter().map(|c| c.resource.plural.as_str()).collect();
    let mut requests: HashMap<Based<'_>, Vec<(String, Value)>> = HashMap::new();
    for a in actions {
        if a.verb == "update" && a.subresource == "status" && resources.contains(a.resource.as_str()) {
            let body = a.body_json().unwrap();
            let base = body["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            requests
                .entry((a.resource.as_str(), a.name.as_str(), base))
                .or_default()
                .push((pod_of(&a.user_agent).to_owned(), body["status"].clone()));
        }
    }
    let mut last: HashMap<(&str, &str), &Seen> = HashMap::new();
    let (mut landed, mut unaccounted) = (Vec::new(), Vec::new());
    for s in seen.iter().filter(|s| resources.contains(s.resource.as_str())) {
        let prev = last.insert((s.resource.as_str(), s.name()), s);
        let Some(prev) = prev.filter(|p| s.kind == "MODIFIED" && status_only_change(&p.object, &s.object))
        else {
            continue;
        };
        let candidates = requests
            .get(&(s.resource.as_str(), s.name(), prev.rv))
            .map(Vec::as_slice)
            .unwrap_or_default();
        let matching: BTreeSet<String> = candidates
            .iter()
            .filter(|(_, body)| *body == s.object["status"])
            .map(|(writer, _)| writer.clone())
            .collect();
        let writers = if matching.is_empty() {
            candidates.iter().map(|(writer, _)| writer.clone()).collect()
        } else {
            matching
        };
        if writers.is_empty() {
            unaccounted.push(format!("{} {} at revision {}", s.resource, s.name(), s.rv));
            continue;
        }
        landed.push(Landed {
            rv: s.rv,
            at: s.at,
            resource: s.resource.clone(),
            name: s.name().to_owned(),
            writers,
        });
    }
    (landed, unaccounted)
}

/// Each bucket lease's holders in revision order: (revision, holder, seen at).
struct LeaseHistory(BTreeMap<String, Vec<(u64, String, Instant)>>);

impl LeaseHistory {
    fn new(seen: &[Seen]) -> LeaseHistory {
        let mut history: BTreeMap<String, Vec<(u64, String, Instant)>> = BTreeMap::new();
        for s in seen.iter().filter(|s| s.resource == "leases") {
            let holder = s.object["spec"]["holderIdentity"].as_str().unwrap_or_default();
            history
                .entry(s.name().to_owned())
                .or_default()
                .push((s.rv, holder.to_owned(), s.at));
        }
        LeaseHistory(history)
    }

    /// How many times a lease changed holder.
    fn changes(&self) -> usize {
        self.0
            .values()
            .map(|h| h.windows(2).filter(|w| w[0].1 != w[1].1).count())
            .sum()
    }

    /// Who held `lease` when revision `rv` was written.
    fn holder_at(&self, lease: &str, rv: u64) -> &str {
        self.0
            .get(lease)
            .and_then(|h| h.iter().rev().find(|(at, _, _)| *at < rv))
            .map_or("", |(_, holder, _)| holder.as_str())
    }

    /// The last change before `rv` that ended `identity`'s hold on `lease`.
    fn lost_before(&self, lease: &str, identity: &str, rv: u64) -> Option<(u64, &str, Instant)> {
        let history = self.0.get(lease)?;
        history
            .windows(2)
            .filter(|w| w[0].1 == identity && w[1].1 != identity && w[1].0 < rv)
            .map(|w| (w[1].0, w[1].1.as_str(), w[1].2))
            .next_back()
    }
}

/// A status written while its writer did not hold the key's bucket lease.
fn outside_lease(
    landed: &[Landed],
    leases: &LeaseHistory,
    controlled: &[Controlled],
    identities: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut outside = Vec::new();
    for write in landed {
        let c = controlled
            .iter()
            .find(|c| c.resource.plural == write.resource)
            .unwrap();
        let lease = c.bucket_of(&write.name).name();
        let holder = leases.holder_at(lease, write.rv);
        for writer in &write.writers {
            let identity = &identities[writer];
            if holder == identity {
                continue;
            }
            let lost = match leases.lost_before(lease, identity, write.rv) {
                Some((rv, next, at)) => format!(
                    "{} revisions ({:?} as the test saw them) after {lease} went to {next:?} at revision {rv}",
                    write.rv - rv,
                    write.at.saturating_duration_since(at)
                ),
                None => format!("{writer} never held {lease} before"),
            };
            outside.push(format!(
                "{} {} written by {writer} at revision {} while {lease} was held by {holder:?}: {lost}",
                write.resource, write.name, write.rv
            ));
        }
    }
    outside
}

/// Pods created for each SimpleDeployment, by its name.
fn pods_created(seen: &[Seen]) -> BTreeMap<String, usize> {
    let owners: HashMap<&str, &str> = seen
        .iter()
        .filter(|s| s.resource == "simpledeployments" && s.kind == "ADDED")
        .map(|s| (s.object["metadata"]["uid"].as_str().unwrap_or_default(), s.name()))
        .collect();
    let mut created: BTreeMap<String, usize> = BTreeMap::new();
    for s in seen.iter().filter(|s| s.resource == "pods" && s.kind == "ADDED") {
        let owner = s.object["metadata"]["ownerReferences"]
            .as_array()
            .and_then(|refs| refs.iter().find(|r| r["controller"] == true))
            .and_then(|r| owners.get(r["uid"].as_str()?))
            .unwrap_or_else(|| panic!("pod {} has no SimpleDeployment of the churn", s.name()));
        *created.entry((*owner).to_owned()).or_default() += 1;
    }
    created
}

/// SimpleDeployments that got more pods than they ever asked for (still
/// there: other than exactly their replicas).
fn pods_created_twice(created: &BTreeMap<String, usize>, churn: &Churn) -> Vec<String> {
    let mut wrong = Vec::new();
    for (name, most) in &churn.most_replicas {
        let n = created.get(name).copied().unwrap_or(0);
        let most = usize::try_from(*most).unwrap();
        let remaining = churn.replicas.contains_key(name);
        if n > most || (remaining && n != most) {
            wrong.push(format!(
                "{name}: {n} pods created for at most {most} replicas{}",
                if remaining { "" } else { " (deleted since)" }
            ));
        }
    }
    wrong
}

/// Pods that landed while no replica that asked for pods of their
/// SimpleDeployment held its bucket, and pod create requests per replica.
fn pods_outside_lease(
    seen: &[Seen],
    actions: &[Action],
    leases: &LeaseHistory,
    deployments: &Controlled,
    identities: &BTreeMap<String, String>,
) -> (Vec<String>, BTreeMap<String, usize>) {
    let owner_uid = |pod: &Value| -> Option<String> {
        let refs = pod["metadata"]["ownerReferences"].as_array()?;
        let owner = refs.iter().find(|r| r["controller"] == true)?;
        Some(owner["uid"].as_str()?.to_owned())
    };
    let mut creators: HashMap<String, BTreeSet<String>> = HashMap::new();
    let mut requests: BTreeMap<String, usize> = BTreeMap::new();
    for a in actions
        .iter()
        .filter(|a| a.verb == "create" && a.resource == "pods")
    {
        let writer = pod_of(&a.user_agent).to_owned();
        if let Some(uid) = a.body_json().as_ref().and_then(owner_uid) {
            creators.entry(uid).or_default().insert(writer.clone());
        }
        *requests.entry(writer).or_default() += 1;
    }
    let names: HashMap<&str, &str> = seen
        .iter()
        .filter(|s| s.resource == deployments.resource.plural && s.kind == "ADDED")
        .map(|s| (s.object["metadata"]["uid"].as_str().unwrap_or_default(), s.name()))
        .collect();
    let mut outside = Vec::new();
    for pod in seen.iter().filter(|s| s.resource == "pods" && s.kind == "ADDED") {
        let uid = owner_uid(&pod.object).unwrap_or_default();
        let owner = names[uid.as_str()];
        let lease = deployments.bucket_of(owner).name();
        let holder = leases.holder_at(lease, pod.rv);
        let askers = creators.get(&uid).cloned().unwrap_or_default();
        if !askers.iter().any(|asker| identities[asker] == holder) {
            outside.push(format!(
                "pod {} of {owner} landed at revision {} while {lease} was held by {holder:?}; \
                 pods of {owner} were asked for by {askers:?}",
                pod.name(),
                pod.rv
            ));
        }
    }
    (outside, requests)
}

/// "pod: N (queue/NN=writes …)" for each replica: its status writes per bucket.
fn writes_per_replica_and_bucket(landed: &[Landed], controlled: &[Controlled]) -> BTreeMap<String, String> {
    let mut per: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for write in landed {
        let c = controlled
            .iter()
            .find(|c| c.resource.plural == write.resource)
            .unwrap();
        let bucket = c.bucket_of(&write.name).name();
        // `<component>.<queue>.NN-of-MM`: the controller's name and NN say it.
        let ordinal = bucket.rsplit('.').next().unwrap_or(bucket);
        let short = format!("{}/{}", c.name, ordinal.split("-of-").next().unwrap_or(ordinal));
        for writer in &write.writers {
            *per.entry(writer.clone())
                .or_default()
                .entry(short.clone())
                .or_default() += 1;
        }
    }
    per.into_iter()
        .map(|(pod, buckets)| {
            let total: usize = buckets.values().sum();
            let list: Vec<String> = buckets.iter().map(|(b, n)| format!("{b}={n}")).collect();
            (pod, format!("{total} ({})", list.join(" ")))
        })
        .collect()
}

/// What the API server's history says about a run.
struct Findings {
    /// Status writes that landed, with their writers.
    landed: Vec<Landed>,
    /// Status writes that landed outside their writer's lease.
    status_outside: Vec<String>,
    /// Pods that landed outside every asker's lease.
    pods_outside: Vec<String>,
    /// Pods created for each SimpleDeployment.
    pods_created: BTreeMap<String, usize>,
    /// SimpleDeployments that got a pod more than they asked for.
    pods_twice: Vec<String>,
    /// Pod create requests per replica.
    pod_requests: BTreeMap<String, usize>,
    /// Times a bucket lease changed holder (released or taken).
    lease_changes: usize,
}

impl Findings {
    fn new(
        env: &TestEnv,
        seen: &[Seen],
        controlled: &[Controlled],
        identities: &BTreeMap<String, String>,
        churn: &Churn,
    ) -> Findings {
        let actions = env.actions();
        assert_eq!(env.dropped_actions(), 0, "the action log kept every request");
        let (landed, unaccounted) = landed_status_writes(seen, &actions, controlled);
        assert!(
            unaccounted.is_empty(),
            "status changes no request accounts for: {unaccounted:#?}"
        );
        let leases = LeaseHistory::new(seen);
        let deployments = controlled
            .iter()
            .find(|c| c.resource.plural == "simpledeployments")
            .unwrap();
        let (pods_outside, pod_requests) =
            pods_outside_lease(seen, &actions, &leases, deployments, identities);
        let pods_created = pods_created(seen);
        Findings {
            status_outside: outside_lease(&landed, &leases, controlled, identities),
            pods_twice: pods_created_twice(&pods_created, churn),
            lease_changes: leases.changes(),
            landed,
            pods_outside,
            pods_created,
            pod_requests,
        }
    }
}

/// Three replicas, each stopped and started again in turn (by SIGTERM or
/// SIGKILL, so both the hand-off and lease expiry are exercised), sharing
/// 10 buckets per controller while AddressableServices and
/// SimpleDeployments are created, changed and deleted without pause. In
/// the end every remaining object has the status its spec asks for, no
/// pod was created twice, and every status write and pod landed while its
/// writer held the lease of the key's bucket, by the API server's revision
/// order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn churn_replicas_restarted_in_turn_converge_and_write_only_what_they_lead() {
    let dir = tempdir("churn");
    let (env, _server, kubeconfig) = cluster(&dir).await;
    let data = election();
    let mut election = get(&env, "configmaps", NS, "config-leader-election").unwrap();
    election["data"] = json!(data);
    env.update_object(election).unwrap();
    let config = Config::from_map(&data).unwrap().component_config("controller");
    let controlled = controlled(&env, &config);
    for svc in SERVICES {
        env.create_object(service(svc)).unwrap();
    }
    let mut watched: Vec<ApiResource> = controlled.iter().map(|c| c.resource.clone()).collect();
    watched.extend([lease_resource(), pod_resource()]);
    let recorder = Recorder::start(&env, watched);
    let mut cluster = Replicas::start(&env, &kubeconfig, &dir, &controlled).await;

    let (stop_churn, steps) = (CancellationToken::new(), Arc::new(AtomicUsize::new(0)));
    let churn = tokio::spawn(run_churn(env.clone(), stop_churn.clone(), steps.clone()));
    // Every replica leads keys with objects in them before the first goes.
    wait_for("the churn to get going", Duration::from_secs(30), || {
        steps.load(Ordering::Relaxed) >= 30
    })
    .await;
    // Each replica in turn, by both ways of stopping.
    let rounds = [(0, Stop::Term), (1, Stop::Kill), (2, Stop::Term), (0, Stop::Kill)];
    for (slot, how) in rounds {
        cluster.restart(slot, how).await;
    }
    stop_churn.cancel();
    let churn = churn.await.unwrap();
    let churn_stopped = Instant::now();
    wait_converged(&env, &churn).await;
    let (since_restart, since_churn) = (cluster.last_restart.elapsed(), churn_stopped.elapsed());
    let identities = cluster.stop();
    let seen = recorder.finish(&env).await;
    let found = Findings::new(&env, &seen, &controlled, &identities, &churn);

    eprintln!(
        "churn: 3 replicas, {} restarts ({:?}), {} buckets per controller, {} lease changes; {} objects \
         created, {} changed, {} deleted; {} remaining converged {since_restart:?} after the last restart \
         ({since_churn:?} after the churn stopped); {} pods created, {} SimpleDeployments with a pod created \
         twice, {} pods outside the lease; {} status writes landed ({} with more than one possible writer), \
         {} outside the writer's lease",
        rounds.len(),
        rounds.map(|(_, how)| how),
        config.buckets,
        found.lease_changes,
        churn.created,
        churn.changed,
        churn.deleted,
        churn.remaining(),
        found.pods_created.values().sum::<usize>(),
        found.pods_twice.len(),
        found.pods_outside.len(),
        found.landed.len(),
        found.landed.iter().filter(|w| w.writers.len() > 1).count(),
        found.status_outside.len(),
    );
    let writes = writes_per_replica_and_bucket(&found.landed, &controlled);
    for pod in identities.keys() {
        eprintln!(
            "churn: {pod}: {} pod creates; status writes {}",
            found.pod_requests.get(pod).copied().unwrap_or(0),
            writes.get(pod).map_or("0", String::as_str)
        );
    }
    assert!(
        found.pods_twice.is_empty(),
        "pods created twice: {:#?}",
        found.pods_twice
    );
    assert!(
        found.status_outside.is_empty(),
        "status written outside the writer's lease: {:#?}",
        found.status_outside
    );
    assert!(
        found.pods_outside.is_empty(),
        "pods created outside the creator's lease: {:#?}",
        found.pods_outside
    );
    assert!(env.denied_requests().is_empty(), "{:?}", env.denied_requests());
}

/// The running replicas, and the identity of every one that ran.
struct Replicas<'a> {
    env: &'a TestEnv,
    kubeconfig: &'a Path,
    dir: &'a Path,
    controlled: &'a [Controlled],
    running: Vec<Replica>,
    identities: BTreeMap<String, String>,
    restarts: usize,
    last_restart: Instant,
}

impl<'a> Replicas<'a> {
    /// Starts replicas a, b and c and waits for them to share the buckets.
    async fn start(
        env: &'a TestEnv,
        kubeconfig: &'a Path,
        dir: &'a Path,
        controlled: &'a [Controlled],
    ) -> Replicas<'a> {
        let spawned: Vec<_> = ["a", "b", "c"]
            .into_iter()
            .map(|r| Replica::spawn(kubeconfig, dir, format!("replica-{r}-0")))
            .collect();
        let mut running = Vec::new();
        for s in spawned {
            running.push(Replica::identified(s).await);
        }
        let identities = running
            .iter()
            .map(|r| (r.pod.clone(), r.identity.clone()))
            .collect();
        wait_evenly_led(env, controlled, &running).await;
        Replicas {
            env,
            kubeconfig,
            dir,
            controlled,
            running,
            identities,
            restarts: 0,
            last_restart: Instant::now(),
        }
    }

    /// Stops the replica in `slot`, waits for the others to lead its
    /// buckets, starts it again as a new pod, and waits for the buckets to be
    /// shared by all three again.
    async fn restart(&mut self, slot: usize, how: Stop) {
        self.restarts += 1;
        let leaving = self.running.remove(slot);
        // `replica-<letter>-<restart>`: a Deployment's new pod has a new name.
        let letter = leaving.pod.split('-').nth(1).unwrap().to_owned();
        how.apply(leaving);
        wait_evenly_led(self.env, self.controlled, &self.running).await;
        let pod = format!("replica-{letter}-{}", self.restarts);
        let joined = Replica::identified(Replica::spawn(self.kubeconfig, self.dir, pod)).await;
        self.last_restart = Instant::now();
        self.identities
            .insert(joined.pod.clone(), joined.identity.clone());
        self.running.insert(slot, joined);
        wait_evenly_led(self.env, self.controlled, &self.running).await;
    }

    /// Stops every replica with SIGTERM; the identity of each pod that ran.
    fn stop(self) -> BTreeMap<String, String> {
        for replica in self.running {
            Stop::Term.apply(replica);
        }
        self.identities
    }
}

/// Waits for every remaining object to have the status its spec asks for,
/// running the pods meanwhile.
async fn wait_converged(env: &TestEnv, churn: &Churn) {
    let started = Instant::now();
    loop {
        run_new_pods(env);
        let unconverged = churn.unconverged(env);
        if unconverged.is_empty() {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "not converged 60 s after the churn stopped: {unconverged:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Creates, changes and deletes objects every 40 ms, and runs their pods,
/// until `stop`; `steps` counts the steps taken.
async fn run_churn(env: TestEnv, stop: CancellationToken, steps: Arc<AtomicUsize>) -> Churn {
    let mut churn = Churn::default();
    while !stop.is_cancelled() {
        churn.step(&env, steps.fetch_add(1, Ordering::Relaxed));
        run_new_pods(&env);
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    churn
}
