//! Testing hooks: the action log, reactors that fail requests, request counters.

use std::collections::BTreeMap;

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
    /// The body or patch bytes exactly as received; `None` when the request had none.
    pub body: Option<Bytes>,
    /// The decoded query string (e.g. `fieldManager`, `labelSelector`).
    pub query: Vec<(String, String)>,
    /// The request's `User-Agent`, as audit logs record it: tells apart the
    /// clients (say, controller replicas) sharing one server.
    pub user_agent: String,
}

impl Action {
    /// The body parsed as JSON, for assertions.
    pub fn body_json(&self) -> Option<serde_json::Value> {
        self.body.as_ref().and_then(|b| serde_json::from_slice(b).ok())
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

#[derive(Debug, Default)]
pub(crate) struct Hooks {
    pub(crate) actions: Vec<Action>,
    pub(crate) reactors: Vec<Reactor>,
    pub(crate) counts: BTreeMap<(String, String), u64>,
}

impl Hooks {
    /// Logs and counts a request, then asks the reactors, in the order they were added.
    pub(crate) fn record(&mut self, a: Action) -> Option<ErrorStatus> {
        *self
            .counts
            .entry((a.verb.clone(), a.resource.clone()))
            .or_default() += 1;
        let verdict = self.reactors.iter_mut().find_map(|r| r.fire(&a));
        self.actions.push(a);
        verdict
    }
}
