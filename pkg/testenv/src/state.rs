//! The object semantics of kube-apiserver's generic registry: create, update (main
//! resource and `status`), patch, delete with finalizers, lists and reads at a revision.
//! Everything here runs under one lock and never awaits.

use std::sync::Arc;

use kinject_types::go_quote;
use serde_json::{Value, json};

use crate::crd::Schema;
use crate::errors::{ErrorStatus, FieldError};
use crate::go_format::go_map_string;
use crate::merge_keys::list_strategy;
use crate::names::NameGenerator;
use crate::object_meta::validation::{NameRule, check_meta};
use crate::object_meta::{finalizers, is_deleting, meta_str, with_meta};
use crate::patches::{self, PatchError, PatchType};
use crate::resource::{Builtin, KindImpl, ResourceDef};
use crate::selector::{FieldSelector, LabelSelector, field_value, labels_of};
use crate::store::{ObjKey, ResKey, Store};
use crate::timestamps::now;

/// `fieldValidation`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum FieldValidation {
    Ignore,
    #[default]
    Warn,
    Strict,
}

/// Options every write takes.
#[derive(Clone, Debug, Default)]
pub(crate) struct WriteOpts {
    pub(crate) dry_run: bool,
    pub(crate) validation: FieldValidation,
    /// The field manager: `fieldManager`, else the User-Agent's product name.
    pub(crate) field_manager: Option<String>,
    /// `fieldManager` was given explicitly (apply requires it).
    pub(crate) explicit_manager: bool,
    /// `force` (server-side apply only).
    pub(crate) force: bool,
    /// `managedFields` computed by server-side apply, to store with the object.
    pub(crate) managed_fields: Option<Value>,
    /// Build the object without checking it (a dry run only): what mutating admission
    /// webhooks see, since kube-apiserver validates an object after they changed it.
    pub(crate) skip_validation: bool,
}

/// A successful write: the object as stored and the `Warning` headers to send.
#[derive(Debug)]
pub(crate) struct Written {
    pub(crate) object: Value,
    pub(crate) warnings: Vec<String>,
    /// `201 Created` rather than `200 OK`.
    pub(crate) created: bool,
}

/// `DeleteOptions` as far as the registry uses them.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeleteOpts {
    pub(crate) preconditions: Preconditions,
    pub(crate) propagation: Option<String>,
    pub(crate) dry_run: bool,
}

/// What a write requires of the stored object (apimachinery's `storage.Preconditions`):
/// a delete's `preconditions`, and the `uid` an update's body names.
#[derive(Clone, Debug, Default)]
pub(crate) struct Preconditions {
    pub(crate) uid: Option<String>,
    pub(crate) resource_version: Option<String>,
}

impl Preconditions {
    /// `Preconditions.Check`: a 409 for the first precondition `existing` fails.
    pub(crate) fn check(&self, def: &ResourceDef, name: &str, existing: &Value) -> Result<(), ErrorStatus> {
        let failed = |what: &str, wanted: &str, field: &str| {
            ErrorStatus::conflict_on(
                &def.group,
                &def.plural,
                name,
                &format!(
                    "Precondition failed: {what} in precondition: {wanted}, {what} in object meta: {}",
                    meta_str(existing, field)
                ),
            )
        };
        if let Some(uid) = &self.uid
            && uid != meta_str(existing, "uid")
        {
            return Err(failed("UID", uid, "uid"));
        }
        if let Some(rv) = &self.resource_version
            && rv != meta_str(existing, "resourceVersion")
        {
            return Err(failed("ResourceVersion", rv, "resourceVersion"));
        }
        Ok(())
    }
}

/// Optimistic concurrency: a write naming a `resourceVersion` must name the stored
/// one; an empty one writes over whatever is stored.
pub(crate) fn check_resource_version(
    def: &ResourceDef,
    name: &str,
    existing: &Value,
    rv: &str,
) -> Result<(), ErrorStatus> {
    if rv.is_empty() || rv == meta_str(existing, "resourceVersion") {
        Ok(())
    } else {
        Err(ErrorStatus::stale(&def.group, &def.plural, name))
    }
}

/// A list request's selection.
#[derive(Clone, Debug, Default)]
pub(crate) struct Selection {
    pub(crate) namespace: Option<String>,
    pub(crate) labels: LabelSelector,
    pub(crate) fields: FieldSelector,
}

impl Selection {
    pub(crate) fn matches(&self, def: &ResourceDef, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace
            && obj.pointer("/metadata/namespace").and_then(Value::as_str) != Some(ns)
        {
            return false;
        }
        if !(self.labels.is_empty() || self.labels.matches(&labels_of(obj))) {
            return false;
        }
        if self.fields.is_empty() {
            return true;
        }
        // Field labels name fields of the requested version.
        let view = def.in_version(obj);
        self.fields.matches(|f| read_field(def, &view, f))
    }
}

fn read_field(def: &ResourceDef, obj: &Value, field: &str) -> String {
    match field {
        "metadata.name" => field_value(obj, "/metadata/name"),
        "metadata.namespace" => field_value(obj, "/metadata/namespace"),
        other => match def.field_label(other) {
            Some(p) if obj.pointer(p).is_some() => field_value(obj, p),
            Some(_) => def.field_zero(other).to_owned(),
            None => String::new(),
        },
    }
}

/// Rejects field selectors the resource does not support, with kube-apiserver's words.
pub(crate) fn check_fields(def: &ResourceDef, fields: &FieldSelector) -> Result<(), ErrorStatus> {
    for t in &fields.terms {
        let known = matches!(t.field.as_str(), "metadata.name" | "metadata.namespace")
            || def.field_label(&t.field).is_some();
        if !known {
            // Kinds with their own field-label conversion word it differently from the
            // default ObjectMeta-only conversion.
            let msg = if def.has_field_labels() {
                format!("field label not supported: {}", t.field)
            } else {
                format!(
                    "\"{}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
                    t.field
                )
            };
            return Err(ErrorStatus::bad_request(msg));
        }
    }
    Ok(())
}

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) store: Store,
    pub(crate) resources: Vec<Arc<ResourceDef>>,
    pub(crate) names: NameGenerator,
    pub(crate) uids: crate::names::UidGenerator,
    pub(crate) controllers: crate::controllers::Controllers,
}

/// The object without metadata (and status when it is a subresource): what
/// `metadata.generation` tracks.
fn generation_view(def: &ResourceDef, obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        m.remove("apiVersion");
        m.remove("kind");
        if def.status {
            m.remove("status");
        }
    }
    v
}

/// Keys present in `input` but dropped by the typed round trip: unknown fields.
fn unknown_fields(input: &Value, output: &Value, path: &str, out: &mut Vec<String>) {
    match (input, output) {
        (Value::Object(i), Value::Object(o)) => {
            for (k, v) in i {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match o.get(k) {
                    Some(ov) => unknown_fields(v, ov, &p, out),
                    None if !v.is_null() => out.push(p),
                    None => {}
                }
            }
        }
        (Value::Array(i), Value::Array(o)) => {
            for (n, (iv, ov)) in i.iter().zip(o).enumerate() {
                unknown_fields(iv, ov, &format!("{path}[{n}]"), out);
            }
        }
        _ => {}
    }
}

impl State {
    /// Stores an object as given (see `TestEnv::seed_object`), with a new
    /// revision and a watch event.
    pub(crate) fn seed(&mut self, def: &ResourceDef, ns: &str, name: &str, mut obj: Value) -> Value {
        obj["apiVersion"] = json!(def.api_version());
        obj["kind"] = json!(def.kind);
        let stored = self
            .store
            .put(&def.key(), ObjKey::new(ns, name), def.to_storage(obj));
        if def.builtin() == Some(Builtin::Crd) {
            self.sync_crd(&stored);
        }
        Self::present(def, &stored)
    }

    pub(crate) fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.resources
            .iter()
            .find(|d| d.group == group && d.version == version && d.plural == plural)
            .cloned()
    }

    pub(crate) fn find_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.resources
            .iter()
            .find(|d| d.group == group && d.version == version && d.kind == kind)
            .cloned()
    }

    /// Stored objects carry the version they were written with; every read is served in
    /// the requested version (CRD versions share storage with `None` conversion).
    pub(crate) fn present(def: &ResourceDef, obj: &Value) -> Value {
        def.in_version(obj)
    }

    pub(crate) fn get(&self, def: &ResourceDef, ns: &str, name: &str) -> Result<Value, ErrorStatus> {
        self.store
            .get(&def.key(), &ObjKey::new(ns, name))
            .map(|o| Self::present(def, o))
            .ok_or_else(|| ErrorStatus::not_found(&def.group, &def.plural, name))
    }

    /// Checks that the namespace of a create exists and is not terminating
    /// (kube-apiserver's NamespaceLifecycle admission).
    fn check_namespace(&self, def: &ResourceDef, ns: &str, name: &str) -> Result<(), ErrorStatus> {
        let Some(nsobj) = self
            .store
            .get(&ResKey::new("", "namespaces"), &ObjKey::new("", ns))
        else {
            return Err(ErrorStatus::not_found("", "namespaces", ns));
        };
        if is_deleting(nsobj) {
            return Err(ErrorStatus::forbidden(format!(
                "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                crate::errors::qualified(&def.group, &def.plural)
            ))
            .with_details(&def.group, &def.plural, name)
            .with_cause(
                "NamespaceTerminating",
                &format!("namespace {ns} is being terminated"),
                "metadata.namespace",
            ));
        }
        Ok(())
    }

    /// Checks `apiVersion`/`kind` in a body against the endpoint. `request_body` is
    /// true for a create or update body (the handler's API version check, a 400), false
    /// for the result of a patch (only the validation of custom resources sees it).
    fn check_type(&self, def: &ResourceDef, body: &Value, request_body: bool) -> Result<(), ErrorStatus> {
        if !body.is_object() {
            return Err(ErrorStatus::bad_request(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (expected a {} object)",
                def.kind
            )));
        }
        let av = body.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = body.get("kind").and_then(Value::as_str).unwrap_or_default();
        let av_mismatch = if def.is_custom() && request_body {
            av != def.api_version()
        } else {
            !av.is_empty() && av != def.api_version()
        };
        if av_mismatch && (request_body || !def.is_custom()) {
            return Err(ErrorStatus::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({})",
                def.api_version()
            )));
        }
        if def.is_custom() {
            // The custom resource validator's type check: a 422 about `kind` and
            // `apiVersion`, reported for the kind the object claims to be.
            let mut errs = Vec::new();
            if kind != def.kind {
                errs.push(FieldError::invalid(
                    "kind",
                    json!(kind),
                    format!("must be {}", def.kind),
                ));
            }
            if av != def.api_version() {
                errs.push(FieldError::invalid(
                    "apiVersion",
                    json!(av),
                    format!("must be {}", def.api_version()),
                ));
            }
            if !errs.is_empty() {
                let claimed = if kind.is_empty() { def.kind.as_str() } else { kind };
                return Err(ErrorStatus::invalid(
                    &def.group,
                    claimed,
                    meta_str(body, "name"),
                    errs,
                ));
            }
            return Ok(());
        }
        if !kind.is_empty() && kind != def.kind {
            // The decoder builds the kind the body names and fails to convert it to the
            // endpoint's type.
            let (group, version) = if av.is_empty() {
                (def.group.as_str(), def.version.as_str())
            } else {
                av.rsplit_once('/').unwrap_or(("", av))
            };
            let why = match self.find_kind(av_or(av, def).as_str(), kind) {
                Some(_) => format!(
                    "converting ({version}.{kind}) to ({}.{}): unknown conversion",
                    internal_package(&def.group),
                    def.kind
                ),
                None => format!(
                    "no kind \"{kind}\" is registered for version \"{}\" in scheme \"k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30\"",
                    if group.is_empty() {
                        version.to_owned()
                    } else {
                        format!("{group}/{version}")
                    }
                ),
            };
            return Err(ErrorStatus::bad_request(format!(
                "{kind} in version \"{version}\" cannot be handled as a {}: {why}",
                def.kind
            )));
        }
        Ok(())
    }

    /// Decodes like kube-apiserver: typed round trip for built-ins, structural schema for
    /// custom resources; unknown fields warn, fail (Strict) or vanish (Ignore). On an
    /// update, `old` is the stored object: schema errors at values the update left as
    /// they were are ratcheted away (CRDValidationRatcheting, GA in 1.33), so an object
    /// stored before its schema tightened can still have its status written.
    fn normalize(
        def: &ResourceDef,
        obj: Value,
        old: Option<&Value>,
        opts: &WriteOpts,
        name: &str,
    ) -> Result<(Value, Vec<String>), ErrorStatus> {
        let (out, unknown, errors) = match &def.imp {
            KindImpl::Builtin(b, roundtrip) => {
                let mut obj = obj;
                crate::timestamps::normalize_micro_times(&mut obj, b.micro_time_paths()).map_err(|e| {
                    ErrorStatus::bad_request(format!(
                        "{kind} in version \"{v}\" cannot be handled as a {kind}: {e}",
                        kind = def.kind,
                        v = def.version
                    ))
                })?;
                let out = roundtrip(&obj).map_err(|e| {
                    ErrorStatus::bad_request(format!(
                        "{kind} in version \"{v}\" cannot be handled as a {kind}: {e}",
                        kind = def.kind,
                        v = def.version
                    ))
                })?;
                let mut unknown = Vec::new();
                unknown_fields(&obj, &out, "", &mut unknown);
                (out, unknown, Vec::new())
            }
            KindImpl::Custom(schema) => {
                let (out, unknown, mut errors) = Self::normalize_custom(def, schema, obj)?;
                if let Some(old) = old {
                    errors.retain(|e| !crate::crd::ratcheted(e, old, &out));
                }
                (out, unknown, errors)
            }
        };
        if !errors.is_empty() && !opts.skip_validation {
            return Err(ErrorStatus::invalid(&def.group, &def.kind, name, errors));
        }
        let msgs: Vec<String> = unknown.iter().map(|u| format!("unknown field \"{u}\"")).collect();
        match opts.validation {
            FieldValidation::Strict if !msgs.is_empty() => Err(ErrorStatus::bad_request(format!(
                "strict decoding error: {}",
                msgs.join(", ")
            ))),
            FieldValidation::Warn => Ok((out, msgs)),
            _ => Ok((out, Vec::new())),
        }
    }

    fn normalize_custom(
        def: &ResourceDef,
        schema: &Schema,
        mut obj: Value,
    ) -> Result<(Value, Vec<String>, Vec<FieldError>), ErrorStatus> {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        let meta_in = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
        let meta: ObjectMeta = serde_json::from_value(meta_in.clone()).map_err(|e| {
            ErrorStatus::bad_request(format!(
                "{kind} in version \"{v}\" cannot be handled as a {kind}: {e}",
                kind = def.kind,
                v = def.version
            ))
        })?;
        let meta_out = serde_json::to_value(meta).unwrap_or_else(|_| json!({}));
        let mut unknown = Vec::new();
        unknown_fields(&meta_in, &meta_out, "metadata", &mut unknown);
        obj["metadata"] = meta_out;
        let checked = schema.apply(&mut obj);
        unknown.extend(checked.unknown);
        Ok((obj, unknown, checked.errors))
    }

    fn name_rule(def: &ResourceDef) -> NameRule {
        match def.builtin() {
            Some(Builtin::Namespace) => NameRule::Label,
            Some(Builtin::Service) => NameRule::Dns1035,
            _ => NameRule::Subdomain,
        }
    }

    /// `POST` to a collection.
    pub(crate) fn create(
        &mut self,
        def: &ResourceDef,
        url_ns: Option<&str>,
        mut obj: Value,
        opts: &WriteOpts,
    ) -> Result<Written, ErrorStatus> {
        self.check_type(def, &obj, true)?;
        let body_ns = meta_str(&obj, "namespace").to_owned();
        let ns = if def.namespaced {
            let url_ns = url_ns.unwrap_or_default();
            if !body_ns.is_empty() && body_ns != url_ns {
                return Err(ErrorStatus::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            url_ns.to_owned()
        } else {
            String::new()
        };
        let given_name = meta_str(&obj, "name").to_owned();
        if def.namespaced {
            // NamespaceLifecycle names the object by its generateName until it has a name.
            let admission_name = match (given_name.as_str(), meta_str(&obj, "generateName")) {
                ("", "") => "Unknown",
                ("", prefix) => prefix,
                (name, _) => name,
            };
            self.check_namespace(def, &ns, admission_name)?;
        }
        if def.is_custom() {
            let crd_name = format!("{}.{}", def.plural, def.group);
            let crd_res = ResKey::new("apiextensions.k8s.io", "customresourcedefinitions");
            if self
                .store
                .get(&crd_res, &ObjKey::new("", &crd_name))
                .is_some_and(|crd| crate::crds::is_terminating(crd))
            {
                // The custom resource handler's answer while the CRD's instances are removed.
                let mut e = ErrorStatus::new(
                    405,
                    "MethodNotAllowed",
                    "create not allowed while custom resource definition is terminating",
                );
                e.group.clone_from(&def.group);
                e.kind.clone_from(&def.plural);
                return Err(e);
            }
        }
        if !meta_str(&obj, "resourceVersion").is_empty() {
            // etcd3's storage error, which kube-apiserver passes on as an untyped 500.
            return Err(ErrorStatus::new(
                500,
                "",
                "resourceVersion should not be set on objects to be created",
            ));
        }
        with_meta(&mut obj, |meta| {
            if def.namespaced {
                meta.insert("namespace".into(), json!(ns));
            } else {
                meta.remove("namespace");
            }
        });
        let generate = meta_str(&obj, "generateName").to_owned();
        if given_name.is_empty() && !generate.is_empty() {
            // kube-apiserver (RetryGenerateName, GA in 1.32) tries up to 8 names before
            // answering AlreadyExists.
            let mut name = self.names.generate(&generate);
            for _ in 0..7 {
                if self.store.get(&def.key(), &ObjKey::new(&ns, &name)).is_none() {
                    break;
                }
                name = self.names.generate(&generate);
            }
            with_meta(&mut obj, |m| m.insert("name".into(), json!(name)));
        }
        let name = meta_str(&obj, "name").to_owned();
        let mut errs = Vec::new();
        check_meta(
            obj.get("metadata").unwrap_or(&Value::Null),
            Self::name_rule(def),
            &mut errs,
        );
        if !errs.is_empty() {
            return Err(ErrorStatus::invalid(&def.group, &def.kind, &name, errs));
        }
        // kube-apiserver's strategies clear the status of a new object for the kinds
        // without hand-written defaults here too; a Node keeps it, as the kubelet
        // registers its node with a status.
        let clears_status = def.is_custom() || (def.builtin() == Some(Builtin::Other) && def.kind != "Node");
        if def.status
            && clears_status
            && let Some(m) = obj.as_object_mut()
        {
            m.remove("status");
        }
        let (mut obj, warnings) = Self::normalize(def, obj, None, opts, &name)?;
        if def.builtin() == Some(Builtin::EventsV1Event) {
            check_event_v1(&obj, &name)?;
        }
        if let Some(b) = def.builtin() {
            b.default_on_create(&mut obj);
            crate::resource::default_workload(def, &mut obj);
            let errs = crate::rules::check(b, &obj, None);
            if !errs.is_empty() && !opts.skip_validation {
                return Err(ErrorStatus::invalid(&def.group, &def.kind, &name, errs));
            }
            if b == Builtin::Crd && !opts.skip_validation {
                crate::crds::validate(&obj, &name)?;
                crate::crds::accept(&mut obj);
            }
        }
        let uid = self.uids.generate(&def.resource_name(), &ns, &name);
        with_meta(&mut obj, |meta| {
            for k in [
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "selfLink",
                "managedFields",
                "generation",
            ] {
                meta.remove(k);
            }
            if let Some(mf) = &opts.managed_fields {
                meta.insert("managedFields".into(), mf.clone());
            }
            meta.insert("uid".into(), json!(uid));
            meta.insert("creationTimestamp".into(), json!(now()));
            if def.generation {
                meta.insert("generation".into(), json!(1));
            }
        });
        crate::resource::select_job_pods(def, &mut obj);
        obj["apiVersion"] = json!(def.api_version());
        obj["kind"] = json!(def.kind);
        if opts.managed_fields.is_none() {
            let manager = opts.field_manager.as_deref().unwrap_or_default();
            if let Some(mf) = crate::ssa::track_update(def, None, &obj, manager, false) {
                with_meta(&mut obj, |m| m.insert("managedFields".into(), mf));
            }
        }
        let key = ObjKey::new(&ns, &name);
        if self.store.get(&def.key(), &key).is_some() {
            return Err(ErrorStatus::already_exists(&def.group, &def.plural, &name));
        }
        if opts.dry_run {
            return Ok(Written {
                object: obj,
                warnings,
                created: true,
            });
        }
        let obj = def.to_storage(obj);
        check_storable(&obj)?;
        let stored = self.store.put(&def.key(), key, obj);
        if def.builtin() == Some(Builtin::Crd) {
            self.sync_crd(&stored);
        }
        Ok(Written {
            object: Self::present(def, &stored),
            warnings,
            created: true,
        })
    }

    /// `PUT` of an object or its `status`.
    pub(crate) fn update(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        mut obj: Value,
        status_only: bool,
        opts: &WriteOpts,
    ) -> Result<Written, ErrorStatus> {
        self.check_type(def, &obj, true)?;
        let body_name = meta_str(&obj, "name").to_owned();
        if body_name != name {
            return Err(ErrorStatus::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if def.namespaced {
            let body_ns = meta_str(&obj, "namespace");
            if !body_ns.is_empty() && body_ns != ns {
                return Err(ErrorStatus::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            with_meta(&mut obj, |m| m.insert("namespace".into(), json!(ns)));
        } else {
            with_meta(&mut obj, |m| m.remove("namespace"));
        }
        let key = ObjKey::new(ns, name);
        let Some(existing) = self.store.get(&def.key(), &key).cloned() else {
            if def.allow_create_on_update && !status_only {
                with_meta(&mut obj, |m| m.remove("resourceVersion"));
                return self.create(def, Some(ns), obj, opts);
            }
            return Err(ErrorStatus::not_found(&def.group, &def.plural, name));
        };
        let rv = meta_str(&obj, "resourceVersion");
        if rv.is_empty() && !def.allow_unconditional_update {
            return Err(ErrorStatus::invalid(
                &def.group,
                &def.kind,
                name,
                vec![FieldError::invalid_raw(
                    "metadata.resourceVersion",
                    "0x0",
                    "must be specified for an update",
                )],
            ));
        }
        check_resource_version(def, name, &existing, rv)?;
        let uid = meta_str(&obj, "uid");
        let preconditions = Preconditions {
            uid: (!uid.is_empty()).then(|| uid.to_owned()),
            resource_version: None,
        };
        preconditions.check(def, name, &existing)?;
        let mut new = status_rule(def, &existing, obj, status_only);
        if !status_only && def.builtin() == Some(Builtin::Namespace) {
            new["spec"] = existing.get("spec").cloned().unwrap_or_else(|| json!({}));
        }
        self.finish_update(def, &key, &existing, new, opts, status_only)
    }

    /// The common tail of update and patch: system metadata, validation, generation,
    /// no-op detection, the write, and deletion once the last finalizer is gone.
    pub(crate) fn finish_update(
        &mut self,
        def: &ResourceDef,
        key: &ObjKey,
        existing: &Arc<Value>,
        mut new: Value,
        opts: &WriteOpts,
        status_only: bool,
    ) -> Result<Written, ErrorStatus> {
        let name = key.name.clone();
        {
            let old_meta = existing.get("metadata").cloned().unwrap_or_else(|| json!({}));
            with_meta(&mut new, |meta| {
                for k in [
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                    "generateName",
                ] {
                    match old_meta.get(k) {
                        Some(v) => {
                            meta.insert(k.into(), v.clone());
                        }
                        None => {
                            meta.remove(k);
                        }
                    }
                }
                // Only server-side apply changes ownership records; other writes keep them.
                match (&opts.managed_fields, old_meta.get("managedFields")) {
                    (Some(mf), _) | (None, Some(mf)) => {
                        meta.insert("managedFields".into(), mf.clone());
                    }
                    (None, None) => {
                        meta.remove("managedFields");
                    }
                }
                meta.remove("selfLink");
                meta.insert("name".into(), json!(name));
                meta.insert(
                    "resourceVersion".into(),
                    old_meta.get("resourceVersion").cloned().unwrap_or(Value::Null),
                );
            });
        }
        let mut errs = Vec::new();
        check_meta(
            new.get("metadata").unwrap_or(&Value::Null),
            Self::name_rule(def),
            &mut errs,
        );
        if is_deleting(existing) {
            let old = finalizers(existing);
            let added: Vec<String> = finalizers(&new)
                .into_iter()
                .filter(|f| !old.contains(f))
                .collect();
            if !added.is_empty() {
                errs.push(FieldError::forbidden(
                    "metadata.finalizers",
                    format!(
                        "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                        added
                            .iter()
                            .map(|f| format!("\"{f}\""))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
        if !errs.is_empty() {
            return Err(ErrorStatus::invalid(&def.group, &def.kind, &name, errs));
        }
        let (mut new, warnings) = Self::normalize(def, new, Some(existing), opts, &name)?;
        match def.builtin() {
            Some(Builtin::Service) if !status_only => {
                crate::rules::prepare_service_update(&mut new, existing);
            }
            // Secret's type defaults on every decode, updates included.
            Some(Builtin::Secret) if new.get("type").is_none_or(Value::is_null) => {
                new["type"] = json!("Opaque");
            }
            _ => {}
        }
        if def.builtin() == Some(Builtin::Crd) && !opts.skip_validation {
            crate::crds::validate(&new, &name)?;
        }
        if let Some(b) = def.builtin() {
            let errs = crate::rules::check(b, &new, Some(existing));
            if !errs.is_empty() && !opts.skip_validation {
                return Err(ErrorStatus::invalid(&def.group, &def.kind, &name, errs));
            }
        }
        if def.generation && generation_view(def, &new) != generation_view(def, existing) {
            let g = existing
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            with_meta(&mut new, |m| {
                m.insert("generation".into(), json!(g.saturating_add(1)))
            });
        }
        new["apiVersion"] = json!(def.api_version());
        new["kind"] = json!(def.kind);
        if opts.managed_fields.is_none() {
            let old_view = Self::present(def, existing);
            let manager = opts.field_manager.as_deref().unwrap_or_default();
            if let Some(mf) = crate::ssa::track_update(def, Some(&old_view), &new, manager, status_only) {
                with_meta(&mut new, |m| m.insert("managedFields".into(), mf));
            }
        }
        let new = def.to_storage(new);
        let without_version = |v: &Value| {
            let mut v = v.clone();
            if let Some(m) = v.as_object_mut() {
                m.remove("apiVersion");
            }
            v
        };
        if without_version(&new) == without_version(existing) {
            // kube-apiserver skips writes that change nothing: no new resourceVersion, no event.
            return Ok(Written {
                object: Self::present(def, existing),
                warnings,
                created: false,
            });
        }
        if opts.dry_run {
            return Ok(Written {
                object: Self::present(def, &new),
                warnings,
                created: false,
            });
        }
        check_storable(&new)?;
        let deleting = is_deleting(&new) && finalizers(&new).is_empty();
        if deleting {
            // kube-apiserver does not store the emptied finalizers: it deletes the stored
            // object as it is (one DELETED event, no MODIFIED), and answers the write with
            // that last state at the deletion's revision.
            let gone = self.remove(def, key).unwrap_or_else(|| Arc::clone(existing));
            return Ok(Written {
                object: Self::present(def, &gone),
                warnings,
                created: false,
            });
        }
        let stored = self.store.put(&def.key(), key.clone(), new);
        if def.builtin() == Some(Builtin::Crd) {
            self.sync_crd(&stored);
        }
        Ok(Written {
            object: Self::present(def, &stored),
            warnings,
            created: false,
        })
    }

    /// `PATCH` of an object or its `status`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn patch(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        ptype: PatchType,
        body: &[u8],
        status_only: bool,
        opts: &WriteOpts,
    ) -> Result<Written, ErrorStatus> {
        if ptype == PatchType::Apply {
            return self.apply(def, ns, name, body, status_only, opts);
        }
        let key = ObjKey::new(ns, name);
        let Some(existing) = self.store.get(&def.key(), &key).cloned() else {
            return Err(ErrorStatus::not_found(&def.group, &def.plural, name));
        };
        let current = Self::present(def, &existing);
        let patched = match ptype {
            PatchType::Json => {
                patches::json_patch(&current, body, opts.validation != FieldValidation::Ignore)
            }
            PatchType::Merge => patches::merge_patch(&current, body),
            PatchType::Strategic => match def.builtin() {
                Some(b) => patches::strategic_merge_patch(&|path| list_strategy(b, path), &current, body),
                None => return Err(unsupported_patch(def)),
            },
            PatchType::Apply => unreachable_apply(),
        }?;
        if let Some(b) = def.builtin()
            && let Err(e) =
                crate::timestamps::normalize_micro_times(&mut patched.clone(), b.micro_time_paths())
        {
            return Err(patch_decode_error(ptype, &patched, body, &e));
        }
        if meta_str(&patched, "name") != name {
            return Err(ErrorStatus::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta_str(&patched, "name")
            )));
        }
        if def.namespaced && meta_str(&patched, "namespace") != ns {
            return Err(ErrorStatus::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        self.check_type(def, &patched, false)?;
        check_resource_version(def, name, &existing, meta_str(&patched, "resourceVersion"))?;
        let uid = meta_str(&patched, "uid");
        if uid != meta_str(&existing, "uid") {
            return Err(ErrorStatus::invalid(
                &def.group,
                &def.kind,
                name,
                vec![FieldError::invalid(
                    "metadata.uid",
                    json!(uid),
                    "field is immutable",
                )],
            ));
        }
        let new = status_rule(def, &existing, patched, status_only);
        self.finish_update(def, &key, &existing, new, opts, status_only)
    }

    /// Server-side apply: creates the object when missing, else merges and records
    /// field ownership.
    fn apply(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        body: &[u8],
        status_only: bool,
        opts: &WriteOpts,
    ) -> Result<Written, ErrorStatus> {
        let Some(manager) = opts
            .field_manager
            .clone()
            .filter(|m| opts.explicit_manager && !m.is_empty())
        else {
            return Err(ErrorStatus::invalid(
                "meta.k8s.io",
                "PatchOptions",
                "",
                vec![FieldError::required(
                    "fieldManager",
                    "is required for apply patch",
                )],
            ));
        };
        let mut applied = crate::ssa::parse_body(body)?;
        if !applied.is_object() {
            return Err(ErrorStatus::bad_request(
                "the body of an apply patch must be an object",
            ));
        }
        if applied
            .get("kind")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(ErrorStatus::bad_request(format!(
                "Object 'Kind' is missing in '{}'",
                String::from_utf8_lossy(body)
            )));
        }
        self.check_type(def, &applied, true)?;
        let body_name = meta_str(&applied, "name").to_owned();
        if !body_name.is_empty() && body_name != name {
            return Err(ErrorStatus::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let body_ns = meta_str(&applied, "namespace").to_owned();
        if def.namespaced && !body_ns.is_empty() && body_ns != ns {
            return Err(ErrorStatus::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        with_meta(&mut applied, |m| {
            m.insert("name".into(), json!(name));
            if def.namespaced {
                m.insert("namespace".into(), json!(ns));
            }
        });
        let key = ObjKey::new(ns, name);
        let Some(existing) = self.store.get(&def.key(), &key).cloned() else {
            if status_only {
                return Err(ErrorStatus::not_found(&def.group, &def.plural, name));
            }
            let a = crate::ssa::apply(def, None, &applied, &manager, opts.force, false)?;
            let opts = WriteOpts {
                managed_fields: Some(a.managed_fields),
                ..opts.clone()
            };
            return self.create(def, def.namespaced.then_some(ns), a.object, &opts);
        };
        check_resource_version(def, name, &existing, meta_str(&applied, "resourceVersion"))?;
        let live = Self::present(def, &existing);
        let a = crate::ssa::apply(def, Some(&live), &applied, &manager, opts.force, status_only)?;
        let new = if status_only {
            let mut n = (*existing).clone();
            match a.object.get("status") {
                Some(s) => n["status"] = s.clone(),
                None => {
                    if let Some(m) = n.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            n
        } else {
            let mut n = a.object;
            if def.status {
                match existing.get("status") {
                    Some(s) => n["status"] = s.clone(),
                    None => {
                        if let Some(m) = n.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            n
        };
        let opts = WriteOpts {
            managed_fields: Some(a.managed_fields),
            ..opts.clone()
        };
        self.finish_update(def, &key, &existing, new, &opts, status_only)
    }

    pub(crate) fn remove(&mut self, def: &ResourceDef, key: &ObjKey) -> Option<Arc<Value>> {
        if def.builtin() == Some(Builtin::Crd) {
            // Instances go first, as the CRD finalizer controller deletes them before the CRD.
            if let Some(crd) = self.store.get(&def.key(), key).cloned() {
                self.drop_crd(&crd);
            }
        }
        self.store.remove(&def.key(), key)
    }

    /// `DELETE` of one object: immediate, or `deletionTimestamp` while finalizers remain.
    pub(crate) fn delete(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        opts: &DeleteOpts,
    ) -> Result<Value, ErrorStatus> {
        let key = ObjKey::new(ns, name);
        let Some(existing) = self.store.get(&def.key(), &key).cloned() else {
            return Err(ErrorStatus::not_found(&def.group, &def.plural, name));
        };
        opts.preconditions.check(def, name, &existing)?;
        if def.builtin() == Some(Builtin::Namespace) {
            return self.delete_namespace(def, &key, &existing, opts);
        }
        if def.builtin() == Some(Builtin::Crd) && !is_deleting(&existing) {
            return Ok(self.mark_crd_deleted(def, &key, &existing, opts.dry_run));
        }
        let mut fins = finalizers(&existing);
        let extra = match opts.propagation.as_deref() {
            Some("Orphan") => Some("orphan"),
            Some("Foreground") => Some("foregroundDeletion"),
            _ => None,
        };
        if let Some(f) = extra
            && !fins.iter().any(|x| x == f)
        {
            fins.push(f.to_owned());
        }
        let being_deleted = is_deleting(&existing);
        if being_deleted || !fins.is_empty() {
            if being_deleted && fins == finalizers(&existing) {
                return Ok(Self::present(def, &existing));
            }
            let mut obj = (*existing).clone();
            with_meta(&mut obj, |meta| {
                if !being_deleted {
                    meta.insert("deletionTimestamp".into(), json!(now()));
                    meta.insert("deletionGracePeriodSeconds".into(), json!(0));
                    if let Some(g) = meta.get("generation").and_then(Value::as_i64)
                        && g > 0
                    {
                        meta.insert("generation".into(), json!(g.saturating_add(1)));
                    }
                }
                meta.insert("finalizers".into(), json!(fins));
            });
            if opts.dry_run {
                return Ok(Self::present(def, &obj));
            }
            let stored = self.store.put(&def.key(), key, obj);
            return Ok(Self::present(def, &stored));
        }
        if opts.dry_run {
            return Ok(Self::deleted_reply(def, &existing));
        }
        let gone = self.remove(def, &key).unwrap_or(existing);
        Ok(Self::deleted_reply(def, &gone))
    }

    fn deleted_reply(def: &ResourceDef, gone: &Value) -> Value {
        if def.return_deleted_object {
            return Self::present(def, gone);
        }
        let mut details = json!({
            "name": meta_str(gone, "name"),
            "kind": def.plural,
            "uid": meta_str(gone, "uid"),
        });
        if !def.group.is_empty() {
            details["group"] = json!(def.group);
        }
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": details,
        })
    }

    /// A bare kube-apiserver marks the namespace Terminating; the namespace controller
    /// (part of kube-controller-manager, absent here) would empty and remove it.
    fn delete_namespace(
        &mut self,
        def: &ResourceDef,
        key: &ObjKey,
        existing: &Arc<Value>,
        opts: &DeleteOpts,
    ) -> Result<Value, ErrorStatus> {
        if matches!(key.name.as_str(), "default" | "kube-system" | "kube-public") {
            return Err(ErrorStatus::forbidden(format!(
                "namespaces \"{}\" is forbidden: this namespace may not be deleted",
                key.name
            ))
            .with_details("", "namespaces", &key.name));
        }
        let spec_fins = existing
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        if !spec_fins && finalizers(existing).is_empty() {
            if opts.dry_run {
                return Ok(Self::present(def, existing));
            }
            let gone = self.remove(def, key).unwrap_or_else(|| Arc::clone(existing));
            return Ok(Self::present(def, &gone));
        }
        if is_deleting(existing) {
            return Ok(Self::present(def, existing));
        }
        let mut obj = (**existing).clone();
        with_meta(&mut obj, |m| m.insert("deletionTimestamp".into(), json!(now())));
        with_meta(&mut obj, |m| {
            m.insert("deletionGracePeriodSeconds".into(), json!(0))
        });
        obj["status"]["phase"] = json!("Terminating");
        if opts.dry_run {
            return Ok(Self::present(def, &obj));
        }
        let stored = self.store.put(&def.key(), key.clone(), obj);
        Ok(Self::present(def, &stored))
    }

    /// `DELETE` of a collection: each selected object as by `delete`.
    pub(crate) fn delete_collection(
        &mut self,
        def: &ResourceDef,
        sel: &Selection,
        opts: &DeleteOpts,
    ) -> Result<Value, ErrorStatus> {
        // kube-apiserver answers with the list it selected, as it was before deletion.
        let selected: Vec<(ObjKey, Arc<Value>)> = self
            .store
            .iter(&def.key())
            .filter(|(_, o)| sel.matches(def, o))
            .map(|(k, o)| (k.clone(), Arc::clone(o)))
            .collect();
        let per_object = DeleteOpts {
            preconditions: Preconditions::default(),
            ..opts.clone()
        };
        let mut items = Vec::new();
        for (k, obj) in selected {
            match self.delete(def, &k.namespace, &k.name, &per_object) {
                Ok(_) => items.push(Self::present(def, &obj)),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(json!({
            "kind": def.list_kind,
            "apiVersion": def.api_version(),
            "metadata": {"resourceVersion": self.store.rv().to_string()},
            "items": items,
        }))
    }
}

/// A body's apiVersion, defaulted from the endpoint when absent.
fn av_or(av: &str, def: &ResourceDef) -> String {
    if av.is_empty() {
        def.api_version()
    } else {
        av.to_owned()
    }
}

/// The Go package of a built-in group's internal types, as conversion errors name it.
fn internal_package(group: &str) -> &str {
    match group {
        "" | "events.k8s.io" => "core",
        "apiextensions.k8s.io" => "apiextensions",
        g => g.split('.').next().unwrap_or(g),
    }
}

/// etcd's default `--max-request-bytes` (1.5 MiB).
const MAX_STORED_OBJECT_BYTES: usize = 1024 * 1024 + 512 * 1024;

/// Refuses to store an object etcd would refuse: its request-size limit surfaces
/// through kube-apiserver as an untyped 500 carrying etcd's own message. The size
/// is that of the object's JSON (kube-apiserver stores built-ins as protobuf, a little
/// smaller).
fn check_storable(obj: &Value) -> Result<(), ErrorStatus> {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    // Writing a `Value` into a counter cannot fail.
    let _ = serde_json::to_writer(&mut n, obj);
    if n.0 > MAX_STORED_OBJECT_BYTES {
        return Err(ErrorStatus::new(500, "", "etcdserver: request is too large"));
    }
    Ok(())
}

/// events.k8s.io/v1 creation rules (the fields its Recorder-style clients must set).
fn check_event_v1(ev: &Value, name: &str) -> Result<(), ErrorStatus> {
    let mut errs = Vec::new();
    let missing = |f: &str| ev.get(f).and_then(Value::as_str).is_none_or(str::is_empty);
    if ev.get("eventTime").is_none_or(Value::is_null) {
        errs.push(FieldError::required("eventTime", ""));
    }
    let ty = ev.get("type").and_then(Value::as_str).unwrap_or_default();
    if ty != "Normal" && ty != "Warning" {
        errs.push(FieldError::invalid(
            "type",
            json!(""),
            format!("has invalid value: {ty}"),
        ));
    }
    for f in ["reason", "reportingController", "reportingInstance", "action"] {
        if missing(f) {
            errs.push(FieldError::required(f, ""));
        }
    }
    if ev
        .get("note")
        .and_then(Value::as_str)
        .is_some_and(|n| n.len() > 1024)
    {
        errs.push(
            FieldError::invalid("note", json!(""), "can have at most 1024 characters")
                .with_kind(crate::errors::FieldErrorKind::TooLong),
        );
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ErrorStatus::invalid("events.k8s.io", "Event", name, errs))
    }
}

/// Apply patches are routed to `State::apply` before the patch-type dispatch.
/// kube-apiserver's answer when a patched built-in does not decode: a 422 about the
/// field `patch`, quoting the patched object (JSON and merge patches) or the patch as Go
/// prints a map (strategic merge patches).
fn patch_decode_error(ptype: PatchType, patched: &Value, body: &[u8], why: &str) -> ErrorStatus {
    let shown = match ptype {
        PatchType::Strategic => serde_json::from_slice::<Value>(body)
            .map(|p| go_map_string(&p))
            .unwrap_or_default(),
        _ => patched.to_string(),
    };
    ErrorStatus::invalid(
        "",
        "",
        "",
        vec![FieldError::invalid_raw("patch", go_quote(&shown), why)],
    )
}

fn unreachable_apply() -> Result<Value, PatchError> {
    Err(PatchError::Decode("apply patches are handled separately".into()))
}

fn unsupported_patch(def: &ResourceDef) -> ErrorStatus {
    let mut types = vec![
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ];
    if !def.is_custom() {
        types.push("application/strategic-merge-patch+json");
    }
    ErrorStatus::unsupported_media_type(format!(
        "the body of the request was in an unknown format - accepted media types include: {}",
        types.join(", ")
    ))
}

/// The object a write stores under the status-subresource rule: a status write
/// changes only `status` (ResetObjectMetaForStatus and friends), and a write to
/// the main resource of a kind with the subresource keeps the stored status.
fn status_rule(def: &ResourceDef, existing: &Value, incoming: Value, status_only: bool) -> Value {
    let (mut stored, status_from) = if status_only {
        (existing.clone(), incoming.get("status").cloned())
    } else if def.status {
        (incoming, existing.get("status").cloned())
    } else {
        return incoming;
    };
    match status_from {
        Some(status) => stored["status"] = status,
        None => {
            if let Some(m) = stored.as_object_mut() {
                m.remove("status");
            }
        }
    }
    stored
}

pub(crate) fn unsupported_patch_type(def: &ResourceDef) -> ErrorStatus {
    unsupported_patch(def)
}
