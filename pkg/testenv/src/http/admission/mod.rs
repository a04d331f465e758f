//! Admission webhooks, called as kube-apiserver calls them.
//!
//! A create, update, patch or delete that a stored `MutatingWebhookConfiguration` or
//! `ValidatingWebhookConfiguration` matches (rules, `namespaceSelector`,
//! `objectSelector`) goes through the webhooks before it is stored: the mutating ones
//! first (configurations by name, then in their order; `reinvocationPolicy: IfNeeded`
//! calls a webhook once more when a later one changed the object), each JSON patch
//! applied; then the object is validated as any write is; then the validating webhooks
//! see it. Calls are `AdmissionReview`s (`admission.k8s.io/v1`, or `v1beta1` when that is
//! the first version a webhook lists) over HTTPS, trusting only the `caBundle`, with the
//! webhook's `timeoutSeconds`. A denial, a failed call under `failurePolicy: Fail`, and
//! a dry run sent to a webhook with side effects answer with the `Status` bodies
//! kube-apiserver sends.
//!
//! The store's lock cannot be held across calls, so a write is first run as a dry run
//! (unchecked, since webhooks may fix what validation would refuse) to build what the
//! webhooks see, and stored afterwards only if the object is still at the revision the
//! webhooks saw; otherwise the whole admission runs again, as kube-apiserver's
//! `GuaranteedUpdate` does, unless the client named the revision it expects.
//!
//! kube-apiserver reaches a Service's endpoints through the cluster network, which
//! testenv has not: [`crate::TestEnv::route_service`] says where a Service's port
//! listens on this machine. A `clientConfig.url` is called as given.

mod client;
mod webhooks;

use serde_json::{Value, json};

use crate::errors::ErrorStatus;
use crate::patches::{self, PatchError, PatchType};
use crate::registry::Registry;
use crate::registry::managed_fields::parse_body;
use crate::registry::options::{DeleteOpts, WriteOpts, Written};
use crate::registry::resource::ResourceDef;
use crate::registry::verbs::unsupported_patch_type;
use crate::store::{ObjKey, ResKey};
use crate::test_env::TestEnv;

use super::body::{custom_kind_present, json_body};
use super::conversion;
use super::reply::{Output, Reply, written};
use super::request::{QueryView, Request};
use super::request_options::{delete_opts, write_opts};
use super::route::Target;
use super::webhook_client::{self, CallError};
use client::{check_response, patch_bytes};
use webhooks::{Attributes, Operation, Webhook, labels, webhooks};

/// Conflicts on a write without a client-given revision are retried this often, as
/// kube-apiserver retries patches.
const MAX_ATTEMPTS: usize = 5;

/// The write a request asks for, replayable under the lock.
enum Write<'a> {
    Create(Value),
    Update(Value),
    Patch(PatchType, &'a [u8]),
    Delete(DeleteOpts),
}

/// Runs a write that admission webhooks match through them; `None` when none matches,
/// so the caller stores it directly.
pub(crate) async fn write(
    env: &TestEnv,
    verb: &str,
    t: &Target,
    req: &Request,
    q: &QueryView<'_>,
) -> Option<Result<Reply, ErrorStatus>> {
    if t.def.group == "admissionregistration.k8s.io" {
        // kube-apiserver never sends webhook configurations to webhooks, so a broken
        // webhook cannot lock its own configuration.
        return None;
    }
    // Without configurations a write goes the plain way, its body parsed once.
    let configured = {
        let st = env.inner.registry();
        ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]
            .iter()
            .any(|r| {
                st.store
                    .iter(&ResKey::new("admissionregistration.k8s.io", r))
                    .next()
                    .is_some()
            })
    };
    if !configured {
        return None;
    }
    let def = &t.def;
    let built = (|| -> Result<(Write<'_>, WriteOpts), ErrorStatus> {
        let opts = write_opts(q, req)?;
        let w = match verb {
            "create" => {
                let body = json_body(req, def)?;
                custom_kind_present(req, q, def, &body)?;
                Write::Create(body)
            }
            "update" => {
                let body = json_body(req, def)?;
                custom_kind_present(req, q, def, &body)?;
                Write::Update(body)
            }
            "patch" => match PatchType::from_content_type(&req.content_type) {
                Some(p) => Write::Patch(p, &req.body),
                None => return Err(unsupported_patch_type(def)),
            },
            _ => Write::Delete(delete_opts(req, q)?),
        };
        Ok((w, opts))
    })();
    let (write, opts) = match built {
        Ok(b) => b,
        Err(e) => return Some(Err(e)),
    };
    let admission = Admission {
        env,
        t,
        write: &write,
        opts: &opts,
        routes: env.routes(),
        user: &req.user,
    };
    admission.run(req).await
}

struct Admission<'a> {
    env: &'a TestEnv,
    t: &'a Target,
    write: &'a Write<'a>,
    opts: &'a WriteOpts,
    routes: Vec<crate::test_env::ServiceRoute>,
    user: &'a crate::registry::rbac::User,
}

/// What the webhooks were shown, and the revision it was built from.
struct Prepared {
    hooks: Vec<Webhook>,
    operation: Operation,
    old: Option<Value>,
    candidate: Option<Value>,
    revision: Option<String>,
    dry_warnings: Vec<String>,
}

impl Admission<'_> {
    fn ns(&self) -> &str {
        self.t.namespace.as_deref().unwrap_or_default()
    }

    fn name(&self) -> &str {
        self.t.name.as_deref().unwrap_or_default()
    }

    fn subresource(&self) -> &str {
        self.t.subresource.as_deref().unwrap_or_default()
    }

    async fn run(&self, req: &Request) -> Option<Result<Reply, ErrorStatus>> {
        let output = Output::from_accept(&req.accept);
        let client_revision = self.client_revision();
        for attempt in 0..MAX_ATTEMPTS {
            // Each step that converts runs until the conversion webhook has
            // answered it, so that the admission webhooks run once.
            let prepared = match conversion::settled(&self.routes, || self.prepare()).await {
                Ok(Some(p)) => p,
                // Nothing matches: the plain path stores it.
                Ok(None) if attempt == 0 => return None,
                Ok(None) => return Some(self.commit_plain(output)),
                Err(e) => return Some(Err(e)),
            };
            let uid = crate::names::random_uuid().to_string();
            let mut warnings = prepared.dry_warnings.clone();
            let mut candidate = prepared.candidate.clone();
            if prepared.operation != Operation::Delete {
                match self
                    .mutate(&prepared, &uid, candidate.take(), &mut warnings)
                    .await
                {
                    Ok(c) => candidate = c,
                    Err(e) => return Some(Err(e)),
                }
            }
            let mutated = candidate != prepared.candidate;
            // The object as it would be stored, validated: what validating webhooks see.
            // A create is checked under the name the webhooks saw, even a generated one.
            let replayed = mutated || prepared.operation == Operation::Create;
            let checked = match (&candidate, replayed) {
                (Some(c), true) => {
                    match conversion::settled(&self.routes, || self.replay(c, &prepared, true)).await {
                        Ok(w) => Some(w.object),
                        Err(e) => return Some(Err(e)),
                    }
                }
                (Some(_), false) => match conversion::settled(&self.routes, || self.dry_run()).await {
                    Ok(w) => Some(w.object),
                    Err(e) => return Some(Err(e)),
                },
                (None, _) => None,
            };
            if let Err(e) = self
                .validate(&prepared, &uid, checked.clone(), &mut warnings)
                .await
            {
                return Some(Err(e));
            }
            let committed = conversion::settled(&self.routes, || {
                self.commit(&prepared, candidate.as_ref().filter(|_| mutated), output)
            })
            .await;
            match committed {
                Commit::Done(mut reply) => {
                    if let Reply::Json { warnings: w, .. } = &mut reply {
                        w.extend(warnings);
                    }
                    return Some(Ok(reply));
                }
                Commit::Failed(e) => return Some(Err(e)),
                // Someone wrote in between: a client that named a revision gets the
                // conflict, anyone else another round.
                Commit::Moved if client_revision => {
                    return Some(Err(ErrorStatus::stale(
                        &self.t.def.group,
                        &self.t.def.plural,
                        self.name(),
                    )));
                }
                Commit::Moved => {}
            }
        }
        Some(Err(ErrorStatus::conflict_on(
            &self.t.def.group,
            &self.t.def.plural,
            self.name(),
            "the object has been modified; please apply your changes to the latest version and try again",
        )))
    }

    /// Whether the request itself carries the revision it expects.
    fn client_revision(&self) -> bool {
        let rv_in = |v: &Value| {
            v.pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
        };
        match self.write {
            Write::Update(body) => rv_in(body),
            Write::Patch(PatchType::Apply | PatchType::Merge | PatchType::Strategic, body) => {
                parse_body(body).is_ok_and(|v| rv_in(&v))
            }
            Write::Patch(PatchType::Json, _) | Write::Create(_) | Write::Delete(_) => false,
        }
    }

    /// Under the lock: the matching webhooks, the old object, and the unchecked result
    /// of the write.
    fn prepare(&self) -> Result<Option<Prepared>, ErrorStatus> {
        let def = &self.t.def;
        let mut st = self.env.inner.registry();
        let hooks = webhooks(&st);
        if hooks.is_empty() {
            return Ok(None);
        }
        let key = ObjKey::new(self.ns(), self.name());
        let stored = (!self.name().is_empty())
            .then(|| st.store.get(&def.key(), &key).cloned())
            .flatten();
        let old = stored.as_ref().map(|o| Registry::present(def, o));
        let revision = old
            .as_ref()
            .and_then(|o| o.pointer("/metadata/resourceVersion").and_then(Value::as_str))
            .map(str::to_owned);
        let (operation, candidate, dry_warnings) = match self.write {
            Write::Delete(_) => {
                if old.is_none() {
                    // A delete of nothing is answered by the plain path.
                    return Ok(None);
                }
                (Operation::Delete, None, Vec::new())
            }
            _ => {
                let unchecked = WriteOpts {
                    dry_run: true,
                    skip_validation: true,
                    ..self.opts.clone()
                };
                let w = run(&mut st, self.t, self.write, &unchecked)?;
                let op = if w.created {
                    Operation::Create
                } else {
                    Operation::Update
                };
                (op, Some(w.object), w.warnings)
            }
        };
        let ns_labels = if def.namespaced {
            st.store
                .get(&ResKey::new("", "namespaces"), &ObjKey::new("", self.ns()))
                .map(|n| labels(n))
                .unwrap_or_default()
        } else {
            candidate
                .as_ref()
                .or(old.as_ref())
                .map(labels)
                .unwrap_or_default()
        };
        drop(st);
        let attrs = Attributes {
            def,
            subresource: self.subresource(),
            operation,
            object: candidate.clone(),
            old_object: old.clone(),
        };
        let hooks: Vec<Webhook> = hooks
            .into_iter()
            .filter(|h| h.matches(&attrs, &ns_labels))
            .collect();
        if hooks.is_empty() {
            return Ok(None);
        }
        Ok(Some(Prepared {
            hooks,
            operation,
            old: if operation == Operation::Create { None } else { old },
            candidate,
            revision,
            dry_warnings,
        }))
    }

    fn dry_run(&self) -> Result<Written, ErrorStatus> {
        let opts = WriteOpts {
            dry_run: true,
            ..self.opts.clone()
        };
        run(&mut self.env.inner.registry(), self.t, self.write, &opts)
    }

    /// The mutating webhooks, in order, then once more those that asked to be called
    /// again when a later one changed the object.
    async fn mutate(
        &self,
        p: &Prepared,
        uid: &str,
        mut object: Option<Value>,
        warnings: &mut Vec<String>,
    ) -> Result<Option<Value>, ErrorStatus> {
        let mutating: Vec<&Webhook> = p.hooks.iter().filter(|h| h.mutating).collect();
        let mut changed_after = vec![false; mutating.len()];
        for (i, hook) in mutating.iter().enumerate() {
            let before = object.clone();
            object = self.call(hook, p, uid, object, warnings).await?;
            if object != before {
                for c in changed_after.iter_mut().take(i) {
                    *c = true;
                }
            }
        }
        for (i, hook) in mutating.iter().enumerate() {
            if hook.reinvoke && changed_after[i] {
                object = self.call(hook, p, uid, object, warnings).await?;
            }
        }
        Ok(object)
    }

    async fn validate(
        &self,
        p: &Prepared,
        uid: &str,
        object: Option<Value>,
        warnings: &mut Vec<String>,
    ) -> Result<(), ErrorStatus> {
        for hook in p.hooks.iter().filter(|h| !h.mutating) {
            self.call(hook, p, uid, object.clone(), warnings).await?;
        }
        Ok(())
    }

    /// Calls one webhook; the object it answers with (patched, for a mutating one).
    async fn call(
        &self,
        hook: &Webhook,
        p: &Prepared,
        uid: &str,
        object: Option<Value>,
        warnings: &mut Vec<String>,
    ) -> Result<Option<Value>, ErrorStatus> {
        if self.opts.dry_run && !hook.dry_run_safe {
            return Err(ErrorStatus::bad_request(format!(
                "admission webhook \"{}\" does not support dry run",
                hook.name
            )));
        }
        let name = object
            .as_ref()
            .or(p.old.as_ref())
            .and_then(|o| o.pointer("/metadata/name").and_then(Value::as_str))
            .unwrap_or(self.name())
            .to_owned();
        let review = self.review(hook, p, uid, object.as_ref(), &name);
        let answered = webhook_client::call(&hook.client, hook.timeout, &self.routes, &review)
            .await
            .map_err(|e| match e {
                CallError::Unreached(why) => format!("failed to call webhook: {why}"),
                CallError::Answered(why) => format!("received invalid webhook response: {why}"),
            })
            .and_then(|r| check_response(&r, uid));
        let response = match answered {
            Ok(r) => r,
            Err(_) if hook.ignore_failures => return Ok(object),
            Err(e) => return Err(call_failed(hook, &e)),
        };
        if let Some(ws) = response.get("warnings").and_then(Value::as_array) {
            warnings.extend(ws.iter().filter_map(Value::as_str).map(str::to_owned));
        }
        if response.get("allowed").and_then(Value::as_bool) != Some(true) {
            return Err(denial(&self.t.def, &name, &hook.name, response.get("status")));
        }
        let Some(patch) = response.get("patch").filter(|p| !p.is_null()) else {
            return Ok(object);
        };
        if !hook.mutating {
            return Ok(object);
        }
        match apply_response_patch(&response, patch, object.as_ref()) {
            Ok(p) => Ok(Some(p)),
            Err(_) if hook.ignore_failures => Ok(object),
            Err(e) => Err(call_failed(hook, &e)),
        }
    }

    /// The `AdmissionReview` a webhook is sent about `object` (the write's result; the
    /// stored object is `p.old`).
    fn review(&self, hook: &Webhook, p: &Prepared, uid: &str, object: Option<&Value>, name: &str) -> Value {
        let def = &self.t.def;
        let review_object = object.cloned().map(|mut o| {
            if p.operation == Operation::Create && hook.mutating {
                // Mutating webhooks see a new object before the registry fills in
                // what the server owns.
                if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                    for k in ["uid", "creationTimestamp", "generation", "resourceVersion"] {
                        m.remove(k);
                    }
                }
            }
            o
        });
        let gvk = json!({"group": def.group, "version": def.version, "kind": def.kind});
        let gvr = json!({"group": def.group, "version": def.version, "resource": def.plural});
        let mut request = json!({
            "uid": uid,
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": name,
            "operation": p.operation.as_str(),
            "userInfo": {"username": self.user.name, "groups": self.user.groups},
            "object": review_object,
            "oldObject": p.old,
            "dryRun": self.opts.dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": p.operation.options_kind()},
        });
        if !self.subresource().is_empty() {
            request["subResource"] = json!(self.subresource());
            request["requestSubResource"] = json!(self.subresource());
        }
        if def.namespaced {
            request["namespace"] = json!(self.ns());
        }
        if let (Some(manager), false) = (&self.opts.field_manager, p.operation == Operation::Delete) {
            request["options"]["fieldManager"] = json!(manager);
        }
        json!({
            "apiVersion": format!("admission.k8s.io/{}", hook.review_version),
            "kind": "AdmissionReview",
            "request": request,
        })
    }

    /// Runs the write as it would be stored with the webhooks' changes.
    fn replay(&self, candidate: &Value, p: &Prepared, dry_run: bool) -> Result<Written, ErrorStatus> {
        let mut st = self.env.inner.registry();
        self.replay_locked(&mut st, candidate, p, dry_run)
    }

    fn replay_locked(
        &self,
        st: &mut Registry,
        candidate: &Value,
        p: &Prepared,
        dry_run: bool,
    ) -> Result<Written, ErrorStatus> {
        let def = &self.t.def;
        let mut body = candidate.clone();
        let applied = matches!(self.write, Write::Patch(PatchType::Apply, _));
        let opts = WriteOpts {
            dry_run,
            skip_validation: false,
            managed_fields: applied
                .then(|| candidate.pointer("/metadata/managedFields").cloned())
                .flatten(),
            ..self.opts.clone()
        };
        let status_only = self.subresource() == "status";
        if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in ["uid", "creationTimestamp", "generation", "managedFields"] {
                m.remove(k);
            }
            match (&p.revision, p.operation) {
                (Some(rv), Operation::Update) => {
                    m.insert("resourceVersion".into(), json!(rv));
                }
                _ => {
                    m.remove("resourceVersion");
                }
            }
        }
        match p.operation {
            Operation::Create => st.create(def, def.namespaced.then_some(self.ns()), body, &opts),
            _ => st.update(def, self.ns(), self.name(), body, status_only, &opts),
        }
    }

    /// Stores the write if the object is still where the webhooks saw it.
    fn commit(&self, p: &Prepared, mutated: Option<&Value>, output: Output) -> Commit {
        let def = &self.t.def;
        let mut st = self.env.inner.registry();
        let key = ObjKey::new(self.ns(), self.name());
        let now = (!self.name().is_empty())
            .then(|| st.store.get(&def.key(), &key))
            .flatten()
            .and_then(|o| o.pointer("/metadata/resourceVersion").and_then(Value::as_str))
            .map(str::to_owned);
        if now != p.revision {
            return Commit::Moved;
        }
        let result = match (self.write, mutated, p.operation) {
            (Write::Delete(opts), _, _) => st.delete(def, self.ns(), self.name(), opts).map(|body| {
                let body = if body.get("kind").and_then(Value::as_str) == Some("Status") {
                    body
                } else {
                    output.object(def, &body)
                };
                Reply::ok(body)
            }),
            // A create is stored under the name the webhooks saw, even a generated one.
            (_, Some(c), _) => self
                .replay_locked(&mut st, c, p, self.opts.dry_run)
                .map(|w| written(w, output, def)),
            (_, None, Operation::Create) => match &p.candidate {
                Some(c) => self.replay_locked(&mut st, c, p, self.opts.dry_run),
                None => run(&mut st, self.t, self.write, self.opts),
            }
            .map(|w| written(w, output, def)),
            (_, None, _) => run(&mut st, self.t, self.write, self.opts).map(|w| written(w, output, def)),
        };
        let result = match result {
            Ok(r) => r,
            Err(e) => return Commit::Failed(e),
        };
        if !self.opts.dry_run {
            st.settle();
        }
        Commit::Done(result)
    }

    /// After a conflict, when no webhook matches any more: the write as it is.
    fn commit_plain(&self, output: Output) -> Result<Reply, ErrorStatus> {
        let def = &self.t.def;
        self.env.inner.write(|st| match self.write {
            Write::Delete(opts) => st.delete(def, self.ns(), self.name(), opts).map(Reply::ok),
            _ => run(st, self.t, self.write, self.opts).map(|w| written(w, output, def)),
        })
    }
}

enum Commit {
    Done(Reply),
    Failed(ErrorStatus),
    Moved,
}

/// The object as a mutating webhook's JSON patch leaves it; the error says why the
/// patch could not be applied.
fn apply_response_patch(response: &Value, patch: &Value, object: Option<&Value>) -> Result<Value, String> {
    let bytes = patch_bytes(patch)?;
    match response.get("patchType").and_then(Value::as_str) {
        Some("JSONPatch") => {}
        other => return Err(format!("unsupported patch type {:?}", other.unwrap_or_default())),
    }
    let current = object.cloned().unwrap_or(Value::Null);
    patches::json_patch(&current, &bytes, false).map_err(|e| match e {
        PatchError::Decode(m) | PatchError::Internal(m) => m,
        PatchError::Apply => "the patch does not apply to the object".to_owned(),
        PatchError::TooManyOperations(n) => {
            format!("the patch has {n} operations, too many")
        }
    })
}

fn run(st: &mut Registry, t: &Target, write: &Write<'_>, opts: &WriteOpts) -> Result<Written, ErrorStatus> {
    let def = &t.def;
    let ns = t.namespace.as_deref().unwrap_or_default();
    let name = t.name.as_deref().unwrap_or_default();
    let status_only = t.subresource.as_deref() == Some("status");
    match write {
        Write::Create(body) => st.create(def, t.namespace.as_deref(), body.clone(), opts),
        Write::Update(body) => st.update(def, ns, name, body.clone(), status_only, opts),
        Write::Patch(ptype, body) => st.patch(def, ns, name, *ptype, body, status_only, opts),
        Write::Delete(_) => Err(ErrorStatus::method_not_allowed()),
    }
}

/// A call that failed under `failurePolicy: Fail`: kube-apiserver's 500.
fn call_failed(hook: &Webhook, why: &str) -> ErrorStatus {
    ErrorStatus::internal(format!("failed calling webhook \"{}\": {why}", hook.name))
}

/// kube-apiserver's `ToStatusErr`: the webhook's status, prefixed with who denied what.
fn denial(def: &ResourceDef, name: &str, webhook: &str, status: Option<&Value>) -> ErrorStatus {
    let field = |k: &str| {
        status
            .and_then(|s| s.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let code = status
        .and_then(|s| s.get("code"))
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c != 0)
        .unwrap_or(403);
    let denied_by = format!("admission webhook \"{webhook}\" denied the request");
    let message = match (field("message"), field("reason")) {
        ("", "") => format!("{denied_by} without explanation"),
        ("", reason) => format!("{denied_by}: {reason}"),
        (message, _) => format!("{denied_by}: {message}"),
    };
    let name = if name.is_empty() { "Unknown" } else { name };
    let resource = if def.group.is_empty() {
        def.plural.clone()
    } else {
        format!("{}.{}", def.plural, def.group)
    };
    let reason = match (field("reason"), code) {
        ("", 500) => "InternalError".to_owned(),
        ("", _) => "Forbidden".to_owned(),
        (r, _) => r.to_owned(),
    };
    if code == 500 {
        let message = format!("Internal error occurred: {message}");
        return ErrorStatus::new(500, reason, message.clone()).with_cause("", &message, "");
    }
    ErrorStatus::new(
        code,
        reason,
        format!("{resource} \"{name}\" is forbidden: {message}"),
    )
    .with_details(&def.group, &def.plural, name)
}
