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

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value, json};

use crate::TestEnv;
use crate::api::{QueryView, Reply, Request, Target};
use crate::errors::ErrorStatus;
use crate::patches::PatchType;
use crate::registry::Registry;
use crate::registry::options::{DeleteOpts, WriteOpts, Written};
use crate::registry::resource::ResourceDef;
use crate::store::{ObjKey, ResKey};

/// kube-apiserver's default `timeoutSeconds`.
const DEFAULT_TIMEOUT_SECONDS: u64 = 10;
/// Conflicts on a write without a client-given revision are retried this often, as
/// kube-apiserver retries patches.
const MAX_ATTEMPTS: usize = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
        }
    }

    fn options_kind(self) -> &'static str {
        match self {
            Self::Create => "CreateOptions",
            Self::Update => "UpdateOptions",
            Self::Delete => "DeleteOptions",
        }
    }
}

/// One webhook of a stored configuration.
#[derive(Clone, Debug)]
struct Webhook {
    name: String,
    mutating: bool,
    rules: Vec<Value>,
    client: Value,
    ignore_failures: bool,
    namespace_selector: Option<Value>,
    object_selector: Option<Value>,
    /// `None` and `NoneOnDryRun` webhooks may be called for dry runs.
    dry_run_safe: bool,
    timeout: Duration,
    review_version: String,
    reinvoke: bool,
}

impl Webhook {
    fn parse(config: &Value, mutating: bool) -> Vec<Self> {
        let hooks = config
            .get("webhooks")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        hooks
            .iter()
            .map(|h| {
                let str_of = |k: &str| h.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
                let timeout = h
                    .get("timeoutSeconds")
                    .and_then(Value::as_u64)
                    .unwrap_or(DEFAULT_TIMEOUT_SECONDS);
                let review_version = h
                    .get("admissionReviewVersions")
                    .and_then(Value::as_array)
                    .and_then(|vs| {
                        vs.iter()
                            .filter_map(Value::as_str)
                            .find(|v| *v == "v1" || *v == "v1beta1")
                            .map(str::to_owned)
                    })
                    .unwrap_or_else(|| "v1".to_owned());
                Self {
                    name: str_of("name"),
                    mutating,
                    rules: h
                        .get("rules")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                    client: h.get("clientConfig").cloned().unwrap_or(Value::Null),
                    ignore_failures: str_of("failurePolicy") == "Ignore",
                    namespace_selector: h.get("namespaceSelector").cloned(),
                    object_selector: h.get("objectSelector").cloned(),
                    dry_run_safe: matches!(str_of("sideEffects").as_str(), "None" | "NoneOnDryRun"),
                    timeout: Duration::from_secs(timeout),
                    review_version,
                    reinvoke: mutating && str_of("reinvocationPolicy") == "IfNeeded",
                }
            })
            .collect()
    }

    fn matches(&self, req: &Attributes<'_>, ns_labels: &Map<String, Value>) -> bool {
        self.rules.iter().any(|r| rule_matches(r, req))
            && self.namespace_selector.as_ref().is_none_or(|sel| {
                !req.namespace_scoped() || crate::selector::label_selector_matches(sel, ns_labels)
            })
            && self.object_selector.as_ref().is_none_or(|sel| {
                [&req.object, &req.old_object]
                    .into_iter()
                    .flatten()
                    .any(|o| crate::selector::label_selector_matches(sel, &labels(o)))
            })
    }
}

/// What a webhook rule is matched against.
struct Attributes<'a> {
    def: &'a ResourceDef,
    subresource: &'a str,
    operation: Operation,
    object: Option<Value>,
    old_object: Option<Value>,
}

impl Attributes<'_> {
    /// Whether the namespace selector applies: to namespaced objects, and to a Namespace
    /// itself (by its own labels).
    fn namespace_scoped(&self) -> bool {
        self.def.namespaced || (self.def.group.is_empty() && self.def.plural == "namespaces")
    }
}

fn labels(obj: &Value) -> Map<String, Value> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn listed(rule: &Value, key: &str, want: &str) -> bool {
    rule.get(key)
        .and_then(Value::as_array)
        .is_some_and(|vs| vs.iter().filter_map(Value::as_str).any(|v| v == "*" || v == want))
}

fn rule_matches(rule: &Value, req: &Attributes<'_>) -> bool {
    let def = req.def;
    // As kube-apiserver splits them: `pods/*` is pods with any subresource or
    // none, `*` every resource without a subresource.
    let resource_matches = rule.get("resources").and_then(Value::as_array).is_some_and(|rs| {
        rs.iter().filter_map(Value::as_str).any(|r| {
            let (res, sub) = r.split_once('/').unwrap_or((r, ""));
            (res == "*" || res == def.plural) && (sub == "*" || sub == req.subresource)
        })
    });
    let scope_matches = match rule.get("scope").and_then(Value::as_str) {
        Some("Cluster") => !def.namespaced,
        Some("Namespaced") => def.namespaced,
        _ => true,
    };
    listed(rule, "operations", req.operation.as_str())
        && listed(rule, "apiGroups", &def.group)
        && listed(rule, "apiVersions", &def.version)
        && resource_matches
        && scope_matches
}

/// Every stored webhook, mutating ones first, each kind by configuration name.
fn webhooks(state: &Registry) -> Vec<Webhook> {
    let mut out = Vec::new();
    for (resource, mutating) in [
        ("mutatingwebhookconfigurations", true),
        ("validatingwebhookconfigurations", false),
    ] {
        let res = ResKey::new("admissionregistration.k8s.io", resource);
        // The store iterates by key, so configurations come by name as kube-apiserver sorts them.
        for (_, config) in state.store.iter(&res) {
            out.extend(Webhook::parse(config, mutating));
        }
    }
    out
}

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
        let opts = crate::api::write_opts(q, req)?;
        let w = match verb {
            "create" => {
                let body = crate::api::json_body(req, def)?;
                crate::api::custom_kind_present(req, q, def, &body)?;
                Write::Create(body)
            }
            "update" => {
                let body = crate::api::json_body(req, def)?;
                crate::api::custom_kind_present(req, q, def, &body)?;
                Write::Update(body)
            }
            "patch" => match PatchType::from_content_type(&req.content_type) {
                Some(p) => Write::Patch(p, &req.body),
                None => return Err(crate::registry::verbs::unsupported_patch_type(def)),
            },
            _ => Write::Delete(crate::api::delete_opts(req, q)?),
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
    routes: Vec<crate::ServiceRoute>,
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
        let output = crate::api::Output::from_accept(&req.accept);
        let client_revision = self.client_revision();
        for attempt in 0..MAX_ATTEMPTS {
            let prepared = match self.prepare() {
                Ok(Some(p)) => p,
                // Nothing matches: the plain path stores it.
                Ok(None) if attempt == 0 => return None,
                Ok(None) => return Some(self.commit_plain(output)),
                Err(e) => return Some(Err(e)),
            };
            let uid = uuid::Uuid::new_v4().to_string();
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
                (Some(c), true) => match self.replay(c, &prepared, true) {
                    Ok(w) => Some(w.object),
                    Err(e) => return Some(Err(e)),
                },
                (Some(_), false) => match self.dry_run() {
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
            match self.commit(&prepared, candidate.as_ref().filter(|_| mutated), output) {
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
                crate::registry::managed_fields::parse_body(body).is_ok_and(|v| rv_in(&v))
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
        let def = &self.t.def;
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
        let review_object = object.clone().map(|mut o| {
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
        let review = json!({
            "apiVersion": format!("admission.k8s.io/{}", hook.review_version),
            "kind": "AdmissionReview",
            "request": request,
        });
        let answered = call_webhook(hook, &self.routes, &review)
            .await
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
            return Err(denial(def, &name, &hook.name, response.get("status")));
        }
        let Some(patch) = response.get("patch").filter(|p| !p.is_null()) else {
            return Ok(object);
        };
        if !hook.mutating {
            return Ok(object);
        }
        let patched = (|| {
            let bytes = patch_bytes(patch)?;
            match response.get("patchType").and_then(Value::as_str) {
                Some("JSONPatch") => {}
                other => return Err(format!("unsupported patch type {:?}", other.unwrap_or_default())),
            }
            let current = object.clone().unwrap_or(Value::Null);
            crate::patches::json_patch(&current, &bytes, false).map_err(|e| match e {
                crate::patches::PatchError::Decode(m) | crate::patches::PatchError::Internal(m) => m,
                crate::patches::PatchError::Apply => "the patch does not apply to the object".to_owned(),
                crate::patches::PatchError::TooManyOperations(n) => {
                    format!("the patch has {n} operations, too many")
                }
            })
        })();
        match patched {
            Ok(p) => Ok(Some(p)),
            Err(_) if hook.ignore_failures => Ok(object),
            Err(e) => Err(call_failed(hook, &e)),
        }
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
    fn commit(&self, p: &Prepared, mutated: Option<&Value>, output: crate::api::Output) -> Commit {
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
                .map(|w| crate::api::written(w, output, def)),
            (_, None, Operation::Create) => match &p.candidate {
                Some(c) => self.replay_locked(&mut st, c, p, self.opts.dry_run),
                None => run(&mut st, self.t, self.write, self.opts),
            }
            .map(|w| crate::api::written(w, output, def)),
            (_, None, _) => {
                run(&mut st, self.t, self.write, self.opts).map(|w| crate::api::written(w, output, def))
            }
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
    fn commit_plain(&self, output: crate::api::Output) -> Result<Reply, ErrorStatus> {
        let def = &self.t.def;
        crate::api::write(&self.env.inner, |st| match self.write {
            Write::Delete(opts) => st.delete(def, self.ns(), self.name(), opts).map(Reply::ok),
            _ => run(st, self.t, self.write, self.opts).map(|w| crate::api::written(w, output, def)),
        })
    }
}

enum Commit {
    Done(Reply),
    Failed(ErrorStatus),
    Moved,
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

/// `response.patch` as Go decodes a `[]byte`: a base64 string, or an array of
/// byte values (what kube-rs's `AdmissionResponse` sends).
fn patch_bytes(patch: &Value) -> Result<Vec<u8>, String> {
    match patch {
        Value::String(text) => base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| format!("illegal base64 data in response.patch: {e}")),
        Value::Array(items) => items
            .iter()
            .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| "response.patch holds a value that is not a byte".to_owned()),
        other => Err(format!(
            "cannot unmarshal {} into response.patch of type []byte",
            crate::go_format::go_json_type(other)
        )),
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

/// The review's `response`, checked as kube-apiserver checks it.
fn check_response(review: &Value, uid: &str) -> Result<Value, String> {
    let Some(response) = review.get("response") else {
        return Err("webhook response was absent".to_owned());
    };
    let got = response.get("uid").and_then(Value::as_str).unwrap_or_default();
    if got != uid {
        return Err(format!("expected response.uid=\"{uid}\", got \"{got}\""));
    }
    Ok(response.clone())
}

/// Where a webhook listens: the address to dial, the name its certificate must carry,
/// and the URL for messages.
struct Endpoint {
    dial: String,
    server_name: String,
    url: String,
    path_and_query: String,
}

fn endpoint(hook: &Webhook, routes: &[crate::ServiceRoute]) -> Result<Endpoint, String> {
    let timeout = format!("timeout={}s", hook.timeout.as_secs());
    if let Some(url) = hook.client.get("url").and_then(Value::as_str) {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("invalid webhook URL {url:?}: {e}"))?;
        if uri.scheme_str() != Some("https") {
            return Err(format!("webhook URL {url:?} must use the https scheme"));
        }
        let host = uri.host().unwrap_or_default().trim_matches(['[', ']']).to_owned();
        let port = uri.port_u16().unwrap_or(443);
        let path = uri.path();
        let path_and_query = match uri.query() {
            Some(q) => format!("{path}?{q}&{timeout}"),
            None => format!("{path}?{timeout}"),
        };
        return Ok(Endpoint {
            dial: format!("{}:{port}", uri.host().unwrap_or_default()),
            url: format!(
                "https://{}:{port}{path_and_query}",
                uri.host().unwrap_or_default()
            ),
            server_name: host,
            path_and_query,
        });
    }
    let service = hook.client.get("service").cloned().unwrap_or(Value::Null);
    let str_of = |k: &str| {
        service
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (ns, name) = (str_of("namespace"), str_of("name"));
    if name.is_empty() {
        return Err("webhook has neither clientConfig.url nor clientConfig.service".to_owned());
    }
    let port = service
        .get("port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(443);
    let path = match str_of("path") {
        p if p.is_empty() => "/".to_owned(),
        p => p,
    };
    let host = format!("{name}.{ns}.svc");
    let path_and_query = format!("{path}?{timeout}");
    let url = format!("https://{host}:{port}{path_and_query}");
    let Some((_, addr)) = routes
        .iter()
        .find(|((n, s, p), _)| *n == ns && *s == name && *p == port)
    else {
        return Err(format!(
            "failed to call webhook: Post \"{url}\": dial tcp: lookup {host}: no such host \
             (testenv reaches a Service only where TestEnv::route_service says it listens)"
        ));
    };
    Ok(Endpoint {
        dial: addr.to_string(),
        server_name: host,
        url,
        path_and_query,
    })
}

async fn call_webhook(
    hook: &Webhook,
    routes: &[crate::ServiceRoute],
    review: &Value,
) -> Result<Value, String> {
    let ep = endpoint(hook, routes)?;
    let failed = |why: String| format!("failed to call webhook: Post \"{}\": {why}", ep.url);
    let tls = tls_config(&hook.client).map_err(&failed)?;
    let body = serde_json::to_vec(review).map_err(|e| failed(e.to_string()))?;
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect(&ep.dial)
            .await
            .map_err(|e| format!("dial tcp {}: connect: {e}", ep.dial))?;
        let server_name = rustls_pki_types::ServerName::try_from(ep.server_name.clone())
            .map_err(|e| format!("invalid server name {:?}: {e}", ep.server_name))?;
        let stream = tokio_rustls::TlsConnector::from(tls)
            .connect(server_name, tcp)
            .await
            .map_err(tls_error)?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let request = http::Request::post(&ep.path_and_query)
            .header(http::header::HOST, ep.server_name.as_str())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, */*")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok::<_, String>((status, bytes))
    };
    let (status, bytes) = tokio::time::timeout(hook.timeout, exchange)
        .await
        .map_err(|_| failed("context deadline exceeded".to_owned()))?
        .map_err(&failed)?;
    if !status.is_success() {
        return Err(format!(
            "received invalid webhook response: the server responded with the status code {}: {}",
            status.as_u16(),
            String::from_utf8_lossy(&bytes).trim()
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("received invalid webhook response: {e}"))
}

fn tls_error(e: std::io::Error) -> String {
    let cert = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .and_then(|r| match r {
            rustls::Error::InvalidCertificate(c) => Some(c.clone()),
            _ => None,
        });
    match cert {
        // Go names both an unknown issuer and an issuer of the same name that did not
        // sign the certificate this way.
        Some(rustls::CertificateError::UnknownIssuer | rustls::CertificateError::BadSignature) => {
            "tls: failed to verify certificate: x509: certificate signed by unknown authority".to_owned()
        }
        Some(rustls::CertificateError::Expired | rustls::CertificateError::ExpiredContext { .. }) => {
            "tls: failed to verify certificate: x509: certificate has expired or is not yet valid".to_owned()
        }
        Some(
            rustls::CertificateError::NotValidForName
            | rustls::CertificateError::NotValidForNameContext { .. },
        ) => "tls: failed to verify certificate: x509: certificate is not valid for the webhook's host name"
            .to_owned(),
        Some(other) => format!("tls: failed to verify certificate: {other:?}"),
        None => format!("tls: {e}"),
    }
}

/// A client trusting exactly the webhook's `caBundle`.
fn tls_config(client: &Value) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls_pki_types::pem::PemObject as _;
    let bundle = client.get("caBundle").and_then(Value::as_str).unwrap_or_default();
    let pem = base64::engine::general_purpose::STANDARD
        .decode(bundle)
        .map_err(|e| format!("caBundle is not base64: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("caBundle holds an unreadable certificate: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("caBundle holds an unusable certificate: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(resources: &[&str], plural: &str, subresource: &str) -> bool {
        let defs = crate::registry::resource::builtins();
        let Some(def) = defs.iter().find(|d| d.group.is_empty() && d.plural == plural) else {
            panic!("{plural} is not a core resource");
        };
        let rule =
            json!({"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": resources});
        let attrs = Attributes {
            def,
            subresource,
            operation: Operation::Update,
            object: None,
            old_object: None,
        };
        rule_matches(&rule, &attrs)
    }

    #[test]
    fn a_patch_is_read_as_go_reads_a_byte_slice() {
        assert_eq!(patch_bytes(&json!("W10=")), Ok(b"[]".to_vec()));
        assert_eq!(patch_bytes(&json!([91, 93])), Ok(b"[]".to_vec()));
        assert!(patch_bytes(&json!([256])).is_err());
        assert!(patch_bytes(&json!({})).is_err());
    }

    #[test]
    fn resources_match_as_kube_apiserver_splits_them() {
        assert!(matches(&["pods"], "pods", ""));
        assert!(!matches(&["pods"], "pods", "status"));
        assert!(matches(&["pods/*"], "pods", ""), "pods/* includes pods itself");
        assert!(matches(&["pods/*"], "pods", "status"));
        assert!(matches(&["*/status"], "pods", "status"));
        assert!(!matches(&["*/status"], "pods", ""));
        assert!(matches(&["*"], "services", ""));
        assert!(
            !matches(&["*"], "services", "status"),
            "* leaves subresources out"
        );
        assert!(matches(&["*/*"], "services", "status"));
        assert!(!matches(&["pods/status"], "services", "status"));
    }
}
