//! `DELETE` of one object or of a collection: immediate, or a `deletionTimestamp`
//! while finalizers remain.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::errors::ErrorStatus;
use crate::object_meta::{finalizers, is_deleting, meta_str, with_meta};
use crate::registry::Registry;
use crate::registry::options::{DeleteOpts, Selection};
use crate::registry::preconditions::Preconditions;
use crate::registry::resource::{Builtin, ResourceDef};
use crate::store::ObjKey;
use crate::timestamps::now;

impl Registry {
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
        if def.builtin() == Some(Builtin::Crd) {
            // The CRD registry checks them itself, in storage's words.
            opts.preconditions.check(def, name, &existing)?;
        } else {
            opts.preconditions.check_before_delete(def, name, &existing)?;
        }
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
