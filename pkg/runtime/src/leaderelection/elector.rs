//! One bucket's election: a `coordination.k8s.io/v1` Lease run with client-go's
//! `LeaderElector` rules (`tryAcquireOrRenew`, `acquire`, `renew`, `release`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::time::{Instant, sleep, timeout, timeout_at};
use tokio_util::sync::CancellationToken;

use super::config::{CONFIG_MAP_NAME, JITTER_FACTOR};
use super::hash::HashBucket;
use super::peers::Peers;
use crate::controller::{FirstElection, Impl};
use crate::duration::go_duration;
use crate::leader::Bucket;

/// The three timings of an election.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timing {
    pub(crate) lease_duration: Duration,
    pub(crate) renew_deadline: Duration,
    pub(crate) retry_period: Duration,
}

/// How an acquisition loop ended without the lease.
enum Stopped {
    /// Between attempts: nothing can have been written.
    Idle,
    /// During an attempt, whose write may have gone through.
    MidAttempt,
}

/// The outcome of one attempt to acquire or renew the lease.
enum Attempt {
    /// This elector holds the lease.
    Held,
    /// Someone else holds it, and it has not expired.
    HeldBy(String),
    /// It is free, and left to the replica its bucket is assigned to.
    Declined,
    /// The API call failed, or another candidate wrote first.
    Failed,
}

/// How a term of leadership ended.
enum Ending {
    Shutdown,
    Lost,
    /// Given up because this replica leads more than its share.
    Yielded,
}

/// The elector of one lease (client-go's `LeaderElector` over a `LeaseLock`).
///
/// Whether a lease is still valid is judged by the local clock only: a
/// candidate notes *when it saw the lease spec change* and treats the lease
/// as expired `leaseDurationSeconds` after that, never comparing the lease's
/// `renewTime` with its own clock. This tolerates any clock skew between
/// replicas, at the cost of waiting a full lease duration after first seeing
/// a lease whose holder is already gone.
pub(crate) struct LeaseElector {
    api: Api<Lease>,
    describe: String,
    namespace: String,
    name: String,
    identity: String,
    timing: Timing,
    /// The lease as last read or written: the base, with its
    /// resourceVersion, of the next update.
    lease: Option<Lease>,
    /// The spec this elector last saw or wrote, and when.
    observed: LeaseSpec,
    observed_time: Option<Instant>,
    /// The spec last read from the API server, to notice changes.
    observed_raw: Option<LeaseSpec>,
    /// The controller's replicas, and this lease's bucket ordinal.
    peers: Option<(Peers, usize)>,
    /// When this elector first left the free lease to others.
    declined_since: Option<Instant>,
    /// Holds the controller's workers back until the first attempt is over.
    first_election: Option<FirstElection>,
}

impl LeaseElector {
    pub(crate) fn new(
        api: Api<Lease>,
        namespace: &str,
        name: &str,
        identity: &str,
        timing: Timing,
        peers: Option<(Peers, usize)>,
    ) -> Self {
        LeaseElector {
            api,
            describe: format!("{namespace}/{name}"),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            timing,
            lease: None,
            observed: LeaseSpec::default(),
            observed_time: None,
            observed_raw: None,
            peers,
            declined_since: None,
            first_election: None,
        }
    }

    /// Lets the controller's workers start once this elector's first attempt
    /// is over: after the promotion when it took the lease.
    pub(crate) fn first_election(mut self, guard: FirstElection) -> Self {
        self.first_election = Some(guard);
        self
    }

    /// Elects until `shutdown`: acquires, promotes, renews, and on losing the
    /// lease demotes, releases and tries again. On shutdown a leader demotes,
    /// then releases the lease so a successor need not wait for it to expire.
    pub(crate) async fn run(mut self, controller: Impl, bucket: HashBucket, shutdown: CancellationToken) {
        let bucket: Arc<dyn Bucket> = Arc::new(bucket);
        loop {
            if let Err(stopped) = self.acquire(&shutdown).await {
                if matches!(stopped, Stopped::MidAttempt) {
                    // The write of the interrupted attempt may have landed.
                    self.release().await;
                }
                return;
            }
            // Noted outside the log macro, which skips its arguments when
            // nothing listens.
            let counts = self.note(true);
            tracing::info!(
                "{:?} has started leading {:?}{counts}",
                self.identity,
                bucket.name()
            );
            controller.promote(bucket.clone());
            self.first_election = None;
            let ending = self.renew(&shutdown).await;
            // Demote before releasing, so that this replica has stopped writing
            // the bucket's keys by the time another may lead it. (client-go
            // releases first and calls OnStoppedLeading after.)
            controller.demote(bucket.as_ref());
            // A lost lease is no longer this replica's to hold back.
            if !matches!(ending, Ending::Lost) {
                self.finish_reconciles(&controller, bucket.as_ref()).await;
            }
            let why = if matches!(ending, Ending::Yielded) {
                ", to even out the buckets among the replicas"
            } else {
                ""
            };
            let counts = self.note(false);
            tracing::info!(
                "{:?} has stopped leading {:?}{why}{counts}",
                self.identity,
                bucket.name()
            );
            if let (Ending::Shutdown, Some((peers, _))) = (&ending, &self.peers) {
                // The others' shares grow before this lease reaches them.
                peers.leave().await;
            }
            self.release().await;
            if let Ending::Shutdown = ending {
                return;
            }
        }
    }

    /// Waits, before a lease this replica still holds is released, for the
    /// bucket's reconciles that passed their leadership check before the
    /// demotion: they may still write, and once the lease is released
    /// another replica may lead the same keys. Bounded by the lease's
    /// validity, past which another replica may take it over anyway.
    async fn finish_reconciles(&self, controller: &Impl, bucket: &dyn Bucket) {
        let Some(valid_until) = self.valid_until() else {
            return;
        };
        if timeout_at(valid_until, controller.reconciles_finished(bucket))
            .await
            .is_err()
        {
            tracing::warn!(
                "Reconciles of {:?} were still running when lease {} expired; they may write while \
                 another replica leads its keys",
                bucket.name(),
                self.describe
            );
        }
    }

    /// Tries every retry period (jittered up to `JITTER_FACTOR` more) until
    /// the lease is acquired (`Ok`) or `shutdown` (`Err`).
    async fn acquire(&mut self, shutdown: &CancellationToken) -> Result<(), Stopped> {
        tracing::info!("Attempting to acquire leader lease {}...", self.describe);
        // Whether to wait before the next attempt: not before the first,
        // unless the bucket is another replica's.
        let mut wait = false;
        if let Some((peers, ordinal)) = &self.peers {
            tokio::select! {
                () = shutdown.cancelled() => return Err(Stopped::Idle),
                () = peers.listed() => {}
            }
            // Another replica's bucket: it gets the first go, and this
            // replica's workers need not wait for the lease. Should the
            // bucket still be free a retry period from now, it is taken.
            if !peers.may_take(*ordinal) {
                self.first_election = None;
                self.declined_since = Some(Instant::now());
                wait = true;
            }
        }
        loop {
            if std::mem::replace(&mut wait, true) {
                self.released_or_retry(shutdown).await?;
            }
            if shutdown.is_cancelled() {
                return Err(Stopped::Idle);
            }
            let attempt = tokio::select! {
                biased;
                () = shutdown.cancelled() => return Err(Stopped::MidAttempt),
                attempt = self.try_acquire_or_renew() => attempt,
            };
            if let Attempt::Held = attempt {
                tracing::info!("Successfully acquired lease {}", self.describe);
                return Ok(());
            }
            // Led by another, left to others, or out of reach for now: the
            // workers need not wait for the lease any longer.
            self.first_election = None;
            if let Attempt::Declined = attempt {
                tracing::debug!(
                    "Lease {} is free; left for a retry period to the replica its bucket is assigned to",
                    self.describe
                );
            } else {
                tracing::debug!("Failed to acquire lease {}", self.describe);
            }
        }
    }

    /// Waits a retry period (jittered), or less when the lease is released
    /// by its leader: then the next attempt comes at once.
    async fn released_or_retry(&self, shutdown: &CancellationToken) -> Result<(), Stopped> {
        let released = async {
            match &self.peers {
                Some((peers, ordinal)) => peers.released(*ordinal).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = shutdown.cancelled() => Err(Stopped::Idle),
            () = released => Ok(()),
            () = sleep(jittered(self.timing.retry_period)) => Ok(()),
        }
    }

    /// Renews every retry period. A renewal is retried every retry period
    /// until it succeeds; when it has not succeeded within the renew deadline,
    /// leadership is over. So it is, at once, when the lease turns out to be
    /// held by someone else (client-go keeps retrying until the deadline).
    async fn renew(&mut self, shutdown: &CancellationToken) -> Ending {
        let Timing {
            renew_deadline,
            retry_period,
            ..
        } = self.timing;
        loop {
            let deadline = Instant::now() + renew_deadline;
            let renewed = tokio::select! {
                biased;
                () = shutdown.cancelled() => return Ending::Shutdown,
                renewed = timeout_at(deadline, self.renew_until_success()) => renewed,
            };
            match renewed {
                Ok(Ok(())) => {
                    if let Some((peers, ordinal)) = &self.peers
                        && peers.should_yield(*ordinal)
                    {
                        return Ending::Yielded;
                    }
                }
                Ok(Err(holder)) => {
                    tracing::info!("Lease {} has been taken over by {holder:?}", self.describe);
                    return Ending::Lost;
                }
                Err(_elapsed) => {
                    tracing::info!(
                        "Failed to renew lease {}: no renewal succeeded within the renew deadline ({})",
                        self.describe,
                        go_duration(renew_deadline)
                    );
                    return Ending::Lost;
                }
            }
            tracing::trace!("Successfully renewed lease {}", self.describe);
            let next = Instant::now() + retry_period;
            loop {
                let shares_changed = async {
                    match &self.peers {
                        Some((peers, _)) => peers.shares_changed().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    biased;
                    () = shutdown.cancelled() => return Ending::Shutdown,
                    () = tokio::time::sleep_until(next) => break,
                    // A replica joined or left, or this one took a bucket
                    // past its share: give this bucket up now if it is one
                    // of the excess, else renew as planned.
                    () = shares_changed => {
                        if let Some((peers, ordinal)) = &self.peers
                            && peers.should_yield(*ordinal)
                        {
                            return Ending::Yielded;
                        }
                    }
                }
            }
        }
    }

    /// Ok once renewed; the holder's identity if someone else holds the lease.
    async fn renew_until_success(&mut self) -> Result<(), String> {
        loop {
            match self.try_acquire_or_renew().await {
                Attempt::Held => return Ok(()),
                Attempt::HeldBy(holder) => return Err(holder),
                Attempt::Failed | Attempt::Declined => sleep(self.timing.retry_period).await,
            }
        }
    }

    /// client-go's `tryAcquireOrRenew`.
    async fn try_acquire_or_renew(&mut self) -> Attempt {
        let now = now_micro();
        let desired = LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            // Whole seconds, truncated, as client-go writes them.
            lease_duration_seconds: Some(
                i32::try_from(self.timing.lease_duration.as_secs()).unwrap_or(i32::MAX),
            ),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        };

        // 1. The leader's fast path: update the lease as last seen, assuming
        //    nobody else wrote it since.
        if self.is_leader() && self.is_lease_valid(Instant::now()) && self.lease.is_some() {
            let mut renewed = desired.clone();
            renewed.acquire_time = self.observed.acquire_time.clone();
            renewed.lease_transitions = self.observed.lease_transitions;
            match self.update(renewed.clone()).await {
                Ok(()) => {
                    self.set_observed(renewed);
                    return Attempt::Held;
                }
                // Read the lease again (the slow path below).
                Err(err) => self.log_failure("renew", &err),
            }
        }

        // 2. Read the lease, or create it.
        let spec = match self.read_or_create(&desired).await {
            Ok(spec) => spec,
            Err(attempt) => return attempt,
        };

        // 3. A changed spec restarts the lease's clock; a valid lease held by
        //    someone else is left alone.
        if self.observed_raw.as_ref() != Some(&spec) {
            self.set_observed(spec.clone());
            self.observed_raw = Some(spec.clone());
        }
        let holder = spec.holder_identity.as_deref().unwrap_or_default();
        if !holder.is_empty() && self.is_lease_valid(Instant::now()) && !self.is_leader() {
            tracing::trace!(
                "Lease {} is held by {holder:?} and has not yet expired",
                self.describe
            );
            self.declined_since = None;
            return Attempt::HeldBy(holder.to_owned());
        }
        if !self.is_leader() && !self.willing() {
            return Attempt::Declined;
        }
        self.take(spec, desired).await
    }

    /// Whether to take this free (or expired) lease: when the replicas assign
    /// its bucket to this one, or when it has been left to the others for a
    /// retry period and nobody took it.
    fn willing(&mut self) -> bool {
        let Some((peers, ordinal)) = &self.peers else {
            return true;
        };
        if peers.may_take(*ordinal) {
            self.declined_since = None;
            return true;
        }
        let now = Instant::now();
        let since = *self.declined_since.get_or_insert(now);
        if now.saturating_duration_since(since) >= self.timing.retry_period {
            self.declined_since = None;
            return true;
        }
        false
    }

    /// Notes a change of leadership with the controller's replicas: " (leads
    /// N of B buckets)" for the log line.
    fn note(&self, leading: bool) -> String {
        match &self.peers {
            Some((peers, ordinal)) => {
                let (held, of) = peers.note(*ordinal, leading);
                format!(" (leads {held} of {of} buckets)")
            }
            None => String::new(),
        }
    }

    /// The lease's spec as the API server has it; when there is no lease, it
    /// is created as `desired` and the attempt ends.
    async fn read_or_create(&mut self, desired: &LeaseSpec) -> Result<LeaseSpec, Attempt> {
        match self.api.get(&self.name).await {
            Ok(lease) => {
                let spec = lease.spec.clone().unwrap_or_default();
                self.lease = Some(lease);
                Ok(spec)
            }
            Err(err) if status_code(&err) == Some(404) => match self.create(desired.clone()).await {
                Ok(()) => {
                    self.set_observed(desired.clone());
                    Err(Attempt::Held)
                }
                Err(err) => {
                    self.log_failure("create", &err);
                    Err(Attempt::Failed)
                }
            },
            Err(err) => {
                self.log_failure("get", &err);
                Err(Attempt::Failed)
            }
        }
    }

    /// Takes the lease whose spec was just read (or renews it, keeping when
    /// it was acquired). The update carries the resourceVersion just read: if
    /// another candidate wrote first, it fails with 409 Conflict.
    async fn take(&mut self, current: LeaseSpec, mut desired: LeaseSpec) -> Attempt {
        if self.is_leader() {
            desired.acquire_time = current.acquire_time;
            desired.lease_transitions = Some(current.lease_transitions.unwrap_or(0));
        } else {
            desired.lease_transitions = Some(current.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        match self.update(desired.clone()).await {
            Ok(()) => {
                self.set_observed(desired);
                Attempt::Held
            }
            Err(err) => {
                self.log_failure("update", &err);
                Attempt::Failed
            }
        }
    }

    /// client-go's `release` (with `ReleaseOnCancel`): clears the holder, sets
    /// `leaseDurationSeconds` to 1 and both times to now, keeping the
    /// transitions, so that any candidate takes the lease at its next attempt.
    /// Bounded by the renew deadline.
    async fn release(&mut self) {
        if timeout(self.timing.renew_deadline, self.try_release())
            .await
            .is_err()
        {
            tracing::warn!(
                "Releasing lease {} timed out after {}; other replicas take it over once it expires",
                self.describe,
                go_duration(self.timing.renew_deadline)
            );
        }
    }

    async fn try_release(&mut self) {
        let lease = match self.api.get(&self.name).await {
            Ok(lease) => lease,
            Err(err) if status_code(&err) == Some(404) => {
                tracing::info!("lease lock not found: {}", self.describe);
                return;
            }
            Err(err) => {
                self.log_failure("get (to release)", &err);
                return;
            }
        };
        let current = lease.spec.clone().unwrap_or_default();
        self.lease = Some(lease);
        // Judged on the lease just read, not on what this elector last saw
        // (as client-go does), so a lease someone else has taken meanwhile is
        // never cleared.
        if current.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        let now = now_micro();
        let released = LeaseSpec {
            holder_identity: Some(String::new()),
            lease_duration_seconds: Some(1),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(current.lease_transitions.unwrap_or(0)),
            ..LeaseSpec::default()
        };
        match self.update(released.clone()).await {
            Ok(()) => {
                tracing::info!("Released lease {}", self.describe);
                self.set_observed(released);
            }
            Err(err) => self.log_failure("release", &err),
        }
    }

    async fn create(&mut self, spec: LeaseSpec) -> Result<(), kube::Error> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        };
        self.lease = Some(self.api.create(&PostParams::default(), &lease).await?);
        Ok(())
    }

    /// Replaces the spec of the lease last read or written (a PUT with its
    /// resourceVersion).
    async fn update(&mut self, spec: LeaseSpec) -> Result<(), kube::Error> {
        let Some(mut lease) = self.lease.clone() else {
            return Err(kube::Error::Service(
                "the lease has not been read or created yet".into(),
            ));
        };
        lease.spec = Some(spec);
        self.lease = Some(
            self.api
                .replace(&self.name, &PostParams::default(), &lease)
                .await?,
        );
        Ok(())
    }

    fn is_leader(&self) -> bool {
        self.observed.holder_identity.as_deref() == Some(self.identity.as_str())
    }

    /// True until `leaseDurationSeconds` after the spec was last seen to change.
    fn is_lease_valid(&self, now: Instant) -> bool {
        self.valid_until().is_some_and(|until| until > now)
    }

    /// `leaseDurationSeconds` after the spec was last seen to change.
    fn valid_until(&self) -> Option<Instant> {
        let seconds = u64::try_from(self.observed.lease_duration_seconds.unwrap_or(0)).unwrap_or(0);
        self.observed_time.map(|seen| seen + Duration::from_secs(seconds))
    }

    fn set_observed(&mut self, spec: LeaseSpec) {
        self.observed = spec;
        self.observed_time = Some(Instant::now());
    }

    /// Logs a failed API call: what, where, and how to fix it. Conflicts are
    /// the normal outcome of a lost race and go to debug.
    fn log_failure(&self, action: &str, err: &kube::Error) {
        let message = error_message(err);
        match status_code(err) {
            Some(409) => tracing::debug!(
                "Could not {action} lease {}, another replica wrote it first: {message}",
                self.describe
            ),
            code => tracing::error!(
                identity = %self.identity,
                "Failed to {action} lease {}: {message}; {}",
                self.describe,
                hint(&self.namespace, &self.name, self.timing.retry_period, action, code)
            ),
        }
    }
}

/// The API server's message with its code and reason, or the client error.
fn error_message(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) if !status.message.is_empty() => {
            format!("{} ({} {})", status.message, status.code, status.reason)
        }
        other => other.to_string(),
    }
}

/// How to fix a failed `action` on lease `name` in `namespace` that the API
/// server answered with `code` (`None`: no answer).
fn hint(namespace: &str, name: &str, retry_period: Duration, action: &str, code: Option<u16>) -> String {
    let retry = go_duration(retry_period);
    match code {
        Some(401) => format!(
            "the API server does not accept the controller's credentials: check its ServiceAccount token or \
             kubeconfig; retrying every {retry}"
        ),
        Some(403) => format!(
            "grant the controller's ServiceAccount get, create and update on leases \
             (apiGroups: [coordination.k8s.io]) in namespace {namespace} with a Role and RoleBinding; \
             retrying every {retry}"
        ),
        Some(404) if action == "create" => format!(
            "namespace {namespace} does not exist: create it, or set SYSTEM_NAMESPACE to the namespace the \
             controller runs in; retrying every {retry}"
        ),
        Some(422) => format!(
            "the lease name {name:?} is not a valid object name: set its map-lease-prefix.<component>.<queue> \
             in the {CONFIG_MAP_NAME} ConfigMap to a lowercase DNS subdomain, or remove it"
        ),
        Some(code) => format!("the API server answered {code}; retrying every {retry}"),
        None => format!("check that the API server is reachable; retrying every {retry}"),
    }
}

fn status_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// Now, to the microsecond a Lease's `MicroTime` keeps.
fn now_micro() -> Timestamp {
    let now = Timestamp::now();
    Timestamp::from_microsecond(now.as_microsecond()).unwrap_or(now)
}

/// `period` plus up to `JITTER_FACTOR × period` (client-go's `wait.Jitter`).
fn jittered(period: Duration) -> Duration {
    period + period.mul_f64(JITTER_FACTOR * fastrand::f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_client_go_bounds() {
        let period = Duration::from_millis(100);
        for _ in 0..1000 {
            let d = jittered(period);
            assert!(d >= period && d <= Duration::from_millis(220), "{d:?}");
        }
    }

    #[test]
    fn hints_say_how_to_fix() {
        let hint = |action, code| {
            hint(
                "knative-samples",
                "c.q.00-of-01",
                Duration::from_secs(10),
                action,
                code,
            )
        };
        assert_eq!(
            hint("update", Some(403)),
            "grant the controller's ServiceAccount get, create and update on leases \
             (apiGroups: [coordination.k8s.io]) in namespace knative-samples with a Role and RoleBinding; \
             retrying every 10s"
        );
        assert!(hint("create", Some(404)).starts_with("namespace knative-samples does not exist"));
        assert!(hint("update", Some(404)).starts_with("the API server answered 404"));
        assert!(hint("create", Some(422)).contains("map-lease-prefix.<component>.<queue>"));
        assert_eq!(
            hint("get", None),
            "check that the API server is reachable; retrying every 10s"
        );
    }

    #[test]
    fn error_messages_are_the_api_servers() {
        let err = kube::Error::Api(Box::new(kube::core::Status {
            code: 404,
            reason: "NotFound".to_owned(),
            message: "namespaces \"late\" not found".to_owned(),
            ..kube::core::Status::default()
        }));
        assert_eq!(
            error_message(&err),
            "namespaces \"late\" not found (404 NotFound)"
        );
    }

    #[test]
    fn times_are_whole_microseconds() {
        assert_eq!(now_micro().subsec_nanosecond() % 1_000, 0);
    }
}
