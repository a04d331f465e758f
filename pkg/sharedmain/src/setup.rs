//! The phases before a process runs its controllers: read the flags,
//! environment and configuration, build the one injection context, build
//! the controllers.

use std::io::IsTerminal;

use kinject_runtime::controller::WorkqueueMetrics;
use kinject_runtime::informer::InformerMetrics;
use kinject_runtime::injection::{Constructor, Context};
use kinject_runtime::leaderelection;
use kinject_runtime::network;
use kinject_runtime::reconciler::{ReconcileMetrics, ThreadsPerController};
use kube::{Client, Config};
use prometheus_client::registry::Registry;

use crate::client::{client_limits, kube_config};
use crate::client_layers::{RateLimitLayer, RequestMetricsLayer};
use crate::config_maps::{leader_election_config, logging_config, metrics_enabled, read_config_map};
use crate::controllers::{Built, construct};
use crate::env::Env;
use crate::error::MainError;
use crate::flags::Flags;
use crate::{logging, process_metrics};

/// What the process learned before building controllers: flags, environment,
/// the client, and the three configuration ConfigMaps.
pub struct Setup {
    component: String,
    pub(crate) flags: Flags,
    pub(crate) env: Env,
    config: Config,
    pub(crate) client: Client,
    watch_client: Client,
    /// Leader election's: the same limits as `client`, in a token bucket of
    /// its own.
    pub(crate) lease_client: Client,
    pub(crate) registry: Registry,
    workqueue_metrics: WorkqueueMetrics,
    reconcile_metrics: ReconcileMetrics,
    informer_metrics: InformerMetrics,
    pub(crate) levels: logging::LevelHandle,
    pub(crate) election: leaderelection::ComponentConfig,
    /// In the StatefulSet-ordinal mode, the bucket this pod owns.
    pub(crate) own_bucket: Option<leaderelection::HashBucket>,
    pub(crate) serve_metrics: bool,
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
        // One token bucket for the controllers' clients: the limit is the
        // process's.
        let rate_limit = RateLimitLayer::new(qps, burst);
        let build_client = |config: kube::Config, rate_limit: &RateLimitLayer| -> Result<Client, MainError> {
            Ok(kube::client::ClientBuilder::try_from(config)
                .map_err(|e| {
                    MainError::Kubeconfig(format!("cannot build a client from the kubeconfig: {e}"))
                })?
                .with_layer(rate_limit)
                .with_layer(&request_metrics)
                .build())
        };
        let client = build_client(config.clone(), &rate_limit)?;
        // Leases wait behind no write, as kube-controller-manager's leader
        // election has a client of its own: a replica whose member lease
        // queued behind a burst of writes went unseen, and the other replicas
        // took its buckets and handed them over seconds later.
        let lease_client = build_client(config.clone(), &RateLimitLayer::new(qps, burst))?;
        // Informers watch without kube's retries of 429/503/504: a watch
        // refused as "Too large resource version" must reach the informer at
        // once (it lists again), and the watcher retries with its own backoff.
        let mut watch_config = config.clone();
        watch_config.default_retry = false;
        let watch_client = build_client(watch_config, &rate_limit)?;

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
        let own_bucket = stateful_set_bucket(&env, flags.disable_ha, election.buckets)?;
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
            lease_client,
            registry,
            workqueue_metrics,
            reconcile_metrics,
            informer_metrics,
            levels,
            election,
            own_bucket,
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
}

/// The bucket a StatefulSet pod owns: `None` unless `STATEFUL_CONTROLLER_ORDINAL`
/// is set and HA is on (with `--disable-ha` a replica leads every key, as in
/// Knative). Fails when the ordinal is not below the bucket count.
fn stateful_set_bucket(
    env: &Env,
    disable_ha: bool,
    buckets: u32,
) -> Result<Option<leaderelection::HashBucket>, MainError> {
    let Some(pod) = &env.stateful_set else {
        return Ok(None);
    };
    if disable_ha {
        tracing::warn!(
            pod = %pod.pod_name,
            "{} is ignored with --disable-ha: this replica leads every key",
            leaderelection::ORDINAL_ENV
        );
        return Ok(None);
    }
    // The names must match the other pods' and the Context's, which read the
    // cluster domain the same way.
    let domain = match env.cluster_domain.as_deref() {
        Some(given) => network::domain_from(Some(given), ""),
        None => network::detect_cluster_domain(),
    };
    Ok(Some(pod.own_bucket(buckets, &env.system_namespace, &domain)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Env::from_lookup(|name| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn pod(ordinal: &str) -> Env {
        env(&[
            ("SYSTEM_NAMESPACE", "knative-samples"),
            ("CLUSTER_DOMAIN", "cluster.local"),
            ("STATEFUL_CONTROLLER_ORDINAL", ordinal),
            ("STATEFUL_SERVICE_NAME", "controller"),
        ])
    }

    #[test]
    fn a_statefulset_pod_owns_the_bucket_of_its_ordinal_unless_ha_is_off() {
        use kinject_runtime::leader::Bucket as _;

        let own = stateful_set_bucket(&pod("controller-1"), false, 2)
            .unwrap()
            .unwrap();
        assert_eq!(
            own.name(),
            "http://controller-1.controller.knative-samples.svc.cluster.local:80"
        );
        assert!(
            stateful_set_bucket(&pod("controller-1"), true, 2)
                .unwrap()
                .is_none()
        );
        let standard = env(&[("SYSTEM_NAMESPACE", "knative-samples")]);
        assert!(stateful_set_bucket(&standard, false, 2).unwrap().is_none());
    }

    #[test]
    fn an_ordinal_past_the_buckets_stops_the_process_saying_what_to_change() {
        let err = stateful_set_bucket(&pod("controller-2"), false, 2).unwrap_err();
        assert_eq!(
            err.to_string(),
            "STATEFUL_CONTROLLER_ORDINAL=\"controller-2\" is not valid: ordinal 2 is out of range [0, 2), as \
             each pod of the StatefulSet owns the bucket of its ordinal; run 2 replicas (spec.replicas: 2) \
             or set buckets to 3 in the config-leader-election ConfigMap"
        );
    }
}
