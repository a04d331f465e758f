//! Scale-out: how converge throughput grows with the number of replicas.
//!
//! ```sh
//! cargo run --release -p controller --example scale-out -- --objects 300 --replicas 1,2,3,5
//! ```
//!
//! For each replica count R, testenv's API server (over loopback HTTP, with
//! a stand-in kubelet that starts every pod) holds the same objects: N
//! AddressableServices with the Services they name and N/15 SimpleDeployments
//! of 2 replicas, and `config-leader-election` with `--buckets` buckets (10
//! by default). R controller processes (this example started again as the
//! `controller` binary, `reconcilers::controllers()` under sharedmain) start
//! together, with the client rate limits a cluster's controller has (5
//! requests per second and a burst of 10 per controller, Knative's), and the
//! default lease timings (60 s lease, 40 s renew deadline, 10 s retry).
//! Measured until every AddressableService and SimpleDeployment is Ready:
//! the time, the throughput (keys per second), its ratio to one replica's,
//! how the buckets' leases and their keys split among the replicas (the keys
//! as the replicas counted them on their member leases), and each replica's CPU
//! time and peak RSS.
//!
//! With B buckets and R replicas the busiest replica leads ⌈B/R⌉ of a
//! controller's buckets (4 of 10 at 3 replicas). Keys hash into buckets by
//! chance, so the replicas weigh the buckets by the keys each holds and give
//! the replica with more buckets the lighter ones: it then leads about its
//! share of the keys, no more than the 4 lightest buckets hold. `--objects
//! 1000` (100 keys per bucket, about 5 minutes for the four counts) has the
//! buckets' loads close to even, 300 (30 per bucket) uneven.
//!
//! A rolling update under churn, as a Deployment's would go:
//!
//! ```sh
//! cargo run --release -p controller --example scale-out -- --objects 300 --rolling-update 3
//! ```
//!
//! R replicas converge; then, while an AddressableService's spec changes
//! every 250 ms, each replica in turn gets a successor (which starts and has 5 s
//! to come up) and is sent SIGTERM, 15 s apart. Reported: how long each change
//! waited until its status showed it reconciled (`observedGeneration`), the
//! longest and the 99th percentile, and how many waited more than 15 s.

// The controller binary's allocator (cmd/controller/src/main.rs): this
// process also runs as the controller, and measures it as it ships.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode};
use std::time::{Duration, Instant};

use clap::Parser;
use kinject_runtime::leaderelection::KEYS_ANNOTATION;
use kinject_testenv::{TestEnv, Workloads};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

// What the controller benchmarks share: the process figures and `config/`.
#[path = "common/mod.rs"]
mod common;
use common::{ProcStats, apply_config};

/// Set in the processes this example starts as controllers.
const ROLE: &str = "KINJECT_SCALE_OUT_ROLE";
const SYSTEM_NAMESPACE: &str = "knative-samples";
const NAMESPACE: &str = "scale-out";
/// One SimpleDeployment per this many AddressableServices.
const OBJECTS_PER_DEPLOYMENT: usize = 15;

#[derive(Debug, Parser)]
#[command(about = "Converge time and throughput of 1 to R replicas over the same objects")]
struct Args {
    /// AddressableServices (and Services); a SimpleDeployment per 15.
    #[arg(long, default_value_t = 300)]
    objects: usize,
    /// The replica counts to measure, in order.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,5")]
    replicas: Vec<usize>,
    /// Buckets per controller (`buckets` in config-leader-election, 1 to 10).
    #[arg(long, default_value_t = 10)]
    buckets: u32,
    /// Where the controllers' logs go (a new temporary folder by default).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Instead of the throughput runs: converge with this many replicas, then
    /// replace them one by one under churn and report how long changes waited.
    #[arg(long)]
    rolling_update: Option<usize>,
}

fn main() -> ExitCode {
    if std::env::var(ROLE).as_deref() == Ok("controller") {
        return kinject_sharedmain::main("controller", reconcilers::controllers());
    }
    match bench(&Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scale-out benchmark failed: {e}");
            ExitCode::FAILURE
        }
    }
}

fn bench(args: &Args) -> Result<(), BoxError> {
    if args.objects == 0 || args.replicas.is_empty() || args.replicas.contains(&0) {
        return Err("--objects and every --replicas count must be at least 1".into());
    }
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("kinject-scale-out-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    if let Some(replicas) = args.rolling_update {
        if replicas == 0 {
            return Err("--rolling-update needs at least 1 replica".into());
        }
        return runtime.block_on(rolling_update(
            args,
            replicas,
            &dir.join(format!("rolling-{replicas}")),
        ));
    }
    let mut rows = Vec::new();
    for &replicas in &args.replicas {
        let row = runtime.block_on(measure(args, replicas, &dir.join(format!("r{replicas}"))))?;
        eprintln!(
            "{replicas} replica(s): converged in {:.1} s",
            row.took.as_secs_f64()
        );
        rows.push(row);
    }
    print_table(args, &rows);
    Ok(())
}

/// One replica count's run.
struct Row {
    replicas: usize,
    keys: usize,
    took: Duration,
    /// Leases held per replica, most first.
    split: Vec<Held>,
    stats: Vec<ProcStats>,
}

/// A served testenv holding the objects, with its kubelet running, and the
/// kubeconfig the controllers use.
struct Cluster {
    env: TestEnv,
    server: kinject_testenv::Server,
    kubeconfig: PathBuf,
    /// Stops the kubelet.
    stop: CancellationToken,
    kubelet: tokio::task::JoinHandle<()>,
}

impl Cluster {
    async fn start(args: &Args, dir: &Path) -> Result<Cluster, BoxError> {
        std::fs::create_dir_all(dir)?;
        let env = world(args)?;
        let server = env.serve().await?;
        let kubeconfig = dir.join("kubeconfig");
        server.write_kubeconfig(&kubeconfig)?;
        let stop = CancellationToken::new();
        let kubelet = tokio::spawn({
            let (env, stop) = (env.clone(), stop.clone());
            async move {
                env.run_workloads(Workloads::all().controllers(false), stop.cancelled_owned())
                    .await;
            }
        });
        Ok(Cluster {
            env,
            server,
            kubeconfig,
            stop,
            kubelet,
        })
    }

    /// `replicas` controller processes on the cluster, once every key is
    /// Ready; and how many keys that is.
    async fn converged(
        &self,
        args: &Args,
        replicas: usize,
        dir: &Path,
    ) -> Result<(Vec<Controller>, usize), BoxError> {
        let mut controllers = (0..replicas)
            .map(|i| spawn_controller(dir, &self.kubeconfig, &format!("replica-{i}")))
            .collect::<Result<Vec<_>, _>>()?;
        let keys = args.objects + args.objects / OBJECTS_PER_DEPLOYMENT;
        converge(&self.env, keys, &mut controllers, dir).await?;
        Ok((controllers, keys))
    }

    /// Stops the kubelet, then the API server.
    async fn shutdown(self) {
        self.stop.cancel();
        let _ = self.kubelet.await;
        self.server.shutdown().await;
    }
}

async fn measure(args: &Args, replicas: usize, dir: &Path) -> Result<Row, BoxError> {
    let cluster = Cluster::start(args, dir).await?;
    let started = Instant::now();
    let (mut controllers, keys) = cluster.converged(args, replicas, dir).await?;
    let took = started.elapsed();
    let split = lease_split(&cluster.env);
    let mut stats = Vec::new();
    for controller in &mut controllers {
        stats.push(ProcStats::of(controller.id())?);
    }
    for mut controller in controllers {
        terminate(&mut controller)?;
    }
    cluster.shutdown().await;
    Ok(Row {
        replicas,
        keys,
        took,
        split,
        stats,
    })
}

/// Waits until `keys` objects are Ready; an error if a controller exits
/// first, or after 30 minutes.
async fn converge(
    env: &TestEnv,
    keys: usize,
    controllers: &mut [Controller],
    dir: &Path,
) -> Result<(), BoxError> {
    let started = Instant::now();
    while ready(env) < keys {
        for controller in controllers.iter_mut() {
            if let Some(status) = controller.try_wait()? {
                return Err(
                    format!("a controller exited ({status}); its log is in {}", dir.display()).into(),
                );
            }
        }
        if started.elapsed() > Duration::from_secs(1800) {
            return Err(format!("not converged after 30 minutes: {} of {keys} Ready", ready(env)).into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// One change of an AddressableService's spec, and when its status showed
/// it reconciled.
struct Change {
    name: String,
    generation: i64,
    at: Instant,
    waited: Option<Duration>,
}

/// The changes made so far, shared by the churn and its watcher.
type Changes = std::sync::Arc<std::sync::Mutex<Vec<Change>>>;

fn lock(changes: &Changes) -> std::sync::MutexGuard<'_, Vec<Change>> {
    changes.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The rolling update of `--rolling-update`: converge, then replace each
/// replica in turn while specs change, and report how long changes waited.
async fn rolling_update(args: &Args, replicas: usize, dir: &Path) -> Result<(), BoxError> {
    let cluster = Cluster::start(args, dir).await?;
    let (mut controllers, _) = cluster.converged(args, replicas, dir).await?;
    let Cluster {
        env,
        kubeconfig,
        stop,
        ..
    } = &cluster;
    eprintln!("{replicas} replica(s) converged; replacing them one by one under churn");

    let changes = Changes::default();
    let churning = CancellationToken::new();
    let churn = tokio::spawn(churn(
        env.clone(),
        args.objects,
        changes.clone(),
        churning.clone(),
    ));
    let watching = tokio::spawn(watch_changes(env.clone(), changes.clone(), stop.clone()));
    tokio::time::sleep(Duration::from_secs(5)).await;
    for (i, old) in controllers.iter_mut().enumerate() {
        let mut successor = spawn_controller(dir, kubeconfig, &format!("replica-{i}-next"))?;
        tokio::time::sleep(Duration::from_secs(5)).await;
        if let Some(status) = successor.try_wait()? {
            return Err(format!("a successor exited ({status}); its log is in {}", dir.display()).into());
        }
        tokio::task::block_in_place(|| terminate(old))?;
        *old = successor;
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
    churning.cancel();
    let _ = churn.await;
    let settled = Instant::now();
    while lock(&changes).iter().any(|c| c.waited.is_none()) && settled.elapsed() < Duration::from_secs(120) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.cancel();
    let _ = watching.await;
    let split = lease_split(env);
    for mut controller in controllers {
        terminate(&mut controller)?;
    }
    cluster.shutdown().await;
    print_waits(&lock(&changes), replicas, &split);
    Ok(())
}

/// Changes an AddressableService's Service every 250 ms, round the objects,
/// until `done`.
async fn churn(env: TestEnv, objects: usize, changes: Changes, done: CancellationToken) {
    let mut i = 0;
    while !done.is_cancelled() {
        let name = format!("asvc-{:05}", i % objects);
        let target = format!("svc-{:05}", (i / objects + i + 1) % objects);
        i += 1;
        if let Some(mut object) = env.get_object(
            "samples.knative.dev",
            "v1alpha1",
            "addressableservices",
            Some(NAMESPACE),
            &name,
        ) {
            object["spec"]["serviceName"] = json!(target);
            if let Ok(stored) = env.update_object(object) {
                let generation = stored
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or_default();
                lock(&changes).push(Change {
                    name,
                    generation,
                    at: Instant::now(),
                    waited: None,
                });
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Notes when each change's status shows it reconciled, every 20 ms.
async fn watch_changes(env: TestEnv, changes: Changes, done: CancellationToken) {
    while !done.is_cancelled() {
        for change in lock(&changes).iter_mut().filter(|c| c.waited.is_none()) {
            let observed = env
                .get_object(
                    "samples.knative.dev",
                    "v1alpha1",
                    "addressableservices",
                    Some(NAMESPACE),
                    &change.name,
                )
                .and_then(|o| o.pointer("/status/observedGeneration").and_then(Value::as_i64));
            if observed.is_some_and(|observed| observed >= change.generation) {
                change.waited = Some(change.at.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn print_waits(changes: &[Change], replicas: usize, split: &[Held]) {
    let mut waits: Vec<Duration> = changes.iter().filter_map(|c| c.waited).collect();
    waits.sort_unstable();
    let unreconciled = changes.len() - waits.len();
    let percentile = |p: f64| {
        waits
            .get(((waits.len() as f64 * p) as usize).min(waits.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    let over = waits.iter().filter(|w| **w > Duration::from_secs(15)).count();
    let (leases, keys) = describe_split(split);
    println!(
        "rolling update of {replicas} replica(s) under churn: {} changes, {unreconciled} never reconciled; \
         waits p50 {:.2?}, p99 {:.2?}, longest {:.2?}; {over} waited more than 15 s; leases at the end {leases} ({keys} keys)",
        changes.len(),
        percentile(0.5),
        percentile(0.99),
        waits.last().copied().unwrap_or_default(),
    );
}

/// The API server with `config/` applied, `buckets` set, and the objects.
fn world(args: &Args) -> Result<TestEnv, BoxError> {
    let env = TestEnv::builder()
        .watch_history(20 * args.objects.max(1_000))
        .build();
    apply_config(&env)?;
    let mut election = env
        .get_object(
            "",
            "v1",
            "configmaps",
            Some(SYSTEM_NAMESPACE),
            "config-leader-election",
        )
        .ok_or("config/ has no config-leader-election")?;
    election["data"] = json!({"buckets": args.buckets.to_string()});
    env.update_object(election)?;
    env.create_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}))?;
    for i in 0..args.objects {
        env.create_object(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": format!("svc-{i:05}"), "namespace": NAMESPACE},
            "spec": {"ports": [{"port": 80, "targetPort": 8080}]}}))?;
        env.create_object(
            json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
            "metadata": {"name": format!("asvc-{i:05}"), "namespace": NAMESPACE},
            "spec": {"serviceName": format!("svc-{i:05}")}}),
        )?;
    }
    for i in 0..args.objects / OBJECTS_PER_DEPLOYMENT {
        env.create_object(
            json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "SimpleDeployment",
            "metadata": {"name": format!("sd-{i:04}"), "namespace": NAMESPACE},
            "spec": {"image": "nginx", "replicas": 2}}),
        )?;
    }
    Ok(env)
}

/// How many AddressableServices and SimpleDeployments are Ready.
fn ready(env: &TestEnv) -> usize {
    let is_ready = |object: &Value| {
        object
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
    };
    ["addressableservices", "simpledeployments"]
        .iter()
        .flat_map(|plural| env.list_objects("samples.knative.dev", "v1alpha1", plural, Some(NAMESPACE)))
        .filter(is_ready)
        .count()
}

/// What one replica leads: bucket leases, and the keys in them.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Held {
    leases: usize,
    keys: usize,
}

/// The bucket leases each holder leads and their keys, most leases first.
/// A bucket's keys are what the replicas published on their member leases
/// (`<prefix>.member-<id>`, annotation [`KEYS_ANNOTATION`], by ordinal).
fn lease_split(env: &TestEnv) -> Vec<Held> {
    let leases = env.list_objects("coordination.k8s.io", "v1", "leases", Some(SYSTEM_NAMESPACE));
    let text = |lease: &Value, pointer: &str| {
        lease
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut counted: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for lease in &leases {
        let name = text(lease, "/metadata/name");
        // A JSON pointer spells a key's `/` as `~1`.
        let keys = text(
            lease,
            &format!("/metadata/annotations/{}", KEYS_ANNOTATION.replace('/', "~1")),
        );
        if let (Some((prefix, _)), false) = (name.split_once(".member-"), keys.is_empty()) {
            counted.insert(
                prefix.to_owned(),
                keys.split(',').filter_map(|n| n.parse().ok()).collect(),
            );
        }
    }
    let mut held: BTreeMap<String, Held> = BTreeMap::new();
    for lease in &leases {
        let (name, holder) = (text(lease, "/metadata/name"), text(lease, "/spec/holderIdentity"));
        if name.contains(".member-") || holder.is_empty() {
            continue;
        }
        // `<prefix>.NN-of-MM`
        let keys = name.rsplit_once('.').and_then(|(prefix, bucket)| {
            let ordinal: usize = bucket.split_once("-of-")?.0.parse().ok()?;
            counted.get(prefix)?.get(ordinal).copied()
        });
        let entry = held.entry(holder).or_default();
        entry.leases += 1;
        entry.keys += keys.unwrap_or_default();
    }
    let mut split: Vec<Held> = held.into_values().collect();
    split.sort_unstable_by(|a, b| b.cmp(a));
    split
}

/// `8/6/6` and `372/347/347`: leases and keys per replica (`-` for the
/// keys of a replica alone, which counts none).
fn describe_split(split: &[Held]) -> (String, String) {
    let join = |f: fn(&Held) -> usize| {
        split
            .iter()
            .map(|h| f(h).to_string())
            .collect::<Vec<_>>()
            .join("/")
    };
    // A replica alone counts no keys.
    let keys = if split.iter().all(|h| h.keys == 0) {
        "-".to_owned()
    } else {
        join(|h| h.keys)
    };
    (join(|h| h.leases), keys)
}

/// A controller process, killed if it still runs when dropped: a run that
/// fails half-way must not leave replicas behind to retry a stopped API
/// server and share the machine with the next measurement.
struct Controller(Child);

impl Drop for Controller {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl Deref for Controller {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for Controller {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

fn spawn_controller(dir: &Path, kubeconfig: &Path, name: &str) -> Result<Controller, BoxError> {
    let child = Command::new(std::env::current_exe()?)
        .env(ROLE, "controller")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--bind-address")
        .arg("127.0.0.1")
        .env("SYSTEM_NAMESPACE", SYSTEM_NAMESPACE)
        .env("POD_NAME", name)
        // As config/controller.yaml sets it.
        .env("MIMALLOC_ARENA_EAGER_COMMIT", "0")
        // Ports the process picks as it binds: one chosen here and bound
        // later could be taken in between (by an outgoing connection of
        // another replica), and the replica would exit.
        .env("METRICS_PROMETHEUS_PORT", "0")
        .env("PROBES_PORT", "0")
        .stdout(std::fs::File::create(dir.join(format!("{name}.log")))?)
        .stderr(std::fs::File::create(dir.join(format!("{name}.stderr")))?)
        .spawn()
        .map_err(|e| format!("starting a controller process: {e}"))?;
    Ok(Controller(child))
}

/// SIGTERM, and waits up to a minute for the exit.
fn terminate(child: &mut Child) -> Result<(), BoxError> {
    Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()?;
    let asked = Instant::now();
    while child.try_wait()?.is_none() {
        if asked.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            return Err("a controller did not exit within 60 s of SIGTERM".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn print_table(args: &Args, rows: &[Row]) {
    let one = rows
        .iter()
        .find(|row| row.replicas == 1)
        .map(|row| row.keys as f64 / row.took.as_secs_f64());
    println!(
        "{} AddressableServices, {} SimpleDeployments, {} buckets, 5 requests/s and a burst of 10 per controller",
        args.objects,
        args.objects / OBJECTS_PER_DEPLOYMENT,
        args.buckets
    );
    println!(
        "| replicas | converged in | keys/s | × one replica | leases per replica | their keys | CPU per replica | peak RSS per replica |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for row in rows {
        let throughput = row.keys as f64 / row.took.as_secs_f64();
        let ratio = one.map_or_else(|| "-".to_owned(), |one| format!("{:.2}", throughput / one));
        let (leases, keys) = describe_split(&row.split);
        let cpu: Vec<String> = row
            .stats
            .iter()
            .map(|s| format!("{:.1} s", s.cpu.as_secs_f64()))
            .collect();
        let rss: Vec<String> = row
            .stats
            .iter()
            .map(|s| format!("{:.0} MiB", s.peak_rss as f64 / (1024.0 * 1024.0)))
            .collect();
        println!(
            "| {} | {:.1} s | {throughput:.1} | {ratio} | {leases} | {keys} | {} | {} |",
            row.replicas,
            row.took.as_secs_f64(),
            cpu.join(", "),
            rss.join(", ")
        );
    }
}
