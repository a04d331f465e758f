//! The last phase of a process: serve probes and metrics, start the
//! informers, elect leaders and run the controllers until shutdown.

use std::sync::Arc;
use std::time::Duration;

use kinject_runtime::controller::Impl;
use kinject_runtime::injection::{Context, describe_unsynced};
use kinject_runtime::leaderelection;
use prometheus_client::registry::Registry;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::config_maps::{Kept, announce_start_config_edits, follow_logging_config};
use crate::controllers::Built;
use crate::error::MainError;
use crate::servers;
use crate::setup::Setup;

/// How long informers get to list before the process gives up.
const CACHE_SYNC_TIMEOUT: Duration = Duration::from_secs(60);

impl Setup {
    /// Phase 4: serves probes and metrics, starts the informers `ctx` was
    /// asked for, elects leaders (or leads everything with `--disable-ha`) and
    /// runs each controller once its own informers have synced, so one whose
    /// kind is not served yet (CRD missing, RBAC missing) holds back no other
    /// and starts by itself when it is (its workers also wait for the first
    /// attempt at each of its leases, see `Impl::run`, so a key is not
    /// reconciled before and again after its bucket's promotion); until
    /// `shutdown`, then lets reconciles in flight finish, releases the
    /// leases and stops.
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
                Kept::new(&self.election, self.serve_metrics),
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

    /// Starts one elector per controller and bucket; or, in a StatefulSet
    /// pod, promotes every controller for the pod's own bucket; or, with
    /// `--disable-ha`, for every key.
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
        if let Some(bucket) = &self.own_bucket {
            tracing::info!(
                bucket = %kinject_runtime::leader::Bucket::name(bucket),
                buckets = self.election.buckets,
                "Running with StatefulSet leader election"
            );
            for controller in controllers {
                leaderelection::promote_ordinal(controller, bucket).map_err(|e| {
                    MainError::Serve(format!("cannot lead this StatefulSet pod's bucket: {e:#}"))
                })?;
            }
            return Ok(Vec::new());
        }
        let identity = leaderelection::unique_id()
            .map_err(|e| MainError::Serve(format!("cannot name this replica for leader election: {e}")))?;
        tracing::info!(
            identity = %identity,
            buckets = self.election.buckets,
            "Running with Standard leader election"
        );
        controllers
            .iter()
            .map(|controller| {
                leaderelection::spawn_electors(
                    self.lease_client.clone(),
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
