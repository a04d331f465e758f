//! Kubernetes events about the objects a controller reconciles.
//!
//! Reconcilers record through the [`Recorder`] trait. In a running controller
//! that is a [`KubeRecorder`]: it writes core/v1 Events, as client-go's
//! recorder (which Knative uses) does, from a background task so recording
//! never blocks a reconcile, with client-go's event correlation:
//!
//! - **spam filter**: per object and event type, a token bucket of 25 events
//!   refilled at one per 5 minutes; events beyond it are dropped;
//! - **aggregation**: after 10 events with the same reason but different
//!   messages within 10 minutes, further ones are folded into one event whose
//!   message starts with `(combined from similar events): `;
//! - **deduplication**: a repeat of an identical event increments `count` and
//!   `lastTimestamp` of the existing Event instead of creating another.
//!
//! kube-runtime's `events::Recorder` was not used: it merges events that differ
//! only in message into one series and keeps the first message, so a changing
//! error would never be seen, and it has no spam limit.
//!
//! Tests use a [`FakeRecorder`], which keeps `"<Type> <Reason> <Message>"`
//! strings in order, as Knative's table tests compare them.

use std::collections::HashSet;
use std::fmt;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use lru::LruCache;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Whether an event reports normal operation or something worth a look.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Normal operation.
    Normal,
    /// Something went wrong or may need attention.
    Warning,
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        })
    }
}

/// An event to record: a type, a CamelCase reason and a message for people.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Event {
    /// Normal or Warning.
    pub type_: EventType,
    /// A short, CamelCase reason (`FinalizerUpdate`).
    pub reason: String,
    /// What happened, for people.
    pub message: String,
}

impl Event {
    /// A Normal event.
    pub fn normal(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Event {
            type_: EventType::Normal,
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// A Warning event.
    pub fn warning(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Event {
            type_: EventType::Warning,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// `"<Type> <Reason> <Message>"`, the form Knative's table tests compare.
impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.type_, self.reason, self.message)
    }
}

/// Records events about objects. Implementations must not block.
pub trait Recorder: Send + Sync + 'static {
    /// Records `event` about the object `regarding` points at.
    fn record(&self, regarding: &ObjectReference, event: &Event);
}

/// A recorder shared through the injection context (tests put a
/// [`FakeRecorder`] there); without one, each reconciler writes core/v1 Events
/// under its agent name, and informers under `informer`.
#[derive(Clone)]
pub struct SharedRecorder(pub Arc<dyn Recorder>);

impl fmt::Debug for SharedRecorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SharedRecorder")
    }
}

/// A reference to `obj` for [`Recorder::record`].
pub fn object_reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    obj.object_ref(&())
}

/// Keeps every event as `"<Type> <Reason> <Message>"`, in order.
#[derive(Debug, Default)]
pub struct FakeRecorder {
    events: Mutex<Vec<String>>,
}

impl FakeRecorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the events recorded so far.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.events.lock())
    }

    /// The events recorded so far.
    pub fn events(&self) -> Vec<String> {
        self.events.lock().clone()
    }
}

impl Recorder for FakeRecorder {
    fn record(&self, _: &ObjectReference, event: &Event) {
        self.events.lock().push(event.to_string());
    }
}

const LRU_SIZE: usize = 4096;
const SPAM_BURST: f64 = 25.0;
const SPAM_REFILL_PER_SECOND: f64 = 1.0 / 300.0;
const AGGREGATE_MAX_EVENTS: usize = 10;
const AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);

/// Events waiting for the writer, at most (client-go's `maxQueuedEvents`);
/// beyond it events are dropped and counted, so a slow or unreachable API
/// server cannot grow memory.
pub const EVENT_QUEUE_LENGTH: usize = 1000;

type Queued = (ObjectReference, Event);

/// A writer not started yet, with the queue it will drain.
type IdleWriter = Option<(Writer, mpsc::Receiver<Queued>)>;

/// Writes core/v1 Events through the API server from a background task, with
/// client-go's spam filter, aggregation and deduplication (see the module docs).
#[derive(Clone)]
pub struct KubeRecorder {
    component: Arc<str>,
    tx: mpsc::Sender<Queued>,
    /// The writer, until the first event spawns it on the runtime it was
    /// recorded from: building a recorder needs no runtime.
    idle_writer: Arc<Mutex<IdleWriter>>,
    dropped: Arc<AtomicU64>,
}

impl fmt::Debug for KubeRecorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeRecorder")
            .field("component", &self.component)
            .field("dropped", &self.dropped_events())
            .finish()
    }
}

impl KubeRecorder {
    /// A recorder whose events name `component` (the controller's agent name,
    /// such as `addressableservice-controller`) and `host` as their source. Its
    /// writer starts on the tokio runtime of the first [`record`](Recorder::record)
    /// and stops when every clone of the recorder is dropped.
    pub fn new(client: Client, component: &str, host: Option<String>) -> Self {
        let (tx, rx) = mpsc::channel(EVENT_QUEUE_LENGTH);
        let writer = Writer {
            client,
            source: EventSource {
                component: Some(component.to_owned()),
                host,
            },
            correlator: Correlator::default(),
        };
        KubeRecorder {
            component: component.into(),
            tx,
            idle_writer: Arc::new(Mutex::new(Some((writer, rx)))),
            dropped: Arc::default(),
        }
    }

    /// Events dropped because the queue was full or no runtime could run the
    /// writer.
    pub fn dropped_events(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn drop_event(&self, why: &str) {
        let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        // Powers of two: a storm is visible without a line per event.
        if dropped.is_power_of_two() {
            tracing::warn!(component = %self.component, dropped, "dropping events: {why}");
        }
    }
}

impl Recorder for KubeRecorder {
    fn record(&self, regarding: &ObjectReference, event: &Event) {
        {
            let mut idle = self.idle_writer.lock();
            if idle.is_some() {
                let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                    drop(idle);
                    return self.drop_event("recorded outside a tokio runtime");
                };
                if let Some((writer, rx)) = idle.take() {
                    runtime.spawn(writer.run(rx));
                }
            }
        }
        if self.tx.try_send((regarding.clone(), event.clone())).is_err() {
            self.drop_event("the queue of events to write is full");
        }
    }
}

struct Writer {
    client: Client,
    source: EventSource,
    correlator: Correlator,
}

/// Where a recorded event was written, so a repeat can update it.
#[derive(Clone)]
struct Logged {
    name: String,
    namespace: String,
    count: i32,
}

#[derive(Default)]
struct Correlator {
    spam: Option<LruCache<String, (f64, Instant)>>,
    aggregates: Option<LruCache<String, (HashSet<String>, Instant)>>,
    logged: Option<LruCache<String, Logged>>,
}

fn lru<K: std::hash::Hash + Eq, V>(slot: &mut Option<LruCache<K, V>>) -> &mut LruCache<K, V> {
    slot.get_or_insert_with(|| LruCache::new(NonZeroUsize::MIN.saturating_add(LRU_SIZE - 1)))
}

impl Correlator {
    /// False when the object has used up its event budget.
    fn allow(&mut self, spam_key: String, now: Instant) -> bool {
        let (tokens, last) = lru(&mut self.spam)
            .get(&spam_key)
            .copied()
            .unwrap_or((SPAM_BURST, now));
        let refilled =
            (tokens + now.duration_since(last).as_secs_f64() * SPAM_REFILL_PER_SECOND).min(SPAM_BURST);
        let allowed = refilled >= 1.0;
        let left = if allowed { refilled - 1.0 } else { refilled };
        lru(&mut self.spam).put(spam_key, (left, now));
        allowed
    }

    /// The message to write and the key deduplication uses.
    fn aggregate(
        &mut self,
        aggregate_key: String,
        event_key: String,
        message: &str,
        now: Instant,
    ) -> (String, String) {
        let cache = lru(&mut self.aggregates);
        let (mut messages, last) = cache.pop(&aggregate_key).unwrap_or_else(|| (HashSet::new(), now));
        if now.duration_since(last) > AGGREGATE_INTERVAL {
            messages.clear();
        }
        messages.insert(message.to_owned());
        let folded = messages.len() >= AGGREGATE_MAX_EVENTS;
        if folded {
            // Keep the set bounded, as client-go does, however varied the messages.
            if let Some(any) = messages.iter().next().cloned() {
                messages.remove(&any);
            }
        }
        cache.put(aggregate_key.clone(), (messages, now));
        if folded {
            (
                format!("(combined from similar events): {message}"),
                aggregate_key,
            )
        } else {
            (message.to_owned(), event_key)
        }
    }
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<Queued>) {
        while let Some((regarding, event)) = rx.recv().await {
            self.write(&regarding, &event).await;
        }
    }

    async fn write(&mut self, regarding: &ObjectReference, event: &Event) {
        let now = Instant::now();
        let object = [
            self.source.component.as_deref().unwrap_or_default(),
            self.source.host.as_deref().unwrap_or_default(),
            regarding.kind.as_deref().unwrap_or_default(),
            regarding.namespace.as_deref().unwrap_or_default(),
            regarding.name.as_deref().unwrap_or_default(),
            regarding.uid.as_deref().unwrap_or_default(),
            regarding.api_version.as_deref().unwrap_or_default(),
        ]
        .join("\u{1f}");
        let type_ = event.type_.to_string();
        if !self.correlator.allow(format!("{object}\u{1f}{type_}"), now) {
            tracing::debug!(reason = %event.reason, "event dropped by the spam filter");
            return;
        }
        let aggregate_key = format!("{object}\u{1f}{type_}\u{1f}{}", event.reason);
        let event_key = format!("{aggregate_key}\u{1f}{}", event.message);
        let (message, dedup_key) = self
            .correlator
            .aggregate(aggregate_key, event_key, &event.message, now);

        let timestamp = Time(Timestamp::now());
        let previous = lru(&mut self.correlator.logged).get(&dedup_key).cloned();
        let result = match previous {
            Some(logged) => self.count_again(logged, &message, timestamp).await,
            None => self.create(regarding, event, message, type_, timestamp).await,
        };
        match result {
            Ok(logged) => {
                lru(&mut self.correlator.logged).put(dedup_key, logged);
            }
            Err(err) => {
                // The event may have been garbage collected; write a new one next time.
                lru(&mut self.correlator.logged).pop(&dedup_key);
                tracing::warn!(error = %err, reason = %event.reason,
                    "could not write event (check that the service account may create and patch events)");
            }
        }
    }

    /// Counts one more occurrence of an event already written.
    async fn count_again(
        &self,
        logged: Logged,
        message: &str,
        timestamp: Time,
    ) -> Result<Logged, kube::Error> {
        let api: Api<CoreEvent> = Api::namespaced(self.client.clone(), &logged.namespace);
        let patch = serde_json::json!({
            "count": logged.count + 1,
            "lastTimestamp": timestamp,
            "message": message,
        });
        api.patch(&logged.name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .map(|_| Logged {
                count: logged.count + 1,
                ..logged
            })
    }

    /// Writes a new event about `regarding`.
    async fn create(
        &self,
        regarding: &ObjectReference,
        event: &Event,
        message: String,
        type_: String,
        timestamp: Time,
    ) -> Result<Logged, kube::Error> {
        // Cluster-scoped objects get their events in "default", as client-go does.
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let name = format!(
            "{}.{:x}",
            regarding.name.as_deref().unwrap_or("event"),
            Timestamp::now().as_nanosecond()
        );
        let body = CoreEvent {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            involved_object: regarding.clone(),
            reason: Some(event.reason.clone()),
            message: Some(message),
            type_: Some(type_),
            count: Some(1),
            first_timestamp: Some(timestamp.clone()),
            last_timestamp: Some(timestamp),
            source: Some(self.source.clone()),
            reporting_component: self.source.component.clone(),
            reporting_instance: self.source.host.clone(),
            ..CoreEvent::default()
        };
        let api: Api<CoreEvent> = Api::namespaced(self.client.clone(), &namespace);
        api.create(&PostParams::default(), &body).await.map(|_| Logged {
            name,
            namespace,
            count: 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client whose requests never finish: the writer blocks on its first event.
    fn stuck_client() -> Client {
        let service = tower::service_fn(|_req: http::Request<kube::client::Body>| {
            futures::future::pending::<Result<http::Response<kube::client::Body>, std::io::Error>>()
        });
        Client::new(service, "default")
    }

    fn pod() -> ObjectReference {
        ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("ns".into()),
            name: Some("p".into()),
            ..ObjectReference::default()
        }
    }

    #[tokio::test]
    async fn a_full_queue_drops_and_counts_events() {
        let recorder = KubeRecorder::new(stuck_client(), "test-controller", None);
        let event = Event::normal("Reason", "message");
        for _ in 0..EVENT_QUEUE_LENGTH + 5 {
            recorder.record(&pod(), &event);
        }
        assert_eq!(recorder.dropped_events(), 5);
    }

    #[test]
    fn recording_outside_a_runtime_drops_instead_of_panicking() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let client = runtime.block_on(async { stuck_client() });
        let recorder = KubeRecorder::new(client, "test-controller", None);
        recorder.record(&pod(), &Event::normal("Reason", "message"));
        assert_eq!(recorder.dropped_events(), 1);
    }

    #[test]
    fn events_print_like_knatives_fake_recorder() {
        assert_eq!(
            Event::normal("FinalizerUpdate", "Updated \"rut\" finalizers").to_string(),
            "Normal FinalizerUpdate Updated \"rut\" finalizers"
        );
        let fake = FakeRecorder::new();
        fake.record(
            &ObjectReference::default(),
            &Event::warning("InternalError", "boom"),
        );
        assert_eq!(fake.take(), ["Warning InternalError boom"]);
        assert!(fake.events().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn spam_filter_allows_a_burst_then_one_per_five_minutes() {
        let mut c = Correlator::default();
        let now = Instant::now();
        let allowed = (0..30).filter(|_| c.allow("obj".into(), now)).count();
        assert_eq!(allowed, 25);
        assert!(!c.allow("obj".into(), now + Duration::from_secs(299)));
        assert!(c.allow("obj".into(), now + Duration::from_secs(301)));
        assert!(c.allow("other".into(), now), "budgets are per object");
    }

    #[tokio::test(start_paused = true)]
    async fn tenth_distinct_message_is_aggregated() {
        let mut c = Correlator::default();
        let now = Instant::now();
        for i in 0..9 {
            let (msg, key) = c.aggregate("agg".into(), format!("ev{i}"), &format!("m{i}"), now);
            assert_eq!((msg, key), (format!("m{i}"), format!("ev{i}")));
        }
        let (msg, key) = c.aggregate("agg".into(), "ev9".into(), "m9", now);
        assert_eq!(
            (msg.as_str(), key.as_str()),
            ("(combined from similar events): m9", "agg")
        );
        let (msg, _) = c.aggregate("agg".into(), "ev10".into(), "m10", now + AGGREGATE_INTERVAL * 2);
        assert_eq!(msg, "m10", "the window restarts after 10 minutes");
    }
}
