//! The controller at scale: how time, CPU, memory and API requests grow with
//! the number of objects.
//!
//! ```sh
//! cargo run --release -p controller --example scale -- --objects 10000
//! ```
//!
//! testenv's API server, serving over loopback HTTP, holds N AddressableServices
//! with the N Services they name and N/100 SimpleDeployments of 10 replicas,
//! spread over namespaces of `--per-namespace` AddressableServices; a stand-in
//! kubelet in this process makes every pod Running and Ready as soon as it
//! appears. The controller runs in a process of its own (this example started
//! again as `kinject_sharedmain::main` with `reconcilers::controllers()`, as the
//! `controller` binary does), so its CPU time (`/proc/<pid>/stat`) and peak
//! RSS (`VmHWM` in `/proc/<pid>/status`) are the controller's alone. Three
//! phases:
//!
//! 1. **converge**: the controller starts on the untouched objects; measured
//!    until every AddressableService and SimpleDeployment is Ready (and every
//!    pod created);
//! 2. **restart**: SIGTERM, and a new controller process on the converged
//!    objects; measured until it has reconciled every key and is idle;
//! 3. **resync**: the same process's first periodic resync (`--resync-period`,
//!    set long enough to come after the restart's pass); measured until every
//!    key has been reconciled again.
//!
//! For each it reports the time, the controller's CPU, its peak RSS, and the
//! API requests it made by verb and resource, per object. Then the bytes
//! an informer cache holds per object of each kind: the growth of the
//! resident set of a process (this example again) that syncs only that kind's
//! informer, as the controller does, with the same client and settings;
//! allocator overhead included, unlike `kinject-runtime`'s `cache-memory`
//! example, which counts requested heap bytes. Kinds with fewer than 1,000
//! objects are left out of that figure: a few pages of heap would dominate it.
//!
//! The client-side rate limit is lifted (`--kube-api-qps`, default 100,000 per
//! second), as the point is what the controller itself costs; the product's
//! default of 5 requests per second per controller would make every phase a
//! measure of that limit. The watch history is 4 events per cached object (at
//! least 10,000), so no watch falls out of it while the controller writes N
//! statuses; a kube-apiserver keeps etcd's history for 5 minutes.

// The controller binary's allocator (cmd/controller/src/main.rs): this
// process also runs as the controller, and measures it as it ships.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use apis::v1alpha1::{AddressableService, SimpleDeployment};
use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use kinject_runtime::apis::Object;
use kinject_runtime::go_duration;
use kinject_runtime::informer::CacheFormat;
use kinject_runtime::injection::Context;
use kinject_testenv::{Action, TestEnv};
use kube::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use serde_json::{Value, json};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

// What the controller benchmarks share: the process figures and `config/`.
#[path = "common/mod.rs"]
mod common;
use common::{ProcStats, apply_config, free_port};

/// Which part this process plays; unset for the benchmark itself.
const ROLE: &str = "KINJECT_SCALE_ROLE";
/// Where the cache role finds its API server, and which kind it caches.
const CACHE_KUBECONFIG: &str = "KINJECT_SCALE_KUBECONFIG";
const CACHE_KIND: &str = "KINJECT_SCALE_KIND";

const SYSTEM_NAMESPACE: &str = "knative-samples";
/// One SimpleDeployment per this many AddressableServices.
const OBJECTS_PER_DEPLOYMENT: usize = 100;
const REPLICAS: usize = 10;
/// The controller's requests carry this User-Agent prefix; the benchmark's
/// own watches (kubelet, readiness) do not.
const CONTROLLER_AGENT: &str = "controller/";
/// Kinds with fewer cached objects get no bytes-per-object figure.
const MIN_OBJECTS_FOR_CACHE_FIGURE: usize = 1000;

/// The scale benchmark's settings.
#[derive(Debug, Parser)]
#[command(about = "Time, CPU, memory and requests of the controller with N objects")]
struct Args {
    /// AddressableServices (each with its Service); N/100 SimpleDeployments of
    /// 10 pods come with them.
    #[arg(long, default_value_t = 1000)]
    objects: usize,
    /// AddressableServices per namespace (with their Services, deployments and pods).
    #[arg(long, default_value_t = 1000)]
    per_namespace: usize,
    /// The controller's client-side request rate and burst.
    #[arg(long, default_value_t = 100_000)]
    kube_api_qps: u32,
    /// How long each phase may take before the benchmark gives up, in seconds.
    #[arg(long, default_value_t = 3600)]
    timeout: u64,
    /// Where the kubeconfig and the controllers' logs go (default: a new
    /// directory under the system's temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    match std::env::var(ROLE).as_deref() {
        Ok("controller") => kinject_sharedmain::main("controller", reconcilers::controllers()),
        Ok("cache") => exit_code("cache measurement", cache_role()),
        _ => exit_code("scale benchmark", bench(Args::parse())),
    }
}

fn exit_code(what: &str, result: Result<(), BoxError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{what} failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// How many objects of each kind the benchmark holds.
#[derive(Clone, Copy, Debug)]
struct Counts {
    asvcs: usize,
    services: usize,
    deployments: usize,
    pods: usize,
}

impl Counts {
    fn of(n: usize) -> Counts {
        let deployments = n / OBJECTS_PER_DEPLOYMENT;
        Counts {
            asvcs: n,
            services: n,
            deployments,
            pods: deployments * REPLICAS,
        }
    }

    /// Keys the two controllers reconcile.
    fn keys(&self) -> usize {
        self.asvcs + self.deployments
    }

    /// The keys of a reconciled kind, as the reconcile metrics name it.
    fn keys_of(&self, kind: &str) -> Option<usize> {
        match kind {
            k if k.contains("AddressableService") || k.contains("addressableservice") => Some(self.asvcs),
            k if k.contains("SimpleDeployment") || k.contains("simpledeployment") => Some(self.deployments),
            _ => None,
        }
    }

    /// Objects the controller's informers cache.
    fn cached(&self) -> usize {
        self.asvcs + self.services + self.deployments + self.pods
    }

    /// The objects a converged world has of `resource`, to divide its
    /// requests by; `None` for resources the benchmark does not create.
    fn of_resource(&self, resource: &str) -> Option<usize> {
        match resource {
            "addressableservices" => Some(self.asvcs),
            "services" => Some(self.services),
            "simpledeployments" => Some(self.deployments),
            "pods" => Some(self.pods),
            _ => None,
        }
    }
}

fn namespace_of(i: usize, per_namespace: usize) -> String {
    format!("scale-{:04}", i / per_namespace)
}

fn bench(args: Args) -> Result<(), BoxError> {
    if args.objects == 0 || args.per_namespace == 0 {
        return Err("--objects and --per-namespace must be at least 1".into());
    }
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("kinject-scale-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(args, dir))
}

/// The API server with `config/` applied and the benchmark's objects stored.
fn world(args: &Args, counts: Counts) -> Result<TestEnv, BoxError> {
    let env = TestEnv::builder()
        .watch_history((4 * counts.cached()).max(10_000))
        // Each phase's requests are counted from the whole log.
        .action_log_bytes(usize::MAX)
        .build();
    apply_config(&env)?;
    let namespaces = args.objects.div_ceil(args.per_namespace);
    for ns in 0..namespaces {
        env.create_object(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace_of(ns * args.per_namespace, args.per_namespace)}}))?;
    }
    for i in 0..counts.asvcs {
        let ns = namespace_of(i, args.per_namespace);
        env.create_object(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": format!("svc-{i:06}"), "namespace": ns},
            "spec": {"selector": {"app": format!("app-{i:06}")}, "ports": [{"port": 80, "targetPort": 8080}]}}))?;
        env.create_object(
            json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
            "metadata": {"name": format!("asvc-{i:06}"), "namespace": ns},
            "spec": {"serviceName": format!("svc-{i:06}")}}),
        )?;
    }
    for j in 0..counts.deployments {
        let ns = namespace_of(j * OBJECTS_PER_DEPLOYMENT, args.per_namespace);
        env.create_object(
            json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "SimpleDeployment",
            "metadata": {"name": format!("sd-{j:04}"), "namespace": ns},
            "spec": {"image": "registry.example/app:v1", "replicas": REPLICAS}}),
        )?;
    }
    Ok(env)
}

/// Stands in for the kubelet: every pod becomes Running and Ready as soon as
/// it is seen, with the status a kubelet writes.
async fn kubelet(env: TestEnv) {
    let pods: Api<Pod> = Api::all(env.client());
    let mut started = 0_u32;
    let mut events = Box::pin(
        watcher(pods, watcher::Config::default())
            .default_backoff()
            .applied_objects(),
    );
    while let Some(event) = events.next().await {
        let Ok(pod) = event else { continue };
        let status = pod.status.as_ref();
        if pod.metadata.deletion_timestamp.is_some()
            || status.and_then(|s| s.phase.as_deref()) == Some("Running")
        {
            continue;
        }
        let Ok(mut pod) = serde_json::to_value(&pod) else {
            continue;
        };
        started += 1;
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let condition = |kind: &str| json!({"type": kind, "status": "True", "lastTransitionTime": now});
        let containers: Vec<Value> = pod
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                json!({"name": c["name"], "image": c["image"], "imageID": format!("{}@sha256:0f3a", c["image"].as_str().unwrap_or_default()),
                       "containerID": format!("containerd://{started:064x}"), "ready": true, "started": true,
                       "restartCount": 0, "state": {"running": {"startedAt": now}}})
            })
            .collect();
        let ip = format!(
            "10.{}.{}.{}",
            (started >> 16) & 0xff,
            (started >> 8) & 0xff,
            started & 0xff
        );
        pod["status"] = json!({
            "phase": "Running",
            "conditions": [condition("Initialized"), condition("Ready"), condition("ContainersReady"), condition("PodScheduled")],
            "hostIP": "192.168.0.10", "hostIPs": [{"ip": "192.168.0.10"}],
            "podIP": ip, "podIPs": [{"ip": ip}],
            "startTime": now, "qosClass": "BestEffort",
            "containerStatuses": containers,
        });
        // The pod may have changed since this event; its next event retries.
        let _ = env.update_status(pod);
    }
}

/// Counts the Ready objects of kind `K` as a watch reports them.
fn count_ready<K>(env: &TestEnv, ready: impl Fn(&K) -> bool + Send + 'static) -> Arc<AtomicUsize>
where
    K: Object,
{
    let count = Arc::new(AtomicUsize::new(0));
    let api: Api<K> = Api::all(env.client());
    let out = count.clone();
    tokio::spawn(async move {
        let mut keys: HashSet<(String, String)> = HashSet::new();
        let mut events = Box::pin(watcher(api, watcher::Config::default()).default_backoff());
        while let Some(event) = events.next().await {
            let key = |o: &K| {
                let meta = o.meta();
                (
                    meta.namespace.clone().unwrap_or_default(),
                    meta.name.clone().unwrap_or_default(),
                )
            };
            match event {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                    if ready(&o) {
                        keys.insert(key(&o));
                    } else {
                        keys.remove(&key(&o));
                    }
                }
                Ok(watcher::Event::Delete(o)) => {
                    keys.remove(&key(&o));
                }
                Ok(watcher::Event::Init) => keys.clear(),
                Ok(watcher::Event::InitDone) | Err(_) => {}
            }
            out.store(keys.len(), Ordering::Relaxed);
        }
    });
    count
}

/// A controller process.
struct Controller {
    child: Child,
    metrics: SocketAddr,
    started: Instant,
    log: PathBuf,
}

impl Controller {
    fn spawn(
        dir: &Path,
        kubeconfig: &Path,
        name: &str,
        args: &Args,
        resync: Duration,
    ) -> Result<Self, BoxError> {
        let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let log = dir.join(format!("{name}.log"));
        let child = Command::new(std::env::current_exe()?)
            .env(ROLE, "controller")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--kube-api-qps")
            .arg(args.kube_api_qps.to_string())
            .arg("--kube-api-burst")
            .arg(args.kube_api_qps.to_string())
            .arg("--bind-address")
            .arg("127.0.0.1")
            .arg("--resync-period")
            .arg(go_duration(resync))
            .env("SYSTEM_NAMESPACE", SYSTEM_NAMESPACE)
            .env("POD_NAME", name)
            // As config/controller.yaml sets it.
            .env("MIMALLOC_ARENA_EAGER_COMMIT", "0")
            .env("METRICS_PROMETHEUS_PORT", metrics.port().to_string())
            .env("PROBES_PORT", free_port()?.to_string())
            .stdout(std::fs::File::create(&log)?)
            .stderr(std::fs::File::create(dir.join(format!("{name}.stderr")))?)
            .spawn()
            .map_err(|e| format!("starting the controller process: {e}"))?;
        Ok(Controller {
            child,
            metrics,
            started: Instant::now(),
            log,
        })
    }

    fn stats(&mut self) -> Result<ProcStats, BoxError> {
        if let Some(status) = self.child.try_wait()? {
            return Err(format!(
                "the controller exited ({status}); see {} and its .stderr",
                self.log.display()
            )
            .into());
        }
        ProcStats::of(self.child.id())
    }

    /// SIGTERM; the exit status.
    fn terminate(mut self) -> Result<std::process::ExitStatus, BoxError> {
        let sent = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()?;
        if !sent.success() {
            return Err(format!("kill -TERM {} failed", self.child.id()).into());
        }
        let asked = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if asked.elapsed() > Duration::from_secs(60) {
                let _ = self.child.kill();
                return Err("the controller did not exit within 60 s of SIGTERM".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The log lines written so far.
    fn log_lines(&self) -> usize {
        std::fs::read(&self.log).map_or(0, |bytes| bytes.iter().filter(|&&b| b == b'\n').count())
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// What the controller's `/metrics` says about its work.
#[derive(Clone, Debug, Default)]
struct Work {
    /// Reconciles by kind (all results).
    reconciles: BTreeMap<String, u64>,
    /// Keys waiting in the work queues.
    depth: f64,
    /// Seconds of reconciles in progress.
    unfinished: f64,
}

impl Work {
    fn total(&self) -> u64 {
        self.reconciles.values().sum()
    }

    fn idle(&self) -> bool {
        self.depth == 0.0 && self.unfinished == 0.0
    }
}

/// Scrapes the controller's `/metrics` (plain HTTP/1.1, as Prometheus does).
fn scrape(addr: SocketAddr) -> Result<Work, BoxError> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or("the metrics response has no body")?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!(
            "the metrics endpoint answered {}",
            head.lines().next().unwrap_or_default()
        )
        .into());
    }
    let mut work = Work::default();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        if let Some(labels) = series.strip_prefix("reconcile_count_total{") {
            let kind = labels
                .split(',')
                .find_map(|l| l.strip_prefix("kind=\""))
                .map(|k| k.trim_end_matches(['"', '}']).to_owned())
                .unwrap_or_default();
            *work.reconciles.entry(kind).or_default() += value as u64;
        } else if series.starts_with("workqueue_depth{") {
            work.depth += value;
        } else if series.starts_with("workqueue_unfinished_work") {
            work.unfinished += value;
        }
    }
    Ok(work)
}

/// Waits until the controller has reconciled at least `reconciles` times in
/// all and its queues have stayed idle for half a second; its last scrape.
async fn wait_idle(controller: &Controller, reconciles: u64, deadline: Instant) -> Result<Work, BoxError> {
    let mut idle_since: Option<(Instant, u64)> = None;
    loop {
        if Instant::now() > deadline {
            return Err(format!(
                "timed out waiting for {reconciles} reconciles and idle queues; see {}",
                controller.log.display()
            )
            .into());
        }
        let addr = controller.metrics;
        // The endpoint is not up until the process has read its configuration.
        if let Ok(Ok(work)) = tokio::task::spawn_blocking(move || scrape(addr)).await {
            let total = work.total();
            if total >= reconciles && work.idle() {
                match idle_since {
                    Some((since, seen)) if seen == total && since.elapsed() >= Duration::from_millis(500) => {
                        return Ok(work);
                    }
                    Some((_, seen)) if seen == total => {}
                    _ => idle_since = Some((Instant::now(), total)),
                }
            } else {
                idle_since = None;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The controller's requests, by verb and resource (`resource/subresource`).
#[derive(Debug, Default)]
struct Requests {
    by: BTreeMap<(String, String), u64>,
    /// The `limit` of each LIST request, and how many had it.
    list_limits: BTreeMap<String, u64>,
}

impl Requests {
    fn of(actions: &[Action]) -> Requests {
        let mut requests = Requests::default();
        for a in actions
            .iter()
            .filter(|a| a.user_agent.starts_with(CONTROLLER_AGENT))
        {
            let resource = if a.subresource.is_empty() {
                a.resource.clone()
            } else {
                format!("{}/{}", a.resource, a.subresource)
            };
            *requests.by.entry((a.verb.clone(), resource)).or_default() += 1;
            if a.verb == "list" {
                let limit = a
                    .query
                    .iter()
                    .find(|(k, _)| k == "limit")
                    .map_or_else(|| "none".to_owned(), |(_, v)| v.clone());
                *requests.list_limits.entry(limit).or_default() += 1;
            }
        }
        requests
    }

    /// Writes to the objects (not to leases, which the leader election renews
    /// whatever the objects do).
    fn object_writes(&self) -> u64 {
        self.by
            .iter()
            .filter(|((verb, resource), _)| {
                ["create", "update", "patch", "delete", "deletecollection"].contains(&verb.as_str())
                    && resource != "leases"
            })
            .map(|(_, n)| n)
            .sum()
    }

    fn print(&self, counts: Counts) {
        println!("    requests by verb and resource (per object of that resource):");
        for ((verb, resource), n) in &self.by {
            let base = resource.split('/').next().unwrap_or_default();
            let per = counts
                .of_resource(base)
                .filter(|&objects| objects > 0)
                .map(|objects| format!(" ({:.3} per object)", *n as f64 / objects as f64))
                .unwrap_or_default();
            println!("      {verb:<7} {resource:<28} {n:>9}{per}");
        }
        if !self.list_limits.is_empty() {
            let limits: Vec<String> = self
                .list_limits
                .iter()
                .map(|(limit, n)| format!("{n} with limit={limit}"))
                .collect();
            println!("    LIST pages: {}", limits.join(", "));
        }
    }
}

/// One phase's figures.
struct Phase {
    took: Duration,
    cpu: Duration,
    peak_rss: u64,
    /// File-backed resident bytes at the phase's end.
    file_rss: u64,
    requests: Requests,
    reconciles: BTreeMap<String, u64>,
    log_lines: usize,
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

impl Phase {
    fn print(&self, name: &str, counts: Counts) {
        println!("{name}:");
        println!("    time: {:.2} s", self.took.as_secs_f64());
        println!(
            "    controller CPU: {:.2} s ({:.1} µs per object)",
            self.cpu.as_secs_f64(),
            self.cpu.as_secs_f64() * 1e6 / counts.cached() as f64
        );
        println!(
            "    controller peak RSS: {:.1} MiB ({:.0} B per cached object)",
            mib(self.peak_rss),
            self.peak_rss as f64 / counts.cached() as f64
        );
        // What the cache and the work cost is the rest: the binary's code
        // is a fixed cost, larger here (testenv is linked in) than in the
        // controller that ships.
        println!(
            "        of which file-backed (the binary's code) at the end: {:.1} MiB; the rest {:.0} B per cached object",
            mib(self.file_rss),
            self.peak_rss.saturating_sub(self.file_rss) as f64 / counts.cached() as f64
        );
        let writes = self.requests.object_writes();
        let written = counts.asvcs + counts.deployments + counts.pods;
        println!(
            "    object writes: {writes} ({:.3} per written object: {} AddressableServices, {} SimpleDeployments, {} pods)",
            writes as f64 / written as f64,
            counts.asvcs,
            counts.deployments,
            counts.pods
        );
        // Per key of the kind: 1.00 in every phase means no key was
        // reconciled twice (a resync or a restart reconciles each once).
        let reconciles: Vec<String> = self
            .reconciles
            .iter()
            .map(|(kind, n)| match counts.keys_of(kind).filter(|&keys| keys > 0) {
                Some(keys) => format!("{kind} {n} ({:.2} per key)", *n as f64 / keys as f64),
                None => format!("{kind} {n}"),
            })
            .collect();
        println!("    reconciles: {}", reconciles.join(", "));
        println!("    log lines: {}", self.log_lines);
        self.requests.print(counts);
    }
}

fn difference(after: &BTreeMap<String, u64>, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, n)| (k.clone(), n - before.get(k).copied().unwrap_or(0).min(*n)))
        .collect()
}

async fn run(args: Args, dir: PathBuf) -> Result<(), BoxError> {
    let counts = Counts::of(args.objects);
    println!(
        "objects: {} AddressableServices, {} Services, {} SimpleDeployments of {REPLICAS} pods ({} pods), {} per namespace; {} cached objects",
        counts.asvcs,
        counts.services,
        counts.deployments,
        counts.pods,
        args.per_namespace,
        counts.cached()
    );
    let seeding = Instant::now();
    let env = world(&args, counts)?;
    let server = env.serve().await?;
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig)?;
    println!(
        "stored in {:.1} s; API server at {}; logs in {}",
        seeding.elapsed().as_secs_f64(),
        server.url(),
        dir.display()
    );
    tokio::spawn(kubelet(env.clone()));
    let bench = Bench {
        args: &args,
        dir: &dir,
        kubeconfig: &kubeconfig,
        env: &env,
        counts,
    };
    let server_cpu_before = ProcStats::own()?.cpu;
    let (first, converge) = bench.converge().await?;
    let server_cpu = ProcStats::own()?.cpu.saturating_sub(server_cpu_before);
    let pods = env.list_objects("", "v1", "pods", None).len();
    if pods != counts.pods {
        return Err(format!("{pods} pods exist, {} expected", counts.pods).into());
    }
    let exit = first.terminate()?;
    if !exit.success() {
        return Err(format!("the first controller exited with {exit} after SIGTERM").into());
    }
    // A restart pass should take no longer than the converge pass did, and
    // the new process's first resync comes well after it.
    let resync_period = Duration::from_secs((converge.took.as_secs() * 3 / 2).max(15));
    let (mut second, restart, work, stats) = bench.restart(resync_period).await?;
    let resync = bench.resync(&mut second, resync_period, work, &stats).await?;
    let exit = second.terminate()?;
    if !exit.success() {
        return Err(format!("the second controller exited with {exit} after SIGTERM").into());
    }

    println!();
    converge.print(
        "converge (from the controller's start until all are Ready)",
        counts,
    );
    println!(
        "    API server and benchmark process (testenv, kubelet, readiness watches) CPU: {:.2} s",
        server_cpu.as_secs_f64()
    );
    restart.print(
        "restart (a new process until every key is reconciled and the queues are idle)",
        counts,
    );
    resync.print(
        &format!(
            "resync (the periodic resync {} after the restart, until every key is reconciled again)",
            go_duration(resync_period)
        ),
        counts,
    );
    print_cache_figures(&kubeconfig, counts)?;
    server.shutdown().await;
    Ok(())
}

/// What every phase of the benchmark works on.
struct Bench<'a> {
    args: &'a Args,
    dir: &'a Path,
    kubeconfig: &'a Path,
    env: &'a TestEnv,
    counts: Counts,
}

impl Bench<'_> {
    fn deadline(&self) -> Instant {
        Instant::now() + Duration::from_secs(self.args.timeout)
    }

    /// Phase 1: a controller from nothing until every object is Ready and
    /// its queues are idle.
    async fn converge(&self) -> Result<(Controller, Phase), BoxError> {
        let counts = self.counts;
        let ready_asvcs = count_ready(self.env, |a: &AddressableService| {
            a.status.as_ref().is_some_and(|s| s.is_ready())
        });
        let ready_deployments = count_ready(self.env, |d: &SimpleDeployment| {
            d.status
                .as_ref()
                .is_some_and(|s| s.is_ready() && s.ready_replicas == REPLICAS as i32)
        });
        self.env.clear_actions();
        let mut first = Controller::spawn(
            self.dir,
            self.kubeconfig,
            "scale-controller-0",
            self.args,
            Duration::from_secs(10 * 3600),
        )?;
        let limit = self.deadline();
        while ready_asvcs.load(Ordering::Relaxed) < counts.asvcs
            || ready_deployments.load(Ordering::Relaxed) < counts.deployments
        {
            if Instant::now() > limit {
                return Err(format!(
                    "timed out: {} of {} AddressableServices and {} of {} SimpleDeployments Ready; see {}",
                    ready_asvcs.load(Ordering::Relaxed),
                    counts.asvcs,
                    ready_deployments.load(Ordering::Relaxed),
                    counts.deployments,
                    first.log.display()
                )
                .into());
            }
            first.stats()?;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let converge_took = first.started.elapsed();
        let work = wait_idle(&first, counts.keys() as u64, self.deadline()).await?;
        let stats = first.stats()?;
        let phase = Phase {
            took: converge_took,
            cpu: stats.cpu,
            peak_rss: stats.peak_rss,
            file_rss: stats.file_rss,
            requests: Requests::of(&self.env.actions()),
            reconciles: work.reconciles,
            log_lines: first.log_lines(),
        };
        Ok((first, phase))
    }

    /// Phase 2: a new process on the converged objects, resyncing every
    /// `resync_period`, until its start-up pass is done.
    async fn restart(
        &self,
        resync_period: Duration,
    ) -> Result<(Controller, Phase, Work, ProcStats), BoxError> {
        self.env.clear_actions();
        let mut second = Controller::spawn(
            self.dir,
            self.kubeconfig,
            "scale-controller-1",
            self.args,
            resync_period,
        )?;
        let work = wait_idle(&second, self.counts.keys() as u64, self.deadline()).await?;
        let restart_took = second.started.elapsed();
        let stats = second.stats()?;
        if restart_took >= resync_period {
            return Err(format!(
                "the restart pass took {restart_took:.1?}, past the first resync at {resync_period:.1?}; \
                 the resync figures would overlap it"
            )
            .into());
        }
        let phase = Phase {
            took: restart_took,
            cpu: stats.cpu,
            peak_rss: stats.peak_rss,
            file_rss: stats.file_rss,
            requests: Requests::of(&self.env.actions()),
            reconciles: work.reconciles.clone(),
            log_lines: second.log_lines(),
        };
        Ok((second, phase, work, stats))
    }

    /// Phase 3: the periodic resync of the restarted process, from its tick
    /// until every key is reconciled again.
    async fn resync(
        &self,
        second: &mut Controller,
        resync_period: Duration,
        before: Work,
        stats: &ProcStats,
    ) -> Result<Phase, BoxError> {
        self.env.clear_actions();
        let lines_before = second.log_lines();
        let tick = second.started + resync_period;
        tokio::time::sleep_until(tokio::time::Instant::from_std(tick)).await;
        let work = wait_idle(
            second,
            before.total() + self.counts.keys() as u64,
            self.deadline(),
        )
        .await?;
        let resync_took = tick.elapsed();
        let after = second.stats()?;
        Ok(Phase {
            took: resync_took,
            cpu: after.cpu.saturating_sub(stats.cpu),
            peak_rss: after.peak_rss,
            file_rss: after.file_rss,
            requests: Requests::of(&self.env.actions()),
            reconciles: difference(&work.reconciles, &before.reconciles),
            log_lines: second.log_lines() - lines_before,
        })
    }
}

/// Resident bytes per cached object of each kind, each measured by this
/// example run again in the cache role.
fn print_cache_figures(kubeconfig: &Path, counts: Counts) -> Result<(), BoxError> {
    println!("informer cache, resident bytes per cached object:");
    for (kind, objects) in [
        ("addressableservices", counts.asvcs),
        ("services", counts.services),
        ("simpledeployments", counts.deployments),
        ("pods", counts.pods),
    ] {
        if objects < MIN_OBJECTS_FOR_CACHE_FIGURE {
            println!("    {kind:<20} {objects:>7} objects: too few to measure");
            continue;
        }
        let output = Command::new(std::env::current_exe()?)
            .env(ROLE, "cache")
            .env(CACHE_KUBECONFIG, kubeconfig)
            .env(CACHE_KIND, kind)
            .output()?;
        if !output.status.success() {
            return Err(format!(
                "measuring the {kind} cache failed: {}",
                String::from_utf8_lossy(&output.stderr)
            )
            .into());
        }
        let report = String::from_utf8_lossy(&output.stdout);
        let (cached, bytes) = report
            .trim()
            .split_once(' ')
            .and_then(|(n, b)| Some((n.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
            .ok_or_else(|| format!("the {kind} cache measurement printed {report:?}"))?;
        println!(
            "    {kind:<20} {cached:>7} objects: {:.0} B per object",
            bytes as f64 / cached.max(1) as f64
        );
    }
    Ok(())
}

/// The cache role: syncs one kind's informer from the benchmark's API server,
/// with the controller's settings, and prints the objects it holds and the
/// resident bytes it added.
fn cache_role() -> Result<(), BoxError> {
    let kubeconfig = std::env::var(CACHE_KUBECONFIG).map_err(|_| format!("{CACHE_KUBECONFIG} is not set"))?;
    let kind = std::env::var(CACHE_KIND).map_err(|_| format!("{CACHE_KIND} is not set"))?;
    // One thread, so the heap is one arena and its growth is the cache's.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(async move {
            let config = kube::Config::from_custom_kubeconfig(
                kube::config::Kubeconfig::read_from(&kubeconfig)?,
                &kube::config::KubeConfigOptions::default(),
            )
            .await?;
            let client = kube::Client::try_from(config)?;
            match kind.as_str() {
                // Each in the form the reconcilers cache it: Services'
                // metadata alone, pods compact.
                "addressableservices" => {
                    measure_cache::<AddressableService>(client, CacheFormat::Decoded).await
                }
                "services" => measure_cache::<PartialObjectMeta<Service>>(client, CacheFormat::Decoded).await,
                "simpledeployments" => measure_cache::<SimpleDeployment>(client, CacheFormat::Decoded).await,
                "pods" => measure_cache::<Pod>(client, CacheFormat::Json).await,
                other => Err(format!("no cache measurement for {other:?}").into()),
            }
        })
}

async fn measure_cache<K>(client: kube::Client, form: CacheFormat) -> Result<(), BoxError>
where
    K: Object<Scope: kinject_runtime::client::ApiScope>,
{
    // A first list of everything, dropped: the heap grows once for the pages
    // in flight, so what grows after is the cache.
    // Listed untyped, as the informer's watcher lists.
    let resource = kube::core::ApiResource::erase::<K>(&());
    let api: Api<kube::core::DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut continue_token = None;
    loop {
        let mut params = kube::api::ListParams::default().limit(500);
        params.continue_token = continue_token.take();
        let page = api.list(&params).await?;
        continue_token = page.metadata.continue_.filter(|t| !t.is_empty());
        if continue_token.is_none() {
            break;
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = ProcStats::own()?.rss;
    let ctx = Context::new(client);
    let informer = match form {
        CacheFormat::Decoded => ctx.informer::<K>(),
        CacheFormat::Json => ctx.compact_informer::<K>(),
    };
    let shutdown = tokio_util::sync::CancellationToken::new();
    ctx.start_informers(&shutdown);
    ctx.wait_for_cache_sync(Duration::from_secs(600)).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = ProcStats::own()?.rss;
    let cached = informer.lister().keys().len();
    shutdown.cancel();
    println!("{cached} {}", after.saturating_sub(before));
    Ok(())
}
