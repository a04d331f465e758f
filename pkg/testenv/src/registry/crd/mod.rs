//! CustomResourceDefinitions: validation, the status the apiextensions controllers set,
//! serving (or no longer serving) their resources, and the finalizer that removes a
//! deleted CRD's objects.

mod serving;
mod validation;

use std::sync::Arc;

use serde_json::{Value, json};

use crate::errors::{ErrorStatus, FieldError};
use crate::object_meta::{has_finalizer, is_deleting};
use crate::store::{ObjKey, ResKey};
use crate::timestamps::now;

use super::Registry;
use super::options::DeleteOpts;
use super::resource::ResourceDef;

pub(crate) use validation::validate;

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

/// The entry of `spec.versions` marked `storage` (validation allows one).
pub(crate) fn storage_version(crd: &Value) -> Option<&Value> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
}

/// Sets the status the apiextensions controllers would: names accepted, established.
pub(crate) fn accept(crd: &mut Value) {
    let mut names = crd.pointer("/spec/names").cloned().unwrap_or_else(|| json!({}));
    let kind = s(crd, "/spec/names/kind").to_owned();
    if s(&names, "/singular").is_empty() {
        names["singular"] = json!(kind.to_lowercase());
    }
    if s(&names, "/listKind").is_empty() {
        names["listKind"] = json!(format!("{kind}List"));
    }
    let storage: Vec<Value> = storage_version(crd)
        .and_then(|v| v.get("name").cloned())
        .into_iter()
        .collect();
    let t = now();
    crd["status"] = json!({
        "acceptedNames": names,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": t,
             "reason": "NoConflicts", "message": "no conflicts found"},
            {"type": "Established", "status": "True", "lastTransitionTime": t,
             "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
        ],
        "storedVersions": storage,
    });
}

/// Adds the storage version to `status.storedVersions` when it is not
/// there, as kube-apiserver prepares a CRD's update: the versions objects
/// may be stored in grow until a migration trims them through `/status`.
pub(crate) fn record_storage_version(crd: &mut Value) {
    let Some(storage) = storage_version(crd).and_then(|v| v.get("name")).cloned() else {
        return;
    };
    let Some(status) = crd.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    let stored = status.entry("storedVersions").or_insert_with(|| json!([]));
    if let Some(stored) = stored.as_array_mut()
        && !stored.contains(&storage)
    {
        stored.push(storage);
    }
}

/// `status.storedVersions` of an updated CRD, as kube-apiserver checks it:
/// not empty, holding the storage version, and naming only versions of
/// `spec.versions` (so a version still stored cannot be dropped).
pub(crate) fn validate_stored_versions(crd: &Value, name: &str) -> Result<(), ErrorStatus> {
    let stored: Vec<&str> = crd
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let versions: Vec<&Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let path = "status.storedVersions";
    let mut errs = Vec::new();
    if stored.is_empty() {
        errs.push(FieldError::invalid(
            path,
            json!([]),
            "must have at least one stored version",
        ));
    }
    for v in &versions {
        let version = s(v, "/name");
        if !stored.is_empty()
            && v.get("storage").and_then(Value::as_bool) == Some(true)
            && !stored.contains(&version)
        {
            errs.push(FieldError::invalid(
                path,
                (*v).clone(),
                format!("must have the storage version {version}"),
            ));
        }
    }
    for (i, version) in stored.iter().enumerate() {
        if !versions.iter().any(|v| s(v, "/name") == *version) {
            errs.push(FieldError::invalid(
                format!("{path}[{i}]"),
                json!(version),
                "must appear in spec.versions",
            ));
        }
    }
    refused_unless_empty(name, errs)
}

/// kube-apiserver's 422 for the CRD `name`, with every cause, unless there
/// is none.
fn refused_unless_empty(name: &str, errs: Vec<FieldError>) -> Result<(), ErrorStatus> {
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ErrorStatus::invalid(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            name,
            errs,
        ))
    }
}

/// The finalizer with which kube-apiserver holds a deleted CRD until its instances are gone.
pub(crate) const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// apiextensions' `SetCRDCondition`: the transition time moves only when the status does.
/// Returns whether anything changed.
fn set_condition(crd: &mut Value, kind: &str, status: &str, reason: &str, message: &str) -> bool {
    let Some(top) = crd.as_object_mut() else {
        return false;
    };
    let block = top.entry("status").or_insert_with(|| json!({}));
    if !block.is_object() {
        *block = json!({});
    }
    let Some(block) = block.as_object_mut() else {
        return false;
    };
    let conds = block.entry("conditions").or_insert_with(|| json!([]));
    if !conds.is_array() {
        *conds = json!([]);
    }
    let Some(conds) = conds.as_array_mut() else {
        return false;
    };
    let wanted = |t: String| {
        json!({"type": kind, "status": status, "lastTransitionTime": t,
        "reason": reason, "message": message})
    };
    match conds
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
    {
        Some(c) => {
            let same_status = c.get("status").and_then(Value::as_str) == Some(status);
            let t = if same_status {
                c.get("lastTransitionTime")
                    .and_then(Value::as_str)
                    .map_or_else(now, str::to_owned)
            } else {
                now()
            };
            let new = wanted(t);
            if *c == new {
                return false;
            }
            *c = new;
        }
        None => conds.push(wanted(now())),
    }
    true
}

/// Whether a CRD is being torn down: kube-apiserver then refuses new instances.
pub(crate) fn is_terminating(crd: &Value) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Terminating")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

impl Registry {
    /// The first `DELETE` of a CRD, as the CRD registry answers it: only the deletion
    /// timestamp, the cleanup finalizer and a `Terminating` condition are written (no
    /// grace period, no new generation); the finalizer controller does the rest.
    pub(crate) fn mark_crd_deleted(
        &mut self,
        def: &ResourceDef,
        key: &ObjKey,
        existing: &Value,
        dry_run: bool,
    ) -> Value {
        let mut crd = existing.clone();
        if let Some(meta) = crd.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("deletionTimestamp".into(), json!(now()));
            let fins = meta.entry("finalizers").or_insert_with(|| json!([]));
            if let Some(list) = fins.as_array_mut()
                && !list.iter().any(|f| f == CLEANUP_FINALIZER)
            {
                list.push(json!(CLEANUP_FINALIZER));
            }
        }
        set_condition(
            &mut crd,
            "Terminating",
            "True",
            "InstanceDeletionPending",
            "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
        );
        if dry_run {
            return Self::present(def, &crd);
        }
        let stored = self.store.put(&def.key(), key.clone(), crd);
        Self::present(def, &stored)
    }

    /// apiextensions' CRD finalizer controller (part of kube-apiserver): deletes the
    /// instances of a deleted CRD, then removes the cleanup finalizer, which deletes the
    /// CRD and stops serving it. Instances held by their own finalizers keep it waiting.
    pub(crate) fn crd_finalizer_pass(&mut self) {
        let crd_res = ResKey::new("apiextensions.k8s.io", "customresourcedefinitions");
        let Some(crd_def) = self.resources.iter().find(|d| d.key() == crd_res).cloned() else {
            return;
        };
        let pending: Vec<(ObjKey, Arc<Value>)> = self
            .store
            .iter(&crd_res)
            .filter(|(_, v)| is_deleting(v) && has_finalizer(v, CLEANUP_FINALIZER))
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect();
        for (key, stored) in pending {
            let mut crd = (*stored).clone();
            if set_condition(
                &mut crd,
                "Terminating",
                "True",
                "InstanceDeletionInProgress",
                "CustomResource deletion is in progress",
            ) {
                self.store.put(&crd_res, key.clone(), crd.clone());
            }
            let res = ResKey::new(s(&crd, "/spec/group"), s(&crd, "/spec/names/plural"));
            let instance_def = self
                .resources
                .iter()
                .find(|d| d.is_custom() && d.key() == res)
                .cloned();
            if let Some(idef) = instance_def {
                let live: Vec<ObjKey> = self
                    .store
                    .iter(&res)
                    .filter(|(_, v)| !is_deleting(v))
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in live {
                    let _ = self.delete(&idef, &k.namespace, &k.name, &DeleteOpts::default());
                }
            }
            if self.store.iter(&res).next().is_some() {
                continue;
            }
            set_condition(
                &mut crd,
                "Terminating",
                "False",
                "InstanceDeletionCompleted",
                "removed all instances",
            );
            let mut remaining = Vec::new();
            if let Some(fins) = crd
                .pointer_mut("/metadata/finalizers")
                .and_then(Value::as_array_mut)
            {
                fins.retain(|f| f != CLEANUP_FINALIZER);
                remaining.clone_from(fins);
            }
            if remaining.is_empty() {
                // Emptying the finalizers of a deleted object deletes it as it was stored.
                self.remove(&crd_def, &key);
            } else {
                let stored = self.store.put(&crd_res, key, crd);
                self.sync_crd(&stored);
            }
        }
    }
}
