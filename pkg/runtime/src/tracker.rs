//! Reconcile an object when something it refers to changes (Knative's
//! `tracker`).
//!
//! A reconciler that reads another object (a Service its AddressableService
//! names, say) registers the reference with [`Tracker::track_reference`]. The
//! informer of the referenced kind calls [`Tracker::on_changed`] on every change
//! (wired by [`Tracker::handler`]), and the tracker calls its callback, for a
//! controller's tracker an enqueue of [`Reason::Related`](crate::controller::Reason::Related),
//! with the key of every observer. References name one object or select many by label.
//!
//! Registrations are leases: they expire unless renewed, and reconcilers renew
//! them by tracking again on every reconcile (a resync reconciles everything
//! within the resync period, so a lease of three periods never lapses for a
//! live observer). A new or lapsed registration calls the callback at once, to
//! close the window between the reconciler reading the referent and the
//! registration taking effect, unless the tracker knows that window was
//! empty: the observer's controller runs each reconcile inside
//! [`Tracker::reconciling`], and when no referent changed
//! ([`on_changed`](Tracker::on_changed)) between the start of that reconcile
//! and the registration, what the reconciler read is still current and its
//! controller is not asked to reconcile the key a second time. (Knative
//! always calls back, so every observer is reconciled twice when its
//! controller starts.) Time is tokio's, so tests can pause it.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::Service;
//! use kube::api::ObjectMeta;
//! use kinject_runtime::key::ObjectKey;
//! use kinject_runtime::tracker::{Reference, Tracker};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let enqueued = Arc::new(Mutex::new(Vec::new()));
//! let tracker = Tracker::new(
//!     { let enqueued = enqueued.clone(); move |key: ObjectKey| enqueued.lock().unwrap().push(key) },
//!     Duration::from_secs(30 * 3600),
//! );
//!
//! // While reconciling default/asvc, which points at Service default/web:
//! let observer = Service { metadata: ObjectMeta { namespace: Some("default".into()), name: Some("asvc".into()), ..Default::default() }, ..Default::default() };
//! let reference = Reference::named("v1", "Service", "default", "web");
//! tracker.track_reference(&reference, &observer).unwrap();
//!
//! // Later, the Service informer reports a change:
//! let web = Service { metadata: ObjectMeta { namespace: Some("default".into()), name: Some("web".into()), ..Default::default() }, ..Default::default() };
//! tracker.on_changed(&web);
//! assert_eq!(enqueued.lock().unwrap().len(), 2); // the registration, then the change
//! # }
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Resource;
use kube::core::{Selector, SelectorExt};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::apis::validation::{
    is_c_identifier, is_dns1123_label, is_dns1123_subdomain, is_qualified_name, is_valid_label_value,
};
use crate::apis::{FieldError, go_quote};
use crate::informer::EventHandler;
use crate::key::ObjectKey;

/// Knative's default lease: three times its default resync period of 10 hours.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(3 * 10 * 3600);

/// What an observer tracks: one object by name, or the objects of a kind in a
/// namespace that match a label selector (Knative's `tracker.Reference`).
///
/// An empty `namespace` refers to cluster-scoped objects. Exactly one of `name`
/// and `selector` must be set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reference {
    /// The referent's API version (`v1`, `apps/v1`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The referent's kind.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The referent's namespace; empty for cluster-scoped referents.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The referent's name. Mutually exclusive with `selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A selector of referents. Mutually exclusive with `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

impl Reference {
    /// A reference to one object by name.
    pub fn named(
        api_version: impl Into<String>,
        kind: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Reference {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: Some(name.into()),
            selector: None,
        }
    }

    /// A reference to the objects of a kind in a namespace that `selector`
    /// matches.
    pub fn selected(
        api_version: impl Into<String>,
        kind: impl Into<String>,
        namespace: impl Into<String>,
        selector: LabelSelector,
    ) -> Self {
        Reference {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: None,
            selector: Some(selector),
        }
    }

    /// The name, treating an empty one as unset (as Go's zero value is).
    fn name(&self) -> Option<&str> {
        self.name.as_deref().filter(|n| !n.is_empty())
    }

    /// Checks a reference held in an API object's spec, with Knative's rules and
    /// messages (`Reference.Validate`): `apiVersion` is a qualified name, `kind`
    /// a C identifier, `namespace` a DNS-1123 label and required, and exactly one
    /// of `name` (a DNS-1123 label) and a valid `selector`.
    ///
    /// ```
    /// use kinject_runtime::tracker::Reference;
    /// let err = Reference::default().validate().unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "expected exactly one, got neither: name, selector\nmissing field(s): apiVersion, kind, namespace"
    /// );
    /// ```
    pub fn validate(&self) -> Result<(), FieldError> {
        let mut errs = self.validate_common(true);
        errs = match (self.name(), &self.selector) {
            (Some(_), Some(_)) => errs.also(FieldError::multiple_one_of(["selector", "name"])),
            (None, Some(selector)) => match selector_from(selector) {
                Ok(_) => errs,
                Err(msg) => errs.also(FieldError::invalid_value(msg, "selector")),
            },
            (Some(name), None) => errs.also(invalid("name", &is_dns1123_label(name))),
            (None, None) => errs.also(FieldError::missing_one_of(["selector", "name"])),
        };
        errs.into_result()
    }

    /// Checks that the reference can become a `corev1.ObjectReference` (Knative's
    /// `ValidateObjectReference`): as [`validate`](Self::validate), but `name` is
    /// required and `selector` disallowed.
    pub fn validate_object_reference(&self) -> Result<(), FieldError> {
        let mut errs = self.validate_common(false);
        errs = match self.name() {
            None => errs.also(FieldError::missing_field(["name"])),
            Some(name) => errs.also(invalid("name", &is_dns1123_label(name))),
        };
        if self.namespace.is_empty() {
            errs = errs.also(FieldError::missing_field(["namespace"]));
        } else {
            errs = errs.also(invalid("namespace", &is_dns1123_label(&self.namespace)));
        }
        if self.selector.is_some() {
            errs = errs.also(FieldError::disallowed_fields(["selector"]));
        }
        errs.into_result()
    }

    fn validate_common(&self, with_namespace: bool) -> FieldError {
        let mut errs = FieldError::default();
        errs = if self.api_version.is_empty() {
            errs.also(FieldError::missing_field(["apiVersion"]))
        } else {
            errs.also(invalid("apiVersion", &is_qualified_name(&self.api_version)))
        };
        errs = if self.kind.is_empty() {
            errs.also(FieldError::missing_field(["kind"]))
        } else {
            errs.also(invalid("kind", &is_c_identifier(&self.kind)))
        };
        if with_namespace {
            errs = if self.namespace.is_empty() {
                errs.also(FieldError::missing_field(["namespace"]))
            } else {
                errs.also(invalid("namespace", &is_dns1123_label(&self.namespace)))
            };
        }
        errs
    }
}

/// `invalid value: <problems>: <path>`, or nothing when there are no problems.
fn invalid(path: &str, problems: &[String]) -> FieldError {
    if problems.is_empty() {
        FieldError::default()
    } else {
        FieldError::invalid_value(problems.join(", "), path)
    }
}

/// A reference the tracker cannot track, with the tracker's own rules (looser
/// than [`Reference::validate`]: the namespace may be empty for cluster-scoped
/// referents, and a name is a DNS-1123 subdomain). Displays as Knative's
/// `invalid Reference:` followed by one sorted line per problem.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid Reference:\n{}", .problems.join("\n"))]
pub struct InvalidReference {
    problems: Vec<String>,
}

impl InvalidReference {
    /// The problems, sorted.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }
}

/// How the tracker matches a reference: the selector, or `None` for a name.
fn check_trackable(reference: &Reference) -> Result<Option<Selector>, InvalidReference> {
    let mut problems = Vec::new();
    let mut field = |name: &str, errs: Vec<String>| {
        problems.extend(errs.into_iter().map(|e| format!("{name}: {e}")));
    };
    field("APIVersion", is_qualified_name(&reference.api_version));
    field("Kind", is_c_identifier(&reference.kind));
    if !reference.namespace.is_empty() {
        field("Namespace", is_dns1123_label(&reference.namespace));
    }
    let mut selector = None;
    match (reference.name(), &reference.selector) {
        (Some(_), Some(_)) => problems.push("cannot provide both Name and Selector".to_owned()),
        (Some(name), None) => field("Name", is_dns1123_subdomain(name)),
        (None, Some(ls)) => match selector_from(ls) {
            Ok(s) => selector = Some(s),
            Err(msg) => problems.push(format!("Selector: {msg}")),
        },
        (None, None) => problems.push("must provide either Name or Selector".to_owned()),
    }
    if problems.is_empty() {
        Ok(selector)
    } else {
        problems.sort();
        Err(InvalidReference { problems })
    }
}

/// Converts a label selector, rejecting what apimachinery's
/// `LabelSelectorAsSelector` rejects, with its messages.
fn selector_from(ls: &LabelSelector) -> Result<Selector, String> {
    let empty = BTreeMap::new();
    for (key, value) in ls.match_labels.as_ref().unwrap_or(&empty) {
        requirement(key, Op::Equals, Some(std::slice::from_ref(value)))?;
    }
    for expr in ls.match_expressions.iter().flatten() {
        let op = match expr.operator.as_str() {
            "In" => Op::In,
            "NotIn" => Op::NotIn,
            "Exists" => Op::Exists,
            "DoesNotExist" => Op::DoesNotExist,
            other => {
                return Err(format!(
                    "{} is not a valid label selector operator",
                    go_quote(other)
                ));
            }
        };
        requirement(&expr.key, op, expr.values.as_deref())?;
    }
    Selector::try_from(ls.clone()).map_err(|e| e.to_string())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Equals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// apimachinery's `NewRequirement` checks, as one aggregated message.
fn requirement(key: &str, op: Op, values: Option<&[String]>) -> Result<(), String> {
    let values = values.unwrap_or_default();
    // Go copies the values into a nil slice, so an empty list prints as null.
    let values_json = if values.is_empty() {
        "null".to_owned()
    } else {
        serde_json::to_string(values).unwrap_or_else(|_| format!("{values:?}"))
    };
    let mut errs: Vec<String> = Vec::new();
    let key_errs = is_qualified_name(key);
    if !key_errs.is_empty() {
        errs.push(format!(
            "key: Invalid value: {}: {}",
            go_quote(key),
            key_errs.join("; ")
        ));
    }
    match op {
        Op::In | Op::NotIn if values.is_empty() => errs.push(format!(
            "values: Invalid value: {values_json}: for 'in', 'notin' operators, values set can't be empty"
        )),
        Op::Equals if values.len() != 1 => errs.push(format!(
            "values: Invalid value: {values_json}: exact-match compatibility requires one single value"
        )),
        Op::Exists | Op::DoesNotExist if !values.is_empty() => errs.push(format!(
            "values: Invalid value: {values_json}: values set must be empty for exists and does not exist"
        )),
        _ => {}
    }
    for (i, value) in values.iter().enumerate() {
        let value_errs = is_valid_label_value(value);
        if !value_errs.is_empty() {
            errs.push(format!(
                "values[{i}][{key}]: Invalid value: {}: {}",
                go_quote(value),
                value_errs.join("; ")
            ));
        }
    }
    errs.dedup();
    match errs.len() {
        0 => Ok(()),
        1 => Err(errs.remove(0)),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

/// The identity of a referent: what exact registrations are keyed by, and,
/// with an empty name, selector registrations. The group-version and kind
/// are shared by every registration that names them ([`State::intern`]): a
/// controller that tracks one Service per object holds "v1" and "Service"
/// once, not once per object.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct RefKey {
    api_version: Arc<str>,
    kind: Arc<str>,
    namespace: Box<str>,
    name: Box<str>,
}

struct Matcher {
    selector: Selector,
    expiry: Instant,
}

/// Up to this many observers of one referent are kept in a vector; more in
/// a map, so a referent many objects track (a shared ConfigMap) still
/// registers and forgets in constant time.
const FEW: usize = 8;

/// The observers of one referent, each with what it registered. Nearly always
/// one (an object tracking the object it names): a vector of one costs one
/// small allocation where a map costs a table of four slots.
enum Observers<V> {
    Few(Vec<(ObjectKey, V)>),
    Many(HashMap<ObjectKey, V>),
}

impl<V> Default for Observers<V> {
    fn default() -> Self {
        Observers::Few(Vec::new())
    }
}

impl<V> Observers<V> {
    /// Registers `observer`; what it had registered before, if anything.
    fn insert(&mut self, observer: ObjectKey, value: V) -> Option<V> {
        match self {
            Observers::Many(map) => map.insert(observer, value),
            Observers::Few(few) => {
                if let Some((_, old)) = few.iter_mut().find(|(key, _)| *key == observer) {
                    return Some(std::mem::replace(old, value));
                }
                if few.len() < FEW {
                    few.reserve_exact(1);
                    few.push((observer, value));
                } else {
                    let mut map: HashMap<ObjectKey, V> = few.drain(..).collect();
                    map.insert(observer, value);
                    *self = Observers::Many(map);
                }
                None
            }
        }
    }

    fn remove(&mut self, observer: &ObjectKey) {
        match self {
            Observers::Many(map) => {
                map.remove(observer);
            }
            Observers::Few(few) => few.retain(|(key, _)| key != observer),
        }
    }

    fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        match self {
            Observers::Many(map) => map.retain(|_, value| keep(value)),
            Observers::Few(few) => few.retain(|(_, value)| keep(value)),
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Observers::Many(map) => map.is_empty(),
            Observers::Few(few) => few.is_empty(),
        }
    }

    /// Without boxing: called for every change of a tracked kind.
    fn iter(&self) -> impl Iterator<Item = (&ObjectKey, &V)> {
        let (few, many) = match self {
            Observers::Few(few) => (Some(few.iter().map(|(key, value)| (key, value))), None),
            Observers::Many(map) => (None, Some(map.iter())),
        };
        few.into_iter().flatten().chain(many.into_iter().flatten())
    }
}

#[derive(Default)]
struct State {
    /// Referent → observer → lease expiry.
    exact: HashMap<RefKey, Observers<Instant>>,
    /// Referent without its name → observer → selector and lease expiry.
    inexact: HashMap<RefKey, Observers<Matcher>>,
    /// Observers being reconciled → [`Inner::changes`] when the reconcile began.
    reconciling: HashMap<ObjectKey, u64>,
    /// The group-versions and kinds registrations name, each held once;
    /// bounded by the kinds a program tracks.
    interned: HashSet<Arc<str>>,
}

impl State {
    /// The one shared copy of `text`.
    fn intern(&mut self, text: &str) -> Arc<str> {
        if let Some(shared) = self.interned.get(text) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(text);
        self.interned.insert(shared.clone());
        shared
    }
}

type Callback = Box<dyn Fn(ObjectKey) + Send + Sync>;

/// Remembers which observers track which references and tells the callback
/// when a referent changes; see the [module docs](self). Cloning is cheap and
/// shares the registrations.
#[derive(Clone)]
pub struct Tracker {
    inner: Arc<Inner>,
}

struct Inner {
    lease: Duration,
    callback: Callback,
    state: Mutex<State>,
    /// Calls of [`Tracker::on_changed`] so far, of any referent: one that
    /// moved since a reconcile began may have changed what it read.
    changes: AtomicU64,
}

impl fmt::Debug for Tracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("Tracker")
            .field("lease", &self.inner.lease)
            .field("exact", &state.exact.len())
            .field("selectors", &state.inexact.len())
            .finish_non_exhaustive()
    }
}

fn expired(expiry: Instant, now: Instant) -> bool {
    now > expiry
}

/// A reconcile of an observer in progress; see [`Tracker::reconciling`].
#[must_use = "the reconcile counts as in progress only while the guard lives"]
pub struct Reconciling<'a> {
    tracker: &'a Tracker,
    observer: ObjectKey,
}

impl fmt::Debug for Reconciling<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reconciling")
            .field("observer", &self.observer)
            .finish_non_exhaustive()
    }
}

impl Drop for Reconciling<'_> {
    fn drop(&mut self) {
        self.tracker.lock().reconciling.remove(&self.observer);
    }
}

impl Tracker {
    /// A tracker that calls `callback` with an observer's key when something it
    /// tracks changes, and keeps registrations for `lease` after their last
    /// renewal.
    pub fn new(callback: impl Fn(ObjectKey) + Send + Sync + 'static, lease: Duration) -> Self {
        Tracker {
            inner: Arc::new(Inner {
                lease,
                callback: Box::new(callback),
                state: Mutex::default(),
                changes: AtomicU64::new(0),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The maps are consistent between statements; recover from a poisoned lock.
        self.inner.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks `observer` as being reconciled until the returned guard is
    /// dropped: a registration the reconcile makes then calls back only if a
    /// referent changed since this call. A controller's workers wrap every
    /// reconcile in it; call it before the reconcile reads anything.
    pub fn reconciling(&self, observer: &ObjectKey) -> Reconciling<'_> {
        // Read before the reconciler reads a cache: an informer stores an
        // object before its handlers call `on_changed`, so a change the
        // reconciler may have missed is counted after this.
        let changes = self.inner.changes.load(Ordering::SeqCst);
        self.lock().reconciling.insert(observer.clone(), changes);
        Reconciling {
            tracker: self,
            observer: observer.clone(),
        }
    }

    /// Registers (or renews) `observer`'s interest in `reference`. A new
    /// registration, or one whose lease had lapsed, calls the callback with the
    /// observer's key at once, unless it is made during the observer's
    /// reconcile ([`reconciling`](Self::reconciling)) and no referent changed
    /// since that began.
    pub fn track_reference<O: Resource>(
        &self,
        reference: &Reference,
        observer: &O,
    ) -> Result<(), InvalidReference> {
        let selector = check_trackable(reference)?;
        let observer = ObjectKey::of(observer);
        let now = Instant::now();
        let expiry = now.checked_add(self.inner.lease).unwrap_or(now);
        let catch_up = {
            let mut state = self.lock();
            let ref_key = RefKey {
                api_version: state.intern(&reference.api_version),
                kind: state.intern(&reference.kind),
                namespace: reference.namespace.as_str().into(),
                name: match selector {
                    None => reference.name().unwrap_or_default().into(),
                    Some(_) => "".into(),
                },
            };
            let is_new = match selector {
                None => {
                    let observers = state.exact.entry(ref_key).or_default();
                    let previous = observers.insert(observer.clone(), expiry);
                    previous.is_none_or(|old| expired(old, now))
                }
                Some(selector) => {
                    let observers = state.inexact.entry(ref_key).or_default();
                    let previous = observers.insert(observer.clone(), Matcher { selector, expiry });
                    previous.is_none_or(|old| expired(old.expiry, now))
                }
            };
            // Read after the registration is in place: a change counted
            // after this finds it in `get_observers` and calls back itself.
            is_new
                && state
                    .reconciling
                    .get(&observer)
                    .is_none_or(|&began| began != self.inner.changes.load(Ordering::SeqCst))
        };
        if catch_up {
            // Called without the lock, so the callback may use the tracker.
            (self.inner.callback)(observer);
        }
        Ok(())
    }

    /// The handler for the referent kind's informer: every add, update and
    /// delete calls [`on_changed`](Self::on_changed); resyncs are skipped, as
    /// they re-deliver what did not change and the observers' own informer
    /// resyncs them.
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::Service;
    /// # use kinject_runtime::{injection::Context, tracker::Tracker};
    /// # fn wire(ctx: &Context, tracker: &Tracker) {
    /// ctx.informer::<Service>().add_event_handler(tracker.handler());
    /// # }
    /// ```
    pub fn handler<K: Resource<DynamicType = ()> + 'static>(&self) -> EventHandler<K> {
        let tracker = self.clone();
        EventHandler::all(move |obj: &K| tracker.on_changed(obj)).skip_resyncs()
    }

    /// Calls the callback for every observer of `obj` (see
    /// [`get_observers`](Self::get_observers)). [`handler`](Self::handler)
    /// wires it to the referent kind's informer.
    pub fn on_changed<K: Resource<DynamicType = ()>>(&self, obj: &K) {
        self.inner.changes.fetch_add(1, Ordering::SeqCst);
        for observer in self.get_observers(obj) {
            (self.inner.callback)(observer);
        }
    }

    /// The observers with an unexpired lease on `obj`: those tracking it by name,
    /// and those whose selector (for its kind and namespace) matches its labels.
    /// Sorted, without duplicates. Expired registrations are removed.
    pub fn get_observers<K: Resource<DynamicType = ()>>(&self, obj: &K) -> Vec<ObjectKey> {
        let meta = obj.meta();
        let now = Instant::now();
        let mut observers = Vec::new();
        let mut state = self.lock();
        // A kind nobody registered for has no observers.
        let (Some(api_version), Some(kind)) = (
            state.interned.get(K::api_version(&()).as_ref()).cloned(),
            state.interned.get(K::kind(&()).as_ref()).cloned(),
        ) else {
            return observers;
        };
        let mut ref_key = RefKey {
            api_version,
            kind,
            namespace: meta.namespace.as_deref().unwrap_or_default().into(),
            name: meta.name.as_deref().unwrap_or_default().into(),
        };

        if let Some(exact) = state.exact.get_mut(&ref_key) {
            exact.retain(|expiry| !expired(*expiry, now));
            observers.extend(exact.iter().map(|(key, _)| key.clone()));
            if exact.is_empty() {
                state.exact.remove(&ref_key);
            }
        }

        ref_key.name = "".into();
        if let Some(inexact) = state.inexact.get_mut(&ref_key) {
            inexact.retain(|m| !expired(m.expiry, now));
            let empty = BTreeMap::new();
            let labels = meta.labels.as_ref().unwrap_or(&empty);
            observers.extend(
                inexact
                    .iter()
                    .filter(|(_, m)| m.selector.matches(labels))
                    .map(|(k, _)| k.clone()),
            );
            if inexact.is_empty() {
                state.inexact.remove(&ref_key);
            }
        }
        drop(state);

        observers.sort();
        observers.dedup();
        observers
    }

    /// Forgets every registration of `observer`: wire it to the delete events
    /// of the observer kind's informer, so deleted observers are not enqueued
    /// until their leases lapse.
    pub fn on_deleted_observer<O: Resource>(&self, observer: &O) {
        self.forget_observer(&ObjectKey::of(observer));
    }

    /// Forgets every registration of the observer `key` names; the generated
    /// reconciler calls it when the observer is gone from the cache.
    pub fn forget_observer(&self, key: &ObjectKey) {
        let mut state = self.lock();
        state.exact.retain(|_, observers| {
            observers.remove(key);
            !observers.is_empty()
        });
        state.inexact.retain(|_, observers| {
            observers.remove(key);
            !observers.is_empty()
        });
    }
}
