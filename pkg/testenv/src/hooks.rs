//! Testing hooks: the action log, reactors that fail requests, request counters.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;

use crate::errors::{ErrorStatus, qualified};

/// One request the server received, in arrival order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    /// client-go's verb: get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    /// The API group, empty for the core group.
    pub group: String,
    /// The API version, e.g. `v1`.
    pub version: String,
    /// The resource plural, e.g. `pods`.
    pub resource: String,
    /// `status` for the status subresource, else empty.
    pub subresource: String,
    /// Empty for cluster-scoped requests and lists across namespaces.
    pub namespace: String,
    /// Empty for collection requests.
    pub name: String,
    /// The request's `Content-Type` (tells patch types apart).
    pub content_type: String,
    /// The request's `Accept` (tells metadata-only and Table reads apart).
    pub accept: String,
    /// The body or patch bytes exactly as received; `None` when the request had none.
    pub body: Option<Bytes>,
    /// The decoded query string (e.g. `fieldManager`, `labelSelector`).
    pub query: Vec<(String, String)>,
    /// The request's `User-Agent`, as audit logs record it: tells apart the
    /// clients (say, controller replicas) sharing one server.
    pub user_agent: String,
}

impl Action {
    /// Whether the request lists its resource: a list, or a watch that
    /// streams the list first (`sendInitialEvents=true`, how informers list
    /// by default).
    pub fn lists(&self) -> bool {
        self.verb == "list"
            || (self.verb == "watch"
                && self
                    .query
                    .iter()
                    .any(|(k, v)| k == "sendInitialEvents" && v == "true"))
    }

    /// The body parsed as JSON, for assertions.
    pub fn body_json(&self) -> Option<serde_json::Value> {
        self.body.as_ref().and_then(|b| serde_json::from_slice(b).ok())
    }

    /// About how much memory the action keeps alive in the log: what its
    /// byte budget counts. The body dominates; the rest is a few strings.
    pub(crate) fn approximate_bytes(&self) -> usize {
        let strings = [
            &self.verb,
            &self.group,
            &self.version,
            &self.resource,
            &self.subresource,
            &self.namespace,
            &self.name,
            &self.content_type,
            &self.accept,
            &self.user_agent,
        ];
        let query: usize = self
            .query
            .iter()
            .map(|(k, v)| std::mem::size_of::<(String, String)>() + k.len() + v.len())
            .sum();
        std::mem::size_of::<Self>()
            + strings.iter().map(|s| s.len()).sum::<usize>()
            + query
            + self.body.as_ref().map_or(0, Bytes::len)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Window {
    /// Every matching request.
    Always,
    /// The next K matching requests.
    Next(u64),
    /// Only the N-th matching request (1-based).
    Nth(u64),
}

/// Fails requests that match a verb and resource (and optionally more), like client-go's
/// fake reactors and Knative's `InduceFailure`.
///
/// ```
/// use kinject_testenv::{ErrorStatus, Reactor};
/// // The next status update of an addressableservice gets one Conflict.
/// let r = Reactor::on("update", "addressableservices")
///     .subresource("status")
///     .times(1)
///     .respond(ErrorStatus::conflict());
/// // Every pod creation fails with "inducing failure for create pods".
/// let r2 = Reactor::on("create", "pods");
/// # let _ = (r, r2);
/// ```
#[derive(Clone, Debug)]
pub struct Reactor {
    verb: String,
    resource: String,
    subresource: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    window: Window,
    response: Option<ErrorStatus>,
    matched: u64,
    fired: u64,
}

impl Reactor {
    /// Matches `verb` (or `*`) on `resource` (plural, `plural.group`, or `*`). Without
    /// `respond`, answers `500 InternalError` with `inducing failure for <verb> <resource>`.
    pub fn on(verb: &str, resource: &str) -> Self {
        Self {
            verb: verb.to_owned(),
            resource: resource.to_owned(),
            subresource: None,
            namespace: None,
            name: None,
            window: Window::Always,
            response: None,
            matched: 0,
            fired: 0,
        }
    }

    /// Only requests to this subresource (`status`); `""` means the main resource.
    #[must_use]
    pub fn subresource(mut self, sub: &str) -> Self {
        self.subresource = Some(sub.to_owned());
        self
    }

    /// Only requests in this namespace.
    #[must_use]
    pub fn namespace(mut self, ns: &str) -> Self {
        self.namespace = Some(ns.to_owned());
        self
    }

    /// Only requests for this object name.
    #[must_use]
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }

    /// Fails only the next `k` matching requests, then lets them through.
    #[must_use]
    pub fn times(mut self, k: u64) -> Self {
        self.window = Window::Next(k);
        self
    }

    /// Fails only the `n`-th matching request (1-based).
    #[must_use]
    pub fn nth(mut self, n: u64) -> Self {
        self.window = Window::Nth(n);
        self
    }

    /// The Status to answer with. An empty message is filled from the request (a
    /// Conflict reads `Operation cannot be fulfilled on ...`).
    #[must_use]
    pub fn respond(mut self, status: ErrorStatus) -> Self {
        self.response = Some(status);
        self
    }

    fn matches(&self, a: &Action) -> bool {
        let resource_ok = self.resource == "*"
            || self.resource == a.resource
            || self.resource == qualified(&a.group, &a.resource);
        (self.verb == "*" || self.verb == a.verb)
            && resource_ok
            && self.subresource.as_ref().is_none_or(|s| *s == a.subresource)
            && self.namespace.as_ref().is_none_or(|n| *n == a.namespace)
            && self.name.as_ref().is_none_or(|n| *n == a.name)
    }

    /// Counts a matching request and tells whether this reactor fails it.
    fn fire(&mut self, a: &Action) -> Option<ErrorStatus> {
        if !self.matches(a) {
            return None;
        }
        self.matched += 1;
        let fires = match self.window {
            Window::Always => true,
            Window::Next(k) => self.fired < k,
            Window::Nth(n) => self.matched == n,
        };
        if !fires {
            return None;
        }
        self.fired += 1;
        let status = self
            .response
            .clone()
            .unwrap_or_else(|| ErrorStatus::new(500, "InternalError", ""));
        Some(status.fill_for(&a.verb, &a.group, &a.resource, &a.name))
    }
}

/// The requests received, bounded in bytes: a served testenv (a local
/// cluster, `testenv serve`) takes requests for as long as it runs, and a
/// log of every body would grow with each of them.
#[derive(Debug)]
pub(crate) struct ActionLog {
    actions: VecDeque<Action>,
    /// The [`Action::approximate_bytes`] of `actions`.
    bytes: usize,
    budget: usize,
    /// Requests left out since the last clear, for want of room.
    dropped: u64,
}

impl ActionLog {
    pub(crate) fn new(budget: usize) -> Self {
        Self {
            actions: VecDeque::new(),
            bytes: 0,
            budget,
            dropped: 0,
        }
    }

    /// Keeps `a`, making room by forgetting the oldest requests; an action
    /// larger than the whole budget is not kept, so the bound holds.
    fn push(&mut self, mut a: Action) {
        let size = a.approximate_bytes();
        if size > self.budget {
            self.dropped += 1;
            return;
        }
        // The request's buffer may have grown past its body while it was read;
        // a copy of exactly the body is what the budget counts.
        a.body = a.body.map(|b| Bytes::copy_from_slice(&b));
        self.bytes += size;
        self.actions.push_back(a);
        while self.bytes > self.budget {
            let Some(old) = self.actions.pop_front() else {
                break;
            };
            self.bytes -= old.approximate_bytes();
            self.dropped += 1;
        }
    }

    pub(crate) fn actions(&self) -> Vec<Action> {
        self.actions.iter().cloned().collect()
    }

    pub(crate) fn clear(&mut self) {
        self.actions.clear();
        self.bytes = 0;
        self.dropped = 0;
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[derive(Debug)]
pub(crate) struct Hooks {
    pub(crate) log: ActionLog,
    pub(crate) reactors: Vec<Reactor>,
    pub(crate) counts: BTreeMap<(String, String), u64>,
}

impl Hooks {
    pub(crate) fn new(log_budget: usize) -> Self {
        Self {
            log: ActionLog::new(log_budget),
            reactors: Vec::new(),
            counts: BTreeMap::new(),
        }
    }

    /// Logs and counts a request, then asks the reactors, in the order they were added.
    pub(crate) fn record(&mut self, a: Action) -> Option<ErrorStatus> {
        *self
            .counts
            .entry((a.verb.clone(), a.resource.clone()))
            .or_default() += 1;
        let verdict = self.reactors.iter_mut().find_map(|r| r.fire(&a));
        if self.log.budget > 0 {
            self.log.push(a);
        } else {
            self.log.dropped += 1;
        }
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(body: usize) -> Action {
        Action {
            verb: "update".into(),
            group: String::new(),
            version: "v1".into(),
            resource: "configmaps".into(),
            subresource: String::new(),
            namespace: "default".into(),
            name: "big".into(),
            content_type: "application/json".into(),
            accept: String::new(),
            body: Some(Bytes::from(vec![b'x'; body])),
            query: Vec::new(),
            user_agent: String::new(),
        }
    }

    #[test]
    fn the_action_log_keeps_the_newest_requests_within_its_budget() {
        let one = put(10_000).approximate_bytes();
        let mut hooks = Hooks::new(3 * one + one / 2);
        for _ in 0..10 {
            hooks.record(put(10_000));
            assert!(hooks.log.bytes() <= 3 * one + one / 2);
        }
        assert_eq!(hooks.log.actions().len(), 3);
        assert_eq!(hooks.log.dropped(), 7);
        assert_eq!(hooks.counts[&("update".to_owned(), "configmaps".to_owned())], 10);

        // A request larger than the whole budget is counted, not kept.
        hooks.record(put(100_000));
        assert_eq!(hooks.log.actions().len(), 3);
        assert_eq!(hooks.log.dropped(), 8);

        hooks.log.clear();
        assert_eq!((hooks.log.bytes(), hooks.log.dropped()), (0, 0));
    }

    #[test]
    fn a_log_without_a_budget_records_nothing_but_counts_and_reacts() {
        let mut hooks = Hooks::new(0);
        hooks.reactors.push(Reactor::on("update", "configmaps"));
        assert!(hooks.record(put(10)).is_some(), "the reactor still fires");
        assert!(hooks.log.actions().is_empty());
        assert_eq!(hooks.log.bytes(), 0);
        assert_eq!(hooks.counts.values().sum::<u64>(), 1);
    }
}
