//! Watches: initial events, ordered events from the history, bookmarks, timeouts, and
//! errors delivered in-stream as the watch cache delivers them.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::conversion::{Conversions, Scope};
use crate::errors::{ErrorStatus, FieldError};
use crate::registry::Registry;
use crate::registry::options::Selection;
use crate::registry::resource::ResourceDef;
use crate::store::{EventType, StoredEvent};
use crate::test_env::Inner;

use super::conversion;
use super::reply::{Output, Reply};
use super::request::QueryView;
use super::request_options::{parse_rv, too_large};
use super::watch_buffer::{self, Sender, TrySendError};

/// Events one watch may have waiting for its client. kube-apiserver gives a watcher a
/// bounded channel (10 events, 1000 for watchers its triggers cannot filter) with socket
/// buffers behind it; here the channel is the only slack, so it takes the larger size.
/// The bytes they may take are bounded too (`Builder::watch_buffer_bytes`).
const WATCH_BUFFER: usize = 1000;

/// How long a live event may wait for room in a full buffer before the watch is closed
/// for unresponsiveness: the most kube-apiserver's cacher lets one dispatch block
/// (`maxBudget` of its time budget). Its client re-watches or relists, as it would
/// after kube-apiserver's `Forcing watcher close due to unresponsiveness`.
const BLOCKED_SEND_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

/// Per-watch settings from the query.
#[derive(Debug)]
struct Spec {
    def: Arc<ResourceDef>,
    sel: Selection,
    output: Output,
    bookmarks: bool,
}

/// One watch event as kube-apiserver writes it: `type` before `object` (its
/// Go struct's order; a JSON map would sort `object` first), which lets a
/// client decode the object straight from the text while it reads the line.
fn line(kind: &str, object: &Value) -> Bytes {
    let kind = Value::String(kind.to_owned());
    Bytes::from(format!("{{\"type\":{kind},\"object\":{object}}}\n"))
}

fn error_line(e: &ErrorStatus) -> Bytes {
    line("ERROR", &e.to_json())
}

/// What a watch sends before its live events. The objects are encoded one
/// at a time as the client takes them: encoded up front, the whole
/// selection's text would sit outside the buffer's bound.
#[derive(Default)]
struct Initial {
    /// The selected objects, sent as ADDED events.
    objects: Vec<Arc<Value>>,
    /// The bookmark that ends them (`sendInitialEvents=true`).
    end: Option<Bytes>,
}

impl Spec {
    /// The selected objects as they are now.
    fn initial_objects(&self, registry: &Registry, current: u64) -> Result<Vec<Arc<Value>>, ErrorStatus> {
        let snapshot = registry
            .store
            .snapshot(&self.def.key(), current)
            .map_err(|_| ErrorStatus::internal("snapshot unavailable"))?;
        Ok(snapshot
            .into_iter()
            .filter(|(_, obj)| self.sel.matches(&self.def, obj))
            .map(|(_, obj)| obj)
            .collect())
    }

    fn render(&self, obj: &Value) -> Value {
        self.output.object(&self.def, obj)
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let (kind, av) = match self.output {
            Output::Meta => ("PartialObjectMetadata".to_owned(), "meta.k8s.io/v1".to_owned()),
            _ => (self.def.kind.clone(), self.def.api_version()),
        };
        line(
            "BOOKMARK",
            &json!({"kind": kind, "apiVersion": av, "metadata": meta}),
        )
    }

    /// The event this watcher sees for a write, if any: objects moving in or out of the
    /// selection appear as ADDED or DELETED, as the watch cache reports them.
    fn event(&self, ev: &StoredEvent) -> Option<Bytes> {
        if ev.res != self.def.key() {
            return None;
        }
        let now = self.sel.matches(&self.def, &ev.object);
        let before = ev.prev.as_ref().is_some_and(|p| self.sel.matches(&self.def, p));
        let kind = match ev.kind {
            EventType::Added if now => EventType::Added,
            EventType::Modified if now && before => EventType::Modified,
            EventType::Modified if now => EventType::Added,
            EventType::Modified if before => EventType::Deleted,
            EventType::Deleted if now => EventType::Deleted,
            _ => return None,
        };
        Some(line(kind.as_str(), &self.render(&ev.object)))
    }
}

/// kube-apiserver ends a watch whose object it cannot encode, and logs why.
fn unencodable(spec: &Spec, why: &str) {
    eprintln!("testenv: unable to encode watch object {}: {why}", spec.def.kind);
}

fn one_shot(inner: &Inner, lines: Vec<Bytes>) -> Reply {
    let (tx, rx) = watch_buffer::channel(lines.len(), usize::MAX, Arc::clone(&inner.watch_buffers));
    for l in lines {
        // The buffer has room for every line.
        let _ = tx.try_send(l);
    }
    Reply::Stream(rx)
}

/// Validates the watch options and starts streaming.
pub(crate) fn start(
    inner: &Arc<Inner>,
    def: &Arc<ResourceDef>,
    sel: Selection,
    q: &QueryView<'_>,
    output: Output,
) -> Result<Reply, ErrorStatus> {
    let (bookmarks, send_initial) = check_watch_options(q)?;
    let timeout = match q.get("timeoutSeconds").filter(|s| !s.is_empty()) {
        Some(t) => {
            let secs = t
                .parse::<u64>()
                .map_err(|_| ErrorStatus::bad_request(format!("timeoutSeconds: Invalid value: \"{t}\"")))?;
            std::time::Duration::from_secs(secs)
        }
        None => inner.config.default_watch_timeout,
    };
    let spec = Spec {
        def: Arc::clone(def),
        sel,
        output,
        bookmarks,
    };
    let rv_param = q.get("resourceVersion").filter(|s| !s.is_empty());
    let registry = inner.registry();
    if inner.take_forced_expiry() {
        let from = rv_param.unwrap_or("0");
        let e = ErrorStatus::expired(format!(
            "too old resource version: {from} ({})",
            registry.store.rv() + 1
        ));
        return Ok(one_shot(inner, vec![error_line(&e)]));
    }
    let (cursor, initial) = match begin(&spec, &registry, rv_param, send_initial)? {
        Begin::From { cursor, initial } => (cursor, initial),
        Begin::Expired(e) => return Ok(one_shot(inner, vec![error_line(&e)])),
    };
    let mut changes = registry.store.subscribe();
    // Writes between `cursor` and now are already in the history; look at them first.
    changes.mark_changed();
    drop(registry);
    let (tx, rx) = watch_buffer::channel(
        WATCH_BUFFER,
        inner.config.watch_buffer_bytes,
        Arc::clone(&inner.watch_buffers),
    );
    let closed = inner.close_watches.subscribe();
    let conversions = def.webhook_conversion.then(Conversions::scope);
    let pumped = pump(
        Arc::clone(inner),
        spec,
        conversions.clone(),
        cursor,
        initial,
        tx,
        changes,
        closed,
        timeout,
    );
    match conversions {
        Some(scope) => tokio::spawn(async move { Conversions::run(&scope, pumped).await }),
        None => tokio::spawn(pumped),
    };
    Ok(Reply::Stream(rx))
}

/// kube-apiserver's `ValidateListOptions` for a watch: every cause at once,
/// in its order (the WatchList feature on, as it is by default since 1.34);
/// `allowWatchBookmarks` and `sendInitialEvents` when they pass. Streaming
/// without bookmarks is allowed: the initial events then end with no bookmark.
fn check_watch_options(q: &QueryView<'_>) -> Result<(bool, Option<bool>), ErrorStatus> {
    let bookmarks = q.flag("allowWatchBookmarks") == Some(true);
    let send_initial = q.flag("sendInitialEvents");
    let rvm = q.get("resourceVersionMatch").filter(|s| !s.is_empty());
    let mut errs = Vec::new();
    if send_initial.is_some() && rvm != Some("NotOlderThan") {
        errs.push(FieldError::forbidden(
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if let Some(m) = rvm {
        if send_initial.is_none() {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if m != "NotOlderThan" {
            errs.push(FieldError::not_supported(
                "resourceVersionMatch",
                json!(m),
                &["NotOlderThan".into()],
            ));
        }
        if q.get("continue").is_some_and(|c| !c.is_empty()) {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
    }
    if errs.is_empty() {
        Ok((bookmarks, send_initial))
    } else {
        Err(ErrorStatus::invalid("meta.k8s.io", "ListOptions", "", errs))
    }
}

/// How a watch begins.
enum Begin {
    /// Streaming the events after `cursor`, once `initial` is sent.
    From { cursor: u64, initial: Initial },
    /// With an in-stream `410 Gone`, which ends it.
    Expired(ErrorStatus),
}

/// Where a watch starts from its `resourceVersion` and `sendInitialEvents`: the
/// current state as ADDED events first, or the history from a revision.
fn begin(
    spec: &Spec,
    registry: &Registry,
    rv_param: Option<&str>,
    send_initial: Option<bool>,
) -> Result<Begin, ErrorStatus> {
    let current = registry.store.rv();
    let from_rv = match rv_param {
        // "Start at most recent" / "start at any": the current state as ADDED events,
        // unless the client opted out with sendInitialEvents=false.
        None | Some("0") => None,
        Some(r) => {
            let rv = parse_rv(r)?;
            if rv > current {
                return Err(too_large(rv, current));
            }
            Some(rv)
        }
    };
    if let Some(rv) = from_rv
        && send_initial != Some(true)
    {
        if let Err(old) = registry.store.watch_window_check(&spec.def.key(), rv) {
            return Ok(Begin::Expired(ErrorStatus::expired(format!(
                "too old resource version: {rv} ({})",
                old.oldest_listed
            ))));
        }
        return Ok(Begin::From {
            cursor: rv,
            initial: Initial::default(),
        });
    }
    let mut initial = Initial::default();
    if send_initial != Some(false) {
        initial.objects = spec.initial_objects(registry, current)?;
    }
    // The end of the initial events is told by a bookmark, to a client that
    // takes bookmarks.
    if send_initial == Some(true) && spec.bookmarks {
        initial.end = Some(spec.bookmark(current, true));
    }
    Ok(Begin::From {
        cursor: current,
        initial,
    })
}

/// Sends one live event: at once if the buffer has room, else within
/// `BLOCKED_SEND_GRACE`; `false` means stop (the watch ends, or its client is not reading
/// and the watch is closed, dropping what it had not taken).
async fn deliver_live(
    tx: &Sender,
    line: Bytes,
    closed: &mut tokio::sync::watch::Receiver<u64>,
    deadline: std::pin::Pin<&mut tokio::time::Sleep>,
) -> bool {
    let line = match tx.try_send(line) {
        Ok(()) => return true,
        Err(TrySendError::Closed) => return false,
        Err(TrySendError::Full(line)) => line,
    };
    tokio::select! {
        biased;
        _ = closed.changed() => false,
        () = deadline => false,
        sent = tx.send(line) => sent.is_ok(),
        () = tokio::time::sleep(BLOCKED_SEND_GRACE) => {
            tx.abandon();
            false
        }
    }
}

/// Sends one initial event, waiting for room as long as it takes, as the cacher does,
/// unless live events pile up meanwhile: once a buffer's worth of them (in events or
/// bytes) waits and the client has not made room for `BLOCKED_SEND_GRACE`, the watch is
/// closed, as the cacher closes a watcher whose input channel stays full.
async fn deliver_initial(
    inner: &Inner,
    spec: &Spec,
    cursor: u64,
    tx: &Sender,
    line: Bytes,
    closed: &mut tokio::sync::watch::Receiver<u64>,
    mut deadline: std::pin::Pin<&mut tokio::time::Sleep>,
) -> bool {
    let mut send = std::pin::pin!(tx.send(line));
    loop {
        tokio::select! {
            biased;
            _ = closed.changed() => return false,
            () = &mut deadline => return false,
            sent = &mut send => return sent.is_ok(),
            () = tokio::time::sleep(BLOCKED_SEND_GRACE) => {
                let (events, bytes) = inner
                    .registry()
                    .store
                    .watch_events_after(&spec.def.key(), cursor)
                    .map_or((usize::MAX, usize::MAX), |evs| {
                        (evs.len(), evs.iter().map(|e| e.bytes).sum())
                    });
                if events >= WATCH_BUFFER || bytes >= inner.config.watch_buffer_bytes {
                    tx.abandon();
                    return false;
                }
            }
        }
    }
}

/// Renders a batch of events. For a resource converted by its webhook,
/// the webhook is first asked, in one review, for every object the batch
/// shows; a failed conversion is kube-apiserver's message.
async fn rendered<T>(
    inner: &Inner,
    conversions: Option<&Scope>,
    render: impl Fn() -> T,
) -> Result<T, String> {
    let Some(scope) = conversions else {
        return Ok(render());
    };
    let lock = || scope.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    lock().forget();
    // A batch whose objects need no conversion is rendered once.
    let out = conversion::settled(&inner.routes(), render).await;
    match lock().failure() {
        Some(message) => Err(message.to_owned()),
        None => Ok(out),
    }
}

/// How many objects a watch converts in one review.
const CONVERTED_TOGETHER: usize = 500;

/// Without conversions each object is encoded as the client takes it.
fn batch_size(conversions: Option<&Scope>) -> usize {
    if conversions.is_some() {
        CONVERTED_TOGETHER
    } else {
        1
    }
}

/// Sends the initial events and the bookmark that ends them; `false` means
/// the watch ended.
#[allow(clippy::too_many_arguments)]
async fn send_initial(
    inner: &Inner,
    spec: &Spec,
    conversions: Option<&Scope>,
    cursor: u64,
    initial: Initial,
    tx: &Sender,
    closed: &mut tokio::sync::watch::Receiver<u64>,
    mut deadline: std::pin::Pin<&mut tokio::time::Sleep>,
) -> bool {
    for objects in initial.objects.chunks(batch_size(conversions)) {
        let lines = rendered(inner, conversions, || {
            objects
                .iter()
                .map(|obj| line("ADDED", &spec.render(obj)))
                .collect::<Vec<_>>()
        })
        .await;
        let Ok(lines) = lines.map_err(|e| unencodable(spec, &e)) else {
            return false;
        };
        for l in lines {
            if !deliver_initial(inner, spec, cursor, tx, l, closed, deadline.as_mut()).await {
                return false;
            }
        }
    }
    match initial.end {
        Some(end) => deliver_initial(inner, spec, cursor, tx, end, closed, deadline.as_mut()).await,
        None => true,
    }
}

/// Where a watch's live events go.
struct Live<'a> {
    inner: &'a Inner,
    spec: &'a Spec,
    conversions: Option<&'a Scope>,
    tx: &'a Sender,
}

impl Live<'_> {
    /// Sends the events this watcher sees, moving `cursor` past each;
    /// `false` means the watch ended.
    async fn send(
        &self,
        evs: &[Arc<StoredEvent>],
        cursor: &mut u64,
        closed: &mut tokio::sync::watch::Receiver<u64>,
        mut deadline: std::pin::Pin<&mut tokio::time::Sleep>,
    ) -> bool {
        for evs in evs.chunks(batch_size(self.conversions)) {
            let lines = rendered(self.inner, self.conversions, || {
                evs.iter().map(|ev| self.spec.event(ev)).collect::<Vec<_>>()
            })
            .await;
            let Ok(lines) = lines.map_err(|e| unencodable(self.spec, &e)) else {
                return false;
            };
            for (ev, l) in evs.iter().zip(lines) {
                *cursor = ev.rv;
                if let Some(l) = l
                    && !deliver_live(self.tx, l, closed, deadline.as_mut()).await
                {
                    return false;
                }
            }
        }
        true
    }
}

#[allow(clippy::too_many_arguments)]
async fn pump(
    inner: Arc<Inner>,
    spec: Spec,
    conversions: Option<Scope>,
    mut cursor: u64,
    initial: Initial,
    tx: Sender,
    mut changes: tokio::sync::watch::Receiver<u64>,
    mut closed: tokio::sync::watch::Receiver<u64>,
    timeout: std::time::Duration,
) {
    // timeoutSeconds counts from the request, initial events included.
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    if !send_initial(
        &inner,
        &spec,
        conversions.as_ref(),
        cursor,
        initial,
        &tx,
        &mut closed,
        deadline.as_mut(),
    )
    .await
    {
        return;
    }
    let period = inner.config.bookmark_interval;
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = closed.changed() => return,
            () = &mut deadline => return,
            () = tx.closed() => return,
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
                let (events, head, served) = {
                    let st = inner.registry();
                    let key = spec.def.key();
                    (
                        st.store.watch_events_after(&key, cursor),
                        st.store.rv(),
                        st.resources.iter().any(|d| d.key() == key),
                    )
                };
                match events {
                    Ok(evs) => {
                        let live = Live { inner: &inner, spec: &spec, conversions: conversions.as_ref(), tx: &tx };
                        if !live.send(&evs, &mut cursor, &mut closed, deadline.as_mut()).await {
                            return;
                        }
                        // Writes to other resources move bookmarks on too.
                        cursor = cursor.max(head);
                        if !served {
                            // The resource's CRD is gone: kube-apiserver tears its storage
                            // down, which ends every watch on it.
                            return;
                        }
                    }
                    Err(old) => {
                        // This watcher fell behind its resource's window.
                        let e = ErrorStatus::expired(format!(
                            "too old resource version: {cursor} ({})",
                            old.oldest_listed
                        ));
                        deliver_live(&tx, error_line(&e), &mut closed, deadline.as_mut()).await;
                        return;
                    }
                }
            }
            _ = ticks.tick(), if spec.bookmarks => {
                // As the cacher does, a bookmark only goes into a buffer with room.
                if let Err(TrySendError::Closed) = tx.try_send(spec.bookmark(cursor, false)) {
                    return;
                }
            }
        }
    }
}
