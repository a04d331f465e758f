//! `sharedmain`: the `main` of a controller process (Knative's
//! `injection/sharedmain`).
//!
//! **Where it stands.** The process layer of the framework, above
//! `kinject-runtime`: flags, environment, kubeconfig, logging, the
//! configuration ConfigMaps, leader election, metrics and probes, signals.
//! It depends on `kinject-runtime` and the crates a process needs (clap,
//! tracing-subscriber, axum, prometheus-client), never on an application's
//! crates; `kinject-webhook` and every application's `cmd/*` build on it.
//! This is the one place that reads the process's environment ([`Env`]) and
//! builds its injection [`Context`] ([`Setup::context`]).
//!
//! ```no_run
//! # mod reconcilers { pub fn controllers() -> Vec<kinject_runtime::injection::Constructor> { Vec::new() } }
//! fn main() -> std::process::ExitCode {
//!     // `reconcilers` declares its modules with `kinject_runtime::controllers!`,
//!     // which lists one constructor per module.
//!     kinject_sharedmain::main("controller", reconcilers::controllers())
//! }
//! ```
//!
//! [`run`] is the same once flags and environment are read; here against the
//! in-memory API server, with no controllers, stopped at once:
//!
//! ```
//! use clap::Parser;
//! use kinject_sharedmain::{Env, Flags};
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let cluster = kinject_testenv::TestEnv::builder().namespace("knative-samples").build();
//! let server = cluster.serve().await?;
//! let kubeconfig = std::env::temp_dir().join(format!("sharedmain-doc-{}.kubeconfig", std::process::id()));
//! server.write_kubeconfig(&kubeconfig)?;
//! let flags = Flags::try_parse_from([
//!     "controller", "--kubeconfig", &kubeconfig.to_string_lossy(), "--disable-ha", "--bind-address", "127.0.0.1",
//! ])?;
//! let env = Env::from_lookup(|name| match name {
//!     "SYSTEM_NAMESPACE" => Some("knative-samples".to_owned()),
//!     "METRICS_PROMETHEUS_PORT" | "PROBES_PORT" => Some("0".to_owned()),
//!     _ => None,
//! })?;
//! let shutdown = CancellationToken::new();
//! shutdown.cancel();
//! kinject_sharedmain::run("controller", &[], flags, env, shutdown).await?;
//! # std::fs::remove_file(&kubeconfig)?;
//! # Ok(()) }
//! ```
//!
//! A single constructor can be named with [`controller!`] instead:
//! `main("controller", [controller!(addressableservice::new_controller)])`.
//!
//! In order, [`main`]:
//! 1. reads flags (`--kubeconfig`, `--server`, `--context`, `--kube-api-qps`,
//!    `--kube-api-burst`, `--disable-ha`, `--disable-controllers`,
//!    `--resync-period`) and the
//!    environment (`SYSTEM_NAMESPACE` is required; see [`Env`]);
//! 2. builds the kube client from the kubeconfig (or the in-cluster config) with
//!    client-side QPS/burst limiting (0 means 5× and 10× the number of
//!    controllers, as Knative) and request metrics;
//! 3. reads `config-logging` (JSON logs at its level, changed live),
//!    `config-leader-election` and `config-observability` from
//!    `SYSTEM_NAMESPACE`; a missing ConfigMap means the defaults, a malformed
//!    one stops the process with the reason;
//! 4. calls each constructor that `--disable-controllers` does not name with
//!    the injection [`Context`]; constructors ask for informers and return
//!    their [`Impl`];
//! 5. serves `/metrics` (port 9090, `METRICS_PROMETHEUS_PORT`) and `/health`
//!    and `/readiness` (port 8080, `PROBES_PORT`; readiness answers 500 naming
//!    the informers not in sync), starts exactly the informers the
//!    controllers asked for and waits for their caches;
//! 6. runs the controllers, each with leader election (or leading everything
//!    with `--disable-ha`);
//! 7. on SIGTERM or SIGINT turns readiness to 500, stops taking work, lets
//!    in-flight reconciles finish, releases its leases and exits 0; a second
//!    signal exits at once (status 1).
//!
//! Steps 1–3 are [`Setup::read`], then [`Setup::context`], step 4
//! [`Setup::construct`] and steps 5–7 [`Setup::run`], for a `main` that needs
//! its own steps in between; [`run`] chains them.
//!
//! Every failure before the controllers run exits 1 with a message that says
//! what failed, where, and how to fix it.

pub mod client_layers;
pub mod logging;
mod process_metrics;
pub mod rbac;
mod servers;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use prometheus_client::registry::Registry;
use thiserror::Error;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use client_layers::{RateLimitLayer, RequestMetricsLayer};
use kinject_runtime::controller::{Impl, WorkqueueMetrics};
use kinject_runtime::informer::{EventHandler, InformerMetrics};
use kinject_runtime::injection::{Context, InformerSet, describe_unsynced};
use kinject_runtime::leaderelection;
use kinject_runtime::reconciler::{ReconcileMetrics, ThreadsPerController};

pub use kinject_runtime::injection::Constructor;

/// A [`Constructor`] named after the constructor's module:
/// `controller!(addressableservice::new_controller)` is the controller
/// `addressableservice`.
#[macro_export]
macro_rules! controller {
    ($($path:tt)+) => {
        $crate::Constructor::from_path(stringify!($($path)+), $($path)+)
    };
}

/// What `--help` says of the environment a process reads ([`Env`]); the
/// variables behind flags are shown beside their flags.
pub const ENVIRONMENT_HELP: &str = "\
Environment:
  SYSTEM_NAMESPACE            (required) the namespace of this component's ConfigMaps and leases
  POD_NAME, else HOSTNAME     this replica's name, in logs, the User-Agent and events
  CLUSTER_DOMAIN              the cluster's DNS domain (default: /etc/resolv.conf's search, else cluster.local)
  CONFIG_LOGGING_NAME         the logging ConfigMap (default config-logging)
  CONFIG_OBSERVABILITY_NAME   the observability ConfigMap (default config-observability)
  CONFIG_LEADERELECTION_NAME  the leader election ConfigMap (default config-leader-election)
  K_THREADS_PER_CONTROLLER    workers per controller (default 2)
  METRICS_PROMETHEUS_PORT     the /metrics port (default 9090; 0 picks a free one)
  PROBES_PORT                 the /health and /readiness port (default 8080; 0 picks a free one)";

/// The flags of every controller process (Knative's `sharedmain` flags).
#[derive(Debug, Clone, Parser)]
#[command(
    about = "Runs Knative-style controllers against the cluster in the kubeconfig.",
    after_help = ENVIRONMENT_HELP
)]
pub struct Flags {
    /// Path to a kubeconfig. Without it, $KUBECONFIG, ~/.kube/config, then the
    /// in-cluster config are tried.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<String>,
    /// The API server URL, overriding the kubeconfig's.
    #[arg(long)]
    pub server: Option<String>,
    /// The kubeconfig context to use instead of its current one.
    #[arg(long)]
    pub context: Option<String>,
    /// Client-side requests per second to the API server; 0 means 5 per controller.
    #[arg(long, env = "KUBE_API_QPS", default_value_t = 0.0)]
    pub kube_api_qps: f32,
    /// Client-side burst of requests; 0 means 10 per controller.
    #[arg(long, env = "KUBE_API_BURST", default_value_t = 0)]
    pub kube_api_burst: i64,
    /// Lead every key without electing (one replica only).
    #[arg(long)]
    pub disable_ha: bool,
    /// Comma-separated controllers not to run (for example `addressableservice`);
    /// they are not built, so their informers never start.
    #[arg(long, value_delimiter = ',')]
    pub disable_controllers: Vec<String>,
    /// The address `/metrics`, `/health` and `/readiness` listen on: every
    /// interface by default (as a pod needs), `127.0.0.1` on a workstation.
    #[arg(long, env = "BIND_ADDRESS", default_value = "::")]
    pub bind_address: std::net::IpAddr,
    /// How often every informer hands its whole cache to the controllers
    /// again, which re-reconcile each object in the slow lane (Go duration
    /// syntax; 0 never). Knative's 10h by default.
    #[arg(long, env = "RESYNC_PERIOD", default_value = "10h", value_parser = parse_resync_period)]
    pub resync_period: Duration,
}

/// A `--resync-period` in Go's syntax (`10h`, `90s`), as Knative's ConfigMaps
/// write durations.
fn parse_resync_period(text: &str) -> Result<Duration, String> {
    let nanos = kinject_runtime::duration::parse_go_duration(text)?;
    u64::try_from(nanos)
        .map(Duration::from_nanos)
        .map_err(|_| format!("{text:?} is negative; use 0 for no resync or a period such as 10h"))
}

/// The environment of a controller process: every variable the process
/// honours, read once at start ([`Env::from_process`]) and passed down as
/// values, so nothing below reads the environment.
#[derive(Debug, Clone)]
pub struct Env {
    /// `SYSTEM_NAMESPACE` (required): where this component's ConfigMaps and
    /// leases live.
    pub system_namespace: String,
    /// `POD_NAME`, else `HOSTNAME`: added to every log line, the User-Agent
    /// and the events the process writes.
    pub pod_name: Option<String>,
    /// `CLUSTER_DOMAIN`: the cluster's DNS domain; unset, it is read from
    /// `/etc/resolv.conf`, else `cluster.local`.
    pub cluster_domain: Option<String>,
    /// `CONFIG_LOGGING_NAME` (default `config-logging`).
    pub config_logging_name: String,
    /// `CONFIG_OBSERVABILITY_NAME` (default `config-observability`).
    pub config_observability_name: String,
    /// `CONFIG_LEADERELECTION_NAME` (default `config-leader-election`).
    pub config_leader_election_name: String,
    /// `K_THREADS_PER_CONTROLLER` (default 2).
    pub threads_per_controller: usize,
    /// `METRICS_PROMETHEUS_PORT` (default 9090; 0 picks a free port).
    pub metrics_port: u16,
    /// `PROBES_PORT` (default 8080; 0 picks a free port).
    pub probes_port: u16,
}

/// Why the process could not start.
#[derive(Debug, Error)]
pub enum MainError {
    /// `SYSTEM_NAMESPACE` is not set.
    #[error(
        "SYSTEM_NAMESPACE is not set. It names the namespace that holds this component's ConfigMaps \
         (config-logging, config-leader-election, config-observability) and its leader-election leases. Set it:\n\
         - in a pod, from the downward API:\n      env:\n      - name: SYSTEM_NAMESPACE\n        valueFrom:\n          \
         fieldRef:\n            fieldPath: metadata.namespace\n\
         - in a shell: export SYSTEM_NAMESPACE=knative-samples\n\
         - in an IDE: add SYSTEM_NAMESPACE=knative-samples to the run configuration's environment \
         (.vscode/launch.json does this)"
    )]
    MissingSystemNamespace,
    /// An environment variable has a value that cannot be used.
    #[error("{name}={value:?} is not valid: {why}")]
    BadEnv {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is wrong and what would be right.
        why: String,
    },
    /// A flag has a value that cannot be used.
    #[error("{0}")]
    BadFlag(String),
    /// The kubeconfig could not be read or used.
    #[error("Error building kubeconfig: {0}")]
    Kubeconfig(String),
    /// A configuration ConfigMap is malformed.
    #[error("ConfigMap {namespace}/{name} is invalid: {why}")]
    Config {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// What is wrong.
        why: String,
    },
    /// Reading a ConfigMap kept failing.
    #[error(
        "could not read ConfigMap {namespace}/{name}: {why}; check that the API server is reachable and that the service account may get configmaps in {namespace}"
    )]
    ConfigRead {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The last error.
        why: String,
    },
    /// Informer caches did not sync.
    #[error(transparent)]
    CacheSync(#[from] kinject_runtime::injection::CacheSyncError),
    /// A server could not start.
    #[error("{0}")]
    Serve(String),
    /// The async runtime could not start.
    #[error("could not start the async runtime: {0}")]
    Runtime(String),
}

/// How long informers get to list before the process gives up.
const CACHE_SYNC_TIMEOUT: Duration = Duration::from_secs(60);
/// How long config ConfigMaps are retried at start (Knative polls for 5 s).
const CONFIG_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `constructors` as the controllers of `component` until a signal; the
/// exit code to return from `main`. See the module docs.
pub fn main(component: &str, constructors: impl IntoIterator<Item = Constructor>) -> ExitCode {
    let constructors: Vec<Constructor> = constructors.into_iter().collect();
    let flags = Flags::parse();
    process(component, |env, shutdown| async move {
        run(component, &constructors, flags, env, shutdown).await
    })
}

/// The process around a component's `run`: a multi-threaded runtime, the
/// environment, a shutdown token that signals cancel ([`handle_signals`]),
/// and exit 1 with `<component>: <what failed and how to fix it>` on any
/// error. Every binary's `main` (the controller's, the webhook's) is this.
pub fn process<F, Fut>(component: &str, run: F) -> ExitCode
where
    F: FnOnce(Env, CancellationToken) -> Fut,
    Fut: std::future::Future<Output = Result<(), MainError>>,
{
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return fail(component, &MainError::Runtime(e.to_string())),
    };
    let env = match Env::from_process() {
        Ok(env) => env,
        Err(e) => return fail(component, &e),
    };
    let shutdown = CancellationToken::new();
    runtime.spawn(handle_signals(shutdown.clone()));
    match runtime.block_on(run(env, shutdown)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(component, &e),
    }
}

fn fail(component: &str, err: &MainError) -> ExitCode {
    eprintln!("{component}: {err}");
    ExitCode::FAILURE
}

/// First SIGTERM/SIGINT: cancels `shutdown` (graceful shutdown). Second: exits
/// the process at once (status 1). Spawn it once, at the start of a `main`.
///
/// The listeners are registered once, before the first signal: a listener
/// registered after the first signal was handled would miss a second one sent
/// in between.
pub async fn handle_signals(shutdown: CancellationToken) {
    let mut signals = TerminationSignals::register();
    signals.recv().await;
    tracing::info!("Received a termination signal; shutting down (a second signal exits at once)");
    shutdown.cancel();
    signals.recv().await;
    eprintln!("second termination signal; exiting without waiting");
    std::process::exit(1);
}

/// SIGTERM and SIGINT (Ctrl-C elsewhere), each delivery seen once.
struct TerminationSignals {
    #[cfg(unix)]
    unix: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl TerminationSignals {
    fn register() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let unix = match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
                (Ok(term), Ok(int)) => Some((term, int)),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::warn!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the process");
                    None
                }
            };
            TerminationSignals { unix }
        }
        #[cfg(not(unix))]
        TerminationSignals {}
    }

    async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some((term, int)) = &mut self.unix {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

impl Env {
    /// Reads the environment of this process.
    pub fn from_process() -> Result<Env, MainError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the environment through `lookup` (tests pass a map).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Env, MainError> {
        // An empty variable is an unset one, as Knative's `os.Getenv` checks read it.
        let lookup = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let system_namespace = lookup("SYSTEM_NAMESPACE")
            .filter(|s| !s.trim().is_empty())
            .ok_or(MainError::MissingSystemNamespace)?;
        let threads_per_controller = match lookup("K_THREADS_PER_CONTROLLER") {
            None => kinject_runtime::controller::DEFAULT_CONCURRENCY,
            Some(value) => match value.trim().parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(MainError::BadEnv {
                        name: "K_THREADS_PER_CONTROLLER",
                        value,
                        why: "expected a positive whole number of workers per controller, such as 2".into(),
                    });
                }
            },
        };
        let port = |name: &'static str, default: u16| -> Result<u16, MainError> {
            match lookup(name) {
                None => Ok(default),
                Some(value) => value.trim().parse::<u16>().map_err(|_| MainError::BadEnv {
                    name,
                    value,
                    why: "expected a TCP port number between 0 and 65535".into(),
                }),
            }
        };
        Ok(Env {
            system_namespace,
            pod_name: lookup("POD_NAME").or_else(|| lookup("HOSTNAME")),
            cluster_domain: lookup("CLUSTER_DOMAIN"),
            config_logging_name: lookup("CONFIG_LOGGING_NAME").unwrap_or_else(|| "config-logging".into()),
            config_observability_name: lookup("CONFIG_OBSERVABILITY_NAME")
                .unwrap_or_else(|| "config-observability".into()),
            config_leader_election_name: lookup(leaderelection::CONFIG_MAP_NAME_ENV)
                .unwrap_or_else(|| leaderelection::CONFIG_MAP_NAME.into()),
            threads_per_controller,
            metrics_port: port("METRICS_PROMETHEUS_PORT", 9090)?,
            probes_port: port("PROBES_PORT", 8080)?,
        })
    }
}

/// The kube config the flags and environment describe.
pub async fn kube_config(flags: &Flags) -> Result<Config, MainError> {
    let options = KubeConfigOptions {
        context: flags.context.clone(),
        ..KubeConfigOptions::default()
    };
    let mut config = match &flags.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| {
                MainError::Kubeconfig(format!(
                    "cannot read kubeconfig {path:?}: {e}; fix the file, or point --kubeconfig (or KUBECONFIG) at a valid kubeconfig"
                ))
            })?;
            Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|e| {
                    MainError::Kubeconfig(format!(
                        "kubeconfig {path:?} cannot be used{}: {e}",
                        flags
                            .context
                            .as_deref()
                            .map(|c| format!(" with context {c:?}"))
                            .unwrap_or_default()
                    ))
                })?
        }
        None if flags.context.is_some() => Config::from_kubeconfig(&options)
            .await
            .map_err(|e| MainError::Kubeconfig(format!("cannot use the default kubeconfig: {e}")))?,
        None => Config::infer().await.map_err(|e| {
            MainError::Kubeconfig(format!(
                "no kubeconfig found and not running in a cluster ({e}); pass --kubeconfig or set KUBECONFIG"
            ))
        })?,
    };
    if let Some(server) = &flags.server {
        config.cluster_url = server
            .parse()
            .map_err(|e| MainError::Kubeconfig(format!("--server {server:?} is not a URL: {e}")))?;
    }
    Ok(config)
}

/// Reads a ConfigMap's data; `None` when it does not exist. Transient errors are
/// retried for a few seconds (a sidecar proxy may still be starting).
async fn read_config_map(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<BTreeMap<String, String>>, MainError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let deadline = tokio::time::Instant::now() + CONFIG_READ_TIMEOUT;
    loop {
        match api.get_opt(name).await {
            Ok(found) => return Ok(found.map(|cm| cm.data.unwrap_or_default())),
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return Err(MainError::ConfigRead {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                    why: kinject_runtime::reconciler::api_message(&e),
                });
            }
            Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}

/// Everything `main` does once the runtime is up; returns when the controllers
/// have stopped after `shutdown`. The phases, each callable on its own:
/// [`Setup::read`], [`Setup::context`], [`Setup::construct`], [`Setup::run`].
pub async fn run(
    component: &str,
    constructors: &[Constructor],
    flags: Flags,
    env: Env,
    shutdown: CancellationToken,
) -> Result<(), MainError> {
    let setup = Setup::read(component, constructors, flags, env).await?;
    let span = setup.component_span();
    async {
        let ctx = setup.context();
        let controllers = setup.construct(&ctx, constructors)?;
        setup.run(&ctx, controllers, shutdown).await
    }
    .instrument(span)
    .await
}

/// What the process learned before building controllers: flags, environment,
/// the client, and the three configuration ConfigMaps.
pub struct Setup {
    component: String,
    flags: Flags,
    env: Env,
    config: Config,
    client: Client,
    watch_client: Client,
    registry: Registry,
    workqueue_metrics: WorkqueueMetrics,
    reconcile_metrics: ReconcileMetrics,
    informer_metrics: InformerMetrics,
    levels: logging::LevelHandle,
    election: leaderelection::ComponentConfig,
    serve_metrics: bool,
}

impl std::fmt::Debug for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Setup")
            .field("component", &self.component)
            .field("flags", &self.flags)
            .field("env", &self.env)
            .finish_non_exhaustive()
    }
}

impl Setup {
    /// The span this component runs in, tasks it starts included. Its
    /// `logger` field names the logger of every line logged in it, so where
    /// two components share a process (the local job runs the controller and
    /// the webhook) each line still says which one wrote it. A method of
    /// `Setup` because [`Setup::read`] installs the logger, and a span made
    /// before that stays off.
    pub fn component_span(&self) -> tracing::Span {
        // At error level, the least verbose, so it is on whenever a line is
        // written at all, whatever level config-logging sets.
        tracing::error_span!("component", logger = self.component.as_str())
    }

    /// Phase 1: checks the flags, builds the rate-limited client from the
    /// kubeconfig, reads `config-logging` (and starts logging at its level),
    /// `config-leader-election` and `config-observability`. The number of
    /// `constructors` that `--disable-controllers` leaves scales the default
    /// QPS and burst.
    pub async fn read(
        component: &str,
        constructors: &[Constructor],
        flags: Flags,
        env: Env,
    ) -> Result<Setup, MainError> {
        let controllers = constructors
            .iter()
            .filter(|c| !flags.disable_controllers.iter().any(|d| d == c.name()))
            .count();
        let (qps, burst) = client_limits(&flags, controllers)?;
        let mut config = kube_config(&flags).await?;
        // Like client-go's `<binary>/<version>`, plus the pod, so API server audit
        // logs (and testenv's action log) tell replicas apart.
        let user_agent = format!(
            "{component}/{} ({})",
            env!("CARGO_PKG_VERSION"),
            env.pod_name.as_deref().unwrap_or("unknown-pod")
        );
        if let Ok(value) = http::HeaderValue::from_str(&user_agent) {
            config.headers.push((http::header::USER_AGENT, value));
        }
        let mut registry = Registry::default();
        let request_metrics = RequestMetricsLayer::register(&mut registry);
        let workqueue_metrics = WorkqueueMetrics::register(&mut registry);
        let reconcile_metrics = ReconcileMetrics::register(&mut registry);
        let informer_metrics = InformerMetrics::register(&mut registry);
        process_metrics::register(&mut registry);
        // One token bucket for both clients: the limit is the process's.
        let rate_limit = RateLimitLayer::new(qps, burst);
        let build_client = |config: kube::Config| -> Result<Client, MainError> {
            Ok(kube::client::ClientBuilder::try_from(config)
                .map_err(|e| {
                    MainError::Kubeconfig(format!("cannot build a client from the kubeconfig: {e}"))
                })?
                .with_layer(&rate_limit)
                .with_layer(&request_metrics)
                .build())
        };
        let client = build_client(config.clone())?;
        // Informers watch without kube's retries of 429/503/504: a watch
        // refused as "Too large resource version" must reach the informer at
        // once (it lists again), and the watcher retries with its own backoff.
        let mut watch_config = config.clone();
        watch_config.default_retry = false;
        let watch_client = build_client(watch_config)?;

        let ns = &env.system_namespace;
        let invalid = |name: &str, why: String| MainError::Config {
            namespace: ns.clone(),
            name: name.to_owned(),
            why,
        };
        let logging_data = read_config_map(&client, ns, &env.config_logging_name).await?;
        let logging_data = logging_data.unwrap_or_default();
        let (level, encoding) = logging_config(component, &logging_data, std::io::stdout().is_terminal())
            .map_err(|why| invalid(&env.config_logging_name, why))?;
        let levels = logging::init(component, level, env.pod_name.clone(), encoding);
        tracing::info!(qps, burst, controllers, "Starting {component}");

        let election_data = read_config_map(&client, ns, &env.config_leader_election_name).await?;
        let election = leader_election_config(&election_data.unwrap_or_default())
            .map_err(|why| invalid(&env.config_leader_election_name, why))?
            .component_config(component);
        let observability = read_config_map(&client, ns, &env.config_observability_name).await?;
        let serve_metrics = metrics_enabled(&observability.unwrap_or_default())
            .map_err(|why| invalid(&env.config_observability_name, why))?;
        Ok(Setup {
            component: component.to_owned(),
            flags,
            env,
            config,
            client,
            watch_client,
            registry,
            workqueue_metrics,
            reconcile_metrics,
            informer_metrics,
            levels,
            election,
            serve_metrics,
        })
    }

    /// Phase 2: the process's one injection context, controllers are built
    /// from: over the client and watch client, with the resync period, the
    /// cluster domain and pod name of the environment, the worker count and
    /// the metrics registries. A scope for another namespace
    /// ([`Context::in_namespace`], e.g. `SYSTEM_NAMESPACE` for what a process
    /// keeps there) shares all of it; call this once per process.
    pub fn context(&self) -> Context {
        let builder = Context::builder(self.client.clone())
            .watch_client(self.watch_client.clone())
            .config(self.config.clone())
            .resync_period(self.flags.resync_period)
            .pod_name(self.env.pod_name.clone())
            .extension(ThreadsPerController(self.env.threads_per_controller))
            .extension(self.workqueue_metrics.clone())
            .extension(self.reconcile_metrics.clone())
            .extension(self.informer_metrics.clone());
        match &self.env.cluster_domain {
            Some(domain) => builder.cluster_domain(domain.clone()),
            None => builder,
        }
        .build()
    }

    /// The registry `/metrics` serves, for a component's own families
    /// (the webhook's admission counts); register before [`Setup::run`].
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// The environment read at start.
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// The flags read at start.
    pub fn flags(&self) -> &Flags {
        &self.flags
    }

    /// Phase 3: builds the controllers `--disable-controllers` leaves; see
    /// [`construct`].
    pub fn construct(&self, ctx: &Context, constructors: &[Constructor]) -> Result<Vec<Built>, MainError> {
        construct(ctx, constructors, &self.flags.disable_controllers)
    }

    /// Phase 4: serves probes and metrics, starts the informers `ctx` was
    /// asked for, elects leaders (or leads everything with `--disable-ha`) and
    /// runs each controller once its own informers have synced, so one whose
    /// kind is not served yet (CRD missing, RBAC missing) holds back no other
    /// and starts by itself when it is; until `shutdown`, then lets reconciles
    /// in flight finish, releases the leases and stops.
    pub async fn run(
        mut self,
        ctx: &Context,
        controllers: Vec<Built>,
        shutdown: CancellationToken,
    ) -> Result<(), MainError> {
        let system = ctx.in_namespace(self.env.system_namespace.clone());
        let ((), own_config) = ctx.recording(|_| {
            follow_logging_config(&system, &self.env.config_logging_name, &self.levels);
            announce_start_config_edits(
                &system,
                &self.env.config_leader_election_name,
                &self.env.config_observability_name,
            );
        });

        // Probes and metrics come first: /readiness says which informers are
        // still syncing (and why) instead of the port being closed.
        let stop_servers = CancellationToken::new();
        let registry = Arc::new(std::mem::take(&mut self.registry));
        let watched = ctx.clone();
        let unsynced: servers::Unsynced = Arc::new(move || watched.unsynced_informers());
        let mut servers = self.serve(registry, unsynced, &shutdown, &stop_servers).await?;

        tracing::info!(informers = ?ctx.informer_descriptions(), "Starting informers...");
        let informer_stop = CancellationToken::new();
        // Joined before returning: a watch still running when the caller
        // stops the API server would log its closed connection as a failure.
        let informers = ctx.start_informers(&informer_stop);
        // Only the process's own configuration must sync; each controller
        // waits for its informers below.
        tokio::select! {
            result = own_config.wait_for_sync_within(CACHE_SYNC_TIMEOUT) => result?,
            () = shutdown.cancelled() => {
                informer_stop.cancel();
                stop_servers.cancel();
                join_informers(informers).await;
                while servers.join_next().await.is_some() {}
                return Ok(());
            }
        }

        tracing::info!("Starting controllers...");
        // Electors stop only after the controllers, so no write follows the
        // release of a lease.
        let election_stop = CancellationToken::new();
        let impls: Vec<Impl> = controllers.iter().map(|b| b.controller.clone()).collect();
        let electors = self.elect(&impls, &election_stop)?;
        let mut running = JoinSet::new();
        for built in controllers {
            running.spawn(run_when_synced(built, shutdown.clone()).in_current_span());
        }

        shutdown.cancelled().await;
        tracing::info!("Stopping controllers; waiting for reconciles in flight");
        while let Some(joined) = running.join_next().await {
            if let Err(e) = joined {
                tracing::error!(error = %e, "a controller task failed");
            }
        }
        election_stop.cancel();
        for elector in electors {
            if let Err(e) = elector.await {
                tracing::error!(error = %e, "a leader elector failed");
            }
        }
        informer_stop.cancel();
        stop_servers.cancel();
        join_informers(informers).await;
        while servers.join_next().await.is_some() {}
        tracing::info!("Stopped");
        Ok(())
    }

    /// Serves `/health` and `/readiness` (500 on `shutdown`; readiness also
    /// while `unsynced` names informers) and, unless `config-observability`
    /// says `none`, `/metrics`.
    async fn serve(
        &self,
        registry: Arc<Registry>,
        unsynced: servers::Unsynced,
        shutdown: &CancellationToken,
        stop: &CancellationToken,
    ) -> Result<JoinSet<()>, MainError> {
        let address = self.flags.bind_address;
        let mut servers = JoinSet::new();
        let probes = servers::bind(address, self.env.probes_port)
            .await
            .map_err(MainError::Serve)?;
        tracing::info!(address = %probes.local_addr().map(|a| a.to_string()).unwrap_or_default(), "Serving /health and /readiness");
        servers
            .spawn(servers::serve_probes(probes, shutdown.clone(), unsynced, stop.clone()).in_current_span());
        if self.serve_metrics {
            let metrics = servers::bind(address, self.env.metrics_port)
                .await
                .map_err(MainError::Serve)?;
            tracing::info!(address = %metrics.local_addr().map(|a| a.to_string()).unwrap_or_default(), "Serving /metrics");
            servers.spawn(servers::serve_metrics(metrics, registry, stop.clone()).in_current_span());
        }
        Ok(servers)
    }

    /// Starts one elector per controller and bucket, or promotes every
    /// controller for every key with `--disable-ha`.
    fn elect(
        &self,
        controllers: &[Impl],
        stop: &CancellationToken,
    ) -> Result<Vec<tokio::task::JoinHandle<()>>, MainError> {
        if self.flags.disable_ha {
            tracing::info!("High availability disabled: leading every key");
            controllers.iter().for_each(leaderelection::promote_unopposed);
            return Ok(Vec::new());
        }
        let identity = leaderelection::unique_id()
            .map_err(|e| MainError::Serve(format!("cannot name this replica for leader election: {e}")))?;
        tracing::info!(identity = %identity, buckets = self.election.buckets, "Running with leader election");
        controllers
            .iter()
            .map(|controller| {
                leaderelection::spawn_electors(
                    self.client.clone(),
                    &self.env.system_namespace,
                    controller,
                    &self.election,
                    &identity,
                    stop.clone(),
                )
                .map_err(|e| MainError::Config {
                    namespace: self.env.system_namespace.clone(),
                    name: self.env.config_leader_election_name.clone(),
                    why: format!("{e:#}"),
                })
            })
            .collect()
    }
}

/// A built controller and the informers its constructor asked for: it starts
/// working once those have synced.
#[derive(Debug)]
pub struct Built {
    /// The controller.
    pub controller: Impl,
    /// The informers its constructor asked for, shared or not.
    pub informers: InformerSet,
}

/// Builds the controllers of `constructors` whose names `disabled` does not
/// list. A disabled controller is never built, so it registers no informer and
/// nothing of it starts; a name in `disabled` that no constructor has is an
/// error listing the names there are.
pub fn construct(
    ctx: &Context,
    constructors: &[Constructor],
    disabled: &[String],
) -> Result<Vec<Built>, MainError> {
    if let Some(unknown) = disabled
        .iter()
        .find(|d| !constructors.iter().any(|c| c.name() == d.as_str()))
    {
        let known: Vec<&str> = constructors.iter().map(Constructor::name).collect();
        return Err(MainError::BadFlag(format!(
            "--disable-controllers names {unknown:?}, which is not a controller of this process; \
             the controllers are: {}",
            known.join(", ")
        )));
    }
    let mut controllers = Vec::new();
    for constructor in constructors {
        if disabled.iter().any(|d| d == constructor.name()) {
            tracing::info!("Disabling controller {}", constructor.name());
            continue;
        }
        let (controller, informers) = ctx.recording(|ctx| constructor.construct(ctx));
        controllers.push(Built {
            controller,
            informers,
        });
    }
    tracing::info!("Registered {} controllers", controllers.len());
    Ok(controllers)
}

/// Waits for stopped informers to end, reporting one that panicked.
async fn join_informers(informers: Vec<tokio::task::JoinHandle<()>>) {
    for informer in informers {
        if let Err(e) = informer.await {
            tracing::error!(error = %e, "an informer task failed");
        }
    }
}

/// Runs `built`'s controller once its informers have synced, until `stop`;
/// while they have not, says which every [`CACHE_SYNC_TIMEOUT`].
async fn run_when_synced(
    Built {
        controller,
        informers,
    }: Built,
    stop: CancellationToken,
) {
    let synced = informers.wait_for_sync();
    tokio::pin!(synced);
    loop {
        tokio::select! {
            () = &mut synced => break,
            () = stop.cancelled() => return,
            () = tokio::time::sleep(CACHE_SYNC_TIMEOUT) => {
                tracing::warn!(
                    controller = %controller.name(),
                    "waiting for informers to sync before starting: {}; check that the kinds are served \
                     (CRDs installed) and that the service account may list and watch them",
                    describe_unsynced(&informers.unsynced())
                );
            }
        }
    }
    tracing::info!(controller = %controller.name(), "Caches synced; starting workers");
    // Informers that list again later (the API server's history changed)
    // hold back this controller's reconciles until they are done.
    controller.reconcile_only_when_synced(Arc::new(informers.clone()));
    controller.run(stop).await;
}

/// The client's QPS and burst: the flags, or 5 and 10 per controller when they
/// say 0 (Knative's defaults).
fn client_limits(flags: &Flags, controllers: usize) -> Result<(f32, u32), MainError> {
    if flags.kube_api_qps < 0.0 || !flags.kube_api_qps.is_finite() {
        return Err(MainError::BadFlag(format!(
            "--kube-api-qps {} must be a number ≥ 0",
            flags.kube_api_qps
        )));
    }
    let burst = u32::try_from(flags.kube_api_burst).map_err(|_| {
        MainError::BadFlag(format!(
            "--kube-api-burst {} must be a whole number ≥ 0",
            flags.kube_api_burst
        ))
    })?;
    let controllers = controllers.max(1);
    let qps = if flags.kube_api_qps == 0.0 {
        5.0 * controllers as f32
    } else {
        flags.kube_api_qps
    };
    let burst = if burst == 0 {
        10 * u32::try_from(controllers).unwrap_or(u32::MAX / 10)
    } else {
        burst
    };
    Ok((qps, burst))
}

/// Applies the log level of the ConfigMap `name` in `system`'s namespace live,
/// and the default level when it is deleted.
fn follow_logging_config(system: &Context, name: &str, levels: &logging::LevelHandle) {
    let watched = name.to_owned();
    let (on_add, on_update, on_delete) = (levels.clone(), levels.clone(), levels.clone());
    system.informer::<ConfigMap>().add_event_handler(
        EventHandler::new()
            .with_filter(move |cm: &ConfigMap| cm.metadata.name.as_deref() == Some(watched.as_str()))
            .on_add(move |cm: &ConfigMap| on_add.apply(&cm.data.clone().unwrap_or_default()))
            .on_update(move |_, cm: &ConfigMap| on_update.apply(&cm.data.clone().unwrap_or_default()))
            .on_delete(move |_| {
                tracing::info!("config-logging was deleted; logging at the default level");
                on_delete.apply(&BTreeMap::new());
            }),
    );
}
/// The ConfigMaps read only at start (leader election, observability): an
/// edit is announced when it happens, not at the next start. An invalid one
/// is an error line naming the key and why, while the process keeps the
/// values it started with; a valid one says it applies at the next start.
fn announce_start_config_edits(system: &Context, leader_election: &str, observability: &str) {
    let names = [
        (leader_election.to_owned(), StartConfig::LeaderElection),
        (observability.to_owned(), StartConfig::Observability),
    ];
    let filter_names = names.clone();
    system.informer::<ConfigMap>().add_event_handler(
        EventHandler::new()
            .with_filter(move |cm: &ConfigMap| {
                filter_names
                    .iter()
                    .any(|(name, _)| cm.metadata.name.as_deref() == Some(name.as_str()))
            })
            .on_update(move |old: &ConfigMap, new: &ConfigMap| {
                let Some((name, which)) = names
                    .iter()
                    .find(|(name, _)| new.metadata.name.as_deref() == Some(name.as_str()))
                else {
                    return;
                };
                if old.data == new.data {
                    return;
                }
                match start_config_edit(name, *which, &new.data.clone().unwrap_or_default()) {
                    Err(message) => tracing::error!("{message}"),
                    Ok(message) => tracing::info!("{message}"),
                }
            }),
    );
}

/// Which ConfigMap read only at start.
#[derive(Clone, Copy, Debug)]
enum StartConfig {
    LeaderElection,
    Observability,
}

/// What to say of an edit of a ConfigMap read only at start: `Err` when the
/// new data would stop the next start.
fn start_config_edit(
    name: &str,
    which: StartConfig,
    data: &BTreeMap<String, String>,
) -> Result<String, String> {
    let checked = match which {
        StartConfig::LeaderElection => leader_election_config(data).map(drop),
        StartConfig::Observability => metrics_enabled(data).map(drop),
    };
    match checked {
        Ok(()) => Ok(format!(
            "{name} changed; the new values apply when the process restarts"
        )),
        Err(why) => Err(format!(
            "{name} is invalid: {why}; this process keeps the values it started with, and it would not start again until {name} is fixed"
        )),
    }
}

/// `component`'s log level and the line encoding from `config-logging` data,
/// or why the ConfigMap cannot be used.
pub fn logging_config(
    component: &str,
    data: &BTreeMap<String, String>,
    stdout_is_terminal: bool,
) -> Result<(tracing_subscriber::filter::LevelFilter, logging::Encoding), String> {
    let level = logging::level_from_config(component, data).map_err(|e| e.to_string())?;
    let encoding = logging::Encoding::from_config(data, stdout_is_terminal).map_err(|e| e.to_string())?;
    Ok((level, encoding))
}

/// `config-leader-election` data read, or why it cannot be used.
pub fn leader_election_config(data: &BTreeMap<String, String>) -> Result<leaderelection::Config, String> {
    leaderelection::Config::from_map(data).map_err(|e| format!("{e:#}"))
}

/// The configuration ConfigMaps every process reads at start, by their
/// default names.
pub const CONFIG_MAPS: [&str; 3] = ["config-logging", "config-leader-election", "config-observability"];

/// Checks the data of the configuration ConfigMap `name` (one of
/// [`CONFIG_MAPS`]) with the parsers a process uses at start, so a webhook can
/// refuse at apply time what would stop a process, with the same words.
/// `config-logging` is checked for every component it names
/// (`loglevel.<component>`). `None` for any other name.
pub fn check_config_map(name: &str, data: &BTreeMap<String, String>) -> Option<Result<(), String>> {
    match name {
        "config-logging" => Some((|| {
            logging_config("", data, false)?;
            for component in data.keys().filter_map(|k| k.strip_prefix("loglevel.")) {
                logging_config(component, data, false)?;
            }
            Ok(())
        })()),
        "config-leader-election" => Some(leader_election_config(data).map(drop)),
        "config-observability" => Some(metrics_enabled(data).map(drop)),
        _ => None,
    }
}

/// Whether `/metrics` is served, from `config-observability`'s
/// `metrics-protocol`: Prometheus unless it says `none`. Knative's default is
/// `none`; serving Prometheus by default is a deliberate difference, so a
/// fresh install has metrics to scrape.
pub fn metrics_enabled(data: &BTreeMap<String, String>) -> Result<bool, String> {
    match data.get("metrics-protocol").map(|s| s.trim()) {
        None | Some("") | Some("prometheus") => Ok(true),
        Some("none") => Ok(false),
        Some(other @ ("grpc" | "http/protobuf")) => Err(format!(
            "metrics-protocol {other:?} (OpenTelemetry export) is not supported; use \"prometheus\" or \"none\""
        )),
        Some(other) => Err(format!(
            "metrics-protocol {other:?} is not one of prometheus, none"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_edit_of_a_start_config_says_which_key_and_what_is_kept() {
        let data = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
        };
        let bad = start_config_edit(
            "config-leader-election",
            StartConfig::LeaderElection,
            &data(&[("leaseDuration", "banana")]),
        )
        .unwrap_err();
        assert!(bad.contains("leaseDuration"), "{bad}");
        assert!(bad.contains("keeps the values it started with"), "{bad}");
        let bad = start_config_edit(
            "config-observability",
            StartConfig::Observability,
            &data(&[("metrics-protocol", "carrier-pigeon")]),
        )
        .unwrap_err();
        assert!(bad.contains("metrics-protocol \"carrier-pigeon\""), "{bad}");
        let good = start_config_edit(
            "config-leader-election",
            StartConfig::LeaderElection,
            &data(&[("lease-duration", "90s")]),
        )
        .unwrap();
        assert!(good.contains("when the process restarts"), "{good}");
    }

    #[test]
    fn help_lists_every_variable_the_environment_is_read_for() {
        use clap::CommandFactory;
        let asked = std::sync::Mutex::new(Vec::new());
        let _ = Env::from_lookup(|name| {
            asked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(name.to_owned());
            Some("1".to_owned())
        });
        let help = Flags::command().render_long_help().to_string();
        let asked = asked.into_inner().unwrap_or_else(|e| e.into_inner());
        assert!(asked.len() >= 9, "{asked:?}");
        for name in asked {
            assert!(help.contains(&name), "--help does not name {name}:\n{help}");
        }
    }

    fn env(pairs: &[(&str, &str)]) -> Result<Env, MainError> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Env::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn resync_period_is_knatives_ten_hours_unless_set_in_go_syntax() {
        let flags = |args: &[&str]| Flags::try_parse_from([&["controller"], args].concat());
        assert_eq!(
            flags(&[]).unwrap().resync_period,
            Duration::from_secs(10 * 60 * 60)
        );
        assert_eq!(
            flags(&["--resync-period", "1m30s"]).unwrap().resync_period,
            Duration::from_secs(90)
        );
        assert_eq!(
            flags(&["--resync-period", "0"]).unwrap().resync_period,
            Duration::ZERO
        );
        let err = flags(&["--resync-period=-5s"]).unwrap_err().to_string();
        assert!(err.contains("negative"), "{err}");
        let err = flags(&["--resync-period", "5"]).unwrap_err().to_string();
        assert!(err.contains("time: missing unit in duration"), "{err}");
    }

    #[test]
    fn system_namespace_is_required_and_the_message_says_how_to_set_it() {
        let err = env(&[]).unwrap_err().to_string();
        assert!(err.starts_with("SYSTEM_NAMESPACE is not set."), "{err}");
        assert!(err.contains("fieldPath: metadata.namespace"), "{err}");
        assert!(err.contains("export SYSTEM_NAMESPACE=knative-samples"), "{err}");
        assert!(err.contains("IDE"), "{err}");
    }

    #[test]
    fn defaults_and_overrides() {
        let e = env(&[("SYSTEM_NAMESPACE", "knative-samples"), ("HOSTNAME", "pod-1")]).unwrap();
        assert_eq!(e.config_logging_name, "config-logging");
        assert_eq!(e.config_leader_election_name, "config-leader-election");
        assert_eq!(
            (e.threads_per_controller, e.metrics_port, e.probes_port),
            (2, 9090, 8080)
        );
        assert_eq!(e.pod_name.as_deref(), Some("pod-1"));
        assert_eq!(e.cluster_domain, None);
        let e = env(&[
            ("SYSTEM_NAMESPACE", "ns"),
            ("POD_NAME", "p"),
            ("K_THREADS_PER_CONTROLLER", "4"),
            ("METRICS_PROMETHEUS_PORT", "0"),
        ])
        .unwrap();
        assert_eq!(
            (e.pod_name.as_deref(), e.threads_per_controller, e.metrics_port),
            (Some("p"), 4, 0)
        );
    }

    #[test]
    fn every_variable_is_read_here_and_empty_means_unset() {
        let e = env(&[
            ("SYSTEM_NAMESPACE", "ns"),
            ("POD_NAME", ""),
            ("HOSTNAME", "host-1"),
            ("CLUSTER_DOMAIN", "corp.internal"),
            ("CONFIG_LEADERELECTION_NAME", ""),
            ("CONFIG_LOGGING_NAME", "my-logging"),
        ])
        .unwrap();
        assert_eq!(
            e.pod_name.as_deref(),
            Some("host-1"),
            "POD_NAME falls back to HOSTNAME"
        );
        assert_eq!(e.cluster_domain.as_deref(), Some("corp.internal"));
        assert_eq!(e.config_leader_election_name, "config-leader-election");
        assert_eq!(e.config_logging_name, "my-logging");
        assert!(matches!(
            env(&[("SYSTEM_NAMESPACE", "  ")]),
            Err(MainError::MissingSystemNamespace)
        ));
    }

    #[test]
    fn bad_numbers_are_rejected_with_the_fix() {
        let err = env(&[("SYSTEM_NAMESPACE", "ns"), ("K_THREADS_PER_CONTROLLER", "many")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "K_THREADS_PER_CONTROLLER=\"many\" is not valid: expected a positive whole number of workers per controller, such as 2"
        );
        let err = env(&[("SYSTEM_NAMESPACE", "ns"), ("METRICS_PROMETHEUS_PORT", "99999")]).unwrap_err();
        assert!(err.to_string().contains("TCP port"), "{err}");
    }

    mod reconcilers {
        pub(super) mod addressableservice {
            use kinject_runtime::controller::{Error, Impl, Reconciler};
            use kinject_runtime::injection::Context;

            struct Noop;

            impl Reconciler for Noop {
                async fn reconcile(
                    &self,
                    _key: &kinject_runtime::controller::ObjectKey,
                ) -> Result<kinject_runtime::controller::Action, Error> {
                    Ok(kinject_runtime::controller::Action::await_change())
                }
            }

            pub(crate) fn new_controller(ctx: &Context) -> Impl {
                // Registers an informer, as a real constructor does.
                let _ = ctx.informer::<k8s_openapi::api::core::v1::ConfigMap>();
                Impl::new("addressableservice", Noop, Default::default())
            }
        }
    }

    #[test]
    fn constructors_are_named_after_their_module() {
        use reconcilers::addressableservice;
        assert_eq!(
            crate::controller!(reconcilers::addressableservice::new_controller).name(),
            "addressableservice"
        );
        assert_eq!(
            crate::controller!(addressableservice::new_controller).name(),
            "addressableservice"
        );
        assert_eq!(
            Constructor::new("greeter", addressableservice::new_controller).name(),
            "greeter"
        );
    }

    /// An offline context: building controllers makes no request.
    fn offline_context() -> Context {
        let service = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("offline"))
        });
        Context::new(kube::Client::new(service, "default"))
    }

    #[tokio::test]
    async fn a_disabled_controller_is_never_built() {
        let constructors = [crate::controller!(
            reconcilers::addressableservice::new_controller
        )];
        let ctx = offline_context();
        let built = construct(&ctx, &constructors, &["addressableservice".to_owned()]).unwrap();
        assert!(built.is_empty());
        assert!(
            ctx.informer_descriptions().is_empty(),
            "{:?}",
            ctx.informer_descriptions()
        );

        let built = construct(&ctx, &constructors, &[]).unwrap();
        assert_eq!(built.len(), 1);
        assert_eq!(ctx.informer_descriptions().len(), 1);
        assert_eq!(
            built[0].informers.unsynced().len(),
            1,
            "the controller waits for the informer its constructor asked for"
        );

        let err = construct(&ctx, &constructors, &["addressablesvc".to_owned()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--disable-controllers names \"addressablesvc\", which is not a controller of this process; \
             the controllers are: addressableservice"
        );
    }

    #[test]
    fn config_maps_are_checked_with_the_start_up_parsers() {
        let data = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let err = check_config_map("config-logging", &data(&[("loglevel.webhook", "loud")]));
        assert_eq!(
            err,
            Some(Err(
                "invalid log level \"loud\" in loglevel.webhook; use one of debug, info, warn, error, dpanic, panic, fatal"
                    .to_owned()
            )),
            "every component's level is checked, not only this process's"
        );
        let err = check_config_map(
            "config-logging",
            &data(&[("zap-logger-config", r#"{"encoding": "xml"}"#)]),
        );
        assert_eq!(
            err,
            Some(Err(
                "invalid encoding \"xml\" in zap-logger-config; use \"json\" or \"console\"".to_owned()
            ))
        );
        let err = check_config_map("config-leader-election", &data(&[("buckets", "0")]))
            .unwrap()
            .unwrap_err();
        assert!(
            err.starts_with("buckets: value must be between 1 <= 0 <= 10"),
            "{err}"
        );
        assert!(
            check_config_map("config-observability", &data(&[("metrics-protocol", "none")])) == Some(Ok(()))
        );
        assert_eq!(check_config_map("config-network", &BTreeMap::new()), None);
    }

    #[test]
    fn metrics_protocols() {
        let with = |v: &str| metrics_enabled(&[("metrics-protocol".to_string(), v.to_string())].into());
        assert_eq!(metrics_enabled(&BTreeMap::new()), Ok(true));
        assert_eq!(with("prometheus"), Ok(true));
        assert_eq!(with("none"), Ok(false));
        assert!(with("grpc").unwrap_err().contains("not supported"));
        assert!(with("carrier-pigeon").is_err());
    }
}
