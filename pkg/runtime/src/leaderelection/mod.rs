//! Bucketed leader election (Knative's `knative.dev/pkg/leaderelection`).
//!
//! Each reconciler's keys are split into [`buckets`](Config::buckets) by
//! consistent hashing ([`BucketSet`]); each bucket is a `coordination.k8s.io/v1`
//! Lease in the system namespace. Every replica runs one elector per bucket
//! ([`spawn_electors`]); the replica holding a bucket's lease is *promoted*
//! for it ([`Impl::promote`]: its reconciler may write the bucket's keys, which
//! are re-enqueued on the slow lane) and *demoted* when it loses the lease
//! ([`Impl::demote`]). A replica writes the keys of the buckets it leads and
//! only observes the rest, so replicas share the work and a new leader takes
//! over a bucket without a restart. With HA disabled (`--disable-ha`), a
//! replica runs alone and [`promote_unopposed`] makes it lead every key; in a
//! StatefulSet, each pod can own the bucket of its ordinal without any
//! election ([`promote_ordinal`], see [below](#statefulset-ordinal-mode)).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::collections::BTreeMap;
//! use std::sync::Arc;
//! use kinject_runtime::controller::{Action, ControllerOptions, Error, Impl, ObjectKey, Reconciler};
//! use kinject_runtime::leaderelection::{Config, spawn_electors, unique_id};
//! use kinject_runtime::leader::LeaderAwareFuncs;
//! use tokio_util::sync::CancellationToken;
//!
//! struct Noop;
//! impl Reconciler for Noop {
//!     async fn reconcile(&self, _key: &ObjectKey) -> Result<Action, Error> { Ok(Action::await_change()) }
//! }
//!
//! // The in-memory API server stands in for a cluster here.
//! let client = kinject_testenv::TestEnv::builder().namespace("knative-samples").build().client();
//! // The data of the `config-leader-election` ConfigMap.
//! let data = BTreeMap::from([("buckets".to_owned(), "2".to_owned())]);
//! let config = Config::from_map(&data)?.component_config("controller");
//!
//! let leadership = Arc::new(LeaderAwareFuncs::new(None, None));
//! let controller = Impl::new(
//!     "addressableservice",
//!     Noop,
//!     ControllerOptions::default().leader_aware(leadership.clone()),
//! );
//! let shutdown = CancellationToken::new();
//! let electors = spawn_electors(client, "knative-samples", &controller, &config, &unique_id()?, shutdown.clone())?;
//!
//! // Alone, this replica soon leads both buckets.
//! while leadership.led_buckets().len() < 2 {
//!     tokio::time::sleep(std::time::Duration::from_millis(10)).await;
//! }
//! assert_eq!(
//!     leadership.led_buckets(),
//!     ["controller.addressableservice.00-of-02", "controller.addressableservice.01-of-02"]
//! );
//!
//! shutdown.cancel(); // demotes and releases both leases
//! electors.await?;
//! assert!(leadership.led_buckets().is_empty());
//! # Ok(())
//! # }
//! ```
//!
//! # Configuration and figures
//!
//! [`Config::from_map`] reads the `config-leader-election` ConfigMap
//! (sharedmain reads `$CONFIG_LEADERELECTION_NAME`, [`CONFIG_MAP_NAME_ENV`], for another name):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `buckets` | 1 | leases per reconciler, 1 to 10 |
//! | `lease-duration` (`leaseDuration`) | 60s | how long a lease stays valid after it was last seen to change |
//! | `renew-deadline` (`renewDeadline`) | 40s | how long a leader retries a failing renewal before it demotes itself |
//! | `retry-period` (`retryPeriod`) | 10s | the wait between attempts (candidates add up to 120 % jitter) |
//! | `map-lease-prefix.<component>.<queue>` | — | replaces that prefix of the lease names |
//!
//! Rules (client-go's, checked when the ConfigMap is read): `lease-duration` >
//! `renew-deadline` > 1.2 × `retry-period` > 0, and `lease-duration` ≥ 1s.
//!
//! Lease names are `<component>.<queue>.NN-of-MM`, lowercased, e.g.
//! `controller.addressableservice.00-of-02` for bucket 0 of 2 of the queue
//! ([`Impl::name`]) `addressableservice` in component `controller`.
//!
//! With the defaults, per bucket and replica:
//!
//! * **API load**: a leader updates its lease once per retry period (one
//!   `PUT`, 0.1/s); a candidate reads it once every 10–22s (one `GET`).
//! * **Graceful hand-over**: a replica that shuts down demotes, waits for
//!   its reconciles in flight, deletes its member lease, then releases its
//!   leases (holder cleared); the other
//!   replicas watch the leases, so one takes each over as soon as it sees
//!   the release (milliseconds; `a_replica_that_shuts_down_hands_over_its_buckets_within_a_retry_period`),
//!   and at the latest at its next attempt.
//! * **Even shares**: each replica keeps a member lease
//!   (`<prefix>.member-<id>`, renewed every retry period), and the live
//!   members assign each replica ⌊B/R⌋ or ⌈B/R⌉ of the B buckets, the same
//!   ones whichever replica computes it (rendezvous hashing of the members'
//!   and buckets' names). A replica tries only the buckets assigned to it,
//!   so replicas starting together never race for a lease nor hand one
//!   back (`replicas_started_together_take_their_own_buckets_and_hand_none_back`); a leader over
//!   its share gives up its excess at once, the buckets assigned to others
//!   first, and a bucket still free a retry period after its first attempt
//!   is taken by anyone. When the controller knows its keys (generated
//!   reconcilers do), the first replica by identity, once it sees others,
//!   publishes its count of keys per bucket on its member lease, and the
//!   assignment swaps buckets between replicas to even their keys, not just
//!   their buckets (`replicas_started_together_share_the_keys_evenly`). Three replicas of ten
//!   buckets lead 4/3/3 within a lease duration of the last one joining,
//!   whichever started first (`replicas_share_the_buckets_evenly_whichever_started_first`).
//!   One watch on the namespace's leases per controller, and one member
//!   lease write per retry period (on the first replica, with a count of
//!   the cached keys: about 0.15 s of CPU at 100,000 keys), are the cost.
//! * **Crash**: a candidate takes over a bucket 60s after it last saw the
//!   lease change, i.e. 60–104s after the leader's last renewal.
//! * **Partition**: a leader whose renewals fail demotes itself at most
//!   `retry-period` + `renew-deadline` = 50s after its last successful
//!   renewal, before any candidate can consider the lease expired (60s).
//!
//! Expiry is judged on the local clock only, as client-go does: a candidate
//! notes when it saw the lease's spec change and waits `leaseDurationSeconds`
//! from then. Replicas' clocks may disagree by any amount; the price is that a
//! lease left behind by a crashed holder is taken over one lease duration
//! after a new replica first sees it, however old its `renewTime` is.
//!
//! Each replica's `/metrics` tells how the work is split:
//! `leader_election_master_status{name}` is 1 for each bucket it leads, and
//! `kinject_bucket_keys{controller, name}` counts the keys of the
//! controller's kind in its cache that hash into each bucket, led or not
//! ([`WorkqueueMetrics`](crate::controller::WorkqueueMetrics)).
//!
//! # StatefulSet-ordinal mode
//!
//! Knative's other mode: run the controller as a StatefulSet with as many
//! replicas as buckets, and each pod owns one bucket for good, the one of its
//! ordinal, with no Lease at all (no Lease requests, no expiry to wait for).
//! [`StatefulSetConfig`] reads it from the environment, as Knative does:
//!
//! | variable | meaning |
//! |---|---|
//! | `STATEFUL_CONTROLLER_ORDINAL` | the pod's name, `<statefulset>-<ordinal>` (downward API `metadata.name`); setting it turns the mode on |
//! | `STATEFUL_SERVICE_NAME` | the StatefulSet's `spec.serviceName`; required in the mode |
//! | `STATEFUL_SERVICE_PORT` | a port for the bucket names (default 80) |
//! | `STATEFUL_SERVICE_PROTOCOL` | a scheme for the bucket names (default `http`) |
//!
//! The ordinal is what follows the pod name's last `-` and must be below
//! `buckets`: with B buckets, pods 0 to B−1 run, pod `i` owning bucket `i`. The buckets
//! are named after the pods' DNS names,
//! `http://controller-1.controller.<namespace>.svc.<cluster domain>:80`, so
//! a key hashes to the same ordinal as in a Knative controller; every
//! controller of the pod owns that same bucket, and
//! `leader_election_master_status` reports it under that name. sharedmain
//! logs "Running with StatefulSet leader election" in this mode and
//! "Running with Standard leader election" otherwise.
//!
//! What the mode trades: a pod that is down leaves its bucket's keys
//! unreconciled until the StatefulSet controller brings it back (a Lease
//! elsewhere would move within a lease duration), and scaling means
//! changing `buckets` and `replicas` together. In return there is no Lease
//! traffic and no hand-over at all, and which pod leads which keys is fixed.
//!
//! # Shutting down
//!
//! Cancelling the token passed to [`spawn_electors`] makes every elector
//! demote its bucket and release its lease; the returned handle completes when
//! all have. A reconcile already past its leadership check when its bucket is
//! demoted may still write, so before releasing, a leader waits for the
//! bucket's reconciles in flight ([`Impl::reconciles_finished`]), at most until
//! its lease would expire; a bucket given up to the replica it is assigned to is
//! released the same way
//! (`a_bucket_given_up_is_released_once_its_reconciles_have_finished`;
//! without the wait, the controller's churn e2e test saw status writes land
//! 1–2 revisions, up to 4 ms, after the release of a bucket given up).
//! sharedmain stops the controllers' workers before the electors, so at
//! shutdown nothing is in flight by then.
//!
//! A leader that *loses* its lease (found taken over, or renewals failing
//! past the renew deadline) demotes without waiting: the lease is no longer
//! its own to hold back. A reconcile past its check may then still write
//! within the `lease-duration` − `renew-deadline` margin, as in Knative.
//!
//! # Why not kube-lease-manager
//!
//! `kube-lease-manager` (0.13, the one leader-election crate on kube 5) was
//! considered and not used:
//!
//! * **No renew deadline.** Its holder renews `grace` seconds before expiry;
//!   when renewals fail it logs, backs off and retries, and keeps reporting
//!   itself leader until an attempt gets through, however long that takes. A
//!   leader whose lease requests fail (or that was paused) goes on writing
//!   after another replica has taken the lease. Knative's `renewDeadline` <
//!   `leaseDuration` rule exists to prevent exactly that.
//! * **Another timing model.** It has whole-second `duration` and `grace`
//!   settings; `retryPeriod`, sub-second periods and the jitter of Knative's
//!   ConfigMap have no counterpart.
//! * **Clock-skew dependent.** It compares the lease's `renewTime` plus
//!   duration with the local clock; client-go (and this module) measure
//!   validity from when the change was observed, which tolerates skew.
//! * **Writes.** It acquires with server-side apply, then bumps
//!   `leaseTransitions` with a second, strategic-merge patch, and takes over an
//!   expired lease by a strategic-merge "force release" that carries no
//!   precondition. client-go's single `PUT` with the observed
//!   `resourceVersion` makes every acquisition atomic (a 409 means another
//!   replica won) and leaves leases exactly as Knative's Go controllers and
//!   `kubectl` users expect (release: empty holder, `leaseDurationSeconds: 1`).
//! * **Shape and tests.** One manager per lease exposes a `bool` channel; the
//!   promote/demote-per-bucket callbacks would still be ours. Its tests need a
//!   k3s container; this elector is under 400 lines and is tested against
//!   `testenv` in seconds.
//!
//! # Differences from Knative
//!
//! * A leader demotes *before* releasing its lease (client-go releases, then
//!   calls `OnStoppedLeading`), waits for the bucket's reconciles in flight,
//!   and releases only a lease the API server says it still holds (client-go
//!   trusts its last observation, so it can clear a lease another replica
//!   has just taken).
//! * A leader that finds its lease held by someone else demotes at once
//!   (client-go keeps trying until the renew deadline).
//! * A controller's workers start once every elector of its buckets has
//!   made its first attempt at its lease, after the Leases are listed and a
//!   second's grace for replicas started together ([`Impl::run`]). Knative
//!   starts the workers beside the electors, so each key queued at start is
//!   reconciled as a non-leader's, then again when its bucket's promotion
//!   re-enqueues it (`a_start_reconciles_each_key_once_as_its_leader`). A
//!   lease another replica holds holds nothing back: the first attempt finds
//!   it taken, and the workers start
//!   (`a_lease_held_elsewhere_does_not_hold_the_workers_back`).
//! * The timing rules are checked when the ConfigMap is read, not when the
//!   first controller starts electing, and a lease shorter than 1s is refused.
//! * `map-lease-prefix` keys need the dot (`map-lease-prefix.<prefix>`); Knative
//!   takes any single character after `map-lease-prefix`.
//! * Buckets are shared evenly among the live replicas, and a released
//!   bucket is taken as soon as its release is seen (Knative: first come,
//!   first served, at the next attempt).
//! * `STATEFUL_*` variables that cannot be used (an ordinal that is not a
//!   number or not below `buckets`, no service name, a port that is not a
//!   number) stop the process with the variable, its value and the fix;
//!   Knative silently falls back to Lease elections, where a pod meant to own
//!   one bucket competes for all of them. The service name must be a
//!   Service's name, and the port a port number (Knative takes any text).
//! * Not (yet) here: changing a [`BucketSet`]'s names in place, and a
//!   configurable maximum bucket count.

mod config;
mod elector;
mod hash;
mod peers;
mod statefulset;

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use config::{
    CONFIG_MAP_NAME, CONFIG_MAP_NAME_ENV, ComponentConfig, Config, ConfigError, DEFAULT_BUCKETS,
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, JITTER_FACTOR, MAX_BUCKETS,
};
use hash::KeysPerBucket;
pub use hash::{BucketSet, HashBucket, choose_subset};
pub use peers::KEYS_ANNOTATION;
pub use statefulset::{
    ORDINAL_ENV, SERVICE_NAME_ENV, SERVICE_PORT_ENV, SERVICE_PROTOCOL_ENV, StatefulSetConfig,
    StatefulSetError, parse_pod_name,
};

use crate::apis::validation::is_dns1123_subdomain;
use crate::controller::{BucketKeysProbe, Impl};
use crate::leader::{Bucket, UniversalBucket};
use elector::{LeaseElector, Timing};
use peers::Peers;

/// Starts leader election for one controller: one elector per bucket of
/// `config.bucket_set(controller.name())`, each running a Lease in `namespace`
/// (the system namespace) under `identity` ([`unique_id`]).
///
/// Each elector promotes the controller for its bucket when it acquires the
/// lease and demotes it when the lease is lost, and keeps trying until
/// `shutdown` is cancelled; then leaders demote and release their leases, and
/// the returned handle completes. Aborting the handle stops the electors
/// without releasing anything, as a crash would.
///
/// Fails, before anything runs, when the config breaks a rule of
/// [`ComponentConfig::validate`], the controller was not built leader-aware
/// ([`ControllerOptions::leader_aware`]), a lease name is not a valid object
/// name, `namespace` or `identity` is empty, or no Tokio runtime is running.
///
/// [`ControllerOptions::leader_aware`]: crate::controller::ControllerOptions::leader_aware
pub fn spawn_electors(
    client: kube::Client,
    namespace: &str,
    controller: &Impl,
    config: &ComponentConfig,
    identity: &str,
    shutdown: CancellationToken,
) -> Result<JoinHandle<()>, ElectorError> {
    config.validate()?;
    if namespace.is_empty() {
        return Err(ElectorError::MissingNamespace);
    }
    if identity.is_empty() {
        return Err(ElectorError::EmptyIdentity);
    }
    let queue = controller.name();
    if !controller.is_leader_aware() {
        return Err(ElectorError::NotLeaderAware {
            queue: queue.to_owned(),
        });
    }
    let buckets = config.bucket_set(queue);
    for name in buckets.names() {
        let problems = is_dns1123_subdomain(name);
        if !problems.is_empty() {
            return Err(ElectorError::InvalidLeaseName {
                name: name.clone(),
                prefix: format!("{}.{}", config.component, queue),
                problems,
            });
        }
    }
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| ElectorError::NoRuntime)?;
    count_bucket_keys(controller, &buckets);

    let api: Api<Lease> = Api::namespaced(client, namespace);
    let timing = Timing {
        lease_duration: config.lease_duration,
        renew_deadline: config.renew_deadline,
        retry_period: config.retry_period,
    };
    let mut electors = JoinSet::new();
    let peers = Peers::new(
        api.clone(),
        identity,
        buckets.names().to_vec(),
        keys_per_bucket(controller, &buckets),
        config.lease_duration,
        config.retry_period,
    );
    electors.spawn_on(peers.clone().run(shutdown.clone()).in_current_span(), &runtime);
    for (ordinal, bucket) in buckets.buckets().into_iter().enumerate() {
        let name = bucket.name().to_owned();
        tracing::info!("{name} will run in leader-elected mode with id {identity:?}");
        let elector = LeaseElector::new(
            api.clone(),
            namespace,
            &name,
            identity,
            timing,
            Some((peers.clone(), ordinal)),
        )
        .first_election(controller.first_election());
        let span = tracing::info_span!("leaderelection", "knative.dev/controller" = %queue, lease = %name);
        electors.spawn_on(
            elector
                .run(controller.clone(), bucket, shutdown.clone())
                .instrument(span),
            &runtime,
        );
    }
    let queue = queue.to_owned();
    let watch = async move {
        while let Some(joined) = electors.join_next().await {
            if let Err(err) = joined
                && err.is_panic()
            {
                tracing::error!(
                    "knative.dev/controller" = %queue,
                    "A leader elector panicked (in a promote or demote hook?); its bucket's lease expires \
                     and another replica takes it over: {err}"
                );
            }
        }
    };
    Ok(runtime.spawn(watch.in_current_span()))
}

/// Makes `controller` lead every key, without elections: for a replica that
/// runs alone (`--disable-ha`). Knative's unopposed elector: the controller is
/// promoted for the [`UniversalBucket`] without re-enqueuing anything, since
/// its informers deliver every object anyway.
pub fn promote_unopposed(controller: &Impl) {
    controller.promote_initial(Arc::new(UniversalBucket));
}

/// Makes `controller` lead `bucket` for good, without elections: the
/// StatefulSet-ordinal mode, where the pod with ordinal `i` owns bucket `i`
/// ([`StatefulSetConfig::own_bucket`]). Knative's unopposed elector over the
/// pod's bucket: the controller is promoted at once (its cached keys of the
/// bucket enqueued, `leader_election_master_status` 1 for the bucket) and
/// never demoted, since no other pod ever owns the bucket.
///
/// Fails, promoting nothing, when the controller was not built leader-aware:
/// it would write every key, the other pods' too.
pub fn promote_ordinal(controller: &Impl, bucket: &HashBucket) -> Result<(), ElectorError> {
    let queue = controller.name();
    if !controller.is_leader_aware() {
        return Err(ElectorError::NotLeaderAware {
            queue: queue.to_owned(),
        });
    }
    count_bucket_keys(controller, bucket.set());
    tracing::info!(
        "knative.dev/controller" = %queue,
        "{queue} will run in StatefulSet ordinal assignment mode with bucket name {} (leads 1 of {} buckets)",
        bucket.name(),
        bucket.set().names().len()
    );
    controller.promote(Arc::new(bucket.clone()));
    Ok(())
}

/// Has the metrics count `controller`'s keys per bucket of `buckets`
/// (`kinject_bucket_keys`), when it knows its keys.
fn count_bucket_keys(controller: &Impl, buckets: &BucketSet) {
    if let Some(counter) = keys_per_bucket(controller, buckets) {
        controller.count_bucket_keys(Arc::new(counter));
    }
}

/// What counts `controller`'s keys per bucket of `buckets`, when it knows its
/// keys.
fn keys_per_bucket(controller: &Impl, buckets: &BucketSet) -> Option<KeysPerBucket> {
    controller.key_source().map(|keys| KeysPerBucket {
        buckets: buckets.clone(),
        keys,
    })
}

impl BucketKeysProbe for KeysPerBucket {
    fn count(&self) -> Vec<(String, usize)> {
        self.buckets
            .names()
            .iter()
            .cloned()
            .zip(self.count_all())
            .collect()
    }
}

/// A version 4 uuid from fastrand's generator, which seeds itself from the
/// process's random hash keys: unique enough for an identity.
fn random_uuid() -> uuid::Uuid {
    let mut bytes = [0; 16];
    fastrand::fill(&mut bytes);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

/// A unique identity for this replica's leases: `<hostname>_<uuid>`, so that
/// two processes on one host never share one.
pub fn unique_id() -> std::io::Result<String> {
    let host = hostname::get()?;
    Ok(format!("{}_{}", host.to_string_lossy(), random_uuid()))
}

/// Why [`spawn_electors`] could not start.
///
/// The alternate form (`{:#}`) appends how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ElectorError {
    /// The config breaks a rule.
    Config(ConfigError),
    /// The controller was not built leader-aware.
    NotLeaderAware {
        /// The controller's queue name.
        queue: String,
    },
    /// A lease name is not a valid object name (DNS-1123 subdomain).
    InvalidLeaseName {
        /// The lease name.
        name: String,
        /// Its prefix, `<component>.<queue>`, as `map-lease-prefix` keys name it.
        prefix: String,
        /// What is wrong with it, in apimachinery's words.
        problems: Vec<String>,
    },
    /// No namespace to keep the leases in.
    MissingNamespace,
    /// No identity to hold the leases under.
    EmptyIdentity,
    /// Called outside a Tokio runtime.
    NoRuntime,
}

impl ElectorError {
    /// How to fix it, in a sentence.
    pub fn hint(&self) -> String {
        match self {
            ElectorError::Config(err) => err.hint().to_owned(),
            ElectorError::NotLeaderAware { .. } => {
                "build its Impl with ControllerOptions::leader_aware (generated \
                 reconcilers do), or run with --disable-ha"
                    .to_owned()
            }
            ElectorError::InvalidLeaseName { prefix, .. } => format!(
                "set map-lease-prefix.{prefix} in the {CONFIG_MAP_NAME} ConfigMap to a \
                 lowercase DNS subdomain (letters, digits, '-' and '.'), or remove it"
            ),
            ElectorError::MissingNamespace => {
                "set SYSTEM_NAMESPACE to the namespace the controller runs in".to_owned()
            }
            ElectorError::EmptyIdentity => "pass leaderelection::unique_id()".to_owned(),
            ElectorError::NoRuntime => "call spawn_electors from within a Tokio runtime".to_owned(),
        }
    }
}

impl fmt::Display for ElectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElectorError::Config(err) => return fmt::Display::fmt(err, f),
            ElectorError::NotLeaderAware { queue } => write!(
                f,
                "{queue} is not leader-aware, all reconcilers must be leader-aware to enable fine-grained \
                 leader election."
            )?,
            ElectorError::InvalidLeaseName { name, problems, .. } => {
                write!(f, "invalid lease name {name:?}: {}", problems.join("; "))?
            }
            ElectorError::MissingNamespace => f.write_str("no namespace for the leader election leases")?,
            ElectorError::EmptyIdentity => f.write_str("Lock identity is empty")?,
            ElectorError::NoRuntime => f.write_str("leader election needs a Tokio runtime")?,
        }
        if f.alternate() {
            write!(f, " ({})", self.hint())?;
        }
        Ok(())
    }
}

/// No source: the config error's message is this error's message.
impl std::error::Error for ElectorError {}

impl From<ConfigError> for ElectorError {
    fn from(err: ConfigError) -> Self {
        ElectorError::Config(err)
    }
}
