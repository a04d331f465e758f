//! The replicas of one controller, as their Leases show them, and the share
//! of its buckets each should lead.
//!
//! Knative's electors are first come, first served: the first replica to
//! start takes most buckets and keeps them, so three replicas of ten buckets
//! split 8/1/1 and a second replica adds little. Here every replica also
//! keeps a *member* Lease (`<prefix>.member-<id>`, renewed every retry
//! period, deleted on shutdown) and watches the Leases of its namespace. The
//! live members, sorted by identity, give each replica its share of the B
//! buckets: ⌊B/R⌋, and one more for the first B mod R of them. A leader over
//! its share gives up its highest buckets at their next renewal; a candidate at
//! its share leaves a free bucket to the replicas under theirs, unless the
//! bucket stays free for a retry period (so a bucket is never left unled
//! when the replicas' views differ for a moment). The watch also wakes a
//! candidate as soon as a lease it wants is released, so a replica that
//! shuts down hands its buckets over in one round trip, not a retry period.
//!
//! Nothing here is needed for safety: a lease is still taken only with
//! client-go's rules, and a replica whose watch fails (no RBAC to list
//! Leases, say) acts as if it were alone, first come, first served.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::runtime::watcher;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

/// How long a replica that starts waits for the others starting with it
/// (a Deployment's pods start within about a second of each other) before it
/// takes its first bucket.
const JOIN_GRACE: Duration = Duration::from_secs(1);

/// A controller's replicas and the buckets this one leads; cloning shares it.
#[derive(Clone)]
pub(crate) struct Peers(Arc<Inner>);

struct Inner {
    api: Api<Lease>,
    identity: String,
    /// This replica's member Lease.
    member: String,
    /// What every member Lease of the controller's name starts with.
    member_prefix: String,
    buckets: Vec<String>,
    lease_duration: Duration,
    retry_period: Duration,
    state: Mutex<State>,
    /// Wakes the elector of each bucket when its lease is released.
    wake: Vec<Notify>,
    /// Wakes the leaders when a replica joins or leaves, so a leader over
    /// its new share gives buckets up at once, not at its next renewal.
    joined_or_left: Notify,
    /// Held while the member Lease is deleted, so it is deleted once.
    leaving: tokio::sync::Mutex<bool>,
}

#[derive(Default)]
struct State {
    /// Member Lease name → its holder and spec as last seen, and when it
    /// changed (the members' clocks are never compared with ours).
    members: BTreeMap<String, Member>,
    /// The buckets this replica leads, by ordinal.
    held: BTreeSet<usize>,
    /// True once the watch has listed the Leases: until then the shares are
    /// not known and this replica acts as if it were alone.
    listed: bool,
}

struct Member {
    identity: String,
    renewed: Option<MicroTime>,
    changed: Instant,
}

impl Peers {
    /// The replicas of the controller whose buckets are the leases
    /// `buckets`, in the namespace of `api`; this one is `identity`.
    pub(crate) fn new(
        api: Api<Lease>,
        identity: &str,
        buckets: Vec<String>,
        lease_duration: Duration,
        retry_period: Duration,
    ) -> Self {
        // The buckets' names are `<prefix>.NN-of-MM`; members share the prefix.
        let prefix = buckets
            .first()
            .and_then(|name| name.rsplit_once('.'))
            .map_or("", |(prefix, _)| prefix)
            .to_owned();
        let member_prefix = format!("{prefix}.member-");
        let id = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, identity.as_bytes()).simple();
        let wake = buckets.iter().map(|_| Notify::new()).collect();
        Peers(Arc::new(Inner {
            api,
            identity: identity.to_owned(),
            member: format!("{member_prefix}{id}"),
            member_prefix,
            buckets,
            lease_duration,
            retry_period,
            state: Mutex::new(State::default()),
            wake,
            joined_or_left: Notify::new(),
            leaving: tokio::sync::Mutex::new(false),
        }))
    }

    /// Keeps this replica's member Lease and watches the others' until
    /// `shutdown`.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = self.renew_membership() => {}
            () = self.watch() => {}
        }
        self.leave().await;
    }

    /// How many buckets this replica should lead now.
    fn share(&self, state: &State) -> usize {
        let now = Instant::now();
        let mut live: Vec<&str> = state
            .members
            .values()
            .filter(|m| now.saturating_duration_since(m.changed) < self.0.lease_duration)
            .map(|m| m.identity.as_str())
            .collect();
        live.push(&self.0.identity);
        live.sort_unstable();
        live.dedup();
        let (replicas, buckets) = (live.len().max(1), self.0.buckets.len());
        let rank = live.iter().position(|id| *id == self.0.identity).unwrap_or(0);
        buckets / replicas + usize::from(rank < buckets % replicas)
    }

    /// True when this replica may take a free bucket: it leads fewer than its
    /// share, or the shares are not known.
    pub(crate) fn may_take(&self) -> bool {
        let state = self.0.state.lock();
        !state.listed || state.held.len() < self.share(&state)
    }

    /// True when this replica leads more than its share and `ordinal` is
    /// one of the buckets it gives up (its highest, as many as it leads too
    /// many): every excess bucket goes within one retry period.
    pub(crate) fn should_yield(&self, ordinal: usize) -> bool {
        let state = self.0.state.lock();
        if !state.listed {
            return false;
        }
        let excess = state.held.len().saturating_sub(self.share(&state));
        state.held.iter().rev().take(excess).any(|held| *held == ordinal)
    }

    /// Completes once the Leases have been listed and the replicas started
    /// with this one have had a moment to show their member leases
    /// ([`JOIN_GRACE`], at most a retry period), so replicas that start
    /// together do not each take every bucket first and give most back.
    pub(crate) async fn listed(&self) {
        let deadline = Instant::now() + self.0.retry_period;
        while !self.0.state.lock().listed && Instant::now() < deadline {
            sleep(Duration::from_millis(10)).await;
        }
        sleep(JOIN_GRACE.min(self.0.retry_period)).await;
    }

    /// Notes that this replica leads bucket `ordinal` or stopped; returns how
    /// many it leads now, of how many.
    pub(crate) fn note(&self, ordinal: usize, leading: bool) -> (usize, usize) {
        let mut state = self.0.state.lock();
        if leading {
            state.held.insert(ordinal);
        } else {
            state.held.remove(&ordinal);
        }
        (state.held.len(), self.0.buckets.len())
    }

    /// Completes when the lease of bucket `ordinal` is released (or was,
    /// since the last call).
    pub(crate) async fn released(&self, ordinal: usize) {
        match self.0.wake.get(ordinal) {
            Some(wake) => wake.notified().await,
            None => std::future::pending().await,
        }
    }

    /// Completes when a replica joins or leaves (its member lease appears or
    /// goes).
    pub(crate) async fn joined_or_left(&self) {
        self.0.joined_or_left.notified().await;
    }

    /// Deletes this replica's member Lease, once: the others' shares grow
    /// before the buckets this one releases reach them.
    pub(crate) async fn leave(&self) {
        let mut left = self.0.leaving.lock().await;
        if *left {
            return;
        }
        *left = true;
        match self.0.api.delete(&self.0.member, &DeleteParams::default()).await {
            Ok(_) => tracing::debug!("deleted member lease {}", self.0.member),
            Err(e) => tracing::debug!(error = %e, "could not delete member lease {}", self.0.member),
        }
    }

    /// Creates this replica's member Lease and renews it every retry period.
    async fn renew_membership(&self) {
        loop {
            if let Err(e) = self.renew_member_lease().await {
                tracing::debug!(error = %e, "could not renew member lease {}", self.0.member);
            }
            sleep(self.0.retry_period).await;
        }
    }

    async fn renew_member_lease(&self) -> Result<(), kube::Error> {
        let now = MicroTime(Timestamp::now());
        let spec = LeaseSpec {
            holder_identity: Some(self.0.identity.clone()),
            lease_duration_seconds: Some(i32::try_from(self.0.lease_duration.as_secs()).unwrap_or(i32::MAX)),
            renew_time: Some(now),
            ..LeaseSpec::default()
        };
        match self.0.api.get_opt(&self.0.member).await? {
            Some(mut lease) => {
                lease.spec = Some(spec);
                self.0
                    .api
                    .replace(&self.0.member, &PostParams::default(), &lease)
                    .await?;
            }
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.0.member.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec),
                };
                self.0.api.create(&PostParams::default(), &lease).await?;
            }
        }
        Ok(())
    }

    /// Follows the namespace's Leases: members come, renew and go; bucket
    /// leases are released.
    async fn watch(&self) {
        let mut events = std::pin::pin!(watcher(self.0.api.clone(), watcher::Config::default()));
        let mut warned = false;
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => {}
                Ok(watcher::Event::InitApply(lease) | watcher::Event::Apply(lease)) => self.saw(&lease),
                Ok(watcher::Event::InitDone) => self.0.state.lock().listed = true,
                Ok(watcher::Event::Delete(lease)) => {
                    let name = lease.metadata.name.unwrap_or_default();
                    if self.0.state.lock().members.remove(&name).is_some() {
                        self.0.joined_or_left.notify_waiters();
                    }
                }
                Err(e) if !warned => {
                    warned = true;
                    tracing::warn!(error = %e,
                        "cannot watch the leases of this controller's replicas; buckets go to whoever takes them \
                         first, and a released bucket waits for the next attempt (check the RBAC rules for \
                         list and watch on leases)");
                }
                Err(e) => tracing::debug!(error = %e, "watching leases"),
            }
        }
    }

    fn saw(&self, lease: &Lease) {
        let name = lease.metadata.name.as_deref().unwrap_or_default();
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.unwrap_or_default();
        if let Some(ordinal) = self.0.buckets.iter().position(|bucket| bucket == name) {
            if holder.is_empty()
                && let Some(wake) = self.0.wake.get(ordinal)
            {
                wake.notify_one();
            }
            return;
        }
        if !name.starts_with(&self.0.member_prefix) {
            return;
        }
        let mut state = self.0.state.lock();
        let changed = match state.members.get(name) {
            Some(member) if member.renewed == spec.renew_time && member.identity == holder => member.changed,
            _ => Instant::now(),
        };
        let joined = state
            .members
            .insert(
                name.to_owned(),
                Member {
                    identity: holder,
                    renewed: spec.renew_time,
                    changed,
                },
            )
            .is_none();
        drop(state);
        if joined {
            self.0.joined_or_left.notify_waiters();
        }
    }
}
