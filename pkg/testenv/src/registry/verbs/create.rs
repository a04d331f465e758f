//! `POST` to a collection.

use serde_json::{Value, json};

use crate::errors::{ErrorStatus, qualified};
use crate::object_meta::validation::check_meta;
use crate::object_meta::{is_deleting, meta_str, with_meta};
use crate::registry::Registry;
use crate::registry::builtin_rules::defaults::{default_on_create, default_workload, select_job_pods};
use crate::registry::builtin_rules::validation::{check, check_event_v1};
use crate::registry::crd::{accept, is_terminating, validate as validate_crd};
use crate::registry::managed_fields::track_update;
use crate::registry::options::{WriteOpts, Written};
use crate::registry::resource::{Builtin, ResourceDef};
use crate::store::{ObjKey, ResKey};
use crate::timestamps::now;

use super::{check_storable, name_rule};

impl Registry {
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
                qualified(&def.group, &def.plural)
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

    /// `POST` to a collection.
    pub(crate) fn create(
        &mut self,
        def: &ResourceDef,
        url_ns: Option<&str>,
        mut obj: Value,
        opts: &WriteOpts,
    ) -> Result<Written, ErrorStatus> {
        self.check_type(def, &obj, true)?;
        let ns = namespace_of_create(def, url_ns, &obj)?;
        self.admit_create(def, &ns, &obj)?;
        self.name_new_object(def, &ns, &mut obj);
        let name = meta_str(&obj, "name").to_owned();
        let mut errs = Vec::new();
        check_meta(
            obj.get("metadata").unwrap_or(&Value::Null),
            name_rule(def),
            &mut errs,
        );
        if !errs.is_empty() {
            return Err(ErrorStatus::invalid(&def.group, &def.kind, &name, errs));
        }
        clear_new_status(def, &mut obj);
        let (mut obj, warnings) = Self::normalize(def, obj, None, opts, &name)?;
        if let Some(kind) = def.builtin() {
            builtin_create_rules(def, kind, &mut obj, &name, opts)?;
        }
        self.stamp_new_metadata(def, &ns, &name, &mut obj, opts);
        self.store_created(def, ObjKey::new(&ns, &name), obj, warnings, opts.dry_run)
    }

    /// What kube-apiserver's admission refuses before a create reaches the registry:
    /// a namespace that is missing or terminating, a CRD being torn down, and (from
    /// etcd) a `resourceVersion` already set.
    fn admit_create(&self, def: &ResourceDef, ns: &str, obj: &Value) -> Result<(), ErrorStatus> {
        if def.namespaced {
            // NamespaceLifecycle names the object by its generateName until it has a name.
            let admission_name = match (meta_str(obj, "name"), meta_str(obj, "generateName")) {
                ("", "") => "Unknown",
                ("", prefix) => prefix,
                (name, _) => name,
            };
            self.check_namespace(def, ns, admission_name)?;
        }
        if def.is_custom() {
            let crd_name = format!("{}.{}", def.plural, def.group);
            let crd_res = ResKey::new("apiextensions.k8s.io", "customresourcedefinitions");
            if self
                .store
                .get(&crd_res, &ObjKey::new("", &crd_name))
                .is_some_and(|crd| is_terminating(crd))
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
        if !meta_str(obj, "resourceVersion").is_empty() {
            // etcd3's storage error, which kube-apiserver passes on as an untyped 500.
            return Err(ErrorStatus::new(
                500,
                "",
                "resourceVersion should not be set on objects to be created",
            ));
        }
        Ok(())
    }

    /// Puts the object in its namespace (none for cluster-scoped kinds) and completes
    /// a `generateName`.
    fn name_new_object(&mut self, def: &ResourceDef, ns: &str, obj: &mut Value) {
        with_meta(obj, |meta| {
            if def.namespaced {
                meta.insert("namespace".into(), json!(ns));
            } else {
                meta.remove("namespace");
            }
        });
        let generate = meta_str(obj, "generateName").to_owned();
        if !meta_str(obj, "name").is_empty() || generate.is_empty() {
            return;
        }
        // kube-apiserver (RetryGenerateName, GA in 1.32) tries up to 8 names before
        // answering AlreadyExists.
        let mut name = self.names.generate(&generate);
        for _ in 0..7 {
            if self.store.get(&def.key(), &ObjKey::new(ns, &name)).is_none() {
                break;
            }
            name = self.names.generate(&generate);
        }
        with_meta(obj, |m| m.insert("name".into(), json!(name)));
    }

    /// The metadata the server owns: a new uid, the creation time, generation 1, and
    /// the field ownership of the creating manager.
    fn stamp_new_metadata(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        obj: &mut Value,
        opts: &WriteOpts,
    ) {
        let uid = self.uids.generate(&def.resource_name(), ns, name);
        with_meta(obj, |meta| {
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
        select_job_pods(def, obj);
        obj["apiVersion"] = json!(def.api_version());
        obj["kind"] = json!(def.kind);
        if opts.managed_fields.is_none() {
            let manager = opts.field_manager.as_deref().unwrap_or_default();
            if let Some(mf) = track_update(def, None, obj, manager, false) {
                with_meta(obj, |m| m.insert("managedFields".into(), mf));
            }
        }
    }

    /// Stores a new object, unless one of its name exists or this is a dry run.
    fn store_created(
        &mut self,
        def: &ResourceDef,
        key: ObjKey,
        obj: Value,
        warnings: Vec<String>,
        dry_run: bool,
    ) -> Result<Written, ErrorStatus> {
        if self.store.get(&def.key(), &key).is_some() {
            return Err(ErrorStatus::already_exists(&def.group, &def.plural, &key.name));
        }
        if dry_run {
            return Ok(Written {
                object: obj,
                warnings,
                created: true,
            });
        }
        let obj = def.to_storage(obj)?;
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
}

/// The namespace a create goes to: the URL's, which a namespace in the body must match.
fn namespace_of_create(def: &ResourceDef, url_ns: Option<&str>, obj: &Value) -> Result<String, ErrorStatus> {
    if !def.namespaced {
        return Ok(String::new());
    }
    let url_ns = url_ns.unwrap_or_default();
    let body_ns = meta_str(obj, "namespace");
    if !body_ns.is_empty() && body_ns != url_ns {
        return Err(ErrorStatus::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(url_ns.to_owned())
}

/// kube-apiserver's strategies clear the status of a new object for the kinds without
/// hand-written defaults here too; a Node keeps it, as the kubelet registers its node
/// with a status.
fn clear_new_status(def: &ResourceDef, obj: &mut Value) {
    let clears_status = def.is_custom() || (def.builtin() == Some(Builtin::Other) && def.kind != "Node");
    if def.status
        && clears_status
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
}

/// A built-in kind's rules on create: its defaults, its validation (unless the
/// write is only built for admission webhooks to see), and a CRD's acceptance.
fn builtin_create_rules(
    def: &ResourceDef,
    kind: Builtin,
    obj: &mut Value,
    name: &str,
    opts: &WriteOpts,
) -> Result<(), ErrorStatus> {
    if kind == Builtin::EventsV1Event {
        check_event_v1(obj, name)?;
    }
    default_on_create(kind, obj);
    default_workload(def, obj);
    let errs = check(def, obj, None);
    if !errs.is_empty() && !opts.skip_validation {
        return Err(ErrorStatus::invalid(&def.group, &def.kind, name, errs));
    }
    if kind == Builtin::Crd && !opts.skip_validation {
        validate_crd(obj, name)?;
        accept(obj);
    }
    Ok(())
}
