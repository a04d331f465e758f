//! The replicas of one controller, as their Leases show them, and which of
//! its buckets each should lead.
//!
//! Knative's electors are first come, first served: the first replica to
//! start takes most buckets and keeps them, so three replicas of ten buckets
//! split 8/1/1 and a second replica adds little. Here every replica also
//! keeps a *member* Lease (`<prefix>.member-<id>`, renewed every retry
//! period, deleted on shutdown) and watches the Leases of its namespace. The
//! live members agree, each on its own, on which of the B buckets each should
//! lead: [`assign`] gives each of R members ⌊B/R⌋ or ⌈B/R⌉ of them by
//! rendezvous hashing of the members' and buckets' names, so every replica
//! that sees the same members computes the same answer, and a replica that
//! joins or leaves moves few buckets.
//!
//! Keys hash into buckets by chance, so equal numbers of buckets are not
//! equal work: at 100 keys a bucket, one of three replicas leading 4 of 10
//! buckets can hold 45 % of the keys. So the first live member by identity
//! counts its controller's keys per bucket, once its cache has listed and
//! it sees others, and publishes the counts on its member lease
//! (annotation [`KEYS_ANNOTATION`]) at each renewal; [`assign`] then swaps
//! buckets between members while a swap evens their keys ([`balance`]).
//! Every replica weighs by the counts of the same member, the first (by
//! identity) that published any, as the watch shows them, not by its own
//! cache: two caches a moment apart would count differently and disagree on
//! the assignment. A replica tries first only the
//! buckets assigned to it, so replicas that start together never race for
//! the same lease. A leader over its share gives up its excess, the buckets
//! assigned to others first ([`given_up`]); one at or under its share keeps
//! what it leads, so a moment's difference between the replicas' views
//! never bounces a bucket between them. A bucket still free a retry period
//! after its elector first left it to another is taken anyway, so no bucket
//! stays unled while the views differ. The watch also wakes a candidate as
//! soon as a lease it wants is released, so a replica that shuts down hands
//! its buckets over in one round trip, not a retry period.
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
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

use super::hash::KeysPerBucket;

/// How long a replica that starts waits for the others starting with it
/// (a Deployment's pods start within about a second of each other) before it
/// takes its first bucket.
const JOIN_GRACE: Duration = Duration::from_secs(1);

/// The annotation of a member Lease with its replica's count of the
/// controller's keys per bucket: comma-separated, by bucket ordinal, e.g.
/// `112,106,84`. Written by the first replica by identity, once it sees
/// others; every replica weighs its buckets by it.
pub const KEYS_ANNOTATION: &str = "leaderelection.kinject.dev/keys-per-bucket";

/// How often a replica whose cache is still listing checks whether it has
/// listed, to publish its counts at once rather than a retry period later.
const LISTING_POLL: Duration = Duration::from_millis(50);

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
    /// Counts the controller's keys per bucket, when it knows its keys.
    keys: Option<KeysPerBucket>,
    lease_duration: Duration,
    retry_period: Duration,
    state: Mutex<State>,
    /// Wakes the elector of each bucket when its lease is released.
    wake: Vec<Notify>,
    /// Wakes the leaders when a replica joins or leaves, or this one takes a
    /// bucket past its share, so a leader over its share gives buckets up
    /// at once, not at its next renewal.
    shares_changed: Notify,
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

/// How the live members share the buckets, as one replica sees it.
struct Assignment {
    /// For each bucket, whether it is assigned to this replica.
    here: Vec<bool>,
    /// How many are.
    share: usize,
    /// For each bucket, whether its assignee renews its member lease (or is
    /// this replica).
    renewing: Vec<bool>,
}

struct Member {
    identity: String,
    renewed: Option<MicroTime>,
    changed: Instant,
    /// Its replica's count of keys per bucket, when it published a valid one.
    keys: Option<Vec<u64>>,
}

impl Peers {
    /// The replicas of the controller whose buckets are the leases
    /// `buckets`, in the namespace of `api`; this one is `identity`.
    pub(crate) fn new(
        api: Api<Lease>,
        identity: &str,
        buckets: Vec<String>,
        keys: Option<KeysPerBucket>,
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
            keys,
            lease_duration,
            retry_period,
            state: Mutex::new(State::default()),
            wake,
            shares_changed: Notify::new(),
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

    /// The live members' assignment as this replica sees it: which buckets
    /// are assigned here, how many (this replica's share), and which are
    /// assigned to a member that renewed its member lease within the last
    /// two retry periods (or to this one). `None` while the members are not
    /// known.
    fn assignment(&self, state: &State) -> Option<Assignment> {
        if !state.listed {
            return None;
        }
        let live = self.live(state);
        let names: Vec<&str> = live.keys().copied().collect();
        let me = names.iter().position(|id| *id == self.0.identity)?;
        let keys = live.values().find_map(|(_, keys)| *keys);
        let owners = assign(&names, &self.0.buckets, keys);
        let renewing: Vec<bool> = live.values().map(|(renewing, _)| *renewing).collect();
        let here: Vec<bool> = owners.iter().map(|&owner| owner == me).collect();
        Some(Assignment {
            share: here.iter().filter(|&&mine| mine).count(),
            here,
            renewing: owners
                .iter()
                .map(|&owner| renewing.get(owner).copied().unwrap_or(false))
                .collect(),
        })
    }

    /// The live members by identity, this replica among them: whether each
    /// renewed its member lease within the last two retry periods (this
    /// one always counts as renewing), and the keys per bucket it published.
    fn live<'a>(&'a self, state: &'a State) -> BTreeMap<&'a str, (bool, Option<&'a [u64]>)> {
        let now = Instant::now();
        let since = |m: &Member| now.saturating_duration_since(m.changed);
        let mut live: BTreeMap<&str, (bool, Option<&[u64]>)> = BTreeMap::new();
        for member in state
            .members
            .values()
            .filter(|m| since(m) < self.0.lease_duration)
        {
            let entry = live.entry(member.identity.as_str()).or_default();
            entry.0 |= since(member) < 2 * self.0.retry_period;
            entry.1 = entry.1.or(member.keys.as_deref());
        }
        live.entry(&self.0.identity).or_default().0 = true;
        live
    }

    /// True when this replica is the one to count the keys per bucket: it
    /// sees other live members, and is the first of them by identity, whose
    /// counts every member weighs by. The others need not count: at 100,000
    /// keys a count takes about 0.15 s of CPU.
    fn counts_for_all(&self) -> bool {
        let state = self.0.state.lock();
        let live = self.live(&state);
        state.listed && live.len() > 1 && live.keys().next() == Some(&self.0.identity.as_str())
    }

    /// True when another live member comes first by identity, so this
    /// replica will not count the keys unless that one leaves.
    fn another_counts(&self) -> bool {
        let state = self.0.state.lock();
        state.listed && self.live(&state).keys().next() != Some(&self.0.identity.as_str())
    }

    /// True when this replica may take bucket `ordinal` when it is free: it
    /// is assigned here, or the members are not known.
    pub(crate) fn may_take(&self, ordinal: usize) -> bool {
        let state = self.0.state.lock();
        self.assignment(&state)
            .is_none_or(|a| a.here.get(ordinal).copied().unwrap_or(false))
    }

    /// True when this replica leads more than its share and `ordinal` is one
    /// of the buckets it gives up (those assigned to others first), to a
    /// replica still renewing its member lease: a bucket taken over from one
    /// that was killed is kept until that one counts as gone, instead of
    /// being handed to it and taken back every retry period.
    pub(crate) fn should_yield(&self, ordinal: usize) -> bool {
        let state = self.0.state.lock();
        self.assignment(&state).is_some_and(|a| {
            a.renewing.get(ordinal).copied().unwrap_or(false)
                && given_up(&state.held, &a.here, a.share).contains(&ordinal)
        })
    }

    /// Completes once the Leases have been listed and the replicas started
    /// with this one have had a moment to show their member leases
    /// ([`JOIN_GRACE`], at most a retry period), so replicas that start
    /// together do not each take every bucket first and give most back;
    /// then, when others are there and none has published its keys per
    /// bucket yet, once one has (their caches list), for at most another
    /// retry period, so the first takes are weighed by the keys.
    pub(crate) async fn listed(&self) {
        let poll = Duration::from_millis(10);
        let deadline = Instant::now() + self.0.retry_period;
        while !self.0.state.lock().listed && Instant::now() < deadline {
            sleep(poll).await;
        }
        sleep(JOIN_GRACE.min(self.0.retry_period)).await;
        let deadline = Instant::now() + self.0.retry_period;
        while self.0.keys.is_some() && self.awaiting_keys() && Instant::now() < deadline {
            sleep(poll).await;
        }
    }

    /// True when this replica sees others and none of the live members has
    /// published its keys per bucket.
    fn awaiting_keys(&self) -> bool {
        let state = self.0.state.lock();
        let live = self.live(&state);
        state.listed && live.len() > 1 && live.values().all(|(_, keys)| keys.is_none())
    }

    /// Notes that this replica leads bucket `ordinal` or stopped; returns how
    /// many it leads now, of how many.
    ///
    /// A take of a bucket assigned here that puts this replica over its
    /// share wakes its leaders to give the excess up at once: it still led a
    /// bucket assigned to another (the assignment moves when replicas join
    /// or leave, and with the keys), and that one should not wait a retry
    /// period for it.
    pub(crate) fn note(&self, ordinal: usize, leading: bool) -> (usize, usize) {
        let mut state = self.0.state.lock();
        if leading {
            state.held.insert(ordinal);
        } else {
            state.held.remove(&ordinal);
        }
        // Not after taking a bucket left free a retry period by the one it
        // is assigned to: that one may not take it back either, and giving it
        // up at once would leave it unled again.
        let over_share = leading
            && self
                .assignment(&state)
                .is_some_and(|a| state.held.len() > a.share && a.here.get(ordinal).copied().unwrap_or(false));
        let counts = (state.held.len(), self.0.buckets.len());
        drop(state);
        if over_share {
            self.0.shares_changed.notify_waiters();
        }
        counts
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
    /// goes), or this one takes a bucket past its share.
    pub(crate) async fn shares_changed(&self) {
        self.0.shares_changed.notified().await;
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

    /// Creates this replica's member Lease and renews it every retry period,
    /// with the keys per bucket when it is the one to count them
    /// ([`counts_for_all`](Self::counts_for_all)) and they are known. Until
    /// then it checks every [`LISTING_POLL`] and renews as soon as they can
    /// be published, so that the replicas starting with it weigh the buckets
    /// before they first take them; while another replica counts, it checks
    /// only when a replica leaves.
    async fn renew_membership(&self) {
        loop {
            let keys = self
                .0
                .keys
                .as_ref()
                .filter(|_| self.counts_for_all())
                .and_then(KeysPerBucket::count_complete);
            let published = keys.is_some();
            if let Err(e) = self.renew_member_lease(keys).await {
                tracing::debug!(error = %e, "could not renew member lease {}", self.0.member);
            }
            let next = Instant::now() + self.0.retry_period;
            if published || self.0.keys.is_none() {
                sleep_until(next).await;
                continue;
            }
            // Another replica counts: wait for the renewal, or for that one
            // to leave, when this one may be first and publish at once.
            if self.another_counts() {
                loop {
                    tokio::select! {
                        () = sleep_until(next) => break,
                        () = self.shares_changed() => if !self.another_counts() { break },
                    }
                }
                continue;
            }
            while Instant::now() < next
                && !(self.0.keys.as_ref().is_some_and(KeysPerBucket::complete) && self.counts_for_all())
            {
                sleep(LISTING_POLL).await;
            }
        }
    }

    async fn renew_member_lease(&self, keys: Option<Vec<usize>>) -> Result<(), kube::Error> {
        let now = MicroTime(Timestamp::now());
        let spec = LeaseSpec {
            holder_identity: Some(self.0.identity.clone()),
            lease_duration_seconds: Some(i32::try_from(self.0.lease_duration.as_secs()).unwrap_or(i32::MAX)),
            renew_time: Some(now),
            ..LeaseSpec::default()
        };
        let keys = keys.map(|keys| keys.iter().map(usize::to_string).collect::<Vec<_>>().join(","));
        match self.0.api.get_opt(&self.0.member).await? {
            Some(mut lease) => {
                lease.spec = Some(spec);
                let annotations = lease.metadata.annotations.get_or_insert_default();
                match keys {
                    Some(keys) => annotations.insert(KEYS_ANNOTATION.to_owned(), keys),
                    None => annotations.remove(KEYS_ANNOTATION),
                };
                self.0
                    .api
                    .replace(&self.0.member, &PostParams::default(), &lease)
                    .await?;
            }
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.0.member.clone()),
                        annotations: keys.map(|keys| [(KEYS_ANNOTATION.to_owned(), keys)].into()),
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
                        self.0.shares_changed.notify_waiters();
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
        let keys = lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(KEYS_ANNOTATION))
            .and_then(|keys| parse_keys(keys, self.0.buckets.len()));
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
                    keys,
                },
            )
            .is_none();
        drop(state);
        if joined {
            self.0.shares_changed.notify_waiters();
        }
    }
}

/// Who leads each bucket: for each of `buckets`, by ordinal, the index in
/// `members` (sorted identities, no duplicates) of the member it is
/// assigned to; `keys`, when known, is how many keys each bucket holds.
///
/// Rendezvous hashing with bounded loads: each (member, bucket) pair scores
/// a hash of both names, and the pairs are granted best first, each bucket
/// to one member and each member up to its share: ⌊B/R⌋, and one more for
/// the first B mod R members. With `keys`, buckets are then swapped between
/// members to even their keys ([`balance`]), each member keeping its share.
/// The answer depends on the names and the counts alone, so every replica
/// that sees the same members and counts computes the same one, and a member
/// that joins or leaves moves about B/R buckets, not a reshuffle.
pub(super) fn assign(members: &[&str], buckets: &[String], keys: Option<&[u64]>) -> Vec<usize> {
    let (count, replicas) = (buckets.len(), members.len().max(1));
    let mut room: Vec<usize> = (0..members.len())
        .map(|rank| count / replicas + usize::from(rank < count % replicas))
        .collect();
    let mut pairs: Vec<(u64, usize, usize)> = members
        .iter()
        .enumerate()
        .flat_map(|(m, member)| {
            buckets
                .iter()
                .enumerate()
                .map(move |(b, bucket)| (score(member, bucket), m, b))
        })
        .collect();
    pairs.sort_unstable_by(|x, y| y.cmp(x));
    let mut owners = vec![usize::MAX; count];
    for (_, member, bucket) in pairs {
        if owners[bucket] == usize::MAX && room[member] > 0 {
            owners[bucket] = member;
            room[member] -= 1;
        }
    }
    if let Some(keys) = keys.filter(|keys| keys.len() == count) {
        balance(&mut owners, members.len(), keys);
    }
    owners
}

/// Evens the keys the members of `owners` lead (`keys` per bucket) by
/// swapping two buckets of different members at a time, each member keeping
/// as many buckets as it has: while some swap lowers the sum of the squares
/// of the members' keys, the one that lowers it most (the lowest ordinals
/// among equals, so every replica picks the same). Each swap lowers that sum,
/// so it ends; each round compares every pair of buckets (100 at the most,
/// ten buckets), and a few rounds do.
///
/// Not optimal (that is a partition problem), but close: over the scale-out
/// benchmark's 1,000 keys, the replica of 3 that leads 4 buckets gets the 4
/// lightest, the fewest keys 4 buckets can hold.
fn balance(owners: &mut [usize], members: usize, keys: &[u64]) {
    let mut load = vec![0_u64; members];
    for (bucket, &owner) in owners.iter().enumerate() {
        if let Some(load) = load.get_mut(owner) {
            *load = load.saturating_add(keys[bucket]);
        }
    }
    // Ends before this in practice: every swap lowers an integer sum.
    for _ in 0..owners.len() * owners.len() {
        let mut best: Option<(u128, usize, usize)> = None;
        for heavier in 0..owners.len() {
            for lighter in 0..owners.len() {
                let (from, to) = (owners[heavier], owners[lighter]);
                let (Some(&from_load), Some(&to_load)) = (load.get(from), load.get(to)) else {
                    continue;
                };
                let moved = keys[heavier].saturating_sub(keys[lighter]);
                // Moving `moved` keys from `from` to `to` lowers the sum of
                // squares by 2·moved·(gap − moved): only while gap > moved.
                let gap = from_load.saturating_sub(to_load);
                if from == to || moved == 0 || gap <= moved {
                    continue;
                }
                let gain = u128::from(moved) * u128::from(gap - moved);
                if best.is_none_or(|(most, _, _)| gain > most) {
                    best = Some((gain, heavier, lighter));
                }
            }
        }
        let Some((_, heavier, lighter)) = best else {
            return;
        };
        let (from, to) = (owners[heavier], owners[lighter]);
        let moved = keys[heavier] - keys[lighter];
        load[from] -= moved;
        load[to] += moved;
        owners.swap(heavier, lighter);
    }
}

/// The counts of a member Lease's [`KEYS_ANNOTATION`], when it holds one
/// count per bucket; anything else (another bucket count, a malformed value
/// from a replica of another version) is ignored, and the replicas fall back
/// to the next member's counts or to equal weights.
fn parse_keys(value: &str, buckets: usize) -> Option<Vec<u64>> {
    let keys: Vec<u64> = value
        .split(',')
        .map(|count| count.trim().parse().ok())
        .collect::<Option<_>>()?;
    (keys.len() == buckets).then_some(keys)
}

/// The buckets a replica that leads `held` gives up to come down to `share`:
/// those assigned to others (`here` false) first, then its own, each from
/// the highest ordinal down. A replica at or under its share gives up none,
/// so a replica never lets go of a bucket only because its view of who
/// should lead it differs for a moment from the others'.
pub(super) fn given_up(held: &BTreeSet<usize>, here: &[bool], share: usize) -> Vec<usize> {
    let excess = held.len().saturating_sub(share);
    let assigned_here = |b: usize| here.get(b).copied().unwrap_or(false);
    let others = held.iter().rev().filter(|&&b| !assigned_here(b));
    let own = held.iter().rev().filter(|&&b| assigned_here(b));
    others.chain(own).take(excess).copied().collect()
}

/// A member's score for a bucket: FNV-1a over both names, mixed (SplitMix64's
/// finalizer) so that names differing in their last characters still score
/// far apart.
fn score(member: &str, bucket: &str) -> u64 {
    let mut z = super::hash::fnv64a(&[member.as_bytes(), &[0], bucket.as_bytes()]);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::{assign, given_up, parse_keys};

    fn buckets(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("controller.reconciler.{i:02}-of-{n:02}"))
            .collect()
    }

    fn members(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("controller-7d9f{i}c_{i}a1b2")).collect()
    }

    fn counts(owners: &[usize], members: usize) -> Vec<usize> {
        (0..members)
            .map(|m| owners.iter().filter(|&&o| o == m).count())
            .collect()
    }

    #[test]
    fn every_bucket_has_one_owner_and_every_member_its_share() {
        for b in 1..=10 {
            for r in 1..=7 {
                let names = members(r);
                let mut sorted: Vec<&str> = names.iter().map(String::as_str).collect();
                sorted.sort_unstable();
                let owners = assign(&sorted, &buckets(b), None);
                assert!(
                    owners.iter().all(|&o| o < r),
                    "{b} buckets, {r} members: {owners:?}"
                );
                let counts = counts(&owners, r);
                for (rank, count) in counts.iter().enumerate() {
                    assert_eq!(
                        *count,
                        b / r + usize::from(rank < b % r),
                        "{b} buckets, {r} members: {counts:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_member_that_joins_moves_few_buckets() {
        let buckets = buckets(10);
        let names = members(6);
        for r in 1..6 {
            let mut before: Vec<&str> = names[..r].iter().map(String::as_str).collect();
            before.sort_unstable();
            let mut after: Vec<&str> = names[..=r].iter().map(String::as_str).collect();
            after.sort_unstable();
            let (was, is) = (assign(&before, &buckets, None), assign(&after, &buckets, None));
            let moved = (0..10).filter(|&b| before[was[b]] != after[is[b]]).count();
            // The newcomer's share must move; a reshuffle would move most.
            let share = 10_usize.div_ceil(r + 1);
            assert!(
                moved <= share + 2,
                "{r} → {} members moved {moved} buckets",
                r + 1
            );
        }
    }

    #[test]
    fn a_replica_gives_up_only_its_excess_and_others_buckets_first() {
        let held: BTreeSet<usize> = [1, 2, 5, 7].into_iter().collect();
        let mut here = vec![false; 10];
        for b in [1, 7] {
            here[b] = true;
        }
        assert_eq!(given_up(&held, &here, 4), Vec::<usize>::new(), "at its share");
        assert_eq!(given_up(&held, &here, 3), [5]);
        assert_eq!(given_up(&held, &here, 2), [5, 2]);
        assert_eq!(given_up(&held, &here, 1), [5, 2, 7]);
        assert_eq!(given_up(&held, &here, 0), [5, 2, 7, 1]);
    }

    /// The keys per bucket of 1,000 AddressableServices `asvc-00000`… in
    /// namespace `scale-out`, the scale-out benchmark's, over 10 buckets:
    /// about 100 each, by chance from 84 to 117.
    const BENCHMARK_KEYS: [u64; 10] = [112, 106, 84, 91, 96, 99, 104, 117, 97, 94];

    fn loads(owners: &[usize], keys: &[u64], members: usize) -> Vec<u64> {
        let mut loads = vec![0; members];
        for (bucket, &owner) in owners.iter().enumerate() {
            loads[owner] += keys[bucket];
        }
        loads
    }

    /// Members named as pods of a Deployment are, with a fresh suffix each
    /// time: `run` picks the suffixes.
    fn pods(n: usize, run: usize) -> Vec<String> {
        (0..n)
            .map(|i| {
                format!(
                    "controller-5f6d{run:x}b-{i}_{:08x}",
                    (run * 7919 + i * 104_729) % 0xffff_ffff
                )
            })
            .collect()
    }

    #[test]
    fn weighing_by_keys_evens_the_keys_each_member_leads_and_keeps_the_shares() {
        let buckets = buckets(10);
        let total: u64 = BENCHMARK_KEYS.iter().sum();
        let mut uneven_unweighed = 0;
        for r in [2, 3, 5] {
            for run in 0..50 {
                let names = pods(r, run);
                let mut sorted: Vec<&str> = names.iter().map(String::as_str).collect();
                sorted.sort_unstable();
                let weighed = assign(&sorted, &buckets, Some(&BENCHMARK_KEYS));
                for (rank, count) in counts(&weighed, r).into_iter().enumerate() {
                    assert_eq!(
                        count,
                        10 / r + usize::from(rank < 10 % r),
                        "{r} members: {weighed:?}"
                    );
                }
                // The goal of the scale-out benchmark is 0.9 × R of one
                // replica's throughput: the busiest member may lead at most
                // 1/(0.9 R) of the keys. (At 3 members, the one with 4
                // buckets leads at least the 4 smallest: 365 of 1,000.)
                let bound = total * 10 / (9 * r as u64);
                let busiest = *loads(&weighed, &BENCHMARK_KEYS, r).iter().max().unwrap();
                assert!(
                    busiest <= bound,
                    "{r} members ({run}): {:?} over {bound}",
                    loads(&weighed, &BENCHMARK_KEYS, r)
                );
                let unweighed = assign(&sorted, &buckets, None);
                if *loads(&unweighed, &BENCHMARK_KEYS, r).iter().max().unwrap() > bound {
                    uneven_unweighed += 1;
                }
            }
        }
        // The counts are what evens them: by names alone, many are not
        // (61 of these 150).
        assert!(
            uneven_unweighed > 40,
            "only {uneven_unweighed} of 150 uneven without the counts"
        );
    }

    #[test]
    fn equal_or_no_keys_leave_the_assignment_to_the_names() {
        let buckets = buckets(10);
        for r in 1..=5 {
            let names = members(r);
            let mut sorted: Vec<&str> = names.iter().map(String::as_str).collect();
            sorted.sort_unstable();
            let by_names = assign(&sorted, &buckets, None);
            assert_eq!(assign(&sorted, &buckets, Some(&[7; 10])), by_names, "{r} members");
            assert_eq!(assign(&sorted, &buckets, Some(&[0; 10])), by_names, "{r} members");
            assert_eq!(
                assign(&sorted, &buckets, Some(&[1; 3])),
                by_names,
                "{r} members, counts of 3 buckets"
            );
        }
    }

    #[test]
    fn published_counts_are_read_only_when_whole() {
        assert_eq!(parse_keys("112,106, 84", 3), Some(vec![112, 106, 84]));
        assert_eq!(parse_keys("0", 1), Some(vec![0]));
        assert_eq!(parse_keys("112,106", 3), None, "too few");
        assert_eq!(parse_keys("1,2,3,4", 3), None, "too many");
        assert_eq!(parse_keys("1,-2,3", 3), None, "negative");
        assert_eq!(parse_keys("1,x,3", 3), None, "not a number");
        assert_eq!(parse_keys("", 1), None, "empty");
        assert_eq!(parse_keys("1,,3", 3), None, "a gap");
        assert_eq!(parse_keys("99999999999999999999999,1,2", 3), None, "out of range");
    }
}
