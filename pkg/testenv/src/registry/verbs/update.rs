//! `PUT` of an object or its `status`, and the tail every change of a stored object
//! shares.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::errors::{ErrorStatus, FieldError};
use crate::object_meta::validation::check_meta;
use crate::object_meta::{finalizers, is_deleting, meta_str, with_meta};
use crate::registry::Registry;
use crate::registry::builtin_rules::validation::{check, prepare_service_update};
use crate::registry::crd::{record_storage_version, validate as validate_crd, validate_stored_versions};
use crate::registry::managed_fields::track_update;
use crate::registry::options::{WriteOpts, Written};
use crate::registry::preconditions::{Preconditions, check_resource_version};
use crate::registry::resource::{Builtin, ResourceDef};
use crate::store::ObjKey;

use super::{check_storable, generation_view, name_rule, status_rule};

impl Registry {
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
            // The generic registry's own check, before any validation: it names the
            // resource where `Invalid` errors usually name the kind (a TODO there says
            // so), and shows the revision as the number it parsed.
            return Err(ErrorStatus::invalid(
                &def.group,
                &def.plural,
                name,
                vec![FieldError::invalid(
                    "metadata.resourceVersion",
                    json!(0),
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
        keep_system_metadata(&mut new, existing, &name, opts);
        check_updated_meta(def, existing, &new, &name)?;
        // The stored object as this version reads it: ratcheting, `oldSelf`
        // and the generation compare like with like.
        let existing_view = def.in_own_version(existing);
        let (mut new, warnings) = Self::normalize(def, new, Some(&existing_view), opts, &name)?;
        if let Some(kind) = def.builtin() {
            builtin_update_rules(def, kind, &mut new, existing, &name, opts, status_only)?;
        }
        if def.generation && generation_view(def, &new) != generation_view(def, &existing_view) {
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
            if let Some(mf) = track_update(def, Some(&old_view), &new, manager, status_only) {
                with_meta(&mut new, |m| m.insert("managedFields".into(), mf));
            }
        }
        let new = def.to_storage(new)?;
        self.store_updated(def, key, existing, new, warnings, opts.dry_run)
    }

    /// Stores a changed object, or deletes it when it is being deleted and has no
    /// finalizers left; a write that changes nothing and a dry run store nothing.
    fn store_updated(
        &mut self,
        def: &ResourceDef,
        key: &ObjKey,
        existing: &Arc<Value>,
        new: Value,
        warnings: Vec<String>,
        dry_run: bool,
    ) -> Result<Written, ErrorStatus> {
        let written = |object| Written {
            object,
            warnings,
            created: false,
        };
        // An object stored in another version is rewritten in the storage
        // version even when nothing else changes, as kube-apiserver's
        // stored bytes differ (what a storage migration relies on); one of
        // a CRD that converts through a webhook stays as written.
        let compared = |v: &Value| {
            let mut v = v.clone();
            if def.is_custom()
                && def.storage_api_version.is_none()
                && let Some(m) = v.as_object_mut()
            {
                m.remove("apiVersion");
            }
            v
        };
        if compared(&new) == compared(existing) {
            // kube-apiserver skips writes that change nothing: no new resourceVersion, no event.
            return Ok(written(Self::present(def, existing)));
        }
        if dry_run {
            return Ok(written(Self::present(def, &new)));
        }
        check_storable(&new)?;
        if is_deleting(&new) && finalizers(&new).is_empty() {
            // kube-apiserver does not store the emptied finalizers: it deletes the stored
            // object as it is (one DELETED event, carrying the old finalizers, no
            // MODIFIED). Its `deleteWithoutFinalizers` then answers with the object of
            // the request, not the deleted one, "as clients expect an updated object if
            // a PUT succeeded": no finalizers, at the revision the write was made on.
            self.remove(def, key);
            return Ok(written(Self::present(def, &new)));
        }
        let stored = self.store.put(&def.key(), key.clone(), new);
        if def.builtin() == Some(Builtin::Crd) {
            self.sync_crd(&stored);
        }
        Ok(written(Self::present(def, &stored)))
    }
}

/// The metadata a write cannot change: what the server set (uid, creation and
/// deletion, generation), the name, the revision it was read at, and the ownership
/// records unless server-side apply computed new ones.
fn keep_system_metadata(new: &mut Value, existing: &Value, name: &str, opts: &WriteOpts) {
    let old_meta = existing.get("metadata").cloned().unwrap_or_else(|| json!({}));
    with_meta(new, |meta| {
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

/// `ValidateObjectMetaUpdate` as far as testenv checks it: the metadata rules, and no
/// new finalizers on an object being deleted.
fn check_updated_meta(
    def: &ResourceDef,
    existing: &Value,
    new: &Value,
    name: &str,
) -> Result<(), ErrorStatus> {
    let mut errs = Vec::new();
    check_meta(
        new.get("metadata").unwrap_or(&Value::Null),
        name_rule(def),
        &mut errs,
    );
    if is_deleting(existing) {
        let old = finalizers(existing);
        let added: Vec<String> = finalizers(new).into_iter().filter(|f| !old.contains(f)).collect();
        if !added.is_empty() {
            // kube-apiserver runs `ValidateObjectMetaAccessorUpdate` twice on every
            // update, once for the common fields and once in the kind's strategy, so
            // the rule is reported as two causes (the message shows it once).
            let forbidden = FieldError::forbidden(
                "metadata.finalizers",
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    added
                        .iter()
                        .map(|f| format!("\"{f}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
            errs.push(forbidden.clone());
            errs.push(forbidden);
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ErrorStatus::invalid(&def.group, &def.kind, name, errs))
    }
}

/// A built-in kind's rules on update: what its registry prepares (a Service keeps its
/// cluster IPs, a Secret's type defaults), then its validation against the stored
/// object (unless the write is only built for admission webhooks to see).
fn builtin_update_rules(
    def: &ResourceDef,
    kind: Builtin,
    new: &mut Value,
    existing: &Value,
    name: &str,
    opts: &WriteOpts,
    status_only: bool,
) -> Result<(), ErrorStatus> {
    match kind {
        Builtin::Service if !status_only => prepare_service_update(new, existing),
        // Secret's type defaults on every decode, updates included.
        Builtin::Secret if new.get("type").is_none_or(Value::is_null) => {
            new["type"] = json!("Opaque");
        }
        // The new storage version joins `status.storedVersions`.
        Builtin::Crd if !status_only => record_storage_version(new),
        _ => {}
    }
    if opts.skip_validation {
        return Ok(());
    }
    if kind == Builtin::Crd {
        validate_crd(new, name)?;
        if !status_only {
            validate_stored_versions(new, name)?;
        }
    }
    let errs = check(def, new, Some(existing));
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ErrorStatus::invalid(&def.group, &def.kind, name, errs))
    }
}
